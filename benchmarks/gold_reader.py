"""The reader's ceiling: naive RAG's reader given each question's gold passages instead of its top 5.

For questions START+1 … START+N of a dataset's dev split, the LLM reads the question's supporting passages (in the
dataset's order, as a naive RAG chunk lists them) with naive RAG's short-answer prompt and output cap, one call a
question, cached in ``OUT/llm_calls.sqlite``. With ``--results`` (an evaluation folder of the same questions) each
method there is set beside it, on the questions it answered: its F1, and how much of the distance from naive RAG to
the ceiling it closes. So a method's gap to naive RAG can be read against what perfect retrieval would give this
reader. Calls replay from the cache, so a second run only prints the tables (several ``--results`` folders, e.g. the
pools of questions 1–20 and 1–30, against one run of 100).

Usage: python benchmarks/gold_reader.py DATASET [--start 0] [--n 100] [--llm llamacpp:default]
       --out benchmarks/results/gold_reader/DATASET-dev1-100 [--results FOLDER ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llama_index.core.schema import MetadataMode

from multihop_rag.app.evaluate import read_results
from multihop_rag.app.naive import NaiveConfig
from multihop_rag.backends import llama_index_llm
from multihop_rag.corpus import Passage, Question, load_dataset
from multihop_rag.llm.calls import Call, call
from multihop_rag.metrics import bootstrap_ci, f1_score
from multihop_rag.short_answer import short_answer_prompt


def gold_passages(question: Question, passages: dict[str, Passage]) -> list[Passage]:
    """The question's supporting passages that the corpus holds, in the dataset's order."""
    return [passages[i] for i in question.supporting if i in passages]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--results", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus, questions = load_dataset(args.dataset, "dev")
    questions = questions[args.start : args.start + args.n]
    by_id = {p.id: p for p in corpus}
    llm = llama_index_llm(args.llm, cache=args.out / "llm_calls.sqlite")
    cap = NaiveConfig().max_output_tokens
    rows = []
    for q in questions:
        read = gold_passages(q, by_id)
        docs = "\n\n".join(p.to_llama_index().get_content(metadata_mode=MetadataMode.LLM) for p in read)
        reply = call(Call(llm, short_answer_prompt(q.question, docs=docs), max_tokens=cap))
        rows.append({"id": q.id, "type": q.type, "question": q.question, "answer": reply.text.strip(), "gold": q.answers,
                     "read": [p.id for p in read], "f1": f1_score(reply.text.strip(), q.answers)})
    (args.out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ceiling = {r["id"]: r["f1"] for r in rows}
    mean = sum(ceiling.values()) / len(ceiling)
    print(f"{args.dataset} dev {args.start + 1}–{args.start + len(rows)}: gold passages read, F1 {mean:.3f} "
          f"({sum(len(r['read']) for r in rows) / len(rows):.1f} passages a question)")
    for folder in args.results:
        print(f"\n{folder}:")
        _compare(ceiling, folder)


def _compare(ceiling: dict[str, float], folder: Path) -> None:
    """Each method of the evaluation ``folder`` against the gold reader, on the questions both answered."""
    methods: dict[str, dict[str, float]] = {}
    for r in read_results(folder):
        if r.id in ceiling:
            methods.setdefault(r.method, {})[r.id] = f1_score(r.answer or "", r.gold)
    naive = methods.get("naive", {})
    print(f"gold reader on these {len(naive)} questions: F1 {sum(ceiling[i] for i in naive) / max(1, len(naive)):.3f}")
    print("| method | n | F1 | gold reader − method (paired 95 % CI) | share of naive's distance to the ceiling closed |")
    print("|---|---|---|---|---|")
    for name, scores in methods.items():
        ids = [i for i in scores if i in naive]
        f1 = sum(scores[i] for i in ids) / len(ids)
        base = sum(naive[i] for i in ids) / len(ids)
        top = sum(ceiling[i] for i in ids) / len(ids)
        closed = (f1 - base) / (top - base) if top > base else float("nan")
        mid, lo, hi = (round(x, 3) for x in bootstrap_ci([ceiling[i] - scores[i] for i in ids]))
        print(f"| {name} | {len(ids)} | {f1:.3f} | {mid:+.3f} [{lo:+.3f}, {hi:+.3f}] | {closed:+.0%} |")


if __name__ == "__main__":
    main()
