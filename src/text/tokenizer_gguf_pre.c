/*
 * The pre-tokenizers of GGUF "gpt2" models, by tokenizer.ggml.pre, as llama.cpp's
 * llm_tokenizer_bpe (src/llama-vocab.cpp: LLAMA_VOCAB_PRE_TYPE_* and their regex lists) and
 * unicode_regex_split (src/unicode.cpp) run them: the regexes of a list are applied one after
 * the other, each to every piece the one before left (a regex sees only its piece: lookaheads
 * and `$` stop at the piece's end), and the text between two matches is a piece too.
 *
 * The regexes run through PCRE2 with PCRE2_UTF | PCRE2_UCP. `\s` is spelled as llama.cpp's
 * whitespace set (unicode_set_whitespace: U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), which llama.cpp's own matchers and its
 * std::regex fallback (non-ASCII whitespace mapped to U+000B) both use; `$` matches only at the
 * piece's end (PCRE2_DOLLAR_ENDONLY, as ECMAScript). llama.cpp's GPT-2 regex has no final `\s+`;
 * its hand-written matcher for it (unicode_regex_split_custom_gpt2) behaves as the regex with
 * it, so GPT-2's regex is written here with `|\s+`. \p{L}, \p{N}, \p{P} are PCRE2's tables
 * (Debian 12's 10.42: Unicode 14.0) where llama.cpp has its own (unicode-data.cpp): code points
 * whose category changed between the two versions, and unassigned ones (which llama.cpp's
 * matcher gives a piece each), may split differently.
 */
#include "tokenizer_gguf_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"

/* GPT-2's regex: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+" \
                "|[" WS "]+(?![^" WS "])|[" WS "]+"
/* Llama 3's (with \p{N}{1,3}) and Qwen2's (\p{N}):
 * (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
#define LLAMA3_RE(digits)                                                                     \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+" \
    "|\\p{N}" digits "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+"                  \
    "|[" WS "]+(?![^" WS "])|[" WS "]+"

/* Tekken's (Mistral) and, with the contractions and \p{N}{1,3}, GPT-4o's: a run of "upper case"
 * letters then "lower case" ones, or the other way round (llama.cpp's forms). */
#define UPPER "(?:(?=\\p{L})[^a-z])"
#define LOWER "(?:(?=\\p{L})[^A-Z])"
#define TEKKEN_RE(contractions, digits)                                                         \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" contractions "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER \
    "*" contractions "|" digits "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+"               \
    "|[" WS "]+(?![^" WS "])|[" WS "]+"
/* BLOOM's:  ?[^(\s|.,!?…。，、।۔،)]+ */
#define BLOOM_RE " ?[^(" WS "|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"

/* DeepSeek LLM's letters: llama.cpp's class, its characters written as code points. */
#define DEEPSEEK_LETTERS \
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}" \
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}" \
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}" \
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}" \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}" \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}" \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}" \
    "\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}" \
    "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}" \
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}" \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}" \
    "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}" \
    "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}" \
    "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}" \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}" \
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}" \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}" \
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"

/* llama.cpp runs the regexes without \p{..} on the text with its non-ASCII whitespace replaced by
 * U+000B, so that a class of non-ASCII characters never matches whitespace: NOT_WS before such a
 * class leaves the whitespace out of it (U+3000 of DeepSeek's punctuation, U+1680, U+2000..U+200A,
 * U+2028, U+2029, U+202F, U+205F and U+3000 of its CJK range from U+0800). */
#define NOT_WS "(?![" WS "])"
/* CJK ideographs, a block from U+0800, Hangul (DeepSeek's). */
#define DEEPSEEK_CJK "(?:" NOT_WS "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}])+"

#define MAX_REGEXES 6

/* One pre-tokenizer: the names tokenizer.ggml.pre gives it, its regexes, llama.cpp's
 * settings. */
typedef struct pre_kind {
    const char *names[9];
    const char *regexes[MAX_REGEXES];
    bool ignore_merges, add_bos;
} pre_kind;

static const pre_kind kinds[] = {
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"},
     {LLAMA3_RE("{1,3}")}, true, true},
    {{"dbrx", "smaug-bpe"}, {LLAMA3_RE("{1,3}")}, false, false},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "kormo", "f2llmv2"}, {LLAMA3_RE("")},
     false, false},
    /* Qwen3.5's: Qwen2's with marks joined to letters (\p{M}). */
    {{"qwen35"},
     {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
      "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"},
     false, false},
    /* Mistral's Tekken and GPT-4o's (Llama 4): llama.cpp's forms of \p{Lu}.. \p{Ll}.., where every
     * letter outside A-Z and a-z counts as both upper and lower case. */
    {{"tekken"}, {TEKKEN_RE("", "\\p{N}")}, true, true},
    {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
     {TEKKEN_RE("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?", "\\p{N}{1,3}")},
     false, false},
    /* BLOOM's, Poro's and GPT-3 Finnish's; Viking's splits digits too. */
    {{"bloom", "poro-chat", "gpt3-finnish"}, {BLOOM_RE}, false, false},
    {{"viking"}, {BLOOM_RE, "\\p{N}"}, false, false},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt"},
     {GPT2_RE}, false, false},
    {{"olmo", "exaone4", "a.x-4.0", "mellum", "modern-bert"}, {GPT2_RE}, false, false},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
     {"\\p{N}", GPT2_RE}, false, false},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}, false, false},
    {{"deepseek-llm"},
     {"[\\r\\n]", "[" WS "]?[" DEEPSEEK_LETTERS "]+",
      "[" WS "]?(?:" NOT_WS "[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
      "\\x{3000}-\\x{3002}])+",
      "[" WS "]+$", DEEPSEEK_CJK, "\\p{N}+"},
     false, false},
    {{"deepseek-coder"},
     {"[\\r\\n]", "[" WS "]?\\p{L}+", "[" WS "]?\\p{P}+", DEEPSEEK_CJK, "\\p{N}"}, false, false},
    /* llama.cpp's "default" (and a file without tokenizer.ggml.pre). */
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}, false,
     false},
};

