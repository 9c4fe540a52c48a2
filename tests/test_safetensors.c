/* safetensors reading and writing: the reference's byte layout, torch-made fixtures, round trips,
 * malformed and hostile input. */
#include "common/test_util.h"
#include "clattn/safetensors.h"
#include "formats/safetensors_internal.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ST_FIXTURE_DIR
#error "ST_FIXTURE_DIR must name tests/data/safetensors (meson passes it with c_args)"
#endif

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- files and helpers ---- */

static char temp_dir[1024];

static int make_temp_dir(void **state)
{
    (void)state;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_st_");
}

static int remove_temp_dir(void **state)
{
    (void)state;
    return rmdir(temp_dir);
}

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", ST_FIXTURE_DIR, name);
    return path;
}

static const char *temp_file(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", temp_dir, name);
    return path;
}


static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A safetensors image: the length of `header` (exactly, no padding), the header, then data. */
static unsigned char *make_st(const char *header, const void *data, size_t data_len,
                              size_t *size)
{
    size_t header_len = strlen(header);
    *size = 8 + header_len + data_len;
    unsigned char *buf = malloc(*size);
    assert_non_null(buf);
    put_u64(buf, header_len);
    memcpy(buf + 8, header, header_len);
    if (data_len)
        memcpy(buf + 8 + header_len, data, data_len);
    return buf;
}

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

/* Asserts that n floats have exactly the given bit patterns, naming the first that differs. */
static void assert_bits(const float *got, const uint32_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (bits_of(got[i]) != want[i]) {
            print_error("%s[%zu]: got 0x%08x (%g), want 0x%08x\n", what, i, bits_of(got[i]),
                        (double)got[i], want[i]);
            fail();
        }
}

static void assert_same_floats(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (bits_of(got[i]) != bits_of(want[i])) {
            print_error("%s[%zu]: got 0x%08x (%g), want 0x%08x (%g)\n", what, i,
                        bits_of(got[i]), (double)got[i], bits_of(want[i]), (double)want[i]);
            fail();
        }
}

static const clattn_safetensors_tensor *must_find(const clattn_safetensors *st, const char *name)
{
    const clattn_safetensors_tensor *t = clattn_safetensors_find(st, name);
    if (!t) {
        print_error("no tensor '%s'\n", name);
        fail();
    }
    return t;
}

static void assert_tensor(const clattn_safetensors_tensor *t, const char *name, clattn_safetensors_dtype dtype,
                          int ndim, const size_t *shape, size_t numel)
{
    assert_string_equal(t->name, name);
    assert_int_equal(t->dtype, dtype);
    assert_int_equal(t->ndim, ndim);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(t->shape[d], shape[d]);
    for (int d = ndim; d < CLATTN_SAFETENSORS_MAX_DIMS; d++)
        assert_int_equal(t->shape[d], 0);
    assert_int_equal(t->numel, numel);
    assert_non_null(t->data);
}

/* Parses bytes expecting success; fails the test with the library's message otherwise. */
static clattn_safetensors *parse_ok(const unsigned char *bytes, size_t size, const char *what)
{
    clattn_safetensors *st = NULL;
    clattn_status status = clattn_safetensors_parse(&st, bytes, size);
    if (status != CLATTN_OK) {
        print_error("%s: %s: %s\n", what, clattn_status_name(status), clattn_last_error(NULL));
        fail();
    }
    assert_non_null(st);
    return st;
}

/* ---- writing ---- */

/* The reference implementation's own serialization tests (safetensors/src/tensor.rs:
 * test_serialization, test_serialization_forced_alignement, test_empty), byte for byte. */
