/* Loading a tokenizer: a model folder, a tokenizer.json (jansson) or a vocab.txt. */
#include "tokenizer_internal.h"
#include "tokenizer_unigram.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

static const char load_fn[] = "clattn_tokenizer_load";

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Whether something is at path (a dangling symbolic link is nothing). What it is, is left to
 * clattn__read_file: anything but a regular file (a FIFO, a device, a directory) is refused there,
 * and a FIFO is never waited on. */
static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

/* Reads and parses a JSON file; errors name the path. */
static clattn_status read_json(const char *path, json_t **root)
{
    unsigned char *bytes = NULL;
    size_t size = 0;
    clattn_status s = clattn__read_file(load_fn, path, &bytes, &size);
    if (s)
        return s;
    json_error_t error;
    *root = json_loadb((const char *)bytes, size, JSON_REJECT_DUPLICATES, &error);
    free(bytes);
    if (!*root) {
        if (json_error_code(&error) == json_error_out_of_memory)
            return clattn__fail_in(load_fn, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "out of memory while parsing the JSON");
        for (char *c = error.text; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                *c = '?';
        return clattn__fail_in(load_fn, path, CLATTN_ERROR_FORMAT,
                               "invalid JSON: %s (line %d, column %d)", error.text, error.line,
                               error.column);
    }
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return clattn__fail_in(load_fn, path, CLATTN_ERROR_FORMAT,
                               "the top level is not a JSON object");
    }
    return CLATTN_OK;
}

/* An optional boolean member (absent or null: `fallback`); false on a wrong type. */
static bool get_bool(const json_t *obj, const char *key, bool fallback, bool *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = fallback;
        return true;
    }
    if (!json_is_boolean(v))
        return false;
    *out = json_is_true(v);
    return true;
}

/* Decodes a UTF-8 string into new code points. */
static bool to_cps(const char *s, size_t length, uint32_t **out, size_t *n)
{
    *out = malloc((length ? length : 1) * sizeof(**out));
    if (!*out)
        return false;
    *n = 0;
    for (size_t i = 0; i < length;) {
        size_t k = clattn__utf8_decode((const unsigned char *)s + i, length - i, &(*out)[*n]);
        if (k == 0) {
            free(*out);
            *out = NULL;
            return false;
        }
        i += k;
        (*n)++;
    }
    return true;
}

