"""What a model can do, as data, in one place: read by the call kernel (does it constrain decoding to a
JSON schema?), by every build (how many calls to keep in flight?) and by the server adapter (which
OpenAI-compatible endpoint serves the same weights?).

Serving engines batch the requests they hold: Ollama answers ``OLLAMA_NUM_PARALLEL`` at once (4 by
default), vLLM and llama.cpp's server as many as their slots. A build that sends one call at a time
leaves them idle; one that sends more than the slots makes requests queue and time out. The slots are
what the server reports where it can be read (llama.cpp's ``total_slots``), else 4 for Ollama and
OpenAI-compatible servers, and 1 for the in-process model (one model, one lock: more threads only wait).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from langchain_ollama import ChatOllama
from llama_index.llms.ollama import Ollama

from multihop_rag.serving.endpoints import DEFAULT_SERVER_SLOTS, EndpointPool, server_slots
from multihop_rag.serving.llamacpp import LlamaCppChatModel, LlamaCppLLM

__all__ = ["ModelProfile", "profile", "unwrap", "default_concurrency"]

Kind = Literal["llamacpp", "ollama", "openai_pool", "openai", "other"]


@dataclass(frozen=True)
class ModelProfile:
    """What one model object (a LlamaIndex LLM or a LangChain chat model, wrappers looked through) can do."""

    kind: Kind
    schema_output: bool
    """Whether decoding is constrained to a JSON schema given as ``format=`` (llama.cpp, Ollama, our pools)."""
    slots: int | None
    """Calls it serves at once when known without asking the server; None: ask ``base_url``."""
    base_url: str | None = None
    """The server's URL (Ollama's host, an OpenAI-compatible ``/v1``), None in process."""
    model_name: str | None = None
    model_path: str | None = None
    """The GGUF file of the in-process llama.cpp model."""
    context_window: int | None = None


def unwrap(model: Any) -> Any:
    """The model under any wrapper that holds it as ``inner`` (the LLM-call cache)."""
    while getattr(model, "inner", None) is not None:
        model = model.inner
    return model


def profile(model: Any) -> ModelProfile:
    """The :class:`ModelProfile` of ``model``."""
    model = unwrap(model)
    if isinstance(model, (LlamaCppLLM, LlamaCppChatModel)):
        return ModelProfile(
            "llamacpp", True, 1, model_path=getattr(model, "model_path", None), context_window=getattr(model, "context_window", None)
        )
    if isinstance(model, (Ollama, ChatOllama)):
        host = getattr(model, "base_url", None)
        slots = int(os.environ.get("OLLAMA_NUM_PARALLEL") or DEFAULT_SERVER_SLOTS)
        return ModelProfile("ollama", True, slots, base_url=str(host) if host else None, model_name=str(model.model))
    if isinstance(model, EndpointPool):
        return ModelProfile("openai_pool", True, int(model.pool_concurrency), model_name=model.model)
    base = getattr(model, "api_base", None) or getattr(model, "openai_api_base", None)
    if base:
        return ModelProfile("openai", False, None, base_url=str(base), model_name=getattr(model, "model", None))
    return ModelProfile("other", False, 1)


def default_concurrency(model: Any) -> int:
    """Calls to keep in flight for ``model``: its profile's slots, else what its server reports, else 4."""
    known = profile(model)
    if known.slots is not None:
        return known.slots
    return (server_slots(known.base_url) if known.base_url else None) or DEFAULT_SERVER_SLOTS
