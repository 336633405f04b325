"""GARLIC with deterministic fakes: scores, edges, stop control, graph construction, persistence."""

import asyncio
import json
import shutil
import time

import numpy as np
import pytest
from llama_index.core import Document

from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from llama_index_garlic import GarlicConfig, GarlicIndex, GraphNode, SummaryGraph, prompts
from llama_index_garlic.build import chunk_documents, make_batches, parse_information_points
from llama_index_garlic.graph import next_node_scores, normalize_edges, position_weighted
from llama_index_garlic.search import graph_search
from multihop_rag.corpus import load_documents
from multihop_rag.errors import IndexFolderError
from multihop_rag.indexing.persistence import MANIFEST
from multihop_rag.indexing.text import count_tokens
from multihop_rag.stores import stored_ids

DEMO = "multihop_rag/data/demo_corpus.jsonl"


def words(text: str) -> set[str]:
    return {w.strip(".,;:!?\"'()*").lower() for w in text.split()} - {""}


# ---- a hand-made graph: two IPs over four chunks ---------------------------------------------


def hand_graph() -> SummaryGraph:
    texts = {
        "c1": "The Kesh Bridge crosses the Orrin River.",
        "c2": "Tomas Halvard designed the Kesh Bridge.",
        "c3": "Velmora lies on the Orrin River.",
        "c4": "Mount Ardun is 3,120 m high.",
        "i1": "Halvard's bridge spans a river.",
        "i2": "A town and a mountain.",
    }
    nodes = [GraphNode(k, v, 1 if k[0] == "c" else 2, count_tokens(v)) for k, v in texts.items()]
    edges = {"i1": {"c1": 0.75, "c2": 0.25}, "i2": {"c2": 0.5, "c3": 0.5}}
    embeddings = np.asarray([HashEmbedding()._vector(t) for t in texts.values()])
    return SummaryGraph(nodes=nodes, edges=edges, embeddings=embeddings, edge_source="attention")


def test_z_is_E_transpose_a_with_position_weights():
    graph = hand_graph()
    visited = np.array([False, False, False, False, True, True])
    a = np.zeros(6)
    a[[4, 5]] = position_weighted([0.2, 0.1])  # i1 at position 2, i2 at position 3 (query is 1)
    np.testing.assert_allclose(a[[4, 5]], [0.4, 0.3])
    scores = next_node_scores(graph.adjacency(), a, None, visited)
    # z = Eᵀa: c1 = .75·.4 = .30, c2 = .25·.4 + .5·.3 = .25, c3 = .5·.3 = .15, c4 = 0; then sum to 1.
    np.testing.assert_allclose(scores[:4], np.array([0.30, 0.25, 0.15, 0.0]) / 0.70)
    assert np.isneginf(scores[4:]).all()


def test_similarity_is_normalised_and_added_to_z():
    graph = hand_graph()
    visited = np.array([False, False, False, False, True, True])
    a = np.zeros(6)
    a[4] = 1.0
    similarity = np.array([0.0, 0.5, -0.3, 0.5, 0.9, 0.9])  # negatives count as 0; visited ignored
    scores = next_node_scores(graph.adjacency(), a, similarity, visited)
    np.testing.assert_allclose(scores[:4], [0.75 + 0.0, 0.25 + 0.5, 0.0, 0.5])


def test_edges_of_each_higher_node_sum_to_one():
    weights = normalize_edges(np.array([[3.0, 1.0], [0.0, 0.0], [-1.0, 2.0]]))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(weights, [[0.75, 0.25], [0.5, 0.5], [0.0, 1.0]])


# ---- the search loop with a scripted controller -----------------------------------------------


