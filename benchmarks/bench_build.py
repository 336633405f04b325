"""Build throughput against model servers (issue 24): SiReRAG, K²RAG and GARLIC on 100 pooled HotpotQA
passages, built against stand-in OpenAI-compatible servers that answer ``k`` requests at once with a
fixed delay (``integrations_tests.openai_stub.SlotServer``: a simulation of an Ollama / vLLM host, no
model, no CPU). Three set-ups per method:

- one call at a time (``max_concurrency=1``) on one host with 4 slots;
- the default: as many calls in flight as the host's slots (4, read from ``/props``);
- a pool of two such hosts (``openai:MODEL@url1,url2``: 8 in flight).

It prints wall time, the time with an LLM call in flight (the rest is chunking, embedding and
clustering on the CPU), the speed-up over one call at a time (target: ≥ 0.8·k = 3.2 for k = 4, ≥ 1.8 for
the pool over one host), calls per host, and checks that every set-up builds the same pool (same node
ids). Then it kills a build mid-way (a child process, after a third of its calls) and resumes it:
the calls the resumed build sends plus those before the kill must not exceed an uninterrupted build's
by more than the calls in flight at the kill. Embeddings are a deterministic hash (the benchmark
measures the LLM side).

    .venv/bin/python benchmarks/bench_build.py [--passages 100] [--delay 0.5] [--methods sirerag,k2rag,garlic]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_index.core import Document  # noqa: E402
from llama_index.core.indices.base import BaseIndex  # noqa: E402

from integrations_tests.fakes import HashEmbedding  # noqa: E402
from integrations_tests.openai_stub import SlotServer  # noqa: E402
from llama_index_garlic import GarlicConfig, GarlicIndex  # noqa: E402
from llama_index_k2rag import K2RAGIndex  # noqa: E402
from llama_index_sirerag import SiReRAGIndex  # noqa: E402
from multihop_rag.backends import llama_index_llm  # noqa: E402
from multihop_rag.corpus import load_pooled  # noqa: E402
from multihop_rag.stores import stored_ids  # noqa: E402

SLOTS = 4
SETTINGS = {"garlic": {"config": GarlicConfig(n_s=640)}}
"""GARLIC's default n_s packs 100 passages into a handful of batches; 640 tokens makes a graph of many."""
BUILDERS: dict[str, Callable[..., BaseIndex]] = {
    "sirerag": SiReRAGIndex.from_documents,
    "k2rag": K2RAGIndex.from_documents,
    "garlic": GarlicIndex.from_documents,
}


def documents(n: int) -> list[Document]:
    passages, _ = load_pooled("hotpotqa", n_questions=max(10, n // 8))
    return [p.to_llama_index() for p in passages[:n]]


def build(method: str, docs: list[Document], urls: list[str], folder: Path, max_concurrency: int | None) -> BaseIndex:
    llm = llama_index_llm(f"openai:stand-in@{','.join(urls)}", max_tokens=512)
    return BUILDERS[method](docs, llm=llm, embed_model=HashEmbedding(), persist_dir=folder,
                            max_concurrency=max_concurrency, show_progress=False, **SETTINGS.get(method, {}))


def child(method: str, url: str, folder: str, n: int) -> None:
    """A build in its own process, for the kill-and-resume check."""
    build(method, documents(n), [url], Path(folder), None)


def run_child(method: str, url: str, folder: Path, n: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, "--child", method, url, str(folder), str(n)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def resume_check(method: str, n: int, delay: float, calls: int, scratch: Path) -> str:
    folder = scratch / f"{method}-resume"
    with SlotServer(slots=SLOTS, delay=delay) as server:
        process = run_child(method, server.url, folder, n)
        while server.requests < calls // 3 and process.poll() is None:
            time.sleep(0.05)
        process.kill()
        process.wait()
        before = server.requests
        resumed = run_child(method, server.url, folder, n)
        resumed.wait()
        after = server.requests - before
    extra = before + after - calls
    verdict = "ok" if resumed.returncode == 0 and extra <= SLOTS else "REPEATED CALLS"
    return f"killed after {before} calls, resumed with {after} (uninterrupted: {calls}; {extra:+d}) {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per request on the stand-in servers")
    parser.add_argument("--methods", default="sirerag,k2rag,garlic")
    parser.add_argument("--child", nargs=4, metavar=("METHOD", "URL", "FOLDER", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, url, folder, n = args.child
        child(method, url, folder, int(n))
        return

    docs = documents(args.passages)
    print(f"# bench_build: {len(docs)} HotpotQA passages, stand-in hosts with {SLOTS} slots and {args.delay} s per "
          f"request; {platform.machine()}, {os.cpu_count()} cores\n")
    print("| method | set-up | calls | wall s | LLM busy s | speed-up | calls per host | same node ids |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        resumes = []
        for method in args.methods.split(","):
            with SlotServer(slots=SLOTS, delay=0.0) as warm:  # imports, numba's compile: not part of the timing
                build(method, docs[:6], [warm.url], scratch / f"{method}-warm-up", None)
            baseline: tuple[float, set[str]] | None = None
            single = 0.0
            calls = 0
            for setup, hosts, concurrency in (("one call at a time", 1, 1), (f"{SLOTS} slots", 1, None),
                                              (f"pool of two x {SLOTS} slots", 2, None)):
                with ExitStack() as stack:
                    servers = [stack.enter_context(SlotServer(slots=SLOTS, delay=args.delay)) for _ in range(hosts)]
                    started = time.perf_counter()
                    index = build(method, docs, [s.url for s in servers], scratch / f"{method}-{hosts}-{concurrency}",
                                  concurrency)
                    wall = time.perf_counter() - started
                    per_host = [s.requests for s in servers]
                ids = stored_ids(index.vector_store)
                if baseline is None:
                    baseline, calls = (wall, ids), sum(per_host)
                if hosts == 1 and concurrency is None:
                    single = wall
                speed = f"{baseline[0] / wall:.2f}x" + (f" ({single / wall:.2f}x one host)" if hosts == 2 else "")
                busy = index.stats()["llm"]["busy_seconds"]  # a call in flight (union of intervals)
                print(f"| {method} | {setup} | {sum(per_host)} | {wall:.1f} | {busy:.1f} | {speed} | {per_host} | "
                      f"{'yes' if ids == baseline[1] else 'NO'} |", flush=True)
            resumes.append(f"- {method}: {resume_check(method, args.passages, args.delay, calls, scratch)}")
        print("\nKilled and resumed (one host, default concurrency):\n" + "\n".join(resumes))


if __name__ == "__main__":
    main()
