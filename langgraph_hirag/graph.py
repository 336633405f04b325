"""HiRAG (Hierarchical RAG with Rethink; Zhang et al., 2024) as a LangGraph state machine.

Algorithm 1 (Appendix A.2), node by node::

    decompose -> "That's enough" / repeat / max_subquestions -> summarize -> END
              -> extract_entity -> retrieve_document -> more than th1 titles tie -> rewrite -> record
                                                     -> retrieve_chunk -> verify -> yes -> record
                                                                                 -> no, (t/m)² draw -> internal_knowledge
                                                                                 -> no -> rethink
                 internal_knowledge -> yes -> record, no -> rethink
                 rethink -> chunk level -> retrieve_chunk       (the next-best chunk of the same document)
                         -> document level -> retrieve_document (every th2-th failure: the next-best title)
                         -> th3 attempts -> record (gave up, empty sub-answer)
              record -> decompose

- ``decompose`` (§4.2, eq. 1): a dialogue; the Decomposer asks one simple question per turn and
  each sub-answer is the user's reply (an empty one says the question could not be answered, so
  the Decomposer rephrases, workflow 2.1). At most ``max_subquestions`` (paper: 5, Appendix A.1).
- ``extract_entity`` (eq. 3): e = LLM(q). An entity sharing no word with q (a small model copying
  a few-shot example) is replaced by q itself, so the title search still uses q's words.
- ``retrieve_document`` (eq. 3): BM25 of the entity over titles. Semantic incompleteness (eq. 4)
  is "high similarity between the extracted entity name and multiple candidate titles": titles
  equal to the entity up to a disambiguation ("X (film)", "X (novel)") or tying the best BM25
  score count as matches, and more than ``th1`` of them (the authors' code: more than one) send
  the sub-question to ``rewrite``, as does no matching title at all.
- ``retrieve_chunk`` (eq. 5): the chunk of the chosen document ranked ``chunk_rank`` by dense
  similarity, given with the document's profile (eq. 3, p*).
- ``verify`` (§4.4, eq. 6): the LLM answers from chunk + profile, then judges yes/no whether that
  answers the sub-question. Answer-then-judge follows eq. (6) and the authors' code; Algorithm 1
  prints the judge first, with the same two calls.
- ``rethink`` (Algorithm 1, lines 31-36): attempt t failed; every ``th2``-th failure (or when the
  document has no further chunk) moves to the next document and its best chunk, other failures
  to the next chunk; after ``th3`` attempts the sub-question is given up. Defaults th2 = 3, th3 = 4
  as in the authors' code and §5.3 ("the default maximum number of retrievals is 4").
- ``internal_knowledge`` (eq. 7): after the t-th rethink fails, with probability (t/m)² the model
  answers from its own knowledge (m = 5, §4.4); the draw is a seeded hash of (seed, question,
  sub-question, t), so runs are reproducible and resuming from a checkpoint draws the same.
- ``rewrite`` (eq. 4, Algorithm 1 lines 4-15): rewrite the sub-question with the latest sub-answer
  naming the entity, else with the original question, then answer the sub-question from a dense
  search over the whole corpus (the local stand-in for the paper's Google search).
- ``summarize`` (eq. 2): the final answer from the question and all sub-answers, then a short
  keyword answer extracted from it (as the authors' pipeline does for EM).

Left out: the authors' self-consistency vote over several final answers (3-7 more LLM calls per
question); the Summarizer here answers once.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

from langgraph_hirag import prompts
from langgraph_hirag.corpus import HierarchicalCorpus, base_title
from multihop_rag.metrics import normalize_answer
from multihop_rag.structured import generate_label

__all__ = [
    "HiRAGState",
    "Attempt",
    "SubQuestionTrace",
    "build_hirag_graph",
    "build_hirag_retrieval_graph",
    "fallback_probability",
    "fallback_draw",
    "tied_titles",
]


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
    """Titles matching the entity equally well (more than th1 trigger a rewrite)."""
    attempts: list[Attempt]
    rewritten: str | None
    """The rewritten sub-question (semantic incompleteness), else None."""
    answer: str
    source: Literal["retrieval", "internal", "rewrite", "gave_up"]


class HiRAGState(TypedDict, total=False):
    """State of a HiRAG run. Lists marked "append" accumulate over sub-questions."""

    question: str
    """The multi-hop question x (input)."""
    sub_questions: Annotated[list[str], operator.add]
    """Sub-questions answered so far, in order (append)."""
    sub_answers: Annotated[list[str], operator.add]
    """Their answers; "" where retrieval gave up (append)."""
    trace: Annotated[list[SubQuestionTrace], operator.add]
    """Per sub-question: documents and chunks tried, rethink levels, outcome (append)."""
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
    stop_reason: str
    """Why decomposition ended: ``enough``, ``repeated_sub_question``, ``max_subquestions``, ``no_sub_question``."""
    llm_calls: Annotated[int, operator.add]
    """LLM calls made (append-sum)."""
    reasoning: str
    """The Summarizer's reasoning."""
    answer: str
    """The final answer o (output)."""