class Script:
    """A Table 5 controller answering from a list; records the prompts it saw."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = 0
        self.prompts = []
        self.probabilities = []

    def sufficient(self, prompt):
        self.calls += 1
        self.prompts.append(prompt)
        return self.replies.pop(0) if self.replies else "No"

    def answer(self, prompt, question):
        self.calls += 1
        return "the answer"

    def answer_incomplete(self, information, question):
        self.calls += 1
        return "the answer from what there is"


class FakeSession:
    def __init__(self, question, log):
        self.question, self.log, self.seconds = words(question), log, 0.0

    def append(self, texts):
        self.log.append(list(texts))
        return [len(self.question & words(t)) / 10 for t in texts]


class FakeAttention:
    """Attention = shared words: an IP attends to the inputs it shares words with."""

    name = "fake"

    def __init__(self):
        self.forward_tokens = 0
        self.appended = []

    def summary_edges(self, prompt, reply, inputs, outputs):
        return np.array([[len(words(o) & words(i)) + 0.01 for i in inputs] for o in outputs])

    def session(self, question, *, kv_cache=True):
        return FakeSession(question, self.appended)


def search(graph, question, replies, **kwargs):
    controller = Script(replies)
    result = graph_search(
        graph, question, query_embedding=HashEmbedding()._vector(question), controller=controller, **kwargs
    )
    return result, controller


def test_the_rows_attention_is_computed_a_block_of_rows_at_a_time_and_equals_the_whole(monkeypatch):
    """The reply rows' probabilities come ROW_BLOCK rows at a time (a 2,048-token reply over an 8K prompt held
    0.85 GB of scores per copy at once) and equal the softmax over all rows, causal mask and head mean."""
    torch = pytest.importorskip("torch")
    from llama_index_garlic import attention

    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(1, 4, 7, 8, generator=generator), torch.randn(1, 4, 12, 8, generator=generator)
    positions = torch.arange(5, 12)  # the last 7 of 12 positions, as a reply after its prompt
    scores = torch.matmul(query, key.transpose(2, 3)) * 0.3
    scores = scores.masked_fill(torch.arange(12)[None, :] > positions[:, None], float("-inf"))
    whole = torch.softmax(scores, dim=-1).mean(dim=1)

    rows_at_once, softmax = [], torch.softmax
    monkeypatch.setattr(torch, "softmax", lambda x, dim: rows_at_once.append(x.shape[2]) or softmax(x, dim=dim))
    monkeypatch.setattr(attention, "ROW_BLOCK", 3)
    blocked = attention.head_mean_probabilities(query, key, positions, 0.3)

    assert rows_at_once == [3, 3, 1]
    torch.testing.assert_close(blocked, whole)
    assert attention.head_mean_probabilities(query[:, :, :0], key, positions[:0], 0.3).shape == (1, 0, 12)


def test_search_starts_at_the_top_level_and_stops_after_p_yes():
    graph = hand_graph()
    result, controller = search(graph, "Who designed the bridge?", ["No", "Yes", "No", "Yes", "No"], stop_patience=2)
    assert result.visited[:2] == ["i1", "i2"] and result.scores[:2] == [None, None]
    assert result.replies == ["No", "Yes", "No", "Yes"]
    assert len(result.visited) == 2 + 3 and result.stop_reason == "yes"
    assert result.answer == "the answer" and result.llm_calls == 5
    # each first-turn prompt lists the visited nodes in visit order, one more each time
    assert [p.count("\n* ") for p in controller.prompts] == [2, 3, 4, 5]


def test_search_never_revisits_and_ends_when_every_node_is_visited():
    graph = hand_graph()
    result, _ = search(graph, "Anything?", [])
    assert sorted(result.visited) == sorted(n.id for n in graph.nodes)
    assert len(set(result.visited)) == len(result.visited)
    assert result.stop_reason == "exhausted" and len(result.replies) == len(graph.nodes) - 1
    # No "Yes" was said: no "Yes" turn is invented; the answer is asked as from incomplete information.
    assert not result.complete and result.answer == "the answer from what there is"


def test_search_stops_at_max_steps_and_at_the_token_budget():
    graph = hand_graph()
    result, _ = search(graph, "Anything?", [], max_steps=1)
    assert result.stop_reason == "max_steps" and len(result.visited) == 3 and not result.complete
    room = count_tokens(prompts.FIRST_TURN_HEAD.format(question="Anything?"))
    tight = room + sum(n.tokens + 2 for n in graph.top_level) + 1
    result, _ = search(graph, "Anything?", [], budget=tight)
    assert result.stop_reason == "budget" and result.visited == ["i1", "i2"]


def test_attention_steers_the_search_through_the_edges():
    graph = hand_graph()
    attention = FakeAttention()
    # The question shares words with i1 only, so a = (i1: >0, i2: 0) and z favours i1's children.
    result, _ = search(graph, "Whose bridge spans it?", ["No", "Yes"], attention=attention, embedding_search=False)
    assert result.scoring == "attention"
    assert result.visited[2] == "c1"  # e(i1, c1) = .75 beats e(i1, c2) = .25
    # KV reuse: the session saw the top level once, then only each new node
    assert attention.appended == [[graph.node("i1").text, graph.node("i2").text], [graph.node("c1").text]]


def test_without_attention_the_search_follows_embedding_similarity():
    graph = hand_graph()
    result, _ = search(graph, "Mount Ardun high", ["No", "Yes"])
    assert result.scoring == "embedding"
    assert result.visited[2] == "c4"


# ---- graph construction with a scripted LLM ----------------------------------------------------


def garlic_llm(*, answer="Orrin River", yes_after=2, summary=None):
    """Summaries: one bullet per pair of input lines (their first clauses); Yes once the prompt
    lists ``yes_after`` more nodes than the top level; a fixed answer."""
    state = {"first": None}

    def pairs(prompt):
        body = prompt[len(prompts.SUMMARIZE_HEAD) : prompt.index(prompts.SUMMARIZE_TAIL)]
        segments = [line[2:] for line in body.splitlines() if line.startswith("* ")]
        return "\n".join(
            "* " + " and ".join(s.split(".")[0] for s in segments[i : i + 2]) + "." for i in range(0, len(segments), 2)
        )

    def respond(prompt):
        if "answer the question as concisely as you can" in prompt.lower():
            return answer
        if prompt.startswith("Can this question be answered"):
            count = prompt.count("\n* ")
            state["first"] = state["first"] or count
            return "Yes" if count >= state["first"] + yes_after else "No"
        if prompt.startswith(prompts.SUMMARIZE_HEAD):
            return (summary or pairs)(prompt)
        raise AssertionError(prompt[:200])

    return ScriptedLLM(respond)


@pytest.fixture(scope="module")
def docs():
    return [p.to_llama_index() for p in load_documents(DEMO)]


CONFIG = GarlicConfig(n_s=1200, summary_tokens=200, search_window=4096)


def build(docs, tmp_path, llm=None, attention=None, config=CONFIG, max_concurrency=1):
    return GarlicIndex.from_documents(
        docs, llm=llm or garlic_llm(), embed_model=HashEmbedding(), attention_model=attention, config=config,
        show_progress=False, cache=tmp_path / "calls.sqlite", max_concurrency=max_concurrency,
    )


@pytest.fixture(scope="module")
def index(docs, tmp_path_factory):
    return build(docs, tmp_path_factory.mktemp("garlic"))


def test_chunks_hold_at_most_300_tokens_and_keep_document_order(docs):
    chunks = chunk_documents(docs, 300)
    assert all(c.tokens <= 300 and c.level == 1 for c in chunks)
    order = [d for c in chunks for d in c.doc_ids]
    assert order == [d.doc_id for d in docs]
    from llama_index.core.schema import Document

    titled = chunk_documents([Document(text="It spans the Orrin.", metadata={"title": "Kesh Bridge"})], 300)
    assert titled[0].text == "Kesh Bridge\nIt spans the Orrin."  # the title leads its document's text


def test_batches_are_consecutive_and_within_the_budget():
    nodes = [GraphNode(str(i), "x", 1, 100) for i in range(10)]
    batches = make_batches(nodes, 350)
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [n.id for b in batches for n in b] == [str(i) for i in range(10)]
    assert [len(b) for b in make_batches([GraphNode("big", "x", 1, 999)], 350)] == [1]


def test_information_points_are_read_from_bullets_lines_or_sentences():
    assert parse_information_points("* A is B.\n- C is D.\n1. E is F.\n* summary point") == (
        ["A is B.", "C is D.", "E is F."], True)
    assert parse_information_points("A is B.\nC is D.") == (["A is B.", "C is D."], False)
    assert parse_information_points("A is B. C is D.") == (["A is B.", "C is D."], False)
    assert parse_information_points("  ") == ([], False)


def test_graph_levels_shrink_to_one_batch_and_edges_point_one_level_down(index):
    graph = index.graph
    levels = graph.levels
    assert len(levels) >= 3 and levels[1] and all(len(levels[k]) < len(levels[k - 1]) for k in list(levels)[1:])
    stats = index.stats()
    assert stats["batches_per_level"][str(max(levels) - 1)] == 1  # the top level came from one batch
    for parent, kids in graph.edges.items():
        assert graph.node(parent).level >= 2
        assert all(graph.node(k).level == graph.node(parent).level - 1 for k in kids)
        assert sum(kids.values()) == pytest.approx(1.0)
    assert all(graph.children(n.id) for n in graph.nodes if n.level > 1)
    assert stats["edge_source"] == "embedding" and index.mode == "embedding"
    assert stats["llm"]["calls"] == sum(stats["batches_per_level"].values())


def test_summary_prompt_is_table_4(docs, tmp_path):
    llm = garlic_llm()
    build(docs, tmp_path, llm=llm)
    first = llm.prompts[0]
    assert first.startswith("Summary the following information. Each segment is separated by a new line symbol.\n* Astrel is a small")
    assert first.endswith("Do not provide any explanation and start the summary directly.")
    assert llm.calls_kwargs[0]["max_tokens"] == 200


def test_attention_edges_come_from_the_attention_model(docs, tmp_path):
    class SlowAttention(FakeAttention):
        def summary_edges(self, prompt, reply, inputs, outputs):
            time.sleep(0.02)  # a forward pass of the attention model
            return super().summary_edges(prompt, reply, inputs, outputs)

    index = build(docs, tmp_path, attention=SlowAttention())
    stats = index.stats()
    assert stats["edge_source"] == "attention" and index.mode == "embedding"  # the search reads no attention by default
    assert stats["attention_seconds"] >= 0.02 * sum(stats["batches_per_level"].values())  # model time outside LLM calls
    for parent, kids in index.graph.edges.items():
        best = max(kids, key=kids.get)
        shared = len(words(index.graph.node(parent).text) & words(index.graph.node(best).text))
        assert shared == max(len(words(index.graph.node(parent).text) & words(index.graph.node(k).text)) for k in kids)


def test_by_default_attention_weights_the_edges_and_the_search_reads_embeddings(docs, tmp_path):
    """Issue 41: the 1.5B's attention search reached fewer chunks than the query's similarity; the default
    keeps the attention edges and searches by embedding, and attention_search=True is the paper's search."""
    attention = FakeAttention()
    index = build(docs, tmp_path, attention=attention)
    appended = len(attention.appended)
    response = index.as_query_engine().query("Which river does the Kesh Bridge cross?")
    assert response.metadata["scoring"] == "embedding" and len(attention.appended) == appended  # no attention session
    paper = build(docs, tmp_path, attention=attention, config=CONFIG.model_copy(update={"attention_search": True}))
    assert paper.as_query_engine().query("Which river does the Kesh Bridge cross?").metadata["scoring"] == "attention+embedding"
    assert len(attention.appended) > appended


