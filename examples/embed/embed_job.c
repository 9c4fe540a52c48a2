/*
 * embed's corpus job (embed_job.h): every process of the job (job_comm.h) embeds its shards of
 * the input and writes their rows at their offsets into one .npy.
 *
 * Shards. The input's bytes are cut into shards of shard_bytes; a shard holds the lines that
 * start in its bytes. The cut depends on the input and shard_bytes only, never on the number
 * of processes, and each shard is embedded alone (its texts batched among themselves), so the
 * file is the same, byte for byte, whatever the number of processes. Process r takes the
 * contiguous shards [r J / K, (r + 1) J / K) of J, finds where they start by reading a few bytes
 * around each cut, and counts their lines and checksums their bytes; an all-gather gives every
 * shard's first row and checksum.
 *
 * Files. OUTPUT.partial is the .npy being written (its header by rank 0, rows by all with
 * collective writes), OUTPUT.progress records the finished shards: a header naming the job
 * (PROGRESS_MAGIC), then one record of RECORD_BYTES per shard, "1 <rows' checksum> <record's checksum>" once
 * its rows reached the storage (written after their fsync). The job is named by content, not by
 * paths, by everything that changes a row's bytes (job_identity): the input's size and its
 * shards' checksums, --shard-size, the model (its config.json and tokenizer file bytes, its
 * weights file's size, modification time and header, what it loaded), the precision, the
 * truncation length, pooling, normalisation and prompt in effect, every process's device,
 * driver version and tuning, and the library's version. The progress file's header holds them
 * as "name: value" lines, so that --resume names what differs when it refuses another job's
 * file. When every shard is done, rank 0 renames OUTPUT.partial to OUTPUT and removes
 * OUTPUT.progress; until then OUTPUT does not exist. After a failure both are kept: --resume
 * checks the .npy header in OUTPUT.partial (written again when it is not the job's), skips the
 * recorded shards whose record and rows (read back from OUTPUT.partial) match their checksums,
 * and embeds the others again; should OUTPUT.partial be gone and OUTPUT hold every recorded
 * shard's rows (a run stopped between the rename and the removal), it only removes the
 * progress file. OUTPUT, OUTPUT.partial and OUTPUT.progress are regular files or absent:
 * embed.c refuses anything else before the job starts, the job opens its files without
 * following links or waiting on FIFOs and checks that they are regular files, and finish
 * renames only the file the job wrote (by device and inode) and only over a regular file or
 * none (cli_rename_over, atomic).
 *
 * One job per output. Rank 0 holds an exclusive flock on OUTPUT.progress for the job's life
 * (taken before it reads or writes anything): a second embed on the same output is refused
 * ("another embed is running") and touches none of the files.
 *
 * Rounds. Process r embeds its i-th unfinished shard in round i; every process joins every
 * round's collective write and sync (with no rows when it has none left) and then all learn
 * whether any failed. A failure stops the job after that round; the failing process names its
 * rank and the shard's lines.
 *
 * Test hooks: CLATTN_EMBED_FAIL_SHARD=J makes shard J (from 0) fail (an error, as a bad line
 * would); CLATTN_EMBED_KILL_SHARD=J kills the process that reaches shard J (SIGKILL, as a crash
 * would); CLATTN_EMBED_STOP_SHARD=J stops it there (SIGSTOP, until a SIGCONT: a test can change
 * the input meanwhile); CLATTN_EMBED_STOP_AT=STEP stops rank 0 (SIGSTOP) and
 * CLATTN_EMBED_KILL_AT=STEP kills it (SIGKILL) at a step: "files" just before it makes or reads
 * the job's files, "open" after the progress file is made and just before OUTPUT.partial is
 * opened, "rename" just after finish's rename, before the progress file is removed (a test can
 * put something under a name meanwhile); CLATTN_JOB_IO_TRACE (job_comm.h) logs the writes and
 * syncs of the job's files.
 */
#include "embed_job.h"

#include <clattn/clattn.h>

#include "cli.h"
#include "job_comm.h"
#include "text_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The progress file's first line: the format, then the header's length in bytes (the identity's
 * lines follow; the records start after the header). */
#define PROGRESS_MAGIC "clattn-embed progress 3 header="
#define PROGRESS_LENGTH_DIGITS 8
#define PROGRESS_FIRST_LINE_BYTES (sizeof(PROGRESS_MAGIC) - 1 + PROGRESS_LENGTH_DIGITS + 1)
/* The longest header --resume reads (a device name is 256 bytes at most, one per device kind). */
#define PROGRESS_HEADER_MAX ((size_t)1 << 20)
/* A shard's record: "1 " 16 hex digits (the rows' checksum), " ", 16 hex digits (the record's
 * checksum), "\n"; a shard to do is "0", spaces and "\n". */
#define RECORD_BYTES 36
#define READ_CHUNK ((size_t)1 << 20)
/* The most bytes of a recorded value --resume echoes (a damaged or hostile file may hold 1 MiB). */
#define ECHO_MAX 200
/* The most bytes of the weights file's header that name the model (a safetensors header is a
 * few kB to a few MB). */
#define WEIGHTS_HEADER_MAX ((uint64_t)64 << 20)

typedef struct rank_stats {
    double seconds; /* in clattn_sentence_model_embed */
    uint64_t texts, tokens, shards, resumed_shards, non_finite_rows;
    char device[CLATTN_DEVICE_STRING_SIZE];
    char node[64];
} rank_stats;

/* What of a process's device changes its rows' bytes (batch invariance holds on one device,
 * driver, library version and tuning: clattn/context.h). */
typedef struct rank_device {
    char name[CLATTN_DEVICE_STRING_SIZE], driver[CLATTN_DEVICE_STRING_SIZE];
    char tuning[200];
} rank_device;

typedef struct job {
    const embed_job_settings *s;
    int fd;             /* the input */
    uint64_t file_size; /* bytes */
    uint64_t shards;      /* J */
    uint64_t first, end;  /* this process's shards [first, end) */
    uint64_t *starts;     /* [end - first + 1]: byte where shard first + i starts */
    uint64_t *rows_before; /* [J + 1]: rows of the shards before shard j */
    uint64_t *input_sums; /* [J]: checksum of shard j's input bytes */
    uint64_t *row_sums;   /* [J]: checksum of shard j's rows, when done */
    char *done;           /* [J]: '1' when shard j is finished */
    char *progress_header; /* the progress file's header: first line, then the identity */
    size_t progress_header_bytes;
    uint64_t job_sum;     /* the header's checksum: what each record is made for */
    size_t hidden;
    size_t model_max_length; /* the model's truncation length */
    char npy_header[512]; /* the .npy's bytes before the rows */
    size_t header_bytes;
    char *partial_path, *progress_path;
    int lock_fd; /* rank 0: OUTPUT.progress, flocked for the job's life (-1: none) */
    uint64_t partial_device, partial_inode; /* rank 0: the OUTPUT.partial the job writes */
    clattn_context *ctx;
    clattn_sentence_model *model;
    comm_file *data, *progress;
    rank_stats stats;
    rank_device device;
} job;

/* Why the job stopped, from the least to the most specific advice (the largest over all
 * processes is given). */
enum { STOP_OTHER, STOP_NON_FINITE, STOP_BAD_LINE, STOP_INPUT_CHANGED };

/* This process's first error since the last all_succeeded (printed there), and why. */
static char pending_error[2048];
static int stop_reason = STOP_OTHER;

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

/* ---- checksums (FNV-1a, 64 bits: accidents, not adversaries) ---- */

#define SUM_START 0xcbf29ce484222325ull

static uint64_t sum_bytes(uint64_t sum, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++)
        sum = (sum ^ p[i]) * 0x100000001b3ull;
    return sum;
}

static uint64_t sum_u64(uint64_t sum, uint64_t value)
{
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    return sum_bytes(sum, bytes, sizeof(bytes));
}

