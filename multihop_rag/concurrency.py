"""How many LLM calls a build keeps in flight, and a bounded map that keeps them there.

Serving engines batch the requests they hold: Ollama answers ``OLLAMA_NUM_PARALLEL`` at once (4 by
default), vLLM and llama.cpp's server as many as their slots. A build that sends one call at a time
leaves them idle; one that sends more than the slots makes requests queue and time out.
:func:`default_concurrency` picks the server's slot count where it can be read (llama.cpp's server
reports ``total_slots``), else 4 for Ollama and OpenAI-compatible servers, and 1 for the in-process
model (one model, one lock: more threads only wait). Every build stage of every method maps its
calls through :func:`map_bounded` with that one number (``max_concurrency``).

Threads, not ``asyncio.run``: library code must work inside a running event loop (notebooks).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

from tqdm.auto import tqdm

__all__ = ["default_concurrency", "server_slots", "map_bounded", "DEFAULT_SERVER_SLOTS"]

T = TypeVar("T")
R = TypeVar("R")

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


def default_concurrency(model: Any) -> int:
    """Calls to keep in flight for ``model`` (a LlamaIndex LLM or LangChain chat model, cached or not)."""
    from multihop_rag.llamacpp import LlamaCppChatModel, LlamaCppLLM

    inner = getattr(model, "inner", None)
    if inner is not None:
        return default_concurrency(inner)
    if hasattr(model, "pool_concurrency"):
        return int(model.pool_concurrency)
    if isinstance(model, (LlamaCppLLM, LlamaCppChatModel)):
        return 1
    kind = type(model).__name__.lower()
    if "ollama" in kind:
        return int(os.environ.get("OLLAMA_NUM_PARALLEL") or DEFAULT_SERVER_SLOTS)
    base = getattr(model, "api_base", None) or getattr(model, "openai_api_base", None)
    if base:
        return server_slots(str(base)) or DEFAULT_SERVER_SLOTS
    return 1


def map_bounded(
    function: Callable[[T], R],
    items: Sequence[T],
    *,
    max_concurrency: int,
    desc: str = "",
    show_progress: bool = True,
) -> list[R]:
    """``[function(item) for item in items]`` with at most ``max_concurrency`` running at once; the
    progress bar moves as each finishes. On an exception (a failed call, Ctrl-C) the calls not
    started yet are dropped, and it is raised once the running ones are done."""
    if max_concurrency <= 1 or len(items) <= 1:
        return [function(item) for item in tqdm(items, desc=desc, disable=not show_progress)]
    results: list[Any] = [None] * len(items)
    with ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="multihop-rag-llm") as pool, tqdm(
        total=len(items), desc=desc, disable=not show_progress
    ) as bar:
        futures = {pool.submit(function, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update()
        except BaseException:
            for future in futures:
                future.cancel()  # calls not started yet do not start
            raise
    return results
