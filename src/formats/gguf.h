/*
 * GGUF files (gguf.c): llama.cpp's single-file model format, versions 2 and 3. A header (magic
 * "GGUF", version, tensor count, metadata count), the metadata (typed key–value pairs), the
 * tensor infos (name, dimensions, ggml type, offset), then, at the file's alignment
 * ("general.alignment", default 32), the tensor data.
 *
 * Opening reads and checks the header, every metadata value and every tensor info, bounds-checked
 * against the file's size before anything is allocated: a truncated or hostile file is
 * CLATTN_ERROR_FORMAT naming the field ("<function>: <path>: metadata 12
 * ('tokenizer.ggml.tokens'): array of 4294967295 string values exceeds the file (1234 bytes
 * left)"; "header: ...", "tensor 5 ('blk.0.attn_q.weight'): ..."), never a crash. Metadata
 * values are kept in memory (strings and arrays packed in a few large blocks: about twice the
 * size of the file's metadata, never more than a few times the bytes before its data section);
 * tensor data stays in the file and is read on request with pread.
 *
 * Dimensions follow ggml: ne[0] is the innermost (contiguous) one, so a PyTorch weight
 * [out, in] is ne = {in, out}.
 */
#ifndef CLATTN_GGUF_H
#define CLATTN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

/* ggml's tensor types (the numbers the file stores). */
typedef enum clattn_ggml_type {
    CLATTN_GGML_F32 = 0,
    CLATTN_GGML_F16 = 1,
    CLATTN_GGML_Q4_0 = 2,
    CLATTN_GGML_Q4_1 = 3,
    CLATTN_GGML_Q5_0 = 6,
    CLATTN_GGML_Q5_1 = 7,
    CLATTN_GGML_Q8_0 = 8,
    CLATTN_GGML_Q8_1 = 9,
    CLATTN_GGML_Q2_K = 10,
    CLATTN_GGML_Q3_K = 11,
    CLATTN_GGML_Q4_K = 12,
    CLATTN_GGML_Q5_K = 13,
    CLATTN_GGML_Q6_K = 14,
    CLATTN_GGML_Q8_K = 15,
    CLATTN_GGML_IQ2_XXS = 16,
    CLATTN_GGML_IQ2_XS = 17,
    CLATTN_GGML_IQ3_XXS = 18,
    CLATTN_GGML_IQ1_S = 19,
    CLATTN_GGML_IQ4_NL = 20,
    CLATTN_GGML_IQ3_S = 21,
    CLATTN_GGML_IQ2_S = 22,
    CLATTN_GGML_IQ4_XS = 23,
    CLATTN_GGML_I8 = 24,
    CLATTN_GGML_I16 = 25,
    CLATTN_GGML_I32 = 26,
    CLATTN_GGML_I64 = 27,
    CLATTN_GGML_F64 = 28,
    CLATTN_GGML_IQ1_M = 29,
    CLATTN_GGML_BF16 = 30,
    CLATTN_GGML_TQ1_0 = 34,
    CLATTN_GGML_TQ2_0 = 35,
    CLATTN_GGML_MXFP4 = 39,
    CLATTN_GGML_TYPE_COUNT = 40, /* one past the largest number known here */
} clattn_ggml_type;

/* A type's block: `block_elements` values stored in `block_bytes` bytes (F32: 1 and 4; Q4_1: 32
 * and 20; Q6_K: 256 and 210), for every type of the enum above. Returns false for a number with
 * no known layout (then the sizes are 0 and *name is "unknown": "type 31" style names are left
 * to the caller). `name` is ggml's ("q4_K"). Any output pointer may be NULL. */
bool clattn__ggml_type_info(uint32_t type, size_t *block_elements, size_t *block_bytes,
                            const char **name);

/* Metadata value types (the numbers the file stores). */
typedef enum clattn_gguf_value_type {
    CLATTN_GGUF_UINT8 = 0,
    CLATTN_GGUF_INT8 = 1,
    CLATTN_GGUF_UINT16 = 2,
    CLATTN_GGUF_INT16 = 3,
    CLATTN_GGUF_UINT32 = 4,
    CLATTN_GGUF_INT32 = 5,
    CLATTN_GGUF_FLOAT32 = 6,
    CLATTN_GGUF_BOOL = 7,
    CLATTN_GGUF_STRING = 8,
    CLATTN_GGUF_ARRAY = 9,
    CLATTN_GGUF_UINT64 = 10,
    CLATTN_GGUF_INT64 = 11,
    CLATTN_GGUF_FLOAT64 = 12,
} clattn_gguf_value_type;

/* A string of the file: `len` bytes (not NUL-terminated in the file; `data` here is followed
 * by a NUL the reader adds, but may contain NULs of its own). */
typedef struct clattn_gguf_string {
    const char *data;
    uint64_t len;
} clattn_gguf_string;

/* One metadata value. A scalar is in the union (count 0, array NULL; a BOOL is 0 or 1, other
 * bytes are refused); an array has `array_type` (never ARRAY: nested arrays are refused) and
 * `count` elements at `array` (NULL when count is 0) — packed little-endian values of that
 * type's size as in the file (bools 0 or 1), or, for strings, clattn_gguf_string[count]. */
