"""The bundled MiniLM through ``llama_index_embedding``: a build's texts reach the model in small batches of
similar length (a batch is padded to its longest text), and each text's vector is the one it gets alone."""

import numpy as np
from llama_index.embeddings.huggingface import HuggingFaceEmbedding

from multihop_rag import backends


def test_a_builds_texts_are_encoded_in_batches_of_similar_length(monkeypatch):
    seen: list[list[str]] = []
    encode = HuggingFaceEmbedding._get_text_embeddings

    def recording(self, texts):
        seen.append(list(texts))
        return encode(self, texts)

    embed = backends.llama_index_embedding("st:default")
    texts = [f"Passage {i}. " + "The river flows past the old town. " * (1 + (i * 7) % 23) for i in range(40)]
    monkeypatch.setattr(HuggingFaceEmbedding, "_get_text_embeddings", recording)
    vectors = np.asarray(embed.get_text_embedding_batch(texts))
    monkeypatch.undo()
    assert all(len(batch) <= 16 for batch in seen) and sum(map(len, seen)) == len(texts)
    lengths = [[len(t) for t in batch] for batch in seen]
    assert all(max(a) <= min(b) for a, b in zip(lengths, lengths[1:], strict=False))  # shortest first, across batches
    alone = np.asarray([embed.get_text_embedding(t) for t in texts])
    assert np.abs(vectors - alone).max() < 1e-5
    assert embed.class_name() == "HuggingFaceEmbedding"  # clustering decisions keyed by it replay


def test_each_chunk_of_texts_gives_the_memory_it_freed_back(monkeypatch):
    """Encoding frees megabytes of activations; glibc kept them resident (a K²RAG build of 1,000 passages peaked at
    2.09 GB, 1.28 GB with the freed memory returned after each chunk; issue 42)."""
    from multihop_rag.serving import embedding as embedding_module

    calls = []
    monkeypatch.setattr(embedding_module, "return_freed_memory", lambda: calls.append(True) or True)
    embed = embedding_module.LengthSortedEmbedding(
        model_name=backends.llama_index_embedding("st:default").model_name, embed_batch_size=2
    )
    embed.get_text_embedding_batch(["The river.", "The bridge over the river.", "The town."])
    assert calls == [True, True]  # one a chunk LlamaIndex hands over: two texts, then one
    embed.get_query_embedding("Which river?")
    assert calls == [True, True]  # a question's few activations are not worth a trim
