#!/usr/bin/env bash
# The packed-layout cache (--pack-cache / BRISK_PACK_CACHE, src/model/pack_cache.c):
#  - `brisk logits` of every golden model (tests/data/golden*, and the shared
#    golden set when present: every packed type) is byte-identical without the
#    cache, with it being written (cold) and with it mapped (warm), and the
#    notes say which happened;
#  - a stale or foreign cache is refused with a one-line reason and rewritten:
#    another model copied over the same path, the same header with other data,
#    a cache made for another kernel table (when this CPU has two), and corrupt
#    files (truncated, garbage, a flipped header byte, empty, a directory);
#    a touched model (same data, new identity) is accepted after its data hash;
#  - auto puts the file beside the model; an unwritable place is a note, not an
#    error; --pack-cache with a missing directory is a usage error (exit 2);
#  - concurrent cold starts all succeed with the same logits, leaving one
#    valid cache and no temporary files.
set -u
brisk="$1"; shared="${2:-}"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"; trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
tok="$root/tests/data/golden/tokens64.i32"

# logits M OUT [env...]: brisk logits of M into OUT, stderr in $tmp/err
logits() {
  local m="$1" out="$2"; shift 2
  env "$@" "$brisk" logits -m "$m" --tokens "$tok" -o "$out" -t 2 2>"$tmp/err"
}
note() { grep -o 'pack cache: .*' "$tmp/err" | head -1; }
expect_note() {   # what, pattern
  if grep -q "pack cache: $2" "$tmp/err"; then ok; else bad "$1: expected 'pack cache: $2', got: $(note) $(tail -1 "$tmp/err")"; fi
}

# these kernels may pack nothing (ref, NEON): then there is no cache to test
logits "$root/tests/data/golden/qwen2-tiny-Q4_0.gguf" "$tmp/probe.f32" BRISK_PACK_CACHE="$tmp"
if grep -q 'pack cache: not used: the .* kernels pack none' "$tmp/err"; then echo "SKIP: $(note)"; exit 77; fi
rm -f "$tmp"/*.brisk-pack

# ---- every golden model: off, cold, warm --------------------------------------------
dirs=("$root"/tests/data/golden*)
[ -n "$shared" ] && [ -d "$shared/golden" ] && dirs+=("$shared/golden")
n=0 used=0
for dir in "${dirs[@]}"; do
  tok="$dir/tokens64.i32"
  [ -f "$tok" ] || continue
  for m in "$dir"/*.gguf; do
    [ -f "$m" ] || continue
    s=$(basename "$m" .gguf)
    c="$tmp/cache-$n"; mkdir -p "$c"
    if ! logits "$m" "$tmp/off.f32" BRISK_PACK_CACHE=off; then bad "$s: logits without the cache failed: $(tail -1 "$tmp/err")"; continue; fi
    grep -q 'pack cache' "$tmp/err" && bad "$s: a note with the cache off: $(note)"
    logits "$m" "$tmp/cold.f32" BRISK_PACK_CACHE="$c" || { bad "$s: cold: $(tail -1 "$tmp/err")"; continue; }
    cold=$(note)
    logits "$m" "$tmp/warm.f32" BRISK_PACK_CACHE="$c" || { bad "$s: warm: $(tail -1 "$tmp/err")"; continue; }
    warm=$(note)
    case "$cold" in
      "pack cache: wrote "*)
        case "$warm" in "pack cache: used "*) ok; used=$((used + 1)) ;; *) bad "$s: second load did not use the cache: $warm" ;; esac ;;
      "pack cache: not used: "*) ok ;;   # nothing of this model is packed by these kernels
      *) bad "$s: first load: unexpected note '$cold'" ;;
    esac
    if cmp -s "$tmp/off.f32" "$tmp/cold.f32" && cmp -s "$tmp/off.f32" "$tmp/warm.f32" && [ -s "$tmp/off.f32" ]; then ok
    else bad "$s: logits differ with the pack cache (cold or warm) from without it"; fi
    n=$((n + 1))
  done
done
[ "$n" -gt 0 ] && [ "$used" -gt 0 ] || bad "no golden model was loaded from a pack cache ($n models, $used used)"
echo "$n models: logits with the pack cache (written, then mapped) compared with the repacked ones; $used used a cache"

# ---- refusals and rewrites on one model ----------------------------------------------
# 16 token ids below every test model's vocabulary, so one file serves both models below
tok="$tmp/tok16.i32"
for i in $(seq 1 16); do printf "\\x$(printf '%02x' "$i")\\x00\\x00\\x00"; done >"$tok"
[ "$(stat -c %s "$tok")" = 64 ] || bad "could not write the token file"
m0="$root/tests/data/golden/qwen2-tiny-Q4_0.gguf"
m1=$(ls "$root"/tests/data/golden-extra/*Q4_K_M.gguf 2>/dev/null | head -1)
d="$tmp/auto"; mkdir -p "$d"; m="$d/model.gguf"
cp "$m0" "$m"
logits "$m0" "$tmp/ref0.f32" BRISK_PACK_CACHE=off
"$brisk" logits -m "$m" --tokens "$tok" -o "$tmp/a.f32" -t 2 --pack-cache auto 2>"$tmp/err"
expect_note "auto, cold" "wrote $m\.[a-z0-9-]*\.brisk-pack"
cache=$(ls "$d"/model.gguf.*.brisk-pack 2>/dev/null | head -1)
[ -n "$cache" ] && [ -s "$cache" ] && ok || bad "auto: no cache file beside the model"
isa=${cache##*/model.gguf.}; isa=${isa%.brisk-pack}
check_same() { if cmp -s "$1" "$2"; then ok; else bad "$3: logits differ"; fi; }
check_same "$tmp/ref0.f32" "$tmp/a.f32" "auto, cold"

