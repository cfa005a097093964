// Chat-template tests: the published templates of the common model families
// rendered byte for byte as Python's jinja2 renders them (golden files made by
// tests/reference/render_chat_template.py), each interpreter construct against
// jinja2's output, errors, built-in formats and template selection.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "lantern/error.h"
#include "test_util.h"

namespace lantern {
namespace {

using json = nlohmann::ordered_json;

std::filesystem::path data_dir() { return test::source_dir() / "tests" / "data" / "chat_templates"; }

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The reference script's fixed clock: 2025-01-15T10:30:00.
std::tm fixed_now() {
    std::tm tm{};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 0;
    tm.tm_mday = 15;
    tm.tm_hour = 10;
    tm.tm_min = 30;
    tm.tm_wday = 3;   // Wednesday
    tm.tm_yday = 14;
    return tm;
}

// ------------------------------------------------------------ golden files ----

struct GoldenCase {
    std::string template_name;
    std::string conversation;  // basic, nosys, nogen, tools, or one of the template's extra_cases
};

std::string stem(const GoldenCase& c) {
    return c.conversation == "basic" ? c.template_name : c.template_name + "." + c.conversation;
}

// Same rule as the reference script: every template gets the plain
// conversations, templates that mention tools also get the tool conversation,
// and a template may list more (extra_cases).
std::vector<GoldenCase> golden_cases() {
    std::vector<GoldenCase> cases;
    const json manifest = json::parse(read_file(data_dir() / "manifest.json"));
    for (const auto& [name, info] : manifest["templates"].items()) {
        const std::string source = read_file(data_dir() / (name + ".jinja"));
        for (const char* conv : {"basic", "nosys", "nogen", "tools"}) {
            if (std::string(conv) == "tools" && source.find("tool") == std::string::npos) continue;
            cases.push_back({name, conv});
        }
        for (const auto& extra : info.value("extra_cases", json::array())) cases.push_back({name, extra.get<std::string>()});
    }
    return cases;
}

class ChatGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ChatGolden, RendersLikeJinja2) {
    const GoldenCase& c = GetParam();
    const json manifest = json::parse(read_file(data_dir() / "manifest.json"));
    const json& info = manifest["templates"][c.template_name];
    const json& conv = manifest["conversations"][c.conversation];
    const ChatTemplate tmpl = ChatTemplate::from_string(read_file(data_dir() / (c.template_name + ".jinja")),
                                                        info["bos_token"].get<std::string>(),
                                                        info["eos_token"].get<std::string>());
    ChatTemplateInputs inputs;
    inputs.messages = conv["messages"];
    if (conv.contains("tools")) inputs.tools = conv["tools"];
    inputs.add_generation_prompt = conv["add_generation_prompt"].get<bool>();
    if (conv.contains("extra")) inputs.extra = conv["extra"];
    inputs.now = fixed_now();

