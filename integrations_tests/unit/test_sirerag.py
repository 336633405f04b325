"""SiReRAG with deterministic fakes: grouping, trees, pool, ablations, persistence, cache."""

import asyncio
import contextlib
import hashlib
import itertools
import json
import re
import threading
import time

import numpy as np
import pytest
from llama_index.core import Document

from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from integrations_tests.killing import kill_when
from llama_index_sirerag import SiReRAGConfig, SiReRAGIndex, group_aggregates
from llama_index_sirerag.method import SiReRAGAnswerer
from llama_index_sirerag.propositions import HUB_FLOOR, Proposition, filter_entities
from multihop_rag.corpus import load_documents
from multihop_rag.errors import IndexFolderError
from multihop_rag.indexing.text import count_tokens, split_sentences
from multihop_rag.stores import stored_ids

DEMO = "multihop_rag/data/demo_corpus.jsonl"


def prop(pid, chunk, order, text, *entities):
    return Proposition(pid, chunk, order, text, tuple(entities))


def test_grouping_keeps_document_blocks_in_order_and_matches_case_insensitively():
    props = [
        prop("p3", "c2", (1, 0), "Velmora hosts a festival.", "velmora"),
        prop("p1", "c1", (0, 0), "Velmora lies on the Orrin.", "Velmora", "Orrin River"),
        prop("p2", "c1", (0, 1), "The Orrin flows to Lake Ismay.", "Orrin River", "Lake Ismay"),
        prop("p4", "c3", (2, 0), "The Orrin is 412 km long.", "ORRIN  river"),
    ]
    aggs = {a.entities[0]: a for a in group_aggregates(props)}
    assert aggs["Velmora"].proposition_ids == ["p1", "p3"]
    assert aggs["Velmora"].text == "Velmora lies on the Orrin.\nVelmora hosts a festival."
    assert aggs["Orrin River"].proposition_ids == ["p1", "p2", "p4"]


def test_entityless_propositions_are_dropped_and_singletons_follow_the_rule():
    props = [
        prop("p1", "c1", (0, 0), "Drug sales are high.", ),
        prop("p2", "c1", (0, 1), "Kesh Bridge spans the Orrin.", "Kesh Bridge", "Orrin"),
        prop("p3", "c2", (1, 0), "The Orrin ends in Lake Ismay.", "Orrin"),
        prop("p4", "c3", (2, 0), "Mount Ardun is 3,120 m high.", "Mount Ardun"),
    ]
    aggs = group_aggregates(props)
    texts = [a.text for a in aggs]
    assert not any("Drug" in t for t in texts)
    # "Kesh Bridge" has one proposition that also lives in the Orrin aggregate: dropped.
    assert all(a.entities != ["Kesh Bridge"] for a in aggs)
    # "Mount Ardun"'s single proposition lives nowhere else: kept.
    assert ["Mount Ardun"] in [a.entities for a in aggs]


def test_a_propositions_tokens_are_counted_once_whatever_the_entities_it_names(monkeypatch):
    import llama_index_sirerag.propositions as propositions

    counted = []
    monkeypatch.setattr(propositions, "count_tokens", lambda text: counted.append(text) or len(text.split()))
    props = [prop(f"p{i}", "c1", (0, i), f"Fact {i} joins Ardun, Orrin and Velmora.", "Ardun", "Orrin", "Velmora")
             for i in range(4)]
    aggs = group_aggregates(props, max_tokens=16)
    assert sorted(counted) == sorted(p.text for p in props)
    assert {len(a.proposition_ids) for a in aggs} == {2}  # cut by the counted tokens: 8 + 1 a proposition


def test_identical_aggregates_are_kept_once_with_both_entities():
    props = [
        prop("p1", "c1", (0, 0), "Ismay II founded the Academy.", "Ismay II", "Royal Academy"),
        prop("p2", "c1", (0, 1), "The Academy was founded in 1735 by Ismay II.", "Ismay II", "Royal Academy"),
    ]
    aggs = group_aggregates(props)
    assert len(aggs) == 1 and aggs[0].entities == ["Ismay II", "Royal Academy"]


def test_the_entity_filter_drops_common_nouns_and_hub_entities_before_grouping():
    """Issue 41: the 1.5B tags propositions with common nouns ("drummer", "director"; §4.2 and Figure 3 want
    none) and hubs such as a country, whose aggregates crowd the top ranks with unrelated propositions."""
    props = [prop(f"p{i}", f"c{i}", (i, 0), f"Band {i} is from Norland.", f"Band {i}", "Norland", "drummer")
             for i in range(12)]
    props += [prop("q1", "c1", (1, 1), "Tomas Halvard drummed for Band 1.", "Tomas Halvard", "Band 1", "drummer"),
              prop("q2", "c20", (20, 0), "Tomas Halvard was born in Dunmere.", "Tomas Halvard", "Dunmere", "1820s")]
    paper = {e for a in group_aggregates(props) for e in a.entities}
    assert {"Norland", "drummer", "Tomas Halvard"} <= paper
    kept = filter_entities(props, drop_common_nouns=True, max_chunk_share=0.5)
    grouped = {e for a in group_aggregates(kept) for e in a.entities}
    assert "drummer" not in grouped and "Norland" not in grouped  # a common noun; a hub in 12 of 13 chunks
    assert "Tomas Halvard" in grouped  # a bridge entity
    assert kept[-1].entities == ("Tomas Halvard", "Dunmere", "1820s")  # a digit makes no common noun
    assert [p.text for p in kept] == [p.text for p in props]  # propositions kept, only their entities filtered
    # a hub needs more than the share and at least HUB_FLOOR chunks: in a small corpus nothing is a hub
    few = [p for p in props if p.chunk_id in {f"c{i}" for i in range(4)}]
    assert len({p.chunk_id for p in few}) < HUB_FLOOR
    assert any("Norland" in p.entities for p in filter_entities(few, max_chunk_share=0.1))
    assert filter_entities(props) == props  # the paper's behaviour: every entity the model gave


