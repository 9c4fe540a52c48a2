/* Attributes and methods as Jinja's ImmutableSandboxedEnvironment exposes them: x.name is a
 * method of str, dict or list when Python has one of that name, else a dict's key (a missing
 * one is undefined); methods that modify (list.append, dict.pop, dict.update, ...) fail as the
 * sandbox makes them fail. Also the global functions: range, namespace, dict, raise_exception,
 * strftime_now. */
#include "jinja.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const string_methods[] = {
    "strip",  "lstrip",     "rstrip", "split",   "rsplit",  "startswith", "endswith", "replace",
    "upper",  "lower",      "title",  "capitalize", "find", "rfind",      "count",    "join",
    "format", "splitlines", "isdigit", "isalpha", "isalnum", "isspace",   "islower",  "isupper",
};
static const char *const dict_methods[] = {"items", "keys", "values", "get"};
static const char *const dict_unsafe[] = {"pop", "popitem", "update", "setdefault", "clear", "copy", "fromkeys"};
static const char *const list_methods[] = {"count", "index"};
static const char *const list_unsafe[] = {"append", "extend", "insert", "pop", "remove", "sort", "reverse",
                                          "clear", "copy"};

static bool listed(struct jstr name, const char *const *names, size_t count) {
  for (size_t k = 0; k < count; k++)
    if (jstr_eq(name, names[k]))
      return true;
  return false;
}
#define LISTED(name, names) listed(name, names, sizeof names / sizeof names[0])

static struct jv method(struct jinja *j, struct jv self, struct jstr name) {
  struct jmethod *m = jinja_alloc(j, sizeof *m);
  m->self = self;
  m->name = name;
  struct jv v = {.kind = JV_METHOD};
  v.u.method = m;
  return v;
}

struct jv jinja_getattr(struct jinja *j, int line, struct jv object, struct jstr name) {
  (void)line;
  switch (object.kind) {
  case JV_DICT:
    if (!object.u.dict->namespace &&
        (LISTED(name, dict_methods) || LISTED(name, dict_unsafe)))
      return method(j, object, name);
    {
      struct jv *v = jv_dict_get(object, name);
      if (v)
        return *v;
    }
    break;
  case JV_STRING:
    if (LISTED(name, string_methods))
      return method(j, object, name);
    break;
  case JV_LIST:
    if (LISTED(name, list_methods) || LISTED(name, list_unsafe))
      return method(j, object, name);
    break;
  default:
    break;
  }
  return jv_undefined(name);
}

static struct jstr arg_string(struct jinja *j, int line, const char *what, struct jv *v) {
  if (v->kind != JV_STRING)
    jinja_fail(j, line, "%s: expected a string argument, got %s", what, jv_type_name(*v));
  return v->u.s;
}

static int64_t arg_int(struct jinja *j, int line, const char *what, struct jv *v) {
  if (v->kind == JV_BOOL)
    return v->u.b;
  if (v->kind != JV_INT)
    jinja_fail(j, line, "%s: expected an integer argument, got %s", what, jv_type_name(*v));
  return v->u.i;
}

