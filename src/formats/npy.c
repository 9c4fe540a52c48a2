/* NumPy .npy files: a hand-written parser for the header dictionary, dtype conversion, writer. */
#include "file_io.h"

#include "clattn/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* numpy pads the header so the data starts at a multiple of this, and leaves room after the
 * dictionary for the first dimension to grow to this many digits (numpy >= 1.23). */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

static const char memory_name[] = "<memory>";

/* ---- small helpers ---- */

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Copies up to 40 characters of untrusted text into dst for a message, '?' for unprintables. */
static void excerpt(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = 0, limit = len < 40 ? len : 40;
    for (; n < limit && n + 4 < cap; n++) {
        unsigned char c = (unsigned char)src[n];
        dst[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (n < len && n + 4 <= cap) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

/* Formats a shape like Python's repr of a tuple: "()", "(5,)", "(2, 3)". */
static void format_shape(char *dst, size_t cap, int ndim, const size_t *shape)
{
    size_t used = (size_t)snprintf(dst, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(dst + used, cap - used, d == 0 ? "%zu" : ", %zu", shape[d]);
    if (used < cap)
        snprintf(dst + used, cap - used, ndim == 1 ? ",)" : ")");
}

static size_t dtype_size(clattn_npy_dtype dtype)
{
    switch (dtype) {
    case CLATTN_NPY_BOOL:
    case CLATTN_NPY_INT8:
    case CLATTN_NPY_UINT8: return 1;
    case CLATTN_NPY_INT16:
    case CLATTN_NPY_UINT16: return 2;
    case CLATTN_NPY_FLOAT32:
    case CLATTN_NPY_INT32:
    case CLATTN_NPY_UINT32: return 4;
    case CLATTN_NPY_FLOAT64:
    case CLATTN_NPY_INT64:
    case CLATTN_NPY_UINT64: return 8;
    }
    return 0;
}

const char *clattn_npy_dtype_name(clattn_npy_dtype dtype)
{
    switch (dtype) {
    case CLATTN_NPY_FLOAT32: return "float32";
    case CLATTN_NPY_FLOAT64: return "float64";
    case CLATTN_NPY_BOOL: return "bool";
    case CLATTN_NPY_INT8: return "int8";
    case CLATTN_NPY_INT16: return "int16";
    case CLATTN_NPY_INT32: return "int32";
    case CLATTN_NPY_INT64: return "int64";
    case CLATTN_NPY_UINT8: return "uint8";
    case CLATTN_NPY_UINT16: return "uint16";
    case CLATTN_NPY_UINT32: return "uint32";
    case CLATTN_NPY_UINT64: return "uint64";
    }
    return "unknown";
}

void clattn_npy_array_destroy(clattn_npy_array **parray)
{
    if (!parray || !*parray)
        return;
    free((*parray)->f32);
    free((*parray)->i64);
    free(*parray);
    *parray = NULL;
}

/* ---- the header dictionary ---- */

/* What the header says, and where the parser is. */
typedef struct npy_header {
    const char *function, *name;
    const char *text, *pos, *end; /* the dictionary text; pos: the parser's position */
    size_t text_offset;           /* offset of text in the file, for messages */
    bool has_descr, has_fortran, has_shape;
    const char *descr; /* points into text; NULL for a non-string descr (structured dtype) */
    size_t descr_len;
    bool fortran_order;
    int ndim; /* may exceed CLATTN_NPY_MAX_DIMS; only the first dimensions are stored */
    size_t shape[CLATTN_NPY_MAX_DIMS];
} npy_header;

static clattn_status syntax_error(const npy_header *h, const char *what)
{
    return clattn__fail_in(h->function, h->name, CLATTN_ERROR_FORMAT,
                    "malformed header: %s at byte %zu", what,
                    h->text_offset + (size_t)(h->pos - h->text));
}

static void skip_space(npy_header *h)
{
    while (h->pos < h->end &&
           (*h->pos == ' ' || *h->pos == '\t' || *h->pos == '\n' || *h->pos == '\r'))
        h->pos++;
}

static bool eat(npy_header *h, char c)
{
    if (h->pos < h->end && *h->pos == c) {
        h->pos++;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes: sets str and len to its raw contents.
 * A backslash escapes the next character (kept as is: no key or descr contains one). */
static bool parse_string(npy_header *h, const char **str, size_t *len)
{
    if (h->pos >= h->end || (*h->pos != '\'' && *h->pos != '"'))
        return false;
    char quote = *h->pos;
    const char *p = h->pos + 1;
    while (p < h->end && *p != quote) {
        if (*p == '\\' && p + 1 < h->end)
            p++;
        p++;
    }
    if (p >= h->end)
        return false;
    *str = h->pos + 1;
    *len = (size_t)(p - *str);
    h->pos = p + 1;
    return true;
}

static bool text_is(const char *s, size_t len, const char *word)
{
    return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* A non-negative decimal integer, optionally with Python 2's 'L' suffix. */
static clattn_status parse_dim(npy_header *h, size_t *value)
{
    if (h->pos < h->end && *h->pos == '-')
        return syntax_error(h, "negative dimension in 'shape'");
    if (h->pos >= h->end || *h->pos < '0' || *h->pos > '9')
        return syntax_error(h, "expected an integer in 'shape'");
    size_t v = 0;
    while (h->pos < h->end && *h->pos >= '0' && *h->pos <= '9') {
        size_t digit = (size_t)(*h->pos - '0');
        if (v > (SIZE_MAX - digit) / 10)
            return clattn__fail_in(h->function, h->name, CLATTN_ERROR_TOO_LARGE,
                            "a dimension in the header's 'shape' does not fit in size_t");
        v = v * 10 + digit;
        h->pos++;
    }
    if (h->pos < h->end && (*h->pos == 'L' || *h->pos == 'l'))
        h->pos++;
    *value = v;
    return CLATTN_OK;
}

/* A tuple of dimensions: "()", "(5,)", "(2, 3)", "(2, 3,)". */
static clattn_status parse_shape(npy_header *h)
{
    if (!eat(h, '('))
        return syntax_error(h, "'shape' is not a tuple");
    h->ndim = 0;
    skip_space(h);
    if (eat(h, ')'))
        return CLATTN_OK;
    for (;;) {
        size_t dim = 0;
        clattn_status status = parse_dim(h, &dim);
        if (status != CLATTN_OK)
            return status;
        if (h->ndim < CLATTN_NPY_MAX_DIMS)
            h->shape[h->ndim] = dim;
        if (h->ndim < CLATTN_NPY_MAX_DIMS + 1) /* enough to know there are too many */
            h->ndim++;
        skip_space(h);
        if (eat(h, ',')) {
            skip_space(h);
            if (eat(h, ')'))
                return CLATTN_OK;
        } else if (eat(h, ')')) {
            if (h->ndim == 1)
                return syntax_error(h, "'shape' (n) is not a tuple (a 1-tuple needs a comma)");
            return CLATTN_OK;
        } else {
            return syntax_error(h, "expected ',' or ')' in 'shape'");
        }
    }
}

static clattn_status parse_value(npy_header *h, const char *key, size_t key_len)
{
    if (text_is(key, key_len, "descr")) {
        if (h->has_descr)
            return syntax_error(h, "duplicate key 'descr'");
        h->has_descr = true;
        if (h->pos < h->end && (*h->pos == '[' || *h->pos == '{'))
            return clattn__fail_in(h->function, h->name, CLATTN_ERROR_UNSUPPORTED,
                            "structured dtypes are not supported");
        if (!parse_string(h, &h->descr, &h->descr_len))
            return syntax_error(h, "'descr' is not a string");
        return CLATTN_OK;
    }
    if (text_is(key, key_len, "fortran_order")) {
        if (h->has_fortran)
            return syntax_error(h, "duplicate key 'fortran_order'");
        h->has_fortran = true;
        const char *word = h->pos;
        while (h->pos < h->end && ((*h->pos >= 'A' && *h->pos <= 'Z') ||
                                   (*h->pos >= 'a' && *h->pos <= 'z')))
            h->pos++;
        size_t len = (size_t)(h->pos - word);
        if (text_is(word, len, "True"))
            h->fortran_order = true;
        else if (text_is(word, len, "False"))
            h->fortran_order = false;
        else
            return syntax_error(h, "'fortran_order' is not True or False");
        return CLATTN_OK;
    }
    if (text_is(key, key_len, "shape")) {
        if (h->has_shape)
            return syntax_error(h, "duplicate key 'shape'");
        h->has_shape = true;
        return parse_shape(h);
    }
    char shown[64], what[128];
    excerpt(shown, sizeof(shown), key, key_len);
    snprintf(what, sizeof(what), "unexpected key '%s'", shown);
    return syntax_error(h, what);
}

/* {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } followed by whitespace. */
static clattn_status parse_dict(npy_header *h)
{
    skip_space(h);
    if (!eat(h, '{'))
        return syntax_error(h, "expected '{'");
    for (;;) {
        skip_space(h);
        if (eat(h, '}'))
            break;
        const char *key;
        size_t key_len;
        if (!parse_string(h, &key, &key_len))
            return syntax_error(h, "expected a quoted key or '}'");
        skip_space(h);
        if (!eat(h, ':'))
            return syntax_error(h, "expected ':' after a key");
        skip_space(h);
        clattn_status status = parse_value(h, key, key_len);
        if (status != CLATTN_OK)
            return status;
        skip_space(h);
        if (eat(h, ','))
            continue;
        if (eat(h, '}'))
            break;
        return syntax_error(h, "expected ',' or '}' after a value");
    }
    skip_space(h);
    if (h->pos != h->end)
        return syntax_error(h, "unexpected text after the dictionary");
    const char *missing = !h->has_descr     ? "descr"
                          : !h->has_fortran ? "fortran_order"
                          : !h->has_shape   ? "shape"
                                            : NULL;
    if (missing)
        return clattn__fail_in(h->function, h->name, CLATTN_ERROR_FORMAT,
                        "malformed header: no '%s' key", missing);
    return CLATTN_OK;
}

/* Maps a descr such as '<f4' to a dtype. */
static clattn_status parse_descr(const npy_header *h, clattn_npy_dtype *dtype)
{
    static const struct {
        char kind, size;
        clattn_npy_dtype dtype;
    } table[] = {
        {'f', '4', CLATTN_NPY_FLOAT32}, {'f', '8', CLATTN_NPY_FLOAT64},
        {'b', '1', CLATTN_NPY_BOOL},    {'i', '1', CLATTN_NPY_INT8},
        {'i', '2', CLATTN_NPY_INT16},   {'i', '4', CLATTN_NPY_INT32},
        {'i', '8', CLATTN_NPY_INT64},   {'u', '1', CLATTN_NPY_UINT8},
        {'u', '2', CLATTN_NPY_UINT16},  {'u', '4', CLATTN_NPY_UINT32},
        {'u', '8', CLATTN_NPY_UINT64},
    };
    char shown[64];
    excerpt(shown, sizeof(shown), h->descr, h->descr_len);
    const char *s = h->descr;
    size_t len = h->descr_len;
    char order = '=';
    if (len > 0 && strchr("<>=|", s[0])) {
        order = s[0];
        s++;
        len--;
    }
    for (size_t i = 0; len == 2 && i < sizeof(table) / sizeof(table[0]); i++) {
        if (s[0] != table[i].kind || s[1] != table[i].size)
            continue;
        bool one_byte = table[i].size == '1';
        bool native_big = order == '=' && !host_is_little_endian();
        if (!one_byte && (order == '>' || native_big))
            return clattn__fail_in(h->function, h->name, CLATTN_ERROR_UNSUPPORTED,
                            "big-endian dtype '%s' is not supported", shown);
        if (!one_byte && order == '|')
            return clattn__fail_in(h->function, h->name, CLATTN_ERROR_UNSUPPORTED,
                            "dtype '%s' has no byte order; '|' is only for 1-byte types", shown);
        *dtype = table[i].dtype;
        return CLATTN_OK;
    }
    return clattn__fail_in(h->function, h->name, CLATTN_ERROR_UNSUPPORTED,
                    "dtype '%s' is not supported (supported: float32, float64, bool and "
                    "8- to 64-bit signed and unsigned integers)",
                    shown);
}

/* ---- the whole file ---- */

/* A validated .npy file: its dtype, shape and data bytes (inside the caller's buffer). */
typedef struct npy_file {
    clattn_npy_dtype dtype;
    int ndim;
    size_t shape[CLATTN_NPY_MAX_DIMS];
    size_t numel;
    const unsigned char *data;
} npy_file;

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static clattn_status parse_file(const char *function, const char *name,
                                const unsigned char *bytes, size_t size, npy_file *file)
{
    size_t magic_len = size < sizeof(npy_magic) ? size : sizeof(npy_magic);
    if (memcmp(bytes, npy_magic, magic_len) != 0)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                        "not a .npy file (the magic string \"\\x93NUMPY\" is missing)");
    if (size < 10)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                        "truncated: %zu bytes is shorter than the .npy preamble", size);
    int major = bytes[6], minor = bytes[7];
    if (minor != 0 || major < 1 || major > 3)
        return clattn__fail_in(function, name, CLATTN_ERROR_UNSUPPORTED,
                        ".npy format version %d.%d is not supported (only 1.0, 2.0, 3.0)", major,
                        minor);
    size_t prelude = major == 1 ? 10 : 12;
    if (size < prelude)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                        "truncated: %zu bytes is shorter than the .npy %d.0 preamble", size,
                        major);
    uint64_t header_len = load_le(bytes + 8, prelude - 8);
    if (header_len > size - prelude)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                        "the header length %llu runs past the end of the file (%zu bytes, "
                        "header starts at byte %zu)",
                        (unsigned long long)header_len, size, prelude);

    npy_header h;
    memset(&h, 0, sizeof(h));
    h.function = function;
    h.name = name;
    h.text = (const char *)bytes + prelude;
    h.pos = h.text;
    h.end = h.text + header_len;
    h.text_offset = prelude;
    clattn_status status = parse_dict(&h);
    if (status != CLATTN_OK)
        return status;
    status = parse_descr(&h, &file->dtype);
    if (status != CLATTN_OK)
        return status;
    if (h.fortran_order)
        return clattn__fail_in(function, name, CLATTN_ERROR_UNSUPPORTED,
                        "fortran_order True (column-major) arrays are not supported");
    if (h.ndim > CLATTN_NPY_MAX_DIMS)
        return clattn__fail_in(function, name, CLATTN_ERROR_UNSUPPORTED,
                        "arrays of more than %d dimensions are not supported",
                        CLATTN_NPY_MAX_DIMS);

    char shape_text[256];
    format_shape(shape_text, sizeof(shape_text), h.ndim, h.shape);
    size_t numel = 1;
    bool empty = false;
    for (int d = 0; d < h.ndim; d++)
        empty = empty || h.shape[d] == 0;
    for (int d = 0; d < h.ndim && !empty; d++)
        if (!clattn__mul_size(numel, h.shape[d], &numel))
            return clattn__fail_in(function, name, CLATTN_ERROR_TOO_LARGE,
                            "the element count of shape %s overflows size_t", shape_text);
    if (empty)
        numel = 0;
    size_t itemsize = dtype_size(file->dtype), data_bytes;
    if (!clattn__mul_size(numel, itemsize, &data_bytes))
        return clattn__fail_in(function, name, CLATTN_ERROR_TOO_LARGE,
                        "the byte size of shape %s of %s overflows size_t", shape_text,
                        clattn_npy_dtype_name(file->dtype));
    size_t data_offset = prelude + (size_t)header_len;
    if (size - data_offset < data_bytes)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                        "truncated data: shape %s of %s needs %zu bytes but only %zu follow the "
                        "header",
                        shape_text, clattn_npy_dtype_name(file->dtype), data_bytes,
                        size - data_offset);

    file->ndim = h.ndim;
    memcpy(file->shape, h.shape, sizeof(file->shape));
    file->numel = numel;
    file->data = bytes + data_offset;
    return CLATTN_OK;
}

static bool is_signed(clattn_npy_dtype dtype)
{
    return dtype == CLATTN_NPY_INT8 || dtype == CLATTN_NPY_INT16 || dtype == CLATTN_NPY_INT32 ||
           dtype == CLATTN_NPY_INT64;
}

/* Reinterprets the low n bytes of v as a two's complement integer. */
static int64_t to_signed(uint64_t v, size_t n)
{
    if (n < 8 && (v >> (8 * n - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * n);
    return v <= INT64_MAX ? (int64_t)v : -(int64_t)~v - 1;
}

static float element_f32(clattn_npy_dtype dtype, const unsigned char *p)
{
    size_t n = dtype_size(dtype);
    uint64_t bits = load_le(p, n);
    if (dtype == CLATTN_NPY_FLOAT32) {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof(f));
        return f;
    }
    if (dtype == CLATTN_NPY_FLOAT64) {
        double d;
        memcpy(&d, &bits, sizeof(d));
        return (float)d;
    }
    if (dtype == CLATTN_NPY_BOOL)
        return bits != 0 ? 1.0f : 0.0f;
    return is_signed(dtype) ? (float)to_signed(bits, n) : (float)bits;
}

typedef enum npy_target { TARGET_F32, TARGET_I64 } npy_target;

static clattn_status load(const char *function, const char *name, const unsigned char *bytes,
                          size_t size, npy_target target, clattn_npy_array **result)
{
    npy_file file;
    memset(&file, 0, sizeof(file));
    clattn_status status = parse_file(function, name, bytes, size, &file);
    if (status != CLATTN_OK)
        return status;
    if (target == TARGET_I64 &&
        (file.dtype == CLATTN_NPY_FLOAT32 || file.dtype == CLATTN_NPY_FLOAT64))
        return clattn__fail_in(function, name, CLATTN_ERROR_UNSUPPORTED,
                        "expected an integer or bool array, got %s",
                        clattn_npy_dtype_name(file.dtype));

    size_t elem = target == TARGET_F32 ? sizeof(float) : sizeof(int64_t), bytes_out;
    if (!clattn__mul_size(file.numel, elem, &bytes_out))
        return clattn__fail_in(function, name, CLATTN_ERROR_TOO_LARGE,
                        "%zu elements do not fit in memory", file.numel);
    void *values = malloc(bytes_out ? bytes_out : 1);
    clattn_npy_array *out = calloc(1, sizeof(*out));
    if (!values || !out) {
        free(values);
        free(out);
        return clattn__fail_in(function, name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "cannot allocate %zu bytes for %zu elements", bytes_out, file.numel);
    }

    size_t itemsize = dtype_size(file.dtype);
    const unsigned char *p = file.data;
    if (target == TARGET_F32) {
        float *f32 = values;
        for (size_t i = 0; i < file.numel; i++, p += itemsize)
            f32[i] = element_f32(file.dtype, p);
        out->f32 = f32;
    } else {
        int64_t *i64 = values;
        for (size_t i = 0; i < file.numel; i++, p += itemsize) {
            uint64_t bits = load_le(p, itemsize);
            if (file.dtype == CLATTN_NPY_BOOL) {
                i64[i] = bits != 0;
            } else if (is_signed(file.dtype)) {
                i64[i] = to_signed(bits, itemsize);
            } else if (bits <= INT64_MAX) {
                i64[i] = (int64_t)bits;
            } else {
                free(values);
                free(out);
                return clattn__fail_in(function, name, CLATTN_ERROR_OUT_OF_RANGE,
                                "uint64 element at flat index %zu (%llu) is larger than "
                                "INT64_MAX",
                                i, (unsigned long long)bits);
            }
        }
        out->i64 = i64;
    }
    out->source_dtype = file.dtype;
    out->ndim = file.ndim;
    memcpy(out->shape, file.shape, sizeof(out->shape));
    out->numel = file.numel;
    *result = out;
    return CLATTN_OK;
}

static clattn_status read_path(const char *function, const char *path, npy_target target,
                               clattn_npy_array **out)
{
    CLATTN_CHECK_ARG(NULL, function, out, "out is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, function, path, "path is NULL");
    unsigned char *bytes = NULL;
    size_t size = 0;
    clattn_status status = clattn__read_file(function, path, &bytes, &size);
    if (status == CLATTN_OK)
        status = load(function, path, bytes, size, target, out);
    free(bytes);
    return status;
}

static clattn_status parse_memory(const char *function, const void *bytes, size_t size,
                                  npy_target target, clattn_npy_array **out)
{
    CLATTN_CHECK_ARG(NULL, function, out, "out is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, function, bytes || size == 0,
                     "bytes is NULL but size is %zu", size);
    static const unsigned char nothing[1] = {0};
    return load(function, memory_name, bytes ? bytes : nothing, size, target, out);
}

clattn_status clattn_npy_read_f32(clattn_npy_array **out, const char *path)
{
    return read_path("clattn_npy_read_f32", path, TARGET_F32, out);
}

clattn_status clattn_npy_read_i64(clattn_npy_array **out, const char *path)
{
    return read_path("clattn_npy_read_i64", path, TARGET_I64, out);
}

clattn_status clattn_npy_parse_f32(clattn_npy_array **out, const void *bytes, size_t size)
{
    return parse_memory("clattn_npy_parse_f32", bytes, size, TARGET_F32, out);
}

clattn_status clattn_npy_parse_i64(clattn_npy_array **out, const void *bytes, size_t size)
{
    return parse_memory("clattn_npy_parse_i64", bytes, size, TARGET_I64, out);
}

/* ---- writing ---- */

/* Builds numpy's format 1.0 preamble and header for a C-order '<f4' array; returns its length.
 * With at most 8 dimensions of at most 20 digits the header is well under 1.0's 65535 bytes. */
static size_t build_header(char *dst, size_t cap, const char *descr, int ndim,
                           const size_t *shape)
{
    char shape_text[256];
    format_shape(shape_text, sizeof(shape_text), ndim, shape);
    int dict_len = snprintf(dst + 10, cap - 10,
                            "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                            shape_text);
    size_t len = 10 + (size_t)dict_len;
    if (ndim > 0) {
        char first[32];
        size_t digits = (size_t)snprintf(first, sizeof(first), "%zu", shape[0]);
        for (size_t i = digits; i < NPY_GROWTH_DIGITS; i++)
            dst[len++] = ' ';
    }
    size_t pad = NPY_ALIGN - (len + 1) % NPY_ALIGN;
    memset(dst + len, ' ', pad);
    len += pad;
    dst[len++] = '\n';
    size_t header_len = len - 10;
    memcpy(dst, npy_magic, sizeof(npy_magic));
    dst[6] = 1;
    dst[7] = 0;
    dst[8] = (char)(header_len & 0xff);
    dst[9] = (char)(header_len >> 8);
    return len;
}

/* Writes count int64 values little-endian; false on a write error. */
static bool write_i64(FILE *f, const int64_t *data, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        unsigned char le[8];
        uint64_t v = (uint64_t)data[i];
        for (int b = 0; b < 8; b++)
            le[b] = (unsigned char)(v >> (8 * b));
        if (fwrite(le, 1, 8, f) != 8)
            return false;
    }
    return true;
}

/* The writers: float32 ('<f4') or int64 ('<i8') data of shape shape[0..ndim-1]. */
static clattn_status write_array(const char *function, const char *path, const void *data,
                                 bool i64, int ndim, const size_t *shape)
{
    CLATTN_CHECK_ARG(NULL, function, path, "path is NULL");
    CLATTN_CHECK_ARG(NULL, function, ndim >= 0 && ndim <= CLATTN_NPY_MAX_DIMS,
                     "ndim is %d; it must be 0 to %d", ndim,
                     CLATTN_NPY_MAX_DIMS);
    CLATTN_CHECK_ARG(NULL, function, shape || ndim == 0,
                     "shape is NULL but ndim is %d", ndim);
    size_t numel = 1, bytes;
    bool empty = false;
    for (int d = 0; d < ndim; d++)
        empty = empty || shape[d] == 0;
    for (int d = 0; d < ndim && !empty; d++)
        if (!clattn__mul_size(numel, shape[d], &numel))
            return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                            "the element count of the shape overflows size_t");
    if (empty)
        numel = 0;
    if (!clattn__mul_size(numel, i64 ? 8 : 4, &bytes))
        return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                        "the byte size of %zu elements overflows size_t", numel);
    CLATTN_CHECK_ARG(NULL, function, data || numel == 0,
                     "data is NULL but the shape has %zu elements", numel);

    char header[512];
    size_t header_len = build_header(header, sizeof(header), i64 ? "<i8" : "<f4", ndim, shape);
    FILE *f;
    char *target, *temp;
    clattn_status status = clattn__create_file(function, path, &f, &target, &temp);
    if (status != CLATTN_OK)
        return status;
    bool ok = fwrite(header, 1, header_len, f) == header_len &&
              (i64 ? write_i64(f, data, numel) : clattn__write_floats(f, data, numel));
    return clattn__finish_file(function, path, f, target, temp, ok);
}

clattn_status clattn_npy_header_f32(char *dst, size_t capacity, int ndim, const size_t *shape,
                                   size_t *length)
{
    static const char *function = "clattn_npy_header_f32";
    CLATTN_CHECK_ARG(NULL, function, dst && length, "dst or length is NULL");
    CLATTN_CHECK_ARG(NULL, function, ndim >= 0 && ndim <= CLATTN_NPY_MAX_DIMS,
                     "ndim is %d; it must be 0 to %d", ndim, CLATTN_NPY_MAX_DIMS);
    CLATTN_CHECK_ARG(NULL, function, shape || ndim == 0, "shape is NULL but ndim is %d", ndim);
    char header[512];
    size_t header_len = build_header(header, sizeof(header), "<f4", ndim, shape);
    CLATTN_CHECK_ARG(NULL, function, capacity >= header_len,
                     "capacity is %zu bytes; the header needs %zu", capacity, header_len);
    memcpy(dst, header, header_len);
    *length = header_len;
    return CLATTN_OK;
}

clattn_status clattn_npy_write_f32(const char *path, const float *data, int ndim,
                                   const size_t *shape)
{
    return write_array("clattn_npy_write_f32", path, data, false, ndim, shape);
}

clattn_status clattn_npy_write_i64(const char *path, const int64_t *data, int ndim,
                                   const size_t *shape)
{
    return write_array("clattn_npy_write_i64", path, data, true, ndim, shape);
}
