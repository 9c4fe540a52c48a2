/*
 * Weights larger than the device's largest allocation (llm_model.h, "Limits of the device"), with
 * the limit lowered by CLATTN_MAX_ALLOC_BYTES (src/runtime/device.c, a testing knob) on small
 * random one-layer llama GGUF files this test writes (a vocabulary of 1000 rows over a width of
 * 32, so that the output projection is the one weight over the lowered limit; a file of width 64
 * whose every linear weight is over it; a file of 3000 rows for the logits' refusal):
 *   - the split's numbers: the fewest parts, each within the limit, as even as whole rows allow;
 *     a chain's rows (ops/linear.h) are its parts' only when every part has the same width;
 *   - under a limit of 12000 bytes, the output projection split over 3 buffers (tied Q8_0 token
 *     embedding) or 2 (a separate Q4_1 output.weight beside an F16 embedding) and the logits
 *     computed 3 rows at a time; under 8500 bytes, the weights of the width-64 file split — an
 *     F32 attention output, Q8_0 gate|up (a part across gate's and up's boundary), Q8_0 down,
 *     the tied output; q|k|v a chain of a Q8_0 and an F16 part (its parts' types) —, each part
 *     within the limit: teacher-forced logits, a batch's last rows and a decode step are the
 *     bytes of the unsplit run (memcmp); the token embedding's rows, gathered from the file on
 *     both sides of the parts' boundaries, are the file's values (dequantised here);
 *   - what is refused, named with the numbers: one row of logits over the limit, one row of a
 *     weight (alone or stacked) over it, and a malformed CLATTN_MAX_ALLOC_BYTES; a value above
 *     the device's limit changes nothing.
 * It is small enough for the oclgrind leg (with CLATTN_TEST_SMALL, the width-64 file's case
 * only): the whole LLM path there (embedding, the block stack, the quantised kernels, every
 * weight split).
 */
#include "common/test_util.h"

#include "formats/gguf.h"
#include "llm/llm_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_CAP "CLATTN_MAX_ALLOC_BYTES"
#define VOCAB 1000
#define WIDE_VOCAB 3000 /* a row of logits larger than the rotary table */
#define D 32       /* embedding_length */
#define FF 64      /* feed_forward_length */
#define HEADS 4    /* head width 8 (the rotary table: 256 positions × 4 pairs) */
#define KV_HEADS 1 /* k and v: 8 rows each */
#define NO_OUTPUT 0xffffffffu
/* The layers' file: every linear weight over LAYERS_CAP bytes but for its rows. */
#define LAYERS_D 64        /* head width 8 again: the rotary table stays 8192 bytes */
#define LAYERS_FF 128
#define LAYERS_HEADS 8
#define LAYERS_KV_HEADS 2
#define LAYERS_CAP 8500

/* ---- a small GGUF file, written as llama.cpp writes one ---- */

typedef struct bytes {
    unsigned char *data;
    size_t size, cap;
    size_t data_start; /* of a file: where the tensors' data begins */
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->size, p, n);
    b->size += n;
}

