"""Build estimates: the counted parts are exact (chunks, proposition calls, summary windows, GARLIC's
level-1 batches), the speed is measured once per model, and ``index --estimate`` builds nothing."""

from __future__ import annotations

import json

import pytest

from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from integrations_tests.unit.test_cli import docs, fake_models, run  # noqa: F401  (fixtures)
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.estimate import estimate as garlic_estimate
from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.estimate import estimate as k2rag_estimate
from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex
from llama_index_sirerag.estimate import estimate as sirerag_estimate
from multihop_rag.app.speed import measure_speed
from multihop_rag.corpus import Passage
from multihop_rag.estimate import ATTENTION_SPEED_SHARE, Speed, summary_levels

LONG = " ".join(f"Sentence {i} tells of the river town of Pellan and its mill." for i in range(400))
PASSAGES = [Passage("a", "Pellan", LONG), Passage("b", "Mill", "The mill of Pellan grinds oats."), Passage("c", "Oats", "Oats grow in the north.")]


def test_summary_levels_follow_the_fan_in_until_one_node():
    stage = summary_levels([100] * 100, fan_in=7.5, reply_tokens=190, depth=3, template_tokens=100)
    assert stage.calls == 14 + 2 + 1  # 100 -> 14 -> 2 -> 1
    assert stage.prompt_tokens == 100 * 100 + 14 * 190 + 2 * 190 + 17 * 100
    assert summary_levels([50], fan_in=5, reply_tokens=10, depth=3, template_tokens=1).calls == 0


def test_sirerag_counts_one_proposition_call_per_chunk_like_the_build(tmp_path):
    config = SiReRAGConfig(chunk_size=256, chunk_overlap=20, max_propositions=4)
    estimate = sirerag_estimate(PASSAGES, config)
    stages = {s.name: s for s in estimate.stages}
    index = SiReRAGIndex.from_documents([p.to_llama_index() for p in PASSAGES], llm=ScriptedLLM(lambda p: '{"facts": []}'),
                                        embed_model=HashEmbedding(), config=config, show_progress=False)
    assert stages["propositions"].calls == index.stats()["chunks"]
    assert {"similarity tree", "propositions", "relatedness tree"} == set(stages)
    assert [s.name for s in sirerag_estimate(PASSAGES, config.model_copy(update={"relatedness": False})).stages] == ["similarity tree"]


def test_k2rag_summarizes_only_long_documents_window_by_window():
    estimate = k2rag_estimate(PASSAGES, K2RAGConfig(min_summary_tokens=100))
    summaries = next(s for s in estimate.stages if s.name == "summaries")
    assert summaries.calls == 2  # the long passage (~5,600 tokens) in two 3,000-token windows; the short ones kept
    assert all(s.completion_tokens > 0 for s in estimate.stages)


def test_garlic_level_one_batches_are_the_builds(tmp_path):
    from integrations_tests.unit.test_garlic import garlic_llm
    from llama_index_garlic import GarlicIndex

    config = GarlicConfig(n_s=1024, summary_tokens=256)
    estimate = garlic_estimate(PASSAGES, config, context_window=8192)
    index = GarlicIndex.from_documents([p.to_llama_index() for p in PASSAGES], llm=garlic_llm(), embed_model=HashEmbedding(),
                                       config=config, show_progress=False)
    assert estimate.stages[0].calls == index.stats()["batches_per_level"]["1"] >= 4
    assert estimate.stages[-1].calls == 1
    assert garlic_estimate(PASSAGES, config.model_copy(update={"summary": "none"}), 8192).calls == 0


def test_garlic_counts_the_attention_pass_of_its_edges_in_the_time():
    """GARLIC's edges run each summary exchange (batch and reply) through the attention model once (B.1):
    no LLM call, but time; a served model (no attention) costs only its calls."""
    config = GarlicConfig(n_s=1024, summary_tokens=256)
    with_edges = garlic_estimate(PASSAGES, config, context_window=8192)
    without = garlic_estimate(PASSAGES, config, context_window=8192, attention=False)
    assert all(s.attention_tokens == s.prompt_tokens + s.completion_tokens for s in with_edges.stages)
    assert all(s.attention_tokens == 0 for s in without.stages) and without.calls == with_edges.calls
    speed = Speed(model="m", prompt_tps=100.0, generate_tps=10.0)
    extra = sum(s.attention_tokens for s in with_edges.stages) / (100.0 * ATTENTION_SPEED_SHARE)
    assert with_edges.seconds(speed) == pytest.approx(without.seconds(speed) + extra)


def test_speed_is_measured_once_per_model(tmp_path):
    llm = ScriptedLLM(lambda p: "one, two, three, four")
    first = measure_speed(llm, "m1", cache_file=tmp_path / "speed.json")
    assert len(llm.prompts) == 2 and first.prompt_tps > 0 and first.generate_tps > 0
    assert measure_speed(llm, "m1", cache_file=tmp_path / "speed.json") == first and len(llm.prompts) == 2
    measure_speed(llm, "m2", cache_file=tmp_path / "speed.json")
    assert len(llm.prompts) == 4


@pytest.mark.parametrize("method", ["sirerag", "k2rag", "garlic", "naive"])
def test_index_estimate_prints_the_cost_and_builds_nothing(capsys, docs, tmp_path, fake_models, monkeypatch, method):  # noqa: F811
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = tmp_path / "store"
    code, out, err = run(capsys, "index", str(docs), "--store", str(store), "--method", method, "--estimate")
    assert code == 0, err
    assert not store.exists()
    if method == "naive":
        assert "no LLM call" in out
    else:
        assert "| total |" in out and "generated tokens/s" in out


def test_recalibrate_measures_the_speed_again(capsys, docs, tmp_path, fake_models):  # noqa: F811
    """A speed measured on a busy machine is not kept forever: ``--recalibrate`` measures it again."""
    from multihop_rag.app import speed

    store = str(tmp_path / "store")
    run(capsys, "index", str(docs), "--store", store, "--method", "k2rag", "--estimate")
    known = json.loads(speed.speed_cache_file().read_text())
    (entry,) = known.values()
    known = {k: {**v, "prompt_tps": 0.5} for k, v in known.items()}
    speed.speed_cache_file().write_text(json.dumps(known))
    code, out, _ = run(capsys, "index", str(docs), "--store", store, "--method", "k2rag", "--estimate")
    assert code == 0 and "measured 0 prompt" in out  # the kept speed, slow as it was written
    code, out, _ = run(capsys, "index", str(docs), "--store", store, "--method", "k2rag", "--estimate", "--recalibrate")
    assert code == 0 and "measured 0 prompt" not in out
    assert json.loads(speed.speed_cache_file().read_text())[entry["model"]]["prompt_tps"] != 0.5
