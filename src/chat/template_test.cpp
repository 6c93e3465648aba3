// Unit tests of the Jinja engine, feature by feature. Expected strings were produced by
// Python Jinja2 3.1.2 in transformers' configuration (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson/raise_exception/
// strftime_now with the clock at 2026-01-15 12:00:00).
#include "chat/template.h"

#include <gtest/gtest.h>

#include <string>

namespace herd::chat {
namespace {

std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  tm.tm_wday = 4;  // Thursday
  tm.tm_yday = 14;
  return tm;
}

std::string render(const std::string& source, const nlohmann::ordered_json& vars = nullptr) {
  RenderOptions options;
  options.now = fixed_time;
  nlohmann::ordered_json v = vars;
  if (v.is_null()) {
    v = nlohmann::ordered_json::parse(
        R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})");
  }
  return Template::parse(source).render(v, options);
}

// The message of the herd::Error a template fails with ("" when it renders).
std::string error_of(const std::string& source, const RenderOptions& options = {}) {
  try {
    Template::parse(source).render(nlohmann::ordered_json::object(), options);
  } catch (const herd::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ChatTemplate, ArithmeticFollowsPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 10 }} "
                   "{{ 2 ** -1 }}"),
            "3 -4 2 3.5 3.0 1024 0.5");
  EXPECT_EQ(render("{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-7 }} {{ 0.0001 }} {{ -0.0 }} "
                   "{{ 3.0 * 2 }}"),
            "2.5 0.30000000000000004 1e+16 1.5e-07 0.0001 -0.0 6.0");
  EXPECT_EQ(render("{{ 2 * 3 + 4 }} {{ (2 + 3) * 4 }} {{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} {{ -2 ** "
                   "2 }} {{ (1 + 2) ~ 3 }} {{ 2 * 3 ~ 4 }}"),
            "10 20 64 5 4 33 64");
  EXPECT_EQ(render("{{ true + 1 }} {{ 'ab' * 3 }} {{ 3 * [0] }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none "
                   "~ true }}"),
            "2 ababab [0, 0, 0] [1, 2] a1NoneTrue");
}

TEST(ChatTemplate, PrintsValuesLikePython) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0, (1,), (), {'k': [1]}] }}"),
            "[1, 'a', None, True, 1.0, (1,), (), {'k': [1]}]");
  EXPECT_EQ(render("{{ ('a', 'b') }} {{ {'a': \"it's\"} }} {{ [\"x\\\"y'z\"] }} {{ ['a\\\\b', "
                   "'tab\\there'] }}"),
            "('a', 'b') {'a': \"it's\"} ['x\"y\\'z'] ['a\\\\b', 'tab\\there']");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ false }} {{ 1.0 }} {{ 123456789012345678.0 }}"),
            "None True False 1.0 1.2345678901234568e+17");
  EXPECT_EQ(render("{% set d = {'a': 1} %}{{ d.items() }} {{ d.keys() }} {{ d.values() }}"),
            "dict_items([('a', 1)]) dict_keys(['a']) dict_values([1])");
}

TEST(ChatTemplate, StringsIndexByCodePoint) {
  EXPECT_EQ(render("{{ 'abc'[0] }}{{ 'abc'[-1] }}{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ 'héllo'[1:3] "
                   "}}{{ 'héllo'|length }}"),
            "acbccbaél5");
  EXPECT_EQ(render("{{ 'héllo wörld 日本語 🙂'[-1] }} {{ '日本語'|reverse }} {{ "
                   "'日本語'.find('語') }} {{ '日本語'|list }}"),
            "🙂 語本日 2 ['日', '本', '語']");
  EXPECT_EQ(render("{{ [1,2,3][::2] }} {{ [1,2,3][-2:] }} {{ (1,2,3)[1:] }} {{ 'abcdef'[1:5:2] }} "
                   "{{ [1,2,3][5:] }}"),
            "[1, 3] [2, 3] (2, 3) bd []");
}

TEST(ChatTemplate, Comparisons) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ (1,2) == [1,2] }} {{ [1,2] < "
                   "[1,3] }} {{ 'a' < 'b' }}"),
            "True False True False True True");
  EXPECT_EQ(render("{{ 1 in [1,2] }} {{ 3 not in [1,2] }} {{ 'b' in 'abc' }} {{ 'a' in {'a': 1} }} "
                   "{{ 'a' in x }}"),
            "True True True True False");
  EXPECT_EQ(render("{{ 'yes' if true else 'no' }}|{{ 'yes' if false }}|{{ 1 and 2 }}|{{ 0 and 2 "
                   "}}|{{ 0 or 'x' }}|{{ not 1 }}"),
            "yes||2|0|x|False");
}

