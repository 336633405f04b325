"""Run a coroutine from synchronous code, also when an event loop is already running.

Library code must not call ``asyncio.run`` blindly: inside Jupyter (or any async app) a loop is
running and it raises. :func:`run_sync` runs the coroutine on a fresh loop in a worker thread
in that case, and with ``asyncio.run`` otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)``, or the same on a worker thread if this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="multihop-rag-run-sync") as pool:
        return pool.submit(asyncio.run, coroutine).result()
