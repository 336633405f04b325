"""Tokens a K²RAG build generates a passage, counted by replaying a tuning folder's call cache (issue 42).

Every call of the build is looked up in a copy of the folder's ``llm_calls.sqlite`` and its recorded
completion tokens summed, whether the run that wrote the folder made it or replayed it. A call the cache
lacks would be made live; the count says how many lookups missed (a line-limited call first looks for its
own key, then for a whole reply).

    .venv/bin/python benchmarks/k2rag_generated_tokens.py FOLDER DATASET START N [k2rag.field=value ...]
    e.g. benchmarks/results/tuning/hotpotqa-dev121-140-pool20/k2rag_share033 hotpotqa 120 20 k2rag.summary_share=0.33
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from llama_index_k2rag import K2RAGConfig, K2RAGIndex
from multihop_rag import backends
from multihop_rag.corpus import load_pooled
from multihop_rag.llm.cache import CachedLLM, LLMCache


class CountingCache(LLMCache):
    """An LLM-call cache that sums the completion tokens of the replies it hands out."""

    def __init__(self, path: str | Path):
        super().__init__(path)
        self.replies = self.completion_tokens = self.misses = 0

    def get(self, key: str) -> str | None:
        value = super().get(key)
        if value is None:
            self.misses += 1
        else:
            self.replies += 1
            self.completion_tokens += json.loads(value).get("completion_tokens", 0)
        return value


def main(folder: str, dataset: str, start: str, n: str, *settings: str) -> None:
    config = K2RAGConfig(**{k.split(".", 1)[1]: json.loads(v) for k, v in (s.split("=", 1) for s in settings)})
    passages, _ = load_pooled(dataset, int(n), start=int(start))
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(Path(folder) / "llm_calls.sqlite", Path(tmp) / "calls.sqlite")
        cache = CountingCache(Path(tmp) / "calls.sqlite")
        llm = CachedLLM(inner=backends.llama_index_llm("llamacpp:default"), cache=cache)
        K2RAGIndex.from_documents([p.to_llama_index() for p in passages], llm=llm, config=config,
                                  embed_model=backends.llama_index_embedding("st:default"),
                                  persist_dir=str(Path(tmp) / "index"), show_progress=False, max_concurrency=1)
    print(f"{folder}: {len(passages)} passages, {cache.replies} replies ({cache.misses} lookups missed), "
          f"{cache.completion_tokens} generated tokens, {cache.completion_tokens / len(passages):.1f} a passage")


if __name__ == "__main__":
    main(*sys.argv[1:])
