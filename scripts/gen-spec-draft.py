#!/usr/bin/python3
"""Generate tests/data/spec/pycode-draft-q4_0.gguf: the trained pycode draft
model (../shared/models/pycode-draft-f16.gguf, same tokenizer as the bundled
target) with every matrix in Q4_0, so test_spec and test_spec_sampling can run
speculative decoding with a real draft model on a bare clone (~1.1 MB, where the
F16 draft is 3.7 MB).

The quantizer is ggml's reference one (quantize_row_q4_0_ref: per block of 32,
d = the value of largest magnitude / -8, q = min(15, trunc(x / d + 8.5)), low
nibbles hold elements 0..15 and high nibbles 16..31), written here from the
format so the fixture does not come from brisk's own code. Norm vectors stay F32;
the metadata (tokenizer included) is copied byte for byte except
general.file_type (2, MOSTLY_Q4_0) and general.description.

    /usr/bin/python3 scripts/gen-spec-draft.py [SRC.gguf] [OUT.gguf]
"""
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "..", "shared", "models", "pycode-draft-f16.gguf")
OUT = os.path.join(ROOT, "tests", "data", "spec", "pycode-draft-q4_0.gguf")

T_F32, T_F16, T_Q4_0 = 0, 1, 2
V_U32, V_STR, V_ARR = 4, 8, 9
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.b, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.b[self.o:self.o + n]
        self.o += n
        return s.decode()

    def skip_value(self, vtype):
        if vtype == V_STR:
            self.string()
        elif vtype == V_ARR:
            etype, n = self.take("I"), self.take("Q")
            if etype in SCALAR:
                self.o += SCALAR[etype] * n
            else:
                for _ in range(n):
                    self.skip_value(etype)
        else:
            self.o += SCALAR[vtype]


def gstr(s):
    s = s.encode()
    return struct.pack("<Q", len(s)) + s


def quantize_q4_0(xs):
    out = bytearray()
    for b in range(0, len(xs), 32):
        x = xs[b:b + 32]
        amax, vmax = 0.0, 0.0
        for v in x:
            if abs(v) > amax:
                amax, vmax = abs(v), v
        d = vmax / -8.0
        inv = 1.0 / d if d else 0.0
        out += struct.pack("<e", d)
        for j in range(16):
            lo = min(15, int(x[j] * inv + 8.5))
            hi = min(15, int(x[16 + j] * inv + 8.5))
            out.append(lo | hi << 4)
    return bytes(out)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else SRC
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    data = open(src, "rb").read()
    r = Reader(data)
    assert data[:4] == b"GGUF"
    r.o = 4
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    assert version == 3
    kvs, align = [], 32
    for _ in range(n_kv):
        start = r.o
        key = r.string()
        vtype = r.take("I")
        vstart = r.o
        r.skip_value(vtype)
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, vstart)[0]
        if key == "general.file_type":
            kvs.append(gstr(key) + struct.pack("<II", V_U32, T_Q4_0))
        elif key == "general.description":
            desc = Reader(data[vstart:r.o]).string() + "; matrices quantized to Q4_0 by brisk scripts/gen-spec-draft.py"
            kvs.append(gstr(key) + struct.pack("<I", V_STR) + gstr(desc))
        else:
            kvs.append(data[start:r.o])
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("Q") for _ in range(r.take("I"))]
        infos.append((name, dims, r.take("I"), r.take("Q")))
    base = (r.o + align - 1) // align * align

    head, blobs, off = b"", [], 0
    for name, dims, ttype, toff in infos:
        n = 1
        for d in dims:
            n *= d
        if ttype == T_F16:
            xs = struct.unpack_from("<%de" % n, data, base + toff)
            assert len(dims) == 2 and dims[0] % 32 == 0, name
            blob, ntype = quantize_q4_0(xs), T_Q4_0
        else:
            assert ttype == T_F32 and len(dims) == 1, name
            blob, ntype = data[base + toff:base + toff + 4 * n], T_F32
        head += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ntype, off)
        blob += b"\0" * ((align - len(blob) % align) % align)
        blobs.append(blob)
        off += len(blob)
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + b"".join(kvs) + head
    head += b"\0" * ((align - len(head) % align) % align)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    print("%s: %d tensors, %d bytes" % (out, n_tensors, len(head) + off))


if __name__ == "__main__":
    main()
