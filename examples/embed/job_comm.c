/* The processes of one job: MPI's ranks under an MPI launcher, else one process (job_comm.h). */
#include "job_comm.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CLATTN_HAVE_MPI
#include <mpi.h>
#endif

static bool use_mpi;
static int rank, size = 1, local_rank, local_size = 1;
static char node_name[256] = "localhost";

#ifdef CLATTN_HAVE_MPI
/* Launchers announce themselves in the environment: Open MPI's mpirun, PMIx and the PMI of
 * MPICH's Hydra and Slurm. Without one, MPI_Init would start a singleton job for nothing. */
static bool launched_by_mpi(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                        "PMI_RANK"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (getenv(names[i]))
            return true;
    return false;
}

static void mpi_message(int code, char *error, size_t error_size)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", code);
    snprintf(error, error_size, "%s", text);
}
#endif

bool comm_init(int *argc, char ***argv, char *error, size_t error_size)
{
    (void)argc, (void)argv, (void)error, (void)error_size;
    if (gethostname(node_name, sizeof(node_name)) != 0)
        snprintf(node_name, sizeof(node_name), "localhost");
    node_name[sizeof(node_name) - 1] = '\0';
#ifdef CLATTN_HAVE_MPI
    if (!launched_by_mpi())
        return true;
    int provided = 0, code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (code != MPI_SUCCESS) {
        mpi_message(code, error, error_size);
        return false;
    }
    use_mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
#endif
    return true;
}

void comm_finalize(void)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi)
        MPI_Finalize();
    use_mpi = false;
#endif
}

bool comm_is_mpi(void) { return use_mpi; }
int comm_rank(void) { return rank; }
int comm_size(void) { return size; }
int comm_local_rank(void) { return local_rank; }
int comm_local_size(void) { return local_size; }
const char *comm_node_name(void) { return node_name; }

/* ---- collectives ---- */

#ifdef CLATTN_HAVE_MPI
/* One value reduced in place over all ranks. */
static void allreduce(void *value, MPI_Datatype type, MPI_Op op)
{
    if (use_mpi)
        MPI_Allreduce(MPI_IN_PLACE, value, 1, type, op, MPI_COMM_WORLD);
}
#define ALLREDUCE(value, type, op) allreduce(&(value), type, op)
#else
#define ALLREDUCE(value, type, op) ((void)0)
#endif

int comm_max_int(int value)
{
    ALLREDUCE(value, MPI_INT, MPI_MAX);
    return value;
}

uint64_t comm_sum_u64(uint64_t value)
{
    ALLREDUCE(value, MPI_UINT64_T, MPI_SUM);
    return value;
}

double comm_max_double(double value)
{
    ALLREDUCE(value, MPI_DOUBLE, MPI_MAX);
    return value;
}

void comm_allgather_u64(const uint64_t *mine, const int *counts, uint64_t *all)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        int *displacements = calloc((size_t)size, sizeof(int));
        for (int r = 1; r < size && displacements; r++)
            displacements[r] = displacements[r - 1] + counts[r - 1];
        if (displacements) {
            MPI_Allgatherv(mine, counts[rank], MPI_UINT64_T, all, counts, displacements,
                           MPI_UINT64_T, MPI_COMM_WORLD);
            free(displacements);
            return;
        }
        MPI_Abort(MPI_COMM_WORLD, 1); /* out of memory for `size` ints: nothing sensible left */
    }
#endif
    memcpy(all, mine, (size_t)counts[0] * sizeof(uint64_t));
}

void comm_gather_bytes(const void *mine, size_t bytes, void *all_at_root)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        MPI_Gather(mine, (int)bytes, MPI_BYTE, all_at_root, (int)bytes, MPI_BYTE, 0,
                   MPI_COMM_WORLD);
        return;
    }
#endif
    memcpy(all_at_root, mine, bytes);
}

