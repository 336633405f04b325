"""HiRAG: corpus, hierarchical retrieval, rethink order, rewrite, (t/m)² fallback, decomposition."""

from __future__ import annotations

import re

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import ValidationError

from integrations_tests.fakes import HashEmbeddings, ScriptedChatModel
from integrations_tests.killing import kill_when
from langgraph_hirag import (
    ROLES,
    HierarchicalCorpus,
    HiRAGConfig,
    HiRAGRetriever,
    RetrievalNodes,
    build_hirag_graph,
    fallback_probability,
    hirag_state_graph,
    prompts,
)
from langgraph_hirag.retrieval import fallback_draw, tied_titles
from langgraph_hirag.years import option_by_year
from multihop_rag.corpus import Passage
from multihop_rag.errors import CorpusError, StoreError
from multihop_rag.indexing.text import count_tokens
from multihop_rag.short_answer import STEP_FIRST

QUESTION = "Where was the designer of the Kesh Bridge born?"

PASSAGES = [
    ("Kesh Bridge", "The Kesh Bridge is a stone arch bridge over the Sable River."),
    ("Kesh Bridge", "The Kesh Bridge was designed by Tomas Halvard and opened in 1871."),
    ("Tomas Halvard", "Tomas Halvard was an engineer of bridges and harbours."),
    ("Tomas Halvard", "Halvard trained as a mason at the Orrin academy."),
    ("Tomas Halvard", "Tomas Halvard was born in Dunmere in 1820."),
    ("Tomas Halvard (painter)", "Tomas Halvard the painter worked in Estmark."),
    ("Dunmere", "Dunmere is a port town on the Sable River."),
    ("Franco Rossi (director)", "Franco Rossi directed the film Lantern Road."),
    ("Lantern Road", "Lantern Road is a 1958 film directed by Franco Rossi."),
    ("Franco Rossi (footballer)", "Franco Rossi played for Norland United."),
]


def docs() -> list[Document]:
    return [Document(page_content=text, metadata={"title": title}) for title, text in PASSAGES]


@pytest.fixture(scope="module")
def corpus() -> HierarchicalCorpus:
    # Neutral profiles, so the knowledge of an attempt differs only by its chunk.
    profiler = ScriptedChatModel(lambda prompt: "profile")
    return HierarchicalCorpus.from_documents(docs(), HashEmbeddings(1024), profile_llm=profiler, show_progress=False)


def last_field(prompt: str, name: str) -> str:
    return re.findall(rf"^{name}: (.*)$", prompt, flags=re.MULTILINE)[-1]


class Script:
    """Answers each HiRAG prompt; records which module was called."""

    def __init__(
        self,
        sub_questions=("Who designed the Kesh Bridge?", "Where was Tomas Halvard born?"),
        entities=None,
        facts=None,
        internal="I don't know",
        rewrite="Where was Franco Rossi, the director of Lantern Road, born?",
        amounts="unknown",
        years="unknown",
    ):
        self.sub_questions = list(sub_questions)
        self.entities = entities or {
            "Who designed the Kesh Bridge?": "Kesh Bridge",
            "Where was Tomas Halvard born?": "Tomas Halvard",
        }
        # sub-question -> (text that must be in the knowledge, answer)
        self.facts = facts or {
            "Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The Kesh Bridge was designed by Tomas Halvard."),
            "Where was Tomas Halvard born?": ("born in Dunmere", "Tomas Halvard was born in Dunmere."),
        }
        self.internal = internal
        self.rewrite = rewrite
        self.amounts, self.years = amounts, years
        self.calls: list[str] = []
        self.prompts: dict[str, list[str]] = {}

    def _log(self, name: str, prompt: str) -> None:
        self.calls.append(name)
        self.prompts.setdefault(name, []).append(prompt)

    def __call__(self, prompt: str) -> str:
        if "## Background" in prompt:
            self._log("decompose", prompt)
            return self.sub_questions.pop(0) if self.sub_questions else "That's enough."
        if prompt.startswith("A complex question needs"):
            self._log("next_question", prompt)
            return self.sub_questions.pop(0) if self.sub_questions else "That's enough."
        if prompt.startswith("Extract the subject entity"):
            self._log("entity", prompt)
            return self.entities[last_field(prompt, "Question")]
        if prompt.startswith("Answer the question with the known information. First analyse the question and the known information, then"):
            self._log("answer", prompt)
            question = last_field(prompt, "Question")
            knowledge = prompt.rsplit("Known information: ", 1)[1]
            needle, answer = self.facts.get(question, ("\x00", ""))
            return f"Analysis: looked.\nAnswer: {answer}" if needle in knowledge else "Analysis: nothing.\nAnswer: unknown"
        if prompt.startswith("Based on the response and the question"):
            self._log("judge", prompt)
            return "yes"
        if prompt.startswith("Based on the known information"):
            self._log("grounded_judge", prompt)
            knowledge = prompt.rsplit("Known information: ", 1)[1].split("\nResponse: ")[0]
            return "yes" if last_field(prompt, "Response").rstrip(".").split()[-1] in knowledge else "no"
        if prompt.startswith("Answer the question from your own knowledge"):
            self._log("internal", prompt)
            return self.internal
        if prompt.startswith("The question below may name"):
            self._log("rewrite", prompt)
            return self.rewrite
        if prompt.startswith("Answer the question with the known information. First analyse the question and the known information step by step"):
            self._log("summarize", prompt)
            return "Analysis: Halvard designed it and was born in Dunmere.\nAnswer: He was born in Dunmere."
        if prompt.startswith("Answer the question with the documents. First analyse the question and the documents step by step"):
            self._log("summarize", prompt)
            return "Analysis: Halvard designed it and was born in Dunmere.\nAnswer: He was born in Dunmere."
        if "the date the question compares" in prompt or "the years of birth and death" in prompt:
            self._log("years", prompt)
            return self.years
        if "the number the question compares" in prompt:
            self._log("amounts", prompt)
            return self.amounts
        if "answer the question in as few words as possible" in prompt:
            self._log("summarize", prompt)
            return "Step: the birthplace of the Kesh Bridge's designer\nAnswer: Dunmere" if STEP_FIRST in prompt else "Dunmere"
        if prompt.startswith("Based on the input and the question, give the answer"):
            self._log("extract", prompt)
            return "Dunmere"
        raise AssertionError(f"unexpected prompt: {prompt[:80]!r}")


def run(corpus, script: Script, question: str = QUESTION, **settings):
    graph = build_hirag_graph(ScriptedChatModel(script), corpus, config=HiRAGConfig(**settings))
    return graph.invoke({"question": question})


# --- corpus -----------------------------------------------------------------------------------


def test_corpus_merges_passages_sharing_a_title_in_order(corpus):
    assert len(corpus) == 7
    halvard = corpus.document("Tomas Halvard")
    assert halvard.passages == [t for title, t in PASSAGES if title == "Tomas Halvard"]
    assert len(halvard.chunk_ids) == 3


def test_lead_passage_is_the_default_profile():
    built = HierarchicalCorpus.from_documents(docs(), HashEmbeddings(1024), show_progress=False)
    assert built.document("Tomas Halvard").profile == "Tomas Halvard was an engineer of bridges and harbours."
    assert built.profiles == "lead"


def test_titles_ranked_by_bm25_and_chunks_by_similarity(corpus):
    titles = [t for t, _ in corpus.rank_titles("Tomas Halvard")]
    assert titles[:2] == ["Tomas Halvard", "Tomas Halvard (painter)"]
    assert corpus.rank_titles("zzz unknown") == []
    chunks = corpus.rank_chunks("Tomas Halvard", "Where was Tomas Halvard born?")
    assert chunks[0].page_content == "Tomas Halvard was born in Dunmere in 1820."
    assert {c.metadata["title"] for c in chunks} == {"Tomas Halvard"} and len(chunks) == 3


def test_empty_corpus_is_refused():
    with pytest.raises(CorpusError, match="no documents"):
        HierarchicalCorpus.from_documents([Document(page_content="  ")], HashEmbeddings(1024), show_progress=False)


def test_passages_are_accepted_and_persist_round_trips(tmp_path):
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES)]
    built = HierarchicalCorpus.from_documents(passages, HashEmbeddings(1024), show_progress=False)
    built.persist(tmp_path)
    loaded = HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024))
    assert [d.title for d in loaded.documents] == [d.title for d in built.documents]
    assert loaded.rank_titles("Franco Rossi") == built.rank_titles("Franco Rossi")
    query = "Where was Tomas Halvard born?"
    assert [c.page_content for c in loaded.rank_chunks("Tomas Halvard", query)] == [
        c.page_content for c in built.rank_chunks("Tomas Halvard", query)
    ]
    with pytest.raises(StoreError, match="no hirag index"):
        HierarchicalCorpus.from_persist_dir(tmp_path / "nothing", HashEmbeddings(1024))


def test_tied_titles():
    ranked = [("Franco Rossi (director)", 0.6), ("Franco Rossi (footballer)", 0.6), ("Rossi Bay", 0.2)]
    assert tied_titles("Franco Rossi", ranked) == ["Franco Rossi (director)", "Franco Rossi (footballer)"]
    # Equal up to the disambiguation counts even when BM25 scores differ.
    assert tied_titles("Tomas Halvard", [("Tomas Halvard", 0.9), ("Tomas Halvard (painter)", 0.7)]) == [
        "Tomas Halvard",
        "Tomas Halvard (painter)",
    ]
    assert tied_titles("Kesh Bridge", [("Kesh Bridge", 0.9), ("Bridge Street", 0.3)]) == ["Kesh Bridge"]
    assert tied_titles("x", []) == []


# --- the whole graph ---------------------------------------------------------------------------


