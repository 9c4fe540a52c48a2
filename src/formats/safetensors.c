/* safetensors files: the length prefix, the JSON header through jansson, F16/BF16 conversion,
 * and an F32 writer laid out like the reference implementation's. */
#include "file_io.h"
#include "runtime/shape.h"
#include "safetensors_internal.h"

#include "clattn/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

/* The length prefix, and the alignment the reference writer pads the header to. */
#define ST_PREFIX 8
#define ST_ALIGN 8

/* The largest JSON integer jansson holds. */
#if JSON_INTEGER_IS_LONG_LONG
#define ST_JSON_INT_MAX LLONG_MAX
#else
#define ST_JSON_INT_MAX LONG_MAX
#endif

static const char memory_name[] = "<memory>";
static const char metadata_key[] = "__metadata__";

/* Dtypes safetensors defines that the reader does not convert (an UNSUPPORTED error rather
 * than an unknown dtype). */
static const char *const unsupported_dtypes[] = {
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16",
    "U16",  "I32", "U32",     "I64",     "U64", "F64", "C64",
};

/* ---- small helpers ---- */

/* Copies up to 64 bytes of a (UTF-8) name into dst for a message: control characters become
 * '?', a cut never splits a character, and "..." marks a cut. dst must hold 72 bytes. */
#define SHOWN_NAME 72
static void show_name(char *dst, const char *src)
{
    size_t len = strlen(src), n = len <= 64 ? len : 64;
    while (n < len && n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (n < len) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

static const char *json_kind(const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

static size_t dtype_size(clattn_safetensors_dtype dtype)
{
    return dtype == CLATTN_SAFETENSORS_F32 ? 4 : 2;
}

const char *clattn_safetensors_dtype_name(clattn_safetensors_dtype dtype)
{
    switch (dtype) {
    case CLATTN_SAFETENSORS_F32: return "F32";
    case CLATTN_SAFETENSORS_F16: return "F16";
    case CLATTN_SAFETENSORS_BF16: return "BF16";
    }
    return "unknown";
}

/* A non-negative JSON integer as a size_t; false when it does not fit. */
static bool json_to_size(json_int_t v, size_t *out)
{
#if ST_JSON_INT_MAX > SIZE_MAX
    if ((uintmax_t)v > SIZE_MAX)
        return false;
#endif
    *out = (size_t)v;
    return true;
}

/* numel of a shape (0 when a dimension is 0, whatever the others); false on overflow. */
static bool shape_numel(int ndim, const size_t *shape, size_t *numel)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) {
            *numel = 0;
            return true;
        }
    for (int d = 0; d < ndim; d++)
        if (!clattn__mul_size(n, shape[d], &n))
            return false;
    *numel = n;
    return true;
}

static char *copy_string(const char *s)
{
    size_t len = strlen(s);
    char *copy = malloc(len + 1);
    if (copy)
        memcpy(copy, s, len + 1);
    return copy;
}

void clattn_safetensors_destroy(clattn_safetensors **st)
{
    if (!st || !*st)
        return;
    clattn_safetensors *s = *st;
    for (size_t i = 0; s->tensors && i < s->tensor_count; i++) {
        free(s->tensors[i].name);
        free(s->tensors[i].data);
    }
    for (size_t i = 0; s->metadata && i < s->metadata_count; i++) {
        free(s->metadata[i].key);
        free(s->metadata[i].value);
    }
    for (size_t i = 0; s->left_out && i < s->left_out_count; i++) {
        free(s->left_out[i].name);
        free(s->left_out[i].dtype);
    }
    free(s->tensors);
    free(s->metadata);
    free(s->left_out);
    free(s);
    *st = NULL;
}

const clattn_safetensors_tensor *clattn_safetensors_find(const clattn_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    for (size_t i = 0; i < st->tensor_count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

const char *clattn_safetensors_metadata(const clattn_safetensors *st, const char *key)
{
    if (!st || !key)
        return NULL;
    for (size_t i = 0; i < st->metadata_count; i++)
        if (strcmp(st->metadata[i].key, key) == 0)
            return st->metadata[i].value;
    return NULL;
}

/* ---- element conversion (little-endian, whatever the host) ---- */

static float f32_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* IEEE binary16 to binary32, exactly. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0x1f) /* infinity, or NaN with its payload */
        return f32_from_bits(sign | 0x7f800000u | mantissa << 13);
    if (exponent != 0) /* normal: rebias 15 -> 127 */
        return f32_from_bits(sign | (exponent + 112) << 23 | mantissa << 13);
    if (mantissa == 0)
        return f32_from_bits(sign);
    /* Subnormal: mantissa * 2^-24, normal as a float. Shift until the implicit bit appears. */
    uint32_t e = 113;
    while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        e--;
    }
    return f32_from_bits(sign | e << 23 | (mantissa & 0x3ffu) << 13);
}

