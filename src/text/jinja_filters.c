/* Jinja's filters and tests that chat templates use, with Jinja 3.1's semantics (and
 * transformers' tojson). Generators (what map, select, items, unique, reverse return) are lists
 * marked as such: always true, without len() or indexing, as in Python. */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jv (*filter_fn)(struct jinja *j, int line, struct jv value, struct jargs *args);

static struct jv as_string(struct jinja *j, struct jv v) { return jv_to_string(j, v); }

static struct jv generator(struct jv list) {
  list.u.list->generator = true;
  list.u.list->tuple = false;
  return list;
}

/* The items of an iterable: a list, a dict's keys, a string's characters, nothing for
 * undefined. */
static struct jlist *items_of(struct jinja *j, int line, const char *what, struct jv v) {
  switch (v.kind) {
  case JV_LIST:
    return v.u.list;
  case JV_UNDEFINED:
    return jv_list_new(j, 0).u.list;
  case JV_DICT:
    if (!v.u.dict->namespace) {
      struct jv keys = jv_list_new(j, v.u.dict->n);
      for (size_t k = 0; k < v.u.dict->n; k++)
        jv_list_push(j, keys, jv_key_value(j, v.u.dict->keys[k]));
      return keys.u.list;
    }
    break;
  case JV_STRING: {
    struct jv chars = jv_list_new(j, v.u.s.n);
    for (size_t k = 0; k < v.u.s.n;) {
      size_t e = k + 1;
      while (e < v.u.s.n && ((unsigned char)v.u.s.p[e] & 0xC0) == 0x80)
        e++;
      jv_list_push(j, chars, jv_str((struct jstr){v.u.s.p + k, e - k}));
      k = e;
    }
    return chars.u.list;
  }
  default:
    break;
  }
  jinja_fail(j, line, "%s: '%s' object is not iterable", what, jv_type_name(v));
}

/* item[attribute] for each dotted part, as Jinja's make_attrgetter */
static struct jv get_attribute(struct jinja *j, int line, struct jv item, struct jv attribute) {
  if (attribute.kind == JV_INT) {
    if (item.kind == JV_LIST && attribute.u.i >= 0 && (size_t)attribute.u.i < item.u.list->n)
      return item.u.list->items[attribute.u.i];
    return jv_undefined((struct jstr){"", 0});
  }
  if (attribute.kind != JV_STRING)
    jinja_fail(j, line, "attribute names must be strings or integers");
  struct jstr rest = attribute.u.s;
  for (;;) {
    const char *dot = memchr(rest.p, '.', rest.n);
    struct jstr part = {rest.p, dot ? (size_t)(dot - rest.p) : rest.n};
    if (item.kind == JV_UNDEFINED)
      return item;
    if (item.kind == JV_DICT && !item.u.dict->namespace) {
      struct jv *v = jv_dict_get(item, part);
      item = v ? *v : jinja_getattr(j, line, item, part);
    } else if (item.kind == JV_LIST && part.n && part.p[0] >= '0' && part.p[0] <= '9') {
      size_t index = (size_t)strtoul(jv_str_copy(j, part.p, part.n).u.s.p, NULL, 10);
      item = index < item.u.list->n ? item.u.list->items[index] : jv_undefined(part);
    } else {
      item = jinja_getattr(j, line, item, part);
    }
    if (!dot)
      return item;
    rest.n -= part.n + 1;
    rest.p = dot + 1;
  }
}

static int64_t int_arg(struct jinja *j, int line, const char *what, struct jv *v, int64_t fallback) {
  if (!v || v->kind == JV_NONE)
    return fallback;
  if (v->kind == JV_BOOL)
    return v->u.b;
  if (v->kind != JV_INT)
    jinja_fail(j, line, "%s: expected an integer, got %s", what, jv_type_name(*v));
  return v->u.i;
}

static bool bool_arg(struct jv *v) { return v && jv_truthy(*v); }

/* An indentation argument `name`: a string as it is, else a count of spaces (missing or none:
 * `fallback`; below 0: none; above `max`: refused). */
