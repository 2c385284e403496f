#!/usr/bin/env bash
# Generation past the context and pinning on `brisk run` and `brisk chat` (docs/KV.md):
#   - refusals (exit 2, before any model loads, naming the flag): an unknown
#     role, a role the command does not tag, --kv-pin without anything that
#     drops slots, --kv-sink without a policy or a shift, the retention flags
#     with --spec or --prompt-cache;
#   - --no-context-shift is the default: stdout byte-identical to no flag, no KV line;
#   - a policy whose budget is the whole -c runs the new path (positions from
#     the cache, room made per token) and gives plain decoding's bytes;
#   - --context-shift past -c: all -n tokens generated, shifts counted, finish reason length;
#   - a policy without a shift stops where the positions reach the model's
#     trained context (512 for the fixture), finish reason length; with
#     --context-shift it goes on;
#   - the prompt's batch size (-b) does not change the output, with a policy or a shift;
#   - --kv-pin prompt survives the shifts; pinned slots that leave no room
#     fail with a message (exit 1);
#   - chat with a policy, a shift and --kv-pin system: two turns, the KV line;
#     every role pinned: nothing is evicted and the reply is refused with the message.
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
[ -f "$model" ] || { echo "SKIP: $model absent (make models)"; exit 77; }
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_err() {   # expected exit code, text the message must hold, command...
  local code="$1" needle="$2"; shift 2
  local out rc; out="$("$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -qF -- "$needle"; then ok; else bad "$* -> rc $rc, '$out' (want $code, '$needle')"; fi
}
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
run() { "$brisk" run -m "$model" -p "def parse(text):" --temp 0 -t 2 "$@"; }
absent="$tmp/absent.gguf"   # refusals come before the model loads

expect_err 2 "--kv-pin 'bogus': unknown role (run tags: prompt, generated)" "$brisk" run -m "$absent" -p x --context-shift --kv-pin bogus
expect_err 2 "--kv-pin 'user': not a role this command tags (run tags: prompt, generated)" "$brisk" run -m "$absent" -p x --context-shift --kv-pin user
expect_err 2 "--kv-pin needs --kv-policy NAME or --context-shift" "$brisk" run -m "$absent" -p x --kv-pin prompt
expect_err 2 "--kv-sink needs --kv-policy NAME (one other than none) or --context-shift" "$brisk" run -m "$absent" -p x --kv-sink 2
expect_err 2 "--context-shift is not available with --spec" "$brisk" run -m "$absent" -p x --context-shift --spec ngram
expect_err 2 "--kv-policy is not available with --prompt-cache" "$brisk" run -m "$absent" -p x --kv-policy streaming --kv-budget 32 --kv-window 8 -c 64 --prompt-cache "$tmp/p.kv"
expect_err 2 "cannot hold the 4 sinks (--kv-sink), the 32-slot window (--kv-window) and a ubatch of 1" "$brisk" run -m "$absent" -p x --kv-policy streaming --kv-budget 30 -c 64
expect_err 2 "--kv-pin 'prompt': not a role this command tags (chat tags: system, user, assistant, tool)" "$brisk" chat -m "$absent" --context-shift --kv-pin prompt
expect_err 2 "--kv-pin 'generated': not a role this command tags (chat tags" "$brisk" run -cnv -m "$absent" --context-shift --kv-pin generated

# the default is no shift: the plain path, bytes unchanged, no KV line
run -n 40 -c 128 > "$tmp/plain.out" 2> "$tmp/plain.err"
run -n 40 -c 128 --no-context-shift > "$tmp/noshift.out" 2> "$tmp/noshift.err"
cmp -s "$tmp/plain.out" "$tmp/noshift.out" && [ -s "$tmp/plain.out" ] && ! grep -q 'brisk run: KV' "$tmp/noshift.err" && ok ||
  bad "--no-context-shift differs from no flag"
# a budget of the whole context never evicts: the per-token path gives the same bytes
run -n 40 -c 128 --kv-policy streaming --kv-budget 128 > "$tmp/whole.out" 2> "$tmp/whole.err"
cmp -s "$tmp/plain.out" "$tmp/whole.out" && grep -q ' 0 slots dropped' "$tmp/whole.err" && ok ||
  bad "a budget of the whole -c: $(cat "$tmp/whole.err")"

