"""K²RAG: eq. (1) chunking, eq. (4) hybrid scores, Algorithm 2's sub-question loop, summarizers,
naive pipelines and persistence, with deterministic fakes."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document, TextNode

from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from llama_index_k2rag import (
    HybridRetriever,
    K2RAGConfig,
    K2RAGIndex,
    LLMSummarizer,
    NoSummarizer,
    PropertyGraphKG,
    Seq2SeqSummarizer,
    SparseStore,
    hybrid_score,
    make_summarizer,
    prompts,
)
from multihop_rag.errors import CorpusError, StoreError
from multihop_rag.indexing.text import chunk_tokens, count_tokens, eq1_chunk_count
from multihop_rag.stores import chroma_client, chroma_vector_store, stored_ids

DOCS = [
    Document(id_="kesh", text="The Kesh Bridge was designed by Tomas Halvard.", metadata={"title": "Kesh Bridge"}),
    Document(id_="halvard", text="Tomas Halvard was born in Dunmere.", metadata={"title": "Tomas Halvard"}),
    Document(id_="dunmere", text="Dunmere is a port on the Sable River.", metadata={"title": "Dunmere"}),
]


class FakeKG:
    """A knowledge graph whose answer is fixed."""

    name = "fake"

    def __init__(self, answer: str):
        self.answer = answer
        self.questions: list[str] = []

    def query(self, question: str) -> str:
        self.questions.append(question)
        return self.answer

    def context(self, question: str) -> str:
        self.questions.append(question)
        return f"Kesh Bridge -> designed by -> Tomas Halvard\nThe Kesh Bridge was designed by Tomas Halvard. ({self.answer})"

    def persist(self, folder) -> None:
        pass


class FixedEmbedding(BaseEmbedding):
    """Embeds known texts to given vectors."""

    vectors: dict[str, list[float]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.vectors[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.vectors[text]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self.vectors[query]


def respond(prompt: str) -> str:
    if prompt.startswith("Instruction: Your task is to create a small question"):
        return "Where was Tomas Halvard born?\nextra line"
    if prompt.startswith("Additional Information:"):
        return "Dunmere"
    if prompt.startswith("Summarize the text below"):
        return "A summary."
    raise AssertionError(prompt[:60])


PAPER = K2RAGConfig(kg_step="answer", retrieve_for_question=False)
"""Algorithm 2 as printed: the graph's answer to step B, sub-questions only from it."""


def build(llm=None, **kwargs) -> K2RAGIndex:
    kwargs.setdefault("summarizer", "none")
    kwargs.setdefault("kg", None)
    return K2RAGIndex.from_documents(
        DOCS, llm=llm or ScriptedLLM(respond), embed_model=HashEmbedding(dim=256), show_progress=False, **kwargs
    )


# --- eq. (1) and the summarizer switch ------------------------------------------------------------


def test_chunks_follow_eq1():
    words = " ".join(f"w{i}" for i in range(2000))
    n = count_tokens(words)
    doc = Document(id_="long", text=words)
    config = K2RAGConfig()
    index = K2RAGIndex.from_documents(
        [doc], llm=ScriptedLLM(respond), embed_model=HashEmbedding(), summarizer="none", kg=None,
        show_progress=False,
    )  # fmt: skip
    full = eq1_chunk_count(n, config.chunk_size, config.chunk_overlap)
    tail = (n - config.chunk_overlap) % (config.chunk_size - config.chunk_overlap) != 0
    assert index.stats()["chunks"] == full + tail
    lengths = [count_tokens(node.get_content()) for node in index.sparse.nodes]
    assert all(abs(x - config.chunk_size) <= 2 for x in lengths[:full])


def test_summarizer_switch(tmp_path):
    llm = ScriptedLLM(respond)
    assert isinstance(make_summarizer("none", llm), NoSummarizer)
    assert isinstance(make_summarizer(None, llm), NoSummarizer)
    assert isinstance(make_summarizer("llm", llm), LLMSummarizer)
    with pytest.raises(FileNotFoundError, match="seq2seq summarization model"):
        make_summarizer(tmp_path / "missing", llm)
    assert isinstance(make_summarizer(tmp_path, llm), Seq2SeqSummarizer)
    custom = NoSummarizer(name="mine")
    assert make_summarizer(custom, llm) is custom


def test_llm_summarizer_skips_short_texts_and_summarizes_long_ones():
    llm = ScriptedLLM(respond)
    summarizer = LLMSummarizer(llm, min_tokens=20)
    assert summarizer.summarize("Short text.") == "Short text."
    assert summarizer.summarize("word " * 50) == "A summary."
    assert len(llm.prompts) == 1


def test_a_summary_can_be_asked_for_within_a_share_of_its_text():
    text = "Tomas Halvard designed the Kesh Bridge over the Sable River in 1843. " * 10
    llm = ScriptedLLM(respond)
    assert LLMSummarizer(llm, min_tokens=20, max_share=0.25).summarize(text) == "A summary."
    asked = round(count_tokens(text) * 0.25)
    assert f"at most {round(asked * 0.75)} words" in llm.prompts[0]
    assert llm.calls_kwargs[0]["max_tokens"] == round(asked * 1.5)
    LLMSummarizer(llm, min_tokens=20).summarize(text)  # the default asks for a few sentences, up to 512 tokens
    assert "at most" not in llm.prompts[1] and llm.calls_kwargs[1]["max_tokens"] == 512


def test_summary_share_is_kept_with_the_index_and_sizes_the_estimate(tmp_path):
    from llama_index_k2rag.estimate import estimate
    from multihop_rag.corpus import Passage

    long_doc = Document(id_="long", text="Tomas Halvard built bridges in Dunmere. " * 40, metadata={"title": "Halvard"})
    config = K2RAGConfig(min_summary_tokens=100, summary_share=0.2)
    llm = ScriptedLLM(respond)
    K2RAGIndex.from_documents([*DOCS, long_doc], llm=llm, embed_model=HashEmbedding(), kg=None, config=config,
                              persist_dir=str(tmp_path), show_progress=False)
    assert [p for p in llm.prompts if "at most" in p]
    reloaded = K2RAGIndex.from_persist_dir(str(tmp_path), llm=ScriptedLLM(respond), embed_model=HashEmbedding())
    assert reloaded.config.summary_share == 0.2
    passages = [Passage(id="long", title="Halvard", text=long_doc.text)]
    shares = {share: estimate(passages, K2RAGConfig(min_summary_tokens=100, summary_share=share), summarize=True).stages[0]
              for share in (0.2, None)}
    assert shares[0.2].completion_tokens == round(count_tokens(long_doc.text) * 0.2)
    assert shares[0.2].completion_tokens < shares[None].completion_tokens


