/*
 * embed: sentence embeddings from a sentence-transformers model folder (for example
 * all-MiniLM-L6-v2) on an OpenCL device: text in, the same vectors as sentence-transformers out.
 * With --tokenize, only the token ids (Hugging Face's fast tokenizer's).
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error; every error names its
 * cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"
#include "embed_job.h"
#include "job_comm.h"
#include "text_lines.h"
#include "token_ids.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


typedef struct options {
    const char *model;
    const char *device;
    int precision;      /* clattn_precision */
    const char *input;  /* NULL: the positional texts */
    const char *output; /* NULL: JSON on stdout */
    bool json, tokenize, no_normalize, resume, progress, allow_non_finite;
    size_t max_length, batch_size;
    uint64_t shard_bytes; /* 0: not given */
    int pooling; /* -1: the model's */
    const char *prompt, *prompt_name; /* NULL: the model's default prompt */
    char *resolved_output; /* a corpus job's --output link, followed (malloc'd) */
    char **texts;
    size_t text_count;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: embed --model DIR [--device SPEC] [--precision P] [--input FILE|-]\n"
            "             [--output OUT.npy] [--json]\n"
            "             [--tokenize] [--max-length N] [--batch-size B] [--pooling mean|cls]\n"
            "             [--no-normalize] [--allow-non-finite] [--shard-size BYTES] [--resume]\n"
            "             [--progress] [--prompt TEXT | --prompt-name NAME]\n"
            "             [TEXT ...]\n"
            "       mpirun -np K embed --model DIR --input FILE --output OUT.npy [...]\n"
            "\n"
            "Embeds texts with a sentence-transformers model folder (config.json,\n"
            "model.safetensors, tokenizer.json or vocab.txt, optional sentence_bert_config.json,\n"
            "modules.json, 1_Pooling/config.json), as sentence-transformers does.\n"
            "\n"
            "  --model DIR        the model folder (tools/fetch-model.sh fetches all-MiniLM-L6-v2)\n"
            "  --device SPEC      gpu, cpu, P:D, or part of a device name (default: $CLATTN_DEVICE,\n"
            "                     else the first GPU, else the first CPU)\n"
            CLI_PRECISION_USAGE
            "  --input FILE       one text per line (UTF-8; the line end is not part of the text;\n"
            "                     an empty line is an empty text); - reads standard input\n"
            "  TEXT ...           the texts, when there is no --input\n"
            "  --output OUT.npy   float32 [count, hidden], row i = text i\n"
            "                     (without it: one JSON array per text on stdout); a new file\n"
            "                     or a regular file, replaced whole once the rows are ready (a\n"
            "                     link to one is followed); a FIFO, device or directory is\n"
            "                     refused and left unchanged, and so is a missing folder\n"
            "  --json             one JSON object on stdout: the embeddings (unless --output) and\n"
            "                     texts/s, tokens/s, the device and the model\n"
            "  --tokenize         no model run: each text's token ids (the tokenizer's special\n"
            "                     tokens included: [CLS] ... [SEP] for BERT) as a JSON array,\n"
            "                     one line per text\n"
            "  --max-length N     truncate to N tokens (default: the model's max_seq_length)\n"
            "  --batch-size B     texts per batch at most (default 32; batches are also bounded\n"
            "                     to 16384 padded tokens, and cut where padding would cost more\n"
            "                     than another batch)\n"
            "  --pooling P        mean or cls (default: the model's 1_Pooling/config.json)\n"
            "  --no-normalize     no L2 normalisation even if the model has a Normalize module\n"
            "  --prompt TEXT      put TEXT before every text (as sentence-transformers'\n"
            "                     encode(prompt=...); \"\" for none)\n"
            "  --prompt-name NAME put the model's prompt NAME before every text (its\n"
            "                     config_sentence_transformers.json \"prompts\"); without\n"
            "                     either, its default_prompt_name's prompt if it has one\n"
            "  --allow-non-finite keep embeddings holding NaN or infinity (JSON null); without it\n"
            "                     they are an error (exit 1, no --output written)\n"
            "\n"
            "A corpus job: with --input FILE (not -) and --output, the file is embedded in shards\n"
            "of its bytes, each on its own (so the result does not depend on the number of\n"
            "processes), into OUT.npy.partial, the finished shards recorded in OUT.npy.progress\n"
            "(with checksums; as OUT.npy, each a regular file or a new one; for a link\n"
            "OUT.npy, beside the file it names);\n"
            "OUT.npy appears only when every shard is done. One job per OUT.npy at a time (a\n"
            "second is refused while the first holds OUT.npy.progress). Under mpirun every rank\n"
            "embeds a contiguous part of the shards on its own device (--device, else\n"
            "$CLATTN_DEVICE, else the node's GPUs round-robin by local rank, else the default\n"
            "device) and writes its rows in place with MPI-IO.\n"
            "  --shard-size BYTES input bytes per shard (default 1048576); the unit of work and\n"
            "                     of --resume\n"
            "  --resume           finish a job that stopped part-way: the recorded shards whose\n"
            "                     rows match their checksums are not embedded again. The job is\n"
            "                     named by content, whatever the paths: the input, --shard-size,\n"
            "                     the model, the precision, max length, pooling, normalisation\n"
            "                     and prompt in effect, each process's device, driver and\n"
            "                     tuning, and the library's version (not --batch-size: rows are\n"
            "                     the same bytes whatever the batch); a progress file that\n"
            "                     records other values is refused, naming each that differs\n"
            "  --progress         a progress line for the whole job on stderr (rank 0), also\n"
            "                     when stderr is not a terminal\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error.\n");
}




