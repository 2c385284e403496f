#!/usr/bin/env bash
# Regenerate tests/data/greedy: llama.cpp's greedy continuations of the bundled
# model for prompts cut from ../shared/models/data/val.txt. Each case NN has
#   NN.prompt  the prompt bytes (tokenized with BOS, no special parsing)
#   NN.ids     line 1: llama.cpp's prompt ids; line 2: "--"; line 3: the greedy ids
# Needs the peer (../shared/tools/peer/setup.sh); builds scripts/peer/peer-greedy.c.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peer="${BRISK_PEER_DIR:-$HOME/.cache/brisk-peer}"
out="$root/tests/data/greedy"
model="$root/models/pycode-target-f16.gguf"
val="$root/../shared/models/data/val.txt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/peer-greedy" "$root/scripts/peer/peer-greedy.c" -I "$peer/src/include" -I "$peer/src/ggml/include" \
   -L "$peer/bin" -lllama -Wl,-rpath,"$peer/bin"
mkdir -p "$out"
rm -f "$out"/*.prompt "$out"/*.ids
# prompts: the first lines of several val files, of increasing length (4 to ~120 lines)
/usr/bin/python3 - "$val" "$out" <<'PY'
import sys
val, out = sys.argv[1], sys.argv[2]
files, cur = [], None
for line in open(val, encoding="utf-8").read().split("\n"):
    if line.startswith("# <<<FILE "):
        cur = [line]; files.append(cur)
    elif cur is not None:
        cur.append(line)
lengths = [4, 6, 8, 12, 20, 30, 45, 60, 90, 120]
for i, n in enumerate(lengths):
    f = files[(i * 3) % len(files)]
    text = "\n".join(f[:n]) + "\n"
    open(f"{out}/{i:02d}.prompt", "w", encoding="utf-8").write(text)
PY
for p in "$out"/*.prompt; do
  "$work/peer-greedy" "$model" "$p" 64 2>/dev/null > "${p%.prompt}.ids"
done
ls "$out"
