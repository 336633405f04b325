"""JSON and labels (Yes/No, …) from small local models, reliably.

The ladder, for every call:
1. constrained decoding where the backend has it: Ollama's and our llama.cpp adapters'
   ``format=<JSON schema>``;
2. repair of what came back (code fences, trailing prose, single quotes, trailing commas,
   truncated objects) with ``json_repair``, then validation against a pydantic model;
3. a bounded retry that tells the model what was wrong;
4. give up: log a warning, count it, return ``None`` (or the default label) — never raise
   inside an index build.

Works with LlamaIndex ``LLM`` objects and LangChain chat models alike. Counts go to
:data:`STATS` (process-wide) and to the ``stats`` object a caller passes.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

import json_repair
from langchain_core.language_models import BaseChatModel
from llama_index.core.llms.llm import LLM
from pydantic import BaseModel, ValidationError, create_model

__all__ = [
    "StructuredStats",
    "STATS",
    "parse_json",
    "parse_label",
    "generate_json",
    "agenerate_json",
    "generate_label",
    "agenerate_label",
    "supports_format",
]

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
AnyLLM = LLM | BaseChatModel


@dataclass
class StructuredStats:
    """Counts of structured calls and how each ended."""

    calls: int = 0
    """Structured requests made (one per generate_* call)."""
    first_try: int = 0
    """Valid straight away."""
    repaired: int = 0
    """Valid after repairing the text (fences, quotes, truncation …)."""
    retried: int = 0
    """Valid only after asking again."""
    failed: int = 0
    """Given up on: skipped with a warning (JSON) or given the default (labels)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, outcome: str) -> None:
        with self._lock:
            self.calls += 1
            setattr(self, outcome, getattr(self, outcome) + 1)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}


STATS = StructuredStats()
"""Process-wide counts of every structured call."""


def _record(outcome: str, stats: StructuredStats | None) -> None:
    STATS.add(outcome)
    if stats is not None and stats is not STATS:
        stats.add(outcome)


def supports_format(llm: AnyLLM) -> bool:
    """Whether the backend constrains decoding to a JSON schema given as ``format=``."""
    from langchain_ollama import ChatOllama
    from llama_index.llms.ollama import Ollama

    from multihop_rag.cache import CachedLLM
    from multihop_rag.llamacpp import LlamaCppChatModel, LlamaCppLLM

    if isinstance(llm, CachedLLM):
        return supports_format(llm.inner)
    return isinstance(llm, (Ollama, ChatOllama, LlamaCppLLM, LlamaCppChatModel))


def _kwargs(llm: AnyLLM, schema: dict[str, Any] | None) -> dict[str, Any]:
    return {"format": schema} if schema is not None and supports_format(llm) else {}


def _call(llm: AnyLLM, prompt: str, schema: dict[str, Any] | None) -> str:
    if isinstance(llm, BaseChatModel):
        return llm.invoke(prompt, **_kwargs(llm, schema)).text
    return llm.complete(prompt, **_kwargs(llm, schema)).text


async def _acall(llm: AnyLLM, prompt: str, schema: dict[str, Any] | None) -> str:
    if isinstance(llm, BaseChatModel):
        return (await llm.ainvoke(prompt, **_kwargs(llm, schema))).text
    return (await llm.acomplete(prompt, **_kwargs(llm, schema))).text


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)


def parse_json(text: str, schema: type[T]) -> tuple[T, bool]:
    """Validate ``text`` against ``schema``; returns (value, repaired). Raises ValueError if hopeless."""
    try:
        return schema.model_validate_json(text.strip()), False
    except ValidationError:
        pass
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON object or array in the answer")
    obj = json_repair.loads(candidate[start:])
    if obj in ("", None):
        raise ValueError("the answer could not be repaired into JSON")
    try:
        return schema.model_validate(obj), True
    except ValidationError as exc:
        raise ValueError(f"JSON does not match the schema: {exc.errors()[0]['msg']}") from None


def _retry_prompt(prompt: str, schema: dict[str, Any], error: str) -> str:
    return (
        f"{prompt}\n\nYour previous answer could not be used ({error}). "
        f"Reply with only a JSON value that matches this JSON schema:\n{json.dumps(schema)}"
    )


