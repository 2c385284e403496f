#!/usr/bin/env bash
# cli_prompt_cache: `brisk run --prompt-cache FILE` (-all, -ro), as llama-cli's.
# Usage: bash tests/cli_prompt_cache.sh BRISK_BINARY SHARED_DIR
#
# What a file that cannot be used gets (the choice, also in --help and docs/KVSTATE.md):
#   - missing or empty: a new cache is started (a note on stderr), as llama-cli;
#   - intact but not for this run (another model, more tokens than -c): a warning,
#     the run goes on (exit 0), and the file is rewritten unless --prompt-cache-ro;
#   - damaged (truncated, a corrupted byte, not a KV state): an error, exit 1,
#     and the file is left as it is (never silently overwritten).
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
other="$root/tests/data/golden/qwen2-tiny-Q4_0.gguf"
[ -f "$model" ] || { echo "SKIP: $model is absent (it links into ../shared)"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { local name="$1"; shift; if "$@"; then ok; else fail "$name"; fi; }

prompt='def fibonacci(n):
    if n < 2:
        return n
    return'
run() { "$brisk" run -m "$model" -p "$prompt" -n 16 --seed 7 --temp 0.8 -t 1 "$@"; }
c="$tmp/c.kvs"

# --help lists the three flags
help="$("$brisk" run --help)"
for f in --prompt-cache --prompt-cache-all --prompt-cache-ro; do
  check "--help lists $f" grep -q -- "^  $f" <<<"$help"
done

# first run creates the cache; the second, with the same prompt and seed, reuses the
# prompt (all but its last token, which gives the logits) and prints the same text
run --prompt-cache "$c" >"$tmp/o1" 2>"$tmp/e1"; rc=$?
check "first run exits 0 ($(tail -3 "$tmp/e1"))" [ $rc -eq 0 ]
check "first run creates the cache" test -s "$c"
check "first run says it will create it" grep -q "does not exist; it will be created" "$tmp/e1"
run --prompt-cache "$c" >"$tmp/o2" 2>"$tmp/e2"; rc=$?
check "second run exits 0" [ $rc -eq 0 ]
check "second run prints the same text" cmp -s "$tmp/o1" "$tmp/o2"
n_prompt=$(grep -o 'prompt [0-9]* tokens' "$tmp/e2" | grep -o '[0-9]*')
check "second run reuses the prompt ($(grep 'prompt cache' "$tmp/e2"))" grep -q "reused $((n_prompt - 1)) of $n_prompt prompt tokens" "$tmp/e2"
run >"$tmp/o0" 2>/dev/null
check "the cached run prints what an uncached run prints" cmp -s "$tmp/o0" "$tmp/o2"

# a longer prompt with the same prefix prefills only the difference
"$brisk" run -m "$model" -p "$prompt fib(n - 1)" -n 4 --seed 7 -t 1 --prompt-cache "$c" >/dev/null 2>"$tmp/e3"
check "a longer prompt reuses the cached prefix ($(grep 'prompt cache' "$tmp/e3"))" grep -qE "reused [1-9][0-9]* of" "$tmp/e3"

# -ro: loads, never writes
cp "$c" "$tmp/before"
"$brisk" run -m "$model" -p "class Foo:" -n 4 --seed 7 -t 1 --prompt-cache "$c" --prompt-cache-ro >/dev/null 2>"$tmp/e4"; rc=$?
check "-ro with another prompt exits 0" [ $rc -eq 0 ]
check "-ro leaves the file untouched" cmp -s "$c" "$tmp/before"
"$brisk" run -m "$model" -p "x" -n 2 -t 1 --prompt-cache "$tmp/none.kvs" --prompt-cache-ro >/dev/null 2>"$tmp/e5"
check "-ro does not create a missing file" test ! -e "$tmp/none.kvs"

# -all: the prompt and the generation are saved; the next run with the same prompt reuses the prompt
run --prompt-cache "$tmp/all.kvs" --prompt-cache-all >"$tmp/a1" 2>/dev/null
run --prompt-cache "$c" --prompt-cache-ro >/dev/null 2>/dev/null
check "-all saves more than the prompt" [ "$(stat -c %s "$tmp/all.kvs")" -gt "$(stat -c %s "$c")" ]
run --prompt-cache "$tmp/all.kvs" --prompt-cache-all -v >"$tmp/a2" 2>"$tmp/e6"
check "a run from an -all cache prints the same text" cmp -s "$tmp/a1" "$tmp/a2"
check "a run from an -all cache reuses the prompt" grep -q "reused $((n_prompt - 1)) of $n_prompt" "$tmp/e6"
cp "$tmp/all.kvs" "$tmp/all.before"
run --prompt-cache "$tmp/all.kvs" >/dev/null 2>&1
check "a file that starts with the prompt is not rewritten (llama-cli's exact match)" cmp -s "$tmp/all.kvs" "$tmp/all.before"

# damaged files: an error naming the problem, exit 1, the file left as it is
cp "$c" "$tmp/bad.kvs"
size=$(stat -c %s "$tmp/bad.kvs")
printf '\x55' | dd of="$tmp/bad.kvs" bs=1 seek=$((size / 2)) conv=notrunc status=none
cp "$tmp/bad.kvs" "$tmp/bad.before"
run --prompt-cache "$tmp/bad.kvs" >/dev/null 2>"$tmp/e7"; rc=$?
check "a corrupted byte exits 1 (got $rc)" [ $rc -eq 1 ]
check "a corrupted byte is named ($(cat "$tmp/e7"))" grep -q "checksum" "$tmp/e7"
check "a corrupted file is left as it is" cmp -s "$tmp/bad.kvs" "$tmp/bad.before"
head -c 100 "$c" >"$tmp/short.kvs"
run --prompt-cache "$tmp/short.kvs" >/dev/null 2>"$tmp/e8"; rc=$?
check "a truncated file exits 1 ($(cat "$tmp/e8"))" [ $rc -eq 1 ] && grep -q "truncated" "$tmp/e8"
check "a truncated file is left as it is" [ "$(stat -c %s "$tmp/short.kvs")" -eq 100 ]

# intact but for another model: a warning, the run goes on, the file is rewritten
"$brisk" run -m "$other" -p "hello" -n 2 -t 1 --prompt-cache "$tmp/other.kvs" >/dev/null 2>&1
run --prompt-cache "$tmp/other.kvs" >"$tmp/o9" 2>"$tmp/e9"; rc=$?
check "another model's cache: exit 0" [ $rc -eq 0 ]
check "another model's cache: a warning ($(grep warning "$tmp/e9"))" grep -q "warning: prompt cache not used: .*another model" "$tmp/e9"
check "another model's cache: the output is the uncached one" cmp -s "$tmp/o9" "$tmp/o0"
run --prompt-cache "$tmp/other.kvs" >/dev/null 2>"$tmp/e10"
check "another model's cache was rewritten for this one" grep -q "reused $((n_prompt - 1)) of" "$tmp/e10"

# flags without --prompt-cache, and with --spec, are usage errors
"$brisk" run -m "$model" -p x -n 1 --prompt-cache-all >/dev/null 2>&1; rc=$?
check "--prompt-cache-all alone is a usage error (got $rc)" [ $rc -eq 2 ]
"$brisk" run -m "$model" -p x -n 1 --prompt-cache "$c" --spec ngram >/dev/null 2>&1; rc=$?
check "--prompt-cache with --spec is a usage error (got $rc)" [ $rc -eq 2 ]

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
