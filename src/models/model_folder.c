/* What sentence_model.c and cross_encoder.c share in loading a folder (model_folder.h). */
#include "model_folder.h"

#include "base/errors.h"
#include "formats/file_io.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

clattn_status clattn__folder_optional_json(const char *fn, const char *dir, const char *name,
                                           char *path, json_t **root)
{
    snprintf(path, 4096, "%s/%s", dir, name);
    *root = NULL;
    struct stat st;
    if (stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return CLATTN_OK;
    return clattn__read_json(fn, path, root);
}

clattn_status clattn__folder_check_tokenizer(const char *fn, const char *dir,
                                             const clattn_tokenizer *tokenizer,
                                             const clattn_encoder_config *cfg)
{
    if (clattn_tokenizer_vocab_size(tokenizer) <= cfg->vocab_size)
        return CLATTN_OK;
    return clattn__fail_in(fn, dir, CLATTN_ERROR_FORMAT,
                           "the tokenizer has %zu ids but the model's vocabulary only %zu",
                           clattn_tokenizer_vocab_size(tokenizer), cfg->vocab_size);
}

size_t clattn__folder_position_limit(const clattn_encoder_config *cfg)
{
    return cfg->positional == CLATTN_POSITIONAL_LEARNED_PADDED
               ? cfg->max_positions - (size_t)cfg->padding_idx - 1
               : cfg->max_positions;
}
