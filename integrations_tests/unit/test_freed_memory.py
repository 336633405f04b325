"""Freed heap memory given back to the system (``multihop_rag.serving.freed_memory``)."""

import platform

import pytest

from multihop_rag.serving.freed_memory import return_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_memory_freed_under_live_objects_goes_back_to_the_system():
    def resident_mb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024

    blocks = [bytes(4096) for _ in range(50_000)]  # 200 MB of heap blocks (above pymalloc's, below mmap's sizes)
    kept = blocks[::64]  # one in 64 stays, as the nodes a build keeps between passes
    del blocks
    before = resident_mb()
    assert return_freed_memory()
    assert before - resident_mb() > 100
    assert len(kept) == 782
