/* The tree rendered. Scopes follow Jinja: a for loop's body gets a fresh scope on every
 * iteration (so {% set %} inside a loop is gone after it — templates use namespace() to carry
 * state), if blocks share their enclosing scope, a macro call gets a scope whose parent is the
 * scope the macro was defined in. Operators follow Python on Python's types; an undefined value
 * renders as "", is false, iterates as nothing, and fails in arithmetic, calls and attribute
 * access, as Jinja's default Undefined does. */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct jscope {
  struct jscope *parent;
  struct jstr *names;
  struct jv *values;
  size_t n, cap;
};

struct jmacro {
  struct jstr name;
  struct jnodes *params;
  struct jnode *body;
  struct jscope *closure;
  struct jv caller; /* JV_UNDEFINED, or the {% call %} block's body as a macro */
};

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

struct jscope *jinja_scope_new(struct jinja *j, struct jscope *parent) {
  struct jscope *s = jinja_alloc(j, sizeof *s);
  memset(s, 0, sizeof *s);
  s->parent = parent;
  return s;
}

void jinja_scope_set(struct jinja *j, struct jscope *scope, struct jstr name, struct jv value) {
  for (size_t k = 0; k < scope->n; k++)
    if (jstr_same(scope->names[k], name)) {
      scope->values[k] = value;
      return;
    }
  if (scope->n == scope->cap) {
    size_t cap = scope->cap ? 2 * scope->cap : 8;
    scope->names = jinja_grow(j, scope->names, scope->n, cap, sizeof *scope->names);
    scope->values = jinja_grow(j, scope->values, scope->n, cap, sizeof *scope->values);
    scope->cap = cap;
  }
  scope->names[scope->n] = name;
  scope->values[scope->n] = value;
  scope->n++;
}

static struct jv *scope_lookup(struct jscope *scope, struct jstr name) {
  for (; scope; scope = scope->parent)
    for (size_t k = scope->n; k-- > 0;)
      if (jstr_same(scope->names[k], name))
        return &scope->values[k];
  return NULL;
}

static struct jv eval(struct jinja *j, struct jscope *scope, struct jnode *n);
static enum flow exec(struct jinja *j, struct jscope *scope, struct jnode *n, struct jbuf *out);

_Noreturn static void undefined_error(struct jinja *j, int line, struct jv v) {
  if (v.u.s.n)
    jinja_fail(j, line, "'%.*s' is undefined", (int)v.u.s.n, v.u.s.p);
  jinja_fail(j, line, "an undefined value was used");
}

/* ---- arguments ---- */

struct jv *jargs_get(struct jargs *args, size_t index, const char *name) {
  if (index < args->npos)
    return &args->pos[index];
  if (name)
    for (size_t k = 0; k < args->nkw; k++)
      if (jstr_eq(args->kwnames[k], name))
        return &args->kw[k];
  return NULL;
}

void jargs_check(struct jinja *j, int line, const char *what, struct jargs *args, const char *const *names,
                 size_t count) {
  if (args->npos > count)
    jinja_fail(j, line, "%s takes at most %zu argument(s), %zu given", what, count, args->npos);
  for (size_t k = 0; k < args->nkw; k++) {
    bool known = false;
    for (size_t m = 0; m < count && !known; m++)
      known = names[m] && jstr_eq(args->kwnames[k], names[m]);
    if (!known)
      jinja_fail(j, line, "%s got an unexpected keyword argument '%.*s'", what, (int)args->kwnames[k].n,
                 args->kwnames[k].p);
  }
}

static struct jargs eval_args(struct jinja *j, struct jscope *scope, struct jnode *call) {
  struct jargs a = {0};
  a.npos = call->args.n;
  a.nkw = call->kwargs.n;
  if (a.npos) {
    a.pos = jinja_alloc(j, a.npos * sizeof *a.pos);
    for (size_t k = 0; k < a.npos; k++)
      a.pos[k] = eval(j, scope, call->args.v[k]);
  }
  if (a.nkw) {
    a.kw = jinja_alloc(j, a.nkw * sizeof *a.kw);
    a.kwnames = jinja_alloc(j, a.nkw * sizeof *a.kwnames);
    for (size_t k = 0; k < a.nkw; k++) {
      a.kwnames[k] = call->kwargs.v[k]->name;
      a.kw[k] = eval(j, scope, call->kwargs.v[k]->a);
    }
  }
  return a;
}