def test_two_hop_question_end_to_end(corpus):
    script = Script()
    state = run(corpus, script, th1=2)
    assert state["answer"] == "Dunmere"
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?", "Where was Tomas Halvard born?"]
    assert state["sub_answers"] == ["The Kesh Bridge was designed by Tomas Halvard.", "Tomas Halvard was born in Dunmere."]
    assert state["stop_reason"] == "enough"
    assert [t["source"] for t in state["trace"]] == ["retrieval", "retrieval"]
    assert state["trace"][1]["attempts"][0]["title"] == "Tomas Halvard"
    assert script.calls == [
        "decompose", "entity", "answer", "judge",
        "decompose", "entity", "answer", "judge",
        "decompose", "summarize",
    ]  # fmt: skip
    assert state["llm_calls"] == len(script.calls)
    # The Decomposer sees each sub-answer as the user's reply; the Summarizer sees all of them.
    assert "Tomas Halvard was born in Dunmere." in script.prompts["decompose"][2]
    assert "designed by Tomas Halvard" in script.prompts["summarize"][0]


def test_chunk_level_rethink_takes_the_next_chunk_of_the_same_document(corpus):
    sub_question = "What did Tomas Halvard train as?"
    ranked = corpus.rank_chunks("Tomas Halvard", sub_question)
    target = ranked[1].page_content
    script = Script(
        sub_questions=[sub_question],
        entities={sub_question: "Tomas Halvard"},
        facts={sub_question: (target, "He trained as a mason.")},
    )
    state = run(corpus, script, th1=2)
    attempts = state["trace"][0]["attempts"]
    assert [(a["title"], a["chunk_rank"], a["level"], a["verified"]) for a in attempts] == [
        ("Tomas Halvard", 0, "first", False),
        ("Tomas Halvard", 1, "chunk", True),
    ]
    assert state["sub_answers"] == ["He trained as a mason."]


@pytest.mark.parametrize(
    ("th2", "th3", "expected"),
    [
        # th2 = 3: two chunk-level rethinks, the third failure moves to the next document; th3 = 4 ends it.
        (3, 4, [(0, 0, "first"), (0, 1, "chunk"), (0, 2, "chunk"), (1, 0, "document")]),
        # th2 = 2: every second failure moves to the next document.
        # th2 = 2: every second failure moves to the next document; "Tomas Halvard (painter)" is the
        # last candidate and has one chunk, so the next failure gives up before th3.
        (2, 4, [(0, 0, "first"), (0, 1, "chunk"), (1, 0, "document")]),
        (3, 2, [(0, 0, "first"), (0, 1, "chunk")]),
    ],
)
def test_rethink_order_and_give_up(corpus, th2, th3, expected):
    sub_question = "What was Tomas Halvard's favourite colour?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Tomas Halvard"}, facts={})
    state = run(corpus, script, th1=2, th2=th2, th3=th3, m=1000, dense_rethink=False)  # Algorithm 1's documents
    trace = state["trace"][0]
    assert [(a["doc_rank"], a["chunk_rank"], a["level"]) for a in trace["attempts"]] == expected
    assert trace["source"] == "gave_up" and state["sub_answers"] == [""]
    docs_tried = [trace["candidates"][a["doc_rank"]] for a in trace["attempts"]]
    assert docs_tried[0] == "Tomas Halvard"
    # The Decomposer is told the question could not be answered, and may rephrase.
    assert prompts.NO_ANSWER in script.prompts["decompose"][1]


def test_a_document_without_further_chunks_rethinks_at_document_level(corpus):
    sub_question = "What did Tomas Halvard the painter paint?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Tomas Halvard painter"}, facts={})
    state = run(corpus, script, th3=4, m=1000)
    levels = [(a["title"], a["level"]) for a in state["trace"][0]["attempts"]]
    assert levels[:3] == [
        ("Tomas Halvard (painter)", "first"),  # its only chunk
        ("Tomas Halvard", "document"),
        ("Tomas Halvard", "chunk"),
    ]


def test_tied_titles_trigger_rewrite_with_the_previous_sub_answer(corpus):
    first, second = "Who directed Lantern Road?", "Where was Franco Rossi born?"
    script = Script(
        sub_questions=[first, second],
        entities={first: "Lantern Road", second: "Franco Rossi"},
        facts={
            first: ("directed by Franco Rossi", "Lantern Road was directed by Franco Rossi."),
            second: ("Lantern Road", "Franco Rossi was born in Verano."),
        },
    )
    state = run(corpus, script)
    trace = state["trace"][1]
    assert state["trace"][0]["source"] == "retrieval"
    assert trace["source"] == "rewrite" and trace["attempts"] == []
    assert set(trace["tied"]) == {"Franco Rossi (director)", "Franco Rossi (footballer)"}
    assert trace["rewritten"] == "Where was Franco Rossi, the director of Lantern Road, born?"
    assert "Lantern Road was directed by Franco Rossi." in script.prompts["rewrite"][0]
    assert state["sub_answers"][1] == "Franco Rossi was born in Verano."


def test_rewrite_falls_back_to_the_original_question(corpus):
    sub_question = "Where was Franco Rossi born?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Franco Rossi"}, facts={})
    state = run(corpus, script, question="Where was the Franco Rossi who directed Lantern Road born?")
    assert "Information: Where was the Franco Rossi who directed Lantern Road born?" in script.prompts["rewrite"][0]
    assert state["trace"][0]["source"] == "rewrite" and state["sub_answers"] == [""]


def test_no_matching_title_goes_to_rewrite(corpus):
    sub_question = "Who owns Zyxw?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Zyxw"}, facts={})
    state = run(corpus, script)
    assert state["trace"][0]["candidates"] == [] and state["trace"][0]["source"] == "rewrite"


def test_an_entity_foreign_to_the_sub_question_is_replaced_by_it(corpus):
    sub_question = "Where was Tomas Halvard born?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Franco Rossi (director)"})
    state = run(corpus, script, th1=2)
    trace = state["trace"][0]
    assert trace["entity"] == sub_question and trace["candidates"][0] == "Tomas Halvard"
    assert trace["source"] == "retrieval"


def test_fallback_draw_matches_eq7_rates():
    assert [fallback_probability(t, 5) for t in range(6)] == pytest.approx([0, 0.04, 0.16, 0.36, 0.64, 1.0])
    n = 4000
    for t in (1, 2, 3, 4):
        p = fallback_probability(t, 5)
        rate = sum(fallback_draw(seed, "q", "sub", t) < p for seed in range(n)) / n
        assert abs(rate - p) < 0.03, (t, rate, p)
    assert fallback_draw(1, "q", "sub", 2) == fallback_draw(1, "q", "sub", 2)


def test_internal_knowledge_fires_at_the_eq7_rate_in_the_graph(corpus):
    # m = 2: after the first rethink (t = 1) p = 0.25, after the second (t = 2) p = 1; never at t = 0.
    sub_question = "What was Tomas Halvard's favourite colour?"
    fired = [0, 0, 0]
    runs = 200
    for seed in range(runs):
        script = Script(sub_questions=[sub_question], entities={sub_question: "Tomas Halvard"}, facts={})
        state = run(corpus, script, th1=2, th3=3, m=2, seed=seed, max_subquestions=1)
        for i, attempt in enumerate(state["trace"][0]["attempts"]):
            fired[i] += attempt["internal"] is not None
    assert fired[0] == 0 and fired[2] == runs
    assert abs(fired[1] / runs - 0.25) < 0.08


def test_internal_knowledge_answer_is_used_when_verified(corpus):
    sub_question = "What was Tomas Halvard's favourite colour?"
    script = Script(
        sub_questions=[sub_question], entities={sub_question: "Tomas Halvard"}, facts={}, internal="Blue."
    )
    state = run(corpus, script, th1=2, m=1)  # p = 1 from the first rethink on
    trace = state["trace"][0]
    assert trace["source"] == "internal" and state["sub_answers"] == ["Blue."]
    assert len(trace["attempts"]) == 2 and trace["attempts"][1]["internal"] == "Blue."


def test_same_seed_same_run(corpus):
    def trace(seed):
        sub_question = "What was Tomas Halvard's favourite colour?"
        script = Script(sub_questions=[sub_question], entities={sub_question: "Tomas Halvard"}, facts={})
        return run(corpus, script, th1=2, m=3, seed=seed)["trace"]

    assert trace(7) == trace(7)


# --- decomposition ------------------------------------------------------------------------------


def test_the_decomposer_is_never_offered_to_stop_before_a_first_question(corpus):
    """Issue 22: the prompt offered "That's enough." on the first turn, which the paper's
    initialization does not ("Now, a first simple question.")."""
    script = Script()
    run(corpus, script, th1=2)
    first_turn = script.prompts["decompose"][0]
    assert first_turn.split("## Initialization", 1)[1].strip().startswith("Reply with one simple question only. Now")
    assert "That's enough" not in first_turn.split("## Initialization", 1)[1]
    assert "That's enough" in script.prompts["decompose"][1].rsplit("Tomas Halvard.", 1)[1]  # offered after an answer


def test_thats_enough_on_the_first_turn_is_asked_again(corpus):
    """Issue 22: on the 0.5B model every decomposition began with "That's enough.", so HiRAG never
    retrieved and answered closed-book. Now the Decomposer is asked once more for a first question."""
    script = Script(sub_questions=["That's enough.", "Who designed the Kesh Bridge?", "That's enough."])
    state = run(corpus, script, th1=2)
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?"] and state["first_question"] == "decomposer"
    assert prompts.FIRST_QUESTION_AGAIN in script.prompts["decompose"][1]
    assert state["trace"][0]["attempts"] and state["stop_reason"] == "enough"


