#!/usr/bin/env bash
# brisk serve with the real openai npm client (pinned openai@6.49.0, installed
# under the build tree on first use): non-stream, stream, include_usage, n,
# logprobs, legacy completions, the model list, 400/401 errors as the
# client's typed exceptions, 429 from a full server and the client's
# automatic retry. Skips (77) without node/npm, without the registry, or in a
# build without libmicrohttpd.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1" node-npm model http
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
npmdir="$(cd "$(dirname "$brisk")" && pwd)/npm-openai"
npm_pin "$npmdir" openai 6.49.0 openai@6.49.0
start main -m "$model" --chat-template "$tpl" -c 512 --api-key test-key -a tiny || exit 1
start busy -m "$model" -c 32768 -np 1 --max-queue 0 || exit 1
timeout 120 node "$root/tests/serve/openai_client.mjs" "$npmdir/node_modules" "http://127.0.0.1:$port_main/v1" \
  "http://127.0.0.1:$port_busy/v1" test-key
rc=$?
kill -TERM "$pid_main" "$pid_busy"
wait "$pid_main"; r1=$?
wait "$pid_busy"; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || { echo "FAIL: servers exited $r1 $r2: $(tail -5 "$tmp"/*.err)"; rc=1; }
exit $rc
