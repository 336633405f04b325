"""K²RAG with Microsoft GraphRAG as its knowledge graph: a real GraphRAG 3.x build and local
search against llama.cpp's OpenAI-compatible server on 127.0.0.1 backed by the embedded default
model, real MiniLM embeddings and LanceDB (HotpotQA smoke: one gold passage of the first question,
Neil Peart's, as one GraphRAG build with the 1.5B model takes minutes per passage on two slow cores).
The fast 0.5B model extracts no relationships, so this runs the 1.5B default."""

from __future__ import annotations

import pytest

pytest.importorskip("graphrag", reason="the 'graphrag' extra is not installed")

from llama_index_k2rag import K2RAGIndex
from llama_index_k2rag.graphrag_kg import GraphRAGKG
from multihop_rag.backends import llama_index_llm
from multihop_rag.corpus import load_dataset

pytestmark = pytest.mark.slow

FAST = {"extract_graph": {"max_gleanings": 0}}
"""GraphRAG's one gleaning turn doubles the extraction time on two cores; the build is otherwise default."""


@pytest.fixture(scope="module")
def built(tmp_path_factory, li_embed):
    passages, questions = load_dataset("hotpotqa", "smoke")
    question = questions[0]
    docs = [p.to_llama_index() for p in passages if p.id in set(question.supporting) and p.title == "Neil Peart"]
    assert len(docs) == 1
    llm = llama_index_llm("llamacpp:default", max_tokens=512)
    root = tmp_path_factory.mktemp("graphrag")
    index = K2RAGIndex.from_documents(
        docs, llm=llm, embed_model=li_embed, summarizer="none", kg="graphrag", kg_options={"root": root, "settings": FAST},
        show_progress=False, cache=tmp_path_factory.mktemp("cache") / "llm.sqlite",
    )  # fmt: skip
    yield llm, index, question, docs
    index.kg.server.stop()


def _build_again(built, li_embed):
    llm, index, _, docs = built
    return K2RAGIndex.from_documents(
        docs, llm=llm, embed_model=li_embed, summarizer="none", kg="graphrag", kg_options={"root": index.kg.root, "settings": FAST},
        show_progress=False,
    )  # fmt: skip


def test_graphrag_extracts_entities_and_relationships(built):
    _, index, _, _ = built
    kg, stats = index.kg, index.stats()
    assert isinstance(kg, GraphRAGKG) and kg.server is not None  # llama.cpp's server for the embedded model
    tables = kg.tables()
    assert stats["kg"] == "graphrag" and stats["kg_chunks"] == 1
    assert kg.entities() >= 2 and stats["kg_triples"] == kg.triples() >= 1
    titles = " ".join(tables["entities"]["title"]).upper()
    assert "PEART" in titles or "RUSH" in titles
    assert len(tables["text_units"]) == stats["kg_chunks"]  # GraphRAG kept K²RAG's 300-token KG chunks whole
    assert len(tables["community_reports"]) >= 1


def test_rebuilding_resumes_from_graphrags_cache(built, li_embed):
    kg = built[1].kg
    cached = sorted(p.relative_to(kg.root) for p in (kg.root / "cache").rglob("*") if p.is_file())
    assert cached, "GraphRAG cached no LLM calls"
    again = _build_again(built, li_embed)
    assert sorted(p.relative_to(kg.root) for p in (kg.root / "cache").rglob("*") if p.is_file()) == cached
    assert again.kg.entities() == kg.entities()
    again.kg.server.stop()


def test_k2rag_index_with_graphrag_persists_reloads_and_answers_by_local_search(built, li_embed, tmp_path):
    """One local-search query (a minute and a half with the 1.5B model), on the reloaded index."""
    llm, index, question, _ = built
    index.persist(tmp_path / "index")
    reloaded = K2RAGIndex.from_persist_dir(tmp_path / "index", llm=llm, embed_model=li_embed)
    assert isinstance(reloaded.kg, GraphRAGKG) and reloaded.kg.server is not None
    assert reloaded.kg.root == tmp_path / "index" / "kg" and reloaded.kg.triples() == index.kg.triples()
    response = reloaded.as_query_engine("kg").query(question.question)
    local_search = response.metadata["context"]  # GraphRAG's local-search answer, the reader's context
    assert local_search.strip() and "error" not in local_search.lower()[:40]
    assert str(response).strip()
    reloaded.kg.server.stop()
