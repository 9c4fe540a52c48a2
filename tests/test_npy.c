/* NumPy .npy reading and writing: numpy-made fixtures, round trips, malformed and hostile input. */
#include "common/test_util.h"
#include "clattn/npy.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef NPY_FIXTURE_DIR
#error "NPY_FIXTURE_DIR must name tests/data/npy (meson passes it with c_args)"
#endif

/* The fixtures' values (tools/gen_npy_fixtures.py writes the same). */
static const float f32_2x3_values[6] = {0.0f, -1.5f, 3.25f, 1e-40f, INFINITY, -0.0f};

/* ---- files ---- */

static char temp_dir[1024];

static int make_temp_dir(void **state)
{
    (void)state;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_npy_");
}

static int remove_temp_dir(void **state)
{
    (void)state;
    return rmdir(temp_dir);
}

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", NPY_FIXTURE_DIR, name);
    return path;
}

static const char *temp_file(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", temp_dir, name);
    return path;
}


/* A .npy image: preamble of format `major`.0, the header text exactly as given, then data. */
static unsigned char *make_npy(int major, const char *header, const void *data, size_t data_len,
                               size_t *size)
{
    size_t header_len = strlen(header), prelude = major == 1 ? 10 : 12;
    *size = prelude + header_len + data_len;
    unsigned char *buf = malloc(*size);
    assert_non_null(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 8; i < prelude; i++)
        buf[i] = (unsigned char)(header_len >> (8 * (i - 8)));
    memcpy(buf + prelude, header, header_len);
    if (data_len)
        memcpy(buf + prelude + header_len, data, data_len);
    return buf;
}

static void assert_shape(const clattn_npy_array *a, int ndim, const size_t *shape, size_t numel)
{
    assert_int_equal(a->ndim, ndim);
    for (int d = 0; d < ndim; d++)
        assert_int_equal(a->shape[d], shape[d]);
    for (int d = ndim; d < CLATTN_NPY_MAX_DIMS; d++)
        assert_int_equal(a->shape[d], 0);
    assert_int_equal(a->numel, numel);
}

/* What an output pointer holds before a call that must leave it NULL on error. */
static clattn_npy_array poison;

/* ---- writing ---- */

