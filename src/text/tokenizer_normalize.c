/* BERT's normaliser (cleaning, CJK spacing, accent stripping, lower-casing) and pre-tokeniser
 * (whitespace and punctuation splits), on code points, with utf8proc's Unicode data. The rules
 * are those of the tokenizers crate (normalizers/bert.rs, pre_tokenizers/bert.rs). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <utf8proc.h>

bool clattn__cps_push(clattn__cps *a, uint32_t cp)
{
    if (a->count == a->capacity) {
        size_t cap = a->capacity ? 2 * a->capacity : 64;
        if (cap > SIZE_MAX / sizeof(*a->data))
            return false;
        uint32_t *grown = realloc(a->data, cap * sizeof(*grown));
        if (!grown)
            return false;
        a->data = grown;
        a->capacity = cap;
    }
    a->data[a->count++] = cp;
    return true;
}

void clattn__cps_free(clattn__cps *a)
{
    free(a->data);
    a->data = NULL;
    a->count = a->capacity = 0;
}

bool clattn__is_whitespace(uint32_t cp)
{
    /* Unicode's White_Space property (stable since Unicode 6.3, when U+180E left it). */
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* BertNormalizer's is_control: "other" characters (Cc, Cf, Co, Cs), except \t \n \r.
 * The crate's comment names Cn too, but its unicode_categories tables list no unassigned code
 * point, so unassigned characters are kept (and become [UNK]): so are they here. */
static bool is_control(uint32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r')
        return false;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return true;
    default:
        return false;
    }
}

bool clattn__is_punctuation(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
        (cp >= 0x7B && cp <= 0x7E))
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

bool clattn__is_word_char(uint32_t cp)
{
    if (cp == 0x200C || cp == 0x200D)
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool clattn__is_chinese_char(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* Canonical decomposition of cp (Hangul included) appended to out, not yet reordered. */
static bool decompose(uint32_t cp, clattn__cps *out)
{
    utf8proc_int32_t buf[32];
    int last_boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 32,
                                                 UTF8PROC_DECOMPOSE, &last_boundclass);
    if (n < 0 || n > 32)
        return clattn__cps_push(out, cp); /* cannot happen for a valid code point */
    for (utf8proc_ssize_t i = 0; i < n; i++)
        if (!clattn__cps_push(out, (uint32_t)buf[i]))
            return false;
    return true;
}

static int combining_class(uint32_t cp)
{
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

/* The canonical ordering algorithm: a stable sort of each run of non-starters by class. */
static void canonical_order(uint32_t *cps, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int ci = combining_class(cps[i]);
        if (ci == 0)
            continue;
        size_t j = i;
        uint32_t cp = cps[i];
        while (j > 0) {
            int cj = combining_class(cps[j - 1]);
            if (cj == 0 || cj <= ci)
                break;
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = cp;
    }
}

/* Rust's char::to_lowercase: the full mapping without the conditional rules. The only
 * unconditional multi-character lower-case mapping in SpecialCasing.txt is U+0130. */
static bool push_lower(uint32_t cp, clattn__cps *out)
{
    if (cp == 0x130)
        return clattn__cps_push(out, 0x69) && clattn__cps_push(out, 0x307);
    return clattn__cps_push(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
}

/* NFC (the tokenizers crate's normalizer "NFC"): canonical decomposition, canonical order,
 * then canonical composition (utf8proc's, composition exclusions included), appended to out. */
static bool nfc(const uint32_t *in, size_t n, clattn__cps *out)
{
    clattn__cps d = {0};
    for (size_t i = 0; i < n; i++)
        if (!decompose(in[i], &d)) {
            clattn__cps_free(&d);
            return false;
        }
    canonical_order(d.data, d.count);
    utf8proc_ssize_t k = d.count ? utf8proc_normalize_utf32((utf8proc_int32_t *)d.data,
                                                            (utf8proc_ssize_t)d.count,
                                                            UTF8PROC_STABLE | UTF8PROC_COMPOSE)
                                 : 0;
    bool ok = k >= 0;
    for (utf8proc_ssize_t i = 0; ok && i < k; i++)
        ok = clattn__cps_push(out, d.data[i]);
    clattn__cps_free(&d);
    return ok;
}

bool clattn__normalize(const clattn__normalizer *norm, const uint32_t *in, size_t n,
                       clattn__cps *out)
{
    if (!norm->enabled) {
        for (size_t i = 0; i < n; i++)
            if (!clattn__cps_push(out, in[i]))
                return false;
        return true;
    }
    if (norm->nfc)
        return nfc(in, n, out);
    /* Cleaning and CJK spacing work character by character. */
    clattn__cps a = {0};
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = in[i];
        if (norm->clean_text) {
            if (cp == 0 || cp == 0xFFFD || is_control(cp))
                continue;
            if (clattn__is_whitespace(cp))
                cp = ' ';
        }
        bool ok;
        if (norm->handle_chinese_chars && clattn__is_chinese_char(cp))
            ok = clattn__cps_push(&a, ' ') && clattn__cps_push(&a, cp) &&
                 clattn__cps_push(&a, ' ');
        else
            ok = clattn__cps_push(&a, cp);
        if (!ok) {
            clattn__cps_free(&a);
            return false;
        }
    }
    /* Accents: NFD of the whole piece (canonical order spans characters), then drop Mn. */
    if (norm->strip_accents) {
        clattn__cps d = {0};
        for (size_t i = 0; i < a.count; i++)
            if (!decompose(a.data[i], &d)) {
                clattn__cps_free(&a);
                clattn__cps_free(&d);
                return false;
            }
        canonical_order(d.data, d.count);
        size_t k = 0;
        for (size_t i = 0; i < d.count; i++)
            if (utf8proc_category((utf8proc_int32_t)d.data[i]) != UTF8PROC_CATEGORY_MN)
                d.data[k++] = d.data[i];
        d.count = k;
        clattn__cps_free(&a);
        a = d;
    }
    bool ok = true;
    for (size_t i = 0; i < a.count && ok; i++)
        ok = norm->lowercase ? push_lower(a.data[i], out) : clattn__cps_push(out, a.data[i]);
    clattn__cps_free(&a);
    return ok;
}

bool clattn__pre_tokenize(const uint32_t *cps, size_t n,
                          bool (*word)(void *user, size_t start, size_t end), void *user)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        bool space = clattn__is_whitespace(cps[i]);
        if (space || clattn__is_punctuation(cps[i])) {
            if (start < i && !word(user, start, i))
                return false;
            if (!space && !word(user, i, i + 1))
                return false;
            start = i + 1;
        }
    }
    if (start < n && !word(user, start, n))
        return false;
    return true;
}
