/* abi_layout: the C layout of every public struct that the Python package mirrors with ctypes
 * (python/clattn/_api.py), and the enum values and #define constants it copies, printed as one
 * JSON object for tests/python/test_abi_layout.py, which compares them with the ctypes classes:
 *
 *   {"structs": {"clattn_device_info": {"size": 1352, "align": 8, "fields": [
 *        {"name": "platform_index", "offset": 0, "size": 4, "align": 4, "kind": "integer"}, ...]},
 *    ...},
 *    "constants": {"CLATTN_OK": 0, ...}}
 *
 * Every number comes from the compiler (sizeof, offsetof, alignof); only the names are written
 * here. "kind" is "float" (float, double), "integer" (any integer type, an enum included) or
 * "other" (a pointer, a function pointer, an array, a struct). Before printing, each struct must
 * be covered by its listed fields, in order, with no byte between two of them (or after the
 * last) but the padding their alignment needs; otherwise the program names the struct and the
 * bytes and exits 1 (the `abi-layout-table` test runs it alone). A field small enough to sit in
 * what would be padding escapes that check: the Python test compares the listed names with the
 * headers' text as well. A test program, installed nowhere.
 *
 *   abi_layout      (no arguments; exit 2 with any)
 *
 * A struct the package mirrors, a field added to one, or a constant it copies: add it here. */
#include <clattn/attention.h>
#include <clattn/common.h>
#include <clattn/context.h>
#include <clattn/cross_encoder.h>
#include <clattn/encoder.h>
#include <clattn/llm.h>
#include <clattn/llm_text.h>
#include <clattn/pretrained.h>
#include <clattn/tensor.h>
#include <clattn/tokenizer.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct field_layout {
    const char *name;
    size_t offset, size, align;
    const char *kind;
} field_layout;

typedef struct struct_layout {
    const char *name;
    size_t size, align;
    const field_layout *fields;
    size_t num_fields;
} struct_layout;

/* An array decays to a pointer in _Generic's controlling expression, and an enum is compatible
 * with the integer type the compiler chose for it: both land where they should. */
#define KIND_OF(expr)                                                                      \
    _Generic((expr),                                                                       \
        float: "float", double: "float", long double: "float",                             \
        _Bool: "integer", char: "integer", signed char: "integer", unsigned char: "integer", \
        short: "integer", unsigned short: "integer", int: "integer", unsigned: "integer",  \
        long: "integer", unsigned long: "integer", long long: "integer",                   \
        unsigned long long: "integer",                                                     \
        default: "other")

#define MEMBER(type, member) (((type *)0)->member)
#define FIELD(type, member)                                                                \
    {#member, offsetof(type, member), sizeof(MEMBER(type, member)),                        \
     __alignof__(MEMBER(type, member)), KIND_OF(MEMBER(type, member))}
