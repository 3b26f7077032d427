/* Whom a shared host floor may serve (alloc/shm_floor.h through sl_runtime, sim device, real
 * processes and real /dev/shm objects):
 *   identity — two different files of one layout and one mtime (as cp -p, rsync -t, touch -r
 *     leave them) never share a region: a process opening the second computes its own weights,
 *     whether the files differ where the key samples them or only elsewhere (then the digest
 *     check sends it to a region of its own); a copy with equal bytes (another inode) shares
 *     the region after a full digest check; the same file shares it on trust;
 *   ownership — as root, objects that a second uid created under root's floor name are
 *     refused (the message names the uid), as is an own object that others may write; the
 *     requested mode is applied exactly under umask 077. Skipped without root (no second uid).
 * The parent forks before it creates any thread: every runtime runs in a child. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { VOCAB = 300, N_TOK = 4 };
static const int32_t k_tokens[N_TOK] = {1, 9, 77, 250};
static char g_dir[1024], g_prefix[64];

/* What a child reports through its pipe. */
typedef struct report {
    int ok;
    float logits[VOCAB];
    char floor_name[96];
    bool made, checked;
    char msg[512];
} report;

typedef struct run_opts {
    bool shared;
    unsigned mode;
    int umask_bits;             /* -1: leave */
} run_opts;

