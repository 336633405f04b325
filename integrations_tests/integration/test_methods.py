"""Every registered method through the interface the command line and the evaluation use: built on
real models (the fast llama.cpp model, MiniLM) into a persistent Chroma folder on a three-passage
corpus, updated with one more passage at the cost of the change, reloaded in a new process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from integrations_tests.integration.conftest import FAST_LLM
from multihop_rag.app import registry

METHODS = list(registry.ORDER)


@pytest.mark.parametrize("name", METHODS)
def test_each_method_answers_with_ranked_evidence(built, name):
    results, corpus, _, question = built
    answer = results[name]["answer"]
    assert answer.text.strip(), name
    assert answer.evidence, name
    passages = {p for e in answer.evidence for p in e.passage_ids}
    assert passages <= {p.id for p in corpus}
    if name not in {"garlic", "resp"}:  # GARLIC's search may stop on an information point; ReSP may answer in one round
        assert passages & set(question.supporting), [e.title for e in answer.evidence]


@pytest.mark.parametrize("name", METHODS)
def test_an_update_adds_one_passage_at_the_cost_of_the_change(built, name):
    results, _, extra, _ = built
    report, build, update = results[name]["report"], results[name]["build"], results[name]["update"]
    assert report.added == [extra[0].id] and not report.removed and not report.changed
    if name in {"sirerag", "k2rag"}:  # per-document stages: the new passage's calls only
        assert 0 < update.calls < build.calls, (build, update)
    elif registry.get(name).builds:  # a tree over three passages: the new chunk's path to the root, ~ the whole tree
        assert 0 < update.calls <= build.calls + 1, (build, update)
    else:
        assert build.calls == update.calls == 0


def test_every_index_reloads_in_a_new_process_and_answers(built):
    results, corpus, extra, question = built
    folders = {name: (str(r["folder"]), r["config"].model_dump(mode="json")) for name, r in results.items()}
    script = f"""
import json
from multihop_rag.app import registry
from multihop_rag.method import Models
models = Models.from_specs({FAST_LLM!r}, "st:default")
out = {{}}
for name, (folder, settings) in {folders!r}.items():
    method = registry.get(name)
    index = method.load(__import__("pathlib").Path(folder), models, method.config_class(**settings))
    answer = index.answer({question.question!r})
    out[name] = {{"answer": answer.text, "passages": sorted({{p for e in answer.evidence for p in e.passage_ids}}),
                 "pool": index.stats().get("pool_size")}}
print(json.dumps(out))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    reloaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(reloaded) == set(METHODS)
    ids = {p.id for p in corpus + extra}
    for name, out in reloaded.items():
        assert out["answer"].strip(), name
        assert set(out["passages"]) <= ids, name
        assert out["pool"] == results[name]["index"].stats().get("pool_size"), name
