"""Persistent LLM-call cache (SQLite), so an interrupted index build resumes where it stopped.

The cache belongs to an index: its file lies beside the index's persisted files (or where the user
says), never in one global file that quietly keeps a copy of every corpus. Clear it by deleting the
file, or with :meth:`LLMCache.clear`.

A key holds everything that changes an output: the model's identity (its GGUF file's SHA-256 or
its Ollama digest, with every setting of the model object: server URL, context size, token cap,
temperature, seed, thinking), the prompt or messages, and the call's own parameters (token cap,
stop sequences, JSON schema). Empty replies and errors are never stored; a reply's finish reason
is, so a reply cut at the token limit is known as one when it comes back from the cache.

- LlamaIndex: :class:`CachedLLM` wraps any ``LLM`` and counts calls, cache hits, tokens and the
  time calls were in flight (:class:`~multihop_rag.llm.usage.Usage`).
- LangChain: :class:`SQLiteChatCache` is a ``BaseCache``; pass it as ``cache=`` to any chat model;
  :class:`UsageCallback` counts a chat model's calls and tokens.
Both share one file format, :class:`LLMCache`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

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

from multihop_rag.llm.calls import finish_reason, raw_logprobs, strip_thinking
from multihop_rag.llm.reply_limit import ReplyLimit, aread_limited, read_limited
from multihop_rag.llm.usage import CallClock, Usage

__all__ = [
    "LLMCache",
    "CachedLLM",
    "SQLiteChatCache",
    "UsageCallback",
    "cache_key",
    "cached_llm",
    "model_identity",
    "keyed_settings",
    "file_digest",
]

VOLATILE = frozenset({"request_timeout", "timeout", "keep_alive", "headers", "callback_manager", "class_name"})
"""Model settings that do not change an output (left out of cache keys)."""

OFF = {"prompt_lookup": 0}
"""Settings added after caches were written, at the value that leaves every output as it was before they existed:
left out of cache keys at that value, so a committed cache keeps replaying."""


def keyed_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that go into a cache key: all but the volatile ones and those at their :data:`OFF` value."""
    return {k: v for k, v in settings.items() if k not in VOLATILE and (k not in OFF or OFF[k] != v)}


