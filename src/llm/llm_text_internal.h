/* What llm_text.c and llm_generate.c share: the text object of clattn/llm_text.h. */
#ifndef CLATTN_LLM_TEXT_INTERNAL_H
#define CLATTN_LLM_TEXT_INTERNAL_H

#include "base/errors.h"
#include "text/chat_template.h"
#include "text/tokenizer_gguf.h"

struct clattn_llm_text {
    clattn__gguf_tokenizer *tok;
    char *chat_template; /* the file's tokenizer.chat_template, NULL when it has none */
    size_t chat_template_length;
};

#endif /* CLATTN_LLM_TEXT_INTERNAL_H */
