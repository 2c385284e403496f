#!/usr/bin/env bash
# POST /v1/embeddings: shapes and errors with curl, then the pinned openai npm
# client (float and base64 equal, unit norm, alone vs in a batch identical),
# and the vector against llama.cpp's for the same model and text
# (tests/data/embed/pycode-last.json, recorded as its README says).
# Skips (77) in a build without libmicrohttpd; the npm part skips without node/npm.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" model http
ref="$root/tests/data/embed/pycode-last.json"
start e -m "$model" -c 64 --api-key k1 -a tiny || exit 1
url="http://127.0.0.1:$port_e"
post() {   # post NAME BODY [AUTH]: status in $tmp/NAME.code, body in $tmp/NAME.json
  curl -s -o "$tmp/$1.json" -w '%{http_code}' -H "Authorization: Bearer ${3:-k1}" -H 'Content-Type: application/json' \
    --data-binary "$2" "$url/v1/embeddings" >"$tmp/$1.code"
}
expect() {  # expect NAME CODE PYTHON-EXPR
  local code; code=$(cat "$tmp/$1.code")
  if [ "$code" != "$2" ]; then bad "$1: status $code, want $2: $(head -c 300 "$tmp/$1.json")"; return; fi
  if jcheck "$tmp/$1.json" "$3"; then ok; else bad "$1: $3: $(head -c 300 "$tmp/$1.json")"; fi
}

# the reference: llama.cpp's vector for the same text, cosine >= 0.9999
python3 - "$ref" >"$tmp/ref.body" <<'PY'
import json, sys
print(json.dumps({"input": json.load(open(sys.argv[1]))["input"], "model": "x"}))
PY
post ref "$(cat "$tmp/ref.body")"
expect ref 200 "j['object']=='list' and j['model']=='tiny' and len(j['data'])==1 and j['data'][0]['object']=='embedding' and j['data'][0]['index']==0 and len(j['data'][0]['embedding'])==192"
python3 - "$ref" "$tmp/ref.json" <<'PY' && ok || bad "reference: brisk's vector differs from llama.cpp's"
import json, math, sys
r = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
u, v = r["embedding"], b["data"][0]["embedding"]
cos = sum(x * y for x, y in zip(u, v)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))
norm = math.sqrt(sum(y * y for y in v))
print(f"reference: cosine {cos:.7f}, max |diff| {max(abs(x - y) for x, y in zip(u, v)):.2e}, norm {norm:.7f}, "
      f"prompt_tokens {b['usage']['prompt_tokens']} (llama.cpp {r['prompt_tokens']})")
sys.exit(0 if cos >= 0.9999 and abs(norm - 1) < 1e-5 and b["usage"]["prompt_tokens"] == r["prompt_tokens"]
         and b["usage"]["total_tokens"] == r["prompt_tokens"] else 1)
PY

# token ids give the same vector as the text they tokenize to
curl -s -H 'Authorization: Bearer k1' "$url/tokenize" -d '{"content":"def add(a, b):","add_special":true}' >"$tmp/tok.json"
ids=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tokens"]))' "$tmp/tok.json")
post ids "{\"input\":[$ids, \"def add(a, b):\"]}"
expect ids 200 "len(j['data'])==2 and [d['index'] for d in j['data']]==[0,1] and j['data'][0]['embedding']==j['data'][1]['embedding'] and j['usage']['prompt_tokens']==2*$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$ids")"
post ids1 "{\"input\":$ids}"
expect ids1 200 "len(j['data'])==1 and j['usage']['prompt_tokens']==$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$ids")"

