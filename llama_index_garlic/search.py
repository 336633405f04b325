"""Dynamic Graph Search (§3.2): LLM-controlled Greedy Best-First Search over the HWDAG.

1. The visited set S starts as the top-level nodes (if they do not fit the window, the ones
   most similar to the query that fit in half of it, as the paper's fixed-budget ablation does;
   with ``start_nodes``, that many of the most similar; with ``start_from="all_levels"``, of the
   whole graph's nodes, chunks included).
2. The LLM gets Table 5's first turn — the question and S in visit order — and answers Yes/No (with
   ``ask_after_chunk``, only once S holds a level-1 chunk; until then step 3 runs unasked).
3. On "No" (or a "Yes" short of the stop patience p) every unvisited node is scored by
   ``z = Eᵀa`` plus the query–node embedding similarity, each normalised to sum to 1
   (:func:`~llama_index_garlic.graph.next_node_scores`); the best is appended to S. ``a`` is the
   attention each visited node paid to the question, times its position (§3.2.2).
4. After the p-th "Yes" the second turn asks for the answer, in the same conversation (Table 5).

The loop also ends when the next node would overflow the window (``budget``), after
``max_steps`` nodes, or when every node is visited; the reason is recorded. Such a search never
got its "Yes": no "Yes" turn is invented for it — the answer is asked in one turn that says the
information may be incomplete, and the result is marked ``complete=False``. A node is never
visited twice. Without an attention model, or with ``attention_search=False``, the scores are
embedding similarity alone (Table 2's "w/o attention search"), with the same Yes/No control.
Without Dynamic Progress Control (Table 2's ablation) the search visits a fixed number of nodes
and asks no Yes/No; it starts from at most ``fixed_nodes / levels`` top-level nodes, the most
similar to the query.

KV reuse (Appendix C): the attention model keeps the prompt's keys and values between steps
(:class:`~llama_index_garlic.attention.AttentionSession`); llama.cpp reuses the longest common
prompt prefix between calls by itself, so each Yes/No call there also costs only the new node.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.llm import LLM

from llama_index_garlic import prompts
from llama_index_garlic.attention import AttentionModel
from llama_index_garlic.graph import SummaryGraph, next_node_scores, position_weighted
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.calls import run
from multihop_rag.llm.questions import asks_yes_no
from multihop_rag.llm.structured import StructuredStats, generate_label, label_probability_dialogue

__all__ = ["Controller", "LLMController", "SearchResult", "StartFrom", "graph_search"]

_YES_NO_REPLY = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
"""A second turn still in first-turn mode: a bare "Yes"/"No" or one leading the reply ("Yes, the
question can be answered by the information provided." from Qwen2.5-0.5B on HotpotQA)."""


class Controller(Protocol):
    """Who decides when to stop and writes the answer (Table 5)."""

    calls: int
    probabilities: list[float | None]
    """P(Yes) each Yes/No was decided from, in order (empty for a controller that reads none)."""

    def sufficient(self, prompt: str) -> str:
        """``"Yes"`` or ``"No"`` for the first-turn prompt."""

    def answer(self, prompt: str, question: str) -> str:
        """The second-turn answer to ``question`` after the first turn ``prompt`` was answered "Yes"."""

    def answer_incomplete(self, information: str, question: str) -> str:
        """The answer to ``question`` from ``information`` when the search stopped without a "Yes"."""


class LLMController:
    """Table 5 with a LlamaIndex LLM: constrained Yes/No where the backend allows it, parsed otherwise; with
    ``yes_threshold``, "Yes" when P(Yes) from a free reply's first token reaches it."""

    def __init__(
        self, llm: LLM, stats: StructuredStats | None = None, short_answer: bool = False, yes_threshold: float | None = None
    ):
        self.llm = llm
        self.stats = stats
        self.instruction = prompts.SHORT_ANSWER if short_answer else ""
        """Added to every answer prompt (``GarlicConfig.short_answer``)."""
        self.yes_threshold = yes_threshold
        self.calls = 0
        self.echoes = 0
        """Second turns that came back as Yes/No (bare or leading the reply) and were asked again."""
        self.probabilities: list[float | None] = []
        """With ``yes_threshold``: P(Yes) of each Yes/No asked (None where the backend returned no logprobs)."""

    def sufficient(self, prompt: str) -> str:
        if self.yes_threshold is not None:
            self.calls += 1
            p_yes = run(label_probability_dialogue(self.llm, prompt))
            self.probabilities.append(p_yes)
            if p_yes is not None:
                return "Yes" if p_yes >= self.yes_threshold else "No"
        self.calls += 1
        return generate_label(self.llm, prompt, ("Yes", "No"), default="No", stats=self.stats)

    def answer(self, prompt: str, question: str) -> str:
        turns = [ChatMessage(role=MessageRole.USER, content=prompt), ChatMessage(role=MessageRole.ASSISTANT, content="Yes")]
        text = self._ask([*turns, ChatMessage(role=MessageRole.USER, content=prompts.SECOND_TURN + self.instruction)])
        if _YES_NO_REPLY.match(text) and not asks_yes_no(question):
            self.echoes += 1
            information = prompt.split("\nInformation:\n", 1)[-1]
            retry = prompts.SECOND_TURN_RETRY.format(question=question, information=information, instruction=self.instruction)
            text = self._ask([ChatMessage(role=MessageRole.USER, content=retry)])
        return text

    def answer_incomplete(self, information: str, question: str) -> str:
        prompt = prompts.INCOMPLETE_ANSWER.format(question=question, information=information, instruction=self.instruction)
        return self._ask([ChatMessage(role=MessageRole.USER, content=prompt)])

    def _ask(self, messages: list[ChatMessage]) -> str:
        self.calls += 1
        return (self.llm.chat(messages).message.content or "").strip()


@dataclass
class SearchResult:
    """The trace of one search."""

    visited: list[str]
    """Node ids in visit order (top level first)."""
    scores: list[float | None]
    """Score each node had when chosen (None for the starting top level)."""
    replies: list[str]
    """The LLM's Yes/No after each step."""
    yes_probabilities: list[float | None]
    """P(Yes) each Yes/No was decided from (a controller with a ``yes_threshold``; else empty)."""
    stop_reason: str
    """``yes`` (p-th Yes), ``budget`` (window full), ``max_steps``, ``exhausted`` (all visited) or
    ``fixed_nodes`` (no Dynamic Progress Control)."""
    scoring: str
    """``attention+embedding``, ``attention``, or ``embedding``."""
    answer: str | None = None
    llm_calls: int = 0
    seconds: float = 0.0
    attention_seconds: float = 0.0
    prompt_tokens: int = 0
    answer_retries: int = 0
    """Second turns asked again after a bare Yes/No (0 or 1)."""
    complete: bool = True
    """Whether the LLM said the visited nodes suffice; False: the answer was asked from what the
    search had when it stopped for another reason."""


StartFrom = Literal["top_level", "all_levels"]
"""Where a search's first nodes are drawn from: the top level (§3.2.1) or every level."""


def _initial(
    graph: SummaryGraph, similarity: np.ndarray, budget: int, limit: int | None = None, start_from: StartFrom = "top_level"
) -> list[int]:
    top = [graph.position[n.id] for n in (graph.top_level if start_from == "top_level" else graph.nodes)]
    if limit is not None:
        top = sorted(top, key=lambda i: -similarity[i])[: max(1, limit)]
    if sum(graph.nodes[i].tokens + 2 for i in top) <= budget:
        return top
    chosen: list[int] = []
    used = 0
    for i in sorted(top, key=lambda i: -similarity[i]):
        cost = graph.nodes[i].tokens + 2
        if chosen and used + cost > budget // 2:
            break
        chosen.append(i)
        used += cost
    return chosen


def graph_search(
    graph: SummaryGraph,
    question: str,
    *,
    query_embedding: list[float],
    controller: Controller,
    attention: AttentionModel | None = None,
    stop_patience: int = 1,
    budget: int = 8192,
    max_steps: int | None = None,
    attention_search: bool = True,
    embedding_search: bool = True,
    kv_cache: bool = True,
    dynamic_progress_control: bool = True,
    fixed_nodes: int = 17,
    start_nodes: int | None = None,
    start_from: StartFrom = "top_level",
    ask_after_chunk: bool = False,
    answer: bool = True,
) -> SearchResult:
    """Run §3.2 for ``question`` (see the module docstring). ``budget``: tokens of the first-turn prompt."""
    if stop_patience < 1:
        raise ValueError("stop_patience must be at least 1")
    if not graph.nodes:
        raise ValueError("the graph is empty")
    started = time.perf_counter()
    use_attention = attention is not None and attention_search
    similarity = graph.similarity(query_embedding)
    adjacency = graph.adjacency()
    n = len(graph.nodes)
    visited = np.zeros(n, dtype=bool)
    order: list[int] = []
    chosen_scores: list[float | None] = []
    raw_attention = np.zeros(n)
    session = attention.session(question, kv_cache=kv_cache) if attention is not None and use_attention else None
    room = budget - count_tokens(prompts.FIRST_TURN_HEAD.format(question=question))
    used = 0
    read_chunk = False

    def visit(positions: list[int], scores: list[float | None]) -> None:
        nonlocal used, read_chunk
        if session is not None:
            raw_attention[positions] = session.append([graph.nodes[i].text for i in positions])
        for i, score in zip(positions, scores, strict=True):
            visited[i] = True
            order.append(i)
            chosen_scores.append(score)
            used += graph.nodes[i].tokens + 2
            read_chunk = read_chunk or graph.nodes[i].level == 1

    limit = start_nodes
    if limit is None and not dynamic_progress_control:
        limit = fixed_nodes // len(graph.levels)
    start = _initial(graph, similarity, room, limit, start_from)
    visit(start, [None] * len(start))
    calls_before = controller.calls
    judged_before = len(controller.probabilities)
    replies: list[str] = []
    yes, steps = 0, 0

    def prompt() -> str:
        information = "".join(prompts.bullet(graph.nodes[i].text) for i in order)
        return prompts.FIRST_TURN.format(question=question, information=information)

    while True:
        if dynamic_progress_control and (read_chunk or not ask_after_chunk):
            reply = controller.sufficient(prompt())
            replies.append(reply)
            yes += reply == "Yes"
            if yes >= stop_patience:
                reason = "yes"
                break
        elif len(order) >= fixed_nodes:
            reason = "fixed_nodes"
            break
        if max_steps is not None and steps >= max_steps:
            reason = "max_steps"
            break
        a = None
        if use_attention:
            weighted = np.zeros(n)
            weighted[order] = position_weighted(raw_attention[order].tolist())
            a = weighted
        scores = next_node_scores(adjacency, a, similarity if (embedding_search or not use_attention) else None, visited)
        best = int(np.argmax(scores))
        if not np.isfinite(scores[best]):
            reason = "exhausted"
            break
        if used + graph.nodes[best].tokens + 2 > room:
            reason = "budget"
            break
        visit([best], [float(scores[best])])
        steps += 1

    final = prompt()
    result = SearchResult(
        visited=[graph.nodes[i].id for i in order],
        scores=chosen_scores,
        replies=replies,
        yes_probabilities=controller.probabilities[judged_before:],
        stop_reason=reason,
        scoring=("attention+embedding" if embedding_search else "attention") if use_attention else "embedding",
        prompt_tokens=count_tokens(final),
        attention_seconds=session.seconds if session is not None else 0.0,
        complete=reason == "yes",
    )
    if answer and result.complete:
        echoes = getattr(controller, "echoes", 0)
        result.answer = controller.answer(final, question)
        result.answer_retries = getattr(controller, "echoes", 0) - echoes
    elif answer:
        information = "".join(prompts.bullet(graph.nodes[i].text) for i in order)
        result.answer = controller.answer_incomplete(information, question)
    result.llm_calls = controller.calls - calls_before
    result.seconds = time.perf_counter() - started
    return result
