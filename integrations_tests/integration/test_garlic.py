"""GARLIC end to end: attention from a real transformers model loaded offline from the bundled GGUF
(the same weights as the llama.cpp LLM that writes the summaries), and the llama.cpp-only fallback,
on the three-passage corpus."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from integrations_tests.integration.conftest import tiny_corpus
from llama_index_garlic import GarlicConfig, GarlicIndex, TransformersAttention
from llama_index_garlic.attention import IMPLEMENTATION
from multihop_rag.serving import bundled

CONFIG = GarlicConfig(n_s=640, summary_tokens=128, chunk_size=150, search_window=2048, attention_search=True,
                     start_nodes=None)
"""n_s small enough that three passages take two level-1 batches, so the graph has three levels; the paper's
attention search (off by default), so the real attention model steers a search."""


@pytest.fixture(scope="module")
def attention():
    return TransformersAttention.from_pretrained(bundled.FAST_LLM_ALIAS, dtype="float32")  # exact, for the comparisons


def test_attention_of_the_reply_rows_equals_eager_output_attentions_averaged(attention):
    """The memory-flat capture (fused attention, probabilities of the reply's rows only, the last logit only)
    gives what eager attention's full ``output_attentions`` give, averaged over heads and layers."""
    prompt = "Summary the following information.\n* Kesh Bridge spans the Orrin River.\n* Tomas Halvard built it.\n"
    reply = "* Tomas Halvard built the Kesh Bridge over the Orrin River."
    inputs = ["Kesh Bridge spans the Orrin River.", "Tomas Halvard built it."]
    outputs = ["Tomas Halvard built the Kesh Bridge over the Orrin River."]
    edges = attention.summary_edges(prompt, reply, inputs, outputs)

    rendered = attention._render([{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}])
    ids, offsets = attention._encode(rendered)
    attention.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = attention.model(input_ids=torch.tensor([ids]), output_attentions=True)
    finally:
        attention.model.set_attn_implementation(IMPLEMENTATION)
    mean = torch.stack([layer[0].mean(0) for layer in out.attentions]).mean(0).numpy()  # layers, heads

    def tokens(needle, start):
        at = rendered.index(needle, start)
        return [i for i, (a, b) in enumerate(offsets) if a < at + len(needle) and b > at and b > a]

    start = rendered.index(prompt)
    rows = tokens(outputs[0], start + len(prompt))
    expected = [mean[np.ix_(rows, tokens(text, start))].mean() for text in inputs]
    np.testing.assert_allclose(edges[0], expected, rtol=1e-4)


def test_each_edges_pass_gives_the_memory_it_freed_back(attention, monkeypatch):
    import llama_index_garlic.attention as attention_module

    calls = []
    monkeypatch.setattr(attention_module, "return_freed_memory", lambda: calls.append(True) or True)
    inputs = ["Kesh Bridge spans the Orrin River.", "Tomas Halvard built it."]
    prompt = "Summary the following information.\n" + "".join(f"* {text}\n" for text in inputs)
    for _ in range(2):
        attention.summary_edges(prompt, "* Tomas Halvard built the Kesh Bridge.", inputs, ["Tomas Halvard built the Kesh Bridge."])
    assert calls == [True, True]


@pytest.mark.slow
def test_bfloat16_weights_give_the_float32_edges(attention):
    """The default, bfloat16 weights multiplied in float32, halves the weights' memory and keeps the edges (issue 41)."""
    inputs = [f"Passage {i}: the town of Vell{i} lies on the river Orr{i}, founded by the miller Tam{i}." for i in range(8)]
    prompt = "Summarize the passages into information points.\n\n" + "\n".join(inputs)
    outputs = [f"Vell{i} lies on the river Orr{i} and was founded by Tam{i}." for i in range(0, 8, 2)]
    reply = "\n".join(f"* {o}" for o in outputs)
    exact = attention.summary_edges(prompt, reply, inputs, outputs)
    half = TransformersAttention.from_pretrained(bundled.FAST_LLM_ALIAS).summary_edges(prompt, reply, inputs, outputs)
    np.testing.assert_allclose(half, exact, rtol=0.02, atol=1e-4)
    assert (half.argmax(axis=1) == exact.argmax(axis=1)).all()


def test_kv_cache_gives_the_same_attention_for_a_fraction_of_the_tokens(attention):
    nodes = ["Kesh Bridge spans the Orrin River.", "Tomas Halvard designed the Kesh Bridge.", "Velmora is a town."]
    question = "Who designed the bridge over the Orrin?"
    scores, cost = {}, {}
    for kv in (True, False):
        before = attention.forward_tokens
        session = attention.session(question, kv_cache=kv)
        scores[kv] = session.append(nodes[:2]) + session.append(nodes[2:])
        cost[kv] = attention.forward_tokens - before
    np.testing.assert_allclose(scores[True], scores[False], rtol=1e-3)
    assert cost[True] == session.tokens  # every token read once
    assert cost[False] > cost[True]  # re-reading the prefix at each step
    assert scores[True][1] > scores[True][2]  # the node about the designer attends to the question more


@pytest.fixture(scope="module")
def garlic(attention, models, tmp_path_factory):
    corpus, _, question = tiny_corpus()
    folder = tmp_path_factory.mktemp("garlic")
    index = GarlicIndex.from_documents([p.to_llama_index() for p in corpus], llm=models.llm, embed_model=models.embed,
                                       attention_model=attention, config=CONFIG, persist_dir=folder, show_progress=False)
    return index, folder, corpus, question


def test_attention_graph_has_levels_and_normalised_attention_edges(garlic):
    index, *_ = garlic
    stats = index.stats()
    assert stats["edge_source"] == "attention" and stats["embedding_edge_batches"] == 0
    assert len(index.graph.levels) >= 3 and stats["batches_per_level"]["1"] >= 2
    assert stats["last_update"]["attention_forward_tokens"] > 0  # the build ran the attention model
    for kids in index.graph.edges.values():
        assert sum(kids.values()) == pytest.approx(1.0)


def test_attention_search_answers_with_a_trace(garlic):
    index, _, _, question = garlic
    response = index.as_query_engine().query(question.question)
    meta = response.metadata
    assert meta["scoring"] == "attention+embedding"
    assert len(meta["visited"]) == len(set(meta["visited"])) >= len(index.graph.top_level)
    assert meta["stop_reason"] in {"yes", "budget", "exhausted"}
    assert meta["attention_seconds"] > 0 and str(response).strip()


def test_reload_in_a_new_process_without_attention_falls_back_to_embeddings(garlic):
    index, folder, _, question = garlic
    script = f"""
import json
from llama_index_garlic import GarlicIndex
from multihop_rag.backends import llama_index_embedding, llama_index_llm
from integrations_tests.integration.conftest import FAST_LLM
index = GarlicIndex.from_persist_dir({str(folder)!r}, llm=llama_index_llm(FAST_LLM, max_tokens=256),
                                     embed_model=llama_index_embedding("st:default"))
response = index.as_query_engine().query({question.question!r})
print(json.dumps({{"nodes": len(index.graph.nodes), "edge_source": index.graph.edge_source, "mode": index.mode,
                  "answer": str(response), **response.metadata}}))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["nodes"] == len(index.graph.nodes) and out["edge_source"] == "attention"
    assert out["mode"] == "embedding" and out["scoring"] == "embedding" and out["answer"].strip()


def test_llama_cpp_only_build_reads_the_summaries_from_the_cache(garlic, models):
    """The same corpus without attention: the summaries (the same prompts whichever edges follow) come
    from the call cache, only the edges differ."""
    index, _, corpus, question = garlic
    before = models.usage()
    plain = GarlicIndex.from_documents([p.to_llama_index() for p in corpus], llm=models.llm, embed_model=models.embed,
                                       config=CONFIG, show_progress=False)
    assert (models.usage() - before).calls == 0
    assert plain.stats()["edge_source"] == "embedding" and len(plain.graph.levels) == len(index.graph.levels)
    hits = plain.as_retriever().retrieve(question.question)
    assert [h.node.node_id for h in hits][: len(plain.graph.top_level)] == [n.id for n in plain.graph.top_level]


@pytest.mark.slow
def test_the_unpacked_weights_are_transformers_own_gguf_weights(attention):
    """The folder a GGUF is unpacked into once (`gguf_weights`) holds, bit for bit, what transformers' GGUF loader gives."""
    from transformers import AutoModelForCausalLM

    path = bundled.gguf_path(bundled.FAST_LLM_ALIAS)
    direct = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32, local_files_only=True)
    unpacked = attention.model.state_dict()
    assert unpacked.keys() == direct.state_dict().keys()
    assert all(torch.equal(unpacked[name], tensor) for name, tensor in direct.state_dict().items())