/* A corpus job (embed_job.h): a file in, a .npy out. */
static bool is_corpus_job(const options *o)
{
    return o->input && strcmp(o->input, "-") != 0 && o->output && !o->tokenize;
}

/* ---- outputs that would replace what embed reads ---- */

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether a name ends with suffix. */
static bool ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), m = strlen(suffix);
    return n >= m && strcmp(name + n - m, suffix) == 0;
}

/* Whether a file in dir or its folders (depth levels down at most), links followed, is the file
 * out; its path goes to found. Arrays (.npy, and a corpus job's .npy.partial and .npy.progress)
 * are not looked at: a model folder's files are JSON, safetensors and vocabularies, and an
 * earlier result written into the folder may be replaced. */
static bool folder_holds(const char *dir, const struct stat *out, int depth, char *found,
                         size_t found_size)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool hit = false;
    for (struct dirent *e; !hit && (e = readdir(d));) {
        char path[4096];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            ends_with(e->d_name, ".npy") || ends_with(e->d_name, ".npy" EMBED_JOB_PARTIAL_SUFFIX) ||
            ends_with(e->d_name, ".npy" EMBED_JOB_PROGRESS_SUFFIX) ||
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
            stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            hit = depth > 0 && folder_holds(path, out, depth - 1, found, found_size);
        else if (same_file(&st, out))
            hit = snprintf(found, found_size, "%s", path) >= 0;
    }
    closedir(d);
    return hit;
}

/* Refuses a file embed would write (--output and, for a corpus job, OUT.partial and OUT.progress,
 * which it replaces or removes) that is, by device and inode (so also through a link or another
 * spelling), a file it reads: --input, standard input (--input -), or a file of the --model
 * folder. Returns -1 when none is, else usage_error's status. */
