/* Error messages and number parsing shared by the example programs. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *program = "clattn";
static bool usage_quiet;

void cli_set_program(const char *name)
{
    program = name;
}

void cli_set_usage_quiet(bool quiet)
{
    usage_quiet = quiet;
}

int usage_error(const char *fmt, ...)
{
    if (usage_quiet)
        return EXIT_USAGE;
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n(run %s --help for the options)\n", program);
    va_end(args);
    return EXIT_USAGE;
}

int runtime_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
    return EXIT_RUNTIME;
}

void cli_note(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%s: note: ", program);
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
}

bool parse_count(const char *text, unsigned long long max, unsigned long long *out)
{
    if (!text[0])
        return false;
    for (const char *c = text; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || errno == ERANGE || v > max)
        return false;
    *out = v;
    return true;
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void print_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

const char *cli_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "a special file";
}

bool cli_may_write(const char *path, char *problem, size_t problem_size)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return true; /* a new file (a missing folder is the writer's error) */
        snprintf(problem, problem_size, "a path that cannot be examined (%s)", strerror(errno));
        return false;
    }
    if (S_ISLNK(st.st_mode)) {
        if (stat(path, &st) != 0) {
            snprintf(problem, problem_size, "a symbolic link that cannot be followed (%s)",
                     strerror(errno));
            return false;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(problem, problem_size, "a symbolic link to %s, not to a regular file",
                     cli_file_kind(st.st_mode));
            return false;
        }
        return true;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(problem, problem_size, "%s, not a regular file", cli_file_kind(st.st_mode));
        return false;
    }
    return true;
}

int cli_check_output(const char *option, const char *path)
{
    char problem[256];
    if (!path)
        return -1;
    if (!path[0])
        return usage_error("%s needs a file's path, not an empty string", option);
    if (!cli_may_write(path, problem, sizeof(problem)))
        return usage_error("%s %s: it names %s; only a regular file or a new one is written "
                           "(left unchanged)",
                           option, path, problem);
    struct stat st;
    if (lstat(path, &st) == 0)
        return -1;
    /* A new file: its folder must be there, or the work would be lost at the end. */
    const char *slash = strrchr(path, '/');
    char folder[4096];
    snprintf(folder, sizeof(folder), "%.*s",
             slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    if (stat(folder, &st) != 0)
        return usage_error("%s %s: its folder %s %s", option, path, folder,
                           errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return usage_error("%s %s: its folder %s is %s, not a directory", option, path, folder,
                           cli_file_kind(st.st_mode));
    return -1;
}

/* A look at to, then a plain rename (file systems without renameat2's flags). */
static int checked_rename(const char *from, const char *to, char *problem, size_t problem_size)
{
    struct stat st;
    if (lstat(to, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(problem, problem_size, "it names %s, not a regular file",
                 cli_file_kind(st.st_mode));
        return -1;
    }
    if (rename(from, to) == 0)
        return 0;
    snprintf(problem, problem_size, "%s", strerror(errno));
    return errno;
}

static bool flag_unsupported(int err)
{
    return err == EINVAL || err == ENOSYS || err == ENOTSUP || err == EXDEV;
}

int cli_rename_over(const char *from, const char *to, char *problem, size_t problem_size)
{
    struct stat st;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
            return 0;
        if (flag_unsupported(errno)) {
            if (link(from, to) == 0)
                return unlink(from), 0;
            if (errno != EEXIST)
                return checked_rename(from, to, problem, problem_size);
        } else if (errno != EEXIST) {
            snprintf(problem, problem_size, "%s", strerror(errno));
            return errno;
        }
        /* The name is taken: exchanged, then what came out is looked at. */
        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) != 0) {
            if (errno == ENOENT)
                continue; /* gone meanwhile */
            if (flag_unsupported(errno))
                return checked_rename(from, to, problem, problem_size);
            snprintf(problem, problem_size, "%s", strerror(errno));
            return errno;
        }
        bool seen = lstat(from, &st) == 0;
        if (seen && S_ISREG(st.st_mode))
            return unlink(from), 0; /* the regular file replaced */
        const char *kind = seen ? cli_file_kind(st.st_mode) : "something that cannot be examined";
        snprintf(problem, problem_size, "it names %s, not a regular file", kind);
        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) != 0)
            snprintf(problem, problem_size, "%s took its name and could not be put back: it lies "
                     "at %s now", kind, from);
        return -1;
    }
    snprintf(problem, problem_size, "its name came and went while it was looked at");
    return EAGAIN;
}

int refuse_output_over_inputs(const char *output, const char *const *names,
                              const char *const *paths, int count)
{
    struct stat out, in;
    if (!output || stat(output, &out) != 0)
        return -1; /* a new file */
    for (int i = 0; i < count; i++)
        if (paths[i] && stat(paths[i], &in) == 0 && in.st_dev == out.st_dev &&
            in.st_ino == out.st_ino)
            return usage_error("--output %s is the same file as --%s %s; refusing to overwrite "
                               "an input",
                               output, names[i], paths[i]);
    return -1;
}

int cli_context_create(const char *device, clattn_context **ctx)
{
    return cli_context_create_precision(device, CLATTN_PRECISION_FP32, ctx);
}

bool cli_parse_precision(const char *text, int *precision)
{
    static const char *const names[] = {"fp32", "bf16", "int8"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            *precision = i; /* CLATTN_PRECISION_FP32, _BF16, _INT8 */
            return true;
        }
    return false;
}

int cli_context_create_precision(const char *device, int precision, clattn_context **ctx)
{
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = device;
    params.precision = precision;
    *ctx = NULL;
    if (clattn_context_create(ctx, &params) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    return 0;
}
