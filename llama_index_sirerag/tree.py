"""A RAPTOR tree over leaf nodes: cluster a layer, summarise each cluster, repeat (§4.1) — and keep
it up to date as leaves come and go, at the cost of the change.

Used for both of SiReRAG's trees. Summaries are asked through LlamaIndex's ``tree_summarize``
synthesizer with the RAPTOR pack's prompt, ``max_concurrency`` at once. A summary that fails or
comes back empty is not indexed: its cluster's children get no parent at that level, and the
failure is counted.

Updates (:func:`add_leaves`, :func:`remove_leaves`) follow RAPTOR's clustering without redoing it:

- a new leaf joins the existing clusters of level 1 it is likely to belong to: each cluster is an
  isotropic Gaussian around its members' mean embedding (RAPTOR's GMM ran in a UMAP space that is
  not kept: a fitted UMAP can only be stored as a pickle), weighted by its size, and the leaf joins
  every cluster whose responsibility exceeds the same soft threshold (0.1), at least its most likely;
- only the summaries whose children changed are written again, then their parents, up to the root
  (a removed leaf's ancestors likewise; a summary left without children goes too);
- the documented drift bound: a cluster whose text grows past ``max_cluster_tokens`` — more than a
  summary call can read — is clustered again on its own (RAPTOR's re-clustering rule), splitting it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core import get_response_synthesizer
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_sirerag.prompts import SUMMARY_QUERY
from multihop_rag.indexing.clustering import ClusterConfig, DecisionStore, replayable_cluster
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.concurrency import CallLimit, map_bounded

__all__ = ["TreeNode", "TreeBuilder", "as_vectors", "embedder_identity", "node_id", "tree_stats"]

log = logging.getLogger(__name__)


@dataclass
class TreeNode:
    """A node of the retrieval pool."""

    id: str
    text: str
    tree: str
    """``similarity`` or ``relatedness``."""
    level: int
    """0 for leaves (chunks, aggregates, propositions), 1… for summaries."""
    kind: str
    """``chunk``, ``summary``, ``aggregate`` or ``proposition``."""
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    embedding: np.ndarray | None = None
    """float32: a list of Python floats costs ~12 KB per node, an array 1.5 KB (384 dimensions)."""
    metadata: dict[str, Any] = field(default_factory=dict)


def node_id(tree: str, kind: str, level: int, text: str) -> str:
    """Content-derived id: the same text at the same place gets the same id in every build."""
    return f"{tree[:3]}-{kind[:3]}{level}-" + hashlib.sha1(text.encode()).hexdigest()[:16]


def as_vectors(vectors: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Embeddings as the float32 arrays nodes keep."""
    return list(np.asarray(vectors, dtype=np.float32)) if len(vectors) else []


def embedder_identity(embed_model: BaseEmbedding) -> str:
    """What a clustering decision depends on besides the texts: the embedder's class and model."""
    return f"{embed_model.class_name()}:{embed_model.model_name}"


def _vectors(nodes: Sequence[TreeNode]) -> np.ndarray:
    """The nodes' embeddings, one row each (every node of a layer is embedded before it is clustered)."""
    missing = [n.id for n in nodes if n.embedding is None]
    if missing:
        raise ValueError(f"{len(missing)} nodes are not embedded yet, e.g. {missing[0]}")
    return np.vstack([n.embedding for n in nodes if n.embedding is not None])