def fake_llm(fail_chunks: tuple[str, ...] = (), fail_summaries: bool = False):
    """Facts = sentences, entities = capitalised words; summaries = the first sentence of each text."""

    def respond(prompt: str) -> str:
        if prompt.startswith("Extract all facts"):
            paragraph = prompt.rsplit("Paragraph:", 1)[1].rsplit("Output:", 1)[0].strip()
            if any(word in paragraph for word in fail_chunks):
                return "I cannot do that."
            facts = []
            for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
                entities = sorted(set(re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*", sentence)) - {"The", "It", "Its", "In", "He", "She"})
                facts.append({"fact": sentence, "entities": entities})
            return json.dumps({"facts": facts})
        if "Summarize the provided text" in prompt:
            if fail_summaries:
                return ""
            context = prompt.split("---------------------")[1].strip()
            return "Summary: " + " ".join(line.split(".")[0] + "." for line in context.splitlines()[:3] if line)
        raise AssertionError(prompt[:200])

    return ScriptedLLM(respond)


@pytest.fixture(scope="module")
def docs():
    return [p.to_llama_index() for p in load_documents(DEMO)]


def build(docs, tmp_path, **config):
    llm = fake_llm()
    index = SiReRAGIndex.from_documents(
        docs, llm=llm, embed_model=HashEmbedding(), config=SiReRAGConfig(**config), show_progress=False,
        cache=tmp_path / "calls.sqlite",
    )
    return index, llm


@pytest.fixture(scope="module")
def default_index(docs, tmp_path_factory):
    index, _ = build(docs, tmp_path_factory.mktemp("sirerag"))
    return index


def kinds(index):
    return {(n.tree, n.level, n.kind) for n in index.nodes.values()}


@pytest.mark.parametrize("drop", [False, True])
def test_an_index_groups_by_named_entities_only_when_the_filter_is_on(docs, tmp_path, drop):
    answers = fake_llm().script

    def tags_a_common_noun(prompt: str) -> str:
        reply = answers(prompt)
        if prompt.startswith("Extract all facts"):
            facts = json.loads(reply)
            for fact in facts["facts"]:
                fact["entities"].append("town")
            reply = json.dumps(facts)
        return reply

    index = SiReRAGIndex.from_documents(docs, llm=ScriptedLLM(tags_a_common_noun), embed_model=HashEmbedding(),
                                        config=SiReRAGConfig(drop_common_noun_entities=drop), show_progress=False)
    grouped = {e for n in index.nodes.values() if n.kind == "aggregate" for e in str(n.metadata["entities"]).split("; ")}
    assert ("town" in grouped) is not drop and "Velmora" in grouped


def test_propositions_in_aggregates_carry_their_passage_title_when_asked(docs, tmp_path):
    """Issue 41: the 1.5B leaves a proposition's subject as a pronoun ("He won the Laurence Olivier Award"); in
    an aggregate gathered by another entity it then names nobody. proposition_titles puts the passage's title
    first, unless the proposition names it already."""
    def aggregates(index):
        return [n.text for n in index.nodes.values() if n.kind == "aggregate"]

    paper, _ = build(docs, tmp_path / "paper")
    titled, _ = build(docs, tmp_path / "titled", proposition_titles=True)
    pronoun = "It lies on the Sable River, about 90 km upstream from the port of Dunmere."
    assert any(pronoun in text for text in aggregates(paper))
    assert not any(f"Caldor: {pronoun}" in text for text in aggregates(paper))
    assert any(f"Caldor: {pronoun}" in text for text in aggregates(titled))
    named = "Caldor is the seat of the Royal Academy of Sciences"
    assert any(named in text for text in aggregates(titled))
    assert not any(f"Caldor: {named}" in text for text in aggregates(titled))
    assert titled.propositions == paper.propositions  # the extracted propositions are stored as the model wrote them


def test_pool_holds_both_trees_with_consistent_links(default_index):
    index = default_index
    k = kinds(index)
    assert ("similarity", 0, "chunk") in k and ("similarity", 1, "summary") in k
    assert ("relatedness", 0, "aggregate") in k and ("relatedness", 1, "summary") in k
    assert not any(kind == "proposition" for _, _, kind in k)
    for node in index.nodes.values():
        for child in node.children:
            assert node.id in index.nodes[child].parents
            assert index.nodes[child].level == node.level - 1 and index.nodes[child].tree == node.tree
        assert node.level <= 3
    stats = index.stats()
    assert stats["chunks"] == 15 and stats["aggregates"] > 0 and stats["entities"] > 0
    assert stats["propositions_per_entity"]["max"] >= stats["propositions_per_entity"]["avg"] >= 1
    assert stats["pool_size"] == len(index.nodes) == len(stored_ids(index.vector_store))
    assert stats["llm"]["calls"] > 15 and stats["skipped_chunks"] == 0


def test_every_pool_node_is_attributed_to_the_passages_it_was_made_from(default_index):
    """Issue 43: summaries and aggregates were attributed to no passage, so their evidence never counted."""
    from llama_index_sirerag.method import evidence

    index = default_index
    passage_of = {n.id: n.metadata["passage_id"] for n in index.nodes.values() if n.kind == "chunk"}
    for node in index.nodes.values():
        sources = index.source_passages(node.id)
        assert sources and len(sources) == len(set(sources))
        if node.kind == "chunk":
            assert sources == [passage_of[node.id]]
        elif node.kind == "aggregate":
            assert sources == list(dict.fromkeys(passage_of[c] for c in node.metadata["chunk_ids"].split(",")))
        else:  # a summary: its children's passages, in order
            assert sources == list(dict.fromkeys(p for c in node.children for p in index.source_passages(c)))
    hits = index.as_retriever(similarity_top_k=20).retrieve("Who designed the Kesh Bridge?")
    for unit, hit in zip(evidence(hits, index), hits, strict=True):
        if unit.kind == "chunk":
            assert unit.passage_ids == [passage_of[hit.node.node_id]] and unit.source_ids == []
        else:
            assert unit.passage_ids == [] and unit.source_ids == index.source_passages(hit.node.node_id)


def test_retriever_returns_k_nodes_from_both_trees(default_index):
    index = default_index
    hits = index.as_retriever(similarity_top_k=20).retrieve("Which river flows under the Kesh Bridge?")
    assert len(hits) == 20
    assert {h.node.metadata["tree"] for h in hits} == {"similarity", "relatedness"}
    only = index.as_retriever(similarity_top_k=5, tree="relatedness").retrieve("Orrin River")
    assert len(only) == 5 and all(h.node.metadata["tree"] == "relatedness" for h in only)


async def test_retriever_and_query_engine_work_inside_a_running_event_loop(default_index):
    index = default_index
    retriever = index.as_retriever(similarity_top_k=3)
    assert len(await retriever.aretrieve("Velmora")) == 3
    assert len(retriever.retrieve("Velmora")) == 3  # sync call inside a loop: no asyncio.run inside
    engine = index.as_query_engine(similarity_top_k=3, llm=ScriptedLLM(lambda p: "Orrin River"))
    response = await engine.aquery("Which river?")
    assert str(response) == "Orrin River" and len(response.source_nodes) == 3


def test_query_engine_uses_the_papers_instruction(default_index):
    index = default_index
    answerer = ScriptedLLM(lambda p: "Lake Ismay")
    index.as_query_engine(similarity_top_k=2, llm=answerer).query("Where does the Orrin end?")
    assert "Where does the Orrin end? Answer this question in as fewer number of words as possible." in answerer.prompts[0]


def test_a_reading_budget_reads_the_top_nodes_that_fit_in_rank_order(docs):
    """Issue 41: SiReRAG's reader reads the top 20 pool nodes (§5.4), ~2,970 tokens on HotpotQA against naive's
    ~690; ``reader_tokens`` reads those of them that fit a token budget, in rank order (the first always)."""
    build_replies = fake_llm().script
    llm = ScriptedLLM(lambda p: build_replies(p) if p.startswith("Extract all facts") or "Summarize the provided text" in p
                      else "Lake Ismay")
    index = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=HashEmbedding(), show_progress=False)
    question = "Where does the Orrin end?"
    top = SiReRAGAnswerer(index, top_k=20).answer(question)
    read = SiReRAGAnswerer(index, top_k=20, reader_tokens=150).answer(question)
    assert len(top.evidence) == 20 and read.text == "Lake Ismay"
    tokens = list(itertools.accumulate(count_tokens(e.text) for e in top.evidence))
    fit = max(1, sum(1 for total in tokens if total <= 150))
    assert [e.id for e in read.evidence] == [e.id for e in top.evidence[:fit]]
    assert top.evidence[fit - 1].text in llm.prompts[-1] and top.evidence[fit].text not in llm.prompts[-1]


@pytest.mark.parametrize(
    ("config", "present", "absent"),
    [
        ({"relatedness": False}, {("similarity", 1, "summary")}, {("relatedness", 0, "aggregate")}),
        ({"relatedness_summaries": False}, {("relatedness", 0, "aggregate")}, {("relatedness", 1, "summary")}),
        ({"index_propositions": True}, {("relatedness", 0, "proposition"), ("relatedness", 0, "aggregate")}, set()),
        (
            {"index_propositions": True, "aggregates": False},
            {("relatedness", 0, "proposition"), ("relatedness", 1, "summary")},
            {("relatedness", 0, "aggregate")},
        ),
        (
            {"index_propositions": True, "aggregates": False, "relatedness_summaries": False},
            {("relatedness", 0, "proposition")},
            {("relatedness", 0, "aggregate"), ("relatedness", 1, "summary")},
        ),
        ({"dual_clustering_on_chunks": True}, {("similarity", 1, "summary")}, {("relatedness", 0, "aggregate")}),
    ],
    ids=["raptor", "A-no-rel-summary", "B-plus-propositions", "C-no-aggregates", "D-no-rel-summary", "E-dual"],
)
def test_ablations_change_the_pool_as_table_5_describes(docs, tmp_path, config, present, absent):
    index, _ = build(docs, tmp_path, **config)
    k = kinds(index)
    assert present <= k and not (absent & k)


def test_dual_clustering_adds_entity_clusters_to_level_one(docs, tmp_path):
    raptor, _ = build(docs, tmp_path, relatedness=False)
    dual, _ = build(docs, tmp_path, dual_clustering_on_chunks=True)
    level1 = lambda idx: sum(1 for n in idx.nodes.values() if n.level == 1)  # noqa: E731
    assert level1(dual) > level1(raptor)


def test_trees_are_built_side_by_side_within_the_slots_and_give_the_same_pool(docs, tmp_path):
    """Issue 24: with calls to spare the similarity tree's summaries run beside the relatedness tree's,
    never more than ``max_concurrency`` at once, and the pool is the one a sequential build makes."""
    sequential, _ = build(docs, tmp_path / "one")
    chunk_starts = [n.text[:40] for n in sequential.nodes.values() if n.kind == "chunk"]

    def tree(prompt):
        if prompt.startswith("Extract all facts"):
            return "propositions"
        return "similarity" if any(start in prompt for start in chunk_starts) else "relatedness"

    # The first summary of each tree waits (up to 30 s) for the other tree's first, so a side-by-side
    # build shows both in flight however slow the machine is; a build that runs the trees one after
    # the other never has both in flight, and the barrier times out.
    respond, lock, flying, snapshots, started = fake_llm().script, threading.Lock(), [], [], set()
    first_summaries = threading.Barrier(2, timeout=30)

    def slow(prompt):
        kind = tree(prompt)
        with lock:
            flying.append(prompt)
            snapshots.append(list(flying))
            first = kind != "propositions" and kind not in started
            started.add(kind)
        if first:
            with contextlib.suppress(threading.BrokenBarrierError):
                first_summaries.wait()
        time.sleep(0.01)
        with lock:
            flying.remove(prompt)
        return respond(prompt)

    beside = SiReRAGIndex.from_documents(docs, llm=ScriptedLLM(slow), embed_model=HashEmbedding(), config=SiReRAGConfig(),
                                         show_progress=False, cache=tmp_path / "three.sqlite", max_concurrency=3)
    assert set(beside.nodes) == set(sequential.nodes) and "trees" in beside.stats()["stages"]
    assert max(len(s) for s in snapshots) == 3
    assert any({"similarity", "relatedness"} <= {tree(p) for p in s} for s in snapshots)


def test_malformed_json_skips_the_chunk_and_counts_it(docs, tmp_path):
    llm = fake_llm(fail_chunks=("Ardun",))
    index = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=HashEmbedding(), show_progress=False)
    stats = index.stats()
    assert stats["skipped_chunks"] == 1  # only the Greyfell Mountains passage names Mount Ardun
    assert stats["structured_output"]["failed"] == 1
    assert stats["chunks"] == 15  # the chunk itself is still indexed in the similarity tree