static void writes_what_the_reference_writes(void **state)
{
    (void)state;
    static const unsigned char attn_dot_0[] = {
        64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116,
        121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91,
        49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115,
        34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0,
        64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    static const unsigned char attn0[] = {
        72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116, 121,
        112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49,
        44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116,
        115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32, 32, 32, 0, 0, 0, 0,
        0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32,
                                          32};
    static const unsigned char framework[] = {
        40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95, 95,
        34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112, 116, 34,
        125, 125, 32, 32, 32, 32, 32};
    float values[6] = {0, 1, 2, 3, 4, 5};
    clattn_safetensors_tensor t = {.name = "attn.0", .ndim = 3, .shape = {1, 2, 3}, .data = values};
    clattn_safetensors_metadata_entry meta = {"framework", "pt"};
    const struct {
        const char *name;
        const unsigned char *bytes;
        size_t size;
        size_t tensors, metadata;
        int ndim;
        size_t shape[4];
    } cases[] = {
        {"attn.0", attn_dot_0, sizeof(attn_dot_0), 1, 0, 3, {1, 2, 3}},
        {"attn0", attn0, sizeof(attn0), 1, 0, 4, {1, 1, 2, 3}},
        {"empty", empty, sizeof(empty), 0, 0, 0, {0}},
        {"framework", framework, sizeof(framework), 0, 1, 0, {0}},
    };
    for (size_t c = 0; c < COUNT(cases); c++) {
        t.name = (char *)cases[c].name;
        t.ndim = cases[c].ndim;
        memcpy(t.shape, cases[c].shape, sizeof(cases[c].shape));
        const char *path = temp_file("reference.safetensors");
        const clattn_safetensors_tensor *tensors = cases[c].tensors ? &t : NULL;
        const clattn_safetensors_metadata_entry *metadata = cases[c].metadata ? &meta : NULL;
        assert_int_equal(clattn_safetensors_write(path, tensors, cases[c].tensors, metadata,
                                                  cases[c].metadata),
                         CLATTN_OK);
        size_t size;
        unsigned char *ours = test_read_file(path, &size);
        if (size != cases[c].size || memcmp(ours, cases[c].bytes, size) != 0) {
            print_error("%s: our %zu bytes differ from the reference's %zu\n", cases[c].name,
                        size, cases[c].size);
            fail();
        }
        free(ours);
        assert_int_equal(remove(path), 0);
        /* And the reference's bytes read back. */
        clattn_safetensors *st = parse_ok(cases[c].bytes, cases[c].size, cases[c].name);
        assert_int_equal(st->tensor_count, cases[c].tensors);
        assert_int_equal(st->metadata_count, cases[c].metadata);
        if (cases[c].tensors) {
            assert_tensor(&st->tensors[0], cases[c].name, CLATTN_SAFETENSORS_F32, cases[c].ndim,
                          cases[c].shape, 6);
            assert_same_floats(st->tensors[0].data, values, 6, cases[c].name);
        } else {
            assert_null(st->tensors);
        }
        if (cases[c].metadata)
            assert_string_equal(clattn_safetensors_metadata(st, "framework"), "pt");
        else
            assert_null(st->metadata);
        clattn_safetensors_destroy(&st);
        assert_null(st);
    }
}

/* tools/gen_safetensors_fixtures.py lays f32_torch.safetensors out like the reference writer;
 * given the same tensors in the same (reference) order, ours is identical. */
static void writes_what_the_fixture_script_writes(void **state)
{
    (void)state;
    float weight[6] = {0.0f, -1.5f, 3.25f, 1e-40f, INFINITY, -0.0f};
    float bias[4] = {0.1f, -2.0f, 1e30f, 7.0f};
    float scalar = 2.5f;
    const clattn_safetensors_tensor tensors[] = {
        {.name = "bias", .ndim = 1, .shape = {4}, .data = bias},
        {.name = "empty", .ndim = 2, .shape = {0, 4}, .data = NULL},
        {.name = "scalar", .ndim = 0, .data = &scalar},
        {.name = "weight", .ndim = 2, .shape = {2, 3}, .data = weight},
    };
    const clattn_safetensors_metadata_entry metadata[] = {{"format", "pt"},
                                           {"source", "gen_safetensors_fixtures.py"}};
    const char *path = temp_file("f32.safetensors");
    assert_int_equal(clattn_safetensors_write(path, tensors, COUNT(tensors), metadata,
                                              COUNT(metadata)),
                     CLATTN_OK);
    size_t ours_len, theirs_len;
    unsigned char *ours = test_read_file(path, &ours_len);
    unsigned char *theirs = test_read_file(fixture("f32_torch.safetensors"), &theirs_len);
    assert_int_equal(ours_len, theirs_len);
    assert_memory_equal(ours, theirs, ours_len);
    free(ours);
    free(theirs);
    assert_int_equal(remove(path), 0);
}

static void round_trips_are_bit_exact(void **state)
{
    (void)state;
    const struct {
        const char *name;
        int ndim;
        size_t shape[CLATTN_SAFETENSORS_MAX_DIMS];
        size_t numel;
    } cases[] = {
        /* Not in name order: the file keeps the given order. */
        {"zeta", 0, {0}, 1},
        {"alpha", 1, {7}, 7},
        {"layers.0.attn.q_proj.weight", 2, {3, 5}, 15},
        {"empty", 3, {4, 0, 2}, 0},
        {"x", 4, {2, 3, 1, 4}, 24},
        {"eight", 8, {1, 2, 1, 2, 1, 2, 1, 3}, 24},
        {"a \"quoted\" \\ name\n\xc3\xa9\xe2\x82\xac", 1, {1}, 1}, /* escapes and UTF-8 */
        {"big", 1, {5000}, 5000}, /* more than one write chunk */
        {"empty_1d", 1, {0}, 0},
    };
    const size_t n_tensors = COUNT(cases);
    clattn_safetensors_tensor tensors[COUNT(cases)];
    memset(tensors, 0, sizeof(tensors));
    for (size_t c = 0; c < n_tensors; c++) {
        size_t n = cases[c].numel;
        tensors[c].name = (char *)cases[c].name;
        tensors[c].dtype = CLATTN_SAFETENSORS_BF16; /* ignored: the writer writes F32 */
        tensors[c].ndim = cases[c].ndim;
        memcpy(tensors[c].shape, cases[c].shape, sizeof(tensors[c].shape));
        tensors[c].numel = 12345; /* ignored too */
        tensors[c].data = n ? malloc(n * sizeof(float)) : NULL;
        if (n) {
            assert_non_null(tensors[c].data);
            test_fill_uniform(tensors[c].data, n, 300 + c, -1e6f, 1e6f);
        }
        if (n > 3) {
            uint32_t nan_bits = 0x7fc01234u;
            memcpy(&tensors[c].data[0], &nan_bits, sizeof(float));
            tensors[c].data[1] = -INFINITY;
            tensors[c].data[2] = -0.0f;
            tensors[c].data[3] = 1e-42f;
        }
    }
    const clattn_safetensors_metadata_entry metadata[] = {
        {"format", "pt"},
        {"note", "caf\xc3\xa9 \"quoted\"\n\ttabbed \\ back"},
        {"empty", ""},
    };
    const char *path = temp_file("round_trip.safetensors");
    assert_int_equal(clattn_safetensors_write(path, tensors, n_tensors, metadata,
                                              COUNT(metadata)),
                     CLATTN_OK);

    clattn_safetensors *st = (clattn_safetensors *)&st; /* must be overwritten */
    assert_int_equal(clattn_safetensors_read(&st, path), CLATTN_OK);
    assert_int_equal(st->tensor_count, n_tensors);
    for (size_t c = 0; c < n_tensors; c++) {
        const clattn_safetensors_tensor *t = &st->tensors[c];
        assert_tensor(t, cases[c].name, CLATTN_SAFETENSORS_F32, cases[c].ndim, cases[c].shape,
                      cases[c].numel);
        assert_same_floats(t->data, tensors[c].data, cases[c].numel, cases[c].name);
        assert_ptr_equal(clattn_safetensors_find(st, cases[c].name), t);
    }
    assert_null(clattn_safetensors_find(st, "missing"));
    assert_null(clattn_safetensors_find(st, "Alpha"));
    assert_int_equal(st->metadata_count, COUNT(metadata));
    for (size_t m = 0; m < COUNT(metadata); m++) {
        assert_string_equal(st->metadata[m].key, metadata[m].key);
        assert_string_equal(st->metadata[m].value, metadata[m].value);
        assert_string_equal(clattn_safetensors_metadata(st, metadata[m].key), metadata[m].value);
    }
    assert_null(clattn_safetensors_metadata(st, "missing"));
    clattn_safetensors_destroy(&st);
    assert_null(st);

    /* The header is padded with spaces to a multiple of 8 and the data follows it directly. */
    size_t size;
    unsigned char *bytes = test_read_file(path, &size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | bytes[i];
    assert_int_equal(header_len % 8, 0);
    size_t data_bytes = 0;
    for (size_t c = 0; c < n_tensors; c++)
        data_bytes += cases[c].numel * sizeof(float);
    assert_int_equal(size, 8 + header_len + data_bytes);
    assert_int_equal(bytes[8], '{');
    st = parse_ok(bytes, size, "round trip from memory");
    assert_int_equal(st->tensor_count, n_tensors);
    assert_same_floats(st->tensors[1].data, tensors[1].data, 7, "alpha");
    clattn_safetensors_destroy(&st);
    free(bytes);

    for (size_t c = 0; c < n_tensors; c++)
        free(tensors[c].data);
    assert_int_equal(remove(path), 0);
}

static void write_failures_are_named_and_leave_no_file(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6};
    clattn_safetensors_tensor t = {.name = "x", .ndim = 1, .shape = {2}, .data = x};
    const char *path = temp_file("bad.safetensors");
    char missing_dir[1100];
    snprintf(missing_dir, sizeof(missing_dir), "%s/no/such/dir/x.safetensors", temp_dir);
    assert_status_msg(NULL, clattn_safetensors_write(missing_dir, &t, 1, NULL, 0),
                      CLATTN_ERROR_IO, "No such file or directory");
    assert_non_null(strstr(clattn_last_error(NULL), missing_dir));
    assert_status_msg(NULL, clattn_safetensors_write(temp_dir, &t, 1, NULL, 0), CLATTN_ERROR_IO,
                      "clattn_safetensors_write: ");
    assert_non_null(strstr(clattn_last_error(NULL), "cannot create"));
    struct stat st;
    assert_int_equal(stat(temp_dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));

    const struct {
        clattn_safetensors_tensor tensor;
        clattn_status status;
        const char *needle;
    } bad[] = {
        {{.name = NULL, .ndim = 1, .shape = {2}, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT,
         "tensors[1].name is NULL"},
        {{.name = "", .ndim = 1, .shape = {2}, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT,
         "tensors[1].name is empty"},
        {{.name = "__metadata__", .ndim = 1, .shape = {2}, .data = x},
         CLATTN_ERROR_INVALID_ARGUMENT, "tensors[1].name '__metadata__' is reserved"},
        {{.name = "ok", .ndim = 1, .shape = {2}, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT,
         "tensors[1].name 'ok' repeats an earlier tensor's"},
        {{.name = "nine", .ndim = 9, .shape = {1}, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT,
         "tensors[1] ('nine') has ndim 9; it must be 0 to 8"},
        {{.name = "neg", .ndim = -1, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT, "has ndim -1"},
        {{.name = "nodata", .ndim = 2, .shape = {2, 3}, .data = NULL},
         CLATTN_ERROR_INVALID_ARGUMENT, "tensors[1] ('nodata') has NULL data but 6 elements"},
        {{.name = "nodata0", .ndim = 0, .data = NULL}, CLATTN_ERROR_INVALID_ARGUMENT,
         "has NULL data but 1 elements"},
        {{.name = "bad\xff", .ndim = 1, .shape = {2}, .data = x}, CLATTN_ERROR_INVALID_ARGUMENT,
         "tensors[1].name is not valid UTF-8"},
        {{.name = "huge", .ndim = 3, .shape = {SIZE_MAX / 2, 3, 1}, .data = x},
         CLATTN_ERROR_TOO_LARGE, "tensors[1] ('huge'): the byte size of the shape overflows"},
        {{.name = "wide", .ndim = 2, .shape = {0, SIZE_MAX}, .data = NULL},
         CLATTN_ERROR_TOO_LARGE, "do not fit in a JSON integer"},
    };
    for (size_t c = 0; c < COUNT(bad); c++) {
        clattn_safetensors_tensor pair[2] = {{.name = "ok", .ndim = 1, .shape = {2}, .data = x},
                                    bad[c].tensor};
        clattn_status status = clattn_safetensors_write(path, pair, 2, NULL, 0);
        if (status != bad[c].status || !strstr(clattn_last_error(NULL), bad[c].needle) ||
            !strstr(clattn_last_error(NULL), "clattn_safetensors_write: ")) {
            print_error("case %zu: got %s \"%s\", expected %s mentioning \"%s\"\n", c,
                        clattn_status_name(status), clattn_last_error(NULL),
                        clattn_status_name(bad[c].status), bad[c].needle);
            fail();
        }
        assert_int_not_equal(access(path, F_OK), 0);
    }
    /* Each tensor fits, but the second one's end offset does not fit in a JSON integer. */
    clattn_safetensors_tensor two_huge[2] = {{.name = "a", .ndim = 1, .shape = {SIZE_MAX / 12}, .data = x},
                                    {.name = "b", .ndim = 1, .shape = {SIZE_MAX / 12}, .data = x}};
    assert_status_msg(NULL, clattn_safetensors_write(path, two_huge, 2, NULL, 0),
                      CLATTN_ERROR_TOO_LARGE, "tensors[1] ('b')");

    const struct {
        clattn_safetensors_metadata_entry entry;
        const char *needle;
    } bad_meta[] = {
        {{NULL, "v"}, "metadata[1].key is NULL"},
        {{"", "v"}, "metadata[1].key is empty"},
        {{"k", NULL}, "metadata[1] ('k') has a NULL value"},
        {{"format", "other"}, "metadata[1].key 'format' repeats an earlier key"},
        {{"k", "bad\xc3"}, "metadata[1] ('k') value is not valid UTF-8"},
        {{"bad\xe2\x82", "v"}, "metadata[1].key is not valid UTF-8"},
    };
    for (size_t c = 0; c < COUNT(bad_meta); c++) {
        clattn_safetensors_metadata_entry pair[2] = {{"format", "pt"}, bad_meta[c].entry};
        assert_status_msg(NULL, clattn_safetensors_write(path, &t, 1, pair, 2),
                          CLATTN_ERROR_INVALID_ARGUMENT, bad_meta[c].needle);
        assert_int_not_equal(access(path, F_OK), 0);
    }
}

/* ---- reading torch's tensors ---- */

static void reads_f32_fixture(void **state)
{
    (void)state;
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, fixture("f32_torch.safetensors")), CLATTN_OK);
    /* Data order: the reference wrote them sorted by name. */
    assert_int_equal(st->tensor_count, 4);
    const char *order[] = {"bias", "empty", "scalar", "weight"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(st->tensors[i].name, order[i]);

    const clattn_safetensors_tensor *t = must_find(st, "weight");
    assert_tensor(t, "weight", CLATTN_SAFETENSORS_F32, 2, (size_t[]){2, 3}, 6);
    const float weight[6] = {0.0f, -1.5f, 3.25f, 1e-40f, INFINITY, -0.0f};
    assert_same_floats(t->data, weight, 6, "weight");
    t = must_find(st, "bias");
    assert_tensor(t, "bias", CLATTN_SAFETENSORS_F32, 1, (size_t[]){4}, 4);
    const float bias[4] = {0.1f, -2.0f, 1e30f, 7.0f};
    assert_same_floats(t->data, bias, 4, "bias");
    t = must_find(st, "scalar");
    assert_tensor(t, "scalar", CLATTN_SAFETENSORS_F32, 0, NULL, 1);
    assert_true(t->data[0] == 2.5f);
    t = must_find(st, "empty");
    assert_tensor(t, "empty", CLATTN_SAFETENSORS_F32, 2, (size_t[]){0, 4}, 0);

    assert_int_equal(st->metadata_count, 2);
    assert_string_equal(clattn_safetensors_metadata(st, "format"), "pt");
    assert_string_equal(clattn_safetensors_metadata(st, "source"), "gen_safetensors_fixtures.py");
    clattn_safetensors_destroy(&st);
}

/* binary16 specials as numpy's float16 -> float32 converts them (the fixture's first twelve). */
static const uint32_t f16_special_bits[12] = {
    0x00000000, 0x80000000, 0x33800000, 0x387fc000, 0x38800000, 0x3f800000,
    0xc0000000, 0x477fe000, 0x7f800000, 0xff800000, 0x3eaaa000, 0x7fc00000,
};

static void reads_f16_fixture(void **state)
{
    (void)state;
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, fixture("f16_torch.safetensors")), CLATTN_OK);
    assert_int_equal(st->tensor_count, 3);
    assert_int_equal(st->metadata_count, 0);
    assert_null(st->metadata);
    const clattn_safetensors_tensor *half = must_find(st, "half");
    const clattn_safetensors_tensor *twin = must_find(st, "half_as_f32");
    assert_tensor(half, "half", CLATTN_SAFETENSORS_F16, 2, (size_t[]){4, 4}, 16);
    assert_tensor(twin, "half_as_f32", CLATTN_SAFETENSORS_F32, 2, (size_t[]){4, 4}, 16);
    assert_bits(half->data, f16_special_bits, 12, "half");
    assert_same_floats(half->data, twin->data, 16, "half vs torch's .float()");
    assert_true(half->data[2] == 0x1p-24f);   /* smallest subnormal */
    assert_true(half->data[3] == 0x1.ff8p-15f); /* largest subnormal */
    assert_true(half->data[7] == 65504.0f);
    assert_tensor(must_find(st, "empty"), "empty", CLATTN_SAFETENSORS_F16, 2, (size_t[]){0, 3}, 0);
    clattn_safetensors_destroy(&st);
}

static void reads_bf16_fixture(void **state)
{
    (void)state;
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, fixture("bf16_torch.safetensors")), CLATTN_OK);
    assert_int_equal(st->tensor_count, 4);
    const clattn_safetensors_tensor *bf16 = must_find(st, "bf16");
    const clattn_safetensors_tensor *twin = must_find(st, "bf16_as_f32");
    assert_tensor(bf16, "bf16", CLATTN_SAFETENSORS_BF16, 2, (size_t[]){3, 4}, 12);
    const uint32_t specials[6] = {0x3f800000, 0xc0a00000, 0x00010000,
                                  0x7f800000, 0xff7f0000, 0x7fc00000};
    assert_bits(bf16->data, specials, 6, "bf16");
    assert_same_floats(bf16->data, twin->data, 12, "bf16 vs torch's .float()");
    const clattn_safetensors_tensor *scalar = must_find(st, "scalar");
    assert_tensor(scalar, "scalar", CLATTN_SAFETENSORS_BF16, 0, NULL, 1);
    assert_true(scalar->data[0] == -0.333984375f);
    assert_same_floats(scalar->data, must_find(st, "scalar_as_f32")->data, 1, "scalar");
    clattn_safetensors_destroy(&st);
}

/* Every binary16 and bfloat16 bit pattern against the value computed arithmetically. */
static void converts_every_16_bit_pattern(void **state)
{
    (void)state;
    unsigned char *data = malloc(2 * 65536);
    assert_non_null(data);
    for (uint32_t i = 0; i < 65536; i++) {
        data[2 * i] = (unsigned char)(i & 0xff);
        data[2 * i + 1] = (unsigned char)(i >> 8);
    }
    const char *headers[2] = {
        "{\"f16\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}",
        "{\"bf16\":{\"dtype\":\"BF16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}",
    };
    for (int k = 0; k < 2; k++) {
        size_t size;
        unsigned char *bytes = make_st(headers[k], data, 2 * 65536, &size);
        clattn_safetensors *st = parse_ok(bytes, size, headers[k]);
        const float *got = st->tensors[0].data;
        /* binary16: 5 exponent bits (bias 15), 10 mantissa bits; bfloat16: 8 (bias 127), 7. */
        int mant_bits = k == 0 ? 10 : 7, exp_max = k == 0 ? 31 : 255, bias = k == 0 ? 15 : 127;
        for (uint32_t i = 0; i < 65536; i++) {
            int sign = (int)(i >> 15), e = (int)(i >> mant_bits) & exp_max;
            uint32_t m = i & ((1u << mant_bits) - 1);
            double want;
            if (e == exp_max)
                want = m ? NAN : INFINITY;
            else if (e == 0)
                want = ldexp((double)m, 1 - bias - mant_bits);
            else
                want = ldexp((double)(m | 1u << mant_bits), e - bias - mant_bits);
            want = sign ? -want : want;
            bool same_sign = (signbit(got[i]) != 0) == (sign != 0);
            bool same = same_sign && (isnan(want) ? isnan(got[i]) : (double)got[i] == want);
            if (!same) {
                print_error("%s 0x%04x: got %a, want %a\n", k == 0 ? "F16" : "BF16", i,
                            (double)got[i], want);
                fail();
            }
        }
        clattn_safetensors_destroy(&st);
        free(bytes);
    }
    free(data);
}

/* ---- headers built by hand ---- */

static void accepts_header_variations(void **state)
{
    (void)state;
    const float two[2] = {1.25f, -8.0f};
    const char *headers[] = {
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", /* no padding */
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}      ",
        " \t\r\n{ \"x\" : { \"data_offsets\" : [ 0 , 8 ] , \"shape\" : [ 2 ] , \"dtype\" : "
        "\"F32\" } }\n",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":[1,{}]}}",
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,2,1],\"data_offsets\":[0,8]},\"__metadata__\":{}}",
        "{\"__metadata__\":{\"a\":\"b\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]}}",
        /* Data after the last tensor is ignored. */
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"y\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[8,8]}}",
    };
    unsigned char data[12];
    memcpy(data, two, sizeof(two));
    memset(data + 8, 0xee, 4);
    for (size_t h = 0; h < COUNT(headers); h++) {
        for (size_t extra = 0; extra <= 4; extra += 4) {
            size_t size;
            unsigned char *bytes = make_st(headers[h], data, 8 + extra, &size);
            clattn_safetensors *st = parse_ok(bytes, size, headers[h]);
            const clattn_safetensors_tensor *x = must_find(st, "x");
            assert_int_equal(x->numel, 2);
            assert_same_floats(x->data, two, 2, "x");
            clattn_safetensors_destroy(&st);
            free(bytes);
        }
    }

    /* JSON order is not data order; tensors come back sorted by data_offsets, empty ones with
     * equal offsets in JSON order. Gaps are accepted. */
    const char *shuffled =
        "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"e2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
        "\"e1\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"gap\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[14,16]},"
        "\"e3\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}";
    const float abc[4] = {1.0f, 2.0f, 3.0f, 0.0f};
    unsigned char payload[16];
    memcpy(payload, abc, sizeof(abc));
    payload[14] = 0x80; /* bfloat16 0x3f80 = 1.0 at bytes 14..15 */
    payload[15] = 0x3f;
    size_t size;
    unsigned char *bytes = make_st(shuffled, payload, sizeof(payload), &size);
    clattn_safetensors *st = parse_ok(bytes, size, "shuffled");
    const char *order[] = {"a", "e2", "e1", "e3", "b", "c", "gap"};
    assert_int_equal(st->tensor_count, COUNT(order));
    for (size_t i = 0; i < COUNT(order); i++)
        assert_string_equal(st->tensors[i].name, order[i]);
    assert_true(must_find(st, "a")->data[0] == 1.0f);
    assert_true(must_find(st, "b")->data[0] == 2.0f);
    assert_true(must_find(st, "c")->data[0] == 3.0f);
    assert_true(must_find(st, "gap")->data[0] == 1.0f);
    clattn_safetensors_destroy(&st);
    free(bytes);

    /* Overlapping tensors are refused: a hostile file could otherwise name the same bytes from
     * many tensors and make the reader convert far more than the file holds. */
    bytes = make_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[2,10]}}",
                    payload, sizeof(payload), &size);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "tensors \"a\" [0, 4) and \"b\" [2, 10) overlap");
    assert_null(st);
    free(bytes);

    /* A zero-size tensor between two overlapping ones does not hide the overlap: each tensor is
     * checked against every earlier one, not only its neighbour in data order. */
    bytes = make_st("{\"A\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"Z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                    "\"B\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                    payload, sizeof(payload), &size);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "tensors \"A\" [0, 8) and \"B\" [4, 8) overlap");
    assert_null(st);
    free(bytes);
    /* A zero-size tensor inside another shares no byte with it: accepted. */
    bytes = make_st("{\"A\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"Z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                    payload, sizeof(payload), &size);
    st = parse_ok(bytes, size, "zero-size inside");
    assert_int_equal(st->tensor_count, 2);
    clattn_safetensors_destroy(&st);
    free(bytes);

    /* An empty file of tensors: "{}" with the reference's padding, and with none at all. */
    bytes = make_st("{}      ", NULL, 0, &size);
    st = parse_ok(bytes, size, "{}");
    assert_int_equal(st->tensor_count, 0);
    assert_null(st->tensors);
    assert_int_equal(st->metadata_count, 0);
    assert_null(clattn_safetensors_find(st, "x"));
    clattn_safetensors_destroy(&st);
    free(bytes);

    /* UTF-8 and escapes in names and metadata. */
    bytes = make_st("{\"\\u00e9t\\u00e9 \\\"q\\\"\":{\"dtype\":\"F32\",\"shape\":[],"
                    "\"data_offsets\":[0,4]},\"__metadata__\":{\"k\\n\":\"v\\u20ac\"}}",
                    abc, 4, &size);
    st = parse_ok(bytes, size, "escapes");
    assert_non_null(clattn_safetensors_find(st, "\xc3\xa9t\xc3\xa9 \"q\""));
    assert_string_equal(clattn_safetensors_metadata(st, "k\n"), "v\xe2\x82\xac");
    clattn_safetensors_destroy(&st);
    free(bytes);
}

