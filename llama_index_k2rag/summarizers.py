"""Summarizers for K²RAG (Algorithm 1 and the query-time summaries of Algorithm 2).

The paper uses a Longformer (LED) model fine-tuned for long-text summarization,
``pszemraj/led-base-book-summary`` (§4.1). Here the summarizer is pluggable:

- ``"llm"`` — the index's own LLM with a short summary prompt (default; works on Ollama and embedded);
- a local folder of a Hugging Face seq2seq summarization model (the paper's LED or any other),
  loaded offline with ``transformers``;
- ``"none"`` — text passes through (the naive pipelines of §3.2 index the unsummarized corpus).

Texts shorter than ``min_tokens`` pass through unchanged: a summary would not shorten them. A text
longer than the LLM summarizer reads at once is summarized window by window and the summaries are
joined (map, no reduce): every token of every document reaches a summary, where a single call
would keep only the first window (a 12,400-token document lost everything after token ~3,000).
The paper's LED reads 16K tokens at once; an 8K-context LLM reads ``window_tokens`` (3,000) plus its
prompt and the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from llama_index.core.llms.llm import LLM

from llama_index_k2rag import prompts
from multihop_rag.indexing.text import chunk_tokens, complete_sentences, count_tokens
from multihop_rag.llm.calls import Call, call

__all__ = ["Summarizer", "LLMSummarizer", "Seq2SeqSummarizer", "NoSummarizer", "make_summarizer", "summary_request", "summary_tokens"]


@runtime_checkable
class Summarizer(Protocol):
    """Anything with a ``name`` and ``summarize(text) -> str``."""

    name: str

    def summarize(self, text: str) -> str: ...


@dataclass
class NoSummarizer:
    """Returns the text unchanged."""

    name: str = "none"

    def summarize(self, text: str) -> str:
        return text


@dataclass
class LLMSummarizer:
    """Summaries written by a LlamaIndex LLM, window by window for a long text."""

    llm: LLM
    min_tokens: int = 128
    window_tokens: int = 3000
    max_summary_tokens: int = 512
    max_share: float | None = None
    """Ask for a summary of at most this share of its window's tokens (in words, the prompt's unit), its reply
    stopped at 1.5 times that; None: "a few sentences", up to ``max_summary_tokens``."""
    name: str = "llm"

    def summarize(self, text: str) -> str:
        if count_tokens(text) < self.min_tokens:
            return text
        parts = []
        for window in chunk_tokens(text, self.window_tokens, 0):
            prompt, max_tokens = summary_request(window, self.max_share, self.max_summary_tokens)
            reply = call(Call(self.llm, prompt, max_tokens=max_tokens))
            summary = complete_sentences(reply.text) if reply.truncated else reply.text.strip()
            parts.append(summary or window)
        return "\n".join(parts)


WORDS_PER_TOKEN = 0.75
"""English words per token, to ask for a length in the unit a model follows."""


def summary_tokens(window: str, share: float, cap: int) -> int:
    """The tokens a summary of ``window`` is asked for at ``share`` of its length (at most ``cap``)."""
    return min(cap, round(count_tokens(window) * share))


def summary_request(window: str, share: float | None, cap: int) -> tuple[str, int]:
    """The LLM summarizer's prompt for ``window`` and its reply's token limit: "a few sentences" up to ``cap``
    tokens, or (``share``) at most that share of the window, in words, stopped at 1.5 times it."""
    if share is None:
        return prompts.SUMMARIZE.format(text=window), cap
    tokens = summary_tokens(window, share, cap)
    return prompts.SUMMARIZE_WITHIN.format(text=window, words=round(tokens * WORDS_PER_TOKEN)), round(tokens * 1.5)


@dataclass
class Seq2SeqSummarizer:
    """A local Hugging Face summarization model (e.g. the paper's LED), loaded offline on first use."""

    model_path: str
    min_tokens: int = 128
    max_length: int = 256
    name: str = "seq2seq"
    _pipeline: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not Path(self.model_path).is_dir():
            raise FileNotFoundError(
                f"summarizer model folder {self.model_path} does not exist: give the local folder of a "
                "Hugging Face seq2seq summarization model, or summarizer='llm' / 'none'"
            )
        self.name = f"seq2seq:{Path(self.model_path).name}"

    def summarize(self, text: str) -> str:
        if count_tokens(text) < self.min_tokens:
            return text
        if self._pipeline is None:
            from transformers import pipeline

            self._pipeline = pipeline("summarization", model=self.model_path, device="cpu")  # type: ignore[call-overload]
        out = self._pipeline(text, max_length=self.max_length, no_repeat_ngram_size=3, truncation=True)
        return out[0]["summary_text"].strip() or text


def make_summarizer(spec: str | Path | Summarizer | None, llm: LLM, min_tokens: int = 128,
                    max_share: float | None = None) -> Summarizer:
    """``"llm"``, ``"none"``/``None``, a local model folder, or a :class:`Summarizer` itself (``max_share``: the
    LLM summarizer's)."""
    if isinstance(spec, Summarizer):
        return spec
    if spec is None or spec == "none":
        return NoSummarizer()
    if spec == "llm":
        return LLMSummarizer(llm, min_tokens=min_tokens, max_share=max_share)
    return Seq2SeqSummarizer(str(spec), min_tokens=min_tokens)
