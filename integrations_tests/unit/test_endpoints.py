"""The openai: spec and the endpoint pool against stand-in servers on loopback (k slots, a fixed
delay): calls spread by free slots, never more in flight than a host holds, a failing host's call
retried elsewhere, calls counted per host, JSON schemas sent as response_format."""

from __future__ import annotations

import gc
import time

import pytest
from pydantic import BaseModel

from integrations_tests.openai_stub import SlotServer
from multihop_rag import backends
from multihop_rag.errors import BackendError
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.concurrency import map_bounded
from multihop_rag.llm.structured import StructuredStats, generate_json
from multihop_rag.serving.endpoints import EndpointPool
from multihop_rag.serving.profile import default_concurrency


def test_a_pool_keeps_every_slot_of_every_host_busy_and_no_more():
    with SlotServer(slots=2, delay=0.5) as a, SlotServer(slots=2, delay=0.5) as b:
        llm = backends.llama_index_llm(f"openai:stand-in@{a.url},{b.url}")
        assert isinstance(llm, EndpointPool) and llm.slots == [2, 2] and default_concurrency(llm) == 4
        replies = map_bounded(lambda i: llm.complete(f"Paragraph {i} tells of the harbour of Pellan and its mill.").text,
                              list(range(16)), max_concurrency=default_concurrency(llm), show_progress=False)
    assert len(replies) == 16 and all(replies)
    # every slot of both hosts was filled, none overfilled (the time this saves is measured in bench_build)
    assert a.requests + b.requests == 16 and a.max_in_flight == 2 and b.max_in_flight == 2
    assert llm.calls_per_host() == {a.url: a.requests, b.url: b.requests} and min(a.requests, b.requests) >= 4


def test_a_call_that_fails_on_one_host_goes_to_another():
    with SlotServer(slots=1, delay=0.0) as a, SlotServer(slots=1, delay=0.0) as b:
        llm = backends.llama_index_llm(f"openai:stand-in@{a.url},{b.url}")
        a.down = True
        for _ in range(4):
            assert llm.complete("The mill of Pellan grinds oats every autumn for the town.").text
        assert b.requests == 4 and llm.calls_per_host()[a.url] == 0 and llm.failures_per_host()[a.url] >= 1
        b.down = True
        with pytest.raises(Exception, match="503|host down|Internal"):
            llm.complete("Nobody answers now.")


def test_json_schemas_are_sent_as_response_format():
    class Facts(BaseModel):
        class Fact(BaseModel):
            fact: str
            entities: list[str]

        facts: list[Fact]

    with SlotServer(slots=1, delay=0.0) as server:
        llm = backends.llama_index_llm(f"openai:stand-in@{server.url}")
        stats = StructuredStats()
        value = generate_json(llm, "Paragraph: The Kesh Bridge crosses the Orrin. It was built in 1788.\nOutput:", Facts,
                              stats=stats)
    assert value is not None and [f.fact for f in value.facts][0] == "The Kesh Bridge crosses the Orrin."
    assert stats.first_try == 1


def test_a_server_that_is_down_or_lacks_the_model_is_one_line_saying_what_to_do(monkeypatch):
    with SlotServer() as server:
        with pytest.raises(BackendError, match="serves stand-in, not other"):
            backends.llama_index_llm(f"openai:other@{server.url}")
        url = server.url
    with pytest.raises(BackendError, match="no OpenAI-compatible server answers"):
        backends.llama_index_llm(f"openai:stand-in@{url}")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BackendError, match="name the server"):
        backends.llama_index_llm("openai:stand-in")


def test_the_chat_model_of_an_openai_spec_answers(monkeypatch):
    with SlotServer(slots=1, delay=0.0) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        chat = backends.chat_model("openai:stand-in")
        assert chat.invoke("The harbour of Pellan is busy in the summer months.").content


KG_PROMPT = ("Some text is provided below. Given the text, extract up to 3 knowledge triplets.\n"
             "Text: Tomas Halvard built the Kesh Bridge for Velmora and Orrin Mills near Pellan Harbour.\nTriplets:\n")


def test_a_streamed_reply_holds_its_slot_until_closed_and_a_failing_host_hands_it_on():
    from concurrent.futures import ThreadPoolExecutor

    with SlotServer(slots=1, delay=0.0) as one:
        llm = backends.llama_index_llm(f"openai:stand-in@{one.url}")
        whole = llm.complete(KG_PROMPT).text
        chunks = list(llm.stream_complete(KG_PROMPT))
        assert len(chunks) == count_tokens(whole) and chunks[-1].text == whole  # streamed a token at a time, in full
        stream = llm.stream_complete(KG_PROMPT)
        next(stream)
        stream.close()  # closed after one line: the host's one slot is free again
        with ThreadPoolExecutor(max_workers=1) as side:
            assert side.submit(llm.complete, KG_PROMPT).result(timeout=10).text == whole
    with SlotServer(slots=2, delay=0.0) as a, SlotServer(slots=1, delay=0.0) as b:
        llm = backends.llama_index_llm(f"openai:stand-in@{a.url},{b.url}")
        a.down = True  # the host with the most free slots is asked first, and fails before its first chunk
        assert "".join(c.delta or "" for c in llm.stream_complete(KG_PROMPT)) == whole
        assert llm.failures_per_host() == {a.url: 1, b.url: 0} and llm.calls_per_host() == {a.url: 0, b.url: 1}


async def test_a_line_limited_call_through_a_pool_reads_only_its_lines():
    from multihop_rag.llm.cache import CachedLLM

    with SlotServer(slots=1, delay=0.0) as server:
        pool = backends.llama_index_llm(f"openai:stand-in@{server.url}")
        whole = pool.complete(KG_PROMPT).text
        limited = CachedLLM(inner=pool, cache=None).with_max_lines(1)
        assert whole.count("\n") >= 1 and (await limited.acomplete(KG_PROMPT)).text == whole.splitlines()[0]
        assert limited.complete(KG_PROMPT).text == whole.splitlines()[0]
        first = whole.splitlines()[0]
        assert limited.usage.completion_tokens == 2 * count_tokens(first + "\n")  # the tokens of one line, twice


def test_a_line_limited_stream_is_closed_as_soon_as_its_lines_are_read():
    """Closing LlamaIndex's stream left the HTTP response open until the garbage collector found it: the server went
    on generating, and a collection run inside another call's connection-pool lock deadlocked a K²RAG build."""
    from multihop_rag.llm.cache import CachedLLM

    with SlotServer(slots=1, delay=0.0, token_delay=0.1) as server:
        pool = backends.llama_index_llm(f"openai:stand-in@{server.url}")
        limited = CachedLLM(inner=pool, cache=None).with_max_lines(1)
        gc.disable()  # nothing may depend on a collection
        try:
            first = limited.complete(KG_PROMPT).text
            waited = time.perf_counter()
            while server.streams_cut == 0 and time.perf_counter() - waited < 1.5:
                time.sleep(0.05)
        finally:
            gc.enable()
        rest = count_tokens(pool.complete(KG_PROMPT).text) - count_tokens(first)
        assert rest * server.token_delay > 2.0  # the server had seconds of reply left to send
        assert server.streams_cut == 1
