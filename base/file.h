/* file.h: the rules every module follows for the files a user names (libc only, like status.h,
 * so gguf/ and tools/ share them without an upward dependency).
 *
 * Inputs are regular files. open() of a FIFO with no writer blocks forever and a device may
 * stream without end, so sl_file_open_input looks at the path before opening it, opens it with
 * O_NONBLOCK (which cannot block) and checks the opened file again; anything but a regular file
 * is refused with a message naming the path and what it is.
 *
 * Outputs are written to "TARGET.partial" and renamed over TARGET at the end, so TARGET never
 * holds half a file and a reader that has it mapped keeps the old inode. That is only right when
 * TARGET is a regular file or absent: renaming over a device node or a FIFO would replace the
 * node with a file. sl_file_output_resolve therefore refuses directories, FIFOs, devices and
 * sockets, and follows a symbolic link to the regular file it names: the link stays and its
 * target gets the new content (as a shell redirection would write it). A link to nothing is
 * refused rather than creating a file wherever it points. Standard streams ("-", /dev/stdout)
 * are the caller's business: tools/common/fileio.h writes them in place. */
#ifndef SL_FILE_H
#define SL_FILE_H

#include <stdbool.h>
#include <sys/stat.h>

#include "base/status.h"

/* "regular file", "directory", "FIFO", "character device", "block device", "socket",
 * "symbolic link" or "special file", for st_mode. Never NULL. */
const char *sl_file_type_name(mode_t mode);

/* Opens path read-only (O_CLOEXEC, blocking mode restored after the checks) into *fd and fills
 * *st. Not a regular file: SL_ERR_INVALID "PATH: is a FIFO, not a regular file"; missing:
 * SL_ERR_NOT_FOUND; other failures SL_ERR_IO with errno's text. *fd is -1 on failure. */
sl_status sl_file_open_input(const char *path, int *fd, struct stat *st, sl_error *err);

/* Where an output named `path` is written: *target (malloc'd, the caller frees) is path itself
 * when it is absent or a regular file, or the regular file a symbolic link resolves to.
 * *exists says whether the target exists (then *st is its stat). The target's directory must
 * exist and be writable. Refusals are SL_ERR_INVALID naming the path and what it is. */
sl_status sl_file_output_resolve(const char *path, char **target, bool *exists, struct stat *st,
                                 sl_error *err);

/* Creates "TARGET.partial" afresh for writing (a stale regular file or link of that name is
 * removed first; the new file is never reached through a link) with the permission bits of the
 * existing target, if any. *tmp is malloc'd (the caller frees and, on abandon, unlinks it). */
sl_status sl_file_temp_create(const char *target, char **tmp, int *fd, sl_error *err);

#endif
