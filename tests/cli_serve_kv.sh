#!/usr/bin/env bash
# brisk serve with KV retention and the context shift (docs/SERVER.md "Retention"), over HTTP with curl:
#   - refusals before the model loads (exit 2, naming the flags): --kv-pin without a policy or a shift, an unknown
#     role, a budget that cannot hold sinks + window + a token, a policy without a budget, -ctk k4 with a policy,
#     --spec / -md / --kv-dir with retention;
#   - a streaming policy (-c 128, budget 64): greedy completions of 240 tokens (prompt + completion past -c, so
#     slots were dropped: a sequence never holds more than -c slots) finish "length" with every token; four at
#     once give the same text and logprobs as each alone, and so does a server with -b 7 and one with
#     --prefill-budget 3 beside the others (the policy's cuts do not depend on the chunking or the load); so do
#     four requests under snapkv --kv-per-head (its startup line says "per head"; its output is not streaming's); a
#     pinned chat (--kv-pin system) runs past -c too, one without max_tokens stops at the trained context (512,
#     "length": no shift); a request's "spec" is a 400 naming spec; a prompt over -c
#     is still refused (context_length_exceeded); with system, user and assistant pinned a chat stops when its
#     slots fill the budget (finish "length": the roles were tagged), while a completion (prompt, generated) goes on;
#   - no policy: --no-context-shift (the default) stops a request at -c with finish reason length (that server with
#     -ctk q8_0 -ctv q4_0 -khad, whose startup line names the types); with
#     --context-shift -c 64 a request generates 150 tokens, the same alone and among three others;
#   - a hyb4 cache: the same text and logprobs alone and four at once; --spec with it refused.
# No wall-clock assertion. Model: models/pycode-target-f16.gguf (skipped, 77, when absent).
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" curl python3 model http
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
C="curl -s --max-time 300"
expect_err() {   # expected exit code, text the message must hold, serve arguments...
  local code="$1" needle="$2"; shift 2
  local out rc; out="$("$brisk" serve --port 0 "$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -qF -- "$needle"; then ok; else bad "serve $* -> rc $rc, '$out' (want $code, '$needle')"; fi
}

# ---- refusals, before the model loads (the model file does not exist)
absent="$tmp/absent.gguf"
expect_err 2 "--kv-pin needs --kv-policy NAME or --context-shift" -m "$absent" --kv-pin system
expect_err 2 "--kv-pin 'bogus': unknown role (serve tags: system, user, assistant, tool, prompt, generated)" -m "$absent" --context-shift --kv-pin bogus
expect_err 2 "--kv-policy streaming needs --kv-budget" -m "$absent" --kv-policy streaming
expect_err 2 "cannot hold the 4 sinks (--kv-sink), the 32-slot window (--kv-window) and a ubatch of 1" -m "$absent" -c 64 --kv-policy streaming --kv-budget 30
expect_err 2 "--kv-budget: 200 slots exceed the context of 128" -m "$absent" -c 128 --kv-policy streaming --kv-budget 200
expect_err 2 "--kv-policy is not available with -ctk k4" -m "$absent" -c 64 -ctk k4 --kv-policy streaming --kv-budget 48 --kv-window 8
expect_err 2 "--context-shift is not available with -ctk k2" -m "$absent" -ctk k2 --context-shift
expect_err 2 "--kv-policy is not available with --spec" -m "$absent" -c 64 --kv-policy streaming --kv-budget 48 --kv-window 8 --spec ngram
expect_err 2 "--context-shift is not available with -md" -m "$absent" --context-shift -md "$absent"
expect_err 2 "--context-shift is not available with --kv-dir" -m "$absent" --context-shift --kv-dir "$tmp"

