"""Run async code from synchronous code, also when an event loop is already running.

Library code must not call ``asyncio.run`` blindly: inside Jupyter (or any async app) a loop is
running and it raises. :func:`run_sync` runs a coroutine on a fresh loop in a worker thread in
that case, and with ``asyncio.run`` otherwise; :func:`call_sync` does the same for a synchronous
function of another library that calls ``asyncio.run`` itself (LlamaIndex's ``PropertyGraphIndex``).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync", "call_sync"]

T = TypeVar("T")


def call_sync(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``, on a worker thread (same context variables) if this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="multihop-rag-call-sync") as pool:
        return pool.submit(context.run, function, *args, **kwargs).result()


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)``, or the same on a worker thread if this thread runs a loop."""
    return call_sync(asyncio.run, coroutine)
