/* The WordPiece tokenizer: each rule on a tiny committed vocabulary (hand-written expectations),
 * errors and hostile input, and the real all-MiniLM-L6-v2 tokenizer against Hugging Face's
 * fast tokenizer (golden files from tools/gen_tokenizer_golden.py). */
#include "common/test_util.h"
#include "clattn/tokenizer.h"
#include "text/tokenizer_internal.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <threads.h>
#include <unistd.h>

#ifndef TOK_FIXTURE_DIR
#error "TOK_FIXTURE_DIR must name tests/data/tokenizer (meson passes it with c_args)"
#endif
#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

/* ---- helpers ---- */

static char temp_dir[1024];

static int make_temp_dir(void **state)
{
    (void)state;
    return test_temp_dir_create(temp_dir, sizeof(temp_dir), "clattn_tok_");
}

static int remove_temp_dir(void **state)
{
    (void)state;
    test_temp_dir_remove(temp_dir);
    return 0;
}

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", TOK_FIXTURE_DIR, name);
    return path;
}

static const char *temp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", temp_dir, name);
    return path;
}

static void write_file(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text)
{
    write_file(path, text, strlen(text));
}

static clattn_tokenizer *load(const char *path)
{
    clattn_tokenizer *tok = NULL;
    clattn_status s = clattn_tokenizer_load(&tok, path);
    if (s) {
        print_error("loading %s: %s\n", path, clattn_last_error(NULL));
        fail();
    }
    assert_non_null(tok);
    return tok;
}

/* Encodes `length` bytes and compares with want[0..want_count-1]. */
static void expect_ids_n(const clattn_tokenizer *tok, const char *text, size_t length,
                         size_t max_length, const int32_t *want, size_t want_count,
                         const char *file, int line)
{
    int32_t ids[512];
    size_t count = 12345;
    clattn_status s = clattn_tokenizer_encode(tok, text, length, max_length, ids, 512, &count);
    if (s) {
        print_error("%s:%d: encode failed: %s\n", file, line, clattn_last_error(NULL));
        fail();
    }
    bool same = count == want_count && memcmp(ids, want, count * sizeof(*ids)) == 0;
    if (!same) {
        print_error("%s:%d: got %zu ids:", file, line, count);
        for (size_t i = 0; i < count && i < 40; i++)
            print_error(" %d", (int)ids[i]);
        print_error("\n  want %zu ids:", want_count);
        for (size_t i = 0; i < want_count && i < 40; i++)
            print_error(" %d", (int)want[i]);
        print_error("\n");
        fail();
    }
}

#define EXPECT(tok, text, ...)                                                              \
    do {                                                                                    \
        const int32_t want_[] = {__VA_ARGS__};                                              \
        expect_ids_n((tok), (text), strlen(text), 0, want_, sizeof(want_) / sizeof(*want_), \
                     __FILE__, __LINE__);                                                   \
    } while (0)

#define EXPECT_MAX(tok, text, max, ...)                                                       \
    do {                                                                                      \
        const int32_t want_[] = {__VA_ARGS__};                                                \
        expect_ids_n((tok), (text), strlen(text), (max), want_, sizeof(want_) / sizeof(*want_), \
                     __FILE__, __LINE__);                                                     \
    } while (0)

/* Asserts that loading fails with `status` and a message containing `needle`. */
static void expect_load_error(const char *path, clattn_status status, const char *needle)
{
    clattn_tokenizer *tok = (clattn_tokenizer *)&tok; /* must be cleared */
    clattn_status s = clattn_tokenizer_load(&tok, path);
    const char *msg = clattn_last_error(NULL);
    if (s != status || !msg || !strstr(msg, needle) ||
        strncmp(msg, "clattn_tokenizer_load: ", 23) != 0) {
        print_error("loading %s: got %s '%s', want %s with '%s'\n", path, clattn_status_name(s),
                    msg ? msg : "(null)", clattn_status_name(status), needle);
        fail();
    }
    assert_null(tok);
}

/* The ids of the tiny vocabulary (tests/data/tokenizer/vocab.txt: line k is id k). */
enum {
    PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, HELLO = 5, WORLD = 6, UN = 7, AFF = 8,
    ABLE = 9, COMMA = 10, BANG = 11, CAFE = 12, DOT = 13, ZHONG = 14, WEN = 15, A = 16, CA = 17,
    THE = 18, CS = 19, LBR = 20, RBR = 21, CL = 22, SEPW = 23, SHARP_S = 24, I = 25, QUEST = 26,
    AB = 27, CB = 28, NAIVE = 29, RESUME = 30,
    /* added tokens of tokenizer.json */
    NEW = 31, MYTOKEN = 32, RTOK = 33,
};

/* ---- the rules, on vocab.txt (BertTokenizerFast's defaults) ---- */

static void vocab_txt_settings(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    clattn_tokenizer_special sp = clattn_tokenizer_special_ids(tok);
    assert_int_equal(sp.cls, CLS);
    assert_int_equal(sp.sep, SEP);
    assert_int_equal(sp.pad, PAD);
    assert_int_equal(sp.unk, UNK);
    assert_int_equal(sp.mask, MASK);
    assert_int_equal(clattn_tokenizer_vocab_size(tok), 31);
    assert_true(clattn_tokenizer_max_length(tok) == SIZE_MAX);
    assert_string_equal(clattn_tokenizer_token(tok, AFF), "##aff");
    assert_string_equal(clattn_tokenizer_token(tok, ZHONG), "中");
    assert_null(clattn_tokenizer_token(tok, 31));
    assert_null(clattn_tokenizer_token(tok, -1));
    assert_int_equal(clattn_tokenizer_token_id(tok, "resume"), RESUME);
    assert_int_equal(clattn_tokenizer_token_id(tok, "Resume"), -1);
    assert_int_equal(clattn_tokenizer_token_id(tok, NULL), -1);
    clattn_tokenizer_destroy(&tok);
    assert_null(tok);
    clattn_tokenizer_destroy(&tok);
    clattn_tokenizer_destroy(NULL);
    assert_int_equal(clattn_tokenizer_special_ids(NULL).cls, -1);
    assert_int_equal(clattn_tokenizer_vocab_size(NULL), 0);
    assert_int_equal(clattn_tokenizer_max_length(NULL), 0);
    assert_null(clattn_tokenizer_token(NULL, 0));
}

