#!/usr/bin/env bash
# brisk serve's life cycle and connection limits, over real sockets:
# - it binds before the model loads, and while loading every route answers
#   503 in OpenAI's error shape ("Loading model", code loading_model, with
#   Retry-After) and /health says {"status": "loading"}; then 200 once ready.
#   The load is held open deterministically by reading the chat template
#   from stdin (--chat-template -), a pipe this test writes when it chooses;
# - a load that fails (a bad template, a missing model, a memory plan that
#   does not fit) exits 1 with its message and closes the listener;
#   SIGTERM while loading ends the process;
# - /health is 503 {"status": "draining"} while SIGTERM drains a request;
# - the header deadline (--header-timeout): connections dribbling header
#   bytes are closed before their full headers could be sent, while a normal
#   request and a slow one that completes in time are served;
# - --max-connections-per-ip N: the N+1th connection from one address is
#   refused, the N are served, and a slot frees when one closes.
# No wall-clock assertion: waits are bounded, never timed.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1"
trap 'exec 7>&- 2>/dev/null; cleanup' EXIT
serve_need curl python3 model http
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
C="curl -s --max-time 30"

# bound NAME: the port of server NAME once it printed "bound to" (before loading), else empty
bound() {
  local k p=""
  for k in $(seq 600); do
    p=$(grep -o 'bound to http://127.0.0.1:[0-9]*' "$tmp/$1.err" 2>/dev/null | sed 's/.*://')
    [ -n "$p" ] && break
    sleep 0.1
  done
  echo "$p"
}
# refused PORT: nothing accepts a connection there any more
refused() {
  python3 - "$1" <<'PY'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

# ---- loading: the template comes through a pipe this test holds open
mkfifo "$tmp/tpl.fifo"
"$brisk" serve -m "$model" --port 0 -t 1 -c 512 --chat-template - <"$tmp/tpl.fifo" >"$tmp/load.out" 2>"$tmp/load.err" &
pid_load=$!; pids+=($pid_load)
exec 7>"$tmp/tpl.fifo"   # the server's stdin opens now; it reads until this end closes
P=$(bound load)
[ -n "$P" ] && ok || bad "no 'bound to' line before loading: $(cat "$tmp/load.err")"
L="http://127.0.0.1:$P"
grep -q "brisk serve: loading $model" "$tmp/load.err" && ok || bad "no loading progress line: $(cat "$tmp/load.err")"
! grep -q "listening on" "$tmp/load.err" && ok || bad "'listening on' printed before the model is ready"
code=$($C -D "$tmp/lh.h" -o "$tmp/lh" -w '%{http_code}' "$L/health")
[ "$code" = 503 ] && jcheck "$tmp/lh" 'j["status"] == "loading" and j["error"] == {"message": "Loading model", "type": "unavailable_error", "param": None, "code": "loading_model"}' \
  && grep -qi '^Retry-After: 1' "$tmp/lh.h" && ok || bad "/health while loading: $code $(cat "$tmp/lh")"
for r in "GET /v1/models" "GET /metrics" "GET /" "GET /no-such-route" "POST /v1/completions" "POST /v1/chat/completions" "POST /tokenize"; do
  set -- $r
  if [ "$1" = POST ]; then code=$($C -o "$tmp/lr" -w '%{http_code}' "$L$2" -d '{"prompt": "x", "messages": [{"role": "user", "content": "x"}], "content": "x"}')
  else code=$($C -o "$tmp/lr" -w '%{http_code}' "$L$2"); fi
  [ "$code" = 503 ] && jcheck "$tmp/lr" 'j["error"]["code"] == "loading_model" and "status" not in j' >/dev/null && ok || bad "$r while loading: $code $(cat "$tmp/lr")"
done
cat "$tpl" >&7
exec 7>&-
port_load=""
for k in $(seq 600); do grep -q "listening on http://127.0.0.1:$P" "$tmp/load.err" && break; kill -0 $pid_load 2>/dev/null || break; sleep 0.1; done
grep -q "listening on http://127.0.0.1:$P" "$tmp/load.err" && ok || bad "not ready after the template arrived: $(cat "$tmp/load.err")"
$C "$L/health" >"$tmp/lh2" && jcheck "$tmp/lh2" 'j == {"status": "ok"}' && ok || bad "/health once ready: $(cat "$tmp/lh2")"
$C "$L/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}' >"$tmp/lc"
jcheck "$tmp/lc" 'j["object"] == "chat.completion" and j["usage"]["completion_tokens"] >= 1' && ok || bad "chat once ready (the template read from stdin): $(cat "$tmp/lc")"

# ---- load failures: exit 1 with the message, the listener closed
fails() {   # fails NAME EXPECTED-MESSAGE STDIN ARGS...: bound, then exit 1 naming the problem, then refused
  local name=$1 msg=$2 input=$3; shift 3
  printf '%s' "$input" | "$brisk" serve --port 0 -t 1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$? p
  p=$(grep -o 'bound to http://127.0.0.1:[0-9]*' "$tmp/$name.err" | sed 's/.*://')
  [ $rc -eq 1 ] && [ -n "$p" ] && grep -q -- "$msg" "$tmp/$name.err" && ! grep -q "listening on" "$tmp/$name.err" && ok \
    || bad "$name: rc=$rc, want 1 and '$msg': $(cat "$tmp/$name.err")"
  [ -n "$p" ] && refused "$p" && ok || bad "$name: the listener is still open"
}
fails badtpl "chat template: template line 1" '{% if %}' -m "$model" -c 512 --chat-template -
fails nomodel "$tmp/absent.gguf: cannot open" '' -m "$tmp/absent.gguf"
fails noplan "not enough memory" '' -m "$model" -c 512 --kv-size 2000000000

# SIGTERM while loading ends the process (as it would without a server) and says so
mkfifo "$tmp/tpl2.fifo"
"$brisk" serve -m "$model" --port 0 -t 1 -c 512 --chat-template - <"$tmp/tpl2.fifo" >"$tmp/term.out" 2>"$tmp/term.err" &
pid_term=$!; pids+=($pid_term)
exec 7>"$tmp/tpl2.fifo"
P2=$(bound term)
code=$($C -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P2/health")
kill -TERM $pid_term
wait $pid_term; rc=$?
exec 7>&-
[ "$code" = 503 ] && [ $rc -ne 0 ] && grep -q "SIGTERM while loading the model" "$tmp/term.err" && ok || bad "SIGTERM while loading: health $code, rc=$rc: $(cat "$tmp/term.err")"

# ---- draining: /health 503 {"status": "draining"} while a request finishes
start drain -m "$model" -c 32768 -np 1 --drain-timeout 60 || exit 1
D="http://127.0.0.1:$port_drain"
curl -s -N --max-time 120 -o "$tmp/dlong" "$D/v1/completions" -d '{"prompt": "def f():", "max_tokens": 30000, "temperature": 1, "ignore_eos": true, "stream": true}' &
dp=$!; pids+=($dp)
for k in $(seq 300); do grep -q '^data:' "$tmp/dlong" 2>/dev/null && break; sleep 0.1; done
kill -TERM $pid_drain
for k in $(seq 100); do grep -q "draining" "$tmp/drain.err" && break; sleep 0.05; done
code=$($C -o "$tmp/dh" -w '%{http_code}' "$D/health")
[ "$code" = 503 ] && jcheck "$tmp/dh" 'j["status"] == "draining"' && ok || bad "/health while draining: $code $(cat "$tmp/dh")"
code=$($C -o "$tmp/dc" -w '%{http_code}' "$D/v1/completions" -d '{"prompt": "x", "max_tokens": 1}')
[ "$code" = 503 ] && ok || bad "a completion while draining: $code $(cat "$tmp/dc")"
kill $dp 2>/dev/null; wait $dp 2>/dev/null   # the client goes away: its request is cancelled, the drain ends
wait $pid_drain; rc=$?
[ $rc -eq 0 ] && ok || bad "drain: rc=$rc $(tail -3 "$tmp/drain.err")"

# ---- the header deadline: 20 connections dribble a header (one byte every 0.2 s: 16 s for all of
# it), a deadline of 2 s closes each before its last byte; meanwhile a normal request and a slow
# one that completes within the deadline are served
start hd -m "$model" -c 512 --header-timeout 2 || exit 1
python3 - "$port_hd" >"$tmp/hd.json" <<'PY'
import json, socket, sys, time
port = int(sys.argv[1])
hdr = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40 + b"\r\n\r\n"
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setblocking(False)
    return s
def alive(s):   # False once the server closed its end (EOF or reset)
    try:
        return s.recv(4096) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
def get(chunks, gap):   # a request sent in chunks, gap s apart; its status line
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    for c in chunks:
        s.sendall(c); time.sleep(gap)
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(4096)
        if not d: break
        data += d
    s.close()
    return data.split(b"\r\n")[0].decode()
slow = [conn() for _ in range(20)]
sent = [0] * len(slow)
closed_early = [False] * len(slow)
normal = slow_ok = None
for step in range(len(hdr)):          # at most len(hdr) x 0.2 s
    for i, s in enumerate(slow):
        if closed_early[i]: continue
        if not alive(s):
            closed_early[i] = True    # closed before the full headers could be sent
            continue
        try:
            s.send(hdr[sent[i]:sent[i] + 1]); sent[i] += 1
        except OSError:
            closed_early[i] = True
    if step == 3: normal = get([hdr.replace(b"X-Slow", b"X-Normal")], 0)
    if step == 4: slow_ok = get([hdr[k:k + 8] for k in range(0, len(hdr), 8)], 0.05)
    if all(closed_early): break
    time.sleep(0.2)
print(json.dumps({"closed_before_full_headers": sum(closed_early), "connections": len(slow),
                  "max_bytes_sent": max(sent), "header_bytes": len(hdr), "normal": normal, "slow_in_time": slow_ok}))
PY
jcheck "$tmp/hd.json" 'j["closed_before_full_headers"] == j["connections"] == 20 and j["max_bytes_sent"] < j["header_bytes"]' \
  && ok || bad "the header deadline: not every dribbling connection was closed before the full headers could be sent"
jcheck "$tmp/hd.json" 'j["normal"] == "HTTP/1.1 200 OK" and j["slow_in_time"] == "HTTP/1.1 200 OK"' \
  && ok || bad "the header deadline: a normal request, or headers completed in time, not served"
for k in $(seq 150); do grep -q "whose request headers were not complete within 2 s" "$tmp/hd.err" && break; sleep 0.1; done
grep -q "closed [0-9]* connections whose request headers were not complete within 2 s (--header-timeout)" "$tmp/hd.err" && ok \
  || bad "no log line for the closed connections: $(tail -5 "$tmp/hd.err")"
[ "$(grep -c "Connection socket is closed" "$tmp/hd.err")" -le 2 ] && ok || bad "libmicrohttpd's message is printed once per closed connection"

# ---- --max-connections-per-ip 3: a 4th connection is refused, the 3 are served, a slot frees
start ip -m "$model" -c 512 --max-connections-per-ip 3 --header-timeout 60 || exit 1
python3 - "$port_ip" >"$tmp/ip.json" <<'PY'
import json, socket, sys, time
port = int(sys.argv[1])
req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
def status(s):   # one response on keep-alive connection s: its status line, "" when closed first
    data = b""
    try:
        s.sendall(req)
        while b"\r\n\r\n" not in data:
            d = s.recv(4096)
            if not d: break
            data += d
        if b"\r\n\r\n" in data:   # the body (Content-Length)
            head, body = data.split(b"\r\n\r\n", 1)
            n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
            while len(body) < n: body += s.recv(4096)
    except OSError:
        return ""
    return data.split(b"\r\n")[0].decode() if data else ""
three = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
first = [status(s) for s in three]          # each is accepted and counted now
fourth = socket.create_connection(("127.0.0.1", port), timeout=10)
refused = status(fourth)
again = [status(s) for s in three]
three[0].close()
later = ""
for _ in range(50):                          # the close reaches the server soon: bounded retries
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    later = status(c)
    if later: break
    c.close(); time.sleep(0.1)
print(json.dumps({"first": first, "fourth": refused, "again": again, "after_a_close": later}))
PY
jcheck "$tmp/ip.json" 'j["first"] == j["again"] == ["HTTP/1.1 200 OK"] * 3 and j["fourth"] == "" and j["after_a_close"] == "HTTP/1.1 200 OK"' \
  && ok || bad "--max-connections-per-ip 3"

for n in load hd ip; do
  eval "kill -TERM \$pid_$n"; eval "wait \$pid_$n"; rc=$?
  [ $rc -eq 0 ] && ok || bad "SIGTERM $n: rc=$rc $(tail -3 "$tmp/$n.err")"
done
! grep -qE "AddressSanitizer|runtime error|LeakSanitizer|ThreadSanitizer" "$tmp"/*.err && ok || bad "sanitizer report: $(grep -h -A8 -E 'Sanitizer|runtime error' "$tmp"/*.err | head -40)"

echo "cli_serve_health: $pass passed, $fail failed"
[ $fail -eq 0 ]
