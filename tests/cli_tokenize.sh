#!/usr/bin/env bash
# cli_tokenize: `brisk tokenize` flags, output formats and errors.
# Usage: bash tests/cli_tokenize.sh BRISK_BINARY SHARED_DIR
# Expected ids come from llama-tokenize (tests/data/vocab/special.tsv).
set -u
brisk="$1"
shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
vocab="$root/tests/data/vocab/ggml-vocab-llama-spm.gguf"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0

ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_out NAME EXPECTED CMD...: stdout must equal EXPECTED and exit 0
expect_out() {
  local name="$1" want="$2"; shift 2
  local got rc
  got="$("$@" 2>"$tmp/err")"; rc=$?
  if [ $rc -ne 0 ]; then fail "$name: exit $rc: $(cat "$tmp/err")"; return; fi
  if [ "$got" != "$want" ]; then fail "$name: got '$got', want '$want'"; return; fi
  ok
}

# expect_err NAME PATTERN CMD...: must exit non-zero with PATTERN on stderr
expect_err() {
  local name="$1" pat="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ]; then fail "$name: exit 0, expected an error"; return; fi
  if ! grep -q -- "$pat" "$tmp/err"; then fail "$name: stderr lacks '$pat': $(cat "$tmp/err")"; return; fi
  if [ "$(wc -l < "$tmp/err")" -ne 1 ]; then fail "$name: error is not one line: $(cat "$tmp/err")"; return; fi
  ok
}

# help
"$brisk" tokenize --help >"$tmp/out" 2>&1 && grep -q "usage: brisk tokenize" "$tmp/out" && ok || fail "--help"
"$brisk" --help | grep -q "tokenize" && ok || fail "tokenize listed in brisk --help"

# ids
expect_out "ids no-bos" "15043 3186" "$brisk" tokenize -m "$vocab" -p "Hello world" --ids --no-bos
expect_out "ids with bos" "1 15043 3186" "$brisk" tokenize -m "$vocab" -p "Hello world" --ids
expect_out "parse-special off" "529 29879 29958 10994 829 29879 29958" \
  "$brisk" tokenize -m "$vocab" -p "<s>Hello</s>" --ids --no-bos
expect_out "parse-special on" "1 1 15043 2 259 0 921" \
  "$brisk" tokenize -m "$vocab" -p "<s>Hello</s> <unk>x" --ids --parse-special
expect_out "empty prompt" "" "$brisk" tokenize -m "$vocab" -p "" --ids --no-bos

# -f takes the bytes as they are: the trailing newline is a token, no escapes
printf 'Hello world\n' > "$tmp/a.txt"
expect_out "file newline" "15043 3186 13" "$brisk" tokenize -m "$vocab" -f "$tmp/a.txt" --ids --no-bos
printf 'a\\nb' > "$tmp/b.txt"
want="$("$brisk" tokenize -m "$vocab" -p 'a\nb' --ids --no-bos)"
expect_out "file no escapes" "$want" "$brisk" tokenize -m "$vocab" -f "$tmp/b.txt" --ids --no-bos
printf 'x\000y\377' > "$tmp/c.bin"
"$brisk" tokenize -m "$vocab" -f "$tmp/c.bin" --ids --no-bos > "$tmp/out" 2>&1 && [ "$(wc -w < "$tmp/out")" -ge 4 ] \
  && ok || fail "NUL and invalid bytes in a file"

# pieces
got="$("$brisk" tokenize -m "$vocab" -p "Hello world")"
want="$(printf "     1 -> '<s>'\n 15043 -> ' Hello'\n  3186 -> ' world'")"
[ "$got" = "$want" ] && ok || fail "pieces: got '$got'"

# errors: one line, non-zero exit
expect_err "unknown flag" "unknown option '--bogus'" "$brisk" tokenize -m "$vocab" -p x --bogus
expect_err "no model" "-m MODEL is required" "$brisk" tokenize -p x
expect_err "no text" "exactly one of -p TEXT or -f FILE" "$brisk" tokenize -m "$vocab"
expect_err "both texts" "exactly one of -p TEXT or -f FILE" "$brisk" tokenize -m "$vocab" -p x -f "$tmp/a.txt"
expect_err "missing value" "needs a value" "$brisk" tokenize -m "$vocab" -p
expect_err "missing model file" "$tmp/nope.gguf" "$brisk" tokenize -m "$tmp/nope.gguf" -p x
expect_err "missing text file" "$tmp/nope.txt" "$brisk" tokenize -m "$vocab" -f "$tmp/nope.txt"
expect_err "directory as model" "directory" "$brisk" tokenize -m "$tmp" -p x
printf 'not a gguf file at all' > "$tmp/bad.gguf"
expect_err "not a gguf" "bad.gguf" "$brisk" tokenize -m "$tmp/bad.gguf" -p x

# a byte-level BPE vocabulary and a WordPiece one, when the shared fixtures are here
if [ -n "$shared" ] && [ -d "$shared/vocab" ]; then
  printf '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n' > "$tmp/chat.txt"
  expect_out "qwen2 parse-special" "151644 872 198 14990 151645 198 151644 77091 198" \
    "$brisk" tokenize -m "$shared/vocab/ggml-vocab-qwen2.gguf" --ids --no-bos --parse-special -f "$tmp/chat.txt"
  expect_out "bert cls/sep" "101 7592 1010 2088 999 102" \
    "$brisk" tokenize -m "$shared/vocab/ggml-vocab-bert-bge.gguf" --ids -p "Hello, World!"
else
  echo "SKIP shared vocabularies: ${shared:-<none>}/vocab absent"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
