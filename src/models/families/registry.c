/* The registry of Hugging Face encoder families: one line each (FAMILIES below), and the choice
 * of a config.json's family. Adding a family: its file in this folder defining
 * `const clattn_family clattn__family_<x>` (family.h), its line here, its file in
 * src/models/meson.build, and its case in tests/test_families.c (docs/model-families.md). */
#include "models/families/family.h"

#include "base/errors.h"

#include <stdio.h>
#include <string.h>

/* The families, in the order the list of supported model_types names them. */
#define FAMILIES(X)                                                                              \
    X(bert)                                                                                      \
    X(mpnet)                                                                                     \
    X(nomic_bert)                                                                                \
    X(jina_bert)                                                                                 \
    X(roberta)                                                                                   \
    X(modernbert)

#define DECLARE_FAMILY(x) extern const clattn_family clattn__family_##x;
FAMILIES(DECLARE_FAMILY)
#define FAMILY_ENTRY(x) &clattn__family_##x,
static const clattn_family *const registry[] = {FAMILIES(FAMILY_ENTRY)};

size_t clattn__family_count(void)
{
    return CLATTN_FAMILY_COUNT_OF(registry);
}

const clattn_family *clattn__family_at(size_t i)
{
    return i < CLATTN_FAMILY_COUNT_OF(registry) ? registry[i] : NULL;
}

const clattn_family *clattn__family_named(const char *name)
{
    for (size_t i = 0; name && i < CLATTN_FAMILY_COUNT_OF(registry); i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

static bool takes_model_type(const clattn_family *f, const char *model_type)
{
    for (const char *const *t = f->model_types; *t; t++)
        if (strcmp(*t, model_type) == 0)
            return true;
    return false;
}

clattn_status clattn__family_unsupported(const char *where, const char *model_type)
{
    /* '"bert", "mpnet", ...': each model_type once, in the registry's order */
    char supported[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < CLATTN_FAMILY_COUNT_OF(registry); i++)
        for (const char *const *t = registry[i]->model_types; *t; t++) {
            bool listed = false;
            for (size_t j = 0; j < i && !listed; j++)
                listed = takes_model_type(registry[j], *t);
            if (!listed && used < sizeof(supported))
                used += (size_t)snprintf(supported + used, sizeof(supported) - used, "%s\"%s\"",
                                         used ? ", " : "", *t);
        }
    return clattn__fail_in(CLATTN_FAMILY_FN, where, CLATTN_ERROR_UNSUPPORTED,
                           "model_type \"%.64s\" is not supported (supported: %s)",
                           model_type ? model_type : "(missing)", supported);
}

clattn_status clattn__family_of_config(const char *where, json_t *root,
                                       const clattn_family **family)
{
    const char *model_type = json_string_value(json_object_get(root, "model_type"));
    const clattn_family *rest = NULL; /* the one without a claim */
    for (size_t i = 0; model_type && i < CLATTN_FAMILY_COUNT_OF(registry); i++) {
        const clattn_family *f = registry[i];
        if (!takes_model_type(f, model_type))
            continue;
        if (f->claims && f->claims(root)) {
            *family = f;
            return CLATTN_OK;
        }
        if (!f->claims && !rest)
            rest = f;
    }
    if (!rest)
        return clattn__family_unsupported(where, model_type);
    *family = rest;
    return CLATTN_OK;
}
