/* Python's str.strip() on UTF-8 (text_strip.h). */
#include "text_strip.h"

#include "tokenizer_internal.h"

#include <stdbool.h>
#include <stdint.h>

bool clattn__is_python_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

void clattn__strip_whitespace(const char **text, size_t *length)
{
    const unsigned char *s = (const unsigned char *)*text;
    size_t start = 0, end = *length;
    uint32_t cp;
    size_t n;
    while (start < end && (n = clattn__utf8_decode(s + start, end - start, &cp)) > 0 &&
           clattn__is_python_space(cp))
        start += n;
    while (end > start) {
        /* The last code point: back over continuation bytes to its lead (at most 3). */
        size_t lead = end - 1;
        while (lead > start && end - lead < 4 && (s[lead] & 0xC0u) == 0x80u)
            lead--;
        n = clattn__utf8_decode(s + lead, end - lead, &cp);
        if (n != end - lead || !clattn__is_python_space(cp))
            break;
        end = lead;
    }
    *text += start;
    *length = end - start;
}
