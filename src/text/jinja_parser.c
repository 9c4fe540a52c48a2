/* Tokens to a tree, by recursive descent in the order of Jinja's own parser, so precedence is
 * Jinja's: conditional < or < and < not < comparisons and in < + - < ~ < * / // % < ** < unary
 * minus < filters and tests < postfix (. [] ()). Statements: for (else, an if filter, tuple
 * targets), if/elif/else, set (a name, a tuple, a namespace attribute, or a block), macro, call,
 * filter, break, continue, generation. Every other tag is an error naming it. */
#include "jinja.h"

#include <string.h>

struct parser {
  struct jinja *j;
  struct jtok *t;
  size_t n, pos;
  int loop_depth;
  int depth;
  /* Jinja checks filter and test names when it compiles, except inside if blocks and
   * conditional expressions ("soft" frames), where an unknown one fails only when it runs: the
   * names seen outside those wait here until the parse ends */
  bool soft;
  struct jnodes unchecked;
};

static struct jtok *peek(struct parser *p) { return &p->t[p->pos]; }
static struct jtok *peek_at(struct parser *p, size_t ahead) {
  size_t k = p->pos + ahead;
  return &p->t[k < p->n ? k : p->n - 1];
}
static struct jtok *next(struct parser *p) {
  struct jtok *t = &p->t[p->pos];
  if (p->pos + 1 < p->n)
    p->pos++;
  return t;
}

static bool is_op(struct jtok *t, enum jop op) { return t->kind == JT_OP && t->op == op; }
static bool is_name(struct jtok *t, const char *name) { return t->kind == JT_NAME && jstr_eq(t->text, name); }

static const char *describe(struct jtok *t) {
  switch (t->kind) {
  case JT_EOF:
    return "the end of the template";
  case JT_TEXT:
    return "template text";
  case JT_VAR_BEGIN:
    return "'{{'";
  case JT_VAR_END:
    return "'}}'";
  case JT_BLOCK_BEGIN:
    return "'{%'";
  case JT_BLOCK_END:
    return "'%}'";
  case JT_NAME:
    return "a name";
  case JT_STRING:
    return "a string";
  case JT_INT:
  case JT_FLOAT:
    return "a number";
  case JT_OP:
    return "an operator";
  }
  return "a token";
}

_Noreturn static void unexpected(struct parser *p, struct jtok *t, const char *expected) {
  if (t->kind == JT_NAME)
    jinja_fail(p->j, t->line, "unexpected name '%.*s', expected %s", (int)t->text.n, t->text.p, expected);
  jinja_fail(p->j, t->line, "unexpected %s, expected %s", describe(t), expected);
}

static void expect_op(struct parser *p, enum jop op, const char *text) {
  struct jtok *t = next(p);
  if (!is_op(t, op))
    unexpected(p, t, text);
}

static void expect_kind(struct parser *p, enum jtok_kind kind, const char *text) {
  struct jtok *t = next(p);
  if (t->kind != kind)
    unexpected(p, t, text);
}