def test_summaries_stop_after_summary_sentences(docs, tmp_path):
    """RAPTOR's reference code caps a summary's length (``summarization_length``); ``summary_sentences`` stops the
    reply at a sentence's end, so no summary keeps a cut sentence."""
    whole, _ = build(docs, tmp_path / "whole")
    capped, _ = build(docs, tmp_path / "capped", summary_sentences=1)
    summaries = [n.text for n in whole.nodes.values() if n.kind == "summary"]
    assert summaries and max(len(split_sentences(t)) for t in summaries) > 1
    for node in (n for n in capped.nodes.values() if n.kind == "summary"):
        assert len(split_sentences(node.text)) == 1 and node.text.endswith(".")


def test_failed_summaries_are_not_indexed(docs, tmp_path):
    index = SiReRAGIndex.from_documents(
        docs, llm=fake_llm(fail_summaries=True), embed_model=HashEmbedding(), show_progress=False
    )
    assert not any(n.kind == "summary" for n in index.nodes.values())
    assert index.stats()["failed_summaries"] > 0
    assert all("Empty Response" not in n.text for n in index.nodes.values())


def test_second_build_is_answered_from_the_cache(docs, tmp_path):
    first, llm1 = build(docs, tmp_path)
    second, llm2 = build(docs, tmp_path)
    assert len(llm2.prompts) == 0 and second.stats()["llm"]["cache_hits"] == first.stats()["llm"]["calls"]
    assert set(second.nodes) == set(first.nodes)


