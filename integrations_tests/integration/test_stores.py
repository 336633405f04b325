"""A real Chroma server (``chroma run``) as the vector store of a LlamaIndex index (naive, GARLIC) and of a
LangGraph method's corpus (HiRAG), with real MiniLM embeddings; an update cut half-way is undone on the server
too; a server that does not answer is one line saying how to start one."""

import socket

import pytest

from integrations_tests.integration.conftest import tiny_corpus
from langgraph_hirag import HierarchicalCorpus
from llama_index_garlic import GarlicIndex
from multihop_rag.app.naive import NaiveRAG
from multihop_rag.errors import IndexFolderError, StoreError
from multihop_rag.stores import chroma_client, chroma_vector_store, langchain_chroma


def test_naive_index_on_a_chroma_server_reloads_and_updates(chroma_server, models, tmp_path):
    corpus, extra, question = tiny_corpus(extra=1)
    store = chroma_vector_store(chroma_server, "naive")
    NaiveRAG.build(corpus, llm=models.llm, embed_model=models.embed, vector_store=store, folder=tmp_path, show_progress=False)
    assert chroma_client(chroma_server).get_collection("naive").count() == len(corpus)
    again = NaiveRAG.load(tmp_path, llm=models.llm, embed_model=models.embed, vector_store=chroma_vector_store(chroma_server, "naive"))
    report = again.update(corpus + extra)
    assert report.added == [extra[0].id] and chroma_client(chroma_server).get_collection("naive").count() == len(corpus) + 1
    answer = again.answer(question.question)
    assert answer.text and set(question.supporting) & {e.passage_ids[0] for e in answer.evidence}
    with pytest.raises(StoreError, match="holds"):  # a store with another build is refused, not mixed
        NaiveRAG.build(corpus, llm=models.llm, embed_model=models.embed, vector_store=chroma_vector_store(chroma_server, "naive"),
                       show_progress=False)


def test_an_update_cut_half_way_is_undone_on_the_chroma_server(chroma_server, models, tmp_path, monkeypatch):
    """Issue 39: an update that dies while it writes the server's collection leaves server and folder as they were
    before it; a reload without the server's store says to pass it."""
    from llama_index.vector_stores.chroma import ChromaVectorStore

    corpus, extra, _ = tiny_corpus(extra=1)
    docs = [p.to_llama_index() for p in corpus + extra]
    index = GarlicIndex.from_documents(docs[:-1], llm=models.llm, embed_model=models.embed,  # embedding mode
                                       vector_store=chroma_vector_store(chroma_server, "garlic"), persist_dir=tmp_path,
                                       show_progress=False)
    before = set(chroma_client(chroma_server).get_collection("garlic").get(include=[])["ids"])
    assert before == {n.id for n in index.graph.nodes}
    add = ChromaVectorStore.add

    def cut_once_written(self, nodes, **kwargs):
        add(self, nodes, **kwargs)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(ChromaVectorStore, "add", cut_once_written)
        with pytest.raises(KeyboardInterrupt):
            index.insert(docs[-1])
    assert set(chroma_client(chroma_server).get_collection("garlic").get(include=[])["ids"]) == before
    with pytest.raises(IndexFolderError, match="vector_store="):
        GarlicIndex.from_persist_dir(tmp_path, llm=models.llm, embed_model=models.embed)
    again = GarlicIndex.from_persist_dir(tmp_path, llm=models.llm, embed_model=models.embed,
                                         vector_store=chroma_vector_store(chroma_server, "garlic"))
    assert {n.id for n in again.graph.nodes} == before and set(again.documents) == {d.doc_id for d in docs[:-1]}


def test_hirag_corpus_on_a_chroma_server(chroma_server, models, tmp_path):
    corpus, _, question = tiny_corpus()
    store = langchain_chroma(chroma_server, "hirag", models.lc_embed)
    HierarchicalCorpus.from_documents(corpus, models.lc_embed, vector_store=store, persist_dir=tmp_path, show_progress=False)
    reloaded = HierarchicalCorpus.from_persist_dir(tmp_path, models.lc_embed, vector_store=langchain_chroma(chroma_server, "hirag", models.lc_embed))
    title = next(p.title for p in corpus if p.id in question.supporting)
    assert reloaded.rank_titles(title)[0][0] == title and reloaded.rank_chunks(title, question.question)


def test_a_hirag_corpus_update_cut_half_way_is_undone_on_the_chroma_server(chroma_server, models, tmp_path, monkeypatch):
    """Issue 39: the corpus wrote the server at once and its folder only on a later persist; an update cut in between
    left them apart for good. Now both go back, and a finished update is persisted."""
    from langchain_chroma import Chroma

    corpus, extra, _ = tiny_corpus(extra=1)
    built = HierarchicalCorpus.from_documents(corpus, models.lc_embed, vector_store=langchain_chroma(chroma_server, "hirag-cut", models.lc_embed),
                                              persist_dir=tmp_path, show_progress=False)
    before = set(chroma_client(chroma_server).get_collection("hirag-cut").get(include=[])["ids"])
    add = Chroma.add_texts

    def cut_once_written(self, *args, **kwargs):
        add(self, *args, **kwargs)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Chroma, "add_texts", cut_once_written)
        with pytest.raises(KeyboardInterrupt):
            built.update(corpus[1:] + extra)  # one title removed, one added
    assert set(chroma_client(chroma_server).get_collection("hirag-cut").get(include=[])["ids"]) == before
    again = HierarchicalCorpus.from_persist_dir(tmp_path, models.lc_embed, vector_store=langchain_chroma(chroma_server, "hirag-cut", models.lc_embed))
    assert set(again.chunk_ids) == before
    again.update(corpus[1:] + extra)
    after = HierarchicalCorpus.from_persist_dir(tmp_path, models.lc_embed, vector_store=langchain_chroma(chroma_server, "hirag-cut", models.lc_embed))
    assert after.chunk_ids == again.chunk_ids and extra[0].title in [d.title for d in after.documents]


def test_a_server_that_does_not_answer_says_how_to_start_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError, match="chroma run"):
        chroma_client(f"http://127.0.0.1:{port}").heartbeat()
