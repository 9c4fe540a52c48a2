/*
 * The block stack (src/nn/block_stack.c) on its internal entries, for what the public encoder
 * and decoder do not reach: a causal stack without cross-attention decoding through a
 * key/value state that has no memory, and a cross-attending stack with the encoder's gated,
 * bias-free layers (the encoder's and the decoder's layers are one code); RMSNorm (the kernel
 * against torch.nn.RMSNorm and tests/ref; Llama-, Qwen3- (per-head q/k RMSNorm) and Gemma-2-style
 * (attention soft-capping) stacks against PyTorch in float64: tests/golden/block from
 * tools/gen_block_golden.py). The public wrappers' bytes are tested by
 * test_encoder, test_gated and test_decoder.
 */
#include "common/hf_golden.h"
#include "common/test_util.h"
#include "nn/block_stack.h"
#include "ops/elementwise.h"
#include "ref/ref_encoder.h"
#include "runtime/tensor_internal.h"

#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 7, S = 5, E = 16, HEADS = 4, KV_HEADS = 2, DK = 4, FF = 24, LAYERS = 2 };

/* Pre-norm, bias-free, gated (SwiGLU), grouped-query attention with RoPE. */
static clattn_block_spec small_spec(bool cross)
{
    clattn_block_spec s;
    memset(&s, 0, sizeof(s));
    s.num_layers = LAYERS, s.d_model = E;
    s.norm = CLATTN_NORM_LAYER, s.norm_first = true, s.final_norm = true, s.norm_eps = 1e-5f;
    s.nhead = HEADS, s.kv_heads = KV_HEADS, s.head_dim_qk = DK, s.head_dim_v = DK;
    s.rope_theta = 10000.0f;
    s.cross_attention = cross;
    s.d_ff = FF, s.ffn_gated = true, s.activation = CLATTN_ACT_SILU;
    return s;
}

/* Runs rows x [B, n, E] (host) through the stack: whole sequences (kv NULL; causal only as the
 * spec says) or the next n tokens of the state; cross-attention over memory [B, S, E] without a
 * state. Returns the output [B, n, E] (malloc'd). */
static float *run_rows(clattn_context *ctx, clattn_block_stack *s, clattn_kv_state *kv,
                       const float *x, size_t n, const clattn_tensor *memory)
{
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, x);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){B, n, E}, NULL);
    clattn_block_run run;
    memset(&run, 0, sizeof(run));
    run.tokens = B * n;
    run.x = tx->mem;
    run.self.batch = B, run.self.seq_q = n, run.self.seq_k = n;
    run.cross.batch = B, run.cross.seq_q = n;
    if (memory) {
        run.cross.seq_k = S;
        run.cross.key = run.cross.value = memory->mem;
    }
    run.kv = kv;
    run.out = ty->mem;
    run.function = "test";
    assert_int_equal(clattn__block_stack_run(s, &run), CLATTN_OK);
    float *out = test_tensor_to_host(ty);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
    return out;
}

/* Rows t0 .. t0 + n - 1 of every sequence of x [B, T, E]. */
static void rows_of(const float *x, size_t t0, size_t n, float *part)
{
    for (size_t b = 0; b < B; b++)
        memcpy(part + b * n * E, x + (b * T + t0) * E, n * E * sizeof(float));
}

/* A causal stack without cross-attention (a decoder-only model's) steps through a key/value
 * state with no memory: a prompt of 3 tokens, then one token a step, each equal to the whole
 * causal pass at its positions; the state has no cross memory and refuses one. */
static void causal_stack_steps_through_a_state_without_memory(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_block_spec spec = small_spec(false);
    spec.causal = true;
    clattn_block_stack s;
    assert_int_equal(clattn__block_stack_init(ctx, "test", &spec, &s), CLATTN_OK);
    assert_int_equal(clattn__block_stack_init_random(&s, "test", "test", 3, NULL, NULL),
                     CLATTN_OK);
    float x[B * T * E], part[B * T * E];
    test_fill_uniform(x, B * T * E, 4, -1.0f, 1.0f);
    float *full = run_rows(ctx, &s, NULL, x, T, NULL);

    clattn_kv_state *kv = NULL;
    assert_int_equal(clattn__kv_state_create(ctx, "test", LAYERS, B, T, KV_HEADS * DK,
                                             KV_HEADS * DK, false, false, &kv),
                     CLATTN_OK);
    assert_null(kv->memory_k);
    assert_status_msg(ctx, clattn__kv_state_alloc_memory(kv, "test", S, NULL, 0),
                      CLATTN_ERROR_INVALID_ARGUMENT, "the layers have no cross-attention");
    for (size_t t0 = 0, n = 3; t0 < T; t0 += n, n = 1) {
        rows_of(x, t0, n, part);
        float *got = run_rows(ctx, &s, kv, part, n, NULL);
        for (size_t b = 0; b < B; b++)
            assert_close(got + b * n * E, full + (b * T + t0) * E, n * E, 1e-5);
        free(got);
        assert_int_equal(kv->lengths[0], t0 + n);
        assert_int_equal(kv->lengths[1], t0 + n);
    }
    free(full);
    clattn__kv_state_destroy(&kv);
    assert_null(kv);
    clattn__block_stack_release(&s);
}

