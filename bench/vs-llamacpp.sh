#!/usr/bin/env bash
# vs-llamacpp: brisk bench against llama-bench on the same synthetic models,
# the same threads, alternating runs, one table of brisk/llama.cpp ratios.
#
#   bench/vs-llamacpp.sh [-r REPS] [-t THREADS] [-p N] [-n N] [-d DEPTH] [-m "shape ..."] [-T "type ..."] [-I ISA]
#
# -d DEPTH (llama-bench's --n-depth, e.g. 4096): pp and tg after DEPTH tokens
# of context; brisk gets -d DEPTH and llama-bench -d DEPTH -fa 1 (flash
# attention, which brisk's attention always is, and without which llama.cpp's
# CPU attention at depth is not its best).
#
# -I ISA runs brisk with that kernel table (brisk bench --isa: ref, avx2,
# avx2-vnni, avx512, ...); -I "avx2 avx2-vnni" runs each in every repetition
# (one row each, all against the same peer runs). When every ISA named is avx2
# or avx2-vnni the peer is the AVX2-only llama.cpp build (bin-avx2/ of the
# peer directory, ../shared/tools/peer/setup.sh), so neither side uses
# AVX-512. PEER=dir overrides the peer either way. Besides the ratio of means,
# the table gives the ratio of the best repetitions, which load from other
# processes disturbs less.
#
# Models come from `brisk synth` (random weights in a real model's shapes) in
# $BRISK_BENCH_CACHE (default ~/.cache/brisk-bench, outside the repository).
# Q4_K_M is made the way users make it: brisk synth writes F16, then the
# peer's llama-quantize converts it with its own per-tensor type mix.
# Every repetition runs brisk once and llama-bench once (each with its own
# warm-up), so load from other processes hits both alike; the tables report
# mean ± stddev over repetitions and the ratio of means.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BRISK=${BRISK:-$ROOT/build/brisk}   # make build
PEER_DIR=$HOME/.cache/brisk-peer
QUANTIZE=${QUANTIZE:-$PEER_DIR/bin/llama-quantize}   # bin-avx2/ has no llama-quantize; the files are the same
CACHE=${BRISK_BENCH_CACHE:-$HOME/.cache/brisk-bench}
REPS=3 THREADS=2 NP=512 NG=128 DEPTH=0
SHAPES="llama-3.2-1b qwen2.5-0.5b"
TYPES="Q4_0 Q4_K_M Q8_0 F16"
ISA=
while getopts "r:t:p:n:d:m:T:I:" o; do
  case $o in
    r) REPS=$OPTARG ;; t) THREADS=$OPTARG ;; p) NP=$OPTARG ;; n) NG=$OPTARG ;; d) DEPTH=$OPTARG ;;
    m) SHAPES=$OPTARG ;; T) TYPES=$OPTARG ;; I) ISA=$OPTARG ;; *) sed -n '2,26p' "$0"; exit 2 ;;
  esac
done
case $DEPTH in ''|*[!0-9]*) echo "vs-llamacpp: -d $DEPTH: one depth, a non-negative integer" >&2; exit 2 ;; esac
DEPTH_ARGS=() PEER_DEPTH_ARGS=()
[ "$DEPTH" = 0 ] || { DEPTH_ARGS=(-d "$DEPTH"); PEER_DEPTH_ARGS=(-d "$DEPTH" -fa 1); }
ONLY_AVX2=0
for i in $ISA; do case $i in avx2|avx2-vnni) ONLY_AVX2=1 ;; *) ONLY_AVX2=0; break ;; esac; done
if [ "$ONLY_AVX2" = 1 ]; then PEER=${PEER:-$PEER_DIR/bin-avx2}; else PEER=${PEER:-$PEER_DIR/bin}; fi
TOOLS=brisk   # one per ISA: brisk (the best table) or brisk-ISA
[ -z "$ISA" ] || TOOLS=$(for i in $ISA; do printf 'brisk-%s ' "$i"; done)
[ -x "$BRISK" ] || { echo "vs-llamacpp: $BRISK not built (run make build, or set BRISK=path/to/brisk)" >&2; exit 1; }
[ -x "$PEER/llama-bench" ] || { echo "vs-llamacpp: no llama-bench in $PEER (run ../shared/tools/peer/setup.sh)" >&2; exit 1; }
export LD_LIBRARY_PATH="$PEER${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$CACHE"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

free_mib() { df -Pm "$CACHE" | awk 'NR == 2 { print $4 }'; }

# model path for shape $1, type $2 (synthesized on first use)
model() {
  local shape=$1 type=$2 f="$CACHE/$1-$2.gguf"
  if [ ! -s "$f" ]; then
    if [ "$type" = Q4_K_M ]; then
      local src; src=$(model "$shape" F16)
      local need=$(( $(stat -c %s "$src") / 1048576 / 3 + 256 ))
      [ "$(free_mib)" -gt "$need" ] || { echo "vs-llamacpp: need ${need} MiB free in $CACHE" >&2; exit 1; }
      LD_LIBRARY_PATH="$(dirname "$QUANTIZE")" "$QUANTIZE" "$src" "$f.tmp" Q4_K_M >"$OUT/quantize.log" 2>&1 || { cat "$OUT/quantize.log" >&2; exit 1; }
      mv "$f.tmp" "$f"
    else
      "$BRISK" synth --shape "$shape" --type "$type" -o "$f.tmp" 2>"$OUT/synth.log" || { cat "$OUT/synth.log" >&2; exit 1; }
      mv "$f.tmp" "$f"
    fi
  fi
  echo "$f"
}

