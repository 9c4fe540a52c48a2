/*
 * Tuning overrides from an environment variable (src/runtime/env_tuning.c): good texts set the
 * named fields and nothing else; each kind of bad pair is refused with its message and leaves
 * every field as it was. Host only.
 */
#include "common/test_util.h"

#include "runtime/env_tuning.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fields {
    unsigned a, bb, big;
} fields;

#define KEY_COUNT 3

static void table(fields *f, clattn_env_tuning_key keys[KEY_COUNT])
{
    keys[0] = (clattn_env_tuning_key){"a", &f->a, 1, 8};
    keys[1] = (clattn_env_tuning_key){"bb", &f->bb, 0, 1};
    keys[2] = (clattn_env_tuning_key){"big", &f->big, 0, UINT_MAX};
}

/* Parses `text` into fields that start as {7, 7, 7}. */
static clattn_status parse(const char *text, fields *f, char *error, size_t error_size)
{
    *f = (fields){7, 7, 7};
    clattn_env_tuning_key keys[KEY_COUNT];
    table(f, keys);
    return clattn__env_tuning_parse("TEST_TUNE", text, keys, KEY_COUNT, error, error_size);
}

static void test_good_texts(void **state)
{
    (void)state;
    fields f;
    char error[256] = "";
    assert_int_equal(parse("a=3,bb=1", &f, error, sizeof(error)), CLATTN_OK);
    assert_int_equal(f.a, 3);
    assert_int_equal(f.bb, 1);
    assert_int_equal(f.big, 7);
    /* white space anywhere between the parts, empty pairs, a trailing comma, the range's ends */
    assert_int_equal(parse("  a = 1 ,, bb=0 ,big=4294967295,", &f, error, sizeof(error)),
                     CLATTN_OK);
    assert_int_equal(f.a, 1);
    assert_int_equal(f.bb, 0);
    assert_int_equal(f.big, UINT_MAX);
    /* the last of a key given twice; a leading zero */
    assert_int_equal(parse("a=2,a=08", &f, error, sizeof(error)), CLATTN_OK);
    assert_int_equal(f.a, 8);
    /* nothing at all */
    assert_int_equal(parse("", &f, error, sizeof(error)), CLATTN_OK);
    assert_int_equal(parse(" , ", &f, error, sizeof(error)), CLATTN_OK);
    assert_int_equal(f.a, 7);
    assert_int_equal(f.bb, 7);
    assert_int_equal(f.big, 7);
}

static void expect_error(const char *text, const char *message)
{
    fields f;
    char error[256] = "";
    assert_int_equal(parse(text, &f, error, sizeof(error)), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(error, message);
    /* no field changed, even by the good pairs before the bad one */
    assert_int_equal(f.a, 7);
    assert_int_equal(f.bb, 7);
    assert_int_equal(f.big, 7);
    /* a NULL error buffer is allowed */
    assert_int_equal(parse(text, &f, NULL, 0), CLATTN_ERROR_INVALID_ARGUMENT);
}

static void test_bad_pairs(void **state)
{
    (void)state;
    expect_error("a=2, bb", "TEST_TUNE: \"bb\": not a key=value pair");
    expect_error("a=2,c=1", "TEST_TUNE: \"c=1\": unknown key \"c\" (the keys: a, bb, big)");
    expect_error("A=1", "TEST_TUNE: \"A=1\": unknown key \"A\" (the keys: a, bb, big)");
    expect_error("=1", "TEST_TUNE: \"=1\": unknown key \"\" (the keys: a, bb, big)");
    expect_error("a=", "TEST_TUNE: \"a=\": the value is not a whole number from 0 to 4294967295");
    expect_error("a=x",
                 "TEST_TUNE: \"a=x\": the value is not a whole number from 0 to 4294967295");
    expect_error("a=-1",
                 "TEST_TUNE: \"a=-1\": the value is not a whole number from 0 to 4294967295");
    expect_error("a=+1",
                 "TEST_TUNE: \"a=+1\": the value is not a whole number from 0 to 4294967295");
    expect_error("a=1.5",
                 "TEST_TUNE: \"a=1.5\": the value is not a whole number from 0 to 4294967295");
    expect_error("a=1 2",
                 "TEST_TUNE: \"a=1 2\": the value is not a whole number from 0 to 4294967295");
    expect_error("big=4294967296", "TEST_TUNE: \"big=4294967296\": the value is not a whole "
                                   "number from 0 to 4294967295");
    expect_error("a=0", "TEST_TUNE: \"a=0\": a is out of its range 1..8");
    expect_error("bb=0,a=9", "TEST_TUNE: \"a=9\": a is out of its range 1..8");
    expect_error("bb=2", "TEST_TUNE: \"bb=2\": bb is out of its range 0..1");
    /* a long pair is quoted up to 64 bytes */
    char text[200], want[256];
    memset(text, 'z', 100);
    strcpy(text + 100, "=1");
    snprintf(want, sizeof(want), "TEST_TUNE: \"%.64s...\": unknown key \"%.100s\" (the keys: a, "
             "bb, big)", text, text);
    expect_error(text, want);
}

static void test_short_error_buffer(void **state)
{
    (void)state;
    fields f;
    char error[12];
    memset(error, 'x', sizeof(error));
    assert_int_equal(parse("c=1", &f, error, sizeof(error)), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(error, "TEST_TUNE: ");
}

static void test_environment(void **state)
{
    (void)state;
    fields f = {7, 7, 7};
    clattn_env_tuning_key keys[KEY_COUNT];
    table(&f, keys);
    char error[256] = "";
    unsetenv("CLATTN_TEST_ENV_TUNING");
    assert_int_equal(clattn__env_tuning_read("CLATTN_TEST_ENV_TUNING", keys, KEY_COUNT, error,
                                             sizeof(error)),
                     CLATTN_OK);
    assert_int_equal(f.a, 7);
    setenv("CLATTN_TEST_ENV_TUNING", "a=5", 1);
    assert_int_equal(clattn__env_tuning_read("CLATTN_TEST_ENV_TUNING", keys, KEY_COUNT, error,
                                             sizeof(error)),
                     CLATTN_OK);
    assert_int_equal(f.a, 5);
    setenv("CLATTN_TEST_ENV_TUNING", "a=5,q=1", 1);
    assert_int_equal(clattn__env_tuning_read("CLATTN_TEST_ENV_TUNING", keys, KEY_COUNT, error,
                                             sizeof(error)),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(error,
                        "CLATTN_TEST_ENV_TUNING: \"q=1\": unknown key \"q\" (the keys: a, bb, big)");
    unsetenv("CLATTN_TEST_ENV_TUNING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_texts),
        cmocka_unit_test(test_bad_pairs),
        cmocka_unit_test(test_short_error_buffer),
        cmocka_unit_test(test_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