static uint64_t sum_text(uint64_t sum, const char *text)
{
    return sum_bytes(sum, text, strlen(text) + 1);
}

/* ---- the input ---- */

/* pread until `bytes` are read; 0, else errno (EIO when the file ends first). */
static int read_at(int fd, uint64_t offset, char *buffer, size_t bytes)
{
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = pread(fd, buffer + got, bytes - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        got += (size_t)n;
    }
    return 0;
}

static int read_fully(const job *j, uint64_t offset, char *buffer, size_t bytes)
{
    int code = read_at(j->fd, offset, buffer, bytes);
    if (code == EIO && bytes) {
        stop_reason = STOP_INPUT_CHANGED;
        return local_error("--input: %s: the file got shorter while reading", j->s->input);
    }
    if (code)
        return local_error("--input: %s: %s at byte %" PRIu64, j->s->input, strerror(code),
                           offset);
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

/* The lines of bytes [from, to) of the input (to is a line start or the end) and their
 * checksum. */
static int scan_range(const job *j, uint64_t from, uint64_t to, char *chunk, uint64_t *lines,
                      uint64_t *sum)
{
    *lines = 0;
    *sum = SUM_START;
    for (uint64_t at = from; at < to;) {
        size_t n = (size_t)(to - at < READ_CHUNK ? to - at : READ_CHUNK);
        int rc = read_fully(j, at, chunk, n);
        if (rc)
            return rc;
        at += n;
        *lines += count_lines(chunk, n, at == j->file_size);
        *sum = sum_bytes(*sum, chunk, n);
    }
    return 0;
}

/* Where this process's shards start, and every shard's line count and checksum (each process
 * scans its own, an all-gather shares them). */
static int plan_shards(job *j)
{
    uint64_t count = j->end - j->first;
    char *chunk = malloc(READ_CHUNK);
    uint64_t *mine = calloc(count ? 2 * count : 1, sizeof(uint64_t)), *my_sums = mine + count;
    uint64_t *lines = calloc(j->shards, sizeof(uint64_t));
    j->starts = calloc(count + 1, sizeof(uint64_t));
    j->rows_before = calloc(j->shards + 1, sizeof(uint64_t));
    j->input_sums = calloc(j->shards, sizeof(uint64_t));
    j->row_sums = calloc(j->shards, sizeof(uint64_t));
    int rc = chunk && mine && lines && j->starts && j->rows_before && j->input_sums && j->row_sums
                 ? 0
                 : local_error("out of memory planning %" PRIu64 " shards", j->shards);
    for (uint64_t i = 0; i <= count && !rc; i++)
        rc = line_start_at(j, (j->first + i) * j->s->shard_bytes, chunk, &j->starts[i]);
    for (uint64_t i = 0; i < count && !rc; i++)
        rc = scan_range(j, j->starts[i], j->starts[i + 1], chunk, &mine[i], &my_sums[i]);
    if (all_succeeded(rc)) {
        int size = comm_size();
        int *counts = calloc((size_t)size, sizeof(int));
        if (!counts)
            abort(); /* a few bytes per process, after the plan's allocations succeeded */
        for (int r = 0; r < size; r++)
            counts[r] = (int)((uint64_t)(r + 1) * j->shards / (uint64_t)size -
                              (uint64_t)r * j->shards / (uint64_t)size);
        comm_allgather_u64(mine, counts, lines);
        comm_allgather_u64(my_sums, counts, j->input_sums);
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
    cp.precision = j->s->precision;
    if (clattn_context_create(&j->ctx, &cp) != CLATTN_OK)
        return local_error("%s", clattn_last_error(NULL));
    clattn_sentence_model_info info;
    if (clattn_sentence_model_load(j->ctx, &j->model, j->s->model) != CLATTN_OK ||
        clattn_sentence_model_get_info(j->model, &info) != CLATTN_OK)
        return local_error("--model: %s", clattn_last_error(j->ctx));
    j->hidden = info.hidden_size;
    j->model_max_length = info.max_length;
    clattn_device_info dev;
    clattn_context_device_info(j->ctx, &dev);
    snprintf(j->stats.device, sizeof(j->stats.device), "%s", dev.name);
    snprintf(j->stats.node, sizeof(j->stats.node), "%s", comm_node_name());
    snprintf(j->device.name, sizeof(j->device.name), "%s", dev.name);
    snprintf(j->device.driver, sizeof(j->device.driver), "%s", dev.driver_version);
    clattn_tuning t;
    if (clattn_context_get_tuning(j->ctx, &t) != CLATTN_OK)
        return local_error("%s", clattn_last_error(j->ctx));
    snprintf(j->device.tuning, sizeof(j->device.tuning),
             "gemm_kernel %d, fused_local %d, fused_qpw %zu, fused_tk %zu, fused_wg %zu, "
             "split_keys %d, fused_untiled %d",
             t.gemm_kernel, t.fused_local, t.fused_qpw, t.fused_tk, t.fused_wg, t.split_keys,
             t.fused_untiled);
    return 0;
}

/* ---- the job's identity ---- */

/* Adds the whole file dir/name to *sum; *found is false (and *sum unchanged) when it does not
 * exist. */
static int sum_model_file(const char *dir, const char *name, uint64_t *sum, bool *found)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    *found = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : runtime_error("--model: %s: %s", path, strerror(errno));
    char *chunk = malloc(READ_CHUNK);
    uint64_t h = sum_text(*sum, name);
    ssize_t n = 0;
    while (chunk && (n = read(fd, chunk, READ_CHUNK)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        h = sum_bytes(h, chunk, (size_t)n);
    }
    int saved = errno;
    free(chunk);
    close(fd);
    if (!chunk || n < 0)
        return runtime_error("--model: %s: %s", path,
                             chunk ? strerror(saved) : "out of memory reading it");
    *sum = h;
    *found = true;
    return 0;
}

/* Adds the weights file's size, modification time and header (its first 8 bytes give the
 * header's length) to *sum: hashing all the weights on every run would take seconds. */
static int sum_weights(const char *dir, uint64_t *sum)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = runtime_error("--model: %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    unsigned char length[8] = {0};
    uint64_t size = (uint64_t)st.st_size, header = 0;
    int code = read_at(fd, 0, (char *)length, size < 8 ? (size_t)size : 8);
    for (int i = 0; i < 8; i++)
        header |= (uint64_t)length[i] << (8 * i);
    if (size < 8 || header > size - 8)
        header = size < 8 ? 0 : size - 8; /* not a safetensors file: the loader said so */
    if (header > WEIGHTS_HEADER_MAX)
        header = WEIGHTS_HEADER_MAX;
    char *bytes = malloc(header ? (size_t)header : 1);
    if (!code && bytes)
        code = read_at(fd, 8, bytes, (size_t)header);
    close(fd);
    if (!bytes || code) {
        free(bytes);
        return runtime_error("--model: %s: %s", path,
                             bytes ? strerror(code) : "out of memory reading its header");
    }
    uint64_t h = sum_text(*sum, "model.safetensors");
    h = sum_u64(h, size);
    h = sum_u64(h, (uint64_t)st.st_mtim.tv_sec);
    h = sum_u64(h, (uint64_t)st.st_mtim.tv_nsec);
    *sum = sum_bytes(h, bytes, (size_t)header);
    free(bytes);
    return 0;
}

/* The input's checksum (over its shards' checksums): another --shard-size cuts other shards, so
 * it is compared only when --shard-size is the same. */
#define INPUT_CHECKSUM_FACT "input checksum"

/* A growing text of "name: value" lines. */
typedef struct facts {
    char *text;
    size_t length, capacity;
    bool failed; /* out of memory */
} facts;

/* Appends "name: value\n"; a control character of the value (a device name's, say) becomes '?'
 * so that each fact stays one line. */
static void add_fact(facts *f, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_fact(facts *f, const char *name, const char *fmt, ...)
{
    char value[8448]; /* add_devices' lists and more */
    va_list args;
    va_start(args, fmt);
    vsnprintf(value, sizeof(value), fmt, args);
    va_end(args);
    for (char *c = value; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    size_t need = f->length + strlen(name) + strlen(value) + 4;
    if (!f->failed && need > f->capacity) {
        size_t capacity = need * 2;
        char *grown = realloc(f->text, capacity);
        if (!grown) {
            f->failed = true;
            return;
        }
        f->text = grown, f->capacity = capacity;
    }
    if (!f->failed)
        f->length += (size_t)sprintf(f->text + f->length, "%s: %s\n", name, value);
}

/* The prompt as a fact: quoted when short and plain, else its length and checksum. */
static void add_prompt(facts *f, const char *prompt)
{
    size_t n = prompt ? strlen(prompt) : 0;
    bool plain = n <= 64;
    for (size_t i = 0; plain && i < n; i++)
        plain = prompt[i] >= 0x20 && prompt[i] < 0x7f && prompt[i] != '"';
    if (!n)
        add_fact(f, "prompt", "none");
    else if (plain)
        add_fact(f, "prompt", "\"%s\"", prompt);
    else
        add_fact(f, "prompt", "%zu bytes, checksum %016" PRIx64, n,
                 sum_bytes(SUM_START, prompt, n));
}

/* The devices of the job's processes (each kind once, in rank order), as the device, driver and
 * tuning facts: "A; B" when the ranks run on more than one kind. */
static void add_devices(facts *f, const rank_device *all, int count)
{
    char names[8192] = "", drivers[8192] = "", tunings[8192] = "";
    for (int r = 0; r < count; r++) {
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all[q].name, all[r].name) == 0 &&
                   strcmp(all[q].driver, all[r].driver) == 0 &&
                   strcmp(all[q].tuning, all[r].tuning) == 0;
        if (seen)
            continue;
        const char *sep = names[0] ? "; " : "";
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", sep, all[r].name);
        snprintf(drivers + strlen(drivers), sizeof(drivers) - strlen(drivers), "%s%s", sep,
                 all[r].driver);
        snprintf(tunings + strlen(tunings), sizeof(tunings) - strlen(tunings), "%s%s", sep,
                 all[r].tuning);
    }
    add_fact(f, "device", "%s", names);
    add_fact(f, "driver", "%s", drivers);
    add_fact(f, "tuning", "%s", tunings);
}

/* Rank 0: the job's identity, by content (never by a path: the same job resumes however its
 * files are spelled, and a model or input that changed behind the same path is another job):
 * one "name: value" line for each fact that changes a row's bytes. --batch-size is none of them
 * (batch invariance, clattn/context.h): a job may be resumed with another. */
static int job_identity(const job *j, const rank_device *devices, facts *f)
{
    const embed_job_settings *s = j->s;
    /* The input: its size and every shard's checksum. */
    uint64_t h = sum_u64(SUM_START, j->file_size);
    for (uint64_t i = 0; i < j->shards; i++)
        h = sum_u64(h, j->input_sums[i]);
    add_fact(f, "input", "%" PRIu64 " bytes, %" PRIu64 " lines", j->file_size,
             j->rows_before[j->shards]);
    add_fact(f, "shard-size", "%" PRIu64 " bytes", s->shard_bytes);
    add_fact(f, INPUT_CHECKSUM_FACT, "%016" PRIx64, h);
    /* The model: the files it is read from, the tokenizer as the library picks it, and what it
     * loaded (sentence_bert_config.json, modules.json, the pooling folder). */
    bool found = false;
    h = SUM_START;
    int rc = sum_model_file(s->model, "config.json", &h, &found);
    if (!rc)
        rc = sum_model_file(s->model, "tokenizer.json", &h, &found);
    if (!rc && !found)
        rc = sum_model_file(s->model, "vocab.txt", &h, &found);
    if (!rc)
        rc = sum_weights(s->model, &h);
    if (rc)
        return rc;
    clattn_sentence_model_info info;
    clattn_sentence_model_get_info(j->model, &info);
    add_fact(f, "model",
             "files' checksum %016" PRIx64 ", hidden %zu, %zu layers, vocabulary %zu, at most "
             "%zu tokens",
             h, info.hidden_size, info.num_layers, info.vocab_size, info.max_length);
    /* What the options and the model make of each text. */
    static const char *const precisions[] = {"fp32", "bf16", "int8"};
    add_fact(f, "precision", "%s",
             s->precision >= 0 && s->precision < 3 ? precisions[s->precision] : "?");
    add_fact(f, "max-length", "%zu tokens",
             s->max_length && s->max_length < info.max_length ? s->max_length : info.max_length);
    int pooling = s->pooling >= 0 ? s->pooling : (int)info.pooling;
    add_fact(f, "pooling", "%s", pooling == CLATTN_POOLING_CLS ? "cls" : "mean");
    add_fact(f, "normalize", "%s", info.normalize && !s->no_normalize ? "yes" : "no");
    add_prompt(f, s->prompt        ? s->prompt
                  : s->prompt_name ? clattn_sentence_model_prompt(j->model, s->prompt_name)
                                   : clattn_sentence_model_prompt(j->model,
                                                                  info.default_prompt_name));
    /* Where the rows are computed. */
    add_devices(f, devices, comm_size());
    add_fact(f, "library", "libclattn %s", clattn_version_string());
    return f->failed ? runtime_error("out of memory") : 0;
}

/* ---- the output and progress files ---- */

/* Rank 0: the progress file's header (PROGRESS_MAGIC, its length, the identity's lines) and its
 * checksum. */
static int make_progress_header(job *j, const rank_device *devices)
{
    facts f = {0};
    int rc = job_identity(j, devices, &f);
    size_t bytes = PROGRESS_FIRST_LINE_BYTES + f.length;
    if (!rc && !(j->progress_header = malloc(bytes + 1)))
        rc = runtime_error("out of memory");
    if (!rc) {
        snprintf(j->progress_header, bytes + 1, "%s%0*zu\n%s", PROGRESS_MAGIC,
                 PROGRESS_LENGTH_DIGITS, bytes, f.text);
        j->progress_header_bytes = bytes;
        j->job_sum = sum_bytes(SUM_START, j->progress_header, bytes);
    }
    free(f.text);
    return rc;
}

/* The record of shard s: done (with its rows' checksum) or to do. */
static void make_record(const job *j, uint64_t s, bool done, uint64_t row_sum,
                        char record[RECORD_BYTES + 1])
{
    if (!done) {
        memset(record, ' ', RECORD_BYTES);
        record[0] = '0';
    } else {
        uint64_t check = sum_u64(sum_u64(sum_u64(SUM_START, j->job_sum), s), row_sum);
        snprintf(record, RECORD_BYTES + 1, "1 %016" PRIx64 " %016" PRIx64, row_sum, check);
    }
    record[RECORD_BYTES - 1] = '\n';
    record[RECORD_BYTES] = '\0';
}

static bool parse_hex(const char *text, uint64_t *value)
{
    *value = 0;
    for (int i = 0; i < 16; i++) {
        int c = text[i], digit = c >= '0' && c <= '9'   ? c - '0'
                                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                        : -1;
        if (digit < 0)
            return false;
        *value = *value << 4 | (uint64_t)digit;
    }
    return true;
}

/* Whether record is shard s's, done: then *row_sum is its rows' checksum. */
static bool record_done(const job *j, uint64_t s, const char *record, uint64_t *row_sum)
{
    char expected[RECORD_BYTES + 1];
    return parse_hex(record + 2, row_sum) &&
           (make_record(j, s, true, *row_sum, expected),
            memcmp(record, expected, RECORD_BYTES) == 0);
}

static uint64_t data_bytes(const job *j)
{
    return j->header_bytes + j->rows_before[j->shards] * j->hidden * sizeof(float);
}

/* "lines A-B" of shard s (its lines from 1). */
static const char *shard_lines(const job *j, uint64_t s, char text[64])
{
    snprintf(text, 64, "lines %" PRIu64 "-%" PRIu64, j->rows_before[s] + 1, j->rows_before[s + 1]);
    return text;
}

/* The value of the fact `name` among header's "name: value" lines, or NULL; *length receives
 * the value's length. */
static const char *fact_value(const char *header, const char *name, size_t *length)
{
    size_t n = strlen(name);
    for (const char *line = header; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        if ((size_t)(end - line) >= n + 2 && memcmp(line, name, n) == 0 && line[n] == ':' &&
            line[n + 1] == ' ') {
            *length = (size_t)(end - line) - n - 2;
            return line + n + 2;
        }
        line = *end ? end + 1 : end;
    }
    return NULL;
}

/* The length of a value as echoed in a message (ECHO_MAX bytes at most) and what follows it. */
static int echo_length(size_t length)
{
    return (int)(length > ECHO_MAX ? ECHO_MAX : length);
}

static const char *echo_tail(size_t length)
{
    return length > ECHO_MAX ? "…" : "";
}

/* Rank 0: whether the header of a progress file (theirs: `bytes` bytes, NUL-terminated after
 * them; its first line checked) is damaged rather than another job's: why in `why` (a phrase
 * after "its header"). A header reads as one when it holds no NUL byte, ends a line, and is
 * made of "name: value" lines holding every fact of this job's (ours). */
static bool header_damaged(const char *ours, const char *theirs, size_t bytes, char *why,
                           size_t why_size)
{
    const char *nul = memchr(theirs, '\0', bytes);
    if (nul) {
        snprintf(why, why_size, "holds NUL bytes (from byte %zu)", (size_t)(nul - theirs));
        return true;
    }
    if (theirs[bytes - 1] != '\n') {
        snprintf(why, why_size, "is cut short (its last line has no end)");
        return true;
    }
    for (const char *line = strchr(theirs, '\n') + 1; *line;) {
        const char *end = strchr(line, '\n');
        const char *colon = memchr(line, ':', (size_t)(end - line));
        if (!colon || colon == line || colon[1] != ' ') {
            snprintf(why, why_size, "holds a line that is not \"name: value\" (at byte %zu)",
                     (size_t)(line - theirs));
            return true;
        }
        line = end + 1;
    }
    for (const char *line = strchr(ours, '\n') + 1; *line;) {
        const char *end = strchr(line, '\n'), *colon = strstr(line, ": ");
        char name[64];
        size_t length;
        snprintf(name, sizeof(name), "%.*s", (int)(colon - line), line);
        if (!fact_value(theirs, name, &length)) {
            snprintf(why, why_size, "lacks the fact \"%s\"", name);
            return true;
        }
        line = end + 1;
    }
    return false;
}

/* Rank 0: what the header of another job's progress file (theirs, NUL-terminated, not damaged:
 * it holds every fact) records differently from this job's (ours), three lines per fact, each
 * value cut at ECHO_MAX bytes:
 *   "\n  precision\n    recorded: fp32\n    now:      int8".
 * Empty when no fact differs. */
static void describe_differences(const char *ours, const char *theirs, char *out, size_t size)
{
    out[0] = '\0';
    size_t ours_n, theirs_n;
    const char *ours_cut = fact_value(ours, "shard-size", &ours_n);
    const char *theirs_cut = fact_value(theirs, "shard-size", &theirs_n);
    bool same_cut = ours_cut && theirs_cut && ours_n == theirs_n &&
                    memcmp(ours_cut, theirs_cut, ours_n) == 0;
    const char *line = strchr(ours, '\n'); /* after the first line */
    while (line && *++line) {
        const char *colon = strstr(line, ": "), *end = strchr(line, '\n');
        if (!colon || !end || colon > end)
            break;
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(colon - line), line);
        const char *mine = fact_value(ours, name, &ours_n);
        const char *recorded = fact_value(theirs, name, &theirs_n);
        bool differs = recorded && (theirs_n != ours_n || memcmp(recorded, mine, ours_n) != 0);
        if (differs && !(strcmp(name, INPUT_CHECKSUM_FACT) == 0 && !same_cut)) {
            size_t used = strlen(out);
            snprintf(out + used, size - used, "\n  %s\n    recorded: %.*s%s\n    now:      %.*s%s",
                     name, echo_length(theirs_n), recorded, echo_tail(theirs_n),
                     echo_length(ours_n), mine, echo_tail(ours_n));
        }
        line = end;
    }
}

/* Rank 0, --resume: reads the header of the progress file open on fd into *theirs (malloc'd,
 * NUL-terminated) and its length into *bytes. Returns 0, else why it is not one (a phrase after
 * the file's name) in problem. */
static int read_progress_header(int fd, char **theirs, size_t *bytes, char *problem,
                                size_t problem_size)
{
    char first[PROGRESS_FIRST_LINE_BYTES + 1] = "";
    size_t magic = strlen(PROGRESS_MAGIC), n = 0;
    *theirs = NULL;
    bool readable = read_at(fd, 0, first, PROGRESS_FIRST_LINE_BYTES) == 0;
    if (readable && memcmp(first, PROGRESS_MAGIC, magic) != 0 &&
        strncmp(first, "clattn-embed progress ", 22) == 0) {
        snprintf(problem, problem_size, "was written by another version of embed (\"%.23s\")",
                 first);
        return 1;
    }
    bool digits = readable && memcmp(first, PROGRESS_MAGIC, magic) == 0 &&
                  first[PROGRESS_FIRST_LINE_BYTES - 1] == '\n';
    for (size_t i = magic; digits && i < magic + PROGRESS_LENGTH_DIGITS; i++) {
        digits = first[i] >= '0' && first[i] <= '9';
        n = n * 10 + (size_t)(first[i] - '0');
    }
    if (!digits || n < PROGRESS_FIRST_LINE_BYTES || n > PROGRESS_HEADER_MAX) {
        snprintf(problem, problem_size, "is damaged (its first line is not a progress file's)");
        return 1;
    }
    if (!(*theirs = malloc(n + 1)) || read_at(fd, 0, *theirs, n) != 0) {
        snprintf(problem, problem_size, "is damaged (it is shorter than its header)");
        free(*theirs);
        *theirs = NULL;
        return 1;
    }
    (*theirs)[n] = '\0';
    *bytes = n;
    return 0;
}

/* Rank 0: the job's lock, an exclusive flock on its progress file open on fd, kept (fd in
 * j->lock_fd) until the job ends. Returns 0; else 1 (printed; fd closed) when another embed
 * holds it. A file system without flock gets a note and no lock. */
static int lock_progress(job *j, int fd)
{
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            close(fd);
            return runtime_error("another embed is running on %s (it holds %s): wait for it to "
                                 "end, or choose another --output; its files are left as they "
                                 "are",
                                 j->s->output, j->progress_path);
        }
        cli_note("%s: cannot be locked (%s): a second embed on %s would not be refused",
                 j->progress_path, strerror(errno), j->s->output);
    }
    j->lock_fd = fd;
    return 0;
}