static struct jstr spaces_arg(struct jinja *j, int line, const char *what, const char *name, struct jv *v,
                              int64_t fallback, int64_t max) {
  if (v && v->kind == JV_STRING)
    return v->u.s;
  int64_t n = int_arg(j, line, what, v, fallback);
  if (n < 0)
    n = 0;
  if (n > max)
    jinja_fail(j, line, "%s: %s %lld is too large", what, name, (long long)n);
  char *spaces = jinja_alloc(j, (size_t)n + 1);
  memset(spaces, ' ', (size_t)n);
  return (struct jstr){spaces, (size_t)n};
}

/* Python's ignore_case for sorting and unique: strings compared lowercased */
static struct jv case_key(struct jinja *j, struct jv v, bool case_sensitive) {
  if (!case_sensitive && v.kind == JV_STRING)
    return jinja_str_case(j, v.u.s, JCASE_LOWER);
  return v;
}

#define ARGS(...)                                                                                            \
  static const char *const names[] = {__VA_ARGS__};                                                          \
  jargs_check(j, line, what, args, names, sizeof names / sizeof names[0])

static struct jv f_default(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "default";
  ARGS("default_value", "boolean");
  struct jv *fallback = jargs_get(args, 0, "default_value");
  bool boolean = bool_arg(jargs_get(args, 1, "boolean"));
  if (v.kind == JV_UNDEFINED || (boolean && !jv_truthy(v)))
    return fallback ? *fallback : jv_cstr("");
  return v;
}

static struct jv f_length(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "length";
  jargs_check(j, line, what, args, NULL, 0);
  switch (v.kind) {
  case JV_UNDEFINED:
    return jv_int(0);
  case JV_STRING:
    return jv_int((int64_t)jstr_codepoints(v.u.s));
  case JV_LIST:
    if (!v.u.list->generator)
      return jv_int((int64_t)v.u.list->n);
    break;
  case JV_DICT:
    if (!v.u.dict->namespace)
      return jv_int((int64_t)v.u.dict->n);
    break;
  default:
    break;
  }
  jinja_fail(j, line, "length: object of type '%s' has no len()", v.kind == JV_LIST ? "generator" : jv_type_name(v));
}

static struct jv f_join(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "join";
  ARGS("d", "attribute");
  struct jv *sep = jargs_get(args, 0, "d"), *attribute = jargs_get(args, 1, "attribute");
  struct jv sep_s = sep ? as_string(j, *sep) : jv_cstr("");
  struct jlist *items = items_of(j, line, what, v);
  struct jbuf b = {0};
  for (size_t k = 0; k < items->n; k++) {
    if (k)
      jbuf_put(j, &b, sep_s.u.s.p, sep_s.u.s.n);
    struct jv item = items->items[k];
    if (attribute && attribute->kind != JV_NONE)
      item = get_attribute(j, line, item, *attribute);
    jv_write_str(j, &b, item);
  }
  return b.p ? jbuf_take(&b) : jv_cstr("");
}

static struct jv f_trim(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "trim";
  ARGS("chars");
  struct jv *chars = jargs_get(args, 0, "chars");
  struct jv s = as_string(j, v);
  if (chars && chars->kind != JV_NONE) {
    struct jv set = as_string(j, *chars);
    return jinja_str_strip(s, &set.u.s, JSTRIP_BOTH);
  }
  return jinja_str_strip(s, NULL, JSTRIP_BOTH);
}

static struct jv f_tojson(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "tojson";
  ARGS("ensure_ascii", "indent", "separators", "sort_keys");
  struct jv *ascii = jargs_get(args, 0, "ensure_ascii"), *indent = jargs_get(args, 1, "indent"),
            *separators = jargs_get(args, 2, "separators"), *sort = jargs_get(args, 3, "sort_keys");
  struct jstr indent_s, item_sep, key_sep;
  bool has_indent = indent && indent->kind != JV_NONE, has_seps = separators && separators->kind != JV_NONE;
  if (has_indent)
    indent_s = spaces_arg(j, line, what, "indent", indent, 0, 64);
  if (has_seps) {
    if (separators->kind != JV_LIST || separators->u.list->n != 2 ||
        separators->u.list->items[0].kind != JV_STRING || separators->u.list->items[1].kind != JV_STRING)
      jinja_fail(j, line, "tojson: separators must be a pair of strings");
    item_sep = separators->u.list->items[0].u.s;
    key_sep = separators->u.list->items[1].u.s;
  }
  struct jbuf b = {0};
  jinja_write_json(j, line, &b, v, has_indent ? &indent_s : NULL, has_seps ? &item_sep : NULL,
                   has_seps ? &key_sep : NULL, bool_arg(sort), bool_arg(ascii));
  return jbuf_take(&b);
}

