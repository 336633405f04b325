"""Load user documents and the multi-hop QA sets of ``shared/data``.

- :func:`load_documents`: a folder of .txt/.md files, or a JSONL file of ``{id, title, text}``.
  Unreadable or empty files are reported (logged and counted in :class:`LoadReport`) and skipped;
  nothing readable at all raises :class:`CorpusError`.
- :func:`load_dataset`: ``(passages, questions)`` of a dataset split, from ``data_dir``,
  ``$MULTIHOP_RAG_DATA``, or a ``shared/data`` folder next to the working tree.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from multihop_rag.errors import CorpusError

__all__ = [
    "Passage",
    "Question",
    "LoadReport",
    "DATASETS",
    "load_documents",
    "load_dataset",
    "load_pooled",
    "load_questions",
    "load_demo",
    "data_dir",
]

log = logging.getLogger(__name__)

DATASETS = ("musique", "hotpotqa", "2wikimultihopqa", "bamboogle", "multihoprag")
TEXT_SUFFIXES = (".txt", ".md")



@dataclass(frozen=True)
class Passage:
    """One passage (or document) of a corpus."""

    id: str
    title: str
    text: str

    def to_llama_index(self) -> Any:
        """A LlamaIndex ``Document`` (``id_`` = passage id, title in metadata)."""
        from llama_index.core import Document

        return Document(id_=self.id, text=self.text, metadata={"title": self.title, "passage_id": self.id})

    def to_langchain(self) -> Any:
        """A LangChain ``Document`` (id and title in metadata, ``id`` set)."""
        from langchain_core.documents import Document

        return Document(id=self.id, page_content=self.text, metadata={"title": self.title, "passage_id": self.id})


@dataclass(frozen=True)
class Question:
    """A question record of the shared data schema (see shared/data/README.md)."""

    id: str
    dataset: str
    question: str
    answers: list[str]
    supporting: list[str] = field(default_factory=list)
    supporting_titles: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    type: str | None = None
    hops: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Question:
        names = cls.__dataclass_fields__
        values = {k: v for k, v in record.items() if k in names}
        for listed in ("answers", "supporting", "supporting_titles", "candidates"):
            if isinstance(values.get(listed), str):  # one title given as text, not a list of its letters
                values[listed] = [values[listed]]
        return cls(**values)


@dataclass
class LoadReport:
    """What a load read and what it skipped, with reasons."""

    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, where: str, why: str) -> None:
        self.skipped.append((where, why))
        log.warning("skipped %s: %s", where, why)


def _passage_id(title: str, text: str) -> str:
    return "doc-" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def _read_jsonl(path: Path, report: LoadReport) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        report.skip(str(path), f"unreadable ({exc.__class__.__name__})")
        return records
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            report.skip(f"{path}:{number}", f"not JSON ({exc.msg})")
            continue
        if not isinstance(record, dict):
            report.skip(f"{path}:{number}", "not a JSON object")
            continue
        records.append(record)
    return records


def _passages_from_jsonl(path: Path, report: LoadReport) -> list[Passage]:
    passages = []
    for record in _read_jsonl(path, report):
        text = str(record.get("text") or "").strip()
        if not text:
            report.skip(f"{path} id={record.get('id')}", "no text")
            continue
        title = str(record.get("title") or "")
        passages.append(Passage(id=str(record.get("id") or _passage_id(title, text)), title=title, text=text))
    counts = Counter(p.id for p in passages)
    if repeated := [i for i, n in counts.items() if n > 1]:
        shown = ", ".join(repr(i) for i in repeated[:5]) + (f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
        raise CorpusError(f"{path}: duplicate id {shown} ({sum(counts[i] for i in repeated)} records): "
                          "give each record its own id, or drop the copies")
    return passages


def _passage_from_file(path: Path, root: Path, report: LoadReport) -> Passage | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        report.skip(str(path), "not UTF-8 text (binary file?)")
        return None
    except OSError as exc:
        report.skip(str(path), f"unreadable ({exc.strerror or exc.__class__.__name__})")
        return None
    if "\x00" in text:
        report.skip(str(path), "binary file")
        return None
    if not text:
        report.skip(str(path), "empty")
        return None
    title = path.stem.replace("_", " ")
    if path.suffix == ".md" and text.startswith("# "):
        title = text.splitlines()[0][2:].strip()
    return Passage(id=str(path.relative_to(root)), title=title, text=text)


def load_documents(path: str | Path, report: LoadReport | None = None) -> list[Passage]:
    """Passages from a folder of .txt/.md files (recursively) or a JSONL file of ``{id, title, text}``."""
    report = report if report is not None else LoadReport()
    root = Path(path).expanduser()
    if not root.exists():
        raise CorpusError(f"{root} does not exist")
    if root.is_file():
        if root.suffix == ".jsonl":
            passages = _passages_from_jsonl(root, report)
        elif root.suffix in TEXT_SUFFIXES:
            passages = [p for p in [_passage_from_file(root, root.parent, report)] if p]
        else:
            raise CorpusError(f"{root}: expected a folder, a .jsonl, .txt or .md file")
    else:
        files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
        passages = []
        for file in files:
            if file.suffix == ".jsonl":
                passages.extend(_passages_from_jsonl(file, report))
            elif file.suffix in TEXT_SUFFIXES:
                if passage := _passage_from_file(file, root, report):
                    passages.append(passage)
            else:
                report.skip(str(file), f"unsupported file type {file.suffix or '(none)'}")
    report.loaded = len(passages)
    if not passages:
        detail = f" ({len(report.skipped)} skipped: {report.skipped[0][1]} …)" if report.skipped else ""
        raise CorpusError(f"no readable .txt, .md or .jsonl documents in {root}{detail}")
    return passages


def data_dir(explicit: str | Path | None = None) -> Path:
    """The shared data folder: ``explicit``, ``$MULTIHOP_RAG_DATA``, or ``shared/data`` found upwards."""
    if explicit or os.environ.get("MULTIHOP_RAG_DATA"):
        path = Path(explicit or os.environ["MULTIHOP_RAG_DATA"]).expanduser()
        if not path.is_dir():
            raise CorpusError(f"data folder {path} does not exist")
        return path
    starts = [Path.cwd(), Path(__file__).resolve().parent]
    for start in starts:
        for folder in [start, *start.parents]:
            for candidate in (folder / "shared" / "data", folder.parent / "shared" / "data"):
                if candidate.is_dir():
                    return candidate
    raise CorpusError("no shared/data folder found: pass --data-dir or set MULTIHOP_RAG_DATA")


def load_dataset(
    name: str, split: str = "smoke", data_dir_path: str | Path | None = None
) -> tuple[list[Passage], list[Question]]:
    """``(passages, questions)`` of dataset ``name`` and ``split`` (smoke or dev).

    Datasets without a corpus here (bamboogle, multihoprag) return no passages.
    """
    if name not in DATASETS:
        raise CorpusError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    folder = data_dir(data_dir_path) / name
    questions_file = folder / f"questions_{split}.jsonl"
    if not questions_file.is_file():
        raise CorpusError(f"no {split!r} split for {name}: {questions_file} is missing")
    report = LoadReport()
    questions = [Question.from_record(r) for r in _read_jsonl(questions_file, report)]
    corpus_file = folder / f"corpus_{split}.jsonl"
    passages = _passages_from_jsonl(corpus_file, report) if corpus_file.is_file() else []
    return passages, questions


def load_pooled(
    name: str, n_questions: int = 30, data_dir_path: str | Path | None = None, *, start: int = 0
) -> tuple[list[Passage], list[Question]]:
    """``n_questions`` dev questions from the ``start``-th (0: the first; 100: the tuning questions 101–200)
    and the pool of all their candidate passages.

    The benchmark protocol (DESIGN.md): retrieval is measured on a pooled corpus, since on a
    question's own ~10–20 candidates top-20 retrieves nearly everything.
    """
    passages, questions = load_dataset(name, "dev", data_dir_path)
    questions = questions[start : start + n_questions]
    wanted = {c for q in questions for c in q.candidates}
    return [p for p in passages if p.id in wanted], questions


def load_questions(path: str | Path) -> list[Question]:
    """A user's questions: a JSONL of ``{question, answers[, id, supporting_titles, type]}``.

    Every line must be such a record: a bad line raises :class:`CorpusError` naming it (scoring
    on a silently shorter question set would mislead).
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise CorpusError(f"{file} does not exist")
    report = LoadReport()
    records = _read_jsonl(file, report)
    if report.skipped:
        where, why = report.skipped[0]
        raise CorpusError(f"{where}: {why}")
    questions = []
    for number, record in enumerate(records, 1):
        answers = record.get("answers", record.get("answer"))
        answers = [answers] if isinstance(answers, str) else answers
        if not str(record.get("question") or "").strip() or not answers or not all(isinstance(a, str) for a in answers):
            raise CorpusError(f"{file}: record {number} needs a 'question' and 'answers' (a list of strings)")
        questions.append(Question.from_record({"id": f"q{number}", "dataset": file.stem, **record, "answers": answers}))
    if not questions:
        raise CorpusError(f"{file} holds no questions")
    return questions


def load_demo() -> tuple[list[Passage], list[Question]]:
    """The bundled demo: 15 passages about the fictional country of Astrel (so a model cannot answer
    from memory) and three two-hop questions about them. Used by ``multihop-rag demo`` and the cookbooks."""
    data = resources.files("multihop_rag") / "data"
    report = LoadReport()
    with resources.as_file(data / "demo_corpus.jsonl") as path:
        passages = _passages_from_jsonl(path, report)
    with resources.as_file(data / "demo_questions.jsonl") as path:
        questions = [Question.from_record(r) for r in _read_jsonl(path, report)]
    return passages, questions
