#!/usr/bin/python3
"""Render a chat template with jinja2 as transformers' apply_chat_template does (the environment of
scripts/gen-template-golden.py: sandboxed, trim_blocks, lstrip_blocks, loopcontrols, tojson with
ensure_ascii=False, raise_exception, strftime_now), with add_generation_prompt, and compare it with the
prompt brisk serve's /apply-template returned for the same request.

usage: render_jinja.py TEMPLATE REQUEST.json BRISK_RESPONSE.json BOS EOS
The request's assistant tool_calls carry arguments as JSON strings (OpenAI's clients send them so);
transformers' templates expect objects, so they are parsed first, and such a turn's null content is ""
(what brisk serve does too)."""
import datetime
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

tpl_path, req_path, got_path, bos, eos = sys.argv[1:6]
req = json.load(open(req_path, encoding="utf-8"))
for m in req["messages"]:
    if m.get("content") is None and m.get("tool_calls"):
        m["content"] = ""   # brisk serve passes an assistant turn that only calls tools with content ""
    for tc in m.get("tool_calls") or []:
        a = tc["function"].get("arguments")
        if isinstance(a, str):
            try:
                parsed = json.loads(a)
                if isinstance(parsed, dict):
                    tc["function"]["arguments"] = parsed
            except ValueError:
                pass


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
want = env.from_string(open(tpl_path, encoding="utf-8").read()).render(
    messages=req["messages"], tools=req.get("tools"), documents=None, add_generation_prompt=True, bos_token=bos, eos_token=eos)
got = json.load(open(got_path, encoding="utf-8")).get("prompt")
if got != want:
    print("jinja2: %r\nbrisk:  %r" % (want[:1500], (got or "")[:1500]))
    sys.exit(1)
