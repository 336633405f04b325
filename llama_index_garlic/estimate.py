"""GARLIC's build cost before it runs (:mod:`multihop_rag.estimate`).

Exact: the level-1 chunks and their batches (the build's own chunker and batcher). Predicted: a
summary's length, ``REPLY_FILL`` of the summary budget, measured on real builds (the 0.5B run of
record: 8,474 generated tokens in 19 calls at a 512-token budget, 0.87); every later level is
batched from the summaries above it until one batch holds a level. With an attention model, each
summary exchange (its batch and reply) also runs through it once for the edges (Appendix B.1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llama_index_garlic import prompts
from llama_index_garlic.build import chunk_documents, make_batches
from llama_index_garlic.config import GarlicConfig
from multihop_rag.corpus import Passage
from multihop_rag.estimate import BuildEstimate, StageEstimate
from multihop_rag.indexing.text import count_tokens

REPLY_FILL = 0.87


def estimate(passages: Sequence[Passage], config: GarlicConfig, context_window: int | None, *,
             attention: bool = True) -> BuildEstimate:
    """Calls and tokens of a GARLIC build of ``passages`` (``attention``: edges from an attention model)."""
    chunks = chunk_documents([p.to_llama_index() for p in passages], config.chunk_size)
    result = BuildEstimate("garlic", len(passages), sum(c.tokens for c in chunks))
    if config.summary == "none":
        result.notes.append("summary 'none': no LLM call at build time")
        return result
    window, reply_budget = config.window(context_window), config.summary_budget(context_window)
    template = count_tokens(prompts.SUMMARIZE_HEAD + prompts.SUMMARIZE_TAIL) + 64
    capacity = window - template - reply_budget
    reply = int(reply_budget * REPLY_FILL)
    level_tokens, level_nodes = [c.tokens for c in chunks], len(chunks)
    for level in range(1, config.max_levels + 1):
        # level 1 is batched exactly as the build does; later levels from the predicted summary lengths
        batches = len(make_batches(chunks, capacity)) if level == 1 else max(1, math.ceil(sum(level_tokens) / capacity))
        prompt, completion = sum(level_tokens) + batches * template, batches * reply
        result.stages.append(StageEstimate(f"summaries level {level}->{level + 1}", batches, prompt, completion,
                                           prompt + completion if attention else 0))
        if batches == 1 or level_nodes <= 1:
            break
        level_tokens, level_nodes = [reply] * batches, batches * 4
    result.notes.append(f"n_s {window}: {capacity} tokens of text per batch, {reply_budget}-token summaries"
                        + ("; the time includes the edges' forward pass of each batch on the attention model "
                           "(not its loading: tens of seconds once per process)" if attention else ""))
    return result
