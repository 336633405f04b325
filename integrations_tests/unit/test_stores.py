"""Chroma stores named by a folder, a server URL or nothing (multihop_rag.stores)."""

import pytest

from multihop_rag.stores import batched, chroma_client, chroma_collection


def test_a_relative_folder_is_the_folder_under_the_current_directory(tmp_path, monkeypatch):
    """Chroma keeps one client per path string: "./store" opened from a second directory reached the first
    directory's database (a notebook that changes directory; the docs examples run one after another)."""
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        collection = chroma_collection(chroma_client("./store"), "demo")
        collection.add(ids=[name], embeddings=[[1.0, 0.0]])
        assert collection.get()["ids"] == [name]
        assert (tmp_path / name / "store" / "chroma.sqlite3").exists()


@pytest.mark.parametrize("where", ["folder", "outside"])
def test_a_naive_update_cut_half_way_is_undone_in_the_folder_and_in_a_store_outside_it(tmp_path, monkeypatch, where):
    """Issue 39: ``NaiveRAG.update`` through the Python API wrote its store as it went and the folder at the end: cut
    half-way, ``load`` refused the folder ("rebuild it"); with the store outside the folder (a Chroma server) the
    store kept the cut update's chunks."""
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from integrations_tests.fakes import HashEmbedding, ScriptedLLM
    from multihop_rag.app.naive import NaiveRAG
    from multihop_rag.corpus import Passage
    from multihop_rag.stores import chroma_vector_store, stored_ids

    llm = ScriptedLLM(lambda prompt: "Orrin River")
    passages = [Passage(f"p{i}", f"T{i}", f"Passage {i} says the Orrin River is long.") for i in range(6)]
    add = ChromaVectorStore.add

    def cut_once_written(self, nodes, **kwargs):
        add(self, nodes, **kwargs)
        raise KeyboardInterrupt

    folder, elsewhere = tmp_path / "idx", tmp_path / "elsewhere"

    def store():
        return {"vector_store": chroma_vector_store(elsewhere, "naive")} if where == "outside" else {}

    NaiveRAG.build(passages[:4], llm=llm, embed_model=HashEmbedding(), folder=folder, show_progress=False, **store())
    rag = NaiveRAG.load(folder, llm=llm, embed_model=HashEmbedding(), **store())
    before = stored_ids(rag.index.vector_store)
    with monkeypatch.context() as patch:
        patch.setattr(ChromaVectorStore, "add", cut_once_written)
        with pytest.raises(KeyboardInterrupt):
            rag.update(passages[1:])  # removes p0, adds p4 and p5
    again = NaiveRAG.load(folder, llm=llm, embed_model=HashEmbedding(), **store())
    assert stored_ids(again.index.vector_store) == before and len(again) == 4
    assert again.update(passages[1:]).added == ["p4", "p5"]


def test_store_requests_are_sent_in_consecutive_slices_that_cover_every_item_once():
    assert [list(part) for part in batched(list(range(7)), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 3)) == []
    assert [list(part) for part in batched(range(2048))] == [list(range(1024)), list(range(1024, 2048))]
