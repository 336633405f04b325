"""Replies stopped after a number of lines: a streamed reply is read until it holds that many whole
non-empty lines, and the stream is closed, so the server generates nothing past them.

For outputs that are lists, one item a line (a graph's triples), where a prompt's "up to n" is a wish
a small model does not keep. Greedy decoding generates the same first lines whether the reply is
stopped or not, so a reply stored whole can stand for the stopped one, cut by :func:`first_lines`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from multihop_rag.llm.calls import finish_reason

__all__ = ["first_lines", "read_lines", "aread_lines"]


def first_lines(text: str, n: int) -> str:
    """``text`` up to the end of its ``n``-th non-empty line (without the line break); all of it if it has fewer."""
    seen = 0
    end = 0
    for line in text.splitlines(keepends=True):
        end += len(line)
        if line.strip():
            seen += 1
            if seen == n and line != line.rstrip("\r\n"):
                return text[:end].rstrip("\r\n")
    return text


def _whole_lines(text: str) -> int:
    """Non-empty lines that a line break has ended."""
    return sum(1 for line in text.splitlines(keepends=True) if line.strip() and line != line.rstrip("\r\n"))


class _Reading:
    """A streamed reply read so far: its text, the deltas it came in, and the last chunk's raw response."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.text = ""
        self.deltas = 0
        self.raw: Any = None

    def take(self, delta: str | None, raw: Any) -> bool:
        """Add a delta; whether the reply now holds ``n`` whole lines."""
        self.text += delta or ""
        self.deltas += 1 if delta else 0
        self.raw = raw
        return delta is not None and "\n" in delta and _whole_lines(self.text) >= self.n  # lines are counted when one ends

    def reply(self, stopped: bool) -> tuple[str, dict[str, Any]]:
        """The text cut to ``n`` lines and a raw response with its finish reason and generated tokens (one a delta,
        as servers stream them)."""
        reason = "stop" if stopped else finish_reason(self.raw)
        return first_lines(self.text, self.n), {"finish_reason": reason, "usage": {"completion_tokens": self.deltas}}


def read_lines(stream: Iterator[Any], n: int) -> tuple[str, dict[str, Any]]:
    """Read a LlamaIndex response stream (chat or completion) until ``n`` whole lines, then close it."""
    reading = _Reading(n)
    try:
        for chunk in stream:
            if reading.take(chunk.delta, chunk.raw):
                return reading.reply(stopped=True)
        return reading.reply(stopped=False)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


async def aread_lines(stream: AsyncIterator[Any], n: int) -> tuple[str, dict[str, Any]]:
    """:func:`read_lines` for an async stream."""
    reading = _Reading(n)
    try:
        async for chunk in stream:
            if reading.take(chunk.delta, chunk.raw):
                return reading.reply(stopped=True)
        return reading.reply(stopped=False)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
