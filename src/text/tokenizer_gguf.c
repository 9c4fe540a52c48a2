/*
 * The tokenizer of a GGUF file's metadata, built from plain arrays (clattn__gguf_vocab_spec) as
 * llama.cpp's llama_vocab::impl::load does, and run as its tokenize, token_to_piece and
 * detokenize (tokenizer_gguf.h says what each does). The models are tokenizer_bpe.c's
 * byte-level BPE (merges only: the pre-tokenizer is tokenizer_gguf_pre.c's list of regexes) and
 * tokenizer_spm.c's SentencePiece BPE.
 */
#include "tokenizer_gguf_internal.h"
#include "tokenizer_bpe_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- llama.cpp's tokens recognised by their text ---- */

/* End of generation (special_eog_ids; their attribute gains CONTROL). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[",
};
/* EOT when the file gives no tokenizer.ggml.eot_token_id. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>", NULL,
};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
/* Fill-in-the-middle tokens (control; pad, repo and file separator also end generation). */
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL,
};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL,
};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL,
};
static const char *const fim_pad_texts[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL,
};
static const char *const fim_rep_texts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL,
};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

/* The lowest id whose text is one of `texts` (NULL-terminated), or -1. llama.cpp takes the first
 * of its hash map's order, which no file relies on. */
static int32_t find_by_text(const clattn__vocab *v, const char *const *texts)
{
    int32_t best = -1;
    for (size_t i = 0; texts[i]; i++) {
        int32_t id = clattn__vocab_find(v, texts[i], strlen(texts[i]));
        if (id >= 0 && (best < 0 || id < best))
            best = id;
    }
    return best;
}

static bool text_is(const clattn__vocab *v, int32_t id, const char *text)
{
    return v->lengths[id] == strlen(text) && memcmp(v->tokens[id], text, v->lengths[id]) == 0;
}

/* ---- building ---- */

static clattn_status build_vocab(clattn__gguf_tokenizer *tok, const clattn__gguf_vocab_spec *spec,
                                 const char *function, const char *where)
{
    size_t n = spec->token_count;
    if (n == 0 || n > (size_t)INT32_MAX)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "tokenizer.ggml.tokens: %zu tokens (1 to %d expected)", n,
                               INT32_MAX);
    const char **texts = malloc(n * sizeof(*texts));
    size_t *lengths = malloc(n * sizeof(*lengths));
    char (*empty)[32] = NULL;
    size_t empty_count = 0;
    for (size_t i = 0; texts && lengths && i < n; i++)
        empty_count += (spec->token_lengths ? spec->token_lengths[i]
                                            : strlen(spec->tokens[i])) == 0;
    if (empty_count)
        empty = malloc(empty_count * sizeof(*empty));
    if (!texts || !lengths || (empty_count && !empty)) {
        free(texts);
        free(lengths);
        free(empty);
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the vocabulary");
    }
    size_t e = 0;
    for (size_t i = 0; i < n; i++) {
        texts[i] = spec->tokens[i];
        lengths[i] = spec->token_lengths ? spec->token_lengths[i] : strlen(spec->tokens[i]);
        if (lengths[i] == 0) {
            /* llama.cpp names an empty token "[EMPTY_<id>]". */
            int k = snprintf(empty[e], sizeof(empty[e]), "[EMPTY_%zu]", i);
            texts[i] = empty[e++];
            lengths[i] = (size_t)k;
        }
    }
    clattn_status s = clattn__vocab_build(&tok->vocab, texts, lengths, NULL, n, function, where);
    free(texts);
    free(lengths);
    free(empty);
    return s;
}

static uint8_t attr_of_type(int32_t type)
{
    switch (type) {
    case CLATTN__GGUF_TOKEN_NORMAL: return GGUF_ATTR_NORMAL;
    case CLATTN__GGUF_TOKEN_UNKNOWN: return GGUF_ATTR_UNKNOWN;
    case CLATTN__GGUF_TOKEN_CONTROL: return GGUF_ATTR_CONTROL;
    case CLATTN__GGUF_TOKEN_USER_DEFINED: return GGUF_ATTR_USER_DEFINED;
    case CLATTN__GGUF_TOKEN_UNUSED: return GGUF_ATTR_UNUSED;
    case CLATTN__GGUF_TOKEN_BYTE: return GGUF_ATTR_BYTE;
    default: return GGUF_ATTR_UNDEFINED;
    }
}

