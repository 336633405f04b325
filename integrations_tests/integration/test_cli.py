"""The command line as a shell user runs it, on the embedded models (the fast LLM, MiniLM)."""

import json
import os
import re
import subprocess
import sys

import pytest

from integrations_tests.integration.conftest import tiny_corpus

CLI = [sys.executable, "-m", "multihop_rag.app.cli"]


def sh(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=1500)


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs")
    corpus, _, question = tiny_corpus()
    for p in corpus:
        (folder / f"{p.title}.md").write_text(f"# {p.title}\n{p.text}")
    (folder / "broken.txt").write_bytes(b"\x00\xff\x00")
    return folder, question


@pytest.fixture(scope="module")
def env(fast_llm_spec, tmp_path_factory):
    return {"MULTIHOP_RAG_LLM": fast_llm_spec, "MULTIHOP_RAG_EMBED": "st:default",
            "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}


def test_demo_shows_naive_resp_and_hirag_side_by_side(env):
    out = sh("demo", "--limit", "1", env=env)  # all three questions: the slow tier's demo on the default model
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("Q: ") == 3 and out.stdout.count("gold: ") == 3
    assert "[resp] " in out.stdout and "[hirag] " in out.stdout
    assert "[sub_question]" in out.stdout or "[decompose]" in out.stdout  # HiRAG's trace
    table = out.stdout[out.stdout.index("| method | correct |"):]
    assert all(f"| {m} |" in table for m in ("naive", "resp", "hirag"))


@pytest.mark.parametrize("method", ["naive", "hirag", "raptor"])
def test_index_ask_trace_and_json(docs, env, tmp_path, method):
    folder, question = docs
    store = str(tmp_path / "store")
    out = sh("index", str(folder), "--store", store, "--method", method, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"indexed 3 documents with {method}" in out.stdout and "1 skipped" in out.stderr
    out = sh("ask", question.question, "--store", store, "--trace", env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "A: " in out.stdout and "  [" in out.stdout  # the trace lines
    out = sh("ask", question.question, "--store", store, "--json", env=env)
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["method"] == method and answer["text"] and answer["evidence"]


def test_resp_over_another_methods_store_and_the_store_remembers_its_method(docs, env, tmp_path):
    folder, question = docs
    store = str(tmp_path / "store")
    assert sh("index", str(folder), "--store", store, env=env).returncode == 0
    out = sh("ask", question.question, "--store", store, "--method", "resp", "--trace", "--set", "resp.max_iterations=1", env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[retrieve]" in out.stdout and "[memory]" in out.stdout and "resp)" in out.stdout
    out = sh("index", str(folder), "--store", store, "--method", "hirag", env=env)
    assert out.returncode == 2 and "built with --method naive" in out.stderr


def test_estimate_prints_numbers_before_building_anything(docs, env, tmp_path):
    folder, _ = docs
    out = sh("index", str(folder), "--store", str(tmp_path / "s"), "--method", "sirerag", "--estimate", env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| propositions | 3 |" in out.stdout and "| total |" in out.stdout
    assert not (tmp_path / "s").exists()


def test_eval_on_your_own_questions(docs, env, tmp_path):
    folder, question = docs
    questions = tmp_path / "q.jsonl"
    lines = [{"question": question.question, "answers": question.answers},
             {"question": "Which band did the drummer play in?", "answers": ["Rush"]},
             {"question": "What is the capital of France?", "answers": ["Paris"]}]
    questions.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = sh("eval", "--questions", str(questions), "--corpus", str(folder), "--methods", "naive,resp", "--out",
             str(tmp_path / "o"), "--set", "resp.max_iterations=1", env=env)  # one round: the plumbing, not ReSP
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert [r["method"] for r in rows] == ["naive"] * 3 + ["resp"] * 3
    assert all(r["answer"] and r["prompt_tokens"] > 0 for r in rows)
    assert "| resp | 3 |" in out.stdout and (tmp_path / "o" / "report.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "/no/such/folder", "--store", "/tmp/x"], "does not exist"),
        (["ask", "q", "--store", "/tmp/definitely-empty-store"], "holds no"),
        (["index", "DOCS", "--store", "/tmp/x", "--llm", "llamacpp:/no/model.gguf"], "no GGUF file"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, docs):
    out = sh(*[str(docs[0]) if a == "DOCS" else a for a in args])
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and out.stderr.strip().count("\n") <= 2


@pytest.mark.slow
def test_demo_answers_most_questions_with_the_default_model():
    out = sh("demo", env={"MULTIHOP_RAG_LLM": "llamacpp:default", "MULTIHOP_RAG_EMBED": "st:default"})
    assert out.returncode == 0, out.stderr[-2000:]
    correct = [int(m.group(1)) for m in re.finditer(r"^\| \w+ \| (\d+)/\d+ \|", out.stdout, re.MULTILINE)]
    assert len(correct) == 3 and max(correct) >= 2, out.stdout