void comm_broadcast(void *data, size_t bytes)
{
#ifdef CLATTN_HAVE_MPI
    /* In pieces: MPI counts in ints. */
    for (size_t at = 0; use_mpi && at < bytes; at += (size_t)1 << 30) {
        size_t n = bytes - at < ((size_t)1 << 30) ? bytes - at : (size_t)1 << 30;
        MPI_Bcast((char *)data + at, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
#else
    (void)data, (void)bytes;
#endif
}

/* ---- shared files ---- */

struct comm_file {
    int fd; /* one process: the file written; rank 0 under MPI: the file checked (held open) */
#ifdef CLATTN_HAVE_MPI
    MPI_File handle; /* MPI */
#endif
    dev_t device; /* what fd is (one process, rank 0) */
    ino_t inode;
    char *path; /* for messages and CLATTN_JOB_IO_TRACE */
};

/* CLATTN_JOB_IO_TRACE=FILE: a line appended to FILE after each write ("PID write PATH OFFSET
 * BYTES") and each sync ("PID sync PATH") that succeeded, by every process. */
static void trace(const comm_file *f, const char *what, uint64_t offset, size_t bytes)
{
    const char *log = getenv("CLATTN_JOB_IO_TRACE");
    if (!log || !log[0])
        return;
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[4200];
    int n = strcmp(what, "sync") == 0
                ? snprintf(line, sizeof(line), "%ld sync %s\n", (long)getpid(), f->path)
                : snprintf(line, sizeof(line), "%ld %s %s %llu %zu\n", (long)getpid(), what,
                           f->path, (unsigned long long)offset, bytes);
    if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) != n)
        n = -1; /* a test hook: a lost line fails the test that reads it */
    close(fd);
}

static int system_error(const char *what, char *error, size_t error_size)
{
    int code = errno ? errno : EIO;
    snprintf(error, error_size, "%s: %s", what, strerror(code));
    return code;
}

/* Opens f->path for writing on this process (create: a new file, O_EXCL), never through a
 * symbolic link (O_NOFOLLOW) nor waiting on a FIFO (O_NONBLOCK), and keeps it only when it is a
 * regular file; records what it is. 0, else an errno with the message in error. */
static int open_regular(comm_file *f, bool create, char *error, size_t error_size)
{
    int flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT | O_EXCL : 0);
    struct stat st;
    int code = 0;
    f->fd = open(f->path, flags, 0644);
    if (f->fd < 0 || fstat(f->fd, &st) != 0)
        code = errno;
    else if (S_ISREG(st.st_mode)) {
        f->device = st.st_dev, f->inode = st.st_ino;
        return 0;
    }
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    /* Not a regular file: what fstat saw, else what is there (a FIFO: ENXIO, a link: ELOOP). */
    if (!code || (lstat(f->path, &st) == 0 && !S_ISREG(st.st_mode)))
        snprintf(error, error_size, "%s: it names %s, not a regular file: the job's files are "
                 "only ever regular files (left unchanged)",
                 f->path, cli_file_kind(st.st_mode));
    else if (create && code == EEXIST)
        snprintf(error, error_size, "%s: cannot create: it appeared after the job looked (left "
                 "unchanged)", f->path);
    else
        snprintf(error, error_size, "%s: cannot open: %s", f->path, strerror(code));
    return code ? code : EINVAL;
}

/* Rank 0 under MPI, after every rank opened f->path: whether it is still the file rank 0 checked
 * (MPI-IO opens by name). */
static int still_checked(const comm_file *f, char *error, size_t error_size)
{
    struct stat st;
    if (lstat(f->path, &st) == 0 && st.st_dev == f->device && st.st_ino == f->inode)
        return 0;
    snprintf(error, error_size, "%s: it was replaced while the job opened it (left unchanged)",
             f->path);
    return EIO;
}

int comm_file_open(comm_file **file, const char *path, bool create, char *error,
                   size_t error_size)
{
    comm_file *f = calloc(1, sizeof(*f));
    *file = NULL;
    error[0] = '\0';
    if (!f || !(f->path = strdup(path))) {
        free(f);
        snprintf(error, error_size, "out of memory");
        return comm_max_int(ENOMEM);
    }
    f->fd = -1;
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        /* Rank 0 makes or checks the file (MPI-IO has no O_NOFOLLOW or O_NONBLOCK) and keeps it
         * open; then every rank opens what it checked, never creating. */
        int code = comm_max_int(rank == 0 ? open_regular(f, create, error, error_size) : 0);
        if (!code) {
            code = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL,
                                 &f->handle);
            if (code != MPI_SUCCESS)
                mpi_message(code, error, error_size);
            bool opened = code == MPI_SUCCESS;
            code = !opened ? EIO : rank == 0 ? still_checked(f, error, error_size) : 0;
            code = comm_max_int(code);
            if (code && opened)
                MPI_File_close(&f->handle);
            if (code && !error[0])
                snprintf(error, error_size, "%s: cannot open: another rank could not", path);
        }
        if (code) {
            if (f->fd >= 0)
                close(f->fd);
            free(f->path);
            free(f);
            return code;
        }
        *file = f;
        return 0;
    }
