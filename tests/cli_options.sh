#!/usr/bin/env bash
# The option table (src/cli/options.c): every command's --help is generated
# and complete, a flag has the same bounds in every command that takes it,
# unknown flags name the nearest known one, usage errors exit 2 and runtime
# errors 1, and the llama.cpp flags behave: -e, -r, --ignore-eos, -n -1,
# -s -1 (random, printed) and a given seed reproducible.
# Usage: bash tests/cli_options.sh BRISK_BINARY [SHARED_DIR]
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
vocab="$root/tests/data/vocab/ggml-vocab-llama-spm.gguf"
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

# expect NAME RC PATTERN CMD...: exit status RC and stderr matching PATTERN (ERE)
expect() {
  local name="$1" want="$2" pat="$3"; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; local rc=$?
  if [ $rc -eq "$want" ] && grep -qE -- "$pat" "$tmp/err"; then ok
  else bad "$name: rc=$rc (want $want) err: $(head -c 400 "$tmp/err")"; fi
}

# --help and --version of every command
for cmd in run chat inspect perplexity logits synth tokenize template bench; do
  "$brisk" $cmd --help >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -eq 0 ] && grep -q "^usage: brisk $cmd" "$tmp/out" && grep -q -- "--version" "$tmp/out" && grep -q -- "-h, --help" "$tmp/out" \
     && [ ! -s "$tmp/err" ]; then ok; else bad "$cmd --help: rc=$rc $(head -c 200 "$tmp/err")"; fi
  [ "$("$brisk" $cmd --version)" = "$("$brisk" --version)" ] && ok || bad "$cmd --version"
done
"$brisk" --version | grep -qE '^brisk [0-9]' && ok || bad "brisk --version"
"$brisk" run --help | grep -q -- "-s, --seed SEED .*-1 = random" && ok || bad "run --help shows -s"
"$brisk" bench --help | grep -q "llama-bench" && ok || bad "bench --help names its llama-bench exceptions"
"$brisk" --help > /dev/full 2>"$tmp/err"; [ $? -eq 1 ] && grep -q "write to stdout failed" "$tmp/err" && ok || bad "--help > /dev/full"

# the same flag has the same bounds in every command that takes it
for cmd in run chat perplexity; do
  expect "$cmd -c -5" 2 "^brisk $cmd: -c: -5 is out of range \[0, 2147483647\]$" "$brisk" $cmd -m "$model" -f x -c -5
done
for cmd in run chat perplexity logits bench; do
  expect "$cmd -t 0" 2 "^brisk $cmd: -t: 0 is out of range \[1, 1024\]$" "$brisk" $cmd -t 0
  expect "$cmd --threads 100000" 2 "^brisk $cmd: --threads: 100000 is out of range \[1, 1024\]$" "$brisk" $cmd --threads 100000
  expect "$cmd -b 0" 2 "^brisk $cmd: -b: 0 is out of range \[1, 65536\]$" "$brisk" $cmd -b 0
  expect "$cmd -ngl x" 2 "^brisk $cmd: -ngl: 'x' is not an integer$" "$brisk" $cmd -ngl x
done
for cmd in run chat; do
  expect "$cmd --temp nan" 2 "^brisk $cmd: --temp: 'nan' is not a number$" "$brisk" $cmd --temp nan
  expect "$cmd --top-p 2" 2 "^brisk $cmd: --top-p: 2 is out of range \[0, 1\]$" "$brisk" $cmd --top-p 2
  expect "$cmd -n -2" 2 "^brisk $cmd: -n: -2 is out of range \[-1, 16777216\]$" "$brisk" $cmd -n -2
  expect "$cmd -s x" 2 "^brisk $cmd: -s: 'x' is not a seed" "$brisk" $cmd -s x
  expect "$cmd --seed 18446744073709551615" 2 "is not a seed" "$brisk" $cmd --seed 18446744073709551615
done
for cmd in run chat perplexity logits tokenize template; do
  expect "$cmd --max-input-bytes 0" 2 "^brisk $cmd: --max-input-bytes: 0 is out of range" "$brisk" $cmd --max-input-bytes 0
  expect "$cmd --max-input-bytes 1Q" 2 "is not a size" "$brisk" $cmd --max-input-bytes 1Q
