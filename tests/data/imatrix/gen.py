#!/usr/bin/env python3
"""gen.py MODEL.gguf OUT [--legacy] [--seed N] [--dataset NAME] [--chunks N] [--drop NAME]:
a random importance matrix in llama.cpp's format for every weight matrix of
MODEL (what llama-imatrix would write, with random positive sums): GGUF
(NAME.in_sum2 [ne0, n_expert] and NAME.counts [1, n_expert], F32, keys
general.type, imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size), or
with --legacy the old .dat layout. Pure Python, deterministic for a seed; the
test fixtures of brisk quantize --imatrix (tests/cli_quantize_imatrix.sh)."""
import random, struct, sys

def gguf_tensors(path):
    d = open(path, 'rb').read()
    o = 4
    def rd(f):
        nonlocal o
        v = struct.unpack_from('<' + f, d, o)[0]; o += struct.calcsize('<' + f); return v
    def rs():
        nonlocal o
        n = rd('Q'); s = d[o:o + n]; o += n; return s.decode()
    def skip(t):
        nonlocal o
        if t == 8: rs(); return
        if t == 9:
            et = rd('I'); n = rd('Q')
            for _ in range(n): skip(et)
            return
        o += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
    assert d[:4] == b'GGUF'
    rd('I'); nt = rd('Q'); nk = rd('Q')
    for _ in range(nk): rs(); skip(rd('I'))
    out = []
    for _ in range(nt):
        name = rs(); nd = rd('I'); ne = [rd('Q') for _ in range(nd)]; rd('I'); rd('Q')
        out.append((name, ne))
    return out

def main():
    args = sys.argv[1:]
    legacy = '--legacy' in args
    opt = lambda k, dflt: args[args.index(k) + 1] if k in args else dflt
    seed, dataset, chunks = int(opt('--seed', '1')), opt('--dataset', 'brisk-gen.txt'), int(opt('--chunks', '10'))
    drop = opt('--drop', None)
    model, out = args[0], args[1]
    rng = random.Random(seed)
    entries = []
    for name, ne in gguf_tensors(model):
        if len(ne) < 2 or not name.endswith('.weight') or name == drop or 'norm' in name: continue
        n_mat = ne[2] if len(ne) > 2 else 1
        counts = [rng.choice([0, 512, 1024, 1536]) if n_mat > 1 else 5120 for _ in range(n_mat)]
        sums = [rng.uniform(0.01, 4.0) * max(c, 1) for c in counts for _ in range(ne[0])]
        entries.append((name, ne[0], n_mat, sums, counts))
    f32 = lambda xs: struct.pack('<%df' % len(xs), *xs)
    if legacy:
        b = struct.pack('<i', len(entries))
        for name, ne0, n_mat, sums, counts in entries:
            ncall = max(counts) // 512
            # legacy values are means times ncall
            vals = [s / max(counts[i // ne0], 1) * ncall for i, s in enumerate(sums)]
            b += struct.pack('<i', len(name)) + name.encode() + struct.pack('<ii', ncall, len(vals)) + f32(vals)
        b += struct.pack('<i', chunks) + struct.pack('<i', len(dataset)) + dataset.encode()
        open(out, 'wb').write(b)
        return
    s = lambda x: struct.pack('<Q', len(x.encode())) + x.encode()
    kv = [s('general.type') + struct.pack('<I', 8) + s('imatrix'),
          s('imatrix.datasets') + struct.pack('<IIQ', 9, 8, 1) + s(dataset),
          s('imatrix.chunk_count') + struct.pack('<II', 4, chunks),
          s('imatrix.chunk_size') + struct.pack('<II', 4, 512)]
    tensors, blobs, off = [], [], 0
    for name, ne0, n_mat, sums, counts in entries:
        for tn, shape, data in ((name + '.in_sum2', (ne0, n_mat), f32(sums)), (name + '.counts', (1, n_mat), f32(counts))):
            tensors.append(s(tn) + struct.pack('<I', 2) + struct.pack('<QQ', *shape) + struct.pack('<I', 0) + struct.pack('<Q', off))
            pad = (32 - len(data) % 32) % 32
            blobs.append(data + b'\0' * pad); off += len(data) + pad
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kv)) + b''.join(kv) + b''.join(tensors)
    head += b'\0' * ((32 - len(head) % 32) % 32)
    open(out, 'wb').write(head + b''.join(blobs))

main()
