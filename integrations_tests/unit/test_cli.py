"""The command line on deterministic fakes: every method through the registry, index → update → ask,
one-line errors with exit 2, eval on the shared data and on a user's own questions, a user's method
registered through an entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from integrations_tests.fakes import HashEmbedding, HashEmbeddings, ScriptedChatModel, ScriptedLLM
from multihop_rag import backends, errors
from multihop_rag.app import cli, registry
from multihop_rag.corpus import load_questions
from multihop_rag.errors import CorpusError


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def fake_models(monkeypatch):
    monkeypatch.setattr(backends, "llama_index_llm", lambda spec=None, **k: ScriptedLLM(lambda p: "Orrin River"))
    monkeypatch.setattr(backends, "llama_index_embedding", lambda spec=None, **k: HashEmbedding())
    monkeypatch.setattr(backends, "chat_model", lambda spec=None, **k: ScriptedChatModel(lambda p: "Orrin River"))
    monkeypatch.setattr(backends, "langchain_embeddings", lambda spec=None, **k: HashEmbeddings())
    monkeypatch.setattr(backends, "ollama_models", lambda *a, **k: None)


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kesh.txt").write_text("The Kesh Bridge crosses the Orrin River in Velmora.")
    (folder / "lake.txt").write_text("Lake Ismay is fed by the Orrin River.")
    return folder


def test_help_names_every_registered_method_and_the_model_options(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["index", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--store" in text and "--llm" in text and "--embed" in text and "--set" in text
    assert list(registry.available()) == list(registry.ORDER)  # the bundled methods, in report order


@pytest.mark.parametrize("name", registry.ORDER)
def test_every_methods_config_refuses_a_misspelt_setting_from_python(name):
    """A Python user's typo (``HiRAGConfig(fresh_next_questionn=True)``) ran with the default, silently."""
    with pytest.raises(ValidationError, match="top_kk"):
        registry.get(name).config_class(top_kk=3)


def test_empty_or_binary_corpus_is_one_line_and_exit_2(capsys, tmp_path, fake_models):
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"))
    assert code == 2 and "no readable" in err and err.count("\n") == 1
    (tmp_path / "x.txt").write_bytes(b"\x00\x01\x02")
    code, _, err = run(capsys, "index", str(tmp_path), "--store", str(tmp_path / "s"))
    assert code == 2 and "skipped" in err


def test_server_down_and_bad_spec_say_how_to_fix_it(capsys, docs, tmp_path, monkeypatch):
    # No server answers, even when the integration tier's Ollama stand-in runs in the same session.
    monkeypatch.setattr(backends, "_ollama_tags", lambda *a, **k: None)
    code, _, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "s"), "--llm", "ollama:qwen2.5:7b-instruct")
    assert code == 2 and "ollama serve" in err
    code, _, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "s"), "--llm", "gpt4")
    assert code == 2 and "bad LLM spec" in err


def test_unknown_dataset_method_or_setting_is_exit_2(capsys, fake_models):
    assert run(capsys, "eval", "--dataset", "squad")[0] == 2
    code, _, err = run(capsys, "eval", "--methods", "naive,nosuch")
    assert code == 2 and "nosuch" in err and "available: naive, resp, hirag" in err
    code, _, err = run(capsys, "eval", "--set", "naive.top=3")
    assert code == 2 and "naive has no setting 'top'" in err
    code, _, err = run(capsys, "eval", "--set", "naive.similarity_top_k=many")
    assert code == 2 and "naive.similarity_top_k" in err
    code, _, err = run(capsys, "eval", "--dataset", "bamboogle")
    assert code == 2 and "no corpus" in err


