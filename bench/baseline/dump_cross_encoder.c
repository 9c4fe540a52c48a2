/*
 * dump_cross_encoder: scores the (query, document) pairs of a cross-encoder golden case of
 * tests/golden/crossenc (pairs.json beside the model) through the public clattn_cross_encoder_*
 * calls and writes what the library computes, so that two builds can be compared byte for byte
 * (tools/byte-baseline.sh compiles and runs it; it checks nothing against expected values). It
 * takes models of any number of labels, which examples/rerank refuses beyond one.
 *
 *   dump_cross_encoder MODEL_DIR PAIRS.json OUT_PREFIX
 *
 * Writes OUT_PREFIX-logits.npy (float32 [pairs, num_labels], CLATTN_SCORES_RAW, the default
 * batching), OUT_PREFIX-logits-batch1.npy (one pair per batch) and OUT_PREFIX-ids.txt (each
 * pair's ids and token types from clattn_cross_encoder_encode_pair, one line per pair).
 * Exit status 0 on success, 1 on any error (message on stderr), 2 on a usage error.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clattn/clattn.h"

static void fail(const char *what, clattn_context *ctx)
{
    fprintf(stderr, "dump_cross_encoder: %s: %s\n", what, clattn_last_error(ctx));
    exit(1);
}

static void *checked_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "dump_cross_encoder: out of memory\n");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: dump_cross_encoder MODEL_DIR PAIRS.json OUT_PREFIX\n");
        return 2;
    }
    const char *dir = argv[1], *pairs_file = argv[2], *prefix = argv[3];
    json_error_t error;
    json_t *root = json_load_file(pairs_file, 0, &error);
    json_t *pairs = root ? json_object_get(root, "pairs") : NULL;
    if (!json_is_array(pairs) || json_array_size(pairs) == 0) {
        fprintf(stderr, "dump_cross_encoder: %s: no \"pairs\" array\n", pairs_file);
        json_decref(root);
        return 1;
    }
    size_t count = json_array_size(pairs);
    const char **queries = checked_malloc(count * sizeof(*queries));
    const char **documents = checked_malloc(count * sizeof(*documents));
    size_t *query_lengths = checked_malloc(count * sizeof(size_t));
    size_t *document_lengths = checked_malloc(count * sizeof(size_t));
    for (size_t i = 0; i < count; i++) {
        json_t *pair = json_array_get(pairs, i);
        json_t *q = json_array_get(pair, 0), *d = json_array_get(pair, 1);
        if (!json_is_string(q) || !json_is_string(d)) {
            fprintf(stderr, "dump_cross_encoder: %s: pair %zu is not two strings\n", pairs_file,
                    i + 1);
            exit(1);
        }
        queries[i] = json_string_value(q), query_lengths[i] = json_string_length(q);
        documents[i] = json_string_value(d), document_lengths[i] = json_string_length(d);
    }

    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK)
        fail("clattn_context_create", NULL);
    clattn_cross_encoder *model = NULL;
    if (clattn_cross_encoder_load(ctx, &model, dir) != CLATTN_OK)
        fail(dir, ctx);
    clattn_cross_encoder_info info;
    if (clattn_cross_encoder_get_info(model, &info) != CLATTN_OK)
        fail("clattn_cross_encoder_get_info", ctx);

    char path[4096];
    float *logits = checked_malloc(count * info.num_labels * sizeof(float));
    for (int one = 0; one < 2; one++) {
        clattn_cross_encoder_params params;
        clattn_cross_encoder_params_default(&params);
        params.activation = CLATTN_SCORES_RAW;
        params.batch_size = one ? 1 : 0;
        if (clattn_cross_encoder_score(model, queries, query_lengths, documents,
                                       document_lengths, count, logits, &params, NULL) !=
            CLATTN_OK)
            fail("clattn_cross_encoder_score", ctx);
        snprintf(path, sizeof(path), "%s-logits%s.npy", prefix, one ? "-batch1" : "");
        if (clattn_npy_write_f32(path, logits, 2, (size_t[]){count, info.num_labels}) !=
            CLATTN_OK)
            fail(path, NULL);
    }

    snprintf(path, sizeof(path), "%s-ids.txt", prefix);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t capacity = info.max_length + 8;
    int32_t *ids = checked_malloc(capacity * sizeof(int32_t));
    int32_t *types = checked_malloc(capacity * sizeof(int32_t));
    for (size_t i = 0; i < count; i++) {
        size_t n = 0;
        if (clattn_cross_encoder_encode_pair(model, queries[i], query_lengths[i], documents[i],
                                             document_lengths[i], 0, ids, types, capacity,
                                             &n) != CLATTN_OK)
            fail("clattn_cross_encoder_encode_pair", NULL);
        for (size_t t = 0; t < n; t++)
            fprintf(f, "%s%d", t ? "," : "", (int)ids[t]);
        fputc('\t', f);
        for (size_t t = 0; t < n; t++)
            fprintf(f, "%s%d", t ? "," : "", (int)types[t]);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }

    free(ids), free(types), free(logits);
    free(queries), free(documents), free(query_lengths), free(document_lengths);
    clattn_cross_encoder_destroy(&model);
    clattn_context_destroy(&ctx);
    json_decref(root);
    return 0;
}