static void put_u(bytes *b, uint64_t v, size_t n)
{
    unsigned char le[8];
    for (size_t i = 0; i < n; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    put(b, le, n);
}

static void put_str(bytes *b, const char *s)
{
    put_u(b, strlen(s), 8);
    put(b, s, strlen(s));
}

static void put_kv_u32(bytes *b, const char *key, uint32_t v)
{
    put_str(b, key);
    put_u(b, CLATTN_GGUF_UINT32, 4);
    put_u(b, v, 4);
}

static void put_kv_f32(bytes *b, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    put_str(b, key);
    put_u(b, CLATTN_GGUF_FLOAT32, 4);
    put_u(b, bits, 4);
}

/* A random normal half float: sign, exponent field in [e_lo, e_hi], any mantissa. */
static uint16_t random_half(test_rng *rng, unsigned e_lo, unsigned e_hi, int sign)
{
    uint64_t r = test_rng_next(rng);
    unsigned e = e_lo + (unsigned)(r % (e_hi - e_lo + 1));
    unsigned s = sign < 0 ? 1u : sign > 0 ? 0u : (unsigned)((r >> 20) & 1);
    return (uint16_t)(s << 15 | e << 10 | ((r >> 8) & 0x3ff));
}

/* rows × k values of `type` (k a multiple of 32), random but finite. */
static void put_random(bytes *b, test_rng *rng, uint32_t type, size_t rows, size_t k, bool norm)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < k; j += 32) {
            if (type == CLATTN_GGML_F32) {
                for (int i = 0; i < 32; i++) {
                    float v = norm ? test_rng_uniform(rng, 0.8f, 1.2f)
                                   : test_rng_uniform(rng, -0.5f, 0.5f);
                    put(b, &v, 4);
                }
            } else if (type == CLATTN_GGML_F16) {
                for (int i = 0; i < 32; i++)
                    put_u(b, random_half(rng, 8, 14, 0), 2); /* |v| in [2^-7, 1) */
            } else if (type == CLATTN_GGML_Q8_0) {
                put_u(b, random_half(rng, 6, 8, 1), 2); /* d in [2^-9, 2^-6) */
                for (int i = 0; i < 32; i++)
                    put_u(b, test_rng_next(rng), 1);
            } else {
                assert_int_equal(type, CLATTN_GGML_Q4_1);
                put_u(b, random_half(rng, 9, 10, 1), 2);  /* d */
                put_u(b, random_half(rng, 11, 12, -1), 2); /* m, negative */
                for (int i = 0; i < 16; i++)
                    put_u(b, test_rng_next(rng), 1);
            }
        }
}

static size_t row_bytes_of(uint32_t type, size_t k)
{
    switch (type) {
    case CLATTN_GGML_F32: return 4 * k;
    case CLATTN_GGML_F16: return 2 * k;
    case CLATTN_GGML_Q8_0: return k / 32 * 34;
    default: return k / 32 * 20; /* Q4_1 */
    }
}

/* A one-layer llama file's shape and its tensors' types. */
typedef struct file_spec {
    size_t d, ff, heads, kv_heads; /* embedding_length, feed_forward_length, head counts */
    size_t vocab;
    uint32_t embd; /* token_embd.weight */
    uint32_t q, k, v, o, gate, up, down; /* the layer's linear weights */
    uint32_t out;  /* output.weight; NO_OUTPUT: tied */
} file_spec;

/* The spec of model_file's files: width D, every layer weight in layer_type. */
static file_spec spec_of(uint32_t embd_type, uint32_t layer_type, uint32_t out_type, size_t vocab)
{
    return (file_spec){D,          FF,         HEADS,      KV_HEADS,   vocab,      embd_type,
                       layer_type, layer_type, layer_type, layer_type, layer_type, layer_type,
                       layer_type, out_type};
}

