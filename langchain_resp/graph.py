"""ReSP (Retrieve, Summarize, Plan; Jiang et al., 2024) as a LangGraph state machine.

Algorithm 1 of the paper, node by node::

    retrieve -> summarize -> (bound reached?) -> generate
                              judge -> Yes -> generate
                                    -> No  -> plan -> (repeated sub-question?) -> generate
                                                   -> retrieve

- ``retrieve``: top-k documents (default 5, §5.2) for the current sub-question; in round one the
  sub-question is the overarching question itself.
- ``summarize``: the dual-function summarizer (§4.1): a query-focused summary for the overarching
  question goes to the global evidence memory; from round two on, an answer to the current
  sub-question (or "No") goes, with the sub-question, to the local pathway memory.
- ``judge``: can the combined memory answer the question? A constrained Yes/No; an unreadable
  answer counts as No and is counted in ``judge_failures``.
- ``plan``: the next sub-question, told not to repeat retrieved ones; a repeat ends the loop.
- ``generate``: the final answer from the combined memory.

The loop is bounded by ``max_iterations`` rounds of retrieval (default 3, §5.2); when the bound
is reached the graph goes straight to ``generate`` without judging or planning again.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, StateGraph

from langchain_resp import prompts
from multihop_rag.metrics import normalize_answer
from multihop_rag.structured import StructuredStats, generate_label

__all__ = ["ReSPState", "LocalMemory", "build_resp_graph", "combined_memory", "ROLES"]

ROLES = ("reasoner", "summarizer", "generator")
"""The three LLM roles of §6.2; ``build_resp_graph`` takes one model or a dict by role."""


class LocalMemory(TypedDict):
    """One entry of the local pathway memory."""

    sub_question: str
    answer: str
    """The summarizer's answer to the sub-question from that round's documents, or "No"."""


class ReSPState(TypedDict, total=False):
    """State of a ReSP run. Lists marked "append" accumulate across rounds."""

    question: str
    """The overarching question (input)."""
    sub_question: str
    """The sub-question of the current round (round one: the question itself)."""
    sub_questions: Annotated[list[str], operator.add]
    """Sub-questions planned so far, in order (append)."""
    documents: list[dict[str, str]]
    """This round's retrieved documents: ``{"id", "title", "text"}``."""
    retrieved: Annotated[list[list[str]], operator.add]
    """Ids of the documents retrieved in each round (append)."""
    retrieved_words: Annotated[int, operator.add]
    """Words in all retrieved documents (for the compression ratio of §5.4)."""
    global_memory: Annotated[list[str], operator.add]
    """Global evidence memory: one query-focused summary per round (append)."""
    local_memory: Annotated[list[LocalMemory], operator.add]
    """Local pathway memory: sub-question and its answer, from round two on (append)."""
    iterations: int
    """Rounds of retrieval done (the loop counter)."""
    judgement: str
    """The reasoner's last Yes/No."""
    judge_failures: Annotated[int, operator.add]
    """Judge answers that were neither Yes nor No (treated as No)."""
    stop_reason: str
    """Why the loop ended: ``sufficient``, ``max_iterations`` or ``repeated_sub_question``."""
    answer: str
    """The final answer (output)."""


def combined_memory(global_memory: Sequence[str], local_memory: Sequence[LocalMemory]) -> str:
    """The "combined memory queues" of Table 1: global evidence, then the local pathway."""
    parts = []
    if global_memory:
        parts.append("[Global evidence memory]\n" + "\n".join(f"- {g}" for g in global_memory))
    if local_memory:
        parts.append(
            "[Local pathway memory]\n"
            + "\n".join(f"- Sub-question: {m['sub_question']} Answer: {m['answer']}" for m in local_memory)
        )
    return "\n".join(parts) if parts else "None"


def _format_docs(docs: Sequence[dict[str, str]]) -> str:
    # FlashRAG's document format, which the ReSP experiments use (§5.1).
    return "\n".join(f"Doc {i}(Title: {d['title']}) {d['text']}" for i, d in enumerate(docs, 1))


def _doc_record(doc: Document) -> dict[str, str]:
    meta = doc.metadata or {}
    doc_id = doc.id or meta.get("passage_id") or meta.get("id") or ""
    return {"id": str(doc_id), "title": str(meta.get("title", "")), "text": doc.page_content}


_LEADING_LABEL = re.compile(r"^\W*(yes|no)\b[\s,.:;!-]*", re.IGNORECASE)


def _local_answer(text: str) -> str:
    """"Yes, Charlie Murphy" -> "Charlie Murphy"; "No." -> "No"; an unlabelled answer is kept."""
    text = text.strip()
    match = _LEADING_LABEL.match(text)
    if not match:
        return text or "No"
    if match.group(1).lower() == "no":
        return "No"
    return text[match.end() :].strip() or "Yes"


def _global_summary(text: str) -> str:
    text = text.split("[DONE]")[0].strip()
    return re.sub(r"^(Passage|Response)\s*:\s*", "", text, flags=re.IGNORECASE).strip()