/* Whether the progress file open on fd is locked by another embed (a probe: the lock, if taken,
 * goes with fd). */
static bool locked_by_another(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) != 0 &&
           errno == EWOULDBLOCK;
}

/* The checksum of shard s's rows in the .npy open on fd (chunk: READ_CHUNK bytes). Returns 0,
 * else read_at's errno. */
static int shard_rows_sum(const job *j, int fd, uint64_t s, char *chunk, uint64_t *sum)
{
    size_t row_bytes = j->hidden * sizeof(float);
    uint64_t at = j->header_bytes + j->rows_before[s] * row_bytes;
    uint64_t end = j->header_bytes + j->rows_before[s + 1] * row_bytes;
    *sum = SUM_START;
    for (; at < end; at += READ_CHUNK) {
        size_t n = (size_t)(end - at < READ_CHUNK ? end - at : READ_CHUNK);
        int code = read_at(fd, at, chunk, n);
        if (code)
            return code;
        *sum = sum_bytes(*sum, chunk, n);
    }
    return 0;
}

/* Rank 0: whether the .npy open on fd is this job's finished file: a regular file of the job's
 * size, its header, and every shard's rows matching their record. Else why, in why. */
static bool is_finished_file(const job *j, int fd, char *why, size_t why_size)
{
    struct stat st;
    char header[sizeof(j->npy_header)], *chunk = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "it is not a regular file");
        return false;
    }
    if ((uint64_t)st.st_size != data_bytes(j)) {
        snprintf(why, why_size, "it is not %" PRIu64 " bytes", data_bytes(j));
        return false;
    }
    if (read_at(fd, 0, header, j->header_bytes) != 0 ||
        memcmp(header, j->npy_header, j->header_bytes) != 0) {
        snprintf(why, why_size, "its .npy header is not the job's");
        return false;
    }
    if (!(chunk = malloc(READ_CHUNK))) {
        snprintf(why, why_size, "out of memory reading it");
        return false;
    }
    for (uint64_t s = 0; s < j->shards; s++) {
        uint64_t sum;
        char lines[64];
        if (shard_rows_sum(j, fd, s, chunk, &sum) != 0 || sum != j->row_sums[s]) {
            snprintf(why, why_size, "its rows of %s differ from their record",
                     shard_lines(j, s, lines));
            free(chunk);
            return false;
        }
    }
    free(chunk);
    return true;
}

