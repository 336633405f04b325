"""Where a build's CPU-side seconds go (issue 42), by function, and how each part grows with the corpus.

Builds METHOD on the first PASSAGES of ``bench_scale``'s corpus against its stand-in host (4 slots, ``--delay`` a
call, the real MiniLM), each size in a process of its own, and samples every thread's stack every 20 ms. A sample
counts only while no LLM call is in flight (``CallClock.in_flight``), which is ``bench_scale``'s CPU-side time; a
thread waiting (on a lock, a queue, a socket, a sleep) is left out. Prints, for the functions holding the most
sampled seconds — the repository's own, inclusive, and the innermost library functions — their seconds at each size and the growth exponent between the first and last size.

cProfile follows one thread: on SiReRAG's build it missed the trees' worker threads and put the build's excess
growth in UMAP's nearest-neighbour compile. The samples found it in embedding the relatedness tree's aggregates
(docs/benchmarks.md).

    .venv/bin/python benchmarks/cpu_side_profile.py sirerag --sizes 1000,6000 [--delay 0.05] [--top 40]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_scale import CORPUS, SLOTS
from child_rows import row_of_child

from integrations_tests.openai_stub import SlotServer
from multihop_rag.corpus import data_dir, load_documents

PERIOD = 0.02
WAITING = {"wait", "acquire", "get", "select", "poll", "sleep", "join", "result", "_wait_for_tstate_lock",
           "recv_into", "readinto", "accept", "_worker"}
"""Innermost functions of a thread that is waiting, not working."""


ROOT = Path(__file__).resolve().parents[1]


def _stack(frame: Any) -> list[tuple[Path, str]]:
    """(file, function) of each frame, innermost first."""
    names = []
    while frame is not None:
        names.append((Path(frame.f_code.co_filename), frame.f_code.co_name))
        frame = frame.f_back
    return names


def _counted(stack: list[tuple[Path, str]]) -> set[str]:
    """The functions a sample counts for: the innermost (a library's, where the time is spent) and every one of the
    repository's own on the stack (the method's part that called it)."""
    (leaf, leaf_function), ours = stack[0], {f"{file.relative_to(ROOT)}:{function}" for file, function in stack
                                             if file.is_relative_to(ROOT) and ".venv" not in file.parts}
    return ours | {f"{leaf.name}:{leaf_function} (innermost)"}


def child(method_name: str, size: int, url: str, folder: str, delay: float) -> dict[str, Any]:
    """One build in this process, sampled: seconds per function while no call is in flight."""
    from multihop_rag.app import registry
    from multihop_rag.method import Models

    passages = load_documents(data_dir() / CORPUS[0] / CORPUS[1])[:size]
    method = registry.get(method_name)
    models = Models.from_specs(f"openai:stand-in@{url}", "st:default")
    models.embed.get_text_embedding("warm up")  # the embedder's load is not the build's
    clocks = (models.llm.clock, models.chat_clock)
    seconds: collections.Counter[str] = collections.Counter()
    samples, done = [0], threading.Event()

    def sample() -> None:
        me = threading.get_ident()
        while not done.wait(PERIOD):
            if any(clock.in_flight() for clock in clocks):
                continue
            samples[0] += 1
            for thread, frame in sys._current_frames().items():
                stack = _stack(frame)
                if thread != me and stack[0][1] not in WAITING:
                    seconds.update(dict.fromkeys(_counted(stack), PERIOD))

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.perf_counter()
    sampler.start()
    method.build(passages, models, Path(folder), method.config_class())
    done.set()
    sampler.join()
    return {"wall_s": round(time.perf_counter() - started, 1), "cpu_side_s": round(samples[0] * PERIOD, 1),
            "functions": {name: round(s, 2) for name, s in seconds.most_common(300)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("method", nargs="?")
    parser.add_argument("--sizes", default="1000,6000")
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--child", nargs=5, metavar=("METHOD", "SIZE", "URL", "FOLDER", "DELAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, size, url, folder, delay = args.child
        print(json.dumps(child(method, int(size), url, folder, float(delay))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = {}
    for size in sizes:
        with SlotServer(slots=SLOTS, delay=args.delay) as server, tempfile.TemporaryDirectory() as tmp:
            rows[size] = row_of_child(__file__, args.method, str(size), server.url, tmp, str(args.delay))
    first, last = rows[sizes[0]], rows[sizes[-1]]
    print(f"{args.method}, {args.delay} s a call: CPU-side s (sampled) " +
          ", ".join(f"{s}: {rows[s]['cpu_side_s']}" for s in sizes))
    print("| function | " + " | ".join(f"s at {s}" for s in sizes) + " | exponent |\n|---|" + "---|" * (len(sizes) + 1))
    for name, s in sorted(last["functions"].items(), key=lambda kv: -kv[1])[:args.top]:
        base = first["functions"].get(name, 0.0)
        growth = f"{math.log(s / base) / math.log(sizes[-1] / sizes[0]):.2f}" if base and len(sizes) > 1 else "–"
        print(f"| {name} | " + " | ".join(f"{rows[z]['functions'].get(name, 0.0):.1f}" for z in sizes) + f" | {growth} |")


if __name__ == "__main__":
    main()
