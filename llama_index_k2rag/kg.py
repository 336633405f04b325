"""Knowledge-graph backends of K²RAG: built from chunks, queried with a question, answering text.

The paper queries Microsoft GraphRAG with the question and uses the text it returns (§3.1.3 step
A, §4.1). :class:`PropertyGraphKG` is the light default: LlamaIndex's property graph index with
an LLM triple extractor (``SimpleLLMPathExtractor``) and its query engine over the graph.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from llama_index.core import PropertyGraphIndex, StorageContext, load_index_from_storage
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, EntityNode
from llama_index.core.indices.property_graph import SimpleLLMPathExtractor
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import BaseNode, TextNode
from pydantic import Field
from tqdm.auto import tqdm

from multihop_rag.llm.aio import call_sync

__all__ = ["KnowledgeGraph", "UpdatableGraph", "PropertyGraphKG"]


@runtime_checkable
class KnowledgeGraph(Protocol):
    """What K²RAG needs from a knowledge graph."""

    name: str

    def query(self, question: str) -> str:
        """The graph's answer to ``question``, as text (step A of Figure 8)."""
        ...

    def persist(self, folder: str | Path) -> None: ...


@runtime_checkable
class UpdatableGraph(KnowledgeGraph, Protocol):
    """A knowledge graph that updates at the cost of the change."""

    def add(self, nodes: Sequence[TextNode]) -> None:
        """Extract the triples of new chunks into the graph."""
        ...

    def remove(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks and what was extracted from them."""
        ...


class _BoundedPathExtractor(SimpleLLMPathExtractor):
    """``SimpleLLMPathExtractor`` with ``max_concurrency`` chunks in flight and a bar that moves per chunk.

    Every chunk is extracted on the one event loop ``PropertyGraphIndex`` runs the extractor on (no loop
    is made per call: an async client's connections belong to the loop that opened them), at most
    ``max_concurrency`` at once; the library's own gather shows its bar only at the end, and
    ``PropertyGraphIndex`` never passes ``show_progress`` anyway.
    """

    max_concurrency: int = Field(default=1, description="Chunks extracted at once.")
    show_progress: bool = Field(default=True, description="Show a bar that moves per chunk.")

    def __init__(self, *, max_concurrency: int = 1, show_progress: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_concurrency, self.show_progress = max_concurrency, show_progress

    async def acall(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        gate = asyncio.Semaphore(max(1, self.max_concurrency))
        with tqdm(total=len(nodes), desc="K2RAG KG triples", disable=not self.show_progress) as bar:

            async def one(node: BaseNode) -> BaseNode:
                async with gate:
                    extracted = await self._aextract(node)
                bar.update()  # here, not in the gatherer: a blocking local model runs every chunk before it wakes
                return extracted

            tasks = [asyncio.ensure_future(one(node)) for node in nodes]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()  # chunks not extracted yet are not started (a failed call, Ctrl-C)
                raise


class PropertyGraphKG:
    """A LlamaIndex ``PropertyGraphIndex`` built with an LLM path extractor."""

    name = "property"

    def __init__(self, index: PropertyGraphIndex, llm: LLM) -> None:
        self.index = index
        self.llm = llm

    @classmethod
    def build(
        cls,
        nodes: Sequence[TextNode],
        llm: LLM,
        embed_model: BaseEmbedding,
        *,
        max_paths_per_chunk: int = 10,
        max_concurrency: int = 1,
        show_progress: bool = True,
    ) -> PropertyGraphKG:
        """Extract (subject, relation, object) triples from every chunk with ``llm``, ``max_concurrency`` at once."""
        extractor = _BoundedPathExtractor(
            llm=llm, max_paths_per_chunk=max_paths_per_chunk, max_concurrency=max_concurrency, show_progress=show_progress
        )
        # PropertyGraphIndex calls asyncio.run while inserting: off the notebook's running loop
        index = call_sync(
            PropertyGraphIndex, nodes=list(nodes), llm=llm, kg_extractors=[extractor], embed_model=embed_model,
            show_progress=show_progress,
        )
        return cls(index, llm)

    def add(self, nodes: Sequence[TextNode]) -> None:
        """Extract the triples of new chunks into the graph."""
        call_sync(self.index.insert_nodes, list(nodes))

    def remove(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks, the triples extracted from them, and entities no triple mentions any more."""
        store = self.index.property_graph_store
        graph = getattr(store, "graph", None)
        if graph is None:
            raise NotImplementedError(f"removing chunks from a {type(store).__name__} is not supported: rebuild the index")
        for chunk_id in chunk_ids:
            for subject, relation, obj in store.get_triplets(properties={TRIPLET_SOURCE_KEY: chunk_id}):
                # A relation extracted again from another chunk records that chunk: it stays. The graph's
                # own delete_triplet also deletes both entities, which other triples may still name.
                if relation.properties.get(TRIPLET_SOURCE_KEY) == chunk_id:
                    graph.triplets.discard((subject.id, relation.id, obj.id))
                    graph.delete_relation(relation)
        store.delete(ids=list(chunk_ids))
        mentioned = {node_id for subject, _, obj in graph.triplets for node_id in (subject, obj)}
        orphans = [n for n in store.get() if isinstance(n, EntityNode) and n.id not in mentioned]
        for node in orphans:
            graph.delete_node(node)

    def triples(self) -> int:
        """Relations stored in the graph."""
        graph = getattr(self.index.property_graph_store, "graph", None)
        return len(graph.triplets) if graph is not None else 0

    def query(self, question: str) -> str:
        return str(self.index.as_query_engine(llm=self.llm, include_text=True).query(question))

    def persist(self, folder: str | Path) -> None:
        self.index.storage_context.persist(persist_dir=str(folder))

    @classmethod
    def load(cls, folder: str | Path, llm: LLM, embed_model: BaseEmbedding) -> PropertyGraphKG:
        storage = StorageContext.from_defaults(persist_dir=str(folder))
        index = load_index_from_storage(storage, llm=llm, embed_model=embed_model)
        if not isinstance(index, PropertyGraphIndex):
            raise TypeError(f"{folder} holds a {type(index).__name__}, not a property graph")
        return cls(index, llm)
