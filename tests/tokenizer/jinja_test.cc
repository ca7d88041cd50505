// Unit tests of the Jinja-subset interpreter behind chat templates: expressions and their
// Python semantics, loops, macros, filters, tests, methods, whitespace control as transformers
// configures Jinja2, and errors (clear Status, bounded work) for what it does not support.
// Expected strings are what Python Jinja2 3.1 prints for the same source (checked), except
// where a comment notes a deliberate difference: tuples and dict views are plain lists here.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_parser.h"

namespace cohort::tokenizer::jinja {
namespace {

using Vars = std::vector<std::pair<std::string, Value>>;

Result<std::string> TryRender(const std::string& source, const Vars& vars = {}, RenderLimits limits = {}) {
  COHORT_ASSIGN_OR_RETURN(Body body, Parse(source));
  Interpreter interp(body, limits);
  AddGlobalFunctions(interp, 1742040000);  // 2025-03-15 12:00:00 UTC
  for (const auto& [name, value] : vars) interp.SetGlobal(name, value);
  return interp.Render();
}

std::string Render(const std::string& source, const Vars& vars = {}) {
  auto text = TryRender(source, vars);
  EXPECT_TRUE(text.ok()) << source << "\n" << text.status().ToString();
  return text.ok() ? *text : "<error>";
}

Status RenderError(const std::string& source, const Vars& vars = {}, RenderLimits limits = {}) {
  auto text = TryRender(source, vars, limits);
  EXPECT_FALSE(text.ok()) << source << " rendered " << (text.ok() ? *text : "");
  return text.ok() ? Status::Ok() : text.status();
}

Value Message(const std::string& role, const std::string& content) {
  Value m = Value::MakeDict();
  m.dict->Set("role", Value::Str(role));
  m.dict->Set("content", Value::Str(content));
  return m;
}

TEST(JinjaExpressions, ArithmeticFollowsPython) {
  EXPECT_EQ(Render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 10 }}"), "7 9 1024");
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }}"), "3 -4 1 2 3.5 2.0");
  EXPECT_EQ(Render("{{ 1 + 0.5 }} {{ -3 }} {{ 'ab' * 3 }} {{ [1] + [2] }}"), "1.5 -3 ababab [1, 2]");
}

TEST(JinjaExpressions, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(Render("{{ 0.1 }} {{ 1.0 }} {{ 3.14 }} {{ 1e-5 }} {{ 1e20 }} {{ 2.5e15 }} {{ 0.0001 }}"),
            "0.1 1.0 3.14 1e-05 1e+20 2500000000000000.0 0.0001");
}

