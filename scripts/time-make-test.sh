#!/usr/bin/env bash
# Time each stage of `make test` (wall and CPU seconds, CPU counting every
# child) and list each ctest stage's five longest tests, so the budget in
# docs/RELIABILITY.md ("How long make test takes") can be rechecked on a
# quiet machine. Stops at the first failing stage, with its exit status.
#   usage: scripts/time-make-test.sh [STAGE...]   (default: the five of make test)
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(test-release test-asan test-tsan test-fuzz test-aarch64)
log="$(mktemp -d)"
trap 'rm -rf "$log"' EXIT
printf '%-14s %8s %8s\n' stage wall_s cpu_s >"$log/table"
for s in "${stages[@]}"; do
  echo "== make $s"
  rc=0
  # bash's time: wall, then user and system CPU of every child; make's own stderr goes to fd 3
  TIMEFORMAT='%R %U %S'
  { time make --no-print-directory "$s" 2>&3 || rc=$?; } 3>&2 2>"$log/$s.time"
  read -r wall user sys < <(tail -1 "$log/$s.time") || true
  awk -v s="$s" -v w="$wall" -v u="$user" -v k="$sys" 'BEGIN { printf "%-14s %8.0f %8.0f\n", s, w, u + k }' >>"$log/table"
  [ "$rc" -eq 0 ] || { cat "$log/table"; echo "make $s failed (exit $rc)"; exit "$rc"; }
done
cat "$log/table"
for d in build build-asan build-tsan build-aarch64; do
  f="$d/Testing/Temporary/LastTest.log"
  [ -f "$f" ] || continue
  echo "-- $d, longest tests (s):"
  awk '/^[0-9]+\/[0-9]+ Testing: /{name=$3} /^Test time =/{print $4, name}' "$f" | sort -rn | head -5
done
