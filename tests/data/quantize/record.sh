#!/bin/bash
# record.sh [BUILD_DIR]: run llama-quantize on every case of cases.txt and write
# cases.sha256 (the hashes test_quantize checks brisk's output against), and on
# llama.cpp's own test-llama-archs fixtures, writing fixtures.sha256 (what
# tests/cli_quantize.sh compares live when the peer is present).
# CASES_ONLY=1 skips the fixtures. Needs the peer (~/.cache/brisk-peer, or $BRISK_PEER) and a built test_quantize.
set -euo pipefail
set -f   # patterns in cases.txt are regexes, never globs
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-$root/build}
peer=${BRISK_PEER:-$HOME/.cache/brisk-peer}
L=$peer/bin/llama-quantize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/test_quantize" --write-inputs "$tmp"
out=$tmp/cases.sha256
: > "$out"
while read -r tag input ftype args; do
    [[ -z "$tag" || "$tag" == \#* ]] && continue
    case $input in
        pycode) in=$root/models/pycode-target-f16.gguf ;;
        @*) in=$tmp/${input#@}.out.gguf ;;
        *) in=$tmp/$input.gguf ;;
    esac
    # shellcheck disable=SC2086
    if ! "$L" $args "$in" "$tmp/$tag.out.gguf" "$ftype" 2 > "$tmp/$tag.log" 2>&1; then
        echo "record.sh: llama-quantize failed on case $tag:" >&2
        tail -5 "$tmp/$tag.log" >&2
        exit 1
    fi
    echo "$(sha256sum < "$tmp/$tag.out.gguf" | cut -d' ' -f1) $tag" >> "$out"
done < "$here/cases.txt"
{
    echo "# sha256 of llama-quantize's output per case of cases.txt (tests/data/quantize/record.sh)"
    echo "# peer: $(cat "$peer/VERSION" 2>/dev/null || echo unknown)"
    cat "$out"
} > "$here/cases.sha256"
echo "record.sh: $(grep -vc '^#' "$here/cases.sha256") cases recorded"
[ -z "${CASES_ONLY:-}" ] || exit 0

# test-llama-archs fixtures (seed 1, spread 0.4), F32 as written and their F16/BF16 forms
set +f
archs=${ARCHS:-"llama qwen2 qwen3 gemma gemma2 gemma3 phi3 mistral3 smollm3 olmo2 granite glm4 exaone4 starcoder2 qwen2moe qwen3moe gpt-oss olmoe granitemoe glm4moe deepseek2"}
types="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE"
fx=$tmp/fixtures
mkdir -p "$fx"
fout=$tmp/fixtures.sha256
: > "$fout"
for a in $archs; do
    "$peer/bin/test-llama-archs" -a "^$a\$" -s 1 -d 0.4 -o "$fx" > /dev/null 2>&1
done
for f in "$fx"/*.gguf; do
    b=$(basename "$f" .gguf)
    echo "$(sha256sum < "$f" | cut -d' ' -f1) input $b-F32" >> "$fout"
    for form in F16 BF16; do
        "$L" "$f" "$fx/$b-$form.in" $form 2 > /dev/null 2>&1
    done
    for t in $types; do
        for src in "$f:F32" "$fx/$b-F16.in:F16" "$fx/$b-BF16.in:BF16"; do
            "$L" "${src%:*}" "$tmp/q.gguf" "$t" 2 > /dev/null 2>&1
            echo "$(sha256sum < "$tmp/q.gguf" | cut -d' ' -f1) $b-${src##*:} $t" >> "$fout"
        done
    done
done
{
    echo "# sha256 of llama-quantize's output on test-llama-archs -s 1 -d 0.4 fixtures (record.sh); 'input' lines: the fixture"
    echo "# peer: $(cat "$peer/VERSION" 2>/dev/null || echo unknown)"
    cat "$fout"
} > "$here/fixtures.sha256"
echo "record.sh: $(grep -vc '^#' "$here/fixtures.sha256") fixture hashes recorded"
