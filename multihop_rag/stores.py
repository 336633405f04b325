"""Every vector-store access of the package: ChromaDB (a folder, a server URL, or in memory) for
LlamaIndex and LangChain, and the few operations the indexes need on *any* store — which ids it
holds, deleting and clearing, the distance space of its scores, a metadata filter in its dialect.

Collections are made with the cosine space and no Chroma embedding function: embeddings always
come from the framework's embedding model, so Chroma never tries to download its own.

A build writes into an empty store: :func:`ensure_empty` refuses a store that holds another
build's entries (one line naming the store and the ``overwrite`` option) or clears it when asked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import chromadb
import numpy as np
from chromadb.config import Settings
from llama_index.core.vector_stores.simple import SimpleVectorStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from llama_index.vector_stores.chroma import ChromaVectorStore

from multihop_rag.errors import StoreError

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "is_server",
    "chroma_client",
    "chroma_collection",
    "chroma_vector_store",
    "langchain_chroma",
    "stored_ids",
    "delete_ids",
    "clear_store",
    "ensure_empty",
    "describe_store",
    "distance_space",
    "cosine_from_distance",
    "query_distances",
    "stored_embeddings",
    "lc_stored_ids",
    "lc_delete_ids",
    "lc_metadata_filter",
    "copy_langchain_chroma",
    "forget_chroma_clients",
    "ChromaEntries",
    "outside_entries",
    "LangChainChromaEntries",
    "lc_outside_entries",
    "batched",
]


def batched(items: Sequence[T], size: int = 1024) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size``: how every store write and delete is sent (a store
    caps one request's size; Chroma's is a few thousand)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def is_server(store: str | Path | None) -> bool:
    return isinstance(store, str) and store.startswith(("http://", "https://"))


def chroma_client(store: str | Path | None = None) -> chromadb.ClientAPI:
    """``None``: in memory; ``http(s)://host:port``: a Chroma server; anything else: a folder."""
    settings = Settings(anonymized_telemetry=False)
    if store is None:
        return chromadb.EphemeralClient(settings=settings)
    if is_server(store):
        url = urlparse(str(store))
        try:
            return chromadb.HttpClient(
                host=url.hostname or "127.0.0.1", port=url.port or 8000, ssl=url.scheme == "https", settings=settings
            )
        except Exception as exc:  # chromadb raises ValueError/ConnectionError variants for an unreachable server
            raise StoreError(
                f"no Chroma server answers at {store} ({type(exc).__name__}): start one with "
                f"'chroma run --host {url.hostname or '127.0.0.1'} --port {url.port or 8000} --path <folder>', or give a folder"
            ) from None
    path = Path(store).expanduser().resolve()  # Chroma keeps one client per path string
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def forget_chroma_clients() -> None:
    """Close every Chroma client this process opened, so the next one reads the folder anew (after its files
    were put back by an undone update: a kept client would still read the files it had open)."""
    chromadb.api.client.SharedSystemClient.clear_system_cache()


def chroma_collection(client: chromadb.ClientAPI, name: str) -> chromadb.Collection:
    """Get or create collection ``name`` with cosine distance and no embedding function."""
    return client.get_or_create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})


def chroma_vector_store(store: str | Path | None, name: str) -> ChromaVectorStore:
    """A LlamaIndex vector store on collection ``name`` of ``store``."""
    return ChromaVectorStore(chroma_collection=chroma_collection(chroma_client(store), name))


def langchain_chroma(store: str | Path | None, name: str, embeddings: Any) -> Any:
    """A LangChain ``Chroma`` vector store on collection ``name`` of ``store``, embedding with ``embeddings``."""
    from langchain_chroma import Chroma

    return Chroma(
        client=chroma_client(store),
        collection_name=name,
        embedding_function=embeddings,
        collection_metadata={"hnsw:space": "cosine"},
    )


# ---- any LlamaIndex vector store ---------------------------------------------------------------


def stored_ids(vector_store: BasePydanticVectorStore) -> set[str]:
    """Ids of every entry in a LlamaIndex vector store."""
    if isinstance(vector_store, ChromaVectorStore):
        return set(vector_store.client.get(include=[])["ids"])
    if isinstance(vector_store, SimpleVectorStore):
        return set(vector_store.data.embedding_dict)
    return {node.node_id for node in vector_store.get_nodes(node_ids=None)}


def delete_ids(vector_store: BasePydanticVectorStore, ids: Iterable[str]) -> None:
    for part in batched(list(ids)):
        vector_store.delete_nodes(node_ids=list(part))


def clear_store(vector_store: BasePydanticVectorStore) -> None:
    """Remove every entry (ids known first, then deleted in batches: Chroma's own clear loads all of them)."""
    delete_ids(vector_store, stored_ids(vector_store))