static void child_body(const char *path, const run_opts *ro_in, int out_fd, int go_fd)
{
    report r = {0};
    if (ro_in->umask_bits >= 0) umask((mode_t)ro_in->umask_bits);
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = 16ull << 20;
    ro.host_slab_bytes = 2ull << 20;
    ro.shared_floor = ro_in->shared;
    ro.shm_prefix = g_prefix;
    ro.shm_mode = ro_in->mode;
    sl_runtime *rt = NULL;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err = {0};
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.progress = false;
    if (sl_runtime_create(&ro, &rt, &err) || sl_model_open_in(rt, path, &o, &m, &err) ||
        sl_runtime_acquire(rt, m, &err) || sl_ctx_create(m, NULL, &c, &err) ||
        sl_ctx_eval(c, k_tokens, N_TOK, &err)) {
        snprintf(r.msg, sizeof r.msg, "%s", err.msg);
    } else {
        r.ok = 1;
        memcpy(r.logits, sl_ctx_logits(c, -1), sizeof r.logits);
        sl_runtime_model_info mi;
        if (!sl_runtime_model_info_get(rt, m, &mi, &err)) {
            snprintf(r.floor_name, sizeof r.floor_name, "%s", mi.floor_name);
            r.made = mi.floor_materialized;
            /* a region of another file or version is attached only after a digest check:
             * the check itself shows in the name and logits; old builds lack the flag */
#ifdef SL_FLOOR_HAS_DIGEST_FLAG
            r.checked = mi.floor_digest_checked;
#endif
        }
    }
    if (write(out_fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
    if (go_fd >= 0) {
        char b;
        if (read(go_fd, &b, 1) != 1) _exit(4);
    }
    sl_ctx_destroy(c);
    sl_model_close(m);
    sl_runtime_destroy(rt, NULL);
    _exit(0);
}

/* A child that opens path, reports, and (held) waits for a byte on *go before letting go. */
typedef struct child {
    pid_t pid;
    int out, go;
} child;

static child start(const char *path, const run_opts *ro, bool hold)
{
    int o[2], g[2] = {-1, -1};
    child c = {-1, -1, -1};
    if (pipe(o) || (hold && pipe(g))) return c;
    c.pid = fork();
    if (c.pid == 0) {
        close(o[0]);
        if (hold) close(g[1]);
        child_body(path, ro, o[1], hold ? g[0] : -1);
    }
    close(o[1]);
    if (hold) close(g[0]);
    c.out = o[0];
    c.go = hold ? g[1] : -1;
    return c;
}

static bool collect(child *c, report *r)
{
    memset(r, 0, sizeof *r);
    size_t got = 0;
    while (got < sizeof *r) {
        const ssize_t k = read(c->out, (char *)r + got, sizeof *r - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(c->out);
    return got == sizeof *r;
}

static bool finish(child *c)
{
    if (c->go >= 0) {
        char b = 0;
        if (write(c->go, &b, 1) != 1) return false;
        close(c->go);
    }
    int status = 0;
    waitpid(c->pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* One run to completion. */
static report run(const char *path, const run_opts *ro)
{
    child c = start(path, ro, false);
    report r;
    CHECK(collect(&c, &r));
    CHECK(finish(&c));
    return r;
}

static const run_opts k_private = {false, 0, -1}, k_shared = {true, 0, -1};

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b);
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, n, b) == n);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* to's atime and mtime := from's (cp -p, touch -r). */
static void same_times(const char *from, const char *to)
{
    struct stat sb;
    CHECK(stat(from, &sb) == 0);
    const struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
    CHECK(utimensat(AT_FDCWD, to, ts, 0) == 0);
    struct stat sc;
    CHECK(stat(to, &sc) == 0 && sc.st_mtim.tv_sec == sb.st_mtim.tv_sec &&
          sc.st_mtim.tv_nsec == sb.st_mtim.tv_nsec && sc.st_size == sb.st_size);
}

/* output.weight's element 16 (vocab row 0, away from the first, middle and last bytes a key
 * would sample) set to 3.0f in place: another content, the same layout, size and mtime. */
static void poke_output(const char *path)
{
    sl_gguf *g = NULL;
    sl_error err;
    CHECK_MSG(sl_gguf_open(path, NULL, &g, &err) == SL_OK, "%s", err.msg);
    if (!g) return;
    const sl_gguf_tensor *t = sl_gguf_tensor_find(g, "output.weight");
    CHECK(t && t->type == SL_GGML_F32 && t->nbytes > 4096);
    const uint64_t at = t ? t->file_offset + 64 : 0;
    sl_gguf_close(g);
    const int fd = open(path, O_WRONLY);
    const float v = 3.0f;
    CHECK(fd >= 0 && pwrite(fd, &v, sizeof v, (off_t)at) == (ssize_t)sizeof v);
    if (fd >= 0) close(fd);
}

static void test_identity(void)
{
    char a[1200], b[1200], b2[1200], c[1200];
    snprintf(a, sizeof a, "%s/a.gguf", g_dir);
    snprintf(b, sizeof b, "%s/b.gguf", g_dir);
    snprintf(b2, sizeof b2, "%s/b2.gguf", g_dir);
    snprintf(c, sizeof c, "%s/c.gguf", g_dir);
    tm_params p;
    tm_defaults("llama", &p);
    p.n_layer = 2;
    sl_error err;
    p.seed = 1;
    CHECK_MSG(tm_write(&p, a, &err) == SL_OK, "%s", err.msg);
    p.seed = 2; /* another fine-tune of one base: same layout, other bytes */
    CHECK_MSG(tm_write(&p, b, &err) == SL_OK, "%s", err.msg);
    same_times(a, b);
    copy_file(a, b2); /* differs from a only where no key samples */
    poke_output(b2);
    same_times(a, b2);
    copy_file(a, c);  /* a's bytes under another inode */
    same_times(a, c);

    const report ra = run(a, &k_private), rb = run(b, &k_private), rb2 = run(b2, &k_private);
    CHECK_MSG(ra.ok && rb.ok && rb2.ok, "private runs: %s %s %s", ra.msg, rb.msg, rb2.msg);
    CHECK(memcmp(ra.logits, rb.logits, sizeof ra.logits) != 0);
    CHECK(memcmp(ra.logits, rb2.logits, sizeof ra.logits) != 0);

    /* a holds its floor while the others open theirs */
    child ha = start(a, &k_shared, true);
    report sa;
    CHECK(collect(&ha, &sa));
    CHECK_MSG(sa.ok && sa.made && sa.floor_name[0], "a: %s", sa.msg);
    CHECK(!memcmp(sa.logits, ra.logits, sizeof ra.logits));

    const report sb = run(b, &k_shared);
    CHECK_MSG(sb.ok, "b: %s", sb.msg);
    CHECK_MSG(!memcmp(sb.logits, rb.logits, sizeof rb.logits),
              "b (same layout and mtime as a) computed other weights than its own");
    CHECK_MSG(strcmp(sb.floor_name, sa.floor_name) != 0 && sb.made,
              "b attached a's region %s", sb.floor_name);

    const report sb2 = run(b2, &k_shared);
    CHECK_MSG(sb2.ok, "b2: %s", sb2.msg);
    CHECK_MSG(!memcmp(sb2.logits, rb2.logits, sizeof rb2.logits),
              "b2 (a's bytes but one float, same mtime) computed other weights than its own");
    CHECK_MSG(strcmp(sb2.floor_name, sa.floor_name) != 0 && sb2.made,
              "b2 attached a's region %s", sb2.floor_name);

    const report sc = run(c, &k_shared);
    CHECK_MSG(sc.ok, "c: %s", sc.msg);
    CHECK(!memcmp(sc.logits, ra.logits, sizeof ra.logits));
    CHECK_MSG(!strcmp(sc.floor_name, sa.floor_name) && !sc.made,
              "a copy of a's bytes: region %s (a's %s), filled %d", sc.floor_name, sa.floor_name,
              sc.made);
#ifdef SL_FLOOR_HAS_DIGEST_FLAG
    CHECK_MSG(sc.checked, "a copy (another inode) is attached only after a digest check");
#endif
    const report sa2 = run(a, &k_shared);
    CHECK(sa2.ok && !strcmp(sa2.floor_name, sa.floor_name) && !sa2.made && !sa2.checked);
    CHECK(finish(&ha));
}

/* An unused uid (no passwd entry) for the second user. */
static uid_t unused_uid(void)
{
    for (uid_t u = 54321; u < 54400; u++)
        if (!getpwuid(u)) return u;
    return 0;
}

static void create_as(uid_t uid, const char *name, mode_t mode)
{
    const pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) _exit(10);
        char shm[200], lock[200];
        snprintf(shm, sizeof shm, "/%s", name);
        snprintf(lock, sizeof lock, "/dev/shm/%s.lock", name);
        const int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, mode);
        const int lf = open(lock, O_RDWR | O_CREAT | O_EXCL, mode);
        if (fd < 0 || lf < 0 || fchmod(fd, mode) || fchmod(lf, mode)) _exit(11);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "creating %s as uid %u: exit %d",
              name, (unsigned)uid, WEXITSTATUS(status));
}

