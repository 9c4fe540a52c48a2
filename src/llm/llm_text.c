/* The public text side of an LLM (clattn/llm_text.h): the GGUF file's tokenizer
 * (text/tokenizer_gguf.h), its chat template (text/chat_template.h), the streaming
 * detokeniser. The generation loop is llm_generate.c. */
#include "clattn/llm_text.h"
#include "llm_text_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The special tokens other than BOS and EOS that a template sees: transformers passes its
 * tokenizer's special_tokens_map (each token set, as text) to the template; these are the ones
 * a GGUF names by id (llama.cpp's keys; "seperator" is its spelling). An id outside the
 * vocabulary is left out (as llama.cpp ignores it); a value that is not an integer is refused
 * naming the key. */
static clattn_status read_special_tokens(const char *fn, const clattn_gguf *g,
                                         const clattn__gguf_tokenizer *tok, json_t **out)
{
    static const char *const names[][2] = {
        {"unk_token", "tokenizer.ggml.unknown_token_id"},
        {"pad_token", "tokenizer.ggml.padding_token_id"},
        {"sep_token", "tokenizer.ggml.seperator_token_id"},
        {"cls_token", "tokenizer.ggml.cls_token_id"},
        {"mask_token", "tokenizer.ggml.mask_token_id"},
    };
    json_t *tokens = json_object();
    if (!tokens)
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!clattn__gguf_find(g, names[i][1]))
            continue;
        uint64_t id = 0;
        clattn_status s = clattn__gguf_get_u64(g, fn, names[i][1], &id);
        if (s != CLATTN_OK) {
            json_decref(tokens);
            return s;
        }
        if (id >= clattn__gguf_tokenizer_vocab_size(tok))
            continue;
        const char *text = clattn__gguf_tokenizer_token_text(tok, (int32_t)id, NULL);
        if (!text || !*text) /* transformers leaves an empty token out */
            continue;
        if (json_object_set_new(tokens, names[i][0], json_string(text)) != 0) {
            json_decref(tokens);
            return clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT,
                                   "%s: the token's text is not UTF-8", names[i][1]);
        }
    }
    *out = tokens;
    return CLATTN_OK;
}

/* The text object of an open GGUF file (its metadata only: the file is not read again). */
static clattn_status text_from_gguf(const char *fn, const clattn_gguf *g, clattn_llm_text **out)
{
    clattn_llm_text *t = calloc(1, sizeof(*t));
    if (!t)
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    clattn_status s = clattn__gguf_tokenizer_from_file(&t->tok, g, fn);
    if (s == CLATTN_OK)
        s = read_special_tokens(fn, g, t->tok, &t->special_tokens);
    const clattn_gguf_string *tmpl = NULL;
    if (s == CLATTN_OK)
        s = clattn__gguf_get_string(g, fn, "tokenizer.chat_template", true, &tmpl);
    if (s == CLATTN_OK && tmpl) {
        t->chat_template = malloc(tmpl->len + 1);
        if (!t->chat_template)
            s = clattn__fail_in(fn, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "cannot allocate the chat template (%llu bytes)",
                                (unsigned long long)tmpl->len);
        else {
            memcpy(t->chat_template, tmpl->data, tmpl->len);
            t->chat_template[tmpl->len] = '\0';
            t->chat_template_length = tmpl->len;
        }
    }
    if (s != CLATTN_OK) {
        clattn_llm_text_destroy(&t);
        return s;
    }
    *out = t;
    return CLATTN_OK;
}

