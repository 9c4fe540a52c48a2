/* The processes of one job: under an MPI launcher (mpirun; the build found MPI) the ranks of
 * MPI_COMM_WORLD, else this one process alone. Collectives (every function marked so) must be
 * called by every process in the same order; with one process they return at once.
 *
 * Also the job's shared output files: every process writes its own parts at their offsets
 * (MPI-IO under MPI, pwrite alone). */
#ifndef CLATTN_EXAMPLES_JOB_COMM_H
#define CLATTN_EXAMPLES_JOB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Starts MPI when the program runs under an MPI launcher and MPI was built in; otherwise a
 * one-process job. Returns false (with a message in error) when MPI fails to start. */
bool comm_init(int *argc, char ***argv, char *error, size_t error_size);
/* Ends MPI if it was started. */
void comm_finalize(void);

bool comm_is_mpi(void);
int comm_rank(void);
int comm_size(void);
/* This process's position among the processes on its node, and their count. */
int comm_local_rank(void);
int comm_local_size(void);
/* The node's name (the host name). */
const char *comm_node_name(void);

/* Collectives. */
int comm_max_int(int value);
uint64_t comm_sum_u64(uint64_t value);
double comm_max_double(double value);
/* Every process gives counts[rank] values; all receive all, in rank order. */
void comm_allgather_u64(const uint64_t *mine, const int *counts, uint64_t *all);
/* Every process gives `size` bytes; the root (rank 0) receives comm_size() * size, rank order. */
void comm_gather_bytes(const void *mine, size_t size, void *all_at_root);
/* Rank 0's `size` bytes to every process. */
void comm_broadcast(void *data, size_t size);

/* A file every process writes into. Test hook: with CLATTN_JOB_IO_TRACE=FILE, every write
 * ("PID write PATH OFFSET BYTES") and sync ("PID sync PATH") that succeeded appends a line to
 * FILE, after the system call (tests check that data is synced before it is recorded). */
typedef struct comm_file comm_file;

/* Collective: opens path for writing (create: a new file, refused when the name exists), only
 * when it is a regular file: never through a symbolic link, never waiting on a FIFO (under MPI,
 * rank 0 makes or checks it, then every rank opens it). Returns 0, else an errno-like non-zero
 * code (the same on every process) with a message naming the path in rank 0's error. */
int comm_file_open(comm_file **file, const char *path, bool create, char *error,
                   size_t error_size);
/* The device and inode of the file opened (one process, or rank 0 under MPI), to know it again
 * by its name later. */
void comm_file_identity(const comm_file *file, uint64_t *device, uint64_t *inode);
/* Collective: sets the file's length in bytes. */
int comm_file_set_size(comm_file *file, uint64_t bytes, char *error, size_t error_size);
/* Collective: every process writes count units of unit_bytes from data at byte offset (count may
 * be 0). */
int comm_file_write_at_all(comm_file *file, uint64_t offset, const void *data, size_t unit_bytes,
                           size_t count, char *error, size_t error_size);
/* This process alone writes bytes at offset. */
int comm_file_write_at(comm_file *file, uint64_t offset, const void *data, size_t bytes,
                       char *error, size_t error_size);
/* Collective: the writes so far reach the storage. */
int comm_file_sync(comm_file *file, char *error, size_t error_size);
/* Collective: closes the file; accepts NULL. */
void comm_file_close(comm_file **file);

#endif /* CLATTN_EXAMPLES_JOB_COMM_H */
