/* Chat templates (src/text/chat_template.h and the Jinja interpreter under it) against
 * transformers' own rendering (tests/golden/chat_template/renders.json from
 * tools/gen_chat_template_golden.py: transformers 4.57.6's compiled Jinja environment):
 * SmolLM2's template (from its GGUF) and llama.cpp's models/templates/ copies in
 * tests/data/chat_templates/ on each conversation of cases.json, byte for byte, and one-construct
 * snippets; where transformers raised (raise_exception, a type error), the render must fail too.
 * Then the errors that name the construct and its line, and the limits that stop hostile
 * templates (steps, depth, output size). Host only. */
#include "common/test_util.h"
#include "text/chat_template.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

static json_t *cases;   /* cases.json */
static json_t *renders; /* renders.json */

static json_t *load(const char *path)
{
    json_error_t error;
    json_t *j = json_load_file(path, 0, &error);
    if (!j)
        print_error("%s: %s (line %d)\n", path, error.text, error.line);
    return j;
}

static int setup(void **state)
{
    (void)state;
    cases = load(GOLDEN_DIR "/chat_template/cases.json");
    renders = load(GOLDEN_DIR "/chat_template/renders.json");
    return cases && renders ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(cases);
    json_decref(renders);
    return 0;
}

static char *read_template(const char *name, size_t *length)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/../data/chat_templates/%s", GOLDEN_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    text[n] = 0;
    *length = (size_t)n;
    return text;
}

/* The variables of a case object, as the generator passed them */
static struct clattn_chat_vars vars_of(const json_t *c)
{
    struct clattn_chat_vars v = {0};
    v.messages = json_object_get(c, "messages");
    v.tools = json_object_get(c, "tools");
    v.documents = json_object_get(c, "documents");
    v.add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt"));
    v.extra = json_object_get(c, "extra");
    v.bos_token = json_string_value(json_object_get(renders, "bos_token"));
    v.eos_token = json_string_value(json_object_get(renders, "eos_token"));
    v.now = json_integer_value(json_object_get(renders, "now"));
    return v;
}

/* Renders and compares with the entry's output (byte for byte) or its error (a failure);
 * returns whether it matched, printing the first difference when not. */
static bool check_render(const char *label, const char *text, size_t length, const struct clattn_chat_vars *vars,
                         const json_t *entry)
{
    char *out = NULL, error[600];
    size_t out_length = 0;
    int rc = clattn__chat_template_render(text, length, vars, NULL, &out, &out_length, error, sizeof(error));
    const json_t *expected = json_object_get(entry, "output");
    bool ok;
    if (!expected) {
        ok = rc != 0 && out == NULL && error[0];
        if (!ok)
            print_error("%s: transformers raised (%s) but the render succeeded\n", label,
                        json_string_value(json_object_get(entry, "error")));
    } else if (rc != 0) {
        ok = false;
        print_error("%s: %s\n", label, error);
    } else {
        size_t n = json_string_length(expected);
        const char *want = json_string_value(expected);
        ok = n == out_length && memcmp(want, out, n) == 0;
        if (!ok) {
            size_t at = 0;
            while (at < n && at < out_length && want[at] == out[at])
                at++;
            size_t from = at > 30 ? at - 30 : 0;
            print_error("%s: differs at byte %zu of %zu (got %zu): expected \"%.*s\", got \"%.*s\"\n", label, at,
                        n, out_length, (int)((n - from) < 60 ? n - from : 60), want + from,
                        (int)((out_length - from) < 60 ? out_length - from : 60), out + from);
        }
    }
    free(out);
    return ok;
}

