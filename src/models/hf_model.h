/* Hugging Face encoder folders (hf_model.c): config.json into an encoder configuration by the
 * family of its model_type (families/registry.c; BERT, MPNet, NomicBERT, JinaBERT, RoBERTa and
 * XLM-RoBERTa, ModernBERT), and model.safetensors's names into the encoder's weights. */
#ifndef CLATTN_HF_MODEL_H
#define CLATTN_HF_MODEL_H

#include "clattn/pretrained.h"

/* Reads dir/config.json into *config with the family its model_type (and the families' claims)
 * picks, and the family's name (a static string: clattn_family's name, "bert", "jina_bert", ...)
 * into *family (may be NULL); errors name the file and the field. */
clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *config,
                                     const char **family);
/* Loads dir/model.safetensors with the tensor names of the family called `family` into the
 * encoder (q/k/v packed into in_proj on the host once). */
clattn_status clattn__hf_load_weights(clattn_encoder *encoder, const char *dir,
                                      const char *family);

#endif /* CLATTN_HF_MODEL_H */