static void convert(clattn_safetensors_dtype dtype, const unsigned char *p, size_t numel, float *dst)
{
    for (size_t i = 0; i < numel; i++) {
        uint32_t low = (uint32_t)p[0] | (uint32_t)p[1] << 8;
        if (dtype == CLATTN_SAFETENSORS_F32) {
            dst[i] = f32_from_bits(low | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
            p += 4;
        } else {
            dst[i] = dtype == CLATTN_SAFETENSORS_F16 ? f16_to_f32((uint16_t)low) : f32_from_bits(low << 16);
            p += 2;
        }
    }
}

/* ---- the header ---- */

/* Where the parser is, for messages. */
typedef struct st_source {
    const char *function, *name;
    size_t data_size; /* bytes in the data section */
    bool skip_other;  /* integer, bool and F64 tensors are checked, then left out */
    /* The data section: in memory, or (data NULL) in the file fd from data_base, read one
     * tensor at a time so that a file is never held whole beside its floats. */
    const unsigned char *data;
    int fd;
    size_t data_base;
    /* clattn__safetensors_read_named: only these tensors are converted (NULL: all) */
    const char *const *only;
    size_t only_count;
} st_source;

/* The dtype of an entry that is checked but left out (clattn_safetensors_read_floats). */
#define ST_OTHER ((clattn_safetensors_dtype)-1)

/* Bytes per element of the dtypes that can be left out; 0 for the others. */
static size_t other_dtype_size(const char *text)
{
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                 {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2}, {"I32", 4}, {"U32", 4},
                 {"I64", 8},  {"U64", 8}, {"F64", 8}, {"C64", 8}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        if (strcmp(text, sizes[i].name) == 0)
            return sizes[i].size;
    return 0;
}

/* A tensor's entry, checked against the data section but not converted yet. */
typedef struct st_entry {
    const char *name; /* the JSON's key */
    size_t position;  /* among the JSON's keys, for a stable order */
    clattn_safetensors_dtype dtype; /* ST_OTHER: checked, then left out */
    const char *dtype_text;         /* as in the JSON */
    size_t itemsize;
    int ndim;
    size_t shape[CLATTN_SAFETENSORS_MAX_DIMS];
    size_t numel;
    size_t begin, end;
} st_entry;

static clattn_status parse_dtype(const st_source *src, const char *shown, const char *text,
                                 clattn_safetensors_dtype *dtype)
{
    for (int d = CLATTN_SAFETENSORS_F32; d <= CLATTN_SAFETENSORS_BF16; d++)
        if (strcmp(text, clattn_safetensors_dtype_name((clattn_safetensors_dtype)d)) == 0) {
            *dtype = (clattn_safetensors_dtype)d;
            return CLATTN_OK;
        }
    char dtype_shown[SHOWN_NAME];
    show_name(dtype_shown, text);
    if (src->skip_other && other_dtype_size(text)) {
        *dtype = ST_OTHER;
        return CLATTN_OK;
    }
    for (size_t i = 0; i < sizeof(unsupported_dtypes) / sizeof(unsupported_dtypes[0]); i++)
        if (strcmp(text, unsupported_dtypes[i]) == 0)
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_UNSUPPORTED,
                           "tensor '%s': dtype %s is not supported (only F32, F16 and BF16 are)",
                           shown, dtype_shown);
    return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                   "tensor '%s': unknown dtype '%s'", shown, dtype_shown);
}

