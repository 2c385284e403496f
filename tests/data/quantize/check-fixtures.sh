#!/bin/bash
# check-fixtures.sh BRISK_BINARY: regenerate the test-llama-archs fixtures of
# fixtures.sha256 (needs only the peer's test-llama-archs, not llama-quantize),
# quantize each with brisk (its F16/BF16 forms made by brisk too) and check
# every output against llama-quantize's recorded hash.
set -uo pipefail
brisk=$1
here=$(cd "$(dirname "$0")" && pwd)
peer=${BRISK_PEER:-$HOME/.cache/brisk-peer}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0; n=0
for a in $(grep ' input ' "$here/fixtures.sha256" | awk '{print $3}' | sed 's/-\(dense\|moe\)-F32$//' | sort -u); do
    "$peer/bin/test-llama-archs" -a "^$a\$" -s 1 -d 0.4 -o "$tmp" > /dev/null 2>&1
done
while read -r want what type; do
    [[ "$want" == \#* ]] && continue
    if [ "$what" = input ]; then
        b=${type%-F32}
        [ "$(sha256sum < "$tmp/$b.gguf" | cut -d' ' -f1)" = "$want" ] || { echo "fixture $b differs from the recorded one"; fails=$((fails+1)); }
        "$brisk" quantize "$tmp/$b.gguf" "$tmp/$b-F16.in" F16 2> /dev/null
        "$brisk" quantize "$tmp/$b.gguf" "$tmp/$b-BF16.in" BF16 2> /dev/null
        continue
    fi
    form=${what##*-}; b=${what%-*}
    in=$tmp/$b.gguf; [ "$form" = F32 ] || in=$tmp/$b-$form.in
    "$brisk" quantize "$in" "$tmp/q.gguf" "$type" 2> /dev/null
    if [ "$(sha256sum < "$tmp/q.gguf" | cut -d' ' -f1)" = "$want" ]; then n=$((n+1)); else echo "DIFF $what $type"; fails=$((fails+1)); fi
done < "$here/fixtures.sha256"
echo "check-fixtures: $n equal to llama-quantize's, $fails different"
[ $fails -eq 0 ]
