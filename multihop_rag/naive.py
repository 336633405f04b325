"""Plain dense RAG over passages: the baseline every method is compared with, and the demo's method.

Passages become LlamaIndex nodes (title in metadata, so it is embedded and shown to the LLM) in a
Chroma collection; a query embeds the question, takes the top-k passages and asks the LLM once.
Building is resumable: passages already in the collection are not embedded again, and nodes are
written in small batches, so a killed build keeps what it finished.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llama_index.core import PromptTemplate, StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import NodeWithScore, TextNode

from multihop_rag.corpus import Passage
from multihop_rag.stores import StoreError, chroma_vector_store, stored_ids

__all__ = ["ANSWER_PROMPT", "Answer", "Evidence", "NaiveRAG", "evidence_from_nodes"]

ANSWER_PROMPT = PromptTemplate(
    "Passages:\n{context_str}\n\n"
    "Using the passages, answer the question in as few words as possible.\n"
    "Question: {query_str}\nAnswer: "
)
"""Short-answer prompt shared by the baselines (the wording of SiReRAG §5.4 / HippoRAG)."""


@dataclass
class Evidence:
    """A retrieved passage."""

    id: str
    title: str
    text: str
    score: float


@dataclass
class Answer:
    """An answer with the evidence it was given and what it cost."""

    question: str
    text: str
    evidence: list[Evidence] = field(default_factory=list)
    seconds: float = 0.0


def evidence_from_nodes(nodes: Sequence[NodeWithScore]) -> list[Evidence]:
    """Retrieved LlamaIndex nodes as :class:`Evidence` (id: the source passage's id when known)."""
    return [
        Evidence(
            id=n.node.metadata.get("passage_id") or n.node.ref_doc_id or n.node.node_id,
            title=n.node.metadata.get("title", ""),
            text=n.node.get_content(),
            score=float(n.score or 0.0),
        )
        for n in nodes
    ]


def _node(p: Passage) -> TextNode:
    return TextNode(
        id_=p.id,
        text=p.text,
        metadata={"title": p.title, "passage_id": p.id},
        excluded_embed_metadata_keys=["passage_id"],
        excluded_llm_metadata_keys=["passage_id"],
    )


class NaiveRAG:
    """Dense top-k retrieval plus one LLM call."""

    def __init__(self, index: VectorStoreIndex, llm: LLM, similarity_top_k: int = 5):
        self.index = index
        self.llm = llm
        self.similarity_top_k = similarity_top_k

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        store: str | Path | None = None,
        collection: str = "naive",
        similarity_top_k: int = 5,
        show_progress: bool = True,
    ) -> NaiveRAG:
        """Embed ``passages`` into ``store`` (a folder, a Chroma URL or None for memory), skipping done ones."""
        vector_store = chroma_vector_store(store, collection)
        done = stored_ids(vector_store)
        todo = [_node(p) for p in passages if p.id not in done]
        storage = StorageContext.from_defaults(vector_store=vector_store)
        index = VectorStoreIndex(
            todo, storage_context=storage, embed_model=embed_model, show_progress=show_progress, insert_batch_size=64
        )
        return cls(index, llm, similarity_top_k)

    @classmethod
    def load(
        cls,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        store: str | Path,
        collection: str = "naive",
        similarity_top_k: int = 5,
    ) -> NaiveRAG:
        """Open an index built by :meth:`build`."""
        vector_store = chroma_vector_store(store, collection)
        if not stored_ids(vector_store):
            raise StoreError(f"the store {store} has no indexed passages: run 'multihop-rag index' first")
        return cls(VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model), llm, similarity_top_k)

    def __len__(self) -> int:
        return len(stored_ids(self.index.vector_store))

    def answer(self, question: str) -> Answer:
        """Retrieve the top-k passages and answer in a few words."""
        started = time.perf_counter()
        engine = self.index.as_query_engine(
            llm=self.llm, similarity_top_k=self.similarity_top_k, text_qa_template=ANSWER_PROMPT
        )
        response = engine.query(question)
        evidence = evidence_from_nodes(response.source_nodes)
        text = str(response).strip()
        return Answer(question=question, text=text, evidence=evidence, seconds=time.perf_counter() - started)
