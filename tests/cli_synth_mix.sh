#!/usr/bin/env bash
# cli_synth_mix: `brisk synth --type MIXTURE` (a llama-quantize file type that is not a tensor
# type: MXFP4_MOE, Q4_K_M ...) writes each tensor straight in the type llama-quantize gives it.
# The reference is brisk quantize (byte-identical to llama-quantize, tests/cli_quantize*.sh) run
# on the same shape's F32 file: the two files must have the same metadata keys, the same tensor
# table (names, shapes, types) and the same weights, which the logits of both show bit for bit.
# Also: the gpt-oss layout (sinks, biases, post_attention_norm, YaRN, window) and a shape whose
# rows do not fit a plain type is refused before anything is written.
# Usage: bash tests/cli_synth_mix.sh BRISK_BINARY [SHARED_DIR]
set -u
brisk="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok()   { passes=$((passes + 1)); }
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# the sorted tensor table (name, type, shape) and metadata keys of a file
table() { "$brisk" inspect "$1" 2>/dev/null | awk '/^tensors:/{t=1;next} t&&NF>=3&&$1!="name"' | sed -E 's/ +[0-9]+ +[0-9]+$//; s/  +/ /g; s/^ //' | sort; }
keys()  { "$brisk" inspect "$1" 2>/dev/null | awk '/^metadata:/{m=1;next} /^tensors:/{m=0} m&&NF{print $1, $2, $4}' | sort; }

python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack("<20i", *[1,259,300,17,42,260,511,3,99,400,7,8,9,10,300,301,302,303,304,305]))' >"$tmp/tok.i32"

# mix SHAPE FTYPE: synth straight in FTYPE == quantize(synth F32, FTYPE)
mix() {
  local shape="$1" ft="$2" d="$tmp/$1-$2"
  mkdir -p "$d"
  "$brisk" synth --shape "$shape" --type F32 -o "$d/f32.gguf" 2>"$d/err" || { fail "$shape F32: $(cat "$d/err")"; return; }
  "$brisk" synth --shape "$shape" --type "$ft" -o "$d/mix.gguf" 2>"$d/err" || { fail "$shape $ft: $(cat "$d/err")"; return; }
  "$brisk" quantize "$d/f32.gguf" "$d/ref.gguf" "$ft" 2>"$d/err" || { fail "$shape quantize $ft: $(cat "$d/err")"; return; }
  [ "$(table "$d/mix.gguf")" = "$(table "$d/ref.gguf")" ] && [ -n "$(table "$d/mix.gguf")" ] && ok ||
    fail "$shape $ft: tensor tables differ: $(diff <(table "$d/mix.gguf") <(table "$d/ref.gguf") | head -5)"
  [ "$(keys "$d/mix.gguf")" = "$(keys "$d/ref.gguf")" ] && ok ||
    fail "$shape $ft: metadata differs: $(diff <(keys "$d/mix.gguf") <(keys "$d/ref.gguf") | head -5)"
  [ "$(stat -c %s "$d/mix.gguf")" = "$(stat -c %s "$d/ref.gguf")" ] && ok || fail "$shape $ft: sizes differ"
  "$brisk" logits -m "$d/mix.gguf" --tokens "$tmp/tok.i32" -o "$d/mix.f32" -t 1 2>"$d/err" || { fail "$shape $ft logits: $(cat "$d/err")"; return; }
  "$brisk" logits -m "$d/ref.gguf" --tokens "$tmp/tok.i32" -o "$d/ref.f32" -t 1 2>"$d/err" || { fail "$shape $ft logits: $(cat "$d/err")"; return; }
  cmp -s "$d/mix.f32" "$d/ref.f32" && ok || fail "$shape $ft: logits differ"
}
mix gpt-oss-tiny MXFP4_MOE
mix olmoe-tiny Q4_K_M
mix qwen3-tiny Q3_K_M