def cache_key(model: Any, payload: Any, params: dict[str, Any] | None = None) -> str:
    """Stable key for one call: SHA-256 of the model's identity, the prompt/messages and the call's parameters."""
    blob = json.dumps({"model": model, "payload": payload, "params": params or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


_DIGESTS: dict[tuple[str, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()


def file_digest(path: str | Path) -> str:
    """SHA-256 of a model file, computed once per process (a ``<file>.sha256`` beside it is trusted)."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, int(stat.st_mtime))
    with _DIGESTS_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    recorded = path.with_name(path.name + ".sha256")
    if recorded.is_file():
        digest = recorded.read_text().strip()
    else:
        sha = hashlib.sha256()
        with path.open("rb") as fh:
            while block := fh.read(1 << 24):
                sha.update(block)
        digest = sha.hexdigest()
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
    return digest


def model_identity(llm: LLM) -> dict[str, Any]:
    """What identifies ``llm``'s outputs: its class, every setting but the volatile ones, and the
    weights' digest (``digest`` attribute, else the SHA-256 of ``model_path``)."""
    settings = keyed_settings(llm.to_dict())
    digest = getattr(llm, "digest", None)
    if not digest and (path := getattr(llm, "model_path", None)) and os.path.isfile(path):
        digest = file_digest(path)
    return {"class": type(llm).__name__, "digest": digest, **settings}


class LLMCache:
    """A key -> JSON store in one SQLite file (``":memory:"`` for none on disk), safe between threads."""

    def __init__(self, path: str | Path):
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path or ":memory:"), check_same_thread=False, isolation_level=None)
        if self.path is not None:
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
            return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM calls")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def describe(self) -> dict[str, Any]:
        """Where the cache is and how many entries it holds (replies and clustering decisions; for an index's ``stats()``)."""
        return {"path": str(self.path) if self.path else None, "entries": len(self)}


def _tokens_from_raw(raw: Any) -> tuple[int, int]:
    """(prompt, completion) tokens from a llama.cpp, OpenAI or Ollama raw response, 0 if absent."""
    if raw is None:
        return 0, 0
    get = raw.get if isinstance(raw, dict) else lambda key, default=None: getattr(raw, key, default)
    usage = get("usage") or {}
    if usage:
        uget = usage.get if isinstance(usage, dict) else lambda key, default=None: getattr(usage, key, default)
        return int(uget("prompt_tokens") or 0), int(uget("completion_tokens") or 0)
    return int(get("prompt_eval_count") or 0), int(get("eval_count") or 0)


class CachedLLM(LLM):
    """A LlamaIndex ``LLM`` that answers repeated calls from an :class:`LLMCache` (or none: it then
    only counts) and counts usage. A reply with a thinking block comes back without it.

    Streaming calls pass through uncached. ``usage`` counts only calls that reached the model,
    plus ``cache_hits``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: LLM = Field(description="The LLM that answers cache misses.")
    cache: LLMCache | None = Field(default=None, description="Where finished calls are stored (None: nowhere).")
    limit: ReplyLimit | None = Field(default=None, description="Each reply stopped after so many lines or sentences "
                                     "(None: not stopped); see :meth:`with_max_lines`, :meth:`with_max_sentences`.")
    _usage: Usage = PrivateAttr(default_factory=Usage)
    _clock: CallClock = PrivateAttr(default_factory=CallClock)
    _usage_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _identity: dict[str, Any] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "CachedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.inner.metadata

    @property
    def clock(self) -> CallClock:
        """The intervals of the calls that reached the model."""
        return self._clock

    @property
    def usage(self) -> Usage:
        """A snapshot of what the wrapped LLM spent so far."""
        with self._usage_lock:
            snapshot = self._usage + Usage()
        snapshot.busy_seconds = self._clock.busy()
        return snapshot

    def with_max_lines(self, n: int | None) -> CachedLLM:
        """This LLM with each reply stopped after ``n`` non-empty lines (None: not stopped), counting into the same
        usage. The reply is streamed and the stream closed there, so the rest is never generated (a backend that
        does not stream generates it all; the reply is cut the same). A reply cached whole comes back cut, with no
        call: greedy decoding generates the same first lines either way."""
        return self.model_copy(update={"limit": ReplyLimit("lines", n) if n else None})

    def with_max_sentences(self, n: int | None) -> CachedLLM:
        """This LLM with each reply stopped after ``n`` sentences (None: not stopped), as :meth:`with_max_lines`
        stops lines: the rest is never generated, and a reply cached whole comes back cut, with no call."""
        return self.model_copy(update={"limit": ReplyLimit("sentences", n) if n else None})

    def _key(self, payload: Any, kwargs: dict[str, Any]) -> str:
        if self._identity is None:
            self._identity = model_identity(self.inner)
        return cache_key(self._identity, payload, kwargs)

    def _lookup(self, key: str) -> dict[str, Any] | None:
        if self.cache is None or (value := self.cache.get(key)) is None:
            return None
        with self._usage_lock:
            self._usage.cache_hits += 1
        return json.loads(value)

    def _find(self, payload: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The call's key and its cached reply, if any; under a limit, a reply cached whole comes back cut."""
        if (limit := self.limit) is None:
            key = self._key(payload, kwargs)
            return key, self._lookup(key)
        key = self._key(payload, {**kwargs, f"max_{limit.unit}": limit.n})
        if (hit := self._lookup(key)) is not None:
            return key, hit
        if (whole := self._lookup(self._key(payload, kwargs))) is None:
            return key, None
        cut = limit.cut(whole["text"])
        return key, {"text": cut, "finish_reason": whole.get("finish_reason") if cut == whole["text"] else "stop"}

    def _store(self, key: str, text: str, raw: Any, started: float, token: int) -> str:
        """Count the call; keep a non-empty reply (without thinking) with its finish reason."""
        self._clock.stop(token)
        prompt, completion = _tokens_from_raw(raw)
        with self._usage_lock:
            self._usage.calls += 1
            self._usage.prompt_tokens += prompt
            self._usage.completion_tokens += completion
            self._usage.seconds += time.perf_counter() - started
        text, _ = strip_thinking(text or "")
        if self.cache is not None and text.strip():
            record = {"text": text, "finish_reason": finish_reason(raw), "completion_tokens": completion}
            if (logprobs := raw_logprobs(raw)) is not None:
                record["logprobs"] = logprobs
            self.cache.put(key, json.dumps(record))
        return text

    @staticmethod
    def _raw(hit: dict[str, Any]) -> dict[str, Any]:
        return {"finish_reason": hit.get("finish_reason"), "cached": True, "logprobs": hit.get("logprobs"),
                "usage": {"prompt_tokens": 0, "completion_tokens": hit.get("completion_tokens", 0)}}

    @staticmethod
    def _messages_payload(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": str(m.role.value), "content": m.content or ""} for m in messages]

    def _chat_response(self, text: str, raw: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), raw=raw)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        key, hit = self._find(self._messages_payload(messages), kwargs)
        if hit is not None:
            return self._chat_response(hit["text"], self._raw(hit))
        started, token = time.perf_counter(), self._clock.start()
        raw: Any
        try:
            if limit := self.limit:
                text, raw = read_limited(self.inner.stream_chat(messages, **kwargs), limit)
            else:
                response = self.inner.chat(messages, **kwargs)
                text, raw = response.message.content or "", response.raw
        except BaseException:
            self._clock.stop(token)
            raise
        return self._chat_response(self._store(key, text, raw, started, token), raw)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        key, hit = self._find({"prompt": prompt, "formatted": formatted}, kwargs)
        if hit is not None:
            return CompletionResponse(text=hit["text"], raw=self._raw(hit))
        started, token = time.perf_counter(), self._clock.start()
        raw: Any
        try:
            if limit := self.limit:
                text, raw = read_limited(self.inner.stream_complete(prompt, formatted=formatted, **kwargs), limit)
            else:
                response = self.inner.complete(prompt, formatted=formatted, **kwargs)
                text, raw = response.text, response.raw
        except BaseException:
            self._clock.stop(token)
            raise
        return CompletionResponse(text=self._store(key, text, raw, started, token), raw=raw)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        key, hit = self._find(self._messages_payload(messages), kwargs)
        if hit is not None:
            return self._chat_response(hit["text"], self._raw(hit))
        started, token = time.perf_counter(), self._clock.start()
        raw: Any
        try:
            if limit := self.limit:
                text, raw = await aread_limited(await self.inner.astream_chat(messages, **kwargs), limit)
            else:
                response = await self.inner.achat(messages, **kwargs)
                text, raw = response.message.content or "", response.raw
        except BaseException:
            self._clock.stop(token)
            raise
        return self._chat_response(self._store(key, text, raw, started, token), raw)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        key, hit = self._find({"prompt": prompt, "formatted": formatted}, kwargs)
        if hit is not None:
            return CompletionResponse(text=hit["text"], raw=self._raw(hit))
        started, token = time.perf_counter(), self._clock.start()
        raw: Any
        try:
            if limit := self.limit:
                stream = await self.inner.astream_complete(prompt, formatted=formatted, **kwargs)
                text, raw = await aread_limited(stream, limit)
            else:
                response = await self.inner.acomplete(prompt, formatted=formatted, **kwargs)
                text, raw = response.text, response.raw
        except BaseException:
            self._clock.stop(token)
            raise
        return CompletionResponse(text=self._store(key, text, raw, started, token), raw=raw)

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


_CACHED_TYPES: list[type[Any]] = [Generation, GenerationChunk, ChatGeneration, ChatGenerationChunk, AIMessage, AIMessageChunk]


class SQLiteChatCache(BaseCache):
    """LangChain ``BaseCache`` on an :class:`LLMCache` file: ``chat_model(..., cache=SQLiteChatCache(path))``.

    ``identity`` (the model's digest) joins LangChain's own description of the model in every key;
    ``hits`` counts lookups the cache answered. Empty generations are not stored.
    """

    def __init__(self, path: str | Path | LLMCache, identity: str = ""):
        self.store = path if isinstance(path, LLMCache) else LLMCache(path)
        self.identity = identity
        self.hits = 0
        self._lock = threading.Lock()

    def _key(self, prompt: str, llm_string: str) -> str:
        return cache_key({"identity": self.identity, "llm": llm_string}, prompt)

    def lookup(self, prompt: str, llm_string: str) -> Sequence[Generation] | None:
        text = self.store.get(self._key(prompt, llm_string))
        if text is None:
            return None
        with self._lock:
            self.hits += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # langchain_core.load is marked beta
            return [loads(g, allowed_objects=_CACHED_TYPES) for g in json.loads(text)]

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Generation]) -> None:
        if not any(g.text.strip() for g in return_val):
            return
        self.store.put(self._key(prompt, llm_string), json.dumps([dumps(g) for g in return_val]))

    def clear(self, **kwargs: Any) -> None:
        self.store.clear()