/* Adds an added token; content must be valid UTF-8 without NUL (checked by the caller). */
static clattn_status add_token(clattn_tokenizer *tok, const char *where, const char *content,
                               int32_t id, bool single_word, bool lstrip, bool rstrip,
                               bool normalized, bool special)
{
    clattn__added_token *grown =
        realloc(tok->added, (tok->added_count + 1) * sizeof(*tok->added));
    if (!grown)
        return clattn__fail_in(load_fn, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the added tokens");
    tok->added = grown;
    clattn__added_token *t = &tok->added[tok->added_count];
    memset(t, 0, sizeof(*t));
    tok->added_count++;
    t->id = id;
    t->single_word = single_word;
    t->lstrip = lstrip;
    t->rstrip = rstrip;
    t->normalized = normalized;
    t->special = special;
    size_t length = strlen(content);
    t->text = malloc(length + 1);
    if (!t->text || !to_cps(content, length, &t->content, &t->length))
        return clattn__fail_in(load_fn, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate an added token");
    memcpy(t->text, content, length + 1);
    if (normalized) {
        clattn__cps norm = {0};
        if (!clattn__tokenizer_normalize(tok, t->content, t->length, &norm)) {
            clattn__cps_free(&norm);
            return clattn__fail_in(load_fn, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "cannot allocate an added token");
        }
        t->normalized_content = norm.data;
        t->normalized_length = norm.count;
        tok->has_normalized_added = true;
    }
    if (id >= 0 && (size_t)id + 1 > tok->vocab_size)
        tok->vocab_size = (size_t)id + 1;
    return CLATTN_OK;
}

/* The defaults of BertTokenizerFast for a vocab.txt. */
static void bert_defaults(clattn_tokenizer *tok)
{
    tok->norm = (clattn__normalizer){true, true, true, true, true, false};
    tok->max_length = SIZE_MAX;
}

/* Looks up a required special token in the vocabulary (or the added tokens). */
static clattn_status require_token(clattn_tokenizer *tok, const char *where, const char *name,
                                   const char *role, int32_t *id)
{
    *id = clattn_tokenizer_token_id(tok, name);
    if (*id < 0)
        return clattn__fail_in(load_fn, where, CLATTN_ERROR_FORMAT,
                               "the %s token '%s' is not in the vocabulary", role, name);
    return CLATTN_OK;
}

static clattn_status load_vocab_txt(clattn_tokenizer *tok, const char *path)
{
    unsigned char *bytes = NULL;
    size_t size = 0;
    clattn_status s = clattn__read_file(load_fn, path, &bytes, &size);
    if (s)
        return s;
    if (memchr(bytes, '\0', size)) {
        free(bytes);
        return clattn__fail_in(load_fn, path, CLATTN_ERROR_FORMAT, "the file holds a NUL byte");
    }
    /* Lines as Rust's BufRead::lines() splits them (a last line without "\n" counts), each
     * with its trailing whitespace removed (trim_end); line k (from 0) is id k, so messages
     * about an id name the line (id + 1). */
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        if (bytes[i] == '\n')
            lines++;
    if (size > 0 && bytes[size - 1] != '\n')
        lines++;
    const char **tokens = malloc((lines ? lines : 1) * sizeof(*tokens));
    size_t *lengths = malloc((lines ? lines : 1) * sizeof(*lengths));
    if (!tokens || !lengths)
        s = clattn__fail_in(load_fn, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "cannot allocate a vocabulary of %zu entries", lines);
    size_t start = 0;
    for (size_t line = 0; !s && line < lines; line++) {
        size_t end = start;
        while (end < size && bytes[end] != '\n')
            end++;
        size_t stop = end;
        while (stop > start && (bytes[stop - 1] == ' ' || bytes[stop - 1] == '\t' ||
                                bytes[stop - 1] == '\r' || bytes[stop - 1] == '\v' ||
                                bytes[stop - 1] == '\f'))
            stop--;
        tokens[line] = (const char *)bytes + start;
        lengths[line] = stop - start;
        start = end + 1;
    }
    if (!s)
        s = clattn__vocab_build(&tok->vocab, tokens, lengths, NULL, lines, load_fn, path);
    free(tokens);
    free(lengths);
    free(bytes);
    if (s)
        return s;
    tok->vocab_size = tok->vocab.count;
    bert_defaults(tok);
    if ((s = clattn__wordpiece_init(&tok->wp, "##", 100, load_fn, path)))
        return s;
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (size_t i = 0; i < 5; i++) {
        int32_t id = clattn__vocab_find(&tok->vocab, specials[i], strlen(specials[i]));
        if (id >= 0 && (s = add_token(tok, path, specials[i], id, false, false, false, false,
                                      true)))
            return s;
    }
    if ((s = require_token(tok, path, "[UNK]", "unknown", &tok->wp.unk)) ||
        (s = require_token(tok, path, "[CLS]", "classifier", &tok->special.cls)) ||
        (s = require_token(tok, path, "[SEP]", "separator", &tok->special.sep)))
        return s;
    tok->special.unk = tok->wp.unk;
    /* BertTokenizerFast's template: [CLS] A [SEP] B [SEP]. */
    tok->kind = CLATTN__MODEL_WORDPIECE;
    return clattn__post_processor_bert(&tok->post, tok->special.cls, tok->special.sep, load_fn,
                                       path);
}

static bool is_id(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX;
}

#define FORMAT_FAIL(...) clattn__fail_in(load_fn, path, CLATTN_ERROR_FORMAT, __VA_ARGS__)

/* "model"."vocab" (an object of token: id) into tok->vocab through clattn__vocab_build. */
static clattn_status read_vocab(clattn_tokenizer *tok, const json_t *vocab, const char *path)
{
    size_t count = json_object_size(vocab), k = 0;
    const char **tokens = malloc((count ? count : 1) * sizeof(*tokens));
    int32_t *ids = malloc((count ? count : 1) * sizeof(*ids));
    clattn_status s = CLATTN_OK;
    if (!tokens || !ids)
        s = clattn__fail_in(load_fn, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "cannot allocate a vocabulary of %zu entries", count);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)vocab, key, value) {
        if (s || k == count)
            break;
        if (!json_is_integer(value) || json_integer_value(value) < 0 ||
            json_integer_value(value) > INT32_MAX) {
            s = FORMAT_FAIL("the id of vocabulary entry '%.40s' is not an integer in 0..%d", key,
                            INT32_MAX);
            break;
        }
        tokens[k] = key;
        ids[k++] = (int32_t)json_integer_value(value);
    }
    if (!s)
        s = clattn__vocab_build(&tok->vocab, tokens, NULL, ids, k, load_fn, path);
    free(tokens);
    free(ids);
    return s;
}

