"""The shape of each LangGraph method (nodes and edges, as LangGraph's own tests pin theirs): a change to the
control flow shows up here as a diff of ``draw_mermaid()`` against the committed snapshot. After a deliberate
change, write the new shape with ``UPDATE_SNAPSHOTS=1 pytest integrations_tests/unit/test_graph_shapes.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.documents import Document

from integrations_tests.fakes import HashEmbeddings, KeywordRetriever, ScriptedChatModel
from langchain_resp import build_resp_graph
from langgraph_hirag import HierarchicalCorpus, build_hirag_graph

SNAPSHOTS = Path(__file__).parent / "snapshots"
DOCS = [Document(page_content="The Kesh Bridge crosses the Orrin River.", metadata={"title": "Kesh Bridge"})]


def graphs() -> dict[str, object]:
    model = ScriptedChatModel(lambda prompt: "profile")
    corpus = HierarchicalCorpus.from_documents(DOCS, HashEmbeddings(64), profile_llm=model, show_progress=False)
    return {"resp": build_resp_graph(model, KeywordRetriever(docs=DOCS, k=1)), "hirag": build_hirag_graph(model, corpus)}


@pytest.mark.parametrize("name", ["resp", "hirag"])
def test_the_graph_has_its_committed_shape(name):
    shape = graphs()[name].get_graph().draw_mermaid()  # type: ignore[attr-defined]
    snapshot = SNAPSHOTS / f"{name}_graph.mmd"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        snapshot.write_text(shape)
    assert shape == snapshot.read_text()