#endif
    int code = open_regular(f, create, error, error_size);
    if (code) {
        free(f->path);
        free(f);
        return code;
    }
    *file = f;
    return 0;
}

void comm_file_identity(const comm_file *f, uint64_t *device, uint64_t *inode)
{
    *device = (uint64_t)f->device;
    *inode = (uint64_t)f->inode;
}

int comm_file_set_size(comm_file *f, uint64_t bytes, char *error, size_t error_size)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        int code = MPI_File_set_size(f->handle, (MPI_Offset)bytes);
        if (code != MPI_SUCCESS)
            mpi_message(code, error, error_size);
        return comm_max_int(code != MPI_SUCCESS ? EIO : 0);
    }
#endif
    if (ftruncate(f->fd, (off_t)bytes) != 0)
        return system_error("cannot set the size", error, error_size);
    return 0;
}

/* pwrite until everything is written. */
static int write_fully(int fd, uint64_t offset, const void *data, size_t bytes, char *error,
                       size_t error_size)
{
    const char *p = data;
    while (bytes > 0) {
        ssize_t n = pwrite(fd, p, bytes, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return system_error("write failed", error, error_size);
        p += n, offset += (uint64_t)n, bytes -= (size_t)n;
    }
    return 0;
}

int comm_file_write_at_all(comm_file *f, uint64_t offset, const void *data, size_t unit_bytes,
                           size_t count, char *error, size_t error_size)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        /* Units (rows) as one MPI type, so that a count beyond INT_MAX bytes still fits. */
        MPI_Datatype unit;
        MPI_Type_contiguous((int)unit_bytes, MPI_BYTE, &unit);
        MPI_Type_commit(&unit);
        int code = MPI_File_write_at_all(f->handle, (MPI_Offset)offset, data, (int)count, unit,
                                         MPI_STATUS_IGNORE);
        MPI_Type_free(&unit);
        if (code != MPI_SUCCESS)
            mpi_message(code, error, error_size);
        else if (count)
            trace(f, "write", offset, unit_bytes * count);
        return code != MPI_SUCCESS ? EIO : 0;
    }
#endif
    int code = write_fully(f->fd, offset, data, unit_bytes * count, error, error_size);
    if (!code && count)
        trace(f, "write", offset, unit_bytes * count);
    return code;
}

int comm_file_write_at(comm_file *f, uint64_t offset, const void *data, size_t bytes,
                       char *error, size_t error_size)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        int code = MPI_File_write_at(f->handle, (MPI_Offset)offset, data, (int)bytes, MPI_BYTE,
                                     MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS)
            mpi_message(code, error, error_size);
        else
            trace(f, "write", offset, bytes);
        return code != MPI_SUCCESS ? EIO : 0;
    }
#endif
    int code = write_fully(f->fd, offset, data, bytes, error, error_size);
    if (!code)
        trace(f, "write", offset, bytes);
    return code;
}

int comm_file_sync(comm_file *f, char *error, size_t error_size)
{
#ifdef CLATTN_HAVE_MPI
    if (use_mpi) {
        int code = MPI_File_sync(f->handle);
        if (code != MPI_SUCCESS)
            mpi_message(code, error, error_size);
        else
            trace(f, "sync", 0, 0);
        return code != MPI_SUCCESS ? EIO : 0;
    }
#endif
    if (fsync(f->fd) != 0)
        return system_error("sync failed", error, error_size);
    trace(f, "sync", 0, 0);
    return 0;
}

void comm_file_close(comm_file **file)
{
    if (!file || !*file)
        return;
#ifdef CLATTN_HAVE_MPI
    if (use_mpi)
        MPI_File_close(&(*file)->handle);
#endif
    if ((*file)->fd >= 0)
        close((*file)->fd);
    free((*file)->path);
    free(*file);
    *file = NULL;
}