typedef struct clattn_gguf_kv {
    clattn_gguf_string key;
    clattn_gguf_value_type type;
    union {
        uint64_t u64; /* every unsigned type and bool, widened */
        int64_t i64;  /* every signed type, widened */
        double f64;   /* FLOAT32 and FLOAT64, widened */
        clattn_gguf_string str;
    } value;
    clattn_gguf_value_type array_type;
    uint64_t count;
    const void *array;
} clattn_gguf_kv;

#define CLATTN_GGUF_MAX_DIMS 4

/* One tensor's info. */
typedef struct clattn_gguf_tensor {
    clattn_gguf_string name;
    uint32_t n_dims;
    uint64_t ne[CLATTN_GGUF_MAX_DIMS]; /* ne[0] innermost; dimensions past n_dims are 1 */
    uint32_t type;                     /* clattn_ggml_type (a number the reader may not know) */
    uint64_t elements;                 /* the product of ne */
    uint64_t bytes;                    /* its data's size (0 for a type of unknown layout) */
    uint64_t file_offset;              /* absolute offset of its data in the file */
} clattn_gguf_tensor;

typedef struct clattn_gguf {
    char *path;
    int fd;
    uint64_t file_size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;           /* absolute offset of the tensor data section */
    uint64_t kv_count, tensor_count;
    clattn_gguf_kv *kv;             /* [kv_count] */
    clattn_gguf_tensor *tensors;    /* [tensor_count] */
    void *storage;                  /* what the above point into (reader-private) */
} clattn_gguf;

/* Opens and checks `path` (messages start with `function`). Refused as CLATTN_ERROR_FORMAT:
 * a wrong magic, a version other than 2 or 3, counts or lengths beyond the file, nested
 * arrays, unknown value types, bools other than 0 and 1, duplicate keys or tensor names, a
 * "general.alignment" that is not a uint32 power of two, more than 4 dimensions, a negative
 * dimension, dimensions whose product exceeds INT64_MAX or whose rows are not a whole number
 * of blocks, tensor data offsets that are not multiples of the alignment, tensor data that
 * overlaps another's or runs past the end of the file. A tensor of a type whose layout is not
 * known is kept (bytes 0) for the caller to refuse by name. Nothing of the tensor data is
 * read. On failure *out is NULL. Close with clattn__gguf_close. */
clattn_status clattn__gguf_open(const char *function, const char *path, clattn_gguf **out);
/* The same over bytes in memory (the fuzz harness; path is only for messages): the bytes are
 * copied for the tensor data reads. */
clattn_status clattn__gguf_open_memory(const char *function, const char *path,
                                       const void *bytes, size_t size, clattn_gguf **out);
/* Closes the file and frees everything; sets *g to NULL. Accepts NULL. */
void clattn__gguf_close(clattn_gguf **g);

/* The metadata value `key`, or NULL. */
const clattn_gguf_kv *clattn__gguf_find(const clattn_gguf *g, const char *key);
/* The tensor `name`, or NULL. */
const clattn_gguf_tensor *clattn__gguf_tensor(const clattn_gguf *g, const char *name);

/* Typed getters: CLATTN_OK with the value; a missing key is CLATTN_ERROR_FORMAT ("missing
 * 'llama.block_count'") unless `fallback` is given (the _or variants return it); a value of
 * another kind is CLATTN_ERROR_FORMAT naming the key and both types ("'general.name' is a
 * string, not an integer"). Integers accept any integer type whose value fits (a negative one
 * is refused); floats accept FLOAT32 and FLOAT64; bools only BOOL. */
clattn_status clattn__gguf_get_u64(const clattn_gguf *g, const char *function, const char *key,
                                   uint64_t *value);
clattn_status clattn__gguf_get_u64_or(const clattn_gguf *g, const char *function,
                                      const char *key, uint64_t fallback, uint64_t *value);
clattn_status clattn__gguf_get_f64_or(const clattn_gguf *g, const char *function,
                                      const char *key, double fallback, double *value);
clattn_status clattn__gguf_get_bool_or(const clattn_gguf *g, const char *function,
                                       const char *key, bool fallback, bool *value);
/* A string value (NULL with CLATTN_OK when missing and `optional`). */
clattn_status clattn__gguf_get_string(const clattn_gguf *g, const char *function,
                                      const char *key, bool optional,
                                      const clattn_gguf_string **value);
/* An array of `type` (*count elements at *data; NULL and 0 when missing and `optional`). */
clattn_status clattn__gguf_get_array(const clattn_gguf *g, const char *function,
                                     const char *key, clattn_gguf_value_type type, bool optional,
                                     const void **data, uint64_t *count);

/* Reads `count` bytes of the tensor's data from byte `offset` within it into dst (pread, or
 * the copy of clattn__gguf_open_memory). A range past the tensor is
 * CLATTN_ERROR_INVALID_ARGUMENT; any read of a tensor of unknown layout CLATTN_ERROR_FORMAT
 * naming its type. */
clattn_status clattn__gguf_read(const clattn_gguf *g, const char *function,
                                const clattn_gguf_tensor *t, uint64_t offset, void *dst,
                                size_t count);

#endif /* CLATTN_GGUF_H */
