#!/usr/bin/env bash
# moe-vs-llama.sh MODEL [PAIRS] [P] [N]: brisk against llama-bench on the same
# file (issue #16's MoE speed lines: synth olmoe-1b-7b, qwen3-30b-a3b), side
# by side: alternating pairs (brisk, llama.cpp, brisk, llama.cpp ...) of
# `bench -p P -n N -r 1 -t 2 -o json` (default pp512 and tg128); prints each
# pair's tokens/s and the median brisk/llama.cpp ratio of pp and tg.
# $BRISK (default build/brisk) and $BRISK_PEER_DIR (default ~/.cache/brisk-peer).
# Make the model with: build/brisk synth --shape olmoe-1b-7b --type Q4_K -o FILE
# (gpt-oss-20b as real releases store it: --shape gpt-oss-20b --type MXFP4_MOE, 12 GB).
# The roofline on active bytes: build/brisk bench -m FILE -p 0 -n 128 -t 2 (its last lines).
set -euo pipefail
model="${1:?usage: moe-vs-llama.sh MODEL [PAIRS] [P] [N]}"
pairs="${2:-3}" p="${3:-512}" n="${4:-128}"
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="${BRISK:-$root/build/brisk}"
peer="${BRISK_PEER_DIR:-$HOME/.cache/brisk-peer}/bin/llama-bench"
[ -x "$peer" ] || { echo "moe-vs-llama: $peer is missing" >&2; exit 77; }
parse() {   # json rows on stdin -> "pp tg" (tokens/s)
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
  b=$("$brisk" bench -m "$model" -p "$p" -n "$n" -r 1 -t 2 --no-roofline -o json 2>/dev/null | parse)
  l=$("$peer" -m "$model" -p "$p" -n "$n" -r 1 -t 2 -o json 2>/dev/null | parse)
  echo "pair $i: brisk pp/tg $b   llama.cpp pp/tg $l"
  echo "$b $l" >> "$out"
done
/usr/bin/python3 - "$out" "$p" "$n" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
pp = statistics.median(r[0] / r[2] for r in rows)
tg = statistics.median(r[1] / r[3] for r in rows)
print(f"median brisk/llama.cpp over {len(rows)} pairs: pp{sys.argv[2]} {pp:.3f}  tg{sys.argv[3]} {tg:.3f}")
PY
