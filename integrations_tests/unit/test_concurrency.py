"""The bounded map every build stage sends its LLM calls through (issue 24)."""

import threading
import time

import pytest

from multihop_rag.concurrency import map_bounded


def test_calls_stay_within_the_bound_and_results_keep_their_order():
    lock, seen = threading.Lock(), {"now": 0, "most": 0}

    def call(item: int) -> int:
        with lock:
            seen["now"] += 1
            seen["most"] = max(seen["most"], seen["now"])
        time.sleep(0.01)
        with lock:
            seen["now"] -= 1
        return item * 2

    assert map_bounded(call, list(range(20)), max_concurrency=3, show_progress=False) == [2 * i for i in range(20)]
    assert seen["most"] == 3


def test_a_failing_call_drops_the_calls_not_started():
    """A model that went down (or Ctrl-C) ends the stage after the calls in flight, not after all of them."""
    started = []

    def call(item: int) -> int:
        started.append(item)
        time.sleep(0.01)
        if item == 0:
            raise ValueError("model down")
        return item

    with pytest.raises(ValueError, match="model down"):
        map_bounded(call, list(range(50)), max_concurrency=2, show_progress=False)
    assert len(started) < 10