static clattn_status load_tokenizer_json(clattn_tokenizer *tok, const char *path)
{
    json_t *root = NULL;
    clattn_status s = read_json(path, &root);
    if (s)
        return s;
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab");
    const char *type = json_string_value(json_object_get(model, "type"));
    bool bpe = type && strcmp(type, "BPE") == 0; /* byte-level BPE: tokenizer_bpe_load.c */
    const char *unk = NULL;
    if (!json_is_object(model)) {
        s = FORMAT_FAIL("\"model\" is missing or not an object");
    } else if (type && strcmp(type, "Unigram") == 0) {
        /* The model, its normaliser and pre-tokeniser (tokenizer_unigram.c); the rest below. */
        tok->kind = CLATTN__MODEL_UNIGRAM;
        s = clattn__unigram_load(&tok->unigram, &tok->vocab, root, &tok->special.unk, load_fn,
                                 path);
        tok->vocab_size = tok->vocab.count;
        if (s)
            goto done;
        goto added_tokens;
    } else if (type && strcmp(type, "WordPiece") != 0 && !bpe) {
        s = clattn__fail_in(load_fn, path, CLATTN_ERROR_UNSUPPORTED,
                            "model type '%s' is not supported (WordPiece, BPE or Unigram)", type);
    } else if (!json_is_object(vocab)) {
        s = FORMAT_FAIL("\"model\".\"vocab\" is missing or not an object");
    }
    if (s)
        goto done;

    tok->kind = bpe ? CLATTN__MODEL_BPE : CLATTN__MODEL_WORDPIECE;
    /* The vocabulary: ids 0..n-1, each once. */
    if ((s = read_vocab(tok, vocab, path)))
        goto done;
    tok->vocab_size = tok->vocab.count;

    /* BPE's settings and pre-tokeniser, or WordPiece's settings. */
    const json_t *v = json_object_get(model, "continuing_subword_prefix");
    if (bpe && (s = clattn__bpe_load(tok, path, model, json_object_get(root, "pre_tokenizer"))))
        goto done;
    if (v && !json_is_null(v) && !json_is_string(v)) {
        s = FORMAT_FAIL("\"model\".\"continuing_subword_prefix\" is not a string");
        goto done;
    }
    const char *prefix = json_is_string(v) ? json_string_value(v) : "##";
    v = json_object_get(model, "max_input_chars_per_word");
    size_t max_input_chars_per_word = 100;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            s = FORMAT_FAIL("\"model\".\"max_input_chars_per_word\" is not a non-negative "
                            "integer");
            goto done;
        }
        max_input_chars_per_word = (size_t)json_integer_value(v);
    }
    if ((s = clattn__wordpiece_init(&tok->wp, prefix, max_input_chars_per_word, load_fn, path)))
        goto done;
    v = json_object_get(model, "unk_token");
    if (v && !json_is_null(v) && !json_is_string(v)) {
        s = FORMAT_FAIL("\"model\".\"unk_token\" is not a string");
        goto done;
    }
    unk = json_is_string(v) ? json_string_value(v) : "[UNK]";

    /* The normaliser. */
    const json_t *norm = json_object_get(root, "normalizer");
    const char *ntype = json_string_value(json_object_get(norm, "type"));
    if (!norm || json_is_null(norm)) {
        tok->norm = (clattn__normalizer){false, false, false, false, false, false};
    } else if (ntype && strcmp(ntype, "NFC") == 0) {
        tok->norm = (clattn__normalizer){.enabled = true, .nfc = true};
    } else {
        if (!json_is_object(norm) || !ntype || strcmp(ntype, "BertNormalizer") != 0) {
            s = clattn__fail_in(load_fn, path, CLATTN_ERROR_UNSUPPORTED,
                                "normalizer type '%s' is not supported (BertNormalizer or NFC)",
                                ntype ? ntype : "(none)");
            goto done;
        }
        bool clean, chinese, lower, strip;
        const json_t *sa = json_object_get(norm, "strip_accents");
        if (!get_bool(norm, "clean_text", true, &clean) ||
            !get_bool(norm, "handle_chinese_chars", true, &chinese) ||
            !get_bool(norm, "lowercase", true, &lower) ||
            (sa && !json_is_null(sa) && !json_is_boolean(sa))) {
            s = FORMAT_FAIL("\"normalizer\": clean_text, handle_chinese_chars, strip_accents "
                            "and lowercase must be booleans (strip_accents may be null)");
            goto done;
        }
        strip = sa && json_is_boolean(sa) ? json_is_true(sa) : lower;
        tok->norm = (clattn__normalizer){true, clean, chinese, strip, lower, false};
    }

    /* The pre-tokeniser. */
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    const char *ptype = json_string_value(json_object_get(pre, "type"));
    if (!bpe && (!ptype || strcmp(ptype, "BertPreTokenizer") != 0)) {
        s = clattn__fail_in(load_fn, path, CLATTN_ERROR_UNSUPPORTED,
                            "pre_tokenizer type '%s' is not supported (only BertPreTokenizer)",
                            ptype ? ptype : "(none)");
        goto done;
    }

    /* The added tokens. */