def test_index_uses_the_summaries():
    long_doc = Document(id_="long", text="Tomas Halvard built bridges. " * 40, metadata={"title": "Halvard"})
    index = K2RAGIndex.from_documents(
        [*DOCS, long_doc], llm=ScriptedLLM(respond), embed_model=HashEmbedding(), kg=None,
        config=K2RAGConfig(min_summary_tokens=100), show_progress=False,
    )  # fmt: skip
    by_id = {s["id"]: s["summary"] for s in index.summaries}
    assert by_id["long"] == "A summary." and by_id["kesh"] == DOCS[0].text
    stats = index.stats()
    assert stats["summarizer"] == "llm" and stats["tokens_after"] < stats["tokens_before"] and stats["reduction"] > 0.5
    assert "A summary." in [n.get_content() for n in index.sparse.nodes]


def test_a_summarys_evidence_names_the_passage_it_was_written_from():
    """Issue 43: a summarized chunk was attributed to no passage, so its evidence never counted."""
    from llama_index.core.schema import NodeWithScore

    from llama_index_k2rag.method import evidence

    long_doc = Document(id_="long", text="Tomas Halvard built bridges. " * 40, metadata={"title": "Halvard", "passage_id": "p-long"})
    index = K2RAGIndex.from_documents(
        [*DOCS, long_doc], llm=ScriptedLLM(respond), embed_model=HashEmbedding(), kg=None,
        config=K2RAGConfig(min_summary_tokens=100), show_progress=False,
    )  # fmt: skip
    units = {u.text: u for u in evidence([NodeWithScore(node=n, score=1.0) for n in index.sparse.nodes])}
    summary = units["A summary."]
    assert (summary.kind, summary.passage_ids, summary.source_ids) == ("summary", [], ["p-long"])
    chunk = next(u for u in units.values() if u.kind == "chunk")
    assert chunk.passage_ids and chunk.source_ids == []


def test_empty_corpus_is_refused():
    with pytest.raises(CorpusError):
        K2RAGIndex.from_documents([Document(text=" ")], llm=ScriptedLLM(respond), embed_model=HashEmbedding())


# --- eq. (4) ---------------------------------------------------------------------------------------


def _dense(nodes, embed, store=None):
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=embed)


def test_hybrid_score_formula_with_fixed_vectors():
    texts = ["alpha beta", "beta gamma", "delta"]
    vectors = {"alpha beta": [1.0, 0.0], "beta gamma": [0.6, 0.8], "delta": [0.0, 1.0], "alpha": [1.0, 0.0]}
    nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(texts)]
    for node in nodes:
        node.embedding = vectors[node.text]
    embed = FixedEmbedding(vectors=vectors)
    dense = _dense(nodes, embed, chroma_vector_store(None, f"hybrid-test-{uuid.uuid4().hex[:8]}"))
    sparse = SparseStore.from_nodes(nodes)
    sparse_cos = sparse.cosines("alpha")
    assert sparse_cos[0] > 0 and sparse_cos[1] == 0 and sparse_cos[2] == 0
    for alpha in (0.0, 0.8, 1.0):
        retriever = HybridRetriever(dense, sparse, embed, alpha=alpha, similarity_top_k=3)
        hits = {h.node.node_id: h.score for h in retriever.retrieve("alpha")}
        dense_cos = {"n0": 1.0, "n1": 0.6, "n2": 0.0}
        for node_id, score in hits.items():
            i = int(node_id[1])
            assert score == pytest.approx(alpha * dense_cos[node_id] + (1 - alpha) * sparse_cos[i], abs=1e-5)
        if alpha == 0.0:
            assert list(hits) == ["n0"]  # keyword search: only chunks sharing a term
        else:
            assert list(hits)[0] == "n0" and set(hits) == {"n0", "n1", "n2"}
    assert hybrid_score(1.0, 0.5, 0.8) == pytest.approx(0.9)


@pytest.mark.parametrize("space", ["l2", "cosine", "ip", "simple"])
def test_dense_scores_are_true_cosines_in_every_distance_space(space):
    """Issue 21: cosine was read as 1 - distance, wrong on Chroma's default l2 space (scores of 0.061
    and -1.0 instead of 0.53 and 0.0). Vectors of other norms than 1 make the spaces disagree."""
    vectors = {"first node": [3.0, 4.0], "second node": [0.0, 2.0], "query": [2.0, 0.0]}
    nodes = [TextNode(id_=k.split()[0], text=k, embedding=v) for k, v in vectors.items() if k != "query"]
    embed = FixedEmbedding(vectors=vectors)
    if space == "simple":
        store = None
    else:
        collection = chroma_client(None).get_or_create_collection(
            f"space-{space}-{uuid.uuid4().hex[:6]}", embedding_function=None, metadata={"hnsw:space": space}
        )
        from llama_index.vector_stores.chroma import ChromaVectorStore

        store = ChromaVectorStore(chroma_collection=collection)
    retriever = HybridRetriever(_dense(nodes, embed, store), SparseStore.from_nodes(nodes), embed, alpha=1.0)
    scores = {h.node.node_id: h.score for h in retriever.retrieve("query")}
    assert scores == pytest.approx({"first": 0.6, "second": 0.0}, abs=1e-6)


def test_sparse_cosine_is_a_cosine():
    nodes = [TextNode(id_=str(i), text=t) for i, t in enumerate(["cat sat mat", "dog sat", "zebra"])]
    cos = SparseStore.from_nodes(nodes).cosines("zebra")
    assert cos.tolist() == pytest.approx([0.0, 0.0, 1.0])
    assert SparseStore.from_nodes(nodes).cosines("unknown words").tolist() == [0.0, 0.0, 0.0]


def test_a_wrong_alpha_is_refused():
    index = build()
    with pytest.raises(ValueError, match="alpha"):
        index.as_retriever(alpha=1.5)


# --- Algorithm 2 and the naive pipelines -----------------------------------------------------------


def test_sub_question_loop_runs_once_per_kg_chunk():
    kg_answer = " ".join(f"fact{i}" for i in range(300))
    n_chunks = len(chunk_tokens(kg_answer, 128, 10))
    assert n_chunks >= 3
    llm = ScriptedLLM(respond)
    kg = FakeKG(kg_answer)
    index = build(llm=llm, kg=kg, config=PAPER)
    response = index.as_query_engine().query("Where was the designer of the Kesh Bridge born?")
    meta = response.metadata
    assert kg.questions == ["Where was the designer of the Kesh Bridge born?"]
    assert meta["kg_summary"] == kg_answer  # summarizer "none"
    assert len(meta["sub_questions"]) == n_chunks and len(meta["sub_answers"]) == n_chunks
    assert meta["sub_questions"][0] == "Where was Tomas Halvard born?"
    sub_prompts = [p for p in llm.prompts if p.startswith("Instruction: Your task")]
    assert len(sub_prompts) == n_chunks
    answers = [p for p in llm.prompts if p.startswith("Additional Information:")]
    assert len(answers) == n_chunks + 1
    assert answers[-1].rstrip().endswith("Question: Where was the designer of the Kesh Bridge born? Short Answer:")
    assert str(response) == "Dunmere"
    assert response.source_nodes and set(meta["timings"]) == {"kg", "summarize_kg", "sub_questions", "answer"}