struct clattn__gguf_pre {
    pcre2_code *re[MAX_REGEXES];
    size_t count;
};

void clattn__gguf_pre_free(clattn__gguf_pre *pre)
{
    if (!pre)
        return;
    for (size_t i = 0; i < pre->count; i++)
        pcre2_code_free(pre->re[i]);
    free(pre);
}

static const pre_kind *find_kind(const char *name)
{
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (size_t n = 0; n < 9 && kinds[k].names[n]; n++)
            if (strcmp(kinds[k].names[n], name) == 0)
                return &kinds[k];
    return NULL;
}

clattn_status clattn__gguf_pre_create(clattn__gguf_pre **out, const char *name,
                                      bool *ignore_merges, bool *add_bos, const char *function,
                                      const char *where)
{
    *out = NULL;
    const pre_kind *kind = find_kind(name ? name : "default");
    if (!kind)
        return clattn__fail_in(function, where, CLATTN_ERROR_UNSUPPORTED,
                               "the pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported "
                               "(supported: llama-bpe/llama3, qwen2, qwen35, smollm, gpt-2, "
                               "deepseek-llm, deepseek-coder, starcoder, falcon, mpt, command-r, "
                               "refact, dbrx, olmo, tekken, gpt-4o/llama4, bloom, viking, "
                               "default and their aliases)",
                               name);
    clattn__gguf_pre *pre = calloc(1, sizeof(*pre));
    if (!pre)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the pre-tokenizer");
    for (size_t i = 0; i < MAX_REGEXES && kind->regexes[i]; i++) {
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        pre->re[i] = pcre2_compile((PCRE2_SPTR)kind->regexes[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error,
                                   &error_offset, NULL);
        if (!pre->re[i]) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof(message));
            clattn__gguf_pre_free(pre);
            return clattn__fail_in(function, where, CLATTN_ERROR_UNSUPPORTED,
                                   "PCRE2 cannot compile regex %zu of the pre-tokenizer '%s': "
                                   "%s (at %zu)", i, name ? name : "default",
                                   (const char *)message, (size_t)error_offset);
        }
        pre->count = i + 1;
        /* The JIT is a speed-up only: where it is not available the interpreter runs. */
        (void)pcre2_jit_compile(pre->re[i], PCRE2_JIT_COMPLETE);
    }
    *ignore_merges = kind->ignore_merges;
    *add_bos = kind->add_bos;
    *out = pre;
    return CLATTN_OK;
}

/* A list of pieces as (start, end) byte offsets. */
typedef struct spans {
    size_t (*data)[2];
    size_t count, capacity;
} spans;

static bool spans_push(spans *s, size_t start, size_t end)
{
    if (s->count == s->capacity) {
        size_t cap = s->capacity ? 2 * s->capacity : 64;
        size_t(*grown)[2] = realloc(s->data, cap * sizeof(*grown));
        if (!grown)
            return false;
        s->data = grown;
        s->capacity = cap;
    }
    s->data[s->count][0] = start;
    s->data[s->count][1] = end;
    s->count++;
    return true;
}

/* Splits text[start, end) by re into *out (unicode_regex_split_stl: each match and each gap a
 * piece). */
static bool split_one(const pcre2_code *re, pcre2_match_data *md, const char *text, size_t start,
                      size_t end, spans *out)
{
    const PCRE2_SPTR subject = (PCRE2_SPTR)(text + start);
    size_t length = end - start, at = 0, done = 0;
    while (at < length) {
        int rc = pcre2_match(re, subject, length, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            /* The JIT's stack (or a limit) ran out: once more with the interpreter. */
            rc = pcre2_match(re, subject, length, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                             NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return false;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {
            /* No regex here matches the empty string; were one to, go on after the character. */
            at = m0 + 1;
            while (at < length && ((unsigned char)subject[at] & 0xC0) == 0x80)
                at++;
            continue;
        }
        if (m0 > done && !spans_push(out, start + done, start + m0))
            return false;
        if (!spans_push(out, start + m0, start + m1))
            return false;
        done = at = m1;
    }
    return done >= length || spans_push(out, start + done, end);
}

bool clattn__gguf_pre_split(const clattn__gguf_pre *pre, const char *text, size_t length,
                            bool (*piece)(void *user, size_t start, size_t end), void *user)
{
    if (length == 0)
        return true;
    spans a = {0}, b = {0};
    bool ok = spans_push(&a, 0, length);
    for (size_t r = 0; ok && r < pre->count; r++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(pre->re[r], NULL);
        if (!md) {
            ok = false;
            break;
        }
        b.count = 0;
        for (size_t i = 0; ok && i < a.count; i++)
            ok = split_one(pre->re[r], md, text, a.data[i][0], a.data[i][1], &b);
        pcre2_match_data_free(md);
        spans t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; ok && i < a.count; i++)
        ok = piece(user, a.data[i][0], a.data[i][1]);
    free(a.data);
    free(b.data);
    return ok;
}
