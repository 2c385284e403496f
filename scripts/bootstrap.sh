#!/usr/bin/env bash
# Install the Debian packages that building and testing brisk needs.
# Idempotent: does nothing when everything is present. Uses sudo only when not root.
#
# Why each package:
#   build-essential cmake   the C11 toolchain and the CMake/CTest build
#   clang libclang-rt-14-dev  libFuzzer targets (make test runs them) and its sanitizer runtimes
#   libpcre2-dev            Unicode-property regexes for BPE pre-tokenizers (exact \p{L} etc.)
#   libjansson-dev          JSON for chat messages and template variables
set -euo pipefail
pkgs=(build-essential cmake clang libclang-rt-14-dev libpcre2-dev libjansson-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
