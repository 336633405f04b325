"""The Ollama code path, against OLLAMA_HOST when set, else a stand-in speaking Ollama's API."""

import pytest
from pydantic import BaseModel, Field

from multihop_rag.backends import (
    DEFAULT_OLLAMA_EMBED,
    DEFAULT_OLLAMA_LLM,
    Spec,
    chat_model,
    langchain_embeddings,
    llama_index_embedding,
    llama_index_llm,
    resolve_llm_spec,
)
from multihop_rag.errors import BackendError
from multihop_rag.llm.calls import supports_format
from multihop_rag.llm.structured import StructuredStats, generate_json


class City(BaseModel):
    city: str
    country: str
    landmarks: list[str] = Field(max_length=3)


def test_auto_detection_picks_ollama_when_it_has_the_model(ollama_host, monkeypatch):
    monkeypatch.delenv("MULTIHOP_RAG_LLM", raising=False)
    assert resolve_llm_spec() == Spec("ollama", DEFAULT_OLLAMA_LLM)


def test_llama_index_ollama_llm_and_json_format(ollama_host):
    llm = llama_index_llm(f"ollama:{DEFAULT_OLLAMA_LLM}", max_tokens=128)
    assert "paris" in llm.complete("What is the capital of France? One word.").text.lower()
    assert supports_format(llm)
    stats = StructuredStats()
    value = generate_json(llm, "Describe Paris as JSON: city, country, up to 3 landmarks.", City, stats=stats)
    assert value is not None and value.country.lower() == "france" and stats.failed == 0


def test_langchain_chat_ollama_streams_and_takes_json(ollama_host):
    chat = chat_model(f"ollama:{DEFAULT_OLLAMA_LLM}", max_tokens=128)
    assert "paris" in chat.invoke("What is the capital of France? One word.").text.lower()
    assert generate_json(chat, "Describe Rome as JSON: city, country, up to 3 landmarks.", City) is not None


def test_ollama_embeddings_for_both_frameworks(ollama_host):
    li = llama_index_embedding(f"ollama:{DEFAULT_OLLAMA_EMBED}")
    lc = langchain_embeddings(f"ollama:{DEFAULT_OLLAMA_EMBED}")
    a, b = li.get_text_embedding("a river town"), lc.embed_query("a river town")
    assert len(a) == len(b) > 100


def test_missing_model_names_the_pull_command(ollama_host):
    with pytest.raises(BackendError, match="ollama pull no-such-model:1b"):
        chat_model("ollama:no-such-model:1b")


def test_server_down_names_the_fix(monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")
    with pytest.raises(BackendError, match="ollama serve"):
        llama_index_llm(f"ollama:{DEFAULT_OLLAMA_LLM}")
