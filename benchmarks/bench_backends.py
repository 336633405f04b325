"""Speed of the backends on this machine: LLM prompt and generation tokens/s, embedding
passages/s, ChromaDB add and query times, and the CPU instructions the installed llama.cpp uses
(``make llama-native`` builds it for this CPU). Prints a markdown table.

    python benchmarks/bench_backends.py [--llm llamacpp:default --llm llamacpp:qwen2.5-coder-0.5b] [--embed st:default]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time

import llama_cpp
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from multihop_rag.backends import llama_index_embedding, llama_index_llm  # noqa: E402
from multihop_rag.corpus import load_dataset  # noqa: E402
from multihop_rag.stores import chroma_client, chroma_collection  # noqa: E402


def bench_llm(spec: str, passages: list[str]) -> list[tuple[str, str]]:
    started = time.perf_counter()
    llm = llama_index_llm(spec, max_tokens=1)
    llm.complete("Hi")  # loads the model
    load = time.perf_counter() - started
    context = "\n\n".join(passages)[:6000]
    started = time.perf_counter()
    prompt_tokens = llm.complete(f"{context}\n\nSummarise the passages.").raw["usage"]["prompt_tokens"]
    prompt_tps = prompt_tokens / (time.perf_counter() - started)
    gen = llama_index_llm(spec, max_tokens=200)
    started = time.perf_counter()
    raw = gen.complete("Write a long story about a lighthouse keeper, at least 300 words.").raw
    gen_s = time.perf_counter() - started
    gen_tps = raw["usage"]["completion_tokens"] / gen_s
    return [
        (f"{spec}: load + first call", f"{load:.1f} s"),
        (f"{spec}: prompt processing", f"{prompt_tps:.0f} tok/s ({prompt_tokens} tok prompt)"),
        (f"{spec}: generation", f"{gen_tps:.1f} tok/s ({raw['usage']['completion_tokens']} tok)"),
    ]


def bench_embed(spec: str, passages: list[str]) -> tuple[list[tuple[str, str]], list[list[float]]]:
    embed = llama_index_embedding(spec)
    embed.get_text_embedding("warm up")
    started = time.perf_counter()
    vectors = embed.get_text_embedding_batch(passages)
    seconds = time.perf_counter() - started
    return [(f"{spec}: embedding", f"{len(passages) / seconds:.0f} passages/s ({len(passages)} passages)")], vectors


def bench_chroma(vectors: list[list[float]]) -> list[tuple[str, str]]:
    rng = np.random.default_rng(0)
    base = np.asarray(vectors)
    many = (base[rng.integers(0, len(base), 10_000)] + 0.05 * rng.normal(size=(10_000, base.shape[1]))).tolist()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        collection = chroma_collection(chroma_client(folder), "bench")
        started = time.perf_counter()
        for i in range(0, len(many), 1000):
            batch = many[i : i + 1000]
            collection.add(ids=[str(i + j) for j in range(len(batch))], embeddings=batch)
        add = time.perf_counter() - started
        started = time.perf_counter()
        for v in many[:200]:
            collection.query(query_embeddings=[v], n_results=20)
        query = (time.perf_counter() - started) / 200
        rows.append(("chroma (persistent): add 10,000 vectors", f"{add:.1f} s ({10_000 / add:.0f}/s)"))
        rows.append(("chroma (persistent): top-20 query", f"{query * 1000:.1f} ms"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--llm", action="append", help="LLM specs (default: both bundled models)")
    parser.add_argument("--embed", default="st:default")
    args = parser.parse_args()
    llms = args.llm or ["llamacpp:default", "llamacpp:qwen2.5-coder-0.5b"]
    passages, _ = load_dataset("musique", "smoke")
    texts = [p.text for p in passages]
    rows: list[tuple[str, str]] = []
    for spec in llms:
        rows += bench_llm(spec, texts)
    embed_rows, vectors = bench_embed(args.embed, texts)
    rows += embed_rows + bench_chroma(vectors)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"data: musique smoke corpus ({len(texts)} passages); peak RSS {peak:.0f} MB\n")
    print(f"llama.cpp {llama_cpp.__version__}, {llama_cpp.llama_print_system_info().decode().strip()}\n")
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
