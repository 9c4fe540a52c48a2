/*
 * embed's corpus job (embed_job.h): every process of the job (job_comm.h) embeds its shards of
 * the input and writes their rows at their offsets into one .npy.
 *
 * Shards. The input's bytes are cut into shards of shard_bytes; a shard holds the lines that
 * start in its bytes. The cut depends on the input and shard_bytes only, never on the number
 * of processes, and each shard is embedded alone (its texts batched among themselves), so the
 * file is the same, byte for byte, whatever the number of processes. Process r takes the
 * contiguous shards [r J / K, (r + 1) J / K) of J, finds where they start by reading a few bytes
 * around each cut, and counts their lines; an all-gather of the counts gives every shard's first
 * row.
 *
 * Files. OUTPUT.partial is the .npy being written (its header by rank 0, rows by all with
 * collective writes), OUTPUT.progress records the finished shards (a 128-byte header naming the
 * job, then one byte per shard, '1' once its rows reached the storage). When every shard is done,
 * rank 0 renames OUTPUT.partial to OUTPUT and removes OUTPUT.progress; until then OUTPUT does not
 * exist. After a failure both are kept: --resume skips the finished shards.
 *
 * Rounds. Process r embeds its i-th unfinished shard in round i; every process joins every
 * round's collective write and sync (with no rows when it has none left) and then all learn
 * whether any failed. A failure stops the job after that round; the failing process names its
 * rank and the shard's lines.
 *
 * Test hooks: CLATTN_EMBED_FAIL_SHARD=J makes shard J fail (an error, as a bad line would);
 * CLATTN_EMBED_KILL_SHARD=J kills the process that reaches shard J (SIGKILL, as a crash would).
 */
#include "embed_job.h"

#include <clattn/clattn.h>

#include "cli.h"
#include "job_comm.h"
#include "text_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_HEADER_BYTES 128
#define READ_CHUNK ((size_t)1 << 20)

typedef struct rank_stats {
    double seconds; /* in clattn_sentence_model_embed */
    uint64_t texts, tokens, shards, resumed_shards;
    char device[CLATTN_DEVICE_STRING_SIZE];
    char node[64];
} rank_stats;

typedef struct job {
    const embed_job_settings *s;
    int fd;             /* the input */
    uint64_t file_size; /* bytes */
    struct timespec mtime;
    uint64_t shards;      /* J */
    uint64_t first, end;  /* this process's shards [first, end) */
    uint64_t *starts;     /* [end - first + 1]: byte where shard first + i starts */
    uint64_t *rows_before; /* [J + 1]: rows of the shards before shard j */
    char *done;           /* [J]: '1' when shard j is finished */
    size_t hidden;
    char npy_header[512]; /* the .npy's bytes before the rows */
    size_t header_bytes;
    char *partial_path, *progress_path;
    clattn_context *ctx;
    clattn_sentence_model *model;
    comm_file *data, *progress;
    rank_stats stats;
} job;

/* This process's first error since the last all_succeeded (printed there). */
static char pending_error[2048];

/* Keeps this process's error message for all_succeeded; returns 1. */
static int local_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int local_error(const char *fmt, ...)
{
    if (pending_error[0])
        return 1;
    va_list args;
    va_start(args, fmt);
    vsnprintf(pending_error, sizeof(pending_error), fmt, args);
    va_end(args);
    return 1;
}

/* Whether every process succeeded at a step. The errors are printed once: when every process
 * failed, rank 0's message alone (they saw the same problem); else each failing process's,
 * naming its rank, node and (in the message) the lines. */
static bool all_succeeded(int status)
{
    int failed = status != 0 || pending_error[0];
    int failures = (int)comm_sum_u64((uint64_t)failed);
    if (failed) {
        const char *message = pending_error[0] ? pending_error : "failed";
        if (failures == comm_size() && comm_rank() == 0)
            runtime_error("%s", message);
        else if (failures < comm_size() && comm_size() > 1)
            runtime_error("rank %d of %d (%s): %s", comm_rank(), comm_size(), comm_node_name(),
                          message);
        else if (comm_size() == 1)
            runtime_error("%s", message);
    }
    pending_error[0] = '\0';
    return failures == 0;
}

