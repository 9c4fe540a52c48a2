/* What the families share in reading config.json (family_config.h). */
#include "family_config.h"

#include "base/errors.h"
#include "models/families/family.h"

#include <math.h>

clattn_status clattn__family_size(const char *path, json_t *root, const char *key, size_t *out)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" is missing", key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
        json_integer_value(v) > (json_int_t)1 << 31)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be a positive integer below 2^31", key);
    *out = (size_t)json_integer_value(v);
    return CLATTN_OK;
}

clattn_status clattn__family_number(const char *path, json_t *root, const char *key,
                                    double fallback, double *out)
{
    json_t *v = json_object_get(root, key);
    *out = !v || json_is_null(v) ? fallback : json_number_value(v);
    if (v && !json_is_null(v) && (!json_is_number(v) || !isfinite(*out)))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be a number", key);
    return CLATTN_OK;
}

clattn_status clattn__family_bool(const char *path, json_t *root, const char *key, bool fallback,
                                  bool *out)
{
    json_t *v = json_object_get(root, key);
    *out = !v || json_is_null(v) ? fallback : json_is_true(v);
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be true or false", key);
    return CLATTN_OK;
}

clattn_status clattn__family_whole_number(const char *path, const char *key, double value,
                                          double min, const char *why)
{
    if (value >= min && value < 1 << 30 && value == floor(value))
        return CLATTN_OK;
    return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                           "%s is %g: it must be a whole number from %g to 2^30%s", key, value,
                           min, why);
}

clattn_status clattn__family_refuse_true(const char *path, json_t *root, const char *const *keys,
                                         size_t count, const char *family)
{
    for (size_t i = 0; i < count; i++) {
        bool flag;
        clattn_status status = clattn__family_bool(path, root, keys[i], false, &flag);
        if (status)
            return status;
        if (flag)
            return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                                   "%s true is not supported (%s)", keys[i], family);
    }
    return CLATTN_OK;
}

clattn_status clattn__family_refuse_non_null(const char *path, json_t *root, const char *key,
                                             const char *why)
{
    json_t *v = json_object_get(root, key);
    if (v && !json_is_null(v))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "%s is not supported (only null%s)", key, why);
    return CLATTN_OK;
}
