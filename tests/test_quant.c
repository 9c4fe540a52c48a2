/*
 * ggml's weight types dequantised on the host (formats/ggml_dequant.c) and on the device
 * (ops/dequant.c, cl/dequant.cl) against gguf-py's values bit for bit: tests/golden/quant holds
 * random raw blocks of each type and gguf.quants.dequantize's float32 values
 * (tools/gen_quant_golden.py). Unsupported types and partial blocks are refused, named.
 * Small: this executable also runs under oclgrind.
 */
#include "common/test_util.h"
#include "formats/ggml_dequant.h"
#include "formats/gguf.h"
#include "ops/dequant.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUANT_DIR GOLDEN_DIR "/quant"

static const struct {
    const char *name; /* ggml's, the golden files' */
    uint32_t type;
} supported[] = {
    {"f32", CLATTN_GGML_F32},   {"f16", CLATTN_GGML_F16},   {"bf16", CLATTN_GGML_BF16},
    {"q8_0", CLATTN_GGML_Q8_0}, {"q4_0", CLATTN_GGML_Q4_0}, {"q4_1", CLATTN_GGML_Q4_1},
    {"q5_0", CLATTN_GGML_Q5_0}, {"q5_1", CLATTN_GGML_Q5_1}, {"q4_K", CLATTN_GGML_Q4_K},
    {"q5_K", CLATTN_GGML_Q5_K}, {"q6_K", CLATTN_GGML_Q6_K},
};
#define SUPPORTED_COUNT (sizeof(supported) / sizeof(supported[0]))

/* Types with a layout that the library refuses, with ggml's names. */
static const struct {
    const char *name;
    uint32_t type;
} refused[] = {
    {"q2_K", CLATTN_GGML_Q2_K},     {"q3_K", CLATTN_GGML_Q3_K},   {"iq4_nl", CLATTN_GGML_IQ4_NL},
    {"tq1_0", CLATTN_GGML_TQ1_0},   {"tq2_0", CLATTN_GGML_TQ2_0}, {"iq2_xxs", CLATTN_GGML_IQ2_XXS},
    {"q8_1", CLATTN_GGML_Q8_1},     {"q8_K", CLATTN_GGML_Q8_K},   {"i8", CLATTN_GGML_I8},
    {"f64", CLATTN_GGML_F64},       {"mxfp4", CLATTN_GGML_MXFP4},
};
#define REFUSED_COUNT (sizeof(refused) / sizeof(refused[0]))

/* One type's golden: raw blocks and gguf-py's values. */
typedef struct golden {
    unsigned char *raw;
    size_t raw_bytes;
    float *values;
    size_t elements;
} golden;

static golden read_golden(const char *name, uint32_t type)
{
    char path[512];
    golden g;
    size_t value_bytes;
    snprintf(path, sizeof(path), "%s/%s.bin", QUANT_DIR, name);
    g.raw = test_read_file(path, &g.raw_bytes);
    snprintf(path, sizeof(path), "%s/%s.f32", QUANT_DIR, name);
    g.values = (float *)test_read_file(path, &value_bytes);
    g.elements = value_bytes / sizeof(float);
    size_t block_elements, block_bytes;
    assert_true(clattn__ggml_type_info(type, &block_elements, &block_bytes, NULL));
    assert_int_equal(g.elements % block_elements, 0);
    assert_int_equal(g.raw_bytes, g.elements / block_elements * block_bytes);
    assert_true(g.elements >= 64); /* several blocks, or 64 values of a float type */
    return g;
}

static void free_golden(golden *g)
{
    free(g->raw);
    free(g->values);
}

/* memcmp, reporting the first differing value. */
static void assert_same_bits(const char *what, const float *got, const float *want, size_t n)
{
    if (memcmp(got, want, n * sizeof(float)) == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &want[i], 4);
        if (a != b) {
            print_error("%s: value %zu is %.9g (0x%08x), gguf-py's %.9g (0x%08x)\n", what, i,
                        (double)got[i], a, (double)want[i], b);
            break;
        }
    }
    fail();
}

static void host_equals_gguf_py(void **state)
{
    (void)state;
    for (size_t t = 0; t < SUPPORTED_COUNT; t++) {
        golden g = read_golden(supported[t].name, supported[t].type);
        float *out = malloc(g.elements * sizeof(float));
        assert_true(clattn__ggml_type_supported(supported[t].type));
        assert_true(clattn__ggml_dequantize(supported[t].type, g.raw, g.elements, out));
        assert_same_bits(supported[t].name, out, g.values, g.elements);
        free(out);
        free_golden(&g);
    }
}

/* Device buffers around the golden: the blocks from an odd byte offset (3), the values from
 * float 5, sentinels elsewhere; only the values' range may change. */
