/* test_template: the chat template engine.
 *
 * 1. Unit tests of the Jinja subset: expressions, filters, tests, methods,
 *    whitespace control, scoping, Python formatting, error messages.
 * 2. Golden parity: every record of tests/data/templates/golden.jsonl (jinja2's
 *    output for a fixed set of conversations x every template, recorded by
 *    scripts/gen-template-golden.py) must render byte-identically, or fail the
 *    way jinja2 failed (same message for raise_exception). A template brisk
 *    cannot render must fail with an "unsupported" error, never with wrong
 *    output. The required templates must match on every case.
 *    Templates are read from tests/data/templates/<name>.jinja when committed
 *    there, else from ../shared/templates (skipped with a note when absent).
 *    BRISK_TEMPLATE_VERBOSE=1 prints every mismatch with both texts. */
#include "template/template.h"
#include "test.h"

#include <jansson.h>
#include <pthread.h>

/* ---- helpers ---------------------------------------------------------------- */

static brisk_status render(const char *src, const char *msgs, const char *vars, char **out, brisk_error *err) {
    brisk_template *t = NULL;
    *out = NULL;
    brisk_status st = brisk_template_parse(src, strlen(src), &t, err);
    if (st) return st;
    brisk_template_opts o = {0};
    brisk_template_parse_time("2026-01-02T13:45:30", &o.now, NULL);
    st = brisk_template_render_ex(t, msgs ? msgs : "[{\"role\":\"user\",\"content\":\"hi\"}]", vars, &o, out, NULL, err);
    brisk_template_free(t);
    return st;
}

/* Expect src to render to want (with default messages and the given vars). */
static void expect_vars(int line, const char *src, const char *vars, const char *want) {
    brisk_error err = {0};
    char *out = NULL;
    brisk_status st = render(src, NULL, vars, &out, &err);
    if (st) {
        test_failed++;
        fprintf(stderr, "FAIL line %d: %s\n  error: %s\n", line, src, err.msg);
    } else if (strcmp(out, want)) {
        test_failed++;
        fprintf(stderr, "FAIL line %d: %s\n  got:  [%s]\n  want: [%s]\n", line, src, out, want);
    } else {
        test_passed++;
    }
    free(out);
}
#define EXPECT(src, want) expect_vars(__LINE__, src, NULL, want)
#define EXPECTV(src, vars, want) expect_vars(__LINE__, src, vars, want)

/* Expect a failure with status st whose message contains part. */
static void expect_err(int line, const char *src, brisk_status want_st, const char *part) {
    brisk_error err = {0};
    char *out = NULL;
    brisk_status st = render(src, NULL, NULL, &out, &err);
    if (st == want_st && strstr(err.msg, part)) {
        test_passed++;
    } else {
        test_failed++;
        fprintf(stderr, "FAIL line %d: %s\n  got status %d [%s] output [%s]\n  want status %d containing [%s]\n", line, src,
                st, err.msg, out ? out : "", want_st, part);
    }
    free(out);
}
#define EXPECT_ERR(src, part) expect_err(__LINE__, src, BRISK_ERR_TEMPLATE, part)
#define EXPECT_UNSUP(src, part) expect_err(__LINE__, src, BRISK_ERR_UNSUPPORTED, part)

/* ---- unit tests -------------------------------------------------------------- */

static void test_expressions(void) {
    EXPECT("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 4 / 2 }}", "7|9|3|-4|2|3.5|2.0");
    EXPECT("{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 123.0 }}", "1024|0.5|2.5|0.30000000000000004|1e+16|1e-05|123.0");
    EXPECT("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ 'x' + 'y' }}", "a1NoneTrue|ababab|[1, 2]|xy");
    EXPECT("{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' in 'cat' }}|{{ 2 not in [1, 3] }}|{{ 'k' in {'k': 1} }}", "True|False|True|True|True");
    EXPECT("{{ true and 'x' }}|{{ 0 or 'y' }}|{{ not 0 }}|{{ none or [] }}|{{ 1 == 1.0 }}|{{ (1, 2) == [1, 2] }}", "x|y|True|[]|True|False");
    EXPECT("{{ 'yes' if 1 else 'no' }}|{{ 'yes' if 0 }}|{{ [1, 2, 3][1:] }}|{{ 'hello'[::-1] }}|{{ [1, 2, 3][-1] }}", "yes||[2, 3]|olleh|3");
    EXPECT("{{ 'héllo'[1] }}|{{ 'héllo'[1:3] }}|{{ 'héllo'|length }}|{{ 'ab'[5] }}|{{ [1][3] }}", "é|él|5||");
    EXPECT("{{ {'a': 1, 'b': [true, none, 'x']} }}|{{ ('a',) }}|{{ () }}|{{ [\"it's\", 'q\"'] }}", "{'a': 1, 'b': [True, None, 'x']}|('a',)|()|[\"it's\", 'q\"']");
    EXPECT("{{ ['\\n', '\\t', 'é', '\\u00a0', '\\x01'] }}", "['\\n', '\\t', 'é', '\\xa0', '\\x01']");
    /* float repr: shortest round-trip digits, including the neighbour rule at exact ties */
    EXPECT("{{ 0.5 ** 24 }}|{{ 2.0 ** -44 * 0.5 }}|{{ 1e15 }}|{{ 123456789012345678.0 }}|{{ -0.0 }}|{{ 1 / 3 }}",
           "5.960464477539063e-08|2.842170943040401e-14|1000000000000000.0|1.2345678901234568e+17|-0.0|0.3333333333333333");
    EXPECT("{% set ą = 'x' %}{{ ą }}{{ ą~ą }}", "xxx");   /* non-ASCII names; U+0105 ends in byte 0x85 (NEL) */
    EXPECT("{{ 'a' 'b' }}|{{ \"\\u00e9\\x41\\101\\q\" }}|{{ 0x1F }}|{{ 1_000 }}", "ab|éAA\\q|31|1000");
    EXPECT("{{ -(2) ** 2 }}|{{ 1 + 2 is number }}|{{ -(3)|abs }}", "4|2|3");
    EXPECT_ERR("{{ -x|default(3) }}", "'x' is undefined");   /* the filter applies to -x */
}