def describe_store(vector_store: BasePydanticVectorStore) -> str:
    """A name for the store in messages: its Chroma collection, or its class."""
    if isinstance(vector_store, ChromaVectorStore):
        return f"Chroma collection {vector_store.client.name!r}"
    return type(vector_store).__name__


def ensure_empty(vector_store: BasePydanticVectorStore, *, overwrite: bool, where: str = "") -> None:
    """Refuse to build into a store that holds entries (another corpus, an earlier build), or clear it
    with ``overwrite=True``: an index's store must hold exactly its own pool."""
    present = stored_ids(vector_store)
    if not present:
        return
    if not overwrite:
        raise StoreError(
            f"{describe_store(vector_store)}{' in ' + where if where else ''} already holds {len(present)} entries "
            "from another build: pass overwrite=True (command line: --overwrite) to replace them, or use an empty store"
        )
    delete_ids(vector_store, present)


def distance_space(vector_store: BasePydanticVectorStore) -> str:
    """The distance a Chroma collection reports (``cosine``, ``l2`` or ``ip``), from its own metadata."""
    if isinstance(vector_store, ChromaVectorStore):
        collection = vector_store.client
        configuration = getattr(collection, "configuration_json", None)
        if isinstance(configuration, dict) and isinstance(hnsw := configuration.get("hnsw"), dict):
            return str(hnsw.get("space", "l2"))
        return str((collection.metadata or {}).get("hnsw:space", "l2"))
    return "cosine"


def cosine_from_distance(distance: float, space: str, query_norm: float = 1.0, stored_norm: float = 1.0) -> float:
    """The cosine similarity behind a Chroma distance in ``space``: cosine distance is ``1 - cos``;
    squared l2 between vectors of norms a, b is ``a² + b² - 2ab·cos``; inner product is ``1 - q·x``."""
    if space == "cosine":
        return 1.0 - distance
    if space == "l2":
        denominator = 2 * query_norm * stored_norm
        return (query_norm**2 + stored_norm**2 - distance) / denominator if denominator else 0.0
    if space == "ip":
        denominator = query_norm * stored_norm
        return (1.0 - distance) / denominator if denominator else 0.0
    raise ValueError(f"unknown distance space {space!r}")


def query_distances(vector_store: ChromaVectorStore, embedding: list[float], n: int) -> list[tuple[str, float]]:
    """``(id, distance)`` of the ``n`` entries nearest ``embedding`` in a Chroma collection."""
    collection = vector_store.client
    n = min(n, collection.count())
    if n <= 0:
        return []
    found = collection.query(query_embeddings=[embedding], n_results=n, include=["distances"])
    return list(zip(found["ids"][0], found["distances"][0], strict=True))


def stored_embeddings(vector_store: BasePydanticVectorStore, ids: list[str]) -> dict[str, np.ndarray]:
    """The stored embeddings of ``ids`` (those the store holds), as float32 arrays."""
    if not ids:
        return {}
    if isinstance(vector_store, ChromaVectorStore):
        got = vector_store.client.get(ids=ids, include=["embeddings"])
        pairs: Iterable[tuple[str, Any]] = zip(got["ids"], got["embeddings"], strict=True)
    elif isinstance(vector_store, SimpleVectorStore):
        pairs = ((i, vector_store.get(i)) for i in ids if i in vector_store.data.embedding_dict)
    else:
        pairs = ((n.node_id, n.get_embedding()) for n in vector_store.get_nodes(node_ids=ids))
    return {i: np.asarray(e, dtype=np.float32) for i, e in pairs}


class ChromaEntries:
    """Saves and restores every entry of a Chroma collection (ids, embeddings, texts, metadata) as files:
    the copy an update of an index takes of a pool it keeps outside its folder (a Chroma server)."""

    PAGE = 5000

    def __init__(self, collection: chromadb.Collection) -> None:
        self.collection = collection

    def save(self, folder: Path) -> None:
        records: dict[str, list[Any]] = {"ids": [], "documents": [], "metadatas": []}
        vectors = []
        for offset in range(0, self.collection.count(), self.PAGE):
            got = self.collection.get(include=["embeddings", "documents", "metadatas"], limit=self.PAGE, offset=offset)
            records["ids"].extend(got["ids"])
            records["documents"].extend(got["documents"] or [])
            records["metadatas"].extend(got["metadatas"] or [])
            vectors.append(np.asarray(got["embeddings"], dtype=np.float32))
        (folder / "entries.json").write_text(json.dumps(records))
        np.save(folder / "embeddings.npy", np.concatenate(vectors) if vectors else np.zeros((0, 0), np.float32))

    def restore(self, folder: Path) -> None:
        records = json.loads((folder / "entries.json").read_text())
        vectors = np.load(folder / "embeddings.npy")
        ids = records["ids"]
        added = sorted(set(self.collection.get(include=[])["ids"]) - set(ids))
        for gone in batched(added):
            self.collection.delete(ids=list(gone))
        for part in batched(list(zip(ids, vectors, records["documents"], records["metadatas"], strict=True))):
            saved_ids, embeddings, documents, metadatas = zip(*part, strict=True)
            self.collection.upsert(ids=list(saved_ids), embeddings=list(embeddings), documents=list(documents),
                                   metadatas=list(metadatas))