class OtherMachineEmbedding(HashEmbedding):
    """The same texts embedded on another CPU: vectors off by float noise (as MiniLM's are between machines)."""

    def _vector(self, text: str) -> list[float]:
        seed = int(hashlib.md5(text.encode()).hexdigest(), 16) % 2**32
        return list(np.asarray(super()._vector(text)) + np.random.default_rng(seed).normal(0, 1e-4, self.dim))


def test_a_build_resumed_on_another_machine_replays_its_clusters_and_their_summaries(docs, tmp_path):
    """UMAP turns float noise into other clusters; a committed cache must still replay the first machine's."""
    first, _ = build(docs, tmp_path)
    llm = fake_llm()
    second = SiReRAGIndex.from_documents(docs, llm=llm, embed_model=OtherMachineEmbedding(), show_progress=False,
                                         cache=tmp_path / "calls.sqlite")
    assert llm.prompts == []
    assert {n.id for n in second.nodes.values() if n.kind == "summary"} == \
        {n.id for n in first.nodes.values() if n.kind == "summary"}


def test_persist_and_reload_round_trip(default_index, tmp_path):
    index = default_index
    index.persist(tmp_path / "idx")
    again = SiReRAGIndex.from_persist_dir(tmp_path / "idx", llm=fake_llm(), embed_model=HashEmbedding())
    assert set(again.nodes) == set(index.nodes)
    assert {k: v for k, v in again.stats().items() if k != "cache"} == {k: v for k, v in index.stats().items() if k != "cache"}
    assert stored_ids(again.vector_store) == set(index.nodes)
    query = "Who designed the Kesh Bridge?"
    assert [h.node.node_id for h in again.as_retriever(5).retrieve(query)] == [
        h.node.node_id for h in index.as_retriever(5).retrieve(query)
    ]
    with pytest.raises(IndexFolderError, match="no sirerag or raptor index"):
        SiReRAGIndex.from_persist_dir(tmp_path / "nothing", llm=fake_llm(), embed_model=HashEmbedding())


