#!/usr/bin/python3
"""Generate tests/data/gguf-corrupt/: one small hand-made GGUF file per reader
validation rule, plus expected.tsv (file, status, substring of the message).

test_gguf opens every file listed there and checks that brisk_gguf_open rejects
it with that status and a message containing that substring. The files are
committed; rerun this after changing a rule:  /usr/bin/python3 tests/gen_gguf_corrupt.py
"""
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gguf-corrupt")

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# ggml tensor types
T_F32, T_Q4_0 = 0, 2


def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
def i64(v): return struct.pack("<q", v)
def gstr(s): s = s.encode() if isinstance(s, str) else s; return u64(len(s)) + s


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def kv(key, vtype, payload):
    """payload: the encoded value without its type tag"""
    return gstr(key) + u32(vtype) + payload


def arr(elem_type, count, payload):
    return u32(elem_type) + u64(count) + payload


def tinfo(name, dims, ttype, offset):
    return gstr(name) + u32(len(dims)) + b"".join(i64(d) for d in dims) + u32(ttype) + u64(offset)


def pad(b, align=32):
    return b + b"\0" * ((align - len(b) % align) % align)


def gguf(kvs=(), tensors=(), data=b"", align=32, n_kv=None, n_tensors=None):
    head = header(len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)
    head += b"".join(kvs) + b"".join(tensors)
    return pad(head, align) + data if tensors else head + data


NAME = kv("general.name", STR, gstr("corrupt"))
F32x4 = struct.pack("<4f", 1, 2, 3, 4)

CASES = []  # (file, status, expected substring, bytes)


def case(name, expect, data, status="format"):
    CASES.append((name, status, expect, data))


# ---- header -----------------------------------------------------------------
case("truncated-header.gguf", "truncated header", header(0, 0)[:12])
case("bad-magic.gguf", "not a GGUF file (magic 'GGML'", header(0, 0, magic=b"GGML"))
case("version-1.gguf", "GGUF v1 is not supported", b"GGUF" + u32(1) + u32(0) + u32(0))
case("version-99.gguf", "unsupported GGUF version 99", header(0, 0, version=99))
case("big-endian.gguf", "big-endian GGUF files are not supported",
     b"GGUF" + struct.pack(">I", 3) + struct.pack(">Q", 0) + struct.pack(">Q", 1) + NAME)
case("too-many-kvs.gguf", "n_kv 1099511627776", gguf([NAME], n_kv=1 << 40))
case("too-many-tensors.gguf", "n_tensors 18446744073709551615", gguf([NAME], n_tensors=2**64 - 1))

# ---- metadata ----------------------------------------------------------------
case("empty-key.gguf", "kv 0: empty key", gguf([kv("", U32, u32(1))]))
case("huge-key.gguf", "kv 0: key: string length 1099511627776 exceeds the cap",
     header(0, 1) + u64(1 << 40) + b"general.name" + u32(U32) + u32(1))
case("huge-string.gguf", "key 'general.name': string length 2147483648 exceeds the cap",
     gguf([kv("general.name", STR, u64(1 << 31) + b"abc")]))
case("string-past-eof.gguf", "key 'general.name': string length 100 past end of file",
     gguf([kv("general.name", STR, u64(100) + b"short")]))
case("value-type-truncated.gguf", "key 'abcdef': value type truncated", header(0, 1) + gstr("abcdef"))
case("truncated-value.gguf", "key 'a': u32 value truncated (needs 4 bytes, 2 remain)",
     header(0, 1) + gstr("a") + u32(U32) + b"\1\2")
case("unknown-value-type.gguf", "key 'general.name': unknown value type 13",
     gguf([kv("general.name", 13, u32(0))]))
case("bad-bool.gguf", "key 'general.flag': bool value 2 is not 0 or 1", gguf([kv("general.flag", BOOL, b"\2")]))
case("bad-bool-in-array.gguf", "key 'flags': element 2: bool value 255 is not 0 or 1",
     gguf([kv("flags", ARR, arr(BOOL, 4, b"\1\0\xff\1"))]))
case("duplicate-key.gguf", "duplicate key 'general.name' (kvs 0 and 2)",
     gguf([NAME, kv("general.foo", U32, u32(7)), kv("general.name", STR, gstr("again"))]))
case("huge-array.gguf", "key 'tokenizer.ggml.scores': array count 4611686018427387904 of f32",
     gguf([kv("tokenizer.ggml.scores", ARR, arr(F32, 1 << 62, struct.pack("<2f", 0, 1)))]))
case("huge-string-array.gguf", "key 'tokenizer.ggml.tokens': array count 1099511627776 of str",
     gguf([kv("tokenizer.ggml.tokens", ARR, arr(STR, 1 << 40, gstr("a") + gstr("b")))]))
case("string-array-element-past-eof.gguf",
     "key 'tokenizer.ggml.tokens': element 1: string length 1000 past end of file",
     gguf([kv("tokenizer.ggml.tokens", ARR, arr(STR, 3, gstr("a") + u64(1000) + b"bcd" * 8))]))
case("array-header-truncated.gguf", "key 'x': array header truncated (needs 12 bytes, 6 remain)",
     header(0, 1) + gstr("x") + u32(ARR) + u32(U32) + b"\1\0")
case("unknown-array-type.gguf", "key 'x': unknown array element type 99", gguf([kv("x", ARR, arr(99, 1, u32(0)))]))
bomb = u32(U8) + u64(0)
for _ in range(100):
    bomb = u32(ARR) + u64(1) + bomb
