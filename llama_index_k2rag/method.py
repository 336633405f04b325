"""K²RAG as ``multihop-rag`` drives it (entry point ``k2rag`` of ``multihop_rag.methods``).

A query runs Algorithm 2 (the knowledge graph's answer, its sub-questions, hybrid retrieval per
sub-question). The evidence is every chunk the sub-questions retrieved, in order; a chunk of a
summarized document holds the model's summary, not the passage's text, so it stands for no passage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.schema import NodeWithScore

from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.estimate import estimate
from llama_index_k2rag.index import K2RAGIndex
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate
from multihop_rag.frameworks.langchain import LlamaIndexRetriever
from multihop_rag.frameworks.llama_index import update_document_index
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport

__all__ = ["K2RAGMethod", "K2RAGAnswerer", "METHOD", "evidence"]


def evidence(hits: Sequence[NodeWithScore]) -> list[Evidence]:
    """Retrieved chunks; one of an unsummarized document holds its passage's text, one of a summary names
    the passage it was written from."""
    out = []
    for hit in hits:
        meta = hit.node.metadata
        summarized, passage = bool(meta.get("summarized")), [str(meta.get("passage_id", ""))]
        out.append(Evidence(id=hit.node.node_id, title=str(meta.get("title", "")), text=hit.node.get_content(),
                            score=float(hit.score or 0.0), passage_ids=[] if summarized else passage,
                            source_ids=passage if summarized else [], kind="summary" if summarized else "chunk"))
    return out


class K2RAGAnswerer:
    """A K²RAG index as an application answers with it."""

    def __init__(self, index: K2RAGIndex, folder: Path | None = None):
        self.index, self.folder = index, folder

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        started = time.perf_counter()
        response = self.index.as_query_engine("k2rag").query(question)
        meta = response.metadata or {}
        if trace:
            trace({"step": "kg_answer", "text": meta.get("kg_answer", "")})
            for sub_question, sub_answer in zip(meta.get("sub_questions", []), meta.get("sub_answers", []), strict=True):
                trace({"step": "sub_question", "text": sub_question, "answer": sub_answer})
        info = {"sub_questions": meta.get("sub_questions", []), "kg_answer": meta.get("kg_answer", "")}
        if "decided_by" in meta:
            info |= {"decided_by": meta["decided_by"], "algorithm_answer": meta["engine_answer"]}
        return Answer(question, str(response).strip(), evidence(response.source_nodes), time.perf_counter() - started, info=info)

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the index hold exactly ``passages`` (new, changed by hash, removed); the index persists each change."""
        return update_document_index(self.index, passages)

    def stats(self) -> dict[str, Any]:
        return self.index.stats()

    def as_langchain_retriever(self, k: int = 5) -> Any:
        return LlamaIndexRetriever(index=_Hybrid(self.index), k=k)


class _Hybrid:
    """The hybrid retriever with LlamaIndex's ``as_retriever(similarity_top_k=…)`` signature."""

    def __init__(self, index: K2RAGIndex):
        self.index = index

    def as_retriever(self, similarity_top_k: int) -> Any:
        return self.index.as_retriever(similarity_top_k=similarity_top_k)


class K2RAGMethod:
    """K²RAG as the command line and the evaluation drive it."""

    name = "k2rag"
    summary = "summarized corpus, knowledge graph + hybrid dense/sparse search, sub-questions from the graph's answer"
    builds = True
    config_class = K2RAGConfig
    source_packages = ("llama_index_k2rag",)

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: K2RAGConfig, *,
              overwrite: bool = False) -> K2RAGAnswerer:
        index = K2RAGIndex.from_documents(
            [p.to_llama_index() for p in passages], llm=models.llm, embed_model=models.embed, config=config,
            persist_dir=folder, overwrite=overwrite, max_concurrency=models.max_concurrency,
        )
        return K2RAGAnswerer(index, folder)

    def estimate(self, passages: Sequence[Passage], models: Models, config: K2RAGConfig) -> BuildEstimate:
        """Calls and tokens of a build (:mod:`llama_index_k2rag.estimate`)."""
        return estimate(passages, config)

    def load(self, folder: Path, models: Models, config: K2RAGConfig) -> K2RAGAnswerer:
        index = K2RAGIndex.from_persist_dir(folder, llm=models.llm, embed_model=models.embed,
                                            max_concurrency=models.max_concurrency)
        return K2RAGAnswerer(index, folder)


METHOD = K2RAGMethod()