/* Every template on every conversation, as transformers renders it */
static void templates_render_as_transformers(void **state)
{
    (void)state;
    size_t index, failures = 0, count = 0, refused = 0;
    json_t *entry;
    json_array_foreach(json_object_get(renders, "renders"), index, entry) {
        const char *name = json_string_value(json_object_get(entry, "template"));
        if (!name)
            continue;
        const char *case_name = json_string_value(json_object_get(entry, "case"));
        const json_t *c = json_object_get(cases, case_name);
        assert_non_null(c);
        size_t length;
        char *text = read_template(name, &length);
        struct clattn_chat_vars vars = vars_of(c);
        char label[512];
        snprintf(label, sizeof(label), "%s on %s", name, case_name);
        failures += !check_render(label, text, length, &vars, entry);
        count++;
        refused += json_object_get(entry, "output") == NULL;
        free(text);
    }
    assert_true(count >= 13 * 5);
    assert_true(refused < count / 4);
    assert_int_equal(failures, 0);
}

/* One construct each: whitespace control, loops, macros, operators, filters, tests, errors */
static void snippets_render_as_transformers(void **state)
{
    (void)state;
    size_t index, failures = 0, count = 0;
    json_t *entry;
    const json_t *snippet_vars = json_object_get(renders, "snippet_vars");
    assert_non_null(snippet_vars);
    struct clattn_chat_vars vars = vars_of(snippet_vars);
    json_array_foreach(json_object_get(renders, "renders"), index, entry) {
        const char *snippet = json_string_value(json_object_get(entry, "snippet"));
        if (!snippet)
            continue;
        char label[256];
        snprintf(label, sizeof(label), "snippet \"%.200s\"", snippet);
        failures += !check_render(label, snippet, strlen(snippet), &vars, entry);
        count++;
    }
    assert_true(count >= 40);
    assert_int_equal(failures, 0);
}

/* Renders a template with one user message; returns the status, the text or the error */
static int render_simple(const char *text, const struct clattn_chat_limits *limits, char **out, char *error,
                         size_t error_size)
{
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    struct clattn_chat_vars vars = {.messages = messages, .add_generation_prompt = true};
    int rc = clattn__chat_template_render(text, strlen(text), &vars, limits, out, NULL, error, error_size);
    json_decref(messages);
    return rc;
}

static void expect_error(const char *text, const char *part1, const char *part2)
{
    char *out = (char *)"not set", error[600];
    int rc = render_simple(text, NULL, &out, error, sizeof(error));
    if (rc == 0 || !strstr(error, part1) || (part2 && !strstr(error, part2)))
        print_error("\"%s\": rc %d, \"%s\"; expected an error with \"%s\"%s%s\n", text, rc, rc ? error : out, part1,
                    part2 ? " and " : "", part2 ? part2 : "");
    assert_int_not_equal(rc, 0);
    assert_null(out);
    assert_non_null(strstr(error, part1));
    if (part2)
        assert_non_null(strstr(error, part2));
}

static void errors_name_the_construct_and_line(void **state)
{
    (void)state;
    expect_error("ok\n{{ 'a' ", "line 2", "unterminated variable");
    expect_error("{% if true %}\n{% for x in y %}", "line 2", "{% for %} is never closed");
    expect_error("{# no end", "line 1", "unterminated comment");
    expect_error("a\nb\n{{ x | no_such_filter }}", "line 3", "filter 'no_such_filter'");
    expect_error("{{ x is no_such_test }}", "line 1", "test 'no_such_test'");
    expect_error("\n{% include 'x' %}", "line 2", "{% include %}");
    expect_error("{% break %}", "line 1", "outside a loop");
    expect_error("{{ 1 + 'a' }}", "line 1", "unsupported operand type(s) for +: 'int' and 'str'");
    expect_error("{{ 'a' in 1 }}", "line 1", "not iterable");
    expect_error("{% for x in 5 %}{% endfor %}", "line 1", "'int' object is not iterable");
    expect_error("{{ nothing.attribute }}", "line 1", "'nothing' is undefined");
    expect_error("{{ nothing() }}", "line 1", "'nothing' is undefined");
    expect_error("{{ messages[0].content.upper(1) }}", "line 1", "str.upper()");
    expect_error("{{ messages | tojson(indent='  ', separators=1) }}", "line 1", "separators");
    expect_error("{{ raise_exception('No system messages, please') }}", "No system messages, please", NULL);
    expect_error("{{ messages.append(1) }}", "unsafe", "append");
    expect_error("{{ 1 // 0 }}", "line 1", "division");
    expect_error("{{ 9223372036854775807 + 1 }}", "line 1", "overflow");
    expect_error("{{ 1 + }}", "line 1", "expected an expression");
    expect_error("{{ (1 }}", "line 1", "unterminated variable");
    /* the interpreter's own bounds on indentation (Jinja has none) */
    expect_error("{{ 'a' | indent(257) }}", "line 1", "indent: width 257 is too large");
    expect_error("{{ [1] | tojson(indent=65) }}", "line 1", "tojson: indent 65 is too large");
}

