/* embed's corpus job: a text file, one text per line, embedded into one .npy by every process of
 * the job (one, or the ranks of mpirun), shard by shard, resumable. See embed_job.c. */
#ifndef CLATTN_EXAMPLES_EMBED_JOB_H
#define CLATTN_EXAMPLES_EMBED_JOB_H

#include <clattn/clattn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of input per shard unless --shard-size says otherwise. */
#define EMBED_JOB_DEFAULT_SHARD_BYTES ((uint64_t)1 << 20)

/* The job's own files: OUTPUT followed by these (embed refuses an output whose files are any of
 * the files it reads). */
#define EMBED_JOB_PARTIAL_SUFFIX ".partial"
#define EMBED_JOB_PROGRESS_SUFFIX ".progress"

typedef struct embed_job_settings {
    const char *model;
    const char *device; /* NULL: $CLATTN_DEVICE, else a GPU of the node by local rank, else the
                           default device */
    int precision;      /* clattn_precision of the GEMMs */
    const char *input;  /* a file (not stdin: every process reads its own part) */
    const char *output; /* the .npy: a regular file or none (embed.c checked it, and its
                           .partial and .progress, and followed a link) */
    size_t max_length, batch_size; /* 0: the defaults */
    int pooling;                   /* -1: the model's */
    bool no_normalize;
    uint64_t shard_bytes;
    bool resume;   /* finish the job an earlier run left in OUTPUT.partial / OUTPUT.progress */
    bool json;     /* statistics as one JSON object on stdout (rank 0) */
    bool progress; /* a progress line on stderr also when it is not a terminal */
    bool allow_non_finite; /* keep rows with NaN or infinity (else such a shard fails the job) */
    const char *prompt, *prompt_name; /* clattn_embed_params' (NULL: the model's default) */
} embed_job_settings;

/* Runs the job on every process; returns the exit status (0, or 1 with the cause printed once). */
int embed_job_run(const embed_job_settings *settings);

/* Shared with embed's in-memory path: the exit status (2, with the names the model has on
 * stderr) when --prompt-name names no prompt of the model, else -1. */
int embed_check_prompt_name(const clattn_sentence_model *model, const char *prompt_name);

/* Shared with embed's in-memory path: after clattn_sentence_model_embed failed on texts[0..count),
 * the index of the first text its tokenizer refuses (truncated to max_length, 0: the model's),
 * with the tokenizer's message in clattn_last_error(NULL); count when every text tokenizes (the
 * failure lay elsewhere). */
size_t embed_first_untokenizable(const clattn_sentence_model *model, const char *const *texts,
                                 const size_t *lengths, size_t count, size_t max_length);

/* Shared with embed's in-memory path: the rows of rows[count][hidden] holding a value that is
 * not finite (NaN or infinity); *first receives the first such row's index (count when none). */
size_t embed_non_finite_rows(const float *rows, size_t count, size_t hidden, size_t *first);

#endif /* CLATTN_EXAMPLES_EMBED_JOB_H */
