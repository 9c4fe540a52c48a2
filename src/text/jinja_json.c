/* JSON and template values: jansson values in (messages, tools), and the tojson filter out —
 * Python's json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...), as
 * transformers overrides Jinja's own tojson. */
#include "jinja.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jv jinja_from_json(struct jinja *j, const json_t *json) {
  jinja_step(j, 0);
  if (++j->depth > j->depth_limit)
    jinja_fail(j, 0, "the JSON input nests deeper than %d", j->depth_limit);
  struct jv v = jv_none();
  switch (json_typeof(json)) {
  case JSON_OBJECT: {
    v = jv_dict_new(j, json_object_size(json));
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)json, key, value) {
      struct jv k = jv_str_copy(j, key, strlen(key));
      jv_dict_set(j, v, k.u.s, jinja_from_json(j, value));
    }
    break;
  }
  case JSON_ARRAY: {
    v = jv_list_new(j, json_array_size(json));
    size_t index;
    json_t *value;
    json_array_foreach(json, index, value) jv_list_push(j, v, jinja_from_json(j, value));
    break;
  }
  case JSON_STRING:
    v = jv_str_copy(j, json_string_value(json), json_string_length(json));
    break;
  case JSON_INTEGER:
    v = jv_int((int64_t)json_integer_value(json));
    break;
  case JSON_REAL:
    v = jv_float(json_real_value(json));
    break;
  case JSON_TRUE:
    v = jv_bool(true);
    break;
  case JSON_FALSE:
    v = jv_bool(false);
    break;
  case JSON_NULL:
    break;
  }
  j->depth--;
  return v;
}

