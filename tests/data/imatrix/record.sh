#!/usr/bin/env bash
# record.sh BRISK_BINARY [PEER_BIN_DIR]: llama-quantize --imatrix's output hashes for the
# cases of tests/cli_quantize_imatrix.sh, written to cases.sha256 beside this script.
# The imatrices here were made with gen.py (kt.*: for `brisk synth --shape qwen3moe-k-tiny
# --type F32`; py.*: for models/pycode-target-f16.gguf, blk.1.ffn_up.weight left out, no chunk
# count). Paths are given relative to this folder: quantize.imatrix.file records them.
set -euo pipefail
brisk="$(realpath "$1")"
peer="${2:-$HOME/.cache/brisk-peer/bin}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$brisk" synth --shape qwen3moe-k-tiny --type F32 -o "$tmp/kt-f32.gguf" 2>/dev/null
cd "$here"
: > "$tmp/cases"
while read -r tag model im type extra; do
  [ -z "$tag" ] || [ "${tag#\#}" != "$tag" ] && continue
  case "$model" in kt) m="$tmp/kt-f32.gguf" ;; py) m="$root/models/pycode-target-f16.gguf" ;; esac
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH="$peer" "$peer/llama-quantize" ${extra//,/ } --imatrix "$im" "$m" "$tmp/out.gguf" "$type" 1 >/dev/null 2>&1
  echo "$(sha256sum < "$tmp/out.gguf" | cut -d' ' -f1) $tag" >> "$tmp/cases"
done < cases.txt
mv "$tmp/cases" cases.sha256
echo "recorded $(wc -l < cases.sha256) cases"
