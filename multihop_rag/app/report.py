"""``report.md`` and ``report.png`` of an evaluation (DESIGN.md's benchmark protocol).

Scores are computed here from the result lines, so a metric added later needs no re-run:

- answers: HotpotQA EM and F1 (comparable with the papers), FlashRAG's accuracy (a gold answer
  contained in the prediction, countries and demonyms as one), and for comparison questions with
  two options the option the answer picks (F1 rewards "X is older than Y" against gold "Y");
- retrieval at the same depth for every method: supporting-passage recall@k and answer recall@k for
  k = 2, 5, 10, 20, and answer recall within 1k, 2k and 4k tokens of evidence read in rank order
  (methods return units of very different length). A unit counts for the passages whose text it
  holds — a passage, a chunk of it, a chunk packing several — never for a summary, an aggregate or
  an information point (the model's rewrite of many passages), whatever lies under it; sources@10
  counts a rewrite for the passages it was written from too (generous: a high summary names many). Questions
  whose gold answer is named in the question (answer recall trivially 1) or is yes/no (always 0)
  are left out of answer recall and counted apart;
- each method against naive on the same questions: the mean F1 difference with a paired bootstrap
  interval, wins/ties/losses, per question type, and in words which differences are resolved (an
  interval that excludes 0, on at least ``MIN_RESOLVED`` questions);
- failure categories per method, from each answer's trace;
- cost: build time by stage with the share spent with an LLM call in flight, calls, tokens, peak
  RSS; per query seconds (marked when calls came from the cache), calls, tokens; TPER vs RAPTOR.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from multihop_rag.indexing.text import count_tokens
from multihop_rag.metrics import (
    accuracy,
    answer_in_question,
    answer_in_text,
    answer_recall_at_budget,
    bootstrap_ci,
    comparison_correct,
    exact_match,
    is_yes_no,
    paired_bootstrap_ci,
    precision_recall_f1,
    says_unknown,
)

__all__ = ["KS", "BUDGETS", "scores", "failure", "tper", "markdown", "summary_markdown", "plot", "write_report"]

KS = (2, 5, 10, 20)
BUDGETS = (1000, 2000, 4000)
BASELINE = "naive"
MIN_RESOLVED = 10
"""Fewest paired questions on which a difference is called resolved: a percentile bootstrap of a few
values undercovers (one question gives a zero-width interval; five wins in five pass a sign test
at p = 0.06 only)."""


@cache
def _tokens(text: str) -> int:
    return count_tokens(text)


def scores(r: Any) -> dict[str, Any]:
    """Every score of one result line (see the module docstring)."""
    precision, recall, f1 = precision_recall_f1(r.answer, r.gold)
    comparison = comparison_correct(r.question, r.answer, r.gold)
    texts = [e["text"] for e in r.evidence]
    gold_passages = set(r.supporting)
    out: dict[str, Any] = {
        "em": exact_match(r.answer, r.gold),
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "acc": accuracy(r.answer, r.gold),
        "comparison": comparison,
        "yes_no": is_yes_no(r.gold),
        "answer_in_question": answer_in_question(r.question, r.gold),
    }
    for k in KS:
        found = {p for e in r.evidence[:k] for p in e.get("passage_ids", [])}
        out[f"support@{k}"] = len(found & gold_passages) / len(gold_passages) if gold_passages else None
        out[f"answer@{k}"] = float(any(answer_in_text(t, r.gold) for t in texts[:k]))
    counts = [_tokens(t) for t in texts]
    for budget in BUDGETS:
        out[f"answer@{budget // 1000}k"] = answer_recall_at_budget(texts, counts, r.gold, budget)
    written_from = {p for e in r.evidence[:10] for p in [*e.get("passage_ids", []), *e.get("source_ids", [])]}
    out["sources@10"] = len(written_from & gold_passages) / len(gold_passages) if gold_passages else None
    out["evidence_tokens"] = sum(counts)
    return out


def correct(s: Mapping[str, Any]) -> bool:
    """An answer counts as right when it contains a gold answer, or picks the gold option."""
    return bool(s["comparison"]) if s["comparison"] is not None else s["acc"] == 1.0


def failure(r: Any, s: Mapping[str, Any]) -> str:
    """One category per question: ``correct``, ``no answer``, ``copied from a prompt``, ``loop limit``,
    ``retrieved, answered wrong``, ``retrieval missed``."""
    info = r.info or {}
    if correct(s):
        return "correct"
    if says_unknown(r.answer):
        return "no answer"
    if info.get("copied_example"):
        return "copied from a prompt"
    if info.get("limit_hit"):
        return "loop limit"
    found = {p for e in r.evidence for p in e.get("passage_ids", [])}
    retrieved = bool(found & set(r.supporting)) or any(answer_in_text(e["text"], r.gold) for e in r.evidence)
    return "retrieved, answered wrong" if retrieved and not s["yes_no"] else "retrieval missed"


FAILURES = ("correct", "no answer", "copied from a prompt", "loop limit", "retrieved, answered wrong", "retrieval missed")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _ci(values: Sequence[float]) -> str:
    if not values:
        return "–"
    mean, low, high = bootstrap_ci(values)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def tper(tpq: float, pool: float, tpq_raptor: float, pool_raptor: float) -> float:
    """SiReRAG eq. (1): (TPQ_A / TPQ_B) / (pool_A / pool_B), B = RAPTOR; below 1 is better."""
    return (tpq / tpq_raptor) / (pool / pool_raptor)


def _build_seconds(build: Mapping[str, Any]) -> str:
    """A build's seconds, marked when it went on from an interrupted one (then they are its last run's)."""
    return f"{build.get('seconds', 0):.0f}" + (" (resumed)" if build.get("resumed") else "")


def _build_calls(build: Mapping[str, Any]) -> str:
    """A build's LLM calls, with those its cache answered."""
    return f"{build.get('llm_calls', 0)}" + (f" ({build['cache_hits']} cached)" if build.get("cache_hits") else "")


