"""What the application layer (command line, evaluation, demo) needs from a method, and what it gives.

A method package implements :class:`Method` and registers it as an entry point of the group
``multihop_rag.methods`` (``pyproject.toml``)::

    [project.entry-points."multihop_rag.methods"]
    mymethod = "my_package.method:METHOD"

so ``multihop-rag index|ask|eval`` find it without importing any method by name; a user's own
method joins the same way. Everything here is framework-neutral data: an :class:`Answer` with its
ranked :class:`Evidence` and trace, the shared :class:`Models`, an :class:`UpdateReport`.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import BaseModel

from multihop_rag import backends
from multihop_rag.corpus import Passage
from multihop_rag.llm.cache import CachedLLM, LLMCache, SQLiteChatCache, UsageCallback
from multihop_rag.llm.usage import CallClock, Usage
from multihop_rag.serving.profile import default_concurrency

__all__ = [
    "Evidence",
    "Answer",
    "TraceSink",
    "UpdateReport",
    "Models",
    "MethodIndex",
    "Method",
    "source_hash",
]

ConfigT = TypeVar("ConfigT", bound=BaseModel)
"""A method's settings class."""


@dataclass
class Evidence:
    """One unit a method retrieved or visited, in rank order."""

    id: str
    """The unit's id (a passage, a chunk, a tree or graph node)."""
    title: str
    text: str
    score: float = 0.0
    passage_ids: list[str] = field(default_factory=list)
    """Passages whose text this unit holds: a passage itself, a chunk of it, a chunk packing several;
    none for a summary, an aggregate or an information point (the model's rewrite of many)."""
    kind: str = "passage"
    """``passage``, ``chunk``, ``summary``, ``aggregate``, ``proposition``, ``information_point`` or ``profile``."""
    source_ids: list[str] = field(default_factory=list)
    """Passages a rewrite was made from (a summary's, an aggregate's, a proposition's, a point's, an LLM-written
    profile's); empty for a unit that holds passage text itself (``passage_ids``)."""


@dataclass
class Answer:
    """An answer with the evidence it was given, its trace and what it cost."""

    question: str
    text: str
    evidence: list[Evidence] = field(default_factory=list)
    seconds: float = 0.0
    trace: list[dict[str, Any]] = field(default_factory=list)
    """The reasoning as it happened: sub-questions, memories, documents, visited nodes, replies …"""
    info: dict[str, Any] = field(default_factory=dict)
    """Outcome fields: ``stop_reason``, ``limit_hit`` (a loop ended at its bound), ``copied_example`` …"""


TraceSink = Callable[[dict[str, Any]], None]
"""Receives trace events as they happen (``{"step": …, …}``): the command line's ``--trace``."""


@dataclass
class UpdateReport:
    """What an incremental update did."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    llm_calls: int = 0
    summaries_rewritten: int = 0
    seconds: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass
class Models:
    """The models every method of one run shares."""

    llm: CachedLLM
    """LlamaIndex LLM (counted; cached when a cache is given)."""
    embed: BaseEmbedding
    chat: BaseChatModel
    """LangChain chat model on the same weights (counted by ``chat_usage``)."""
    lc_embed: Embeddings
    llm_spec: str = ""
    embed_spec: str = ""
    chat_usage: Usage = field(default_factory=Usage)
    """Calls, tokens and time of ``chat`` (a :class:`~multihop_rag.llm.cache.UsageCallback` fills it)."""
    chat_clock: CallClock = field(default_factory=CallClock)
    """The intervals of ``chat``'s calls (the same callback records them), for the busy time."""
    chat_cache: SQLiteChatCache | None = None
    max_concurrency: int = 1
    """LLM calls a build keeps in flight (:func:`multihop_rag.serving.profile.default_concurrency`)."""

    @classmethod
    def from_specs(
        cls, llm: str | None = None, embed: str | None = None, *, cache: Path | None = None, max_concurrency: int | None = None
    ) -> Models:
        """Both frameworks' models on one LLM and one embedding spec (``None``: the environment's or the
        default, :mod:`multihop_rag.backends`), counted; with ``cache`` their calls are kept in that file."""

        llm_spec, embed_spec = str(backends.resolve_llm_spec(llm)), str(backends.resolve_embed_spec(embed))
        store = LLMCache(cache) if cache is not None else None
        inner = backends.llama_index_llm(llm_spec)
        chat = backends.chat_model(llm_spec, cache=store)
        models = cls(
            llm=CachedLLM(inner=inner, cache=store),
            embed=backends.llama_index_embedding(embed_spec),
            chat=chat,
            lc_embed=backends.langchain_embeddings(embed_spec),
            llm_spec=llm_spec,
            embed_spec=embed_spec,
            chat_cache=getattr(chat, "cache", None) if store is not None else None,
            max_concurrency=max_concurrency or default_concurrency(inner),
        )
        chat.callbacks = [UsageCallback(models.chat_usage, models.chat_clock)]
        return models

    def close(self) -> None:
        """Close the LLM-call cache, so its file is whole on disk now rather than when the collector gets to it."""
        if self.llm.cache is not None:
            self.llm.cache.close()

    def __enter__(self) -> Models:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def usage(self) -> Usage:
        """Calls that reached a model, calls answered by a cache, tokens, seconds and busy time (the
        union of both frameworks' call intervals)."""
        a, b = self.llm.usage, self.chat_usage
        hits = self.chat_cache.hits if self.chat_cache is not None else 0
        return Usage(
            calls=a.calls + b.calls - hits,
            cache_hits=a.cache_hits + hits,
            prompt_tokens=a.prompt_tokens + b.prompt_tokens,
            completion_tokens=a.completion_tokens + b.completion_tokens,
            seconds=a.seconds + b.seconds,
            busy_seconds=self.llm.clock.busy(self.chat_clock),
        )


@runtime_checkable
class MethodIndex(Protocol):
    """A built (or reloaded) index of a method, ready to answer."""

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        """Answer ``question`` with its ranked evidence; ``trace`` receives each step as it happens."""
        ...

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the index hold exactly ``passages``: add new ones, re-index changed ones (same id, other
        text), remove the others, at the cost of the change."""
        ...

    def stats(self) -> dict[str, Any]:
        """Structure, build cost by stage, cache location."""
        ...


@runtime_checkable
class Method(Protocol[ConfigT]):
    """A method as the application layer drives it, generic in its settings (``ConfigT``)."""

    name: str
    summary: str
    """One line: what it does."""
    builds: bool
    """Whether building its index calls the LLM. Such a method may also offer ``estimate(passages,
    models, config) -> multihop_rag.estimate.BuildEstimate``: its build's calls and tokens, counted
    without calling the LLM (``multihop-rag index --estimate``)."""
    config_class: type[ConfigT]
    """Its settings (``--set name.field=value`` on the command line)."""
    source_packages: tuple[str, ...]
    """Packages whose source decides its answers (the code version of an evaluation)."""

    def build(
        self, passages: Sequence[Passage], models: Models, folder: Path, config: ConfigT, *, overwrite: bool = False
    ) -> MethodIndex:
        """Build the index into ``folder`` (resuming an interrupted build there) and persist it."""
        ...

    def load(self, folder: Path, models: Models, config: ConfigT) -> MethodIndex:
        """Reload the index persisted in ``folder``."""
        ...


def source_hash(packages: Sequence[str]) -> str:
    """A short hash of the ``.py`` sources of ``packages`` (modules or packages), for an evaluation's setting."""
    digest = hashlib.sha256()
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no package {name!r} to hash: a method's source_packages must name its own code")
        root = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in files:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
