"""ReSP control flow with scripted chat models (no network)."""

import os
import re

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import ValidationError

from integrations_tests.fakes import KeywordRetriever, ScriptedChatModel
from langchain_resp import ReSPConfig, build_resp_graph, combined_memory, prompts, resp_state_graph

DOCS = [
    Document(id="kesh", page_content="The Kesh Bridge was designed by Tomas Halvard.", metadata={"title": "Kesh Bridge"}),
    Document(id="halvard", page_content="Tomas Halvard was born in Dunmere.", metadata={"title": "Tomas Halvard"}),
    Document(id="dunmere", page_content="Dunmere is a port on the Sable River.", metadata={"title": "Dunmere"}),
]
QUESTION = "Where was the designer of the Kesh Bridge born?"


def retriever(k: int = 2) -> KeywordRetriever:
    return KeywordRetriever(docs=DOCS, k=k)


class Script:
    """Answers by role, recognised from the Table 1 prompt each node sends."""

    def __init__(self, judge=("No",), plan=("Who is Tomas Halvard?",), local="Yes, Tomas Halvard.", answer="Dunmere",
                 names=("Tomas Halvard",), years="unknown", countries="unknown", amounts="unknown"):
        self.judge, self.plan, self.local, self.answer, self.years = list(judge), list(plan), local, answer, years
        self.countries, self.amounts = countries, amounts
        self.names = list(names)
        self.calls: list[str] = []

    def __call__(self, prompt: str) -> str:
        if "find in the reference the country it asks about" in prompt:
            self.calls.append("countries")
            return self.countries
        if "the number the question compares" in prompt:
            self.calls.append("amounts")
            return self.amounts
        if "the date the question compares" in prompt or "the years of birth and death" in prompt:
            self.calls.append("years")
            return self.years
        if "Reply with its name only" in prompt:
            self.calls.append("replan")
            return self.names.pop(0) if len(self.names) > 1 else self.names[0]
        if "able to respond completely and accurately to the question" in prompt:
            self.calls.append("local")
            return self.local
        if prompt.startswith("Passages:"):
            self.calls.append("global")
            return "Halvard designed the bridge. [DONE] trailing text"
        if "able to completely and accurately respond" in prompt:
            self.calls.append("judge")
            return self.judge.pop(0) if len(self.judge) > 1 else self.judge[0]
        if "[You Thought]" in prompt:
            self.calls.append("plan")
            return self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
        if prompt.startswith("Answer the question based on the given reference"):
            self.calls.append("generate")
            return self.answer
        raise AssertionError(prompt)


PAPER = ReSPConfig(judge_threshold=None, reader_tokens=0, compare_years=False, compare_countries=False,
                  compare_quantities=False, answer_check=False)
"""Table 1's judge (its greedy Yes/No reply) and memory-only generator for every question: what these tests pin unless they say otherwise."""


def run(script: Script, **settings):
    graph = build_resp_graph(ScriptedChatModel(script), retriever(), config=PAPER.model_copy(update=settings))
    return graph.invoke({"question": QUESTION})


def test_judge_yes_exits_after_one_round_without_local_summary():
    script = Script(judge=("Yes",))
    state = run(script)
    assert script.calls == ["global", "judge", "generate"]
    assert state["iterations"] == 1 and state["stop_reason"] == "sufficient"
    assert not state.get("local_memory")
    assert state["global_memory"] == ["Halvard designed the bridge."]
    assert state["answer"] == "Dunmere"


def test_second_round_adds_local_pathway_and_memories_accumulate():
    script = Script(judge=("No", "Yes"))
    state = run(script)
    assert script.calls == ["global", "judge", "plan", "global", "local", "judge", "generate"]
    assert state["sub_questions"] == ["Who is Tomas Halvard?"]
    assert state["local_memory"] == [{"sub_question": "Who is Tomas Halvard?", "answer": "Tomas Halvard."}]
    assert len(state["global_memory"]) == 2 and len(state["retrieved"]) == 2
    assert state["retrieved"][0] == ["kesh", "halvard"]


def test_a_served_model_writes_a_rounds_two_summaries_at_once(monkeypatch):
    """The Global Evidence and Local Pathway summaries of a round read the same documents and not each other: on a
    model serving several calls at once both are in flight together (each waits here until the other is)."""
    import threading

    from langchain_resp import graph as resp_graph

    monkeypatch.setattr(resp_graph, "default_concurrency", lambda model: 2)
    script, both_in_flight = Script(judge=("No", "Yes")), threading.Barrier(2, timeout=10)

    def summaries_meet(prompt: str) -> str:
        reply = script(prompt)
        if script.calls[-1] == "local" or (script.calls[-1] == "global" and "judge" in script.calls):
            both_in_flight.wait()  # round two's pair; one call at a time never gets past this
        return reply

    state = build_resp_graph(ScriptedChatModel(summaries_meet), retriever(), config=PAPER).invoke({"question": QUESTION})
    assert sorted(script.calls[3:5]) == ["global", "local"]
    assert state["local_memory"] == [{"sub_question": "Who is Tomas Halvard?", "answer": "Tomas Halvard."}]
    assert len(state["global_memory"]) == 2 and state["answer"] == "Dunmere"