/* The merges "left right" (split at the first space after the first byte, as llama.cpp) for
 * clattn__bpe_build. */
static clattn_status build_bpe(clattn__gguf_tokenizer *tok, const clattn__gguf_vocab_spec *spec,
                               bool ignore_merges, const char *function, const char *where)
{
    clattn__bpe_merge *merges = spec->merge_count ? calloc(spec->merge_count, sizeof(*merges))
                                                  : NULL;
    if (spec->merge_count && !merges)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the merges");
    for (size_t i = 0; i < spec->merge_count; i++) {
        const char *m = spec->merges[i];
        size_t length = spec->merge_lengths ? spec->merge_lengths[i] : strlen(m);
        const char *space = length > 1 ? memchr(m + 1, ' ', length - 1) : NULL;
        if (!space) {
            free(merges);
            return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                   "tokenizer.ggml.merges[%zu]: '%.*s' is not two tokens "
                                   "separated by a space", i, (int)(length > 64 ? 64 : length), m);
        }
        merges[i] = (clattn__bpe_merge){m, (size_t)(space - m), space + 1,
                                        length - (size_t)(space - m) - 1};
    }
    clattn__bpe_spec bs = {
        .merges = merges,
        .merge_count = spec->merge_count,
        .merges_name = "tokenizer.ggml.merges",
        .unk = -1,
        .ignore_merges = ignore_merges,
        .byte_level = true,
    };
    clattn_status s = clattn__bpe_build(&tok->bpe, &tok->vocab, &bs, function, where);
    free(merges);
    return s;
}

/* A growable byte buffer, NUL-terminated. */
typedef struct bytes_buf {
    char *data;
    size_t length, capacity;
} bytes_buf;

