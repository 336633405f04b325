"""GARLIC vs dense top-k on the same graph nodes vs RAPTOR (collapsed tree), as in GARLIC Table 1.

As in the paper's LongBench setting, each question's own candidate passages are its document: a
graph is built per question (n_s = min(8K, context) by default, §4.1), then searched with stop
patience p = 1. Baselines answer with the same Table 5 answer turn from:
- dense top-X: the X graph nodes most similar to the question, X = the nodes GARLIC used;
- RAPTOR-CT top-k: ``SiReRAGConfig(relatedness=False)`` over 300-token chunks, collapsed tree.
The search is re-run without KV reuse (``kv_cache=False``; LLM replies come from the cache, so the
same nodes are visited) to measure what the cache saves on the attention side.

    python benchmarks/bench_garlic.py --dataset hotpotqa --split smoke --limit 5 --n-s 2048 \
        --llm llamacpp:qwen2.5-coder-0.5b --attention qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402

from llama_index_garlic import (  # noqa: E402
    GarlicConfig,
    GarlicIndex,
    TransformersAttention,
    prompts,  # noqa: E402
)
from llama_index_garlic.search import LLMController  # noqa: E402
from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_embedding, llama_index_llm, resolve_llm_spec  # noqa: E402
from multihop_rag.corpus import load_dataset  # noqa: E402
from multihop_rag.llm.cache import cached_llm  # noqa: E402
from multihop_rag.metrics import answer_recall_at_k, exact_match, f1_score, format_ci, rouge_l  # noqa: E402


def answer_from(controller: LLMController, question: str, texts: list[str]) -> str:
    """Table 5's answer turn over ``texts`` (the baselines' answering step)."""
    information = "".join(prompts.bullet(t) for t in texts)
    return controller.answer(prompts.FIRST_TURN.format(question=question, information=information), question)


def score(rows: dict, method: str, answer: str, gold: list[str], texts: list[str], seconds: float, calls: int) -> None:
    row = rows.setdefault(method, {k: [] for k in ("em", "f1", "rouge", "recall", "nodes", "seconds", "calls")})
    row["em"].append(exact_match(answer, gold))
    row["f1"].append(f1_score(answer, gold))
    row["rouge"].append(rouge_l(answer, gold))
    row["recall"].append(answer_recall_at_k(texts, gold, len(texts)))
    row["nodes"].append(len(texts))
    row["seconds"].append(seconds)
    row["calls"].append(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--split", default="smoke", choices=("smoke", "dev"))
    parser.add_argument("--limit", type=int, default=5, help="questions (one graph each)")
    parser.add_argument("--llm", default="llamacpp:qwen2.5-coder-0.5b")
    parser.add_argument("--embed", default="st:default")
    parser.add_argument("--attention", default="qwen2.5-coder-0.5b", help="bundled alias, .gguf, HF dir, or 'none'")
    parser.add_argument("--n-s", type=int, default=None, help="n_s (default: min(8192, context window))")
    parser.add_argument("--raptor-k", type=int, default=5)
    args = parser.parse_args()

    passages, questions = load_dataset(args.dataset, args.split)
    by_id = {p.id: p for p in passages}
    questions = questions[: args.limit]
    llm, embed = llama_index_llm(args.llm, max_tokens=512), llama_index_embedding(args.embed)
    attention = None
    if args.attention != "none":
        started = time.perf_counter()
        attention = TransformersAttention.from_pretrained(args.attention)
        print(f"attention model {attention} loaded in {time.perf_counter() - started:.0f} s", flush=True)
    # the paper's search (attention scores from the whole top level), whose KV reuse is measured
    config = GarlicConfig(n_s=args.n_s, attention_search=attention is not None, start_nodes=None)
    cache = tempfile.mkdtemp(prefix="bench-garlic-") + "/calls.sqlite"

    rows: dict[str, dict[str, list[float]]] = {}
    builds, kv, levels = [], {"with": [], "without": [], "tokens_with": [], "tokens_without": []}, []
    for q in questions:
        docs = [by_id[c].to_llama_index() for c in q.candidates if c in by_id]
        started = time.perf_counter()
        index = GarlicIndex.from_documents(
            docs, llm=llm, embed_model=embed, attention_model=attention, config=config, show_progress=False, cache=cache
        )
        builds.append(time.perf_counter() - started)
        stats = index.stats()
        levels.append(stats["nodes_per_level"])
        controller = LLMController(cached_llm(llm, cache))

        before = attention.forward_tokens if attention else 0
        result = index.search(q.question)
        kv["tokens_with"].append((attention.forward_tokens - before) if attention else 0)
        texts = [index.graph.node(i).text for i in result.visited]
        score(rows, "GARLIC", result.answer or "", q.answers, texts, result.seconds, result.llm_calls)
        kv["with"].append(result.attention_seconds)
        print(f"  {q.id}: {stats['nodes_per_level']} nodes, built {builds[-1]:.0f} s; GARLIC visited "
              f"{len(result.visited)} ({result.stop_reason}, {result.scoring}) gold={q.answers[0]!r} "
              f"answer={result.answer!r} {result.seconds:.1f} s", flush=True)

        if attention is not None:
            index.config = config.model_copy(update={"kv_cache": False})
            before = attention.forward_tokens
            again = index.search(q.question)
            kv["tokens_without"].append(attention.forward_tokens - before)
            kv["without"].append(again.attention_seconds)
            index.config = config

        started = time.perf_counter()
        similarity = index.graph.similarity(embed.get_query_embedding(q.question))
        top = [index.graph.nodes[i].text for i in np.argsort(-similarity)[: len(result.visited)]]
        answer = answer_from(controller, q.question, top)
        score(rows, "dense top-X (X = GARLIC's nodes)", answer, q.answers, top, time.perf_counter() - started, 1)

        raptor = SiReRAGIndex.from_documents(
            docs, llm=llm, embed_model=embed, show_progress=False, cache=cache,
            config=SiReRAGConfig(relatedness=False, chunk_size=300, chunk_overlap=0),
        )
        started = time.perf_counter()
        hits = [h.node.get_content() for h in raptor.as_retriever(similarity_top_k=args.raptor_k).retrieve(q.question)]
        answer = answer_from(controller, q.question, hits)
        score(rows, f"RAPTOR-CT top-{args.raptor_k}", answer, q.answers, hits, time.perf_counter() - started, 1)
        builds[-1] = (builds[-1], raptor.stats()["seconds"]["total"])

    spec = resolve_llm_spec(args.llm)
    print(f"\n## GARLIC benchmark — {args.dataset} {args.split}, {len(questions)} questions (one graph each)\n")
    print(f"LLM {spec}, embeddings {args.embed}, attention {attention or 'none (embedding fallback)'}, "
          f"n_s {config.window(llm.metadata.context_window)}, p = {config.stop_patience}; machine: "
          f"{platform.machine()}, {os.cpu_count()} cores; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB\n")
    print(f"Graphs (nodes per level): {levels}. Build s per question, GARLIC / RAPTOR: "
          f"{[(round(g), round(r)) for g, r in builds]}\n")
    print("| method | EM [95% CI] | F1 [95% CI] | ROUGE-L [95% CI] | answer in evidence | nodes/query | LLM calls/query | s/query |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        n = len(r["em"])
        print(f"| {name} | {format_ci(r['em'])} | {format_ci(r['f1'])} | {format_ci(r['rouge'])} | "
              f"{sum(r['recall']) / n:.2f} | {np.mean(r['nodes']):.1f} | {np.mean(r['calls']):.1f} | {np.mean(r['seconds']):.1f} |")
    if attention is not None:
        print("\n| attention per query | with KV reuse | without |")
        print("|---|---|---|")
        print(f"| seconds | {np.mean(kv['with']):.2f} | {np.mean(kv['without']):.2f} |")
        print(f"| tokens through the model | {np.mean(kv['tokens_with']):.0f} | {np.mean(kv['tokens_without']):.0f} |")


if __name__ == "__main__":
    main()
