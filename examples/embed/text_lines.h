/* One text per line, as embed reads its --input: "\n" or "\r\n" ends a line, a last line without
 * an end counts, an empty line is an empty text. */
#ifndef CLATTN_EXAMPLES_TEXT_LINES_H
#define CLATTN_EXAMPLES_TEXT_LINES_H

#include <stdbool.h>
#include <stddef.h>

/* The lines of buffer[0..size): texts[i] points into the buffer, lengths[i] leaves out the line
 * end. *texts and *lengths are allocated (free them); false when out of memory. */
bool split_lines(const char *buffer, size_t size, const char ***texts, size_t **lengths,
                 size_t *count);

/* How many lines split_lines finds in buffer[0..size) when `ends_file` (the buffer is the end of
 * the input); without it, the "\n" count (a piece of a file whose last line goes on). */
size_t count_lines(const char *buffer, size_t size, bool ends_file);

#endif /* CLATTN_EXAMPLES_TEXT_LINES_H */