@dataclass
class TreeBuilder:
    """Builds and updates one tree of a pool (``nodes``: every node of the pool by id)."""

    tree: str
    llm: LLM
    embed_model: BaseEmbedding
    clustering: ClusterConfig
    depth: int
    max_concurrency: int | CallLimit = 1
    """Calls in flight at most: a number, or a limit shared with the other tree built beside this one."""
    show_progress: bool = True
    failures: list[str] = field(default_factory=list)
    rewritten: int = 0
    """Summaries written by the last :meth:`add_leaves` / :meth:`remove_leaves`."""
    splits: int = 0
    """Clusters split because they outgrew ``max_cluster_tokens`` (the drift bound)."""
    decisions: DecisionStore | None = None
    """Where clustering decisions are kept, so a build resumed on another machine makes the same ones."""

    # ---- summaries ----------------------------------------------------------------------------

    def _summarize(self, texts: Sequence[str]) -> str | None:
        synthesizer = get_response_synthesizer(response_mode=ResponseMode.TREE_SUMMARIZE, llm=self.llm)
        try:
            response = synthesizer.synthesize(SUMMARY_QUERY, [NodeWithScore(node=TextNode(text=t)) for t in texts])
        except Exception as exc:  # a model error must not end a long build
            log.warning("summary failed (%s: %s); cluster left without a summary", type(exc).__name__, exc)
            return None
        text = str(response).strip()
        return None if not text or text in ("None", "Empty Response") else text

    def _summaries(self, groups: Sequence[Sequence[str]], desc: str) -> list[str | None]:
        return map_bounded(self._summarize, groups, max_concurrency=self.max_concurrency, desc=desc,
                           show_progress=self.show_progress)

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        return as_vectors(self.embed_model.get_text_embedding_batch(texts, show_progress=False)) if texts else []

    def _cluster(self, nodes: Sequence[TreeNode]) -> list[list[int]]:
        return replayable_cluster([n.text for n in nodes], _vectors(nodes), [count_tokens(n.text) for n in nodes],
                                  self.clustering, store=self.decisions, embedder=embedder_identity(self.embed_model))

    # ---- a whole tree ---------------------------------------------------------------------------

    def build(self, leaves: Sequence[TreeNode], nodes: dict[str, TreeNode],
              extra_first_clusters: Sequence[Sequence[int]] = ()) -> None:
        """Leaves (with embeddings) plus up to ``depth`` levels of summaries, written into ``nodes``.
        ``extra_first_clusters`` (indices into ``leaves``) are summarised with the first level's clusters
        (ablation E's entity clusters)."""
        for leaf in leaves:
            nodes[leaf.id] = leaf
        layer = list(leaves)
        for level in range(1, self.depth + 1):
            if len(layer) <= 1:
                break
            groups = self._cluster(layer)
            if level == 1:
                groups += [sorted(c) for c in extra_first_clusters if c]
            layer = self._add_level(nodes, level, [[layer[i] for i in members] for members in groups])
            if not layer:
                break

    def _add_level(self, nodes: dict[str, TreeNode], level: int, groups: list[list[TreeNode]]) -> list[TreeNode]:
        """Summarise each group of children into a node of ``level``; returns the new nodes."""
        summaries = self._summaries([[c.text for c in g] for g in groups], f"{self.tree} level {level} summaries")
        self.failures.extend(f"{self.tree} level {level} cluster {i}" for i, text in enumerate(summaries) if not text)
        made = [(group, text) for group, text in zip(groups, summaries, strict=True) if text]
        embeddings = self._embed([text for _, text in made])
        new: dict[str, TreeNode] = {}
        for (group, text), embedding in zip(made, embeddings, strict=True):
            nid = node_id(self.tree, "summary", level, text)
            node = new.setdefault(nid, TreeNode(id=nid, text=text, tree=self.tree, level=level, kind="summary", embedding=embedding))
            for child in group:
                if child.id not in node.children:
                    node.children.append(child.id)
                if nid not in child.parents:
                    child.parents.append(nid)
        nodes.update(new)
        self.rewritten += len(made)
        return list(new.values())

    # ---- updates --------------------------------------------------------------------------------

    def _level(self, nodes: dict[str, TreeNode], level: int) -> list[TreeNode]:
        return [n for n in nodes.values() if n.tree == self.tree and n.level == level and n.kind == "summary"]

    def _join(self, leaf: TreeNode, clusters: list[TreeNode], nodes: dict[str, TreeNode]) -> list[TreeNode]:
        """The clusters a new leaf joins (see the module docstring)."""
        x = np.asarray(leaf.embedding, dtype=np.float64)
        scores = []
        for parent in clusters:
            members = np.asarray([nodes[c].embedding for c in parent.children if c in nodes], dtype=np.float64)
            centre = members.mean(axis=0)
            variance = max(float(((members - centre) ** 2).sum(axis=1).mean()) / len(centre), 1e-4)
            log_density = -0.5 * float(((x - centre) ** 2).sum()) / variance - 0.5 * len(centre) * np.log(variance)
            scores.append(np.log(len(members)) + log_density)
        weights = np.exp(np.asarray(scores) - max(scores))
        weights /= weights.sum()
        chosen = [c for c, w in zip(clusters, weights, strict=True) if w > self.clustering.threshold]
        return chosen or [clusters[int(np.argmax(weights))]]

    def add_leaves(self, leaves: Sequence[TreeNode], nodes: dict[str, TreeNode]) -> None:
        """Add leaves (with embeddings) to the tree in ``nodes``; rewrite only the summaries they change."""
        self.rewritten = self.splits = 0
        if not leaves:
            return
        first = self._level(nodes, 1)
        if not first:  # a tree of one layer: clustering it again costs no more than joining
            existing = [n for n in nodes.values() if n.tree == self.tree and n.level == 0]
            self._drop_summaries(nodes)
            self.build([*existing, *leaves], nodes)
            return
        touched: set[str] = set()
        for leaf in leaves:
            nodes[leaf.id] = leaf
            for parent in self._join(leaf, first, nodes):
                parent.children.append(leaf.id)
                leaf.parents.append(parent.id)
                touched.add(parent.id)
        self._refresh(nodes, touched)

    def remove_leaves(self, leaf_ids: Sequence[str], nodes: dict[str, TreeNode]) -> None:
        """Remove leaves; rewrite their ancestors (a summary left without children goes too)."""
        self.rewritten = self.splits = 0
        touched: set[str] = set()
        for lid in leaf_ids:
            leaf = nodes.pop(lid, None)
            if leaf is None:
                continue
            for pid in leaf.parents:
                if pid in nodes:
                    nodes[pid].children.remove(lid)
                    touched.add(pid)
        self._refresh(nodes, touched)

    def _drop_summaries(self, nodes: dict[str, TreeNode]) -> None:
        for nid in [n.id for n in nodes.values() if n.tree == self.tree and n.kind == "summary"]:
            del nodes[nid]
        for node in nodes.values():
            if node.tree == self.tree:
                node.parents = []

    def _detach(self, node: TreeNode, nodes: dict[str, TreeNode], touched: set[str]) -> None:
        nodes.pop(node.id, None)
        for child in node.children:
            if child in nodes and node.id in nodes[child].parents:
                nodes[child].parents.remove(node.id)
        for parent in node.parents:
            if parent in nodes and node.id in nodes[parent].children:
                nodes[parent].children.remove(node.id)
                touched.add(parent)

    def _split(self, node: TreeNode, nodes: dict[str, TreeNode]) -> list[list[TreeNode]]:
        """The drift bound: a cluster too long for one summary call is clustered again on its own."""
        children = [nodes[c] for c in node.children if c in nodes]
        groups = self._cluster(children)
        self.splits += len(groups) > 1
        return [[children[i] for i in g] for g in groups]

    def _refresh(self, nodes: dict[str, TreeNode], touched: set[str]) -> None:
        """Write again, level by level from the bottom, every touched summary; a changed summary touches
        its parents. A summary without children is removed."""
        while touched:
            level = min(nodes[t].level for t in touched if t in nodes) if any(t in nodes for t in touched) else None
            if level is None:
                return
            now = [nodes[t] for t in touched if t in nodes and nodes[t].level == level]
            touched = {t for t in touched if t in nodes and nodes[t].level != level}
            jobs: list[tuple[TreeNode, list[TreeNode]]] = []
            for old in now:
                if not [c for c in old.children if c in nodes]:
                    self._detach(old, nodes, touched)
                    continue
                tokens = sum(count_tokens(nodes[c].text) for c in old.children if c in nodes)
                groups = self._split(old, nodes) if tokens > self.clustering.max_cluster_tokens else [[nodes[c] for c in old.children if c in nodes]]
                jobs.extend((old, g) for g in groups)
            summaries = self._summaries([[c.text for c in g] for _, g in jobs], f"{self.tree} level {level} summaries (update)")
            embeddings = self._embed([s for s in summaries if s])
            vectors = iter(embeddings)
            replaced: dict[str, list[TreeNode]] = {}
            for (old, group), text in zip(jobs, summaries, strict=True):
                if not text:
                    self.failures.append(f"{self.tree} level {level} update of {old.id}")
                    continue
                self.rewritten += 1
                nid = node_id(self.tree, "summary", level, text)
                node = TreeNode(id=nid, text=text, tree=self.tree, level=level, kind="summary", embedding=next(vectors),
                                children=[c.id for c in group])
                replaced.setdefault(old.id, []).append(node)
            for old in now:
                if old.id not in nodes:
                    continue
                successors = replaced.get(old.id, [])
                if len(successors) == 1 and successors[0].id == old.id:
                    continue  # the summary came out the same
                self._detach(old, nodes, touched)
                for node in successors:
                    node.parents = [p for p in old.parents if p in nodes]
                    nodes[node.id] = node
                    for child in node.children:
                        nodes[child].parents.append(node.id)
                    for parent in node.parents:
                        nodes[parent].children.append(node.id)
                        touched.add(parent)
                if not successors:  # its summary failed: its children lose that parent
                    for child in old.children:
                        if child in nodes and old.id in nodes[child].parents:
                            nodes[child].parents.remove(old.id)
            touched = {t for t in touched if t in nodes}


def tree_stats(nodes: dict[str, TreeNode]) -> dict[str, dict[str, int]]:
    """Nodes by tree, then by ``level:kind``."""
    pool: dict[str, dict[str, int]] = {}
    for node in nodes.values():
        level = pool.setdefault(node.tree, {})
        label = f"{node.level}:{node.kind}"
        level[label] = level.get(label, 0) + 1
    return pool