done
expect "--name=value" 2 "^brisk run: --ctx-size: -5 is out of range" "$brisk" run --ctx-size=-5
expect "flag=value on a flag" 2 "takes no value" "$brisk" run --ignore-eos=1
expect "choice" 2 "'sideways' is not one of classic\|logprob" "$brisk" run --repeat-penalty-mode sideways

# unknown flags: exit 2, the flag named, the nearest one suggested
expect "suggest --temp" 2 "^brisk run: unknown option '--temperature' \(did you mean '--temp'\?\)$" "$brisk" run --temperature 1
expect "suggest --threads" 2 "did you mean '--threads'" "$brisk" chat --thread 2
expect "suggest --ids" 2 "did you mean '--ids'" "$brisk" tokenize --id
expect "suggest --repetitions" 2 "did you mean '--repetitions'" "$brisk" bench --repetition 3
expect "suggest --ctx-size" 2 "did you mean '--ctx-size'" "$brisk" perplexity --ctx_size 3
expect "another command's flag" 2 "^brisk inspect: unknown option '--temp': brisk inspect does not take it" "$brisk" inspect --temp 1
expect "nothing close" 2 "^brisk run: unknown option '--frobnicate' \(see brisk run --help\)$" "$brisk" run --frobnicate
expect "unknown command" 2 "unknown command 'rn' \(did you mean 'run'\?\)" "$brisk" rn
expect "stray argument" 2 "unexpected argument 'extra'" "$brisk" run extra

# exit status: usage 2, runtime 1
expect "missing value" 2 "-m needs a value" "$brisk" run -m
expect "missing model file" 1 "cannot open" "$brisk" run -m "$tmp/nope.gguf" -p x
expect "missing input file" 1 "^brisk run: -f $tmp/nope.txt: cannot open" "$brisk" run -m "$model" -f "$tmp/nope.txt"
expect "-ngl note" 0 "note: -ngl has no effect" "$brisk" run -m "$model" -p "def f(" -n 1 -t 1 -ngl 99
expect "-sys needs -cnv" 2 "conversation mode only" "$brisk" run -m "$model" -p x -sys hi

# -e: escapes only when asked, --no-escape turns them off again
printf 'a\nb\t"\\c' > "$tmp/want"
"$brisk" run -m "$model" -p 'a\nb\t\"\\c' -e -n 0 -t 1 2>/dev/null | head -c 7 > "$tmp/got"
cmp -s "$tmp/got" "$tmp/want" && ok || bad "-e: got $(od -c "$tmp/got" | head -2)"
"$brisk" run -m "$model" -p 'a\nb' -n 0 -t 1 2>/dev/null | head -c 4 | grep -qF 'a\nb' && ok || bad "no escapes by default"
"$brisk" run -m "$model" -p 'a\nb' -e --no-escape -n 0 -t 1 2>/dev/null | head -c 4 | grep -qF 'a\nb' && ok || bad "--no-escape"
want="$("$brisk" tokenize -m "$vocab" -p "$(printf 'x\ty\x41')" --ids --no-bos)"
[ "$("$brisk" tokenize -m "$vocab" -p 'x\ty\x41' -e --ids --no-bos)" = "$want" ] && ok || bad "tokenize -e \\t \\x41"

# -r: generation stops once the text ends with a reverse prompt (greedy: "def f(\n    f(lambda: ...")
"$brisk" run -m "$model" -p "def f(" -n 64 --temp 0 -t 1 -r ':' >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "stopped at a reverse prompt" "$tmp/err" && [ "$(tr -d '\n' < "$tmp/out" | tail -c 1)" = ":" ] && ok \
  || bad "-r ':': $(cat "$tmp/out") $(tail -c 200 "$tmp/err")"
expect "-r ''" 2 "empty reverse prompt" "$brisk" run -m "$model" -p x -r ''

# -n -1: until end of generation or a full context (with --ignore-eos: exactly the context)
"$brisk" run -m "$model" -p "def f(" -n -1 -c 40 --ignore-eos -t 1 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "generated 36 tokens" "$tmp/err" && ok || bad "-n -1 -c 40: $(tail -c 300 "$tmp/err")"

