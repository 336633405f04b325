"""The state of a HiRAG run (Algorithm 1): its input, its trace and its output."""

from __future__ import annotations

import operator
from typing import Annotated, Literal

from typing_extensions import TypedDict


class Attempt(TypedDict):
    """One retrieval attempt t for a sub-question."""

    attempt: int
    """t, from 1."""
    level: Literal["first", "chunk", "document"]
    """How the attempt was reached: the first try, a chunk-level or a document-level rethink."""
    title: str
    """Document tried."""
    chunk_id: str
    """Chunk tried (its rank within the document is ``chunk_rank``)."""
    chunk_rank: int
    doc_rank: int
    response: str
    """The sub-answer drawn from this chunk and profile."""
    verified: bool
    """The Filter's verdict on ``response``."""
    internal: str | None
    """The internal-knowledge answer tried after this attempt failed, if the (t/m)² draw fired."""


class SubQuestionTrace(TypedDict):
    """How one sub-question was answered."""

    sub_question: str
    entity: str
    candidates: list[str]
    """Titles ranked by BM25 for the entity."""
    tied: list[str]
    """Titles matching the entity equally well at the last attempt (more than th1 trigger a rewrite)."""
    attempts: list[Attempt]
    rewritten: str | None
    """The rewritten sub-question (semantic incompleteness), else None."""
    rewrite_hits: list[str]
    """Ids of the chunks the rewritten sub-question retrieved from the whole corpus (its evidence)."""
    answer: str
    source: Literal["retrieval", "internal", "rewrite", "gave_up"]
    knowledge: str
    """The chunk (with its profile) or the rewrite's chunks the answer was found in; "" for internal or gave up."""


class HiRAGInput(TypedDict):
    """What a run takes."""

    question: str
    """The multi-hop question x."""


class HiRAGOutput(TypedDict, total=False):
    """What a run returns: the answer and its trace. Fields marked "append" accumulate over sub-questions."""

    question: str
    answer: str
    """The final answer o (a short keyword answer extracted from ``reasoning``)."""
    reasoning: str
    """The Summarizer's reasoning."""
    sub_questions: Annotated[list[str], operator.add]
    """Sub-questions answered, in order (append)."""
    sub_answers: Annotated[list[str], operator.add]
    """Their answers; "" where retrieval gave up (append)."""
    trace: Annotated[list[SubQuestionTrace], operator.add]
    """Per sub-question: documents and chunks tried, rethink levels, outcome (append)."""
    stop_reason: str
    """Why decomposition ended: ``enough``, ``repeated_sub_question``, ``max_subquestions``,
    ``no_sub_question``, ``copied_example`` (a sub-question about an example's entity, twice)."""
    first_question: str
    """How the first sub-question came: ``decomposer``, or ``question`` when the Decomposer would not
    ask one (twice) and the question itself was retrieved for."""
    restated: Annotated[int, operator.add]
    """First sub-questions that restated the question and were asked again (0 or 1; sum)."""
    copied_examples: Annotated[list[str], operator.add]
    """Answers equal to a prompt example's answer, and sub-questions naming an example's made-up entity
    (each asked again once; dropped if copied again) (append)."""
    invented_answers: Annotated[list[str], operator.add]
    """Short answers the extraction step wrote with a word found neither in the line it extracted from nor
    in the question, replaced by that line (``grounded_extraction``) (append)."""
    off_option_answers: Annotated[list[str], operator.add]
    """Answers to a question naming two options that named neither, replaced by the option a second extraction
    named (``answer_with_option``) (append)."""
    invented_sub_answers: Annotated[list[str], operator.add]
    """Sub-answers that named something neither their chunk nor their sub-question names, rejected without
    the Filter's call (``grounded_sub_answers``) (append)."""
    summary_reads: list[str]
    """Ids of the chunks the Summarizer read beside the sub-answers, in order (``reader_tokens``; none without)."""
    truncated: Annotated[int, operator.add]
    """Replies cut at the token cap (sum)."""
    llm_calls: Annotated[int, operator.add]
    """LLM calls made (sum)."""


class HiRAGState(HiRAGOutput, total=False):
    """The whole state. Every field is reset when a run starts, so a thread that answers several
    questions (a checkpointer's ``thread_id`` reused) never mixes them."""

    current: str
    """The sub-question being answered."""
    entity: str
    """Its entity name e (eq. 3)."""
    candidates: list[str]
    """Titles ranked by BM25 for ``entity``."""
    tied: list[str]
    doc_rank: int
    """Rank of the document in use among ``candidates`` (document-level rethink moves it)."""
    chunk_rank: int
    """Rank of the chunk in use within the document (chunk-level rethink moves it)."""
    level: Literal["first", "chunk", "document"]
    """How the next attempt was reached."""
    attempts: list[Attempt]
    """Attempts for the current sub-question; ``len(attempts)`` is the loop counter t."""
    knowledge: str
    """Profile and chunk given to the Filter in the latest attempt."""
    response: str
    """The current candidate sub-answer."""
    outcome: Literal["", "verified", "internal", "rewrite", "gave_up"]
    """How the current sub-question ended ("" while it is being worked on)."""
    fallback: bool
    """Whether the (t/m)² draw chose internal knowledge after the latest failed attempt."""
    rewritten: str | None
    rewrite_hits: list[str]