TEST(ChatTemplate, Loops) {
  EXPECT_EQ(
      render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
             "loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
      "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ "
                   "loop.cycle('a','b') }};{% endfor %}"),
            "-2-a;1-3-b;2--a;");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% else %}none{% "
                   "endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}"),
            "2242|empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for "
                   "a, b in [[1,2],'cd'] %}{{ a }}{{ b }}{% endfor %}"),
            "a=1;b=2;12cd");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 "
                   "%}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for i in [1,2] %}{% for j in 'ab' %}{{ loop.index }}{{ i }}{{ j }}{% endfor "
                   "%}{{ loop.index }}{% endfor %}"),
            "11a21b112a22b2");
  EXPECT_EQ(render("{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c "
                   "}}]{% endfor %}{% for u in undefined_thing %}no{% endfor %}"),
            "xy[h][é]");
}

TEST(ChatTemplate, Scoping) {
  EXPECT_EQ(render("{% set count = 0 %}{% for i in range(3) %}{% set count = count + 1 %}{{ count "
                   "}}{% endfor %}{{ count }}"),
            "1110");
  EXPECT_EQ(
      render(
          "{% for i in range(3) %}{% if i == 1 %}{% set c = 5 %}{% endif %}{{ c }}|{% endfor %}"),
      "|5||");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + i "
                   "%}{% endfor %}{{ ns.x }} {{ ns }}"),
            "4 <Namespace {'x': 4}>");
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}{% with x = 5 "
                   "%}{{ x }}{% endwith %}{{ x }}"),
            "252");
  EXPECT_EQ(
      render(
          "{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}"),
      "12");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}"), "12(1, 2)");
}

TEST(ChatTemplate, Macros) {
  EXPECT_EQ(render("{% macro m(a, b=2, c='x') %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) "
                   "}}{{ m(1, 3) }}{{ m(1, c='z') }}{{ m(a=5) }}{{ m() }}"),
            "[1|2|x][1|3|x][1|2|z][5|2|x][|2|x]");
  EXPECT_EQ(
      render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}"),
      "1(2, 3){'x': 4}");
  EXPECT_EQ(render("{% macro outer() %}<{{ caller('x') }}>{% endmacro %}{% call(v) outer() %}in:{{ "
                   "v }}{% endcall %}"),
            "<in:x>");
  EXPECT_EQ(
      render(
          "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}"),
      "54321");
  EXPECT_EQ(render("{% macro m(x) %}{{ x }}{% endmacro %}{{ m.name }} {{ m is callable }} {{ "
                   "m('a') ~ m('b') }}"),
            "m True ab");
}

TEST(ChatTemplate, Blocks) {
  EXPECT_EQ(render("{% filter upper %}hello {{ 'world' }}{% endfilter %}|{% set x %}  block {{ 1 "
                   "}} {% endset %}[{{ x }}]|{% set y | trim %}  yy  {% endset %}[{{ y }}]"),
            "HELLO WORLD|[  block 1 ]|[yy]");
  EXPECT_EQ(
      render("{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  {{ x }}  {%- endraw -%}  |"),
      "{{ not rendered }}|{{ x }}|");
}

TEST(ChatTemplate, WhitespaceControl) {
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}"), "  1\n  2\n");
  EXPECT_EQ(render("{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}"), "12");
  EXPECT_EQ(render("x {% if true %} y {% endif %} z"), "x  y  z");
  EXPECT_EQ(render("line1\n    {# comment #}\nline2\n  {#- c -#}  \nline3"), "line1\nline2line3");
  EXPECT_EQ(render("{% if true %}a{% endif +%}\nb"), "a\nb");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}\n  {{ 'v' }}\n\t{% if 1 %}tab{% endif %}"),
            "  x  v\ntab");
  EXPECT_EQ(render("{{ 'a' -}}\n   {% if true %}x{% endif %}"), "ax");
  EXPECT_EQ(render("{{ 'a' }}   {% if true %}x{% endif %}"), "a   x");
  EXPECT_EQ(render("{% if true %}{% endif %}   {% if true %}y{% endif %}"), "   y");
  EXPECT_EQ(render("  {% raw %}\n  raw {{ x }}\n  {% endraw %}\nafter"), "\n  raw {{ x }}\nafter");
  EXPECT_EQ(render("last line with newline"), "last line with newline");
}

