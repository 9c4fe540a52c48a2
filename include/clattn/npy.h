/*
 * libclattn — npy.h: reading and writing NumPy .npy files on the host.
 *
 * The readers load a whole .npy file (format versions 1.0, 2.0 and 3.0) into host memory and
 * convert its elements to float32 (clattn_npy_read_f32) or int64 (clattn_npy_read_i64). They
 * accept C-order (row-major) arrays of these dtypes, in little-endian byte order:
 *
 *     float32 '<f4'  float64 '<f8'  bool '|b1'
 *     int8 '|i1'  int16 '<i2'  int32 '<i4'  int64 '<i8'
 *     uint8 '|u1'  uint16 '<u2'  uint32 '<u4'  uint64 '<u8'
 *
 * The byte-order character may also be '=' (this host's order) for any of them, and any of
 * '<', '>', '|', '=' for the 1-byte types. Arrays of 0 to CLATTN_NPY_MAX_DIMS dimensions are
 * accepted, including empty ones (a dimension of 0).
 *
 * The writer produces exactly the bytes numpy 1.24's np.save writes for a C-order float32 array
 * (format 1.0, header padded so the data starts at a multiple of 64 bytes).
 *
 * Errors follow the library's conventions (see common.h); these functions take no context, so
 * the message is read with clattn_last_error(NULL). Every message names the function and the
 * file path ("<memory>" for the parse functions), then what is wrong:
 *   CLATTN_ERROR_INVALID_ARGUMENT  a NULL pointer, or ndim/shape/data inconsistent (writer);
 *   CLATTN_ERROR_IO                the file cannot be opened, is not a regular file, or a read
 *                                  or write fails (the message includes the system's reason);
 *   CLATTN_ERROR_FORMAT            bad magic, truncated preamble or header, a header length past
 *                                  the end of the file, a malformed header dictionary (syntax,
 *                                  missing/duplicate/unknown key, bad shape), or fewer data bytes
 *                                  than the shape needs (the message gives both byte counts);
 *   CLATTN_ERROR_UNSUPPORTED       another format version, another dtype (named in the message,
 *                                  e.g. '<f2', '<c8', '|O', structured), big-endian data,
 *                                  fortran_order True, more than CLATTN_NPY_MAX_DIMS dimensions,
 *                                  or a float array given to an *_i64 reader;
 *   CLATTN_ERROR_TOO_LARGE         the element count or byte size overflows size_t, or the file
 *                                  is too large to hold in memory;
 *   CLATTN_ERROR_OUT_OF_RANGE      (*_i64 readers) a uint64 element above INT64_MAX; the message
 *                                  gives its flat index;
 *   CLATTN_ERROR_OUT_OF_HOST_MEMORY  malloc failed.
 * A hostile header cannot make the readers allocate more than the file's size plus the converted
 * output, which is at most 8 bytes per element actually present in the file.
 *
 * All functions are thread-safe (they share no state; the last error is per thread).
 */
#ifndef CLATTN_NPY_H
#define CLATTN_NPY_H

#include "clattn/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLATTN_NPY_MAX_DIMS 8

/* The element types the readers understand, as stored in the file. */
typedef enum clattn_npy_dtype {
    CLATTN_NPY_FLOAT32,
    CLATTN_NPY_FLOAT64,
    CLATTN_NPY_BOOL,
    CLATTN_NPY_INT8,
    CLATTN_NPY_INT16,
    CLATTN_NPY_INT32,
    CLATTN_NPY_INT64,
    CLATTN_NPY_UINT8,
    CLATTN_NPY_UINT16,
    CLATTN_NPY_UINT32,
    CLATTN_NPY_UINT64,
} clattn_npy_dtype;

/*
 * An array read from a .npy file, created by the readers below and released with
 * clattn_npy_array_destroy. Exactly one of f32 / i64 is set, depending on the reader; it holds
 * numel elements in C order and is owned by the array. For an empty array (numel 0) the pointer
 * is still non-NULL.
 */
typedef struct clattn_npy_array {
    clattn_npy_dtype source_dtype; /* dtype stored in the file */
    int ndim;                      /* 0 for a 0-d scalar array */
    size_t shape[CLATTN_NPY_MAX_DIMS]; /* shape[0..ndim-1]; the rest are 0 */
    size_t numel;                  /* product of shape (1 for 0-d) */
    float *f32;                    /* set by the *_f32 readers (malloc'd), else NULL */
    int64_t *i64;                  /* set by the *_i64 readers (malloc'd), else NULL */
} clattn_npy_array;

