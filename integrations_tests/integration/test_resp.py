"""ReSP end to end: real Chroma retriever (LangChain), real MiniLM embeddings, the fast llama.cpp
model, real LangGraph with a checkpointer (the three-passage corpus of test_methods)."""

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from integrations_tests.integration.conftest import tiny_corpus
from langchain_resp import ReSPConfig, build_resp_graph
from multihop_rag.stores import langchain_chroma


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, models):
    corpus, _, question = tiny_corpus()
    store = langchain_chroma(tmp_path_factory.mktemp("resp"), "resp", models.lc_embed)
    store.add_documents([p.to_langchain() for p in corpus], ids=[p.id for p in corpus])
    return store.as_retriever(search_kwargs={"k": 2}), question


def test_a_checkpointed_run_pauses_resumes_and_a_reused_thread_starts_clean(retriever, lc_chat):
    retriever, question = retriever
    graph = build_resp_graph(lc_chat, retriever, config=ReSPConfig(max_iterations=2, top_k=2),
                             checkpointer=InMemorySaver(), interrupt_before=["generate"])
    thread = {"configurable": {"thread_id": "one-user"}}
    paused = graph.invoke({"question": question.question}, thread)
    assert not paused.get("answer") and graph.get_state(thread).next == ("generate",)
    assert 1 <= paused["iterations"] <= 2 and paused["global_memory"]
    assert set(question.supporting) & set(paused["retrieved"][0])  # real embeddings find a gold passage first
    final = graph.invoke(None, thread)
    assert final["answer"].strip() and final["global_memory"] == paused["global_memory"]
    assert final["stop_reason"] in {"sufficient", "max_iterations", "repeated_sub_question"}

    other = "Which river flows through the town of Pellan?"
    graph.invoke({"question": other}, thread)  # the same thread, a new question: nothing carries over
    again = graph.invoke(None, thread)
    assert again["question"] == other and len(again["sub_questions"]) <= again["iterations"]  # planned ones only
    assert len(again["retrieved"]) == again["iterations"] <= 2
    assert len(again["global_memory"]) == again["iterations"]
