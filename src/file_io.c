/* Whole-file reads and little-endian float writes shared by the file formats (npy, safetensors). */
#include "file_io.h"

#include <jansson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Reads a whole regular file into a new malloc'd buffer (never more than the file's size). */
clattn_status clattn__read_file(const char *function, const char *path, unsigned char **bytes,
                                size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot stat: %s", strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "not a regular file");
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size >= SIZE_MAX) {
        fclose(f);
        return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                        "the file (%jd bytes) is too large to read into memory",
                        (intmax_t)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "cannot allocate %zu bytes to read the file", n);
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != n) {
        free(buf);
        if (err)
            return clattn__fail_in(function, path, CLATTN_ERROR_IO, "read failed after %zu of %zu "
                            "bytes: %s", got, n, strerror(err));
        return clattn__fail_in(function, path, CLATTN_ERROR_IO,
                        "the file shrank while being read (%zu of %zu bytes)", got, n);
    }
    *bytes = buf;
    *size = n;
    return CLATTN_OK;
}

/* Writes floats in little-endian byte order whatever the host's; false on a write error. */
bool clattn__write_floats(FILE *f, const float *data, size_t count)
{
    unsigned char chunk[4096];
    size_t per_chunk = sizeof(chunk) / 4;
    while (count > 0) {
        size_t n = count < per_chunk ? count : per_chunk;
        for (size_t i = 0; i < n; i++) {
            uint32_t bits;
            memcpy(&bits, &data[i], sizeof(bits));
            for (int b = 0; b < 4; b++)
                chunk[4 * i + (size_t)b] = (unsigned char)(bits >> (8 * b));
        }
        if (fwrite(chunk, 4, n, f) != n)
            return false;
        data += n;
        count -= n;
    }
    return true;
}


clattn_status clattn__create_file(const char *function, const char *path, FILE **f)
{
    *f = fopen(path, "wb");
    if (!*f)
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot create: %s",
                               strerror(errno));
    return CLATTN_OK;
}

clattn_status clattn__finish_file(const char *function, const char *path, FILE *f, bool ok)
{
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok)
        return CLATTN_OK;
    remove(path);
    return clattn__fail_in(function, path, CLATTN_ERROR_IO, "write failed: %s", strerror(err));
}

clattn_status clattn__read_json(const char *function, const char *path, json_t **root)
{
    *root = NULL;
    unsigned char *bytes = NULL;
    size_t size = 0;
    clattn_status status = clattn__read_file(function, path, &bytes, &size);
    if (status != CLATTN_OK)
        return status;
    json_error_t error;
    *root = json_loadb((const char *)bytes, size, JSON_REJECT_DUPLICATES, &error);
    free(bytes);
    if (!*root)
        return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT, "invalid JSON: %s (line %d)",
                               error.text, error.line);
    return CLATTN_OK;
}