/*
 * Reads the .npy file at `path` into out->f32, converting to float32: float32 is copied bit for
 * bit; float64 is rounded to nearest (magnitudes beyond float's range become ±infinity); bool
 * becomes 0 or 1 (any nonzero byte is true); integers are rounded to the nearest float.
 *
 * On success *out is a new array; on any error *out is NULL (whatever it held is not freed) and
 * nothing stays allocated. Trailing bytes after the array's data are ignored.
 */
CLATTN_API clattn_status clattn_npy_read_f32(clattn_npy_array **out, const char *path);

/*
 * Reads the .npy file at `path` into out->i64. Only bool (0 or 1) and integer dtypes are
 * accepted: a float array fails with CLATTN_ERROR_UNSUPPORTED, and a uint64 element above
 * INT64_MAX fails with CLATTN_ERROR_OUT_OF_RANGE. Otherwise as clattn_npy_read_f32.
 */
CLATTN_API clattn_status clattn_npy_read_i64(clattn_npy_array **out, const char *path);

/*
 * As clattn_npy_read_f32 / clattn_npy_read_i64, from the `size` bytes of a .npy file already in
 * memory at `bytes` (which the functions only read; bytes may be NULL only when size is 0).
 * Messages name the source "<memory>".
 */
CLATTN_API clattn_status clattn_npy_parse_f32(clattn_npy_array **out, const void *bytes,
                                              size_t size);
CLATTN_API clattn_status clattn_npy_parse_i64(clattn_npy_array **out, const void *bytes,
                                              size_t size);

/*
 * Writes a float32 array of shape shape[0..ndim-1] (0 <= ndim <= CLATTN_NPY_MAX_DIMS; shape may
 * be NULL when ndim is 0; dimensions may be 0) from the C-order `data` to a new .npy file at
 * `path`, replacing any existing file. data may be NULL only when the array has no elements.
 * The file is byte-for-byte what numpy 1.24 writes with np.save for the same array: format 1.0,
 * descr '<f4', fortran_order False, shape formatted like Python's repr ("()", "(5,)", "(2, 3)"),
 * the header padded with spaces and a final '\n' to a multiple of 64 bytes. The data is written
 * little-endian whatever the host's byte order. The data goes to a new temporary file
 * in the same directory, renamed over `path` only when every byte is written: on failure the
 * temporary file is removed and an existing file at `path` is unchanged. A symbolic link is
 * followed (the file it names is replaced); a `path` naming anything but a regular file (a
 * device, a FIFO, a directory) is refused with CLATTN_ERROR_IO and left as it is.
 */
CLATTN_API clattn_status clattn_npy_write_f32(const char *path, const float *data, int ndim,
                                              const size_t *shape);

/*
 * The bytes clattn_npy_write_f32 writes before the data (magic, version 1.0, header length and
 * the padded header dictionary) for a C-order float32 array of shape shape[0..ndim-1], for
 * writers that put the data in place themselves (at byte *length on, in rows of little-endian
 * floats: pwrite, MPI-IO). Writes them to dst (512 bytes are always enough) and their count to
 * *length. CLATTN_ERROR_INVALID_ARGUMENT on NULL pointers, an ndim outside 0..8, or a capacity
 * too small.
 */
CLATTN_API clattn_status clattn_npy_header_f32(char *dst, size_t capacity, int ndim,
                                               const size_t *shape, size_t *length);

/* As clattn_npy_write_f32, for int64 data ('<i8', as np.save writes an int64 array). */
CLATTN_API clattn_status clattn_npy_write_i64(const char *path, const int64_t *data, int ndim,
                                              const size_t *shape);

/* Releases an array and sets *array to NULL. Accepts NULL and a pointer to NULL. */
CLATTN_API void clattn_npy_array_destroy(clattn_npy_array **array);

/* The numpy name of a dtype ("float32", "bool", "uint16"...), or "unknown"; never NULL. */
CLATTN_API const char *clattn_npy_dtype_name(clattn_npy_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_NPY_H */