/* Rank 0's status of a step only it took (it printed the message), known to all. */
static int shared_status(int status)
{
    comm_broadcast(&status, sizeof(status));
    return status;
}

/* ---- the input ---- */

static int read_fully(const job *j, uint64_t offset, char *buffer, size_t bytes)
{
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = pread(j->fd, buffer + got, bytes - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return local_error("--input: %s: %s at byte %" PRIu64, j->s->input,
                               n < 0 ? strerror(errno) : "the file got shorter while reading",
                               offset + got);
        got += (size_t)n;
    }
    return 0;
}

/* The first line start at or after byte pos (0, a byte after a '\n', or the file's end). */
static int line_start_at(const job *j, uint64_t pos, char *chunk, uint64_t *start)
{
    if (pos == 0 || pos >= j->file_size) {
        *start = pos == 0 ? 0 : j->file_size;
        return 0;
    }
    for (uint64_t at = pos - 1; at < j->file_size;) {
        size_t n = (size_t)(j->file_size - at < READ_CHUNK ? j->file_size - at : READ_CHUNK);
        int rc = read_fully(j, at, chunk, n);
        if (rc)
            return rc;
        const char *newline = memchr(chunk, '\n', n);
        if (newline) {
            *start = at + (uint64_t)(newline - chunk) + 1;
            return 0;
        }
        at += n;
    }
    *start = j->file_size;
    return 0;
}

/* The lines of bytes [from, to) of the input (to is a line start or the end). */
static int count_range_lines(const job *j, uint64_t from, uint64_t to, char *chunk,
                             uint64_t *lines)
{
    *lines = 0;
    for (uint64_t at = from; at < to;) {
        size_t n = (size_t)(to - at < READ_CHUNK ? to - at : READ_CHUNK);
        int rc = read_fully(j, at, chunk, n);
        if (rc)
            return rc;
        at += n;
        *lines += count_lines(chunk, n, at == j->file_size);
    }
    return 0;
}

/* Where this process's shards start and how many lines each shard has (all of them, from every
 * process). */
static int plan_shards(job *j)
{
    uint64_t count = j->end - j->first;
    char *chunk = malloc(READ_CHUNK);
    uint64_t *mine = calloc(count ? count : 1, sizeof(uint64_t));
    uint64_t *lines = calloc(j->shards, sizeof(uint64_t));
    j->starts = calloc(count + 1, sizeof(uint64_t));
    j->rows_before = calloc(j->shards + 1, sizeof(uint64_t));
    int rc = chunk && mine && lines && j->starts && j->rows_before
                 ? 0
                 : local_error("out of memory planning %" PRIu64 " shards", j->shards);
    for (uint64_t i = 0; i <= count && !rc; i++)
        rc = line_start_at(j, (j->first + i) * j->s->shard_bytes, chunk, &j->starts[i]);
    for (uint64_t i = 0; i < count && !rc; i++)
        rc = count_range_lines(j, j->starts[i], j->starts[i + 1], chunk, &mine[i]);
    if (all_succeeded(rc)) {
        int size = comm_size();
        int *counts = calloc((size_t)size, sizeof(int));
        if (!counts)
            abort(); /* a few bytes per process, after the plan's allocations succeeded */
        for (int r = 0; r < size; r++)
            counts[r] = (int)((uint64_t)(r + 1) * j->shards / (uint64_t)size -
                              (uint64_t)r * j->shards / (uint64_t)size);
        comm_allgather_u64(mine, counts, lines);
        free(counts);
        for (uint64_t s = 0; s < j->shards; s++)
            j->rows_before[s + 1] = j->rows_before[s] + lines[s];
    } else {
        rc = 1;
    }
    free(chunk), free(mine), free(lines);
    return rc;
}

