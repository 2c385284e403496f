#!/usr/bin/env bash
# Repacking at load on the thread pool gives the same bytes as one thread:
# `brisk logits` of every golden model (tests/data/golden*, and the shared
# golden set when present: every quantized type) with the weights packed on
# one thread must equal, byte for byte, the logits with them packed by 3
# workers (BRISK_PACK_PARALLEL_MIN_BYTES=0 puts even these tiny models on the
# pool; 3 workers split the chunks unevenly). The one-thread path is the one
# test_golden and test_kernels check against llama.cpp and ref. Also: a bad
# BRISK_PACK_PARALLEL_MIN_BYTES is refused naming it.
set -u
brisk="$1"; shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

dirs=("$root"/tests/data/golden*)
[ -n "$shared" ] && [ -d "$shared/golden" ] && dirs+=("$shared/golden")
n=0
for dir in "${dirs[@]}"; do
  tok="$dir/tokens64.i32"
  [ -f "$tok" ] || continue
  for m in "$dir"/*.gguf; do
    s=$(basename "$m" .gguf)
    if ! BRISK_THREADS=1 "$brisk" logits -m "$m" --tokens "$tok" -o "$tmp/one.f32" -t 2 2>"$tmp/err"; then
      bad "$s: logits (pack on 1 thread) failed: $(tail -1 "$tmp/err")"; continue
    fi
    if ! BRISK_THREADS=3 BRISK_PACK_PARALLEL_MIN_BYTES=0 "$brisk" logits -m "$m" --tokens "$tok" -o "$tmp/pool.f32" -t 2 2>"$tmp/err"; then
      bad "$s: logits (pack on 3 workers) failed: $(tail -1 "$tmp/err")"; continue
    fi
    if cmp -s "$tmp/one.f32" "$tmp/pool.f32" && [ -s "$tmp/one.f32" ]; then ok; else bad "$s: logits differ between 1-thread and pool packing"; fi
    n=$((n + 1))
  done
done
[ "$n" -gt 0 ] || bad "no golden model found under tests/data/golden*"
echo "$n models: pool-packed logits compared with one-thread-packed"

m="$root/tests/data/golden/qwen2-tiny-Q4_0.gguf"
for v in -1 abc "" 1e; do
  if BRISK_PACK_PARALLEL_MIN_BYTES="$v" "$brisk" logits -m "$m" --tokens "$root/tests/data/golden/tokens64.i32" -o "$tmp/x.f32" 2>"$tmp/err"; then
    bad "BRISK_PACK_PARALLEL_MIN_BYTES='$v' was accepted"
  elif grep -q "BRISK_PACK_PARALLEL_MIN_BYTES='$v' is not a non-negative number" "$tmp/err"; then ok
  else bad "BRISK_PACK_PARALLEL_MIN_BYTES='$v': unexpected message: $(tail -1 "$tmp/err")"; fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
