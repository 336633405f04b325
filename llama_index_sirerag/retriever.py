"""SiReRAGRetriever: top-k over the flattened pool of both trees (§4.3), as a LlamaIndex retriever."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store import VectorStoreIndex
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from multihop_rag.frameworks.langchain import LlamaIndexRetriever

__all__ = ["SiReRAGRetriever"]


class SiReRAGRetriever(BaseRetriever):
    """Embedding top-k over the SiReRAG pool ("collapsed" retrieval).

    ``tree`` (``similarity``/``relatedness``) or ``kind`` (``chunk``, ``summary``, ``aggregate``,
    ``proposition``) narrow the pool: ``kind="chunk"`` is plain dense retrieval over the chunks.
    """

    def __init__(
        self,
        index: VectorStoreIndex,
        similarity_top_k: int = 20,
        tree: str | None = None,
        kind: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._index = index
        self.similarity_top_k = similarity_top_k
        self.tree = tree
        self.kind = kind

    def _inner(self, k: int | None = None) -> BaseRetriever:
        wanted = [MetadataFilter(key=key, value=value) for key, value in (("tree", self.tree), ("kind", self.kind)) if value]
        filters = MetadataFilters(filters=wanted) if wanted else None
        return self._index.as_retriever(similarity_top_k=k or self.similarity_top_k, filters=filters)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._inner().retrieve(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await self._inner().aretrieve(query_bundle)

    def as_retriever(self, similarity_top_k: int | None = None) -> SiReRAGRetriever:
        """A copy returning ``similarity_top_k`` nodes (lets LangChain's ``k`` reach it)."""
        return SiReRAGRetriever(self._index, similarity_top_k or self.similarity_top_k, self.tree, self.kind)

    def as_langchain(self, k: int | None = None) -> LlamaIndexRetriever:
        """This retriever as a LangChain ``BaseRetriever`` (e.g. for ReSP or HiRAG)."""
        return LlamaIndexRetriever(index=self, k=k or self.similarity_top_k)
