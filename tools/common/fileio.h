/* The file rules of the CLI commands, on top of base/file.h (which gguf/ follows too).
 *
 * - Inputs: every file a command reads is registered in its sl_cli_io. It must be a regular file
 *   (open never blocks on a FIFO; devices and directories are refused, naming the path and what
 *   it is). A text read whole is bounded by --max-input-bytes (default 1 GiB); "-f -" reads
 *   standard input under the same bound. The model and its shards are inputs too.
 * - Outputs are checked before any work, after every input is registered (sl_cli_out_prepare):
 *   the target may be neither an input of the run nor another output (same st_dev + st_ino, or
 *   the same path), must be a regular file or absent (a symbolic link is followed to the regular
 *   file it names; base/file.h says why), and "TARGET.partial" is created beside it there and
 *   then, which proves the directory takes it. Everything is written to the temporary; only when
 *   every write, flush and close succeeded is it renamed over the target (sl_cli_out_commit).
 *   Otherwise it is removed (sl_cli_out_discard) and the target is left as it was.
 *   "-", /dev/stdout and /dev/stderr name the standard streams, written in place where the
 *   command allows it (SL_CLI_OUT_STREAMS); /dev/null is written in place always.
 * - Standard output: sl_cli_stdout_check after a command's prints, and main closes stdout through
 *   sl_cli_stdout_close: a failed write, flush or close prints "sluice CMD: error writing
 *   standard output: why" and the command exits 1.
 * Messages: "sluice CMD: FLAG PATH: why"; file errors return 1, usage errors 2. */
#ifndef SL_CLI_FILEIO_H
#define SL_CLI_FILEIO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "tools/common/model_flags.h"

enum { SL_CLI_IO_MAX_FILES = 64 };
#define SL_CLI_IO_DEFAULT_MAX_INPUT_BYTES (UINT64_C(1) << 30)

/* A file of the run: what names it in messages and which inode it is (valid when known). */
typedef struct sl_cli_io_file {
    const char *flag;
    char *path;         /* malloc'd copy */
    bool known;
    dev_t dev;
    ino_t ino;
} sl_cli_io_file;

typedef struct sl_cli_io {
    const char *cmd;
    uint64_t max_input_bytes;
    sl_cli_io_file in[SL_CLI_IO_MAX_FILES], out[SL_CLI_IO_MAX_FILES];
    size_t n_in, n_out;
} sl_cli_io;

void sl_cli_io_init(sl_cli_io *io, const char *cmd);
void sl_cli_io_free(sl_cli_io *io);
/* --max-input-bytes N: same return convention as sl_cli_model_flags_parse. */
int sl_cli_io_flag_parse(sl_cli_io *io, sl_cli_args *a);
#define SL_CLI_IO_HELP                                                                          \
    "  --max-input-bytes N    refuse a text file (or standard input) longer than N bytes\n"   \
    "                         (default 1073741824 = 1 GiB)\n"

/* Registers the model file and, for a shard set, every shard (through a header-only open), and
 * the neuron index hot-cold (and auto) placement reads: gpu_index (--gpu-index; NULL: none
 * given), else MODEL.generated.gpuidx, each when it exists (a missing index is the engine's to
 * report). On failure prints "sluice CMD: why" and returns 1. */
int sl_cli_io_add_model(sl_cli_io *io, const char *path, const char *gpu_index);
/* Reads a whole text file ("-": standard input) into a NUL-terminated malloc'd buffer (*len
 * bytes without the NUL), at most max_input_bytes, and registers it. 1 after a message. */
int sl_cli_io_read_text(sl_cli_io *io, const char *flag, const char *path, char **out,
                        size_t *len);
/* Opens a binary input for reading and registers it; *size its bytes. 1 after a message. */
int sl_cli_io_open_input(sl_cli_io *io, const char *flag, const char *path, FILE **f,
                         uint64_t *size);

enum {
    SL_CLI_OUT_STREAMS = 1, /* "-", /dev/stdout, /dev/stderr accepted (FILE outputs only) */
    SL_CLI_OUT_BY_NAME = 2, /* a writer opens sl_cli_out_name() itself; no FILE is kept */
};

typedef struct sl_cli_out {
    const char *flag, *path; /* as given; path NULL: no output */
    char *target, *tmp;      /* for a file: where it lands and the temporary written first */
    FILE *f;                 /* what to write to (not with SL_CLI_OUT_BY_NAME) */
    bool in_place;           /* a standard stream or /dev/null */
} sl_cli_out;

/* Checks and prepares an output (path NULL: nothing to do, returns 0). 1 after a message naming
 * the flag and path (2 for a standard stream the command does not allow). */
int sl_cli_out_prepare(sl_cli_io *io, sl_cli_out *o, const char *flag, const char *path,
                       unsigned how);
/* The name a SL_CLI_OUT_BY_NAME writer writes to (the temporary, or /dev/null). */
const char *sl_cli_out_name(const sl_cli_out *o);
/* Flushes and closes, then renames the temporary over the target. 1 after a message. */
int sl_cli_out_commit(const sl_cli_io *io, sl_cli_out *o);
/* Abandons an output that was not committed: closes and removes the temporary. Idempotent. */
void sl_cli_out_discard(sl_cli_out *o);

/* fflush(stdout) and ferror: 0, or 1 after "sluice CMD: error writing standard output: why"
 * (the error is then cleared so that it is reported once). */
int sl_cli_stdout_check(const char *cmd);
/* sl_cli_stdout_check, then fclose(stdout), checked too. For main, after every command. */
int sl_cli_stdout_close(const char *cmd);

#endif