#define STRUCT(type, fields)                                                               \
    {#type, sizeof(type), _Alignof(type), fields, sizeof(fields) / sizeof(fields[0])}

static const field_layout device_info[] = {
    FIELD(clattn_device_info, platform_index),
    FIELD(clattn_device_info, device_index),
    FIELD(clattn_device_info, platform_name),
    FIELD(clattn_device_info, name),
    FIELD(clattn_device_info, vendor),
    FIELD(clattn_device_info, driver_version),
    FIELD(clattn_device_info, opencl_version),
    FIELD(clattn_device_info, type),
    FIELD(clattn_device_info, compute_units),
    FIELD(clattn_device_info, max_clock_mhz),
    FIELD(clattn_device_info, global_mem_bytes),
    FIELD(clattn_device_info, local_mem_bytes),
    FIELD(clattn_device_info, local_mem_is_global),
    FIELD(clattn_device_info, max_alloc_bytes),
    FIELD(clattn_device_info, max_work_group_size),
    FIELD(clattn_device_info, fp16),
    FIELD(clattn_device_info, fp64),
};

static const field_layout context_params[] = {
    FIELD(clattn_context_params, device),
    FIELD(clattn_context_params, log_callback),
    FIELD(clattn_context_params, log_user_data),
    FIELD(clattn_context_params, log_level),
    FIELD(clattn_context_params, profiling),
    FIELD(clattn_context_params, workspace_limit_bytes),
    FIELD(clattn_context_params, precision),
    FIELD(clattn_context_params, reserved),
};

static const field_layout sentence_model_info[] = {
    FIELD(clattn_sentence_model_info, hidden_size),
    FIELD(clattn_sentence_model_info, max_length),
    FIELD(clattn_sentence_model_info, num_layers),
    FIELD(clattn_sentence_model_info, vocab_size),
    FIELD(clattn_sentence_model_info, pooling),
    FIELD(clattn_sentence_model_info, normalize),
    FIELD(clattn_sentence_model_info, default_prompt_name),
    FIELD(clattn_sentence_model_info, reserved),
};

static const field_layout embed_params[] = {
    FIELD(clattn_embed_params, max_length),
    FIELD(clattn_embed_params, batch_size),
    FIELD(clattn_embed_params, max_batch_tokens),
    FIELD(clattn_embed_params, pooling),
    FIELD(clattn_embed_params, normalize),
    FIELD(clattn_embed_params, progress),
    FIELD(clattn_embed_params, progress_user_data),
    FIELD(clattn_embed_params, prompt),
    FIELD(clattn_embed_params, prompt_name),
    FIELD(clattn_embed_params, reserved),
};

static const field_layout tokenizer_special[] = {
    FIELD(clattn_tokenizer_special, cls),
    FIELD(clattn_tokenizer_special, sep),
    FIELD(clattn_tokenizer_special, pad),
    FIELD(clattn_tokenizer_special, unk),
    FIELD(clattn_tokenizer_special, mask),
};

static const field_layout cross_encoder_info[] = {
    FIELD(clattn_cross_encoder_info, num_labels),
    FIELD(clattn_cross_encoder_info, labels),
    FIELD(clattn_cross_encoder_info, max_length),
    FIELD(clattn_cross_encoder_info, hidden_size),
    FIELD(clattn_cross_encoder_info, num_layers),
    FIELD(clattn_cross_encoder_info, vocab_size),
    FIELD(clattn_cross_encoder_info, type_vocab_size),
    FIELD(clattn_cross_encoder_info, model_type),
    FIELD(clattn_cross_encoder_info, architecture),
    FIELD(clattn_cross_encoder_info, default_activation),
    FIELD(clattn_cross_encoder_info, reserved),
};

static const field_layout cross_encoder_params[] = {
    FIELD(clattn_cross_encoder_params, max_length),
    FIELD(clattn_cross_encoder_params, truncate),
    FIELD(clattn_cross_encoder_params, batch_size),
    FIELD(clattn_cross_encoder_params, max_batch_tokens),
    FIELD(clattn_cross_encoder_params, activation),
    FIELD(clattn_cross_encoder_params, progress),
    FIELD(clattn_cross_encoder_params, progress_user_data),
    FIELD(clattn_cross_encoder_params, reserved),
};

static const field_layout sdpa_params[] = {
    FIELD(clattn_sdpa_params, scale),
    FIELD(clattn_sdpa_params, causal),
    FIELD(clattn_sdpa_params, attn_mask),
    FIELD(clattn_sdpa_params, attn_mask_kind),
    FIELD(clattn_sdpa_params, key_padding_mask),
    FIELD(clattn_sdpa_params, key_padding_mask_kind),
    FIELD(clattn_sdpa_params, attn_weights),
    FIELD(clattn_sdpa_params, path),
    FIELD(clattn_sdpa_params, enable_gqa),
    FIELD(clattn_sdpa_params, alibi_slopes),
    FIELD(clattn_sdpa_params, relative_bias),
    FIELD(clattn_sdpa_params, relative_max_distance),
    FIELD(clattn_sdpa_params, window),
    FIELD(clattn_sdpa_params, softcap),
    FIELD(clattn_sdpa_params, rope),
    FIELD(clattn_sdpa_params, reserved),
};

static const field_layout mha_config[] = {
    FIELD(clattn_mha_config, embed_dim),
    FIELD(clattn_mha_config, num_heads),
    FIELD(clattn_mha_config, head_dim_qk),
    FIELD(clattn_mha_config, head_dim_v),
    FIELD(clattn_mha_config, kdim),
    FIELD(clattn_mha_config, vdim),
    FIELD(clattn_mha_config, in_proj_bias),
    FIELD(clattn_mha_config, out_proj),
    FIELD(clattn_mha_config, out_proj_bias),
    FIELD(clattn_mha_config, num_kv_heads),
    FIELD(clattn_mha_config, reserved),
};

static const field_layout host_tensor[] = {
    FIELD(clattn_host_tensor, data),
    FIELD(clattn_host_tensor, ndim),
    FIELD(clattn_host_tensor, shape),
};

static const field_layout mha_weights[] = {
    FIELD(clattn_mha_weights, in_proj_weight),
    FIELD(clattn_mha_weights, q_proj_weight),
    FIELD(clattn_mha_weights, k_proj_weight),
    FIELD(clattn_mha_weights, v_proj_weight),
    FIELD(clattn_mha_weights, in_proj_bias),
    FIELD(clattn_mha_weights, out_proj_weight),
    FIELD(clattn_mha_weights, out_proj_bias),
};

static const field_layout mha_forward_params[] = {
    FIELD(clattn_mha_forward_params, key_padding_mask),
    FIELD(clattn_mha_forward_params, key_padding_mask_kind),
    FIELD(clattn_mha_forward_params, attn_mask),
    FIELD(clattn_mha_forward_params, attn_mask_kind),
    FIELD(clattn_mha_forward_params, causal),
    FIELD(clattn_mha_forward_params, attn_weights),
    FIELD(clattn_mha_forward_params, average_attn_weights),
    FIELD(clattn_mha_forward_params, path),
    FIELD(clattn_mha_forward_params, alibi_slopes),
    FIELD(clattn_mha_forward_params, relative_bias),
    FIELD(clattn_mha_forward_params, relative_max_distance),
    FIELD(clattn_mha_forward_params, window),
    FIELD(clattn_mha_forward_params, softcap),
    FIELD(clattn_mha_forward_params, rope),
    FIELD(clattn_mha_forward_params, reserved),
};

static const field_layout encoder_config[] = {
    FIELD(clattn_encoder_config, d_model),
    FIELD(clattn_encoder_config, nhead),
    FIELD(clattn_encoder_config, num_layers),
    FIELD(clattn_encoder_config, dim_feedforward),
    FIELD(clattn_encoder_config, head_dim_qk),
    FIELD(clattn_encoder_config, head_dim_v),
    FIELD(clattn_encoder_config, activation),
    FIELD(clattn_encoder_config, norm_first),
    FIELD(clattn_encoder_config, layer_norm_eps),
    FIELD(clattn_encoder_config, final_norm),
    FIELD(clattn_encoder_config, positional),
    FIELD(clattn_encoder_config, vocab_size),
    FIELD(clattn_encoder_config, max_positions),
    FIELD(clattn_encoder_config, type_vocab_size),
    FIELD(clattn_encoder_config, embedding_norm),
    FIELD(clattn_encoder_config, embedding_scale),
    FIELD(clattn_encoder_config, padding_idx),
    FIELD(clattn_encoder_config, relative_attention_buckets),
    FIELD(clattn_encoder_config, relative_attention_max_distance),
    FIELD(clattn_encoder_config, ffn_gated),
    FIELD(clattn_encoder_config, linear_no_bias),
    FIELD(clattn_encoder_config, norm_no_bias),
    FIELD(clattn_encoder_config, alibi),
    FIELD(clattn_encoder_config, rope_theta),
    FIELD(clattn_encoder_config, rotary_dim),
    FIELD(clattn_encoder_config, rope_interleaved),
    FIELD(clattn_encoder_config, first_norm1_identity),
    FIELD(clattn_encoder_config, global_every),
    FIELD(clattn_encoder_config, local_window),
    FIELD(clattn_encoder_config, local_rope_theta),
    FIELD(clattn_encoder_config, reserved),
};

static const field_layout encoder_forward_params[] = {
    FIELD(clattn_encoder_forward_params, key_padding_mask),
    FIELD(clattn_encoder_forward_params, key_padding_mask_kind),
    FIELD(clattn_encoder_forward_params, causal),
    FIELD(clattn_encoder_forward_params, position_offset),
    FIELD(clattn_encoder_forward_params, path),
    FIELD(clattn_encoder_forward_params, token_type_ids),
    FIELD(clattn_encoder_forward_params, attn_mask),
    FIELD(clattn_encoder_forward_params, attn_mask_kind),
    FIELD(clattn_encoder_forward_params, reserved),
};

static const field_layout llm_info[] = {
    FIELD(clattn_llm_info, architecture),
    FIELD(clattn_llm_info, vocab_size),
    FIELD(clattn_llm_info, context_length),
    FIELD(clattn_llm_info, num_layers),
    FIELD(clattn_llm_info, d_model),
    FIELD(clattn_llm_info, d_ff),
    FIELD(clattn_llm_info, num_heads),
    FIELD(clattn_llm_info, num_kv_heads),
    FIELD(clattn_llm_info, head_dim),
    FIELD(clattn_llm_info, tied_embeddings),
};

static const field_layout llm_sampling[] = {
    FIELD(clattn_llm_sampling, temperature),
    FIELD(clattn_llm_sampling, top_k),
    FIELD(clattn_llm_sampling, top_p),
    FIELD(clattn_llm_sampling, min_p),
    FIELD(clattn_llm_sampling, repetition_penalty),
    FIELD(clattn_llm_sampling, presence_penalty),
    FIELD(clattn_llm_sampling, frequency_penalty),
    FIELD(clattn_llm_sampling, seed),
};

static const field_layout llm_generate_options[] = {
    FIELD(clattn_llm_generate_options, sampling),
    FIELD(clattn_llm_generate_options, max_new_tokens),
    FIELD(clattn_llm_generate_options, stop),
    FIELD(clattn_llm_generate_options, stop_count),
    FIELD(clattn_llm_generate_options, special),
};

static const field_layout llm_generation[] = {
    FIELD(clattn_llm_generation, tokens),
    FIELD(clattn_llm_generation, token_count),
    FIELD(clattn_llm_generation, text),
    FIELD(clattn_llm_generation, text_length),
    FIELD(clattn_llm_generation, finish),
    FIELD(clattn_llm_generation, prompt_tokens),
    FIELD(clattn_llm_generation, prompt_seconds),
    FIELD(clattn_llm_generation, decode_tokens),
    FIELD(clattn_llm_generation, decode_seconds),
};

static const struct_layout structs[] = {
    STRUCT(clattn_device_info, device_info),
    STRUCT(clattn_context_params, context_params),
    STRUCT(clattn_sentence_model_info, sentence_model_info),
    STRUCT(clattn_embed_params, embed_params),
    STRUCT(clattn_tokenizer_special, tokenizer_special),
    STRUCT(clattn_cross_encoder_info, cross_encoder_info),
    STRUCT(clattn_cross_encoder_params, cross_encoder_params),
    STRUCT(clattn_sdpa_params, sdpa_params),
    STRUCT(clattn_mha_config, mha_config),
    STRUCT(clattn_host_tensor, host_tensor),
    STRUCT(clattn_mha_weights, mha_weights),
    STRUCT(clattn_mha_forward_params, mha_forward_params),
    STRUCT(clattn_encoder_config, encoder_config),
    STRUCT(clattn_encoder_forward_params, encoder_forward_params),
    STRUCT(clattn_llm_info, llm_info),
    STRUCT(clattn_llm_sampling, llm_sampling),
    STRUCT(clattn_llm_generate_options, llm_generate_options),
    STRUCT(clattn_llm_generation, llm_generation),
};

/* The constants the package copies; an enum the package maps to names (precisions, pooling,
 * activations, positional encodings) whole, so that the test sees a value it does not name. */
#define CONSTANT(name) {#name, (long long)(name)}
static const struct {
    const char *name;
    long long value;
} constants[] = {
    CONSTANT(CLATTN_OK),
    CONSTANT(CLATTN_ERROR_INVALID_ARGUMENT),
    CONSTANT(CLATTN_ERROR_IO),
    CONSTANT(CLATTN_DEVICE_STRING_SIZE),
    CONSTANT(CLATTN_MAX_DIMS),
    CONSTANT(CLATTN_MASK_BOOL),
    CONSTANT(CLATTN_MASK_ADDITIVE),
    CONSTANT(CLATTN_SCORES_DEFAULT),
    CONSTANT(CLATTN_SCORES_RAW),
    CONSTANT(CLATTN_SCORES_SIGMOID),
    CONSTANT(CLATTN_SCORES_SOFTMAX),
    CONSTANT(CLATTN_POOLING_MEAN),
    CONSTANT(CLATTN_POOLING_CLS),
    CONSTANT(CLATTN_PRECISION_FP32),
    CONSTANT(CLATTN_PRECISION_BF16),
    CONSTANT(CLATTN_PRECISION_INT8),
    CONSTANT(CLATTN_ACTIVATION_RELU),
    CONSTANT(CLATTN_ACTIVATION_GELU),
    CONSTANT(CLATTN_ACTIVATION_GELU_TANH),
    CONSTANT(CLATTN_ACTIVATION_SILU),
    CONSTANT(CLATTN_POSITIONAL_NONE),
    CONSTANT(CLATTN_POSITIONAL_SINUSOIDAL),
    CONSTANT(CLATTN_POSITIONAL_LEARNED),
    CONSTANT(CLATTN_POSITIONAL_LEARNED_PADDED),
};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static size_t align_up(size_t n, size_t align)
{
    return (n + align - 1) / align * align;
}

/* True when s's fields, in the table's order, cover s: each at the first offset its alignment
 * allows after the one before, and sizeof(s) the end of the last rounded up to s's alignment. */
static bool covers_struct(const struct_layout *s)
{
    size_t end = 0;
    for (size_t i = 0; i < s->num_fields; i++) {
        const field_layout *f = &s->fields[i];
        if (f->offset != align_up(end, f->align)) {
            fprintf(stderr,
                    "abi_layout: %s.%s is at offset %zu, not %zu: the table lists the fields "
                    "out of order or misses one in bytes %zu..%zu (add it to tests/abi_layout.c)\n",
                    s->name, f->name, f->offset, align_up(end, f->align), end, f->offset);
            return false;
        }
        end = f->offset + f->size;
    }
    if (s->size != align_up(end, s->align)) {
        fprintf(stderr,
                "abi_layout: %s is %zu bytes, its listed fields end at %zu: the table misses "
                "a field after %s (add it to tests/abi_layout.c)\n",
                s->name, s->size, end,
                s->num_fields ? s->fields[s->num_fields - 1].name : "the start");
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: abi_layout (no arguments): prints the public structs' layout "
                        "and constants as JSON\n");
        return 2;
    }
    bool complete = true;
    for (size_t i = 0; i < COUNT(structs); i++)
        complete = covers_struct(&structs[i]) && complete;
    if (!complete)
        return 1;

    printf("{\"structs\": {");
    for (size_t i = 0; i < COUNT(structs); i++) {
        const struct_layout *s = &structs[i];
        printf("%s\n  \"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": [", i ? "," : "",
               s->name, s->size, s->align);
        for (size_t j = 0; j < s->num_fields; j++) {
            const field_layout *f = &s->fields[j];
            printf("%s\n    {\"name\": \"%s\", \"offset\": %zu, \"size\": %zu, \"align\": %zu, "
                   "\"kind\": \"%s\"}",
                   j ? "," : "", f->name, f->offset, f->size, f->align, f->kind);
        }
        printf("]}");
    }
    printf("},\n\"constants\": {");
    for (size_t i = 0; i < COUNT(constants); i++)
        printf("%s\n  \"%s\": %lld", i ? "," : "", constants[i].name, constants[i].value);
    printf("}}\n");
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("abi_layout: writing the table");
        return 1;
    }
    return 0;
}
