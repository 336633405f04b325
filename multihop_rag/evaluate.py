"""Run methods over a dataset's questions and score them: ``multihop-rag eval`` in Python.

Layout of the output folder:

- ``eval.json``: dataset, split, corpus, models; a folder serves one such setting.
- ``indexes/<method>/``: each method's persisted index, built once and reloaded afterwards.
- ``builds.json``: per method, build wall time, LLM calls and tokens, the index's statistics.
- ``results.jsonl``: one scored answer per line (method, answer, gold, EM, F1, precision, recall,
  answer recall of the evidence, LLM calls, tokens, seconds). A re-run skips the (method,
  question) pairs already there, so an interrupted evaluation resumes.
- ``report.md`` / ``report.png``: see :mod:`multihop_rag.report`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from multihop_rag.cache import Usage
from multihop_rag.corpus import Passage, Question
from multihop_rag.metrics import answer_recall_at_k, exact_match, precision_recall_f1
from multihop_rag.naive import Answer
from multihop_rag.stores import StoreError

logger = logging.getLogger(__name__)

MAX_FAILURES_IN_A_ROW = 3
"""A method that fails this many questions in a row stops the run: the fault is not one question's."""

__all__ = ["Result", "EvalSettingError", "score", "run", "summarize", "build", "evaluate"]


class EvalSettingError(StoreError):
    """The output folder holds an evaluation of another dataset, split or model."""


@dataclass
class Result:
    """One scored answer."""

    method: str
    id: str
    question: str
    answer: str
    gold: list[str]
    em: float
    f1: float
    precision: float
    recall: float
    answer_recall: float
    """1 if any piece of evidence the method used contains a gold answer."""
    supporting_recall: float
    """Share of the gold supporting passages among the evidence, by passage id or title (a summary
    node matches neither)."""
    seconds: float
    evidence_ids: list[str]
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    """LLM calls answered from the cache (a question re-run after an interruption)."""


def _supporting_recall(answer: Answer, question: Question) -> float:
    """Share of ``question``'s supporting passages whose id or title is among the evidence's; titles
    count because some methods retrieve chunks of titled documents rather than passages."""
    if not question.supporting:
        return 0.0
    ids, titles = {e.id for e in answer.evidence}, {e.title for e in answer.evidence if e.title}
    names = question.supporting_titles if len(question.supporting_titles) == len(question.supporting) else [""] * len(question.supporting)
    return sum(pid in ids or title in titles for pid, title in zip(question.supporting, names, strict=True)) / len(question.supporting)


def score(method: str, question: Question, answer: Answer, spent: Usage | None = None) -> Result:
    """Score ``answer`` against ``question``'s gold answers and supporting passages (all evidence counts)."""
    precision, recall, f1 = precision_recall_f1(answer.text, question.answers)
    ids = [e.id for e in answer.evidence]
    spent = spent or Usage()
    return Result(
        method=method,
        id=question.id,
        question=question.question,
        answer=answer.text,
        gold=question.answers,
        em=exact_match(answer.text, question.answers),
        f1=f1,
        precision=precision,
        recall=recall,
        answer_recall=answer_recall_at_k([e.text for e in answer.evidence], question.answers, len(ids)),
        supporting_recall=_supporting_recall(answer, question),
        seconds=answer.seconds,
        evidence_ids=ids,
        llm_calls=int(spent.calls),
        prompt_tokens=int(spent.prompt_tokens),
        completion_tokens=int(spent.completion_tokens),
        cache_hits=int(spent.cache_hits),
    )


