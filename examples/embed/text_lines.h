/* One text per line, as embed and rerank read their --input: "\n" or "\r\n" ends a line, a last
 * line without an end counts, an empty line is an empty text. */
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

/* The texts a command works on: the lines of its --input, or its arguments. */
typedef struct text_list {
    char *buffer;       /* the whole --input (the lines point into it); NULL for arguments */
    const char **texts; /* [count] */
    size_t *lengths;    /* [count]: bytes, the line ends left out */
    size_t count;
} text_list;

/* The options' check: texts come either from --input (`input` not NULL) or as arg_count
 * arguments, never both, never neither. `plural` names them in the messages ("texts",
 * "documents"). Returns -1 when good, else usage_error's status (cli.h). */
int text_list_check_source(const char *input, char *const *args, size_t arg_count,
                           const char *plural);

/* With `input` (a path, "-": standard input), its lines; without, args[0 .. arg_count). `what`
 * names a text in the error for an input without lines ("text", "document"). Returns 0, or the
 * exit status after a message on stderr (cli.h: runtime_error); free *t in either case. */
int text_list_load(const char *input, char *const *args, size_t arg_count, const char *what,
                   text_list *t);

void text_list_free(text_list *t);

#endif /* CLATTN_EXAMPLES_TEXT_LINES_H */
