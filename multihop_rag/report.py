"""``report.md`` and ``report.png`` of an evaluation (DESIGN.md's benchmark protocol).

The markdown holds the setting (models, data, machine), one table per answer metric with means
and 95% bootstrap intervals (and which methods' F1 intervals overlap the best one's), and a cost
table: build time, build LLM calls and tokens, pool size, time per query (TPQ), LLM calls and
tokens per query, and TPER against RAPTOR (SiReRAG eq. 1: TPQ ratio divided by pool-size ratio).
The plot puts each method at (seconds per query, F1) with its F1 interval.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from multihop_rag.metrics import bootstrap_ci

__all__ = ["METRICS", "tper", "markdown", "plot", "write_report"]

METRICS = {
    "em": "Exact match",
    "f1": "F1",
    "precision": "Precision",
    "recall": "Recall",
    "answer_recall": "Answer recall of the evidence (a retrieved or visited text contains a gold answer)",
    "supporting_recall": "Supporting-passage recall of the evidence (share of the gold passages, by id or title)",
}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def tper(tpq: float, pool: float, tpq_raptor: float, pool_raptor: float) -> float:
    """SiReRAG eq. (1): (TPQ_A / TPQ_B) / (pool_A / pool_B), B = RAPTOR; below 1 is better."""
    return (tpq / tpq_raptor) / (pool / pool_raptor)


def _overlap_note(results: Mapping[str, Sequence[Any]], metric: str) -> str:
    cis = {m: bootstrap_ci([getattr(r, metric) for r in rs]) for m, rs in results.items() if rs}
    if len(cis) < 2:
        return ""
    best = max(cis, key=lambda m: cis[m][0])
    overlapping = [m for m, (_, low, high) in cis.items() if m != best and low <= cis[best][2] and high >= cis[best][1]]
    if not overlapping:
        return f"\n{best}'s interval is separate from every other method's.\n"
    return (f"\nHighest mean: {best}; its interval overlaps {', '.join(overlapping)}, so these differences "
            "are not significant at this sample size.\n")


def _seconds_per_query(rs: Sequence[Any]) -> str:
    """Mean seconds per query, marked when LLM calls came from the cache: their time is not in it."""
    hits, calls = sum(r.cache_hits for r in rs), sum(r.llm_calls for r in rs)
    return f"{_mean([r.seconds for r in rs]):.1f}" + (f" ({hits} of {calls} calls cached)" if hits else "")


def _summary(results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per method: quality and cost side by side (the tables below have the detail)."""
    lines = [
        "## Summary",
        "",
        "| method | n | F1 (95% CI) | EM | answer recall of evidence | build s | build LLM calls | s / query | LLM calls / query |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, rs in results.items():
        b = builds.get(method, {})
        f1, low, high = bootstrap_ci([r.f1 for r in rs])
        lines.append(
            f"| {method} | {len(rs)} | {f1:.3f} [{low:.3f}, {high:.3f}] | {_mean([r.em for r in rs]):.3f} | "
            f"{_mean([r.answer_recall for r in rs]):.3f} | {b.get('seconds', 0):.0f} | {b.get('llm_calls', 0)} | "
            f"{_seconds_per_query(rs)} | {_mean([r.llm_calls for r in rs]):.1f} |"
        )
    return lines + [""]


def markdown(results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]], setting: Mapping[str, Any]) -> str:
    """The report as markdown (``results``: :class:`~multihop_rag.evaluate.Result` lists by method)."""
    n = max((len(rs) for rs in results.values()), default=0)
    lines = [
        f"# multihop-rag eval: {setting.get('dataset')} / {setting.get('split')}",
        "",
        f"- LLM `{setting.get('llm')}`, embeddings `{setting.get('embed')}`"
        + (f", GARLIC attention `{setting['garlic_attention']}`" if setting.get("garlic_attention") else "")
        + (f", GARLIC n_s {setting['garlic_n_s']}" if setting.get("garlic_n_s") else ""),
        f"- corpus: {setting.get('passages')} passages ({setting.get('corpus')}); {n} questions answered",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores; bootstrap: 2000 resamples, seed 0",
        "",
    ]
    lines += _summary(results, builds)
    for metric, title in METRICS.items():
        lines += [f"## {title}", "", "| method | n | mean | 95% CI |", "|---|---|---|---|"]
        for method, rs in results.items():
            mean, low, high = bootstrap_ci([getattr(r, metric) for r in rs])
            lines.append(f"| {method} | {len(rs)} | {mean:.3f} | [{low:.3f}, {high:.3f}] |")
        lines.append(_overlap_note(results, metric))
    raptor = "raptor" in results and results["raptor"] and builds.get("raptor")
    lines += [
        "## Cost",
        "",
        "| method | build s | build LLM calls | build tokens (prompt / generated) | pool size | TPQ s | "
        "LLM calls / query | tokens / query | TPER vs RAPTOR |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, rs in results.items():
        b = builds.get(method, {})
        tpq = _mean([r.seconds for r in rs])
        pool = b.get("pool_size") or 0
        ratio = "–"
        if raptor and rs and pool:
            ratio = f"{tper(tpq, pool, _mean([r.seconds for r in results['raptor']]), builds['raptor']['pool_size']):.3f}"
        tokens = _mean([r.prompt_tokens + r.completion_tokens for r in rs])
        resumed = " (resumed)" if b.get("resumed") else ""
        cached = f" ({b['cache_hits']} cached)" if b.get("cache_hits") else ""
        lines.append(
            f"| {method} | {b.get('seconds', 0):.0f}{resumed} | {b.get('llm_calls', 0)}{cached} | {b.get('prompt_tokens', 0)} / "
            f"{b.get('completion_tokens', 0)} | {pool} | {_seconds_per_query(rs)} | {_mean([r.llm_calls for r in rs]):.1f} | "
            f"{tokens:.0f} | {ratio} |"
        )
    if not raptor:
        lines.append("\nTPER needs RAPTOR's TPQ and pool size: add `raptor` to `--methods`.")
    lines.append("\nBuild figures are from each index's first finished build; later runs reload it. Calls answered "
                 "from the LLM-call cache (e.g. SiReRAG's similarity tree after RAPTOR's) count as calls but cost "
                 "almost no time: a query time marked \"cached\" (questions re-asked after a change) undercounts, "
                 "and so does a TPER computed from it.")
    return "\n".join(lines) + "\n"


def plot(results: Mapping[str, Sequence[Any]], path: Path, title: str = "") -> Path:
    """F1 (mean and 95% interval) against seconds per query, one point per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for method, rs in results.items():
        if not rs:
            continue
        mean, low, high = bootstrap_ci([r.f1 for r in rs])
        x = _mean([r.seconds for r in rs])
        ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=3)
        ax.annotate(method, (x, mean), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("seconds per query")
    ax.set_ylabel("F1 (95% bootstrap interval)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlim(left=0)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    out: Path, results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]], setting: Mapping[str, Any]
) -> tuple[Path, Path]:
    """Write ``out/report.md`` and ``out/report.png``; returns their paths."""
    md = out / "report.md"
    md.write_text(markdown(results, builds, setting))
    png = plot(results, out / "report.png", f"{setting.get('dataset')} / {setting.get('split')}, {setting.get('llm')}")
    return md, png