async def test_awaited_the_two_summaries_are_gathered_with_the_same_memories(monkeypatch):
    from langchain_resp import graph as resp_graph

    monkeypatch.setattr(resp_graph, "default_concurrency", lambda model: 2)
    script = Script(judge=("No", "Yes"))
    state = await build_resp_graph(ScriptedChatModel(script), retriever(), config=PAPER).ainvoke({"question": QUESTION})
    assert sorted(script.calls[3:5]) == ["global", "local"]
    assert state["local_memory"] == [{"sub_question": "Who is Tomas Halvard?", "answer": "Tomas Halvard."}]
    assert len(state["global_memory"]) == 2 and state["answer"] == "Dunmere"


def test_an_in_process_model_writes_them_one_after_the_other_in_the_papers_order():
    script = Script(judge=("No", "Yes"))
    run(script)  # the scripted model serves one call at a time, as llama.cpp in process does
    assert script.calls[3:5] == ["global", "local"]


def test_loop_stops_at_max_iterations_and_goes_straight_to_generate():
    script = Script(judge=("No",), plan=("Q one?", "Q two?", "Q three?", "Q four?"))
    state = run(script, max_iterations=3)
    assert state["iterations"] == 3 and state["stop_reason"] == "max_iterations"
    # Round 3 neither judges nor plans.
    assert script.calls[-3:] == ["global", "local", "generate"]
    assert script.calls.count("judge") == 2 and script.calls.count("plan") == 2


def test_the_judge_is_first_asked_after_min_iterations_rounds():
    """A judge's early "Yes" is not asked for before round ``min_iterations``: round 1 plans at once."""
    script = Script(judge=("Yes",))
    state = run(script, min_iterations=2)
    assert script.calls == ["global", "plan", "global", "local", "judge", "generate"]
    assert state["iterations"] == 2 and state["stop_reason"] == "sufficient"


def test_with_a_judge_threshold_yes_needs_that_probability_from_the_logprobs():
    """Issue 40: the greedy Yes (constrained to {"answer": ...}) stops 81 of 100 runs after round 1; P(Yes) from the
    first free token against a threshold decides instead (0.5 by default, set on the 2Wiki tuning questions)."""
    import math

    unsure = ("Yes", "stop", {"Yes": math.log(0.6), "No": math.log(0.3), "The": math.log(0.1)})
    sure = ("Yes", "stop", {"Yes": math.log(0.95), "No": math.log(0.05)})
    script = Script(judge=(unsure, sure))
    model = ScriptedChatModel(script)
    state = build_resp_graph(model, retriever(), config=ReSPConfig(judge_threshold=0.8)).invoke({"question": QUESTION})
    assert script.calls == ["global", "judge", "plan", "global", "local", "judge", "generate"]
    assert state["judge_probabilities"] == [round(0.6 / 0.9, 4), 0.95] and state["stop_reason"] == "sufficient"
    judge_calls = [kw for prompt, kw in zip(model.prompts, model.calls_kwargs, strict=True) if "able to completely and accurately respond" in prompt]
    assert len(judge_calls) == 2 and all(kw["logprobs"] and kw["max_tokens"] == 1 for kw in judge_calls)

    paper = Script(judge=(unsure,))
    assert run(paper)["stop_reason"] == "sufficient" and paper.calls.count("judge") == 1  # the reply's Yes

    doubtful = ("No", "stop", {"No": math.log(0.55), "Yes": math.log(0.45)})
    default = Script(judge=(doubtful, unsure))
    state = build_resp_graph(ScriptedChatModel(default), retriever()).invoke({"question": QUESTION})
    assert state["judge_probabilities"] == [0.45, round(0.6 / 0.9, 4)] and state["iterations"] == 2


def test_a_judge_threshold_without_logprobs_falls_back_to_the_reply():
    script = Script(judge=("Yes",))  # a backend that returns no logprobs
    state = run(script, judge_threshold=0.99)
    assert state["stop_reason"] == "sufficient" and state["judge_probabilities"] == []
    assert script.calls == ["global", "judge", "judge", "generate"]  # the probability call, then the label


def test_min_iterations_above_max_iterations_is_refused():
    with pytest.raises(ValueError, match="min_iterations"):
        ReSPConfig(min_iterations=4, max_iterations=3)


def test_a_repeated_plan_is_replanned_once_and_a_second_repeat_ends_the_loop():
    script = Script(judge=("No",), plan=("Who is Tomas Halvard?", "who is tomas halvard"), names=("",))
    state = run(script, max_iterations=5)
    assert state["stop_reason"] == "repeated_sub_question" and state["replans"] == 1
    assert state["iterations"] == 2 and state["sub_questions"] == ["Who is Tomas Halvard?"]
    assert script.calls[-3:] == ["plan", "replan", "generate"]


