/* What the example programs share: error messages with the program's name, and the exit
 * statuses (0 success, 2 usage error, 1 runtime error). */
#ifndef CLATTN_EXAMPLES_CLI_H
#define CLATTN_EXAMPLES_CLI_H

#include <clattn/context.h>

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define EXIT_USAGE 2
#define EXIT_RUNTIME 1

/* The program's name, put before every message ("encode: ..."). */
void cli_set_program(const char *name);
/* Whether usage_error prints (a job's processes other than rank 0 stay quiet: they all see the
 * same command line). */
void cli_set_usage_quiet(bool quiet);
/* Prints "<program>: <message>" and a pointer to --help on stderr; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<program>: <message>" on stderr; returns EXIT_RUNTIME. */
int runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<program>: note: <message>" on stderr: something the user should know that is not an
 * error. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A decimal count, digits only (strtoull alone would skip leading blanks and accept a sign, so
 * " -1" would wrap to 2^64 - 1), at most max. */
bool parse_count(const char *text, unsigned long long max, unsigned long long *out);

/* The rule for every file the programs write: only a new file or an existing regular file is
 * ever written or replaced. A symbolic link is followed (the file it names is replaced and the
 * link stays, as the library's writers do); anything else that exists under the name (a FIFO, a
 * character or block device, a directory, a socket, a link to one of them or a link to nothing)
 * is never opened, written, replaced or removed. Returns true when path may be written; else
 * false, with why in problem: a phrase after "it names" ("a FIFO, not a regular file"). */
bool cli_may_write(const char *path, char *problem, size_t problem_size);
/* What a file of this mode is, for messages: "a FIFO", "a directory", "a regular file", ... */
const char *cli_file_kind(mode_t mode);
/* Up front, before any work: refuses a file option (`option`, e.g. "--output") whose path is
 * empty, names something cli_may_write refuses, or is new in a folder that does not exist (or
 * is no directory). Returns -1 when path is NULL or may be written, else usage_error's status. */
int cli_check_output(const char *option, const char *path);
/* Renames the regular file `from` to `to` by the same rule, atomically: a free name takes it
 * (never replacing what appeared meanwhile); a taken name is exchanged with it and what came out
 * is removed when it is a regular file, else put back untouched. Returns 0; -1 when `to` names
 * something else (problem: "it names a FIFO, not a regular file"); else an errno (problem: the
 * system's reason). */
int cli_rename_over(const char *from, const char *to, char *problem, size_t problem_size);

/* Refuses an --output that is the same file (device and inode, so also through a link) as one
 * of the `count` files read (paths[i] may be NULL; names[i] is its option without "--"): the
 * result would replace an input. Returns -1 when output is NULL, new, or none of them, else
 * usage_error's status. */
int refuse_output_over_inputs(const char *output, const char *const *names,
                              const char *const *paths, int count);
/* Creates *ctx on `device` (--device's spec; NULL: the default device) with the other context
 * parameters at their defaults. Returns 0, else runtime_error's status (the library's message). */
int cli_context_create(const char *device, clattn_context **ctx);
/* The same with --precision's clattn_precision. */
int cli_context_create_precision(const char *device, int precision, clattn_context **ctx);
/* --precision fp32|bf16|int8 into *precision (a clattn_precision); false for anything else. */
bool cli_parse_precision(const char *text, int *precision);
/* The --precision line of a usage text. */
#define CLI_PRECISION_USAGE                                                                   \
    "  --precision P      fp32 (default), bf16 or int8: the GEMMs' number format (CPU devices\n" \
    "                     with oneDNN; bf16 needs AVX512_BF16 or AMX, int8 VNNI or AMX)\n"
/* Seconds on the monotonic clock (for durations). */
double cli_now_s(void);
/* Prints s as a JSON string (quoted, with ", \\ and control characters escaped) on stdout. */
void print_json_string(const char *s);

#endif /* CLATTN_EXAMPLES_CLI_H */
