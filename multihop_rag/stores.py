"""ChromaDB, the default vector store: a folder (persistent), a server URL, or in memory, for
LlamaIndex (``chroma_vector_store``) and LangChain (``langchain_chroma``).

Collections are made with no Chroma embedding function: embeddings always come from the
framework's embedding model, so Chroma never tries to download its own.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import chromadb
from chromadb.config import Settings
from llama_index.vector_stores.chroma import ChromaVectorStore

__all__ = ["StoreError", "chroma_client", "chroma_collection", "chroma_vector_store", "langchain_chroma", "is_server"]


class StoreError(ValueError):
    """A store is missing, empty or was built differently; the message says what to do."""


def is_server(store: str | Path | None) -> bool:
    return isinstance(store, str) and store.startswith(("http://", "https://"))


def chroma_client(store: str | Path | None = None) -> chromadb.ClientAPI:
    """``None``: in memory; ``http(s)://host:port``: a Chroma server; anything else: a folder."""
    settings = Settings(anonymized_telemetry=False)
    if store is None:
        return chromadb.EphemeralClient(settings=settings)
    if is_server(store):
        url = urlparse(str(store))
        return chromadb.HttpClient(
            host=url.hostname or "127.0.0.1",
            port=url.port or 8000,
            ssl=url.scheme == "https",
            settings=settings,
        )
    path = Path(store).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def chroma_collection(client: chromadb.ClientAPI, name: str) -> chromadb.Collection:
    """Get or create collection ``name`` with cosine distance and no embedding function."""
    return client.get_or_create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"})


def chroma_vector_store(store: str | Path | None, name: str) -> ChromaVectorStore:
    """A LlamaIndex vector store on collection ``name`` of ``store``."""
    return ChromaVectorStore(chroma_collection=chroma_collection(chroma_client(store), name))


def langchain_chroma(store: str | Path | None, name: str, embeddings):
    """A LangChain ``Chroma`` vector store on collection ``name`` of ``store``, embedding with ``embeddings``."""
    from langchain_chroma import Chroma

    return Chroma(
        client=chroma_client(store),
        collection_name=name,
        embedding_function=embeddings,
        collection_metadata={"hnsw:space": "cosine"},
    )
