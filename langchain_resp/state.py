"""The state of a ReSP run (Algorithm 1): its input, its trace and its output."""

from __future__ import annotations

import operator
from typing import Annotated

from typing_extensions import TypedDict


class LocalMemory(TypedDict):
    """One entry of the local pathway memory."""

    sub_question: str
    answer: str
    """The summarizer's answer to the sub-question from that round's documents, or "No"."""


class ReSPInput(TypedDict):
    """What a run takes."""

    question: str
    """The overarching question."""


class ReSPOutput(TypedDict, total=False):
    """What a run returns: the answer and its trace. Fields marked "append" accumulate over rounds."""

    question: str
    answer: str
    """The final answer."""
    sub_questions: Annotated[list[str], operator.add]
    """Sub-questions planned and retrieved, in order (append)."""
    retrieved: Annotated[list[list[str]], operator.add]
    """Ids of the documents retrieved in each round (append)."""
    global_memory: Annotated[list[str], operator.add]
    """Global evidence memory: one query-focused summary per round (append)."""
    local_memory: Annotated[list[LocalMemory], operator.add]
    """Local pathway memory: sub-question and its answer, from round two on (append)."""
    iterations: int
    """Rounds of retrieval done."""
    stop_reason: str
    """Why the loop ended: ``sufficient`` (the judge said Yes), ``max_iterations``, or
    ``repeated_sub_question`` (the planner repeated an earlier question twice in a row)."""
    replans: Annotated[int, operator.add]
    """Plans asked again because they repeated an earlier question (sum)."""
    judge_failures: Annotated[int, operator.add]
    """Judge answers that were neither Yes nor No, treated as No (sum)."""
    judge_probabilities: Annotated[list[float], operator.add]
    """With ``judge_threshold``: each round's P(Yes) (append)."""
    label_answers: int
    """1 when the generator answered with a document's label ("Doc 2") and was asked again without labels."""
    answer_checks: int
    """1 when the generator's answer was a heading of its reference or a bare Yes/No to a question asking neither,
    and it was asked once more (``answer_check``)."""
    decided_by: str
    """What answered instead of the generator: ``years`` (``compare_years``: the option the two options' years pick),
    ``countries`` (``compare_countries``: whether the two things' countries are one), ``quantities``
    (``compare_quantities``: the option the two options' numbers pick), or "" (the generator)."""
    truncated: Annotated[int, operator.add]
    """Replies cut at the token cap; their unfinished last sentence was dropped (sum)."""
    passages: Annotated[list[dict[str, str]], operator.add]
    """Every round's retrieved documents ``{"id", "title", "text"}`` in rank order (append); the generator
    reads them within ``reader_tokens``."""
    retrieved_words: Annotated[int, operator.add]
    """Words in all retrieved documents, for the compression ratio of §5.4 (sum)."""


class ReSPState(ReSPOutput, total=False):
    """The whole state. Every field is reset when a run starts, so a thread that answers several
    questions (a checkpointer's ``thread_id`` reused) never mixes them: nothing carries over from
    one question to the next."""

    sub_question: str
    """The sub-question of the current round (round one: the question itself)."""
    documents: list[dict[str, str]]
    """This round's retrieved documents: ``{"id", "title", "text"}``."""
    judgement: str
    """The reasoner's last Yes/No."""
