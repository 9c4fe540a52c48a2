/*
 * permutation: the experiment on positional information (docs/library.md: self-attention
 * without positions is permutation-equivariant).
 *
 * Self-attention with one head on 2-wide tokens: t1 = [[1,2],[2,3],[3,4]] and t2, the same rows
 * with the last two swapped. Without positional encoding the first output row is identical and
 * rows 2 and 3 come out swapped (attention is permutation-equivariant); after adding the paper's
 * sinusoidal encoding to the inputs, neither holds. Exit status 0 when all four facts hold.
 */
#include <clattn/clattn.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 3
#define WIDTH 2
/* Agreement within float32 rounding: the keys are summed in another order. */
#define SAME 1e-6

static const float t1[TOKENS * WIDTH] = {1, 2, 2, 3, 3, 4};
static const float t2[TOKENS * WIDTH] = {1, 2, 3, 4, 2, 3};

static int fail(clattn_context *ctx)
{
    fprintf(stderr, "permutation: %s\n", clattn_last_error(ctx));
    return 1;
}

static bool rows_equal(const float *a, int ra, const float *b, int rb)
{
    for (int c = 0; c < WIDTH; c++)
        if (fabsf(a[ra * WIDTH + c] - b[rb * WIDTH + c]) > SAME)
            return false;
    return true;
}

static void print_rows(const char *name, const float *y)
{
    printf("  %s:", name);
    for (int r = 0; r < TOKENS; r++)
        printf("  [% .6f, % .6f]", y[r * WIDTH], y[r * WIDTH + 1]);
    printf("\n");
}

/* y = MHA(x) with x optionally plus the sinusoidal table. */
static int attend(clattn_context *ctx, clattn_mha *mha, const float *x, bool positions, float *y)
{
    size_t shape[3] = {1, TOKENS, WIDTH};
    clattn_tensor *in = NULL, *out = NULL;
    int rc = 0;
    if (clattn_tensor_create(ctx, &in, 3, shape) || clattn_tensor_create(ctx, &out, 3, shape) ||
        clattn_tensor_write(in, x, TOKENS * WIDTH) ||
        (positions && clattn_add_sinusoidal(ctx, in, 0)) ||
        clattn_mha_forward(mha, in, NULL, NULL, out, NULL) ||
        clattn_tensor_read(out, y, TOKENS * WIDTH))
        rc = fail(ctx);
    clattn_tensor_destroy(&in);
    clattn_tensor_destroy(&out);
    return rc;
}

/* Prints both outputs and whether the two facts hold; returns how many hold. */
static int report(const char *title, const float *y1, const float *y2)
{
    bool first_same = rows_equal(y1, 0, y2, 0);
    bool swapped = rows_equal(y1, 1, y2, 2) && rows_equal(y1, 2, y2, 1);
    printf("%s\n", title);
    print_rows("MHA(t1)", y1);
    print_rows("MHA(t2)", y2);
    printf("  first row identical: %s\n", first_same ? "yes" : "no");
    printf("  rows 2 and 3 swapped: %s\n", swapped ? "yes" : "no");
    return (int)first_same + (int)swapped;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
        } else {
            fprintf(stderr, "usage: permutation [--device SPEC]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = device;
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, &params) != CLATTN_OK)
        return fail(NULL);

    /* nn.MultiheadAttention(embed_dim=2, num_heads=1) with fixed weights. */
    static const float in_proj[3 * WIDTH * WIDTH] = {0.3f,  -0.7f, 0.5f, 0.2f, -0.4f, 0.6f,
                                                     0.8f,  0.1f,  0.2f, -0.5f, 0.7f, 0.3f};
    static const float in_bias[3 * WIDTH] = {0.05f, -0.1f, 0.0f, 0.1f, 0.2f, -0.05f};
    static const float out_proj[WIDTH * WIDTH] = {0.9f, -0.2f, 0.4f, 0.6f};
    static const float out_bias[WIDTH] = {0.01f, -0.02f};
    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, WIDTH, 1);
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    w.in_proj_weight = (clattn_host_tensor){in_proj, 2, {3 * WIDTH, WIDTH, 0, 0}};
    w.in_proj_bias = (clattn_host_tensor){in_bias, 1, {3 * WIDTH, 0, 0, 0}};
    w.out_proj_weight = (clattn_host_tensor){out_proj, 2, {WIDTH, WIDTH, 0, 0}};
    w.out_proj_bias = (clattn_host_tensor){out_bias, 1, {WIDTH, 0, 0, 0}};
    clattn_mha *mha = NULL;
    int rc = 0;
    float y1[TOKENS * WIDTH], y2[TOKENS * WIDTH], p1[TOKENS * WIDTH], p2[TOKENS * WIDTH];
    if (clattn_mha_create(ctx, &mha, &cfg) || clattn_mha_load_weights(mha, &w))
        rc = fail(ctx);
    if (!rc && !(rc = attend(ctx, mha, t1, false, y1)) && !(rc = attend(ctx, mha, t2, false, y2)) &&
        !(rc = attend(ctx, mha, t1, true, p1)))
        rc = attend(ctx, mha, t2, true, p2);
    if (!rc) {
        printf("t1 = [[1, 2], [2, 3], [3, 4]];  t2 = t1 with rows 2 and 3 swapped\n\n");
        int without = report("without positional encoding:", y1, y2);
        printf("\n");
        int with = report("with the sinusoidal encoding added to the inputs:", p1, p2);
        bool facts = without == 2 && with == 0;
        printf("\n%s\n", facts ? "As the paper says: attention alone ignores order; the positional "
                                 "encoding gives it."
                               : "UNEXPECTED: the facts above do not hold.");
        rc = facts ? 0 : 1;
    }
    clattn_mha_destroy(&mha);
    clattn_context_destroy(&ctx);
    return rc;
}
