#!/usr/bin/python3
"""Record expected token ids from the reference (llama.cpp's llama-tokenize)
for the tokenizer tests. Run once by hand; the outputs are committed so the
tests need neither Python nor llama.cpp:

    /usr/bin/python3 tests/data/vocab/record_peer.py [SHARED_DIR] [PEER_BIN_DIR]

Writes, next to this script:
  ggml-vocab-baichuan.gguf.{inp,out}, ggml-vocab-gpt-neox.gguf.{inp,out}
      the cases of ggml-vocab-llama-spm.gguf.inp plus the extra cases of
      ggml-vocab-qwen35.gguf.inp, in test-tokenizer-0 format (add_special and
      parse_special off). These two vocabularies ship without cases.
  pycode.out
      ids of the hand-written Python snippets in pycode.inp (same format),
      tokenized with ../shared/models/pycode-target-f16.gguf.
  special.tsv
      cases with add_special and/or parse_special on:
      vocab <TAB> add_special <TAB> parse_special <TAB> text as hex <TAB> ids
  bytes.tsv
      the same format: invalid UTF-8 (lone continuation bytes, cut sequences,
      overlong forms, surrogates, bytes that start nothing), NUL bytes and
      non-ASCII spaces, for one vocabulary of every kind. (Code points above
      U+10FFFF are left out: llama.cpp throws on them.)
Each case is one `llama-tokenize -f FILE --ids --no-escape --log-disable` run
on the exact bytes (plus --no-bos / --no-parse-special as the case needs).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "..", "shared")
PEER = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/brisk-peer/bin")
SEP = b"\n__ggml_vocab_test__\n"


def split_cases(raw):
    """test-tokenizer-0's reader: split on SEP; nothing after a final SEP."""
    cases, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            cases.append(raw[pos:])
            break
        cases.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    return cases


def tokenize(model, text, add_special, parse_special):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(text)
        path = f.name
    try:
        args = [os.path.join(PEER, "llama-tokenize"), "-m", model, "-f", path, "--ids", "--no-escape", "--log-disable"]
        if not add_special:
            args.append("--no-bos")
        if not parse_special:
            args.append("--no-parse-special")
        env = dict(os.environ, LD_LIBRARY_PATH=PEER)
        out = subprocess.run(args, capture_output=True, check=True, env=env).stdout.decode().strip()
    finally:
        os.unlink(path)
    assert out.startswith("[") and out.endswith("]"), out
    body = out[1:-1].strip()
    return [int(x) for x in body.split(",")] if body else []


def write_cases(name, model, cases, write_inp=True):
    if write_inp:
        with open(os.path.join(HERE, name + ".inp"), "wb") as f:
            f.write(SEP.join(cases) + SEP)
    with open(os.path.join(HERE, name + ".out"), "w") as f:
        for c in cases:
            ids = tokenize(model, c, False, False)
            f.write(" " + " ".join(str(i) for i in ids) + "\n" if ids else "\n")


def main():
    vocab = os.path.join(SHARED, "vocab")
    base = split_cases(open(os.path.join(vocab, "ggml-vocab-llama-spm.gguf.inp"), "rb").read())
    extra = [c for c in split_cases(open(os.path.join(vocab, "ggml-vocab-qwen35.gguf.inp"), "rb").read())
             if c not in base]
    cases = base + extra
    for v in ("baichuan", "gpt-neox"):
        name = "ggml-vocab-%s.gguf" % v
        write_cases(name, os.path.join(vocab, name), cases)

    snippets = open(os.path.join(HERE, "pycode.inp"), "rb").read()
    write_cases("pycode", os.path.join(SHARED, "models", "pycode-target-f16.gguf"), split_cases(snippets), False)

    special = [
        ("llama-spm", True, False, b"Hello world"),
        ("llama-spm", True, True, b"<s>Hello</s> <unk>x"),
        ("llama-spm", False, False, b"<s>Hello</s>"),
        ("phi-3", False, True, b"<|user|>\nHi there<|end|>\n<|assistant|>"),
        ("phi-3", False, False, b"<|user|>\nHi</s>  there"),
        ("phi-3", True, True, b"<|system|>  You are</s>   nice<|end|>"),
        ("llama-bpe", True, False, b"Hello world"),
        ("llama-bpe", True, True, b"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"),
        ("llama-bpe", False, False, b"<|begin_of_text|>hi<|eot_id|>"),
        ("qwen2", False, True, b"<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"),
        ("qwen2", False, False, b"<|im_start|>user\nhello<|im_end|>"),
        ("qwen2", True, False, b"Hello world"),
        ("gemma-4", True, False, b"Hello world"),
        ("gemma-4", True, True, b"<start_of_turn>user\nHi<end_of_turn>\n"),
        ("bert-bge", True, False, b"Hello, World!"),
        ("bert-bge", True, True, b"[CLS] hello [SEP] world [MASK]"),
        ("deepseek-coder", True, False, b"def f(x):\n    return x"),
        ("starcoder", False, True, b"<fim_prefix>def f(<fim_suffix>):<fim_middle>"),
        ("falcon", False, True, b">>TITLE<<Hello"),
        ("gpt-neox", False, False, b"<|endoftext|>Hello<|padding|>"),
        ("mpt", False, True, b"<|endoftext|>Hello  <|padding|>"),
    ]
    write_tsv("special.tsv", vocab, special)

    raw = [
        b"a\x80b", b"\xC3", b"\xC3x", b"\xE4\xB8", b"x\xF0\x9F\xA6", b"\xC0\x80", b"\xE0\x80\xAFz",
        b"\xED\xA0\x80 \xED\xBF\xBF", b"\xFF\xFE", b"\xF8\x88\x80\x80\x80", b"a\x00b\x00\x00c", b"\x00",
        b"hello \xE2\x80\xA8 world\xC2\xA0x\xE3\x80\x80y  \xE3\x80\x80", b"x\xC2\x85y  \xC2\x85",
        b"\xE2\x96\x81 spm\xE2\x96\x81space", b"caf\xC3\xA9 \xF0\x9F\x98\x80\xF0 \xA0\xA1 end",
        b"\t\x0b\x0c\r\n\x1c\x1d\x1e\x1f mixed controls",
        # Unicode 15.0/15.1 additions (unassigned in libpcre2 10.42's tables):
        # Nag Mundari letters, marks and digits; Kawi; CJK Ext H and I; Kaktovik
        # numerals; Cyrillic Ext-D; ideographic description characters
        "x\U0001E4D0\U0001E4D1\U0001E4EC\U0001E4F1\U0001E4F2 \U00011F04\U00011F34\U00011F05 n\U0001D2C1\U0001D2C2".encode(),
        "\U00031350\U00031351 \U0002EBF0\U0002EBF1a \U0001E030\U0001E031b \u2FFC\u31EF\u0CF3".encode(),
    ]
    kinds = ["llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
             "falcon", "starcoder", "bert-bge", "gemma-4"]
    write_tsv("bytes.tsv", vocab, [(v, False, False, t) for v in kinds for t in raw])


def write_tsv(name, vocab, rows):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("# vocab\tadd_special\tparse_special\ttext_hex\tids (recorded by record_peer.py)\n")
        for v, add, parse, text in rows:
            ids = tokenize(os.path.join(vocab, "ggml-vocab-%s.gguf" % v), text, add, parse)
            f.write("%s\t%d\t%d\t%s\t%s\n" % (v, add, parse, text.hex(), " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
