#!/usr/bin/env bash
# End to end: the bundled model generates under real schemas (tests/data/constrain/e2e-schemas.jsonl:
# drawn with a fixed seed from the MaskBench dev schemas brisk compiles), sampled at temperature 1
# with 512 tokens at most; every output must parse and validate under its schema, checked by an
# independent validator (npm ajv@8.17.1 with ajv-formats@3.0.1 and ajv-draft-04@1.0.0, pinned,
# installed under the build tree on first use). Every output must end with an end-of-generation token
# within the 512 tokens (the constraint is given -n as its token budget, so it plans to finish in time)
# and validate; an output cut by the token limit is a failure, as the issue counts it.
# BRISK_CONSTRAIN_E2E_N schemas (default 40, 10 with BRISK_TEST_QUICK; the acceptance run uses all 200). Skips (77) without
# node/npm or the registry.
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
schemas="$root/tests/data/constrain/e2e-schemas.jsonl"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp" 2>/dev/null' EXIT
count="${BRISK_CONSTRAIN_E2E_N:-40}"
# the sanitizer run (BRISK_TEST_QUICK) keeps 10
[ -n "${BRISK_TEST_QUICK:-}" ] && [ -z "${BRISK_CONSTRAIN_E2E_N:-}" ] && count=10
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node/npm absent"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 absent"; exit 77; }
[ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; }
npmdir="$(cd "$(dirname "$brisk")" && pwd)/npm-ajv"
if ! grep -qs '"version": "8.17.1"' "$npmdir/node_modules/ajv/package.json" ||
   ! grep -qs '"version": "3.0.1"' "$npmdir/node_modules/ajv-formats/package.json" ||
   ! grep -qs '"version": "1.0.0"' "$npmdir/node_modules/ajv-draft-04/package.json"; then
  mkdir -p "$npmdir"
  if ! timeout 300 npm install --no-save --no-audit --no-fund --prefix "$npmdir" ajv@8.17.1 ajv-formats@3.0.1 ajv-draft-04@1.0.0 >"$tmp/npm.log" 2>&1; then
    echo "SKIP: npm install ajv failed (registry unreachable?): $(tail -3 "$tmp/npm.log")"; exit 77
  fi
fi

n=0
: >"$tmp/pairs.jsonl"
while IFS= read -r line && [ "$n" -lt "$count" ]; do
  index="$(printf '%s' "$line" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["index"])')"
  printf '%s' "$line" | python3 -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.read())["schema"], ensure_ascii=False))' >"$tmp/schema.json"
  "$brisk" run -m "$model" -c 1024 -p 'data = ' -n 512 --temp 1 --seed "$index" --no-display-prompt \
    --json-schema-file "$tmp/schema.json" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL schema $index: brisk run rc=$rc: $(tail -2 "$tmp/err")"; exit 1; fi
  # cut: generation stopped without an end-of-generation token (brisk run reports how a constrained output ended)
  cut=true; grep -q 'constrained output ended by an end-of-generation token' "$tmp/err" && cut=false
  python3 -c '
import json, sys
out = open(sys.argv[2], encoding="utf-8").read()
if out.endswith("\n"): out = out[:-1]      # brisk run ends the output with a newline
print(json.dumps({"index": int(sys.argv[3]), "schema": json.load(open(sys.argv[1], encoding="utf-8")), "output": out, "cut": sys.argv[4] == "true"}, ensure_ascii=False))
' "$tmp/schema.json" "$tmp/out" "$index" "$cut" >>"$tmp/pairs.jsonl"
  n=$((n+1))
done <"$schemas"
[ "$n" -eq "$count" ] || { echo "FAIL: only $n schemas in $schemas"; exit 1; }
node "$root/tests/data/constrain/validate.mjs" "$npmdir/node_modules" "$tmp/pairs.jsonl"
