#!/usr/bin/env bash
# isa-ab: two of brisk's kernel tables on the same models, alternating, one
# repetition each per round, so load drifts hit both alike (no peer needed).
#   bench/isa-ab.sh [-b BRISK] [-r ROUNDS] [-t THREADS] [-p N] [-n N] ISA_A ISA_B MODEL.gguf...
# Prints one line per run: model, table, round, pp and tg t/s (brisk bench -r 1 --no-roofline).
# Example (issue #17's "avx2-vnni at least as fast as avx2"; docs/PERFORMANCE.md, session 23):
#   bench/isa-ab.sh -r 3 avx2 avx2-vnni /tmp/m/llama-3.2-1b-Q4_0.gguf /tmp/m/qwen2.5-0.5b-Q4_K_M.gguf
set -euo pipefail
BRISK=build/brisk ROUNDS=3 THREADS=2 NP=512 NG=128
while getopts "b:r:t:p:n:h" o; do
  case $o in
    b) BRISK=$OPTARG ;; r) ROUNDS=$OPTARG ;; t) THREADS=$OPTARG ;; p) NP=$OPTARG ;; n) NG=$OPTARG ;;
    *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 3 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
A=$1 B=$2
shift 2
for m in "$@"; do
  [ -s "$m" ] || { echo "isa-ab: $m: no such model" >&2; exit 1; }
  for r in $(seq 1 "$ROUNDS"); do
    for isa in "$A" "$B"; do
      line=$("$BRISK" bench -m "$m" -p "$NP" -n "$NG" -t "$THREADS" -r 1 --isa "$isa" --no-roofline 2>/dev/null |
             awk -F'|' '/ pp| tg/ { gsub(/ /, "", $7); gsub(/ /, "", $8); sub(/±.*/, "", $8); printf "%s %s  ", $7, $8 }')
      [ -n "$line" ] || { echo "isa-ab: brisk bench --isa $isa failed on $m" >&2; exit 1; }
      echo "$(basename "$m" .gguf) $isa round $r: $line"
    done
  done
done