def test_a_plan_repeating_the_question_is_replanned_into_a_second_hop():
    """Issue 22: on 2Wiki with the 0.5B model, 12 of 20 runs ended after round 1 because the planner
    returned the question itself. The re-plan names the repetition and asks which entity is missing;
    the next round looks that entity up."""
    script = Script(judge=("No", "Yes"), plan=(QUESTION,), names=("Tomas Halvard",))
    model = ScriptedChatModel(script)
    state = build_resp_graph(model, retriever(), config=PAPER).invoke({"question": QUESTION})
    assert state["sub_questions"] == ["What is known about Tomas Halvard?"] and state["iterations"] == 2
    assert state["replans"] == 1 and state["stop_reason"] == "sufficient"
    replan = next(p for p in model.prompts if "Reply with its name only" in p)
    assert f'repeats "{QUESTION}"' in replan and "[Global evidence memory]" in replan


def test_a_name_already_looked_up_is_a_second_repeat():
    script = Script(judge=("No",), plan=(QUESTION,), names=("Tomas Halvard",))
    state = run(script, max_iterations=5)
    assert state["sub_questions"] == ["What is known about Tomas Halvard?"]
    assert state["stop_reason"] == "repeated_sub_question" and state["replans"] == 2


def test_a_paraphrase_of_the_question_counts_as_a_repeat():
    script = Script(plan=("Where was the Kesh Bridge's designer born?",), names=("",))
    state = run(script)
    assert state["stop_reason"] == "repeated_sub_question" and state["iterations"] == 1 and state["replans"] == 1


def test_without_replanning_the_first_repeat_ends_the_loop():
    state = run(Script(plan=(QUESTION,)), replan_on_repeat=False)
    assert state["stop_reason"] == "repeated_sub_question" and state["iterations"] == 1 and state["replans"] == 0


def test_a_plan_cut_at_the_token_cap_is_no_sub_question():
    script = Script(judge=("No", "Yes"), plan=(("Who designed the Kesh", "length"),), names=("Tomas Halvard",))
    state = run(script)
    assert state["sub_questions"] == ["What is known about Tomas Halvard?"] and state["replans"] == 1


def test_a_plan_that_states_instead_of_asking_is_replanned():
    """On 2Wiki dev 101–140 the 1.5B planner answered instead of asking in 3 of 28 sub-questions
    ("Based on the information provided ... George Cochrane's father died in 1758."); retrieved as
    they stood, they looked up the known information again. A reply with no question is re-planned."""
    plan = ("Based on the information provided, the Kesh Bridge was designed by Tomas Halvard.",)
    script = Script(judge=("No", "Yes"), plan=plan, names=("Tomas Halvard",))
    state = run(script)
    assert state["sub_questions"] == ["What is known about Tomas Halvard?"] and state["replans"] == 1


def test_a_plan_with_a_preamble_line_asks_the_question_below_it():
    plan = ("Based on the information provided, I would generate the following thought for the next retrieval step:\n"
            "Where was Tomas Halvard born?",)
    state = run(Script(judge=("No", "Yes"), plan=plan))
    assert state["sub_questions"] == ["Where was Tomas Halvard born?"] and state["replans"] == 0


def test_a_question_without_its_question_mark_is_still_a_question():
    state = run(Script(judge=("No", "Yes"), plan=("In which town was Tomas Halvard born",)))
    assert state["sub_questions"] == ["In which town was Tomas Halvard born"] and state["replans"] == 0


def test_a_reused_thread_answers_each_question_afresh():
    """Issue 21: on a reused thread_id the second question retrieved with the first one's
    sub-question, inherited iterations=2 and went straight to generate."""
    script = Script(judge=("No", "No", "Yes"), plan=("Who is Tomas Halvard?", "What is Dunmere?"))
    retr = retriever()
    config = PAPER.model_copy(update={"max_iterations": 2})
    graph = build_resp_graph(ScriptedChatModel(script), retr, checkpointer=InMemorySaver(), config=config)
    config = {"configurable": {"thread_id": "one-thread"}}
    graph.invoke({"question": QUESTION}, config)
    second = graph.invoke({"question": "Which port lies on the Sable River?"}, config)
    assert retr.queries[2] == "Which port lies on the Sable River?"
    assert second["iterations"] == 2 and second["sub_questions"] == ["What is Dunmere?"]
    assert len(second["global_memory"]) == 2 and len(second["retrieved"]) == 2


async def test_ainvoke_calls_the_models_async_methods():
    script = Script(judge=("No", "Yes"))
    model, retr = ScriptedChatModel(script), retriever()
    state = await build_resp_graph(model, retr).ainvoke({"question": QUESTION})
    assert state["answer"] == "Dunmere"
    assert set(model.modes) == {"async"} and set(retr.modes) == {"async"}
    build_resp_graph(model, retr).invoke({"question": QUESTION})
    assert model.modes[-1] == "sync" and retr.modes[-1] == "sync"


def test_a_runs_context_overrides_the_graphs_settings():
    script = Script(judge=("No",), plan=("Q one?", "Q two?", "Q three?"))
    graph = build_resp_graph(ScriptedChatModel(script), retriever())
    state = graph.invoke({"question": QUESTION}, context={"max_iterations": 2})
    assert state["iterations"] == 2 and state["stop_reason"] == "max_iterations"
    state = graph.invoke({"question": QUESTION}, context=ReSPConfig(max_iterations=1))
    assert state["iterations"] == 1
    with pytest.raises(ValidationError, match="max_iteration\n"):  # a misspelt setting is refused, not ignored
        graph.invoke({"question": QUESTION}, context={"max_iteration": 2})