def test_insert_adds_documents_and_keeps_the_store_in_sync(docs, tmp_path):
    index, _ = build(docs[:8], tmp_path)
    before = index.stats()["chunks"]
    index.insert(docs[8:])
    assert index.stats()["chunks"] == before + len(docs[8:])
    assert stored_ids(index.vector_store) == set(index.nodes)


def test_umap_compiles_beside_the_first_builds_embedding(docs, tmp_path, monkeypatch):
    import llama_index_sirerag.index as sirerag_index

    started = []
    monkeypatch.setattr(sirerag_index, "warm_up", lambda: started.append(True))
    index, _ = build(docs[:4], tmp_path)
    assert started == [True]
    index.insert(docs[4])
    assert started == [True]  # an update joins the nearest clusters: UMAP only if a cluster must split


def test_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="at least one document"):
        SiReRAGIndex.from_documents([], llm=fake_llm(), embed_model=HashEmbedding())


def test_langchain_adapter_returns_documents_with_tree_metadata(default_index):
    index = default_index
    lc = index.as_retriever(similarity_top_k=4).as_langchain()
    found = lc.invoke("Kesh Bridge")
    assert len(found) == 4 and all(d.metadata["tree"] in {"similarity", "relatedness"} for d in found)
    assert len(lc.invoke("Kesh Bridge", k=2)) == 2


def test_kind_filter_gives_plain_chunk_retrieval(default_index):
    hits = default_index.as_retriever(similarity_top_k=6, kind="chunk").retrieve("Orrin River")
    assert len(hits) == 6 and {h.node.metadata["kind"] for h in hits} == {"chunk"}


# ---- issue 21: a store holds exactly the pool ---------------------------------------------------


def test_building_into_a_store_that_holds_another_corpus_is_refused_or_replaced(docs, tmp_path):
    """Issue 21: building corpus B into A's Chroma collection kept A's nodes (51 nodes for a pool of 24)."""
    from multihop_rag.errors import StoreError
    from multihop_rag.stores import chroma_vector_store, stored_ids

    store = tmp_path / "chroma"
    SiReRAGIndex.from_documents(docs[:5], llm=fake_llm(), embed_model=HashEmbedding(), show_progress=False,
                                vector_store=chroma_vector_store(store, "pool"))
    with pytest.raises(StoreError, match="overwrite"):
        SiReRAGIndex.from_documents(docs[5:], llm=fake_llm(), embed_model=HashEmbedding(), show_progress=False,
                                    vector_store=chroma_vector_store(store, "pool"))
    second = SiReRAGIndex.from_documents(docs[5:], llm=fake_llm(), embed_model=HashEmbedding(), show_progress=False,
                                         vector_store=chroma_vector_store(store, "pool"), overwrite=True)
    assert stored_ids(chroma_vector_store(store, "pool")) == set(second.nodes)


# ---- issue 25: updates at the cost of the change ---------------------------------------------


def consistent(index):
    for node in index.nodes.values():
        for child in node.children:
            assert child in index.nodes and node.id in index.nodes[child].parents, (node.id, child)
        for parent in node.parents:
            assert parent in index.nodes and node.id in index.nodes[parent].children, (node.id, parent)
    assert stored_ids(index.vector_store) == set(index.nodes)
    chunks = {c for info in index.documents.values() for c in info["chunks"]}
    assert chunks == {n.id for n in index.nodes.values() if n.kind == "chunk"}


def counted(index):
    return index.llm.usage.calls


def test_inserting_one_document_rewrites_only_the_summaries_above_it(docs, tmp_path):
    """Issue 25: inserting one document into a built index re-clustered everything (20 of 35
    summaries regenerated). Now: one proposition call and the summaries on its paths."""
    index, _ = build(docs[:14], tmp_path)
    full = index.stats()["llm"]["calls"]
    before = counted(index)
    summaries = sum(1 for n in index.nodes.values() if n.kind == "summary")
    index.insert(docs[14])
    spent = counted(index) - before
    update = index.stats()["last_update"]
    consistent(index)
    assert update["added"] == [docs[14].doc_id] and update["llm_calls"] == spent
    assert 1 <= spent <= 1 + 2 * index.config.tree_depth + 2 and spent < full / 2
    assert update["summaries_rewritten"] <= 2 * index.config.tree_depth and update["summaries_rewritten"] < summaries


