import pytest

from multihop_rag.indexing.text import chunk_tokens, count_tokens, encoding, eq1_chunk_count, split_sentences


def tokens(n: int) -> str:
    """A text of exactly n tokens (' a' is one cl100k token)."""
    text = "a" + " a" * (n - 1)
    assert count_tokens(text) == n
    return text


@pytest.mark.parametrize(
    ("n", "size", "overlap"), [(1000, 256, 20), (256, 256, 20), (1000, 300, 100), (500, 128, 10), (129, 128, 10)]
)
def test_full_chunks_follow_eq1(n, size, overlap):
    chunks = chunk_tokens(tokens(n), size, overlap, keep_tail=False)
    assert len(chunks) == (n - overlap) // (size - overlap) == eq1_chunk_count(n, size, overlap)
    assert all(count_tokens(c) == size for c in chunks)


def test_consecutive_chunks_share_exactly_the_overlap():
    text = " ".join(f"w{i}" for i in range(400))
    ids = encoding().encode(text)
    chunks = chunk_tokens(text, 50, 10, keep_tail=False)
    encoded = [encoding().encode(c) for c in chunks]
    for i, chunk in enumerate(encoded):
        assert chunk == ids[i * 40 : i * 40 + 50]
    assert encoded[0][-10:] == encoded[1][:10]


def test_tail_keeps_every_token():
    text = " ".join(f"w{i}" for i in range(333))
    ids = encoding().encode(text)
    chunks = chunk_tokens(text, 100, 20)
    last_start = (len(chunks) - 1) * 80
    assert encoding().encode(chunks[-1]) == ids[last_start:]
    assert eq1_chunk_count(len(ids), 100, 20) == len(chunks) - 1


def test_short_document_is_one_chunk_with_tail_and_none_without():
    assert chunk_tokens("just a few words", 256, 20) == ["just a few words"]
    assert chunk_tokens("just a few words", 256, 20, keep_tail=False) == []
    assert chunk_tokens("", 256, 20) == []


def test_bad_sizes_raise():
    with pytest.raises(ValueError):
        chunk_tokens("x", 10, 10)
    with pytest.raises(ValueError):
        chunk_tokens("x", 0, 0)


def test_sentences_respect_abbreviations():
    assert split_sentences("Dr. Smith went to Washington. He arrived at 5 p.m. on Monday. It rained!") == [
        "Dr. Smith went to Washington.",
        "He arrived at 5 p.m. on Monday.",
        "It rained!",
    ]


@pytest.mark.parametrize("overlap", [0, 5])
def test_chunks_never_cut_a_character_in_half(overlap):
    """Issue 21: chunk_tokens decoded raw token slices, so CJK and emoji text got U+FFFD."""
    text = ("東京は日本の首都です。" + "😀🎉👩‍👩‍👧 " + "naïve façade Ünïcödé. ") * 30
    chunks = chunk_tokens(text, 16, overlap)
    assert chunks and not any("\ufffd" in c for c in chunks)
    if overlap == 0:
        assert "".join(chunks) == text
    else:
        assert all(c in text for c in chunks) and chunks[-1].endswith("Ünïcödé. ")
