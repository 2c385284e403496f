#!/usr/bin/env bash
# startup: the whole-process wall time of `brisk run -n 1` against
# `llama-completion -n 1 -no-cnv` on the same model file with a warm page
# cache: load, context, a short prompt, one token, exit. Each round runs
# brisk (repacking at load), brisk with --pack-cache (the packed layout mapped
# from a cache file) and llama.cpp, in an order that rotates, so load from
# other processes hits all alike; the result is the median of the per-round
# ratios to llama.cpp. Before the rounds, one timed brisk run writes the pack
# cache (the cold build: repack, hash the model, write and fsync the file).
#
#   bench/startup.sh [-m MODEL] [-r ROUNDS] [-t THREADS] [-c CTX] [-s SHAPE]
#
# Without -m the model is a synthetic SHAPE (default llama-3.2-1b) Q4_K_M in
# $BRISK_BENCH_CACHE (default ~/.cache/brisk-bench), made the way
# bench/vs-llamacpp.sh makes it: brisk synth writes F16, the peer's
# llama-quantize converts it. Both get -c CTX (default 4096, brisk's own
# default; llama-completion's default is the training context, whose KV cache
# would dominate its time), greedy sampling and the same prompt. The peer is
# ~/.cache/brisk-peer/bin (PEER=dir overrides it).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BRISK=${BRISK:-$ROOT/build/brisk}
PEER=${PEER:-$HOME/.cache/brisk-peer/bin}
CACHE=${BRISK_BENCH_CACHE:-$HOME/.cache/brisk-bench}
ROUNDS=7 THREADS=2 CTX=4096 SHAPE=llama-3.2-1b MODEL=
while getopts "m:r:t:c:s:" o; do
  case $o in
    m) MODEL=$OPTARG ;; r) ROUNDS=$OPTARG ;; t) THREADS=$OPTARG ;; c) CTX=$OPTARG ;; s) SHAPE=$OPTARG ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
  esac
done
[ -x "$BRISK" ] || { echo "startup: $BRISK not built (run make build, or set BRISK=path/to/brisk)" >&2; exit 1; }
[ -x "$PEER/llama-completion" ] || { echo "startup: no llama-completion in $PEER (run ../shared/tools/peer/setup.sh)" >&2; exit 1; }
export LD_LIBRARY_PATH="$PEER${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

if [ -z "$MODEL" ]; then
  mkdir -p "$CACHE"
  MODEL="$CACHE/$SHAPE-Q4_K_M.gguf"
  if [ ! -s "$MODEL" ]; then
    f16="$CACHE/$SHAPE-F16.gguf"
    [ -s "$f16" ] || { "$BRISK" synth --shape "$SHAPE" --type F16 -o "$f16.tmp" && mv "$f16.tmp" "$f16"; }
    "$PEER/llama-quantize" "$f16" "$MODEL.tmp" Q4_K_M >"$OUT/quantize.log" 2>&1 || { cat "$OUT/quantize.log" >&2; exit 1; }
    mv "$MODEL.tmp" "$MODEL"
  fi
fi
PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time"

now() { date +%s%N; }
run_brisk() { "$BRISK" run -m "$MODEL" -p "$PROMPT" -n 1 -t "$THREADS" -c "$CTX" --temp 0 >/dev/null 2>"$OUT/brisk.err"; }
run_cached() { "$BRISK" run -m "$MODEL" -p "$PROMPT" -n 1 -t "$THREADS" -c "$CTX" --temp 0 --pack-cache "$OUT/pack" >/dev/null 2>"$OUT/brisk.err"; }
run_peer() { "$PEER/llama-completion" -m "$MODEL" -p "$PROMPT" -n 1 -t "$THREADS" -c "$CTX" --temp 0 -no-cnv >/dev/null 2>"$OUT/peer.err" </dev/null; }
timed() {   # prints the wall seconds of "$@"
  local t0 t1
  t0=$(now)
  "$@" || { echo "startup: $1 failed:" >&2; cat "$OUT"/*.err >&2; exit 1; }
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}

echo "# startup: $(basename "$MODEL") ($(( $(stat -c %s "$MODEL") / 1048576 )) MiB), threads $THREADS, -c $CTX, $ROUNDS rounds"
echo "# brisk $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet -- src || echo '+dirty'), peer $({ "$PEER/llama-completion" --version 2>&1 || true; } | grep -m1 -o 'version: [^ ]*' || echo unknown)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$MODEL" >/dev/null   # the page cache holds the file: a warm start
run_brisk; run_peer       # one untimed round each (the binaries and libraries into the cache too)
mkdir -p "$OUT/pack"
cold=$(timed run_cached)
echo "# cold build of the pack cache (repack, model hash, write, fsync): $cold s; $(grep -o 'pack cache: .*' "$OUT/brisk.err")"
run_cached; grep -q 'pack cache: used' "$OUT/brisk.err" || { echo "startup: the pack cache was not used:" >&2; cat "$OUT/brisk.err" >&2; exit 1; }
echo "| round | brisk s | brisk load ms | brisk --pack-cache s | its load ms | llama.cpp s | brisk / llama.cpp | cached / llama.cpp |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
: >"$OUT/ratios"; : >"$OUT/cratios"; : >"$OUT/b"; : >"$OUT/k"; : >"$OUT/p"
loadms() { sed -n 's/.*brisk run: load \([0-9.]*\) ms.*/\1/p' "$OUT/brisk.err"; }
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in
    1) b=$(timed run_brisk); bl=$(loadms); k=$(timed run_cached); kl=$(loadms); p=$(timed run_peer) ;;
    2) p=$(timed run_peer); b=$(timed run_brisk); bl=$(loadms); k=$(timed run_cached); kl=$(loadms) ;;
    0) k=$(timed run_cached); kl=$(loadms); p=$(timed run_peer); b=$(timed run_brisk); bl=$(loadms) ;;
  esac
  ratio=$(awk -v b="$b" -v p="$p" 'BEGIN { printf "%.3f\n", b / p }')
  cratio=$(awk -v b="$k" -v p="$p" 'BEGIN { printf "%.3f\n", b / p }')
  echo "$ratio" >>"$OUT/ratios"; echo "$cratio" >>"$OUT/cratios"; echo "$b" >>"$OUT/b"; echo "$k" >>"$OUT/k"; echo "$p" >>"$OUT/p"
  echo "| $r | $b | $bl | $k | $kl | $p | $ratio | $cratio |"
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median: brisk $(median "$OUT/b") s, brisk --pack-cache $(median "$OUT/k") s, llama.cpp $(median "$OUT/p") s"
echo "median of each round's ratio: brisk / llama.cpp **$(median "$OUT/ratios")**, brisk --pack-cache / llama.cpp **$(median "$OUT/cratios")**"
