#!/usr/bin/env bash
# The public header compiles as C++ and needs only standard headers (STYLE.md rule 16).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v g++ >/dev/null; then echo "SKIP: g++ not installed"; exit 77; fi
if printf '#include "brisk.h"\nint main() { brisk_error e{}; return (int)e.status; }\n' | g++ -std=c++11 -Wall -Wextra -Werror -I "$root/include" -x c++ -fsyntax-only -; then
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"; exit 1
fi
