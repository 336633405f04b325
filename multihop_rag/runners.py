"""One adapter per method for ``multihop-rag eval``: build (or reload) the method's index over a
corpus once, then answer questions as :class:`~multihop_rag.naive.Answer` s.

Every adapter persists its index in its own folder and reloads it on the next run, so an
evaluation builds each index once. The method packages are imported only when their adapter
runs. LLM calls of all methods go through one :class:`Models` bundle, whose usage counters the
evaluation reads before and after each build and question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore

from multihop_rag.cache import CachedLLM, Usage
from multihop_rag.corpus import Passage
from multihop_rag.naive import Answer, Evidence, NaiveRAG, evidence_from_nodes

__all__ = ["Models", "Runner", "RUNNERS", "make_runner"]


@dataclass
class Models:
    """The models every method of one evaluation shares."""

    llm: CachedLLM
    """LlamaIndex LLM (cached and counted) for naive, RAPTOR, SiReRAG, GARLIC and K²RAG."""
    embed: BaseEmbedding
    """LlamaIndex embedding model."""
    chat: BaseChatModel
    """LangChain chat model on the same weights for ReSP and HiRAG (counted by ``chat_usage``)."""
    lc_embed: Embeddings
    """LangChain embeddings on the same weights."""
    chat_usage: Usage = field(default_factory=Usage)
    """Calls and tokens of ``chat`` (filled by a :class:`~multihop_rag.cache.UsageCallback`)."""
    attention: Any = None
    """GARLIC's attention model (a path, alias or loaded model), ``None`` for the embedding fallback."""

    def usage(self) -> Usage:
        """Calls (cache hits included), tokens and LLM seconds of both frameworks so far."""
        a, b = self.llm.usage, self.chat_usage
        return Usage(
            calls=a.calls + a.cache_hits + b.calls,
            cache_hits=a.cache_hits,
            prompt_tokens=a.prompt_tokens + b.prompt_tokens,
            completion_tokens=a.completion_tokens + b.completion_tokens,
            seconds=a.seconds,
        )


class Runner(Protocol):
    """A method ready to evaluate."""

    name: str

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        """Build the index into ``folder`` or reload it from there; return its statistics
        (``pool_size``: retrievable units, used for TPER)."""
        ...

    def answer(self, question: str) -> Answer:
        """Answer one question with the evidence it used."""
        ...


def _timed(question: str, run: Callable[[], tuple[str, list[Evidence]]]) -> Answer:
    started = time.perf_counter()
    text, evidence = run()
    return Answer(question=question, text=text.strip(), evidence=evidence, seconds=time.perf_counter() - started)


def _documents(passages: Sequence[Passage]) -> list[Any]:
    return [p.to_llama_index() for p in passages]


class NaiveRunner:
    """Dense top-5 passages and one LLM call (:class:`~multihop_rag.naive.NaiveRAG`)."""

    name = "naive"

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        self.rag = NaiveRAG.build(passages, llm=models.llm, embed_model=models.embed, store=folder)
        return {"pool_size": len(self.rag)}

    def answer(self, question: str) -> Answer:
        return self.rag.answer(question)


class SiReRAGRunner:
    """SiReRAG's flattened pool (``relatedness=False``: the RAPTOR baseline), top-20 and the §5.4 prompt."""

    def __init__(self, name: str, relatedness: bool):
        self.name, self.relatedness = name, relatedness

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex

        if (folder / "sirerag.json").is_file():
            index = SiReRAGIndex.from_persist_dir(folder, llm=models.llm, embed_model=models.embed)
        else:
            config = SiReRAGConfig(relatedness=self.relatedness)
            index = SiReRAGIndex.from_documents(_documents(passages), llm=models.llm, embed_model=models.embed, config=config)
            index.persist(folder)
        self.engine = index.as_query_engine()
        return index.stats()

    def answer(self, question: str) -> Answer:
        def run() -> tuple[str, list[Evidence]]:
            response = self.engine.query(question)
            return str(response), evidence_from_nodes(response.source_nodes)

        return _timed(question, run)


class K2RAGRunner:
    """K²RAG (Algorithm 2) over the LLM-summarized corpus with LlamaIndex's property-graph KG."""

    name = "k2rag"

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        from llama_index_k2rag import K2RAGIndex

        if (folder / "k2rag.json").is_file():
            index = K2RAGIndex.from_persist_dir(folder, llm=models.llm, embed_model=models.embed)
        else:
            index = K2RAGIndex.from_documents(_documents(passages), llm=models.llm, embed_model=models.embed)
            index.persist(folder)
        self.engine = index.as_query_engine("k2rag")
        return index.stats() | {"pool_size": index.stats()["chunks"]}

    def answer(self, question: str) -> Answer:
        def run() -> tuple[str, list[Evidence]]:
            response = self.engine.query(question)
            return str(response), evidence_from_nodes(response.source_nodes)

        return _timed(question, run)


