"""Sentence-transformers embeddings for LlamaIndex, batched by length.

LlamaIndex hands an embedding model its texts in chunks of ``embed_batch_size`` in the order it has them, and
``HuggingFaceEmbedding`` encodes each chunk as one batch, padded to its longest text: a corpus of passages of mixed
length spends about half the embedding time on padding (all-MiniLM-L6-v2 on 2 cores: 39 passages/s of 2Wiki's
corpus, 76 when the texts are batched by length). :class:`LengthSortedEmbedding` takes large chunks and encodes
them in small batches of texts of similar length; the vectors are the same to float32 rounding. After each chunk the
memory its activations freed goes back to the system (:mod:`~multihop_rag.serving.freed_memory`).
"""

from __future__ import annotations

from typing import Any

from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from pydantic import Field

from multihop_rag.serving.freed_memory import return_freed_memory

__all__ = ["LengthSortedEmbedding", "length_sorted_batches", "ENCODE_BATCH_SIZE"]

ENCODE_BATCH_SIZE = 16
"""Texts MiniLM reads in one pass: on 2 cores, 4-16 sorted texts a pass read fastest, 32 and more pad more than they save."""


def length_sorted_batches(texts: list[str], size: int) -> list[list[int]]:
    """The positions of ``texts``, shortest first, in batches of at most ``size``."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    return [order[start : start + size] for start in range(0, len(order), size)]


class LengthSortedEmbedding(HuggingFaceEmbedding):
    """``HuggingFaceEmbedding`` that encodes each chunk of texts in batches of similar length.

    ``embed_batch_size`` is how many texts LlamaIndex hands over at once (the span within which texts are sorted),
    ``encode_batch_size`` how many the model reads in one pass. Its class name and model name are
    ``HuggingFaceEmbedding``'s, so what was keyed by them (clustering decisions) is found again.
    """

    encode_batch_size: int = Field(default=ENCODE_BATCH_SIZE, gt=0, description="Texts the model reads in one pass.")

    def __init__(self, model_name: str, embed_batch_size: int = 512, encode_batch_size: int = ENCODE_BATCH_SIZE, **kwargs: Any):
        super().__init__(model_name=model_name, embed_batch_size=embed_batch_size, **kwargs)
        self.encode_batch_size = encode_batch_size

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = [[] for _ in texts]
        for batch in length_sorted_batches(texts, self.encode_batch_size):
            for position, vector in zip(batch, super()._get_text_embeddings([texts[i] for i in batch]), strict=True):
                vectors[position] = vector
        return_freed_memory()  # or glibc keeps the chunk's activations resident: K²RAG at 1,000 passages 2.09 → 1.28 GB
        return vectors