static void rejects_malformed_headers(void **state)
{
    (void)state;
#define ENTRY(dtype, shape, offsets)                                                           \
    "{\"x\":{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offsets "}}"
    const struct {
        const char *header;
        clattn_status status;
        const char *needle;
    } cases[] = {
        {"", CLATTN_ERROR_FORMAT, "invalid JSON header: '[' or '{' expected near end of file"},
        {"{", CLATTN_ERROR_FORMAT, "(line 1, column 1, byte 9 of the file)"},
        {"{\"x\":1,\n\"y\" 2}", CLATTN_ERROR_FORMAT, "line 2"},
        {"[1, 2]", CLATTN_ERROR_FORMAT, "the JSON header is an array, not an object"},
        {"{} x", CLATTN_ERROR_FORMAT, "end of file expected"},
        {"{\"x\":1}", CLATTN_ERROR_FORMAT, "tensor 'x': the entry is an integer, not an object"},
        {"{\"x\":[]}", CLATTN_ERROR_FORMAT, "tensor 'x': the entry is an array"},
        {"{\"x\":{\"shape\":[2],\"data_offsets\":[0,8]}}", CLATTN_ERROR_FORMAT,
         "tensor 'x': the entry has no \"dtype\""},
        {"{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", CLATTN_ERROR_FORMAT,
         "the entry has no \"shape\""},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", CLATTN_ERROR_FORMAT,
         "the entry has no \"data_offsets\""},
        {ENTRY("32", "[2]", "[0,8]"), CLATTN_ERROR_FORMAT, "\"dtype\" is an integer, not a string"},
        {ENTRY("\"F32\"", "\"2\"", "[0,8]"), CLATTN_ERROR_FORMAT,
         "\"shape\" is a string, not an array"},
        {ENTRY("\"F32\"", "[2]", "{}"), CLATTN_ERROR_FORMAT,
         "\"data_offsets\" is an object, not an array"},
        {ENTRY("\"F32\"", "null", "[0,8]"), CLATTN_ERROR_FORMAT, "\"shape\" is null"},
        {ENTRY("\"F32\"", "[-2]", "[0,8]"), CLATTN_ERROR_FORMAT,
         "tensor 'x': shape[0] is -2; dimensions must not be negative"},
        {ENTRY("\"F32\"", "[1,2.0]", "[0,8]"), CLATTN_ERROR_FORMAT,
         "shape[1] is a real number, not an integer"},
        {ENTRY("\"F32\"", "[true]", "[0,8]"), CLATTN_ERROR_FORMAT, "shape[0] is a boolean"},
        {ENTRY("\"F32\"", "[\"2\"]", "[0,8]"), CLATTN_ERROR_FORMAT, "shape[0] is a string"},
        {ENTRY("\"F32\"", "[[2]]", "[0,8]"), CLATTN_ERROR_FORMAT, "shape[0] is an array"},
        {ENTRY("\"F32\"", "[99999999999999999999]", "[0,8]"), CLATTN_ERROR_FORMAT,
         "too big integer"},
        {ENTRY("\"F32\"", "[2]", "[0]"), CLATTN_ERROR_FORMAT,
         "tensor 'x': \"data_offsets\" must be two non-negative integers [begin, end]"},
        {ENTRY("\"F32\"", "[2]", "[0,4,8]"), CLATTN_ERROR_FORMAT, "two non-negative integers"},
        {ENTRY("\"F32\"", "[2]", "[-8,0]"), CLATTN_ERROR_FORMAT, "two non-negative integers"},
        {ENTRY("\"F32\"", "[2]", "[0.0,8]"), CLATTN_ERROR_FORMAT, "two non-negative integers"},
        {ENTRY("\"F32\"", "[2]", "[0,\"8\"]"), CLATTN_ERROR_FORMAT, "two non-negative integers"},
        {ENTRY("\"F32\"", "[0]", "[8,0]"), CLATTN_ERROR_FORMAT,
         "tensor 'x': data_offsets [8, 0] begin after they end"},
        {ENTRY("\"F32\"", "[2]", "[0,4]"), CLATTN_ERROR_FORMAT,
         "tensor 'x': shape [2] of F32 needs 8 bytes but data_offsets [0, 4] span 4"},
        {ENTRY("\"F16\"", "[2,2]", "[0,4]"), CLATTN_ERROR_FORMAT,
         "shape [2, 2] of F16 needs 8 bytes but data_offsets [0, 4] span 4"},
        {ENTRY("\"BF16\"", "[]", "[0,4]"), CLATTN_ERROR_FORMAT,
         "shape [] of BF16 needs 2 bytes but data_offsets [0, 4] span 4"},
        {ENTRY("\"F32\"", "[0,5]", "[0,4]"), CLATTN_ERROR_FORMAT, "needs 0 bytes"},
        {ENTRY("\"F32\"", "[4]", "[0,16]"), CLATTN_ERROR_FORMAT,
         "tensor 'x': truncated data: data_offsets [0, 16] run past the end of the 8-byte data "
         "section"},
        {ENTRY("\"F32\"", "[2]", "[4,12]"), CLATTN_ERROR_FORMAT, "truncated data"},
        {ENTRY("\"F32\"", "[0]", "[9,9]"), CLATTN_ERROR_FORMAT, "truncated data"},
        {ENTRY("\"F32\"", "[2]", "[9223372036854775800,9223372036854775807]"),
         CLATTN_ERROR_FORMAT, "needs 8 bytes"},
        {ENTRY("\"F33\"", "[2]", "[0,8]"), CLATTN_ERROR_FORMAT, "tensor 'x': unknown dtype 'F33'"},
        {ENTRY("\"f32\"", "[2]", "[0,8]"), CLATTN_ERROR_FORMAT, "unknown dtype 'f32'"},
        {ENTRY("\"\"", "[2]", "[0,8]"), CLATTN_ERROR_FORMAT, "unknown dtype ''"},
        {ENTRY("\"F64\"", "[1]", "[0,8]"), CLATTN_ERROR_UNSUPPORTED,
         "tensor 'x': dtype F64 is not supported (only F32, F16 and BF16 are)"},
        {ENTRY("\"F32\"", "[1,1,1,1,1,1,1,1,2]", "[0,8]"), CLATTN_ERROR_UNSUPPORTED,
         "tensor 'x': the shape has 9 dimensions; at most 8 are supported"},
        {ENTRY("\"F32\"", "[4294967296,4294967296,2]", "[0,8]"), CLATTN_ERROR_TOO_LARGE,
         "tensor 'x': the element count of shape [4294967296, 4294967296, 2] overflows size_t"},
        {ENTRY("\"F32\"", "[4611686018427387904]", "[0,8]"), CLATTN_ERROR_TOO_LARGE,
         "the byte size of shape [4611686018427387904] of F32 overflows size_t"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         CLATTN_ERROR_FORMAT, "duplicate object key"},
        {"{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         CLATTN_ERROR_FORMAT, "duplicate object key"},
        {"{\"__metadata__\":\"pt\"}", CLATTN_ERROR_FORMAT,
         "\"__metadata__\" is a string, not an object of strings"},
        {"{\"__metadata__\":{\"a\":\"b\",\"k\":1}}", CLATTN_ERROR_FORMAT,
         "\"__metadata__\" entry 'k' is an integer, not a string"},
        {"{\"__metadata__\":{\"k\":{}}}", CLATTN_ERROR_FORMAT, "entry 'k' is an object"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", CLATTN_ERROR_FORMAT, "duplicate"},
        {"{\"a\\u0000b\":{}}", CLATTN_ERROR_FORMAT, "NUL byte"},
        {"{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", CLATTN_ERROR_FORMAT, "invalid JSON header"},
        {"{\"x\xff\":{}}", CLATTN_ERROR_FORMAT, "invalid JSON header"},
        /* Control characters in a name are shown as '?'; long names are cut. */
        {"{\"a\\tb\":1}", CLATTN_ERROR_FORMAT, "tensor 'a?b': the entry"},
        {"{\"0123456789012345678901234567890123456789012345678901234567890123456789\":1}",
         CLATTN_ERROR_FORMAT,
         "tensor '0123456789012345678901234567890123456789012345678901234567890123...'"},
    };
#undef ENTRY
    const float two[2] = {1, 2};
    for (size_t c = 0; c < COUNT(cases); c++) {
        size_t size;
        unsigned char *bytes = make_st(cases[c].header, two, sizeof(two), &size);
        clattn_safetensors *st = (clattn_safetensors *)&st;
        clattn_status status = clattn_safetensors_parse(&st, bytes, size);
        if (status != cases[c].status || !strstr(clattn_last_error(NULL), cases[c].needle) ||
            strncmp(clattn_last_error(NULL), "clattn_safetensors_parse: <memory>: ", 36) != 0) {
            print_error("case %zu: %s: got %s \"%s\", expected %s mentioning \"%s\"\n", c,
                        cases[c].header, clattn_status_name(status), clattn_last_error(NULL),
                        clattn_status_name(cases[c].status), cases[c].needle);
            fail();
        }
        assert_null(st);
        free(bytes);
    }

    /* A NUL byte after the JSON (the reference pads with spaces). */
    size_t size;
    unsigned char *bytes = make_st("{}?", two, sizeof(two), &size);
    bytes[10] = 0;
    clattn_safetensors *st = NULL;
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "invalid JSON header");
    assert_null(st);
    free(bytes);

    /* Nesting deeper than jansson's limit is an error, not a stack overflow. */
    static char deep[5 + 100000];
    memcpy(deep, "{\"x\":", 5);
    memset(deep + 5, '[', 100000);
    deep[5 + 100000 - 1] = '\0';
    bytes = make_st(deep, NULL, 0, &size);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "maximum parsing depth reached");
    assert_null(st);
    free(bytes);

    /* Every dtype safetensors defines but the reader does not convert. */
    const char *unsupported[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16",
                                 "U16", "I32", "U32", "I64", "U64", "F64", "C64", "F4",
                                 "F6_E2M3", "F6_E3M2"};
    for (size_t d = 0; d < COUNT(unsupported); d++) {
        char header[160], needle[96];
        snprintf(header, sizeof(header),
                 "{\"w\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                 unsupported[d]);
        snprintf(needle, sizeof(needle), "tensor 'w': dtype %s is not supported", unsupported[d]);
        bytes = make_st(header, two, sizeof(two), &size);
        assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size),
                          CLATTN_ERROR_UNSUPPORTED, needle);
        assert_null(st);
        free(bytes);
    }
}

