#!/usr/bin/env bash
# Regenerate tests/data/golden-extra: golden logits for features that
# ../shared/golden has no file for (the qwen3 architecture with head_dim !=
# dim/heads and per-head Q/K norms; YaRN rope scaling). Needs the peer
# (../shared/tools/peer/setup.sh) and a built brisk (make build).
#
#   1. brisk synth writes the F32 model (random weights, synthetic vocab);
#   2. llama-quantize derives F16, Q8_0 and Q4_K_M from it (llama.cpp's own mixes);
#   3. peer-logits dumps llama.cpp's logits for tokens64.i32 (BOS + 63 random
#      ids in [3, 512), seed 11) evaluated as one 64-token batch.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peer="${BRISK_PEER_DIR:-$HOME/.cache/brisk-peer}/bin"
out="$root/tests/data/golden-extra"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
/usr/bin/python3 - "$out/tokens64.i32" <<'PY'
import random, struct, sys
random.seed(11)
ids = [1] + [random.randrange(3, 512) for _ in range(63)]
open(sys.argv[1], "wb").write(struct.pack("<64i", *ids))
PY
for shape in qwen3-tiny llama-yarn-tiny; do
  "$root/build/brisk" synth --shape "$shape" --type F32 --seed 7 -o "$work/$shape-F32.gguf"
  for t in F16 Q8_0 Q4_K_M; do
    "$peer/llama-quantize" "$work/$shape-F32.gguf" "$out/$shape-$t.gguf" "$t" >/dev/null 2>&1
    "$peer/peer-logits" "$out/$shape-$t.gguf" "$out/tokens64.i32" "$out/$shape-$t.logits.f32" 2 512
  done
done
