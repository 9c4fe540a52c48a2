/* Python's str operations on UTF-8, as the templates' methods and filters use them: strip with
 * str.isspace() or a set of characters, split/rsplit, replace, find, and case mappings (ASCII
 * letters only: chat templates apply them to role names and keywords). */
#include "jinja.h"

#include "text_strip.h"

#include <string.h>

uint32_t jstr_next_codepoint(struct jstr s, size_t *k) {
  const unsigned char *u = (const unsigned char *)s.p + *k;
  size_t left = s.n - *k;
  uint32_t cp = u[0];
  size_t len = 1;
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
  *k += len;
  return cp;
}

static bool in_set(uint32_t cp, const struct jstr *chars) {
  if (!chars)
    return clattn__is_python_space(cp);
  for (size_t k = 0; k < chars->n;)
    if (jstr_next_codepoint(*chars, &k) == cp)
      return true;
  return false;
}

struct jv jinja_str_strip(struct jv v, const struct jstr *chars, enum jstrip which) {
  struct jstr s = v.u.s;
  size_t start = 0, end = s.n;
  if (which != JSTRIP_RIGHT) {
    while (start < end) {
      size_t k = start;
      if (!in_set(jstr_next_codepoint(s, &k), chars))
        break;
      start = k;
    }
  }
  if (which != JSTRIP_LEFT) {
    while (end > start) {
      size_t b = end - 1;
      while (b > start && ((unsigned char)s.p[b] & 0xC0) == 0x80)
        b--;
      size_t k = b;
      if (!in_set(jstr_next_codepoint(s, &k), chars))
        break;
      end = b;
    }
  }
  return jv_str((struct jstr){s.p + start, end - start});
}

static bool space_at(struct jstr s, size_t k, size_t *after) {
  *after = k;
  return clattn__is_python_space(jstr_next_codepoint(s, after));
}

struct jv jinja_str_split(struct jinja *j, int line, struct jstr s, const struct jstr *sep, int64_t maxsplit,
                          bool from_right) {
  struct jv parts = jv_list_new(j, 4);
  if (sep && sep->n == 0)
    jinja_fail(j, line, "split: empty separator");
  if (maxsplit < 0)
    maxsplit = INT64_MAX;
  if (sep) {
    if (!from_right) {
      size_t start = 0;
      for (size_t k = 0; k + sep->n <= s.n && maxsplit > 0;) {
        if (memcmp(s.p + k, sep->p, sep->n) == 0) {
          jv_list_push(j, parts, jv_str((struct jstr){s.p + start, k - start}));
          k += sep->n;
          start = k;
          maxsplit--;
        } else {
          k++;
        }
      }
      jv_list_push(j, parts, jv_str((struct jstr){s.p + start, s.n - start}));
      return parts;
    }
    /* rsplit: collect from the right, then reverse */
    size_t end = s.n;
    for (size_t k = s.n; k >= sep->n && maxsplit > 0;) {
      if (memcmp(s.p + k - sep->n, sep->p, sep->n) == 0) {
        jv_list_push(j, parts, jv_str((struct jstr){s.p + k, end - k}));
        k -= sep->n;
        end = k;
        maxsplit--;
      } else {
        k--;
      }
    }
    jv_list_push(j, parts, jv_str((struct jstr){s.p, end}));
    struct jlist *l = parts.u.list;
    for (size_t a = 0, b = l->n - 1; a < b; a++, b--) {
      struct jv t = l->items[a];
      l->items[a] = l->items[b];
      l->items[b] = t;
    }
    return parts;
  }
  if (from_right) {
    /* whitespace rsplit: only maxsplit changes the result; split fully when unbounded */
    if (maxsplit != INT64_MAX)
      jinja_fail(j, line, "rsplit with maxsplit and no separator is not supported");
  }
  size_t k = 0;
  for (;;) {
    size_t after;
    while (k < s.n && space_at(s, k, &after))
      k = after;
    if (k >= s.n)
      break;
    if (maxsplit == 0) {
      struct jv rest = jinja_str_strip(jv_str((struct jstr){s.p + k, s.n - k}), NULL, JSTRIP_RIGHT);
      jv_list_push(j, parts, rest);
      break;
    }
    size_t start = k;
    while (k < s.n && !space_at(s, k, &after))
      k = after;
    jv_list_push(j, parts, jv_str((struct jstr){s.p + start, k - start}));
    maxsplit--;
  }
  return parts;
}

