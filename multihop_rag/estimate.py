"""What a build will cost before it runs (``multihop-rag index --estimate``).

A method counts its build's LLM calls and prompt tokens from the corpus and its own structure (the
same chunking, the same prompts) and predicts the generated tokens from reply lengths measured on
real builds (each method's ``estimate`` module says which). Time comes from a short measured
calibration of the model — prompt tokens per second and generated tokens per second — kept per
model identity in ``speed.json`` of :func:`multihop_rag.serving.bundled.cache_dir`, so it is measured once per model and
machine. A stage may also run tokens through a local attention model without an LLM call (GARLIC's
edges); those are timed at ``ATTENTION_SPEED_SHARE`` of the measured prompt speed. How close the
estimates come is measured in ``benchmarks/bench_estimate.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ATTENTION_SPEED_SHARE",
    "StageEstimate",
    "BuildEstimate",
    "Speed",
    "summary_levels",
]

ATTENTION_SPEED_SHARE = 0.35
"""A forward pass of the attention model (transformers, float32, eager attention) against llama.cpp's
prompt speed on the same weights: 0.5B on 2 cores, ~46 against 132 tokens/s (bench_estimate)."""

@dataclass
class StageEstimate:
    """One build stage: calls, prompt tokens and generated tokens."""

    name: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    attention_tokens: int = 0
    """Tokens run through a local attention model, no LLM call (GARLIC's edges)."""


@dataclass
class Speed:
    """A model's measured speed on this machine."""

    model: str
    prompt_tps: float
    generate_tps: float
    call_seconds: float = 0.0
    """Fixed cost per call (request, sampling setup), measured with a one-token reply."""

    def seconds(self, prompt_tokens: int, completion_tokens: int, calls: int, attention_tokens: int = 0) -> float:
        return (prompt_tokens / self.prompt_tps + completion_tokens / self.generate_tps + calls * self.call_seconds
                + attention_tokens / (self.prompt_tps * ATTENTION_SPEED_SHARE))

    def stage_seconds(self, stage: StageEstimate) -> float:
        return self.seconds(stage.prompt_tokens, stage.completion_tokens, stage.calls, stage.attention_tokens)


@dataclass
class BuildEstimate:
    """A build's predicted cost, by stage."""

    method: str
    documents: int
    corpus_tokens: int
    stages: list[StageEstimate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.stages)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.stages)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.stages)

    def seconds(self, speed: Speed) -> float:
        """Wall time with one call at a time at ``speed`` (several slots of a server divide the decode part)."""
        return sum(speed.stage_seconds(s) for s in self.stages)

    def table(self, speed: Speed | None) -> str:
        """A markdown table of the stages and the total."""
        lines = ["| stage | LLM calls | prompt tokens | generated tokens | time |", "|---|---|---|---|---|"]
        total = StageEstimate("total", self.calls, self.prompt_tokens, self.completion_tokens,
                              sum(s.attention_tokens for s in self.stages))
        for s in [*self.stages, total]:
            seconds = speed.stage_seconds(s) if speed else None
            lines.append(f"| {s.name} | {s.calls} | {s.prompt_tokens} | {s.completion_tokens} | {_duration(seconds)} |")
        return "\n".join(lines)

    def as_dict(self, speed: Speed | None = None) -> dict[str, Any]:
        out = asdict(self) | {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                              "completion_tokens": self.completion_tokens}
        if speed is not None:
            out |= {"seconds": round(self.seconds(speed), 1), "speed": asdict(speed)}
        return out


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def summary_levels(node_tokens: Sequence[int], *, fan_in: float, reply_tokens: int, depth: int, template_tokens: int,
                   overlap: float = 1.0) -> StageEstimate:
    """Calls and tokens of a recursive summary tree: each level's nodes summarized in groups of about
    ``fan_in`` (the prompt holds the group's text plus the template, ``overlap`` times for soft
    clustering), the summaries forming the next level, for at most ``depth`` levels or until one node."""
    calls = prompt = completion = 0
    level = list(node_tokens)
    for _ in range(depth):
        if len(level) <= 1:
            break
        groups = max(1, math.ceil(len(level) / fan_in))
        calls += groups
        prompt += int(sum(level) * overlap) + groups * template_tokens
        completion += groups * reply_tokens
        level = [reply_tokens] * groups
    return StageEstimate("summaries", calls, prompt, completion)
