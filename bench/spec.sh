#!/usr/bin/env bash
# bench/spec.sh: speculative decoding on the fixture pair, side by side with
# plain decoding. Every comparison alternates the modes run by run and
# reports medians and spread, because other work shares this machine.
#
#   bench/spec.sh [BRISK] [SECTION...]
#
# BRISK defaults to build-spec/brisk. Sections (default: all):
#   val     greedy on the 20 val prompts: plain, draft (k=4), ngram (k=8), auto
#   edit    the code-editing workload: a val file followed by its first lines again
#           (plain, ngram k=8, ngram k=16, auto)
#   temp    sampling at temperature 1.0 on the val prompts: plain vs auto
#   cost    target cost per pass of n = 1..17 tokens (k = 0..16): the fixture
#           target and a brisk-synth llama-3.2-1b Q4_0 model (SYNTH_1B, made if absent)
# MODES_VAL, MODES_EDIT, MODES_TEMP override the modes of a section. Tree modes
# (greedy only): ngram-tree, ngram16-tree, draft-tree (width 3), auto-tree
# (auto with --draft-width 3: the cost model picks chain or tree per round); draft-win:
# draft k=4 with draft-side windowed attention (sink 4 + the last $WINDOW, default 32), e.g.
#   MODES_VAL="plain ngram ngram-tree draft draft-tree" bench/spec.sh build/brisk val
# Environment: REPS (alternating repetitions, default 5), THREADS (default 1:
# the fixtures are too small to gain from a second thread on a shared 2-core
# box), N (new tokens, default 200), OUT (results folder, default /tmp/brisk-spec-bench).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="${1:-$root/build-spec/brisk}"; shift || true
sections="${*:-val edit temp cost}"
shared="${BRISK_SHARED_DIR:-$root/../shared}"
target="$shared/models/pycode-target-f16.gguf"
draft="$shared/models/pycode-draft-f16.gguf"
val="$shared/models/data/val.txt"
REPS="${REPS:-5}"; THREADS="${THREADS:-1}"; N="${N:-200}"
OUT="${OUT:-/tmp/brisk-spec-bench}"; SYNTH_1B="${SYNTH_1B:-/tmp/brisk-spec-1b-q4_0.gguf}"
mkdir -p "$OUT/prompts"
[ -x "$brisk" ] || { echo "no brisk binary at $brisk"; exit 1; }
[ -f "$target" ] || { echo "fixtures absent: $target"; exit 77; }

# Prompts: val file i from its header line, whole lines until >= 400 bytes
# (at most 1200) — the cut tests/test_spec.c uses. Editing prompts: the first
# ~520 bytes of a val file (whole lines), then its first 3 lines again.
python3 - "$val" "$OUT/prompts" <<'EOF'
import sys
val = open(sys.argv[1], 'rb').read(); out = sys.argv[2]
starts = [i for i in range(len(val)) if (i == 0 or val[i-1:i] == b'\n') and val.startswith(b'# <<<FILE ', i)]
for n, i in enumerate(starts[:20]):
    e = i
    while e < len(val) and e - i < 1200:
        j = val.find(b'\n', e); e = len(val) if j < 0 else j + 1
        if e - i >= 400: break
    e = min(e, i + 1200)
    open(f'{out}/val{n:02d}.txt', 'wb').write(val[i:e])
for n, i in enumerate(starts[1:21:4]):           # 5 files for the editing workload
    body = val[i:starts[starts.index(i) + 1] if starts.index(i) + 1 < len(starts) else len(val)]
    lines = body.split(b'\n')
    head, size = [], 0
    for ln in lines:
        if size + len(ln) + 1 > 520: break
        head.append(ln); size += len(ln) + 1
    text = b'\n'.join(head) + b'\n\n' + b'\n'.join(lines[:3]) + b'\n'
    open(f'{out}/edit{n}.txt', 'wb').write(text)
EOF