static clattn_status parse_shape(const st_source *src, const char *shown, const json_t *shape,
                                 st_entry *entry)
{
    size_t ndim = json_array_size(shape);
    if (ndim > CLATTN_SAFETENSORS_MAX_DIMS)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_UNSUPPORTED,
                       "tensor '%s': the shape has %zu dimensions; at most %d are supported",
                       shown, ndim, CLATTN_SAFETENSORS_MAX_DIMS);
    entry->ndim = (int)ndim;
    for (size_t d = 0; d < ndim; d++) {
        const json_t *dim = json_array_get(shape, d);
        if (!json_is_integer(dim))
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "tensor '%s': shape[%zu] is %s, not an integer", shown, d,
                           json_kind(dim));
        json_int_t v = json_integer_value(dim);
        if (v < 0)
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "tensor '%s': shape[%zu] is %" JSON_INTEGER_FORMAT
                           "; dimensions must not be negative",
                           shown, d, v);
        if (!json_to_size(v, &entry->shape[d]))
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_TOO_LARGE,
                           "tensor '%s': shape[%zu] = %" JSON_INTEGER_FORMAT
                           " does not fit in size_t",
                           shown, d, v);
    }
    return CLATTN_OK;
}

/* data_offsets: [begin, end], two non-negative integers with begin <= end. */
static clattn_status parse_offsets(const st_source *src, const char *shown,
                                   const json_t *offsets, st_entry *entry)
{
    const json_t *begin = json_array_get(offsets, 0), *end = json_array_get(offsets, 1);
    if (json_array_size(offsets) != 2 || !json_is_integer(begin) || !json_is_integer(end) ||
        json_integer_value(begin) < 0 || json_integer_value(end) < 0)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "tensor '%s': \"data_offsets\" must be two non-negative integers "
                       "[begin, end]",
                       shown);
    json_int_t b = json_integer_value(begin), e = json_integer_value(end);
    if (b > e)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT
                       ", %" JSON_INTEGER_FORMAT "] begin after they end",
                       shown, b, e);
    if (!json_to_size(b, &entry->begin) || !json_to_size(e, &entry->end))
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_TOO_LARGE,
                       "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT
                       ", %" JSON_INTEGER_FORMAT "] do not fit in size_t",
                       shown, b, e);
    return CLATTN_OK;
}

/* Checks one tensor's entry: its fields, its byte count and its place in the data section. */
static clattn_status parse_entry(const st_source *src, const char *name, const json_t *info,
                                 st_entry *entry)
{
    char shown[SHOWN_NAME];
    show_name(shown, name);
    entry->name = name;
    if (!json_is_object(info))
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "tensor '%s': the entry is %s, not an object", shown, json_kind(info));
    const char *fields[3] = {"dtype", "shape", "data_offsets"};
    const json_t *values[3];
    for (int f = 0; f < 3; f++) {
        values[f] = json_object_get(info, fields[f]);
        if (!values[f])
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "tensor '%s': the entry has no \"%s\"", shown, fields[f]);
        bool ok = f == 0 ? json_is_string(values[f]) : json_is_array(values[f]);
        if (!ok)
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "tensor '%s': \"%s\" is %s, not %s", shown, fields[f],
                           json_kind(values[f]), f == 0 ? "a string" : "an array");
    }
    entry->dtype_text = json_string_value(values[0]);
    clattn_status status = parse_dtype(src, shown, entry->dtype_text, &entry->dtype);
    if (status == CLATTN_OK)
        status = parse_shape(src, shown, values[1], entry);
    if (status == CLATTN_OK)
        status = parse_offsets(src, shown, values[2], entry);
    if (status != CLATTN_OK)
        return status;

    char shape_text[256];
    clattn__format_shape(shape_text, sizeof(shape_text), entry->ndim, entry->shape);
    bool other = entry->dtype == ST_OTHER;
    const char *dtype = other ? json_string_value(values[0])
                              : clattn_safetensors_dtype_name(entry->dtype);
    entry->itemsize = other ? other_dtype_size(dtype) : dtype_size(entry->dtype);
    size_t bytes;
    if (!shape_numel(entry->ndim, entry->shape, &entry->numel))
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_TOO_LARGE,
                       "tensor '%s': the element count of shape %s overflows size_t", shown,
                       shape_text);
    if (!clattn__mul_size(entry->numel, entry->itemsize, &bytes))
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_TOO_LARGE,
                       "tensor '%s': the byte size of shape %s of %s overflows size_t", shown,
                       shape_text, dtype);
    if (entry->end - entry->begin != bytes)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "tensor '%s': shape %s of %s needs %zu bytes but data_offsets [%zu, %zu] "
                       "span %zu",
                       shown, shape_text, dtype, bytes, entry->begin, entry->end,
                       entry->end - entry->begin);
    if (entry->end > src->data_size)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "tensor '%s': truncated data: data_offsets [%zu, %zu] run past the end of "
                       "the %zu-byte data section",
                       shown, entry->begin, entry->end, src->data_size);
    return CLATTN_OK;
}

