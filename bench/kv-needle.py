#!/usr/bin/env python3
"""kv-needle: issue #18's code-needle test for KV retention policies.

An identifier of --words (default 2) seeded random words (`lantern_orbit`) is defined
early in a Python prompt, as a function with one call beside it; real code
from the held-out text follows, DEPTH tokens of it between the definition and
the prompt's end, which is `    result = lantern_`. A trial succeeds when the
model's greedy continuation is the rest of the identifier (`orbit`,
followed by a character that cannot continue it). Chance is nil: the words
are drawn from a list the identifier shares with nothing in the prompt.

Every trial runs `brisk run --temp 0` once with the full cache and once per
policy x budget (`--kv-policy P --kv-budget SLOTS`); the prompt is fed in the
batches the policy's room allows, as generation sees it. The table gives the
accuracy by depth, and the full cache's row is the ceiling: a small model
copies an identifier only over so many tokens, so a policy is judged at the
depths where the full cache still finds the needle.

  bench/kv-needle.py [--brisk build/brisk] [--model ../shared/models/pycode-long-f16.gguf]
                     [--text ../shared/models/data/val.txt] [--trials 32] [--depths 64,128,256,512] [--words 2]
                     [--policies streaming,random,h2o,snapkv,tova] [--budgets 64,128] [--seed 1]
                     [--ctx 1024] [--threads 2] [--csv FILE]
  bench/kv-needle.py --agree [--trials 32] [--prompt-tokens 600] [--gen 128] ...   greedy agreement instead:
                     each trial's prompt is a window of the held-out text; the score is the share of the
                     full cache's greedy text (--ignore-eos) a policy reproduces before its first difference

Standard library only; each run is one process (the fixture loads in ~15 ms).
"""
import argparse
import csv
import os
import random
import subprocess
import sys
import tempfile

# Neutral words, none of them an identifier of the standard library the fixture was trained on
# as a whole name; three make a name the model cannot guess.
WORDS = ("lantern orbit maple quartz harbor velvet cobalt meadow pepper saddle tundra walnut "
         "violet canyon ember falcon glacier hazel island jasper kettle lemon marble nectar "
         "oyster pebble quill raven silver thistle umber willow yarrow zephyr amber birch "
         "cedar delta fennel garnet heron ivory juniper kelp lilac mango nutmeg olive").split()


def tokens(args, text):
    """The prompt's token count as brisk run sees it (BOS included)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([args.brisk, "tokenize", "-m", args.model, "-f", path, "--ids"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    return len(out.split())


def continuation(args, prompt, policy, budget, extra=()):
    """The greedy continuation (its first --gen tokens) of prompt, or None when brisk refused."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prompt)
        path = f.name
    cmd = [args.brisk, "run", "-m", args.model, "-f", path, "-n", str(args.gen), "--temp", "0",
           "-c", str(args.ctx), "-t", str(args.threads), "--no-display-prompt"]
    if policy:
        cmd += ["--kv-policy", policy, "--kv-budget", str(budget)]
    cmd += list(extra)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        sys.stderr.write(f"kv-needle: {' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1:]}\n")
        return None
    return r.stdout


def found(text, rest):
    """Whether text starts with the identifier's rest and then stops being an identifier."""
    if text is None or not text.startswith(rest):
        return False
    nxt = text[len(rest):len(rest) + 1]
    return not (nxt.isalnum() or nxt == "_")


def make_trial(args, rng, lines, depth):
    """One prompt with the needle DEPTH tokens (measured) from its end."""
    w = rng.sample(WORDS, args.words)
    name, head, rest = "_".join(w), w[0] + "_", "_".join(w[1:])
    needle = (f"\n\ndef {name}(data, key):\n    return data.get(key)\n\n\n"
              f"def check(data):\n    return {name}(data, 1)\n\n")
    tail = f"\n\n    result = {head}"
    start = rng.randrange(0, len(lines) - 4000)
    pre = "\n".join(lines[start:start + 12])           # some code before the needle: it is not next to the sinks
    # The filler after the needle, grown by lines to DEPTH tokens counted from the needle's first token.
    # Characters per token (~3.6 on this tokenizer) give the first guess; one count corrects it.
    body, i = [], start + 40
    while sum(len(s) + 1 for s in body) < depth * 3.6:
        body.append(lines[i])
        i += 1
    for _ in range(6):
        got = tokens(args, needle + "\n".join(body) + tail) - 1   # less the BOS
        if got < depth * 0.95 and i < len(lines):
            body.append(lines[i])
            i += 1
        elif got > depth * 1.05 and len(body) > 1:
            body.pop()
        else:
            break
    return pre + needle + "\n".join(body) + tail, rest, got


