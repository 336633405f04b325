"""SiReRAG and RAPTOR as ``multihop-rag`` drives them (entry points ``sirerag`` and ``raptor``).

RAPTOR is SiReRAG's own baseline: the similarity tree alone (``SiReRAGConfig(relatedness=False)``).
A query retrieves the top 20 nodes of the pool (``top_k``; ``reader_tokens`` reads those that fit a token
budget) and answers with §5.4's prompt; the evidence is
the retrieved nodes in rank order, a chunk standing for its passage and a summary or aggregate
for none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import NodeWithScore

from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.estimate import estimate
from llama_index_sirerag.index import SiReRAGIndex
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate
from multihop_rag.frameworks.llama_index import TokenBudget, update_document_index
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport

__all__ = ["SiReRAGMethod", "SiReRAGAnswerer", "SIRERAG", "RAPTOR", "evidence"]


def evidence(hits: Sequence[NodeWithScore], index: SiReRAGIndex) -> list[Evidence]:
    """The retrieved pool nodes: a chunk holds its passage's text; a summary, an aggregate or a
    proposition (the model's rewrite) holds none, and names the passages it was written from."""
    out = []
    for hit in hits:
        meta, nid = hit.node.metadata, hit.node.node_id
        kind = str(meta.get("kind", "chunk"))
        sources = index.source_passages(nid) if nid in index.nodes else []
        out.append(Evidence(id=nid, title=str(meta.get("title", "")), text=hit.node.get_content(),
                            score=float(hit.score or 0.0), kind=kind,
                            passage_ids=sources if kind == "chunk" else [], source_ids=[] if kind == "chunk" else sources))
    return out


class SiReRAGAnswerer:
    """A SiReRAG (or RAPTOR) index as an application answers with it."""

    def __init__(self, index: SiReRAGIndex, folder: Path | None = None, top_k: int = 20, reader_tokens: int = 0):
        self.index, self.folder, self.top_k, self.reader_tokens = index, folder, top_k, reader_tokens

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        """Answer from the top ``top_k`` pool nodes (with ``reader_tokens``, those of them that fit)."""
        started = time.perf_counter()
        budget = [TokenBudget(tokens=self.reader_tokens)] if self.reader_tokens else []
        response = self.index.as_query_engine(similarity_top_k=self.top_k, node_postprocessors=budget).query(question)
        if trace:
            for hit in response.source_nodes:
                meta = hit.node.metadata
                trace({"step": "retrieve", "tree": meta.get("tree"), "level": meta.get("level"), "kind": meta.get("kind"),
                       "score": round(float(hit.score or 0.0), 3), "text": hit.node.get_content()})
        decided = {"decided_by": response.metadata["decided_by"]} if response.metadata and "decided_by" in response.metadata else {}
        return Answer(question, str(response).strip(), evidence(response.source_nodes, self.index), time.perf_counter() - started,
                      info=decided)

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the index hold exactly ``passages`` (new, changed by hash, removed); the index persists each change."""
        return update_document_index(self.index, passages)

    def stats(self) -> dict[str, Any]:
        return self.index.stats()

    def as_langchain_retriever(self, k: int = 5) -> Any:
        return self.index.as_retriever(similarity_top_k=k).as_langchain()


class SiReRAGMethod:
    """SiReRAG (or, without the relatedness tree, RAPTOR) as the command line and the evaluation drive it."""

    builds = True
    config_class = SiReRAGConfig
    source_packages = ("llama_index_sirerag",)

    def __init__(self, name: str, relatedness: bool, summary: str):
        self.name, self.relatedness, self.summary = name, relatedness, summary

    def _config(self, config: SiReRAGConfig) -> SiReRAGConfig:
        return config.model_copy(update={"relatedness": self.relatedness})

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: SiReRAGConfig, *,
              overwrite: bool = False) -> SiReRAGAnswerer:
        index = SiReRAGIndex.from_documents(
            [p.to_llama_index() for p in passages], llm=models.llm, embed_model=models.embed, config=self._config(config),
            persist_dir=folder, overwrite=overwrite, max_concurrency=models.max_concurrency,
        )
        return SiReRAGAnswerer(index, folder, config.top_k, config.reader_tokens)

    def estimate(self, passages: Sequence[Passage], models: Models, config: SiReRAGConfig) -> BuildEstimate:
        """Calls and tokens of a build (:mod:`llama_index_sirerag.estimate`)."""
        return estimate(passages, self._config(config))

    def load(self, folder: Path, models: Models, config: SiReRAGConfig) -> SiReRAGAnswerer:
        index = SiReRAGIndex.from_persist_dir(folder, llm=models.llm, embed_model=models.embed,
                                              max_concurrency=models.max_concurrency)
        return SiReRAGAnswerer(index, folder, config.top_k, config.reader_tokens)


SIRERAG = SiReRAGMethod("sirerag", True, "similarity tree (RAPTOR) + relatedness tree of entity-grouped propositions, one pool")
RAPTOR = SiReRAGMethod("raptor", False, "RAPTOR: clustered recursive summaries, top-20 over every level (SiReRAG's baseline)")
