"""The command line as a shell user runs it, on the embedded models."""

import json
import os
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "multihop_rag.cli"]


def sh(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)


def test_demo_answers_the_two_hop_questions_with_the_default_model():
    out = sh("demo", env={"MULTIHOP_RAG_LLM": "llamacpp:default", "MULTIHOP_RAG_EMBED": "st:default"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("Q: ") == 3 and out.stdout.count("gold: ") == 3
    correct = int(out.stdout.strip().splitlines()[-1].split("/")[0])
    assert correct >= 2, out.stdout


def test_index_and_ask_a_folder(tmp_path, fast_llm_spec):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kesh.md").write_text("# Kesh Bridge\nThe Kesh Bridge was designed by Tomas Halvard and crosses the Orrin River.")
    (docs / "halvard.txt").write_text("Tomas Halvard was born in the port city of Dunmere in 1741.")
    (docs / "broken.txt").write_bytes(b"\x00\xff\x00")
    store = str(tmp_path / "store")
    out = sh("index", str(docs), "--store", store, "--llm", fast_llm_spec, "--embed", "st:default")
    assert out.returncode == 0, out.stderr
    assert "indexed 2 documents" in out.stdout and "1 skipped" in out.stderr
    out = sh("ask", "Where was the designer of the Kesh Bridge born?", "--store", store, "--llm", fast_llm_spec)
    assert out.returncode == 0, out.stderr
    assert "Dunmere" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "/no/such/folder", "--store", "/tmp/x"], "does not exist"),
        (["ask", "q", "--store", "/tmp/definitely-empty-store", "--llm", "llamacpp:/no/model.gguf"], "no GGUF file"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    out = sh(*args)
    assert out.returncode == 2
    assert message in out.stderr and out.stderr.strip().count("\n") <= 1


def test_server_down_exits_2(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    out = sh("index", str(tmp_path), "--store", str(tmp_path / "s"), "--llm", "ollama:qwen2.5:7b-instruct",
             env={"OLLAMA_HOST": "127.0.0.1:9"})
    assert out.returncode == 2 and "ollama serve" in out.stderr


def test_eval_runs_methods_on_a_pooled_corpus_and_resumes(tmp_path, fast_llm_spec):
    """`multihop-rag eval` with real models: the candidates of one HotpotQA dev question as corpus.
    GARLIC's runner is pinned on fakes (unit tier) and its real build in test_garlic: left out to
    keep this under ten minutes on two slow cores."""
    out_dir = tmp_path / "eval"
    args = ["eval", "--dataset", "hotpotqa", "--split", "dev", "--pool", "1", "--limit", "1",
            "--methods", "naive,raptor,resp", "--out", str(out_dir),
            "--llm", fast_llm_spec, "--embed", "st:default"]
    out = sh(*args)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert [r["method"] for r in lines] == ["naive", "raptor", "resp"]
    assert all(r["llm_calls"] >= 1 and r["answer"] for r in lines)
    assert all(r["prompt_tokens"] > 0 for r in lines)
    builds = json.loads((out_dir / "builds.json").read_text())
    assert builds["raptor"]["llm_calls"] >= 1 and builds["naive"]["llm_calls"] == 0
    report = (out_dir / "report.md").read_text()
    assert "## F1" in report and "| resp | 1 |" in report and "TPER" in report
    assert (out_dir / "report.png").stat().st_size > 1000

    again = sh(*args)  # everything done: loads no index, answers nothing, same report
    assert again.returncode == 0, again.stderr[-3000:]
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == 3
