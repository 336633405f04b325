"""A bounded map that keeps a build's LLM calls in flight (how many:
:func:`multihop_rag.serving.profile.default_concurrency`). Every build stage of every method keeps that one
number (``max_concurrency``) of calls in flight: through :func:`map_bounded`, or, for stages that
run side by side (:func:`side_by_side`), through one shared :class:`CallLimit` of that size; GARLIC,
whose levels overlap, keeps a pool of that many workers itself.

Threads, not ``asyncio.run``: library code must work inside a running event loop (notebooks).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tqdm.auto import tqdm

__all__ = ["map_bounded", "CallLimit", "side_by_side"]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")
B = TypeVar("B")


@dataclass
class _Slots:
    """The state every view of one :class:`CallLimit` shares."""

    free: int
    cancelled: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)
    queue: list[tuple[int, object]] = field(default_factory=list)
    """(priority, ticket) of each waiting call, in the order they came."""


class CallLimit:
    """At most ``size`` calls in flight across every :func:`map_bounded` given this limit or a view of it
    (:meth:`ahead`: stages running side by side). A freed slot goes to a waiting call of the highest priority,
    among those to the one that has waited longest, so a stage that frees and retakes slots back to back cannot
    starve one of its rank beside it. After :meth:`cancel`, a call that has not started raises ``CancelledError``."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.priority = 0
        self._slots = _Slots(free=self.size)

    def ahead(self) -> CallLimit:
        """The same slots, for calls that go before this limit's own while any of them wait."""
        view = copy.copy(self)
        view.priority = self.priority + 1
        return view

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        with self._slots.changed:
            return len(self._slots.queue)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the calls in flight for the duration of the block."""
        slots, ticket = self._slots, object()
        with slots.changed:
            slots.queue.append((self.priority, ticket))

            def my_turn() -> bool:
                return slots.free > 0 and max(slots.queue, key=lambda waiting: waiting[0])[1] is ticket

            try:
                slots.changed.wait_for(lambda: slots.cancelled or my_turn())
            finally:
                slots.queue.remove((self.priority, ticket))
                slots.changed.notify_all()  # the next in line may take a slot still free
            if slots.cancelled:
                raise CancelledError("the build stopped; this call was not started")
            slots.free -= 1
        try:
            yield
        finally:
            with slots.changed:
                slots.free += 1
                slots.changed.notify_all()

    def cancel(self) -> None:
        with self._slots.changed:
            self._slots.cancelled = True
            self._slots.changed.notify_all()


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

    stopped = threading.Event()

    def bounded(item: T) -> R:
        with limit.slot():
            if stopped.is_set():
                raise CancelledError("the stage stopped; this call was not started")
            return function(item)

    def done(i: int, result: R) -> None:
        results[i] = result
        if on_result is not None:
            on_result(i, result)

    if limit.size <= 1 or len(items) <= 1:
        for i, item in enumerate(tqdm(items, desc=desc, disable=not show_progress)):
            done(i, bounded(item))
        return results
    # A stage that goes first keeps a call waiting while its others are in flight, so a freed slot stays its own.
    workers = limit.size * (2 if limit.priority else 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="multihop-rag-llm") as pool, tqdm(
        total=len(items), desc=desc, disable=not show_progress
    ) as bar:
        futures = {pool.submit(bounded, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                done(futures[future], future.result())
                bar.update()
        except BaseException:
            stopped.set()
            for future in futures:
                future.cancel()  # calls not started yet do not start
            raise
    return results


def side_by_side(first: Callable[[CallLimit], A], second: Callable[[CallLimit], B], *, max_concurrency: int) -> tuple[A, B]:
    """``(first(limit), second(limit))``: two independent stages whose calls share one :class:`CallLimit`
    of ``max_concurrency``. With more than one call in flight ``second`` runs on its own thread beside
    ``first`` and fills the slots ``first`` leaves free (a level waiting for the one below, CPU work
    between calls): ``first``'s calls go first while any wait, so give it the longer chain of calls and
    CPU work, which the build's end waits for. With one call in flight they run one after the other
    (beside, the CPU work would only slow the in-process model). If either fails (or Ctrl-C), neither
    starts another call, and the error is raised once both have stopped."""
    limit = CallLimit(max_concurrency)
    if limit.size <= 1:
        return first(limit), second(limit)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="multihop-rag-beside") as side:
        beside = side.submit(second, limit)
        beside.add_done_callback(lambda done: _cancel_on_failure(done, limit))
        try:
            result = first(limit.ahead())
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