# past -c with the shift: every token generated
run -n 200 -c 64 --ignore-eos --context-shift > "$tmp/shift.out" 2> "$tmp/shift.err"; rc=$?
shifts="$(sed -n 's/.*(keep 4): \([0-9]*\) shifts.*/\1/p' "$tmp/shift.err")"
if [ $rc -eq 0 ] && grep -q 'generated 200 tokens' "$tmp/shift.err" && [ -n "$shifts" ] && [ "$shifts" -ge 3 ] &&
   grep -q 'finish reason length$' "$tmp/shift.err"; then ok; else bad "--context-shift past -c: rc $rc $(cat "$tmp/shift.err")"; fi
# without it the request is refused up front, as before
expect_err 1 "exceeds the context size 64" run -n 200 -c 64 --ignore-eos

# a policy without a shift stops at the trained context (512), with one it goes on
run -n 700 -c 128 --ignore-eos --kv-policy streaming --kv-budget 64 > "$tmp/pol.out" 2> "$tmp/pol.err"; rc=$?
if [ $rc -eq 0 ] && grep -q 'finish reason length (the context is full' "$tmp/pol.err" &&
   grep -q 'stopped at position 512: the model.s trained context is 512 positions' "$tmp/pol.err" &&
   grep -q ' [1-9][0-9]* slots dropped' "$tmp/pol.err"; then ok; else bad "policy without a shift: rc $rc $(cat "$tmp/pol.err")"; fi
run -n 700 -c 128 --ignore-eos --kv-policy streaming --kv-budget 64 --context-shift > "$tmp/pols.out" 2> "$tmp/pols.err"; rc=$?
if [ $rc -eq 0 ] && grep -q 'generated 700 tokens' "$tmp/pols.err" && grep -q '(keep 4): [1-9][0-9]* shifts' "$tmp/pols.err"; then ok
else bad "policy with a shift: rc $rc $(cat "$tmp/pols.err")"; fi
# the generation before the first shift is the unshifted run's
head -c 300 "$tmp/pol.out" > "$tmp/a"; head -c 300 "$tmp/pols.out" > "$tmp/b"
cmp -s "$tmp/a" "$tmp/b" && ok || bad "the shifted run's first bytes differ from the unshifted run's"

# pinning the prompt through shifts; pinning everything leaves no room
run -n 150 -c 64 --ignore-eos --context-shift --kv-pin prompt > "$tmp/pin.out" 2> "$tmp/pin.err"; rc=$?
[ $rc -eq 0 ] && grep -q 'pinned prompt' "$tmp/pin.err" && grep -q 'generated 150 tokens' "$tmp/pin.err" && ok ||
  bad "--kv-pin prompt: rc $rc $(cat "$tmp/pin.err")"
expect_err 1 "pin fewer roles" run -n 150 -c 64 --ignore-eos --context-shift --kv-pin prompt --kv-pin generated
expect_err 1 "pinned KV slots (--kv-pin)" run -n 300 -c 64 --ignore-eos --kv-policy streaming --kv-budget 48 --kv-window 8 --kv-pin generated

# the prompt's batches (-b) do not change the output: under a policy every batch stops where the policy cuts
# (brisk_seq_policy_room), and a context shift falls where the slots are full, whatever -b is (a 442-token prompt)
head -c 1200 "$root/bench/kv-needle.py" > "$tmp/long.txt"
for flags in "--kv-policy streaming --kv-budget 96 -c 256" "--kv-policy h2o --kv-budget 96 -c 256" "--context-shift -c 128" \
             "--kv-policy snapkv --kv-per-head --kv-budget 96 -c 256"; do
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  for b in 5 64 512; do "$brisk" run -m "$model" -f "$tmp/long.txt" -n 40 --ignore-eos --temp 0 -t 2 $flags -b $b > "$tmp/b$b.out" 2>/dev/null; done
  [ -s "$tmp/b5.out" ] && cmp -s "$tmp/b5.out" "$tmp/b64.out" && cmp -s "$tmp/b5.out" "$tmp/b512.out" && ok ||
    bad "$flags: the output depends on -b (5, 64, 512)"
