/*
 * What the server's request and response bodies share (body_json.h): a growable output buffer
 * with JSON strings, and the checks every body starts with.
 */
#include "body_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growable output buffer ---- */

bool sb_reserve(strbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->length + extra + 1 <= b->capacity)
        return true;
    size_t want = b->capacity ? b->capacity : 256;
    while (want < b->length + extra + 1) {
        if (want > ((size_t)-1) / 2) {
            b->failed = true;
            return false;
        }
        want *= 2;
    }
    char *p = realloc(b->data, want);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->capacity = want;
    return true;
}

void sb_append(strbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return;
    memcpy(b->data + b->length, s, n);
    b->length += n;
    b->data[b->length] = '\0';
}

void sb_puts(strbuf *b, const char *s)
{
    sb_append(b, s, strlen(s));
}

void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[128];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        sb_append(b, small, (size_t)n);
        return;
    }
    if (!sb_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->length, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->length += (size_t)n;
}

/* Returns the buffer (NULL when an append failed) and its length. */
char *sb_finish(strbuf *b, size_t *length)
{
    if (!b->failed && !b->data)
        sb_append(b, "", 0);
    if (b->failed) {
        free(b->data);
        *length = 0;
        return NULL;
    }
    *length = b->length;
    return b->data;
}

/* The length of the valid UTF-8 sequence at s[0 .. n), or 0 when it is not one. */
size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

/* A JSON string: quotes, escapes, and U+FFFD for bytes that are not UTF-8 (messages may quote
 * a client's bytes; the body must stay valid JSON). */
void sb_json_string(strbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    sb_append(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
            run++;
        sb_append(b, s + i, run - i);
        i = run;
        if (i >= n)
            break;
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_sequence(u + i, n - i);
            if (len) {
                sb_append(b, s + i, len);
                i += len;
            } else {
                sb_puts(b, "\\ufffd");
                i++;
            }
        }
    }
    sb_append(b, "\"", 1);
}

/* ---- the bodies ---- */

json_t *body_load_object(const char *body, size_t size, serve_api api, serve_error *err)
{
    if (size == 0) {
        serve_error_set(err, api, SERVE_ERROR_SYNTAX, NULL,
                        "the body is empty: send a JSON object (Content-Type: "
                        "application/json)");
        return NULL;
    }
    json_error_t jerr;
    /* Duplicate keys are refused (which one would count is ambiguous); "\u0000" is allowed in
     * strings: the tokenizer removes NUL as Hugging Face's does. */
    json_t *root = json_loadb(body, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        serve_error_set(err, api, SERVE_ERROR_SYNTAX, NULL,
                        "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
                        jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        serve_error_set(err, api, SERVE_ERROR_SYNTAX, NULL,
                        "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* An optional boolean field: absent or null leaves *out. */
bool body_get_bool(const json_t *root, const char *field, serve_api api, bool *out,
                     serve_error *err)
{
    const json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v)) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, field, "'%s' must be true or false",
                        field);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* An optional string field: absent or null gives NULL. */
bool body_get_string(const json_t *root, const char *field, serve_api api, const char **out,
                       serve_error *err)
{
    const json_t *v = json_object_get(root, field);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v)) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, field, "'%s' must be a string", field);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* The string s[0 .. length) (NULs allowed) made fit for a message, in out[0 .. size): cut at
 * a character boundary before size - 4 bytes and followed by "..." when longer, control
 * characters (NUL included) written as \u00XX, bytes that are not UTF-8 as \xXX. */
void body_displayable(char *out, size_t size, const char *s, size_t length)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < length) {
        size_t len = utf8_sequence(u + i, length - i);
        char piece[8];
        size_t n;
        if (!len || u[i] < 0x20 || u[i] == 0x7f) {
            n = (size_t)snprintf(piece, sizeof(piece), len ? "\\u%04x" : "\\x%02X", u[i]);
            len = 1;
        } else {
            memcpy(piece, s + i, len);
            n = len;
        }
        if (o + n > size - 4)
            break;
        memcpy(out + o, piece, n);
        o += n;
        i += len;
    }
    if (i < length) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* OpenAI's "model" (NULL: not given; `length` bytes, "\u0000" included) among the served
 * names: *index is its place (0 when not given, or accepted without being one of them); false
 * (404 model_not_found) for another name unless any is accepted. */
bool body_find_model_name(const char *model, size_t length, const char *const *names,
                          size_t name_count, bool accept_any, size_t *index, serve_error *err)
{
    *index = 0;
    if (!model || name_count == 0)
        return true;
    for (size_t i = 0; i < name_count; i++)
        if (strlen(names[i]) == length && memcmp(model, names[i], length) == 0) {
            *index = i;
            return true;
        }
    if (accept_any)
        return true;
    /* OpenAI's own message first, then what this server serves; the names as sent, each at
     * most 128 bytes (the served ones 64), so that the message (512 bytes) holds them whole. */
    char shown[132], listed[224] = "";
    size_t used = 0;
    for (size_t i = 0; i < name_count; i++) {
        char name[68];
        body_displayable(name, sizeof(name), names[i], strlen(names[i]));
        if (used + strlen(name) + 8 > sizeof(listed)) {
            snprintf(listed + used, sizeof(listed) - used, ", ...");
            break;
        }
        used += (size_t)snprintf(listed + used, sizeof(listed) - used, "%s`%s`", i ? ", " : "",
                                 name);
    }
    body_displayable(shown, sizeof(shown), model, length);
    serve_error_set(err, SERVE_API_OPENAI, SERVE_ERROR_MODEL_NOT_FOUND, NULL,
                    "The model `%s` does not exist or you do not have access to it. This "
                    "server serves %s (--served-model-name; --accept-any-model-name accepts "
                    "any name)",
                    shown, listed);
    return false;
}

