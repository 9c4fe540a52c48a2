/* Whole-file reads and little-endian float writes shared by the file formats (npy, safetensors). */
#include "file_io.h"
#include "runtime/file_replace.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

clattn_status clattn__open_regular(const char *function, const char *path, int *fd_out,
                                   size_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot stat: %s", strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "not a regular file (%s)",
                               clattn__file_kind(st.st_mode));
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size >= SIZE_MAX) {
        close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_TOO_LARGE,
                        "the file (%jd bytes) is too large to read into memory",
                        (intmax_t)st.st_size);
    }
    *fd_out = fd;
    *size = (size_t)st.st_size;
    return CLATTN_OK;
}

clattn_status clattn__read_at(const char *function, const char *path, int fd, size_t offset,
                              void *dst, size_t count)
{
    unsigned char *out = dst;
    size_t got = 0;
    int err = 0;
    while (got < count) {
        ssize_t r = pread(fd, out + got, count - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            err = errno;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got == count)
        return CLATTN_OK;
    if (err)
        return clattn__fail_in(function, path, CLATTN_ERROR_IO,
                               "read failed after %zu of %zu bytes at offset %zu: %s", got, count,
                               offset, strerror(err));
    return clattn__fail_in(function, path, CLATTN_ERROR_IO,
                           "the file shrank while being read (%zu of %zu bytes at offset %zu)",
                           got, count, offset);
}

/* Reads a whole regular file into a new malloc'd buffer (never more than the file's size). The
 * open never blocks (O_NONBLOCK: a FIFO without a writer would wait forever) and anything but a
 * regular file is rejected before a byte is read. */
clattn_status clattn__read_file(const char *function, const char *path, unsigned char **bytes,
                                size_t *size)
{
    int fd;
    size_t n;
    clattn_status status = clattn__open_regular(function, path, &fd, &n);
    if (status != CLATTN_OK)
        return status;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "cannot allocate %zu bytes to read the file", n);
    }
    status = clattn__read_at(function, path, fd, 0, buf, n);
    close(fd);
    if (status != CLATTN_OK) {
        free(buf);
        return status;
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

static char *join(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = malloc(la + lb + lc + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb);
        memcpy(s + la + lb, c, lc + 1);
    }
    return s;
}

/*
 * A write never touches the target until it has succeeded: the data goes to a new temporary file
 * in the target's directory, which clattn__finish_file renames over the target. A symbolic link
 * is followed (the file it names is replaced; the link stays); an existing target that is not a
 * regular file (a device, a FIFO, a directory) is refused, so it is neither written nor removed,
 * here and again, atomically, at the rename (clattn__replace_file: should one take the name meanwhile).
 * *target receives the path to rename over, *temp the temporary file's (both malloc'd).
 */
clattn_status clattn__create_file(const char *function, const char *path, FILE **f, char **target,
                                  char **temp)
{
    *f = NULL;
    *target = *temp = NULL;
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (!exists && errno != ENOENT)
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot create: %s",
                               strerror(errno));
    char *resolved = NULL;
    if (exists && S_ISLNK(st.st_mode)) {
        resolved = realpath(path, NULL);
        if (!resolved)
            return clattn__fail_in(function, path, CLATTN_ERROR_IO,
                                   "cannot create: the symbolic link cannot be followed: %s",
                                   strerror(errno));
        if (stat(resolved, &st) != 0) {
            int err = errno;
            free(resolved);
            return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot create: %s",
                                   strerror(err));
        }
    }
    if (exists && !S_ISREG(st.st_mode)) {
        free(resolved);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO,
                               "cannot create: it names %s, not a regular file (left unchanged)",
                               clattn__file_kind(st.st_mode));
    }
    char *name = resolved ? resolved : join(path, "", "");
    if (!name)
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    /* The directory part of the target ("" for a bare name) and the base name. */
    const char *slash = strrchr(name, '/');
    size_t dir_len = slash ? (size_t)(slash - name) + 1 : 0;
    char *dir = malloc(dir_len + 1);
    if (!dir) {
        free(name);
        return clattn__fail_in(function, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    memcpy(dir, name, dir_len);
    dir[dir_len] = '\0';
    char suffix[64];
    int fd = -1, err = 0;
    char *tmp = NULL;
    /* O_EXCL makes each name ours alone; a name taken by another writer is skipped. */
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(suffix, sizeof(suffix), ".tmp-%ld-%u", (long)getpid(), attempt);
        free(tmp);
        tmp = malloc(strlen(dir) + strlen(name + dir_len) + strlen(suffix) + 2);
        if (!tmp)
            break;
        sprintf(tmp, "%s.%s%s", dir, name + dir_len, suffix);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? 0600 : 0666);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    free(dir);
    if (fd < 0) {
        clattn_status status = tmp ? CLATTN_ERROR_IO : CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        free(tmp);
        free(name);
        return clattn__fail_in(function, path, status,
                               "cannot create a temporary file next to it: %s",
                               strerror(status == CLATTN_ERROR_IO ? err : ENOMEM));
    }
    if (exists) /* the replacement keeps the replaced file's permissions */
        (void)fchmod(fd, st.st_mode & 07777);
    *f = fdopen(fd, "wb");
    if (!*f) {
        err = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        free(name);
        return clattn__fail_in(function, path, CLATTN_ERROR_IO, "cannot create: %s",
                               strerror(err));
    }
    *target = name;
    *temp = tmp;
    return CLATTN_OK;
}

/* Closes the temporary file (flushed to the disk), then puts it at the target (clattn__replace_file);
 * on any failure removes the temporary file (which this process created) and nothing else. */
clattn_status clattn__finish_file(const char *function, const char *path, FILE *f, char *target,
                                  char *temp, bool ok)
{
    int err = ok ? 0 : errno;
    const char *kind = "something else";
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
        ok = false;
        err = errno;
    }
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && (err = clattn__replace_file(temp, target, &kind)) != 0)
        ok = false;
    clattn_status status = CLATTN_OK;
    if (err == CLATTN_REPLACE_STRANDED)
        status = clattn__fail_in(function, path, CLATTN_ERROR_IO,
                                 "%s took the name while the file was written and could not be "
                                 "put back: it lies at %s (nothing written)",
                                 kind, temp);
    else if (err == CLATTN_REPLACE_REFUSED)
        status = clattn__fail_in(function, path, CLATTN_ERROR_IO,
                                 "it names %s now, which took the name while the file was "
                                 "written: left unchanged, nothing written",
                                 kind);
    else if (!ok)
        status = clattn__fail_in(function, path, CLATTN_ERROR_IO, "write failed: %s (%s)",
                                 strerror(err > 0 ? err : EIO),
                                 "the previous file, if any, is unchanged");
    if (!ok && err != CLATTN_REPLACE_STRANDED)
        unlink(temp);
    free(temp);
    free(target);
    return status;
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
