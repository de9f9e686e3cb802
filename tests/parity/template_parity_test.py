#!/usr/bin/env python3
"""Chat template parity: parley's Jinja interpreter against transformers' own renderer.

Renders every template (llama.cpp's test templates and the Qwen3 tokenizer_config.json
template) over a corpus of conversations twice: with transformers 5.x's
render_jinja_template (its ImmutableSandboxedEnvironment, tojson, raise_exception,
strftime_now; jinja2 3.1.6) and with parley (tests/jinja_tools/render_tool.cpp, one process
for all cases). strftime_now is frozen to the same instant on both sides. A case passes
when both outputs are byte-identical or both raise. Exit 1 on any mismatch.

parley gets the context render_jinja_template builds for jinja2 (messages after
_plain_template_data, tools, documents, add_generation_prompt, the extra kwargs), and the
tool applies parley::alias_reasoning_fields, transformers' remaining edit of the messages.
"""
import argparse
import copy
import datetime as _dt
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

FROZEN = (2025, 7, 26, 14, 30, 5)


class _FrozenDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(*FROZEN)


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["location"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_documents",
        "description": "Search a document store; returns the best matches.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free-text query"},
                "filters": {
                    "type": "object",
                    "description": "Optional filters",
                    "properties": {
                        "author": {"type": "string"},
                        "year": {"type": "integer", "minimum": 1900},
                        "tags": {"type": "array", "items": {"type": "string", "enum": ["news", "paper", "blog"]}},
                    },
                },
                "limit": {"type": "number", "description": "Max results", "nullable": True},
                "exact": {"type": "boolean"},
            },
            "required": ["query", "filters"],
        },
    },
}

CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


