#!/usr/bin/env bash
# The CLI on bad input: every case must exit non-zero with a one-line message
# that names what was wrong, and never crash (exit codes >= 128 are signals).
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

# expect_fail NAME PATTERN CMD...: non-zero exit (not a signal), stderr matches PATTERN
expect_fail() {
  local name="$1" pat="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE -- "$pat" "$tmp/err"; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL $name: rc=$rc stderr: $(head -c 300 "$tmp/err")"; fi
}
expect_ok() {
  local name="$1" pat="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ] && { [ -z "$pat" ] || grep -qE -- "$pat" "$tmp/out"; }; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL $name: rc=$rc out: $(head -c 300 "$tmp/out") err: $(head -c 300 "$tmp/err")"; fi
}

for cmd in run inspect perplexity logits synth tokenize template; do
  expect_ok "$cmd --help" "usage: brisk $cmd" "$brisk" "$cmd" --help
done
expect_fail "no command" "usage" "$brisk"
expect_fail "unknown command" "unknown command 'frobnicate'" "$brisk" frobnicate
expect_fail "missing file" "nope.gguf: cannot open" "$brisk" run -m "$tmp/nope.gguf" -p hi
expect_fail "directory" "is a directory" "$brisk" run -m "$tmp/dir.gguf" -p hi
expect_fail "empty file" "empty" "$brisk" run -m "$tmp/empty.gguf" -p hi
expect_fail "not gguf" "not a GGUF file" "$brisk" run -m "$tmp/text.gguf" -p hi
expect_fail "inspect missing" "cannot open" "$brisk" inspect "$tmp/nope.gguf"
expect_fail "inspect not gguf" "not a GGUF file" "$brisk" inspect "$tmp/text.gguf"
expect_fail "unknown flag" "unknown option '--frobnicate'" "$brisk" run -m "$model" -p hi --frobnicate
expect_fail "bad int" "-n: 'abc' is not an integer" "$brisk" run -m "$model" -p hi -n abc
expect_fail "negative n" "-n: -5 is out of range" "$brisk" run -m "$model" -p hi -n -5
expect_fail "bad temp" "--temp: 'x1' is not a number" "$brisk" run -m "$model" -p hi --temp x1
expect_fail "top-p range" "--top-p: 1.5 is out of range" "$brisk" run -m "$model" -p hi --top-p 1.5
expect_fail "missing value" "-m needs a value" "$brisk" run -m
expect_fail "penalty mode" "--repeat-penalty-mode: 'sideways'" "$brisk" run -m "$model" -p hi --repeat-penalty-mode sideways
expect_fail "no prompt" "exactly one of -p PROMPT or -f FILE" "$brisk" run -m "$model"
expect_fail "over context" "exceeds the context size 64" "$brisk" run -m "$model" -p "def f():" -n 100 -c 64
expect_fail "huge context" "not enough memory: weights .* MiB [+] KV .* MiB" "$brisk" run -m "$model" -p hi -n 1 -c 1000000000
expect_fail "logits bad token" "token 2147483647 at index 1 is out of range" "$brisk" logits -m "$model" --tokens "$tmp/bad.i32" -o "$tmp/o.f32"
expect_fail "logits odd size" "is not a non-empty sequence of int32" "$brisk" logits -m "$model" --tokens "$tmp/text.gguf" -o "$tmp/o.f32"
expect_fail "perplexity short" "less than one chunk" "$brisk" perplexity -m "$model" -f "$tmp/text.gguf" -c 512
expect_fail "synth shape" "unknown shape 'gpt-5'" "$brisk" synth --shape gpt-5 --type F16 -o "$tmp/x.gguf"
expect_fail "synth type" "unknown or unsupported type 'Q9_9'" "$brisk" synth --shape qwen3-tiny --type Q9_9 -o "$tmp/x.gguf"

# the happy paths print what they promise
expect_ok "inspect" "general.architecture \(str\) = \"llama\"" "$brisk" inspect "$model"
expect_ok "run greedy" "def fibonacci" "$brisk" run -m "$model" -p "def fibonacci(n):" -n 16 --temp 0
grep -qE "prompt [0-9]+ tokens, .* tokens/s \| generated [0-9]+ tokens, .* tokens/s" "$tmp/err" && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL run timing line: $(cat "$tmp/err")"; }
expect_ok "synth tiny" "" "$brisk" synth --shape qwen3-tiny --type Q8_0 -o "$tmp/q3.gguf"
expect_ok "run synth" "" "$brisk" run -m "$tmp/q3.gguf" -p "hello" -n 8 --seed 3

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
