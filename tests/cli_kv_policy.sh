#!/usr/bin/env bash
# KV retention on `brisk perplexity` (docs/KV.md):
#   - refusals name the flag: --kv-budget's forms (0, a fraction >= 1, text), a
#     budget without a policy, a budget too small for sinks + window + ubatch,
#     --kv-window 0, an unknown policy;
#   - --kv-policy none is today's run: stdout and the log-probability file byte-identical;
#   - a run prints the KV memory line, its peak within the budget's blocks;
#   - a policy whose budget is the whole chunk never evicts: the same PPL as
#     no policy (the ubatches change nothing: batch invariance);
#   - random with one seed is repeatable, another seed changes the choice;
#   - the scored policies (h2o, snapkv, tova) evict within the budget, differ
#     from streaming's choice, and with a budget of the whole chunk give the
#     plain run's PPL (observing attention changes no output bit);
#   - oracle: evicts within the budget after its recording pass (the pool's peak
#     is the whole chunk, which the recording holds), differs from streaming,
#     a budget of the whole chunk gives the plain PPL; run, chat, bench and a
#     draft refuse it, naming why;
#   - --kv-per-head (h2o, snapkv, tova, oracle): evicts within the same blocks,
#     chooses otherwise than the shared selection, a budget of the whole chunk
#     gives the plain PPL; refused without a policy, with another policy and
#     with --kv-pin, naming why.
set -u
brisk="$1"
here="$(cd "$(dirname "$0")" && pwd)"
model="$here/../models/pycode-target-f16.gguf"
text="$here/data/kld/input.txt"
[ -f "$model" ] || { echo "SKIP: $model absent (make models)"; exit 77; }
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_err() {   # expected exit code, text the message must hold, command...
  local code="$1" needle="$2"; shift 2
  local out rc; out="$("$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -qF -- "$needle"; then ok; else bad "$* -> rc $rc, '$out' (want $code, '$needle')"; fi
}
ppl() { "$brisk" perplexity -m "$model" -f "$text" -t 2 -c 64 "$@"; }

expect_err 2 "--kv-budget: 0 slots: give at least 1" ppl --kv-policy streaming --kv-budget 0
expect_err 2 "--kv-budget: the fraction 1.0 must lie strictly between 0 and 1" ppl --kv-policy streaming --kv-budget 1.0
expect_err 2 "--kv-budget: 'half' is neither slots" ppl --kv-policy random --kv-budget half
expect_err 2 "--kv-budget: 65 slots exceed the context of 64" ppl --kv-policy random --kv-budget 65
expect_err 2 "--kv-budget needs --kv-policy" ppl --kv-budget 32
expect_err 2 "--kv-window needs --kv-policy" ppl --kv-policy none --kv-window 8
expect_err 2 "--kv-policy streaming needs --kv-budget" ppl --kv-policy streaming
expect_err 2 "cannot hold the 4 sinks (--kv-sink), the 32-slot window (--kv-window) and a ubatch of 64" ppl --kv-policy streaming --kv-budget 0.5
expect_err 2 "--kv-window" ppl --kv-policy streaming --kv-budget 32 --kv-window 0
expect_err 2 "--kv-policy" ppl --kv-policy h3o --kv-budget 32

out="$(ppl --kv-policy streaming --kv-budget 32 --kv-window 8 -ub 8 2>/dev/null)"
peak="$(printf '%s\n' "$out" | sed -n 's/^KV memory: peak \([0-9]*\) blocks.*/\1/p')"
if printf '%s\n' "$out" | grep -q '^Final estimate' && [ -n "$peak" ] && [ "$peak" -le 1 ] &&
   printf '%s\n' "$out" | grep -q ' [1-9][0-9]* slots dropped'; then ok; else bad "streaming run: '$out'"; fi

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
ppl --kl-divergence-base "$tmp/plain.kld" > "$tmp/plain.out" 2>/dev/null
ppl --kv-policy none --kl-divergence-base "$tmp/none.kld" > "$tmp/none.out" 2>/dev/null
cmp -s "$tmp/plain.out" "$tmp/none.out" && cmp -s "$tmp/plain.kld" "$tmp/none.kld" && [ -s "$tmp/plain.kld" ] && ok ||
  bad "--kv-policy none differs from no flag"
plain="$(ppl 2>/dev/null | grep '^Final estimate')"
whole="$(ppl --kv-policy streaming --kv-budget 64 --kv-window 8 -ub 8 2>/dev/null | grep '^Final estimate')"
[ -n "$plain" ] && [ "$plain" = "$whole" ] && ok || bad "a budget of the whole chunk: '$whole' vs '$plain'"

r1="$(ppl --kv-policy random --kv-budget 24 --kv-window 4 -ub 4 -s 7 2>/dev/null | grep '^Final estimate')"
r2="$(ppl --kv-policy random --kv-budget 24 --kv-window 4 -ub 4 -s 7 2>/dev/null | grep '^Final estimate')"
r3="$(ppl --kv-policy random --kv-budget 24 --kv-window 4 -ub 4 -s 8 2>/dev/null | grep '^Final estimate')"
[ -n "$r1" ] && [ "$r1" = "$r2" ] && ok || bad "random, one seed: '$r1' vs '$r2'"
[ -n "$r3" ] && [ "$r1" != "$r3" ] && ok || bad "random, another seed gave the same: '$r3'"

