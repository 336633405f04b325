"""A Python process killed outright (``kill -9``) at a chosen moment: how the tests cut a build or an update."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kill_when(args: list[str], ready: Callable[[], bool], timeout: float = 300) -> None:
    """Run ``python *args`` (the repository importable) and SIGKILL it once ``ready()`` holds; fails if it
    never does (the process ended first, or ``timeout`` seconds passed)."""
    proc = subprocess.Popen([sys.executable, *args], env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.time() + timeout
    while time.time() < deadline and not ready() and proc.poll() is None:
        time.sleep(0.05)
    reached = ready()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert reached, f"the process never reached the moment to kill it (exit code {proc.returncode})"
