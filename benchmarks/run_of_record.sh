#!/usr/bin/env bash
# The run of record (issue 27): the default embedded models on pooled dev corpora of 2Wiki and HotpotQA.
# Methods without a build step on the first 100 dev questions, the built ones on the first 20 (with
# naive again there, for the paired comparison). Every step resumes where an interrupted one stopped;
# run it again to continue. Usage: benchmarks/run_of_record.sh [step ...]  (default: all, in order)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=benchmarks/results
eval_run() {  # dataset pool methods
    "$BIN/multihop-rag" eval --dataset "$1" --split dev --pool "$2" --methods "$3" --llm llamacpp:default \
        --embed st:default --out "$OUT/$1-dev$2"
}
# Cheap rows first, so each dataset's paired comparison with naive grows as the run goes on; the built
# methods cheapest build first (ReSP and HiRAG, which build nothing, before them).
steps=("${@:-naive-2wiki naive-hotpotqa resp-2wiki hirag-2wiki resp-hotpotqa hirag-hotpotqa built-2wiki built-hotpotqa}")
for step in ${steps[@]}; do
    case $step in
        naive-2wiki | resp-2wiki | hirag-2wiki) eval_run 2wikimultihopqa 100 "${step%%-*}" ;;
        naive-hotpotqa | resp-hotpotqa | hirag-hotpotqa) eval_run hotpotqa 100 "${step%%-*}" ;;
        built-2wiki) eval_run 2wikimultihopqa 20 naive,resp,hirag,k2rag,raptor,sirerag,garlic ;;
        built-hotpotqa) eval_run hotpotqa 20 naive,resp,hirag,k2rag,raptor,sirerag,garlic ;;
        *) echo "unknown step $step" >&2; exit 2 ;;
    esac
done