def agreement(args, lines, configs):
    """Greedy agreement: per trial, a window of about --prompt-tokens tokens of the held-out text, then
    --gen tokens greedily (--ignore-eos) with every cache; each policy's score is the share of the full
    cache's text it reproduces before its first difference."""
    rng = random.Random(args.seed)
    share = {c[0]: [] for c in configs[1:]}
    same = {c[0]: 0 for c in configs[1:]}
    for t in range(args.trials):
        start = rng.randrange(0, len(lines) - 4000)
        body, i = [], start
        while sum(len(x) + 1 for x in body) < args.prompt_tokens * 3.6:
            body.append(lines[i])
            i += 1
        while len(body) > 1 and tokens(args, "\n".join(body) + "\n") > args.prompt_tokens * 1.05:
            body.pop()   # code with short tokens: the character estimate overshot
        prompt = "\n".join(body) + "\n"
        full = continuation(args, prompt, None, 0, ("--ignore-eos",))
        if not full:
            continue
        for label, policy, budget in configs[1:]:
            got = continuation(args, prompt, policy, budget, ("--ignore-eos",)) or ""
            n = 0
            while n < min(len(got), len(full)) and got[n] == full[n]:
                n += 1
            share[label].append(n / len(full))
            same[label] += got == full
    n = len(next(iter(share.values()), []))
    print(f"greedy agreement with the full cache: {n} prompts of ~{args.prompt_tokens} tokens, {args.gen} tokens "
          f"generated, -c {args.ctx}, budgets in slots\n")
    print("| cache | mean share before the first difference | identical |")
    print("|---|---:|---:|")
    for label, _, _ in configs[1:]:
        v = share[label]
        print(f"| {label} | {100.0 * sum(v) / max(1, len(v)):.1f}% | {same[label]}/{len(v)} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brisk", default="build/brisk")
    ap.add_argument("--model", default="../shared/models/pycode-long-f16.gguf")
    ap.add_argument("--text", default="../shared/models/data/val.txt")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--depths", default="64,128,256,512")
    ap.add_argument("--policies", default="streaming,random,h2o,snapkv,tova")
    ap.add_argument("--budgets", default="64,128")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=8)
    ap.add_argument("--words", type=int, default=2)
    ap.add_argument("--csv")
    ap.add_argument("--agree", action="store_true", help="greedy agreement instead of the needle")
    ap.add_argument("--prompt-tokens", type=int, default=600)
    args = ap.parse_args()
    for path in (args.model, args.text):
        if not os.path.exists(path):
            print(f"kv-needle: {path} is missing (the fixtures live in ../shared/models)", file=sys.stderr)
            return 77
    lines = [l for l in open(args.text, encoding="utf-8").read().split("\n") if not l.startswith("# <<<FILE")]
    depths = [int(d) for d in args.depths.split(",")]
    configs = [("full", None, 0)] + [(f"{p} {b}", p, int(b)) for p in args.policies.split(",") if p
                                     for b in args.budgets.split(",")]
    if args.agree:
        if args.gen == 8:
            args.gen = 128
        return agreement(args, lines, configs)
    rng = random.Random(args.seed)
    hits = {(c[0], d): 0 for c in configs for d in depths}
    measured = {d: [] for d in depths}
    for d in depths:
        for t in range(args.trials):
            prompt, rest, got = make_trial(args, rng, lines, d)
            measured[d].append(got)
            for label, policy, budget in configs:
                hits[(label, d)] += found(continuation(args, prompt, policy, budget), rest)
        print(f"kv-needle: depth {d} done ({args.trials} trials)", file=sys.stderr)
    print(f"accuracy by depth (tokens from the needle to the prompt's end; mean measured depth in brackets), "
          f"{args.trials} trials each, -c {args.ctx}, budgets in slots (sinks and window included)\n")
    print("| cache | " + " | ".join(f"{d} ({sum(measured[d]) / len(measured[d]):.0f})" for d in depths) + " |")
    print("|---|" + "---:|" * len(depths))
    for label, _, _ in configs:
        print(f"| {label} | " + " | ".join(f"{100.0 * hits[(label, d)] / args.trials:.0f}%" for d in depths) + " |")
    if args.csv:
        with open(args.csv, "a", newline="") as f:
            w = csv.writer(f)
            for label, _, _ in configs:
                for d in depths:
                    w.writerow([label, d, args.trials, hits[(label, d)]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
