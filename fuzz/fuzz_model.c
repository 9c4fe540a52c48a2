/*
 * Fuzz harness: model loading, clattn_encoder_load_file: the safetensors reader, the
 * configuration in "__metadata__", the tensor names and shapes, and the upload of the weights.
 * The OpenCL context (PoCL's CPU device by default, CLATTN_DEVICE to choose) is created once, in
 * LLVMFuzzerInitialize; each input is written to a file and loaded.
 * Invariants beyond "no crash, no sanitizer report":
 *   - on error the encoder is NULL and the context's message names the file;
 *   - on success the configuration is consistent (d_model = nhead * head_dim_qk is not required,
 *     but every size is positive) and its parameter count is at most half the file's size (every
 *     parameter is stored in the file, in at least 2 bytes), so a small file never makes a big
 *     model; the encoder is then destroyed.
 */
#include "fuzz_util.h"

#include <clattn/clattn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clattn_context *ctx;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    clattn_context_params p;
    clattn_context_params_default(&p);
    p.log_level = CLATTN_LOG_NONE; /* unused tensors are warnings: keep the fuzzer's log clean */
    if (clattn_context_create(&ctx, &p) != CLATTN_OK) {
        fprintf(stderr, "fuzz_model: no OpenCL context: %s\n", clattn_last_error(NULL));
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_temp_path("model.safetensors");
    fuzz_write_bytes(path, data, size);
    clattn_encoder *enc = (clattn_encoder *)&enc; /* must be overwritten */
    clattn_status s = clattn_encoder_load_file(ctx, &enc, path);
    if (s != CLATTN_OK) {
        FUZZ_CHECK(enc == NULL, "error %s but the encoder is not NULL", clattn_status_name(s));
        const char *msg = clattn_last_error(ctx);
        FUZZ_CHECK(strstr(msg, path), "the message does not name the file: %s", msg);
        return 0;
    }
    FUZZ_CHECK(enc != NULL, "success but the encoder is NULL");
    clattn_encoder_config c;
    FUZZ_CHECK(clattn_encoder_get_config(enc, &c) == CLATTN_OK, "get_config failed");
    FUZZ_CHECK(c.num_layers > 0 && c.d_model > 0 && c.nhead > 0 && c.head_dim_qk > 0 &&
                   c.head_dim_v > 0 && c.dim_feedforward > 0,
               "a loaded configuration has a zero size");
    uint64_t params = 0;
    FUZZ_CHECK(clattn_encoder_count_params(&c, &params) == CLATTN_OK, "count_params failed");
    FUZZ_CHECK(params <= size / 2, "%llu parameters from a %zu-byte file",
               (unsigned long long)params, size);
    clattn_encoder_destroy(&enc);
    FUZZ_CHECK(enc == NULL, "clattn_encoder_destroy did not clear the pointer");
    return 0;
}
