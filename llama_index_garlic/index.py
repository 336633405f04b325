"""GarlicIndex: GARLIC's summary graph (§3.1) and its LLM-controlled search (§3.2), as a LlamaIndex
``BaseIndex``.

The graph's nodes and their vectors live in the storage context's vector store (any LlamaIndex
store: ``SimpleVectorStore`` in memory by default, Chroma for the command line), its edges and
levels in ``garlic.json``. Updates (``insert``, ``delete_ref_doc``, ``update_ref_doc``,
``refresh_ref_docs``) summarize again only the batches that lost a node or hold a new one, and
their ancestors (:func:`~llama_index_garlic.build.build_graph`). Summaries run ``max_concurrency``
at once through the index's own LLM-call cache; with more than one, a level's batches start before
the level below is finished.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import StorageContext
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import BaseNode, Document, TextNode
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_garlic.attention import AttentionModel, ReplayedEdges, load_attention_model
from llama_index_garlic.build import BuildReport, build_graph
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.graph import GraphNode, SummaryGraph
from llama_index_garlic.query_engine import GarlicQueryEngine, GarlicRetriever
from llama_index_garlic.search import LLMController, SearchResult, graph_search
from multihop_rag.errors import StoreError
from multihop_rag.frameworks.llama_index import DocumentIndex, document_hash, open_folder, reload_vector_store
from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine
from multihop_rag.indexing.persistence import prepare_folder, read_manifest, write_atomic, write_manifest
from multihop_rag.llm.cache import LLMCache, cached_llm
from multihop_rag.llm.structured import StructuredStats
from multihop_rag.llm.usage import Stages, Usage
from multihop_rag.option_comparisons import comparison_kinds
from multihop_rag.serving.profile import default_concurrency
from multihop_rag.stores import batched, chroma_vector_store, delete_ids, ensure_empty, stored_embeddings, stored_ids

__all__ = ["GarlicIndex", "GarlicStruct"]

FORMAT_VERSION = 2
CACHE_FILE = "llm_calls.sqlite"


@dataclass
class GarlicStruct(IndexStruct):
    """The index's entry in the storage context; its graph is written beside it (``garlic.json``)."""

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return "garlic"