/* Random weights by name, with the cross-attention's output projection zero when `silent`. */
typedef struct zeroing_provider {
    clattn_random_weights random;
    bool silent;
    float zeros[E * HEADS * DK];
    clattn_host_tensor zero;
} zeroing_provider;

static const clattn_host_tensor *provide(void *user, const char *name, int ndim,
                                         const size_t *shape)
{
    zeroing_provider *p = user;
    if (p->silent && strstr(name, "multihead_attn.out_proj.weight")) {
        memset(&p->zero, 0, sizeof(p->zero));
        p->zero.data = p->zeros;
        p->zero.ndim = ndim;
        for (int d = 0; d < ndim; d++)
            p->zero.shape[d] = shape[d];
        return &p->zero;
    }
    return clattn__random_weight(&p->random, name, ndim, shape);
}

/* A cross-attending stack whose layers are the encoder's gated, bias-free, pre-norm layers:
 * with its cross-attention's output projection zero, every x + CA(norm2(x)) leaves x as it is,
 * so the stack gives the bytes of the same stack without cross-attention (the other weights
 * are the same by name: self_attn, linear1_gate, linear1, linear2; norm3 then stands where
 * norm2 stood, both ones and zeros); with it, the memory changes the result. */
static void cross_attention_adding_nothing_leaves_the_self_attention_stack(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    float x[B * T * E], mem[B * S * E];
    test_fill_uniform(x, B * T * E, 5, -1.0f, 1.0f);
    test_fill_uniform(mem, B * S * E, 6, -1.0f, 1.0f);
    clattn_tensor *memory = test_tensor_from(ctx, 3, (size_t[]){B, S, E}, mem);
    float *out[3];
    for (int run = 0; run < 3; run++) { /* no cross-attention; silent; with its projection */
        clattn_block_spec spec = small_spec(run > 0);
        clattn_block_stack s;
        assert_int_equal(clattn__block_stack_init(ctx, "test", &spec, &s), CLATTN_OK);
        zeroing_provider p;
        memset(&p, 0, sizeof(p));
        p.random.seed = 8;
        p.silent = run == 1;
        clattn_weight_loader loader = {ctx, "test", provide, &p, NULL, NULL};
        assert_int_equal(clattn__block_weights_load(&loader, &spec, &s.weights), CLATTN_OK);
        assert_int_equal(s.weights.layers[0].ffn.gated, true);
        assert_null(s.weights.layers[0].ffn.b1);
        s.loaded = true;
        out[run] = run_rows(ctx, &s, NULL, x, T, run ? memory : NULL);
        clattn__random_weights_free(&p.random);
        clattn__block_stack_release(&s);
    }
    assert_memory_equal(out[0], out[1], B * T * E * sizeof(float));
    assert_true(test_max_abs_diff(out[0], out[2], B * T * E) > 1e-3);
    for (int run = 0; run < 3; run++)
        free(out[run]);
    clattn_tensor_destroy(&memory);
}

/* Runs `batch` rows x [batch, n, E] (host) as the next n tokens of the state's sequences
 * `slots` (NULL: all) at `positions` (NULL: their lengths); *out receives [batch, n, E]
 * (malloc'd) on success. */
static clattn_status step_seqs(clattn_context *ctx, clattn_block_stack *s, clattn_kv_state *kv,
                               const float *x, size_t batch, size_t n, const size_t *slots,
                               const size_t *positions, size_t position_offset, float **out)
{
    clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){batch, n, E}, x);
    clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){batch, n, E}, NULL);
    clattn_block_run run;
    memset(&run, 0, sizeof(run));
    run.tokens = batch * n, run.x = tx->mem, run.out = ty->mem, run.function = "test";
    run.self.batch = batch, run.self.seq_q = n;
    run.kv = kv, run.slots = slots, run.positions = positions;
    run.position_offset = position_offset;
    clattn_status status = clattn__block_stack_run(s, &run);
    *out = status == CLATTN_OK ? test_tensor_to_host(ty) : NULL;
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
    return status;
}

