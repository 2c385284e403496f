#!/usr/bin/python3
"""Record jinja2's rendering of every chat template as brisk's golden test data.

Renders a fixed set of conversations with each template in a directory (default
../shared/templates) the way Hugging Face transformers' apply_chat_template does
(transformers/utils/chat_template_utils.py, as of 4.5x):

  * jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True) with the loopcontrols extension and a `generation`
    block tag that just renders its body (transformers' AssistantTracker);
  * a `tojson` filter doing json.dumps(x, ensure_ascii=False, indent=indent,
    separators=separators, sort_keys=sort_keys);
  * globals raise_exception(msg) (raises TemplateError(msg)) and
    strftime_now(fmt), here pinned to NOW so the output is reproducible;
  * variables messages, tools (None unless the case has tools), documents
    (None), add_generation_prompt, bos_token, eos_token, plus the case's extra
    variables.

bos/eos: a realistic pair per template family (TOKENS below, matched on the
file name; "<s>"/"</s>" otherwise). Each record carries the pair it used, so the
C test needs no table.

Output (tests/data/templates/golden.jsonl), one JSON object per line:
  line 1: {"now": ..., "cases": {case_id: {"messages": [...], "tools": [...]|null,
           "vars": {...}, "agp": [false, true]}}}
  then:   {"t": template_stem, "c": case_id, "g": add_generation_prompt,
           "bos": ..., "eos": ..., "out": rendered}            (success)
      or  {..., "sfx": suffix}   (add_generation_prompt=true whose output is the
                                  false record's output + suffix: the usual case)
      or  {..., "err": str(exception), "etype": exception class name}

Run with the system interpreter (Debian python3-jinja2):
  /usr/bin/python3 scripts/gen-template-golden.py [TEMPLATE_DIR] [OUT]

With --unicode it instead regenerates src/template/unicode_tables.c: the case
mappings (str.upper/lower/title), "cased" property and str.isprintable()
ranges of this Python's Unicode database, so brisk's str methods and repr()
agree with the reference interpreter that recorded the golden data.
"""
import datetime
import glob
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 1, 2, 13, 45, 30)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. \"Paris\" or \"Zürich\""},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                },
                "required": ["city"],
            },
        },
    }
]

CASES = {
    "single": {"messages": [{"role": "user", "content": "Hello! How are you?"}]},
    "multi": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "2 + 2 = 4."},
            {"role": "user", "content": "And times 3?"},
        ]
    },
    "system": {
        "messages": [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": "Name three colors."},
        ]
    },
    "prefill": {
        "messages": [
            {"role": "user", "content": "Write a haiku about the sea."},
            {"role": "assistant", "content": "Waves fold into foam"},
        ],
        "agp": [False],
    },
    "tool": {
        "messages": [
            {"role": "user", "content": "What's the weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
             "content": "{\"temperature\": 22, \"condition\": \"sunny\"}"},
        ],
        "tools": TOOLS,
    },
    "tool2": {
        "messages": [
            {"role": "system", "content": "Use tools when helpful."},
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "-3 C, snow"},
            {"role": "tool", "tool_call_id": "call_b", "name": "get_weather", "content": "18 C, clear"},
            {"role": "assistant", "content": "Oslo: -3 °C with snow. Rome: 18 °C and clear."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": TOOLS,
    },
    "nonascii": {
        "messages": [
            {"role": "system", "content": "Tu es un assistant serviable. 你是一个乐于助人的助手。"},
            {"role": "user", "content": "Привет! Что такое «ёжик»? 日本語もOK 😀"},
            {"role": "assistant", "content": "Ёжик — это маленький ёж 🦔."},
            {"role": "user", "content": "Merci beaucoup ! ¿Y en español? Ωμέγα"},
        ]
    },
    "think": {
        "messages": [
            {"role": "user", "content": "Is 17 prime?"},
            {"role": "assistant", "content": "<think>\nCheck divisors up to 4: none.\n</think>\n\nYes, 17 is prime."},
            {"role": "user", "content": "And 21?"},
        ]
    },
    "nothink": {
        "messages": [{"role": "user", "content": "Say hi."}],
        "vars": {"enable_thinking": False},
    },
    "special": {
        "messages": [
            {"role": "system", "content": "  Spaces around.  \n"},
            {"role": "user", "content": "Quotes \" ' \\ <b>&amp;</b> {{ not_a_var }} {% raw %}\n\ttab"},
            {"role": "assistant", "content": "\nNoted.\n"},
            {"role": "user", "content": "ok"},
        ]
    },
    "tools_plain": {
        "messages": [
            {"role": "system", "content": "You can look up the weather."},
            {"role": "user", "content": "Hi there"},
        ],
        "tools": TOOLS,
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Two plus two is four."},
            {"role": "user", "content": "Thanks."},
        ]
    },
    "tool_json": {
        "messages": [
            {"role": "user", "content": "Weather in Paris, please."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "abcdefghi", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "abcdefghi", "name": "get_weather", "content": "{\"temperature\": 22}"},
            {"role": "assistant", "content": "It is 22 °C in Paris."},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": TOOLS,
    },
    "parts": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Describe this:"}, {"type": "text", "text": "a red apple."}]},
        ]
    },
}