static clattn_status parse_metadata(const st_source *src, json_t *metadata)
{
    if (!json_is_object(metadata))
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                       "\"%s\" is %s, not an object of strings", metadata_key,
                       json_kind(metadata));
    const char *key;
    const json_t *value;
    json_object_foreach(metadata, key, value)
    {
        if (!json_is_string(value)) {
            char shown[SHOWN_NAME];
            show_name(shown, key);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "\"%s\" entry '%s' is %s, not a string", metadata_key, shown,
                           json_kind(value));
        }
    }
    return CLATTN_OK;
}

/* Data order: by offsets, then by place in the JSON. */
static int compare_entries(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->position < y->position ? -1 : x->position > y->position;
}

/* Entries sorted by begin must not share bytes: otherwise a small hostile file could name the
 * same bytes from many tensors and make the reader convert far more data than the file holds.
 * Each tensor is checked against the furthest end of all before it, not only its neighbour's: a
 * zero-size tensor between two overlapping ones must not hide the overlap. */
static clattn_status check_no_overlap(const st_source *src, const st_entry *entries, size_t count)
{
    size_t furthest = 0; /* the entry before i with the largest end */
    for (size_t i = 1; i < count; i++) {
        if (entries[i - 1].end > entries[furthest].end)
            furthest = i - 1;
        const st_entry *a = &entries[furthest], *b = &entries[i];
        if (b->begin < a->end && b->end > b->begin) {
            char a_shown[SHOWN_NAME], b_shown[SHOWN_NAME];
            show_name(a_shown, a->name);
            show_name(b_shown, b->name);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_FORMAT,
                           "tensors \"%s\" [%zu, %zu) and \"%s\" [%zu, %zu) overlap in the data "
                           "section", a_shown, a->begin, a->end, b_shown, b->begin, b->end);
        }
    }
    return CLATTN_OK;
}

/* An entry's elements as floats into dst: converted in place from memory, or read from the
 * file in chunks and converted. */
