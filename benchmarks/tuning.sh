#!/usr/bin/env bash
# Ablations on the tuning questions (DESIGN.md: tune on dev 101–200, report on 1–100; never tune on what
# is reported). Each variant is one setting changed from the paper's behaviour, in a folder of its own
# that starts from a copy of the baseline folder's LLM-call cache: the calls a variant shares with the
# baseline (naive's, the rounds before the change) replay, and only what the change alters is paid for.
# FRESH=1 starts a variant with an empty cache instead, so every call is made and its seconds compare (a
# change meant to save time). SEED=VARIANT starts it from another variant's cache instead of the baseline's
# (e.g. a SiReRAG change from the SiReRAG run it departs from: its propositions and clusters replay).
# START=120 takes the tuning questions after the first 120 instead of 100 (a second pool, e.g. HotpotQA 121–140).
# Usage: [POOL=20] [START=100] [METHODS=naive,k2rag] [FRESH=1 | SEED=VARIANT] benchmarks/tuning.sh DATASET N VARIANT [--set method.field=value ...]
#   VARIANT "baseline" runs naive, resp and hirag with the paper's settings; any other name runs naive and the
#   methods the --set items name; METHODS overrides either list (e.g. METHODS=naive,sirerag,naive@sirerag).
#   Results: benchmarks/results/tuning/DATASET-dev(START+1)-(START+N)[-poolP]/VARIANT/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
dataset=$1 n=$2 variant=$3; shift 3
pool=${POOL:-100}  # the methods that build an index tune on a smaller pool (POOL=20: questions 101–120's passages)
start=${START:-100}
root=benchmarks/results/tuning/$dataset-dev$((start + 1))-$((start + n))$([[ $pool == 100 ]] || echo "-pool$pool")
out=$root/$variant
mkdir -p "$out"
if [[ $variant == baseline ]]; then
    methods=${METHODS:-naive,resp,hirag}
else
    methods=${METHODS:-naive,$(printf '%s\n' "$@" | sed -n 's/^--set=\{0,1\}//; s/^\([a-z0-9_]*\)\..*/\1/p' | sort -u | paste -sd,)}
    [[ -f $out/llm_calls.sqlite || ${FRESH:-0} == 1 ]] || "$BIN/python" -c 'import sqlite3, sys
with sqlite3.connect(sys.argv[1]) as src, sqlite3.connect(sys.argv[2]) as dst:
    src.backup(dst)  # the write-ahead log too, which a plain copy would miss' "$root/${SEED:-baseline}/llm_calls.sqlite" "$out/llm_calls.sqlite"
fi
"$BIN/multihop-rag" eval --dataset "$dataset" --split dev --start "$start" --pool "$pool" --limit "$n" --methods "$methods" \
    --llm llamacpp:default --embed st:default --out "$out" "$@"
