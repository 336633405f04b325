"""The OpenAI-compatible endpoint helpers: request rewriting, endpoint resolution, run_sync."""

from __future__ import annotations

import asyncio
import json

import pytest
from llama_index.llms.ollama import Ollama

from integrations_tests.fakes import ScriptedLLM
from multihop_rag.errors import BackendError
from multihop_rag.llm.aio import run_sync
from multihop_rag.llm.cache import LLMCache, cached_llm
from multihop_rag.serving.llamacpp_server import (
    LlamaCppServer,
    OpenAIEndpoint,
    openai_endpoint,
    rewrite_response_format,
)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_json_schema_response_format_becomes_llama_cpp_json_object():
    body = {"model": "local", "messages": [], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}}
    rewritten = json.loads(rewrite_response_format(json.dumps(body).encode()))
    assert rewritten["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert rewritten["model"] == "local" and rewritten["messages"] == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "local", "response_format": {"type": "json_object"}}',
        b'{"model": "local"}',
        b"not json at all",
        b"[1, 2]",
    ],
)
def test_other_requests_pass_unchanged(body):
    assert rewrite_response_format(body) == body


def test_ollama_llm_maps_to_its_v1_endpoint(tmp_path):
    llm = Ollama(model="qwen2.5:7b-instruct", base_url="http://gpu-box:11434/")
    endpoint, server = openai_endpoint(llm)
    assert endpoint == OpenAIEndpoint(api_base="http://gpu-box:11434/v1", model="qwen2.5:7b-instruct")
    assert server is None
    # The LLM cache wrapper is looked through.
    assert openai_endpoint(cached_llm(llm, LLMCache(tmp_path / "c.sqlite")))[0] == endpoint


def test_an_llm_without_an_endpoint_is_refused_with_the_fix():
    with pytest.raises(BackendError, match="OpenAIEndpoint"):
        openai_endpoint(ScriptedLLM(["x"]))


def test_server_for_a_missing_model_file_says_so(tmp_path):
    with pytest.raises(BackendError, match="no GGUF model"):
        LlamaCppServer(tmp_path / "missing.gguf").start()


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_run_sync_without_a_running_loop():
    assert run_sync(_answer()) == 42


async def test_run_sync_inside_a_running_loop_like_a_notebook():
    assert run_sync(_answer()) == 42


def _asgi_round_trip(request: dict, reply: dict) -> tuple[dict, dict]:
    """Send ``request`` through the adapter to an app answering ``reply``; what the app saw, what came back."""
    from multihop_rag.serving.llamacpp_server import _JsonSchemaAdapter

    seen: dict = {}

    async def app(scope, receive, send):
        seen.update(json.loads((await receive())["body"]))
        body = json.dumps(reply).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    sent: list = []

    async def receive():
        return {"type": "http.request", "body": json.dumps(request).encode(), "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/v1/chat/completions", "headers": []}
    asyncio.run(_JsonSchemaAdapter(app)(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    length = dict(sent[0]["headers"])[b"content-length"]
    assert int(length) == len(body)
    return seen, json.loads(body)


def test_a_reply_cut_at_the_limit_loses_its_unfinished_record():
    """Issue 21: GraphRAG kept the record a cut reply was writing (an entity whose description
    stops mid-word); the server adapter drops it."""
    request = {"model": "local", "messages": [], "x_record_delimiter": "\n##\n"}
    content = '("entity"<|>QUERN VIADUCT<|>GEO<|>A viaduct.)\n##\n("entity"<|>ODILE BRASK<|>PERSON<|>An engin'
    seen, out = _asgi_round_trip(request, {"choices": [{"message": {"content": content}, "finish_reason": "length"}]})
    assert "x_record_delimiter" not in seen
    assert out["choices"][0]["message"]["content"] == '("entity"<|>QUERN VIADUCT<|>GEO<|>A viaduct.)'
    _, whole = _asgi_round_trip(request, {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]})
    assert whole["choices"][0]["message"]["content"] == content
