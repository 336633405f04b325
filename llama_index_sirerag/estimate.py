"""SiReRAG's (and RAPTOR's) build cost before it runs (:mod:`multihop_rag.estimate`).

Exact: the chunks (the build's own splitter) and the proposition prompts. Predicted, from real
builds: RAPTOR's clusters hold about ``FAN_IN`` nodes (the 0.5B run of record: 100 chunks → 13 → 2
→ 1, soft assignment reading ``OVERLAP`` times the level's text) and a summary is ``SUMMARY_REPLY``
tokens (or ``summary_sentences`` of ``SENTENCE_TOKENS``); a chunk's propositions run to ``PROPOSITION_RATIO`` times its tokens (capped by the schema);
the relatedness tree has ``AGGREGATES_PER_CHUNK`` aggregates (239 for 100 chunks) of the entity's
propositions, summarized ``RELATEDNESS_FAN_IN`` at a time (239 → 55 → 8 → 1).
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index_sirerag import prompts
from llama_index_sirerag.config import SiReRAGConfig
from llama_index_sirerag.index import split_chunks
from llama_index_sirerag.propositions import facts_schema
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate, StageEstimate, summary_levels
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.structured import schema_token_budget

FAN_IN = 7.5
OVERLAP = 1.15
SUMMARY_REPLY = 190
SENTENCE_TOKENS = 36
"""Tokens of a summary's sentence (the 1.5B's, on HotpotQA's tuning pool), for ``summary_sentences``."""
SUMMARY_TEMPLATE = 120
PROPOSITION_RATIO = 4.5
AGGREGATES_PER_CHUNK = 2.4
RELATEDNESS_FAN_IN = 5.0
AGGREGATE_SHARE = 0.5
"""Tokens of an aggregate relative to the propositions' JSON reply (facts without the JSON and the entity lists)."""


def estimate(passages: Sequence[Passage], config: SiReRAGConfig) -> BuildEstimate:
    """Calls and tokens of a SiReRAG build of ``passages`` (RAPTOR: ``config.relatedness`` False)."""
    chunks = split_chunks([p.to_llama_index() for p in passages], config)
    tokens = [count_tokens(c.text) for c in chunks]
    result = BuildEstimate("sirerag" if config.relatedness else "raptor", len(passages), sum(tokens))
    reply = min(SUMMARY_REPLY, SENTENCE_TOKENS * (config.summary_sentences or SUMMARY_REPLY))
    similarity = summary_levels(tokens, fan_in=FAN_IN, reply_tokens=reply, depth=config.tree_depth,
                                template_tokens=SUMMARY_TEMPLATE, overlap=OVERLAP)
    similarity.name = "similarity tree"
    result.stages.append(similarity)
    if not config.relatedness:
        return result
    cap = schema_token_budget(facts_schema(config.max_propositions, config.max_entities).model_json_schema())
    replies = [min(cap, int(t * PROPOSITION_RATIO)) for t in tokens]
    result.stages.append(StageEstimate(
        "propositions", len(chunks), sum(count_tokens(prompts.PROPOSITIONS.format(paragraph=c.text)) for c in chunks),
        sum(replies)))
    if config.relatedness_summaries:
        aggregates = int(len(chunks) * AGGREGATES_PER_CHUNK)
        each = int(sum(replies) * AGGREGATE_SHARE / max(1, aggregates)) + 1
        relatedness = summary_levels([each] * aggregates, fan_in=RELATEDNESS_FAN_IN, reply_tokens=reply,
                                     depth=config.tree_depth, template_tokens=SUMMARY_TEMPLATE, overlap=OVERLAP)
        relatedness.name = "relatedness tree"
        result.stages.append(relatedness)
    return result