/* ---- the model ---- */

/* The device: --device, else $CLATTN_DEVICE, else (under MPI) the GPUs of the node round-robin
 * by local rank, else the default device. */
static int open_model(job *j)
{
    char spec[32];
    const char *device = j->s->device;
    const char *env = getenv("CLATTN_DEVICE");
    if (!device && !(env && env[0]) && comm_is_mpi()) {
        clattn_device_info infos[64];
        size_t count = 0, gpus = 0;
        if (clattn_list_devices(infos, 64, &count) == CLATTN_OK) {
            for (size_t i = 0; i < count && i < 64; i++)
                gpus += infos[i].type == CLATTN_DEVICE_TYPE_GPU;
            size_t pick = (size_t)comm_local_rank() % (gpus ? gpus : 1);
            for (size_t i = 0; i < count && i < 64 && gpus; i++)
                if (infos[i].type == CLATTN_DEVICE_TYPE_GPU && pick-- == 0) {
                    snprintf(spec, sizeof(spec), "%u:%u", infos[i].platform_index,
                             infos[i].device_index);
                    device = spec;
                    break;
                }
        }
    }
    clattn_context_params cp;
    clattn_context_params_default(&cp);
    cp.device = device;
    if (clattn_context_create(&j->ctx, &cp) != CLATTN_OK)
        return local_error("%s", clattn_last_error(NULL));
    clattn_sentence_model_info info;
    if (clattn_sentence_model_load(j->ctx, &j->model, j->s->model) != CLATTN_OK ||
        clattn_sentence_model_get_info(j->model, &info) != CLATTN_OK)
        return local_error("--model: %s", clattn_last_error(j->ctx));
    j->hidden = info.hidden_size;
    clattn_device_info dev;
    clattn_context_device_info(j->ctx, &dev);
    snprintf(j->stats.device, sizeof(j->stats.device), "%s", dev.name);
    snprintf(j->stats.node, sizeof(j->stats.node), "%s", comm_node_name());
    return 0;
}

/* ---- the output and progress files ---- */

/* FNV-1a: the job's identity in the progress file. */
static uint64_t fnv1a(const char *text)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return h;
}

/* The progress file's header: the job (input, its size and time, model, options, shape). */
static void progress_header(const job *j, char header[PROGRESS_HEADER_BYTES])
{
    const embed_job_settings *s = j->s;
    char key[8192];
    snprintf(key, sizeof(key),
             "input=%s size=%" PRIu64 " mtime=%lld.%09ld model=%s max_length=%zu batch_size=%zu "
             "pooling=%d normalize=%d shard_bytes=%" PRIu64,
             s->input, j->file_size, (long long)j->mtime.tv_sec, j->mtime.tv_nsec, s->model,
             s->max_length, s->batch_size, s->pooling, !s->no_normalize, s->shard_bytes);
    memset(header, ' ', PROGRESS_HEADER_BYTES);
    int n = snprintf(header, PROGRESS_HEADER_BYTES,
                     "clattn-embed progress 1 shards=%" PRIu64 " rows=%" PRIu64
                     " hidden=%zu job=%016" PRIx64,
                     j->shards, j->rows_before[j->shards], j->hidden, fnv1a(key));
    header[n] = ' ';
    header[PROGRESS_HEADER_BYTES - 1] = '\n';
}

static uint64_t data_bytes(const job *j)
{
    return j->header_bytes + j->rows_before[j->shards] * j->hidden * sizeof(float);
}

/* Rank 0, --resume: the finished shards from the progress file, when it is this job's. Returns
 * 0 (done filled, all '0' when there is nothing to resume: *found false), else 1. */
