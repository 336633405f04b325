"""Run methods over a dataset's questions and record everything the report scores: ``multihop-rag
eval`` in Python.

Layout of the output folder:

- ``eval.json``: dataset, split, corpus, models, and per method its code version (a hash of its
  source) and every setting; a folder serves one dataset/model setting.
- ``indexes/<method>/``: each method's persisted index, built once and reloaded afterwards (rebuilt
  when the method's code or settings changed).
- ``llm_calls.sqlite``: the LLM-call cache of the folder's builds and answers (an interrupted build
  resumes from it).
- ``builds.json``: per method, the build's wall time by stage, time with a call in flight, LLM calls,
  tokens, peak RSS and the index's statistics.
- ``results.jsonl``: one line per (method, question): the answer, the gold answers, the ranked
  evidence (ids, titles, texts, the passages each holds), the outcome (stop reason, limits, copies)
  and the cost (LLM calls, cache hits, tokens, seconds, peak RSS). Scores are computed by the report
  from these lines, so a new metric needs no re-run. A re-run skips the lines already there for the
  same code version and settings; lines of an older version are set aside (``results.stale.jsonl``)
  and their questions answered again.
- ``report.md`` / ``report.png``: see :mod:`multihop_rag.app.report`.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from multihop_rag.app.report import write_report
from multihop_rag.corpus import Passage, Question
from multihop_rag.errors import EvalSettingError, IndexFolderError, StoreError
from multihop_rag.indexing.persistence import write_atomic
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.usage import Usage, peak_rss_mb
from multihop_rag.method import Answer, Method, MethodIndex, Models, source_hash

logger = logging.getLogger(__name__)

MAX_FAILURES_IN_A_ROW = 3
"""A method that fails this many questions in a row stops the run: the fault is not one question's."""

__all__ = ["Result", "Entry", "run", "build", "evaluate", "read_results", "collect"]



@dataclass
class Entry:
    """A method and the settings it runs with in one evaluation."""

    method: Method
    config: BaseModel
    budget_of: str | None = None
    """Naive RAG as a control: read as many tokens per question as this method's evidence holds on average
    (its results in the same folder; set just before this entry runs). Named ``naive@<method>``."""

    @property
    def name(self) -> str:
        return f"{self.method.name}@{self.budget_of}" if self.budget_of else self.method.name

    def version(self) -> dict[str, Any]:
        """What makes this method's answers: its code and its settings."""
        return {"code": source_hash(self.method.source_packages), "config": self.config.model_dump(mode="json")}


@dataclass
class Result:
    """One answered question, with what the report needs to score it."""

    method: str
    id: str
    question: str
    type: str | None
    answer: str
    gold: list[str]
    supporting: list[str]
    supporting_titles: list[str]
    evidence: list[dict[str, Any]]
    """Ranked: ``{"id", "title", "text", "score", "passage_ids", "kind", "source_ids"}``."""
    info: dict[str, Any]
    seconds: float
    llm_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    busy_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    code: str = ""
    config: dict[str, Any] = field(default_factory=dict)


def _row(method: str, question: Question, answer: Answer, spent: Usage, version: dict[str, Any]) -> Result:
    return Result(
        method=method,
        id=question.id,
        question=question.question,
        type=question.type,
        answer=answer.text,
        gold=list(question.answers),
        supporting=list(question.supporting),
        supporting_titles=list(question.supporting_titles),
        evidence=[asdict(e) for e in answer.evidence],
        info=answer.info,
        seconds=answer.seconds,
        llm_calls=int(spent.calls),
        cache_hits=int(spent.cache_hits),
        prompt_tokens=int(spent.prompt_tokens),
        completion_tokens=int(spent.completion_tokens),
        busy_seconds=round(spent.busy_seconds, 2),
        peak_rss_mb=round(peak_rss_mb(), 1),
        code=version["code"],
        config=version["config"],
    )


