"""HiRAG (Hierarchical RAG with Rethink; Zhang et al., 2024) as a LangGraph state machine.

Algorithm 1 (Appendix A.2), node by node::

    start -> decompose -> "That's enough" / repeat / max_subquestions -> summarize -> END
                       -> extract_entity -> retrieve_document -> more than th1 titles tie -> rewrite -> record
                                                              -> retrieve_chunk -> verify -> yes -> record
                                                                                          -> no, (t/m)² draw -> internal_knowledge
                                                                                          -> no -> rethink
                          internal_knowledge -> yes -> record, no -> rethink
                          rethink -> chunk level -> retrieve_document (the next-best chunk of the same document)
                                  -> document level -> retrieve_document (every th2-th failure: the next-best title)
                                  -> th3 attempts -> record (gave up, empty sub-answer)
                       record -> decompose

- ``start``: resets every per-question field, so a reused thread answers a new question afresh.
- ``decompose`` (§4.2, eq. 1): a dialogue; the Decomposer asks one simple question per turn and
  each sub-answer is the user's reply (an empty one says the question could not be answered, so
  the Decomposer rephrases, workflow 2.1). Its initialization asks for a first simple question, as
  the paper's does: "That's enough." before any sub-question is a model failure (small models
  say it at once), asked again once; a second refusal makes the question itself the first
  sub-question (``first_question = "question"``), so every question is retrieved for at least
  once. A sub-question naming a made-up entity of the examples that the question does not (a small
  model copying the prompt) is asked again once (``copied_examples``); a second one is treated as a
  refusal. At most ``max_subquestions`` (paper: 5, Appendix A.1); below ``min_subquestions`` (ours;
  paper: 1) a "That's enough." is answered once with a request for the next sub-question, and with
  ``fresh_next_question`` a repeated sub-question by a fresh prompt holding the answers so far.
- ``extract_entity`` (eq. 3): e = LLM(q). An entity sharing no word with q (a small model copying
  a few-shot example) is replaced by q itself, so the title search still uses q's words.
- ``retrieve_document`` (eq. 3, Algorithm 1 lines 18-23): BM25 of the entity over titles, then at
  every attempt t the semantic-incompleteness test of eq. (4): titles equal to the entity up to a
  disambiguation ("X (film)", "X (novel)") or tying the score of the document in use count as
  matches, and more than ``th1`` of them (the authors' code: more than one) send the sub-question to
  ``rewrite``, as does no matching title at all.
- ``retrieve_chunk`` (eq. 5): the chunk of the chosen document ranked ``chunk_rank`` by dense
  similarity, given with the document's profile (eq. 3, p*).
- ``verify`` (§4.4, eq. 6): the LLM answers from chunk + profile, then judges yes/no whether that
  answers the sub-question. Answer-then-judge follows eq. (6) and the authors' code; Algorithm 1
  prints the judge first, with the same two calls. With ``grounded_sub_answers`` (ours) a sub-answer
  naming something neither the chunk + profile nor the sub-question names fails without the judge.
- ``rethink`` (Algorithm 1, lines 31-36): attempt t failed; every ``th2``-th failure (or when the
  document has no further chunk) moves to the next document and its best chunk, other failures
  to the next chunk; after ``th3`` attempts the sub-question is given up. With ``dense_rethink`` (ours),
  once the entity's titles run out the next document is that of the nearest untried chunk (dense). th2 = 3 as in the authors'
  code; th3 = 2 (ours, measured; §5.3's "default maximum number of retrievals is 4" is th3 = 4).
- ``internal_knowledge`` (eq. 7): after the t-th rethink fails, with probability (t/m)² the model
  answers from its own knowledge (m = 5, §4.4); the draw is a seeded hash of (seed, question,
  sub-question, t), so runs are reproducible and resuming from a checkpoint draws the same.
- ``rewrite`` (eq. 4, Algorithm 1 lines 4-15): rewrite the sub-question with the latest sub-answer
  naming the entity, else with the original question, then answer the sub-question from a dense
  search over the whole corpus (the local stand-in for the paper's Google search); the chunks it
  found are the sub-answer's evidence (``rewrite_hits``).
- ``summarize`` (eq. 2): the final answer from the question and all sub-answers. With ``compare_years`` (ours)
  a comparison in time is answered from the years its sub-answers give or, with ``years_from_reading``, from the
  dates the Summarizer's reading gives when asked; with ``compare_quantities`` (ours) a comparison of amounts
  ("taller", "more species") from each option's number, asked of the same reading.
  With ``summary_style``
  "analysis" a step-by-step analysis, then a short keyword answer extracted from it (as the authors' pipeline
  does for EM); "short" (ours, the default) answers in a few words in one call. With ``summarizer_reads``
  (ours) each sub-answer follows its sub-question ("pairs"), and the chunk it came from ("pairs_and_chunks");
  with ``reader_tokens`` (ours) it also reads those chunks and the question's nearest chunks as documents,
  or ("chunks") those documents alone.

An answer equal to a few-shot example's answer (``prompts.EXAMPLE_ANSWERS``: made-up entities in
no corpus, so never right) is recorded in ``copied_examples`` and asked again once with a note; a
second copy is dropped. Models can differ by role (the paper decomposes with LLaMA-3-70B and runs
the rest on GPT-3.5, §5.3): ``decomposer`` (decompose), ``verifier`` (the Filter's yes/no) and
``answerer`` (entities, sub-answers, rewrites, the summary). Nodes run the models' async methods
under ``ainvoke``.

Left out: the authors' self-consistency vote over several final answers (3-7 more LLM calls per
question); the Summarizer here answers once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Overwrite

from langgraph_hirag import prompts
from langgraph_hirag.config import HiRAGConfig
from langgraph_hirag.corpus import HierarchicalCorpus
from langgraph_hirag.replies import (
    LINE,
    NEXT_EXAMPLE,
    answer_line,
    copies_example,
    final_line,
    first_line,
    invents_words,
    names_example_entity,
    said_enough,
)
from langgraph_hirag.retrieval import RetrievalNodes, sub_question_reset
from langgraph_hirag.state import HiRAGInput, HiRAGOutput, HiRAGState, SubQuestionTrace
from langgraph_hirag.years import option_by_year
from multihop_rag.frameworks.langgraph import (
    dialogue_node,
    document_record,
    format_reading,
    reading_list,
    run_settings,
    word_overlap,
)
from multihop_rag.llm.calls import Call, Dialogue, Effect
from multihop_rag.llm.questions import asks_yes_no
from multihop_rag.metrics import comparison_options, normalize_answer, picked_option
from multihop_rag.option_comparisons import Comparison, comparison_kinds, comparison_of
from multihop_rag.short_answer import short_answer_prompt, step_answer_prompt

__all__ = [
    "ROLES",
    "hirag_state_graph",
    "build_hirag_graph",
    "build_hirag_retrieval_graph",
    "evidence_notes",
]

ROLES = ("decomposer", "verifier", "answerer")
"""The model roles; the builders take one chat model or a dict by role."""


def evidence_notes(entries: Sequence[SubQuestionTrace], *, chunks: bool = True) -> str:
    """What the Summarizer reads with ``summarizer_reads`` "pairs" or "pairs_and_chunks": each sub-question,
    its sub-answer and (``chunks``) the text it was found in, each text once."""
    lines, shown = [], set()
    for i, entry in enumerate(entries, 1):
        lines.append(f"{i}. Sub-question: {entry['sub_question']}")
        lines.append(f"   Answer: {entry['answer'] or 'not found'}")
        knowledge = entry.get("knowledge", "") if chunks else ""
        if knowledge and knowledge not in shown:
            shown.add(knowledge)
            lines.append("   Found in: " + " ".join(knowledge.split()))
    return "\n".join(lines)


_READER_DEPTH = 20
"""The question's nearest chunks searched for the Summarizer's reading list (``reader_tokens`` decides how many it reads)."""
STEP_REPLY_TOKENS = 96
"""Token cap of the Summarizer's reply with ``summary_style="step"``: a "Step:" line and an "Answer:" line."""


