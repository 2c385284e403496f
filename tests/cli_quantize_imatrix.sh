#!/usr/bin/env bash
# cli_quantize_imatrix: `brisk quantize --imatrix FILE` writes llama-quantize --imatrix's bytes:
# every case of tests/data/imatrix/cases.txt (GGUF and legacy .dat importance matrices, a MoE
# with per-expert rows and the dense pycode-target, the types that fit with importances and a
# few that ignore them; --include-weights/--exclude-weights selections) hashes to what llama-quantize wrote (cases.sha256, recorded by
# record.sh). Bad importance matrices are one clear line, exit 1 and no output file.
# Usage: bash tests/cli_quantize_imatrix.sh BRISK_BINARY [SHARED_DIR]
set -u
brisk="$(realpath "$1")"
root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/tests/data/imatrix"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$brisk" synth --shape qwen3moe-k-tiny --type F32 -o "$tmp/kt-f32.gguf" 2>"$tmp/err" || { echo "synth failed: $(cat "$tmp/err")"; exit 1; }
quick="${BRISK_TEST_QUICK:-}"
cd "$data"   # the imatrix path is recorded in quantize.imatrix.file: give it as when recorded
n=0
while read -r tag model im type extra; do
  [ -z "$tag" ] && continue
  n=$((n + 1))
  [ -n "$quick" ] && [ $((n % 4)) -ne 1 ] && continue   # the sanitizer runs: every fourth case
  case "$model" in kt) m="$tmp/kt-f32.gguf" ;; py) m="$root/models/pycode-target-f16.gguf" ;; esac
  want="$(grep " $tag\$" cases.sha256 | cut -d' ' -f1)"
  # shellcheck disable=SC2086
  if "$brisk" quantize ${extra//,/ } --imatrix "$im" "$m" "$tmp/out.gguf" "$type" 1 >/dev/null 2>"$tmp/err"; then
    got="$(sha256sum < "$tmp/out.gguf" | cut -d' ' -f1)"
    [ -n "$want" ] && [ "$got" = "$want" ] && ok || fail "$tag: output differs from llama-quantize's"
  else
    fail "$tag: $(cat "$tmp/err")"
  fi
done < cases.txt
# the importance matters: the same file without it differs
"$brisk" quantize "$tmp/kt-f32.gguf" "$tmp/plain.gguf" Q4_K_M 1 2>/dev/null
[ "$(sha256sum < "$tmp/plain.gguf" | cut -d' ' -f1)" != "$(grep ' kt-gguf-Q4_K_M$' cases.sha256 | cut -d' ' -f1)" ] && ok ||
  fail "Q4_K_M with and without the imatrix are the same file"
"$brisk" quantize --pure --imatrix py.imatrix.gguf "$root/models/pycode-target-f16.gguf" "$tmp/ds.gguf" Q6_K 1 2>/dev/null
"$brisk" inspect "$tmp/ds.gguf" 2>/dev/null | grep -q 'quantize.imatrix.dataset (str) = "pycode-calibration.txt"' && ok ||
  fail "quantize.imatrix.dataset missing"
# --include-weights / --exclude-weights (the cases above): a selection that keeps nothing writes no
# imatrix keys, as llama-quantize; the two together, or either without --imatrix, are refused
"$brisk" quantize --include-weights no-such-tensor --imatrix py.imatrix.gguf "$root/models/pycode-target-f16.gguf" "$tmp/none.gguf" Q4_K_M 1 2>/dev/null
"$brisk" inspect "$tmp/none.gguf" 2>/dev/null | grep -q 'quantize.imatrix' && fail "an emptied imatrix still wrote its keys" || ok
usage_err() {   # NEEDLE ARGS...
  local needle="$1"; shift
  rm -f "$tmp/u.gguf"
  "$brisk" quantize "$@" "$root/models/pycode-target-f16.gguf" "$tmp/u.gguf" Q4_K_M 1 >/dev/null 2>"$tmp/err"; local rc=$?
  [ $rc -eq 2 ] && grep -q -- "$needle" "$tmp/err" && [ ! -e "$tmp/u.gguf" ] && ok || fail "quantize $*: rc $rc, $(cat "$tmp/err")"
}
usage_err "cannot be used together" --imatrix py.imatrix.gguf --include-weights attn --exclude-weights ffn
usage_err "needs --imatrix" --exclude-weights attn
usage_err "needs --imatrix" --include-weights attn

# bad importance matrices: one line naming the problem, exit 1, nothing written
refused() {   # NAME PATTERN IMATRIX [MODEL]
  local out="$tmp/refused.gguf"
  rm -f "$out"
  "$brisk" quantize --imatrix "$3" "${4:-$tmp/kt-f32.gguf}" "$out" Q4_K_M 1 >/dev/null 2>"$tmp/err"; local rc=$?
  [ $rc -eq 1 ] || { fail "$1: exit $rc: $(cat "$tmp/err")"; return; }
  grep -q -- "$2" "$tmp/err" || { fail "$1: stderr lacks '$2': $(cat "$tmp/err")"; return; }
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || { fail "$1: not one line: $(cat "$tmp/err")"; return; }
  [ -e "$out" ] && { fail "$1: left an output"; return; }
  ls "$tmp" | grep -q 'refused.gguf.tmp' && { fail "$1: left a temporary file"; return; }
  ok
}
corpus="$root/fuzz/corpus/fuzz_imatrix"
refused missing "no-such.imatrix" "$tmp/no-such.imatrix"
refused empty "holds no entries" "$corpus/empty"
refused no-metadata "missing imatrix metadata" "$corpus/gguf-no-meta"
refused only-counts "mismatched sums and counts for 'w'" "$corpus/gguf-only-counts"
refused f16-sums "must be F32" "$corpus/gguf-f16-sums"
refused nan "is not finite" "$corpus/legacy-nan"
refused truncated "values run past the end" "$corpus/legacy-huge-nval"
refused chunk-count-type "imatrix.chunk_count is a str" "$corpus/gguf-chunk-count-str"
# another model's importances: the sizes do not match (llama-quantize refuses that too)
refused wrong-model "imatrix size 192 is different from tensor size 256 for blk.0.attn_k.weight" py.imatrix.gguf

echo "cli_quantize_imatrix: $passes passed, $fails failed"
[ $fails -eq 0 ]