# (substring of the template file name, bos, eos); first match wins.
TOKENS = [
    ("Llama-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("functionary", "<|begin_of_text|>", "<|eot_id|>"),
    ("Hermes-3", "<|begin_of_text|>", "<|eot_id|>"),
    ("deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("DeepSeek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("Qwen", "", "<|im_end|>"),
    ("QwQ", "", "<|im_end|>"),
    ("SmolLM3", "", "<|im_end|>"),
    ("gemma", "<bos>", "<eos>"),
    ("Phi-3", "<s>", "<|endoftext|>"),
    ("granite", "<|end_of_text|>", "<|end_of_text|>"),
    ("Mistral", "<s>", "</s>"),
    ("mistral", "<s>", "</s>"),
]


def tokens_for(stem):
    for sub, bos, eos in TOKENS:
        if sub in stem:
            return bos, eos
    return "<s>", "</s>"


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers tracks offsets)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, "jinja2.ext.loopcontrols"]
    )

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def gen_unicode(root):
    import unicodedata

    entries = []   # (cp, du, dl, dt, cased) for single-code-point mappings
    specials = []  # (cp, upper, lower, title) where one of them is longer
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        u, l, t = c.upper(), c.lower(), c.title()
        cased = c.islower() or c.isupper() or c.istitle()
        if u == c and l == c and t == c and not cased:
            continue
        if len(u) > 1 or len(l) > 1 or len(t) > 1:
            specials.append((cp, u, l, t))
            entries.append((cp, 0, 0, 0, cased))
            continue
        entries.append((cp, ord(u) - cp, ord(l) - cp, ord(t) - cp, cased))
    runs = []  # [lo, hi, du, dl, dt, alt, cased]
    for cp, du, dl, dt, cased in entries:
        if runs:
            r = runs[-1]
            if cp == r[1] + 1 and r[6] == cased:
                odd = (cp - r[0]) % 2 == 1
                if not r[5] and (du, dl, dt) == (r[2], r[3], r[4]):
                    r[1] = cp
                    continue
                if r[5] and (du, dl, dt) == ((r[2] - 1, r[3] - 1, r[4] - 1) if odd else (r[2], r[3], r[4])):
                    r[1] = cp
                    continue
                if not r[5] and r[0] == r[1] and (du, dl, dt) == (r[2] - 1, r[3] - 1, r[4] - 1):
                    r[1] = cp
                    r[5] = 1
                    continue
        runs.append([cp, cp, du, dl, dt, 0, cased])
    nonprint = []
    for cp in range(0x80, 0x110000):
        if not chr(cp).isprintable():
            if nonprint and nonprint[-1][1] == cp - 1:
                nonprint[-1][1] = cp
            else:
                nonprint.append([cp, cp])

    def cps(s):
        v = [ord(x) for x in s] + [0] * (3 - len(s))
        return "{" + ", ".join("0x%X" % x for x in v) + "}"

    out = []
    out.append("/* unicode_tables: case mappings, the cased property and non-printable ranges")
    out.append(" * of Python %s's Unicode database (Unicode %s), generated by" % (sys.version.split()[0], unicodedata.unidata_version))
    out.append(" * `/usr/bin/python3 scripts/gen-template-golden.py --unicode`. Do not edit. */")
    out.append('#include "template/tpl.h"')
    out.append("")
    out.append("/* {lo, hi, du, dl, dt, alt, cased}: alt runs alternate upper/lower case pairs,")
    out.append(" * odd offsets use the deltas minus one. */")
    out.append("const tpl_case_run tpl_case_runs[] = {")
    for r in runs:
        out.append("    {0x%X, 0x%X, %d, %d, %d, %d, %d}," % (r[0], r[1], r[2], r[3], r[4], r[5], 1 if r[6] else 0))
    out.append("};")
    out.append("const size_t tpl_case_nruns = sizeof tpl_case_runs / sizeof tpl_case_runs[0];")
    out.append("")
    out.append("const tpl_case_special tpl_case_specials[] = {")
    for cp, u, l, t in specials:
        out.append("    {0x%X, %s, %s, %s}," % (cp, cps(u), cps(l), cps(t)))
    out.append("};")
    out.append("const size_t tpl_case_nspecials = sizeof tpl_case_specials / sizeof tpl_case_specials[0];")
    out.append("")
    out.append("/* code points >= 0x80 for which str.isprintable() is false */")
    out.append("const uint32_t tpl_nonprint_ranges[][2] = {")
    line = "   "
    for lo, hi in nonprint:
        item = " {0x%X, 0x%X}," % (lo, hi)
        if len(line) + len(item) > 100:
            out.append(line)
            line = "   "
        line += item
    out.append(line)
    out.append("};")
    out.append("const size_t tpl_nonprint_nranges = sizeof tpl_nonprint_ranges / sizeof tpl_nonprint_ranges[0];")
    path = os.path.join(root, "src", "template", "unicode_tables.c")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(out) + "\n")
    print(f"{path}: {len(runs)} case runs, {len(specials)} special mappings, {len(nonprint)} non-printable ranges")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "templates")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "tests", "data", "templates", "golden.jsonl")
    if len(sys.argv) > 1 and sys.argv[1] == "--unicode":
        gen_unicode(root)
        return
    env = make_env()
    cases = {}
    for cid, c in CASES.items():
        cases[cid] = {"messages": c["messages"], "tools": c.get("tools"), "vars": c.get("vars", {}),
                      "agp": c.get("agp", [False, True])}
    lines = [json.dumps({"now": NOW.isoformat(), "cases": cases}, ensure_ascii=False)]
    n_ok = n_err = 0
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        stem = os.path.basename(path)[: -len(".jinja")]
        with open(path, encoding="utf-8", newline="") as f:
            src = f.read()
        bos, eos = tokens_for(stem)
        try:
            tmpl = env.from_string(src)
            parse_err = None
        except Exception as e:  # noqa: BLE001 - recorded as expected failure
            tmpl, parse_err = None, e
        for cid, c in cases.items():
            base = None
            for agp in c["agp"]:
                rec = {"t": stem, "c": cid, "g": agp, "bos": bos, "eos": eos}
                try:
                    if parse_err is not None:
                        raise parse_err
                    kw = dict(c["vars"])
                    text = tmpl.render(messages=c["messages"], tools=c["tools"], documents=None,
                                       add_generation_prompt=agp, bos_token=bos, eos_token=eos, **kw)
                    if agp and base is not None and text.startswith(base):
                        rec["sfx"] = text[len(base):]
                    else:
                        rec["out"] = text
                    if not agp:
                        base = text
                    n_ok += 1
                except Exception as e:  # noqa: BLE001
                    rec["err"] = str(e)
                    rec["etype"] = type(e).__name__
                    n_err += 1
                lines.append(json.dumps(rec, ensure_ascii=False))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {n_ok} renders, {n_err} errors (jinja2 {jinja2.__version__})")


if __name__ == "__main__":
    main()