def test_the_builder_is_typed_and_the_uncompiled_graph_takes_a_reranker():
    model = ScriptedChatModel(Script(judge=("Yes",)))
    compiled = build_resp_graph(model, retriever(k=3), name="my-resp")
    assert isinstance(compiled, CompiledStateGraph) and compiled.name == "my-resp"
    assert set(compiled.get_input_jsonschema()["properties"]) == {"question"}

    graph = resp_state_graph(model, retriever(k=3))

    def rerank(state):  # a user's node between retrieve and summarize: keep the best document only
        return {"documents": state["documents"][:1]}

    graph.add_node("rerank", rerank)
    graph.add_edge("retrieve", "rerank")
    graph.add_edge("rerank", "summarize")
    graph.edges.discard(("retrieve", "summarize"))
    state = graph.compile().invoke({"question": QUESTION})
    assert state["answer"] == "Dunmere" and "Doc 2" not in model.prompts[0]


def test_malformed_judge_counts_and_means_no():
    script = Script(judge=("I think perhaps", "Yes"))
    state = run(script)
    assert state["judge_failures"] == 1
    assert state["iterations"] == 2 and state["stop_reason"] == "sufficient"


def test_local_no_is_recorded_as_no():
    state = run(Script(judge=("No", "Yes"), local="No."))
    assert state["local_memory"][0]["answer"] == "No"


def test_prompts_are_table_1_verbatim_and_plan_sees_the_memories():
    script = Script(judge=("No", "Yes"))
    model = ScriptedChatModel(script)
    build_resp_graph(model, retriever(), config=PAPER).invoke({"question": QUESTION})
    judge_prompt = next(p for p in model.prompts if "able to completely" in p)
    assert judge_prompt.startswith("Judging based solely on the current known information and without allowing")
    plan_prompts = [p for p in model.prompts if "[You Thought]" in p]
    assert "[Global evidence memory]" in plan_prompts[0] and QUESTION in plan_prompts[0]
    generate_prompt = model.prompts[-1]
    assert "[Local pathway memory]" in generate_prompt and "Who is Tomas Halvard?" in generate_prompt
    global_prompt = model.prompts[0]
    assert "Doc 1(Title: Kesh Bridge) The Kesh Bridge was designed by Tomas Halvard." in global_prompt
    assert model.calls_kwargs[0]["stop"] == ["[DONE]"]
    assert prompts.GENERATE.startswith("Answer the question based on the given reference.")


def test_with_shared_prefixes_a_rounds_calls_open_with_what_they_share():
    """Both summaries of a round open with its documents, the judge, plan and re-plan with the memory and
    the question, so a prompt cache (llama.cpp's, a server's) reads each once; Table 1's wording otherwise."""
    script = Script(judge=("No",), plan=("Where was the designer of the Kesh Bridge born?",))  # a repeat: re-planned
    model = ScriptedChatModel(script)
    config = PAPER.model_copy(update={"shared_prefixes": "all", "max_iterations": 2})
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": QUESTION})
    assert script.calls == ["global", "judge", "plan", "replan", "global", "local", "generate"]
    first_judge, first_plan, replan, second_global, second_local = model.prompts[1:6]
    for shared in (os.path.commonprefix([first_judge, first_plan]), os.path.commonprefix([first_plan, replan])):
        assert shared.startswith("Known information: [Global evidence memory]") and f"Target question: {QUESTION}\n" in shared
    shared = os.path.commonprefix([second_global, second_local])
    assert shared.startswith("Passages: Doc 1(Title: ") and shared.endswith("\n")
    assert all(doc["text"] in shared for doc in state["passages"][-2:]) and "Question" not in shared
    assert "without allowing for inference" in first_judge and "[You Thought]:" in first_plan


def test_with_shared_documents_only_the_local_summary_is_reordered():
    script = Script(judge=("No",), plan=("Who is Tomas Halvard?",))
    model = ScriptedChatModel(script)
    config = PAPER.model_copy(update={"shared_prefixes": "documents", "max_iterations": 2})
    build_resp_graph(model, retriever(), config=config).invoke({"question": QUESTION})
    assert script.calls == ["global", "judge", "plan", "global", "local", "generate"]
    judge, plan, second_global, second_local = model.prompts[1:5]
    assert judge.startswith("Judging based solely") and plan.startswith("You serve as an intelligent assistant")
    assert os.path.commonprefix([second_global, second_local]).startswith("Passages: Doc 1(Title: ")
    assert second_local.index("Tomas Halvard was born in Dunmere.") < second_local.index("Who is Tomas Halvard?")


def test_without_rereading_a_later_round_summarizes_only_documents_no_earlier_round_read():
    """Round 2 retrieves Dunmere and Halvard; Halvard was read in round 1, so both summaries read Dunmere only."""
    script = Script(judge=("No",), plan=("Where is Dunmere?",))
    model = ScriptedChatModel(script)
    config = PAPER.model_copy(update={"reread_documents": False, "max_iterations": 2})
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": QUESTION})
    assert script.calls == ["global", "judge", "plan", "global", "local", "generate"]
    second_global, second_local = model.prompts[3:5]
    for prompt in (second_global, second_local):
        assert "Dunmere is a port" in prompt and "Tomas Halvard was born in Dunmere." not in prompt
    assert state["retrieved"] == [["kesh", "halvard"], ["dunmere", "halvard"]]  # the trace keeps what was retrieved


