#!/usr/bin/env bash
# Issue 14's load scenarios against brisk serve and llama-server, side by side:
# for each repetition and scenario, a fresh brisk server, then a fresh
# llama-server (a repeated run on one server would hit its prompt cache), on
# the same GGUF and thread count, driven by bench/serve-load.mjs (Node 20, no
# dependencies). One JSON line per run goes to OUT/results.jsonl; a markdown
# table with the medians and brisk/llama-server ratios is printed at the end.
#
#   bench/serve-load.sh [--model GGUF] [--threads N] [--reps N] [--servers "brisk llama"]
#                       [--out DIR] [--brisk PATH] [--peer PATH] [--brisk-args "ARGS"]
#                       [SCENARIO ...] [-- MJS-OPTIONS]
#
# Scenarios (default: throughput prefix): single throughput fairness prefix
# sysprompt determinism overload disconnect slowloris keepalive. overload and
# disconnect need brisk's admission limits (llama-server queues without bound)
# and run on brisk only. Model default: a synth llama-3.2-1b Q4_0 written by
# `brisk synth` to /tmp/brisk-load/ when absent (700 MB; kept out of the repo).
# Numbers are noisy on a shared machine: compare ratios of alternating runs.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="$root/build/brisk"
peer="$HOME/.cache/brisk-peer/bin/llama-server"
model=""
threads=2
reps=2
servers="brisk llama"
out="/tmp/brisk-load/run-$(date +%Y%m%d-%H%M%S)"
scenarios=()
extra=()
brisk_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --servers) servers="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --brisk) brisk="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --brisk-args) read -r -a brisk_args <<<"$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "serve-load.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[ ${#scenarios[@]} -gt 0 ] || scenarios=(throughput prefix)
command -v node >/dev/null || { echo "serve-load.sh: node (20 or later) is needed" >&2; exit 1; }
[ -x "$brisk" ] || { echo "serve-load.sh: $brisk is not built (cmake --build build)" >&2; exit 1; }
mkdir -p "$out"
if [ -z "$model" ]; then
  model=/tmp/brisk-load/l1b-q4_0.gguf
  if [ ! -f "$model" ]; then
    echo "serve-load.sh: writing $model (brisk synth --shape llama-3.2-1b --type Q4_0)" >&2
    "$brisk" synth --shape llama-3.2-1b --type Q4_0 -o "$model" || exit 1
  fi
fi
[ -f "$model" ] || { echo "serve-load.sh: $model: no such file" >&2; exit 1; }
case " $servers " in *" llama "*)
  [ -x "$peer" ] || { echo "serve-load.sh: $peer absent (../shared/tools/peer/setup.sh builds it); running brisk only" >&2; servers="brisk"; } ;;
esac

pid=""
stop_server() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=""
}
trap stop_server EXIT

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# start_server KIND SCENARIO: a fresh server with the scenario's flags; sets pid and url
start_server() {
  local kind=$1 sc=$2 port log="$out/$1-$2.log"
  port=$(free_port)
  if [ "$kind" = brisk ]; then
    local adm=(--max-running 8 --max-queue 64)
    [ "$sc" = overload ] && adm=(--max-running 8 --max-queue 16)
    [ "$sc" = disconnect ] && adm=(--max-running 8 --max-queue 0)
    # --kv-size 8192: the same KV memory as llama-server's -c 8192 (its KV is unified across slots)
    "$brisk" serve -m "$model" -t "$threads" --host 127.0.0.1 --port "$port" -c 8192 --kv-size 8192 "${adm[@]}" "${brisk_args[@]}" >"$log" 2>&1 &
  else
    # llama-server gives each slot -c / --parallel tokens: the prompts of the
    # prefix and system-prompt scenarios (1,104 and 1,540 tokens) need 2,048 a
    # slot, fairness's 4,096-token prompt 8,192
    local ctx=8192
    case "$sc" in prefix|sysprompt) ctx=16384 ;; fairness) ctx=65536 ;; esac
    "$peer" -m "$model" -t "$threads" --host 127.0.0.1 --port "$port" --parallel 8 -c "$ctx" >"$log" 2>&1 &
  fi
  pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 1200); do
    if curl -s --max-time 1 "$url/health" 2>/dev/null | grep -q '"ok"'; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "serve-load.sh: $kind did not start: $(tail -5 "$log")" >&2
  return 1
}

# run_one KIND SCENARIO REP: one scenario on a fresh server, its JSON line appended to results.jsonl
run_one() {
  local kind=$1 sc=$2 rep=$3 args=()
  case "$sc" in
    prefix)
      # B on a cold server first: the reference for B after A on a warm one
      start_server "$kind" prefix || return 1
      node "$root/bench/serve-load.mjs" prefix-cold --url "$url" --pid "$pid" --label "$kind" --out "$out/cold-$kind-$rep.json" "${extra[@]}" >/dev/null
      stop_server
      args=(--reference "$out/cold-$kind-$rep.json") ;;
  esac
  start_server "$kind" "$sc" || return 1
  node "$root/bench/serve-load.mjs" "$sc" --url "$url" --pid "$pid" --label "$kind" --out "$out/$sc-$kind-$rep.json" "${args[@]}" "${extra[@]}" >"$out/last.txt"
  local rc=$?
  stop_server
  node -e 'const fs=require("fs"); const j=JSON.parse(fs.readFileSync(process.argv[1])); j.run=Number(process.argv[2]);
    for (const k of ["phases","b_output","text"]) delete j[k]; fs.appendFileSync(process.argv[3], JSON.stringify(j)+"\n")' \
    "$out/$sc-$kind-$rep.json" "$rep" "$out/results.jsonl" 2>/dev/null || { echo "serve-load.sh: $kind $sc produced no result: $(cat "$out/last.txt")" >&2; return 1; }
  echo "$kind $sc run $rep: $(cat "$out/last.txt")" >&2
  return $rc
}

echo "serve-load.sh: model $model, $threads threads, $reps alternating runs of ${scenarios[*]} on: $servers; results in $out" >&2
status=0
for rep in $(seq "$reps"); do
  for sc in "${scenarios[@]}"; do
    for kind in $servers; do
      if [ "$kind" = llama ] && { [ "$sc" = overload ] || [ "$sc" = disconnect ]; }; then continue; fi
      run_one "$kind" "$sc" "$rep" || status=1
    done
    # one stream over HTTP vs `brisk run` (a prompt of about the same length), alternating with them
    if [ "$sc" = single ]; then
      words=$(printf 'the quick brown fox %.0s' $(seq 64))
      tps=$("$brisk" run -m "$model" -t "$threads" -p "$words" -n 64 --temp 0 --ignore-eos 2>&1 >/dev/null |
            sed -n 's/.*generated [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
      echo "brisk-run single run $rep: generated $tps tokens/s" >&2
      [ -n "$tps" ] && echo "{\"scenario\":\"single\",\"label\":\"brisk-run\",\"ok\":true,\"run\":$rep,\"decode_tok_s\":$tps}" >>"$out/results.jsonl"
    fi
  done
done
node "$root/bench/serve-load.mjs" report "$out/results.jsonl"
exit $status
