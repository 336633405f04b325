"""The Hierarchical Weighted Directed Acyclic Graph (HWDAG) of §3.1 and the search score of §3.2.2.

Level 1 holds the 300-token chunks, level l+1 the Information Points (IPs) summarized from
batches of level l. An edge ``e[i, j]`` goes from a higher node ``i`` to a node ``j`` of the batch
it was summarized from; the edges leaving each higher node sum to 1 (Appendix B.1).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from multihop_rag.indexing.persistence import write_atomic

__all__ = ["GraphNode", "SummaryGraph", "normalize_edges", "position_weighted", "next_node_scores", "node_id"]


def node_id(level: int, text: str, children: Iterable[str] = ()) -> str:
    """Stable id from a node's level, text and children."""
    blob = json.dumps([level, text, sorted(children)])
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


@dataclass
class GraphNode:
    """One node: a chunk (level 1) or an Information Point (level ≥ 2)."""

    id: str
    text: str
    level: int
    tokens: int
    doc_ids: list[str] = field(default_factory=list)


def normalize_edges(weights: np.ndarray) -> np.ndarray:
    """Rows scaled to sum to 1 (Appendix B.1); negative weights count as 0, an all-zero row becomes uniform."""
    weights = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    if weights.ndim != 2 or weights.shape[1] == 0:
        raise ValueError(f"need a non-empty 2-D weight matrix, got shape {weights.shape}")
    sums = weights.sum(axis=1, keepdims=True)
    uniform = np.full_like(weights, 1.0 / weights.shape[1])
    return np.where(sums > 0, weights / np.where(sums > 0, sums, 1.0), uniform)


def position_weighted(attention: Sequence[float]) -> np.ndarray:
    """§3.2.2's empirical normalisation: the k-th visited node's attention to the query times its
    position k + 1 (the query holds position 1)."""
    return np.asarray(attention, dtype=np.float64) * np.arange(2, len(attention) + 2)


def _unit_sum(values: np.ndarray) -> np.ndarray:
    total = values.sum()
    return values / total if total > 0 else values


def next_node_scores(
    adjacency: sparse.spmatrix,
    query_attention: np.ndarray | None,
    similarity: np.ndarray | None,
    visited: np.ndarray,
) -> np.ndarray:
    """Score of every node as the next one to visit (§3.2.2, Appendix B.2).

    ``z = Eᵀa``: ``a`` holds the (position-weighted) attention of each visited node to the query
    and 0 elsewhere, so a node scores by the attention its visited predecessors pay to the query,
    weighted by their edges to it. ``z`` and the query–node embedding similarity are each
    normalised to sum to 1 over the unvisited nodes and added. Either part may be ``None``
    (Table 2's "w/o attention search" / "w/o embedding similarity search"). Visited nodes get -inf.
    """
    n = adjacency.shape[0]
    open_ = ~visited
    total = np.zeros(n)
    if query_attention is not None:
        z = np.asarray(adjacency.T @ np.where(visited, query_attention, 0.0)).ravel()
        total += _unit_sum(np.where(open_, np.clip(z, 0.0, None), 0.0))
    if similarity is not None:
        # Cosine similarity can be negative; negatives count as 0 so the parts stay a distribution.
        total += _unit_sum(np.where(open_, np.clip(similarity, 0.0, None), 0.0))
    return np.where(open_, total, -np.inf)


@dataclass
class SummaryGraph:
    """Nodes, weighted edges (parent id -> child id -> weight) and unit-norm node embeddings."""

    nodes: list[GraphNode]
    edges: dict[str, dict[str, float]]
    embeddings: np.ndarray
    edge_source: str
    """How edges were weighted: ``"attention"`` (Appendix B.1) or ``"embedding"`` (fallback)."""

    def __post_init__(self) -> None:
        self.position = {node.id: i for i, node in enumerate(self.nodes)}
        if len(self.position) != len(self.nodes):
            raise ValueError("node ids must be unique")
        if self.embeddings.shape[0] != len(self.nodes):
            raise ValueError(f"{len(self.nodes)} nodes but {self.embeddings.shape[0]} embeddings")

    @property
    def levels(self) -> dict[int, list[GraphNode]]:
        """Nodes by level, 1 = chunks."""
        out: dict[int, list[GraphNode]] = {}
        for node in self.nodes:
            out.setdefault(node.level, []).append(node)
        return dict(sorted(out.items()))

    @property
    def top_level(self) -> list[GraphNode]:
        """The highest level: where every search starts."""
        return list(self.levels.values())[-1] if self.nodes else []

    def node(self, node_id_: str) -> GraphNode:
        return self.nodes[self.position[node_id_]]

    def children(self, node_id_: str) -> dict[str, float]:
        """Lower nodes this node was summarized from, with edge weights."""
        return dict(self.edges.get(node_id_, {}))

    def parents(self, node_id_: str) -> dict[str, float]:
        """Higher nodes summarized from this node, with edge weights."""
        return {p: kids[node_id_] for p, kids in self.edges.items() if node_id_ in kids}

    def adjacency(self) -> sparse.csr_matrix:
        """E with ``E[i, j] = e(i, j)`` over node positions."""
        rows, cols, vals = [], [], []
        for parent, kids in self.edges.items():
            for child, weight in kids.items():
                rows.append(self.position[parent])
                cols.append(self.position[child])
                vals.append(weight)
        n = len(self.nodes)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))

    def similarity(self, query_embedding: Sequence[float]) -> np.ndarray:
        """Cosine similarity of the query to every node."""
        q = np.asarray(query_embedding, dtype=np.float64)
        q = q / (np.linalg.norm(q) or 1.0)
        return self.embeddings @ q

    def to_networkx(self) -> Any:
        """The graph as a ``networkx.DiGraph`` (node attributes: text, level; edge attribute: weight)."""
        import networkx as nx

        g = nx.DiGraph()
        for node in self.nodes:
            g.add_node(node.id, text=node.text, level=node.level)
        for parent, kids in self.edges.items():
            for child, weight in kids.items():
                g.add_edge(parent, child, weight=weight)
        return g

    # ---- persistence ----

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        payload = {"edge_source": self.edge_source, "nodes": [asdict(n) for n in self.nodes], "edges": self.edges}
        write_atomic(folder / "graph.json", json.dumps(payload))
        buffer = io.BytesIO()
        np.save(buffer, self.embeddings.astype(np.float32))
        write_atomic(folder / "embeddings.npy", buffer.getvalue())

    @classmethod
    def load(cls, folder: Path) -> SummaryGraph:
        payload = json.loads((folder / "graph.json").read_text())
        return cls(
            nodes=[GraphNode(**n) for n in payload["nodes"]],
            edges=payload["edges"],
            embeddings=np.load(folder / "embeddings.npy").astype(np.float64),
            edge_source=payload["edge_source"],
        )

    def __repr__(self) -> str:
        sizes = ", ".join(f"L{level}: {len(nodes)}" for level, nodes in self.levels.items())
        return f"SummaryGraph({len(self.nodes)} nodes [{sizes}], {sum(map(len, self.edges.values()))} edges, {self.edge_source} edges)"