static struct jv f_first(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "first";
  jargs_check(j, line, what, args, NULL, 0);
  struct jlist *items = items_of(j, line, what, v);
  return items->n ? items->items[0] : jv_undefined(jstr_c("first"));
}

static struct jv f_last(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "last";
  jargs_check(j, line, what, args, NULL, 0);
  if (v.kind == JV_LIST && v.u.list->generator)
    jinja_fail(j, line, "last: 'generator' object is not reversible");
  struct jlist *items = items_of(j, line, what, v);
  return items->n ? items->items[items->n - 1] : jv_undefined(jstr_c("last"));
}

static struct jv f_list(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "list";
  jargs_check(j, line, what, args, NULL, 0);
  struct jlist *items = items_of(j, line, what, v);
  struct jv out = jv_list_new(j, items->n);
  for (size_t k = 0; k < items->n; k++)
    jv_list_push(j, out, items->items[k]);
  return out;
}

static struct jv case_filter(struct jinja *j, int line, struct jv v, struct jargs *args, const char *what,
                             enum jcase which) {
  jargs_check(j, line, what, args, NULL, 0);
  return jinja_str_case(j, as_string(j, v).u.s, which);
}
static struct jv f_upper(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return case_filter(j, line, v, a, "upper", JCASE_UPPER);
}
static struct jv f_lower(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return case_filter(j, line, v, a, "lower", JCASE_LOWER);
}
static struct jv f_capitalize(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return case_filter(j, line, v, a, "capitalize", JCASE_CAPITALIZE);
}
static struct jv f_title(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return case_filter(j, line, v, a, "title", JCASE_JINJA_TITLE);
}

static struct jv f_replace(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "replace";
  ARGS("old", "new", "count");
  struct jv *old = jargs_get(args, 0, "old"), *with = jargs_get(args, 1, "new"), *count = jargs_get(args, 2, "count");
  if (!old || !with)
    jinja_fail(j, line, "replace needs two arguments");
  return jinja_str_replace(j, as_string(j, v).u.s, as_string(j, *old).u.s, as_string(j, *with).u.s,
                           int_arg(j, line, what, count, -1));
}

static struct jv f_string(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "string", args, NULL, 0);
  return as_string(j, v);
}

/* Python's int(str): optional sign, digits with single underscores, surrounding whitespace */
static bool parse_python_int(struct jstr s, int64_t *out) {
  struct jv t = jinja_str_strip(jv_str(s), NULL, JSTRIP_BOTH);
  const char *p = t.u.s.p;
  size_t n = t.u.s.n, k = 0;
  bool negative = false;
  if (k < n && (p[k] == '+' || p[k] == '-'))
    negative = p[k++] == '-';
  if (k == n)
    return false;
  int64_t value = 0;
  for (; k < n; k++) {
    if (p[k] == '_' && k + 1 < n && p[k + 1] != '_' && k > 0 && p[k - 1] >= '0' && p[k - 1] <= '9')
      continue;
    if (p[k] < '0' || p[k] > '9')
      return false;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, p[k] - '0', &value))
      return false;
  }
  *out = negative ? -value : value;
  return true;
}

static bool parse_python_float(struct jinja *j, struct jstr s, double *out) {
  struct jv t = jinja_str_strip(jv_str(s), NULL, JSTRIP_BOTH);
  if (t.u.s.n == 0)
    return false;
  struct jv copy = jv_str_copy(j, t.u.s.p, t.u.s.n);
  char *end;
  *out = strtod(copy.u.s.p, &end);
  return end == copy.u.s.p + copy.u.s.n;
}

static struct jv f_int(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "int";
  ARGS("default", "base");
  struct jv *fallback = jargs_get(args, 0, "default");
  if (int_arg(j, line, what, jargs_get(args, 1, "base"), 10) != 10)
    jinja_fail(j, line, "int: only base 10 is supported");
  struct jv d = fallback ? *fallback : jv_int(0);
  switch (v.kind) {
  case JV_INT:
    return v;
  case JV_BOOL:
    return jv_int(v.u.b);
  case JV_FLOAT:
    if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18)
      return d;
    return jv_int((int64_t)v.u.f);
  case JV_STRING: {
    int64_t i;
    double f;
    if (parse_python_int(v.u.s, &i))
      return jv_int(i);
    if (parse_python_float(j, v.u.s, &f) && isfinite(f) && fabs(f) < 9.2e18)
      return jv_int((int64_t)f);
    return d;
  }
  default:
    return d;
  }
}