/* str.format: {} {0} {name} with no format spec or conversion; {{ and }} are braces */
static struct jv str_format(struct jinja *j, int line, struct jstr f, struct jargs *args) {
  struct jbuf b = {0};
  size_t auto_index = 0;
  for (size_t k = 0; k < f.n; k++) {
    char c = f.p[k];
    if ((c == '{' || c == '}') && k + 1 < f.n && f.p[k + 1] == c) {
      jbuf_put(j, &b, &c, 1);
      k++;
      continue;
    }
    if (c == '}')
      jinja_fail(j, line, "format: single '}' encountered in format string");
    if (c != '{') {
      jbuf_put(j, &b, &c, 1);
      continue;
    }
    size_t e = k + 1;
    while (e < f.n && f.p[e] != '}')
      e++;
    if (e >= f.n)
      jinja_fail(j, line, "format: single '{' encountered in format string");
    struct jstr field = {f.p + k + 1, e - k - 1};
    if (memchr(field.p, ':', field.n) || memchr(field.p, '!', field.n) || memchr(field.p, '.', field.n) ||
        memchr(field.p, '[', field.n))
      jinja_fail(j, line, "format: the field {%.*s} is not supported (only {}, {N}, {name})", (int)field.n,
                 field.p);
    struct jv *value = NULL;
    if (field.n == 0) {
      value = auto_index < args->npos ? &args->pos[auto_index] : NULL;
      auto_index++;
    } else if (field.p[0] >= '0' && field.p[0] <= '9') {
      size_t index = 0;
      for (size_t d = 0; d < field.n && index < 1000; d++)
        index = index * 10 + (size_t)(field.p[d] - '0');
      value = index < args->npos ? &args->pos[index] : NULL;
    } else {
      for (size_t a = 0; a < args->nkw && !value; a++)
        if (jstr_same(args->kwnames[a], field))
          value = &args->kw[a];
    }
    if (!value)
      jinja_fail(j, line, "format: no argument for the field {%.*s}", (int)field.n, field.p);
    jv_write_str(j, &b, *value);
    k = e;
  }
  return b.p ? jbuf_take(&b) : jv_cstr("");
}