done
# per-head selection through a context shift (442 + 120 tokens pass pycode-target's trained 512): each head's K turns
# by its own delta, and the output still does not depend on -b
for b in 5 512; do
  "$brisk" run -m "$model" -f "$tmp/long.txt" -n 120 --ignore-eos --temp 0 -t 2 --kv-policy h2o --kv-per-head --kv-budget 96 -c 256 --context-shift \
    -b $b > "$tmp/h$b.out" 2> "$tmp/h$b.err"
done
grep -q 'context shift on.*: [1-9][0-9]* shifts' "$tmp/h5.err" && [ -s "$tmp/h5.out" ] && cmp -s "$tmp/h5.out" "$tmp/h512.out" && ok ||
  bad "per-head through a shift: $(cat "$tmp/h5.err")"

# chat: a policy, a shift and a pinned system prompt over two turns
if [ -f "$tpl" ]; then
  printf 'def f():\nclass A:\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -sys "Be brief." -n 80 --ignore-eos --temp 0 -t 2 \
    -c 96 --kv-policy streaming --kv-budget 64 --kv-window 8 --context-shift --kv-pin system > "$tmp/chat.out" 2> "$tmp/chat.err"; rc=$?
  [ $rc -eq 0 ] && grep -q 'brisk chat: KV .*streaming budget 64.*pinned system' "$tmp/chat.err" &&
    grep -q ' [1-9][0-9]* slots dropped' "$tmp/chat.err" && [ "$(grep -c . "$tmp/chat.out")" -ge 2 ] && ok ||
    bad "chat with retention: rc $rc $(cat "$tmp/chat.err")"
  # every message's role pinned (the generation prompt and the reply are the assistant's): no token can go, and the
  # policy says so; the chat goes on (exit 0)
  printf 'def f():\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -sys "Be brief." -n 80 --ignore-eos --temp 0 -t 2 \
    -c 96 --kv-policy streaming --kv-budget 64 --kv-window 8 --kv-pin system --kv-pin user --kv-pin assistant > "$tmp/chat3.out" 2> "$tmp/chat3.err"; rc=$?
  [ $rc -eq 0 ] && grep -q 'pinned KV slots (--kv-pin) with the 4 sinks and the 8-slot window leave no room' "$tmp/chat3.err" &&
    grep -q ' 0 slots dropped' "$tmp/chat3.err" && ok || bad "chat with every role pinned: rc $rc $(cat "$tmp/chat3.err")"
  # a message refused part way (its pinned slots outgrow the budget) leaves nothing behind: the next turn answers
  # as a chat that never had it does (before 2026-12-06 its partial slots stayed, and the next turn was refused too)
  long="$(head -c 400 "$root/bench/kv-needle.py" | tr '\n' ' ')"
  chp() { "$brisk" chat -m "$model" --chat-template "$tpl" -sys "Be brief." -n 30 --ignore-eos --temp 0 -t 2 -c 256 \
            --kv-policy streaming --kv-budget 64 --kv-window 8 --kv-pin user; }
  printf '%s\ndef f():\n/exit\n' "$long" | chp > "$tmp/chA.out" 2> "$tmp/chA.err"
  printf 'def f():\n/exit\n' | chp > "$tmp/chB.out" 2> /dev/null
  grep -q 'pinned KV slots (--kv-pin) with the 4 sinks' "$tmp/chA.err" && [ -s "$tmp/chB.out" ] && cmp -s "$tmp/chA.out" "$tmp/chB.out" && ok ||
    bad "a refused message changed the next turn: $(cat "$tmp/chA.err")"
  printf 'def f():\nclass A:\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 80 --ignore-eos --temp 0 -t 2 \
    -c 64 --context-shift > "$tmp/chat2.out" 2> "$tmp/chat2.err"; rc=$?
  [ $rc -eq 0 ] && grep -q '(keep 4): [1-9][0-9]* shifts' "$tmp/chat2.err" && ok || bad "chat with a shift: rc $rc $(cat "$tmp/chat2.err")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