/* What np.save writes for these arrays, compared with ours byte for byte. */
static void writes_exactly_what_numpy_writes(void **state)
{
    (void)state;
    float seven[7], twelve[12];
    for (int i = 0; i < 7; i++)
        seven[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 12; i++)
        twelve[i] = (float)i;
    const float scalar = 2.5f;
    const struct {
        const char *name;
        const float *data;
        int ndim;
        size_t shape[CLATTN_NPY_MAX_DIMS];
    } cases[] = {
        {"f32_2x3.npy", f32_2x3_values, 2, {2, 3}},
        {"f32_scalar.npy", &scalar, 0, {0}},
        {"f32_7.npy", seven, 1, {7}},
        {"f32_2x1x3x2.npy", twelve, 4, {2, 1, 3, 2}},
        {"f32_empty_100000x0.npy", NULL, 2, {100000, 0}},
        {"f32_empty_pad2.npy", NULL, 8, {1, 0, 1000, 1000, 1000, 1000, 1000, 1000}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const char *out = temp_file("written.npy");
        assert_int_equal(clattn_npy_write_f32(out, cases[c].data, cases[c].ndim, cases[c].shape),
                         CLATTN_OK);
        size_t ours_len, theirs_len;
        unsigned char *ours = test_read_file(out, &ours_len);
        unsigned char *theirs = test_read_file(fixture(cases[c].name), &theirs_len);
        if (ours_len != theirs_len || memcmp(ours, theirs, ours_len) != 0) {
            print_error("%s: our %zu bytes differ from numpy's %zu\n", cases[c].name, ours_len,
                        theirs_len);
            fail();
        }
        free(ours);
        free(theirs);
        assert_int_equal(remove(out), 0);
    }
}

/* The header alone, as a streaming writer puts it before its rows: numpy's bytes up to the data. */
static void header_equals_numpys(void **state)
{
    (void)state;
    const struct {
        const char *name;
        int ndim;
        size_t shape[CLATTN_NPY_MAX_DIMS];
        size_t data_bytes;
    } cases[] = {
        {"f32_2x3.npy", 2, {2, 3}, 24},
        {"f32_7.npy", 1, {7}, 28},
        {"f32_2x1x3x2.npy", 4, {2, 1, 3, 2}, 48},
        {"f32_empty_pad2.npy", 8, {1, 0, 1000, 1000, 1000, 1000, 1000, 1000}, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char header[512];
        size_t length = 0;
        assert_int_equal(clattn_npy_header_f32(header, sizeof(header), cases[c].ndim,
                                               cases[c].shape, &length),
                         CLATTN_OK);
        size_t theirs_len;
        unsigned char *theirs = test_read_file(fixture(cases[c].name), &theirs_len);
        assert_int_equal(length + cases[c].data_bytes, theirs_len);
        assert_memory_equal(header, theirs, length);
        free(theirs);
    }
    char small[64];
    size_t length = 0;
    assert_status_msg(NULL, clattn_npy_header_f32(small, sizeof(small), 2, (size_t[]){2, 3},
                                                  &length),
                      CLATTN_ERROR_INVALID_ARGUMENT, "capacity is 64 bytes; the header needs 128");
    assert_status_msg(NULL, clattn_npy_header_f32(small, sizeof(small), 9, (size_t[]){2, 3},
                                                  &length),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ndim is 9");
}

static void round_trips_are_bit_exact(void **state)
{
    (void)state;
    const struct {
        int ndim;
        size_t shape[CLATTN_NPY_MAX_DIMS];
        size_t numel;
    } cases[] = {
        {0, {0}, 1},
        {1, {1}, 1},
        {1, {7}, 7},
        {2, {3, 5}, 15},
        {4, {2, 3, 1, 4}, 24},
        {8, {1, 2, 1, 2, 1, 2, 1, 3}, 24},
        {3, {4, 0, 2}, 0},
        {1, {5000}, 5000}, /* more than one write chunk */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t n = cases[c].numel;
        float *data = malloc((n ? n : 1) * sizeof(float));
        assert_non_null(data);
        test_fill_uniform(data, n, 100 + c, -1e6f, 1e6f);
        if (n > 3) {
            uint32_t nan_bits = 0x7fc01234u;
            memcpy(&data[0], &nan_bits, sizeof(float));
            data[1] = -INFINITY;
            data[2] = -0.0f;
            data[3] = 1e-42f;
        }
        const char *path = temp_file("round_trip.npy");
        assert_int_equal(clattn_npy_write_f32(path, data, cases[c].ndim, cases[c].shape),
                         CLATTN_OK);

        clattn_npy_array *a = NULL;
        assert_int_equal(clattn_npy_read_f32(&a, path), CLATTN_OK);
        assert_int_equal(a->source_dtype, CLATTN_NPY_FLOAT32);
        assert_shape(a, cases[c].ndim, cases[c].shape, n);
        assert_non_null(a->f32);
        assert_null(a->i64);
        assert_memory_equal(a->f32, data, n * sizeof(float));
        clattn_npy_array_destroy(&a);
        assert_null(a);

        /* The data starts at a multiple of 64 and follows the header immediately. */
        size_t size;
        unsigned char *bytes = test_read_file(path, &size);
        assert_int_equal((size - n * sizeof(float)) % 64, 0);
        assert_int_equal(bytes[size - n * sizeof(float) - 1], '\n');
        assert_int_equal(clattn_npy_parse_f32(&a, bytes, size), CLATTN_OK);
        assert_memory_equal(a->f32, data, n * sizeof(float));
        clattn_npy_array_destroy(&a);
        free(bytes);
        free(data);
        assert_int_equal(remove(path), 0);
    }
}

static void write_failures_are_named_and_leave_no_file(void **state)
{
    (void)state;
    const float x[2] = {1, 2};
    const size_t shape[1] = {2};
    char path[1100];
    snprintf(path, sizeof(path), "%s/no/such/dir/x.npy", temp_dir);
    assert_status_msg(NULL, clattn_npy_write_f32(path, x, 1, shape), CLATTN_ERROR_IO,
                      "No such file or directory");
    assert_non_null(strstr(clattn_last_error(NULL), path));
    /* The path is a directory. */
    assert_status_msg(NULL, clattn_npy_write_f32(temp_dir, x, 1, shape), CLATTN_ERROR_IO,
                      "cannot create");
    struct stat st;
    assert_int_equal(stat(temp_dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    const size_t huge[3] = {SIZE_MAX / 2, 3, 1};
    assert_status_msg(NULL, clattn_npy_write_f32(temp_file("huge.npy"), x, 3, huge),
                      CLATTN_ERROR_TOO_LARGE, "overflows");
    assert_int_not_equal(access(temp_file("huge.npy"), F_OK), 0);
}

/* A failed or refused write leaves whatever the path names as it was: a symbolic link to a
 * character device (the old writer removed the link after the device's write failed), a FIFO
 * (neither opened, which would block, nor removed), a directory; and it leaves no temporary
 * file behind (the temporary directory must be empty for its teardown). A FIFO given to the
 * readers is refused at once instead of blocking in open. */
static void failed_writes_change_nothing(void **state)
{
    (void)state;
    const float x[2] = {1, 2};
    const size_t shape[1] = {2};
    struct stat st;
    char link_path[1100], fifo_path[1100], file_path[1100];
    snprintf(link_path, sizeof(link_path), "%s/full.npy", temp_dir);
    snprintf(fifo_path, sizeof(fifo_path), "%s/fifo.npy", temp_dir);
    snprintf(file_path, sizeof(file_path), "%s/file.npy", temp_dir);
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        assert_int_equal(symlink("/dev/full", link_path), 0);
        assert_status_msg(NULL, clattn_npy_write_f32(link_path, x, 1, shape), CLATTN_ERROR_IO,
                          "a character device, not a regular file");
        assert_int_equal(lstat(link_path, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(stat("/dev/full", &st), 0);
        assert_true(S_ISCHR(st.st_mode));
        assert_int_equal(unlink(link_path), 0);
    }
    assert_int_equal(mkfifo(fifo_path, 0600), 0);
    assert_status_msg(NULL, clattn_npy_write_f32(fifo_path, x, 1, shape), CLATTN_ERROR_IO,
                      "a FIFO, not a regular file");
    clattn_npy_array *a = &poison;
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fifo_path), CLATTN_ERROR_IO,
                      "not a regular file (a FIFO)");
    assert_int_equal(lstat(fifo_path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(unlink(fifo_path), 0);
    assert_status_msg(NULL, clattn_npy_read_f32(&a, temp_dir), CLATTN_ERROR_IO,
                      "not a regular file (a directory)");

    /* An existing file is replaced (through a symbolic link: the link stays), keeping its
     * permissions. */
    FILE *f = fopen(file_path, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(chmod(file_path, 0640), 0);
    snprintf(link_path, sizeof(link_path), "%s/link.npy", temp_dir);
    assert_int_equal(symlink("file.npy", link_path), 0);
    assert_int_equal(clattn_npy_write_f32(link_path, x, 1, shape), CLATTN_OK);
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(file_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_null(a); /* the failed reads left NULL */
    assert_int_equal(clattn_npy_read_f32(&a, file_path), CLATTN_OK);
    assert_int_equal(a->numel, 2);
    assert_true(a->f32[1] == 2.0f);
    clattn_npy_array_destroy(&a);
    assert_int_equal(unlink(link_path), 0);
    assert_int_equal(unlink(file_path), 0);
}

/* ---- reading numpy's files ---- */

static void reads_float_files(void **state)
{
    (void)state;
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_f32(&a, fixture("f32_2x3.npy")), CLATTN_OK);
    assert_int_equal(a->source_dtype, CLATTN_NPY_FLOAT32);
    assert_shape(a, 2, (size_t[]){2, 3}, 6);
    assert_memory_equal(a->f32, f32_2x3_values, sizeof(f32_2x3_values));
    clattn_npy_array_destroy(&a);

    assert_int_equal(clattn_npy_read_f32(&a, fixture("f32_scalar.npy")), CLATTN_OK);
    assert_shape(a, 0, NULL, 1);
    assert_true(a->f32[0] == 2.5f);
    clattn_npy_array_destroy(&a);

    assert_int_equal(clattn_npy_read_f32(&a, fixture("f32_empty_100000x0.npy")), CLATTN_OK);
    assert_shape(a, 2, (size_t[]){100000, 0}, 0);
    assert_non_null(a->f32);
    clattn_npy_array_destroy(&a);

    assert_int_equal(clattn_npy_read_f32(&a, fixture("f64_4.npy")), CLATTN_OK);
    assert_int_equal(a->source_dtype, CLATTN_NPY_FLOAT64);
    assert_shape(a, 1, (size_t[]){4}, 4);
    assert_true(a->f32[0] == 1.5f && a->f32[1] == -2.25f && a->f32[2] == (float)0.1);
    assert_true(isinf(a->f32[3]) && a->f32[3] > 0);
    clattn_npy_array_destroy(&a);
}

static void reads_other_format_versions(void **state)
{
    (void)state;
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_f32(&a, fixture("f32_v2_2x2.npy")), CLATTN_OK);
    assert_shape(a, 2, (size_t[]){2, 2}, 4);
    assert_memory_equal(a->f32, ((float[]){1, 2, 3, 4}), 4 * sizeof(float));
    clattn_npy_array_destroy(&a);
    assert_int_equal(clattn_npy_read_f32(&a, fixture("f32_v3_2.npy")), CLATTN_OK);
    assert_shape(a, 1, (size_t[]){2}, 2);
    assert_memory_equal(a->f32, ((float[]){5, 6}), 2 * sizeof(float));
    clattn_npy_array_destroy(&a);
}

static const struct {
    const char *name;
    clattn_npy_dtype dtype;
    size_t numel;
    int64_t values[4];
} integer_fixtures[] = {
    {"bool_5.npy", CLATTN_NPY_BOOL, 5, {1, 0, 1, 1}},
    {"i8_3.npy", CLATTN_NPY_INT8, 3, {-128, 0, 127}},
    {"i16_3.npy", CLATTN_NPY_INT16, 3, {-32768, 1, 32767}},
    {"i32_3.npy", CLATTN_NPY_INT32, 3, {-2147483647 - 1, 5, 2147483647}},
    {"i64_2x2.npy", CLATTN_NPY_INT64, 4, {INT64_MIN, 7, INT64_MAX, 16777217}},
    {"u8_2.npy", CLATTN_NPY_UINT8, 2, {0, 255}},
    {"u16_2.npy", CLATTN_NPY_UINT16, 2, {0, 65535}},
    {"u32_2.npy", CLATTN_NPY_UINT32, 2, {0, 4294967295}},
    {"u64_2.npy", CLATTN_NPY_UINT64, 2, {0, INT64_MAX}},
};

static void reads_integer_and_bool_files(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(integer_fixtures) / sizeof(integer_fixtures[0]); c++) {
        const char *path = fixture(integer_fixtures[c].name);
        size_t n = integer_fixtures[c].numel, shown = n < 4 ? n : 4;
        clattn_npy_array *a = NULL;
        assert_int_equal(clattn_npy_read_i64(&a, path), CLATTN_OK);
        assert_int_equal(a->source_dtype, integer_fixtures[c].dtype);
        assert_int_equal(a->numel, n);
        assert_null(a->f32);
        assert_memory_equal(a->i64, integer_fixtures[c].values, shown * sizeof(int64_t));
        clattn_npy_array_destroy(&a);

        assert_int_equal(clattn_npy_read_f32(&a, path), CLATTN_OK);
        assert_int_equal(a->source_dtype, integer_fixtures[c].dtype);
        assert_null(a->i64);
        for (size_t i = 0; i < shown; i++)
            assert_true(a->f32[i] == (float)integer_fixtures[c].values[i]);
        clattn_npy_array_destroy(&a);
    }
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_i64(&a, fixture("bool_5.npy")), CLATTN_OK);
    assert_int_equal(a->i64[4], 0);
    clattn_npy_array_destroy(&a);
    assert_int_equal(clattn_npy_read_i64(&a, fixture("i64_2x2.npy")), CLATTN_OK);
    assert_shape(a, 2, (size_t[]){2, 2}, 4);
    clattn_npy_array_destroy(&a);
    /* 16777217 is not a float: it rounds to the nearest one. */
    assert_int_equal(clattn_npy_read_f32(&a, fixture("i64_2x2.npy")), CLATTN_OK);
    assert_true(a->f32[3] == 16777216.0f);
    clattn_npy_array_destroy(&a);
    /* The uint64 above INT64_MAX converts to float but not to int64. */
    assert_int_equal(clattn_npy_read_f32(&a, fixture("u64_big_3.npy")), CLATTN_OK);
    assert_true(a->f32[2] == 18446744073709551615.0f);
    clattn_npy_array_destroy(&a);
}

static void read_errors_are_named(void **state)
{
    (void)state;
    clattn_npy_array *a = NULL;
    assert_status_msg(NULL, clattn_npy_read_i64(&a, fixture("u64_big_3.npy")),
                      CLATTN_ERROR_OUT_OF_RANGE, "flat index 2 (18446744073709551615)");
    assert_null(a);
    assert_status_msg(NULL, clattn_npy_read_i64(&a, fixture("f32_2x3.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "expected an integer or bool array, got float32");
    assert_status_msg(NULL, clattn_npy_read_i64(&a, fixture("f64_4.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "got float64");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("f32_fortran_2x3.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "fortran_order");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("f32_bigendian_2.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "big-endian dtype '>f4' is not supported");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("f16_2.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "dtype '<f2' is not supported");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("c64_2.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "'<c8'");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("structured_2.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "structured");
    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("f32_9d.npy")),
                      CLATTN_ERROR_UNSUPPORTED, "more than 8 dimensions");
    assert_non_null(strstr(clattn_last_error(NULL), "f32_9d.npy"));
    assert_null(a);

    assert_status_msg(NULL, clattn_npy_read_f32(&a, fixture("missing.npy")), CLATTN_ERROR_IO,
                      "No such file or directory");
    assert_non_null(strstr(clattn_last_error(NULL), fixture("missing.npy")));
    assert_status_msg(NULL, clattn_npy_read_f32(&a, NPY_FIXTURE_DIR), CLATTN_ERROR_IO,
                      "not a regular file");

    /* An empty file and a text file. */
    const char *path = temp_file("bad.npy");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
    assert_status_msg(NULL, clattn_npy_read_f32(&a, path), CLATTN_ERROR_FORMAT, "truncated");
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("hello, world\n", f);
    fclose(f);
    assert_status_msg(NULL, clattn_npy_read_i64(&a, path), CLATTN_ERROR_FORMAT, "not a .npy file");
    assert_non_null(strstr(clattn_last_error(NULL), path));
    assert_null(a);
    assert_int_equal(remove(path), 0);
}

/* ---- headers built by hand ---- */

static void accepts_header_variations(void **state)
{
    (void)state;
    const float two[2] = {1.25f, -8.0f};
    const char *headers[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
        "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
        "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,)}",
        " \t{ 'descr' : '=f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , ) , } \r\n  ",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }\n", /* Python 2 */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2,), }\n",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,2), }\n",
    };
    for (size_t h = 0; h < sizeof(headers) / sizeof(headers[0]); h++) {
        for (int major = 1; major <= 3; major++) {
            size_t size;
            unsigned char *bytes = make_npy(major, headers[h], two, sizeof(two), &size);
            clattn_npy_array *a = NULL;
            clattn_status status = clattn_npy_parse_f32(&a, bytes, size);
            if (status != CLATTN_OK) {
                print_error("header %zu, version %d: %s\n", h, major, clattn_last_error(NULL));
                fail();
            }
            assert_int_equal(a->numel, 2);
            assert_int_equal(a->shape[a->ndim - 1], 2);
            assert_memory_equal(a->f32, two, sizeof(two));
            clattn_npy_array_destroy(&a);
            free(bytes);
        }
    }
    /* Byte orders of 1-byte types; trailing bytes after the data are ignored. */
    const char *one_byte[] = {"|u1", "<u1", ">u1", "=u1"};
    const unsigned char data[3] = {7, 200, 99};
    for (size_t i = 0; i < 4; i++) {
        char header[128];
        snprintf(header, sizeof(header),
                 "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", one_byte[i]);
        size_t size;
        unsigned char *bytes = make_npy(1, header, data, sizeof(data), &size);
        clattn_npy_array *a = NULL;
        assert_int_equal(clattn_npy_parse_i64(&a, bytes, size), CLATTN_OK);
        assert_int_equal(a->source_dtype, CLATTN_NPY_UINT8);
        assert_int_equal(a->numel, 2);
        assert_int_equal(a->i64[0], 7);
        assert_int_equal(a->i64[1], 200);
        clattn_npy_array_destroy(&a);
        free(bytes);
    }
    /* Nonzero bool bytes are true. */
    size_t size;
    unsigned char *bytes = make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}",
                                    "\x00\x02\xff", 3, &size);
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_parse_f32(&a, bytes, size), CLATTN_OK);
    assert_true(a->f32[0] == 0.0f && a->f32[1] == 1.0f && a->f32[2] == 1.0f);
    clattn_npy_array_destroy(&a);
    free(bytes);
}

static void rejects_malformed_headers(void **state)
{
    (void)state;
    const struct {
        const char *header;
        clattn_status status;
        const char *needle;
    } cases[] = {
        {"", CLATTN_ERROR_FORMAT, "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", CLATTN_ERROR_FORMAT,
         "expected a quoted key or '}'"},
        {"{'descr': '<f4', 'fortran_order': False}", CLATTN_ERROR_FORMAT, "no 'shape' key"},
        {"{'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_FORMAT, "no 'descr' key"},
        {"{'descr': '<f4', 'shape': (2,)}", CLATTN_ERROR_FORMAT, "no 'fortran_order' key"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
         CLATTN_ERROR_FORMAT, "duplicate key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", CLATTN_ERROR_FORMAT,
         "unexpected key 'x'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", CLATTN_ERROR_FORMAT,
         "not True or False"},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_FORMAT,
         "'descr' is not a string"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_FORMAT,
         "malformed header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", CLATTN_ERROR_FORMAT,
         "needs a comma"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 2}", CLATTN_ERROR_FORMAT,
         "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", CLATTN_ERROR_FORMAT,
         "'shape' is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", CLATTN_ERROR_FORMAT,
         "negative dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", CLATTN_ERROR_FORMAT,
         "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", CLATTN_ERROR_FORMAT,
         "expected an integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", CLATTN_ERROR_FORMAT,
         "expected ',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", CLATTN_ERROR_FORMAT,
         "unexpected text after the dictionary"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_FORMAT,
         "expected ',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_FORMAT,
         "expected ':'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", CLATTN_ERROR_FORMAT,
         "needs 12 bytes but only 8 follow the header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
         CLATTN_ERROR_TOO_LARGE, "does not fit in size_t"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2)}",
         CLATTN_ERROR_TOO_LARGE, "element count of shape (4294967296, 4294967296, 2)"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}",
         CLATTN_ERROR_TOO_LARGE, "byte size of shape (4611686018427387904,) of float64"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,)}",
         CLATTN_ERROR_FORMAT, "needs 4000000000000 bytes"},
        {"{'descr': '>i4', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_UNSUPPORTED,
         "big-endian dtype '>i4'"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_UNSUPPORTED,
         "only for 1-byte types"},
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_UNSUPPORTED,
         "dtype '<f16' is not supported"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_UNSUPPORTED,
         "dtype '|O'"},
        {"{'descr': '', 'fortran_order': False, 'shape': (2,)}", CLATTN_ERROR_UNSUPPORTED,
         "dtype ''"},
        {"{'descr': '<f\x01\xff', 'fortran_order': False, 'shape': (2,)}",
         CLATTN_ERROR_UNSUPPORTED, "dtype '<f?\?'"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2)}", CLATTN_ERROR_UNSUPPORTED,
         "fortran_order True"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,2)}",
         CLATTN_ERROR_UNSUPPORTED, "more than 8 dimensions"},
    };
    const float two[2] = {1, 2};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t size;
        unsigned char *bytes = make_npy(1, cases[c].header, two, sizeof(two), &size);
        clattn_npy_array *a = NULL;
        clattn_status status = clattn_npy_parse_f32(&a, bytes, size);
        if (status != cases[c].status || !strstr(clattn_last_error(NULL), cases[c].needle) ||
            !strstr(clattn_last_error(NULL), "clattn_npy_parse_f32: <memory>: ")) {
            print_error("case %zu: %s: got %s \"%s\", expected %s mentioning \"%s\"\n", c,
                        cases[c].header, clattn_status_name(status), clattn_last_error(NULL),
                        clattn_status_name(cases[c].status), cases[c].needle);
            fail();
        }
        assert_null(a);
        free(bytes);
    }
}