static clattn_status tensor_floats(const st_source *src, const st_entry *e, float *dst)
{
    size_t width = e->dtype == CLATTN_SAFETENSORS_F32 ? 4 : 2;
    if (src->data) {
        convert(e->dtype, src->data + e->begin, e->numel, dst);
        return CLATTN_OK;
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *chunk = malloc(CHUNK);
    if (!chunk)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a read buffer");
    clattn_status status = CLATTN_OK;
    for (size_t done = 0; done < e->numel && status == CLATTN_OK;) {
        size_t n = e->numel - done < CHUNK / width ? e->numel - done : CHUNK / width;
        status = clattn__read_at(src->function, src->name, src->fd,
                                 src->data_base + e->begin + done * width, chunk, n * width);
        if (status == CLATTN_OK)
            convert(e->dtype, chunk, n, dst + done);
        done += n;
    }
    free(chunk);
    return status;
}

/* Whether an entry is one the caller asked for (every one unless src->only says otherwise). */
static bool wanted(const st_source *src, const st_entry *e)
{
    if (!src->only)
        return true;
    for (size_t i = 0; i < src->only_count; i++)
        if (strcmp(src->only[i], e->name) == 0)
            return true;
    return false;
}

/* Builds the result from checked entries and metadata. */
static clattn_status build(const st_source *src, const st_entry *entries, size_t count,
                           json_t *metadata, clattn_safetensors **out)
{
    clattn_safetensors *st = calloc(1, sizeof(*st));
    if (!st)
        return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "cannot allocate the result");
    size_t kept = 0, other = 0;
    for (size_t i = 0; i < count; i++) {
        kept += entries[i].dtype != ST_OTHER && wanted(src, &entries[i]);
        other += entries[i].dtype == ST_OTHER && wanted(src, &entries[i]);
    }
    if (other > 0) { /* the names and dtypes of the tensors left out */
        st->left_out = calloc(other, sizeof(*st->left_out));
        if (!st->left_out) {
            clattn_safetensors_destroy(&st);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "cannot allocate %zu tensors left out", other);
        }
        st->left_out_count = other;
        for (size_t i = 0, slot = 0; i < count; i++) {
            if (entries[i].dtype != ST_OTHER || !wanted(src, &entries[i]))
                continue;
            clattn_safetensors_left_out *l = &st->left_out[slot++];
            l->name = copy_string(entries[i].name);
            l->dtype = copy_string(entries[i].dtype_text);
            if (!l->name || !l->dtype) {
                clattn_safetensors_destroy(&st);
                return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot copy the names of the tensors left out");
            }
        }
    }
    if (kept > 0) {
        st->tensors = calloc(kept, sizeof(*st->tensors));
        if (!st->tensors) {
            clattn_safetensors_destroy(&st);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "cannot allocate %zu tensors", kept);
        }
        st->tensor_count = kept;
    }
    for (size_t i = 0, slot = 0; i < count; i++) {
        const st_entry *e = &entries[i];
        if (e->dtype == ST_OTHER || !wanted(src, e))
            continue;
        clattn_safetensors_tensor *t = &st->tensors[slot++];
        char shown[SHOWN_NAME];
        show_name(shown, e->name);
        size_t bytes;
        if (!clattn__mul_size(e->numel, sizeof(float), &bytes)) {
            clattn_safetensors_destroy(&st);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_TOO_LARGE,
                           "tensor '%s': %zu floats do not fit in memory", shown, e->numel);
        }
        t->name = copy_string(e->name);
        t->data = malloc(bytes ? bytes : 1);
        if (!t->name || !t->data) {
            clattn_safetensors_destroy(&st);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "tensor '%s': cannot allocate %zu bytes", shown, bytes);
        }
        t->dtype = e->dtype;
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof(t->shape));
        t->numel = e->numel;
        clattn_status status = tensor_floats(src, e, t->data);
        if (status != CLATTN_OK) {
            clattn_safetensors_destroy(&st);
            return status;
        }
    }

    size_t meta_count = metadata ? json_object_size(metadata) : 0;
    if (meta_count > 0) {
        st->metadata = calloc(meta_count, sizeof(*st->metadata));
        if (!st->metadata) {
            clattn_safetensors_destroy(&st);
            return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "cannot allocate %zu metadata entries", meta_count);
        }
        st->metadata_count = meta_count;
        size_t i = 0;
        const char *key;
        const json_t *value;
        json_object_foreach(metadata, key, value)
        {
            st->metadata[i].key = copy_string(key);
            st->metadata[i].value = copy_string(json_string_value(value));
            if (!st->metadata[i].key || !st->metadata[i].value) {
                clattn_safetensors_destroy(&st);
                return clattn__fail_in(src->function, src->name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot copy the metadata");
            }
            i++;
        }
    }
    *out = st;
    return CLATTN_OK;
}

/* Parses the JSON header (header_len bytes) against src's data section; *out is set only on
 * success. */
static clattn_status parse_header(st_source *src, const unsigned char *header, size_t header_len,
                                  clattn_safetensors **out)
{
    const char *function = src->function, *name = src->name;
    json_error_t error;
    json_t *root = json_loadb((const char *)header, header_len, JSON_REJECT_DUPLICATES, &error);
    if (!root) {
        if (json_error_code(&error) == json_error_out_of_memory)
            return clattn__fail_in(function, name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "out of memory while parsing the JSON header");
        /* jansson quotes the text near the error, which may hold any byte: show ASCII only. */
        for (char *c = error.text; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        size_t at = ST_PREFIX + (size_t)(error.position > 0 ? error.position : 0);
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                       "invalid JSON header: %s (line %d, column %d, byte %zu of the file)",
                       error.text, error.line, error.column, at);
    }
    if (!json_is_object(root)) {
        clattn_status status = clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                                       "the JSON header is %s, not an object", json_kind(root));
        json_decref(root);
        return status;
    }
    size_t keys = json_object_size(root), count = 0;
    st_entry *entries = calloc(keys ? keys : 1, sizeof(*entries));
    if (!entries) {
        json_decref(root);
        return clattn__fail_in(function, name, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "cannot allocate %zu header entries", keys);
    }
    json_t *metadata = NULL;
    clattn_status status = CLATTN_OK;
    const char *key;
    json_t *value;
    size_t position = 0;
    json_object_foreach(root, key, value)
    {
        if (strcmp(key, metadata_key) == 0) {
            metadata = value;
            status = parse_metadata(src, metadata);
        } else {
            entries[count].position = position;
            status = parse_entry(src, key, value, &entries[count]);
            count++;
        }
        position++;
        if (status != CLATTN_OK)
            break;
    }
    if (status == CLATTN_OK) {
        qsort(entries, count, sizeof(*entries), compare_entries);
        status = check_no_overlap(src, entries, count);
    }
    if (status == CLATTN_OK)
        status = build(src, entries, count, metadata, out);
    free(entries);
    json_decref(root);
    return status;
}


