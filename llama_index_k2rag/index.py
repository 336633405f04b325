"""K2RAGIndex: a summarized corpus in a dense store, a sparse store and a knowledge graph (§3.1),
as a LlamaIndex ``BaseIndex``.

Build (``from_documents``) and every update (``insert``, ``delete_ref_doc``, ``update_ref_doc``,
``refresh_ref_docs``) run the same steps on the documents that changed:

1. corpus summarization (Algorithm 1): each document is summarized by the chosen summarizer (the
   LLM by default, window by window for a long one so every token reaches a summary; a local
   seq2seq model; or none); documents shorter than ``min_summary_tokens`` are kept as they are;
2. chunks of S=256, O=20 (eq. 1-2) of the summaries, titled, go to the storage context's vector
   store (dense: Chroma, the paper's, or any LlamaIndex store) and its docstore — embedded as the
   summaries come in, beside the summary calls still in flight; a BM25 index over every chunk
   (sparse, Okapi BM25 via bm25s, no model call) is rebuilt;
3. chunks of S=300, O=100 of the summaries go to the knowledge graph (new chunks extracted,
   removed ones and what was extracted from them deleted).

A chunk is shown with its document's title, to the embedding, to BM25 and to the answering model;
its bookkeeping fields (document id, position) to none of them, before and after a reload. LLM
calls go through the index's own call cache, ``max_concurrency`` at once, so a killed build
resumes without repeating finished summaries or extractions. The vector store holds exactly the
chunks: a build into a store holding another is refused unless ``overwrite=True``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import BaseNode, Document, MetadataMode, TextNode
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.graphrag_kg import GraphRAGKG
from llama_index_k2rag.hybrid import HybridRetriever, SparseStore
from llama_index_k2rag.kg import KnowledgeGraph, PropertyGraphKG, UpdatableGraph
from llama_index_k2rag.query_engine import PIPELINES, K2RAGQueryEngine, NaiveQueryEngine
from llama_index_k2rag.summarizers import Summarizer, make_summarizer
from multihop_rag.errors import CorpusError, IndexFolderError, StoreError
from multihop_rag.frameworks.llama_index import DocumentIndex, document_hash, open_folder, reload_vector_store
from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine
from multihop_rag.indexing.persistence import prepare_folder, read_manifest, write_atomic, write_manifest
from multihop_rag.indexing.text import chunk_tokens, count_tokens
from multihop_rag.llm.cache import LLMCache, cached_llm
from multihop_rag.llm.concurrency import map_bounded
from multihop_rag.llm.usage import Stages, Usage
from multihop_rag.option_comparisons import comparison_kinds
from multihop_rag.serving.llamacpp_server import openai_endpoint
from multihop_rag.serving.profile import default_concurrency
from multihop_rag.stores import batched, chroma_vector_store, ensure_empty, stored_ids

__all__ = ["K2RAGIndex", "K2RAGStruct"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
CACHE_FILE = "llm_calls.sqlite"
HIDDEN = ["doc_id", "chunk", "passage_id", "summarized"]
"""Bookkeeping metadata: shown to the KG extractor they became triples such as (doc_id, hotpotqa-…, title)."""


@dataclass
class K2RAGStruct(IndexStruct):
    """The index's entry in the storage context; documents and statistics are written beside it."""

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return "k2rag"


def _chunk_nodes(doc: Document, text: str, summarized: bool, size: int, overlap: int, kind: str) -> list[TextNode]:
    nodes = []
    for i, chunk in enumerate(chunk_tokens(text, size, overlap)):
        if not chunk.strip():
            continue
        node_id = hashlib.sha1(f"{kind}\x1f{doc.doc_id}\x1f{i}\x1f{chunk}".encode()).hexdigest()[:24]
        metadata = {
            "title": str(doc.metadata.get("title", "")),
            "doc_id": doc.doc_id,
            "chunk": i,
            "passage_id": str(doc.metadata.get("passage_id") or doc.doc_id),
            "summarized": summarized,
        }
        node = TextNode(id_=node_id, text=chunk, metadata=metadata, excluded_llm_metadata_keys=list(HIDDEN),
                        excluded_embed_metadata_keys=list(HIDDEN))
        nodes.append(node)
    return nodes


