"""Run a benchmark's setting in a process of its own (its peak RSS and imports its own) and read its row."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def row_of_child(script: str, *args: str) -> dict[str, Any]:
    """``script --child ARGS…`` in a fresh interpreter; its last stdout line, as JSON. A failed child stops the
    benchmark with the end of its stderr."""
    done = subprocess.run([sys.executable, script, "--child", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
