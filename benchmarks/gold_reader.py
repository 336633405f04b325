"""The gold reader: naive RAG's reader given each question's gold passages instead of its top 5.

For questions START+1 … START+N of a dataset's dev split, the LLM reads the question's supporting passages (in the
dataset's order, as a naive RAG chunk lists them) with naive RAG's short-answer prompt and output cap, one call a
question, cached in ``OUT/llm_calls.sqlite``. With ``--results`` (an evaluation folder of the same questions) each
method there is set beside it, on the questions it answered: its F1, and how much of the distance from naive RAG to
the gold reader it makes up. So a method's gap to naive RAG can be read against what perfect retrieval would give
this reader (not a bound on a method: one that decides comparisons by the options' years can score above it). Calls replay from the cache, so a second run only prints the tables (several ``--results`` folders, e.g. the
pools of questions 1–20 and 1–30, against one run of 100).

With ``--naive FOLDER`` the reader also reads what naive RAG read for each question there (its first ``info["read"]``
chunks) with every gold passage it missed added after them: the distance from naive RAG to that reading is what the
missed passages cost, and from that reading to the gold passages alone what naive RAG's other chunks cost.

Usage: python benchmarks/gold_reader.py DATASET [--start 0] [--n 100] [--llm llamacpp:default]
       --out benchmarks/results/gold_reader/DATASET-dev1-100 [--results FOLDER ...] [--naive FOLDER]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import fmean
from typing import Any

from llama_index.core.llms.llm import LLM
from llama_index.core.schema import MetadataMode, TextNode

from multihop_rag.app.evaluate import Result, read_results
from multihop_rag.app.naive import NaiveConfig
from multihop_rag.backends import llama_index_llm
from multihop_rag.corpus import Passage, Question, load_dataset
from multihop_rag.llm.calls import Call, call
from multihop_rag.metrics import bootstrap_ci, f1_score
from multihop_rag.short_answer import short_answer_prompt


def gold_passages(question: Question, passages: dict[str, Passage]) -> list[Passage]:
    """The question's supporting passages that the corpus holds, in the dataset's order."""
    return [passages[i] for i in question.supporting if i in passages]


def _as_read(title: str, passage_id: str, text: str) -> str:
    """A passage or chunk as naive RAG's reader lists it."""
    node = TextNode(text=text, metadata={"title": title, "passage_id": passage_id})
    return node.get_content(metadata_mode=MetadataMode.LLM)


def naive_and_missed_gold(row: Result, gold: list[Passage]) -> list[str]:
    """What naive RAG read for ``row`` (its first ``info["read"]`` chunks, in rank order), then each gold passage
    none of those chunks came from."""
    read = row.evidence[: row.info["read"]]
    have = {pid for e in read for pid in e["passage_ids"]}
    return ([_as_read(e["title"], e["passage_ids"][0], e["text"]) for e in read]
            + [_as_read(p.title, p.id, p.text) for p in gold if p.id not in have])


def _answer(llm: LLM, question: Question, docs: list[str], cap: int) -> dict[str, Any]:
    reply = call(Call(llm, short_answer_prompt(question.question, docs="\n\n".join(docs)), max_tokens=cap))
    answer = reply.text.strip()
    return {"id": question.id, "type": question.type, "question": question.question, "answer": answer,
            "gold": question.answers, "f1": f1_score(answer, question.answers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--llm", default="llamacpp:default")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--results", type=Path, nargs="*", default=[])
    parser.add_argument("--naive", type=Path, help="an evaluation folder whose naive RAG rows to read beside the gold")
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
        rows.append({**_answer(llm, q, [_as_read(p.title, p.id, p.text) for p in read], cap), "read": [p.id for p in read]})
    (args.out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ceiling = {r["id"]: r["f1"] for r in rows}
    print(f"{args.dataset} dev {args.start + 1}–{args.start + len(rows)}: gold passages read, F1 {fmean(ceiling.values()):.3f} "
          f"({fmean(len(r['read']) for r in rows):.1f} passages a question)")
    for folder in args.results:
        print(f"\n{folder}:")
        _compare(ceiling, folder)
    if args.naive:
        _beside_naive(llm, questions, by_id, ceiling, args.naive, args.out, cap)


def _beside_naive(llm: LLM, questions: list[Question], by_id: dict[str, Passage], ceiling: dict[str, float],
                  folder: Path, out: Path, cap: int) -> None:
    """Naive RAG's reading with the gold passages it missed added: what the missed passages cost, and the rest."""
    naive = {r.id: r for r in read_results(folder) if r.method == "naive"}
    rows = [_answer(llm, q, naive_and_missed_gold(naive[q.id], gold_passages(q, by_id)), cap)
            for q in questions if q.id in naive]
    (out / "naive_and_missed_gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = [r["id"] for r in rows]
    base = [f1_score(naive[i].answer or "", naive[i].gold) for i in ids]
    added = [r["f1"] for r in rows]
    gold = [ceiling[i] for i in ids]
    print(f"\n{folder}, {len(ids)} questions: naive RAG {fmean(base):.3f}; its reading with the gold passages it missed "
          f"{fmean(added):.3f} (missed passages: {fmean(added) - fmean(base):+.3f}); the gold passages alone {fmean(gold):.3f} "
          f"(its other chunks: {fmean(gold) - fmean(added):+.3f})")


def _compare(ceiling: dict[str, float], folder: Path) -> None:
    """Each method of the evaluation ``folder`` against the gold reader, on the questions both answered."""
    methods: dict[str, dict[str, float]] = {}
    for r in read_results(folder):
        if r.id in ceiling:
            methods.setdefault(r.method, {})[r.id] = f1_score(r.answer or "", r.gold)
    naive = methods.get("naive", {})
    if not naive:
        print("no naive RAG rows on these questions")
        return
    print(f"gold reader on these {len(naive)} questions: F1 {fmean(ceiling[i] for i in naive):.3f}")
    print("| method | n | F1 | gold reader − method (paired 95 % CI) | share of naive's distance to the gold reader made up |")
    print("|---|---|---|---|---|")
    for name, scores in methods.items():
        ids = [i for i in scores if i in naive]
        f1, base, top = (fmean(values[i] for i in ids) for values in (scores, naive, ceiling))
        closed = (f1 - base) / (top - base) if top > base else float("nan")
        mid, lo, hi = (round(x, 3) for x in bootstrap_ci([ceiling[i] - scores[i] for i in ids]))
        print(f"| {name} | {len(ids)} | {f1:.3f} | {mid:+.3f} [{lo:+.3f}, {hi:+.3f}] | {closed:+.0%} |")


if __name__ == "__main__":
    main()