def test_thats_enough_before_min_subquestions_is_asked_again_once(corpus):
    """Issue 40: 76 of 100 runs stopped on "That's enough." after one sub-question (the paper's
    behaviour, min_subquestions=1); below min_subquestions the Decomposer is asked once for the next one."""
    both = ["Who designed the Kesh Bridge?", "That's enough.", "Where was Tomas Halvard born?"]
    paper = run(corpus, Script(sub_questions=list(both)), th1=2, min_subquestions=1)
    assert paper["sub_questions"] == both[:1] and paper["stop_reason"] == "enough"

    script = Script(sub_questions=list(both))
    state = run(corpus, script, th1=2)  # the default since the 2Wiki tuning questions: 2
    assert state["sub_questions"] == [both[0], both[2]] and state["stop_reason"] == "enough"
    assert prompts.NEXT_QUESTION_AGAIN in script.prompts["decompose"][2]
    assert len(script.prompts["decompose"]) == 4  # two at the second turn, one at the third

    stubborn = run(corpus, Script(sub_questions=[both[0]]), th1=2, min_subquestions=2)
    assert stubborn["sub_questions"] == both[:1] and stubborn["stop_reason"] == "enough"  # asked once only


def test_a_repeated_sub_question_below_min_subquestions_gets_a_fresh_prompt_when_asked(corpus):
    """Issue 40: on MuSiQue the 1.5B asks a real first hop ("Who was Anna Benson's husband?"), then the same
    sub-question again inside the dialogue, and the run answers with the bridge entity (68 of 100 runs).
    With ``fresh_next_question`` (the default) such a repeat is answered by a fresh prompt: the question, the answers so
    far, and a request for the next simple question."""
    first, second = "Who designed the Kesh Bridge?", "Where was Tomas Halvard born?"
    before = run(corpus, Script(sub_questions=[first, first, second]), th1=2, fresh_next_question=False)
    assert before["sub_questions"] == [first] and before["stop_reason"] == "repeated_sub_question"

    script = Script(sub_questions=[first, first, second])
    state = run(corpus, script, th1=2)  # the default since the tuning questions of 2Wiki and MuSiQue
    assert state["sub_questions"] == [first, second] and state["stop_reason"] == "enough"
    fresh = script.prompts["next_question"]
    assert len(fresh) == 1 and "## Background" not in fresh[0]
    assert QUESTION in fresh[0] and first in fresh[0] and "designed by Tomas Halvard" in fresh[0]

    stubborn = run(corpus, Script(sub_questions=[first, first, first]), th1=2)
    assert stubborn["sub_questions"] == [first] and stubborn["stop_reason"] == "repeated_sub_question"


def test_a_default_min_subquestions_gives_way_to_a_smaller_max_but_a_chosen_one_is_refused():
    assert HiRAGConfig(max_subquestions=1).min_subquestions == 2  # the max ends decomposition first
    with pytest.raises(ValueError, match="min_subquestions"):
        HiRAGConfig(min_subquestions=3, max_subquestions=2)


def test_a_decomposer_that_refuses_twice_retrieves_for_the_question_itself(corpus):
    script = Script(sub_questions=["That's enough.", "That's enough."], entities={QUESTION: "Kesh Bridge"})
    state = run(corpus, script, th1=2)
    assert state["sub_questions"] == [QUESTION] and state["first_question"] == "question"
    assert len(state["trace"][0]["attempts"]) >= 1


def test_a_sub_question_about_an_example_entity_is_asked_again(corpus):
    """The 0.5B model's first sub-question on a 2Wiki smoke question was "What is the place of birth of
    Odile Brask?" — a made-up entity of the examples, in no corpus. It is flagged and asked again once."""
    script = Script(sub_questions=["What is the place of birth of Odile Brask?", "Who designed the Kesh Bridge?",
                                   "That's enough."])
    state = run(corpus, script, th1=2)
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?"] and state["first_question"] == "decomposer"
    assert state["copied_examples"] == ["What is the place of birth of Odile Brask?"]
    assert prompts.NOT_AN_EXAMPLE_QUESTION in script.prompts["decompose"][1]
    assert state["trace"][0]["attempts"]


def test_a_second_example_sub_question_falls_back_to_the_question(corpus):
    script = Script(sub_questions=["Where was Odile Brask born?", "Where is Vantmoor?"], entities={QUESTION: "Kesh Bridge"})
    state = run(corpus, script, th1=2)
    assert state["sub_questions"] == [QUESTION] and state["first_question"] == "question"
    assert len(state["copied_examples"]) == 2 and state["trace"][0]["attempts"]


def test_decomposition_stops_on_a_repeated_sub_question(corpus):
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "who designed the Kesh Bridge"])
    state = run(corpus, script)
    assert state["stop_reason"] == "repeated_sub_question"
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?"]


def test_decomposition_is_bounded(corpus):
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "Where was Tomas Halvard born?", "More?"])
    state = run(corpus, script, max_subquestions=2, th1=2)
    assert state["stop_reason"] == "max_subquestions" and len(state["sub_questions"]) == 2
    assert script.calls.count("decompose") == 2


def test_sub_question_prefixes_are_stripped(corpus):
    script = Script(sub_questions=["1st Simple Question: Who designed the Kesh Bridge?\nextra"])
    state = run(corpus, script)
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?"]


def test_interrupt_and_resume_with_a_checkpointer(corpus):
    script = Script()
    graph = build_hirag_graph(
        ScriptedChatModel(script), corpus, config=HiRAGConfig(th1=2), checkpointer=InMemorySaver(), interrupt_before=["summarize"]
    )
    config = {"configurable": {"thread_id": "t1"}}
    paused = graph.invoke({"question": QUESTION}, config)
    assert not paused.get("answer") and len(paused["sub_answers"]) == 2
    assert graph.get_state(config).next == ("summarize",)
    done = graph.invoke(None, config)
    assert done["answer"] == "Dunmere"


def test_bad_thresholds_are_refused():
    with pytest.raises(ValidationError, match="th3"):
        HiRAGConfig(th3=0)


# --- plug-in retriever (§6.5) ---------------------------------------------------------------------


def test_retriever_returns_the_verified_chunk(corpus):
    retriever = HiRAGRetriever(llm=ScriptedChatModel(Script()), corpus=corpus, config=HiRAGConfig(th1=2))
    [doc] = retriever.invoke("Where was Tomas Halvard born?")
    assert "born in Dunmere" in doc.page_content
    assert doc.metadata["title"] == "Tomas Halvard" and doc.metadata["source"] == "retrieval"
    assert doc.metadata["answer"] == "Tomas Halvard was born in Dunmere."


def test_retriever_returns_nothing_when_every_attempt_fails(corpus):
    question = "What was Tomas Halvard's favourite colour?"
    script = Script(entities={question: "Tomas Halvard"}, facts={})
    retriever = HiRAGRetriever(llm=ScriptedChatModel(script), corpus=corpus, config=HiRAGConfig(th1=2, m=1000))
    assert retriever.invoke(question) == []


async def test_retriever_async(corpus):
    retriever = HiRAGRetriever(llm=ScriptedChatModel(Script()), corpus=corpus, config=HiRAGConfig(th1=2))
    docs = await retriever.ainvoke("Where was Tomas Halvard born?")
    assert docs and docs[0].metadata["title"] == "Tomas Halvard"


def test_small_model_outputs_are_bounded_by_stop_sequences(corpus):
    model = ScriptedChatModel(Script())
    build_hirag_graph(model, corpus, config=HiRAGConfig(th1=2)).invoke({"question": QUESTION})

    def stop(start: str):
        return next(kw["stop"] for p, kw in zip(model.prompts, model.calls_kwargs, strict=True) if p.startswith(start))

    assert stop("Extract the subject entity") == ["\n"]
    assert stop("## Background") == ["\n"]
    assert "\nQuestion:" in stop("Answer the question with the known information")


def test_an_empty_decomposer_turn_is_asked_again_once(corpus):
    replies = iter(["", "Who designed the Kesh Bridge?", "That's enough."])
    script = Script()

    def respond(prompt: str) -> str:
        return next(replies) if "## Background" in prompt else script(prompt)

    config = HiRAGConfig(th1=2, min_subquestions=1)
    state = build_hirag_graph(ScriptedChatModel(respond), corpus, config=config).invoke({"question": QUESTION})
    assert state["stop_reason"] == "enough" and state["sub_questions"] == ["Who designed the Kesh Bridge?"]
    assert state["llm_calls"] == 2 + 3 + 1 + 1  # decompose twice, entity/answer/judge, decompose, the short summary


def test_profiles_reach_the_filter_unless_ablated(corpus):
    """Table 4's "w/o profile": the Filter sees the chunk alone."""
    with_profiles, without = Script(), Script()
    run(corpus, with_profiles)
    run(corpus, without, use_profiles=False)
    known = [p.rsplit("Known information: ", 1)[1] for p in with_profiles.prompts["answer"]]
    assert known and known[0].startswith("profile\n")  # document retrieval; rewrites search whole chunks
    known = [p.rsplit("Known information: ", 1)[1] for p in without.prompts["answer"]]
    assert known and not any("profile" in k for k in known)
    assert without.calls == with_profiles.calls  # same control flow: the facts are in the chunks


# --- issue 22: faithful on small models ----------------------------------------------------------


def test_an_answer_copied_from_an_example_is_flagged_and_asked_again(corpus):
    """Issue 22: 3 of 10 answers were example text ("Dunmere", "Tomas Halvard")."""
    script = Script()
    answers = iter(["Vantmoor", "Dunmere"])
    base = script.__call__

    def respond(prompt: str) -> str:
        if prompt.startswith("Based on the input and the question, give the answer"):
            script.calls.append("extract")
            return next(answers)
        return base(prompt)

    config = HiRAGConfig(th1=2, summary_style="analysis")
    state = build_hirag_graph(ScriptedChatModel(respond), corpus, config=config).invoke({"question": QUESTION})
    assert state["copied_examples"] == ["Vantmoor"]
    assert state["answer"] == "Dunmere" and script.calls.count("extract") == 2


