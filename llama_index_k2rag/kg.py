"""Knowledge-graph backends of K²RAG: built from chunks, queried with a question, answering text.

The paper queries Microsoft GraphRAG with the question and uses the text it returns (§3.1.3 step
A, §4.1). :class:`PropertyGraphKG` is the light default: LlamaIndex's property graph index with
an LLM triple extractor (``SimpleLLMPathExtractor``) and its query engine over the graph. Chunks go
in batch after batch: the next batch's triples are extracted (LLM calls) while the graph embeds and
stores the last one (CPU), so a build against a server never leaves its slots idle for the embedding;
the last batches halve down to one round of calls, so the one stored with no call beside it is small.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from llama_index.core import PropertyGraphIndex, StorageContext, load_index_from_storage
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import TRIPLET_SOURCE_KEY, EntityNode, LabelledNode, Triplet
from llama_index.core.indices.property_graph import LLMSynonymRetriever, PGRetriever, SimpleLLMPathExtractor
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import BaseNode, TextNode, TransformComponent
from pydantic import Field, PrivateAttr
from tqdm.auto import tqdm

from llama_index_k2rag.config import EntityLinking, TripleOrder
from llama_index_k2rag.question_entities import QuestionEntityRetriever
from llama_index_k2rag.triples import TripleParser
from multihop_rag.indexing.persistence import write_atomic
from multihop_rag.llm.aio import call_sync, run_sync
from multihop_rag.llm.cache import cached_llm

__all__ = ["KnowledgeGraph", "UpdatableGraph", "PropertyGraphKG", "graph_batches"]

T = TypeVar("T")
log = logging.getLogger(__name__)

SKIPPED_FILE = "skipped_lines.json"
"""Beside the persisted graph: the extractor's lines that were no triple, by reason (a reload reports them too)."""