static void rejects_bad_preambles(void **state)
{
    (void)state;
    size_t size;
    unsigned char *good = test_read_file(fixture("f32_2x3.npy"), &size);
    unsigned char *bytes = malloc(size);
    assert_non_null(bytes);
    clattn_npy_array *a = NULL;

    memcpy(bytes, good, size);
    bytes[1] = 'n';
    assert_status_msg(NULL, clattn_npy_parse_f32(&a, bytes, size), CLATTN_ERROR_FORMAT,
                      "not a .npy file");
    memcpy(bytes, good, size);
    bytes[6] = 4;
    assert_status_msg(NULL, clattn_npy_parse_f32(&a, bytes, size), CLATTN_ERROR_UNSUPPORTED,
                      "version 4.0 is not supported");
    memcpy(bytes, good, size);
    bytes[7] = 1;
    assert_status_msg(NULL, clattn_npy_parse_f32(&a, bytes, size), CLATTN_ERROR_UNSUPPORTED,
                      "version 1.1");
    memcpy(bytes, good, size);
    bytes[8] = 0xff;
    bytes[9] = 0xff;
    assert_status_msg(NULL, clattn_npy_parse_f32(&a, bytes, size), CLATTN_ERROR_FORMAT,
                      "header length 65535 runs past the end of the file (152 bytes");
    /* A hostile 4 GB header length in a version 2.0 file allocates nothing. */
    free(bytes);
    bytes = make_npy(2, "{}", NULL, 0, &size);
    memset(bytes + 8, 0xff, 4);
    assert_status_msg(NULL, clattn_npy_parse_i64(&a, bytes, size), CLATTN_ERROR_FORMAT,
                      "header length 4294967295 runs past the end");
    assert_status_msg(NULL, clattn_npy_parse_i64(&a, bytes, 11), CLATTN_ERROR_FORMAT,
                      "shorter than the .npy 2.0 preamble");
    assert_null(a);
    assert_status_msg(NULL, clattn_npy_parse_i64(&a, NULL, 0), CLATTN_ERROR_FORMAT, "truncated");
    free(bytes);
    free(good);
}

