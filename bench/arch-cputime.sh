#!/usr/bin/env bash
# arch-cputime.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]: the CPU time (user +
# sys) two brisk builds spend on the same fixed work, alternating pairs, one
# thread: `brisk bench -p 256 -n 16 -r 1 -t 1 --no-roofline`. On a loaded
# machine wall-clock tokens/s swing with the neighbours' load; the CPU time
# of one thread's fixed work swings much less. Prints the median new/base
# ratio (below 1: the new build does the work in less CPU time).
set -euo pipefail
base="${1:?usage: arch-cputime.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]}"
new="${2:?usage: arch-cputime.sh BASE_BRISK NEW_BRISK [MODEL] [PAIRS]}"
model="${3:-/tmp/l1b-q4_0.gguf}"
pairs="${4:-8}"
cpu() {   # seconds of user + sys CPU time of one run
  /usr/bin/python3 - "$1" "$model" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "bench", "-m", sys.argv[2], "-p", "256", "-n", "16", "-r", "1", "-t", "1", "--no-roofline"],
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime)
PY
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$pairs"); do
  b=$(cpu "$base"); n=$(cpu "$new")
  echo "pair $i: base ${b}s   new ${n}s"
  echo "$b $n" >> "$out"
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print(f"median new/base CPU time over {len(rows)} pairs: {statistics.median(r[1] / r[0] for r in rows):.3f}")
PY
