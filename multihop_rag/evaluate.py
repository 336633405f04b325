"""Run a method over a dataset's questions and score it (EM, F1, precision, recall, answer recall).

Results go to ``results.jsonl`` (one line per question and method); a re-run skips the
questions already there, so an interrupted evaluation resumes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm.auto import tqdm

from multihop_rag.corpus import Question
from multihop_rag.metrics import answer_recall_at_k, exact_match, precision_recall_f1, supporting_recall_at_k
from multihop_rag.naive import Answer

__all__ = ["Result", "score", "run", "summarize"]


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
    supporting_recall: float
    seconds: float
    evidence_ids: list[str]


def score(method: str, question: Question, answer: Answer, k: int = 5) -> Result:
    """Score ``answer`` against ``question``'s gold answers and supporting passages."""
    precision, recall, f1 = precision_recall_f1(answer.text, question.answers)
    ids = [e.id for e in answer.evidence]
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
        answer_recall=answer_recall_at_k([e.text for e in answer.evidence], question.answers, k),
        supporting_recall=supporting_recall_at_k(ids, question.supporting, k),
        seconds=answer.seconds,
        evidence_ids=ids,
    )


def run(
    method: str,
    answer_fn: Callable[[str], Answer],
    questions: Sequence[Question],
    out: Path,
    *,
    show_progress: bool = True,
) -> list[Result]:
    """Answer and score every question not yet in ``out/results.jsonl``; returns all of ``method``'s results."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done: dict[str, Result] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["method"] == method:
                done[record["id"]] = Result(**record)
    todo = [q for q in questions if q.id not in done]
    with path.open("a") as fh:
        for question in tqdm(todo, desc=f"answering ({method})", disable=not show_progress):
            result = score(method, question, answer_fn(question.question))
            fh.write(json.dumps(asdict(result)) + "\n")
            fh.flush()
            done[question.id] = result
    return [done[q.id] for q in questions if q.id in done]


def summarize(results: Sequence[Result]) -> dict[str, float]:
    """Means of the per-question scores."""
    if not results:
        return {}
    keys = ("em", "f1", "precision", "recall", "answer_recall", "supporting_recall", "seconds")
    return {k: sum(getattr(r, k) for r in results) / len(results) for k in keys} | {"n": len(results)}
