#!/usr/bin/env bash
# isa-logits-cmp: `brisk logits` on every golden model under each kernel table
# this CPU runs (BRISK_ISA=ref, then every other name), each output compared
# byte for byte with ref's. Prints one line per model; exits 1 if any differs.
#   scripts/isa-logits-cmp.sh [golden dirs...]   (default: ../shared/golden tests/data/golden*)
# F32 and BF16 models are reported but do not fail: their vec_dot is not
# bit-identical to ref on any SIMD table (as before the packed AVX2 tables).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BRISK=${BRISK:-$ROOT/build/brisk}
[ -x "$BRISK" ] || { echo "isa-logits-cmp: $BRISK not built" >&2; exit 1; }
DIRS=("$@")
[ ${#DIRS[@]} -gt 0 ] || DIRS=("$ROOT/../shared/golden" "$ROOT"/tests/data/golden*)
ISAS="avx2 avx2-vnni avx512 neon neon-dotprod neon-i8mm"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
bad=0
for dir in "${DIRS[@]}"; do
  tok=$dir/tokens64.i32
  [ -f "$tok" ] || { echo "isa-logits-cmp: $dir: no tokens64.i32, skipped"; continue; }
  for m in "$dir"/*.gguf; do
    s=$(basename "$m" .gguf)
    BRISK_ISA=ref "$BRISK" logits -m "$m" --tokens "$tok" -o "$OUT/ref.f32" -t 2 2>"$OUT/err" || { echo "$s: ref failed: $(tail -1 "$OUT/err")"; bad=1; continue; }
    line="$s:"
    for isa in $ISAS; do
      BRISK_ISA=$isa "$BRISK" logits -m "$m" --tokens "$tok" -o "$OUT/$isa.f32" -t 2 2>"$OUT/err" || continue   # not usable here
      if cmp -s "$OUT/ref.f32" "$OUT/$isa.f32"; then line="$line $isa=same"
      else
        line="$line $isa=DIFF"
        case $s in *-F32|*-BF16) ;; *) bad=1 ;; esac
      fi
    done
    echo "$line"
  done
done
exit $bad
