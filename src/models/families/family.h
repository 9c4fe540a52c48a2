/* A Hugging Face encoder family (BERT, MPNet, NomicBERT, JinaBERT, RoBERTa, ModernBERT): which
 * config.json it takes, how it reads that file into the encoder's configuration, and the names
 * its model.safetensors gives the encoder's tensors. One file per family in this folder defines
 * one `clattn_family`; registry.c lists them and picks the family of a config.json; hf_model.c
 * loads a folder with the family it picked. docs/model-families.md describes each family. */
#ifndef CLATTN_FAMILY_H
#define CLATTN_FAMILY_H

#include "clattn/encoder.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The function every message of a folder's loading names. */
#define CLATTN_FAMILY_FN "clattn_encoder_load_hf"

/* One tensor of the encoder under the family's name. ours: the encoder's PyTorch name (after
 * "layers.<n>." for a layer's tensor); theirs: the file's (after the layers' prefix and "<n>."
 * for a layer's). A name "<tensor>|<k>" is half k (0 or 1) of the tensor's 2·d_ff rows (of a
 * bias's elements); "|zeros" is a zero bias of d_ff, for a tensor the family does not have. */
typedef struct clattn_family_name {
    const char *ours, *theirs;
} clattn_family_name;

/* The names of model.safetensors. */
typedef struct clattn_family_tensors {
    const char *prefix;   /* what a task model's file puts before every name ("bert.") */
    const char *layers;   /* the layers' names: "<layers><n>." ("encoder.layer.") */
    /* q, k and v in separate tensors "<layers><n>.<qkv_part><qkv[i]>.<weight|bias>", packed into
     * the encoder's in_proj_weight / in_proj_bias on the host; qkv_part NULL: the layer table
     * names in_proj_weight / in_proj_bias itself (a packed Wqkv) */
    const char *qkv_part;
    const char *qkv[3];
    const clattn_family_name *fixed; /* the tensors outside the layers (embedding.weight first) */
    size_t fixed_count;
    const clattn_family_name *layer; /* one layer's tensors */
    size_t layer_count;
} clattn_family_tensors;

typedef struct clattn_family {
    const char *name;                /* the family's name ("bert", "jina_bert", ...) */
    const char *const *model_types;  /* config.json's model_type values it takes; NULL-ended */
    /* NULL: the family takes every config.json of its model_types. Else it takes only those for
     * which claims() is true (JinaBERT: model_type "bert" with position_embedding_type "alibi"),
     * and the family without claims() of the same model_type takes the rest. */
    bool (*claims)(json_t *root);
    /* config.json (root, read from `path`, which messages name) into *cfg: every key the family
     * reads, its defaults, and a value the encoder cannot compute refused naming its key
     * (CLATTN_ERROR_UNSUPPORTED; a malformed value CLATTN_ERROR_FORMAT). */
    clattn_status (*read_config)(const char *path, json_t *root, clattn_encoder_config *cfg);
    /* config.json's key for the number of layers (named when model.safetensors holds another) */
    const char *layer_count_key;
    clattn_family_tensors tensors;
} clattn_family;

#define CLATTN_FAMILY_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the registry (registry.c) ---- */

/* The number of registered families, and family i (0 .. count - 1) in the registry's order. */
size_t clattn__family_count(void);
const clattn_family *clattn__family_at(size_t i);
/* The family called `name`, or NULL. */
const clattn_family *clattn__family_named(const char *name);
/* The family of a config.json (its model_type, and the families' claims): *family, or
 * CLATTN_ERROR_UNSUPPORTED recorded for `where` naming the model_type and listing the supported
 * ones ('model_type "x" is not supported (supported: "bert", "mpnet", ...)'). */
clattn_status clattn__family_of_config(const char *where, json_t *root,
                                       const clattn_family **family);
/* Records the same refusal for the model_type `model_type` (NULL: "(missing)"). */
clattn_status clattn__family_unsupported(const char *where, const char *model_type);

#endif /* CLATTN_FAMILY_H */