static clattn_kv_state *new_state(clattn_context *ctx, size_t batch, bool half)
{
    clattn_kv_state *kv = NULL;
    assert_int_equal(clattn__kv_state_create(ctx, "test", LAYERS, batch, T, KV_HEADS * DK,
                                             KV_HEADS * DK, half, false, &kv),
                     CLATTN_OK);
    return kv;
}

/* A causal stack with RoPE (float cache), or with ALiBi (half cache). */
static void init_causal_stack(clattn_context *ctx, clattn_block_stack *s, bool alibi)
{
    clattn_block_spec spec = small_spec(false);
    spec.causal = true;
    if (alibi)
        spec.rope_theta = 0.0f, spec.alibi = true;
    assert_int_equal(clattn__block_stack_init(ctx, "test", &spec, s), CLATTN_OK);
    assert_int_equal(clattn__block_stack_init_random(s, "test", "test", 12, NULL, NULL),
                     CLATTN_OK);
}

/* Three sequences of their own lengths in one state — prompts of 2, 4 and 1 tokens run one
 * sequence at a time, then steps of all three together — give each token the bytes that the
 * sequence decoded alone in a state of its own gives it; a step a sequence has no room for is
 * refused and changes nothing. With RoPE (float cache) and ALiBi (half cache). */
static void sequences_of_their_own_lengths_equal_each_alone(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    enum { SEQS = 3, STEPS = 3 };
    const size_t prompt[SEQS] = {2, 4, 1};
    float x[SEQS][T * E];
    for (int q = 0; q < SEQS; q++)
        test_fill_uniform(x[q], T * E, 20 + (uint64_t)q, -1.0f, 1.0f);
    for (int alibi = 0; alibi < 2; alibi++) {
        clattn_block_stack s;
        init_causal_stack(ctx, &s, alibi);
        /* Alone: each sequence in a state of its own, one token a step after its prompt. */
        float *alone[SEQS][T];
        memset(alone, 0, sizeof(alone));
        for (int q = 0; q < SEQS; q++) {
            clattn_kv_state *kv = new_state(ctx, 1, alibi);
            float *out;
            assert_int_equal(step_seqs(ctx, &s, kv, x[q], 1, prompt[q], NULL, NULL, 0, &out),
                             CLATTN_OK);
            for (size_t t = 0; t < prompt[q]; t++) {
                alone[q][t] = malloc(E * sizeof(float));
                memcpy(alone[q][t], out + t * E, E * sizeof(float));
            }
            free(out);
            for (size_t t = prompt[q]; t < prompt[q] + STEPS && t < T; t++)
                assert_int_equal(step_seqs(ctx, &s, kv, x[q] + t * E, 1, 1, NULL, NULL, 0,
                                           &alone[q][t]),
                                 CLATTN_OK);
            clattn__kv_state_destroy(&kv);
        }
        /* Together. */
        clattn_kv_state *kv = new_state(ctx, SEQS, alibi);
        for (int q = 0; q < SEQS; q++) {
            size_t slot, which = (size_t)q;
            assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
            assert_int_equal(slot, (size_t)q);
            float *out;
            assert_int_equal(step_seqs(ctx, &s, kv, x[q], 1, prompt[q], &which, NULL, 0, &out),
                             CLATTN_OK);
            assert_memory_equal(out + (prompt[q] - 1) * E, alone[q][prompt[q] - 1],
                                E * sizeof(float));
            free(out);
        }
        const size_t all[SEQS] = {0, 1, 2};
        for (size_t k = 0; k < STEPS; k++) {
            float rows[SEQS * E], *out;
            for (int q = 0; q < SEQS; q++)
                memcpy(rows + q * E, x[q] + (prompt[q] + k) * E, E * sizeof(float));
            assert_int_equal(step_seqs(ctx, &s, kv, rows, SEQS, 1, all, NULL, 0, &out),
                             CLATTN_OK);
            for (int q = 0; q < SEQS; q++) {
                assert_int_equal(kv->lengths[q], prompt[q] + k + 1);
                assert_memory_equal(out + q * E, alone[q][prompt[q] + k], E * sizeof(float));
            }
            free(out);
        }
        /* Sequence 1 is full (4 + 3 = T): one more step is refused as a whole. */
        float rows[SEQS * E] = {0}, *out;
        assert_status_msg(ctx, step_seqs(ctx, &s, kv, rows, SEQS, 1, all, NULL, 0, &out),
                          CLATTN_ERROR_OUT_OF_RANGE, "sequence 1 holds 7 of its 7");
        assert_int_equal(kv->lengths[0], 5);
        assert_int_equal(kv->lengths[2], 4);
        clattn__kv_state_destroy(&kv);
        for (int q = 0; q < SEQS; q++)
            for (size_t t = 0; t < T; t++)
                free(alone[q][t]);
        clattn__block_stack_release(&s);
    }
}