TEST(ChatTemplate, StringFilters) {
  EXPECT_EQ(render("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'ABC'|lower }}|{{ 'abc'|upper "
                   "}}|{{ 'hello world-foo(bar'|title }}|{{ 'hELLO'|capitalize }}"),
            "a b|a|abc|ABC|Hello World-Foo(Bar|Hello");
  EXPECT_EQ(
      render("{{ 'a b'|replace(' ', '_') }}|{{ 'aaa'|replace('a','b',2) }}|{{ 'hello world "
             "foo'|wordcount }}|{{ 'hello'|center(9) }}|{{ 'hello world and more'|truncate(10) }}"),
      "a_b|bba|3|  hello  |hello...");
  EXPECT_EQ(render("{{ 'a\\nb\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}|{{ "
                   "'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x'|indent('--', true) }}"),
            "a\n  b\n  c|  a\n  b|a\n  \n  b|--x");
  EXPECT_EQ(render("{{ '<a href=\"x\">&\\'</a>'|escape }}|{{ '<b>'|safe }}|{{ '<b>'|safe + '<' "
                   "}}|{{ '<' + '>'|safe }}|{{ '<' ~ '>'|safe }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;|<b>|<b>&lt;|&lt;>|<>");
  EXPECT_EQ(render("{{ 1|string ~ none|string }}|{{ [1,[2]]|string }}|{{ '%s is %d, %.2f%%' % "
                   "('Bob', 42, 3.14159) }}|{{ '%s-%s'|format(1, 2) }}"),
            "1None|[1, [2]]|Bob is 42, 3.14%|1-2");
}

TEST(ChatTemplate, SequenceFilters) {
  EXPECT_EQ(render("{{ [3,1,2]|sort }}|{{ [3,1,2]|sort(reverse=true) }}|{{ ['b','A','c']|sort "
                   "}}|{{ [{'a':2},{'a':1}]|sort(attribute='a') }}"),
            "[1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|[{'a': 1}, {'a': 2}]");
  EXPECT_EQ(render("{{ [1,2,3]|first }}|{{ [1,2,3]|last }}|{{ []|first }}|{{ [1,2,3]|join(',') "
                   "}}|{{ [{'n':'a'},{'n':'b'}]|join(', ', attribute='n') }}"),
            "1|3||1,2,3|a, b");
  EXPECT_EQ(
      render(
          "{{ [1,2,2,3,1]|unique|list }}|{{ ['a','A','b']|unique|list }}|{{ [1,2,3]|reverse|list "
          "}}|{{ [1,2,3]|sum }}|{{ [1,5,3]|max }}|{{ [4,2,8]|min }}|{{ -3|abs }}"),
      "[1, 2, 3]|['a', 'b']|[3, 2, 1]|6|5|2|3");
  EXPECT_EQ(render("{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('odd')|list }}|{{ "
                   "[{'a':1},{'a':2}]|selectattr('a','equalto',2)|list }}|{{ "
                   "[{'a':1},{'a':0}]|rejectattr('a')|list }}"),
            "[1, 3]|[2, 4]|[{'a': 2}]|[{'a': 0}]");
  EXPECT_EQ(render("{{ ['a','b']|map('upper')|list }}|{{ [{'a':1},{'a':2}]|map(attribute='a')|list "
                   "}}|{{ [{'a':1},{}]|map(attribute='a', default='z')|list }}"),
            "['A', 'B']|[1, 2]|[1, 'z']");
  EXPECT_EQ(
      render("{{ {'b':1,'a':2}|dictsort }}|{{ {'b':1,'a':2}|dictsort(by='value') }}|{{ "
             "{'b':1,'a':2}|items|list }}|{{ 'abc'|list }}|{{ [1,2,3,4,5]|batch(2, 0)|list }}"),
      "[('a', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[('b', 1), ('a', 2)]|['a', 'b', 'c']|[[1, 2], [3, "
      "4], [5, 0]]");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ "
                   "messages|map(attribute='role')|join(',') }}|{% if "
                   "messages|selectattr('role','eq','system') %}generators are truthy{% endif %}"),
            "1|user,assistant|generators are truthy");
}

