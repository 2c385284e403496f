# Helpers for the brisk serve tests (sourced): the scripts' common start and
# skips, pinned npm packages, start a server on a free loopback port, check
# JSON with python3, count passes and failures.
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp" 2>/dev/null
}

# serve_test_init BRISK [NEED...]: the start of a serve test script, in its
# shell. Sets brisk (BRISK, the binary), root (the repository), model
# (models/pycode-target-f16.gguf) and tmp (a new directory); trap cleanup EXIT
# (a script that needs more at exit sets its own trap after this); then
# serve_need NEED...
serve_test_init() {
  brisk="$1"; shift
  root="$(cd "$(dirname "$0")/.." && pwd)"
  model="$root/models/pycode-target-f16.gguf"
  tmp="$(mktemp -d)"
  trap cleanup EXIT
  serve_need "$@"
}

# serve_need NEED...: skips the test (exit 77, saying why) at the first NEED,
# in the order given, that does not hold:
#   curl      curl is installed
#   python3   python3 is installed
#   node-npm  node and npm are installed
#   model     the file $model exists
#   http      this build has the HTTP server (serve_has_http)
serve_need() {
  local need
  for need in "$@"; do
    case $need in
      curl) command -v curl >/dev/null || { echo "SKIP: curl is not installed (scripts/bootstrap.sh installs it)"; exit 77; } ;;
      python3) command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; } ;;
      node-npm) command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node/npm absent"; exit 77; } ;;
      model) [ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; } ;;
      http) serve_has_http || { echo "SKIP: this build has no HTTP server (libmicrohttpd-dev not installed when it was configured)"; exit 77; } ;;
      *) echo "serve_need: unknown need '$need'"; exit 1 ;;
    esac
  done
}

# serve_has_http: $brisk has the HTTP server (a build without libmicrohttpd
# says "no HTTP server"; asked with $model and a host that cannot bind)
serve_has_http() {
  ! "$brisk" serve -m "$model" --port 0 --host 256.0.0.1 2>&1 | grep -q "no HTTP server"
}

# npm_pin DIR PACKAGE VERSION SPEC...: pinned npm packages under DIR (in the
# build tree), installed on first use: nothing to do when
# DIR/node_modules/PACKAGE is at VERSION already, else npm install SPEC...;
# skips the test (exit 77, with npm's last lines) when that fails, as it does
# without the registry. Needs $tmp (serve_test_init).
npm_pin() {
  local dir=$1 package=$2 version=$3; shift 3
  grep -qs "\"version\": \"$version\"" "$dir/node_modules/$package/package.json" && return 0
  mkdir -p "$dir"
  timeout 300 npm install --no-save --no-audit --no-fund --prefix "$dir" "$@" >"$tmp/npm.log" 2>&1 ||
    { echo "SKIP: npm install $* failed (registry unreachable?): $(tail -3 "$tmp/npm.log")"; exit 77; }
}

# start NAME ARGS...: runs brisk serve --port 0 ARGS in the background, sets
# port_NAME and pid_NAME once it listens (60 s at most: ASan builds start slowly).
start() {
  local name=$1; shift
  "$brisk" serve --port 0 -t 1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$!
  pids+=("$pid")
  local k port=""
  for k in $(seq 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$tmp/$name.err" 2>/dev/null | sed 's/.*://')
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "server $name did not start: $(cat "$tmp/$name.err")"
    return 1
  fi
  printf -v "port_$name" '%s' "$port"
  printf -v "pid_$name" '%s' "$pid"
}

# jcheck FILE PYTHON-EXPR: the expression holds for j = the JSON in FILE
jcheck() {
  python3 - "$1" "$2" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("not JSON: %s: %r" % (e, open(sys.argv[1], "rb").read()[:300])); sys.exit(1)
ok = eval(sys.argv[2])
if not ok: print("check failed: %s on %s" % (sys.argv[2], json.dumps(j)[:600]))
sys.exit(0 if ok else 1)
PY
}

# sse FILE PYTHON-EXPR: the expression holds for ev = the list of data: payloads
# (JSON objects, or the string "[DONE]"), raw = the whole body
sse() {
  python3 - "$1" "$2" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read().decode("utf-8")
ev = []
for block in raw.split("\n\n"):
    for line in block.split("\n"):
        if line.startswith("data: "):
            d = line[6:]
            ev.append(d if d == "[DONE]" else json.loads(d))
def text(ev, i=0):
    out = ""
    for e in ev:
        if isinstance(e, dict):
            for c in e.get("choices", []):
                if c["index"] == i:
                    out += c.get("text", "") if "text" in c else (c["delta"].get("content") or "")
    return out
ok = eval(sys.argv[2])
if not ok: print("check failed: %s on %r" % (sys.argv[2], raw[:1500]))
sys.exit(0 if ok else 1)
PY
}