static void rejects_bad_header_lengths(void **state)
{
    (void)state;
    clattn_safetensors *st = (clattn_safetensors *)&st;
    assert_status_msg(NULL, clattn_safetensors_parse(&st, NULL, 0), CLATTN_ERROR_FORMAT,
                      "truncated: 0 bytes is shorter than the 8-byte header length");
    assert_null(st);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, "\x02\0\0\0\0\0\0", 7),
                      CLATTN_ERROR_FORMAT, "truncated: 7 bytes");

    size_t size;
    unsigned char *bytes = make_st("{}", NULL, 0, &size);
    /* 2^63, the largest u64, one byte too many: nothing is allocated from them. */
    put_u64(bytes, (uint64_t)1 << 63);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "the header length 9223372036854775808 is larger than the 2 bytes that "
                      "follow the length (the file has 10 bytes)");
    put_u64(bytes, UINT64_MAX);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "header length 18446744073709551615 is larger");
    put_u64(bytes, 3);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "header length 3 is larger than the 2 bytes");
    /* Too short: the JSON is cut. */
    put_u64(bytes, 1);
    assert_status_msg(NULL, clattn_safetensors_parse(&st, bytes, size), CLATTN_ERROR_FORMAT,
                      "invalid JSON header");
    assert_null(st);
    /* Exactly right, from a buffer of exactly that size. */
    put_u64(bytes, 2);
    st = parse_ok(bytes, size, "{}");
    clattn_safetensors_destroy(&st);
    free(bytes);
}