_THOUGHT_PREFIX = re.compile(r"^\W*(\[?you(r)? thought\]?|thought|sub-?question|question)\s*:\s*", re.IGNORECASE)


def _sub_question(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = _THOUGHT_PREFIX.sub("", lines[0]) if lines else ""
    return first.strip().strip('"').strip()


def _roles(llm: BaseChatModel | Mapping[str, BaseChatModel]) -> dict[str, BaseChatModel]:
    if isinstance(llm, BaseChatModel):
        return {role: llm for role in ROLES}
    missing = [role for role in ROLES if role not in llm]
    if missing:
        raise ValueError(f"llm dict lacks the role(s) {missing}; give all of {list(ROLES)}")
    return {role: llm[role] for role in ROLES}


def build_resp_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel],
    retriever: BaseRetriever,
    *,
    top_k: int = 5,
    max_iterations: int = 3,
    checkpointer: Any = None,
    interrupt_before: Sequence[str] | None = None,
):
    """Compile the ReSP graph.

    Args:
        llm: one chat model for every role, or ``{"reasoner", "summarizer", "generator"}`` (§6.2).
        retriever: any LangChain retriever; its first ``top_k`` documents are used per round.
        top_k: documents per round (paper: 5).
        max_iterations: most rounds of retrieval (paper: 3); then the answer is generated.
        checkpointer: a LangGraph checkpointer, so runs can be interrupted and resumed.
        interrupt_before: node names to pause before (needs a checkpointer).

    Input ``{"question": str}``; the final state holds ``answer`` and the trace (:class:`ReSPState`).
    """
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    models = _roles(llm)

    def retrieve(state: ReSPState) -> dict[str, Any]:
        query = state.get("sub_question") or state["question"]
        docs = [_doc_record(d) for d in retriever.invoke(query)[:top_k]]
        return {
            "sub_question": query,
            "documents": docs,
            "retrieved": [[d["id"] for d in docs]],
            "retrieved_words": sum(len(d["text"].split()) for d in docs),
            "iterations": state.get("iterations", 0) + 1,
        }

    def summarize(state: ReSPState) -> dict[str, Any]:
        docs = _format_docs(state["documents"])
        summary = models["summarizer"].invoke(
            prompts.GLOBAL_EVIDENCE.format(docs=docs, question=state["question"]), stop=["[DONE]"]
        )
        update: dict[str, Any] = {"global_memory": [_global_summary(summary.text)]}
        if state["sub_question"] != state["question"]:
            local = models["summarizer"].invoke(
                prompts.LOCAL_PATHWAY.format(sub_question=state["sub_question"], docs=docs)
            )
            update["local_memory"] = [{"sub_question": state["sub_question"], "answer": _local_answer(local.text)}]
        return update

    def after_summarize(state: ReSPState) -> Literal["judge", "generate"]:
        return "generate" if state["iterations"] >= max_iterations else "judge"

    def judge(state: ReSPState) -> dict[str, Any]:
        stats = StructuredStats()
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        label = generate_label(
            models["reasoner"], prompts.JUDGE.format(question=state["question"], memory=memory), default="No", stats=stats
        )
        return {"judgement": label, "judge_failures": stats.failed}

    def after_judge(state: ReSPState) -> Literal["plan", "generate"]:
        return "generate" if state["judgement"] == "Yes" else "plan"

    def plan(state: ReSPState) -> dict[str, Any]:
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        thought = _sub_question(
            models["reasoner"].invoke(prompts.PLAN.format(memory=memory, question=state["question"])).text
        )
        seen = {normalize_answer(q) for q in [state["question"], *state.get("sub_questions", [])]}
        if not thought or normalize_answer(thought) in seen:
            return {"stop_reason": "repeated_sub_question", "sub_question": thought}
        return {"sub_question": thought, "sub_questions": [thought]}

    def after_plan(state: ReSPState) -> Literal["retrieve", "generate"]:
        return "generate" if state.get("stop_reason") == "repeated_sub_question" else "retrieve"

    def generate(state: ReSPState) -> dict[str, Any]:
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        answer = models["generator"].invoke(prompts.GENERATE.format(memory=memory, question=state["question"]))
        reason = state.get("stop_reason") or (
            "sufficient" if state.get("judgement") == "Yes" else "max_iterations"
        )
        return {"answer": answer.text.strip(), "stop_reason": reason}

    graph = StateGraph(ReSPState)
    for name, node in (
        ("retrieve", retrieve),
        ("summarize", summarize),
        ("judge", judge),
        ("plan", plan),
        ("generate", generate),
    ):
        graph.add_node(name, node)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "summarize")
    graph.add_conditional_edges("summarize", after_summarize)
    graph.add_conditional_edges("judge", after_judge)
    graph.add_conditional_edges("plan", after_plan)
    graph.add_edge("generate", END)
    return graph.compile(checkpointer=checkpointer, interrupt_before=list(interrupt_before or []))
