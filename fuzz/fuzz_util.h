/* Shared by the fuzz harnesses: the libFuzzer entry points, a failing invariant, and a private
 * temporary directory (on /dev/shm when there is one: the writers fsync every file). */
#ifndef CLATTN_FUZZ_UTIL_H
#define CLATTN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Prints "invariant violated: ..." and aborts (libFuzzer saves the input as a crash). */
void fuzz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(__VA_ARGS__);                                                                \
    } while (0)

/* A path "<private temporary directory>/<name>"; the directory is removed at exit. */
const char *fuzz_temp_path(const char *name);
/* Writes size bytes to path; aborts on failure. */
void fuzz_write_bytes(const char *path, const uint8_t *data, size_t size);

#endif
