#!/usr/bin/env bash
# cli_quantize: `brisk quantize` end to end: its output hashes equal
# llama-quantize's (tests/data/quantize/cases.sha256, recorded by record.sh),
# whatever the thread count; every bad input is one clear line on stderr and
# leaves nothing at the output path (no partial file, no temp file, an older
# file there untouched). With the peer present it also compares brisk with
# llama-quantize live on llama.cpp's own test-llama-archs fixtures.
# Usage: bash tests/cli_quantize.sh BRISK_BINARY SHARED_DIR
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/tests/data/quantize"
model="$root/models/pycode-target-f16.gguf"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

recorded() { grep " $1\$" "$data/cases.sha256" | cut -d' ' -f1; }
sha() { sha256sum < "$1" | cut -d' ' -f1; }

# expect_hash NAME TAG OUT CMD...: exit 0 and OUT's sha256 is case TAG's recorded one
expect_hash() {
  local name="$1" tag="$2" out="$3"; shift 3
  "$@" > "$tmp/stdout" 2> "$tmp/err" || { fail "$name: exit $?: $(cat "$tmp/err")"; return; }
  local want; want="$(recorded "$tag")"
  [ -n "$want" ] || { fail "$name: no recorded hash for $tag"; return; }
  [ "$(sha "$out")" = "$want" ] && ok || fail "$name: output differs from llama-quantize's (case $tag)"
}

# expect_err NAME CODE PATTERN OUT CMD...: exit CODE, PATTERN on one stderr line, and OUT
# left as it was (absent, or holding 'old'), with no temp file beside it
expect_err() {
  local name="$1" code="$2" pat="$3" out="$4"; shift 4
  [ -d "$out" ] || [ -p "$out" ] || rm -f "$out"
  [ "$name" = "${name#keep:}" ] || echo old > "$out"
  "$@" > "$tmp/stdout" 2> "$tmp/err"; local rc=$?
  if [ $rc -ne "$code" ]; then fail "$name: exit $rc, want $code: $(cat "$tmp/err")"; return; fi
  if ! grep -q -- "$pat" "$tmp/err"; then fail "$name: stderr lacks '$pat': $(cat "$tmp/err")"; return; fi
  if [ "$(wc -l < "$tmp/err")" -ne 1 ]; then fail "$name: error is not one line: $(cat "$tmp/err")"; return; fi
  if [ "$name" != "${name#keep:}" ]; then
    [ "$(cat "$out" 2>/dev/null)" = old ] || { fail "$name: the existing output was changed"; return; }
  elif [ -e "$out" ] && [ ! -d "$out" ] && [ ! -p "$out" ]; then
    fail "$name: left a file at $out"; return
  fi
  if ls "$out".tmp.* > /dev/null 2>&1; then fail "$name: left a temp file"; return; fi
  ok
}

"$brisk" quantize --help > "$tmp/out" 2>&1 && grep -q "usage: brisk quantize" "$tmp/out" && grep -q -- "--allow-requantize" "$tmp/out" \
  && ok || fail "--help"
"$brisk" --help | grep -q "quantize" && ok || fail "quantize listed in brisk --help"

# ---- byte-identical to llama-quantize, through the command line ----------------
q="$tmp/q.gguf"
quick="${BRISK_TEST_QUICK:-}"   # the sanitizer runs: fewer full quantizations, no live comparison
expect_hash "Q4_K_M" py-Q4_K_M "$q" "$brisk" quantize "$model" "$q" Q4_K_M
expect_hash "F32" py-F32 "$tmp/f32.gguf" "$brisk" quantize "$model" "$tmp/f32.gguf" F32
expect_hash "Q8_0" py-Q8_0 "$tmp/q8.gguf" "$brisk" quantize "$model" "$tmp/q8.gguf" Q8_0
if [ -z "$quick" ]; then
expect_hash "Q4_K alias, 1 thread" py-Q4_K_M "$q" "$brisk" quantize -t 1 "$model" "$q" q4_k
expect_hash "Q2_K, 3 threads" py-Q2_K "$q" "$brisk" quantize -t 3 "$model" "$q" Q2_K
expect_hash "Q6_K by number, threads as a 4th argument" py-Q6_K "$q" "$brisk" quantize "$model" "$q" 18 2
expect_hash "from F32" py32-Q5_K_M "$q" "$brisk" quantize "$tmp/f32.gguf" "$q" Q5_K_M
expect_hash "--tensor-type (lowercased, first match wins)" py-tt "$q" "$brisk" quantize --tensor-type attn_q=q8_0 \
  --tensor-type 'blk\.[0-2]\.ffn_down=q2_K' --tensor-type ATTN_V=bf16 "$model" "$q" Q4_K_M