static bool buf_put(bytes_buf *b, const void *bytes, size_t n)
{
    if (n > SIZE_MAX / 2 - b->length - 1)
        return false;
    if (b->length + n + 1 > b->capacity) {
        size_t cap = b->capacity ? b->capacity : 64;
        while (cap < b->length + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return false;
        b->data = grown;
        b->capacity = cap;
    }
    memcpy(b->data + b->length, bytes, n);
    b->length += n;
    b->data[b->length] = 0;
    return true;
}

/* Every token's decoded bytes (token_to_piece with special = true), one after the other in
 * tok->piece_data, token i's at piece_offsets[i] .. piece_offsets[i + 1]. */
static bool make_pieces(clattn__gguf_tokenizer *tok)
{
    /* Byte-level BPE: the byte each character of GPT-2's alphabet stands for (all are below
     * U+0144). */
    int16_t byte_of[512];
    for (int c = 0; c < 512; c++)
        byte_of[c] = -1;
    if (tok->bpe)
        for (int b = 0; b < 256; b++)
            byte_of[tok->bpe->byte_cp[b]] = (int16_t)b;
    bytes_buf out = {0};
    bool ok = true;
    size_t n = tok->vocab.count;
    for (size_t id = 0; ok && id < n; id++) {
        tok->piece_offsets[id] = out.length;
        const char *text = tok->vocab.tokens[id];
        size_t length = tok->vocab.lengths[id];
        uint8_t attr = tok->attr[id];
        if (attr & (GGUF_ATTR_UNKNOWN | GGUF_ATTR_CONTROL | GGUF_ATTR_USER_DEFINED)) {
            ok = buf_put(&out, text, length);
        } else if ((attr & GGUF_ATTR_NORMAL) && tok->model == CLATTN__GGUF_SPM) {
            for (size_t i = 0; ok && i < length;) {
                if (i + 3 <= length && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
                    ok = buf_put(&out, " ", 1);
                    i += 3;
                } else {
                    ok = buf_put(&out, text + i++, 1);
                }
            }
        } else if (attr & GGUF_ATTR_NORMAL) {
            /* Byte-level: each character is the byte it stands for (llama_decode_text). */
            for (size_t i = 0; ok && i < length;) {
                uint32_t cp = 0;
                size_t k = clattn__utf8_decode((const unsigned char *)text + i, length - i, &cp);
                if (k == 0)
                    k = 1;
                if (cp < 512 && byte_of[cp] >= 0) {
                    char b = (char)byte_of[cp];
                    ok = buf_put(&out, &b, 1);
                } else {
                    ok = buf_put(&out, "[UNK_BYTE_0x", 12);
                    for (size_t j = 0; ok && j < k; j++) {
                        char hex[3];
                        snprintf(hex, sizeof(hex), "%02x", (unsigned char)text[i + j]);
                        ok = buf_put(&out, hex, 2);
                    }
                    ok = ok && buf_put(&out, text, length) && buf_put(&out, "]", 1);
                }
                i += k;
            }
        } else if ((attr & GGUF_ATTR_BYTE) && length >= 5) {
            char hex[3] = {text[3], text[4], 0};
            char b = (char)strtol(hex, NULL, 16);
            ok = buf_put(&out, &b, 1);
        }
    }
    ok = ok && buf_put(&out, "", 0);
    if (!ok) {
        free(out.data);
        return false;
    }
    tok->piece_offsets[n] = out.length;
    tok->piece_data = out.data;
    return true;
}

static int compare_ids(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The special tokens, longest text first (ties: the lower id; llama.cpp's std::sort leaves
 * their order open), sorted as (length, id) pairs. */
typedef struct length_id {
    size_t length;
    int32_t id;
} length_id;

static int compare_special(const void *a, const void *b)
{
    const length_id *x = a, *y = b;
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A special id of the file: -1 stays none; out of range is refused. */
static clattn_status special_id(int64_t value, int64_t fallback, size_t n, const char *key,
                                int32_t *out, const char *function, const char *where)
{
    if (value < 0) {
        *out = fallback >= 0 && (uint64_t)fallback < n ? (int32_t)fallback : -1;
        return CLATTN_OK;
    }
    if ((uint64_t)value >= n)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "tokenizer.ggml.%s %lld is not a token id (0..%zu)", key,
                               (long long)value, n - 1);
    *out = (int32_t)value;
    return CLATTN_OK;
}

static clattn_status build(clattn__gguf_tokenizer *tok, const clattn__gguf_vocab_spec *spec,
                           const char *function, const char *where)
{
    bool spm;
    if (spec->model && strcmp(spec->model, "llama") == 0)
        spm = true;
    else if (spec->model && strcmp(spec->model, "gpt2") == 0)
        spm = false;
    else
        return clattn__fail_in(function, where, CLATTN_ERROR_UNSUPPORTED,
                               "the tokenizer model '%s' (tokenizer.ggml.model) is not supported "
                               "(only gpt2 and llama)", spec->model ? spec->model : "(none)");
    tok->model = spm ? CLATTN__GGUF_SPM : CLATTN__GGUF_BPE;
    clattn_status s = build_vocab(tok, spec, function, where);
    if (s)
        return s;
    size_t n = tok->vocab.count;
    tok->scores = calloc(n, sizeof(*tok->scores));
    tok->attr = calloc(n, sizeof(*tok->attr));
    tok->piece_offsets = calloc(n + 1, sizeof(*tok->piece_offsets));
    if (!tok->scores || !tok->attr || !tok->piece_offsets)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the vocabulary");
    for (size_t i = 0; i < n; i++) {
        tok->scores[i] = spec->scores ? spec->scores[i] : 0.0f;
        tok->attr[i] = spec->token_types ? attr_of_type(spec->token_types[i]) : GGUF_ATTR_NORMAL;
    }

    /* The model and llama.cpp's defaults for it. */
    bool add_bos = spm, ignore_merges = false;
    if (spm) {
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof(hex), "<0x%02X>", b);
            tok->byte_token[b] = clattn__vocab_find(&tok->vocab, hex, 6);
            if (tok->byte_token[b] < 0) {
                char one = (char)b;
                tok->byte_token[b] = clattn__vocab_find(&tok->vocab, &one, 1);
            }
        }
    } else {
        s = clattn__gguf_pre_create(&tok->pre, spec->pre, &ignore_merges, &add_bos, function,
                                    where);
        if (!s)
            s = build_bpe(tok, spec, ignore_merges, function, where);
        if (s)
            return s;
    }
    tok->add_bos = spec->add_bos >= 0 ? spec->add_bos != 0 : add_bos;
    tok->add_eos = spec->add_eos >= 0 ? spec->add_eos != 0 : false;
    tok->add_space_prefix = spec->add_space_prefix >= 0 ? spec->add_space_prefix != 0 : spm;

    /* Special ids: llama.cpp's defaults where the file has none ("llama": BOS 1, EOS 2, UNK 0;
     * "gpt2": BOS and EOS 11, Falcon's). */
    if ((s = special_id(spec->bos, spm ? 1 : 11, n, "bos_token_id", &tok->bos, function, where)) ||
        (s = special_id(spec->eos, spm ? 2 : 11, n, "eos_token_id", &tok->eos, function, where)) ||
        (s = special_id(spec->unk, spm ? 0 : -1, n, "unknown_token_id", &tok->unk, function,
                        where)) ||
        (s = special_id(spec->pad, -1, n, "padding_token_id", &tok->pad, function, where)) ||
        (s = special_id(spec->eot, -1, n, "eot_token_id", &tok->eot, function, where)) ||
        (s = special_id(spec->eom, -1, n, "eom_token_id", &tok->eom, function, where)))
        return s;
    if (tok->add_bos && tok->bos < 0)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "add_bos_token is set but there is no BOS token");
    if (tok->add_eos && tok->eos < 0)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "add_eos_token is set but there is no EOS token");

    /* The tokens llama.cpp recognises by their text become control tokens. */
    const clattn__vocab *v = &tok->vocab;
    if (tok->eot < 0)
        tok->eot = find_by_text(v, eot_texts);
    if (tok->eom < 0)
        tok->eom = find_by_text(v, eom_texts);
    const char *const *fim[] = {fim_pre_texts, fim_suf_texts, fim_mid_texts,
                                fim_pad_texts, fim_rep_texts, fim_sep_texts};
    int32_t fim_ids[6];
    for (int f = 0; f < 6; f++) {
        fim_ids[f] = find_by_text(v, fim[f]);
        if (fim_ids[f] >= 0)
            tok->attr[fim_ids[f]] |= GGUF_ATTR_CONTROL;
    }
    if (tok->eot >= 0)
        tok->attr[tok->eot] |= GGUF_ATTR_CONTROL;
    if (tok->eom >= 0)
        tok->attr[tok->eom] |= GGUF_ATTR_CONTROL;

    /* The end-of-generation set. */
    tok->eog = malloc((sizeof(eog_texts) / sizeof(eog_texts[0]) + 6) * sizeof(*tok->eog));
    if (!tok->eog)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the end-of-generation set");
    size_t eog = 0;
    int32_t candidates[6] = {fim_ids[3], fim_ids[4], fim_ids[5], tok->eos, tok->eot, tok->eom};
    for (size_t i = 0; i < sizeof(eog_texts) / sizeof(eog_texts[0]); i++) {
        int32_t id = clattn__vocab_find(v, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0) {
            tok->eog[eog++] = id;
            tok->attr[id] |= GGUF_ATTR_CONTROL;
        }
    }
    for (int i = 0; i < 6; i++)
        if (candidates[i] >= 0)
            tok->eog[eog++] = candidates[i];
    /* gpt-oss's channel tokens are always rendered (user-defined). */
    static const char *const rendered[] = {"<|channel|>", "<|message|>", "<|start|>",
                                           "<|constrain|>"};
    for (size_t i = 0; i < 4; i++) {
        int32_t id = clattn__vocab_find(v, rendered[i], strlen(rendered[i]));
        if (id >= 0)
            tok->attr[id] = GGUF_ATTR_USER_DEFINED;
    }
    qsort(tok->eog, eog, sizeof(*tok->eog), compare_ids);
    size_t unique = 0;
    for (size_t i = 0; i < eog; i++)
        if (unique == 0 || tok->eog[unique - 1] != tok->eog[i])
            tok->eog[unique++] = tok->eog[i];
    eog = unique;
    /* o200k_harmony and solar-open: "<|end|>" does not end generation when "<|return|>" and
     * "<|call|>" (or "<|calls|>" and "<|flush|>") are there; Gemma 4 and PLaMo: "</s>" is a
     * normal token. */
    bool has_return = false, has_call = false, has_flush = false, has_marker = false;
    int32_t end_id = -1, s_id = -1;
    for (size_t i = 0; i < eog; i++) {
        int32_t id = tok->eog[i];
        has_return |= text_is(v, id, "<|return|>");
        has_call |= text_is(v, id, "<|call|>") || text_is(v, id, "<|calls|>");
        has_flush |= text_is(v, id, "<|flush|>");
        has_marker |= text_is(v, id, "<|tool_response>") || text_is(v, id, "<|plamo:eos|>");
        if (text_is(v, id, "<|end|>"))
            end_id = id;
        if (text_is(v, id, "</s>"))
            s_id = id;
    }
    int32_t drop[2] = {-1, -1};
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
        drop[0] = end_id;
        tok->attr[end_id] = GGUF_ATTR_USER_DEFINED;
    }
    if (s_id >= 0 && has_marker) {
        drop[1] = s_id;
        tok->attr[s_id] = GGUF_ATTR_NORMAL;
    }
    unique = 0;
    for (size_t i = 0; i < eog; i++)
        if (tok->eog[i] != drop[0] && tok->eog[i] != drop[1])
            tok->eog[unique++] = tok->eog[i];
    tok->eog_count = unique;

    /* The tokens matched in text, longest first. */
    tok->special = malloc(n * sizeof(*tok->special));
    if (!tok->special)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the special tokens");
    length_id *order = malloc(n * sizeof(*order));
    if (!order)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the special tokens");
    size_t special = 0;
    for (size_t i = 0; i < n; i++)
        if (tok->attr[i] & (GGUF_ATTR_CONTROL | GGUF_ATTR_USER_DEFINED | GGUF_ATTR_UNKNOWN))
            order[special++] = (length_id){tok->vocab.lengths[i], (int32_t)i};
    qsort(order, special, sizeof(*order), compare_special);
    for (size_t i = 0; i < special; i++)
        tok->special[i] = order[i].id;
    tok->special_count = special;
    free(order);

    if (!make_pieces(tok))
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the token pieces");
    return CLATTN_OK;
}

