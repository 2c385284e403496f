#!/usr/bin/env bash
# One hostile HTTP case for tests/hostile/serve.cases: start brisk serve on a
# free loopback port, run PAYLOAD (bash, with $PORT and $U set) against it,
# then require that the server still answers /health and a completion, and
# that SIGTERM ends it with status 0. Exit 0 only when all of that holds;
# the payload's own status does not matter.
# usage: serve_case.sh PAYLOAD [extra brisk serve flags...]
set -u
payload=$1; shift
model=$ROOT/models/pycode-target-f16.gguf
command -v curl >/dev/null || { echo "curl absent" >&2; exit 0; }
"$BRISK" serve -m "$model" --port 0 -t 1 -c 512 --chat-template "$DATA/templates/Qwen-Qwen3-0.6B.jinja" "$@" 2>"$TMP/serve.err" &
pid=$!
PORT=""
for _ in $(seq 100); do
  PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$TMP/serve.err" | sed 's/.*://')
  [ -n "$PORT" ] && break
  if ! kill -0 $pid 2>/dev/null; then
    grep -q "no HTTP server" "$TMP/serve.err" && exit 0   # a build without libmicrohttpd: nothing to attack
    break
  fi
  sleep 0.05
done
[ -n "$PORT" ] || { echo "server did not start: $(cat "$TMP/serve.err")" >&2; kill -9 $pid 2>/dev/null; exit 3; }
U="http://127.0.0.1:$PORT"
export PORT U
timeout 6 bash -c "$payload" >"$TMP/payload.out" 2>&1
h=$(curl -s --max-time 3 -o /dev/null -w '%{http_code}' "$U/health")
c=$(curl -s --max-time 3 -o "$TMP/c" -w '%{http_code}' "$U/v1/completions" -d '{"prompt": "x", "max_tokens": 2}')
kill -TERM $pid
wait $pid
rc=$?
cat "$TMP/serve.err" >&2
[ "$h" = 200 ] || { echo "after the payload /health answered '$h'" >&2; exit 4; }
[ "$c" = 200 ] || { echo "after the payload a completion answered '$c': $(cat "$TMP/c")" >&2; exit 5; }
[ $rc -eq 0 ] || { echo "brisk serve exited $rc after SIGTERM" >&2; exit 6; }
exit 0