static int read_progress(job *j, const char *header, bool *found)
{
    *found = false;
    int fd = open(j->progress_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0
                               : runtime_error("--resume: %s: %s", j->progress_path,
                                               strerror(errno));
    char theirs[PROGRESS_HEADER_BYTES];
    struct stat partial;
    bool ok = pread(fd, theirs, sizeof(theirs), 0) == (ssize_t)sizeof(theirs) &&
              pread(fd, j->done, j->shards, PROGRESS_HEADER_BYTES) == (ssize_t)j->shards;
    close(fd);
    if (!ok || memcmp(theirs, header, PROGRESS_HEADER_BYTES) != 0)
        return runtime_error("--resume: %s records another job (a different input, model, "
                             "option or --shard-size) or is damaged; remove it and %s to start "
                             "over",
                             j->progress_path, j->partial_path);
    for (uint64_t s = 0; s < j->shards; s++)
        if (j->done[s] != '0' && j->done[s] != '1')
            return runtime_error("--resume: %s is damaged (shard %" PRIu64 "'s record is "
                                 "neither 0 nor 1); remove it and %s to start over",
                                 j->progress_path, s, j->partial_path);
    if (stat(j->partial_path, &partial) != 0 || (uint64_t)partial.st_size != data_bytes(j))
        return runtime_error("--resume: %s is missing or not %" PRIu64 " bytes; remove %s to "
                             "start over",
                             j->partial_path, data_bytes(j), j->progress_path);
    *found = true;
    return 0;
}

/* Rank 0: a new progress file (all shards to do), refusing to replace an earlier job's. */
static int create_progress(job *j, const char *header)
{
    int fd = open(j->progress_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST)
        return runtime_error("%s exists: an earlier run into %s stopped part-way; add --resume "
                             "to finish it, or remove %s and %s to start over",
                             j->progress_path, j->s->output, j->progress_path, j->partial_path);
    if (fd < 0)
        return runtime_error("%s: cannot create: %s", j->progress_path, strerror(errno));
    memset(j->done, '0', j->shards);
    bool ok = pwrite(fd, header, PROGRESS_HEADER_BYTES, 0) == PROGRESS_HEADER_BYTES &&
              pwrite(fd, j->done, j->shards, PROGRESS_HEADER_BYTES) == (ssize_t)j->shards &&
              fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok) {
        unlink(j->progress_path);
        return runtime_error("%s: cannot write: %s", j->progress_path, strerror(saved));
    }
    if (unlink(j->partial_path) != 0 && errno != ENOENT) /* a stale one of ours */
        return runtime_error("%s: cannot remove: %s", j->partial_path, strerror(errno));
    return 0;
}

/* Opens (and on a new job sizes and heads) OUTPUT.partial and OUTPUT.progress on every process.
 * Sets *resumed to whether an earlier run's shards are kept. */
static int open_files(job *j, bool *resumed)
{
    char header[PROGRESS_HEADER_BYTES], error[1024];
    progress_header(j, header);
    int rc = 0;
    *resumed = false;
    if (comm_rank() == 0) {
        rc = j->s->resume ? read_progress(j, header, resumed) : 0;
        if (!rc && !*resumed)
            rc = create_progress(j, header);
    }
    if (shared_status(rc))
        return 1;
    comm_broadcast(resumed, sizeof(*resumed));
    comm_broadcast(j->done, j->shards);
    if (comm_file_open(&j->progress, j->progress_path, false, error, sizeof(error)) ||
        comm_file_open(&j->data, j->partial_path, !*resumed, error, sizeof(error)))
        return comm_rank() == 0 ? runtime_error("%s", error) : 1;
    if (*resumed)
        return 0;
    if (comm_file_set_size(j->data, data_bytes(j), error, sizeof(error)))
        return comm_rank() == 0 ? runtime_error("%s: %s", j->partial_path, error) : 1;
    rc = comm_rank() == 0 ? comm_file_write_at(j->data, 0, j->npy_header, j->header_bytes, error,
                                               sizeof(error))
                          : 0;
    if (rc)
        local_error("%s: %s", j->partial_path, error);
    if (!all_succeeded(rc))
        return 1;
    return 0;
}

/* ---- the shards ---- */

static long long hook(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? atoll(v) : -1;
}

