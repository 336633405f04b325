"""SiReRAG as a LlamaIndex index on real models: the index built in the session's ``built`` fixture
(Chroma in its folder) used the way a LlamaIndex app uses an index, the same build into the
in-memory ``SimpleVectorStore``, and LangChain's standard retriever suite on its pool."""

from __future__ import annotations

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests
from llama_index.core.vector_stores import SimpleVectorStore

from integrations_tests.integration.conftest import SETTINGS
from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex


@pytest.fixture(scope="session")
def sirerag(built):
    results, corpus, extra, question = built
    return results["sirerag"]["index"].index, corpus + extra, question, results["sirerag"]["build"].calls


def test_llama_index_idioms_on_the_built_index(sirerag):
    index, corpus, question, _ = sirerag
    assert set(index.ref_doc_info) == {p.id for p in corpus}
    hits = index.as_retriever(similarity_top_k=8).retrieve(question.question)
    assert len(hits) == min(8, len(index.nodes)) and {h.node.metadata["tree"] for h in hits} <= {"similarity", "relatedness"}
    assert str(index.as_query_engine(similarity_top_k=5).query(question.question)).strip()
    chat = index.as_chat_engine(chat_mode="condense_plus_context", similarity_top_k=3)
    assert str(chat.chat(question.question)).strip()


def test_the_same_build_into_simple_vector_store_gives_the_same_pool(sirerag, models):
    """Any LlamaIndex vector store holds the pool: the in-memory one, built from the same calls (cached)."""
    index, corpus, _, build_calls = sirerag
    before = models.usage()
    again = SiReRAGIndex.from_documents([p.to_llama_index() for p in corpus], llm=models.llm, embed_model=models.embed,
                                        config=SiReRAGConfig(**SETTINGS["sirerag"]), vector_store=SimpleVectorStore(),
                                        show_progress=False)
    assert (models.usage() - before).calls < build_calls  # the propositions come from the cache
    assert type(again.vector_store).__name__ == "SimpleVectorStore"
    chunks = {n for n, node in index.nodes.items() if node.kind == "chunk"}
    assert chunks == {n for n, node in again.nodes.items() if node.kind == "chunk"}


_INDEX: dict = {}


class TestSiReRAGLangChainRetriever(RetrieversIntegrationTests):
    """LangChain's standard retriever suite on the pool (through the LangChain adapter)."""

    @pytest.fixture(autouse=True)
    def _index(self, sirerag):
        _INDEX["index"] = sirerag[0]

    @property
    def retriever_constructor(self):
        from multihop_rag.frameworks.langchain import LlamaIndexRetriever

        class PoolRetriever(LlamaIndexRetriever):
            def __init__(self, **kwargs):
                super().__init__(index=_INDEX["index"], **kwargs)

        return PoolRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "Which band was the drummer a member of?"
