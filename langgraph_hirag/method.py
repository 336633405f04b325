"""HiRAG as ``multihop-rag`` drives it (entry point ``hirag`` of ``multihop_rag.methods``).

The index is a :class:`~langgraph_hirag.HierarchicalCorpus` (titles in BM25, chunks in Chroma) in
the index folder; building it calls no LLM (profiles are lead passages).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from langgraph_hirag.config import HiRAGConfig
from langgraph_hirag.corpus import FORMAT_VERSION, HierarchicalCorpus
from langgraph_hirag.graph import build_hirag_graph, copies_example
from multihop_rag.corpus import Passage
from multihop_rag.frameworks.langgraph import stream_run
from multihop_rag.indexing.persistence import prepare_folder, read_manifest
from multihop_rag.method import Answer, Evidence, Models, TraceSink, UpdateReport

__all__ = ["HiRAGMethod", "HiRAGIndex", "METHOD", "trace_event"]


def trace_event(node: str, update: dict[str, Any]) -> dict[str, Any] | None:
    """A ``--trace`` line for one node's update: sub-questions, documents and chunks, verdicts, rethinks."""
    if node == "decompose" and update.get("current"):
        return {"step": "sub_question", "text": update["current"], "from": update.get("first_question", "decomposer")}
    if node == "decompose" and update.get("stop_reason"):
        return {"step": "decomposition_ends", "reason": update["stop_reason"]}
    if node == "extract_entity":
        return {"step": "entity", "text": update["entity"]}
    if node == "retrieve_chunk":
        attempt = update["attempts"][-1]
        return {"step": "retrieve", "document": attempt["title"], "chunk_rank": attempt["chunk_rank"], "level": attempt["level"]}
    if node == "verify":
        attempt = update["attempts"][-1]
        return {"step": "verify", "answer": attempt["response"], "verified": attempt["verified"]}
    if node == "rethink":
        return {"step": "rethink", **{k: update[k] for k in ("level", "doc_rank", "chunk_rank", "outcome") if k in update}}
    if node == "rewrite":
        return {"step": "rewrite", "question": update["rewritten"], "answer": update["response"]}
    if node == "internal_knowledge":
        return {"step": "internal_knowledge", "answer": update["attempts"][-1]["internal"]}
    if node == "record":
        return {"step": "sub_answer", "text": update["sub_answers"][0], "source": update["trace"][0]["source"]}
    if node == "summarize":
        return {"step": "summary", "reasoning": update["reasoning"]}
    return None


