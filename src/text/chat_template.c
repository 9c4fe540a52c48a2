/* Chat templates rendered: the variables transformers' apply_chat_template gives a template,
 * the limits, and the one place the interpreter's failure exit (a longjmp) is caught. */
#include "chat_template.h"

#include "jinja.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_json(struct jinja *j, struct jscope *globals, const char *name, const json_t *value) {
  struct jv v = value ? jinja_from_json(j, value) : jv_none();
  jinja_scope_set(j, globals, jstr_c(name), v);
}

static void set_token(struct jinja *j, struct jscope *globals, const char *name, const char *token) {
  if (token)
    jinja_scope_set(j, globals, jstr_c(name), jv_str_copy(j, token, strlen(token)));
}

int clattn__chat_template_render(const char *template_text, size_t length, const struct clattn_chat_vars *vars,
                                 const struct clattn_chat_limits *limits, char **out, size_t *out_length,
                                 char *error, size_t error_size) {
  *out = NULL;
  if (out_length)
    *out_length = 0;
  if (error_size)
    error[0] = 0;
  struct clattn_chat_limits l = limits ? *limits : (struct clattn_chat_limits){0};
  /* volatile: read after a longjmp back into this frame */
  struct jinja *volatile j = calloc(1, sizeof *j);
  if (!j) {
    snprintf(error, error_size, "out of memory");
    return -1;
  }
  j->output_limit = l.max_output_bytes ? l.max_output_bytes : (size_t)16 << 20;
  j->arena_limit = l.max_memory_bytes ? l.max_memory_bytes : (size_t)256 << 20;
  j->step_limit = l.max_steps ? l.max_steps : 50000000ull;
  j->depth_limit = l.max_depth ? l.max_depth : 200;
  j->now = vars ? vars->now : 0;
  if (setjmp(j->fail)) {
    snprintf(error, error_size, "chat template: %s", j->error);
    jinja_arena_free(j);
    free(j);
    return -1;
  }
  if (!vars || !vars->messages || !json_is_array(vars->messages))
    jinja_fail(j, 0, "messages must be a JSON array");
  if (vars->extra && !json_is_object(vars->extra))
    jinja_fail(j, 0, "extra variables must be a JSON object");
  struct jtokens tokens = jinja_lex(j, template_text, length);
  struct jnode *root = jinja_parse(j, tokens);
  struct jscope *globals = jinja_scope_new(j, NULL);
  set_token(j, globals, "bos_token", vars->bos_token);
  set_token(j, globals, "eos_token", vars->eos_token);
  set_json(j, globals, "messages", vars->messages);
  set_json(j, globals, "tools", vars->tools);
  set_json(j, globals, "documents", vars->documents);
  jinja_scope_set(j, globals, jstr_c("add_generation_prompt"), jv_bool(vars->add_generation_prompt));
  if (vars->extra) {
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)vars->extra, key, value) {
      struct jv name = jv_str_copy(j, key, strlen(key));
      jinja_scope_set(j, globals, name.u.s, jinja_from_json(j, value));
    }
  }
  struct jbuf text = {0};
  jinja_render(j, root, globals, &text);
  char *result = malloc(text.n + 1);
  if (!result)
    jinja_fail(j, 0, "out of memory");
  if (text.n)
    memcpy(result, text.p, text.n);
  result[text.n] = 0;
  *out = result;
  if (out_length)
    *out_length = text.n;
  jinja_arena_free(j);
  free(j);
  return 0;
}