# --ignore-eos: a seed whose sampled text ends early goes on to -n tokens
found=""
for s in $(seq 1 40); do
  if "$brisk" run -m "$model" -p "x = 1" -n 64 -s $s -t 1 2>&1 >/dev/null | grep -q "generated \([0-9]\|[1-5][0-9]\|6[0-3]\) tokens"; then found=$s; break; fi
done
if [ -n "$found" ]; then
  "$brisk" run -m "$model" -p "x = 1" -n 64 -s $found --ignore-eos -t 1 2>&1 >/dev/null | grep -q "generated 64 tokens" && ok \
    || bad "--ignore-eos with seed $found did not reach -n 64"
else
  echo "SKIP --ignore-eos: no seed in 1..40 ends early"
fi

# -s -1 (the default): a random seed, printed; giving it back repeats the run
"$brisk" run -m "$model" -p "def f(" -n 16 -t 1 >"$tmp/a" 2>"$tmp/ea"
"$brisk" run -m "$model" -p "def f(" -n 16 -t 1 -s -1 >"$tmp/b" 2>"$tmp/eb"
sa="$(sed -n 's/^brisk run: sampler seed: \([0-9]*\)$/\1/p' "$tmp/ea")"
sb="$(sed -n 's/^brisk run: sampler seed: \([0-9]*\)$/\1/p' "$tmp/eb")"
[ -n "$sa" ] && [ -n "$sb" ] && [ "$sa" != "$sb" ] && ok || bad "random seeds printed and different: '$sa' '$sb'"
"$brisk" run -m "$model" -p "def f(" -n 16 -t 1 -s "$sa" >"$tmp/c" 2>/dev/null
cmp -s "$tmp/a" "$tmp/c" && ok || bad "the printed seed $sa repeats the run"
"$brisk" run -m "$model" -p "def f(" -n 16 -t 1 --seed 7 >"$tmp/d" 2>"$tmp/ed"
"$brisk" run -m "$model" -p "def f(" -n 16 -t 1 -s 7 >"$tmp/e" 2>/dev/null
cmp -s "$tmp/d" "$tmp/e" && grep -q "sampler seed: 7$" "$tmp/ed" && ok || bad "-s 7 twice"

# -v prints the memory plan; -c above the training context warns and runs
expect "-v memory plan" 0 "^brisk run: memory plan: weights .* MiB" "$brisk" run -m "$model" -p "def f(" -n 1 -t 1 -v
expect "bench plan" 0 "^brisk bench: memory plan: weights" "$brisk" bench -m "$model" -p 8 -n 2 -r 1 --no-roofline -t 1
expect "-c over training" 0 "n_ctx \(600\) > n_ctx_train \(512\)" "$brisk" run -m "$model" -p "def f(" -n 1 -c 600 -t 1
expect "perplexity -c 2" 2 "too short to score" "$brisk" perplexity -m "$model" -f "$tmp/x" -c 2

# run --spec draft -md: the target's and the draft's plans are checked together before either context exists
draft="${2:-}/models/pycode-draft-f16.gguf"
if [ -f "$draft" ]; then
  expect "draft plan -v" 0 "^brisk run: draft model memory plan: weights" "$brisk" run -m "$model" -md "$draft" --spec draft -p "def f(" -n 4 -t 1 -v
  expect "draft plan check" 1 "for the models together" "$brisk" run -m "$model" -md "$draft" --spec draft -p "def f(" -n 4 -t 1 -c 100000000
else
  echo "SKIP draft plan: $draft absent"
fi

# -cnv: run is chat with the same flags
printf 'hello\n/exit\n' | "$brisk" run -cnv -m "$model" --chat-template "$tpl" -n 4 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "brisk chat: sampler seed" "$tmp/err" && [ -s "$tmp/out" ] && ok || bad "-cnv: $(cat "$tmp/err")"
expect "-cnv and --spec" 2 "--spec is not used in conversation mode" "$brisk" run -cnv -m "$model" --spec ngram

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