/* A one-layer llama file of spec s, norms F32. Returns its bytes. */
static bytes spec_file(const file_spec *s, uint64_t seed)
{
    const size_t d = s->d, kv = s->kv_heads * (d / s->heads);
    struct {
        const char *name;
        size_t k, rows; /* rows 0: a vector of k */
        uint32_t type;
    } t[] = {
        {"token_embd.weight", d, s->vocab, s->embd},
        {"output_norm.weight", d, 0, CLATTN_GGML_F32},
        {"blk.0.attn_norm.weight", d, 0, CLATTN_GGML_F32},
        {"blk.0.attn_q.weight", d, d, s->q},
        {"blk.0.attn_k.weight", d, kv, s->k},
        {"blk.0.attn_v.weight", d, kv, s->v},
        {"blk.0.attn_output.weight", d, d, s->o},
        {"blk.0.ffn_norm.weight", d, 0, CLATTN_GGML_F32},
        {"blk.0.ffn_gate.weight", d, s->ff, s->gate},
        {"blk.0.ffn_up.weight", d, s->ff, s->up},
        {"blk.0.ffn_down.weight", s->ff, d, s->down},
        {"output.weight", d, s->vocab, s->out},
    };
    size_t count = sizeof(t) / sizeof(t[0]) - (s->out == NO_OUTPUT);
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u(&b, 3, 4);
    put_u(&b, count, 8);
    put_u(&b, 10, 8);
    put_str(&b, "general.architecture");
    put_u(&b, CLATTN_GGUF_STRING, 4);
    put_str(&b, "llama");
    put_kv_u32(&b, "llama.context_length", 64);
    put_kv_u32(&b, "llama.embedding_length", (uint32_t)d);
    put_kv_u32(&b, "llama.block_count", 1);
    put_kv_u32(&b, "llama.feed_forward_length", (uint32_t)s->ff);
    put_kv_u32(&b, "llama.attention.head_count", (uint32_t)s->heads);
    put_kv_u32(&b, "llama.attention.head_count_kv", (uint32_t)s->kv_heads);
    put_kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    put_kv_f32(&b, "llama.rope.freq_base", 10000.0f);
    put_kv_u32(&b, "llama.vocab_size", (uint32_t)s->vocab);
    uint64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        put_str(&b, t[i].name);
        put_u(&b, t[i].rows ? 2 : 1, 4);
        put_u(&b, t[i].k, 8);
        if (t[i].rows)
            put_u(&b, t[i].rows, 8);
        put_u(&b, t[i].type, 4);
        put_u(&b, offset, 8);
        offset += (row_bytes_of(t[i].type, t[i].k) * (t[i].rows ? t[i].rows : 1) + 31) / 32 * 32;
    }
    test_rng rng = {seed};
    while (b.size % 32)
        put_u(&b, 0, 1);
    b.data_start = b.size;
    for (size_t i = 0; i < count; i++) {
        while (b.size % 32)
            put_u(&b, 0, 1);
        put_random(&b, &rng, t[i].type, t[i].rows ? t[i].rows : 1, t[i].k, t[i].rows == 0);
    }
    return b;
}

/* A one-layer llama file of width D: token_embd.weight in embd_type, the layer's linear weights
 * in layer_type, output.weight in out_type (NO_OUTPUT: tied), norms F32. Returns its bytes. */
static bytes model_file(uint32_t embd_type, uint32_t layer_type, uint32_t out_type, size_t vocab,
                        uint64_t seed)
{
    file_spec s = spec_of(embd_type, layer_type, out_type, vocab);
    return spec_file(&s, seed);
}

/* The layers' file: the tied Q8_0 embedding, q and k Q8_0 beside an F16 v (q|k|v: a Q8_0 part
 * of 80 rows chained to an F16 part of 16), the attention's output F32 (64 rows of 256 bytes), gate|up
 * Q8_0 (256 rows of 68 bytes), down Q8_0 (64 rows of 136 bytes). */
static const file_spec layers_spec = {
    LAYERS_D,        LAYERS_FF,       LAYERS_HEADS,    LAYERS_KV_HEADS, VOCAB,
    CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, CLATTN_GGML_F16, CLATTN_GGML_F32,
    CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, NO_OUTPUT};

static char dir[512], tied_path[600], separate_path[600], wide_path[600], layers_path[600];

static void write_file(const char *path, const bytes *b)
{
    test_write_file(path, b->data, b->size);
}

static int files_setup(void **state)
{
    if (test_fixture_setup(state) != 0 ||
        test_temp_dir_create(dir, sizeof(dir), "clattn-llm-split-") != 0)
        return -1;
    snprintf(tied_path, sizeof(tied_path), "%s/tied_q8_0.gguf", dir);
    snprintf(separate_path, sizeof(separate_path), "%s/separate_q4_1.gguf", dir);
    snprintf(wide_path, sizeof(wide_path), "%s/wide_q4_1.gguf", dir);
    snprintf(layers_path, sizeof(layers_path), "%s/layers_q8_0_f32.gguf", dir);
    bytes tied = model_file(CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, NO_OUTPUT, VOCAB, 1);
    bytes separate =
        model_file(CLATTN_GGML_F16, CLATTN_GGML_Q4_1, CLATTN_GGML_Q4_1, VOCAB, 2);
    bytes wide = model_file(CLATTN_GGML_F16, CLATTN_GGML_Q4_1, CLATTN_GGML_Q4_1, WIDE_VOCAB, 3);
    write_file(tied_path, &tied);
    write_file(separate_path, &separate);
    bytes layers = spec_file(&layers_spec, 4);
    write_file(wide_path, &wide);
    write_file(layers_path, &layers);
    free(tied.data), free(separate.data), free(wide.data), free(layers.data);
    return 0;
}

