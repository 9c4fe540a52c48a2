/* Template values: the arena that owns them, constructors, and the Python semantics the
 * templates rely on (truthiness, ==, <, str(), repr()). */
#include "jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jarena_block {
  struct jarena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

_Noreturn void jinja_fail(struct jinja *j, int line, const char *format, ...) {
  size_t at = 0;
  if (line > 0)
    at = (size_t)snprintf(j->error, sizeof j->error, "line %d: ", line);
  if (at >= sizeof j->error)
    at = 0;
  va_list ap;
  va_start(ap, format);
  vsnprintf(j->error + at, sizeof j->error - at, format, ap);
  va_end(ap);
  longjmp(j->fail, 1);
}

void *jinja_alloc(struct jinja *j, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0)
    size = 16;
  struct jarena_block *b = j->blocks;
  if (!b || b->cap - b->used < size) {
    size_t cap = size > 60000 ? size : 60000;
    if (j->arena_used + cap > j->arena_limit)
      jinja_fail(j, j->line, "the template needs more than %zu bytes of memory", j->arena_limit);
    b = malloc(sizeof *b + cap);
    if (!b)
      jinja_fail(j, j->line, "out of memory");
    b->cap = cap;
    b->used = 0;
    b->next = j->blocks;
    j->blocks = b;
    j->arena_used += cap;
  }
  void *p = b->data + b->used;
  b->used += size;
  return p;
}

void *jinja_grow(struct jinja *j, const void *old, size_t n, size_t cap, size_t size) {
  void *p = jinja_alloc(j, cap * size);
  if (n)
    memcpy(p, old, n * size);
  return p;
}

void jinja_arena_free(struct jinja *j) {
  while (j->blocks) {
    struct jarena_block *next = j->blocks->next;
    free(j->blocks);
    j->blocks = next;
  }
  j->arena_used = 0;
}

void jinja_step(struct jinja *j, int line) {
  if (++j->steps > j->step_limit)
    jinja_fail(j, line, "the template takes more than %llu steps", (unsigned long long)j->step_limit);
}

struct jv jv_undefined(struct jstr name) {
  struct jv v = {.kind = JV_UNDEFINED};
  v.u.s = name;
  return v;
}
struct jv jv_none(void) { return (struct jv){.kind = JV_NONE}; }
struct jv jv_bool(bool b) {
  struct jv v = {.kind = JV_BOOL};
  v.u.b = b;
  return v;
}
struct jv jv_int(int64_t i) {
  struct jv v = {.kind = JV_INT};
  v.u.i = i;
  return v;
}
struct jv jv_float(double f) {
  struct jv v = {.kind = JV_FLOAT};
  v.u.f = f;
  return v;
}
struct jv jv_str(struct jstr s) {
  struct jv v = {.kind = JV_STRING};
  v.u.s = s;
  return v;
}
struct jv jv_cstr(const char *s) { return jv_str(jstr_c(s)); }

struct jv jv_str_copy(struct jinja *j, const char *p, size_t n) {
  char *copy = jinja_alloc(j, n + 1);
  if (n)
    memcpy(copy, p, n);
  copy[n] = 0;
  return jv_str((struct jstr){copy, n});
}

struct jv jv_list_new(struct jinja *j, size_t cap) {
  struct jlist *l = jinja_alloc(j, sizeof *l);
  l->n = 0;
  l->cap = cap;
  l->tuple = false;
  l->generator = false;
  l->items = cap ? jinja_alloc(j, cap * sizeof *l->items) : NULL;
  struct jv v = {.kind = JV_LIST};
  v.u.list = l;
  return v;
}

struct jv jv_dict_new(struct jinja *j, size_t cap) {
  struct jdict *d = jinja_alloc(j, sizeof *d);
  d->n = 0;
  d->cap = cap;
  d->namespace = false;
  d->keys = cap ? jinja_alloc(j, cap * sizeof *d->keys) : NULL;
  d->values = cap ? jinja_alloc(j, cap * sizeof *d->values) : NULL;
  struct jv v = {.kind = JV_DICT};
  v.u.dict = d;
  return v;
}