/* The header's length from the first 8 bytes, checked against the file's size. */
static clattn_status header_length(const char *function, const char *name,
                                   const unsigned char *prefix, size_t size, size_t *header_len)
{
    uint64_t len = 0;
    for (int i = ST_PREFIX - 1; i >= 0; i--)
        len = len << 8 | prefix[i];
    if (len > size - ST_PREFIX)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                       "the header length %llu is larger than the %zu bytes that follow the "
                       "length (the file has %zu bytes)",
                       (unsigned long long)len, size - ST_PREFIX, size);
    *header_len = (size_t)len;
    return CLATTN_OK;
}

/* Parses a whole file image; *out is set only on success. */
static clattn_status load(const char *function, const char *name, const unsigned char *bytes,
                          size_t size, bool skip_other, clattn_safetensors **out)
{
    if (size < ST_PREFIX)
        return clattn__fail_in(function, name, CLATTN_ERROR_FORMAT,
                       "truncated: %zu bytes is shorter than the 8-byte header length", size);
    size_t header_len = 0;
    clattn_status status = header_length(function, name, bytes, size, &header_len);
    if (status != CLATTN_OK)
        return status;
    st_source src = {function, name, size - ST_PREFIX - header_len, skip_other,
                     bytes + ST_PREFIX + header_len, -1, 0, NULL, 0};
    return parse_header(&src, bytes + ST_PREFIX, header_len, out);
}

static clattn_status read_path(const char *function, clattn_safetensors **out, const char *path,
                               bool skip_other, const char *const *only, size_t only_count)
{
    if (out)
        *out = NULL;
    CLATTN_CHECK_ARG(NULL, function, path, "path is NULL");
    CLATTN_CHECK_ARG(NULL, function, out, "out is NULL");
    /* The header first, then each tensor straight into its floats (the file is never held
     * whole in memory). */
    int fd;
    size_t size;
    clattn_status status = clattn__open_regular(function, path, &fd, &size);
    if (status != CLATTN_OK)
        return status;
    unsigned char prefix[ST_PREFIX];
    unsigned char *header = NULL;
    size_t header_len = 0;
    if (size < ST_PREFIX)
        status = clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                         "truncated: %zu bytes is shorter than the 8-byte header length", size);
    if (status == CLATTN_OK &&
        !(status = clattn__read_at(function, path, fd, 0, prefix, ST_PREFIX)) &&
        !(status = header_length(function, path, prefix, size, &header_len))) {
        header = malloc(header_len ? header_len : 1);
        if (!header)
            status = clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                             "cannot allocate %zu bytes for the header", header_len);
    }
    if (status == CLATTN_OK &&
        !(status = clattn__read_at(function, path, fd, ST_PREFIX, header, header_len))) {
        st_source src = {function, path, size - ST_PREFIX - header_len, skip_other, NULL, fd,
                         ST_PREFIX + header_len, only, only_count};
        status = parse_header(&src, header, header_len, out);
    }
    free(header);
    close(fd);
    return status;
}

clattn_status clattn_safetensors_read(clattn_safetensors **out, const char *path)
{
    return read_path("clattn_safetensors_read", out, path, false, NULL, 0);
}

clattn_status clattn_safetensors_read_floats(clattn_safetensors **out, const char *path)
{
    return read_path("clattn_safetensors_read_floats", out, path, true, NULL, 0);
}

