"""Issue 23: the core dependencies alone, without any extra, import all five method packages and run
one fake-LLM test per method. A fresh virtualenv installed by uv from constraints.txt; uv's cache holds
most of what ``make`` installed, so it takes seconds (the few packages pip installed there are fetched)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
METHODS = ["llama_index_sirerag", "llama_index_k2rag", "llama_index_garlic", "langchain_resp", "langgraph_hirag"]
EXTRAS_ONLY = ["torch", "llama_cpp", "transformers", "sentence_transformers", "graphrag", "matplotlib", "nbclient"]
ONE_TEST_PER_METHOD = [
    "integrations_tests/unit/test_sirerag.py::test_pool_holds_both_trees_with_consistent_links",
    "integrations_tests/unit/test_k2rag.py::test_k2rag_summarizes_kg_results_and_sub_answers",
    "integrations_tests/unit/test_garlic.py::test_query_engine_returns_visited_nodes_calls_and_mode",
    "integrations_tests/unit/test_resp.py::test_second_round_adds_local_pathway_and_memories_accumulate",
    "integrations_tests/unit/test_hirag.py::test_two_hop_question_end_to_end",
]


def run(*args: object) -> str:
    done = subprocess.run([str(a) for a in args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


@pytest.mark.timeout(900)
def test_the_core_alone_runs_every_method(tmp_path):
    venv = tmp_path / "core"
    python = venv / "bin" / "python"
    started = time.perf_counter()
    run(UV, "venv", "--quiet", "--python", sys.executable, venv)
    # The test runner comes along (it is not a dependency of the package); nothing else.
    run(UV, "pip", "install", "--quiet", "--python", python, "-c", ROOT / "constraints.txt",
        "-e", ROOT, "pytest", "pytest-asyncio", "pytest-socket", "pytest-timeout")
    seconds = time.perf_counter() - started

    absent = run(python, "-c", f"import importlib.util as u; print([m for m in {EXTRAS_ONLY!r} if u.find_spec(m)])")
    assert absent.strip() == "[]", f"the core install pulled in extras: {absent}"
    run(python, "-c", "; ".join(f"import {m}" for m in METHODS))
    out = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ONE_TEST_PER_METHOD)
    assert f"{len(ONE_TEST_PER_METHOD)} passed" in out
    print(f"core install: {size_mb(venv):.0f} MiB in {seconds:.0f} s (uv, warm cache)")
