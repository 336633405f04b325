"""LlamaIndex indexes as LangChain retrievers, so an index built here can feed a LangGraph method.

``LlamaIndexRetriever(index=any_index, k=5)`` works for any object with LlamaIndex's
``as_retriever(similarity_top_k=...)``: a ``VectorStoreIndex``, a SiReRAG index, ….
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

__all__ = ["LlamaIndexRetriever", "to_langchain_document"]


def to_langchain_document(hit: NodeWithScore) -> Document:
    """A LangChain ``Document`` from a LlamaIndex hit: same id, text, metadata plus ``score``."""
    node = hit.node
    metadata = {k: v for k, v in (node.metadata or {}).items() if isinstance(v, (str, int, float, bool))}
    metadata["score"] = float(hit.score or 0.0)
    return Document(id=node.node_id, page_content=node.get_content(), metadata=metadata)


class LlamaIndexRetriever(BaseRetriever):
    """A LangChain retriever over a LlamaIndex index (top ``k``, overridable per call with ``k=``)."""

    index: Any
    """Anything with ``as_retriever(similarity_top_k=...)`` returning a LlamaIndex retriever."""
    k: int = 5
    """Documents returned per query."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        hits = self.index.as_retriever(similarity_top_k=k or self.k).retrieve(query)
        return [to_langchain_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        hits = await self.index.as_retriever(similarity_top_k=k or self.k).aretrieve(query)
        return [to_langchain_document(h) for h in hits]