# Language corner cases, rendered like the templates (over every case; most ignore it):
# float and repr printing, slicing, str methods, filters with arguments, tests, macros,
# whitespace control, namespace, loop helpers, cycler / joiner, printf formatting.
LANGUAGE_SNIPPETS = [
    '{{ 1.0 }} {{ 100.0 }} {{ 1e16 }} {{ 1.5e-7 }} {{ 123456789012345678.0 }} {{ 0.1 }} {{ -0.0 }} {{ 1/3 }} {{ 2.5e-5|tojson }}',
    '{{ "a\'b" }} {{ ["a\'b", \'a"b\', "a\'\\"b", "\n\\t\\\\", "é", "\\x00", "\\u200b"] }}',
    "{{ [1,2,3]|map('string')|list }} {{ [3,1]|sort }} {{ 'b,a'.split(',')|sort|join('-') }}",
    '{{ "Hello"|list|reverse|join }} {{ "abc"[::-1] }} {{ "abcdef"[-2:] }} {{ "abcdef"[1:-1:2] }} {{ [1,2,3,4,5][::-2] }} {{ [1,2,3][10:] }}',
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %} {% for x in {'k': 'v'}|items %}{{ x }}{% endfor %}",
    "{{ 'x' if none }}|{{ none|string }}|{{ none ~ '' }}|{{ [none]|join(',') }}",
    "{{ ' a  b '.split(' ') }} {{ 'a b c'.split(none, 1) }} {{ '  a b c  '.rsplit(none, 1) }} {{ 'a\nb\\r\nc'.splitlines() }}",
    "{{ 'abc'.startswith('') }} {{ 'abc'.find('z') }} {{ 'a.b.c'.rsplit('.', 1) }} {{ ''.split(',') }} {{ ''.split() }}",
    '{{ \'Hello World\'.title() }} {{ "they\'re bill\'s".title() }} {{ \'hello-world foo_bar\'|title }} {{ \'ß\'.upper() }}',
    "{{ '%s and %d' % ('a', 3) }} {{ '%5.2f' % 3.14159 }} {{ '{0}-{0}'.format('x') }} {{ '{name}!'.format(name='n') }}",
    "{{ 5 > 3 and 'yes' or 'no' }} {{ not none }} {{ [] or {} }} {{ 0 == false }} {{ 1 in [true] }}",
    '{{ x|default(none) is none }} {{ x is not defined }} {{ undefined_x|length }}',
    "{{ [1,2,3]|first }} {{ {'a':1,'b':2}|first }} {{ 'abc'|last }} {{ []|first is undefined }}",
    "{% set d = {'a': {'b': [10, 20]}} %}{{ d.a.b[1] }} {{ d['a']['b'][-1] }} {{ d.a.b.0 }} {{ [{'n': 1}]|map(attribute='n')|list }}",
    "{{ [{'a': {'b': 1}}, {'a': {'b': 2}}]|map(attribute='a.b')|list }} {{ [[1, 2], [3]]|map('length')|list }} {{ [1,2,3]|select('>', 1)|list }}",
    "{{ {'b': 1, 'A': 2, 'a': 3}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ ['b','A','a']|sort }} {{ ['b','A','a']|sort(case_sensitive=true) }}",
    "{{ ['a', 'A', 'b']|unique|list }} {{ [1, 2]|sum(start=10) }} {{ [2, 1]|min }} {{ ['bb', 'a']|max }}",
    "{{ 'abc'|indent }} {{ 'a\n\nb'|indent(2, blank=true) }} {{ 'a\nb'|indent('> ', first=true) }}",
    "{{ {'a': [1, 2]}|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson }}|{{ [[]]|tojson(indent=1) }}|{{ 'x'|tojson(indent='\\t') }}",
    "{{ {1: 'a', true: 'b', none: 'c'}|tojson }}",
    "{{ '🌍'|tojson(ensure_ascii=true) }} {{ '\\x7f\\x1f'|tojson }} {{ '\\x7f'|tojson(ensure_ascii=true) }}",
    '{%- set x = 1 -%} {{ x }} {%- if x %}   a   {% endif -%}   b',
    '{% macro m(a, b) %}{{ a }}|{{ b }}{% endmacro %}{{ m(1) }} {{ m(b=2) }}',
    '{% set ns = namespace(a=1) %}{{ ns }} {{ ns.a }} {{ ns.b }} {{ ns.b is defined }}',
    '{{ loop }} {% for i in [1] %}{{ loop.depth }}{{ loop.changed(1) }}{{ loop.changed(1) }}{% endfor %}',
    "{{ 10 // 3 * 3 + 10 % 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ (-2) ** 2 }} {{ 1 - -1 }}",
    "{{ - 'a'|length }}",
    "{{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }} {{ 1 == 'a' }}",
    "{{ 'abc' is string and 'abc' is iterable and 'abc' is sequence }} {{ {} is sequence }} {{ 1 is iterable }} {{ none is mapping }}",
    "{{ '  x  '|trim('') }}|{{ 'x'.center(5, '*') }}|{{ 'x'.ljust(3) }}|{{ '5'.zfill(3) }}|{{ 'a,b'.partition(',') }}",
    '{{ "\\u00e9\\U0001F600\\x41\\101\\q" }}',
    "{{ 3.0|int }} {{ '0x1A'|int(base=16) }} {{ ' 7 '|int }} {{ '1_000'|int }} {{ 'inf'|float }} {{ true|int }}",
    "{{ 'a' * 0 }}|{{ [] * 3 }}|{{ 3 * 'ab' }}",
    '{{ messages is defined }}{{ tools is none }}',
    "{{ '%s-%s'|format('a', 1) }} {{ '%(x)s!'|format(x=2) }} {{ '%d%%'|format(5) }}",
    "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.current }}{{ c.next() }}{% set j = joiner('|') %}{% for x in [1,2,3] %}{{ j() }}{{ x }}{% endfor %}",
    "{{ range(5, 0, -2)|list }} {{ {'a': 1}.items()|list }} {{ [1, 2][0:1] }}",
]


def tool_call(name, args, call_id, as_string=False):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args},
    }


