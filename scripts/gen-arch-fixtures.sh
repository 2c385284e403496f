#!/usr/bin/env bash
# gen-arch-fixtures.sh OUT_DIR [ARCH...]: llama.cpp's own tiny random-weight
# models for each architecture brisk supports, with llama.cpp's logits, for
# tests/test_archs.c (docs/MODELS.md). Needs the peer
# (../shared/tools/peer/setup.sh; BRISK_PEER_DIR overrides ~/.cache/brisk-peer).
#
#   1. test-llama-archs -a ARCH -o DIR -d 0.4 -s SEED writes ARCH-dense.gguf
#      (F32, tokenizer "test", 128 tokens; -d 0.4 gives logits a spread of a
#      few units, where KL says something; the default 0.1 is nearly uniform);
#   2. llama-quantize derives Q8_0 and Q4_K_M (llama.cpp's own type mixes);
#   3. peer-logits writes llama.cpp's logits for tokens64.i32 (64 ids in
#      [0, 128), seed 16) evaluated as one 64-token batch, 2 threads, with
#      the peer's AVX2 build (bin-avx2) when it is there: on this machine the
#      AVX-512 build disagrees with itself across ubatch sizes on some files
#      by more than the test's limits (qwen3moe-moe Q4_K_M at seed 42: KL
#      1.6e-3 between its ubatch 1 and 512), and a reference that changes
#      with its own batch size cannot judge brisk's (docs/MODELS.md).
#
# An ARCH of the form NAME-moe takes test-llama-archs' mixture-of-experts
# model of NAME (NAME-moe.gguf) instead of the dense one; its files are
# NAME-moe-TYPE.gguf.
#
# An ARCH of the form synth:SHAPE takes the F32 model from `brisk synth
# --shape SHAPE` instead (real-shaped tiny models with what the fixtures lack,
# e.g. phi3-tiny's fused QKV; $BRISK, default build/brisk, must be built).
#
# Output: OUT_DIR/tokens64.i32 and ARCH-TYPE.gguf + ARCH-TYPE.logits.f32 for
# TYPE in F32 Q8_0 Q4_K_M. BRISK_ARCH_SEED (default 42) picks the weights;
# BRISK_ARCH_TYPES (default "Q8_0 Q4_K_M") the llama-quantize types made from F32
# (tests/data/archs' IQ4_NL, IQ4_XS and MXFP4_MOE files came from it, docs/MODELS.md).
set -euo pipefail
out="${1:?usage: gen-arch-fixtures.sh OUT_DIR [ARCH...]}"
shift
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(llama qwen2 qwen3 mistral3 smollm3 granite gemma gemma2 gemma3 phi3 olmo2 exaone4 glm4 starcoder2
                                 synth:phi3-tiny synth:gemma2-tiny synth:gemma3-tiny
                                 qwen3moe-moe olmoe-moe qwen2moe-moe llama-moe granitemoe-moe glm4moe-moe gpt-oss-moe deepseek2-moe
                                 synth:qwen3moe-tiny synth:qwen2moe-tiny synth:olmoe-tiny synth:mixtral-tiny)
peer="${BRISK_PEER_DIR:-$HOME/.cache/brisk-peer}/bin"
peer_libs=""   # llama.cpp's default build (its own library path); its AVX2 build when the peer has one (see above)
[ -f "$peer/../bin-avx2/libggml-cpu.so" ] && peer_libs="$(cd "$peer/../bin-avx2" && pwd)"
seed="${BRISK_ARCH_SEED:-42}"
for tool in test-llama-archs llama-quantize peer-logits; do
  [ -x "$peer/$tool" ] || { echo "gen-arch-fixtures: $peer/$tool is missing (run ../shared/tools/peer/setup.sh)" >&2; exit 77; }
done
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$out/tokens64.i32" <<'PY'
import random, struct, sys
random.seed(16)
ids = [random.randrange(0, 128) for _ in range(64)]
open(sys.argv[1], "wb").write(struct.pack("<64i", *ids))
PY
root="$(cd "$(dirname "$0")/.." && pwd)"
brisk="${BRISK:-$root/build/brisk}"
for arch in "${archs[@]}"; do
  if [ "${arch#synth:}" != "$arch" ]; then
    arch="${arch#synth:}"
    "$brisk" synth --shape "$arch" --type F32 --seed "$seed" -o "$out/$arch-F32.gguf" >"$work/log" 2>&1 ||
      { echo "gen-arch-fixtures: brisk synth --shape $arch failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
  else
    base="${arch%-moe}" kind=dense
    [ "$base" = "$arch" ] || kind=moe
    "$peer/test-llama-archs" -a "$base" -o "$work" -d 0.4 -s "$seed" >"$work/log" 2>&1 ||
      { echo "gen-arch-fixtures: test-llama-archs -a $base failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
    [ -f "$work/$base-$kind.gguf" ] || { echo "gen-arch-fixtures: no $base-$kind.gguf" >&2; exit 1; }
    mv "$work/$base-$kind.gguf" "$out/$arch-F32.gguf"
  fi
  qtypes="${BRISK_ARCH_TYPES:-Q8_0 Q4_K_M}"
  for t in $qtypes; do
    "$peer/llama-quantize" "$out/$arch-F32.gguf" "$out/$arch-$t.gguf" "$t" >"$work/log" 2>&1 ||
      { echo "gen-arch-fixtures: llama-quantize $arch $t failed" >&2; tail -5 "$work/log" >&2; exit 1; }
  done
  for t in F32 $qtypes; do
    LD_LIBRARY_PATH="$peer_libs" "$peer/peer-logits" "$out/$arch-$t.gguf" "$out/tokens64.i32" "$out/$arch-$t.logits.f32" 2 512 >"$work/log" 2>&1 ||
      { echo "gen-arch-fixtures: peer-logits $arch $t failed" >&2; tail -5 "$work/log" >&2; exit 1; }
  done
  rm -f "$work"/*.gguf
done