static int files_teardown(void **state)
{
    test_temp_dir_remove(dir);
    return test_fixture_teardown(state);
}

/* A context whose largest allocation is `cap` bytes (0: the device's own). */
static clattn_context *context_capped(uint64_t cap)
{
    char value[32];
    snprintf(value, sizeof(value), "%llu", (unsigned long long)cap);
    if (cap)
        setenv(ENV_CAP, value, 1);
    clattn_context *ctx = test_context_create(NULL);
    unsetenv(ENV_CAP);
    assert_non_null(ctx);
    clattn_device_info info;
    assert_int_equal(clattn_context_device_info(ctx, &info), CLATTN_OK);
    if (cap)
        assert_int_equal(info.max_alloc_bytes, cap);
    return ctx;
}

static clattn_llm_model *load(clattn_context *ctx, const char *path)
{
    clattn_llm_model *m = NULL;
    if (clattn__llm_model_load(ctx, "test", path, &m) != CLATTN_OK)
        fail_msg("loading %s: %s", path, clattn_last_error(NULL));
    return m;
}

/* ---- the split's numbers ---- */

static void split_parts_are_the_fewest_within_the_limit(void **state)
{
    (void)state;
    assert_int_equal(clattn__llm_split_parts(1000, 34, 16000), 3);
    assert_int_equal(clattn__llm_split_parts(1000, 34, 34000), 1);
    assert_int_equal(clattn__llm_split_parts(1000, 34, 33999), 2);
    assert_int_equal(clattn__llm_split_parts(1000, 34, 33), 0); /* one row over the limit */
    assert_int_equal(clattn__llm_split_parts(1, 34, 34), 1);
    assert_int_equal(clattn__llm_split_parts(152064, 2304, (uint64_t)256 << 20), 2);
    test_rng rng = {7};
    for (int i = 0; i < 2000; i++) {
        size_t rows = 1 + test_rng_next(&rng) % 5000, row = 1 + test_rng_next(&rng) % 300;
        uint64_t cap = row + test_rng_next(&rng) % (rows * row + 1);
        size_t parts = clattn__llm_split_parts(rows, row, cap), fit = cap / row;
        assert_true(parts >= 1);
        assert_true((parts - 1) * fit < rows); /* one part fewer would not hold them */
        size_t expect = 0;
        for (size_t p = 0; p < parts; p++) {
            size_t first = clattn__llm_split_first(rows, parts, p);
            size_t next = clattn__llm_split_first(rows, parts, p + 1);
            assert_int_equal(first, expect);
            assert_true(next > first && next - first <= fit);
            assert_true(next - first >= rows / parts && next - first <= rows / parts + 1);
            expect = next;
        }
        assert_int_equal(expect, rows);
    }
}

/* ---- split runs give the unsplit bytes ---- */

/* The ids run, on both sides of the parts' boundaries (332/333 and 665/666 of 3 parts, 499/500
 * of 2). */
static const int32_t prompt[6] = {0, 332, 333, 999, 666, 500};
#define SEQS 4 /* a batch's last rows: logits in chunks of 3 and 1 */
static const int32_t batch[SEQS][3] = {
    {665, 1, 499}, {998, 332, 5}, {501, 250, 750}, {999, 333, 666}};
static const int32_t next_ids[SEQS] = {333, 999, 665, 500};

typedef struct outputs {
    float teacher[6 * VOCAB], last[SEQS * VOCAB], step[SEQS * VOCAB];
    size_t parts, logits_rows;
    size_t weights;           /* buffers of quantised weights: every chain's parts */
    size_t largest;           /* bytes of the largest of them */
    size_t lin1_parts, lin2_parts; /* of the feed-forward's gate|up and down chains */
} outputs;