def fallback_probability(t: int, m: int) -> float:
    """Eq. (7): y = (t/m)², t = rethink rounds done."""
    return min(1.0, (t / m) ** 2)


def fallback_draw(seed: int, question: str, sub_question: str, t: int) -> float:
    """A uniform number in [0, 1), fixed by its inputs (no shared RNG state across runs or resumes)."""
    digest = hashlib.sha256(f"{seed}\x1f{question}\x1f{sub_question}\x1f{t}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def tied_titles(entity: str, ranked: Sequence[tuple[str, float]]) -> list[str]:
    """Titles equal to ``entity`` up to a disambiguation, or tying the best BM25 score."""
    if not ranked:
        return []
    wanted = base_title(entity)
    best = ranked[0][1]
    return [t for t, s in ranked if base_title(t) == wanted or s >= best * (1 - 1e-6)]


LINE = ["\n"]
"""Stop sequence for one-line outputs (entity, sub-question, rewrite, short answer)."""
NEXT_EXAMPLE = ["\nQuestion:", "\nInput:"]
"""Stop sequences that keep a small model from writing further few-shot examples."""

_ANSWER_LINE = re.compile(r"^\W*answer\s*(?:the question)?\s*:\s*(.*)$", re.IGNORECASE)
_PREFIX = re.compile(
    r"^\W*(?:\d+(?:st|nd|rd|th)\s+)?(?:simple question|sub-?question|question|entity|output|rewritten question)\s*:\s*",
    re.IGNORECASE,
)
_UNKNOWN = re.compile(r"^\W*(unknown|i don'?t know|not (?:given|known|mentioned)|none)\W*$", re.IGNORECASE)


def _final_line(text: str) -> str:
    """The text after the last "Answer:" line, else the last non-empty line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        match = _ANSWER_LINE.match(line)
        if match and match.group(1).strip():
            return match.group(1).strip()
    return lines[-1] if lines else ""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return _PREFIX.sub("", lines[0]).strip().strip('"').strip() if lines else ""


def _is_unknown(answer: str) -> bool:
    return not answer.strip() or bool(_UNKNOWN.match(answer)) or "i don't know" in answer.lower()


def _said_enough(text: str) -> bool:
    return "that's enough" in text.lower().replace("’", "'") or text.strip().lower().rstrip(".!") == "enough"


def _entity(extracted: str, sub_question: str) -> str:
    """The extracted entity, or the sub-question itself when the entity shares no word with it
    (a small model copying a few-shot example), so BM25 still searches the titles with its words."""
    words = set(normalize_answer(sub_question).split())
    return extracted if extracted and words & set(normalize_answer(base_title(extracted)).split()) else sub_question


def _knowledge(profile: str, chunk: str) -> str:
    return profile if chunk.strip() in profile else f"{profile}\n{chunk}"


def _decomposition(question: str, sub_questions: Sequence[str], sub_answers: Sequence[str]) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage(prompts.DECOMPOSER.format(question=question)),
        HumanMessage(prompts.DECOMPOSE_START.format(question=question)),
    ]
    for q, a in zip(sub_questions, sub_answers, strict=True):
        messages += [AIMessage(q), HumanMessage(a or prompts.NO_ANSWER)]
    return messages


def _add_retrieval_nodes(
    graph: StateGraph,
    llm: BaseChatModel,
    corpus: HierarchicalCorpus,
    *,
    th1: int,
    th2: int,
    th3: int,
    m: int,
    seed: int,
    title_candidates: int,
    rewrite_top_k: int,
    after_record: str,
    use_profiles: bool = True,
) -> None:
    """The Retriever and Filter of HiRAG (§4.3-4.4) for ``state["current"]``, ending in ``record``."""

    def judge(response: str, sub_question: str) -> str:
        if _is_unknown(response):
            return "no"
        return generate_label(
            llm, prompts.CAN_ANSWER.format(response=response, question=sub_question), ("yes", "no"), default="no"
        )

    def extract_entity(state: HiRAGState) -> dict[str, Any]:
        text = llm.invoke(prompts.EXTRACT_ENTITY.format(question=state["current"]), stop=LINE).text
        return {
            "entity": _entity(_first_line(text), state["current"]),
            "candidates": [],
            "tied": [],
            "doc_rank": 0,
            "chunk_rank": 0,
            "level": "first",
            "attempts": [],
            "outcome": "",
            "fallback": False,
            "rewritten": None,
            "response": "",
            "llm_calls": 1,
        }

    def retrieve_document(state: HiRAGState) -> dict[str, Any]:
        if state.get("attempts"):
            return {}  # document-level rethink: the ranking stays, doc_rank has moved
        ranked = corpus.rank_titles(state["entity"], title_candidates)
        return {"candidates": [t for t, _ in ranked], "tied": tied_titles(state["entity"], ranked)}

    def after_retrieve_document(state: HiRAGState) -> Literal["retrieve_chunk", "rewrite"]:
        if not state["candidates"] or len(state["tied"]) > th1:
            return "rewrite"
        return "retrieve_chunk"

    def retrieve_chunk(state: HiRAGState) -> dict[str, Any]:
        title = state["candidates"][state["doc_rank"]]
        chunks = corpus.rank_chunks(title, state["current"])
        chunk = chunks[min(state["chunk_rank"], len(chunks) - 1)] if chunks else Document(page_content="")
        attempt: Attempt = {
            "attempt": len(state["attempts"]) + 1,
            "level": state["level"],
            "title": title,
            "chunk_id": str(chunk.id or ""),
            "chunk_rank": state["chunk_rank"],
            "doc_rank": state["doc_rank"],
            "response": "",
            "verified": False,
            "internal": None,
        }
        profile = corpus.document(title).profile if use_profiles else ""
        knowledge = _knowledge(profile, chunk.page_content) if profile else chunk.page_content
        return {"attempts": [*state["attempts"], attempt], "knowledge": knowledge}

    def verify(state: HiRAGState) -> dict[str, Any]:
        sub_question = state["current"]
        text = llm.invoke(
            prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=state["knowledge"]), stop=NEXT_EXAMPLE
        ).text
        response = _final_line(text)
        verdict = judge(response, sub_question)
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "response": response, "verified": verdict == "yes"}]
        t = len(attempts) - 1  # rethink rounds done before this attempt
        fallback = verdict != "yes" and fallback_draw(seed, state["question"], sub_question, t) < fallback_probability(t, m)
        return {
            "response": response,
            "attempts": attempts,
            "outcome": "verified" if verdict == "yes" else "",
            "fallback": fallback,
            "llm_calls": 1 + (not _is_unknown(response)),
        }

    def after_verify(state: HiRAGState) -> Literal["record", "internal_knowledge", "rethink"]:
        if state["outcome"] == "verified":
            return "record"
        return "internal_knowledge" if state["fallback"] else "rethink"

    def internal_knowledge(state: HiRAGState) -> dict[str, Any]:
        response = _first_line(llm.invoke(prompts.INTERNAL_ANSWER.format(question=state["current"]), stop=LINE).text)
        verdict = judge(response, state["current"])
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "internal": response}]
        update: dict[str, Any] = {"attempts": attempts, "llm_calls": 1 + (not _is_unknown(response))}
        if verdict == "yes":
            update |= {"response": response, "outcome": "internal"}
        return update

    def after_internal(state: HiRAGState) -> Literal["record", "rethink"]:
        return "record" if state["outcome"] == "internal" else "rethink"

    def rethink(state: HiRAGState) -> dict[str, Any]:
        t = len(state["attempts"])
        if t >= th3:
            return {"outcome": "gave_up", "response": ""}
        title = state["candidates"][state["doc_rank"]]
        more_chunks = state["chunk_rank"] + 1 < len(corpus.document(title).chunk_ids)
        if t % th2 != 0 and more_chunks:
            return {"level": "chunk", "chunk_rank": state["chunk_rank"] + 1}
        if state["doc_rank"] + 1 >= len(state["candidates"]):
            return {"outcome": "gave_up", "response": ""}
        return {"level": "document", "doc_rank": state["doc_rank"] + 1, "chunk_rank": 0}

    def after_rethink(state: HiRAGState) -> Literal["retrieve_chunk", "retrieve_document", "record"]:
        if state["outcome"] == "gave_up":
            return "record"
        return "retrieve_document" if state["level"] == "document" else "retrieve_chunk"

    def rewrite(state: HiRAGState) -> dict[str, Any]:
        entity = state["entity"].lower()
        previous = [
            f"{q} {a}" for q, a in zip(state.get("sub_questions", []), state.get("sub_answers", []), strict=True) if a and entity in a.lower()
        ]
        information = previous[-1] if previous else state["question"]
        sub_question = state["current"]
        rewritten = _first_line(
            llm.invoke(prompts.REWRITE.format(question=sub_question, information=information), stop=LINE).text
        ) or sub_question
        hits = corpus.search(rewritten, rewrite_top_k)
        knowledge = "\n".join(h.page_content for h in hits)
        text = llm.invoke(
            prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=knowledge), stop=NEXT_EXAMPLE
        ).text
        response = _final_line(text)
        return {
            "rewritten": rewritten,
            "knowledge": knowledge,
            "response": "" if _is_unknown(response) else response,
            "outcome": "rewrite",
            "llm_calls": 2,
        }

    def record(state: HiRAGState) -> dict[str, Any]:
        source = {"verified": "retrieval", "internal": "internal", "rewrite": "rewrite"}.get(state["outcome"], "gave_up")
        answer = state.get("response", "") if source != "gave_up" else ""
        entry: SubQuestionTrace = {
            "sub_question": state["current"],
            "entity": state["entity"],
            "candidates": state.get("candidates", []),
            "tied": state.get("tied", []),
            "attempts": state.get("attempts", []),
            "rewritten": state.get("rewritten"),
            "answer": answer,
            "source": source,  # type: ignore[typeddict-item]
        }
        return {"sub_questions": [state["current"]], "sub_answers": [answer], "trace": [entry]}

    for name, node in (
        ("extract_entity", extract_entity),
        ("retrieve_document", retrieve_document),
        ("retrieve_chunk", retrieve_chunk),
        ("verify", verify),
        ("internal_knowledge", internal_knowledge),
        ("rethink", rethink),
        ("rewrite", rewrite),
        ("record", record),
    ):
        graph.add_node(name, node)
    graph.add_edge("extract_entity", "retrieve_document")
    graph.add_conditional_edges("retrieve_document", after_retrieve_document)
    graph.add_edge("retrieve_chunk", "verify")
    graph.add_conditional_edges("verify", after_verify)
    graph.add_conditional_edges("internal_knowledge", after_internal)
    graph.add_conditional_edges("rethink", after_rethink)
    graph.add_edge("rewrite", "record")
    graph.add_edge("record", after_record)


def _check(max_subquestions: int, th1: int, th2: int, th3: int, m: int) -> None:
    if max_subquestions < 1 or th1 < 1 or th2 < 1 or th3 < 1 or m < 1:
        raise ValueError("max_subquestions, th1, th2, th3 and m must all be at least 1")


def build_hirag_graph(
    llm: BaseChatModel,
    corpus: HierarchicalCorpus,
    *,
    max_subquestions: int = 5,
    th1: int = 1,
    th2: int = 3,
    th3: int = 4,
    m: int = 5,
    seed: int = 0,
    title_candidates: int = 20,
    rewrite_top_k: int = 1,
    use_profiles: bool = True,
    checkpointer: Any = None,
    interrupt_before: Sequence[str] | None = None,
):
    """Compile the HiRAG graph.

    Args:
        llm: the chat model for every module (the paper used LLaMA-3-70B to decompose and
            GPT-3.5 elsewhere, §5.3; Table 3 runs everything on one 7-8B model).
        corpus: a :class:`HierarchicalCorpus`.
        max_subquestions: most sub-questions (paper: 5).
        th1: more titles than this matching the entity → semantic incompleteness → rewrite.
        th2: every th2-th failed attempt rethinks at document level (default 3, authors' code).
        th3: attempts per sub-question before giving up (paper §5.3: 4 retrievals).
        m: eq. (7)'s denominator; internal knowledge with probability (t/m)² (paper: 5).
        seed: seed of the (t/m)² draws.
        title_candidates: titles BM25 ranks per entity (authors' code: 20).
        rewrite_top_k: chunks the whole-corpus search returns after a rewrite.
        use_profiles: give the Filter the document's profile with the chunk (eq. 3's p*);
            ``False`` is Table 4's "w/o profile" ablation (the chunk alone).
        checkpointer: a LangGraph checkpointer, so runs can be interrupted and resumed.
        interrupt_before: node names to pause before (needs a checkpointer).

    Input ``{"question": str}``; the final state (:class:`HiRAGState`) holds ``answer``,
    ``sub_questions``, ``sub_answers`` and ``trace``.
    """
    _check(max_subquestions, th1, th2, th3, m)

    def decompose(state: HiRAGState) -> dict[str, Any]:
        asked = state.get("sub_questions", [])
        if len(asked) >= max_subquestions:
            return {"stop_reason": "max_subquestions"}
        messages = _decomposition(state["question"], asked, state.get("sub_answers", []))
        text, calls = llm.invoke(messages, stop=LINE).text, 1
        if not text.strip():  # an empty turn is asked again once, as the authors' code does
            text, calls = llm.invoke(messages).text, 2
        if _said_enough(text):
            return {"stop_reason": "enough", "llm_calls": calls}
        sub_question = _first_line(text)
        if not sub_question:
            return {"stop_reason": "no_sub_question", "llm_calls": calls}
        if normalize_answer(sub_question) in {normalize_answer(q) for q in asked}:
            return {"stop_reason": "repeated_sub_question", "llm_calls": calls}
        return {"current": sub_question, "stop_reason": "", "llm_calls": calls}

    def after_decompose(state: HiRAGState) -> Literal["extract_entity", "summarize"]:
        return "summarize" if state.get("stop_reason") else "extract_entity"

    def summarize(state: HiRAGState) -> dict[str, Any]:
        known = " ".join(a for a in state.get("sub_answers", []) if a) or "None"
        reasoning = llm.invoke(prompts.SUMMARIZE.format(question=state["question"], known=known), stop=NEXT_EXAMPLE).text
        short = llm.invoke(
            prompts.EXTRACT_ANSWER.format(response=_final_line(reasoning), question=state["question"]), stop=LINE
        ).text
        return {"reasoning": reasoning.strip(), "answer": _first_line(short), "llm_calls": 2}

    graph = StateGraph(HiRAGState)
    graph.add_node("decompose", decompose)
    graph.add_node("summarize", summarize)
    _add_retrieval_nodes(
        graph,
        llm,
        corpus,
        th1=th1,
        th2=th2,
        th3=th3,
        m=m,
        seed=seed,
        title_candidates=title_candidates,
        rewrite_top_k=rewrite_top_k,
        after_record="decompose",
        use_profiles=use_profiles,
    )
    graph.add_edge(START, "decompose")
    graph.add_conditional_edges("decompose", after_decompose)
    graph.add_edge("summarize", END)
    return graph.compile(checkpointer=checkpointer, interrupt_before=list(interrupt_before or []))


def build_hirag_retrieval_graph(
    llm: BaseChatModel,
    corpus: HierarchicalCorpus,
    *,
    th1: int = 1,
    th2: int = 3,
    th3: int = 4,
    m: int = 5,
    seed: int = 0,
    title_candidates: int = 20,
    rewrite_top_k: int = 1,
):
    """HiRAG's Retriever + Filter alone (§6.5): input ``{"question": q, "current": q}`` for a
    single-hop question; the final state's ``trace[0]`` says what was retrieved and verified."""
    _check(1, th1, th2, th3, m)
    graph = StateGraph(HiRAGState)
    _add_retrieval_nodes(
        graph,
        llm,
        corpus,
        th1=th1,
        th2=th2,
        th3=th3,
        m=m,
        seed=seed,
        title_candidates=title_candidates,
        rewrite_top_k=rewrite_top_k,
        after_record=END,
    )
    graph.add_edge(START, "extract_entity")
    return graph.compile()
