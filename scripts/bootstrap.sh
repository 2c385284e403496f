#!/usr/bin/env bash
# Install the Debian packages that building and testing brisk needs.
# Idempotent: does nothing when everything is present. Uses sudo only when not root.
#
# Why each package:
#   build-essential cmake   the C11 toolchain and the CMake/CTest build
#   clang libclang-rt-14-dev  libFuzzer targets (make test runs them) and its sanitizer runtimes
#   libpcre2-dev            Unicode-property regexes for BPE pre-tokenizers (exact \p{L} etc.)
#   libjansson-dev          JSON for chat messages and template variables
#   libmicrohttpd-dev       HTTP for `brisk serve` (event-driven connections, suspend/resume streaming);
#                           without it everything but serve builds
#   curl                    tests/cli_serve.sh drives the server with it
# and, for the serve tests that need a browser or promtool, best effort (those tests skip without them):
#   chromium                tests/cli_serve_browser.sh drives the web chat page in it (headless,
#                           through playwright-core's executablePath; the tests install the pinned
#                           npm packages they use, openai and playwright-core, under the build tree)
#   prometheus              promtool, which checks the /metrics text
# and, for `make test-aarch64` (the NEON kernels under emulation), best effort:
#   gcc-aarch64-linux-gnu   the cross compiler
#   qemu-user               qemu-aarch64, which runs the aarch64 tests
#   libpcre2-dev:arm64 libjansson-dev:arm64   the two libraries for the target (dpkg multiarch)
# When the aarch64 set cannot be installed, bootstrap says so and succeeds:
# make test-aarch64 then prints a skip message.
set -euo pipefail
pkgs=(build-essential cmake clang libclang-rt-14-dev libpcre2-dev libjansson-dev libmicrohttpd-dev curl)
cross_pkgs=(gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libjansson-dev:arm64)
serve_test_pkgs=(chromium prometheus)

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${pkgs[@]}")
mapfile -t cross_missing < <(missing_of "${cross_pkgs[@]}")
mapfile -t serve_test_missing < <(missing_of "${serve_test_pkgs[@]}")
[ ${#missing[@]} -eq 0 ] && [ ${#cross_missing[@]} -eq 0 ] && [ ${#serve_test_missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#serve_test_missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${serve_test_missing[*]} (for the browser and /metrics tests of brisk serve)"
  if ! { [ ${#missing[@]} -gt 0 ] || $sudo apt-get update -qq; } ||
     ! $sudo apt-get install -y -qq --no-install-recommends "${serve_test_missing[@]}" >/dev/null; then
    echo "bootstrap: WARNING: could not install ${serve_test_missing[*]}; the tests that need them will be skipped" >&2
  fi
fi
if [ ${#cross_missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${cross_missing[*]} (for make test-aarch64)"
  if { dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64; } &&
     $sudo apt-get update -qq &&
     $sudo apt-get install -y -qq --no-install-recommends "${cross_missing[@]}" >/dev/null; then
    :
  else
    echo "bootstrap: WARNING: could not install the aarch64 packages; make test-aarch64 will be skipped" >&2
  fi
fi
