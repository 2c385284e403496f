#!/usr/bin/env bash
# brisk bench -d (llama-bench's --n-depth): the tests run after N tokens of
# context and say so (JSON n_depth, the markdown test name "tg8 @ d64", the
# roofline's bytes per token growing by the KV rows of the depth); bad depths
# are refused naming the value. No timing is asserted.
set -u
brisk="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/tests/data/golden/qwen2-tiny-Q4_0.gguf"   # qwen2.context_length = 2048
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# markdown: one pp and one tg row per depth, in order, llama-bench's names
if "$brisk" bench -m "$model" -p 16 -n 8 -d 0,64,200 -r 2 -t 2 --no-roofline >"$tmp/md" 2>"$tmp/err"; then
  got=$(awk -F'|' 'NR > 2 { gsub(/^ +| +$/, "", $7); print $7 }' "$tmp/md" | tr '\n' ';')
  [ "$got" = "pp16;tg8;pp16 @ d64;tg8 @ d64;pp16 @ d200;tg8 @ d200;" ] && ok || bad "markdown tests: '$got'"
  grep -q "filling the context to depth 64 (untimed)" "$tmp/err" && grep -q "to depth 200" "$tmp/err" && ok || bad "no fill message: $(cat "$tmp/err")"
else
  bad "bench -d 0,64,200 failed: $(tail -1 "$tmp/err")"
fi

# JSON: n_depth per result; the roofline's bytes per token counts the depth's K and V rows
# (qwen2-tiny: 2 x layers x kv heads x head dim x 2 bytes per token)
if "$brisk" bench -m "$model" -p 8 -n 4 -d 0,100 -r 1 -t 1 -o json >"$tmp/json" 2>"$tmp/err"; then
  python3 - "$tmp/json" <<'EOF' && ok || bad "JSON: $(cat "$tmp/json" | head -c 600)"
import json, sys
rs = json.load(open(sys.argv[1]))
got = [(r["n_prompt"], r["n_gen"], r["n_depth"]) for r in rs]
assert got == [(8, 0, 0), (0, 4, 0), (8, 0, 100), (0, 4, 100)], got
tg = [r for r in rs if r["n_gen"]]
if all("bytes_per_token" in r for r in tg):   # absent when the bandwidth buffer cannot be allocated
    d0, d100 = tg[0]["bytes_per_token"], tg[1]["bytes_per_token"]
    assert d100 > d0 and (d100 - d0) % 100 == 0, (d0, d100)
assert all(r["avg_ts"] > 0 for r in rs)
EOF
else
  bad "bench -o json -d 0,100 failed: $(tail -1 "$tmp/err")"
fi

# the roofline reads between tg tokens too (one read every 16 tokens, off the clock): 40
# tokens give two reads per repetition; the strict read is the best of all, and each
# repetition's own percentage is its t/s against the best read taken during it
if "$brisk" bench -m "$model" -p 0 -n 40 -r 2 -t 1 -o json >"$tmp/json" 2>"$tmp/err"; then
  python3 - "$tmp/json" <<'EOF' && ok || bad "reads during tg: $(cat "$tmp/json" | head -c 900)"
import json, sys
tg = json.load(open(sys.argv[1]))[0]
if "bytes_per_token" in tg:   # absent when the bandwidth buffer cannot be allocated
    during, pct = tg["read_bandwidth_during_gbs"], tg["roofline_during_pct"]
    assert len(during) == 2 and len(pct) == 2 and all(d > 0 for d in during), tg
    assert tg["read_bandwidth_gbs"] >= max(during) - 1e-3, tg
    for d, p, ts in zip(during, pct, tg["samples_ts"]):
        want = 100 * ts * tg["bytes_per_token"] / (d * 1e9)
        assert abs(p - want) <= 1e-3 * want + 0.01, (p, want)
EOF
else
  bad "bench -n 40 -r 2 -o json failed: $(tail -1 "$tmp/err")"
fi
"$brisk" bench -m "$model" -p 0 -n 40 -r 1 -t 1 --no-roofline -o json >"$tmp/json" 2>"$tmp/err" &&
  ! grep -q read_bandwidth "$tmp/json" && ok || bad "--no-roofline still reads: $(head -c 300 "$tmp/json")"

# bad depths: usage errors (2) before loading, naming the value
expect() {   # name, exit status, message pattern, -d value
  "$brisk" bench -m "$model" -p 8 -n 4 -r 1 --no-roofline -d "$4" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -eq "$2" ] && grep -q -- "$3" "$tmp/err"; then ok; else bad "$1: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect "negative" 2 "-d: -1 is out of range" -1
expect "not a number" 2 "-d: 'x12' is not an integer" x12
expect "empty element" 2 "-d: an empty value in '16,,32'" 16,,32
expect "trailing comma" 2 "-d: an empty value in '16,'" 16,
expect "empty" 2 "-d: an empty value in ''" ""
expect "one bad element" 2 "-d: -5 is out of range" 0,-5
# over the context: 2040 + the longer test (8 prompt tokens) > 2048 is refused (runtime error, after loading)
expect "over the training context" 1 "-d 2041 + -p 8 = 2049 tokens is over .*training context (2048 tokens)" 0,2041
"$brisk" bench -m "$model" -p 8 -n 4 -r 1 --no-roofline -d 2040 >"$tmp/out" 2>"$tmp/err" && grep -q "pp8 @ d2040" "$tmp/out" && ok \
  || bad "-d 2040 + 8 = 2048 (the whole context) refused: $(tail -1 "$tmp/err")"

# --kv-policy: runs after a fill past the budget; the roofline counts the budget's slots, not the depth's:
# against the same bench without a policy, bytes per token differ by exactly (300 + 8/2 - 128) KV rows
if "$brisk" bench -m "$model" -p 16 -n 8 -r 2 -d 300 --kv-policy snapkv --kv-budget 128 --kv-window 16 -o json >"$tmp/pol" 2>"$tmp/err" &&
   "$brisk" bench -m "$model" -p 16 -n 8 -r 2 -d 0,300 -o json >"$tmp/full" 2>>"$tmp/err" &&
   python3 - "$tmp/pol" "$tmp/full" "$model" <<'EOF2'
import json, struct, sys
pol, full = (json.load(open(f)) for f in sys.argv[1:3])
assert [r["n_depth"] for r in pol] == [300, 300] and all(r["avg_ts"] > 0 for r in pol), pol
tg_pol = [r for r in pol if r["n_gen"] > 0][0]
tg0, tg_full = [r for r in full if r["n_gen"] > 0]
kv_row = (tg_full["bytes_per_token"] - tg0["bytes_per_token"]) / 300   # one slot's K and V in every layer
assert kv_row > 0 and kv_row == int(kv_row), kv_row
assert tg_full["bytes_per_token"] - tg_pol["bytes_per_token"] == (300 + 4 - 128) * kv_row, (tg_full["bytes_per_token"], tg_pol["bytes_per_token"])
EOF2
then ok; else bad "bench --kv-policy snapkv: $(tail -2 "$tmp/err")"; fi
"$brisk" bench -m "$model" -p 8 -n 4 -r 1 --no-roofline --kv-policy streaming >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--kv-policy streaming needs --kv-budget" "$tmp/err" && ok || bad "policy without a budget: exit $rc, $(cat "$tmp/err")"
"$brisk" bench -m "$model" -p 8 -n 4 -r 1 --no-roofline --kv-policy streaming --kv-budget 30 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q -- "cannot hold the 4 sinks" "$tmp/err" && ok || bad "budget under sinks + window: exit $rc, $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
