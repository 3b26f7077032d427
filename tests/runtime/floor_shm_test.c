/* The host floor shared across processes (alloc/shm_floor.h through sl_runtime, sim device):
 * four processes open the same model with a shared floor: the region exists once (one shm
 * object of the expected size, one lock file), exactly one process filled it, all produce the
 * logits of a private-floor run; a materializer killed with SIGKILL half-way leaves a region
 * that the next opener redoes, with correct logits; after every process has let go, no region
 * or lock file is left. The parent forks before it creates any thread (its own private-floor
 * run comes last). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

enum { N_PROC = 4, VOCAB = 300, N_TOK = 4 };
static const int32_t k_tokens[N_TOK] = {1, 9, 77, 250};
static char g_dir[1024], g_model[1100], g_prefix[64];

/* Objects under /dev/shm named with this test's prefix: regions and lock files, and the
 * regions' total size. */
static void count_objects(int *regions, int *locks, uint64_t *bytes)
{
    *regions = *locks = 0;
    *bytes = 0;
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, g_prefix, strlen(g_prefix))) continue;
        const size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".lock")) {
            (*locks)++;
            continue;
        }
        char p[512];
        snprintf(p, sizeof p, "/dev/shm/%s", e->d_name);
        struct stat st;
        if (!stat(p, &st)) *bytes += (uint64_t)st.st_size;
        (*regions)++;
    }
    closedir(d);
}

static sl_runtime_options shared_opts(void)
{
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = 16ull << 20;
    ro.host_slab_bytes = 2ull << 20;
    ro.shared_floor = true;
    ro.shm_prefix = g_prefix;
    return ro;
}

/* Opens the model with a shared floor, writes its logits to OUT.bin and a status line (1 if
 * it filled the region) to OUT.made; then waits for a byte on `go` before letting go. */
static int child_run(const sl_runtime_options *ro, int idx, int ready_fd, int go_fd)
{
    sl_runtime *rt = NULL;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err;
    int rc = 1;
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.progress = false;
    if (sl_runtime_create(ro, &rt, &err) || sl_model_open_in(rt, g_model, &o, &m, &err) ||
        sl_runtime_acquire(rt, m, &err) || sl_ctx_create(m, NULL, &c, &err) ||
        sl_ctx_eval(c, k_tokens, N_TOK, &err)) {
        fprintf(stderr, "child %d: %s\n", idx, err.msg);
        goto done;
    }
    sl_runtime_model_info mi;
    sl_runtime_model_info_get(rt, m, &mi, &err);
    char path[1200];
    snprintf(path, sizeof path, "%s/logits%d.bin", g_dir, idx);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(sl_ctx_logits(c, -1), sizeof(float), VOCAB, f) != VOCAB) goto done;
    fprintf(f, "%d", mi.floor_materialized ? 1 : 0);
    fclose(f);
    rc = 0;
done:
    if (ready_fd >= 0) {
        char b = (char)rc;
        if (write(ready_fd, &b, 1) != 1) rc = 1;
    }
    if (go_fd >= 0) {
        char b;
        if (read(go_fd, &b, 1) != 1) rc = 1;
    }
    sl_ctx_destroy(c);
    sl_model_close(m);
    sl_runtime_destroy(rt, NULL);
    return rc;
}

static bool read_logits(int idx, float *out, int *made)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/logits%d.bin", g_dir, idx);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    const bool ok = fread(out, sizeof(float), VOCAB, f) == VOCAB && fscanf(f, "%d", made) == 1;
    fclose(f);
    return ok;
}

static void test_four_processes(float (*got)[VOCAB], int *n_made)
{
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    const sl_runtime_options ro = shared_opts();
    pid_t pids[N_PROC];
    for (int i = 0; i < N_PROC; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            _exit(child_run(&ro, i, ready[1], go[0]));
        }
    }
    close(ready[1]);
    close(go[0]);
    int ok = 0;
    for (int i = 0; i < N_PROC; i++) {
        char b;
        if (read(ready[0], &b, 1) == 1 && b == 0) ok++;
    }
    CHECK_MSG(ok == N_PROC, "%d of %d processes ran", ok, N_PROC);
    /* every process attached: one region, one lock file */
    int regions, locks;
    uint64_t bytes;
    count_objects(&regions, &locks, &bytes);
    CHECK_MSG(regions == 1 && locks == 1, "%d regions, %d lock files", regions, locks);
    sl_footprint fp;
    sl_error err;
    CHECK(sl_model_footprint(g_model, NULL, &fp, &err) == SL_OK);
    CHECK_MSG(bytes >= fp.weight_bytes && bytes <= fp.weight_bytes + (4096ull << 10),
              "region of %llu bytes for %llu bytes of weights", (unsigned long long)bytes,
              (unsigned long long)fp.weight_bytes);
    char b = 0;
    for (int i = 0; i < N_PROC; i++) CHECK(write(go[1], &b, 1) == 1);
    for (int i = 0; i < N_PROC; i++) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d", i);
    }
    close(ready[0]);
    close(go[1]);
    *n_made = 0;
    for (int i = 0; i < N_PROC; i++) {
        int made = 0;
        CHECK(read_logits(i, got[i], &made));
        *n_made += made;
    }
    count_objects(&regions, &locks, &bytes);
    CHECK_MSG(regions == 0 && locks == 0, "left behind: %d regions, %d lock files", regions,
              locks);
}