expect_hash "--override-kv" py-kv "$q" "$brisk" quantize --override-kv general.name=str:hello \
  --override-kv llama.context_length=int:-1024 --override-kv test.x=float:1.5 --override-kv general.file_type=int:99 \
  --override-kv test.b=bool:true --override-kv general.name=str:again "$model" "$q" Q4_0
expect_hash "--pure" py-pure "$q" "$brisk" quantize --pure "$model" "$q" Q4_K_M
expect_hash "--leave-output-tensor" py-leave "$q" "$brisk" quantize --leave-output-tensor "$model" "$q" Q5_K_M
expect_hash "--output-tensor-type" py-ott "$q" "$brisk" quantize --output-tensor-type f16 "$model" "$q" Q4_0
expect_hash "--token-embedding-type" py-tet "$q" "$brisk" quantize --token-embedding-type q8_0 "$model" "$q" Q3_K_M
fi
expect_hash "--allow-requantize" py-req-q8 "$q" "$brisk" quantize --allow-requantize "$tmp/q8.gguf" "$q" Q4_K_M
# a symlinked output: the file it names is replaced, the link stays
echo old > "$tmp/linked.gguf"
ln -s "$tmp/linked.gguf" "$tmp/link.gguf"
expect_hash "through a symlink" py-Q5_0 "$tmp/linked.gguf" "$brisk" quantize "$model" "$tmp/link.gguf" Q5_0
[ -L "$tmp/link.gguf" ] && ok || fail "the symlink was replaced"
"$brisk" quantize "$model" - Q4_0 2> /dev/null > "$tmp/stdout.gguf" && [ "$(sha "$tmp/stdout.gguf")" = "$(recorded py-Q4_0)" ] \
  && ok || fail "'-' writes the file to stdout"

# ---- bad input: one line, nothing left behind -------------------------------------
o="$tmp/out.gguf"
expect_err "no arguments" 2 "expected IN.gguf OUT.gguf TYPE" "$o" "$brisk" quantize
expect_err "unknown type" 2 "unknown or unsupported type 'IQ2_XXS'" "$o" "$brisk" quantize "$model" "$o" IQ2_XXS
expect_err "a tensor type is not a file type" 2 "unsupported type 'MXFP4'" "$o" "$brisk" quantize "$model" "$o" MXFP4
expect_err "missing input" 1 "$tmp/none.gguf" "$o" "$brisk" quantize "$tmp/none.gguf" "$o" Q4_0
printf 'hello, not a model\n' > "$tmp/text.gguf"
expect_err "keep: not a GGUF" 1 "text.gguf" "$o" "$brisk" quantize "$tmp/text.gguf" "$o" Q4_0
head -c 3000000 "$model" > "$tmp/trunc.gguf"
expect_err "keep: truncated" 1 "trunc.gguf" "$o" "$brisk" quantize "$tmp/trunc.gguf" "$o" Q4_0
cp "$model" "$tmp/same.gguf"
expect_err "same file" 1 "input and output are the same file" "$tmp/same.gguf.x" "$brisk" quantize "$tmp/same.gguf" "$tmp/same.gguf" Q4_0
cmp -s "$model" "$tmp/same.gguf" && ok || fail "same file: the input was changed"
ln -s "$tmp/same.gguf" "$tmp/same-link.gguf"
expect_err "same file through a link" 1 "the same file" "$tmp/x.gguf" "$brisk" quantize "$tmp/same.gguf" "$tmp/same-link.gguf" Q4_0
mkdir "$tmp/dir.gguf"
expect_err "output is a directory" 1 "is a directory" "$tmp/dir.gguf" "$brisk" quantize "$model" "$tmp/dir.gguf" Q4_0
mkfifo "$tmp/fifo.gguf"
expect_err "output is a FIFO" 1 "is a FIFO" "$tmp/fifo.gguf" "$brisk" quantize "$model" "$tmp/fifo.gguf" Q4_0
[ -p "$tmp/fifo.gguf" ] && ok || fail "the FIFO was replaced"
expect_err "keep: requantize refused" 1 "pass --allow-requantize" "$o" "$brisk" quantize "$tmp/q8.gguf" "$o" Q4_0
expect_err "--imatrix missing" 1 "im.dat: cannot open" "$o" "$brisk" quantize --imatrix "$tmp/im.dat" "$model" "$o" Q4_0
expect_err "--tensor-type without =" 2 "expected REGEX=TYPE" "$o" "$brisk" quantize --tensor-type attn_q "$model" "$o" Q4_0
expect_err "--tensor-type bad type" 2 "unsupported type 'q9_0'" "$o" "$brisk" quantize --tensor-type attn_q=q9_0 "$model" "$o" Q4_0
expect_err "keep: --tensor-type bad regex" 1 "not a regular expression" "$o" "$brisk" quantize --tensor-type 'attn_(q=q8_0' "$model" "$o" Q4_0
expect_err "--override-kv bad" 2 "--override-kv 'x=int:1e3'" "$o" "$brisk" quantize --override-kv x=int:1e3 "$model" "$o" Q4_0
expect_err "--output-tensor-type bad" 2 "--output-tensor-type: unknown or unsupported type 'iq3_s'" "$o" \
  "$brisk" quantize --output-tensor-type iq3_s "$model" "$o" Q4_0
