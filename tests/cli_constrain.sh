#!/usr/bin/env bash
# Constrained decoding from the command line, with the bundled model: --json-schema output parses
# and has the schema's shape (python3's json as the parser), --choice gives one of the choices,
# --regex output matches (python3's re as the reference), a GBNF grammar file; speculative decoding
# under a constraint gives the same greedy tokens as plain decoding (--spec-compare); chat replies
# are constrained; errors name what is wrong; `brisk maskbench -o json` prints one object and
# nothing else on stdout, exits 0, and accepts no invalid instance.
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp" 2>/dev/null' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
command -v python3 >/dev/null || { echo "SKIP: python3 absent (the reference parser)"; exit 77; }
[ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; }

schema='{"type":"object","properties":{"name":{"type":"string","maxLength":10},"n":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"}},"required":["name","n"],"additionalProperties":false}'
check_json='
import json, sys
d = json.loads(open(sys.argv[1], encoding="utf-8").read())
assert isinstance(d, dict) and set(d) <= {"name", "n", "ok"}, d
assert isinstance(d["name"], str) and len(d["name"]) <= 10, d
assert type(d["n"]) is int and 0 <= d["n"] <= 99, d
assert "ok" not in d or type(d["ok"]) is bool, d
'
for seed in 1 2 3 4 5 6; do
  "$brisk" run -m "$model" -p 'record = ' -n 200 --temp 1 --seed $seed --no-display-prompt --json-schema "$schema" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ] && python3 -c "$check_json" "$tmp/out" 2>"$tmp/py" && ok || bad "json-schema seed $seed rc=$rc: $(cat "$tmp/out") $(tail -2 "$tmp/py") $(tail -2 "$tmp/err")"
done
printf '%s' "$schema" >"$tmp/schema.json"
"$brisk" run -m "$model" -p 'record = ' -n 200 --temp 0 --no-display-prompt --json-schema-file "$tmp/schema.json" >"$tmp/out" 2>"$tmp/err" &&
  python3 -c "$check_json" "$tmp/out" && ok || bad "json-schema-file: $(cat "$tmp/out") $(tail -2 "$tmp/err")"

# -n is the constraint's token budget: with a budget just above the shortest instance (in bytes, one
# token per byte at worst, plus the end token) the output always ends complete, even at temperature 2
budget_schema='{"type":"object","properties":{"name":{"type":"string","minLength":12},"tags":{"type":"array","items":{"type":"string"},"minItems":3},"n":{"type":"number"}},"required":["name","tags","n"]}'
shortest="$(python3 -c 'import json; print(len(json.dumps({"name": "x" * 12, "tags": ["", "", ""], "n": 0}, separators=(",", ":"))))')"
check_budget='
import json, sys
d = json.loads(open(sys.argv[1], encoding="utf-8").read())
assert isinstance(d, dict) and list(d)[:3] == ["name", "tags", "n"], d
assert isinstance(d["name"], str) and len(d["name"]) >= 12, d
assert isinstance(d["tags"], list) and len(d["tags"]) >= 3 and all(isinstance(t, str) for t in d["tags"]), d
assert type(d["n"]) in (int, float), d
'
for seed in 1 2 3 4 5 6 7 8; do
  n=$((shortest + 1 + seed % 3))
  "$brisk" run -m "$model" -p 'data = ' -n $n --temp 2 --seed $seed --no-display-prompt --json-schema "$budget_schema" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ] && grep -q 'constrained output ended by an end-of-generation token' "$tmp/err" && python3 -c "$check_budget" "$tmp/out" 2>"$tmp/py" && ok ||
    bad "token budget -n $n (shortest $shortest bytes) seed $seed rc=$rc: $(cat "$tmp/out") $(tail -2 "$tmp/py") $(tail -2 "$tmp/err")"
done

for seed in 1 2 3; do
  out="$("$brisk" run -m "$model" -p 'color = ' -n 20 --temp 1 --seed $seed --no-display-prompt --choice 'red,green,blue\,ish' 2>/dev/null)"
  case "$out" in red|green|"blue,ish") ok ;; *) bad "choice seed $seed gave '$out'" ;; esac
done

re='[a-z]{2,5}-[0-9]{1,3}(\.[0-9])?'
for seed in 1 2 3; do
  "$brisk" run -m "$model" -p 'tag = ' -n 40 --temp 1 --seed $seed --no-display-prompt --regex "$re" >"$tmp/out" 2>/dev/null
  python3 -c 'import re,sys; s=open(sys.argv[2]).read().rstrip("\n"); sys.exit(0 if re.fullmatch(sys.argv[1], s) else 1)' "$re" "$tmp/out" &&
    ok || bad "regex seed $seed gave '$(cat "$tmp/out")'"
done

# llama.cpp's arithmetic grammar: every line is `expr "=" ws term "\n"`
"$brisk" run -m "$model" -p 'x = ' -n 60 --temp 1 --seed 7 --no-display-prompt \
  --grammar-file "$root/tests/data/constrain/gbnf/arithmetic.gbnf" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/out" ] && python3 -c '
