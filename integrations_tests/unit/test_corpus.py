import json

import pytest

from multihop_rag.corpus import LoadReport, data_dir, load_dataset, load_documents
from multihop_rag.errors import CorpusError


def test_folder_of_text_and_markdown(tmp_path):
    (tmp_path / "a.txt").write_text("Velmora lies on the Orrin.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# Kesh Bridge\nA stone bridge.")
    (tmp_path / "empty.txt").write_text("  ")
    (tmp_path / "blob.txt").write_bytes(b"\xff\xfe\x00\x01binary")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    report = LoadReport()
    passages = load_documents(tmp_path, report)
    assert [(p.id, p.title) for p in passages] == [("a.txt", "a"), ("sub/b.md", "Kesh Bridge")]
    assert {why.split(" ")[0] for _, why in report.skipped} == {"empty", "not", "unsupported"}
    assert report.loaded == 2


def test_jsonl_with_bad_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        json.dumps({"id": "x1", "title": "T", "text": "body"}) + "\n{broken\n[1]\n" + json.dumps({"title": "no text"}) + "\n"
    )
    report = LoadReport()
    passages = load_documents(path, report)
    assert [p.id for p in passages] == ["x1"]
    assert len(report.skipped) == 3


def test_empty_or_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="no readable"):
        load_documents(tmp_path)
    (tmp_path / "only.bin").write_bytes(b"\x00\x01")
    with pytest.raises(CorpusError, match="1 skipped"):
        load_documents(tmp_path)
    with pytest.raises(CorpusError, match="does not exist"):
        load_documents(tmp_path / "nope")


def test_passages_convert_to_both_frameworks(tmp_path):
    (tmp_path / "a.txt").write_text("text")
    p = load_documents(tmp_path)[0]
    assert p.to_llama_index().id_ == "a.txt" and p.to_llama_index().metadata["title"] == "a"
    assert p.to_langchain().id == "a.txt" and p.to_langchain().page_content == "text"


def test_shared_datasets_load():
    passages, questions = load_dataset("musique", "smoke")
    assert len(passages) == 187 and len(questions) == 10
    ids = {p.id for p in passages}
    assert all(s in ids for q in questions for s in q.supporting)
    assert questions[0].answers and questions[0].hops >= 2


def test_dataset_without_corpus_and_bad_names(tmp_path, monkeypatch):
    passages, questions = load_dataset("bamboogle", "smoke")
    assert passages == [] and len(questions) == 10
    with pytest.raises(CorpusError, match="unknown dataset"):
        load_dataset("squad")
    with pytest.raises(CorpusError, match="split"):
        load_dataset("musique", "test")
    monkeypatch.setenv("MULTIHOP_RAG_DATA", str(tmp_path / "missing"))
    with pytest.raises(CorpusError, match="does not exist"):
        data_dir()


def test_pooled_corpus_holds_every_candidate_of_the_first_questions():
    from multihop_rag.corpus import load_pooled

    passages, questions = load_pooled("hotpotqa", 30)
    ids = {p.id for p in passages}
    assert len(questions) == 30
    assert all(c in ids for q in questions for c in q.candidates)
    assert 250 <= len(passages) <= 300
