/*
 * libclattn — safetensors.h: reading and writing safetensors files on the host.
 *
 * A safetensors file (https://github.com/huggingface/safetensors) is an 8-byte little-endian
 * unsigned header length N, then N bytes of UTF-8 JSON (often padded with trailing spaces), then
 * the data section. The JSON is an object that maps each tensor name to
 *
 *     {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 *
 * (byte offsets relative to the start of the data section, elements in C order, little-endian),
 * plus an optional "__metadata__" object whose values are all strings.
 *
 * The reader loads a whole file into host memory and converts every tensor to float32. It reads
 * the dtypes F32 (copied bit for bit), F16 (converted exactly: subnormals, infinities and signed
 * zeros keep their value, a NaN stays a NaN with its payload) and BF16 (the upper 16 bits of a
 * float32, so also exact), whatever the host's byte order. Tensors of 0 to CLATTN_SAFETENSORS_MAX_DIMS
 * dimensions are accepted, including empty ones (a dimension of 0). The JSON is parsed with
 * jansson; the reader also:
 *   - accepts any whitespace around the JSON object (the reference pads with spaces), and extra
 *     keys in a tensor's entry (ignored, as the reference does);
 *   - rejects duplicate keys anywhere in the JSON (a duplicate tensor name, for one), names or
 *     strings holding "\u0000", and JSON nested deeper than jansson's limit (2048);
 *   - does not require the tensors to tile the data section as the reference reader does:
 *     gaps between tensors and bytes after the last one are accepted. Each tensor must lie
 *     inside the data section, span exactly numel * itemsize bytes and share no byte with
 *     another tensor (overlaps are CLATTN_ERROR_FORMAT, naming both tensors).
 *
 * The writer produces F32 files laid out like the reference writer's (see
 * clattn_safetensors_write below): for tensors given in the reference's order (by name, as all
 * are F32) and at most one metadata entry, the bytes are identical to what the reference's
 * serialize() writes.
 *
 * Errors follow the library's conventions (see common.h); these functions take no context, so
 * the message is read with clattn_last_error(NULL). Every message starts with the function's
 * name, then the file path ("<memory>" for clattn_safetensors_parse) or, for a bad argument,
 * "invalid argument"; then it says what is wrong, naming the tensor (or metadata entry) at
 * fault:
 *   CLATTN_ERROR_INVALID_ARGUMENT  a NULL pointer, or (writer) a tensor or metadata entry that
 *                                  is missing, empty, duplicated, not UTF-8 or inconsistent;
 *   CLATTN_ERROR_IO                the file cannot be opened, is not a regular file, or a read
 *                                  or write fails (the message includes the system's reason);
 *   CLATTN_ERROR_FORMAT            fewer than 8 bytes; a header length past the end of the file
 *                                  (both numbers in the message); invalid JSON (jansson's
 *                                  message with line, column and byte position); a top level
 *                                  that is not an object; a tensor entry that is not an object
 *                                  or has a missing or wrongly typed "dtype", "shape" or
 *                                  "data_offsets"; a shape entry that is not a non-negative
 *                                  integer; data_offsets that are not two non-negative integers
 *                                  with begin <= end; a byte span that differs from
 *                                  numel * itemsize (both counts given); data past the end of
 *                                  the file; an unknown dtype string; "__metadata__" that is not
 *                                  an object of strings;
 *   CLATTN_ERROR_UNSUPPORTED       a dtype that safetensors defines but this reader does not
 *                                  convert (F64, I64, I32, I16, I8, U8, U16, U32, U64, BOOL, the
 *                                  F8/F6/F4 types, C64), or more than CLATTN_SAFETENSORS_MAX_DIMS
 *                                  dimensions;
 *   CLATTN_ERROR_TOO_LARGE         an element count, byte size or offset that overflows size_t,
 *                                  or a file too large to hold in memory;
 *   CLATTN_ERROR_OUT_OF_HOST_MEMORY  malloc (or jansson) failed.
 * Nothing is allocated from the header length or a shape before it is checked against the
 * file's real size: the reader allocates the file's size, jansson's parsed JSON, and for each
 * tensor its numel floats, at most 2 bytes per byte of its span in the data section; as tensors
 * cannot overlap, the converted output is at most twice the file's size.
 *
 * All functions are thread-safe (they share no state; the last error is per thread).
 */
#ifndef CLATTN_SAFETENSORS_H
#define CLATTN_SAFETENSORS_H

#include "clattn/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLATTN_SAFETENSORS_MAX_DIMS 8

/* The dtypes the reader converts, as stored in the file. */
typedef enum clattn_safetensors_dtype {
    CLATTN_SAFETENSORS_F32,  /* IEEE binary32 */
    CLATTN_SAFETENSORS_F16,  /* IEEE binary16 */
    CLATTN_SAFETENSORS_BF16, /* bfloat16: the upper half of a binary32 */
} clattn_safetensors_dtype;

/* One tensor, converted to float32. */
typedef struct clattn_safetensors_tensor {
    char *name;                        /* NUL-terminated UTF-8; malloc'd */
    clattn_safetensors_dtype dtype;             /* as stored in the file */
    int ndim;                          /* 0 to CLATTN_SAFETENSORS_MAX_DIMS; 0 is a scalar */
    size_t shape[CLATTN_SAFETENSORS_MAX_DIMS];  /* shape[0..ndim-1]; the rest are 0 */
    size_t numel;                      /* product of shape (1 for a scalar, 0 if empty) */
    float *data;                       /* numel floats in C order; malloc'd; never NULL */
} clattn_safetensors_tensor;