clattn_status clattn__gguf_tokenizer_build(clattn__gguf_tokenizer **out,
                                           const clattn__gguf_vocab_spec *spec,
                                           const char *function, const char *where)
{
    *out = NULL;
    clattn__gguf_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the tokenizer");
    tok->bos = tok->eos = tok->unk = tok->pad = tok->eot = tok->eom = -1;
    clattn_status s = build(tok, spec, function, where);
    if (s) {
        clattn__gguf_tokenizer_free(tok);
        return s;
    }
    *out = tok;
    return CLATTN_OK;
}

void clattn__gguf_tokenizer_free(clattn__gguf_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->piece_data);
    free(tok->piece_offsets);
    free(tok->scores);
    free(tok->attr);
    free(tok->special);
    free(tok->eog);
    clattn__bpe_free(tok->bpe);
    clattn__gguf_pre_free(tok->pre);
    clattn__vocab_free(&tok->vocab);
    free(tok);
}

/* ---- encoding ---- */

/* A piece of the text: raw bytes [start, end), or a special token. */
typedef struct fragment {
    size_t start, end;
    int32_t id; /* -1: raw text */
} fragment;

typedef struct fragments {
    fragment *data;
    size_t count, capacity;
} fragments;

static bool fragments_push(fragments *f, fragment x)
{
    if (f->count == f->capacity) {
        size_t cap = f->capacity ? 2 * f->capacity : 16;
        fragment *grown = realloc(f->data, cap * sizeof(*grown));
        if (!grown)
            return false;
        f->data = grown;
        f->capacity = cap;
    }
    f->data[f->count++] = x;
    return true;
}

