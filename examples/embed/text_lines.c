/* One text per line (text_lines.h). */
#include "text_lines.h"

#include <stdlib.h>
#include <string.h>

size_t count_lines(const char *buffer, size_t size, bool ends_file)
{
    size_t lines = 0;
    for (const char *p = buffer, *end = buffer + size; p < end; p++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (!p)
            break;
        lines++;
    }
    if (ends_file && size > 0 && buffer[size - 1] != '\n')
        lines++;
    return lines;
}

bool split_lines(const char *buffer, size_t size, const char ***texts, size_t **lengths,
                 size_t *count)
{
    size_t lines = count_lines(buffer, size, true);
    *texts = calloc(lines ? lines : 1, sizeof(**texts));
    *lengths = calloc(lines ? lines : 1, sizeof(**lengths));
    *count = 0;
    if (!*texts || !*lengths) {
        free(*texts), free(*lengths);
        *texts = NULL, *lengths = NULL;
        return false;
    }
    for (size_t start = 0; start < size;) {
        const char *newline = memchr(buffer + start, '\n', size - start);
        size_t end = newline ? (size_t)(newline - buffer) : size;
        size_t len = end - start;
        if (end < size && len > 0 && buffer[end - 1] == '\r')
            len--;
        (*texts)[*count] = buffer + start;
        (*lengths)[(*count)++] = len;
        start = end + 1;
    }
    return true;
}