/* ---- macros ---- */

static struct jv call_macro(struct jinja *j, int line, struct jmacro *m, struct jargs *args) {
  if (++j->depth > j->depth_limit)
    jinja_fail(j, line, "macro calls nest deeper than %d", j->depth_limit);
  struct jscope *scope = jinja_scope_new(j, m->closure);
  size_t nparams = m->params->n;
  struct jv varargs = jv_list_new(j, 0);
  varargs.u.list->tuple = true;
  for (size_t k = nparams; k < args->npos; k++)
    jv_list_push(j, varargs, args->pos[k]);
  struct jv kwargs = jv_dict_new(j, 0);
  for (size_t k = 0; k < args->nkw; k++) {
    bool is_param = false;
    for (size_t p = 0; p < nparams && !is_param; p++)
      is_param = jstr_same(m->params->v[p]->name, args->kwnames[k]);
    if (!is_param)
      jv_dict_set(j, kwargs, args->kwnames[k], args->kw[k]);
  }
  for (size_t p = 0; p < nparams; p++) {
    struct jnode *param = m->params->v[p];
    struct jv *given = NULL;
    if (p < args->npos)
      given = &args->pos[p];
    for (size_t k = 0; k < args->nkw && !given; k++)
      if (jstr_same(args->kwnames[k], param->name))
        given = &args->kw[k];
    struct jv value;
    if (given)
      value = *given;
    else if (param->a)
      value = eval(j, scope, param->a);
    else
      value = jv_undefined(param->name);
    jinja_scope_set(j, scope, param->name, value);
  }
  jinja_scope_set(j, scope, jstr_c("varargs"), varargs);
  jinja_scope_set(j, scope, jstr_c("kwargs"), kwargs);
  if (m->caller.kind != JV_UNDEFINED)
    jinja_scope_set(j, scope, jstr_c("caller"), m->caller);
  struct jbuf out = {0};
  exec(j, scope, m->body, &out);
  j->depth--;
  return jbuf_take(&out);
}

struct jv jinja_call_value(struct jinja *j, int line, struct jv callee, struct jargs *args) {
  switch (callee.kind) {
  case JV_MACRO:
    return call_macro(j, line, callee.u.macro, args);
  case JV_BUILTIN:
    return jinja_call_builtin(j, line, callee.u.builtin, args);
  case JV_METHOD:
    return jinja_call_method(j, line, callee.u.method, args);
  case JV_UNDEFINED:
    undefined_error(j, line, callee);
  default:
    jinja_fail(j, line, "'%s' object is not callable", jv_type_name(callee));
  }
}

/* ---- operators ---- */

static int64_t checked(struct jinja *j, int line, bool overflow, int64_t r) {
  if (overflow)
    jinja_fail(j, line, "integer overflow (beyond 64 bits)");
  return r;
}

static const char *op_text(enum jop op) {
  switch (op) {
  case OP_ADD:
    return "+";
  case OP_SUB:
    return "-";
  case OP_MUL:
    return "*";
  case OP_DIV:
    return "/";
  case OP_FLOORDIV:
    return "//";
  case OP_MOD:
    return "%";
  case OP_POW:
    return "**";
  default:
    return "?";
  }
}

static struct jv repeat(struct jinja *j, int line, struct jv seq, int64_t times) {
  if (times < 0)
    times = 0;
  if (seq.kind == JV_STRING) {
    if (seq.u.s.n && (uint64_t)times > j->output_limit / seq.u.s.n)
      jinja_fail(j, line, "string repetition beyond %zu bytes", j->output_limit);
    struct jbuf b = {0};
    for (int64_t k = 0; k < times; k++)
      jbuf_put(j, &b, seq.u.s.p, seq.u.s.n);
    return jbuf_take(&b);
  }
  struct jlist *l = seq.u.list;
  if (l->n && (uint64_t)times > (j->arena_limit / sizeof(struct jv)) / l->n)
    jinja_fail(j, line, "list repetition beyond the memory limit");
  struct jv r = jv_list_new(j, l->n * (size_t)times);
  r.u.list->tuple = l->tuple;
  for (int64_t k = 0; k < times; k++)
    for (size_t i = 0; i < l->n; i++)
      jv_list_push(j, r, l->items[i]);
  return r;
}