def corpus():
    """(name, messages, extra render kwargs). Every case also gets bos/eos tokens."""
    sys_msg = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
    u1 = {"role": "user", "content": "Hello! Who are you?"}
    a1 = {"role": "assistant", "content": "I am an assistant. How can I help?"}
    u2 = {"role": "user", "content": "What is 2 + 2?\nExplain step by step."}
    weather_call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("get_weather", {"location": "Paris, France", "unit": "celsius"}, "call_1")],
    }
    weather_call_str = {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [tool_call("get_weather", {"location": "Tokyo", "days": 3}, "call_7", as_string=True)],
    }
    weather_result = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                      "content": '{"temperature": 21.5, "condition": "sunny"}'}
    cases = [
        ("user_only", [u1], {"add_generation_prompt": True}),
        ("user_only_no_prompt", [u1], {"add_generation_prompt": False}),
        ("system_multiturn", [sys_msg, u1, a1, u2], {"add_generation_prompt": True}),
        ("system_multiturn_closed", [sys_msg, u1, a1, u2, {"role": "assistant", "content": "4."}],
         {"add_generation_prompt": False}),
        ("no_system_multiturn", [u1, a1, u2, {"role": "assistant", "content": "It is 4."},
                                 {"role": "user", "content": "Thanks."}], {"add_generation_prompt": True}),
        ("reasoning_history", [sys_msg, u1,
                               {"role": "assistant", "content": "Hi there.", "reasoning_content": "The user greets me."},
                               u2], {"add_generation_prompt": True}),
        ("reasoning_last", [u1, {"role": "assistant", "content": "Hello!", "reasoning_content": "Be friendly.\n"}],
         {"add_generation_prompt": False}),
        ("reasoning_alias_thinking", [u1, {"role": "assistant", "content": "Hi.", "thinking": "via thinking"}, u2],
         {"add_generation_prompt": True}),
        ("reasoning_alias_reasoning", [u1, {"role": "assistant", "reasoning": "via reasoning", "content": "Hi.",
                                            "reasoning_content": None}, u2], {"add_generation_prompt": True}),
        ("think_inline", [u2, {"role": "assistant", "content": "<think>\n2+2 is 4.\n</think>\n\nThe answer is 4."},
                          {"role": "user", "content": "And 3+3?"}], {"add_generation_prompt": True}),
        ("thinking_on", [sys_msg, u2], {"add_generation_prompt": True, "enable_thinking": True}),
        ("thinking_off", [sys_msg, u2], {"add_generation_prompt": True, "enable_thinking": False}),
        ("thinking_off_history", [u1, {"role": "assistant", "content": "Hi.", "reasoning_content": "short"}, u2],
         {"add_generation_prompt": True, "enable_thinking": False}),
        ("content_parts", [{"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
                           {"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                        {"type": "text", "text": "Part two."}]},
                           {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]},
                           {"role": "user", "content": [{"type": "text", "text": "Again"}]}],
         {"add_generation_prompt": True}),
        ("tools_defined", [sys_msg, {"role": "user", "content": "Weather in Paris?"}],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL, SEARCH_TOOL]}),
        ("tools_no_system", [{"role": "user", "content": "Find papers on transformers."}],
         {"add_generation_prompt": True, "tools": [SEARCH_TOOL, CALC_TOOL]}),
        ("tool_roundtrip", [sys_msg, {"role": "user", "content": "Weather in Paris?"}, weather_call, weather_result,
                            {"role": "assistant", "content": "It is sunny and 21.5 °C in Paris."}],
         {"add_generation_prompt": False, "tools": [WEATHER_TOOL]}),
        ("tool_result_pending", [{"role": "user", "content": "Weather in Paris?"}, weather_call, weather_result],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
        ("tool_args_string", [{"role": "user", "content": "Weather in Tokyo for 3 days?"}, weather_call_str,
                              {"role": "tool", "tool_call_id": "call_7", "content": "rain"}],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
        ("parallel_calls", [sys_msg, {"role": "user", "content": "Weather in Paris and 3*7?"},
                            {"role": "assistant", "content": None, "tool_calls": [
                                tool_call("get_weather", {"location": "Paris"}, "call_a"),
                                tool_call("calculator", {"expression": "3*7"}, "call_b")]},
                            {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
                            {"role": "tool", "tool_call_id": "call_b", "content": "21"}],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL, CALC_TOOL]}),
        ("tool_call_with_reasoning", [{"role": "user", "content": "Compute 12*12"},
                                      {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
                                       "tool_calls": [tool_call("calculator", {"expression": "12*12"}, "c1")]},
                                      {"role": "tool", "tool_call_id": "c1", "content": "144"},
                                      {"role": "assistant", "content": "144"}],
         {"add_generation_prompt": False, "tools": [CALC_TOOL], "enable_thinking": True}),
        ("non_ascii", [{"role": "system", "content": "Réponds en français. 日本語もOK. «quotes» & <tags>"},
                       {"role": "user", "content": "Ça va? 你好 🌍 — “curly” 'single' \"double\" \\ back\tslash"},
                       {"role": "assistant", "content": "Très bien! 👍 ünïcödé"},
                       {"role": "user", "content": "Ελληνικά и кириллица"}],
         {"add_generation_prompt": True, "tools": [{"type": "function", "function": {
             "name": "traduire", "description": "Traduit un texte — «exactement»",
             "parameters": {"type": "object", "properties": {"texte": {"type": "string", "description": "Le texte à traduire"}},
                            "required": ["texte"]}}}]}),
        ("unknown_role", [{"role": "narrator", "content": "Once upon a time."}, u1], {"add_generation_prompt": True}),
        ("two_users", [u1, u2], {"add_generation_prompt": True}),
        ("assistant_first", [a1, u1], {"add_generation_prompt": True}),
        ("system_only", [sys_msg], {"add_generation_prompt": True}),
        ("empty_conversation", [], {"add_generation_prompt": True}),
        ("developer_role", [{"role": "developer", "content": "Use JSON."}, u1], {"add_generation_prompt": True}),
        ("empty_contents", [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
         {"add_generation_prompt": True}),
        ("long_whitespace", [{"role": "user", "content": "  padded  \n\n  lines \n"},
                             {"role": "assistant", "content": "\n  answer with spaces  \n"},
                             {"role": "user", "content": "next"}], {"add_generation_prompt": True}),
        ("custom_tokens", [sys_msg, u1], {"add_generation_prompt": True, "bos_token": "<BOS>", "eos_token": "<EOS>"}),
        ("no_tokens", [u1, a1], {"add_generation_prompt": False, "bos_token": None, "eos_token": None}),
        ("tool_message_dict_content", [{"role": "user", "content": "Weather?"}, weather_call,
                                       {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]}],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
        ("parallel_calls_no_content", [{"role": "user", "content": "Weather in Paris and 3*7?"},
                                       {"role": "assistant", "tool_calls": [
                                           tool_call("get_weather", {"location": "Paris"}, "call_a"),
                                           tool_call("calculator", {"expression": "3*7"}, "call_b")]},
                                       {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
                                       {"role": "tool", "tool_call_id": "call_b", "content": "21"},
                                       {"role": "assistant", "content": "Sunny; 21."}],
         {"add_generation_prompt": False, "tools": [WEATHER_TOOL, CALC_TOOL]}),
        ("odd_argument_values", [{"role": "user", "content": "Run it"},
                                 {"role": "assistant", "content": "", "tool_calls": [tool_call("search_documents", {
                                     "query": "x < y & \"z\"", "filters": {"year": 2024, "tags": ["news", "paper"],
                                                                          "author": None},
                                     "limit": 1.0, "exact": False, "score": 1e-05, "big": 12345678901234567890.0,
                                     "neg": -0.5}, "call_9")]},
                                 {"role": "tool", "tool_call_id": "call_9", "content": "[]"}],
         {"add_generation_prompt": True, "tools": [SEARCH_TOOL]}),
        ("two_tool_rounds", [{"role": "user", "content": "Weather?"}, weather_call, weather_result,
                             {"role": "assistant", "content": "Paris is sunny. Tokyo too?"},
                             {"role": "user", "content": "Yes, Tokyo."}, weather_call_str,
                             {"role": "tool", "tool_call_id": "call_7", "content": "rain"}],
         {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
        ("documents", [u1], {"add_generation_prompt": True, "documents": [
            {"title": "Doc A", "text": "Alpha text."}, {"title": "Doc B", "text": "Beta text."}]}),
        ("llama_options", [sys_msg, u1], {"add_generation_prompt": True, "tools": [WEATHER_TOOL],
                                          "tools_in_user_message": False, "date_string": "01 Jan 2025"}),
        ("gpt_oss_options", [{"role": "developer", "content": "Be exact."}, u1],
         {"add_generation_prompt": True, "reasoning_effort": "high", "builtin_tools": ["browser", "python"]}),
    ]
    return cases


def build_contexts(cases, ctu):
    """The kwargs render_jinja_template passes to jinja2, per case (for parley)."""
    out = []
    for _name, messages, kwargs in cases:
        kwargs = dict(kwargs)
        tools = kwargs.pop("tools", None)
        documents = kwargs.pop("documents", None)
        agp = kwargs.pop("add_generation_prompt", False)
        kwargs.setdefault("bos_token", "<|begin_of_text|>")
        kwargs.setdefault("eos_token", "<|end_of_text|>")
        chat = ctu._plain_template_data(copy.deepcopy(messages))  # the tool aliases reasoning
        ctx = {"messages": chat, "tools": ctu._plain_template_data(tools),
               "documents": ctu._plain_template_data(documents), "add_generation_prompt": agp}
        ctx.update(ctu._plain_template_data(kwargs))
        out.append(ctx)
    return out


def render_reference(source, cases, ctu):
    results = []
    for _name, messages, kwargs in cases:
        kwargs = dict(kwargs)
        tools = kwargs.pop("tools", None)
        documents = kwargs.pop("documents", None)
        agp = kwargs.pop("add_generation_prompt", False)
        kwargs.setdefault("bos_token", "<|begin_of_text|>")
        kwargs.setdefault("eos_token", "<|end_of_text|>")
        try:
            rendered, _ = ctu.render_jinja_template(conversations=[copy.deepcopy(messages)], tools=tools,
                                                    documents=documents, chat_template=source,
                                                    add_generation_prompt=agp, **kwargs)
            results.append((True, rendered[0]))
        except Exception as e:  # jinja2 errors, raise_exception, TypeErrors: all count as raised
            results.append((False, f"{type(e).__name__}: {e}"))
    return results


def first_diff(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    lo = max(0, i - 60)
    return i, repr(a[lo:i + 60]), repr(b[lo:i + 60])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--templates", required=True, help="folder of *.jinja")
    ap.add_argument("--tokenizer-config", help="a tokenizer_config.json with a chat_template")
    ap.add_argument("--only", help="substring filter on template names")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import chat_template_utils as ctu
    except Exception as e:  # pragma: no cover
        print(f"SKIP: cannot import transformers: {e}")
        return 77
    ctu.datetime = _FrozenDatetime  # strftime_now reads chat_template_utils.datetime.now()

    templates = []
    for path in sorted(glob.glob(os.path.join(args.templates, "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            templates.append((os.path.basename(path), f.read()))
    if args.tokenizer_config and os.path.exists(args.tokenizer_config):
        with open(args.tokenizer_config, encoding="utf-8") as f:
            templates.append(("qwen3:tokenizer_config.json", json.load(f)["chat_template"]))
    templates += [(f"snippet:{i}", src) for i, src in enumerate(LANGUAGE_SNIPPETS)]
    if args.only:
        templates = [t for t in templates if args.only in t[0]]
    if not templates:
        print(f"SKIP: no templates under {args.templates}")
        return 77

    cases = corpus()
    contexts = build_contexts(cases, ctu)
    t0 = time.time()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as job:
        json.dump({"templates": [{"name": n, "source": s} for n, s in templates], "contexts": contexts,
                   "now": list(FROZEN), "alias_reasoning": True}, job, ensure_ascii=False)
        job_path = job.name
    try:
        proc = subprocess.run([args.tool, job_path], capture_output=True, timeout=150)
    finally:
        os.unlink(job_path)
    if proc.returncode != 0:
        print(proc.stderr.decode(errors="replace"))
        print(f"FAIL: {args.tool} exited {proc.returncode}")
        return 1
    ours = json.loads(proc.stdout.decode("utf-8"))["results"]
    t_parley = time.time() - t0

    t0 = time.time()
    total = matched = both_raised = 0
    mismatches = []
    for (name, source), mine in zip(templates, ours):
        ref = render_reference(source, cases, ctu)
        for (case_name, _m, _k), (ref_ok, ref_text), k in zip(cases, ref, range(len(cases))):
            total += 1
            if mine["parse_error"] is not None:
                ok, text = False, mine["parse_error"]
            else:
                r = mine["renders"][k]
                ok, text = r["ok"], r.get("text") if r["ok"] else r.get("error")
            if ok and ref_ok and text == ref_text:
                matched += 1
            elif not ok and not ref_ok:
                both_raised += 1
                if args.verbose:
                    print(f"  both raised {name} / {case_name}:\n    jinja2: {ref_text[:160]}\n    parley: {text[:160]}")
            else:
                mismatches.append((name, case_name, ref_ok, ref_text, ok, text))
    t_ref = time.time() - t0

    for name, case_name, ref_ok, ref_text, ok, text in mismatches:
        print(f"MISMATCH {name} / {case_name}")
        if ref_ok and ok:
            i, a, b = first_diff(ref_text, text)
            print(f"  first difference at char {i} (len {len(ref_text)} vs {len(text)})\n    jinja2: {a}\n    parley: {b}")
        else:
            print(f"  jinja2 {'rendered' if ref_ok else 'raised'}: {ref_text[:300]!r}")
            print(f"  parley {'rendered' if ok else 'raised'}: {text[:300]!r}")
    per_template_fail = sorted({m[0] for m in mismatches})
    print(f"{len(templates)} templates x {len(cases)} cases = {total}: {matched} identical, "
          f"{both_raised} raised on both sides, {len(mismatches)} mismatched "
          f"(templates with mismatches: {len(per_template_fail)}); "
          f"parley {t_parley:.1f}s, jinja2 {t_ref:.1f}s")
    if per_template_fail:
        print("templates with mismatches: " + ", ".join(per_template_fail))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
