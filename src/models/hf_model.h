/* Hugging Face BERT folders (hf_model.c): config.json into an encoder configuration, and
 * model.safetensors's BERT names into the encoder's weights. */
#ifndef CLATTN_HF_MODEL_H
#define CLATTN_HF_MODEL_H

#include "clattn/pretrained.h"

/* Reads dir/config.json (model_type "bert") into *config; errors name the file and the field. */
clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *config);
/* Loads dir/model.safetensors into the encoder (q/k/v packed into in_proj on the host once). */
clattn_status clattn__hf_load_weights(clattn_encoder *encoder, const char *dir);

#endif /* CLATTN_HF_MODEL_H */