static int refuse_output_over_reads(const options *o, bool job)
{
    if (!o->output)
        return -1;
    size_t n = strlen(o->output);
    char partial[4096], progress[4096];
    if (n + strlen(EMBED_JOB_PROGRESS_SUFFIX) >= sizeof(partial))
        return usage_error("--output: the path is too long (%zu bytes)", n);
    snprintf(partial, sizeof(partial), "%s%s", o->output, EMBED_JOB_PARTIAL_SUFFIX);
    snprintf(progress, sizeof(progress), "%s%s", o->output, EMBED_JOB_PROGRESS_SUFFIX);
    const char *writes[3] = {o->output, job ? partial : NULL, job ? progress : NULL};
    for (int i = 0; i < 3; i++) {
        struct stat out, in;
        char name[8400], found[4096];
        if (!writes[i] || stat(writes[i], &out) != 0)
            continue; /* a new file */
        if (i == 0)
            snprintf(name, sizeof(name), "--output %s", o->output);
        else
            snprintf(name, sizeof(name), "--output %s: the job's file %s", o->output, writes[i]);
        bool from_stdin = o->input && strcmp(o->input, "-") == 0;
        if (o->input && !from_stdin && stat(o->input, &in) == 0 && same_file(&in, &out))
            return usage_error("%s is the same file as --input %s; refusing to overwrite or "
                               "remove an input",
                               name, o->input);
        if (from_stdin && fstat(0, &in) == 0 && same_file(&in, &out))
            return usage_error("%s is the same file as standard input (--input -); refusing to "
                               "overwrite an input",
                               name);
        if (stat(o->model, &in) == 0 &&
            (S_ISDIR(in.st_mode) ? folder_holds(o->model, &out, 3, found, sizeof(found))
                                 : same_file(&in, &out) &&
                                       snprintf(found, sizeof(found), "%s", o->model) >= 0))
            return usage_error("%s is the same file as %s of --model %s; refusing to overwrite "
                               "or remove the model",
                               name, found, o->model);
    }
    return -1;
}

/* A corpus job's --output (cli_check_output took it: a regular file, a link to one, or new) and
 * its own files OUT.partial and OUT.progress, which it creates, writes, renames and removes:
 * each must be a regular file or absent (never a FIFO or a device: the job would write into it,
 * remove it or wait on it). A link as --output is followed, as the in-memory path's writer
 * does: the job runs on the file it names (its .partial and .progress beside that file, so that
 * the final rename stays within one file system) and the link stays. Returns -1, else the exit
 * status. */
static int job_output(options *o)
{
    struct stat st;
    if (lstat(o->output, &st) == 0 && S_ISLNK(st.st_mode)) {
        o->resolved_output = realpath(o->output, NULL);
        if (!o->resolved_output)
            return usage_error("--output %s: the symbolic link cannot be followed: %s", o->output,
                               strerror(errno));
        o->output = o->resolved_output;
    }
    const char *suffixes[2] = {EMBED_JOB_PARTIAL_SUFFIX, EMBED_JOB_PROGRESS_SUFFIX};
    for (int i = 0; i < 2; i++) {
        char path[4096], problem[256];
        if (snprintf(path, sizeof(path), "%s%s", o->output, suffixes[i]) >= (int)sizeof(path))
            return usage_error("--output: the path is too long (%zu bytes)", strlen(o->output));
        bool link = lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
        if (link) /* the job makes these files itself: a link there is not one of its own */
            snprintf(problem, sizeof(problem), "a symbolic link, not a regular file");
        if (link || !cli_may_write(path, problem, sizeof(problem)))
            return usage_error("--output %s: the job's file %s: it names %s; only a regular file "
                               "or a new one is written (left unchanged)",
                               o->output, path, problem);
    }
    return -1;
}

