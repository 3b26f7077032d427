/* The shared floor's leftovers and waits (issue 29, cases 6 and 7), against alloc/shm_floor
 * directly:
 *   - stale reclaim: a region whose last holder was killed with -9 stays while its file is
 *     unchanged (the next opener reuses it) and is removed, with its lock file, by the next
 *     attach (any key of the prefix) once the file changed;
 *   - the lock wait: an opener of a region another process is filling gives up after
 *     wait_ms with SL_ERR_RANGE naming the holder's pid and since when, or at once when its
 *     cancel hook says so (SL_ERR_INVALID "cancelled"); after the filler dies the region is
 *     filled again. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc/shm_floor.h"
#include "tests/testing.h"

enum { BYTES = 1 << 16 };

static char g_prefix[64];

typedef struct filler {
    uint8_t byte;
    int ready_fd;   /* >= 0: write one byte there, then block (a stopped materializer) */
} filler;

static sl_status digest_of(void *user, uint8_t d[SL_SHM_FLOOR_DIGEST], sl_error *err)
{
    (void)err;
    const filler *f = user;
    static uint8_t buf[BYTES];
    memset(buf, f->byte, sizeof buf);
    sl_shm_floor_hash h;
    sl_shm_floor_hash_init(&h, 0);
    sl_shm_floor_hash_update(&h, buf, sizeof buf);
    sl_shm_floor_hash_final(&h, d);
    return SL_OK;
}

static sl_status fill(void *user, uint8_t *payload, uint64_t bytes,
                      uint8_t d[SL_SHM_FLOOR_DIGEST], sl_error *err)
{
    const filler *f = user;
    if (f->ready_fd >= 0) {
        const char c = 'f';
        if (write(f->ready_fd, &c, 1) != 1) return sl_error_set(err, SL_ERR_IO, "pipe");
        for (;;) pause(); /* killed by the test */
    }
    memset(payload, f->byte, bytes);
    return digest_of(user, d, err);
}

static sl_shm_floor_options opts(uint64_t key, const char *label, filler *f)
{
    sl_shm_floor_options o = {.prefix = g_prefix, .key = key, .bytes = BYTES, .fill = fill,
                              .digest = digest_of, .user = f, .label = label};
    memset(o.identity, (int)key, sizeof o.identity);
    return o;
}

static bool shm_exists(uint64_t key, bool lock)
{
    char name[256], path[300];
    sl_shm_floor_object_name(g_prefix, key, name, sizeof name);
    snprintf(path, sizeof path, "/dev/shm/%s%s", name, lock ? ".lock" : "");
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A child that attaches (filling, or blocking in the fill when block) and then waits to be
 * killed; returns once it has attached (or started filling). */
static pid_t attach_in_child(uint64_t key, const char *label, bool block)
{
    int p[2];
    if (pipe(p)) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a test that hangs and is killed */
        close(p[0]);
        filler f = {0x5a, block ? p[1] : -1};
        sl_shm_floor_options o = opts(key, label, &f);
        sl_shm_floor *fl = NULL;
        sl_error e;
        if (sl_shm_floor_attach(&o, &fl, NULL, &e)) _exit(3);
        const char c = 'a';
        if (write(p[1], &c, 1) != 1) _exit(4);
        for (;;) pause();
    }
    close(p[1]);
    char c = 0;
    const ssize_t n = read(p[0], &c, 1);
    close(p[0]);
    CHECK_MSG(n == 1, "child %d did not attach", (int)pid);
    return pid;
}

