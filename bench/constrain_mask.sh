#!/usr/bin/env bash
# MaskBench mask times of two brisk builds, in alternating runs (A, B, A, B ...) on the CPU clock, so
# both see the same load: bench/constrain_mask.sh BRISK_A BRISK_B [FIRST_N] [ROUNDS]. Prints one line
# per run (passing, invalid accepted, TBM p50/p90/p99, TTFM p50) and the B/A ratio of the p99 medians.
set -eu
a="$1"; b="$2"; first="${3:-1000}"; rounds="${4:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
vocab="$root/../shared/vocab/ggml-vocab-llama-bpe.gguf"
data="$root/../shared/constrain/maskbench-dev.jsonl.gz"
[ -f "$vocab" ] && [ -f "$data" ] || { echo "the shared MaskBench files are absent"; exit 77; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  for side in A B; do
    bin="$a"; [ "$side" = B ] && bin="$b"
    "$bin" maskbench -m "$vocab" "$data" --clock cpu -o json --first "$first" 2>/dev/null >"$tmp/$side.$r.json"
    python3 - "$tmp/$side.$r.json" "$side" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tbm_us"]
print(f'{sys.argv[2]}: schemas {d["schemas"]} passing {d["passing"]} invalid {d["invalidation_error"]} masks {d["tokens"]} '
      f'TBM p50 {t["p50"]:.1f} p90 {t["p90"]:.1f} p99 {t["p99"]:.1f} us  TTFM p50 {d["ttfm_us"]["p50"]:.0f} us')
PY
  done
done
python3 - "$tmp" <<'PY'
import json, sys, glob, statistics
p = {s: statistics.median(json.load(open(f))["tbm_us"]["p99"] for f in glob.glob(f"{sys.argv[1]}/{s}.*.json")) for s in "AB"}
print(f'p99 median A {p["A"]:.0f} us, B {p["B"]:.0f} us, B/A {p["B"] / p["A"]:.2f} (measured under load from other helpers)')
PY