/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_MODEL = 256, O_DEVICE, O_PRECISION, O_INPUT, O_OUTPUT, O_JSON, O_TOKENIZE, O_MAX_LENGTH,
           O_BATCH_SIZE, O_POOLING, O_NO_NORMALIZE, O_SHARD_SIZE, O_RESUME, O_PROGRESS,
           O_ALLOW_NON_FINITE, O_PROMPT, O_PROMPT_NAME, O_HELP };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"input", required_argument, NULL, O_INPUT},
        {"output", required_argument, NULL, O_OUTPUT},
        {"json", no_argument, NULL, O_JSON},
        {"tokenize", no_argument, NULL, O_TOKENIZE},
        {"max-length", required_argument, NULL, O_MAX_LENGTH},
        {"batch-size", required_argument, NULL, O_BATCH_SIZE},
        {"pooling", required_argument, NULL, O_POOLING},
        {"no-normalize", no_argument, NULL, O_NO_NORMALIZE},
        {"shard-size", required_argument, NULL, O_SHARD_SIZE},
        {"resume", no_argument, NULL, O_RESUME},
        {"progress", no_argument, NULL, O_PROGRESS},
        {"allow-non-finite", no_argument, NULL, O_ALLOW_NON_FINITE},
        {"prompt", required_argument, NULL, O_PROMPT},
        {"prompt-name", required_argument, NULL, O_PROMPT_NAME},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->pooling = -1;
    opterr = 0;
    int c;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION:
            if (!cli_parse_precision(optarg, &o->precision))
                return usage_error("--precision is fp32, bf16 or int8, not \"%s\"", optarg);
            break;
        case O_INPUT: o->input = optarg; break;
        case O_OUTPUT: o->output = optarg; break;
        case O_JSON: o->json = true; break;
        case O_TOKENIZE: o->tokenize = true; break;
        case O_MAX_LENGTH:
            if (!parse_count(optarg, 1u << 30, &v) || v < 2)
                return usage_error("--max-length needs an integer of at least 2 ([CLS] and "
                                   "[SEP]), not '%s'",
                                   optarg);
            o->max_length = (size_t)v;
            break;
        case O_BATCH_SIZE:
            if (!parse_count(optarg, 1u << 20, &v) || v == 0)
                return usage_error("--batch-size needs a positive integer, not '%s'", optarg);
            o->batch_size = (size_t)v;
            break;
        case O_POOLING:
            if (strcmp(optarg, "mean") == 0)
                o->pooling = CLATTN_POOLING_MEAN;
            else if (strcmp(optarg, "cls") == 0)
                o->pooling = CLATTN_POOLING_CLS;
            else
                return usage_error("--pooling must be mean or cls, not '%s'", optarg);
            break;
        case O_NO_NORMALIZE: o->no_normalize = true; break;
        case O_SHARD_SIZE:
            if (!parse_count(optarg, (unsigned long long)1 << 40, &v) || v == 0)
                return usage_error("--shard-size needs a positive number of bytes (at most "
                                   "2^40), not '%s'",
                                   optarg);
            o->shard_bytes = v;
            break;
        case O_RESUME: o->resume = true; break;
        case O_PROGRESS: o->progress = true; break;
        case O_ALLOW_NON_FINITE: o->allow_non_finite = true; break;
        case O_PROMPT: o->prompt = optarg; break;
        case O_PROMPT_NAME: o->prompt_name = optarg; break;
        case 'h':
        case O_HELP:
            if (comm_rank() == 0)
                usage(stdout);
            return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    o->texts = argv + optind;
    o->text_count = (size_t)(argc - optind);
    if (!o->model)
        return usage_error("--model DIR is required");
    int rc = text_list_check_source(o->input, o->texts, o->text_count, "texts");
    if (rc >= 0)
        return rc;
    if (o->prompt && o->prompt_name)
        return usage_error("give --prompt or --prompt-name, not both");
    if (o->tokenize && (o->output || o->json || o->pooling >= 0 || o->no_normalize ||
                        o->batch_size || o->device || o->allow_non_finite || o->prompt ||
                        o->prompt_name))
        return usage_error("--tokenize only prints token ids: it takes no --output, --json, "
                           "--pooling, --no-normalize, --allow-non-finite, --batch-size, "
                           "--device, --prompt or --prompt-name");
    bool job = is_corpus_job(o);
    if ((o->resume || o->shard_bytes || o->progress) && !job)
        return usage_error("--resume, --shard-size and --progress are for a corpus job: "
                           "--input FILE (not -) and --output OUT.npy");
    if (comm_size() > 1 && !job)
        return usage_error("under mpirun, embed needs --input FILE (not -) and --output OUT.npy: "
                           "each of the %d processes embeds a part of the file",
                           comm_size());
    if ((rc = cli_check_output("--output", o->output)) >= 0)
        return rc;
    if (job && (rc = job_output(o)) >= 0)
        return rc;
    return refuse_output_over_reads(o, job);
}

/* ---- the texts ---- */