def test_a_served_models_slots_work_on_the_sub_questions_at_once_and_keep_their_order():
    """Steps C-D of one KG chunk do not wait for another's: with a slot for each chunk, every chunk's sub-question
    is written at once (each call waits until all are in flight), and they come back in the chunks' order."""
    import threading

    kg_answer = " ".join(f"fact{i}" for i in range(300))
    chunks = chunk_tokens(kg_answer, 128, 10)
    assert len(chunks) >= 3
    all_in_flight = threading.Barrier(len(chunks), timeout=10)

    def script(prompt: str) -> str:
        if prompt.startswith("Instruction: Your task is to create a small question"):
            all_in_flight.wait()  # one call at a time never gets past this
            first_fact = next(word for word in prompt.split() if word.startswith("fact"))
            return f"What is {first_fact}?"
        return respond(prompt)

    index = build(llm=ScriptedLLM(script), kg=FakeKG(kg_answer), config=PAPER, max_concurrency=len(chunks))
    response = index.as_query_engine().query("Where was the designer of the Kesh Bridge born?")
    expected = [f"What is {chunk.split()[0]}?" for chunk in chunks]
    assert response.metadata["sub_questions"] == expected
    assert str(response) == "Dunmere"


def test_a_comparison_of_amounts_is_decided_by_the_numbers_the_source_nodes_give():
    """``compare_quantities`` (ours, as the other methods'): Algorithm 2 answers, then its source nodes are asked for
    each option's number; two numbers in one unit replace its answer (kept in the metadata and the answer's info)."""
    from llama_index_k2rag.method import K2RAGAnswerer
    from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine

    def amounts(prompt: str) -> str:
        if "Do not answer it yet" in prompt:
            return "Kesh Bridge: 120 metres\nSable Bridge: 95 metres"
        return respond(prompt)

    llm = ScriptedLLM(amounts)
    question = "Which bridge is longer, Kesh Bridge or Sable Bridge?"
    index = build(llm=llm, kg=FakeKG("Tomas Halvard"))
    engine = index.as_query_engine()
    assert isinstance(engine, ComparisonsDecidedQueryEngine) and list(engine.kinds) == ["years", "quantities"]
    response = engine.query(question)
    assert str(response) == "Kesh Bridge" and response.metadata["decided_by"] == "quantities"
    assert response.metadata["engine_answer"] == "Dunmere" and response.metadata["sub_questions"]
    answer = K2RAGAnswerer(index).answer(question)
    assert answer.text == "Kesh Bridge" and answer.info["algorithm_answer"] == "Dunmere"
    assert str(engine.query("Where was the designer of the Kesh Bridge born?")) == "Dunmere"  # no two options
    paper = K2RAGConfig(compare_years=False, compare_quantities=False)  # Algorithm 2 for every question
    assert not isinstance(build(kg=FakeKG("Tomas Halvard"), config=paper).as_query_engine(), ComparisonsDecidedQueryEngine)


def test_with_retrieve_for_question_the_users_question_reaches_the_hybrid_retriever_first():
    """Issue 41: the question itself never reached the hybrid retriever (support@10 0.45 against naive's 0.90):
    only sub-questions written from a one-phrase KG answer did."""
    question = "Where was the designer of the Kesh Bridge born?"
    paper_llm = ScriptedLLM(respond)
    paper = build(llm=paper_llm, kg=FakeKG("Tomas Halvard"), config=PAPER).as_query_engine().query(question)
    assert question not in paper.metadata["sub_questions"]

    llm = ScriptedLLM(respond)
    index = build(llm=llm, kg=FakeKG("Tomas Halvard"), config=PAPER.model_copy(update={"retrieve_for_question": True}))
    response = index.as_query_engine().query(question)
    meta = response.metadata
    assert meta["sub_questions"] == [question, "Where was Tomas Halvard born?"] and len(meta["sub_answers"]) == 2
    generated = [p for p in llm.prompts if p.startswith("Instruction: Your task")]
    assert len(generated) == 1  # the question is asked as it is, not written
    first_hits = index.as_retriever().retrieve(question)
    ranked = [h.node.node_id for h in response.source_nodes]
    assert ranked[: len(first_hits)] == [h.node.node_id for h in first_hits]  # its chunks lead the evidence
    assert len(llm.prompts) == len(paper_llm.prompts) + 1  # one more answer call


def test_step_a_hands_on_the_graphs_evidence_instead_of_its_answer_when_asked():
    """Issue 41: the 1.5B's KG answer is one phrase, and sub-questions written from it miss the question; with
    kg_step="context" steps B-C read the triples and source text the graph retrieved (no answer call)."""
    question = "Where was the designer of the Kesh Bridge born?"
    paper = build(kg=FakeKG("Tomas Halvard"), config=PAPER).as_query_engine().query(question)
    assert paper.metadata["kg_answer"] == "Tomas Halvard"
    llm = ScriptedLLM(respond)
    kg = FakeKG("Tomas Halvard")
    response = build(llm=llm, kg=kg, config=PAPER.model_copy(update={"kg_step": "context"})).as_query_engine().query(question)
    assert response.metadata["kg_answer"].startswith("Kesh Bridge -> designed by -> Tomas Halvard")
    assert kg.questions == [question]
    written = [p for p in llm.prompts if p.startswith("Instruction: Your task")]
    assert len(written) == 1 and "Kesh Bridge -> designed by" in written[0]


def test_each_sub_question_can_be_answered_with_the_users_question_in_view():
    """Algorithm 2, line 22 answers with the user's question; §3.1.3's prose with the sub-question alone (the
    default). ``sub_answer_sees_question`` shows both, so the sub-answer serves the question."""
    question = "Where was the designer of the Kesh Bridge born?"
    paper_llm, llm = ScriptedLLM(respond), ScriptedLLM(respond)
    build(llm=paper_llm, kg=FakeKG("Tomas Halvard")).as_query_engine().query(question)
    build(llm=llm, kg=FakeKG("Tomas Halvard"), config=K2RAGConfig(sub_answer_sees_question=True)).as_query_engine().query(question)
    sub = [p for p in llm.prompts if p.startswith("Additional Information:") and "Where was Tomas Halvard born?" in p]
    assert len(sub) == 1 and question in sub[0]
    assert not any(question in p for p in paper_llm.prompts if "Where was Tomas Halvard born?" in p)
    assert len(llm.prompts) == len(paper_llm.prompts)  # no call more


def test_k2rag_summarizes_kg_results_and_sub_answers():
    llm = ScriptedLLM(respond)
    index = build(llm=llm, kg=FakeKG("Halvard " * 200), summarizer="llm", config=PAPER.model_copy(update={"min_summary_tokens": 5}))
    response = index.as_query_engine().query("Where was Halvard born?")
    assert response.metadata["kg_summary"] == "A summary."
    assert response.metadata["sub_questions"] == ["Where was Tomas Halvard born?"]
    assert response.metadata["sub_answer_summary"] == "Dunmere"  # too short to summarize