static size_t chain_parts(const clattn_gemm_quant *q)
{
    size_t parts = 0;
    for (; q; q = q->next)
        parts++;
    return parts;
}

/* Asserts that `call` succeeded, printing the library's message when it did not. */
#define ok(call) assert_status_msg(NULL, (call), CLATTN_OK, NULL)

/* The model at path run on the prompt, then on the batch's first `seqs` sequences (3 tokens,
 * then 1 each). */
static void run(clattn_context *ctx, const char *path, size_t seqs, outputs *o)
{
    clattn_llm_model *m = load(ctx, path);
    assert_int_equal(m->cfg.vocab, VOCAB);
    ok(clattn__llm_logits(m, "test", prompt, 6, o->teacher));
    clattn_kv_state *kv = NULL;
    size_t slots[SEQS];
    ok(clattn__llm_state_create(m, "test", seqs, 8, false, &kv));
    for (size_t s = 0; s < seqs; s++)
        ok(clattn__kv_state_acquire(kv, "test", &slots[s]));
    ok(clattn__llm_step(m, "test", kv, slots, seqs, 3, &batch[0][0], false, o->last));
    ok(clattn__llm_step(m, "test", kv, slots, seqs, 1, next_ids, false, o->step));
    o->parts = m->output_split.count;
    o->logits_rows = m->logits_rows;
    o->weights = m->quant.count;
    o->largest = 0;
    for (size_t i = 0; i < m->quant.count; i++) {
        const clattn_qweight *w = &m->quant.weights[i]->w;
        if (w->n * w->row_bytes > o->largest)
            o->largest = w->n * w->row_bytes;
    }
    const clattn_ffn *ffn = &m->stack.weights.layers[0].ffn;
    o->lin1_parts = chain_parts(ffn->lin1.quant);
    o->lin2_parts = chain_parts(ffn->lin2.quant);
    assert_int_equal(chain_parts(m->output_split.first), m->output_split.count);
    clattn__kv_state_destroy(&kv);
    clattn__llm_model_free(&m);
}

static void same_bytes(const float *a, const float *b, size_t rows, const char *what)
{
    for (size_t r = 0; r < rows; r++)
        if (memcmp(a + r * VOCAB, b + r * VOCAB, VOCAB * sizeof(float)) != 0)
            fail_msg("%s, row %zu: the split run's logits differ from the unsplit run's (max "
                     "difference %g)",
                     what, r, test_max_abs_diff(a + r * VOCAB, b + r * VOCAB, VOCAB));
}

/* What a split run should hold under its lowered limit. */
typedef struct split_case {
    const char *path;
    uint64_t cap;
    size_t parts;       /* of the output projection */
    size_t logits_rows; /* rows of logits per chunk */
    size_t whole_weights; /* buffers of quantised weights unsplit: the layer's 4 (5 where q|k|v's
                           * parts differ in type), 1 output */
    size_t weights;       /* buffers of quantised weights under the limit */
    size_t lin1_parts, lin2_parts;
    size_t seqs; /* sequences of the batch run */
} split_case;

static void check_split(clattn_context *whole, const split_case *c)
{
    outputs *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    assert_non_null(a), assert_non_null(b);
    run(whole, c->path, c->seqs, a);
    assert_int_equal(a->parts, 1);
    assert_int_equal(a->weights, c->whole_weights);
    assert_int_equal(a->lin1_parts, 1), assert_int_equal(a->lin2_parts, 1);
    assert_true(a->logits_rows >= 6);
    clattn_context *capped = context_capped(c->cap);
    run(capped, c->path, c->seqs, b);
    clattn_context_destroy(&capped);
    assert_int_equal(b->parts, c->parts);
    assert_int_equal(b->logits_rows, c->logits_rows);
    assert_int_equal(b->weights, c->weights);
    assert_int_equal(b->lin1_parts, c->lin1_parts);
    assert_int_equal(b->lin2_parts, c->lin2_parts);
    assert_true(b->largest <= c->cap);
    same_bytes(a->teacher, b->teacher, 6, "teacher-forced prompt");
    same_bytes(a->last, b->last, c->seqs, "a batch's last rows");
    same_bytes(a->step, b->step, c->seqs, "a decode step");
    free(a), free(b);
}

