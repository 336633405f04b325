import pytest

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from multihop_rag import backends, cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def fake_models(monkeypatch):
    monkeypatch.setattr(backends, "llama_index_llm", lambda spec=None, **k: ScriptedLLM(lambda p: "Orrin River"))
    monkeypatch.setattr(backends, "llama_index_embedding", lambda spec=None: HashEmbedding())
    monkeypatch.setattr(backends, "chat_model", lambda spec=None, **k: ScriptedChatModel(lambda p: "Orrin River"))
    monkeypatch.setattr(backends, "langchain_embeddings", lambda spec=None: HashEmbeddings())
    monkeypatch.setattr(backends, "ollama_models", lambda *a, **k: None)


def test_help_explains_options(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["index", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "--store" in text and "--llm" in text and "--embed" in text


def test_empty_folder_is_exit_2(capsys, tmp_path, fake_models):
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"))
    assert code == 2 and "no readable" in err and err.count("\n") == 1


def test_binary_only_folder_is_exit_2(capsys, tmp_path, fake_models):
    (tmp_path / "x.txt").write_bytes(b"\x00\x01\x02")
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"))
    assert code == 2 and "skipped" in err


def test_server_down_is_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "ollama_models", lambda *a, **k: None)
    (tmp_path / "a.txt").write_text("hello")
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"), "--llm", "ollama:qwen2.5:7b-instruct")
    assert code == 2 and "ollama serve" in err


def test_unknown_dataset_and_method_are_exit_2(capsys, fake_models):
    assert run(capsys, "eval", "--dataset", "squad")[0] == 2
    code, _, err = run(capsys, "eval", "--dataset", "hotpotqa", "--methods", "naive,nosuch")
    assert code == 2 and "nosuch" in err
    code, _, err = run(capsys, "eval", "--dataset", "bamboogle")
    assert code == 2 and "no corpus" in err


def test_bad_spec_is_exit_2(capsys, tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"), "--llm", "gpt4")
    assert code == 2 and "bad LLM spec" in err


def test_index_then_ask_round_trip(capsys, tmp_path, fake_models):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "kesh.txt").write_text("The Kesh Bridge crosses the Orrin River in Velmora.")
    (tmp_path / "docs" / "lake.txt").write_text("Lake Ismay is fed by the Orrin River.")
    store = str(tmp_path / "store")
    code, out, _ = run(capsys, "index", str(tmp_path / "docs"), "--store", store)
    assert code == 0 and "indexed 2 documents" in out
    code, out, _ = run(capsys, "ask", "Which river does the Kesh Bridge cross?", "--store", store, "--top-k", "1")
    assert code == 0 and "A: Orrin River" in out and "kesh" in out
    code, _, err = run(capsys, "ask", "q", "--store", str(tmp_path / "empty"))
    assert code == 2 and "multihop-rag index" in err


def test_eval_writes_results_and_resumes(capsys, tmp_path, fake_models):
    out_dir = tmp_path / "out"
    code, out, _ = run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "2", "--out", str(out_dir))
    assert code == 0 and "| naive | 2 |" in out and "report.png" in out
    lines = (out_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and (out_dir / "report.png").is_file()
    run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "3", "--out", str(out_dir))
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == 3
    code, _, err = run(capsys, "eval", "--dataset", "musique", "--limit", "1", "--out", str(out_dir))
    assert code == 2 and "another dataset" in err
