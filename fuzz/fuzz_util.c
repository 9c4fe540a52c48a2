/* Helpers of the fuzz harnesses (fuzz_util.h). */
#include "fuzz_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>

static char temp_dir[512];

void fuzz_fail(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "invariant violated: ");
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    abort();
}

static void remove_temp_dir(void)
{
    DIR *d = opendir(temp_dir);
    if (d) {
        struct dirent *e;
        char path[1024];
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(path, sizeof(path), "%s/%s", temp_dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(temp_dir);
}

const char *fuzz_temp_path(const char *name)
{
    static char path[1024];
    if (!temp_dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(temp_dir, sizeof(temp_dir), "%s/clattn-fuzz.XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(temp_dir))
            fuzz_fail("cannot create a temporary directory %s", temp_dir);
        atexit(remove_temp_dir);
    }
    snprintf(path, sizeof(path), "%s/%s", temp_dir, name);
    return path;
}

void fuzz_write_bytes(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fuzz_fail("cannot write %s", path);
}