def _seconds_per_query(rs: Sequence[Any]) -> str:
    """Mean seconds per query, marked when LLM calls came from a cache: their time is not in it."""
    hits, calls = sum(r.cache_hits for r in rs), sum(r.llm_calls + r.cache_hits for r in rs)
    return f"{_mean([r.seconds for r in rs]):.1f}" + (f" ({hits} of {calls} calls cached)" if hits else "")


def _paired(results: Mapping[str, Sequence[Any]], scored: Mapping[str, dict[str, dict[str, Any]]], method: str,
            ids: set[str] | None = None, baseline: str = BASELINE) -> tuple[int, tuple[float, float, float], tuple[int, int, int]] | None:
    if baseline not in scored or method == baseline:
        return None
    base = scored[baseline]
    pairs = [(scored[method][r.id]["f1"], base[r.id]["f1"]) for r in results[method]
             if r.id in base and (ids is None or r.id in ids)]
    if not pairs:
        return None
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    wins = sum(x > y + 1e-9 for x, y in pairs)
    losses = sum(y > x + 1e-9 for x, y in pairs)
    return len(pairs), paired_bootstrap_ci(a, b), (wins, len(pairs) - wins - losses, losses)


def _resolution(paired: tuple[int, tuple[float, float, float], tuple[int, int, int]]) -> str:
    """``too few`` (fewer than ``MIN_RESOLVED`` pairs), ``ahead`` or ``behind`` (resolved), or ``level``."""
    n, (_, low, high), _ = paired
    return "too few" if n < MIN_RESOLVED else "ahead" if low > 0 else "behind" if high < 0 else "level"


def _words(method: str, paired: tuple[int, tuple[float, float, float], tuple[int, int, int]], baseline: str = BASELINE) -> str:
    n, (mean, low, high), _ = paired
    resolution = _resolution(paired)
    if resolution == "too few":
        return (f"{method} vs {baseline}: {mean:+.3f} F1 [{low:+.3f}, {high:+.3f}] on {n} questions: too few to resolve "
                f"(fewer than {MIN_RESOLVED}).")
    if resolution == "ahead":
        return f"{method} is ahead of {baseline} by {mean:+.3f} F1 [{low:+.3f}, {high:+.3f}] on {n} questions: resolved."
    if resolution == "behind":
        return f"{method} is behind {baseline} by {mean:+.3f} F1 [{low:+.3f}, {high:+.3f}] on {n} questions: resolved."
    return f"{method} vs {baseline}: {mean:+.3f} F1 [{low:+.3f}, {high:+.3f}] on {n} questions: not resolved (the interval spans 0)."


