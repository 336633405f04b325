"""LlamaIndex front ends of the Dynamic Graph Search: a retriever and a query engine."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import ConfigDict, Field

from llama_index_garlic.graph import SummaryGraph
from llama_index_garlic.search import SearchResult


class Searchable(Protocol):
    """What the front ends need of an index: its graph and a search (a :class:`GarlicIndex`)."""

    graph: SummaryGraph | None

    def search(self, question: str, *, answer: bool = True, stop_patience: int | None = None) -> SearchResult: ...

__all__ = ["Searchable", "GarlicRetriever", "GarlicQueryEngine", "source_nodes"]


def source_nodes(index: Searchable, result: SearchResult) -> list[NodeWithScore]:
    """The visited nodes in visit order; a starting node's score is its query similarity."""
    assert index.graph is not None
    hits = []
    for node_id, score in zip(result.visited, result.scores, strict=True):
        node = index.graph.node(node_id)
        text_node = TextNode(
            id_=node.id,
            text=node.text,
            metadata={"level": node.level, "doc_ids": ",".join(node.doc_ids)},
            excluded_llm_metadata_keys=["level", "doc_ids"],
            excluded_embed_metadata_keys=["level", "doc_ids"],
        )
        hits.append(NodeWithScore(node=text_node, score=score))
    return hits


def _metadata(result: SearchResult) -> dict[str, Any]:
    return {
        "visited": result.visited,
        "replies": result.replies,
        "yes_probabilities": result.yes_probabilities,
        "stop_reason": result.stop_reason,
        "scoring": result.scoring,
        "llm_calls": result.llm_calls,
        "answer_retries": result.answer_retries,
        "complete": result.complete,
        "prompt_tokens": result.prompt_tokens,
        "seconds": round(result.seconds, 3),
        "attention_seconds": round(result.attention_seconds, 3),
    }


class GarlicRetriever(BaseRetriever):
    """Returns the nodes the LLM-controlled search visits (it stops when the LLM says "Yes")."""

    def __init__(self, index: Searchable, stop_patience: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._index = index
        self._stop_patience = stop_patience

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self._index.search(query_bundle.query_str, answer=False, stop_patience=self._stop_patience)
        return source_nodes(self._index, result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)


class GarlicQueryEngine(CustomQueryEngine):
    """Search, then Table 5's second turn. ``response.metadata``: visited ids in order, the
    Yes/No replies, why the search stopped, ``scoring`` (attention+embedding or embedding),
    LLM calls, prompt tokens and seconds."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any = Field(description="The GarlicIndex to search.")
    stop_patience: int | None = Field(None, description="Yes answers before stopping (None: the index config's).")

    def custom_query(self, query_str: str) -> Response:
        result = self.index.search(query_str, answer=True, stop_patience=self.stop_patience)
        return Response(response=result.answer, source_nodes=source_nodes(self.index, result), metadata=_metadata(result))

    async def acustom_query(self, query_str: str) -> Response:
        return await asyncio.to_thread(self.custom_query, query_str)
