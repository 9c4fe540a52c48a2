/* Python's str.strip() on UTF-8: what sentence-transformers does to every text (and its
 * CrossEncoder to both texts of a pair) before its tokenizer sees it. */
#ifndef CLATTN_TEXT_STRIP_H
#define CLATTN_TEXT_STRIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Moves *text forward past, and shortens *length by, the whitespace at both ends of the
 * `*length` bytes: the code points for which Python's str.isspace() is true (U+0009..U+000D,
 * U+001C..U+001F, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000). Bytes that are not valid UTF-8 end the stripping on their side (the
 * tokenizer then reports them). */
void clattn__strip_whitespace(const char **text, size_t *length);

/* Whether Python's str.isspace() is true for the code point (the list above). */
bool clattn__is_python_space(uint32_t cp);

#endif /* CLATTN_TEXT_STRIP_H */