static struct jv f_float(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "float";
  ARGS("default");
  struct jv *fallback = jargs_get(args, 0, "default");
  if (jv_is_number(v))
    return jv_float(jv_as_double(v));
  double f;
  if (v.kind == JV_STRING && parse_python_float(j, v.u.s, &f))
    return jv_float(f);
  return fallback ? *fallback : jv_float(0.0);
}

static struct jv f_items(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "items", args, NULL, 0);
  struct jv out = jv_list_new(j, 0);
  if (v.kind == JV_UNDEFINED)
    return generator(out);
  if (v.kind != JV_DICT || v.u.dict->namespace)
    jinja_fail(j, line, "items: can only get item pairs from a mapping, not %s", jv_type_name(v));
  for (size_t k = 0; k < v.u.dict->n; k++) {
    struct jv pair = jv_list_new(j, 2);
    pair.u.list->tuple = true;
    jv_list_push(j, pair, jv_key_value(j, v.u.dict->keys[k]));
    jv_list_push(j, pair, v.u.dict->values[k]);
    jv_list_push(j, out, pair);
  }
  return generator(out);
}

static struct jv f_map(struct jinja *j, int line, struct jv v, struct jargs *args) {
  /* Jinja's map, select and reject walk nothing when the value is false (None included) */
  struct jlist *items = items_of(j, line, "map", jv_truthy(v) ? v : jv_undefined(jstr_c("")));
  struct jv out = jv_list_new(j, items->n);
  struct jv *attribute = NULL, *fallback = NULL;
  for (size_t k = 0; k < args->nkw; k++) {
    if (jstr_eq(args->kwnames[k], "attribute"))
      attribute = &args->kw[k];
    else if (jstr_eq(args->kwnames[k], "default"))
      fallback = &args->kw[k];
    else
      jinja_fail(j, line, "map got an unexpected keyword argument '%.*s'", (int)args->kwnames[k].n,
                 args->kwnames[k].p);
  }
  if (attribute) {
    if (args->npos)
      jinja_fail(j, line, "map: positional arguments with attribute=");
    for (size_t k = 0; k < items->n; k++) {
      struct jv x = get_attribute(j, line, items->items[k], *attribute);
      jv_list_push(j, out, x.kind == JV_UNDEFINED && fallback ? *fallback : x);
    }
    return generator(out);
  }
  if (args->npos == 0 || args->pos[0].kind != JV_STRING)
    jinja_fail(j, line, "map needs a filter name or attribute=");
  struct jargs rest = {args->pos + 1, args->npos - 1, NULL, NULL, 0};
  for (size_t k = 0; k < items->n; k++)
    jv_list_push(j, out, jinja_apply_filter(j, line, args->pos[0].u.s, items->items[k], &rest));
  return generator(out);
}

/* select/reject and selectattr/rejectattr */
static struct jv select_items(struct jinja *j, int line, struct jv v, struct jargs *args, bool by_attribute,
                              bool keep_when) {
  const char *what = by_attribute ? (keep_when ? "selectattr" : "rejectattr") : (keep_when ? "select" : "reject");
  if (args->nkw)
    jinja_fail(j, line, "%s takes no keyword arguments", what);
  size_t at = 0;
  struct jv attribute = jv_none();
  if (by_attribute) {
    if (args->npos == 0)
      jinja_fail(j, line, "%s needs an attribute name", what);
    attribute = args->pos[at++];
  }
  struct jv *test = at < args->npos ? &args->pos[at++] : NULL;
  if (test && test->kind != JV_STRING)
    jinja_fail(j, line, "%s: the test name must be a string", what);
  struct jargs test_args = {args->npos > at ? args->pos + at : NULL, args->npos - at, NULL, NULL, 0};
  struct jlist *items = items_of(j, line, what, jv_truthy(v) ? v : jv_undefined(jstr_c("")));
  struct jv out = jv_list_new(j, items->n);
  for (size_t k = 0; k < items->n; k++) {
    struct jv x = by_attribute ? get_attribute(j, line, items->items[k], attribute) : items->items[k];
    bool r = test ? jinja_apply_test(j, line, test->u.s, x, &test_args) : jv_truthy(x);
    if (r == keep_when)
      jv_list_push(j, out, items->items[k]);
  }
  return generator(out);
}