def _at_budget_section(results: Mapping[str, Sequence[Any]], scored: Mapping[str, dict[str, dict[str, Any]]],
                       versions: Mapping[str, Any]) -> list[str]:
    """Each method against naive RAG reading as many tokens (``naive@<method>``): a win that naive at the same
    budget matches is the budget's, not the method's."""
    pairs = [(m, f"{BASELINE}@{m}") for m in results if f"{BASELINE}@{m}" in results]
    if not pairs:
        return []
    lines = ["## Against naive at the same reading budget", "",
             "naive@M reads chunks in rank order up to M's mean evidence tokens (M's own results, rounded to 50).", "",
             "| method | reading budget (tokens) | n | ΔF1 vs naive@method (paired 95% CI) | W/T/L |", "|---|---|---|---|---|"]
    sentences = []
    for method, control in pairs:
        paired = _paired(results, scored, method, baseline=control)
        budget = versions.get(control, {}).get("config", {}).get("reader_tokens", "?")
        if paired is None:
            continue
        n, (mean, low, high), wtl = paired
        lines.append(f"| {method} | {budget} | {n} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] | {'/'.join(map(str, wtl))} |")
        sentences.append(_words(method, paired, control))
    return lines + [""] + sentences + [""]


def markdown(results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]], setting: Mapping[str, Any]) -> str:
    """The report as markdown (``results``: :class:`~multihop_rag.app.evaluate.Result` lists by method)."""
    scored = {m: {r.id: scores(r) for r in rs} for m, rs in results.items()}
    n = max((len(rs) for rs in results.values()), default=0)
    versions = setting.get("methods", {})
    lines = [
        f"# multihop-rag eval: {setting.get('dataset')} / {setting.get('split')}",
        "",
        f"- LLM `{setting.get('llm')}`, embeddings `{setting.get('embed')}`",
        f"- corpus: {setting.get('passages')} passages ({setting.get('corpus')}); up to {n} questions per method",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores; bootstrap: 2000 resamples, seed 0",
        "- code versions: " + ", ".join(f"{m} `{v.get('code')}`" for m, v in versions.items() if m in results),
        "",
        "## Summary",
        "",
        "| method | n | F1 (95% CI) | EM | acc | ΔF1 vs naive (paired 95% CI) | W/T/L vs naive | support@10 | answer@10 | build s | build LLM calls | s / query | LLM calls / query |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sentences = []
    for method, rs in results.items():
        s = scored[method]
        b = builds.get(method, {})
        paired = _paired(results, scored, method)
        delta, wtl = ("–", "–") if paired is None else (f"{paired[1][0]:+.3f} [{paired[1][1]:+.3f}, {paired[1][2]:+.3f}]", "/".join(map(str, paired[2])))
        if paired is not None:
            sentences.append(_words(method, paired))
        support = [v["support@10"] for v in s.values() if v["support@10"] is not None]
        answerable = [v["answer@10"] for v in s.values() if not v["yes_no"] and not v["answer_in_question"]]
        lines.append(
            f"| {method} | {len(rs)} | {_ci([v['f1'] for v in s.values()])} | {_mean([v['em'] for v in s.values()]):.3f} | "
            f"{_mean([v['acc'] for v in s.values()]):.3f} | {delta} | {wtl} | {_mean(support):.3f} | {_mean(answerable):.3f} | "
            f"{_build_seconds(b)} | {_build_calls(b)} | {_seconds_per_query(rs)} | "
            f"{_mean([r.llm_calls + r.cache_hits for r in rs]):.1f} |"
        )
    lines += [""] + sentences + [""]
    lines += _at_budget_section(results, scored, versions)

    lines += ["## Answers", "",
              "HotpotQA EM and F1; acc: a gold answer contained in the answer (countries and demonyms as one); "
              "comparison: on questions naming two options, the share of answers that pick the gold option.", "",
              "| method | EM | F1 | precision | recall | acc | comparison (n) |", "|---|---|---|---|---|---|---|"]
    for method in results:
        rows = list(scored[method].values())
        comp = [v["comparison"] for v in rows if v["comparison"] is not None]
        lines.append(f"| {method} | {_ci([v['em'] for v in rows])} | {_ci([v['f1'] for v in rows])} | {_mean([v['precision'] for v in rows]):.3f} | "
                     f"{_mean([v['recall'] for v in rows]):.3f} | {_ci([v['acc'] for v in rows])} | {_mean(comp):.3f} ({len(comp)}) |")

    lines += ["", "## Retrieval at the same depth", "",
              "A unit counts for the passages whose text it holds (a passage, a chunk of it, a chunk packing several), "
              "never for a summary, an aggregate or an information point; sources@10 counts those for the passages they "
              "were written from too. Answer recall leaves out questions whose gold "
              "answer is in the question or is yes/no (counted in the last columns).", "",
              "| method | " + " | ".join(f"support@{k}" for k in KS) + " | sources@10 | " + " | ".join(f"answer@{k}" for k in KS)
              + " | " + " | ".join(f"answer@{b // 1000}k tok" for b in BUDGETS) + " | evidence tokens | answer in question | yes/no |",
              "|---|" + "---|" * (len(KS) * 2 + len(BUDGETS) + 4)]
    for method in results:
        rows = list(scored[method].values())
        answerable = [v for v in rows if not v["yes_no"] and not v["answer_in_question"]]
        support = [f"{_mean([v[key] for v in rows if v.get(key) is not None]):.3f}" for key in [*(f"support@{k}" for k in KS), "sources@10"]]
        answers = [f"{_mean([v[f'answer@{k}'] for v in answerable]):.3f}" for k in KS]
        budgets = [f"{_mean([v[f'answer@{b // 1000}k'] for v in answerable]):.3f}" for b in BUDGETS]
        lines.append(f"| {method} | " + " | ".join(support + answers + budgets) +
                     f" | {_mean([v['evidence_tokens'] for v in rows]):.0f} | {sum(v['answer_in_question'] for v in rows)} | {sum(v['yes_no'] for v in rows)} |")

    types = sorted({r.type for rs in results.values() for r in rs if r.type})
    if BASELINE in results and len(results) > 1 and types:
        lines += ["", "## Against naive, by question type", "",
                  f"Resolved: the paired interval excludes 0 on at least {MIN_RESOLVED} questions.", "",
                  "| method | type | n | F1 | naive F1 | ΔF1 (paired 95% CI) | W/T/L |", "|---|---|---|---|---|---|---|"]
        for method in results:
            if method == BASELINE:
                continue
            for kind in types:
                ids = {r.id for r in results[method] if r.type == kind}
                paired = _paired(results, scored, method, ids)
                if paired is None:
                    continue
                count, (mean, low, high), outcome = paired
                f1 = _mean([scored[method][i]["f1"] for i in ids if i in scored[BASELINE]])
                base = _mean([scored[BASELINE][i]["f1"] for i in ids if i in scored[BASELINE]])
                mark = " (resolved)" if count >= MIN_RESOLVED and (low > 0 or high < 0) else ""
                lines.append(f"| {method} | {kind} | {count} | {f1:.3f} | {base:.3f} | {mean:+.3f} [{low:+.3f}, {high:+.3f}]{mark} | {'/'.join(map(str, outcome))} |")

    lines += ["", "## Failure categories", "",
              "One per question, the first that applies: a right answer; no answer or a refusal; an answer copied from a "
              "prompt example; a loop that hit its bound; the gold passages or answer were in the evidence but the "
              "answer is wrong; retrieval missed them.", "",
              "| method | " + " | ".join(FAILURES) + " |", "|---|" + "---|" * len(FAILURES)]
    for method, rs in results.items():
        counts = Counter(failure(r, scored[method][r.id]) for r in rs)
        lines.append(f"| {method} | " + " | ".join(str(counts.get(f, 0)) for f in FAILURES) + " |")

    raptor = bool(results.get("raptor")) and builds.get("raptor")
    lines += ["", "## Cost", "",
              "| method | build s | busy share | build LLM calls | build tokens (prompt / generated) | build peak RSS MB | pool size | "
              "TPQ s | LLM calls / query | tokens / query | query peak RSS MB | TPER vs RAPTOR |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for method, rs in results.items():
        b = builds.get(method, {})
        tpq = _mean([r.seconds for r in rs])
        pool = b.get("pool_size") or 0
        ratio = "–"
        if raptor and rs and pool:
            ratio = f"{tper(tpq, pool, _mean([r.seconds for r in results['raptor']]), builds['raptor']['pool_size']):.3f}"
        lines.append(
            f"| {method} | {_build_seconds(b)} | {b.get('busy_share', 0):.2f} | {_build_calls(b)} | "
            f"{b.get('prompt_tokens', 0)} / {b.get('completion_tokens', 0)} | {b.get('peak_rss_mb', 0):.0f} | {pool} | "
            f"{_seconds_per_query(rs)} | {_mean([r.llm_calls + r.cache_hits for r in rs]):.1f} | "
            f"{_mean([r.prompt_tokens + r.completion_tokens for r in rs]):.0f} | {max((r.peak_rss_mb for r in rs), default=0):.0f} | {ratio} |"
        )
    stages = [(m, name, f) for m, b in builds.items() if m in results for name, f in (b.get("stats", {}).get("stages") or {}).items()]
    if stages:
        lines += ["", "Build stages (busy: wall time with at least one LLM call in flight):", "",
                  "| method | stage | s | busy share | calls | tokens (prompt / generated) | calls / s | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
        for method, name, f in stages:
            lines.append(f"| {method} | {name} | {f['seconds']:.0f} | {f['busy_share']:.2f} | {f['calls']} | "
                         f"{f['prompt_tokens']} / {f['completion_tokens']} | {f['calls_per_second']:.2f} | {f['peak_rss_mb']:.0f} |")
    if not raptor:
        lines.append("\nTPER needs RAPTOR's TPQ and pool size: add `raptor` to `--methods`.")
    lines.append("\nBuild figures are from each index's first finished build; later runs reload it. Calls answered "
                 "from the LLM-call cache count as calls but cost almost no time: a query time marked \"cached\" undercounts.")
    return "\n".join(lines) + "\n"


def _verdict(paired: tuple[int, tuple[float, float, float], tuple[int, int, int]] | None) -> str:
    if paired is None:
        return "–"
    _, (mean, low, high), _ = paired
    resolution = _resolution(paired)
    label = f"resolved: {resolution}" if resolution in ("ahead", "behind") else resolution
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}], {label}"


def summary_markdown(evaluations: Sequence[tuple[Mapping[str, Any], Mapping[str, Sequence[Any]]]]) -> str:
    """One table over several evaluations (``(setting, results by method)`` each; the run of record's datasets):
    each method's F1 against naive top-5 and against naive at its reading budget (``naive@M``), paired, and in
    words the differences that are resolved."""
    lines = ["| dataset | corpus | method | n | F1 | ΔF1 vs naive (paired 95% CI) | ΔF1 vs naive@M (paired 95% CI) | s / query |",
             "|---|---|---|---|---|---|---|---|"]
    resolved = []
    for setting, results in evaluations:
        scored = {m: {r.id: scores(r) for r in rs} for m, rs in results.items()}
        dataset = setting.get("dataset")
        for method, rs in sorted(results.items(), key=lambda item: item[0] != BASELINE):  # naive's row first
            if method.startswith(f"{BASELINE}@"):
                continue
            controls = [BASELINE] + [f"{BASELINE}@{method}"] * (f"{BASELINE}@{method}" in results)
            paired = {c: _paired(results, scored, method, baseline=c) for c in controls}
            lines.append(f"| {dataset} | {setting.get('passages', '?')} passages | {method} | {len(rs)} | "
                         f"{_mean([v['f1'] for v in scored[method].values()]):.3f} | {_verdict(paired[BASELINE])} | "
                         f"{_verdict(paired.get(f'{BASELINE}@{method}'))} | {_seconds_per_query(rs)} |")
            resolved += [f"{dataset}: {_words(method, p, c)}" for c, p in paired.items()
                         if p is not None and _resolution(p) in ("ahead", "behind")]
    return "\n".join(lines + ["", *(resolved or ["No difference is resolved."]), ""])


def plot(results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]], path: Path, title: str = "") -> Path:
    """Three panels: F1 against seconds per query, F1 against build LLM calls, supporting recall@k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), dpi=110)
    for method, rs in results.items():
        if not rs:
            continue
        s = [scores(r) for r in rs]
        mean, low, high = bootstrap_ci([v["f1"] for v in s])
        for ax, x in ((axes[0], _mean([r.seconds for r in rs])), (axes[1], builds.get(method, {}).get("llm_calls", 0))):
            ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=3)
            ax.annotate(method, (x, mean), textcoords="offset points", xytext=(5, 5))
        recalls = [_mean([v[f"support@{k}"] for v in s if v[f"support@{k}"] is not None]) for k in KS]
        axes[2].plot(KS, recalls, marker="o", label=method)
    axes[0].set_xlabel("seconds per query")
    axes[1].set_xlabel("LLM calls to build")
    axes[1].set_xscale("symlog")
    for ax in axes[:2]:
        ax.set_ylabel("F1 (95% bootstrap interval)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[2].set_xlabel("k (units of evidence)")
    axes[2].set_ylabel("supporting-passage recall@k")
    axes[2].set_xticks(KS)
    axes[2].set_ylim(0, 1.02)
    axes[2].grid(alpha=0.3)
    axes[2].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    out: Path, results: Mapping[str, Sequence[Any]], builds: Mapping[str, Mapping[str, Any]], setting: Mapping[str, Any]
) -> tuple[Path, Path]:
    """Write ``out/report.md`` and ``out/report.png``; returns their paths."""
    md = out / "report.md"
    md.write_text(markdown(results, builds, setting), encoding="utf-8")
    png = plot(results, builds, out / "report.png", f"{setting.get('dataset')} / {setting.get('split')}, {setting.get('llm')}")
    return md, png