/* Per-sequence RoPE positions: two sequences at positions 0 and 5 from their first token give
 * the bytes of each run alone with position_offset 0 and 5; both at 3 give those of a run of
 * the two at one length with position_offset 3 (attended in one call). */
static void positions_per_sequence(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_block_stack s;
    init_causal_stack(ctx, &s, false);
    float x[2 * 4 * E];
    test_fill_uniform(x, 2 * 4 * E, 30, -1.0f, 1.0f);
    const size_t slots[2] = {0, 1}, apart[2] = {0, 5}, same[2] = {3, 3};
    float *together, *alone[2], *one_call;
    clattn_kv_state *kv = new_state(ctx, 2, false);
    size_t slot;
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
    assert_int_equal(step_seqs(ctx, &s, kv, x, 2, 4, slots, apart, 0, &together), CLATTN_OK);
    clattn__kv_state_destroy(&kv);
    for (int q = 0; q < 2; q++) {
        kv = new_state(ctx, 1, false);
        assert_int_equal(step_seqs(ctx, &s, kv, x + q * 4 * E, 1, 4, NULL, NULL, apart[q],
                                   &alone[q]),
                         CLATTN_OK);
        assert_memory_equal(together + q * 4 * E, alone[q], 4 * E * sizeof(float));
        clattn__kv_state_destroy(&kv);
        free(alone[q]);
    }
    free(together);
    kv = new_state(ctx, 2, false);
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &slot), CLATTN_OK);
    assert_int_equal(step_seqs(ctx, &s, kv, x, 2, 4, slots, same, 0, &together), CLATTN_OK);
    clattn__kv_state_clear(kv);
    assert_int_equal(step_seqs(ctx, &s, kv, x, 2, 4, NULL, NULL, 3, &one_call), CLATTN_OK);
    assert_memory_equal(together, one_call, 2 * 4 * E * sizeof(float));
    free(together), free(one_call);
    clattn__kv_state_destroy(&kv);
    clattn__block_stack_release(&s);
}

/* Slots: a sequence truncated to a prefix and decoded again gives the same bytes; a copy of a
 * sequence decodes as the sequence does; beam search's reorder moves lengths with the rows; a
 * released slot is acquired again, empty; what names no slot in use is refused. */