stream="$(ppl --kv-policy streaming --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null | grep '^Final estimate')"
for pol in h2o snapkv tova; do
  out="$(ppl --kv-policy "$pol" --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null)"
  peak="$(printf '%s\n' "$out" | sed -n 's/^KV memory: peak \([0-9]*\) blocks.*/\1/p')"
  est="$(printf '%s\n' "$out" | grep '^Final estimate')"
  if [ -n "$est" ] && [ -n "$peak" ] && [ "$peak" -le 1 ] && printf '%s\n' "$out" | grep -q ' [1-9][0-9]* slots dropped' &&
     [ "$est" != "$stream" ]; then ok; else bad "$pol run: '$out' (streaming: '$stream')"; fi
  whole="$(ppl --kv-policy "$pol" --kv-budget 64 --kv-window 8 -ub 8 2>/dev/null | grep '^Final estimate')"
  [ -n "$plain" ] && [ "$plain" = "$whole" ] && ok || bad "$pol, a budget of the whole chunk: '$whole' vs '$plain'"
done

# role: on JSON it differs from streaming (each role ages at its own rate), on a budget of the whole chunk it is the
# plain run, and its evictions free blocks as every policy's do
for i in 1 2 3 4 5 6; do printf '{"name": "item%d", "tags": ["a", "b"], "size": %d, "ok": true}, ' "$i" "$((i * 7))"; done > "$tmp/json.txt"
jppl() { "$brisk" perplexity -m "$model" -f "$tmp/json.txt" -t 2 -c 64 "$@"; }
jstream="$(jppl --kv-policy streaming --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null | grep '^Final estimate')"
out="$(jppl --kv-policy role --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null)"
est="$(printf '%s\n' "$out" | grep '^Final estimate')"
if [ -n "$est" ] && [ -n "$jstream" ] && [ "$est" != "$jstream" ] && printf '%s\n' "$out" | grep -q ' [1-9][0-9]* slots dropped'; then ok
else bad "role run: '$out' (streaming: '$jstream')"; fi
jplain="$(jppl 2>/dev/null | grep '^Final estimate')"
whole="$(jppl --kv-policy role --kv-budget 64 --kv-window 8 -ub 8 2>/dev/null | grep '^Final estimate')"
[ -n "$jplain" ] && [ "$jplain" = "$whole" ] && ok || bad "role, a budget of the whole chunk: '$whole' vs '$jplain'"

out="$(ppl --kv-policy oracle --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null)"
est="$(printf '%s\n' "$out" | grep '^Final estimate')"
if [ -n "$est" ] && [ "$est" != "$stream" ] && printf '%s\n' "$out" | grep -q ' [1-9][0-9]* slots dropped'; then ok; else bad "oracle run: '$out'"; fi
whole="$(ppl --kv-policy oracle --kv-budget 64 --kv-window 8 -ub 8 2>/dev/null | grep '^Final estimate')"
[ -n "$plain" ] && [ "$plain" = "$whole" ] && ok || bad "oracle, a budget of the whole chunk: '$whole' vs '$plain'"
absent="$tmp/absent.gguf"
for cmd in run chat; do
  expect_err 2 "--kv-policy oracle ranks slots by the attention of queries still to come" "$brisk" $cmd -m "$absent" -p x -c 128 --kv-policy oracle --kv-budget 64
  expect_err 2 "only brisk perplexity knows its text ahead (a chunk), $cmd cannot" "$brisk" $cmd -m "$absent" -p x -c 128 --kv-policy oracle --kv-budget 64
done
expect_err 2 "only brisk perplexity knows its text ahead (a chunk), bench cannot" "$brisk" bench -m "$absent" --kv-policy oracle --kv-budget 64
expect_err 2 "--kv-policy-draft oracle ranks slots by the attention of queries still to come" "$brisk" run -m "$absent" -p x -md "$absent" --spec draft --kv-policy-draft oracle --kv-budget-draft 64

for pol in h2o snapkv tova oracle memdecay; do
  shared="$(ppl --kv-policy "$pol" --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null | grep '^Final estimate')"
  out="$(ppl --kv-policy "$pol" --kv-per-head --kv-budget 24 --kv-window 4 -ub 4 2>/dev/null)"
  peak="$(printf '%s\n' "$out" | sed -n 's/^KV memory: peak \([0-9]*\) blocks.*/\1/p')"
  est="$(printf '%s\n' "$out" | grep '^Final estimate')"
  if [ -n "$est" ] && [ -n "$shared" ] && [ "$est" != "$shared" ] && printf '%s\n' "$out" | grep -q ' [1-9][0-9]* slots dropped' &&
     { [ "$pol" = oracle ] || { [ -n "$peak" ] && [ "$peak" -le 1 ]; }; }; then ok; else bad "$pol --kv-per-head: '$out' (shared: '$shared')"; fi
  whole="$(ppl --kv-policy "$pol" --kv-per-head --kv-budget 64 --kv-window 8 -ub 8 2>/dev/null | grep '^Final estimate')"
  [ -n "$plain" ] && [ "$plain" = "$whole" ] && ok || bad "$pol --kv-per-head, a budget of the whole chunk: '$whole' vs '$plain'"
done
expect_err 2 "--kv-per-head needs --kv-policy" ppl --kv-per-head
expect_err 2 "it needs --kv-policy h2o, snapkv, tova, oracle or memdecay (not streaming)" ppl --kv-policy streaming --kv-budget 32 --kv-window 8 -ub 8 --kv-per-head
expect_err 2 "--kv-per-head does not keep pinned roles yet" "$brisk" run -m "$absent" -p x -c 128 --kv-policy h2o --kv-budget 64 --kv-per-head --kv-pin prompt

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
