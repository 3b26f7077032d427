/* The CLI's file rules (see fileio.h). */
#include "tools/common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "base/file.h"

void sl_cli_io_init(sl_cli_io *io, const char *cmd)
{
    memset(io, 0, sizeof *io);
    io->cmd = cmd;
    io->max_input_bytes = SL_CLI_IO_DEFAULT_MAX_INPUT_BYTES;
}

void sl_cli_io_free(sl_cli_io *io)
{
    for (size_t i = 0; i < io->n_in; i++) free(io->in[i].path);
    for (size_t i = 0; i < io->n_out; i++) free(io->out[i].path);
    io->n_in = io->n_out = 0;
}

int sl_cli_io_flag_parse(sl_cli_io *io, sl_cli_args *a)
{
    if (!sl_cli_is(a, "--max-input-bytes", NULL)) return 0;
    const char *v = sl_cli_value(a);
    int64_t n;
    if (!v || sl_cli_parse_i64(a->cmd, a->flag, v, 1, INT64_MAX, &n)) return 2;
    io->max_input_bytes = (uint64_t)n;
    return 1;
}

static int add_file(sl_cli_io *io, bool out, const char *flag, const char *path,
                    const struct stat *st)
{
    size_t *n = out ? &io->n_out : &io->n_in;
    sl_cli_io_file *f = out ? &io->out[*n] : &io->in[*n];
    if (*n == SL_CLI_IO_MAX_FILES) {
        fprintf(stderr, "sluice %s: more than %d files\n", io->cmd, SL_CLI_IO_MAX_FILES);
        return 1;
    }
    if (!(f->path = strdup(path))) {
        fprintf(stderr, "sluice %s: out of memory\n", io->cmd);
        return 1;
    }
    f->flag = flag;
    f->known = st != NULL;
    if (st) {
        f->dev = st->st_dev;
        f->ino = st->st_ino;
    }
    (*n)++;
    return 0;
}