/* 12000 bytes: 3 parts of 1000 34-byte Q8_0 rows, 2 of 20-byte Q4_1 rows; 3 rows of logits
 * (4000 bytes each). The rotary table (256 positions × 4 pairs, 8192 bytes) and the layers'
 * weights (gate|up: 128 rows, 4352 bytes) fit. */
static void split_output_gives_the_unsplit_bytes(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    /* Under oclgrind the layers' case only (below), which splits the tied output too: each
     * attention launch there costs about a second. */
    if (test_small_mode())
        return;
    check_split(ctx, &(split_case){tied_path, 12000, 3, 3, 5, 4 + 3, 1, 1, SEQS});
    check_split(ctx, &(split_case){separate_path, 12000, 2, 3, 5, 4 + 2, 1, 1, SEQS});
}

/* 8500 bytes: the linear weights of the layers' file split — q|k|v, whose parts differ in type,
 * a chain of its own two (Q8_0 q|k, 80 rows of 68 bytes, and F16 v, 16 rows of 128 bytes), each
 * within the limit; the attention's output (F32) in 2, gate|up in 3 (85, 85
 * and 86 rows: the middle part holds gate's last rows and up's first), down in 2, the tied
 * output projection in 8 —, and the logits run 2 rows at a time. A batch of 2 sequences: the
 * feed-forward's scratch for 3 tokens each (6 rows of 256 floats) fits the limit (its row
 * blocks are not fitted to the limit). SwiGLU fused into a gate|up layer of one buffer
 * (nn/ffn_swiglu.h) is compared here with a split gate|up layer, which runs unfused. */
static void split_layers_give_the_unsplit_bytes(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    check_split(ctx, &(split_case){layers_path, LAYERS_CAP, 8, 2, 6, 2 + 2 + 3 + 2 + 8, 3, 2, 2});
}

/* The rows of a chain are its parts' when every part has the same width (mha.c's check). */
static void chain_rows_are_the_parts_rows(void **state)
{
    (void)state;
    clattn_gemm_quant parts[3] = {{.w = {.n = 5, .k = 64}},
                                  {.w = {.n = 7, .k = 64}},
                                  {.w = {.n = 1, .k = 64}}};
    parts[0].next = &parts[1], parts[1].next = &parts[2];
    assert_int_equal(clattn__gemm_quant_rows(&parts[0], 64), 13);
    assert_int_equal(clattn__gemm_quant_rows(&parts[1], 64), 8);
    assert_int_equal(clattn__gemm_quant_rows(&parts[2], 64), 1);
    assert_int_equal(clattn__gemm_quant_rows(NULL, 64), 0);
    parts[2].w.k = 32; /* a part of another width */
    assert_int_equal(clattn__gemm_quant_rows(&parts[0], 64), 0);
    parts[2].w.k = 64, parts[0].w.k = 32;
    assert_int_equal(clattn__gemm_quant_rows(&parts[0], 64), 0);
}

/* The half float h as a float (normal numbers and zeros: what the files hold). */
static float half_value(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v = e ? (float)(1024 + mant) / 1024.0f : 0.0f;
    for (int i = 15; i < (int)e; i++)
        v *= 2.0f;
    for (int i = (int)e; i < 15; i++)
        v /= 2.0f;
    return (h & 0x8000) ? -v : v;
}

