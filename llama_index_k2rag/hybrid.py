"""K²RAG's hybrid retriever, eq. (3)-(4): score = λ·cos(e(q), e(c)) + (1-λ)·cos(z(q), z(c)).

- e: the dense embedding model; chunks live in the index's vector store (Chroma, the paper's
  dense store, §4.1, or any LlamaIndex store). The store proposes the nearest chunks; the dense
  term is then the exact cosine of the stored vectors, whatever distance the store ranks by
  (Chroma's default l2 read as ``1 - distance`` gave scores of 0.061 and -1.0 for cosines of 0.53 and 0).
- z: the sparse embedding. A chunk's z is its BM25 term-weight vector (Okapi BM25 via ``bm25s``,
  the paper's sparse store), the query's z its term counts; both use bm25s' tokenizer with
  English stop words. The cosine of the two is 0 without shared terms and 1 at most.
- Each store proposes ``candidates`` chunks; eq. (4) is computed exactly for their union (a dense
  cosine missing from the dense proposals is computed from the stored embedding) and the top
  ``similarity_top_k`` are returned. λ = 1 is pure dense search, λ = 0 pure sparse (§3.2.2).

Note: the paper's Algorithm 2 (line 17) retrieves from the BM25 store only, while §3.1.3 and
Figure 8 say hybrid with λ = 0.8; this follows §3.1.3, and λ is a parameter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.vector_store import VectorStoreIndex
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from scipy import sparse

from multihop_rag.indexing.persistence import write_atomic
from multihop_rag.stores import stored_embeddings

__all__ = ["SparseStore", "HybridRetriever", "hybrid_score"]


def hybrid_score(dense_cosine: np.ndarray | float, sparse_cosine: np.ndarray | float, alpha: float) -> np.ndarray:
    """Eq. (4): λ·dense + (1-λ)·sparse."""
    return alpha * np.asarray(dense_cosine) + (1 - alpha) * np.asarray(sparse_cosine)


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def searchable_text(node: BaseNode) -> str:
    """What the sparse index reads of a chunk: its text with its title (the embed view)."""
    return node.get_content(metadata_mode=MetadataMode.EMBED)


class SparseStore:
    """The chunks with a BM25 index over them; gives the sparse cosine of eq. (4) for every chunk."""

    def __init__(self, nodes: Sequence[BaseNode], bm25: bm25s.BM25) -> None:
        self.nodes = list(nodes)
        self.bm25 = bm25
        scores = bm25.scores
        columns = len(scores["indptr"]) - 1  # one per vocabulary term (bm25s stores documents × terms in CSC)
        matrix = sparse.csc_matrix(
            (scores["data"], scores["indices"], scores["indptr"]), shape=(len(self.nodes), columns)
        )
        self._weights = matrix.tocsr()
        self._norms = np.sqrt(np.asarray(self._weights.multiply(self._weights).sum(axis=1)).ravel())
        self._index = {n.node_id: i for i, n in enumerate(self.nodes)}

    @classmethod
    def from_nodes(cls, nodes: Sequence[BaseNode]) -> SparseStore:
        if not nodes:
            raise ValueError("no chunks to index")
        bm25 = bm25s.BM25()
        bm25.index(bm25s.tokenize([searchable_text(n) for n in nodes], stopwords="en", show_progress=False), show_progress=False)
        return cls(nodes, bm25)

    def __len__(self) -> int:
        return len(self.nodes)

    def position(self, node_id: str) -> int:
        return self._index[node_id]

    def cosines(self, query: str) -> np.ndarray:
        """cos(z(query), z(chunk)) for every chunk, in node order."""
        counts: dict[int, float] = {}
        for token in _tokens([query])[0]:
            j = self.bm25.vocab_dict.get(token)
            if j is not None and j < self._weights.shape[1]:
                counts[j] = counts.get(j, 0.0) + 1.0
        if not counts:
            return np.zeros(len(self.nodes))
        ids = np.fromiter(counts, dtype=int)
        q = np.fromiter(counts.values(), dtype=float)
        dots = self._weights[:, ids] @ q
        with np.errstate(divide="ignore", invalid="ignore"):
            cos = dots / (np.linalg.norm(q) * self._norms)
        return np.nan_to_num(np.asarray(cos).ravel())

    def save(self, folder: str | Path) -> None:
        """The BM25 index (bm25s' own files) and the chunk ids in order; the chunks themselves live in
        the index's docstore."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.bm25.save(str(folder / "bm25"), show_progress=False)
        write_atomic(folder / "ids.json", json.dumps([n.node_id for n in self.nodes]))

    @classmethod
    def load(cls, folder: str | Path, nodes: dict[str, BaseNode]) -> SparseStore:
        """Reload what :meth:`save` wrote; ``nodes``: the chunks by id (from the docstore)."""
        folder = Path(folder)
        ids = json.loads((folder / "ids.json").read_text())
        return cls([nodes[i] for i in ids], bm25s.BM25.load(str(folder / "bm25"), show_progress=False))


class HybridRetriever(BaseRetriever):
    """Top-k chunks by eq. (4) over a dense ``VectorStoreIndex`` and a :class:`SparseStore` of the same chunks."""

    def __init__(
        self,
        dense: VectorStoreIndex,
        sparse_store: SparseStore,
        embed_model: BaseEmbedding,
        *,
        alpha: float = 0.8,
        similarity_top_k: int = 10,
        candidates: int = 50,
        **kwargs: Any,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
        self.dense = dense
        self.sparse = sparse_store
        self.embed_model = embed_model
        self.alpha = alpha
        self.similarity_top_k = similarity_top_k
        self.candidates = max(candidates, similarity_top_k)
        super().__init__(**kwargs)

    def _dense_cosines(self, query_embedding: list[float], proposed: Sequence[str], wanted: Sequence[str]) -> dict[str, float]:
        """cos(e(q), e(c)) from the stored vectors, for the dense and the sparse proposals."""
        ids = list(dict.fromkeys([*proposed, *wanted]))
        vectors = stored_embeddings(self.dense.vector_store, ids)
        q = np.asarray(query_embedding, dtype=np.float64)
        q_norm = np.linalg.norm(q) or 1.0
        cos = {}
        for i, vector in vectors.items():
            e = np.asarray(vector, dtype=np.float64)
            cos[i] = float(q @ e / (q_norm * (np.linalg.norm(e) or 1.0)))
        return cos

    def _rank(self, query: str, query_embedding: list[float] | None, proposed: Sequence[str]) -> list[NodeWithScore]:
        sparse_cos = self.sparse.cosines(query) if self.alpha < 1 else np.zeros(len(self.sparse))
        order = np.argsort(-sparse_cos, kind="stable")[: self.candidates]
        sparse_ids = [self.sparse.nodes[i].node_id for i in order if sparse_cos[i] > 0]
        dense_cos = self._dense_cosines(query_embedding, proposed, sparse_ids) if query_embedding is not None else {}
        scored = []
        for node_id in dict.fromkeys([*proposed, *sparse_ids]):
            i = self.sparse.position(node_id)
            score = float(hybrid_score(dense_cos.get(node_id, 0.0), sparse_cos[i], self.alpha))
            scored.append(NodeWithScore(node=self.sparse.nodes[i], score=score))
        scored.sort(key=lambda hit: -(hit.score or 0.0))
        return scored[: self.similarity_top_k]

    def _proposed(self, query_embedding: list[float] | None) -> list[str]:
        if query_embedding is None:
            return []
        retriever = self.dense.as_retriever(similarity_top_k=min(self.candidates, len(self.sparse)))
        return [hit.node.node_id for hit in retriever.retrieve(QueryBundle(query_str="", embedding=query_embedding))]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        embedding = self.embed_model.get_query_embedding(query_bundle.query_str) if self.alpha > 0 else None
        return self._rank(query_bundle.query_str, embedding, self._proposed(embedding))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        embedding = await self.embed_model.aget_query_embedding(query_bundle.query_str) if self.alpha > 0 else None
        proposed = []
        if embedding is not None:
            retriever = self.dense.as_retriever(similarity_top_k=min(self.candidates, len(self.sparse)))
            hits = await retriever.aretrieve(QueryBundle(query_str="", embedding=embedding))
            proposed = [hit.node.node_id for hit in hits]
        return self._rank(query_bundle.query_str, embedding, proposed)
