#!/usr/bin/env bash
# brisk serve's accounting and its session-8 flags, over HTTP with curl:
# exact cached_tokens (one at a time and several at once, against the prefix
# cache's whole-block rule), a stop string in one choice of n = 2 stops that
# choice computing (sampled_tokens == completion_tokens), usage.brisk, GET
# /metrics (strictly parsed by tests/serve/prom.py, and by promtool when it is
# installed) whose counters equal the sums of the usage returned, llama.cpp's
# POST /completion (text and token prompts, n_probs, stop words, stream),
# n_probs and min_tokens on /v1/completions, greedy output identical with
# speculation on and off, --api-key-file, --cors-origins, --log-prompts,
# --queue-timeout (503 queue_timeout, non-streamed and streamed) and the
# header deadline (a slowloris connection is closed, a normal request is
# served meanwhile). No wall-clock assertion: waits are bounded, never timed.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" curl python3 model http
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
C="curl -s --max-time 60"

printf '# keys for the test\n\n  key-one  \nkey-two\n' >"$tmp/keys"
start main -m "$model" --chat-template "$tpl" -c 512 -np 4 --spec ngram --api-key-file "$tmp/keys" \
  --cors-origins "http://ok.example, http://also.example" || exit 1
U="http://127.0.0.1:$port_main"
K=(-H "Authorization: Bearer key-one")
usage=()   # response files whose usage the metrics must add up
post() {   # post NAME PATH JSON: the response in $tmp/NAME, counted in the metrics sums
  $C "${K[@]}" "$U$2" -d "$3" >"$tmp/$1"
  usage+=("$tmp/$1")
}

# ---- keys from --api-key-file: both work, anything else is 401; /health and /metrics are public
[ "$($C -o /dev/null -w '%{http_code}' -H 'X-Api-Key: key-two' "$U/v1/models")" = 200 ] && ok || bad "the second key of the file"
[ "$($C -o /dev/null -w '%{http_code}' "${K[@]}" "$U/v1/models")" = 200 ] && ok || bad "the first key of the file"
[ "$($C -o /dev/null -w '%{http_code}' -H 'X-Api-Key: key' "$U/v1/models")" = 401 ] && ok || bad "a key prefix is refused"
[ "$($C -o /dev/null -w '%{http_code}' -H 'X-Api-Key: # keys for the test' "$U/v1/models")" = 401 ] && ok || bad "a comment line is no key"
[ "$($C -o /dev/null -w '%{http_code}' "$U/metrics")" = 200 ] && ok || bad "/metrics is public"

# ---- CORS: listed origins only, preflight answered
$C -D "$tmp/h1" -o /dev/null -H "Origin: http://also.example" "$U/health"
$C -D "$tmp/h2" -o /dev/null -H "Origin: http://evil.example" "$U/health"
grep -qi "^Access-Control-Allow-Origin: http://also.example" "$tmp/h1" && ! grep -qi "^Access-Control-Allow-Origin" "$tmp/h2" && ok \
  || bad "CORS origins: $(cat "$tmp/h1" "$tmp/h2")"
code=$($C -D "$tmp/h3" -o /dev/null -w '%{http_code}' -X OPTIONS -H "Origin: http://ok.example" -H "Access-Control-Request-Method: POST" "$U/v1/chat/completions")
[ "$code" = 204 ] && grep -qi "^Access-Control-Allow-Methods: POST" "$tmp/h3" && grep -qi "^Access-Control-Allow-Headers: .*Authorization" "$tmp/h3" && ok \
  || bad "CORS preflight: $code $(cat "$tmp/h3")"

