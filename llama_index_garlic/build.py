"""Summary Graph Construction (§3.1): chunks, batches, Information Points, weighted edges.

1. Documents become 300-token chunks, the level-1 nodes (sentence boundaries kept; consecutive
   short documents share a chunk, as when LongBench concatenates a question's passages).
2. The nodes of a level are taken in order into batches until the batch, the Table 4 prompt and
   the summary reserve would exceed ``n_s``; the LLM turns each batch into bullet-point IPs, the
   nodes of the next level.
3. Each IP gets an edge to every node of its batch, weighted by the attention from the IP's tokens
   to the node's tokens (Appendix B.1, :mod:`llama_index_garlic.attention`) or, without an
   attention model, by the IP–node embedding similarity; each IP's edges sum to 1.
4. Levels repeat until a level fits in one batch; that batch's IPs form the top level (so a short
   corpus still gets one summary level, as the paper's HotpotQA example in Appendix D shows).

A reply without bullets is split into lines (or sentences); an empty reply is retried once with a
reminder, then the batch is skipped with a warning and counted; a reply cut at the summary's token
cap loses the IP it was writing. A batch whose IPs cannot be aligned with the attention model's
tokens gets embedding edges and is counted (``edge_source`` is then ``mixed``). LLM calls go through
the persistent cache, so an interrupted build resumes without repeating them.

Table 2's "w/o Graph-based Summary" (``summary="tree"``) summarizes each batch into one node, as a
tree does (Figure 2b); ``summary="none"`` builds no summary level at all.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms.llm import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from tqdm.auto import tqdm

from llama_index_garlic import prompts
from llama_index_garlic.attention import AttentionModel
from llama_index_garlic.config import GarlicConfig
from llama_index_garlic.graph import GraphNode, SummaryGraph, node_id, normalize_edges
from multihop_rag.calls import Call, call
from multihop_rag.text import count_tokens, split_sentences

__all__ = ["BuildReport", "chunk_documents", "make_batches", "parse_information_points", "build_graph"]

log = logging.getLogger(__name__)

_BULLET = re.compile(r"^\s*(?:[*\-•·]+|\d+[.)])\s+(.*\S)\s*$")
_PLACEHOLDER = {"summary point", "......", "..."}


@dataclass
class BuildReport:
    """What a build did: counts, failures, seconds. Counters are updated from worker threads: use :meth:`add`."""

    batches: dict[int, int] = field(default_factory=dict)
    skipped_batches: int = 0
    unbulleted_replies: int = 0
    retried_replies: int = 0
    truncated_replies: int = 0
    """Replies cut at the summary's token cap (their last, unfinished IP dropped)."""
    embedding_edge_batches: int = 0
    alignment_failures: int = 0
    """Batches whose IPs could not be found in the attention model's tokens (given embedding edges)."""
    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)


def _flat(text: str) -> str:
    return " ".join(text.split())


def chunk_documents(documents: Sequence[Document], size: int) -> list[GraphNode]:
    """Level-1 nodes: each document (titled) split at sentences into ≤ ``size``-token pieces;
    consecutive pieces are packed into chunks of at most ``size`` tokens."""
    splitter = SentenceSplitter(chunk_size=size, chunk_overlap=0)
    pieces: list[tuple[str, str]] = []
    for doc in documents:
        title = str(doc.metadata.get("title") or "")
        text = doc.text if not title or doc.text.startswith(title) else f"{title}\n{doc.text}"
        pieces.extend((piece, doc.doc_id) for piece in splitter.split_text(text) if piece.strip())
    chunks: list[GraphNode] = []
    texts: list[str] = []
    docs: list[str] = []
    tokens = 0

    def flush() -> None:
        if texts:
            text = "\n".join(texts)
            chunks.append(GraphNode(node_id(1, text), text, 1, count_tokens(text), list(dict.fromkeys(docs))))

    for text, doc_id in pieces:
        n = count_tokens(text)
        if texts and tokens + n > size:
            flush()
            texts, docs, tokens = [], [], 0
        texts.append(text)
        docs.append(doc_id)
        tokens += n
    flush()
    return list({c.id: c for c in chunks}.values())


