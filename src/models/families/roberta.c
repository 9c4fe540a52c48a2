/* RoBERTa and XLM-RoBERTa (transformers' RobertaModel, XLMRobertaModel): BERT's graph and tensor
 * names, positions counted from padding_idx + 1.
 *
 * config.json: model_type "roberta" or "xlm-roberta".
 *   read      BERT's keys (bert.h), pad_token_id
 *   defaults  layer_norm_eps 1e-12, pad_token_id 1 (RobertaConfig's)
 *   refused   BERT's refusals (feed_forward_type is not read); a pad_token_id that is not an
 *             integer from 0 to max_position_embeddings - 2 (CLATTN_ERROR_FORMAT)
 * Tensors: BERT's; "roberta." before each in a task model's file (RobertaForMaskedLM, ...).
 * Layer configuration: BERT's with positions LEARNED_PADDED from padding_idx = pad_token_id over
 * the non-padding ids (RobertaEmbeddings' create_position_ids_from_input_ids). The token type
 * table (type_vocab_size rows, 1 in the published checkpoints) is BERT's: row 0 is added to every
 * token. */
#include "base/errors.h"
#include "models/families/bert.h"

static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    static const clattn_bert_keys keys = {.token_types = true};
    clattn_status status = clattn__bert_read_keys(path, root, &keys, cfg);
    if (status)
        return status;
    json_t *v = json_object_get(root, "pad_token_id");
    json_int_t pad = v ? json_integer_value(v) : 1;
    if ((v && !json_is_integer(v)) || pad < 0 || pad + 1 >= (json_int_t)cfg->max_positions)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"pad_token_id\"%s must be an integer from 0 to "
                               "max_position_embeddings - 2 (%lld): positions start at "
                               "pad_token_id + 1",
                               v ? "" : " (1 when absent)", (long long)cfg->max_positions - 2);
    cfg->positional = CLATTN_POSITIONAL_LEARNED_PADDED;
    cfg->padding_idx = (int32_t)pad;
    return clattn__bert_check_positions(path, cfg);
}

static const char *const model_types[] = {"roberta", "xlm-roberta", NULL};

const clattn_family clattn__family_roberta = {
    .name = "roberta",
    .model_types = model_types,
    .read_config = read_config,
    .layer_count_key = "num_hidden_layers",
    .tensors = CLATTN_BERT_TENSORS("roberta.", clattn__bert_fixed, clattn__bert_layer),
};