def test_query_engine_returns_visited_nodes_calls_and_mode(index):
    response = index.as_query_engine().query("Which river does the Kesh Bridge cross?")
    meta = response.metadata
    assert response.response == "Orrin River"
    top = [n.id for n in index.graph.top_level]
    assert meta["visited"][: len(top)] == top and len(meta["visited"]) == len(top) + 2
    assert [n.node.node_id for n in response.source_nodes] == meta["visited"]
    assert meta["replies"] == ["No", "No", "Yes"] and meta["stop_reason"] == "yes"
    assert meta["llm_calls"] == 4 and meta["scoring"] == "embedding"


def test_the_answers_evidence_attributes_points_to_the_batch_they_were_summarized_from(index):
    """Issue 43: an information point was attributed to no passage."""
    from llama_index_garlic.method import GarlicAnswerer

    answer = GarlicAnswerer(index).answer("Which river does the Kesh Bridge cross?")
    assert answer.evidence and {e.kind for e in answer.evidence} <= {"chunk", "information_point"}
    for unit in answer.evidence:
        node = index.graph.node(unit.id)
        holds, written_from = (unit.passage_ids, unit.source_ids) if unit.kind == "chunk" else (unit.source_ids, unit.passage_ids)
        assert holds == list(node.doc_ids) and written_from == []


def test_stop_patience_keeps_searching_after_a_yes(index):
    one = index.as_query_engine(stop_patience=1).query("Which river does the Kesh Bridge cross?")
    three = index.as_query_engine(stop_patience=3).query("Which river does the Kesh Bridge cross?")
    assert three.metadata["replies"] == ["No", "No", "Yes", "Yes", "Yes"]
    assert len(three.metadata["visited"]) == len(one.metadata["visited"]) + 2


async def test_retriever_and_query_engine_work_inside_a_running_event_loop(index):
    nodes = await index.as_retriever().aretrieve("Who designed the Kesh Bridge?")
    response = await index.as_query_engine().aquery("Who designed the Kesh Bridge?")
    assert [n.node.node_id for n in nodes] == response.metadata["visited"]
    assert asyncio.get_running_loop().is_running()


def test_persist_and_reload_round_trip(index, tmp_path):
    index.persist(tmp_path / "g")
    again = GarlicIndex.from_persist_dir(
        tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding(), cache=tmp_path / "calls.sqlite"
    )
    assert [n.id for n in again.graph.nodes] == [n.id for n in index.graph.nodes]
    assert again.graph.edges == index.graph.edges
    np.testing.assert_allclose(again.graph.embeddings, index.graph.embeddings, rtol=1e-6)
    assert again.config == index.config
    assert {k: v for k, v in again.stats().items() if k != "cache"} == {k: v for k, v in index.stats().items() if k != "cache"}
    question = "Into which lake does the Orrin River flow?"
    assert again.search(question).visited == index.search(question).visited


def test_a_store_that_recorded_the_command_lines_attention_setting_still_loads(index, tmp_path):
    """Stores written before 2026-11-29 recorded the command line's ``attention_model`` among the index's
    settings, which the index now refuses as a misspelt setting."""
    index.persist(tmp_path / "g")
    manifest = json.loads((tmp_path / "g" / MANIFEST).read_text())
    manifest["config"]["attention_model"] = "auto"
    (tmp_path / "g" / MANIFEST).write_text(json.dumps(manifest))
    again = GarlicIndex.from_persist_dir(tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding())
    assert again.config == index.config


def test_reload_of_a_folder_without_an_index_says_so(tmp_path):
    with pytest.raises(IndexFolderError, match="no garlic index"):
        GarlicIndex.from_persist_dir(tmp_path, llm=garlic_llm(), embed_model=HashEmbedding())


def test_second_build_is_answered_from_the_cache(docs, tmp_path):
    build(docs, tmp_path)
    llm = garlic_llm(summary=lambda prompt: pytest.fail("the cache should answer"))
    again = build(docs, tmp_path, llm=llm)
    assert again.stats()["llm"]["calls"] == 0 and again.stats()["llm"]["cache_hits"] > 0


def test_a_reply_without_points_is_retried_once_then_skipped_and_counted(docs, tmp_path):
    def summary(prompt):
        if prompt.endswith(prompts.BULLET_REMINDER) or "Velmora" not in prompt:
            return "* " + prompt.split("* ")[1].split(".")[0] + "."
        return ""

    index = build(docs, tmp_path, llm=garlic_llm(summary=summary))
    stats = index.stats()
    assert stats["retried_replies"] >= 1 and stats["skipped_batches"] == 0

    index = build(docs, tmp_path / "b", llm=garlic_llm(summary=lambda p: "" if "Velmora" in p else "* A point."))
    assert index.stats()["skipped_batches"] >= 1
    assert all(n.text != "" for n in index.graph.nodes)


def test_a_level_whose_every_batch_fails_stops_the_build_with_the_reason(docs, tmp_path):
    def summary(prompt):
        raise ConnectionError("model server is down")

    with pytest.raises(RuntimeError, match="every summarization batch of level 1 failed.*server is down"):
        build(docs, tmp_path, llm=garlic_llm(summary=summary))


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one document"):
        GarlicIndex.from_documents([], llm=garlic_llm(), embed_model=HashEmbedding())
    with pytest.raises(ValueError, match="raise n_s"):
        build([load_documents(DEMO)[0].to_llama_index()], tmp_path, config=GarlicConfig(n_s=400))
    with pytest.raises(TypeError, match="attention_model"):
        build([load_documents(DEMO)[0].to_llama_index()], tmp_path, attention=42)


def test_a_bare_yes_to_the_answer_turn_is_asked_once_more_in_a_fresh_prompt():
    from llama_index_garlic import prompts
    from llama_index_garlic.search import LLMController

    llm = ScriptedLLM(lambda prompt: "Lake Ismay" if "\nAnswer:" in prompt else "Yes")
    controller = LLMController(llm)
    question = "Into which lake does the Orrin flow?"
    first = prompts.FIRST_TURN.format(question=question, information=prompts.bullet("The Orrin flows into Lake Ismay."))
    assert controller.answer(first, question) == "Lake Ismay"
    assert controller.echoes == 1 and controller.calls == 2
    retry = llm.prompts[-1]
    assert "Yes" not in retry.split("Question:")[0]  # no Table 5 conversation: one user turn
    assert "* The Orrin flows into Lake Ismay." in retry and "Response \"Yes\" or \"No\"" not in retry
    # a yes/no question keeps its Yes
    assert controller.answer("Can this question … ", "Is Velmora on the Orrin?") == "Yes"
    assert controller.echoes == 1 and controller.calls == 3