def test_an_extracted_answer_with_words_from_nowhere_gives_way_to_the_summarizers_answer(corpus):
    """Issue 40: on the demo the 1.5B's Summarizer concluded "Answer: Dunmere, Astrelia" and the keyword
    extraction from that line and the question returned "London" — an answer from outside the corpus."""

    def script_with(extracted: str) -> Script:
        script = Script()
        base = script.__call__

        def respond(prompt: str) -> str:
            if prompt.startswith("Based on the input and the question, give the answer"):
                return extracted
            return base(prompt)

        script.respond = respond
        return script

    invented = script_with("London")
    config = HiRAGConfig(th1=2, summary_style="analysis")
    state = build_hirag_graph(ScriptedChatModel(invented.respond), corpus, config=config).invoke({"question": QUESTION})
    reasoning_answer = state["reasoning"].rsplit("Answer:", 1)[1].strip()
    assert state["answer"] == reasoning_answer and state["invented_answers"] == ["London"]

    paper = HiRAGConfig(th1=2, summary_style="analysis", grounded_extraction=False)
    state = build_hirag_graph(ScriptedChatModel(script_with("London").respond), corpus, config=paper).invoke({"question": QUESTION})
    assert state["answer"] == "London" and not state.get("invented_answers")

    kept = build_hirag_graph(ScriptedChatModel(script_with("dunmere").respond), corpus, config=config)
    assert kept.invoke({"question": QUESTION})["answer"] == "dunmere"  # a word of the input, any case


def test_a_second_copy_is_dropped(corpus):
    sub_question = "Where was Tomas Halvard born?"
    script = Script(sub_questions=[sub_question], facts={sub_question: ("born", "Odile Brask was born in Vantmoor.")})
    state = run(corpus, script, th1=2, th3=1, m=1000)
    trace = state["trace"][0]
    assert state["copied_examples"] == ["Odile Brask was born in Vantmoor."] * 2
    assert trace["source"] == "gave_up" and trace["attempts"][0]["response"] == ""


def test_rewrite_records_the_chunks_it_found_as_evidence(corpus):
    """Issue 22: the rewrite path recorded no evidence, so a right answer from a rewrite scored zero recall."""
    sub_question = "Where was Franco Rossi born?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Franco Rossi"},
                    facts={sub_question: ("Franco Rossi", "He was born in Verano.")})
    state = run(corpus, script)
    trace = state["trace"][0]
    assert trace["source"] == "rewrite" and len(trace["rewrite_hits"]) == 1
    assert trace["rewrite_hits"][0] in corpus.chunk_ids


def test_the_answers_evidence_is_what_the_filter_read_in_the_order_it_read_it(corpus, tmp_path, monkeypatch):
    """Issue 43: evidence came back in the store's order (support@2 measured that order, not HiRAG's),
    and without the profiles the Filter reads beside each chunk."""
    from langgraph_hirag.method import HiRAGIndex

    stored = corpus.vector_store.get_by_ids
    monkeypatch.setattr(corpus.vector_store, "get_by_ids", lambda ids: list(reversed(stored(ids))))
    paper = HiRAGConfig(reader_tokens=0, fallback_below=0)  # the Filter's reads alone; the Summarizer's documents come after them
    answer = HiRAGIndex(ScriptedChatModel(Script()), corpus, paper, tmp_path).answer(QUESTION)
    # Sub-question 1 reads a Kesh Bridge chunk with its profile; sub-question 2's entity ties, its rewrite
    # finds a chunk the Filter never read with a profile.
    assert [(e.kind, e.title) for e in answer.evidence] == [
        ("profile", "Kesh Bridge"), ("chunk", "Kesh Bridge"), ("chunk", "Franco Rossi (director)")
    ]
    profile, chunk = answer.evidence[0], answer.evidence[1]
    assert profile.text == "profile" and profile.passage_ids == []  # an LLM profile holds no passage's text …
    assert profile.source_ids == corpus.document("Kesh Bridge").passage_ids  # … it was written from them
    assert "designed by Tomas Halvard" in chunk.text and chunk.passage_ids and chunk.source_ids == []
    assert answer.info["sub_answer_sources"] == ["retrieval", "rewrite"]  # where each sub-answer came from, in order

    without = HiRAGIndex(ScriptedChatModel(Script()), corpus, HiRAGConfig(use_profiles=False, reader_tokens=0, fallback_below=0), tmp_path).answer(QUESTION)
    assert [e.kind for e in without.evidence] == ["chunk", "chunk"]
    assert without.evidence[0].title == "Kesh Bridge"


def test_semantic_incompleteness_is_tested_at_every_attempt():
    """Issue 22 / Algorithm 1 lines 20-23: the th1 test ran only at the first retrieval."""
    passages = [("Rossi", "Rossi is a surname."), ("Franco Rossi (director)", "Franco Rossi directed Lantern Road."),
                ("Franco Rossi (footballer)", "Franco Rossi played football.")]
    small = HierarchicalCorpus.from_documents(
        [Document(page_content=t, metadata={"title": ti}) for ti, t in passages], HashEmbeddings(1024), show_progress=False
    )
    sub_question = "Where was Rossi born?"
    script = Script(sub_questions=[sub_question], entities={sub_question: "Rossi"}, facts={})
    state = run(small, script, th1=1, th2=1, m=1000)
    trace = state["trace"][0]
    assert [a["title"] for a in trace["attempts"]] == ["Rossi"]  # unique at the first attempt
    assert trace["source"] == "rewrite"  # the next document ties with another: rewrite, not retrieve
    assert set(trace["tied"]) == {"Franco Rossi (director)", "Franco Rossi (footballer)"}


# --- issue 21/22: LangGraph as a LangGraph user expects -----------------------------------------


def test_a_reused_thread_answers_each_question_afresh(corpus):
    """Issue 21: HiRAG's summarizer answered the second question with the previous sub-answer."""
    second = "Where is Dunmere?"
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "That's enough.", "Where is Dunmere?", "That's enough."],
                    entities={"Who designed the Kesh Bridge?": "Kesh Bridge", "Where is Dunmere?": "Dunmere"},
                    facts={"Who designed the Kesh Bridge?": ("designed by", "Tomas Halvard designed it."),
                           "Where is Dunmere?": ("port town", "Dunmere is on the Sable River.")})
    graph = build_hirag_graph(ScriptedChatModel(script), corpus, config=HiRAGConfig(th1=2, fallback_below=0), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "shared"}}
    graph.invoke({"question": QUESTION}, config)
    state = graph.invoke({"question": second}, config)
    assert state["sub_questions"] == ["Where is Dunmere?"] and len(state["trace"]) == 1
    assert "Tomas Halvard" not in script.prompts["summarize"][1].split("Known information:", 1)[1]


async def test_ainvoke_calls_the_models_async_methods(corpus):
    model = ScriptedChatModel(Script())
    state = await build_hirag_graph(model, corpus, config=HiRAGConfig(th1=2)).ainvoke({"question": QUESTION})
    assert state["answer"] == "Dunmere" and set(model.modes) == {"async"}


def test_the_decomposers_system_prompt_is_the_same_for_every_question(corpus):
    """Issue 40: with the question in its system prompt, every question read the Decomposer's ~450-token
    instructions and examples anew (7.7 s of the 1.5B's 29 s a question); without it, a prompt cache (llama.cpp's,
    a server's) reads them once. The question is the first user turn's."""
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "That's enough.", "Where is Dunmere?", "That's enough."],
                    entities={"Who designed the Kesh Bridge?": "Kesh Bridge", "Where is Dunmere?": "Dunmere"},
                    facts={"Who designed the Kesh Bridge?": ("designed by", "Tomas Halvard designed it."),
                           "Where is Dunmere?": ("port town", "Dunmere is on the Sable River.")})
    graph = build_hirag_graph(ScriptedChatModel(script), corpus, config=HiRAGConfig(th1=2, min_subquestions=1))
    questions = (QUESTION, "Where is Dunmere?")
    for question in questions:
        graph.invoke({"question": question})
    first, second = (p for p in script.prompts["decompose"] if p.endswith(tuple(f"question: {q}" for q in questions)))
    opening = first.split("Let's break down this complex question:")[0]
    assert opening == second.split("Let's break down this complex question:")[0]
    assert opening.startswith("## Background") and QUESTION not in opening and "Dunmere" not in opening
    assert first.endswith(f"Let's break down this complex question: {QUESTION}")


def test_a_question_naming_two_options_gets_a_comparison_example(corpus):
    """Issue 40: on 2Wiki the 1.5B restated "Who was born later, X or Y?" as its first sub-question and then asked
    "When did X die?"; such a question's Decomposer ends its examples with a comparison asked option by option
    (``comparison_example``), after the examples every other question reads unchanged."""
    comparison = "Who was born later, Tomas Halvard or Odile Quill?"
    for setting in (True, False):
        script = Script(sub_questions=["That's enough."] * 8, entities={comparison: "Tomas Halvard", QUESTION: "Kesh Bridge"})
        graph = build_hirag_graph(ScriptedChatModel(script), corpus, config=HiRAGConfig(comparison_example=setting))
        for question in (comparison, QUESTION):
            graph.invoke({"question": question})
        openings = {q: next(p for p in script.prompts["decompose"] if p.endswith(q)).split("Let's break down")[0]
                    for q in (comparison, QUESTION)}
        assert openings[QUESTION] == prompts.DECOMPOSER + "\n"
        assert openings[comparison] == (prompts.DECOMPOSER_FOR_OPTIONS if setting else prompts.DECOMPOSER) + "\n"
    assert prompts.DECOMPOSER_FOR_OPTIONS.startswith(prompts.DECOMPOSER.split("\n\n## Initialization")[0])
    assert "2nd simple question: When was Tamsin Vole born?" in prompts.DECOMPOSER_FOR_OPTIONS


