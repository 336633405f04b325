"""Pieces the LangGraph methods share: nodes written once for ``invoke`` and ``ainvoke``, per-run
settings from LangGraph's runtime context, the repetition test of planned questions, and the list of
retrieved documents a final answer reads.

A node is a *dialogue* (:mod:`multihop_rag.llm.calls`): a generator that yields model calls and other
awaitable steps and returns the state update. :func:`dialogue_node` turns it into a runnable
whose sync path calls ``invoke`` and whose async path calls ``ainvoke`` (``graph.ainvoke`` then
never runs a blocking call in a thread).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from langgraph.runtime import get_runtime
from pydantic import BaseModel

from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.calls import Dialogue, arun, run
from multihop_rag.metrics import normalize_answer

__all__ = ["dialogue_node", "run_settings", "stream_run", "content_words", "word_overlap", "repeated"]

S = TypeVar("S", bound=BaseModel)


def dialogue_node(step: Callable[[Any], Dialogue[dict[str, Any]]], name: str | None = None) -> RunnableLambda:
    """A LangGraph node running ``step(state)`` with sync calls under ``invoke`` and async ones under ``ainvoke``."""

    def sync(state: Any) -> dict[str, Any]:
        return run(step(state))

    async def asynchronous(state: Any) -> dict[str, Any]:
        return await arun(step(state))

    return RunnableLambda(sync, afunc=asynchronous, name=name or step.__name__)


def stream_run(
    graph: Any,
    graph_input: dict[str, Any],
    trace: Callable[[dict[str, Any]], None] | None,
    to_event: Callable[[str, dict[str, Any]], dict[str, Any] | None],
) -> dict[str, Any]:
    """Run ``graph`` on ``graph_input``; each node's update becomes a trace event (``to_event(node,
    update)``, None to skip) the moment it happens; returns the final state."""
    state: dict[str, Any] = {}
    for mode, chunk in graph.stream(graph_input, stream_mode=["updates", "values"]):
        if mode == "values":
            state = chunk
        elif trace is not None:
            for node, update in chunk.items():
                if update and (event := to_event(node, update)):
                    trace(event)
    return state


def run_settings(default: S) -> S:
    """The settings of the current run: the graph's ``default``, updated by the run's context
    (``graph.invoke(input, context=Config(...))`` or a dict of the fields to change)."""
    try:
        context = get_runtime().context
    except RuntimeError:
        return default
    if context is None:
        return default
    if isinstance(context, type(default)):
        return context
    if isinstance(context, dict):
        return type(default).model_validate({**default.model_dump(), **context})
    raise TypeError(f"the run's context must be a {type(default).__name__} or a dict, not {type(context).__name__}")


_STOP_WORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom whose when where "
    "why how did does do this that these those it its as".split()
)


def content_words(text: str) -> set[str]:
    """Lower-case words of ``text`` without possessives, punctuation, articles and question words."""
    text = re.sub(r"['’]s\b", "", text)
    return {w for w in re.split(r"\s+", normalize_answer(text)) if w and w not in _STOP_WORDS}


def word_overlap(a: str, b: str) -> float:
    """Content words shared by ``a`` and ``b``, over the larger set's size (1.0: the same words)."""
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return 1.0 if normalize_answer(a) == normalize_answer(b) else 0.0
    return len(wa & wb) / max(len(wa), len(wb))


def repeated(question: str, earlier: Sequence[str], threshold: float) -> str | None:
    """The earlier question that ``question`` repeats or paraphrases (word overlap ≥ ``threshold``), else None."""
    for previous in earlier:
        if word_overlap(question, previous) >= threshold:
            return previous
    return None


def document_record(doc: Document) -> dict[str, str]:
    """A retrieved LangChain ``Document`` as the ``{"id", "title", "text"}`` a reading list takes."""
    meta = doc.metadata or {}
    doc_id = doc.id or meta.get("passage_id") or meta.get("id") or ""
    return {"id": str(doc_id), "title": str(meta.get("title", "")), "text": doc.page_content}


def doc_key(doc: Mapping[str, str]) -> str:
    """What makes a retrieved document (``{"id", "title", "text"}``) the same as another: its id, else its text."""
    return doc.get("id") or doc["text"]


def _titled(doc: Mapping[str, str]) -> str:
    return f"(Title: {doc['title']}) {doc['text']}"


def _labelled(position: int, doc: Mapping[str, str]) -> str:
    return f"Doc {position}{_titled(doc)}"


def format_documents(docs: Sequence[Mapping[str, str]]) -> str:
    """Documents as a reader's prompt lists them: FlashRAG's format, which the ReSP experiments use (§5.1)."""
    return "\n".join(_labelled(i, d) for i, d in enumerate(docs, 1))


def format_reading(docs: Sequence[Mapping[str, str]]) -> str:
    """Documents as an answer's reader lists them: titled, without FlashRAG's "Doc N" labels, which a small reader
    copies as its answer ("Doc 2" for "Which film was released first, …?", the 1.5B on 2Wiki)."""
    return "\n".join(map(_titled, docs))


def reading_list(passages: Sequence[dict[str, str]], budget: int, *, labelled: bool = False) -> list[dict[str, str]]:
    """The documents a reader reads: each once (:func:`doc_key`), in the given order, whole, as long as they fit
    ``budget`` tokens together (the first that does not ends the list), counted as :func:`format_reading` lists
    them or, ``labelled``, as :func:`format_documents` does."""
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    used = 0
    for doc in passages:
        key = doc_key(doc)
        if key in seen:
            continue
        seen.add(key)
        cost = count_tokens(_labelled(len(out) + 1, doc) if labelled else _titled(doc))
        if used + cost > budget:
            break
        out.append(doc)
        used += cost
    return out