/* tokenizer_st_partition: each special token in turn, longest first, split out of every raw
 * fragment left to right. */
static bool partition(const clattn__gguf_tokenizer *tok, const char *text, size_t length,
                      bool parse_special, fragments *out)
{
    fragments a = {0}, b = {0};
    bool ok = fragments_push(&a, (fragment){0, length, -1});
    for (size_t k = 0; ok && k < tok->special_count; k++) {
        int32_t id = tok->special[k];
        if (!parse_special && (tok->attr[id] & (GGUF_ATTR_CONTROL | GGUF_ATTR_UNKNOWN)))
            continue;
        const char *needle = tok->vocab.tokens[id];
        size_t nl = tok->vocab.lengths[id];
        b.count = 0;
        for (size_t i = 0; ok && i < a.count; i++) {
            fragment f = a.data[i];
            if (f.id >= 0) {
                ok = fragments_push(&b, f);
                continue;
            }
            size_t at = f.start;
            while (ok && f.end - at >= nl) {
                const char *hit = memmem(text + at, f.end - at, needle, nl);
                if (!hit)
                    break;
                size_t m = (size_t)(hit - text);
                if (m > at)
                    ok = fragments_push(&b, (fragment){at, m, -1});
                if (ok)
                    ok = fragments_push(&b, (fragment){m, m + nl, id});
                at = m + nl;
            }
            if (ok && at < f.end)
                ok = fragments_push(&b, (fragment){at, f.end, -1});
        }
        fragments t = a;
        a = b;
        b = t;
    }
    free(b.data);
    if (!ok) {
        free(a.data);
        return false;
    }
    *out = a;
    return true;
}

