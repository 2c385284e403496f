#!/usr/bin/env python3
"""json_roles.py FILE: the reference for token roles (test_constrain). Each line of FILE is
"HEX ROLES": a JSON text as hex bytes and the role brisk gave each byte (1 punctuation/whitespace,
2 object key, 3 string value, 4 number/true/false/null). The roles are recomputed here with Python's
own JSON scanners (json.decoder.scanstring for strings, json.scanner.NUMBER_RE for numbers) by a
recursive descent, independent of brisk's streaming lexer; prints the mismatches and a count, exits 1
on any mismatch."""
import json.decoder
import sys
from json.scanner import NUMBER_RE

WS = " \t\n\r"


def label(s):
    roles = [None] * len(s)

    def ws(i):
        while i < len(s) and s[i] in WS:
            roles[i] = "1"
            i += 1
        return i

    def mark(a, b, r):
        for k in range(a, b):
            roles[k] = r

    def value(i, key=False):
        i = ws(i)
        ch = s[i]
        if ch == '"':
            _, end = json.decoder.scanstring(s, i + 1)
            mark(i, end, "2" if key else "3")
            return end
        if ch in "{[":
            close = "}" if ch == "{" else "]"
            roles[i] = "1"
            i = ws(i + 1)
            if s[i] == close:
                roles[i] = "1"
                return i + 1
            while True:
                if ch == "{":
                    i = ws(value(i, key=True))
                    assert s[i] == ":", (s, i)
                    roles[i] = "1"
                    i += 1
                i = ws(value(i))
                roles[i] = "1"
                if s[i] == close:
                    return i + 1
                assert s[i] == ",", (s, i)
                i = ws(i + 1)
        m = NUMBER_RE.match(s, i)
        if m:
            mark(i, m.end(), "4")
            return m.end()
        for lit in ("true", "false", "null"):
            if s.startswith(lit, i):
                mark(i, i + len(lit), "4")
                return i + len(lit)
        raise ValueError(f"not JSON at {i}: {s!r}")

    end = ws(value(0))
    assert end == len(s), (s, end)
    return "".join(r * len(c.encode("utf-8")) for r, c in zip(roles, s))


bad = n = 0
for line in open(sys.argv[1], encoding="ascii"):
    hx, got = line.split()
    text = bytes.fromhex(hx).decode("utf-8")
    want = label(text)
    n += 1
    if want != got:
        bad += 1
        if bad <= 5:
            print(f"mismatch: {text!r}\n  brisk  {got}\n  python {want}")
print(f"token roles: {n} instances, {bad} mismatches")
sys.exit(1 if bad or n == 0 else 0)
