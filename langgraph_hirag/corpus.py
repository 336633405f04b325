"""HiRAG's two-level corpus: documents by title (sparse, BM25) and chunks within them (dense).

The paper's Indexed Wikicorpus holds one document per entity, found by matching the entity name
against titles with BM25 (§3, §4.3 eq. 3); within the chosen document the chunks are ranked by
dense similarity to the sub-question (eq. 5). The Profile Wikicorpus adds key facts per entity;
here a document's profile is its lead passage, or a short LLM-written profile on request.

- Passages sharing a title are merged, in order, into one document.
- Chunks: uniform windows of ``chunk_size`` tokens per passage (§4.3 "split it into uniform
  chunks"; the authors' code uses ~100-word pieces), stored in any LangChain ``VectorStore`` whose
  ``similarity_search`` takes a metadata filter (Chroma by default — in memory, or in the persist
  folder — ``InMemoryVectorStore``, FAISS, …).
- Titles: a ``bm25s`` index (stop words removed), saved with bm25s' own non-pickle format.
- The store holds exactly the corpus's chunks: a build into a store that holds other entries is
  refused (or replaces them with ``overwrite=True``), and a reload checks the ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.vectorstores import VectorStore
from tqdm.auto import tqdm

from multihop_rag.corpus import Passage
from multihop_rag.errors import CorpusError, StoreError
from multihop_rag.indexing.persistence import (
    read_manifest,
    recover,
    store_lock,
    undoable_update,
    write_atomic,
    write_manifest,
)
from multihop_rag.indexing.text import chunk_tokens
from multihop_rag.stores import (
    batched,
    copy_langchain_chroma,
    forget_chroma_clients,
    langchain_chroma,
    lc_delete_ids,
    lc_metadata_filter,
    lc_outside_entries,
    lc_stored_ids,
)

__all__ = ["HierarchicalCorpus", "TitledDocument", "base_title"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
COLLECTION = "hirag"

PROFILE_PROMPT = """Write a short profile of "{title}" from the text below: its key facts (dates, places, people, roles) as short "attribute: value" lines. Use only the text.

Text: {text}

Profile of {title}:"""
"""The optional LLM profile, standing in for the paper's Profile Wikicorpus (key facts per entity, §3)."""


@dataclass
class TitledDocument:
    """One document of the corpus: all passages sharing a title, with its profile and chunk ids."""

    title: str
    passages: list[str]
    profile: str
    chunk_ids: list[str]
    passage_ids: list[str]
    """The ids of ``passages``, in order."""
    digest: str
    """A hash of the passages' text: a changed document is re-indexed."""


def base_title(title: str) -> str:
    """A title without its disambiguation, normalised: ``"Franco Rossi (director)"`` → ``"franco rossi"``."""
    return " ".join(re.sub(r"\s*\([^)]*\)", "", title).lower().split())


def _title_of(doc: Document | Passage) -> str:
    if isinstance(doc, Passage):
        return doc.title or doc.text.split(".")[0][:80]
    meta = doc.metadata or {}
    title = meta.get("title") or (Path(str(meta["source"])).stem if meta.get("source") else "")
    return str(title) or doc.page_content.split(".")[0][:80]


def _text_of(doc: Document | Passage) -> str:
    return (doc.text if isinstance(doc, Passage) else doc.page_content).strip()


def _id_of(doc: Document | Passage, title: str, text: str) -> str:
    if isinstance(doc, Passage):
        return doc.id
    meta = doc.metadata or {}
    return str(doc.id or meta.get("passage_id") or hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16])


def _merge(documents: Iterable[Document | Passage]) -> dict[str, list[tuple[str, str]]]:
    """Title -> its ``(passage id, text)`` pairs in order; passages without text are left out."""
    merged: dict[str, list[tuple[str, str]]] = {}
    for doc in documents:
        text = _text_of(doc)
        if text:
            title = _title_of(doc)
            merged.setdefault(title, []).append((_id_of(doc, title, text), text))
    return merged


def _digest(passages: Sequence[tuple[str, str]]) -> str:
    return hashlib.sha1(json.dumps(passages).encode()).hexdigest()


def _chunk_id(title: str, index: int) -> str:
    return f"{hashlib.sha1(title.encode()).hexdigest()[:16]}-{index}"


