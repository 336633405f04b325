"""A RAPTOR tree over leaf nodes: cluster a layer, summarise each cluster, repeat (§4.1).

Used for both of SiReRAG's trees. Summaries are asked through LlamaIndex's ``tree_summarize``
synthesizer with the RAPTOR pack's prompt, several at once (threads, bounded), so they also
work inside a running event loop. A summary that fails or comes back empty is not indexed:
its cluster's children simply get no parent at that level, and the failure is counted.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llama_index.core import get_response_synthesizer
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import NodeWithScore, TextNode
from tqdm.auto import tqdm

from llama_index_sirerag.prompts import SUMMARY_QUERY
from multihop_rag.clustering import ClusterConfig, cluster
from multihop_rag.text import count_tokens

__all__ = ["TreeNode", "build_tree", "node_id"]

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
    embedding: list[float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def node_id(tree: str, kind: str, level: int, text: str) -> str:
    """Content-derived id: the same text at the same place gets the same id in every build."""
    return f"{tree[:3]}-{kind[:3]}{level}-" + hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass
class _Summarizer:
    llm: LLM

    def __call__(self, texts: Sequence[str]) -> str | None:
        synthesizer = get_response_synthesizer(response_mode="tree_summarize", llm=self.llm)
        try:
            response = synthesizer.synthesize(SUMMARY_QUERY, [NodeWithScore(node=TextNode(text=t)) for t in texts])
        except Exception as exc:  # a model error must not end a long build
            log.warning("summary failed (%s: %s); cluster left without a summary", type(exc).__name__, exc)
            return None
        text = (response.response or "").strip()
        return None if not text or text == "Empty Response" else text


def build_tree(
    leaves: Sequence[TreeNode],
    *,
    llm: LLM,
    embed_model: BaseEmbedding,
    clustering: ClusterConfig,
    depth: int,
    tree: str,
    extra_first_clusters: Sequence[Sequence[int]] = (),
    workers: int = 4,
    failures: list[str] | None = None,
    show_progress: bool = True,
) -> list[TreeNode]:
    """Leaves plus up to ``depth`` levels of summaries. Leaves must carry embeddings.

    ``extra_first_clusters`` (indices into ``leaves``) are summarised with the first level's
    clusters (ablation E's entity clusters).
    """
    nodes = list(leaves)
    layer = list(leaves)
    summarize = _Summarizer(llm)
    for level in range(1, depth + 1):
        if len(layer) <= 1:
            break
        clusters = cluster([n.embedding for n in layer], [count_tokens(n.text) for n in layer], clustering)
        if level == 1:
            clusters += [sorted(c) for c in extra_first_clusters if c]
        texts = [[layer[i].text for i in members] for members in clusters]
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            summaries = list(
                tqdm(
                    pool.map(summarize, texts),
                    total=len(texts),
                    desc=f"{tree} level {level} summaries",
                    disable=not show_progress,
                )
            )
        made = [(members, text) for members, text in zip(clusters, summaries, strict=True) if text]
        if failures is not None:
            failures.extend(f"{tree} level {level} cluster {i}" for i, text in enumerate(summaries) if not text)
        if not made:
            break
        embeddings = embed_model.get_text_embedding_batch([text for _, text in made], show_progress=False)
        new_layer: dict[str, TreeNode] = {}
        for (members, text), embedding in zip(made, embeddings, strict=True):
            nid = node_id(tree, "summary", level, text)
            node = new_layer.setdefault(
                nid, TreeNode(id=nid, text=text, tree=tree, level=level, kind="summary", embedding=embedding)
            )
            for i in members:
                child = layer[i]
                if child.id not in node.children:
                    node.children.append(child.id)
                if nid not in child.parents:
                    child.parents.append(nid)
        layer = list(new_layer.values())
        nodes.extend(layer)
    return nodes