@runtime_checkable
class KnowledgeGraph(Protocol):
    """What K²RAG needs from a knowledge graph."""

    name: str

    def query(self, question: str) -> str:
        """The graph's answer to ``question``, as text (step A of Figure 8)."""
        ...

    def context(self, question: str) -> str:
        """The graph's evidence for ``question``, as text: the triples it retrieved and their source text."""
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
    """``SimpleLLMPathExtractor`` with ``max_concurrency`` chunks in flight, a bar that moves per chunk, and
    loose triples repaired (:class:`~llama_index_k2rag.triples.TripleParser`).

    Every chunk of a batch is extracted on one event loop (no loop is made per call: an async client's
    connections belong to the loop that opened them), at most ``max_concurrency`` at once; the library's own
    gather shows its bar only at the end.
    """

    max_concurrency: int = Field(default=1, description="Chunks extracted at once.")
    _bar: Any = PrivateAttr(default=None)
    _stopped: threading.Event = PrivateAttr(default_factory=threading.Event)

    def __init__(self, *, max_concurrency: int = 1, **kwargs: Any) -> None:
        kwargs.setdefault("parse_fn", TripleParser())  # LlamaIndex's own drops a fifth of a small model's lines
        super().__init__(**kwargs)
        self.max_concurrency = max_concurrency

    def report_to(self, bar: Any) -> None:
        """Move ``bar`` (a tqdm bar, or None) by one per extracted chunk."""
        self._bar = bar

    def stop(self, stopped: bool = True) -> None:
        """Start no further chunk (those in flight finish) until called with False: a build that failed
        elsewhere does not wait for a whole batch extracted beside it."""
        self._stopped.set() if stopped else self._stopped.clear()

    async def acall(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        gate = asyncio.Semaphore(max(1, self.max_concurrency))

        async def one(node: BaseNode) -> BaseNode:
            async with gate:
                if self._stopped.is_set():
                    raise asyncio.CancelledError
                extracted = await self._aextract(node)
            if self._bar is not None:
                self._bar.update()  # here, not in the gatherer: a blocking local model runs every chunk before it wakes
            return extracted

        tasks = [asyncio.ensure_future(one(node)) for node in nodes]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()  # chunks not extracted yet are not started (a failed call, Ctrl-C)
            raise


class _GraphStore(SimplePropertyGraphStore):
    """LlamaIndex's in-memory property graph store, whose look-up by id reads those ids' entries: its own reads
    every node of the graph for each id asked (``PropertyGraphIndex`` asks for every id of a batch it
    inserts), so a graph built batch by batch cost O(graph × batch) per batch, O(n²) in all. Its triples come
    in one fixed order, :data:`TripleOrder`."""

    triple_order: TripleOrder = "rank"

    def get_triplets(self, entity_names: list[str] | None = None, relation_names: list[str] | None = None,
                     properties: dict[str, Any] | None = None, ids: list[str] | None = None) -> list[Triplet]:
        """LlamaIndex's, ordered: its graph keeps triples in a set, whose order follows the process's string hashing, so
        which triples a question's retrievers kept (the first 30 of ``get_rel_map``) and their order changed from run
        to run. Under 'rank', a triple of the entity asked first comes first (``get_rel_map`` asks for a question's
        entities best match first, then for the objects of their triples in that order); ties, by name."""
        found = super().get_triplets(entity_names=entity_names, relation_names=relation_names,
                                     properties=properties, ids=ids)
        rank: dict[str, int] = {}
        if self.triple_order == "rank":
            for position, name in enumerate(ids or entity_names or []):
                rank.setdefault(name, position)
        last = len(rank)
        return sorted(found, key=lambda t: (min(rank.get(t[0].id, last), rank.get(t[2].id, last)),
                                            t[0].id, t[1].id, t[2].id))

    def get(self, properties: dict[str, Any] | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        if ids and not properties:
            nodes = self.graph.nodes
            return [nodes[i] for i in dict.fromkeys(ids) if i in nodes]
        return super().get(properties=properties, ids=ids)


class _Extracted(TransformComponent):
    """The extractor the ``PropertyGraphIndex`` runs: the chunks come with their triples already extracted
    (:meth:`PropertyGraphKG.add`), so it passes them on."""

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return nodes


class PropertyGraphKG:
    """A LlamaIndex ``PropertyGraphIndex`` built with an LLM path extractor."""

    name = "property"

    def __init__(self, index: PropertyGraphIndex, llm: LLM, extractor: _BoundedPathExtractor | None = None,
                 entity_linking: EntityLinking = "llm", triple_order: TripleOrder = "rank") -> None:
        """``extractor``: how new chunks' triples are extracted (default: up to 10 paths a chunk, one call at a time);
        ``entity_linking``: how a question finds its entities (:data:`EntityLinking`); ``triple_order``: which of their
        triples are kept (:data:`TripleOrder`; a graph store of another kind keeps its own order)."""
        self.index = index
        self.llm = llm
        self.extractor = extractor or _extractor(llm, max_paths_per_chunk=10, max_concurrency=1, stop_reply=True)
        self.entity_linking = entity_linking
        if isinstance(index.property_graph_store, _GraphStore):
            index.property_graph_store.triple_order = triple_order

    @classmethod
    def build(
        cls,
        nodes: Sequence[TextNode],
        llm: LLM,
        embed_model: BaseEmbedding,
        *,
        max_paths_per_chunk: int = 10,
        stop_reply: bool = True,
        max_concurrency: int = 1,
        entity_linking: EntityLinking = "llm",
        triple_order: TripleOrder = "rank",
        show_progress: bool = True,
    ) -> PropertyGraphKG:
        """Extract (subject, relation, object) triples from every chunk with ``llm``, ``max_concurrency`` at once;
        ``stop_reply``: each reply stopped after ``max_paths_per_chunk`` lines (False: read whole, as LlamaIndex does)."""
        # PropertyGraphIndex calls asyncio.run while inserting: off the notebook's running loop
        index = call_sync(PropertyGraphIndex, nodes=[], llm=llm, kg_extractors=[_Extracted()], embed_model=embed_model,
                          property_graph_store=_GraphStore())
        graph = cls(index, llm, _extractor(llm, max_paths_per_chunk, max_concurrency, stop_reply), entity_linking,
                    triple_order)
        graph.add(nodes, show_progress=show_progress)
        return graph

    def add(self, nodes: Sequence[TextNode], show_progress: bool = False) -> None:
        """Extract the triples of new chunks into the graph, batch after batch: with more than one call in flight,
        the next batch is extracted while the last one is embedded and stored."""
        slots, size = self.extractor.max_concurrency, max(32, 8 * self.extractor.max_concurrency)
        batches = graph_batches(list(nodes), size=size, last=slots if slots > 1 else size)  # one at a time: no tail to shrink

        def extract(batch: list[TextNode]) -> list[BaseNode]:
            return list(run_sync(self.extractor.acall(batch)))

        skipped_before = self.skipped_lines()
        with tqdm(total=len(nodes), desc="K2RAG KG triples", disable=not show_progress) as bar:
            self.extractor.report_to(bar)
            self.extractor.stop(False)
            try:
                if self.extractor.max_concurrency <= 1:  # the in-process model: CPU work beside it only slows it
                    for batch in batches:
                        call_sync(self.index.insert_nodes, extract(batch))
                    return
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="multihop-rag-kg") as side:
                    pending = side.submit(extract, batches[0]) if batches else None
                    try:
                        for following in [*batches[1:], None]:
                            assert pending is not None
                            extracted = pending.result()
                            pending = side.submit(extract, following) if following is not None else None
                            call_sync(self.index.insert_nodes, extracted)
                    except BaseException:
                        self.extractor.stop()  # the batch beside: only its calls in flight finish
                        raise
            finally:
                self.extractor.report_to(None)
                _warn_skipped(skipped_before, self.skipped_lines())

    def skipped_lines(self) -> dict[str, int]:
        """Lines of the extractor's replies that were no triple, by reason, over every build and update."""
        parser = self.extractor.parse_fn
        return dict(parser.skipped) if isinstance(parser, TripleParser) else {}

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
        return str(RetrieverQueryEngine.from_args(self._retriever(), llm=self.llm).query(question))

    def context(self, question: str) -> str:
        """What :meth:`query`'s answer is written from: each retrieved path group with its chunk's text."""
        hits = self._retriever().retrieve(question)
        return "\n\n".join(hit.node.get_content() for hit in hits)

    def _retriever(self) -> PGRetriever:
        """LlamaIndex's retriever over the graph (LLM synonyms and embedding-nearest entities), its synonym step
        replaced or joined as ``entity_linking`` says."""
        default = self.index.as_retriever(include_text=True)
        assert isinstance(default, PGRetriever)
        if self.entity_linking == "llm":
            return default
        named = QuestionEntityRetriever(self.index.property_graph_store, include_text=True)
        kept = [r for r in default.sub_retrievers if self.entity_linking == "both" or not isinstance(r, LLMSynonymRetriever)]
        return PGRetriever([named, *kept], use_async=default.use_async)

    def persist(self, folder: str | Path) -> None:
        self.index.storage_context.persist(persist_dir=str(folder))
        write_atomic(Path(folder) / SKIPPED_FILE, json.dumps(self.skipped_lines()))

    @classmethod
    def load(cls, folder: str | Path, llm: LLM, embed_model: BaseEmbedding, *, max_paths_per_chunk: int = 10,
             stop_reply: bool = True, max_concurrency: int = 1, entity_linking: EntityLinking = "llm",
             triple_order: TripleOrder = "rank") -> PropertyGraphKG:
        storage = StorageContext.from_defaults(persist_dir=str(folder), property_graph_store=_GraphStore.from_persist_dir(str(folder)))
        index = load_index_from_storage(storage, llm=llm, embed_model=embed_model, kg_extractors=[_Extracted()])
        if not isinstance(index, PropertyGraphIndex):
            raise TypeError(f"{folder} holds a {type(index).__name__}, not a property graph")
        extractor = _extractor(llm, max_paths_per_chunk, max_concurrency, stop_reply)
        skipped = Path(folder) / SKIPPED_FILE
        if skipped.exists() and isinstance(extractor.parse_fn, TripleParser):
            extractor.parse_fn.skipped.update(json.loads(skipped.read_text()))
        return cls(index, llm, extractor, entity_linking, triple_order)


def graph_batches(nodes: list[T], *, size: int, last: int) -> list[list[T]]:
    """``nodes`` in batches of ``size`` whose tail halves down to ``last``: each batch is stored while the next is
    extracted, so the one stored with no call beside it, the last, is small (one round of calls)."""
    batches, rest = [], nodes
    while rest:
        n = size if len(rest) > 2 * size else max(last, len(rest) // 2)
        batches.append(rest[:n])
        rest = rest[n:]
    return batches


def _extractor(llm: LLM, max_paths_per_chunk: int, max_concurrency: int, stop_reply: bool) -> _BoundedPathExtractor:
    """The prompt asks for up to ``max_paths_per_chunk`` triples, one a line; with ``stop_reply`` the reply is stopped
    after as many lines (a small model writes on, the 1.5B up to 39 lines), else every line that parses is kept."""
    lines = cached_llm(llm, None).with_max_lines(max_paths_per_chunk if stop_reply else None)
    return _BoundedPathExtractor(llm=lines, max_paths_per_chunk=max_paths_per_chunk, max_concurrency=max_concurrency)


def _warn_skipped(before: dict[str, int], after: dict[str, int]) -> None:
    new = sum(after.values()) - sum(before.values())
    if new:
        reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(after.items()))
        lines = "1 extracted line was not a triple" if new == 1 else f"{new} extracted lines were not triples"
        log.warning("K2RAG KG: %s; skipped (since the graph was made: %s)", lines, reasons)
