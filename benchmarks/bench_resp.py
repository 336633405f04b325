"""ReSP vs standard single-round RAG on the same retriever and model (ReSP paper §5.4).

Retrieval runs over the pooled corpus of the first ``--pool`` dev questions (DESIGN.md); the first
``--limit`` of those questions are answered. Prints a markdown table: EM and F1 with 95%
bootstrap intervals, average iterations (paper: 1.24 HotpotQA / 1.60 2Wiki), compression ratio of
retrieved words to evidence words (paper: 5.88), seconds and LLM calls per question.

    python benchmarks/bench_resp.py --datasets hotpotqa 2wikimultihopqa --limit 10 --llm llamacpp:default
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402

from langchain_resp import build_resp_graph, combined_memory  # noqa: E402
from multihop_rag.backends import chat_model, langchain_embeddings, resolve_llm_spec  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.metrics import exact_match, f1_score, format_ci  # noqa: E402
from multihop_rag.stores import langchain_chroma, lc_stored_ids  # noqa: E402

# FlashRAG's standard-RAG prompt, the "Standard RAG" baseline of ReSP Table 2.
STANDARD_RAG = (
    "Answer the question based on the given document. Only give me the answer and do not output any other words.\n"
    "The following are given documents.\n\n{reference}\n\nQuestion: {question}"
)


class CallCounter(BaseCallbackHandler):
    """Counts chat-model calls."""

    def __init__(self) -> None:
        self.calls = 0

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


def bench(dataset: str, llm, embeddings, pool: int, limit: int, folder: str) -> list[str]:
    passages, questions = load_pooled(dataset, pool)
    store = langchain_chroma(folder, dataset, embeddings)
    if not lc_stored_ids(store):
        store.add_documents([p.to_langchain() for p in passages], ids=[p.id for p in passages])
    retriever = store.as_retriever(search_kwargs={"k": 5})
    graph = build_resp_graph(llm, retriever)
    rows: dict[str, dict[str, list[float]]] = {"standard RAG": {}, "ReSP": {}}
    for q in questions[:limit]:
        counter = CallCounter()
        started = time.perf_counter()
        docs = retriever.invoke(q.question)
        reference = "\n".join(f"Doc {i}(Title: {d.metadata.get('title')}) {d.page_content}" for i, d in enumerate(docs, 1))
        answer = llm.invoke(STANDARD_RAG.format(reference=reference, question=q.question), config={"callbacks": [counter]}).text
        seconds = time.perf_counter() - started
        for key, value in (("em", exact_match(answer, q.answers)), ("f1", f1_score(answer, q.answers)),
                           ("seconds", seconds), ("calls", counter.calls)):
            rows["standard RAG"].setdefault(key, []).append(value)

        counter = CallCounter()
        started = time.perf_counter()
        state = graph.invoke({"question": q.question}, config={"callbacks": [counter]})
        seconds = time.perf_counter() - started
        evidence = combined_memory(state["global_memory"], state.get("local_memory", []))
        for key, value in (("em", exact_match(state["answer"], q.answers)), ("f1", f1_score(state["answer"], q.answers)),
                           ("seconds", seconds), ("calls", counter.calls), ("iterations", state["iterations"]),
                           ("retrieved_words", state["retrieved_words"]), ("evidence_words", len(evidence.split()))):
            rows["ReSP"].setdefault(key, []).append(value)
        print(f"  {dataset} {q.id}: gold={q.answers[0]!r} resp={state['answer']!r} "
              f"iters={state['iterations']} ({state['stop_reason']})", flush=True)
    out = []
    for method, m in rows.items():
        n = len(m["f1"])
        iters = f"{sum(m['iterations']) / n:.2f}" if "iterations" in m else "1"
        ratio = f"{sum(m['retrieved_words']) / max(1, sum(m['evidence_words'])):.2f}" if "retrieved_words" in m else "–"
        out.append(f"| {dataset} | {method} | {n} | {format_ci(m['em'])} | {format_ci(m['f1'])} | {iters} | {ratio} | "
                   f"{sum(m['seconds']) / n:.1f} | {sum(m['calls']) / n:.1f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["hotpotqa", "2wikimultihopqa"])
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--pool", type=int, default=30, help="dev questions whose candidates form the corpus")
    parser.add_argument("--limit", type=int, default=10, help="questions answered per dataset")
    args = parser.parse_args()
    llm = chat_model(args.llm, max_tokens=200)  # §5.2: maximum output length 200
    embeddings = langchain_embeddings(args.embed)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for dataset in args.datasets:
            rows += bench(dataset, llm, embeddings, args.pool, args.limit, folder)
    print(f"\nllm={resolve_llm_spec(args.llm)}, embed={args.embed}, top-k=5, max_iterations=3, "
          f"pooled corpus of {args.pool} dev questions, first {args.limit} answered; "
          f"{platform.machine()}, {os.cpu_count()} cores\n")
    print("| dataset | method | n | EM [95% CI] | F1 [95% CI] | avg iterations | retrieved/evidence words | s/question | LLM calls/question |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