/* Row `id` of the file's token embedding, dequantised here (Q8_0: d·q, exact in float32; F16). */
static void embedding_row(const bytes *file, uint32_t type, int32_t id, float *row)
{
    /* token_embd.weight is the first tensor. */
    const unsigned char *p = file->data + file->data_start + (size_t)id * row_bytes_of(type, D);
    for (size_t j = 0; j < D; j += 32) {
        if (type == CLATTN_GGML_Q8_0) {
            const unsigned char *blk = p + j / 32 * 34;
            float d = half_value((uint16_t)(blk[0] | blk[1] << 8));
            for (int i = 0; i < 32; i++)
                row[j + i] = d * (float)(int8_t)blk[2 + i];
        } else {
            for (int i = 0; i < 32; i++)
                row[j + i] = half_value((uint16_t)(p[2 * (j + i)] | p[2 * (j + i) + 1] << 8));
        }
    }
}

static void gathered_rows_are_the_file_values(void **state)
{
    (void)state;
    clattn_context *capped = context_capped(12000);
    const struct {
        const char *path;
        uint32_t type; /* of token_embd.weight */
    } files[] = {{tied_path, CLATTN_GGML_Q8_0}, {separate_path, CLATTN_GGML_F16}};
    for (size_t f = 0; f < 2; f++) {
        /* The bytes files_setup wrote. */
        bytes file =
            f == 0 ? model_file(CLATTN_GGML_Q8_0, CLATTN_GGML_Q8_0, NO_OUTPUT, VOCAB, 1)
                   : model_file(CLATTN_GGML_F16, CLATTN_GGML_Q4_1, CLATTN_GGML_Q4_1, VOCAB, 2);
        clattn_llm_model *m = load(capped, files[f].path);
        assert_non_null(m->embd);
        float got[6 * D], want[6 * D];
        assert_int_equal(clattn__llm_embed_rows(m->g, "test", m->embd, prompt, 6, got), CLATTN_OK);
        for (int r = 0; r < 6; r++)
            embedding_row(&file, files[f].type, prompt[r], want + r * D);
        assert_memory_equal(got, want, sizeof(got));
        clattn__llm_model_free(&m);
        free(file.data);
    }
    clattn_context_destroy(&capped);
}

/* ---- refusals ---- */