static struct jnode *node(struct parser *p, enum jnode_kind kind, int line) {
  struct jnode *n = jinja_alloc(p->j, sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->line = line;
  return n;
}

static void append(struct parser *p, struct jnodes *list, struct jnode *n) {
  if (list->n == list->cap) {
    size_t cap = list->cap ? 2 * list->cap : 4;
    list->v = jinja_grow(p->j, list->v, list->n, cap, sizeof *list->v);
    list->cap = cap;
  }
  list->v[list->n++] = n;
}

static void enter(struct parser *p, int line) {
  if (++p->depth > p->j->depth_limit)
    jinja_fail(p->j, line, "the template nests deeper than %d", p->j->depth_limit);
}

static struct jnode *parse_expression(struct parser *p, bool with_condexpr);
static struct jnode *parse_tuple(struct parser *p, bool with_condexpr, bool explicit_parens);
static struct jnode *parse_unary(struct parser *p, bool with_filter);

/* ( args ) after the '(' was seen: positional and keyword arguments */
static void parse_call_args(struct parser *p, struct jnode *call) {
  expect_op(p, OP_LPAREN, "'('");
  while (!is_op(peek(p), OP_RPAREN)) {
    if (call->args.n || call->kwargs.n)
      expect_op(p, OP_COMMA, "',' or ')'");
    if (is_op(peek(p), OP_RPAREN))
      break;
    if (is_op(peek(p), OP_MUL) || is_op(peek(p), OP_POW))
      jinja_fail(p->j, peek(p)->line, "*args and **kwargs in calls are not supported");
    if (peek(p)->kind == JT_NAME && is_op(peek_at(p, 1), OP_ASSIGN)) {
      struct jtok *name = next(p);
      next(p);
      struct jnode *kw = node(p, JE_KWARG, name->line);
      kw->name = name->text;
      kw->a = parse_expression(p, true);
      append(p, &call->kwargs, kw);
    } else {
      if (call->kwargs.n)
        jinja_fail(p->j, peek(p)->line, "a positional argument after a keyword argument");
      append(p, &call->args, parse_expression(p, true));
    }
  }
  next(p);
}

/* A list's items or a dict's key: value pairs (two nodes each) after the opening bracket: separated
 * by commas, a trailing one allowed, up to `close` (consumed); `expected` names what may follow an
 * item. */
static struct jnode *parse_bracketed(struct parser *p, enum jnode_kind kind, int line, enum jop close,
                                     const char *expected) {
  struct jnode *n = node(p, kind, line);
  while (!is_op(peek(p), close)) {
    if (n->args.n)
      expect_op(p, OP_COMMA, expected);
    if (is_op(peek(p), close))
      break;
    append(p, &n->args, parse_expression(p, true));
    if (kind == JE_DICT) {
      expect_op(p, OP_COLON, "':'");
      append(p, &n->args, parse_expression(p, true));
    }
  }
  next(p);
  return n;
}

static struct jnode *parse_primary(struct parser *p) {
  struct jtok *t = next(p);
  enter(p, t->line);
  struct jnode *n;
  switch (t->kind) {
  case JT_NAME:
    n = node(p, JE_LITERAL, t->line);
    if (jstr_eq(t->text, "true") || jstr_eq(t->text, "True"))
      n->value = jv_bool(true);
    else if (jstr_eq(t->text, "false") || jstr_eq(t->text, "False"))
      n->value = jv_bool(false);
    else if (jstr_eq(t->text, "none") || jstr_eq(t->text, "None"))
      n->value = jv_none();
    else {
      n->kind = JE_NAME;
      n->name = t->text;
    }
    break;
  case JT_STRING: {
    n = node(p, JE_LITERAL, t->line);
    struct jstr s = t->text;
    if (peek(p)->kind == JT_STRING) { /* adjacent literals concatenate */
      struct jbuf b = {0};
      jbuf_put(p->j, &b, s.p, s.n);
      while (peek(p)->kind == JT_STRING) {
        struct jtok *more = next(p);
        jbuf_put(p->j, &b, more->text.p, more->text.n);
      }
      s = jbuf_take(&b).u.s;
    }
    n->value = jv_str(s);
    break;
  }
  case JT_INT:
    n = node(p, JE_LITERAL, t->line);
    n->value = jv_int(t->i);
    break;
  case JT_FLOAT:
    n = node(p, JE_LITERAL, t->line);
    n->value = jv_float(t->f);
    break;
  case JT_OP:
    if (t->op == OP_LPAREN) {
      n = parse_tuple(p, true, true);
      expect_op(p, OP_RPAREN, "')'");
      break;
    }
    if (t->op == OP_LBRACKET) {
      n = parse_bracketed(p, JE_LIST, t->line, OP_RBRACKET, "',' or ']'");
      break;
    }
    if (t->op == OP_LBRACE) {
      n = parse_bracketed(p, JE_DICT, t->line, OP_RBRACE, "',' or '}'");
      break;
    }
    unexpected(p, t, "an expression");
  default:
    unexpected(p, t, "an expression");
  }
  p->depth--;
  return n;
}

/* [a], [a:b:c] */
static struct jnode *parse_subscribed(struct parser *p) {
  int line = peek(p)->line;
  struct jnode *parts[3] = {NULL, NULL, NULL};
  if (!is_op(peek(p), OP_COLON)) {
    parts[0] = parse_expression(p, true);
    if (!is_op(peek(p), OP_COLON))
      return parts[0];
  }
  next(p);
  if (!is_op(peek(p), OP_RBRACKET) && !is_op(peek(p), OP_COMMA) && !is_op(peek(p), OP_COLON))
    parts[1] = parse_expression(p, true);
  if (is_op(peek(p), OP_COLON)) {
    next(p);
    if (!is_op(peek(p), OP_RBRACKET) && !is_op(peek(p), OP_COMMA))
      parts[2] = parse_expression(p, true);
  }
  struct jnode *n = node(p, JE_SLICE, line);
  n->a = parts[0];
  n->b = parts[1];
  n->c = parts[2];
  return n;
}

/* callee(arguments), the '(' next. */
static struct jnode *parse_call(struct parser *p, struct jnode *callee, int line) {
  struct jnode *call = node(p, JE_CALL, line);
  call->a = callee;
  parse_call_args(p, call);
  return call;
}

static struct jnode *parse_postfix(struct parser *p, struct jnode *n) {
  for (;;) {
    struct jtok *t = peek(p);
    if (is_op(t, OP_DOT)) {
      next(p);
      struct jtok *attr = next(p);
      struct jnode *a;
      if (attr->kind == JT_NAME) {
        a = node(p, JE_ATTR, t->line);
        a->name = attr->text;
      } else if (attr->kind == JT_INT) {
        a = node(p, JE_INDEX, t->line);
        a->b = node(p, JE_LITERAL, t->line);
        a->b->value = jv_int(attr->i);
      } else {
        unexpected(p, attr, "an attribute name");
      }
      a->a = n;
      n = a;
    } else if (is_op(t, OP_LBRACKET)) {
      next(p);
      struct jnode *index = node(p, JE_INDEX, t->line);
      index->a = n;
      index->b = parse_subscribed(p);
      if (is_op(peek(p), OP_COMMA))
        jinja_fail(p->j, t->line, "tuple subscripts are not supported");
      expect_op(p, OP_RBRACKET, "']'");
      n = index;
    } else if (is_op(t, OP_LPAREN)) {
      n = parse_call(p, n, t->line);
    } else {
      return n;
    }
  }
}

static struct jstr parse_dotted_name(struct parser *p) {
  struct jtok *t = next(p);
  if (t->kind != JT_NAME)
    unexpected(p, t, "a filter or test name");
  struct jstr name = t->text;
  while (is_op(peek(p), OP_DOT) && peek_at(p, 1)->kind == JT_NAME) {
    next(p);
    struct jtok *more = next(p);
    name.n = (size_t)(more->text.p + more->text.n - name.p);
  }
  return name;
}

static void append(struct parser *p, struct jnodes *list, struct jnode *n);

static void check_name_later(struct parser *p, struct jnode *f) {
  if (!p->soft)
    append(p, &p->unchecked, f);
}

/* A filter's name and its arguments, if any, applied to `value` (the '|' already taken). */
static struct jnode *parse_filter_call(struct parser *p, struct jnode *value, int line) {
  struct jnode *f = node(p, JE_FILTER, line);
  f->a = value;
  f->name = parse_dotted_name(p);
  check_name_later(p, f);
  if (is_op(peek(p), OP_LPAREN))
    parse_call_args(p, f);
  return f;
}

static void check_names(struct parser *p) {
  for (size_t k = 0; k < p->unchecked.n; k++) {
    struct jnode *f = p->unchecked.v[k];
    if (f->kind == JE_FILTER && !jinja_filter_exists(f->name))
      jinja_fail(p->j, f->line, "unknown or unsupported filter '%.*s'", (int)f->name.n, f->name.p);
    if (f->kind == JE_TEST && !jinja_test_exists(f->name))
      jinja_fail(p->j, f->line, "unknown or unsupported test '%.*s'", (int)f->name.n, f->name.p);
  }
}

static struct jnode *parse_filter_expr(struct parser *p, struct jnode *n) {
  for (;;) {
    struct jtok *t = peek(p);
    if (is_op(t, OP_PIPE)) {
      next(p);
      n = parse_filter_call(p, n, t->line);
    } else if (is_name(t, "is")) {
      next(p);
      struct jnode *test = node(p, JE_TEST, t->line);
      test->a = n;
      if (is_name(peek(p), "not")) {
        next(p);
        test->negated = true;
      }
      test->name = parse_dotted_name(p);
      check_name_later(p, test);
      struct jtok *u = peek(p);
      if (is_op(u, OP_LPAREN)) {
        parse_call_args(p, test);
      } else if ((u->kind == JT_NAME || u->kind == JT_STRING || u->kind == JT_INT || u->kind == JT_FLOAT ||
                  is_op(u, OP_LPAREN) || is_op(u, OP_LBRACKET) || is_op(u, OP_LBRACE)) &&
                 !is_name(u, "else") && !is_name(u, "or") && !is_name(u, "and")) {
        if (is_name(u, "is"))
          jinja_fail(p->j, u->line, "you cannot chain multiple tests with 'is'");
        append(p, &test->args, parse_postfix(p, parse_primary(p)));
      }
      n = test;
    } else if (is_op(t, OP_LPAREN)) {
      n = parse_call(p, n, t->line);
    } else {
      return n;
    }
  }
}

static struct jnode *parse_unary(struct parser *p, bool with_filter) {
  struct jtok *t = peek(p);
  struct jnode *n;
  enter(p, t->line);
  if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
    next(p);
    n = node(p, JE_UNARY, t->line);
    n->op = t->op == OP_SUB ? OP_NEG : OP_POS;
    n->a = parse_unary(p, false);
  } else {
    n = parse_primary(p);
  }
  n = parse_postfix(p, n);
  if (with_filter)
    n = parse_filter_expr(p, n);
  p->depth--;
  return n;
}

