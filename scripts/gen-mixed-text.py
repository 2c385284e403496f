#!/usr/bin/python3
"""Build the 1 MiB mixed-text file the tokenizer speed benchmark uses.

    /usr/bin/python3 scripts/gen-mixed-text.py [SHARED_DIR] > mixed.txt

Deterministic (fixed seed, inputs read from SHARED_DIR, default ../shared):
  - code: runs of consecutive lines from models/data/val.txt (Python stdlib);
  - English: the comment and docstring lines of that file, plus the English
    cases of vocab/*.inp;
  - CJK and other scripts: the .inp cases holding Han, Hangul, kana, Cyrillic,
    Khmer ... characters;
  - emoji: the .inp cases holding emoji (U+1F000 and up, U+2600-U+27BF).
Blocks are interleaved in the proportions below until the output reaches
1,048,576 bytes; the last block is cut at a character boundary.
"""
import glob
import os
import random
import sys

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
TARGET = 1 << 20
SEP = "\n__ggml_vocab_test__\n"


def inp_cases():
    seen, out = set(), []
    for path in sorted(glob.glob(os.path.join(SHARED, "vocab", "*.inp"))):
        for case in open(path, encoding="utf-8", errors="replace").read().split(SEP):
            if case.strip() and case not in seen:
                seen.add(case)
                out.append(case)
    return out


def is_emoji(ch):
    cp = ord(ch)
    return cp >= 0x1F000 or 0x2600 <= cp <= 0x27BF


def main():
    val = open(os.path.join(SHARED, "models", "data", "val.txt"), encoding="utf-8").read().split("\n")
    cases = inp_cases()
    emoji = [c for c in cases if any(is_emoji(ch) for ch in c)]
    other = [c for c in cases if c not in emoji and any(ord(ch) > 0x2FF for ch in c)]
    english_cases = [c for c in cases if c not in emoji and c not in other and sum(ch.isalpha() for ch in c) > 8]
    english = [l.strip().lstrip("#").strip() for l in val if l.strip().startswith("#") and len(l.strip()) > 30]
    english += english_cases

    rng = random.Random(20240611)
    parts, size = [], 0
    kinds = ["code"] * 6 + ["english"] * 2 + ["cjk"] + ["emoji"]
    while size < TARGET:
        kind = rng.choice(kinds)
        if kind == "code":
            start = rng.randrange(len(val) - 40)
            block = "\n".join(val[start:start + rng.randint(5, 40)]) + "\n"
        elif kind == "english":
            block = " ".join(rng.choice(english) for _ in range(rng.randint(2, 6))) + "\n\n"
        elif kind == "cjk":
            block = " ".join(rng.choice(other) for _ in range(rng.randint(1, 4))) + "\n"
        else:
            block = " ".join(rng.choice(emoji) for _ in range(rng.randint(1, 3))) + "\n"
        parts.append(block)
        size += len(block.encode("utf-8"))
    data = "".join(parts).encode("utf-8")[:TARGET]
    data = data.decode("utf-8", errors="ignore").encode("utf-8")   # drop a cut character
    sys.stdout.buffer.write(data)


if __name__ == "__main__":
    main()
