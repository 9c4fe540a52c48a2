/* Hugging Face encoder folders (hf_model.c: BERT, MPNet, NomicBERT, JinaBERT, ModernBERT):
 * config.json into an encoder configuration, and model.safetensors's names into the encoder's
 * weights. */
#ifndef CLATTN_HF_MODEL_H
#define CLATTN_HF_MODEL_H

#include "clattn/pretrained.h"

/* Reads dir/config.json (model_type "bert", JinaBERT's "bert" with position_embedding_type
 * "alibi", "mpnet", "nomic_bert" or "modernbert") into *config and the family's name (a static
 * string: "bert", "bert (JinaBERT)", "mpnet", "nomic_bert", "modernbert") into *model_type (may
 * be NULL); errors name the file and the field. */
clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *config,
                                     const char **model_type);
/* Loads dir/model.safetensors with the family's tensor names (model_type: the family's name) into
 * the encoder (q/k/v packed into in_proj on the host once). */
clattn_status clattn__hf_load_weights(clattn_encoder *encoder, const char *dir,
                                      const char *model_type);

#endif /* CLATTN_HF_MODEL_H */