# the gpt-oss layout, as llama.cpp's openai-moe loader wants it
t="$(table "$tmp/gpt-oss-tiny-MXFP4_MOE/mix.gguf")"
for want in "blk.1.attn_sinks.weight F32 [4]" "blk.0.post_attention_norm.weight F32 [128]" \
            "blk.0.ffn_gate_exps.weight MXFP4 [128, 64, 8]" "blk.0.ffn_down_exps.bias F32 [128, 8]" \
            "blk.0.ffn_gate_inp.bias F32 [8]" "blk.0.attn_output.bias F32 [128]" "blk.0.attn_q.weight Q8_0 [128, 128]" \
            "output.weight Q8_0 [128, 512]"; do
  echo "$t" | grep -qF "$want" && ok || fail "gpt-oss-tiny lacks '$want'"
done
echo "$t" | grep -q "ffn_norm" && fail "gpt-oss-tiny has an ffn_norm (llama.cpp names it post_attention_norm)" || ok
k="$(keys "$tmp/gpt-oss-tiny-MXFP4_MOE/mix.gguf")"
for want in "gpt-oss.attention.sliding_window (u32) 16" "gpt-oss.rope.scaling.type (str) \"yarn\"" \
            "gpt-oss.rope.scaling.yarn_beta_fast (f32) 32" "gpt-oss.expert_used_count (u32) 3" "general.file_type (u32) 38"; do
  echo "$k" | grep -qF "$want" && ok || fail "gpt-oss-tiny metadata lacks '$want'"
done
"$brisk" run -m "$tmp/gpt-oss-tiny-MXFP4_MOE/mix.gguf" -p "hello" -n 4 --temp 0 >/dev/null 2>"$tmp/err" && ok || fail "run gpt-oss-tiny: $(cat "$tmp/err")"

# a plain type whose blocks do not fit the rows is refused before writing (gpt-oss-20b: 2880 is not 256-blocks)
"$brisk" synth --shape gpt-oss-20b --type Q4_K -o "$tmp/big.gguf" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "not whole Q4_K blocks" "$tmp/err" && [ ! -e "$tmp/big.gguf" ] && ok ||
  fail "gpt-oss-20b Q4_K: rc $rc, $(cat "$tmp/err")"
ls "$tmp" | grep -q 'big.gguf.tmp' && fail "a temporary file was left" || ok
"$brisk" synth --help 2>&1 | grep -q "MXFP4_MOE" && ok || fail "synth --help does not name the mixtures"
"$brisk" synth --help 2>&1 | grep -q "gpt-oss-20b" && ok || fail "synth --help does not list gpt-oss-20b"

# brisk bench's decode roofline counts active bytes: of each expert tensor (and per-expert bias)
# the used share (3 of 8 here), of token_embd (the output is a separate matrix) one row; the
# rest whole. Recomputed here from the tensor table brisk inspect prints.
m="$tmp/gpt-oss-tiny-MXFP4_MOE/mix.gguf"
"$brisk" inspect "$m" >"$tmp/inspect" 2>/dev/null
if "$brisk" bench -m "$m" -p 0 -n 4 -r 1 -t 1 -o json >"$tmp/bench.json" 2>"$tmp/err"; then
  python3 - "$tmp/inspect" "$tmp/bench.json" <<'PY' && ok || fail "bench active bytes: $(cat "$tmp/bench.json" | tail -14)"
import json, re, sys
rows = [l.split() for l in open(sys.argv[1]) if re.match(r"\s+(blk|token_embd|output)", l)]
active = full = 0.0
for r in rows:
    name, nbytes = r[0], int(r[-1])
    full += nbytes
    if "_exps." in name: active += nbytes * 3 / 8
    elif name == "token_embd.weight": active += nbytes / 512
    else: active += nbytes
tg = [x for x in json.load(open(sys.argv[2])) if x["n_gen"]][0]
if "bytes_per_token" in tg:   # absent when the bandwidth buffer cannot be allocated
    kv = tg["all_bytes_per_token"] - full
    assert abs(tg["bytes_per_token"] - (active + kv)) <= 1, (tg["bytes_per_token"], active, kv)
    assert tg["roofline_count"] == "active weight bytes: experts 3/8, token_embd 1 row", tg["roofline_count"]
    assert tg["roofline_ts"] > tg["roofline_all_ts"]
PY
else
  fail "bench gpt-oss-tiny: $(cat "$tmp/err")"
fi

echo "cli_synth_mix: $passes passed, $fails failed"
[ $fails -eq 0 ]
