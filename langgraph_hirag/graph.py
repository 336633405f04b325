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
  refusal. At most ``max_subquestions`` (paper: 5, Appendix A.1).
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
  search over the whole corpus (the local stand-in for the paper's Google search); the chunks it
  found are the sub-answer's evidence (``rewrite_hits``).
- ``summarize`` (eq. 2): the final answer from the question and all sub-answers, then a short
  keyword answer extracted from it (as the authors' pipeline does for EM).

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

import hashlib
import re
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
from langgraph_hirag.corpus import HierarchicalCorpus, base_title
from langgraph_hirag.state import Attempt, HiRAGInput, HiRAGOutput, HiRAGState, SubQuestionTrace
from multihop_rag.frameworks.langgraph import dialogue_node, run_settings, word_overlap
from multihop_rag.llm.calls import Call, Dialogue, Effect, Reply
from multihop_rag.llm.structured import label_dialogue
from multihop_rag.metrics import normalize_answer

__all__ = [
    "ROLES",
    "hirag_state_graph",
    "build_hirag_graph",
    "build_hirag_retrieval_graph",
    "fallback_probability",
    "fallback_draw",
    "tied_titles",
    "evidence_notes",
]

ROLES = ("decomposer", "verifier", "answerer")
"""The model roles; the builders take one chat model or a dict by role."""


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


def final_line(reply: Reply) -> str:
    """The text after the last "Answer:" line, else the last non-empty line; a reply cut at the token
    cap before its "Answer:" line has no answer: ""."""
    lines = [line.strip() for line in reply.text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        match = _ANSWER_LINE.match(line)
        if match and match.group(1).strip():
            return "" if reply.truncated and line == lines[-1] else match.group(1).strip()
    return "" if reply.truncated or not lines else lines[-1]


def first_line(reply: Reply) -> str:
    """The first line without a "Question:"-like prefix; a reply cut on its only line: ""."""
    lines = [line.strip() for line in reply.text.strip().splitlines() if line.strip()]
    if not lines or (reply.truncated and len(lines) == 1):
        return ""
    return _PREFIX.sub("", lines[0]).strip().strip('"').strip()


def is_unknown(answer: str) -> bool:
    return not answer.strip() or bool(_UNKNOWN.match(answer)) or "i don't know" in answer.lower()


def said_enough(text: str) -> bool:
    """Whether a Decomposer turn ends the decomposition ("That's enough.")."""
    return "that's enough" in text.lower().replace("’", "'") or text.strip().lower().rstrip(".!") == "enough"


_EXAMPLE_ANSWERS = {normalize_answer(a) for a in prompts.EXAMPLE_ANSWERS}
_EXAMPLE_ENTITIES = {normalize_answer(e) for e in prompts.EXAMPLE_ENTITIES}


def copies_example(answer: str) -> bool:
    """Whether ``answer`` is a few-shot example's answer (a small model copying the prompt)."""
    return bool(answer.strip()) and normalize_answer(answer) in _EXAMPLE_ANSWERS


def names_example_entity(text: str, context: str) -> bool:
    """Whether ``text`` names a few-shot example's made-up entity that ``context`` (the question and the
    sub-answers so far) does not: a small model copying the prompt."""
    padded, known = f" {normalize_answer(text)} ", f" {normalize_answer(context)} "
    return any(f" {e} " in padded and f" {e} " not in known for e in _EXAMPLE_ENTITIES)


def _entity(extracted: str, sub_question: str) -> str:
    """The extracted entity, or the sub-question itself when the entity shares no word with it
    (a small model copying a few-shot example), so BM25 still searches the titles with its words."""
    words = set(normalize_answer(sub_question).split())
    return extracted if extracted and words & set(normalize_answer(base_title(extracted)).split()) else sub_question


def _knowledge(profile: str, chunk: str) -> str:
    return profile if chunk.strip() in profile else f"{profile}\n{chunk}"


def evidence_notes(entries: Sequence[SubQuestionTrace]) -> str:
    """What the Summarizer reads with ``summarize_reads_evidence``: each sub-question, its sub-answer and
    the text it was found in, each text once."""
    lines, shown = [], set()
    for i, entry in enumerate(entries, 1):
        lines.append(f"{i}. Sub-question: {entry['sub_question']}")
        lines.append(f"   Answer: {entry['answer'] or 'not found'}")
        knowledge = entry.get("knowledge", "")
        if knowledge and knowledge not in shown:
            shown.add(knowledge)
            lines.append("   Found in: " + " ".join(knowledge.split()))
    return "\n".join(lines)


def _decomposition(question: str, sub_questions: Sequence[str], sub_answers: Sequence[str]) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage(prompts.DECOMPOSER.format(question=question)),
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
        "current": "",
        "entity": "",
        "candidates": [],
        "tied": [],
        "doc_rank": 0,
        "chunk_rank": 0,
        "level": "first",
        "attempts": [],
        "knowledge": "",
        "response": "",
        "outcome": "",
        "fallback": False,
        "rewritten": None,
        "rewrite_hits": [],
        "stop_reason": "",
        "first_question": "decomposer",
        "reasoning": "",
        "answer": "",
        **{key: Overwrite([]) for key in ("sub_questions", "sub_answers", "trace", "copied_examples")},
        **{key: Overwrite(0) for key in ("truncated", "llm_calls", "restated")},
    }


def _add_retrieval_nodes(
    graph: StateGraph[Any, Any, Any, Any], models: dict[str, BaseChatModel], corpus: HierarchicalCorpus, default: HiRAGConfig,
    after_record: str
) -> None:
    """The Retriever and Filter of HiRAG (§4.3-4.4) for ``state["current"]``, ending in ``record``."""

    def ask(role: str, prompt: str | list[BaseMessage], stop: list[str]) -> Call:
        return Call(models[role], prompt, max_tokens=run_settings(default).max_output_tokens, stop=stop)

    def answer_once(prompt: str, stop: list[str], read: Callable[[Reply], str], flagged: list[str]) -> Dialogue[tuple[str, int, int]]:
        """Ask the answerer; an answer copied from an example is flagged and asked again once (a second
        copy is dropped). Returns (answer, calls, truncated replies)."""
        reply = yield ask("answerer", prompt, stop)
        answer, calls, cut = read(reply), 1, int(reply.truncated)
        if copies_example(answer):
            flagged.append(answer)
            reply = yield ask("answerer", prompt + prompts.NOT_THE_EXAMPLE, stop)
            answer, calls, cut = read(reply), 2, cut + int(reply.truncated)
            if copies_example(answer):
                flagged.append(answer)
                answer = ""
        return answer, calls, cut

    def judge(response: str, sub_question: str, knowledge: str = "") -> Dialogue[str]:
        if is_unknown(response):
            return "no"
        if knowledge and run_settings(default).verify_reads_chunk:
            prompt = prompts.CAN_ANSWER_FROM.format(knowledge=knowledge, response=response, question=sub_question)
        else:
            prompt = prompts.CAN_ANSWER.format(response=response, question=sub_question)
        label = yield from label_dialogue(models["verifier"], prompt, ("yes", "no"), default="no")
        return label

    def extract_entity(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        reply = yield ask("answerer", prompts.EXTRACT_ENTITY.format(question=state["current"]), LINE)
        return {
            "entity": _entity(first_line(reply), state["current"]),
            "candidates": [],
            "tied": [],
            "doc_rank": 0,
            "chunk_rank": 0,
            "level": "first",
            "attempts": [],
            "outcome": "",
            "fallback": False,
            "rewritten": None,
            "rewrite_hits": [],
            "response": "",
            "llm_calls": 1,
            "truncated": int(reply.truncated),
        }

    def retrieve_document(state: HiRAGState) -> dict[str, Any]:
        ranked = dict(corpus.rank_titles(state["entity"], run_settings(default).title_candidates))
        # A rethink keeps the first attempt's ranking; doc_rank says which document is in use.
        candidates = state["candidates"] if state.get("attempts") else list(ranked)
        untried = [(t, ranked[t]) for t in candidates[state.get("doc_rank", 0) :] if t in ranked]
        reference = untried[0][1] if untried else None
        return {"candidates": candidates, "tied": tied_titles(state["entity"], untried, reference)}

    def after_retrieve_document(state: HiRAGState) -> Literal["retrieve_chunk", "rewrite"]:
        # Algorithm 1 lines 20-23: the test runs at every attempt t.
        if not state["candidates"] or len(state["tied"]) > run_settings(default).th1:
            return "rewrite"
        return "retrieve_chunk"

    def retrieve_chunk(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        title = state["candidates"][state["doc_rank"]]
        chunks: list[Document] = yield Effect(
            lambda: corpus.rank_chunks(title, state["current"]), lambda: corpus.arank_chunks(title, state["current"])
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
        profile = corpus.document(title).profile if run_settings(default).use_profiles else ""
        knowledge = _knowledge(profile, chunk.page_content) if profile else chunk.page_content
        return {"attempts": [*state["attempts"], attempt], "knowledge": knowledge}

    def verify(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        sub_question = state["current"]
        flagged: list[str] = []
        prompt = prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=state["knowledge"])
        response, calls, cut = yield from answer_once(prompt, NEXT_EXAMPLE, final_line, flagged)
        verdict = yield from judge(response, sub_question, state["knowledge"])
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "response": response, "verified": verdict == "yes"}]
        t = len(attempts) - 1  # rethink rounds done before this attempt
        draw = fallback_draw(settings.seed, state["question"], sub_question, t)
        fallback = verdict != "yes" and draw < fallback_probability(t, settings.m)
        return {
            "response": response,
            "attempts": attempts,
            "outcome": "verified" if verdict == "yes" else "",
            "fallback": fallback,
            "llm_calls": calls + (not is_unknown(response)),
            "truncated": cut,
            "copied_examples": flagged,
        }

    def after_verify(state: HiRAGState) -> Literal["record", "internal_knowledge", "rethink"]:
        if state["outcome"] == "verified":
            return "record"
        return "internal_knowledge" if state["fallback"] else "rethink"

    def internal_knowledge(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        flagged: list[str] = []
        prompt = prompts.INTERNAL_ANSWER.format(question=state["current"])
        response, calls, cut = yield from answer_once(prompt, LINE, first_line, flagged)
        verdict = yield from judge(response, state["current"])
        attempts = [*state["attempts"][:-1], {**state["attempts"][-1], "internal": response}]
        update: dict[str, Any] = {
            "attempts": attempts, "llm_calls": calls + (not is_unknown(response)), "truncated": cut, "copied_examples": flagged,
        }
        if verdict == "yes":
            update |= {"response": response, "outcome": "internal"}
        return update

    def after_internal(state: HiRAGState) -> Literal["record", "rethink"]:
        return "record" if state["outcome"] == "internal" else "rethink"

    def rethink(state: HiRAGState) -> dict[str, Any]:
        settings = run_settings(default)
        t = len(state["attempts"])
        if t >= settings.th3:
            return {"outcome": "gave_up", "response": ""}
        title = state["candidates"][state["doc_rank"]]
        more_chunks = state["chunk_rank"] + 1 < len(corpus.document(title).chunk_ids)
        if t % settings.th2 != 0 and more_chunks:
            return {"level": "chunk", "chunk_rank": state["chunk_rank"] + 1}
        if state["doc_rank"] + 1 >= len(state["candidates"]):
            return {"outcome": "gave_up", "response": ""}
        return {"level": "document", "doc_rank": state["doc_rank"] + 1, "chunk_rank": 0}

    def after_rethink(state: HiRAGState) -> Literal["retrieve_document", "record"]:
        return "record" if state["outcome"] == "gave_up" else "retrieve_document"

    def rewrite(state: HiRAGState) -> Dialogue[dict[str, Any]]:
        settings = run_settings(default)
        entity = state["entity"].lower()
        previous = [
            f"{q} {a}"
            for q, a in zip(state.get("sub_questions", []), state.get("sub_answers", []), strict=True)
            if a and entity in a.lower()
        ]
        information = previous[-1] if previous else state["question"]
        sub_question = state["current"]
        reply = yield ask("answerer", prompts.REWRITE.format(question=sub_question, information=information), LINE)
        rewritten = first_line(reply) or sub_question
        hits: list[Document] = yield Effect(
            lambda: corpus.search(rewritten, settings.rewrite_top_k), lambda: corpus.asearch(rewritten, settings.rewrite_top_k)
        )
        knowledge = "\n".join(h.page_content for h in hits)
        flagged: list[str] = []
        prompt = prompts.ANSWER_WITH_KNOWLEDGE.format(question=sub_question, knowledge=knowledge)
        response, calls, cut = yield from answer_once(prompt, NEXT_EXAMPLE, final_line, flagged)
        return {
            "rewritten": rewritten,
            "rewrite_hits": [str(h.id) for h in hits if h.id],
            "knowledge": knowledge,
            "response": "" if is_unknown(response) else response,
            "outcome": "rewrite",
            "llm_calls": 1 + calls,
            "truncated": int(reply.truncated) + cut,
            "copied_examples": flagged,
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
            "rewrite_hits": state.get("rewrite_hits", []),
            "answer": answer,
            "source": source,  # type: ignore[typeddict-item]
            "knowledge": state.get("knowledge", "") if source in ("retrieval", "rewrite") else "",
        }
        return {"sub_questions": [state["current"]], "sub_answers": [answer], "trace": [entry]}

    for name, step in (("extract_entity", extract_entity), ("retrieve_chunk", retrieve_chunk), ("verify", verify),
                       ("internal_knowledge", internal_knowledge), ("rewrite", rewrite)):
        graph.add_node(name, dialogue_node(step, name))
    for name, plain in (("retrieve_document", retrieve_document), ("rethink", rethink), ("record", record)):
        graph.add_node(name, plain)
    graph.add_edge("extract_entity", "retrieve_document")
    graph.add_conditional_edges("retrieve_document", after_retrieve_document)
    graph.add_edge("retrieve_chunk", "verify")
    graph.add_conditional_edges("verify", after_verify)
    graph.add_conditional_edges("internal_knowledge", after_internal)
    graph.add_conditional_edges("rethink", after_rethink)
    graph.add_edge("rewrite", "record")
    graph.add_edge("record", after_record)


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
        messages = _decomposition(state["question"], asked, state.get("sub_answers", []))
        ask = Call(models["decomposer"], messages, max_tokens=settings.max_output_tokens, stop=LINE)
        reply, calls = (yield ask), 1
        if not reply.text.strip():  # an empty turn is asked again once, as the authors' code does
            reply, calls = (yield Call(models["decomposer"], messages, max_tokens=settings.max_output_tokens)), 2
        if said_enough(reply.text) and not asked:  # the paper's initialization asks for a first question
            again = [*messages, AIMessage(reply.text), HumanMessage(prompts.FIRST_QUESTION_AGAIN)]
            reply, calls = (yield Call(models["decomposer"], again, max_tokens=settings.max_output_tokens, stop=LINE)), calls + 1
            if said_enough(reply.text) or not first_line(reply):
                return {"current": state["question"], "first_question": "question", "stop_reason": "", "llm_calls": calls}
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
        if normalize_answer(sub_question) in {normalize_answer(q) for q in asked}:
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
        if settings.summarize_reads_evidence:
            prompt = prompts.SUMMARIZE_WITH_EVIDENCE.format(question=state["question"], known=evidence_notes(entries))
        else:
            known = " ".join(a for a in state.get("sub_answers", []) if a) or "None"
            prompt = prompts.SUMMARIZE.format(question=state["question"], known=known)
        reasoning = yield Call(models["answerer"], prompt, max_tokens=cap, stop=NEXT_EXAMPLE)
        extract = prompts.EXTRACT_ANSWER.format(response=final_line(reasoning) or reasoning.text, question=state["question"])
        reply = yield Call(models["answerer"], extract, max_tokens=cap, stop=LINE)
        answer, calls, flagged = first_line(reply), 2, []
        if copies_example(answer):
            flagged.append(answer)
            reply = yield Call(models["answerer"], extract + prompts.NOT_THE_EXAMPLE, max_tokens=cap, stop=LINE)
            answer, calls = first_line(reply), 3
            if copies_example(answer):
                flagged.append(answer)
                answer = final_line(reasoning)
        return {
            "reasoning": reasoning.text.strip(),
            "answer": answer,
            "llm_calls": calls,
            "truncated": int(reasoning.truncated) + int(reply.truncated),
            "copied_examples": flagged,
        }

    graph = StateGraph(HiRAGState, input_schema=HiRAGInput, output_schema=HiRAGOutput, context_schema=HiRAGConfig)
    graph.add_node("start", start)
    graph.add_node("decompose", dialogue_node(decompose))
    graph.add_node("summarize", dialogue_node(summarize))
    _add_retrieval_nodes(graph, models, corpus, default, after_record="decompose")
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
        config: the knobs (:class:`~langgraph_hirag.HiRAGConfig`, the paper's values by default); a run
            can change them through its context: ``graph.invoke(input, context={"th3": 6})``.
        checkpointer: a LangGraph checkpointer, so runs can be interrupted and resumed.
        interrupt_before / interrupt_after: node names to pause at (need a checkpointer).
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
    _add_retrieval_nodes(graph, _roles(llm), corpus, config or HiRAGConfig(), after_record=END)
    graph.add_edge(START, "extract_entity")
    return graph.compile(name="hirag-retriever")
