#!/usr/bin/env bash
# The CLI on bad input: every case must exit with its documented status (2 for a
# usage error: unknown flag, bad value, missing argument; 1 for a runtime
# error: bad file, bad token id, capacity, write error) and a message that
# names what was wrong, and never crash (exit codes >= 128 are signals).
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
: > "$tmp/empty.gguf"
printf 'this is not a gguf file at all\n' > "$tmp/text.gguf"
mkdir "$tmp/dir.gguf"
printf '\x01\x00\x00\x00\xff\xff\xff\x7f' > "$tmp/bad.i32"
printf '\001\000\000\000\002\000\000\000' > "$tmp/two.i32"

# expect_fail NAME PATTERN CMD...: a runtime error (exit 1), stderr matches PATTERN
# expect_usage NAME PATTERN CMD...: a usage error (exit 2), stderr matches PATTERN
expect_status() {
  local want="$1" name="$2" pat="$3"; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$pat" "$tmp/err"; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL $name: rc=$rc (want $want) stderr: $(head -c 300 "$tmp/err")"; fi
}
expect_fail() { expect_status 1 "$@"; }
expect_usage() { expect_status 2 "$@"; }
expect_ok() {
  local name="$1" pat="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ] && { [ -z "$pat" ] || grep -qE -- "$pat" "$tmp/out"; }; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL $name: rc=$rc out: $(head -c 300 "$tmp/out") err: $(head -c 300 "$tmp/err")"; fi
}

for cmd in run chat inspect perplexity logits synth tokenize template bench; do
  expect_ok "$cmd --help" "usage: brisk $cmd" "$brisk" "$cmd" --help
done
expect_usage "no command" "usage" "$brisk"
expect_usage "unknown command" "unknown command 'frobnicate'" "$brisk" frobnicate
expect_fail "missing file" "nope.gguf: cannot open" "$brisk" run -m "$tmp/nope.gguf" -p hi
expect_fail "directory" "is a directory" "$brisk" run -m "$tmp/dir.gguf" -p hi
expect_fail "empty file" "empty" "$brisk" run -m "$tmp/empty.gguf" -p hi
expect_fail "not gguf" "not a GGUF file" "$brisk" run -m "$tmp/text.gguf" -p hi
expect_fail "inspect missing" "cannot open" "$brisk" inspect "$tmp/nope.gguf"
expect_fail "inspect not gguf" "not a GGUF file" "$brisk" inspect "$tmp/text.gguf"
expect_usage "unknown flag" "unknown option '--frobnicate'" "$brisk" run -m "$model" -p hi --frobnicate
expect_usage "bad int" "-n: 'abc' is not an integer" "$brisk" run -m "$model" -p hi -n abc
expect_usage "negative n" "-n: -5 is out of range \\[-1, " "$brisk" run -m "$model" -p hi -n -5
expect_usage "bad temp" "--temp: 'x1' is not a number" "$brisk" run -m "$model" -p hi --temp x1
expect_usage "top-p range" "--top-p: 1.5 is out of range" "$brisk" run -m "$model" -p hi --top-p 1.5
expect_usage "missing value" "-m needs a value" "$brisk" run -m
expect_usage "penalty mode" "--repeat-penalty-mode: 'sideways'" "$brisk" run -m "$model" -p hi --repeat-penalty-mode sideways
expect_usage "no prompt" "exactly one of -p PROMPT or -f FILE" "$brisk" run -m "$model"
expect_fail "over context" "exceeds the context size 64" "$brisk" run -m "$model" -p "def f():" -n 100 -c 64
expect_fail "huge context" "not enough memory: weights .* MiB [+] KV .* MiB" "$brisk" run -m "$model" -p hi -n 1 -c 1000000000
expect_fail "logits bad token" "token 2147483647 at index 1 is out of range" "$brisk" logits -m "$model" --tokens "$tmp/bad.i32" -o "$tmp/o.f32"
expect_fail "logits odd size" "is not a non-empty sequence of int32" "$brisk" logits -m "$model" --tokens "$tmp/text.gguf" -o "$tmp/o.f32"
expect_fail "perplexity short" "less than one chunk" "$brisk" perplexity -m "$model" -f "$tmp/text.gguf" -c 512
expect_usage "synth shape" "unknown shape 'gpt-5'" "$brisk" synth --shape gpt-5 --type F16 -o "$tmp/x.gguf"
expect_usage "synth type" "unknown or unsupported type 'Q9_9'" "$brisk" synth --shape qwen3-tiny --type Q9_9 -o "$tmp/x.gguf"

