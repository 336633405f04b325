"""SiReRAGIndex: a similarity tree and a relatedness tree flattened into one retrieval pool (§4),
as a LlamaIndex ``BaseIndex``.

Build (``from_documents``) and every update (``insert``, ``delete_ref_doc``, ``update_ref_doc``,
``refresh_ref_docs``) run the same steps on what changed:

1. chunks: LlamaIndex ``SentenceSplitter``; a chunk's text starts with its document's title, as
   in the authors' notebooks (``title + "\\n" + text``);
2. similarity tree (§4.1): RAPTOR over the chunks (:mod:`llama_index_sirerag.tree`): built at once
   the first time, then new chunks join their nearest clusters and only the summaries above a
   change are written again;
3. relatedness tree (§4.2): propositions and entities per *new* chunk (Figure 7), proposition
   aggregates by shared entity from every chunk's propositions (no LLM call), and RAPTOR over the
   aggregates, updated for the aggregates whose text changed (the touched entities);
4. pool (§4.3): every node of both trees in the storage context's vector store — any LlamaIndex
   store: the in-memory ``SimpleVectorStore`` by default, Chroma for the command line — tagged
   ``tree``, ``level``, ``kind``, ``parents`` and ``children``; the store holds exactly the pool.

LLM calls go through the index's own call cache (a SQLite file beside its persisted files, or the
path given as ``cache``), so a killed build resumes without repeating finished calls; they run
``max_concurrency`` at once (default: the model server's parallel slots), the two trees side by side
when that is more than one (stage ``trees``: propositions and the relatedness tree beside the chunks'
embeddings and the similarity tree, so the CPU work of one overlaps the other's calls). ``stats()``
reports each build stage's time, busy share, calls and tokens, and what the last update rewrote.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.chat_engine.types import BaseChatEngine, ChatMode
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.llms.llm import LLM
from llama_index.core.llms.utils import LLMType
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT_TMPL
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import BaseNode, Document, TextNode
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from llama_index_sirerag import prompts
from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.propositions import (
    Proposition,
    entity_key,
    extract_propositions,
    filter_entities,
    group_aggregates,
    titled,
)
from llama_index_sirerag.retriever import SiReRAGRetriever
from llama_index_sirerag.tree import TreeBuilder, TreeNode, as_vectors, embedder_identity, node_id, tree_stats
from multihop_rag.errors import IndexFolderError, StoreError
from multihop_rag.frameworks.llama_index import DocumentIndex, document_hash, open_folder, reload_vector_store
from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine
from multihop_rag.indexing.clustering import replayable_cluster, warm_up
from multihop_rag.indexing.persistence import prepare_folder, read_manifest, write_atomic, write_manifest
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.cache import LLMCache, cached_llm
from multihop_rag.llm.concurrency import CallLimit, side_by_side
from multihop_rag.llm.structured import StructuredStats
from multihop_rag.llm.usage import Stages, Usage
from multihop_rag.option_comparisons import comparison_kinds
from multihop_rag.serving.profile import default_concurrency
from multihop_rag.stores import batched, chroma_vector_store, ensure_empty, stored_embeddings, stored_ids

__all__ = ["SiReRAGIndex", "SiReRAGStruct"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
CACHE_FILE = "llm_calls.sqlite"


@dataclass
class SiReRAGStruct(IndexStruct):
    """The index's entry in the storage context; its trees, documents and propositions are written
    beside it (``sirerag.json``) by :meth:`SiReRAGIndex.persist`."""

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return "sirerag"


def split_chunks(documents: Sequence[Document], config: SiReRAGConfig) -> list[TreeNode]:
    """The leaf chunks of ``documents``: ``SentenceSplitter`` pieces, each starting with its document's title."""
    splitter = SentenceSplitter(chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap)
    chunks: dict[str, TreeNode] = {}
    for doc in documents:
        title = str(doc.metadata.get("title") or "")
        passage = str(doc.metadata.get("passage_id") or doc.doc_id)
        for piece in splitter.split_text(doc.text):
            text = f"{title}\n{piece}" if title else piece
            nid = node_id("similarity", "chunk", 0, f"{doc.doc_id}\n{text}")
            chunks.setdefault(nid, TreeNode(id=nid, text=text, tree="similarity", level=0, kind="chunk",
                                            metadata={"doc_id": doc.doc_id, "passage_id": passage, "title": title}))
    return list(chunks.values())


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
        embedding=node.embedding.tolist() if node.embedding is not None else None,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=list(metadata),
    )