static struct jv arithmetic(struct jinja *j, int line, enum jop op, struct jv a, struct jv b) {
  if (a.kind == JV_UNDEFINED)
    undefined_error(j, line, a);
  if (b.kind == JV_UNDEFINED)
    undefined_error(j, line, b);
  if (op == OP_ADD && a.kind == JV_STRING && b.kind == JV_STRING) {
    bool markup = a.markup || b.markup;
    if (markup) { /* Markup + str escapes the str */
      a = jv_html_escape(j, a);
      b = jv_html_escape(j, b);
    }
    struct jbuf s = {0};
    jbuf_put(j, &s, a.u.s.p, a.u.s.n);
    jbuf_put(j, &s, b.u.s.p, b.u.s.n);
    struct jv r = s.p ? jbuf_take(&s) : jv_cstr("");
    r.markup = markup;
    return r;
  }
  if (op == OP_ADD && a.kind == JV_LIST && b.kind == JV_LIST && a.u.list->tuple == b.u.list->tuple) {
    struct jv r = jv_list_new(j, a.u.list->n + b.u.list->n);
    r.u.list->tuple = a.u.list->tuple;
    for (size_t k = 0; k < a.u.list->n; k++)
      jv_list_push(j, r, a.u.list->items[k]);
    for (size_t k = 0; k < b.u.list->n; k++)
      jv_list_push(j, r, b.u.list->items[k]);
    return r;
  }
  if (op == OP_MUL && (a.kind == JV_STRING || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL))
    return repeat(j, line, a, b.kind == JV_BOOL ? b.u.b : b.u.i);
  if (op == OP_MUL && (b.kind == JV_STRING || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
    return repeat(j, line, b, a.kind == JV_BOOL ? a.u.b : a.u.i);
  if (!jv_is_number(a) || !jv_is_number(b))
    jinja_fail(j, line, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op), jv_type_name(a),
               jv_type_name(b));
  if (a.kind != JV_FLOAT && b.kind != JV_FLOAT && op != OP_DIV) {
    int64_t x = a.kind == JV_BOOL ? a.u.b : a.u.i, y = b.kind == JV_BOOL ? b.u.b : b.u.i, r = 0;
    bool overflow;
    switch (op) {
    case OP_ADD:
      overflow = __builtin_add_overflow(x, y, &r);
      return jv_int(checked(j, line, overflow, r));
    case OP_SUB:
      overflow = __builtin_sub_overflow(x, y, &r);
      return jv_int(checked(j, line, overflow, r));
    case OP_MUL:
      overflow = __builtin_mul_overflow(x, y, &r);
      return jv_int(checked(j, line, overflow, r));
    case OP_FLOORDIV:
    case OP_MOD: {
      if (y == 0)
        jinja_fail(j, line, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1)
        jinja_fail(j, line, "integer overflow (beyond 64 bits)");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return jv_int(op == OP_FLOORDIV ? q : m);
    }
    case OP_POW: {
      if (y < 0)
        return jv_float(pow((double)x, (double)y));
      int64_t result = 1;
      for (int64_t k = 0; k < y; k++) {
        if (__builtin_mul_overflow(result, x, &result))
          jinja_fail(j, line, "integer overflow (beyond 64 bits)");
        if (result == 0 || result == 1 || (result == -1 && k > 64))
          break;
      }
      return jv_int(result);
    }
    default:
      break;
    }
  }
  double x = jv_as_double(a), y = jv_as_double(b);
  switch (op) {
  case OP_ADD:
    return jv_float(x + y);
  case OP_SUB:
    return jv_float(x - y);
  case OP_MUL:
    return jv_float(x * y);
  case OP_DIV:
    if (y == 0)
      jinja_fail(j, line, "division by zero");
    return jv_float(x / y);
  case OP_FLOORDIV:
  case OP_MOD: {
    if (y == 0)
      jinja_fail(j, line, "float division or modulo by zero");
    /* Python's float_divmod */
    double m = fmod(x, y), div = (x - m) / y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      m += y;
      div -= 1.0;
    }
    double floored = floor(div);
    if (div - floored > 0.5)
      floored += 1.0;
    return jv_float(op == OP_MOD ? m : floored);
  }
  case OP_POW:
    return jv_float(pow(x, y));
  default:
    jinja_fail(j, line, "unsupported operator");
  }
}

