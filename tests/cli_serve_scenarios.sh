#!/usr/bin/env bash
# Issue 14's load scenarios at small sizes, for their functional outcome only
# (bench/serve-load.sh measures their speed): bench/serve-load.mjs drives
# brisk serve on the bundled small model over loopback and each scenario's
# "ok" must hold. Nothing here asserts wall-clock time.
#   overload     -np 8 --max-queue 16, 64 simultaneous streams of 480 tokens (256 quick):
#                exactly 24 complete, 40 get 429 (JSON error, Retry-After), no reset
#   disconnect   -np 8 --max-queue 0: 4 of 8 streams killed at random points; a
#                probe (429 while all slots are held) is admitted after each
#                kill, and the 4 survivors' bytes and logprobs equal an undisturbed run
#   determinism  16 greedy prompts: alone, alone again (cache hit), among 7 other
#                streams, and each of n=4 choices: bytes and logprobs identical
#   prefix       B shares a 256-token prefix with A: cached_tokens >= 224, B's
#                bytes and logprobs equal B's on a cold server
#   sysprompt    8 conversations sharing a 300-token system prompt, the first alone,
#                then 7 at once: the system prompt computed once (but a partial
#                KV block each). (All 8 at once compute it up to 8 times: see docs/SERVER.md.)
#   http         100 connections trickling header bytes while normal requests
#                succeed; 2,000 keep-alive requests leave the fd count unchanged
# BRISK_TEST_QUICK=1 (the sanitizer runs) makes them smaller, with the same checks.
# Skips (77) without node or a build with libmicrohttpd.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1"
command -v node >/dev/null || { echo "SKIP: node is not installed (the load generator runs on Node 20)"; exit 77; }
serve_need model http
gen="$root/bench/serve-load.mjs"
# the model's vocabulary is 4,096 tokens, its context 512
tok=(--token-lo 100 --token-hi 4000)
# sizes: overload's streams stay >= 256 tokens (none may finish during the burst)
if [ "${BRISK_TEST_QUICK:-0}" = 1 ]; then
  over_gen=256 disc_gen=120 det=(--prompts 8 --others 3 --gen-tokens 12) slow=50 ka=1500
else
  over_gen=480 disc_gen=300 det=(--prompts 16 --others 7 --gen-tokens 24) slow=100 ka=2000
fi

# scenario NAME SERVER ARGS...: run it, keep its JSON in $tmp/NAME.json, pass if "ok"
scenario() {
  local name=$1 srv=$2; shift 2
  local portvar="port_$srv" pidvar="pid_$srv"
  if timeout 300 node "$gen" "$@" --url "http://127.0.0.1:${!portvar}" --pid "${!pidvar}" "${tok[@]}" --out "$tmp/$name.json" >"$tmp/$name.txt" 2>&1; then
    ok
  else
    bad "$name: $(cat "$tmp/$name.txt")"
  fi
}

start main -m "$model" -c 512 || exit 1
start overload -m "$model" -c 512 --max-running 8 --max-queue 16 || exit 1
start tight -m "$model" -c 512 --max-running 8 --max-queue 0 || exit 1

scenario overload overload overload --burst 64 --gen-tokens "$over_gen" --expect-ok 24 --expect-429 40
scenario disconnect tight disconnect --clients 8 --kill 4 --gen-tokens "$disc_gen" --free-within 30
scenario determinism main determinism --n-fork 4 "${det[@]}"

# prefix: B on a cold server first, then A and B on another fresh one
start cold -m "$model" -c 512 || exit 1
scenario prefix-cold cold prefix-cold --prefix-tokens 256 --b-tail 64
start warm -m "$model" -c 512 || exit 1
scenario prefix warm prefix --prefix-tokens 256 --a-tail 32 --b-tail 64 --reference "$tmp/prefix-cold.json"
node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1])); process.exit(j.equal_to_reference === true && j.b_cached_tokens >= 224 && j.b_output.logprobs.length === 16 ? 0 : 1)' "$tmp/prefix.json" 2>/dev/null \
  && ok || bad "prefix: cached_tokens or the cold-server comparison: $(cat "$tmp/prefix.txt")"

start sys -m "$model" -c 512 || exit 1
scenario sysprompt sys sysprompt --sys-tokens 300 --user-tokens 16 --conversations 8 --sys-first 1

scenario slowloris tight slowloris --slow "$slow" --slow-seconds 4 --slow-interval 1
scenario keepalive tight keepalive --keepalive-requests "$ka"
node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1])); process.exit(j.after_1000 && j.fd_delta <= 0 ? 0 : 1)' "$tmp/keepalive.json" 2>/dev/null \
  && ok || bad "keepalive: the fd count grew: $(cat "$tmp/keepalive.txt")"

# every server is still healthy and drains on SIGTERM
for s in main overload tight cold warm sys; do
  pv="pid_$s"
  kill -TERM "${!pv}"
  wait "${!pv}"; rc=$?
  [ $rc -eq 0 ] && ok || bad "server $s exited $rc: $(tail -3 "$tmp/$s.err")"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
