/*
 * Fuzz harness: the GGUF reader (clattn__gguf_open_memory, src/formats/gguf.h), its look-ups,
 * typed getters and tensor reads. Invariants beyond "no crash, no sanitizer report":
 *   - on error *out is NULL and the message names the function and the source, then the part
 *     of the file ("header: ", "metadata N", "tensor N");
 *   - on success the version is 2 or 3, the alignment a power of two, the data section inside
 *     the file; every metadata value's array type is a scalar's, every key found by its name
 *     (when it holds no NUL); every tensor has at most 4 dimensions whose product is its
 *     element count, its data (bytes from its layout) a multiple of the alignment from the data
 *     section, inside the file, not overlapping another's, found by its name; reading its first
 *     and last bytes succeeds and equals the input's bytes there, a read past it is refused.
 * The reader is internal: the harness links the library's internal build (also for replay).
 */
#include "fuzz_util.h"

#include "formats/gguf.h"

#include <clattn/clattn.h>

#include <stdlib.h>
#include <string.h>

#define FN "fuzz_gguf"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void exercise_getters(const clattn_gguf *g, const clattn_gguf_kv *kv)
{
    if (memchr(kv->key.data, '\0', (size_t)kv->key.len))
        return;
    const char *key = kv->key.data;
    FUZZ_CHECK(clattn__gguf_find(g, key) != NULL, "key '%s' is not found", key);
    uint64_t u;
    double d;
    bool b;
    const clattn_gguf_string *s;
    const void *data;
    uint64_t count;
    (void)clattn__gguf_get_u64(g, FN, key, &u);
    (void)clattn__gguf_get_f64_or(g, FN, key, 0, &d);
    (void)clattn__gguf_get_bool_or(g, FN, key, false, &b);
    if (clattn__gguf_get_string(g, FN, key, false, &s) == CLATTN_OK)
        FUZZ_CHECK(s && s->data[s->len] == '\0', "string '%s' is not NUL-terminated", key);
    if (kv->type == CLATTN_GGUF_ARRAY) {
        clattn_status st = clattn__gguf_get_array(g, FN, key, kv->array_type, false, &data, &count);
        FUZZ_CHECK(st == CLATTN_OK && count == kv->count, "array '%s' not returned", key);
        if (kv->array_type == CLATTN_GGUF_STRING)
            for (uint64_t i = 0; i < count; i++) {
                const clattn_gguf_string *e = &((const clattn_gguf_string *)data)[i];
                FUZZ_CHECK(e->data[e->len] == '\0', "string %llu of '%s' not terminated",
                           (unsigned long long)i, key);
            }
    }
}

