"""Reading a small model's replies in HiRAG: the answer line, the first line, "unknown", "That's enough.",
and a few-shot example copied from the prompt."""

from __future__ import annotations

import re

from langgraph_hirag import prompts
from multihop_rag.llm.calls import Reply
from multihop_rag.metrics import normalize_answer

__all__ = ["LINE", "NEXT_EXAMPLE", "answer_line", "final_line", "first_line", "said_enough", "copies_example",
           "names_example_entity", "invents_words", "invents_names"]

LINE = ["\n"]
"""Stop sequence for one-line outputs (entity, sub-question, rewrite, short answer)."""
NEXT_EXAMPLE = ["\nQuestion:", "\nInput:"]
"""Stop sequences that keep a small model from writing further few-shot examples."""

_ANSWER_LINE = re.compile(r"^\W*answer\s*(?:the question)?\s*:\s*(.*)$", re.IGNORECASE)
_PREFIX = re.compile(
    r"^\W*(?:\d+(?:st|nd|rd|th)\s+)?(?:simple question|sub-?question|question|entity|output|rewritten question)\s*:\s*",
    re.IGNORECASE,
)


def answer_line(reply: Reply) -> str:
    """The text after the last "Answer:" line; "" when the reply has none, or was cut on it."""
    lines = _lines(reply)
    for line in reversed(lines):
        match = _ANSWER_LINE.match(line)
        if match and match.group(1).strip():
            return "" if reply.truncated and line == lines[-1] else match.group(1).strip()
    return ""


def final_line(reply: Reply) -> str:
    """The text after the last "Answer:" line, else the last non-empty line; a reply cut at the token
    cap before its "Answer:" line has no answer: ""."""
    lines = _lines(reply)
    return answer_line(reply) or ("" if reply.truncated or not lines else lines[-1])


def _lines(reply: Reply) -> list[str]:
    return [line.strip() for line in reply.text.strip().splitlines() if line.strip()]


def first_line(reply: Reply) -> str:
    """The first line without a "Question:"-like prefix; a reply cut on its only line: ""."""
    lines = _lines(reply)
    if not lines or (reply.truncated and len(lines) == 1):
        return ""
    return _PREFIX.sub("", lines[0]).strip().strip('"').strip()


def said_enough(text: str) -> bool:
    """Whether a Decomposer turn ends the decomposition ("That's enough.")."""
    return "that's enough" in text.lower().replace("’", "'") or text.strip().lower().rstrip(".!") == "enough"


_EXAMPLE_ANSWERS = {normalize_answer(a) for a in prompts.EXAMPLE_ANSWERS}
_EXAMPLE_ENTITIES = {normalize_answer(e) for e in prompts.EXAMPLE_ENTITIES}


def copies_example(answer: str) -> bool:
    """Whether ``answer`` is a few-shot example's answer (a small model copying the prompt)."""
    return bool(answer.strip()) and normalize_answer(answer) in _EXAMPLE_ANSWERS


def invents_words(answer: str, source: str) -> bool:
    """Whether ``answer`` has a word (after HotpotQA's normalisation; yes/no aside) that ``source`` lacks: an
    extraction that wrote what it was not given."""
    known = set(normalize_answer(source).split()) | {"yes", "no"}
    return any(word not in known for word in normalize_answer(answer).split())


def names_example_entity(text: str, context: str) -> bool:
    """Whether ``text`` names a few-shot example's made-up entity that ``context`` (the question and the
    sub-answers so far) does not: a small model copying the prompt."""
    padded, known = _padded(text), _padded(context)
    return any(f" {e} " in padded and f" {e} " not in known for e in _EXAMPLE_ENTITIES)


def _padded(text: str) -> str:
    """``text`` normalised and padded with spaces, so `` {phrase} `` in it finds whole words only."""
    return f" {normalize_answer(text)} "


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAME_RUN = re.compile(r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def invents_names(answer: str, source: str) -> bool:
    """Whether ``answer`` names something ``source`` does not: a run of capitalised words (a sentence's first
    word aside, which may be any word) that is not, after HotpotQA's normalisation, a phrase of ``source``.
    "the Velmora River" read from a chunk that says "a bridge in Velmora" invents a name."""
    known = _padded(source)
    for sentence in _SENTENCE.split(answer.strip()):
        sentence = sentence.lstrip("\"'“‘([ ")
        for run in _NAME_RUN.finditer(sentence):
            words = run.group().split()[1:] if run.start() == 0 else run.group().split()
            name = normalize_answer(" ".join(words))
            if name and f" {name} " not in known:
                return True
    return False