def test_index_update_and_ask_round_trip(capsys, docs, tmp_path, fake_models):
    store = str(tmp_path / "store")
    code, out, _ = run(capsys, "index", str(docs), "--store", store)
    assert code == 0 and "indexed 2 documents with naive" in out
    manifest = json.loads((tmp_path / "store" / "multihop_rag.json").read_text())
    assert manifest["cli_method"] == "naive" and manifest["status"] == "done"

    (docs / "ismay.txt").write_text("Lake Ismay lies in the north of Astrel.")
    (docs / "lake.txt").write_text("Lake Ismay is fed by the Orrin and the Velm.")
    (docs / "kesh.txt").unlink()
    code, out, _ = run(capsys, "index", str(docs), "--store", store)
    assert code == 0 and "1 added, 1 changed, 1 removed" in out

    code, out, _ = run(capsys, "ask", "Where is Lake Ismay?", "--store", store, "--top-k", "2", "--trace")
    assert code == 0 and "A: Orrin River" in out and "[retrieve]" in out and "kesh" not in out
    code, out, _ = run(capsys, "ask", "Where is Lake Ismay?", "--store", store, "--json")
    answer = json.loads(out)
    assert answer["method"] == "naive" and {e["passage_ids"][0] for e in answer["evidence"]} == {"ismay.txt", "lake.txt"}

    code, out, _ = run(capsys, "ask", "Where is Lake Ismay?", "--store", store, "--method", "resp")
    assert code == 0 and "resp)" in out  # ReSP over the store's retriever
    code, _, err = run(capsys, "ask", "q", "--store", store, "--method", "hirag")
    assert code == 2 and "built with --method naive" in err
    code, _, err = run(capsys, "ask", "q", "--store", str(tmp_path / "empty"))
    assert code == 2 and "multihop-rag index" in err


@pytest.mark.parametrize("method", ["resp", "hirag", "raptor", "sirerag", "garlic", "k2rag"])
def test_every_method_indexes_and_answers_from_the_command_line(capsys, docs, tmp_path, fake_models, method):
    store = str(tmp_path / method)
    no_gguf = ["--set", "garlic.attention_model=none"]  # "auto" would read the real GGUF's attention
    code, out, err = run(capsys, "index", str(docs), "--store", store, "--method", method, *no_gguf)
    assert code == 0, err
    assert f"with {method}" in out
    code, out, err = run(capsys, "ask", "Which river does the Kesh Bridge cross?", "--store", store)
    assert code == 0, err
    assert f"{method})" in out and "A: " in out


def test_eval_writes_results_resumes_and_refuses_another_dataset(capsys, tmp_path, fake_models):
    out_dir = tmp_path / "out"
    code, out, _ = run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "2", "--out", str(out_dir))
    assert code == 0 and "| naive | 2 |" in out and "report.png" in out
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == 2
    run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "3", "--out", str(out_dir))
    assert len((out_dir / "results.jsonl").read_text().splitlines()) == 3
    code, _, err = run(capsys, "eval", "--dataset", "musique", "--limit", "1", "--out", str(out_dir))
    assert code == 2 and "another dataset" in err


def test_eval_on_your_own_questions(capsys, docs, tmp_path, fake_models):
    questions = tmp_path / "mine.jsonl"
    questions.write_text(json.dumps({"question": "Which river does the Kesh Bridge cross?", "answers": ["Orrin River"]}) + "\n")
    code, out, err = run(capsys, "eval", "--questions", str(questions), "--corpus", str(docs), "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert "| naive | 1 | 1.000" in out
    code, _, err = run(capsys, "eval", "--questions", str(questions))
    assert code == 2 and "--corpus" in err


def test_questions_file_errors_name_the_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "a?", "answers": ["x"]}\n{"question": "b?"}\n')
    with pytest.raises(CorpusError, match="record 2"):
        load_questions(path)
    path.write_text('{"question": "a?", "answer": "x"}\nnot json\n')
    with pytest.raises(CorpusError, match=":2"):
        load_questions(path)
    path.write_text('{"question": "a?", "answer": "x", "type": "bridge"}\n')
    (q,) = load_questions(path)
    assert q.answers == ["x"] and q.type == "bridge" and q.id == "q1"