added_tokens:;
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added)) {
        s = FORMAT_FAIL("\"added_tokens\" is not an array");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        bool single_word, lstrip, rstrip, normalized, special;
        if (!json_is_object(a) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX || !content || !*content ||
            !clattn__utf8_valid(content, strlen(content), NULL) ||
            !get_bool(a, "special", false, &special) ||
            !get_bool(a, "single_word", false, &single_word) ||
            !get_bool(a, "lstrip", false, &lstrip) || !get_bool(a, "rstrip", false, &rstrip) ||
            !get_bool(a, "normalized", !special, &normalized)) {
            s = FORMAT_FAIL("added_tokens[%zu] needs an integer \"id\" in 0..%d, a non-empty "
                            "\"content\" and boolean flags", i, INT32_MAX);
            goto done;
        }
        if ((s = add_token(tok, path, content, (int32_t)json_integer_value(id), single_word,
                           lstrip, rstrip, normalized, special)))
            goto done;
    }

    /* Special ids. */
    if (!bpe && unk && (s = require_token(tok, path, unk, "unknown", &tok->wp.unk)))
        goto done;
    if (!bpe && unk)
        tok->special.unk = tok->wp.unk;
    /* The templates, [CLS] and [SEP] from the post-processor (tokenizer_post_load.c). */
    if ((s = clattn__post_processor_load(tok, json_object_get(root, "post_processor"), path,
                                         load_fn)))
        goto done;

    /* The padding id: "padding"."pad_id" when given (MPNet's <pad>), else [PAD] (below). */
    const json_t *padding = json_object_get(root, "padding");
    v = json_object_get(padding, "pad_id");
    if (json_is_object(padding) && v) {
        if (!is_id(v) || (size_t)json_integer_value(v) >= tok->vocab_size) {
            s = FORMAT_FAIL("\"padding\".\"pad_id\" is not a token's id");
            goto done;
        }
        tok->special.pad = (int32_t)json_integer_value(v);
    }

    /* The default maximum length: truncation.max_length. */
    tok->max_length = SIZE_MAX;
    const json_t *trunc = json_object_get(root, "truncation");
    if (trunc && !json_is_null(trunc)) {
        v = json_object_get(trunc, "max_length");
        if (!json_is_integer(v) || json_integer_value(v) < 2) {
            s = FORMAT_FAIL("\"truncation\".\"max_length\" is not an integer of at least 2");
            goto done;
        }
        tok->max_length = (size_t)json_integer_value(v);
    }
done:
    json_decref(root);
    return s;
}

/* An optional positive integer member of an optional JSON file in a folder; *value untouched
 * when the file or member is absent. */