static struct jv f_selectattr(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return select_items(j, line, v, a, true, true);
}
static struct jv f_rejectattr(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return select_items(j, line, v, a, true, false);
}
static struct jv f_select(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return select_items(j, line, v, a, false, true);
}
static struct jv f_reject(struct jinja *j, int line, struct jv v, struct jargs *a) {
  return select_items(j, line, v, a, false, false);
}

static struct jv f_safe(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "safe", args, NULL, 0);
  struct jv s = as_string(j, v);
  s.markup = true;
  return s;
}

static struct jv f_unique(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "unique";
  ARGS("case_sensitive", "attribute");
  bool case_sensitive = bool_arg(jargs_get(args, 0, "case_sensitive"));
  struct jv *attribute = jargs_get(args, 1, "attribute");
  struct jlist *items = items_of(j, line, what, v);
  struct jv out = jv_list_new(j, items->n), seen = jv_list_new(j, items->n);
  for (size_t k = 0; k < items->n; k++) {
    struct jv x = items->items[k];
    if (attribute && attribute->kind != JV_NONE)
      x = get_attribute(j, line, x, *attribute);
    x = case_key(j, x, case_sensitive);
    bool found = false;
    for (size_t m = 0; m < seen.u.list->n && !found; m++)
      found = jv_equal(seen.u.list->items[m], x);
    if (!found) {
      jv_list_push(j, seen, x);
      jv_list_push(j, out, items->items[k]);
    }
  }
  return generator(out);
}

/* Python's str.splitlines() on the line ends indent cares about */
static struct jv f_indent(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "indent";
  ARGS("width", "first", "blank");
  struct jstr pad = spaces_arg(j, line, what, "width", jargs_get(args, 0, "width"), 4, 256);
  bool first = bool_arg(jargs_get(args, 1, "first")), blank = bool_arg(jargs_get(args, 2, "blank"));
  struct jbuf text = {0};
  jv_write_str(j, &text, v);
  jbuf_puts(j, &text, "\n");
  struct jmethod split = {jbuf_take(&text), jstr_c("splitlines")};
  struct jargs none = {0};
  struct jlist *lines = jinja_call_method(j, line, &split, &none).u.list;
  struct jbuf b = {0};
  if (first)
    jbuf_put(j, &b, pad.p, pad.n);
  for (size_t k = 0; k < lines->n; k++) {
    struct jstr l = lines->items[k].u.s;
    if (k) {
      jbuf_puts(j, &b, "\n");
      if (blank || l.n)
        jbuf_put(j, &b, pad.p, pad.n);
    }
    jbuf_put(j, &b, l.p, l.n);
  }
  return b.p ? jbuf_take(&b) : jv_cstr("");
}

struct sort_item {
  struct jv key;
  struct jv value;
};

/* A stable merge sort (Python's sort is stable) that can fail through jinja_fail. */
static void merge_sort(struct jinja *j, int line, struct sort_item *items, struct sort_item *scratch, size_t n,
                       bool reverse) {
  if (n < 2)
    return;
  size_t half = n / 2;
  merge_sort(j, line, items, scratch, half, reverse);
  merge_sort(j, line, items + half, scratch, n - half, reverse);
  size_t a = 0, b = half, o = 0;
  while (a < half && b < n) {
    int c = jv_compare(j, line, items[b].key, items[a].key);
    bool take_b = reverse ? c > 0 : c < 0;
    scratch[o++] = take_b ? items[b++] : items[a++];
  }
  while (a < half)
    scratch[o++] = items[a++];
  while (b < n)
    scratch[o++] = items[b++];
  memcpy(items, scratch, n * sizeof *items);
}

static struct jv sorted(struct jinja *j, int line, struct sort_item *items, size_t n, bool reverse) {
  struct sort_item *scratch = jinja_alloc(j, (n ? n : 1) * sizeof *scratch);
  merge_sort(j, line, items, scratch, n, reverse);
  struct jv out = jv_list_new(j, n);
  for (size_t k = 0; k < n; k++)
    jv_list_push(j, out, items[k].value);
  return out;
}

