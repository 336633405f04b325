"""HiRAG's Retriever + Filter as a plug-in LangChain retriever (§6.5 "Retriever Module as Plug-in")."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr

from langgraph_hirag.config import HiRAGConfig
from langgraph_hirag.corpus import HierarchicalCorpus
from langgraph_hirag.graph import build_hirag_retrieval_graph
from langgraph_hirag.state import HiRAGState

__all__ = ["HiRAGRetriever"]


class HiRAGRetriever(BaseRetriever):
    """For a single-hop question: the one chunk (with its document's profile) that HiRAG's Filter
    verified as answering it, found by hierarchical retrieval with rethink.

    Returns one ``Document`` (``metadata``: ``title``, ``chunk_id``, ``answer``, ``source``,
    ``attempts``) when retrieval or the rewrite path produced an answer, and none when every
    attempt failed or only the model's internal knowledge answered.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: BaseChatModel
    """Chat model for entity extraction, answering and verification."""
    corpus: HierarchicalCorpus
    """The titled corpus to search."""
    config: HiRAGConfig = HiRAGConfig()
    """Thresholds th1-th3, m and the seed (the paper's values by default)."""
    _graph: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        self._graph = build_hirag_retrieval_graph(self.llm, self.corpus, config=self.config)

    @staticmethod
    def _documents(state: HiRAGState) -> list[Document]:
        trace = state["trace"][0]
        if trace["source"] not in ("retrieval", "rewrite"):
            return []
        last = trace["attempts"][-1] if trace["source"] == "retrieval" else None
        chunk_id = last["chunk_id"] if last else next(iter(trace["rewrite_hits"]), "")
        metadata = {
            "title": last["title"] if last else "",
            "chunk_id": chunk_id,
            "answer": trace["answer"],
            "source": trace["source"],
            "attempts": len(trace["attempts"]),
        }
        return [Document(id=metadata["chunk_id"] or None, page_content=state["knowledge"], metadata=metadata)]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        state = self._graph.invoke({"question": query, "current": query}, config={"callbacks": run_manager.get_child()})
        return self._documents(state)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        state = await self._graph.ainvoke(
            {"question": query, "current": query}, config={"callbacks": run_manager.get_child()}
        )
        return self._documents(state)