TEST(JinjaExpressions, ComparisonsLogicAndMembership) {
  EXPECT_EQ(Render("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 < 3 }} {{ 'b' >= 'a' }} {{ not 1 == 2 }}"),
            "True True True True True");
  // `and`/`or` yield an operand, not a bool (Kimi's `message.get('name') or message['role']`).
  EXPECT_EQ(Render("[{{ '' or 'x' }}] [{{ 0 and 1 }}] [{{ 'a' and 'b' }}] [{{ none or '' }}]"), "[x] [0] [b] []");
  EXPECT_EQ(Render("{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "True True True True");
  EXPECT_EQ(Render("{{ 'y' if 1 > 2 else 'n' }}|{{ 'y' if false }}|"), "n||");
}

TEST(JinjaExpressions, FilterBindsTighterThanOperators) {
  Vars vars = {{"s", Value::Str("  x  ")}, {"items", Value::MakeList({Value::Int(1), Value::Int(2)})}};
  EXPECT_EQ(Render("{{ '[' + s | trim + ']' }} {{ items | length - 1 }} {{ -2 | abs }}", vars), "[x] 1 2");
}

TEST(JinjaExpressions, LiteralsAndReprOfContainers) {
  EXPECT_EQ(Render("{{ [1, 'a', none, true, 1.5, \"it's\"] }}"), "[1, 'a', None, True, 1.5, \"it's\"]");
  // Python would print the tuple as (1, 2).
  EXPECT_EQ(Render("{{ {'a': 1, 'b': [false]} }} {{ (1, 2) }} {{ none }} {{ undefined_name }}|"),
            "{'a': 1, 'b': [False]} [1, 2] None |");
  EXPECT_EQ(Render("{{ 'a\\tb\\n' }}{{ \"q\\\"\" }}{{ 'x' 'y' }}"), "a\tb\nq\"xy");
}

TEST(JinjaExpressions, SubscriptsAndSlices) {
  Vars vars = {{"xs", Value::MakeList({Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)})},
               {"m", Message("user", "hi")}};
  EXPECT_EQ(Render("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[:-2] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[9] }}", vars),
            "14[2, 3, 4][1, 2][4, 3, 2, 1][1, 3]");
  EXPECT_EQ(Render("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo'[-4:] }}"),
            "el olleh é éllo");
  EXPECT_EQ(Render("{{ m.role }} {{ m['content'] }} {{ m.missing is defined }} {{ m.0 is defined }}", vars),
            "user hi False False");
}

TEST(JinjaStatements, LoopVariables) {
  EXPECT_EQ(Render("{% for x in ['a', 'b', 'c'] %}{{ x }}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}"),
            "a10TrueFalse33|b21FalseFalse32|c32FalseTrue31|");
}

TEST(JinjaStatements, LoopElseFilterBreakContinue) {
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ '.' if loop.last }}{% endfor %}"), "0369.");
  EXPECT_EQ(Render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"
                   "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}"),
            "a=1;b=2;xy");
  EXPECT_EQ(Render("{% for c in 'hé' %}[{{ c }}]{% endfor %}"), "[h][é]");
}

TEST(JinjaStatements, SetScopingAndNamespaces) {
  // A plain `set` inside a loop stays in the loop; a namespace carries state out.
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Render("{% set ns = namespace(n=0, seen=[]) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}"
                   "{% set _ = ns.seen.append(i * 10) %}{% endfor %}{{ ns.n }} {{ ns.seen }}"),
            "6 [10, 20, 30]");
  EXPECT_EQ(Render("{% set ns = namespace() %}{% set ns.flag = true %}{{ ns.flag }}"), "True");
  EXPECT_EQ(Render("{% set block %}a{{ 1 + 1 }}b{% endset %}[{{ block }}]"), "[a2b]");
  EXPECT_EQ(Render("{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}"), "c");
  EXPECT_EQ(Render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
}

TEST(JinjaStatements, Macros) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Ann! Hi Bob? Hi Cy.");
  EXPECT_EQ(Render("{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}"), "G");
}

TEST(JinjaWhitespace, DashMarkersStripAllWhitespace) {
  EXPECT_EQ(Render("a  \n {%- if true %} b {% endif -%} \n c"), "a b c");
  EXPECT_EQ(Render("x {{- 'y' -}} z"), "xyz");
  EXPECT_EQ(Render("a {#- comment -#} b"), "ab");
}