def make_batches(nodes: Sequence[GraphNode], budget: int) -> list[list[GraphNode]]:
    """Consecutive nodes until their bullet lines would exceed ``budget`` tokens (at least one each)."""
    batches: list[list[GraphNode]] = []
    current: list[GraphNode] = []
    used = 0
    for node in nodes:
        cost = node.tokens + 2
        if current and used + cost > budget:
            batches.append(current)
            current, used = [], 0
        current.append(node)
        used += cost
    if current:
        batches.append(current)
    return batches


def parse_information_points(reply: str) -> tuple[list[str], bool]:
    """The IPs in a reply and whether they came as bullets; placeholders and repeats dropped."""
    lines = [m.group(1).strip() for line in reply.splitlines() if (m := _BULLET.match(line))]
    bulleted = bool(lines)
    if not bulleted:
        lines = [line.strip() for line in reply.splitlines() if line.strip()]
        if len(lines) == 1:
            lines = split_sentences(lines[0])
    points = [p for p in dict.fromkeys(lines) if p.lower().strip(" .*") not in _PLACEHOLDER and len(p) > 2]
    return points, bulleted


def _summarize(llm: LLM, texts: list[str], max_tokens: int, report: BuildReport) -> tuple[str, str, list[str]] | None:
    """The Table 4 exchange for one batch: (prompt, reply, IPs), or None when no IP comes back."""
    prompt = prompts.SUMMARIZE.format(segments="".join(prompts.bullet(t) for t in texts))
    for attempt, ask in enumerate((prompt, prompt + prompts.BULLET_REMINDER)):
        reply = call(Call(llm, ask, max_tokens=max_tokens))
        points, bulleted = parse_information_points(reply.text)
        if reply.truncated:
            points = points[:-1]  # the IP being written at the cap is a fragment
            report.add(truncated_replies=1)
        if points:
            report.add(unbulleted_replies=int(not bulleted), retried_replies=attempt)
            return ask, reply.text, points
    return None


