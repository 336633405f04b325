"""Prompt-lookup speculative decoding (issue 42) on the embedded default model: does drafting tokens from the
prompt (llama-cpp-python's ``LlamaPromptLookupDecoding``) speed up the calls whose output copies the input?

Two calls a build makes per passage, on the first passages of 2Wiki's pooled corpus
(``corpus_hipporag_full.jsonl``), greedy, each model loaded alone:
- SiReRAG's proposition extraction (its JSON schema, through the method's own ``extract_propositions``);
- a RAPTOR/SiReRAG summary of the passage (the tree's summary prompt).
Per setting: generated tokens, seconds, tokens per second, peak RSS, and whether the replies equal the plain
model's (speculative decoding should not change a greedy reply). Run it on an idle machine.

Usage: benchmarks/bench_prompt_lookup.py [--passages 12] [--lookup 0,5,10] [--out benchmarks/results/prompt_lookup]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from child_rows import row_of_child  # noqa: E402

CORPUS = ("2wikimultihopqa", "corpus_hipporag_full.jsonl")


def child(lookup: int, passages: int) -> dict[str, Any]:
    """One setting in this process (the model alone in memory): what the calls cost."""
    from llama_index.core.llms import ChatMessage

    from llama_index_sirerag.prompts import SUMMARY_QUERY
    from llama_index_sirerag.propositions import extract_propositions
    from multihop_rag.corpus import data_dir, load_documents
    from multihop_rag.serving import llamacpp
    from multihop_rag.serving.bundled import gguf_path

    generated = []
    chat = llamacpp._chat

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raw = chat(*args, **kwargs)
        generated.append(raw["usage"]["completion_tokens"])
        return raw

    llamacpp._chat = counted  # every call's generated tokens, as llama.cpp counts them
    texts = [p.text for p in load_documents(data_dir() / CORPUS[0] / CORPUS[1])[:passages]]
    llm = llamacpp.LlamaCppLLM(model_path=str(gguf_path("default")), prompt_lookup=lookup)
    llm.complete("Say hi.", max_tokens=2)  # the load is not the calls'
    row: dict[str, Any] = {"prompt_lookup": lookup, "passages": passages}
    for task in ("propositions", "summary"):
        replies, started = [], time.perf_counter()
        generated.clear()
        for i, text in enumerate(texts):
            if task == "propositions":
                found, _ = extract_propositions(llm, [(f"c{i}", f"d{i}", text)], show_progress=False)
                replies.append(json.dumps([[p.text, list(p.entities)] for p in found]))
            else:
                message = f"Context information is below.\n{text}\nGiven the information, answer: {SUMMARY_QUERY}"
                replies.append(llm.chat([ChatMessage(role="user", content=message)]).message.content or "")
        seconds, tokens = time.perf_counter() - started, sum(generated)
        row[task] = {"seconds": round(seconds, 1), "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
                     "replies": replies}
    row["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=12)
    parser.add_argument("--lookup", default="0,10", help="draft lengths to try (0: plain decoding)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/prompt_lookup"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.passages)))
        return
    rows = []
    for lookup in (int(v) for v in args.lookup.split(",")):
        rows.append(row_of_child(__file__, str(lookup), "--passages", str(args.passages)))
        print(f"prompt_lookup={lookup}: " + ", ".join(
            f"{t} {rows[-1][t]['tokens_per_s']} tok/s" for t in ("propositions", "summary")), flush=True)
    plain = rows[0]
    lines = ["| prompt_lookup | task | tokens | seconds | tokens/s | speed-up | same replies | peak RSS |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for task in ("propositions", "summary"):
            r, p = row[task], plain[task]
            same = sum(a == b for a, b in zip(r["replies"], p["replies"], strict=True))
            lines.append(f"| {row['prompt_lookup']} | {task} | {r['tokens']} | {r['seconds']} | {r['tokens_per_s']} | "
                         f"{r['tokens_per_s'] / p['tokens_per_s']:.2f}× | {same}/{len(r['replies'])} | "
                         f"{row['peak_rss_gb']} GB |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prompt_lookup.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = (f"Embedded default model (`llamacpp:default`), first {args.passages} passages of 2Wiki's pooled corpus, "
              "greedy; this 2-core machine, idle.\n\n")
    (args.out / "prompt_lookup.md").write_text(header + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
