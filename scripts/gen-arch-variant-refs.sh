#!/usr/bin/env bash
# gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 [--shift-f32 SUFFIX=V] [KEY=TYPE:VALUE...]:
# llama.cpp's logits for a copy of MODEL with metadata keys or F32 tensors
# changed, for the loading variants of tests/test_archs.c (which makes the
# same copy with brisk's own GGUF writer and compares brisk's logits with
# these).
#
# The copy is `llama-quantize --override-kv KEY=TYPE:VALUE ... MODEL COPY`
# (tensors copied as they are; TYPE is int, float, bool or str, and int
# values are written as u32, as llama-quantize does); --shift-f32 SUFFIX=V
# then adds V to every element of each F32 tensor whose name ends in SUFFIX,
# in place (the variant's shift_suffix / shift); the logits are
# peer-logits on tests/data/archs/tokens64.i32 as one 64-token batch on 2
# threads, with the peer's AVX2 build when it is there (as
# gen-arch-fixtures.sh). Needs the peer (BRISK_PEER_DIR overrides
# ~/.cache/brisk-peer); exits 77 without it.
set -euo pipefail
model="${1:?usage: gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 KEY=TYPE:VALUE...}"
out="${2:?usage: gen-arch-variant-refs.sh MODEL.gguf OUT.logits.f32 KEY=TYPE:VALUE...}"
shift 2
shift_spec=""
if [ "${1:-}" = "--shift-f32" ]; then
  shift_spec="${2:?--shift-f32 needs SUFFIX=VALUE}"
  shift 2
fi
[ $# -gt 0 ] || [ -n "$shift_spec" ] || { echo "gen-arch-variant-refs: nothing to change" >&2; exit 2; }
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
if [ -n "$shift_spec" ]; then
  /usr/bin/python3 - "$work/copy.gguf" "${shift_spec%%=*}" "${shift_spec#*=}" <<'PY' || { echo "gen-arch-variant-refs: --shift-f32 failed" >&2; exit 1; }
import struct, sys
path, suffix, shift = sys.argv[1], sys.argv[2], float(sys.argv[3])
d = bytearray(open(path, "rb").read())
o = 0
def take(fmt):
    global o
    v = struct.unpack_from("<" + fmt, d, o)[0]
    o += struct.calcsize("<" + fmt)
    return v
def string():
    global o
    n = take("Q")
    o += n
    return bytes(d[o - n:o])
scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def skip(t):
    if t == 8:
        string()
    elif t == 9:
        et, n = take("I"), take("Q")
        for _ in range(n):
            skip(et)
    else:
        take(scalar[t])
assert d[:4] == b"GGUF"
o = 8
n_tensors, n_kv = take("Q"), take("Q")
align = 32
for _ in range(n_kv):
    key, t = string(), take("I")
    if key == b"general.alignment" and t == 4:
        align = take("I")
    else:
        skip(t)
infos = []
for _ in range(n_tensors):
    name = string().decode()
    dims = [take("Q") for _ in range(take("I"))]
    infos.append((name, dims, take("I"), take("Q")))
base = (o + align - 1) // align * align
changed = 0
for name, dims, t, off in infos:
    if t == 0 and name.endswith(suffix):
        n = 1
        for x in dims:
            n *= x
        for i in range(n):
            p = base + off + 4 * i
            struct.pack_into("<f", d, p, struct.unpack_from("<f", d, p)[0] + shift)
        changed += 1
if not changed:
    sys.exit("no F32 tensor ends in " + suffix)
open(path, "wb").write(d)
PY
fi
LD_LIBRARY_PATH="$peer_libs" "$peer/peer-logits" "$work/copy.gguf" "$root/tests/data/archs/tokens64.i32" "$out" 2 512 >"$work/log" 2>&1 ||
  { echo "gen-arch-variant-refs: peer-logits failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
echo "gen-arch-variant-refs: $out"