@pytest.mark.parametrize("reply", ["Yes, the question can be answered by the information provided.", "No."])
def test_a_yes_or_no_leading_the_answer_turn_is_asked_again_but_an_answer_is_kept(reply):
    from llama_index_garlic import prompts
    from llama_index_garlic.search import LLMController

    llm = ScriptedLLM(lambda prompt: "Lake Ismay" if "\nAnswer:" in prompt else reply)
    controller = LLMController(llm)
    first = prompts.FIRST_TURN.format(question="Into which lake?", information=prompts.bullet("Lake Ismay."))
    assert controller.answer(first, "Into which lake does the Orrin flow?") == "Lake Ismay"
    assert controller.echoes == 1
    for answer in ("Norway", "Nobel Peace Prize", "Yesenia Ortiz"):  # "No…"/"Yes…" words are answers
        controller = LLMController(ScriptedLLM(lambda prompt, answer=answer: answer))
        assert controller.answer(first, "Who won?") == answer and controller.echoes == 0


def test_the_short_answer_setting_asks_every_answer_prompt_for_as_few_words_as_possible():
    """Issue 41: the 1.5B answers Table 5's "as concisely as you can" with a whole sentence in 10 of 20 runs;
    ``short_answer`` adds the instruction every other method's reader has (SiReRAG §5.4) to each answer prompt."""
    from llama_index_garlic import prompts
    from llama_index_garlic.search import LLMController

    question = "Into which lake does the Orrin flow?"
    first = prompts.FIRST_TURN.format(question=question, information=prompts.bullet("The Orrin flows into Lake Ismay."))
    for short in (False, True):
        llm = ScriptedLLM(lambda prompt: "Yes" if 'Response "Yes"' in prompt else "Lake Ismay")  # a bare Yes in the conversation
        controller = LLMController(llm, short_answer=short)
        controller.answer(first, question)  # the second turn, then (after a bare Yes) the fresh retry
        controller.answer_incomplete(prompts.bullet("The Orrin flows into Lake Ismay."), question)
        assert len(llm.prompts) == 3
        assert all((prompts.SHORT_ANSWER in p) is short for p in llm.prompts)


def test_a_comparison_in_time_is_decided_by_the_years_the_visited_nodes_give(docs, tmp_path):
    """``compare_years`` (ours, as SiReRAG's): the search answers, then its visited nodes are asked for each option's
    year; two years that decide replace the search's answer (kept in the metadata and the answer's info); undecided
    years, other questions and the setting off keep the search's answer."""
    from llama_index_garlic.method import GarlicAnswerer
    from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine

    undecided = "Which came first, Velmora or Royal Academy of Sciences?"

    def years(prompt: str) -> str:
        if undecided in prompt:
            return "Velmora: unknown\nRoyal Academy of Sciences: founded 1735"
        return "Kesh Bridge: completed 1788\nRoyal Academy of Sciences: founded 1735"

    searching = garlic_llm(answer="Kesh Bridge")
    llm = ScriptedLLM(lambda prompt: years(prompt) if "Do not answer it yet" in prompt else searching.script(prompt))
    question = "Which came first, Kesh Bridge or Royal Academy of Sciences?"
    index = build(docs, tmp_path, llm=llm, config=CONFIG.model_copy(update={"compare_years": True}))
    engine = index.as_query_engine()
    assert isinstance(engine, ComparisonsDecidedQueryEngine) and list(engine.kinds) == ["years", "quantities"]
    response = engine.query(question)
    assert response.response == "Royal Academy of Sciences" and response.metadata["decided_by"] == "years"
    assert response.metadata["engine_answer"] == "Kesh Bridge" and response.metadata["stop_reason"] == "yes"
    assert [n.node.node_id for n in response.source_nodes] == response.metadata["visited"]
    assert asyncio.run(engine.aquery(question)).metadata["decided_by"] == "years"  # the same, awaited
    first = index.graph.node(response.metadata["visited"][0]).text
    assert any("Do not answer it yet" in p and first in p for p in llm.prompts)  # the visited nodes, read
    answer = GarlicAnswerer(index).answer(question)
    assert answer.text == "Royal Academy of Sciences"
    assert answer.info["decided_by"] == "years" and answer.info["search_answer"] == "Kesh Bridge"
    asked = len(llm.prompts)
    assert engine.query("Which river does the Kesh Bridge cross?").response == "Kesh Bridge"
    assert not any("Do not answer it yet" in p for p in llm.prompts[asked:])  # no two options: no years asked
    assert engine.query(undecided).response == "Kesh Bridge"
    assert "decided_by" not in GarlicAnswerer(index).answer(undecided).info
    assert list(build(docs, tmp_path / "default", llm=llm).as_query_engine().kinds) == ["quantities"]  # type: ignore[attr-defined]
    paper = CONFIG.model_copy(update={"compare_quantities": False})  # Table 5's answer for every question
    assert not isinstance(build(docs, tmp_path / "paper", llm=llm, config=paper).as_query_engine(), ComparisonsDecidedQueryEngine)


def test_attention_model_takes_the_llm_spec_aliases(monkeypatch, tmp_path):
    from llama_index_garlic import TransformersAttention
    from multihop_rag.serving import bundled

    # `--llm llamacpp:default` hands "default" on to the attention model, which resolves it like the LLM
    monkeypatch.setattr(bundled, "gguf_path", lambda alias: tmp_path / f"resolved-{alias}.gguf")
    with pytest.raises(FileNotFoundError, match="resolved-default.gguf"):
        TransformersAttention.from_pretrained("default")


def test_auto_weights_edges_by_attention_only_for_a_search_that_reads_them():
    """Only the attention search (§3.2.2's z = Eᵀa) reads the edges' weights; with the default search (query–node
    similarity) a llamacpp build's attention passes — 70–80 % of a build on the 1.5B — changed no answer."""
    from llama_index_garlic.method import GarlicSettings, attention_source

    assert attention_source(GarlicSettings(), "llamacpp:default") is None
    assert attention_source(GarlicSettings(attention_search=True), "llamacpp:default") == "default"
    assert attention_source(GarlicSettings(attention_search=True), "ollama:qwen2.5:7b") is None  # a served model: no weights here
    assert attention_source(GarlicSettings(attention_model="/m/q.gguf"), "llamacpp:default") == "/m/q.gguf"  # asked for: kept
    assert attention_source(GarlicSettings(attention_search=True, attention_model="none"), "llamacpp:default") is None


def test_search_budget_leaves_a_margin_of_the_llms_context():
    # tiktoken counts; Qwen2.5 counted 3.5% more and the 8,192 window overflowed: keep 10% free
    assert GarlicConfig().search_budget(8192) == int(8192 * 0.9) - 256
    assert GarlicConfig(search_window=2048).search_budget(8192) == 2048 - 256  # a smaller window stays
    assert GarlicConfig(n_s=8192).search_budget(None) == 8192 - 256  # unknown context: the window as given


# ---- issue 22: GARLIC as the paper describes it -------------------------------------------------


def test_an_incomplete_search_is_answered_without_an_invented_yes(index):
    """Issue 22: a search that stopped for the budget, max_steps or exhaustion put a "Yes" the model
    never said into the answer conversation."""
    seen = []
    llm = garlic_llm(yes_after=10_000)  # never "Yes"

    def spy(prompt):
        seen.append(prompt)
        return llm.script(prompt)

    index.llm = ScriptedLLM(spy)
    try:
        response = index.as_query_engine().query("Into which lake does the Orrin River flow?")
    finally:
        index.llm = garlic_llm()
    assert response.metadata["complete"] is False and response.metadata["stop_reason"] != "yes"
    assert "may be incomplete" in seen[-1] and not any(p == "Yes" for p in seen)