static void slots_truncate_copy_reorder_and_reuse(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    clattn_block_stack s;
    init_causal_stack(ctx, &s, false);
    float x[T * E];
    test_fill_uniform(x, T * E, 40, -1.0f, 1.0f);
    clattn_kv_state *kv = new_state(ctx, 2, false);
    size_t a, b, c;
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &a), CLATTN_OK);
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &b), CLATTN_OK);
    assert_status_msg(ctx, clattn__kv_state_acquire(kv, "test", &c), CLATTN_ERROR_OUT_OF_RANGE,
                      "all 2 sequences of the key/value state are in use");
    float *first, *again, *out;
    assert_int_equal(step_seqs(ctx, &s, kv, x, 1, 5, &a, NULL, 0, &out), CLATTN_OK);
    free(out);
    assert_int_equal(step_seqs(ctx, &s, kv, x + 5 * E, 1, 1, &a, NULL, 0, &first), CLATTN_OK);
    /* truncated to 3 tokens, then tokens 3 and 4 again and token 5 */
    assert_status_msg(ctx, clattn__kv_state_truncate(kv, "test", a, 7),
                      CLATTN_ERROR_INVALID_ARGUMENT, "holds 6 tokens: it cannot be truncated to 7");
    assert_int_equal(clattn__kv_state_truncate(kv, "test", a, 3), CLATTN_OK);
    assert_int_equal(kv->lengths[a], 3);
    assert_int_equal(step_seqs(ctx, &s, kv, x + 3 * E, 1, 2, &a, NULL, 0, &out), CLATTN_OK);
    free(out);
    assert_int_equal(step_seqs(ctx, &s, kv, x + 5 * E, 1, 1, &a, NULL, 0, &again), CLATTN_OK);
    assert_memory_equal(first, again, E * sizeof(float));
    free(first), free(again);
    /* b becomes a copy of a (6 tokens); both decode token 6 alike */
    assert_int_equal(clattn__kv_state_copy(kv, "test", a, b), CLATTN_OK);
    assert_int_equal(kv->lengths[b], 6);
    float rows[2 * E];
    memcpy(rows, x + 6 * E, E * sizeof(float));
    memcpy(rows + E, x + 6 * E, E * sizeof(float));
    const size_t both[2] = {0, 1};
    assert_int_equal(step_seqs(ctx, &s, kv, rows, 2, 1, both, NULL, 0, &out), CLATTN_OK);
    assert_memory_equal(out, out + E, E * sizeof(float));
    free(out);
    /* reorder with lengths 3 and 7: the rows and their lengths change places */
    assert_int_equal(clattn__kv_state_truncate(kv, "test", a, 3), CLATTN_OK);
    assert_int_equal(clattn__kv_state_truncate(kv, "test", b, 5), CLATTN_OK);
    assert_int_equal(step_seqs(ctx, &s, kv, x + 3 * E, 1, 1, &a, NULL, 0, &first), CLATTN_OK);
    assert_int_equal(clattn__kv_state_truncate(kv, "test", a, 3), CLATTN_OK);
    const size_t swap[2] = {1, 0};
    assert_int_equal(clattn__kv_state_reorder(kv, swap), CLATTN_OK);
    assert_int_equal(kv->lengths[0], 5);
    assert_int_equal(kv->lengths[1], 3);
    assert_int_equal(step_seqs(ctx, &s, kv, x + 3 * E, 1, 1, &b, NULL, 0, &again), CLATTN_OK);
    assert_memory_equal(first, again, E * sizeof(float));
    free(first), free(again);
    /* release and reuse; refusals */
    assert_int_equal(clattn__kv_state_release_slot(kv, "test", b), CLATTN_OK);
    assert_status_msg(ctx, step_seqs(ctx, &s, kv, rows, 2, 1, both, NULL, 0, &out),
                      CLATTN_ERROR_INVALID_ARGUMENT, "slots[1] = 1 is not a sequence in use");
    const size_t twice[2] = {0, 0};
    assert_status_msg(ctx, step_seqs(ctx, &s, kv, rows, 2, 1, twice, NULL, 0, &out),
                      CLATTN_ERROR_INVALID_ARGUMENT, "sequence 0 runs twice");
    assert_status_msg(ctx, clattn__kv_state_copy(kv, "test", a, b),
                      CLATTN_ERROR_INVALID_ARGUMENT, "sequence 1 of the key/value state is not in use");
    assert_int_equal(clattn__kv_state_acquire(kv, "test", &c), CLATTN_OK);
    assert_int_equal(c, b);
    assert_int_equal(kv->lengths[c], 0);
    clattn__kv_state_destroy(&kv);
    clattn__block_stack_release(&s);
}

#define BLOCK_DIR GOLDEN_DIR "/block"

/* RMSNorm's kernel: torch.nn.RMSNorm's golden rows (width 40, not a multiple of the work-group),
 * which tests/ref's RMSNorm also matches; then 33 rows of 200, in place, against tests/ref. */
