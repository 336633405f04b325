"""What a model can do is answered in one place (:mod:`multihop_rag.serving.profile`), looking through the
LLM-call cache: the call kernel's JSON-schema decision, every build's concurrency and the server adapter
read the same profile."""

from __future__ import annotations

import pytest
from langchain_ollama import ChatOllama
from llama_index.core.llms import MockLLM
from llama_index.llms.ollama import Ollama

from integrations_tests.openai_stub import SlotServer
from multihop_rag import backends
from multihop_rag.errors import BackendError
from multihop_rag.llm.cache import CachedLLM
from multihop_rag.llm.calls import supports_format
from multihop_rag.serving.llamacpp_server import openai_endpoint
from multihop_rag.serving.profile import default_concurrency, profile, unwrap


def test_ollama_takes_schemas_and_its_parallel_setting_through_the_cache(monkeypatch):
    monkeypatch.setenv("OLLAMA_NUM_PARALLEL", "3")
    llm = Ollama(model="qwen2.5:7b", base_url="http://127.0.0.1:9")
    cached = CachedLLM(inner=llm, cache=None)
    assert unwrap(cached) is llm
    known = profile(cached)
    assert (known.kind, known.schema_output, known.slots, known.model_name) == ("ollama", True, 3, "qwen2.5:7b")
    assert supports_format(cached) and default_concurrency(cached) == 3
    assert profile(ChatOllama(model="m")).kind == "ollama"
    endpoint, server = openai_endpoint(cached)
    assert server is None and endpoint.api_base == "http://127.0.0.1:9/v1" and endpoint.model == "qwen2.5:7b"


def test_a_pool_reports_its_hosts_slots_and_an_unknown_model_runs_one_call_without_schemas():
    with SlotServer(slots=3, delay=0.0) as a:
        pool = backends.llama_index_llm(f"openai:stand-in@{a.url}")
        assert profile(pool).kind == "openai_pool" and default_concurrency(pool) == 3 and supports_format(pool)
    mock = MockLLM()
    assert profile(mock).kind == "other" and not supports_format(mock) and default_concurrency(mock) == 1
    with pytest.raises(BackendError, match="no OpenAI-compatible endpoint known for MockLLM"):
        openai_endpoint(mock)
