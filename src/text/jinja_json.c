/* JSON and template values: jansson values in (messages, tools), and the tojson filter out —
 * Python's json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...), as
 * transformers overrides Jinja's own tojson. */
#include "jinja.h"

#include <jansson.h>
#include <math.h>
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

struct json_style {
  const struct jstr *indent;
  struct jstr item_sep, key_sep;
  bool sort_keys;
  enum jquote quote; /* JQUOTE_JSON, or JQUOTE_JSON_ASCII for ensure_ascii */
};

static void newline_indent(struct jinja *j, struct jbuf *b, const struct json_style *style, int level) {
  jbuf_puts(j, b, "\n");
  for (int k = 0; k < level; k++)
    jbuf_put(j, b, style->indent->p, style->indent->n);
}

/* Before item k of a list or dict at `level`: the item separator (after the first item), then,
 * with an indent, a new line. */
static void item_start(struct jinja *j, struct jbuf *b, const struct json_style *style, int level, size_t k) {
  if (k)
    jbuf_put(j, b, style->item_sep.p, style->item_sep.n);
  if (style->indent)
    newline_indent(j, b, style, level + 1);
}

/* After the last item: with an indent, a new line at `level`; then the closing bracket. */
static void container_end(struct jinja *j, struct jbuf *b, const struct json_style *style, int level,
                          const char *close) {
  if (style->indent)
    newline_indent(j, b, style, level);
  jbuf_puts(j, b, close);
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
  switch (v.kind) {
  case JV_NONE:
    jbuf_puts(j, b, "null");
    return;
  case JV_BOOL:
    jbuf_puts(j, b, v.u.b ? "true" : "false");
    return;
  case JV_INT:
  case JV_FLOAT: /* as Python's str, but for json.dumps' NaN and Infinity */
    if (v.kind == JV_FLOAT && isnan(v.u.f))
      jbuf_puts(j, b, "NaN");
    else if (v.kind == JV_FLOAT && isinf(v.u.f))
      jbuf_puts(j, b, v.u.f < 0 ? "-Infinity" : "Infinity");
    else
      jv_write_str(j, b, v);
    return;
  case JV_STRING:
    jbuf_put_quoted(j, b, v.u.s, style->quote);
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
      item_start(j, b, style, level, k);
      write_json(j, line, b, l->items[k], style, level + 1);
    }
    container_end(j, b, style, level, "]");
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
      item_start(j, b, style, level, k);
      struct jv key = jv_key_value(j, *order[k]);
      if (key.kind != JV_STRING) { /* json.dumps writes 1, 1.5, None keys as "1", "1.5", "null" */
        struct jbuf key_text = {0};
        if (key.kind == JV_NONE)
          jbuf_puts(j, &key_text, "null");
        else
          jv_write_str(j, &key_text, key);
        key = jbuf_take(&key_text);
      }
      jbuf_put_quoted(j, b, key.u.s, style->quote);
      jbuf_put(j, b, style->key_sep.p, style->key_sep.n);
      write_json(j, line, b, *jv_dict_get(v, *order[k]), style, level + 1);
    }
    container_end(j, b, style, level, "}");
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
  struct json_style style = {.indent = indent, .sort_keys = sort_keys,
                             .quote = ensure_ascii ? JQUOTE_JSON_ASCII : JQUOTE_JSON};
  style.item_sep = item_sep ? *item_sep : jstr_c(indent ? "," : ", ");
  style.key_sep = key_sep ? *key_sep : jstr_c(": ");
  write_json(j, line, b, v, &style, 0);
}