class HiRAGIndex:
    """HiRAG's graph over a :class:`~langgraph_hirag.HierarchicalCorpus`."""

    def __init__(self, chat: BaseChatModel, corpus: HierarchicalCorpus, config: HiRAGConfig, folder: Path):
        self.corpus, self.config, self.folder = corpus, config, folder
        self.graph = build_hirag_graph(chat, corpus, config=config)

    def answer(self, question: str, trace: TraceSink | None = None) -> Answer:
        started = time.perf_counter()
        state = stream_run(self.graph, {"question": question}, trace, trace_event)
        evidence = self._evidence(state.get("trace", []), state.get("summary_reads", []))
        info = {k: state.get(k) for k in ("stop_reason", "first_question", "copied_examples", "invented_answers",
                                         "off_option_answers", "invented_sub_answers", "truncated",
                                         "llm_calls", "sub_questions", "sub_answers")}
        info["limit_hit"] = state.get("stop_reason") == "max_subquestions"
        info["copied_example"] = bool(state.get("copied_examples")) or copies_example(state.get("answer", ""))
        info["attempts"] = sum(len(t["attempts"]) + (t["source"] == "rewrite") for t in state.get("trace", []))
        info["sub_answer_sources"] = [t["source"] for t in state.get("trace", [])]
        return Answer(question, state["answer"], evidence, time.perf_counter() - started, info=info)

    def _evidence(self, trace: Sequence[dict[str, Any]], summary_reads: Sequence[str]) -> list[Evidence]:
        """The chunks every sub-question's attempts and rewrites read, in that order, then those the Summarizer
        read (``reader_tokens``), each once; before a document's first attempted chunk, its profile (with
        ``use_profiles`` the Filter reads it, eq. 3)."""
        tried = [[a["chunk_id"] for a in t["attempts"] if a.get("chunk_id")] + t["rewrite_hits"] for t in trace]
        ids = list(dict.fromkeys([*(i for chunk_ids in tried for i in chunk_ids), *summary_reads]))
        found = {str(d.id): d for d in self.corpus.vector_store.get_by_ids(ids)} if ids else {}
        attempted = {a["chunk_id"] for t in trace for a in t["attempts"] if a.get("chunk_id")}
        evidence: list[Evidence] = []
        profiled: set[str] = set()
        for d in (found[i] for i in ids if i in found):  # the store returns them in its own order, not HiRAG's
            title = str(d.metadata.get("title", ""))
            if self.config.use_profiles and str(d.id) in attempted and title not in profiled:
                profiled.add(title)
                evidence.append(self._profile(title))
            passage = [str(d.metadata["passage_id"])] if d.metadata.get("passage_id") else []
            evidence.append(Evidence(id=str(d.id), title=title, text=d.page_content, passage_ids=passage, kind="chunk"))
        return evidence

    def _profile(self, title: str) -> Evidence:
        """A document's profile as evidence: the lead passage's opening holds its text; an LLM profile was
        written from all of the document's passages."""
        doc = self.corpus.document(title)
        lead = self.corpus.profiles == "lead"
        return Evidence(id=f"profile:{title}", title=title, text=doc.profile, kind="profile",
                        passage_ids=doc.passage_ids[:1] if lead else [], source_ids=[] if lead else list(doc.passage_ids))

    def update(self, passages: Sequence[Passage]) -> UpdateReport:
        """Make the corpus hold exactly ``passages``; the report names passages (the corpus re-indexes by title)."""
        started = time.perf_counter()
        before = {d.title: d.passage_ids for d in self.corpus.documents}
        changes = self.corpus.update(passages)  # persisted into the corpus's folder, this index's
        after = {d.title: d.passage_ids for d in self.corpus.documents}
        report = UpdateReport(seconds=0.0)
        for title in changes["added"]:
            report.added += after[title]
        for title in changes["removed"]:
            report.removed += before[title]
        for title in changes["changed"]:
            old, new = set(before[title]), after[title]
            report.added += [p for p in new if p not in old]
            report.changed += [p for p in new if p in old]
            report.removed += [p for p in before[title] if p not in set(new)]
        report.seconds = time.perf_counter() - started
        return report

    def stats(self) -> dict[str, Any]:
        chunks = len(self.corpus.chunk_ids)
        return {"documents": len(self.corpus), "chunks": chunks, "pool_size": chunks, "config": self.config.model_dump()}

    def as_langchain_retriever(self, k: int = 5) -> Any:
        """The corpus's chunks as a dense LangChain retriever (for ReSP over this store)."""
        return self.corpus.vector_store.as_retriever(search_kwargs={"k": k})


class HiRAGMethod:
    """HiRAG as the command line and the evaluation drive it."""

    name = "hirag"
    summary = "decompose, find the document by title then the chunk, verify, rethink (LangGraph)"
    builds = False
    config_class = HiRAGConfig
    source_packages = ("langgraph_hirag",)

    def build(self, passages: Sequence[Passage], models: Models, folder: Path, config: HiRAGConfig, *,
              overwrite: bool = False) -> HiRAGIndex:
        prepare_folder(folder, self.name, FORMAT_VERSION, overwrite=overwrite)
        # The folder is claimed: its store holds at most an unfinished build's chunks.
        corpus = HierarchicalCorpus.from_documents(passages, models.lc_embed, persist_dir=folder, overwrite=True)
        return HiRAGIndex(models.chat, corpus, config, folder)

    def load(self, folder: Path, models: Models, config: HiRAGConfig) -> HiRAGIndex:
        read_manifest(folder, self.name)
        return HiRAGIndex(models.chat, HierarchicalCorpus.from_persist_dir(folder, models.lc_embed), config, folder)


METHOD = HiRAGMethod()