def read_results(out: Path) -> list[Result]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    return [Result(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _set_aside_stale(out: Path, versions: dict[str, dict[str, Any]]) -> None:
    """Move lines of a method whose code or settings changed to ``results.stale.jsonl``."""
    rows = read_results(out)
    current = [r for r in rows if r.method not in versions or {"code": r.code, "config": r.config} == versions[r.method]]
    stale = [r for r in rows if r not in current]
    if not stale:
        return
    logger.warning("set aside %d result lines of changed methods (%s)", len(stale), sorted({r.method for r in stale}))
    with (out / "results.stale.jsonl").open("a") as fh:
        fh.writelines(json.dumps(asdict(r)) + "\n" for r in stale)
    write_atomic(out / "results.jsonl", "".join(json.dumps(asdict(r)) + "\n" for r in current))


def run(
    entry: Entry,
    index: MethodIndex,
    questions: Sequence[Question],
    out: Path,
    models: Models,
    *,
    show_progress: bool = True,
) -> list[Result]:
    """Answer every question not yet in ``out/results.jsonl`` for this method version; returns all of
    the method's results. A question whose answering raises is logged to ``out/errors.jsonl`` and
    skipped (left for a re-run), unless ``MAX_FAILURES_IN_A_ROW`` fail in a row: then it is raised."""
    out.mkdir(parents=True, exist_ok=True)
    path, version = out / "results.jsonl", entry.version()
    done = {r.id: r for r in read_results(out) if r.method == entry.name}
    todo = [q for q in questions if q.id not in done]
    in_a_row = 0
    with path.open("a") as fh, (out / "errors.jsonl").open("a") as errors:
        for question in tqdm(todo, desc=f"answering ({entry.name})", disable=not show_progress):
            before = models.usage()
            try:
                answer = index.answer(question.question)
            except Exception as exc:
                in_a_row += 1
                if in_a_row >= MAX_FAILURES_IN_A_ROW:
                    raise
                logger.warning("%s failed on %s (%s: %s); skipped, a re-run retries it", entry.name, question.id,
                               type(exc).__name__, exc)
                errors.write(json.dumps({"method": entry.name, "id": question.id, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
                errors.flush()
                continue
            in_a_row = 0
            result = _row(entry.name, question, answer, models.usage() - before, version)
            fh.write(json.dumps(asdict(result)) + "\n")
            fh.flush()
            done[question.id] = result
    return [done[q.id] for q in questions if q.id in done]


def build(
    entry: Entry, passages: Sequence[Passage], models: Models, out: Path, *, load: bool = True
) -> tuple[MethodIndex | None, dict[str, Any]]:
    """Build (or reload) ``entry``'s index in ``out/indexes/<method>``. The first finished build's
    figures are kept in ``out/builds.json`` (``resumed``: it continued a killed one, on this machine or
    from a committed call cache, replaying the calls it had finished, so its seconds are not a whole
    build's); a finished index whose folder is gone (a fresh checkout) is rebuilt from the call cache and
    keeps those figures, the rebuild's beside them (``rebuilt``); an index of another code version or
    settings is rebuilt. ``load=False`` skips reloading a finished build
    (its method has nothing left to answer)."""
    path, folder = out / "builds.json", out / "indexes" / entry.name
    builds = json.loads(path.read_text()) if path.exists() else {}
    record, version = builds.get(entry.name, {}), entry.version()
    finished = record.get("status") == "done" and record.get("version") == version
    if finished:
        if not load:
            return None, record
        try:
            return entry.method.load(folder, models, entry.config), record
        except (IndexFolderError, StoreError) as exc:
            logger.warning("%s: the finished index cannot be reloaded (%s); building it again", entry.name, exc)
    # a killed build of this version: its folder (if this machine has it) and its calls in the cache are reused
    resumed = record.get("status") == "started" and record.get("version") == version
    if folder.exists() and (finished or (record and not resumed)):
        shutil.rmtree(folder)  # a finished index that would not reload, or another version's
    if not finished:  # a finished build's record stays while its index is rebuilt (a fresh checkout has none)
        builds[entry.name] = {"status": "started", "version": version}
        write_atomic(path, json.dumps(builds, indent=1))
    before, started = models.usage(), time.perf_counter()
    index = entry.method.build(passages, models, folder, entry.config, overwrite=True)  # the folder is the evaluation's
    spent, seconds = models.usage() - before, time.perf_counter() - started
    if finished:  # the figures stay those of the build that made the calls; the rebuild's are beside them
        rebuilt = {"seconds": round(seconds, 1), "llm_calls": spent.calls, "cache_hits": spent.cache_hits}
        builds[entry.name] = {**record, "rebuilt": rebuilt}
        write_atomic(path, json.dumps(builds, indent=1, default=str))
        return index, builds[entry.name]
    stats = index.stats()
    builds[entry.name] = {
        "status": "done",
        "version": version,
        "seconds": round(seconds, 1),
        "busy_seconds": round(spent.busy_seconds, 1),
        "busy_share": round(spent.busy_seconds / seconds, 3) if seconds else 0.0,
        "llm_calls": spent.calls,
        "cache_hits": spent.cache_hits,
        "prompt_tokens": spent.prompt_tokens,
        "completion_tokens": spent.completion_tokens,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "resumed": resumed and spent.cache_hits > 0,  # a killed build that finished no call left nothing to reuse
        "pool_size": stats.get("pool_size", len(passages)),
        "stats": stats,
    }
    write_atomic(path, json.dumps(builds, indent=1, default=str))
    return index, builds[entry.name]


def _check_setting(out: Path, setting: dict[str, Any], versions: dict[str, dict[str, Any]]) -> None:
    path = out / "eval.json"
    before = json.loads(path.read_text()) if path.exists() else {}
    changed = [k for k in setting if k in before and before[k] != setting[k]]
    if changed:
        raise EvalSettingError(
            f"{out} holds an evaluation with another {', '.join(changed)} "
            f"({', '.join(f'{k}={before[k]}' for k in changed)}): use another --out folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    methods = {**before.get("methods", {}), **versions}
    write_atomic(path, json.dumps({**setting, "methods": methods}, indent=1))


def evaluate(
    entries: Sequence[Entry],
    passages: Sequence[Passage],
    questions: Sequence[Question],
    models: Models,
    out: Path,
    setting: dict[str, Any],
    *,
    show_progress: bool = True,
) -> tuple[dict[str, list[Result]], dict[str, dict[str, Any]]]:
    """Build each method's index once, answer every question with it, and write the report (again
    after each method, so an interrupted run still reports the methods it finished).

    ``setting`` (dataset, split, models, …) is stored in ``out/eval.json`` with each method's code
    version and settings; a folder of another setting is refused rather than mixed, and a method whose
    code or settings changed is re-run. Returns results and builds by method (every method the folder
    holds, so a run adding one reports all)."""

    versions = {e.name: e.version() for e in entries if e.budget_of is None}
    _check_setting(out, setting, versions)
    _set_aside_stale(out, versions)
    for listed in entries:
        entry = _at_budget(listed, out) if listed.budget_of is not None else listed
        if entry is None:  # a control whose method has not answered
            continue
        if entry.budget_of is not None:  # its settings are known only now
            _check_setting(out, setting, {entry.name: entry.version()})
            _set_aside_stale(out, {entry.name: entry.version()})
        answered = {r.id for r in read_results(out) if r.method == entry.name}
        unanswered = any(q.id not in answered for q in questions)
        index, _ = build(entry, passages, models, out, load=unanswered)
        if index is not None:
            run(entry, index, questions, out, models, show_progress=show_progress)
        results, builds = collect(out, questions)
        write_report(out, results, builds, json.loads((out / "eval.json").read_text()))
    return collect(out, questions)


def reading_budget(results: Sequence[Result]) -> int:
    """A method's reading budget: the mean tokens of the evidence its answers were built from (rounded to 50,
    so that a few more questions do not change the control's settings)."""
    tokens = [sum(count_tokens(e["text"]) for e in r.evidence) for r in results]
    return max(50, round(sum(tokens) / len(tokens) / 50) * 50) if tokens else 0


def _at_budget(entry: Entry, out: Path) -> Entry | None:
    """``entry`` with its reading budget set from its method's results in ``out``; None (and a warning) without any."""
    measured = [r for r in read_results(out) if r.method == entry.budget_of]
    if not measured:
        logger.warning("%s: %s has no results in %s yet; run it first (list it before %s)", entry.name, entry.budget_of,
                       out, entry.name)
        return None
    config = entry.config.model_copy(update={"reader_tokens": reading_budget(measured)})
    return Entry(entry.method, type(entry.config).model_validate(config.model_dump()), entry.budget_of)


def collect(out: Path, questions: Sequence[Question] | None = None) -> tuple[dict[str, list[Result]], dict[str, Any]]:
    """An evaluation folder's results by method (of ``questions`` only, if given) and its builds."""
    wanted = None if questions is None else {q.id for q in questions}
    results: dict[str, list[Result]] = {}
    for r in read_results(out):
        if wanted is None or r.id in wanted:
            results.setdefault(r.method, []).append(r)
    builds_path = out / "builds.json"
    builds = json.loads(builds_path.read_text()) if builds_path.exists() else {}
    return results, builds