def _found_in(entries: Sequence[SubQuestionTrace]) -> list[dict[str, str]]:
    """The chunks the sub-answers were read from, in order: the verified attempt's chunk (with its document's
    profile, as the Filter read it) or the rewrite's hits."""
    found = []
    for entry in entries:
        verified = [a for a in entry["attempts"] if a["verified"]]
        if entry["source"] == "retrieval" and verified:
            found.append({"id": verified[-1]["chunk_id"], "title": verified[-1]["title"], "text": " ".join(entry["knowledge"].split())})
        elif entry["source"] == "rewrite":
            found.append({"id": ",".join(entry["rewrite_hits"]), "title": "", "text": " ".join(entry["knowledge"].split())})
    return found


def _known(entries: Sequence[SubQuestionTrace], state: HiRAGState, reads: str) -> str:
    """The Summarizer's known information as ``summarizer_reads`` has it ("chunks": none)."""
    if reads == "chunks":
        return ""
    if reads in ("pairs", "pairs_and_chunks"):
        return evidence_notes(entries, chunks=reads == "pairs_and_chunks")
    return " ".join(a for a in state.get("sub_answers", []) if a) or "None"


def _reads_as_naive(question: str, entries: Sequence[SubQuestionTrace], settings: HiRAGConfig) -> bool:
    """``fallback_below``: the decomposition answered too few sub-questions of a question naming no two options, so
    the Summarizer reads as naive RAG's reader does."""
    answered = sum(1 for entry in entries if entry["answer"])
    return answered < settings.fallback_below and comparison_options(question) is None