def test_without_dynamic_progress_control_a_fixed_number_of_nodes_and_no_yes_no():
    """Table 2's "w/o Dynamic Progress Control"."""
    graph = hand_graph()
    result, controller = search(graph, "Who designed the bridge?", ["Yes"], dynamic_progress_control=False, fixed_nodes=3)
    assert len(result.visited) == 3 and result.replies == [] and result.stop_reason == "fixed_nodes"
    assert controller.prompts == []  # no Yes/No call
    # the start is limited to fixed_nodes / levels top-level nodes, the most query-similar
    result, _ = search(graph, "Who designed the bridge?", [], dynamic_progress_control=False, fixed_nodes=2)
    assert result.visited[0] == "i1" and len(result.visited) == 2


def test_start_nodes_starts_from_the_most_query_similar_top_level_nodes_and_asks_yes_no():
    """Issue 41: the pooled corpus's top level (19 points on HotpotQA's tuning pool) filled the search before it
    reached a chunk; ``start_nodes`` starts from the most query-similar ones, with Dynamic Progress Control on."""
    graph = hand_graph()
    result, _ = search(graph, "Who designed the bridge?", ["No", "Yes"], start_nodes=1)
    assert result.visited[0] == "i1" and result.scores[0] is None and result.scores[1] is not None
    assert result.replies == ["No", "Yes"] and result.stop_reason == "yes" and len(result.visited) == 2
    whole, _ = search(graph, "Who designed the bridge?", ["Yes"])
    assert whole.visited == ["i1", "i2"]  # None: the whole top level (§3.2.1)


def test_start_from_all_levels_starts_from_the_most_query_similar_nodes_of_any_level():
    """Issue 41: on the run of record's pools the top level is 48–96 paraphrases of unrelated passages, and the 1.5B
    answered from the 4 it started from; ``start_from="all_levels"`` starts from the most query-similar nodes of the
    whole graph, chunks included."""
    graph = hand_graph()
    similarity = graph.similarity(HashEmbedding()._vector("Who designed the Kesh Bridge?"))
    best = [graph.nodes[i].id for i in np.argsort(-similarity)[:2]]
    result, _ = search(graph, "Who designed the Kesh Bridge?", ["Yes"], start_nodes=2, start_from="all_levels")
    assert result.visited == best and result.scores == [None, None] and result.replies == ["Yes"]
    assert any(node.startswith("c") for node in result.visited)
    top, _ = search(graph, "Who designed the Kesh Bridge?", ["Yes"], start_nodes=2)
    assert sorted(top.visited) == ["i1", "i2"]  # "top_level" (§3.2.1): the top level's most similar


def test_ask_after_chunk_asks_yes_no_only_once_a_chunk_is_in_the_information():
    """Issue 41: the 1.5B said "Yes" over top-level paraphrases before any chunk in most searches of the run of
    record's pools; with ``ask_after_chunk`` the search goes down without a Yes/No until it has read a chunk."""
    graph = hand_graph()
    result, controller = search(graph, "Who designed the bridge?", ["Yes"], start_nodes=1, ask_after_chunk=True)
    levels = {node.id: node.level for node in graph.nodes}
    first_chunk = next(i for i, node in enumerate(result.visited) if levels[node] == 1)
    assert first_chunk == len(result.visited) - 1  # it stopped on the first Yes, asked once the chunk was in
    assert result.replies == ["Yes"] and result.stop_reason == "yes" and len(controller.prompts) == 1
    paper, _ = search(graph, "Who designed the bridge?", ["Yes"], start_nodes=1)
    assert paper.visited == ["i1"]  # False (§3.2.1): asked from the first step


def test_by_default_the_index_searches_from_the_four_most_query_similar_top_level_points(index, monkeypatch):
    """Issue 41: start_nodes=4 read 9 nodes a search instead of 24 on HotpotQA's tuning pool, with F1 up; the
    paper's whole top level is start_nodes=None."""
    from llama_index_garlic import index as index_module

    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs["start_nodes"])
        return graph_search(*args, **kwargs)

    monkeypatch.setattr(index_module, "graph_search", spy)
    index.as_retriever().retrieve("Which river does the Kesh Bridge cross?")
    assert seen == [4]


@pytest.mark.parametrize(("mode", "levels"), [("tree", None), ("none", 1)])
def test_without_graph_based_summary(docs, tmp_path, mode, levels):
    """Table 2's "w/o Graph-based Summary": one summary node per batch (a tree, Figure 2b); and a
    search over the level-1 chunks only."""
    index = build(docs, tmp_path / mode, config=CONFIG.model_copy(update={"summary": mode}))
    per_level = {lvl: len(nodes) for lvl, nodes in index.graph.levels.items()}
    if levels is not None:
        assert list(per_level) == [1] and index.stats()["llm"]["calls"] == 0
    else:
        batches = index.stats()["batches_per_level"]
        assert all(per_level[int(lvl) + 1] == n for lvl, n in batches.items())  # one node per batch
    response = index.as_query_engine().query("Into which lake does the Orrin River flow?")
    assert response.metadata["visited"]


def test_the_attention_model_is_recorded_and_checked_on_reload(docs, tmp_path):
    """Issue 22: a reload without the attention model silently ran in embedding mode; a different model
    would score the search with attention that does not match the edges."""
    index = build(docs, tmp_path, attention=FakeAttention(), config=CONFIG.model_copy(update={"attention_search": True}))
    index.persist(tmp_path / "g")
    assert json.loads((tmp_path / "g" / "multihop_rag.json").read_text())["attention_model"] == "fake"
    with pytest.warns(UserWarning, match="embedding mode"):
        again = GarlicIndex.from_persist_dir(tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding())
    assert again.mode == "embedding"

    class Other(FakeAttention):
        name = "other"

    with pytest.raises(ValueError, match="'fake', not 'other'"):
        GarlicIndex.from_persist_dir(tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding(), attention_model=Other())
    assert GarlicIndex.from_persist_dir(
        tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding(), attention_model=FakeAttention()
    ).mode == "attention"


def test_failed_span_alignment_is_counted_and_makes_the_edges_mixed(docs, tmp_path):
    class SometimesLost(FakeAttention):
        def summary_edges(self, prompt, reply, inputs, outputs):
            return None if "Velmora" in prompt else super().summary_edges(prompt, reply, inputs, outputs)

    index = build(docs, tmp_path, attention=SometimesLost())
    stats = index.stats()
    assert stats["alignment_failures"] >= 1 and stats["edge_source"] == "mixed"
    assert stats["embedding_edge_batches"] == stats["alignment_failures"]