/* Every proper prefix of a valid file is an error, read from a buffer of exactly that size. */
static void every_truncation_fails(void **state)
{
    (void)state;
    const char *names[] = {"f32_2x3.npy", "f32_v2_2x2.npy", "f32_scalar.npy", "i16_3.npy",
                           "f32_empty_100000x0.npy", "f64_4.npy"};
    for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
        size_t size;
        unsigned char *whole = test_read_file(fixture(names[f]), &size);
        for (size_t len = 0; len < size; len++) {
            unsigned char *prefix = malloc(len ? len : 1);
            assert_non_null(prefix);
            memcpy(prefix, whole, len);
            clattn_npy_array *a = NULL;
            clattn_status s1 = clattn_npy_parse_f32(&a, len ? prefix : NULL, len);
            assert_null(a);
            clattn_status s2 = clattn_npy_parse_i64(&a, prefix, len);
            assert_null(a);
            if (s1 == CLATTN_OK || s2 == CLATTN_OK) {
                print_error("%s cut to %zu of %zu bytes was accepted\n", names[f], len, size);
                fail();
            }
            free(prefix);
        }
        free(whole);
    }
}

static void check_result(clattn_status status, const clattn_npy_array *a, bool f32)
{
    if (status != CLATTN_OK) {
        assert_null(a);
        assert_true(strlen(clattn_last_error(NULL)) > 0);
        return;
    }
    assert_true(a->ndim >= 0 && a->ndim <= CLATTN_NPY_MAX_DIMS);
    size_t numel = 1;
    for (int d = 0; d < a->ndim; d++)
        numel *= a->shape[d];
    assert_int_equal(a->numel, numel);
    assert_non_null(f32 ? (void *)a->f32 : (void *)a->i64);
    assert_null(f32 ? (void *)a->i64 : (void *)a->f32);
}

