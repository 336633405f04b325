"""Errors that every layer of the core may raise, kept apart so that no module imports another just for one."""

from __future__ import annotations

__all__ = ["ContextOverflowError"]


class ContextOverflowError(ValueError):
    """A prompt does not fit the model's context window (and would be cut, or refused, by the server)."""
