/*
 * The registry of Hugging Face encoder families (src/models/families/): every registered family
 * is complete, config.json's model_type picks the family as hf_model.c loads it (JinaBERT's claim
 * on model_type "bert"), an unknown model_type is refused naming it and listing the supported
 * ones, and each family refuses one of the config values it cannot compute, naming the key. A
 * family added to the registry without its case in `refusals` below fails
 * every_family_has_a_refusal_case. Host only: no device, no file.
 */
#include "common/test_util.h"
#include "models/families/family.h"

#include <jansson.h>
#include <string.h>

static json_t *parse(const char *text)
{
    json_error_t error;
    json_t *root = json_loads(text, JSON_DECODE_ANY, &error);
    if (!root)
        print_error("bad JSON in the test: %s: %s\n", error.text, text);
    assert_non_null(root);
    return root;
}

static void every_family_is_complete(void **state)
{
    (void)state;
    assert_true(clattn__family_count() > 0);
    assert_null(clattn__family_at(clattn__family_count()));
    for (size_t i = 0; i < clattn__family_count(); i++) {
        const clattn_family *f = clattn__family_at(i);
        assert_non_null(f);
        assert_non_null(f->name);
        assert_true(f->name[0] != '\0');
        assert_ptr_equal(clattn__family_named(f->name), f); /* names are unique */
        assert_non_null(f->model_types);
        assert_non_null(f->model_types[0]);
        assert_non_null(f->read_config);
        assert_non_null(f->layer_count_key);
        const clattn_family_tensors *t = &f->tensors;
        assert_non_null(t->prefix);
        assert_non_null(t->layers);
        assert_true(t->fixed_count > 0 && t->fixed);
        assert_true(t->layer_count > 0 && t->layer);
        /* the token embedding, by which a task model's prefix is recognised */
        bool embedding = false, packed = false;
        for (size_t k = 0; k < t->fixed_count; k++)
            embedding |= strcmp(t->fixed[k].ours, "embedding.weight") == 0;
        for (size_t k = 0; k < t->layer_count; k++)
            packed |= strcmp(t->layer[k].ours, "self_attn.in_proj_weight") == 0;
        if (!embedding)
            print_error("family %s: no embedding.weight\n", f->name);
        assert_true(embedding);
        /* q, k, v: three tensors to pack, or a packed one in the layer table */
        if (t->qkv_part)
            assert_true(t->qkv[0] && t->qkv[1] && t->qkv[2] && !packed);
        else
            assert_true(packed);
    }
}

/* Each model_type is taken by exactly one family without a claim (the others claim only some of
 * its configs): the choice never depends on the registry's order. */
static void each_model_type_has_one_family_for_the_rest(void **state)
{
    (void)state;
    for (size_t i = 0; i < clattn__family_count(); i++)
        for (const char *const *type = clattn__family_at(i)->model_types; *type; type++) {
            int unclaimed = 0;
            for (size_t j = 0; j < clattn__family_count(); j++) {
                const clattn_family *g = clattn__family_at(j);
                for (const char *const *u = g->model_types; *u; u++)
                    unclaimed += strcmp(*u, *type) == 0 && !g->claims;
            }
            if (unclaimed != 1)
                print_error("model_type \"%s\": %d families without a claim\n", *type,
                            unclaimed);
            assert_int_equal(unclaimed, 1);
        }
}

static const char *family_of(const char *config)
{
    json_t *root = parse(config);
    const clattn_family *f = NULL;
    clattn_status status = clattn__family_of_config("config.json", root, &f);
    json_decref(root);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return f->name;
}