/* The materializer's progress hook: after the first tensor, tell the parent and wait to be
 * killed. */
static void stall(void *user, uint64_t done, uint64_t total)
{
    (void)done;
    (void)total;
    const int fd = *(const int *)user;
    char b = 1;
    if (write(fd, &b, 1) == 1) pause();
}

static void test_killed_materializer(float *got, int *made)
{
    int mid[2];
    CHECK(pipe(mid) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(mid[0]);
        sl_runtime_options ro = shared_opts();
        ro.floor_progress = stall;
        ro.floor_progress_user = &mid[1];
        _exit(child_run(&ro, 90, -1, -1));
    }
    close(mid[1]);
    char b = 0;
    CHECK(read(mid[0], &b, 1) == 1 && b == 1); /* mid-fill */
    close(mid[0]);
    int regions, locks;
    uint64_t bytes;
    count_objects(&regions, &locks, &bytes);
    CHECK(regions == 1 && locks == 1);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* the half-filled region is still there; the next opener redoes it */
    count_objects(&regions, &locks, &bytes);
    CHECK(regions == 1);
    const sl_runtime_options ro = shared_opts();
    pid = fork();
    if (pid == 0) _exit(child_run(&ro, 91, -1, -1));
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(read_logits(91, got, made));
    count_objects(&regions, &locks, &bytes);
    CHECK_MSG(regions == 0 && locks == 0, "left behind: %d regions, %d lock files", regions,
              locks);
}

/* The reference: a private floor in this process (after every fork). */
static void private_logits(float *out)
{
    sl_runtime_options ro = shared_opts();
    ro.shared_floor = false;
    sl_runtime *rt = NULL;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err;
    sl_model_options o = sl_model_options_default();
    o.placement = SL_PLACE_GPU;
    o.progress = false;
    const bool ok = !sl_runtime_create(&ro, &rt, &err) &&
                    !sl_model_open_in(rt, g_model, &o, &m, &err) &&
                    !sl_runtime_acquire(rt, m, &err) && !sl_ctx_create(m, NULL, &c, &err) &&
                    !sl_ctx_eval(c, k_tokens, N_TOK, &err);
    CHECK_MSG(ok, "private floor: %s", err.msg);
    if (ok) memcpy(out, sl_ctx_logits(c, -1), VOCAB * sizeof *out);
    sl_runtime_model_info mi;
    if (m && !sl_runtime_model_info_get(rt, m, &mi, &err)) CHECK(mi.floor_name[0] == '\0');
    sl_ctx_destroy(c);
    sl_model_close(m);
    sl_runtime_destroy(rt, NULL);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s", tmp ? tmp : "/tmp");
    snprintf(g_model, sizeof g_model, "%s/shared.gguf", g_dir);
    snprintf(g_prefix, sizeof g_prefix, "sluice-test-%d", (int)getpid());
    tm_params p;
    tm_defaults("llama", &p);
    p.n_layer = 3;
    sl_error err;
    CHECK_MSG(tm_write(&p, g_model, &err) == SL_OK, "%s", err.msg);
    static float got[N_PROC][VOCAB], again[VOCAB], ref[VOCAB];
    int n_made = 0, made = 0;
    test_four_processes(got, &n_made);
    CHECK_MSG(n_made == 1, "%d processes filled the region", n_made);
    test_killed_materializer(again, &made);
    CHECK(made == 1);
    private_logits(ref);
    for (int i = 0; i < N_PROC; i++)
        CHECK_MSG(!memcmp(got[i], ref, sizeof ref), "process %d: logits differ from a private "
                  "floor's", i);
    CHECK(!memcmp(again, ref, sizeof ref));
    return sl_test_finish("floor_shm_test");
}
