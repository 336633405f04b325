"""Integration tier: the real embedded llama.cpp model, real sentence-transformers, real ChromaDB
(persistent and as a server) and the Ollama code path against a real Ollama (``OLLAMA_HOST`` set)
or a local server speaking Ollama's API backed by the embedded models."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from integrations_tests.ollama_stub import OllamaStub
from multihop_rag.backends import DEFAULT_OLLAMA_EMBED, DEFAULT_OLLAMA_LLM
from multihop_rag.serving import bundled

FAST_LLM = os.environ.get("MULTIHOP_RAG_TEST_LLM", f"llamacpp:{bundled.FAST_LLM_ALIAS}")
"""Spec of the LLM the integration tests run on (the fast bundled model unless overridden)."""


def first_question_docs(dataset: str, n: int):
    """The smoke split's first question and ``n`` of its passages as LlamaIndex documents: its
    supporting passages plus its first distractors (a corpus where retrieval must find the gold ones
    at a fraction of the candidates' build time)."""
    from multihop_rag.corpus import load_dataset

    passages, questions = load_dataset(dataset, "smoke")
    question = questions[0]
    distractors = [c for c in question.candidates if c not in question.supporting]
    wanted = set(question.supporting) | set(distractors[: n - len(question.supporting)])
    return [p.to_llama_index() for p in passages if p.id in wanted], question


def tiny_corpus(extra: int = 0):
    """HotpotQA smoke's first question with its two supporting passages, its first distractor, and
    ``extra`` more distractors (passages to add in an update): the smallest corpus where retrieval
    must choose and every build stage runs."""
    from multihop_rag.corpus import load_dataset

    passages, questions = load_dataset("hotpotqa", "smoke")
    question = questions[0]
    by_id = {p.id: p for p in passages}
    distractors = [c for c in question.candidates if c not in question.supporting]
    corpus = [by_id[i] for i in question.supporting] + [by_id[distractors[0]]]
    return corpus, [by_id[i] for i in distractors[1 : 1 + extra]], question


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def fast_llm_spec() -> str:
    return FAST_LLM


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """The run's models as the command line builds them (the fast LLM, MiniLM), loaded once per session."""
    from multihop_rag.method import Models

    return Models.from_specs(FAST_LLM, "st:default", cache=tmp_path_factory.mktemp("models") / "calls.sqlite")


SETTINGS = {
    "garlic": {"attention_model": "none"},
    "sirerag": {"max_propositions": 6, "max_entities": 4},
}
"""GARLIC's attention edges on the real GGUF are built in test_garlic, here its embedding mode; the fast
model writes ~700 tokens of propositions per chunk when allowed the default 30 (5 minutes for three
passages on one slow core), so this build caps them."""


@pytest.fixture(scope="session")
def built(models, tmp_path_factory):
    """Each method's index over the tiny corpus, then updated with one more passage."""
    corpus, extra, question = tiny_corpus(extra=1)
    root = tmp_path_factory.mktemp("methods")
    out = {}
    from multihop_rag.app import registry

    for name in registry.ORDER:
        method = registry.get(name)
        config = method.config_class(**SETTINGS.get(name, {}))
        before = models.usage()
        index = method.build(corpus, models, root / name, config)
        build_usage = models.usage() - before
        answer = index.answer(question.question)
        before = models.usage()
        report = index.update(corpus + extra)
        update_usage = models.usage() - before
        out[name] = {"index": index, "answer": answer, "report": report, "build": build_usage, "update": update_usage,
                     "folder": root / name, "config": config}
    return out, corpus, extra, question


@pytest.fixture(scope="session")
def li_llm():
    from multihop_rag.backends import llama_index_llm

    return llama_index_llm(FAST_LLM, max_tokens=256)


@pytest.fixture(scope="session")
def lc_chat():
    from multihop_rag.backends import chat_model

    return chat_model(FAST_LLM, max_tokens=256)


@pytest.fixture(scope="session")
def li_embed():
    from multihop_rag.backends import llama_index_embedding

    return llama_index_embedding("st:default")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ollama_host():
    """Base URL of an Ollama API: a real server when OLLAMA_HOST is set, else the stub."""
    if os.environ.get("OLLAMA_HOST"):
        yield os.environ["OLLAMA_HOST"]
        return
    llm_path = str(bundled.gguf_path(FAST_LLM.split(":", 1)[1])) if FAST_LLM.startswith("llamacpp:") else FAST_LLM
    st_path = str(bundled.embedding_path(bundled.DEFAULT_EMBED_ALIAS))
    with OllamaStub({DEFAULT_OLLAMA_LLM: llm_path}, {DEFAULT_OLLAMA_EMBED: st_path}) as stub:
        os.environ["OLLAMA_HOST"] = stub.url
        try:
            yield stub.url
        finally:
            del os.environ["OLLAMA_HOST"]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real Chroma server (``chroma run``) on 127.0.0.1, stopped after the session."""
    import chromadb

    exe = shutil.which("chroma") or str(Path(os.sys.executable).with_name("chroma"))
    port = _free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [exe, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"chroma run did not start on {url}")
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=30)