static struct jv f_dictsort(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "dictsort";
  ARGS("case_sensitive", "by", "reverse");
  bool case_sensitive = bool_arg(jargs_get(args, 0, "case_sensitive"));
  struct jv *by = jargs_get(args, 1, "by");
  bool by_value = by && by->kind == JV_STRING && jstr_eq(by->u.s, "value");
  if (by && !by_value && !(by->kind == JV_STRING && jstr_eq(by->u.s, "key")))
    jinja_fail(j, line, "dictsort: you can only sort by either \"key\" or \"value\"");
  if (v.kind != JV_DICT || v.u.dict->namespace)
    jinja_fail(j, line, "dictsort: expected a dict, got %s", jv_type_name(v));
  size_t n = v.u.dict->n;
  struct sort_item *items = jinja_alloc(j, (n ? n : 1) * sizeof *items);
  for (size_t k = 0; k < n; k++) {
    struct jv pair = jv_list_new(j, 2);
    pair.u.list->tuple = true;
    jv_list_push(j, pair, jv_key_value(j, v.u.dict->keys[k]));
    jv_list_push(j, pair, v.u.dict->values[k]);
    items[k].value = pair;
    items[k].key = case_key(j, by_value ? v.u.dict->values[k] : jv_key_value(j, v.u.dict->keys[k]), case_sensitive);
  }
  return sorted(j, line, items, n, bool_arg(jargs_get(args, 2, "reverse")));
}

static struct jv f_sort(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "sort";
  ARGS("reverse", "case_sensitive", "attribute");
  struct jv *attribute = jargs_get(args, 2, "attribute");
  bool case_sensitive = bool_arg(jargs_get(args, 1, "case_sensitive"));
  struct jlist *list = items_of(j, line, what, v);
  struct sort_item *items = jinja_alloc(j, (list->n ? list->n : 1) * sizeof *items);
  for (size_t k = 0; k < list->n; k++) {
    struct jv key = list->items[k];
    if (attribute && attribute->kind != JV_NONE)
      key = get_attribute(j, line, key, *attribute);
    items[k].key = case_key(j, key, case_sensitive);
    items[k].value = list->items[k];
  }
  return sorted(j, line, items, list->n, bool_arg(jargs_get(args, 0, "reverse")));
}

static struct jv f_reverse(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "reverse", args, NULL, 0);
  struct jlist *items = items_of(j, line, "reverse", v);
  if (v.kind == JV_STRING) {
    struct jbuf b = {0};
    for (size_t k = items->n; k-- > 0;)
      jbuf_put(j, &b, items->items[k].u.s.p, items->items[k].u.s.n);
    return b.p ? jbuf_take(&b) : jv_cstr("");
  }
  struct jv out = jv_list_new(j, items->n);
  for (size_t k = items->n; k-- > 0;)
    jv_list_push(j, out, items->items[k]);
  return generator(out);
}

static struct jv f_abs(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "abs", args, NULL, 0);
  if (v.kind == JV_FLOAT)
    return jv_float(fabs(v.u.f));
  if (v.kind == JV_INT && v.u.i != INT64_MIN)
    return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
  if (v.kind == JV_BOOL)
    return jv_int(v.u.b);
  jinja_fail(j, line, "abs: bad operand type '%s'", jv_type_name(v));
}

static struct jv f_escape(struct jinja *j, int line, struct jv v, struct jargs *args) {
  jargs_check(j, line, "escape", args, NULL, 0);
  return jv_html_escape(j, v);
}

static struct jv min_max(struct jinja *j, int line, struct jv v, struct jargs *args, bool max) {
  const char *what = max ? "max" : "min";
  ARGS("case_sensitive", "attribute");
  bool case_sensitive = bool_arg(jargs_get(args, 0, "case_sensitive"));
  struct jv *attribute = jargs_get(args, 1, "attribute");
  struct jlist *items = items_of(j, line, what, v);
  if (items->n == 0)
    return jv_undefined(jstr_c(what));
  size_t best = 0;
  struct jv best_key = jv_none();
  for (size_t k = 0; k < items->n; k++) {
    struct jv key = items->items[k];
    if (attribute && attribute->kind != JV_NONE)
      key = get_attribute(j, line, key, *attribute);
    key = case_key(j, key, case_sensitive);
    if (k == 0 || (max ? jv_compare(j, line, key, best_key) > 0 : jv_compare(j, line, key, best_key) < 0)) {
      best = k;
      best_key = key;
    }
  }
  return items->items[best];
}
static struct jv f_min(struct jinja *j, int line, struct jv v, struct jargs *a) { return min_max(j, line, v, a, false); }
static struct jv f_max(struct jinja *j, int line, struct jv v, struct jargs *a) { return min_max(j, line, v, a, true); }

