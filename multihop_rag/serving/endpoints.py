"""OpenAI-compatible model servers (vLLM, llama.cpp's server, LM Studio), one or a pool of them.

The spec ``openai:<model>@<url>[,<url>…]`` names a model and the hosts that serve it (without ``@``:
``$OPENAI_BASE_URL``, comma-separated; the key from ``$OPENAI_API_KEY``). :class:`EndpointPool` is a
LlamaIndex ``LLM`` over those hosts: each call goes to the host with the most free slots (a host's
slots: what its server reports, llama.cpp's ``total_slots``, else :data:`~multihop_rag.llm.concurrency.DEFAULT_SERVER_SLOTS`), a call that fails
to reach its host is retried on another one, and :meth:`EndpointPool.calls_per_host` says where the
calls went. Its ``pool_concurrency`` (the sum of the slots) is the build's default ``max_concurrency``,
so a build keeps every host busy and never queues more requests than they hold. This is the path for
a corpus that outgrows one machine; the vector side scales through a Chroma server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import Any, TypeVar

import httpx
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms.llm import LLM
from pydantic import Field, PrivateAttr

from multihop_rag.errors import EndpointError

__all__ = ["EndpointPool", "server_slots", "DEFAULT_SERVER_SLOTS", "api_key", "parse_openai_spec", "check_endpoint"]

log = logging.getLogger(__name__)
T = TypeVar("T")


DEFAULT_SERVER_SLOTS = 4
"""Slots assumed for a server that does not report them: Ollama's default ``OLLAMA_NUM_PARALLEL``, a
typical vLLM setting."""


def server_slots(base_url: str, timeout: float = 1.5) -> int | None:
    """Parallel slots of an OpenAI-compatible server that reports them (llama.cpp's ``/props``), else None."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(root + "/props", timeout=timeout) as response:
            slots = json.load(response).get("total_slots")
            return int(slots) if slots else None
    except (urllib.error.URLError, OSError, ValueError, TypeError):
        return None


def api_key() -> str:
    """``$OPENAI_API_KEY``, or a placeholder (local servers take any key)."""
    return os.environ.get("OPENAI_API_KEY", "none")




def parse_openai_spec(name: str) -> tuple[str, list[str]]:
    """``"qwen@http://a:8000/v1,http://b:8000/v1"`` -> ``("qwen", [urls])``; URLs from ``$OPENAI_BASE_URL`` without ``@``."""
    model, sep, hosts = name.partition("@")
    hosts = hosts if sep else os.environ.get("OPENAI_BASE_URL", "")
    urls = [u.strip().rstrip("/") for u in hosts.split(",") if u.strip()]
    if not model or not urls:
        raise EndpointError(f"openai:{name}: name the server, e.g. openai:{model or 'MODEL'}@http://127.0.0.1:8000/v1 "
                            "(several hosts: comma-separated), or set OPENAI_BASE_URL")
    return model, [u if u.endswith("/v1") else u + "/v1" for u in urls]


def check_endpoint(url: str, model: str, timeout: float = 5.0) -> None:
    """The server at ``url`` answers and serves ``model``; else :class:`EndpointError` saying what to do."""
    import httpx

    try:
        response = httpx.get(f"{url}/models", timeout=timeout,
                             headers={"Authorization": f"Bearer {api_key()}"})
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise EndpointError(f"no OpenAI-compatible server answers at {url} ({type(exc).__name__}): start it "
                            f"(e.g. 'llama-server -m MODEL.gguf --port 8000 --parallel 4' or 'vllm serve MODEL') "
                            "or fix the URL") from None
    served = [m.get("id") for m in response.json().get("data", [])]
    if served and model not in served:
        raise EndpointError(f"the server at {url} serves {', '.join(map(str, served))}, not {model}: use one of those names")


def _reaches_no_host(exc: BaseException) -> bool:
    """A failure of the host rather than of the request (worth trying on another host)."""
    import httpx
    import openai

    return isinstance(exc, (openai.APIConnectionError, openai.InternalServerError, httpx.TransportError, ConnectionError))


class EndpointPool(LLM):
    """One model served by one or more OpenAI-compatible hosts (a LlamaIndex ``LLM``)."""

    model: str = Field(description="The model's name on the servers.")
    api_bases: list[str] = Field(description="The hosts' base URLs (ending in /v1).")
    slots: list[int] = Field(default_factory=list, description="Parallel slots per host (default: as each server reports).")
    temperature: float = 0.0
    max_tokens: int = 512
    context_window: int = 8192
    seed: int = 0
    _endpoints: list[LLM] = PrivateAttr(default_factory=list)
    _free: list[int] = PrivateAttr(default_factory=list)
    _ready: threading.Condition = PrivateAttr(default_factory=threading.Condition)
    _calls: Counter = PrivateAttr(default_factory=Counter)
    _failures: Counter = PrivateAttr(default_factory=Counter)
    _opening: threading.local = PrivateAttr(default_factory=threading.local)

    def model_post_init(self, context: Any) -> None:
        from llama_index.llms.openai_like import OpenAILike

        if not self.api_bases:
            raise EndpointError("an endpoint pool needs at least one host")
        if not self.slots:
            self.slots = [server_slots(url) or DEFAULT_SERVER_SLOTS for url in self.api_bases]
        self._endpoints = [
            OpenAILike(model=self.model, api_base=url, api_key=api_key(), temperature=self.temperature, max_tokens=self.max_tokens,
                       context_window=self.context_window, is_chat_model=True, timeout=600.0, max_retries=0,
                       additional_kwargs={"seed": self.seed},
                       http_client=httpx.Client(timeout=600.0, event_hooks={"response": [self._opened]}))
            for url in self.api_bases
        ]
        self._free = list(self.slots)

    @classmethod
    def class_name(cls) -> str:
        return "EndpointPool"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.context_window, num_output=self.max_tokens, is_chat_model=True,
                           model_name=self.model)

    @property
    def pool_concurrency(self) -> int:
        """Calls the pool answers at once: the sum of its hosts' slots."""
        return sum(self.slots)

    def calls_per_host(self) -> dict[str, int]:
        """Calls answered by each host so far."""
        return {url: self._calls[url] for url in self.api_bases}

    def failures_per_host(self) -> dict[str, int]:
        return {url: self._failures[url] for url in self.api_bases}

    # ---- dispatch --------------------------------------------------------------------------------

    def _acquire(self, exclude: set[int]) -> int:
        with self._ready:
            while True:
                candidates = [i for i in range(len(self._endpoints)) if i not in exclude and self._free[i] > 0]
                if candidates:
                    host = max(candidates, key=lambda i: (self._free[i], -self._calls[self.api_bases[i]]))
                    self._free[host] -= 1
                    return host
                self._ready.wait()

    def _opened(self, response: httpx.Response) -> None:
        """Keep a response this thread's stream opened, for the stream to close (see :meth:`_stream`)."""
        if (responses := getattr(self._opening, "responses", None)) is not None:
            responses.append(response)

    def _release(self, host: int) -> None:
        with self._ready:
            self._free[host] += 1
            self._ready.notify()

    def _run(self, work: Callable[[LLM], T]) -> T:
        tried: set[int] = set()
        while True:
            host = self._acquire(tried)
            try:
                result = work(self._endpoints[host])
                with self._ready:
                    self._calls[self.api_bases[host]] += 1
                return result
            except Exception as exc:
                self._hand_on(host, exc, tried)
            finally:
                self._release(host)

    def _hand_on(self, host: int, exc: Exception, tried: set[int]) -> None:
        """After a call failed on ``host``: raise ``exc`` unless the host failed and another is left to try, else count
        the failure and leave ``host`` out of the call's next try."""
        if not _reaches_no_host(exc) or len(tried) + 1 >= len(self._endpoints):
            raise exc
        with self._ready:
            self._failures[self.api_bases[host]] += 1
        log.warning("%s failed (%s); the call goes to another host", self.api_bases[host], type(exc).__name__)
        tried.add(host)

    @staticmethod
    def _request(kwargs: dict[str, Any]) -> dict[str, Any]:
        """``format=<JSON schema>`` (what the structured-output layer gives) as OpenAI's ``response_format``."""
        schema = kwargs.pop("format", None)
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return kwargs

    # ---- the LLM interface -----------------------------------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        request = self._request(dict(kwargs))
        return self._run(lambda llm: llm.chat(messages, **request))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        request = self._request(dict(kwargs))
        return self._run(lambda llm: llm.complete(prompt, formatted=formatted, **request))

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        request = self._request(dict(kwargs))
        return self._stream(lambda llm: llm.stream_chat(messages, **request))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        request = self._request(dict(kwargs))
        return self._stream(lambda llm: llm.stream_complete(prompt, formatted=formatted, **request))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await asyncio.to_thread(self.chat, messages, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await asyncio.to_thread(self.complete, prompt, formatted, **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return _off_the_loop(self.stream_chat(messages, **kwargs))

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        return _off_the_loop(self.stream_complete(prompt, formatted=formatted, **kwargs))

    def _stream(self, open_stream: Callable[[LLM], Generator[T, None, None]]) -> Generator[T, None, None]:
        """A streamed reply from the host with the most free slots, whose slot it holds until the stream ends or is
        closed (closing it closes the connection, and the server stops generating); a host that fails before its
        first chunk hands the call to another one.

        Closing LlamaIndex's stream does not close the HTTP response under it: that waited for the garbage collector,
        the server meanwhile generating on, and a collection inside another call's connection-pool lock deadlocked.
        The response, noted by the HTTP client's hook as the first chunk is asked for, is closed here."""
        tried: set[int] = set()
        while True:
            host = self._acquire(tried)
            stream: Generator[T, None, None] | None = None
            responses: list[httpx.Response] = []
            answered = False
            try:
                self._opening.responses = responses  # the request goes out in this thread, within the first next()
                stream = open_stream(self._endpoints[host])
                for chunk in stream:
                    if not answered:
                        answered = True
                        with self._ready:
                            self._calls[self.api_bases[host]] += 1
                    yield chunk
                return
            except Exception as exc:
                if answered:  # part of the reply is out: it cannot start again elsewhere
                    raise
                self._hand_on(host, exc, tried)
            finally:
                self._opening.responses = None
                if stream is not None:
                    stream.close()
                for response in responses:
                    response.close()
                self._release(host)


async def _off_the_loop(stream: Generator[T, None, None]) -> AsyncGenerator[T, None]:
    """A blocking stream read in worker threads, one chunk at a time; closing this closes it."""
    end = object()
    try:
        while (chunk := await asyncio.to_thread(next, stream, end)) is not end:
            yield chunk  # type: ignore[misc]
    finally:
        with contextlib.suppress(ValueError):  # cancelled while a thread still reads it: it closes when collected
            await asyncio.to_thread(stream.close)