case("nested-array-bomb.gguf", "arrays nested deeper than 8 levels", gguf([kv("bomb", ARR, bomb)]))
case("nested-array-bad-inner.gguf", "key 'nested': element 1: array count 1000000 of u32",
     gguf([kv("nested", ARR, arr(ARR, 2, arr(U32, 1, u32(5)) + arr(U32, 1000000, u32(6))))]))

# ---- alignment -----------------------------------------------------------------
case("alignment-not-pow2.gguf", "key 'general.alignment': 48 is not a nonzero power of two",
     gguf([kv("general.alignment", U32, u32(48))]))
case("alignment-zero.gguf", "key 'general.alignment': 0 is not a nonzero power of two",
     gguf([kv("general.alignment", U32, u32(0))]))
case("alignment-wrong-type.gguf", "key 'general.alignment' must be of type u32, found i32",
     gguf([kv("general.alignment", I32, u32(64))]))

# ---- tensor infos ----------------------------------------------------------------
case("long-tensor-name.gguf", "tensor 0: name: string length 64 exceeds the cap of 63",
     gguf([NAME], [tinfo("a" * 64, [4], T_F32, 0)], F32x4))
case("tensor-name-past-eof.gguf", "tensor 0: name: string length 40 past end of file (30 bytes remain)",
     header(1, 0) + u64(40) + b"x" * 30)
case("duplicate-tensor.gguf", "duplicate tensor name 'w' (tensors 0 and 1)",
     gguf([NAME], [tinfo("w", [4], T_F32, 0), tinfo("w", [4], T_F32, 32)], pad(F32x4) + F32x4))
case("too-many-dims.gguf", "tensor 'w': n_dims 5 not in 1..4",
     gguf([NAME], [tinfo("w", [1, 1, 1, 1, 4], T_F32, 0)], F32x4))
case("zero-dims.gguf", "tensor 'w': n_dims 0 not in 1..4", gguf([NAME], [tinfo("w", [], T_F32, 0)], F32x4))
case("negative-dim.gguf", "tensor 'w': dimension 1 is -3 (negative)",
     gguf([NAME], [tinfo("w", [4, -3], T_F32, 0)], F32x4))
case("dims-overflow.gguf", "tensor 'w': element count overflows int64",
     gguf([NAME], [tinfo("w", [1 << 32, 1 << 32], T_F32, 0)], F32x4))
case("bytes-overflow.gguf", "tensor 'w': byte size overflows",
     gguf([NAME], [tinfo("w", [1 << 62], T_F32, 0)], F32x4))
case("truncated-tensor-info.gguf", "tensor 'w': dimensions truncated",
     header(1, 0) + gstr("w") + u32(4) + i64(4) + i64(1) + u32(0) * 3)
case("bad-type-id.gguf", "tensor 'w': unknown tensor type id 1000", gguf([NAME], [tinfo("w", [4], 1000, 0)], F32x4))
case("unsupported-type.gguf", "tensor 'w': tensor type id 16 is not supported",
     gguf([NAME], [tinfo("w", [256], 16, 0)], bytes(66)), status="unsupported")
case("partial-quant-block.gguf", "tensor 'w': row length 33 is not a whole number of Q4_0 blocks",
     gguf([NAME], [tinfo("w", [33, 2], T_Q4_0, 0)], bytes(72)))
case("misaligned-offset.gguf", "tensor 'w': offset 4 is not a multiple of the alignment 32",
     gguf([NAME], [tinfo("w", [4], T_F32, 4)], bytes(4) + F32x4))
case("misaligned-offset-align64.gguf", "tensor 'w': offset 32 is not a multiple of the alignment 64",
     gguf([kv("general.alignment", U32, u32(64))], [tinfo("w", [4], T_F32, 32)], bytes(32) + F32x4, align=64))

# ---- tensor data -------------------------------------------------------------------
case("offset-past-eof.gguf", "tensor 'w': data [1120, 1136) past end of file (size 112)",
     gguf([NAME], [tinfo("w", [4], T_F32, 1024)], F32x4))
case("offset-overflow.gguf", "tensor 'w': data offset 18446744073709551584 + 16 bytes overflows",
     gguf([NAME], [tinfo("w", [4], T_F32, 2**64 - 32)], F32x4))
case("overlapping-tensors.gguf", "tensors 'a' and 'b' overlap: data [0, 64) and [32, 64)",
     gguf([NAME], [tinfo("a", [16], T_F32, 0), tinfo("b", [8], T_F32, 32)], bytes(64)))
case("overlapping-tensors-unordered.gguf", "tensors 'late' and 'b' overlap",
     gguf([NAME], [tinfo("b", [8], T_F32, 64), tinfo("c", [4], T_F32, 128), tinfo("late", [32], T_F32, 0)],
          bytes(160)))
# a zero-element tensor needs no data, but the data section must still start inside the file
case("data-start-past-eof.gguf", "data section start (header end 97 aligned to 32) past end of file (size 97)",
     header(1, 1) + NAME + tinfo("wx", [0], T_F32, 0))
case("empty.gguf", "empty file", b"")


def main():
    os.makedirs(OUT, exist_ok=True)
    keep = {"expected.tsv"}
    lines = ["# file\tstatus\tsubstring of the error message (generated by tests/gen_gguf_corrupt.py)"]
    for name, status, expect, data in CASES:
        assert len(data) < 4096, name
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        keep.add(name)
        lines.append(f"{name}\t{status}\t{expect}")
    with open(os.path.join(OUT, "expected.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for stale in set(os.listdir(OUT)) - keep:
        os.remove(os.path.join(OUT, stale))
    print(f"wrote {len(CASES)} files to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