P1='import os\nimport sys\n\n\ndef walk(root):\n    for name in os.listdir(root):\n'
P2='def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return'
P3='class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n'
P4='for i in range(10):\n    print(i)\n\n\nwhile True:\n    '
body() { printf '{"prompt": "%s", "max_tokens": %s, "temperature": 0, "ignore_eos": true, "logprobs": 1}' "$1" "$2"; }
same() {   # same A B: the same text and token logprobs
  jcheck "$1" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["choices"][0]["logprobs"]["token_logprobs"] == o["choices"][0]["logprobs"]["token_logprobs"] and j["choices"][0]["finish_reason"] == o["choices"][0]["finish_reason"])(json.load(open("'"$2"'")))'
}
alone_four() {   # alone_four URL ALONE TOGETHER N WHAT: each prompt alone (N tokens, finish "length"), then the four at once:
  local u=$1 al=$2 tg=$3 n=$4 what=$5 k p   # the same text and logprobs
  for k in 1 2 3 4; do
    eval "p=\$P$k"
    $C "$u/v1/completions" -d "$(body "$p" "$n")" >"$tmp/$al$k"
    jcheck "$tmp/$al$k" "j['choices'][0]['finish_reason'] == 'length' and j['usage']['completion_tokens'] == $n" && ok || bad "$what, prompt $k alone"
  done
  four "$u" "$tg" "$n"
  for k in 1 2 3 4; do same "$tmp/$tg$k" "$tmp/$al$k" && ok || bad "$what, prompt $k among four: output differs from alone"; done
}
four() {   # four URL PREFIX N: the four prompts at once, N tokens each, into $tmp/PREFIX1..4
  local cp=() k p
  for k in 1 2 3 4; do
    eval "p=\$P$k"
    $C "$1/v1/completions" -d "$(body "$p" "$3")" >"$tmp/$2$k" &
    cp+=($!)
  done
  wait "${cp[@]}"
}

# ---- a streaming policy: past -c, the same alone, together, chunked differently
start pol -m "$model" --chat-template "$tpl" -c 128 -np 4 --kv-policy streaming --kv-budget 64 --kv-window 16 --kv-pin system || exit 1
U="http://127.0.0.1:$port_pol"
grep -q "KV retention: streaming budget 64 slots per request (sink 4, window 16); context shift off: a request stops at 512 positions (finish reason length); pinned: system" "$tmp/pol.err" \
  && ok || bad "the retention line: $(cat "$tmp/pol.err")"
for k in 1 2 3 4; do
  eval "p=\$P$k"
  $C "$U/v1/completions" -d "$(body "$p" 240)" >"$tmp/alone$k"
  jcheck "$tmp/alone$k" 'j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 240 and j["usage"]["prompt_tokens"] + 240 > 128' \
    && ok || bad "prompt $k past -c with a policy"
done
four "$U" tog 240
for k in 1 2 3 4; do same "$tmp/tog$k" "$tmp/alone$k" && ok || bad "prompt $k among four: output differs from alone"; done
# a pinned chat past -c
$C "$U/v1/chat/completions" -d '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "def f():"}], "max_tokens": 200, "temperature": 0, "ignore_eos": true}' >"$tmp/chat"
jcheck "$tmp/chat" 'j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 200' && ok || bad "a pinned chat past -c"
# --no-context-shift (the default): a chat without max_tokens runs past -c to the trained context (512) and stops there
$C "$U/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "def g():"}], "temperature": 0, "ignore_eos": true}' >"$tmp/chat512"
jcheck "$tmp/chat512" 'j["choices"][0]["finish_reason"] == "length" and j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] == 512' \
  && ok || bad "a chat without max_tokens stops at the trained context"
[ "$($C -o "$tmp/e1" -w '%{http_code}' "$U/v1/completions" -d '{"prompt": "x", "spec": "ngram"}')" = 400 ] \
  && jcheck "$tmp/e1" 'j["error"]["param"] == "spec" and "retention" in j["error"]["message"]' && ok || bad "spec with retention: $(cat "$tmp/e1")"