static clattn_status folder_integer(const char *dir, const char *file, const char *key,
                                    size_t *value, bool *found)
{
    *found = false;
    char *path = path_join(dir, file);
    if (!path)
        return clattn__fail_in(load_fn, dir, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a path");
    clattn_status s = CLATTN_OK;
    if (exists(path)) {
        json_t *root = NULL;
        s = read_json(path, &root);
        if (!s) {
            const json_t *v = json_object_get(root, key);
            if (v && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 2)
                    s = clattn__fail_in(load_fn, path, CLATTN_ERROR_FORMAT,
                                        "\"%s\" is not an integer of at least 2", key);
                else {
                    *value = (size_t)json_integer_value(v);
                    *found = true;
                }
            }
            json_decref(root);
        }
    }
    free(path);
    return s;
}

/* How many rows of config.json's position table the text cannot use: MPNet, RoBERTa and
 * XLM-RoBERTa (model_type "mpnet", "roberta", "xlm-roberta") count positions from
 * padding_idx + 1 = 2, so max_position_embeddings - 2 tokens fit (the model_max_length 512 of
 * their tokenizer_config.json); 0 for anything else. */
static size_t reserved_positions(const char *dir)
{
    char *path = path_join(dir, "config.json");
    size_t reserved = 0;
    json_t *root = NULL;
    if (path && exists(path) && read_json(path, &root) == CLATTN_OK) {
        const char *type = json_string_value(json_object_get(root, "model_type"));
        reserved = type && (strcmp(type, "mpnet") == 0 || strcmp(type, "roberta") == 0 ||
                            strcmp(type, "xlm-roberta") == 0) ? 2 : 0;
        json_decref(root);
    }
    free(path);
    return reserved;
}

static clattn_status load_folder(clattn_tokenizer *tok, const char *dir)
{
    char *json = path_join(dir, "tokenizer.json"), *txt = path_join(dir, "vocab.txt");
    clattn_status s = CLATTN_OK;
    if (!json || !txt)
        s = clattn__fail_in(load_fn, dir, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "cannot allocate a path");
    else if (exists(json))
        s = load_tokenizer_json(tok, json);
    else if (exists(txt))
        s = load_vocab_txt(tok, txt);
    else
        s = clattn__fail_in(load_fn, dir, CLATTN_ERROR_IO,
                            "the folder holds neither tokenizer.json nor vocab.txt");
    free(json);
    free(txt);
    if (s)
        return s;
    bool found;
    size_t n = 0;
    if ((s = folder_integer(dir, "sentence_bert_config.json", "max_seq_length", &n, &found)))
        return s;
    if (!found) {
        if ((s = folder_integer(dir, "config.json", "max_position_embeddings", &n, &found)))
            return s;
        size_t reserved = found ? reserved_positions(dir) : 0;
        n = n > reserved + 2 ? n - reserved : n;
    }
    if (found)
        tok->max_length = n;
    return CLATTN_OK;
}

clattn_status clattn_tokenizer_load(clattn_tokenizer **tok, const char *path)
{
    CLATTN_CHECK_ARG(NULL, load_fn, tok, "tok is NULL");
    *tok = NULL;
    CLATTN_CHECK_ARG(NULL, load_fn, path, "path is NULL");
    struct stat st;
    if (stat(path, &st) != 0)
        return clattn__fail_in(load_fn, path, CLATTN_ERROR_IO, "cannot open: %s",
                               strerror(errno));
    clattn_tokenizer *t = calloc(1, sizeof(*t));
    if (!t)
        return clattn__fail_in(load_fn, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the tokenizer");
    t->special = (clattn_tokenizer_special){-1, -1, -1, -1, -1};
    clattn_status s;
    size_t n = strlen(path);
    if (S_ISDIR(st.st_mode))
        s = load_folder(t, path);
    else if (n >= 4 && strcmp(path + n - 4, ".txt") == 0)
        s = load_vocab_txt(t, path);
    else
        s = load_tokenizer_json(t, path);
    if (!s) {
        if (t->special.pad < 0)
            t->special.pad = clattn_tokenizer_token_id(t, "[PAD]");
        if (t->special.pad < 0)
            t->special.pad = clattn_tokenizer_token_id(t, "<pad>");
        t->special.mask = clattn_tokenizer_token_id(t, "[MASK]");
        if (t->special.mask < 0)
            t->special.mask = clattn_tokenizer_token_id(t, "<mask>");
    }
    if (s) {
        clattn_tokenizer_destroy(&t);
        return s;
    }
    *tok = t;
    return CLATTN_OK;
}
