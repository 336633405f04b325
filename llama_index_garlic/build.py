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
   corpus still gets one summary level, as the paper's HotpotQA example in Appendix D shows). A level
   no shorter than the one below, or past ``max_levels``, ends the graph too. With slots to spare a
   level's batches start before the level below is finished (:class:`_Levels`), to the same graph.

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
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
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
from multihop_rag.indexing.text import count_tokens, split_sentences
from multihop_rag.llm.calls import Call, call

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
    rewritten_batches: int = 0
    """Batches summarized (all of them in a build; in an update, those that changed)."""
    reused_batches: int = 0
    """Batches an update kept as they were (their points, edges and vectors)."""
    alignment_failures: int = 0
    """Batches whose IPs could not be found in the attention model's tokens (given embedding edges)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time by step; ``attention``: the attention model's forward passes for the edges."""
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


@dataclass
class GreedyBatcher:
    """Greedy batching (§3.1 Step 2): consecutive nodes until their bullet lines would exceed ``budget`` tokens (at
    least one each). Nodes may come in several steps (a level filling up); each is looked at once."""

    budget: int
    open: list[GraphNode] = field(default_factory=list)
    """The batch the next node joins."""
    used: int = 0

    def add(self, nodes: Iterable[GraphNode]) -> list[list[GraphNode]]:
        """Take ``nodes`` in order; the batches they close."""
        closed: list[list[GraphNode]] = []
        for node in nodes:
            cost = node.tokens + 2
            if self.open and self.used + cost > self.budget:
                closed.append(self.open)
                self.open, self.used = [], 0
            self.open.append(node)
            self.used += cost
        return closed

    def finish(self) -> list[list[GraphNode]]:
        """The last batch, if any node is in it."""
        last, self.open, self.used = self.open, [], 0
        return [last] if last else []


def make_batches(nodes: Sequence[GraphNode], budget: int) -> list[list[GraphNode]]:
    """Every batch of ``nodes`` under greedy batching (:class:`GreedyBatcher`)."""
    batcher = GreedyBatcher(budget)
    return batcher.add(nodes) + batcher.finish()


def parse_information_points(reply: str) -> tuple[list[str], bool]:
    """The IPs in a reply and whether they came as bullets; placeholders and repeats dropped. Lines end at a
    newline only (``splitlines`` also ends one at U+2028 and other separators inside a point)."""
    lines = [m.group(1).strip() for line in reply.split("\n") if (m := _BULLET.match(line))]
    bulleted = bool(lines)
    if not bulleted:
        lines = [line.strip() for line in reply.split("\n") if line.strip()]
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


def _summarize_safely(batch: list[GraphNode], *, llm: LLM, max_tokens: int, report: BuildReport) -> Any:
    """:func:`_summarize`, or the exception it raised: one bad batch must not lose the build."""
    try:
        return _summarize(llm, [n.text for n in batch], max_tokens, report)
    except Exception as exc:
        log.warning("GARLIC: summarizing a batch of %d nodes failed: %s", len(batch), exc)
        return exc


