"""Token counting, token chunking with overlap (K²RAG eq. 1) and sentence splitting.

Tokens are tiktoken's ``cl100k_base``, loaded from the encodings LlamaIndex ships (no network),
so counts agree with LlamaIndex's own splitters.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import tiktoken

__all__ = [
    "encoding",
    "count_tokens",
    "chunk_tokens",
    "eq1_chunk_count",
    "split_sentences",
    "complete_sentences",
    "written_as_name",
]


@cache
def encoding() -> tiktoken.Encoding:
    """The ``cl100k_base`` encoding, read from LlamaIndex's bundled tiktoken cache."""
    import llama_index.core

    bundled = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", bundled)
    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    """Number of tokens in ``text``."""
    return len(encoding().encode(text, disallowed_special=()))


def eq1_chunk_count(n_tokens: int, size: int, overlap: int) -> int:
    """L_t of K²RAG eq. (1): the number of full chunks, ``floor((N - O) / (S - O))``."""
    return max(0, (n_tokens - overlap) // (size - overlap))


def chunk_tokens(text: str, size: int, overlap: int, *, keep_tail: bool = True) -> list[str]:
    """Split ``text`` into chunks of ``size`` tokens, consecutive chunks sharing ``overlap`` tokens.

    K²RAG §3.1.2, eq. (1): chunk i (1-based) holds tokens ``x[(i-1)(S-O)+1 … (i-1)(S-O)+S]`` for
    i = 1 … L_t, L_t = floor((N_t - O) / (S - O)). Read literally, eq. (1) drops the tokens after
    the last full chunk, and a document shorter than S yields no chunk at all. With
    ``keep_tail=True`` (the default) one more, shorter chunk starts where the next chunk would
    start, so no text is lost; ``keep_tail=False`` is eq. (1) exactly.
    """
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(f"need size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    tokens = encoding().encode(text, disallowed_special=())
    step = size - overlap
    full = eq1_chunk_count(len(tokens), size, overlap)
    spans = [(i * step, i * step + size) for i in range(full)]
    if keep_tail:
        start = full * step
        covered = spans[-1][1] if spans else 0
        if covered < len(tokens):
            spans.append((start, len(tokens)))
    snap = _clean_cut(tokens)
    return [encoding().decode(tokens[snap(a) : snap(b)]) for a, b in spans if snap(a) < snap(b)]


def _clean_cut(tokens: list[int]) -> Callable[[int], int]:
    """A function moving a cut position forward to the next token that starts a UTF-8 character.

    A CJK character or an emoji often spans several tokens; decoding half of one gives U+FFFD.
    Moving every cut the same way keeps consecutive chunks contiguous."""
    enc = encoding()
    first_bytes = [enc.decode_single_token_bytes(t)[:1] for t in tokens]
    clean = [i for i, b in enumerate(first_bytes) if b and not 0x80 <= b[0] < 0xC0]  # not a continuation byte
    clean.append(len(tokens))

    def snap(position: int) -> int:
        return clean[bisect.bisect_left(clean, position)]

    return snap


@cache
def _sentence_tokenizer() -> Any:
    import llama_index.core
    import nltk

    nltk_cache = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "nltk_cache")
    if nltk_cache not in nltk.data.path:
        nltk.data.path.append(nltk_cache)
    return nltk.tokenize.PunktTokenizer()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (NLTK Punkt, from the data LlamaIndex ships)."""
    return [s.strip() for s in _sentence_tokenizer().tokenize(text) if s.strip()]


def sentence_ends(text: str) -> list[int]:
    """Where each sentence of ``text`` ends (NLTK Punkt), the last one's whether or not it is finished."""
    return [end for _, end in _sentence_tokenizer().span_tokenize(text)]


_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*(?=\s|$)")


def complete_sentences(text: str) -> str:
    """``text`` up to the end of its last complete sentence: what to keep of a reply cut at the token
    limit (its unfinished sentence is a fragment). Empty when no sentence was finished."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].strip() if ends else ""


def written_as_name(text: str) -> bool:
    """Whether ``text`` is written as a name is: with a capital letter or a digit ("Danish", "1999"; not "drummer")."""
    return any(c.isupper() or c.isdigit() for c in text)