TEST(ChatTemplate, NumberFilters) {
  EXPECT_EQ(render("{{ '42'|int }}|{{ '42.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ 3.9|int "
                   "}}|{{ '3.5'|float }}|{{ 'x'|float }}|{{ 3|float }}"),
            "42|42|0|7|3|3.5|0.0|3.0");
  EXPECT_EQ(render("{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ "
                   "2.1|round(method='ceil') }}|{{ 2.9|round(method='floor') }}"),
            "2.0|4.0|2.67|3.0|2.0");
  EXPECT_EQ(render("{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ "
                   "x|d('e') }}|{{ 0|default(5, boolean=true) }}"),
            "d|None|d|e|5");
}

TEST(ChatTemplate, ToJsonIsPythonJsonDumps) {
  EXPECT_EQ(render("{{ {'a': [1, 2.5, none, true, 'é\"\\n<&>'], 'b': {}}|tojson }}"),
            "{\"a\": [1, 2.5, null, true, \"é\\\"\\n<&>\"], \"b\": {}}");
  EXPECT_EQ(render("{{ {'a': [1, {'c': []}]}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"c\": []\n    }\n  ]\n}");
  EXPECT_EQ(
      render("{{ 'é🙂'|tojson(ensure_ascii=true) }}|{{ {'b':1,'a':2}|tojson(sort_keys=true) "
             "}}|{{ [1,2]|tojson(separators=(',',':')) }}"),
      "\"\\u00e9\\ud83d\\ude42\"|{\"a\": 2, \"b\": 1}|[1,2]");
  EXPECT_EQ(render("{{ {1: 2, none: 3, true: 4}|tojson }}|{{ [1e100, 1.0e16, 0.1]|tojson }}|{{ "
                   "'\\x00\\x1f\\x7f'|tojson }}"),
            "{\"1\": 4, \"null\": 3}|[1e+100, 1e+16, 0.1]|\"\\u0000\\u001f\"");
}

TEST(ChatTemplate, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 1 is number }}{{ "
                   "true is number }}{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}"),
            "FalseTrueTrueTrueTrueFalseTrueTrue");
  EXPECT_EQ(
      render("{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ {} "
             "is sequence }}{{ x is sequence }}{{ x is iterable }}{{ range is callable }}"),
      "TrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) "
                   "}}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 1 is in [1,2] }}{{ 1 is eq 1 }}"),
            "TrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(
      render(
          "{{ 1 is ne 1 }}{{ 1 is lt 2 }}{{ 2 is ge 2 }}{{ false is sameas false }}{{ true is true "
          "}}{{ 1 is true }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ x is not defined }}"),
      "FalseTrueTrueTrueTrueFalseTrueTrueTrue");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(render("{{ 'a,b,c'.split(',') }}|{{ 'a b  c '.split() }}|{{ 'a,b,c'.split(',', 1) "
                   "}}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  x  '.strip() }}|{{ 'xxyxx'.lstrip('x') "
                   "}}|{{ 'xxyxx'.rstrip('x') }}"),
            "['a', 'b', 'c']|['a', 'b', 'c']|['a', 'b,c']|['a,b', 'c']|x|yxx|xxy");
  EXPECT_EQ(render("{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x','c')) }}|{{ "
                   "'abc'.replace('b','B') }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ "
                   "'abcb'.count('b') }}|{{ '-'.join(['a','b']) }}"),
            "True|True|aBc|1|3|2|a-b");
  EXPECT_EQ(render("{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '12'.isdigit() }}|{{ 'Ab'.isalpha() }}|{{ "
                   "'hello world'.title() }}|{{ \"they're\"|title }}|{{ \"they're\".title() }}|{{ "
                   "'straße'.upper() }}"),
            "['a', 'b', 'c']|True|True|Hello World|They're|They'Re|STRASSE");
  EXPECT_EQ(render("{{ 'ab'.center(6, '*') }}|{{ 'ab'.ljust(4) }}|{{ 'ab'.rjust(4, '0') }}|{{ "
                   "'5'.zfill(3) }}|{{ 'a=b=c'.partition('=') }}|{{ '{} and {}'.format(1, 'x') }}"),
            "**ab**|ab  |00ab|005|('a', '=', 'b=c')|1 and x");
}