def test_the_final_answer_can_read_each_sub_question_beside_its_answer():
    """Issue 41: step E read the sub-answers run together ("Dunmere Tomas Halvard"), so the 1.5B could not tell the
    answer to the user's question from the answer to a sub-question written from the wrong entity;
    ``final_reads="pairs"`` shows each sub-question with its answer, the user's own first, and makes no call more."""
    question = "Where was the designer of the Kesh Bridge born?"
    paper_llm, llm = ScriptedLLM(respond), ScriptedLLM(respond)
    build(llm=paper_llm, kg=FakeKG("Tomas Halvard")).as_query_engine().query(question)
    assert "Q: " not in paper_llm.prompts[-1] and "Dunmere Dunmere" in paper_llm.prompts[-1]  # Algorithm 2: one summary

    config = K2RAGConfig(final_reads="pairs")
    response = build(llm=llm, kg=FakeKG("Tomas Halvard"), config=config).as_query_engine().query(question)
    final = llm.prompts[-1]
    pairs = f"Q: {question}\nA: Dunmere\n\nQ: Where was Tomas Halvard born?\nA: Dunmere"
    assert pairs in final and final.index("Kesh Bridge -> designed by") < final.index(pairs)
    assert response.metadata["sub_answer_summary"] == ""
    assert len(llm.prompts) == len(paper_llm.prompts)  # no call more


def test_final_reads_is_kept_with_the_index(tmp_path):
    build(kg=FakeKG("Tomas Halvard"), config=K2RAGConfig(final_reads="pairs")).persist(tmp_path)
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=ScriptedLLM(respond), embed_model=HashEmbedding(dim=256))
    assert loaded.config.final_reads == "pairs"


@pytest.mark.parametrize(
    "reply",
    [
        "Based on the information provided, a small question could be:\n\nWhere was Tomas Halvard born?",
        "Question: Where was Tomas Halvard born?",
        "**Question:** Where was Tomas Halvard born?\nAnswer: Dunmere",
    ],
)
def test_the_sub_question_is_the_replys_question_not_its_preamble_or_label(reply):
    """Issue 41: the 1.5B opened 13 of 216 replies (rows of record, tuning pools) with a preamble ("Based on the
    information provided, a small question could be:") that was retrieved for and answered as the sub-question, and
    labelled 33 "Question: …"; the question line is read, without its label."""

    def replies(prompt: str) -> str:
        return reply if prompt.startswith("Instruction: Your task") else respond(prompt)

    response = build(llm=ScriptedLLM(replies), kg=FakeKG("Tomas Halvard")).as_query_engine().query("Q?")
    assert response.metadata["sub_questions"] == ["Q?", "Where was Tomas Halvard born?"]


def test_empty_kg_answer_skips_sub_questions():
    llm = ScriptedLLM(respond)
    response = build(llm=llm, kg=FakeKG(""), config=PAPER).as_query_engine().query("Q?")
    assert response.metadata["sub_questions"] == [] and str(response) == "Dunmere"


@pytest.mark.parametrize(("pipeline", "alpha"), [("semantic", 1.0), ("keyword", 0.0), ("hybrid", 0.8)])
def test_naive_pipelines(pipeline, alpha):
    llm = ScriptedLLM(respond)
    engine = build(llm=llm).as_query_engine(pipeline)
    assert engine.retriever.alpha == alpha
    response = engine.query("Where was Tomas Halvard born?")
    assert str(response) == "Dunmere"
    assert "Tomas Halvard was born in Dunmere." in llm.prompts[-1]
    assert prompts.ANSWER.template.split("{")[0] in llm.prompts[-1]


def test_kg_pipeline_answers_from_the_graph():
    llm = ScriptedLLM(respond)
    engine = build(llm=llm, kg=FakeKG("Halvard was born in Dunmere.")).as_query_engine("kg")
    assert str(engine.query("Where?")) == "Dunmere"
    assert llm.prompts[-1].startswith("Additional Information: Halvard was born in Dunmere.")


def test_pipelines_needing_a_graph_say_so():
    index = build()
    with pytest.raises(ValueError, match="knowledge graph"):
        index.as_query_engine("k2rag")
    with pytest.raises(ValueError, match="pipeline must be one of"):
        index.as_query_engine("bm42")


# --- persistence ------------------------------------------------------------------------------------


def test_persist_and_reload(tmp_path):
    index = build()
    index.persist(tmp_path)
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=ScriptedLLM(respond), embed_model=HashEmbedding(dim=256))
    query = "Where was Tomas Halvard born?"
    before = [(h.node.node_id, round(h.score, 5)) for h in index.as_retriever().retrieve(query)]
    after = [(h.node.node_id, round(h.score, 5)) for h in loaded.as_retriever().retrieve(query)]
    assert before == after
    assert {k: v for k, v in loaded.stats().items() if k != "cache"} == {k: v for k, v in index.stats().items() if k != "cache"}
    assert loaded.summaries == index.summaries
    with pytest.raises(StoreError, match="no k2rag index"):
        K2RAGIndex.from_persist_dir(tmp_path / "none", llm=ScriptedLLM(respond), embed_model=HashEmbedding())


def test_a_store_holding_another_build_is_refused_or_replaced(tmp_path):
    """Issue 21: building into a reused collection kept the old corpus's chunks, and the next query
    raised KeyError in hybrid.py."""
    store = chroma_vector_store(tmp_path, "k2rag")
    build(vector_store=store)
    with pytest.raises(StoreError, match="overwrite=True"):
        build(vector_store=store)
    other = [Document(id_="lisk", text="The Lisk is a river of Vantmoor.", metadata={"title": "Lisk"})]
    index = K2RAGIndex.from_documents(other, llm=ScriptedLLM(respond), embed_model=HashEmbedding(dim=256), summarizer="none",
                                      kg=None, vector_store=store, overwrite=True, show_progress=False)
    assert stored_ids(store) == {c for info in index.documents.values() for c in info["chunks"]}
    assert [h.node.metadata["doc_id"] for h in index.as_retriever().retrieve("Where was Tomas Halvard born?")] == ["lisk"]


def test_a_reload_refuses_a_store_that_does_not_hold_exactly_the_chunks(tmp_path):
    index = build(persist_dir=tmp_path)
    store = chroma_vector_store(tmp_path / "chroma", "k2rag")
    extra = TextNode(id_="stranger", text="A stray chunk.", embedding=HashEmbedding(dim=256)._vector("A stray chunk."))
    store.add([extra])
    with pytest.raises(StoreError, match="1 chunks the index lacks"):
        K2RAGIndex.from_persist_dir(tmp_path, llm=ScriptedLLM(respond), embed_model=HashEmbedding(dim=256))
    assert index.documents