static void test_whitespace(void) {
    EXPECT("a\n{% if true %}\n  b\n{% endif %}\nc", "a\n  b\nc");
    EXPECT("a\n    {% if true %}b{% endif %}\nc", "a\nbc");
    EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
    EXPECT("a\n  {%+ if true %}b{% endif %}", "a\n  b");
    EXPECT("{% if true +%}\nx{% endif %}", "\nx");
    EXPECT("a {# comment #}\nb\n  {# c2 #}\nc", "a b\nc");
    EXPECT("{{ 'x' }}\n{{ 'y' -}}\n  z", "x\nyz");
    EXPECT("line\n", "line");
    EXPECT("a\r\nb\rc", "a\nb\nc");
    EXPECT("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
    EXPECT("  {% for i in [1,2] %}\n  [{{ i }}]\n  {% endfor %}\n", "  [1]\n  [2]\n");
}

static void test_statements(void) {
    EXPECT("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }},{% endfor %}",
           "10TrueFalse33,21FalseFalse32,32FalseTrue31,");
    EXPECT("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", "2242");
    EXPECT("{% for x in [] %}x{% else %}empty{% endfor %}", "empty");
    /* jinja2 runs else unless an iteration reached the end of the body */
    EXPECT("{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}|{% for x in [1, 2] %}{% continue %}{% else %}E{% endfor %}|"
           "{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}E{% endfor %}", "E|E|");
    EXPECT("{% set ns = namespace(a=1) %}{% set ns.b = ns %}{{ ns }}|{% set l = [1] %}{{ [l, l] }}",
           "<Namespace {'a': 1, 'b': <Namespace {...}>}>|[[1], [1]]");
    EXPECT("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    EXPECT("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}", "-2,1-3,2-,");
    EXPECT("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "02");
    EXPECT("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}", "12121");
    EXPECT("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "6");
    EXPECT("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "2");
    EXPECT("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
    EXPECT("{% set x %}a{{ 1 }}b{% endset %}{{ x }}|{% set y | upper %}q{% endset %}{{ y }}", "a1b|Q");
    EXPECT("{% filter upper %}abc{% endfilter %}", "ABC");
    EXPECT("{% macro m(a, b=a+1) %}{{ a }},{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 5) }}|{{ m(b=3) }}", "1,2|1,5|,3");
    EXPECT("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, z=3) }}", "1(2,){'z': 3}");
    EXPECT("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", "321");
    EXPECT("{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}", "2");
    EXPECT("{% with a = 5 %}{{ a }}{% endwith %}{{ a }}", "5");
    EXPECT("{% generation %}g{% endgeneration %}", "g");
    EXPECT("{% print 1 + 1 %}", "2");
    /* in-place string growth must never show through older values */
    EXPECT("{% set ns = namespace(s='x' * 300) %}{% set a = ns.s %}{% set ns.s = ns.s ~ 'A' %}{% set b = a ~ 'B' %}"
           "{% set ns.s = ns.s ~ 'C' %}{% set c = a + 'D' %}{{ ns.s[-3:] }}{{ b[-2:] }}{{ c[-2:] }}{{ a|length }}{{ b|length }}",
           "xACxBxD300301");
    EXPECT("{% set ns = namespace(s='') %}{% for i in range(500) %}{% set ns.s = ns.s ~ i ~ ',' %}{% endfor %}{{ ns.s|length }}{{ ns.s[-4:] }}",
           "1890499,");
}

static void test_filters(void) {
    EXPECT("{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ [1, 2]|length }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}", "x|hi|2|ABC|abc");
    EXPECT("{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a-b c'|title }}", "Hello World|Hello|A-B C");
    EXPECT("{{ [1, 2, 3]|join(', ') }}|{{ [{'a': 1}, {'a': 2}]|map(attribute='a')|join }}|{{ ['a', 'b']|map('upper')|list }}", "1, 2, 3|12|['A', 'B']");
    EXPECT("{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none|default('d') }}", "d||d|None");
    EXPECT("{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'c']|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ [1, 2, 3]|first }}|{{ [1, 2, 3]|last }}",
           "[1, 2, 3]|['A', 'b', 'c']|[3, 2, 1]|1|3");
    EXPECT("{{ {'b': 1, 'A': 2}|dictsort }}|{{ {'a': 1}|items|list }}|{{ [1, 1, 2]|unique|list }}|{{ ['a', 'A']|unique|list }}",
           "[('A', 2), ('b', 1)]|[('a', 1)]|[1, 2]|['a']");
    EXPECT("{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('odd')|list }}|{{ [{'r': 'u'}, {'r': 's'}]|selectattr('r', 'equalto', 's')|list }}",
           "[1, 3]|[2, 4]|[{'r': 's'}]");
    EXPECT("{{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ '2.5'|float }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ -3|abs }}",
           "43|4|0|2.5|2.0|3.14|3");
    EXPECT("{{ 'a\nb'|indent(2) }}|{{ 'a\n\nb'|indent(2, true) }}|{{ 'a\nb'|indent(2, first=true, blank=true) }}", "a\n  b|  a\n\n  b|  a\n  b");
    EXPECT("[{{ '{\n'|indent(4, first=true) }}]|[{{ ''|indent }}]|[{{ 'a\n\n'|indent(1, blank=true) }}]", "[    {\n]|[]|[a\n \n ]");
    EXPECT("{{ 'aXbX'|replace('X', '-') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ [1, 2]|list|string }}|{{ 5|string }}", "a-b-|bba|[1, 2]|5");
    EXPECT("{{ [1, 5, 3]|max }}|{{ [1, 5, 3]|min }}|{{ [1, 2, 3]|sum }}|{{ 'ab'|reverse }}|{{ [1, 2]|reverse|list }}", "5|1|6|ba|[2, 1]");
    EXPECT("{{ '<a href=\"x\">'|e }}|{{ ('<b>'|safe) + '<i>' }}|{{ '<i>' + ('<b>'|safe) }}|{{ ('<b>'|safe) ~ '<i>' }}",
           "&lt;a href=&#34;x&#34;&gt;|<b>&lt;i&gt;|&lt;i&gt;<b>|<b><i>");
}

static void test_tojson(void) {
    EXPECT("{{ {'a': [1, 2.5, none, true], 'b': 'é\"\\n'}|tojson }}", "{\"a\": [1, 2.5, null, true], \"b\": \"é\\\"\\n\"}");
    EXPECT("{{ {'a': 1, 'b': [1, 2]}|tojson(indent=2) }}", "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ]\n}");
    EXPECT("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ []|tojson(indent=4) }}",
           "{\"a\": 2, \"b\": 1}|\"\\u00e9\\ud83d\\ude00\"|[]");
    EXPECT("{{ {'a': 1}|tojson(separators=(',', ':')) }}|{{ {1: 2}|tojson }}", "{\"a\":1}|{\"1\": 2}");
    EXPECT_ERR("{{ x|tojson }}", "Object of type Undefined is not JSON serializable");
    EXPECT_ERR("{{ [1]|select('odd')|tojson }}", "Object of type generator is not JSON serializable");
}

static void test_tests_and_methods(void) {
    EXPECT("{{ x is defined }}|{{ none is none }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 1 is number }}|{{ true is boolean }}",
           "False|True|True|True|True|True|True");
    EXPECT("{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 1 is eq 1 }}|{{ 'ab' is sequence }}|{{ x is undefined }}",
           "True|True|True|True|True|True");
    EXPECT("{{ ' a b '.strip() }}|{{ 'xax'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}",
           "a b|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']");
    EXPECT("{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a-b'.replace('-', '+') }}|{{ '{} and {}'.format(1, 'x') }}",
           "True|True|a+b|1 and x");
    EXPECT("{{ 'Hello'.upper() }}|{{ 'ÉCOLE Ünï'.lower() }}|{{ 'straße'.upper() }}|{{ 'abc'.find('c') }}|{{ 'a\\nb'.splitlines() }}",
           "HELLO|école ünï|STRASSE|2|['a', 'b']");
    EXPECT("{{ 'ǆemal ﬁsh ΐ'.title() }}|{{ 'İ'.lower()|length }}|{{ 'Привет Мир'.upper() }}|{{ 'µ'.upper() }}",
           "\xc7\x85" "emal Fish \xce\x99\xcc\x88\xcc\x81" "|2|\xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2" " \xd0\x9c\xd0\x98\xd0\xa0" "|\xce\x9c" "");
    EXPECT("{{ {'a': 1}.get('a') }}|{{ {'a': 1}.get('b') }}|{{ {'a': 1}.get('b', 2) }}|{{ {'a': 1}.keys()|list }}|{{ {'a': 1}.values()|list }}",
           "1|None|2|['a']|[1]");
    EXPECT("{{ {'a': 1}.items() }}|{{ {'items': 5}['items'] }}|{{ {'items': 5}.items()|list }}", "dict_items([('a', 1)])|5|[('items', 5)]");
    EXPECT("{{ namespace(a=1) }}|{{ range(3) }}|{{ range(3)|list }}|{{ range(1, 7, 2)|list }}", "<Namespace {'a': 1}>|range(0, 3)|[0, 1, 2]|[1, 3, 5]");
    EXPECT("{{ strftime_now('%Y-%m-%d %H:%M %b %A') }}", "2026-01-02 13:45 Jan Friday");
    EXPECT("{{ none.x }}|{{ 5.foo }}|{{ messages[0].role }}|{{ messages[0]['content'] }}", "||user|hi");
}

static void test_errors(void) {
    EXPECT_ERR("{{ raise_exception('Only user and assistant roles!') }}", "Only user and assistant roles!");
    {
        brisk_error err = {0};
        char *out = NULL;
        brisk_status st = render("{{ raise_exception('exact message') }}", NULL, NULL, &out, &err);
        CHECK(st == BRISK_ERR_TEMPLATE && !strcmp(err.msg, "exact message"));
        free(out);
    }
    EXPECT_ERR("{{ x.y }}", "'x' is undefined");
    EXPECT_ERR("{{ messages[0].nope.x }}", "'dict object' has no attribute 'nope'");
    EXPECT_ERR("{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str");
    EXPECT_ERR("{{ 1 / 0 }}", "division by zero");
    EXPECT_ERR("{% for x in none %}{% endfor %}", "'NoneType' object is not iterable");
    EXPECT_ERR("{{ [1].append(2) }}", "access to attribute 'append' of 'list' object is unsafe.");
    EXPECT_ERR("{% if %}", "template line 1");
    EXPECT_ERR("line1\n{{ 1 +}}", "template line 2");
    EXPECT_ERR("{% foo %}", "Encountered unknown tag 'foo'");
    EXPECT_ERR("{% for x in y %}", "Unexpected end of template");
    EXPECT_ERR("{{ x|nosuchfilter }}", "No filter named 'nosuchfilter'");
    EXPECT("{% if false %}{{ x|nosuchfilter }}{% endif %}ok", "ok");
    EXPECT_ERR("{% if true %}{{ x|nosuchfilter }}{% endif %}", "No filter named 'nosuchfilter' found");
    EXPECT_ERR("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes not more than 1 argument");
    EXPECT_ERR("{{ 'x' < 1 }}", "'<' not supported between instances of 'str' and 'int'");
    EXPECT_ERR("{{ range(200000)|length }}", "Range too big");
    EXPECT_ERR("{% set ns = 1 %}{% set ns.a = 2 %}", "cannot assign attribute on non-namespace object");
    EXPECT_ERR("{% break %}", "'break' outside loop");
    EXPECT_UNSUP("{{ [1, 2]|groupby('x') }}", "groupby");
    EXPECT_UNSUP("{% call m() %}{% endcall %}", "call");
    EXPECT_UNSUP("{{ [1]|select('odd') }}", "generator");
    EXPECT_UNSUP("{{ 2 ** 70 }}", "64 bits");
    EXPECT_UNSUP("{{ 'ΣΑΣ'.lower() }}", "sigma");
    EXPECT_UNSUP("{{ [1, 2][0, 1:] }}", "slices inside a tuple subscript");
    EXPECT("{{ {(1, 2): 'x'}[1, 2] }}{{ [1][0, 1] }}", "x");
    /* caps */
    {
        brisk_template *t = NULL;
        brisk_error err = {0};
        const char *src = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
        CHECK(brisk_template_parse(src, strlen(src), &t, &err) == BRISK_OK);
        brisk_template_opts o = {.max_steps = 100000};
        char *out = NULL;
        CHECK(brisk_template_render_ex(t, "[]", NULL, &o, &out, NULL, &err) == BRISK_ERR_CAPACITY);
        o = (brisk_template_opts){.max_output = 1000};
        CHECK(brisk_template_render_ex(t, "[]", NULL, &o, &out, NULL, &err) == BRISK_ERR_CAPACITY);
        CHECK(out == NULL);
        brisk_template_free(t);
        src = "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}";
        CHECK(brisk_template_parse(src, strlen(src), &t, &err) == BRISK_OK);
        CHECK(brisk_template_render(t, "[]", NULL, &out, NULL, &err) == BRISK_ERR_CAPACITY);
        CHECK(strstr(err.msg, "recursion") != NULL);
        brisk_template_free(t);
    }
    /* a source over the size cap */
    {
        size_t big = (size_t)5 << 20;
        char *src = malloc(big);
        memset(src, 'x', big);
        brisk_template *t = NULL;
        brisk_error err = {0};
        CHECK(brisk_template_parse(src, big, &t, &err) == BRISK_ERR_CAPACITY && t == NULL);
        free(src);
    }
    /* bad input JSON */
    {
        brisk_template *t = NULL;
        brisk_error err = {0};
        char *out = NULL;
        CHECK(brisk_template_parse("x", 1, &t, &err) == BRISK_OK);
        CHECK(brisk_template_render(t, "{", NULL, &out, NULL, &err) == BRISK_ERR_INVALID_ARG);
        CHECK(brisk_template_render(t, "{}", NULL, &out, NULL, &err) == BRISK_ERR_INVALID_ARG);
        CHECK(brisk_template_render(t, "[]", "[1]", &out, NULL, &err) == BRISK_ERR_INVALID_ARG);
        CHECK(brisk_template_render(t, "[]", "{\"a\": 1}", &out, NULL, &err) == BRISK_OK);
        free(out);
        brisk_template_free(t);
    }
    EXPECTV("{{ bos_token }}{{ tools }}{{ add_generation_prompt }}{{ documents }}", "{\"bos_token\": \"<s>\"}", "<s>NoneFalseNone");
}

/* ---- limits: nesting, hashed dicts, the work budget ------------------------------ */

/* A template that nests a value n levels deep in ns.t, then runs `use`. */
static char *deep_src(const char *open, const char *close, int n, const char *use) {
    char *src = malloc(1024 + strlen(use));
    snprintf(src, 1024 + strlen(use),
             "{%%- set ns = namespace(t=0, u=0) -%%}{%%- for i in range(%d) %%}{%% set ns.t = %sns.t%s %%}"
             "{%% set ns.u = %sns.u%s %%}{%% endfor -%%}%s",
             n, open, close, open, close, use);
    return src;
}

static void expect_deep(int line, const char *open, const char *close, int n, const char *use, const char *want_err) {
    char *src = deep_src(open, close, n, use);
    if (want_err) expect_err(line, src, BRISK_ERR_TEMPLATE, want_err);
    else expect_vars(line, src, NULL, "ok");
    free(src);
}

typedef struct stack_job {
    int failed;
} stack_job;

/* The deepest renders the limits allow, on a 1 MiB thread stack (run under
 * ASan by the sanitizer build): every walk stops before the stack does. */
static void *deep_on_small_stack(void *arg) {
    stack_job *job = arg;
    static const struct { const char *open, *close; const char *use; } uses[] = {
        {"(", ",)", "{% set d = {ns.t: 1} %}{{ ns.t == ns.u }}{{ ns.t < ns.u }}{{ ns.t in d }}"},
        {"[", "]", "{{ ns.t | tojson | length }}{{ ns.t | string | length }}{{ ns.t == ns.u }}"},
        {"{'a': ", "}", "{{ ns.t | tojson(indent=1) | length }}{{ ns.t | string | length }}{{ ns.t == ns.u }}"},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        for (int n = 505; n <= 520; n += 15) {   /* just under and just over the limit */
            char *src = deep_src(uses[i].open, uses[i].close, n, uses[i].use);
            char *out = NULL;
            brisk_error err = {0};
            brisk_status st = render(src, "[]", NULL, &out, &err);
            if ((n < 512) != (st == BRISK_OK)) {
                fprintf(stderr, "FAIL deep %s%d: %s\n", uses[i].open, n, err.msg);
                job->failed++;
            }
            free(out);
            free(src);
        }
    }
    const char *macro = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(199) }}ok";
    char *out = NULL;
    brisk_error err = {0};
    if (render(macro, "[]", NULL, &out, &err) != BRISK_OK || strcmp(out, "ok")) {
        fprintf(stderr, "FAIL deep macro: %s\n", err.msg);
        job->failed++;
    }
    free(out);
    char src[2048];
    int k = 0;
    for (int i = 0; i < 120; i++) k += snprintf(src + k, sizeof src - (size_t)k, "(");
    k += snprintf(src + k, sizeof src - (size_t)k, "1");
    for (int i = 0; i < 120; i++) k += snprintf(src + k, sizeof src - (size_t)k, ")");
    char wrapped[2100];
    snprintf(wrapped, sizeof wrapped, "{{ %s }}", src);
    if (render(wrapped, "[]", NULL, &out, &err) != BRISK_OK) {
        fprintf(stderr, "FAIL deep parens: %s\n", err.msg);
        job->failed++;
    }
    free(out);
    return NULL;
}

static void test_limits(void) {
    /* values nested past the limit fail cleanly in every walk */
    expect_deep(__LINE__, "(", ",)", 2000, "{% set d = {ns.t: 1} %}", "value nested deeper than 512 levels (in hashing)");
    expect_deep(__LINE__, "(", ",)", 2000, "{{ ns.t in {} }}", "(in hashing)");
    expect_deep(__LINE__, "(", ",)", 2000, "{{ [ns.t] | unique | list }}", "(in hashing)");
    expect_deep(__LINE__, "(", ",)", 2000, "{{ ns.t == ns.u }}", "(in comparison)");
    expect_deep(__LINE__, "(", ",)", 2000, "{{ ns.t < ns.u }}", "(in comparison)");
    expect_deep(__LINE__, "(", ",)", 2000, "{{ ns.t in [ns.u] }}", "(in comparison)");
    expect_deep(__LINE__, "[", "]", 2000, "{{ [ns.t, ns.u] | sort }}", "(in comparison)");
    expect_deep(__LINE__, "[", "]", 2000, "{{ ns.t | tojson }}", "(in tojson)");
    expect_deep(__LINE__, "[", "]", 2000, "{{ ns.t }}", "(in printing)");
    expect_deep(__LINE__, "{'a': ", "}", 2000, "{{ ns.t == ns.u }}", "(in comparison)");
    expect_deep(__LINE__, "(", ",)", 2000, "{% if ns.t == ns.t %}ok{% endif %}", NULL);   /* identity needs no walk */
    expect_deep(__LINE__, "(", ",)", 500, "{% set d = {ns.t: 1} %}{% if d[ns.u] == 1 and ns.t == ns.u %}ok{% endif %}", NULL);
    /* the parser's nesting and the evaluator's frames */
    {
        char src[4096];
        int k = snprintf(src, sizeof src, "{{ ");
        for (int i = 0; i < 300; i++) k += snprintf(src + k, sizeof src - (size_t)k, "(");
        snprintf(src + k, sizeof src - (size_t)k, "1 }}");
        EXPECT_ERR(src, "brackets nested deeper than 256 levels");
        k = snprintf(src, sizeof src, "{{ ");
        for (int i = 0; i < 300; i++) k += snprintf(src + k, sizeof src - (size_t)k, "not ");
        snprintf(src + k, sizeof src - (size_t)k, "1 }}");
        EXPECT_ERR(src, "expression nested deeper than 256 levels");
    }
    {
        size_t n = 20000, cap = 8 * n + 16;
        char *src = malloc(cap);
        size_t k = (size_t)snprintf(src, cap, "{{ 1");
        for (size_t i = 0; i < n; i++) k += (size_t)snprintf(src + k, cap - k, " + 1");
        snprintf(src + k, cap - k, " }}");
        EXPECT_ERR(src, "evaluation nested deeper than");
        free(src);
    }
    /* hashed dicts keep Python's semantics: insertion order, 1 == 1.0 == True, replacement in place */
    EXPECT("{{ {1: 'a', 1.0: 'b', True: 'c'} }}", "{1: 'c'}");
    EXPECT("{% set d = {'k0': 0, 'k1': 1, 'k2': 2, 'k3': 3, 'k4': 4, 'k5': 5, 'k6': 6, 'k7': 7, 'k8': 8, 'k9': 9, "
           "'k10': 10, 'k3': 'x', 2.0: 'two', (1, 'a'): 't'} %}{{ d | list }} {{ d.k3 }} {{ d[2] }} {{ d[(1, 'a')] }} "
           "{{ d.copy()['k9'] }} {{ dict(d)['k10'] }} {{ 'k11' in d }}",
           "['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', 'k10', 2.0, (1, 'a')] x two t 9 10 False");
    EXPECT("{{ [1, 1.0, True, 'a', 'A', 2, (1, 2), (1, 2)] | unique | list }}", "[1, 'a', 2, (1, 2)]");
    EXPECT("{{ ['a', 'A'] | unique(case_sensitive=true) | list }}", "['a', 'A']");
    EXPECT("{% set l = range(3000) | list %}{{ (l + l) | unique | list | length }}", "3000");
    EXPECT("{{ dict([(1, 2), (1.0, 3)]) }}", "{1: 3}");
    EXPECT_ERR("{{ dict([([1], 2)]) }}", "unhashable type: 'list'");
    EXPECT_ERR("{{ [[1]] | unique | list }}", "unhashable type: 'list'");
    EXPECT_ERR("{{ {[1]: 2} }}", "unhashable type: 'list'");
    /* the work budget */
    {
        brisk_template *t = NULL;
        brisk_error err = {0};
        char *out = NULL;
        const char *src = "{% for i in range(1000) %}{% if i in range(1000) | list %}{% endif %}{% endfor %}ok";
        CHECK(brisk_template_parse(src, strlen(src), &t, &err) == BRISK_OK);
        CHECK(brisk_template_render(t, "[]", NULL, &out, NULL, &err) == BRISK_OK && !strcmp(out, "ok"));
        free(out);
        brisk_template_opts o = {.max_work = 100000};
        CHECK(brisk_template_render_ex(t, "[]", NULL, &o, &out, NULL, &err) == BRISK_ERR_CAPACITY && out == NULL);
        CHECK(strstr(err.msg, "template work budget exceeded (100000 units)") != NULL);
        brisk_template_free(t);
        src = "{%- set ns = namespace(a=1, b=1) -%}{%- for i in range(60) %}{% set ns.a = (ns.a, ns.a) %}"
              "{% set ns.b = (ns.b, ns.b) %}{% endfor -%}{{ ns.a == ns.b }}";
        CHECK(brisk_template_parse(src, strlen(src), &t, &err) == BRISK_OK);
        o.max_work = 1000000;
        CHECK(brisk_template_render_ex(t, "[]", NULL, &o, &out, NULL, &err) == BRISK_ERR_CAPACITY);
        CHECK(strstr(err.msg, "work budget") != NULL);
        brisk_template_free(t);
    }
    {
        pthread_attr_t attr;
        pthread_t th;
        stack_job job = {0};
        CHECK(pthread_attr_init(&attr) == 0);
        CHECK(pthread_attr_setstacksize(&attr, (size_t)1 << 20) == 0);
        CHECK(pthread_create(&th, &attr, deep_on_small_stack, &job) == 0);
        pthread_join(th, NULL);
        pthread_attr_destroy(&attr);
        CHECKF(job.failed == 0, "%d deep renders on a 1 MiB stack failed", job.failed);
    }
}

/* ---- golden parity ----------------------------------------------------------------- */

static const char *const required[] = {
    "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
    "Qwen3.5-4B", "mistralai-Mistral-Nemo-Instruct-2407", "microsoft-Phi-3.5-mini-instruct", "google-gemma-2-2b-it",
    "HuggingFaceTB-SmolLM3-3B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "ibm-granite-granite-3.3-2B-Instruct",
    "openai-gpt-oss-120b",   /* the harmony format of gpt-oss (its reasoning channel, tool calls to functions.NAME) */
};

typedef enum verdict { V_SAME, V_UNSUPPORTED, V_WRONG, V_SKIP } verdict;

typedef struct tstate {
    char name[256];
    brisk_template *t;
    brisk_status parse_st;
    brisk_error parse_err;
    bool present;
    verdict worst;
    int n_same, n_unsup, n_wrong;
    char first_problem[600];
} tstate;

static char *load_template_text(const char *name, size_t *len) {
    char rel[512], path[1024];
    snprintf(rel, sizeof rel, "tests/data/templates/%s.jinja", name);
    test_source(rel, path, sizeof path);
    if (!test_exists(path)) {
        snprintf(rel, sizeof rel, "templates/%s.jinja", name);
        test_shared(rel, path, sizeof path);
        if (!test_exists(path)) return NULL;
    }
    uint8_t *buf = NULL;
    brisk_error err;
    if (brisk_file_read(path, &buf, len, &err)) return NULL;
    return (char *)buf;
}

static void finish_template(tstate *ts, int *counts) {
    if (!ts->name[0]) return;
    if (!ts->present) counts[V_SKIP]++;
    else if (ts->n_wrong) counts[V_WRONG]++;
    else if (ts->n_unsup) counts[V_UNSUPPORTED]++;
    else counts[V_SAME]++;
    bool req = false;
    for (size_t i = 0; i < BRISK_ARRAY_LEN(required); i++) req |= !strcmp(required[i], ts->name);
    if (ts->present && (ts->n_wrong || ts->n_unsup))
        printf("  %-50s %s (%d same, %d unsupported, %d wrong): %s\n", ts->name, ts->n_wrong ? "WRONG" : "unsupported",
               ts->n_same, ts->n_unsup, ts->n_wrong, ts->first_problem);
    if (!ts->present) {
        printf("  %-50s skipped: template text absent (no ../shared/templates)\n", ts->name);
    } else if (req) {
        CHECKF(ts->n_same > 0 && !ts->n_wrong && !ts->n_unsup, "required template %s: %d same, %d unsupported, %d wrong",
               ts->name, ts->n_same, ts->n_unsup, ts->n_wrong);
    } else {
        CHECKF(ts->n_wrong == 0, "template %s renders wrong output", ts->name);
    }
    brisk_template_free(ts->t);
    memset(ts, 0, sizeof *ts);
}

static void problem(tstate *ts, const char *fmt, const char *a, const char *b) {
    if (ts->first_problem[0]) return;
    snprintf(ts->first_problem, sizeof ts->first_problem, fmt, a, b);
    for (char *p = ts->first_problem; *p; p++)
        if (*p == '\n') *p = ' ';
}

static void test_golden(void) {
    char path[1024];
    test_source("tests/data/templates/golden.jsonl", path, sizeof path);
    uint8_t *data = NULL;
    size_t len = 0;
    brisk_error err = {0};
    if (brisk_file_read(path, &data, &len, &err)) {
        CHECKF(0, "golden data: %s", err.msg);
        return;
    }
    bool verbose = getenv("BRISK_TEMPLATE_VERBOSE") != NULL;
    const char *only = getenv("BRISK_TEMPLATE_ONLY");
    char *save = NULL;
    char *line = strtok_r((char *)data, "\n", &save);
    json_error_t je;
    json_t *head = line ? json_loads(line, 0, &je) : NULL;
    json_t *cases = json_object_get(head, "cases");
    CHECK(cases != NULL);
    brisk_template_opts opts = {0};
    CHECK(brisk_template_parse_time(json_string_value(json_object_get(head, "now")), &opts.now, &err) == BRISK_OK);
    tstate ts = {0};
    int counts[4] = {0};
    int records = 0;
    char *base_out = NULL;   /* add_generation_prompt=false output of the current case, for "sfx" records */
    while (cases && (line = strtok_r(NULL, "\n", &save))) {
        json_t *rec = json_loads(line, JSON_ALLOW_NUL, &je);
        if (!rec) {
            CHECKF(0, "golden line: %s", je.text);
            continue;
        }
        const char *name = json_string_value(json_object_get(rec, "t"));
        const char *cid = json_string_value(json_object_get(rec, "c"));
        bool agp = json_is_true(json_object_get(rec, "g"));
        if (!name || !cid || (only && strcmp(only, name))) {
            json_decref(rec);
            continue;
        }
        if (strcmp(ts.name, name)) {
            finish_template(&ts, counts);
            snprintf(ts.name, sizeof ts.name, "%s", name);
            size_t tl = 0;
            char *src = load_template_text(name, &tl);
            ts.present = src != NULL;
            if (src) ts.parse_st = brisk_template_parse(src, tl, &ts.t, &ts.parse_err);
            free(src);
        }
        if (!ts.present) {
            json_decref(rec);
            continue;
        }
        records++;
        json_t *c = json_object_get(cases, cid);
        json_t *vars = json_deep_copy(json_object_get(c, "vars"));
        json_object_set(vars, "tools", json_object_get(c, "tools"));
        json_object_set_new(vars, "documents", json_null());
        json_object_set_new(vars, "add_generation_prompt", json_boolean(agp));
        json_object_set(vars, "bos_token", json_object_get(rec, "bos"));
        json_object_set(vars, "eos_token", json_object_get(rec, "eos"));
        char *msgs = json_dumps(json_object_get(c, "messages"), JSON_COMPACT);
        char *vs = json_dumps(vars, JSON_COMPACT);
        char *out = NULL;
        brisk_error rerr = {0};
        brisk_status st = ts.parse_st;
        if (!st) st = brisk_template_render_ex(ts.t, msgs, vs, &opts, &out, NULL, &rerr);
        else rerr = ts.parse_err;
        json_t *jout = json_object_get(rec, "out"), *jsfx = json_object_get(rec, "sfx"), *jerr = json_object_get(rec, "err");
        const char *etype = json_string_value(json_object_get(rec, "etype"));
        char *want = NULL;
        if (jout) want = strdup(json_string_value(jout));
        else if (jsfx && base_out) {
            want = malloc(strlen(base_out) + json_string_length(jsfx) + 1);
            strcpy(want, base_out);
            strcat(want, json_string_value(jsfx));
        }
        verdict v;
        if (want) {
            if (!st && !strcmp(out, want)) v = V_SAME;
            else if (st == BRISK_ERR_UNSUPPORTED) v = V_UNSUPPORTED, problem(&ts, "%s%s", rerr.msg, "");
            else {
                v = V_WRONG;
                problem(&ts, "case %s: %s", cid, st ? rerr.msg : "output differs");
                if (verbose)
                    fprintf(stderr, "--- %s / %s / agp=%d\n%s\n--- got:\n%s\n--- want:\n%s\n", name, cid, agp, st ? rerr.msg : "",
                            out ? out : "", want);
            }
        } else if (jerr) {
            const char *emsg = json_string_value(jerr);
            if (st == BRISK_ERR_UNSUPPORTED) v = V_UNSUPPORTED, problem(&ts, "%s%s", rerr.msg, "");
            else if (!st) {
                v = V_WRONG;
                problem(&ts, "case %s: rendered but jinja2 failed: %s", cid, emsg);
                if (verbose) fprintf(stderr, "--- %s / %s / agp=%d: rendered, jinja2 raised %s\n", name, cid, agp, emsg);
            } else if (etype && !strcmp(etype, "TemplateError") && strncmp(rerr.msg, emsg, sizeof rerr.msg - 1)) {
                v = V_WRONG;
                problem(&ts, "raise_exception message differs: %s", rerr.msg, "");
                if (verbose) fprintf(stderr, "--- %s / %s: got [%s] want [%s]\n", name, cid, rerr.msg, emsg);
            } else {
                v = V_SAME;
            }
        } else {
            v = V_WRONG;
            problem(&ts, "case %s: malformed golden record%s", cid, "");
        }
        if (v == V_SAME) ts.n_same++;
        else if (v == V_UNSUPPORTED) ts.n_unsup++;
        else ts.n_wrong++;
        if (!agp) {
            free(base_out);
            base_out = out && !st ? strdup(out) : NULL;
        }
        free(want);
        free(out);
        free(msgs);
        free(vs);
        json_decref(vars);
        json_decref(rec);
    }
    finish_template(&ts, counts);
    free(base_out);
    json_decref(head);
    free(data);
    printf("golden: %d records; templates: %d identical, %d unsupported, %d WRONG, %d skipped (template text absent)\n",
           records, counts[V_SAME], counts[V_UNSUPPORTED], counts[V_WRONG], counts[V_SKIP]);
}

int main(void) {
    test_expressions();
    test_whitespace();
    test_statements();
    test_filters();
    test_tojson();
    test_tests_and_methods();
    test_errors();
    test_limits();
    test_golden();
    return test_finish();
}