static bool contains(struct jinja *j, int line, struct jv item, struct jv container) {
  switch (container.kind) {
  case JV_STRING:
    if (item.kind != JV_STRING)
      jinja_fail(j, line, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
    if (item.u.s.n == 0)
      return true;
    for (size_t k = 0; k + item.u.s.n <= container.u.s.n; k++)
      if (memcmp(container.u.s.p + k, item.u.s.p, item.u.s.n) == 0)
        return true;
    return false;
  case JV_LIST:
    for (size_t k = 0; k < container.u.list->n; k++)
      if (jv_equal(container.u.list->items[k], item))
        return true;
    return false;
  case JV_DICT:
    if (item.kind == JV_STRING)
      return jv_dict_get(container, item.u.s) != NULL;
    return jv_is_number(item) || item.kind == JV_NONE ? jv_dict_get(container, jv_key(j, line, item)) != NULL : false;
  case JV_UNDEFINED:
    return false;
  default:
    jinja_fail(j, line, "argument of type '%s' is not iterable", jv_type_name(container));
  }
}

static bool compare(struct jinja *j, int line, enum jop op, struct jv a, struct jv b) {
  switch (op) {
  case OP_EQ:
    return jv_equal(a, b);
  case OP_NE:
    return !jv_equal(a, b);
  case OP_IN:
    return contains(j, line, a, b);
  case OP_NOT_IN:
    return !contains(j, line, a, b);
  default:
    break;
  }
  if (a.kind == JV_UNDEFINED)
    undefined_error(j, line, a);
  if (b.kind == JV_UNDEFINED)
    undefined_error(j, line, b);
  int c = jv_compare(j, line, a, b);
  switch (op) {
  case OP_LT:
    return c < 0;
  case OP_LE:
    return c <= 0;
  case OP_GT:
    return c > 0;
  default:
    return c >= 0;
  }
}

/* ---- subscripts ---- */

static bool slice_index(struct jinja *j, int line, struct jv v, int64_t *out) {
  if (v.kind == JV_NONE || v.kind == JV_UNDEFINED)
    return false;
  if (v.kind == JV_BOOL) {
    *out = v.u.b;
    return true;
  }
  if (v.kind != JV_INT)
    jinja_fail(j, line, "slice indices must be integers or None");
  *out = v.u.i;
  return true;
}

static struct jv slice(struct jinja *j, int line, struct jv object, struct jv start_v, struct jv stop_v,
                       struct jv step_v) {
  int64_t len;
  if (object.kind == JV_STRING)
    len = (int64_t)jstr_codepoints(object.u.s);
  else if (object.kind == JV_LIST && !object.u.list->generator)
    len = (int64_t)object.u.list->n;
  else if (object.kind == JV_UNDEFINED)
    undefined_error(j, line, object);
  else
    jinja_fail(j, line, "'%s' object is not subscriptable", jv_type_name(object));
  int64_t step = 1, start, stop;
  if (slice_index(j, line, step_v, &step) && step == 0)
    jinja_fail(j, line, "slice step cannot be zero");
  bool has_start = slice_index(j, line, start_v, &start), has_stop = slice_index(j, line, stop_v, &stop);
  /* Python's PySlice_AdjustIndices */
  if (!has_start)
    start = step < 0 ? len - 1 : 0;
  else if (start < 0) {
    start += len;
    if (start < 0)
      start = step < 0 ? -1 : 0;
  } else if (start >= len)
    start = step < 0 ? len - 1 : len;
  if (!has_stop)
    stop = step < 0 ? -1 : len;
  else if (stop < 0) {
    stop += len;
    if (stop < 0)
      stop = step < 0 ? -1 : 0;
  } else if (stop >= len)
    stop = step < 0 ? len - 1 : len;
  if (object.kind == JV_LIST) {
    struct jv r = jv_list_new(j, 0);
    r.u.list->tuple = object.u.list->tuple;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
      jv_list_push(j, r, object.u.list->items[k]);
    return r;
  }
  /* strings: code point offsets once, then the pieces */
  struct jstr s = object.u.s;
  size_t *offsets = jinja_alloc(j, ((size_t)len + 1) * sizeof *offsets);
  size_t c = 0;
  for (size_t k = 0; k < s.n; k++)
    if (((unsigned char)s.p[k] & 0xC0) != 0x80)
      offsets[c++] = k;
  offsets[len] = s.n;
  struct jbuf b = {0};
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step)
    jbuf_put(j, &b, s.p + offsets[k], offsets[k + 1] - offsets[k]);
  return b.p ? jbuf_take(&b) : jv_cstr("");
}