def _extractor_llm(prompt: str) -> str:
    if "triplets" in prompt.lower():
        return "(Tomas Halvard, designed, Kesh Bridge)\n(Tomas Halvard, born in, Dunmere)"
    if "synonyms" in prompt:
        return "Tomas Halvard^Halvard"
    return "He was born in Dunmere."


async def test_property_graph_kg_builds_and_answers_inside_a_running_loop_like_a_notebook():
    # LlamaIndex's PropertyGraphIndex calls asyncio.run while inserting; a notebook runs a loop
    index = build(llm=ScriptedLLM(_extractor_llm), kg="property")
    assert index.stats()["kg_triples"] >= 2
    assert index.kg.query("Where was Tomas Halvard born?") == "He was born in Dunmere."


def test_property_graph_kg_with_a_scripted_extractor(tmp_path):
    llm = ScriptedLLM(_extractor_llm)
    index = build(llm=llm, kg="property")
    assert index.stats()["kg_triples"] >= 2
    index.persist(tmp_path)
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    assert loaded.kg is not None and loaded.kg.triples() == index.kg.triples()
    assert loaded.kg.query("Where was Tomas Halvard born?") == "He was born in Dunmere."
    # The graph's triples reached the answer prompt.
    assert "tomas halvard -> born in -> dunmere" in llm.prompts[-1].lower()
    calls = len(llm.prompts)
    context = loaded.kg.context("Where was Tomas Halvard born?")  # what that answer was written from, no call
    assert "tomas halvard -> born in -> dunmere" in context.lower() and any(doc.text in context for doc in DOCS)
    assert len(llm.prompts) == calls


def test_the_kg_extractor_sees_titles_not_ids_and_shows_progress_per_chunk(capsys):
    bars: list[str] = []

    def slow_extractor(prompt: str) -> str:
        if "triplets" in prompt.lower():
            bars.append(capsys.readouterr().err)
            time.sleep(0.15)  # past tqdm's 0.1 s refresh interval
        return _extractor_llm(prompt)

    llm = ScriptedLLM(slow_extractor)
    K2RAGIndex.from_documents(
        DOCS, llm=llm, embed_model=HashEmbedding(dim=256), summarizer="none", kg="property"
    )
    extraction = [p for p in llm.prompts if "triplets" in p.lower()]
    assert len(extraction) == len(DOCS)
    assert all("title: " in p and "doc_id" not in p and "chunk: " not in p for p in extraction)
    # The bar moves while the (blocking) LLM works: chunk 1 is counted before chunk 2 is sent.
    assert "K2RAG KG triples" in bars[0] and f"1/{len(DOCS)}" in bars[1] and f"2/{len(DOCS)}" in bars[2]


# --- issue 21: every token indexed, titles shown, exclusions kept ---------------------------------


def _summarize_names(prompt: str) -> str:
    """A summarizer keeping the sentences that name someone (capitalised words after the first)."""
    if prompt.startswith("Summarize the text below"):
        text = prompt.split("Text: ", 1)[1].rsplit("\n\nSummary:", 1)[0]
        kept = [s for s in text.split(". ") if any(w[:1].isupper() for w in s.split()[1:])]
        return ". ".join(kept) or "Nothing named."
    return respond(prompt)


def test_a_long_documents_last_sentence_reaches_the_stores():
    """Issue 21: the summarizer kept the first 3,000 tokens and only summaries were indexed, so a
    12,400-token document lost everything after token ~3,000."""
    filler = "the grain harvest was weighed and stored in the barns. " * 1100
    long_doc = Document(id_="ledger", text=filler + "The ledger was signed by Odile Brask in Vantmoor.", metadata={"title": "Ledger"})
    assert count_tokens(long_doc.text) > 12_000
    index = K2RAGIndex.from_documents([*DOCS, long_doc], llm=ScriptedLLM(_summarize_names), embed_model=HashEmbedding(dim=256),
                                      summarizer="llm", kg=None, show_progress=False)
    summary = index.documents["ledger"]["summary"]
    assert "Odile Brask" in summary
    hits = index.as_retriever(alpha=0.0).retrieve("Who signed the ledger, Odile Brask?")
    assert hits and hits[0].node.metadata["doc_id"] == "ledger" and "Odile Brask" in hits[0].node.get_content()


def test_titles_are_searchable_and_shown_to_the_answering_model():
    """Issue 21: titles were indexed nowhere."""
    docs = [Document(id_="x", text="It was opened in 1874 over a river.", metadata={"title": "Quern Viaduct"}),
            Document(id_="y", text="A town with a market.", metadata={"title": "Vantmoor"})]
    llm = ScriptedLLM(respond)
    index = K2RAGIndex.from_documents(docs, llm=llm, embed_model=HashEmbedding(dim=256), summarizer="none", kg=None,
                                      show_progress=False)
    hits = index.as_retriever(alpha=0.0).retrieve("Quern Viaduct")
    assert [h.node.metadata["doc_id"] for h in hits] == ["x"]
    index.as_query_engine("keyword").query("When was the Quern Viaduct opened?")
    assert "title: Quern Viaduct" in llm.prompts[-1]


def test_bookkeeping_metadata_stays_hidden_after_a_reload(tmp_path):
    """Issue 21: K²RAG's reload dropped excluded_llm_metadata_keys, so doc_id and chunk reached the answer prompt."""
    index = build()
    index.persist(tmp_path)
    llm = ScriptedLLM(respond)
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    loaded.as_query_engine("hybrid").query("Where was Tomas Halvard born?")
    prompt = llm.prompts[-1]
    assert "title: Tomas Halvard" in prompt and "doc_id" not in prompt and "chunk:" not in prompt and "passage_id" not in prompt
    for node in loaded.sparse.nodes:
        assert set(node.excluded_llm_metadata_keys) >= {"doc_id", "chunk"}


# --- issue 25: updates at the cost of the change --------------------------------------------------


def _per_chunk_extractor(prompt: str) -> str:
    """Triples that name the chunk's title, so each chunk's triples are its own."""
    if "triplets" in prompt.lower():
        title = prompt.split("title: ", 1)[1].split("\n", 1)[0].strip() if "title: " in prompt else "Unknown"
        return f"({title}, is described in, the corpus)\n({title}, has, a title)"
    return _extractor_llm(prompt)


