"""Memory a large computation freed, given back to the system.

A GARLIC attention pass allocates and frees gigabytes of tensors, an embedding chunk megabytes of activations a
batch. glibc's allocator serves allocations up to 32 MB from its heap once larger ones have been freed (its mmap
threshold rises), and keeps freed heap pages resident while anything allocated later sits above them: the nodes
and edges a build keeps. Chunk after chunk a build's resident memory then ratchets up: at 6,000 passages, after 33
attention passes, 1.56 GB of a GARLIC build's 5.83 GB was free heap (``malloc_trim`` from a debugger released it);
a K²RAG build of 1,000 passages peaked at 2.09 GB, 1.28 GB with its embeddings' freed memory returned.
:func:`return_freed_memory` after each pass or chunk releases it as it is freed. Elsewhere than glibc (macOS, musl)
it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

__all__ = ["return_freed_memory"]


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # no C library by that name, or one without malloc_trim
        return None


def return_freed_memory() -> bool:
    """Give the allocator's free heap pages back to the system; False where the C library cannot (not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