/* ---- output ---- */
/* "text N" (an argument) or "line N" (of --input), from 1. */
static const char *text_name(const options *o, size_t i, char name[64])
{
    snprintf(name, 64, "%s %zu", o->input ? "line" : "text", i + 1);
    return name;
}


static int tokenize(const options *o, const text_list *t)
{
    clattn_tokenizer *tok = NULL;
    if (clattn_tokenizer_load(&tok, o->model) != CLATTN_OK)
        return runtime_error("--model: %s", clattn_last_error(NULL));
    size_t failed = 0;
    int rc = 0;
    if (embed_write_token_ids(stdout, tok, t->texts, t->lengths, t->count, o->max_length,
                              &failed) != CLATTN_OK) {
        char name[64];
        rc = runtime_error("%s: %s", text_name(o, failed, name), clattn_last_error(NULL));
    }
    clattn_tokenizer_destroy(&tok);
    return rc;
}

/* A JSON array; a value that is not finite (NaN, infinity) is null, as JSON has no such number. */
static void print_vector(const float *v, size_t d)
{
    putchar('[');
    for (size_t c = 0; c < d; c++) {
        if (isfinite(v[c]))
            printf("%s%.9g", c ? ", " : "", v[c]);
        else
            printf("%snull", c ? ", " : "");
    }
    putchar(']');
}


/* A progress bar on stderr, when it is a terminal. */
typedef struct progress {
    double start;
} progress;

static void show_progress(void *user, size_t done, size_t total)
{
    progress *p = user;
    double elapsed = cli_now_s() - p->start;
    int width = 30, filled = total ? (int)((double)width * (double)done / (double)total) : width;
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu texts, %.0f texts/s", filled,
            "==============================", width - filled, "", done, total,
            elapsed > 0 ? (double)done / elapsed : 0.0);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int embed(const options *o, const text_list *t)
{
    clattn_context *ctx = NULL;
    if (cli_context_create_precision(o->device, o->precision, &ctx))
        return EXIT_RUNTIME;
    clattn_sentence_model *model = NULL;
    clattn_sentence_model_info info;
    int rc = 0;
    double t0 = cli_now_s();
    if (clattn_sentence_model_load(ctx, &model, o->model) != CLATTN_OK ||
        clattn_sentence_model_get_info(model, &info) != CLATTN_OK) {
        rc = runtime_error("--model: %s", clattn_last_error(ctx));
        clattn_context_destroy(&ctx);
        return rc;
    }
    double load_s = cli_now_s() - t0;
    if ((rc = embed_check_prompt_name(model, o->prompt_name)) >= 0) {
        clattn_sentence_model_destroy(&model);
        clattn_context_destroy(&ctx);
        return rc;
    }
    rc = 0;
    if (o->max_length > info.max_length)
        cli_note("--max-length %zu is more than the model's %zu tokens: texts are truncated to %zu",
                 o->max_length, info.max_length, info.max_length);
    size_t d = info.hidden_size;
    float *out = NULL;
    if (t->count > (size_t)-1 / sizeof(float) / d || !(out = malloc(t->count * d * sizeof(float))))
        rc = runtime_error("out of memory for %zu embeddings of %zu floats", t->count, d);
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    params.max_length = o->max_length;
    params.batch_size = o->batch_size;
    params.pooling = o->pooling;
    if (o->no_normalize)
        params.normalize = 0;
    params.prompt = o->prompt;
    params.prompt_name = o->prompt_name;
    progress bar = {cli_now_s()};
    if (isatty(2) && t->count >= 256) {
        params.progress = show_progress;
        params.progress_user_data = &bar;
    }
    size_t tokens = 0;
    double start = cli_now_s();
    if (!rc && clattn_sentence_model_embed(model, t->texts, t->lengths, t->count, out, &params,
                                           &tokens) != CLATTN_OK) {
        /* The library names a text by its place in the array; the user's count starts at 1. */
        char message[1024], name[64];
        snprintf(message, sizeof(message), "%s", clattn_last_error(ctx));
        size_t bad = embed_first_untokenizable(model, t->texts, t->lengths, t->count,
                                               o->max_length);
        if (bad < t->count)
            rc = runtime_error("%s: %s", text_name(o, bad, name), clattn_last_error(NULL));
        else
            rc = runtime_error("%s", message);
    }
    double seconds = cli_now_s() - start;
    size_t first_bad = 0, non_finite = rc ? 0 : embed_non_finite_rows(out, t->count, d, &first_bad);
    if (non_finite && !o->allow_non_finite) {
        char name[64];
        rc = runtime_error("%zu of %zu embeddings are not finite (NaN or infinity; the first: "
                           "%s): the model's weights hold such values or its computation "
                           "overflowed; nothing written (--allow-non-finite keeps them)",
                           non_finite, t->count, text_name(o, first_bad, name));
    } else if (non_finite) {
        cli_note("%zu of %zu embeddings are not finite (NaN or infinity); kept as "
                 "--allow-non-finite asks",
                 non_finite, t->count);
    }
    if (!rc && o->output &&
        clattn_npy_write_f32(o->output, out, 2, (size_t[]){t->count, d}) != CLATTN_OK)
        rc = runtime_error("--output: %s", clattn_last_error(NULL));
    if (!rc && o->json) {
        clattn_device_info dev;
        clattn_context_device_info(ctx, &dev);
        printf("{\"model\": ");
        print_json_string(o->model);
        printf(", \"device\": ");
        print_json_string(dev.name);
        printf(", \"count\": %zu, \"hidden\": %zu, "
               "\"tokens\": %zu, \"load_s\": %.3f, \"seconds\": %.3f, \"texts_per_s\": %.1f, "
               "\"tokens_per_s\": %.1f",
               t->count, d, tokens, load_s, seconds,
               seconds > 0 ? (double)t->count / seconds : 0.0,
               seconds > 0 ? (double)tokens / seconds : 0.0);
        if (o->output) {
            printf(", \"output\": ");
            print_json_string(o->output);
            printf("}\n");
        } else {
            printf(", \"embeddings\": [");
            for (size_t i = 0; i < t->count; i++) {
                if (i)
                    printf(", ");
                print_vector(out + i * d, d);
            }
            printf("]}\n");
        }
    } else if (!rc && !o->output) {
        for (size_t i = 0; i < t->count; i++) {
            print_vector(out + i * d, d);
            putchar('\n');
        }
    }
    free(out);
    clattn_sentence_model_destroy(&model);
    clattn_context_destroy(&ctx);
    return rc;
}

