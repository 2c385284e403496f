#!/usr/bin/env python3
"""gen-moe-groups.py IN.gguf OUT.gguf GROUPS USED: a copy of an F32 MoE model
(llama.cpp's test-llama-archs deepseek2 fixture: 2 experts) with its experts
doubled and grouped routing switched on, for tests/test_archs.c (grouped
routing needs 2+ experts per group, which the fixture lacks).

Every tensor with the expert count as its last dimension gets a second set of
experts appended: the router rows and the experts' matrices negated (new
experts, new routing), the selection bias shifted by +0.1 / -0.1, the
per-expert scales copied. ARCH.expert_count doubles, expert_group_count and
expert_group_used_count become GROUPS and USED (the keys must exist, as
test-llama-archs writes them). Then llama-quantize and peer-logits make the
committed file and its reference (docs/MODELS.md)."""
import struct, sys

src, dst, groups, used = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
d = open(src, "rb").read()
o = 0
def take(fmt):
    global o
    v = struct.unpack_from("<" + fmt, d, o)[0]
    o += struct.calcsize("<" + fmt)
    return v
def string():
    n = take("Q")
    global o
    o += n
    return d[o - n:o]
scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def skip(t):
    if t == 8: string()
    elif t == 9:
        et, n = take("I"), take("Q")
        for _ in range(n): skip(et)
    else: take(scalar[t])
assert d[:4] == b"GGUF"
o = 8
n_tensors, n_kv = take("Q"), take("Q")
kv = bytearray(d[o:])   # patched below, then cut at the tensor infos
kv_start = o
arch = None
patch = {}
for _ in range(n_kv):
    key = string().decode()
    t = take("I")
    if key == "general.architecture":
        arch = string().decode()
        continue
    at = o
    skip(t)
    patch[key] = (t, at)
kv_end = o
out_kv = bytearray(d[kv_start:kv_end])
n_expert = None
for key, val in ((arch + ".expert_count", None), (arch + ".expert_group_count", groups), (arch + ".expert_group_used_count", used)):
    t, at = patch[key]
    assert t == 4, key
    if val is None:
        n_expert = struct.unpack_from("<I", d, at)[0]
        val = 2 * n_expert
    struct.pack_into("<I", out_kv, at - kv_start, val)
infos = []
for _ in range(n_tensors):
    name = string()
    dims = [take("Q") for _ in range(take("I"))]
    infos.append((name, dims, take("I"), take("Q")))
align = 32
base = (o + align - 1) // align * align
tensors = []
for name, dims, t, off in infos:
    assert t == 0, "F32 input only"
    n = 1
    for x in dims: n *= x
    vals = list(struct.unpack_from("<%df" % n, d, base + off))
    nm = name.decode()
    if dims[-1] == n_expert and n_expert > 1 and (".ffn_" in nm or "exp_probs_b" in nm):
        if nm.endswith("exp_probs_b.bias"):
            extra = [v + (0.1 if i % 2 == 0 else -0.1) for i, v in enumerate(vals)]
        elif nm.endswith(".scale") or nm.endswith(".input_scale"):
            extra = list(vals)
        else:
            extra = [-v for v in vals]
        vals = vals + extra
        dims = dims[:-1] + [2 * n_expert]
    tensors.append((name, dims, vals))
out = bytearray(b"GGUF" + struct.pack("<I", 3) + struct.pack("<QQ", len(tensors), n_kv))
out += out_kv
off = 0
for name, dims, vals in tensors:
    out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims)
    out += struct.pack("<IQ", 0, off)
    off = (off + 4 * len(vals) + align - 1) // align * align
out += b"\0" * ((-len(out)) % align)
for name, dims, vals in tensors:
    out += struct.pack("<%df" % len(vals), *vals)
    out += b"\0" * ((-len(out)) % align)
open(dst, "wb").write(out)