static void read_errors_are_named(void **state)
{
    (void)state;
    clattn_safetensors *st = (clattn_safetensors *)&st;
    assert_status_msg(NULL, clattn_safetensors_read(&st, fixture("missing.safetensors")),
                      CLATTN_ERROR_IO, "No such file or directory");
    assert_non_null(strstr(clattn_last_error(NULL), fixture("missing.safetensors")));
    assert_non_null(strstr(clattn_last_error(NULL), "clattn_safetensors_read: "));
    assert_null(st);
    assert_status_msg(NULL, clattn_safetensors_read(&st, ST_FIXTURE_DIR), CLATTN_ERROR_IO,
                      "not a regular file");
    assert_status_msg(NULL, clattn_safetensors_read(&st, fixture("unsupported_torch.safetensors")),
                      CLATTN_ERROR_UNSUPPORTED,
                      "tensor 'ids': dtype I64 is not supported (only F32, F16 and BF16 are)");
    assert_non_null(strstr(clattn_last_error(NULL), "unsupported_torch.safetensors: "));
    assert_null(st);

    const char *path = temp_file("short.safetensors");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{}", f);
    fclose(f);
    assert_status_msg(NULL, clattn_safetensors_read(&st, path), CLATTN_ERROR_FORMAT,
                      "truncated: 2 bytes");
    assert_non_null(strstr(clattn_last_error(NULL), path));
    assert_null(st);
    assert_int_equal(remove(path), 0);
}

