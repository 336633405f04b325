"""Model specs -> LlamaIndex and LangChain objects, on Ollama or in-process llama.cpp.

A spec is a string:

- ``ollama:<model>``: a running Ollama server (``OLLAMA_HOST``, default 127.0.0.1:11434);
- ``llamacpp:<alias or path.gguf>``: a GGUF model run in-process (aliases: :mod:`multihop_rag.serving.bundled`);
- ``openai:<model>@<url>[,<url>…]``: any OpenAI-compatible server (vLLM, llama.cpp's server, LM Studio),
  one host or a pool of them (:mod:`multihop_rag.serving.endpoints`);
- for embeddings ``st:<alias or path>`` (sentence-transformers) or ``ollama:<model>``.

With no spec, ``$MULTIHOP_RAG_LLM`` / ``$MULTIHOP_RAG_EMBED`` decide; failing those, Ollama is used
when it answers and has the default model, else the embedded model. A missing server or model
raises :class:`BackendError` whose message says how to fix it.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_ollama import ChatOllama
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.generic_utils import achat_to_completion_decorator, chat_to_completion_decorator
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
)
from llama_index.core.llms.llm import LLM
from llama_index.llms.ollama import Ollama
from ollama import AsyncClient
from pydantic import Field, PrivateAttr

from multihop_rag.errors import BackendError, BundledModelMissing, ContextOverflowError, EndpointError
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.cache import CachedLLM, LLMCache, SQLiteChatCache, file_digest
from multihop_rag.serving import bundled
from multihop_rag.serving.endpoints import EndpointPool, api_key, check_endpoint, parse_openai_spec
from multihop_rag.serving.llamacpp import DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, LlamaCppChatModel, LlamaCppLLM

__all__ = [
    "Spec",
    "DEFAULT_OLLAMA_LLM",
    "DEFAULT_OLLAMA_EMBED",
    "parse_spec",
    "resolve_llm_spec",
    "resolve_embed_spec",
    "ollama_host",
    "ollama_models",
    "OllamaLLM",
    "llama_index_llm",
    "chat_model",
    "llama_index_embedding",
    "langchain_embeddings",
]

DEFAULT_OLLAMA_LLM = "qwen2.5:7b-instruct"
"""What the auto-detection looks for on an Ollama server (``ollama pull qwen2.5:7b-instruct``)."""
DEFAULT_OLLAMA_EMBED = "nomic-embed-text"
DEFAULT_TEMPERATURE = 0.0



@dataclass(frozen=True)
class Spec:
    """A parsed model spec."""

    kind: str
    """``ollama``, ``llamacpp``, ``openai`` or ``st``."""
    name: str
    """Model name (Ollama), alias or path."""

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


_LLM_KINDS = ("ollama", "llamacpp", "openai")
_EMBED_KINDS = ("ollama", "st")


def parse_spec(spec: str, *, embedding: bool = False) -> Spec:
    """``"ollama:qwen2.5:7b-instruct"`` -> ``Spec("ollama", "qwen2.5:7b-instruct")``."""
    kinds = _EMBED_KINDS if embedding else _LLM_KINDS
    kind, sep, name = spec.partition(":")
    if not sep or kind not in kinds or not name:
        what = "embedding" if embedding else "LLM"
        raise BackendError(
            f"bad {what} spec {spec!r}: use " + " or ".join(f"'{k}:<model>'" for k in kinds)
        )
    return Spec(kind, name)


def ollama_host() -> str:
    """Base URL of the Ollama server, from ``OLLAMA_HOST`` as Ollama itself reads it."""
    host = os.environ.get("OLLAMA_HOST", "").strip() or "127.0.0.1:11434"
    if "://" not in host:
        host = "http://" + host
    scheme, _, rest = host.partition("://")
    if ":" not in rest.split("/")[0]:
        rest = rest.rstrip("/") + ":11434"
    return f"{scheme}://{rest}".rstrip("/").replace("://0.0.0.0", "://127.0.0.1")


def _ollama_tags(host: str, timeout: float) -> dict[str, str] | None:
    """Model name -> digest on an Ollama server, or None when it does not answer."""
    try:
        with urllib.request.urlopen(host + "/api/tags", timeout=timeout) as response:
            return {m["name"]: str(m.get("digest") or "") for m in json.load(response).get("models", [])}
    except (urllib.error.URLError, OSError, ValueError):
        return None


def ollama_models(host: str | None = None, timeout: float = 1.5) -> list[str] | None:
    """Names of the models an Ollama server has, or None when it does not answer."""
    tags = _ollama_tags(host or ollama_host(), timeout)
    return None if tags is None else list(tags)


def _has_model(models: list[str], name: str) -> bool:
    return name in models or (":" not in name and f"{name}:latest" in models)


def _check_ollama(name: str) -> tuple[str, str]:
    """The server's URL and the model's digest; a missing server or model says how to fix it."""
    host = ollama_host()
    tags = _ollama_tags(host, 1.5)
    if tags is None:
        raise BackendError(
            f"no Ollama server answers at {host}: start it with 'ollama serve', set OLLAMA_HOST to where it runs, "
            "or use the embedded model (--llm llamacpp:default)"
        )
    if not _has_model(list(tags), name):
        raise BackendError(f"the Ollama server at {host} has no model {name!r}: run 'ollama pull {name}'")
    return host, tags.get(name) or tags.get(f"{name}:latest", "")


class OllamaLLM(Ollama):
    """LlamaIndex's ``Ollama`` with what a build needs from it.

    - Per-call ``max_tokens`` and ``stop`` reach the server (as ``num_predict`` and ``stop``; the
      base class sends only its own options).
    - A prompt that does not fit ``context_window`` (Ollama's ``num_ctx``) raises
      :class:`~multihop_rag.errors.ContextOverflowError` instead of being cut silently by the server:
      before sending (estimated with tiktoken) and after (the server counted a full window).
    - ``digest``: the model's digest on the server, part of LLM-call cache keys.
    - One async client per event loop: an HTTP connection belongs to the loop that opened it, and the
      base class's single client, reused from another loop (LlamaIndex runs ``asyncio.run`` per
      property-graph insert and per graph query), failed with "Event loop is closed".
    """

    digest: str = Field(default="", description="The model's digest on the Ollama server (cache keys).")
    _loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = PrivateAttr(
        default_factory=weakref.WeakKeyDictionary
    )

    @property
    def async_client(self) -> AsyncClient:
        """The async client of the running event loop (made on first use in that loop)."""
        loop = asyncio.get_running_loop()
        client = self._loop_clients.get(loop)
        if client is None:
            client = AsyncClient(host=self.base_url, timeout=self.request_timeout, headers=self.headers or {})
            self._loop_clients[loop] = client
        return client

    @classmethod
    def class_name(cls) -> str:
        return "OllamaLLM"

    def _per_call(self, kwargs: dict[str, Any]) -> OllamaLLM:
        options: dict[str, Any] = {}
        if (max_tokens := kwargs.pop("max_tokens", None)) is not None:
            options["num_predict"] = int(max_tokens)
        if stop := kwargs.pop("stop", None):
            options["stop"] = list(stop)
        return self.model_copy(update={"additional_kwargs": {**self.additional_kwargs, **options}}) if options else self

    def _check_fits(self, messages: Sequence[ChatMessage]) -> None:
        window = self.context_window
        reserve = int(self.additional_kwargs.get("num_predict") or 0)
        estimate = sum(count_tokens(m.content or "") + 4 for m in messages)
        if window > 0 and estimate + reserve > window:
            raise ContextOverflowError(
                f"a prompt of about {estimate} tokens plus {reserve} to generate does not fit the {window}-token "
                f"context of {self.model} on Ollama (num_ctx); it would be cut silently: raise the context size "
                "or shorten the input"
            )

    def _check_not_cut(self, raw: Any) -> None:
        counted = int((raw or {}).get("prompt_eval_count") or 0)
        if self.context_window > 0 and counted >= self.context_window:
            raise ContextOverflowError(
                f"Ollama cut the prompt to its {self.context_window}-token context (num_ctx) for {self.model}: "
                "raise the context size or shorten the input"
            )

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        llm = self._per_call(kwargs)
        llm._check_fits(messages)
        response = Ollama.chat(llm, messages, **kwargs)
        llm._check_not_cut(response.raw)
        return response

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        llm = self._per_call(kwargs)
        llm._check_fits(messages)
        response = await Ollama.achat(llm, messages, **kwargs)
        llm._check_not_cut(response.raw)
        return response

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        llm = self._per_call(kwargs)
        llm._check_fits(messages)
        return Ollama.stream_chat(llm, messages, **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        llm = self._per_call(kwargs)
        llm._check_fits(messages)
        return await Ollama.astream_chat(llm, messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return chat_to_completion_decorator(self.chat)(prompt, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await achat_to_completion_decorator(self.achat)(prompt, **kwargs)


class OllamaChatModel(ChatOllama):
    """LangChain's ``ChatOllama`` whose async calls run its sync client on a worker thread.

    ``ChatOllama`` makes one async client with the model; its connections belong to the first event loop
    that used them, so a second ``asyncio.run`` (a script that answers question by question, an app that
    runs a loop per request) failed with "Event loop is closed". The sync client belongs to no loop.
    """

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, run_manager.get_sync() if run_manager else None, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks = iter(self._stream(messages, stop, None, **kwargs))
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            if run_manager:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


def _env_or_auto(env: str, ollama_default: str, embedded: Spec) -> Spec:
    if value := os.environ.get(env):
        return parse_spec(value, embedding=embedded.kind == "st")
    models = ollama_models(timeout=0.5)
    if models and _has_model(models, ollama_default):
        return Spec("ollama", ollama_default)
    return embedded


def resolve_llm_spec(spec: str | None = None) -> Spec:
    """The LLM to use: ``spec``, else ``$MULTIHOP_RAG_LLM``, else Ollama if ready, else embedded."""
    if spec:
        return parse_spec(spec)
    return _env_or_auto("MULTIHOP_RAG_LLM", DEFAULT_OLLAMA_LLM, Spec("llamacpp", "default"))


def resolve_embed_spec(spec: str | None = None) -> Spec:
    """The embedding model: ``spec``, else ``$MULTIHOP_RAG_EMBED``, else Ollama if ready, else embedded."""
    if spec:
        return parse_spec(spec, embedding=True)
    return _env_or_auto("MULTIHOP_RAG_EMBED", DEFAULT_OLLAMA_EMBED, Spec("st", "default"))


def _gguf(name: str) -> str:
    if name.endswith(".gguf") or os.sep in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise BackendError(f"no GGUF file at {path}")
        with path.open("rb") as file:
            if file.read(4) != b"GGUF":  # checked before a store is written with a model that cannot load
                raise BackendError(f"{path} is not a GGUF model file (it does not start with the GGUF magic): "
                                   "give a llama.cpp model file or a bundled alias (llamacpp:default)")
        return str(path)
    try:
        return str(bundled.gguf_path(name))
    except BundledModelMissing as exc:
        raise BackendError(str(exc)) from None


def _st_path(name: str) -> str:
    if name == "default":
        name = bundled.DEFAULT_EMBED_ALIAS
    if name in bundled.BUNDLED_EMBEDDINGS:
        try:
            return str(bundled.embedding_path(name))
        except BundledModelMissing as exc:
            raise BackendError(str(exc)) from None
    path = Path(name).expanduser()
    if not path.is_dir():
        raise BackendError(
            f"no sentence-transformers model at {path}: give a local model directory or one of "
            f"{', '.join(bundled.BUNDLED_EMBEDDINGS)} (nothing is downloaded at run time)"
        )
    return str(path)


def _openai(name: str) -> tuple[str, list[str]]:
    """The model and the hosts of an ``openai:`` spec, every host checked."""
    try:
        model, urls = parse_openai_spec(name)
        for url in urls:
            check_endpoint(url, model)
    except EndpointError as exc:
        raise BackendError(str(exc)) from None
    return model, urls


def llama_index_llm(
    spec: str | None = None,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    context_window: int = DEFAULT_CONTEXT,
    cache: str | Path | LLMCache | None = None,
) -> LLM:
    """A LlamaIndex ``LLM`` for ``spec``; with ``cache`` (a SQLite path) calls are cached and counted.
    Thinking is off (thinking models answer directly)."""
    parsed = resolve_llm_spec(spec)
    llm: LLM
    if parsed.kind == "ollama":
        host, digest = _check_ollama(parsed.name)
        llm = OllamaLLM(
            model=parsed.name,
            base_url=host,
            digest=digest,
            temperature=temperature,
            context_window=context_window,
            request_timeout=600.0,
            thinking=False,
            additional_kwargs={"num_predict": max_tokens, "seed": 0},
        )
    elif parsed.kind == "openai":
        model, urls = _openai(parsed.name)
        llm = EndpointPool(model=model, api_bases=urls, temperature=temperature, max_tokens=max_tokens,
                           context_window=context_window)
    else:
        llm = LlamaCppLLM(
            model_path=_gguf(parsed.name), temperature=temperature, max_tokens=max_tokens, context_window=context_window
        )
    if cache is None:
        return llm
    return CachedLLM(inner=llm, cache=cache if isinstance(cache, LLMCache) else LLMCache(cache))


def chat_model(
    spec: str | None = None,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    context_window: int = DEFAULT_CONTEXT,
    cache: str | Path | LLMCache | None = None,
) -> BaseChatModel:
    """A LangChain chat model for ``spec``; with ``cache`` (a SQLite path or an ``LLMCache``) calls are
    cached, keyed with the model's digest. Thinking is off (thinking models answer directly)."""
    parsed = resolve_llm_spec(spec)
    if parsed.kind == "ollama":
        host, digest = _check_ollama(parsed.name)
        return OllamaChatModel(
            model=parsed.name,
            base_url=host,
            temperature=temperature,
            num_predict=max_tokens,
            num_ctx=context_window,
            seed=0,
            reasoning=False,
            cache=SQLiteChatCache(cache, identity=f"ollama:{digest}") if cache is not None else None,
        )
    if parsed.kind == "openai":
        from langchain_openai import ChatOpenAI

        model, urls = _openai(parsed.name)
        # Query-time calls go to the first host; builds (LlamaIndex) spread over the pool.
        return ChatOpenAI(model=model, base_url=urls[0], api_key=api_key(),
                          temperature=temperature, max_completion_tokens=max_tokens, seed=0, timeout=600.0,
                          cache=SQLiteChatCache(cache, identity=f"openai:{model}") if cache is not None else None)
    path = _gguf(parsed.name)
    return LlamaCppChatModel(
        model_path=path,
        temperature=temperature,
        max_tokens=max_tokens,
        n_ctx=context_window,
        cache=SQLiteChatCache(cache, identity=f"gguf:{file_digest(path)}") if cache is not None else None,
    )


