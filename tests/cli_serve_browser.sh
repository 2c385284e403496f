#!/usr/bin/env bash
# The web chat page in headless Chromium: Debian's /usr/bin/chromium driven by
# playwright-core (pinned, installed under the build tree on first use), on a
# synth smollm2-135m (written under the build tree on first use: slow enough,
# about 70 tokens/s on one thread, for Stop to land mid-reply) with the Qwen3
# template. tests/cli_serve_browser.mjs says what is checked. Skips (77)
# without chromium, node/npm, the registry, or a build with libmicrohttpd.
set -u
. "$(dirname "$0")/serve/lib.sh"
serve_test_init "$1"   # model: the bundled one until the synth model below
[ -x /usr/bin/chromium ] || { echo "SKIP: /usr/bin/chromium absent (scripts/bootstrap.sh installs Debian's chromium)"; exit 77; }
serve_need node-npm http
tpl="$root/tests/data/templates/Qwen-Qwen3-0.6B.jinja"
builddir="$(cd "$(dirname "$brisk")" && pwd)"
npmdir="$builddir/npm-playwright"
npm_pin "$npmdir" playwright-core 1.65.1 playwright-core@1.65.1
model="$builddir/serve-browser/smollm2-135m-q8_0.gguf"
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$brisk" synth --shape smollm2-135m --type Q8_0 -o "$model" >/dev/null 2>"$tmp/synth.err" || { echo "FAIL: brisk synth: $(tail -3 "$tmp/synth.err")"; exit 1; }
fi
start main -m "$model" --chat-template "$tpl" -c 2048 -np 1 --max-queue 0 || exit 1
timeout 240 node "$root/tests/cli_serve_browser.mjs" "$npmdir/node_modules" "http://127.0.0.1:$port_main"
rc=$?
kill -TERM "$pid_main"
wait "$pid_main"; r=$?
[ $r -eq 0 ] || { echo "FAIL: the server exited $r: $(tail -5 "$tmp/main.err")"; rc=1; }
exit $rc