static struct jv getitem(struct jinja *j, int line, struct jv object, struct jv index) {
  switch (object.kind) {
  case JV_UNDEFINED:
    undefined_error(j, line, object);
  case JV_DICT:
    if (index.kind == JV_STRING) {
      struct jv *v = object.u.dict->namespace ? NULL : jv_dict_get(object, index.u.s);
      if (v)
        return *v;
      return jinja_getattr(j, line, object, index.u.s);
    }
    if (!object.u.dict->namespace && (index.kind == JV_INT || index.kind == JV_BOOL || index.kind == JV_FLOAT ||
                                      index.kind == JV_NONE)) {
      struct jv *v = jv_dict_get(object, jv_key(j, line, index));
      if (v)
        return *v;
    }
    return jv_undefined((struct jstr){"", 0});
  case JV_LIST:
  case JV_STRING: {
    if (object.kind == JV_LIST && object.u.list->generator)
      jinja_fail(j, line, "'generator' object is not subscriptable");
    if (index.kind == JV_STRING)
      return jinja_getattr(j, line, object, index.u.s);
    if (index.kind != JV_INT && index.kind != JV_BOOL)
      return jv_undefined((struct jstr){"", 0});
    int64_t i = index.kind == JV_BOOL ? index.u.b : index.u.i;
    int64_t len = object.kind == JV_LIST ? (int64_t)object.u.list->n : (int64_t)jstr_codepoints(object.u.s);
    if (i < 0)
      i += len;
    if (i < 0 || i >= len)
      return jv_undefined((struct jstr){"", 0});
    if (object.kind == JV_LIST)
      return object.u.list->items[i];
    size_t from = jstr_offset(object.u.s, (size_t)i), to = jstr_offset(object.u.s, (size_t)i + 1);
    return jv_str((struct jstr){object.u.s.p + from, to - from});
  }
  default:
    if (index.kind == JV_STRING)
      return jinja_getattr(j, line, object, index.u.s);
    return jv_undefined((struct jstr){"", 0});
  }
}

/* ---- expressions ---- */

