"""Where a method's seconds go, call by call, on the in-process llama.cpp model.

Runs ``multihop-rag`` with every chat completion of the embedded model timed and written as one JSON line to
``--timeline``: seconds, prompt tokens, tokens llama.cpp actually read (fewer when a prompt reopens one whose state
it holds: the prompt-state cache), tokens generated, and the openings of the prompt and the reply. Give ``eval``
a fresh ``--out`` folder, so no call replays from its call cache.

Usage: python benchmarks/call_timeline.py --timeline timeline.jsonl eval --dataset 2wikimultihopqa --split dev \\
    --start 100 --limit 2 --methods naive,resp --llm llamacpp:default --embed st:default --out /tmp/timeline-run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

import llama_cpp

from multihop_rag.app.cli import main as cli


def timed(log: TextIO) -> None:
    """Wrap ``llama_cpp.Llama.create_chat_completion`` so each call writes its line to ``log``."""
    complete = llama_cpp.Llama.create_chat_completion

    def create_chat_completion(self: llama_cpp.Llama, *args: Any, **kwargs: Any) -> Any:
        start, read = time.perf_counter(), llama_cpp.llama_perf_context(self.ctx).n_p_eval
        out = complete(self, *args, **kwargs)
        messages = kwargs.get("messages") or args[0]
        usage: dict[str, Any] = dict(out.get("usage") or {}) if isinstance(out, dict) else {}
        log.write(json.dumps({
            "seconds": round(time.perf_counter() - start, 2),
            "prompt_tokens": usage.get("prompt_tokens"),
            "read_tokens": llama_cpp.llama_perf_context(self.ctx).n_p_eval - read,
            "completion_tokens": usage.get("completion_tokens"),
            "prompt": messages[-1]["content"][:80],
            "reply": (out["choices"][0]["message"]["content"] or "")[:80] if isinstance(out, dict) else "(stream)",
        }) + "\n")
        log.flush()
        return out

    llama_cpp.Llama.create_chat_completion = create_chat_completion  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    parser.add_argument("--timeline", required=True, help="JSON lines, one per LLM call")
    args, rest = parser.parse_known_args()
    with open(args.timeline, "a") as log:
        timed(log)
        return cli(rest)


if __name__ == "__main__":
    sys.exit(main())
