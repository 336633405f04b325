"""ReSP (Retrieve, Summarize, Plan; Jiang et al., 2024) as a LangGraph state machine.

Algorithm 1 of the paper, node by node::

    start -> retrieve -> summarize -> (bound reached?) -> generate
                                      (before round min_iterations) -> plan
                                      judge -> Yes -> generate
                                            -> No  -> plan -> (repeated twice?) -> generate
                                                           -> retrieve

- ``start``: resets every per-question field, so a reused thread answers a new question afresh.
- ``retrieve``: top-k documents (default 5, §5.2) for the current sub-question; in round one the
  sub-question is the overarching question itself.
- ``summarize``: the dual-function summarizer (§4.1): a query-focused summary for the overarching
  question goes to the global evidence memory; from round two on, an answer to the current
  sub-question (or "No") goes, with the sub-question, to the local pathway memory. The two read the same
  documents and not each other, so a served model with several slots writes them at once; an in-process
  model one after the other, as before. With ``reread_documents=False`` (ours) both read only the documents
  no earlier round retrieved.
- ``judge``: can the combined memory answer the question? A constrained Yes/No; an unreadable
  answer counts as No and is counted in ``judge_failures``. Asked from round ``min_iterations`` on
  (ours; 1, the paper's, asks after every round). With ``judge_threshold`` (ours), Yes means P(Yes)
  from the first token's logprobs reaches the threshold (``judge_probabilities``).
- ``plan``: the next sub-question (Algorithm 1 line 10: "distinct from previously retrieved
  sub-questions"). A plan that repeats or paraphrases the question or an earlier sub-question
  (:func:`~multihop_rag.frameworks.langgraph.repeated`, ``repeat_threshold``) leads to one re-plan that names the
  repetition and asks which entity of the known information is missing; the next round retrieves
  for "What is known about <it>?" (``prompts.REPLAN``, ours). Only a second repeat — no name, or
  one already looked up — ends the loop (``stop_reason = "repeated_sub_question"``). The paper has no
  repeat rule: its loop runs until the judge says Yes or the bound; small models that plan the
  question again would retrieve the same documents every round. A reply that asks nothing (the
  planner stating what it knows, :func:`~multihop_rag.llm.questions.sub_question_of`) is re-planned the same way.
- ``generate``: the final answer from the combined memory and, within ``reader_tokens`` (ours; 0: the
  paper's memory-only generator), the documents every round retrieved, each once, in rank order — once the
  run has made ``reader_min_rounds`` rounds. They are listed as FlashRAG's "Doc N(Title: …)"; an answer that
  is only such a label ("Doc 2") is asked once more with the documents listed by title alone. With
  ``compare_years`` (ours), a question naming two options and an order in time first asks that reading, with
  the documents, for each option's date (``multihop_rag.time_order.YEARS``); two different years answer it
  without the generator. ``compare_countries`` and ``compare_quantities`` (ours) do the same for "same
  country" questions and for amounts ("taller", "more species").

The loop is bounded by ``max_iterations`` rounds of retrieval (default 3, §5.2); when the bound
is reached the graph goes straight to ``generate`` without judging or planning again. Every
generation is capped at ``max_output_tokens`` (200, §5.2); a reply cut there loses its unfinished
last sentence (counted in ``truncated``). Nodes run the models' async methods under ``ainvoke``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Overwrite

from langchain_resp import prompts
from langchain_resp.config import ReSPConfig
from langchain_resp.state import LocalMemory, ReSPInput, ReSPOutput, ReSPState
from multihop_rag.frameworks.langgraph import (
    dialogue_node,
    doc_key,
    document_record,
    format_documents,
    format_reading,
    reading_list,
    repeated,
    run_settings,
)
from multihop_rag.indexing.text import complete_sentences
from multihop_rag.llm.calls import Call, Dialogue, Effect, Reply, Together
from multihop_rag.llm.questions import asks_yes_no, sub_question_of
from multihop_rag.llm.structured import StructuredStats, label_dialogue, label_probability_dialogue
from multihop_rag.metrics import is_yes_no
from multihop_rag.quantity_order import quantity_comparison
from multihop_rag.same_country import same_country_question
from multihop_rag.serving.profile import default_concurrency
from multihop_rag.time_order import time_comparison

__all__ = ["ROLES", "combined_memory", "resp_state_graph", "build_resp_graph"]

ROLES = ("reasoner", "summarizer", "generator")
"""The three LLM roles of §6.2; the builders take one model or a dict by role."""


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


class _Prompts(NamedTuple):
    local: str
    judge: str
    plan: str


_PROMPT_ORDERS = {
    "off": _Prompts(prompts.LOCAL_PATHWAY, prompts.JUDGE, prompts.PLAN),
    "documents": _Prompts(prompts.LOCAL_PATHWAY_DOCUMENTS_FIRST, prompts.JUDGE, prompts.PLAN),
    "all": _Prompts(prompts.LOCAL_PATHWAY_DOCUMENTS_FIRST, prompts.JUDGE_MEMORY_FIRST, prompts.PLAN_MEMORY_FIRST),
}
"""The Local Pathway, Judge and Plan prompts of each ``shared_prefixes`` setting."""


def _unread(documents: Sequence[dict[str, str]], passages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """This round's ``documents`` that no earlier round retrieved (``passages``: every round's, this one's last)."""
    read = {doc_key(doc) for doc in passages[: len(passages) - len(documents)]}
    return [doc for doc in documents if doc_key(doc) not in read]


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