static struct jv eval_inner(struct jinja *j, struct jscope *scope, struct jnode *n) {
  switch (n->kind) {
  case JE_LITERAL:
    return n->value;
  case JE_NAME: {
    struct jv *v = scope_lookup(scope, n->name);
    if (v)
      return *v;
    return jinja_builtin_global(n->name);
  }
  case JE_LIST:
  case JE_TUPLE: {
    struct jv list = jv_list_new(j, n->args.n);
    list.u.list->tuple = n->kind == JE_TUPLE;
    for (size_t k = 0; k < n->args.n; k++)
      jv_list_push(j, list, eval(j, scope, n->args.v[k]));
    return list;
  }
  case JE_DICT: {
    struct jv dict = jv_dict_new(j, n->args.n / 2);
    for (size_t k = 0; k + 1 < n->args.n; k += 2) {
      struct jstr key = jv_key(j, n->line, eval(j, scope, n->args.v[k]));
      jv_dict_set(j, dict, key, eval(j, scope, n->args.v[k + 1]));
    }
    return dict;
  }
  case JE_ATTR: {
    struct jv object = eval(j, scope, n->a);
    if (object.kind == JV_UNDEFINED)
      undefined_error(j, n->line, object);
    return jinja_getattr(j, n->line, object, n->name);
  }
  case JE_INDEX: {
    struct jv object = eval(j, scope, n->a);
    if (n->b->kind == JE_SLICE) {
      struct jnode *s = n->b;
      struct jv none = jv_none();
      return slice(j, n->line, object, s->a ? eval(j, scope, s->a) : none, s->b ? eval(j, scope, s->b) : none,
                   s->c ? eval(j, scope, s->c) : none);
    }
    return getitem(j, n->line, object, eval(j, scope, n->b));
  }
  case JE_CALL: {
    struct jv callee = eval(j, scope, n->a);
    struct jargs args = eval_args(j, scope, n);
    return jinja_call_value(j, n->line, callee, &args);
  }
  case JE_FILTER: {
    struct jv value = eval(j, scope, n->a);
    struct jargs args = eval_args(j, scope, n);
    return jinja_apply_filter(j, n->line, n->name, value, &args);
  }
  case JE_TEST: {
    struct jv value = eval(j, scope, n->a);
    struct jargs args = eval_args(j, scope, n);
    bool r = jinja_apply_test(j, n->line, n->name, value, &args);
    return jv_bool(n->negated ? !r : r);
  }
  case JE_UNARY: {
    struct jv v = eval(j, scope, n->a);
    if (n->op == OP_NOT)
      return jv_bool(!jv_truthy(v));
    if (v.kind == JV_UNDEFINED)
      undefined_error(j, n->line, v);
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
      int64_t i = v.kind == JV_BOOL ? v.u.b : v.u.i;
      if (n->op == OP_POS)
        return jv_int(i);
      if (i == INT64_MIN)
        jinja_fail(j, n->line, "integer overflow (beyond 64 bits)");
      return jv_int(-i);
    }
    if (v.kind == JV_FLOAT)
      return jv_float(n->op == OP_NEG ? -v.u.f : v.u.f);
    jinja_fail(j, n->line, "bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+", jv_type_name(v));
  }
  case JE_BINARY: {
    struct jv a = eval(j, scope, n->a), b = eval(j, scope, n->b);
    if (n->op == OP_TILDE) {
      struct jbuf s = {0};
      jv_write_str(j, &s, a);
      jv_write_str(j, &s, b);
      return s.p ? jbuf_take(&s) : jv_cstr("");
    }
    return arithmetic(j, n->line, n->op, a, b);
  }
  case JE_AND: {
    struct jv a = eval(j, scope, n->a);
    return jv_truthy(a) ? eval(j, scope, n->b) : a;
  }
  case JE_OR: {
    struct jv a = eval(j, scope, n->a);
    return jv_truthy(a) ? a : eval(j, scope, n->b);
  }
  case JE_COMPARE: {
    struct jv left = eval(j, scope, n->args.v[0]);
    for (size_t k = 1; k < n->args.n; k++) {
      struct jv right = eval(j, scope, n->args.v[k]);
      if (!compare(j, n->line, n->ops[k - 1], left, right))
        return jv_bool(false);
      left = right;
    }
    return jv_bool(true);
  }
  case JE_COND:
    if (jv_truthy(eval(j, scope, n->b)))
      return eval(j, scope, n->a);
    return n->c ? eval(j, scope, n->c) : jv_undefined((struct jstr){"", 0});
  default:
    jinja_fail(j, n->line, "this expression is not supported here");
  }
}

static struct jv eval(struct jinja *j, struct jscope *scope, struct jnode *n) {
  jinja_step(j, n->line);
  j->line = n->line;
  if (++j->depth > j->depth_limit)
    jinja_fail(j, n->line, "expressions nest deeper than %d", j->depth_limit);
  struct jv v = eval_inner(j, scope, n);
  j->depth--;
  return v;
}