static bool all_chars(struct jstr s, bool (*test)(char)) {
  if (s.n == 0)
    return false;
  for (size_t k = 0; k < s.n; k++)
    if (!test(s.p[k]))
      return false;
  return true;
}
static bool c_digit(char c) { return c >= '0' && c <= '9'; }
static bool c_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool c_alnum(char c) { return c_digit(c) || c_alpha(c); }
static bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static struct jv string_method(struct jinja *j, int line, struct jstr self, struct jstr name, struct jargs *a) {
  struct jv s = jv_str(self);
  char what[48];
  snprintf(what, sizeof what, "str.%.*s()", (int)name.n, name.p);
  if (jstr_eq(name, "strip") || jstr_eq(name, "lstrip") || jstr_eq(name, "rstrip")) {
    static const char *const names[] = {"chars"};
    jargs_check(j, line, what, a, names, 1);
    struct jv *chars = jargs_get(a, 0, NULL);
    struct jstr set;
    bool has = chars && chars->kind != JV_NONE;
    if (has)
      set = arg_string(j, line, what, chars);
    enum jstrip which = name.p[0] == 'l' ? JSTRIP_LEFT : name.p[0] == 'r' ? JSTRIP_RIGHT : JSTRIP_BOTH;
    return jinja_str_strip(s, has ? &set : NULL, which);
  }
  if (jstr_eq(name, "split") || jstr_eq(name, "rsplit")) {
    static const char *const names[] = {"sep", "maxsplit"};
    jargs_check(j, line, what, a, names, 2);
    struct jv *sep = jargs_get(a, 0, "sep"), *max = jargs_get(a, 1, "maxsplit");
    struct jstr sep_s;
    bool has = sep && sep->kind != JV_NONE;
    if (has)
      sep_s = arg_string(j, line, what, sep);
    return jinja_str_split(j, line, self, has ? &sep_s : NULL, max ? arg_int(j, line, what, max) : -1,
                           name.p[0] == 'r');
  }
  if (jstr_eq(name, "startswith") || jstr_eq(name, "endswith")) {
    static const char *const names[] = {"prefix"};
    jargs_check(j, line, what, a, names, 1);
    struct jv *p = jargs_get(a, 0, NULL);
    if (!p)
      jinja_fail(j, line, "%s takes exactly one argument", what);
    bool starts = name.p[0] == 's';
    if (p->kind == JV_LIST && p->u.list->tuple) {
      for (size_t k = 0; k < p->u.list->n; k++) {
        struct jstr x = arg_string(j, line, what, &p->u.list->items[k]);
        if (starts ? jinja_str_starts(self, x) : jinja_str_ends(self, x))
          return jv_bool(true);
      }
      return jv_bool(false);
    }
    struct jstr x = arg_string(j, line, what, p);
    return jv_bool(starts ? jinja_str_starts(self, x) : jinja_str_ends(self, x));
  }
  if (jstr_eq(name, "replace")) {
    static const char *const names[] = {"old", "new", "count"};
    jargs_check(j, line, what, a, names, 3);
    struct jv *old = jargs_get(a, 0, NULL), *with = jargs_get(a, 1, NULL), *count = jargs_get(a, 2, "count");
    if (!old || !with)
      jinja_fail(j, line, "%s needs two arguments", what);
    return jinja_str_replace(j, self, arg_string(j, line, what, old), arg_string(j, line, what, with),
                             count ? arg_int(j, line, what, count) : -1);
  }
  if (jstr_eq(name, "upper") || jstr_eq(name, "lower") || jstr_eq(name, "title") || jstr_eq(name, "capitalize")) {
    jargs_check(j, line, what, a, NULL, 0);
    enum jcase c = name.p[0] == 'u' ? JCASE_UPPER : name.p[0] == 'l' ? JCASE_LOWER : name.p[0] == 't' ? JCASE_TITLE
                                                                                                      : JCASE_CAPITALIZE;
    return jinja_str_case(j, self, c);
  }
  if (jstr_eq(name, "find") || jstr_eq(name, "rfind") || jstr_eq(name, "count")) {
    static const char *const names[] = {"sub"};
    jargs_check(j, line, what, a, names, 1);
    struct jv *sub = jargs_get(a, 0, NULL);
    if (!sub)
      jinja_fail(j, line, "%s takes exactly one argument", what);
    struct jstr needle = arg_string(j, line, what, sub);
    if (name.p[0] != 'c')
      return jv_int(jinja_str_find(self, needle, name.p[0] == 'r'));
    if (needle.n == 0)
      return jv_int((int64_t)jstr_codepoints(self) + 1);
    int64_t count = 0;
    for (size_t k = 0; k + needle.n <= self.n;) {
      if (memcmp(self.p + k, needle.p, needle.n) == 0) {
        count++;
        k += needle.n;
      } else {
        k++;
      }
    }
    return jv_int(count);
  }
  if (jstr_eq(name, "join")) {
    static const char *const names[] = {"iterable"};
    jargs_check(j, line, what, a, names, 1);
    struct jv *items = jargs_get(a, 0, NULL);
    if (!items || items->kind != JV_LIST)
      jinja_fail(j, line, "%s needs a list", what);
    struct jbuf b = {0};
    for (size_t k = 0; k < items->u.list->n; k++) {
      if (k)
        jbuf_put(j, &b, self.p, self.n);
      struct jv item = items->u.list->items[k];
      if (item.kind != JV_STRING)
        jinja_fail(j, line, "%s: sequence item %zu: expected str instance, %s found", what, k, jv_type_name(item));
      jbuf_put(j, &b, item.u.s.p, item.u.s.n);
    }
    return b.p ? jbuf_take(&b) : jv_cstr("");
  }
  if (jstr_eq(name, "format"))
    return str_format(j, line, self, a);
  if (jstr_eq(name, "splitlines")) {
    jargs_check(j, line, what, a, NULL, 0);
    struct jv lines = jv_list_new(j, 4);
    size_t start = 0;
    for (size_t k = 0; k < self.n; k++) {
      char c = self.p[k];
      if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
        jv_list_push(j, lines, jv_str((struct jstr){self.p + start, k - start}));
        if (c == '\r' && k + 1 < self.n && self.p[k + 1] == '\n')
          k++;
        start = k + 1;
      }
    }
    if (start < self.n)
      jv_list_push(j, lines, jv_str((struct jstr){self.p + start, self.n - start}));
    return lines;
  }
  jargs_check(j, line, what, a, NULL, 0);
  if (jstr_eq(name, "isdigit"))
    return jv_bool(all_chars(self, c_digit));
  if (jstr_eq(name, "isalpha"))
    return jv_bool(all_chars(self, c_alpha));
  if (jstr_eq(name, "isalnum"))
    return jv_bool(all_chars(self, c_alnum));
  if (jstr_eq(name, "isspace"))
    return jv_bool(all_chars(self, c_space));
  bool any_cased = false, wrong = false, upper = jstr_eq(name, "isupper");
  for (size_t k = 0; k < self.n; k++) {
    char c = self.p[k];
    if (c >= 'a' && c <= 'z') {
      any_cased = true;
      wrong |= upper;
    } else if (c >= 'A' && c <= 'Z') {
      any_cased = true;
      wrong |= !upper;
    }
  }
  return jv_bool(any_cased && !wrong);
}

