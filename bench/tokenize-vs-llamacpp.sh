#!/usr/bin/env bash
# Tokenizer speed: whole runs (process start, vocabulary load, tokenize, print
# ids) of `brisk tokenize -f` against llama.cpp's `llama-tokenize -f` on the
# 1 MiB mixed-text file from scripts/gen-mixed-text.py, for the llama-bpe and
# qwen2 vocabularies. Each run is repeated; the median wall time is reported.
# The ids of both must be identical. Exits 1 if brisk is slower on any vocabulary.
#
#   bash bench/tokenize-vs-llamacpp.sh [BRISK] [SHARED_DIR] [PEER_BIN_DIR] [RUNS]
#
# Defaults: build/brisk, ../shared, ~/.cache/brisk-peer/bin, 7 runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="${1:-$root/build/brisk}"
shared="${2:-$root/../shared}"
peer="${3:-$HOME/.cache/brisk-peer/bin}"
runs="${4:-7}"
vocabs=(llama-bpe qwen2)

for f in "$brisk" "$peer/llama-tokenize"; do
  [ -x "$f" ] || { echo "bench: $f not found (build brisk / the peer first)" >&2; exit 2; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
text="$tmp/mixed.txt"
/usr/bin/python3 "$root/scripts/gen-mixed-text.py" "$shared" > "$text"
export LD_LIBRARY_PATH="$peer${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# wall seconds of one run of "$@" with stdout to $tmp/out
wall() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > "$tmp/out"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}

median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }

echo "text: $(wc -c < "$text") bytes (scripts/gen-mixed-text.py), $runs runs each, median wall time"
echo "host: $(nproc) CPUs, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-10s %10s %12s %9s %8s\n' vocab tokens llama.cpp brisk speedup
status=0
for v in "${vocabs[@]}"; do
  model="$shared/vocab/ggml-vocab-$v.gguf"
  ref_cmd=("$peer/llama-tokenize" -m "$model" -f "$text" --ids --no-bos --no-escape --no-parse-special --log-disable)
  our_cmd=("$brisk" tokenize -m "$model" -f "$text" --ids --no-bos)
  # parity first (also warms the page cache for both)
  "${ref_cmd[@]}" | tr -d '[],' | tr -s ' ' | sed 's/^ //' > "$tmp/ref.ids"
  "${our_cmd[@]}" > "$tmp/our.ids"
  if ! cmp -s "$tmp/ref.ids" "$tmp/our.ids"; then
    echo "bench: $v: brisk's ids differ from llama-tokenize's" >&2
    status=1
  fi
  : > "$tmp/t.ref"; : > "$tmp/t.our"
  for ((i = 0; i < runs; i++)); do   # interleaved, so both see the same machine load
    wall "${ref_cmd[@]}" >> "$tmp/t.ref"
    wall "${our_cmd[@]}" >> "$tmp/t.our"
  done
  r=$(median < "$tmp/t.ref"); o=$(median < "$tmp/t.our")
  printf '%-10s %10d %10ss %8ss %7.2fx\n' "$v" "$(wc -w < "$tmp/our.ids")" "$r" "$o" "$(awk -v a="$r" -v b="$o" 'BEGIN { print a / b }')"
  if awk -v a="$r" -v b="$o" 'BEGIN { exit !(b > a) }'; then status=1; fi
done
exit $status