def llama_index_embedding(spec: str | None = None) -> BaseEmbedding:
    """A LlamaIndex embedding model for ``spec`` (sentence-transformers or Ollama)."""
    parsed = resolve_embed_spec(spec)
    if parsed.kind == "ollama":
        from llama_index.embeddings.ollama import OllamaEmbedding

        return OllamaEmbedding(model_name=parsed.name, base_url=_check_ollama(parsed.name)[0])
    from multihop_rag.serving.embedding import LengthSortedEmbedding

    return LengthSortedEmbedding(model_name=_st_path(parsed.name), device="cpu", show_progress_bar=False)


def langchain_embeddings(spec: str | None = None) -> Embeddings:
    """A LangChain ``Embeddings`` for ``spec`` (sentence-transformers or Ollama)."""
    parsed = resolve_embed_spec(spec)
    if parsed.kind == "ollama":
        from langchain_ollama import OllamaEmbeddings

        return OllamaEmbeddings(model=parsed.name, base_url=_check_ollama(parsed.name)[0])
    from langchain_huggingface import HuggingFaceEmbeddings

    from multihop_rag.serving.embedding import ENCODE_BATCH_SIZE

    # LangChain gives all of a call's texts to one encode, which sorts them by length itself
    return HuggingFaceEmbeddings(model_name=_st_path(parsed.name), model_kwargs={"device": "cpu"},
                                 encode_kwargs={"batch_size": ENCODE_BATCH_SIZE})
