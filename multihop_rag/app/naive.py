"""Plain dense RAG: the baseline every method is compared with.

Passages are split into chunks (LlamaIndex ``SentenceSplitter``, 256 tokens: the embedding model
reads no more) and embedded into a vector store — Chroma in the index folder, a Chroma server, or
any LlamaIndex vector store; a question embeds, takes the top-k chunks and asks the LLM once with
the short-answer prompt (:mod:`multihop_rag.short_answer`). ``answer`` returns the top ``retrieve_k`` chunks as ranked evidence (the
LLM reads the first ``similarity_top_k``), so retrieval can be measured deeper than what is read.

The index is a LlamaIndex ``VectorStoreIndex`` whose docstore keeps each document's hash, so
:meth:`NaiveRAG.update` adds, re-embeds and deletes exactly the changed documents.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from pydantic import BaseModel, Field, model_validator

from multihop_rag.corpus import Passage
from multihop_rag.errors import IndexFolderError, StoreError
from multihop_rag.frameworks.langchain import LlamaIndexRetriever
from multihop_rag.frameworks.llama_index import TokenBudget
from multihop_rag.indexing.persistence import (
    prepare_folder,
    read_manifest,
    recover,
    store_lock,
    undoable_update,
    write_manifest,
)
from multihop_rag.llm.calls import Call, call
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport
from multihop_rag.short_answer import short_answer_prompt
from multihop_rag.stores import (
    chroma_vector_store,
    delete_ids,
    ensure_empty,
    forget_chroma_clients,
    outside_entries,
    stored_ids,
)

__all__ = ["NaiveConfig", "NaiveRAG", "evidence_from_nodes", "METHOD"]

FORMAT_VERSION = 2

class NaiveConfig(BaseModel):
    """The baseline's knobs."""

    model_config = {"frozen": True, "extra": "forbid"}  # a misspelt setting is refused, not ignored

    chunk_size: int = Field(256, ge=16, description="Tokens per chunk (all-MiniLM-L6-v2 reads 256 word pieces).")
    chunk_overlap: int = Field(32, ge=0, description="Tokens shared by consecutive chunks of a document.")
    similarity_top_k: int = Field(5, ge=1, description="Chunks the LLM reads.")
    retrieve_k: int = Field(20, ge=1, description="Chunks returned as ranked evidence (recall@k up to this k).")
    max_output_tokens: int = Field(64, ge=1, description="Token cap of the answer.")
    reader_tokens: int = Field(
        0, ge=0, le=32_000, description="0: the LLM reads the top similarity_top_k chunks; more: it reads chunks in rank "
        "order up to this many tokens (naive RAG at another method's reading budget, the fair control of a report).")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> NaiveConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be below chunk_size ({self.chunk_size})")
        return self


def evidence_from_nodes(nodes: Sequence[NodeWithScore], kind: str = "chunk") -> list[Evidence]:
    """Retrieved LlamaIndex nodes as :class:`Evidence` (each holds text of its source passage)."""
    out = []
    for hit in nodes:
        node = hit.node
        passage = node.metadata.get("passage_id") or node.ref_doc_id or node.node_id
        out.append(
            Evidence(
                id=node.node_id,
                title=str(node.metadata.get("title", "")),
                text=node.get_content(),
                score=float(hit.score or 0.0),
                passage_ids=[str(passage)],
                kind=kind,
            )
        )
    return out


def _documents(passages: Sequence[Passage]) -> list[Any]:
    docs = []
    for p in passages:
        doc = p.to_llama_index()
        doc.excluded_embed_metadata_keys = ["passage_id"]
        doc.excluded_llm_metadata_keys = ["passage_id"]
        docs.append(doc)
    return docs


