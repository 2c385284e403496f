#!/usr/bin/env bash
# Drafter-only compression on `brisk run --spec draft` (docs/KV.md, "Drafter-only compression"):
#   - greedy output with the draft's cache compressed (-ctkd/-ctvd q8_0, q4_0; --kv-policy-draft
#     streaming at a budget small enough to evict during the run; both together) is byte-identical to
#     plain decoding without speculation, on the committed pycode pair (models/pycode-target-f16.gguf,
#     tests/data/spec/pycode-draft-q4_0.gguf) and three prompts;
#   - the acceptance rate is printed, and drafts were both accepted and rejected;
#   - the evicting runs really evicted: the "draft KV" line's dropped slots > 0, and its peak blocks fit
#     the budget (the pool holds only the budget);
#   - bad values exit 2 naming the flag, before any model loads (a missing model file would exit 1);
#   - brisk serve takes -ctkd/-ctvd (a draft model's quantized cache in the scheduler): greedy text with
#     the draft on equals "spec": "off" (when the build has the HTTP server and curl is installed).
set -u
brisk="$1"
here="$(cd "$(dirname "$0")" && pwd)"
model="$here/../models/pycode-target-f16.gguf"
draft="$here/data/spec/pycode-draft-q4_0.gguf"
[ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; }
[ -f "$draft" ] || { echo "SKIP: $draft absent"; exit 77; }
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

expect_err() {   # expected exit code, text the message must hold, run args...
  local code="$1" needle="$2"; shift 2
  local out rc; out="$("$brisk" run "$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -qF -- "$needle"; then ok; else bad "run $* -> rc $rc, '$out' (want $code, '$needle')"; fi
}
# every refusal comes before a model loads: the model files do not exist
nom=(-m "$tmp/none.gguf" -p x)
nod=(-md "$tmp/none-draft.gguf" --spec draft)
expect_err 2 "-ctkd needs a draft model (-md)" "${nom[@]}" -ctkd q8_0
expect_err 2 "--kv-policy-draft needs a draft model (-md)" "${nom[@]}" --kv-policy-draft streaming --kv-budget-draft 64
expect_err 2 "-ctkd q5_1: llama.cpp's cache type, not supported by brisk" "${nom[@]}" "${nod[@]}" -ctkd q5_1
expect_err 2 "--cache-type-v-draft 'q3': unknown cache type (supported: f16, f32, q8_0, q4_0, k4, k2, hyb4, hyb2)" "${nom[@]}" "${nod[@]}" --cache-type-v-draft q3
expect_err 2 "-ctkd/-ctvd hyb4: the draft's cache is cut back after every rejected draft" "${nom[@]}" "${nod[@]}" -ctkd hyb4 -ctvd hyb4
expect_err 2 "--spec is not available with -ctk hyb2" "${nom[@]}" "${nod[@]}" -ctk hyb2 -ctv hyb2
expect_err 2 "--kv-policy-draft 'lru': unknown policy (none, streaming" "${nom[@]}" "${nod[@]}" --kv-policy-draft lru --kv-budget-draft 64
expect_err 2 "--kv-policy-draft streaming needs --kv-budget-draft" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming
expect_err 2 "--kv-budget-draft needs --kv-policy-draft" "${nom[@]}" "${nod[@]}" --kv-budget-draft 64
expect_err 2 "--kv-window-draft needs --kv-policy-draft" "${nom[@]}" "${nod[@]}" --kv-window-draft 8
expect_err 2 "--kv-budget-draft: the fraction 1.5 must lie strictly between 0 and 1" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming --kv-budget-draft 1.5
expect_err 2 "--kv-budget-draft: 'half' is neither slots" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming --kv-budget-draft half
expect_err 2 "--kv-budget-draft: 0 slots: give at least 1" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming --kv-budget-draft 0
expect_err 2 "--kv-budget-draft: 65 slots exceed the context of 64" "${nom[@]}" "${nod[@]}" -c 64 --kv-policy-draft streaming --kv-budget-draft 65
expect_err 2 "--kv-budget-draft 0.25 = 16 slots cannot hold the 4 sinks (--kv-sink-draft), the 32-slot window (--kv-window-draft)" \
  "${nom[@]}" "${nod[@]}" -c 64 --kv-policy-draft streaming --kv-budget-draft 0.25
expect_err 2 "--kv-window-draft: 0 is out of range" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming --kv-budget-draft 64 --kv-window-draft 0
expect_err 2 "--kv-sink-draft: -1 is out of range" "${nom[@]}" "${nod[@]}" --kv-policy-draft streaming --kv-budget-draft 64 --kv-sink-draft -1
expect_err 2 "-ctvd is not used in conversation mode (-cnv)" "${nom[@]}" -cnv -ctvd q8_0
# a budget against the model's own context (no -c): checked once it is known, still a usage error
expect_err 2 "--kv-budget-draft: 99999 slots exceed the context of" -m "$model" -md "$draft" --spec draft -p x --kv-policy-draft streaming --kv-budget-draft 99999