/* Embeds shard s into *rows (allocated, [lines, hidden]). */
static int embed_shard(job *j, uint64_t s, float **rows, uint64_t *lines)
{
    uint64_t from = j->starts[s - j->first], to = j->starts[s - j->first + 1];
    uint64_t first_line = j->rows_before[s] + 1, count = j->rows_before[s + 1] - j->rows_before[s];
    *lines = count;
    *rows = NULL;
    if (count == 0)
        return 0;
    if (hook("CLATTN_EMBED_KILL_SHARD") == (long long)s)
        raise(SIGKILL);
    if (hook("CLATTN_EMBED_FAIL_SHARD") == (long long)s)
        return local_error("lines %" PRIu64 "-%" PRIu64 ": failing as CLATTN_EMBED_FAIL_SHARD "
                           "asks",
                           first_line, first_line + count - 1);
    char *bytes = malloc(to - from ? (size_t)(to - from) : 1);
    *rows = malloc((size_t)count * j->hidden * sizeof(float));
    const char **texts = NULL;
    size_t *lengths = NULL, found = 0, tokens = 0;
    int rc = bytes && *rows ? read_fully(j, from, bytes, (size_t)(to - from))
                            : local_error("lines %" PRIu64 "-%" PRIu64 ": out of memory",
                                          first_line, first_line + count - 1);
    if (!rc && !split_lines(bytes, (size_t)(to - from), &texts, &lengths, &found))
        rc = local_error("out of memory splitting %" PRIu64 " lines", count);
    if (!rc && found != count)
        rc = local_error("--input: %s changed while embedding it (lines %" PRIu64 "-%" PRIu64
                         ")",
                         j->s->input, first_line, first_line + count - 1);
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    params.max_length = j->s->max_length;
    params.batch_size = j->s->batch_size;
    params.pooling = j->s->pooling;
    if (j->s->no_normalize)
        params.normalize = 0;
    double start = cli_now_s();
    if (!rc && clattn_sentence_model_embed(j->model, texts, lengths, count, *rows, &params,
                                           &tokens) != CLATTN_OK)
        rc = local_error("lines %" PRIu64 "-%" PRIu64 " (texts[i] is line %" PRIu64 " + i): %s",
                         first_line, first_line + count - 1, first_line,
                         clattn_last_error(j->ctx));
    j->stats.seconds += cli_now_s() - start;
    if (!rc)
        j->stats.texts += count, j->stats.tokens += tokens, j->stats.shards++;
    free(bytes), free(texts), free(lengths);
    return rc;
}

/* One line on stderr from rank 0: texts done by all processes, texts/s over all. */
static void show_progress(const job *j, uint64_t done, uint64_t fresh, double elapsed,
                          bool last)
{
    uint64_t total = j->rows_before[j->shards];
    bool terminal = isatty(2);
    fprintf(stderr, "%s%" PRIu64 "/%" PRIu64 " texts, %.0f texts/s over %d process%s%s",
            terminal ? "\r" : "", done, total, elapsed > 0 ? (double)fresh / elapsed : 0.0,
            comm_size(), comm_size() > 1 ? "es" : "", terminal && !last ? "" : "\n");
    fflush(stderr);
}

