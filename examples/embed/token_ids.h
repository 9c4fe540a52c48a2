/*
 * embed --tokenize's output: each text's token ids (the tokenizer's single template, its special
 * tokens included) as a JSON array on a line of its own, each text tokenized once.
 */
#ifndef CLATTN_EXAMPLES_EMBED_TOKEN_IDS_H
#define CLATTN_EXAMPLES_EMBED_TOKEN_IDS_H

#include <clattn/tokenizer.h>

#include <stddef.h>
#include <stdio.h>

/*
 * Writes to `out`, for texts[0 .. count) in order (lengths[i] bytes of UTF-8 each), the line
 * "[id, id, ...]" of the text's ids, truncated to max_length ids (0: the tokenizer's default; as
 * clattn_tokenizer_encode_tokens takes it). Stops at the first text that cannot be tokenized:
 * returns its status (its message in clattn_last_error(NULL)) with *failed set to its index,
 * the lines before it written. Returns CLATTN_OK (*failed = count) when every line is written.
 */
clattn_status embed_write_token_ids(FILE *out, const clattn_tokenizer *tok,
                                    const char *const *texts, const size_t *lengths, size_t count,
                                    size_t max_length, size_t *failed);

#endif
