#!/usr/bin/env bash
# Tokenizer speed: whole runs (process start, vocabulary load, tokenize, print
# ids) of `brisk tokenize -f` against llama.cpp's `llama-tokenize -f` on the
# 1 MiB mixed-text file from scripts/gen-mixed-text.py, for the llama-bpe and
# qwen2 vocabularies. Each run is repeated; the median wall time (and the
# median CPU time, user + system, less sensitive to other load) is reported.
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

# "wall cpu" seconds of one run of "$@" (cpu = user + system), stdout to $tmp/out
timed() {
  local TIMEFORMAT='%R %U %S'
  { time "$@" > "$tmp/out" 2> "$tmp/err"; } 2> "$tmp/time"
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$tmp/time"
}

median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }

echo "text: $(wc -c < "$text") bytes (scripts/gen-mixed-text.py), $runs runs each, medians; load average $(cut -d' ' -f1 /proc/loadavg)"
echo "host: $(nproc) CPUs, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-10s %8s | %11s %9s %8s | %9s %9s\n' vocab tokens "llama.cpp" brisk speedup "cpu llama" "cpu brisk"
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
    timed "${ref_cmd[@]}" >> "$tmp/t.ref"
    timed "${our_cmd[@]}" >> "$tmp/t.our"
  done
  r=$(cut -d' ' -f1 "$tmp/t.ref" | median); o=$(cut -d' ' -f1 "$tmp/t.our" | median)
  rc=$(cut -d' ' -f2 "$tmp/t.ref" | median); oc=$(cut -d' ' -f2 "$tmp/t.our" | median)
  printf '%-10s %8d | %10ss %8ss %7.2fx | %8ss %8ss\n' "$v" "$(wc -w < "$tmp/our.ids")" "$r" "$o" \
    "$(awk -v a="$r" -v b="$o" 'BEGIN { print a / b }')" "$rc" "$oc"
  if awk -v a="$r" -v b="$o" 'BEGIN { exit !(b > a) }'; then status=1; fi
done
exit $status
