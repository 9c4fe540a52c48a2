/* The golden cases of the quantised linear layers (qlinear_golden.h). */
#include "common/qlinear_golden.h"

#include "common/test_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clattn_npy_array *read_npy(const char *type, const char *file)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/qlinear/%s/%s", GOLDEN_DIR, type, file);
    clattn_npy_array *a = NULL;
    if (clattn_npy_read_f32(&a, path) != CLATTN_OK)
        fail_msg("%s: %s", path, clattn_last_error(NULL));
    return a;
}

void qlinear_golden_load(clattn_context *ctx, const char *type, qlinear_golden *g)
{
    memset(g, 0, sizeof(*g));
    char path[512];
    snprintf(path, sizeof(path), "%s/qlinear/%s/meta.json", GOLDEN_DIR, type);
    json_error_t error;
    json_t *meta = json_load_file(path, 0, &error);
    if (!meta)
        fail_msg("%s: %s", path, error.text);
    g->n = (size_t)json_integer_value(json_object_get(meta, "n"));
    g->k = (size_t)json_integer_value(json_object_get(meta, "k"));
    g->m = (size_t)json_integer_value(json_object_get(meta, "m"));
    g->type = (uint32_t)json_integer_value(json_object_get(meta, "ggml_type"));
    json_decref(meta);

    clattn_npy_array *w = read_npy(type, "w.npy");
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[0], g->n);
    g->bytes = malloc(w->numel);
    assert_non_null(g->bytes);
    for (size_t i = 0; i < w->numel; i++)
        g->bytes[i] = (unsigned char)w->f32[i];
    assert_int_equal(clattn__qweight_upload(ctx, g->type, g->n, g->k, g->bytes, w->numel, &g->w),
                     CLATTN_OK);
    clattn_npy_array_destroy(&w);
    g->arrays[0] = read_npy(type, "x.npy");
    g->arrays[1] = read_npy(type, "y.npy");
    g->arrays[2] = read_npy(type, "yabs.npy");
    assert_int_equal(g->arrays[0]->numel, g->m * g->k);
    assert_int_equal(g->arrays[1]->numel, g->m * g->n);
    snprintf(path, sizeof(path), "%s/qlinear/%s/ydq.npy", GOLDEN_DIR, type);
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        g->arrays[3] = read_npy(type, "ydq.npy");
        assert_int_equal(g->arrays[3]->numel, g->m * g->n);
        g->ydq = g->arrays[3]->f32;
    }
    g->x = g->arrays[0]->f32;
    g->y = g->arrays[1]->f32;
    g->yabs = g->arrays[2]->f32;
}

void qlinear_golden_free(qlinear_golden *g)
{
    clattn__qweight_release(&g->w);
    free(g->bytes);
    for (int i = 0; i < 4; i++)
        clattn_npy_array_destroy(&g->arrays[i]);
}

cl_mem qlinear_test_buffer(clattn_context *ctx, size_t floats, const float *init)
{
    cl_int err;
    cl_mem mem = clCreateBuffer(clattn_context_cl_context(ctx),
                                CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                                floats * sizeof(float), (void *)init, &err);
    assert_int_equal(err, CL_SUCCESS);
    return mem;
}

void qlinear_test_read(clattn_context *ctx, cl_mem mem, size_t floats, float *out)
{
    assert_int_equal(clEnqueueReadBuffer(clattn_context_queue(ctx), mem, CL_TRUE, 0,
                                         floats * sizeof(float), out, 0, NULL, NULL),
                     CL_SUCCESS);
}