class UsageCallback(BaseCallbackHandler):
    """Counts a LangChain chat model's calls, tokens and time into a :class:`Usage`:
    ``model.callbacks = [UsageCallback(usage)]``. Each call's interval goes to ``clock`` (pass
    ``Models.chat_clock``, so that busy time is the union over both frameworks). LangChain reports a call
    its cache answered like any other: subtract the cache's ``hits`` (:class:`SQLiteChatCache`) to
    count calls made."""

    run_inline = True  # time the call where it runs, also in async code

    def __init__(self, usage: Usage | None = None, clock: CallClock | None = None):
        self.usage = usage or Usage()
        self.clock = clock or CallClock()
        self._lock = threading.Lock()
        self._open: dict[UUID, int] = {}

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self.usage.calls += 1
            self._open[run_id] = self.clock.start()

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        prompt = completion = 0
        for generations in response.generations:
            for generation in generations:
                meta = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                prompt += int(meta.get("input_tokens", 0))
                completion += int(meta.get("output_tokens", 0))
        with self._lock:
            self.usage.prompt_tokens += prompt
            self.usage.completion_tokens += completion
        self._close(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def _close(self, run_id: UUID) -> None:
        with self._lock:
            token = self._open.pop(run_id, None)
        if token is None:
            return
        seconds = self.clock.stop(token)
        busy = self.clock.busy()
        with self._lock:
            self.usage.seconds += seconds
            self.usage.busy_seconds = busy


def cached_llm(llm: LLM, cache: str | Path | LLMCache | None) -> CachedLLM:
    """``llm`` behind an :class:`LLMCache` at ``cache`` (a path or an ``LLMCache``; ``None``: counted, not
    cached). An already wrapped LLM is returned as it is."""
    if isinstance(llm, CachedLLM):
        return llm
    store = cache if isinstance(cache, LLMCache) or cache is None else LLMCache(cache)
    return CachedLLM(inner=llm, cache=store)