def _asked_of_reading(question: str, settings: HiRAGConfig) -> Comparison | None:
    """The comparison the Summarizer's reading is asked to decide before the Summarizer answers: a comparison in time
    with ``years_from_reading`` (unless its dates are another's, a hop behind each option), or of amounts with
    ``compare_quantities``."""
    kinds = comparison_kinds(years=settings.compare_years and settings.years_from_reading,
                             quantities=settings.compare_quantities)
    found = comparison_of(question, kinds)
    return found[1] if found else None


def _decomposition(
    question: str, sub_questions: Sequence[str], sub_answers: Sequence[str], comparison_example: bool
) -> list[BaseMessage]:
    with_options = comparison_example and comparison_options(question) is not None
    messages: list[BaseMessage] = [
        SystemMessage(prompts.DECOMPOSER_FOR_OPTIONS if with_options else prompts.DECOMPOSER),
        HumanMessage(prompts.DECOMPOSE_START.format(question=question)),
    ]
    for q, a in zip(sub_questions, sub_answers, strict=True):
        messages += [AIMessage(q), HumanMessage(prompts.NEXT_TURN.format(answer=a) if a else prompts.NO_ANSWER)]
    return messages


def _roles(llm: BaseChatModel | Mapping[str, BaseChatModel]) -> dict[str, BaseChatModel]:
    if isinstance(llm, BaseChatModel):
        return {role: llm for role in ROLES}
    missing = [role for role in ROLES if role not in llm]
    if missing:
        raise ValueError(f"llm dict lacks the role(s) {missing}; give all of {list(ROLES)}")
    return {role: llm[role] for role in ROLES}


def _per_question_reset() -> dict[str, Any]:
    return {
        **sub_question_reset(),
        "current": "",
        "entity": "",
        "knowledge": "",
        "stop_reason": "",
        "first_question": "decomposer",
        "reasoning": "",
        "answer": "",
        "summary_reads": [],
        **{key: Overwrite([]) for key in ("sub_questions", "sub_answers", "trace", "copied_examples",
                                          "invented_answers", "invented_sub_answers", "off_option_answers")},
        **{key: Overwrite(0) for key in ("truncated", "llm_calls", "restated")},
    }


