#!/usr/bin/env bash
# brisk chat: multi-turn with /reset and /exit, Ctrl-C stops a reply but not
# the program, a template's raise_exception is reported and the chat goes on,
# and a model without a template is refused clearly. Uses the bundled model
# with committed templates (the replies are nonsense: it is a Python model).
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
gemma="$root/tests/data/templates/google-gemma-2-2b-it.jinja"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp" 2>/dev/null' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
[ -f "$tpl" ] || tpl="$2/templates/Qwen-Qwen3-0.6B.jinja"
[ -f "$gemma" ] || gemma="$2/templates/google-gemma-2-2b-it.jinja"
if [ ! -f "$tpl" ] || [ ! -f "$gemma" ]; then echo "SKIP: chat templates absent"; exit 77; fi

printf 'hello\n/reset\nwrite a function\n/exit\nnever read\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 8 --temp 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ok || bad "multi-turn rc=$rc: $(cat "$tmp/err")"
[ "$(grep -c . "$tmp/out")" -ge 2 ] && ok || bad "expected two replies, got: $(cat "$tmp/out")"

# Ctrl-C during a long reply: the reply stops, the program goes on to /exit
mkfifo "$tmp/in"
"$brisk" chat -m "$model" --chat-template "$tpl" -n 1000000 -c 100000 --temp 1 --ignore-eos <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in"
echo "def f():" >&3
# interrupt only once the reply is streaming (startup is slow under ASan)
for _ in $(seq 600); do [ -s "$tmp/out" ] && break; sleep 0.1; done
kill -INT $pid
sleep 0.5
echo "/exit" >&3
exec 3>&-
for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -9 $pid 2>/dev/null   # a chat still running after 60 s has ignored Ctrl-C or /exit
wait $pid; rc=$?
[ $rc -eq 0 ] && grep -q "\[stopped\]" "$tmp/err" && ok || bad "Ctrl-C: rc=$rc err: $(tail -c 300 "$tmp/err")"

# the template raises (gemma rejects a system role): reported, chat continues
printf 'hi\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$gemma" --system "be nice" -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "System role not supported" "$tmp/err" && ok || bad "raise_exception: rc=$rc err: $(cat "$tmp/err")"

# a line that is not valid UTF-8 (or holds a NUL) is refused with a message; the chat goes on
printf 'bad \377 byte\nnul \000 byte\nhello\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 4 --temp 0 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "not valid UTF-8 (byte 4, 0xff); ignored" "$tmp/err" && grep -q "NUL byte; ignored" "$tmp/err" \
  && ! grep -q "out of memory" "$tmp/err" && [ "$(grep -c . "$tmp/out")" -ge 1 ] && ok || bad "invalid UTF-8: rc=$rc err: $(cat "$tmp/err")"

# a trailing backslash continues the message on the next line (the template echoes it back as an error)
printf '%s' "{{ raise_exception('got[' + messages[-1]['content'] + ']') }}" > "$tmp/echo.jinja"
printf 'line one\\\nline two\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tmp/echo.jinja" -n 2 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "got\[line one$" "$tmp/err" && grep -q "^line two\]" "$tmp/err" && ok || bad "multi-line: rc=$rc err: $(cat "$tmp/err")"

# /help lists the commands and is not sent to the model
printf '/help\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tmp/echo.jinja" -n 2 -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "^/reset" "$tmp/out" && grep -q "^/exit" "$tmp/out" && ! grep -q "got\[" "$tmp/err" && ok || bad "/help: rc=$rc out: $(cat "$tmp/out") err: $(cat "$tmp/err")"

# a last line without a newline is still read
printf '/help' | "$brisk" chat -m "$model" --chat-template "$tmp/echo.jinja" -n 2 -t 1 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^/reset" "$tmp/out" && ok || bad "last line without newline: $(cat "$tmp/out")"

# -p is a first message; -sys the system prompt (-e processes escapes in both)
printf '/exit\n' | "$brisk" chat -m "$model" --chat-template "$tmp/echo.jinja" -p 'first\tmessage' -e -n 2 -t 1 >"$tmp/out" 2>"$tmp/err"
grep -q "got\[first	message\]" "$tmp/err" && ok || bad "-p first message: $(cat "$tmp/err")"
"$brisk" chat -m "$model" --chat-template "$tpl" -sys "$(printf 'bad \377')" </dev/null >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "UTF-8" "$tmp/err" && ok || bad "-sys not UTF-8: rc=$rc err: $(cat "$tmp/err")"

# a line over the input cap ends the chat with status 1 and the cap named
head -c 100000 /dev/zero | "$brisk" chat -m "$model" --chat-template "$tpl" --max-input-bytes 64K -t 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "input cap of 65536 bytes (raise it with --max-input-bytes)" "$tmp/err" && ok || bad "line cap: rc=$rc err: $(cat "$tmp/err")"

# a write error on stdout ends the chat with status 1
printf 'hi\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 4 -t 1 >/dev/full 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "write to stdout failed" "$tmp/err" && ok || bad "> /dev/full: rc=$rc err: $(cat "$tmp/err")"

# -r ends a reply at the reverse prompt; the chat goes on (greedy, the reply is
# "<|imum>\n<?>\n<?>\n..." until -n: -r '?>' cuts it after the first "<?>")
printf 'def f():\nagain\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 64 --temp 0 -t 1 -r '?>' >"$tmp/out" 2>"$tmp/err"
rc=$?
printf 'def f():\n/exit\n' | "$brisk" chat -m "$model" --chat-template "$tpl" -n 64 --temp 0 -t 1 >"$tmp/long" 2>/dev/null
[ $rc -eq 0 ] && [ "$(grep -c '^<?>$' "$tmp/out")" -eq 2 ] && [ "$(grep -c '^<?>$' "$tmp/long")" -gt 2 ] && ok \
  || bad "-r in chat: rc=$rc out: $(head -c 200 "$tmp/out")"

# no template in the model and none given
printf 'hi\n' | "$brisk" chat -m "$model" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "has no chat template" "$tmp/err" && ok || bad "no template: rc=$rc err: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
