#!/usr/bin/env bash
# brisk template: exact bytes on stdout (no newline added), variables, the
# model's own template and BOS/EOS, template errors with the template's own
# message, and bad input. Usage: bash tests/cli_template.sh BRISK SHARED_DIR
set -u
brisk="$1"
shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/tests/data/templates"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0

ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

# expect_bytes NAME EXPECTED CMD...: exit 0 and stdout exactly EXPECTED (printf %b escapes)
expect_bytes() {
  local name="$1" want="$2"; shift 2
  printf '%b' "$want" > "$tmp/want"
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/want"; then ok
  else bad "$name: rc=$rc out=[$(head -c 300 "$tmp/out")] err=[$(head -c 300 "$tmp/err")]"; fi
}
# expect_fail NAME RC PATTERN CMD...: exit RC, nothing on stdout, stderr matches PATTERN
expect_fail() {
  local name="$1" want_rc="$2" pat="$3"; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$want_rc" ] && [ ! -s "$tmp/out" ] && grep -qE -- "$pat" "$tmp/err"; then ok
  else bad "$name: rc=$rc (want $want_rc) out=[$(head -c 200 "$tmp/out")] err=[$(head -c 300 "$tmp/err")]"; fi
}

printf '%s' '{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{{ extra | default("") }}' > "$tmp/t.jinja"
printf '%s' '[{"role":"user","content":"Hi é"},{"role":"assistant","content":"Yo"}]' > "$tmp/m.json"

expect_bytes "plain" '<user>Hi é<assistant>Yo' \
  "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json"
expect_bytes "generation prompt" '<user>Hi é<assistant>Yo<assistant>' \
  "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json" --add-generation-prompt
expect_bytes "vars" '<s><user>Hi é</s><assistant>Yo</s>[1, True]' \
  "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json" \
  --var 'bos_token="<s>"' --var 'eos_token="</s>"' --var 'extra=[1, true]'
expect_bytes "later --var wins" '<user>Hi é<assistant>Yo2' \
  "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json" --var extra=1 --var extra=2
expect_bytes "messages from stdin" '<user>Hi é<assistant>Yo' \
  sh -c "\"$brisk\" template --chat-template \"$tmp/t.jinja\" --messages - < \"$tmp/m.json\""

# a real template (committed copy): Qwen3 with and without thinking
printf '%s' '[{"role":"user","content":"Hello! How are you?"}]' > "$tmp/one.json"
expect_bytes "Qwen3" '<|im_start|>user\nHello! How are you?<|im_end|>\n<|im_start|>assistant\n' \
  "$brisk" template --chat-template "$data/Qwen-Qwen3-0.6B.jinja" --messages "$tmp/one.json" --add-generation-prompt
expect_bytes "Qwen3 enable_thinking=false" '<|im_start|>user\nHello! How are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' \
  "$brisk" template --chat-template "$data/Qwen-Qwen3-0.6B.jinja" --messages "$tmp/one.json" --add-generation-prompt \
  --var enable_thinking=false
# Llama 3.1 prints strftime-free dates; gemma-2 rejects a system role with its own message
expect_bytes "Llama 3.1" '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello! How are you?<|eot_id|>' \
  "$brisk" template --chat-template "$data/meta-llama-Llama-3.1-8B-Instruct.jinja" --messages "$tmp/one.json" \
  --var 'bos_token="<|begin_of_text|>"'
printf '%s' '[{"role":"system","content":"s"},{"role":"user","content":"u"}]' > "$tmp/sys.json"
expect_fail "raise_exception" 1 '^brisk template: System role not supported$' \
  "$brisk" template --chat-template "$data/google-gemma-2-2b-it.jinja" --messages "$tmp/sys.json"

# strftime_now under BRISK_TEMPLATE_NOW
printf '%s' "{{ strftime_now('%Y-%m-%d %d %b %Y') }}" > "$tmp/date.jinja"
expect_bytes "strftime_now" '2026-01-02 02 Jan 2026' \
  env BRISK_TEMPLATE_NOW=2026-01-02 "$brisk" template --chat-template "$tmp/date.jinja" --messages "$tmp/m.json"
expect_fail "bad BRISK_TEMPLATE_NOW" 1 'BRISK_TEMPLATE_NOW' \
  env BRISK_TEMPLATE_NOW=yesterday "$brisk" template --chat-template "$tmp/date.jinja" --messages "$tmp/m.json"

# errors
expect_fail "no template" 2 'exactly one of -m' "$brisk" template --messages "$tmp/m.json"
expect_fail "two templates" 2 'exactly one of -m' "$brisk" template -m x.gguf --chat-template "$tmp/t.jinja" --messages "$tmp/m.json"
expect_fail "no messages" 2 '--messages FILE is required' "$brisk" template --chat-template "$tmp/t.jinja"
expect_fail "unknown option" 2 "unknown option '--bogus'" "$brisk" template --bogus
expect_fail "missing value" 2 'needs a value' "$brisk" template --chat-template
expect_fail "var without =" 2 'expected NAME=JSON' "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json" --var foo
expect_fail "var not JSON" 2 'value is not JSON' "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/m.json" --var foo=bar
expect_fail "missing template file" 1 'nope.jinja' "$brisk" template --chat-template "$tmp/nope.jinja" --messages "$tmp/m.json"
printf '%s' '{"role":"user"}' > "$tmp/obj.json"
expect_fail "messages not an array" 1 'expected a JSON array' "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/obj.json"
printf '%s' '[{"role":' > "$tmp/trunc.json"
expect_fail "messages not JSON" 1 'messages' "$brisk" template --chat-template "$tmp/t.jinja" --messages "$tmp/trunc.json"
printf '%s' '{% for %}' > "$tmp/syntax.jinja"
expect_fail "syntax error" 1 'template line 1' "$brisk" template --chat-template "$tmp/syntax.jinja" --messages "$tmp/m.json"
printf '%s' '{% call foo() %}{% endcall %}' > "$tmp/unsup.jinja"
expect_fail "unsupported construct" 1 'unsupported: the \{% call %\} tag' "$brisk" template --chat-template "$tmp/unsup.jinja" --messages "$tmp/m.json"
printf '%s' '{{ missing.attr }}' > "$tmp/undef.jinja"
expect_fail "undefined" 1 "'missing' is undefined" "$brisk" template --chat-template "$tmp/undef.jinja" --messages "$tmp/m.json"

# -m: the template and BOS/EOS strings stored in a GGUF vocabulary
vocab="$shared/vocab/ggml-vocab-phi-3.gguf"
if [ -n "$shared" ] && [ -f "$vocab" ]; then
  expect_bytes "-m phi-3" '<s><|user|>\nHello! How are you?<|end|>\n<|assistant|>\n' \
    "$brisk" template -m "$vocab" --messages "$tmp/one.json" --add-generation-prompt
  expect_fail "-m without a template" 1 'has no tokenizer.chat_template' \
    "$brisk" template -m "$shared/vocab/ggml-vocab-llama-spm.gguf" --messages "$tmp/one.json"
else
  echo "note: $vocab absent; -m cases skipped"
fi
expect_fail "-m missing file" 1 'no-such.gguf' "$brisk" template -m "$tmp/no-such.gguf" --messages "$tmp/one.json"

echo "cli_template: $pass passed, $fail failed"
[ $fail -eq 0 ]
