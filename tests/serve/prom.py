"""Prometheus text exposition format (0.0.4), parsed strictly for the serve
tests: every sample belongs to a family declared with # HELP and # TYPE
(both, once, before its samples), names and labels are well formed, values
are numbers, a counter's samples end in _total, a histogram has cumulative
_bucket{le} series ending in le="+Inf" equal to its _count, and _sum. Usage:
    python3 prom.py FILE            -> exit 0 when well formed (problems printed)
    import prom; fams = prom.parse(text)   -> {name: {"type", "help", "samples": [(name, labels, value)]}}
"""
import math
import re
import sys

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"$')


class Bad(Exception):
    pass


def value(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(s)
    except ValueError:
        raise Bad("not a number: %r" % s)


def parse(text):
    if not text.endswith("\n"):
        raise Bad("the exposition does not end with a newline")
    fams = {}
    order = []
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                raise Bad("line %d: malformed %s" % (n, line))
            f = fams.setdefault(parts[2], {"type": None, "help": None, "samples": []})
            key = "help" if parts[1] == "HELP" else "type"
            if f[key] is not None:
                raise Bad("line %d: a second # %s for %s" % (n, parts[1], parts[2]))
            if f["samples"]:
                raise Bad("line %d: # %s of %s after its samples" % (n, parts[1], parts[2]))
            if key == "type" and parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise Bad("line %d: unknown type %s" % (n, parts[3]))
            f[key] = parts[3]
            if parts[2] not in order:
                order.append(parts[2])
            continue
        if line.startswith("#") or line == "":
            raise Bad("line %d: unexpected %r" % (n, line))
        m = SAMPLE.match(line)
        if not m:
            raise Bad("line %d: malformed sample %r" % (n, line))
        name, labels = m.group(1), {}
        if m.group(3):
            for part in m.group(3).split(","):
                lm = LABEL.match(part)
                if not lm or lm.group(1) in labels:
                    raise Bad("line %d: malformed label %r" % (n, part))
                labels[lm.group(1)] = lm.group(2)
        fam = None
        for cand in (name, re.sub(r"_(bucket|sum|count)$", "", name)):
            if cand in fams:
                fam = cand
                break
        if fam is None:
            raise Bad("line %d: sample %s of no declared family" % (n, name))
        f = fams[fam]
        if f["help"] is None or f["type"] is None:
            raise Bad("line %d: family %s lacks # HELP or # TYPE" % (n, fam))
        if f["type"] != "histogram" and name != fam:
            raise Bad("line %d: %s is not a sample name of %s family %s" % (n, name, f["type"], fam))
        f["samples"].append((name, labels, value(m.group(4))))
    for fam, f in fams.items():
        if f["help"] is None or f["type"] is None:
            raise Bad("family %s lacks # HELP or # TYPE" % fam)
        if not f["samples"]:
            raise Bad("family %s has no sample" % fam)
        if f["type"] == "counter":
            if not fam.endswith("_total"):
                raise Bad("counter %s does not end in _total" % fam)
            if any(v < 0 or math.isnan(v) for _, _, v in f["samples"]):
                raise Bad("counter %s has a negative value" % fam)
        if f["type"] == "histogram":
            buckets = [(l["le"], v) for s, l, v in f["samples"] if s == fam + "_bucket"]
            counts = [v for s, _, v in f["samples"] if s == fam + "_count"]
            sums = [v for s, _, v in f["samples"] if s == fam + "_sum"]
            if not buckets or buckets[-1][0] != "+Inf" or len(counts) != 1 or len(sums) != 1:
                raise Bad("histogram %s: buckets ending in +Inf, one _sum and one _count are needed" % fam)
            les = [value(le) for le, _ in buckets]
            vals = [v for _, v in buckets]
            if les != sorted(les) or len(set(les)) != len(les):
                raise Bad("histogram %s: le not increasing" % fam)
            if vals != sorted(vals):
                raise Bad("histogram %s: buckets not cumulative" % fam)
            if vals[-1] != counts[0]:
                raise Bad("histogram %s: +Inf bucket %g != _count %g" % (fam, vals[-1], counts[0]))
    return fams


def get(fams, name, **labels):
    """The value of the sample name{labels} (exactly one must match)."""
    fam = name if name in fams else re.sub(r"_(bucket|sum|count)$", "", name)
    hits = [v for s, l, v in fams[fam]["samples"] if s == name and all(l.get(k) == w for k, w in labels.items())]
    if len(hits) != 1:
        raise Bad("%s%s: %d samples" % (name, labels, len(hits)))
    return hits[0]


if __name__ == "__main__":
    try:
        parse(open(sys.argv[1]).read())
    except Bad as e:
        print("metrics: %s" % e)
        sys.exit(1)