void jv_list_push(struct jinja *j, struct jv list, struct jv item) {
  struct jlist *l = list.u.list;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 4;
    l->items = jinja_grow(j, l->items, l->n, cap, sizeof *l->items);
    l->cap = cap;
  }
  l->items[l->n++] = item;
}

struct jv *jv_dict_get(struct jv dict, struct jstr key) {
  struct jdict *d = dict.u.dict;
  for (size_t k = 0; k < d->n; k++)
    if (jstr_same(d->keys[k], key))
      return &d->values[k];
  return NULL;
}

void jv_dict_set(struct jinja *j, struct jv dict, struct jstr key, struct jv value) {
  struct jv *old = jv_dict_get(dict, key);
  if (old) {
    *old = value;
    return;
  }
  struct jdict *d = dict.u.dict;
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 4;
    d->keys = jinja_grow(j, d->keys, d->n, cap, sizeof *d->keys);
    d->values = jinja_grow(j, d->values, d->n, cap, sizeof *d->values);
    d->cap = cap;
  }
  d->keys[d->n] = key;
  d->values[d->n] = value;
  d->n++;
}

bool jstr_eq(struct jstr a, const char *s) {
  size_t n = strlen(s);
  return a.n == n && (n == 0 || memcmp(a.p, s, n) == 0);
}

bool jstr_same(struct jstr a, struct jstr b) {
  return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

bool jv_truthy(struct jv v) {
  switch (v.kind) {
  case JV_UNDEFINED:
  case JV_NONE:
    return false;
  case JV_BOOL:
    return v.u.b;
  case JV_INT:
    return v.u.i != 0;
  case JV_FLOAT:
    return v.u.f != 0.0;
  case JV_STRING:
    return v.u.s.n != 0;
  case JV_LIST:
    return v.u.list->generator || v.u.list->n != 0;
  case JV_DICT:
    return v.u.dict->namespace || v.u.dict->n != 0;
  default:
    return true;
  }
}

bool jv_is_number(struct jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }

double jv_as_double(struct jv v) {
  if (v.kind == JV_FLOAT)
    return v.u.f;
  if (v.kind == JV_BOOL)
    return v.u.b ? 1.0 : 0.0;
  return (double)v.u.i;
}

bool jv_equal(struct jv a, struct jv b) {
  if (jv_is_number(a) && jv_is_number(b)) {
    if (a.kind != JV_FLOAT && b.kind != JV_FLOAT)
      return (a.kind == JV_BOOL ? a.u.b : a.u.i) == (b.kind == JV_BOOL ? b.u.b : b.u.i);
    return jv_as_double(a) == jv_as_double(b);
  }
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case JV_UNDEFINED:
  case JV_NONE:
    return true;
  case JV_STRING:
    return jstr_same(a.u.s, b.u.s);
  case JV_LIST:
    if (a.u.list->n != b.u.list->n || a.u.list->tuple != b.u.list->tuple)
      return false;
    for (size_t k = 0; k < a.u.list->n; k++)
      if (!jv_equal(a.u.list->items[k], b.u.list->items[k]))
        return false;
    return true;
  case JV_DICT:
    if (a.u.dict->namespace || b.u.dict->namespace)
      return a.u.dict == b.u.dict;
    if (a.u.dict->n != b.u.dict->n)
      return false;
    for (size_t k = 0; k < a.u.dict->n; k++) {
      struct jv *other = jv_dict_get(b, a.u.dict->keys[k]);
      if (!other || !jv_equal(a.u.dict->values[k], *other))
        return false;
    }
    return true;
  case JV_MACRO:
    return a.u.macro == b.u.macro;
  case JV_BUILTIN:
    return a.u.builtin == b.u.builtin;
  default:
    return false;
  }
}

const char *jv_type_name(struct jv v) {
  switch (v.kind) {
  case JV_UNDEFINED:
    return "undefined";
  case JV_NONE:
    return "None";
  case JV_BOOL:
    return "bool";
  case JV_INT:
    return "int";
  case JV_FLOAT:
    return "float";
  case JV_STRING:
    return "str";
  case JV_LIST:
    return v.u.list->tuple ? "tuple" : "list";
  case JV_DICT:
    return v.u.dict->namespace ? "namespace" : "dict";
  case JV_MACRO:
    return "macro";
  case JV_BUILTIN:
    return "function";
  case JV_METHOD:
    return "method";
  }
  return "value";
}