/* ensure_ascii: a code point from byte k as \uXXXX (a surrogate pair above U+FFFF) */
static size_t write_ascii_escape(struct jinja *j, struct jbuf *b, struct jstr s, size_t k) {
  const unsigned char *u = (const unsigned char *)s.p + k;
  size_t left = s.n - k, len = 1;
  uint32_t cp = u[0];
  if (cp >= 0xC0 && cp < 0xE0 && left >= 2) {
    cp = (cp & 0x1F) << 6 | (u[1] & 0x3F);
    len = 2;
  } else if (cp >= 0xE0 && cp < 0xF0 && left >= 3) {
    cp = (cp & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
    len = 3;
  } else if (cp >= 0xF0 && left >= 4) {
    cp = (cp & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 | (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    len = 4;
  }
  char hex[16];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    snprintf(hex, sizeof hex, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    snprintf(hex, sizeof hex, "\\u%04x", cp);
  }
  jbuf_puts(j, b, hex);
  return len;
}

static void write_json_string(struct jinja *j, struct jbuf *b, struct jstr s, bool ensure_ascii) {
  jbuf_puts(j, b, "\"");
  size_t start = 0;
  for (size_t k = 0; k < s.n; k++) {
    unsigned char c = (unsigned char)s.p[k];
    const char *esc = NULL;
    char hex[8];
    if (c >= 0x80 && ensure_ascii) {
      jbuf_put(j, b, s.p + start, k - start);
      k += write_ascii_escape(j, b, s, k) - 1;
      start = k + 1;
      continue;
    }
    switch (c) {
    case '"':
      esc = "\\\"";
      break;
    case '\\':
      esc = "\\\\";
      break;
    case '\n':
      esc = "\\n";
      break;
    case '\r':
      esc = "\\r";
      break;
    case '\t':
      esc = "\\t";
      break;
    case '\b':
      esc = "\\b";
      break;
    case '\f':
      esc = "\\f";
      break;
    default:
      if (c < 0x20) {
        snprintf(hex, sizeof hex, "\\u%04x", c);
        esc = hex;
      }
    }
    if (esc) {
      jbuf_put(j, b, s.p + start, k - start);
      jbuf_puts(j, b, esc);
      start = k + 1;
    }
  }
  jbuf_put(j, b, s.p + start, s.n - start);
  jbuf_puts(j, b, "\"");
}

struct json_style {
  const struct jstr *indent;
  struct jstr item_sep, key_sep;
  bool sort_keys;
  bool ensure_ascii;
};

static void newline_indent(struct jinja *j, struct jbuf *b, const struct json_style *style, int level) {
  jbuf_puts(j, b, "\n");
  for (int k = 0; k < level; k++)
    jbuf_put(j, b, style->indent->p, style->indent->n);
}

static int compare_keys(const void *x, const void *y) {
  const struct jstr *a = *(const struct jstr *const *)x, *b = *(const struct jstr *const *)y;
  size_t n = a->n < b->n ? a->n : b->n;
  int c = n ? memcmp(a->p, b->p, n) : 0;
  if (c)
    return c;
  return a->n < b->n ? -1 : a->n > b->n;
}

static void write_json(struct jinja *j, int line, struct jbuf *b, struct jv v,
                       const struct json_style *style, int level) {
  jinja_step(j, line);
  if (level > j->depth_limit)
    jinja_fail(j, line, "tojson: the value nests deeper than %d", j->depth_limit);
  char text[40];
  switch (v.kind) {
  case JV_NONE:
    jbuf_puts(j, b, "null");
    return;
  case JV_BOOL:
    jbuf_puts(j, b, v.u.b ? "true" : "false");
    return;
  case JV_INT:
    snprintf(text, sizeof text, "%lld", (long long)v.u.i);
    jbuf_puts(j, b, text);
    return;
  case JV_FLOAT:
    if (isnan(v.u.f))
      jbuf_puts(j, b, "NaN");
    else if (isinf(v.u.f))
      jbuf_puts(j, b, v.u.f < 0 ? "-Infinity" : "Infinity");
    else {
      jv_format_float(v.u.f, text);
      jbuf_puts(j, b, text);
    }
    return;
  case JV_STRING:
    write_json_string(j, b, v.u.s, style->ensure_ascii);
    return;
  case JV_LIST: {
    struct jlist *l = v.u.list;
    if (l->generator)
      break;
    if (l->n == 0) {
      jbuf_puts(j, b, "[]");
      return;
    }
    jbuf_puts(j, b, "[");
    for (size_t k = 0; k < l->n; k++) {
      if (k)
        jbuf_put(j, b, style->item_sep.p, style->item_sep.n);
      if (style->indent)
        newline_indent(j, b, style, level + 1);
      write_json(j, line, b, l->items[k], style, level + 1);
    }
    if (style->indent)
      newline_indent(j, b, style, level);
    jbuf_puts(j, b, "]");
    return;
  }
  case JV_DICT: {
    struct jdict *d = v.u.dict;
    if (d->namespace)
      break;
    if (d->n == 0) {
      jbuf_puts(j, b, "{}");
      return;
    }
    const struct jstr **order = jinja_alloc(j, d->n * sizeof *order);
    for (size_t k = 0; k < d->n; k++)
      order[k] = &d->keys[k];
    if (style->sort_keys)
      qsort(order, d->n, sizeof *order, compare_keys);
    jbuf_puts(j, b, "{");
    for (size_t k = 0; k < d->n; k++) {
      if (k)
        jbuf_put(j, b, style->item_sep.p, style->item_sep.n);
      if (style->indent)
        newline_indent(j, b, style, level + 1);
      struct jv key = jv_key_value(j, *order[k]);
      if (key.kind != JV_STRING) { /* json.dumps writes 1, 1.5, None keys as "1", "1.5", "null" */
        struct jbuf key_text = {0};
        if (key.kind == JV_NONE)
          jbuf_puts(j, &key_text, "null");
        else
          jv_write_str(j, &key_text, key);
        key = jbuf_take(&key_text);
      }
      write_json_string(j, b, key.u.s, style->ensure_ascii);
      jbuf_put(j, b, style->key_sep.p, style->key_sep.n);
      write_json(j, line, b, *jv_dict_get(v, *order[k]), style, level + 1);
    }
    if (style->indent)
      newline_indent(j, b, style, level);
    jbuf_puts(j, b, "}");
    return;
  }
  default:
    break;
  }
  jinja_fail(j, line, "tojson: Object of type %s is not JSON serializable",
             v.kind == JV_LIST ? "generator" : jv_type_name(v));
}

void jinja_write_json(struct jinja *j, int line, struct jbuf *b, struct jv v, const struct jstr *indent,
                      const struct jstr *item_sep, const struct jstr *key_sep, bool sort_keys,
                      bool ensure_ascii) {
  struct json_style style = {.indent = indent, .sort_keys = sort_keys, .ensure_ascii = ensure_ascii};
  style.item_sep = item_sep ? *item_sep : jstr_c(indent ? "," : ", ");
  style.key_sep = key_sep ? *key_sep : jstr_c(": ");
  write_json(j, line, b, v, &style, 0);
}
