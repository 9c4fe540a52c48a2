/* One text per line, and the texts of a command (text_lines.h). */
#include "text_lines.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
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

/* Reads a whole file ("-": stdin) into memory. */
static int read_all(const char *path, char **data, size_t *size)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return runtime_error("--input: %s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            char *grown = cap < ((size_t)1 << 40) ? realloc(buf, cap * 2) : NULL;
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool failed = !buf || ferror(f);
    int saved = errno;
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(buf);
        return runtime_error("--input: %s: %s", path,
                             buf ? strerror(saved) : "out of memory reading the file");
    }
    *data = buf;
    *size = len;
    return 0;
}

int text_list_check_source(const char *input, char *const *args, size_t arg_count,
                           const char *plural)
{
    if (input && arg_count)
        return usage_error("give %s either with --input or as arguments, not both ('%s')",
                           plural, args[0]);
    if (!input && !arg_count)
        return usage_error("no %s: give them as arguments or with --input FILE", plural);
    return -1;
}

int text_list_load(const char *input, char *const *args, size_t arg_count, const char *what,
                   text_list *t)
{
    memset(t, 0, sizeof(*t));
    if (!input) {
        t->count = arg_count;
        t->texts = calloc(t->count, sizeof(*t->texts));
        t->lengths = calloc(t->count, sizeof(*t->lengths));
        if (!t->texts || !t->lengths)
            return runtime_error("out of memory");
        for (size_t i = 0; i < t->count; i++)
            t->texts[i] = args[i], t->lengths[i] = strlen(args[i]);
        return 0;
    }
    size_t size = 0;
    int rc = read_all(input, &t->buffer, &size);
    if (rc)
        return rc;
    if (!split_lines(t->buffer, size, &t->texts, &t->lengths, &t->count))
        return runtime_error("out of memory for the lines of %zu bytes", size);
    if (t->count == 0)
        return runtime_error("--input: %s holds no %s (it is empty)", input, what);
    return 0;
}

void text_list_free(text_list *t)
{
    free(t->buffer), free(t->texts), free(t->lengths);
    memset(t, 0, sizeof(*t));
}
