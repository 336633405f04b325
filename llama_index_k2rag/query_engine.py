"""K²RAG's query pipeline (Algorithm 2, Figure 8) and the four naive pipelines of §3.2.

K²RAG, step by step:
A. the knowledge graph answers the question;
B. that answer is summarized;
C. the summary is split into chunks of 128 tokens, overlap 10 (eq. 1), and the LLM writes one
   sub-question per chunk (Question Generation prompt);
D. each sub-question retrieves the top-k chunks with the hybrid retriever (λ = 0.8, k = 10) and
   the LLM answers it from them (Answer Generation prompt); each sub-answer is summarized, and
   their concatenation is summarized again;
E. the final answer comes from the KG summary plus the sub-answer summary (Answer Generation prompt) and, with
   ``reader_tokens`` (ours), the question's own chunks in rank order within that many tokens; with
   ``final_reads="pairs"`` (ours) each sub-question with its answer stands in for the sub-answer summary.

Where the paper disagrees with itself, this follows the prose of §3.1.3: step C splits the KG
*summary* (Algorithm 2 line 12 says the raw KG output) and step D answers the *sub-question*
(Algorithm 2 line 22 passes the user's question). By default (ours, measured on HotpotQA's tuning questions)
the user's question is the first sub-question of step D (``retrieve_for_question``), so its own passages are
read whatever the KG answered, and step A hands on the triples and source text the graph retrieved instead of
its answer (``kg_step="context"``); ``retrieve_for_question=False, kg_step="answer"`` is Algorithm 2. With ``sub_answer_sees_question`` step D answers each sub-question with the user's question in view
(Algorithm 2, line 22).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from llama_index.core.base.response.schema import Response
from llama_index.core.llms.llm import LLM
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore
from pydantic import ConfigDict, Field

from llama_index_k2rag import prompts
from llama_index_k2rag.config import FinalReads
from llama_index_k2rag.hybrid import HybridRetriever
from llama_index_k2rag.kg import KnowledgeGraph
from llama_index_k2rag.summarizers import Summarizer
from multihop_rag.frameworks.llama_index import TokenBudget
from multihop_rag.indexing.text import chunk_tokens
from multihop_rag.llm.calls import Reply
from multihop_rag.llm.concurrency import map_bounded
from multihop_rag.llm.questions import sub_question_of

__all__ = ["K2RAGQueryEngine", "NaiveQueryEngine", "PIPELINES"]

PIPELINES = ("k2rag", "semantic", "keyword", "hybrid", "kg")
"""K²RAG and the naive pipelines of §3.2 (semantic: λ=1, keyword: λ=0, hybrid: λ=0.8, KG only)."""


def _context(hits: list[NodeWithScore]) -> str:
    """The chunks as the answering model reads them: each with its title."""
    return "\n\n".join(h.node.get_content(metadata_mode=MetadataMode.LLM) for h in hits)


def _add_sources(sources: dict[str, NodeWithScore], hits: list[NodeWithScore]) -> None:
    """Each hit once, at its first place."""
    for hit in hits:
        sources.setdefault(hit.node.node_id, hit)


class K2RAGQueryEngine(CustomQueryEngine):
    """Algorithm 2. The response's ``metadata`` holds the KG answer and its summary, the
    sub-questions, sub-answers and their summary, and seconds per step."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLM = Field(description="The (quantized) LLM of every generation step.")
    kg: Any = Field(description="A KnowledgeGraph: query(question) -> text.")
    retriever: HybridRetriever = Field(description="Hybrid retriever over the summarized corpus.")
    summarizer: Any = Field(description="A Summarizer for the KG answer and the sub-answers.")
    result_chunk_size: int = Field(128, description="S when splitting the KG summary.")
    result_chunk_overlap: int = Field(10, description="O when splitting the KG summary.")
    retrieve_for_question: bool = Field(True, description="Ask the user's question as the first sub-question too (False: Algorithm 2).")
    kg_step: Literal["answer", "context"] = Field(
        "context", description="Step A hands on the graph's 'answer' (Algorithm 2) or its 'context' (evidence).")
    sub_answer_sees_question: bool = Field(False, description="Answer each sub-question with the user's question in view.")
    reader_tokens: int = Field(0, description="Step E also reads the question's own chunks within this many tokens (0: Algorithm 2).")
    final_reads: FinalReads = Field(
        "summary", description="Step E reads the sub-answers' summary ('summary', Algorithm 2) or each sub-question with its answer.")
    max_concurrency: int = Field(
        1, ge=1, description="Sub-questions worked on at once (steps C-D: each written, retrieved for, answered and its "
        "answer summarized independently of the others): a served model's slots; 1: one after another, in order.")

    def custom_query(self, query_str: str) -> Response:
        kg: KnowledgeGraph = self.kg
        summarizer: Summarizer = self.summarizer
        timings: dict[str, float] = {}
        started = time.perf_counter()
        kg_answer = kg.context(query_str) if self.kg_step == "context" else kg.query(query_str)
        timings["kg"] = time.perf_counter() - started

        started = time.perf_counter()
        kg_summary = summarizer.summarize(kg_answer) if kg_answer.strip() else ""
        timings["summarize_kg"] = time.perf_counter() - started

        started = time.perf_counter()
        chunks = chunk_tokens(kg_summary, self.result_chunk_size, self.result_chunk_overlap) if kg_summary else []

        def sub_question_chain(chunk: str | None) -> tuple[str, list[NodeWithScore], str]:
            """Steps C-D for one chunk of the KG summary (None: the user's question itself)."""
            if chunk is None:
                sub_question = query_str
            else:
                sub_question = sub_question_of(Reply(self.llm.complete(prompts.SUB_QUESTION.format(chunk=chunk)).text)) or chunk
            hits = self.retriever.retrieve(sub_question)
            if self.sub_answer_sees_question and sub_question != query_str:
                prompt = prompts.SUB_ANSWER.format(context=_context(hits), question=sub_question, main_question=query_str)
            else:
                prompt = prompts.ANSWER.format(context=_context(hits), question=sub_question)
            return sub_question, hits, summarizer.summarize(self.llm.complete(prompt).text.strip())

        jobs: list[str | None] = [*([None] if self.retrieve_for_question else []), *chunks]
        sub_questions, sub_answers = [], []
        sources: dict[str, NodeWithScore] = {}
        question_hits: list[NodeWithScore] = []
        for sub_question, hits, sub_answer in map_bounded(sub_question_chain, jobs, max_concurrency=self.max_concurrency,
                                                          show_progress=False):
            if sub_question == query_str:
                question_hits = hits
            sub_questions.append(sub_question)
            sub_answers.append(sub_answer)
            _add_sources(sources, hits)
        timings["sub_questions"] = time.perf_counter() - started

        started = time.perf_counter()
        if self.final_reads == "pairs":
            sub_summary = ""
            answers = "\n\n".join(f"Q: {q}\nA: {a}" for q, a in zip(sub_questions, sub_answers, strict=True))
        else:
            sub_summary = answers = summarizer.summarize(" ".join(sub_answers)) if sub_answers else ""
        context = "\n".join(part for part in (kg_summary, answers) if part)
        read: list[NodeWithScore] = []
        if self.reader_tokens:
            read = TokenBudget(tokens=self.reader_tokens).postprocess_nodes(question_hits or self.retriever.retrieve(query_str))
            _add_sources(sources, read)
            context = "\n\n".join(part for part in (context, _context(read)) if part)
        final = self.llm.complete(prompts.ANSWER.format(context=context, question=query_str)).text.strip()
        timings["answer"] = time.perf_counter() - started
        return Response(
            response=final,
            source_nodes=list(sources.values()),
            metadata={
                "kg_answer": kg_answer,
                "kg_summary": kg_summary,
                "sub_questions": sub_questions,
                "sub_answers": sub_answers,
                "sub_answer_summary": sub_summary,
                "read": [h.node.node_id for h in read],
                "timings": timings,
            },
        )


class NaiveQueryEngine(CustomQueryEngine):
    """A naive pipeline of §3.2: retrieve (dense, sparse, hybrid or KG), then one answer with the
    Answer Generation prompt."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLM = Field(description="The LLM that writes the answer.")
    retriever: HybridRetriever | None = Field(None, description="The retriever (semantic/keyword/hybrid).")
    kg: Any = Field(None, description="The knowledge graph (the KG pipeline).")

    def custom_query(self, query_str: str) -> Response:
        started = time.perf_counter()
        if self.kg is not None:
            hits: list[NodeWithScore] = []
            context = self.kg.query(query_str)
        elif self.retriever is not None:
            hits = self.retriever.retrieve(query_str)
            context = _context(hits)
        else:
            raise ValueError("a K²RAG query engine needs a knowledge graph or a retriever")
        retrieved = time.perf_counter() - started
        started = time.perf_counter()
        answer = self.llm.complete(prompts.ANSWER.format(context=context, question=query_str)).text.strip()
        timings = {"retrieve": retrieved, "answer": time.perf_counter() - started}
        return Response(response=answer, source_nodes=hits, metadata={"context": context, "timings": timings})
