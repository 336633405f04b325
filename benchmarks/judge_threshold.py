"""Choose ReSP's ``judge_threshold`` on tuning questions without a run per threshold.

Greedy decoding makes a ReSP run a function of where it stops: stopped after round r, its answer is the
answer every run stopping there gives. Three runs on the same questions hold every stopping point:

- ``--stop1``: the paper's judge (``min_iterations=1``): the answer of runs that stopped after round 1;
- ``--stop2``: ``min_iterations=2``: the answer of runs that stopped after round 2;
- ``--probabilities``: a run with a high ``judge_threshold`` (e.g. 0.9), which records P(Yes) of every round
  (``info.judge_probabilities``) and mostly goes to round 3: the answer after round 3.

For a threshold t a question stops at the first round from ``--min-iterations`` on whose P(Yes) ≥ t; its F1 is the F1 of the run that
stopped there (a question whose stopping run is missing is reported, not guessed). Prints F1 per threshold
beside naive's on the same questions.

Usage: python benchmarks/judge_threshold.py DIR/baseline DIR/resp_min_iter2 DIR/resp_judge090 [--min-iterations 2]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from multihop_rag.metrics import paired_bootstrap_ci, precision_recall_f1

THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def _rows(folder: Path, method: str) -> dict[str, dict[str, Any]]:
    rows = (json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip())
    return {r["id"]: r for r in rows if r["method"] == method}


def _f1(row: dict[str, Any]) -> float:
    return precision_recall_f1(row["answer"], row["gold"])[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stop1", type=Path)
    parser.add_argument("stop2", type=Path)
    parser.add_argument("probabilities", type=Path)
    parser.add_argument("--min-iterations", type=int, default=1, help="the round the judge is first asked after")
    args = parser.parse_args()
    naive, by_round = _rows(args.stop1, "naive"), {1: _rows(args.stop1, "resp"), 2: _rows(args.stop2, "resp")}
    probed = _rows(args.probabilities, "resp")
    print(f"{len(probed)} questions with P(Yes) per round")
    print("| threshold | n | ReSP F1 | naive F1 | ΔF1 (paired 95 % CI) | stops after round 1/2/3 | missing |")
    print("|---|---|---|---|---|---|---|")
    for threshold in THRESHOLDS:
        method, control, stops, missing = [], [], [0, 0, 0], 0
        for qid, row in probed.items():
            p_yes = row["info"].get("judge_probabilities") or []
            asked = enumerate(p_yes[args.min_iterations - 1 :], start=args.min_iterations)
            stop = next((i for i, p in asked if p >= threshold), row["info"]["iterations"])
            source = by_round.get(stop, {}).get(qid) if stop < row["info"]["iterations"] else row
            if source is None or source["info"]["iterations"] != stop:
                missing += 1
                continue
            stops[stop - 1] += 1
            method.append(_f1(source))
            control.append(_f1(naive[qid]))
        delta, low, high = paired_bootstrap_ci(method, control)
        print(f"| {threshold:.2f} | {len(method)} | {sum(method) / len(method):.3f} | {sum(control) / len(control):.3f} | "
              f"{delta:+.3f} [{low:+.3f}, {high:+.3f}] | {'/'.join(map(str, stops))} | {missing} |")


if __name__ == "__main__":
    main()
