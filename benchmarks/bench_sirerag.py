"""SiReRAG vs RAPTOR (``relatedness=False``) vs plain chunks, as in SiReRAG Tables 3, 4 and 7.

Builds both indexes over the pooled candidates of the first ``--pool`` dev questions (or the
smoke corpus with ``--split smoke``), answers the first ``--limit`` questions, and prints:
build time by stage, LLM calls and tokens, Table 3's statistics, pool size by tree and level,
answer recall@k (does a retrieved node contain a gold answer), EM/F1 with 95% bootstrap
intervals, time per query (TPQ) and TPER (eq. 1, SiReRAG = A, RAPTOR = B).

    python benchmarks/bench_sirerag.py --dataset musique --split smoke --limit 10 --llm llamacpp:qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_embedding, llama_index_llm, resolve_llm_spec  # noqa: E402
from multihop_rag.corpus import load_dataset, load_pooled  # noqa: E402
from multihop_rag.metrics import answer_recall_at_k, exact_match, f1_score, format_ci  # noqa: E402


def evaluate(name: str, index: SiReRAGIndex, questions, k: int, kind: str | None = None) -> dict:
    engine = index.as_query_engine(similarity_top_k=k, kind=kind)
    rows = {"em": [], "f1": [], "recall5": [], "recall10": [], "recall20": [], "seconds": []}
    for q in questions:
        started = time.perf_counter()
        response = engine.query(q.question)
        rows["seconds"].append(time.perf_counter() - started)
        texts = [n.node.get_content() for n in response.source_nodes]
        answer = str(response).strip()
        rows["em"].append(exact_match(answer, q.answers))
        rows["f1"].append(f1_score(answer, q.answers))
        for cut in (5, 10, 20):
            rows[f"recall{cut}"].append(answer_recall_at_k(texts, q.answers, cut))
        print(f"  {name} {q.id}: gold={q.answers[0]!r} answer={answer!r}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--split", default="dev", choices=("smoke", "dev"))
    parser.add_argument("--pool", type=int, default=30, help="dev questions whose candidates form the corpus")
    parser.add_argument("--limit", type=int, default=10, help="questions answered")
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--top-k", type=int, default=20)
    args = parser.parse_args()
    if args.split == "smoke":
        passages, questions = load_dataset(args.dataset, "smoke")
    else:
        passages, questions = load_pooled(args.dataset, args.pool)
    questions = questions[: args.limit]
    docs = [p.to_llama_index() for p in passages]
    llm, embed = llama_index_llm(args.llm), llama_index_embedding(args.embed)

    built, results = {}, {}
    for name, config in (("RAPTOR", SiReRAGConfig(relatedness=False)), ("SiReRAG", SiReRAGConfig())):
        started = time.perf_counter()
        built[name] = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=embed, config=config)
        print(f"{name} built in {time.perf_counter() - started:.0f} s: {json.dumps(built[name].stats())}", flush=True)
    results["plain chunks"] = evaluate("chunks", built["RAPTOR"], questions, args.top_k, kind="chunk")
    for name in ("RAPTOR", "SiReRAG"):
        results[name] = evaluate(name, built[name], questions, args.top_k)

    tpq = {n: sum(r["seconds"]) / len(r["seconds"]) for n, r in results.items()}
    pool = {n: built[n].stats()["pool_size"] for n in built}
    tper = (tpq["SiReRAG"] / tpq["RAPTOR"]) / (pool["SiReRAG"] / pool["RAPTOR"])
    print(f"\nllm={resolve_llm_spec(args.llm)}, embed={args.embed}, {args.dataset} {args.split} "
          f"({len(docs)} passages, {len(questions)} questions), top-k={args.top_k}, seed=224; "
          f"{platform.machine()}, {os.cpu_count()} cores, peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB\n")
    print("| index | build s (by stage) | LLM calls | prompt / completion tokens | pool (by tree: level:kind) |")
    print("|---|---|---|---|---|")
    for name, index in built.items():
        s = index.stats()
        print(f"| {name} | {s['seconds']} | {s['llm']['calls']} | {s['llm']['prompt_tokens']} / "
              f"{s['llm']['completion_tokens']} | {s['pool']} |")
    s = built["SiReRAG"].stats()
    print(f"\nTable 3 (SiReRAG): chunks {s['chunks']}, propositions {s['propositions']} "
          f"(+{s['propositions_without_entities']} without entities, dropped), entities {s['entities']}, "
          f"aggregates {s['aggregates']}, propositions per entity {s['propositions_per_entity']}, "
          f"skipped chunks {s['skipped_chunks']}, failed summaries {s['failed_summaries']}\n")
    print("| method | EM [95% CI] | F1 [95% CI] | answer recall@5 | @10 | @20 | TPQ s | TPER |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        n = len(r["em"])
        print(f"| {name} | {format_ci(r['em'])} | {format_ci(r['f1'])} | {sum(r['recall5']) / n:.2f} | {sum(r['recall10']) / n:.2f} | "
              f"{sum(r['recall20']) / n:.2f} | {tpq[name]:.1f} | {f'{tper:.3f}' if name == 'SiReRAG' else '–'} |")


if __name__ == "__main__":
    main()
