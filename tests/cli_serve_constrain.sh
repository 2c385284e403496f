#!/usr/bin/env bash
# brisk serve's structured output and tool calls (docs/SERVER.md, "Structured output and tools"): three
# servers on the bundled model, each with a real chat template of one tool-call family (Qwen3: <tool_call>,
# Llama 3.1: JSON, Mistral Nemo: [TOOL_CALLS]; committed copies in tests/data/templates). The openai npm
# client (pinned openai@6.49.0) drives response_format and tools, every output validated by npm ajv@8.17.1
# (tests/serve/constrain_client.mjs); curl checks the raw errors; /apply-template with tools, a call and its
# result is compared byte for byte with jinja2's rendering (python3-jinja2, as transformers renders it).
# BRISK_TEST_QUICK (the sanitizer runs) trims the client's schemas and seeds. Skips (77) without node/npm or
# the registry, or in a build without libmicrohttpd.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" node-npm model http
data="$root/tests/data/templates"
bdir="$(cd "$(dirname "$brisk")" && pwd)"
npm_pin "$bdir/npm-openai" openai 6.49.0 openai@6.49.0
npm_pin "$bdir/npm-ajv" ajv 8.17.1 ajv@8.17.1 ajv-formats@3.0.1 ajv-draft-04@1.0.0

start hermes -m "$model" --chat-template "$data/Qwen-Qwen3-0.6B.jinja" -c 4096 -np 4 || exit 1
start llama3 -m "$model" --chat-template "$data/meta-llama-Llama-3.1-8B-Instruct.jinja" -c 2048 -np 4 || exit 1
start mistral -m "$model" --chat-template "$data/mistralai-Mistral-Nemo-Instruct-2407.jinja" -c 1024 -np 4 || exit 1
for n in hermes llama3 mistral; do
  grep -q "tool calls: $n format" "$tmp/$n.err" && ok || bad "$n: the template's format is not $n: $(grep 'tool calls' "$tmp/$n.err")"
done
H="http://127.0.0.1:$port_hermes"

# raw errors with curl: OpenAI's shape, the compiler's keyword and pointer
post() { curl -s -o "$tmp/out" -w '%{http_code}' "$H/v1/chat/completions" -H 'Content-Type: application/json' -d "$1"; }
code=$(post '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"a":{"not":{"enum":[1]}}}}}}}')
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["code"] == "unsupported_schema" and "not" in j["error"]["message"] and "/properties/a" in j["error"]["message"] and j["error"]["param"] == "response_format.json_schema.schema"' && ok || bad "curl: unsupported schema: $code $(cat "$tmp/out")"
code=$(post '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}')
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["param"] == "tool_choice.function.name"' && ok || bad "curl: unknown tool: $code $(cat "$tmp/out")"
code=$(post '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"bad name"}}]}')
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["param"] == "tools[0].function.name"' && ok || bad "curl: bad tool name: $code $(cat "$tmp/out")"
code=$(post '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"ignore_eos":true}')
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["param"] == "ignore_eos"' && ok || bad "curl: ignore_eos with a constraint: $code $(cat "$tmp/out")"
code=$(post '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}]}')
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["param"] == "response_format"' && ok || bad "curl: response_format with tools: $code $(cat "$tmp/out")"
# legacy completions take response_format too
code=$(curl -s -o "$tmp/out" -w '%{http_code}' "$H/v1/completions" -d '{"prompt":"x = ","max_tokens":100,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"array","items":{"type":"integer"},"maxItems":3}}}}')
[ "$code" = 200 ] && jcheck "$tmp/out" 'j["choices"][0]["finish_reason"] != "stop" or isinstance(json.loads(j["choices"][0]["text"]), list)' && ok || bad "curl: completions with a schema: $code $(cat "$tmp/out")"
# max_tokens as the constraint's budget: sampled hot with a tight cap, every output still ends complete
# (finish_reason stop, within the cap) and parses with its required keys
for seed in 1 2 3 4 5; do
  code=$(post '{"model":"m","messages":[{"role":"user","content":"data"}],"max_tokens":24,"temperature":1.5,"seed":'$seed',"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"]}}}}')
  [ "$code" = 200 ] && jcheck "$tmp/out" 'j["choices"][0]["finish_reason"] == "stop" and j["usage"]["completion_tokens"] <= 24 and isinstance(json.loads(j["choices"][0]["message"]["content"])["name"], str) and isinstance(json.loads(j["choices"][0]["message"]["content"])["tags"], list)' && ok || bad "curl: tight max_tokens under a schema (seed $seed): $code $(cat "$tmp/out")"
