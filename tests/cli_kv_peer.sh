#!/usr/bin/env bash
# perplexity's KL-divergence files crossed with the real llama-perplexity
# (~/.cache/brisk-peer; skipped, exit 77, when it is absent), on
# shared/models/data/val.txt at -c 128, 4 chunks:
#   - llama-perplexity writes the F16 base, brisk reads it: brisk's F16 is
#     within 1e-4 KL of llama.cpp's logits;
#   - brisk writes the base, llama-perplexity reads it (F16: within 1e-4), and
#     both engines' q8_0 K+V KL against it agree within a factor of 3 and stay
#     below 1e-2 (the same quantizer; the kernels' arithmetic differs).
set -u
brisk="$1"; shared="$2"
peer="${BRISK_PEER:-$HOME/.cache/brisk-peer}/bin"
val="$shared/models/data/val.txt"
model="$(cd "$(dirname "$0")" && pwd)/../models/pycode-target-f16.gguf"
if [ ! -x "$peer/llama-perplexity" ]; then echo "SKIP: llama-perplexity not built at $peer"; exit 77; fi
if [ ! -f "$val" ]; then echo "SKIP: $val is absent"; exit 77; fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
# llama-perplexity prints through an asynchronous log whose tail is now and then lost at exit
# (exit status 0, the closing block missing): such a run is repeated, up to five times. The
# closing block is "Final estimate" (writing a base) or "Mean    KLD:" (reading one); "Same top p"
# alone is no proof, since the per-chunk table's header has it too.
lp() {
  local out i
  for i in 1 2 3 4 5; do
    out="$(LD_LIBRARY_PATH="$peer" "$peer/llama-perplexity" -m "$model" -t 2 -fa on "$@" 2>&1)"
    if printf '%s\n' "$out" | grep -qE '(Final estimate|^Mean +KLD:)'; then break; fi
  done
  printf '%s\n' "$out"
}
bp() { "$brisk" perplexity -m "$model" -t 2 "$@" 2>/dev/null; }
mean_kld() { sed -n 's/^.*Mean    KLD: *\(-\{0,1\}[0-9.]*\).*/\1/p'; }
check() { if awk "BEGIN { exit !($1) }" 2>/dev/null; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }

lp -f "$val" -c 128 --chunks 4 --kl-divergence-base "$tmp/peer.kld" >/dev/null
bp -f "$val" -c 128 --chunks 4 --kl-divergence-base "$tmp/brisk.kld" >/dev/null
a="$(bp -f "$val" --kl-divergence-base "$tmp/peer.kld" --kl-divergence | mean_kld)"
lp --kl-divergence-base "$tmp/brisk.kld" --kl-divergence > "$tmp/b.out"
b="$(mean_kld < "$tmp/b.out")"
bq="$(bp --kl-divergence-base "$tmp/brisk.kld" --kl-divergence -ctk q8_0 -ctv q8_0 | mean_kld)"
lp --kl-divergence-base "$tmp/brisk.kld" --kl-divergence -ctk q8_0 -ctv q8_0 > "$tmp/pq.out"
pq="$(mean_kld < "$tmp/pq.out")"
echo "brisk reads llama's F16 base: KLD $a; llama reads brisk's: $b; q8_0 K+V vs brisk's base: brisk $bq, llama.cpp $pq"
check "\"$a\" != \"\" && $a < 1e-4" "brisk F16 against llama-perplexity's base: '$a'"
check "\"$b\" != \"\" && $b < 1e-4" "llama-perplexity F16 against brisk's base: '$b' ($(tail -c 300 "$tmp/b.out"))"
check "\"$bq\" != \"\" && \"$pq\" != \"\" && $bq < 1e-2 && $pq < 1e-2 && $bq < 3 * $pq && $pq < 3 * $bq" "q8_0 KLD brisk '$bq' vs llama.cpp '$pq' ($(tail -c 300 "$tmp/pq.out"))"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