# ---- exact cached_tokens: the prefix cache gives whole 32-token blocks of what was computed before
python3 - "$tmp" <<'PY'
import json, random, sys
t = sys.argv[1]
rng = random.Random(7)
ids = lambda n: [rng.randrange(300, 4000) for _ in range(n)]
a, x, y, fresh = ids(70), ids(20), ids(12), ids(50)
req = lambda p: json.dumps({"prompt": p, "max_tokens": 2, "temperature": 0, "ignore_eos": True})
open(t + "/qa", "w").write(req(a))
open(t + "/qc1", "w").write(req(a + x))        # 64 of a's 70 tokens are in whole blocks
open(t + "/qc2", "w").write(req(fresh))        # nothing
open(t + "/qc3", "w").write(req(a[:40] + y))   # 32
PY
post ca /v1/completions "$(cat "$tmp/qa")"
jcheck "$tmp/ca" 'j["usage"]["prompt_tokens"] == 70 and j["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 and j["usage"]["brisk"]["cached_tokens"] == 0' && ok || bad "cold request: cached 0"
for k in 1 2 3; do $C "${K[@]}" "$U/v1/completions" --data-binary @"$tmp/qc$k" >"$tmp/cc$k" & eval "cp$k=$!"; done
wait $cp1 $cp2 $cp3
usage+=("$tmp/cc1" "$tmp/cc2" "$tmp/cc3")
jcheck "$tmp/cc1" 'j["usage"]["prompt_tokens_details"]["cached_tokens"] == 64' && ok || bad "concurrent: a + 20 tokens, cached 64"
jcheck "$tmp/cc2" 'j["usage"]["prompt_tokens_details"]["cached_tokens"] == 0' && ok || bad "concurrent: fresh prompt, cached 0"
jcheck "$tmp/cc3" 'j["usage"]["prompt_tokens_details"]["cached_tokens"] == 32' && ok || bad "concurrent: a[:40] + 12 tokens, cached 32"

# ---- usage.brisk: the cost estimate and the times
jcheck "$tmp/cc1" 'all(k in j["usage"]["brisk"] for k in ("queue_ms", "prefill_ms", "decode_ms", "cached_tokens", "flops", "bytes_read", "energy_j")) and j["usage"]["brisk"]["flops"] > 0 and j["usage"]["brisk"]["bytes_read"] > 0 and j["usage"]["brisk"]["energy_j"] > 0 and j["usage"]["brisk"]["queue_ms"] >= 0 and j["usage"]["brisk"]["prefill_ms"] >= 0 and j["usage"]["brisk"]["sampled_tokens"] == j["usage"]["completion_tokens"]' \
  && ok || bad "usage.brisk"
# more prompt computed, more FLOPs: the fresh 50-token prompt costs more than the 84-token one with 64 cached
jcheck "$tmp/cc2" 'j["usage"]["brisk"]["flops"] > json.load(open("'"$tmp/cc1"'"))["usage"]["brisk"]["flops"]' && ok || bad "FLOPs follow the tokens computed"

# ---- a stop string ends one choice of n = 2 and that choice stops computing
found=0
for seed in 1 2 3 4 5 6 7 8 9 10 11 12; do
  $C "${K[@]}" "$U/v1/completions" -d "{\"prompt\": \"def f(x):\", \"max_tokens\": 40, \"temperature\": 1.0, \"seed\": $seed, \"n\": 2, \"stop\": \"return\", \"ignore_eos\": true, \"logprobs\": 0}" >"$tmp/n2s$seed"
  usage+=("$tmp/n2s$seed")
  if jcheck "$tmp/n2s$seed" 'sorted(c["finish_reason"] for c in j["choices"]) == ["length", "stop"]' >/dev/null; then found=$seed; break; fi
done
[ $found -gt 0 ] && ok || bad "no seed in 1..12 gave one choice ending on the stop string and one running to max_tokens"
if [ $found -gt 0 ]; then
  jcheck "$tmp/n2s$found" 'j["usage"]["completion_tokens"] == sum(len(c["logprobs"]["tokens"]) for c in j["choices"]) and j["usage"]["brisk"]["sampled_tokens"] == j["usage"]["completion_tokens"] and 40 < j["usage"]["completion_tokens"] < 80' \
    && ok || bad "the stopped choice went on computing: $(grep -o '"usage".*' "$tmp/n2s$found")"
fi