/* Rank 0, --resume, OUTPUT.partial gone: *finished when OUTPUT is this job's finished file and
 * every shard is recorded done (a run stopped between finish's rename and the removal of the
 * progress file: only that removal is left to do); else 1, saying what is wrong. */
static int check_finished(job *j, bool *finished)
{
    uint64_t done = 0;
    for (uint64_t s = 0; s < j->shards; s++)
        done += j->done[s] == '1';
    char why[256] = "";
    int fd = open(j->s->output, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return runtime_error("--resume: %s is missing, and so is %s: the rows of the %" PRIu64
                             " shard%s recorded done are gone; remove %s to start over",
                             j->partial_path, j->s->output, done, done == 1 ? "" : "s",
                             j->progress_path);
    if (fd < 0)
        snprintf(why, sizeof(why), "it cannot be read: %s", strerror(errno));
    else if (done < j->shards)
        snprintf(why, sizeof(why), "%s records %" PRIu64 " of the %" PRIu64 " shards done",
                 j->progress_path, done, j->shards);
    else
        is_finished_file(j, fd, why, sizeof(why));
    if (fd >= 0)
        close(fd);
    if (why[0])
        return runtime_error("--resume: %s is missing, and %s is not the job's finished file (%s): "
                             "remove %s to start over (%s is left as it is)",
                             j->partial_path, j->s->output, why, j->progress_path, j->s->output);
    *finished = true;
    return 0;
}

/* Rank 0, --resume: the finished shards from the progress file, when it is this job's; the file
 * is locked first (lock_progress) and stays locked. Returns 0 with done and row_sums filled and
 * *found set (all '0' and a note when there is no progress file: nothing to resume), or with
 * *finished set (check_finished); else 1. Another job's file is refused, naming each fact of the
 * identity that differs; a damaged header is said to be damaged; a damaged record is a shard
 * to embed again. */
static int read_progress(job *j, bool *found, bool *finished)
{
    *found = *finished = false;
    memset(j->done, '0', j->shards);
    /* O_NONBLOCK and O_NOFOLLOW: a FIFO or a link put there after embed.c looked is neither
     * waited on nor followed (refused below). */
    int fd = open(j->progress_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 && errno == ENOENT) {
        cli_note("--resume: there is nothing to resume (no %s): the job starts from the "
                 "beginning",
                 j->progress_path);
        return 0;
    }
    if (fd < 0 && errno != ELOOP)
        return runtime_error("--resume: %s: %s", j->progress_path, strerror(errno));
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return runtime_error("--resume: %s is not a regular file (left unchanged)",
                             j->progress_path);
    }
    if (lock_progress(j, fd))
        return 1;
    char problem[256] = "", why[160], *theirs = NULL;
    char differences[16384] = "";
    size_t theirs_bytes = 0, record_bytes = (size_t)j->shards * RECORD_BYTES;
    char *records = malloc(record_bytes);
    bool have_header =
        read_progress_header(fd, &theirs, &theirs_bytes, problem, sizeof(problem)) == 0;
    bool same = have_header && theirs_bytes == j->progress_header_bytes &&
                memcmp(theirs, j->progress_header, theirs_bytes) == 0;
    bool complete = same && records &&
                    read_at(fd, j->progress_header_bytes, records, record_bytes) == 0;
    if (have_header && !same) {
        if (header_damaged(j->progress_header, theirs, theirs_bytes, why, sizeof(why)))
            snprintf(problem, sizeof(problem), "is damaged (its header %s)", why);
        else
            describe_differences(j->progress_header, theirs, differences, sizeof(differences));
        if (!problem[0] && !differences[0])
            snprintf(problem, sizeof(problem), "is damaged (its header does not read as one)");
    }
    free(theirs);
    if (differences[0]) {
        free(records);
        return runtime_error("--resume: %s records another job; what it records differs from "
                             "this run:%s\nresume with what it records, or remove it and %s to "
                             "start over (or choose another --output)",
                             j->progress_path, differences, j->partial_path);
    }
    if (!complete) {
        free(records);
        return runtime_error("--resume: %s %s; remove it and %s to start over (or choose another "
                             "--output)",
                             j->progress_path,
                             !same     ? problem
                             : records ? "is damaged (it is shorter than its records)"
                                       : "cannot be read: out of memory",
                             j->partial_path);
    }
    uint64_t damaged = 0, first_damaged = 0;
    for (uint64_t s = 0; s < j->shards; s++) {
        const char *record = records + s * RECORD_BYTES;
        char to_do[RECORD_BYTES + 1];
        make_record(j, s, false, 0, to_do);
        if (record_done(j, s, record, &j->row_sums[s]))
            j->done[s] = '1';
        else if (memcmp(record, to_do, RECORD_BYTES) != 0 && damaged++ == 0)
            first_damaged = s;
    }
    free(records);
    if (damaged) {
        char lines[64];
        cli_note("%s: the records of %" PRIu64 " shard%s are damaged (the first: %s); they are "
                 "embedded again",
                 j->progress_path, damaged, damaged > 1 ? "s" : "",
                 shard_lines(j, first_damaged, lines));
    }
    if (lstat(j->partial_path, &st) != 0) {
        if (errno == ENOENT)
            return check_finished(j, finished);
        return runtime_error("--resume: %s: %s", j->partial_path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return runtime_error("--resume: %s names %s, not the job's rows (left unchanged); remove "
                             "it and %s to start over",
                             j->partial_path, cli_file_kind(st.st_mode), j->progress_path);
    if ((uint64_t)st.st_size != data_bytes(j))
        return runtime_error("--resume: %s is not %" PRIu64 " bytes; remove %s to start over",
                             j->partial_path, data_bytes(j), j->progress_path);
    *found = true;
    return 0;
}

/* Rank 0: removes OUTPUT.progress when it is still the file the job locked (never what took its
 * name). Returns 0, else an errno. */
static int remove_own_progress(const job *j)
{
    struct stat mine, now;
    if (j->lock_fd < 0 || fstat(j->lock_fd, &mine) != 0 || lstat(j->progress_path, &now) != 0)
        return errno ? errno : EINVAL;
    if (mine.st_dev != now.st_dev || mine.st_ino != now.st_ino)
        return EEXIST;
    return unlink(j->progress_path) == 0 ? 0 : errno;
}

/* Rank 0: refuses an OUTPUT.partial that is not a regular file (a FIFO put there after embed.c
 * looked): 1, printed; else 0. */
static int refuse_odd_partial(const job *j)
{
    struct stat st;
    if (lstat(j->partial_path, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    return runtime_error("%s: it names %s, not a regular file: the job's files are only ever "
                         "regular files (left unchanged)",
                         j->partial_path, cli_file_kind(st.st_mode));
}

/* Rank 0: a new progress file (all shards to do), locked before anything is written in it,
 * refusing to replace an earlier job's (or to touch a running one's); then a stale
 * OUTPUT.partial of an earlier run (a regular file: anything else is refused, left as it is)
 * is removed, for comm_file_open to create the job's own. */
static int create_progress(job *j)
{
    if (refuse_odd_partial(j))
        return 1;
    int fd = open(j->progress_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == EEXIST) {
        int other = open(j->progress_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        bool running = other >= 0 && locked_by_another(other);
        if (other >= 0)
            close(other);
        if (running)
            return runtime_error("another embed is running on %s (it holds %s): wait for it to "
                                 "end, or choose another --output; its files are left as they "
                                 "are",
                                 j->s->output, j->progress_path);
        return runtime_error("%s exists: an earlier run into %s stopped part-way; add --resume "
                             "to finish it, or remove %s and %s to start over",
                             j->progress_path, j->s->output, j->progress_path, j->partial_path);
    }
    if (fd < 0)
        return runtime_error("%s: cannot create: %s", j->progress_path, strerror(errno));
    if (lock_progress(j, fd))
        return 1;
    memset(j->done, '0', j->shards);
    char record[RECORD_BYTES + 1];
    make_record(j, 0, false, 0, record);
    char *records = malloc(READ_CHUNK / RECORD_BYTES * RECORD_BYTES);
    size_t per_chunk = READ_CHUNK / RECORD_BYTES;
    bool ok = records && pwrite(fd, j->progress_header, j->progress_header_bytes, 0) ==
                             (ssize_t)j->progress_header_bytes;
    for (size_t i = 0; ok && i < per_chunk; i++)
        memcpy(records + i * RECORD_BYTES, record, RECORD_BYTES);
    for (uint64_t s = 0; ok && s < j->shards; s += per_chunk) {
        size_t n = (size_t)(j->shards - s < per_chunk ? j->shards - s : per_chunk) * RECORD_BYTES;
        ok = pwrite(fd, records, n, (off_t)(j->progress_header_bytes + s * RECORD_BYTES)) ==
             (ssize_t)n;
    }
    ok = ok && fsync(fd) == 0;
    int saved = records ? errno : ENOMEM;
    free(records);
    if (!ok) {
        remove_own_progress(j);
        return runtime_error("%s: cannot write: %s", j->progress_path, strerror(saved));
    }
    if (refuse_odd_partial(j)) {
        remove_own_progress(j); /* ours, with nothing done */
        return 1;
    }
    if (unlink(j->partial_path) != 0 && errno != ENOENT) /* a stale one of ours */
        return runtime_error("%s: cannot remove: %s", j->partial_path, strerror(errno));
    return 0;
}

/* Every process, on --resume: OUTPUT.partial opened for reading (a regular file; on rank 0 the
 * one the job opened for writing). */
static int open_partial_to_read(const job *j, int *fd)
{
    struct stat st;
    *fd = open(j->partial_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (*fd < 0)
        return local_error("--resume: %s: %s", j->partial_path, strerror(errno));
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (comm_rank() == 0 && ((uint64_t)st.st_dev != j->partial_device ||
                              (uint64_t)st.st_ino != j->partial_inode))) {
        close(*fd);
        *fd = -1;
        return local_error("--resume: %s was replaced while the job opened it (left as it is)",
                           j->partial_path);
    }
    return 0;
}

/* Rank 0, on --resume: the .npy header in OUTPUT.partial (open on fd), written again when it is
 * not the job's (it depends on the shape alone): a run killed between sizing the file and
 * writing its header, or a damaged file. */
static int check_npy_header(job *j, int fd)
{
    char header[sizeof(j->npy_header)], error[1024];
    int code = read_at(fd, 0, header, j->header_bytes);
    if (code)
        return local_error("--resume: %s: %s", j->partial_path, strerror(code));
    if (memcmp(header, j->npy_header, j->header_bytes) == 0)
        return 0;
    cli_note("%s: its .npy header is not the job's (a run stopped before writing it, or the file "
             "was damaged): it is written again",
             j->partial_path);
    if (comm_file_write_at(j->data, 0, j->npy_header, j->header_bytes, error, sizeof(error)))
        return local_error("%s: %s", j->partial_path, error);
    return 0;
}

/* Every process, on --resume: rank 0 checks the .npy header (check_npy_header); each reads its
 * recorded shards' rows back from OUTPUT.partial and keeps those whose checksum is their
 * record's; the others are embedded again. */
static int verify_resumed(job *j)
{
    uint64_t mismatched = 0, first_mismatched = 0;
    int fd = -1;
    char *chunk = NULL;
    int rc = open_partial_to_read(j, &fd);
    if (!rc && comm_rank() == 0)
        rc = check_npy_header(j, fd);
    if (!rc && !(chunk = malloc(READ_CHUNK)))
        rc = local_error("out of memory");
    for (uint64_t s = j->first; s < j->end && !rc; s++) {
        uint64_t sum;
        if (j->done[s] != '1')
            continue;
        int code = shard_rows_sum(j, fd, s, chunk, &sum);
        if (code)
            rc = local_error("--resume: %s: %s", j->partial_path, strerror(code));
        else if (sum != j->row_sums[s]) {
            j->done[s] = '0';
            if (mismatched++ == 0)
                first_mismatched = s;
        }
    }
    if (fd >= 0)
        close(fd);
    free(chunk);
    if (!rc && mismatched) {
        char lines[64], rank[64] = "";
        if (comm_size() > 1)
            snprintf(rank, sizeof(rank), "rank %d of %d: ", comm_rank(), comm_size());
        cli_note("%s%s: the rows of %" PRIu64 " recorded shard%s differ from their records (the "
                 "first: %s); they are embedded again",
                 rank, j->partial_path, mismatched, mismatched > 1 ? "s" : "",
                 shard_lines(j, first_mismatched, lines));
    }
    return rc;
}

static void stop_or_kill_at(const char *step);

/* Opens (and on a new job sizes and heads) OUTPUT.partial and OUTPUT.progress on every process.
 * Sets *resumed to whether an earlier run's shards are kept, *finished when an earlier run
 * finished the job but for removing its progress file (check_finished: no file is opened). */
static int open_files(job *j, bool *resumed, bool *finished)
{
    char error[1024];
    int rc = 0;
    *resumed = *finished = false;
    /* Every process's device, driver and tuning, for the identity rank 0 makes. */
    rank_device *devices = comm_rank() == 0 ? calloc((size_t)comm_size(), sizeof(*devices)) : NULL;
    rank_device mine = j->device;
    comm_gather_bytes(&mine, sizeof(mine), devices ? devices : &mine);
    if (comm_rank() == 0) {
        stop_or_kill_at("files");
        rc = devices ? make_progress_header(j, devices) : runtime_error("out of memory");
        if (!rc && j->s->resume)
            rc = read_progress(j, resumed, finished);
        if (!rc && !*resumed && !*finished)
            rc = create_progress(j);
    }
    free(devices);
    if (shared_status(rc))
        return 1;
    comm_broadcast(finished, sizeof(*finished));
    if (*finished)
        return 0;
    comm_broadcast(resumed, sizeof(*resumed));
    comm_broadcast(&j->job_sum, sizeof(j->job_sum));
    comm_broadcast(&j->progress_header_bytes, sizeof(j->progress_header_bytes));
    comm_broadcast(j->done, j->shards);
    comm_broadcast(j->row_sums, j->shards * sizeof(uint64_t));
    if (comm_rank() == 0)
        stop_or_kill_at("open");
    if (comm_file_open(&j->progress, j->progress_path, false, error, sizeof(error)) ||
        comm_file_open(&j->data, j->partial_path, !*resumed, error, sizeof(error))) {
        if (comm_rank() == 0 && !*resumed)
            remove_own_progress(j); /* this new job's, with nothing done */
        return comm_rank() == 0 ? runtime_error("%s", error) : 1;
    }
    if (comm_rank() == 0)
        comm_file_identity(j->data, &j->partial_device, &j->partial_inode);
    if (*resumed) {
        if (!all_succeeded(verify_resumed(j)))
            return 1;
        /* the header, should check_npy_header have written it */
        rc = comm_file_sync(j->data, error, sizeof(error));
        if (rc)
            local_error("%s: %s", j->partial_path, error);
        return all_succeeded(rc) ? 0 : 1;
    }
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

/* The test hooks CLATTN_EMBED_STOP_AT=STEP and CLATTN_EMBED_KILL_AT=STEP (see the top). */
static void stop_or_kill_at(const char *step)
{
    const char *stop = getenv("CLATTN_EMBED_STOP_AT"), *kill = getenv("CLATTN_EMBED_KILL_AT");
    if (kill && strcmp(kill, step) == 0)
        raise(SIGKILL);
    if (stop && strcmp(stop, step) == 0)
        raise(SIGSTOP);
}

int embed_check_prompt_name(const clattn_sentence_model *model, const char *prompt_name)
{
    if (!prompt_name || clattn_sentence_model_prompt(model, prompt_name))
        return -1;
    char names[512] = "";
    const char *name;
    for (size_t i = 0; (name = clattn_sentence_model_prompt_name(model, i)); i++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s'%s'", i ? ", " : "",
                 name);
    return usage_error("--prompt-name '%s' is not one of the model's prompts (%s)", prompt_name,
                       names[0] ? names : "its config_sentence_transformers.json has none");
}

size_t embed_first_untokenizable(const clattn_sentence_model *model, const char *const *texts,
                                 const size_t *lengths, size_t count, size_t max_length)
{
    const clattn_tokenizer *tok = clattn_sentence_model_tokenizer(model);
    clattn_sentence_model_info info;
    if (!tok || clattn_sentence_model_get_info(model, &info) != CLATTN_OK)
        return count;
    if (max_length == 0 || max_length > info.max_length)
        max_length = info.max_length;
    for (size_t i = 0; i < count; i++) {
        size_t ids = 0;
        if (clattn_tokenizer_encode(tok, texts[i], lengths ? lengths[i] : strlen(texts[i]),
                                    max_length, NULL, 0, &ids) != CLATTN_OK)
            return i;
    }
    return count;
}

size_t embed_non_finite_rows(const float *rows, size_t count, size_t hidden, size_t *first)
{
    size_t found = 0;
    *first = count;
    for (size_t i = 0; i < count; i++) {
        const float *row = rows + i * hidden;
        size_t c = 0;
        while (c < hidden && isfinite(row[c]))
            c++;
        if (c < hidden && found++ == 0)
            *first = i;
    }
    return found;
}

/* Embeds shard s into *rows (allocated, [lines, hidden]); *row_sum receives their checksum. */
static int embed_shard(job *j, uint64_t s, float **rows, uint64_t *lines, uint64_t *row_sum)
{
    uint64_t from = j->starts[s - j->first], to = j->starts[s - j->first + 1];
    uint64_t first_line = j->rows_before[s] + 1, count = j->rows_before[s + 1] - j->rows_before[s];
    char where[64];
    shard_lines(j, s, where);
    *lines = count;
    *rows = NULL;
    *row_sum = SUM_START;
    if (count == 0)
        return 0;
    if (hook("CLATTN_EMBED_KILL_SHARD") == (long long)s)
        raise(SIGKILL);
    if (hook("CLATTN_EMBED_STOP_SHARD") == (long long)s)
        raise(SIGSTOP);
    if (hook("CLATTN_EMBED_FAIL_SHARD") == (long long)s)
        return local_error("%s: failing as CLATTN_EMBED_FAIL_SHARD asks", where);
    char *bytes = malloc(to - from ? (size_t)(to - from) : 1);
    *rows = malloc((size_t)count * j->hidden * sizeof(float));
    const char **texts = NULL;
    size_t *lengths = NULL, found = 0, tokens = 0;
    int rc = bytes && *rows ? read_fully(j, from, bytes, (size_t)(to - from))
                            : local_error("%s: out of memory", where);
    if (!rc && !split_lines(bytes, (size_t)(to - from), &texts, &lengths, &found))
        rc = local_error("out of memory splitting %" PRIu64 " lines", count);
    if (!rc && (found != count ||
                sum_bytes(SUM_START, bytes, (size_t)(to - from)) != j->input_sums[s])) {
        stop_reason = STOP_INPUT_CHANGED;
        rc = local_error("--input: %s changed while the job ran (%s)", j->s->input, where);
    }
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    params.max_length = j->s->max_length;
    params.batch_size = j->s->batch_size;
    params.pooling = j->s->pooling;
    if (j->s->no_normalize)
        params.normalize = 0;
    params.prompt = j->s->prompt;
    params.prompt_name = j->s->prompt_name;
    double start = cli_now_s();
    if (!rc && clattn_sentence_model_embed(j->model, texts, lengths, count, *rows, &params,
                                           &tokens) != CLATTN_OK) {
        char message[1024];
        snprintf(message, sizeof(message), "%s", clattn_last_error(j->ctx));
        size_t bad = embed_first_untokenizable(j->model, texts, lengths, count, j->s->max_length);
        if (bad < count) {
            stop_reason = STOP_BAD_LINE;
            rc = local_error("line %" PRIu64 ": %s", first_line + bad, clattn_last_error(NULL));
        } else
            rc = local_error("%s: %s", where, message);
    }
    j->stats.seconds += cli_now_s() - start;
    size_t first_bad = 0;
    size_t non_finite = rc ? 0 : embed_non_finite_rows(*rows, count, j->hidden, &first_bad);
    if (non_finite && !j->s->allow_non_finite) {
        stop_reason = STOP_NON_FINITE;
        rc = local_error("%s: %zu of %" PRIu64 " embeddings are not finite (NaN or infinity; "
                         "the first: line %" PRIu64 "): the model's weights hold such values or "
                         "its computation overflowed (--allow-non-finite keeps them)",
                         where, non_finite, count, first_line + first_bad);
    }
    if (!rc) {
        j->stats.texts += count, j->stats.tokens += tokens, j->stats.shards++;
        j->stats.non_finite_rows += non_finite;
        *row_sum = sum_bytes(SUM_START, *rows, (size_t)count * j->hidden * sizeof(float));
    }
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

/* The rounds; returns 0 when every shard is done. A shard's record is written only after its
 * rows' sync: a record never names rows that may not have reached the storage. */
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
    uint64_t resumed_rows = 0; /* each process knows its own shards' (verify_resumed) */
    for (uint64_t s = j->first; s < j->end; s++)
        if (j->done[s] == '1')
            resumed_rows += j->rows_before[s + 1] - j->rows_before[s];
    resumed_rows = comm_sum_u64(resumed_rows);
    int rounds = comm_max_int((int)count), failed = 0;
    bool show = comm_rank() == 0 && (j->s->progress || isatty(2));
    double start = cli_now_s(), shown = start;
    size_t row_bytes = j->hidden * sizeof(float);
    char error[1024], record[RECORD_BYTES + 1];
    for (int round = 0; round < rounds && !failed; round++) {
        uint64_t s = (uint64_t)round < count ? pending[round] : j->shards, lines = 0, row_sum = 0;
        float *rows = NULL;
        int rc = s < j->shards ? embed_shard(j, s, &rows, &lines, &row_sum) : 0;
        uint64_t at = j->header_bytes + (s < j->shards ? j->rows_before[s] : 0) * row_bytes;
        int wrote = comm_file_write_at_all(j->data, at, rows, row_bytes, rc ? 0 : lines, error,
                                           sizeof(error));
        if (!rc && wrote)
            rc = local_error("%s: %s", j->partial_path, error);
        if (comm_file_sync(j->data, error, sizeof(error)) && !rc)
            rc = local_error("%s: %s", j->partial_path, error);
        if (!rc && s < j->shards) {
            make_record(j, s, true, row_sum, record);
            if (comm_file_write_at(j->progress, j->progress_header_bytes + s * RECORD_BYTES,
                                   record, RECORD_BYTES, error, sizeof(error)))
                rc = local_error("%s: %s", j->progress_path, error);
        }
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
    return 0;
}

/* Rank 0, when every shard is done: the file appears under its name, the record goes. Only the
 * OUTPUT.partial the job wrote is renamed (device and inode, as comm_file_open saw them): should
 * another file have taken its name, it is left as it is, and so is the progress file. OUTPUT is
 * only ever a regular file or a new one (cli_rename_over, atomic): should a FIFO, a device or a
 * directory have taken its name meanwhile, it is left as it is, and so is the finished job. */
static int finish(job *j)
{
    struct stat st;
    char problem[256];
    bool present = lstat(j->partial_path, &st) == 0;
    if (!present || (uint64_t)st.st_dev != j->partial_device ||
        (uint64_t)st.st_ino != j->partial_inode)
        return runtime_error("%s is not the file this job wrote any more (it names %s now): it is "
                             "left as it is, and so is %s; the job's rows went with the file "
                             "that was replaced: remove both and run again",
                             j->partial_path,
                             !present              ? "nothing"
                             : S_ISREG(st.st_mode) ? "another regular file"
                                                   : cli_file_kind(st.st_mode),
                             j->progress_path);
    int code = cli_rename_over(j->partial_path, j->s->output, problem, sizeof(problem));
    if (code == -1)
        return runtime_error("--output %s: %s now (left unchanged); the finished job's .npy is "
                             "kept in %s: move it where you want it, and remove %s",
                             j->s->output, problem, j->partial_path, j->progress_path);
    if (code)
        return runtime_error("--output: cannot rename %s to %s: %s", j->partial_path,
                             j->s->output, problem);
    stop_or_kill_at("rename");
    if ((code = remove_own_progress(j)) != 0)
        return runtime_error("%s: cannot remove: %s", j->progress_path, strerror(code));
    return 0;
}

int embed_job_run(const embed_job_settings *settings)
{
    job j = {.s = settings, .fd = -1, .lock_fd = -1};
    int rc = 1;
    bool resumed = false, finished = false;
    double load_start = cli_now_s(), load_s = 0, seconds = 0;
    if (!all_succeeded(open_input(&j)))
        goto done; /* every process saw the same problem; only rank 0 need say it, but each
                      names its own file (they may differ across nodes) */
    j.shards = (j.file_size + settings->shard_bytes - 1) / settings->shard_bytes;
    j.first = (uint64_t)comm_rank() * j.shards / (uint64_t)comm_size();
    j.end = (uint64_t)(comm_rank() + 1) * j.shards / (uint64_t)comm_size();
    j.done = calloc(j.shards, 1);
    j.partial_path = with_suffix(settings->output, EMBED_JOB_PARTIAL_SUFFIX);
    j.progress_path = with_suffix(settings->output, EMBED_JOB_PROGRESS_SUFFIX);
    if (!all_succeeded(j.done && j.partial_path && j.progress_path ? 0
                                                                    : local_error("out of memory")))
        goto done;
    if (!all_succeeded(open_model(&j)))
        goto done;
    if (settings->prompt_name && !clattn_sentence_model_prompt(j.model, settings->prompt_name)) {
        /* every process has the same model: each stops here, rank 0 says why */
        rc = comm_rank() == 0 ? embed_check_prompt_name(j.model, settings->prompt_name) : 2;
        goto done;
    }
    if (plan_shards(&j) != 0)
        goto done;
    if (comm_rank() == 0 && settings->max_length > j.model_max_length)
        cli_note("--max-length %zu is more than the model's %zu tokens: texts are truncated to %zu",
                 settings->max_length, j.model_max_length, j.model_max_length);
    load_s = comm_max_double(cli_now_s() - load_start);
    size_t shape[2] = {(size_t)j.rows_before[j.shards], j.hidden};
    if (clattn_npy_header_f32(j.npy_header, sizeof(j.npy_header), 2, shape, &j.header_bytes) !=
        CLATTN_OK) { /* cannot fail with two dimensions and 512 bytes; the same on every process */
        if (comm_rank() == 0)
            runtime_error("%s", clattn_last_error(NULL));
        goto done;
    }
    if (open_files(&j, &resumed, &finished) != 0)
        goto done;
    if (finished) { /* an earlier run's: only its progress file is left to remove */
        int code = comm_rank() == 0 ? remove_own_progress(&j) : 0;
        if (comm_rank() == 0 && code)
            runtime_error("%s: cannot remove: %s", j.progress_path, strerror(code));
        else if (comm_rank() == 0)
            cli_note("--resume: the job was finished: %s holds every shard's rows as recorded "
                     "(a run stopped before removing %s, which is now removed)",
                     settings->output, j.progress_path);
        if (shared_status(code ? 1 : 0))
            goto done;
        j.stats.resumed_shards = j.end - j.first;
        goto statistics;
    }
    int failed = run_rounds(&j, &seconds);
    comm_file_close(&j.data);
    comm_file_close(&j.progress);
    int reason = comm_max_int(stop_reason);
    if (failed) {
        if (comm_rank() == 0 && reason == STOP_INPUT_CHANGED)
            runtime_error("the job stopped: --input %s changed while it ran, so the shards "
                          "finished before are of the old input and --resume would refuse them: "
                          "remove %s and %s and run again (or choose another --output)",
                          settings->input, j.partial_path, j.progress_path);
        else if (comm_rank() == 0 && reason == STOP_BAD_LINE)
            runtime_error("the job stopped at a line it cannot embed: mend --input %s (the "
                          "mended file is another input, whose job --resume would refuse), then "
                          "remove %s and %s and run again",
                          settings->input, j.partial_path, j.progress_path);
        else if (comm_rank() == 0 && reason == STOP_NON_FINITE)
            runtime_error("the job stopped; the finished shards are kept in %s (recorded in "
                          "%s): run again with --resume --allow-non-finite to keep the "
                          "non-finite embeddings, or, after mending the model, remove %s and %s "
                          "and run again (a changed model is another job)",
                          j.partial_path, j.progress_path, j.partial_path, j.progress_path);
        else if (comm_rank() == 0)
            runtime_error("the job stopped; the finished shards are kept in %s (recorded in "
                          "%s): run again with --resume to finish it",
                          j.partial_path, j.progress_path);
        goto done;
    }
    uint64_t non_finite = comm_sum_u64(j.stats.non_finite_rows);
    if (comm_rank() == 0 && non_finite)
        cli_note("%" PRIu64 " of %" PRIu64 " embeddings are not finite (NaN or infinity); kept as "
                 "--allow-non-finite asks",
                 non_finite, j.rows_before[j.shards]);
    if (shared_status(comm_rank() == 0 ? finish(&j) : 0))
        goto done;
statistics:;
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
    free(j.starts), free(j.rows_before), free(j.input_sums), free(j.row_sums), free(j.done);
    free(j.partial_path), free(j.progress_path), free(j.progress_header);
    if (j.lock_fd >= 0)
        close(j.lock_fd); /* the job's lock goes with it */
    return rc;
}