expect_usage "ctx range" "-c: -5 is out of range \\[0, " "$brisk" run -m "$model" -p hi -c -5
expect_usage "threads range" "-t: 100000 is out of range" "$brisk" run -m "$model" -p hi -t 100000
expect_usage "nan temp" "--temp: 'nan' is not a number" "$brisk" run -m "$model" -p hi --temp nan
expect_usage "inspect extra file" "one file at a time" "$brisk" inspect "$model" "$model"
expect_usage "inspect no file" "a GGUF file is required" "$brisk" inspect
expect_fail "prompt fills -n -1" "fills the context size 4" "$brisk" run -m "$model" -p "def fibonacci(n):" -n -1 -c 4
expect_fail "input fifo" "is a FIFO; only a regular file" sh -c "mkfifo '$tmp/fifo' && '$brisk' run -m '$model' -f '$tmp/fifo'"
expect_fail "input cap" "more than the input cap of 8 bytes \\(raise it with --max-input-bytes\\)" \
  "$brisk" run -m "$model" -f "$tmp/text.gguf" --max-input-bytes 8
expect_fail "logits to a fifo" "is a FIFO; refusing to replace it" "$brisk" logits -m "$model" --tokens "$tmp/two.i32" -o "$tmp/fifo"
[ -p "$tmp/fifo" ] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL the FIFO was replaced"; }
expect_fail "synth to a fifo" "refusing to replace it" "$brisk" synth --shape qwen3-tiny --type Q8_0 -o "$tmp/fifo"
[ -p "$tmp/fifo" ] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL synth replaced the FIFO"; }
expect_fail "run > /dev/full" "write to stdout failed" sh -c "'$brisk' run -m '$model' -p 'def f(' -n 2 -t 1 > /dev/full"
# a closed pipe is a quiet stop with status 0
"$brisk" run -m "$model" -p "def f(" -n 200 -t 1 2>"$tmp/err" | head -c 1 >/dev/null
[ "${PIPESTATUS[0]}" -eq 0 ] && ! grep -qi "fail" "$tmp/err" && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL closed pipe: $(cat "$tmp/err")"; }

# output files: written beside the target and renamed; a failed write leaves the target untouched
printf 'old' > "$tmp/target.f32"
ln -s "$tmp/target.f32" "$tmp/link.f32"
expect_ok "logits through a link" "" "$brisk" logits -m "$model" --tokens "$tmp/two.i32" -o "$tmp/link.f32" -t 1
[ -L "$tmp/link.f32" ] && [ "$(stat -c %s "$tmp/target.f32")" -eq $((2 * 4 * 4096)) ] && pass=$((pass+1)) \
  || { fail=$((fail+1)); echo "FAIL logits -o through a symlink: $(ls -l "$tmp")"; }
printf 'old' > "$tmp/keep.f32"
expect_fail "logits bad token keeps the target" "out of range" "$brisk" logits -m "$model" --tokens "$tmp/bad.i32" -o "$tmp/keep.f32"
[ "$(cat "$tmp/keep.f32")" = "old" ] && [ -z "$(ls "$tmp" | grep '\.tmp\.')" ] && pass=$((pass+1)) \
  || { fail=$((fail+1)); echo "FAIL target or temp file after a failure: $(ls "$tmp")"; }
expect_ok "logits -o -" "" sh -c "'$brisk' logits -m '$model' --tokens '$tmp/two.i32' -o - -t 1 | cmp -s - '$tmp/target.f32'"

# the happy paths print what they promise
expect_ok "inspect" "general.architecture \(str\) = \"llama\"" "$brisk" inspect "$model"
expect_ok "run greedy" "def fibonacci" "$brisk" run -m "$model" -p "def fibonacci(n):" -n 16 --temp 0
grep -qE "prompt [0-9]+ tokens, .* tokens/s \| generated [0-9]+ tokens, .* tokens/s" "$tmp/err" && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL run timing line: $(cat "$tmp/err")"; }
expect_ok "synth tiny" "" "$brisk" synth --shape qwen3-tiny --type Q8_0 -o "$tmp/q3.gguf"
expect_ok "run synth" "" "$brisk" run -m "$tmp/q3.gguf" -p "hello" -n 8 --seed 3

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
