#!/usr/bin/env python3
"""gen-gptoss-micro.py OUT.gguf: a micro gpt-oss model (F32, under libFuzzer's
64 KiB input limit) for fuzz/corpus/fuzz_model, so the fuzzer reaches the
gpt-oss binding and graph: attention sinks, router and expert biases, the
clamped SwiGLU, windowed layers, YaRN. 2 layers, 16 wide, 2 query heads of 8
and 1 KV head, 4 experts of 16 with 2 used, a window of 4, YaRN factor 4 from
16 positions, the "test" tokenizer with 128 tokens (tests/data/archs/tokens64.i32 runs on it). Weights are deterministic
noise (std 1/sqrt(16)); norms near 1. The same file loads in llama.cpp (its
logits against brisk's: docs/MODELS.md). Standard library only."""
import struct
import sys

ARCH = "gpt-oss"
D, HEADS, KV_HEADS, HD, FF, EXPERTS, USED, VOCAB, LAYERS = 16, 2, 1, 8, 16, 4, 2, 128, 2

state = 12345


def noise(n, scale, offset=0.0):
    global state
    out = []
    for _ in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(offset + scale * ((state / 0x7FFFFFFF) * 2.0 - 1.0) * 1.7320508)   # uniform, std = scale
    return out


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


kvs = []


def kv(key, t, payload):
    kvs.append(s(key) + struct.pack("<I", t) + payload)


def u32(key, v): kv(key, 4, struct.pack("<I", v))
def f32(key, v): kv(key, 6, struct.pack("<f", v))
def string(key, v): kv(key, 8, s(v))
def arr(key, et, items, fmt=None):
    body = b"".join(s(x) for x in items) if et == 8 else b"".join(struct.pack("<" + fmt, x) for x in items)
    kv(key, 9, struct.pack("<IQ", et, len(items)) + body)


string("general.architecture", ARCH)
u32(ARCH + ".context_length", 64)
u32(ARCH + ".embedding_length", D)
u32(ARCH + ".block_count", LAYERS)
u32(ARCH + ".feed_forward_length", FF)
u32(ARCH + ".expert_feed_forward_length", FF)
u32(ARCH + ".expert_count", EXPERTS)
u32(ARCH + ".expert_used_count", USED)
u32(ARCH + ".attention.head_count", HEADS)
u32(ARCH + ".attention.head_count_kv", KV_HEADS)
u32(ARCH + ".attention.key_length", HD)
u32(ARCH + ".attention.value_length", HD)
f32(ARCH + ".attention.layer_norm_rms_epsilon", 1e-5)
u32(ARCH + ".attention.sliding_window", 4)
u32(ARCH + ".rope.dimension_count", HD)
f32(ARCH + ".rope.freq_base", 10000.0)
string(ARCH + ".rope.scaling.type", "yarn")
f32(ARCH + ".rope.scaling.factor", 4.0)
u32(ARCH + ".rope.scaling.original_context_length", 16)
string("tokenizer.ggml.model", "test")
arr("tokenizer.ggml.tokens", 8, ["tok_%d" % i for i in range(VOCAB)])
arr("tokenizer.ggml.scores", 6, [0.0] * VOCAB, "f")
arr("tokenizer.ggml.token_type", 5, [1] * VOCAB, "i")

tensors = []   # (name, ne, floats)


def t(name, ne, scale=0.25, offset=0.0):
    n = 1
    for x in ne:
        n *= x
    tensors.append((name, ne, noise(n, scale, offset)))


t("token_embd.weight", [D, VOCAB], 1.0)
t("output_norm.weight", [D], 0.1, 1.0)
t("output.weight", [D, VOCAB])
for il in range(LAYERS):
    p = "blk.%d." % il
    t(p + "attn_norm.weight", [D], 0.1, 1.0)
    t(p + "attn_q.weight", [D, HEADS * HD])
    t(p + "attn_k.weight", [D, KV_HEADS * HD])
    t(p + "attn_v.weight", [D, KV_HEADS * HD])
    t(p + "attn_q.bias", [HEADS * HD], 0.1)
    t(p + "attn_k.bias", [KV_HEADS * HD], 0.1)
    t(p + "attn_v.bias", [KV_HEADS * HD], 0.1)
    t(p + "attn_output.weight", [HEADS * HD, D])
    t(p + "attn_output.bias", [D], 0.1)
    t(p + "attn_sinks.weight", [HEADS], 1.0)
    t(p + "post_attention_norm.weight", [D], 0.1, 1.0)
    t(p + "ffn_gate_inp.weight", [D, EXPERTS], 1.0)
    t(p + "ffn_gate_inp.bias", [EXPERTS], 0.5)
    t(p + "ffn_gate_exps.weight", [D, FF, EXPERTS], 1.0)
    t(p + "ffn_up_exps.weight", [D, FF, EXPERTS], 1.0)
    t(p + "ffn_down_exps.weight", [FF, D, EXPERTS])
    t(p + "ffn_gate_exps.bias", [FF, EXPERTS], 0.5)
    t(p + "ffn_up_exps.bias", [FF, EXPERTS], 0.5)
    t(p + "ffn_down_exps.bias", [D, EXPERTS], 0.1)

ALIGN = 32
infos, blobs, off = [], [], 0
for name, ne, vals in tensors:
    infos.append(s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", 0, off))
    blob = struct.pack("<%df" % len(vals), *vals)
    blob += b"\0" * ((-len(blob)) % ALIGN)
    blobs.append(blob)
    off += len(blob)
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
head += b"\0" * ((-len(head)) % ALIGN)
data = head + b"".join(blobs)
if len(data) > 65536:
    sys.exit("gen-gptoss-micro: %d bytes, over libFuzzer's 64 KiB" % len(data))
open(sys.argv[1], "wb").write(data)
print("gen-gptoss-micro: %s, %d bytes" % (sys.argv[1], len(data)))