@pytest.mark.parametrize(
    ("question", "asked", "answers", "expected"),
    [
        ("Which film came out first, Lantern Road or Sable Song?",
         ["When was Lantern Road released?", "When was Sable Song released?"],
         ["Lantern Road was released on July 6, 2012.", "Sable Song was released in 2008."], "Sable Song"),
        ("Who was born later, Tomas Halvard or Mara Quill?",
         ["When was Tomas Halvard born?", "In what year was Mara Quill born?"],
         ["Tomas Halvard was born in Dunmere in 1820.", "1851"], "Mara Quill"),
        # a life's span: born reads its first year
        ("Who was born later, Tomas Halvard or Mara Quill?", ["When was Tomas Halvard born?", "When was Mara Quill born?"],
         ["Tomas Halvard (4 March 1851 – 1890)", "1820"], "Tomas Halvard"),
        # no decision: an attribute the question does not ask, a year missing, a sub-question not asking when,
        # one asking about both options, no order in time, two years for one option, equal years
        ("Who was born later, Tomas Halvard or Mara Quill?", ["When did Tomas Halvard die?", "When was Mara Quill born?"],
         ["He died in 1890.", "1851"], None),
        ("Which film came out first, Lantern Road or Sable Song?", ["When was Lantern Road released?"], ["2012"], None),
        ("Which film came out first, Lantern Road or Sable Song?",
         ["Who directed Lantern Road?", "When was Sable Song released?"], ["Franco Rossi, in 1961.", "2008"], None),
        ("Which film came out first, Lantern Road or Sable Song?",
         ["When were Lantern Road and Sable Song released?", "When was Sable Song released?"], ["1961 and 2008", "2008"], None),
        ("Who lived longer, Tomas Halvard or Mara Quill?", ["When was Tomas Halvard born?", "When was Mara Quill born?"],
         ["1820", "1851"], None),
        ("Which film came out first, Lantern Road or Sable Song?",
         ["When was Lantern Road released?", "When was Sable Song released?"], ["1961, re-released 1980", "2008"], None),
        ("Which film came out first, Lantern Road or Sable Song?",
         ["When was Lantern Road released?", "When was Sable Song released?"], ["1961", "1961"], None),
    ],
)
def test_an_order_in_time_between_two_options_is_read_from_the_years_of_the_sub_answers(question, asked, answers, expected):
    picked = option_by_year(question, asked, answers)
    assert (picked[0] if picked else None) == expected


def test_with_compare_years_a_comparison_the_years_decide_needs_no_summarizer_call(corpus):
    """Issue 40: given both years, the 1.5B named the later film for "came out first"; with ``compare_years`` the
    option the years pick is the answer and the Summarizer is not asked. Without it, the Summarizer answers."""
    question = "Who was born first, Tomas Halvard or Franco Rossi?"
    asked = ["When was Tomas Halvard born?", "When was Franco Rossi born?"]
    facts = {asked[0]: ("born in Dunmere", "Tomas Halvard was born in 1820."),
             asked[1]: ("Franco Rossi", "Franco Rossi was born in 1961.")}
    for setting in (True, False):
        script = Script(sub_questions=[*asked, "That's enough."], entities={q: q.split(" was ")[1][:-6] for q in asked},
                        facts=facts)
        state = run(corpus, script, question, th1=2, compare_years=setting)
        assert state["sub_answers"] == [facts[q][1] for q in asked]
        assert ("summarize" in script.calls) is not setting
        if setting:
            assert state["answer"] == "Tomas Halvard" and "1820" in state["reasoning"]


@pytest.mark.parametrize(
    ("amounts", "setting", "answer"),
    [
        ("Kesh Bridge: 40 m\nDunmere: 12 m", True, "Kesh Bridge"),
        ("Kesh Bridge: 40 m\nDunmere: unknown", True, "Dunmere"),
        ("Kesh Bridge: 40 m\nDunmere: 12 m", False, "Dunmere"),
    ],
)
def test_with_compare_quantities_the_options_numbers_answer_without_the_summarizer(corpus, amounts, setting, answer):
    """Issue 40: a comparison of amounts ("taller", "more species") asks the Summarizer's reading (the sub-answers and
    the documents) for each option's number; two numbers that differ answer it, anything else leaves it to the
    Summarizer, one call later."""
    question = "Which is taller, Kesh Bridge or Dunmere?"
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "That's enough."], amounts=amounts)
    state = run(corpus, script, question, th1=2, min_subquestions=1, compare_quantities=setting)
    decided = answer == "Kesh Bridge"
    assert state["answer"] == answer and ("summarize" in script.calls) is not decided
    assert script.calls.count("amounts") == int(setting)
    if setting:
        asked = script.prompts["amounts"][0]
        assert "The Kesh Bridge was designed by Tomas Halvard." in asked and "[Retrieved documents]" in asked
        assert asked.endswith("Kesh Bridge:\nDunmere:")
    if decided:
        assert "40" in state["reasoning"]


@pytest.mark.parametrize(
    ("question", "setting", "asked", "answer"),
    [
        ("Who was born first, Tomas Halvard or Franco Rossi?", True, True, "Tomas Halvard"),
        ("Who lived longer, Tomas Halvard or Franco Rossi?", True, True, "Tomas Halvard"),
        ("Who was born first, Tomas Halvard or Franco Rossi?", False, False, "Dunmere"),
        # the dates are another's, a hop behind each option: the reading need not hold them
        ("Which bridge has the designer born first, Tomas Halvard or Franco Rossi?", True, False, "Dunmere"),
    ],
)
def test_with_years_from_reading_a_comparison_in_time_the_sub_answers_leave_open_asks_the_reading(
    corpus, question, setting, asked, answer
):
    """Issue 40: on HotpotQA the 1.5B's Decomposer restated "Which film came out first, X or Y?" and its sub-answers
    gave no year. With ``years_from_reading`` the Summarizer's reading is asked for each option's dates, and two years
    that differ answer it; not when the question asks for another's dates ("has the director born earlier")."""
    years = "Tomas Halvard: 1820 – 1899\nFranco Rossi: 1919 – 1960"
    script = Script(sub_questions=["Who designed the Kesh Bridge?", "That's enough."], years=years)
    state = run(corpus, script, question, th1=2, min_subquestions=1, years_from_reading=setting)
    assert state["answer"] == answer and script.calls.count("years") == int(asked)
    assert ("summarize" in script.calls) is (answer == "Dunmere")
    if asked:
        assert "[Retrieved documents]" in script.prompts["years"][0]


def test_a_runs_context_overrides_the_graphs_settings(corpus):
    graph = build_hirag_graph(ScriptedChatModel(Script()), corpus, config=HiRAGConfig(th1=2))
    state = graph.invoke({"question": QUESTION}, context={"max_subquestions": 1})
    assert state["stop_reason"] == "max_subquestions" and len(state["sub_questions"]) == 1


def test_roles_get_their_own_models(corpus):
    script = Script()
    seen = {"decomposer": [], "verifier": [], "answerer": []}

    def model(role):
        def respond(prompt):
            seen[role].append(prompt)
            return script(prompt)

        return ScriptedChatModel(respond)

    graph = build_hirag_graph({role: model(role) for role in seen}, corpus, config=HiRAGConfig(th1=2))
    assert graph.invoke({"question": QUESTION})["answer"] == "Dunmere"
    assert all("## Background" in p for p in seen["decomposer"])
    assert all(p.startswith("Based on the response and the question") for p in seen["verifier"])
    assert seen["answerer"] and not any("## Background" in p for p in seen["answerer"])


def test_the_builder_is_typed_and_the_uncompiled_graph_takes_a_node(corpus):
    model = ScriptedChatModel(Script())
    compiled = build_hirag_graph(model, corpus, config=HiRAGConfig(th1=2), name="my-hirag")
    assert isinstance(compiled, CompiledStateGraph) and compiled.name == "my-hirag"
    assert set(compiled.get_input_jsonschema()["properties"]) == {"question"}
    graph = hirag_state_graph(model, corpus, HiRAGConfig(th1=2))
    seen = []

    def audit(state):  # a user's node between record and decompose
        seen.append(state["sub_answers"][-1])
        return {}

    graph.add_node("audit", audit)
    graph.edges.discard(("record", "decompose"))
    graph.add_edge("record", "audit")
    graph.add_edge("audit", "decompose")
    assert graph.compile().invoke({"question": QUESTION})["answer"] == "Dunmere"
    assert seen == ["The Kesh Bridge was designed by Tomas Halvard.", "Tomas Halvard was born in Dunmere."]


def test_any_langchain_vector_store_with_a_metadata_filter(tmp_path):
    """Issue 22: the chunk level worked only with Chroma (through its private collection)."""
    store = InMemoryVectorStore(HashEmbeddings(1024))
    built = HierarchicalCorpus.from_documents(docs(), HashEmbeddings(1024), vector_store=store, show_progress=False)
    chunks = built.rank_chunks("Tomas Halvard", "Where was Tomas Halvard born?")
    assert chunks[0].page_content == "Tomas Halvard was born in Dunmere in 1820." and len(chunks) == 3
    state = build_hirag_graph(ScriptedChatModel(Script()), built, config=HiRAGConfig(th1=2)).invoke({"question": QUESTION})
    assert state["answer"] == "Dunmere"
    built.persist(tmp_path)
    with pytest.raises(StoreError, match="vector_store="):
        HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024))
    again = HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024), vector_store=store)
    assert again.chunk_ids == built.chunk_ids


def test_a_store_holding_another_corpus_is_refused_or_replaced(tmp_path):
    """Issue 21: building corpus B into the store that held corpus A mixed them."""
    first = [Document(page_content="The Lisk is a river.", metadata={"title": "Lisk"})]
    HierarchicalCorpus.from_documents(first, HashEmbeddings(1024), persist_dir=tmp_path, show_progress=False)
    with pytest.raises(StoreError, match="overwrite=True"):
        HierarchicalCorpus.from_documents(docs(), HashEmbeddings(1024), persist_dir=tmp_path, show_progress=False)
    second = HierarchicalCorpus.from_documents(docs(), HashEmbeddings(1024), persist_dir=tmp_path, overwrite=True, show_progress=False)
    reloaded = HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024))
    assert reloaded.chunk_ids == second.chunk_ids and "Lisk" not in [d.title for d in reloaded.documents]
    assert {c.metadata["title"] for c in reloaded.search("river", 20)} <= {t for t, _ in PASSAGES}


