"""HiRAG's Retriever and Filter (§4.3-4.4) for one sub-question (``state["current"]``), as named graph nodes:
extract the entity, rank the documents by title, take a chunk, answer from it and verify, fall back on the
model's own knowledge with probability (t/m)², rethink (next chunk, next document), or rewrite the
sub-question and search the chunks directly; every path ends in ``record``. Each node is a method of
:class:`RetrievalNodes`, so it can be called, tested or replaced alone."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.graph import StateGraph

from langgraph_hirag import prompts
from langgraph_hirag.config import HiRAGConfig
from langgraph_hirag.corpus import HierarchicalCorpus, base_title
from langgraph_hirag.replies import (
    LINE,
    NEXT_EXAMPLE,
    copies_example,
    final_line,
    first_line,
    invents_names,
)
from langgraph_hirag.state import Attempt, HiRAGState, SubQuestionTrace
from multihop_rag.frameworks.langgraph import dialogue_node, run_settings
from multihop_rag.llm.calls import Call, Dialogue, Effect, Reply
from multihop_rag.llm.structured import label_dialogue
from multihop_rag.metrics import normalize_answer, says_unknown

__all__ = ["RetrievalNodes", "fallback_probability", "fallback_draw", "tied_titles"]


def fallback_probability(t: int, m: int) -> float:
    """Eq. (7): y = (t/m)², t = rethink rounds done."""
    return min(1.0, (t / m) ** 2)


def fallback_draw(seed: int, question: str, sub_question: str, t: int) -> float:
    """A uniform number in [0, 1), fixed by its inputs (no shared RNG state across runs or resumes)."""
    digest = hashlib.sha256(f"{seed}\x1f{question}\x1f{sub_question}\x1f{t}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def tied_titles(entity: str, ranked: Sequence[tuple[str, float]], reference: float | None = None) -> list[str]:
    """Titles equal to ``entity`` up to a disambiguation, or tying ``reference`` (default: the best BM25 score)."""
    if not ranked:
        return []
    wanted = base_title(entity)
    score = ranked[0][1] if reference is None else reference
    return [t for t, s in ranked if base_title(t) == wanted or abs(s - score) <= score * 1e-6]


def _entity(extracted: str, sub_question: str) -> str:
    """The extracted entity, or the sub-question itself when the entity shares no word with it
    (a small model copying a few-shot example), so BM25 still searches the titles with its words."""
    words = set(normalize_answer(sub_question).split())
    return extracted if extracted and words & set(normalize_answer(base_title(extracted)).split()) else sub_question


def _knowledge(profile: str, chunk: str) -> str:
    return profile if chunk.strip() in profile else f"{profile}\n{chunk}"


def sub_question_reset() -> dict[str, Any]:
    """What every sub-question's retrieval starts from (fresh lists each time)."""
    return {"candidates": [], "tied": [], "doc_rank": 0, "chunk_rank": 0, "level": "first", "attempts": [],
            "outcome": "", "fallback": False, "rewritten": None, "rewrite_hits": [], "response": ""}