/* One "__metadata__" entry. */
typedef struct clattn_safetensors_metadata_entry {
    char *key;   /* NUL-terminated UTF-8; malloc'd */
    char *value; /* NUL-terminated UTF-8; malloc'd */
} clattn_safetensors_metadata_entry;

/* A tensor that clattn_safetensors_read_floats checked and left out. */
typedef struct clattn_safetensors_left_out {
    char *name;  /* NUL-terminated UTF-8; malloc'd */
    char *dtype; /* as written in the file ("I64", "I32", "BOOL", ...); malloc'd */
} clattn_safetensors_left_out;

/*
 * A file's contents. Everything it points to is owned by it: release it with
 * clattn_safetensors_destroy.
 *
 * tensors are in data order: sorted by data_offsets (begin, then end), as the reference reader
 * sorts them; tensors with equal offsets keep their order in the JSON. The JSON's own key order
 * is otherwise irrelevant. metadata entries are in their JSON order.
 */
typedef struct clattn_safetensors {
    size_t tensor_count;
    clattn_safetensors_tensor *tensors;     /* tensor_count entries; NULL when there are none */
    size_t metadata_count;
    clattn_safetensors_metadata_entry *metadata;  /* metadata_count entries; NULL when there are none */
    /* clattn_safetensors_read_floats: the tensors it left out (in data order), so that a caller
     * can say why a tensor it needs is not among `tensors`; 0 and NULL for the other readers. */
    size_t left_out_count;
    clattn_safetensors_left_out *left_out;
} clattn_safetensors;

/*
 * Reads the safetensors file at `path` (see the top of this file). On success *out is a new
 * clattn_safetensors; on any error *out is set to NULL and nothing stays allocated.
 */
CLATTN_API clattn_status clattn_safetensors_read(clattn_safetensors **out, const char *path);

/*
 * As clattn_safetensors_read, except that tensors of an integer, bool, F8 or F64 dtype are
 * checked (shape, offsets, overlaps) and then left out of the result instead of failing the read:
 * for checkpoints that carry buffers inference does not use, such as the I64
 * embeddings.position_ids of BERT models saved by older transformers. Their names and dtypes
 * are listed in left_out.
 */
CLATTN_API clattn_status clattn_safetensors_read_floats(clattn_safetensors **out,
                                                        const char *path);

/*
 * As clattn_safetensors_read, from the `size` bytes of a file already in memory at `bytes`
 * (which the function only reads; bytes may be NULL only when size is 0). Messages name the
 * source "<memory>".
 */
CLATTN_API clattn_status clattn_safetensors_parse(clattn_safetensors **out, const void *bytes,
                                                  size_t size);

/* Frees *st and everything it owns and sets *st to NULL. Accepts NULL and a pointer to NULL. */
CLATTN_API void clattn_safetensors_destroy(clattn_safetensors **st);

/*
 * The tensor called `name` (an exact, case-sensitive match), or NULL when there is none or an
 * argument is NULL. Records no error. Linear in the number of tensors.
 */
CLATTN_API const clattn_safetensors_tensor *clattn_safetensors_find(const clattn_safetensors *st,
                                                           const char *name);

/*
 * The value of the "__metadata__" entry `key`, or NULL when there is none or an argument is
 * NULL. Records no error. The string belongs to st.
 */
CLATTN_API const char *clattn_safetensors_metadata(const clattn_safetensors *st,
                                                   const char *key);

/*
 * Writes an F32 safetensors file at `path`, replacing any existing file. Of each tensor, name,
 * ndim, shape and data are used: dtype is ignored (the file is always F32) and numel is ignored
 * (recomputed from the shape). data may be NULL only for a tensor without elements. Names must
 * be non-empty, valid UTF-8, unique and not "__metadata__". `metadata` (metadata_count entries,
 * NULL when the count is 0) needs non-empty unique UTF-8 keys and non-NULL UTF-8 values;
 * without entries the file has no "__metadata__" object.
 *
 * The layout follows the reference writer: the 8-byte header length, then compact JSON with
 * "__metadata__" first and the tensors in the given order, each entry's keys in the order dtype,
 * shape, data_offsets, non-ASCII characters written as UTF-8, padded with spaces to a multiple
 * of 8 bytes (so the data starts 8-byte aligned); then each tensor's data, little-endian, in the
 * given order and without gaps. (The reference writer sorts tensors by name; this one keeps the
 * caller's order, which readers, this one included, return in data order.) The file is
 * written as clattn_npy_write_f32's: through a temporary file renamed over `path` on success, so
 * a failure leaves an existing file unchanged, and anything but a regular file is refused.
 */
CLATTN_API clattn_status clattn_safetensors_write(const char *path,
                                                  const clattn_safetensors_tensor *tensors,
                                                  size_t tensor_count,
                                                  const clattn_safetensors_metadata_entry *metadata,
                                                  size_t metadata_count);

/* The file format's name of a dtype: "F32", "F16", "BF16", or "unknown"; never NULL. */
CLATTN_API const char *clattn_safetensors_dtype_name(clattn_safetensors_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_SAFETENSORS_H */
