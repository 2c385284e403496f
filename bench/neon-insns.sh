#!/usr/bin/env bash
# neon-insns: instructions executed per output and weight block (one row, one
# token, one block of the type) by the NEON packed GEMM and by the per-row
# vec_dot path it replaces, counted under qemu-aarch64's instruction trace
# (bench/kernel-insns.c run with R = 1 and R = 3 repetitions of a 16-row x T
# tile; the difference over 2 is the tile). A count of executed instructions,
# not a speed: it needs no ARM hardware, and says nothing about latencies,
# ports or memory.
#   bench/neon-insns.sh [ISA] [TYPES] [TOKENS]
#   ISA: neon-dotprod (default) or neon-i8mm; TYPES default all ten packed
#   ones; TOKENS default "1 4" (decode, one prefill tile). Needs build-aarch64
#   (make build-aarch64), aarch64-linux-gnu-gcc and qemu-aarch64.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ISA=${1:-neon-dotprod}
TYPES=${2:-"Q4_0 Q8_0 Q4_K Q6_K Q5_0 Q5_K Q4_1 Q5_1 Q2_K Q3_K"}
TOKENS=${3:-"1 4"}
LIB=$ROOT/build-aarch64/libbrisk_core.a
[ -f "$LIB" ] || { echo "neon-insns: $LIB missing (make build-aarch64)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LIBS=$(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig pkg-config --libs libpcre2-8 jansson)
# shellcheck disable=SC2086
aarch64-linux-gnu-gcc -O2 -std=c11 -D_GNU_SOURCE -I"$ROOT/src" -I"$ROOT/include" "$ROOT/bench/kernel-insns.c" "$LIB" \
  -lm -lpthread $LIBS -o "$TMP/kernel-insns"
count() {   # mode type T blocks R -> instructions executed by the whole process
  BRISK_ISA=$ISA qemu-aarch64 -cpu max -singlestep -d exec,nochain -D "$TMP/trace" "$TMP/kernel-insns" "$@" >/dev/null
  grep -c '^Trace' "$TMP/trace"
}
printf '%s: instructions per (row, token, weight block), 16-row tile, 1024 columns\n' "$ISA"
printf '| type | T | vec_dot | packed GEMM | vec_dot / packed |\n|---|---:|---:|---:|---:|\n'
for ty in $TYPES; do
  case $ty in Q2_K|Q3_K|Q4_K|Q5_K|Q6_K) blocks=4 ;; *) blocks=32 ;; esac
  for t in $TOKENS; do
    per=()
    for mode in vecdot gemm; do
      c1=$(count $mode "$ty" "$t" $blocks 1)
      c3=$(count $mode "$ty" "$t" $blocks 3)
      per+=("$(awk -v a="$c1" -v b="$c3" -v n=$((16 * t * blocks)) 'BEGIN { printf "%.1f", (b - a) / 2 / n }')")
    done
    printf '| %s | %d | %s | %s | %s |\n' "$ty" "$t" "${per[0]}" "${per[1]}" "$(awk -v a="${per[0]}" -v b="${per[1]}" 'BEGIN { printf "%.2f", a / b }')"
  done
done
