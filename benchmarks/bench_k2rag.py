"""K²RAG vs the four naive pipelines of §3.2 (semantic, keyword, hybrid, KG), §3.3's protocol.

The corpus is the pool of candidate passages of the first ``--pool`` dev questions (DESIGN.md).
K²RAG indexes the summarized corpus, the naive pipelines the unsummarized one (§3.2.1). Prints:
store build times with and without summarization (paper Table 1: 89-97% less); per pipeline the
answer-gold embedding cosine (eq. 6: Q1, mean, Q3; paper Table 2), EM and F1 with 95% bootstrap
intervals, seconds per query (paper Table 3); and the peak RSS of the process.

    python benchmarks/bench_k2rag.py --dataset hotpotqa --pool 10 --limit 10 --llm llamacpp:default
    python benchmarks/bench_k2rag.py --kg graphrag --pool 1 --limit 1   # the paper's GraphRAG KG
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402

from llama_index_k2rag import PIPELINES, K2RAGConfig, K2RAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_embedding, llama_index_llm, resolve_llm_spec  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.metrics import cosine_score, exact_match, f1_score, format_ci  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--pool", type=int, default=10, help="dev questions whose candidates form the corpus")
    parser.add_argument("--limit", type=int, default=10, help="questions answered")
    parser.add_argument("--kg", choices=("property", "graphrag"), default="property", help="knowledge-graph backend")
    parser.add_argument(
        "--min-summary-tokens", type=int, default=0, help="documents shorter than this are not summarized (paper: all are)"
    )
    args = parser.parse_args()
    llm = llama_index_llm(args.llm, max_tokens=256)
    embed = llama_index_embedding(args.embed)
    passages, questions = load_pooled(args.dataset, args.pool)
    docs = [p.to_llama_index() for p in passages]
    config = K2RAGConfig(min_summary_tokens=args.min_summary_tokens)
    workdir = Path(tempfile.mkdtemp(prefix="bench-k2rag-"))

    def fresh() -> dict[str, Path] | None:
        """GraphRAG in a new folder: build times without its cache."""
        return {"root": Path(tempfile.mkdtemp(dir=workdir))} if args.kg == "graphrag" else None

    started = time.perf_counter()
    k2 = K2RAGIndex.from_documents(
        docs, llm=llm, embed_model=embed, summarizer="llm", kg=args.kg, config=config, kg_options=fresh()
    )
    k2_seconds = time.perf_counter() - started
    started = time.perf_counter()
    naive = K2RAGIndex.from_documents(
        docs, llm=llm, embed_model=embed, summarizer="none", kg=args.kg, config=config, kg_options=fresh()
    )
    naive_seconds = time.perf_counter() - started

    scores: dict[str, dict[str, list[float]]] = {p: {} for p in PIPELINES}
    for q in questions[: args.limit]:
        gold_vec = embed.get_text_embedding(q.answers[0])
        for pipeline in PIPELINES:
            engine = (k2 if pipeline == "k2rag" else naive).as_query_engine(pipeline)
            started = time.perf_counter()
            answer = str(engine.query(q.question)).strip()
            seconds = time.perf_counter() - started
            cos = cosine_score(embed.get_text_embedding(answer or "-"), gold_vec)
            for key, value in (("cos", cos), ("em", exact_match(answer, q.answers)),
                               ("f1", f1_score(answer, q.answers)), ("seconds", seconds)):
                scores[pipeline].setdefault(key, []).append(value)
        print(f"  {q.id}: gold={q.answers[0]!r} k2rag={answer!r}", flush=True)

    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    print(f"\nllm={resolve_llm_spec(args.llm)}, embed={args.embed}, kg={args.kg}, dataset={args.dataset}, pooled corpus of "
          f"{args.pool} dev questions ({len(docs)} passages), first {args.limit} answered; "
          f"{platform.machine()}, {os.cpu_count()} cores; peak RSS {rss_gb:.1f} GB\n")
    s, n = k2.stats(), naive.stats()
    print(f"Corpus summarization: {s['seconds']['summarize']:.0f} s, {s['tokens_before']} -> {s['tokens_after']} tokens "
          f"({s['reduction']:.0%} less). Whole build: summarized {k2_seconds:.0f} s, unsummarized {naive_seconds:.0f} s.\n")
    print("| store | unsummarized s | summarized s | change |\n|---|---|---|---|")
    for store in ("dense", "sparse", "kg"):
        a, b = n["seconds"][store], s["seconds"][store]
        print(f"| {store} | {a:.1f} | {b:.1f} | {(b - a) / a:+.0%} |" if a else f"| {store} | {a:.1f} | {b:.1f} | – |")
    print(f"\nKG triples: unsummarized {n['kg_triples']}, summarized {s['kg_triples']}\n")
    print("| pipeline | n | cosine Q1 | cosine mean | cosine Q3 | EM [95% CI] | F1 [95% CI] | s/query |")
    print("|---|---|---|---|---|---|---|---|")
    for pipeline, m in scores.items():
        q1, q3 = np.percentile(m["cos"], [25, 75])
        print(f"| {pipeline} | {len(m['cos'])} | {q1:.2f} | {np.mean(m['cos']):.2f} | {q3:.2f} | {format_ci(m['em'])} | "
              f"{format_ci(m['f1'])} | {np.mean(m['seconds']):.1f} |")


if __name__ == "__main__":
    main()