static int run_corpus_job(const options *o)
{
    embed_job_settings settings = {
        .model = o->model,
        .device = o->device,
        .precision = o->precision,
        .input = o->input,
        .output = o->output,
        .max_length = o->max_length,
        .batch_size = o->batch_size,
        .pooling = o->pooling,
        .no_normalize = o->no_normalize,
        .shard_bytes = o->shard_bytes ? o->shard_bytes : EMBED_JOB_DEFAULT_SHARD_BYTES,
        .resume = o->resume,
        .json = o->json,
        .progress = o->progress,
        .allow_non_finite = o->allow_non_finite,
        .prompt = o->prompt,
        .prompt_name = o->prompt_name,
    };
    return embed_job_run(&settings);
}

int main(int argc, char **argv)
{
    cli_set_program("embed");
    char error[512];
    if (!comm_init(&argc, &argv, error, sizeof(error)))
        return runtime_error("MPI did not start: %s", error);
    cli_set_usage_quiet(comm_rank() != 0);
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc < 0 && is_corpus_job(&o)) {
        rc = run_corpus_job(&o);
    } else if (rc < 0) {
        text_list t;
        if ((rc = text_list_load(o.input, o.texts, o.text_count, "text", &t)) == 0)
            rc = o.tokenize ? tokenize(&o, &t) : embed(&o, &t);
        text_list_free(&t);
    }
    free(o.resolved_output);
    if (fflush(stdout) != 0 && rc == 0)
        rc = runtime_error("writing to stdout failed: %s", strerror(errno));
    comm_finalize();
    return rc;
}