def _embed(embed_model: BaseEmbedding, texts: list[str], show_progress: bool) -> np.ndarray:
    if not texts:
        return np.zeros((0, 0))
    vectors = np.asarray(embed_model.get_text_embedding_batch(texts, show_progress=show_progress), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _previous_batches(graph: SummaryGraph | None, level: int) -> list[tuple[list[str], list[str]]]:
    """The batches level ``level`` was summarized in, as ``(children, points)`` in order: the points of
    level + 1 grouped by the children their edges reach (every point of a batch has an edge to each of
    its nodes)."""
    if graph is None:
        return []
    batches: dict[tuple[str, ...], list[str]] = {}
    for node in graph.levels.get(level + 1, []):
        children = tuple(graph.edges.get(node.id, {}))
        if children:
            batches.setdefault(children, []).append(node.id)
    return [(list(children), points) for children, points in batches.items()]


@dataclass
class _Level:
    """A level while the graph grows: its nodes as they come up from the level below, and its batches."""

    number: int
    nodes: list[GraphNode] = field(default_factory=list)
    tokens: int = 0
    """The nodes' tokens, kept as they come (summed again on every finished summary, a level cost O(n²))."""
    complete: bool = False
    """Every node is known: the level below is summarized."""
    plan: list[tuple[list[GraphNode], list[str] | None]] = field(default_factory=list)
    """Batches known so far, each with the points an update keeps (None: summarize it)."""
    planned: bool = False
    """``plan`` holds every batch."""
    submitted: int = 0
    results: dict[int, Any] = field(default_factory=dict)
    emitted: int = 0
    """Batches (in order) whose points went up to the next level."""
    exchanges: list[tuple[list[GraphNode], str, str, list[GraphNode]]] = field(default_factory=list)
    """Summarized batches with their prompt, reply and points, for the next level's edges."""
    closed: bool = False
    batcher: GreedyBatcher | None = None
    """While the level fills: its batches so far (all but the last fixed)."""
    fed: int = 0
    """Nodes taken into batches so far."""

    def __post_init__(self) -> None:
        self.tokens = sum(n.tokens for n in self.nodes)

    def extend(self, nodes: Sequence[GraphNode]) -> None:
        self.nodes += nodes
        self.tokens += sum(n.tokens for n in nodes)

    def closed_batches(self, budget: int) -> list[list[GraphNode]]:
        """The batches the nodes come up since the last call close, each node batched once: the same batches
        :func:`make_batches` gives the whole level, but the last (still open)."""
        self.batcher = self.batcher or GreedyBatcher(budget)
        closed = self.batcher.add(self.nodes[self.fed :])
        self.fed = len(self.nodes)
        return closed


class _Levels:
    """Steps 2-4 (§3.1): levels of IPs, ``max_concurrency`` summaries in flight.

    One at a time (the in-process model), level after level. With more, a level does not wait for the
    whole level below: greedy batching fixes every batch but the last as soon as the next node comes
    up, so each starts then, beside the rest of the level below, once the points still to come (at most
    twice the summary cap per batch) cannot make the level as long as the one below (that would end the
    graph). Should a reply break that bound, the level's early summaries are dropped when it turns out
    complete and too long. Either way the graph is the one a build level by level makes."""

    def __init__(self, *, llm: LLM, embed_model: BaseEmbedding, attention: AttentionModel | None, config: GarlicConfig,
                 budget: int, summary_tokens: int, report: BuildReport, previous: SummaryGraph | None,
                 vector_of: dict[str, np.ndarray], max_concurrency: int, show_progress: bool) -> None:
        self.llm, self.embed_model, self.attention, self.config = llm, embed_model, attention, config
        self.budget, self.summary_tokens, self.report, self.previous = budget, summary_tokens, report, previous
        self.vector_of, self.show_progress = vector_of, show_progress
        self.max_concurrency = max(1, max_concurrency)
        self.early = self.max_concurrency > 1 and previous is None  # an update plans a level from its old batches
        self.old_node = {n.id: n for n in previous.nodes} if previous is not None else {}
        self.nodes: list[GraphNode] = []
        self.edges: dict[str, dict[str, float]] = {}

    def run(self, chunks: list[GraphNode]) -> tuple[list[GraphNode], dict[str, dict[str, float]]]:
        """All nodes (chunks first, then level by level) and the edges of every higher node."""
        self.nodes = list(chunks)
        levels = [_Level(1, list(chunks), complete=True)]
        running: dict[Future[Any], tuple[_Level, int]] = {}
        summarize = partial(_summarize_safely, llm=self.llm, max_tokens=self.summary_tokens, report=self.report)
        with ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="multihop-rag-llm") as pool, tqdm(
            total=0, desc="GARLIC summaries", disable=not self.show_progress
        ) as bar:
            try:
                while True:
                    moved = self._advance(levels, running)
                    for level in levels:
                        self._plan(level)
                        if self._summarized(level, levels) is not True:
                            continue
                        for i in range(level.submitted, len(level.plan)):
                            batch, kept = level.plan[i]
                            if kept is None:
                                running[pool.submit(summarize, batch)] = (level, i)
                                bar.total += 1
                            else:
                                level.results[i] = kept
                        moved |= level.submitted < len(level.plan)
                        level.submitted = len(level.plan)
                    bar.refresh()
                    if not running:
                        if moved:
                            continue
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        level, i = running.pop(future)
                        level.results[i] = future.result()
                        bar.update()
            except BaseException:
                for future in running:
                    future.cancel()  # summaries not started yet do not start
                raise
        return self.nodes, self.edges

    def _summarized(self, level: _Level, levels: list[_Level]) -> bool | None:
        """Whether ``level`` is summarized into another (None: not known yet)."""
        if level.number > self.config.max_levels or (level.complete and not level.nodes):
            return False
        if level.number == 1:
            return True
        below = levels[level.number - 2]
        if below.planned and len(below.plan) < 2:
            return False  # one batch below: its points are the top level
        if level.complete:
            return level.tokens < below.tokens
        to_come = (len(below.plan) - below.emitted) * 2 * self.summary_tokens
        return True if self.early and below.planned and level.tokens + to_come < below.tokens else None

    def _plan(self, level: _Level) -> None:
        if level.planned or not (level.complete or self.early):
            return
        if not level.complete:  # every batch but the last is fixed
            level.plan += [(b, None) for b in level.closed_batches(self.budget)]
            return
        if not level.plan:  # an update keeps the old batches whose nodes are all still there
            present = {n.id: n for n in level.nodes}
            for children, points in _previous_batches(self.previous, level.number):
                batch = [present[c] for c in children if c in present]
                if batch:
                    level.plan.append((batch, points if len(batch) == len(children) else None))
        planned = {n.id for batch, _ in level.plan for n in batch}
        level.plan += [(b, None) for b in make_batches([n for n in level.nodes if n.id not in planned], self.budget)]
        level.planned = True

    def _advance(self, levels: list[_Level], running: dict[Future[Any], tuple[_Level, int]]) -> bool:
        """Send finished batches' points up, in order, and close levels whose batches are all done."""
        moved = False
        for level in list(levels):
            if level not in levels:
                break
            if self._summarized(level, levels) is False and level.complete:
                if len(levels) > level.number or level.results:  # early summaries of a level that ends the graph
                    for future, (owner, _) in list(running.items()):
                        if owner.number >= level.number:
                            future.cancel()
                            del running[future]
                    del levels[level.number:]
                    level.results.clear()
                    moved = True
                break
            while level.emitted < len(level.plan) and level.emitted in level.results:
                self._emit(level, levels)
                level.emitted += 1
                moved = True
            if level.planned and not level.closed and level.emitted == len(level.plan):
                self._close(level, levels)
                moved = True
        return moved

    def _next(self, level: _Level, levels: list[_Level]) -> _Level:
        if len(levels) == level.number:
            levels.append(_Level(level.number + 1))
        return levels[level.number]

    def _emit(self, level: _Level, levels: list[_Level]) -> None:
        """The points of batch ``level.emitted`` join the next level."""
        batch, kept = level.plan[level.emitted]
        up = self._next(level, levels)
        if kept is not None:  # an update keeps this batch: its points, edges and vectors stay
            up.extend([self.old_node[p] for p in kept])
            self.edges.update({p: self.previous.edges[p] for p in kept})  # type: ignore[union-attr]
            return
        result = level.results[level.emitted]
        if result is None or isinstance(result, Exception):
            self.report.add(skipped_batches=1)
            log.warning("GARLIC: no summary points for a batch of %d level-%d nodes; skipped", len(batch), level.number)
            return
        prompt, reply, texts = result
        if self.config.summary == "tree":  # Table 2's w/o Graph-based Summary: one node per batch
            texts = [" ".join(texts)]
        kids = [n.id for n in batch]
        doc_ids = list(dict.fromkeys(d for n in batch for d in n.doc_ids))
        ips = [GraphNode(node_id(level.number + 1, t, kids), t, level.number + 1, count_tokens(t), doc_ids) for t in texts]
        ips = list({ip.id: ip for ip in ips}.values())
        up.extend(ips)
        level.exchanges.append((batch, prompt, reply, ips))

    def _close(self, level: _Level, levels: list[_Level]) -> None:
        """Every batch of ``level`` is summarized: check it, embed the next level and weigh its edges."""
        level.closed = True
        todo = [i for i, (_, kept) in enumerate(level.plan) if kept is None]
        failed = [level.results[i] for i in todo if isinstance(level.results[i], Exception)]
        if todo and len(failed) == len(todo) == len(level.plan):
            raise RuntimeError(f"every summarization batch of level {level.number} failed; first error: {failed[0]}") from failed[0]
        self.report.batches[level.number] = len(level.plan)
        self.report.add(rewritten_batches=len(todo), reused_batches=len(level.plan) - len(todo))
        up = self._next(level, levels)
        up.complete = True
        if not up.nodes:
            log.warning("GARLIC: level %d produced no new node; the graph stops at level %d", level.number + 1, level.number)
            return
        mark = time.perf_counter()
        fresh = [n for n in up.nodes if n.id not in self.vector_of]
        vectors = _embed(self.embed_model, [n.text for n in fresh], False)
        self.vector_of.update({n.id: v for n, v in zip(fresh, vectors, strict=True)})
        for batch, prompt, reply, ips in tqdm(level.exchanges, desc=f"GARLIC level {level.number + 1} edges",
                                              disable=not self.show_progress):
            weights = None
            if self.attention is not None:
                started = time.perf_counter()
                weights = self.attention.summary_edges(prompt, reply, [_flat(n.text) for n in batch], [ip.text for ip in ips])
                self.report.seconds["attention"] = self.report.seconds.get("attention", 0.0) + time.perf_counter() - started
                if weights is None:
                    self.report.add(alignment_failures=1)
                    log.warning("GARLIC: could not align a batch with the attention model's tokens; embedding edges used")
            if weights is None:
                self.report.add(embedding_edge_batches=1)
                weights = np.asarray([self.vector_of[ip.id] for ip in ips]) @ np.asarray([self.vector_of[n.id] for n in batch]).T
            for ip, ip_weights in zip(ips, normalize_edges(weights), strict=True):
                self.edges[ip.id] = {child.id: float(w) for child, w in zip(batch, ip_weights, strict=True)}
        self.nodes.extend(up.nodes)
        if len(level.plan) > 1 and up.tokens >= level.tokens:
            log.warning("GARLIC: level %d is no shorter than level %d; stopping here", up.number, level.number)
        self.report.seconds[f"edges_level_{level.number + 1}"] = time.perf_counter() - mark