_DOCUMENT_LABEL = re.compile(r"\W*doc(ument)?\s*\d+\W*", re.IGNORECASE)
"""An answer that names a document's label in the generator's prompt instead of what it says."""
_HEADING = re.compile(r"\W*(?:global evidence memory|local pathway memory|retrieved documents)\W*", re.IGNORECASE)
"""An answer that is a heading of the generator's reference (:func:`combined_memory`'s, ``GENERATE_WITH_DOCUMENTS``')."""
_NAME_PREFIX = re.compile(r"^\W*(name|entity|answer)\s*:\s*", re.IGNORECASE)


def _answers_nothing(answer: str, question: str) -> bool:
    """Whether ``answer`` is no answer to ``question``: a heading of the generator's reference ("Global evidence
    memory"), or Yes/No to a question that asks neither."""
    return bool(_HEADING.fullmatch(answer)) or (is_yes_no(answer) and not asks_yes_no(question))


def entity_of(reply: Reply) -> str:
    """The name a re-plan replied with ("" for a cut reply or one longer than a name)."""
    line = next((line.strip() for line in reply.text.splitlines() if line.strip()), "")
    name = _NAME_PREFIX.sub("", line).strip().strip("\"'*.").strip()
    return "" if reply.truncated or not name or len(name.split()) > 12 else name


def _text(reply: Reply) -> tuple[str, int]:
    """A reply's text, without the unfinished sentence of a cut one; and 1 if it was cut."""
    return (complete_sentences(reply.text), 1) if reply.truncated else (reply.text, 0)


def _roles(llm: BaseChatModel | Mapping[str, BaseChatModel]) -> dict[str, BaseChatModel]:
    if isinstance(llm, BaseChatModel):
        return {role: llm for role in ROLES}
    missing = [role for role in ROLES if role not in llm]
    if missing:
        raise ValueError(f"llm dict lacks the role(s) {missing}; give all of {list(ROLES)}")
    return {role: llm[role] for role in ROLES}


