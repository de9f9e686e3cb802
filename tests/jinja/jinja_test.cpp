// The Jinja interpreter's language, against outputs jinja2 3.1.6 produced in transformers'
// chat-template environment (trim_blocks, lstrip_blocks, loopcontrols, its tojson; the
// table was generated from jinja2, not written by hand), and its failure modes: errors
// that name the template and line, unsupported features refused at load time, bad input
// that must fail cleanly rather than crash.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "text/jinja/chat_template.h"

namespace parley {
namespace {

using ::testing::HasSubstr;

struct Golden {
  const char* name;
  const char* source;
  const char* context;
  const char* expected;
};

// strftime_now's frozen clock in the table: 2025-07-26 14:30:05, a Saturday.
std::tm frozen_time() {
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 14;
  tm.tm_min = 30;
  tm.tm_sec = 5;
  tm.tm_wday = 6;
  tm.tm_yday = 206;
  return tm;
}

const Golden kGolden[] = {
    {"ws_trim_lstrip", "{% if true %}\n  yes\n{% endif %}\nafter\n", "{}", "  yes\nafter"},
    {"ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
    {"ws_var_minus", "x \n {{- 'y' -}} \n z", "{}", "xyz"},
    {"ws_plus", "  {%+ if true %}k{% endif +%}\nend", "{}", "  k\nend"},
    {"ws_comment", "a\n  {# note #}\nb {#- gone -#} c", "{}", "a\nbc"},
    {"ws_raw", "{% raw %}{{ not parsed }}{% endraw %}|", "{}", "{{ not parsed }}|"},
    {"ws_crlf", "line1\r\n{% if true %}\r\nline2\r\n{% endif %}\r\n", "{}", "line1\nline2\n"},
    {"ws_indent_in_line", "x {% if true %}y{% endif %}\n", "{}", "x y"},
    {"loop_vars",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
     "}}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "{}", "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"loop_prev_next",
     "{% for x in [1,2,3] %}{{ loop.previtem|default('-') }}{{ x }}{{ loop.nextitem|default('-') "
     "}} {% endfor %}",
     "{}", "-12 123 23- "},
    {"loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a','b') }}{% endfor %}", "{}", "ababa"},
    {"loop_filter_else",
     "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% else %}none{% endfor "
     "%}|{% for x in [] %}x{% else %}empty{% endfor %}",
     "{}", "1,3,5,7,9|empty"},
    {"loop_break_continue",
     "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% "
     "endif %}{{ x }}{% endfor %}",
     "{}", "0134"},
    {"loop_unpack",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|dictsort %}{{ k }}{% "
     "endfor %}",
     "{\"d\": {\"b\": 2, \"a\": 1}}", "b=2;a=1;ab"},
    {"loop_scope",
     "{% set x = 0 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}/{{ x }}", "{}",
     "012/0"},
    {"loop_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"z\": 1, \"y\": 2}}",
     "zy"},
    {"macro_defaults",
     "{% macro m(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) "
     "}}{{ m(1, c=3) }}{{ m(a='x', b='y') }}",
     "{}", "[1BNone][12None][1B3][xyNone]"},
    {"macro_late_binding",
     "{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}", "{}",
     "12"},
    {"macro_recursion",
     "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}", "{}",
     "4321"},
    {"macro_varargs_kwargs",
     "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", "{}",
     "1(2, 3){'k': 'v'}"},
    {"macro_set_local",
     "{% set y = 'outer' %}{% macro m() %}{% set y = 'inner' %}{{ y }}{% endmacro %}{{ m() }}{{ y "
     "}}",
     "{}", "innerouter"},
    {"namespace",
     "{% set ns = namespace(count=0, items=[]) %}{% for i in range(3) %}{% set ns.count = ns.count "
     "+ i %}{% endfor %}{{ ns.count }}{{ ns.items }}",
     "{}", "3[]"},
    {"set_block",
     "{% set body %}\n  hi {{ 1 + 1 }}\n{% endset %}[{{ body }}]{% set t | trim | upper %} pad {% "
     "endset %}[{{ t }}]",
     "{}", "[  hi 2\n][PAD]"},
    {"set_tuple", "{% set a, b = 'xy' %}{{ b }}{{ a }}{% set c, d = [1, 2] %}{{ c + d }}", "{}",
     "yx3"},
    {"filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", "{}", "ABC D"},
    {"generation_block",
     "{% for m in ['a', 'b'] %}{% generation %}<{{ m }}>{% endgeneration %}{% endfor %}", "{}",
     "<a><b>"},
    {"literals",
     "{{ 1 }} {{ 1.0 }} {{ 1e-5 }} {{ 1.5e20 }} {{ 0.1 + 0.2 }} {{ true }} {{ none }} {{ True and "
     "False }} {{ 'a' 'b' }} {{ \"q\\\"\\n\\t\\u00e9\" }}",
     "{}", "1 1.0 1e-05 1.5e+20 0.30000000000000004 True None False ab q\"\n\té"},
    {"arith",
     "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} "
     "{{ 7.5 // 2 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 1 + 2.5 }} {{ true + 1 }} {{ 10 - 2 * 3 }}",
     "{}", "3 -4 2 -2 3.5 1024 0.5 3.0 ababab [1, 1] 3.5 2 4"},
    {"repr",
     "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }} {{ (1,) }} {{ () }} {{ {'a': [1, (2, 3)]} "
     "}} {{ 'x'|list }}",
     "{}", "[1, 'a', None, True, 1.5, {'k': \"it's\"}] (1,) () {'a': [1, (2, 3)]} ['x']"},
    {"slicing",
     "{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ l[-2:] }}|{{ l[::-1] }}|{{ l[5:] "
     "}}|{{ s[-1] }}|{{ l[1:3] }}",
     "{\"s\": \"héllo✓\", \"l\": [1, 2, 3, 4]}",
     "éllo✓|héllo|✓olléh|hlo|[3, 4]|[4, 3, 2, 1]|[]|✓|[2, 3]"},
    {"compare_in",
     "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' }} {{ 'x' not in ['x'] }} {{ 'k' in {'k': 1} "
     "}} {{ 1 == 1.0 }} {{ [1, 2] == [1, 2] }} {{ 'b' > 'a' }}",
     "{}", "True False True False True True True True"},
    {"and_or_values",
     "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|{{ none or [] }} {{ not 0 }}", "{}",
     "x b |[] True"},
    {"cond_expr",
     "{{ 'y' if 1 else 'n' }}{{ 'y' if 0 }}|{{ 'a' if false else 'b' if true else 'c' }}", "{}",
     "y|b"},
    {"attr_vs_item",
     "{{ d.items is defined }} {{ d['items'] }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ "
     "d.values()|list }} {{ d.missing }}|{{ none.foo }}|",
     "{\"d\": {\"items\": \"I\", \"a\": 1}}", "True I dflt ['items', 'a'] ['I', 1] ||"},
    {"str_methods",
     "{{ s.split() }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ '  x  '.strip() }}|{{ "
     "'xxhixx'.strip('x') }} {{ s.startswith(('a', ' ')) }} {{ s.endswith('c ') }} {{ "
     "'a-b'.replace('-', '+') }} {{ 'Hello World'.lower() }} {{ 'hello world'.title() }} {{ "
     "'abc'.upper() }} {{ s.find('b') }} {{ 'x{}y{}'.format(1, 'z') }} {{ "
     "'{:>5}|{:.2f}'.format('a', 3.14159) }} {{ '12'.isdigit() }} {{ 'ab'.capitalize() }}",
     "{\"s\": \" a,b, c \"}",
     "['a,b,', 'c'] [' a', 'b, c '] [' a,b', ' c '] x|hi True True a+b hello world Hello World ABC "
     "3 x1yz     a|3.14 True Ab"},
    {"string_concat", "{{ 'a' ~ 1 ~ none ~ [2] }} {{ 'a' + 'b' }} {{ undefined_thing ~ 'x' }}",
     "{}", "a1None[2] ab x"},
    {"tests",
     "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ 1 is "
     "number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is iterable }} {{ "
     "'s' is sequence }} {{ true is boolean }} {{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby "
     "3 }} {{ 'a' is equalto 'a' }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ x is callable }} {{ "
     "1 is in [1] }} {{ 3 is gt 2 }}",
     "{\"x\": 1}",
     "True True True True True True True True True True True True True True True True True False "
     "True True"},
    {"tojson",
     "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ 'é'|tojson "
     "}}|{{ 'é'|tojson(ensure_ascii=True) }}|{{ d|tojson(sort_keys=true) }}|{{ [1.0, 1e-5, "
     "3]|tojson }}",
     "{\"d\": {\"z\": [1, {\"a\": null}], \"b\": true, \"k\": \"<&'\\\">\"}}",
     "{\"z\": [1, {\"a\": null}], \"b\": true, \"k\": \"<&'\\\">\"}|{\n  \"z\": [\n    1,\n    {\n "
     "     \"a\": null\n    }\n  ],\n  \"b\": true,\n  \"k\": "
     "\"<&'\\\">\"\n}|{\"z\":[1,{\"a\":null}],\"b\":true,\"k\":\"<&'\\\">\"}|\"é\"|\"\\u00e9\"|{"
     "\"b\": true, \"k\": \"<&'\\\">\", \"z\": [1, {\"a\": null}]}|[1.0, 1e-05, 3]"},
    {"filters_text",
     "{{ '  x '|trim }}|{{ 'xax'|trim('x') }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'hello "
     "WORLD-x'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aXbX'|replace('X', '-') }}|{{ "
     "'aXbX'|replace('X', '-', 1) }}|{{ 'héllo'|length }}|{{ 'one two  three'|wordcount }}|{{ "
     "'ab'|center(6) }}|",
     "{}", "x|a|ABC|abc|Hello World-X|Hello|a-b-|a-bX|5|3|  ab  |"},
    {"filters_default",
     "{{ missing|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|d('n', "
     "boolean=true) }} {{ 0|default(5) }}",
     "{}", "d  d n 0"},
    {"filters_seq",
     "{{ l|join(', ') }}|{{ l|first }}|{{ l|last }}|{{ l|reverse|list }}|{{ l|sort|list }}|{{ "
     "l|sort(reverse=true) }}|{{ l|sum }}|{{ l|min }}|{{ l|max }}|{{ l|unique|list }}|{{ l|length "
     "}}|{{ l|batch(2)|list }}|{{ l|map('string')|join }}|{{ l|select('odd')|list }}|{{ "
     "l|reject('odd')|list }}",
     "{\"l\": [3, 1, 2, 3]}",
     "3, 1, 2, 3|3|3|[3, 2, 1, 3]|[1, 2, 3, 3]|[3, 3, 2, 1]|9|1|3|[3, 1, 2]|4|[[3, 1], [2, "
     "3]]|3123|[3, 1, 3]|[2]"},
    {"filters_attr",
     "{{ p|map(attribute='name')|join(',') }}|{{ p|selectattr('age', 'gt', "
     "20)|map(attribute='name')|list }}|{{ p|rejectattr('admin')|list|length }}|{{ "
     "p|sort(attribute='age')|map(attribute='name')|join }}|{{ p|map(attribute='x', "
     "default='?')|join }}|{{ p|selectattr('admin')|first }}|{{ "
     "p|unique(attribute='age')|list|length }}",
     "{\"p\": [{\"name\": \"a\", \"age\": 30, \"admin\": true}, {\"name\": \"b\", \"age\": 10}, "
     "{\"name\": \"c\", \"age\": 30}]}",
     "a,b,c|['a', 'c']|2|bac|???|{'name': 'a', 'age': 30, 'admin': True}|2"},
    {"filters_misc",
     "{{ '42'|int + 1 }} {{ 'x'|int }} {{ '3.7'|int }} {{ 3.7|int }} {{ '2.5'|float }} {{ -3|abs "
     "}} {{ 2.567|round(2) }} {{ 2.5|round }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'a': "
     "1}|items|list }} {{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 12|string ~ "
     "'x' }}",
     "{}", "43 0 3 3 2.5 3 2.57 2.0 [('a', 2), ('b', 1)] [('a', 1)] a\n  b\n\n  c|  a\n  b|12x"},
    {"markup", "{{ 'a'|safe + '<b>' }} {{ '<'|e }} {{ ('x'|safe) ~ '<' }} {{ '<' + 'y'|safe }}",
     "{}", "a&lt;b&gt; &lt; x< &lt;y"},
    {"globals",
     "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1, b=2) }} {{ strftime_now('%Y-%m-%d "
     "%H:%M %A') }}",
     "{}", "[0, 1, 2] [1, 3, 5] {'a': 1, 'b': 2} 2025-07-26 14:30 Saturday"},
    {"undefined_print",
     "[{{ nope }}][{{ nope|length }}][{{ nope|string }}][{% for x in nope %}x{% endfor %}][{{ nope "
     "is defined }}]",
     "{}", "[][0][][][False]"},
    {"conversation",
     "{% for m in messages %}{{ '<|' + m.role + '|>' }}{% if m.content is string %}{{ "
     "m.content|trim }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}\n{% "
     "endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}, {\"role\": \"assistant\", "
     "\"content\": [{\"type\": \"text\", \"text\": \"yo\"}]}], \"add_generation_prompt\": true}",
     "<|user|>hi<|assistant|>yo<|assistant|>"},
    {"format_cycler_joiner",
     "{{ '%s-%s'|format('a', 1) }} {{ '%(x)s!'|format(x=2) }} {{ '%d%%'|format(5) }}|{% set c = "
     "cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.current }}{{ c.next() }}{% set j = "
     "joiner('|') %}{% for x in [1,2,3] %}{{ j() }}{{ x }}{% endfor %}",
     "{}", "a-1 2! 5%|abaa1|2|3"},
};

TEST(Jinja, MatchesJinja2Goldens) {
  ChatTemplateOptions options;
  options.now = frozen_time;
  for (const Golden& g : kGolden) {
    SCOPED_TRACE(g.name);
    std::string out;
    try {
      out = ChatTemplate::parse(g.source, g.name)
                .render(nlohmann::ordered_json::parse(g.context), options);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_EQ(out, g.expected);
  }
}

// Renders source over an empty context; returns the Error it throws (fails if none).
Error render_error(const std::string& source, const nlohmann::ordered_json& ctx = {}) {
  try {
    ChatTemplate t = ChatTemplate::parse(source, "t.jinja");
    t.render(ctx.is_null() ? nlohmann::ordered_json::object() : ctx);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return Error(ErrorKind::internal, "none");
}

TEST(Jinja, RaiseExceptionCarriesMessageAndLine) {
  Error e = render_error(
      "line1\n{% if true %}\n{{ raise_exception('Roles must alternate!') }}\n{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  EXPECT_STREQ(e.what(), "[jinja] t.jinja:3: Roles must alternate!");
}

TEST(Jinja, UnknownFilterFailsAtParseTimeWithLine) {
  try {
    ChatTemplate::parse("ok\n\n{{ x | frobnicate }}", "model/chat_template.jinja");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_STREQ(e.what(), "[jinja] model/chat_template.jinja:3: no filter named 'frobnicate'");
  }
}

TEST(Jinja, UnknownTestAndStatementFailAtParseTime) {
  for (const char* src :
       {"{{ x is frobbed }}", "{% if a %}{% for x in y %}{{ x|frob }}{% endfor %}{% endif %}",
        "{% include 'other.jinja' %}", "{% extends 'base' %}", "{% frobnicate %}",
        "{% for x in y recursive %}{% endfor %}"}) {
    SCOPED_TRACE(src);
    try {
      ChatTemplate::parse(src);
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      EXPECT_THAT(e.what(), HasSubstr("chat_template:1:"));
    }
  }
}

TEST(Jinja, UnknownFilterInsideIfWaitsUntilReached) {
  // jinja2 defers these (DeepSeek's templates rely on it); reaching one still fails loudly.
  ChatTemplate t = ChatTemplate::parse("{% if x %}{{ x | from_json }}{% endif %}done");
  EXPECT_NO_THROW(ChatTemplate::parse("{% if x is frobbed %}{% endif %}{{ 1 if x|frob else 2 }}"));
  EXPECT_EQ(t.render(nlohmann::ordered_json::object()), "done");
  try {
    t.render(nlohmann::ordered_json{{"x", "1"}});
    FAIL() << "rendered";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_THAT(e.what(), HasSubstr("from_json"));
  }
}

TEST(Jinja, UndefinedRules) {
  ChatTemplate t = ChatTemplate::parse("[{{ foo }}{{ d.missing }}{{ none.x }}]");
  EXPECT_EQ(t.render(nlohmann::ordered_json{{"d", nlohmann::ordered_json::object()}}), "[]");
  EXPECT_STREQ(render_error("a\n{{ foo.bar }}").what(), "[jinja] t.jinja:2: 'foo' is undefined");
  EXPECT_STREQ(render_error("{{ d.a.b }}", {{"d", nlohmann::ordered_json::object()}}).what(),
               "[jinja] t.jinja:1: 'dict object' has no attribute 'a'");
  EXPECT_THAT(render_error("{{ foo + 1 }}").what(), HasSubstr("'foo' is undefined"));
  EXPECT_THAT(
      render_error("{{ messages[0].role }}", {{"messages", nlohmann::ordered_json::array()}})
          .what(),
      HasSubstr("list object has no element 0"));
}

TEST(Jinja, SandboxRefusesMutation) {
  EXPECT_THAT(render_error("{% set l = [] %}{{ l.append(1) }}").what(),
              HasSubstr("access to attribute 'append' of 'list' object is unsafe"));
  EXPECT_THAT(render_error("{{ d.pop('a') }}", {{"d", {{"a", 1}}}}).what(), HasSubstr("unsafe"));
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% set ns._x = 1 %}").what(),
              HasSubstr("underscore-prefixed"));
}

TEST(Jinja, TypeErrorsCarryTheLine) {
  EXPECT_STREQ(render_error("\n\n{{ 'a' + 1 }}").what(),
               "[jinja] t.jinja:3: can only concatenate str (not \"int\") to str");
  EXPECT_THAT(render_error("{{ 1 // 0 }}").what(), HasSubstr("division or modulo by zero"));
  EXPECT_THAT(render_error("{% for x in 5 %}{% endfor %}").what(), HasSubstr("not iterable"));
  EXPECT_THAT(render_error("{{ [1]|tojson }}{{ x|tojson }}").what(),
              HasSubstr("not JSON serializable"));
  EXPECT_THAT(render_error("{{ range(1000000)|length }}").what(), HasSubstr("Range too big"));
}

TEST(Jinja, SyntaxErrorsAreInvalidArgumentWithLine) {
  struct Bad {
    const char* source;
    const char* message;
  };
  for (const Bad& b : std::initializer_list<Bad>{
           {"a\n{{ x", "t.jinja:2: unexpected end of template, expected end of print statement"},
           {"{% if x %}never closed",
            "t.jinja:1: unexpected end of template; looking for the tags 'elif' or 'else' or "
            "'endif'"},
           {"{% if x", "t.jinja:1: unexpected end of template, expected end of statement block"},
           {"x\n{# unterminated", "t.jinja:2: Missing end of comment tag"},
           {"{{ 'abc }}", "t.jinja:1: unexpected end of string literal"},
           {"{{ (1 }}", "t.jinja:1: unexpected '}', expected ')'"},
           {"{{ 1) }}", "t.jinja:1: unexpected ')'"},
           {"{{ [1, 2) }}", "t.jinja:1: unexpected ')', expected ']'"},
           {"{% endfor %}", "t.jinja:1: unknown statement 'endfor'"},
           {"{% raw %}open", "t.jinja:1: Missing end of raw directive"},
           {"{{ }}", "t.jinja:1: expected an expression"},
           {"{{ a b }}", "t.jinja:1: expected end of print statement, got 'b'"},
           {"{% break %}", "t.jinja:1: 'break' outside of a loop"},
           {"{{ x | }}", "t.jinja:1: expected a name"},
           {"{{ x is }}", "t.jinja:1: expected a name"},
           {"{% macro m(a=1, b) %}{% endmacro %}",
            "t.jinja:1: non-default argument follows default argument"},
           {"{{ $ }}", "t.jinja:1: unexpected char '$'"},
       }) {
    SCOPED_TRACE(b.source);
    try {
      ChatTemplate::parse(b.source, "t.jinja");
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(b.message));
      EXPECT_TRUE(e.kind() == ErrorKind::invalid_argument || e.kind() == ErrorKind::unsupported);
    }
  }
}

TEST(Jinja, DeepNestingAndRecursionAreBounded) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(render_error(deep).what(), HasSubstr("nesting is too deep"));
  std::string deep_ifs;
  for (int i = 0; i < 1000; ++i) deep_ifs += "{% if true %}";
  EXPECT_THAT(render_error(deep_ifs).what(), HasSubstr("nesting is too deep"));
  EXPECT_THAT(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").what(),
              HasSubstr("maximum recursion depth exceeded"));
  std::string deep_list = "{{ x|tojson }}";
  nlohmann::ordered_json nested = 1;
  for (int i = 0; i < 600; ++i) nested = nlohmann::ordered_json::array({nested});
  EXPECT_THAT(render_error(deep_list, {{"x", nested}}).what(), HasSubstr("recursion"));
}

TEST(Jinja, RunawayTemplatesHitTheRenderBudget) {
  ChatTemplateOptions small;
  small.max_loop_iterations = 1000;
  small.max_output_bytes = 4096;
  auto error_of = [&](const char* src) {
    try {
      ChatTemplate::parse(src).render(nlohmann::ordered_json::object(), small);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(
      error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}"),
      HasSubstr("more than 1000 loop iterations"));
  EXPECT_THAT(error_of("{% for i in range(900) %}0123456789{% endfor %}"),
              HasSubstr("exceeds 4096 bytes"));
  EXPECT_THAT(error_of("{{ 'x' * 100000 }}"), HasSubstr("too large"));
  EXPECT_EQ(error_of("{% for i in range(999) %}{% endfor %}ok"), "no error");
}

TEST(Jinja, GarbageNeverCrashes) {
  // Every prefix of a real template, and some byte soup: an Error or a render, nothing else.
  std::string src =
      "{%- for m in messages -%}{{- '<|' ~ m['role'] ~ '|>' + (m.content|trim) }}{% if loop.last "
      "and add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}{# c #}{% endfor %}\xff\xfe{{ "
      "'é' }}";
  nlohmann::ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", " hi "}}}},
                                {"add_generation_prompt", true}};
  for (size_t n = 0; n <= src.size(); ++n) {
    try {
      ChatTemplate::parse(src.substr(0, n)).render(ctx);
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(ChatTemplate::parse(src).render(ctx), "<|user|>hi<|assistant|>\xff\xfe\xc3\xa9");
}

TEST(Jinja, ContextKeyOrderIsKeptForTojson) {
  ChatTemplate t = ChatTemplate::parse("{{ tools|tojson }}");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({"tools": [{"z": 1, "a": 2}]})");
  EXPECT_EQ(t.render(ctx), R"([{"z": 1, "a": 2}])");
  // nlohmann::json sorts keys on its own; that overload can only pass them on sorted.
  EXPECT_EQ(t.render(nlohmann::json::parse(R"({"tools": [{"z": 1, "a": 2}]})")),
            R"([{"a": 2, "z": 1}])");
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("parley_jinja_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return (path_ / name).string();
  }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
  static inline int counter_ = 0;
};

TEST(ChatTemplateLoader, ReadsTokenizerConfigTemplateAndTokens) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"},
    "eos_token": "</s>",
    "chat_template": [{"name": "default", "template": "{{ bos_token }}D{{ eos_token }}"},
                      {"name": "tool_use", "template": "T"}]})");
  LoadedChatTemplate d = load_chat_template(dir.str());
  EXPECT_EQ(d.bos_token, "<s>");
  EXPECT_EQ(d.eos_token, "</s>");
  nlohmann::ordered_json ctx = {{"bos_token", d.bos_token}, {"eos_token", d.eos_token}};
  EXPECT_EQ(d.tmpl.render(ctx), "<s>D</s>");
  EXPECT_EQ(load_chat_template(dir.str(), "tool_use").tmpl.render(ctx), "T");
  try {
    load_chat_template(dir.str(), "rag");
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
    EXPECT_THAT(e.what(), HasSubstr("default, tool_use"));
  }
  // chat_template.jinja wins over tokenizer_config.json.
  dir.write("chat_template.jinja", "J{{ eos_token }}\n");
  EXPECT_EQ(load_chat_template(dir.str()).tmpl.render(ctx), "J</s>");
}

TEST(ChatTemplateLoader, MissingTemplateIsNotFound) {
  TempDir dir;
  try {
    load_chat_template(dir.str());
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
  }
  dir.write("tokenizer_config.json", "{not json");
  try {
    load_chat_template(dir.str());
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  }
}

TEST(ChatTemplateLoader, Qwen3TemplateRendersAConversation) {
  std::string dir = std::string(PARLEY_TEST_DATA) + "/llm";
  if (!std::filesystem::exists(dir + "/tokenizer_config.json")) GTEST_SKIP() << "no " << dir;
  LoadedChatTemplate q = load_chat_template(dir);
  nlohmann::ordered_json ctx = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
      {"add_generation_prompt", true},
      {"enable_thinking", false}};
  EXPECT_EQ(q.tmpl.render(ctx),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(q.eos_token, "<|im_end|>");
}

}  // namespace
}  // namespace parley