static void check_tensor(const clattn_gguf *g, const uint8_t *input, uint64_t i)
{
    const clattn_gguf_tensor *t = &g->tensors[i];
    FUZZ_CHECK(t->n_dims <= CLATTN_GGUF_MAX_DIMS, "tensor %llu: %u dims", (unsigned long long)i,
               t->n_dims);
    uint64_t n = 1; /* no overflow: the reader keeps elements <= INT64_MAX */
    for (int d = 0; d < CLATTN_GGUF_MAX_DIMS; d++) {
        FUZZ_CHECK(d < (int)t->n_dims || t->ne[d] == 1, "tensor %llu: ne[%d] past n_dims",
                   (unsigned long long)i, d);
        n *= t->ne[d];
    }
    FUZZ_CHECK(n == t->elements, "tensor %llu: elements %llu, not the product of ne",
               (unsigned long long)i, (unsigned long long)t->elements);
    size_t be, bb;
    if (clattn__ggml_type_info(t->type, &be, &bb, NULL))
        FUZZ_CHECK(t->elements % be == 0 && t->bytes == t->elements / be * bb,
                   "tensor %llu: %llu bytes do not match its layout", (unsigned long long)i,
                   (unsigned long long)t->bytes);
    else
        FUZZ_CHECK(t->bytes == 0, "tensor %llu of unknown type has bytes", (unsigned long long)i);
    FUZZ_CHECK(t->file_offset >= g->data_offset &&
                   (t->file_offset - g->data_offset) % g->alignment == 0 &&
                   t->file_offset <= g->file_size && t->bytes <= g->file_size - t->file_offset,
               "tensor %llu: data outside the file or misaligned", (unsigned long long)i);
    if (!memchr(t->name.data, '\0', (size_t)t->name.len))
        FUZZ_CHECK(clattn__gguf_tensor(g, t->name.data) == t, "tensor %llu not found by name",
                   (unsigned long long)i);
    for (uint64_t j = 0; j < i; j++) {
        const clattn_gguf_tensor *o = &g->tensors[j];
        FUZZ_CHECK(!(t->name.len == o->name.len &&
                     memcmp(t->name.data, o->name.data, (size_t)t->name.len) == 0),
                   "tensors %llu and %llu have the same name", (unsigned long long)j,
                   (unsigned long long)i);
        if (t->bytes && o->bytes)
            FUZZ_CHECK(t->file_offset + t->bytes <= o->file_offset ||
                           o->file_offset + o->bytes <= t->file_offset,
                       "tensors %llu and %llu overlap", (unsigned long long)j,
                       (unsigned long long)i);
    }
    unsigned char head[16];
    size_t k = t->bytes < sizeof(head) ? (size_t)t->bytes : sizeof(head);
    FUZZ_CHECK(clattn__gguf_read(g, FN, t, 0, head, k) == CLATTN_OK, "reading tensor %llu: %s",
               (unsigned long long)i, clattn_last_error(NULL));
    FUZZ_CHECK(memcmp(head, input + t->file_offset, k) == 0, "tensor %llu: wrong bytes",
               (unsigned long long)i);
    if (t->bytes) {
        FUZZ_CHECK(clattn__gguf_read(g, FN, t, t->bytes - 1, head, 1) == CLATTN_OK &&
                       head[0] == input[t->file_offset + t->bytes - 1],
                   "tensor %llu: the last byte", (unsigned long long)i);
    }
    FUZZ_CHECK(clattn__gguf_read(g, FN, t, t->bytes, head, 1) != CLATTN_OK,
               "tensor %llu: a read past its end succeeded", (unsigned long long)i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clattn_gguf *g = (clattn_gguf *)&g; /* must be overwritten */
    clattn_status s = clattn__gguf_open_memory(FN, NULL, data, size, &g);
    if (s != CLATTN_OK) {
        FUZZ_CHECK(g == NULL, "error %s but *out is not NULL", clattn_status_name(s));
        const char *msg = clattn_last_error(NULL);
        static const char prefix[] = FN ": <memory>: ";
        FUZZ_CHECK(strncmp(msg, prefix, sizeof(prefix) - 1) == 0,
                   "the message does not name the function and source: %s", msg);
        const char *rest = msg + sizeof(prefix) - 1;
        FUZZ_CHECK(strncmp(rest, "header: ", 8) == 0 || strncmp(rest, "metadata ", 9) == 0 ||
                       strncmp(rest, "tensor ", 7) == 0,
                   "the message does not name the field: %s", msg);
        return 0;
    }
    FUZZ_CHECK(g != NULL, "success but *out is NULL");
    FUZZ_CHECK(g->version == 2 || g->version == 3, "version %u", g->version);
    FUZZ_CHECK(g->alignment && (g->alignment & (g->alignment - 1)) == 0, "alignment %llu",
               (unsigned long long)g->alignment);
    FUZZ_CHECK(g->file_size == size, "file_size %llu of %zu", (unsigned long long)g->file_size,
               size);
    FUZZ_CHECK(g->kv_count <= size / 13 && g->tensor_count <= size / 24,
               "%llu entries and %llu tensors from %zu bytes", (unsigned long long)g->kv_count,
               (unsigned long long)g->tensor_count, size);
    for (uint64_t i = 0; i < g->kv_count; i++) {
        const clattn_gguf_kv *kv = &g->kv[i];
        FUZZ_CHECK(kv->key.data && kv->key.data[kv->key.len] == '\0', "key %llu",
                   (unsigned long long)i);
        if (kv->type == CLATTN_GGUF_ARRAY)
            FUZZ_CHECK(kv->array_type != CLATTN_GGUF_ARRAY && kv->array_type <= 12 &&
                           (kv->count == 0) == (kv->array == NULL),
                       "metadata %llu: array of type %d", (unsigned long long)i,
                       (int)kv->array_type);
        else
            FUZZ_CHECK(kv->type <= 12, "metadata %llu: type %d", (unsigned long long)i,
                       (int)kv->type);
        exercise_getters(g, kv);
    }
    for (uint64_t i = 0; i < g->tensor_count; i++)
        check_tensor(g, data, i);
    clattn__gguf_close(&g);
    FUZZ_CHECK(g == NULL, "clattn__gguf_close did not clear the pointer");
    return 0;
}