PLUGIN = '''
from pydantic import BaseModel
from multihop_rag.method import Answer, UpdateReport

class EchoConfig(BaseModel):
    reply: str = "echo"

class EchoIndex:
    def __init__(self, reply): self.reply = reply
    def answer(self, question, trace=None): return Answer(question, self.reply)
    def update(self, passages): return UpdateReport()
    def stats(self): return {"pool_size": 0}

class Echo:
    name = "echo"
    summary = "answers with its setting"
    builds = False
    config_class = EchoConfig
    source_packages = ("echo_method",)
    def build(self, passages, models, folder, config, *, overwrite=False):
        from multihop_rag.indexing.persistence import write_manifest
        write_manifest(folder, "echo", 1, status="done")
        return EchoIndex(config.reply)
    def load(self, folder, models, config): return EchoIndex(config.reply)

METHOD = Echo()
'''


def test_a_users_method_joins_through_an_entry_point(capsys, docs, tmp_path, fake_models, monkeypatch):
    site = tmp_path / "site"
    (site / "echo_method-1.0.dist-info").mkdir(parents=True)
    (site / "echo_method.py").write_text(PLUGIN)
    (site / "echo_method-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-method\nVersion: 1.0\n")
    (site / "echo_method-1.0.dist-info" / "entry_points.txt").write_text("[multihop_rag.methods]\necho = echo_method:METHOD\n")
    monkeypatch.syspath_prepend(str(site))
    registry.available.cache_clear()
    try:
        assert "echo" in registry.available()
        store = str(tmp_path / "store")
        code, out, err = run(capsys, "index", str(docs), "--store", store, "--method", "echo", "--set", "echo.reply=hello")
        assert code == 0, err
        code, out, _ = run(capsys, "ask", "anything?", "--store", store)
        assert code == 0 and "A: hello" in out  # the store's settings are kept
    finally:
        sys.modules.pop("echo_method", None)
        registry.available.cache_clear()


# --- issue 39: input gaps, each one clear line with exit 2, nothing lost ----------------------------


