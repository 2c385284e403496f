#!/usr/bin/env bash
# bench/constrain_cost.sh [MODEL] [ROUNDS] [THREADS]: what a JSON-schema constraint adds to a decode
# step, brisk beside llama.cpp's grammar sampler (llama-completion --json-schema) on the same schema,
# model and prompt, in alternating runs (brisk plain, brisk constrained, llama plain, llama
# constrained, then the next round in the other order), greedy, 48 generated tokens each.
#
# MODEL defaults to a synthetic llama-3.2-1b Q4_0 carrying the Llama 3 vocabulary
# (../shared/vocab/ggml-vocab-llama-bpe.gguf, 128,256 tokens, or BRISK_VOCAB): written by
# `brisk synth --vocab`, which copies its tokenizer.* keys and sizes token_embd to it.
#
# The decode step, prompt excluded:
#   brisk: the "generated N tokens, X tokens/s" line (from the first sampled token to the last: N
#          samples, N-1 decodes; the constraint's first mask is computed before it starts);
#   llama.cpp: (eval time + sampling time) / (eval runs + 1), from common_perf_print (its "eval time"
#          alone leaves out the grammar sampler, which it times as "sampling time").
# Prints every run, then per engine the medians and constrained/plain ratio of the step time.
# The schema has minItems so that greedy constrained output never ends before the 48 tokens.
# BRISK_COST_PERF=1 adds a profile of one constrained brisk run (perf record, flat): the samples in
# the mask stage (mask_apply and the constraint's mask_fill, mask_accept, cst_mask, cst_advance; not its
# compilation) beside those in the whole generation (all samples of the run less those of the same
# run with 1 token, which holds the load, the compilation and the prompt): less sensitive to the
# load of other processes than wall-clock ratios.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="$root/build/brisk"
peer="${BRISK_PEER:-$HOME/.cache/brisk-peer}/bin/llama-completion"
vocab="${BRISK_VOCAB:-$root/../shared/vocab/ggml-vocab-llama-bpe.gguf}"
model="${1:-}"
rounds="${2:-5}"
threads="${3:-2}"
n=48
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
[ -x "$peer" ] || { echo "llama-completion not found at $peer"; exit 1; }
if [ -z "$model" ]; then
  [ -f "$vocab" ] || { echo "the Llama 3 vocabulary is not at $vocab (set BRISK_VOCAB)"; exit 1; }
  model="$tmp/l1b-q4_0-llama3.gguf"
  "$brisk" synth --shape llama-3.2-1b --type Q4_0 --vocab "$vocab" -o "$model" >/dev/null 2>"$tmp/e" ||
    { echo "brisk synth --vocab failed: $(cat "$tmp/e")"; exit 1; }
fi
schema='{"type":"array","minItems":12,"items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":20},"ok":{"type":"boolean"}},"required":["id","name"]}}'
prompt='items = '
# ms per decode step
brisk_step() {
  local g; g="$(sed -n 's/.*generated \([0-9]*\) tokens, \([0-9.]*\) tokens\/s.*/\1 \2/p' "$1")"
  [ -n "$g" ] && awk -v g="$g" 'BEGIN { split(g, a, " "); if (a[1] == '$n' && a[2] > 0) printf "%.3f", 1000 / a[2] }'
}
peer_step() {
  local e s r
  e="$(grep -E ' eval time' "$1" | grep -v prompt | sed -n 's/.*eval time = *\([0-9.]*\) ms \/ *\([0-9]*\) runs.*/\1 \2/p' | tail -1)"
  s="$(sed -n 's/.* sampling time = *\([0-9.]*\) ms.*/\1/p' "$1" | tail -1)"
  [ -n "$e" ] && [ -n "$s" ] && awk -v e="$e" -v s="$s" 'BEGIN { split(e, a, " "); if (a[2] + 1 == '$n') printf "%.3f", (a[1] + s) / (a[2] + 1) }'
}
run_one() {
  case "$1" in
    "brisk plain") "$brisk" run -m "$model" -p "$prompt" -n $n --temp 0 -t "$threads" --ignore-eos >/dev/null 2>"$tmp/e"; echo "$1 $(brisk_step "$tmp/e")" ;;
    "brisk json")  "$brisk" run -m "$model" -p "$prompt" -n $n --temp 0 -t "$threads" --json-schema "$schema" >/dev/null 2>"$tmp/e"; echo "$1 $(brisk_step "$tmp/e")" ;;
    "llama plain") "$peer" -m "$model" -p "$prompt" -n $n --temp 0 -t "$threads" -no-cnv --ignore-eos >/dev/null 2>"$tmp/e" </dev/null; echo "$1 $(peer_step "$tmp/e")" ;;
    "llama json")  "$peer" -m "$model" -p "$prompt" -n $n --temp 0 -t "$threads" -no-cnv --json-schema "$schema" >/dev/null 2>"$tmp/e" </dev/null; echo "$1 $(peer_step "$tmp/e")" ;;
  esac
}
echo "model $model, $rounds rounds, $threads threads, $n tokens; ms per decode step:"
: >"$tmp/r"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order=("brisk plain" "brisk json" "llama plain" "llama json")
  else order=("llama json" "llama plain" "brisk json" "brisk plain"); fi
  for k in "${order[@]}"; do run_one "$k" | tee -a "$tmp/r"; done
done
python3 - "$tmp/r" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3:
        runs.setdefault((p[0], p[1]), []).append(float(p[2]))
for eng in ("brisk", "llama"):
    a, b = runs.get((eng, "plain")), runs.get((eng, "json"))
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{eng}: step plain {ma:.2f} ms, constrained {mb:.2f} ms (medians of {len(a)}/{len(b)}): "
              f"constrained/plain = {mb / ma:.3f}")
    else:
        print(f"{eng}: no complete runs")
PY
if [ "${BRISK_COST_PERF:-0}" = 1 ] && command -v perf >/dev/null; then
  count() {   # count N OUT: perf samples of a constrained brisk run of N tokens, by symbol
    perf record -q -F 1999 -o "$tmp/perf.data" "$brisk" run -m "$model" -p "$prompt" -n "$1" --temp 0 -t "$threads" \
      --json-schema "$schema" >/dev/null 2>&1
    perf report -i "$tmp/perf.data" --no-children --sort symbol -g none -n 2>/dev/null | grep -v '^#' |
      awk 'NF >= 3 && $1 ~ /%$/ { print $4, $2 }' >"$2"
  }
  count $n "$tmp/full"; count 1 "$tmp/one"
  python3 - "$tmp/full" "$tmp/one" <<'PY'
import re, sys
def load(f):
    d = {}
    for line in open(f):
        sym, n = line.split()
        d[sym] = d.get(sym, 0) + int(n)
    return d
full, one = load(sys.argv[1]), load(sys.argv[2])
mask = re.compile(r'^(mask_apply|mask_fill|mask_accept|mask_reset|cst_mask|cst_advance\w*)$')
gen = sum(full.values()) - sum(one.values())
m = sum(v for k, v in full.items() if mask.match(k)) - sum(v for k, v in one.items() if mask.match(k))
print(f"perf: generation {gen} samples, mask stage {m} samples: {100 * m / max(gen, 1):.2f}% of the generation")
PY
fi