def test_update_reindexes_only_changed_titles(tmp_path):
    """Issue 25: add, change and remove documents at the cost of the change."""
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES)]
    built = HierarchicalCorpus.from_documents(passages, HashEmbeddings(1024), persist_dir=tmp_path, show_progress=False)
    untouched = built.document("Dunmere").chunk_ids
    changed = [p if p.title != "Lantern Road" else Passage(p.id, p.title, "Lantern Road is a 1961 film.") for p in passages]
    changed = [p for p in changed if p.title != "Franco Rossi (footballer)"]
    changed.append(Passage("new", "Quern Viaduct", "The Quern Viaduct crosses the Lisk."))
    report = built.update(changed)
    assert report == {"added": ["Quern Viaduct"], "changed": ["Lantern Road"], "removed": ["Franco Rossi (footballer)"]}
    assert built.document("Dunmere").chunk_ids == untouched
    assert built.rank_titles("Quern Viaduct")[0][0] == "Quern Viaduct"
    assert [t for t, _ in built.rank_titles("Franco Rossi")] == ["Franco Rossi (director)"]
    assert built.rank_chunks("Lantern Road", "When?")[0].page_content == "Lantern Road is a 1961 film."
    built.persist(tmp_path)
    again = HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024))
    assert again.chunk_ids == built.chunk_ids and [d.title for d in again.documents] == [d.title for d in built.documents]


# --- departures from the paper, each one setting away ----------------------------------------------


def test_the_defaults_keep_the_paper_one_setting_away():
    config = HiRAGConfig()
    assert (config.verify_reads_chunk, config.ask_again_if_restated) == (False, False)
    assert config.summarizer_reads == "sub_answers"  # eq. (2)'s; "pairs" (ours) tied on the tuning questions
    assert config.answer_without_evidence and config.rewrite_top_k == 1
    assert config.reader_tokens == 350  # ours, measured; 0 is eq. (2)'s sub-answers alone
    assert config.th3 == 2  # ours, measured; 4 is §5.3's
    assert config.grounded_sub_answers  # ours, measured; False is eq. (6)'s Filter alone
    assert config.dense_rethink  # ours, measured; False: the entity's titles are the only documents


def test_a_grounded_filter_sees_the_chunk_and_rejects_an_answer_it_does_not_hold(corpus):
    wrong = {
        "Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The Kesh Bridge was designed by Tomas Halvard."),
        # read fluently from the chunk about his birth, but the chunk does not say Estmark
        "Where was Tomas Halvard born?": ("born in Dunmere", "Tomas Halvard was born in Estmark."),
    }
    script = Script(facts=wrong)
    state = run(corpus, script, th1=2, verify_reads_chunk=True, grounded_sub_answers=False)  # the Filter alone
    assert "judge" not in script.calls and script.calls.count("grounded_judge") >= 2
    first = script.prompts["grounded_judge"][0]
    assert "designed by Tomas Halvard and opened in 1871" in first.rsplit("Known information: ", 1)[1]
    assert state["trace"][0]["source"] == "retrieval"
    assert state["trace"][1]["source"] != "retrieval"  # never verified: rethink went on
    assert not any(a["verified"] for a in state["trace"][1]["attempts"])
    # the ungrounded Filter of eq. (6) lets the same wrong answer through
    plain = run(corpus, Script(facts=wrong), th1=2, grounded_sub_answers=False)
    assert plain["sub_answers"][1] == "Tomas Halvard was born in Estmark."


def test_the_summarizer_reads_pairs_and_the_chunks_they_came_from(corpus):
    script = Script()
    run(corpus, script, th1=2, summarizer_reads="pairs_and_chunks", reader_tokens=0)
    prompt = script.prompts["summarize"][0]
    assert "1. Sub-question: Who designed the Kesh Bridge?" in prompt
    assert "Answer: The Kesh Bridge was designed by Tomas Halvard." in prompt
    assert "Found in: " in prompt and "designed by Tomas Halvard and opened in 1871" in prompt
    assert "2. Sub-question: Where was Tomas Halvard born?" in prompt and "born in Dunmere in 1820" in prompt
    # eq. (2): the sub-answers alone
    plain = Script()
    run(corpus, plain, th1=2, summarizer_reads="sub_answers", reader_tokens=0)
    assert "opened in 1871" not in plain.prompts["summarize"][0]
    assert "Sub-question:" not in plain.prompts["summarize"][0]


def test_the_summarizer_reads_each_sub_answer_after_its_sub_question(corpus):
    script = Script()
    state = run(corpus, script, th1=2, summary_style="analysis", summarizer_reads="pairs", reader_tokens=0)
    known = script.prompts["summarize"][0].split("Known information:\n", 1)[1].split("\nAnalysis:", 1)[0]
    assert known.splitlines() == [
        "1. Sub-question: Who designed the Kesh Bridge?",
        "   Answer: The Kesh Bridge was designed by Tomas Halvard.",
        "2. Sub-question: Where was Tomas Halvard born?",
        "   Answer: Tomas Halvard was born in Dunmere.",
    ]
    assert "unknown" not in script.prompts["summarize"][0]  # eq. (2)'s instruction, only the reading changes
    assert state["answer"] == "Dunmere"


def test_the_summarizer_reads_the_found_chunks_then_the_questions_own_within_reader_tokens(corpus):
    script = Script()
    state = run(corpus, script, th1=2, summary_style="analysis", reader_tokens=80)
    prompt = script.prompts["summarize"][0]
    listed = prompt.split("Documents:\n", 1)[1].split("\n\nQuestion:", 1)[0].splitlines()
    # what the sub-questions were answered from first, in their order, then the question's nearest chunks
    assert "designed by Tomas Halvard and opened in 1871" in listed[0] and "born in Dunmere in 1820" in listed[1]
    assert listed[0].startswith("(Title: Kesh Bridge)") and len(listed) > 2
    assert sum("born in Dunmere in 1820" in line for line in listed) == 1  # each chunk once
    assert count_tokens("\n".join(listed)) <= 80
    assert "The Kesh Bridge was designed by Tomas Halvard." in prompt.split("Known information:", 1)[1]
    assert len(state["summary_reads"]) == len(listed)
    # reader_tokens=0, eq. (2)'s reading: no documents
    plain = Script()
    run(corpus, plain, th1=2, summary_style="analysis", reader_tokens=0)
    assert "Documents:" not in plain.prompts["summarize"][0]


def test_the_summarizer_can_read_the_documents_alone_without_the_sub_answers(corpus):
    """``summarizer_reads="chunks"``: decomposition chooses what is read; the sub-answers, which the 1.5B gets
    wrong ("…changed the body style of the RX 350 in 2010"), are not read beside it."""
    script = Script()
    state = run(corpus, script, th1=2, summary_style="analysis", summarizer_reads="chunks", reader_tokens=80)
    prompt = script.prompts["summarize"][0]
    listed = prompt.split("Documents:\n", 1)[1].split("\n\nQuestion:", 1)[0].splitlines()
    assert "designed by Tomas Halvard and opened in 1871" in listed[0] and "born in Dunmere in 1820" in listed[1]
    assert "Known information" not in prompt and "The Kesh Bridge was designed by Tomas Halvard." not in prompt
    assert state["answer"] == "Dunmere" and len(state["summary_reads"]) == len(listed)
    with pytest.raises(ValueError, match="reader_tokens"):
        HiRAGConfig(summarizer_reads="chunks", reader_tokens=0)


def test_the_summarizer_can_answer_in_a_few_words_in_one_call(corpus):
    """``summary_style="short"`` (ours): the Summarizer reads what it reads in the analysis style, but answers as
    naive RAG's reader does, in as few words as possible, with no analysis and no keyword extraction: one call
    where eq. (2) and the authors' extraction make two, and none of the 1.5B's analysis tokens."""
    script = Script()
    state = run(corpus, script, th1=2, summary_style="short", reader_tokens=80)
    (prompt,) = script.prompts["summarize"]
    assert prompt.startswith("Passages:\n") and "designed by Tomas Halvard and opened in 1871" in prompt
    assert "Known information: The Kesh Bridge was designed by Tomas Halvard. Tomas Halvard was born in Dunmere." in prompt
    assert prompt.endswith(f"Question: {QUESTION}\nAnswer: ") and "Analysis" not in prompt
    assert "extract" not in script.calls and state["answer"] == "Dunmere" == state["reasoning"]
    assert state["llm_calls"] == len(script.calls)
    bare = Script()
    run(corpus, bare, th1=2, summary_style="short", reader_tokens=0)
    assert not bare.prompts["summarize"][0].startswith("Passages:")
    assert "Known information: The Kesh Bridge" in bare.prompts["summarize"][0]


def test_the_summarizer_can_name_what_the_question_refers_to_before_it_answers(corpus):
    """``summary_style="step"`` (ours): the short-answer prompt asks for a "Step:" line, what the question's
    description refers to (the 1.5B otherwise answers with the first hop it was handed), then the "Answer:" line,
    which is read; one call, as "short"."""
    script = Script()  # its step reply: "Step: the birthplace of the Kesh Bridge's designer", "Answer: Dunmere"
    state = run(corpus, script, th1=2, summary_style="step", reader_tokens=80)
    (prompt,) = script.prompts["summarize"]
    assert prompt.startswith("Passages:\n") and "Known information: The Kesh Bridge was designed by Tomas Halvard." in prompt
    assert prompt.endswith(f"as few words as possible. {STEP_FIRST}\nQuestion: {QUESTION}\nStep:")
    assert state["answer"] == "Dunmere" and state["reasoning"].startswith("Step: the birthplace of the Kesh Bridge's designer")
    assert state["llm_calls"] == len(script.calls)


