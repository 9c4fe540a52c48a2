/* An LD_PRELOAD shim for tests/test_files.sh and tests/test_tune.sh: something takes a written
 * file's name while the program writes it, deterministically. When the program syncs a
 * temporary file that the library writes for the path in CLATTN_TEST_FIFO_AT_FSYNC (beside it:
 * ".NAME.tmp-..." for the .npy and safetensors writers, "NAME.PID.N.tmp" for the tuning cache;
 * just before they put it at NAME), a FIFO is made at that path first (a regular file there is
 * removed). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fsync(int fd)
{
    static int done;
    int (*real_fsync)(int);
    void *symbol = dlsym(RTLD_NEXT, "fsync");
    memcpy(&real_fsync, &symbol, sizeof(real_fsync)); /* ISO C has no object-to-function cast */
    const char *target = getenv("CLATTN_TEST_FIFO_AT_FSYNC");
    char link[64], name[4096], prefix[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = target && !done ? readlink(link, name, sizeof(name) - 1) : -1;
    if (n > 0) {
        name[n] = '\0';
        const char *base = strrchr(target, '/'), *synced = strrchr(name, '/');
        base = base ? base + 1 : target;
        synced = synced ? synced + 1 : name;
        size_t length = strlen(synced);
        snprintf(prefix, sizeof(prefix), ".%s.tmp-", base);
        bool writer_temp = strncmp(synced, prefix, strlen(prefix)) == 0;
        bool cache_temp = strncmp(synced, base, strlen(base)) == 0 &&
                          synced[strlen(base)] == '.' && length > 4 &&
                          strcmp(synced + length - 4, ".tmp") == 0;
        struct stat st;
        if (writer_temp || cache_temp) {
            done = 1;
            if (lstat(target, &st) == 0 && S_ISREG(st.st_mode))
                unlink(target);
            mkfifo(target, 0644);
        }
    }
    return real_fsync(fd);
}
