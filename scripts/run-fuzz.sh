#!/usr/bin/env bash
# Run every libFuzzer target in BUILD_DIR for SECS seconds, seeded from
# fuzz/corpus/<target>/ (committed, hand-made inputs). New inputs found go to a
# scratch corpus so the committed one stays small. Fails on any crash.
#
# usage: run-fuzz.sh BUILD_DIR SECS [JOBS]
# JOBS targets run at the same time (default 1; make test-fuzz passes the
# core count). A libFuzzer process is single-threaded, so on N cores N targets
# at once each get the full SECS of one core: the same fuzzing per target in
# 1/N of the wall time. Every target's exit status is checked; the log of
# each failing one is printed and the script fails.
set -euo pipefail
build="$1"; secs="$2"; jobs="${3:-1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: JOBS must be a positive integer, got '$jobs'" >&2; exit 2; }
shopt -s nullglob
work="$(mktemp -d)"
# an interrupted run leaves no fuzzer behind
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# one target: its scratch corpus, its log, its exit status in $work/NAME.rc
run_target() {
  local bin="$1" name seeds scratch
  name="$(basename "$bin")"
  seeds="$root/fuzz/corpus/$name"
  scratch="$work/$name.corpus"
  mkdir -p "$scratch"
  local args=(-max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=0)
  [ -f "$root/fuzz/$name.dict" ] && args+=(-dict="$root/fuzz/$name.dict")
  local dirs=("$scratch")
  [ -d "$seeds" ] && dirs+=("$seeds")
  local rc=0
  "$bin" "${args[@]}" "${dirs[@]}" >"$work/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$name.rc"
  rm -rf "$scratch"
}

targets=()
for bin in "$root/$build"/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] && targets+=("$bin")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no fuzz_* targets in $build" >&2; exit 1; }

# batches of JOBS targets: every target runs exactly SECS, so batches stay balanced
failed=0
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for bin in "${batch[@]}"; do
    echo "fuzz: $(basename "$bin") for ${secs}s"
    run_target "$bin" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  for bin in "${batch[@]}"; do
    name="$(basename "$bin")"
    rc="$(cat "$work/$name.rc" 2>/dev/null || echo missing)"
    if [ "$rc" != 0 ]; then
      echo "fuzz: $name FAILED (exit $rc)"
      tail -40 "$work/$name.log" 2>/dev/null || true
      failed=$((failed + 1))
    else
      echo "fuzz: $name: $(grep -E '^#[0-9]+.*DONE|Done [0-9]+ runs' "$work/$name.log" | tail -1 || true)"
    fi
  done
done
if [ "$failed" -gt 0 ]; then
  echo "fuzz: $failed of ${#targets[@]} targets failed"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran clean"
