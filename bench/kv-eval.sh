#!/usr/bin/env bash
# KV cache storage types measured for fidelity (docs/KV.md): the KL divergence
# of each -ctk/-ctv type against the F16 cache, with llama-perplexity's
# --kl-divergence-base / --kl-divergence on the long-context fixture.
#   bench/kv-eval.sh [BRISK] [MODEL] [TEXT] [CTX] [CHUNKS]
# PARTS=types (the storage types, TYPES="K/V ...", default every row of docs/KV.md; a K type
# ending in h, e.g. q4_0h/q4_0, is that type with --k-hadamard), policies
# (the retention policies, POLICIES="...", at the budgets BUDGETS="0.25 0.5" (the default), with
# the KV memory's peak; NAME/head is NAME with --kv-per-head, e.g. snapkv/head), or both (the default).
# CSV=FILE also appends each row as CSV (part,label,budget,ppl,kld,kld99,kldmax,same_top) for
# bench/kv-plot.py, which draws docs/kv-fidelity.svg from it.
# With the peer (~/.cache/brisk-peer) present, llama-perplexity's own KL of
# the same types against the same brisk-written base file is printed too.
set -euo pipefail
BRISK=${1:-build/brisk}
MODEL=${2:-../shared/models/pycode-long-f16.gguf}
TEXT=${3:-../shared/models/data/val.txt}
CTX=${4:-2048}
CHUNKS=${5:-}
THREADS=${THREADS:-2}
PARTS=${PARTS:-types,policies}
PEER=${PEER:-$HOME/.cache/brisk-peer/bin}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
chunk_flag=()
[ -n "$CHUNKS" ] && chunk_flag=(--chunks "$CHUNKS")

echo "# base: F16 cache, -c $CTX ${CHUNKS:+--chunks $CHUNKS} on $TEXT"
nice "$BRISK" perplexity -m "$MODEL" -f "$TEXT" -c "$CTX" "${chunk_flag[@]}" -t "$THREADS" \
    --kl-divergence-base "$WORK/base.kld" 2>/dev/null | grep 'Final estimate'

csv_row() {   # a markdown row on stdin -> CSV=FILE (part, label, budget, ppl, kld, kld99, kldmax, same top)
    [ -n "${CSV:-}" ] || { cat > /dev/null; return; }
    awk -F'|' -v part="$1" '{ gsub(/ /, ""); gsub(/%/, ""); if (part == "policy") print part "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8;
                                else print part "," $3 ",1," $4 "," $5 "," $6 "," $7 "," $8 }' >> "$CSV"
}

row() {   # engine label, then the command's output on stdin
    awk -v who="$1" -v t="$2" '
        /^Mean PPL\(Q\) /   { ppl = $4 }
        /^Mean    KLD:/     { kld = $3 }
        /^99.0%   KLD:/     { k99 = $3 }
        /^Maximum KLD:/     { kmax = $3 }
        /^Same top p:/      { top = $4 }
        END { printf "| %s | %s | %s | %s | %s | %s | %s%% |\n", who, t, ppl, kld, k99, kmax, top }'
}

if [[ $PARTS == *types* ]]; then
echo
echo "| engine | K/V types | PPL | mean KLD | 99.0% KLD | max KLD | same top p |"
echo "|---|---|---:|---:|---:|---:|---:|"
for kv in ${TYPES:-f32/f32 q8_0/q8_0 q4_0/q4_0 q8_0/q4_0 q4_0/q8_0 k4/k4 k2/k2 k4/q8_0 q8_0/k4 k4/q4_0 q8_0h/q8_0 q4_0h/q4_0 q4_0h/q8_0}; do
    k=${kv%/*} v=${kv#*/} rot=()
    if [[ $k == *h ]]; then k=${k%h} rot=(--k-hadamard); fi
    nice "$BRISK" perplexity -m "$MODEL" -f "$TEXT" -c "$CTX" "${chunk_flag[@]}" -t "$THREADS" -ctk "$k" -ctv "$v" "${rot[@]}" \
        --kl-divergence-base "$WORK/base.kld" --kl-divergence 2>/dev/null | row brisk "$kv" | tee >(csv_row type)
done
if [ -x "$PEER/llama-perplexity" ]; then
    for t in f16 q8_0 q4_0; do
        # llama-perplexity's asynchronous log now and then loses its closing block at exit: repeat such a run
        for try in 1 2 3; do
            LD_LIBRARY_PATH=$PEER nice "$PEER/llama-perplexity" -m "$MODEL" -c "$CTX" -t "$THREADS" -fa on -ctk "$t" -ctv "$t" \
                --kl-divergence-base "$WORK/base.kld" --kl-divergence > "$WORK/peer.out" 2>&1 || true
            grep -q '^Same top p' "$WORK/peer.out" && break
        done
        row llama.cpp "$t/$t" < "$WORK/peer.out"
    done
fi
fi

if [[ $PARTS == *policies* ]]; then
    # retention: each chunk fed in ubatches of 64, the policy cutting the cache to the
    # budget before each; the pool sized to the budget; KL against the full F16 cache
    SINK=${SINK:-4} WINDOW=${WINDOW:-32}
    echo
    echo "| policy | budget | PPL | mean KLD | 99.0% KLD | max KLD | same top p | KV peak (blocks) | of the full cache |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for policy in ${POLICIES:-streaming random h2o snapkv tova oracle memdecay}; do
        heads=()
        [[ $policy == */head ]] && heads=(--kv-per-head)
        for budget in ${BUDGETS:-0.25 0.5}; do
            nice "$BRISK" perplexity -m "$MODEL" -f "$TEXT" -c "$CTX" "${chunk_flag[@]}" -t "$THREADS" \
                --kv-policy "${policy%/head}" "${heads[@]}" --kv-budget "$budget" --kv-sink "$SINK" --kv-window "$WINDOW" \
                --kl-divergence-base "$WORK/base.kld" --kl-divergence 2>/dev/null |
                awk -v who="$policy" -v b="$budget" '
                    /^KV memory:/       { peak = $4; full = $0; sub(/.*MiB \(/, "", full); sub(/\).*/, "", full) }
                    /^Mean PPL\(Q\) /   { ppl = $4 }
                    /^Mean    KLD:/     { kld = $3 }
                    /^99.0%   KLD:/     { k99 = $3 }
                    /^Maximum KLD:/     { kmax = $3 }
                    /^Same top p:/      { top = $4 }
                    END { printf "| %s | %s | %s | %s | %s | %s | %s%% | %s | %s |\n", who, b, ppl, kld, k99, kmax, top, peak, full }' |
                tee >(csv_row policy)
        done
    done
fi
