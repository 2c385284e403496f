#!/usr/bin/env bash
# Run every libFuzzer target in BUILD_DIR for SECS seconds, seeded from
# fuzz/corpus/<target>/ (committed, hand-made inputs). New inputs found go to a
# scratch corpus so the committed one stays small. Fails on any crash.
set -euo pipefail
build="$1"; secs="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
shopt -s nullglob
n=0
for bin in "$root/$build"/fuzz_*; do
  [ -x "$bin" ] || continue
  name="$(basename "$bin")"
  seeds="$root/fuzz/corpus/$name"
  scratch="$(mktemp -d)"
  echo "fuzz: $name for ${secs}s"
  args=(-max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=0)
  [ -f "$root/fuzz/$name.dict" ] && args+=(-dict="$root/fuzz/$name.dict")
  if [ -d "$seeds" ]; then
    "$bin" "${args[@]}" "$scratch" "$seeds" 2>"$scratch.log" || { tail -40 "$scratch.log"; exit 1; }
  else
    "$bin" "${args[@]}" "$scratch" 2>"$scratch.log" || { tail -40 "$scratch.log"; exit 1; }
  fi
  grep -E '^#[0-9]+.*DONE|Done [0-9]+ runs' "$scratch.log" | tail -1 || true
  rm -rf "$scratch" "$scratch.log"
  n=$((n+1))
done
echo "fuzz: $n targets ran clean"
