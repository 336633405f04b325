"""The one update protocol of the method indexes (:class:`multihop_rag.frameworks.llama_index.DocumentIndex`):
every LlamaIndex update call becomes one ``_change(add, remove)`` over whole documents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.data_structs.data_structs import IndexStruct
from llama_index.core.schema import BaseNode, Document, TextNode

from multihop_rag.corpus import Passage
from multihop_rag.frameworks.llama_index import DocumentIndex, document_hash, update_document_index
from multihop_rag.llm.usage import Usage


class Recorder(DocumentIndex[IndexStruct]):
    """Keeps documents as one chunk each and records every change."""

    def __init__(self) -> None:  # no storage: only the protocol is under test
        self.documents = {}
        self.changes: list[tuple[list[str], list[str]]] = []

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        self.changes.append(([d.doc_id for d in add], list(remove)))
        for doc_id in remove:
            self.documents.pop(doc_id)
        for d in add:
            self.documents[d.doc_id] = {"hash": document_hash(d), "title": d.metadata.get("title", ""), "chunks": [f"{d.doc_id}#0"]}
        return {}

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **kwargs: Any) -> IndexStruct:
        raise NotImplementedError

    def as_retriever(self, **kwargs: Any) -> Any:
        raise NotImplementedError


def doc(doc_id: str, text: str) -> Document:
    return Document(id_=doc_id, text=text, metadata={"title": doc_id.title()})


def test_each_update_call_is_one_change_over_whole_documents():
    index = Recorder()
    index.insert([doc("a", "Alpha."), doc("b", "Beta.")])
    index.insert(doc("a", "Alpha, again."))  # a known id is re-indexed: removed and added in one change
    assert index.changes == [(["a", "b"], []), (["a"], ["a"])]
    assert index.refresh_ref_docs([doc("a", "Alpha, again."), doc("b", "Beta, changed."), doc("c", "Gamma.")]) == [False, True, True]
    assert index.changes[-1] == (["b", "c"], ["b"])
    assert index.refresh_ref_docs([doc("c", "Gamma.")]) == [False] and len(index.changes) == 3  # nothing changed: no call
    index.update_ref_doc(doc("c", "Gamma, edited."))
    index.delete_ref_doc("a")
    index._delete_node("b#0")
    assert index.changes[-3:] == [(["c"], ["c"]), ([], ["a"]), ([], ["b"])]
    assert {d: i.node_ids for d, i in index.ref_doc_info.items()} == {"c": ["c#0"]}
    index._insert([TextNode(id_="n1", text="Delta.")])  # what BaseIndex.insert_nodes calls
    assert index.changes[-1] == (["n1"], []) and "n1" in index.documents


def test_unknown_documents_and_nodes_raise_before_anything_changes():
    index = Recorder()
    index.insert(doc("a", "Alpha."))
    with pytest.raises(KeyError, match="no document 'z'"):
        index.delete_ref_doc("z")
    with pytest.raises(KeyError, match="summaries go with their children"):
        index._delete_node("summary-1")
    assert index.changes == [(["a"], [])]


class CountingLLM:
    """Stands in for the index's counted LLM: each change costs one call per document added."""

    def __init__(self) -> None:
        self.usage = Usage()


class Summarizing(Recorder):
    """A Recorder whose every change rewrites one summary per document it touches, as SiReRAG's trees do."""

    def __init__(self) -> None:
        super().__init__()
        self.llm = CountingLLM()
        self.last_update = {}

    def _change(self, add: Sequence[Document], remove: Sequence[str]) -> dict[str, Any]:
        super()._change(add, remove)
        self.llm.usage = self.llm.usage + Usage(calls=len(add))
        self.last_update = {"summaries_rewritten": len(add) + len(remove)}
        return self.last_update


def test_update_document_index_makes_the_index_hold_exactly_the_passages_and_counts_what_it_rewrote():
    index = Summarizing()
    index.insert([doc("a", "Alpha."), doc("b", "Beta."), doc("c", "Gamma.")])
    passages = [Passage("a", "A", "Alpha."), Passage("b", "B", "Beta, changed."), Passage("d", "D", "Delta.")]
    report = update_document_index(index, passages)
    assert set(index.documents) == {"a", "b", "d"}
    assert (report.added, report.changed, report.removed) == (["d"], ["b"], ["c"])
    # one change per removal, then one for the new and the changed together; summaries summed over them
    assert index.changes[1:] == [([], ["c"]), (["b", "d"], ["b"])]
    assert report.summaries_rewritten == 1 + 3 and report.llm_calls == 2
    again = update_document_index(index, passages)  # nothing to do: no change, the last count not taken twice
    assert not again and again.summaries_rewritten == 0 and len(index.changes) == 3
