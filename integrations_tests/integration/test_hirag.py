"""HiRAG end to end on the 2Wiki smoke corpus: real BM25 over titles, real MiniLM embeddings in a
persistent Chroma reloaded from disk, the embedded llama.cpp models, real LangGraph; LangChain's
standard retriever suite on ``HiRAGRetriever``."""

from __future__ import annotations

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langgraph_hirag import HierarchicalCorpus, HiRAGRetriever, build_hirag_graph
from langgraph_hirag.replies import names_example_entity
from multihop_rag.backends import chat_model
from multihop_rag.corpus import load_dataset
from multihop_rag.serving import bundled


@pytest.fixture(scope="session")
def wiki(tmp_path_factory, models):
    """The 2Wiki smoke corpus built into a Chroma folder and loaded back from it."""
    passages, questions = load_dataset("2wikimultihopqa", "smoke")
    folder = tmp_path_factory.mktemp("hirag")
    HierarchicalCorpus.from_documents(passages, models.lc_embed, persist_dir=folder, show_progress=False)
    return HierarchicalCorpus.from_persist_dir(folder, models.lc_embed), questions


def test_titles_and_chunks_are_found_on_the_reloaded_corpus(wiki):
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
    triples = [(s, r, o) for q in questions[:4] for s, r, o in q.meta["evidences"] if r in ("father", "director")]
    found = []
    for subject, relation, obj in triples[:3]:
        docs = retriever.invoke(f"Who is the {relation} of {subject}?")
        assert len(docs) <= 1
        found.append(bool(docs) and obj.lower() in docs[0].page_content.lower())
    assert any(found), triples[:3]


_WIKI: dict = {}


class TestHiRAGRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever suite. HiRAG's retriever returns the one chunk its verifier
    accepted, or none (§4.2): it takes no ``k``, so the two k tests are expected to fail."""

    @pytest.fixture(autouse=True)
    def _corpus(self, wiki, lc_chat):
        _WIKI.update(corpus=wiki[0], llm=lc_chat)

    @property
    def retriever_constructor(self):
        class WikiRetriever(HiRAGRetriever):
            def __init__(self, **kwargs):
                super().__init__(llm=_WIKI["llm"], corpus=_WIKI["corpus"], **kwargs)

        return WikiRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {}

    @property
    def retriever_query_example(self) -> str:
        return "Who is the father of Vsevolod Gantmakher?"

    @pytest.mark.xfail(reason="HiRAG returns the one verified chunk, or none: no k", strict=True)
    def test_k_constructor_param(self) -> None:
        super().test_k_constructor_param()

    @pytest.mark.xfail(reason="HiRAG returns the one verified chunk, or none: no k", strict=True)
    def test_invoke_with_k_kwarg(self, retriever) -> None:
        super().test_invoke_with_k_kwarg(retriever)


def test_the_fast_model_retrieves_evidence_for_each_of_three_smoke_questions(wiki, lc_chat):
    """Issue 22: the decomposer asks a first sub-question, so every question is answered from evidence
    (the old graph stopped on its first turn and retrieved nothing on the small model)."""
    corpus, questions = wiki
    titles = {d.title for d in corpus.documents}
    graph = build_hirag_graph(lc_chat, corpus)
    found_gold = 0
    for question in questions[:3]:
        state = graph.invoke({"question": question.question})
        tried = {a["title"] for t in state["trace"] for a in t["attempts"]}
        rewritten = [h for t in state["trace"] for h in t.get("rewrite_hits", [])]  # evidence of a rewrite's search
        assert state["sub_questions"] and (tried or rewritten) and tried <= titles, (question.question, state["trace"])
        assert not any(names_example_entity(q, " ".join([question.question, *state["sub_answers"]])) for q in state["sub_questions"])
        found_gold += bool(tried & set(question.supporting_titles))
    assert found_gold >= 1


@pytest.mark.slow
def test_full_graph_answers_a_two_hop_question_with_the_default_model(wiki):
    corpus, questions = wiki
    question = questions[2]  # the place of birth of Vsevolod Gantmakher's father
    llm = chat_model(f"llamacpp:{bundled.DEFAULT_LLM_ALIAS}", max_tokens=256)
    state = build_hirag_graph(llm, corpus).invoke({"question": question.question})
    assert state["answer"]
    assert 1 <= len(state["sub_questions"]) <= 5 and len(state["sub_answers"]) == len(state["sub_questions"])
    tried = {a["title"] for t in state["trace"] for a in t["attempts"]}
    assert tried <= {d.title for d in corpus.documents}
    assert tried & set(question.supporting_titles), state["trace"]