def test_a_build_from_the_same_cache_replays_the_attention_edges(docs, tmp_path):
    """The attention passes are most of a build; a build resumed from the committed call cache (another
    machine, the index folder gone) replays them as it replays the LLM calls."""

    class Counted(FakeAttention):
        passes = 0

        def summary_edges(self, prompt, reply, inputs, outputs):
            Counted.passes += 1
            return None if "Velmora" in prompt else super().summary_edges(prompt, reply, inputs, outputs)

    first = build(docs, tmp_path, attention=Counted())
    passes = Counted.passes
    assert passes >= 2
    again = build(docs, tmp_path, attention=Counted())  # a fresh index over the same cache file
    assert Counted.passes == passes  # no pass made again, a failed alignment included
    assert again.graph.edges == first.graph.edges and again.stats()["alignment_failures"] >= 1
    other = build(docs, tmp_path / "elsewhere", attention=Counted())  # another cache: computed
    assert Counted.passes == 2 * passes and other.graph.edges == first.graph.edges


def test_build_counters_are_exact_under_concurrent_workers(docs, tmp_path):
    """Counters updated from worker threads lose no update (issue 22)."""
    config = CONFIG.model_copy(update={"n_s": 700, "summary_tokens": 100})
    unbulleted = garlic_llm(summary=lambda prompt: prompt.split("* ")[1].split(".")[0] + ".")
    index = build(docs, tmp_path, llm=unbulleted, config=config, max_concurrency=8)
    stats = index.stats()
    assert stats["unbulleted_replies"] == sum(stats["batches_per_level"].values()) - stats["skipped_batches"]


def test_a_summary_cut_at_the_cap_loses_its_last_point(docs, tmp_path):
    cut = ScriptedLLM(lambda prompt: ("* The Orrin River flows into Lake Ismay.\n* Velmora was foun", "length")
                      if prompt.startswith(prompts.SUMMARIZE_HEAD) else "No")
    index = build(docs, tmp_path, llm=cut, config=CONFIG.model_copy(update={"max_levels": 1}))
    texts = [n.text for n in index.graph.nodes if n.level == 2]
    assert "Velmora was foun" not in texts and "The Orrin River flows into Lake Ismay." in texts
    assert index.stats()["truncated_replies"] >= 1


# ---- issue 25: updates at the cost of the change ---------------------------------------------


def consistent(index):
    graph = index.graph
    for parent, children in graph.edges.items():
        assert parent in graph.position and all(c in graph.position for c in children)
        assert graph.node(parent).level == graph.node(next(iter(children))).level + 1
    assert stored_ids(index.vector_store) == {n.id for n in graph.nodes}
    chunk_docs = {d for n in graph.levels[1] for d in n.doc_ids}
    assert chunk_docs == set(index.documents)


def test_an_added_document_summarizes_only_new_and_changed_batches(docs, tmp_path):
    small = CONFIG.model_copy(update={"n_s": 700, "summary_tokens": 100})
    index = build(docs[:12], tmp_path, config=small)
    calls = index.llm.usage.calls
    index.insert(docs[12:])
    consistent(index)
    update = index.stats()["last_update"]
    assert update["batches_kept"] > 0 and update["llm_calls"] == index.llm.usage.calls - calls
    full = build(docs, tmp_path / "full", config=small).stats()["rewritten_batches"]
    assert update["batches_rewritten"] < full


def test_a_removed_document_leaves_no_trace(docs, tmp_path):
    index = build(docs, tmp_path)
    gone = docs[4].doc_id
    index.delete_ref_doc(gone)
    consistent(index)
    assert not any(gone in n.doc_ids for n in index.graph.nodes if n.level == 1)
    assert index.stats()["last_update"]["batches_kept"] > 0
    with pytest.raises(KeyError, match="no document"):
        index.delete_ref_doc(gone)


def test_an_updated_graph_reloads_equal_with_chroma(docs, tmp_path):
    from multihop_rag.stores import chroma_vector_store

    index = GarlicIndex.from_documents(docs[:10], llm=garlic_llm(), embed_model=HashEmbedding(), config=CONFIG,
                                       show_progress=False, persist_dir=tmp_path / "g")
    assert type(index.vector_store).__name__ == "ChromaVectorStore"
    changed = Document(id_=docs[2].doc_id, text="Velmora was renamed Quernsby in 1990.", metadata=docs[2].metadata)
    assert index.refresh_ref_docs([changed, docs[3]]) == [True, False]
    index.insert(docs[10:])
    index.persist(tmp_path / "g")
    again = GarlicIndex.from_persist_dir(tmp_path / "g", llm=garlic_llm(), embed_model=HashEmbedding())
    consistent(again)
    assert [n.id for n in again.graph.nodes] == [n.id for n in index.graph.nodes] and again.graph.edges == index.graph.edges
    assert any("Quernsby" in n.text for n in again.graph.levels[1])
    assert stored_ids(chroma_vector_store(tmp_path / "g" / "chroma", "garlic")) == {n.id for n in index.graph.nodes}


# ---- issue 24: levels overlap when there are slots to spare ------------------------------------


def test_a_level_starts_before_the_level_below_is_finished_and_the_graph_is_the_sequential_one(docs, tmp_path):
    """Batching is greedy over consecutive nodes, so every batch of a level but the last is fixed once
    the batches below it are summarized: with slots to spare it starts then, beside the rest of the
    level below, within ``max_concurrency``; the graph is the one a build level by level makes."""
    import threading
    import time

    small = CONFIG.model_copy(update={"n_s": 400, "summary_tokens": 60, "chunk_size": 100})  # 7 batches, then 2
    respond, lock, flying, snapshots, in_order = garlic_llm().script, threading.Lock(), [], [], []
    sequential = build(docs, tmp_path / "one", llm=ScriptedLLM(lambda p: in_order.append(p) or respond(p)), config=small)
    level_one = in_order[: sequential.stats()["batches_per_level"]["1"]]  # one at a time: level 1 goes first
    first_four = threading.Barrier(4)  # the first four calls meet in flight, however slow the machine

    def slow(prompt):
        level = 1 if prompt in level_one else 2
        with lock:
            flying.append(level)
            snapshots.append(list(flying))
            meet = len(snapshots) <= 4
        if meet:
            first_four.wait(timeout=30)
        time.sleep(0.5 if prompt == level_one[-1] else 0.01)  # the level-1 batch the last one above waits for
        with lock:
            flying.remove(level)
        return respond(prompt)

    overlapped = build(docs, tmp_path / "four", llm=ScriptedLLM(slow), config=small, max_concurrency=4)
    assert [n.id for n in overlapped.graph.nodes] == [n.id for n in sequential.graph.nodes]
    assert overlapped.graph.edges == sequential.graph.edges
    assert overlapped.stats()["batches_per_level"] == sequential.stats()["batches_per_level"]
    assert max(len(s) for s in snapshots) == 4
    assert any({1, 2} <= set(s) for s in snapshots)  # a level-1 batch and a higher one in flight together


def test_early_summaries_of_a_level_that_turns_out_too_long_are_dropped(docs, tmp_path):
    """A reply far past its cap (a server that ignores ``max_tokens``) can make a level as long as the one
    below after its first batches started: the level ends the graph, as level by level, and the early
    summaries are not in it."""
    import time

    small = CONFIG.model_copy(update={"n_s": 400, "summary_tokens": 60, "chunk_size": 100})
    respond, in_order = garlic_llm().script, []
    short = build(docs, tmp_path / "probe", llm=ScriptedLLM(lambda p: in_order.append(p) or respond(p)), config=small)
    last_of_level_one = in_order[short.stats()["batches_per_level"]["1"] - 1]
    flood = "\n".join(f"* Point {i} of a reply that ran far past the summary cap." for i in range(80))

    def script(prompt):
        if prompt == last_of_level_one:
            time.sleep(0.5)  # the level above has started by now
            return flood
        return respond(prompt)

    sequential = build(docs, tmp_path / "one", llm=ScriptedLLM(script), config=small)
    overlapped = build(docs, tmp_path / "four", llm=ScriptedLLM(script), config=small, max_concurrency=4)
    assert sequential.stats()["batches_per_level"] == overlapped.stats()["batches_per_level"] == {"1": 7}
    assert [n.id for n in overlapped.graph.nodes] == [n.id for n in sequential.graph.nodes]
    assert overlapped.graph.edges == sequential.graph.edges
    assert overlapped.llm.usage.calls > sequential.llm.usage.calls  # the dropped early summaries were sent


