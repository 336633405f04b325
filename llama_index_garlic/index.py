"""GarlicIndex: GARLIC's summary graph (§3.1) and its LLM-controlled search (§3.2) for LlamaIndex."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.schema import Document

from llama_index_garlic.attention import AttentionModel, load_attention_model
from llama_index_garlic.build import BuildReport, build_graph
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.graph import SummaryGraph
from llama_index_garlic.query_engine import GarlicQueryEngine, GarlicRetriever
from llama_index_garlic.search import LLMController, SearchResult, graph_search
from multihop_rag.cache import CachedLLM, LLMCache, Usage, cached_llm
from multihop_rag.structured import StructuredStats

__all__ = ["GarlicIndex"]

FORMAT_VERSION = 1


class GarlicIndex:
    """A GARLIC summary graph with the models that search it.

    ``attention_model`` (a :class:`TransformersAttention`, a bundled alias, a ``.gguf`` file or a
    Hugging Face directory) weights the edges and steers the search by attention; without one,
    edges and search use embedding similarity and the LLM still decides when to stop. The LLM
    (Ollama, llama.cpp, any LlamaIndex LLM) writes the summaries, the Yes/No and the answer.
    """

    def __init__(
        self,
        *,
        graph: SummaryGraph,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | None,
        config: GarlicConfig,
        stats: dict[str, Any],
    ):
        self.graph = graph
        self.llm = llm
        self.embed_model = embed_model
        self.attention_model = attention_model
        self.config = config
        self._stats = stats
        self.structured = StructuredStats()
        """Yes/No answers read first try or not at all, over every search so far."""

    @property
    def mode(self) -> str:
        """``attention`` when an attention model steers the search, else ``embedding``."""
        return "attention" if self.attention_model is not None and self.config.attention_search else "embedding"

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | str | Path | None = None,
        n_s: int | None = None,
        config: GarlicConfig | None = None,
        show_progress: bool = True,
        cache: str | Path | LLMCache | None = None,
    ) -> GarlicIndex:
        """Build the summary graph. ``n_s`` overrides ``config.n_s`` (default min(8192, context window));
        ``cache`` (a SQLite path) keeps LLM calls, so a killed build resumes."""
        config = config or GarlicConfig()
        if not documents:
            raise ValueError("GarlicIndex needs at least one document")
        if n_s is not None:
            config = config.model_copy(update={"n_s": n_s})
        llm = cached_llm(llm, cache)
        attention = load_attention_model(attention_model)
        before = Usage(**asdict(llm.usage)) if isinstance(llm, CachedLLM) else Usage()
        forward_before = attention.forward_tokens if attention is not None else 0
        report = BuildReport()
        started = time.perf_counter()
        graph = build_graph(
            documents, llm=llm, embed_model=embed_model, attention=attention, config=config,
            show_progress=show_progress, report=report,
        )
        report.seconds["total"] = time.perf_counter() - started
        after = llm.usage if isinstance(llm, CachedLLM) else Usage()
        stats = {
            "documents": len(documents),
            "nodes": len(graph.nodes),
            "nodes_per_level": {str(k): len(v) for k, v in graph.levels.items()},
            "edges": sum(map(len, graph.edges.values())),
            "edge_source": graph.edge_source,
            "attention_model": attention.name if attention is not None else None,
            "n_s": config.window(llm.metadata.context_window),
            "batches_per_level": {str(k): v for k, v in report.batches.items()},
            "skipped_batches": report.skipped_batches,
            "retried_replies": report.retried_replies,
            "unbulleted_replies": report.unbulleted_replies,
            "truncated_replies": report.truncated_replies,
            "embedding_edge_batches": report.embedding_edge_batches,
            "alignment_failures": report.alignment_failures,
            "attention_forward_tokens": (attention.forward_tokens - forward_before) if attention is not None else 0,
            "llm": {
                "calls": after.calls - before.calls,
                "cache_hits": after.cache_hits - before.cache_hits,
                "prompt_tokens": after.prompt_tokens - before.prompt_tokens,
                "completion_tokens": after.completion_tokens - before.completion_tokens,
                "seconds": round(after.seconds - before.seconds, 1),
            },
            "seconds": {k: round(v, 1) for k, v in report.seconds.items()},
        }
        return cls(graph=graph, llm=llm, embed_model=embed_model, attention_model=attention, config=config, stats=stats)

    # ---- querying ----

    def search(self, question: str, *, answer: bool = True, stop_patience: int | None = None) -> SearchResult:
        """One Dynamic Graph Search (and, with ``answer``, the second-turn answer)."""
        config = self.config
        return graph_search(
            self.graph,
            question,
            query_embedding=self.embed_model.get_query_embedding(question),
            controller=LLMController(self.llm, self.structured),
            attention=self.attention_model,
            stop_patience=stop_patience or config.stop_patience,
            budget=config.search_budget(self.llm.metadata.context_window),
            max_steps=config.max_steps,
            attention_search=config.attention_search,
            embedding_search=config.embedding_search,
            kv_cache=config.kv_cache,
            dynamic_progress_control=config.dynamic_progress_control,
            fixed_nodes=config.fixed_nodes,
            answer=answer,
        )

    def as_retriever(self, stop_patience: int | None = None, **kwargs: Any) -> GarlicRetriever:
        """The visited nodes of a search, in visit order."""
        return GarlicRetriever(self, stop_patience=stop_patience, **kwargs)

    def as_query_engine(self, stop_patience: int | None = None, **kwargs: Any) -> GarlicQueryEngine:
        """Search and answer; ``stop_patience`` (p) defaults to the config's (1, as in the paper)."""
        return GarlicQueryEngine(index=self, stop_patience=stop_patience, **kwargs)

    def stats(self) -> dict[str, Any]:
        """Nodes per level, edges, batches, skipped batches, LLM calls and tokens, build seconds."""
        return json.loads(json.dumps(self._stats))

    # ---- persistence ----

    def persist(self, persist_dir: str | Path) -> None:
        """Write the graph (JSON), node embeddings (``.npy``), config, stats and the attention model's
        name (it weighted the edges; a reload checks it) to ``persist_dir``."""
        folder = Path(persist_dir)
        self.graph.save(folder)
        attention = self.attention_model.name if self.attention_model is not None else None
        meta = {"format": FORMAT_VERSION, "config": self.config.model_dump(), "stats": self._stats, "attention_model": attention}
        (folder / "garlic.json").write_text(json.dumps(meta, indent=1))

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | Path,
        *,
        llm: LLM,
        embed_model: BaseEmbedding,
        attention_model: AttentionModel | str | Path | None = None,
        cache: str | Path | LLMCache | None = None,
    ) -> GarlicIndex:
        """Reload an index written by :meth:`persist`. The attention model that weighted its edges
        steers the search; without it the index runs in embedding mode (a warning says so), and a
        different one is refused (its attention would not match the edges)."""
        folder = Path(persist_dir)
        meta_file = folder / "garlic.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{folder} holds no GARLIC index (no garlic.json)")
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{folder} was written by an incompatible version (format {meta.get('format')})")
        attention = load_attention_model(attention_model)
        built_with = meta.get("attention_model")
        if attention is not None and built_with is not None and attention.name != built_with:
            raise ValueError(
                f"{folder}: its edges were weighted by the attention of {built_with!r}, not {attention.name!r}; "
                "load it with that model, with none (embedding mode), or rebuild"
            )
        if attention is None and built_with is not None:
            warnings.warn(
                f"{folder} was built with the attention model {built_with!r}; without it this index now runs in "
                "embedding mode (the search scores nodes by embedding similarity)",
                stacklevel=2,
            )
        return cls(
            graph=SummaryGraph.load(folder),
            llm=cached_llm(llm, cache),
            embed_model=embed_model,
            attention_model=attention,
            config=GarlicConfig(**meta["config"]),
            stats=meta["stats"],
        )

    def __repr__(self) -> str:
        return f"GarlicIndex({self.graph!r}, mode={self.mode})"
