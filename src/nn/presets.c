/* The paper's Table 3 configurations. */
#include "clattn/encoder.h"
#include "base/errors.h"

#include <stdio.h>
#include <string.h>

typedef struct preset {
    const char *name;
    size_t layers, d_model, d_ff, heads, d_k, d_v; /* 0 = base's value */
} preset;

/* Rows of the paper's Table 3; empty cells equal the base model. */
static const preset presets[] = {
    {"base", 6, 512, 2048, 8, 64, 64},
    {"big", 6, 1024, 4096, 16, 64, 64},
    {"A-h1", 0, 0, 0, 1, 512, 512},
    {"A-h4", 0, 0, 0, 4, 128, 128},
    {"A-h16", 0, 0, 0, 16, 32, 32},
    {"A-h32", 0, 0, 0, 32, 16, 16},
    {"B-dk16", 0, 0, 0, 0, 16, 0},
    {"B-dk32", 0, 0, 0, 0, 32, 0},
    {"C-N2", 2, 0, 0, 0, 0, 0},
    {"C-N4", 4, 0, 0, 0, 0, 0},
    {"C-N8", 8, 0, 0, 0, 0, 0},
    {"C-d256", 0, 256, 0, 0, 32, 32},
    {"C-d1024", 0, 1024, 0, 0, 128, 128},
    {"C-ff1024", 0, 0, 1024, 0, 0, 0},
    {"C-ff4096", 0, 0, 4096, 0, 0, 0},
};
#define PRESET_COUNT (sizeof(presets) / sizeof(presets[0]))

static const char *const preset_names[PRESET_COUNT + 1] = {
    "base",   "big",    "A-h1", "A-h4", "A-h16",  "A-h32",   "B-dk16",   "B-dk32",
    "C-N2",   "C-N4",   "C-N8", "C-d256", "C-d1024", "C-ff1024", "C-ff4096", NULL,
};

const char *const *clattn_encoder_preset_names(void)
{
    return preset_names;
}

static size_t or_base(size_t value, size_t base)
{
    return value ? value : base;
}

clattn_status clattn_encoder_preset(const char *name, clattn_encoder_config *config)
{
    static const char fn[] = "clattn_encoder_preset";
    CLATTN_CHECK_ARG(NULL, fn, name, "name is NULL");
    CLATTN_CHECK_ARG(NULL, fn, config, "config is NULL");
    const preset *base = &presets[0];
    for (size_t i = 0; i < PRESET_COUNT; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        clattn_encoder_config_default(config, or_base(p->d_model, base->d_model),
                                      or_base(p->heads, base->heads),
                                      or_base(p->layers, base->layers),
                                      or_base(p->d_ff, base->d_ff));
        config->head_dim_qk = or_base(p->d_k, base->d_k);
        config->head_dim_v = or_base(p->d_v, base->d_v);
        config->layer_norm_eps = 1e-6f;
        config->positional = CLATTN_POSITIONAL_SINUSOIDAL;
        return CLATTN_OK;
    }
    char names[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < PRESET_COUNT && len < sizeof(names); i++) {
        int n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", presets[i].name);
        if (n < 0)
            break;
        len += (size_t)n;
    }
    return clattn__fail_arg(NULL, fn,
                        "unknown preset '%s' (presets: %s)", name, names);
}