/* ---- statements ---- */

/* The items a for loop walks: a list's items, a dict's keys, a string's characters. */
static struct jlist *iterate(struct jinja *j, int line, struct jv v) {
  switch (v.kind) {
  case JV_LIST:
    return v.u.list;
  case JV_UNDEFINED:
    return jv_list_new(j, 0).u.list;
  case JV_DICT: {
    if (v.u.dict->namespace)
      break;
    struct jv keys = jv_list_new(j, v.u.dict->n);
    for (size_t k = 0; k < v.u.dict->n; k++)
      jv_list_push(j, keys, jv_key_value(j, v.u.dict->keys[k]));
    return keys.u.list;
  }
  case JV_STRING: {
    struct jv chars = jv_list_new(j, 0);
    struct jstr s = v.u.s;
    for (size_t k = 0; k < s.n;) {
      size_t e = k + 1;
      while (e < s.n && ((unsigned char)s.p[e] & 0xC0) == 0x80)
        e++;
      jv_list_push(j, chars, jv_str((struct jstr){s.p + k, e - k}));
      k = e;
    }
    return chars.u.list;
  }
  default:
    break;
  }
  jinja_fail(j, line, "'%s' object is not iterable", jv_type_name(v));
}

static void assign(struct jinja *j, struct jscope *scope, struct jnode *target, struct jv value) {
  if (target->kind == JE_NAME) {
    jinja_scope_set(j, scope, target->name, value);
    return;
  }
  if (target->kind == JE_TUPLE) {
    struct jlist *items = iterate(j, target->line, value);
    if (items->n != target->args.n)
      jinja_fail(j, target->line, "cannot unpack %zu value(s) into %zu name(s)", items->n, target->args.n);
    for (size_t k = 0; k < items->n; k++)
      jinja_scope_set(j, scope, target->args.v[k]->name, items->items[k]);
    return;
  }
  /* ns.attribute */
  struct jv *ns = scope_lookup(scope, target->a->name);
  if (!ns || ns->kind != JV_DICT || !ns->u.dict->namespace)
    jinja_fail(j, target->line, "cannot assign attribute on non-namespace object '%.*s'", (int)target->a->name.n,
               target->a->name.p);
  jv_dict_set(j, *ns, target->name, value);
}

static struct jv loop_object(struct jinja *j, struct jlist *items, size_t k) {
  struct jv loop = jv_dict_new(j, 11);
  size_t n = items->n;
  jv_dict_set(j, loop, jstr_c("index"), jv_int((int64_t)k + 1));
  jv_dict_set(j, loop, jstr_c("index0"), jv_int((int64_t)k));
  jv_dict_set(j, loop, jstr_c("revindex"), jv_int((int64_t)(n - k)));
  jv_dict_set(j, loop, jstr_c("revindex0"), jv_int((int64_t)(n - k - 1)));
  jv_dict_set(j, loop, jstr_c("first"), jv_bool(k == 0));
  jv_dict_set(j, loop, jstr_c("last"), jv_bool(k + 1 == n));
  jv_dict_set(j, loop, jstr_c("length"), jv_int((int64_t)n));
  jv_dict_set(j, loop, jstr_c("depth"), jv_int(1));
  jv_dict_set(j, loop, jstr_c("depth0"), jv_int(0));
  jv_dict_set(j, loop, jstr_c("previtem"), k > 0 ? items->items[k - 1] : jv_undefined(jstr_c("loop.previtem")));
  jv_dict_set(j, loop, jstr_c("nextitem"), k + 1 < n ? items->items[k + 1] : jv_undefined(jstr_c("loop.nextitem")));
  return loop;
}