def test_a_step_reply_without_an_answer_line_is_asked_as_a_short_answer(corpus):
    """The 1.5B sometimes writes the "Step:" line alone (a sentence holding the answer among other words): the
    question is then asked with the plain short-answer prompt, whose one line is the answer."""
    script = Script()
    base = script.__call__

    def respond(prompt: str) -> str:
        if STEP_FIRST in prompt:
            script._log("step", prompt)
            return "Step: Tomas Halvard, who designed the Kesh Bridge, was born in Dunmere in 1820."
        return base(prompt)

    graph = build_hirag_graph(ScriptedChatModel(respond), corpus, config=HiRAGConfig(th1=2, summary_style="step", reader_tokens=80))
    state = graph.invoke({"question": QUESTION})
    (step,), (plain,) = script.prompts["step"], script.prompts["summarize"]
    assert plain == step.replace(f" {STEP_FIRST}", "").removesuffix("Step:") + "Answer: "
    assert state["answer"] == "Dunmere" and state["llm_calls"] == len(script.calls)


@pytest.mark.parametrize("question", ["Who was born first, Tomas Halvard or Franco Rossi?",
                                      "Was the designer of the Kesh Bridge born in Dunmere?"])
def test_a_question_naming_two_options_or_asking_yes_or_no_is_answered_without_a_step_line(corpus, question):
    """On 2Wiki's tuning questions the "Step:" line turned comparisons and yes/no answers into sentences (1 better, 10
    worse): those questions keep the plain short answer."""
    script = Script()
    run(corpus, script, question, th1=2)
    assert script.prompts["summarize"] and not any(STEP_FIRST in prompt for prompt in script.prompts["summarize"])


def test_a_short_answer_naming_neither_option_is_asked_once_more_for_one_of_them(corpus):
    question = "Who was born first, Tomas Halvard or Franco Rossi?"
    script, replies = Script(), iter(["Dunmere", "tomas halvard"])
    base = script.__call__

    def respond(prompt: str) -> str:
        return (script._log("summarize", prompt), next(replies))[1] if "as few words" in prompt else base(prompt)

    graph = build_hirag_graph(ScriptedChatModel(respond), corpus,
                              config=HiRAGConfig(th1=2, summary_style="short", reader_tokens=80))
    state = graph.invoke({"question": question})
    first, again = script.prompts["summarize"]
    assert again == first.replace(f"Question: {question}\n", "Question: " + prompts.ONE_OF_THE_OPTIONS.format(
        question=question, first="Tomas Halvard", second="Franco Rossi") + "\n")
    assert state["off_option_answers"] == ["Dunmere"] and state["answer"] == "Tomas Halvard"


def test_a_restated_first_sub_question_is_asked_again_once(corpus):
    script = Script(sub_questions=(QUESTION.replace("?", " ?"), "Who designed the Kesh Bridge?", "Where was Tomas Halvard born?"))
    state = run(corpus, script, th1=2, ask_again_if_restated=True)
    assert state["restated"] == 1
    assert state["sub_questions"] == ["Who designed the Kesh Bridge?", "Where was Tomas Halvard born?"]
    assert prompts.RESTATED_QUESTION_AGAIN in script.prompts["decompose"][1]
    assert state["answer"] == "Dunmere"


def test_with_no_evidence_at_all_the_answer_is_unknown_not_the_models_memory(corpus):
    script = Script(sub_questions=("Who painted the Orrin murals?",), entities={"Who painted the Orrin murals?": "Orrin murals"},
                    facts={}, internal="I don't know")
    state = run(corpus, script, answer_without_evidence=False)
    assert state["answer"] == "unknown" and "summarize" not in script.calls
    assert run(corpus, Script(sub_questions=("Who painted the Orrin murals?",),
                              entities={"Who painted the Orrin murals?": "Orrin murals"}, facts={}))["answer"] == "Dunmere"


def test_each_retrieval_node_runs_alone(corpus):
    """The Retriever and Filter are named units (:class:`RetrievalNodes`): one node can be called, tested or
    replaced without the graph. Rethink (§4.4): the next chunk of the document first, every th2-th attempt
    the next document, and it gives up after th3 attempts."""
    nodes = RetrievalNodes({role: ScriptedChatModel(lambda p: "unused") for role in ROLES}, corpus, HiRAGConfig(th2=2, th3=3))
    assert len(corpus.document("Kesh Bridge").chunk_ids) == 2
    state = {"candidates": ["Kesh Bridge", "Orrin River"], "doc_rank": 0, "chunk_rank": 0, "attempts": [{}]}
    assert nodes.rethink(state) == {"level": "chunk", "chunk_rank": 1}
    assert nodes.rethink({**state, "attempts": [{}, {}]}) == {"level": "document", "doc_rank": 1, "chunk_rank": 0}
    assert nodes.rethink({**state, "attempts": [{}, {}, {}]}) == {"outcome": "gave_up", "response": ""}
    assert nodes.after_rethink({"outcome": "gave_up"}) == "record"
    assert nodes.after_rethink({"outcome": ""}) == "retrieve_document"


def changed_passages() -> list[Passage]:
    """The corpus of PASSAGES with one title changed, one removed and one added (an update's three kinds)."""
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES) if t != "Franco Rossi (footballer)"]
    passages = [p if p.title != "Lantern Road" else Passage(p.id, p.title, "Lantern Road is a 1961 film.") for p in passages]
    return [*passages, Passage("new", "Quern Viaduct", "The Quern Viaduct crosses the Lisk.")]


def hirag_store(where, pool):
    """The corpus's chunks in its own folder (None: it opens them) or in a Chroma collection outside it."""
    from multihop_rag.stores import langchain_chroma

    return {"vector_store": langchain_chroma(where, "hirag", HashEmbeddings(1024))} if pool == "outside it" else {}


@pytest.mark.parametrize("pool", ["in the folder", "outside it"])
def test_a_corpus_update_cut_half_way_is_undone_and_a_finished_one_is_persisted(tmp_path, monkeypatch, pool):
    """Issue 39: ``update`` wrote the chunks at once and the folder only on a later ``persist``; cut in between
    (Ctrl-C while the new chunks were written), the store and the folder disagreed and every reload said
    "rebuild it". Now an update of a corpus with a folder runs under its lock, undoable, and persists itself."""
    from langchain_chroma import Chroma

    folder, outside = tmp_path / "corpus", tmp_path / "elsewhere"
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES)]
    built = HierarchicalCorpus.from_documents(passages, HashEmbeddings(1024), persist_dir=folder, show_progress=False,
                                              **hirag_store(outside, pool))
    add = Chroma.add_texts

    def cut_once_written(self, *args, **kwargs):
        add(self, *args, **kwargs)
        raise KeyboardInterrupt

    cut = HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024), **hirag_store(outside, pool))
    with monkeypatch.context() as patch:
        patch.setattr(Chroma, "add_texts", cut_once_written)
        with pytest.raises(KeyboardInterrupt):
            cut.update(changed_passages())
    if pool == "outside it":
        with pytest.raises(StoreError, match="vector_store="):
            HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024))
    after = HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024), **hirag_store(outside, pool))
    assert after.chunk_ids == built.chunk_ids
    assert after.rank_chunks("Lantern Road", "When?")[0].page_content == "Lantern Road is a 1958 film directed by Franco Rossi."
    assert after.update(changed_passages())["added"] == ["Quern Viaduct"]  # it goes on, and persists itself
    again = HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024), **hirag_store(outside, pool))
    assert again.chunk_ids == after.chunk_ids and "Franco Rossi (footballer)" not in [d.title for d in again.documents]


KILLED_CORPUS_UPDATE = """
import pathlib, sys, time
from langchain_chroma import Chroma
from integrations_tests.unit.test_hirag import changed_passages, hirag_store
from integrations_tests.fakes import HashEmbeddings
from langgraph_hirag import HierarchicalCorpus

folder, marker, outside, pool = sys.argv[1:5]
add = Chroma.add_texts

def hangs_once_written(self, *args, **kwargs):
    add(self, *args, **kwargs)
    pathlib.Path(marker).write_text("the update is under way")
    time.sleep(600)

Chroma.add_texts = hangs_once_written
HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024), **hirag_store(outside, pool)).update(changed_passages())
"""


@pytest.mark.parametrize("pool", ["in the folder", "outside it"])
def test_a_corpus_update_killed_outright_is_undone_on_reload(tmp_path, pool):
    """Issue 39: ``kill -9`` after the update wrote its new chunks: the next ``from_persist_dir`` puts the last
    finished corpus back, in the folder and in a store outside it, and removes the copy."""
    folder, marker, outside = tmp_path / "corpus", tmp_path / "marker", tmp_path / "elsewhere"
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES)]
    built = HierarchicalCorpus.from_documents(passages, HashEmbeddings(1024), persist_dir=folder, show_progress=False,
                                              **hirag_store(outside, pool))
    kill_when(["-c", KILLED_CORPUS_UPDATE, str(folder), str(marker), str(outside), pool], marker.exists)
    again = HierarchicalCorpus.from_persist_dir(folder, HashEmbeddings(1024), **hirag_store(outside, pool))
    assert not (folder / ".before_update").exists()
    assert again.chunk_ids == built.chunk_ids and [d.title for d in again.documents] == [d.title for d in built.documents]


def test_a_store_that_cannot_be_copied_is_said_once_and_the_corpus_still_updates(tmp_path, caplog):
    """An update cannot copy an InMemoryVectorStore outside the folder: one warning per kind of store, not one
    per load and update."""
    from multihop_rag import stores

    stores._say_uncopyable.cache_clear()
    store = InMemoryVectorStore(HashEmbeddings(1024))
    passages = [Passage(id=str(i), title=t, text=x) for i, (t, x) in enumerate(PASSAGES)]
    built = HierarchicalCorpus.from_documents(passages, HashEmbeddings(1024), vector_store=store, persist_dir=tmp_path,
                                              show_progress=False)
    with caplog.at_level("WARNING", logger="multihop_rag.stores"):
        built.update(changed_passages())
        again = HierarchicalCorpus.from_persist_dir(tmp_path, HashEmbeddings(1024), vector_store=store)
        again.update(passages)
    assert [r.getMessage() for r in caplog.records].count(
        "a vector store of type InMemoryVectorStore cannot be copied before an update: one cut half-way may leave it "
        "apart from the index's folder (rebuild then); a Chroma store can be") == 1
    assert [d.title for d in again.documents] == list(dict.fromkeys(t for t, _ in PASSAGES))


