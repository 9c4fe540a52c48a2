/* Putting a finished temporary file at its target so that only a regular file, or nothing, is
 * ever replaced there (file_replace.c): what the library's writers share (the .npy and
 * safetensors writers of formats/file_io.c, the tuning cache of tuning.c). */
#ifndef CLATTN_FILE_REPLACE_H
#define CLATTN_FILE_REPLACE_H

#include <sys/stat.h>

/* What a file of this mode is, for messages ("a FIFO", "a directory", ...). */
const char *clattn__file_kind(mode_t mode);

/* Outcomes of clattn__replace_file besides 0 and an errno. */
#define CLATTN_REPLACE_REFUSED (-1)  /* target names something else now: left as it is */
#define CLATTN_REPLACE_STRANDED (-2) /* that something could not be put back: it lies at temp */

/* Puts temp (a regular file the caller wrote) at target, even should something other than a
 * regular file have taken the name while temp was written (the caller looked a moment
 * earlier): a free name takes temp with RENAME_NOREPLACE (never replacing what appeared
 * meanwhile; link() where the file system lacks the flag); a taken name is exchanged with temp
 * (RENAME_EXCHANGE) and what came out is looked at: a regular file (the file replaced) is
 * removed, anything else exchanged back, untouched. Where the file system has neither, a look
 * and a plain rename. Returns 0 (temp is gone), CLATTN_REPLACE_REFUSED (temp stays; the kind of
 * what is at target in *kind), CLATTN_REPLACE_STRANDED, or an errno (temp stays). */
int clattn__replace_file(const char *temp, const char *target, const char **kind);

#endif /* CLATTN_FILE_REPLACE_H */
