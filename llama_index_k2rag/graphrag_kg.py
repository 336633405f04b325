"""Microsoft GraphRAG 3.x as K²RAG's knowledge graph (the paper's choice, §3.1.2, §4.1).

Driven through GraphRAG's Python API (``graphrag.api.build_index`` / ``local_search``) with a
configuration written in code, no ``settings.yaml``:

- chat model: any OpenAI-compatible endpoint (:class:`multihop_rag.serving.llamacpp_server.OpenAIEndpoint`)
  — Ollama's ``/v1`` or llama.cpp's server started for the embedded model;
- embeddings: the index's own LlamaIndex embedding model, registered with ``graphrag_llm`` as
  an in-process embedding type, so the graph's vector search uses the same vectors as the rest;
- chunks: the K²RAG KG chunks (S=300/O=100, eq. 1) are GraphRAG's input documents and GraphRAG
  chunks at the same size, so it keeps them whole;
- everything else is GraphRAG's default (standard indexing method, entity types, gleanings,
  local search), except context sizes scaled down to fit a small local model's window.

GraphRAG's own JSON cache under ``root/cache`` makes an interrupted build resume. Importing
GraphRAG costs ~13 s and ~650 MB, so it happens on first use; install it with the ``graphrag``
extra.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from tqdm.auto import tqdm

from multihop_rag.llm.aio import run_sync
from multihop_rag.serving import bundled
from multihop_rag.serving.llamacpp_server import RECORD_DELIMITER_FIELD, LlamaCppServer, OpenAIEndpoint

__all__ = ["GraphRAGKG"]

log = logging.getLogger(__name__)

EMBEDDING_TYPE = "multihop_rag_llama_index"
DEFAULT_ENTITY_TYPES = ("organization", "person", "geo", "event")
"""GraphRAG's default entity types (``graphrag.config.defaults.DEFAULT_ENTITY_TYPES``)."""
_EMBED_MODELS: dict[str, BaseEmbedding] = {}
TABLES = ("entities", "communities", "community_reports", "text_units", "relationships")


def _import_graphrag() -> Any:
    """Import GraphRAG offline (litellm's cost map from its bundled copy) and register our embedding type."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import graphrag.api as api
        from graphrag_llm.embedding import LLMEmbedding, register_embedding
        from graphrag_llm.embedding.embedding_factory import embedding_factory
        from graphrag_llm.types import LLMEmbeddingResponse
    except ImportError as error:
        raise ImportError(
            "GraphRAG is not installed; install multihop-rag with the 'graphrag' extra "
            "(pip install -e '.[graphrag]') or use kg='property'"
        ) from error

    if EMBEDDING_TYPE not in embedding_factory:

        class LlamaIndexEmbedding(LLMEmbedding):
            """A LlamaIndex embedding model behind graphrag_llm's embedding interface."""

            def __init__(self, *, model_config: Any, tokenizer: Any, metrics_store: Any, **kwargs: Any) -> None:
                self._embed = _EMBED_MODELS[model_config.model]
                self._model = model_config.model
                self._tokenizer = tokenizer
                self._metrics_store = metrics_store

            def _response(self, vectors: list[list[float]]) -> Any:
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
                return LLMEmbeddingResponse.model_validate(
                    {"object": "list", "model": self._model, "data": data, "usage": {"prompt_tokens": 0, "total_tokens": 0}}
                )

            def embedding(self, /, **kwargs: Any) -> Any:
                return self._response(self._embed.get_text_embedding_batch(list(kwargs["input"])))

            async def embedding_async(self, /, **kwargs: Any) -> Any:
                return self._response(await self._embed.aget_text_embedding_batch(list(kwargs["input"])))

            @property
            def metrics_store(self) -> Any:
                return self._metrics_store

            @property
            def tokenizer(self) -> Any:
                return self._tokenizer

        register_embedding(EMBEDDING_TYPE, LlamaIndexEmbedding)
    return api


