"""Deterministic stand-ins for models, shared by the unit tests of every package."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from pydantic import Field, PrivateAttr


class HashEmbedding(BaseEmbedding):
    """Bag-of-words embedding: each word hashes to a dimension. Texts sharing words are similar."""

    dim: int = 64

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(self.dim)
        for word in text.lower().split():
            word = word.strip(".,;:!?\"'()")
            if word:
                v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = np.linalg.norm(v)
        return (v / norm if norm else v + 1.0 / np.sqrt(self.dim)).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


class HashEmbeddings(Embeddings):
    """:class:`HashEmbedding` for LangChain."""

    def __init__(self, dim: int = 64):
        self._model = HashEmbedding(dim=dim)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._model._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._model._vector(text)


class ScriptedLLM(CustomLLM):
    """A LlamaIndex LLM whose answers come from a list (in order) or a function of the prompt.

    An answer is a text, ``(text, finish_reason)`` (``"length"``: cut at the token limit), or ``(text, finish_reason,
    {token: logprob})`` — the first token's alternatives, returned in llama.cpp's (OpenAI's) shape when the call asks
    for ``top_logprobs``. Records every prompt and the keyword arguments it was called with.
    """

    script: Any = Field(default=None, exclude=True)
    _prompts: list[str] = PrivateAttr(default_factory=list)
    _kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _streamed: int = PrivateAttr(default=0)

    def __init__(self, script: Sequence[str] | Callable[[str], str], **kwargs: Any):
        super().__init__(script=list(script) if not callable(script) else script, **kwargs)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    @property
    def calls_kwargs(self) -> list[dict[str, Any]]:
        return self._kwargs

    def _next(self, prompt: str) -> str | tuple[str, str]:
        if callable(self.script):
            return self.script(prompt)
        if not self.script:
            raise AssertionError(f"ScriptedLLM ran out of answers at prompt {prompt[:80]!r}")
        return self.script.pop(0)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        self._kwargs.append(kwargs)
        answer = self._next(prompt)
        text, reason, alternatives = (*answer, {})[:3] if isinstance(answer, tuple) else (answer, "stop", {})
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        choice: dict[str, Any] = {"finish_reason": reason}
        if kwargs.get("top_logprobs") and alternatives:
            top = [{"token": t, "logprob": lp} for t, lp in alternatives.items()]
            choice["logprobs"] = {"content": [{**top[0], "top_logprobs": top}]}
        return CompletionResponse(text=text, raw={"choices": [choice], "usage": usage})

    @property
    def streamed(self) -> int:
        """Deltas that streamed replies handed out (a reader that stops early leaves the rest ungenerated)."""
        return self._streamed

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        """The answer line by line, as a server streams it."""
        text = self.complete(prompt, **kwargs).text

        def gen() -> CompletionResponseGen:
            so_far = ""
            for delta in text.splitlines(keepends=True):
                so_far += delta
                self._streamed += 1
                yield CompletionResponse(text=so_far, delta=delta)

        return gen()


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model answering with ``respond(prompt)`` (a text, ``(text, finish_reason)``, or
    ``(text, finish_reason, {token: logprob})`` — the first token's alternatives, returned in OpenAI's shape when
    the call asks for logprobs); records prompts, call kwargs and whether each call came through the sync or the
    async path."""

    respond: Any
    prompts: list[str] = []
    calls_kwargs: list[dict[str, Any]] = []
    modes: list[str] = []

    def __init__(self, respond: Callable[[str], str | tuple[str, str]], **kwargs: Any):
        super().__init__(respond=respond, prompts=[], calls_kwargs=[], modes=[], **kwargs)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _answer(self, messages, stop, kwargs, mode: str) -> ChatResult:
        prompt = "\n".join(m.text for m in messages)
        self.prompts.append(prompt)
        self.calls_kwargs.append({"stop": stop, **kwargs})
        self.modes.append(mode)
        answer = self.respond(prompt)
        text, reason, alternatives = (*answer, {})[:3] if isinstance(answer, tuple) else (answer, "stop", {})
        meta: dict[str, Any] = {"finish_reason": reason}
        if kwargs.get("logprobs") and alternatives:
            top = [{"token": t, "logprob": lp} for t, lp in alternatives.items()]
            meta["logprobs"] = {"content": [{**top[0], "top_logprobs": top}]}
        message = AIMessage(content=text, response_metadata=meta)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        return self._answer(messages, stop, kwargs, "sync")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        return self._answer(messages, stop, kwargs, "async")


class KeywordRetriever(BaseRetriever):
    """A LangChain retriever ranking documents by words shared with the query (ties: corpus order);
    records the queries and whether each came through the sync or the async path."""

    docs: list[Document]
    k: int = 5
    queries: list[str] = []
    modes: list[str] = []

    async def _aget_relevant_documents(self, query: str, *, run_manager=None) -> list[Document]:
        self.modes.append("async")
        return self._rank(query)

    def _get_relevant_documents(self, query: str, *, run_manager=None) -> list[Document]:
        self.modes.append("sync")
        return self._rank(query)

    def _rank(self, query: str) -> list[Document]:
        self.queries.append(query)
        words = {w.strip(".,?!\"'").lower() for w in query.split()}

        def overlap(doc: Document) -> int:
            return len(words & {w.strip(".,?!\"'").lower() for w in doc.page_content.split()})

        return sorted(self.docs, key=overlap, reverse=True)[: self.k]