echo "# brisk vs llama.cpp: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, threads $THREADS, $REPS repetitions"
echo "# brisk $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet -- src || echo '+dirty'), peer $({ "$PEER/llama-bench" --version 2>&1 || true; } | grep -m1 -o 'version: [^ ]*' || echo unknown)"
echo "# brisk kernels: ${ISA:-best for this CPU}; peer: $PEER"
[ "$DEPTH" = 0 ] || echo "# depth: $DEPTH tokens of context before every test (brisk -d $DEPTH, llama-bench -d $DEPTH -fa 1)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $SHAPES; do
  for type in $TYPES; do
    f=$(model "$shape" "$type")
    for r in $(seq 1 "$REPS"); do
      for tool in $TOOLS; do
        isa_args=()
        [ "$tool" = brisk ] || isa_args=(--isa "${tool#brisk-}")
        "$BRISK" bench -m "$f" -p "$NP" -n "$NG" "${DEPTH_ARGS[@]}" -t "$THREADS" -r 1 -o json "${isa_args[@]}" >"$OUT/$tool-$shape-$type-$r.json" 2>"$OUT/err" \
          || { cat "$OUT/err" >&2; exit 1; }
      done
      "$PEER/llama-bench" -m "$f" -p "$NP" -n "$NG" "${PEER_DEPTH_ARGS[@]}" -t "$THREADS" -r 1 -o json >"$OUT/peer-$shape-$type-$r.json" 2>"$OUT/err" \
        || { cat "$OUT/err" >&2; exit 1; }
    done
  done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT" "$SHAPES" "$TYPES" "$REPS" "$NP" "$NG" "$TOOLS" "$DEPTH" <<'EOF'
import json, statistics, sys
out, shapes, types, reps, np_, ng = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5], sys.argv[6]
tools = sys.argv[7].split()
depth = int(sys.argv[8])
at = f" @ d{depth}" if depth else ""
def samples(tool, shape, type_, key):
    v = []
    for r in range(1, reps + 1):
        for o in json.load(open(f"{out}/{tool}-{shape}-{type_}-{r}.json")):
            if o.get("n_depth", 0) != depth:
                continue
            if (key == "pp" and o["n_prompt"] > 0 and o["n_gen"] == 0) or (key == "tg" and o["n_gen"] > 0 and o["n_prompt"] == 0):
                v.append(o["avg_ts"])
    return v
def ms(v):
    return (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)
print()
print(f"| model | brisk pp{np_}{at} t/s | llama.cpp pp{np_}{at} t/s | pp ratio | pp best/best | brisk tg{ng}{at} t/s | llama.cpp tg{ng}{at} t/s | tg ratio | tg best/best |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
roof = []
for s in shapes:
    for t in types:
        for tool in tools:
            row = [f"{s} {t}" + (f" ({tool[6:]})" if tool != "brisk" else "")]
            for key in ("pp", "tg"):
                bv, pv = samples(tool, s, t, key), samples("peer", s, t, key)
                b, p = ms(bv), ms(pv)
                row += [f"{b[0]:.2f} ± {b[1]:.2f}", f"{p[0]:.2f} ± {p[1]:.2f}", f"**{b[0] / p[0]:.2f}**", f"{max(bv) / max(pv):.2f}"]
            print("| " + " | ".join(row) + " |")
            peer_tg = statistics.mean(samples("peer", s, t, "tg"))
            for r in range(1, reps + 1):
                for o in json.load(open(f"{out}/{tool}-{s}-{t}-{r}.json")):
                    if "roofline_pct" in o:
                        each = o.get("roofline_during_pct", [o["roofline_pct"]])
                        roof.append((f"{s} {t}" + (f" ({tool[6:]})" if tool != "brisk" else ""), o["read_bandwidth_gbs"], o["roofline_ts"], o["avg_ts"], each,
                                     peer_tg))
print()
# Two views of the roofline. Strict: the mean tg against the best read any
# repetition measured (brisk bench reads before its tests, between the tokens
# of each tg repetition, and after). Per repetition: each run's tg against the
# best read taken between its own tokens (the machine's bandwidth drifts with
# its neighbours; before session 22, against the reads before and after the
# run), the median of those. llama.cpp's column: its mean tg against the
# strict roofline (llama-bench measures no bandwidth).
print("| model | best read GB/s | roofline tg t/s | brisk tg t/s | % of roofline (best read) | % per repetition (median; each) | llama.cpp % of roofline (best read) |")
print("| --- | ---: | ---: | ---: | ---: | --- | ---: |")
for name in dict.fromkeys(x[0] for x in roof):
        rs = [x for x in roof if x[0] == name]
        if rs:
            bw = max(x[1] for x in rs); ts = statistics.mean(x[3] for x in rs)
            rt = max(x[2] for x in rs)   # the roofline at the best bandwidth (bytes per token are the same every run)
            each = [e for x in rs for e in x[4]]
            print(f"| {name} | {bw:.1f} | {rt:.1f} | {ts:.2f} | {100 * ts / rt:.1f}% | {statistics.median(each):.1f}% ("
                  + ", ".join(f"{e:.1f}" for e in each) + f") | {100 * rs[0][5] / rt:.1f}% |")
EOF