def _embed_key(embed_model: BaseEmbedding) -> str:
    key = f"{embed_model.model_name}-{id(embed_model):x}"
    _EMBED_MODELS[key] = embed_model
    return key


RECORD_SEPARATOR = "\n##\n"
"""Between two records of GraphRAG's extraction format (its ``record_delimiter`` on a line of its own)."""


def extraction_grammar(entity_types: Sequence[str]) -> str:
    """A GBNF grammar for GraphRAG's graph-extraction output format (its ``extract_graph`` prompt).

    Small models drop fields — the 1.5B default omits the relationship strength, and GraphRAG
    then discards every relationship — so on a llama.cpp endpoint the extraction is constrained
    to well-formed entity and relationship records (strength 1–10), like JSON schemas elsewhere.
    """
    types = " | ".join(json.dumps(t.upper()) for t in entity_types)
    return "\n".join(
        [
            'root ::= record ("\\n##\\n" record)* "\\n<|COMPLETE|>"',
            "record ::= entity | relationship",
            'entity ::= "(\\"entity\\"<|>" name "<|>" type "<|>" text ")"',
            'relationship ::= "(\\"relationship\\"<|>" name "<|>" name "<|>" text "<|>" strength ")"',
            'strength ::= [1-9] | "10"',
            f"type ::= {types}",
            "name ::= [^<>()#\\n]+",
            "text ::= [^<>()#\\n]+",
        ]
    )