class K2RAGIndex(DocumentIndex[K2RAGStruct]):
    """The K²RAG stores over one corpus; query with :meth:`as_query_engine`."""

    index_struct_cls = K2RAGStruct

    def __init__(
        self,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        config: K2RAGConfig | None = None,
        summarizer: str | Path | Summarizer | None = "llm",
        kg: str | KnowledgeGraph | None = None,
        kg_options: dict[str, Any] | None = None,
        storage_context: StorageContext | None = None,
        index_struct: K2RAGStruct | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> None:
        self.config = config or K2RAGConfig()
        self.llm = cached_llm(llm, cache)
        self.embed_model = embed_model
        self.max_concurrency = max_concurrency or default_concurrency(self.llm)
        self.summarizer = make_summarizer(summarizer, self.llm, self.config.min_summary_tokens, self.config.summary_share)
        if kg is not None and not isinstance(kg, (str, KnowledgeGraph)):
            raise ValueError(f"kg must be 'property', 'graphrag', None or a KnowledgeGraph, not {kg!r}")
        if isinstance(kg, str) and kg not in ("property", "graphrag"):
            raise ValueError(f"kg must be 'property', 'graphrag', None or a KnowledgeGraph, not {kg!r}")
        self.kg: KnowledgeGraph | None = kg if isinstance(kg, KnowledgeGraph) else None
        self._kg_spec, self._kg_options = kg, dict(kg_options or {})
        self.documents: dict[str, dict[str, Any]] = {}
        """Document id -> ``{"hash", "title", "text", "summary", "chunks", "kg_chunks"}``."""
        self.sparse: SparseStore | None = None
        self.last_update: dict[str, Any] = {}
        self._stages = Stages(lambda: self.llm.usage)
        self._llm_before = Usage()
        super().__init__(index_struct=index_struct or K2RAGStruct(), storage_context=storage_context,
                         show_progress=show_progress, **kwargs)
        self._dense = VectorStoreIndex(nodes=[], storage_context=self.storage_context, embed_model=embed_model)

    # ---- building ---------------------------------------------------------------------------------

    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        summarizer: str | Path | Summarizer | None = "llm",
        kg: str | KnowledgeGraph | None = "property",
        kg_options: dict[str, Any] | None = None,
        config: K2RAGConfig | None = None,
        storage_context: StorageContext | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        persist_dir: str | Path | None = None,
        overwrite: bool = False,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> K2RAGIndex:
        """Summarize, chunk and index ``documents``.

        Args:
            summarizer: ``"llm"`` (default), ``"none"`` (the naive pipelines' unsummarized corpus),
                a local Hugging Face summarization model folder, or a :class:`Summarizer`.
            kg: ``"property"`` (LlamaIndex property graph, default), ``"graphrag"`` (Microsoft
                GraphRAG, the paper's; needs the ``graphrag`` extra and serves the LLM over an
                OpenAI-compatible endpoint: Ollama's ``/v1``, or a llama.cpp server started for
                the embedded model), ``None`` (no graph: only the semantic/keyword/hybrid
                pipelines work), or a built :class:`KnowledgeGraph`.
            kg_options: keyword arguments for the graph's builder (GraphRAG: ``root``, ``settings``).
            vector_store: where the dense chunks go (default: in memory, or Chroma in ``persist_dir``);
                it must be empty unless ``overwrite=True``.
            storage_context: a LlamaIndex storage context holding that vector store instead.
            persist_dir: persist there, with the LLM-call cache (a killed build resumes).
            cache: another place for the LLM-call cache.
        """
        docs = [d for d in documents if d.text.strip()]
        if not docs:
            raise CorpusError("K2RAGIndex needs at least one document with text")
        config = config or K2RAGConfig()
        own_store = vector_store is None and storage_context is None
        if persist_dir is not None:
            prepare_folder(persist_dir, "k2rag", FORMAT_VERSION, overwrite=overwrite, config=config.model_dump())
            cache = cache if cache is not None else Path(persist_dir) / CACHE_FILE
            if own_store:
                vector_store = chroma_vector_store(Path(persist_dir) / "chroma", "k2rag")
        storage_context = storage_context or StorageContext.from_defaults(vector_store=vector_store)
        ensure_empty(storage_context.vector_store, overwrite=overwrite or (own_store and persist_dir is not None),
                     where=str(persist_dir or "the storage context"))
        index = cls(llm=llm, embed_model=embed_model, config=config, summarizer=summarizer, kg=kg, kg_options=kg_options,
                    storage_context=storage_context, cache=cache, max_concurrency=max_concurrency,
                    show_progress=show_progress, **kwargs)
        index.store_given = not own_store
        index._change(add=docs, remove=[])
        if persist_dir is not None:
            index.persist(persist_dir)
        return index

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **build_kwargs: Any) -> K2RAGStruct:
        self._change(add=self._documents_of(nodes), remove=[])
        return self.index_struct

    def _summarize(self, doc: Document) -> tuple[str, bool]:
        summary = self.summarizer.summarize(doc.text)
        return summary, summary != doc.text

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        """Remove documents ``remove`` and add (or re-index) documents ``add`` in every store."""
        config, started, before = self.config, time.perf_counter(), self.llm.usage
        first_build = not self.documents
        gone = [self.documents.pop(d) for d in remove if d in self.documents]
        chunks: dict[int, tuple[list[TextNode], list[TextNode]]] = {}
        unembedded: list[TextNode] = []

        def chunk(i: int, summary: tuple[str, bool]) -> None:
            """Document ``i``'s chunks as its summary comes in, embedded 64 at a time beside the calls in flight."""
            text, summarized = summary
            vector = _chunk_nodes(add[i], text, summarized, config.chunk_size, config.chunk_overlap, "vector")
            chunks[i] = (vector, _chunk_nodes(add[i], text, summarized, config.kg_chunk_size, config.kg_chunk_overlap, "kg"))
            unembedded.extend(vector)
            if len(unembedded) >= 64:
                self._embed_chunks(unembedded)
                unembedded.clear()

        with self._stages.stage("summarize"):
            dead = [c for info in gone for c in info["chunks"]]
            for part in batched(dead):  # first: a re-indexed document's unchanged chunks come back with the same ids
                self._dense.delete_nodes(list(part), delete_from_docstore=True)
            for node_id in dead:  # the docstore keeps every chunk (for BM25 and reloads)
                self.docstore.delete_document(node_id, raise_error=False)
            summaries = map_bounded(self._summarize, list(add), max_concurrency=self.max_concurrency,
                                    desc="K2RAG summaries", show_progress=self._show_progress, on_result=chunk)
        with self._stages.stage("dense"):
            self._embed_chunks(unembedded)
            fresh, kg_fresh = [], []
            for i, (doc, (summary, _)) in enumerate(zip(add, summaries, strict=True)):
                vector, kg = chunks[i]
                self.documents[doc.doc_id] = {
                    "hash": document_hash(doc), "title": str(doc.metadata.get("title", "")), "text": doc.text, "summary": summary,
                    "chunks": [n.node_id for n in vector], "kg_chunks": [n.node_id for n in kg],
                }
                fresh += vector
                kg_fresh += kg
            self.docstore.add_documents(fresh, allow_update=True)
        with self._stages.stage("sparse"):
            self.sparse = SparseStore.from_nodes(self._chunk_nodes()) if self.documents else None
        with self._stages.stage("kg"):
            self._update_kg(kg_fresh, [c for info in gone for c in info["kg_chunks"]], first_build)
        spent = self.llm.usage - before
        self.last_update = {"added": [d.doc_id for d in add], "removed": list(remove), "llm_calls": spent.calls,
                            "cache_hits": spent.cache_hits, "seconds": round(time.perf_counter() - started, 1)}
        return self.last_update

    def _embed_chunks(self, nodes: Sequence[TextNode]) -> None:
        """Embed ``nodes`` and write them to the dense store."""
        for batch in batched(nodes, 64):
            vectors = self.embed_model.get_text_embedding_batch([n.get_content(metadata_mode=MetadataMode.EMBED) for n in batch])
            for node, vector in zip(batch, vectors, strict=True):
                node.embedding = vector
            self._dense.insert_nodes(list(batch))

    def _chunk_nodes(self) -> list[BaseNode]:
        ids = [c for info in self.documents.values() for c in info["chunks"]]
        return self.docstore.get_nodes(ids) if ids else []

    def _update_kg(self, fresh: list[TextNode], gone: list[str], first_build: bool) -> None:
        """Build the graph over the first chunks (a graph given ready-made is used as it is); later,
        extract new chunks and remove gone ones."""
        if first_build and self.kg is not None:
            return
        if self.kg is None:
            if self._kg_spec == "property":
                options = {"max_paths_per_chunk": self.config.max_kg_paths_per_chunk,
                           "stop_reply": self.config.stop_kg_reply,
                           "entity_linking": self.config.kg_entity_linking,
                           "triple_order": self.config.kg_triple_order, **self._kg_options}
                self.kg = PropertyGraphKG.build(fresh, self.llm, self.embed_model, max_concurrency=self.max_concurrency,
                                                show_progress=self._show_progress, **options)
            elif self._kg_spec == "graphrag":
                self.kg = _graphrag(self.llm, self.embed_model, fresh, show_progress=self._show_progress,
                                    max_concurrency=self.max_concurrency, **self._kg_options)
            return
        if not (gone or fresh):
            return
        if not isinstance(self.kg, UpdatableGraph):
            raise NotImplementedError(f"the {self.kg.name} graph cannot be updated in place: rebuild the index")
        if gone:
            self.kg.remove(gone)
        if fresh:
            self.kg.add(fresh)

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Per document: id, title, text and its summary."""
        return [{"id": d, "title": i["title"], "text": i["text"], "summary": i["summary"]} for d, i in self.documents.items()]

    @property
    def vector_store(self) -> BasePydanticVectorStore:
        return self.storage_context.vector_store

    # ---- querying -----------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"K2RAGIndex({len(self.documents)} documents, {len(self.sparse or [])} chunks, kg={getattr(self.kg, 'name', None)})"

    def stats(self) -> dict[str, Any]:
        """Summary reduction, chunk counts, KG triples and extracted lines skipped, time and calls by build stage, the last update, the cache."""
        before = sum(count_tokens(i["text"]) for i in self.documents.values())
        after = sum(count_tokens(i["summary"]) for i in self.documents.values())
        return {
            "documents": len(self.documents),
            "summarizer": self.summarizer.name,
            "tokens_before": before,
            "tokens_after": after,
            "reduction": round(1 - after / before, 3) if before else 0.0,
            "chunks": sum(len(i["chunks"]) for i in self.documents.values()),
            "kg_chunks": sum(len(i["kg_chunks"]) for i in self.documents.values()),
            "kg": getattr(self.kg, "name", None),
            "kg_triples": self.kg.triples() if self.kg is not None and hasattr(self.kg, "triples") else None,
            "kg_lines_skipped": self.kg.skipped_lines() if isinstance(self.kg, PropertyGraphKG) else None,
            "pool_size": sum(len(i["chunks"]) for i in self.documents.values()),
            "llm": (self.llm.usage + self._llm_before).as_dict(),
            "stages": self._stages.figures,
            "last_update": self.last_update,
            "cache": self.llm.cache.describe() if self.llm.cache is not None else None,
        }

    def as_retriever(self, alpha: float | None = None, similarity_top_k: int | None = None, **kwargs: Any) -> HybridRetriever:
        """The hybrid retriever of eq. (3)-(4) (defaults: λ = 0.8, k = 10)."""
        if self.sparse is None:
            raise CorpusError("the index holds no document")
        return HybridRetriever(
            self._dense,
            self.sparse,
            self.embed_model,
            alpha=self.config.alpha if alpha is None else alpha,
            similarity_top_k=similarity_top_k or self.config.similarity_top_k,
            candidates=self.config.candidates,
        )

    def as_query_engine(self, pipeline: str = "k2rag", **kwargs: Any) -> BaseQueryEngine:  # type: ignore[override]
        """``"k2rag"`` (Algorithm 2) or a naive pipeline of §3.2: ``"semantic"`` (λ=1), ``"keyword"``
        (λ=0), ``"hybrid"`` (λ=0.8), ``"kg"``. The paper runs the naive ones over the unsummarized
        corpus: build that index with ``summarizer="none"``."""
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, not {pipeline!r}")
        if pipeline in ("k2rag", "kg") and self.kg is None:
            raise ValueError(f"the {pipeline!r} pipeline needs a knowledge graph; build the index with kg='property'")
        if pipeline == "k2rag":
            engine = K2RAGQueryEngine(
                llm=self.llm,
                kg=self.kg,
                retriever=self.as_retriever(),
                summarizer=self.summarizer,
                result_chunk_size=self.config.kg_result_chunk_size,
                result_chunk_overlap=self.config.kg_result_chunk_overlap,
                retrieve_for_question=self.config.retrieve_for_question,
                kg_step=self.config.kg_step,
                sub_answer_sees_question=self.config.sub_answer_sees_question,
                reader_tokens=self.config.reader_tokens,
                final_reads=self.config.final_reads,
                max_concurrency=self.max_concurrency,
            )
            kinds = comparison_kinds(years=self.config.compare_years, quantities=self.config.compare_quantities)
            return ComparisonsDecidedQueryEngine(engine=engine, llm=self.llm, kinds=kinds) if kinds else engine
        if pipeline == "kg":
            return NaiveQueryEngine(llm=self.llm, kg=self.kg, retriever=None)
        alpha = {"semantic": 1.0, "keyword": 0.0, "hybrid": self.config.alpha}[pipeline]
        return NaiveQueryEngine(llm=self.llm, retriever=self.as_retriever(alpha=alpha), kg=None)

    # ---- persistence --------------------------------------------------------------------------------

    def persist(self, persist_dir: str | Path) -> None:
        """Write the storage context (docstore with every chunk, index store, a simple vector store), the
        documents and summaries (``k2rag.json``), the BM25 index and the knowledge graph to ``persist_dir``.
        A Chroma store lives in its own folder; another store keeps its chunks itself: pass it again to
        :meth:`from_persist_dir`."""
        folder = Path(persist_dir)
        self.persist_folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.storage_context.persist(persist_dir=str(folder))
        if self.sparse is not None:
            self.sparse.save(folder / "sparse")
        if self.kg is not None:
            self.kg.persist(folder / "kg")
        payload = {"documents": self.documents, "stages": self._stages.figures, "last_update": self.last_update,
                   "llm": (self.llm.usage + self._llm_before).as_dict()}
        write_atomic(folder / "k2rag.json", json.dumps(payload))
        write_manifest(folder, "k2rag", FORMAT_VERSION, status="done", config=self.config.model_dump(),
                       store_outside=self.store_outside,
                       summarizer=self.summarizer.name, kg=getattr(self.kg, "name", None),
                       vector_store=type(self.vector_store).__name__, dense_index_id=self._dense.index_id,
                       index_id=self.index_id, documents=len(self.documents))

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: BasePydanticVectorStore | None = None,
        summarizer: str | Path | Summarizer | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
    ) -> K2RAGIndex:
        """Reload an index written by :meth:`persist`; its vector store must hold exactly its chunks.
        ``summarizer`` overrides the one it was built with (needed when that was a :class:`Summarizer`
        object rather than a name or folder)."""
        folder = open_folder(persist_dir, vector_store)
        manifest = read_manifest(folder, "k2rag", FORMAT_VERSION)
        storage = StorageContext.from_defaults(
            persist_dir=str(folder), vector_store=reload_vector_store(folder, manifest, "k2rag", vector_store))
        llm = cached_llm(llm, cache if cache is not None else folder / CACHE_FILE)
        config = K2RAGConfig(**manifest["config"])
        kg: KnowledgeGraph | None = None
        if manifest["kg"] == "property":
            kg = PropertyGraphKG.load(folder / "kg", llm, embed_model, max_paths_per_chunk=config.max_kg_paths_per_chunk,
                                      stop_reply=config.stop_kg_reply,
                                      max_concurrency=max_concurrency or default_concurrency(llm),
                                      entity_linking=config.kg_entity_linking, triple_order=config.kg_triple_order)
        elif manifest["kg"] == "graphrag":
            kg = _graphrag(llm, embed_model, folder=folder / "kg")
        index = cls(llm=llm, embed_model=embed_model, config=config,
                    summarizer=summarizer if summarizer is not None else manifest["summarizer"], kg=kg,
                    storage_context=storage, index_struct=K2RAGStruct(index_id=manifest["index_id"]),
                    max_concurrency=max_concurrency)
        dense = load_index_from_storage(storage, index_id=manifest["dense_index_id"], embed_model=embed_model)
        if not isinstance(dense, VectorStoreIndex):
            raise IndexFolderError(f"{folder}: the dense store is a {type(dense).__name__}, not a VectorStoreIndex")
        index._dense = dense
        payload = json.loads((folder / "k2rag.json").read_text())
        index.documents, index._stages.figures, index.last_update = payload["documents"], payload["stages"], payload["last_update"]
        index._llm_before = Usage(**payload["llm"]) - index.llm.usage
        chunks = {n.node_id: n for n in index._chunk_nodes()}
        index.sparse = SparseStore.load(folder / "sparse", chunks) if chunks else None
        present = stored_ids(index.vector_store)
        if present != set(chunks):
            raise StoreError(
                f"{folder}: the dense store holds {len(present - set(chunks))} chunks the index lacks and lacks "
                f"{len(set(chunks) - present)} of its {len(chunks)}; rebuild it (--overwrite)"
            )
        index.persist_folder, index.store_given = folder, vector_store is not None
        return index


def _graphrag(
    llm: LLM,
    embed_model: BaseEmbedding,
    nodes: Sequence[TextNode] = (),
    *,
    folder: Path | None = None,
    show_progress: bool = True,
    **options: Any,
) -> KnowledgeGraph:
    """Build GraphRAG over ``nodes`` (or open the one in ``folder``) behind ``llm``'s OpenAI-compatible endpoint."""

    endpoint, server = openai_endpoint(llm)
    options.setdefault("context_tokens", int(getattr(llm.metadata, "context_window", 8192)))
    if folder is not None:
        return GraphRAGKG.load(folder, endpoint, embed_model, server=server, **options)
    return GraphRAGKG.build(nodes, endpoint, embed_model, server=server, show_progress=show_progress, **options)