def outside_entries(vector_store: BasePydanticVectorStore) -> ChromaEntries | None:
    """What saves and restores the entries of ``vector_store``, an index's pool kept outside its folder: a
    Chroma collection (on a server or elsewhere); None for a ``SimpleVectorStore`` (persisted into the folder).
    Another store cannot be copied: an update cut half-way may leave it apart from the folder (said once per kind)."""
    if isinstance(vector_store, ChromaVectorStore):
        return ChromaEntries(vector_store.client)
    if not isinstance(vector_store, SimpleVectorStore):
        _say_uncopyable(type(vector_store).__name__)
    return None


@cache
def _say_uncopyable(kind: str) -> None:
    """Warn, once per kind of store and process, that an update cannot copy a store of this kind."""
    log.warning("a vector store of type %s cannot be copied before an update: one cut half-way may leave it apart from the index's "
                "folder (rebuild then); a Chroma store can be", kind)


# ---- any LangChain vector store ----------------------------------------------------------------


def lc_stored_ids(store: Any) -> set[str]:
    """Ids of every document in a LangChain vector store (Chroma, or one with an ``index`` dict such as
    ``InMemoryVectorStore``)."""
    from langchain_chroma import Chroma

    if isinstance(store, Chroma):
        return set(store.get(include=[])["ids"])
    store_dict = getattr(store, "store", None)
    if isinstance(store_dict, dict):
        return set(store_dict)
    raise StoreError(f"cannot list the documents of a {type(store).__name__}: pass a Chroma or an in-memory store")


def lc_delete_ids(store: Any, ids: Iterable[str]) -> None:
    for part in batched(list(ids)):
        store.delete(ids=list(part))


class LangChainChromaEntries:
    """Saves and restores the entries of a LangChain ``Chroma`` store (ids, texts, metadata) as a file: the copy
    an update of an index takes of a pool it keeps outside its folder. Restoring deletes the entries added since
    and writes back those removed or changed (the update's few), embedded again by the store's own model."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def save(self, folder: Path) -> None:
        got = self.store.get(include=["documents", "metadatas"])
        (folder / "entries.json").write_text(json.dumps({key: got[key] for key in ("ids", "documents", "metadatas")}))

    def restore(self, folder: Path) -> None:
        saved = json.loads((folder / "entries.json").read_text())
        got = self.store.get(include=["documents", "metadatas"])
        now = {i: (text, meta) for i, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}
        lc_delete_ids(self.store, sorted(set(now) - set(saved["ids"])))
        rows = [(i, text, meta) for i, text, meta in zip(saved["ids"], saved["documents"], saved["metadatas"], strict=True)
                if now.get(i) != (text, meta)]
        for part in batched(rows):
            ids, texts, metadatas = zip(*part, strict=True)
            self.store.add_texts(list(texts), metadatas=list(metadatas), ids=list(ids))


def lc_outside_entries(store: Any) -> LangChainChromaEntries | None:
    """What saves and restores the entries of ``store``, a LangChain vector store an index keeps outside its folder:
    a ``Chroma`` store (a server, a collection elsewhere); another cannot be copied (said once per kind; None)."""
    from langchain_chroma import Chroma

    if isinstance(store, Chroma):
        return LangChainChromaEntries(store)
    _say_uncopyable(type(store).__name__)
    return None


def lc_metadata_filter(store: Any, key: str, value: Any) -> Any:
    """The filter ``metadata[key] == value`` in the dialect of ``store``'s ``similarity_search``: a function
    for stores that take one (``InMemoryVectorStore``), a ``{key: value}`` dict for the others (Chroma,
    FAISS, PGVector …)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    if isinstance(store, InMemoryVectorStore):
        return lambda document: document.metadata.get(key) == value
    return {key: value}


def copy_langchain_chroma(source: Any, folder: Path, name: str) -> None:
    """Make collection ``name`` of the Chroma store in ``folder`` hold exactly the documents of the LangChain Chroma
    store ``source``, copying their embeddings as they are (no embedding again)."""
    target = chroma_collection(chroma_client(folder), name)
    got = source.get(include=["embeddings", "documents", "metadatas"])
    have = set(target.get(include=[])["ids"])
    stale = sorted(have - set(got["ids"]))
    for gone in batched(stale):
        target.delete(ids=list(gone))
    new = [i for i, cid in enumerate(got["ids"]) if cid not in have]
    for part in batched(new):
        target.add(
            ids=[got["ids"][i] for i in part],
            embeddings=[got["embeddings"][i] for i in part],
            documents=[got["documents"][i] for i in part],
            metadatas=[got["metadatas"][i] for i in part],
        )