static void wordpiece_rules(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    EXPECT(tok, "", CLS, SEP);
    EXPECT(tok, "   \t\n ", CLS, SEP);
    EXPECT(tok, "hello world", CLS, HELLO, WORLD, SEP);
    /* Greedy longest match with ## continuations. */
    EXPECT(tok, "unaffable", CLS, UN, AFF, ABLE, SEP);
    EXPECT(tok, "aaa", CLS, A, CA, CA, SEP);
    EXPECT(tok, "abb", CLS, AB, CB, SEP);
    EXPECT(tok, "the thes", CLS, THE, THE, CS, SEP);
    /* A word with an unmatched part is one [UNK]; so is an unknown word. */
    EXPECT(tok, "hellox", CLS, UNK, SEP);
    EXPECT(tok, "xyz hello", CLS, UNK, HELLO, SEP);
    EXPECT(tok, "unaffablex", CLS, UNK, SEP);
    /* 100 characters are a word; 101 are [UNK]. */
    char word[128];
    memset(word, 'a', 101);
    word[100] = '\0';
    {
        int32_t want[102];
        want[0] = CLS;
        want[1] = A;
        for (int i = 2; i <= 100; i++)
            want[i] = CA;
        want[101] = SEP;
        expect_ids_n(tok, word, 100, 0, want, 102, __FILE__, __LINE__);
    }
    word[100] = 'a';
    word[101] = '\0';
    EXPECT(tok, word, CLS, UNK, SEP);
    /* Characters, not bytes, count: 100 two-byte characters are still a word. */
    char wide[256] = "";
    for (int i = 0; i < 101; i++)
        strcat(wide, "\xc3\xa1"); /* á: a after accent stripping */
    expect_ids_n(tok, wide, 101 * 2, 0, (const int32_t[]){CLS, UNK, SEP}, 3, __FILE__, __LINE__);
    clattn_tokenizer_destroy(&tok);
}

static void normalisation_rules(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    /* Lower case, accents stripped (NFD, then nonspacing marks removed). */
    EXPECT(tok, "Hello WORLD", CLS, HELLO, WORLD, SEP);
    EXPECT(tok, "Café", CLS, CAFE, SEP);
    EXPECT(tok, "cafe\xcc\x81", CLS, CAFE, SEP); /* e + U+0301 */
    EXPECT(tok, "NAÏVE Résumé", CLS, NAIVE, RESUME, SEP);
    /* ß is not case-folded to ss; İ lower-cases to i (after its dot is stripped). */
    EXPECT(tok, "ß", CLS, SHARP_S, SEP);
    EXPECT(tok, "İ", CLS, I, SEP);
    /* Punctuation: ASCII and Unicode P*, each its own word. */
    EXPECT(tok, "Hello, world!", CLS, HELLO, COMMA, WORLD, BANG, SEP);
    EXPECT(tok, "hello...?", CLS, HELLO, DOT, DOT, DOT, QUEST, SEP);
    EXPECT(tok, "hello\xe2\x80\x94world", CLS, HELLO, UNK, WORLD, SEP); /* em dash, Pd */
    EXPECT(tok, "hello$world", CLS, HELLO, UNK, WORLD, SEP); /* $ is ASCII punctuation */
    EXPECT(tok, "hello\xe2\x82\xacworld", CLS, UNK, SEP);    /* € is Sc: part of the word */
    /* CJK ideographs are words of their own, kana and Hangul are not. */
    EXPECT(tok, "中文", CLS, ZHONG, WEN, SEP);
    EXPECT(tok, "a中a", CLS, A, ZHONG, A, SEP);
    EXPECT(tok, "a\xe3\x81\x82", CLS, UNK, SEP); /* a + hiragana a: one word */
    /* Cleaning: controls and format characters removed (joining words), whitespace kinds
     * become spaces; \t \n \r are whitespace. */
    expect_ids_n(tok, "hel\0lo", 6, 0, (const int32_t[]){CLS, HELLO, SEP}, 3, __FILE__, __LINE__);
    EXPECT(tok, "a\x0b" "b", CLS, AB, SEP);               /* vertical tab: Cc, removed */
    EXPECT(tok, "a\x0c" "b", CLS, AB, SEP);               /* form feed: Cc */
    EXPECT(tok, "a\xc2\x85" "b", CLS, AB, SEP);           /* U+0085: Cc */
    EXPECT(tok, "a\xe2\x80\x8b" "b", CLS, AB, SEP);       /* zero-width space: Cf */
    EXPECT(tok, "a\xef\xbb\xbf" "b", CLS, AB, SEP);       /* BOM: Cf */
    EXPECT(tok, "a\xef\xbf\xbd" "b", CLS, AB, SEP);       /* U+FFFD */
    EXPECT(tok, "a\xee\x80\x80" "b", CLS, AB, SEP);       /* private use: Co */
    EXPECT(tok, "a\x7f\x01\x1b" "b", CLS, AB, SEP);
    EXPECT(tok, "hello\tworld\r\nhello", CLS, HELLO, WORLD, HELLO, SEP);
    EXPECT(tok, "hello\xc2\xa0world", CLS, HELLO, WORLD, SEP);     /* no-break space */
    EXPECT(tok, "hello\xe3\x80\x80world", CLS, HELLO, WORLD, SEP); /* ideographic space */
    EXPECT(tok, "hello\xe2\x80\xa8world", CLS, HELLO, WORLD, SEP); /* line separator */
    EXPECT(tok, "\xe2\x80\x8b\x01", CLS, SEP);                     /* nothing left */
    clattn_tokenizer_destroy(&tok);
}

/* ---- every bound of the normaliser's and pre-tokeniser's code-point ranges ----
 * Expected values: the rules of Hugging Face tokenizers' BERT normaliser and pre-tokeniser
 * (BertTokenizerFast; tokenizers/src/normalizers/bert.rs and pre_tokenizers/bert.rs), written down
 * here from their published tables, not computed by the library:
 *   punctuation: the ASCII ranges 33-47, 58-64, 91-96, 123-126, or a Unicode P* category;
 *   CJK ideographs (each its own word): 0x4E00-0x9FFF, 0x3400-0x4DBF, 0x20000-0x2A6DF,
 *     0x2A700-0x2B73F, 0x2B740-0x2B81F, 0x2B920-0x2CEAF (tokenizers' table; the Python
 *     BertTokenizer's starts at 0x2B820), 0xF900-0xFAFF, 0x2F800-0x2FA1F;
 *   cleaning: Cc, Cf, Co, Cs removed (not \t \n \r), White_Space characters become spaces;
 *   accents: NFD, then nonspacing marks (Mn) removed; Mc and Me stay.
 * The categories of the code points used are Unicode's (UnicodeData.txt; Python's unicodedata
 * agrees for all of them). */