def test_updates_touch_only_the_changed_documents():
    llm = ScriptedLLM(_per_chunk_extractor)
    index = build(llm=llm, kg="property")
    store = index.kg.index.property_graph_store

    def extracted_from(chunks):
        return [t for c in chunks for t in store.get_triplets(properties={"triplet_source_id": c})
                if t[1].properties.get("triplet_source_id") == c]

    before = len(llm.prompts)
    new = Document(id_="lisk", text="The Lisk flows through Vantmoor.", metadata={"title": "Lisk"})
    index.insert(new)
    extraction = [p for p in llm.prompts[before:] if "triplets" in p.lower()]
    assert len(extraction) == 1 and "Lisk" in extraction[0]  # one new chunk extracted, no other
    assert [h.node.metadata["doc_id"] for h in index.as_retriever(alpha=0.0).retrieve("Lisk Vantmoor")][0] == "lisk"
    kesh_chunks = set(index.documents["kesh"]["kg_chunks"])
    assert extracted_from(kesh_chunks)
    index.delete_ref_doc("kesh")
    assert "kesh" not in index.ref_doc_info
    assert stored_ids(index.vector_store) == {c for i in index.documents.values() for c in i["chunks"]}
    assert not extracted_from(kesh_chunks) and extracted_from(set(index.documents["lisk"]["kg_chunks"]))
    changed = Document(id_="dunmere", text="Dunmere is a port on the Lisk.", metadata={"title": "Dunmere"})
    assert index.refresh_ref_docs([DOCS[1], changed]) == [False, True]
    assert "Lisk" in index.documents["dunmere"]["text"]
    with pytest.raises(KeyError, match="no document"):
        index.delete_ref_doc("kesh")


def test_the_graph_extracts_the_next_batch_while_it_embeds_the_last():
    """With slots to spare, the KG's CPU work (embedding and storing a batch) overlaps the next batch's
    extraction calls instead of leaving the slots idle (issue 42); the graph is the one-at-a-time one."""
    import threading

    from llama_index_k2rag import PropertyGraphKG

    lock, extractions, embeddings = threading.Lock(), [], []

    def extractor(prompt: str) -> str:
        time.sleep(0.005)  # a batch's calls take longer than the start of the last batch's embedding
        with lock:
            extractions.append(time.perf_counter())
        town = re.findall(r"Town\d+", prompt)[-1]
        return f"({town}, lies on, Orrin)"

    class SlowEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            started = time.perf_counter()
            time.sleep(0.05)
            with lock:
                embeddings.append((started, time.perf_counter()))
            return [self._vector(t) for t in texts]

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._get_text_embeddings(texts)  # CPU work: it holds the thread, as a real embedder does

    chunks = [TextNode(text=f"Town{i} lies on the Orrin.", id_=f"c{i}") for i in range(80)]
    piped = PropertyGraphKG.build(chunks, ScriptedLLM(extractor), SlowEmbedding(dim=64), max_concurrency=4,
                                  show_progress=False)
    overlapped = [t for t in extractions if any(a < t < b for a, b in embeddings)]
    one_at_a_time = PropertyGraphKG.build(chunks, ScriptedLLM(extractor), HashEmbedding(dim=64), max_concurrency=1,
                                          show_progress=False)
    assert piped.triples() == one_at_a_time.triples() == 80
    assert overlapped, "no extraction call ran while a batch was being embedded"


def test_a_graph_built_batch_by_batch_reads_each_node_a_bounded_number_of_times(monkeypatch):
    """Inserting a batch looks up the batch's entities by id: LlamaIndex's in-memory store read every node of
    the graph for that (each batch cost the graph's size, the build O(n²)); the graph's store reads only the
    ids asked (issue 42). Counted: reads of an entity's id."""
    from llama_index.core.graph_stores.types import EntityNode

    from llama_index_k2rag import PropertyGraphKG

    reads = []
    original = EntityNode.id

    def counted(node):
        reads.append(1)
        return original.fget(node)

    monkeypatch.setattr(EntityNode, "id", property(counted))

    def extractor(prompt: str) -> str:
        town = re.findall(r"Town\d+", prompt)[-1]
        return f"({town}, lies on, River{town[4:]})"

    chunks = [TextNode(text=f"Town{i} lies on River{i}.", id_=f"c{i}") for i in range(640)]
    kg = PropertyGraphKG.build(chunks, ScriptedLLM(extractor), HashEmbedding(dim=16), max_concurrency=4,
                               show_progress=False)
    assert kg.triples() == 640
    # Two entities per chunk, each read 9 times as LlamaIndex inserts it; the scans made it 28 here, growing with n.
    assert len(reads) <= 12 * 2 * len(chunks)


def test_a_graph_build_that_fails_stops_the_next_batch_extraction_at_once():
    """A failure while a batch is stored (an embedder down, Ctrl-C) waited for the whole next batch's extraction
    running beside it (32 calls and more) before it surfaced; now the side extraction stops after the calls in
    flight, and the build still works afterwards (review of issue 42)."""
    from llama_index_k2rag import PropertyGraphKG

    calls, at_failure = [], []

    def extractor(prompt: str) -> str:
        calls.append(1)
        time.sleep(0.05)
        town = re.findall(r"Town\d+", prompt)[-1]
        return f"({town}, lies on, Orrin)"

    class BrokenEmbedding(HashEmbedding):
        broken: bool = True

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            if self.broken:
                deadline = time.time() + 30
                while len(calls) < 32 + 4 and time.time() < deadline:  # the next batch's calls are under way
                    time.sleep(0.005)
                at_failure.append(len(calls))
                raise ConnectionError("the embedding server went away")
            return [self._vector(t) for t in texts]

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._get_text_embeddings(texts)

    chunks = [TextNode(text=f"Town{i} lies on the Orrin.", id_=f"c{i}") for i in range(96)]  # three batches of 32
    embed = BrokenEmbedding(dim=16)
    with pytest.raises(ConnectionError):
        PropertyGraphKG.build(chunks, ScriptedLLM(extractor), embed, max_concurrency=4, show_progress=False)
    # Without the stop, the whole second batch (64 calls in all) ran before the error surfaced.
    assert len(calls) <= at_failure[0] + 2 * 4 < 64
    embed.broken = False
    kg = PropertyGraphKG.build(chunks, ScriptedLLM(extractor), embed, max_concurrency=4, show_progress=False)
    assert kg.triples() == 96