    const auto expected_path = data_dir() / (stem(c) + ".expected");
    const auto error_path = data_dir() / (stem(c) + ".error");
    if (std::filesystem::exists(expected_path)) {
        EXPECT_EQ(tmpl.apply(inputs), read_file(expected_path)) << stem(c);
        return;
    }
    ASSERT_TRUE(std::filesystem::exists(error_path)) << "no golden file for " << stem(c);
    // "ExceptionType: message". raise_exception messages must match exactly;
    // Python's own errors (TypeError...) only have to be errors.
    const std::string golden = read_file(error_path);
    try {
        tmpl.apply(inputs);
        FAIL() << stem(c) << " rendered, but jinja2 raised " << golden;
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Template);
        const std::string prefix = "TemplateError: ";
        if (golden.rfind(prefix, 0) == 0) {
            EXPECT_NE(std::string(e.what()).find(golden.substr(prefix.size())), std::string::npos)
                << e.what() << " vs " << golden;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, ChatGolden, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                             std::string name = stem(info.param);
                             for (char& ch : name) {
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             }
                             return name;
                         });

TEST(ChatGoldenFiles, EveryTemplateHasItsGoldenFiles) {
    const auto cases = golden_cases();
    EXPECT_GE(cases.size(), 25u * 3);
    for (const GoldenCase& c : cases) {
        EXPECT_TRUE(std::filesystem::exists(data_dir() / (stem(c) + ".expected")) ||
                    std::filesystem::exists(data_dir() / (stem(c) + ".error")))
            << stem(c);
    }
}

// ------------------------------------------------- interpreter constructs ----

struct ConstructCase {
    const char* name;
    const char* source;
    const char* expected;  // jinja2's output (tests/reference settings), pasted
};

// Generated by rendering each source with jinja2 under HF's settings, with the
// variables of render_construct() below.
const ConstructCase kConstructs[] = {
    {"StringLiterals",
     "{{ 'a' }}{{ \"b\" }}{{ 'it\\'s' }}|{{ 'x\\ty\\n\\u00e9\\x41\\101' }}|{{ 'a' 'b' \"c\" }}|{{ 'back\\\\slash' }}",
     "abit's|x\ty\néAA|abc|back\\slash"},
    {"Numbers",
     "{{ 1 }} {{ 1.5 }} {{ 1e3 }} {{ 1_000 }} {{ -3 }} {{ 0.1 + 0.2 }} {{ 10/4 }} {{ 10//4 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7.5 // 2 }} {{ 1 + true }}",
     "1 1.5 1000.0 1000 -3 0.30000000000000004 2.5 2 -4 2 -2 1024 0.5 3.0 2"},
    {"FloatRepr",
     "{{ 1e20 }} {{ 1e-5 }} {{ 123456789.123 }} {{ 1e16 }} {{ 1234567890123456.0 }} {{ 0.0001 }} {{ 2.0 }} {{ -0.0 }} {{ 1/3 }}",
     "1e+20 1e-05 123456789.123 1e+16 1234567890123456.0 0.0001 2.0 -0.0 0.3333333333333333"},
    {"NoneAndBooleans",
     "{{ none }} {{ None }} {{ true }} {{ True }} {{ false }} {{ False }}",
     "None None True True False False"},
    {"ContainersRepr",
     "{{ [1, 'a', none, true, 1.5, [2]] }} {{ {'a': 1, 'b': 'x'} }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ [\"it's\", 'say \"hi\"'] }} {{ ['a\\nb'] }}",
     "[1, 'a', None, True, 1.5, [2]] {'a': 1, 'b': 'x'} (1,) (1, 2) () [\"it's\", 'say \"hi\"'] ['a\\nb']"},
    {"AttributeAndItemAccess",
     "{{ user.name }} {{ user['name'] }} [{{ user.missing }}] {{ items[0] }} {{ items[-1] }} {{ items.1 }} [{{ items[7] }}] {{ users[1].name }}",
     "Ann Ann [] 10 30 20 [] bob"},
    {"Slices",
     "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ items[1:] }} {{ items[:-1] }} {{ items[::2] }} {{ 'héllo'[1:3] }} {{ items[-2:] }} {{ items[5:] }} {{ 'abcdef'[4:1:-1] }}",
     "el olleh [20, 30] [10, 20] [10, 30] él [20, 30] [] edc"},
    {"ConcatAndArithmetic",
     "{{ 'a' ~ 1 ~ none }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 2 }} {{ 3 - 1.5 }} {{ 2 * [0] }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 'ab' | upper ~ 'c' }}",
     "a1None ab [1, 2] abab 1.5 [0, 0] 7 9 4 ABc"},
    {"Comparisons",
     "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 >= 3 }} {{ 2 <= 2 }} {{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ [1, 2] == [1, 2] }} {{ 'a' < 'b' }} {{ none == none }} {{ true == 1 }}",
     "True False True True False True True False True True True True True"},
    {"Logic",
     "{{ true and 'x' }} {{ false or 'y' }} {{ not none }} {{ 0 or [] }} [{{ none and 1 }}] {{ not 1 == 2 }} {{ not x is defined }}",
     "x y True [] [None] True False"},
    {"ConditionalExpression",
     "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 'a' if x == 1 else 'b' if x == 2 else 'c' }}",
     "y n [] b"},
    {"Tests",
     "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ [] is iterable }} {{ {} is mapping }} {{ 'a' is sequence }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ true is true }} {{ false is false }} {{ 1 is not string }} {{ 'a' is eq 'a' }} {{ 3 is gt 2 }} {{ 'b' is in 'abc' }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 3 is ne 3 }} {{ 2 is lessthan 3 }} {{ user is mapping }} {{ none is sameas none }}",
     "True True True True True True False True True True True True True True True False True True True True True True True True True True True False True True True"},
    {"IfElifElse",
     "{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}|{% if x > 5 %}big{% else %}small{% endif %}|{% if not items %}empty{% endif %}",
     "two|small|"},
    {"LoopVariables",
     "{% for i in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"LoopNeighboursAndCycle",
     "{% for i in 'abc' %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('x', 'y') }};{% endfor %}",
     "-b-x;a-c-y;b--x;"},
    {"LoopFilterAndElse",
     "{% for i in range(10) if i is odd %}{{ i }}{% else %}none{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in range(10) if i > 6 %}{{ loop.index }}/{{ loop.length }} {% endfor %}",
     "13579|empty|1/3 2/3 3/3 "},
    {"LoopUnpacking",
     "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for (a, b) in [(5, 6)] %}{{ b }}{{ a }}{% endfor %}",
     "a=1,b=2,|37|xy|65"},
    {"BreakAndContinue",
     "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
     "0134"},
    {"NestedLoops",
     "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}|{% endfor %}",
     "1x2y1|1x2y2|"},
    {"LoopChanged",
     "{% for i in [1, 1, 2, 2, 3] %}{% if loop.changed(i) %}{{ i }}{% endif %}{% endfor %}",
     "123"},
    {"SetScoping",
     "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% set a, b = [1, 2] %}{{ b }}{{ a }}|{% for i in [1, 2] %}{% if loop.first %}{% set z = 9 %}{% endif %}[{{ z }}]{% endfor %}",
     "231|5|21|[9][]"},
    {"Namespace",
     "{% set ns = namespace(count=0, found=false) %}{% for i in [1, 2, 3] %}{% set ns.count = ns.count + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns }}|{% set n2 = namespace() %}{% set n2.items = [] %}{% for m in items %}{% set n2.items = n2.items + [m * 2] %}{% endfor %}{{ n2.items }}",
     "6 True <Namespace {'count': 6, 'found': True}>|[20, 40, 60]"},
    {"BlockSet",
     "{% set body %}Hello {{ name }}!{% endset %}[{{ body }}]{% set shout | upper %}hi {{ name }}{% endset %}{{ shout }}",
     "[Hello World!]HI WORLD"},
    {"Macros",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet(name='Cy') }}|{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}|{% set top = 'T' %}{% macro s() %}{{ top }}[{{ local_var }}]{% endmacro %}{% for i in [1] %}{% set local_var = 'L' %}{{ s() }}{% endfor %}",
     "Hi Ann! Hi Bob? Hi Cy!|1(2, 3){'k': 4}|T[]"},
    {"CallBlocks",
     "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %}|{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}",
     "<b>bold</b>|[1][2]"},
    {"FilterWithGenerationRaw",
     "{% filter upper %}abc {{ name }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]|{% generation %}gen{% endgeneration %}|{% raw %}{{ not rendered }}{% endraw %}",
     "ABC WORLD|3[]|gen|{{ not rendered }}"},
    {"Comments",
     "a{# comment #}b{#- trimmed -#}  c\n  {# line comment #}\nd",
     "abc\nd"},
    {"WhitespaceControl",
     "a  {{- 'b' -}}  c|  {%- if true %} x {% endif -%}  \n y|{{ 'p' }}  \n  {{- 'q' }}",
     "abc| x y|pq"},
    {"TrimAndLstripBlocks",
     "<ul>\n  {% for i in [1, 2] %}\n  <li>{{ i }}</li>\n  {% endfor %}\n</ul>\n  {%+ if true %}kept{% endif +%}\nend\n",
     "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>\n  kept\nend"},
    {"TrailingNewline",
     "line\n\n",
     "line\n"},
    {"StringFilters",
     "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hi'|upper }}{{ 'HI'|lower }}|{{ 'hello world-wide (x'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a-b'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'ab'|center(6) }}|{{ 42|string ~ '!' }}|{{ '<a href=\"x\">'|escape }}|{{ '<b>'|safe }}",
     "hi|hi|HIhi|Hello World-Wide (X|Hello|a+b|bba|  ab  |42!|&lt;a href=&#34;x&#34;&gt;|<b>"},
    {"SequenceFilters",
     "{{ [1, 2, 3]|length }} {{ 'héllo'|length }} {{ {'a': 1}|count }} {{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ [1, 2]|join(', ') }} {{ users|join(',', attribute='name') }} {{ 'abc'|list }} {{ [3, 1, 2, 1]|unique|list }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }} {{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|sum }} {{ [1, 5, 3]|max }} {{ [4, 2, 8]|min }} {{ ['b', 'A']|max }}",
     "3 5 1 3 2 1, 2 ann,bob,cy ['a', 'b', 'c'] [3, 1, 2] [1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] cba [3, 2, 1] [[1, 2], [3, 4], [5]] 6 5 2 b"},
    {"MapSelectReject",
     "{{ users|map(attribute='name')|join(',') }} {{ ['a', 'b']|map('upper')|list }} {{ [1, 2, 3, 4]|select('even')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'bob')|list|length }} {{ users|sort(attribute='age')|map(attribute='name')|join }} {{ users|map(attribute='nick', default='?')|join }}",
     "ann,bob,cy ['A', 'B'] [2, 4] [2, 4] [1, 'a'] ['ann', 'cy'] ['bob'] 1 bobanncy ???"},
    {"DictFilters",
     "{{ {'b': 1, 'a': 2}|items|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'B': 1, 'a': 2}|dictsort(reverse=true) }}",
     "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)] [('b', 1), ('a', 2)] [('B', 1), ('a', 2)]"},
    {"DefaultFilter",
     "{{ missing|default('dflt') }} [{{ ''|default('e') }}] {{ ''|default('e', true) }} {{ none|d('n') }} {{ 0|default(5) }} {{ user.missing|default('no') }}",
     "dflt [] e None 0 no"},
    {"NumberFilters",
     "{{ '42'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ ' 12 '|int }} {{ '2.5'|float }} {{ 2|float }} {{ 'z'|float }} {{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }}",
     "43 3 -1 3 12 2.5 2.0 0.0 3 2.0 4.0 2.67 3.0 2.0 7"},
    {"TojsonFilter",
     "{{ {'a': [1, 2.5, none, true], 'é': 'x\"y\\n'}|tojson }}|{{ [1, {'b': 2}, [], {}]|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é'|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ 'tab\\there'|tojson }}|{{ 1.0|tojson }}|{{ users[0]|tojson(indent=4) }}",
     "{\"a\": [1, 2.5, null, true], \"é\": \"x\\\"y\\n\"}|[\n  1,\n  {\n    \"b\": 2\n  },\n  [],\n  {}\n]|{\"a\": 2, \"b\": 1}|\"\\u00e9\"|[1,2]|\"tab\\there\"|1.0|{\n    \"name\": \"ann\",\n    \"admin\": true,\n    \"age\": 30\n}"},
    {"OtherFilters",
     "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'one two  three'|wordcount }}|{{ 'hello world foo bar'|truncate(11, leeway=0) }}|{{ 'hello world'|truncate(8, true, '..', 0) }}|{{ '%s-%d'|format('a', 3) }}|{{ '%s and %s' % ('x', 'y') }}|{{ user|attr('name') }}",
     "a\n  b\n\n  c|  a\n  b|a\n  \n  b|3|hello...|hello ..|a-3|x and y|"},
    {"StringMethods",
     "{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a.b.c'.rsplit('.', 1) }}|{{ 'a\\nb'.splitlines() }}",
     "x|a|x|x|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a.b', 'c']|['a', 'b']"},
    {"MoreStringMethods",
     "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('lo', 'x')) }} {{ 'Hello World'.upper() }} {{ 'Hello'.lower() }} {{ \"they're bill's\".title() }} {{ 'hello'.capitalize() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {name}'.format(1, name='n') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '12'.isdigit() }} {{ 'ab1'.isalnum() }} {{ 'x'.ljust(3) }}| {{ 'x'.rjust(3, '.') }}",
     "True True HELLO WORLD hello They'Re Bill'S Hello bba 2 3 -1 2 a-b 1 and n aba True True x  | ..x"},
    {"DictMethods",
     "{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.items()|list }} {{ d['a'] }} {{ d.a }}",
     "['a', 'b'] [1, 2] 1 dflt None a1b2 [('a', 1), ('b', 2)] 1 1"},
    {"Globals",
     "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {% set j = joiner('/') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%dT%H:%M') }} {{ namespace(a=1).a }}",
     "[0, 1, 2] [1, 3, 5] [5, 3, 1] {'a': 1, 'b': 2} a/b/c 15 Jan 2025 2025-01-15T10:30 1"},
    {"UndefinedBehaviour",
     "[{{ missing }}][{{ missing|length }}][{{ missing is defined }}][{% for x in missing %}x{% endfor %}][{{ d.nokey }}][{{ none.attr }}][{{ missing == missing2 }}][{{ missing ~ 'x' }}][{{ missing|trim }}][{{ 'a' if missing else 'b' }}][{{ missing is iterable }}]",
     "[][0][False][][][][True][x][][b][True]"},
    {"Unicode",
     "{{ 'Ünïcödé'|upper }} {{ 'ΑΒΓ'|lower }} {{ 'héllo'[::-1] }} {{ 'Привет'|length }} {{ 'ñ'|tojson }} {{ 'caf\\u00e9'|title }} {{ '日本語'[1] }}",
     "ÜNÏCÖDÉ αβγ olléh 6 \"ñ\" Café 本"},
    {"ForElseAfterSkippedBodies",
     "{% for i in [1, 2] %}{% continue %}{% else %}E{% endfor %}|{% for i in [1, 2] %}x{% if i == 1 %}{% break %}{% endif %}{% else %}E{% endfor %}|{% for i in [1, 2] %}{% if i == 1 %}{% continue %}{% endif %}y{% else %}E{% endfor %}",
     "E|xE|y"},
    {"PythonFloatDivision",
     "{{ 1 // 0.1 }} {{ 1 % 0.1 }} {{ -1.0 % 1 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ -0.0 // 1 }}",
     "9.0 0.09999999999999995 0.0 -4.0 -0.5 -0.0"},
    {"PythonCaseMapping",
     "{{ 'straße'|upper }} {{ 'ß'.capitalize() }} {{ 'ΟΔΟΣ'|lower }} {{ \"ΑΣ'Σ ΣA\"|lower }} {{ 'ßa sσ'.title() }} {{ 'éΣ'|title }} {{ 'ß' is lower }} {{ 'Σ1' is upper }}",
     "STRASSE Ss οδος ασ'ς σa Ssa Sσ Éσ True True"},
    {"PythonSplitRemainders",
     "{{ ' a  b  c  '.split(None, 1) }} {{ '  a  b  c '.rsplit(None, 1) }} {{ 'a  b'.split(' ') }} {{ 'x'.split('x') }}",
     "['a', 'b  c  '] ['  a  b', 'c'] ['a', '', 'b'] ['', '']"},
    {"FilterEdgeCases",
     "{{ 0|map('string')|list }} {{ none|select|list }} {{ 2.5 is odd }} {{ 3.0 is odd }} {{ 4.5 is divisibleby 1.5 }} {{ [1, 2]|truncate(5) }} {{ 'o' % missing }} {{ '%s' % [1, 2] }} {{ 2.5|round(0, 'floor') }}",
     "[] [] False True True [1, 2] o [1, 2] 2.0"},
    {"EmptyRepeats", "[{{ '' * 1000000000 }}][{{ ([] * 1000000000)|length }}][{{ 'ab' * 0 }}][{{ 'ab' * -3 }}]", "[][0][][]"},
    {"MessagesLoop",
     "{% for m in messages %}{{ m.role }}:{{ m['content']|trim }}{% if not loop.last %},{% endif %}{% endfor %}{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}",
     "system:sys,user:hi<s></s>FalseNone"},
};