static struct jnode *binary(struct parser *p, enum jop op, int line, struct jnode *a, struct jnode *b) {
  struct jnode *n = node(p, JE_BINARY, line);
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

/* The arithmetic operators' precedence levels, loosest first; each level is left-associative
 * over the next one's expressions, the last one's over unary expressions with their filters. */
static const enum jop arithmetic_levels[][5] = {
  {OP_ADD, OP_SUB},
  {OP_TILDE},
  {OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD},
  {OP_POW},
};
#define ARITHMETIC_LEVELS (sizeof arithmetic_levels / sizeof arithmetic_levels[0])

static bool at_level(struct jtok *t, size_t level) {
  for (const enum jop *op = arithmetic_levels[level]; *op; op++)
    if (is_op(t, *op))
      return true;
  return false;
}

static struct jnode *parse_arithmetic(struct parser *p, size_t level) {
  if (level == ARITHMETIC_LEVELS)
    return parse_unary(p, true);
  struct jnode *n = parse_arithmetic(p, level + 1);
  for (;;) {
    struct jtok *t = peek(p);
    if (!at_level(t, level))
      return n;
    next(p);
    n = binary(p, t->op, t->line, n, parse_arithmetic(p, level + 1));
  }
}

static struct jnode *parse_compare(struct parser *p) {
  struct jnode *first = parse_arithmetic(p, 0);
  struct jnode *cmp = NULL;
  size_t cap = 0;
  for (;;) {
    struct jtok *t = peek(p);
    enum jop op;
    if (t->kind == JT_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT || t->op == OP_LE ||
                             t->op == OP_GT || t->op == OP_GE)) {
      op = t->op;
      next(p);
    } else if (is_name(t, "in")) {
      op = OP_IN;
      next(p);
    } else if (is_name(t, "not") && is_name(peek_at(p, 1), "in")) {
      op = OP_NOT_IN;
      next(p);
      next(p);
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(p, JE_COMPARE, t->line);
      append(p, &cmp->args, first);
    }
    if (cmp->args.n > cap) {
      size_t new_cap = cap ? 2 * cap : 4;
      cmp->ops = jinja_grow(p->j, cmp->ops, cap, new_cap, sizeof *cmp->ops);
      cap = new_cap;
    }
    cmp->ops[cmp->args.n - 1] = op;
    append(p, &cmp->args, parse_arithmetic(p, 0));
  }
  return cmp ? cmp : first;
}