def _read_results(path: Path) -> list[Result]:
    if not path.exists():
        return []
    return [Result(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def run(
    method: str,
    answer_fn: Callable[[str], Answer],
    questions: Sequence[Question],
    out: Path,
    *,
    usage: Callable[[], Usage] | None = None,
    show_progress: bool = True,
) -> list[Result]:
    """Answer and score every question not yet in ``out/results.jsonl``; returns all of ``method``'s
    results. ``usage`` returns the LLM usage so far; its change over a question is recorded. A question
    whose answering raises is logged to ``out/errors.jsonl`` and skipped (left for a re-run), unless
    ``MAX_FAILURES_IN_A_ROW`` questions fail in a row: then the error is raised."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done = {r.id: r for r in _read_results(path) if r.method == method}
    todo = [q for q in questions if q.id not in done]
    in_a_row = 0
    with path.open("a") as fh, (out / "errors.jsonl").open("a") as errors:
        for question in tqdm(todo, desc=f"answering ({method})", disable=not show_progress):
            before = usage() if usage else None
            try:
                answer = answer_fn(question.question)
            except Exception as exc:
                in_a_row += 1
                if in_a_row >= MAX_FAILURES_IN_A_ROW:
                    raise
                logger.warning("%s failed on %s (%s: %s); skipped, a re-run retries it", method, question.id,
                               type(exc).__name__, exc)
                errors.write(json.dumps({"method": method, "id": question.id, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
                errors.flush()
                continue
            in_a_row = 0
            spent = usage() - before if usage and before else None
            result = score(method, question, answer, spent)
            fh.write(json.dumps(asdict(result)) + "\n")
            fh.flush()
            done[question.id] = result
    return [done[q.id] for q in questions if q.id in done]


def summarize(results: Sequence[Result]) -> dict[str, float]:
    """Means of the per-question scores and costs."""
    if not results:
        return {}
    keys = ("em", "f1", "precision", "recall", "answer_recall", "supporting_recall", "seconds", "llm_calls",
            "prompt_tokens", "completion_tokens")
    return {k: sum(getattr(r, k) for r in results) / len(results) for k in keys} | {"n": len(results)}


def build(runner: Any, passages: Sequence[Passage], models: Any, out: Path, *, load: bool = True) -> dict[str, Any]:
    """Build (or reload) ``runner``'s index in ``out/indexes/<method>``; the first finished build's
    time, LLM calls and tokens are kept in ``out/builds.json`` (``resumed``: it continued a killed one).
    ``load=False`` skips reloading a finished build (its method has nothing left to answer)."""
    path = out / "builds.json"
    builds = json.loads(path.read_text()) if path.exists() else {}
    record = builds.get(runner.name, {})
    if record.get("status") == "done":
        if load:
            runner.build(passages, models, out / "indexes" / runner.name)
        return record
    resumed = record.get("status") == "started"
    builds[runner.name] = {"status": "started"}
    path.write_text(json.dumps(builds, indent=1))
    before, started = models.usage(), time.perf_counter()
    stats = runner.build(passages, models, out / "indexes" / runner.name)
    spent = models.usage() - before
    builds[runner.name] = {
        "status": "done",
        "seconds": round(time.perf_counter() - started, 1),
        "llm_calls": spent.calls,
        "cache_hits": spent.cache_hits,
        "prompt_tokens": spent.prompt_tokens,
        "completion_tokens": spent.completion_tokens,
        "llm_seconds": round(spent.seconds, 1),
        "resumed": resumed,
        "pool_size": stats.get("pool_size", len(passages)),
        "stats": stats,
    }
    path.write_text(json.dumps(builds, indent=1, default=str))
    return builds[runner.name]


def _check_setting(out: Path, setting: dict[str, Any]) -> None:
    path = out / "eval.json"
    if path.exists():
        before = json.loads(path.read_text())
        changed = [k for k in setting if k in before and before[k] != setting[k]]
        if changed:
            raise EvalSettingError(
                f"{out} holds an evaluation with another {', '.join(changed)} "
                f"({', '.join(f'{k}={before[k]}' for k in changed)}): use another --out folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(setting, indent=1))


def evaluate(
    runners: Sequence[Any],
    passages: Sequence[Passage],
    questions: Sequence[Question],
    models: Any,
    out: Path,
    setting: dict[str, Any],
    *,
    show_progress: bool = True,
) -> tuple[dict[str, list[Result]], dict[str, dict[str, Any]]]:
    """Build each runner's index once, answer every question with it, and write the report (again
    after each method, so an interrupted run still reports the methods it finished).

    ``setting`` (dataset, split, models, …) is stored in ``out/eval.json``; a folder that holds an
    evaluation of another setting is refused rather than mixed. Returns results and builds by method.
    """
    from multihop_rag.report import write_report

    _check_setting(out, setting)
    results, builds = {}, {}
    for runner in runners:
        answered = {r.id for r in _read_results(out / "results.jsonl") if r.method == runner.name}
        unanswered = any(q.id not in answered for q in questions)
        builds[runner.name] = build(runner, passages, models, out, load=unanswered)
        results[runner.name] = run(
            runner.name, runner.answer, questions, out, usage=models.usage, show_progress=show_progress
        )
        write_report(out, results, builds, setting)
    return results, builds
