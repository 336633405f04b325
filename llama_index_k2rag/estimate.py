"""K²RAG's build cost before it runs (:mod:`multihop_rag.estimate`).

Exact: which documents are long enough to summarize and their windows (the summarizer's own rule),
the summary prompts. Predicted: a summary is ``SUMMARY_RATIO`` of its window, or the share ``summary_share`` asks
for (at most the summary cap), and a knowledge-graph extraction call generates ``KG_REPLY_TOKENS`` (the 0.5B run of record:
29,512 prompt and 21,036 generated tokens for 40 summaries and 104 extraction calls); the KG chunks
are counted on the predicted summaries with §3.1.2's S and O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llama_index_k2rag.config import K2RAGConfig
from llama_index_k2rag.summarizers import summary_request, summary_tokens
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate, StageEstimate
from multihop_rag.indexing.text import chunk_tokens, count_tokens

SUMMARY_RATIO = 0.6
KG_REPLY_TOKENS = 150
KG_TEMPLATE_TOKENS = 420
"""The property-graph extraction prompt without its chunk (LlamaIndex's triplet prompt and our bound)."""


def estimate(passages: Sequence[Passage], config: K2RAGConfig, *, summarize: bool = True,
             window_tokens: int = 3000, max_summary_tokens: int = 512) -> BuildEstimate:
    """Calls and tokens of a K²RAG build of ``passages`` (LLM summarizer and property graph)."""
    tokens = [count_tokens(p.text) for p in passages]
    result = BuildEstimate("k2rag", len(passages), sum(tokens))
    summary = StageEstimate("summaries", 0, 0, 0)
    kg = StageEstimate("knowledge graph", 0, 0, 0)
    for passage, n in zip(passages, tokens, strict=True):
        kept = n
        if summarize and n >= config.min_summary_tokens:
            windows = chunk_tokens(passage.text, window_tokens, 0)
            share = config.summary_share
            replies = [summary_tokens(w, share or SUMMARY_RATIO, max_summary_tokens) for w in windows]
            summary.calls += len(windows)
            summary.prompt_tokens += sum(count_tokens(summary_request(w, share, max_summary_tokens)[0]) for w in windows)
            summary.completion_tokens += sum(replies)
            kept = sum(replies)
        step = config.kg_chunk_size - config.kg_chunk_overlap
        chunks = max(1, math.ceil(max(0, kept - config.kg_chunk_overlap) / step))
        kg.calls += chunks
        kg.prompt_tokens += kept + chunks * config.kg_chunk_overlap + chunks * KG_TEMPLATE_TOKENS
        kg.completion_tokens += chunks * KG_REPLY_TOKENS
    result.stages = [s for s in (summary, kg) if s.calls]
    return result