def test_deleting_a_document_rewrites_its_ancestors_and_leaves_no_orphan(docs, tmp_path):
    index, _ = build(docs, tmp_path)
    before = counted(index)
    gone = index.documents[docs[3].doc_id]["chunks"]
    index.delete_ref_doc(docs[3].doc_id)
    consistent(index)
    assert not set(gone) & set(index.nodes) and docs[3].doc_id not in index.ref_doc_info
    assert 0 < counted(index) - before <= 2 * index.config.tree_depth + 2
    with pytest.raises(KeyError, match="no document"):
        index.delete_ref_doc("no-such-document")


def test_changed_text_under_the_same_id_is_reindexed(docs, tmp_path):
    index, _ = build(docs[:6], tmp_path)
    old_chunks = index.documents[docs[2].doc_id]["chunks"]
    changed = Document(id_=docs[2].doc_id, text="Velmora was renamed Quernsby in 1990.", metadata=docs[2].metadata)
    assert index.refresh_ref_docs([docs[0], changed]) == [False, True]
    consistent(index)
    assert not set(old_chunks) & set(index.nodes)
    assert any("Quernsby" in n.text for n in index.nodes.values() if n.kind == "chunk")


def test_an_updated_index_reloads_equal(docs, tmp_path):
    index, _ = build(docs[:10], tmp_path)
    index.insert(docs[10:12])
    index.delete_ref_doc(docs[0].doc_id)
    index.persist(tmp_path / "idx")
    again = SiReRAGIndex.from_persist_dir(tmp_path / "idx", llm=fake_llm(), embed_model=HashEmbedding())
    consistent(again)
    assert {n.id: (n.parents, n.children) for n in again.nodes.values()} == {n.id: (n.parents, n.children) for n in index.nodes.values()}


def test_any_llama_index_vector_store_and_the_index_idioms(docs, tmp_path):
    """Issue 23: a BaseIndex with storage_context, as_chat_engine, ref_doc_info; Chroma and SimpleVectorStore."""
    from llama_index.core.indices.base import BaseIndex

    from multihop_rag.stores import chroma_vector_store

    for store in (None, chroma_vector_store(tmp_path / "c", "pool")):
        index = SiReRAGIndex.from_documents(docs[:5], llm=fake_llm(), embed_model=HashEmbedding(), vector_store=store,
                                            show_progress=False)
        assert isinstance(index, BaseIndex) and index.storage_context.vector_store is index.vector_store
        assert set(index.ref_doc_info) == {d.doc_id for d in docs[:5]}
        engine = index.as_chat_engine(chat_mode="context", llm=ScriptedLLM(lambda p: "Orrin River"))
        assert "Orrin" in str(engine.chat("Which river?"))
        consistent(index)
    # Without llm=, the chat engine answers with the index's LLM, never LlamaIndex's global default.
    index = SiReRAGIndex.from_documents(docs[:5], llm=ScriptedLLM(lambda p: "Velm River"), embed_model=HashEmbedding(),
                                        show_progress=False)
    assert "Velm" in str(index.as_chat_engine(chat_mode="condense_plus_context").chat("Which river?"))


def test_a_persisted_index_keeps_its_folder_in_step_and_undoes_an_update_cut_half_way(docs, tmp_path):
    """Issue 39: an update through the Python API wrote the folder's Chroma pool at once and its state only on
    persist(): cut half-way, or never persisted, the folder was refused on reload ("rebuild it"). Now every update
    of an index with a folder persists under the store's lock, and one cut half-way is undone."""
    folder = tmp_path / "idx"
    index = SiReRAGIndex.from_documents(docs[:6], llm=fake_llm(), embed_model=HashEmbedding(), persist_dir=folder,
                                        show_progress=False)
    index.insert(docs[6])  # no persist() call
    again = SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding())
    consistent(again)
    assert set(again.documents) == {d.doc_id for d in docs[:7]}

    answers = fake_llm().script
    calls = []

    def dies_at_the_second_call(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return answers(prompt)

    cut = SiReRAGIndex.from_persist_dir(folder, llm=ScriptedLLM(dies_at_the_second_call), embed_model=HashEmbedding())
    with pytest.raises(KeyboardInterrupt):
        cut.insert(docs[7:9])
    after = SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding())
    consistent(after)
    assert set(after.documents) == {d.doc_id for d in docs[:7]} and len(after.nodes) == len(again.nodes)
    after.insert(docs[7:9])  # and it goes on
    consistent(SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding()))


def test_an_update_cut_half_way_is_undone_in_a_vector_store_outside_the_folder(docs, tmp_path, monkeypatch):
    """Issue 39: the copy taken before an update held the folder only, so an update cut while it wrote a pool kept
    outside the folder (a Chroma server, a collection elsewhere) left the new nodes there while the folder went
    back. And a reload without that store opened an empty collection in the folder as if it were the pool."""
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from multihop_rag.errors import IndexFolderError
    from multihop_rag.stores import chroma_vector_store

    folder, outside = tmp_path / "idx", tmp_path / "elsewhere"
    index = SiReRAGIndex.from_documents(docs[:6], llm=fake_llm(), embed_model=HashEmbedding(), persist_dir=folder,
                                        vector_store=chroma_vector_store(outside, "pool"), show_progress=False)
    add = ChromaVectorStore.add

    def cut_once_written(self, nodes, **kwargs):
        add(self, nodes, **kwargs)
        raise KeyboardInterrupt

    cut = SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding(),
                                        vector_store=chroma_vector_store(outside, "pool"))
    with monkeypatch.context() as patch:
        patch.setattr(ChromaVectorStore, "add", cut_once_written)
        with pytest.raises(KeyboardInterrupt):
            cut.update_ref_doc(docs[6].model_copy(update={"id_": docs[0].doc_id}))  # deletes, then adds
    with pytest.raises(IndexFolderError, match="vector_store="):
        SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding())
    after = SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding(),
                                          vector_store=chroma_vector_store(outside, "pool"))
    consistent(after)
    assert set(after.nodes) == set(index.nodes)
    after.insert(docs[6:9])  # and it goes on
    consistent(SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding(),
                                             vector_store=chroma_vector_store(outside, "pool")))