done
# hostile schemas and tools: a 400 naming what is wrong, or a valid answer; the server stays up
rf() {   # SCHEMA-JSON -> $tmp/out, prints the HTTP code
  python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"x"}],"max_tokens":40,"temperature":0,
    "response_format":{"type":"json_schema","json_schema":{"name":"a","schema":json.loads(sys.argv[1])}}}))' "$1" > "$tmp/b.json"
  curl -s -m 300 -o "$tmp/out" -w '%{http_code}' "$H/v1/chat/completions" --data-binary @"$tmp/b.json"
}
deep=$(python3 -c 'import json
s = {"type": "integer"}
for i in range(300): s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
print(json.dumps(s))')
[ "$(rf "$deep")" = 400 ] && jcheck "$tmp/out" '"/properties/a/properties/a" in j["error"]["message"]' && ok || bad "300-deep schema: $(head -c 300 "$tmp/out")"
[ "$(rf "$(python3 -c 'import json; print(json.dumps({"enum": ["v%d" % i for i in range(5000)]}))')")" = 200 ] &&
  jcheck "$tmp/out" 'j["choices"][0]["finish_reason"] != "stop" or json.loads(j["choices"][0]["message"]["content"]) in ["v%d" % i for i in range(5000)]' && ok || bad "5000-value enum: $(head -c 300 "$tmp/out")"
[ "$(rf 'false')" = 400 ] && jcheck "$tmp/out" '"accepts nothing" in j["error"]["message"] and j["error"]["code"] == "invalid_schema"' && ok || bad "schema false: $(cat "$tmp/out")"
[ "$(rf '{"$ref": "#"}')" = 400 ] && ok || bad "schema that only refers to itself: $(cat "$tmp/out")"
[ "$(rf '{"$ref": "#/$defs/nope"}')" = 400 ] && jcheck "$tmp/out" '"does not resolve" in j["error"]["message"]' && ok || bad "dangling \$ref: $(cat "$tmp/out")"
[ "$(rf '{"type": "string", "pattern": "(a|b|c|d)*x{1000}(y|z){500}"}')" = 200 ] && ok || bad "big pattern: $(head -c 300 "$tmp/out")"
python3 -c 'import json; print(json.dumps({"messages":[{"role":"user","content":"x"}],"max_tokens":4,"tools":[{"type":"function","function":{"name":"f%d" % i}} for i in range(129)]}))' > "$tmp/b.json"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' "$H/v1/chat/completions" --data-binary @"$tmp/b.json")
[ "$code" = 400 ] && jcheck "$tmp/out" 'j["error"]["param"] == "tools"' && ok || bad "129 tools: $code $(cat "$tmp/out")"
python3 -c 'import json; print(json.dumps({"messages":[{"role":"user","content":"x"}],"max_tokens":60,"temperature":0,"tool_choice":"required","parallel_tool_calls":False,
  "tools":[{"type":"function","function":{"name":"f%d" % i}} for i in range(47)] + [{"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{"k":{"enum":list(range(100))}},"required":["k"]}}}]}))' > "$tmp/b.json"
code=$(curl -s -m 300 -o "$tmp/out" -w '%{http_code}' "$H/v1/chat/completions" --data-binary @"$tmp/b.json")
[ "$code" = 200 ] && jcheck "$tmp/out" 'j["choices"][0]["finish_reason"] == "length" or (j["choices"][0]["finish_reason"] == "tool_calls" and json.loads(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]).get("k", 0) in range(100))' && ok || bad "48 tools: $code $(head -c 400 "$tmp/out")"
curl -s "$H/health" | grep -q ok && ok || bad "the server is down after the hostile schemas"

# a template without a tool-call format: 400 for tools, unless tool_choice is "none"
printf '%s' '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}' > "$tmp/plain.jinja"
start plain -m "$model" --chat-template "$tmp/plain.jinja" -c 512 -np 1 || exit 1
code=$(curl -s -o "$tmp/out" -w '%{http_code}' "http://127.0.0.1:$port_plain/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":4}')
[ "$code" = 400 ] && jcheck "$tmp/out" '"no tool-call format" in j["error"]["message"]' && ok || bad "curl: tools on a plain template: $code $(cat "$tmp/out")"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' "http://127.0.0.1:$port_plain/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","max_tokens":4}')
[ "$code" = 200 ] && ok || bad "curl: tool_choice none on a plain template: $code $(cat "$tmp/out")"

# the prompt with tools, an assistant call and the tool's result, against jinja2
if python3 -c 'import jinja2' 2>/dev/null; then
  conv='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Zürich?"},{"role":"assistant","content":null,"tool_calls":[{"id":"abcDEF123","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Zürich\", \"unit\": \"celsius\"}"}}]},{"role":"tool","tool_call_id":"abcDEF123","name":"get_weather","content":"{\"t\": 21}"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"]}}}]}'
  printf '%s' "$conv" > "$tmp/conv.json"
  for n in hermes llama3 mistral; do
    case $n in hermes) t=Qwen-Qwen3-0.6B;; llama3) t=meta-llama-Llama-3.1-8B-Instruct;; mistral) t=mistralai-Mistral-Nemo-Instruct-2407;; esac
    p=port_$n
    curl -s "http://127.0.0.1:${!p}/apply-template" -d @"$tmp/conv.json" > "$tmp/brisk.json"
    # the bundled model's BOS and EOS token strings (brisk inspect: tokens 1 and 2)
    if python3 "$root/tests/serve/render_jinja.py" "$data/$t.jinja" "$tmp/conv.json" "$tmp/brisk.json" '<s>' '</s>'; then ok
    else bad "$n: /apply-template differs from jinja2"; fi
  done
else
  echo "note: python3-jinja2 absent; the rendered prompts are not compared"
fi

timeout 800 node "$root/tests/serve/constrain_client.mjs" "$bdir/npm-openai/node_modules" "$bdir/npm-ajv/node_modules" \
  "$H/v1" "http://127.0.0.1:$port_llama3/v1" "http://127.0.0.1:$port_mistral/v1" && ok || bad "constrain_client.mjs"

for n in hermes llama3 mistral plain; do p=pid_$n; kill -TERM "${!p}"; done
for n in hermes llama3 mistral plain; do
  p=pid_$n; wait "${!p}"; r=$?
  [ $r -eq 0 ] && ok || bad "server $n exited $r: $(tail -3 "$tmp/$n.err")"
done
echo "cli_serve_constrain: $pass passed, $fail failed"
[ $fail -eq 0 ]
