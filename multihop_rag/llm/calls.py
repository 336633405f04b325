"""One LLM call on either framework, and what a caller must know about its reply.

- :class:`Call`: a prompt (or chat messages) with per-call limits (``max_tokens``, ``stop``) and an
  optional JSON schema for constrained decoding.
- :class:`Reply`: the text with any thinking block removed, whether the model stopped at the token
  limit (``truncated``: finish reason ``length``, or as many tokens as the cap), and token counts.
- :func:`call` / :func:`acall` run one call on a LlamaIndex ``LLM`` or a LangChain chat model.
- :func:`run` / :func:`arun` drive a *dialogue*: a generator that yields requests — a :class:`Call`
  (answered with a :class:`Reply`), an :class:`Effect` (any other sync/async pair, such as a
  retriever's ``invoke``/``ainvoke``) or :class:`Together` (independent requests, run at once on a
  server with several slots) — and receives their results. The same control flow (a retry,
  a re-ask) then runs synchronously or with the async methods without being written twice
  (LangGraph nodes and ``agenerate_json`` use it).

Thinking models (qwen3, deepseek-r1, gpt-oss on Ollama) put their reasoning in a ``<think>…</think>``
block or a separate field: backends built here switch thinking off, and a block that still arrives
is removed from the reply (``Reply.thinking``) before anyone parses it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.llm import LLM

from multihop_rag.errors import ContextOverflowError
from multihop_rag.llm.concurrency import map_bounded
from multihop_rag.serving.profile import profile

__all__ = [
    "AnyLLM",
    "Call",
    "Effect",
    "Together",
    "Reply",
    "Dialogue",
    "call",
    "acall",
    "run",
    "arun",
    "ask",
    "finish_reason",
    "first_token_logprobs",
    "strip_thinking",
    "supports_format",
]

AnyLLM = LLM | BaseChatModel
T = TypeVar("T")

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)\s*", re.DOTALL | re.IGNORECASE)


def strip_thinking(text: str) -> tuple[str, bool]:
    """``text`` without ``<think>…</think>`` blocks (an unclosed one runs to the end); whether one was there."""
    stripped = _THINK.sub("", text)
    return stripped.strip() if stripped != text else text, stripped != text


@dataclass(frozen=True)
class Call:
    """What to ask one model."""

    model: AnyLLM
    prompt: str | Sequence[ChatMessage] | Sequence[BaseMessage]
    """A prompt, or chat messages of the model's framework."""
    max_tokens: int | None = None
    """Most tokens to generate (None: the model's own setting)."""
    stop: Sequence[str] | None = None
    schema: dict[str, Any] | None = None
    """A JSON schema: constrains decoding where the backend allows it (Ollama, llama.cpp)."""
    top_logprobs: int | None = None
    """Ask for the first generated token's most likely alternatives (:attr:`Reply.first_token_logprobs`)."""

    def run(self) -> Reply:
        return call(self)

    async def arun(self) -> Reply:
        return await acall(self)


@dataclass(frozen=True)
class Effect:
    """Another step of a dialogue that has a sync and an async form, e.g.
    ``Effect(lambda: retriever.invoke(q), lambda: retriever.ainvoke(q))``."""

    sync: Callable[[], Any]
    asynchronous: Callable[[], Awaitable[Any]]

    def run(self) -> Any:
        return self.sync()

    async def arun(self) -> Any:
        return await self.asynchronous()


@dataclass(frozen=True)
class Together:
    """Independent requests; the dialogue receives their results as a list, in order. With ``at_once`` they run
    at the same time (threads, or gathered under ``arun``): a served model's slots answer them side by side.
    Without it they run one after another, in order (an in-process model serves one call at a time)."""

    requests: tuple[Call | Effect, ...]
    at_once: bool = True

    def run(self) -> list[Any]:
        return map_bounded(lambda request: request.run(), self.requests,
                           max_concurrency=len(self.requests) if self.at_once else 1, show_progress=False)

    async def arun(self) -> list[Any]:
        if not self.at_once:
            return [await request.arun() for request in self.requests]
        return list(await asyncio.gather(*(request.arun() for request in self.requests)))


