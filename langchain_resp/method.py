"""ReSP as ``multihop-rag`` drives it (entry point ``resp`` of ``multihop_rag.methods``).

ReSP builds nothing: over a corpus it retrieves from a dense top-k store of the passages (LangChain
Chroma in the index folder); ``multihop-rag ask --method resp`` runs it over any other index's
retriever instead.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever

from langchain_resp.config import ReSPConfig
from langchain_resp.graph import build_resp_graph
from multihop_rag.corpus import Passage
from multihop_rag.errors import StoreError
from multihop_rag.frameworks.langgraph import stream_run
from multihop_rag.indexing.persistence import prepare_folder, read_manifest, write_atomic, write_manifest
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport
from multihop_rag.stores import langchain_chroma, lc_delete_ids, lc_stored_ids

__all__ = ["ReSPMethod", "ReSPIndex", "METHOD", "trace_event"]

FORMAT_VERSION = 1
COLLECTION = "resp"


def _hash(p: Passage) -> str:
    return hashlib.sha1(f"{p.title}\n{p.text}".encode()).hexdigest()


def trace_event(node: str, update: dict[str, Any]) -> dict[str, Any] | None:
    """A ``--trace`` line for one node's update: sub-questions, memories, the judge, the plan."""
    if node == "retrieve":
        return {"step": "retrieve", "query": update["sub_question"], "documents": update["retrieved"][0]}
    if node == "summarize":
        event = {"step": "memory", "global": update["global_memory"][0]}
        if update.get("local_memory"):
            event["local"] = update["local_memory"][0]["answer"]
        return event
    if node == "judge":
        return {"step": "judge", "sufficient": update["judgement"], **({"p_yes": update["judge_probabilities"][0]}
                                                                      if update.get("judge_probabilities") else {})}
    if node == "plan":
        return {"step": "plan", "sub_question": update.get("sub_question", ""), "stop": update.get("stop_reason")}
    return None


class ReSPIndex:
    """ReSP's graph over a retriever, with the dense passage store it was built on (if any)."""

    def __init__(self, chat: BaseChatModel, retriever: BaseRetriever, config: ReSPConfig, store: Any = None,
                 folder: Path | None = None):
        self.graph = build_resp_graph(chat, retriever, config=config)
        self.config, self.store, self.folder = config, store, folder

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        started = time.perf_counter()
        state = stream_run(self.graph, {"question": question}, trace, trace_event)
        ids = list(dict.fromkeys(i for round_ids in state.get("retrieved", []) for i in round_ids))
        found = {str(d.id): d for d in self.store.get_by_ids(ids)} if self.store is not None and ids else {}
        docs = [found[i] for i in ids if i in found]  # the store returns them in its own order, not by rank
        evidence = [
            Evidence(id=str(d.id), title=str(d.metadata.get("title", "")), text=d.page_content,
                     passage_ids=[str(d.metadata.get("passage_id") or d.id)])
            for d in docs
        ]
        keys = ("stop_reason", "iterations", "replans", "judge_failures", "truncated", "label_answers", "answer_checks",
                "sub_questions",
                "judge_probabilities", "decided_by")
        info = {k: state.get(k) for k in keys}
        info["limit_hit"] = state.get("stop_reason") == "max_iterations"
        return Answer(question, state["answer"], evidence, time.perf_counter() - started, info=info)

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the passage store hold exactly ``passages`` (by id and content hash)."""
        if self.store is None or self.folder is None:
            raise StoreError("this ReSP graph runs over another index's retriever: update that index")
        started = time.perf_counter()
        hashes: dict[str, str] = json.loads((self.folder / "passages.json").read_text())
        wanted = {p.id: p for p in passages}
        report = UpdateReport()
        report.removed = [i for i in hashes if i not in wanted]
        report.changed = [i for i, p in wanted.items() if i in hashes and hashes[i] != _hash(p)]
        report.added = [i for i in wanted if i not in hashes]
        lc_delete_ids(self.store, report.removed + report.changed)
        _add(self.store, [wanted[i] for i in report.changed + report.added])
        write_atomic(self.folder / "passages.json", json.dumps({i: _hash(p) for i, p in wanted.items()}))
        report.seconds = time.perf_counter() - started
        return report

    def stats(self) -> dict[str, Any]:
        size = len(lc_stored_ids(self.store)) if self.store is not None else 0
        return {"passages": size, "pool_size": size, "config": self.config.model_dump()}


def _add(store: Any, passages: Sequence[Passage]) -> None:
    for start in range(0, len(passages), 64):
        part = passages[start : start + 64]
        store.add_documents([p.to_langchain() for p in part], ids=[p.id for p in part])


class ReSPMethod:
    """ReSP as the command line and the evaluation drive it."""

    name = "resp"
    summary = "retrieve, summarize into global and local memory, judge, plan the next sub-question (LangGraph)"
    builds = False
    config_class = ReSPConfig
    source_packages = ("langchain_resp",)

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: ReSPConfig, *,
              overwrite: bool = False) -> ReSPIndex:
        prepare_folder(folder, self.name, FORMAT_VERSION, overwrite=overwrite, config=config.model_dump())
        store = langchain_chroma(folder / "chroma", COLLECTION, models.lc_embed)
        lc_delete_ids(store, lc_stored_ids(store))  # an unfinished build's passages
        _add(store, passages)
        write_atomic(folder / "passages.json", json.dumps({p.id: _hash(p) for p in passages}))
        write_manifest(folder, self.name, FORMAT_VERSION, status="done", passages=len(passages))
        return self._index(models, config, store, folder)

    def load(self, folder: Path, models: Models, config: ReSPConfig) -> ReSPIndex:
        read_manifest(folder, self.name, FORMAT_VERSION)
        store = langchain_chroma(folder / "chroma", COLLECTION, models.lc_embed)
        expected = set(json.loads((folder / "passages.json").read_text()))
        if lc_stored_ids(store) != expected:
            raise StoreError(f"{folder}: the passage store does not hold exactly the index's passages; rebuild it (--overwrite)")
        return self._index(models, config, store, folder)

    def over(self, retriever: BaseRetriever, models: Models, config: ReSPConfig) -> ReSPIndex:
        """ReSP over another index's retriever (``ask --method resp``)."""
        return ReSPIndex(models.chat, retriever, config)

    def _index(self, models: Models, config: ReSPConfig, store: Any, folder: Path) -> ReSPIndex:
        retriever = store.as_retriever(search_kwargs={"k": config.top_k})
        return ReSPIndex(models.chat, retriever, config, store, folder)


METHOD = ReSPMethod()