clattn_status clattn__safetensors_read_named(const char *function, clattn_safetensors **out,
                                             const char *path, const char *const *names,
                                             size_t count)
{
    CLATTN_CHECK_ARG(NULL, function, names || count == 0, "names is NULL");
    /* An empty list still selects nothing (not everything): `only` must not be NULL. */
    static const char *const none[1] = {NULL};
    return read_path(function, out, path, true, count ? names : none, count);
}

clattn_status clattn_safetensors_parse(clattn_safetensors **out, const void *bytes, size_t size)
{
    static const char function[] = "clattn_safetensors_parse";
    if (out)
        *out = NULL;
    CLATTN_CHECK_ARG(NULL, function, bytes || size == 0,
                     "bytes is NULL but size is %zu", size);
    CLATTN_CHECK_ARG(NULL, function, out, "out is NULL");
    static const unsigned char nothing[1] = {0};
    return load(function, memory_name, bytes ? bytes : nothing, size, false, out);
}

/* ---- writing ---- */

/* Checks the metadata and adds it to the header as "__metadata__" (when there is any). */
static clattn_status add_metadata(const char *function, const char *path, json_t *root,
                                  const clattn_safetensors_metadata_entry *metadata, size_t count)
{
    if (count == 0)
        return CLATTN_OK;
    json_t *object = json_object();
    if (!object || json_object_set_new(root, metadata_key, object) != 0)
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "cannot build the JSON header");
    for (size_t i = 0; i < count; i++) {
        const char *key = metadata[i].key, *value = metadata[i].value;
        CLATTN_CHECK_ARG(NULL, function, key && *key, "metadata[%zu].key is %s", i, key ? "empty" : "NULL");
        char shown[SHOWN_NAME];
        show_name(shown, key);
        CLATTN_CHECK_ARG(NULL, function, value, "metadata[%zu] ('%s') has a NULL value", i, shown);
        CLATTN_CHECK_ARG(NULL, function, !json_object_get(object, key),
                         "metadata[%zu].key '%s' repeats an earlier key", i, shown);
        json_t *string = json_string(value);
        CLATTN_CHECK_ARG(NULL, function, string,
                         "metadata[%zu] ('%s') value is not valid UTF-8", i, shown);
        CLATTN_CHECK_ARG(NULL, function, json_object_set_new(object, key, string) == 0,
                         "metadata[%zu].key is not valid UTF-8",
                         i);
    }
    return CLATTN_OK;
}

/* Checks one tensor and adds its entry, at data offset *offset (advanced past its bytes). */
static clattn_status add_tensor(const char *function, const char *path, json_t *root,
                                const clattn_safetensors_tensor *t, size_t i, size_t *offset)
{
    CLATTN_CHECK_ARG(NULL, function, t->name && *t->name, "tensors[%zu].name is %s", i, t->name ? "empty" : "NULL");
    char shown[SHOWN_NAME];
    show_name(shown, t->name);
    CLATTN_CHECK_ARG(NULL, function, strcmp(t->name, metadata_key) != 0,
                     "tensors[%zu].name '%s' is reserved for the metadata", i, metadata_key);
    CLATTN_CHECK_ARG(NULL, function, !json_object_get(root, t->name),
                     "tensors[%zu].name '%s' repeats an earlier tensor's", i, shown);
    CLATTN_CHECK_ARG(NULL, function, t->ndim >= 0 && t->ndim <= CLATTN_SAFETENSORS_MAX_DIMS,
                     "tensors[%zu] ('%s') has ndim %d; it must be 0 to %d", i, shown, t->ndim, CLATTN_SAFETENSORS_MAX_DIMS);
    size_t numel, bytes, end;
    if (!shape_numel(t->ndim, t->shape, &numel) ||
        !clattn__mul_size(numel, sizeof(float), &bytes))
        return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                       "tensors[%zu] ('%s'): the byte size of the shape overflows size_t", i,
                       shown);
    CLATTN_CHECK_ARG(NULL, function, t->data || numel == 0,
                     "tensors[%zu] ('%s') has NULL data but %zu elements", i, shown, numel);
    bool fits = bytes <= SIZE_MAX - *offset;
    end = fits ? *offset + bytes : 0;
    for (int d = 0; d < t->ndim && fits; d++)
        fits = (uintmax_t)t->shape[d] <= (uintmax_t)ST_JSON_INT_MAX;
    if (!fits || (uintmax_t)end > (uintmax_t)ST_JSON_INT_MAX)
        return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                       "tensors[%zu] ('%s'): its shape or data offsets do not fit in a JSON "
                       "integer",
                       i, shown);

    /* Each *_new call takes over its value, even when it fails (then it releases it). */
    json_t *shape = json_array(), *offsets = json_array(), *entry = json_object();
    bool ok = true;
    for (int d = 0; d < t->ndim; d++)
        ok = json_array_append_new(shape, json_integer((json_int_t)t->shape[d])) == 0 && ok;
    ok = json_array_append_new(offsets, json_integer((json_int_t)*offset)) == 0 && ok;
    ok = json_array_append_new(offsets, json_integer((json_int_t)end)) == 0 && ok;
    ok = json_object_set_new(entry, "dtype", json_string("F32")) == 0 && ok;
    ok = json_object_set_new(entry, "shape", shape) == 0 && ok;
    ok = json_object_set_new(entry, "data_offsets", offsets) == 0 && ok;
    if (!ok) {
        json_decref(entry);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "cannot build the JSON header");
    }
    /* Fails for a key that is not UTF-8 (or when out of memory); the entry is released. */
    CLATTN_CHECK_ARG(NULL, function, json_object_set_new(root, t->name, entry) == 0,
                     "tensors[%zu].name is not valid UTF-8", i);
    *offset = end;
    return CLATTN_OK;
}

