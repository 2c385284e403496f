#!/usr/bin/env bash
# brisk batched-bench: llama-batched-bench's flags and output. The md table
# has its header and one row per configuration that fits -c (skipped ones are
# left out, as llama-batched-bench does), N_KV is what that configuration
# needs, the jsonl lines carry llama-batched-bench's field names with numbers,
# -pps forks one prompt (and the fork shares its blocks), bad lists are usage
# errors; --spec off|ngram|auto runs the same table through the scheduler
# (n-gram drafts reported on stderr), a bad mode is a usage error. Speed itself is a benchmark's business (bench/, docs/PERFORMANCE.md).
# Usage: bash tests/cli_batched_bench.sh BRISK_BINARY [SHARED_DIR]
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $1"; head -c 600 "$tmp/out"; head -c 300 "$tmp/err"; fi; }

"$brisk" batched-bench -m "$model" -c 1024 -npp 32,64 -ntg 8 -npl 1,2,4,16 -t 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "md: exit 0" "[ $rc -eq 0 ]"
check "md: header" "grep -q '^|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |' $tmp/out"
# 16 x (64 + 8) = 1152 > 1024 cells: skipped; 16 x 40 = 640 fits
check "md: 7 rows (one skipped)" "[ \$(grep -cE '^\|  +[0-9]+ \|' $tmp/out) -eq 7 ]"
check "md: N_KV = pl x (pp + tg)" "grep -qE '^\|    64 \|      8 \|    4 \|    288 \|' $tmp/out && grep -qE '^\|    32 \|      8 \|   16 \|    640 \|' $tmp/out"
check "md: no 64/16 row" "! grep -qE '^\|    64 \|      8 \|   16 \|' $tmp/out"
check "md: memory plan on stderr" "grep -q 'memory plan: weights' $tmp/err"

"$brisk" batched-bench -m "$model" -c 1024 -npp 32 -ntg 4 -npl 1,3 -pps -t 1 --output-format jsonl >"$tmp/out" 2>"$tmp/err"; rc=$?
check "jsonl: exit 0" "[ $rc -eq 0 ]"
check "jsonl: two lines" "[ \$(grep -c '^{' $tmp/out) -eq 2 ]"
for f in n_kv_max n_batch n_ubatch flash_attn is_pp_shared n_gpu_layers n_threads n_threads_batch pp tg pl n_kv t_pp speed_pp t_tg speed_tg t speed; do
  check "jsonl: field $f is a number" "[ \$(grep -cE '\"$f\": -?[0-9]+(\.[0-9]+)?[,}]' $tmp/out) -eq 2 ]"
done
check "jsonl: -pps recorded, pl 3 with 3 x 32 + 3 x 4 cells" "grep -q '\"is_pp_shared\": 1' $tmp/out && grep -q '\"pl\": 3, \"n_kv\": 108' $tmp/out"

"$brisk" batched-bench -m "$model" -npl 1,x >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad list: usage error" "[ $rc -eq 2 ] && grep -q -- '-npl' $tmp/err"
"$brisk" batched-bench -m "$model" -npl 0 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "npl 0: usage error" "[ $rc -eq 2 ]"
"$brisk" batched-bench -m "$model" -npp 16 -ntg 4 -npl 1 -t 1 > /dev/full 2>"$tmp/err"; rc=$?
check "write error: exit 1" "[ $rc -eq 1 ] && grep -q 'write to stdout failed' $tmp/err"
"$brisk" batched-bench --help >"$tmp/out" 2>&1; rc=$?
check "help: -c is the total KV cells" "[ $rc -eq 0 ] && grep -q 'total KV cells' $tmp/out && grep -q -- '-pps' $tmp/out"

# --spec: the same table through the scheduler
"$brisk" batched-bench -m "$model" -c 1024 -npp 32 -ntg 8 -npl 1,4 -t 1 --spec off >"$tmp/out" 2>"$tmp/err"; rc=$?
check "spec off: exit 0, 2 rows" "[ $rc -eq 0 ] && [ \$(grep -cE '^\|  +[0-9]+ \|' $tmp/out) -eq 2 ]"
check "spec off: N_KV = pl x (pp + tg), no draft report" "grep -qE '^\|    32 \|      8 \|    4 \|    160 \|' $tmp/out && ! grep -q 'drafts' $tmp/err"
"$brisk" batched-bench -m "$model" -c 1024 -npp 48 -ntg 24 -npl 2 -t 1 --spec ngram >"$tmp/out" 2>"$tmp/err"; rc=$?
check "spec ngram: exit 0, drafts reported" "[ $rc -eq 0 ] && grep -qE 'spec ngram, pp 48, tg 24, pl 2: [0-9]+ drafts, [0-9]+ accepted' $tmp/err"
"$brisk" batched-bench -m "$model" -c 1024 -npp 32 -ntg 4 -npl 1,3 -pps -t 1 --spec auto --output-format jsonl >"$tmp/out" 2>"$tmp/err"; rc=$?
check "spec auto -pps jsonl: two lines" "[ $rc -eq 0 ] && [ \$(grep -c '^{' $tmp/out) -eq 2 ] && grep -q '\"pl\": 3, \"n_kv\": 108' $tmp/out"
check "spec auto: S_TG is a number" "[ \$(grep -cE '\"speed_tg\": [0-9]+\.[0-9]+' $tmp/out) -eq 2 ]"
"$brisk" batched-bench -m "$model" -npp 16 -ntg 4 -npl 1 --spec draft >"$tmp/out" 2>"$tmp/err"; rc=$?
check "spec draft: usage error naming the modes" "[ $rc -eq 2 ] && grep -q 'off|ngram|auto' $tmp/err"
"$brisk" batched-bench -m "$model" -npp 16 -ntg 4 -npl 1 --spec >"$tmp/out" 2>"$tmp/err"; rc=$?
check "spec without a mode: usage error" "[ $rc -eq 2 ] && grep -q -- '--spec' $tmp/err"
"$brisk" batched-bench --help >"$tmp/out" 2>&1; rc=$?
check "help: --spec and its modes" "[ $rc -eq 0 ] && grep -q -- '--spec MODE' $tmp/out && grep -q 'ngram (n-gram drafts' $tmp/out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
