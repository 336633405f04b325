"""Peak memory and time of GARLIC's attention edges (Appendix B.1) over one long summarization exchange.

The bundled attention model (the embedded default's own weights, bfloat16 stored, float32 products) teacher-forces
Table 4's prompt over the first passages of 2Wiki's pooled corpus, as ``* `` lines up to ``--prompt-tokens``, and a
reply of ``--reply-tokens`` (sentences of those passages as summary points, so every output has inputs to attend
to), and scores the edges. Each setting runs in a process of its own, so its peak RSS is its own. Run it on an
idle machine for the seconds; the memory does not depend on the load.

Usage: benchmarks/bench_attention_memory.py [--prompt-tokens 8000] [--reply-tokens 2000] [--blocks 256:100000,256:1024]

``--blocks`` lists settings as ``ROW_BLOCK:MLP_BLOCK[:PRODUCTS]`` (100000: every row, or every position, at once;
PRODUCTS ``auto``, the default: in bfloat16 where this CPU multiplies it faster, else float32; ``float32``: always
float32). Rows append to ``--out``/attention_memory.jsonl with their edges; the table compares this run's rows with
its first.
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


def exchange(prompt_tokens: int, reply_tokens: int) -> tuple[str, str, list[str], list[str]]:
    """Table 4's prompt over passages up to ``prompt_tokens`` and a reply of their first sentences."""
    from llama_index_garlic import prompts
    from multihop_rag.corpus import data_dir, load_documents
    from multihop_rag.indexing.text import count_tokens, split_sentences

    inputs, outputs, used, written = [], [], 0, 0
    for passage in load_documents(data_dir() / CORPUS[0] / CORPUS[1]):
        text = " ".join(passage.text.split())
        if used + count_tokens(text) > prompt_tokens:
            break
        inputs.append(text)
        used += count_tokens(text) + 2
        for sentence in split_sentences(text)[:2]:
            if written + count_tokens(sentence) <= reply_tokens:
                outputs.append(sentence)
                written += count_tokens(sentence) + 2
    prompt = prompts.SUMMARIZE.format(segments="".join(prompts.bullet(t) for t in inputs))
    return prompt, "".join(prompts.bullet(t) for t in outputs), inputs, outputs


def child(blocks: str, prompt_tokens: int, reply_tokens: int) -> dict[str, Any]:
    """One setting (``ROW_BLOCK:MLP_BLOCK[:PRODUCTS]``) in this process: load, score the edges, report."""
    import torch

    from llama_index_garlic import attention, float32_compute, position_blocks
    from llama_index_garlic.attention import TransformersAttention

    row, mlp, products = (blocks + ":auto").split(":")[:3]
    row_block, mlp_block = int(row), int(mlp)
    attention.ROW_BLOCK, position_blocks.MLP_BLOCK = row_block, mlp_block
    if products == "float32":
        float32_compute.faster_products = lambda dtype: torch.float32  # type: ignore[assignment]
    prompt, reply, inputs, outputs = exchange(prompt_tokens, reply_tokens)
    model = TransformersAttention.from_pretrained("default")
    loaded_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    started = time.perf_counter()
    edges = model.summary_edges(prompt, reply, inputs, outputs)
    seconds = time.perf_counter() - started
    if edges is None:
        raise RuntimeError("the exchange's texts could not be located")
    converted = any(isinstance(m, float32_compute.Float32Linear) for m in model.model.modules())
    products_in = "float32" if converted else str(next(p.dtype for p in model.model.parameters())).removeprefix("torch.")
    return {"row_block": row_block, "mlp_block": mlp_block, "products": products_in,
            "tokens": model.forward_tokens, "inputs": len(inputs), "outputs": len(outputs),
            "seconds": round(seconds, 1), "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
            "loaded_rss_gb": round(loaded_gb, 2), "strongest_input": edges.argmax(axis=1).tolist(),
            "edges": edges.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-tokens", type=int, default=8000)
    parser.add_argument("--reply-tokens", type=int, default=2000)
    parser.add_argument("--blocks", default="256:100000,256:1024", help="ROW_BLOCK:MLP_BLOCK settings (100000: all at once)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/attention_memory"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.prompt_tokens, args.reply_tokens)))
        return
    rows = []
    for blocks in args.blocks.split(","):
        rows.append(row_of_child(__file__, blocks, "--prompt-tokens", str(args.prompt_tokens),
                                 "--reply-tokens", str(args.reply_tokens)))
        print(f"{blocks}: {rows[-1]['peak_rss_gb']} GB, {rows[-1]['seconds']} s", flush=True)
    import numpy as np

    first = np.asarray(rows[0]["edges"])
    lines = ["| ROW_BLOCK | MLP_BLOCK | products | tokens | inputs × outputs | seconds | RSS loaded | peak RSS | max edge change vs "
             "first row | same strongest input |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        change = float(np.max(np.abs(np.asarray(row["edges"]) - first) / np.maximum(np.abs(first), 1e-12)))
        same = sum(a == b for a, b in zip(row["strongest_input"], rows[0]["strongest_input"], strict=True))
        lines.append(f"| {row['row_block']} | {row['mlp_block']} | {row['products']} | {row['tokens']} | {row['inputs']} × {row['outputs']} | {row['seconds']} | "
                     f"{row['loaded_rss_gb']} GB | {row['peak_rss_gb']} GB | {change:.1e} | {same}/{row['outputs']} |")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "attention_memory.jsonl").open("a") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)
    header = (f"Attention edges of the embedded default (`default`, bfloat16 weights) over Table 4's "
              f"prompt of ~{args.prompt_tokens} tokens and a reply of ~{args.reply_tokens}; 2Wiki's pooled corpus; this "
              "2-core machine.\n\n")
    print(header, end="")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
