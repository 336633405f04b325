"""Do HiRAG and ReSP run their control flow on a small model? Per dataset: HiRAG's retrieval attempts
per question, questions with at least one, answers copied from a prompt example, stop reasons and
F1; ReSP's distinct sub-questions retrieved per question, re-plans, stop reasons and F1.

Each question's own candidate passages are its corpus (the smoke split). Prints markdown tables.

    python benchmarks/bench_control_flow.py --datasets 2wikimultihopqa hotpotqa --llm llamacpp:qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langchain_resp import build_resp_graph  # noqa: E402
from langgraph_hirag import HierarchicalCorpus, build_hirag_graph  # noqa: E402
from multihop_rag.backends import chat_model, langchain_embeddings  # noqa: E402
from multihop_rag.corpus import load_dataset  # noqa: E402
from multihop_rag.metrics import f1_score  # noqa: E402
from multihop_rag.stores import langchain_chroma  # noqa: E402


def hirag_row(state: dict) -> dict:
    trace = state.get("trace", [])
    attempts = sum(len(t["attempts"]) + (t["source"] == "rewrite") for t in trace)
    return {"attempts": attempts, "stop": state.get("stop_reason"), "copied": len(state.get("copied_examples", [])),
            "first_question": state.get("first_question"), "answer": state["answer"]}


def resp_row(state: dict) -> dict:
    return {"distinct": 1 + len(state.get("sub_questions", [])), "stop": state.get("stop_reason"),
            "replans": state.get("replans", 0), "answer": state["answer"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "hotpotqa"])
    parser.add_argument("--llm", default="llamacpp:qwen2.5-coder-0.5b")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--out", help="write the per-question rows to this JSON file")
    args = parser.parse_args()
    llm, embeddings = chat_model(args.llm), langchain_embeddings(args.embed)
    rows: dict[str, list[dict]] = {}
    print(f"model {args.llm}, embeddings {args.embed}; {platform.machine()}, {os.cpu_count()} cores\n")
    for dataset in args.datasets:
        passages, questions = load_dataset(dataset, "smoke")
        corpus = HierarchicalCorpus.from_documents(passages, embeddings, show_progress=False)
        store = langchain_chroma(None, f"resp-{dataset}", embeddings)
        store.add_documents([p.to_langchain() for p in passages], ids=[p.id for p in passages])
        hirag, resp = build_hirag_graph(llm, corpus), build_resp_graph(llm, store.as_retriever(search_kwargs={"k": 5}))
        rows[dataset] = []
        for q in questions:
            started = time.perf_counter()
            h = hirag_row(hirag.invoke({"question": q.question})) | {"seconds": time.perf_counter() - started}
            started = time.perf_counter()
            r = resp_row(resp.invoke({"question": q.question})) | {"seconds": time.perf_counter() - started}
            h["f1"], r["f1"] = f1_score(h["answer"], q.answers), f1_score(r["answer"], q.answers)
            rows[dataset].append({"id": q.id, "type": q.type, "gold": q.answers[0], "hirag": h, "resp": r})
    print("| dataset | n | HiRAG attempts / q | q with ≥1 attempt | copied answers | HiRAG stops | HiRAG F1 | ReSP distinct sub-questions / q | ReSP re-plans | ReSP stops | ReSP F1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for dataset, rs in rows.items():
        n = len(rs)
        h, r = [x["hirag"] for x in rs], [x["resp"] for x in rs]
        print(
            f"| {dataset} | {n} | {sum(x['attempts'] for x in h) / n:.1f} | {sum(x['attempts'] > 0 for x in h)} | "
            f"{sum(x['copied'] for x in h)} | {dict(Counter(x['stop'] for x in h))} | {sum(x['f1'] for x in h) / n:.3f} | "
            f"{sum(x['distinct'] for x in r) / n:.2f} | {sum(x['replans'] for x in r)} | "
            f"{dict(Counter(x['stop'] for x in r))} | {sum(x['f1'] for x in r) / n:.3f} |"
        )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
