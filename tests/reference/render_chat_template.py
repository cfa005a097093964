#!/usr/bin/env python3
"""Renders the chat-template golden files with Python's jinja2, the way Hugging Face
transformers does (apply_chat_template): an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, a `generation` block that
renders its body, the globals raise_exception and strftime_now, and the tojson filter
replaced by json.dumps(ensure_ascii=False, ...). The render context is HF's too:
messages, tools (None when absent), documents (None), add_generation_prompt, the
bos/eos tokens, and a conversation's "extra" variables (e.g. enable_thinking).

    python3 tests/reference/render_chat_template.py [--check]

reads tests/data/chat_templates/manifest.json and NAME.jinja, and writes NAME.expected
(case 'basic'), NAME.CASE.expected for the other cases, or NAME[.CASE].error when jinja2
raises ('ExceptionType: message'). --check compares instead of writing. strftime_now
formats the manifest's fixed time ('now') so the files do not depend on the day.
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "chat_templates")


class GenerationBlock(Extension):
    """HF's AssistantTracker without the tracking: {% generation %}body{% endgeneration %}."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def cases_for(source, info):
    cases = ["basic", "nosys", "nogen"]
    if "tool" in source:
        cases.append("tools")
    return cases + info.get("extra_cases", [])


def render(env, source, conv, bos, eos):
    template = env.from_string(source)
    return template.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                           add_generation_prompt=conv["add_generation_prompt"],
                           bos_token=bos, eos_token=eos, **conv.get("extra", {}))


def main():
    check = "--check" in sys.argv[1:]
    with open(os.path.join(DATA, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    env = make_env(datetime.datetime.fromisoformat(manifest["now"]))
    failures = 0
    for name, info in manifest["templates"].items():
        with open(os.path.join(DATA, name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        for case in cases_for(source, info):
            stem = name if case == "basic" else name + "." + case
            try:
                out, ext = render(env, source, manifest["conversations"][case],
                                  info["bos_token"], info["eos_token"]), ".expected"
            except Exception as e:  # the golden file records the failure
                out, ext = "%s: %s" % (type(e).__name__, e), ".error"
            path = os.path.join(DATA, stem + ext)
            other = os.path.join(DATA, stem + (".error" if ext == ".expected" else ".expected"))
            if check:
                try:
                    with open(path, encoding="utf-8", newline="") as f:
                        same = f.read() == out
                except FileNotFoundError:
                    same = False
                if not same or os.path.exists(other):
                    print("MISMATCH", stem + ext)
                    failures += 1
            else:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(out)
                if os.path.exists(other):
                    os.remove(other)
    if check:
        print("ok" if failures == 0 else "%d mismatches" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