def test_invents_names_reads_capitalised_names_only():
    from langgraph_hirag.replies import invents_names

    chunk = "The Kesh Bridge is a stone bridge in Velmora, Astrel. It was designed by Tomas Halvard."
    assert invents_names("The river under the Kesh Bridge is the Velmora River.", chunk)  # a name the chunk lacks
    assert invents_names("It was founded in Caldor, Norway.", "It was founded in 1735 in Caldor.")
    assert invents_names("The other river is the Lisk.", chunk)
    assert not invents_names("Tomas Halvard designed the Kesh Bridge.", chunk)  # sentence-initial names count too
    assert not invents_names("The Kesh bridge stands in velmora.", chunk)  # any case, articles aside
    assert not invents_names("It was designed in 1788. Halvard was its engineer.", chunk)
    assert not invents_names("Yes, it is in Velmora.", chunk)  # a sentence's first word may be any word
    assert not invents_names("It is in the town asked about, Velmora.", "Which town is Velmora?", )


def test_a_sub_answer_naming_what_its_chunk_does_not_fails_verification(corpus):
    """Issue 40: on the demo the 1.5B read "The river that flows under the Kesh Bridge is the Velmora River"
    from a chunk naming no river, "founded in Caldor, Norway", and "the Lisk" (a prompt example's river);
    the Filter of eq. (6), seeing no chunk, verified all three."""
    wrong = {
        "Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The Kesh Bridge was designed by Tomas Halvard."),
        "Where was Tomas Halvard born?": ("born in Dunmere", "Tomas Halvard was born in Estmark."),
    }
    script = Script(facts=wrong)
    state = run(corpus, script, th1=2, grounded_sub_answers=True)
    assert state["trace"][0]["source"] == "retrieval"
    assert not any(a["verified"] for a in state["trace"][1]["attempts"])  # Estmark is not in any chunk read
    assert state["trace"][1]["attempts"][0]["response"] == "Tomas Halvard was born in Estmark."
    assert set(state["invented_sub_answers"]) == {"Tomas Halvard was born in Estmark."}
    assert script.calls.count("judge") == 1  # a rejected name costs no Filter call
    # off: the Filter of eq. (6) alone, which lets it through
    assert run(corpus, Script(facts=wrong), th1=2, grounded_sub_answers=False)["sub_answers"][1] == "Tomas Halvard was born in Estmark."


def test_a_sub_answer_saying_its_answer_is_unknown_fails_verification_without_the_filter(corpus):
    """Issue 40: on MuSiQue dev 101-200 the 1.5B wrote 16 of 251 sub-answers as "The average yearly income for
    Betty Friedan is unknown."; the Filter said yes to each, so the sub-question was recorded as answered and
    rethink never read the next chunk."""
    unknown = {
        "Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The designer of the Kesh Bridge is unknown."),
        "Where was Tomas Halvard born?": ("born in Dunmere", "Tomas Halvard was born in Dunmere."),
    }
    script = Script(facts=unknown)
    state = run(corpus, script, th1=2)
    first = state["trace"][0]
    assert not any(a["verified"] for a in first["attempts"]) and first["answer"] == ""
    assert len(first["attempts"]) > 1  # rethink went on to read more
    assert state["sub_answers"][0] == ""
    assert "judge" not in script.calls[: script.calls.index("decompose", 1)]  # no Filter call for an unknown


def test_when_the_entitys_titles_run_out_rethink_goes_on_to_the_nearest_untried_document(corpus):
    """Issue 40: on the demo "What is the name of the river that flows under the Kesh Bridge?" matched one title,
    whose one chunk names no river, and the sub-question was given up after one attempt of th3 = 4; the river is
    in the passage about the town the bridge stands in."""
    sub_question = "Which port town is near the Kesh Bridge?"
    facts = {sub_question: ("Dunmere is a port town", "Dunmere is a port town on the Sable River.")}
    script = Script(sub_questions=[sub_question], entities={sub_question: "Kesh Bridge"}, facts=facts)
    state = run(corpus, script, th3=4, m=1000, dense_rethink=True)
    attempts = state["trace"][0]["attempts"]
    assert [(a["title"], a["level"]) for a in attempts][:2] == [("Kesh Bridge", "first"), ("Kesh Bridge", "chunk")]
    assert ("Dunmere", "document", True) in [(a["title"], a["level"], a["verified"]) for a in attempts[2:]]
    assert state["sub_answers"] == ["Dunmere is a port town on the Sable River."]
    assert len({a["title"] for a in attempts}) == len(attempts) - 1  # no document read twice
    # off: the entity's titles are the only documents, as in Algorithm 1
    paper = run(corpus, Script(sub_questions=[sub_question], entities={sub_question: "Kesh Bridge"}, facts=facts),
                th3=4, m=1000, dense_rethink=False)
    assert paper["trace"][0]["source"] == "gave_up" and len(paper["trace"][0]["attempts"]) == 2


def test_a_comparison_answered_with_neither_option_is_asked_once_to_name_one(corpus):
    """Issue 40: on HotpotQA the 1.5B answered "Which dog is based in Switzerland, Appenzeller Sennenhund or
    Drentse Patrijshond?" with "Switzerland" and "Which satellite was operational for longer, International
    Ultraviolet Explorer or EXOSAT?" with "IUE": answers naming neither option."""
    question = "Who was born first, Tomas Halvard or Franco Rossi?"

    def graph_with(extracted: list[str], **settings):
        script, replies = Script(), iter(extracted)
        base = script.__call__

        def respond(prompt: str) -> str:
            if prompt.startswith("Based on the input and the question, give the answer"):
                script._log("extract", prompt)
                return next(replies)
            return base(prompt)

        config = HiRAGConfig(th1=2, summary_style="analysis", **settings)
        return script, build_hirag_graph(ScriptedChatModel(respond), corpus, config=config)

    script, graph = graph_with(["Dunmere", "tomas halvard was"])
    state = graph.invoke({"question": question})
    assert state["answer"] == "Tomas Halvard" and state["off_option_answers"] == ["Dunmere"]  # the option, verbatim
    asked_again = script.prompts["extract"][1]
    assert asked_again.endswith('Answer with one of the two, as written: "Tomas Halvard" or "Franco Rossi".\nOutput:')

    script, graph = graph_with(["Dunmere", "Estmark"])  # a second answer naming neither keeps the first
    assert graph.invoke({"question": question})["answer"] == "Dunmere"

    script, graph = graph_with(["Franco Rossi"])  # an option already: no second ask
    assert graph.invoke({"question": question})["answer"] == "Franco Rossi" and len(script.prompts["extract"]) == 1

    script, graph = graph_with(["Dunmere"], answer_with_option=False)  # eq. (2)'s answer as it is
    state = graph.invoke({"question": question})
    assert state["answer"] == "Dunmere" and not state.get("off_option_answers") and len(script.prompts["extract"]) == 1


def test_with_at_most_one_sub_question_answered_the_summarizer_reads_as_naive_rag_does(corpus):
    """Issue 40: on MuSiQue's tuning questions the runs whose decomposition answered one sub-question scored 0.091
    against naive RAG's 0.249: the Summarizer answered with the first hop it was handed. Under ``fallback_below``
    answered sub-questions it reads what naive RAG's reader reads, the question's nearest chunks, in its prompt."""
    one = {"Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The Kesh Bridge was designed by Tomas Halvard.")}
    script = Script(facts=one)
    state = run(corpus, script, th1=2, fallback_tokens=60, summary_style="short")  # naive RAG's very prompt
    assert [bool(a) for a in state["sub_answers"]] == [True, False]
    (prompt,) = script.prompts["summarize"]
    listed = prompt.split("Passages:\n", 1)[1].split("\n\nUsing the passages", 1)[0].splitlines()
    assert prompt.endswith(f"Using the passages, answer the question in as few words as possible.\nQuestion: {QUESTION}\nAnswer: ")
    assert "Known information" not in prompt and count_tokens("\n".join(listed)) <= 60
    nearest = [d.page_content for d in corpus.search(QUESTION, len(listed))]
    assert [line.split(") ", 1)[1] for line in listed] == [" ".join(text.split()) for text in nearest]
    assert len(state["summary_reads"]) == len(listed)
    # two answered: the sub-answers, as before
    both = Script()
    run(corpus, both, th1=2, fallback_tokens=60)
    assert "Known information: The Kesh Bridge was designed by Tomas Halvard." in both.prompts["summarize"][0]
    # fallback_below=0, eq. (2): the one sub-answer is read
    paper = Script(facts=one)
    run(corpus, paper, th1=2, fallback_below=0)
    assert "Known information: The Kesh Bridge was designed by Tomas Halvard." in paper.prompts["summarize"][0]


def test_a_comparison_with_one_option_answered_keeps_its_sub_answer(corpus):
    """One option's answer is half a comparison's evidence: on HotpotQA's tuning questions the fallback lost three
    comparisons ("Which is a Macedonian weekly, Hänt Extra or Tea Moderna?") and nothing else."""
    question = "Which is older, the Kesh Bridge or the Lantern Road?"
    one = {"Who designed the Kesh Bridge?": ("designed by Tomas Halvard", "The Kesh Bridge was designed by Tomas Halvard.")}
    script = Script(facts=one)
    run(corpus, script, question, th1=2, compare_years=False, compare_quantities=False)
    assert "Known information: The Kesh Bridge was designed by Tomas Halvard." in script.prompts["summarize"][0]
