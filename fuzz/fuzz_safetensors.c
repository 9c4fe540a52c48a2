/*
 * Fuzz harness: the safetensors reader (clattn_safetensors_parse) and writer.
 * Invariants beyond "no crash, no sanitizer report":
 *   - on error *out is NULL and the message names the function and "<memory>";
 *   - on success every tensor's numel is the product of its shape, names are unique, and the
 *     converted output (numel * 4 bytes summed over the tensors) is at most twice the input's
 *     size (the promise of safetensors.h, which overlapping tensors would break);
 *   - the result written with clattn_safetensors_write and read back with
 *     clattn_safetensors_read is the same: names, shapes, float bits (NaN payloads included),
 *     metadata. (Empty names or metadata keys, which the reader accepts and the writer refuses,
 *     skip this step.)
 */
#include "fuzz_util.h"

#include <clattn/clattn.h>

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void check_round_trip(const clattn_safetensors *st)
{
    for (size_t i = 0; i < st->tensor_count; i++)
        if (!st->tensors[i].name[0])
            return;
    for (size_t i = 0; i < st->metadata_count; i++)
        if (!st->metadata[i].key[0])
            return;
    const char *path = fuzz_temp_path("round_trip.safetensors");
    clattn_status s = clattn_safetensors_write(path, st->tensors, st->tensor_count, st->metadata,
                                               st->metadata_count);
    FUZZ_CHECK(s == CLATTN_OK, "writing what the reader returned failed: %s",
               clattn_last_error(NULL));
    clattn_safetensors *back = NULL;
    s = clattn_safetensors_read(&back, path);
    FUZZ_CHECK(s == CLATTN_OK && back, "reading back the written file failed: %s",
               clattn_last_error(NULL));
    FUZZ_CHECK(back->tensor_count == st->tensor_count, "%zu tensors read back, %zu written",
               back->tensor_count, st->tensor_count);
    FUZZ_CHECK(back->metadata_count == st->metadata_count, "%zu metadata read back, %zu written",
               back->metadata_count, st->metadata_count);
    for (size_t i = 0; i < st->tensor_count; i++) {
        const clattn_safetensors_tensor *a = &st->tensors[i];
        const clattn_safetensors_tensor *b = clattn_safetensors_find(back, a->name);
        FUZZ_CHECK(b, "tensor '%s' is missing after the round trip", a->name);
        FUZZ_CHECK(b->dtype == CLATTN_SAFETENSORS_F32 && b->ndim == a->ndim && b->numel == a->numel &&
                       memcmp(b->shape, a->shape, sizeof(a->shape)) == 0,
                   "tensor '%s': dtype, shape or numel changed in the round trip", a->name);
        FUZZ_CHECK(memcmp(a->data, b->data, a->numel * sizeof(float)) == 0,
                   "tensor '%s': data changed in the round trip", a->name);
    }
    for (size_t i = 0; i < st->metadata_count; i++) {
        const char *v = clattn_safetensors_metadata(back, st->metadata[i].key);
        FUZZ_CHECK(v && strcmp(v, st->metadata[i].value) == 0,
                   "metadata '%s' changed in the round trip", st->metadata[i].key);
    }
    clattn_safetensors_destroy(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clattn_safetensors *st = (clattn_safetensors *)&st; /* must be overwritten */
    clattn_status s = clattn_safetensors_parse(&st, data, size);
    if (s != CLATTN_OK) {
        FUZZ_CHECK(st == NULL, "error %s but *out is not NULL", clattn_status_name(s));
        const char *msg = clattn_last_error(NULL);
        FUZZ_CHECK(strncmp(msg, "clattn_safetensors_parse: <memory>: ", 36) == 0,
                   "the message does not name the function and source: %s", msg);
        return 0;
    }
    FUZZ_CHECK(st != NULL, "success but *out is NULL");
    FUZZ_CHECK((st->tensor_count == 0) == (st->tensors == NULL), "tensors and tensor_count differ");
    unsigned long long out_bytes = 0;
    for (size_t i = 0; i < st->tensor_count; i++) {
        const clattn_safetensors_tensor *t = &st->tensors[i];
        FUZZ_CHECK(t->name && t->data && t->ndim >= 0 && t->ndim <= CLATTN_SAFETENSORS_MAX_DIMS,
                   "tensor %zu: bad name, data or ndim", i);
        unsigned long long n = 1;
        for (int d = 0; d < t->ndim; d++)
            n *= t->shape[d];
        for (int d = t->ndim; d < CLATTN_SAFETENSORS_MAX_DIMS; d++)
            FUZZ_CHECK(t->shape[d] == 0, "tensor '%s': shape[%d] past ndim is not 0", t->name, d);
        FUZZ_CHECK(n == t->numel, "tensor '%s': numel %zu is not the shape's product %llu",
                   t->name, t->numel, n);
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(st->tensors[j].name, t->name) != 0, "tensor '%s' twice", t->name);
        out_bytes += 4ull * t->numel;
    }
    FUZZ_CHECK(out_bytes <= 2ull * size,
               "%llu bytes of converted tensors from a %zu-byte file (more than twice its size)",
               out_bytes, size);
    check_round_trip(st);
    clattn_safetensors_destroy(&st);
    FUZZ_CHECK(st == NULL, "clattn_safetensors_destroy did not clear the pointer");
    return 0;
}