class NaiveRAG:
    """Dense top-k retrieval plus one LLM call, over a ``VectorStoreIndex`` that tracks its documents."""

    def __init__(self, index: VectorStoreIndex, llm: LLM, config: NaiveConfig, folder: Path | None = None,
                 store_given: bool = False):
        self.index = index
        self.llm = llm
        self.config = config
        self.folder = folder
        self.store_given = store_given
        """The caller gave the vector store: it lives outside the folder (an update copies its entries first)."""

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        folder: str | Path | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        config: NaiveConfig | None = None,
        overwrite: bool = False,
        show_progress: bool = True,
    ) -> NaiveRAG:
        """Embed ``passages`` into ``vector_store`` (default: Chroma in ``folder``, else in memory); a store
        holding another build is refused unless ``overwrite``. With ``folder`` the index is persisted there."""
        config = config or NaiveConfig()
        folder = Path(folder) if folder is not None else None
        if folder is not None:
            prepare_folder(folder, "naive", FORMAT_VERSION, overwrite=overwrite, config=config.model_dump())
        store = vector_store or chroma_vector_store(folder / "chroma" if folder else None, "naive")
        # The folder's own store holds at most an unfinished build's chunks: start it again.
        ensure_empty(store, overwrite=overwrite or (vector_store is None and folder is not None), where=str(folder or "memory"))
        storage = StorageContext.from_defaults(vector_store=store)
        index = VectorStoreIndex.from_documents(
            _documents(passages),
            storage_context=storage,
            embed_model=embed_model,
            transformations=[SentenceSplitter(chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap)],
            show_progress=show_progress,
            insert_batch_size=256,
            store_nodes_override=True,  # the docstore keeps the chunks and document hashes: update() and reload need them
        )
        rag = cls(index, llm, config, folder, store_given=vector_store is not None)
        rag.persist()
        return rag

    @classmethod
    def load(
        cls,
        folder: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: BasePydanticVectorStore | None = None,
    ) -> NaiveRAG:
        """Open an index persisted in ``folder``; its vector store must hold exactly its chunks."""
        folder = Path(folder)
        if recover(folder, outside_entries(vector_store) if vector_store is not None else None):
            forget_chroma_clients()  # clients opened before would read the files they had open
        manifest = read_manifest(folder, "naive", FORMAT_VERSION)
        store = vector_store or chroma_vector_store(folder / "chroma", "naive")
        storage = StorageContext.from_defaults(persist_dir=str(folder), vector_store=store)
        from llama_index.core import load_index_from_storage

        index = load_index_from_storage(storage, embed_model=embed_model, store_nodes_override=True)
        if not isinstance(index, VectorStoreIndex):
            raise IndexFolderError(f"{folder} holds a {type(index).__name__}, not the naive index's VectorStoreIndex")
        rag = cls(index, llm, NaiveConfig(**manifest["config"]), folder, store_given=vector_store is not None)
        rag._check_store()
        return rag

    def _node_ids(self) -> set[str]:
        return {nid for info in self.index.ref_doc_info.values() for nid in info.node_ids}

    def _check_store(self) -> None:
        present, expected = stored_ids(self.index.vector_store), self._node_ids()
        if present != expected:
            raise StoreError(
                f"{self.folder}: the vector store holds {len(present - expected)} chunks the index lacks and lacks "
                f"{len(expected - present)} of its {len(expected)}; rebuild it (--overwrite)"
            )

    def persist(self) -> None:
        if self.folder is None:
            return
        self.index.storage_context.persist(persist_dir=str(self.folder))
        write_manifest(self.folder, "naive", FORMAT_VERSION, config=self.config.model_dump(), status="done",
                       documents=len(self.index.ref_doc_info))

    def __len__(self) -> int:
        return len(self.index.ref_doc_info)

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Hold exactly ``passages``: new ones embedded, changed ones (same id, other text) re-embedded,
        the others deleted. With a folder, under the store's lock, and undone if cut half-way (reload then)."""
        if self.folder is None:
            return self._update(passages)
        outside = outside_entries(self.index.vector_store) if self.store_given else None
        try:
            with store_lock(self.folder), undoable_update(self.folder, outside):
                return self._update(passages)
        except BaseException:
            forget_chroma_clients()  # the folder's files were put back under their connections
            raise

    def _update(self, passages: Sequence[Passage]) -> UpdateReport:
        started = time.perf_counter()
        documents = {d.doc_id: d for d in _documents(passages)}
        report = UpdateReport()
        for doc_id in [d for d in self.index.ref_doc_info if d not in documents]:
            self.index.delete_ref_doc(doc_id, delete_from_docstore=True)
            report.removed.append(doc_id)
        known = self.index.docstore.get_all_document_hashes()
        known_ids = set(known.values())
        refreshed = self.index.refresh_ref_docs(list(documents.values()))
        for doc, fresh in zip(documents.values(), refreshed, strict=True):
            if fresh:
                (report.changed if doc.doc_id in known_ids else report.added).append(doc.doc_id)
        stale = stored_ids(self.index.vector_store) - self._node_ids()
        delete_ids(self.index.vector_store, stale)
        self.persist()
        report.seconds = time.perf_counter() - started
        return report

    def retrieve(self, question: str, k: int | None = None) -> list[NodeWithScore]:
        return self.index.as_retriever(similarity_top_k=k or self.config.retrieve_k).retrieve(question)

    def _reading(self, hits: Sequence[NodeWithScore]) -> list[NodeWithScore]:
        """What the LLM reads: the first ``similarity_top_k`` hits, or with ``reader_tokens`` the hits in rank
        order while they fit that many tokens (at least one)."""
        if not self.config.reader_tokens:
            return list(hits[: self.config.similarity_top_k])
        return TokenBudget(tokens=self.config.reader_tokens).postprocess_nodes(list(hits))

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        """Retrieve the top chunks and answer from the first ``similarity_top_k`` (or the first ``reader_tokens``
        tokens of them) in a few words."""
        started = time.perf_counter()
        # chunks hold up to chunk_size tokens, often far fewer: retrieve deep enough to fill the budget
        depth = max(self.config.retrieve_k, self.config.reader_tokens // 32 + 1)
        hits = self.retrieve(question, depth)
        read = self._reading(hits)
        if trace:
            for hit in read:
                trace({"step": "retrieve", "title": hit.node.metadata.get("title", ""), "score": hit.score,
                       "text": hit.node.get_content()})
        context = "\n\n".join(h.node.get_content(metadata_mode=MetadataMode.LLM) for h in read)
        reply = call(Call(self.llm, short_answer_prompt(question, docs=context),
                          max_tokens=self.config.max_output_tokens))
        return Answer(
            question=question,
            text=reply.text.strip(),
            evidence=evidence_from_nodes(hits[: max(self.config.retrieve_k, len(read))]),
            seconds=time.perf_counter() - started,
            info={"read": len(read), "truncated": reply.truncated},
        )

    def stats(self) -> dict[str, Any]:
        return {"documents": len(self), "chunks": len(self._node_ids()), "pool_size": len(self._node_ids())}

    def as_langchain_retriever(self, k: int = 5) -> Any:
        """The index as a LangChain retriever (for ReSP over this store)."""

        return LlamaIndexRetriever(index=self.index, k=k)


class NaiveMethod:
    """The baseline as the command line and the evaluation drive it."""

    name = "naive"
    summary = "dense top-5 chunks, one answer call: the baseline"
    builds = False
    config_class = NaiveConfig
    source_packages = ("multihop_rag.app.naive",)

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: NaiveConfig, *,
              overwrite: bool = False) -> NaiveRAG:
        return NaiveRAG.build(passages, llm=models.llm, embed_model=models.embed, folder=folder, config=config,
                              overwrite=overwrite)

    def load(self, folder: Path, models: Models, config: NaiveConfig) -> NaiveRAG:
        return NaiveRAG.load(folder, llm=models.llm, embed_model=models.embed)


METHOD = NaiveMethod()