# ---- greedy output: compressed drafts change nothing but the acceptance
P1='def parse(args):\n    '
P2='import os\nimport sys\n\n\ndef main(argv):\n    '
P3='class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n'
gen() { "$brisk" run -m "$model" -e -n 160 --temp 0 -t 1 -c 512 "$@"; }
for k in 1 2 3; do
  eval "p=\$P$k"
  gen -p "$p" >"$tmp/plain$k" 2>/dev/null || bad "prompt $k: plain run failed"
  [ -s "$tmp/plain$k" ] || bad "prompt $k: plain output empty"
done
check() {   # NAME EVICTS(0|1) flags...
  local name="$1" evicts="$2"; shift 2
  local k drafted=0 accepted=0 dropped=0
  for k in 1 2 3; do
    eval "p=\$P$k"
    if ! gen -p "$p" -md "$draft" --spec draft "$@" >"$tmp/out" 2>"$tmp/err"; then bad "$name, prompt $k: run failed: $(tail -2 "$tmp/err")"; continue; fi
    cmp -s "$tmp/plain$k" "$tmp/out" && ok || bad "$name, prompt $k: output differs from plain decoding"
    local line; line="$(grep -o 'acceptance [0-9.]*% ([0-9]* of [0-9]* drafted)' "$tmp/err")"
    [ -n "$line" ] && ok || bad "$name, prompt $k: no acceptance rate printed"
    local a d; read -r a d <<<"$(printf '%s' "$line" | sed 's/.*(\([0-9]*\) of \([0-9]*\) drafted)/\1 \2/')"
    accepted=$((accepted + ${a:-0})); drafted=$((drafted + ${d:-0}))
    local kvl; kvl="$(grep '^brisk run: draft KV' "$tmp/err")"
    [ -n "$kvl" ] && ok || bad "$name, prompt $k: no draft KV line"
    local dr; dr="$(printf '%s' "$kvl" | sed -n 's/.* \([0-9]*\) slots dropped.*/\1/p')"
    dropped=$((dropped + ${dr:-0}))
    if [ "$evicts" = 1 ]; then
      # the pool holds the budget: its peak in blocks of 32 slots never exceeds it
      local peak budget; peak="$(printf '%s' "$kvl" | sed -n 's/.*peak \([0-9]*\) blocks.*/\1/p')"
      budget="$(printf '%s' "$kvl" | sed -n 's/.* budget \([0-9]*\) .*/\1/p')"
      [ -n "$peak" ] && [ -n "$budget" ] && [ $((peak * 32)) -lt $((budget + 32)) ] && ok || bad "$name, prompt $k: peak/budget in '$kvl'"
    fi
  done
  echo "$name: acceptance $accepted/$drafted, $dropped draft slots dropped"
  [ "$accepted" -gt 0 ] && [ "$accepted" -lt "$drafted" ] && ok || bad "$name: $accepted of $drafted drafts accepted (both paths must run)"
  if [ "$evicts" = 1 ]; then [ "$dropped" -gt 0 ] && ok || bad "$name: the draft's policy never evicted"
  else [ "$dropped" -eq 0 ] && ok || bad "$name: slots dropped without a policy"; fi
}
check "q8_0" 0 -ctkd q8_0 -ctvd q8_0
check "q4_0" 0 --cache-type-k-draft q4_0 --cache-type-v-draft q4_0
check "streaming 48" 1 --kv-policy-draft streaming --kv-budget-draft 48 --kv-sink-draft 4 --kv-window-draft 16
check "streaming 0.125 (64 of -c 512)" 1 --kv-policy-draft streaming --kv-budget-draft 0.125
check "q4_0 + streaming 40" 1 -ctkd q4_0 -ctvd q4_0 --kv-policy-draft streaming --kv-budget-draft 40 --kv-window-draft 8
check "q8_0 + random 48, k=6" 1 -ctkd q8_0 -ctvd q8_0 --kv-policy-draft random --kv-budget-draft 48 --kv-window-draft 8 --draft-max 6

# ---- serve: -ctkd/-ctvd reach the scheduler's draft context
serve_check() {
  local p0=$pass f0=$fail
  . "$here/serve/lib.sh"   # (it starts its own counts)
  pass=$p0; fail=$f0
  command -v curl >/dev/null && command -v python3 >/dev/null || { echo "serve part skipped: curl or python3 missing"; return; }
  serve_has_http || { echo "serve part skipped: no HTTP server in this build"; return; }
  trap cleanup EXIT        # its cleanup stops the server too
  start q -m "$model" -md "$draft" --spec draft -c 512 -np 2 -ctkd q4_0 -ctvd q8_0 || { bad "serve with -ctkd did not start"; return; }
  local U="http://127.0.0.1:$port_q" C="curl -s --max-time 120"
  local body='"prompt": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return", "max_tokens": 40, "temperature": 0, "ignore_eos": true'
  $C "$U/v1/completions" -d "{$body}" >"$tmp/son"
  $C "$U/v1/completions" -d "{$body, \"spec\": \"off\"}" >"$tmp/soff"
  jcheck "$tmp/son" '(lambda o: j["choices"][0]["text"] == o["choices"][0]["text"] and j["usage"]["brisk"]["drafted_tokens"] > 0)(json.load(open("'"$tmp/soff"'")))' \
    && ok || bad "serve -ctkd q4_0 -ctvd q8_0: greedy text differs with the draft on, or nothing drafted"
  kill "$pid_q" 2>/dev/null; wait "$pid_q" 2>/dev/null
}
serve_check

echo "cli_kv_draft: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
