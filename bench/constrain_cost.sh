#!/usr/bin/env bash
# bench/constrain_cost.sh [MODEL] [ROUNDS]: what a JSON-schema constraint adds to a decode step, brisk
# beside llama.cpp's grammar sampler (llama-completion --json-schema) on the same schema and model,
# runs alternating (brisk plain, brisk constrained, llama plain, llama constrained, ...). MODEL
# defaults to a synthetic llama-3.2-1b Q4_0 written by `brisk synth` (128,256-token vocabulary).
# Prints each run's generation tokens/s and, per engine, the constrained/plain ratio of the medians.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="$root/build/brisk"
peer="${BRISK_PEER:-$HOME/.cache/brisk-peer}/bin/llama-completion"
model="${1:-}"
rounds="${2:-3}"
n=48
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
if [ -z "$model" ]; then
  model="$tmp/l1b-q4_0.gguf"
  "$brisk" synth --shape llama-3.2-1b --type Q4_0 -o "$model" >/dev/null || exit 1
fi
[ -x "$peer" ] || { echo "llama-completion not found at $peer"; exit 1; }
schema='{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":20},"ok":{"type":"boolean"}},"required":["id","name"]}}'
prompt='items = '
brisk_tps() { sed -n 's/.*generated \([0-9]*\) tokens, \([0-9.]*\) tokens\/s.*/\2/p' "$1"; }
peer_tps() { grep -E "eval time" "$1" | grep -v prompt | sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1; }
: >"$tmp/r"
for r in $(seq "$rounds"); do
  "$brisk" run -m "$model" -p "$prompt" -n $n --temp 0 -t 2 --ignore-eos >/dev/null 2>"$tmp/e"; echo "brisk plain $(brisk_tps "$tmp/e")" >>"$tmp/r"
  "$brisk" run -m "$model" -p "$prompt" -n $n --temp 0 -t 2 --json-schema "$schema" >/dev/null 2>"$tmp/e"; echo "brisk json $(brisk_tps "$tmp/e")" >>"$tmp/r"
  "$peer" -m "$model" -p "$prompt" -n $n --temp 0 -t 2 -no-cnv --ignore-eos >/dev/null 2>"$tmp/e" </dev/null; echo "llama plain $(peer_tps "$tmp/e")" >>"$tmp/r"
  "$peer" -m "$model" -p "$prompt" -n $n --temp 0 -t 2 -no-cnv --json-schema "$schema" >/dev/null 2>"$tmp/e" </dev/null; echo "llama json $(peer_tps "$tmp/e")" >>"$tmp/r"
done
cat "$tmp/r"
python3 - "$tmp/r" <<'PY'
import statistics, sys
runs = {}
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) == 3 and p[2]:
        runs.setdefault((p[0], p[1]), []).append(float(p[2]))
for eng in ("brisk", "llama"):
    a, b = runs.get((eng, "plain")), runs.get((eng, "json"))
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{eng}: plain {ma:.2f} tok/s, constrained {mb:.2f} tok/s: a constrained step costs {ma / mb:.3f}x a plain one")
PY