# errors: 400 naming the field, 401 without the key
post nokey '{"input":"x"}' wrong
expect nokey 401 "j['error']['code']=='invalid_api_key'"
post noinput '{"model":"x"}'
expect noinput 400 "j['error']['param']=='input'"
post empty '{"input":[]}'
expect empty 400 "j['error']['param']=='input'"
post emptystr '{"input":["a",""]}'
expect emptystr 400 "j['error']['param']=='input[1]'"
post badtype '{"input":["a",3.5]}'
expect badtype 400 "j['error']['param']=='input[1]'"
post badid '{"input":[[1,2,999999]]}'
expect badid 400 "j['error']['param']=='input[0]' and 'item 2' in j['error']['message']"
post negid '{"input":[1,-1]}'
expect negid 400 "j['error']['param']=='input'"
post fmt '{"input":"a","encoding_format":"int8"}'
expect fmt 400 "j['error']['param']=='encoding_format'"
post dims '{"input":"a","dimensions":64}'
expect dims 400 "j['error']['param']=='dimensions' and '192' in j['error']['message']"
post dimsok '{"input":"a","dimensions":192}'
expect dimsok 200 "len(j['data'][0]['embedding'])==192"
long=$(python3 -c 'print("{\"input\":[\"x\", " + str(list(range(1, 80))) + "]}")')
post long "$long"
expect long 400 "j['error']['param']=='input[1]' and j['error']['code']=='context_length_exceeded' and '64' in j['error']['message'] and '79' in j['error']['message']"
post long1 "$(python3 -c 'print("{\"input\":" + str(list(range(1, 80))) + "}")')"
expect long1 400 "j['error']['param']=='input' and j['error']['code']=='context_length_exceeded'"
post many "{\"input\":[$(python3 -c 'print(",".join(["\"a\""] * 257))')]}"
expect many 400 "j['error']['param']=='input' and '256' in j['error']['message']"
post notjson '{"input":'
expect notjson 400 "j['error']['code']=='invalid_json'"
# a generation running at the same time is not disturbed: same text as alone
c1=$(curl -s -H 'Authorization: Bearer k1' "$url/v1/completions" -d '{"prompt":"def f(x):","max_tokens":24,"temperature":0}')
curl -s -H 'Authorization: Bearer k1' "$url/v1/completions" -d '{"prompt":"def f(x):","max_tokens":24,"temperature":0}' >"$tmp/c2.json" &
cpid=$!
for k in 1 2 3; do post during "{\"input\":[\"def add(a, b):\", $ids]}"; done
wait $cpid
expect during 200 "j['data'][0]['embedding']==j['data'][1]['embedding']"
python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.load(open(sys.argv[2])); sys.exit(0 if a["choices"][0]["text"]==b["choices"][0]["text"] and a["choices"][0]["text"] else 1)' \
  "$c1" "$tmp/c2.json" && ok || bad "a completion run alongside embeddings changed: $c1 vs $(cat "$tmp/c2.json")"

# the real openai client: float vs base64, alone vs in a batch, unit norm
npmdir="$(cd "$(dirname "$brisk")" && pwd)/npm-openai"
if command -v node >/dev/null && command -v npm >/dev/null; then
  if ! grep -qs '"version": "6.49.0"' "$npmdir/node_modules/openai/package.json"; then
    mkdir -p "$npmdir"
    timeout 300 npm install --no-save --no-audit --no-fund --prefix "$npmdir" openai@6.49.0 >"$tmp/npm.log" 2>&1 || true
  fi
  if grep -qs '"version": "6.49.0"' "$npmdir/node_modules/openai/package.json"; then
    timeout 60 node "$root/tests/serve/embed_client.mjs" "$npmdir/node_modules" "$url/v1" k1 && ok || bad "openai client checks"
  else
    echo "note: openai@6.49.0 not installable here; the npm client part did not run"
  fi
else
  echo "note: node/npm absent; the npm client part did not run"
fi

kill -TERM "$pid_e"; wait "$pid_e" || bad "server exit status $?"

# a model whose GGUF says pooling_type 1 (mean) is mean-pooled, as llama.cpp
# does (tests/data/embed/pycode-mean.json); a long input spans several chunks
python3 "$root/tests/serve/gguf_set_pooling.py" "$model" "$tmp/mean.gguf" 1 || bad "gguf_set_pooling"
start m -m "$tmp/mean.gguf" -c 256 || exit 1
url="http://127.0.0.1:$port_m"
python3 - "$root/tests/data/embed/pycode-mean.json" >"$tmp/mref.body" <<'PY'
import json, sys
print(json.dumps({"input": json.load(open(sys.argv[1]))["input"]}))
PY
post mref "$(cat "$tmp/mref.body")"
python3 - "$root/tests/data/embed/pycode-mean.json" "$tmp/mref.json" <<'PY' && ok || bad "mean pooling: brisk's vector differs from llama.cpp's"
import json, math, sys
r = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
u, v = r["embedding"], b["data"][0]["embedding"]
cos = sum(x * y for x, y in zip(u, v)) / math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))
print(f"mean reference: cosine {cos:.7f}, max |diff| {max(abs(x - y) for x, y in zip(u, v)):.2e}")
sys.exit(0 if cos >= 0.9999 else 1)
PY
longtext=$(python3 -c 'print(" ".join("x%d = %d" % (i, i) for i in range(25)))')
post mlong "{\"input\":[\"$longtext\", \"a\", \"$longtext\"]}"
expect mlong 200 "j['usage']['prompt_tokens'] > 130 and j['data'][0]['embedding']==j['data'][2]['embedding'] and abs(sum(x*x for x in j['data'][0]['embedding'])-1) < 1e-5"
kill -TERM "$pid_m"; wait "$pid_m" || bad "mean server exit status $?"
echo "cli_serve_embed: $pass passed, $fail failed"
[ $fail -eq 0 ]
