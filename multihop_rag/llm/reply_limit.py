"""Replies stopped after a number of lines or sentences: a streamed reply is read until it holds that many
whole ones, and the stream is closed, so the server generates nothing past them.

Lines, for outputs that are lists, one item a line (a graph's triples), where a prompt's "up to n" is a wish a
small model does not keep; sentences, for prose whose length a prompt does not bound (a summary). Greedy decoding
generates the same beginning whether the reply is stopped or not, so a reply stored whole can stand for the
stopped one, cut by :meth:`ReplyLimit.cut`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from multihop_rag.indexing.text import sentence_ends
from multihop_rag.llm.calls import finish_reason

__all__ = ["ReplyLimit", "read_limited", "aread_limited"]


def _line_ends(text: str) -> list[int]:
    """Where each non-empty line that a line break has ended ends (before the break)."""
    ends, offset = [], 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if line.strip() and line != line.rstrip("\r\n"):
            ends.append(offset - (len(line) - len(line.rstrip("\r\n"))))
    return ends


@dataclass(frozen=True)
class ReplyLimit:
    """At most ``n`` non-empty lines, or ``n`` sentences (NLTK Punkt), of a reply."""

    unit: Literal["lines", "sentences"]
    n: int

    def _ends(self, text: str) -> list[int]:
        return _line_ends(text) if self.unit == "lines" else sentence_ends(text)

    def cut(self, text: str) -> str:
        """``text`` up to the end of its ``n``-th line or sentence; all of it if it has no more."""
        ends = self._ends(text)
        return text[: ends[self.n - 1]] if len(ends) > self.n or (len(ends) == self.n and self.unit == "lines") else text

    def reached(self, text: str) -> bool:
        """Whether ``text`` holds ``n`` whole lines or sentences: a line when its break comes, a sentence when
        the next one begins (only then is its end known)."""
        if self.unit == "lines":
            return len(_line_ends(text)) >= self.n
        return len(sentence_ends(text)) > self.n


class _Reading:
    """A streamed reply read so far: its text, the deltas it came in, and the last chunk's raw response."""

    def __init__(self, limit: ReplyLimit) -> None:
        self.limit = limit
        self.text = ""
        self.deltas = 0
        self.raw: Any = None

    def take(self, delta: str | None, raw: Any) -> bool:
        """Add a delta; whether the reply now holds what the limit allows (looked at when a delta brings a line
        break, or for sentences a space: only then can a line or a sentence have ended)."""
        self.text += delta or ""
        self.deltas += 1 if delta else 0
        self.raw = raw
        mark = "\n" if self.limit.unit == "lines" else None
        return delta is not None and any(c.isspace() if mark is None else c == mark for c in delta) \
            and self.limit.reached(self.text)

    def reply(self, stopped: bool) -> tuple[str, dict[str, Any]]:
        """The text cut to the limit and a raw response with its finish reason and generated tokens (one a delta,
        as servers stream them)."""
        reason = "stop" if stopped else finish_reason(self.raw)
        return self.limit.cut(self.text), {"finish_reason": reason, "usage": {"completion_tokens": self.deltas}}


def read_limited(stream: Iterator[Any], limit: ReplyLimit) -> tuple[str, dict[str, Any]]:
    """Read a LlamaIndex response stream (chat or completion) until the limit, then close it."""
    reading = _Reading(limit)
    try:
        for chunk in stream:
            if reading.take(chunk.delta, chunk.raw):
                return reading.reply(stopped=True)
        return reading.reply(stopped=False)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


async def aread_limited(stream: AsyncIterator[Any], limit: ReplyLimit) -> tuple[str, dict[str, Any]]:
    """:func:`read_limited` for an async stream."""
    reading = _Reading(limit)
    try:
        async for chunk in stream:
            if reading.take(chunk.delta, chunk.raw):
                return reading.reply(stopped=True)
        return reading.reply(stopped=False)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