/* Seeded random damage to valid files must never crash, leak or over-read. */
static void mutated_files_never_crash(void **state)
{
    (void)state;
    const char *names[] = {"f32_2x3.npy", "f32_v2_2x2.npy", "f32_v3_2.npy", "i64_2x2.npy",
                           "bool_5.npy",  "u64_big_3.npy",  "f32_scalar.npy", "f32_9d.npy"};
    static const char garbage[] = "{}()[]'\",: \n0123456789LTrueFalse<>|=fiub-descrshape";
    test_rng rng = {2024};
#define RANDOM_GARBAGE() ((unsigned char)garbage[test_rng_next(&rng) % (sizeof(garbage) - 1)])
    size_t accepted = 0, iterations = 0;
    for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
        size_t size;
        unsigned char *whole = test_read_file(fixture(names[f]), &size);
        for (int round = 0; round < 400; round++, iterations++) {
            size_t len = size;
            unsigned char *bytes = malloc(size + 64);
            assert_non_null(bytes);
            memcpy(bytes, whole, size);
            size_t prelude = bytes[6] == 1 ? 10 : 12;
            switch (test_rng_next(&rng) % 5) {
            case 0: /* flip random bytes */
                for (uint64_t k = 1 + test_rng_next(&rng) % 4; k > 0; k--) {
                    size_t at = test_rng_next(&rng) % len;
                    bytes[at] ^= (unsigned char)(1 + test_rng_next(&rng) % 255);
                }
                break;
            case 1: { /* a random or huge header length */
                uint64_t v = test_rng_next(&rng);
                if (v & 1)
                    v = v % (size + 8);
                for (size_t i = 8; i < prelude; i++)
                    bytes[i] = (unsigned char)(v >> (8 * (i - 8)));
                break;
            }
            case 2: /* garbage inside the dictionary */
                for (uint64_t k = 1 + test_rng_next(&rng) % 6; k > 0; k--) {
                    size_t at = prelude + test_rng_next(&rng) % (size - prelude);
                    if (at < size - 1)
                        bytes[at] = RANDOM_GARBAGE();
                }
                break;
            case 3: { /* insert garbage (the header length stays: the data shifts) */
                size_t at = prelude + test_rng_next(&rng) % (size - prelude);
                size_t n = 1 + test_rng_next(&rng) % 16;
                memmove(bytes + at + n, bytes + at, size - at);
                for (size_t i = 0; i < n; i++)
                    bytes[at + i] = RANDOM_GARBAGE();
                len = size + n;
                break;
            }
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
            clattn_npy_array *a = &poison; /* whatever *out held, an error leaves NULL */
            clattn_status status = clattn_npy_parse_f32(&a, exact, len);
            check_result(status, a, true);
            accepted += status == CLATTN_OK;
            clattn_npy_array_destroy(&a);
            status = clattn_npy_parse_i64(&a, exact, len);
            check_result(status, a, false);
            clattn_npy_array_destroy(&a);
            free(exact);
        }
        free(whole);
    }
#undef RANDOM_GARBAGE
    assert_true(iterations >= 2000);
    assert_true(accepted > 0); /* some damage lands in the data and is harmless */
}

