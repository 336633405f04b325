"""GARLIC as ``multihop-rag`` drives it (entry point ``garlic`` of ``multihop_rag.methods``).

The evidence of an answer is the search's visited nodes in visit order: a level-1 chunk holds the
text of every passage packed into it; an information point (the model's summary) holds none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from llama_index.core.base.response.schema import Response
from pydantic import Field

from llama_index_garlic.attention import AttentionModel, load_attention_model
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.estimate import estimate
from llama_index_garlic.index import GarlicIndex
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate
from multihop_rag.frameworks.langchain import LlamaIndexRetriever
from multihop_rag.frameworks.llama_index import update_document_index
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport

__all__ = ["GarlicSettings", "GarlicMethod", "GarlicAnswerer", "METHOD"]


class GarlicSettings(GarlicConfig):
    """GARLIC's settings as the command line takes them: the graph's knobs and the attention model."""

    attention_model: str = Field(
        "auto",
        description="auto: with attention_search=true (the paper's search, the only reader of the edges' weights) "
        "the llamacpp LLM's own GGUF through transformers, else (and for a served model) none; none: embedding "
        "edges; or a GGUF file / Hugging Face model folder.",
    )

    def graph_config(self) -> GarlicConfig:
        """The index's own settings (the attention model is the index's argument, not a setting)."""
        return GarlicConfig(**self.model_dump(exclude={"attention_model"}))


@cache
def _attention(spec: str) -> AttentionModel | None:
    """One attention model per process (the first load of a GGUF unpacks it into the cache: minutes, once)."""
    return load_attention_model(spec)


def attention_source(settings: GarlicSettings, llm_spec: str) -> str | None:
    """Where the attention model of ``settings.attention_model`` loads from for an LLM spec, or None for
    embedding edges. ``auto``: the llamacpp LLM's own GGUF when the search reads attention — only
    ``attention_search`` (§3.2.2's z = Eᵀa) reads the edges' weights, so without it a build's attention passes
    (70–80 % of a build on the 1.5B, docs/methods.md) would change no answer."""
    option = settings.attention_model
    if option == "auto":
        kind, _, name = llm_spec.partition(":")
        return name if kind == "llamacpp" and settings.attention_search else None
    return None if option == "none" else option


def attention_for(settings: GarlicSettings, llm_spec: str) -> AttentionModel | None:
    """The attention model of ``settings.attention_model`` for an LLM spec, loaded once per process."""
    source = attention_source(settings, llm_spec)
    return _attention(source) if source is not None else None


class GarlicAnswerer:
    """A GARLIC index as an application answers with it."""

    def __init__(self, index: GarlicIndex, folder: Path | None = None):
        self.index, self.folder = index, folder

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        started = time.perf_counter()
        response = self.index.as_query_engine().query(question)
        assert isinstance(response, Response)  # the engine does not stream
        found: dict[str, Any] = response.metadata or {}
        visited, replies = found["visited"], found["replies"]
        if trace:
            for node_id, reply in zip(visited, [None] * (len(visited) - len(replies)) + list(replies), strict=True):
                node = self.index.graph.node(node_id)  # type: ignore[union-attr]
                trace({"step": "visit", "level": node.level, "text": node.text, "sufficient": reply})
        evidence: list[Evidence] = []
        for hit in response.source_nodes:
            level = int(hit.node.metadata.get("level", 0))
            doc_ids = [d for d in str(hit.node.metadata.get("doc_ids", "")).split(",") if d]
            chunk = level == 1  # a point names the passages of the batch it was summarized from
            evidence.append(Evidence(id=hit.node.node_id, title="", text=hit.node.get_content(), score=float(hit.score or 0.0),
                                     passage_ids=doc_ids if chunk else [], source_ids=[] if chunk else doc_ids,
                                     kind="chunk" if chunk else "information_point"))
        info = {"stop_reason": found["stop_reason"], "complete": found["complete"], "visited": len(visited),
                "limit_hit": found["stop_reason"] in ("budget", "max_steps")}
        if found["yes_probabilities"]:
            info["yes_probabilities"] = [None if p is None else round(p, 4) for p in found["yes_probabilities"]]
        if "decided_by" in found:
            info |= {"decided_by": found["decided_by"], "search_answer": found["engine_answer"]}
        return Answer(question, (response.response or "").strip(), evidence, time.perf_counter() - started, info=info)

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the index hold exactly ``passages`` (new, changed by hash, removed); the index persists each change."""
        return update_document_index(self.index, passages)

    def stats(self) -> dict[str, Any]:
        return self.index.stats()

    def as_langchain_retriever(self, k: int = 5) -> Any:
        return LlamaIndexRetriever(index=_Visited(self.index), k=k)


class _Visited:
    """The search's visited nodes with LlamaIndex's ``as_retriever(similarity_top_k=…)`` signature."""

    def __init__(self, index: GarlicIndex):
        self.index = index

    def as_retriever(self, similarity_top_k: int) -> Any:
        return self.index.as_retriever()


class GarlicMethod:
    """GARLIC as the command line and the evaluation drive it."""

    name = "garlic"
    summary = "graph of information points with attention-weighted edges; the LLM walks it and says when it has enough"
    builds = True
    config_class = GarlicSettings
    source_packages = ("llama_index_garlic",)

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: GarlicSettings, *,
              overwrite: bool = False) -> GarlicAnswerer:
        index = GarlicIndex.from_documents(
            [p.to_llama_index() for p in passages], llm=models.llm, embed_model=models.embed,
            attention_model=attention_for(config, models.llm_spec), config=config.graph_config(), persist_dir=folder, overwrite=overwrite,
            max_concurrency=models.max_concurrency,
        )
        return GarlicAnswerer(index, folder)

    def estimate(self, passages: Sequence[Passage], models: Models, config: GarlicSettings) -> BuildEstimate:
        """Calls and tokens of a build (:mod:`llama_index_garlic.estimate`)."""
        return estimate(passages, config, models.llm.metadata.context_window,
                        attention=attention_source(config, models.llm_spec) is not None)

    def load(self, folder: Path, models: Models, config: GarlicSettings) -> GarlicAnswerer:
        index = GarlicIndex.from_persist_dir(folder, llm=models.llm, embed_model=models.embed,
                                             attention_model=attention_for(config, models.llm_spec),
                                             max_concurrency=models.max_concurrency)
        return GarlicAnswerer(index, folder)


METHOD = GarlicMethod()