int jv_compare(struct jinja *j, int line, struct jv a, struct jv b) {
  if (jv_is_number(a) && jv_is_number(b)) {
    if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
      int64_t x = a.kind == JV_BOOL ? a.u.b : a.u.i, y = b.kind == JV_BOOL ? b.u.b : b.u.i;
      return x < y ? -1 : x > y;
    }
    double x = jv_as_double(a), y = jv_as_double(b);
    return x < y ? -1 : x > y;
  }
  if (a.kind == JV_STRING && b.kind == JV_STRING) {
    /* UTF-8 byte order is code point order */
    size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
    int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
    if (c)
      return c < 0 ? -1 : 1;
    return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
  }
  if (a.kind == JV_LIST && b.kind == JV_LIST) {
    size_t n = a.u.list->n < b.u.list->n ? a.u.list->n : b.u.list->n;
    for (size_t k = 0; k < n; k++) {
      if (jv_equal(a.u.list->items[k], b.u.list->items[k]))
        continue;
      return jv_compare(j, line, a.u.list->items[k], b.u.list->items[k]);
    }
    return a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
  }
  jinja_fail(j, line, "'<' not supported between %s and %s", jv_type_name(a), jv_type_name(b));
}

void jbuf_put(struct jinja *j, struct jbuf *b, const char *p, size_t n) {
  if (n == 0)
    return;
  if (b->cap - b->n <= n) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n <= n) {
      if (cap > j->output_limit)
        jinja_fail(j, j->line, "the template's output exceeds %zu bytes", j->output_limit);
      cap *= 2;
    }
    char *p2 = jinja_alloc(j, cap);
    if (b->n)
      memcpy(p2, b->p, b->n);
    b->p = p2;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = 0;
}

void jbuf_puts(struct jinja *j, struct jbuf *b, const char *s) { jbuf_put(j, b, s, strlen(s)); }

struct jv jbuf_take(struct jbuf *b) {
  struct jstr s = {b->p ? b->p : "", b->n};
  return jv_str(s);
}

void jv_format_float(double f, char out[32]) {
  if (isnan(f)) {
    strcpy(out, "nan");
    return;
  }
  if (isinf(f)) {
    strcpy(out, f < 0 ? "-inf" : "inf");
    return;
  }
  char digits[40];
  int precision = 1;
  for (; precision <= 17; precision++) {
    snprintf(digits, sizeof digits, "%.*e", precision - 1, f);
    if (strtod(digits, NULL) == f)
      break;
  }
  /* digits is d.ddde[+-]XX: Python uses positional notation for exponents in [-4, 16) */
  char *e = strchr(digits, 'e');
  int exponent = atoi(e + 1);
  char mantissa[40];
  size_t m = 0;
  bool negative = digits[0] == '-';
  for (char *p = digits + negative; p < e; p++)
    if (*p != '.')
      mantissa[m++] = *p;
  mantissa[m] = 0;
  while (m > 1 && mantissa[m - 1] == '0')
    mantissa[--m] = 0;
  char *o = out;
  if (negative)
    *o++ = '-';
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      *o++ = '0';
      *o++ = '.';
      for (int k = 0; k < -exponent - 1; k++)
        *o++ = '0';
      memcpy(o, mantissa, m);
      o += m;
    } else {
      for (int k = 0; k <= exponent; k++)
        *o++ = (size_t)k < m ? mantissa[k] : '0';
      *o++ = '.';
      if ((size_t)exponent + 1 < m) {
        memcpy(o, mantissa + exponent + 1, m - (size_t)exponent - 1);
        o += m - (size_t)exponent - 1;
      } else {
        *o++ = '0';
      }
    }
    *o = 0;
  } else {
    *o++ = mantissa[0];
    if (m > 1) {
      *o++ = '.';
      memcpy(o, mantissa + 1, m - 1);
      o += m - 1;
    }
    sprintf(o, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  }
}