static void kill9(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Attaches with key (label) in this process and detaches: what runs reclaim_stale. */
static void touch_prefix(uint64_t key, const char *label)
{
    filler f = {0x11, -1};
    sl_shm_floor_options o = opts(key, label, &f);
    sl_shm_floor *fl = NULL;
    sl_error e;
    CHECK_MSG(sl_shm_floor_attach(&o, &fl, NULL, &e) == SL_OK, "%s", e.msg);
    sl_shm_floor_detach(fl);
}

static void test_stale_reclaim(const char *dir)
{
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/a.model", dir);
    snprintf(b, sizeof b, "%s/b.model", dir);
    write_file(a, "version 1");
    write_file(b, "other");
    const uint64_t ka = 0xA1, kb = 0xB2;
    kill9(attach_in_child(ka, a, false));
    CHECK_MSG(shm_exists(ka, false) && shm_exists(ka, true),
              "a holder killed with -9 leaves its region (nobody could detach)");
    touch_prefix(kb, b);
    CHECK_MSG(shm_exists(ka, false), "a holderless region whose file is unchanged stays");
    write_file(a, "version 2, longer");
    touch_prefix(kb, b);
    CHECK_MSG(!shm_exists(ka, false) && !shm_exists(ka, true),
              "once its file changed, the next attach of the prefix removes the region and "
              "its lock file");
    /* a removed file too */
    kill9(attach_in_child(ka, a, false));
    CHECK(shm_exists(ka, false));
    unlink(a);
    touch_prefix(kb, b);
    CHECK_MSG(!shm_exists(ka, false), "a region whose file is gone is removed");
    CHECK_MSG(!shm_exists(kb, false), "the last holder's detach removed its own region");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int g_polls;
static bool cancel_after_3(void *user)
{
    (void)user;
    return ++g_polls >= 3;
}

static void test_lock_wait(const char *dir)
{
    char a[1024], want[64];
    snprintf(a, sizeof a, "%s/c.model", dir);
    write_file(a, "content");
    const uint64_t key = 0xC3;
    const pid_t holder = attach_in_child(key, a, true); /* stopped inside its fill */
    snprintf(want, sizeof want, "pid %d since 20", (int)holder);
    filler f = {0x5a, -1};
    sl_shm_floor_options o = opts(key, a, &f);
    o.wait_ms = 300;
    sl_shm_floor *fl = NULL;
    sl_error e;
    double t0 = now_s();
    sl_status st = sl_shm_floor_attach(&o, &fl, NULL, &e);
    double dt = now_s() - t0;
    CHECK_MSG(st == SL_ERR_RANGE && fl == NULL, "a wait past wait_ms fails: %d %s", st, e.msg);
    CHECK_CONTAINS(e.msg, want);
    CHECK_CONTAINS(e.msg, a);
    CHECK_MSG(dt >= 0.29 && dt < 10, "gave up after %.2f s (wait_ms 300)", dt);

    o.wait_ms = 600000;
    o.cancelled = cancel_after_3;
    t0 = now_s();
    st = sl_shm_floor_attach(&o, &fl, NULL, &e);
    dt = now_s() - t0;
    CHECK_MSG(st == SL_ERR_INVALID && fl == NULL, "a cancelled wait fails: %d %s", st, e.msg);
    CHECK_CONTAINS(e.msg, "cancelled");
    CHECK_CONTAINS(e.msg, want);
    CHECK_MSG(dt < 10, "cancelled after %.2f s", dt);

    kill9(holder); /* the materializer dies: the next opener fills the region again */
    o.cancelled = NULL;
    o.wait_ms = 10000;
    sl_shm_floor_how how = SL_SHM_FLOOR_SAME_SOURCE;
    st = sl_shm_floor_attach(&o, &fl, &how, &e);
    CHECK_MSG(st == SL_OK && how == SL_SHM_FLOOR_FILLED, "after the filler's death: %d %s",
              st, e.msg);
    if (fl) {
        CHECK(sl_shm_floor_payload(fl)[BYTES - 1] == 0x5a);
        sl_shm_floor_detach(fl);
    }
    CHECK(!shm_exists(key, false));
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/shm_floor_test.XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_prefix, sizeof g_prefix, "sltest%d", (int)getpid());
    alarm(120); /* a wait that ignores wait_ms fails the test instead of hanging it */
    test_stale_reclaim(dir);
    test_lock_wait(dir);
    return sl_test_finish("shm_floor_test");
}
