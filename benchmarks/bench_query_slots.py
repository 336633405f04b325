"""Seconds a question on a served model with one slot against several: the calls a method makes side by side.

ReSP writes a round's Global Evidence and Local Pathway summaries at once, K²RAG works on its sub-questions at once
(steps C-D), when the model serves several calls at once; HiRAG and naive RAG make one call after another. Each
method answers the tuning questions of ``--dataset`` (dev 101 on, a pool of their candidates) against a stand-in
OpenAI-compatible host (``integrations_tests.openai_stub.SlotServer``: a fixed delay per request, extractive
replies) with 1 slot and with ``--slots``, with the real MiniLM embedder (``st:default``). The stand-in's replies
are not answers, so ReSP runs its three rounds (``min_iterations=3``: the judge is not asked before, as in a run it
sends to round 3); the seconds are the calls a question waits for in turn, times the delay, plus the CPU work
between them. Each index is built once, on one slot.

    .venv/bin/python benchmarks/bench_query_slots.py [--dataset 2wikimultihopqa] [--questions 5] [--slots 4]
        [--delay 1.0] [--methods naive,resp,hirag,k2rag]
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
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from integrations_tests.openai_stub import SlotServer  # noqa: E402
from multihop_rag.app import registry  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.method import Models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="2wikimultihopqa")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--methods", default="naive,resp,hirag,k2rag")
    args = parser.parse_args()
    passages, questions = load_pooled(args.dataset, args.questions, start=100)
    rows = [f"# bench_query_slots: {args.dataset} dev 101–{100 + args.questions} ({len(passages)} passages pooled), "
            f"stand-in host at {args.delay} s a call, st:default; {platform.machine()}, {os.cpu_count()} cores\n",
            "| method | slots | s / question | calls / question | vs 1 slot |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.methods.split(","):
            method = registry.get(name)
            config = method.config_class()
            if name == "resp":
                config = config.model_copy(update={"min_iterations": config.max_iterations})
            folder, one_slot = Path(tmp) / name, None
            for slots in (1, args.slots):
                with SlotServer(slots=slots, delay=args.delay) as server:
                    models = Models.from_specs(f"openai:stand-in@{server.url}", "st:default")
                    index = (method.load(folder, models, config) if folder.exists()
                             else method.build(passages, models, folder, config))
                    calls, started = models.usage().calls, time.perf_counter()
                    for q in questions:
                        index.answer(q.question)
                    seconds = (time.perf_counter() - started) / len(questions)
                    per_question = (models.usage().calls - calls) / len(questions)
                rows.append(f"| {name} | {slots} | {seconds:.1f} | {per_question:.1f} | "
                            f"{'–' if one_slot is None else f'{seconds / one_slot:.2f}×'} |")
                print(rows[-1], flush=True)
                one_slot = seconds
    print("\n".join(rows))


if __name__ == "__main__":
    main()
