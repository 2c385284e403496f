#!/usr/bin/env python3
"""kv-plot: fidelity against KV memory, one line per retention policy, from
bench/kv-eval.sh's CSV (CSV=FILE PARTS=... BUDGETS="..." bench/kv-eval.sh).

    bench/kv-plot.py FILE.csv OUT.svg [TITLE]

x: the KV bytes kept, as a fraction of the full F16 cache (a policy's budget;
a storage type's bytes per element over F16's 2), log scale; y: mean KL
divergence against the full F16 cache (nats), log scale. Storage types are
points, policies polylines over their budgets. Python's standard library only.
"""
import csv
import math
import sys

# bytes per element of each storage type, over F16's 2 (docs/KV.md)
TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "k4": 20 / 32, "k2": 12 / 32}
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def type_fraction(label):
    k, _, v = label.partition("/")
    bk, bv = TYPE_BYTES.get(k), TYPE_BYTES.get(v or k)
    if bk is None or bv is None:
        return None
    return (bk + bv) / 4.0


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: bench/kv-plot.py FILE.csv OUT.svg [TITLE]")
    series, points = {}, []
    with open(sys.argv[1], newline="") as f:
        for row in csv.reader(f):
            if len(row) < 8:
                continue
            part, label, budget, _ppl, kld = row[0], row[1], row[2], row[3], row[4]
            try:
                kl = float(kld)
            except ValueError:
                continue
            if kl <= 0:
                continue
            if part == "policy":
                series.setdefault(label, []).append((float(budget), kl))
            elif part == "type":
                x = type_fraction(label)
                if x is not None and x < 1.0:
                    points.append((label, x, kl))
    if not series and not points:
        sys.exit("kv-plot: no rows in " + sys.argv[1])
    xs = [x for s in series.values() for x, _ in s] + [x for _, x, _ in points]
    ys = [y for s in series.values() for _, y in s] + [y for _, _, y in points]
    x0, x1 = math.log10(min(xs) / 1.3), math.log10(1.0)
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    W, H, L, R, T, B = 720, 440, 70, 170, 40, 50

    def px(x):
        return L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return T + (y1 - math.log10(y)) / (y1 - y0) * (H - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    title = sys.argv[3] if len(sys.argv) > 3 else "KV fidelity against memory"
    out.append(f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>')
    for e in range(int(y0), int(y1) + 1):   # horizontal grid at each decade
        y = py(10.0 ** e)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
    for x in (0.1, 0.125, 0.25, 0.5, 0.75, 1.0):
        if math.log10(x) < x0:
            continue
        out.append(f'<line x1="{px(x):.1f}" y1="{T}" x2="{px(x):.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x:g}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">KV bytes kept / full F16 cache</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">'
               'mean KL divergence vs the F16 cache (nats)</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#444"/>')
    ly = T + 10
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLOURS[i % len(COLOURS)]
        pts.sort()
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>')
        out.append(f'<line x1="{W - R + 12}" y1="{ly}" x2="{W - R + 32}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{W - R + 38}" y="{ly + 4}">{name}</text>')
        ly += 18
    for label, x, y in points:
        out.append(f'<rect x="{px(x) - 4:.1f}" y="{py(y) - 4:.1f}" width="8" height="8" fill="black"/>')
        out.append(f'<text x="{px(x) + 7:.1f}" y="{py(y) - 6:.1f}">{label}</text>')
    out.append(f'<rect x="{W - R + 18}" y="{ly - 4}" width="8" height="8" fill="black"/>')
    out.append(f'<text x="{W - R + 38}" y="{ly + 4}">storage type (K/V)</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