static void rmsnorm_matches_torch_and_the_reference(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    json_t *meta = hf_golden_load_meta(BLOCK_DIR);
    float eps = (float)json_real_value(json_object_get(json_object_get(meta, "rmsnorm"), "eps"));
    assert_true(eps > 0.0f);
    clattn_npy_array *x = hf_golden_load_npy(BLOCK_DIR, "rmsnorm_x.npy", false);
    clattn_npy_array *w = hf_golden_load_npy(BLOCK_DIR, "rmsnorm_weight.npy", false);
    clattn_npy_array *want = hf_golden_load_npy(BLOCK_DIR, "rmsnorm_out.npy", false);
    size_t rows = x->shape[0], width = x->shape[1];
    assert_int_equal(w->numel, width);
    float *ref = malloc(rows * width * sizeof(float));
    ref_rmsnorm(x->f32, w->f32, rows, width, eps, ref);
    assert_close(ref, want->f32, rows * width, 1e-6);
    clattn_tensor *tx = test_tensor_from(ctx, 2, x->shape, x->f32);
    clattn_tensor *tw = test_tensor_from(ctx, 1, &width, w->f32);
    clattn_tensor *ty = test_tensor_from(ctx, 2, x->shape, NULL);
    assert_int_equal(clattn__rmsnorm(ctx, tx->mem, 0, ty->mem, 0, rows, width, tw->mem, eps),
                     CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    assert_close(got, want->f32, rows * width, 2e-6);
    free(got), free(ref);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tw), clattn_tensor_destroy(&ty);

    enum { ROWS = 33, WIDTH = 200 };
    static float big[ROWS * WIDTH], weight[WIDTH], expect[ROWS * WIDTH];
    test_fill_uniform(big, ROWS * WIDTH, 9, -4.0f, 4.0f);
    test_fill_uniform(weight, WIDTH, 10, 0.5f, 1.5f);
    ref_rmsnorm(big, weight, ROWS, WIDTH, eps, expect);
    tx = test_tensor_from(ctx, 2, (size_t[]){ROWS, WIDTH}, big);
    tw = test_tensor_from(ctx, 1, (size_t[]){WIDTH}, weight);
    assert_int_equal(clattn__rmsnorm(ctx, tx->mem, 0, tx->mem, 0, ROWS, WIDTH, tw->mem, eps),
                     CLATTN_OK);
    got = test_tensor_to_host(tx);
    assert_close(got, expect, ROWS * WIDTH, 2e-6);
    free(got);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&tw);
    clattn_npy_array_destroy(&x), clattn_npy_array_destroy(&w), clattn_npy_array_destroy(&want);
    json_decref(meta);
}

/* A clattn_weight_lookup over a safetensors file. */
typedef struct file_lookup {
    const clattn_safetensors *st;
    clattn_host_tensor t;
} file_lookup;

static const clattn_host_tensor *lookup(void *user, const char *name)
{
    file_lookup *l = user;
    const clattn_safetensors_tensor *s = clattn_safetensors_find(l->st, name);
    if (!s)
        return NULL;
    memset(&l->t, 0, sizeof(l->t));
    l->t.data = s->data;
    l->t.ndim = s->ndim;
    for (int d = 0; d < s->ndim; d++)
        l->t.shape[d] = s->shape[d];
    return &l->t;
}

static size_t meta_size(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    assert_true(json_is_integer(v));
    return (size_t)json_integer_value(v);
}

/* A golden decoder-only stack of tests/golden/block: its spec (meta.json), weights and rows. */
typedef struct golden_stack {
    json_t *meta;
    clattn_block_spec spec;
    size_t B, N, d;
    double tol;
    clattn_safetensors *st;
    clattn_npy_array *input, *want;
} golden_stack;

/* Pre-norm RMSNorm, causal grouped-query attention with RoPE, a gated feed-forward (SiLU, or
 * "act": "gelu_tanh"), no biases, a final RMSNorm; "qk_norm" and "softcap" when meta has them. */
static void golden_open(const char *name, golden_stack *g)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s/%s", BLOCK_DIR, name);
    g->meta = hf_golden_load_meta(BLOCK_DIR);
    json_t *m = json_object_get(g->meta, name);
    assert_non_null(m);
    g->B = meta_size(m, "B"), g->N = meta_size(m, "N"), g->d = meta_size(m, "d");
    g->tol = json_real_value(json_object_get(m, "tolerance"));
    clattn_block_spec *spec = &g->spec;
    memset(spec, 0, sizeof(*spec));
    spec->num_layers = meta_size(m, "L"), spec->d_model = g->d;
    spec->norm = CLATTN_NORM_RMS, spec->norm_first = true, spec->final_norm = true;
    spec->norm_eps = (float)json_real_value(json_object_get(m, "eps"));
    spec->nhead = meta_size(m, "H"), spec->kv_heads = meta_size(m, "KV");
    spec->head_dim_qk = spec->head_dim_v = meta_size(m, "dk");
    spec->causal = true;
    spec->rope_theta = (float)json_real_value(json_object_get(m, "theta"));
    spec->d_ff = meta_size(m, "ff"), spec->ffn_gated = true, spec->activation = CLATTN_ACT_SILU;
    const char *act = json_string_value(json_object_get(m, "act"));
    if (act && strcmp(act, "gelu_tanh") == 0)
        spec->activation = CLATTN_ACT_GELU_TANH;
    spec->qk_norm = json_is_true(json_object_get(m, "qk_norm"));
    spec->attn_softcap = (float)json_number_value(json_object_get(m, "softcap"));
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    assert_int_equal(clattn_safetensors_read(&g->st, path), CLATTN_OK);
    g->input = hf_golden_load_npy(dir, "input.npy", false);
    g->want = hf_golden_load_npy(dir, "out.npy", false);
    assert_int_equal(g->input->numel, g->B * g->N * g->d);
}

