#!/usr/bin/env bash
# llama.cpp's own .gbnf grammars (tests/data/constrain/gbnf/), checked against llama.cpp's own grammar
# code. The outputs brisk sampled under each grammar, and llama.cpp's verdict on each, were recorded
# once (scripts/peer/gen-gbnf-verdicts.sh; tests/data/constrain/gbnf-verdicts/README.md). Here:
#   1. every recorded case is regenerated with brisk and must be byte-identical to the recorded
#      output, and must end by itself (end-of-generation before the token limit);
#   2. every recorded output has llama.cpp's verdict "accept" (a complete sentence of the grammar),
#      and every negative control "reject" (so the recorded checker did check);
#   3. every grammar has at least one output, and every output and negative control has a verdict;
#   4. when the peer (llama.cpp built by ../shared/tools/peer/setup.sh) is present, the verdicts are
#      recomputed with scripts/peer/peer-grammar.c and must equal the recorded ones (skipped, with a
#      note, without it: the recorded verdicts are the test data).
set -u
brisk="$1"
shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/pycode-target-f16.gguf"
grammars="$root/tests/data/constrain/gbnf"
data="$root/tests/data/constrain/gbnf-verdicts"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp" 2>/dev/null' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $*"; }
[ -f "$model" ] || { echo "SKIP: $model absent"; exit 77; }
[ -f "$data/cases.tsv" ] && [ -f "$data/verdicts.txt" ] || { echo "FAIL: $data is incomplete"; exit 1; }

# 1. regenerate
n_cases=0
while IFS=$'\t' read -r g seed prompt sampling n file; do
  [ "$g" = grammar ] && continue
  n_cases=$((n_cases+1)); [ "$sampling" = - ] && sampling=
  # shellcheck disable=SC2086
  "$brisk" run -m "$model" --grammar-file "$grammars/$g.gbnf" -e -p "$prompt" --no-display-prompt \
    --seed "$seed" --temp 1 $sampling -n "$n" -t 2 >"$tmp/out" 2>"$tmp/err"
  rc=$?
  got="$(sed -n 's/.*generated \([0-9]*\) tokens.*/\1/p' "$tmp/err")"
  head -c -1 "$tmp/out" >"$tmp/text"     # brisk ends stdout with one newline of its own
  if [ $rc -ne 0 ]; then bad "$file: brisk exited $rc: $(tail -2 "$tmp/err")"
  elif ! cmp -s "$tmp/text" "$data/$file"; then bad "$file: brisk's output differs from the recorded one: $(cmp "$tmp/text" "$data/$file" 2>&1)"
  elif [ -z "$got" ] || [ "$got" -ge "$n" ]; then bad "$file: did not end by itself ($got of $n tokens)"
  else ok; fi
done < "$data/cases.tsv"
[ $n_cases -ge 8 ] && ok || bad "only $n_cases recorded cases"

# 2-3. the recorded verdicts
for gf in "$grammars"/*.gbnf; do
  g="$(basename "$gf" .gbnf)"
  cut -f1 "$data/cases.tsv" | grep -qx "$g" && ok || bad "grammar $g has no recorded output"
done
for f in $(cut -f6 "$data/cases.tsv" | tail -n +2); do
  v="$(awk -v f="$f" '$3 == f { print $2 }' "$data/verdicts.txt")"
  [ "$v" = accept ] && ok || bad "$f: llama.cpp's recorded verdict is '${v:-none}', not accept"
done
n_neg=0
for p in "$data"/negatives/*.txt; do
  f="negatives/$(basename "$p")"; n_neg=$((n_neg+1))
  v="$(awk -v f="$f" '$3 == f { print $2 }' "$data/verdicts.txt")"
  [ "$v" = reject ] && ok || bad "$f: llama.cpp's recorded verdict is '${v:-none}', not reject"
done
[ $n_neg -ge 8 ] && ok || bad "only $n_neg negative controls"
awk '$2 != "accept" && $2 != "reject" { bad = 1 } END { exit bad }' "$data/verdicts.txt" && ok ||
  bad "verdicts.txt has a line that is neither accept nor reject"

# 4. the live peer, when present
peer="${BRISK_PEER:-$HOME/.cache/brisk-peer}"
vocab="$shared/vocab/ggml-vocab-llama-bpe.gguf"
if [ -f "$peer/bin/libllama.so" ] && [ -f "$peer/src/include/llama.h" ] && [ -f "$vocab" ] && command -v cc >/dev/null &&
   cc -O1 -o "$tmp/peer-grammar" "$root/scripts/peer/peer-grammar.c" -I "$peer/src/include" -I "$peer/src/ggml/include" \
      -L "$peer/bin" -lllama -Wl,-rpath,"$peer/bin" 2>"$tmp/ccerr"; then
  : >"$tmp/verdicts"
  for gf in "$grammars"/*.gbnf; do
    g="$(basename "$gf" .gbnf)"
    files="$(cd "$data" && ls outputs/$g.s*.txt negatives/$g.*.txt variants/$g.s*.txt 2>/dev/null)"
    [ -n "$files" ] || continue
    # shellcheck disable=SC2086
    (cd "$data" && "$tmp/peer-grammar" "$vocab" "$gf" $files 2>/dev/null) | sed "s/^/$g /" >>"$tmp/verdicts"
  done
  diff "$data/verdicts.txt" "$tmp/verdicts" >"$tmp/diff" && ok || bad "llama.cpp's verdicts now differ from the recorded ones: $(head -5 "$tmp/diff")"
else
  echo "note: the peer (llama.cpp in $peer) or the Llama 3 vocabulary is absent: recorded verdicts only"
fi

echo "cli_constrain_gbnf: $pass passed, $fail failed ($n_cases regenerated outputs, $n_neg negative controls)"
[ $fail -eq 0 ]