typedef struct bpe_state {
    const clattn__gguf_tokenizer *tok;
    const char *text;
    clattn__cps cps;
    clattn__ids *out;
} bpe_state;

static bool on_bpe_piece(void *user, size_t start, size_t end)
{
    bpe_state *st = user;
    st->cps.count = 0;
    for (size_t at = start; at < end;) {
        uint32_t cp = 0;
        size_t k = clattn__utf8_decode((const unsigned char *)st->text + at, end - at, &cp);
        if (k == 0 || !clattn__cps_push(&st->cps, cp))
            return false;
        at += k;
    }
    return clattn__bpe_piece(st->tok->bpe, &st->tok->vocab, st->cps.data, st->cps.count,
                             SIZE_MAX, st->out);
}

/* SentencePiece: the optional leading space, spaces as U+2581, then the merges. */
static bool spm_fragment(const clattn__gguf_tokenizer *tok, const char *text, size_t length,
                         bool prefix, clattn__ids *out)
{
    size_t spaces = prefix, extra;
    for (size_t i = 0; i < length; i++)
        spaces += text[i] == ' ';
    if (__builtin_mul_overflow(spaces, (size_t)2, &extra) || length > SIZE_MAX - extra - 3)
        return false;
    char *escaped = malloc(length + extra + 3 + 1);
    if (!escaped)
        return false;
    size_t n = 0;
    if (prefix) {
        memcpy(escaped, "\xE2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < length; i++) {
        if (text[i] == ' ') {
            memcpy(escaped + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            escaped[n++] = text[i];
        }
    }
    bool ok = clattn__spm_encode(&tok->vocab, tok->scores, tok->byte_token, escaped, n, out);
    free(escaped);
    return ok;
}

clattn_status clattn__gguf_tokenizer_encode(const clattn__gguf_tokenizer *tok,
                                            const char *function, const char *text,
                                            size_t length, bool add_special, bool parse_special,
                                            int32_t **ids, size_t *count)
{
    *ids = NULL;
    *count = 0;
    if (!text && length)
        return clattn__fail_in(function, "the text", CLATTN_ERROR_INVALID_ARGUMENT,
                               "NULL with a length of %zu", length);
    for (size_t at = 0; at < length;) {
        uint32_t cp;
        size_t k = clattn__utf8_decode((const unsigned char *)text + at, length - at, &cp);
        if (k == 0)
            return clattn__fail_in(function, "the text", CLATTN_ERROR_INVALID_ARGUMENT,
                                   "invalid UTF-8 at byte %zu", at);
        at += k;
    }
    fragments frags = {0};
    clattn__ids out = {0};
    bool ok = length == 0 || partition(tok, text, length, parse_special, &frags);
    if (ok && add_special && tok->add_bos)
        ok = clattn__ids_push(&out, tok->bos);
    bpe_state st = {.tok = tok, .text = text, .out = &out};
    bool prev_special = true; /* SentencePiece: a space before the first piece */
    for (size_t i = 0; ok && i < frags.count; i++) {
        fragment f = frags.data[i];
        if (f.id >= 0) {
            ok = clattn__ids_push(&out, f.id);
            prev_special = true;
        } else if (tok->model == CLATTN__GGUF_SPM) {
            ok = spm_fragment(tok, text + f.start, f.end - f.start,
                              tok->add_space_prefix && prev_special, &out);
            prev_special = false;
        } else {
            st.text = text + f.start; /* the pre-tokenizer's offsets are the fragment's */
            ok = clattn__gguf_pre_split(tok->pre, st.text, f.end - f.start, on_bpe_piece, &st);
        }
    }
    if (ok && add_special && tok->add_eos)
        ok = clattn__ids_push(&out, tok->eos);
    free(frags.data);
    clattn__cps_free(&st.cps);
    if (!ok) {
        free(out.data);
        return clattn__fail_in(function, "the text", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate its tokens");
    }
    *ids = out.data;
    *count = out.count;
    return CLATTN_OK;
}

/* ---- decoding ---- */

void clattn__gguf_tokenizer_piece(const clattn__gguf_tokenizer *tok, int32_t id, bool special,
                                  const char **bytes, size_t *length)
{
    *bytes = "";
    *length = 0;
    if (id < 0 || (size_t)id >= tok->vocab.count)
        return;
    if (!special && (tok->attr[id] & (GGUF_ATTR_UNKNOWN | GGUF_ATTR_CONTROL)))
        return;
    *bytes = tok->piece_data + tok->piece_offsets[id];
    *length = tok->piece_offsets[id + 1] - tok->piece_offsets[id];
}

/* Appends token id's piece to buf (grown), dropping a leading space when *strip (then spent). */
static bool append_piece(const clattn__gguf_tokenizer *tok, int32_t id, bool special, bool *strip,
                         char **buf, size_t *length, size_t *capacity)
{
    const char *p;
    size_t n;
    clattn__gguf_tokenizer_piece(tok, id, special, &p, &n);
    if (*strip && n && p[0] == ' ') {
        p++;
        n--;
    }
    *strip = false;
    if (*length + n + 1 > *capacity) {
        size_t cap = *capacity ? *capacity : 64;
        while (cap < *length + n + 1)
            cap *= 2;
        char *grown = realloc(*buf, cap);
        if (!grown)
            return false;
        *buf = grown;
        *capacity = cap;
    }
    memcpy(*buf + *length, p, n);
    *length += n;
    (*buf)[*length] = 0;
    return true;
}

static clattn_status check_ids(const clattn__gguf_tokenizer *tok, const char *function,
                               const int32_t *ids, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= tok->vocab.count)
            return clattn__fail_in(function, "the ids", CLATTN_ERROR_INVALID_ARGUMENT,
                                   "id %d (at %zu) is not a token id (0..%zu)", (int)ids[i], i,
                                   tok->vocab.count - 1);
    return CLATTN_OK;
}

clattn_status clattn__gguf_tokenizer_decode(const clattn__gguf_tokenizer *tok,
                                            const char *function, const int32_t *ids,
                                            size_t count, bool special, char **text,
                                            size_t *length)
{
    *text = NULL;
    *length = 0;
    clattn_status s = check_ids(tok, function, ids, count);
    if (s)
        return s;
    char *buf = NULL;
    size_t n = 0, capacity = 0;
    bool strip = tok->add_space_prefix; /* llama.cpp's detokenize: the first piece's space */
    bool ok = true;
    for (size_t i = 0; ok && i < count; i++)
        ok = append_piece(tok, ids[i], special, &strip, &buf, &n, &capacity);
    if (ok && !buf)
        ok = (buf = calloc(1, 1)) != NULL;
    if (!ok) {
        free(buf);
        return clattn__fail_in(function, "the ids", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the text");
    }
    *text = buf;
    *length = n;
    return CLATTN_OK;
}

/* ---- streaming ---- */

void clattn__gguf_stream_init(clattn__gguf_stream *st, const clattn__gguf_tokenizer *tok,
                              bool special)
{
    memset(st, 0, sizeof(*st));
    st->tok = tok;
    st->special = special;
}

/* The length of the UTF-8 sequence a lead byte starts (0: not a lead byte) and whether b is a
 * valid next byte at position `index` of a sequence led by `lead` (the ranges of RFC 3629). */
static size_t lead_length(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
         : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

static bool valid_next(unsigned char lead, size_t index, unsigned char b)
{
    if (index == 1) {
        if (lead == 0xE0)
            return b >= 0xA0 && b <= 0xBF;
        if (lead == 0xED)
            return b >= 0x80 && b <= 0x9F;
        if (lead == 0xF0)
            return b >= 0x90 && b <= 0xBF;
        if (lead == 0xF4)
            return b >= 0x80 && b <= 0x8F;
    }
    return (b & 0xC0) == 0x80;
}

typedef struct sink {
    char **out;
    size_t *length;
    size_t capacity;
} sink;

static bool sink_put(sink *k, const void *bytes, size_t n)
{
    if (*k->length + n + 1 > k->capacity) {
        size_t cap = k->capacity ? k->capacity : 64;
        while (cap < *k->length + n + 1)
            cap *= 2;
        char *grown = realloc(*k->out, cap);
        if (!grown)
            return false;
        *k->out = grown;
        k->capacity = cap;
    }
    memcpy(*k->out + *k->length, bytes, n);
    *k->length += n;
    (*k->out)[*k->length] = 0;
    return true;
}

/* Feeds bytes through the held sequence: complete characters go out, a sequence that cannot
 * continue becomes U+FFFD (the bytes after it are looked at again). */
static bool stream_bytes(clattn__gguf_stream *st, const unsigned char *p, size_t n, sink *k)
{
    static const char replacement[] = "\xEF\xBF\xBD";
    for (size_t i = 0; i < n; i++) {
        unsigned char b = p[i];
        if (st->held_count == 0) {
            size_t need = lead_length(b);
            if (need == 1) {
                if (!sink_put(k, &b, 1))
                    return false;
            } else if (need == 0) {
                if (!sink_put(k, replacement, 3))
                    return false;
            } else {
                st->held[st->held_count++] = b;
            }
            continue;
        }
        if (valid_next(st->held[0], st->held_count, b)) {
            st->held[st->held_count++] = b;
            if (st->held_count == lead_length(st->held[0])) {
                if (!sink_put(k, st->held, st->held_count))
                    return false;
                st->held_count = 0;
            }
            continue;
        }
        /* The held sequence ends here unfinished: one U+FFFD, then b afresh. */
        st->held_count = 0;
        if (!sink_put(k, replacement, 3))
            return false;
        i--;
    }
    return true;
}

clattn_status clattn__gguf_stream_push(clattn__gguf_stream *st, const char *function,
                                       const int32_t *ids, size_t count, bool flush, char **out,
                                       size_t *out_length)
{
    clattn_status s = check_ids(st->tok, function, ids, count);
    if (s)
        return s;
    sink k = {out, out_length, *out ? *out_length + 1 : 0};
    bool ok = true;
    if (!*out)
        ok = sink_put(&k, "", 0);
    for (size_t i = 0; ok && i < count; i++) {
        const char *p;
        size_t n;
        clattn__gguf_tokenizer_piece(st->tok, ids[i], st->special, &p, &n);
        if (!st->started && st->tok->add_space_prefix && n && p[0] == ' ') {
            p++;
            n--;
        }
        st->started = true;
        ok = stream_bytes(st, (const unsigned char *)p, n, &k);
    }
    if (ok && flush && st->held_count) {
        st->held_count = 0;
        ok = sink_put(&k, "\xEF\xBF\xBD", 3);
    }
    if (!ok)
        return clattn__fail_in(function, "the ids", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the text");
    return CLATTN_OK;
}

/* ---- facts ---- */

size_t clattn__gguf_tokenizer_vocab_size(const clattn__gguf_tokenizer *tok)
{
    return tok->vocab.count;
}

int32_t clattn__gguf_tokenizer_bos(const clattn__gguf_tokenizer *tok)
{
    return tok->bos;
}

int32_t clattn__gguf_tokenizer_eos(const clattn__gguf_tokenizer *tok)
{
    return tok->eos;
}

bool clattn__gguf_tokenizer_adds_bos(const clattn__gguf_tokenizer *tok)
{
    return tok->add_bos;
}

bool clattn__gguf_tokenizer_adds_eos(const clattn__gguf_tokenizer *tok)
{
    return tok->add_eos;
}

const char *clattn__gguf_tokenizer_token_text(const clattn__gguf_tokenizer *tok, int32_t id,
                                              size_t *length)
{
    if (id < 0 || (size_t)id >= tok->vocab.count)
        return NULL;
    if (length)
        *length = tok->vocab.lengths[id];
    return tok->vocab.tokens[id];
}

const int32_t *clattn__gguf_tokenizer_eog(const clattn__gguf_tokenizer *tok, size_t *count)
{
    *count = tok->eog_count;
    return tok->eog;
}

bool clattn__gguf_tokenizer_is_eog(const clattn__gguf_tokenizer *tok, int32_t id)
{
    return bsearch(&id, tok->eog, tok->eog_count, sizeof(*tok->eog), compare_ids) != NULL;
}
