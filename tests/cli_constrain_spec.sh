#!/usr/bin/env bash
# Speculative decoding under a constraint, from the command line, across constraints, prompts and
# drafters: greedy output must be identical to plain constrained decoding. For each constraint (JSON
# schemas of several shapes, a regular expression, a choice, llama.cpp's json and c grammars), each
# prompt and each mode (n-gram; the separate draft model ../shared/models/pycode-draft, whose drafts
# the target often rejects; auto with that draft model):
#   - `--spec MODE --spec-compare` must report "tokens identical to plain: yes" (the plain rerun
#     inside the same process), and
#   - its stdout must be byte-identical to a separate plain run's (no --spec at all).
# Over all draft-model runs some drafts must have been rejected and some accepted (so the
# verifier's masked rejection path ran). Sampled speculative runs (temperature 1) under the object
# schema must give JSON of the schema's shape (python3's json); the distribution itself is
# test_constrain_spec's chi-square test.
set -u
brisk="$1"
shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
draft="$shared/models/pycode-draft-f16.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp" 2>/dev/null' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
[ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; }
modes=("ngram")
if [ -f "$draft" ]; then modes+=("draft" "auto")
else echo "note: $draft absent: n-gram drafting only"; fi

obj='{"type":"object","properties":{"name":{"type":"string","maxLength":10},"n":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"}},"required":["name","n"],"additionalProperties":false}'
arr='{"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","maxItems":3,"items":{"enum":["a","b","c"]}}},"required":["id","tags"]}}'
fmt='{"type":"object","properties":{"date":{"type":"string","format":"date"},"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2,4}$"},"v":{"anyOf":[{"type":"number"},{"type":"null"}]}},"required":["date","code"]}'
printf '%s' "$obj" >"$tmp/obj.json"
# one constraint per line: a name, then the flags (the JSON schemas through files: no quoting trouble)
printf '%s' "$arr" >"$tmp/arr.json"; printf '%s' "$fmt" >"$tmp/fmt.json"
constraints=(
  "object --json-schema-file $tmp/obj.json"
  "array --json-schema-file $tmp/arr.json"
  "formats --json-schema-file $tmp/fmt.json"
  "regex --regex (def|class) [a-z_]{1,12}\\([a-z, ]{0,20}\\):"
  "choice --choice import os,import sys,from os import path"
  "json.gbnf --grammar-file $root/tests/data/constrain/gbnf/json.gbnf"
  "c.gbnf --grammar-file $root/tests/data/constrain/gbnf/c.gbnf"
)
prompts=('items = [{"name": "a", "n": 1}, {"name": "b", "n": 2}, ' 'import os\n\n\ndef main():\n    ')
drafted=0; accepted=0; runs=0
for c in "${constraints[@]}"; do
  name="${c%% *}"; flags="${c#* }"; flag="${flags%% *}"; value="${flags#* }"
  for pi in 0 1; do
    p="${prompts[$pi]}"
    "$brisk" run -m "$model" -e -p "$p" -n 96 --temp 0 -t 2 --no-display-prompt "$flag" "$value" >"$tmp/plain" 2>"$tmp/err" ||
      { bad "$name prompt $pi: plain run failed: $(tail -2 "$tmp/err")"; continue; }
    for mode in "${modes[@]}"; do
      md=(); [ "$mode" = ngram ] || md=(-md "$draft")
      "$brisk" run -m "$model" "${md[@]}" --spec "$mode" --spec-compare -e -p "$p" -n 96 --temp 0 -t 2 --no-display-prompt \
        "$flag" "$value" >"$tmp/spec" 2>"$tmp/err"
      rc=$?; runs=$((runs+1))
      if [ $rc -ne 0 ]; then bad "$name prompt $pi spec $mode: rc=$rc $(tail -2 "$tmp/err")"; continue; fi
      grep -q "tokens identical to plain: yes" "$tmp/err" && ok ||
        bad "$name prompt $pi spec $mode: $(grep 'spec compare' "$tmp/err")"
      cmp -s "$tmp/plain" "$tmp/spec" && ok ||
        bad "$name prompt $pi spec $mode: output differs from the plain run: '$(head -c 200 "$tmp/spec")' vs '$(head -c 200 "$tmp/plain")'"
      if [ "$mode" = draft ]; then
        read -r a d < <(sed -n 's/.*acceptance [0-9.]*% (\([0-9]*\) of \([0-9]*\) drafted).*/\1 \2/p' "$tmp/err" | head -1)
        accepted=$((accepted + ${a:-0})); drafted=$((drafted + ${d:-0}))
      fi
    done
  done
done
if [ -f "$draft" ]; then
  echo "draft model: $accepted of $drafted drafted tokens accepted over the draft runs"
  [ "$drafted" -gt 0 ] && [ "$accepted" -gt 0 ] && [ "$accepted" -lt "$drafted" ] && ok ||
    bad "the draft runs did not both accept and reject drafts ($accepted of $drafted)"
fi

# sampled: speculative output under a schema is still valid
if command -v python3 >/dev/null; then
  for mode in "${modes[@]}"; do
    md=(); [ "$mode" = ngram ] || md=(-md "$draft")
    for seed in 1 2 3; do
      "$brisk" run -m "$model" "${md[@]}" --spec "$mode" -p 'record = ' -n 200 --temp 1 --seed $seed -t 2 --no-display-prompt \
        --json-schema "$obj" >"$tmp/out" 2>"$tmp/err"
      rc=$?
      [ $rc -eq 0 ] && python3 -c '
import json, sys
d = json.loads(open(sys.argv[1], encoding="utf-8").read())
assert isinstance(d, dict) and set(d) <= {"name", "n", "ok"} and {"name", "n"} <= set(d), d
assert isinstance(d["name"], str) and len(d["name"]) <= 10 and type(d["n"]) is int and 0 <= d["n"] <= 99, d
assert "ok" not in d or type(d["ok"]) is bool, d
' "$tmp/out" 2>"$tmp/py" && ok || bad "sampled spec $mode seed $seed rc=$rc: $(cat "$tmp/out") $(tail -1 "$tmp/py") $(tail -1 "$tmp/err")"
    done
  done
fi

echo "cli_constrain_spec: $pass passed, $fail failed ($runs greedy speculative runs)"
[ $fail -eq 0 ]
