"""Tokens a method's build generates a passage, counted by replaying a folder's call cache (issue 42).

Every call of the build is looked up in a copy of the folder's ``llm_calls.sqlite`` and its reply's tokens
counted (the model's tokenizer), whether the run that wrote the folder made the call or replayed it. A call the
cache lacks would be made live; the count says how many lookups missed (a line- or sentence-limited call first
looks for its own key, then for a whole reply, which it counts cut).

    .venv/bin/python benchmarks/generated_tokens.py METHOD FOLDER DATASET START N [method.field=value ...]
    e.g. benchmarks/generated_tokens.py k2rag benchmarks/results/tuning/hotpotqa-dev121-140-pool20/k2rag_share033 \
             hotpotqa 120 20 k2rag.summary_share=0.33
         benchmarks/generated_tokens.py sirerag benchmarks/results/hotpotqa-dev20 hotpotqa 0 20
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from multihop_rag import backends
from multihop_rag.app import registry
from multihop_rag.corpus import load_pooled
from multihop_rag.llm.cache import CachedLLM, LLMCache
from multihop_rag.method import Models


class Tally:
    """Replies handed out, their tokens, and lookups the cache could not answer."""

    replies = tokens = misses = 0


class CountingLLM(CachedLLM):
    """A cached LLM that counts the tokens of every reply it finds, in the model's tokenizer: a reply replayed cut
    (a line or sentence limit) counts as cut."""

    def _find(self, payload: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        key, hit = super()._find(payload, kwargs)
        if hit is None:
            Tally.misses += 1
        else:
            Tally.replies += 1
            Tally.tokens += self.inner.count_tokens(hit["text"])
        return key, hit


def main(name: str, folder: str, dataset: str, start: str, n: str, *settings: str) -> None:
    method = registry.get(name)
    config = registry.settings_for(method, settings)
    passages, _ = load_pooled(dataset, int(n), start=int(start))
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(Path(folder) / "llm_calls.sqlite", Path(tmp) / "calls.sqlite")
        cache = LLMCache(Path(tmp) / "calls.sqlite")
        models = Models(llm=CountingLLM(inner=backends.llama_index_llm("llamacpp:default"), cache=cache),
                        embed=backends.llama_index_embedding("st:default"), chat=backends.chat_model("llamacpp:default"),
                        lc_embed=backends.langchain_embeddings("st:default"), llm_spec="llamacpp:default",
                        embed_spec="st:default")
        method.build(passages, models, Path(tmp) / "index", config)
        cache.close()
    print(f"{name}, {folder}: {len(passages)} passages, {Tally.replies} replies ({Tally.misses} lookups missed), "
          f"{Tally.tokens} generated tokens, {Tally.tokens / len(passages):.1f} a passage")


if __name__ == "__main__":
    main(*sys.argv[1:])
