"""How fast the model runs on this machine: two short calls, measured once per model identity and
machine and kept in ``speed.json`` of :func:`multihop_rag.serving.bundled.cache_dir` (the time half of
``multihop-rag index --estimate``; the counts come from each method's estimate, :mod:`multihop_rag.estimate`)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from multihop_rag.estimate import Speed
from multihop_rag.indexing.persistence import write_atomic
from multihop_rag.indexing.text import count_tokens
from multihop_rag.llm.calls import Call, call
from multihop_rag.serving import bundled

__all__ = ["measure_speed", "speed_cache_file", "CALIBRATION_TEXT"]

CALIBRATION_TEXT = (
    "The harbour master kept a ledger of every ship that entered the bay: its name, its flag, the cargo "
    "it declared and the day it left. "
) * 12
"""A fixed prompt of ~330 tokens for the prompt-speed measurement (no entity of any corpus)."""



def speed_cache_file() -> Path:
    return bundled.cache_dir() / "speed.json"


def measure_speed(llm: Any, identity: str, *, cache_file: Path | None = None, refresh: bool = False) -> Speed:
    """The model's prompt and generation speed, measured with two short calls (~20 s on a 1.5B model
    on two cores) or read from ``cache_file`` when this model was measured before."""
    path = cache_file or speed_cache_file()
    known = json.loads(path.read_text()) if path.is_file() else {}
    if identity in known and not refresh:
        return Speed(**known[identity])
    prompt_tokens = count_tokens(CALIBRATION_TEXT)
    started = time.perf_counter()
    call(Call(llm, CALIBRATION_TEXT + "\nIn one word, what did the harbour master keep?", max_tokens=1))
    prompt_seconds = time.perf_counter() - started
    started = time.perf_counter()
    reply = call(Call(llm, "Count from 1 to 200 in words, separated by commas:", max_tokens=64))
    generate_seconds = time.perf_counter() - started
    generated = max(1, count_tokens(reply.text))
    speed = Speed(
        model=identity,
        prompt_tps=round(prompt_tokens / prompt_seconds, 2),
        generate_tps=round(generated / max(generate_seconds, 1e-3), 2),
    )
    known[identity] = asdict(speed)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(known, indent=1))
    return speed
