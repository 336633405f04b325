"""Persistent LLM-call cache (SQLite), so an interrupted index build resumes where it stopped.

Every finished call is committed at once, keyed by the model, the prompt or messages and the
call's parameters. Re-running a killed build answers its finished calls from disk.

- LlamaIndex: :class:`CachedLLM` wraps any ``LLM`` (and counts calls, hits and tokens).
- LangChain: :class:`SQLiteChatCache` is a ``BaseCache``; pass it as ``cache=`` to any chat model;
  :class:`UsageCallback` counts a chat model's calls and tokens.
Both share one file format, :class:`LLMCache`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.load import dumps, loads
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation, GenerationChunk, LLMResult
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms.llm import LLM
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["LLMCache", "CachedLLM", "SQLiteChatCache", "Usage", "UsageCallback", "cache_key", "cached_llm"]


def cache_key(model: str, payload: Any, params: dict[str, Any] | None = None) -> str:
    """Stable key for one call: SHA-256 of model, prompt/messages and parameters."""
    blob = json.dumps({"model": model, "payload": payload, "params": params or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class LLMCache:
    """A key -> text store in one SQLite file, safe to share between threads."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)")

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, value, created) VALUES (?, ?, ?)", (key, value, time.time())
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM calls")

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class Usage:
    """What an LLM spent: calls made, calls answered from the cache, tokens and seconds."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def __sub__(self, other: Usage) -> Usage:
        """What was spent between two snapshots (``after - before``)."""
        a, b = asdict(self), asdict(other)
        return Usage(**{k: a[k] - b[k] for k in a})


def _tokens_from_raw(raw: Any) -> tuple[int, int]:
    """(prompt, completion) tokens from a llama.cpp or Ollama raw response, 0 if absent."""
    if not isinstance(raw, dict):
        raw = getattr(raw, "__dict__", {}) or {}
    usage = raw.get("usage") or {}
    if usage:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return int(raw.get("prompt_eval_count") or 0), int(raw.get("eval_count") or 0)


def _model_id(llm: LLM) -> str:
    meta = llm.metadata
    params = {k: getattr(llm, k) for k in ("temperature", "max_tokens", "context_window") if hasattr(llm, k)}
    return f"{type(llm).__name__}:{meta.model_name}:{json.dumps(params, sort_keys=True, default=str)}"


class CachedLLM(LLM):
    """A LlamaIndex ``LLM`` that answers repeated calls from an :class:`LLMCache` and counts usage.

    Streaming calls pass through uncached. ``usage`` counts only calls that reached the model,
    plus ``cache_hits``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: LLM = Field(description="The LLM that answers cache misses.")
    cache: LLMCache = Field(description="Where finished calls are stored.")
    _usage: Usage = PrivateAttr(default_factory=Usage)
    _usage_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def class_name(cls) -> str:
        return "CachedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.inner.metadata

    @property
    def usage(self) -> Usage:
        return self._usage

    def _key(self, payload: Any, kwargs: dict[str, Any]) -> str:
        return cache_key(_model_id(self.inner), payload, kwargs)

    def _record(self, raw: Any, started: float) -> None:
        prompt, completion = _tokens_from_raw(raw)
        with self._usage_lock:
            self._usage.calls += 1
            self._usage.prompt_tokens += prompt
            self._usage.completion_tokens += completion
            self._usage.seconds += time.perf_counter() - started

    def _hit(self) -> None:
        with self._usage_lock:
            self._usage.cache_hits += 1

    @staticmethod
    def _messages_payload(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": str(m.role.value), "content": m.content or ""} for m in messages]

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        key = self._key(self._messages_payload(messages), kwargs)
        if (text := self.cache.get(key)) is not None:
            self._hit()
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))
        started = time.perf_counter()
        response = self.inner.chat(messages, **kwargs)
        self._record(response.raw, started)
        self.cache.put(key, response.message.content or "")
        return response

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        key = self._key({"prompt": prompt, "formatted": formatted}, kwargs)
        if (text := self.cache.get(key)) is not None:
            self._hit()
            return CompletionResponse(text=text)
        started = time.perf_counter()
        response = self.inner.complete(prompt, formatted=formatted, **kwargs)
        self._record(response.raw, started)
        self.cache.put(key, response.text)
        return response

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        key = self._key(self._messages_payload(messages), kwargs)
        if (text := self.cache.get(key)) is not None:
            self._hit()
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))
        started = time.perf_counter()
        response = await self.inner.achat(messages, **kwargs)
        self._record(response.raw, started)
        self.cache.put(key, response.message.content or "")
        return response

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        key = self._key({"prompt": prompt, "formatted": formatted}, kwargs)
        if (text := self.cache.get(key)) is not None:
            self._hit()
            return CompletionResponse(text=text)
        started = time.perf_counter()
        response = await self.inner.acomplete(prompt, formatted=formatted, **kwargs)
        self._record(response.raw, started)
        self.cache.put(key, response.text)
        return response

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self.inner.stream_chat(messages, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        return self.inner.stream_complete(prompt, formatted=formatted, **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return await self.inner.astream_chat(messages, **kwargs)

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        return await self.inner.astream_complete(prompt, formatted=formatted, **kwargs)


_CACHED_TYPES = [Generation, GenerationChunk, ChatGeneration, ChatGenerationChunk, AIMessage, AIMessageChunk]


class SQLiteChatCache(BaseCache):
    """LangChain ``BaseCache`` on an :class:`LLMCache` file: ``chat_model(..., cache=SQLiteChatCache(path))``."""

    def __init__(self, path: str | Path | LLMCache):
        self.store = path if isinstance(path, LLMCache) else LLMCache(path)

    def lookup(self, prompt: str, llm_string: str) -> Sequence[Generation] | None:
        text = self.store.get(cache_key(llm_string, prompt))
        if text is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # langchain_core.load is marked beta
            return [loads(g, allowed_objects=_CACHED_TYPES) for g in json.loads(text)]

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Generation]) -> None:
        self.store.put(cache_key(llm_string, prompt), json.dumps([dumps(g) for g in return_val]))

    def clear(self, **kwargs: Any) -> None:
        self.store.clear()


class UsageCallback(BaseCallbackHandler):
    """Counts a LangChain chat model's calls and tokens into a :class:`Usage`:
    ``model.callbacks = [UsageCallback(usage)]``. Calls answered by a LangChain cache count as
    calls too (LangChain reports them like any other)."""

    def __init__(self, usage: Usage | None = None):
        self.usage = usage or Usage()
        self._lock = threading.Lock()

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.usage.calls += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                meta = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                with self._lock:
                    self.usage.prompt_tokens += int(meta.get("input_tokens", 0))
                    self.usage.completion_tokens += int(meta.get("output_tokens", 0))


def cached_llm(llm: LLM, cache: bool | str | Path | LLMCache | None) -> LLM:
    """``llm`` behind an :class:`LLMCache`: ``True`` the shared ~/.cache/multihop-rag/llm_calls.sqlite,
    a path another file, an ``LLMCache`` itself; ``False``/``None`` (or an already cached LLM) unchanged."""
    if isinstance(llm, CachedLLM) or not cache:
        return llm
    from multihop_rag import bundled

    store = cache if isinstance(cache, LLMCache) else LLMCache(
        bundled.cache_dir() / "llm_calls.sqlite" if cache is True else cache
    )
    return CachedLLM(inner=llm, cache=store)
