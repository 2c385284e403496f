#!/usr/bin/env bash
# gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 KEY=TYPE:VALUE...: llama.cpp's
# logits for a copy of MODEL with metadata keys changed, for the loading
# variants of tests/test_archs.c (which makes the same copy with brisk's own
# GGUF writer and compares brisk's logits with these).
#
# The copy is `llama-quantize --override-kv KEY=TYPE:VALUE ... MODEL COPY`
# (tensors copied as they are; TYPE is int, float, bool or str, and int
# values are written as u32, as llama-quantize does); the logits are
# peer-logits on tests/data/archs/tokens64.i32 as one 64-token batch on 2
# threads, with the peer's AVX2 build when it is there (as
# gen-arch-fixtures.sh). Needs the peer (BRISK_PEER_DIR overrides
# ~/.cache/brisk-peer); exits 77 without it.
set -euo pipefail
model="${1:?usage: gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 KEY=TYPE:VALUE...}"
out="${2:?usage: gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 KEY=TYPE:VALUE...}"
shift 2
[ $# -gt 0 ] || { echo "gen-arch-variant-refs: no KEY=TYPE:VALUE given" >&2; exit 2; }
peer="${BRISK_PEER_DIR:-$HOME/.cache/brisk-peer}/bin"
peer_libs=""
[ -f "$peer/../bin-avx2/libggml-cpu.so" ] && peer_libs="$(cd "$peer/../bin-avx2" && pwd)"
for tool in llama-quantize peer-logits; do
  [ -x "$peer/$tool" ] || { echo "gen-arch-variant-refs: $peer/$tool is missing (run ../shared/tools/peer/setup.sh)" >&2; exit 77; }
done
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
args=()
for kv in "$@"; do args+=(--override-kv "$kv"); done
"$peer/llama-quantize" "${args[@]}" "$model" "$work/copy.gguf" COPY >"$work/log" 2>&1 ||
  { echo "gen-arch-variant-refs: llama-quantize COPY failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
LD_LIBRARY_PATH="$peer_libs" "$peer/peer-logits" "$work/copy.gguf" "$root/tests/data/archs/tokens64.i32" "$out" 2 512 >"$work/log" 2>&1 ||
  { echo "gen-arch-variant-refs: peer-logits failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
echo "gen-arch-variant-refs: $out"
