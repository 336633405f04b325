"""Chroma stores named by a folder, a server URL or nothing (multihop_rag.stores)."""

from multihop_rag.stores import chroma_client, chroma_collection


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
