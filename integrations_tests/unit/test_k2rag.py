"""K²RAG: eq. (1) chunking, eq. (4) hybrid scores, Algorithm 2's sub-question loop, summarizers,
naive pipelines and persistence, with deterministic fakes."""

from __future__ import annotations

import time
import uuid

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document, TextNode

from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from llama_index_k2rag import (
    HybridRetriever,
    K2RAGConfig,
    K2RAGIndex,
    LLMSummarizer,
    NoSummarizer,
    Seq2SeqSummarizer,
    SparseStore,
    hybrid_score,
    make_summarizer,
    prompts,
)
from multihop_rag.corpus import CorpusError
from multihop_rag.stores import StoreError, chroma_vector_store
from multihop_rag.text import chunk_tokens, count_tokens, eq1_chunk_count

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


def test_empty_corpus_is_refused():
    with pytest.raises(CorpusError):
        K2RAGIndex.from_documents([Document(text=" ")], llm=ScriptedLLM(respond), embed_model=HashEmbedding())


# --- eq. (4) ---------------------------------------------------------------------------------------


def test_hybrid_score_formula_with_fixed_vectors():
    texts = ["alpha beta", "beta gamma", "delta"]
    vectors = {"alpha beta": [1.0, 0.0], "beta gamma": [0.6, 0.8], "delta": [0.0, 1.0], "alpha": [1.0, 0.0]}
    nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(texts)]
    for node in nodes:
        node.embedding = vectors[node.text]
    dense = chroma_vector_store(None, f"hybrid-test-{uuid.uuid4().hex[:8]}")
    dense.add(nodes)
    sparse = SparseStore.from_nodes(nodes)
    sparse_cos = sparse.cosines("alpha")
    assert sparse_cos[0] > 0 and sparse_cos[1] == 0 and sparse_cos[2] == 0
    embed = FixedEmbedding(vectors=vectors)
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
    index = build(llm=llm, kg=kg)
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


def test_k2rag_summarizes_kg_results_and_sub_answers():
    llm = ScriptedLLM(respond)
    index = build(llm=llm, kg=FakeKG("Halvard " * 200), summarizer="llm", config=K2RAGConfig(min_summary_tokens=5))
    response = index.as_query_engine().query("Where was Halvard born?")
    assert response.metadata["kg_summary"] == "A summary."
    assert response.metadata["sub_questions"] == ["Where was Tomas Halvard born?"]
    assert response.metadata["sub_answer_summary"] == "Dunmere"  # too short to summarize


def test_empty_kg_answer_skips_sub_questions():
    llm = ScriptedLLM(respond)
    response = build(llm=llm, kg=FakeKG("")).as_query_engine().query("Q?")
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
    assert before == after and loaded.stats() == index.stats()
    assert loaded.summaries == index.summaries
    with pytest.raises(StoreError, match="no K²RAG index"):
        K2RAGIndex.from_persist_dir(tmp_path / "none", llm=ScriptedLLM(respond), embed_model=HashEmbedding())


def test_rebuilding_into_the_same_persistent_store_adds_nothing_twice(tmp_path):
    store = chroma_vector_store(tmp_path, "k2rag")
    build(vector_store=store)
    count = store._collection.count()
    build(vector_store=store)
    assert store._collection.count() == count == 3


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