static void device_equals_gguf_py(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    const size_t src_pad = 3, dst_pad = 5;
    for (size_t t = 0; t < SUPPORTED_COUNT; t++) {
        golden g = read_golden(supported[t].name, supported[t].type);
        size_t src_bytes = src_pad + g.raw_bytes + 7, dst_floats = dst_pad + g.elements + 9;
        unsigned char *src_host = malloc(src_bytes);
        memset(src_host, 0xA5, src_bytes);
        memcpy(src_host + src_pad, g.raw, g.raw_bytes);
        float *dst_host = malloc(dst_floats * sizeof(float));
        for (size_t i = 0; i < dst_floats; i++)
            dst_host[i] = -1234.5f;
        cl_mem src, dst;
        assert_int_equal(clattn__buffer_create(ctx, src_bytes, &src, "blocks"), CLATTN_OK);
        assert_int_equal(clattn__buffer_create(ctx, dst_floats * sizeof(float), &dst, "values"),
                         CLATTN_OK);
        assert_int_equal(clattn__write_bytes(ctx, src, 0, src_host, src_bytes, "blocks"),
                         CLATTN_OK);
        assert_int_equal(clattn__write_bytes(ctx, dst, 0, dst_host, dst_floats * sizeof(float),
                                             "values"),
                         CLATTN_OK);
        clattn_status status = clattn__dequantize(ctx, "test", supported[t].type, src, src_pad,
                                                  g.elements, dst, dst_pad);
        if (status != CLATTN_OK)
            print_error("%s: %s\n", supported[t].name, clattn_last_error(ctx));
        assert_int_equal(status, CLATTN_OK);
        float *out = malloc(dst_floats * sizeof(float));
        assert_int_equal(clEnqueueReadBuffer(ctx->queue, dst, CL_TRUE, 0,
                                             dst_floats * sizeof(float), out, 0, NULL, NULL),
                         CL_SUCCESS);
        assert_same_bits(supported[t].name, out + dst_pad, g.values, g.elements);
        assert_memory_equal(out, dst_host, dst_pad * sizeof(float));
        assert_memory_equal(out + dst_pad + g.elements, dst_host + dst_pad + g.elements,
                            9 * sizeof(float));
        clReleaseMemObject(src);
        clReleaseMemObject(dst);
        free(out);
        free(dst_host);
        free(src_host);
        free_golden(&g);
    }
}

static void unsupported_types_are_refused_by_name(void **state)
{
    test_fixture *f = *state;
    cl_mem buf;
    assert_int_equal(clattn__buffer_create(f->ctx, 4096, &buf, "blocks"), CLATTN_OK);
    unsigned char raw[512] = {0};
    float out[256];
    for (size_t t = 0; t < REFUSED_COUNT; t++) {
        size_t block_elements;
        const char *name;
        assert_true(clattn__ggml_type_info(refused[t].type, &block_elements, NULL, &name));
        assert_string_equal(name, refused[t].name);
        assert_false(clattn__ggml_type_supported(refused[t].type));
        out[0] = 7.0f;
        assert_false(clattn__ggml_dequantize(refused[t].type, raw, block_elements, out));
        assert_true(out[0] == 7.0f); /* untouched */
        char needle[64];
        snprintf(needle, sizeof(needle), "ggml type %s is not supported", refused[t].name);
        assert_status_msg(f->ctx,
                          clattn__dequantize(f->ctx, "clattn_test", refused[t].type, buf, 0,
                                             block_elements, buf, 0),
                          CLATTN_ERROR_UNSUPPORTED, needle);
        assert_non_null(strstr(clattn_last_error(f->ctx), "clattn_test"));
    }
    /* numbers with no layout */
    const uint32_t unknown[] = {4, 5, 31, 36, CLATTN_GGML_TYPE_COUNT, 1000, UINT32_MAX};
    for (size_t t = 0; t < sizeof(unknown) / sizeof(unknown[0]); t++) {
        assert_false(clattn__ggml_type_supported(unknown[t]));
        assert_false(clattn__ggml_dequantize(unknown[t], raw, 32, out));
        char needle[64];
        snprintf(needle, sizeof(needle), "%u is not a ggml type", (unsigned)unknown[t]);
        assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", unknown[t], buf, 0,
                                                     32, buf, 0),
                          CLATTN_ERROR_UNSUPPORTED, needle);
    }
    clReleaseMemObject(buf);
}

static void partial_blocks_and_ranges_are_refused(void **state)
{
    test_fixture *f = *state;
    cl_mem src, dst;
    assert_int_equal(clattn__buffer_create(f->ctx, 1024, &src, "blocks"), CLATTN_OK);
    assert_int_equal(clattn__buffer_create(f->ctx, 4096, &dst, "values"), CLATTN_OK);
    unsigned char raw[1024] = {0};
    float out[512];
    out[0] = 7.0f;
    assert_false(clattn__ggml_dequantize(CLATTN_GGML_Q4_0, raw, 31, out));
    assert_false(clattn__ggml_dequantize(CLATTN_GGML_Q4_K, raw, 255, out));
    assert_false(clattn__ggml_dequantize(CLATTN_GGML_Q6_K, raw, 32, out));
    assert_true(out[0] == 7.0f);
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q4_0, src,
                                                 0, 31, dst, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "31 q4_0 values are not a whole number of blocks of 32");
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q5_K, src,
                                                 0, 288, dst, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "blocks of 256");
    /* 4 q6_K blocks are 840 bytes: from byte 200 they run past the 1024 */
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q6_K, src,
                                                 200, 1024, dst, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the source buffer's 1024 bytes");
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_F32, src,
                                                 0, 32, dst, 1000),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the destination buffer's 1024 floats");
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q8_0, src,
                                                 SIZE_MAX, 32, dst, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the source buffer");
    assert_status_msg(f->ctx, clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q8_0, src,
                                                 0, SIZE_MAX / 32 * 32, dst, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "past the destination buffer");
    /* nothing to do */
    assert_int_equal(clattn__dequantize(f->ctx, "clattn_test", CLATTN_GGML_Q4_K, src, 0, 0, dst,
                                        0),
                     CLATTN_OK);
    assert_true(clattn__ggml_dequantize(CLATTN_GGML_Q4_K, raw, 0, out));
    clReleaseMemObject(src);
    clReleaseMemObject(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_equals_gguf_py),
        cmocka_unit_test(device_equals_gguf_py),
        cmocka_unit_test(unsupported_types_are_refused_by_name),
        cmocka_unit_test(partial_blocks_and_ranges_are_refused),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