static void over_the_limit_is_refused_with_numbers(void **state)
{
    (void)state;
    /* A stacked layer weight under a limit its rows fit: gate|up, 128 rows of 34 bytes, in 2
     * parts of 64 rows under 4000 bytes (the model loads; it runs in
     * split_layers_give_the_unsplit_bytes). */
    clattn_context *ctx = context_capped(4000);
    clattn_llm_model *m = load(ctx, tied_path);
    assert_int_equal(chain_parts(m->stack.weights.layers[0].ffn.lin1.quant), 2);
    assert_int_equal(m->stack.weights.layers[0].ffn.lin1.quant->w.n, 64);
    clattn__llm_model_free(&m);
    clattn_context_destroy(&ctx);

    /* One row of logits (3000 floats, 12000 bytes) over 10000: the wide model loads (6 parts of
     * the output projection) and runs without logits, but no step with logits runs. */
    ctx = context_capped(10000);
    m = load(ctx, wide_path);
    assert_int_equal(m->output_split.count, 6);
    float *logits = malloc(6 * WIDE_VOCAB * sizeof(float));
    assert_non_null(logits);
    assert_status_msg(NULL, clattn__llm_logits(m, "test", prompt, 6, logits),
                      CLATTN_ERROR_TOO_LARGE,
                      "one row of logits (3000 floats) is more than the device's largest "
                      "allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of 10000 bytes");
    clattn_kv_state *kv = NULL;
    size_t slot;
    assert_int_equal(clattn__llm_state_create(m, "test", 1, 8, false, &kv), CLATTN_OK);
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
    assert_int_equal(clattn__llm_step(m, "test", kv, &slot, 1, 6, prompt, true, NULL), CLATTN_OK);
    clattn__kv_state_destroy(&kv);
    free(logits);
    clattn__llm_model_free(&m);

    /* One row of a weight over the limit (called here: a model would stop at its first
     * weight): 34-byte Q8_0 rows over 30 bytes. */
    clattn_gguf *g = NULL;
    assert_int_equal(clattn__gguf_open("test", tied_path, &g), CLATTN_OK);
    clattn_context_destroy(&ctx);
    ctx = context_capped(30);
    clattn_llm_quant q = {ctx, "test", g, NULL, NULL, 0, 0};
    /* A stacked layer weight whose row is over the limit, named with its parts. */
    const char *const stacked[2] = {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"};
    const size_t stacked_rows[2] = {FF, FF};
    clattn_gemm_quant unset = {0};
    const clattn_gemm_quant *chain = &unset; /* set to NULL on the failure */
    assert_status_msg(NULL, clattn__llm_quant_weight(&q, stacked, stacked_rows, 2, D, &chain),
                      CLATTN_ERROR_TOO_LARGE,
                      "blk.0.ffn_gate.weight | blk.0.ffn_up.weight: one row of 34 bytes is more "
                      "than the device's largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of 30 "
                      "bytes");
    assert_null(chain);
    assert_int_equal(q.count, 0);
    clattn_llm_split split = {NULL, 5};
    assert_status_msg(NULL, clattn__llm_quant_split(&q, "token_embd.weight", VOCAB, D, &split),
                      CLATTN_ERROR_TOO_LARGE,
                      "token_embd.weight: one row of 34 bytes is more than the device's largest "
                      "allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of 30 bytes");
    assert_int_equal(split.count, 0);
    assert_null(split.first);
    assert_int_equal(q.count, 0);
    clattn__llm_quant_release(&q);
    clattn__gguf_close(&g);
    clattn_context_destroy(&ctx);
}

static void malformed_limit_is_refused(void **state)
{
    clattn_context *ctx = ((test_fixture *)*state)->ctx;
    clattn_device_info own;
    assert_int_equal(clattn_context_device_info(ctx, &own), CLATTN_OK);
    static const char *const bad[] = {"abc", "0", "12x", "-5", " 16", "",
                                      "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv(ENV_CAP, bad[i], 1);
        clattn_context *c = NULL;
        clattn_status status = clattn_context_create(&c, NULL);
        unsetenv(ENV_CAP);
        if (!*bad[i]) { /* empty: no change */
            assert_int_equal(status, CLATTN_OK);
            clattn_device_info info;
            assert_int_equal(clattn_context_device_info(c, &info), CLATTN_OK);
            assert_int_equal(info.max_alloc_bytes, own.max_alloc_bytes);
            clattn_context_destroy(&c);
            continue;
        }
        char want[96];
        snprintf(want, sizeof(want), ENV_CAP "='%s' is not a positive number of bytes", bad[i]);
        assert_int_equal(status, CLATTN_ERROR_INVALID_ARGUMENT);
        assert_null(c);
        if (!strstr(clattn_last_error(NULL), want))
            fail_msg("'%s': the error \"%s\" does not say \"%s\"", bad[i],
                     clattn_last_error(NULL), want);
    }
    /* Above the device's own limit: never raised. */
    char above[32];
    snprintf(above, sizeof(above), "%llu", (unsigned long long)own.max_alloc_bytes + 1);
    setenv(ENV_CAP, above, 1);
    clattn_context *c = test_context_create(NULL);
    unsetenv(ENV_CAP);
    assert_non_null(c);
    clattn_device_info info;
    assert_int_equal(clattn_context_device_info(c, &info), CLATTN_OK);
    assert_int_equal(info.max_alloc_bytes, own.max_alloc_bytes);
    clattn_context_destroy(&c);
}

int main(void)
{
    test_require_device();
    unsetenv(ENV_CAP);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_parts_are_the_fewest_within_the_limit),
        cmocka_unit_test(chain_rows_are_the_parts_rows),
        cmocka_unit_test(split_output_gives_the_unsplit_bytes),
        cmocka_unit_test(split_layers_give_the_unsplit_bytes),
        cmocka_unit_test(gathered_rows_are_the_file_values),
        cmocka_unit_test(over_the_limit_is_refused_with_numbers),
        cmocka_unit_test(malformed_limit_is_refused),
    };
    const char *only = getenv("CLATTN_TEST_FILTER");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, files_setup, files_teardown);
}