static void remove_objects(const char *name)
{
    char shm[200], lock[200];
    snprintf(shm, sizeof shm, "/%s", name);
    snprintf(lock, sizeof lock, "/dev/shm/%s.lock", name);
    shm_unlink(shm);
    unlink(lock);
}

static void test_ownership(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "floor_trust_test: ownership cases skipped: not root, so no second "
                "uid can be taken on\n");
        return;
    }
    char a[1200];
    snprintf(a, sizeof a, "%s/a.gguf", g_dir);
    /* the name root's process uses for a (the region goes with its last holder) */
    const report first = run(a, &k_shared);
    CHECK_MSG(first.ok && first.floor_name[0], "%s", first.msg);
    const char *name = first.floor_name;

    const uid_t other = unused_uid();
    CHECK(other != 0);
    create_as(other, name, 0666);
    const report r = run(a, &k_shared);
    char want[64];
    snprintf(want, sizeof want, "owned by uid %u", (unsigned)other);
    CHECK_MSG(!r.ok, "root attached objects that uid %u created (and can rewrite)",
              (unsigned)other);
    if (!r.ok) CHECK_CONTAINS(r.msg, want);
    remove_objects(name);

    /* an own object that others may write */
    char shm[200];
    snprintf(shm, sizeof shm, "/%s", name);
    const int own = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(own >= 0 && fchmod(own, 0666) == 0);
    if (own >= 0) close(own);
    const report w = run(a, &k_shared);
    CHECK_MSG(!w.ok, "attached a region others may write (mode 0666, asked 0600)");
    if (!w.ok) CHECK_CONTAINS(w.msg, "lets others write");
    remove_objects(name);

    /* the requested mode, exactly, whatever the umask */
    const run_opts grp = {true, 0640, 077};
    child h = start(a, &grp, true);
    report g;
    CHECK(collect(&h, &g));
    CHECK_MSG(g.ok, "%s", g.msg);
    char path[200], lock[200];
    snprintf(path, sizeof path, "/dev/shm/%s", g.floor_name);
    snprintf(lock, sizeof lock, "/dev/shm/%s.lock", g.floor_name);
    struct stat s1, s2;
    CHECK(stat(path, &s1) == 0 && stat(lock, &s2) == 0);
    CHECK_MSG((s1.st_mode & 0777) == 0640 && (s2.st_mode & 0777) == 0640,
              "asked 0640 under umask 077: region %03o, lock file %03o",
              (unsigned)(s1.st_mode & 0777), (unsigned)(s2.st_mode & 0777));
    CHECK(finish(&h));
}

/* A bad prefix or mode is refused by sl_runtime_create, before any model is opened into it
 * (it used to pass there and fail at the first model's floor). */
static void test_bad_names(void)
{
    static const struct {
        const char *prefix;
        unsigned mode;
        const char *want;
    } k_bad[] = {{"a/b", 0, "'a/b'"},
                 {"x123456789x123456789x123456789x123456789x123456789x123456789xxxxx", 0,
                  "at most 64"},
                 {NULL, 01777, "mode 1777"},
                 {NULL, 04600, "mode 4600"}};
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        sl_runtime_options ro = sl_runtime_options_default();
        ro.device = "sim";
        ro.arena_bytes = 16ull << 20;
        ro.shared_floor = true;
        ro.shm_prefix = k_bad[i].prefix;
        ro.shm_mode = k_bad[i].mode;
        sl_runtime *rt = NULL;
        sl_error err = {0};
        CHECK_MSG(sl_runtime_create(&ro, &rt, &err) == SL_ERR_INVALID && rt == NULL,
                  "case %zu created", i);
        CHECK_CONTAINS(err.msg, k_bad[i].want);
        if (rt) sl_runtime_destroy(rt, &err);
    }
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s", tmp ? tmp : "/tmp");
    snprintf(g_prefix, sizeof g_prefix, "sluice-trust-%d", (int)getpid());
    test_bad_names();
    test_identity();
    test_ownership();
    return sl_test_finish("floor_trust_test");
}
