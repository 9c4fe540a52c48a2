/* Replacing a file by a finished temporary one: only a regular file, or nothing, is replaced. */
#include "file_replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

const char *clattn__file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "a special file";
}

/* Whether renameat2 said that the file system lacks the flag asked for. */
static bool flag_unsupported(int err)
{
    return err == EINVAL || err == ENOSYS || err == ENOTSUP || err == EXDEV;
}

/* A look at target, then a plain rename (a window of a moment remains between the two). */
static int checked_rename(const char *temp, const char *target, const char **kind)
{
    struct stat st;
    if (lstat(target, &st) == 0 && !S_ISREG(st.st_mode)) {
        *kind = clattn__file_kind(st.st_mode);
        return CLATTN_REPLACE_REFUSED;
    }
    return rename(temp, target) == 0 ? 0 : errno;
}

int clattn__replace_file(const char *temp, const char *target, const char **kind)
{
    struct stat st;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (renameat2(AT_FDCWD, temp, AT_FDCWD, target, RENAME_NOREPLACE) == 0)
            return 0;
        if (flag_unsupported(errno)) {
            if (link(temp, target) == 0) {
                unlink(temp);
                return 0;
            }
            if (errno != EEXIST) /* no hard links either */
                return checked_rename(temp, target, kind);
        } else if (errno != EEXIST) {
            return errno;
        }
        /* The name is taken. */
        if (renameat2(AT_FDCWD, temp, AT_FDCWD, target, RENAME_EXCHANGE) != 0) {
            if (errno == ENOENT)
                continue; /* gone meanwhile: a free name again */
            return flag_unsupported(errno) ? checked_rename(temp, target, kind) : errno;
        }
        bool seen = lstat(temp, &st) == 0;
        if (seen && S_ISREG(st.st_mode)) {
            unlink(temp); /* the file replaced */
            return 0;
        }
        *kind = seen ? clattn__file_kind(st.st_mode) : "something that cannot be examined";
        if (renameat2(AT_FDCWD, temp, AT_FDCWD, target, RENAME_EXCHANGE) != 0)
            return CLATTN_REPLACE_STRANDED;
        return CLATTN_REPLACE_REFUSED;
    }
    return EAGAIN; /* the name came and went while we looked, again and again */
}
