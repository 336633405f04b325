"""How close ``multihop-rag index --estimate`` comes to the real build (issue 26: target ±30 %), for
SiReRAG, K²RAG and GARLIC on two sizes of pooled HotpotQA dev passages.

By default the LLM is a stand-in OpenAI-compatible server (``integrations_tests.openai_stub``:
extractive replies, no delay): that checks the structural part — calls and prompt tokens — in minutes.
Generated tokens and time depend on the model's replies and speed: ``--llm llamacpp:qwen2.5-coder-0.5b``
builds on a real model and compares those too (the estimate's time uses the speed measured once per
model, as the command line does), and reports two figures of issue 24: the share of the build's wall
time with an LLM call in flight (for GARLIC also with its attention model's forward passes, the other
model time of its build), and how close the calls ran to the model's measured single-call speed
(the calibration's time for the build's real tokens over the time the calls took).

    .venv/bin/python benchmarks/bench_estimate.py [--sizes 30,100] [--methods sirerag,k2rag,garlic] [--llm SPEC]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from integrations_tests.openai_stub import SlotServer  # noqa: E402
from llama_index_garlic.method import GarlicSettings, attention_for  # noqa: E402
from multihop_rag.app import registry  # noqa: E402
from multihop_rag.app.speed import measure_speed  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.method import Models  # noqa: E402


def ratio(estimated: float, real: float) -> str:
    return f"{estimated:.0f} / {real:.0f} ({(estimated - real) / real:+.0%})" if real else f"{estimated:.0f} / 0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30,100", help="numbers of pooled passages")
    parser.add_argument("--methods", default="sirerag,k2rag,garlic")
    parser.add_argument("--llm", help="a model spec instead of the stand-in server")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    passages, _ = load_pooled("hotpotqa", n_questions=max(10, max(sizes) // 8))
    with tempfile.TemporaryDirectory() as tmp, SlotServer(slots=4, delay=0.0) as server:
        spec = args.llm or f"openai:stand-in@{server.url}"
        models = Models.from_specs(spec, "st:default")
        speed = measure_speed(models.llm.inner, spec) if args.llm else None
        print(f"# bench_estimate: pooled HotpotQA dev passages, LLM {spec}, embeddings st:default; "
              f"{platform.machine()}, {os.cpu_count()} cores\n")
        print("| method | passages | calls est. / real | prompt tokens est. / real | generated tokens est. / real "
              "| seconds est. / real | LLM busy share | of calibrated speed |\n|---|---|---|---|---|---|---|---|")
        for name in args.methods.split(","):
            method = registry.get(name)
            config = method.config_class()
            if name == "garlic" and args.llm:  # loaded once per process, outside the estimate (its note says so)
                attention_for(GarlicSettings(), spec)
            for size in sizes:
                corpus = passages[:size]
                estimate = method.estimate(corpus, models, config)  # type: ignore[attr-defined]
                before, started = models.llm.usage, time.perf_counter()
                index = method.build(corpus, models, Path(tmp) / f"{name}-{size}", config)
                seconds, spent = time.perf_counter() - started, models.llm.usage - before
                attention = index.stats().get("attention_seconds", 0.0)  # GARLIC's edges: model time outside calls
                # The stand-in's replies and token counts are not a model's: only calls compare there.
                real = [ratio(estimate.prompt_tokens, spent.prompt_tokens),
                        ratio(estimate.completion_tokens, spent.completion_tokens),
                        ratio(estimate.seconds(speed), seconds),
                        f"{spent.busy_seconds / seconds:.0%}"
                        + (f" ({(spent.busy_seconds + attention) / seconds:.0%} with its attention passes)" if attention else ""),
                        f"{speed.seconds(spent.prompt_tokens, spent.completion_tokens, spent.calls) / spent.busy_seconds:.0%}",
                        ] if speed else ["(stand-in)"] * 5
                print(f"| {name} | {size} | {ratio(estimate.calls, spent.calls)} | {' | '.join(real)} |", flush=True)


if __name__ == "__main__":
    main()
