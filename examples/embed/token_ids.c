/* embed --tokenize's output (token_ids.h): one growing clattn_tokens, emptied for each text. */
#include "token_ids.h"

static void write_ids(FILE *out, const int32_t *ids, size_t n)
{
    fputc('[', out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%d", i ? ", " : "", ids[i]);
    fputs("]\n", out);
}

clattn_status embed_write_token_ids(FILE *out, const clattn_tokenizer *tok,
                                    const char *const *texts, const size_t *lengths, size_t count,
                                    size_t max_length, size_t *failed)
{
    clattn_tokens tokens = {0};
    clattn_status s = CLATTN_OK;
    size_t i = 0;
    for (; i < count; i++) {
        tokens.count = 0;
        s = clattn_tokenizer_encode_tokens(tok, texts[i], lengths[i], max_length, 0, &tokens);
        if (s != CLATTN_OK)
            break;
        write_ids(out, tokens.ids, tokens.count);
    }
    clattn_tokens_free(&tokens);
    *failed = i;
    return s;
}
