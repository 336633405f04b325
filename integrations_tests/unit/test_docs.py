"""Every Python example of the README and the documentation pages runs as written (on deterministic
fakes instead of the models, so an API change that breaks an example fails here), and every
command-line example parses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from integrations_tests.unit.test_garlic import FakeAttention
from multihop_rag import backends
from multihop_rag.app import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = {path.relative_to(ROOT).as_posix(): path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
PYTHON = [(page, code) for page, text in PAGES.items() for code in re.findall(r"```python\n(.*?)```", text, re.S)]
SHELL = [line for text in PAGES.values() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
         for line in block.splitlines() if line.startswith(".venv/bin/multihop-rag ")]

REPLY = "* The Kesh Bridge crosses the Orrin River in Velmora."


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(backends, "llama_index_llm", lambda spec=None, **k: ScriptedLLM(lambda p: REPLY))
    monkeypatch.setattr(backends, "llama_index_embedding", lambda spec=None, **k: HashEmbedding())
    monkeypatch.setattr(backends, "chat_model", lambda spec=None, **k: ScriptedChatModel(lambda p: REPLY))
    monkeypatch.setattr(backends, "langchain_embeddings", lambda spec=None, **k: HashEmbeddings())
    from llama_index_garlic import TransformersAttention

    monkeypatch.setattr(TransformersAttention, "from_pretrained", classmethod(lambda cls, source: FakeAttention()))


def test_the_readme_has_one_example_per_framework_and_the_guides_one_per_method():
    readme = [code for page, code in PYTHON if page == "README.md"]
    assert any("llama_index_sirerag" in code for code in readme) and any("langchain_resp" in code for code in readme)
    guides = " ".join(code for page, code in PYTHON if page == "docs/methods.md")
    packages = ["llama_index_sirerag", "llama_index_k2rag", "llama_index_garlic", "langchain_resp", "langgraph_hirag"]
    assert all(f"from {package} import" in guides for package in packages) and len(SHELL) >= 7


def test_the_readme_stays_a_front_page():
    """Issue 38: what it is, two commands, the methods, one example per framework, where to read on."""
    assert PAGES["README.md"].count("\n") < 160


@pytest.mark.parametrize(("page", "code"), PYTHON, ids=lambda v: v.split("import", 2)[1].split()[0] if "import" in v else v)
def test_python_example_runs(page, code, fakes, capsys):
    exec(compile(code, page, "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip()  # every example prints what it built or answered


@pytest.mark.parametrize("line", SHELL)
def test_command_line_example_parses(line):
    argv = shlex.split(line.split("#")[0])[1:]
    args = cli.build_parser().parse_args(argv)
    assert args.command in {"index", "ask", "eval", "report", "demo"}
