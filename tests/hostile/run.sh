#!/usr/bin/env bash
# The hostile-input corpus (docs/RELIABILITY.md): every *.cases file here lists
# one case per line,
#
#   OUTCOME <TAB> NAME <TAB> COMMAND
#
# OUTCOME is what the case must end in:
#   error    exit status 1 or 2 and a message on stderr
#   run      exit status 0
#   bounded  exit status 0, 1 or 2 (what matters is that it ends: no crash, no hang)
# COMMAND is run by bash with $BRISK (the binary), $BUILD (its directory, where
# the gen_model_seeds tool is), $ROOT (the source tree), $DATA (tests/data), $HOSTILE
# (tests/data/hostile), $SHARED (../shared, may be absent) and $TMP (an empty
# directory of the case's own) set, stdin from /dev/null unless it redirects,
# under `ulimit -v 4194304` (4 GiB of address space) and a 10 s timeout. A signal, a timeout or a sanitizer report fails the case
# whatever the outcome says. Lines starting with '#' and empty lines are skipped.
# Commands pass -t 1 themselves where a thread count applies.
#
# usage: tests/hostile/run.sh BRISK_BINARY [SHARED_DIR]
set -u
BRISK=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SHARED=${2:-$root/../shared}
DATA=$root/tests/data
HOSTILE=$DATA/hostile
LIMIT_S=${HOSTILE_TIMEOUT:-10}
BUILD=$(dirname "$BRISK")
ROOT=$root
export BRISK BUILD ROOT DATA HOSTILE SHARED
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 n=0
shopt -s nullglob
files=("$here"/*.cases)
if [ ${#files[@]} -eq 0 ]; then echo "hostile: no .cases files in $here"; exit 1; fi
for f in "${files[@]}"; do
  while IFS=$'\t' read -r outcome name cmd || [ -n "${outcome:-}" ]; do
    case "$outcome" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    TMP=$work/case$n
    mkdir -p "$TMP"
    export TMP
    start=$EPOCHREALTIME
    ( ulimit -v 4194304; exec timeout -s KILL "$LIMIT_S" bash -c "$cmd" ) </dev/null >"$TMP.out" 2>"$TMP.err"
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    why=""
    if [ $rc -ge 124 ]; then why="exit $rc (signal or timeout after ${secs}s)"
    elif grep -qE 'AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|runtime error:|ThreadSanitizer' "$TMP.err"; then why="sanitizer report"
    else
      case "$outcome" in
        error)   { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || why="exit $rc, expected 1 or 2"
                 [ -z "$why" ] && [ ! -s "$TMP.err" ] && why="exit $rc with nothing on stderr" ;;
        run)     [ $rc -eq 0 ] || why="exit $rc, expected 0" ;;
        bounded) [ $rc -le 2 ] || why="exit $rc, expected 0, 1 or 2" ;;
        *)       why="unknown outcome '$outcome' in $(basename "$f")" ;;
      esac
    fi
    if [ -z "$why" ]; then
      pass=$((pass + 1))
      printf 'ok    %-7s %-44s %5.2fs  %s\n' "$outcome" "$name" "$secs" "$(head -c 150 "$TMP.err" | tr '\n' ' ')"
    else
      fail=$((fail + 1))
      printf 'FAIL  %-7s %-44s %5.2fs  %s\n' "$outcome" "$name" "$secs" "$why"
      echo "      command: $cmd"
      sed 's/^/      stderr: /' "$TMP.err" | head -20
    fi
  done < "$f"
done
echo "hostile: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
