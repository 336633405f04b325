"""Embeddings batched by length (``multihop_rag.serving.embedding``): the batches, pinned without a model."""

from multihop_rag.serving.embedding import length_sorted_batches


def test_texts_are_batched_shortest_first_each_once():
    texts = ["a" * n for n in (50, 3, 400, 7, 120, 3, 60)]
    batches = length_sorted_batches(texts, 3)
    assert batches == [[1, 5, 3], [0, 6, 4], [2]]
    assert sorted(i for batch in batches for i in batch) == list(range(len(texts)))
    assert length_sorted_batches([], 16) == []
