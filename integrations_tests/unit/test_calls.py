"""The dialogue driver's requests: :class:`Together` runs independent requests at once, or in order."""

import asyncio
import threading

from multihop_rag.llm.calls import Effect, Together, arun, run


def _together(at_once: bool, order: list[str]) -> Together:
    both_started = threading.Barrier(2, timeout=10)
    met = asyncio.Event()

    def sync(name: str) -> str:
        order.append(name)
        if at_once:
            both_started.wait()  # one request at a time never gets past this
        return name.upper()

    async def asynchronous(name: str) -> str:
        order.append(name)
        if at_once:
            if len(order) == 2:
                met.set()
            await asyncio.wait_for(met.wait(), 10)  # the first waits for the second to start
        return name.upper()

    return Together(tuple(Effect(lambda n=n: sync(n), lambda n=n: asynchronous(n)) for n in ("a", "b")), at_once=at_once)


def _dialogue(together: Together):
    replies = yield together
    return replies


def test_together_runs_its_requests_at_once_and_answers_in_their_order():
    order: list[str] = []
    assert run(_dialogue(_together(True, order))) == ["A", "B"]
    assert sorted(order) == ["a", "b"]


async def test_awaited_together_gathers_its_requests():
    order: list[str] = []
    assert await arun(_dialogue(_together(True, order))) == ["A", "B"]


async def test_not_at_once_they_run_one_after_the_other_in_order():
    order: list[str] = []
    assert run(_dialogue(_together(False, order))) == ["A", "B"] and order == ["a", "b"]
    order.clear()
    assert await arun(_dialogue(_together(False, order))) == ["A", "B"] and order == ["a", "b"]