/* read_floats leaves integer tensors out and lists them with their dtype; read lists none. */
static void read_floats_lists_what_it_leaves_out(void **state)
{
    (void)state;
    static const char header[] =
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
        "\"mask\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    unsigned char data[24] = {0};
    size_t size;
    unsigned char *bytes = make_st(header, data, sizeof(data), &size);
    const char *path = temp_file("left_out.safetensors");
    test_write_file(path, bytes, size);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read_floats(&st, path), CLATTN_OK);
    assert_int_equal(st->tensor_count, 1);
    assert_string_equal(st->tensors[0].name, "w");
    assert_int_equal(st->left_out_count, 2); /* in data order */
    assert_string_equal(st->left_out[0].name, "mask");
    assert_string_equal(st->left_out[0].dtype, "I32");
    assert_string_equal(st->left_out[1].name, "ids");
    assert_string_equal(st->left_out[1].dtype, "I64");
    assert_null(clattn_safetensors_find(st, "ids"));
    clattn_safetensors_destroy(&st);
    assert_status_msg(NULL, clattn_safetensors_read(&st, path), CLATTN_ERROR_UNSUPPORTED,
                      "dtype I64 is not supported");
    assert_int_equal(clattn_safetensors_read(&st, fixture("f32_torch.safetensors")), CLATTN_OK);
    assert_int_equal(st->left_out_count, 0);
    assert_null(st->left_out);
    clattn_safetensors_destroy(&st);
    free(bytes);
    assert_int_equal(remove(path), 0);
}

