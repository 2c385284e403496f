#!/usr/bin/env bash
# brisk serve's draft model (--spec draft -md FILE) and arrival bursts
# (--batch-window), over HTTP with curl. Draft: greedy text and logprobs
# identical with the draft on and off (per request "spec": "off"), streamed
# and not, n = 2, four requests at once; drafts made (usage.brisk and
# /metrics agree: the counters equal the sums of the usage returned); a
# request's "spec": "draft" on a server without -md is a 400 naming spec;
# --spec draft without -md refuses to start. Bursts: with -np 3 and a window
# far longer than the test, three requests sent at once start in one step
# (brisk:batch_window_waits_total 1, _requests_total 3: the window ends as
# soon as -np requests are held, so nothing here waits on a timer) and each
# equals the same request alone (batch invariance); a lone request on a
# short window still completes. No wall-clock assertion. Needs the pycode
# pair: models/pycode-target-f16.gguf and ../shared/models/pycode-draft-f16.gguf
# (skipped, 77, when either is absent).
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" curl python3 model
shared="${2:-}"
[ -n "$shared" ] || shared="$root/../shared"
draft="$shared/models/pycode-draft-f16.gguf"
[ -f "$draft" ] || { echo "SKIP: $draft absent (the draft half of the pycode pair lives in ../shared/models)"; exit 77; }
serve_need http
C="curl -s --max-time 120"

# ---- --spec draft needs -md
"$brisk" serve -m "$model" --port 0 --spec draft >"$tmp/nomd.out" 2>"$tmp/nomd.err"
[ $? -ne 0 ] && grep -q -- "--spec draft needs a draft model" "$tmp/nomd.err" && ok || bad "--spec draft without -md: $(cat "$tmp/nomd.err")"

start d -m "$model" -md "$draft" --spec draft -c 512 -np 4 || exit 1
U="http://127.0.0.1:$port_d"
grep -q "draft memory plan" "$tmp/d.err" && ok || bad "the draft's memory plan is printed"
usage=()
post() {   # post NAME JSON: /v1/completions into $tmp/NAME, counted in the metrics sums
  $C "$U/v1/completions" -d "$2" >"$tmp/$1"
  usage+=("$tmp/$1")
}
P1='def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return'
P2='import os\nimport sys\n\n\ndef main(argv):\n    '
P3='class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n'
P4='for i in range(10):\n    print(i)\n\n\nwhile True:\n    '
for k in 1 2 3 4; do
  eval "p=\$P$k"
  post on$k "{\"prompt\": \"$p\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}"
  post off$k "{\"prompt\": \"$p\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1, \"spec\": \"off\"}"
  jcheck "$tmp/on$k" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["choices"][0]["logprobs"]["tokens"] == o["choices"][0]["logprobs"]["tokens"] and j["choices"][0]["logprobs"]["token_logprobs"] == o["choices"][0]["logprobs"]["token_logprobs"] and j["usage"]["completion_tokens"] == 40)(json.load(open("'"$tmp/off$k"'")))' \
    && ok || bad "prompt $k: greedy output differs with the draft model on and off"
  jcheck "$tmp/off$k" 'j["usage"]["brisk"]["drafted_tokens"] == 0' && ok || bad "prompt $k: spec off per request still drafted"
done
python3 - "$tmp" <<'PY' && ok || bad "no draft tokens in any usage"
import json, sys
t = sys.argv[1]
d = [json.load(open("%s/on%d" % (t, k)))["usage"]["brisk"] for k in (1, 2, 3, 4)]
print("draft model: drafted %s, accepted %s" % ([x["drafted_tokens"] for x in d], [x["accepted_tokens"] for x in d]))
sys.exit(0 if sum(x["drafted_tokens"] for x in d) > 0 and all(0 <= x["accepted_tokens"] <= x["drafted_tokens"] for x in d) else 1)
PY
# streamed: the same text as the non-streamed draft run
$C -N "$U/v1/completions" -d "{\"prompt\": \"$P1\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" >"$tmp/st"
sse "$tmp/st" '(lambda o: "".join(e["choices"][0]["text"] for e in ev if e != "[DONE]" and e["choices"]) == o["choices"][0]["text"] and ev[-1] == "[DONE]")(json.load(open("'"$tmp/off1"'")))' \
  && ok || bad "streamed with the draft model: text differs"
python3 -c 'import json,sys; ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l != "data: [DONE]"]; json.dump(json.loads(ev[-1]), open(sys.argv[2], "w"))' "$tmp/st" "$tmp/stu"
usage+=("$tmp/stu")
# n = 2: both choices are the greedy output
post n2 "{\"prompt\": \"$P2\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"n\": 2}"
jcheck "$tmp/n2" '(lambda o: len(j["choices"]) == 2 and all(c["text"] == o["choices"][0]["text"] for c in j["choices"]))(json.load(open("'"$tmp/off2"'")))' \
  && ok || bad "n = 2 with the draft model"