def test_delete_nodes_removes_only_the_documents_the_nodes_stand_for(docs, tmp_path):
    from llama_index.core.schema import Document

    long = Document(id_="long", text=" ".join(f"Sentence {i} of the long Astrel chronicle is here." for i in range(80)),
                    metadata={"title": "Chronicle"})
    index = build([long, *docs], tmp_path)
    everything = set(index.documents)
    packed = next(n for n in index.graph.levels[1] if len(n.doc_ids) > 1 and "long" not in n.doc_ids)
    summary = index.graph.levels[2][0]
    for node in (packed, summary):  # no node stands for one of these documents alone: refused, nothing lost
        with pytest.raises(ValueError, match="delete_ref_doc"):
            index.delete_nodes([node.id])
        assert set(index.documents) == everything
    with pytest.raises(KeyError):
        index.delete_nodes(["no-such-node"])
    # every node of a document spanning several chunks, its last one packed with the next document's text
    nodes = index.ref_doc_info["long"].node_ids
    assert len(nodes) >= 2
    index.delete_nodes(nodes)
    assert set(index.documents) == everything - {"long"}
    assert "long" not in index.ref_doc_info and all("long" not in n.doc_ids for n in index.graph.nodes)


def test_a_filling_level_batches_each_node_once(tmp_path, monkeypatch):
    """While a level fills (slots to spare), its batches grow with each summary that comes back: each node
    is batched once, not the whole level again per summary (O(n²) per level, issue 42)."""
    from llama_index_garlic import build as garlic_build

    visits = []
    batches, closed = garlic_build.make_batches, garlic_build._Level.closed_batches

    def counted_batches(nodes, budget):
        visits.append(len(nodes))
        return batches(nodes, budget)

    def counted_closed(level, budget):
        visits.append(len(level.nodes) - level.fed)
        return closed(level, budget)

    monkeypatch.setattr(garlic_build, "make_batches", counted_batches)
    monkeypatch.setattr(garlic_build._Level, "closed_batches", counted_closed)
    docs = [Document(text=" ".join(f"Town{i} lies on river R{i}, fact {j} of it." for j in range(8)), id_=f"d{i}",
                     metadata={"title": f"Town{i}"}) for i in range(120)]
    config = CONFIG.model_copy(update={"n_s": 700, "summary_tokens": 60, "chunk_size": 100})
    index = build(docs, tmp_path, config=config, max_concurrency=4)
    levels = index.graph.levels
    assert len(levels[1]) >= 100 and len(levels) >= 3
    assert sum(visits) <= 2 * len(index.graph.nodes)


def test_an_update_finds_the_documents_packed_with_a_removed_one_in_one_pass(docs, tmp_path, monkeypatch):
    """The documents chunked again beside a removed one come from one pass over the chunks, not one per document."""
    index = build(docs, tmp_path)
    reads = []
    chunks = index.graph.levels[1]

    class Counted(list):
        def __iter__(self):
            reads.append(1)
            return super().__iter__()

    for chunk in chunks:
        chunk.doc_ids = Counted(chunk.doc_ids)
    index.delete_ref_doc(docs[0].doc_id)
    assert docs[0].doc_id not in index.documents
    assert len(reads) <= 3 * len(chunks)


# ---- issue 41: the attention model's products in float32, its weights in bfloat16 --------------


def test_linear_layers_keep_bfloat16_weights_and_multiply_in_float32():
    import copy

    import torch

    from llama_index_garlic.float32_compute import Float32Linear, compute_in_float32

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4, bias=False)).to(torch.bfloat16)
    exact = copy.deepcopy(model).float()  # the same bfloat16 values, in float32
    x = torch.randn(3, 8)
    assert compute_in_float32(model) == 2
    assert all(isinstance(model[i], Float32Linear) for i in (0, 2))
    assert model[0].weight.dtype == torch.bfloat16  # the memory stays half
    out = model(x.to(torch.bfloat16))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, exact(x.to(torch.bfloat16).float()))
    assert compute_in_float32(model) == 0  # nothing left to replace


def test_products_stay_in_the_weights_dtype_where_this_cpu_multiplies_it_faster(monkeypatch):
    """bfloat16 products are several times slower than float32 ones without bfloat16 instructions and 3-4x faster
    with them (AVX-512 BF16): the layers are converted only where the timed product says float32 wins."""
    import torch

    from llama_index_garlic import float32_compute

    def layers() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)).to(torch.bfloat16)

    monkeypatch.setattr(float32_compute, "faster_products", lambda dtype: dtype)
    kept = layers()
    assert float32_compute.float32_products_where_faster(kept) == 0
    assert kept(torch.ones(2, 8, dtype=torch.bfloat16)).dtype == torch.bfloat16

    monkeypatch.setattr(float32_compute, "faster_products", lambda dtype: torch.float32)
    converted = layers()
    assert float32_compute.float32_products_where_faster(converted) == 2
    assert converted(torch.ones(2, 8, dtype=torch.bfloat16)).dtype == torch.float32


def test_the_faster_products_are_timed_once_and_float32_is_never_converted():
    import torch

    from llama_index_garlic.float32_compute import faster_products

    assert faster_products(torch.float32) == torch.float32
    assert faster_products(torch.bfloat16) in (torch.bfloat16, torch.float32)
    assert faster_products.cache_info().currsize >= 2  # a second model load reads the first one's timing


def test_a_decoders_mlps_run_a_block_of_positions_at_a_time_with_the_same_output(monkeypatch):
    """Over a 10,520-token exchange the 1.5B's MLP held 1.1 GB of float32 activations at once; in blocks of
    positions it holds a block's share, the decoder's output (a tiny Qwen2 here) and its weights' names unchanged."""
    import torch
    from transformers import Qwen2Config, Qwen2Model

    from llama_index_garlic import position_blocks
    from llama_index_garlic.position_blocks import InBlocks, mlps_in_blocks

    torch.manual_seed(0)
    decoder = Qwen2Model(Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=40, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1)).eval()
    ids = torch.randint(0, 64, (1, 11))
    names = list(decoder.state_dict())
    with torch.no_grad():
        whole = decoder(input_ids=ids).last_hidden_state

    monkeypatch.setattr(position_blocks, "MLP_BLOCK", 4)
    assert mlps_in_blocks(decoder) == 2
    assert mlps_in_blocks(decoder) == 0  # nothing left to change
    assert list(decoder.state_dict()) == names
    positions_at_once: list[int] = []
    for layer in decoder.layers:
        assert isinstance(layer.mlp.forward, InBlocks) and layer.mlp.forward.block == 4
        layer.mlp.gate_proj.register_forward_hook(lambda _m, args, _out: positions_at_once.append(args[0].shape[1]))
    with torch.no_grad():
        blocked = decoder(input_ids=ids).last_hidden_state

    assert positions_at_once == [4, 4, 3] * 2
    torch.testing.assert_close(blocked, whole)
    with pytest.raises(ValueError, match="at least one position"):
        InBlocks(torch.nn.Identity(), 0)