/* clattn__safetensors_read_named (what a cross-encoder reads of its head): only the named
 * tensors, converted; the header is still checked whole. */
static void read_named_reads_only_those(void **state)
{
    (void)state;
    static const char header[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]},"
        "\"ids\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[12,16]},"
        "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}";
    unsigned char data[20] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 60, 0, 66, 0, 0, 0, 0, 0, 0, 64, 64};
    size_t size;
    unsigned char *bytes = make_st(header, data, sizeof(data), &size);
    const char *path = temp_file("named.safetensors");
    test_write_file(path, bytes, size);
    clattn_safetensors *st = NULL;
    const char *names[] = {"c", "b", "ids", "absent"};
    assert_int_equal(clattn__safetensors_read_named("f", &st, path, names, 4), CLATTN_OK);
    assert_int_equal(st->tensor_count, 2); /* b and c, in data order */
    assert_string_equal(st->tensors[0].name, "b");
    assert_true(st->tensors[0].data[0] == 1.0f && st->tensors[0].data[1] == 3.0f);
    assert_string_equal(st->tensors[1].name, "c");
    assert_true(st->tensors[1].data[0] == 3.0f);
    assert_int_equal(st->left_out_count, 1);
    assert_string_equal(st->left_out[0].name, "ids");
    assert_null(clattn_safetensors_find(st, "a"));
    clattn_safetensors_destroy(&st);
    assert_int_equal(clattn__safetensors_read_named("f", &st, path, NULL, 0), CLATTN_OK);
    assert_int_equal(st->tensor_count, 0); /* nothing asked, nothing read */
    clattn_safetensors_destroy(&st);
    free(bytes);
    /* a header error elsewhere in the file still fails the read, named */
    static const char bad[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}";
    bytes = make_st(bad, data, 8, &size);
    test_write_file(path, bytes, size);
    assert_status_msg(NULL, clattn__safetensors_read_named("f", &st, path, names, 1),
                      CLATTN_ERROR_FORMAT, "tensor 'a': shape [3] of F32 needs 12 bytes");
    assert_null(st);
    free(bytes);
    assert_int_equal(remove(path), 0);
}

/* ---- hostile input ---- */

static const char *fixture_names[] = {"f32_torch.safetensors", "f16_torch.safetensors",
                                      "bf16_torch.safetensors",
                                      "unsupported_torch.safetensors"};

/* Every proper prefix of a valid file is an error, read from a buffer of exactly that size. */
static void every_truncation_fails(void **state)
{
    (void)state;
    for (size_t f = 0; f < COUNT(fixture_names); f++) {
        size_t size;
        unsigned char *whole = test_read_file(fixture(fixture_names[f]), &size);
        for (size_t len = 0; len < size; len++) {
            unsigned char *prefix = malloc(len ? len : 1);
            assert_non_null(prefix);
            memcpy(prefix, whole, len);
            clattn_safetensors *st = (clattn_safetensors *)&st;
            clattn_status status = clattn_safetensors_parse(&st, len ? prefix : NULL, len);
            if (status == CLATTN_OK) {
                print_error("%s cut to %zu of %zu bytes was accepted\n", fixture_names[f], len,
                            size);
                fail();
            }
            assert_null(st);
            assert_true(strlen(clattn_last_error(NULL)) > 0);
            free(prefix);
        }
        free(whole);
    }
}

static void check_result(clattn_status status, const clattn_safetensors *st)
{
    if (status != CLATTN_OK) {
        assert_null(st);
        assert_true(strlen(clattn_last_error(NULL)) > 0);
        return;
    }
    assert_non_null(st);
    assert_true(st->tensor_count == 0 || st->tensors);
    for (size_t i = 0; i < st->tensor_count; i++) {
        const clattn_safetensors_tensor *t = &st->tensors[i];
        assert_non_null(t->name);
        assert_non_null(t->data);
        assert_true(t->ndim >= 0 && t->ndim <= CLATTN_SAFETENSORS_MAX_DIMS);
        assert_true(t->dtype == CLATTN_SAFETENSORS_F32 || t->dtype == CLATTN_SAFETENSORS_F16 ||
                    t->dtype == CLATTN_SAFETENSORS_BF16);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d];
        assert_int_equal(t->numel, numel);
        for (int d = t->ndim; d < CLATTN_SAFETENSORS_MAX_DIMS; d++)
            assert_int_equal(t->shape[d], 0);
        if (t->numel > 0) { /* the floats are there (AddressSanitizer checks the reads) */
            volatile float last = t->data[t->numel - 1];
            (void)last;
        }
    }
    for (size_t i = 0; i < st->metadata_count; i++)
        assert_true(st->metadata[i].key && st->metadata[i].value);
}

static uint64_t header_length(const unsigned char *bytes)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | bytes[i];
    return v;
}

/* Replaces bytes [at, at + old_len) of the header with `text`, moving the rest; the header
 * length grows with it when `adjust`. The buffer has room for the growth. */
static size_t splice(unsigned char *bytes, size_t len, size_t at, size_t old_len, const char *text,
                     bool adjust)
{
    size_t n = strlen(text);
    memmove(bytes + at + n, bytes + at + old_len, len - at - old_len);
    memcpy(bytes + at, text, n);
    if (adjust)
        put_u64(bytes, header_length(bytes) + n - old_len);
    return len + n - old_len;
}

/* Finds the text after one of the header's `key` arrays ("shape":[ ... ]), chosen at random:
 * *at is the first byte inside the brackets, the return value the bytes up to ']'. */
static bool find_array(const unsigned char *bytes, size_t len, const char *key, test_rng *rng,
                       size_t *at, size_t *inner)
{
    size_t header_end = 8 + (size_t)header_length(bytes), key_len = strlen(key), found = 0;
    size_t starts[32];
    for (size_t i = 8; i + key_len < header_end && i + key_len < len && found < 32; i++)
        if (memcmp(bytes + i, key, key_len) == 0)
            starts[found++] = i + key_len;
    if (found == 0)
        return false;
    *at = starts[test_rng_next(rng) % found];
    size_t end = *at;
    while (end < len && bytes[end] != ']')
        end++;
    *inner = end - *at;
    return end < len;
}