static struct jv f_attr(struct jinja *j, int line, struct jv v, struct jargs *args) {
  const char *what = "attr";
  ARGS("name");
  struct jv *name = jargs_get(args, 0, "name");
  if (!name || name->kind != JV_STRING)
    jinja_fail(j, line, "attr needs a name");
  if (v.kind == JV_UNDEFINED)
    return v;
  return jinja_getattr(j, line, v, name->u.s);
}

static const struct {
  const char *name;
  filter_fn fn;
} filters[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"capitalize", f_capitalize}, {"count", f_length},
    {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},     {"e", f_escape},
    {"escape", f_escape},     {"first", f_first},       {"float", f_float},           {"indent", f_indent},
    {"int", f_int},           {"items", f_items},       {"join", f_join},             {"last", f_last},
    {"length", f_length},     {"list", f_list},         {"lower", f_lower},           {"map", f_map},
    {"max", f_max},           {"min", f_min},           {"reject", f_reject},         {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},   {"safe", f_safe},             {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},         {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},         {"upper", f_upper},
};

bool jinja_filter_exists(struct jstr name) {
  for (size_t k = 0; k < sizeof filters / sizeof filters[0]; k++)
    if (jstr_eq(name, filters[k].name))
      return true;
  return false;
}

struct jv jinja_apply_filter(struct jinja *j, int line, struct jstr name, struct jv value, struct jargs *args) {
  for (size_t k = 0; k < sizeof filters / sizeof filters[0]; k++)
    if (jstr_eq(name, filters[k].name))
      return filters[k].fn(j, line, value, args);
  jinja_fail(j, line, "unknown or unsupported filter '%.*s'", (int)name.n, name.p);
}

/* ---- tests ---- */

static struct jv *test_arg(struct jinja *j, int line, struct jstr name, struct jargs *args) {
  if (args->npos != 1 || args->nkw)
    jinja_fail(j, line, "test '%.*s' takes one argument", (int)name.n, name.p);
  return &args->pos[0];
}

static const char *const tests[] = {
    "defined", "undefined", "none",  "string", "mapping", "iterable", "sequence", "number", "integer",
    "float",   "boolean",   "true",  "false",  "callable", "odd",     "even",     "divisibleby", "equalto",
    "eq",      "==",        "ne",    "!=",     "lt",      "<",        "le",       "<=",     "gt",
    ">",       "ge",        ">=",    "in",     "sameas",  "lower",    "upper",    "escaped", "filter", "test",
};

bool jinja_test_exists(struct jstr name) {
  for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++)
    if (jstr_eq(name, tests[k]))
      return true;
  return false;
}