# ---- a GGUF's weights unpacked once ------------------------------------------------------------


def test_a_gguf_is_unpacked_once_in_a_child_process_and_a_cut_unpacking_starts_over(tmp_path, monkeypatch):
    from llama_index_garlic import gguf_weights

    monkeypatch.setenv("MULTIHOP_RAG_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    children = []

    def child(command, check):
        children.append(command)
        partial = gguf_weights.Path(command[-2])
        assert not partial.exists()  # what a cut unpacking left was removed first
        partial.mkdir(parents=True)
        (partial / "model.safetensors").write_bytes(b"weights")
        return gguf_weights.subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(gguf_weights.subprocess, "run", child)
    folder = gguf_weights.unpacked_weights(gguf, "bfloat16")
    assert folder.name.startswith("tiny-bfloat16-") and (folder / "model.safetensors").read_bytes() == b"weights"
    assert "from llama_index_garlic.gguf_weights import unpack" in children[0][2] and children[0][-1] == "bfloat16"
    assert gguf_weights.unpacked_weights(gguf, "bfloat16") == folder and len(children) == 1  # once

    shutil.rmtree(folder)
    (folder.with_name(folder.name + ".partial") / "stale").mkdir(parents=True)  # cut short last time
    assert gguf_weights.unpacked_weights(gguf, "bfloat16") == folder and len(children) == 2
    assert gguf_weights.unpacked_weights(gguf, "float32") != folder  # one folder per dtype


def test_two_loaders_at_once_unpack_once_and_both_get_the_folder(tmp_path, monkeypatch):
    import threading

    from llama_index_garlic import gguf_weights

    monkeypatch.setenv("MULTIHOP_RAG_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    children, started, finish = [], threading.Event(), threading.Event()

    def child(command, check):
        children.append(command)
        started.set()
        finish.wait(5)  # the first unpacking is still running when the second loader asks
        partial = gguf_weights.Path(command[-2])
        partial.mkdir(parents=True)
        (partial / "model.safetensors").write_bytes(b"weights")
        return gguf_weights.subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(gguf_weights.subprocess, "run", child)
    folders: list = []
    first = threading.Thread(target=lambda: folders.append(gguf_weights.unpacked_weights(gguf, "bfloat16")))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: folders.append(gguf_weights.unpacked_weights(gguf, "bfloat16")))
    second.start()
    second.join(0.5)
    finish.set()
    first.join(5)
    second.join(5)
    assert len(children) == 1  # the second waited for the first instead of starting over in its .partial
    assert len(folders) == 2 and folders[0] == folders[1] and (folders[0] / "model.safetensors").exists()


def test_a_failed_unpacking_says_so_and_leaves_no_folder_that_would_load(tmp_path, monkeypatch):
    from llama_index_garlic import gguf_weights

    monkeypatch.setenv("MULTIHOP_RAG_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")

    def child(command, check):
        gguf_weights.Path(command[-2]).mkdir(parents=True)  # it died half way through
        return gguf_weights.subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(gguf_weights.subprocess, "run", child)
    with pytest.raises(RuntimeError, match="unpacking .*tiny.gguf.* failed .*exit code 1"):
        gguf_weights.unpacked_weights(gguf, "bfloat16")
    assert [p.name.endswith(".partial") for p in (tmp_path / "cache" / "attention").iterdir() if p.is_dir()] == [True]


def test_a_yes_threshold_reads_p_yes_from_a_free_first_token_and_falls_back_to_the_label():
    """Issue 41: asked for ``{"answer": "Yes"|"No"}``, the 1.5B says "Yes" over four unrelated top-level points in
    most searches (ReSP's judge did the same until it read P(Yes) from a free first token). With ``yes_threshold``
    the search goes on until P(Yes) reaches it; a backend returning no logprobs gets the constrained label."""
    import math

    from llama_index_garlic import prompts
    from llama_index_garlic.search import LLMController

    first = prompts.FIRST_TURN.format(question="Into which lake?", information=prompts.bullet("The Orrin flows on."))
    unsure = {"Yes": math.log(0.6), "No": math.log(0.3), "The": math.log(0.1)}  # P(Yes) among the labels: 2/3
    for threshold, label in ((0.5, "Yes"), (0.8, "No")):
        llm = ScriptedLLM(lambda prompt: ("Yes", "stop", unsure))
        controller = LLMController(llm, yes_threshold=threshold)
        assert controller.sufficient(first) == label
        assert controller.calls == 1 and controller.probabilities == [pytest.approx(2 / 3)]
        assert llm.calls_kwargs[0]["top_logprobs"] and llm.calls_kwargs[0]["max_tokens"] == 1
        assert "format" not in llm.calls_kwargs[0] and len(llm.prompts) == 1  # one free first token
    llm = ScriptedLLM(lambda prompt: "No" if llm.calls_kwargs[-1].get("top_logprobs") else '{"answer": "Yes"}')
    controller = LLMController(llm, yes_threshold=0.5)  # no logprobs came back: the label decides
    assert controller.sufficient(first) == "Yes" and controller.calls == 2 and controller.probabilities == [None]
    assert LLMController(ScriptedLLM(lambda prompt: '{"answer": "Yes"}')).sufficient(first) == "Yes"  # the paper's


def test_the_search_records_each_steps_p_yes():
    """The trace keeps what each Yes/No was decided from, so a threshold can be read off the recorded searches."""

    class Judged(Script):
        def __init__(self, replies, probabilities):
            super().__init__(replies)
            self.planned = list(probabilities)

        def sufficient(self, prompt):
            self.probabilities.append(self.planned.pop(0))
            return super().sufficient(prompt)

    controller = Judged(["No", "No", "Yes"], [0.2, None, 0.9])
    result = graph_search(hand_graph(), "Who designed the bridge?", query_embedding=HashEmbedding()._vector("bridge"),
                          controller=controller)
    assert result.replies == ["No", "No", "Yes"] and result.yes_probabilities == [0.2, None, 0.9]
    assert search(hand_graph(), "Who designed the bridge?", ["Yes"])[0].yes_probabilities == []


def test_the_yes_threshold_reaches_the_index_search_and_a_backend_without_logprobs_searches_as_the_paper(index, monkeypatch):
    from llama_index_garlic import index as index_module

    question = "Which river does the Kesh Bridge cross?"
    thresholds = []

    def spy(*args, **kwargs):
        thresholds.append(kwargs["controller"].yes_threshold)
        return graph_search(*args, **kwargs)

    monkeypatch.setattr(index_module, "graph_search", spy)
    paper = index.as_query_engine().query(question).metadata
    monkeypatch.setattr(index, "config", index.config.model_copy(update={"yes_threshold": 0.7}))
    judged = index.as_query_engine().query(question).metadata
    assert thresholds == [None, 0.7]
    assert judged["visited"] == paper["visited"] and judged["replies"] == paper["replies"]
    assert judged["yes_probabilities"] == [None] * len(paper["replies"]) and paper["yes_probabilities"] == []
    assert judged["llm_calls"] == paper["llm_calls"] + len(paper["replies"])  # each asked for P(Yes) first