static void model_type_picks_the_family(void **state)
{
    (void)state;
    assert_string_equal(family_of("{\"model_type\": \"bert\"}"), "bert");
    assert_string_equal(
        family_of("{\"model_type\": \"bert\", \"position_embedding_type\": \"absolute\"}"),
        "bert");
    assert_string_equal(
        family_of("{\"model_type\": \"bert\", \"position_embedding_type\": \"alibi\"}"),
        "jina_bert");
    assert_string_equal(family_of("{\"model_type\": \"mpnet\"}"), "mpnet");
    assert_string_equal(family_of("{\"model_type\": \"nomic_bert\"}"), "nomic_bert");
    assert_string_equal(family_of("{\"model_type\": \"roberta\"}"), "roberta");
    assert_string_equal(family_of("{\"model_type\": \"xlm-roberta\"}"), "roberta");
    assert_string_equal(family_of("{\"model_type\": \"modernbert\"}"), "modernbert");
}

static void refused_type(const char *config, const char *message)
{
    json_t *root = parse(config);
    const clattn_family *f = NULL;
    clattn_status status = clattn__family_of_config("dir/config.json", root, &f);
    json_decref(root);
    assert_int_equal(status, CLATTN_ERROR_UNSUPPORTED);
    assert_null(f);
    assert_string_equal(clattn_last_error(NULL), message);
}

static void unknown_model_type_is_refused_naming_it(void **state)
{
    (void)state;
#define SUPPORTED                                                                               \
    "(supported: \"bert\", \"mpnet\", \"nomic_bert\", \"roberta\", \"xlm-roberta\", \"modernbert\")"
    refused_type("{\"model_type\": \"gpt2\"}",
                 "clattn_encoder_load_hf: dir/config.json: model_type \"gpt2\" is not "
                 "supported " SUPPORTED);
    refused_type("{\"hidden_size\": 8}", "clattn_encoder_load_hf: dir/config.json: model_type "
                                         "\"(missing)\" is not supported " SUPPORTED);
    refused_type("{\"model_type\": 3}", "clattn_encoder_load_hf: dir/config.json: model_type "
                                        "\"(missing)\" is not supported " SUPPORTED);
    /* a family's name is not a model_type */
    refused_type("{\"model_type\": \"jina_bert\"}",
                 "clattn_encoder_load_hf: dir/config.json: model_type \"jina_bert\" is not "
                 "supported " SUPPORTED);
    /* the list names every registered model_type */
    refused_type("{\"model_type\": \"x\"}", "clattn_encoder_load_hf: dir/config.json: model_type "
                                            "\"x\" is not supported " SUPPORTED);
    for (size_t i = 0; i < clattn__family_count(); i++)
        for (const char *const *type = clattn__family_at(i)->model_types; *type; type++) {
            char quoted[80];
            snprintf(quoted, sizeof(quoted), "\"%s\"", *type);
            assert_non_null(strstr(clattn_last_error(NULL), quoted));
        }
#undef SUPPORTED
}

/* Per family: a config.json it reads, and a value of one key it refuses, naming the key. */
typedef struct refusal {
    const char *family, *config, *key, *value;
    clattn_status status;
    const char *message; /* a part of the message */
} refusal;

#define BERT_KEYS                                                                                  \
    "\"hidden_size\": 8, \"num_attention_heads\": 2, \"num_hidden_layers\": 1, "                  \
    "\"intermediate_size\": 16, \"max_position_embeddings\": 16, \"vocab_size\": 30, "            \
    "\"hidden_act\": \"gelu\""