static void limits_stop_hostile_templates(void **state)
{
    (void)state;
    char *out = NULL, error[600];
    struct clattn_chat_limits small = {.max_steps = 100000, .max_output_bytes = 1 << 16, .max_depth = 50};
    /* a billion iterations */
    assert_int_not_equal(render_simple("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                                       "{% endfor %}{% endfor %}{% endfor %}",
                                       &small, &out, error, sizeof(error)),
                         0);
    assert_non_null(strstr(error, "steps"));
    /* unbounded recursion */
    assert_int_not_equal(render_simple("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &small, &out, error,
                                       sizeof(error)),
                         0);
    assert_non_null(strstr(error, "deeper"));
    /* output that doubles */
    assert_int_not_equal(render_simple("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                                       "{% endfor %}{{ ns.s }}",
                                       &small, &out, error, sizeof(error)),
                         0);
    assert_non_null(strstr(error, "bytes"));
    assert_int_not_equal(render_simple("{{ 'x' * 100000000000 }}", &small, &out, error, sizeof(error)), 0);
    assert_int_not_equal(render_simple("{{ range(1000000) | length }}", NULL, &out, error, sizeof(error)), 0);
    assert_non_null(strstr(error, "range"));
    /* deep nesting in the parser */
    char deep[4096] = "{{ ";
    for (int k = 0; k < 1000; k++)
        strcat(deep, "(");
    strcat(deep, "1");
    for (int k = 0; k < 1000; k++)
        strcat(deep, ")");
    strcat(deep, " }}");
    assert_int_not_equal(render_simple(deep, &small, &out, error, sizeof(error)), 0);
    assert_non_null(strstr(error, "deeper"));
    assert_null(out);
}

static void arguments_are_checked(void **state)
{
    (void)state;
    char *out = (char *)"x", error[100];
    struct clattn_chat_vars vars = {0};
    assert_int_not_equal(clattn__chat_template_render("a", 1, &vars, NULL, &out, NULL, error, sizeof(error)), 0);
    assert_null(out);
    assert_non_null(strstr(error, "messages"));
    json_t *messages = json_array(), *extra = json_array();
    vars.messages = messages;
    vars.extra = extra;
    assert_int_not_equal(clattn__chat_template_render("a", 1, &vars, NULL, &out, NULL, error, sizeof(error)), 0);
    assert_non_null(strstr(error, "extra"));
    /* a message longer than the error buffer is cut, terminated */
    vars.extra = NULL;
    char small[8];
    assert_int_not_equal(
        clattn__chat_template_render("{{ raise_exception('a long message') }}", 40, &vars, NULL, &out, NULL, small,
                                     sizeof(small)),
        0);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    /* an empty template renders as nothing; the length comes back */
    size_t length = 99;
    assert_int_equal(clattn__chat_template_render("", 0, &vars, NULL, &out, &length, error, sizeof(error)), 0);
    assert_non_null(out);
    assert_int_equal(length, 0);
    free(out);
    json_decref(messages);
    json_decref(extra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(templates_render_as_transformers),
        cmocka_unit_test(snippets_render_as_transformers),
        cmocka_unit_test(errors_name_the_construct_and_line),
        cmocka_unit_test(limits_stop_hostile_templates),
        cmocka_unit_test(arguments_are_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