def test_without_rereading_a_round_with_nothing_new_adds_no_summary_and_answers_its_sub_question_from_its_documents():
    script = Script(judge=("No",), plan=("Who is Tomas Halvard?",))
    model = ScriptedChatModel(script)
    config = PAPER.model_copy(update={"reread_documents": False, "max_iterations": 2})
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": QUESTION})
    assert script.calls == ["global", "judge", "plan", "local", "generate"]
    assert len(state["global_memory"]) == 1 and state["local_memory"][0]["answer"] == "Tomas Halvard."
    assert "Tomas Halvard was born in Dunmere." in model.prompts[3]


def test_by_default_every_round_summarizes_all_its_documents_as_the_paper():
    script = Script(judge=("No",), plan=("Where is Dunmere?",))
    model = ScriptedChatModel(script)
    build_resp_graph(model, retriever(), config=PAPER.model_copy(update={"max_iterations": 2})).invoke({"question": QUESTION})
    assert "Tomas Halvard was born in Dunmere." in model.prompts[3]


def test_role_models_are_used_per_role():
    calls = {"reasoner": [], "summarizer": [], "generator": []}

    def role(name, script):
        def respond(prompt):
            calls[name].append(prompt)
            return script(prompt)

        return ScriptedChatModel(respond)

    script = Script(judge=("No", "Yes"))
    graph = build_resp_graph({r: role(r, script) for r in calls}, retriever(), config=PAPER)
    graph.invoke({"question": QUESTION})
    assert all("[You Thought]" in p or "able to completely" in p for p in calls["reasoner"])
    assert all(p.startswith("Passages:") or "respond completely" in p for p in calls["summarizer"])
    assert len(calls["generator"]) == 1
    with pytest.raises(ValueError, match="generator"):
        build_resp_graph({"reasoner": None, "summarizer": None}, retriever())


def test_top_k_limits_documents_and_words_are_counted():
    graph = build_resp_graph(ScriptedChatModel(Script(judge=("Yes",))), retriever(k=3), config=PAPER.model_copy(update={"top_k": 1}))
    state = graph.invoke({"question": QUESTION})
    assert len(state["retrieved"][0]) == 1
    assert state["retrieved_words"] == len(DOCS[0].page_content.split())


def test_stream_yields_node_updates_in_order():
    graph = build_resp_graph(ScriptedChatModel(Script(judge=("No", "Yes"))), retriever(), config=PAPER)
    nodes = [next(iter(update)) for update in graph.stream({"question": QUESTION}, stream_mode="updates")]
    assert nodes == ["start", "retrieve", "summarize", "judge", "plan", "retrieve", "summarize", "judge", "generate"]


def test_checkpointer_interrupt_and_resume():
    script = Script(judge=("No", "Yes"))
    graph = build_resp_graph(
        ScriptedChatModel(script), retriever(), config=PAPER, checkpointer=InMemorySaver(), interrupt_before=["plan"]
    )
    config = {"configurable": {"thread_id": "t1"}}
    paused = graph.invoke({"question": QUESTION}, config)
    assert not paused.get("answer") and graph.get_state(config).next == ("plan",)
    final = graph.invoke(None, config)
    assert final["answer"] == "Dunmere" and final["iterations"] == 2


def test_combined_memory_format():
    assert combined_memory([], []) == "None"
    text = combined_memory(["a"], [{"sub_question": "q", "answer": "b"}])
    assert text == "[Global evidence memory]\n- a\n[Local pathway memory]\n- Sub-question: q Answer: b"


def test_with_reader_tokens_0_the_generator_reads_the_memory_only_as_table_1_has_it():
    model = ScriptedChatModel(Script(judge=("No", "Yes"), plan=("Where was Tomas Halvard born?",)))
    build_resp_graph(model, retriever(), config=PAPER).invoke({"question": QUESTION})
    assert "[Retrieved documents]" not in model.prompts[-1] and "born in Dunmere" not in model.prompts[-1]


def test_with_reader_tokens_the_generator_reads_every_rounds_documents_once_in_rank_order():
    model = ScriptedChatModel(Script(judge=("No", "Yes"), plan=("Where was Tomas Halvard born?",)))
    build_resp_graph(model, retriever(), config=ReSPConfig(judge_threshold=None, reader_tokens=1000, reader_min_rounds=1)).invoke({"question": QUESTION})
    prompt = model.prompts[-1]
    assert prompt.startswith("Answer the question based on the given reference")
    assert prompt.index("[Global evidence memory]") < prompt.index("[Retrieved documents]") < prompt.index("Question:")
    # round 1 retrieved kesh, halvard; round 2 halvard again (once) — each document once, in order
    assert prompt.count("Tomas Halvard was born in Dunmere.") == 1
    assert prompt.index("Doc 1(Title: Kesh Bridge)") < prompt.index("Doc 2(Title: Tomas Halvard)")


