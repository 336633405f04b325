"""Knowledge-graph backends of K²RAG: built from chunks, queried with a question, answering text.

The paper queries Microsoft GraphRAG with the question and uses the text it returns (§3.1.3 step
A, §4.1). :class:`PropertyGraphKG` is the light default: LlamaIndex's property graph index with
an LLM triple extractor (``SimpleLLMPathExtractor``) and its query engine over the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from llama_index.core import PropertyGraphIndex, StorageContext, load_index_from_storage
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.property_graph import SimpleLLMPathExtractor
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import BaseNode, TextNode
from tqdm.auto import tqdm

from multihop_rag.aio import call_sync

__all__ = ["KnowledgeGraph", "PropertyGraphKG"]


@runtime_checkable
class KnowledgeGraph(Protocol):
    """What K²RAG needs from a knowledge graph."""

    name: str

    def query(self, question: str) -> str:
        """The graph's answer to ``question``, as text (step A of Figure 8)."""
        ...

    def persist(self, folder: str | Path) -> None: ...


class _PathExtractorWithProgress(SimpleLLMPathExtractor):
    """``SimpleLLMPathExtractor``, one chunk at a time behind a progress bar.

    ``PropertyGraphIndex`` never passes ``show_progress`` to its extractors, and the library's own
    bar (an asyncio gather) only moves when the event loop gets control back, which a blocking
    local LLM never gives it: a build of one call per chunk showed 0/N until the very end.
    """

    async def acall(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        return [await self._aextract(node) for node in tqdm(nodes, desc="K2RAG KG triples")]


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
        show_progress: bool = True,
    ) -> PropertyGraphKG:
        """Extract (subject, relation, object) triples from every chunk with ``llm``."""
        extractor_class = _PathExtractorWithProgress if show_progress else SimpleLLMPathExtractor
        extractor = extractor_class(llm=llm, max_paths_per_chunk=max_paths_per_chunk, num_workers=1)
        # PropertyGraphIndex calls asyncio.run while inserting: off the notebook's running loop
        index = call_sync(
            PropertyGraphIndex,
            nodes=list(nodes),
            llm=llm,
            kg_extractors=[extractor],
            embed_model=embed_model,
            show_progress=show_progress,
        )
        return cls(index, llm)

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
        return cls(index, llm)