/* ---- arguments and small functions ---- */

static void invalid_arguments_are_named(void **state)
{
    (void)state;
    clattn_npy_array *a = &poison; /* whatever *out held, an error leaves NULL */
    assert_status_msg(NULL, clattn_npy_read_f32(&a, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_npy_read_f32: invalid argument: path is NULL");
    assert_null(a);
    assert_status_msg(NULL, clattn_npy_read_i64(&a, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_npy_read_i64: invalid argument: path is NULL");
    assert_status_msg(NULL, clattn_npy_read_f32(NULL, fixture("f32_2x3.npy")),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    assert_status_msg(NULL, clattn_npy_read_i64(NULL, fixture("i8_3.npy")),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    assert_status_msg(NULL, clattn_npy_parse_f32(&a, NULL, 10), CLATTN_ERROR_INVALID_ARGUMENT,
                      "bytes is NULL but size is 10");
    assert_status_msg(NULL, clattn_npy_parse_i64(NULL, "x", 1), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_npy_parse_i64: invalid argument: out is NULL");

    const float x[6] = {0};
    const size_t shape[CLATTN_NPY_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const char *path = temp_file("args.npy");
    assert_status_msg(NULL, clattn_npy_write_f32(NULL, x, 1, shape),
                      CLATTN_ERROR_INVALID_ARGUMENT, "path is NULL");
    assert_status_msg(NULL, clattn_npy_write_f32(path, x, 9, shape),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ndim is 9; it must be 0 to 8");
    assert_status_msg(NULL, clattn_npy_write_f32(path, x, -1, shape),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ndim is -1");
    assert_status_msg(NULL, clattn_npy_write_f32(path, x, 2, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "shape is NULL but ndim is 2");
    assert_status_msg(NULL, clattn_npy_write_f32(path, NULL, 2, (size_t[]){2, 3}),
                      CLATTN_ERROR_INVALID_ARGUMENT, "data is NULL but the shape has 6 elements");
    assert_status_msg(NULL, clattn_npy_write_f32(path, NULL, 0, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "data is NULL but the shape has 1 elements");
    assert_int_not_equal(access(path, F_OK), 0);
    /* No data is needed for an empty array, nor a shape for a 0-d one. */
    assert_int_equal(clattn_npy_write_f32(path, NULL, 2, (size_t[]){0, 3}), CLATTN_OK);
    assert_int_equal(clattn_npy_write_f32(path, x, 0, NULL), CLATTN_OK);
    assert_int_equal(clattn_npy_write_f32(path, x, 8, shape), CLATTN_OK);
    assert_int_equal(remove(path), 0);
}

static void dtype_names_and_free(void **state)
{
    (void)state;
    const char *names[] = {"float32", "float64", "bool",  "int8",   "int16",  "int32",
                           "int64",   "uint8",   "uint16", "uint32", "uint64"};
    for (int d = CLATTN_NPY_FLOAT32; d <= CLATTN_NPY_UINT64; d++)
        assert_string_equal(clattn_npy_dtype_name((clattn_npy_dtype)d), names[d]);
    assert_string_equal(clattn_npy_dtype_name((clattn_npy_dtype)99), "unknown");
    clattn_npy_array_destroy(NULL);
    clattn_npy_array *a = NULL;
    memset(&a, 0, sizeof(a));
    clattn_npy_array_destroy(&a);
    assert_null(a);
}

static void int64_arrays_round_trip(void **state)
{
    (void)state;
    const int64_t values[6] = {0, -1, 7, INT64_MAX, INT64_MIN, 123456789012345};
    const char *path = temp_file("i64.npy");
    assert_int_equal(clattn_npy_write_i64(path, values, 2, (size_t[]){2, 3}), CLATTN_OK);
    clattn_npy_array *a = NULL;
    assert_int_equal(clattn_npy_read_i64(&a, path), CLATTN_OK);
    assert_int_equal(a->source_dtype, CLATTN_NPY_INT64);
    assert_shape(a, 2, (size_t[]){2, 3}, 6);
    assert_memory_equal(a->i64, values, sizeof(values));
    clattn_npy_array_destroy(&a);
    FILE *f = fopen(path, "rb");
    char head[129] = {0};
    assert_int_equal(fread(head, 1, 128, f), 128); /* the header is padded to 128 bytes */
    fclose(f);
    assert_non_null(strstr(head + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }"));
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(int64_arrays_round_trip),
        cmocka_unit_test(writes_exactly_what_numpy_writes),
        cmocka_unit_test(header_equals_numpys),
        cmocka_unit_test(round_trips_are_bit_exact),
        cmocka_unit_test(write_failures_are_named_and_leave_no_file),
        cmocka_unit_test(failed_writes_change_nothing),
        cmocka_unit_test(reads_float_files),
        cmocka_unit_test(reads_other_format_versions),
        cmocka_unit_test(reads_integer_and_bool_files),
        cmocka_unit_test(read_errors_are_named),
        cmocka_unit_test(accepts_header_variations),
        cmocka_unit_test(rejects_malformed_headers),
        cmocka_unit_test(rejects_bad_preambles),
        cmocka_unit_test(every_truncation_fails),
        cmocka_unit_test(mutated_files_never_crash),
        cmocka_unit_test(invalid_arguments_are_named),
        cmocka_unit_test(dtype_names_and_free),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