def _tokenize(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def _titled(title: str, passages: Sequence[tuple[str, str]], chunk_size: int) -> TitledDocument:
    chunks = sum((len([c for c in chunk_tokens(text, chunk_size, 0) if c.strip()]) for _, text in passages), 0)
    lead = chunk_tokens(passages[0][1], 3 * chunk_size, 0)[0]
    return TitledDocument(
        title=title,
        passages=[text for _, text in passages],
        profile=lead,
        chunk_ids=[_chunk_id(title, i) for i in range(chunks)],
        passage_ids=[pid for pid, _ in passages],
        digest=_digest(passages),
    )


def _index_chunks(
    store: VectorStore, docs: Sequence[TitledDocument], chunk_size: int, profile_llm: BaseChatModel | None, show_progress: bool
) -> None:
    """Write the chunks of ``docs`` (title, passage id and position in metadata) and, with ``profile_llm``,
    their profiles."""
    texts: list[str] = []
    metadatas: list[dict[str, Any]] = []
    for doc in docs:
        position = 0
        for passage_id, passage in zip(doc.passage_ids, doc.passages, strict=True):
            for chunk in (c for c in chunk_tokens(passage, chunk_size, 0) if c.strip()):
                texts.append(chunk)
                metadatas.append({"title": doc.title, "chunk": position, "passage_id": passage_id})
                position += 1
    if profile_llm is not None:
        for doc in tqdm(docs, desc="HiRAG profiles", disable=not show_progress):
            text = chunk_tokens("\n".join(doc.passages), 1500, 0)[0]
            doc.profile = profile_llm.invoke(PROFILE_PROMPT.format(title=doc.title, text=text)).text.strip()
    ids = [cid for d in docs for cid in d.chunk_ids]
    for part in tqdm(list(batched(list(zip(texts, metadatas, ids, strict=True)), 256)), desc="HiRAG chunk embeddings",
                     disable=not show_progress):
        part_texts, part_metadatas, part_ids = zip(*part, strict=True)
        store.add_texts(list(part_texts), metadatas=list(part_metadatas), ids=list(part_ids))


def _titles_index(docs: Sequence[TitledDocument]) -> bm25s.BM25:
    index = bm25s.BM25()
    index.index(bm25s.tokenize([d.title for d in docs], stopwords="en", show_progress=False), show_progress=False)
    return index


class HierarchicalCorpus:
    """Documents by title (BM25 over titles) with dense-ranked chunks inside each document."""

    def __init__(
        self,
        documents: Sequence[TitledDocument],
        vector_store: VectorStore,
        titles_index: bm25s.BM25,
        *,
        chunk_size: int,
        profiles: str,
        persist_dir: str | Path | None = None,
        store_given: bool = False,
    ) -> None:
        self.documents = list(documents)
        self.persist_dir = Path(persist_dir) if persist_dir is not None else None
        """The folder the corpus was last persisted to or loaded from: updates keep it in step (None: in memory)."""
        self.store_given = store_given
        """The caller gave the vector store (else the corpus opened its own, in its folder or in memory)."""
        self.vector_store = vector_store
        self.titles_index = titles_index
        self.chunk_size = chunk_size
        self.profiles = profiles
        self._by_title = {d.title: d for d in self.documents}

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document | Passage],
        embed_model: Embeddings,
        *,
        vector_store: VectorStore | None = None,
        persist_dir: str | Path | None = None,
        overwrite: bool = False,
        chunk_size: int = 100,
        profile_llm: BaseChatModel | None = None,
        show_progress: bool = True,
    ) -> HierarchicalCorpus:
        """Build the corpus from LangChain ``Document`` s (title in ``metadata["title"]``, else the
        source file name) or :class:`~multihop_rag.corpus.Passage` s.

        ``vector_store``: where the chunks go (default: a Chroma collection in ``persist_dir``, or in
        memory); it must be empty, or ``overwrite=True`` replaces what it holds. ``profile_llm``: write
        each document's profile with this model instead of using its lead passage.
        """
        merged = _merge(documents)
        if not merged:
            raise CorpusError("no documents with text to build a HiRAG corpus from")
        if vector_store is not None:
            store = vector_store
        elif persist_dir is not None:
            store = langchain_chroma(Path(persist_dir) / "chroma", COLLECTION, embed_model)
        else:
            store = langchain_chroma(None, f"{COLLECTION}-{uuid.uuid4().hex[:8]}", embed_model)
        present = lc_stored_ids(store)
        if present and not overwrite:
            raise StoreError(
                f"the vector store for the HiRAG corpus already holds {len(present)} chunks from another build: "
                "pass overwrite=True (command line: --overwrite) to replace them, or use an empty store"
            )
        lc_delete_ids(store, present)
        docs = [_titled(title, passages, chunk_size) for title, passages in merged.items()]
        _index_chunks(store, docs, chunk_size, profile_llm, show_progress)
        log.info("HiRAG corpus: %d documents, %d chunks", len(docs), sum(len(d.chunk_ids) for d in docs))
        corpus = cls(docs, store, _titles_index(docs), chunk_size=chunk_size, profiles="llm" if profile_llm is not None else "lead",
                     store_given=vector_store is not None)
        if persist_dir is not None:
            corpus.persist(persist_dir)
        return corpus

    def __len__(self) -> int:
        return len(self.documents)

    def __repr__(self) -> str:
        chunks = sum(len(d.chunk_ids) for d in self.documents)
        return f"HierarchicalCorpus({len(self.documents)} documents, {chunks} chunks, profiles={self.profiles})"

    @property
    def chunk_ids(self) -> list[str]:
        """Ids of every chunk, document by document."""
        return [cid for d in self.documents for cid in d.chunk_ids]

    def document(self, title: str) -> TitledDocument:
        """The document with this exact title (``KeyError`` if none)."""
        return self._by_title[title]

    def rank_titles(self, entity: str, k: int = 20) -> list[tuple[str, float]]:
        """Up to ``k`` titles by BM25 score against ``entity`` (only titles sharing a term with it)."""
        terms = _tokenize([entity])[0]
        if not terms:
            return []
        scores = np.asarray(self.titles_index.get_scores(terms))
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.documents[i].title, float(scores[i])) for i in order if scores[i] > 0]

    def rank_chunks(self, title: str, query: str) -> list[Document]:
        """The chunks of document ``title``, most similar to ``query`` first (eq. 5)."""
        n = len(self.document(title).chunk_ids)
        return self.vector_store.similarity_search(query, k=n, filter=lc_metadata_filter(self.vector_store, "title", title))

    async def arank_chunks(self, title: str, query: str) -> list[Document]:
        """Async :meth:`rank_chunks`."""
        n = len(self.document(title).chunk_ids)
        return await self.vector_store.asimilarity_search(
            query, k=n, filter=lc_metadata_filter(self.vector_store, "title", title)
        )

    def search(self, query: str, k: int = 1) -> list[Document]:
        """Dense search over every chunk of the corpus (the local stand-in for the paper's web search)."""
        return self.vector_store.similarity_search(query, k=k)

    async def asearch(self, query: str, k: int = 1) -> list[Document]:
        """Async :meth:`search`."""
        return await self.vector_store.asimilarity_search(query, k=k)

    def update(
        self, documents: Iterable[Document | Passage], *, profile_llm: BaseChatModel | None = None, show_progress: bool = False
    ) -> dict[str, list[str]]:
        """Make the corpus hold exactly ``documents``: a title whose passages are new or changed is
        (re-)chunked and embedded, a title gone is deleted, and the title index is rebuilt (BM25, no
        model call). Returns the titles ``added``, ``changed`` and ``removed``.

        A corpus with a folder (built with ``persist_dir``, loaded or persisted) is updated under the folder's
        lock and persisted at the end; cut half-way, the folder and a store the caller gave are put back to the
        last finished corpus (at once, or by the next :meth:`from_persist_dir` after a crash): reload it then."""
        merged = _merge(documents)
        if not merged:
            raise CorpusError("no documents with text: an empty corpus")
        folder = self.persist_dir
        if folder is None:
            return self._update(merged, profile_llm, show_progress)
        try:
            outside = lc_outside_entries(self.vector_store) if self.store_given else None
            with store_lock(folder), undoable_update(folder, outside):
                report = self._update(merged, profile_llm, show_progress)
                self.persist(folder)
        except BaseException:
            forget_chroma_clients()  # the folder's files were put back under their connections
            raise
        return report

    def _update(
        self, merged: dict[str, list[tuple[str, str]]], profile_llm: BaseChatModel | None, show_progress: bool
    ) -> dict[str, list[str]]:
        old = self._by_title
        report: dict[str, list[str]] = {"added": [], "changed": [], "removed": [t for t in old if t not in merged]}
        fresh: list[TitledDocument] = []
        for title, passages in merged.items():
            if title not in old:
                report["added"].append(title)
            elif old[title].digest != _digest(passages):
                report["changed"].append(title)
            else:
                continue
            fresh.append(_titled(title, passages, self.chunk_size))
        gone = [cid for t in report["removed"] + report["changed"] for cid in old[t].chunk_ids]
        lc_delete_ids(self.vector_store, gone)
        _index_chunks(self.vector_store, fresh, self.chunk_size, profile_llm if self.profiles == "llm" else None, show_progress)
        by_title = {d.title: d for d in fresh}
        self.documents = [by_title.get(title) or old[title] for title in merged]
        self._by_title = {d.title: d for d in self.documents}
        self.titles_index = _titles_index(self.documents)
        return report

    def persist(self, persist_dir: str | Path) -> None:
        """Write documents, profiles and the title index (JSON, bm25s files) to ``persist_dir``; chunks in
        a Chroma store elsewhere (in memory) are copied, with their embeddings, to ``persist_dir/chroma``.
        Another kind of store keeps its chunks itself: pass it again to :meth:`from_persist_dir`."""
        from langchain_chroma import Chroma

        folder = Path(persist_dir)
        folder.mkdir(parents=True, exist_ok=True)
        self.persist_dir = folder
        write_atomic(folder / "documents.jsonl", "".join(json.dumps(asdict(doc)) + "\n" for doc in self.documents))
        self.titles_index.save(str(folder / "titles_bm25"), show_progress=False)
        kind = "chroma" if isinstance(self.vector_store, Chroma) else type(self.vector_store).__name__
        write_manifest(folder, "hirag", FORMAT_VERSION, chunk_size=self.chunk_size, profiles=self.profiles,
                       vector_store=kind, status="done", documents=len(self.documents))
        if kind != "chroma":
            log.info("HiRAG corpus: the %s keeps the chunks; pass it again to from_persist_dir()", kind)
            return
        copy_langchain_chroma(self.vector_store, folder / "chroma", COLLECTION)

    @classmethod
    def from_persist_dir(
        cls, persist_dir: str | Path, embed_model: Embeddings, *, vector_store: VectorStore | None = None
    ) -> HierarchicalCorpus:
        """Reload a corpus written by :meth:`persist` (``vector_store``: where the chunks live, if not there).
        The store must hold exactly the corpus's chunks. An update a dead process left half-done is undone first
        (in ``vector_store`` too)."""
        folder = Path(persist_dir)
        if recover(folder, lc_outside_entries(vector_store) if vector_store is not None else None):
            forget_chroma_clients()  # clients opened before would read the files they had open
        meta = read_manifest(folder, "hirag", FORMAT_VERSION)
        with (folder / "documents.jsonl").open() as fh:
            documents = [TitledDocument(**json.loads(line)) for line in fh if line.strip()]
        titles_index = bm25s.BM25.load(str(folder / "titles_bm25"), show_progress=False)
        if vector_store is None and meta.get("vector_store", "chroma") != "chroma":
            raise StoreError(f"{folder}: its chunks live in a {meta['vector_store']}; pass that store as vector_store=")
        store = vector_store or langchain_chroma(folder / "chroma", COLLECTION, embed_model)
        corpus = cls(documents, store, titles_index, chunk_size=meta["chunk_size"], profiles=meta["profiles"],
                     persist_dir=folder, store_given=vector_store is not None)
        present, expected = lc_stored_ids(store), set(corpus.chunk_ids)
        if present != expected:
            raise StoreError(
                f"{folder}: the vector store holds {len(present - expected)} chunks the corpus lacks and lacks "
                f"{len(expected - present)} of its {len(expected)}; rebuild it"
            )
        return corpus
