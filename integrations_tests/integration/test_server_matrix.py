"""Every method on every kind of model server, at a size where each build stage makes several calls.

The matrix: each registered method × {an Ollama stand-in, an OpenAI-compatible stand-in} × concurrency
1 and 4, over the 15 demo passages: build, one ``ask``, an update (one passage dropped, one changed), a
reload. Both stand-ins answer with :func:`~integrations_tests.openai_stub.stand_in_reply` at once (no
model, no CPU), so the matrix runs in ``make test``; the slow tier runs it once more with the real 0.5B
model in process. K²RAG's graph step crashed on Ollama past one extraction call ("Event loop is closed":
the async client reused across the fresh event loops of ``asyncio.run``), which a 4-passage test never saw.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import multihop_rag
from integrations_tests.integration.conftest import FAST_LLM, SETTINGS
from integrations_tests.ollama_stub import ScriptedOllama
from integrations_tests.openai_stub import SlotServer, stand_in_reply
from multihop_rag.app import cli, registry
from multihop_rag.corpus import Passage, load_demo
from multihop_rag.method import Models

MODEL = "stand-in:1b"


def _ollama_reply(body: dict[str, Any]) -> str:
    if "messages" in body:
        prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    else:
        prompt = str(body.get("prompt", ""))
    schema = body.get("format")
    return stand_in_reply(prompt, schema if isinstance(schema, dict) else None)


@pytest.fixture(scope="module")
def servers(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """LLM specs of the two stand-ins (OLLAMA_HOST points at the Ollama one)."""
    with ScriptedOllama(_ollama_reply, [MODEL]) as ollama, SlotServer(slots=4, delay=0.0, model=MODEL) as openai:
        monkeypatch_module.setenv("OLLAMA_HOST", ollama.url)
        yield {"ollama": f"ollama:{MODEL}", "openai": f"openai:{MODEL}@{openai.url}"}


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _updated(corpus: list[Passage]) -> list[Passage]:
    """The corpus with its last passage dropped and its first one changed."""
    first = dataclasses.replace(corpus[0], text=corpus[0].text + " It is known for its white bridges.")
    return [first, *corpus[1:-1]]


def _run(method_name: str, llm: str, concurrency: int, folder: Path) -> None:
    """Build, ask, update, reload and ask again, as the command line does."""
    corpus, questions = load_demo()
    assert len(corpus) == 15
    models = Models.from_specs(llm, "st:default", cache=folder / "calls.sqlite", max_concurrency=concurrency)
    method = registry.get(method_name)
    config = method.config_class(**SETTINGS.get(method_name, {}))
    index = method.build(corpus, models, folder / "index", config)
    answer = index.answer(questions[0].question)
    assert answer.text.strip()
    report = index.update(_updated(corpus))
    assert report.removed == [corpus[-1].id] and report.changed == [corpus[0].id] and not report.added
    reloaded = method.load(folder / "index", models, config)
    assert reloaded.answer(questions[1].question).text.strip()
    if method.builds:
        assert reloaded.stats() == index.stats()


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("server", ["ollama", "openai"])
@pytest.mark.parametrize("method_name", registry.ORDER)
def test_every_method_builds_asks_updates_and_reloads_on_every_server(method_name, server, concurrency, servers, tmp_path):
    _run(method_name, servers[server], concurrency, tmp_path)


@pytest.mark.parametrize("method_name", ["naive", "raptor", "sirerag", "garlic", "k2rag"])
async def test_a_build_and_an_async_query_inside_a_running_event_loop(method_name, servers, tmp_path):
    """A Jupyter cell or a FastAPI handler: the caller's loop runs while the build and ``aquery`` run."""
    corpus, questions = load_demo()
    models = Models.from_specs(servers["ollama"], "st:default", cache=tmp_path / "calls.sqlite", max_concurrency=4)
    method = registry.get(method_name)
    built = method.build(corpus, models, tmp_path / "index", method.config_class(**SETTINGS.get(method_name, {})))
    # naive's index is LlamaIndex's own VectorStoreIndex: the model is given as a user would give it
    engine = built.index.as_query_engine(**({"llm": models.llm} if method_name == "naive" else {}))  # type: ignore[attr-defined]
    assert str(await engine.aquery(questions[0].question)).strip()
    assert str(await engine.aquery(questions[1].question)).strip()


@pytest.mark.parametrize("method_name", ["resp", "hirag"])
async def test_graphs_ainvoke_inside_a_running_event_loop(method_name, servers, tmp_path):
    corpus, questions = load_demo()
    models = Models.from_specs(servers["ollama"], "st:default", cache=tmp_path / "calls.sqlite", max_concurrency=4)
    method = registry.get(method_name)
    built = method.build(corpus, models, tmp_path / "index", method.config_class())
    for question in questions[:2]:
        assert (await built.graph.ainvoke({"question": question.question}))["answer"].strip()  # type: ignore[attr-defined]


@pytest.mark.parametrize("method_name", ["resp", "hirag"])
def test_graphs_ainvoke_from_one_event_loop_after_another(method_name, servers, tmp_path):
    """A script that calls ``asyncio.run`` per question: the Ollama client of the first loop is not reused."""
    corpus, questions = load_demo()
    models = Models.from_specs(servers["ollama"], "st:default", cache=tmp_path / "calls.sqlite", max_concurrency=4)
    method = registry.get(method_name)
    built = method.build(corpus, models, tmp_path / "index", method.config_class())
    for question in questions[:2]:
        assert asyncio.run(built.graph.ainvoke({"question": question.question}))["answer"].strip()  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("method_name", registry.ORDER)
def test_every_method_on_the_real_model_in_process(method_name, tmp_path):
    """The in-process model has one slot: concurrency 1 (4 would queue on its lock)."""
    _run(method_name, FAST_LLM, 1, tmp_path)


@pytest.mark.parametrize("server", ["ollama", "openai"])
def test_the_issue_command_k2rag_index_exits_0_on_both_servers(server, servers, tmp_path, capsys):
    """``multihop-rag index multihop_rag/data/demo_corpus.jsonl --store ./k --method k2rag --llm ollama:MODEL``."""
    corpus = Path(multihop_rag.__file__).parent / "data" / "demo_corpus.jsonl"
    argv = ["index", str(corpus), "--store", str(tmp_path / "k"), "--method", "k2rag", "--llm", servers[server],
            "--embed", "st:default", "--yes"]
    assert cli.main(argv) == 0
    assert cli.main(["ask", "Which river flows under the bridge designed by Tomas Halvard?", "--store", str(tmp_path / "k"),
                     "--llm", servers[server], "--embed", "st:default"]) == 0


def test_the_matrix_covers_every_registered_method():
    assert set(registry.ORDER) == set(registry.available())