def test_an_answer_that_is_a_documents_label_is_asked_again_with_the_documents_unlabelled():
    # the 1.5B answered "Doc 2" to "Which film was released first, …?" from FlashRAG's "Doc 2(Title: …)" labels
    answers = ["Doc 2", "Dunmere"]
    script = Script(judge=("No", "Yes"), plan=("Where was Tomas Halvard born?",))
    model = ScriptedChatModel(lambda prompt: answers.pop(0) if prompt.startswith("Answer the question") else script(prompt))
    config = ReSPConfig(judge_threshold=None, reader_tokens=1000, reader_min_rounds=1)
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": QUESTION})
    first, again = [p for p in model.prompts if p.startswith("Answer the question")]
    assert "Doc 2(Title: Tomas Halvard)" in first  # FlashRAG's format, as tuned
    documents = again.split("[Retrieved documents]")[1]
    assert "(Title: Tomas Halvard) Tomas Halvard was born in Dunmere." in documents and not re.search(r"\bDoc \d", documents)
    assert state["answer"] == "Dunmere" and state["label_answers"] == 1


@pytest.mark.parametrize(
    ("first", "question", "setting", "asked_again"),
    [
        ("Global evidence memory", QUESTION, True, True),  # a heading of its reference
        ("[Retrieved documents]:", QUESTION, True, True),
        ("No.", QUESTION, True, True),  # a bare No to a "Where" question
        ("Yes", "Was the designer of the Kesh Bridge born in Dunmere?", True, False),  # Yes/No is what it asks
        ("Dunmere", QUESTION, True, False),
        ("Global evidence memory", QUESTION, False, False),  # Table 1's generator as it answers
    ],
)
def test_with_answer_check_an_answer_that_is_a_heading_or_a_bare_yes_no_is_asked_once_more(first, question, setting, asked_again):
    """Issue 40: the 1.5B answered a MuSiQue "Who ..." question with "Global evidence memory" and a HotpotQA "What ..."
    one with "No"; the generator is asked again, the question followed by a request for what it asks."""
    answers = [first, "Tomas Halvard"]
    script = Script(judge=("Yes",))
    model = ScriptedChatModel(lambda prompt: answers.pop(0) if prompt.startswith("Answer the question") else script(prompt))
    config = PAPER.model_copy(update={"answer_check": setting})
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": question})
    generated = [p for p in model.prompts if p.startswith("Answer the question")]
    assert len(generated) == 1 + asked_again and state["answer_checks"] == int(asked_again)
    assert state["answer"] == ("Tomas Halvard" if asked_again else first)
    if asked_again:
        assert f"{question}\n{prompts.ANSWER_WHAT_IS_ASKED}" in generated[1]


def test_with_reader_min_rounds_the_generator_reads_the_documents_only_after_that_many_rounds():
    config = ReSPConfig(judge_threshold=None, reader_tokens=1000, reader_min_rounds=2)
    stopped = ScriptedChatModel(Script(judge=("Yes",)))
    build_resp_graph(stopped, retriever(), config=config).invoke({"question": QUESTION})
    assert "[Retrieved documents]" not in stopped.prompts[-1]  # the judge ended it after round 1: memory only
    went_on = ScriptedChatModel(Script(judge=("No", "Yes"), plan=("Where was Tomas Halvard born?",)))
    build_resp_graph(went_on, retriever(), config=config).invoke({"question": QUESTION})
    assert "[Retrieved documents]" in went_on.prompts[-1]


def test_the_reading_list_keeps_whole_documents_within_the_budget():
    from multihop_rag.frameworks.langgraph import reading_list

    docs = [{"id": str(i), "title": f"T{i}", "text": "word " * 50} for i in range(5)]
    listed = reading_list(docs + docs[:2], budget=130)
    assert [d["id"] for d in listed] == ["0", "1"]  # two of ~60 tokens fit 130; the third would not; repeats dropped
    assert reading_list(docs, budget=0) == []


def test_the_reading_list_counts_the_labels_its_reader_is_shown():
    # the run of record's ReSP generator read FlashRAG-labelled documents within a budget that counted the labels;
    # a count without them let a HotpotQA run read one more document and change its answer
    from multihop_rag.frameworks.langgraph import format_documents, format_reading, reading_list
    from multihop_rag.indexing.text import count_tokens

    docs = [{"id": str(i), "title": f"T{i}", "text": "word " * 50} for i in range(3)]
    unlabelled = sum(count_tokens(format_reading([d])) for d in docs[:2])  # two fit, not with "Doc 1", "Doc 2"
    assert [d["id"] for d in reading_list(docs, unlabelled)] == ["0", "1"]
    assert [d["id"] for d in reading_list(docs, unlabelled, labelled=True)] == ["0"]
    labelled = sum(count_tokens(line) for line in format_documents(docs[:2]).splitlines())
    assert [d["id"] for d in reading_list(docs, labelled, labelled=True)] == ["0", "1"]


COMPARISON = "Who was born first, Tomas Halvard or Mara Quill?"