def _settings(
    root: Path,
    endpoint: OpenAIEndpoint,
    embed_model: BaseEmbedding,
    chunk_size: int,
    chunk_overlap: int,
    context_tokens: int,
    entity_types: Sequence[str],
    max_concurrency: int,
) -> dict[str, Any]:
    """GraphRAG's configuration for a local model with a ``context_tokens`` window and ``max_concurrency`` slots."""
    vector_size = len(embed_model.get_text_embedding("dimension probe"))
    chat: dict[str, Any] = {
        "model_provider": "openai",
        "model": endpoint.model,
        "api_base": endpoint.api_base,
        "api_key": endpoint.api_key,
        # Small models can loop until the window is full (6K-token extractions seen with the
        # 1.5B model), and the gleaning turn then overflows it: cap every answer.
        "call_args": {"temperature": 0.0, "max_tokens": max(256, context_tokens // 8)},
    }
    models: dict[str, Any] = {"default_completion_model": chat}
    if endpoint.grammar:
        grammar = extraction_grammar(entity_types)
        # A reply cut at the token cap loses the record it was writing (the server drops it):
        # GraphRAG would otherwise keep an entity whose description stops mid-word.
        extra = {"grammar": grammar, RECORD_DELIMITER_FIELD: RECORD_SEPARATOR}
        models["graph_extraction_model"] = {**chat, "call_args": {**chat["call_args"], "extra_body": extra}}
    return {
        "completion_models": models,
        "embedding_models": {
            "default_embedding_model": {"type": EMBEDDING_TYPE, "model_provider": "llama_index", "model": _embed_key(embed_model)}
        },
        # As many requests as the server has slots: more only queue up and time out.
        "concurrent_requests": max_concurrency,
        "input_storage": {"base_dir": str(root / "input")},
        "output_storage": {"base_dir": str(root / "output")},
        "cache": {"type": "json", "storage": {"base_dir": str(root / "cache")}},
        "reporting": {"base_dir": str(root / "logs")},
        "vector_store": {"db_uri": str(root / "output" / "lancedb"), "vector_size": vector_size},
        "chunking": {"size": chunk_size, "overlap": chunk_overlap, "encoding_model": "cl100k_base"},
        "extract_graph": {"completion_model_id": "graph_extraction_model" if endpoint.grammar else "default_completion_model"},
        # GraphRAG's defaults assume a 128K-token model (8K report inputs, 12K search context).
        "community_reports": {"max_input_length": context_tokens // 2, "max_length": 500},
        "summarize_descriptions": {"max_input_tokens": context_tokens // 2},
        "local_search": {"max_context_tokens": context_tokens // 2},
    }


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


class _WorkflowProgress:
    """A tqdm bar over GraphRAG's workflows (graphrag's WorkflowCallbacks protocol)."""

    def __init__(self, show: bool, skipped: Sequence[str] = ()) -> None:
        self.show = show
        self.skipped = set(skipped)
        self.bar: Any = None

    def pipeline_start(self, names: list[str]) -> None:
        total = len([name for name in names if name not in self.skipped])
        self.bar = tqdm(total=total, desc="GraphRAG", disable=not self.show)

    def pipeline_end(self, results: list[Any]) -> None:
        if self.bar is not None:
            self.bar.close()

    def workflow_start(self, name: str, instance: object) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(name)

    def workflow_end(self, name: str, instance: object) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def pipeline_error(self, error: BaseException) -> None:
        pass

    def progress(self, progress: Any) -> None:
        pass


class GraphRAGKG:
    """A GraphRAG index under ``root`` (``output/`` parquet tables + LanceDB, ``cache/``), queried
    with GraphRAG's local search (the paper's step A: the KG's answer to the question)."""

    name = "graphrag"

    def __init__(
        self,
        root: str | Path,
        endpoint: OpenAIEndpoint,
        embed_model: BaseEmbedding,
        *,
        server: LlamaCppServer | None = None,
        chunk_size: int = 300,
        chunk_overlap: int = 100,
        context_tokens: int = 8192,
        community_level: int = 2,
        response_type: str = "Multiple Paragraphs",
        max_concurrency: int = 1,
        settings: dict[str, Any] | None = None,
    ) -> None:
        """Args:
        root: GraphRAG's project folder.
        endpoint: the chat model (see :func:`multihop_rag.serving.llamacpp_server.openai_endpoint`).
        server: a llama.cpp server to keep alive as long as this graph (it serves ``endpoint``).
        context_tokens: the chat model's window; GraphRAG's prompt budgets are set to half of it.
        community_level, response_type: GraphRAG's local-search defaults.
        max_concurrency: requests in flight (GraphRAG's ``concurrent_requests``): the server's slots.
        settings: overrides merged into the generated configuration.
        """
        self.root = Path(root)
        self.endpoint = endpoint
        self.embed_model = embed_model
        self.server = server
        self.community_level = community_level
        self.response_type = response_type
        self.api = _import_graphrag()
        from graphrag.config.models.graph_rag_config import GraphRagConfig

        entity_types = (settings or {}).get("extract_graph", {}).get("entity_types", DEFAULT_ENTITY_TYPES)
        values = _settings(self.root, endpoint, embed_model, chunk_size, chunk_overlap, context_tokens, entity_types,
                           max_concurrency)
        self.config = GraphRagConfig.model_validate(_merge(values, settings or {}))
        self._tables: dict[str, Any] | None = None

    @staticmethod
    def default_root(nodes: Sequence[TextNode], endpoint: OpenAIEndpoint) -> Path:
        """A folder keyed by the chunks and the model, so rebuilding the same corpus resumes."""
        digest = hashlib.sha256(endpoint.model.encode())
        for node in nodes:
            digest.update(node.get_content().encode())
        return bundled.cache_dir() / "graphrag" / digest.hexdigest()[:16]

    @classmethod
    def build(
        cls,
        nodes: Sequence[TextNode],
        endpoint: OpenAIEndpoint,
        embed_model: BaseEmbedding,
        *,
        root: str | Path | None = None,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> GraphRAGKG:
        """Index ``nodes`` (one GraphRAG document each) with GraphRAG's standard pipeline."""
        return run_sync(cls.abuild(nodes, endpoint, embed_model, root=root, show_progress=show_progress, **kwargs))

    @classmethod
    async def abuild(
        cls,
        nodes: Sequence[TextNode],
        endpoint: OpenAIEndpoint,
        embed_model: BaseEmbedding,
        *,
        root: str | Path | None = None,
        show_progress: bool = True,
        **kwargs: Any,
    ) -> GraphRAGKG:
        """Async :meth:`build`."""
        import pandas as pd

        if not nodes:
            raise ValueError("GraphRAG needs at least one chunk")
        graph = cls(root or cls.default_root(nodes, endpoint), endpoint, embed_model, **kwargs)
        documents = pd.DataFrame(
            {
                "id": [node.node_id for node in nodes],
                "title": [str(node.metadata.get("title", "")) for node in nodes],
                "text": [node.get_content() for node in nodes],
                "creation_date": [""] * len(nodes),
                "raw_data": [None] * len(nodes),
                "human_readable_id": list(range(len(nodes))),
            }
        )
        started = time.perf_counter()
        results = await graph.api.build_index(
            config=graph.config, callbacks=[_WorkflowProgress(show_progress, skipped=["load_input_documents"])],
            input_documents=documents,
        )
        failed = [(r.workflow, r.error) for r in results if r.error is not None]
        if failed:
            workflow, error = failed[0]
            raise RuntimeError(
                f"GraphRAG workflow {workflow!r} failed: {error}; logs in {graph.root / 'logs'}. "
                "Re-running resumes from GraphRAG's cache."
            ) from error
        log.info("GraphRAG index built in %.1f s under %s", time.perf_counter() - started, graph.root)
        return graph

    def tables(self) -> dict[str, Any]:
        """GraphRAG's output tables as pandas DataFrames (entities, relationships, …)."""
        if self._tables is None:
            self._tables = run_sync(self._load_tables())
        return self._tables

    async def _load_tables(self) -> dict[str, Any]:
        from graphrag.data_model.data_reader import DataReader
        from graphrag_storage import create_storage
        from graphrag_storage.tables.table_provider_factory import create_table_provider

        provider = create_table_provider(self.config.table_provider, storage=create_storage(self.config.output_storage))
        missing = [name for name in TABLES if not await provider.has(name)]
        if missing:
            raise FileNotFoundError(f"{self.root / 'output'} lacks GraphRAG tables {missing}; build the graph first")
        reader = DataReader(provider)
        return {name: await getattr(reader, name)() for name in TABLES}

    def triples(self) -> int:
        """Relationships in the graph."""
        return len(self.tables()["relationships"])

    def entities(self) -> int:
        return len(self.tables()["entities"])

    def query(self, question: str) -> str:
        """GraphRAG local search's answer to ``question``."""
        return run_sync(self.aquery(question))

    async def aquery(self, question: str) -> str:
        """Async :meth:`query`."""
        response, _context = await self._local_search(question)
        return response if isinstance(response, str) else str(response)

    def context(self, question: str) -> str:
        """The tables GraphRAG local search wrote its answer from (entities, relationships, sources, …), as text
        (its public API writes the answer too: one call, unread)."""
        _response, context = run_sync(self._local_search(question))
        if isinstance(context, str):
            return context
        named = context.items() if isinstance(context, dict) else enumerate(context)
        return "\n\n".join(f"-----{name}-----\n{table.to_csv(sep='|', index=False)}" for name, table in named if len(table))

    async def _local_search(self, question: str) -> tuple[Any, Any]:
        tables = self._tables if self._tables is not None else await self._load_tables()
        self._tables = tables
        return await self.api.local_search(
            config=self.config,
            covariates=None,
            community_level=self.community_level,
            response_type=self.response_type,
            query=question,
            **tables,
        )

    def persist(self, folder: str | Path) -> None:
        """Copy the graph's output (parquet tables, LanceDB) to ``folder/output``."""
        target = Path(folder) / "output"
        if target.resolve() != (self.root / "output").resolve():
            shutil.copytree(self.root / "output", target, dirs_exist_ok=True)

    @classmethod
    def load(
        cls, folder: str | Path, endpoint: OpenAIEndpoint, embed_model: BaseEmbedding, **kwargs: Any
    ) -> GraphRAGKG:
        """Open a graph written by :meth:`persist` (or built under ``folder``)."""
        graph = cls(folder, endpoint, embed_model, **kwargs)
        graph.tables()
        return graph