# ---- streamed, chat, n_probs, min_tokens type check
$C "${K[@]}" -N "$U/v1/completions" -d '{"prompt": "import os\n", "max_tokens": 6, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}' >"$tmp/st"
python3 -c 'import json,sys; ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l != "data: [DONE]"]; json.dump(json.loads(ev[-1]), open(sys.argv[2], "w"))' "$tmp/st" "$tmp/stu"
jcheck "$tmp/stu" 'j["choices"] == [] and j["usage"]["completion_tokens"] == 6 and "brisk" in j["usage"]' && ok || bad "stream usage with brisk"
usage+=("$tmp/stu")
post chat /v1/chat/completions '{"messages": [{"role": "user", "content": "def g():"}], "max_tokens": 5, "temperature": 0}'
jcheck "$tmp/chat" 'j["usage"]["completion_tokens"] >= 1 and "brisk" in j["usage"]' && ok || bad "chat usage"
post np /v1/completions '{"prompt": "def add(a, b):", "max_tokens": 3, "temperature": 0, "n_probs": 2, "ignore_eos": true}'
jcheck "$tmp/np" 'len(j["choices"][0]["logprobs"]["top_logprobs"]) == 3 and all(len(t) == 2 for t in j["choices"][0]["logprobs"]["top_logprobs"])' && ok || bad "n_probs on /v1/completions"
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/v1/completions" -d '{"prompt": "x", "min_tokens": "5"}')" = 400 ] && jcheck "$tmp/e" 'j["error"]["param"] == "min_tokens"' && ok || bad "min_tokens type"
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/v1/completions" -d '{"prompt": "x", "spec": "draft"}')" = 400 ] && jcheck "$tmp/e" 'j["error"]["param"] == "spec"' && ok || bad "spec value"
post mt /v1/completions '{"prompt": "x = 1\n", "max_tokens": 8, "min_tokens": 8, "temperature": 0}'
jcheck "$tmp/mt" 'j["usage"]["completion_tokens"] == 8' && ok || bad "min_tokens 8 of max 8"

# ---- echo with prompt logprobs (what lm-eval sends: echo, logprobs, max_tokens 0)
post ec0 /v1/completions '{"prompt": "def add(a, b):\n    return", "max_tokens": 0, "echo": true, "logprobs": 2, "temperature": 0}'
$C "${K[@]}" "$U/tokenize" -d '{"content": "def add(a, b):\n    return", "add_special": true, "with_pieces": true}' >"$tmp/ectk"
jcheck "$tmp/ec0" '(lambda t, c: c["text"] == "def add(a, b):\n    return" and c["logprobs"]["tokens"] == [x["piece"] for x in t] and c["logprobs"]["token_logprobs"][0] is None and c["logprobs"]["top_logprobs"][0] is None and all(v <= 0 for v in c["logprobs"]["token_logprobs"][1:]) and all(len(a) == 2 for a in c["logprobs"]["top_logprobs"][1:]) and c["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 0 and j["usage"]["prompt_tokens"] == len(t))(json.load(open("'"$tmp/ectk"'"))["tokens"], j["choices"][0])' \
  && ok || bad "echo with max_tokens 0: $(head -c 600 "$tmp/ec0")"
# the prompt's logprobs are the logprobs those tokens had when they were generated (an independent path: sampling rows)
post ecg /v1/completions '{"prompt": "class Foo:", "max_tokens": 3, "logprobs": 1, "temperature": 0, "ignore_eos": true}'
ids=$($C "${K[@]}" "$U/tokenize" -d '{"content": "class Foo:", "add_special": true}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
gen=$($C "${K[@]}" "$U/tokenize" -d "$(python3 -c 'import json,sys; print(json.dumps({"content": json.load(open(sys.argv[1]))["choices"][0]["text"]}))' "$tmp/ecg")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
post ec1 /v1/completions "{\"prompt\": $(python3 -c 'import sys, json; print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2])))' "$ids" "$gen"), \"max_tokens\": 1, \"echo\": true, \"logprobs\": 1, \"temperature\": 0}"
jcheck "$tmp/ec1" '(lambda g, n: len(g) == 3 and j["choices"][0]["logprobs"]["token_logprobs"][n:n + 3] == g)(json.load(open("'"$tmp/ecg"'"))["choices"][0]["logprobs"]["token_logprobs"], len('"$ids"'))' \
  && ok || bad "echo logprobs differ from the generated tokens' logprobs (or the retokenization differs): $(head -c 400 "$tmp/ec1")"
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/v1/completions" -d '{"prompt": "x", "echo": true, "stream": true}')" = 400 ] && jcheck "$tmp/e" 'j["error"]["param"] == "echo"' && ok || bad "echo with stream"
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "x"}], "echo": true}')" = 400 ] && ok || bad "echo on chat"
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/v1/completions" -d '{"prompt": "x", "max_tokens": 0}')" = 400 ] && ok || bad "max_tokens 0 without echo"