static void exec_for(struct jinja *j, struct jscope *scope, struct jnode *n, struct jbuf *out) {
  struct jlist *items = iterate(j, n->line, eval(j, scope, n->b));
  if (n->c) { /* {% for x in xs if cond %}: loop.* counts the items kept */
    struct jv kept = jv_list_new(j, items->n);
    for (size_t k = 0; k < items->n; k++) {
      struct jscope *s = jinja_scope_new(j, scope);
      assign(j, s, n->a, items->items[k]);
      if (jv_truthy(eval(j, s, n->c)))
        jv_list_push(j, kept, items->items[k]);
    }
    items = kept.u.list;
  }
  for (size_t k = 0; k < items->n; k++) {
    struct jscope *s = jinja_scope_new(j, scope);
    assign(j, s, n->a, items->items[k]);
    jinja_scope_set(j, s, jstr_c("loop"), loop_object(j, items, k));
    if (exec(j, s, n->d, out) == FLOW_BREAK)
      break;
  }
  if (items->n == 0 && n->orelse.n)
    exec(j, jinja_scope_new(j, scope), n->orelse.v[0], out);
}

static struct jv make_macro(struct jinja *j, struct jscope *scope, struct jnode *n) {
  struct jmacro *m = jinja_alloc(j, sizeof *m);
  m->name = n->name;
  m->params = &n->args;
  m->body = n->d;
  m->closure = scope;
  m->caller = jv_undefined((struct jstr){"", 0});
  struct jv v = {.kind = JV_MACRO};
  v.u.macro = m;
  return v;
}

static enum flow exec(struct jinja *j, struct jscope *scope, struct jnode *n, struct jbuf *out) {
  jinja_step(j, n->line);
  j->line = n->line;
  if (++j->depth > j->depth_limit)
    jinja_fail(j, n->line, "statements nest deeper than %d", j->depth_limit);
  enum flow flow = FLOW_NORMAL;
  switch (n->kind) {
  case JN_SEQUENCE:
    for (size_t k = 0; k < n->body.n && flow == FLOW_NORMAL; k++)
      flow = exec(j, scope, n->body.v[k], out);
    break;
  case JN_TEXT:
    jbuf_put(j, out, n->value.u.s.p, n->value.u.s.n);
    break;
  case JN_OUTPUT:
    jv_write_str(j, out, eval(j, scope, n->a));
    break;
  case JN_IF:
    if (jv_truthy(eval(j, scope, n->a)))
      flow = exec(j, scope, n->d, out);
    else if (n->orelse.n)
      flow = exec(j, scope, n->orelse.v[0], out);
    break;
  case JN_FOR:
    exec_for(j, scope, n, out);
    break;
  case JN_SET:
    assign(j, scope, n->a, eval(j, scope, n->b));
    break;
  case JN_SET_BLOCK:
  case JN_FILTER_BLOCK: {
    struct jbuf body = {0};
    exec(j, scope, n->d, &body);
    struct jv value = body.p ? jbuf_take(&body) : jv_cstr("");
    if (n->b) {
      n->c->value = value;
      value = eval(j, scope, n->b);
    }
    if (n->kind == JN_SET_BLOCK)
      assign(j, scope, n->a, value);
    else
      jv_write_str(j, out, value);
    break;
  }
  case JN_MACRO:
    jinja_scope_set(j, scope, n->name, make_macro(j, scope, n));
    break;
  case JN_CALL_BLOCK: {
    struct jv callee = eval(j, scope, n->a->a);
    struct jargs args = eval_args(j, scope, n->a);
    if (callee.kind != JV_MACRO)
      jinja_fail(j, n->line, "{%% call %%} needs a macro, not %s", jv_type_name(callee));
    struct jmacro *m = jinja_alloc(j, sizeof *m);
    *m = *callee.u.macro;
    m->caller = make_macro(j, scope, n);
    struct jv with_caller = {.kind = JV_MACRO};
    with_caller.u.macro = m;
    jv_write_str(j, out, jinja_call_value(j, n->line, with_caller, &args));
    break;
  }
  case JN_BREAK:
    flow = FLOW_BREAK;
    break;
  case JN_CONTINUE:
    flow = FLOW_CONTINUE;
    break;
  default:
    jinja_fail(j, n->line, "this statement is not supported here");
  }
  j->depth--;
  return flow;
}

void jinja_render(struct jinja *j, struct jnode *root, struct jscope *globals, struct jbuf *out) {
  exec(j, globals, root, out);
}
