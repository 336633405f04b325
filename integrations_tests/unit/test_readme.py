"""Every Python example of the README runs as written (on deterministic fakes instead of the models,
so an API change that breaks an example fails here), and every command-line example parses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from integrations_tests.unit.test_garlic import FakeAttention
from multihop_rag import backends
from multihop_rag.app import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
PYTHON = re.findall(r"```python\n(.*?)```", README, re.S)
SHELL = [line for block in re.findall(r"```bash\n(.*?)```", README, re.S) for line in block.splitlines()
         if line.startswith(".venv/bin/multihop-rag ")]

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


def test_the_readme_has_examples_for_every_method():
    assert len(PYTHON) >= 6 and len(SHELL) >= 7


@pytest.mark.parametrize("code", PYTHON, ids=lambda c: c.split("import", 2)[1].split()[0] if "import" in c else "block")
def test_python_example_runs(code, fakes, capsys):
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip()  # every example prints what it built or answered


@pytest.mark.parametrize("line", SHELL)
def test_command_line_example_parses(line):
    argv = shlex.split(line.split("#")[0])[1:]
    args = cli.build_parser().parse_args(argv)
    assert args.command in {"index", "ask", "eval", "demo"}
