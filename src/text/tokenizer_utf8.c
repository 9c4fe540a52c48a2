/* UTF-8 decoding, encoding and validation for the tokenizer (strict: no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
#include "tokenizer_internal.h"

size_t clattn__utf8_decode(const unsigned char *s, size_t length, uint32_t *cp)
{
    if (length == 0)
        return 0;
    unsigned char b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t need;
    uint32_t value, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
        value = b0 & 0x1Fu;
        min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        value = b0 & 0x0Fu;
        min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        value = b0 & 0x07u;
        min = 0x10000;
    } else {
        return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
    }
    if (length < need)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        value = (value << 6) | (s[i] & 0x3Fu);
    }
    if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
        return 0;
    *cp = value;
    return need;
}

size_t clattn__utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

bool clattn__utf8_valid(const char *s, size_t length, size_t *bad_at)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < length) {
        uint32_t cp;
        size_t n = clattn__utf8_decode(u + i, length - i, &cp);
        if (n == 0 || cp == 0) {
            if (bad_at)
                *bad_at = i;
            return false;
        }
        i += n;
    }
    return true;
}
