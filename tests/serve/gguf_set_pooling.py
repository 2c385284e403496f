#!/usr/bin/env python3
"""Copy a GGUF adding ARCH.pooling_type (u32), the tensor data realigned:
the model for /v1/embeddings' mean/cls tests (tests/cli_serve_embed.sh).
usage: gguf_set_pooling.py IN OUT VALUE"""
import struct, sys

src, dst, value = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = open(src, "rb").read()
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
at = 0
def take(n):
    global at
    at += n
    return b[at - n:at]
def u32(): return struct.unpack("<I", take(4))[0]
def u64(): return struct.unpack("<Q", take(8))[0]
def gstr(): return take(u64())
def value_of(t):
    if t == 8: return gstr()
    if t == 9:
        et, n = u32(), u64()
        return [value_of(et) for _ in range(n)]
    return take(SIZES[t])
assert take(4) == b"GGUF"
version, n_tensors, n_kv = u32(), u64(), u64()
arch, align = None, 32
for _ in range(n_kv):
    k = gstr(); t = u32(); v = value_of(t)
    if k == b"general.architecture": arch = v
    if k == b"general.alignment": align = struct.unpack("<I", v)[0]
    assert not k.endswith(b".pooling_type"), "already has a pooling_type"
kv_end = at
for _ in range(n_tensors):
    gstr(); nd = u32(); take(8 * nd); u32(); u64()
info_end = at
data_start = (info_end + align - 1) // align * align
key = arch + b".pooling_type"
extra = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, value)
head = b[:4] + struct.pack("<IQQ", version, n_tensors, n_kv + 1) + b[24:kv_end] + extra + b[kv_end:info_end]
head += b"\0" * ((-len(head)) % align)
open(dst, "wb").write(head + b[data_start:])
