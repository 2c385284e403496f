#!/usr/bin/env bash
# cli_synth_vocab: `brisk synth --vocab FILE.gguf` gives a random-weight model that tokenizes
# exactly as FILE does (the ids `brisk tokenize` prints with FILE itself, which
# cli_tokenize and test_tokenizer check against llama.cpp's), sized to FILE's token count;
# bad vocabularies are refused with one clear line, a non-zero exit and no output file.
# Usage: bash tests/cli_synth_vocab.sh BRISK_BINARY SHARED_DIR
# The committed llama-spm vocabulary always runs; ../shared/vocab adds BPE and WPM ones (skipped
# when absent; the whole test exits 77 only if nothing could run, which cannot happen here).
set -u
brisk="$1"
shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

strings=("Hello world" "  café naïve 123456 <s></s> [CLS]" $'def f(x):\n\treturn x**2  # 🙂 日本語')

# same_tokens NAME VOCAB SHAPE: synth with VOCAB, then the ids of every string agree, specials parsed or not
same_tokens() {
  local name="$1" vocab="$2" shape="$3" model="$tmp/$1.gguf"
  if ! "$brisk" synth --shape "$shape" --type F16 --vocab "$vocab" -o "$model" >/dev/null 2>"$tmp/err"; then
    fail "$name: synth: $(cat "$tmp/err")"; return
  fi
  local n_file n_model
  n_file="$("$brisk" inspect "$vocab" 2>/dev/null | grep -m1 'tokenizer.ggml.tokens')"
  n_model="$("$brisk" inspect "$model" 2>/dev/null | grep -m1 'tokenizer.ggml.tokens')"
  [ -n "$n_file" ] && [ "$n_file" = "$n_model" ] && ok || fail "$name: tokens key differs: '$n_file' vs '$n_model'"
  for s in "${strings[@]}"; do
    for special in "" "--parse-special"; do
      local want got
      want="$("$brisk" tokenize -m "$vocab" -p "$s" --ids $special 2>&1)"
      got="$("$brisk" tokenize -m "$model" -p "$s" --ids $special 2>&1)"
      if [ -z "$want" ] || [ "$want" != "$got" ]; then fail "$name: '$s' $special: synth '$got', vocab '$want'"; else ok; fi
    done
  done
}

# the committed vocabulary (32,000 tokens): token_embd and output sized to it
same_tokens spm "$root/tests/data/vocab/ggml-vocab-llama-spm.gguf" gemma3-micro
rows="$("$brisk" inspect "$tmp/spm.gguf" 2>/dev/null | grep -m1 'token_embd.weight')"
echo "$rows" | grep -q '32000' && ok || fail "token_embd is not 32000 rows: '$rows'"

if [ -n "$shared" ] && [ -d "$shared/vocab" ]; then
  for v in llama-bpe gpt-2 bert-bge; do
    f="$shared/vocab/ggml-vocab-$v.gguf"
    [ -f "$f" ] && same_tokens "$v" "$f" qwen3moe-micro || echo "skip: $f absent"
  done
else
  echo "skip: shared vocabularies absent (${shared:-no SHARED_DIR}): only the committed one checked"
fi

# expect_refused NAME PATTERN VOCAB: one line naming the problem, non-zero exit, no output file
expect_refused() {
  local name="$1" pat="$2" vocab="$3" out="$tmp/refused.gguf"
  rm -f "$out"
  "$brisk" synth --shape gemma3-micro --type F32 --vocab "$vocab" -o "$out" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ]; then fail "$name: exit 0"; return; fi
  grep -q -- "$pat" "$tmp/err" || { fail "$name: stderr lacks '$pat': $(cat "$tmp/err")"; return; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { fail "$name: not one line: $(cat "$tmp/err")"; return; }
  [ -e "$out" ] && { fail "$name: left $out behind"; return; }
  ls "$tmp" | grep -q 'refused.gguf.' && { fail "$name: left a temporary file"; return; }
  ok
}
# hand-made GGUF v3 headers (no tensors), keys given as name:type:python-value
mkgguf() {
  python3 - "$@" <<'PY'
import struct, sys
out, kvs = sys.argv[1], sys.argv[2:]
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
body = b''
for kv in kvs:
    k, t, v = kv.split(':', 2); v = eval(v)
    body += s(k)
    if t == 'str': body += struct.pack('<I', 8) + s(v)
    elif t == 'u32': body += struct.pack('<II', 4, v)
    elif t == 'strs': body += struct.pack('<IIQ', 9, 8, len(v)) + b''.join(s(x) for x in v)
    elif t == 'f32s': body += struct.pack('<IIQ', 9, 6, len(v)) + b''.join(struct.pack('<f', x) for x in v)
open(out, 'wb').write(struct.pack('<4sIQQ', b'GGUF', 3, 0, len(kvs)) + body)
PY
}
expect_refused missing "no-such.gguf" "$tmp/no-such.gguf"
printf 'not a gguf at all' >"$tmp/text.gguf"
expect_refused not-gguf "text.gguf" "$tmp/text.gguf"
mkgguf "$tmp/notok.gguf" "general.architecture:str:'llama'" "tokenizer.ggml.model:str:'gpt2'"
expect_refused no-tokens "no tokenizer.ggml.tokens" "$tmp/notok.gguf"
mkgguf "$tmp/nums.gguf" "tokenizer.ggml.model:str:'llama'" "tokenizer.ggml.tokens:f32s:[1.0, 2.0]"
expect_refused tokens-not-strings "tokenizer.ggml.tokens is not an array of strings" "$tmp/nums.gguf"
mkgguf "$tmp/empty.gguf" "tokenizer.ggml.model:str:'llama'" "tokenizer.ggml.tokens:strs:[]"
expect_refused no-token "holds 0 tokens" "$tmp/empty.gguf"
mkgguf "$tmp/scores.gguf" "tokenizer.ggml.model:str:'llama'" "tokenizer.ggml.tokens:strs:['a','b','c']" \
  "tokenizer.ggml.scores:f32s:[0.0, 1.0]"
expect_refused scores-count "tokenizer.ggml.scores has 2 entries for 3 tokens" "$tmp/scores.gguf"
mkgguf "$tmp/bos.gguf" "tokenizer.ggml.model:str:'llama'" "tokenizer.ggml.tokens:strs:['a','b','c']" \
  "tokenizer.ggml.bos_token_id:u32:3"
expect_refused bos-past-vocab "tokenizer.ggml.bos_token_id is not a token id below its 3 tokens" "$tmp/bos.gguf"

"$brisk" synth --help 2>&1 | grep -q -- '--vocab FILE.gguf' && ok || fail "--vocab in brisk synth --help"

echo "cli_synth_vocab: $passes passed, $fails failed"
[ $fails -eq 0 ]