# ---- speculation: greedy output and logprobs identical with it on (the server's --spec ngram) and off
rep='x = 1\ny = 2\nz = 3\nx = 1\ny = 2\nz = 3\nx = 1\ny = 2\nz = 3\n'
post spon /v1/completions "{\"prompt\": \"$rep\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}"
post spoff /v1/completions "{\"prompt\": \"$rep\", \"max_tokens\": 32, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1, \"spec\": \"off\"}"
jcheck "$tmp/spon" 'j["usage"]["brisk"]["drafted_tokens"] > 0 and j["usage"]["brisk"]["accepted_tokens"] > 0' && ok || bad "--spec ngram drafted nothing: $(grep -o '"brisk".*' "$tmp/spon")"
jcheck "$tmp/spoff" 'j["usage"]["brisk"]["drafted_tokens"] == 0' && ok || bad "spec off per request still drafted"
jcheck "$tmp/spon" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["choices"][0]["logprobs"]["tokens"] == o["choices"][0]["logprobs"]["tokens"] and j["usage"]["completion_tokens"] == 32)(json.load(open("'"$tmp/spoff"'")))' \
  && ok || bad "greedy output differs with speculation on and off"

# ---- llama.cpp's /completion
$C "${K[@]}" "$U/completion" -d '{"prompt": "def add(a, b):", "n_predict": 8, "temperature": 0, "n_probs": 2, "cache_prompt": true}' >"$tmp/lc1"
jcheck "$tmp/lc1" 'j["stop"] is True and j["tokens_predicted"] == 8 and j["tokens_evaluated"] == 5 and j["stop_type"] == "limit" and len(j["completion_probabilities"]) == 8 and all(len(p["top_logprobs"]) == 2 and p["logprob"] <= 0 and "bytes" in p for p in j["completion_probabilities"]) and j["content"] == "".join(p["token"] for p in j["completion_probabilities"]) and [p["id"] for p in j["completion_probabilities"]] == j["tokens"] and set(j["timings"]) >= {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"}' \
  && ok || bad "/completion shape"