expect_err "bad thread count" 2 "N_THREADS" "$o" "$brisk" quantize "$model" "$o" Q4_0 zero
# a NaN in the last tensor: the error comes after most of the file was written, and still nothing is left
if command -v python3 > /dev/null; then
  python3 - "$tmp/f32.gguf" "$tmp/nan.gguf" <<'EOF'
import struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = bytearray(open(src, 'rb').read())
# the last tensor's data ends the file (padding aside); its last float becomes a NaN
end = len(b)
while b[end - 4:end] == b'\0\0\0\0': end -= 4
b[end - 4:end] = struct.pack('<I', 0x7fc00000)
open(dst, 'wb').write(b)
EOF
  expect_err "keep: NaN weight" 1 "NaN or infinite" "$o" "$brisk" quantize "$tmp/nan.gguf" "$o" Q4_0
else
  echo "note: python3 absent; the NaN-input check is left out"
fi

# ---- llama.cpp's own fixtures, live against llama-quantize (peer only) -------------
peer="${BRISK_PEER:-$HOME/.cache/brisk-peer}"
if [ -n "$quick" ]; then
  echo "note: BRISK_TEST_QUICK: the live comparison with llama-quantize runs in the release suite only"
elif [ -x "$peer/bin/test-llama-archs" ] && [ -x "$peer/bin/llama-quantize" ]; then
  fx="$tmp/fx"; mkdir -p "$fx"
  n=0
  for a in llama qwen3 qwen3moe gpt-oss deepseek2 gemma3 phi3; do
    "$peer/bin/test-llama-archs" -a "^$a\$" -s 1 -d 0.4 -o "$fx" > /dev/null 2>&1 || { fail "test-llama-archs -a $a"; continue; }
  done
  for f in "$fx"/*.gguf; do
    b="$(basename "$f" .gguf)"
    for t in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE; do
      "$peer/bin/llama-quantize" "$f" "$fx/L.gguf" $t 2 > /dev/null 2>&1 || { fail "llama-quantize $b $t"; continue; }
      "$brisk" quantize -t 2 "$f" "$fx/B.gguf" $t 2> "$tmp/err" || { fail "$b $t: $(cat "$tmp/err")"; continue; }
      cmp -s "$fx/L.gguf" "$fx/B.gguf" && ok || fail "fixture $b $t: differs from llama-quantize's"
      n=$((n + 1))
    done
  done
  echo "compared $n fixture quantizations with llama-quantize live"
  [ $n -gt 0 ] || fail "no fixture compared"
else
  echo "note: the peer is absent; the live comparison on test-llama-archs fixtures is skipped (tests/data/quantize/fixtures.sha256 holds today's)"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