/* The escape of the byte (or, for JQUOTE_JSON_ASCII, the code point) at s.p[*k] inside `quote`,
 * advancing *k past it; NULL when it is written as it is. */
static const char *quoted_escape(struct jstr s, size_t *k, char quote, enum jquote style, char out[16]) {
  bool json = style != JQUOTE_REPR;
  unsigned char c = (unsigned char)s.p[*k];
  if (c >= 0x80 && style == JQUOTE_JSON_ASCII) {
    uint32_t cp = jstr_next_codepoint(s, k);
    if (cp >= 0x10000)
      snprintf(out, 16, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
    else
      snprintf(out, 16, "\\u%04x", cp);
    return out;
  }
  (*k)++;
  switch (c) {
  case '\n':
    return "\\n";
  case '\r':
    return "\\r";
  case '\t':
    return "\\t";
  case '\b':
    if (json)
      return "\\b";
    break;
  case '\f':
    if (json)
      return "\\f";
    break;
  case '\\':
    return "\\\\";
  default:
    if (c == (unsigned char)quote) {
      out[0] = '\\';
      out[1] = quote;
      out[2] = 0;
      return out;
    }
  }
  if (c < 0x20 || (c == 0x7f && style != JQUOTE_JSON)) {
    snprintf(out, 16, json ? "\\u%04x" : "\\x%02x", c);
    return out;
  }
  return NULL;
}

void jbuf_put_quoted(struct jinja *j, struct jbuf *b, struct jstr s, enum jquote style) {
  char quote = '"';
  if (style == JQUOTE_REPR && !(memchr(s.p, '\'', s.n) != NULL && memchr(s.p, '"', s.n) == NULL))
    quote = '\'';
  jbuf_put(j, b, &quote, 1);
  size_t start = 0; /* the bytes from here to k are written as they are */
  for (size_t k = 0; k < s.n;) {
    size_t at = k;
    char out[16];
    const char *escape = quoted_escape(s, &k, quote, style, out);
    if (escape) {
      jbuf_put(j, b, s.p + start, at - start);
      jbuf_puts(j, b, escape);
      start = k;
    }
  }
  jbuf_put(j, b, s.p + start, s.n - start);
  jbuf_put(j, b, &quote, 1);
}

void jv_write_repr(struct jinja *j, struct jbuf *b, struct jv v) {
  switch (v.kind) {
  case JV_STRING:
    jbuf_put_quoted(j, b, v.u.s, JQUOTE_REPR);
    return;
  case JV_LIST: {
    if (v.u.list->generator)
      jinja_fail(j, j->line, "a generator (the result of map, select, items, ...) cannot be printed; add |list");
    jbuf_puts(j, b, v.u.list->tuple ? "(" : "[");
    for (size_t k = 0; k < v.u.list->n; k++) {
      if (k)
        jbuf_puts(j, b, ", ");
      jv_write_repr(j, b, v.u.list->items[k]);
    }
    if (v.u.list->tuple && v.u.list->n == 1)
      jbuf_puts(j, b, ",");
    jbuf_puts(j, b, v.u.list->tuple ? ")" : "]");
    return;
  }
  case JV_DICT: { /* a namespace as Jinja's Namespace.__repr__: <Namespace {...}> */
    bool namespace = v.u.dict->namespace;
    jbuf_puts(j, b, namespace ? "<Namespace {" : "{");
    for (size_t k = 0; k < v.u.dict->n; k++) {
      if (k)
        jbuf_puts(j, b, ", ");
      jv_write_repr(j, b, jv_key_value(j, v.u.dict->keys[k]));
      jbuf_puts(j, b, ": ");
      jv_write_repr(j, b, v.u.dict->values[k]);
    }
    jbuf_puts(j, b, namespace ? "}>" : "}");
    return;
  }
  case JV_UNDEFINED:
    jbuf_puts(j, b, "Undefined");
    return;
  default:
    jv_write_str(j, b, v);
  }
}

void jv_write_str(struct jinja *j, struct jbuf *b, struct jv v) {
  char text[40];
  switch (v.kind) {
  case JV_UNDEFINED:
    return;
  case JV_NONE:
    jbuf_puts(j, b, "None");
    return;
  case JV_BOOL:
    jbuf_puts(j, b, v.u.b ? "True" : "False");
    return;
  case JV_INT:
    snprintf(text, sizeof text, "%lld", (long long)v.u.i);
    jbuf_puts(j, b, text);
    return;
  case JV_FLOAT:
    jv_format_float(v.u.f, text);
    jbuf_puts(j, b, text);
    return;
  case JV_STRING:
    jbuf_put(j, b, v.u.s.p, v.u.s.n);
    return;
  case JV_LIST:
  case JV_DICT:
    jv_write_repr(j, b, v);
    return;
  case JV_MACRO:
    jbuf_puts(j, b, "<macro>");
    return;
  case JV_BUILTIN:
  case JV_METHOD:
    jbuf_puts(j, b, "<built-in function>");
    return;
  }
}

struct jv jv_to_string(struct jinja *j, struct jv v) {
  if (v.kind == JV_STRING)
    return v;
  struct jbuf b = {0};
  jv_write_str(j, &b, v);
  return jbuf_take(&b);
}

/* A UTF-8 lead byte starts a code point; continuation bytes (10xxxxxx) do not. */
static bool starts_codepoint(unsigned char c) { return (c & 0xC0) != 0x80; }

size_t jstr_codepoints(struct jstr s) {
  size_t count = 0;
  for (size_t k = 0; k < s.n; k++)
    count += starts_codepoint((unsigned char)s.p[k]);
  return count;
}

size_t jstr_offset(struct jstr s, size_t index) {
  size_t count = 0;
  for (size_t k = 0; k < s.n; k++) {
    if (starts_codepoint((unsigned char)s.p[k])) {
      if (count == index)
        return k;
      count++;
    }
  }
  return s.n;
}

struct jv jv_html_escape(struct jinja *j, struct jv v) {
  if (v.kind == JV_STRING && v.markup)
    return v;
  struct jv s = jv_to_string(j, v);
  struct jbuf b = {0};
  for (size_t k = 0; k < s.u.s.n; k++) {
    char c = s.u.s.p[k];
    const char *entity = c == '&'    ? "&amp;"
                         : c == '<'  ? "&lt;"
                         : c == '>'  ? "&gt;"
                         : c == '"'  ? "&#34;"
                         : c == '\'' ? "&#39;"
                                     : NULL;
    if (entity)
      jbuf_puts(j, &b, entity);
    else
      jbuf_put(j, &b, &c, 1);
  }
  struct jv r = b.p ? jbuf_take(&b) : jv_cstr("");
  r.markup = true;
  return r;
}

struct jstr jv_key(struct jinja *j, int line, struct jv key) {
  char text[48];
  switch (key.kind) {
  case JV_STRING:
    return key.u.s;
  case JV_BOOL:
  case JV_INT:
    snprintf(text, sizeof text, "\x01%lld", (long long)(key.kind == JV_BOOL ? key.u.b : key.u.i));
    break;
  case JV_FLOAT:
    if (key.u.f == floor(key.u.f) && fabs(key.u.f) < 9e18) {
      snprintf(text, sizeof text, "\x01%lld", (long long)key.u.f);
    } else {
      text[0] = 1;
      jv_format_float(key.u.f, text + 1);
    }
    break;
  case JV_NONE:
    snprintf(text, sizeof text, "\x01None");
    break;
  default:
    jinja_fail(j, line, "unhashable type: '%s' (as a dict key)", jv_type_name(key));
  }
  return jv_str_copy(j, text, strlen(text)).u.s;
}

struct jv jv_key_value(struct jinja *j, struct jstr key) {
  if (key.n == 0 || key.p[0] != 1)
    return jv_str(key);
  struct jv text = jv_str_copy(j, key.p + 1, key.n - 1);
  if (jstr_eq(text.u.s, "None"))
    return jv_none();
  char *end;
  long long i = strtoll(text.u.s.p, &end, 10);
  if (*end == 0)
    return jv_int(i);
  return jv_float(strtod(text.u.s.p, NULL));
}