struct jv jinja_str_replace(struct jinja *j, struct jstr s, struct jstr old, struct jstr with, int64_t count) {
  if (count < 0)
    count = INT64_MAX;
  struct jbuf b = {0};
  if (old.n == 0) {
    /* Python inserts `with` before every code point and at the end */
    size_t k = 0;
    while (k <= s.n) {
      if (count-- > 0)
        jbuf_put(j, &b, with.p, with.n);
      else {
        jbuf_put(j, &b, s.p + k, s.n - k);
        break;
      }
      if (k == s.n)
        break;
      size_t e = k;
      jstr_next_codepoint(s, &e);
      jbuf_put(j, &b, s.p + k, e - k);
      k = e;
    }
    return b.p ? jbuf_take(&b) : jv_cstr("");
  }
  size_t start = 0;
  for (size_t k = 0; k + old.n <= s.n && count > 0;) {
    if (memcmp(s.p + k, old.p, old.n) == 0) {
      jbuf_put(j, &b, s.p + start, k - start);
      jbuf_put(j, &b, with.p, with.n);
      k += old.n;
      start = k;
      count--;
    } else {
      k++;
    }
  }
  jbuf_put(j, &b, s.p + start, s.n - start);
  return b.p ? jbuf_take(&b) : jv_cstr("");
}

/* Simple case mappings of Latin-1, Latin Extended-A, Greek and Cyrillic (Python maps every
 * Unicode letter; chat templates case role names and keywords); 0 when the code point has none */
static uint32_t upper_of(uint32_t c) {
  if (c >= 'a' && c <= 'z')
    return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
    return c - 32;
  if (c == 0xFF)
    return 0x178;
  if (c == 0x3C2)
    return 0x3A3;
  if (c >= 0x450 && c <= 0x45F)
    return c - 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E));
    if ((c % 2 == 1) == odd_is_lower)
      return c - 1;
  }
  return 0;
}

static uint32_t lower_of(uint32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
    return c + 32;
  if (c == 0x178)
    return 0xFF;
  if (c >= 0x400 && c <= 0x40F)
    return c + 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = !((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E));
    if ((c % 2 == 1) != odd_is_lower)
      return c + 1;
  }
  return 0;
}

static bool is_cased(uint32_t c) { return upper_of(c) || lower_of(c) || c == 0xDF; }

static void put_codepoint(struct jinja *j, struct jbuf *b, uint32_t cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xC0 | cp >> 6);
    u[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | cp >> 12);
    u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | cp >> 18);
    u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  jbuf_put(j, b, u, n);
}

/* Writes cp raised (or lowered); bytes that are not a mapped letter are copied */
static void put_cased(struct jinja *j, struct jbuf *b, struct jstr s, size_t from, size_t to, uint32_t cp, bool up) {
  if (up && cp == 0xDF) { /* ß upper is SS */
    jbuf_puts(j, b, "SS");
    return;
  }
  uint32_t mapped = up ? upper_of(cp) : lower_of(cp);
  if (mapped)
    put_codepoint(j, b, mapped);
  else
    jbuf_put(j, b, s.p + from, to - from);
}

/* Jinja's title filter splits before runs of '-', whitespace and opening brackets */
static bool jinja_word_break(uint32_t c) {
  return c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '(' ||
         c == '{' || c == '[' || c == '<';
}

struct jv jinja_str_case(struct jinja *j, struct jstr s, enum jcase which) {
  if (s.n == 0)
    return jv_str(s);
  struct jbuf b = {0};
  bool previous_cased = false, previous_break = false;
  for (size_t k = 0, index = 0; k < s.n; index++) {
    size_t from = k;
    uint32_t c = jstr_next_codepoint(s, &k);
    bool up;
    switch (which) {
    case JCASE_UPPER:
      up = true;
      break;
    case JCASE_LOWER:
      up = false;
      break;
    case JCASE_CAPITALIZE:
      up = index == 0;
      break;
    case JCASE_TITLE: /* str.title: a letter after a cased letter is lowered, others raised */
      up = !previous_cased;
      previous_cased = is_cased(c);
      break;
    default: { /* Jinja's title: each piece's first character raised, the rest lowered */
      bool brk = jinja_word_break(c);
      up = index == 0 || brk != previous_break;
      previous_break = brk;
    }
    }
    put_cased(j, &b, s, from, k, c, up);
  }
  return jbuf_take(&b);
}

int64_t jinja_str_find(struct jstr s, struct jstr needle, bool last) {
  int64_t found = -1;
  for (size_t k = 0; k + needle.n <= s.n; k++) {
    if (needle.n == 0 || memcmp(s.p + k, needle.p, needle.n) == 0) {
      found = (int64_t)jstr_codepoints((struct jstr){s.p, k});
      if (!last)
        break;
    }
  }
  return found;
}

bool jinja_str_starts(struct jstr s, struct jstr prefix) {
  return prefix.n <= s.n && (prefix.n == 0 || memcmp(s.p, prefix.p, prefix.n) == 0);
}

bool jinja_str_ends(struct jstr s, struct jstr suffix) {
  return suffix.n <= s.n && (suffix.n == 0 || memcmp(s.p + s.n - suffix.n, suffix.p, suffix.n) == 0);
}