TEST(ChatTemplate, DictAndListMethods) {
  EXPECT_EQ(
      render(
          "{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 3) }}|{{ "
          "d['a'] }}|{{ d.a }}|{{ d.z }}|{{ d|length }}|{{ d|list }}|{{ d.items()|list }}"),
      "1|None|3|1|1||2|['a', 'b']|[('a', 1), ('b', 2)]");
  EXPECT_EQ(render("{{ [1,2,3].index(2) }}|{{ [1,2,2].count(2) }}|{% set x = [1,2,3] %}{% set y = "
                   "x %}{{ x.pop() }}{{ x.pop(0) }}{{ y }}"),
            "1|2|31[2]");
  EXPECT_EQ(render("{{ none.x }}|{{ (1).x }}|{{ 'a'.x }}|{{ [1][5] }}|{{ {'a':1}['b'] }}|{{ "
                   "'abc'[10] }}|{{ [].append }}|{{ messages[5] is defined }}"),
            "|||||||False");
}

TEST(ChatTemplate, Globals) {
  EXPECT_EQ(render("{{ range(5)|list }}|{{ range(2, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ "
                   "dict(a=1, b='x') }}|{{ namespace(a=1).a }}"),
            "[0, 1, 2, 3, 4]|[2, 5, 8]|[5, 3, 1]|{'a': 1, 'b': 'x'}|1");
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M %A %d %b %Y %j') }}"),
            "2026-01-15 12:00 Thursday 15 Jan 2026 015");
  EXPECT_EQ(render("{% set j = joiner(', ') %}{% for i in [1,2,3] %}{{ j() }}{{ i }}{% endfor %}"),
            "1, 2, 3");
}

TEST(ChatTemplate, Literals) {
  EXPECT_EQ(render("{{ \"a\" \"b\" 'c' }}|{{ 'a\\tb\\\\n\\x41\\u00e9' }}|{{ 1_000 }}|{{ 0x1f }}|{{ "
                   "1.5e3 }}|{{ {'a': {'b': 1}}['a'] }}|{{ [1,2,3].0 }}"),
            "abc|a\tb\\nAé|1000|31|1500.0|{'b': 1}|1");
}

TEST(ChatTemplate, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("{% generation %}gen {{ 1 }}{% endgeneration %}"), "gen 1");
}

TEST(ChatTemplate, RaiseExceptionCarriesTheExactMessage) {
  try {
    render("{{ raise_exception('Conversation roles must alternate user/assistant/...') }}");
    FAIL() << "no exception";
  } catch (const TemplateRaised& e) {
    EXPECT_EQ(e.message(), "Conversation roles must alternate user/assistant/...");
    EXPECT_TRUE(contains(e.what(), "[chat] template raised: Conversation roles"));
  }
}

TEST(ChatTemplate, UndefinedFollowsJinja2) {
  // Printing, testing, iterating and defaulting an undefined value are fine ...
  EXPECT_EQ(render("[{{ x }}]{{ x is defined }}{{ x|length }}{% for a in x %}no{% endfor %}{{ "
                   "x|default('d') }}"),
            "[]False0d");
  // ... using it as an object or operand is an error naming it.
  EXPECT_TRUE(contains(error_of("{{ x.y }}"), "'x' is undefined"));
  EXPECT_TRUE(contains(error_of("{{ x + 1 }}"), "'x' is undefined"));
  EXPECT_TRUE(contains(error_of("{{ x() }}"), "'x' is undefined"));
  EXPECT_TRUE(contains(error_of("{% set d = {} %}{{ d.missing.deeper }}"),
                       "'dict object' has no attribute 'missing'"));
}

TEST(ChatTemplate, UnknownFiltersFailAtParseTimeExceptUnderIf) {
  EXPECT_THROW(Template::parse("{{ x|from_json }}"), herd::Error);
  EXPECT_THROW(
      Template::parse("{% if x %}{% for a in b %}{{ a|from_json }}{% endfor %}{% endif %}"),
      herd::Error);
  // Jinja2 defers the check inside {% if %}: the template parses and fails only when used.
  EXPECT_EQ(render("{% if false %}{{ x|from_json }}{% endif %}ok"), "ok");
  EXPECT_TRUE(contains(error_of("{% if true %}{{ x|from_json }}{% endif %}"),
                       "no filter named 'from_json'"));
}

