"""The Ollama backends against a scripted stand-in server: per-call limits reach the server, a reply
cut at the limit is known as one, thinking is off and a thinking block that still arrives is removed,
and a prompt the server would cut silently is refused."""

import json

import pytest
from pydantic import BaseModel, Field

from integrations_tests.ollama_stub import ScriptedOllama, StubReply
from multihop_rag.backends import chat_model, llama_index_llm
from multihop_rag.errors import ContextOverflowError
from multihop_rag.llm.calls import Call, call
from multihop_rag.llm.structured import StructuredStats, generate_json, generate_label

MODEL = "qwen3:8b"


class Fact(BaseModel):
    fact: str
    entities: list[str] = Field(default_factory=list, max_length=10)


class Facts(BaseModel):
    facts: list[Fact] = Field(default_factory=list, max_length=30)


FACTS = json.dumps({"facts": [{"fact": "The Quern Viaduct spans the Lisk.", "entities": ["Quern Viaduct"]}]})


@pytest.fixture
def server(monkeypatch):
    replies: list = []

    def respond(body):
        return replies.pop(0) if replies else "ok"

    with ScriptedOllama(respond, [MODEL]) as stub:
        monkeypatch.setenv("OLLAMA_HOST", stub.url)
        stub.replies = replies
        yield stub


def _options(stub, i=-1):
    return stub.requests[i][1].get("options") or {}


@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_per_call_token_cap_and_stop_reach_the_server(server, framework):
    """Issue 21: LlamaIndex's Ollama class ignored a per-call max_tokens (GARLIC's summary reserve
    was capped at 512 on Ollama)."""
    model = llama_index_llm(f"ollama:{MODEL}", max_tokens=512) if framework == "llama_index" else chat_model(f"ollama:{MODEL}", max_tokens=512)
    call(Call(model, "Summarize.", max_tokens=2048, stop=["\nQuestion:"]))
    options = _options(server)
    assert options["num_predict"] == 2048 and options["stop"] == ["\nQuestion:"]
    call(Call(model, "Again."))
    assert _options(server)["num_predict"] == 512  # the model's own setting is untouched


@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_a_reply_stopped_at_the_limit_is_truncated(server, framework):
    model = llama_index_llm(f"ollama:{MODEL}") if framework == "llama_index" else chat_model(f"ollama:{MODEL}")
    server.replies.append(StubReply("The Quern Viaduct was designed by Odi", done_reason="length", eval_count=8))
    reply = call(Call(model, "Who?", max_tokens=8))
    assert reply.truncated and reply.text.endswith("Odi")


@pytest.mark.parametrize("framework", ["llama_index", "langchain"])
def test_thinking_is_off_and_a_block_that_arrives_is_removed(server, framework):
    """Issue 21: thinking models (qwen3, deepseek-r1) put a reasoning block in the reply; structured
    calls must parse the answer, not the reasoning."""
    model = llama_index_llm(f"ollama:{MODEL}") if framework == "llama_index" else chat_model(f"ollama:{MODEL}")
    server.replies += ["<think>\nThe paragraph names a viaduct. I should list it.\n</think>\n" + FACTS,
                       StubReply("No", thinking="Hmm, is it enough? Probably not.")]
    stats = StructuredStats()
    value = generate_json(model, "Extract facts.", Facts, stats=stats)
    assert value is not None and value.facts[0].entities == ["Quern Viaduct"]
    assert stats.thinking == 1 and stats.first_try == 1
    assert server.requests[-1][1].get("think") is False
    assert generate_label(model, "Enough?", stats=stats) == "No"


def test_a_prompt_longer_than_the_context_is_refused_not_cut(server):
    """Issue 21 / the anchors' complaint: Ollama's context size cuts prompts silently."""
    llm = llama_index_llm(f"ollama:{MODEL}", context_window=512, max_tokens=64)
    with pytest.raises(ContextOverflowError, match="does not fit"):
        call(Call(llm, "word " * 600))
    assert not server.requests or server.requests[-1][0] != "/api/chat"
    server.replies.append(StubReply("ok", prompt_eval_count=512))
    with pytest.raises(ContextOverflowError, match="cut the prompt"):
        call(Call(llm, "short prompt"))
    chat = chat_model(f"ollama:{MODEL}", context_window=512)
    server.replies.append(StubReply("ok", prompt_eval_count=512))
    with pytest.raises(ContextOverflowError):
        call(Call(chat, "short prompt"))