KILLED_UPDATE = """
import pathlib, sys, time
from integrations_tests.fakes import HashEmbedding, ScriptedLLM
from integrations_tests.unit.test_sirerag import DEMO, fake_llm
from llama_index_sirerag import SiReRAGIndex
from multihop_rag.corpus import load_documents
from multihop_rag.stores import chroma_vector_store

folder, marker = sys.argv[1:3]
outside = {"vector_store": chroma_vector_store(sys.argv[3], "pool")} if len(sys.argv) > 3 else {}
answers = fake_llm().script

def hangs_at_the_summaries(prompt):
    if "Summarize the provided text" in prompt:
        pathlib.Path(marker).write_text("the update is under way")
        time.sleep(600)
    return answers(prompt)

docs = [p.to_llama_index() for p in load_documents(DEMO)]
SiReRAGIndex.from_persist_dir(folder, llm=ScriptedLLM(hangs_at_the_summaries), embed_model=HashEmbedding(),
                              **outside).insert(docs[6:9])
"""


@pytest.mark.parametrize("pool", ["in the folder", "outside it"])
def test_an_update_killed_outright_through_the_python_api_is_undone_on_reload(docs, tmp_path, pool):
    """Issue 39: kill -9 in the middle of an ``insert`` (the summaries above the new chunks being rewritten):
    the next ``from_persist_dir`` puts the last finished index back and removes the copy — the pool too when
    it lives outside the folder (a Chroma server, a collection elsewhere)."""
    from multihop_rag.stores import chroma_vector_store

    folder, marker, outside = tmp_path / "idx", tmp_path / "marker", tmp_path / "elsewhere"
    store = {"vector_store": chroma_vector_store(outside, "pool")} if pool == "outside it" else {}
    index = SiReRAGIndex.from_documents(docs[:6], llm=fake_llm(), embed_model=HashEmbedding(), persist_dir=folder,
                                        show_progress=False, **store)
    where = [str(outside)] if store else []
    kill_when(["-c", KILLED_UPDATE, str(folder), str(marker), *where], marker.exists)
    assert (folder / ".before_update" / ".complete").exists()  # the copy of the last finished index is left
    store = {"vector_store": chroma_vector_store(outside, "pool")} if store else {}  # a new client: the kill's writes
    again = SiReRAGIndex.from_persist_dir(folder, llm=fake_llm(), embed_model=HashEmbedding(), **store)
    assert not (folder / ".before_update").exists()  # put back on reload
    consistent(again)
    assert set(again.documents) == set(index.documents) and set(again.nodes) == set(index.nodes)


def test_aggregates_are_cut_in_corpus_order_within_the_token_bound():
    props = [prop(f"p{i}", f"c{i}", (i, 0), f"Velmora fact number {i} is about the old town walls.", "Velmora")
             for i in range(30)]
    whole = group_aggregates(props)
    assert len(whole) == 1  # the paper's: one aggregate per entity
    parts = group_aggregates(props, max_tokens=60)
    assert len(parts) > 1 and all(a.entities == ["Velmora"] for a in parts)
    assert [pid for a in parts for pid in a.proposition_ids] == [f"p{i}" for i in range(30)]
    from multihop_rag.indexing.text import count_tokens

    assert all(count_tokens(a.text) <= 60 for a in parts)


def test_documents_find_their_chunks_in_one_pass(tmp_path, monkeypatch):
    """Each document's chunk list comes from one pass over the chunks, not a pass per document (issue 42)."""
    from llama_index_sirerag import index as sirerag_index

    reads = []

    class Counted(dict):
        def __getitem__(self, key):
            reads.append(key)
            return super().__getitem__(key)

        def get(self, key, default=None):
            reads.append(key)
            return super().get(key, default)

    split = sirerag_index.split_chunks

    def counted(documents, config):
        chunks = split(documents, config)
        for chunk in chunks:
            chunk.metadata = Counted(chunk.metadata)
        return chunks

    monkeypatch.setattr(sirerag_index, "split_chunks", counted)
    many = [Document(text=f"Town{i} lies on the Orrin. It has {i} bridges.", id_=f"d{i}", metadata={"title": f"Town{i}"})
            for i in range(60)]
    index, _ = build(many, tmp_path, relatedness=False)
    assert all(len(index.documents[f"d{i}"]["chunks"]) == 1 for i in range(60))
    assert reads.count("doc_id") <= 3 * len(many)