def resp_state_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel], retriever: BaseRetriever, config: ReSPConfig | None = None
) -> StateGraph[ReSPState, ReSPConfig, ReSPInput, ReSPOutput]:
    """The uncompiled ReSP graph, to add or rewire nodes before compiling (e.g. a reranker between
    ``retrieve`` and ``summarize``: ``graph.add_node(...)``, then replace that edge)."""
    models = _roles(llm)
    default = config or ReSPConfig()
    summaries_at_once = default_concurrency(models["summarizer"]) > 1

    def start(state: ReSPState) -> dict[str, Any]:
        return {
            "sub_question": "",
            "documents": [],
            "judgement": "",
            "answer": "",
            "stop_reason": "",
            "iterations": 0,
            **{key: Overwrite([]) for key in ("sub_questions", "retrieved", "global_memory", "local_memory", "passages",
                                              "judge_probabilities")},
            **{key: Overwrite(0) for key in ("replans", "judge_failures", "truncated", "retrieved_words")},
            "decided_by": "",
        }

    def retrieve(state: ReSPState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        query = state.get("sub_question") or state["question"]
        found = yield Effect(lambda: retriever.invoke(query), lambda: retriever.ainvoke(query))
        docs = [document_record(d) for d in found[: settings.top_k]]
        return {
            "sub_question": query,
            "documents": docs,
            "retrieved": [[d["id"] for d in docs]],
            "passages": docs,
            "retrieved_words": sum(len(d["text"].split()) for d in docs),
            "iterations": state.get("iterations", 0) + 1,
        }

    def summarize(state: ReSPState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        cap = settings.max_output_tokens
        new = state["documents"] if settings.reread_documents else _unread(state["documents"], state["passages"])
        docs = format_documents(new or state["documents"])
        calls: dict[str, Call] = {}
        if new:
            prompt = prompts.GLOBAL_EVIDENCE.format(docs=docs, question=state["question"])
            calls["global"] = Call(models["summarizer"], prompt, max_tokens=cap, stop=["[DONE]"])
        if state["sub_question"] != state["question"]:
            prompt = _PROMPT_ORDERS[settings.shared_prefixes].local.format(sub_question=state["sub_question"], docs=docs)
            calls["local"] = Call(models["summarizer"], prompt, max_tokens=cap)
        replies = dict(zip(calls, (yield Together(tuple(calls.values()), at_once=summaries_at_once)), strict=True))
        update: dict[str, Any] = {"truncated": 0}
        if "global" in replies:
            summary, update["truncated"] = _text(replies["global"])
            update["global_memory"] = [_global_summary(summary)]
        if "local" in replies:
            local, local_cut = _text(replies["local"])
            update["local_memory"] = [{"sub_question": state["sub_question"], "answer": _local_answer(local)}]
            update["truncated"] += local_cut
        return update

    def after_summarize(state: ReSPState) -> Literal["judge", "plan", "generate"]:
        settings = run_settings(default)
        if state["iterations"] >= settings.max_iterations:
            return "generate"
        return "judge" if state["iterations"] >= settings.min_iterations else "plan"

    def judge(state: ReSPState) -> Dialogue[dict[str, Any]]:
        settings, stats = run_settings(default), StructuredStats()
        threshold = settings.judge_threshold
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        prompt = _PROMPT_ORDERS[settings.shared_prefixes].judge.format(question=state["question"], memory=memory)
        if threshold is not None:
            p_yes = yield from label_probability_dialogue(models["reasoner"], prompt)
            if p_yes is not None:
                return {"judgement": "Yes" if p_yes >= threshold else "No", "judge_probabilities": [round(p_yes, 4)]}
        label = yield from label_dialogue(models["reasoner"], prompt, default="No", stats=stats)
        return {"judgement": label, "judge_failures": stats.failed}

    def after_judge(state: ReSPState) -> Literal["plan", "generate"]:
        return "generate" if state["judgement"] == "Yes" else "plan"

    def plan(state: ReSPState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        ask = _PROMPT_ORDERS[settings.shared_prefixes].plan.format(memory=memory, question=state["question"])
        reply = yield Call(models["reasoner"], ask, max_tokens=settings.max_output_tokens)
        thought = sub_question_of(reply)
        earlier = [state["question"], *state.get("sub_questions", [])]
        repeat = repeated(thought, earlier, settings.repeat_threshold) if thought else state["question"]
        if repeat is None:
            return {"sub_question": thought, "sub_questions": [thought]}
        if settings.replan_on_repeat:
            prompt = prompts.REPLAN.format(memory=memory, question=state["question"], thought=thought or "(none)", earlier=repeat)
            reply = yield Call(models["reasoner"], prompt, max_tokens=32, stop=["\n"])
            entity = entity_of(reply)
            thought = prompts.ENTITY_QUESTION.format(entity=entity) if entity else ""
            if thought and repeated(thought, earlier, settings.repeat_threshold) is None:
                return {"sub_question": thought, "sub_questions": [thought], "replans": 1}
        return {"stop_reason": "repeated_sub_question", "sub_question": thought, "replans": int(settings.replan_on_repeat)}

    def after_plan(state: ReSPState) -> Literal["retrieve", "generate"]:
        return "generate" if state.get("stop_reason") == "repeated_sub_question" else "retrieve"

    def generate(state: ReSPState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        memory = combined_memory(state["global_memory"], state.get("local_memory", []))
        reason = state.get("stop_reason") or ("sufficient" if state.get("judgement") == "Yes" else "max_iterations")

        def reference() -> str:  # what the compare_* settings read: the memory and, whatever the rounds, the documents
            reading = format_reading(reading_list(state.get("passages", []), settings.reader_tokens))
            return f"{memory}\n[Retrieved documents]\n{reading}" if reading else memory

        comparisons = {"countries": same_country_question(state["question"]) if settings.compare_countries else None,
                       "years": time_comparison(state["question"]) if settings.compare_years else None,
                       "quantities": quantity_comparison(state["question"]) if settings.compare_quantities else None}
        for decided_by, comparison in comparisons.items():
            if comparison is not None:
                ask = comparison.prompt(state["question"], reference())
                reply = yield Call(models["generator"], ask, max_tokens=settings.max_output_tokens)
                if picked := comparison.decide(reply.text):
                    return {"answer": picked[0], "stop_reason": reason, "decided_by": decided_by}
        budget = settings.reader_tokens if state["iterations"] >= settings.reader_min_rounds else 0
        docs = reading_list(state.get("passages", []), budget, labelled=True)
        template = prompts.GENERATE_WITH_DOCUMENTS if docs else prompts.GENERATE
        prompt = template.format(memory=memory, docs=format_documents(docs), question=state["question"])
        reply = yield Call(models["generator"], prompt, max_tokens=settings.max_output_tokens)
        label_answers = int(bool(docs) and _DOCUMENT_LABEL.fullmatch(reply.text.strip()) is not None)
        if label_answers:
            prompt = template.format(memory=memory, docs=format_reading(docs), question=state["question"])
            reply = yield Call(models["generator"], prompt, max_tokens=settings.max_output_tokens)
        answer_checks = int(settings.answer_check and _answers_nothing(reply.text.strip(), state["question"]))
        if answer_checks:
            asked = f"{state['question']}\n{prompts.ANSWER_WHAT_IS_ASKED}"
            prompt = template.format(memory=memory, docs=format_documents(docs), question=asked)
            reply = yield Call(models["generator"], prompt, max_tokens=settings.max_output_tokens)
        return {"answer": reply.text.strip(), "stop_reason": reason, "truncated": int(reply.truncated),
                "label_answers": label_answers, "answer_checks": answer_checks}

    graph = StateGraph(ReSPState, input_schema=ReSPInput, output_schema=ReSPOutput, context_schema=ReSPConfig)
    graph.add_node("start", start)
    for step in (retrieve, summarize, judge, plan, generate):
        graph.add_node(step.__name__, dialogue_node(step))
    graph.add_edge(START, "start")
    graph.add_edge("start", "retrieve")
    graph.add_edge("retrieve", "summarize")
    graph.add_conditional_edges("summarize", after_summarize)
    graph.add_conditional_edges("judge", after_judge)
    graph.add_conditional_edges("plan", after_plan)
    graph.add_edge("generate", END)
    return graph


def build_resp_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel],
    retriever: BaseRetriever,
    *,
    config: ReSPConfig | None = None,
    checkpointer: Checkpointer | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    name: str = "resp",
) -> CompiledStateGraph[ReSPState, ReSPConfig, ReSPInput, ReSPOutput]:
    """Compile the ReSP graph.

    Args:
        llm: one chat model for every role, or ``{"reasoner", "summarizer", "generator"}`` (§6.2).
        retriever: any LangChain retriever; its first ``top_k`` documents are used per round.
        config: the knobs (:class:`~langchain_resp.ReSPConfig`: the paper's values, but where a field's description says otherwise); a run
            can change them through its context: ``graph.invoke(input, context={"top_k": 3})``.
        checkpointer: a LangGraph checkpointer, so runs can be interrupted and resumed.
        interrupt_before: node names to pause before (needs a checkpointer).
        interrupt_after: node names to pause after (needs a checkpointer).
        name: the graph's name (as a subgraph of a larger one).

    Input ``{"question": str}``; output :class:`~langchain_resp.state.ReSPOutput` (answer and trace).
    """
    return resp_state_graph(llm, retriever, config).compile(
        checkpointer=checkpointer, interrupt_before=interrupt_before, interrupt_after=interrupt_after, name=name
    )