def _links(node: TreeNode) -> str:
    return json.dumps([node.parents, node.children])


class SiReRAGIndex(DocumentIndex[SiReRAGStruct]):
    """The SiReRAG retrieval pool and its two trees.

    ``from_documents`` builds; ``as_retriever`` / ``as_query_engine`` / ``as_chat_engine`` query;
    ``insert``, ``delete_ref_doc``, ``update_ref_doc`` and ``refresh_ref_docs`` update at the cost of
    the change; ``persist`` / ``from_persist_dir`` save and reload.
    """

    index_struct_cls = SiReRAGStruct

    def __init__(
        self,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        config: SiReRAGConfig | None = None,
        storage_context: StorageContext | None = None,
        index_struct: SiReRAGStruct | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = False,
        **kwargs: Any,
    ) -> None:
        self.config = config or SiReRAGConfig()
        self.llm = cached_llm(llm, cache)
        self.embed_model = embed_model
        self.max_concurrency = max_concurrency or default_concurrency(self.llm)
        self.nodes: dict[str, TreeNode] = {}
        """Every node of the pool by id (both trees)."""
        self.documents: dict[str, dict[str, Any]] = {}
        """Document id -> ``{"hash", "title", "chunks"}``."""
        self.propositions: dict[str, list[dict[str, Any]]] = {}
        """Chunk id -> its propositions (``{"id", "position", "text", "entities"}``), or ``[]`` if skipped."""
        self.skipped: list[str] = []
        self.structured = StructuredStats()
        self.failures: list[str] = []
        self.last_update: dict[str, Any] = {}
        self._stages = Stages(lambda: self.llm.usage)
        self._llm_before = Usage()
        self._written: dict[str, str] = {}
        super().__init__(index_struct=index_struct or SiReRAGStruct(), storage_context=storage_context,
                         show_progress=show_progress, **kwargs)
        self._pool = VectorStoreIndex(nodes=[], storage_context=self.storage_context, embed_model=embed_model)

    # ---- building ---------------------------------------------------------------------------------

    @classmethod
    def from_documents(  # type: ignore[override]
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        config: SiReRAGConfig | None = None,
        storage_context: StorageContext | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        persist_dir: str | Path | None = None,
        overwrite: bool = False,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> SiReRAGIndex:
        """Build the index over ``documents``.

        ``vector_store`` (or ``storage_context``) holds the pool: the in-memory ``SimpleVectorStore``
        by default, Chroma in ``persist_dir`` when that is given. It must be empty — a store holding
        another build is refused unless ``overwrite=True``. ``persist_dir``: persist there (and keep
        the LLM-call cache there, so a killed build resumes); ``cache``: another place for the cache.
        """
        if not documents:
            raise ValueError("SiReRAGIndex needs at least one document")
        config = config or SiReRAGConfig()
        own_store = vector_store is None and storage_context is None
        if persist_dir is not None:
            prepare_folder(persist_dir, config.method_name, FORMAT_VERSION, overwrite=overwrite, config=config.model_dump())
            cache = cache if cache is not None else Path(persist_dir) / CACHE_FILE
            if own_store:
                vector_store = chroma_vector_store(Path(persist_dir) / "chroma", "sirerag")
        if storage_context is None:
            storage_context = StorageContext.from_defaults(vector_store=vector_store)
        # The folder's own store holds at most an unfinished build's nodes: it is started again.
        ensure_empty(storage_context.vector_store, overwrite=overwrite or (own_store and persist_dir is not None),
                     where=str(persist_dir or "the storage context"))
        index = cls(llm=llm, embed_model=embed_model, config=config, storage_context=storage_context, cache=cache,
                    max_concurrency=max_concurrency, show_progress=show_progress, **kwargs)
        index.store_given = not own_store
        index._change(add=list(documents), remove=[])
        if persist_dir is not None:
            index.persist(persist_dir)
        return index

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **build_kwargs: Any) -> SiReRAGStruct:
        self._change(add=self._documents_of(nodes), remove=[])
        return self.index_struct

    def _chunks(self, documents: Sequence[Document]) -> list[TreeNode]:
        return split_chunks(documents, self.config)

    def _embed(self, nodes: Sequence[TreeNode]) -> None:
        todo = [n for n in nodes if n.embedding is None]
        if todo:
            vectors = as_vectors(self.embed_model.get_text_embedding_batch([n.text for n in todo], show_progress=self._show_progress))
            for node, vector in zip(todo, vectors, strict=True):
                node.embedding = vector

    def _builder(self, tree: str, limit: CallLimit) -> TreeBuilder:
        return TreeBuilder(tree=tree, llm=self.llm.with_max_sentences(self.config.summary_sentences), embed_model=self.embed_model, clustering=self.config.clustering(),
                           depth=self.config.tree_depth, max_concurrency=limit,
                           show_progress=self._show_progress, failures=self.failures, decisions=self.llm.cache)

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        """Remove documents ``remove`` and add documents ``add``, updating both trees and the store."""
        config, started, before = self.config, time.perf_counter(), self.llm.usage
        rewritten = splits = 0
        first_build = not self.nodes
        if add and first_build:
            warm_up()  # UMAP compiles beside the chunks' embedding (an update clusters only to split a cluster)
        gone = [cid for doc_id in remove for cid in self.documents.pop(doc_id, {}).get("chunks", [])]
        for cid in gone:
            self.propositions.pop(cid, None)
        with self._stages.stage("chunk"):
            chunks = self._chunks(add)
            chunks_of: dict[str, list[str]] = {}
            for chunk in chunks:
                chunks_of.setdefault(chunk.metadata["doc_id"], []).append(chunk.id)
            for doc in add:
                self.documents[doc.doc_id] = {"hash": document_hash(doc), "title": str(doc.metadata.get("title", "")),
                                              "chunks": chunks_of.get(doc.doc_id, [])}
        todo = [c for c in chunks if c.id not in self.propositions] if config.relatedness or config.dual_clustering_on_chunks else []
        # The trees are independent (§4.1, §4.2): built side by side — propositions then the relatedness tree
        # beside the chunks' embeddings then the similarity tree. The first is the longer chain, so its calls go
        # first; the similarity tree's fill the slots its CPU work (embedding every aggregate) and waits between
        # levels leave free. The similarity tree on its own dict, merged back after.
        similarity_nodes = {i: n for i, n in self.nodes.items() if n.tree == "similarity"}
        for nid in similarity_nodes:
            del self.nodes[nid]
        relatedness = config.relatedness and not config.dual_clustering_on_chunks

        def related(limit: CallLimit) -> tuple[int, int]:
            self._extract(todo, limit)
            return self._relatedness(first_build, limit) if relatedness else (0, 0)

        def similar(limit: CallLimit) -> tuple[int, int]:
            self._embed(chunks)
            return self._similarity(similarity_nodes, chunks, gone, first_build, limit)

        try:
            with self._stages.stage("trees"):
                if config.dual_clustering_on_chunks:  # ablation E clusters the chunks by their propositions' entities
                    limit = CallLimit(self.max_concurrency)
                    (r_rewritten, r_splits), (s_rewritten, s_splits) = related(limit), similar(limit)
                else:
                    (r_rewritten, r_splits), (s_rewritten, s_splits) = side_by_side(
                        related, similar, max_concurrency=self.max_concurrency)
        finally:
            self.nodes.update(similarity_nodes)
        rewritten, splits = r_rewritten + s_rewritten, r_splits + s_splits
        with self._stages.stage("vector_store"):
            self._sync()
        spent = self.llm.usage - before
        self.last_update = {
            "added": [d.doc_id for d in add], "removed": list(remove), "summaries_rewritten": rewritten,
            "clusters_split": splits, "llm_calls": spent.calls, "cache_hits": spent.cache_hits,
            "seconds": round(time.perf_counter() - started, 1),
        }
        return self.last_update

    def _similarity(self, nodes: dict[str, TreeNode], chunks: list[TreeNode], gone: list[str], first_build: bool,
                    limit: CallLimit) -> tuple[int, int]:
        """Bring the similarity tree (``nodes``: its nodes only) in line with the chunks; returns the
        summaries written and the clusters split."""
        builder = self._builder("similarity", limit)
        if not (first_build or self.config.dual_clustering_on_chunks):
            builder.remove_leaves(gone, nodes)
            rewritten, splits = builder.rewritten, builder.splits
            builder.add_leaves(chunks, nodes)
            return rewritten + builder.rewritten, splits + builder.splits
        leaves = [TreeNode(**{**asdict(n), "parents": []}) for n in nodes.values() if n.level == 0 and n.id not in gone]
        nodes.clear()
        leaves += chunks
        extra = self._entity_clusters(leaves) if self.config.dual_clustering_on_chunks else []
        builder.build(leaves, nodes, extra_first_clusters=extra)
        return builder.rewritten, builder.splits

    def _extract(self, chunks: Sequence[TreeNode], limit: CallLimit) -> None:
        if not chunks:
            return
        position = len(self.propositions)
        found, skipped = extract_propositions(
            self.llm,
            [(c.id, c.metadata.get("doc_id", ""), c.text) for c in chunks],
            max_facts=self.config.max_propositions,
            max_entities=self.config.max_entities,
            coreference_rewrite=self.config.coreference_rewrite,
            max_concurrency=limit,
            stats=self.structured,
            show_progress=self._show_progress,
            first_position=position,
        )
        for chunk in chunks:
            self.propositions[chunk.id] = []
        for p in found:
            self.propositions[p.chunk_id].append({"id": p.id, "position": list(p.order), "text": p.text, "entities": list(p.entities)})
        self.skipped = [c for c in self.skipped if c in self.propositions] + skipped

    def _all_propositions(self) -> list[Proposition]:
        return [Proposition(p["id"], chunk, tuple(p["position"]), p["text"], tuple(p["entities"]))
                for chunk, props in self.propositions.items() for p in props]

    def _entity_clusters(self, chunks: Sequence[TreeNode]) -> list[list[int]]:
        """Ablation (E): cluster chunks by the embedding of "This chunk mentions <entities>"."""
        by_chunk: dict[str, list[str]] = {}
        for prop in self._all_propositions():
            by_chunk.setdefault(prop.chunk_id, []).extend(prop.entities)
        mentions = []
        for chunk in chunks:
            names = list(dict.fromkeys(by_chunk.get(chunk.id, [])))
            entities = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + (names[-1] if names else "nothing")
            mentions.append(prompts.ENTITY_MENTIONS.format(entities=entities))
        vectors = self.embed_model.get_text_embedding_batch(mentions, show_progress=False)
        return replayable_cluster(mentions, vectors, [count_tokens(c.text) for c in chunks], self.config.clustering(),
                                  store=self.llm.cache, embedder=embedder_identity(self.embed_model))

    def _grouped_propositions(self) -> list[Proposition]:
        """Every proposition, with the entities the relatedness tree groups by (the config's entity filter) and,
        with ``proposition_titles``, its passage's title."""
        kept = filter_entities(self._all_propositions(), drop_common_nouns=self.config.drop_common_noun_entities,
                               max_chunk_share=self.config.max_entity_share)
        if not self.config.proposition_titles:
            return kept
        return titled(kept, {chunk: doc["title"] for doc in self.documents.values() for chunk in doc["chunks"]})

    def _relatedness_leaves(self) -> list[TreeNode]:
        config, propositions = self.config, self._grouped_propositions()
        leaves: list[TreeNode] = []
        if config.aggregates:
            leaves += [TreeNode(id=node_id("relatedness", "aggregate", 0, a.text), text=a.text, tree="relatedness", level=0,
                                kind="aggregate", metadata={"entities": "; ".join(a.entities), "chunk_ids": ",".join(a.chunk_ids)})
                       for a in group_aggregates(propositions, config.max_aggregate_tokens)]
        if config.index_propositions or not config.aggregates:
            leaves += [TreeNode(id=node_id("relatedness", "proposition", 0, p.text), text=p.text, tree="relatedness",
                                level=0, kind="proposition", metadata={"entities": "; ".join(p.entities), "chunk_id": p.chunk_id})
                       for p in propositions if p.entities]
        return list({n.id: n for n in leaves}.values())

    def _relatedness(self, first_build: bool, limit: CallLimit) -> tuple[int, int]:
        """Bring the relatedness tree in line with the propositions: removed and new leaves only."""
        config = self.config
        wanted = {n.id: n for n in self._relatedness_leaves()}
        current = {n.id for n in self.nodes.values() if n.tree == "relatedness" and n.level == 0}
        new = [wanted[i] for i in wanted if i not in current]
        self._embed(new)
        clustered = [n for n in new if n.kind == "aggregate" or not config.aggregates]
        unclustered = {n.id: n for n in new if n.kind != "aggregate" and config.aggregates}
        builder = self._builder("relatedness", limit)
        if not config.relatedness_summaries:
            for i in current - set(wanted):
                del self.nodes[i]
            self.nodes.update({n.id: n for n in new})
            return 0, 0
        if first_build:
            builder.build(clustered, self.nodes)
            self.nodes.update(unclustered)
            return builder.rewritten, 0
        builder.remove_leaves([i for i in current if i not in wanted], self.nodes)
        rewritten = builder.rewritten
        builder.add_leaves(clustered, self.nodes)
        self.nodes.update(unclustered)
        return rewritten + builder.rewritten, builder.splits

    def _sync(self) -> None:
        """Make the vector store hold exactly the pool: delete stale nodes, write new or relinked ones."""
        present = stored_ids(self.vector_store)
        changed = [n for n in self.nodes.values() if n.id not in present or self._written.get(n.id) != _links(n)]
        gone = sorted((present - set(self.nodes)) | {n.id for n in changed if n.id in present})
        for part in batched(gone):
            self._pool.delete_nodes(list(part), delete_from_docstore=True)
        for nodes in batched(changed, 256):
            self._pool.insert_nodes([_text_node(n) for n in nodes])
        self._written = {n.id: _links(n) for n in self.nodes.values()}

    def _llm_spent(self) -> Usage:
        """What this index's builds and updates spent on the LLM (across reloads)."""
        return self.llm.usage + self._llm_before

    @property
    def vector_store(self) -> BasePydanticVectorStore:
        return self.storage_context.vector_store

    # ---- querying -----------------------------------------------------------------------------------

    def as_retriever(
        self, similarity_top_k: int = 20, tree: str | None = None, kind: str | None = None, **kwargs: Any
    ) -> SiReRAGRetriever:
        """Top-k over the whole pool (§5.4: k = 20), or over one ``tree`` or ``kind`` of node."""
        return SiReRAGRetriever(index=self._pool, similarity_top_k=similarity_top_k, tree=tree, kind=kind)

    def as_query_engine(  # type: ignore[override]
        self,
        llm: LLM | None = None,
        similarity_top_k: int = 20,
        tree: str | None = None,
        kind: str | None = None,
        **kwargs: Any,
    ) -> BaseQueryEngine:
        """LlamaIndex's default QA template with the paper's short-answer instruction (§5.4); with the config's
        ``compare_years`` or ``compare_quantities``, those comparisons decided by the values the retrieved nodes give
        (:class:`~multihop_rag.frameworks.llama_index_comparisons.ComparisonsDecidedQueryEngine`)."""
        template = PromptTemplate(DEFAULT_TEXT_QA_PROMPT_TMPL.replace("{query_str}", "{query_str}" + prompts.ANSWER_SUFFIX))
        retriever: BaseRetriever = self.as_retriever(similarity_top_k, tree=tree, kind=kind)
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm or self.llm, text_qa_template=template, **kwargs)
        kinds = comparison_kinds(years=self.config.compare_years, quantities=self.config.compare_quantities)
        return ComparisonsDecidedQueryEngine(engine=engine, llm=llm or self.llm, kinds=kinds) if kinds else engine

    def as_chat_engine(self, chat_mode: ChatMode = ChatMode.BEST, llm: LLMType | None = None, **kwargs: Any) -> BaseChatEngine:
        """LlamaIndex's chat engines over the pool, answering with this index's LLM unless given another."""
        return super().as_chat_engine(chat_mode=chat_mode, llm=llm or self.llm, **kwargs)

    def children(self, node_id_: str) -> list[TreeNode]:
        """Children of a node (summaries' clusters)."""
        return [self.nodes[c] for c in self.nodes[node_id_].children if c in self.nodes]

    def source_passages(self, node_id_: str) -> list[str]:
        """The passages a pool node holds or was written from, in order: a chunk's own; a proposition's or an
        aggregate's chunks'; a summary's children's."""
        node = self.nodes[node_id_]
        if node.kind == "chunk":
            return [str(node.metadata["passage_id"])]
        if node.kind == "summary":
            chunks = [p for child in node.children if child in self.nodes for p in self.source_passages(child)]
        else:
            ids = str(node.metadata.get("chunk_ids") or node.metadata.get("chunk_id") or "").split(",")
            chunks = [str(self.nodes[c].metadata["passage_id"]) for c in ids if c in self.nodes]
        return list(dict.fromkeys(chunks))

    def stats(self) -> dict[str, Any]:
        """Table 3's figures, the pool by tree and level, calls and tokens by build stage, the last update, the cache."""
        propositions = self._all_propositions()
        entity_counts: Counter[str] = Counter()
        for prop in propositions:
            for key in {entity_key(e) for e in prop.entities}:
                entity_counts[key] += 1
        per_entity = list(entity_counts.values())
        grouped = {entity_key(e) for prop in self._grouped_propositions() for e in prop.entities}
        return {
            "documents": len(self.documents),
            "chunks": sum(1 for n in self.nodes.values() if n.kind == "chunk"),
            "propositions": sum(1 for p in propositions if p.entities),
            "propositions_without_entities": sum(1 for p in propositions if not p.entities),
            "entities": len(entity_counts),
            "entities_filtered_out": len(entity_counts) - len(grouped),
            "aggregates": sum(1 for n in self.nodes.values() if n.kind == "aggregate"),
            "propositions_per_entity": {
                "avg": round(sum(per_entity) / len(per_entity), 2) if per_entity else 0.0,
                "max": max(per_entity, default=0),
                "min": min(per_entity, default=0),
            },
            "skipped_chunks": len(self.skipped),
            "failed_summaries": len(self.failures),
            "pool_size": len(self.nodes),
            "pool": tree_stats(self.nodes),
            "llm": self._llm_spent().as_dict(),
            "structured_output": self.structured.as_dict(),
            "stages": self._stages.figures,
            "last_update": self.last_update,
            "cache": self.llm.cache.describe() if self.llm.cache is not None else None,
        }

    # ---- persistence --------------------------------------------------------------------------------

    def persist(self, persist_dir: str | Path) -> None:
        """Write the storage context (docstore, index store, a simple vector store) and the trees,
        documents and propositions (``sirerag.json``) to ``persist_dir``. A Chroma pool lives in its
        own folder (the one ``from_documents(persist_dir=…)`` made); another store keeps its nodes
        itself: pass it again to :meth:`from_persist_dir`."""
        folder = Path(persist_dir)
        self.persist_folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.storage_context.persist(persist_dir=str(folder))
        nodes = [asdict(replace(n, embedding=None)) for n in self.nodes.values()]
        payload = {"nodes": nodes, "documents": self.documents, "propositions": self.propositions,
                   "skipped": self.skipped, "failures": self.failures, "stages": self._stages.figures,
                   "structured": self.structured.as_dict(), "last_update": self.last_update, "llm": self._llm_spent().as_dict()}
        write_atomic(folder / "sirerag.json", json.dumps(payload))
        store = type(self.vector_store).__name__
        write_manifest(folder, self.config.method_name, FORMAT_VERSION, status="done", config=self.config.model_dump(),
                       store_outside=self.store_outside,
                       vector_store=store, pool_index_id=self._pool.index_id, index_id=self.index_id,
                       documents=len(self.documents), pool_size=len(self.nodes))

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        vector_store: BasePydanticVectorStore | None = None,
        cache: str | Path | LLMCache | None = None,
        max_concurrency: int | None = None,
    ) -> SiReRAGIndex:
        """Reload an index written by :meth:`persist`; its vector store must hold exactly its pool."""
        folder = open_folder(persist_dir, vector_store)
        manifest = read_manifest(folder, ("sirerag", "raptor"), FORMAT_VERSION)
        storage = StorageContext.from_defaults(
            persist_dir=str(folder), vector_store=reload_vector_store(folder, manifest, "sirerag", vector_store))
        index = cls.__new__(cls)
        index._restore(folder, manifest, llm=llm, embed_model=embed_model, storage=storage,
                       cache=cache if cache is not None else folder / CACHE_FILE, max_concurrency=max_concurrency)
        index.persist_folder, index.store_given = folder, vector_store is not None
        return index

    def _restore(self, folder: Path, manifest: dict[str, Any], *, llm: LLM, embed_model: BaseEmbedding,
                 storage: StorageContext, cache: str | Path | LLMCache | None, max_concurrency: int | None) -> None:
        payload = json.loads((folder / "sirerag.json").read_text())
        struct = SiReRAGStruct(index_id=manifest["index_id"])
        SiReRAGIndex.__init__(self, llm=llm, embed_model=embed_model, config=SiReRAGConfig(**manifest["config"]),
                              storage_context=storage, index_struct=struct, cache=cache, max_concurrency=max_concurrency)
        pool = load_index_from_storage(storage, index_id=manifest["pool_index_id"], embed_model=embed_model)
        if not isinstance(pool, VectorStoreIndex):
            raise IndexFolderError(f"{folder}: the pool is a {type(pool).__name__}, not a VectorStoreIndex")
        self._pool = pool
        self.nodes = {n["id"]: TreeNode(**n) for n in payload["nodes"]}
        self.documents, self.propositions = payload["documents"], payload["propositions"]
        self.skipped, self.failures[:] = payload["skipped"], payload["failures"]
        self._stages.figures, self.last_update = payload["stages"], payload["last_update"]
        for name, count in payload["structured"].items():
            setattr(self.structured, name, count)
        self._llm_before = Usage(**payload["llm"]) - self.llm.usage
        present = stored_ids(self.vector_store)
        if present != set(self.nodes):
            raise StoreError(
                f"{folder}: the vector store holds {len(present - set(self.nodes))} nodes the pool lacks and lacks "
                f"{len(set(self.nodes) - present)} of its {len(self.nodes)}; rebuild it (--overwrite)"
            )
        vectors = stored_embeddings(self.vector_store, list(self.nodes))
        for nid, node in self.nodes.items():
            node.embedding = vectors.get(nid)
        self._written = {n.id: _links(n) for n in self.nodes.values()}

    def __repr__(self) -> str:
        return f"SiReRAGIndex({len(self.documents)} documents, pool of {len(self.nodes)} nodes)"