class RetrievalNodes:
    """The Retriever and Filter as graph nodes over ``corpus``, with a model per role (``models``) and the
    settings ``config`` (a run's ``configurable`` settings override it)."""

    def __init__(self, models: dict[str, BaseChatModel], corpus: HierarchicalCorpus, config: HiRAGConfig) -> None:
        self.models, self.corpus, self.config = models, corpus, config

    def _ask(self, role: str, prompt: str | list[BaseMessage], stop: list[str]) -> Call:
        return Call(self.models[role], prompt, max_tokens=run_settings(self.config).max_output_tokens, stop=stop)

    def _answer_once(self, prompt: str, stop: list[str], read: Callable[[Reply], str], flagged: list[str]) -> Dialogue[tuple[str, int, int]]:
        """Ask the answerer; an answer copied from an example is flagged and asked again once (a second
        copy is dropped). Returns (answer, calls, truncated replies)."""
        reply = yield self._ask("answerer", prompt, stop)
        answer, calls, cut = read(reply), 1, int(reply.truncated)
        if copies_example(answer):
            flagged.append(answer)
            reply = yield self._ask("answerer", prompt + prompts.NOT_THE_EXAMPLE, stop)
            answer, calls, cut = read(reply), 2, cut + int(reply.truncated)
            if copies_example(answer):
                flagged.append(answer)
                answer = ""
        return answer, calls, cut

    def _judge(self, response: str, sub_question: str, knowledge: str = "") -> Dialogue[str]:
        if knowledge and run_settings(self.config).verify_reads_chunk:
            prompt = prompts.CAN_ANSWER_FROM.format(knowledge=knowledge, response=response, question=sub_question)
        else:
            prompt = prompts.CAN_ANSWER.format(response=response, question=sub_question)
        label = yield from label_dialogue(self.models["verifier"], prompt, ("yes", "no"), default="no")
        return label

    def extract_entity(self, state: HiRAGState) -> Dialogue[dict[str, Any]]:
        reply = yield self._ask("answerer", prompts.EXTRACT_ENTITY.format(question=state["current"]), LINE)
        return {
            **sub_question_reset(),
            "entity": _entity(first_line(reply), state["current"]),
            "llm_calls": 1,
            "truncated": int(reply.truncated),
        }

    def retrieve_document(self, state: HiRAGState) -> dict[str, Any]:
        ranked = dict(self.corpus.rank_titles(state["entity"], run_settings(self.config).title_candidates))
        # A rethink keeps the first attempt's ranking; doc_rank says which document is in use.
        candidates = state["candidates"] if state.get("attempts") else list(ranked)
        untried = [(t, ranked[t]) for t in candidates[state.get("doc_rank", 0) :] if t in ranked]
        reference = untried[0][1] if untried else None
        return {"candidates": candidates, "tied": tied_titles(state["entity"], untried, reference)}

    def after_retrieve_document(self, state: HiRAGState) -> Literal["retrieve_chunk", "rewrite"]:
        # Algorithm 1 lines 20-23: the test runs at every attempt t.
        if not state["candidates"] or len(state["tied"]) > run_settings(self.config).th1:
            return "rewrite"
        return "retrieve_chunk"

    def retrieve_chunk(self, state: HiRAGState) -> Dialogue[dict[str, Any]]:
        title = state["candidates"][state["doc_rank"]]
        chunks: list[Document] = yield Effect(
            lambda: self.corpus.rank_chunks(title, state["current"]), lambda: self.corpus.arank_chunks(title, state["current"])
        )
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
        profile = self.corpus.document(title).profile if run_settings(self.config).use_profiles else ""
        knowledge = _knowledge(profile, chunk.page_content) if profile else chunk.page_content
        return {"attempts": [*state["attempts"], attempt], "knowledge": knowledge}

    def verify(self, state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(self.config)
        sub_question = state["current"]
        flagged: list[str] = []
        prompt = prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=state["knowledge"])
        response, calls, cut = yield from self._answer_once(prompt, NEXT_EXAMPLE, final_line, flagged)
        unknown = says_unknown(response)
        invented = not unknown and settings.grounded_sub_answers and invents_names(response, f"{state['knowledge']} {sub_question}")
        judged = not unknown and not invented
        verdict = (yield from self._judge(response, sub_question, state["knowledge"])) if judged else "no"
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "response": response, "verified": verdict == "yes"}]
        t = len(attempts) - 1  # rethink rounds done before this attempt
        draw = fallback_draw(settings.seed, state["question"], sub_question, t)
        fallback = verdict != "yes" and draw < fallback_probability(t, settings.m)
        return {
            "response": response,
            "attempts": attempts,
            "outcome": "verified" if verdict == "yes" else "",
            "fallback": fallback,
            "llm_calls": calls + judged,
            "truncated": cut,
            "copied_examples": flagged,
            "invented_sub_answers": [response] if invented else [],
        }

    def after_verify(self, state: HiRAGState) -> Literal["record", "internal_knowledge", "rethink"]:
        if state["outcome"] == "verified":
            return "record"
        return "internal_knowledge" if state["fallback"] else "rethink"

    def internal_knowledge(self, state: HiRAGState) -> Dialogue[dict[str, Any]]:
        flagged: list[str] = []
        prompt = prompts.INTERNAL_ANSWER.format(question=state["current"])
        response, calls, cut = yield from self._answer_once(prompt, LINE, first_line, flagged)
        judged = not says_unknown(response)
        verdict = (yield from self._judge(response, state["current"])) if judged else "no"
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "internal": response}]
        update: dict[str, Any] = {
            "attempts": attempts, "llm_calls": calls + judged, "truncated": cut, "copied_examples": flagged,
        }
        if verdict == "yes":
            update |= {"response": response, "outcome": "internal"}
        return update

    def after_internal(self, state: HiRAGState) -> Literal["record", "rethink"]:
        return "record" if state["outcome"] == "internal" else "rethink"

    def rethink(self, state: HiRAGState) -> dict[str, Any]:
        settings = run_settings(self.config)
        t = len(state["attempts"])
        if t >= settings.th3:
            return {"outcome": "gave_up", "response": ""}
        title = state["candidates"][state["doc_rank"]]
        more_chunks = state["chunk_rank"] + 1 < len(self.corpus.document(title).chunk_ids)
        if t % settings.th2 != 0 and more_chunks:
            return {"level": "chunk", "chunk_rank": state["chunk_rank"] + 1}
        if state["doc_rank"] + 1 < len(state["candidates"]):
            return {"level": "document", "doc_rank": state["doc_rank"] + 1, "chunk_rank": 0}
        nearest = self._nearest_untried(state) if settings.dense_rethink else None
        if nearest is None:
            return {"outcome": "gave_up", "response": ""}
        return {"level": "document", "candidates": [*state["candidates"], nearest], "doc_rank": state["doc_rank"] + 1,
                "chunk_rank": 0}

    def _nearest_untried(self, state: HiRAGState) -> str | None:
        """The title of the corpus's chunk nearest the sub-question (dense) whose document no attempt read."""
        tried = set(state["candidates"][: state["doc_rank"] + 1])
        hits = self.corpus.search(state["current"], len(tried) + run_settings(self.config).title_candidates)
        return next((str(h.metadata["title"]) for h in hits if h.metadata.get("title") not in tried), None)

    def after_rethink(self, state: HiRAGState) -> Literal["retrieve_document", "record"]:
        return "record" if state["outcome"] == "gave_up" else "retrieve_document"

    def rewrite(self, state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(self.config)
        entity = state["entity"].lower()
        previous = [
            f"{q} {a}"
            for q, a in zip(state.get("sub_questions", []), state.get("sub_answers", []), strict=True)
            if a and entity in a.lower()
        ]
        information = previous[-1] if previous else state["question"]
        sub_question = state["current"]
        reply = yield self._ask("answerer", prompts.REWRITE.format(question=sub_question, information=information), LINE)
        rewritten = first_line(reply) or sub_question
        hits: list[Document] = yield Effect(
            lambda: self.corpus.search(rewritten, settings.rewrite_top_k), lambda: self.corpus.asearch(rewritten, settings.rewrite_top_k)
        )
        knowledge = "\n".join(h.page_content for h in hits)
        flagged: list[str] = []
        prompt = prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=knowledge)
        response, calls, cut = yield from self._answer_once(prompt, NEXT_EXAMPLE, final_line, flagged)
        return {
            "rewritten": rewritten,
            "rewrite_hits": [str(h.id) for h in hits if h.id],
            "knowledge": knowledge,
            "response": "" if says_unknown(response) else response,
            "outcome": "rewrite",
            "llm_calls": 1 + calls,
            "truncated": int(reply.truncated) + cut,
            "copied_examples": flagged,
        }

    def record(self, state: HiRAGState) -> dict[str, Any]:
        source = {"verified": "retrieval", "internal": "internal", "rewrite": "rewrite"}.get(state["outcome"], "gave_up")
        answer = state.get("response", "") if source != "gave_up" else ""
        entry: SubQuestionTrace = {
            "sub_question": state["current"],
            "entity": state["entity"],
            "candidates": state.get("candidates", []),
            "tied": state.get("tied", []),
            "attempts": state.get("attempts", []),
            "rewritten": state.get("rewritten"),
            "rewrite_hits": state.get("rewrite_hits", []),
            "answer": answer,
            "source": source,  # type: ignore[typeddict-item]
            "knowledge": state.get("knowledge", "") if source in ("retrieval", "rewrite") else "",
        }
        return {"sub_questions": [state["current"]], "sub_answers": [answer], "trace": [entry]}

    def add_to(self, graph: StateGraph[Any, Any, Any, Any], after_record: str) -> None:
        """Add the nodes and their edges to ``graph``: ``extract_entity`` in, ``record`` out to ``after_record``."""
        for name, step in (("extract_entity", self.extract_entity), ("retrieve_chunk", self.retrieve_chunk), ("verify", self.verify),
                           ("internal_knowledge", self.internal_knowledge), ("rewrite", self.rewrite)):
            graph.add_node(name, dialogue_node(step, name))
        for name, plain in (("retrieve_document", self.retrieve_document), ("rethink", self.rethink), ("record", self.record)):
            graph.add_node(name, plain)
        graph.add_edge("extract_entity", "retrieve_document")
        graph.add_conditional_edges("retrieve_document", self.after_retrieve_document)
        graph.add_edge("retrieve_chunk", "verify")
        graph.add_conditional_edges("verify", self.after_verify)
        graph.add_conditional_edges("internal_knowledge", self.after_internal)
        graph.add_conditional_edges("rethink", self.after_rethink)
        graph.add_edge("rewrite", "record")
        graph.add_edge("record", after_record)