bool jinja_apply_test(struct jinja *j, int line, struct jstr name, struct jv v, struct jargs *args) {
  if (!jinja_test_exists(name))
    jinja_fail(j, line, "unknown or unsupported test '%.*s'", (int)name.n, name.p);
  bool one_arg = jstr_eq(name, "divisibleby") || jstr_eq(name, "equalto") || jstr_eq(name, "eq") ||
                 jstr_eq(name, "==") || jstr_eq(name, "ne") || jstr_eq(name, "!=") || jstr_eq(name, "lt") ||
                 jstr_eq(name, "<") || jstr_eq(name, "le") || jstr_eq(name, "<=") || jstr_eq(name, "gt") ||
                 jstr_eq(name, ">") || jstr_eq(name, "ge") || jstr_eq(name, ">=") || jstr_eq(name, "in") ||
                 jstr_eq(name, "sameas");
  if (one_arg) {
    struct jv *x = test_arg(j, line, name, args);
    if (jstr_eq(name, "divisibleby")) {
      if (!jv_is_number(v) || x->kind != JV_INT || x->u.i == 0)
        jinja_fail(j, line, "divisibleby needs integers (and a non-zero divisor)");
      return (v.kind == JV_BOOL ? v.u.b : v.u.i) % x->u.i == 0;
    }
    if (jstr_eq(name, "equalto") || jstr_eq(name, "eq") || jstr_eq(name, "=="))
      return jv_equal(v, *x);
    if (jstr_eq(name, "ne") || jstr_eq(name, "!="))
      return !jv_equal(v, *x);
    if (jstr_eq(name, "sameas"))
      return v.kind == x->kind && (v.kind == JV_NONE || v.kind == JV_UNDEFINED || jv_equal(v, *x));
    if (jstr_eq(name, "in")) {
      if (x->kind == JV_STRING && v.kind == JV_STRING)
        return jinja_str_find(x->u.s, v.u.s, false) >= 0;
      if (x->kind == JV_LIST) {
        for (size_t k = 0; k < x->u.list->n; k++)
          if (jv_equal(x->u.list->items[k], v))
            return true;
        return false;
      }
      if (x->kind == JV_DICT)
        return v.kind == JV_STRING && jv_dict_get(*x, v.u.s) != NULL;
      jinja_fail(j, line, "test 'in': '%s' is not a container", jv_type_name(*x));
    }
    int c = jv_compare(j, line, v, *x);
    if (name.p[0] == 'l' || name.p[0] == '<')
      return name.n == 2 && name.p[1] != 't' ? c <= 0 : c < 0;
    return name.n == 2 && name.p[1] != 't' ? c >= 0 : c > 0;
  }
  if (args->npos || args->nkw)
    jinja_fail(j, line, "test '%.*s' takes no arguments", (int)name.n, name.p);
  if (jstr_eq(name, "defined"))
    return v.kind != JV_UNDEFINED;
  if (jstr_eq(name, "undefined"))
    return v.kind == JV_UNDEFINED;
  if (jstr_eq(name, "none"))
    return v.kind == JV_NONE;
  if (jstr_eq(name, "string"))
    return v.kind == JV_STRING;
  if (jstr_eq(name, "mapping"))
    return v.kind == JV_DICT && !v.u.dict->namespace;
  if (jstr_eq(name, "iterable"))
    return v.kind == JV_STRING || v.kind == JV_LIST || v.kind == JV_UNDEFINED ||
           (v.kind == JV_DICT && !v.u.dict->namespace);
  if (jstr_eq(name, "sequence"))
    return v.kind == JV_STRING || (v.kind == JV_LIST && !v.u.list->generator) || v.kind == JV_UNDEFINED ||
           (v.kind == JV_DICT && !v.u.dict->namespace);
  if (jstr_eq(name, "number"))
    return jv_is_number(v);
  if (jstr_eq(name, "integer"))
    return v.kind == JV_INT;
  if (jstr_eq(name, "float"))
    return v.kind == JV_FLOAT;
  if (jstr_eq(name, "boolean"))
    return v.kind == JV_BOOL;
  if (jstr_eq(name, "true"))
    return v.kind == JV_BOOL && v.u.b;
  if (jstr_eq(name, "false"))
    return v.kind == JV_BOOL && !v.u.b;
  if (jstr_eq(name, "callable"))
    return v.kind == JV_MACRO || v.kind == JV_BUILTIN || v.kind == JV_METHOD;
  if (jstr_eq(name, "odd") || jstr_eq(name, "even")) {
    if (v.kind != JV_INT && v.kind != JV_BOOL)
      jinja_fail(j, line, "test '%.*s' needs an integer, got %s", (int)name.n, name.p, jv_type_name(v));
    int64_t i = v.kind == JV_BOOL ? v.u.b : v.u.i;
    return (i % 2 != 0) == (name.p[0] == 'o');
  }
  if (jstr_eq(name, "lower") || jstr_eq(name, "upper")) {
    struct jmethod m = {jv_to_string(j, v), jstr_c(name.p[0] == 'l' ? "islower" : "isupper")};
    struct jargs none = {0};
    return jv_truthy(jinja_call_method(j, line, &m, &none));
  }
  if (jstr_eq(name, "escaped"))
    return false;
  if (jstr_eq(name, "filter"))
    return v.kind == JV_STRING && jinja_filter_exists(v.u.s);
  return v.kind == JV_STRING && jinja_test_exists(v.u.s);
}