# run MODE PROMPT EXTRA...: one generation; prints "tokens seconds drafted accepted passes"
run() {
  local mode="$1" prompt="$2"; shift 2
  local args=(-m "$target" -f "$prompt" -n "$N" -c 512 -t "$THREADS" --no-display-prompt)
  case "$mode" in
    plain) ;;
    draft) args+=(--spec draft -md "$draft" --draft-max 4) ;;
    ngram) args+=(--spec ngram --draft-max 8) ;;
    ngram16) args+=(--spec ngram --draft-max 16) ;;
    auto) args+=(--spec auto -md "$draft") ;;
    auto-ngram) args+=(--spec auto) ;;
    draft-win) args+=(--spec draft -md "$draft" --draft-max 4 --draft-window "${WINDOW:-32}") ;;
    draft-tree) args+=(--spec draft -md "$draft" --draft-max 4 --draft-width "${WIDTH:-3}") ;;
    ngram-tree) args+=(--spec ngram --draft-max 8 --draft-width "${WIDTH:-3}") ;;
    ngram16-tree) args+=(--spec ngram --draft-max 16 --draft-width "${WIDTH:-3}") ;;
    auto-tree) args+=(--spec auto -md "$draft" --draft-width "${WIDTH:-3}") ;;
  esac
  "$brisk" run "${args[@]}" "$@" 2>"$OUT/err" >/dev/null
  python3 - "$OUT/err" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r'generated (\d+) tokens, ([\d.]+) tokens/s', t)
n, tps = int(m.group(1)), float(m.group(2))
s = re.search(r'acceptance [\d.]+% \((\d+) of (\d+) drafted\).*?\((\d+) passes\)', t)
acc, dr, ps = (int(s.group(1)), int(s.group(2)), int(s.group(3))) if s else (0, 0, n)
print(n, n / tps if tps > 0 else 0, dr, acc, ps)
EOF
}

# bench NAME MODES PROMPTS EXTRA...: REPS alternating rounds over all prompts;
# per round and mode, total tokens / total seconds. Writes $OUT/NAME.tsv.
bench() {
  local name="$1" modes="$2" prompts="$3"; shift 3
  : > "$OUT/$name.tsv"
  for r in $(seq 1 "$REPS"); do
    for p in $prompts; do
      for m in $modes; do echo "$r $m $(run "$m" "$p" "$@")" >> "$OUT/$name.tsv"; done
    done
  done
  python3 - "$OUT/$name.tsv" "$name" <<'EOF'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, m, n, s, dr, acc, ps in rows:
    d = by.setdefault(m, {}).setdefault(r, [0, 0.0, 0, 0, 0])
    d[0] += int(n); d[1] += float(s); d[2] += int(dr); d[3] += int(acc); d[4] += int(ps)
plain = {r: v[0] / v[1] for r, v in by.get('plain', {}).items()}
print(f"== {sys.argv[2]}: median over {len(plain) or len(next(iter(by.values())))} alternating rounds (min-max)")
for m, rs in by.items():
    tps = [v[0] / v[1] for v in rs.values()]
    sp = [rs[r][0] / rs[r][1] / plain[r] for r in rs if r in plain]
    v = [sum(x[i] for x in rs.values()) for i in range(5)]
    line = f"{m:13s} {st.median(tps):8.1f} tok/s ({min(tps):.1f}-{max(tps):.1f})"
    if m != 'plain' and sp: line += f" | speedup {st.median(sp):.3f}x ({min(sp):.3f}-{max(sp):.3f})"
    if v[2]: line += f" | acceptance {100*v[3]/v[2]:.1f}% | mean accepted/pass {v[3]/max(1, v[4]):.2f} | passes/token {v[4]/v[0]:.3f}"
    print(line)
EOF
}

vals="$(ls "$OUT"/prompts/val*.txt)"
edits="$(ls "$OUT"/prompts/edit*.txt)"
for s in $sections; do
  case "$s" in
    val)  bench val "${MODES_VAL:-plain draft ngram auto}" "$vals" --temp 0 ;;
    edit) bench edit "${MODES_EDIT:-plain ngram ngram16 auto}" "$edits" --temp 0 ;;
    temp) bench temp "${MODES_TEMP:-plain auto}" "$vals" --temp 1.0 --seed 7 ;;
    cost)
      echo "== target cost per pass (ms) of n = 1..17 tokens (k = n-1), threads $THREADS"
      "$brisk" run -m "$target" -f "$OUT/prompts/val00.txt" -n 0 -c 512 -t "$THREADS" --no-display-prompt \
        --spec-cost 17 --spec-cost-reps 7 2>&1 >/dev/null | grep "cost per pass" | sed 's/^/fixture target: /'
      if [ ! -f "$SYNTH_1B" ]; then "$brisk" synth --shape llama-3.2-1b --type Q4_0 -o "$SYNTH_1B" >/dev/null 2>&1; fi
      "$brisk" run -m "$SYNTH_1B" -p "hello world, this is a prompt" -n 0 -c 512 -t "${THREADS_1B:-2}" \
        --spec-cost 17 --spec-cost-reps 2 2>&1 >/dev/null | grep "cost per pass" | sed 's/^/llama-3.2-1b Q4_0: /' ;;
  esac
done