/* "a" + cp + "a" as UTF-8 into out (16 bytes). */
static const char *a_cp_a(uint32_t cp, char *out)
{
    size_t n = 0;
    out[n++] = 'a';
    if (cp < 0x80) {
        out[n++] = (char)cp;
    } else if (cp < 0x800) {
        out[n++] = (char)(0xC0 | cp >> 6);
        out[n++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[n++] = (char)(0xE0 | cp >> 12);
        out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[n++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[n++] = (char)(0xF0 | cp >> 18);
        out[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
        out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[n++] = (char)(0x80 | (cp & 0x3F));
    }
    out[n++] = 'a';
    out[n] = '\0';
    return out;
}

/* How "a" + cp + "a" tokenizes on vocab.txt. */
enum split_kind {
    SPLIT_OWN_WORD,   /* cp is split off (punctuation, CJK): a, cp's id or [UNK], a */
    SPLIT_IN_WORD,    /* one word "a?a", not in the vocabulary: [UNK] */
    SPLIT_REMOVED,    /* cleaned away: "aa" = a ##a */
    SPLIT_SPACE,      /* whitespace: a a */
    SPLIT_LOWER_A,    /* 'A' lower-cased: a ##a ##a */
    SPLIT_STRIPPED,   /* a nonspacing mark dropped: "aa" = a ##a */
};

static void expect_split(const clattn_tokenizer *tok, uint32_t cp, enum split_kind kind,
                         int32_t own_id, int line)
{
    char text[16];
    a_cp_a(cp, text);
    int32_t want[5] = {CLS};
    size_t n = 1;
    switch (kind) {
    case SPLIT_OWN_WORD: want[n++] = A, want[n++] = own_id, want[n++] = A; break;
    case SPLIT_IN_WORD: want[n++] = UNK; break;
    case SPLIT_REMOVED: want[n++] = A, want[n++] = CA; break;
    case SPLIT_SPACE: want[n++] = A, want[n++] = A; break;
    case SPLIT_LOWER_A: want[n++] = A, want[n++] = CA, want[n++] = CA; break;
    case SPLIT_STRIPPED: want[n++] = A, want[n++] = CA; break;
    }
    want[n++] = SEP;
    expect_ids_n(tok, text, strlen(text), 0, want, n, __FILE__, line);
}

static void range_bounds_of_the_rules(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    static const struct {
        uint32_t cp;
        bool punctuation, chinese;
    } bounds[] = {
        /* ASCII punctuation: each bound and its outer neighbour */
        {32, false, false}, {33, true, false}, {47, true, false}, {48, false, false},
        {57, false, false}, {58, true, false}, {64, true, false}, {65, false, false},
        {90, false, false}, {91, true, false}, {96, true, false}, {97, false, false},
        {122, false, false}, {123, true, false}, {126, true, false}, {127, false, false},
        /* CJK ranges */
        {0x4DFF, false, false}, {0x4E00, false, true}, {0x9FFF, false, true},
        {0xA000, false, false}, {0x33FF, false, false}, {0x3400, false, true},
        {0x4DBF, false, true}, {0x4DC0, false, false}, {0x1FFFF, false, false},
        {0x20000, false, true}, {0x2A6DF, false, true}, {0x2A6E0, false, false},
        {0x2A6FF, false, false}, {0x2A700, false, true}, {0x2B73F, false, true},
        {0x2B740, false, true}, {0x2B81F, false, true}, {0x2B820, false, false},
        {0x2B91F, false, false}, {0x2B920, false, true}, {0x2CEAF, false, true},
        {0x2CEB0, false, false}, {0xF8FF, false, false}, {0xF900, false, true},
        {0xFAFF, false, true}, {0xFB00, false, false}, {0x2F7FF, false, false},
        {0x2F800, false, true}, {0x2FA1F, false, true}, {0x2FA20, false, false},
    };
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        if (clattn__is_punctuation(bounds[i].cp) != bounds[i].punctuation ||
            clattn__is_chinese_char(bounds[i].cp) != bounds[i].chinese)
            print_error("U+%04X: punctuation %d, CJK %d\n", (unsigned)bounds[i].cp,
                        bounds[i].punctuation, bounds[i].chinese);
        assert_int_equal(clattn__is_punctuation(bounds[i].cp), bounds[i].punctuation);
        assert_int_equal(clattn__is_chinese_char(bounds[i].cp), bounds[i].chinese);
    }
    /* The same through encoding "a?a". */
    expect_split(tok, 32, SPLIT_SPACE, 0, __LINE__);
    expect_split(tok, 33, SPLIT_OWN_WORD, BANG, __LINE__);
    expect_split(tok, 47, SPLIT_OWN_WORD, UNK, __LINE__);
    expect_split(tok, 48, SPLIT_IN_WORD, 0, __LINE__);
    expect_split(tok, 57, SPLIT_IN_WORD, 0, __LINE__);
    expect_split(tok, 58, SPLIT_OWN_WORD, UNK, __LINE__);
    expect_split(tok, 64, SPLIT_OWN_WORD, UNK, __LINE__);
    expect_split(tok, 65, SPLIT_LOWER_A, 0, __LINE__);
    expect_split(tok, 90, SPLIT_IN_WORD, 0, __LINE__);
    expect_split(tok, 91, SPLIT_OWN_WORD, LBR, __LINE__);
    expect_split(tok, 96, SPLIT_OWN_WORD, UNK, __LINE__); /* ` is Sk: punctuation by the ASCII rule */
    expect_split(tok, 97, SPLIT_LOWER_A, 0, __LINE__);
    expect_split(tok, 122, SPLIT_IN_WORD, 0, __LINE__);
    expect_split(tok, 123, SPLIT_OWN_WORD, UNK, __LINE__);
    expect_split(tok, 126, SPLIT_OWN_WORD, UNK, __LINE__); /* ~ is Sm */
    expect_split(tok, 127, SPLIT_REMOVED, 0, __LINE__);    /* DEL is Cc */
    /* CJK: inside a range (assigned or not: unassigned code points are kept) a word of its
     * own; just outside, part of the word (So, Lo, Ll, unassigned) or removed (Co). */
    for (size_t i = 16; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        uint32_t cp = bounds[i].cp;
        expect_split(tok, cp, bounds[i].chinese ? SPLIT_OWN_WORD : cp == 0xF8FF ? SPLIT_REMOVED : SPLIT_IN_WORD,
                     UNK, __LINE__);
    }
    /* Cleaning: controls next to printable and whitespace bounds. */
    expect_split(tok, 0x1F, SPLIT_REMOVED, 0, __LINE__);     /* Cc */
    expect_split(tok, 0x9F, SPLIT_REMOVED, 0, __LINE__);     /* Cc, last C1 control */
    expect_split(tok, 0xA0, SPLIT_SPACE, 0, __LINE__);       /* Zs */
    expect_split(tok, 0x1FFF, SPLIT_IN_WORD, 0, __LINE__);   /* unassigned: kept */
    expect_split(tok, 0x2000, SPLIT_SPACE, 0, __LINE__);     /* first of 0x2000-0x200A */
    expect_split(tok, 0x200A, SPLIT_SPACE, 0, __LINE__);     /* last of them */
    expect_split(tok, 0x200B, SPLIT_REMOVED, 0, __LINE__);   /* zero-width space: Cf */
    expect_split(tok, 0x2029, SPLIT_SPACE, 0, __LINE__);     /* paragraph separator */
    expect_split(tok, 0x202F, SPLIT_SPACE, 0, __LINE__);     /* narrow no-break space */
    expect_split(tok, 0x205F, SPLIT_SPACE, 0, __LINE__);
    expect_split(tok, 0x1680, SPLIT_SPACE, 0, __LINE__);     /* ogham space mark */
    expect_split(tok, 0x180E, SPLIT_REMOVED, 0, __LINE__);   /* Cf, no longer White_Space */
    /* Accents: the Mn of the combining block go, Mc and Me stay (in the word). */
    expect_split(tok, 0x0300, SPLIT_STRIPPED, 0, __LINE__);
    expect_split(tok, 0x036F, SPLIT_STRIPPED, 0, __LINE__);
    expect_split(tok, 0x0903, SPLIT_IN_WORD, 0, __LINE__);   /* Mc */
    expect_split(tok, 0x20DD, SPLIT_IN_WORD, 0, __LINE__);   /* Me */
    expect_split(tok, 0x02FF, SPLIT_IN_WORD, 0, __LINE__);   /* Sk, just before the block */
    clattn_tokenizer_destroy(&tok);
}

static void special_tokens_in_text(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    EXPECT(tok, "hello [SEP] world", CLS, HELLO, SEP, WORLD, SEP);
    EXPECT(tok, "hello[SEP]world", CLS, HELLO, SEP, WORLD, SEP);
    EXPECT(tok, "[CLS]", CLS, CLS, SEP);
    EXPECT(tok, "[UNK][MASK][PAD]", CLS, UNK, MASK, PAD, SEP);
    /* Case-sensitive and exact: these are plain text. */
    EXPECT(tok, "[sep]", CLS, LBR, SEPW, RBR, SEP);
    EXPECT(tok, "[SEP", CLS, LBR, SEPW, SEP);
    EXPECT(tok, "[ SEP]", CLS, LBR, SEPW, RBR, SEP);
    EXPECT(tok, "[cls]", CLS, LBR, CL, CS, RBR, SEP);
    /* Special tokens are matched before cleaning: a zero-width space inside breaks them. */
    EXPECT(tok, "[SE\xe2\x80\x8bP]", CLS, LBR, SEPW, RBR, SEP);
    clattn_tokenizer_destroy(&tok);
}

static void truncation_and_capacity(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    EXPECT_MAX(tok, "hello world hello", 4, CLS, HELLO, WORLD, SEP);
    EXPECT_MAX(tok, "hello world hello", 5, CLS, HELLO, WORLD, HELLO, SEP);
    EXPECT_MAX(tok, "hello world hello", 6, CLS, HELLO, WORLD, HELLO, SEP);
    EXPECT_MAX(tok, "hello world hello", 2, CLS, SEP);
    EXPECT_MAX(tok, "unaffable", 3, CLS, UN, SEP); /* truncation cuts inside a word */
    EXPECT_MAX(tok, "hello [SEP] world", 3, CLS, HELLO, SEP);
    EXPECT_MAX(tok, "hello world", SIZE_MAX, CLS, HELLO, WORLD, SEP);

    int32_t ids[8];
    memset(ids, 0x55, sizeof(ids));
    size_t count = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, "hello world", 11, 1, ids, 8, &count),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "max_length is 1"));
    assert_int_equal(count, 0);
    /* The count alone. */
    assert_int_equal(clattn_tokenizer_encode(tok, "hello world", 11, 0, NULL, 0, &count),
                     CLATTN_OK);
    assert_int_equal(count, 4);
    /* Too small: nothing written, the count given. */
    count = 0;
    assert_int_equal(clattn_tokenizer_encode(tok, "hello world", 11, 0, ids, 3, &count),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(count, 4);
    assert_non_null(strstr(clattn_last_error(NULL),
                           "clattn_tokenizer_encode: invalid argument: ids has room for 3 ids "
                           "but the encoding has 4"));
    for (int i = 0; i < 8; i++)
        assert_int_equal(ids[i], 0x55555555);
    /* Exactly enough: nothing past the end. */
    assert_int_equal(clattn_tokenizer_encode(tok, "hello world", 11, 0, ids, 4, &count),
                     CLATTN_OK);
    assert_int_equal(ids[3], SEP);
    assert_int_equal(ids[4], 0x55555555);
    clattn_tokenizer_destroy(&tok);
}