# four at once, each drafting: each equals its output alone without drafts
cpids=()
for k in 1 2 3 4; do
  eval "p=\$P$k"
  $C "$U/v1/completions" -d "{\"prompt\": \"$p\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}" >"$tmp/con$k" &
  cpids+=($!)
done
wait "${cpids[@]}"   # the requests, not the servers
for k in 1 2 3 4; do
  usage+=("$tmp/con$k")
  jcheck "$tmp/con$k" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["choices"][0]["logprobs"]["token_logprobs"] == o["choices"][0]["logprobs"]["token_logprobs"])(json.load(open("'"$tmp/off$k"'")))' \
    && ok || bad "prompt $k among 4 drafting at once: output differs"
done
# a sampled request drafts too (lossless by rejection sampling; here: it completes)
post samp "{\"prompt\": \"$P3\", \"max_tokens\": 24, \"temperature\": 0.8, \"seed\": 3, \"ignore_eos\": true}"
jcheck "$tmp/samp" 'j["usage"]["completion_tokens"] == 24' && ok || bad "sampled with the draft model"
# the metrics' speculation counters are the sums of the usage returned
$C "$U/metrics" >"$tmp/metrics"
python3 - "$root/tests/serve" "$tmp/metrics" "${usage[@]}" <<'PY' && ok || bad "draft counters in /metrics"
import json, sys
sys.path.insert(0, sys.argv[1])
import prom
fams = prom.parse(open(sys.argv[2]).read())
d = a = 0
for f in sys.argv[3:]:
    u = json.load(open(f))["usage"]["brisk"]
    d += u["drafted_tokens"]; a += u["accepted_tokens"]
got = (prom.get(fams, "brisk:spec_decode_num_draft_tokens_total"), prom.get(fams, "brisk:spec_decode_num_accepted_tokens_total"))
print("metrics drafted/accepted %s, usage sums %s" % (got, (d, a)))
sys.exit(0 if got == (d, a) and d > 0 else 1)
PY

# ---- "spec": "draft" without -md: 400 naming spec
start plain -m "$model" -c 512 -np 3 --batch-window 10000 || exit 1
V="http://127.0.0.1:$port_plain"
[ "$($C -o "$tmp/e" -w '%{http_code}' "$V/v1/completions" -d '{"prompt": "x", "spec": "draft"}')" = 400 ] \
  && jcheck "$tmp/e" 'j["error"]["param"] == "spec" and "-md" in j["error"]["message"]' && ok || bad "spec draft without -md: $(cat "$tmp/e")"

# ---- a burst: -np 3 requests at once start in one step (the window ends when 3 are held)
cpids=()
for k in 1 2 3; do
  eval "p=\$P$k"
  $C "$V/v1/completions" -d "{\"prompt\": \"$p\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}" >"$tmp/b$k" &
  cpids+=($!)
done
wait "${cpids[@]}"   # the requests, not the servers
for k in 1 2 3; do
  jcheck "$tmp/b$k" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["choices"][0]["logprobs"]["token_logprobs"] == o["choices"][0]["logprobs"]["token_logprobs"])(json.load(open("'"$tmp/off$k"'")))' \
    && ok || bad "burst request $k: output differs from alone"
done
$C "$V/metrics" >"$tmp/m2"
grep -q '^brisk:batch_window_waits_total 1$' "$tmp/m2" && grep -q '^brisk:batch_window_requests_total 3$' "$tmp/m2" && ok \
  || bad "one window, three requests: $(grep batch_window "$tmp/m2")"
kill -TERM "$pid_plain"; wait "$pid_plain" 2>/dev/null

# ---- a lone request on a short window completes (the window ends after 10 x MS at most)
start short -m "$model" -c 512 -np 3 --batch-window 20 || exit 1
W="http://127.0.0.1:$port_short"
$C "$W/v1/completions" -d "{\"prompt\": \"$P4\", \"max_tokens\": 40, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 1}" >"$tmp/lone"
jcheck "$tmp/lone" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"])(json.load(open("'"$tmp/off4"'")))' && ok || bad "a lone request on a short window"
$C "$W/metrics" | grep -q '^brisk:batch_window_requests_total 1$' && ok || bad "the lone request's window"

kill -TERM "$pid_d" "$pid_short"
for p in "$pid_d" "$pid_short"; do wait "$p" 2>/dev/null; done
! grep -qE "AddressSanitizer|runtime error|LeakSanitizer|ThreadSanitizer" "$tmp"/*.err && ok || bad "sanitizer report: $(grep -h -A8 -E 'Sanitizer|runtime error' "$tmp"/*.err | head -40)"

echo "cli_serve_draft: $pass passed, $fail failed"
[ $fail -eq 0 ]