std::string render_construct(const std::string& source) {
    ChatTemplateInputs in;
    in.messages = json::array({{{"role", "system"}, {"content", " sys "}}, {{"role", "user"}, {"content", "hi"}}});
    in.add_generation_prompt = false;
    in.now = fixed_now();
    in.extra = json::parse(R"({
        "x": 2, "user": {"name": "Ann"}, "items": [10, 20, 30], "name": "World", "role": "tool",
        "users": [{"name": "ann", "admin": true, "age": 30}, {"name": "bob", "admin": false, "age": 25},
                  {"name": "cy", "admin": true, "age": 35}],
        "d": {"a": 1, "b": 2}})");
    return ChatTemplate::from_string(source, "<s>", "</s>").apply(in);
}

class ChatInterpreter : public ::testing::TestWithParam<ConstructCase> {};

TEST_P(ChatInterpreter, MatchesJinja2) {
    const ConstructCase& c = GetParam();
    EXPECT_EQ(render_construct(c.source), c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(ChatConstructs, ChatInterpreter, ::testing::ValuesIn(kConstructs),
                         [](const ::testing::TestParamInfo<ConstructCase>& info) { return std::string(info.param.name); });

// Dicts past a few keys are looked up through an index (jinja_value.h):
// it must give what a search in insertion order gives, for keys added by
// from_json, by dict() and by replacing a value in place.
TEST(ChatInterpreterDicts, BigDictsLookUpLikeSmallOnes) {
    json big = json::object();
    for (int i = 0; i < 2000; ++i) big[std::string("k").append(std::to_string(i))] = i;
    ChatTemplateInputs in;
    in.messages = json::array({{{"role", "user"}, {"content", "hi"}}});
    in.extra = {{"big", big}};
    const std::string source =
        "{{ big.k1999 }} {{ big['k0'] }} {{ big.get('k17') }} {{ 'k1500' in big }} {{ 'k2000' in big }}|"
        "{% set e = dict(big, k5='new', extra=1) %}{{ e.k5 }} {{ e.extra }} {{ e|length }} {{ (e|list)[5] }} "
        "{{ (e|list)[-1] }} {{ big.k5 }}|{% set f = dict(**e) %}{{ f|length }} {{ f.k1999 }} {{ f.k5 }}|"
        "{% set ns = namespace() %}{% for i in range(40) %}{% set ns.x = i %}{% endfor %}{{ ns.x }}";
    EXPECT_EQ(ChatTemplate::from_string(source, "<s>", "</s>").apply(in),
              "1999 0 17 True False|new 1 2001 k5 extra 5|2001 1999 new|39");
}

// ------------------------------------------------------------------ errors ----

// Renders and returns the Error's message; fails the test if nothing is thrown.
std::string error_of(const std::string& source, const json& extra = json::object()) {
    try {
        ChatTemplateInputs in;
        in.extra = extra;
        ChatTemplate::from_string(source, "<s>", "</s>").apply(in);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Template) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error from: " << source;
    return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

TEST(ChatErrors, SyntaxErrorsNameLineAndReason) {
    std::string m = error_of("{% for m in messages %}\n{{ m.content }}\n");
    EXPECT_TRUE(contains(m, "syntax error")) << m;
    EXPECT_TRUE(contains(m, "endfor")) << m;

    m = error_of("ok\n{{ 1 + }}");
    EXPECT_TRUE(contains(m, "line 2")) << m;
    EXPECT_TRUE(contains(m, "unexpected")) << m;

    m = error_of("{% frobnicate %}");
    EXPECT_TRUE(contains(m, "Encountered unknown tag 'frobnicate'")) << m;
    m = error_of("{% endif %}");
    EXPECT_TRUE(contains(m, "unknown tag 'endif'")) << m;
    m = error_of("a\nb\n  {{ x | no_such_filter }}");
    EXPECT_TRUE(contains(m, "line 3, column 10")) << m;
    EXPECT_TRUE(contains(m, "No filter named 'no_such_filter'")) << m;
    m = error_of("{{ x is no_such_test }}");
    EXPECT_TRUE(contains(m, "No test named 'no_such_test'")) << m;
    m = error_of("{{ 'unterminated }}");
    EXPECT_TRUE(contains(m, "missing closing quote")) << m;
    m = error_of("{{ x ");
    EXPECT_TRUE(contains(m, "unclosed")) << m;
    m = error_of("{# never closed");
    EXPECT_TRUE(contains(m, "comment")) << m;
    m = error_of("{% break %}");
    EXPECT_TRUE(contains(m, "outside of a loop")) << m;
    m = error_of("{{ (1, 2 }}");
    EXPECT_TRUE(contains(m, "expected ')'")) << m;
}

TEST(ChatErrors, RaiseExceptionCarriesTheMessage) {
    const std::string m = error_of("line one\n{% if role != 'user' %}{{ raise_exception('Bad role: ' ~ role) }}{% endif %}",
                                   json{{"role", "tool"}});
    EXPECT_TRUE(contains(m, "raised an exception")) << m;
    EXPECT_TRUE(contains(m, "Bad role: tool")) << m;
    EXPECT_TRUE(contains(m, "line 2")) << m;

    // A published template's own check, through the public API.
    const auto gemma = ChatTemplate::from_string(read_file(data_dir() / "gemma.jinja"), "<bos>", "<eos>");
    try {
        gemma.apply({{"system", "s"}, {"user", "u"}}, true);
        FAIL() << "gemma accepted a system message";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Template);
        EXPECT_TRUE(contains(e.what(), "System role not supported")) << e.what();
    }
}

TEST(ChatErrors, RuntimeErrorsNameLineAndReason) {
    std::string m = error_of("{{ 'a' + 1 }}");
    EXPECT_TRUE(contains(m, "can only concatenate str (not \"int\") to str")) << m;
    EXPECT_TRUE(contains(m, "line 1")) << m;
    m = error_of("\n\n{{ foo.bar }}");
    EXPECT_TRUE(contains(m, "'foo' is undefined")) << m;
    EXPECT_TRUE(contains(m, "line 3")) << m;
    m = error_of("{{ d.a.b }}", json{{"d", json::object()}});
    EXPECT_TRUE(contains(m, "'dict object' has no attribute 'a'")) << m;
    m = error_of("{{ 1 / 0 }}");
    EXPECT_TRUE(contains(m, "division by zero")) << m;
    m = error_of("{{ [1].append(2) }}");
    EXPECT_TRUE(contains(m, "unsafe")) << m;
    m = error_of("{% set x = 5 %}{% set x.y = 1 %}");
    EXPECT_TRUE(contains(m, "non-namespace")) << m;
    m = error_of("{{ none | tojson }}{{ tojson_me | tojson }}", json::object());
    EXPECT_TRUE(contains(m, "not JSON serializable")) << m;
    m = error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}");
    EXPECT_TRUE(contains(m, "too many values to unpack")) << m;
    m = error_of("{{ 1 < 'a' }}");
    EXPECT_TRUE(contains(m, "'<' not supported")) << m;
}

// A template comes with a downloaded file: whatever it does, rendering ends
// in an Error naming the bound it passed (jinja_value.h's Limits), never in a
// stack overflow, an exhausted memory or a render that does not end. Each
// of these crashed or hung before the bounds (fuzz/chat_template found some).
TEST(ChatErrors, UntrustedTemplatesEndInErrors) {
    const auto nested = [](const std::string& open, const std::string& middle, const std::string& close, int n) {
        std::string s;
        for (int i = 0; i < n; ++i) s += open;
        s += middle;
        for (int i = 0; i < n; ++i) s += close;
        return s;
    };
    const std::vector<std::pair<std::string, std::string>> cases = {
        // the parser's and the evaluator's stacks
        {"{{ " + nested("(", "1", ")", 20000) + " }}", "nests deeper than 200 levels"},
        {"{{ " + nested("[", "", "]", 20000) + " }}", "nests deeper than 200 levels"},
        {"{{ " + nested("not ", "1", "", 20000) + " }}", "nests deeper than 200 levels"},
        {nested("{% if 1 %}", "x", "{% endif %}", 5000), "nests deeper than 200 levels"},
        {"{{ x" + nested(".a", "", "", 20000) + " }}", "nests deeper than 200 levels"},
        {"{{ 1" + nested("|string", "", "", 20000) + " }}", "nests deeper than 200 levels"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "a macro that calls itself"},
        // values nested, or holding themselves
        {"{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}",
         "values nested deeper than 200"},
        {"{% set ns = namespace() %}{% set ns.me = [{'a': ns}] %}{{ ns }}", "a namespace cannot hold itself"},
        // memory
        {"{{ 'a' * 1000000000 }}", "a repeated string longer than 16 MiB"},
        {"{{ (1, 2) * 100000000 }}", "a repeated list of more than 1048576 items"},
        {"{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "a string longer than 16 MiB"},
        {"{{ 'x' | center(2000000000) }}", "longer than 16 MiB"},
        {"{{ 'x'.ljust(2000000000) }}", "longer than 16 MiB"},
        {"{{ [[[[1]]]] | tojson(indent=1000000000) }}", "tojson's text longer than 16 MiB"},
        {"{% set s = 'x' * 1000000 %}{{ ([s] * 100) | join }}", "a joined string longer than 16 MiB"},
        {"{% set s = 'x' * 100000 %}{{ s | replace('', s) }}", "a replaced string longer than 16 MiB"},
        {"{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}",
         "a list's text longer than 16 MiB"},
        {"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "the template's output longer than 16 MiB"},
        // time
        {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "ran past 1000000 steps"},
        // 64-bit integers (undefined behaviour before)
        {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
        {"{{ 3037000500 * 3037000500 }}", "integer overflow"},
        {"{{ 2 ** 64 }}", "integer overflow"},
        {"{{ -(-9223372036854775807 - 1) }}", "integer overflow"},
        {"{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow"},
        {"{{ (-9223372036854775807 - 1) | abs }}", "integer overflow"},
        {"{{ 1e300 | int }}", "past the 64-bit integers"},
    };
    for (const auto& [source, reason] : cases) {
        const std::string m = error_of(source);
        EXPECT_TRUE(contains(m, reason)) << source.substr(0, 120) << "\n -> " << m;
    }
    // What stays well inside the bounds renders as jinja2 does.
    EXPECT_EQ(render_construct("{{ (-9223372036854775807 - 1) % -1 }} {{ 2 ** 62 }} {{ '%d' % 1e20 }} {{ 'nan' | float | int }}"),
              "0 4611686018427387904 100000000000000000000 0");
    EXPECT_EQ(render_construct("{{ " + nested("(", "1", ")", 150) + " }}"), "1");
}

// -------------------------------------------------------- built-in formats ----

TEST(ChatBuiltins, ArePublishedTemplatesVerbatim) {
    const auto names = ChatTemplate::builtin_names();
    EXPECT_GE(names.size(), 8u);
    for (const BuiltinTemplate& b : builtin_templates()) {
        EXPECT_EQ(std::string(b.source), read_file(data_dir() / (std::string(b.test_file) + ".jinja"))) << b.name;
    }
    for (const char* required : {"chatml", "llama2", "llama3", "gemma", "phi3", "mistral", "zephyr", "deepseek"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
    }
    EXPECT_FALSE(ChatTemplate::builtin("no-such-format").has_value());
}

TEST(ChatBuiltins, RenderAConversation) {
    const std::vector<ChatMessage> chat = {{"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    for (const std::string& name : ChatTemplate::builtin_names()) {
        const auto t = ChatTemplate::builtin(name);
        ASSERT_TRUE(t.has_value()) << name;
        EXPECT_EQ(t->name(), name);
        std::string out;
        ASSERT_NO_THROW(out = t->apply(chat, true)) << name;
        EXPECT_TRUE(contains(out, "Hi")) << name;
        EXPECT_TRUE(contains(out, "Bye")) << name;
    }
    const auto chatml = ChatTemplate::builtin("chatml");
    EXPECT_EQ(chatml->apply({{"system", "S"}, {"user", "U"}}, true),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(chatml->apply({{"user", "U"}, {"assistant", "A"}}, false),
              "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n");
    const auto llama3 = ChatTemplate::builtin("llama3");
    EXPECT_EQ(llama3->apply({{"user", " U "}}, true),
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    const auto custom_tokens = ChatTemplate::builtin("llama2", "[BOS]", "[EOS]");
    EXPECT_EQ(custom_tokens->apply({{"user", "U"}, {"assistant", "A"}}, false), "[BOS][INST] U [/INST] A [EOS]");
}

// The default model's template (SmolLM2-135M-Instruct, extracted from its GGUF):
// ChatML with a default system prompt when the conversation has none.
TEST(ChatBuiltins, DefaultModelTemplate) {
    const auto t = ChatTemplate::from_string(read_file(data_dir() / "smollm2.jinja"), "<|im_start|>", "<|im_end|>");
    EXPECT_EQ(t.apply({{"user", "What is 2+2?"}}, true),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

// -------------------------------------------------------------- selection ----

TEST(ChatSelect, OverrideThenFileThenVocabulary) {
    auto vocab = [](std::vector<std::string> tokens) {
        return [tokens](std::string_view t) { return std::find(tokens.begin(), tokens.end(), t) != tokens.end(); };
    };
    const std::string file = "{{ 'from the file' }}";

    auto t = ChatTemplate::select("llama3", file, vocab({"<|im_start|>"}), "<s>", "</s>");
    EXPECT_EQ(t.name(), "llama3");
    EXPECT_EQ(t.bos_token(), "<s>");  // the model's tokens win over the family defaults
    t = ChatTemplate::select("{{ 'inline' }}", file, {}, "", "");
    EXPECT_EQ(t.apply({}, false), "inline");
    t = ChatTemplate::select("", file, vocab({"<|im_start|>"}), "", "");
    EXPECT_EQ(t.apply({}, false), "from the file");
    t = ChatTemplate::select("", "", vocab({"<|im_start|>", "<|im_end|>"}), "", "<|im_end|>");
    EXPECT_EQ(t.name(), "chatml");

    try {
        ChatTemplate::select("not-a-format", file, {}, "", "");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
        EXPECT_TRUE(contains(e.what(), "not-a-format")) << e.what();
    }
    try {
        ChatTemplate::select("", "", vocab({"hello"}), "", "");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Template);
    }
    EXPECT_THROW(ChatTemplate::select("", "", {}, "", ""), Error);
    EXPECT_THROW(ChatTemplate::select("", "{% if %}", {}, "", ""), Error);
}

TEST(ChatSelect, GuessesFamilyFromVocabulary) {
    auto guess = [](std::vector<std::string> tokens) {
        return ChatTemplate::guess_builtin(
            [&](std::string_view t) { return std::find(tokens.begin(), tokens.end(), t) != tokens.end(); });
    };
    EXPECT_EQ(guess({"<|im_start|>", "<|im_end|>"}), "chatml");
    EXPECT_EQ(guess({"<|start_header_id|>", "<|eot_id|>"}), "llama3");
    EXPECT_EQ(guess({"<start_of_turn>", "<end_of_turn>"}), "gemma");
    EXPECT_EQ(guess({"<|user|>", "<|end|>", "<|assistant|>"}), "phi3");
    EXPECT_EQ(guess({"[INST]", "[/INST]"}), "mistral");
    EXPECT_EQ(guess({"<\uff5cUser\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"}), "deepseek-r1");
    EXPECT_EQ(guess({"<\uff5cend\u2581of\u2581sentence\uff5c>"}), "deepseek");
    EXPECT_EQ(guess({"<|START_OF_TURN_TOKEN|>"}), "command-r");
    EXPECT_EQ(guess({"<s>", "</s>"}), std::nullopt);
}

// A model's template as the engine will pick it: the GGUF's
// tokenizer.chat_template, else a built-in guessed from its vocabulary.
ChatTemplate template_of(const gguf::File& file) {
    const gguf::Array* tokens = file.get_array("tokenizer.ggml.tokens");
    auto token_text = [&](const char* key) -> std::string {
        const auto id = file.get_int(key);
        return tokens && id && *id >= 0 && size_t(*id) < tokens->strings.size() ? tokens->strings[size_t(*id)] : "";
    };
    auto has_token = [tokens](std::string_view t) {
        return tokens && std::find(tokens->strings.begin(), tokens->strings.end(), t) != tokens->strings.end();
    };
    return ChatTemplate::select("", file.get_string("tokenizer.chat_template").value_or(""), has_token,
                                token_text("tokenizer.ggml.bos_token_id"), token_text("tokenizer.ggml.eos_token_id"));
}

TEST(ChatModelFiles, DefaultModelTemplateFromGguf) {
    const auto path = test::default_model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << " (scripts/setup.sh fetches it)";
    const auto file = gguf::File::open(path.string());
    EXPECT_EQ(file->get_string("tokenizer.chat_template"), read_file(data_dir() / "smollm2.jinja"));
    const ChatTemplate t = template_of(*file);
    EXPECT_EQ(t.name(), "");  // the file's own template
    EXPECT_EQ(t.eos_token(), "<|im_end|>");
    EXPECT_EQ(t.apply({{"system", "Be brief."}, {"user", "Hi"}}, true),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatModelFiles, VocabularyOnlyFilesFallBackToBuiltins) {
    // The Phi-3 vocabulary file carries its template; the others have none and
    // either match a built-in by their special tokens or have no chat format.
    const auto dir = test::testdata_dir() / "vocab";
    if (!std::filesystem::exists(dir / "ggml-vocab-phi-3.gguf")) GTEST_SKIP() << "no " << dir;
    const auto phi3 = gguf::File::open((dir / "ggml-vocab-phi-3.gguf").string());
    EXPECT_EQ(phi3->get_string("tokenizer.chat_template"), read_file(data_dir() / "phi3.jinja"));
    EXPECT_EQ(template_of(*phi3).apply({{"user", "Hi"}}, true), "<s><|user|>\nHi<|end|>\n<|assistant|>\n");

    const auto deepseek = gguf::File::open((dir / "ggml-vocab-deepseek-llm.gguf").string());
    ASSERT_FALSE(deepseek->get_string("tokenizer.chat_template").has_value());
    const ChatTemplate t = template_of(*deepseek);
    EXPECT_EQ(t.name(), "deepseek");
    EXPECT_EQ(t.apply({{"user", "Hi"}}, true), "<\uff5cbegin\u2581of\u2581sentence\uff5c>User: Hi\n\nAssistant:");

    const auto gpt2 = gguf::File::open((dir / "ggml-vocab-gpt-2.gguf").string());
    EXPECT_THROW(template_of(*gpt2), Error);
}

TEST(ChatTemplateApi, TemplatesAreReusableAndShareTheirParse) {
    const auto t = ChatTemplate::from_string("{% for m in messages %}[{{ m.role }}]{% endfor %}", "", "");
    const ChatTemplate copy = t;
    EXPECT_EQ(copy.apply({{"user", "a"}}, false), "[user]");
    EXPECT_EQ(t.apply({{"user", "a"}, {"assistant", "b"}}, false), "[user][assistant]");
    EXPECT_EQ(&copy.source(), &t.source());
}

}  // namespace
}  // namespace lantern
