#!/usr/bin/env python3
"""make_e2e.py DEV.jsonl.gz PER_SCHEMA.txt OUT.jsonl: the end-to-end test's schemas. PER_SCHEMA is the
stderr of `brisk maskbench --per-schema` on the dev file (which schemas brisk compiles); the schemas are
drawn in the order of random.seed(15)'s shuffle of the dev file's lines, keeping those that compile and
are under 4,000 bytes, 200 of them."""
import gzip, json, random, sys
dev, per, out = sys.argv[1:4]
rows = [json.loads(l) for l in gzip.open(dev, "rt")]
compiled = set()
for l in open(per):
    if l.startswith("{"):
        r = json.loads(l)
        if r["result"] != "compile_error":
            compiled.add(r["index"])
order = list(range(len(rows)))
random.seed(15)
random.shuffle(order)
picked = []
for i in order:
    s = json.dumps(rows[i]["schema"], ensure_ascii=False)
    if i in compiled and len(s) < 4000:
        picked.append(json.dumps({"index": i, "schema": rows[i]["schema"]}, ensure_ascii=False))
    if len(picked) == 200:
        break
open(out, "w").write("\n".join(picked) + "\n")
print(len(picked), "schemas")
