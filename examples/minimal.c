/* The README's minimal example: multi-head self-attention on the default device. */
#include <clattn/clattn.h>
#include <stdio.h>

int main(void)
{
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK) { /* CLATTN_DEVICE or GPU, else CPU */
        fprintf(stderr, "%s\n", clattn_last_error(NULL));
        return 1;
    }
    enum { B = 1, N = 4, E = 8, H = 2 };
    static float w_in[3 * E * E], b_in[3 * E], w_out[E * E], b_out[E], x[B * N * E], y[B * N * E];
    for (int i = 0; i < 3 * E * E; i++)
        w_in[i] = (float)((i * 37) % 17 - 8) / 64.0f; /* any weights, PyTorch's [3E, E] layout */
    for (int i = 0; i < E * E; i++)
        w_out[i] = (float)((i * 11) % 13 - 6) / 32.0f;
    for (int i = 0; i < B * N * E; i++)
        x[i] = (float)(i % 5) / 5.0f;

    clattn_mha_config cfg;
    clattn_mha_config_default(&cfg, E, H); /* nn.MultiheadAttention(E, H) */
    clattn_mha_weights w = {
        .in_proj_weight = {w_in, 2, {3 * E, E}},  .in_proj_bias = {b_in, 1, {3 * E}},
        .out_proj_weight = {w_out, 2, {E, E}},    .out_proj_bias = {b_out, 1, {E}},
    };
    clattn_mha *mha = NULL;
    clattn_tensor *tx = NULL, *ty = NULL;
    size_t shape[3] = {B, N, E};
    clattn_status s = clattn_mha_create(ctx, &mha, &cfg);
    if (!s) s = clattn_mha_load_weights(mha, &w);
    if (!s) s = clattn_tensor_create(ctx, &tx, 3, shape);
    if (!s) s = clattn_tensor_create(ctx, &ty, 3, shape);
    if (!s) s = clattn_tensor_write(tx, x, B * N * E);
    if (!s) s = clattn_mha_forward(mha, tx, NULL, NULL, ty, NULL); /* self-attention */
    if (!s) s = clattn_tensor_read(ty, y, B * N * E);
    if (s)
        fprintf(stderr, "%s: %s\n", clattn_status_name(s), clattn_last_error(ctx));
    else
        printf("y[0, 0, :4] = %f %f %f %f\n", y[0], y[1], y[2], y[3]);
    clattn_tensor_destroy(&tx);
    clattn_tensor_destroy(&ty);
    clattn_mha_destroy(&mha);
    clattn_context_destroy(&ctx);
    return s ? 1 : 0;
}