def test_duplicate_ids_in_a_jsonl_corpus_are_refused_naming_them(capsys, tmp_path, fake_models):
    corpus = tmp_path / "c.jsonl"
    rows = [{"id": "a", "title": "A", "text": "First."}, {"id": "b", "title": "B", "text": "Other."},
            {"id": "a", "title": "A2", "text": "Second."}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run(capsys, "index", str(corpus), "--store", str(tmp_path / "s"))
    assert code == 2 and "duplicate id" in err and "'a'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_an_empty_question_is_refused(capsys, docs, tmp_path, fake_models):
    assert run(capsys, "index", str(docs), "--store", str(tmp_path / "s"))[0] == 0
    code, _, err = run(capsys, "ask", "   ", "--store", str(tmp_path / "s"))
    assert code == 2 and "empty question" in err


@pytest.mark.parametrize("assignment, message", [
    ("naiv.chunk_size=big", "there is no method 'naiv'"),
    ("naive.chunk_size=-5", "naive.chunk_size"),
    ("naive.no_such=1", "no setting 'no_such'"),
])
def test_every_set_is_validated_in_full(capsys, docs, tmp_path, fake_models, assignment, message):
    code, _, err = run(capsys, "index", str(docs), "--store", str(tmp_path / "s"), "--set", assignment)
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_supporting_titles_given_as_a_string_is_one_title(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Q?", "answers": ["A"], "supporting_titles": "Kesh Bridge"}) + "\n")
    assert load_questions(path)[0].supporting_titles == ["Kesh Bridge"]


def test_a_second_index_run_waits_for_the_first_and_then_updates_what_it_wrote(capsys, docs, tmp_path, fake_models):
    import threading

    from multihop_rag.indexing.persistence import store_lock

    store = tmp_path / "s"
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    (docs / "dunmere.txt").write_text("Dunmere is the largest port of Astrel.")
    finished: list[int] = []
    with store_lock(store):  # a first writer still at work
        second = threading.Thread(target=lambda: finished.append(cli.main(["index", str(docs), "--store", str(store)])))
        second.start()
        second.join(timeout=3)
        assert second.is_alive() and not finished  # it waits rather than writing beside the first
    second.join(timeout=60)
    assert finished == [0]
    out = capsys.readouterr()
    assert "waiting for it to finish" in out.err and "1 added" in out.out


def test_state_files_are_replaced_atomically(tmp_path, monkeypatch):
    import os

    from multihop_rag.indexing.persistence import write_atomic

    path = tmp_path / "state.json"
    write_atomic(path, "old")

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new, cut before the rename")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_an_update_keeps_the_stores_settings_and_refuses_to_change_them(capsys, docs, tmp_path, fake_models, monkeypatch):
    store = tmp_path / "s"
    assert run(capsys, "index", str(docs), "--store", str(store), "--set", "naive.similarity_top_k=3")[0] == 0
    method = registry.get("naive")
    seen = []
    original = type(method).load
    monkeypatch.setattr(type(method), "load", lambda self, folder, models, config: seen.append(config) or original(
        self, folder, models, config))
    (docs / "dunmere.txt").write_text("Dunmere is the largest port of Astrel.")
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    assert seen[-1].similarity_top_k == 3  # not the default 5
    code, _, err = run(capsys, "index", str(docs), "--store", str(store), "--set", "naive.similarity_top_k=4")
    assert code == 2 and "naive.similarity_top_k=4" in err and "--overwrite" in err
    # ask honours a --set naming the store's method
    assert run(capsys, "ask", "Which river?", "--store", str(store), "--set", "naive.similarity_top_k=2")[0] == 0
    assert seen[-1].similarity_top_k == 2


@pytest.mark.parametrize("damage", ["state", "manifest", "cache"])
def test_a_damaged_store_is_one_line_and_overwrite_always_starts_over(capsys, docs, tmp_path, fake_models, damage):
    store = tmp_path / "s"
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    if damage == "state":
        state = max((p for p in store.rglob("*.json") if p.name != "multihop_rag.json"), key=lambda p: p.stat().st_size)
        state.write_text(state.read_text()[: state.stat().st_size // 2])
    elif damage == "manifest":
        (store / "multihop_rag.json").write_text('{"method": "na')
    else:
        (store / "llm_calls.sqlite").write_bytes(b"not a database" * 100)
    if damage != "cache":  # the fakes take no cache: the real one is opened below
        code, _, err = run(capsys, "index", str(docs), "--store", str(store))
        assert code == 2 and "--overwrite" in err
        assert len([line for line in err.splitlines() if line.startswith("multihop-rag index:")]) == 1
        assert "Traceback" not in err
    assert run(capsys, "index", str(docs), "--store", str(store), "--overwrite")[0] == 0
    assert run(capsys, "ask", "Which river?", "--store", str(store))[0] == 0
    if damage == "cache":
        assert [p.name.split("-")[0] for p in store.glob("llm_calls.sqlite.damaged-*")] == ["llm_calls.sqlite.damaged"]


def test_a_command_closes_its_llm_call_cache_when_it_ends(capsys, docs, tmp_path, fake_models):
    store = tmp_path / "s"
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    # closing the last connection folds SQLite's write-ahead log into the file and removes it: nothing is left open
    # that a later close (at garbage collection) could write into the store behind another command's back
    assert (store / "llm_calls.sqlite").is_file() and not list(store.glob("llm_calls.sqlite-*"))


def test_a_damaged_llm_call_cache_is_named_with_its_fix(capsys, docs, tmp_path, monkeypatch):
    from multihop_rag.llm.cache import LLMCache

    store = tmp_path / "s"
    store.mkdir()
    (store / "llm_calls.sqlite").write_bytes(b"not a database" * 100)
    monkeypatch.setattr(cli, "_models", lambda args, cache=None: LLMCache(cache))
    code, _, err = run(capsys, "index", str(docs), "--store", str(store), "--llm", "llamacpp:x")
    assert code == 2 and "llm_calls.sqlite is damaged" in err and "delete it" in err


def test_overwrite_never_empties_a_folder_that_is_no_store(capsys, docs, tmp_path, fake_models):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    code, _, err = run(capsys, "index", str(docs), "--store", str(mine), "--overwrite")
    assert code == 2 and "not a multihop-rag store" in err and (mine / "notes.txt").read_text() == "my notes"


def test_an_update_that_would_remove_most_of_the_store_asks_first(capsys, docs, tmp_path, fake_models):
    store = tmp_path / "s"
    for name in ("dunmere", "caldor"):
        (docs / f"{name}.txt").write_text(f"{name.title()} is a town of Astrel on the Orrin River.")
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    narrow = tmp_path / "narrow"
    narrow.mkdir()
    (narrow / "kesh.txt").write_text((docs / "kesh.txt").read_text())
    code, _, err = run(capsys, "index", str(narrow), "--store", str(store))
    assert code == 2 and "would remove 3 of the store's 4 documents" in err and "--yes" in err
    code, out, _ = run(capsys, "index", str(narrow), "--store", str(store), "--yes")
    assert code == 0 and "3 removed" in out


@pytest.mark.parametrize("name", errors.__all__[1:])
def test_every_user_facing_error_derives_from_the_one_base_and_the_cli_prints_it_in_one_line(monkeypatch, capsys, name):
    error = getattr(errors, name)
    assert issubclass(error, errors.MultihopRagError)

    def fail(args):
        raise error(f"{name}: what to do about it")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: type("Args", (), {"command": "ask", "verbose": False, "run": staticmethod(fail)})())
    code, out, err = run(capsys, "ask")
    assert code == 2 and err == f"multihop-rag ask: {name}: what to do about it\n"


# --- issue 39 #1: an interrupted update leaves the last finished store --------------------------------


@pytest.mark.parametrize("method", ["naive", "sirerag", "k2rag", "garlic"])
def test_an_update_cut_by_ctrl_c_leaves_the_last_finished_store_and_the_next_run_finishes_it(
        capsys, docs, tmp_path, monkeypatch, method):
    """The issue's repro: a store of a few passages; an update that drops one and adds one, cut at its first LLM
    call (after it has started changing the store); ``ask`` still answers from the last finished index, and the
    next ``index`` makes the update."""
    cut = {"on": False}

    def reply(prompt: str) -> str:
        if cut["on"]:
            raise KeyboardInterrupt
        return "Orrin River"

    class CutEmbedding(HashEmbedding):  # naive's update calls no LLM: it is cut while embedding
        def _get_text_embedding(self, text: str) -> list[float]:
            if cut["on"]:
                raise KeyboardInterrupt
            return super()._get_text_embedding(text)

    monkeypatch.setattr(backends, "llama_index_llm", lambda spec=None, **k: ScriptedLLM(reply))
    monkeypatch.setattr(backends, "llama_index_embedding", lambda spec=None, **k: CutEmbedding())
    monkeypatch.setattr(backends, "chat_model", lambda spec=None, **k: ScriptedChatModel(reply))
    monkeypatch.setattr(backends, "langchain_embeddings", lambda spec=None, **k: HashEmbeddings())
    monkeypatch.setattr(backends, "ollama_models", lambda *a, **k: None)
    store = tmp_path / "s"
    (docs / "ferro.txt").write_text("Ferro Tower stands in Velmora beside the Kesh Bridge.")
    assert run(capsys, "index", str(docs), "--store", str(store), "--method", method, "--yes")[0] == 0
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file() and "llm_calls" not in p.name
              and not p.name.startswith(".")}
    (docs / "lake.txt").unlink()
    (docs / "dunmere.txt").write_text("Dunmere is the largest port of Astrel, on the Orrin River.")
    cut["on"] = True
    code, _, _ = run(capsys, "index", str(docs), "--store", str(store), "--yes")
    assert code == 130
    cut["on"] = False
    code, out, err = run(capsys, "ask", "Which river?", "--store", str(store))
    assert code == 0, err
    after = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file() and "llm_calls" not in p.name
             and not p.name.startswith(".")}
    assert after.keys() == before.keys()
    code, out, err = run(capsys, "index", str(docs), "--store", str(store), "--yes")
    assert code == 0 and "1 added" in out and "1 removed" in out, err
    assert run(capsys, "ask", "Which river?", "--store", str(store))[0] == 0


def test_an_update_killed_outright_is_undone_by_the_next_reader_and_read_from_its_copy_while_it_runs(tmp_path):
    """``kill -9`` runs no handler: the copy taken before the update is what the next reader or writer puts
    back; while the writer still holds the lock, a reader is given the copy (the last finished index)."""
    from multihop_rag.indexing.persistence import MANIFEST, settled_store, store_lock, undo_cut_update, undoable_update

    store = tmp_path / "s"
    (store / "chroma").mkdir(parents=True)
    (store / MANIFEST).write_text('{"method": "naive", "status": "done"}')
    (store / "state.json").write_text("finished")
    (store / "chroma" / "chroma.sqlite3").write_text("finished rows")
    (store / "llm_calls.sqlite").write_text("calls")
    update = undoable_update(store)
    with store_lock(store):
        update.__enter__()  # the update starts, and its process is killed half-way: no __exit__
        (store / "state.json").write_text("half")
        (store / "chroma" / "chroma.sqlite3").write_text("half the rows")
        (store / "new.npy").write_text("half")
        (store / "llm_calls.sqlite").write_text("calls and the update's calls")
        reading = settled_store(store)  # the writer still holds the lock: read its copy
        assert reading != store and (reading / "state.json").read_text() == "finished"
    assert settled_store(store) == store  # the lock is free: the cut update is undone first
    assert (store / "state.json").read_text() == "finished" and not (store / "new.npy").exists()
    assert (store / "chroma" / "chroma.sqlite3").read_text() == "finished rows"
    assert (store / "llm_calls.sqlite").read_text() == "calls and the update's calls"  # kept: they replay
    assert not undo_cut_update(store) and sorted(p.name for p in store.iterdir()) == sorted(
        [".multihop_rag.lock", MANIFEST, "chroma", "llm_calls.sqlite", "state.json"])


def test_eval_runs_naive_at_another_methods_reading_budget(capsys, tmp_path, fake_models):
    """Issue 43's fair control: ``naive@raptor`` reads as many tokens as RAPTOR's evidence held, after it."""
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "2", "--methods", "naive,raptor,naive@raptor",
                         "--out", str(out_dir))
    assert code == 0, err
    assert "| naive@raptor | 2 |" in out and "## Against naive at the same reading budget" in out
    rows = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    budget = {r["config"]["reader_tokens"] for r in rows if r["method"] == "naive@raptor"}
    assert len(budget) == 1 and budget.pop() >= 50
    code, _, err = run(capsys, "eval", "--dataset", "hotpotqa", "--methods", "naive@raptor,raptor", "--out", str(out_dir))
    assert code == 2 and "list raptor before it" in err
    code, _, err = run(capsys, "eval", "--dataset", "hotpotqa", "--methods", "raptor,resp@raptor", "--out", str(out_dir))
    assert code == 2 and "naive@raptor" in err


