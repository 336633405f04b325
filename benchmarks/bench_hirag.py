"""HiRAG vs direct answering and dense top-5 RAG on the same corpus, model and embeddings (Table 2's
metrics), Table 4's ablations, and HiRAG's Retriever+Filter as a plug-in (§6.5, Table 6).

The corpus is the pool of candidate passages of the first ``--pool`` dev questions (DESIGN.md); the
first ``--limit`` questions are answered. Prints markdown tables: EM, F1, precision and recall
(EM and F1 with 95% bootstrap intervals), seconds and LLM calls per question, sub-questions per
question; how HiRAG's sub-questions were answered (retrieval / internal knowledge / rewrite / gave
up) and attempts per sub-question; with ``--ablations`` the rows "w/o chunk rethink" (th2=1: every
failure moves to the next document), "w/o document rethink" (th2=th3: never leaves the first
document) and "w/o profile" (the Filter sees the chunk alone); for the plug-in, whether the one
returned document contains the gold object (vs dense top-1).

    python benchmarks/bench_hirag.py --dataset 2wikimultihopqa --limit 10 --llm llamacpp:default
    python benchmarks/bench_hirag.py --dataset hotpotqa --limit 5 --ablations
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langgraph_hirag import HierarchicalCorpus, HiRAGRetriever, build_hirag_graph  # noqa: E402
from multihop_rag.backends import chat_model, langchain_embeddings, resolve_llm_spec  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.metrics import exact_match, format_ci, precision_recall_f1  # noqa: E402
from multihop_rag.short_answer import short_answer_prompt  # noqa: E402

DIRECT_PROMPT = "Answer the question in as few words as possible.\nQuestion: {question}\nAnswer:"
"""Direct answering (Table 2's "Direct" row): the model's own knowledge, no retrieval."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="2wikimultihopqa")
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--pool", type=int, default=30, help="dev questions whose candidates form the corpus")
    parser.add_argument("--limit", type=int, default=10, help="questions answered")
    parser.add_argument("--plugin", type=int, default=10, help="gold single-hop questions for the plug-in test")
    parser.add_argument("--ablations", action="store_true", help="also run Table 4's ablations")
    args = parser.parse_args()
    llm = chat_model(args.llm, max_tokens=256)
    passages, questions = load_pooled(args.dataset, args.pool)
    started = time.perf_counter()
    corpus = HierarchicalCorpus.from_documents(passages, langchain_embeddings(args.embed))
    build_seconds = time.perf_counter() - started
    graphs = {"HiRAG": build_hirag_graph(llm, corpus)}
    if args.ablations:
        graphs["HiRAG w/o chunk rethink"] = build_hirag_graph(llm, corpus, th2=1)
        graphs["HiRAG w/o document rethink"] = build_hirag_graph(llm, corpus, th2=4, th3=4)
        graphs["HiRAG w/o profile"] = build_hirag_graph(llm, corpus, use_profiles=False)

    rows: dict[str, dict[str, list[float]]] = {"direct": {}, "dense top-5 RAG": {}, **{name: {} for name in graphs}}
    sources: Counter[str] = Counter()
    attempts: list[int] = []

    def record(method: str, answer: str, gold: list[str], seconds: float, calls: int, subq: int) -> None:
        precision, recall, f1 = precision_recall_f1(answer, gold)
        for key, value in (("em", exact_match(answer, gold)), ("f1", f1), ("precision", precision),
                           ("recall", recall), ("seconds", seconds), ("calls", calls), ("subq", subq)):
            rows[method].setdefault(key, []).append(value)

    for q in questions[: args.limit]:
        started = time.perf_counter()
        direct = llm.invoke(DIRECT_PROMPT.format(question=q.question), stop=["\n"]).text.strip()
        record("direct", direct, q.answers, time.perf_counter() - started, 1, 0)
        started = time.perf_counter()
        context = "\n\n".join(d.page_content for d in corpus.search(q.question, 5))
        answer = llm.invoke(short_answer_prompt(q.question, docs=context)).text.strip()
        record("dense top-5 RAG", answer, q.answers, time.perf_counter() - started, 1, 0)
        line = f"  {q.id}: gold={q.answers[0]!r} direct={direct[:40]!r} dense={answer[:40]!r}"
        for name, graph in graphs.items():
            started = time.perf_counter()
            state = graph.invoke({"question": q.question})
            seconds = time.perf_counter() - started
            record(name, state["answer"], q.answers, seconds, state["llm_calls"], len(state["sub_questions"]))
            if name == "HiRAG":
                sources.update(t["source"] for t in state["trace"])
                attempts.extend(len(t["attempts"]) for t in state["trace"] if t["attempts"])
            line += f" | {name}={state['answer'][:40]!r} ({len(state['sub_questions'])} sub-q, {seconds:.0f}s)"
        print(line, flush=True)

    plugin = HiRAGRetriever(llm=llm, corpus=corpus)
    hits: dict[str, list[float]] = {"dense top-1": [], "HiRAG Retriever+Filter": []}
    singles = [(s, r, o) for q in questions for s, r, o in q.meta.get("evidences", [])][: args.plugin]
    for subject, relation, obj in singles:
        query = f"What is the {relation} of {subject}?"
        dense = corpus.search(query, 1)
        hits["dense top-1"].append(float(bool(dense) and obj.lower() in dense[0].page_content.lower()))
        docs = plugin.invoke(query)
        hits["HiRAG Retriever+Filter"].append(float(bool(docs) and obj.lower() in docs[0].page_content.lower()))

    print(f"\nllm={resolve_llm_spec(args.llm)}, embed={args.embed}, dataset={args.dataset}, pooled corpus of "
          f"{args.pool} dev questions ({len(passages)} passages, {len(corpus)} titled documents, built in "
          f"{build_seconds:.0f} s), first {args.limit} answered; HiRAG defaults (th1=1, th2=3, th3=4, m=5, seed=0); "
          f"{platform.machine()}, {os.cpu_count()} cores\n")
    print("| method | n | EM [95% CI] | F1 [95% CI] | precision | recall | s/question | LLM calls/question | sub-questions/question |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method, m in rows.items():
        n = len(m["f1"])
        print(f"| {method} | {n} | {format_ci(m['em'])} | {format_ci(m['f1'])} | {sum(m['precision']) / n:.3f} | "
              f"{sum(m['recall']) / n:.3f} | {sum(m['seconds']) / n:.1f} | {sum(m['calls']) / n:.1f} | "
              f"{sum(m['subq']) / n:.1f} |")
    total = sum(sources.values()) or 1
    print("\nSub-questions answered by: " + ", ".join(f"{k} {v} ({v / total:.0%})" for k, v in sources.most_common())
          + f"; retrieval attempts per retrieved sub-question: {sum(attempts) / max(1, len(attempts)):.2f}")
    print(f"\nPlug-in (§6.5) on {len(singles)} gold single-hop questions from evidence triples "
          "(returned document contains the gold object):\n")
    print("| retriever | answer in returned document |\n|---|---|")
    for name, values in hits.items():
        print(f"| {name} | {format_ci(values)} |")


if __name__ == "__main__":
    main()