/* The rounds; returns 0 when every shard is done. */
static int run_rounds(job *j, double *seconds)
{
    uint64_t *pending = calloc(j->end - j->first + 1, sizeof(uint64_t)), count = 0;
    if (!all_succeeded(pending ? 0 : local_error("out of memory"))) {
        free(pending);
        return 1;
    }
    for (uint64_t s = j->first; s < j->end; s++) {
        if (j->done[s] == '1')
            j->stats.resumed_shards++;
        else
            pending[count++] = s;
    }
    uint64_t resumed_rows = 0;
    for (uint64_t s = 0; s < j->shards; s++)
        if (j->done[s] == '1')
            resumed_rows += j->rows_before[s + 1] - j->rows_before[s];
    int rounds = comm_max_int((int)count), failed = 0;
    bool show = comm_rank() == 0 && (j->s->progress || isatty(2));
    double start = cli_now_s(), shown = start;
    size_t row_bytes = j->hidden * sizeof(float);
    char error[1024];
    for (int round = 0; round < rounds && !failed; round++) {
        uint64_t s = (uint64_t)round < count ? pending[round] : j->shards, lines = 0;
        float *rows = NULL;
        int rc = s < j->shards ? embed_shard(j, s, &rows, &lines) : 0;
        uint64_t at = j->header_bytes + (s < j->shards ? j->rows_before[s] : 0) * row_bytes;
        int wrote = comm_file_write_at_all(j->data, at, rows, row_bytes, rc ? 0 : lines, error,
                                           sizeof(error));
        if (!rc && wrote)
            rc = local_error("%s: %s", j->partial_path, error);
        if (comm_file_sync(j->data, error, sizeof(error)) && !rc)
            rc = local_error("%s: %s", j->partial_path, error);
        if (!rc && s < j->shards &&
            comm_file_write_at(j->progress, PROGRESS_HEADER_BYTES + s, "1", 1, error,
                               sizeof(error)))
            rc = local_error("%s: %s", j->progress_path, error);
        if (comm_file_sync(j->progress, error, sizeof(error)) && !rc)
            rc = local_error("%s: %s", j->progress_path, error);
        free(rows);
        failed = !all_succeeded(rc);
        uint64_t fresh = comm_sum_u64(j->stats.texts);
        double now = cli_now_s();
        bool last = round + 1 == rounds;
        if (show && (now - shown >= 1.0 || last || failed)) {
            show_progress(j, resumed_rows + fresh, fresh, now - start, last || failed);
            shown = now;
        }
    }
    *seconds = comm_max_double(cli_now_s() - start);
    free(pending);
    return failed;
}

/* ---- statistics ---- */

static void print_json(const job *j, const rank_stats *all, double load_s, double seconds)
{
    uint64_t texts = 0, tokens = 0, resumed = 0;
    for (int r = 0; r < comm_size(); r++)
        texts += all[r].texts, tokens += all[r].tokens, resumed += all[r].resumed_shards;
    printf("{\"model\": ");
    print_json_string(j->s->model);
    printf(", \"device\": ");
    print_json_string(all[0].device);
    printf(", \"processes\": %d, \"count\": %" PRIu64 ", \"hidden\": %zu, \"shards\": %" PRIu64
           ", \"resumed_shards\": %" PRIu64 ", \"texts\": %" PRIu64 ", \"tokens\": %" PRIu64
           ", \"load_s\": %.3f, \"seconds\": %.3f, \"texts_per_s\": %.1f, \"tokens_per_s\": %.1f"
           ", \"output\": ",
           comm_size(), j->rows_before[j->shards], j->hidden, j->shards, resumed, texts, tokens,
           load_s, seconds, seconds > 0 ? (double)texts / seconds : 0.0,
           seconds > 0 ? (double)tokens / seconds : 0.0);
    print_json_string(j->s->output);
    printf(", \"per_process\": [");
    for (int r = 0; r < comm_size(); r++) {
        printf("%s{\"rank\": %d, \"node\": ", r ? ", " : "", r);
        print_json_string(all[r].node);
        printf(", \"device\": ");
        print_json_string(all[r].device);
        printf(", \"shards\": %" PRIu64 ", \"resumed_shards\": %" PRIu64 ", \"texts\": %" PRIu64
               ", \"tokens\": %" PRIu64 ", \"seconds\": %.3f, \"texts_per_s\": %.1f}",
               all[r].shards, all[r].resumed_shards, all[r].texts, all[r].tokens,
               all[r].seconds, all[r].seconds > 0 ? (double)all[r].texts / all[r].seconds : 0.0);
    }
    printf("]}\n");
}

/* ---- the job ---- */

static char *with_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    char *out = malloc(n + m + 1);
    if (out)
        memcpy(out, path, n), memcpy(out + n, suffix, m + 1);
    return out;
}