static struct jnode *parse_not(struct parser *p) {
  struct jtok *t = peek(p);
  if (is_name(t, "not")) {
    next(p);
    enter(p, t->line);
    struct jnode *n = node(p, JE_UNARY, t->line);
    n->op = OP_NOT;
    n->a = parse_not(p);
    p->depth--;
    return n;
  }
  return parse_compare(p);
}

/* operand (`word` operand)*: left-associative nodes of `kind` ('and', 'or'). */
static struct jnode *parse_word_operator(struct parser *p, const char *word, enum jnode_kind kind,
                                         struct jnode *(*operand)(struct parser *)) {
  struct jnode *n = operand(p);
  while (is_name(peek(p), word)) {
    int line = next(p)->line;
    struct jnode *joined = node(p, kind, line);
    joined->a = n;
    joined->b = operand(p);
    n = joined;
  }
  return n;
}

static struct jnode *parse_and(struct parser *p) {
  return parse_word_operator(p, "and", JE_AND, parse_not);
}

static struct jnode *parse_or(struct parser *p) {
  return parse_word_operator(p, "or", JE_OR, parse_and);
}

static struct jnode *parse_condexpr(struct parser *p) {
  size_t unchecked = p->unchecked.n;
  bool soft = p->soft;
  struct jnode *n = parse_or(p);
  if (is_name(peek(p), "if")) {
    p->soft = true; /* the whole conditional expression, the part before 'if' included */
    p->unchecked.n = unchecked;
  }
  while (is_name(peek(p), "if")) {
    int line = next(p)->line;
    enter(p, line);
    struct jnode *c = node(p, JE_COND, line);
    c->a = n;                /* the value when true */
    c->b = parse_or(p);      /* the condition */
    if (is_name(peek(p), "else")) {
      next(p);
      c->c = parse_condexpr(p);
    }
    p->depth--;
    n = c;
  }
  p->soft = soft;
  return n;
}