long=$(python3 -c 'print("x = 1\\n" * 100)')
[ "$($C -o "$tmp/e2" -w '%{http_code}' "$U/v1/completions" -d "{\"prompt\": \"$long\"}")" = 400 ] \
  && jcheck "$tmp/e2" 'j["error"]["code"] == "context_length_exceeded"' && ok || bad "a prompt over -c: $(cat "$tmp/e2")"
kill -TERM "$pid_pol"; wait "$pid_pol" 2>/dev/null

# every chat role pinned: a chat's slots can never be dropped, so it stops when they fill the budget ("length", the
# context full); a completion on the same server (roles prompt and generated, not pinned) goes on past -c
start pin -m "$model" --chat-template "$tpl" -c 128 -np 2 --kv-policy streaming --kv-budget 64 --kv-window 16 \
  --kv-pin system --kv-pin user --kv-pin assistant || exit 1
W="http://127.0.0.1:$port_pin"
$C "$W/v1/chat/completions" -d '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "def f():"}], "max_tokens": 200, "temperature": 0, "ignore_eos": true}' >"$tmp/chat3"
jcheck "$tmp/chat3" 'j["choices"][0]["finish_reason"] == "length" and j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] <= 64 + 1' \
  && ok || bad "every chat role pinned: the chat must stop at the budget"
$C "$W/v1/completions" -d "$(body "$P1" 240)" >"$tmp/pin1"
same "$tmp/pin1" "$tmp/alone1" && ok || bad "a completion beside pinned chat roles"
kill -TERM "$pid_pin"; wait "$pid_pin" 2>/dev/null

start b7 -m "$model" -c 128 -np 4 -b 7 --kv-policy streaming --kv-budget 64 --kv-window 16 || exit 1
$C "http://127.0.0.1:$port_b7/v1/completions" -d "$(body "$P1" 240)" >"$tmp/b7"
same "$tmp/b7" "$tmp/alone1" && ok || bad "-b 7: output differs from -b 512"
kill -TERM "$pid_b7"; wait "$pid_b7" 2>/dev/null

# per-head selection (snapkv): past -c, the same alone and among four (each prompt's heads choose on their own schedule)
start ph -m "$model" -c 128 -np 4 --kv-policy snapkv --kv-per-head --kv-budget 64 --kv-window 16 || exit 1
grep -q "KV retention: snapkv budget 64 slots per request (sink 4, window 16, per head)" "$tmp/ph.err" && ok || bad "the per-head line: $(cat "$tmp/ph.err")"
alone_four "http://127.0.0.1:$port_ph" phalone phtog 240 "per-head"
same "$tmp/phalone1" "$tmp/alone1" && bad "per-head snapkv gave streaming's output for prompt 1" || ok
kill -TERM "$pid_ph"; wait "$pid_ph" 2>/dev/null

start pb -m "$model" -c 128 -np 4 --prefill-budget 3 --kv-policy streaming --kv-budget 64 --kv-window 16 || exit 1
four "http://127.0.0.1:$port_pb" pb 240
for k in 1 2 3 4; do same "$tmp/pb$k" "$tmp/alone$k" && ok || bad "--prefill-budget 3, prompt $k among four: output differs"; done
kill -TERM "$pid_pb"; wait "$pid_pb" 2>/dev/null

# ---- no policy: the default stops at -c; --context-shift goes on
start ns -m "$model" -c 64 -np 4 -ctk q8_0 -ctv q4_0 -khad || exit 1
grep -q "KV pool [0-9]* tokens (K q8_0 Hadamard-rotated, V q4_0)" "$tmp/ns.err" && ok || bad "the KV types line: $(cat "$tmp/ns.err")"
$C "http://127.0.0.1:$port_ns/v1/completions" -d "$(body "$P2" 150)" >"$tmp/ns"
jcheck "$tmp/ns" 'j["choices"][0]["finish_reason"] == "length" and j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] == 64' \
  && ok || bad "without a shift a request stops at -c"
kill -TERM "$pid_ns"; wait "$pid_ns" 2>/dev/null

# a hyb4 cache (K and V in k4 with hot F16 rows, kv/hyb.c): requests of 100 tokens (three refreshes of the hot rows)
# give the same text and logprobs alone and four at once; with --spec it is refused before the model loads
expect_err 2 "--spec is not available with -ctk hyb4" -m "$absent" -ctk hyb4 -ctv hyb4 --spec ngram
start hy -m "$model" -c 256 -np 4 -ctk hyb4 -ctv hyb4 || exit 1
grep -q "(K hyb4, V hyb4)" "$tmp/hy.err" && ok || bad "the hyb4 types line: $(cat "$tmp/hy.err")"
alone_four "http://127.0.0.1:$port_hy" ha ht 100 "hyb4"
kill -TERM "$pid_hy"; wait "$pid_hy" 2>/dev/null

start sh -m "$model" -c 64 -np 4 --context-shift || exit 1
V="http://127.0.0.1:$port_sh"
grep -q "KV retention: context shift on (keep 4) at 64 positions" "$tmp/sh.err" && ok || bad "the shift line: $(cat "$tmp/sh.err")"
alone_four "$V" sa st 150 "shift"
kill -TERM "$pid_sh"; wait "$pid_sh" 2>/dev/null

! grep -qE "AddressSanitizer|runtime error|LeakSanitizer|ThreadSanitizer" "$tmp"/*.err && ok || bad "sanitizer report: $(grep -h -A8 -E 'Sanitizer|runtime error' "$tmp"/*.err | head -40)"
echo "cli_serve_kv: $pass passed, $fail failed"
[ $fail -eq 0 ]
