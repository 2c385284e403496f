#!/usr/bin/env bash
# KV cache types on the command line and perplexity's KL divergence (docs/KV.md):
#   - -ctk/-ctv: llama.cpp's names and KIVI's k4/k2 in any case (k4/k2 K refused
#     with a retention policy); llama.cpp's other types and
#     unknown names refused naming the supported ones; -fa on|off|auto accepted;
#   - --kl-divergence-base FILE alone writes llama-perplexity's file: its header
#     and tokens are byte-identical to tests/data/kld/peer-c16.kld, which
#     llama-perplexity wrote for the same text, -c and --chunks
#     (llama-perplexity -m models/pycode-target-f16.gguf -f tests/data/kld/input.txt
#      -c 16 --chunks 1 -fa on --kl-divergence-base peer-c16.kld);
#   - --kl-divergence reads llama-perplexity's file: brisk's F16 logits are within
#     1e-4 KL of llama.cpp's, q4_0 K+V measurably further; the block is printed
#     from 100 positions on, with its llama-perplexity labels;
#   - refusals name -c, --chunks, the tokens, the vocabulary, a truncated file.
set -u
brisk="$1"
here="$(cd "$(dirname "$0")" && pwd)"
model="$here/../models/pycode-target-f16.gguf"
text="$here/data/kld/input.txt"
peer="$here/data/kld/peer-c16.kld"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_err() {   # expected exit code, text the message must hold, command...
  local code="$1" needle="$2"; shift 2
  local out rc; out="$("$@" 2>&1 >/dev/null)"; rc=$?
  if [ "$rc" -eq "$code" ] && printf '%s' "$out" | grep -qF -- "$needle"; then ok; else bad "$* -> rc $rc, '$out' (want $code, '$needle')"; fi
}
ppl() { "$brisk" perplexity -m "$model" -t 2 "$@"; }

# flags
expect_err 2 "supported: f16, f32, q8_0, q4_0" ppl -f "$text" -c 16 -ctk bogus
expect_err 2 "not supported by brisk" ppl -f "$text" -c 16 -ctv q5_1
expect_err 2 "not supported by brisk" ppl -f "$text" -c 16 --cache-type-k BF16
expect_err 2 "-fa" ppl -f "$text" -c 16 -fa maybe
for t in F16 f32 Q8_0 q4_0 K4 k2; do
  if ppl -f "$text" -c 16 -ctk "$t" --cache-type-v "$t" -fa on 2>/dev/null | grep -q '^Final estimate'; then ok; else bad "-ctk $t"; fi
done
a="$(ppl -f "$text" -c 16 2>/dev/null)"; b="$(ppl -f "$text" -c 16 -ctk f16 -ctv f16 -fa off 2>/dev/null)"
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "explicit f16 differs from the default"

# the same flags on run, chat, bench and serve: refusals before anything loads; run's explicit f16 is the default's
# output byte for byte, and every type generates
for cmd in run chat bench serve; do
  expect_err 2 "supported: f16, f32, q8_0, q4_0" "$brisk" $cmd -m "$model" -ctk bogus
  expect_err 2 "not supported by brisk" "$brisk" $cmd -m "$model" -ctv iq4_nl
done
gen() { "$brisk" run -m "$model" -p 'def add(a, b):' -n 24 --temp 0 -t 2 --no-display-prompt "$@" 2>/dev/null; }
a="$(gen)"; b="$(gen -ctk F16 -ctv f16 -fa on)"
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "run: explicit f16 differs from the default"
for t in f32 q8_0 q4_0 k4 K2; do
  [ -n "$(gen -ctk $t -ctv $t)" ] && ok || bad "run -ctk $t -ctv $t generated nothing"
done
# hyb4/hyb2 (k4/k2 with hot F16 rows) on K and V together: runs, refusals of a mix, a policy, speculation
for t in HYB4 hyb2; do
  [ -n "$(gen -ctk $t -ctv $t -n 80)" ] && ok || bad "run -ctk $t -ctv $t generated nothing"
  if ppl -f "$text" -c 96 -ctk "$t" -ctv "$t" 2>&1 | grep -q 'hot rows .* MiB per sequence; blocks + hot rows = '; then ok; else bad "ppl -ctk $t: no hot-row memory line"; fi