def _give_up(what: str, error: str, text: str, stats: StructuredStats | None) -> None:
    _record("failed", stats)
    log.warning("structured output: gave up on %s after retries (%s); answer began %r", what, error, text[:120])


def _json_dialogue(prompt: str, schema: type[T], retries: int, stats: StructuredStats | None, what: str):
    """The retry ladder as a generator: yields prompts to send, receives answers, returns the value."""
    json_schema = schema.model_json_schema()
    ask, error, text = prompt, "", ""
    for attempt in range(retries + 1):
        text = yield ask
        try:
            value, repaired = parse_json(text, schema)
        except ValueError as exc:
            error = str(exc)
            ask = _retry_prompt(prompt, json_schema, error)
            continue
        _record("retried" if attempt else "repaired" if repaired else "first_try", stats)
        return value
    _give_up(what, error, text, stats)
    return None


def generate_json(
    llm: AnyLLM,
    prompt: str,
    schema: type[T],
    *,
    retries: int = 2,
    stats: StructuredStats | None = None,
    what: str = "a JSON answer",
) -> T | None:
    """Ask ``llm`` for JSON matching ``schema``; ``None`` (counted, logged) if it never comes."""
    dialogue, json_schema = _json_dialogue(prompt, schema, retries, stats, what), schema.model_json_schema()
    ask = next(dialogue)
    while True:
        try:
            ask = dialogue.send(_call(llm, ask, json_schema))
        except StopIteration as done:
            return done.value


async def agenerate_json(
    llm: AnyLLM,
    prompt: str,
    schema: type[T],
    *,
    retries: int = 2,
    stats: StructuredStats | None = None,
    what: str = "a JSON answer",
) -> T | None:
    """Async :func:`generate_json`."""
    dialogue, json_schema = _json_dialogue(prompt, schema, retries, stats, what), schema.model_json_schema()
    ask = next(dialogue)
    while True:
        try:
            ask = dialogue.send(await _acall(llm, ask, json_schema))
        except StopIteration as done:
            return done.value


def parse_label(text: str, labels: Sequence[str]) -> str | None:
    """The label a free-text or JSON answer starts with (or first mentions), else None.

    ``{"answer": "Yes"}``, ``Yes.``, ``**No**, because…`` and ``The answer is yes`` all parse.
    """
    by_lower = {label.lower(): label for label in labels}
    pattern = re.compile(r"\b(" + "|".join(re.escape(label.lower()) for label in labels) + r")\b")
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            text = str(next(iter(obj.values()), ""))
    except (ValueError, TypeError):
        pass
    match = pattern.search(text.lower())
    return by_lower[match.group(1)] if match else None


def _label_schema(labels: Sequence[str]) -> dict[str, Any]:
    model = create_model("Label", answer=(Literal[tuple(labels)], ...))  # type: ignore[valid-type]
    return model.model_json_schema()


def generate_label(
    llm: AnyLLM,
    prompt: str,
    labels: Sequence[str] = ("Yes", "No"),
    *,
    default: str | None = None,
    stats: StructuredStats | None = None,
) -> str:
    """One of ``labels`` for ``prompt``; ``default`` (or the last label) when none can be read.

    Constrained to ``{"answer": <label>}`` where the backend allows it; free text is parsed.
    """
    text = _call(llm, prompt, _label_schema(labels))
    return _finish_label(text, labels, default, stats)


async def agenerate_label(
    llm: AnyLLM,
    prompt: str,
    labels: Sequence[str] = ("Yes", "No"),
    *,
    default: str | None = None,
    stats: StructuredStats | None = None,
) -> str:
    """Async :func:`generate_label`."""
    text = await _acall(llm, prompt, _label_schema(labels))
    return _finish_label(text, labels, default, stats)


def _finish_label(text: str, labels: Sequence[str], default: str | None, stats: StructuredStats | None) -> str:
    label = parse_label(text, labels)
    if label is not None:
        _record("first_try", stats)
        return label
    fallback = default if default is not None else labels[-1]
    _record("failed", stats)
    log.warning("structured output: no label of %s in %r; using %r", list(labels), text[:120], fallback)
    return fallback