TEST(ChatTemplate, SandboxRefusesMutation) {
  EXPECT_TRUE(contains(error_of("{% set l = [] %}{{ l.append(1) }}"), "unsafe"));
  EXPECT_TRUE(contains(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}"), "unsafe"));
  EXPECT_TRUE(contains(error_of("{% set x = 1 %}{% set x.y = 2 %}"), "non-namespace"));
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  const std::string e = error_of("line one\n{% if x %}\n{{ x + }}\n{% endif %}");
  EXPECT_TRUE(contains(e, "[chat] line 3")) << e;
  EXPECT_TRUE(contains(error_of("{% if x %}never closed"), "endif"))
      << error_of("{% if x %}never closed");
  EXPECT_TRUE(contains(error_of("{% frobnicate %}"), "unknown tag 'frobnicate'"));
  EXPECT_TRUE(contains(error_of("{{ 'unterminated }}"), "unterminated string"));
}

TEST(ChatTemplate, ChatVariablesFollowTransformers) {
  const auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  const auto extra = nlohmann::ordered_json::parse(R"({"enable_thinking": false})");
  const auto v = chat_variables(messages, nullptr, true, std::nullopt, std::string("</s>"), extra);
  EXPECT_EQ(v.dump(),
            R"({"messages":[{"role":"user","content":"x"}],"tools":null,"documents":null,)"
            R"("add_generation_prompt":true,"eos_token":"</s>","enable_thinking":false})");
  EXPECT_EQ(
      render("{{ tools }}|{{ bos_token is defined }}|{{ eos_token }}|{{ enable_thinking }}", v),
      "None|False|</s>|False");
}

TEST(ChatTemplate, ClockIsInjectable) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "15 Jan 2026");
  // Without a clock, the real local time is used: a four-digit year at least.
  EXPECT_EQ(
      Template::parse("{{ strftime_now('%Y')|length }}").render(nlohmann::ordered_json::object()),
      "4");
}

TEST(ChatTemplate, JsonInputKeepsKeyOrder) {
  const auto v = nlohmann::ordered_json::parse(R"({"d": {"z": 1, "a": [true, null, 1.5, "é"]}})");
  EXPECT_EQ(render("{{ d|tojson }}|{% for k in d %}{{ k }}{% endfor %}|{{ d }}", v),
            R"({"z": 1, "a": [true, null, 1.5, "é"]}|za|{'z': 1, 'a': [True, None, 1.5, 'é']})");
}

TEST(ChatTemplate, HostileTemplatesFailCleanly) {
  RenderOptions small;
  small.max_steps = 1'000'000;
  small.max_output_bytes = 1 << 20;
  // Unbounded recursion, deep nesting, endless loops, huge strings and deep values all end
  // in an error instead of a crash or a hang.
  EXPECT_TRUE(
      contains(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "recursion too deep"));
  EXPECT_TRUE(
      contains(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
               "nested too deeply"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_TRUE(contains(error_of(chain + " }}"), "nested too deeply"));
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if 1 %}";
  EXPECT_TRUE(contains(error_of(ifs), "nested too deeply"));
  EXPECT_TRUE(contains(
      error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               small),
      "evaluation budget"));
  EXPECT_TRUE(contains(error_of("{{ 'x' * 1000000000 }}", small), "too large"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set "
                                "ns.s = ns.s ~ ns.s %}{% endfor %}",
                                small),
                       "exceeds the limit"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set "
                                "ns.x = [ns.x] %}{% endfor %}"),
                       "nested more than"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set "
                                "ns.x = [ns.x]|select %}{% endfor %}"),
                       "nested more than"));
  EXPECT_TRUE(contains(error_of("{{ range(1000000)|length }}"), "Range too big"));
  EXPECT_TRUE(contains(error_of("{{ 9223372036854775807 + 1 }}"), "too large"));
  // Regression (fuzzing): arguments iterated from a temporary list.
  EXPECT_TRUE(contains(error_of("{{ namespace(undefined_thing, a=1) }}"),
                       "'undefined_thing' is undefined"));
  EXPECT_EQ(render("{{ dict([('a', 1)]) }}{{ namespace('xy'|list|batch(2)).x }}"), "{'a': 1}y");
  // A namespace containing itself prints like Python's recursive repr.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'me': <Namespace {...}>}>");
}

}  // namespace
}  // namespace herd::chat