done
expect_err 2 "-ctk hyb4 -ctv f16: hyb4 and hyb2 keep a slot's K and V in F16 together" ppl -f "$text" -c 16 -ctk hyb4
expect_err 2 "-ctk q8_0 -ctv hyb2: hyb4 and hyb2" "$brisk" run -m "$model" -p x -ctk q8_0 -ctv hyb2
expect_err 2 "--kv-policy is not available with -ctk hyb4" "$brisk" serve -m "$model" -ctk hyb4 -ctv hyb4 --kv-policy streaming --kv-budget 64
expect_err 2 "--spec is not available with -ctk hyb4" "$brisk" serve -m "$model" -ctk hyb4 -ctv hyb4 --spec ngram
expect_err 1 "retention policy cannot compact it" ppl -f "$text" -c 64 -ctk hyb4 -ctv hyb4 --kv-policy streaming --kv-budget 48 -ub 8 --kv-window 8
# KIVI's types mix with the others; with a retention policy a k4/k2 K is refused, naming why
[ -n "$(gen -ctk k4 -ctv q8_0)" ] && [ -n "$(gen -ctk q4_0 -ctv k2)" ] && ok || bad "run with k4/q8_0 or q4_0/k2 generated nothing"
expect_err 1 "retention policy cannot compact it" ppl -f "$text" -c 64 -ctk k4 --kv-policy streaming --kv-budget 48 -ub 8 --kv-window 8
if "$brisk" bench -m "$model" -p 8 -n 4 -r 1 -d 16 -ctk k4 -ctv k2 -o json 2>/dev/null | grep -q '"n_depth"'; then ok; else bad "bench -ctk k4 -ctv k2 -d 16"; fi
if "$brisk" bench -m "$model" -p 8 -n 4 -r 1 -d 16 -ctk q8_0 -ctv q4_0 -o json 2>/dev/null | grep -q '"n_depth"'; then ok; else bad "bench -ctk q8_0 -ctv q4_0 -d 16"; fi
q="$(ppl -f "$text" -c 16 -ctk q4_0 -ctv q4_0 2>/dev/null)"
[ -n "$q" ] && [ "$a" != "$q" ] && ok || bad "q4_0 K+V gives F16's perplexity: the type is not used"
# --k-hadamard (-khad): a q8_0/q4_0 K stored rotated; it changes the result, and any other K is refused naming the types
qh="$(ppl -f "$text" -c 16 -ctk q4_0 -ctv q4_0 --k-hadamard 2>/dev/null)"
[ -n "$qh" ] && [ "$qh" != "$q" ] && ok || bad "--k-hadamard gives the unrotated q4_0 perplexity: the rotation is not used"
[ -n "$(gen -ctk q8_0 -khad)" ] && ok || bad "run -ctk q8_0 -khad generated nothing"
for cmd in run chat bench serve; do
  expect_err 2 "needs -ctk q8_0 or q4_0 (K is f16)" "$brisk" $cmd -m "$model" -khad < /dev/null
done
expect_err 2 "needs -ctk q8_0 or q4_0 (K is f16)" ppl -f "$text" -c 16 -khad
expect_err 2 "needs -ctk q8_0 or q4_0 (K is k4)" ppl -f "$text" -c 16 -ctk k4 --k-hadamard

# the file brisk writes: llama-perplexity's header and tokens
ppl -f "$text" -c 16 --chunks 1 --kl-divergence-base "$tmp/base.kld" >/dev/null 2>&1 || bad "writing the base file"
if cmp -s -n 84 "$tmp/base.kld" "$peer" && [ "$(stat -c %s "$tmp/base.kld")" = "$(stat -c %s "$peer")" ]; then ok
else bad "base file header/tokens/size differ from llama-perplexity's"; fi

# reading llama-perplexity's file
kld_of() { sed -n 's/^\[1\] KLD \(-\{0,1\}[0-9.]*\).*/\1/p'; }
k16="$(ppl -f "$text" --kl-divergence-base "$peer" --kl-divergence 2>&1 | kld_of)"
k4="$(ppl --kl-divergence-base "$peer" --kl-divergence -ctk q4_0 -ctv q4_0 2>&1 | kld_of)"
echo "KLD against llama-perplexity's F16 logits: brisk f16 $k16, brisk q4_0 K+V $k4"
awk -v a="$k16" 'BEGIN { exit !(a != "" && a < 1e-4 && a > -1e-4) }' && ok || bad "f16 KLD '$k16' not within 1e-4"
awk -v a="$k16" -v b="$k4" 'BEGIN { exit !(b != "" && b > 1e-3 && b > 10 * (a < 0 ? -a : a)) }' && ok || bad "q4_0 KLD '$k4' not above f16's"
# the statistics block, from 100 positions on (the text three times at -c 16: 21 chunks, 147 positions), against brisk's own base
cat "$text" "$text" "$text" > "$tmp/text3.txt"
ppl -f "$tmp/text3.txt" -c 16 --kl-divergence-base "$tmp/b105.kld" >/dev/null 2>&1 || true
if [ -s "$tmp/b105.kld" ]; then
  out="$(ppl -f "$tmp/text3.txt" --kl-divergence-base "$tmp/b105.kld" --kl-divergence -ctk q8_0 -ctv q8_0 2>/dev/null)"
  for label in "====== Perplexity statistics ======" "Mean PPL(Q)                   :" "Mean    KLD:" "99.0%   KLD:" \
               "Median  KLD:" "Maximum Δp:" "RMS Δp    :" "Same top p:"; do
    printf '%s\n' "$out" | grep -qF -- "$label" && ok || bad "no '$label' in the block"
  done
  self="$(ppl -f "$tmp/text3.txt" --kl-divergence-base "$tmp/b105.kld" --kl-divergence 2>/dev/null | sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p')"
  [ "$self" = "100.000" ] && ok || bad "F16 against its own base: same top p '$self'"
else bad "the 7-chunk text gave no base file"; fi

# refusals
expect_err 1 "-c 16, this run has -c 32" ppl --kl-divergence-base "$peer" --kl-divergence -c 32
expect_err 1 "--chunks 2" ppl --kl-divergence-base "$peer" --kl-divergence --chunks 2
expect_err 1 "tokens differ" ppl -f "$here/../README.md" --kl-divergence-base "$peer" --kl-divergence
expect_err 1 "vocabulary 4096" "$brisk" perplexity -m "$here/data/golden/qwen2-tiny-Q4_0.gguf" --kl-divergence-base "$peer" --kl-divergence
head -c 1000 "$peer" > "$tmp/trunc.kld"
expect_err 1 "truncated" ppl --kl-divergence-base "$tmp/trunc.kld" --kl-divergence
cat "$peer" "$peer" > "$tmp/long.kld"
expect_err 1 "trailing bytes" ppl --kl-divergence-base "$tmp/long.kld" --kl-divergence
printf 'GGUF0000000000000000' > "$tmp/nope.kld"
expect_err 1 "_logits_" ppl --kl-divergence-base "$tmp/nope.kld" --kl-divergence
expect_err 2 "needs --kl-divergence-base" ppl -f "$text" --kl-divergence
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
