/* The shared file rules of file.h: non-blocking regular-file inputs, outputs through a temporary
 * beside a regular (or absent) target. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sl_file_type_name(mode_t mode)
{
    if (S_ISREG(mode)) return "regular file";
    if (S_ISDIR(mode)) return "directory";
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISBLK(mode)) return "block device";
    if (S_ISSOCK(mode)) return "socket";
    if (S_ISLNK(mode)) return "symbolic link";
    return "special file";
}

static sl_status open_error(const char *path, int e, sl_error *err)
{
    return sl_error_set(err, e == ENOENT ? SL_ERR_NOT_FOUND : SL_ERR_IO, "%s: cannot open: %s",
                        path, strerror(e));
}

static sl_status not_regular(const char *path, mode_t mode, sl_error *err)
{
    return sl_error_set(err, SL_ERR_INVALID, "%s: is a %s, not a regular file", path,
                        sl_file_type_name(mode));
}

sl_status sl_file_open_input(const char *path, int *fd, struct stat *st, sl_error *err)
{
    *fd = -1;
    /* stat first: opening some devices has effects of its own (a tape rewinds) */
    if (stat(path, st) != 0) return open_error(path, errno, err);
    if (!S_ISREG(st->st_mode)) return not_regular(path, st->st_mode, err);
    const int f = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0) return open_error(path, errno, err);
    /* the path may have been replaced between stat and open: judge what was opened */
    if (fstat(f, st) != 0) {
        const int e = errno;
        close(f);
        return sl_error_set(err, SL_ERR_IO, "%s: fstat: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(f);
        return not_regular(path, st->st_mode, err);
    }
    const int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        const int e = errno;
        close(f);
        return sl_error_set(err, SL_ERR_IO, "%s: fcntl: %s", path, strerror(e));
    }
    *fd = f;
    return SL_OK;
}

static char *dup_str(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The directory of `target` must exist and take new files (the temporary lands there). */
static sl_status check_dir(const char *path, const char *target, sl_error *err)
{
    const char *slash = strrchr(target, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == target) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - target) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - target), target);
    else return sl_error_set(err, SL_ERR_INVALID, "%s: path too long", path);
    struct stat st;
    if (stat(dir, &st) != 0)
        return sl_error_set(err, SL_ERR_IO, "%s: directory %s: %s", path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is a %s, not a directory", path, dir,
                            sl_file_type_name(st.st_mode));
    if (access(dir, W_OK | X_OK) != 0)
        return sl_error_set(err, SL_ERR_IO, "%s: directory %s is not writable: %s", path, dir,
                            strerror(errno));
    return SL_OK;
}

sl_status sl_file_output_resolve(const char *path, char **target, bool *exists, struct stat *st,
                                 sl_error *err)
{
    *target = NULL;
    *exists = false;
    if (!path || !*path) return sl_error_set(err, SL_ERR_INVALID, "output: empty file name");
    struct stat ls;
    char *t = NULL;
    if (lstat(path, &ls) != 0) {
        if (errno != ENOENT)
            return sl_error_set(err, SL_ERR_IO, "%s: %s", path, strerror(errno));
        t = dup_str(path);
    } else if (S_ISLNK(ls.st_mode)) {
        t = realpath(path, NULL);
        if (!t) {
            const int e = errno;
            if (e == ENOENT)
                return sl_error_set(err, SL_ERR_INVALID, "%s: is a symbolic link to a missing "
                                    "file (refusing to create a file through it)", path);
            return sl_error_set(err, SL_ERR_IO, "%s: resolving the symbolic link: %s", path,
                                strerror(e));
        }
        if (stat(t, st) != 0) {
            const int e = errno;
            free(t);
            return sl_error_set(err, SL_ERR_IO, "%s: %s", path, strerror(e));
        }
        if (!S_ISREG(st->st_mode)) {
            sl_error_set(err, SL_ERR_INVALID, "%s: is a symbolic link to %s, a %s, not a regular "
                         "file", path, t, sl_file_type_name(st->st_mode));
            free(t);
            return SL_ERR_INVALID;
        }
        *exists = true;
    } else if (!S_ISREG(ls.st_mode)) {
        return sl_error_set(err, SL_ERR_INVALID, "%s: is a %s, not a regular file (outputs are "
                            "written beside their target and renamed over it)", path,
                            sl_file_type_name(ls.st_mode));
    } else {
        *st = ls;
        *exists = true;
        t = dup_str(path);
    }
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory", path);
    const sl_status s = check_dir(path, t, err);
    if (s) {
        free(t);
        return s;
    }
    *target = t;
    return SL_OK;
}

sl_status sl_file_temp_create(const char *target, char **tmp, int *fd, sl_error *err)
{
    *tmp = NULL;
    *fd = -1;
    const size_t n = strlen(target) + sizeof ".partial";
    char *t = malloc(n);
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory", target);
    snprintf(t, n, "%s.partial", target);
    struct stat st;
    if (lstat(t, &st) == 0) {
        /* a leftover of an interrupted run; anything else of that name is not ours to remove */
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            sl_error_set(err, SL_ERR_INVALID, "%s: exists and is a %s (the temporary file of "
                         "%s)", t, sl_file_type_name(st.st_mode), target);
            free(t);
            return SL_ERR_INVALID;
        }
        (void)unlink(t);
    }
    /* O_EXCL: never through a link planted after the unlink */
    const int f = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (f < 0) {
        sl_error_set(err, SL_ERR_IO, "cannot create %s: %s", t, strerror(errno));
        free(t);
        return SL_ERR_IO;
    }
    if (stat(target, &st) == 0 && S_ISREG(st.st_mode)) (void)fchmod(f, st.st_mode & 07777);
    *tmp = t;
    *fd = f;
    return SL_OK;
}