import re, sys
term = r"(?:[a-z][a-z0-9_]*[ \t\n]*|[0-9]+[ \t\n]*|\(.*\)[ \t\n]*)"
s = open(sys.argv[1]).read()[:-1]      # brisk run adds one newline
# a complete output ends with a newline; one cut by -n is a prefix (checked loosely: no stray characters)
assert re.fullmatch(r"[a-z0-9_()+\-*/= \t\n]*", s), s
' "$tmp/out" && ok || bad "gbnf: rc=$rc $(cat "$tmp/out") $(tail -2 "$tmp/err")"
"$brisk" run -m "$model" -p 'x = ' -n 8 --grammar 'root ::= "yes" | "no"' --temp 1 --seed 3 --no-display-prompt >"$tmp/out" 2>/dev/null
case "$(cat "$tmp/out")" in yes|no) ok ;; *) bad "inline grammar gave '$(cat "$tmp/out")'" ;; esac

# speculative decoding under a constraint: greedy tokens identical to plain constrained decoding
for mode in "ngram" "draft -md $model"; do
  # shellcheck disable=SC2086
  "$brisk" run -m "$model" -p 'items = [{"name": "a", "n": 1}, {"name": "b", "n": 2}, ' -n 120 --temp 0 --no-display-prompt \
    --spec $mode --spec-compare --json-schema "$schema" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ] && grep -q "tokens identical to plain: yes" "$tmp/err" && python3 -c "$check_json" "$tmp/out" && ok ||
    bad "spec $mode under a constraint: rc=$rc $(grep 'spec compare' "$tmp/err") $(cat "$tmp/out")"
done

# chat: each reply is constrained from its start
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
if [ -f "$tpl" ]; then
  printf 'pick one\nagain\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 16 --temp 1 --seed 4 --choice 'alpha,beta' >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 0 ] && [ "$(grep -cxE 'alpha|beta' "$tmp/out")" -eq 2 ] && ok || bad "chat --choice rc=$rc: $(cat "$tmp/out") $(tail -2 "$tmp/err")"
fi

# errors
"$brisk" run -m "$model" -p x --json-schema '{"properties":{"a":{"not":{"required":["x"]}}}}' >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "'not'" "$tmp/err" && grep -q "/properties/a" "$tmp/err" && ok || bad "unsupported keyword rc=$rc: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --json-schema '{"type":' >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "not JSON" "$tmp/err" && ok || bad "bad JSON: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --regex 'a' --choice 'a,b' >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "at most one constraint" "$tmp/err" && ok || bad "two constraints: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --regex 'a' --ignore-eos >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && ok || bad "--ignore-eos with a constraint: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --grammar 'root ::= "a' >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "GBNF" "$tmp/err" && ok || bad "bad grammar: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --choice 'a,,b' >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "empty" "$tmp/err" && ok || bad "empty choice: $(cat "$tmp/err")"
"$brisk" run -m "$model" -p x --json-schema-file "$tmp/nope.json" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "nope.json" "$tmp/err" && ok || bad "missing schema file: $(cat "$tmp/err")"

# maskbench: one JSON object on stdout, exit 0, the counts add up, no invalid instance accepted
vocab="$2/vocab/ggml-vocab-llama-bpe.gguf"
[ -f "$vocab" ] || vocab="$model"
"$brisk" maskbench -m "$vocab" "$root/tests/data/constrain/maskbench-sample.jsonl" --first 60 -o json --per-schema >"$tmp/mb" 2>"$tmp/mberr"
rc=$?
[ $rc -eq 0 ] && python3 -c '
import json, sys
text = open(sys.argv[1]).read()
o = json.loads(text)
assert text.count("\n") == 1, "more than one line on stdout"
for k in ["schemas", "passing", "compile_error", "validation_error", "invalidation_error", "timeout", "tokens", "tbm_us", "ttfm_us"]:
    assert k in o, k
for k in ["p25", "p50", "p75", "p90", "p95", "p99", "max"]:
    assert k in o["tbm_us"] and k in o["ttfm_us"], k
assert o["schemas"] == 60 and o["invalidation_error"] == 0 and o["timeout"] == 0, o
assert o["passing"] + o["compile_error"] <= o["schemas"] and o["passing"] >= 45, o
lines = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
assert len(lines) == 60, len(lines)
' "$tmp/mb" "$tmp/mberr" && ok || bad "maskbench -o json rc=$rc: $(cat "$tmp/mb") $(tail -3 "$tmp/mberr")"
"$brisk" maskbench "$root/tests/data/constrain/maskbench-sample.jsonl" >/dev/null 2>&1
[ $? -eq 2 ] && ok || bad "maskbench without -m should be a usage error"
"$brisk" maskbench -m "$vocab" "$tmp/none.jsonl" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && ok || bad "maskbench on a missing file: $(cat "$tmp/err")"
"$brisk" maskbench -m "$tmp/none.gguf" "$root/tests/data/constrain/maskbench-sample.jsonl" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && ok || bad "maskbench with a missing vocabulary: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
