#!/usr/bin/env bash
# scripts/peer/gen-gbnf-verdicts.sh: records tests/data/constrain/gbnf-verdicts/ (run once, by hand;
# tests/cli_constrain_gbnf.sh replays it without the peer).
#
# For each of llama.cpp's grammars in tests/data/constrain/gbnf/ it samples with brisk under the
# grammar (the bundled model, temperature 1, seeds 1, 2, 3 ...) and keeps the first $KEEP outputs
# that end by themselves (fewer than $N tokens generated: the model chose end-of-generation, which
# the constraint allows only where the grammar is complete), skipping those with fewer than
# $MIN_CONTENT non-space bytes ("{}"). Then llama.cpp's
# own grammar code judges each output and each hand-made negative control (negatives/*.txt, which
# must be refused) with scripts/peer/peer-grammar.c, linked to the peer's libllama.
#
# Writes: outputs/GRAMMAR.sSEED.txt (the generated text: stdout without the newline brisk adds),
# variants/ (edits of each output), cases.tsv (grammar, seed, prompt, sampling, n, file: what the test
# regenerates) and verdicts.txt (llama.cpp's
# line for every output and negative control).
#
# usage: scripts/peer/gen-gbnf-verdicts.sh [BRISK] [PEER_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
brisk="${1:-$root/build/brisk}"
peer="${2:-${BRISK_PEER:-$HOME/.cache/brisk-peer}}"
model="$root/models/pycode-target-f16.gguf"
vocab="$root/../shared/vocab/ggml-vocab-llama-bpe.gguf"
[ -f "$vocab" ] || vocab="/work/shared/vocab/ggml-vocab-llama-bpe.gguf"
grammars="$root/tests/data/constrain/gbnf"
data="$root/tests/data/constrain/gbnf-verdicts"
N=256 KEEP=4 MAX_SEED=400 MIN_CONTENT=6
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -o "$work/peer-grammar" "$root/scripts/peer/peer-grammar.c" \
   -I "$peer/src/include" -I "$peer/src/ggml/include" -L "$peer/bin" -lllama -Wl,-rpath,"$peer/bin"

# A prompt per grammar (brisk's -e escapes). The bundled model writes Python and ends a text
# (end-of-generation) mostly where a file ends, so the grammars that never end by themselves after
# an ordinary prompt get the end of a Python file as their prompt.
prompt_of() {
  case "$1" in
    arithmetic|chess|english) echo 'if __name__ == "__main__":\n    main()\n' ;;
    c)          echo "int main" ;;
    japanese)   echo "# 日本語" ;;
    json|json_arr) echo "data = " ;;
    list)       echo "# items:" ;;
    *)          echo "# " ;;
  esac
}
# english (a text must end on a non-space, where this model almost never stops) needs the whole
# distribution at temperature 1: brisk's default top-k/top-p/min-p cut the end-of-generation token.
sampling_of() {
  case "$1" in
    english) echo "--top-k 0 --top-p 1 --min-p 0" ;;
    *)       echo "-" ;;   # brisk's defaults ("-": bash's read folds an empty tab-separated field)
  esac
}

rm -rf "$data/outputs"; mkdir -p "$data/outputs"
printf 'grammar\tseed\tprompt\tsampling\tn\tfile\n' > "$data/cases.tsv"
for gf in "$grammars"/*.gbnf; do
  g="$(basename "$gf" .gbnf)"; p="$(prompt_of "$g")"; smp="$(sampling_of "$g")"; smp_tsv="$smp"; [ "$smp" = - ] && smp=; kept=0
  for s in $(seq 1 $MAX_SEED); do
    # shellcheck disable=SC2086
    "$brisk" run -m "$model" --grammar-file "$gf" -e -p "$p" --no-display-prompt --seed "$s" --temp 1 $smp -n $N -t 2 \
      >"$work/out" 2>"$work/err"
    got="$(sed -n 's/.*generated \([0-9]*\) tokens.*/\1/p' "$work/err")"
    [ -n "$got" ] && [ "$got" -lt $N ] || continue
    head -c -1 "$work/out" > "$work/text"           # brisk ends stdout with one newline of its own
    [ "$(tr -d ' \t\n\r' < "$work/text" | wc -c)" -ge $MIN_CONTENT ] || continue   # not just "{}"
    f="outputs/$g.s$s.txt"; cp "$work/text" "$data/$f"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$g" "$s" "$p" "$smp_tsv" "$N" "$f" >> "$data/cases.tsv"
    kept=$((kept + 1)); [ $kept -lt $KEEP ] || break
  done
  echo "$g: $kept outputs" >&2
done

# Variants of every output, for a byte-level comparison of the two implementations' verdicts
# (tests/test_constrain_gbnf.c): cut by one byte, cut in half, with a control byte inserted in the
# middle, with "}" or "\n" appended. Either verdict is possible; brisk's must equal llama.cpp's.
rm -rf "$data/variants"; mkdir -p "$data/variants"
for f in "$data"/outputs/*.txt; do
  b="$(basename "$f" .txt)"; len="$(wc -c < "$f")"; half=$((len / 2))
  head -c $((len - 1)) "$f" > "$data/variants/$b.cut1.txt"
  head -c $half "$f" > "$data/variants/$b.half.txt"
  { head -c $half "$f"; printf '\x01'; tail -c +$((half + 1)) "$f"; } > "$data/variants/$b.ctl.txt"
  { cat "$f"; printf '}'; } > "$data/variants/$b.brace.txt"
  { cat "$f"; printf '\n'; } > "$data/variants/$b.nl.txt"
done
: > "$data/verdicts.txt"
for gf in "$grammars"/*.gbnf; do
  g="$(basename "$gf" .gbnf)"
  files="$(cd "$data" && ls outputs/$g.s*.txt negatives/$g.*.txt variants/$g.s*.txt 2>/dev/null || true)"
  [ -n "$files" ] || continue
  (cd "$data" && "$work/peer-grammar" "$vocab" "$gf" $files 2>/dev/null) | sed "s/^/$g /" >> "$data/verdicts.txt"
done
cat "$data/verdicts.txt" >&2