static const refusal refusals[] = {
    {"bert", "{\"model_type\": \"bert\", \"type_vocab_size\": 2, " BERT_KEYS "}", "hidden_act",
     "\"swish\"", CLATTN_ERROR_UNSUPPORTED,
     "hidden_act \"swish\" is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)"},
    {"mpnet", "{\"model_type\": \"mpnet\", " BERT_KEYS "}", "relative_attention_num_buckets",
     "64", CLATTN_ERROR_UNSUPPORTED, "relative_attention_num_buckets must be 32"},
    {"nomic_bert",
     "{\"model_type\": \"nomic_bert\", \"n_embd\": 8, \"n_head\": 2, \"n_layer\": 1, "
     "\"vocab_size\": 30, \"activation_function\": \"swiglu\", \"rotary_emb_fraction\": 1.0}",
     "rotary_scaling_factor", "2", CLATTN_ERROR_UNSUPPORTED,
     "rotary_scaling_factor 2 is not supported (dynamic NTK scaling"},
    {"jina_bert",
     "{\"model_type\": \"bert\", \"position_embedding_type\": \"alibi\", "
     "\"feed_forward_type\": \"geglu\", \"type_vocab_size\": 2, " BERT_KEYS "}",
     "emb_pooler", "\"cls\"", CLATTN_ERROR_UNSUPPORTED, "emb_pooler must be null or \"mean\""},
    {"roberta",
     "{\"model_type\": \"xlm-roberta\", \"pad_token_id\": 1, \"type_vocab_size\": 1, " BERT_KEYS
     "}",
     "pad_token_id", "15", CLATTN_ERROR_FORMAT,
     "the field \"pad_token_id\" must be an integer from 0 to max_position_embeddings - 2 (14)"},
    {"modernbert",
     "{\"model_type\": \"modernbert\", \"hidden_size\": 8, \"num_attention_heads\": 2, "
     "\"num_hidden_layers\": 1, \"intermediate_size\": 16, \"vocab_size\": 30}",
     "partial_rotary_factor", "0.5", CLATTN_ERROR_UNSUPPORTED,
     "partial_rotary_factor 0.5 is not supported (only 1)"},
};
#undef BERT_KEYS

static const refusal *refusal_of(const char *family)
{
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(refusals[i].family, family) == 0)
            return &refusals[i];
    return NULL;
}

static void every_family_has_a_refusal_case(void **state)
{
    (void)state;
    for (size_t i = 0; i < clattn__family_count(); i++)
        if (!refusal_of(clattn__family_at(i)->name)) {
            print_error("family %s has no case in test_families.c's refusals\n",
                        clattn__family_at(i)->name);
            fail();
        }
}

static void each_family_refuses_a_value_naming_the_key(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const refusal *r = &refusals[i];
        const clattn_family *f = clattn__family_named(r->family);
        assert_non_null(f);
        assert_non_null(f->read_config);
        /* the config as it is: this family's, and read */
        json_t *root = parse(r->config);
        const clattn_family *picked = NULL;
        assert_int_equal(clattn__family_of_config("config.json", root, &picked), CLATTN_OK);
        assert_ptr_equal(picked, f);
        clattn_encoder_config cfg;
        clattn_status status = f->read_config("config.json", root, &cfg);
        if (status != CLATTN_OK)
            print_error("%s: %s\n", r->family, clattn_last_error(NULL));
        assert_int_equal(status, CLATTN_OK);
        /* with the key's value refused */
        json_object_set_new(root, r->key, parse(r->value));
        status = f->read_config("config.json", root, &cfg);
        json_decref(root);
        const char *message = clattn_last_error(NULL);
        if (status != r->status || !strstr(message, r->message) || !strstr(message, r->key))
            print_error("%s, %s = %s: status %d, \"%s\"; expected %d, \"...%s...\"\n",
                        r->family, r->key, r->value, (int)status, message, (int)r->status,
                        r->message);
        assert_int_equal(status, r->status);
        assert_non_null(strstr(message, "clattn_encoder_load_hf: config.json: "));
        assert_non_null(strstr(message, r->key));
        assert_non_null(strstr(message, r->message));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_family_is_complete),
        cmocka_unit_test(each_model_type_has_one_family_for_the_rest),
        cmocka_unit_test(model_type_picks_the_family),
        cmocka_unit_test(unknown_model_type_is_refused_naming_it),
        cmocka_unit_test(every_family_has_a_refusal_case),
        cmocka_unit_test(each_family_refuses_a_value_naming_the_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