class GarlicIndex(DocumentIndex[GarlicStruct]):
    """A GARLIC summary graph with the models that search it.

    ``attention_model`` (a :class:`TransformersAttention`, a bundled alias, a ``.gguf`` file or a
    Hugging Face directory) weights the edges and steers the search by attention; without one,
    edges and search use embedding similarity and the LLM still decides when to stop. The LLM
    (Ollama, llama.cpp, any LlamaIndex LLM) writes the summaries, the Yes/No and the answer.
    """

    index_struct_cls = GarlicStruct

    def __init__(
        self,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | str | Path | None = None,
        config: GarlicConfig | None = None,
        storage_context: StorageContext | None = None,
        index_struct: GarlicStruct | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> None:
        self.config = config or GarlicConfig()
        self.llm = cached_llm(llm, cache)
        self.embed_model = embed_model
        self.attention_model = load_attention_model(attention_model)
        self.max_concurrency = max_concurrency or default_concurrency(self.llm)
        self.graph: SummaryGraph | None = None
        self.documents: dict[str, dict[str, Any]] = {}
        """Document id -> ``{"hash", "title", "text"}``."""
        self.structured = StructuredStats()
        """Yes/No answers read first try or not at all, over every search so far."""
        self.report = BuildReport()
        self.last_update: dict[str, Any] = {}
        self._stages = Stages(lambda: self.llm.usage)
        self._llm_before = Usage()
        super().__init__(index_struct=index_struct or GarlicStruct(), storage_context=storage_context,
                         show_progress=show_progress, **kwargs)

    @property
    def mode(self) -> str:
        """``attention`` when an attention model steers the search, else ``embedding``."""
        return "attention" if self.attention_model is not None and self.config.attention_search else "embedding"

    @property
    def vector_store(self) -> BasePydanticVectorStore:
        return self.storage_context.vector_store

    # ---- building ---------------------------------------------------------------------------------

    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | str | Path | None = None,
        n_s: int | None = None,
        config: GarlicConfig | None = None,
        storage_context: StorageContext | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        persist_dir: str | Path | None = None,
        overwrite: bool = False,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> GarlicIndex:
        """Build the summary graph. ``n_s`` overrides ``config.n_s`` (default min(8192, context window)).
        ``vector_store`` holds the nodes (it must be empty unless ``overwrite=True``); ``persist_dir``:
        persist there with the LLM-call cache, so a killed build resumes; ``cache``: another cache file."""
        if not documents:
            raise ValueError("GarlicIndex needs at least one document")
        config = config or GarlicConfig()
        if n_s is not None:
            config = config.model_copy(update={"n_s": n_s})
        own_store = vector_store is None and storage_context is None
        if persist_dir is not None:
            prepare_folder(persist_dir, "garlic", FORMAT_VERSION, overwrite=overwrite, config=config.model_dump())
            cache = cache if cache is not None else Path(persist_dir) / CACHE_FILE
            if own_store:
                vector_store = chroma_vector_store(Path(persist_dir) / "chroma", "garlic")
        storage_context = storage_context or StorageContext.from_defaults(vector_store=vector_store)
        ensure_empty(storage_context.vector_store, overwrite=overwrite or (own_store and persist_dir is not None),
                     where=str(persist_dir or "the storage context"))
        index = cls(llm=llm, embed_model=embed_model, attention_model=attention_model, config=config,
                    storage_context=storage_context, cache=cache, max_concurrency=max_concurrency,
                    show_progress=show_progress, **kwargs)
        index.store_given = not own_store
        index._change(add=list(documents), remove=[])
        if persist_dir is not None:
            index.persist(persist_dir)
        return index

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **build_kwargs: Any) -> GarlicStruct:
        self._change(add=self._documents_of(nodes), remove=[])
        return self.index_struct

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        started, before = time.perf_counter(), self.llm.usage
        forward = self.attention_model.forward_tokens if self.attention_model is not None else 0
        batches_before = (self.report.rewritten_batches, self.report.reused_batches)
        for doc_id in remove:
            self.documents.pop(doc_id, None)
        for doc in add:
            self.documents[doc.doc_id] = {"hash": document_hash(doc), "title": str(doc.metadata.get("title", "")), "text": doc.text,
                                          "metadata": {k: v for k, v in doc.metadata.items() if isinstance(v, (str, int, float, bool))}}
        with self._stages.stage("graph"):
            if not self.documents:
                self.graph = None
            else:
                # A document packed in a chunk with a removed or changed one is chunked again: it must be at hand.
                everything = [Document(id_=d, text=i["text"], metadata=i["metadata"]) for d, i in self.documents.items()]
                again = {d.doc_id for d in add} | self._packed_with(remove)
                self.graph = build_graph(
                    [d for d in everything if self.graph is None or d.doc_id in again],
                    llm=self.llm, embed_model=self.embed_model, attention=self._edges_model(), config=self.config,
                    max_concurrency=self.max_concurrency, show_progress=self._show_progress, report=self.report,
                    previous=self.graph, dropped=list(remove),
                )
        with self._stages.stage("vector_store"):
            self._sync()
        spent = self.llm.usage - before
        self.last_update = {
            "added": [d.doc_id for d in add], "removed": list(remove), "llm_calls": spent.calls, "cache_hits": spent.cache_hits,
            "batches_rewritten": self.report.rewritten_batches - batches_before[0],
            "batches_kept": self.report.reused_batches - batches_before[1],
            "attention_forward_tokens": (self.attention_model.forward_tokens - forward) if self.attention_model is not None else 0,
            "seconds": round(time.perf_counter() - started, 1),
        }
        return self.last_update

    def _edges_model(self) -> AttentionModel | None:
        """The attention model, its edges replayed from the LLM-call cache when there is one."""
        if self.attention_model is None or self.llm.cache is None:
            return self.attention_model
        return ReplayedEdges(self.attention_model, self.llm.cache)

    def _packed_with(self, removed: Sequence[str]) -> set[str]:
        """The documents sharing a level-1 chunk with a removed one (they are chunked again): one pass over the chunks."""
        gone = set(removed)
        chunks = self.graph.levels.get(1, []) if self.graph is not None else []
        return {d for c in chunks if gone.intersection(c.doc_ids) for d in c.doc_ids}

    def _sync(self) -> None:
        """Make the vector store hold exactly the graph's nodes (with their vectors)."""
        present = stored_ids(self.vector_store)
        nodes = {n.id: (i, n) for i, n in enumerate(self.graph.nodes)} if self.graph is not None else {}
        delete_ids(self.vector_store, present - set(nodes))
        new = [(i, n) for nid, (i, n) in nodes.items() if nid not in present]
        for part in batched(new, 256):
            self.vector_store.add([self._text_node(i, n) for i, n in part])

    def _text_node(self, position: int, node: GraphNode) -> TextNode:
        assert self.graph is not None
        metadata = {"level": node.level, "doc_ids": ",".join(node.doc_ids)}
        return TextNode(id_=node.id, text=node.text, embedding=self.graph.embeddings[position].tolist(), metadata=metadata,
                        excluded_llm_metadata_keys=list(metadata), excluded_embed_metadata_keys=list(metadata))

    # ---- updates (DocumentIndex, and the nodes a document stands on) ---------------------------------

    def delete_nodes(self, node_ids: list[str], delete_from_docstore: bool = False, **delete_kwargs: Any) -> None:
        """Remove the documents these nodes stand for, in one update (see :meth:`documents_of_nodes`)."""
        self._update(add=[], remove=self.documents_of_nodes(node_ids))

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        self.delete_nodes([node_id])

    def documents_of_nodes(self, node_ids: Sequence[str]) -> list[str]:
        """The documents ``node_ids`` stand for: a chunk of one document stands for it; a chunk packing several
        short documents, or a summary, stands for none alone, and is accepted only beside a node naming one of
        its documents (it is then rebuilt without it). Any other node raises, before anything is deleted."""
        graph = self.graph
        unknown = [n for n in node_ids if graph is None or n not in graph.position]
        if unknown or graph is None:
            raise KeyError(f"{unknown[0] if unknown else node_ids[0]!r} is not a node of this index")
        owners = {n: list(graph.node(n).doc_ids) for n in node_ids}
        chosen = list(dict.fromkeys(d for n, docs in owners.items() if graph.node(n).level == 1 and len(docs) == 1
                                    for d in docs))
        for node_id, docs in owners.items():
            if not set(docs) & set(chosen):
                shown = ", ".join(docs[:5]) + (f" and {len(docs) - 5} more" if len(docs) > 5 else "")
                raise ValueError(
                    f"node {node_id!r} holds text of {len(docs)} documents ({shown}): GARLIC packs short documents into one "
                    "chunk and summarizes many in one node, so it stands for no single document; delete documents with "
                    "delete_ref_doc(doc_id)"
                )
        return chosen

    @property
    def ref_doc_info(self) -> dict[str, RefDocInfo]:
        chunks: dict[str, list[str]] = {}
        for node in self.graph.levels.get(1, []) if self.graph is not None else []:
            for doc_id in node.doc_ids:
                chunks.setdefault(doc_id, []).append(node.id)
        return {d: RefDocInfo(node_ids=chunks.get(d, []), metadata={"title": i["title"]}) for d, i in self.documents.items()}

    # ---- querying ---------------------------------------------------------------------------------

    def search(self, question: str, *, answer: bool = True, stop_patience: int | None = None) -> SearchResult:
        """One Dynamic Graph Search (and, with ``answer``, the answer)."""
        if self.graph is None:
            raise ValueError("the index holds no document")
        config = self.config
        return graph_search(
            self.graph,
            question,
            query_embedding=self.embed_model.get_query_embedding(question),
            controller=LLMController(
                self.llm, self.structured, short_answer=config.short_answer, yes_threshold=config.yes_threshold
            ),
            attention=self.attention_model,
            stop_patience=stop_patience or config.stop_patience,
            budget=config.search_budget(self.llm.metadata.context_window),
            max_steps=config.max_steps,
            attention_search=config.attention_search,
            embedding_search=config.embedding_search,
            kv_cache=config.kv_cache,
            dynamic_progress_control=config.dynamic_progress_control,
            fixed_nodes=config.fixed_nodes,
            start_nodes=config.start_nodes,
            start_from=config.start_from,
            ask_after_chunk=config.ask_after_chunk,
            answer=answer,
        )

    def as_retriever(self, stop_patience: int | None = None, **kwargs: Any) -> GarlicRetriever:
        """The visited nodes of a search, in visit order."""
        return GarlicRetriever(self, stop_patience=stop_patience, **kwargs)

    def as_query_engine(self, stop_patience: int | None = None, **kwargs: Any) -> BaseQueryEngine:  # type: ignore[override]
        """Search and answer; ``stop_patience`` (p) defaults to the config's (1, as in the paper). With the config's
        ``compare_years`` or ``compare_quantities``, those comparisons decided by the values the visited nodes give
        (:class:`~multihop_rag.frameworks.llama_index_comparisons.ComparisonsDecidedQueryEngine`)."""
        engine = GarlicQueryEngine(index=self, stop_patience=stop_patience, **kwargs)
        kinds = comparison_kinds(years=self.config.compare_years, quantities=self.config.compare_quantities)
        return ComparisonsDecidedQueryEngine(engine=engine, llm=self.llm, kinds=kinds) if kinds else engine

    def stats(self) -> dict[str, Any]:
        """Nodes per level, edges, batches, skipped batches, calls and tokens by stage, the last update, the cache."""
        graph, report = self.graph, self.report
        return {
            "documents": len(self.documents),
            "nodes": len(graph.nodes) if graph else 0,
            "pool_size": len(graph.nodes) if graph else 0,
            "nodes_per_level": {str(k): len(v) for k, v in graph.levels.items()} if graph else {},
            "edges": sum(map(len, graph.edges.values())) if graph else 0,
            "edge_source": graph.edge_source if graph else None,
            "attention_model": self.attention_model.name if self.attention_model is not None else None,
            "mode": self.mode,
            "n_s": self.config.window(self.llm.metadata.context_window),
            "batches_per_level": {str(k): v for k, v in report.batches.items()},
            "skipped_batches": report.skipped_batches,
            "retried_replies": report.retried_replies,
            "unbulleted_replies": report.unbulleted_replies,
            "truncated_replies": report.truncated_replies,
            "embedding_edge_batches": report.embedding_edge_batches,
            "alignment_failures": report.alignment_failures,
            "attention_seconds": round(report.seconds.get("attention", 0.0), 2),
            "rewritten_batches": report.rewritten_batches,
            "llm": (self.llm.usage + self._llm_before).as_dict(),
            "stages": self._stages.figures,
            "last_update": self.last_update,
            "cache": self.llm.cache.describe() if self.llm.cache is not None else None,
        }

    # ---- persistence ------------------------------------------------------------------------------

    def persist(self, persist_dir: str | Path) -> None:
        """Write the storage context, the graph (nodes, edges; the vectors are in the vector store), the
        documents, config, statistics and the attention model's name (it weighted the edges; a reload
        checks it) to ``persist_dir``."""
        folder = Path(persist_dir)
        self.persist_folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.storage_context.persist(persist_dir=str(folder))
        graph = self.graph
        payload = {
            "nodes": [asdict(n) for n in graph.nodes] if graph else [],
            "edges": graph.edges if graph else {},
            "edge_source": graph.edge_source if graph else None,
            "documents": self.documents,
            "report": {f.name: getattr(self.report, f.name) for f in fields(self.report) if not f.name.startswith("_")},
            "stages": self._stages.figures,
            "last_update": self.last_update,
            "llm": (self.llm.usage + self._llm_before).as_dict(),
        }
        write_atomic(folder / "garlic.json", json.dumps(payload))
        attention = self.attention_model.name if self.attention_model is not None else None
        write_manifest(folder, "garlic", FORMAT_VERSION, status="done", config=self.config.model_dump(),
                       store_outside=self.store_outside,
                       attention_model=attention, vector_store=type(self.vector_store).__name__, index_id=self.index_id,
                       documents=len(self.documents), nodes=len(graph.nodes) if graph else 0)

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | str | Path | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
    ) -> GarlicIndex:
        """Reload an index written by :meth:`persist`. The attention model that weighted its edges
        steers the search; without it the index runs in embedding mode (a warning says so), and a
        different one is refused (its attention would not match the edges)."""
        folder = open_folder(persist_dir, vector_store)
        manifest = read_manifest(folder, "garlic", FORMAT_VERSION)
        attention = load_attention_model(attention_model)
        built_with = manifest.get("attention_model")
        if attention is not None and built_with is not None and attention.name != built_with:
            raise ValueError(
                f"{folder}: its edges were weighted by the attention of {built_with!r}, not {attention.name!r}; "
                "load it with that model, with none (embedding mode), or rebuild"
            )
        if attention is None and built_with is not None:
            warnings.warn(
                f"{folder} was built with the attention model {built_with!r}; without it this index now runs in "
                "embedding mode (updates weight new edges by embedding similarity, and the search reads no attention)",
                stacklevel=2,
            )
        storage = StorageContext.from_defaults(
            persist_dir=str(folder), vector_store=reload_vector_store(folder, manifest, "garlic", vector_store))
        settings = {k: v for k, v in manifest["config"].items() if k != "attention_model"}  # recorded before 2026-11-29
        index = cls(llm=llm, embed_model=embed_model, attention_model=attention, config=GarlicConfig(**settings),
                    storage_context=storage, index_struct=GarlicStruct(index_id=manifest["index_id"]),
                    cache=cache if cache is not None else folder / CACHE_FILE, max_concurrency=max_concurrency)
        payload = json.loads((folder / "garlic.json").read_text())
        nodes = [GraphNode(**n) for n in payload["nodes"]]
        present = stored_ids(index.vector_store)
        if present != {n.id for n in nodes}:
            raise StoreError(f"{folder}: the vector store does not hold exactly the graph's {len(nodes)} nodes; rebuild it (--overwrite)")
        vectors = stored_embeddings(index.vector_store, [n.id for n in nodes])
        if nodes:
            embeddings = np.asarray([vectors[n.id] for n in nodes], dtype=np.float64)
            index.graph = SummaryGraph(nodes=nodes, edges=payload["edges"], embeddings=embeddings, edge_source=payload["edge_source"])
        index.documents, index._stages.figures, index.last_update = payload["documents"], payload["stages"], payload["last_update"]
        for name, value in payload["report"].items():
            setattr(index.report, name, {int(k): v for k, v in value.items()} if name == "batches" else value)
        index._llm_before = Usage(**payload["llm"]) - index.llm.usage
        index.persist_folder, index.store_given = folder, vector_store is not None
        return index

    def __repr__(self) -> str:
        return f"GarlicIndex({self.graph!r}, mode={self.mode})"