$C "${K[@]}" "$U/v1/completions" -d '{"prompt": "def add(a, b):", "max_tokens": 8, "temperature": 0}' >"$tmp/lc1v"
jcheck "$tmp/lc1" 'j["content"] == json.load(open("'"$tmp/lc1v"'"))["choices"][0]["text"]' && ok || bad "/completion text differs from /v1/completions"
usage+=("$tmp/lc1v")
ids=$($C "${K[@]}" "$U/tokenize" -d '{"content": "def add(a, b):", "add_special": true}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
$C "${K[@]}" "$U/completion" -d "{\"prompt\": $ids, \"n_predict\": 8, \"temperature\": 0}" >"$tmp/lc2"
jcheck "$tmp/lc2" 'j["content"] == json.load(open("'"$tmp/lc1"'"))["content"] and j["timings"]["cache_n"] >= 0' && ok || bad "/completion with a token prompt"
cut=$(python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["content"]; print(json.dumps(t[4:9]))' "$tmp/lc1")
$C "${K[@]}" "$U/completion" -d "{\"prompt\": \"def add(a, b):\", \"n_predict\": 8, \"temperature\": 0, \"stop\": [$cut]}" >"$tmp/lc3"
jcheck "$tmp/lc3" 'j["stop_type"] == "word" and j["stopping_word"] == '"$cut"' and j["content"] == json.load(open("'"$tmp/lc1"'"))["content"][:4]' && ok || bad "/completion stop word: $(head -c 300 "$tmp/lc3")"
$C "${K[@]}" -N "$U/completion" -d '{"prompt": "def add(a, b):", "n_predict": 8, "temperature": 0, "stream": true}' >"$tmp/lcs"
sse "$tmp/lcs" '"".join(e["content"] for e in ev) == json.load(open("'"$tmp/lc1"'"))["content"] and ev[-1]["stop"] is True and all(e["stop"] is False for e in ev[:-1]) and len(ev) == 9 and "[DONE]" not in raw' \
  && ok || bad "/completion stream"
for f in lc1 lc2 lc3; do usage+=("$tmp/$f"); done
lcs_last=$(python3 -c 'import json,sys; ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]; print(ev[-1])' "$tmp/lcs")
printf '%s' "$lcs_last" >"$tmp/lcsf"; usage+=("$tmp/lcsf")
[ "$($C -o "$tmp/e" -w '%{http_code}' "${K[@]}" "$U/completion" -d '{"prompt": "x", "n": 2}')" = 400 ] && ok || bad "/completion n > 1"

# ---- /metrics: well formed, and its counters are the sums of every usage returned above
sleep 0.2
$C "$U/metrics" >"$tmp/metrics"
python3 "$root/tests/serve/prom.py" "$tmp/metrics" && ok || bad "/metrics is not well-formed Prometheus text"
python3 - "$root/tests/serve" "$tmp/metrics" "${usage[@]}" <<'PY' && ok || bad "/metrics counters differ from the usage returned"
import json, sys
sys.path.insert(0, sys.argv[1])
import prom
fams = prom.parse(open(sys.argv[2]).read())
want = dict(prompt=0, cached=0, gen=0, n=0, flops=0, bytes=0, energy=0.0, drafted=0, accepted=0, queue=0.0)
for f in sys.argv[3:]:
    j = json.load(open(f))
    want["n"] += 1
    if "usage" in j:
        u = j["usage"]; b = u["brisk"]
        want["prompt"] += u["prompt_tokens"]; want["cached"] += u["prompt_tokens_details"]["cached_tokens"]
        want["gen"] += u["completion_tokens"]
        want["flops"] += b["flops"]; want["bytes"] += b["bytes_read"]; want["energy"] += b["energy_j"]
        want["drafted"] += b["drafted_tokens"]; want["accepted"] += b["accepted_tokens"]; want["queue"] += b["queue_ms"] / 1e3
    else:   # llama.cpp's /completion shape
        want["prompt"] += j["tokens_evaluated"]; want["cached"] += j["timings"]["cache_n"]; want["gen"] += j["tokens_predicted"]
        want["flops"] = None   # /completion does not report the cost: those sums are not checked
got = dict(prompt=prom.get(fams, "brisk:prompt_tokens_total"), cached=prom.get(fams, "brisk:prompt_tokens_cached_total"),
           computed=prom.get(fams, "brisk:prompt_tokens_computed_total"), gen=prom.get(fams, "brisk:generation_tokens_total"),
           hits=prom.get(fams, "brisk:prefix_cache_hits_total"), queries=prom.get(fams, "brisk:prefix_cache_queries_total"),
           n=sum(v for s, l, v in fams["brisk:request_success_total"]["samples"]),
           e2e=prom.get(fams, "brisk:e2e_request_latency_seconds_count"),
           drafted=prom.get(fams, "brisk:spec_decode_num_draft_tokens_total"),
           accepted=prom.get(fams, "brisk:spec_decode_num_accepted_tokens_total"))
bad = []
for k in ("prompt", "cached", "gen", "n", "drafted", "accepted"):
    if got[k] != want[k]: bad.append("%s: metrics %s, usage %s" % (k, got[k], want[k]))
if got["computed"] != want["prompt"] - want["cached"]: bad.append("computed %s" % got["computed"])
if got["hits"] != want["cached"] or got["queries"] != want["prompt"]: bad.append("prefix cache hits/queries")
if got["e2e"] != want["n"]: bad.append("e2e count %s" % got["e2e"])
if prom.get(fams, "brisk:num_requests_running") != 0 or prom.get(fams, "brisk:kv_blocks_used") != 0: bad.append("idle gauges")
if prom.get(fams, "brisk:kv_blocks_cached") <= 0: bad.append("no cached blocks")
if bad: print("\n".join(bad)); sys.exit(1)
PY
# the cost sums, checked on a fresh count: two requests, /metrics before and after
$C "$U/metrics" >"$tmp/m0"
post cs1 /v1/completions '{"prompt": "class A:", "max_tokens": 4, "temperature": 0}'
post cs2 /v1/completions '{"prompt": "class B:", "max_tokens": 4, "temperature": 0}'
$C "$U/metrics" >"$tmp/m1"
python3 - "$root/tests/serve" "$tmp/m0" "$tmp/m1" "$tmp/cs1" "$tmp/cs2" <<'PY' && ok || bad "/metrics cost sums differ from usage.brisk"
import json, sys
sys.path.insert(0, sys.argv[1])
import prom
a, b = (prom.parse(open(f).read()) for f in sys.argv[2:4])
us = [json.load(open(f))["usage"]["brisk"] for f in sys.argv[4:]]
d = lambda n: prom.get(b, n) - prom.get(a, n)
ok = d("brisk:request_flops_total") == sum(u["flops"] for u in us) and d("brisk:request_bytes_read_total") == sum(u["bytes_read"] for u in us)
ok = ok and abs(d("brisk:request_energy_joules_total") - sum(u["energy_j"] for u in us)) <= 1e-9 * max(1.0, prom.get(b, "brisk:request_energy_joules_total"))
ok = ok and abs(d("brisk:request_queue_time_seconds_sum") - sum(u["queue_ms"] for u in us) / 1e3) < 1e-6
ok = ok and abs(d("brisk:request_prefill_time_seconds_sum") - sum(u["prefill_ms"] for u in us) / 1e3) < 1e-6
ok = ok and d("brisk:time_to_first_token_seconds_count") == 2 and d("brisk:inter_token_latency_seconds_count") == 6
sys.exit(0 if ok else 1)
PY
if command -v promtool >/dev/null; then
  promtool check metrics <"$tmp/metrics" >"$tmp/promtool.out" 2>&1; rc=$?
  # its only lint on brisk's names is the advisory about colons (vLLM's names draw it too)
  if { [ $rc -eq 0 ] || [ $rc -eq 3 ]; } && ! grep -v "metric names should not contain ':'" "$tmp/promtool.out" | grep -q .; then ok
  else bad "promtool check metrics ($rc): $(head -20 "$tmp/promtool.out")"; fi
else
  echo "note: promtool is not installed (Debian prometheus, scripts/bootstrap.sh); the format was checked by tests/serve/prom.py only"
fi
$C "${K[@]}" "$U/v1/completions" -d '{"prompt": "SECRET_PROMPT_41 = 1", "max_tokens": 1}' >/dev/null
grep -q "cmpl-" "$tmp/main.err" && ! grep -q "SECRET_PROMPT_41" "$tmp/main.err" && ok || bad "without --log-prompts the log has prompt text (or no request line)"

# ---- a second server: one slot, --queue-timeout 1, --header-timeout 1, --log-prompts
start q -m "$model" -c 32768 -np 1 --max-queue 4 --queue-timeout 1 --header-timeout 1 --log-prompts || exit 1
Q="http://127.0.0.1:$port_q"
curl -s -N --max-time 60 -o "$tmp/long" "$Q/v1/completions" -d '{"prompt": "def f():", "max_tokens": 30000, "temperature": 1, "ignore_eos": true, "stream": true}' &
lp=$!; pids+=($lp)
for k in $(seq 100); do grep -q '^data:' "$tmp/long" 2>/dev/null && break; sleep 0.1; done
code=$($C -o "$tmp/qt" -w '%{http_code}' "$Q/v1/completions" -d '{"prompt": "MARKER_PROMPT_77", "max_tokens": 2}')
[ "$code" = 503 ] && jcheck "$tmp/qt" 'j["error"]["code"] == "queue_timeout" and "--queue-timeout" in j["error"]["message"]' && ok || bad "queue timeout: $code $(cat "$tmp/qt")"
$C -N "$Q/v1/completions" -d '{"prompt": "y", "max_tokens": 2, "stream": true}' >"$tmp/qts"
sse "$tmp/qts" 'any(isinstance(e, dict) and e.get("error", {}).get("code") == "queue_timeout" for e in ev) and not any(isinstance(e, dict) and e.get("choices") for e in ev)' && ok || bad "queue timeout (stream): $(head -c 300 "$tmp/qts")"
grep -q "MARKER_PROMPT_77" "$tmp/q.err" && ok || bad "--log-prompts did not log the prompt"
# slowloris: headers trickling in are cut at the deadline; a normal request is served meanwhile
python3 - "$port_q" <<'PY' >"$tmp/slow" &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
s.settimeout(0.3)
closed = False
for i in range(40):          # 12 s at most
    try:
        s.sendall(b"X")
        if s.recv(1) == b"":
            closed = True; break
    except socket.timeout:
        continue
    except OSError:
        closed = True; break
print("closed" if closed else "open")
PY
sp=$!; pids+=($sp)
sleep 0.3
$C "$Q/health" >"$tmp/qh" && jcheck "$tmp/qh" 'j["status"] == "ok"' && ok || bad "/health while a slowloris connection trickles"
wait $sp
grep -q closed "$tmp/slow" && ok || bad "a connection whose headers trickle in was not closed"
kill $lp 2>/dev/null; wait $lp 2>/dev/null
$C "$Q/metrics" >"$tmp/qm"
python3 - "$root/tests/serve" "$tmp/qm" <<'PY' && ok || bad "queue timeouts are not counted as cancelled"
import sys
sys.path.insert(0, sys.argv[1])
import prom
f = prom.parse(open(sys.argv[2]).read())
sys.exit(0 if prom.get(f, "brisk:requests_cancelled_total") >= 2 else 1)
PY

# ---- --stream-quantum: every write a multiple of 512 bytes, the same text as without it
start sq -m "$model" -c 512 --stream-quantum 40 || exit 1
printf '{"prompt": "def add(a, b):", "max_tokens": 24, "temperature": 0, "stream": true, "logprobs": 1}' >"$tmp/sqb"
python3 "$root/tests/serve/chunks.py" "$port_sq" /v1/completions "$tmp/sqb" "$tmp/sq1"
start sp -m "$model" -c 512 || exit 1
python3 "$root/tests/serve/chunks.py" "$port_sp" /v1/completions "$tmp/sqb" "$tmp/sq0"
python3 - "$tmp/sq1" "$tmp/sq0" <<'PY' && ok || bad "--stream-quantum: chunk sizes or text"
import json, sys
q, p = (json.load(open(f)) for f in sys.argv[1:])
text = lambda r: "".join(json.loads(e)["choices"][0]["text"] for e in r["events"] if e != "[DONE]")
toks = lambda r: [t for e in r["events"] if e != "[DONE]" for t in (json.loads(e)["choices"][0]["logprobs"] or {"tokens": []})["tokens"]]
ok = all(n % 512 == 0 for n in q["sizes"]) and text(q) == text(p) and toks(q) == toks(p) and q["events"][-1] == "[DONE]"
ok = ok and not all(n % 512 == 0 for n in p["sizes"])   # the plain stream is not padded (the check would see padding otherwise)
if not ok: print(q["sizes"], p["sizes"], text(q), text(p))
sys.exit(0 if ok else 1)
PY

# ---- KV save/restore under --kv-dir: a restored state makes a fresh server start cached, with the same output
mkdir -p "$tmp/kv"
start kv -m "$model" -c 512 --kv-dir "$tmp/kv" || exit 1
V="http://127.0.0.1:$port_kv"
python3 -c 'import json; p = "".join("v%d = %d\n" % (i, i) for i in range(30)); json.dump({"name": "sys.v1", "prompt": p}, open("'"$tmp/kvs"'", "w")); json.dump({"prompt": p, "max_tokens": 8, "temperature": 0, "ignore_eos": True, "logprobs": 1}, open("'"$tmp/kvq"'", "w"))'
$C "$V/kv/save" --data-binary @"$tmp/kvs" >"$tmp/kvs.out"
jcheck "$tmp/kvs.out" 'j["name"] == "sys.v1" and j["tokens"] > 192 and j["bytes"] > 0' && [ -s "$tmp/kv/sys.v1.kvstate" ] && ok || bad "kv save: $(cat "$tmp/kvs.out")"
$C "$U/v1/completions" "${K[@]}" --data-binary @"$tmp/kvq" >"$tmp/kvcold"   # another server, never saw it
kill -TERM "$pid_kv"; wait "$pid_kv"
start kv2 -m "$model" -c 512 --kv-dir "$tmp/kv" || exit 1
V2="http://127.0.0.1:$port_kv2"
$C "$V2/kv/restore" -d '{"name": "sys.v1"}' >"$tmp/kvr.out"
jcheck "$tmp/kvr.out" 'j["tokens"] == json.load(open("'"$tmp/kvs.out"'"))["tokens"]' && ok || bad "kv restore: $(cat "$tmp/kvr.out")"
$C "$V2/v1/completions" --data-binary @"$tmp/kvq" >"$tmp/kvwarm"
jcheck "$tmp/kvwarm" '(lambda c: j["usage"]["prompt_tokens_details"]["cached_tokens"] == (j["usage"]["prompt_tokens"] - 1) // 32 * 32 > 0 and j["choices"][0]["text"] == c["choices"][0]["text"] and j["choices"][0]["logprobs"]["token_logprobs"] == c["choices"][0]["logprobs"]["token_logprobs"] and c["usage"]["prompt_tokens_details"]["cached_tokens"] == 0)(json.load(open("'"$tmp/kvcold"'")))' \
  && ok || bad "after a restore: not cached, or output differs from a cold server: $(grep -o '"usage".*' "$tmp/kvwarm")"
for bad_name in '../x' '.hidden' 'a/b' '' "$(head -c 65 /dev/zero | tr '\0' a)"; do
  code=$($C -o "$tmp/e" -w '%{http_code}' "$V2/kv/save" -d "{\"name\": \"$bad_name\", \"prompt\": \"x\"}")
  [ "$code" = 400 ] && jcheck "$tmp/e" 'j["error"]["param"] == "name"' >/dev/null && ok || bad "kv name '$bad_name' accepted: $code"
done
! ls -a "$tmp" | grep -q "^x.kvstate$" && ok || bad "a name left the directory"
head -c 1000 "$tmp/kv/sys.v1.kvstate" >"$tmp/kv/cut.kvstate"
[ "$($C -o "$tmp/e" -w '%{http_code}' "$V2/kv/restore" -d '{"name": "cut"}')" = 400 ] && jcheck "$tmp/e" 'j["error"]["code"] == "invalid_state"' && ok || bad "a truncated state: $(cat "$tmp/e")"
[ "$($C -o "$tmp/e" -w '%{http_code}' "$V2/kv/restore" -d '{"name": "absent"}')" = 404 ] && ok || bad "restoring an absent state"
[ "$($C -o "$tmp/e" -w '%{http_code}' "$Q/kv/restore" -d '{"name": "sys.v1"}')" = 404 ] && jcheck "$tmp/e" '"--kv-dir" in j["error"]["message"]' && ok || bad "kv endpoints without --kv-dir"

for n in main q sq sp kv2; do
  eval "kill -TERM \$pid_$n"; eval "wait \$pid_$n"; rc=$?
  [ $rc -eq 0 ] && ok || bad "SIGTERM $n: rc=$rc $(tail -3 "$tmp/$n.err")"
done
! grep -qE "AddressSanitizer|runtime error|LeakSanitizer|ThreadSanitizer" "$tmp"/*.err && ok || bad "sanitizer report: $(grep -h -A8 -E 'Sanitizer|runtime error' "$tmp"/*.err | head -40)"

echo "cli_serve_metrics: $pass passed, $fail failed"
[ $fail -eq 0 ]