# refused, repacked and rewritten; then used again
refused_then_used() {   # what, reason pattern, reference logits
  logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto || { bad "$1: logits failed: $(tail -1 "$tmp/err")"; return; }
  expect_note "$1" "$cache refused ($2.*); repacked and rewrote it"
  [ "$(grep -c 'pack cache' "$tmp/err")" = 1 ] && ok || bad "$1: more than one line about the cache"
  check_same "$3" "$tmp/r.f32" "$1"
  logits "$m" "$tmp/r2.f32" BRISK_PACK_CACHE=auto
  expect_note "$1, rewritten" "used $cache"
  check_same "$3" "$tmp/r2.f32" "$1, rewritten"
}
head -c 1000 "$cache" >"$tmp/x" && cat "$tmp/x" >"$cache";              refused_then_used "truncated cache" "is 1000 bytes but its header says" "$tmp/ref0.f32"
head -c 300000 /dev/urandom >"$cache";                                  refused_then_used "garbage cache" "is not a brisk pack cache" "$tmp/ref0.f32"
printf '\x7f' | dd of="$cache" bs=1 seek=100 conv=notrunc 2>/dev/null;  refused_then_used "flipped header byte" "header checksum mismatch" "$tmp/ref0.f32"
: >"$cache";                                                            refused_then_used "empty cache" "is 0 bytes, shorter than" "$tmp/ref0.f32"
rm -f "$cache"; mkdir "$cache"
logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto && check_same "$tmp/ref0.f32" "$tmp/r.f32" "a directory as the cache"
expect_note "a directory as the cache" "$cache refused (is a directory, not a regular file); repacked (rewriting it failed"
rmdir "$cache"
logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto; expect_note "after the directory" "wrote $cache"

# the model touched: same data, new identity: used after hashing, then plain
touch -d '2001-01-01' "$m"
logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto; expect_note "touched model" "used $cache.*after hashing the model's data"
check_same "$tmp/ref0.f32" "$tmp/r.f32" "touched model"
logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto; expect_note "touched model, again" "used $cache ([0-9.]* MiB)$"

# another model copied over the same path
if [ -n "$m1" ]; then
  logits "$m1" "$tmp/ref1.f32" BRISK_PACK_CACHE=off
  cp "$m1" "$m"
  refused_then_used "another model over it" "made for another model file" "$tmp/ref1.f32"
  cp "$m0" "$m"; logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto
