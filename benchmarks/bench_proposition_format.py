"""Generated tokens that SiReRAG's proposition format spends (issue 42): the same extraction prompt (Figure 7,
as ``llama_index_sirerag.prompts.PROPOSITIONS`` has it) with its JSON written three ways, on the first passages
of 2Wiki's pooled corpus, the embedded default model, greedy, through ``generate_json`` (schema-constrained):

- ``objects``: the shipped format, ``{"facts": [{"fact": "...", "entities": ["..."]}, ...]}``, spaced;
- ``tight``: the same objects with no spaces after ``:`` and ``,`` in the prompt's two examples;
- ``arrays``: each fact an array, its text first and its entities after: ``{"facts":[["...","..."],...]}``.

Per format: generated tokens, seconds, facts and entities, and how many facts and entities match the shipped
format's. Each format runs in a process of its own. Run it on an idle machine.

Usage: benchmarks/bench_proposition_format.py [--passages 12] [--out benchmarks/results/proposition_format]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from child_rows import row_of_child  # noqa: E402

CORPUS = ("2wikimultihopqa", "corpus_hipporag_full.jsonl")
FORMATS = ("objects", "tight", "arrays")


def _braced(value: Any, **dumps: Any) -> str:
    """``value`` as JSON with its braces doubled for ``str.format``."""
    return json.dumps(value, ensure_ascii=False, **dumps).replace("{", "{{").replace("}", "}}")


def prompt_and_schema(form: str) -> tuple[str, Any]:
    """The extraction prompt and JSON schema of ``form``."""
    from pydantic import Field, create_model

    from llama_index_sirerag import prompts
    from llama_index_sirerag.propositions import facts_schema

    prompt = prompts.PROPOSITIONS
    if form == "objects":
        return prompt, facts_schema(30, 10)
    template = prompt.split("format provided below:\n")[1].split("\n")[0]
    example = prompt.split("Output:\n")[1].split("\n\nParagraph")[0]
    shown = json.loads(example.replace("{{", "{").replace("}}", "}"))
    tight = {"separators": (",", ":")}
    if form == "tight":
        new_template = template.replace('": ', '":').replace('", "', '","').replace("}}, ...", "}},...")
        prompt = prompt.replace(template, new_template).replace(example, _braced(shown, **tight))
        return prompt, facts_schema(30, 10)
    described = template.split('"fact": "')[1].split('"')[0]
    new_template = "{{" + f'"facts":[["{described}","entity 1","entity 2","entity 3"],...]' + "}}"
    arrays = {"facts": [[f["fact"], *f["entities"]] for f in shown["facts"]]}
    prompt = prompt.replace(template, new_template).replace(example, _braced(arrays, **tight))
    fact = Annotated[list[str], Field(min_length=1, max_length=11)]
    return prompt, create_model("FactArrays", facts=(list[fact], Field(default_factory=list, max_length=30)))


def child(form: str, passages: int) -> dict[str, Any]:
    """One format in this process: what the extraction costs and what it extracts."""
    from llama_index_sirerag.propositions import entity_key
    from multihop_rag.corpus import data_dir, load_documents
    from multihop_rag.llm.cache import cached_llm
    from multihop_rag.llm.structured import generate_json
    from multihop_rag.serving.bundled import gguf_path
    from multihop_rag.serving.llamacpp import LlamaCppLLM

    prompt, schema = prompt_and_schema(form)
    texts = [p.text for p in load_documents(data_dir() / CORPUS[0] / CORPUS[1])[:passages]]
    model = LlamaCppLLM(model_path=str(gguf_path("default")))
    model.complete("Say hi.", max_tokens=2)  # the load is not the calls'
    llm = cached_llm(model, None)  # counted (llama.cpp's own token counts), not cached
    replies, started = [], time.perf_counter()
    for i, text in enumerate(texts):
        answer = generate_json(llm, prompt.format(paragraph=text), schema, what=f"propositions of passage {i}")
        facts = [] if answer is None else [
            (f[0], f[1:]) if form == "arrays" else (f.fact, f.entities) for f in answer.facts]
        replies.append([[fact.strip(), sorted({entity_key(e) for e in entities if e.strip()})] for fact, entities in facts])
    seconds = time.perf_counter() - started
    return {"format": form, "passages": passages, "seconds": round(seconds, 1), "tokens": llm.usage.completion_tokens,
            "calls": llm.usage.calls, "replies": replies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/proposition_format"))
    parser.add_argument("--child", choices=FORMATS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.passages)))
        return
    rows = []
    for form in FORMATS:
        rows.append(row_of_child(__file__, form, "--passages", str(args.passages)))
        print(f"{form}: {rows[-1]['tokens']} tokens, {rows[-1]['seconds']} s", flush=True)
    shipped = rows[0]
    lines = ["| format | generated tokens | vs objects | seconds | vs objects | calls | facts | entities (distinct per passage) "
             "| facts as objects' | entities as objects' |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        facts = sum(len(r) for r in row["replies"])
        entities = [{e for _, es in r for e in es} for r in row["replies"]]
        base = [{e for _, es in r for e in es} for r in shipped["replies"]]
        same_facts = sum(len({f for f, _ in a} & {f for f, _ in b}) for a, b in zip(row["replies"], shipped["replies"], strict=True))
        same_entities = sum(len(a & b) for a, b in zip(entities, base, strict=True))
        lines.append(f"| {row['format']} | {row['tokens']:,} | {row['tokens'] / shipped['tokens'] - 1:+.1%} | {row['seconds']} | "
                     f"{row['seconds'] / shipped['seconds'] - 1:+.1%} | {row['calls']} | {facts} | {sum(map(len, entities))} | "
                     f"{same_facts} | {same_entities} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proposition_format.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = (f"SiReRAG's proposition extraction, embedded default model (`llamacpp:default`), first {args.passages} passages "
              "of 2Wiki's pooled corpus, greedy, schema-constrained; this 2-core machine.\n\n")
    (args.out / "proposition_format.md").write_text(header + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
