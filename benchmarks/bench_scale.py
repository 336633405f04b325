"""Build cost against corpus size (issue 42): every method that builds — RAPTOR, SiReRAG, K²RAG, GARLIC and
HiRAG's corpus — on the first 250, 1,000 and 6,000 passages of 2Wiki's full HippoRAG corpus
(``corpus_hipporag_full.jsonl``, 6,119 passages), against a stand-in OpenAI-compatible host
(``integrations_tests.openai_stub.SlotServer``: 4 slots, a fixed delay per request, well-formed extractive
replies as long as the passages' sentences) with the real MiniLM embedder (``st:default``).

Each build runs in its own process (the host in this one, so its CPU is not counted) and reports:

- LLM calls, and the calls the method's ``estimate`` predicted (target: within ±30 % at 1,000);
- CPU-side seconds: the build's wall time with no LLM call in flight (chunking, embedding, clustering,
  the store — the time every slot waits on this machine), its share of the build's wall time (target
  ≤ 10 % at ``--delay 1``: CPU work that overlaps the calls is not counted, so it must be measured at a
  call's real length, not projected from short ones), and the process's CPU seconds;
- how busy the host's slots were (slot-seconds over slots × wall), and peak RSS (target ≤ 8 GB at 6,000;
  the embedded LLM, when it is the model, adds its own ~1.2 GB for the 1.5B);
- the pool: nodes a query can reach.

Then the growth exponent of calls and CPU-side seconds between the two largest sizes run at one delay
(target ≤ 1.1) and a log-log plot. ``--malformed 0.25`` cuts a quarter of the host's JSON replies in
half (a small model's replies that do not parse: target ≥ 65 % of the slots busy). ``garlic+attention`` builds
GARLIC with its edges weighted by the embedded default's attention model (``attention_model="default"``, as a
``llamacpp:`` build has them; the stand-in's replies are the exchanges it reads): issue 41's peak RSS. Results append to
``--out``/scale.jsonl as each build finishes, so an interrupted run resumes. A build longer than a session
(``garlic+attention`` at 6,000 passages: about 132 attention passes of 1-4 minutes) keeps its folder in ``--keep``:
run again, it resumes from the calls and attention edges that folder's call cache holds, and its row (``resumed``)
times the last part only.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 250,1000,6000] [--methods raptor,sirerag,k2rag,garlic,hirag]
        [--delay 0.05] [--malformed 0.0] [--out benchmarks/results/scale] [--keep FOLDER]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from child_rows import row_of_child  # noqa: E402

from integrations_tests.openai_stub import SlotServer  # noqa: E402
from multihop_rag.corpus import data_dir, load_documents  # noqa: E402

SLOTS = 4
CORPUS = ("2wikimultihopqa", "corpus_hipporag_full.jsonl")


def child(method_name: str, size: int, url: str, folder: str, keep: bool) -> dict[str, Any]:
    """One build in this process: what it cost. With ``keep``, its calls (and GARLIC's attention edges) go to a call
    cache in ``folder``, which a later run resumes from."""
    from multihop_rag.app import registry
    from multihop_rag.method import Models

    passages = load_documents(data_dir() / CORPUS[0] / CORPUS[1])[:size]
    name, _, attention = method_name.partition("+")
    method = registry.get(name)
    config = method.config_class()
    if attention:  # garlic+attention: edges weighted by the embedded default's attention, as a llamacpp build's
        config = config.model_copy(update={"attention_model": "default"})
    models = Models.from_specs(f"openai:stand-in@{url}", "st:default", cache=Path(folder) / "llm_calls.sqlite" if keep else None)
    models.embed.get_text_embedding("warm up")  # the embedder's load is not the build's
    estimate = method.estimate(passages, models, config) if hasattr(method, "estimate") else None
    cpu0, started = time.process_time(), time.perf_counter()
    index = method.build(passages, models, Path(folder), config)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    usage = models.usage()
    stats = index.stats()
    return {
        "method": method_name, "passages": len(passages), "calls": usage.calls,
        "estimated_calls": estimate.calls if estimate is not None else None,
        "completion_tokens": usage.completion_tokens, "wall_s": round(wall, 2),
        "llm_busy_s": round(usage.busy_seconds, 2), "cpu_side_s": round(max(0.0, wall - usage.busy_seconds), 2),
        "process_cpu_s": round(cpu, 2), "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "pool_size": stats.get("pool_size", stats.get("chunks")),
        "stages": {name: {"s": f["seconds"], "cpu_side_s": round(f["seconds"] - f["busy_seconds"], 2), "calls": f["calls"]}
                   for name, f in (stats.get("stages") or {}).items()},
    }


def run(method: str, size: int, delay: float, malformed: float, scratch: Path, keep: bool) -> dict[str, Any]:
    folder = scratch / f"{method}-{size}"
    resumed = folder.exists()
    with SlotServer(slots=SLOTS, delay=delay, malformed=malformed) as server:
        started = time.perf_counter()
        row = row_of_child(__file__, method, str(size), server.url, str(folder), str(int(keep)))
        wall = time.perf_counter() - started
        slot_seconds = server.slot_seconds
    return row | {
        "delay_s": delay, "malformed": malformed, "resumed": resumed,
        "slots_busy": round(slot_seconds / (SLOTS * row["wall_s"]), 3) if row["wall_s"] else None,
        "child_wall_s": round(wall, 1),
    }


TIMED = ("wall_s", "cpu_side_s", "process_cpu_s")
"""A resumed row's seconds are its last part's, not a build's: they give no exponent and no point in the plot."""


def measured(row: dict[str, Any], key: str) -> float | None:
    return None if row.get("resumed") and key in TIMED else row.get(key)


def exponent(rows: dict[int, dict[str, Any]], key: str, a: int, b: int) -> str:
    low, high = measured(rows[a], key), measured(rows[b], key)
    if not low or not high:
        return "–"
    return f"{math.log(high / low) / math.log(rows[b]['passages'] / rows[a]['passages']):.2f}"


def report(rows: list[dict[str, Any]], out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [f"# bench_scale: {CORPUS[0]} {CORPUS[1]}, stand-in host ({SLOTS} slots), st:default embeddings; "
             f"{platform.machine()}, {os.cpu_count()} cores\n",
             "| method | passages | s per call | malformed | calls (estimated) | wall s | CPU-side s (share) | process CPU s "
             "| slots busy | peak RSS GB | pool |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["delay_s"], r["malformed"], r["passages"])):
        est = f" ({r['estimated_calls']}, {(r['estimated_calls'] - r['calls']) / r['calls']:+.0%})" if r.get("estimated_calls") and r["calls"] else ""
        resumed = " (resumed: its last part)" if r.get("resumed") else ""
        lines.append(f"| {r['method']} | {r['passages']} | {r['delay_s']} | {r['malformed']:.0%} | {r['calls']}{est} | {r['wall_s']:.0f}{resumed} | "
                     f"{r['cpu_side_s']:.0f} ({r['cpu_side_s'] / r['wall_s']:.0%}) | {r['process_cpu_s']:.0f} | {r['slots_busy']:.0%} | "
                     f"{r['peak_rss_gb']:.2f} | {r['pool_size']} |")
    fastest = min(r["delay_s"] for r in rows)
    clean = [r for r in rows if not r["malformed"] and r["delay_s"] == fastest]
    methods = list(dict.fromkeys(r["method"] for r in clean))
    sizes = sorted({r["passages"] for r in clean})
    if len(sizes) >= 2:
        a, b = sizes[-2], sizes[-1]
        lines += ["", f"Growth exponent from {a} to {b} passages, {fastest} s per call (target ≤ 1.1; "
                  "a build resumed at either size gives no exponent of seconds):", "",
                  "| method | calls | CPU-side s | process CPU s | peak RSS |", "|---|---|---|---|---|"]
        for m in methods:
            by_size = {r["passages"]: r for r in clean if r["method"] == m}
            if a in by_size and b in by_size:
                lines.append(f"| {m} | " + " | ".join(exponent(by_size, k, a, b) for k in ("calls", "cpu_side_s", "process_cpu_s", "peak_rss_gb")) + " |")
    figure, axes = plt.subplots(1, 3, figsize=(13, 4))
    for m in methods:
        mine = sorted((r for r in clean if r["method"] == m), key=lambda r: r["passages"])
        for ax, key in zip(axes, ("calls", "cpu_side_s", "peak_rss_gb"), strict=True):
            points = [(r["passages"], y) for r in mine if (y := measured(r, key))]  # HiRAG's corpus makes no call
            ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=m)
    for ax, title in zip(axes, ("LLM calls", "CPU-side seconds", "peak RSS (GB)"), strict=True):
        ax.set_xscale("log")
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.minorticks_off()
        if title != "peak RSS (GB)":
            ax.set_yscale("log")
        ax.set_xlabel("passages")
        ax.set_title(title)
    axes[2].set_ylim(bottom=0)
    axes[1].legend()
    figure.tight_layout()
    figure.savefig(out / "scale.png", dpi=110)
    text = "\n".join(lines) + "\n"
    (out / "scale.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="250,1000,6000")
    parser.add_argument("--methods", default="raptor,sirerag,k2rag,garlic,hirag")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per request on the stand-in host")
    parser.add_argument("--malformed", type=float, default=0.0, help="share of JSON replies cut in half")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/scale"))
    parser.add_argument("--keep", type=Path, help="keep the build folders here (default: a temporary folder), so an "
                        "interrupted build resumes from its call cache when run again")
    parser.add_argument("--child", nargs=5, metavar=("METHOD", "SIZE", "URL", "FOLDER", "KEEP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, size, url, folder, keep = args.child
        print(json.dumps(child(method, int(size), url, folder, keep == "1")))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "scale.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    done = {(r["method"], r["passages"], r["delay_s"], r["malformed"]) for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = args.keep or Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        for size in (int(s) for s in args.sizes.split(",")):
            for method in args.methods.split(","):
                if (method, size, args.delay, args.malformed) in done:
                    continue
                row = run(method, size, args.delay, args.malformed, scratch, args.keep is not None)
                rows.append(row)
                with results.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    print(report(rows, args.out))


if __name__ == "__main__":
    main()
