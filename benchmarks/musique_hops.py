"""Where MuSiQue answers stop, hop by hop, from an evaluation folder's results (no model is run).

For each method: questions, answers right (F1 ≥ 0.5), answers that name an earlier hop's answer from the
question's decomposition (``meta.question_decomposition``) and not the final one — the reader stopped at the
bridge entity — and how many runs read the first hop's passage, the last hop's, and both (with how many of
those it answered right): naive RAG's evidence is its top 20, of which it reads the first ``info["read"]``; the
other methods' evidence is what they read. A unit reads the passages whose text it holds (``passage_ids``); the
last column also counts a summary, aggregate or information point for the passages it was written from
(``source_ids``), as K²RAG's corpus summaries and SiReRAG's aggregates are. MuSiQue lists ``supporting`` in hop order.

Usage: python benchmarks/musique_hops.py benchmarks/results/musique-dev100 benchmarks/results/musique-dev30
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from multihop_rag.app.evaluate import read_results
from multihop_rag.corpus import load_dataset
from multihop_rag.metrics import f1_score

RIGHT = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    _, questions = load_dataset("musique", "dev")
    earlier_answers = {q.id: [hop["answer"] for hop in q.meta["question_decomposition"][:-1]] for q in questions}
    print(
        "| folder | method | n | right | answered an earlier hop | read hop 1 | read last hop | read both | right of both "
        "| read both, summaries counted |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for folder in args.folders:
        counts: dict[str, Counter[str]] = {}
        for r in read_results(folder):
            units = r.evidence[: r.info.get("read")]
            read = {p for e in units for p in e.get("passage_ids", [])}
            written_from = read | {p for e in units for p in e.get("source_ids", [])}
            right = f1_score(r.answer, r.gold) >= RIGHT
            both = r.supporting[0] in read and r.supporting[-1] in read
            c = counts.setdefault(r.method, Counter())
            c.update(
                n=1,
                right=right,
                bridge=not right and any(f1_score(r.answer, a) >= RIGHT for a in earlier_answers[r.id]),
                first=r.supporting[0] in read,
                last=r.supporting[-1] in read,
                both=both,
                both_right=both and right,
                both_written=r.supporting[0] in written_from and r.supporting[-1] in written_from,
            )
        for method, c in counts.items():
            print(
                f"| {folder.name} | {method} | {c['n']} | {c['right']} | {c['bridge']} | {c['first']} | {c['last']} "
                f"| {c['both']} | {c['both_right']} | {c['both_written']} |"
            )


if __name__ == "__main__":
    main()
