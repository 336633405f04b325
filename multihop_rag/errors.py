"""Every error a user can meet, in one module: each derives from :class:`MultihopRagError`, so an
application (the command line among them) catches one class and prints its message, which says what to do.

Each keeps its historical base too (``ValueError`` for bad input, ``RuntimeError`` for a backend that
cannot be used), so code written against those still catches them.
"""

from __future__ import annotations

__all__ = [
    "MultihopRagError",
    "UsageError",
    "CorpusError",
    "MethodError",
    "StoreError",
    "IndexFolderError",
    "EvalSettingError",
    "ContextOverflowError",
    "BackendError",
    "EndpointError",
    "BundledModelMissing",
]


class MultihopRagError(Exception):
    """The base of every user-facing error of multihop-rag; its message is one line that says what to do."""


class UsageError(MultihopRagError, ValueError):
    """Bad input from the command line."""


class CorpusError(MultihopRagError, ValueError):
    """The corpus or dataset cannot be loaded; the message says why."""


class MethodError(MultihopRagError, ValueError):
    """An unknown method, or a setting it does not have; the message lists what there is."""


class StoreError(MultihopRagError, ValueError):
    """A store is missing, empty, unreachable or holds something else; the message says what to do."""


class IndexFolderError(StoreError):
    """A folder holds no index, or another method's, or one written in another format."""


class EvalSettingError(StoreError):
    """The output folder holds an evaluation of another dataset, split or model."""


class ContextOverflowError(MultihopRagError, ValueError):
    """A prompt does not fit the model's context window (and would be cut, or refused, by the server)."""


class BackendError(MultihopRagError, RuntimeError):
    """A model backend cannot be used; the message says how to fix it."""


class EndpointError(MultihopRagError, RuntimeError):
    """An OpenAI-compatible server cannot be used; the message says how to fix it."""


class BundledModelMissing(MultihopRagError, RuntimeError):
    """A bundled model's package is not installed (or its files are damaged)."""
