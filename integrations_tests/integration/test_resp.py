"""ReSP end to end: real Chroma retriever (LangChain), real embeddings, the embedded LLM."""

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langchain_resp import ReSPConfig, build_resp_graph
from multihop_rag.backends import langchain_embeddings
from multihop_rag.corpus import load_dataset
from multihop_rag.stores import langchain_chroma


@pytest.fixture(scope="module")
def hotpot_retriever(tmp_path_factory):
    passages, questions = load_dataset("hotpotqa", "smoke")
    store = langchain_chroma(tmp_path_factory.mktemp("resp"), "hotpot", langchain_embeddings("st:default"))
    store.add_documents([p.to_langchain() for p in passages], ids=[p.id for p in passages])
    return store.as_retriever(search_kwargs={"k": 5}), questions


def test_resp_answers_over_chroma_with_the_embedded_model(hotpot_retriever, lc_chat):
    retriever, questions = hotpot_retriever
    graph = build_resp_graph(lc_chat, retriever, config=ReSPConfig(max_iterations=2))
    results = [graph.invoke({"question": q.question}) for q in questions[:2]]
    for state in results:
        assert 1 <= state["iterations"] <= 2
        assert state["answer"] and state["global_memory"]
        assert all(len(ids) == 5 for ids in state["retrieved"])
        assert state["stop_reason"] in {"sufficient", "max_iterations", "repeated_sub_question"}
    # Retrieval over the real store finds gold passages in the first round.
    hits = [bool(set(q.supporting) & set(s["retrieved"][0])) for s, q in zip(results, questions, strict=True)]
    assert sum(hits) >= 1


def test_checkpointed_run_is_interrupted_and_resumed(hotpot_retriever, lc_chat):
    retriever, questions = hotpot_retriever
    graph = build_resp_graph(lc_chat, retriever, checkpointer=InMemorySaver(), interrupt_before=["generate"])
    config = {"configurable": {"thread_id": "resume-me"}}
    paused = graph.invoke({"question": questions[1].question}, config)
    assert "answer" not in paused and graph.get_state(config).next == ("generate",)
    final = graph.invoke(None, config)
    assert final["answer"] and final["global_memory"] == paused["global_memory"]