static void golden_close(golden_stack *g)
{
    clattn_npy_array_destroy(&g->input), clattn_npy_array_destroy(&g->want);
    clattn_safetensors_destroy(&g->st);
    json_decref(g->meta);
}

/* A stack of `spec` with the golden's weights. */
static void golden_load(clattn_context *ctx, golden_stack *g, const clattn_block_spec *spec,
                        clattn_block_stack *s)
{
    assert_int_equal(clattn__block_stack_init(ctx, "test", spec, s), CLATTN_OK);
    file_lookup fl = {g->st, {0}};
    clattn_status status = clattn__block_stack_load(s, "test", lookup, &fl, NULL, NULL);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
}

/* The whole sequences through the stack: [B, N, d] (malloc'd). */
static float *golden_whole(clattn_context *ctx, golden_stack *g, clattn_block_stack *s)
{
    clattn_tensor *tx = test_tensor_from(ctx, 3, g->input->shape, g->input->f32);
    clattn_tensor *ty = test_tensor_from(ctx, 3, g->input->shape, NULL);
    clattn_block_run run;
    memset(&run, 0, sizeof(run));
    run.tokens = g->B * g->N, run.x = tx->mem, run.out = ty->mem, run.function = "test";
    run.self.batch = g->B, run.self.seq_q = g->N, run.self.seq_k = g->N;
    assert_int_equal(clattn__block_stack_run(s, &run), CLATTN_OK);
    float *got = test_tensor_to_host(ty);
    clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
    return got;
}

/* A key/value state steps through the golden's sequences (a prompt of 3, then one token a
 * step), each output against the golden: at one length (slots NULL: clattn__mha_run_cached),
 * or by slots (sequence by sequence: clattn__mha_run_cached_seqs). */
static void golden_steps(clattn_context *ctx, golden_stack *g, clattn_block_stack *s,
                         bool by_slot)
{
    const clattn_block_spec *spec = &s->spec;
    size_t Bn = g->B, N = g->N, d = g->d;
    clattn_kv_state *kv = NULL;
    assert_int_equal(clattn__kv_state_create(ctx, "test", spec->num_layers, Bn, N,
                                             spec->kv_heads * spec->head_dim_qk,
                                             spec->kv_heads * spec->head_dim_v, false, false, &kv),
                     CLATTN_OK);
    size_t *slots = calloc(Bn, sizeof(size_t));
    for (size_t b = 0; by_slot && b < Bn; b++)
        assert_int_equal(clattn__kv_state_acquire(kv, "test", &slots[b]), CLATTN_OK);
    float *part = malloc(Bn * N * d * sizeof(float));
    for (size_t t0 = 0, n = 3; t0 < N; t0 += n, n = 1) {
        for (size_t b = 0; b < Bn; b++)
            memcpy(part + b * n * d, g->input->f32 + (b * N + t0) * d, n * d * sizeof(float));
        clattn_tensor *tx = test_tensor_from(ctx, 3, (size_t[]){Bn, n, d}, part);
        clattn_tensor *ty = test_tensor_from(ctx, 3, (size_t[]){Bn, n, d}, NULL);
        clattn_block_run run;
        memset(&run, 0, sizeof(run));
        run.tokens = Bn * n, run.x = tx->mem, run.out = ty->mem, run.function = "test";
        run.self.batch = Bn, run.self.seq_q = n;
        run.kv = kv;
        run.slots = by_slot ? slots : NULL;
        assert_int_equal(clattn__block_stack_run(s, &run), CLATTN_OK);
        float *got = test_tensor_to_host(ty);
        for (size_t b = 0; b < Bn; b++)
            assert_close(got + b * n * d, g->want->f32 + (b * N + t0) * d, n * d, g->tol);
        free(got);
        clattn_tensor_destroy(&tx), clattn_tensor_destroy(&ty);
    }
    free(part), free(slots);
    clattn__kv_state_destroy(&kv);
}