/* Seeded random damage to valid files must never crash, leak or over-read. */
static void mutated_files_never_crash(void **state)
{
    (void)state;
    static const char *fragments[] = {
        "{", "}", "[", "]", ",", ":", "\"", " ", "null", "-1", "1e9", "0.5", "\\u0000", "\xff",
        "99999999999999999999", "\"dtype\":\"F16\",", "\"shape\":[],", "\"data_offsets\":[0,0],",
        "\"__metadata__\":{},", "\"__metadata__\":{\"a\":1},", "\"y\":{},", "\"F64\"", "[[[[",
    };
    static const char *dims[] = {
        "", "0", "1", "2", "3", "4", "-1", "2.0", "4294967296", "18446744073709551615",
        "9223372036854775807", "1,1,1,1,1,1,1,1,1", "2,2", "0,4", "\"3\"", "3,", "null",
    };
    static const char *offsets[] = {"0,0", "0,4", "4,0", "0", "0,4,8", "-4,4", "0,1000000",
                                    "9223372036854775807,9223372036854775807", "2,6", "1,3"};
    test_rng rng = {4242};
    size_t accepted = 0, iterations = 0;
    for (size_t f = 0; f < COUNT(fixture_names); f++) {
        size_t size;
        unsigned char *whole = test_read_file(fixture(fixture_names[f]), &size);
        size_t header_end = 8 + (size_t)header_length(whole);
        for (int round = 0; round < 600; round++, iterations++) {
            size_t len = size, at, inner;
            unsigned char *bytes = malloc(size + 256);
            assert_non_null(bytes);
            memcpy(bytes, whole, size);
            switch (test_rng_next(&rng) % 7) {
            case 0: /* flip random bytes of the header */
                for (uint64_t k = 1 + test_rng_next(&rng) % 4; k > 0; k--)
                    bytes[8 + test_rng_next(&rng) % (header_end - 8)] ^=
                        (unsigned char)(1 + test_rng_next(&rng) % 255);
                break;
            case 1: /* flip random bytes of the data (when there is any) */
                for (uint64_t k = 1 + test_rng_next(&rng) % 4; k > 0 && size > header_end; k--)
                    bytes[header_end + test_rng_next(&rng) % (size - header_end)] ^=
                        (unsigned char)(1 + test_rng_next(&rng) % 255);
                break;
            case 2: { /* a huge, small or random header length */
                uint64_t v = test_rng_next(&rng);
                switch (test_rng_next(&rng) % 4) {
                case 0: v %= size + 16; break;
                case 1: v = header_end - 8 + (v % 16) - 8; break;
                case 2: v = UINT64_MAX - v % 16; break;
                default: break;
                }
                put_u64(bytes, v);
                break;
            }
            case 3: { /* insert a JSON fragment, with or without fixing the header length */
                const char *text = fragments[test_rng_next(&rng) % COUNT(fragments)];
                at = 8 + test_rng_next(&rng) % (header_end - 8);
                len = splice(bytes, len, at, 0, text, test_rng_next(&rng) & 1);
                break;
            }
            case 4: /* change a shape */
                if (find_array(bytes, len, "\"shape\":[", &rng, &at, &inner))
                    len = splice(bytes, len, at, inner, dims[test_rng_next(&rng) % COUNT(dims)],
                                 true);
                break;
            case 5: /* change data offsets */
                if (find_array(bytes, len, "\"data_offsets\":[", &rng, &at, &inner))
                    len = splice(bytes, len, at, inner,
                                 offsets[test_rng_next(&rng) % COUNT(offsets)], true);
                break;
            default: /* truncate and flip */
                len = test_rng_next(&rng) % size;
                if (len > 0)
                    bytes[test_rng_next(&rng) % len] ^= 0x5a;
                break;
            }
            /* Parse from a buffer of exactly len bytes so that AddressSanitizer sees over-reads. */
            unsigned char *exact = malloc(len ? len : 1);
            assert_non_null(exact);
            memcpy(exact, bytes, len);
            free(bytes);
            clattn_safetensors *st = (clattn_safetensors *)&st;
            clattn_status status = clattn_safetensors_parse(&st, exact, len);
            check_result(status, st);
            accepted += status == CLATTN_OK;
            clattn_safetensors_destroy(&st);
            free(exact);
        }
        free(whole);
    }
    assert_true(iterations >= 2000);
    assert_true(accepted > 0); /* some damage lands in the data and is harmless */
}

/* ---- arguments and small functions ---- */

static void invalid_arguments_are_named(void **state)
{
    (void)state;
    clattn_safetensors *st = (clattn_safetensors *)&st;
    assert_status_msg(NULL, clattn_safetensors_read(&st, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_safetensors_read: invalid argument: path is NULL");
    assert_null(st);
    assert_status_msg(NULL, clattn_safetensors_read(NULL, fixture("f32_torch.safetensors")),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_safetensors_read: invalid argument: out is NULL");
    st = (clattn_safetensors *)&st;
    assert_status_msg(NULL, clattn_safetensors_parse(&st, NULL, 10),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_safetensors_parse: invalid argument: bytes is NULL but size is 10");
    assert_null(st);
    assert_status_msg(NULL, clattn_safetensors_parse(NULL, "12345678", 8),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_safetensors_parse: invalid argument: out is NULL");

    float x[2] = {0};
    clattn_safetensors_tensor t = {.name = "x", .ndim = 1, .shape = {2}, .data = x};
    const char *path = temp_file("args.safetensors");
    assert_status_msg(NULL, clattn_safetensors_write(NULL, &t, 1, NULL, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_safetensors_write: invalid argument: path is NULL");
    assert_status_msg(NULL, clattn_safetensors_write(path, NULL, 1, NULL, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "tensors is NULL but tensor_count is 1");
    assert_status_msg(NULL, clattn_safetensors_write(path, &t, 1, NULL, 2),
                      CLATTN_ERROR_INVALID_ARGUMENT, "metadata is NULL but metadata_count is 2");
    assert_int_not_equal(access(path, F_OK), 0);
    /* No tensors at all is a valid file. */
    assert_int_equal(clattn_safetensors_write(path, NULL, 0, NULL, 0), CLATTN_OK);
    assert_int_equal(clattn_safetensors_read(&st, path), CLATTN_OK);
    assert_int_equal(st->tensor_count, 0);
    clattn_safetensors_destroy(&st);
    assert_int_equal(remove(path), 0);

    assert_null(clattn_safetensors_find(NULL, "x"));
    assert_null(clattn_safetensors_metadata(NULL, "x"));
    assert_int_equal(clattn_safetensors_read(&st, fixture("f32_torch.safetensors")), CLATTN_OK);
    assert_null(clattn_safetensors_find(st, NULL));
    assert_null(clattn_safetensors_metadata(st, NULL));
    clattn_safetensors_destroy(&st);
    assert_null(st);
    clattn_safetensors_destroy(&st); /* a pointer to NULL */
    clattn_safetensors_destroy(NULL);
}

static void dtype_names(void **state)
{
    (void)state;
    assert_string_equal(clattn_safetensors_dtype_name(CLATTN_SAFETENSORS_F32), "F32");
    assert_string_equal(clattn_safetensors_dtype_name(CLATTN_SAFETENSORS_F16), "F16");
    assert_string_equal(clattn_safetensors_dtype_name(CLATTN_SAFETENSORS_BF16), "BF16");
    assert_string_equal(clattn_safetensors_dtype_name((clattn_safetensors_dtype)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_what_the_reference_writes),
        cmocka_unit_test(writes_what_the_fixture_script_writes),
        cmocka_unit_test(round_trips_are_bit_exact),
        cmocka_unit_test(write_failures_are_named_and_leave_no_file),
        cmocka_unit_test(reads_f32_fixture),
        cmocka_unit_test(reads_f16_fixture),
        cmocka_unit_test(reads_bf16_fixture),
        cmocka_unit_test(converts_every_16_bit_pattern),
        cmocka_unit_test(accepts_header_variations),
        cmocka_unit_test(rejects_malformed_headers),
        cmocka_unit_test(rejects_bad_header_lengths),
        cmocka_unit_test(read_errors_are_named),
        cmocka_unit_test(read_floats_lists_what_it_leaves_out),
        cmocka_unit_test(read_named_reads_only_those),
        cmocka_unit_test(every_truncation_fails),
        cmocka_unit_test(mutated_files_never_crash),
        cmocka_unit_test(invalid_arguments_are_named),
        cmocka_unit_test(dtype_names),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
