/* Reading and writing whole files for the file formats (file_io.c). Errors are recorded as
 * "<function>: <path>: <what>". */
#ifndef CLATTN_FILE_IO_H
#define CLATTN_FILE_IO_H

#include <stdbool.h>
#include <stdio.h>

#include "base/errors.h"

/* Opens a regular file for reading (never blocking; anything else is refused, named) and gives
 * its descriptor (close it) and size. */
clattn_status clattn__open_regular(const char *function, const char *path, int *fd, size_t *size);
/* Reads exactly count bytes at offset; a short file or a read error is CLATTN_ERROR_IO. */
clattn_status clattn__read_at(const char *function, const char *path, int fd, size_t offset,
                              void *dst, size_t count);
/* Reads a whole regular file into a new malloc'd buffer (never more than the file's size). */
clattn_status clattn__read_file(const char *function, const char *path, unsigned char **bytes,
                                size_t *size);
/* Reads a whole regular file as JSON (duplicate keys rejected) into a new *root; errors name
 * the file, and the line for invalid JSON. The caller json_decref()s *root. */
typedef struct json_t json_t;
clattn_status clattn__read_json(const char *function, const char *path, json_t **root);

/* Opens a new temporary file next to path (a symbolic link followed) for writing: *target and
 * *temp receive the malloc'd names clattn__finish_file needs. Refuses an existing path that is
 * not a regular file; records "cannot create" with the system's reason. */
clattn_status clattn__create_file(const char *function, const char *path, FILE **f, char **target,
                                  char **temp);
/* Closes a file written with `ok` telling whether every write succeeded and renames it over the
 * target, atomically refusing a target that is no longer new or a regular file (something that
 * took the name while the file was written is left as it is); on any failure removes the
 * temporary file (only) and records "write failed" with the system's reason (or what took the
 * name). Frees target and temp. */
clattn_status clattn__finish_file(const char *function, const char *path, FILE *f, char *target,
                                  char *temp, bool ok);
/* Writes `count` floats to f in little-endian byte order; false on a write error. */
bool clattn__write_floats(FILE *f, const float *data, size_t count);

#endif /* CLATTN_FILE_IO_H */
