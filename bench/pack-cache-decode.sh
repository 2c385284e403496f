#!/usr/bin/env bash
# pack-cache-decode: does decode lose speed when the packed weights come from
# the pack cache (a read-only file mapping) instead of anonymous memory with
# transparent huge pages? Alternates `brisk bench -p 0 -n N` without and with
# --pack-cache, ROUNDS times, and prints each tg and the median ratio; then
# shows how the cache file is mapped in a running process (FilePmdMapped in
# /proc/PID/smaps of a `brisk serve` on the model: 2 MiB page-table entries,
# as the anonymous copies get from THP).
#
#   bench/pack-cache-decode.sh -m MODEL [-r ROUNDS] [-n TOKENS] [-t THREADS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BRISK=${BRISK:-$ROOT/build/brisk}
ROUNDS=3 N=32 THREADS=2 MODEL=
while getopts "m:r:n:t:" o; do
  case $o in
    m) MODEL=$OPTARG ;; r) ROUNDS=$OPTARG ;; n) N=$OPTARG ;; t) THREADS=$OPTARG ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
[ -n "$MODEL" ] || { sed -n '2,10p' "$0"; exit 2; }
OUT=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$OUT"' EXIT
mkdir -p "$OUT/pack"
tg() {   # prints tg t/s of one bench run; extra args after the first
  "$BRISK" bench -m "$MODEL" -p 0 -n "$N" -r 1 -t "$THREADS" --no-roofline -o json "$@" 2>"$OUT/err" |
    grep -o '"avg_ts": *[0-9.]*' | head -1 | grep -o '[0-9.]*$'
}
tgc() {  # tg with the cache, which must have been used
  local v
  v=$(tg --pack-cache "$OUT/pack")
  grep -q 'pack cache: used' "$OUT/err" || { echo "pack-cache-decode: the cache was not used: $(cat "$OUT/err")" >&2; exit 1; }
  echo "$v"
}
echo "# pack-cache-decode: $(basename "$MODEL"), tg$N, threads $THREADS, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
tg --pack-cache "$OUT/pack" >/dev/null   # writes the cache
echo "| round | tg t/s (repacked) | tg t/s (--pack-cache) | ratio |"
echo "| ---: | ---: | ---: | ---: |"
: >"$OUT/ratios"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then a=$(tg); b=$(tgc); else b=$(tgc); a=$(tg); fi
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f\n", b / a }')
  echo "$ratio" >>"$OUT/ratios"
  echo "| $r | $a | $b | $ratio |"
done
echo "median ratio (cache / repacked): $(sort -n "$OUT/ratios" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"

# how the cache is mapped in a live process
if "$BRISK" serve --help >/dev/null 2>&1; then
  "$BRISK" serve -m "$MODEL" --port 0 -c 256 --pack-cache "$OUT/pack" >"$OUT/srv.out" 2>"$OUT/srv.err" &
  srv=$!
  for _ in $(seq 1 300); do grep -q 'listening on' "$OUT/srv.err" 2>/dev/null && break; sleep 0.1; done
  awk '/brisk-pack/ { on = 1; print; next } on && /^(Rss|FilePmdMapped):/ { print "  " $0 } on && /^VmFlags/ { on = 0 }' "/proc/$srv/smaps"
  kill "$srv"; wait "$srv" 2>/dev/null || true; srv=
fi
