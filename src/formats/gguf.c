/* GGUF files: the header, the metadata, the tensor infos, every count and length checked
 * against the bytes left in the file before anything is allocated; tensor data read on request.
 * The layout follows llama.cpp's ggml/src/gguf.cpp (versions 2 and 3 differ only in that 3 may
 * be big-endian, which is refused here). */
#include "gguf.h"

#include "file_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_ALIGNMENT_KEY "general.alignment"
/* The smallest a metadata entry (key length, empty key, value type, a one-byte value) and a
 * tensor info (name length, empty name, n_dims 0, type, offset) can be in the file. */
#define GGUF_MIN_KV_BYTES (8 + 4 + 1)
#define GGUF_MIN_TENSOR_BYTES (8 + 4 + 4 + 8)
/* The header reader's window over the file. */
#define GGUF_WINDOW (64 * 1024)
/* The arena's usual chunk; larger requests get a chunk of their own. */
#define GGUF_CHUNK (64 * 1024)

/* ---- block layouts (ggml.c's type_traits, ggml-common.h's block structs) ---- */

typedef struct ggml_layout {
    const char *name;
    uint16_t block_elements, block_bytes;
} ggml_layout;

static const ggml_layout ggml_layouts[CLATTN_GGML_TYPE_COUNT] = {
    [CLATTN_GGML_F32] = {"f32", 1, 4},
    [CLATTN_GGML_F16] = {"f16", 1, 2},
    [CLATTN_GGML_Q4_0] = {"q4_0", 32, 18},
    [CLATTN_GGML_Q4_1] = {"q4_1", 32, 20},
    [CLATTN_GGML_Q5_0] = {"q5_0", 32, 22},
    [CLATTN_GGML_Q5_1] = {"q5_1", 32, 24},
    [CLATTN_GGML_Q8_0] = {"q8_0", 32, 34},
    [CLATTN_GGML_Q8_1] = {"q8_1", 32, 36}, /* two halves d, s and 32 int8 */
    [CLATTN_GGML_Q2_K] = {"q2_K", 256, 84},
    [CLATTN_GGML_Q3_K] = {"q3_K", 256, 110},
    [CLATTN_GGML_Q4_K] = {"q4_K", 256, 144},
    [CLATTN_GGML_Q5_K] = {"q5_K", 256, 176},
    [CLATTN_GGML_Q6_K] = {"q6_K", 256, 210},
    [CLATTN_GGML_Q8_K] = {"q8_K", 256, 292},
    [CLATTN_GGML_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [CLATTN_GGML_IQ2_XS] = {"iq2_xs", 256, 74},
    [CLATTN_GGML_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [CLATTN_GGML_IQ1_S] = {"iq1_s", 256, 50},
    [CLATTN_GGML_IQ4_NL] = {"iq4_nl", 32, 18},
    [CLATTN_GGML_IQ3_S] = {"iq3_s", 256, 110},
    [CLATTN_GGML_IQ2_S] = {"iq2_s", 256, 82},
    [CLATTN_GGML_IQ4_XS] = {"iq4_xs", 256, 136},
    [CLATTN_GGML_I8] = {"i8", 1, 1},
    [CLATTN_GGML_I16] = {"i16", 1, 2},
    [CLATTN_GGML_I32] = {"i32", 1, 4},
    [CLATTN_GGML_I64] = {"i64", 1, 8},
    [CLATTN_GGML_F64] = {"f64", 1, 8},
    [CLATTN_GGML_IQ1_M] = {"iq1_m", 256, 56},
    [CLATTN_GGML_BF16] = {"bf16", 1, 2},
    [CLATTN_GGML_TQ1_0] = {"tq1_0", 256, 54},
    [CLATTN_GGML_TQ2_0] = {"tq2_0", 256, 66},
    [CLATTN_GGML_MXFP4] = {"mxfp4", 32, 17},
};

bool clattn__ggml_type_info(uint32_t type, size_t *block_elements, size_t *block_bytes,
                            const char **name)
{
    const ggml_layout *l = type < CLATTN_GGML_TYPE_COUNT ? &ggml_layouts[type] : NULL;
    bool known = l && l->name;
    if (block_elements)
        *block_elements = known ? l->block_elements : 0;
    if (block_bytes)
        *block_bytes = known ? l->block_bytes : 0;
    if (name)
        *name = known ? l->name : "unknown";
    return known;
}

/* ---- value types ---- */

static const char *value_type_name(uint32_t type)
{
    static const char *const names[] = {"uint8", "int8",   "uint16", "int16", "uint32",
                                        "int32", "float32", "bool",  "string", "array",
                                        "uint64", "int64", "float64"};
    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

/* "a" or "an" before a value type's name. */
static const char *article(uint32_t type)
{
    return value_type_name(type)[0] == 'i' || value_type_name(type)[0] == 'a' ? "an" : "a";
}

/* Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown numbers. */
static size_t value_size(uint32_t type)
{
    switch (type) {
    case CLATTN_GGUF_UINT8:
    case CLATTN_GGUF_INT8:
    case CLATTN_GGUF_BOOL: return 1;
    case CLATTN_GGUF_UINT16:
    case CLATTN_GGUF_INT16: return 2;
    case CLATTN_GGUF_UINT32:
    case CLATTN_GGUF_INT32:
    case CLATTN_GGUF_FLOAT32: return 4;
    case CLATTN_GGUF_UINT64:
    case CLATTN_GGUF_INT64:
    case CLATTN_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* ---- the arena everything of a clattn_gguf points into ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} arena_chunk;

typedef struct gguf_storage {
    arena_chunk *chunks;      /* the newest first */
    unsigned char *file_copy; /* clattn__gguf_open_memory's bytes; NULL for a file */
} gguf_storage;

/* `size` bytes at a multiple of `align` (1 for strings, 16 for arrays of any type). */
static void *arena_alloc(gguf_storage *s, size_t size, size_t align)
{
    arena_chunk *c = s->chunks;
    if (c)
        c->used = (c->used + align - 1) & ~(align - 1);
    if (!c || c->used > c->size || c->size - c->used < size) {
        size_t chunk = size > GGUF_CHUNK ? size : GGUF_CHUNK;
        if (chunk > SIZE_MAX - sizeof(arena_chunk))
            return NULL;
        c = malloc(sizeof(arena_chunk) + chunk);
        if (!c)
            return NULL;
        c->used = 0;
        c->size = chunk;
        c->next = s->chunks;
        s->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

static void storage_free(gguf_storage *s)
{
    if (!s)
        return;
    for (arena_chunk *c = s->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(s->file_copy);
    free(s);
}

/* ---- the reader: a cursor over the file or the bytes, and where it is for messages ---- */

typedef struct gguf_reader {
    const char *function, *path;
    clattn_gguf *g;
    gguf_storage *storage;
    const unsigned char *mem; /* the bytes, or NULL: read from g->fd */
    uint64_t size, pos;
    unsigned char *window; /* GGUF_WINDOW bytes of the file from window_start */
    uint64_t window_start;
    size_t window_len;
    char field[160]; /* what is being read: "metadata 3 ('general.name')" */
} gguf_reader;

/* Copies up to 64 bytes of a name for a message: control bytes become '?', "..." marks a cut. */
static void show_name(char *dst, size_t cap, const char *src, uint64_t len)
{
    size_t n = len <= 64 ? (size_t)len : 64, o = 0;
    while (n < len && n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
        n--;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (n < len && o + 4 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

static void set_field(gguf_reader *r, const char *kind, uint64_t index,
                      const clattn_gguf_string *name)
{
    if (!name) {
        snprintf(r->field, sizeof(r->field), "%s %llu", kind, (unsigned long long)index);
        return;
    }
    char shown[80];
    show_name(shown, sizeof(shown), name->data, name->len);
    snprintf(r->field, sizeof(r->field), "%s %llu ('%s')", kind, (unsigned long long)index, shown);
}

#define FAIL(r, ...) fail_at((r), CLATTN_ERROR_FORMAT, __VA_ARGS__)

static clattn_status fail_at(gguf_reader *r, clattn_status status, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
static clattn_status fail_at(gguf_reader *r, clattn_status status, const char *fmt, ...)
{
    char detail[384];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof(detail), fmt, args);
    va_end(args);
    return clattn__fail_in(r->function, r->path, status, "%s: %s", r->field, detail);
}

static uint64_t bytes_left(const gguf_reader *r)
{
    return r->size - r->pos;
}

/* Reads n bytes at the cursor; `what` names the part of the field ("key length"). */
static clattn_status read_bytes(gguf_reader *r, void *dst, uint64_t n, const char *what)
{
    if (n > bytes_left(r))
        return FAIL(r, "%s: truncated (%llu bytes needed at byte %llu, the file has %llu)", what,
                    (unsigned long long)n, (unsigned long long)r->pos,
                    (unsigned long long)r->size);
    if (r->mem) {
        if (n)
            memcpy(dst, r->mem + r->pos, (size_t)n);
        r->pos += n;
        return CLATTN_OK;
    }
    unsigned char *out = dst;
    while (n > 0) {
        if (r->pos >= r->window_start && r->pos < r->window_start + r->window_len) {
            size_t at = (size_t)(r->pos - r->window_start), k = r->window_len - at;
            if (k > n)
                k = (size_t)n;
            memcpy(out, r->window + at, k);
            out += k, n -= k, r->pos += k;
        } else if (n >= GGUF_WINDOW) { /* a long string: straight into its place */
            clattn_status s = clattn__read_at(r->function, r->path, r->g->fd, (size_t)r->pos, out,
                                              (size_t)n);
            if (s != CLATTN_OK)
                return s;
            r->pos += n;
            n = 0;
        } else {
            uint64_t k = bytes_left(r) < GGUF_WINDOW ? bytes_left(r) : GGUF_WINDOW;
            clattn_status s = clattn__read_at(r->function, r->path, r->g->fd, (size_t)r->pos,
                                              r->window, (size_t)k);
            if (s != CLATTN_OK)
                return s;
            r->window_start = r->pos;
            r->window_len = (size_t)k;
        }
    }
    return CLATTN_OK;
}

static clattn_status read_uint(gguf_reader *r, size_t n, uint64_t *v, const char *what)
{
    unsigned char b[8];
    clattn_status s = read_bytes(r, b, n, what);
    if (s == CLATTN_OK)
        *v = load_le(b, n);
    return s;
}

static clattn_status read_u32(gguf_reader *r, uint32_t *v, const char *what)
{
    uint64_t w = 0;
    clattn_status s = read_uint(r, 4, &w, what);
    *v = (uint32_t)w;
    return s;
}

/* A length-prefixed string into the arena, NUL added; the length is checked first. */
static clattn_status read_string(gguf_reader *r, clattn_gguf_string *out, const char *what)
{
    char length_what[64];
    snprintf(length_what, sizeof(length_what), "%s length", what);
    uint64_t len;
    clattn_status s = read_uint(r, 8, &len, length_what);
    if (s != CLATTN_OK)
        return s;
    if (len > bytes_left(r))
        return FAIL(r, "%s of %llu bytes exceeds the file (%llu bytes left)", what,
                    (unsigned long long)len, (unsigned long long)bytes_left(r));
    char *data = arena_alloc(r->storage, (size_t)len + 1, 1);
    if (!data)
        return fail_at(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s of %llu bytes: out of memory", what,
                       (unsigned long long)len);
    s = read_bytes(r, data, len, what);
    if (s != CLATTN_OK)
        return s;
    data[len] = '\0';
    out->data = data;
    out->len = len;
    return CLATTN_OK;
}

static bool same_string(const clattn_gguf_string *a, const clattn_gguf_string *b)
{
    return a->len == b->len && memcmp(a->data, b->data, (size_t)a->len) == 0;
}

static int compare_strings(const clattn_gguf_string *a, const clattn_gguf_string *b)
{
    uint64_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, (size_t)n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* ---- metadata ---- */

/* A scalar of `type` into the value union (the type's widened form). */
static clattn_status read_scalar(gguf_reader *r, uint32_t type, clattn_gguf_kv *kv)
{
    if (type == CLATTN_GGUF_STRING)
        return read_string(r, &kv->value.str, "string");
    size_t n = value_size(type);
    uint64_t bits;
    clattn_status s = read_uint(r, n, &bits, "value");
    if (s != CLATTN_OK)
        return s;
    switch (type) {
    case CLATTN_GGUF_INT8: kv->value.i64 = (int8_t)bits; break;
    case CLATTN_GGUF_INT16: kv->value.i64 = (int16_t)bits; break;
    case CLATTN_GGUF_INT32: kv->value.i64 = (int32_t)bits; break;
    case CLATTN_GGUF_INT64: kv->value.i64 = (int64_t)bits; break;
    case CLATTN_GGUF_FLOAT32: {
        float f;
        uint32_t b32 = (uint32_t)bits;
        memcpy(&f, &b32, sizeof(f));
        kv->value.f64 = f;
        break;
    }
    case CLATTN_GGUF_FLOAT64: memcpy(&kv->value.f64, &bits, sizeof(double)); break;
    case CLATTN_GGUF_BOOL:
        if (bits > 1)
            return FAIL(r, "bool value %llu (not 0 or 1)", (unsigned long long)bits);
        kv->value.u64 = bits;
        break;
    default: kv->value.u64 = bits; break; /* the unsigned types */
    }
    return CLATTN_OK;
}

static clattn_status read_array(gguf_reader *r, clattn_gguf_kv *kv)
{
    uint32_t type;
    uint64_t count;
    clattn_status s = read_u32(r, &type, "array type");
    if (s == CLATTN_OK)
        s = read_uint(r, 8, &count, "array count");
    if (s != CLATTN_OK)
        return s;
    if (type == CLATTN_GGUF_ARRAY)
        return FAIL(r, "nested array (an array of arrays is not read)");
    size_t size = value_size(type);
    if (type != CLATTN_GGUF_STRING && size == 0)
        return FAIL(r, "array of unknown value type %u", type);
    /* every element takes at least `least` bytes of the file: refuse before allocating */
    uint64_t least = type == CLATTN_GGUF_STRING ? 8 : size;
    if (count > bytes_left(r) / least)
        return FAIL(r, "array of %llu %s values exceeds the file (%llu bytes left)",
                    (unsigned long long)count, value_type_name(type),
                    (unsigned long long)bytes_left(r));
    kv->array_type = (clattn_gguf_value_type)type;
    kv->count = count;
    if (count == 0) {
        kv->array = NULL;
        return CLATTN_OK;
    }
    size_t element = type == CLATTN_GGUF_STRING ? sizeof(clattn_gguf_string) : size;
    void *array = arena_alloc(r->storage, (size_t)count * element, 16);
    if (!array)
        return fail_at(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "array of %llu %s values: out of memory",
                       (unsigned long long)count, value_type_name(type));
    kv->array = array;
    if (type == CLATTN_GGUF_STRING) {
        clattn_gguf_string *strings = array;
        for (uint64_t i = 0; i < count; i++) {
            char what[48];
            snprintf(what, sizeof(what), "string %llu", (unsigned long long)i);
            if ((s = read_string(r, &strings[i], what)) != CLATTN_OK)
                return s;
        }
        return CLATTN_OK;
    }
    if ((s = read_bytes(r, array, count * size, "array values")) != CLATTN_OK)
        return s;
    if (type == CLATTN_GGUF_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (((const unsigned char *)array)[i] > 1)
                return FAIL(r, "bool %llu of the array is %u (not 0 or 1)",
                            (unsigned long long)i, ((const unsigned char *)array)[i]);
    return CLATTN_OK;
}

static clattn_status read_kv(gguf_reader *r, uint64_t index, clattn_gguf_kv *kv)
{
    set_field(r, "metadata", index, NULL);
    clattn_status s = read_string(r, &kv->key, "key");
    if (s != CLATTN_OK)
        return s;
    set_field(r, "metadata", index, &kv->key);
    uint32_t type;
    if ((s = read_u32(r, &type, "value type")) != CLATTN_OK)
        return s;
    if (type != CLATTN_GGUF_ARRAY && type != CLATTN_GGUF_STRING && value_size(type) == 0)
        return FAIL(r, "unknown value type %u", type);
    kv->type = (clattn_gguf_value_type)type;
    return type == CLATTN_GGUF_ARRAY ? read_array(r, kv) : read_scalar(r, type, kv);
}

/* Sorting indices by name, to find duplicates in n log n. */
typedef struct named {
    const clattn_gguf_string *name;
    uint64_t index;
} named;

static int compare_named(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = compare_strings(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Refuses the first name that repeats (the later of the two). `names` holds count entries. */
static clattn_status check_unique(gguf_reader *r, named *names, uint64_t count, const char *kind)
{
    if (count < 2)
        return CLATTN_OK;
    qsort(names, (size_t)count, sizeof(*names), compare_named);
    const named *worst = NULL, *first = NULL;
    for (uint64_t i = 1; i < count; i++)
        if (same_string(names[i - 1].name, names[i].name) &&
            (!worst || names[i].index < worst->index))
            worst = &names[i], first = &names[i - 1];
    if (!worst)
        return CLATTN_OK;
    set_field(r, kind, worst->index, worst->name);
    return FAIL(r, "the same %s as %s %llu", strcmp(kind, "metadata") == 0 ? "key" : "name", kind,
                (unsigned long long)first->index);
}

/* ---- tensor infos ---- */

static clattn_status read_tensor_info(gguf_reader *r, uint64_t index, clattn_gguf_tensor *t)
{
    set_field(r, "tensor", index, NULL);
    clattn_status s = read_string(r, &t->name, "name");
    if (s != CLATTN_OK)
        return s;
    set_field(r, "tensor", index, &t->name);
    if ((s = read_u32(r, &t->n_dims, "n_dims")) != CLATTN_OK)
        return s;
    if (t->n_dims > CLATTN_GGUF_MAX_DIMS)
        return FAIL(r, "%u dimensions (at most %d)", t->n_dims, CLATTN_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < CLATTN_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (s = read_uint(r, 8, &t->ne[d], "dimension")) != CLATTN_OK)
            return s;
        if (t->ne[d] > INT64_MAX)
            return FAIL(r, "dimension %u is %lld (negative)", d, (long long)t->ne[d]);
    }
    if ((s = read_u32(r, &t->type, "type")) != CLATTN_OK)
        return s;
    if ((s = read_uint(r, 8, &t->file_offset, "offset")) != CLATTN_OK)
        return s;
    /* the element count, as ggml: at most INT64_MAX (0 when a dimension is 0) */
    uint64_t n = 1;
    bool zero = false;
    for (int d = 0; d < CLATTN_GGUF_MAX_DIMS; d++)
        zero = zero || t->ne[d] == 0;
    for (int d = 0; d < CLATTN_GGUF_MAX_DIMS && !zero; d++) {
        if (n > (uint64_t)INT64_MAX / t->ne[d])
            return FAIL(r, "dimensions %llu x %llu x %llu x %llu: the element count overflows",
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                        (unsigned long long)t->ne[2], (unsigned long long)t->ne[3]);
        n *= t->ne[d];
    }
    t->elements = zero ? 0 : n;
    size_t block_elements, block_bytes;
    const char *type_name;
    t->bytes = 0;
    if (clattn__ggml_type_info(t->type, &block_elements, &block_bytes, &type_name)) {
        if (t->ne[0] % block_elements != 0)
            return FAIL(r, "%llu elements per row of type %s (not a multiple of its block of %zu)",
                        (unsigned long long)t->ne[0], type_name, block_elements);
        uint64_t blocks = t->elements / block_elements;
        if (blocks > UINT64_MAX / block_bytes)
            return FAIL(r, "%llu blocks of type %s: the size in bytes overflows",
                        (unsigned long long)blocks, type_name);
        t->bytes = blocks * block_bytes;
    }
    return CLATTN_OK;
}

static int compare_by_offset(const void *a, const void *b)
{
    const clattn_gguf_tensor *x = *(const clattn_gguf_tensor *const *)a;
    const clattn_gguf_tensor *y = *(const clattn_gguf_tensor *const *)b;
    if (x->file_offset != y->file_offset)
        return x->file_offset > y->file_offset ? 1 : -1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* Places the tensors' data: relative offsets become absolute, each a multiple of the alignment,
 * inside the file, none overlapping another. */
static clattn_status place_tensors(gguf_reader *r, clattn_gguf *g)
{
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        clattn_gguf_tensor *t = &g->tensors[i];
        set_field(r, "tensor", i, &t->name);
        if (t->file_offset % g->alignment != 0)
            return FAIL(r, "offset %llu is not a multiple of the alignment %llu",
                        (unsigned long long)t->file_offset, (unsigned long long)g->alignment);
        uint64_t relative = t->file_offset;
        if (relative > g->file_size || g->data_offset > g->file_size - relative ||
            t->bytes > g->file_size - relative - g->data_offset)
            return FAIL(r, "data at offset %llu (byte %llu of the file) of %llu bytes runs past "
                        "the end of the file (%llu bytes)",
                        (unsigned long long)relative,
                        (unsigned long long)(g->data_offset + relative),
                        (unsigned long long)t->bytes, (unsigned long long)g->file_size);
        t->file_offset = g->data_offset + relative;
    }
    if (g->tensor_count < 2)
        return CLATTN_OK;
    clattn_gguf_tensor **order = malloc((size_t)g->tensor_count * sizeof(*order));
    if (!order)
        return fail_at(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    for (uint64_t i = 0; i < g->tensor_count; i++)
        order[i] = &g->tensors[i];
    qsort(order, (size_t)g->tensor_count, sizeof(*order), compare_by_offset);
    clattn_status s = CLATTN_OK;
    for (uint64_t i = 1; i < g->tensor_count && s == CLATTN_OK; i++) {
        const clattn_gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->file_offset + a->bytes > b->file_offset) {
            const clattn_gguf_tensor *later = a < b ? b : a, *earlier = a < b ? a : b;
            char shown[80];
            show_name(shown, sizeof(shown), earlier->name.data, earlier->name.len);
            set_field(r, "tensor", (uint64_t)(later - g->tensors), &later->name);
            s = FAIL(r, "data [%llu, %llu) overlaps tensor %llu ('%s') at [%llu, %llu)",
                     (unsigned long long)(later->file_offset - g->data_offset),
                     (unsigned long long)(later->file_offset - g->data_offset + later->bytes),
                     (unsigned long long)(earlier - g->tensors), shown,
                     (unsigned long long)(earlier->file_offset - g->data_offset),
                     (unsigned long long)(earlier->file_offset - g->data_offset + earlier->bytes));
        }
    }
    free(order);
    return s;
}

/* ---- opening ---- */

static clattn_status read_alignment(gguf_reader *r, clattn_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < g->kv_count; i++) {
        const clattn_gguf_kv *kv = &g->kv[i];
        if (kv->key.len != strlen(GGUF_ALIGNMENT_KEY) ||
            memcmp(kv->key.data, GGUF_ALIGNMENT_KEY, (size_t)kv->key.len) != 0)
            continue;
        set_field(r, "metadata", i, &kv->key);
        if (kv->type != CLATTN_GGUF_UINT32)
            return FAIL(r, "%s %s, not a uint32", article(kv->type), value_type_name(kv->type));
        if (kv->value.u64 == 0 || (kv->value.u64 & (kv->value.u64 - 1)) != 0)
            return FAIL(r, "alignment %llu is not a power of two",
                        (unsigned long long)kv->value.u64);
        g->alignment = kv->value.u64;
    }
    return CLATTN_OK;
}

static clattn_status parse(gguf_reader *r, clattn_gguf *g)
{
    snprintf(r->field, sizeof(r->field), "header");
    unsigned char magic[4];
    clattn_status s = read_bytes(r, magic, 4, "magic");
    if (s != CLATTN_OK)
        return s;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char shown[8];
        show_name(shown, sizeof(shown), (const char *)magic, 4);
        return FAIL(r, "magic '%s' is not 'GGUF' (not a GGUF file)", shown);
    }
    if ((s = read_u32(r, &g->version, "version")) != CLATTN_OK)
        return s;
    if (g->version != 2 && g->version != 3) {
        const char *why = g->version == 1 ? " (version 1, with 32-bit lengths, is not read)"
                          : (g->version & 0xffff) == 0 ? " (a big-endian file?)"
                                                       : "";
        return FAIL(r, "version %u: only versions 2 and 3 are read%s", g->version, why);
    }
    if ((s = read_uint(r, 8, &g->tensor_count, "tensor count")) != CLATTN_OK ||
        (s = read_uint(r, 8, &g->kv_count, "metadata count")) != CLATTN_OK)
        return s;
    uint64_t left = bytes_left(r);
    if (g->kv_count > left / GGUF_MIN_KV_BYTES)
        return FAIL(r, "metadata count %llu exceeds the file (%llu bytes left, %d at least each)",
                    (unsigned long long)g->kv_count, (unsigned long long)left, GGUF_MIN_KV_BYTES);
    if (g->tensor_count > (left - g->kv_count * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES)
        return FAIL(r, "tensor count %llu exceeds the file (%llu bytes left, %d at least each)",
                    (unsigned long long)g->tensor_count, (unsigned long long)left,
                    GGUF_MIN_TENSOR_BYTES);
    /* both arrays are bounded by the file's size now; named[] serves both duplicate checks */
    uint64_t most = g->kv_count > g->tensor_count ? g->kv_count : g->tensor_count;
    g->kv = calloc((size_t)g->kv_count + 1, sizeof(*g->kv));
    g->tensors = calloc((size_t)g->tensor_count + 1, sizeof(*g->tensors));
    named *names = calloc((size_t)most + 1, sizeof(*names));
    if (!g->kv || !g->tensors || !names) {
        free(names);
        return fail_at(r, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                       "out of memory for %llu metadata entries and %llu tensors",
                       (unsigned long long)g->kv_count, (unsigned long long)g->tensor_count);
    }
    for (uint64_t i = 0; i < g->kv_count && s == CLATTN_OK; i++)
        s = read_kv(r, i, &g->kv[i]);
    for (uint64_t i = 0; i < g->kv_count && s == CLATTN_OK; i++)
        names[i] = (named){&g->kv[i].key, i};
    if (s == CLATTN_OK)
        s = check_unique(r, names, g->kv_count, "metadata");
    if (s == CLATTN_OK)
        s = read_alignment(r, g);
    for (uint64_t i = 0; i < g->tensor_count && s == CLATTN_OK; i++)
        s = read_tensor_info(r, i, &g->tensors[i]);
    for (uint64_t i = 0; i < g->tensor_count && s == CLATTN_OK; i++)
        names[i] = (named){&g->tensors[i].name, i};
    if (s == CLATTN_OK)
        s = check_unique(r, names, g->tensor_count, "tensor");
    free(names);
    if (s != CLATTN_OK)
        return s;
    /* the data section starts at the alignment after the infos */
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
    return place_tensors(r, g);
}

static char *copy_path(const char *path)
{
    size_t n = strlen(path);
    char *copy = malloc(n + 1);
    if (copy)
        memcpy(copy, path, n + 1);
    return copy;
}

/* Opens over a descriptor (fd >= 0) or bytes already copied into storage->file_copy. */
static clattn_status open_source(const char *function, const char *path, int fd,
                                 gguf_storage *storage, uint64_t size, clattn_gguf **out)
{
    clattn_gguf *g = calloc(1, sizeof(*g));
    char *path_copy = copy_path(path);
    unsigned char *window = fd >= 0 ? malloc(GGUF_WINDOW) : NULL;
    if (!g || !path_copy || (fd >= 0 && !window)) {
        free(g);
        free(path_copy);
        free(window);
        storage_free(storage);
        if (fd >= 0)
            close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    g->path = path_copy;
    g->fd = fd;
    g->file_size = size;
    g->storage = storage;
    gguf_reader r = {.function = function, .path = path, .g = g, .storage = storage,
                     .mem = storage->file_copy, .size = size, .window = window};
    /* an empty memory source has no copy: make reads see zero bytes, not a file */
    static const unsigned char nothing[1];
    if (fd < 0 && !r.mem)
        r.mem = nothing;
    clattn_status s = parse(&r, g);
    free(window);
    if (s != CLATTN_OK) {
        clattn__gguf_close(&g);
        return s;
    }
    *out = g;
    return CLATTN_OK;
}

clattn_status clattn__gguf_open(const char *function, const char *path, clattn_gguf **out)
{
    *out = NULL;
    int fd;
    size_t size;
    clattn_status s = clattn__open_regular(function, path, &fd, &size);
    if (s != CLATTN_OK)
        return s;
    gguf_storage *storage = calloc(1, sizeof(*storage));
    if (!storage) {
        close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    return open_source(function, path, fd, storage, size, out);
}

clattn_status clattn__gguf_open_memory(const char *function, const char *path,
                                       const void *bytes, size_t size, clattn_gguf **out)
{
    *out = NULL;
    if (!path)
        path = "<memory>";
    gguf_storage *storage = calloc(1, sizeof(*storage));
    if (storage && size > 0 && (storage->file_copy = malloc(size)) != NULL)
        memcpy(storage->file_copy, bytes, size);
    if (!storage || (size > 0 && !storage->file_copy)) {
        storage_free(storage);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of memory for a copy of %zu bytes", size);
    }
    return open_source(function, path, -1, storage, size, out);
}

void clattn__gguf_close(clattn_gguf **g)
{
    if (!g || !*g)
        return;
    clattn_gguf *x = *g;
    if (x->fd >= 0)
        close(x->fd);
    storage_free(x->storage);
    free(x->kv);
    free(x->tensors);
    free(x->path);
    free(x);
    *g = NULL;
}

/* ---- look-ups ---- */

static bool is_name(const clattn_gguf_string *s, const char *name)
{
    size_t n = strlen(name);
    return s->len == n && memcmp(s->data, name, n) == 0;
}

const clattn_gguf_kv *clattn__gguf_find(const clattn_gguf *g, const char *key)
{
    if (!g || !key)
        return NULL;
    for (uint64_t i = 0; i < g->kv_count; i++)
        if (is_name(&g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const clattn_gguf_tensor *clattn__gguf_tensor(const clattn_gguf *g, const char *name)
{
    if (!g || !name)
        return NULL;
    for (uint64_t i = 0; i < g->tensor_count; i++)
        if (is_name(&g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}

/* "a uint32", "an array of string": a value's kind for messages. */
static void describe(const clattn_gguf_kv *kv, char *dst, size_t cap)
{
    if (kv->type == CLATTN_GGUF_ARRAY)
        snprintf(dst, cap, "an array of %s", value_type_name(kv->array_type));
    else
        snprintf(dst, cap, "%s %s", article(kv->type), value_type_name(kv->type));
}

/* A value's kind as one bit: a scalar's type, or an array's element type among the arrays'
 * (element types are never ARRAY, so the two ranges of bits do not meet). */
#define SCALAR_KIND(type) (UINT32_C(1) << (type))
#define ARRAY_KIND(type) (UINT32_C(1) << (16 + (type)))
#define SIGNED_KINDS                                                                     \
    (SCALAR_KIND(CLATTN_GGUF_INT8) | SCALAR_KIND(CLATTN_GGUF_INT16) |                   \
     SCALAR_KIND(CLATTN_GGUF_INT32) | SCALAR_KIND(CLATTN_GGUF_INT64))
#define INTEGER_KINDS                                                                    \
    (SIGNED_KINDS | SCALAR_KIND(CLATTN_GGUF_UINT8) | SCALAR_KIND(CLATTN_GGUF_UINT16) |  \
     SCALAR_KIND(CLATTN_GGUF_UINT32) | SCALAR_KIND(CLATTN_GGUF_UINT64))

static uint32_t kind_of(const clattn_gguf_kv *kv)
{
    return kv->type == CLATTN_GGUF_ARRAY ? ARRAY_KIND(kv->array_type) : SCALAR_KIND(kv->type);
}

/* Looks `key` up and checks that its kind is one of `kinds` (`wanted` names them in the
 * message): *kv NULL with CLATTN_OK when missing and `optional`. */
static clattn_status lookup(const clattn_gguf *g, const char *function, const char *key,
                            bool optional, uint32_t kinds, const char *wanted,
                            const clattn_gguf_kv **kv)
{
    *kv = clattn__gguf_find(g, key);
    if (!*kv)
        return optional ? CLATTN_OK
                        : clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                                          "missing '%s'", key);
    if (kind_of(*kv) & kinds)
        return CLATTN_OK;
    char kind[48];
    describe(*kv, kind, sizeof(kind));
    return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT, "'%s' is %s, not %s", key,
                           kind, wanted);
}

static clattn_status get_u64(const clattn_gguf *g, const char *function, const char *key,
                             bool optional, uint64_t fallback, uint64_t *value)
{
    const clattn_gguf_kv *kv;
    clattn_status s = lookup(g, function, key, optional, INTEGER_KINDS, "an integer", &kv);
    if (s != CLATTN_OK)
        return s;
    if (kv && (kind_of(kv) & SIGNED_KINDS) && kv->value.i64 < 0)
        return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                               "'%s' is %lld, not a count (negative)", key,
                               (long long)kv->value.i64);
    *value = kv ? kv->value.u64 : fallback;
    return CLATTN_OK;
}

clattn_status clattn__gguf_get_u64(const clattn_gguf *g, const char *function, const char *key,
                                   uint64_t *value)
{
    return get_u64(g, function, key, false, 0, value);
}

clattn_status clattn__gguf_get_u64_or(const clattn_gguf *g, const char *function,
                                      const char *key, uint64_t fallback, uint64_t *value)
{
    return get_u64(g, function, key, true, fallback, value);
}

clattn_status clattn__gguf_get_f64_or(const clattn_gguf *g, const char *function,
                                      const char *key, double fallback, double *value)
{
    const clattn_gguf_kv *kv;
    clattn_status s =
        lookup(g, function, key, true,
               SCALAR_KIND(CLATTN_GGUF_FLOAT32) | SCALAR_KIND(CLATTN_GGUF_FLOAT64),
               "a float32 or float64", &kv);
    if (s == CLATTN_OK)
        *value = kv ? kv->value.f64 : fallback;
    return s;
}

clattn_status clattn__gguf_get_bool_or(const clattn_gguf *g, const char *function,
                                       const char *key, bool fallback, bool *value)
{
    const clattn_gguf_kv *kv;
    clattn_status s =
        lookup(g, function, key, true, SCALAR_KIND(CLATTN_GGUF_BOOL), "a bool", &kv);
    if (s == CLATTN_OK)
        *value = kv ? kv->value.u64 != 0 : fallback;
    return s;
}

clattn_status clattn__gguf_get_string(const clattn_gguf *g, const char *function,
                                      const char *key, bool optional,
                                      const clattn_gguf_string **value)
{
    const clattn_gguf_kv *kv;
    clattn_status s =
        lookup(g, function, key, optional, SCALAR_KIND(CLATTN_GGUF_STRING), "a string", &kv);
    *value = s == CLATTN_OK && kv ? &kv->value.str : NULL;
    return s;
}

clattn_status clattn__gguf_get_array(const clattn_gguf *g, const char *function,
                                     const char *key, clattn_gguf_value_type type, bool optional,
                                     const void **data, uint64_t *count)
{
    const clattn_gguf_kv *kv;
    char wanted[48];
    snprintf(wanted, sizeof(wanted), "an array of %s", value_type_name(type));
    uint32_t kinds = type <= CLATTN_GGUF_FLOAT64 ? ARRAY_KIND(type) : 0;
    clattn_status s = lookup(g, function, key, optional, kinds, wanted, &kv);
    *data = s == CLATTN_OK && kv ? kv->array : NULL;
    *count = s == CLATTN_OK && kv ? kv->count : 0;
    return s;
}

/* ---- tensor data ---- */

clattn_status clattn__gguf_read(const clattn_gguf *g, const char *function,
                                const clattn_gguf_tensor *t, uint64_t offset, void *dst,
                                size_t count)
{
    uint64_t index = (uint64_t)(t - g->tensors);
    char shown[80];
    show_name(shown, sizeof(shown), t->name.data, t->name.len);
    if (offset > t->bytes || count > t->bytes - offset) {
        if (t->bytes == 0 && !clattn__ggml_type_info(t->type, NULL, NULL, NULL))
            return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                                   "tensor %llu ('%s'): type %u has no known layout",
                                   (unsigned long long)index, shown, t->type);
        return clattn__fail_in(function, g->path, CLATTN_ERROR_INVALID_ARGUMENT,
                               "tensor %llu ('%s'): %zu bytes at byte %llu of its %llu",
                               (unsigned long long)index, shown, count,
                               (unsigned long long)offset, (unsigned long long)t->bytes);
    }
    if (count == 0)
        return CLATTN_OK;
    const gguf_storage *storage = g->storage;
    if (storage->file_copy) {
        memcpy(dst, storage->file_copy + t->file_offset + offset, count);
        return CLATTN_OK;
    }
    return clattn__read_at(function, g->path, g->fd, (size_t)(t->file_offset + offset), dst,
                           count);
}
