"""Batched decoding for the embedded model (issue 24, item 2): a SiReRAG build (proposition extraction,
then both trees' summaries) on a few pooled HotpotQA passages, in-process (llama-cpp-python, one call at
a time) against llama.cpp's own server (``llama-server``, continuous batching) with ``--parallel`` 1, 2
and 4, reached through the ``openai:`` spec so the build keeps every slot busy. Same bundled GGUF, same
threads. The last column isolates batching (the same server with more slots) from the rest of the
difference between the server and the in-process path (its sampling; build it with the wheel's flags,
``-DGGML_NATIVE=OFF``, to compare like with like). Prints wall time, LLM calls, generated tokens per
second and the speed-up.

``llama-server`` is not a Python package: build it from the llama.cpp sources that llama-cpp-python's
sdist vendors (``cmake -B build -DGGML_NATIVE=OFF && cmake --build build --target llama-server``) and pass its path.

    .venv/bin/python benchmarks/bench_batching.py --server-bin PATH/llama-server [--passages 8] [--model qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_index_sirerag import SiReRAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_embedding, llama_index_llm  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.serving import bundled  # noqa: E402

CONTEXT_PER_SLOT = 4096


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(binary: str, model: Path, parallel: int, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [binary, "-m", str(model), "--alias", "bench", "--host", "127.0.0.1", "--port", str(port), "--parallel",
         str(parallel), "--ctx-size", str(CONTEXT_PER_SLOT * parallel), "--threads", str(threads), "--cont-batching"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return process, url + "/v1"
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("llama-server did not start")


def build(spec: str, docs: list, folder: Path) -> tuple[float, dict]:
    llm = llama_index_llm(spec, max_tokens=512)
    started = time.perf_counter()
    index = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=llama_index_embedding("st:default"),
                                        persist_dir=folder, show_progress=False)
    return time.perf_counter() - started, index.stats()["llm"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-bin", required=True)
    parser.add_argument("--passages", type=int, default=8)
    parser.add_argument("--model", default=bundled.FAST_LLM_ALIAS)
    parser.add_argument("--parallel", default="1,2,4")
    args = parser.parse_args()
    threads = int(os.environ.get("MULTIHOP_RAG_THREADS") or os.cpu_count() or 1)
    passages, _ = load_pooled("hotpotqa", n_questions=max(2, args.passages // 8 + 1))
    docs = [p.to_llama_index() for p in passages[: args.passages]]
    model = bundled.gguf_path(args.model)
    print(f"# bench_batching: SiReRAG build of {len(docs)} HotpotQA passages, {args.model}, {threads} threads; "
          f"{platform.machine()}, {os.cpu_count()} cores\n")
    print("| backend | wall s | LLM calls | generated tok | generated tok/s | speed-up | vs --parallel 1 |\n"
          "|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        base, single = 0.0, 0.0
        runs: list[tuple[str, str, int]] = [("in-process (llama-cpp-python)", f"llamacpp:{args.model}", 0)]
        runs += [(f"llama-server --parallel {p}", "", int(p)) for p in args.parallel.split(",")]
        for name, spec, parallel in runs:
            server = None
            if parallel:
                server, url = start_server(args.server_bin, model, parallel, threads)
                spec = f"openai:bench@{url}"
            try:
                wall, usage = build(spec, docs, Path(tmp) / name.replace(" ", "_"))
            finally:
                if server is not None:
                    server.kill()
                    server.wait()
            base = base or wall
            single = wall if parallel == 1 else single
            versus = f"{single / wall:.2f}x" if parallel and single else ""
            print(f"| {name} | {wall:.1f} | {usage['calls']} | {usage['completion_tokens']} | "
                  f"{usage['completion_tokens'] / wall:.1f} | {base / wall:.2f}x | {versus} |", flush=True)


if __name__ == "__main__":
    main()