class GarlicRunner:
    """GARLIC's LLM-controlled graph search (attention-steered when ``Models.attention`` is set)."""

    name = "garlic"

    def __init__(self, n_s: int | None = None):
        self.n_s = n_s
        """Batch length of the graph's summaries (§3.1); None: the paper's 8K, capped by the LLM's context."""

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        from llama_index_garlic import GarlicConfig, GarlicIndex

        kwargs = {"llm": models.llm, "embed_model": models.embed, "attention_model": models.attention}
        if (folder / "garlic.json").is_file():
            index = GarlicIndex.from_persist_dir(folder, **kwargs)
        else:
            index = GarlicIndex.from_documents(_documents(passages), config=GarlicConfig(n_s=self.n_s), **kwargs)
            index.persist(folder)
        self.engine = index.as_query_engine()
        return index.stats() | {"pool_size": len(index.graph.nodes), "mode": index.mode}

    def answer(self, question: str) -> Answer:
        def run() -> tuple[str, list[Evidence]]:
            response = self.engine.query(question)
            return str(response), _garlic_evidence(response.source_nodes)

        return _timed(question, run)


def _garlic_evidence(nodes: Sequence[NodeWithScore]) -> list[Evidence]:
    """GARLIC's visited nodes as evidence: a level-1 chunk (the passages' own text, several short
    passages packed into one) stands for each passage in it; a summary node, the LLM's rewrite of
    many passages, for none (as RAPTOR's summary nodes)."""
    evidence = []
    for hit in nodes:
        meta = hit.node.metadata
        if meta.get("level") == 1 and meta.get("doc_ids"):
            text, score = hit.node.get_content(), float(hit.score or 0.0)
            evidence += [Evidence(id=doc_id, title="", text=text, score=score) for doc_id in meta["doc_ids"].split(",")]
        else:
            evidence += evidence_from_nodes([hit])
    return evidence


def _lc_evidence(store: Any, ids: list[str]) -> list[Evidence]:
    """The LangChain vector store's documents ``ids`` as evidence; none when the method retrieved nothing."""
    docs: Sequence[LCDocument] = store.get_by_ids(ids) if ids else []
    return [
        Evidence(id=str(d.metadata.get("passage_id") or d.id), title=d.metadata.get("title", ""), text=d.page_content, score=0.0)
        for d in docs
    ]


class ReSPRunner:
    """ReSP's LangGraph loop over a dense top-5 retriever on the passages (Chroma)."""

    name = "resp"

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        from langchain_resp import build_resp_graph
        from multihop_rag.stores import langchain_chroma, lc_stored_ids

        self.store = langchain_chroma(folder, "resp", models.lc_embed)
        done = lc_stored_ids(self.store)
        todo = [p for p in passages if p.id not in done]
        for start in range(0, len(todo), 64):  # small batches: a killed build keeps what it wrote
            part = todo[start : start + 64]
            self.store.add_documents([p.to_langchain() for p in part], ids=[p.id for p in part])
        self.graph = build_resp_graph(models.chat, self.store.as_retriever(search_kwargs={"k": 5}))
        return {"pool_size": len(lc_stored_ids(self.store))}

    def answer(self, question: str) -> Answer:
        def run() -> tuple[str, list[Evidence]]:
            state = self.graph.invoke({"question": question})
            ids = list(dict.fromkeys(i for round_ids in state.get("retrieved", []) for i in round_ids))
            return state["answer"], _lc_evidence(self.store, ids)

        return _timed(question, run)


class HiRAGRunner:
    """HiRAG's LangGraph state machine over a :class:`~langgraph_hirag.HierarchicalCorpus`."""

    name = "hirag"

    def build(self, passages: Sequence[Passage], models: Models, folder: Path) -> dict[str, Any]:
        from langgraph_hirag import HierarchicalCorpus, build_hirag_graph

        if (folder / "hirag.json").is_file():
            self.corpus = HierarchicalCorpus.from_persist_dir(folder, models.lc_embed)
        else:
            self.corpus = HierarchicalCorpus.from_documents(passages, models.lc_embed)
            self.corpus.persist(folder)
        self.graph = build_hirag_graph(models.chat, self.corpus)
        return {"pool_size": sum(len(d.chunk_ids) for d in self.corpus.documents), "documents": len(self.corpus)}

    def answer(self, question: str) -> Answer:
        def run() -> tuple[str, list[Evidence]]:
            state = self.graph.invoke({"question": question})
            tried = [[a["chunk_id"] for a in t["attempts"] if a.get("chunk_id")] + t["rewrite_hits"] for t in state.get("trace", [])]
            ids = list(dict.fromkeys(i for chunk_ids in tried for i in chunk_ids))
            return state["answer"], _lc_evidence(self.corpus.vector_store, ids)

        return _timed(question, run)


RUNNERS: dict[str, Callable[[], Runner]] = {
    "naive": NaiveRunner,
    "raptor": lambda: SiReRAGRunner("raptor", relatedness=False),
    "sirerag": lambda: SiReRAGRunner("sirerag", relatedness=True),
    "resp": ReSPRunner,
    "hirag": HiRAGRunner,
    "garlic": GarlicRunner,
    "k2rag": K2RAGRunner,
}
"""Methods ``multihop-rag eval`` knows, in the order the report lists them."""


def make_runner(name: str, *, garlic_n_s: int | None = None) -> Runner:
    """A fresh adapter for method ``name`` (a key of :data:`RUNNERS`); ``garlic_n_s``: GARLIC's n_s."""
    if name not in RUNNERS:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(RUNNERS)}")
    return GarlicRunner(n_s=garlic_n_s) if name == "garlic" else RUNNERS[name]()