def hirag_state_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel], corpus: HierarchicalCorpus, config: HiRAGConfig | None = None
) -> StateGraph[HiRAGState, HiRAGConfig, HiRAGInput, HiRAGOutput]:
    """The uncompiled HiRAG graph, to add or rewire nodes before compiling."""
    models = _roles(llm)
    default = config or HiRAGConfig()

    def start(state: HiRAGState) -> dict[str, Any]:
        return _per_question_reset()

    def decompose(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        asked = state.get("sub_questions", [])
        if len(asked) >= settings.max_subquestions:
            return {"stop_reason": "max_subquestions"}
        messages = _decomposition(state["question"], asked, state.get("sub_answers", []), settings.comparison_example)
        ask = Call(models["decomposer"], messages, max_tokens=settings.max_output_tokens, stop=LINE)
        reply, calls = (yield ask), 1
        if not reply.text.strip():  # an empty turn is asked again once, as the authors' code does
            reply, calls = (yield Call(models["decomposer"], messages, max_tokens=settings.max_output_tokens)), 2
        if said_enough(reply.text) and not asked:  # the paper's initialization asks for a first question
            again = [*messages, AIMessage(reply.text), HumanMessage(prompts.FIRST_QUESTION_AGAIN)]
            reply, calls = (yield Call(models["decomposer"], again, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1
            if said_enough(reply.text) or not first_line(reply):
                return {"current": state["question"], "first_question": "question", "stop_reason": "", "llm_calls": calls}
        if said_enough(reply.text) and 0 < len(asked) < settings.min_subquestions:
            again = [*messages, AIMessage(reply.text), HumanMessage(prompts.NEXT_QUESTION_AGAIN)]
            reply, calls = (yield Call(models["decomposer"], again, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1
        if said_enough(reply.text):
            return {"stop_reason": "enough", "llm_calls": calls}
        sub_question, flagged = first_line(reply), []
        context = " ".join([state["question"], *state.get("sub_answers", [])])
        if names_example_entity(sub_question, context):  # asked again once, then the question itself / the end
            flagged.append(sub_question)
            again = [*messages, AIMessage(reply.text), HumanMessage(prompts.NOT_AN_EXAMPLE_QUESTION)]
            reply, calls = (yield Call(models["decomposer"], again, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1
            sub_question = "" if said_enough(reply.text) else first_line(reply)
            if names_example_entity(sub_question, context):
                flagged.append(sub_question)
                sub_question = ""
            if not sub_question:
                if not asked:
                    return {"current": state["question"], "first_question": "question", "stop_reason": "",
                            "llm_calls": calls, "copied_examples": flagged}
                return {"stop_reason": "copied_example", "llm_calls": calls, "copied_examples": flagged}
        if not sub_question:
            if not asked:
                return {"current": state["question"], "first_question": "question", "stop_reason": "", "llm_calls": calls}
            return {"stop_reason": "no_sub_question", "llm_calls": calls}
        seen = {normalize_answer(q) for q in asked}
        if normalize_answer(sub_question) in seen and settings.fresh_next_question and len(asked) < settings.min_subquestions:
            answered = "\n".join(f"- {q} {a}" for q, a in zip(asked, state.get("sub_answers", []), strict=False))
            fresh = prompts.NEXT_QUESTION_FRESH.format(question=state["question"], answered=answered)
            reply, calls = (yield Call(models["decomposer"], fresh, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1
            sub_question = "" if said_enough(reply.text) or names_example_entity(reply.text, context) else first_line(reply)
        if not sub_question or normalize_answer(sub_question) in seen:
            return {"stop_reason": "repeated_sub_question", "llm_calls": calls, "copied_examples": flagged}
        restated = 0
        if not asked and settings.ask_again_if_restated and word_overlap(sub_question, state["question"]) >= settings.restate_threshold:
            again = [*messages, AIMessage(reply.text), HumanMessage(prompts.RESTATED_QUESTION_AGAIN)]
            reply, calls, restated = (yield Call(models["decomposer"], again, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1, 1
            simpler = "" if said_enough(reply.text) else first_line(reply)
            if simpler and not names_example_entity(simpler, context):
                sub_question = simpler
        return {"current": sub_question, "stop_reason": "", "llm_calls": calls, "copied_examples": flagged, "restated": restated}

    def after_decompose(state: HiRAGState) -> Literal["extract_entity", "summarize"]:
        return "summarize" if state.get("stop_reason") else "extract_entity"

    def summarize(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        cap = settings.max_output_tokens
        entries = state.get("trace", [])
        if not settings.answer_without_evidence and not any(e["answer"] for e in entries):
            return {"reasoning": "No sub-question was answered from the corpus.", "answer": "unknown"}
        if settings.compare_years and (
            by_year := option_by_year(state["question"], state.get("sub_questions", []), state.get("sub_answers", []))
        ):
            return {"answer": by_year[0], "reasoning": by_year[1]}
        question = state["question"]
        as_naive = _reads_as_naive(question, entries, settings)
        budget = settings.fallback_tokens if as_naive else settings.reader_tokens
        docs: list[dict[str, str]] = []
        if budget:
            hits: list[Document] = yield Effect(
                lambda: corpus.search(question, _READER_DEPTH), lambda: corpus.asearch(question, _READER_DEPTH)
            )
            docs = reading_list([*([] if as_naive else _found_in(entries)), *map(document_record, hits)], budget)
        reads = [i for d in docs for i in d["id"].split(",") if i]
        known = "" if as_naive else _known(entries, state, settings.summarizer_reads)
        asked = 0
        if comparison := _asked_of_reading(question, settings):
            reference = f"{known}\n[Retrieved documents]\n{format_reading(docs)}" if docs else known
            reply = yield Call(models["answerer"], comparison.prompt(question, reference), max_tokens=cap)
            if picked := comparison.decide(reply.text):
                return {"answer": picked[0], "reasoning": picked[1], "summary_reads": reads, "llm_calls": 1}
            asked = 1
        if settings.summary_style in ("short", "step"):
            answered = yield from short_answer(question, known, docs)
            return answered | {"summary_reads": reads, "llm_calls": answered["llm_calls"] + asked}
        if settings.summarizer_reads == "chunks":
            template = prompts.SUMMARIZE_DOCUMENTS
        else:
            template = {"pairs_and_chunks": prompts.SUMMARIZE_WITH_EVIDENCE, "pairs": prompts.SUMMARIZE_PAIRS}.get(
                settings.summarizer_reads, prompts.SUMMARIZE)
            template = prompts.SUMMARIZE_WITH_DOCUMENTS if docs else template
        prompt = template.format(question=question, known=known, docs=format_reading(docs))
        reasoning = yield Call(models["answerer"], prompt, max_tokens=cap, stop=NEXT_EXAMPLE)
        concluded = final_line(reasoning) or reasoning.text
        extract = prompts.EXTRACT_ANSWER.format(response=concluded, question=question)
        reply = yield Call(models["answerer"], extract, max_tokens=cap, stop=LINE)
        answer, calls, flagged = first_line(reply), 2, []
        if copies_example(answer):
            flagged.append(answer)
            reply = yield Call(models["answerer"], extract + prompts.NOT_THE_EXAMPLE, max_tokens=cap, stop=LINE)
            answer, calls = first_line(reply), 3
            if copies_example(answer):
                flagged.append(answer)
                answer = final_line(reasoning)
        truncated, invented = int(reasoning.truncated) + int(reply.truncated), []
        if settings.grounded_extraction and invents_words(answer, f"{concluded} {question}"):
            invented, answer = [answer], concluded.strip()
        answer, extra, cut, off_option = yield from one_of_the_options(
            question, answer, lambda one_of: prompts.EXTRACT_ANSWER.format(response=concluded, question=one_of))
        calls, truncated = calls + extra + asked, truncated + cut
        return {
            "reasoning": reasoning.text.strip(),
            "answer": answer,
            "summary_reads": reads,
            "llm_calls": calls,
            "truncated": truncated,
            "copied_examples": flagged,
            "invented_answers": invented,
            "off_option_answers": off_option,
        }

    def short_answer(question: str, known: str, docs: list[dict[str, str]]) -> Dialogue[dict[str, Any]]:
        """``summary_style="short"``: one call with naive RAG's short-answer prompt; ``"step"``: for a question that
        names no two options and is not a yes/no one, the same prompt asking for a "Step:" line first, whose "Answer:"
        line is read (a reply without one: asked as "short"). A comparison answered with neither option is asked once
        more, for one of the two as written (``answer_with_option``)."""
        settings, reading = run_settings(default), format_reading(docs)

        def ask(q: str) -> str:  # the prompt for q, over the same reading
            return short_answer_prompt(q, docs=reading, known=known)

        answer, calls, cut, replies = "", 0, 0, []
        if settings.summary_style == "step" and comparison_options(question) is None and not asks_yes_no(question):
            step = yield Call(models["answerer"], step_answer_prompt(question, docs=reading, known=known),
                              max_tokens=STEP_REPLY_TOKENS, stop=NEXT_EXAMPLE)
            answer, calls, cut, replies = answer_line(step), 1, int(step.truncated), [step.text.strip()]
        if not answer:
            reply = yield Call(models["answerer"], ask(question), max_tokens=settings.max_output_tokens, stop=LINE)
            answer, calls, cut, replies = first_line(reply), calls + 1, cut + int(reply.truncated), [*replies, reply.text.strip()]
        answer, extra, extra_cut, off_option = yield from one_of_the_options(question, answer, ask)
        return {"reasoning": "\n".join(replies), "answer": answer, "llm_calls": calls + extra,
                "truncated": cut + extra_cut, "copied_examples": [], "invented_answers": [],
                "off_option_answers": off_option}

    def one_of_the_options(question: str, answer: str, prompt_for: Callable[[str], str]) -> Dialogue[tuple[str, int, int, list[str]]]:
        """``answer_with_option``: a question naming two options whose answer names neither is asked once more,
        ``prompt_for`` the question with the request for one of the two as written; the option it names replaces
        the answer. Returns the answer, the calls and cut replies it took, and the answer it replaced."""
        settings = run_settings(default)
        options = comparison_options(question)
        if not (options and settings.answer_with_option and picked_option(answer, options) is None):
            return answer, 0, 0, []
        one_of = prompts.ONE_OF_THE_OPTIONS.format(question=question, first=options[0], second=options[1])
        reply = yield Call(models["answerer"], prompt_for(one_of), max_tokens=settings.max_output_tokens, stop=LINE)
        picked = picked_option(first_line(reply), options)
        return (picked, 1, int(reply.truncated), [answer]) if picked else (answer, 1, int(reply.truncated), [])

    graph = StateGraph(HiRAGState, input_schema=HiRAGInput, output_schema=HiRAGOutput, context_schema=HiRAGConfig)
    graph.add_node("start", start)
    graph.add_node("decompose", dialogue_node(decompose))
    graph.add_node("summarize", dialogue_node(summarize))
    RetrievalNodes(models, corpus, default).add_to(graph, after_record="decompose")
    graph.add_edge(START, "start")
    graph.add_edge("start", "decompose")
    graph.add_conditional_edges("decompose", after_decompose)
    graph.add_edge("summarize", END)
    return graph


def build_hirag_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel],
    corpus: HierarchicalCorpus,
    *,
    config: HiRAGConfig | None = None,
    checkpointer: Checkpointer | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    name: str = "hirag",
) -> CompiledStateGraph[HiRAGState, HiRAGConfig, HiRAGInput, HiRAGOutput]:
    """Compile the HiRAG graph.

    Args:
        llm: one chat model for every role, or ``{"decomposer", "verifier", "answerer"}`` (the paper:
            a large decomposer, §5.3).
        corpus: a :class:`~langgraph_hirag.HierarchicalCorpus`.
        config: the knobs (:class:`~langgraph_hirag.HiRAGConfig`: the paper's values, but where a field's description says otherwise); a run
            can change them through its context: ``graph.invoke(input, context={"th3": 6})``.
        checkpointer: a LangGraph checkpointer, so runs can be interrupted and resumed.
        interrupt_before: node names to pause before (needs a checkpointer).
        interrupt_after: node names to pause after (needs a checkpointer).
        name: the graph's name (as a subgraph of a larger one).

    Input ``{"question": str}``; output :class:`~langgraph_hirag.state.HiRAGOutput` (answer and trace).
    """
    return hirag_state_graph(llm, corpus, config).compile(
        checkpointer=checkpointer, interrupt_before=interrupt_before, interrupt_after=interrupt_after, name=name
    )


def build_hirag_retrieval_graph(
    llm: BaseChatModel | Mapping[str, BaseChatModel], corpus: HierarchicalCorpus, *, config: HiRAGConfig | None = None
) -> CompiledStateGraph[HiRAGState, HiRAGConfig, HiRAGState, HiRAGState]:
    """HiRAG's Retriever + Filter alone (§6.5): input ``{"question": q, "current": q}`` for a
    single-hop question; the final state's ``trace[0]`` says what was retrieved and verified."""
    graph = StateGraph(HiRAGState, context_schema=HiRAGConfig)
    RetrievalNodes(_roles(llm), corpus, config or HiRAGConfig()).add_to(graph, after_record=END)
    graph.add_edge(START, "extract_entity")
    return graph.compile(name="hirag-retriever")