static void quiet(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

int sl_cli_io_add_model(sl_cli_io *io, const char *path, const char *gpu_index)
{
    sl_gguf_options go = {.notice = quiet};
    sl_gguf *g = NULL;
    sl_error err = {0};
    if (sl_gguf_open(path, &go, &g, &err)) {
        fprintf(stderr, "sluice %s: %s\n", io->cmd, err.msg);
        return 1;
    }
    int rc = 0;
    for (uint32_t k = 0; k < sl_gguf_shard_count(g) && !rc; k++) {
        const char *sp = sl_gguf_shard_path(g, k);
        struct stat st;
        if (stat(sp, &st) != 0) {
            fprintf(stderr, "sluice %s: %s: %s\n", io->cmd, sp, strerror(errno));
            rc = 1;
        } else {
            rc = add_file(io, false, "-m", sp, &st);
        }
    }
    sl_gguf_close(g);
    /* the neuron index is an input too: an output must not replace it */
    char generated[PATH_MAX];
    const char *idx = gpu_index;
    if (!idx && (size_t)snprintf(generated, sizeof generated, "%s.generated.gpuidx", path) <
                    sizeof generated)
        idx = generated;
    struct stat st;
    if (!rc && idx && stat(idx, &st) == 0)
        rc = add_file(io, false, gpu_index ? "--gpu-index" : "the neuron index", idx, &st);
    return rc;
}

static int input_error(const sl_cli_io *io, const char *flag, const sl_error *err)
{
    fprintf(stderr, "sluice %s: %s %s\n", io->cmd, flag, err->msg);
    return 1;
}

static int too_long(const sl_cli_io *io, const char *flag, const char *path)
{
    fprintf(stderr, "sluice %s: %s %s: longer than --max-input-bytes %" PRIu64 " (raise it to "
                    "read more)\n", io->cmd, flag, path, io->max_input_bytes);
    return 1;
}

int sl_cli_io_read_text(sl_cli_io *io, const char *flag, const char *path, char **out,
                        size_t *len)
{
    *out = NULL;
    *len = 0;
    const bool is_stdin = !strcmp(path, "-");
    int fd = STDIN_FILENO;
    struct stat st;
    sl_error err = {0};
    if (!is_stdin) {
        if (sl_file_open_input(path, &fd, &st, &err)) return input_error(io, flag, &err);
        if ((uint64_t)st.st_size > io->max_input_bytes) {
            close(fd);
            return too_long(io, flag, path);
        }
    }
    /* a regular file may still grow while it is read (or claim size 0, as /proc's do): the
     * bound holds on the bytes read, whatever the size said */
    const uint64_t max = io->max_input_bytes;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -ENOMEM;
    while (!rc) {
        if (n + 1 == cap) {
            char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        /* up to max + 1 bytes, so that "more than max" is seen without reading further */
        size_t want = cap - 1 - n;
        if ((uint64_t)n + want > max + 1) want = (size_t)(max + 1 - n);
        const ssize_t r = read(fd, buf + n, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = -errno;
        else if (r == 0) break;
        else if ((n += (size_t)r) > max) rc = 1;
    }
    if (!is_stdin) close(fd);
    if (rc) {
        free(buf);
        if (rc == 1) return too_long(io, flag, path);
        fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, path,
                rc == -ENOMEM ? "out of memory" : strerror(-rc));
        return 1;
    }
    if (!is_stdin && add_file(io, false, flag, path, &st)) {
        free(buf);
        return 1;
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

int sl_cli_io_open_input(sl_cli_io *io, const char *flag, const char *path, FILE **f,
                         uint64_t *size)
{
    *f = NULL;
    int fd;
    struct stat st;
    sl_error err = {0};
    if (sl_file_open_input(path, &fd, &st, &err)) return input_error(io, flag, &err);
    if (!(*f = fdopen(fd, "rb"))) {
        fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, path, strerror(errno));
        close(fd);
        return 1;
    }
    *size = (uint64_t)st.st_size;
    if (add_file(io, false, flag, path, &st)) {
        fclose(*f);
        *f = NULL;
        return 1;
    }
    return 0;
}

/* ---- outputs ------------------------------------------------------------------------------ */

/* The standard stream a name means, or NULL. */
static FILE *stream_of(const char *path)
{
    if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout")) return stdout;
    if (!strcmp(path, "/dev/stderr")) return stderr;
    return NULL;
}

/* Canonical name of a target whose directory exists: realpath of the directory + base name,
 * so that "x" and "./x" are seen as one output before either exists. */
static char *canonical(const char *target)
{
    const char *slash = strrchr(target, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == target ? 1 : (int)(slash - target), target);
    if (!realpath(dir, real)) return NULL;
    const char *base = slash ? slash + 1 : target;
    const size_t n = strlen(real) + strlen(base) + 2;
    char *c = malloc(n);
    if (c) snprintf(c, n, "%s/%s", strcmp(real, "/") ? real : "", base);
    return c;
}

static const sl_cli_io_file *same_as(const sl_cli_io *io, const char *canon, bool exists,
                                     const struct stat *st)
{
    for (size_t i = 0; exists && i < io->n_in; i++)
        if (io->in[i].known && io->in[i].dev == st->st_dev && io->in[i].ino == st->st_ino)
            return &io->in[i];
    for (size_t i = 0; i < io->n_out; i++)
        if (!strcmp(io->out[i].path, canon)) return &io->out[i];
    return NULL;
}

int sl_cli_out_prepare(sl_cli_io *io, sl_cli_out *o, const char *flag, const char *path,
                       unsigned how)
{
    memset(o, 0, sizeof *o);
    o->flag = flag;
    o->path = path;
    if (!path) return 0;
    FILE *s = stream_of(path);
    if (s) {
        if (!(how & SL_CLI_OUT_STREAMS) || (how & SL_CLI_OUT_BY_NAME))
            return sl_cli_usage_error(io->cmd, "%s %s: a standard stream is not available for "
                                      "this output; give a file", flag, path);
        o->f = s;
        o->in_place = true;
        return 0;
    }
    if (!strcmp(path, "/dev/null")) {
        o->in_place = true;
        if (!(how & SL_CLI_OUT_BY_NAME) && !(o->f = fopen(path, "wb"))) {
            fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, path, strerror(errno));
            return 1;
        }
        return 0;
    }
    sl_error err = {0};
    bool exists;
    struct stat st;
    if (sl_file_output_resolve(path, &o->target, &exists, &st, &err)) {
        fprintf(stderr, "sluice %s: %s %s\n", io->cmd, flag, err.msg);
        return 1;
    }
    char *canon = canonical(o->target);
    if (!canon) {
        fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, path, strerror(errno));
        sl_cli_out_discard(o);
        return 1;
    }
    const sl_cli_io_file *dup = same_as(io, canon, exists, &st);
    if (dup) {
        fprintf(stderr, "sluice %s: %s %s: the same file as %s %s%s; refusing to write over "
                        "it\n", io->cmd, flag, path, dup->flag, dup->path,
                dup >= io->in && dup < io->in + io->n_in ? " (an input of this run)" : "");
        free(canon);
        sl_cli_out_discard(o);
        return 1;
    }
    const int added = add_file(io, true, flag, canon, NULL);
    free(canon);
    int fd;
    if (added || sl_file_temp_create(o->target, &o->tmp, &fd, &err)) {
        if (!added) fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, path, err.msg);
        sl_cli_out_discard(o);
        return 1;
    }
    if (how & SL_CLI_OUT_BY_NAME) {
        close(fd);
        return 0;
    }
    if (!(o->f = fdopen(fd, "wb"))) {
        fprintf(stderr, "sluice %s: %s %s: %s\n", io->cmd, flag, o->tmp, strerror(errno));
        close(fd);
        sl_cli_out_discard(o);
        return 1;
    }
    return 0;
}