def build_graph(
    documents: Sequence[Document],
    *,
    llm: LLM,
    embed_model: BaseEmbedding,
    attention: AttentionModel | None,
    config: GarlicConfig,
    max_concurrency: int = 1,
    show_progress: bool = True,
    report: BuildReport | None = None,
    previous: SummaryGraph | None = None,
    dropped: Sequence[str] = (),
) -> SummaryGraph:
    """Build the HWDAG of ``documents`` (see the module docstring), or update ``previous``.

    An update takes ``documents`` (new or changed) and ``dropped`` (ids of removed or changed documents):
    the chunks holding a dropped document go (the other documents packed in them are chunked again with
    the new ones, at the end of level 1), and only batches that lost a node, or hold new nodes, are
    summarized again; every other batch keeps its points, edges and embeddings. Changes climb level by
    level to the top."""
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
    old_vectors = {} if previous is None else {n.id: previous.embeddings[i] for i, n in enumerate(previous.nodes)}
    old_chunks = previous.levels.get(1, []) if previous is not None else []
    gone = set(dropped)
    hit = [c for c in old_chunks if gone & set(c.doc_ids)]
    rechunk = {d for c in hit for d in c.doc_ids} - gone
    kept = [c for c in old_chunks if c not in hit]
    by_id = {d.doc_id: d for d in documents}
    again = [by_id[d] for d in rechunk if d in by_id]
    level_nodes = kept + chunk_documents([*again, *[d for d in documents if d.doc_id not in rechunk]], config.chunk_size)
    level_nodes = list({n.id: n for n in level_nodes}.values())
    if not level_nodes:
        raise ValueError("the documents hold no text to index")
    fresh = [n for n in level_nodes if n.id not in old_vectors]
    new_vectors = _embed(embed_model, [n.text for n in fresh], show_progress)
    vector_of = {**old_vectors, **{n.id: v for n, v in zip(fresh, new_vectors, strict=True)}}
    nodes: list[GraphNode] = list(level_nodes)
    edges: dict[str, dict[str, float]] = {}
    report.seconds["chunk_and_embed"] = time.perf_counter() - started

    if config.summary != "none":
        levels = _Levels(llm=llm, embed_model=embed_model, attention=attention, config=config, budget=budget,
                         summary_tokens=summary_tokens, report=report, previous=previous, vector_of=vector_of,
                         max_concurrency=max_concurrency, show_progress=show_progress)
        mark = time.perf_counter()
        nodes, edges = levels.run(level_nodes)
        report.seconds["levels"] = report.seconds.get("levels", 0.0) + time.perf_counter() - mark

    if attention is None:
        edge_source = "embedding"
    else:
        edge_source = "mixed" if report.alignment_failures else "attention"
    if previous is not None and previous.edge_source != edge_source and attention is not None:
        edge_source = "mixed"
    return SummaryGraph(nodes=nodes, edges=edges, embeddings=np.vstack([vector_of[n.id] for n in nodes]), edge_source=edge_source)