TEST(JinjaWhitespace, TrimBlocksEatsOneNewlineAfterBlockTags) {
  EXPECT_EQ(Render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(Render("a {# c #}\nb"), "a b");
  // Not after expressions.
  EXPECT_EQ(Render("{{ 'x' }}\ny"), "x\ny");
  // `+%}` keeps the newline.
  EXPECT_EQ(Render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentBeforeBlockTags) {
  EXPECT_EQ(Render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(Render("a\n    {% if true %}x\n    {% endif %}\nb"), "a\nx\nb");
  // Only at a line start, never before `{{`, and not with `{%+`.
  EXPECT_EQ(Render("a  {% if true %}x{% endif %}"), "a  x");
  EXPECT_EQ(Render("  {{ 'x' }}"), "  x");
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(JinjaWhitespace, OneTrailingNewlineIsDropped) {
  EXPECT_EQ(Render("x\n"), "x");
  EXPECT_EQ(Render("x\n\n"), "x\n");
  EXPECT_EQ(Render("a\r\nb"), "a\nb");
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(Render("{{ '  a b \\n' | trim }}|{{ 'aXbX' | replace('X', '-') }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}"),
            "a b|a-b-|AB|ab");
  EXPECT_EQ(Render("{{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ 42 | string }} {{ 'héllo' | length }}"),
            "Hello World Hello 42 5");
  EXPECT_EQ(Render("{{ 'a\\nb' | indent(2) }}|{{ '3' | int + 1 }}|{{ '2.5' | float }}"), "a\n  b|4|2.5");
}

TEST(JinjaFilters, DefaultFirstLastJoinItems) {
  EXPECT_EQ(Render("{{ nope | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }}"), "d None d");
  EXPECT_EQ(Render("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 'abc' | last }}"), "13c");
  // Python would print the item pair as a tuple.
  EXPECT_EQ(Render("{{ ['a', 'b'] | join(', ') }}|{{ [1, 2] | join }}|{{ {'k': 'v'} | items | list }}"),
            "a, b|12|[['k', 'v']]");
  EXPECT_EQ(Render("{{ [3, 1, 2] | sort }} {{ [1, 1, 2] | unique | list }} {{ [1, 2] | reverse | list }}"),
            "[1, 2, 3] [1, 2] [2, 1]");
}

TEST(JinjaFilters, SelectAttrRejectAttrMap) {
  Vars vars = {{"msgs", Value::MakeList({Message("system", "s"), Message("user", "u1"), Message("user", "u2")})}};
  EXPECT_EQ(Render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", vars),
            "u1,u2");
  EXPECT_EQ(Render("{{ msgs | rejectattr('role', 'equalto', 'user') | list | length }}", vars), "1");
  EXPECT_EQ(Render("{{ ['a', 'b'] | map('upper') | list }} {{ [0, 1, 2] | select | list }} "
                   "{{ [1, 2, 3, 4] | reject('even') | list }}"),
            "['A', 'B'] [1, 2] [1, 3]");
  EXPECT_EQ(Render("{{ none | selectattr('x') | list }}"), "[]");
}

TEST(JinjaFilters, ToJsonMatchesJsonDumps) {
  EXPECT_EQ(Render("{{ {'a': [1, 2.5, none, true], 'b': 'x\"y\\n'} | tojson }}"),
            "{\"a\": [1, 2.5, null, true], \"b\": \"x\\\"y\\n\"}");
  EXPECT_EQ(Render("{{ {'a': 1, 'b': [1]} | tojson(indent=2) }}"), "{\n  \"a\": 1,\n  \"b\": [\n    1\n  ]\n}");
  // transformers passes ensure_ascii=False: non-ASCII stays UTF-8.
  EXPECT_EQ(Render("{{ 'é<&>' | tojson }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"),
            "\"é<&>\" {\"a\": 2, \"b\": 1}");
  EXPECT_EQ(Render("{{ {512: 128} | tojson }} {% for k, v in {2: 'x'}.items() %}{{ k + 1 }}{% endfor %}"),
            "{\"512\": 128} 3");
}

TEST(JinjaTests, IsTests) {
  Vars vars = {{"m", Message("user", "hi")}, {"n", Value::None()}};
  EXPECT_EQ(Render("{{ m is defined }}{{ x is defined }}{{ x is undefined }}{{ n is none }}{{ m is not none }}", vars),
            "TrueFalseTrueTrueTrue");
  EXPECT_EQ(Render("{{ m.content is string }}{{ m is mapping }}{{ [1] is iterable }}{{ 3 is number }}"
                   "{{ 3 is integer }}{{ 3.0 is float }}{{ true is boolean }}",
                   vars),
            "TrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ 4 is divisibleby(2) }}{{ 3 is odd }}{{ 2 is even }}{{ 'a' is equalto('a') }}"
                   "{{ false is false }}{{ 1 is sameas 1 }}{{ 'ab' is lower }}"),
            "TrueTrueTrueTrueTrueTrueTrue");
}

TEST(JinjaMethods, StringListAndDictMethods) {
  EXPECT_EQ(Render("{{ 'a<t>b'.split('<t>') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b'] ['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(Render("{{ 'xhix'.strip('x') }}{{ '\\nhi'.lstrip() }}{{ 'hi\\n\\n'.rstrip('\\n') }}"
                   "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}"),
            "hihihiTrueTrue");
  EXPECT_EQ(Render("{{ 'a{}b{}'.format(1, 'x') }} {{ '{0}{0}'.format('z') }} {{ 'ab'.replace('a', 'A') }}"
                   " {{ 'abc'.find('c') }} {{ '-'.join(['a', 'b']) }}"),
            "a1bx zz Ab 2 a-b");
  // Python would print dict_keys(['k']) and dict_values([1]).
  EXPECT_EQ(Render("{% set d = {'k': 1} %}{{ d.get('k') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys() }} "
                   "{{ d.values() }}"),
            "1 None 5 ['k'] [1]");
  EXPECT_EQ(Render("{% set xs = [1, 2, 3] %}{{ xs.pop(0) }}{{ xs.pop() }}{{ xs }}"), "13[2]");
}

TEST(JinjaGlobals, RangeNamespaceStrftimeRaise) {
  EXPECT_EQ(Render("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(Render("{{ strftime_now('%Y-%m-%d') }}"), "2025-03-15");
  Status status = RenderError("{{ raise_exception('roles must alternate') }}");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("roles must alternate"), std::string::npos) << status.ToString();
}

TEST(JinjaErrors, UnsupportedConstructsNameTheConstruct) {
  Status status = RenderError("{{ x | frobnicate }}");
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("frobnicate"), std::string::npos) << status.ToString();
  status = RenderError("{{ 1 is prime }}");
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("prime"), std::string::npos) << status.ToString();
  status = RenderError("a\nb\n{% extends 'base.html' %}");
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("line 3"), std::string::npos) << status.ToString();
  status = RenderError("{{ mystery_function(1) }}");
  EXPECT_NE(status.message().find("mystery_function"), std::string::npos) << status.ToString();
  status = RenderError("{{ 'x'.zfill(3) }}");
  EXPECT_NE(status.message().find("zfill"), std::string::npos) << status.ToString();
}

TEST(JinjaErrors, SyntaxErrorsAreStatusesNotCrashes) {
  for (const char* source : {"{{ 'unterminated }}", "{{ 1 + }}", "{% if %}", "{% for in x %}{% endfor %}",
                             "{{ (1 }}", "{{ [1, 2 }}", "{% endif %}", "{# never closed", "{{ x[] }}",
                             "{% set a, b = 1, 2 %}", "{{ 1 ? 2 }}", "{% for x in y recursive %}{% endfor %}"}) {
    auto body = Parse(source);
    EXPECT_FALSE(body.ok()) << source;
  }
  auto deep = Parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested too deeply"), std::string::npos) << deep.status().ToString();
}

TEST(JinjaErrors, TypeAndUndefinedErrors) {
  EXPECT_NE(RenderError("{{ 'a' + 1 }}").message().find("unsupported operand types for +"), std::string::npos);
  EXPECT_NE(RenderError("{{ x.y }}").message().find("'y' of undefined value 'x'"), std::string::npos);
  EXPECT_NE(RenderError("{{ 1 // 0 }}").message().find("by zero"), std::string::npos);
  EXPECT_NE(RenderError("{% set n = 5 %}{% set n.x = 1 %}").message().find("not a namespace"), std::string::npos);
  EXPECT_NE(RenderError("{{ 9223372036854775 * 10000 }}").message().find("overflow"), std::string::npos);
}

TEST(JinjaLimits, WorkIsBounded) {
  RenderLimits small;
  small.output_bytes_max = 1000;
  small.steps_max = 10'000;
  EXPECT_EQ(RenderError("{% for i in range(2000) %}x{% endfor %}", {}, small).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(RenderError("{{ 'x' * 5000 }}", {}, small).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(RenderError("{% for i in range(100000000) %}{% endfor %}", {}, small).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(RenderError("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}"
                        "{% endfor %}",
                        {}, small)
                .code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(RenderError("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", {}, small).code(), StatusCode::kOutOfRange);
}

// Python allows a container to hold itself; here mutations refuse it (the cycle would leak and
// make printing unbounded), directly or through another container.
TEST(JinjaLimits, ReferenceCyclesAreRefused) {
  for (const char* source : {"{% set ns = namespace() %}{% set ns.me = ns %}",
                             "{% set xs = [] %}{% set _ = xs.append(xs) %}",
                             "{% set xs = [] %}{% set _ = xs.insert(0, [1, [xs]]) %}",
                             "{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}",
                             "{% set d = {} %}{% set _ = d.update(k=[d]) %}"}) {
    Status status = RenderError(source);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << source;
    EXPECT_NE(status.message().find("contain itself"), std::string::npos) << status.ToString();
  }
  // Sharing without a cycle is fine.
  EXPECT_EQ(Render("{% set x = [1] %}{% set ys = [] %}{% do ys.append(x) %}{% do ys.append(x) %}"
                   "{% set d = {'a': 1} %}{% do d.update(d) %}{{ ys }} {{ ys[0] == ys[1] }} {{ d }}"),
            "[[1], [1]] True {'a': 1}");
}

// Random edits of a realistic template must give a Status or a string, never a crash or hang.
TEST(JinjaFuzz, MutatedTemplatesNeverCrash) {
  const std::string seed_source =
      "{%- set ns = namespace(n=0) -%}{% macro m(x, y='d') %}[{{ x ~ y }}]{% endmacro %}"
      "{%- for message in messages if message.role != 'tool' %}\n  {%- if loop.first and message['role'] == "
      "'system' %}{{ message.content | trim }}{% elif message.content is string %}{{ m(message.content[1:], "
      "y=loop.index) }}{% else %}{{ raise_exception('bad') }}{% endif %}{% set ns.n = ns.n + 1 %}"
      "{#- c -#}{% endfor %}{{ ns.n }}{{ {'k': [1, 2.5, none]} | tojson(indent=2) }}"
      "{{ 'a,b'.split(',') | map('upper') | join('-') }}{{ messages | selectattr('role', 'equalto', 'user') "
      "| list | length }}";
  Vars vars = {{"messages", Value::MakeList({Message("system", " s "), Message("user", "hello"),
                                             Message("assistant", "hi")})}};
  ASSERT_EQ(Render(seed_source, vars), "s[ello2][i3]3{\n  \"k\": [\n    1,\n    2.5,\n    null\n  ]\n}A-B1");
  const std::string alphabet = "{}%#-+()[]'\".|,:=~*/ \nabxi0129";
  std::mt19937 rng(1234);
  RenderLimits limits;
  limits.output_bytes_max = 1 << 16;
  limits.steps_max = 20'000;
  int parsed = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string source = seed_source;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !source.empty(); ++e) {
      size_t pos = rng() % source.size();
      switch (rng() % 3) {
        case 0: source.erase(pos, 1 + rng() % 3); break;
        case 1: source.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        default: source[pos] = alphabet[rng() % alphabet.size()];
      }
    }
    auto text = TryRender(source, vars, limits);
    if (text.ok()) ++parsed;
  }
  EXPECT_GT(parsed, 100);  // the mutations do exercise rendering, not only the parser
}

}  // namespace
}  // namespace cohort::tokenizer::jinja