const char *sl_cli_out_name(const sl_cli_out *o)
{
    return o->tmp ? o->tmp : o->path;
}

int sl_cli_out_commit(const sl_cli_io *io, sl_cli_out *o)
{
    if (!o->path) return 0;
    int e = 0;
    errno = 0;
    if (o->f && (fflush(o->f) != 0 || ferror(o->f))) e = errno ? errno : EIO;
    if (e && (o->f == stdout || o->f == stderr)) clearerr(o->f); /* reported here, once */
    if (o->f && o->f != stdout && o->f != stderr) {
        errno = 0;
        if (fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    }
    o->f = NULL;
    if (!e && o->tmp && rename(o->tmp, o->target) != 0) e = errno;
    if (e) {
        fprintf(stderr, "sluice %s: %s %s: write failed: %s\n", io->cmd, o->flag, o->path,
                strerror(e));
        sl_cli_out_discard(o);
        return 1;
    }
    free(o->tmp);
    free(o->target);
    o->tmp = o->target = NULL;
    o->path = NULL;
    return 0;
}

void sl_cli_out_discard(sl_cli_out *o)
{
    /* a failed write to a standard stream was reported by the writer: once is enough */
    if (o->f == stdout || o->f == stderr) clearerr(o->f);
    else if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    o->tmp = o->target = NULL;
}

/* ---- standard output ---------------------------------------------------------------------- */

int sl_cli_stdout_check(const char *cmd)
{
    errno = 0;
    const int fl = fflush(stdout);
    const int e = errno;
    if (!fl && !ferror(stdout)) return 0;
    fprintf(stderr, "sluice %s: error writing standard output: %s\n", cmd,
            e ? strerror(e) : "an earlier write failed");
    clearerr(stdout);
    return 1;
}

int sl_cli_stdout_close(const char *cmd)
{
    int rc = sl_cli_stdout_check(cmd);
    errno = 0;
    if (fclose(stdout) != 0 && !rc) {
        fprintf(stderr, "sluice %s: error writing standard output: %s\n", cmd,
                strerror(errno ? errno : EIO));
        rc = 1;
    }
    return rc;
}
