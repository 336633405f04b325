"""LlamaIndex glue shared by the method indexes: one update protocol for every index kept per document.

A method index (SiReRAG, K²RAG, GARLIC) records its documents — id → ``{"hash", "title", "chunks", …}`` — and
implements one operation, ``_change(add, remove)``: remove these document ids, add these documents, rewrite
only what the change touches. :class:`DocumentIndex` turns LlamaIndex's update API into that one call, so
``insert``, ``delete_ref_doc``, ``update_ref_doc``, ``refresh_ref_docs``, ``insert_nodes``/``delete_nodes``
and ``ref_doc_info`` mean the same on every method. An index with a folder (built with ``persist_dir``, persisted
or reloaded) keeps it in step: each update runs under the store's lock, persists at its end, and is undone if
cut half-way (:func:`~multihop_rag.indexing.persistence.undoable_update`), so the folder's vector store and state
never disagree.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.indices.base import BaseIndex
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, Document, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.vector_stores.simple import SimpleVectorStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from multihop_rag.corpus import Passage
from multihop_rag.errors import IndexFolderError
from multihop_rag.indexing.persistence import recover, store_lock, undoable_update
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.cache import CachedLLM
from multihop_rag.method import UpdateReport
from multihop_rag.stores import chroma_vector_store, forget_chroma_clients, outside_entries

__all__ = ["DocumentIndex", "TokenBudget", "document_hash", "open_folder", "reload_vector_store", "update_document_index"]

IS = TypeVar("IS", bound=IndexStruct)


class TokenBudget(BaseNodePostprocessor):
    """Keeps retrieved nodes in rank order while their text fits ``tokens`` (the first node always): a reading
    budget in tokens instead of a node count, e.g. ``as_query_engine(node_postprocessors=[TokenBudget(tokens=700)])``."""

    tokens: int

    @classmethod
    def class_name(cls) -> str:
        return "TokenBudget"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        read: list[NodeWithScore] = []
        used = 0
        for hit in nodes:
            tokens = count_tokens(hit.node.get_content())
            if read and used + tokens > self.tokens:
                break
            read.append(hit)
            used += tokens
        return read


def document_hash(document: Document) -> str:
    """What a changed document is told by: its title and its text."""
    return hashlib.sha1(f"{document.metadata.get('title', '')}\n{document.text}".encode()).hexdigest()


def open_folder(persist_dir: str | Path, vector_store: BasePydanticVectorStore | None = None) -> Path:
    """``persist_dir`` ready to load: an update a dead process left half-done is undone first (in ``vector_store``
    too, the index's pool when the caller keeps it outside the folder)."""
    folder = Path(persist_dir)
    if recover(folder, outside_entries(vector_store) if vector_store is not None else None):
        forget_chroma_clients()  # clients opened before would read the files they had open
    return folder


def reload_vector_store(
    folder: Path, manifest: dict[str, Any], collection: str, given: BasePydanticVectorStore | None
) -> BasePydanticVectorStore | None:
    """The vector store to reload the index in ``folder`` with: the caller's (``given``), else the folder's own
    Chroma ``collection``, else None (a ``SimpleVectorStore`` persisted in the folder). A pool kept elsewhere
    (a Chroma server, another store) must be given: one line says so, never an empty collection in its place."""
    if given is not None:
        return given
    kind = manifest["vector_store"]
    if manifest.get("store_outside") or kind not in ("ChromaVectorStore", "SimpleVectorStore"):
        raise IndexFolderError(f"{folder}: its pool lives in a {kind} outside the folder; pass it as vector_store=")
    return chroma_vector_store(folder / "chroma", collection) if kind == "ChromaVectorStore" else None


class DocumentIndex(BaseIndex[IS], Generic[IS]):
    """A LlamaIndex index whose every update is one ``_change(add, remove)`` over whole documents."""

    documents: dict[str, dict[str, Any]]
    """Document id → what the index keeps of it; at least ``hash``, ``title`` and ``chunks`` (its node ids)."""

    llm: CachedLLM
    """The index's LLM, counted (and cached when the index was given a cache)."""

    last_update: dict[str, Any]
    """What the last update did (:meth:`_change`'s return); ``summaries_rewritten`` where the index keeps summaries."""

    persist_folder: Path | None = None
    """The folder this index was last persisted to or loaded from (None: in memory only)."""

    store_given: bool = False
    """The caller gave the vector store (else the index opened its own, in its folder or in memory)."""

    @property
    def store_outside(self) -> bool:
        """The pool lives outside the folder: the caller gave the store and it is no ``SimpleVectorStore`` (which
        is persisted into the folder). An update then copies its entries before it starts."""
        return self.store_given and not isinstance(self.storage_context.vector_store, SimpleVectorStore)

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        """Remove the documents ``remove``, add ``add``, in one update; returns what it did."""
        raise NotImplementedError

    def persist(self, persist_dir: str | Path) -> None:
        """Write the index to ``persist_dir``; later updates keep that folder in step."""
        raise NotImplementedError

    def _update(self, add: Sequence[Document], remove: Sequence[str]) -> None:
        """One :meth:`_change`; with a folder, under its lock, persisted at the end, undone if cut half-way."""
        folder = self.persist_folder
        if folder is None:
            self._change(add, remove)
            return
        try:
            outside = outside_entries(self.storage_context.vector_store) if self.store_outside else None
            with store_lock(folder), undoable_update(folder, outside):
                self._change(add, remove)
                self.persist(folder)
        except BaseException:
            forget_chroma_clients()  # the folder's files were put back under their connections: reload the index
            raise

    @staticmethod
    def _documents_of(nodes: Sequence[BaseNode]) -> list[Document]:
        """Nodes given to ``insert_nodes``: each joins as its own document."""
        return [Document(id_=n.ref_doc_id or n.node_id, text=n.get_content(), metadata=dict(n.metadata)) for n in nodes]

    def insert(self, document: Document | Sequence[Document], **insert_kwargs: Any) -> None:
        """Add one document or several in one update (a known id is re-indexed)."""
        documents = [document] if isinstance(document, Document) else list(document)
        self._update(add=documents, remove=[d.doc_id for d in documents if d.doc_id in self.documents])

    def _insert(self, nodes: Sequence[BaseNode], **insert_kwargs: Any) -> None:
        self.insert(self._documents_of(nodes))

    def delete_ref_doc(self, ref_doc_id: str, delete_from_docstore: bool = False, **delete_kwargs: Any) -> None:
        """Remove a document and everything built from it (what stood on it is rewritten)."""
        if ref_doc_id not in self.documents:
            raise KeyError(f"no document {ref_doc_id!r} in this index")
        self._update(add=[], remove=[ref_doc_id])

    def _delete_node(self, node_id: str, **delete_kwargs: Any) -> None:
        """Remove the documents a chunk belongs to (a summary goes with its children, not alone)."""
        doc_ids = [d for d, info in self.documents.items() if node_id in info["chunks"]]
        if not doc_ids:
            raise KeyError(f"{node_id!r} is not a chunk of this index (summaries go with their children)")
        self._update(add=[], remove=doc_ids)

    def update_ref_doc(self, document: Document, **update_kwargs: Any) -> None:
        """Re-index a document whose text changed (same id)."""
        self.insert(document)

    def refresh_ref_docs(self, documents: Sequence[Document], **update_kwargs: Any) -> list[bool]:
        """Insert new documents and re-index changed ones (by content hash) in one update; returns which
        documents changed. Documents missing from ``documents`` stay (``delete_ref_doc`` them)."""
        fresh = [d.doc_id not in self.documents or self.documents[d.doc_id]["hash"] != document_hash(d) for d in documents]
        changed = [d for d, f in zip(documents, fresh, strict=True) if f]
        if changed:
            self.insert(changed)
        return fresh

    @property
    def ref_doc_info(self) -> dict[str, RefDocInfo]:
        return {d: RefDocInfo(node_ids=list(info["chunks"]), metadata={"title": info["title"]}) for d, info in self.documents.items()}


def update_document_index(index: DocumentIndex[Any], passages: Sequence[Passage]) -> UpdateReport:
    """Make ``index`` hold exactly ``passages``: the ones it lacks removed one by one, the new and the changed (by
    hash) added in one update; the index persists each change. Summaries rewritten are summed from each update's
    ``last_update`` (the ``update`` of every method kept in a :class:`DocumentIndex`)."""
    started, before = time.perf_counter(), index.llm.usage
    documents = [p.to_llama_index() for p in passages]
    wanted = {d.doc_id for d in documents}
    report = UpdateReport(removed=[d for d in index.documents if d not in wanted])
    for doc_id in report.removed:
        index.delete_ref_doc(doc_id)
        report.summaries_rewritten += index.last_update.get("summaries_rewritten", 0)
    known = set(index.documents)
    fresh = index.refresh_ref_docs(documents)
    if any(fresh):  # else last_update is the last removal's, counted already
        report.summaries_rewritten += index.last_update.get("summaries_rewritten", 0)
    report.added = [d.doc_id for d, f in zip(documents, fresh, strict=True) if f and d.doc_id not in known]
    report.changed = [d.doc_id for d, f in zip(documents, fresh, strict=True) if f and d.doc_id in known]
    report.llm_calls, report.seconds = (index.llm.usage - before).calls, time.perf_counter() - started
    return report