def test_a_fresh_checkout_replays_a_committed_call_cache_and_makes_no_call_it_finished(capsys, tmp_path, fake_models,
                                                                                      monkeypatch):
    """Issue 43: the run of record commits each folder's LLM-call cache, not its indexes. A clone holding only the
    committed files rebuilds and answers from the cache: no call that was finished is made again."""
    import shutil
    import sqlite3

    first = tmp_path / "machine-a"
    assert run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "2", "--methods", "naive,raptor", "--out", str(first))[0] == 0
    with sqlite3.connect(first / "llm_calls.sqlite") as db:  # what run_of_record.sh does before a commit
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    clone = tmp_path / "machine-b"
    clone.mkdir()
    shutil.copy(first / "llm_calls.sqlite", clone)  # a build cut before its results: only the cache was committed

    def no_call(prompt: str) -> str:
        raise AssertionError(f"a finished call was made again: {prompt[:80]}")

    monkeypatch.setattr(backends, "llama_index_llm", lambda spec=None, **k: ScriptedLLM(no_call))
    code, out, err = run(capsys, "eval", "--dataset", "hotpotqa", "--limit", "2", "--methods", "naive,raptor", "--out", str(clone))
    assert code == 0, err
    builds = json.loads((clone / "builds.json").read_text())
    assert builds["raptor"]["llm_calls"] == 0 and builds["raptor"]["cache_hits"] > 0
    assert "(2 of 2 calls cached)" in out