def test_chunks_are_embedded_while_other_documents_are_still_being_summarized():
    """With slots to spare, a document's chunks are embedded as soon as its summary is in (a short document's at
    once: it is not summarized) while the other summary calls are in flight, instead of after the last one
    (issue 42: the dense store's embedding was 4 of a build's 10 s with no call in flight at 250 passages)."""
    import threading

    lock, summaries, embeddings = threading.Lock(), [], []

    def summarize(prompt: str) -> str:
        started = time.perf_counter()
        time.sleep(0.3)
        with lock:
            summaries.append((started, time.perf_counter()))
        return "A summary of a long passage about the Orrin."

    class TimedEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            time.sleep(0.01)  # CPU work: it holds the thread
            with lock:
                embeddings.append(time.perf_counter())
            return [self._vector(t) for t in texts]

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._get_text_embeddings(texts)

    long_text = " ".join(f"Town{i} lies on the Orrin, a river of the north." for i in range(40))  # past min_summary_tokens
    docs = ([Document(id_=f"s{i}", text=f"Town{i} lies on the Orrin.", metadata={"title": f"Town{i}"}) for i in range(80)]
            + [Document(id_=f"l{i}", text=long_text, metadata={"title": f"Long{i}"}) for i in range(8)])
    index = K2RAGIndex.from_documents(docs, llm=ScriptedLLM(summarize), embed_model=TimedEmbedding(dim=64), summarizer="llm",
                                      kg=None, max_concurrency=4, show_progress=False)
    assert len(summaries) == 8 and len(index.sparse) == 88
    assert any(a < t < b for t in embeddings for a, b in summaries), "no chunk was embedded while a summary call ran"
    # The same stores as one document after the other.
    serial = K2RAGIndex.from_documents(docs, llm=ScriptedLLM(lambda p: "A summary of a long passage about the Orrin."),
                                       embed_model=HashEmbedding(dim=64), summarizer="llm", kg=None, max_concurrency=1,
                                       show_progress=False)
    assert list(index.documents) == list(serial.documents) and stored_ids(index.vector_store) == stored_ids(serial.vector_store)


def test_the_graphs_last_batches_halve_down_to_one_round_of_calls():
    """Issue 42: a batch is embedded and stored while the next is extracted, but the last one has nothing beside
    it: 32 chunks, 7 of a 250-passage build's 10 s with no call in flight. The tail halves down to one round of
    calls (``max_concurrency`` chunks), so each batch is stored while a smaller one is extracted."""
    from llama_index_k2rag.kg import graph_batches

    sizes = [len(b) for b in graph_batches(list(range(250)), size=32, last=4)]
    assert sizes == [32] * 6 + [29, 14, 7, 4, 4] and sum(sizes) == 250
    assert [len(b) for b in graph_batches(list(range(20)), size=32, last=4)] == [10, 5, 4, 1]
    assert [len(b) for b in graph_batches(list(range(3)), size=32, last=1)] == [1, 1, 1]
    assert graph_batches([], size=32, last=4) == []


# --- triples a small model writes loosely are repaired, the rest skipped and counted ----------------


def test_triple_lines_with_commas_or_parentheses_in_a_field_are_kept_whole():
    from llama_index_k2rag.triples import TripleParser

    parse = TripleParser()
    reply = "\n".join([
        "(Hollowick, formed in, Oshawa, Ontario)",  # LlamaIndex's parser: four fields, dropped
        "(Christopher Walken, has appeared in, Annie Hall (1977))",  # LlamaIndex's: object "Annie hall (1977"
        'Carroll County Bank, is, "built in 1907")',  # its opening parenthesis missing
        "(Nobel Prize, produces, \"in the, field, of, literature\")",  # commas inside quotes
        "(Kesh Bridge, designed by, Tomas Halvard)",
    ])
    assert parse(reply) == [
        ("Hollowick", "Formed in", "Oshawa, ontario"),
        ("Christopher walken", "Has appeared in", "Annie hall (1977)"),
        ("Carroll county bank", "Is", "Built in 1907"),
        ("Nobel prize", "Produces", "In the, field, of, literature"),
        ("Kesh bridge", "Designed by", "Tomas halvard"),
    ]
    assert sum(parse.skipped.values()) == 0


def test_lines_that_are_not_triples_are_skipped_and_counted_never_kept_as_fragments():
    from llama_index_k2rag.triples import TripleParser

    parse = TripleParser()
    reply = "\n".join([
        "(Kesh Bridge, designed by, Tomas Halvard)",
        "(Cyrtandra, many species are rare)",  # two fields
        "(Miami Marlins, became an expansion team in, )",  # an empty field
        "(Marie Antoinette syndrome, is named after, " + "the observation " * 10 + ")",  # past 128 bytes
        "Triplets:",  # no triple at all
        "(Miracle, is, the",  # a reply cut at its token cap
    ])
    assert parse(reply) == [("Kesh bridge", "Designed by", "Tomas halvard")]
    assert parse.skipped == {"not a triple": 2, "empty field": 1, "field too long": 1, "unclosed": 1}


def test_the_graph_keeps_repaired_triples_and_reports_the_skipped_lines(caplog):
    from llama_index_k2rag import PropertyGraphKG

    def extractor(prompt: str) -> str:
        return "(Hollowick, formed in, Oshawa, Ontario)\n(Hollowick, a band)\n(Hollowick, is, band)"

    chunks = [TextNode(text="Hollowick is a band formed in Oshawa, Ontario.", id_="c0")]
    with caplog.at_level("WARNING"):
        kg = PropertyGraphKG.build(chunks, ScriptedLLM(extractor), HashEmbedding(dim=16), show_progress=False)
    assert kg.triples() == 2
    assert kg.skipped_lines() == {"not a triple": 1}
    assert "1 extracted line was not a triple" in caplog.text


# --- the graph finds the entities the question names, without the LLM's synonyms --------------------


def test_the_entities_a_question_names_are_found_by_their_words_the_longest_where_names_overlap():
    from llama_index_k2rag.question_entities import named_entities

    names = ["American bulldog", "French bulldog", "Bulldog", "The", "Peter pan live!", "Dunmere", "Standard"]
    question = 'Which Bulldog includes breeds such as "Standard", the French Bulldog or the American Bulldog?'
    assert named_entities(question, names) == ["Bulldog", "Standard", "French bulldog", "American bulldog"]
    assert named_entities("The actor who played Hook in Peter Pan Live! won for which film?", names) == ["Peter pan live!"]
    assert named_entities("Where is it?", names) == []
    assert named_entities("Which bulldog is older?", names) == []  # a common noun, as the question writes it


def _misleading_synonyms(prompt: str) -> str:
    if "synonyms" in prompt:
        return "Harvard University^Harvard University"  # a small model's synonyms: none of the question's entities
    return _extractor_llm(prompt)


@pytest.mark.parametrize("linking, synonym_calls", [("llm", 1), ("question", 0), ("both", 1)])
def test_the_graph_context_holds_the_named_entitys_triples_and_asks_for_synonyms_only_if_told(linking, synonym_calls):
    llm = ScriptedLLM(_misleading_synonyms)
    index = build(llm=llm, kg="property", config=K2RAGConfig(kg_entity_linking=linking))
    assert index.kg.entity_linking == linking
    before = len(llm.prompts)
    context = index.kg.context("Where was Tomas Halvard born?").lower()
    assert "tomas halvard -> born in -> dunmere" in context
    assert sum("synonyms" in p for p in llm.prompts[before:]) == synonym_calls


def test_the_entity_linking_survives_a_reload(tmp_path):
    llm = ScriptedLLM(_misleading_synonyms)
    build(llm=llm, kg="property", config=K2RAGConfig(kg_entity_linking="question"), persist_dir=tmp_path)
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    assert loaded.kg.entity_linking == "question"


