/* Template text to tokens, as Jinja's lexer does it with transformers' settings: newlines
 * normalised to \n and one trailing newline dropped (keep_trailing_newline off); {%- -%} {{- -}}
 * {#- -#} strip the whitespace beside the tag; trim_blocks drops the newline right after a block
 * or comment tag; lstrip_blocks drops the spaces and tabs between a line's start and a block or
 * comment tag ({%+ keeps them, +%} keeps the newline); {% raw %}...{% endraw %} is text. Inside a
 * tag the end marker only counts outside brackets, as in Jinja. */
#include "jinja.h"

#include "text_strip.h"

#include <stdlib.h>
#include <string.h>

struct lexer {
  struct jinja *j;
  const char *s;
  size_t n, pos;
  int line;
  bool line_starting;
  struct jtok *v;
  size_t count, cap;
};

static struct jtok *push(struct lexer *lx, enum jtok_kind kind) {
  if (lx->count == lx->cap) {
    size_t cap = lx->cap ? 2 * lx->cap : 256;
    lx->v = jinja_grow(lx->j, lx->v, lx->count, cap, sizeof *lx->v);
    lx->cap = cap;
  }
  struct jtok *t = &lx->v[lx->count++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->line = lx->line;
  return t;
}

static int count_lines(const char *p, size_t n) {
  int lines = 0;
  for (size_t k = 0; k < n; k++)
    lines += p[k] == '\n';
  return lines;
}

/* The code point that ends at byte `end` (exclusive), with its first byte at *start. */
static uint32_t codepoint_before(const char *p, size_t end, size_t *start) {
  size_t k = end - 1;
  while (k > 0 && ((unsigned char)p[k] & 0xC0) == 0x80 && end - k < 4)
    k--;
  *start = k;
  const unsigned char *u = (const unsigned char *)p + k;
  size_t len = end - k;
  if (len == 1)
    return u[0];
  if (len == 2 && (u[0] & 0xE0) == 0xC0)
    return (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
  if (len == 3 && (u[0] & 0xF0) == 0xE0)
    return (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
  if (len == 4 && (u[0] & 0xF8) == 0xF0)
    return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 | (uint32_t)(u[2] & 0x3F) << 6 |
           (u[3] & 0x3F);
  return 0xFFFFFFFF;
}

/* Python's str.rstrip(): the length without the trailing whitespace. */
static size_t rstrip_length(const char *p, size_t n) {
  while (n > 0) {
    size_t start;
    uint32_t cp = codepoint_before(p, n, &start);
    if (!clattn__is_python_space(cp))
      break;
    n = start;
  }
  return n;
}

static bool all_space(const char *p, size_t n) {
  if (n == 0)
    return false; /* Jinja matches \s+ */
  return rstrip_length(p, n) == 0;
}

static void emit_text(struct lexer *lx, const char *p, size_t n) {
  if (n == 0)
    return;
  struct jtok *t = push(lx, JT_TEXT);
  t->text.p = p;
  t->text.n = n;
  lx->line += count_lines(p, n);
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's unicode-escape decoding of a string literal's body. */
static struct jstr unescape(struct lexer *lx, const char *p, size_t n, int line) {
  char *out = jinja_alloc(lx->j, n + 1);
  size_t o = 0;
  for (size_t k = 0; k < n; k++) {
    if (p[k] != '\\' || k + 1 == n) {
      out[o++] = p[k];
      continue;
    }
    char c = p[++k];
    uint32_t cp = 0;
    int digits = 0;
    switch (c) {
    case '\n':
      continue;
    case '\\':
      out[o++] = '\\';
      continue;
    case '\'':
    case '"':
      out[o++] = c;
      continue;
    case 'a':
      out[o++] = '\a';
      continue;
    case 'b':
      out[o++] = '\b';
      continue;
    case 'f':
      out[o++] = '\f';
      continue;
    case 'n':
      out[o++] = '\n';
      continue;
    case 'r':
      out[o++] = '\r';
      continue;
    case 't':
      out[o++] = '\t';
      continue;
    case 'v':
      out[o++] = '\v';
      continue;
    case 'x':
      digits = 2;
      break;
    case 'u':
      digits = 4;
      break;
    case 'U':
      digits = 8;
      break;
    default:
      if (c >= '0' && c <= '7') {
        int m = 0;
        while (m < 3 && k < n && p[k] >= '0' && p[k] <= '7') {
          cp = cp * 8 + (uint32_t)(p[k] - '0');
          k++;
          m++;
        }
        k--;
        goto encode;
      }
      out[o++] = '\\';
      out[o++] = c;
      continue;
    }
    for (int m = 0; m < digits; m++) {
      if (k + 1 >= n)
        jinja_fail(lx->j, line, "truncated \\%c escape in a string literal", c);
      char h = p[++k];
      int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0)
        jinja_fail(lx->j, line, "bad \\%c escape in a string literal", c);
      cp = cp * 16 + (uint32_t)d;
    }
  encode:
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      jinja_fail(lx->j, line, "escape \\%c gives no Unicode scalar value", c);
    /* the escape is at least 2 bytes long and its UTF-8 at most 4: \x, \0 stay in place; \u
     * (6 bytes) and \U (10) always have room */
    if (cp < 0x80) {
      out[o++] = (char)cp;
    } else if (cp < 0x800) {
      out[o++] = (char)(0xC0 | cp >> 6);
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[o++] = (char)(0xE0 | cp >> 12);
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    } else {
      out[o++] = (char)(0xF0 | cp >> 18);
      out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[o++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  out[o] = 0;
  return (struct jstr){out, o};
}

static const struct {
  const char *text;
  enum jop op;
} operators[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE},
    {"+", OP_ADD},       {"-", OP_SUB},  {"*", OP_MUL}, {"/", OP_DIV}, {"%", OP_MOD}, {"~", OP_TILDE},
    {"<", OP_LT},        {">", OP_GT},   {"=", OP_ASSIGN}, {"(", OP_LPAREN}, {")", OP_RPAREN},
    {"[", OP_LBRACKET},  {"]", OP_RBRACKET}, {"{", OP_LBRACE}, {"}", OP_RBRACE}, {",", OP_COMMA},
    {".", OP_DOT},       {":", OP_COLON}, {"|", OP_PIPE},
};

/* Lexes the inside of a {{ }} or {% %} tag from lx->pos up to its end marker; returns the
 * strip sign before the marker ('-', '+' or 0) and leaves lx->pos after the marker. */
static char lex_tag(struct lexer *lx, char closer, int open_line) {
  int depth = 0;
  const char *s = lx->s;
  for (;;) {
    while (lx->pos < lx->n && is_space(s[lx->pos])) {
      lx->line += s[lx->pos] == '\n';
      lx->pos++;
    }
    if (lx->pos >= lx->n)
      jinja_fail(lx->j, open_line, "unterminated %s tag (no '%c}')", closer == '%' ? "block {% %}" : "variable {{ }}", closer);
    size_t p = lx->pos;
    if (depth == 0) {
      if ((s[p] == '-' || (s[p] == '+' && closer == '%')) && p + 2 < lx->n && s[p + 1] == closer &&
          s[p + 2] == '}') {
        lx->pos = p + 3;
        return s[p];
      }
      if (s[p] == closer && p + 1 < lx->n && s[p + 1] == '}') {
        lx->pos = p + 2;
        return 0;
      }
    }
    char c = s[p];
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      size_t e = p;
      while (e < lx->n && (s[e] == '_' || (s[e] >= 'a' && s[e] <= 'z') || (s[e] >= 'A' && s[e] <= 'Z') ||
                           (s[e] >= '0' && s[e] <= '9')))
        e++;
      struct jtok *t = push(lx, JT_NAME);
      t->text = (struct jstr){s + p, e - p};
      lx->pos = e;
      continue;
    }
    if (c >= '0' && c <= '9') {
      size_t e = p;
      char digits[64];
      size_t d = 0;
      bool is_float = false;
      while (e < lx->n && ((s[e] >= '0' && s[e] <= '9') || (s[e] == '_' && e + 1 < lx->n && s[e + 1] >= '0' && s[e + 1] <= '9'))) {
        if (s[e] != '_' && d < sizeof digits - 1)
          digits[d++] = s[e];
        e++;
      }
      if (e + 1 < lx->n && s[e] == '.' && s[e + 1] >= '0' && s[e + 1] <= '9') {
        is_float = true;
        if (d < sizeof digits - 1)
          digits[d++] = '.';
        e++;
        while (e < lx->n && ((s[e] >= '0' && s[e] <= '9') || s[e] == '_')) {
          if (s[e] != '_' && d < sizeof digits - 1)
            digits[d++] = s[e];
          e++;
        }
      }
      if (e < lx->n && (s[e] == 'e' || s[e] == 'E')) {
        size_t x = e + 1;
        if (x < lx->n && (s[x] == '+' || s[x] == '-'))
          x++;
        if (x < lx->n && s[x] >= '0' && s[x] <= '9') {
          is_float = true;
          while (e < x && d < sizeof digits - 1)
            digits[d++] = s[e++];
          while (e < lx->n && s[e] >= '0' && s[e] <= '9') {
            if (d < sizeof digits - 1)
              digits[d++] = s[e];
            e++;
          }
        }
      }
      digits[d] = 0;
      if (d >= sizeof digits - 1)
        jinja_fail(lx->j, lx->line, "number literal too long");
      struct jtok *t = push(lx, is_float ? JT_FLOAT : JT_INT);
      if (is_float) {
        t->f = strtod(digits, NULL);
      } else {
        char *end;
        unsigned long long value = strtoull(digits, &end, 10);
        if (d > 18 && (value > (unsigned long long)INT64_MAX || d > 19))
          jinja_fail(lx->j, lx->line, "integer literal %s does not fit 64 bits", digits);
        t->i = (int64_t)value;
      }
      lx->pos = e;
      continue;
    }
    if (c == '\'' || c == '"') {
      int line = lx->line;
      size_t e = p + 1;
      while (e < lx->n && s[e] != c) {
        if (s[e] == '\\' && e + 1 < lx->n)
          e++;
        e++;
      }
      if (e >= lx->n)
        jinja_fail(lx->j, line, "unterminated string literal");
      struct jtok *t = push(lx, JT_STRING);
      t->text = unescape(lx, s + p + 1, e - p - 1, line);
      lx->line += count_lines(s + p, e - p);
      lx->pos = e + 1;
      continue;
    }
    size_t k = 0;
    for (; k < sizeof operators / sizeof operators[0]; k++) {
      size_t len = strlen(operators[k].text);
      if (p + len <= lx->n && memcmp(s + p, operators[k].text, len) == 0)
        break;
    }
    if (k == sizeof operators / sizeof operators[0])
      jinja_fail(lx->j, lx->line, "unexpected character '%c' in a tag", c);
    enum jop op = operators[k].op;
    if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE)
      depth++;
    if ((op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) && depth > 0)
      depth--;
    struct jtok *t = push(lx, JT_OP);
    t->op = op;
    lx->pos = p + strlen(operators[k].text);
  }
}

/* After a tag's end marker: '-' strips all whitespace; a block or comment tag without '+'
 * drops one newline (trim_blocks). Sets line_starting as Jinja does. */
static void after_tag(struct lexer *lx, char sign, bool block) {
  size_t start = lx->pos;
  if (sign == '-') {
    while (lx->pos < lx->n && is_space(lx->s[lx->pos]))
      lx->pos++;
  } else if (block && sign != '+' && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
    lx->pos++;
  }
  lx->line += count_lines(lx->s + start, lx->pos - start);
  lx->line_starting = lx->pos > start ? lx->s[lx->pos - 1] == '\n' : false;
}

/* The next "{{", "{%" or "{#" at or after from; n when none. */
static size_t next_tag(const struct lexer *lx, size_t from) {
  for (size_t k = from; k + 1 < lx->n; k++)
    if (lx->s[k] == '{' && (lx->s[k + 1] == '{' || lx->s[k + 1] == '%' || lx->s[k + 1] == '#'))
      return k;
  return lx->n;
}

/* The text from `from` to the tag at `tag`, stripped as the tag asks. */
static void text_before_tag(struct lexer *lx, size_t from, size_t tag) {
  const char *p = lx->s + from;
  size_t n = tag - from;
  char kind = lx->s[tag + 1], sign = tag + 2 < lx->n ? lx->s[tag + 2] : 0;
  size_t kept = n;
  if (sign == '-') {
    kept = rstrip_length(p, n);
  } else if (sign != '+' && kind != '{') {
    size_t l_pos = n;
    while (l_pos > 0 && p[l_pos - 1] != '\n')
      l_pos--;
    if ((l_pos > 0 || lx->line_starting) && all_space(p + l_pos, n - l_pos))
      kept = l_pos;
  }
  emit_text(lx, p, kept);
  lx->line += count_lines(p + kept, n - kept);
}

/* Whether the block tag at `tag` is "{% NAME %}" (with optional signs); sets *end past it. */
static bool is_word_tag(const struct lexer *lx, size_t tag, const char *word, size_t *end, char *close_sign) {
  size_t k = tag + 2;
  if (k < lx->n && (lx->s[k] == '-' || lx->s[k] == '+'))
    k++;
  while (k < lx->n && is_space(lx->s[k]))
    k++;
  size_t len = strlen(word);
  if (k + len > lx->n || memcmp(lx->s + k, word, len) != 0)
    return false;
  k += len;
  while (k < lx->n && is_space(lx->s[k]))
    k++;
  *close_sign = 0;
  if (k < lx->n && (lx->s[k] == '-' || lx->s[k] == '+'))
    *close_sign = lx->s[k++];
  if (k + 1 < lx->n && lx->s[k] == '%' && lx->s[k + 1] == '}') {
    *end = k + 2;
    return true;
  }
  return false;
}

static void lex_raw(struct lexer *lx, size_t raw_end, char raw_sign) {
  lx->pos = raw_end;
  after_tag(lx, raw_sign, true);
  for (size_t from = lx->pos;;) {
    size_t tag = next_tag(lx, from);
    if (tag >= lx->n)
      jinja_fail(lx->j, lx->line, "{%% raw %%} without {%% endraw %%}");
    size_t end;
    char sign;
    if (lx->s[tag + 1] == '%' && is_word_tag(lx, tag, "endraw", &end, &sign)) {
      text_before_tag(lx, lx->pos, tag);
      lx->pos = end;
      after_tag(lx, sign, true);
      return;
    }
    from = tag + 1;
  }
}

struct jtokens jinja_lex(struct jinja *j, const char *source, size_t length) {
  /* newlines normalised, one trailing newline dropped */
  char *s = jinja_alloc(j, length + 1);
  size_t n = 0;
  for (size_t k = 0; k < length; k++) {
    if (source[k] == '\r') {
      s[n++] = '\n';
      if (k + 1 < length && source[k + 1] == '\n')
        k++;
    } else {
      s[n++] = source[k];
    }
  }
  if (n > 0 && s[n - 1] == '\n')
    n--;
  s[n] = 0;
  struct lexer lx = {.j = j, .s = s, .n = n, .line = 1, .line_starting = true};
  while (lx.pos < lx.n) {
    size_t tag = next_tag(&lx, lx.pos);
    if (tag >= lx.n) {
      emit_text(&lx, s + lx.pos, lx.n - lx.pos);
      break;
    }
    text_before_tag(&lx, lx.pos, tag);
    char kind = s[tag + 1];
    int open_line = lx.line;
    size_t raw_end;
    char raw_sign;
    if (kind == '%' && is_word_tag(&lx, tag, "raw", &raw_end, &raw_sign)) {
      lex_raw(&lx, raw_end, raw_sign);
      continue;
    }
    lx.pos = tag + 2;
    if (lx.pos < lx.n && (s[lx.pos] == '-' || (s[lx.pos] == '+' && kind != '{')))
      lx.pos++;
    if (kind == '#') {
      size_t e = lx.pos;
      while (e + 1 < lx.n && !(s[e] == '#' && s[e + 1] == '}'))
        e++;
      if (e + 1 >= lx.n)
        jinja_fail(j, open_line, "unterminated comment {# #}");
      char sign = e > lx.pos && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
      lx.line += count_lines(s + lx.pos, e - lx.pos);
      lx.pos = e + 2;
      after_tag(&lx, sign, true);
      continue;
    }
    struct jtok *begin = push(&lx, kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN);
    begin->line = open_line;
    char sign = lex_tag(&lx, kind == '{' ? '}' : '%', open_line);
    push(&lx, kind == '{' ? JT_VAR_END : JT_BLOCK_END);
    after_tag(&lx, sign, kind == '%');
  }
  push(&lx, JT_EOF);
  return (struct jtokens){lx.v, lx.count};
}
