/* What llm_text.c and llm_generate.c share: the text object of clattn/llm_text.h. */
#ifndef CLATTN_LLM_TEXT_INTERNAL_H
#define CLATTN_LLM_TEXT_INTERNAL_H

#include "base/errors.h"
#include "clattn/llm.h"
#include "formats/gguf.h"
#include "text/chat_template.h"
#include "text/tokenizer_gguf.h"

struct clattn_llm_text {
    clattn__gguf_tokenizer *tok;
    char *chat_template; /* the file's tokenizer.chat_template, NULL when it has none */
    size_t chat_template_length;
    /* The special tokens a chat template sees besides bos_token and eos_token, as transformers'
     * special_tokens_map names them: {"unk_token": "<unk>", ...}, one key for each
     * tokenizer.ggml.*_token_id of the file within the vocabulary. */
    struct json_t *special_tokens;
};

/* The open GGUF file of a model (llm.c), NULL for a Hugging Face folder's. */
const clattn_gguf *clattn__llm_gguf(const clattn_llm *llm);

#endif /* CLATTN_LLM_TEXT_INTERNAL_H */