fi

# the same header and size, other data (the last byte of the tensor data changed)
size=$(stat -c %s "$m")
orig=$(od -An -tu1 -j $((size - 1)) -N1 "$m" | tr -d ' ')
printf "\\$(printf '%03o' $(( (orig + 1) % 256 )))" | dd of="$m" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
logits "$m" "$tmp/ref2.f32" BRISK_PACK_CACHE=off; rc_off=$?
logits "$m" "$tmp/r.f32" BRISK_PACK_CACHE=auto; rc_on=$?
expect_note "same header, other data" "$cache refused (made for another model file (same header, other data"
[ "$rc_off" = "$rc_on" ] && ok || bad "same header, other data: exit $rc_on with the cache, $rc_off without"
[ "$rc_off" != 0 ] || check_same "$tmp/ref2.f32" "$tmp/r.f32" "same header, other data"
cp "$m0" "$m"

# a cache made for another kernel table (this CPU has two with packed GEMM)
if [ "$isa" != avx2 ] && BRISK_ISA=avx2 "$brisk" logits -m "$m" --tokens "$tok" -o "$tmp/r.f32" --pack-cache "$tmp" 2>"$tmp/err"; then
  other=$(ls "$tmp"/model.gguf.*.avx2.brisk-pack 2>/dev/null | head -1)
  if [ -n "$other" ]; then
    cp "$other" "$cache"
    refused_then_used "another kernel table's cache" "made for the avx2 kernels" "$tmp/ref0.f32"
  else bad "BRISK_ISA=avx2 --pack-cache DIR wrote no DIR/model.gguf.HASH.avx2.brisk-pack"; fi
else
  echo "skip: no second packed-GEMM table on this CPU (the cache is $isa's)"
fi

# ---- concurrent cold starts ----------------------------------------------------------
c="$tmp/concurrent"; mkdir -p "$c"
pids=()
for i in 1 2 3 4; do
  BRISK_PACK_CACHE="$c" "$brisk" logits -m "$m0" --tokens "$tok" -o "$tmp/cc$i.f32" -t 1 2>"$tmp/cc$i.err" &
  pids+=($!)
done
for i in 1 2 3 4; do
  if wait "${pids[$((i - 1))]}"; then check_same "$tmp/ref0.f32" "$tmp/cc$i.f32" "concurrent writer $i"
  else bad "concurrent writer $i failed: $(tail -1 "$tmp/cc$i.err")"; fi
done
[ "$(ls -A "$c" | wc -l)" = 1 ] && ok || bad "concurrent writers left: $(ls -A "$c" | tr '\n' ' ')"
logits "$m0" "$tmp/r.f32" BRISK_PACK_CACHE="$c"; expect_note "after concurrent writers" "used $c/"

# ---- where it cannot go ---------------------------------------------------------------
logits "$m0" "$tmp/r.f32" BRISK_PACK_CACHE="$tmp/no/such/dir" && check_same "$tmp/ref0.f32" "$tmp/r.f32" "unwritable cache directory"
expect_note "unwritable cache directory" "cannot write $tmp/no/such/dir/.*; repacked without it"
"$brisk" logits -m "$m0" --tokens "$tok" -o "$tmp/r.f32" --pack-cache "$tmp/no/such/dir" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q -- "--pack-cache $tmp/no/such/dir: not a directory" "$tmp/err" && ok || bad "--pack-cache missing dir: exit $rc: $(tail -1 "$tmp/err")"
"$brisk" run -m "$m" -p "Hello" -n 4 --temp 0 --pack-cache auto >/dev/null 2>"$tmp/err" && ok || bad "run --pack-cache auto failed: $(tail -1 "$tmp/err")"
grep -q "brisk run: pack cache: " "$tmp/err" && ok || bad "run printed no pack cache note"
BRISK_ISA=ref "$brisk" logits -m "$m0" --tokens "$tok" -o "$tmp/r.f32" --pack-cache "$c" 2>"$tmp/err"
expect_note "ref kernels" "not used: .*ref"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
