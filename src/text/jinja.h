/* The Jinja interpreter that renders chat templates (chat_template.c is its only caller): what its
 * files share. It follows Jinja 3.1 as transformers configures it for apply_chat_template: an
 * ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, keep_trailing_newline off, the
 * loop controls ({% break %}, {% continue %}), {% generation %} blocks, a tojson filter that is
 * Python's json.dumps(ensure_ascii=False by default), raise_exception() and strftime_now().
 *
 *   jinja_value.c    values (Python's None, bool, int, float, str, list/tuple, dict), the arena
 *                    that owns every value of one render, str(), repr(), truthiness, equality
 *   jinja_json.c     jansson values in, json.dumps out (tojson)
 *   jinja_lexer.c    template text -> tokens, with the whitespace control
 *   jinja_parser.c   tokens -> a tree of statements and expressions
 *   jinja_eval.c     the tree rendered: scopes, loops, macros, operators, calls
 *   jinja_filters.c  filters and tests ({{ x | trim }}, {% if x is string %})
 *   jinja_methods.c  Python methods of str and dict (x.strip(), d.items()) and the globals
 *   jinja_strings.c  the str operations methods and filters share (strip, split, case, ...)
 *
 * Errors: every failure formats a message naming the construct and the template line into the
 * render's `struct jinja` and leaves through jinja_fail() (a longjmp back to the setjmp of
 * clattn__chat_template_render). Nothing leaks on that path because every allocation of a render
 * lives in its arena, freed as a whole. Limits on output size, arena size, steps and recursion
 * depth make any template, hostile ones included, finish in bounded time and memory.
 *
 * Known differences from Jinja, none reached by the templates tested: case mappings (upper,
 * lower, title) know Latin-1, Latin Extended-A, Greek and Cyrillic only; a dict key 2.0 becomes
 * 2 and True becomes 1 (Python keeps the first key object); macros accept extra arguments
 * (varargs and kwargs are always bound); a generator can be walked more than once; Markup
 * survives only `+`, |safe and |escape. Not supported, an error naming it: recursive loops,
 * loop.cycle/loop.changed, {% include %}, {% import %}, {% extends %}, {% block %}, {% with %},
 * {% do %}, `str % args`, format specs in str.format, filters such as round, batch, truncate,
 * wordwrap, groupby. */
#ifndef CLATTN_TEXT_JINJA_H
#define CLATTN_TEXT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values ---- */

enum jv_kind {
  JV_UNDEFINED, /* a missing name, key or attribute: renders as "", is false, iterates as [] */
  JV_NONE,
  JV_BOOL,
  JV_INT,
  JV_FLOAT,
  JV_STRING,    /* UTF-8 bytes; lengths, indices and slices count code points as Python does */
  JV_LIST,      /* a list, or a tuple when list->tuple (only repr() tells them apart) */
  JV_DICT,      /* insertion-ordered, string keys; a namespace() when dict->namespace */
  JV_MACRO,
  JV_BUILTIN,   /* a global function: range, namespace, raise_exception, strftime_now, dict */
  JV_METHOD,    /* a method bound to its receiver: "abc".upper, d.items */
};

struct jstr {
  const char *p;
  size_t n;
};

struct jlist;
struct jdict;
struct jmacro;
struct jmethod;

struct jv {
  enum jv_kind kind;
  union {
    bool b;
    int64_t i;
    double f;
    struct jstr s;       /* JV_STRING; JV_UNDEFINED: the name that was missing (may be empty) */
    struct jlist *list;
    struct jdict *dict;
    struct jmacro *macro;
    int builtin;
    struct jmethod *method;
  } u;
  bool markup; /* JV_STRING: a Markup (what |safe returns): `+` HTML-escapes a plain str added to it */
};

struct jlist {
  struct jv *items;
  size_t n, cap;
  bool tuple;
  bool generator; /* what map, select, items... return: always true, no len(), no [] */
};

struct jdict {
  struct jstr *keys;
  struct jv *values;
  size_t n, cap;
  bool namespace;
};