/* The golden stack `name` against PyTorch in float64: the whole sequences, and a key/value
 * state stepping through them at one length and by slots. */
static void golden_stack_matches_torch(clattn_context *ctx, const char *name)
{
    golden_stack g;
    golden_open(name, &g);
    clattn_block_stack s;
    golden_load(ctx, &g, &g.spec, &s);
    assert_null(s.weights.layers[0].norm_self.bias); /* RMSNorm: weights only */
    float *got = golden_whole(ctx, &g, &s);
    assert_close(got, g.want->f32, g.want->numel, g.tol);
    free(got);
    golden_steps(ctx, &g, &s, false);
    golden_steps(ctx, &g, &s, true);
    clattn__block_stack_release(&s);
    golden_close(&g);
}

/* A decoder-only (Llama-style) stack: pre-norm RMSNorm, causal grouped-query attention with
 * RoPE, SwiGLU, no biases, a final RMSNorm. */
static void rms_stack_matches_torch(void **state)
{
    test_fixture *f = *state;
    golden_stack_matches_torch(f->ctx, "rms_stack");
}

/* The same layers with Qwen3's per-head q/k RMSNorm after the projections, before RoPE (the
 * cache holding normed, rotated keys); the golden needs them (without: far off). */
static void qk_norm_stack_matches_torch(void **state)
{
    test_fixture *f = *state;
    golden_stack_matches_torch(f->ctx, "qwen3_stack");
    golden_stack g;
    golden_open("qwen3_stack", &g);
    assert_true(g.spec.qk_norm);
    assert_true(g.spec.attn_softcap == 0.0f);
    clattn_block_spec plain = g.spec;
    plain.qk_norm = false;
    clattn_block_stack s;
    golden_load(f->ctx, &g, &plain, &s);
    assert_null(s.weights.layers[0].q_norm);
    float *got = golden_whole(f->ctx, &g, &s);
    assert_true(test_max_abs_diff(got, g.want->f32, g.want->numel) > 1e-2);
    free(got);
    clattn__block_stack_release(&s);
    /* a stack with q/k norms and a file without them: refused by the tensor's name */
    golden_stack llama;
    golden_open("rms_stack", &llama);
    clattn_block_spec with_norms = llama.spec;
    with_norms.qk_norm = true;
    assert_int_equal(clattn__block_stack_init(f->ctx, "test", &with_norms, &s), CLATTN_OK);
    file_lookup fl = {llama.st, {0}};
    assert_status_msg(f->ctx, clattn__block_stack_load(&s, "test", lookup, &fl, NULL, NULL),
                      CLATTN_ERROR_FORMAT, "layers.0.self_attn.q_norm.weight");
    assert_false(s.loaded);
    clattn__block_stack_release(&s);
    golden_close(&llama);
    golden_close(&g);
}

/* The same layers with Gemma 2's attention-logit soft-capping and a GeGLU feed-forward; the
 * golden needs the capping (without: far off). */
static void softcap_stack_matches_torch(void **state)
{
    test_fixture *f = *state;
    golden_stack_matches_torch(f->ctx, "gemma2_stack");
    golden_stack g;
    golden_open("gemma2_stack", &g);
    assert_true(g.spec.attn_softcap > 0.0f);
    clattn_block_spec plain = g.spec;
    plain.attn_softcap = 0.0f;
    clattn_block_stack s;
    golden_load(f->ctx, &g, &plain, &s);
    float *got = golden_whole(f->ctx, &g, &s);
    assert_true(test_max_abs_diff(got, g.want->f32, g.want->numel) > 1e-2);
    free(got);
    clattn__block_stack_release(&s);
    golden_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(causal_stack_steps_through_a_state_without_memory),
        cmocka_unit_test(cross_attention_adding_nothing_leaves_the_self_attention_stack),
        cmocka_unit_test(sequences_of_their_own_lengths_equal_each_alone),
        cmocka_unit_test(positions_per_sequence),
        cmocka_unit_test(slots_truncate_copy_reorder_and_reuse),
        cmocka_unit_test(rmsnorm_matches_torch_and_the_reference),
        cmocka_unit_test(rms_stack_matches_torch),
        cmocka_unit_test(qk_norm_stack_matches_torch),
        cmocka_unit_test(softcap_stack_matches_torch),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