static struct jnode *parse_expression(struct parser *p, bool with_condexpr) {
  return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool is_tuple_end(struct parser *p, const char *extra_end) {
  struct jtok *t = peek(p);
  if (t->kind == JT_VAR_END || t->kind == JT_BLOCK_END || t->kind == JT_EOF || is_op(t, OP_RPAREN))
    return true;
  return extra_end && is_name(t, extra_end);
}

static struct jnode *parse_tuple_until(struct parser *p, bool with_condexpr, bool explicit_parens,
                                       const char *extra_end) {
  int line = peek(p)->line;
  struct jnode *tuple = node(p, JE_TUPLE, line);
  bool comma = false;
  for (;;) {
    if (tuple->args.n)
      expect_op(p, OP_COMMA, "','");
    if (is_tuple_end(p, extra_end))
      break;
    append(p, &tuple->args, parse_expression(p, with_condexpr));
    if (is_op(peek(p), OP_COMMA))
      comma = true;
    else
      break;
  }
  if (!comma) {
    if (tuple->args.n)
      return tuple->args.v[0];
    if (!explicit_parens)
      unexpected(p, peek(p), "an expression");
  }
  return tuple;
}

static struct jnode *parse_tuple(struct parser *p, bool with_condexpr, bool explicit_parens) {
  return parse_tuple_until(p, with_condexpr, explicit_parens, NULL);
}

/* for and set targets: a name, names separated by commas, or (set only) name.attribute */
static struct jnode *parse_assign_target(struct parser *p, bool with_namespace) {
  struct jtok *t = peek(p);
  if (with_namespace && t->kind == JT_NAME && is_op(peek_at(p, 1), OP_DOT)) {
    next(p);
    next(p);
    struct jtok *attr = next(p);
    if (attr->kind != JT_NAME)
      unexpected(p, attr, "an attribute name");
    struct jnode *n = node(p, JE_ATTR, t->line);
    n->a = node(p, JE_NAME, t->line);
    n->a->name = t->text;
    n->name = attr->text;
    return n;
  }
  struct jnode *tuple = node(p, JE_TUPLE, t->line);
  bool parens = is_op(t, OP_LPAREN);
  if (parens)
    next(p);
  for (;;) {
    struct jtok *name = next(p);
    if (name->kind != JT_NAME)
      unexpected(p, name, "a variable name to assign to");
    struct jnode *n = node(p, JE_NAME, name->line);
    n->name = name->text;
    append(p, &tuple->args, n);
    if (!is_op(peek(p), OP_COMMA))
      break;
    next(p);
  }
  if (parens)
    expect_op(p, OP_RPAREN, "')'");
  return tuple->args.n == 1 && !parens ? tuple->args.v[0] : tuple;
}

/* Statements up to a {% name %} whose name is one of ends (not consumed); NULL ends: the end
 * of the template. */
static struct jnode *parse_body(struct parser *p, const char *const *ends, size_t nends, const char *what);

static bool at_end_tag(struct parser *p, const char *const *ends, size_t nends) {
  if (peek(p)->kind != JT_BLOCK_BEGIN)
    return false;
  for (size_t k = 0; k < nends; k++)
    if (is_name(peek_at(p, 1), ends[k]))
      return true;
  return false;
}

/* Consumes "{% name" of an end tag, returns which */
static struct jstr take_end_tag(struct parser *p) {
  next(p);
  return next(p)->text;
}

static void end_tag_close(struct parser *p) { expect_kind(p, JT_BLOCK_END, "'%}'"); }

/* After a block tag's words: its '%}', the body up to {% `end` %} (`what` names the block in
 * messages), and that end tag. */
static struct jnode *parse_block_body(struct parser *p, const char *end, const char *what) {
  end_tag_close(p);
  const char *const ends[] = {end};
  struct jnode *body = parse_body(p, ends, 1, what);
  take_end_tag(p);
  end_tag_close(p);
  return body;
}

static struct jnode *parse_for(struct parser *p, int line) {
  struct jnode *n = node(p, JN_FOR, line);
  n->a = parse_assign_target(p, false);
  struct jtok *in = next(p);
  if (!is_name(in, "in"))
    unexpected(p, in, "'in'");
  n->b = parse_tuple_until(p, false, false, "recursive");
  if (is_name(peek(p), "if")) {
    next(p);
    n->c = parse_expression(p, true);
  }
  if (is_name(peek(p), "recursive"))
    jinja_fail(p->j, peek(p)->line, "recursive for loops are not supported");
  end_tag_close(p);
  static const char *const ends[] = {"endfor", "else"};
  bool soft = p->soft;
  p->soft = false;
  p->loop_depth++;
  n->d = parse_body(p, ends, 2, "{% for %}");
  p->loop_depth--;
  if (jstr_eq(take_end_tag(p), "else")) {
    end_tag_close(p);
    n->orelse.n = 0;
    append(p, &n->orelse, parse_body(p, ends + 0, 1, "{% for %}"));
    take_end_tag(p);
  }
  p->soft = soft;
  end_tag_close(p);
  return n;
}

static struct jnode *parse_if_soft(struct parser *p, int line);

static struct jnode *parse_if(struct parser *p, int line) {
  bool soft = p->soft;
  p->soft = true;
  struct jnode *n = parse_if_soft(p, line);
  p->soft = soft;
  return n;
}

static struct jnode *parse_if_soft(struct parser *p, int line) {
  struct jnode *n = node(p, JN_IF, line);
  n->a = parse_tuple(p, false, false);
  end_tag_close(p);
  static const char *const ends[] = {"endif", "elif", "else"};
  n->d = parse_body(p, ends, 3, "{% if %}");
  int tag_line = peek(p)->line;
  struct jstr tag = take_end_tag(p);
  if (jstr_eq(tag, "elif")) {
    append(p, &n->orelse, parse_if_soft(p, tag_line));
    return n; /* the nested if consumed the endif */
  }
  if (jstr_eq(tag, "else")) {
    end_tag_close(p);
    append(p, &n->orelse, parse_body(p, ends, 1, "{% if %}"));
    take_end_tag(p);
  }
  end_tag_close(p);
  return n;
}

static void parse_params(struct parser *p, struct jnode *n) {
  expect_op(p, OP_LPAREN, "'('");
  while (!is_op(peek(p), OP_RPAREN)) {
    if (n->args.n)
      expect_op(p, OP_COMMA, "',' or ')'");
    struct jtok *name = next(p);
    if (name->kind != JT_NAME)
      unexpected(p, name, "a parameter name");
    struct jnode *param = node(p, JE_PARAM, name->line);
    param->name = name->text;
    if (is_op(peek(p), OP_ASSIGN)) {
      next(p);
      param->a = parse_expression(p, true);
    } else if (n->args.n && n->args.v[n->args.n - 1]->a) {
      jinja_fail(p->j, name->line, "a parameter without a default follows one with a default");
    }
    append(p, &n->args, param);
  }
  next(p);
}

static struct jnode *parse_statement(struct parser *p) {
  struct jtok *begin = next(p);
  struct jtok *t = next(p);
  int line = begin->line;
  if (t->kind != JT_NAME)
    unexpected(p, t, "a statement name after '{%'");
  struct jstr word = t->text;
  if (jstr_eq(word, "for"))
    return parse_for(p, line);
  if (jstr_eq(word, "if"))
    return parse_if(p, line);
  if (jstr_eq(word, "set")) {
    struct jnode *target = parse_assign_target(p, true);
    if (is_op(peek(p), OP_ASSIGN)) {
      next(p);
      struct jnode *n = node(p, JN_SET, line);
      n->a = target;
      n->b = parse_tuple(p, true, false);
      end_tag_close(p);
      return n;
    }
    struct jnode *n = node(p, JN_SET_BLOCK, line);
    n->a = target;
    if (is_op(peek(p), OP_PIPE)) {
      struct jnode *hole = node(p, JE_LITERAL, line);
      n->b = parse_filter_expr(p, hole);
      n->c = hole;
    }
    n->d = parse_block_body(p, "endset", "{% set %}");
    return n;
  }
  if (jstr_eq(word, "macro")) {
    struct jtok *name = next(p);
    if (name->kind != JT_NAME)
      unexpected(p, name, "a macro name");
    struct jnode *n = node(p, JN_MACRO, line);
    n->name = name->text;
    parse_params(p, n);
    end_tag_close(p);
    static const char *const ends[] = {"endmacro"};
    int loops = p->loop_depth;
    bool soft = p->soft;
    p->loop_depth = 0;
    p->soft = false;
    n->d = parse_body(p, ends, 1, "{% macro %}");
    p->loop_depth = loops;
    p->soft = soft;
    take_end_tag(p);
    if (peek(p)->kind == JT_NAME)
      next(p);
    end_tag_close(p);
    return n;
  }
  if (jstr_eq(word, "call")) {
    struct jnode *n = node(p, JN_CALL_BLOCK, line);
    if (is_op(peek(p), OP_LPAREN))
      parse_params(p, n);
    n->a = parse_expression(p, true);
    if (n->a->kind != JE_CALL)
      jinja_fail(p->j, line, "{%% call %%} needs a call expression");
    n->d = parse_block_body(p, "endcall", "{% call %}");
    return n;
  }
  if (jstr_eq(word, "filter")) {
    struct jnode *n = node(p, JN_FILTER_BLOCK, line);
    struct jnode *hole = node(p, JE_LITERAL, line);
    /* the first filter has no '|' before it */
    n->b = parse_filter_expr(p, parse_filter_call(p, hole, line));
    n->c = hole;
    n->d = parse_block_body(p, "endfilter", "{% filter %}");
    return n;
  }
  if (jstr_eq(word, "break") || jstr_eq(word, "continue")) {
    if (p->loop_depth == 0)
      jinja_fail(p->j, line, "{%% %.*s %%} outside a loop", (int)word.n, word.p);
    end_tag_close(p);
    return node(p, jstr_eq(word, "break") ? JN_BREAK : JN_CONTINUE, line);
  }
  if (jstr_eq(word, "generation")) {
    return parse_block_body(p, "endgeneration", "{% generation %}");
  }
  jinja_fail(p->j, line, "unknown or unsupported tag {%% %.*s %%}", (int)word.n, word.p);
}

static struct jnode *parse_body(struct parser *p, const char *const *ends, size_t nends, const char *what) {
  struct jnode *seq = node(p, JN_SEQUENCE, peek(p)->line);
  enter(p, seq->line);
  for (;;) {
    struct jtok *t = peek(p);
    if (t->kind == JT_EOF) {
      if (nends)
        jinja_fail(p->j, seq->line, "%s is never closed (expected {%% %s %%} before the end of the template)", what,
                   ends[0]);
      break;
    }
    if (at_end_tag(p, ends, nends))
      break;
    if (t->kind == JT_TEXT) {
      next(p);
      struct jnode *n = node(p, JN_TEXT, t->line);
      n->value = jv_str(t->text);
      append(p, &seq->body, n);
    } else if (t->kind == JT_VAR_BEGIN) {
      next(p);
      struct jnode *n = node(p, JN_OUTPUT, t->line);
      n->a = parse_tuple(p, true, false);
      expect_kind(p, JT_VAR_END, "'}}'");
      append(p, &seq->body, n);
    } else if (t->kind == JT_BLOCK_BEGIN) {
      struct jtok *word = peek_at(p, 1);
      if (word->kind == JT_NAME &&
          (jstr_eq(word->text, "endfor") || jstr_eq(word->text, "endif") || jstr_eq(word->text, "else") ||
           jstr_eq(word->text, "elif") || jstr_eq(word->text, "endmacro") || jstr_eq(word->text, "endset") ||
           jstr_eq(word->text, "endcall") || jstr_eq(word->text, "endfilter") ||
           jstr_eq(word->text, "endgeneration") || jstr_eq(word->text, "endraw")))
        jinja_fail(p->j, word->line, "unexpected {%% %.*s %%}%s%s", (int)word->text.n, word->text.p,
                   nends ? " inside " : "", nends ? what : "");
      append(p, &seq->body, parse_statement(p));
    } else {
      unexpected(p, t, "template text or a tag");
    }
  }
  p->depth--;
  return seq;
}

struct jnode *jinja_parse(struct jinja *j, struct jtokens tokens) {
  struct parser p = {.j = j, .t = tokens.v, .n = tokens.n};
  struct jnode *root = parse_body(&p, NULL, 0, "the template");
  check_names(&p);
  return root;
}
