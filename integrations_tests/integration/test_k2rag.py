"""K²RAG end to end with the embedded llama.cpp model, real MiniLM embeddings, a persistent Chroma
collection, bm25s and LlamaIndex's property graph (HotpotQA smoke, the first question's two
supporting passages and four of its distractors)."""

from __future__ import annotations

import pytest

from integrations_tests.integration.conftest import first_question_docs
from llama_index_k2rag import K2RAGConfig, K2RAGIndex
from multihop_rag.stores import chroma_vector_store

N_PASSAGES = 6
"""Enough for retrieval to have to find the gold pair; all ten candidates take twice as long to
summarize and extract on two slow cores."""


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory, li_llm, li_embed):
    docs, question = first_question_docs("hotpotqa", N_PASSAGES)
    folder = tmp_path_factory.mktemp("k2rag")
    cache = folder / "llm.sqlite"
    index = K2RAGIndex.from_documents(
        docs,
        llm=li_llm,
        embed_model=li_embed,
        vector_store=chroma_vector_store(folder / "chroma", "k2rag"),
        config=K2RAGConfig(min_summary_tokens=100),
        show_progress=False,
        cache=cache,
    )
    index.persist(folder)
    return index, folder, cache, docs, [question]


def test_build_summarizes_indexes_and_extracts_a_graph(hotpot):
    index, _, _, docs, _ = hotpot
    stats = index.stats()
    assert stats["documents"] == len(docs) == N_PASSAGES
    assert stats["chunks"] >= len(docs) and stats["kg_chunks"] >= len(docs)
    assert stats["kg_triples"] > 0
    assert stats["tokens_after"] <= stats["tokens_before"]
    assert stats["llm"]["calls"] + stats["llm"]["cache_hits"] >= stats["kg_chunks"]


def test_k2rag_query_from_a_reloaded_index(hotpot, li_llm, li_embed):
    _, folder, cache, _, questions = hotpot
    index = K2RAGIndex.from_persist_dir(folder, llm=li_llm, embed_model=li_embed, cache=cache)
    response = index.as_query_engine().query(questions[0].question)
    meta = response.metadata
    assert str(response).strip()
    assert meta["kg_answer"] and len(meta["sub_questions"]) == len(meta["sub_answers"]) >= 1
    assert response.source_nodes and all(0.0 <= (h.score or 0.0) <= 1.0 for h in response.source_nodes)


def test_naive_pipelines_retrieve_gold_passages(hotpot, li_llm):
    index, _, _, docs, questions = hotpot
    titles = {d.doc_id: d.metadata["title"] for d in docs}
    for pipeline in ("semantic", "keyword", "hybrid"):
        response = index.as_query_engine(pipeline).query(questions[0].question)
        assert str(response).strip()
        found = {h.node.metadata["doc_id"] for h in response.source_nodes}
        assert set(questions[0].supporting) & found, (pipeline, [titles[i] for i in found])


def test_rebuild_resumes_from_the_llm_cache(hotpot, li_llm, li_embed):
    index, folder, cache, docs, _ = hotpot
    again = K2RAGIndex.from_documents(
        docs,
        llm=li_llm,
        embed_model=li_embed,
        vector_store=chroma_vector_store(folder / "chroma", "k2rag"),
        config=K2RAGConfig(min_summary_tokens=100),
        show_progress=False,
        cache=cache,
    )
    assert again.stats()["llm"]["calls"] == 0 and again.stats()["llm"]["cache_hits"] > 0
    assert again.stats()["kg_triples"] == index.stats()["kg_triples"]