def test_retries_of_replies_that_do_not_parse_keep_every_slot_busy():
    """A reply that does not parse is asked again in its own slot while the other chunks go on: four first
    tries meet in flight, then their four retries do too (a retry that waited for the others, or for a lock,
    would leave the barrier short and break it)."""
    import threading

    from llama_index_sirerag.propositions import extract_propositions

    first, retry = threading.Barrier(4, timeout=20), threading.Barrier(4, timeout=20)
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(prompt: str) -> str:
        town = re.findall(r"Town\d", prompt)[-1]
        with lock:
            seen[town] = seen.get(town, 0) + 1
            attempt = seen[town]
        (first if attempt == 1 else retry).wait()
        return '{"facts": [{"fact": "' if attempt == 1 else json.dumps({"facts": [{"fact": f"{town} exists.", "entities": [town]}]})

    chunks = [(f"c{i}", f"d{i}", f"Town{i} lies on the Orrin.") for i in range(4)]
    found, skipped = extract_propositions(ScriptedLLM(respond), chunks, max_concurrency=4, show_progress=False)
    assert not skipped and sorted(p.text for p in found) == [f"Town{i} exists." for i in range(4)]
    assert set(seen.values()) == {2}


def test_a_comparison_in_time_is_decided_by_the_years_the_nodes_give():
    """``compare_years``: the retrieved nodes are asked for each option's year; two different years answer without the
    reader, and a question whose dates are another's (a hop behind each option), or years that do not decide, go to
    the reader."""
    from llama_index.core import VectorStoreIndex

    from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine

    years = {"reply": "Alma Reed: born 12 May 1950\nBert Lowe: born 1941"}

    def respond(prompt: str) -> str:
        return years["reply"] if "Do not answer it yet" in prompt else "the reader's answer"

    llm = ScriptedLLM(respond)
    docs = [Document(text="Alma Reed was born in 1950."), Document(text="Bert Lowe was born in 1941.")]
    engine = VectorStoreIndex.from_documents(docs, embed_model=HashEmbedding()).as_query_engine(llm=llm)
    decided = ComparisonsDecidedQueryEngine(engine=engine, llm=llm, kinds=["years"])
    response = decided.query("Who was born first, Alma Reed or Bert Lowe?")
    assert str(response) == "Bert Lowe" and response.metadata["decided_by"] == "years"
    assert len(response.source_nodes) == 2 and len(llm.prompts) == 1  # the years' call, no reader
    assert str(decided.query("Which film has the director born first, Alma Reed or Bert Lowe?")) == "the reader's answer"
    years["reply"] = "Alma Reed: unknown\nBert Lowe: born 1941"
    assert str(decided.query("Who was born first, Alma Reed or Bert Lowe?")) == "the reader's answer"
    assert str(decided.query("Where was Alma Reed born?")) == "the reader's answer"
    years["reply"] = "Alma Reed: born 12 May 1950\nBert Lowe: born 1941"
    response = asyncio.run(decided.aquery("Who was born first, Alma Reed or Bert Lowe?"))  # the same, awaited
    assert str(response) == "Bert Lowe" and response.metadata["decided_by"] == "years"


def test_a_comparison_of_amounts_is_decided_by_the_numbers_the_nodes_give():
    """``compare_quantities``: each option's number and unit, a line each; one unit and different numbers answer."""
    from llama_index.core import VectorStoreIndex

    from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine

    amounts = {"reply": "Kesh Peak: 8,051 metres\nSable Peak: 7,816 metres"}
    llm = ScriptedLLM(lambda prompt: amounts["reply"] if "Do not answer it yet" in prompt else "the reader's answer")
    docs = [Document(text="Kesh Peak rises 8,051 m."), Document(text="Sable Peak rises 7,816 m.")]
    engine = VectorStoreIndex.from_documents(docs, embed_model=HashEmbedding()).as_query_engine(llm=llm)
    decided = ComparisonsDecidedQueryEngine(engine=engine, llm=llm)
    response = decided.query("Which mountain is higher, Kesh Peak or Sable Peak?")
    assert str(response) == "Kesh Peak" and response.metadata["decided_by"] == "quantities"
    amounts["reply"] = "Kesh Peak: 8,051 metres\nSable Peak: 25,643 feet"  # two units decide nothing
    assert str(decided.query("Which mountain is higher, Kesh Peak or Sable Peak?")) == "the reader's answer"
    only_years = ComparisonsDecidedQueryEngine(engine=engine, llm=llm, kinds=["years"])
    amounts["reply"] = "Kesh Peak: 8,051 metres\nSable Peak: 7,816 metres"
    assert str(only_years.query("Which mountain is higher, Kesh Peak or Sable Peak?")) == "the reader's answer"


def test_the_index_query_engine_decides_comparisons_unless_told_not_to(docs, tmp_path, default_index):
    from multihop_rag.frameworks.llama_index_comparisons import ComparisonsDecidedQueryEngine

    engine = default_index.as_query_engine()
    assert isinstance(engine, ComparisonsDecidedQueryEngine) and list(engine.kinds) == ["years", "quantities"]
    index, _ = build(docs, tmp_path, compare_years=False)
    assert list(index.as_query_engine().kinds) == ["quantities"]  # type: ignore[attr-defined]
    index, _ = build(docs, tmp_path / "paper", compare_years=False, compare_quantities=False)
    assert not isinstance(index.as_query_engine(), ComparisonsDecidedQueryEngine)  # §5.4's reader for every question