static struct jv dict_method(struct jinja *j, int line, struct jv self, struct jstr name, struct jargs *a) {
  char what[48];
  snprintf(what, sizeof what, "dict.%.*s()", (int)name.n, name.p);
  struct jdict *d = self.u.dict;
  if (jstr_eq(name, "get")) {
    static const char *const names[] = {"key", "default"};
    jargs_check(j, line, what, a, names, 2);
    struct jv *key = jargs_get(a, 0, NULL), *fallback = jargs_get(a, 1, NULL);
    if (!key)
      jinja_fail(j, line, "%s needs a key", what);
    struct jv *v = jv_dict_get(self, jv_key(j, line, *key));
    if (v)
      return *v;
    return fallback ? *fallback : jv_none();
  }
  jargs_check(j, line, what, a, NULL, 0);
  struct jv out = jv_list_new(j, d->n);
  for (size_t k = 0; k < d->n; k++) {
    if (jstr_eq(name, "keys")) {
      jv_list_push(j, out, jv_key_value(j, d->keys[k]));
    } else if (jstr_eq(name, "values")) {
      jv_list_push(j, out, d->values[k]);
    } else {
      struct jv pair = jv_list_new(j, 2);
      pair.u.list->tuple = true;
      jv_list_push(j, pair, jv_key_value(j, d->keys[k]));
      jv_list_push(j, pair, d->values[k]);
      jv_list_push(j, out, pair);
    }
  }
  return out;
}

struct jv jinja_call_method(struct jinja *j, int line, struct jmethod *m, struct jargs *args) {
  struct jv self = m->self;
  if ((self.kind == JV_DICT && LISTED(m->name, dict_unsafe)) || (self.kind == JV_LIST && LISTED(m->name, list_unsafe)))
    jinja_fail(j, line, "access to attribute '%.*s' of '%s' object is unsafe (the sandbox forbids changing it)",
               (int)m->name.n, m->name.p, jv_type_name(self));
  if (self.kind == JV_STRING)
    return string_method(j, line, self.u.s, m->name, args);
  if (self.kind == JV_DICT)
    return dict_method(j, line, self, m->name, args);
  /* list.count, list.index */
  static const char *const names[] = {"value"};
  jargs_check(j, line, "list method", args, names, 1);
  struct jv *x = jargs_get(args, 0, NULL);
  if (!x)
    jinja_fail(j, line, "list.%.*s() takes exactly one argument", (int)m->name.n, m->name.p);
  int64_t count = 0;
  for (size_t k = 0; k < self.u.list->n; k++) {
    if (jv_equal(self.u.list->items[k], *x)) {
      if (jstr_eq(m->name, "index"))
        return jv_int((int64_t)k);
      count++;
    }
  }
  if (jstr_eq(m->name, "index"))
    jinja_fail(j, line, "list.index(x): x not in list");
  return jv_int(count);
}

/* ---- globals ---- */

enum builtin { BUILTIN_RANGE = 1, BUILTIN_NAMESPACE, BUILTIN_DICT, BUILTIN_RAISE, BUILTIN_STRFTIME };

