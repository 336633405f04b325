"""HiRAG end to end on the 2Wiki smoke corpus: real BM25 over titles, real MiniLM embeddings in a
persistent Chroma, the embedded llama.cpp models, real LangGraph."""

from __future__ import annotations

import pytest

from langgraph_hirag import HierarchicalCorpus, HiRAGRetriever, build_hirag_graph
from multihop_rag import bundled
from multihop_rag.backends import chat_model, langchain_embeddings
from multihop_rag.corpus import load_dataset


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    """The 2Wiki smoke corpus built, persisted with Chroma, and loaded back from disk."""
    passages, questions = load_dataset("2wikimultihopqa", "smoke")
    embeddings = langchain_embeddings("st:default")
    folder = tmp_path_factory.mktemp("hirag")
    HierarchicalCorpus.from_documents(passages, embeddings, show_progress=False).persist(folder)
    return HierarchicalCorpus.load(folder, embeddings), questions


def test_titles_and_chunks_are_found_on_the_real_corpus(wiki):
    corpus, questions = wiki
    titles = {d.title for d in corpus.documents}
    gold = [t for q in questions for t in q.supporting_titles if t in titles]
    assert len(gold) >= 20
    # BM25 over titles puts the gold document first for its own name (eq. 3).
    assert sum(corpus.rank_titles(t)[0][0] == t for t in gold) >= 0.9 * len(gold)
    # Dense ranking stays inside the document (eq. 5).
    chunks = corpus.rank_chunks("Felix Gantmacher", "Where was Felix Gantmacher born?")
    assert chunks and {c.metadata["title"] for c in chunks} == {"Felix Gantmacher"}


def test_plug_in_retriever_verifies_gold_single_hop_questions(wiki, lc_chat):
    """§6.5: gold single-hop sub-questions from 2Wiki's evidence triples."""
    corpus, questions = wiki
    retriever = HiRAGRetriever(llm=lc_chat, corpus=corpus)
    triples = [(s, r, o) for q in questions[:4] for s, r, o in q.meta["evidences"] if r == "father" or r == "director"]
    found = []
    for subject, relation, obj in triples[:3]:
        docs = retriever.invoke(f"Who is the {relation} of {subject}?")
        assert len(docs) <= 1
        found.append(bool(docs) and obj.lower() in docs[0].page_content.lower())
    assert any(found), triples[:3]


def test_full_graph_answers_a_two_hop_question_with_the_default_model(wiki):
    corpus, questions = wiki
    question = questions[2]  # What is the place of birth of Vsevolod Gantmakher's father? -> Odessa
    llm = chat_model(f"llamacpp:{bundled.DEFAULT_LLM_ALIAS}", max_tokens=256)
    state = build_hirag_graph(llm, corpus).invoke({"question": question.question})
    assert state["answer"]
    assert 1 <= len(state["sub_questions"]) <= 5 and len(state["sub_answers"]) == len(state["sub_questions"])
    assert state["stop_reason"] in {"enough", "repeated_sub_question", "max_subquestions", "no_sub_question"}
    tried = {a["title"] for t in state["trace"] for a in t["attempts"]}
    assert tried <= {d.title for d in corpus.documents}
    assert all(len(t["attempts"]) <= 4 for t in state["trace"])
    # The hierarchical retriever reaches a gold document of the question.
    assert tried & set(question.supporting_titles), state["trace"]
    assert state["llm_calls"] >= 2 * len(state["sub_questions"]) + 2