static void invalid_utf8_and_arguments(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    static const struct {
        const char *bytes;
        size_t length, at;
        const char *shown;
    } bad[] = {
        {"ab\xff", 3, 2, "FF"},
        {"\x80" "a", 2, 0, "80 61"},                  /* stray continuation byte */
        {"a\xc0\x80", 3, 1, "C0 80"},                 /* overlong NUL */
        {"\xe0\x80\xaf", 3, 0, "E0 80 AF"},           /* overlong / */
        {"ok \xed\xa0\x80", 6, 3, "ED A0 80"},        /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, 0, "F4 90 80 80"},    /* U+110000 */
        {"hello \xe4\xb8", 8, 6, "E4 B8"},            /* truncated */
        {"\xe4\xb8" "a", 3, 0, "E4 B8 61"},           /* bad continuation */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int32_t ids[16] = {0};
        size_t count = 777;
        assert_int_equal(clattn_tokenizer_encode(tok, bad[i].bytes, bad[i].length, 0, ids, 16,
                                                 &count),
                         CLATTN_ERROR_INVALID_ARGUMENT);
        char want[128];
        snprintf(want, sizeof(want), "clattn_tokenizer_encode: invalid argument: the text is "
                 "not valid UTF-8 at byte %zu (bytes %s)", bad[i].at, bad[i].shown);
        if (strcmp(clattn_last_error(NULL), want) != 0) {
            print_error("case %zu: got '%s'\n want '%s'\n", i, clattn_last_error(NULL), want);
            fail();
        }
        assert_int_equal(count, 777);
        assert_int_equal(ids[0], 0);
    }
    /* The length bounds the text: a valid prefix of a longer buffer is fine. */
    expect_ids_n(tok, "hello\xff", 5, 0, (const int32_t[]){CLS, HELLO, SEP}, 3, __FILE__,
                 __LINE__);

    int32_t ids[8];
    size_t count;
    assert_status_msg(NULL, clattn_tokenizer_encode(NULL, "a", 1, 0, ids, 8, &count),
                      CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_tokenizer_encode: invalid argument: tok is NULL");
    assert_status_msg(NULL, clattn_tokenizer_encode(tok, NULL, 1, 0, ids, 8, &count),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text is NULL but length is 1");
    assert_status_msg(NULL, clattn_tokenizer_encode(tok, "a", 1, 0, ids, 8, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "count is NULL");
    assert_status_msg(NULL, clattn_tokenizer_encode(tok, "a", 1, 0, NULL, 8, &count),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ids is NULL but capacity is 8");
    assert_int_equal(clattn_tokenizer_encode(tok, NULL, 0, 0, ids, 8, &count), CLATTN_OK);
    assert_int_equal(count, 2);
    assert_status_msg(NULL, clattn_tokenizer_load(NULL, "x"), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_tokenizer_load: invalid argument: tok is NULL");
    clattn_tokenizer *t2 = tok;
    assert_status_msg(NULL, clattn_tokenizer_load(&t2, NULL), CLATTN_ERROR_INVALID_ARGUMENT,
                      "clattn_tokenizer_load: invalid argument: path is NULL");
    assert_null(t2);
    clattn_tokenizer_destroy(&tok);
}

/* Seeded random bytes (mostly UTF-8-like) never crash the tokenizer and give either ids that
 * start with [CLS] and end with [SEP] or the invalid-UTF-8 error. */
static void hostile_bytes(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    test_rng rng = {0x70ce1234};
    static const unsigned char alphabet[] = {'a', 'b', ' ', '[', 'S', 'E', 'P', ']', 0x00, 0x0b,
                                             0x80, 0xbf, 0xc3, 0xa9, 0xe4, 0xb8, 0xad, 0xed,
                                             0xa0, 0xf0, 0x9f, 0x98, 0x80, 0xff, 0xcc, 0x81};
    unsigned char buf[64];
    int32_t ids[128];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(test_rng_next(&rng) % sizeof(buf));
        for (size_t i = 0; i < n; i++)
            buf[i] = alphabet[test_rng_next(&rng) % sizeof(alphabet)];
        size_t count = 0;
        clattn_status s = clattn_tokenizer_encode(tok, (const char *)buf, n, 0, ids, 128, &count);
        if (s == CLATTN_OK) {
            assert_true(count >= 2 && count <= n + 2);
            assert_int_equal(ids[0], CLS);
            assert_int_equal(ids[count - 1], SEP);
            for (size_t i = 0; i < count; i++)
                assert_true(ids[i] >= 0 && ids[i] < 31);
        } else {
            assert_int_equal(s, CLATTN_ERROR_INVALID_ARGUMENT);
            assert_non_null(strstr(clattn_last_error(NULL), "not valid UTF-8"));
        }
    }
    clattn_tokenizer_destroy(&tok);
}

/* One tokenizer, several threads encoding at once: each gets the single-threaded ids. */
typedef struct thread_job {
    const clattn_tokenizer *tok;
    int mismatches;
} thread_job;

static const char *const thread_texts[] = {"hello [SEP] world", "Unaffable, CAFÉ! 中文 aaa",
                                           "naïve résumé\x0b?", "xyz [cls] the thes"};
static const int32_t thread_want[][8] = {
    {CLS, HELLO, SEP, WORLD, SEP},
    {CLS, UN, AFF, ABLE, COMMA, CAFE, BANG, ZHONG},
    {CLS, NAIVE, RESUME, QUEST, SEP}, /* VT is removed: "resume?" -> resume, ? */
    {CLS, UNK, LBR, CL, CS, RBR, THE, THE},
};

static int encode_thread(void *arg)
{
    thread_job *job = arg;
    int32_t ids[64];
    size_t count;
    for (int i = 0; i < 2000; i++) {
        size_t t = (size_t)i % 4;
        if (clattn_tokenizer_encode(job->tok, thread_texts[t], strlen(thread_texts[t]), 0, ids,
                                    64, &count) != CLATTN_OK ||
            memcmp(ids, thread_want[t], sizeof(int32_t) * (count < 8 ? count : 8)) != 0)
            job->mismatches++;
    }
    return 0;
}

static void concurrent_encoding(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("vocab.txt"));
    /* The expectations, single-threaded first. */
    int32_t ids[64];
    size_t count;
    for (size_t t = 0; t < 4; t++) {
        assert_int_equal(clattn_tokenizer_encode(tok, thread_texts[t], strlen(thread_texts[t]),
                                                 0, ids, 64, &count),
                         CLATTN_OK);
        assert_memory_equal(ids, thread_want[t], sizeof(int32_t) * (count < 8 ? count : 8));
    }
    thrd_t threads[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tok, 0};
        assert_int_equal(thrd_create(&threads[i], encode_thread, &jobs[i]), thrd_success);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(thrd_join(threads[i], NULL), thrd_success);
        assert_int_equal(jobs[i].mismatches, 0);
    }
    clattn_tokenizer_destroy(&tok);
}

/* ---- tokenizer.json: its own settings and added-token flags ---- */

static void tokenizer_json_settings(void **state)
{
    (void)state;
    clattn_tokenizer *tok = load(fixture("tokenizer.json"));
    assert_int_equal(clattn_tokenizer_vocab_size(tok), 34); /* 31 + the added ids 31..33 */
    assert_int_equal(clattn_tokenizer_max_length(tok), 6);   /* truncation.max_length */
    assert_int_equal(clattn_tokenizer_token_id(tok, "<new>"), NEW);
    assert_string_equal(clattn_tokenizer_token(tok, MYTOKEN), "MyToken");
    /* lowercase false, strip_accents null: neither lower-casing nor accent stripping. */
    EXPECT(tok, "hello", CLS, HELLO, SEP);
    EXPECT(tok, "Hello", CLS, UNK, SEP);
    EXPECT(tok, "café", CLS, UNK, SEP);
    EXPECT(tok, "a中a", CLS, A, ZHONG, A, SEP);
    /* The default maximum length (6) applies; 0 asks for it. */
    EXPECT(tok, "hello hello hello hello hello", CLS, HELLO, HELLO, HELLO, HELLO, SEP);
    EXPECT_MAX(tok, "hello hello hello hello hello", 100, CLS, HELLO, HELLO, HELLO, HELLO,
               HELLO, SEP);
    /* single_word: only where no word character touches it. */
    EXPECT(tok, "a <new> a", CLS, A, NEW, A, SEP);
    EXPECT_MAX(tok, "a<new>a", 100, CLS, A, UNK, UNK, UNK, A, SEP);
    EXPECT(tok, "<new>", CLS, NEW, SEP);
    EXPECT(tok, "(<new>)", CLS, UNK, NEW, UNK, SEP);
    /* A normalized added token is found after normalisation (here: cleaning). */
    EXPECT(tok, "My\xe2\x80\x8bToken hello", CLS, MYTOKEN, HELLO, SEP);
    EXPECT(tok, "xMyTokenx", CLS, UNK, MYTOKEN, UNK, SEP);
    /* lstrip and rstrip take spaces into the token (no effect on BERT's ids). */
    EXPECT(tok, "hello [MASK] <r> a", CLS, HELLO, MASK, RTOK, A, SEP);
    clattn_tokenizer_destroy(&tok);
}

static void folder_loading(void **state)
{
    (void)state;
    /* A folder with only vocab.txt, and a sentence_bert_config.json. */
    size_t vocab_size, json_size;
    char *vocab = (char *)test_read_file(fixture("vocab.txt"), &vocab_size);
    assert_int_equal(mkdir(temp_path("m1"), 0700), 0);
    write_file(temp_path("m1/vocab.txt"), vocab, vocab_size);
    write_text(temp_path("m1/sentence_bert_config.json"), "{\"max_seq_length\": 3}");
    clattn_tokenizer *tok = load(temp_path("m1"));
    assert_int_equal(clattn_tokenizer_max_length(tok), 3);
    EXPECT(tok, "hello world", CLS, HELLO, SEP);
    clattn_tokenizer_destroy(&tok);
    /* config.json's max_position_embeddings when there is no sentence_bert_config.json. */
    assert_int_equal(remove(temp_path("m1/sentence_bert_config.json")), 0);
    write_text(temp_path("m1/config.json"), "{\"max_position_embeddings\": 512}");
    tok = load(temp_path("m1"));
    assert_int_equal(clattn_tokenizer_max_length(tok), 512);
    clattn_tokenizer_destroy(&tok);
    /* tokenizer.json wins over vocab.txt, sentence_bert_config over its truncation. */
    char *json = (char *)test_read_file(fixture("tokenizer.json"), &json_size);
    write_file(temp_path("m1/tokenizer.json"), json, json_size);
    write_text(temp_path("m1/sentence_bert_config.json"), "{\"max_seq_length\": 256}");
    tok = load(temp_path("m1"));
    assert_int_equal(clattn_tokenizer_max_length(tok), 256);
    assert_int_equal(clattn_tokenizer_vocab_size(tok), 34);
    clattn_tokenizer_destroy(&tok);
    write_text(temp_path("m1/sentence_bert_config.json"), "{\"max_seq_length\": \"x\"}");
    expect_load_error(temp_path("m1"), CLATTN_ERROR_FORMAT,
                      "sentence_bert_config.json: \"max_seq_length\" is not an integer");
    free(vocab);
    free(json);
    const char *files[] = {"m1/vocab.txt", "m1/tokenizer.json", "m1/sentence_bert_config.json",
                           "m1/config.json"};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(remove(temp_path(files[i])), 0);
    expect_load_error(temp_path("m1"), CLATTN_ERROR_IO,
                      "the folder holds neither tokenizer.json nor vocab.txt");
    assert_int_equal(rmdir(temp_path("m1")), 0);
}

static void malformed_files(void **state)
{
    (void)state;
    expect_load_error(temp_path("absent.json"), CLATTN_ERROR_IO,
                      "absent.json: cannot open: No such file or directory");
    static const struct {
        const char *name, *text, *needle;
        clattn_status status;
    } cases[] = {
        {"empty.txt", "", "the vocabulary is empty", CLATTN_ERROR_FORMAT},
        {"dup.txt", "[UNK]\n[CLS]\n[SEP]\nhello\nhello\n", "token 'hello' appears twice (ids 3 "
         "and 4)", CLATTN_ERROR_FORMAT},
        {"blank.txt", "[UNK]\n\n[CLS]\n[SEP]\n", "the token of id 1 is empty",
         CLATTN_ERROR_FORMAT},
        {"nounk.txt", "[CLS]\n[SEP]\nhello\n", "the unknown token '[UNK]' is not in the "
         "vocabulary", CLATTN_ERROR_FORMAT},
        {"nosep.txt", "[UNK]\n[CLS]\nhello\n", "the separator token '[SEP]' is not in the "
         "vocabulary", CLATTN_ERROR_FORMAT},
        {"badutf8.txt", "[UNK]\n[CLS]\n[SEP]\nh\xc3\n", "the token of id 3 is not UTF-8",
         CLATTN_ERROR_FORMAT},
        {"bad.json", "{\"model\": ", "invalid JSON", CLATTN_ERROR_FORMAT},
        {"array.json", "[1, 2]", "the top level is not a JSON object", CLATTN_ERROR_FORMAT},
        {"nomodel.json", "{}", "\"model\" is missing or not an object", CLATTN_ERROR_FORMAT},
        {"novocab.json", "{\"model\": {\"type\": \"WordPiece\"}}",
         "\"model\".\"vocab\" is missing or not an object", CLATTN_ERROR_FORMAT},
        {"wordlevel.json", "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}",
         "model type 'WordLevel' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {"gap.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0, \"a\": 2}}}",
         "token 'a' has id 2; the ids of 2 tokens must be 0..1", CLATTN_ERROR_FORMAT},
        {"dupid.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0, \"a\": 0}}}",
         "id 0 is given to both '[UNK]' and 'a'", CLATTN_ERROR_FORMAT},
        {"strid.json", "{\"model\": {\"vocab\": {\"[UNK]\": \"0\"}}}",
         "the id of vocabulary entry '[UNK]' is not an integer", CLATTN_ERROR_FORMAT},
        {"dupkey.json", "{\"model\": {\"vocab\": {\"a\": 0, \"a\": 1}}}", "invalid JSON",
         CLATTN_ERROR_FORMAT},
        {"norm.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"normalizer\": {\"type\": "
         "\"NFKD\"}}", "normalizer type 'NFKD' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {"normbool.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"normalizer\": {\"type\": "
         "\"BertNormalizer\", \"lowercase\": 1}}", "must be booleans", CLATTN_ERROR_FORMAT},
        {"pre.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"normalizer\": null}",
         "pre_tokenizer type '(none)' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {"added.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"pre_tokenizer\": {\"type\": "
         "\"BertPreTokenizer\"}, \"added_tokens\": [{\"id\": 0}]}",
         "added_tokens[0] needs an integer \"id\"", CLATTN_ERROR_FORMAT},
        {"post.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"pre_tokenizer\": {\"type\": "
         "\"BertPreTokenizer\"}, \"post_processor\": {\"type\": \"WordLevel\"}}",
         "post_processor type 'WordLevel' is not supported", CLATTN_ERROR_UNSUPPORTED},
        {"roberta.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"pre_tokenizer\": "
         "{\"type\": \"BertPreTokenizer\"}, \"post_processor\": {\"type\": "
         "\"RobertaProcessing\"}}",
         "RobertaProcessing needs \"cls\" and \"sep\" as [token, id]", CLATTN_ERROR_FORMAT},
        {"padid.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2}}, "
         "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"padding\": {\"pad_id\": 9}}",
         "\"padding\".\"pad_id\" is not a token's id", CLATTN_ERROR_FORMAT},
        {"postid.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0}}, \"pre_tokenizer\": {\"type\": "
         "\"BertPreTokenizer\"}, \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": "
         "[\"[CLS]\", 7], \"sep\": [\"[SEP]\", 0]}}", "the [CLS] id 7 or [SEP] id 0 is not",
         CLATTN_ERROR_FORMAT},
        {"trunc.json", "{\"model\": {\"vocab\": {\"[UNK]\": 0, \"[CLS]\": 1, \"[SEP]\": 2}}, "
         "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"truncation\": {\"max_length\": "
         "1}}", "\"truncation\".\"max_length\" is not an integer of at least 2",
         CLATTN_ERROR_FORMAT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_text(temp_path(cases[i].name), cases[i].text);
        expect_load_error(temp_path(cases[i].name), cases[i].status, cases[i].needle);
    }
    write_file(temp_path("nul.txt"), "[UNK]\n[C\0LS]\n", 13);
    expect_load_error(temp_path("nul.txt"), CLATTN_ERROR_FORMAT, "the file holds a NUL byte");
    /* The smallest valid tokenizer.json: BertProcessing ids, no normaliser. */
    write_text(temp_path("small.json"),
               "{\"model\": {\"vocab\": {\"[UNK]\": 0, \"x\": 1, \"Y\": 2}}, \"normalizer\": "
               "null, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, \"post_processor\": "
               "{\"type\": \"BertProcessing\", \"cls\": [\"x\", 1], \"sep\": [\"Y\", 2]}}");
    clattn_tokenizer *tok = load(temp_path("small.json"));
    EXPECT(tok, "Y x\xe2\x80\x8b", 1, 2, 0, 2); /* no cleaning: x + ZWSP is one [UNK] */
    clattn_tokenizer_destroy(&tok);
}

/* Seeded byte mutations of the fixture tokenizer.json: loading either fails with a message or
 * gives a tokenizer that encodes; nothing crashes or leaks (run under the sanitizers too). */
static void fuzzed_tokenizer_json(void **state)
{
    (void)state;
    size_t size;
    unsigned char *orig = test_read_file(fixture("tokenizer.json"), &size);
    unsigned char *buf = malloc(size);
    assert_non_null(buf);
    test_rng rng = {0xf022};
    static const char bytes[] = "{}[]\":,0123456789-tfn# \\\x80\xff";
    size_t loaded = 0;
    for (int iter = 0; iter < 400; iter++) {
        memcpy(buf, orig, size);
        int edits = 1 + (int)(test_rng_next(&rng) % 4);
        for (int e = 0; e < edits; e++)
            buf[test_rng_next(&rng) % size] = (unsigned char)bytes[test_rng_next(&rng) %
                                                                  (sizeof(bytes) - 1)];
        size_t n = iter % 10 == 9 ? (size_t)(test_rng_next(&rng) % size) : size; /* truncated */
        write_file(temp_path("fuzz.json"), (const char *)buf, n);
        clattn_tokenizer *tok = NULL;
        clattn_status s = clattn_tokenizer_load(&tok, temp_path("fuzz.json"));
        if (s) {
            assert_null(tok);
            assert_non_null(strstr(clattn_last_error(NULL), "clattn_tokenizer_load: "));
            continue;
        }
        loaded++;
        int32_t ids[64];
        size_t count;
        const char *texts[] = {"hello [SEP] world", "unaffable, Café 中文", "a <new> MyToken <r>"};
        for (size_t t = 0; t < 3; t++) {
            s = clattn_tokenizer_encode(tok, texts[t], strlen(texts[t]), 0, ids, 64, &count);
            assert_int_equal(s, CLATTN_OK);
            assert_true(count >= clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE));
        }
        clattn_tokenizer_destroy(&tok);
    }
    assert_int_equal(remove(temp_path("fuzz.json")), 0);
    print_message("fuzzed tokenizer.json: %zu of 400 mutants loaded\n", loaded);
    free(buf);
    free(orig);
}

/* ---- the real model against Hugging Face ---- */

/* Skips (cmocka) when the model is absent, or fails when CLATTN_REQUIRE_REAL_MODEL=1. */
static clattn_tokenizer *real_model_or_skip(void)
{
    return load(test_real_model_or_skip());
}

/*
 * The documented Unicode-version differences (see include/clattn/tokenizer.h and the comment
 * in the file): listed explicitly, so that any other difference, or the loss of one of these,
 * fails real_model_unicode_table; a golden text that differs from Hugging Face's ids is
 * accepted only when it holds one of these code points.
 */
#include "tokenizer_unicode_diffs.h"

static bool in_known_difference(uint32_t cp)
{
    size_t lo = 0, hi = sizeof(known_diffs) / sizeof(known_diffs[0]);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < known_diffs[mid][0])
            hi = mid;
        else if (cp > known_diffs[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static json_t *load_golden(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer/%s", GOLDEN_DIR, name);
    json_error_t error;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &error);
    if (!root) {
        print_error("%s: %s (line %d)\n", path, error.text, error.line);
        fail();
    }
    return root;
}

/* Marks [lo, hi] in a per-code-point array. */
static void mark_ranges(const json_t *ranges, unsigned char *what, unsigned char value)
{
    assert_true(json_is_array(ranges));
    for (size_t i = 0; i < json_array_size(ranges); i++) {
        const json_t *r = json_array_get(ranges, i);
        json_int_t lo = json_integer_value(json_array_get(r, 0));
        json_int_t hi = json_integer_value(json_array_get(r, 1));
        assert_true(lo >= 0 && lo <= hi && hi < 0x110000);
        for (json_int_t c = lo; c <= hi; c++)
            what[c] = value;
    }
}

/* Every code point through our normaliser and pre-tokeniser, against Hugging Face's. */
static void real_model_unicode_table(void **state)
{
    (void)state;
    clattn_tokenizer *tok = real_model_or_skip();
    json_t *root = load_golden("unicode.json");
    enum { KEEP = 0, REMOVED = 1, CHINESE = 2, CHANGED = 3 };
    unsigned char *norm = calloc(0x110000, 1), *pre = calloc(0x110000, 1);
    uint32_t **changed = calloc(0x110000, sizeof(*changed));
    assert_non_null(norm);
    assert_non_null(pre);
    assert_non_null(changed);
    mark_ranges(json_object_get(root, "removed"), norm, REMOVED);
    mark_ranges(json_object_get(root, "chinese"), norm, CHINESE);
    mark_ranges(json_object_get(root, "whitespace"), pre, 1);
    mark_ranges(json_object_get(root, "punctuation"), pre, 2);
    const json_t *ch = json_object_get(root, "changed");
    for (size_t i = 0; i < json_array_size(ch); i++) {
        const json_t *e = json_array_get(ch, i);
        json_int_t c = json_integer_value(json_array_get(e, 0));
        const json_t *to = json_array_get(e, 1);
        assert_true(c >= 0 && c < 0x110000);
        norm[c] = CHANGED;
        changed[c] = calloc(json_array_size(to) + 1, sizeof(uint32_t));
        assert_non_null(changed[c]);
        changed[c][0] = (uint32_t)json_array_size(to);
        for (size_t k = 0; k < json_array_size(to); k++)
            changed[c][k + 1] = (uint32_t)json_integer_value(json_array_get(to, k));
    }

    /* CLATTN_TOK_DUMP_DIFFS=FILE writes the differing code points as ranges (to update
     * tokenizer_unicode_diffs.h after a change of Unicode data, once checked by hand). */
    const char *dump_path = getenv("CLATTN_TOK_DUMP_DIFFS");
    FILE *dump = dump_path && *dump_path ? fopen(dump_path, "w") : NULL;
    long run_lo = -1, run_hi = -1;
    size_t diffs = 0, unknown = 0, known_hit = 0;
    uint32_t first_unknown[16];
    clattn__cps out = {0};
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        out.count = 0;
        assert_true(clattn__normalize(&tok->norm, &c, 1, &out));
        bool same;
        switch (norm[c]) {
        case REMOVED: same = out.count == 0; break;
        case CHINESE: same = out.count == 3 && out.data[0] == ' ' && out.data[1] == c &&
                             out.data[2] == ' '; break;
        case CHANGED:
            same = out.count == changed[c][0] &&
                   memcmp(out.data, changed[c] + 1, out.count * sizeof(uint32_t)) == 0;
            break;
        default: same = out.count == 1 && out.data[0] == c; break;
        }
        int our_pre = clattn__is_whitespace(c) ? 1 : clattn__is_punctuation(c) ? 2 : 0;
        same = same && our_pre == pre[c];
        if (!same && dump) {
            if (run_hi == (long)c - 1) {
                run_hi = c;
            } else {
                if (run_lo >= 0)
                    fprintf(dump, "    {0x%04lX, 0x%04lX},\n", run_lo, run_hi);
                run_lo = run_hi = c;
            }
        }
        if (!same) {
            diffs++;
            if (in_known_difference(c)) {
                known_hit++;
            } else {
                if (unknown < 16)
                    first_unknown[unknown] = c;
                unknown++;
            }
        }
    }
    clattn__cps_free(&out);
    if (dump) {
        if (run_lo >= 0)
            fprintf(dump, "    {0x%04lX, 0x%04lX},\n", run_lo, run_hi);
        fclose(dump);
    }
    size_t known_total = 0;
    for (size_t i = 0; i < sizeof(known_diffs) / sizeof(known_diffs[0]); i++)
        known_total += known_diffs[i][1] - known_diffs[i][0] + 1;
    print_message("unicode table: %zu code points differ from Hugging Face's, all %zu of them "
                  "in the %zu documented ranges (%zu code points)\n", diffs, known_hit,
                  sizeof(known_diffs) / sizeof(known_diffs[0]), known_total);
    for (size_t i = 0; i < unknown && i < 16; i++)
        print_error("undocumented difference at U+%04X\n", (unsigned)first_unknown[i]);
    assert_int_equal(unknown, 0);
    /* Every documented code point really differs (the list is not stale or too wide). */
    assert_int_equal(known_hit, known_total);
    for (uint32_t c = 0; c < 0x110000; c++)
        free(changed[c]);
    free(changed);
    free(norm);
    free(pre);
    json_decref(root);
    clattn_tokenizer_destroy(&tok);
}

/* True when the text holds a code point of the documented differences. */
static bool has_known_difference(const char *text, size_t length)
{
    for (size_t i = 0; i < length;) {
        uint32_t cp;
        size_t k = clattn__utf8_decode((const unsigned char *)text + i, length - i, &cp);
        if (k == 0)
            return false;
        if (in_known_difference(cp))
            return true;
        i += k;
    }
    return false;
}

static void compare_golden(const char *name, size_t *cases_out, size_t *agree_out,
                           size_t *known_out)
{
    clattn_tokenizer *tok = real_model_or_skip();
    json_t *root = load_golden(name);
    assert_int_equal(json_integer_value(json_object_get(root, "max_length")), 256);
    const json_t *cases = json_object_get(root, "cases");
    assert_true(json_array_size(cases) > 0);
    size_t agree = 0, known = 0, bad = 0;
    int32_t ids[300];
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "ids");
        assert_true(json_is_string(text) && json_is_array(want));
        size_t count = 0;
        clattn_status s = clattn_tokenizer_encode(tok, json_string_value(text),
                                                  json_string_length(text), 0, ids, 300, &count);
        if (s) {
            print_error("%s case %zu: %s\n", name, i, clattn_last_error(NULL));
            fail();
        }
        bool same = count == json_array_size(want);
        for (size_t k = 0; same && k < count; k++)
            same = ids[k] == json_integer_value(json_array_get(want, k));
        if (same) {
            agree++;
        } else if (has_known_difference(json_string_value(text), json_string_length(text))) {
            known++; /* a documented Unicode-version difference */
        } else {
            if (bad < 10) {
                print_error("%s case %zu differs (%zu ids, want %zu):", name, i, count,
                            json_array_size(want));
                for (size_t k = 0; k < count && k < 24; k++)
                    print_error(" %d", (int)ids[k]);
                print_error("\n  want:");
                for (size_t k = 0; k < json_array_size(want) && k < 24; k++)
                    print_error(" %d", (int)json_integer_value(json_array_get(want, k)));
                print_error("\n");
            }
            bad++;
        }
    }
    print_message("%s: %zu texts, %zu equal to Hugging Face's ids, %zu differ only by the "
                  "documented Unicode-version differences, %zu differ otherwise\n", name,
                  json_array_size(cases), agree, known, bad);
    *cases_out = json_array_size(cases);
    *agree_out = agree;
    *known_out = known;
    json_decref(root);
    clattn_tokenizer_destroy(&tok);
    assert_int_equal(bad, 0);
}