@pytest.mark.parametrize(
    ("reply", "expected", "question"),
    [(case + (COMPARISON,))[:3] for case in [
        ("Tomas Halvard: born 4 March 1851\nMara Quill: born in Dunmere, 1820", "Mara Quill"),
        ("Mara Quill (1820)\nTomas Halvard - 1851", "Mara Quill"),
        ("Tomas Halvard: born 551 BC\nMara Quill: born 372 BCE", "Tomas Halvard"),
        ("Tomas Halvard: born 899\nMara Quill: born 1020", "Tomas Halvard"),
        ("Tomas Halvard: 950–1020\nMara Quill: born 1001", "Tomas Halvard"),
        # a number of three digits beside a year of four is no year (HotpotQA record: a case's volume and page)
        ("Lantern Road: Lantern Road, 429 U. S. 190 (1976), was the first case\nSable Song: 334 US 131 (1948)", "Sable Song",
         "Which case came first, Lantern Road or Sable Song?"),
        # a life's span: born takes its first year, died its last
        ("Tomas Halvard: Tomas Halvard, 4 March 1851 – 1890\nMara Quill: 1820 – 1899", "Mara Quill"),
        ("Tomas Halvard: 1851 – 1890\nMara Quill: 1820 – 1899", "Tomas Halvard", "Who died first, Tomas Halvard or Mara Quill?"),
        # no decision: a year missing, equal years, no line per option, two years where no life's end is asked
        ("Tomas Halvard: 1851\nMara Quill: unknown", None),
        ("Tomas Halvard: 1851\nMara Quill: 1851", None),
        ("Tomas Halvard and Mara Quill: 1851 and 1820", None),
        ("Lantern Road: Tomas Halvard, 1851, 1920\nSable Song: 1931", None, "Which film came out first, Lantern Road or Sable Song?"),
    ]],
)
def test_each_options_year_is_read_from_its_own_line(reply, expected, question):
    from multihop_rag.time_order import time_comparison, years_by_option

    comparison = time_comparison(question)
    assert comparison is not None
    picked = comparison.pick(years_by_option(reply, comparison))
    assert (picked[0] if picked else None) == expected


@pytest.mark.parametrize(
    ("question", "reply", "expected"),
    [
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1820 – 1890\nMara Quill: born 1851, died 1899", "Tomas Halvard"),
        ("Who lived to an older age, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1820–1860\nMara Quill: 1851–1899", "Mara Quill"),
        ("Which playwright lived a longer life, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1820 - 1890\nMara Quill: 1851 - 1899", "Tomas Halvard"),
        # years before 1000 (2Wiki tuning: "Ma Xisheng: 899-932" decided nothing) and before the common era
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1903-1977\nMara Quill: 899-932", "Tomas Halvard"),
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 106 BC – 43 BC\nMara Quill: 120 – 165", "Tomas Halvard"),
        # no decision: one year only, a death before the birth, equal lifespans
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1820\nMara Quill: 1851 – 1899", None),
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1890 – 1820\nMara Quill: 1851 – 1899", None),
        ("Who lived longer, Tomas Halvard or Mara Quill?", "Tomas Halvard: 1820 – 1870\nMara Quill: 1851 – 1901", None),
    ],
)
def test_a_lifespan_comparison_picks_the_longer_life_from_each_options_birth_and_death(question, reply, expected):
    """Issue 40: "Who lived to an older age, X or Y?" was read as "older" (born earlier) and "Who lived longer" as no
    comparison in time; both compare the years between each option's birth and death."""
    from multihop_rag.time_order import time_comparison, years_by_option

    comparison = time_comparison(question)
    assert comparison is not None and comparison.life == "span"
    picked = comparison.pick(years_by_option(reply, comparison))
    assert (picked[0] if picked else None) == expected


def test_only_a_question_with_two_options_and_one_direction_in_time_is_a_time_comparison():
    from multihop_rag.time_order import time_comparison

    assert time_comparison("Which film came out more recently, Lantern Road or Sable Song?").later
    assert time_comparison("Who was born later, Tomas Halvard (1851) or Mara Quill?").options[1] == "Mara Quill"
    assert time_comparison("Who is older, Tomas Halvard or Mara Quill?").life == "born"
    assert time_comparison("Which is taller, the Kesh Bridge or the Sable Tower?") is None
    assert time_comparison(QUESTION) is None
    # whose dates: the options' own, or another's a hop behind each
    assert not time_comparison("Which film came out first, Lantern Road or Sable Song?").of_another
    assert time_comparison("Which film has the director born earlier, Lantern Road or Sable Song?").of_another
    assert time_comparison("Which film whose director died first, Lantern Road or Sable Song?").of_another


def test_with_compare_years_a_time_comparison_the_years_decide_needs_no_generator_call():
    """Issue 40: on 2Wiki's comparisons ReSP picked the wrong option as often as naive RAG, from documents that held
    both years. With ``compare_years`` the generator's reading is asked for each option's year, and the years pick."""
    script = Script(judge=("Yes",), years="Tomas Halvard: born 1851\nMara Quill: born 1820", answer="Tomas Halvard")
    model = ScriptedChatModel(script)
    config = ReSPConfig(judge_threshold=None, compare_years=True)
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": COMPARISON})
    assert script.calls == ["global", "judge", "years"]
    assert state["answer"] == "Mara Quill" and state["decided_by"] == "years"
    years_prompt = model.prompts[-1]
    # it reads the documents even after one round, and names both options
    assert "Tomas Halvard was born in Dunmere." in years_prompt and years_prompt.rstrip().endswith("Mara Quill:")


