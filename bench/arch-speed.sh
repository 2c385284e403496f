#!/usr/bin/env bash
# arch-speed.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]: single-model speed of two
# brisk builds side by side (issue #16: the architecture table must not slow
# the existing families down). Alternating pairs (base, new, base, new ...) of
# `brisk bench -p 128 -n 32 -r 2 -t 2 --no-roofline -o json`; prints each
# pair's pp and tg tokens/s and the median new/base ratio of each.
# Default model: /tmp/l1b-q4_0.gguf (make one: build/brisk synth --shape
# llama-3.2-1b --type Q4_0 -o /tmp/l1b-q4_0.gguf).
set -euo pipefail
base="${1:?usage: arch-speed.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]}"
new="${2:?usage: arch-speed.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]}"
model="${3:-/tmp/l1b-q4_0.gguf}"
pairs="${4:-6}"
run() {   # prints "pp tg" (tokens/s)
  "$1" bench -m "$model" -p 128 -n 32 -r 2 -t 2 --no-roofline -o json 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)
pp = [r["avg_ts"] for r in rows if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0]
tg = [r["avg_ts"] for r in rows if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0]
print(pp[0], tg[0])'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$pairs"); do
  b=$(run "$base"); n=$(run "$new")
  echo "pair $i: base pp/tg $b   new pp/tg $n"
  echo "$b $n" >> "$out"
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
pp = statistics.median(r[2] / r[0] for r in rows)
tg = statistics.median(r[3] / r[1] for r in rows)
print(f"median new/base over {len(rows)} pairs: pp {pp:.3f}  tg {tg:.3f}")
PY
