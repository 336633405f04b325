"""K2RAGIndex: a summarized corpus in a dense store, a sparse store and a knowledge graph (§3.1).

Build (``from_documents``):

1. corpus summarization (Algorithm 1): every document is summarized by the chosen summarizer
   (the LLM by default; a local seq2seq model; or none); documents shorter than
   ``min_summary_tokens`` are kept as they are;
2. chunks of S=256, O=20 (eq. 1-2) of the summaries go to a Chroma collection (dense, the
   paper's ChromaDB) and a BM25 index (sparse, Okapi BM25 via bm25s);
3. chunks of S=300, O=100 of the summaries go to the knowledge graph.

LLM calls go through the persistent cache (:func:`multihop_rag.cache.cached_llm`), so a killed
build resumes without repeating finished summaries or extractions; chunk ids derive from their
text, so rebuilding the same corpus adds nothing twice to a persistent Chroma collection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import Document, TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore
from tqdm.auto import tqdm

from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.hybrid import HybridRetriever, SparseStore
from llama_index_k2rag.kg import KnowledgeGraph, PropertyGraphKG
from llama_index_k2rag.query_engine import PIPELINES, K2RAGQueryEngine, NaiveQueryEngine
from llama_index_k2rag.summarizers import Summarizer, make_summarizer
from multihop_rag.cache import CachedLLM, LLMCache, Usage, cached_llm
from multihop_rag.corpus import CorpusError
from multihop_rag.stores import StoreError, chroma_vector_store
from multihop_rag.text import chunk_tokens, count_tokens

__all__ = ["K2RAGIndex"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
COLLECTION = "k2rag"


def _chunk_nodes(docs: Sequence[Document], texts: Sequence[str], size: int, overlap: int, kind: str) -> list[TextNode]:
    nodes = []
    for doc, text in zip(docs, texts, strict=True):
        for i, chunk in enumerate(chunk_tokens(text, size, overlap)):
            if not chunk.strip():
                continue
            node_id = hashlib.sha1(f"{kind}\x1f{doc.doc_id}\x1f{i}\x1f{chunk}".encode()).hexdigest()[:24]
            metadata = {"doc_id": doc.doc_id, "title": str(doc.metadata.get("title", "")), "chunk": i}
            # ids are bookkeeping: shown to the KG extractor they became triples such as (doc_id, hotpotqa-…, title)
            hidden = ["doc_id", "chunk"]
            nodes.append(
                TextNode(
                    id_=node_id,
                    text=chunk,
                    metadata=metadata,
                    excluded_llm_metadata_keys=hidden,
                    excluded_embed_metadata_keys=hidden,
                )
            )
    return nodes


class K2RAGIndex:
    """The K²RAG stores over one corpus; query with :meth:`as_query_engine`."""

    def __init__(
        self,
        *,
        summaries: list[dict[str, Any]],
        sparse: SparseStore,
        dense: ChromaVectorStore,
        kg: KnowledgeGraph | None,
        llm: LLM,
        embed_model: BaseEmbedding,
        summarizer: Summarizer,
        summarizer_spec: str,
        config: K2RAGConfig,
        stats: dict[str, Any],
    ) -> None:
        self.summaries = summaries
        self.sparse = sparse
        self.dense = dense
        self.kg = kg
        self.llm = llm
        self.embed_model = embed_model
        self.summarizer = summarizer
        self.summarizer_spec = summarizer_spec
        self.config = config
        self._stats = stats

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        summarizer: str | Path | Summarizer | None = "llm",
        kg: str | KnowledgeGraph | None = "property",
        kg_options: dict[str, Any] | None = None,
        vector_store: ChromaVectorStore | None = None,
        config: K2RAGConfig | None = None,
        show_progress: bool = True,
        cache: str | Path | LLMCache | None = None,
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
            kg_options: keyword arguments for the graph's builder, e.g. for GraphRAG ``root`` (its
                project folder; default: a cache folder keyed by the chunks, so a rebuild resumes)
                and ``settings`` (overrides of GraphRAG's configuration), see
                :class:`~llama_index_k2rag.graphrag_kg.GraphRAGKG`.
            vector_store: a LlamaIndex ``ChromaVectorStore`` for the dense chunks (default: in memory).
            cache: LLM-call cache (``True``: ~/.cache/multihop-rag/llm_calls.sqlite; a path; ``False``).
        """
        config = config or K2RAGConfig()
        docs = [d for d in documents if d.text.strip()]
        if not docs:
            raise CorpusError("K2RAGIndex needs at least one document with text")
        llm = cached_llm(llm, cache)
        usage_before = Usage(**asdict(llm.usage)) if isinstance(llm, CachedLLM) else Usage()
        spec = summarizer.name if isinstance(summarizer, Summarizer) else str(summarizer or "none")
        summarize = make_summarizer(summarizer, llm, config.min_summary_tokens)
        seconds: dict[str, float] = {}

        started = time.perf_counter()
        texts = [summarize.summarize(d.text) for d in tqdm(docs, desc="K2RAG summaries", disable=not show_progress)]
        seconds["summarize"] = time.perf_counter() - started
        summaries = [
            {"id": d.doc_id, "title": str(d.metadata.get("title", "")), "text": d.text, "summary": s}
            for d, s in zip(docs, texts, strict=True)
        ]

        nodes = _chunk_nodes(docs, texts, config.chunk_size, config.chunk_overlap, "vector")
        started = time.perf_counter()
        dense = vector_store or chroma_vector_store(None, f"{COLLECTION}-{uuid.uuid4().hex[:8]}")
        present = set(dense._collection.get(ids=[n.node_id for n in nodes], include=[])["ids"])
        missing = [n for n in nodes if n.node_id not in present]
        for start in tqdm(range(0, len(missing), 64), desc="K2RAG dense store", disable=not show_progress):
            batch = missing[start : start + 64]
            vectors = embed_model.get_text_embedding_batch([n.get_content() for n in batch])
            for node, vector in zip(batch, vectors, strict=True):
                node.embedding = vector
            dense.add(batch)
        seconds["dense"] = time.perf_counter() - started

        started = time.perf_counter()
        sparse = SparseStore.from_nodes(nodes)
        seconds["sparse"] = time.perf_counter() - started

        started = time.perf_counter()
        kg_nodes = _chunk_nodes(docs, texts, config.kg_chunk_size, config.kg_chunk_overlap, "kg")
        if kg == "property":
            options = {"max_paths_per_chunk": config.max_kg_paths_per_chunk, **(kg_options or {})}
            graph: KnowledgeGraph | None = PropertyGraphKG.build(
                kg_nodes, llm, embed_model, show_progress=show_progress, **options
            )
        elif kg == "graphrag":
            graph = _graphrag(llm, embed_model, kg_nodes, show_progress=show_progress, **(kg_options or {}))
        elif kg is None or isinstance(kg, KnowledgeGraph):
            graph = kg
        else:
            raise ValueError(f"kg must be 'property', 'graphrag', None or a KnowledgeGraph, not {kg!r}")
        seconds["kg"] = time.perf_counter() - started

        usage = llm.usage if isinstance(llm, CachedLLM) else Usage()
        before = sum(count_tokens(d.text) for d in docs)
        after = sum(count_tokens(t) for t in texts)
        stats = {
            "documents": len(docs),
            "summarizer": spec,
            "tokens_before": before,
            "tokens_after": after,
            "reduction": round(1 - after / before, 3) if before else 0.0,
            "chunks": len(nodes),
            "kg_chunks": len(kg_nodes),
            "kg": getattr(graph, "name", None),
            "kg_triples": graph.triples() if hasattr(graph, "triples") else None,
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "llm": {
                "calls": usage.calls - usage_before.calls,
                "cache_hits": usage.cache_hits - usage_before.cache_hits,
                "prompt_tokens": usage.prompt_tokens - usage_before.prompt_tokens,
                "completion_tokens": usage.completion_tokens - usage_before.completion_tokens,
            },
        }
        log.info("K2RAG index: %s", stats)
        return cls(
            summaries=summaries,
            sparse=sparse,
            dense=dense,
            kg=graph,
            llm=llm,
            embed_model=embed_model,
            summarizer=summarize,
            summarizer_spec=spec,
            config=config,
            stats=stats,
        )

    def __repr__(self) -> str:
        return f"K2RAGIndex({len(self.summaries)} documents, {len(self.sparse)} chunks, kg={getattr(self.kg, 'name', None)})"

    def stats(self) -> dict[str, Any]:
        """Summary reduction, chunk counts, KG triples, build seconds per store, LLM calls and tokens."""
        return json.loads(json.dumps(self._stats))

    def as_retriever(self, alpha: float | None = None, similarity_top_k: int | None = None) -> HybridRetriever:
        """The hybrid retriever of eq. (3)-(4) (defaults: λ = 0.8, k = 10)."""
        return HybridRetriever(
            self.dense,
            self.sparse,
            self.embed_model,
            alpha=self.config.alpha if alpha is None else alpha,
            similarity_top_k=similarity_top_k or self.config.similarity_top_k,
            candidates=self.config.candidates,
        )

    def as_query_engine(self, pipeline: str = "k2rag") -> CustomQueryEngine:
        """``"k2rag"`` (Algorithm 2) or a naive pipeline of §3.2: ``"semantic"`` (λ=1), ``"keyword"``
        (λ=0), ``"hybrid"`` (λ=0.8), ``"kg"``. The paper runs the naive ones over the unsummarized
        corpus: build that index with ``summarizer="none"``."""
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, not {pipeline!r}")
        if pipeline in ("k2rag", "kg") and self.kg is None:
            raise ValueError(f"the {pipeline!r} pipeline needs a knowledge graph; build the index with kg='property'")
        if pipeline == "k2rag":
            return K2RAGQueryEngine(
                llm=self.llm,
                kg=self.kg,
                retriever=self.as_retriever(),
                summarizer=self.summarizer,
                result_chunk_size=self.config.kg_result_chunk_size,
                result_chunk_overlap=self.config.kg_result_chunk_overlap,
            )
        if pipeline == "kg":
            return NaiveQueryEngine(llm=self.llm, kg=self.kg)
        alpha = {"semantic": 1.0, "keyword": 0.0, "hybrid": self.config.alpha}[pipeline]
        return NaiveQueryEngine(llm=self.llm, retriever=self.as_retriever(alpha=alpha))

    def persist(self, persist_dir: str | Path) -> None:
        """Write summaries, the sparse store, the knowledge graph and settings (JSON, bm25s files)
        and the dense chunks (Chroma) to ``persist_dir``."""
        folder = Path(persist_dir)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "summaries.jsonl").open("w") as fh:
            for record in self.summaries:
                fh.write(json.dumps(record) + "\n")
        self.sparse.save(folder / "sparse")
        if self.kg is not None:
            self.kg.persist(folder / "kg")
        meta = {
            "format": FORMAT_VERSION,
            "config": self.config.model_dump(),
            "summarizer": self.summarizer_spec,
            "kg": getattr(self.kg, "name", None),
            "stats": self._stats,
        }
        (folder / "k2rag.json").write_text(json.dumps(meta, indent=1))
        target = chroma_vector_store(folder / "chroma", COLLECTION)
        if target._collection.id == self.dense._collection.id:
            return
        have = set(target._collection.get(include=[])["ids"])
        got = self.dense._collection.get(include=["embeddings", "documents", "metadatas"])
        new = [i for i, cid in enumerate(got["ids"]) if cid not in have]
        for start in range(0, len(new), 1024):
            part = new[start : start + 1024]
            target._collection.add(
                ids=[got["ids"][i] for i in part],
                embeddings=[got["embeddings"][i] for i in part],
                documents=[got["documents"][i] for i in part],
                metadatas=[got["metadatas"][i] for i in part],
            )

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: ChromaVectorStore | None = None,
        summarizer: str | Path | Summarizer | None = None,
        cache: str | Path | LLMCache | None = None,
    ) -> K2RAGIndex:
        """Reload an index written by :meth:`persist`. ``summarizer`` overrides the one it was built
        with (needed when that was a :class:`Summarizer` object rather than a name or folder)."""
        folder = Path(persist_dir)
        meta_file = folder / "k2rag.json"
        if not meta_file.is_file():
            raise StoreError(f"{folder} holds no K²RAG index (no k2rag.json); build one and persist() it there")
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise StoreError(f"{folder} was written by another format version ({meta.get('format')}); rebuild it")
        config = K2RAGConfig(**meta["config"])
        llm = cached_llm(llm, cache)
        spec = summarizer if summarizer is not None else meta["summarizer"]
        with (folder / "summaries.jsonl").open() as fh:
            summaries = [json.loads(line) for line in fh if line.strip()]
        sparse = SparseStore.load(folder / "sparse")
        dense = vector_store or chroma_vector_store(folder / "chroma", COLLECTION)
        if dense._collection.count() < len(sparse):
            raise StoreError(f"{folder}: the dense store holds {dense._collection.count()} of {len(sparse)} chunks; rebuild it")
        kg: KnowledgeGraph | None = None
        if meta["kg"] == "property":
            kg = PropertyGraphKG.load(folder / "kg", llm, embed_model)
        elif meta["kg"] == "graphrag":
            kg = _graphrag(llm, embed_model, folder=folder / "kg")
        return cls(
            summaries=summaries,
            sparse=sparse,
            dense=dense,
            kg=kg,
            llm=llm,
            embed_model=embed_model,
            summarizer=make_summarizer(spec, llm, config.min_summary_tokens),
            summarizer_spec=str(spec if not isinstance(spec, Summarizer) else spec.name),
            config=config,
            stats=meta["stats"],
        )


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
    from llama_index_k2rag.graphrag_kg import GraphRAGKG
    from multihop_rag.llamacpp_server import openai_endpoint

    endpoint, server = openai_endpoint(llm)
    options.setdefault("context_tokens", int(getattr(llm.metadata, "context_window", 8192)))
    if folder is not None:
        return GraphRAGKG.load(folder, endpoint, embed_model, server=server, **options)
    return GraphRAGKG.build(nodes, endpoint, embed_model, server=server, show_progress=show_progress, **options)