def test_a_lifespan_comparison_asks_for_each_persons_birth_and_death():
    script = Script(judge=("Yes",), years="Tomas Halvard: 1820 – 1890\nMara Quill: 1851 – 1899", answer="Mara Quill")
    model = ScriptedChatModel(script)
    state = build_resp_graph(model, retriever(), config=ReSPConfig(judge_threshold=None)).invoke(
        {"question": "Who lived longer, Tomas Halvard or Mara Quill?"})
    assert script.calls == ["global", "judge", "years"] and "years of birth and death" in model.prompts[-1]
    assert state["answer"] == "Tomas Halvard" and state["decided_by"] == "years"


def test_undecided_years_or_compare_years_off_leave_the_answer_to_the_generator():
    for years, setting, calls in (("Tomas Halvard: 1851\nMara Quill: unknown", True, ["global", "judge", "years", "generate"]),
                                  ("Tomas Halvard: 1851\nMara Quill: 1820", False, ["global", "judge", "generate"])):
        script = Script(judge=("Yes",), years=years, answer="Tomas Halvard")
        config = ReSPConfig(judge_threshold=None, compare_years=setting)
        state = build_resp_graph(ScriptedChatModel(script), retriever(), config=config).invoke({"question": COMPARISON})
        assert script.calls == calls and state["answer"] == "Tomas Halvard" and not state.get("decided_by")


SAME_COUNTRY = "Were Tomas Halvard and Mara Quill of the same nationality?"


@pytest.mark.parametrize(
    ("countries", "setting", "calls", "answer"),
    [
        ("Tomas Halvard: American engineer\nMara Quill: United States", True, ["global", "judge", "countries"], "Yes"),
        ("Tomas Halvard: American\nMara Quill: Canadian", True, ["global", "judge", "countries"], "No"),
        ("Tomas Halvard: American\nMara Quill: unknown", True, ["global", "judge", "countries", "generate"], "Dunmere"),
        ("Tomas Halvard: American\nMara Quill: American", False, ["global", "judge", "generate"], "Dunmere"),
    ],
)
def test_with_compare_countries_two_things_countries_answer_whether_they_share_one(countries, setting, calls, answer):
    """Issue 40: after three rounds ReSP answered "No" to most of 2Wiki's "same nationality" tuning questions whose
    answer is "Yes". With ``compare_countries`` the generator's reading, with the documents, is asked for each one's
    country; one country in each line answers without the generator, anything else leaves the answer to it."""
    script = Script(judge=("Yes",), countries=countries)
    model = ScriptedChatModel(script)
    config = ReSPConfig(judge_threshold=None, compare_countries=setting)
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": SAME_COUNTRY})
    assert script.calls == calls and state["answer"] == answer
    assert state["decided_by"] == ("countries" if answer in ("Yes", "No") else "")
    if setting:
        asked = next(p for p in model.prompts if "the country it asks about" in p)
        assert "Tomas Halvard was born in Dunmere." in asked and f"Question: {SAME_COUNTRY}" in asked


TALLER = "Which tower is taller, Tomas Halvard Tower or Mara Quill Tower?"


@pytest.mark.parametrize(
    ("amounts", "setting", "calls", "answer"),
    [
        ("Tomas Halvard Tower: 120 m\nMara Quill Tower: 95 metres", True, ["global", "judge", "amounts"], "Tomas Halvard Tower"),
        ("Tomas Halvard Tower: 120 m\nMara Quill Tower: 400 ft", True, ["global", "judge", "amounts", "generate"], "Dunmere"),
        ("Tomas Halvard Tower: 120 m\nMara Quill Tower: unknown", True, ["global", "judge", "amounts", "generate"], "Dunmere"),
        ("Tomas Halvard Tower: 120 m\nMara Quill Tower: 95 m", False, ["global", "judge", "generate"], "Dunmere"),
    ],
)
def test_with_compare_quantities_the_options_numbers_pick_the_answer(amounts, setting, calls, answer):
    """Issue 40: a question comparing amounts ("taller", "more species") asks the generator's reading, with the
    documents, for each option's number; two numbers in one unit that differ answer without the generator."""
    script = Script(judge=("Yes",), amounts=amounts)
    model = ScriptedChatModel(script)
    config = ReSPConfig(judge_threshold=None, compare_quantities=setting)
    state = build_resp_graph(model, retriever(), config=config).invoke({"question": TALLER})
    assert script.calls == calls and state["answer"] == answer
    assert state["decided_by"] == ("quantities" if answer.endswith("Tower") else "")
    if setting:
        asked = next(p for p in model.prompts if "the number the question compares" in p)
        assert "Tomas Halvard was born in Dunmere." in asked and asked.endswith("Tomas Halvard Tower:\nMara Quill Tower:")


def test_a_question_without_options_is_never_asked_for_years():
    script = Script(judge=("Yes",))
    config = ReSPConfig(judge_threshold=None, compare_years=True, compare_countries=True, compare_quantities=True)
    build_resp_graph(ScriptedChatModel(script), retriever(), config=config).invoke({"question": QUESTION})
    assert not {"years", "countries", "amounts"} & set(script.calls)