def test_every_index_state_file_is_written_through_write_atomic():
    """Issue 39 #6: no state file of a store is written with a plain ``write_text`` / ``np.save`` (a crash
    mid-write would leave half a file); binary state (GARLIC's embeddings) goes through the same rename."""
    import inspect

    import langchain_resp.method
    import langgraph_hirag.corpus
    import llama_index_garlic.graph
    import llama_index_garlic.index
    import llama_index_k2rag.hybrid
    import llama_index_k2rag.index
    import llama_index_sirerag.index
    from multihop_rag.indexing.persistence import write_atomic

    for module in (llama_index_garlic.graph, llama_index_garlic.index, llama_index_k2rag.hybrid, llama_index_k2rag.index,
                   llama_index_sirerag.index, langchain_resp.method, langgraph_hirag.corpus):
        source = inspect.getsource(module)
        assert ".write_text(" not in source and "np.save(folder" not in source and '.open("w")' not in source, module
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        write_atomic(Path(folder) / "e.npy", b"\x93NUMPY")
        assert (Path(folder) / "e.npy").read_bytes() == b"\x93NUMPY"


def test_a_read_only_store_is_queried_from_a_private_copy_and_left_untouched(capsys, docs, tmp_path, fake_models,
                                                                           monkeypatch):
    """Issue 39 #6: Chroma writes to its database to open it, so a read-only store (a read-only mount; checked by
    hand on one, with the 0.5B) is read from a private copy, removed afterwards."""
    import gc
    import os

    store = tmp_path / "s"
    assert run(capsys, "index", str(docs), "--store", str(store))[0] == 0
    gc.collect()  # the index command's LLM-call cache closes (its write-ahead log folded in) before the snapshot
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()}
    writable = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **k: False if Path(path) == store else writable(path, mode, **k))
    code, out, err = run(capsys, "ask", "Which river?", "--store", str(store))
    assert code == 0 and "A: Orrin River" in out, err
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()} == before


def test_an_atomic_write_keeps_the_permissions_a_plain_write_would_give(tmp_path):
    from multihop_rag.indexing.persistence import write_atomic

    plain, atomic = tmp_path / "plain.json", tmp_path / "atomic.json"
    plain.write_text("{}")
    write_atomic(atomic, "{}")
    assert atomic.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.json", "plain.json"]


def test_the_demo_answers_the_first_limit_questions_with_each_method(capsys, fake_models, tmp_path):
    code, out, err = run(capsys, "demo", "--limit", "1", "--quiet", "--store", str(tmp_path / "demo"))
    assert code == 0, err
    assert out.count("Q: ") == 3 and "| naive | 1/1 |" in out and "| resp |" in out and "| hirag |" in out
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["demo", "--limit", "0"])
