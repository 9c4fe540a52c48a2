/*
 * What the server's body parsers and formatters share (request.c: embeddings and scores;
 * chat_request.c: chat and completions): a growable output buffer that writes JSON strings
 * (U+FFFD for bytes that are not UTF-8), and the first checks of a body: JSON, an object, the
 * optional fields' types, OpenAI's "model" among the served names. Pure functions.
 */
#ifndef CLATTN_SERVE_BODY_JSON_H
#define CLATTN_SERVE_BODY_JSON_H

#include "request.h"

#include <jansson.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
    char *data;
    size_t length, capacity;
    bool failed; /* out of memory: every later append is a no-op */
} strbuf;

/* Appends (n bytes, a C string, printf's output); after a failed allocation every append is a
 * no-op and sb_finish gives NULL. */
void sb_append(strbuf *b, const char *s, size_t n);
/* Room for `extra` more bytes (and the NUL) after length; false after a failed allocation. */
bool sb_reserve(strbuf *b, size_t extra);
void sb_puts(strbuf *b, const char *s);
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0 .. n) as a JSON string: quoted, escaped, U+FFFD for bytes that are not UTF-8. */
void sb_json_string(strbuf *b, const char *s, size_t n);
/* The buffer (NUL-terminated; NULL when an append failed) and its length. */
char *sb_finish(strbuf *b, size_t *length);

/* The length of the valid UTF-8 sequence at s[0 .. n), or 0 when it is not one. */
size_t utf8_sequence(const unsigned char *s, size_t n);

/* The body as a JSON object (duplicate keys refused, "\u0000" allowed), else NULL and *err
 * (400: empty, not JSON, not an object). */
json_t *body_load_object(const char *body, size_t size, serve_api api, serve_error *err);
/* An optional boolean field: absent or null leaves *out. */
bool body_get_bool(const json_t *root, const char *field, serve_api api, bool *out,
                   serve_error *err);
/* An optional string field: absent or null gives NULL. */
bool body_get_string(const json_t *root, const char *field, serve_api api, const char **out,
                     serve_error *err);
/* s[0 .. length) made fit for a message in out[0 .. size): cut with "...", control
 * characters as \u00XX, bytes that are not UTF-8 as \xXX. */
void body_displayable(char *out, size_t size, const char *s, size_t length);
/* OpenAI's "model" (NULL: not given; `length` bytes) among the served names: *index its place
 * (0 when not given or accepted as any); false (404 model_not_found) for another name unless
 * accept_any. name_count 0: any name. */
bool body_find_model_name(const char *model, size_t length, const char *const *names,
                          size_t name_count, bool accept_any, size_t *index, serve_error *err);

#endif /* CLATTN_SERVE_BODY_JSON_H */