def _embed(embed_model: BaseEmbedding, texts: list[str], show_progress: bool) -> np.ndarray:
    if not texts:
        return np.zeros((0, 0))
    vectors = np.asarray(embed_model.get_text_embedding_batch(texts, show_progress=show_progress), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def build_graph(
    documents: Sequence[Document],
    *,
    llm: LLM,
    embed_model: BaseEmbedding,
    attention: AttentionModel | None,
    config: GarlicConfig,
    show_progress: bool = True,
    report: BuildReport | None = None,
) -> SummaryGraph:
    """Build the HWDAG of ``documents`` (see the module docstring)."""
    report = report if report is not None else BuildReport()
    window = config.window(llm.metadata.context_window)
    summary_tokens = config.summary_budget(llm.metadata.context_window)
    overhead = count_tokens(prompts.SUMMARIZE_HEAD + prompts.SUMMARIZE_TAIL) + 64  # + chat template
    budget = window - overhead - summary_tokens
    if budget < config.chunk_size:
        raise ValueError(
            f"n_s={window} leaves {budget} tokens per batch after the prompt and {summary_tokens} summary tokens; "
            f"raise n_s or lower summary_tokens (a batch must hold at least one {config.chunk_size}-token chunk)"
        )

    started = time.perf_counter()
    level_nodes = chunk_documents(documents, config.chunk_size)
    if not level_nodes:
        raise ValueError("the documents hold no text to index")
    vectors = [_embed(embed_model, [n.text for n in level_nodes], show_progress)]
    nodes = list(level_nodes)
    edges: dict[str, dict[str, float]] = {}
    report.seconds["chunk_and_embed"] = time.perf_counter() - started

    level = 1
    while config.summary != "none" and level <= config.max_levels:
        mark = time.perf_counter()
        batches = make_batches(level_nodes, budget)
        report.batches[level] = len(batches)
        jobs = [[n.text for n in batch] for batch in batches]
        results: list[Any] = [None] * len(batches)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max(1, config.workers)) as pool, tqdm(
            total=len(batches), desc=f"GARLIC level {level}->{level + 1} summaries", disable=not show_progress
        ) as bar:
            futures = [pool.submit(_summarize, llm, texts, summary_tokens, report) for texts in jobs]
            for i, future in enumerate(futures):
                try:
                    results[i] = future.result()
                except Exception as exc:  # one bad batch must not lose the build
                    errors.append(exc)
                    log.warning("GARLIC: summarizing batch %d of level %d failed: %s", i, level, exc)
                bar.update()
        if errors and len(errors) == len(batches):
            raise RuntimeError(f"every summarization batch of level {level} failed; first error: {errors[0]}") from errors[0]
        report.seconds[f"summaries_level_{level + 1}"] = time.perf_counter() - mark

        mark = time.perf_counter()
        new_nodes: list[GraphNode] = []
        exchanges: list[tuple[list[GraphNode], str, str, list[GraphNode]]] = []
        for batch, result in zip(batches, results, strict=True):
            if result is None:
                report.add(skipped_batches=1)
                log.warning("GARLIC: no summary points for a batch of %d level-%d nodes; skipped", len(batch), level)
                continue
            prompt, reply, points = result
            if config.summary == "tree":  # Table 2's w/o Graph-based Summary: one node per batch
                points = [" ".join(points)]
            kids = [n.id for n in batch]
            doc_ids = list(dict.fromkeys(d for n in batch for d in n.doc_ids))
            ips = [GraphNode(node_id(level + 1, p, kids), p, level + 1, count_tokens(p), doc_ids) for p in points]
            ips = list({ip.id: ip for ip in ips}.values())
            new_nodes.extend(ips)
            exchanges.append((batch, prompt, reply, ips))
        known = {n.id for n in nodes}
        new_nodes = [n for n in new_nodes if n.id not in known]
        if not new_nodes:
            log.warning("GARLIC: level %d produced no new node; the graph stops at level %d", level + 1, level)
            break
        new_vectors = _embed(embed_model, [n.text for n in new_nodes], False)
        row = {n.id: i for i, n in enumerate(new_nodes)}
        old_row = {n.id: i for i, n in enumerate(level_nodes)}
        for batch, prompt, reply, ips in tqdm(exchanges, desc=f"GARLIC level {level + 1} edges", disable=not show_progress):
            ips = [ip for ip in ips if ip.id in row]
            if not ips:
                continue
            weights = None
            if attention is not None:
                weights = attention.summary_edges(prompt, reply, [_flat(n.text) for n in batch], [ip.text for ip in ips])
                if weights is None:
                    report.add(alignment_failures=1)
                    log.warning("GARLIC: could not align a batch with the attention model's tokens; embedding edges used")
            if weights is None:
                report.add(embedding_edge_batches=1)
                level_vectors = vectors[-1]
                weights = new_vectors[[row[ip.id] for ip in ips]] @ level_vectors[[old_row[n.id] for n in batch]].T
            weights = normalize_edges(weights)
            for ip, ip_weights in zip(ips, weights, strict=True):
                edges[ip.id] = {child.id: float(w) for child, w in zip(batch, ip_weights, strict=True)}
        report.seconds[f"edges_level_{level + 1}"] = time.perf_counter() - mark

        nodes.extend(new_nodes)
        vectors.append(new_vectors)
        if len(batches) == 1:
            break
        if sum(n.tokens for n in new_nodes) >= sum(n.tokens for n in level_nodes):
            log.warning("GARLIC: level %d is no shorter than level %d; stopping here", level + 1, level)
            break
        level_nodes = new_nodes
        level += 1

    if attention is None:
        edge_source = "embedding"
    else:
        edge_source = "mixed" if report.alignment_failures else "attention"
    return SummaryGraph(nodes=nodes, edges=edges, embeddings=np.vstack(vectors), edge_source=edge_source)
