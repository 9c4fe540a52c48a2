/*
 * chat's answers over one sequence of a cache that lives as long as the conversation: each turn's
 * prompt (the whole conversation, rendered and tokenized anew) shares its first tokens with what
 * the sequence already holds — the earlier turns and answers — so only the rest is run. The
 * sequence is cut back to the longest common token prefix of the two (clattn_llm_sequence_truncate)
 * and the new prompt's remaining tokens are run after it. A token's logits are the same bytes
 * whether it was run in one prompt, in chunks or in decode steps (clattn/llm.h), so the answers
 * are those of running every prompt whole.
 *
 * The answer is generated with a clattn_llm_generator (clattn/llm_text.h) over the whole prompt,
 * so the repetition penalty sees the whole conversation, as clattn_llm_generate does for a
 * prompt run whole; the same seed gives the same random stream each turn.
 */
#ifndef CLATTN_CHAT_CONVERSATION_H
#define CLATTN_CHAT_CONVERSATION_H

#include <clattn/clattn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct conversation {
    clattn_llm *llm;
    size_t vocab_size, context_length;
    clattn_llm_cache *cache; /* NULL until the first answer */
    size_t seq, capacity;
    int32_t *held;           /* the ids the sequence holds, in order [held_count] */
    size_t held_count;
    bool reuse;              /* false: every prompt is run whole */
} conversation;

/* What one answer gave (conversation_answer); clear with conversation_answer_clear. */
typedef struct conversation_answer {
    int32_t *tokens;         /* the generated ids (an end-of-generation token excluded) */
    size_t token_count;
    char *text;              /* the text shown (NUL-terminated) */
    size_t text_length;
    int finish;              /* a clattn_llm_finish */
    size_t prompt_tokens;    /* the prompt's ids */
    size_t cached_tokens;    /* of them, those the cache held: not run again */
    double prompt_seconds;   /* running the others */
    double decode_seconds;   /* the decode steps, sampling and detokenising included */
} conversation_answer;

/* A conversation with the model (which must outlive it). reuse: keep the cache between turns. */
void conversation_init(conversation *c, clattn_llm *llm, const clattn_llm_info *info, bool reuse);
void conversation_release(conversation *c);
void conversation_answer_clear(conversation_answer *a);

/* Answers the prompt's n ids (n >= 1; the whole conversation) with the options' sampling, stop
 * strings and max_new_tokens (>= 1; the prompt and the answer must fit in the model's context,
 * checked before any work). Each piece of text is passed to on_piece as it may be shown
 * (on_piece may be NULL). Returns 0, else runtime_error's status (the cause printed). */
int conversation_answer_ids(conversation *c, const clattn_llm_text *text, const int32_t *ids,
                            size_t n, const clattn_llm_generate_options *options,
                            void (*on_piece)(const char *piece, size_t length),
                            conversation_answer *answer);

#endif /* CLATTN_CHAT_CONVERSATION_H */
