/* Chat templates: renders a model's Jinja chat template (a GGUF's tokenizer.chat_template, a
 * tokenizer_config.json's chat_template) to the prompt text, byte for byte as transformers'
 * apply_chat_template(messages, tokenize=False) renders it. The interpreter (jinja*.c) covers
 * the Jinja that real chat templates use; anything else is an error naming the construct and
 * its line, never a silently different prompt. */
#ifndef CLATTN_TEXT_CHAT_TEMPLATE_H
#define CLATTN_TEXT_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

struct json_t;

/* What a template sees, as transformers passes it to the template:
 *   messages   a JSON array of message objects ({"role": ..., "content": ...}, and whatever
 *              else the caller's messages hold: tool_calls, name, reasoning_content, ...)
 *   tools      a JSON array of tool schemas, or NULL (the template sees None)
 *   documents  a JSON array of documents, or NULL (None)
 *   add_generation_prompt
 *   bos_token, eos_token  the tokenizer's special tokens as text; NULL leaves them undefined
 *   extra      a JSON object of further variables (enable_thinking, custom ones), or NULL;
 *              its keys override the ones above, as apply_chat_template's kwargs do
 *   now        what strftime_now() formats: seconds since 1970 in UTC; 0 for the current
 *              local time (transformers' datetime.now()) */
struct clattn_chat_vars {
  const struct json_t *messages;
  const struct json_t *tools;
  const struct json_t *documents;
  bool add_generation_prompt;
  const char *bos_token;
  const char *eos_token;
  const struct json_t *extra;
  long long now;
};

/* Bounds that make any template, a hostile one included, finish: the longest output, the
 * memory one render may use, the evaluation steps, and the nesting depth. Zero fields take
 * the defaults (16 MiB, 256 MiB, 50 million, 200). */
struct clattn_chat_limits {
  size_t max_output_bytes;
  size_t max_memory_bytes;
  unsigned long long max_steps;
  int max_depth;
};

/* Renders `template_text` (length bytes, UTF-8) with the variables. On success returns 0 and
 * sets *out to a malloc'd, NUL-terminated string of *out_length bytes (the caller frees it).
 * On failure returns -1, sets *out to NULL and writes a message naming the construct and the
 * template line (for raise_exception: the template's own message) into error (error_size
 * bytes, always terminated). limits may be NULL. Thread-safe: a render shares no state. */
int clattn__chat_template_render(const char *template_text, size_t length, const struct clattn_chat_vars *vars,
                                 const struct clattn_chat_limits *limits, char **out, size_t *out_length,
                                 char *error, size_t error_size);

#endif /* CLATTN_TEXT_CHAT_TEMPLATE_H */