static void real_model_settings(void **state)
{
    (void)state;
    clattn_tokenizer *tok = real_model_or_skip();
    clattn_tokenizer_special sp = clattn_tokenizer_special_ids(tok);
    assert_int_equal(sp.cls, 101);
    assert_int_equal(sp.sep, 102);
    assert_int_equal(sp.pad, 0);
    assert_int_equal(sp.unk, 100);
    assert_int_equal(sp.mask, 103);
    assert_int_equal(clattn_tokenizer_vocab_size(tok), 30522);
    assert_int_equal(clattn_tokenizer_max_length(tok), 256); /* not tokenizer.json's 128 */
    /* By hand: "hello world" is [CLS] hello world [SEP] in BERT's uncased vocabulary. */
    EXPECT(tok, "Hello world", 101, 7592, 2088, 102);
    clattn_tokenizer_destroy(&tok);
}

static void real_model_hand_picked(void **state)
{
    (void)state;
    size_t cases, agree, known;
    compare_golden("hand.json", &cases, &agree, &known);
    /* None of the hand-picked texts holds a code point of the documented differences. */
    assert_int_equal(known, 0);
    assert_int_equal(agree, cases);
}

static void real_model_random(void **state)
{
    (void)state;
    size_t cases, agree, known;
    compare_golden("random.json", &cases, &agree, &known);
    assert_true(cases >= 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vocab_txt_settings),
        cmocka_unit_test(wordpiece_rules),
        cmocka_unit_test(normalisation_rules),
        cmocka_unit_test(range_bounds_of_the_rules),
        cmocka_unit_test(special_tokens_in_text),
        cmocka_unit_test(truncation_and_capacity),
        cmocka_unit_test(invalid_utf8_and_arguments),
        cmocka_unit_test(hostile_bytes),
        cmocka_unit_test(concurrent_encoding),
        cmocka_unit_test(tokenizer_json_settings),
        cmocka_unit_test(folder_loading),
        cmocka_unit_test(malformed_files),
        cmocka_unit_test(fuzzed_tokenizer_json),
        cmocka_unit_test(real_model_settings),
        cmocka_unit_test(real_model_unicode_table),
        cmocka_unit_test(real_model_hand_picked),
        cmocka_unit_test(real_model_random),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
