"""The bounded map every build stage sends its LLM calls through (issue 24)."""

import threading
import time

import pytest

from multihop_rag.llm.concurrency import CallLimit, map_bounded, side_by_side


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
        if item == 0:
            raise ValueError("model down")
        time.sleep(0.1)  # long beside the failure's, so a loaded machine (CI's, a benchmark beside) still sees it first
        return item

    with pytest.raises(ValueError, match="model down"):
        map_bounded(call, list(range(50)), max_concurrency=2, show_progress=False)
    assert len(started) < 10


class InFlight:
    """Counts the calls in flight, by stage, and the most seen at once."""

    def __init__(self) -> None:
        self.lock, self.now, self.most = threading.Lock(), {"a": 0, "b": 0}, 0
        self.order: list[str] = []

    def call(self, stage: str, seconds: float = 0.01) -> None:
        with self.lock:
            self.now[stage] += 1
            self.most = max(self.most, sum(self.now.values()))
            self.order.append(stage)
        time.sleep(seconds)
        with self.lock:
            self.now[stage] -= 1


def test_stages_side_by_side_share_the_slots_and_fill_each_others_gaps():
    """Issue 24: SiReRAG's two trees run beside each other within one limit of calls in flight."""
    seen, b_running, b_came_in_time = InFlight(), threading.Event(), []

    def a_call(i: int) -> int:
        seen.call("a")
        if i == 11:  # a's last call: a waits on nothing else, so its free slots are b's (no race with b's start)
            b_came_in_time.append(b_running.wait(timeout=30))
        return i

    def b_call(i: int) -> int:
        b_running.set()
        seen.call("b")
        return i

    def stage(call):
        return lambda limit: map_bounded(call, list(range(12)), max_concurrency=limit, show_progress=False)

    assert side_by_side(stage(a_call), stage(b_call), max_concurrency=3) == (list(range(12)), list(range(12)))
    assert seen.most == 3 and b_came_in_time == [True]


def test_a_freed_slot_goes_to_the_call_that_waited_longest():
    """A stage whose calls free and retake slots back to back must not starve the stage beside it (the
    failure CI saw: 200 calls of one stage before the other's first)."""
    limit, order = CallLimit(1), []

    def take(name: str) -> None:
        with limit.slot():
            order.append(name)

    with limit.slot():
        waiter = threading.Thread(target=take, args=("waited",))
        waiter.start()
        while limit.waiting == 0:
            time.sleep(0.001)
    take("asked later")
    waiter.join()
    assert order == ["waited", "asked later"]


def test_with_one_call_at_a_time_the_stages_run_one_after_the_other():
    seen = InFlight()
    side_by_side(lambda limit: map_bounded(lambda i: seen.call("a"), [1, 2], max_concurrency=limit, show_progress=False),
                 lambda limit: map_bounded(lambda i: seen.call("b"), [1, 2], max_concurrency=limit, show_progress=False),
                 max_concurrency=1)
    assert seen.order == ["a", "a", "b", "b"] and seen.most == 1


def test_a_stage_that_fails_stops_the_other_and_its_error_is_raised():
    seen = InFlight()

    def failing(limit):
        def call(i):
            seen.call("a")
            raise ValueError("model down")
        return map_bounded(call, [1, 2], max_concurrency=limit, show_progress=False)

    with pytest.raises(ValueError, match="model down"):
        side_by_side(failing, lambda limit: map_bounded(lambda i: seen.call("b"), list(range(200)), max_concurrency=limit,
                                                        show_progress=False), max_concurrency=2)
    assert seen.order.count("b") < 20


def test_the_second_stage_failing_between_its_calls_stops_the_first():
    """An embedder down while the second stage embeds (no call of its own in flight) stops the first's calls."""
    seen = InFlight()

    def failing(limit):
        time.sleep(0.05)
        raise ConnectionError("the embedding server went away")

    with pytest.raises(ConnectionError, match="went away"):
        side_by_side(lambda limit: map_bounded(lambda i: seen.call("a"), list(range(200)), max_concurrency=limit,
                                               show_progress=False), failing, max_concurrency=2)
    assert seen.order.count("a") < 40


@pytest.mark.parametrize("slots", [1, 3])
def test_each_result_is_handed_on_as_it_comes_in_on_the_calling_thread(slots):
    """``on_result`` lets a stage work on a finished call's result (K²RAG embeds a summarized document's chunks)
    while the other calls are in flight."""
    caller, seen = threading.get_ident(), []

    def handed(i: int, result: int) -> None:
        seen.append((i, result, threading.get_ident() == caller))

    assert map_bounded(lambda x: x * 2, list(range(10)), max_concurrency=slots, show_progress=False, on_result=handed) == [
        2 * i for i in range(10)]
    assert sorted(seen) == [(i, 2 * i, True) for i in range(10)]


def test_side_by_side_the_first_stages_calls_go_before_the_seconds():
    """Issue 42: side by side, the two stages took turns at the slots, so SiReRAG's longer chain (propositions, then
    the relatedness tree) ended later and its CPU work (embedding its leaves) then ran with no call in flight. Its
    calls now go first while any wait; the second stage's take the slots it leaves free."""
    seen = InFlight()

    def first(limit):
        return map_bounded(lambda i: seen.call("a"), list(range(16)), max_concurrency=limit, show_progress=False)

    def second(limit):
        def call(i):
            seen.call("b")
            # This stage's thread starts first; its first two calls hold their slots until two of the first stage's
            # calls wait (or all it has left), so a loaded machine's late first-stage threads cannot race them.
            deadline = time.monotonic() + 30
            while i < 2 and limit.waiting < min(2, 16 - seen.order.count("a")) and time.monotonic() < deadline:
                time.sleep(0.001)
        return map_bounded(call, list(range(8)), max_concurrency=limit, show_progress=False)

    side_by_side(first, second, max_concurrency=2)
    last_a = len(seen.order) - 1 - seen.order[::-1].index("a")
    assert seen.order[:last_a].count("b") <= 2  # only what it took before the first stage's calls queued
    assert seen.order.count("b") == 8 and seen.most == 2
