"""K²RAG on real models: the session's K²RAG index (LLM summaries, LlamaIndex's property graph,
MiniLM in a persistent Chroma, bm25s), its pipelines, a reload and a rebuild from the call cache."""

from __future__ import annotations

import pytest

from llama_index_k2rag import K2RAGIndex


@pytest.fixture(scope="session")
def k2rag(built):
    results, corpus, extra, question = built
    return results["k2rag"], corpus + extra, question


def test_build_summarizes_indexes_and_extracts_a_graph(k2rag):
    result, corpus, _ = k2rag
    stats = result["index"].stats()
    assert stats["documents"] == len(corpus)
    assert stats["chunks"] >= len(corpus) and stats["kg_chunks"] >= len(corpus)
    assert stats["kg_triples"] > 0
    assert stats["tokens_after"] <= stats["tokens_before"]


def test_every_pipeline_retrieves_a_gold_passage(k2rag):
    result, _, question = k2rag
    index = result["index"].index
    for pipeline in ("semantic", "keyword", "hybrid"):
        response = index.as_query_engine(pipeline).query(question.question)
        assert str(response).strip()
        found = {h.node.metadata["doc_id"] for h in response.source_nodes}
        assert set(question.supporting) & found, pipeline


def test_a_reloaded_index_answers_from_the_graph_and_sub_questions(k2rag, models):
    result, _, question = k2rag
    index = K2RAGIndex.from_persist_dir(result["folder"], llm=models.llm, embed_model=models.embed)
    response = index.as_query_engine().query(question.question)
    meta = response.metadata
    assert str(response).strip() and meta["kg_answer"]
    assert len(meta["sub_questions"]) == len(meta["sub_answers"]) >= 1
    assert response.source_nodes and all(0.0 <= (h.score or 0.0) <= 1.0 for h in response.source_nodes)


def test_a_rebuild_reads_every_call_from_the_cache(k2rag, models, tmp_path):
    result, corpus, _ = k2rag
    before = models.usage()
    again = K2RAGIndex.from_documents([p.to_llama_index() for p in corpus], llm=models.llm, embed_model=models.embed,
                                      config=result["config"], persist_dir=tmp_path / "again", show_progress=False)
    spent = models.usage() - before
    assert spent.calls == 0 and spent.cache_hits > 0
    assert again.stats()["kg_triples"] == result["index"].stats()["kg_triples"]
