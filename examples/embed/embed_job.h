/* embed's corpus job: a text file, one text per line, embedded into one .npy by every process of
 * the job (one, or the ranks of mpirun), shard by shard, resumable. See embed_job.c. */
#ifndef CLATTN_EXAMPLES_EMBED_JOB_H
#define CLATTN_EXAMPLES_EMBED_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of input per shard unless --shard-size says otherwise. */
#define EMBED_JOB_DEFAULT_SHARD_BYTES ((uint64_t)1 << 20)

typedef struct embed_job_settings {
    const char *model;
    const char *device; /* NULL: $CLATTN_DEVICE, else a GPU of the node by local rank, else the
                           default device */
    const char *input;  /* a file (not stdin: every process reads its own part) */
    const char *output; /* the .npy */
    size_t max_length, batch_size; /* 0: the defaults */
    int pooling;                   /* -1: the model's */
    bool no_normalize;
    uint64_t shard_bytes;
    bool resume;   /* finish the job an earlier run left in OUTPUT.partial / OUTPUT.progress */
    bool json;     /* statistics as one JSON object on stdout (rank 0) */
    bool progress; /* a progress line on stderr also when it is not a terminal */
} embed_job_settings;

/* Runs the job on every process; returns the exit status (0, or 1 with the cause printed once). */
int embed_job_run(const embed_job_settings *settings);

#endif /* CLATTN_EXAMPLES_EMBED_JOB_H */
