/*
 * Fuzz harness: chat templates (src/text/chat_template.h: the Jinja lexer, parser and evaluator)
 * on any template text, rendered with a fixed conversation (system, user, assistant with a tool
 * call, tool; a tool schema; extra variables) under small limits. Invariants beyond "no crash,
 * no hang, no sanitizer report":
 *   - on success the text is NUL-terminated at its length and within the output limit;
 *   - on failure nothing is returned and the message is not empty and starts with
 *     "chat template: ";
 *   - a second render of the same input gives the same status and bytes (no state is kept
 *     between renders; strftime_now is fixed).
 */
#include "fuzz_util.h"

#include "text/chat_template.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

static json_t *messages, *tools, *extra;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    json_error_t error;
    messages = json_loads(
        "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\\ud83d\\ude00 \\\"q\\\"\\n{{ x }}\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
        "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
        " {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 21.5}\"},"
        " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"Sunny\"}]}]",
        0, &error);
    tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\":"
                       " {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]",
                       0, &error);
    extra = json_loads("{\"enable_thinking\": false, \"n\": 3, \"f\": 0.5, \"none\": null}", 0, &error);
    FUZZ_CHECK(messages && tools && extra, "the fixed conversation does not parse");
    return 0;
}

static const struct clattn_chat_limits limits = {
    .max_output_bytes = 1 << 20,
    .max_memory_bytes = 64 << 20,
    .max_steps = 200000,
    .max_depth = 100,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!messages)
        LLVMFuzzerInitialize(NULL, NULL);
    struct clattn_chat_vars vars = {
        .messages = messages,
        .tools = size % 2 ? tools : NULL,
        .add_generation_prompt = size % 3 != 0,
        .bos_token = "<s>",
        .eos_token = "</s>",
        .extra = extra,
        .now = 1736899200,
    };
    char *out[2] = {NULL, NULL}, error[2][512];
    size_t length[2] = {0, 0};
    int rc[2];
    for (int k = 0; k < 2; k++) {
        rc[k] = clattn__chat_template_render((const char *)data, size, &vars, &limits, &out[k], &length[k], error[k],
                                             sizeof(error[k]));
        if (rc[k] == 0) {
            FUZZ_CHECK(out[k] && out[k][length[k]] == 0, "a rendering is not NUL-terminated at its length");
            FUZZ_CHECK(length[k] <= limits.max_output_bytes, "a rendering of %zu bytes beyond the limit", length[k]);
        } else {
            FUZZ_CHECK(rc[k] == -1 && !out[k], "a failed render returned text");
            FUZZ_CHECK(strncmp(error[k], "chat template: ", 15) == 0 && error[k][15],
                       "a failure without a message: \"%s\"", error[k]);
        }
    }
    FUZZ_CHECK(rc[0] == rc[1], "two renders of the same template disagree on success");
    if (rc[0] == 0)
        FUZZ_CHECK(length[0] == length[1] && memcmp(out[0], out[1], length[0]) == 0,
                   "two renders of the same template differ");
    else
        FUZZ_CHECK(strcmp(error[0], error[1]) == 0, "two renders fail differently");
    free(out[0]);
    free(out[1]);
    return 0;
}