static clattn_status write_file(const char *function, const char *path, const char *header,
                                const clattn_safetensors_tensor *tensors, size_t tensor_count)
{
    size_t text_len = strlen(header), pad = (ST_ALIGN - text_len % ST_ALIGN) % ST_ALIGN;
    uint64_t header_len = (uint64_t)text_len + pad;
    unsigned char prefix[ST_PREFIX];
    for (int i = 0; i < ST_PREFIX; i++)
        prefix[i] = (unsigned char)(header_len >> (8 * i));
    static const char spaces[ST_ALIGN + 1] = "        ";

    FILE *f;
    char *target, *temp;
    clattn_status status = clattn__create_file(function, path, &f, &target, &temp);
    if (status != CLATTN_OK)
        return status;
    bool ok = fwrite(prefix, 1, ST_PREFIX, f) == ST_PREFIX &&
              fwrite(header, 1, text_len, f) == text_len && fwrite(spaces, 1, pad, f) == pad;
    for (size_t i = 0; i < tensor_count && ok; i++) {
        size_t numel = 0;
        shape_numel(tensors[i].ndim, tensors[i].shape, &numel); /* checked by add_tensor */
        ok = clattn__write_floats(f, tensors[i].data, numel);
    }
    return clattn__finish_file(function, path, f, target, temp, ok);
}

clattn_status clattn_safetensors_write(const char *path, const clattn_safetensors_tensor *tensors,
                                       size_t tensor_count, const clattn_safetensors_metadata_entry *metadata,
                                       size_t metadata_count)
{
    static const char function[] = "clattn_safetensors_write";
    CLATTN_CHECK_ARG(NULL, function, path, "path is NULL");
    CLATTN_CHECK_ARG(NULL, function, tensors || tensor_count == 0,
                     "tensors is NULL but tensor_count is %zu",
                     tensor_count);
    CLATTN_CHECK_ARG(NULL, function, metadata || metadata_count == 0,
                     "metadata is NULL but metadata_count is %zu", metadata_count);
    json_t *root = json_object();
    if (!root)
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "cannot build the JSON header");
    clattn_status status = add_metadata(function, path, root, metadata, metadata_count);
    size_t offset = 0;
    for (size_t i = 0; i < tensor_count && status == CLATTN_OK; i++)
        status = add_tensor(function, path, root, &tensors[i], i, &offset);
    char *header = NULL;
    if (status == CLATTN_OK) {
        header = json_dumps(root, JSON_COMPACT);
        if (!header)
            status = clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                             "cannot format the JSON header");
    }
    json_decref(root);
    if (status == CLATTN_OK)
        status = write_file(function, path, header, tensors, tensor_count);
    free(header);
    return status;
}
