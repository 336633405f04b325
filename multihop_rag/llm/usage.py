"""What LLM calls cost: counts, tokens, time in flight, and build stages timed with them.

- :class:`Usage`: calls made, calls answered from the cache, tokens, and ``busy_seconds`` — the
  wall time during which at least one call was in flight (the union of the calls' intervals, not
  their sum: four calls waiting on one model at once count once).
- :class:`CallClock`: records each call's interval, thread-safe, and measures that union.
- :class:`Stages`: per build stage, wall time, busy time, calls, tokens and peak RSS; a stage is a
  ``with stages.stage("name"):`` block, and its figures are the :class:`Usage` difference over it.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Usage", "CallClock", "Stages", "peak_rss_mb"]


@dataclass
class Usage:
    """What an LLM spent: calls that reached the model, calls answered from the cache, tokens,
    the summed seconds of the calls, and ``busy_seconds`` (the union of their intervals)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    busy_seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def __add__(self, other: Usage) -> Usage:
        a, b = asdict(self), asdict(other)
        return Usage(**{k: a[k] + b[k] for k in a})

    def __sub__(self, other: Usage) -> Usage:
        """What was spent between two snapshots (``after - before``)."""
        a, b = asdict(self), asdict(other)
        return Usage(**{k: a[k] - b[k] for k in a})


class CallClock:
    """Intervals of LLM calls; :meth:`busy` is the time covered by at least one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._intervals: list[tuple[float, float]] = []
        self._open: dict[int, float] = {}
        self._next = 0

    def start(self) -> int:
        with self._lock:
            self._next += 1
            self._open[self._next] = time.perf_counter()
            return self._next

    def stop(self, token: int) -> float:
        """Close the interval ``token`` opened; returns its length."""
        end = time.perf_counter()
        with self._lock:
            begin = self._open.pop(token)
            self._intervals.append((begin, end))
        return end - begin

    def in_flight(self) -> int:
        """Calls started and not yet stopped."""
        with self._lock:
            return len(self._open)

    def intervals(self) -> list[tuple[float, float]]:
        """The closed intervals so far, as ``(begin, end)`` pairs of ``time.perf_counter()``."""
        with self._lock:
            return list(self._intervals)

    def busy(self, *others: CallClock) -> float:
        """Seconds covered by at least one closed interval of this clock or of ``others`` (the union)."""
        intervals = sorted(i for clock in (self, *others) for i in clock.intervals())
        total, current_start, current_end = 0.0, None, None
        for begin, end in intervals:
            if current_end is None or begin > current_end:
                if current_end is not None and current_start is not None:
                    total += current_end - current_start
                current_start, current_end = begin, end
            else:
                current_end = max(current_end, end)
        if current_end is not None and current_start is not None:
            total += current_end - current_start
        return total


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@dataclass
class Stages:
    """Figures per build stage: ``with stages.stage("propositions"): ...``; ``usage`` reads the
    LLM usage so far (e.g. ``CachedLLM.usage``)."""

    usage: Callable[[], Usage] = field(default=Usage)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        before, started = self.usage(), time.perf_counter()
        try:
            yield
        finally:
            spent = self.usage() - before
            wall = time.perf_counter() - started
            self.figures[name] = {
                "seconds": round(wall, 2),
                "busy_seconds": round(spent.busy_seconds, 2),
                "busy_share": round(spent.busy_seconds / wall, 3) if wall > 0 else 0.0,
                "calls": spent.calls,
                "cache_hits": spent.cache_hits,
                "prompt_tokens": spent.prompt_tokens,
                "completion_tokens": spent.completion_tokens,
                "calls_per_second": round(spent.calls / wall, 3) if wall > 0 else 0.0,
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