struct jmethod {
  struct jv self;
  struct jstr name;
};

/* ---- the render: arena, limits, error exit ---- */

struct jarena_block;

struct jinja {
  struct jarena_block *blocks;
  size_t arena_used, arena_limit; /* bytes of arena blocks allocated, and the most allowed */
  uint64_t steps, step_limit;     /* nodes evaluated, and the most allowed */
  int depth, depth_limit;         /* nesting of the parser and evaluator (and macro calls) */
  size_t output_limit;            /* the longest string a render may build */
  int line;                       /* the line being evaluated, for messages without one */
  long long now;                  /* strftime_now's time: seconds since 1970 UTC, 0: now */
  char error[512];
  jmp_buf fail;
};

/* Formats the message (prefixed with "line N: " when line > 0) and leaves the render. */
_Noreturn void jinja_fail(struct jinja *j, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

void *jinja_alloc(struct jinja *j, size_t size);
/* A growing array's new room: `cap` elements of `size` bytes (arena memory) holding a copy of
 * the `n` at `old`. Callers double their capacity: cap ? 2 * cap : a first size. */
void *jinja_grow(struct jinja *j, const void *old, size_t n, size_t cap, size_t size);
void jinja_arena_free(struct jinja *j);
void jinja_step(struct jinja *j, int line);

struct jv jv_undefined(struct jstr name);
struct jv jv_none(void);
struct jv jv_bool(bool b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct jstr s);
struct jv jv_cstr(const char *s);
struct jv jv_str_copy(struct jinja *j, const char *p, size_t n);
struct jv jv_list_new(struct jinja *j, size_t cap);
struct jv jv_dict_new(struct jinja *j, size_t cap);
void jv_list_push(struct jinja *j, struct jv list, struct jv item);
/* Sets key to value (replacing an existing key in place, as Python's dict does). */
void jv_dict_set(struct jinja *j, struct jv dict, struct jstr key, struct jv value);
/* The value of key, or NULL. */
struct jv *jv_dict_get(struct jv dict, struct jstr key);
/* Dict keys are strings; other hashable keys ({0: 1}: ints, bools, None, floats) are stored
 * as their encoding, a string that starts with byte 0x01 (ints, bools and integral floats
 * share one, as Python's equal hashes do). jv_key encodes (failing on unhashable values),
 * jv_key_value gives a stored key back as a value. */
struct jstr jv_key(struct jinja *j, int line, struct jv key);
struct jv jv_key_value(struct jinja *j, struct jstr key);

static inline struct jstr jstr_c(const char *s);
bool jstr_eq(struct jstr a, const char *s);
bool jstr_same(struct jstr a, struct jstr b);

bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
/* Python's a < b (-1), == (0), > (1) for numbers, strings and lists; other pairs fail. */
int jv_compare(struct jinja *j, int line, struct jv a, struct jv b);
const char *jv_type_name(struct jv v);
bool jv_is_number(struct jv v); /* int, float or bool */
double jv_as_double(struct jv v);

/* Python's str(v) and repr(v) appended to the buffer. */
struct jbuf {
  char *p;
  size_t n, cap;
};
void jbuf_put(struct jinja *j, struct jbuf *b, const char *p, size_t n);
void jbuf_puts(struct jinja *j, struct jbuf *b, const char *s);
void jv_write_str(struct jinja *j, struct jbuf *b, struct jv v);
void jv_write_repr(struct jinja *j, struct jbuf *b, struct jv v);
struct jv jv_to_string(struct jinja *j, struct jv v);
/* markupsafe's escape(): & < > " ' as entities (a Markup is returned as it is) */
struct jv jv_html_escape(struct jinja *j, struct jv v);
struct jv jbuf_take(struct jbuf *b); /* the buffer as a string value (arena memory) */
/* s quoted and escaped: Python's repr (in ' unless s has a ' and no ", with \\ \n \r \t and \xNN
 * for other control bytes and DEL) or JSON's (in ", with \b \f and \u00NN for other control bytes;
 * JQUOTE_JSON_ASCII also DEL and every code point above it as \uXXXX, a surrogate pair above
 * U+FFFF). */
enum jquote { JQUOTE_REPR, JQUOTE_JSON, JQUOTE_JSON_ASCII };
void jbuf_put_quoted(struct jinja *j, struct jbuf *b, struct jstr s, enum jquote style);

/* Python's repr of a float (the shortest text that reads back the same double). */
void jv_format_float(double f, char out[32]);

/* UTF-8 code points: the count, and the byte offset of code point `index`. */
size_t jstr_codepoints(struct jstr s);
/* The code point at byte *k of s, advancing *k past it (jinja_strings.c); a byte that does
 * not start a whole UTF-8 sequence reads as itself. */
uint32_t jstr_next_codepoint(struct jstr s, size_t *k);
size_t jstr_offset(struct jstr s, size_t index);

/* ---- Python's str methods (jinja_strings.c), shared by methods and filters ---- */

enum jstrip { JSTRIP_BOTH, JSTRIP_LEFT, JSTRIP_RIGHT };
/* str.strip(chars): chars NULL strips whitespace (str.isspace()). */
struct jv jinja_str_strip(struct jv s, const struct jstr *chars, enum jstrip which);
/* str.split(sep, maxsplit) (sep NULL: runs of whitespace) and str.rsplit. */
struct jv jinja_str_split(struct jinja *j, int line, struct jstr s, const struct jstr *sep, int64_t maxsplit,
                          bool from_right);
struct jv jinja_str_replace(struct jinja *j, struct jstr s, struct jstr old, struct jstr with, int64_t count);
enum jcase { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE, JCASE_CAPITALIZE, JCASE_JINJA_TITLE };
/* Case mappings of ASCII letters (other code points are kept). */
struct jv jinja_str_case(struct jinja *j, struct jstr s, enum jcase which);
/* The code point index of the first (or last) occurrence of needle, or -1. */
int64_t jinja_str_find(struct jstr s, struct jstr needle, bool last);
bool jinja_str_starts(struct jstr s, struct jstr prefix);
bool jinja_str_ends(struct jstr s, struct jstr suffix);

/* ---- JSON ---- */

struct json_t;
/* A jansson value as a template value (objects become dicts, arrays lists). */
struct jv jinja_from_json(struct jinja *j, const struct json_t *json);
/* Python's json.dumps(v, ensure_ascii=..., indent=indent, separators=..., sort_keys=...):
 * indent NULL for none; item_sep/key_sep NULL for the defaults. */
void jinja_write_json(struct jinja *j, int line, struct jbuf *b, struct jv v, const struct jstr *indent,
                      const struct jstr *item_sep, const struct jstr *key_sep, bool sort_keys,
                      bool ensure_ascii);

/* ---- tokens ---- */

enum jtok_kind {
  JT_EOF,
  JT_TEXT,
  JT_VAR_BEGIN,
  JT_VAR_END,
  JT_BLOCK_BEGIN,
  JT_BLOCK_END,
  JT_NAME,
  JT_STRING,
  JT_INT,
  JT_FLOAT,
  JT_OP,
};

/* Operators, by their text. */
enum jop {
  OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
  OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_ASSIGN,
  OP_LPAREN, OP_RPAREN, OP_LBRACKET, OP_RBRACKET, OP_LBRACE, OP_RBRACE,
  OP_COMMA, OP_DOT, OP_COLON, OP_PIPE,
  /* not tokens: the word operators of the tree */
  OP_IN, OP_NOT_IN, OP_AND, OP_OR, OP_NOT, OP_NEG, OP_POS,
};

struct jtok {
  enum jtok_kind kind;
  int line;
  enum jop op;
  struct jstr text; /* JT_TEXT, JT_NAME, JT_STRING (unescaped) */
  int64_t i;
  double f;
};

struct jtokens {
  struct jtok *v;
  size_t n;
};

/* Splits the template into tokens (arena memory). */
struct jtokens jinja_lex(struct jinja *j, const char *source, size_t length);

/* ---- the tree ---- */

enum jnode_kind {
  /* statements */
  JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_CALL_BLOCK,
  JN_FILTER_BLOCK, JN_BREAK, JN_CONTINUE, JN_SEQUENCE,
  /* expressions */
  JE_LITERAL, JE_NAME, JE_LIST, JE_TUPLE, JE_DICT, JE_ATTR, JE_INDEX, JE_SLICE, JE_CALL,
  JE_FILTER, JE_TEST, JE_UNARY, JE_BINARY, JE_AND, JE_OR, JE_COMPARE, JE_COND, JE_KWARG,
  JE_PARAM,
};

struct jnodes {
  struct jnode **v;
  size_t n, cap;
};

struct jnode {
  enum jnode_kind kind;
  int line;
  enum jop op;
  bool negated;        /* JE_TEST: "is not" */
  struct jv value;     /* JE_LITERAL; JN_TEXT's text */
  struct jstr name;    /* JE_NAME, JE_ATTR, JE_FILTER, JE_TEST, JE_KWARG, JE_PARAM, JN_MACRO */
  struct jnode *a, *b, *c, *d;
  struct jnodes args;  /* call arguments, items, macro parameters, comparison operands */
  struct jnodes kwargs;
  struct jnodes body, orelse;
  enum jop *ops;       /* JE_COMPARE: ops[k] between args[k] and args[k + 1] */
};

/* Parses the tokens into the template's statements (a JN_SEQUENCE). */
struct jnode *jinja_parse(struct jinja *j, struct jtokens tokens);

/* ---- evaluation ---- */

struct jscope;
struct jscope *jinja_scope_new(struct jinja *j, struct jscope *parent);
void jinja_scope_set(struct jinja *j, struct jscope *scope, struct jstr name, struct jv value);

/* Renders the template with the variables of `globals` into out. */
void jinja_render(struct jinja *j, struct jnode *root, struct jscope *globals, struct jbuf *out);

/* Arguments of a call, evaluated: positional then keyword. */
struct jargs {
  struct jv *pos;
  size_t npos;
  struct jstr *kwnames;
  struct jv *kw;
  size_t nkw;
};

/* The n-th argument by position or by keyword name; NULL when neither was given. Fails when
 * more positional arguments or other keywords than the names listed were given. */
struct jv *jargs_get(struct jargs *args, size_t index, const char *name);
void jargs_check(struct jinja *j, int line, const char *what, struct jargs *args,
                 const char *const *names, size_t count);

struct jv jinja_apply_filter(struct jinja *j, int line, struct jstr name, struct jv value,
                             struct jargs *args);
bool jinja_apply_test(struct jinja *j, int line, struct jstr name, struct jv value,
                      struct jargs *args);
/* Whether a filter or test of that name exists (Jinja checks names when it compiles). */
bool jinja_filter_exists(struct jstr name);
bool jinja_test_exists(struct jstr name);
/* An attribute of a value as Jinja's sandbox reads it: a method of str/dict/list, else a key. */
struct jv jinja_getattr(struct jinja *j, int line, struct jv object, struct jstr name);
struct jv jinja_call_method(struct jinja *j, int line, struct jmethod *method, struct jargs *args);
/* The globals every template sees (range, namespace, raise_exception, strftime_now, dict). */
struct jv jinja_builtin_global(struct jstr name);
struct jv jinja_call_builtin(struct jinja *j, int line, int builtin, struct jargs *args);
/* Calls a macro, a global function or a bound method. */
struct jv jinja_call_value(struct jinja *j, int line, struct jv callee, struct jargs *args);

static inline struct jstr jstr_c(const char *s) {
  struct jstr r;
  r.p = s;
  r.n = 0;
  while (s[r.n])
    r.n++;
  return r;
}

#endif /* CLATTN_TEXT_JINJA_H */