@pytest.mark.parametrize("retrieve_for_question", [True, False])
def test_the_final_answer_reads_the_questions_own_chunks_within_reader_tokens(retrieve_for_question):
    from llama_index.core.schema import MetadataMode

    question = "Where was the designer of the Kesh Bridge born?"
    config = K2RAGConfig(retrieve_for_question=retrieve_for_question)
    paper_llm = ScriptedLLM(respond)
    index = build(llm=paper_llm, kg=FakeKG("Tomas Halvard"), config=config)
    index.as_query_engine().query(question)
    top = [h.node.get_content(metadata_mode=MetadataMode.LLM) for h in index.as_retriever().retrieve(question)]
    assert not any(chunk in paper_llm.prompts[-1] for chunk in top)  # Algorithm 2: the two summaries only

    llm = ScriptedLLM(respond)
    index = build(llm=llm, kg=FakeKG("Tomas Halvard"), config=config.model_copy(update={"reader_tokens": 20}))
    response = index.as_query_engine().query(question)
    assert top[0] in llm.prompts[-1] and top[1] not in llm.prompts[-1]  # 20 tokens: one chunk
    assert response.metadata["read"] == [index.as_retriever().retrieve(question)[0].node.node_id]
    assert len(llm.prompts) == len(paper_llm.prompts)  # no call more


def test_the_skipped_lines_count_survives_a_reload(tmp_path):
    def extractor(prompt: str) -> str:
        if "triplets" in prompt.lower():
            return "(Tomas Halvard, born in, Dunmere)\n(Tomas Halvard, an engineer)\n(Dunmere, is"
        return _extractor_llm(prompt)

    llm = ScriptedLLM(extractor)
    index = build(llm=llm, kg="property", persist_dir=tmp_path)
    assert index.stats()["kg_lines_skipped"] == {"not a triple": 3, "unclosed": 3}
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    assert loaded.stats() == index.stats()


def test_the_extractor_reply_is_stopped_after_max_paths_per_chunk_lines():
    """max_kg_paths_per_chunk said "keeps" while every parsed triple was kept: the 1.5B wrote up to 39 lines for
    "up to 10", and on HotpotQA's pool a fifth of the triple tokens came after the tenth line."""
    from llama_index_k2rag import PropertyGraphKG

    reply = "Here are the triplets:\n" + "\n".join(f"(Hollowick, has member, Person {i})" for i in range(15))
    llm = ScriptedLLM(lambda prompt: reply)
    chunks = [TextNode(text="Hollowick is a band with fifteen members.", id_="c0")]
    kg = PropertyGraphKG.build(chunks, llm, HashEmbedding(dim=16), max_paths_per_chunk=4, show_progress=False)
    assert kg.triples() == 3  # a line is a line: the preamble counts
    assert llm.streamed == 4  # the twelve lines after the fourth were never generated


def test_stop_kg_reply_false_reads_the_whole_reply_as_llama_index_does(tmp_path):
    """The paper's graph (LlamaIndex's extractor) is one setting away: every line of the reply is read."""
    reply = "\n".join(f"(Hollowick, has member, Person {i})" for i in range(15))
    llm = ScriptedLLM(lambda prompt: reply if "triplets" in prompt.lower() else _extractor_llm(prompt))
    index = build(llm=llm, kg="property", persist_dir=tmp_path, config=K2RAGConfig(max_kg_paths_per_chunk=4,
                                                                                   stop_kg_reply=False))
    assert index.stats()["kg_triples"] == 15
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    assert loaded.config.stop_kg_reply is False


_GRAPH_CONTEXT_SCRIPT = """
from llama_index.core.schema import TextNode
from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from llama_index_k2rag import PropertyGraphKG

def reply(prompt):
    if "synonyms" in prompt:
        return "Hollowick^Orrin"
    if "Orrin" in prompt:
        return "\\n".join(f"(Orrin, flows past, Town {i})" for i in range(20))
    return "\\n".join(f"(Hollowick, has member, Person {i})" for i in range(20))

chunks = [TextNode(text="Hollowick is a band of twenty.", id_="c0"), TextNode(text="The Orrin flows past towns.", id_="c1")]
kg = PropertyGraphKG.build(chunks, ScriptedLLM(reply), HashEmbedding(dim=16), max_paths_per_chunk=20, show_progress=False)
print(kg.context("Who plays in Hollowick, by the Orrin?"))
"""


def test_the_graph_context_is_the_same_in_every_process():
    """LlamaIndex's graph keeps its triples in a set, ordered by the process's string hashing: which of a question's
    triples reached the 30 kept and how they were listed changed from run to run, so a committed call cache did not
    replay K²RAG's answers (2Wiki pool: the graph context differed in 5 of the first 6 questions)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    def context(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _GRAPH_CONTEXT_SCRIPT], env=env, capture_output=True, text=True,
                              cwd=Path(__file__).parents[2], check=True, timeout=300)
        return done.stdout

    first = context("1")
    assert first.count(" -> ") < 2 * 40  # each of its two retrievers keeps 30 of the 40
    assert context("2") == first == context("3")


@pytest.mark.parametrize("order", ["rank", "name"])
def test_the_graph_keeps_the_triples_of_the_best_matched_entity_first(order):
    """``get_rel_map`` keeps 30 triples: under 'rank' those of the entity the retriever matched first, whatever their
    names; under 'name' the alphabetically first (reproducible, but blind to the match)."""
    def reply(prompt: str) -> str:
        if "Zorn" in prompt:
            return "\n".join(f"(Zorn, recorded, Song {i:02})" for i in range(20))
        return "\n".join(f"(Abbot, wrote, Book {i:02})" for i in range(20))

    chunks = [TextNode(text="Abbot wrote twenty books.", id_="c0"), TextNode(text="Zorn recorded twenty songs.", id_="c1")]
    kg = PropertyGraphKG.build(chunks, ScriptedLLM(reply), HashEmbedding(dim=16), max_paths_per_chunk=20,
                               triple_order=order, show_progress=False)
    store = kg.index.property_graph_store
    kept = store.get_rel_map(store.get(ids=["Zorn", "Abbot"]), limit=30)
    subjects = [subject.id for subject, _, _ in kept]
    if order == "rank":
        assert subjects == ["Zorn"] * 20 + ["Abbot"] * 10
        assert [obj.id for _, _, obj in kept[:2]] == ["Song 00", "Song 01"]
    else:
        assert subjects == ["Abbot"] * 20 + ["Zorn"] * 10


def test_kg_triple_order_is_kept_with_the_index(tmp_path):
    llm = ScriptedLLM(_extractor_llm)
    build(llm=llm, kg="property", persist_dir=tmp_path, config=K2RAGConfig(kg_triple_order="name"))
    loaded = K2RAGIndex.from_persist_dir(tmp_path, llm=llm, embed_model=HashEmbedding(dim=256))
    assert loaded.config.kg_triple_order == "name"
    assert loaded.kg.index.property_graph_store.triple_order == "name"  # type: ignore[union-attr]