clattn_status clattn_llm_text_load(const char *path, clattn_llm_text **out)
{
    static const char fn[] = "clattn_llm_text_load";
    CLATTN_CHECK_ARG(NULL, fn, out, "text is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, fn, path, "path is NULL");
    clattn_gguf *g = NULL;
    clattn_status s = clattn__gguf_open(fn, path, &g);
    if (s == CLATTN_OK)
        s = text_from_gguf(fn, g, out);
    clattn__gguf_close(&g);
    return s;
}

clattn_status clattn_llm_text_from_model(const clattn_llm *llm, clattn_llm_text **out)
{
    static const char fn[] = "clattn_llm_text_from_model";
    CLATTN_CHECK_ARG(NULL, fn, out, "text is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, fn, llm, "llm is NULL");
    const clattn_gguf *g = clattn__llm_gguf(llm);
    if (!g)
        return clattn__fail(NULL, CLATTN_ERROR_UNSUPPORTED,
                            "%s: the model was loaded from a Hugging Face folder, not a GGUF "
                            "file: its tokenizer is the folder's tokenizer.json "
                            "(clattn/tokenizer.h)",
                            fn);
    return text_from_gguf(fn, g, out);
}

void clattn_llm_text_destroy(clattn_llm_text **text)
{
    if (!text || !*text)
        return;
    if ((*text)->tok)
        clattn__gguf_tokenizer_free((*text)->tok);
    free((*text)->chat_template);
    json_decref((*text)->special_tokens);
    free(*text);
    *text = NULL;
}

void clattn_llm_free(void *memory) { free(memory); }

size_t clattn_llm_text_vocab_size(const clattn_llm_text *text)
{
    return text ? clattn__gguf_tokenizer_vocab_size(text->tok) : 0;
}

int32_t clattn_llm_bos_id(const clattn_llm_text *text)
{
    return text ? clattn__gguf_tokenizer_bos(text->tok) : -1;
}

int32_t clattn_llm_eos_id(const clattn_llm_text *text)
{
    return text ? clattn__gguf_tokenizer_eos(text->tok) : -1;
}

const char *clattn_llm_token_text(const clattn_llm_text *text, int32_t id)
{
    return text ? clattn__gguf_tokenizer_token_text(text->tok, id, NULL) : NULL;
}

int clattn_llm_is_end_of_generation(const clattn_llm_text *text, int32_t id)
{
    return text && clattn__gguf_tokenizer_is_eog(text->tok, id) ? 1 : 0;
}

clattn_status clattn_llm_tokenize(const clattn_llm_text *text, const char *s, size_t length,
                                  int add_special, int parse_special, int32_t **ids,
                                  size_t *count)
{
    static const char fn[] = "clattn_llm_tokenize";
    CLATTN_CHECK_ARG(NULL, fn, text, "text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, ids && count, "ids or count is NULL");
    *ids = NULL;
    *count = 0;
    CLATTN_CHECK_ARG(NULL, fn, s || length == 0, "s is NULL with length %zu", length);
    return clattn__gguf_tokenizer_encode(text->tok, fn, s ? s : "", length, add_special != 0,
                                         parse_special != 0, ids, count);
}

clattn_status clattn_llm_detokenize(const clattn_llm_text *text, const int32_t *ids,
                                    size_t count, int special, char **out, size_t *length)
{
    static const char fn[] = "clattn_llm_detokenize";
    CLATTN_CHECK_ARG(NULL, fn, text, "text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, out && length, "out or length is NULL");
    *out = NULL;
    *length = 0;
    CLATTN_CHECK_ARG(NULL, fn, ids || count == 0, "ids is NULL with count %zu", count);
    static const int32_t none[1] = {0};
    return clattn__gguf_tokenizer_decode(text->tok, fn, ids ? ids : none, count, special != 0,
                                         out, length);
}

struct clattn_llm_detokenizer {
    clattn__gguf_stream stream;
    char *buffer;
    size_t length;
};

clattn_status clattn_llm_detokenizer_create(const clattn_llm_text *text, int special,
                                            clattn_llm_detokenizer **out)
{
    static const char fn[] = "clattn_llm_detokenizer_create";
    CLATTN_CHECK_ARG(NULL, fn, text && out, "text or detokenizer is NULL");
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return clattn__fail_in(fn, "detokenizer", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    clattn__gguf_stream_init(&(*out)->stream, text->tok, special != 0);
    return CLATTN_OK;
}

void clattn_llm_detokenizer_destroy(clattn_llm_detokenizer **detokenizer)
{
    if (!detokenizer || !*detokenizer)
        return;
    free((*detokenizer)->buffer);
    free(*detokenizer);
    *detokenizer = NULL;
}

clattn_status clattn_llm_detokenizer_push(clattn_llm_detokenizer *d, const int32_t *ids,
                                          size_t count, int flush, const char **piece,
                                          size_t *length)
{
    static const char fn[] = "clattn_llm_detokenizer_push";
    CLATTN_CHECK_ARG(NULL, fn, d && piece && length, "detokenizer, piece or length is NULL");
    CLATTN_CHECK_ARG(NULL, fn, ids || count == 0, "ids is NULL with count %zu", count);
    *piece = "";
    *length = 0;
    d->length = 0;
    if (d->buffer)
        d->buffer[0] = '\0';
    static const int32_t none[1] = {0};
    clattn_status s = clattn__gguf_stream_push(&d->stream, fn, ids ? ids : none, count,
                                               flush != 0, &d->buffer, &d->length);
    if (s != CLATTN_OK)
        return s;
    if (d->buffer) {
        *piece = d->buffer;
        *length = d->length;
    }
    return CLATTN_OK;
}

const char *clattn_llm_chat_template(const clattn_llm_text *text)
{
    return text ? text->chat_template : NULL;
}

clattn_status clattn_llm_apply_chat_template(const clattn_llm_text *text,
                                             const char *messages_json,
                                             const char *template_text,
                                             int add_generation_prompt, char **out,
                                             size_t *length)
{
    return clattn_llm_apply_chat_template_vars(text, messages_json, NULL, template_text,
                                               add_generation_prompt, out, length);
}

clattn_status clattn_llm_apply_chat_template_vars(const clattn_llm_text *text,
                                                  const char *messages_json,
                                                  const char *variables_json,
                                                  const char *template_text,
                                                  int add_generation_prompt, char **out,
                                                  size_t *length)
{
    static const char fn[] = "clattn_llm_apply_chat_template";
    CLATTN_CHECK_ARG(NULL, fn, text, "text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, out && length, "out or length is NULL");
    *out = NULL;
    *length = 0;
    CLATTN_CHECK_ARG(NULL, fn, messages_json, "messages_json is NULL");
    const char *tmpl = template_text ? template_text : text->chat_template;
    if (!tmpl)
        return clattn__fail_in(fn, "chat template", CLATTN_ERROR_UNSUPPORTED,
                               "the file has no tokenizer.chat_template and none was given");
    json_error_t jerr;
    json_t *variables = NULL;
    if (variables_json) {
        variables = json_loads(variables_json, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
        if (!variables)
            return clattn__fail_arg(NULL, fn, "variables: %s (line %d, column %d)", jerr.text,
                                    jerr.line, jerr.column);
        if (!json_is_object(variables)) {
            json_decref(variables);
            return clattn__fail_arg(NULL, fn, "variables: not a JSON object");
        }
    }
    json_t *messages = json_loads(messages_json, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!messages) {
        json_decref(variables);
        return clattn__fail_arg(NULL, fn, "messages: %s (line %d, column %d)", jerr.text,
                                jerr.line, jerr.column);
    }
    if (!json_is_array(messages)) {
        json_decref(messages);
        json_decref(variables);
        return clattn__fail_arg(NULL, fn, "messages: not a JSON array of messages");
    }
    /* The special tokens, then the caller's variables over them (apply_chat_template's
     * kwargs). */
    json_t *extra = text->special_tokens ? json_copy(text->special_tokens) : json_object();
    if (!extra || (variables && json_object_update(extra, variables) != 0)) {
        json_decref(extra);
        json_decref(messages);
        json_decref(variables);
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
    }
    clattn__gguf_tokenizer *tok = text->tok;
    struct clattn_chat_vars vars = {0};
    vars.messages = messages;
    vars.add_generation_prompt = add_generation_prompt != 0;
    vars.bos_token = clattn__gguf_tokenizer_token_text(tok, clattn__gguf_tokenizer_bos(tok), NULL);
    vars.eos_token = clattn__gguf_tokenizer_token_text(tok, clattn__gguf_tokenizer_eos(tok), NULL);
    vars.extra = extra;
    char error[512];
    int rc = clattn__chat_template_render(tmpl, strlen(tmpl), &vars, NULL, out, length, error,
                                         sizeof(error));
    json_decref(messages);
    json_decref(variables);
    json_decref(extra);
    if (rc != 0)
        return clattn__fail(NULL, CLATTN_ERROR_FORMAT, "%s: %s", fn, error);
    return CLATTN_OK;
}