@dataclass
class Reply:
    """A model's answer to one :class:`Call`."""

    text: str
    truncated: bool = False
    """Generation stopped at the token limit: the text is cut off."""
    thinking: bool = False
    """A thinking block was removed from the text."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    raw: Any = field(default=None, repr=False)
    first_token_logprobs: dict[str, float] = field(default_factory=dict)
    """With ``Call.top_logprobs``: the first generated token's alternatives, token text → log probability
    (LangChain chat models on llama.cpp, Ollama and OpenAI-compatible servers, LlamaIndex LLMs on llama.cpp and
    OpenAI-compatible servers; empty where none come back, e.g. LlamaIndex's Ollama, which does not ask for them)."""


Dialogue = Generator[Any, Any, T]
"""A control flow that yields requests (:class:`Call`, :class:`Effect`, :class:`Together`) and receives their results."""


def supports_format(model: AnyLLM) -> bool:
    """Whether the backend constrains decoding to a JSON schema given as ``format=`` (its profile says)."""
    return profile(model).schema_output


def _field(obj: Any, key: str) -> Any:
    """``key`` of a raw response or part of one: a dict's item or a response object's attribute (None if absent)."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _first_choice(raw: Any) -> Any:
    choices = _field(raw, "choices") or []
    return choices[0] if choices else None


def finish_reason(raw: Any) -> str | None:
    """The finish reason of a raw response: llama.cpp and OpenAI ``choices[0].finish_reason``,
    Ollama ``done_reason``, or our cache's ``finish_reason``."""
    for value in (_field(raw, "finish_reason"), _field(raw, "done_reason"), _field(_first_choice(raw), "finish_reason")):
        if value:
            return str(value)
    return None


def first_token_logprobs(metadata: Any) -> dict[str, float]:
    """The first generated token's alternatives in a reply's ``logprobs``: OpenAI's and llama.cpp's
    ``{"content": [{"token", "logprob", "top_logprobs": [...]}, ...]}`` or Ollama's list of the same entries."""
    entries = metadata.get("content") if isinstance(metadata, dict) else metadata
    if not entries:
        return {}
    first = entries[0]
    alternatives = first.get("top_logprobs") or [first]
    out: dict[str, float] = {}
    for alt in alternatives:
        out.setdefault(str(alt["token"]), float(alt["logprob"]))
    return out


def _usage(raw: Any) -> tuple[int, int]:
    if usage := _field(raw, "usage"):
        return int(_field(usage, "prompt_tokens") or 0), int(_field(usage, "completion_tokens") or 0)
    return int(_field(raw, "prompt_eval_count") or 0), int(_field(raw, "eval_count") or 0)


def _finish(text: str, reason: str | None, prompt: int, completion: int, max_tokens: int | None, raw: Any) -> Reply:
    text, thinking = strip_thinking(text or "")
    truncated = reason == "length" or (reason is None and max_tokens is not None and completion >= max_tokens)
    return Reply(text.strip(), truncated, thinking, prompt, completion, reason, raw=raw)


def _llama_index_kwargs(c: Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if c.max_tokens is not None:
        kwargs["max_tokens"] = c.max_tokens
    if c.stop:
        kwargs["stop"] = list(c.stop)
    if c.schema is not None and supports_format(c.model):
        kwargs["format"] = c.schema
    if c.top_logprobs:
        kwargs.update(logprobs=True, top_logprobs=c.top_logprobs)  # OpenAI's pair; llama.cpp reads top_logprobs
    return kwargs


def raw_logprobs(raw: Any) -> Any:
    """The ``logprobs`` of a LlamaIndex reply's raw response as plain data (None if it has none): of its first choice
    (llama.cpp's dict, the OpenAI client's object), or of a reply replayed from the LLM-call cache."""
    logprobs = _field(raw, "logprobs") or _field(_first_choice(raw), "logprobs")
    return logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs


def _from_llama_index(text: str, raw: Any, c: Call) -> Reply:
    reply = _finish(text, finish_reason(raw), *_usage(raw), c.max_tokens, raw)
    if c.top_logprobs:
        reply.first_token_logprobs = first_token_logprobs(raw_logprobs(raw))
    return reply


def _langchain_model(c: Call) -> tuple[BaseChatModel, dict[str, Any]]:
    """The model to invoke and its per-call kwargs (ChatOllama takes a token cap only as a field)."""
    from langchain_ollama import ChatOllama

    model = c.model
    assert isinstance(model, BaseChatModel)
    kwargs: dict[str, Any] = {}
    if c.max_tokens is not None:
        if isinstance(model, ChatOllama):
            model = model.model_copy(update={"num_predict": c.max_tokens})
        else:
            kwargs["max_tokens"] = c.max_tokens
    if c.stop:
        kwargs["stop"] = list(c.stop)
    if c.schema is not None and supports_format(model):
        kwargs["format"] = c.schema
    if c.top_logprobs:
        kwargs.update(logprobs=True, top_logprobs=c.top_logprobs)
    return model, kwargs


def _from_message(message: AIMessage | BaseMessage, c: Call) -> Reply:
    meta = getattr(message, "response_metadata", None) or {}
    usage = getattr(message, "usage_metadata", None) or {}
    reason = meta.get("finish_reason") or meta.get("done_reason")
    window = getattr(c.model, "num_ctx", None)  # ChatOllama: the server cuts a longer prompt silently
    if window and int(usage.get("input_tokens", 0)) >= window:
        raise ContextOverflowError(
            f"Ollama cut the prompt to its {window}-token context (num_ctx): raise the context size or shorten the input"
        )
    reply = _finish(
        message.text, reason, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), c.max_tokens, meta
    )
    if c.top_logprobs:
        reply.first_token_logprobs = first_token_logprobs(meta.get("logprobs"))
    return reply


def _is_messages(prompt: Any) -> bool:
    return not isinstance(prompt, str)


def call(c: Call) -> Reply:
    """Run one call and read its reply."""
    if isinstance(c.model, BaseChatModel):
        model, kwargs = _langchain_model(c)
        return _from_message(model.invoke(c.prompt, **kwargs), c)  # type: ignore[arg-type]
    kwargs = _llama_index_kwargs(c)
    if _is_messages(c.prompt):
        response = c.model.chat(list(c.prompt), **kwargs)  # type: ignore[arg-type]
        text, raw = response.message.content or "", response.raw
    else:
        completion = c.model.complete(c.prompt, **kwargs)  # type: ignore[arg-type]
        text, raw = completion.text, completion.raw
    return _from_llama_index(text, raw, c)


async def acall(c: Call) -> Reply:
    """:func:`call` with the model's async methods."""
    if isinstance(c.model, BaseChatModel):
        model, kwargs = _langchain_model(c)
        return _from_message(await model.ainvoke(c.prompt, **kwargs), c)  # type: ignore[arg-type]
    kwargs = _llama_index_kwargs(c)
    if _is_messages(c.prompt):
        response = await c.model.achat(list(c.prompt), **kwargs)  # type: ignore[arg-type]
        text, raw = response.message.content or "", response.raw
    else:
        completion = await c.model.acomplete(c.prompt, **kwargs)  # type: ignore[arg-type]
        text, raw = completion.text, completion.raw
    return _from_llama_index(text, raw, c)


def run(dialogue: Dialogue[T]) -> T:
    """Drive ``dialogue`` with synchronous calls; returns its result."""
    try:
        request = next(dialogue)
        while True:
            request = dialogue.send(request.run())
    except StopIteration as done:
        return done.value


async def arun(dialogue: Dialogue[T]) -> T:
    """Drive ``dialogue`` with the async methods; returns its result."""
    try:
        request = next(dialogue)
        while True:
            request = dialogue.send(await request.arun())
    except StopIteration as done:
        return done.value


def ask(model: AnyLLM, prompt: str | Sequence[Any], **options: Any) -> Dialogue[Reply]:
    """A one-call dialogue: ``reply = yield from ask(model, prompt, stop=[...])``."""
    reply: Reply = yield Call(model, prompt, **options)
    return reply
