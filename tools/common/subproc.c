/* Runs a program with posix_spawn and captures its standard output and error (subproc.h).
 *
 * Both pipes are drained together with poll(), so a child that writes a lot to one stream while
 * the parent waits on the other cannot deadlock. Bytes past max_bytes are read and dropped. The
 * pipes are created close-on-exec so that no other child spawned meanwhile (by another thread)
 * inherits their write ends, which would keep them open after this child exits. */
#include "tools/common/subproc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/cli.h"

extern char **environ;

typedef struct sink {
    char *buf;
    size_t len, cap, max;
} sink;

/* Appends up to max - len bytes (sl_cli_append keeps the buffer NUL-terminated); with n == 0 it
 * makes sure a buffer exists. 1 when out of memory. */
static int sink_add(sink *s, const char *p, size_t n)
{
    if (n > s->max - s->len) n = s->max - s->len;
    return (n || !s->buf) && sl_cli_append(&s->buf, &s->len, &s->cap, p, n);
}

void sl_subproc_result_free(sl_subproc_result *r)
{
    if (!r) return;
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}

sl_status sl_subproc_run(char *const argv[], const sl_subproc_opts *opt, sl_subproc_result *res,
                         sl_error *err)
{
    memset(res, 0, sizeof *res);
    const sl_subproc_opts def = {0};
    if (!opt) opt = &def;
    const size_t max_bytes = opt->max_bytes ? opt->max_bytes : (size_t)64 << 20;
    if (!argv || !argv[0]) return sl_error_set(err, SL_ERR_INVALID, "no program to run");
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
        int e = errno;
        if (po[0] >= 0) close(po[0]), close(po[1]);
        return sl_error_set(err, SL_ERR_IO, "%s: pipe: %s", argv[0], strerror(e));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    if (!opt->stderr_inherit) posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    const double t0 = sl_cli_now_s();
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (rc) {
        close(po[0]);
        close(pe[0]);
        return sl_error_set(err, SL_ERR_IO, "%s: cannot start: %s", argv[0], strerror(rc));
    }
    sink so = {.max = max_bytes}, se = {.max = max_bytes};
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    sl_status st = SL_OK;
    int open_fds = 2;
    char chunk[65536];
    while (open_fds > 0) {
        int pr = poll(fds, 2, opt->tick ? 250 : -1);
        if (opt->tick) opt->tick(opt->user, sl_cli_now_s() - t0);
        if (pr < 0) {
            if (errno == EINTR) continue;
            st = sl_error_set(err, SL_ERR_IO, "%s: poll: %s", argv[0], strerror(errno));
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            if (sink_add(i ? &se : &so, chunk, (size_t)n) && st == SL_OK)
                st = sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory reading its output",
                                  argv[0]);
        }
        if (st != SL_OK) break;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR) {
            if (st == SL_OK)
                st = sl_error_set(err, SL_ERR_IO, "%s: waitpid: %s", argv[0], strerror(errno));
            break;
        }
    }
    res->seconds = sl_cli_now_s() - t0;
    if (st != SL_OK) {
        free(so.buf);
        free(se.buf);
        return st;
    }
    /* empty outputs still come back as "" so callers need not test for NULL */
    if (sink_add(&so, "", 0) || sink_add(&se, "", 0)) {
        free(so.buf);
        free(se.buf);
        return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory", argv[0]);
    }
    res->out = so.buf;
    res->out_len = so.len;
    res->err = se.buf;
    res->err_len = se.len;
    res->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 255;
    return SL_OK;
}
