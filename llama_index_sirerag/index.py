"""SiReRAGIndex: a similarity tree and a relatedness tree flattened into one retrieval pool (§4).

Build (``from_documents``):

1. chunks: LlamaIndex ``SentenceSplitter``; a chunk's text starts with its document's title, as
   in the authors' notebooks (``title + "\\n" + text``);
2. similarity tree (§4.1): RAPTOR over the chunks (:mod:`llama_index_sirerag.tree`);
3. relatedness tree (§4.2): propositions and entities per chunk (Figure 7), proposition
   aggregates by shared entity, then RAPTOR over the aggregates;
4. pool (§4.3): every node of both trees in one vector store, tagged ``tree``, ``level``,
   ``kind``, ``parents`` and ``children``.

LLM calls go through a persistent cache (:class:`multihop_rag.cache.CachedLLM`), so a killed
build resumes without repeating finished calls; node ids derive from their text, so a rebuild or
``insert`` only adds and removes what changed in the vector store.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT_TMPL
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document, TextNode
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_sirerag import prompts
from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.propositions import Aggregate, entity_key, extract_propositions, group_aggregates
from llama_index_sirerag.retriever import SiReRAGRetriever
from llama_index_sirerag.tree import TreeNode, build_tree, node_id
from multihop_rag.cache import CachedLLM, LLMCache, Usage, cached_llm
from multihop_rag.clustering import cluster
from multihop_rag.stores import chroma_vector_store
from multihop_rag.structured import StructuredStats
from multihop_rag.text import count_tokens

__all__ = ["SiReRAGIndex"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def _text_node(node: TreeNode) -> TextNode:
    metadata = {
        "tree": node.tree,
        "level": node.level,
        "kind": node.kind,
        "parents": ",".join(node.parents),
        "children": ",".join(node.children),
        **{k: v for k, v in node.metadata.items() if isinstance(v, (str, int, float, bool))},
    }
    return TextNode(
        id_=node.id,
        text=node.text,
        embedding=node.embedding,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=list(metadata),
    )


class SiReRAGIndex:
    """The SiReRAG retrieval pool and its two trees.

    Use :meth:`from_documents` to build, :meth:`as_retriever` / :meth:`as_query_engine` to query,
    :meth:`persist` / :meth:`from_persist_dir` to save and reload, :meth:`insert` to add documents.
    """

    def __init__(
        self,
        *,
        nodes: dict[str, TreeNode],
        documents: list[Document],
        vector_store: BasePydanticVectorStore,
        llm: LLM,
        embed_model: BaseEmbedding,
        config: SiReRAGConfig,
        stats: dict[str, Any],
    ):
        self.nodes = nodes
        self.documents = documents
        self.vector_store = vector_store
        self.llm = llm
        self.embed_model = embed_model
        self.config = config
        self._stats = stats
        self.vector_index = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model)

    # ---- building -------------------------------------------------------------------------

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: BasePydanticVectorStore | None = None,
        config: SiReRAGConfig | None = None,
        show_progress: bool = True,
        cache: str | Path | LLMCache | None = None,
    ) -> SiReRAGIndex:
        """Build the index. ``cache`` (a SQLite path) keeps LLM calls, so a killed build resumes;
        ``vector_store`` defaults to an in-memory Chroma."""
        config = config or SiReRAGConfig()
        if not documents:
            raise ValueError("SiReRAGIndex needs at least one document")
        index = cls(
            nodes={},
            documents=[],
            vector_store=vector_store or chroma_vector_store(None, f"sirerag-{uuid.uuid4().hex[:8]}"),
            llm=cached_llm(llm, cache),
            embed_model=embed_model,
            config=config,
            stats={},
        )
        index.insert(documents, show_progress=show_progress)
        return index

    def insert(self, documents: Sequence[Document], *, show_progress: bool = True) -> None:
        """Add documents and rebuild both trees; cached LLM calls make unchanged clusters free."""
        known = {d.doc_id for d in self.documents}
        self.documents.extend(d for d in documents if d.doc_id not in known)
        self._rebuild(show_progress)

    def _chunks(self) -> list[TreeNode]:
        splitter = SentenceSplitter(chunk_size=self.config.chunk_size, chunk_overlap=self.config.chunk_overlap)
        chunks: dict[str, TreeNode] = {}
        for doc in self.documents:
            title = str(doc.metadata.get("title") or "")
            for piece in splitter.split_text(doc.text):
                text = f"{title}\n{piece}" if title else piece
                nid = node_id("similarity", "chunk", 0, text)
                chunks.setdefault(
                    nid,
                    TreeNode(id=nid, text=text, tree="similarity", level=0, kind="chunk",
                             metadata={"doc_id": doc.doc_id, "title": title}),
                )
        return list(chunks.values())

    def _embed(self, nodes: Sequence[TreeNode], show_progress: bool) -> None:
        todo = [n for n in nodes if n.embedding is None]
        if not todo:
            return
        vectors = self.embed_model.get_text_embedding_batch([n.text for n in todo], show_progress=show_progress)
        for node, vector in zip(todo, vectors, strict=True):
            node.embedding = vector

    def _rebuild(self, show_progress: bool) -> None:
        config, started = self.config, time.perf_counter()
        usage_before = Usage(**asdict(self.llm.usage)) if isinstance(self.llm, CachedLLM) else Usage()
        structured, failures, seconds = StructuredStats(), [], {}
        previous = {n.id: n.embedding for n in self.nodes.values()}

        chunks = self._chunks()
        for chunk in chunks:
            chunk.embedding = previous.get(chunk.id)
        self._embed(chunks, show_progress)
        seconds["chunk_and_embed"] = time.perf_counter() - started

        tree_args = dict(
            llm=self.llm,
            embed_model=self.embed_model,
            clustering=config.clustering(),
            depth=config.tree_depth,
            workers=config.workers,
            failures=failures,
            show_progress=show_progress,
        )
        propositions, skipped, aggregates = [], [], []
        if config.relatedness or config.dual_clustering_on_chunks:
            mark = time.perf_counter()
            propositions, skipped = extract_propositions(
                self.llm,
                [(c.id, c.metadata.get("doc_id", ""), c.text) for c in chunks],
                max_facts=config.max_propositions,
                max_entities=config.max_entities,
                coreference_rewrite=config.coreference_rewrite,
                workers=config.workers,
                stats=structured,
                show_progress=show_progress,
            )
            seconds["propositions"] = time.perf_counter() - mark

        mark = time.perf_counter()
        extra = self._entity_clusters(chunks, propositions) if config.dual_clustering_on_chunks else []
        pool = build_tree(chunks, tree="similarity", extra_first_clusters=extra, **tree_args)
        seconds["similarity_tree"] = time.perf_counter() - mark

        if config.relatedness and not config.dual_clustering_on_chunks:
            mark = time.perf_counter()
            aggregates = group_aggregates(propositions)
            pool += self._relatedness_tree(propositions, aggregates, tree_args, show_progress)
            seconds["relatedness_tree"] = time.perf_counter() - mark

        mark = time.perf_counter()
        self._sync(pool)
        seconds["vector_store"] = time.perf_counter() - mark
        seconds["total"] = time.perf_counter() - started
        self._stats = self._compute_stats(chunks, propositions, skipped, aggregates, failures, structured, seconds, usage_before)

    def _entity_clusters(self, chunks: list[TreeNode], propositions) -> list[list[int]]:
        """Ablation (E): cluster chunks by the embedding of "This chunk mentions <entities>"."""
        by_chunk: dict[str, list[str]] = {}
        for prop in propositions:
            by_chunk.setdefault(prop.chunk_id, []).extend(prop.entities)
        mentions = []
        for chunk in chunks:
            names = list(dict.fromkeys(by_chunk.get(chunk.id, [])))
            entities = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + (names[-1] if names else "nothing")
            mentions.append(prompts.ENTITY_MENTIONS.format(entities=entities))
        vectors = self.embed_model.get_text_embedding_batch(mentions, show_progress=False)
        return cluster(vectors, [count_tokens(c.text) for c in chunks], self.config.clustering())

    def _relatedness_tree(self, propositions, aggregates: list[Aggregate], tree_args, show_progress) -> list[TreeNode]:
        config = self.config
        prop_nodes = [
            TreeNode(
                id=node_id("relatedness", "proposition", 0, p.text),
                text=p.text,
                tree="relatedness",
                level=0,
                kind="proposition",
                metadata={"entities": "; ".join(p.entities), "chunk_id": p.chunk_id},
            )
            for p in propositions
            if p.entities
        ]
        prop_nodes = list({n.id: n for n in prop_nodes}.values())
        agg_nodes = [
            TreeNode(
                id=node_id("relatedness", "aggregate", 0, a.text),
                text=a.text,
                tree="relatedness",
                level=0,
                kind="aggregate",
                metadata={"entities": "; ".join(a.entities)},
            )
            for a in aggregates
        ]
        leaves = agg_nodes if config.aggregates else prop_nodes
        self._embed(leaves, show_progress)
        if config.relatedness_summaries:
            tree = build_tree(leaves, tree="relatedness", **tree_args)
        else:
            tree = list(leaves)
        if config.index_propositions and config.aggregates:
            self._embed(prop_nodes, show_progress)
            tree += prop_nodes
        if not config.aggregates and not config.index_propositions:
            tree = [n for n in tree if n.kind != "proposition"]
        return tree

    def _sync(self, pool: list[TreeNode]) -> None:
        """Make the vector store hold exactly ``pool``: delete stale nodes, add new ones."""
        new = {n.id: n for n in pool}
        stale = [nid for nid in self.nodes if nid not in new]
        if stale:
            self.vector_store.delete_nodes(node_ids=stale)
        added = [_text_node(n) for nid, n in new.items() if nid not in self.nodes]
        for start in range(0, len(added), 256):
            self.vector_store.add(added[start : start + 256])
        self.nodes = new
        self.vector_index = VectorStoreIndex.from_vector_store(self.vector_store, embed_model=self.embed_model)

    def _compute_stats(self, chunks, propositions, skipped, aggregates, failures, structured, seconds, usage_before):
        entity_counts = Counter()
        for prop in propositions:
            for key in {entity_key(e) for e in prop.entities}:
                entity_counts[key] += 1
        pool: dict[str, dict[str, int]] = {}
        for node in self.nodes.values():
            level = pool.setdefault(node.tree, {})
            label = f"{node.level}:{node.kind}"
            level[label] = level.get(label, 0) + 1
        usage = self.llm.usage if isinstance(self.llm, CachedLLM) else Usage()
        per_entity = list(entity_counts.values())
        return {
            "chunks": len(chunks),
            "propositions": sum(1 for p in propositions if p.entities),
            "propositions_without_entities": sum(1 for p in propositions if not p.entities),
            "entities": len(entity_counts),
            "aggregates": len(aggregates),
            "propositions_per_entity": {
                "avg": round(sum(per_entity) / len(per_entity), 2) if per_entity else 0.0,
                "max": max(per_entity, default=0),
                "min": min(per_entity, default=0),
            },
            "skipped_chunks": len(skipped),
            "failed_summaries": len(failures),
            "pool_size": len(self.nodes),
            "pool": pool,
            "llm": {
                "calls": usage.calls - usage_before.calls,
                "cache_hits": usage.cache_hits - usage_before.cache_hits,
                "prompt_tokens": usage.prompt_tokens - usage_before.prompt_tokens,
                "completion_tokens": usage.completion_tokens - usage_before.completion_tokens,
                "seconds": round(usage.seconds - usage_before.seconds, 1),
            },
            "structured_output": structured.as_dict(),
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
        }

    # ---- querying ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Table 3's figures, the pool by tree and level, LLM calls and tokens, timings of the last build."""
        return json.loads(json.dumps(self._stats))

    def as_retriever(
        self, similarity_top_k: int = 20, tree: str | None = None, kind: str | None = None
    ) -> SiReRAGRetriever:
        """Top-k over the whole pool (§5.4: k = 20), or over one ``tree`` or ``kind`` of node."""
        return SiReRAGRetriever(index=self.vector_index, similarity_top_k=similarity_top_k, tree=tree, kind=kind)

    def as_query_engine(
        self,
        similarity_top_k: int = 20,
        llm: LLM | None = None,
        tree: str | None = None,
        kind: str | None = None,
        **kwargs: Any,
    ) -> RetrieverQueryEngine:
        """LlamaIndex's default QA template with the paper's short-answer instruction (§5.4)."""
        template = PromptTemplate(DEFAULT_TEXT_QA_PROMPT_TMPL.replace("{query_str}", "{query_str}" + prompts.ANSWER_SUFFIX))
        return RetrieverQueryEngine.from_args(
            self.as_retriever(similarity_top_k, tree=tree, kind=kind),
            llm=llm or self.llm,
            text_qa_template=template,
            **kwargs,
        )

    def children(self, node_id_: str) -> list[TreeNode]:
        """Children of a node (summaries' clusters)."""
        return [self.nodes[c] for c in self.nodes[node_id_].children if c in self.nodes]

    # ---- persistence ------------------------------------------------------------------------

    def persist(self, persist_dir: str | Path) -> None:
        """Write the trees, documents, config and stats (JSON) and the pool (Chroma) to ``persist_dir``."""
        folder = Path(persist_dir)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "nodes.jsonl").open("w") as fh:
            for node in self.nodes.values():
                fh.write(json.dumps(asdict(node)) + "\n")
        with (folder / "documents.jsonl").open("w") as fh:
            for doc in self.documents:
                fh.write(json.dumps({"id": doc.doc_id, "text": doc.text, "metadata": doc.metadata}) + "\n")
        (folder / "sirerag.json").write_text(
            json.dumps({"format": FORMAT_VERSION, "config": self.config.model_dump(), "stats": self._stats}, indent=1)
        )
        # The pool also goes to a Chroma folder beside the JSON (a no-op when it already lives there).
        target = chroma_vector_store(folder / "chroma", "sirerag")
        present = set(target._collection.get(include=[])["ids"])
        stale = [i for i in present if i not in self.nodes]
        if stale:
            target.delete_nodes(node_ids=stale)
        missing = [_text_node(n) for n in self.nodes.values() if n.id not in present]
        for start in range(0, len(missing), 256):
            target.add(missing[start : start + 256])

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: BasePydanticVectorStore | None = None,
        cache: str | Path | LLMCache | None = None,
    ) -> SiReRAGIndex:
        """Reload an index written by :meth:`persist` (``vector_store``: where the pool lives, if not there)."""
        folder = Path(persist_dir)
        meta_file = folder / "sirerag.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{folder} holds no SiReRAG index (no sirerag.json)")
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{folder} was written by an incompatible version (format {meta.get('format')})")
        nodes = {}
        for line in (folder / "nodes.jsonl").read_text().splitlines():
            node = TreeNode(**json.loads(line))
            nodes[node.id] = node
        documents = [
            Document(id_=d["id"], text=d["text"], metadata=d["metadata"])
            for d in map(json.loads, (folder / "documents.jsonl").read_text().splitlines())
        ]
        store = vector_store or chroma_vector_store(folder / "chroma", "sirerag")
        return cls(
            nodes=nodes,
            documents=documents,
            vector_store=store,
            llm=cached_llm(llm, cache),
            embed_model=embed_model,
            config=SiReRAGConfig(**meta["config"]),
            stats=meta["stats"],
        )

    def __repr__(self) -> str:
        return f"SiReRAGIndex({len(self.documents)} documents, pool of {len(self.nodes)} nodes)"
