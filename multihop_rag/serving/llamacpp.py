"""In-process llama.cpp models for LlamaIndex and LangChain: one thin adapter per framework.

Why not the frameworks' own integrations: LlamaIndex's ``LlamaCPP`` formats prompts itself and
ignores the chat template stored in the GGUF, and LangChain's ``ChatLlamaCpp`` lives in
langchain-community, which is being sunset. Both adapters here call
``llama_cpp.Llama.create_chat_completion``, which applies the GGUF's own template. Like Ollama's
integrations, both accept ``format=`` (a JSON schema dict, or ``"json"``) on each call, so
:mod:`multihop_rag.llm.structured` treats them alike; greedy calls are held to it by
:mod:`multihop_rag.serving.llamacpp_grammar` (the grammar asked about the chosen token first, as llama.cpp's
server does), others by llama-cpp-python's ``response_format``.

One ``Llama`` is loaded per (path, context size) and shared by every adapter in the process;
a lock serialises calls (a ``Llama`` is not thread-safe).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
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
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from pydantic import Field

from multihop_rag.errors import ContextOverflowError
from multihop_rag.serving.llamacpp_grammar import GreedyGrammar

__all__ = ["LlamaCppLLM", "LlamaCppChatModel", "load_llama", "count_model_tokens"]

_MODELS: dict[tuple[str, int, int], Any] = {}
_LOCKS: dict[tuple[str, int, int], threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()

DEFAULT_CONTEXT = 8192
DEFAULT_MAX_TOKENS = 512
PROMPT_CACHE_MB = 1024


def _threads() -> int:
    return int(os.environ.get("MULTIHOP_RAG_THREADS") or os.cpu_count() or 2)


def _keep_prompt_states(llama: Any) -> None:
    """Keep recent prompts' states (llama-cpp-python's ``LlamaRAMCache``, ``MULTIHOP_RAG_PROMPT_CACHE_MB``, default
    1,024; 0: off), so a call reopening an earlier prompt — a dialogue's next turn, a few-shot prompt's examples —
    after other calls came between reads only its new tokens, as a server's prompt cache lets it. Without
    ``logits_all`` the model keeps no logits per position (its sampler reads them from llama.cpp), so its
    ``scores`` shrink to one row: a saved state is then its KV cells (~29 MB per 1,000 tokens of the 1.5B), not a
    batch × vocabulary copy (311 MB, a second per call)."""
    from llama_cpp import LlamaRAMCache

    megabytes = int(os.environ.get("MULTIHOP_RAG_PROMPT_CACHE_MB", PROMPT_CACHE_MB))
    if megabytes > 0:
        llama.scores = np.zeros((1, llama.n_vocab()), dtype=np.single)
        llama.set_cache(LlamaRAMCache(capacity_bytes=megabytes << 20))


def load_llama(model_path: str | Path, n_ctx: int = DEFAULT_CONTEXT, prompt_lookup: int = 0) -> tuple[Any, threading.Lock]:
    """The process-wide ``llama_cpp.Llama`` for this file, context size and ``prompt_lookup`` (tokens drafted per
    step by prompt-lookup speculative decoding, llama-cpp-python's ``LlamaPromptLookupDecoding``; 0: none), and its
    lock. A drafting model keeps every position's logits (context × vocabulary floats: 5 GB for Qwen2.5 at 8k); any
    other keeps recent prompts' states (:func:`_keep_prompt_states`)."""
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    key = (str(Path(model_path).resolve()), n_ctx, prompt_lookup)
    with _REGISTRY_LOCK:
        if key not in _MODELS:
            if not Path(key[0]).is_file():
                raise FileNotFoundError(f"no GGUF model at {key[0]}")
            draft = LlamaPromptLookupDecoding(num_pred_tokens=prompt_lookup) if prompt_lookup else None
            _MODELS[key] = Llama(  # a drafting model must say logits_all itself: llama-cpp-python sizes its logits by it
                model_path=key[0], n_ctx=n_ctx, n_threads=_threads(), n_batch=512, seed=0, verbose=False,
                draft_model=draft, logits_all=draft is not None,
            )
            if draft is None:
                _keep_prompt_states(_MODELS[key])
            _LOCKS[key] = threading.Lock()
        return _MODELS[key], _LOCKS[key]


def _response_format(format: str | dict[str, Any]) -> dict[str, Any]:
    """Translate Ollama's ``format=`` convention into llama.cpp's ``response_format``."""
    if format == "json":
        return {"type": "json_object"}
    return {"type": "json_object", "schema": format}


def count_model_tokens(model_path: str | Path, text: str, n_ctx: int = DEFAULT_CONTEXT, prompt_lookup: int = 0) -> int:
    """Tokens of ``text`` in the model's own vocabulary (the loaded model of these settings counts them)."""
    llama, lock = load_llama(model_path, n_ctx, prompt_lookup)
    with lock:
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


@contextmanager
def _constraint(llama: Any, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The arguments that hold a call to its ``format=`` (popped from ``params``): for greedy decoding
    a :class:`~multihop_rag.serving.llamacpp_grammar.GreedyGrammar` (the same reply, at unconstrained speed),
    else llama-cpp-python's ``response_format``."""
    from llama_cpp import LogitsProcessorList

    format = params.pop("format", None)
    if not format:
        yield {}
    elif params.get("temperature", 0.0) == 0.0:
        grammar = GreedyGrammar(llama, format)
        try:
            yield {"logits_processor": LogitsProcessorList([grammar])}
        finally:
            grammar.close()
    else:
        yield {"response_format": _response_format(format)}


class FirstTokenProbe:
    """A logits processor keeping the first generated token's ``k`` most likely alternatives, in OpenAI's
    ``logprobs`` shape. llama-cpp-python returns logprobs only from a model that keeps every position's
    logits (``logits_all``: context × vocabulary floats, 5 GB for Qwen2.5 at 8k); this reads the one row
    sampled from. Put it last, after any grammar, so it sees what the sampler sees."""

    def __init__(self, llama: Any, k: int):
        self.llama, self.k = llama, k
        self.top: list[dict[str, Any]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if not self.top:
            peak = float(scores.max())
            logp = scores - (peak + np.log(np.exp(scores - peak).sum()))
            ids = np.argpartition(-logp, self.k)[: self.k]
            ids = ids[np.argsort(-logp[ids])]
            self.top = [{"token": self.llama.detokenize([int(i)]).decode("utf-8", errors="replace"),
                         "logprob": float(logp[i])} for i in ids]
        return scores

    def logprobs(self) -> dict[str, Any] | None:
        return {"content": [{**self.top[0], "top_logprobs": self.top}]} if self.top else None


def _chat(model_path: str, n_ctx: int, prompt_lookup: int, messages: list[dict[str, str]], **params: Any) -> dict[str, Any]:
    from llama_cpp import LogitsProcessorList

    llama, lock = load_llama(model_path, n_ctx, prompt_lookup)
    top_logprobs = params.pop("top_logprobs", None)
    with lock, _constraint(llama, params) as constraint:
        probe = FirstTokenProbe(llama, top_logprobs) if top_logprobs else None
        if probe is not None:
            constraint["logits_processor"] = LogitsProcessorList([*constraint.get("logits_processor", []), probe])
        try:
            raw = llama.create_chat_completion(messages=messages, **constraint, **params)
        except ValueError as exc:
            if "context window" in str(exc):
                raise ContextOverflowError(f"{Path(model_path).name}: {exc}; shorten the input or raise n_ctx") from None
            raise
        if probe is not None:
            raw["choices"][0]["logprobs"] = probe.logprobs()
        return raw


def _stream_chat(
    model_path: str, n_ctx: int, prompt_lookup: int, messages: list[dict[str, str]], usage: dict[str, int] | None = None,
    **params: Any,
) -> Generator[str, None, None]:
    """Yield text deltas; the model stays locked until the stream is consumed or closed.

    llama.cpp reports no usage when streaming: ``usage`` (if given) is filled at the end from the
    number of streamed tokens and the context length.
    """
    llama, lock = load_llama(model_path, n_ctx, prompt_lookup)
    params.pop("top_logprobs", None)  # streamed replies carry no logprobs here
    with lock, _constraint(llama, params) as constraint:
        generated = 0
        for chunk in llama.create_chat_completion(messages=messages, stream=True, **constraint, **params):
            if delta := chunk["choices"][0]["delta"].get("content"):
                generated += 1
                yield delta
        if usage is not None:
            usage.update(prompt_tokens=max(0, llama.n_tokens - generated), completion_tokens=generated)


class LlamaCppLLM(CustomLLM):
    """A LlamaIndex ``LLM`` running a GGUF model in-process with llama.cpp.

    Example: ``LlamaCppLLM(model_path=bundled.gguf_path("qwen2.5-coder-1.5b"))``.
    """

    model_path: str = Field(description="Path to the GGUF file.")
    context_window: int = Field(default=DEFAULT_CONTEXT, description="Context size in tokens (n_ctx).")
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, description="Most tokens generated per call.")
    temperature: float = Field(default=0.0, description="Sampling temperature; 0 is greedy and repeatable.")
    seed: int = Field(default=0, description="Sampling seed.")
    prompt_lookup: int = Field(default=0, description="Tokens drafted from the prompt per step (prompt-lookup "
                               "speculative decoding: the same reply, faster where it copies the input); 0: off.")

    @classmethod
    def class_name(cls) -> str:
        return "LlamaCppLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            is_chat_model=True,
            model_name=Path(self.model_path).name,
        )

    def _params(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        params = {"max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed}
        params.update({k: v for k, v in kwargs.items() if k in {"max_tokens", "temperature", "stop", "format", "seed", "top_logprobs"}})
        return params

    @staticmethod
    def _messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        return [{"role": m.role.value, "content": m.content or ""} for m in messages]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's own vocabulary."""
        return count_model_tokens(self.model_path, text, self.context_window, self.prompt_lookup)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        raw = _chat(self.model_path, self.context_window, self.prompt_lookup, self._messages(messages), **self._params(kwargs))
        text = raw["choices"][0]["message"]["content"] or ""
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), raw=raw)

    def _chat_stream(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> ChatResponseGen:
        """The reply as it is generated; closing it frees the model at once."""
        deltas = _stream_chat(self.model_path, self.context_window, self.prompt_lookup, self._messages(messages),
                              **self._params(kwargs))
        text = ""
        try:
            for delta in deltas:
                text += delta
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)
        finally:
            deltas.close()

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self._chat_stream(messages, kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        """The stream of :meth:`stream_chat` from the event loop's thread, as LlamaIndex's own does, but a reader
        that closes it frees the model at once: LlamaIndex's wrapper leaves the inner stream (and the model locked)
        until the loop finalises it, and a next call on the loop's thread would wait for that forever."""
        chat = self._chat_stream(messages, kwargs)

        async def gen() -> ChatResponseAsyncGen:
            try:
                for response in chat:
                    yield response
            finally:
                chat.close()

        return gen()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        response = self.chat([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)
        return CompletionResponse(text=response.message.content or "", raw=response.raw)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        def gen() -> CompletionResponseGen:
            chat = self.stream_chat([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)
            try:
                for r in chat:
                    yield CompletionResponse(text=r.message.content or "", delta=r.delta)
            finally:
                chat.close()

        return gen()

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        """:meth:`astream_chat` for a prompt."""
        chat = await self.astream_chat([ChatMessage(role=MessageRole.USER, content=prompt)], **kwargs)

        async def gen() -> CompletionResponseAsyncGen:
            try:
                async for r in chat:
                    yield CompletionResponse(text=r.message.content or "", delta=r.delta)
            finally:
                await chat.aclose()

        return gen()


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


class LlamaCppChatModel(BaseChatModel):
    """A LangChain chat model running a GGUF model in-process with llama.cpp.

    Example: ``LlamaCppChatModel(model_path=bundled.gguf_path("qwen2.5-coder-1.5b"))``.
    ``invoke(..., format=schema)`` constrains the answer to a JSON schema, as ``ChatOllama`` does.
    """

    model_path: str
    """Path to the GGUF file."""
    n_ctx: int = DEFAULT_CONTEXT
    """Context size in tokens."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Most tokens generated per call."""
    temperature: float = 0.0
    """Sampling temperature; 0 is greedy and repeatable."""
    seed: int = 0
    """Sampling seed."""
    prompt_lookup: int = 0
    """Tokens drafted from the prompt per step (prompt-lookup speculative decoding); 0: off."""
    format: str | dict[str, Any] | None = None
    """Default output format: None, ``"json"`` or a JSON schema (like ``ChatOllama.format``)."""

    @property
    def _llm_type(self) -> str:
        return "llamacpp-in-process"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": Path(self.model_path).name,
            "n_ctx": self.n_ctx,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            **({"prompt_lookup": self.prompt_lookup} if self.prompt_lookup else {}),  # off: the keys of older caches
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params.update(  # type: ignore[call-arg]  # LangSmithParams is a TypedDict of these keys
            ls_provider="llamacpp",
            ls_model_name=kwargs.get("model") or Path(self.model_path).name,
            ls_temperature=kwargs.get("temperature", self.temperature),
            ls_max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )
        return params

    def _params(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "temperature": kwargs.get("temperature", self.temperature),
            "seed": self.seed,
            "format": kwargs.get("format", self.format),
        }
        if stop:
            params["stop"] = stop
        if kwargs.get("top_logprobs"):
            params["top_logprobs"] = kwargs["top_logprobs"]
        return params

    @staticmethod
    def _messages(messages: list[BaseMessage]) -> list[dict[str, str]]:
        return [{"role": _ROLES.get(m.type, "user"), "content": m.text} for m in messages]

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's own vocabulary (LangChain's default would fetch GPT-2's)."""
        return count_model_tokens(self.model_path, text, self.n_ctx, self.prompt_lookup)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raw = _chat(self.model_path, self.n_ctx, self.prompt_lookup, self._messages(messages), **self._params(stop, kwargs))
        usage = raw.get("usage") or {}
        message = AIMessage(
            content=raw["choices"][0]["message"]["content"] or "",
            usage_metadata=UsageMetadata(
                input_tokens=usage.get("prompt_tokens", 0),
                output_tokens=usage.get("completion_tokens", 0),
                total_tokens=usage.get("total_tokens", 0),
            ),
            response_metadata={"model_name": Path(self.model_path).name, "finish_reason": raw["choices"][0].get("finish_reason"),
                               **({"logprobs": raw["choices"][0]["logprobs"]} if raw["choices"][0].get("logprobs") else {})},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        usage: dict[str, int] = {}
        for delta in _stream_chat(
            self.model_path, self.n_ctx, self.prompt_lookup, self._messages(messages), usage, **self._params(stop, kwargs)
        ):
            generation = ChatGenerationChunk(message=AIMessageChunk(content=delta))
            if run_manager:
                run_manager.on_llm_new_token(delta, chunk=generation)
            yield generation
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=UsageMetadata(
                    input_tokens=usage["prompt_tokens"],
                    output_tokens=usage["completion_tokens"],
                    total_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
                ),
                response_metadata={"model_name": Path(self.model_path).name},
            )
        )
