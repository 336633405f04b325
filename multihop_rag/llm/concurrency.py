"""A bounded map that keeps a build's LLM calls in flight (how many:
:func:`multihop_rag.serving.profile.default_concurrency`). Every build stage of every method keeps that one
number (``max_concurrency``) of calls in flight: through :func:`map_bounded`, or, for stages that
run side by side (:func:`side_by_side`), through one shared :class:`CallLimit` of that size; GARLIC,
whose levels overlap, keeps a pool of that many workers itself.

Threads, not ``asyncio.run``: library code must work inside a running event loop (notebooks).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm.auto import tqdm

__all__ = ["map_bounded", "CallLimit", "side_by_side"]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")
B = TypeVar("B")

class CallLimit:
    """At most ``size`` calls in flight across every :func:`map_bounded` given this limit (stages running
    side by side). A freed slot goes to the call that has waited longest, so a stage that frees and
    retakes slots back to back cannot starve the one beside it. After :meth:`cancel`, a call that has
    not started raises ``CancelledError``."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._free = self.size
        self._cancelled = False
        self._changed = threading.Condition()
        self._queue: deque[object] = deque()

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        with self._changed:
            return len(self._queue)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the calls in flight for the duration of the block."""
        with self._changed:
            ticket = object()
            self._queue.append(ticket)
            try:
                self._changed.wait_for(lambda: self._cancelled or (self._free > 0 and self._queue[0] is ticket))
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()  # the next in line may take a slot still free
            if self._cancelled:
                raise CancelledError("the build stopped; this call was not started")
            self._free -= 1
        try:
            yield
        finally:
            with self._changed:
                self._free += 1
                self._changed.notify_all()

    def cancel(self) -> None:
        with self._changed:
            self._cancelled = True
            self._changed.notify_all()


def map_bounded(
    function: Callable[[T], R],
    items: Sequence[T],
    *,
    max_concurrency: int | CallLimit,
    desc: str = "",
    show_progress: bool = True,
    on_result: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[function(item) for item in items]`` with at most ``max_concurrency`` running at once (a number,
    or a :class:`CallLimit` shared with maps running beside this one); the progress bar moves as each
    finishes. ``on_result(i, result)`` runs on the calling thread as each result comes in, so CPU work on
    it overlaps the calls still in flight. On an exception (a failed call, Ctrl-C) the calls not started
    yet are dropped, and it is raised once the running ones are done."""
    limit = max_concurrency if isinstance(max_concurrency, CallLimit) else CallLimit(max_concurrency)
    results: list[Any] = [None] * len(items)

    def bounded(item: T) -> R:
        with limit.slot():
            return function(item)

    def done(i: int, result: R) -> None:
        results[i] = result
        if on_result is not None:
            on_result(i, result)

    if limit.size <= 1 or len(items) <= 1:
        for i, item in enumerate(tqdm(items, desc=desc, disable=not show_progress)):
            done(i, bounded(item))
        return results
    with ThreadPoolExecutor(max_workers=limit.size, thread_name_prefix="multihop-rag-llm") as pool, tqdm(
        total=len(items), desc=desc, disable=not show_progress
    ) as bar:
        futures = {pool.submit(bounded, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                done(futures[future], future.result())
                bar.update()
        except BaseException:
            for future in futures:
                future.cancel()  # calls not started yet do not start
            raise
    return results


def side_by_side(first: Callable[[CallLimit], A], second: Callable[[CallLimit], B], *, max_concurrency: int) -> tuple[A, B]:
    """``(first(limit), second(limit))``: two independent stages whose calls share one :class:`CallLimit`
    of ``max_concurrency``. With more than one call in flight ``second`` runs on its own thread beside
    ``first``, so each fills the slots the other leaves free (a level waiting for the one below, CPU
    work between calls); with one, they run one after the other (beside, the CPU work would only
    slow the in-process model). If either fails (or Ctrl-C), neither starts another call, and the
    error is raised once both have stopped."""
    limit = CallLimit(max_concurrency)
    if limit.size <= 1:
        return first(limit), second(limit)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="multihop-rag-beside") as side:
        beside = side.submit(second, limit)
        beside.add_done_callback(lambda done: _cancel_on_failure(done, limit))
        try:
            result = first(limit)
        except CancelledError:  # stopped by the failure of ``second``: that is the error to raise
            failure = beside.exception()
            if failure is not None and not isinstance(failure, CancelledError):
                raise failure from None
            raise
        except BaseException:
            limit.cancel()
            raise
        return result, beside.result()


def _cancel_on_failure(done: Future[Any], limit: CallLimit) -> None:
    if done.exception() is not None:
        limit.cancel()