static int open_input(job *j)
{
    struct stat st;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below). */
    j->fd = open(j->s->input, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (j->fd < 0)
        return local_error("--input: %s: cannot open: %s", j->s->input, strerror(errno));
    if (fstat(j->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return local_error("--input: %s is not a regular file (the job reads it in parts; "
                             "give it on stdin with --input - to one process)",
                             j->s->input);
    if (st.st_size == 0)
        return local_error("--input: %s holds no text (it is empty)", j->s->input);
    j->file_size = (uint64_t)st.st_size;
    j->mtime = st.st_mtim;
    return 0;
}

/* Rank 0, when every shard is done: the file appears under its name, the record goes. */
static int finish(job *j)
{
    if (rename(j->partial_path, j->s->output) != 0)
        return runtime_error("--output: cannot rename %s to %s: %s", j->partial_path,
                             j->s->output, strerror(errno));
    if (unlink(j->progress_path) != 0)
        return runtime_error("%s: cannot remove: %s", j->progress_path, strerror(errno));
    return 0;
}

int embed_job_run(const embed_job_settings *settings)
{
    job j = {.s = settings, .fd = -1};
    int rc = 1;
    bool resumed = false;
    double load_start = cli_now_s(), load_s = 0, seconds = 0;
    if (!all_succeeded(open_input(&j)))
        goto done; /* every process saw the same problem; only rank 0 need say it, but each
                      names its own file (they may differ across nodes) */
    j.shards = (j.file_size + settings->shard_bytes - 1) / settings->shard_bytes;
    j.first = (uint64_t)comm_rank() * j.shards / (uint64_t)comm_size();
    j.end = (uint64_t)(comm_rank() + 1) * j.shards / (uint64_t)comm_size();
    j.done = calloc(j.shards, 1);
    j.partial_path = with_suffix(settings->output, ".partial");
    j.progress_path = with_suffix(settings->output, ".progress");
    if (!all_succeeded(j.done && j.partial_path && j.progress_path ? 0
                                                                    : local_error("out of memory")))
        goto done;
    if (!all_succeeded(open_model(&j)) || plan_shards(&j) != 0)
        goto done;
    load_s = comm_max_double(cli_now_s() - load_start);
    size_t shape[2] = {(size_t)j.rows_before[j.shards], j.hidden};
    if (clattn_npy_header_f32(j.npy_header, sizeof(j.npy_header), 2, shape, &j.header_bytes) !=
        CLATTN_OK) { /* cannot fail with two dimensions and 512 bytes; the same on every process */
        if (comm_rank() == 0)
            runtime_error("%s", clattn_last_error(NULL));
        goto done;
    }
    if (open_files(&j, &resumed) != 0)
        goto done;
    int failed = run_rounds(&j, &seconds);
    comm_file_close(&j.data);
    comm_file_close(&j.progress);
    if (failed) {
        if (comm_rank() == 0)
            runtime_error("the job stopped; the finished shards are kept in %s (recorded in "
                          "%s): run again with --resume to finish it",
                          j.partial_path, j.progress_path);
        goto done;
    }
    if (shared_status(comm_rank() == 0 ? finish(&j) : 0))
        goto done;
    rank_stats *all = comm_rank() == 0 ? calloc((size_t)comm_size(), sizeof(rank_stats)) : NULL;
    rank_stats mine = j.stats;
    comm_gather_bytes(&mine, sizeof(mine), all ? all : &mine);
    if (settings->json && all)
        print_json(&j, all, load_s, seconds);
    free(all);
    rc = 0;
done:
    comm_file_close(&j.data);
    comm_file_close(&j.progress);
    clattn_sentence_model_destroy(&j.model);
    clattn_context_destroy(&j.ctx);
    if (j.fd >= 0)
        close(j.fd);
    free(j.starts), free(j.rows_before), free(j.done), free(j.partial_path), free(j.progress_path);
    return rc;
}