struct jv jinja_builtin_global(struct jstr name) {
  static const struct {
    const char *name;
    enum builtin id;
  } globals[] = {{"range", BUILTIN_RANGE},
                 {"namespace", BUILTIN_NAMESPACE},
                 {"dict", BUILTIN_DICT},
                 {"raise_exception", BUILTIN_RAISE},
                 {"strftime_now", BUILTIN_STRFTIME}};
  for (size_t k = 0; k < sizeof globals / sizeof globals[0]; k++)
    if (jstr_eq(name, globals[k].name)) {
      struct jv v = {.kind = JV_BUILTIN};
      v.u.builtin = (int)globals[k].id;
      return v;
    }
  return jv_undefined(name);
}

/* Jinja's sandbox refuses ranges longer than this */
#define MAX_RANGE 100000

struct jv jinja_call_builtin(struct jinja *j, int line, int builtin, struct jargs *a) {
  switch ((enum builtin)builtin) {
  case BUILTIN_RANGE: {
    jargs_check(j, line, "range()", a, (const char *const[]){NULL, NULL, NULL}, 3);
    if (a->npos == 0)
      jinja_fail(j, line, "range expected at least 1 argument, got 0");
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1) {
      stop = arg_int(j, line, "range()", &a->pos[0]);
    } else {
      start = arg_int(j, line, "range()", &a->pos[0]);
      stop = arg_int(j, line, "range()", &a->pos[1]);
      if (a->npos == 3)
        step = arg_int(j, line, "range()", &a->pos[2]);
    }
    if (step == 0)
      jinja_fail(j, line, "range() arg 3 must not be zero");
    struct jv list = jv_list_new(j, 0);
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (list.u.list->n >= MAX_RANGE)
        jinja_fail(j, line, "range too big, maximum size for range is %d", MAX_RANGE);
      jv_list_push(j, list, jv_int(k));
      if ((step > 0 && k > INT64_MAX - step) || (step < 0 && k < INT64_MIN - step))
        break;
    }
    return list;
  }
  case BUILTIN_NAMESPACE:
  case BUILTIN_DICT: {
    struct jv d = jv_dict_new(j, a->nkw);
    d.u.dict->namespace = builtin == BUILTIN_NAMESPACE;
    if (a->npos > 1)
      jinja_fail(j, line, "%s() takes at most one positional argument", builtin == BUILTIN_DICT ? "dict" : "namespace");
    if (a->npos == 1) {
      if (a->pos[0].kind != JV_DICT || a->pos[0].u.dict->namespace)
        jinja_fail(j, line, "%s(): the positional argument must be a dict", builtin == BUILTIN_DICT ? "dict" : "namespace");
      for (size_t k = 0; k < a->pos[0].u.dict->n; k++)
        jv_dict_set(j, d, a->pos[0].u.dict->keys[k], a->pos[0].u.dict->values[k]);
    }
    for (size_t k = 0; k < a->nkw; k++)
      jv_dict_set(j, d, a->kwnames[k], a->kw[k]);
    return d;
  }
  case BUILTIN_RAISE: {
    struct jv *message = a->npos ? &a->pos[0] : NULL;
    if (message) {
      struct jv text = jv_to_string(j, *message);
      jinja_fail(j, line, "raise_exception: %.*s", (int)text.u.s.n, text.u.s.p);
    }
    jinja_fail(j, line, "raise_exception()");
  }
  case BUILTIN_STRFTIME: {
    if (a->npos != 1 || a->pos[0].kind != JV_STRING)
      jinja_fail(j, line, "strftime_now() takes one format string");
    struct tm local;
    if (j->now) {
      time_t fixed = (time_t)j->now;
      gmtime_r(&fixed, &local);
    } else {
      time_t now = time(NULL);
      localtime_r(&now, &local);
    }
    char out[256];
    struct jv fmt = jv_str_copy(j, a->pos[0].u.s.p, a->pos[0].u.s.n);
    size_t n = strftime(out, sizeof out, fmt.u.s.p, &local);
    return jv_str_copy(j, out, n);
  }
  }
  jinja_fail(j, line, "unknown function");
}
