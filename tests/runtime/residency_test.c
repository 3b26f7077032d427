/* Serving residency through the engine on the sim device: sl_model_footprint against the
 * loaded model's bytes per side, for several placements; a runtime's models: logits equal to
 * a private open's, least-recently-used eviction order, contexts that survive eviction and
 * reload, pinned models never evicted or moved, compaction (one free chunk above the pinned
 * model, logits unchanged), externally managed mode, a model larger than the budget, release
 * to disk and reload from the file, over-commit, refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sluice.h"
#include "tests/runtime/testmodel.h"
#include "tests/testing.h"

static char g_dir[1024];

static void model_path(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.gguf", g_dir, name);
}

static sl_model_options sim_opts(sl_placement pl)
{
    sl_model_options o = sl_model_options_default();
    o.device = "sim";
    o.placement = pl;
    o.progress = false;
    o.io = SL_LOAD_PREAD;
    return o;
}

/* The footprint equals what an open with the same options puts on each side. */
static void test_footprint(const char *path)
{
    const struct { sl_placement pl; int ngl; } cases[] = {
        {SL_PLACE_GPU, 0}, {SL_PLACE_CPU, 0}, {SL_PLACE_LAYERS, 1}, {SL_PLACE_EXPERTS_CPU, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_model_options o = sim_opts(cases[i].pl);
        o.gpu_layers = cases[i].ngl;
        sl_footprint fp;
        sl_error err;
        CHECK_MSG(sl_model_footprint(path, &o, &fp, &err) == SL_OK, "%s", err.msg);
        sl_model *m = NULL;
        CHECK_MSG(sl_model_open(path, &o, &m, &err) == SL_OK, "%s", err.msg);
        if (!m) continue;
        sl_model_info info;
        sl_model_info_get(m, &info);
        CHECK_MSG(fp.device_bytes == info.gpu_bytes && fp.host_bytes == info.host_bytes,
                  "case %zu: footprint %llu/%llu, loaded %llu/%llu", i,
                  (unsigned long long)fp.device_bytes, (unsigned long long)fp.host_bytes,
                  (unsigned long long)info.gpu_bytes, (unsigned long long)info.host_bytes);
        CHECK(fp.weight_bytes == fp.device_bytes + fp.host_bytes && fp.scratch_bytes > 0);
        CHECK(fp.placement == cases[i].pl);
        if (cases[i].pl == SL_PLACE_CPU) CHECK(fp.device_bytes == 0);
        if (cases[i].pl == SL_PLACE_GPU) CHECK(fp.host_bytes < fp.device_bytes);
        sl_model_close(m);
    }
    sl_footprint fp;
    sl_error err;
    char missing[1100];
    model_path("missing", missing, sizeof missing);
    CHECK(sl_model_footprint(missing, NULL, &fp, &err) != SL_OK);
    CHECK(sl_model_footprint(NULL, NULL, &fp, &err) == SL_ERR_INVALID);
}

enum { N_TOK = 5 };
static const int32_t k_tokens[N_TOK] = {1, 17, 42, 299, 5};

/* Greedy logits of k_tokens (last row) into out (n_vocab floats); false on failure. */
static bool logits_of(sl_model *m, float *out, int32_t n_vocab)
{
    sl_ctx *c = NULL;
    sl_error err;
    bool ok = sl_ctx_create(m, NULL, &c, &err) == SL_OK;
    CHECK_MSG(ok, "ctx: %s", err.msg);
    if (!ok) return false;
    ok = sl_ctx_eval(c, k_tokens, N_TOK, &err) == SL_OK;
    CHECK_MSG(ok, "eval: %s", err.msg);
    if (ok) memcpy(out, sl_ctx_logits(c, -1), (size_t)n_vocab * sizeof *out);
    sl_ctx_destroy(c);
    return ok;
}

enum { N_MODELS = 3, VOCAB = 300 };
static char g_paths[N_MODELS + 1][1100]; /* three same-shape llama models, one bigger */
static float g_ref[N_MODELS + 1][VOCAB];  /* their logits from a private open */

static sl_residency state_of(sl_runtime *rt, sl_model *m)
{
    sl_runtime_model_info mi;
    sl_error err;
    CHECK(sl_runtime_model_info_get(rt, m, &mi, &err) == SL_OK);
    CHECK(mi.state == sl_model_residency(m));
    CHECK_MSG(sl_runtime_validate(rt, &err) == SL_OK, "%s", err.msg);
    return mi.state;
}

static int g_notices;
static void count_notice(void *user, const char *msg)
{
    (void)user;
    (void)msg;
    g_notices++;
}

/* A runtime whose on-demand budget holds `slots` models of D bytes (weight_fraction 1, no
 * wiggle, the scratch reservation takes the rest of a 32 MiB arena). */
static sl_runtime *runtime_for(uint64_t D, double slots, sl_residency_mode mode)
{
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.arena_bytes = 32ull << 20;
    ro.weight_fraction = 1.0;
    ro.wiggle_fraction = 0.0;
    ro.max_scratch_bytes = ro.arena_bytes - (uint64_t)((double)D * slots);
    ro.mode = mode;
    ro.host_slab_bytes = 4ull << 20;
    ro.notice = count_notice;
    sl_runtime *rt = NULL;
    sl_error err;
    CHECK_MSG(sl_runtime_create(&ro, &rt, &err) == SL_OK, "%s", err.msg);
    return rt;
}

static void open_all(sl_runtime *rt, sl_model **ms, int n)
{
    for (int i = 0; i < n; i++) {
        sl_model_options o = sim_opts(SL_PLACE_GPU);
        sl_error err;
        ms[i] = NULL;
        CHECK_MSG(sl_model_open_in(rt, g_paths[i], &o, &ms[i], &err) == SL_OK, "%s", err.msg);
        CHECK(ms[i] && state_of(rt, ms[i]) == SL_RESIDENCY_HOST);
    }
}

static void close_all(sl_runtime *rt, sl_model **ms, int n)
{
    for (int i = 0; i < n; i++) sl_model_close(ms[i]);
    sl_error err;
    CHECK_MSG(sl_runtime_destroy(rt, &err) == SL_OK, "%s", err.msg);
}

static bool same_logits(sl_model *m, int ref)
{
    float got[VOCAB];
    if (!logits_of(m, got, VOCAB)) return false;
    const bool same = memcmp(got, g_ref[ref], sizeof got) == 0;
    CHECK_MSG(same, "model %d: logits differ from the private open's", ref);
    return same;
}

static void acquire_ok(sl_runtime *rt, sl_model *m)
{
    sl_error err;
    CHECK_MSG(sl_runtime_acquire(rt, m, &err) == SL_OK, "acquire: %s", err.msg);
    CHECK_MSG(sl_runtime_validate(rt, &err) == SL_OK, "%s", err.msg);
}

/* Device bytes of one of the same-shape models, measured through a runtime. */
static uint64_t model_device_bytes(void)
{
    sl_runtime *rt = runtime_for(1 << 20, 8, SL_RESIDENCY_SELF);
    sl_model *m[1];
    open_all(rt, m, 1);
    sl_runtime_model_info mi = {0};
    sl_error err;
    CHECK(sl_runtime_model_info_get(rt, m[0], &mi, &err) == SL_OK);
    close_all(rt, m, 1);
    return mi.device_bytes;
}

static void test_lru(uint64_t D)
{
    sl_runtime *rt = runtime_for(D, 2.5, SL_RESIDENCY_SELF);
    sl_model *m[N_MODELS];
    open_all(rt, m, N_MODELS);
    sl_runtime_stats rs;
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.n_models == N_MODELS && rs.on_demand_budget == (uint64_t)((double)D * 2.5));
    CHECK(rs.resident_bytes == 0 && !rs.over_commit);
    /* a context of a model on its host floor is refused */
    sl_ctx *c = NULL;
    sl_error err;
    CHECK(sl_ctx_create(m[0], NULL, &c, &err) == SL_ERR_NOT_RESIDENT);
    CHECK_CONTAINS(err.msg, "not resident");
    acquire_ok(rt, m[0]);
    acquire_ok(rt, m[1]);
    for (int i = 0; i < 2; i++) CHECK(same_logits(m[i], i));
    /* a context that lives across eviction and reload */
    sl_ctx *c0 = NULL;
    CHECK(sl_ctx_create(m[0], NULL, &c0, &err) == SL_OK);
    acquire_ok(rt, m[0]);  /* m0 becomes the most recent */
    acquire_ok(rt, m[2]);  /* evicts m1, the least recently used */
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_DEVICE);
    CHECK(state_of(rt, m[1]) == SL_RESIDENCY_HOST);
    CHECK(state_of(rt, m[2]) == SL_RESIDENCY_DEVICE);
    CHECK(same_logits(m[2], 2));
    acquire_ok(rt, m[1]);  /* evicts m0 (m2 is more recent) */
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_HOST);
    CHECK(state_of(rt, m[2]) == SL_RESIDENCY_DEVICE);
    if (c0) {
        CHECK(sl_ctx_eval(c0, k_tokens, N_TOK, &err) == SL_ERR_NOT_RESIDENT);
        acquire_ok(rt, m[0]);  /* evicts m2 */
        CHECK(state_of(rt, m[2]) == SL_RESIDENCY_HOST);
        CHECK_MSG(sl_ctx_eval(c0, k_tokens, N_TOK, &err) == SL_OK, "%s", err.msg);
        CHECK(memcmp(sl_ctx_logits(c0, -1), g_ref[0], sizeof g_ref[0]) == 0);
        sl_ctx_destroy(c0);
    }
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.evictions == 3 && rs.loads == 5 && rs.resident_bytes == 2 * D);
    /* a model still open keeps the runtime alive */
    CHECK(sl_runtime_destroy(rt, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "still open");
    /* release to disk, then acquire reads the file again */
    CHECK(sl_runtime_release_all(rt, m[0], &err) == SL_OK);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_DISK);
    acquire_ok(rt, m[0]);
    CHECK(same_logits(m[0], 0));
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_DISK, &err) == SL_OK);
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_HOST, &err) == SL_OK);
    CHECK(state_of(rt, m[1]) == SL_RESIDENCY_HOST);
    close_all(rt, m, N_MODELS);
}

static void test_pinned_and_compaction(uint64_t D)
{
    sl_runtime *rt = runtime_for(D, 4.5, SL_RESIDENCY_SELF);
    sl_model *m[N_MODELS];
    open_all(rt, m, N_MODELS);
    sl_error err;
    /* m1 and m2 resident first, then m0 pinned: it goes to the base, they come back above */
    acquire_ok(rt, m[1]);
    acquire_ok(rt, m[2]);
    CHECK_MSG(sl_runtime_set_residency(rt, m[0], SL_RESIDENCY_PINNED, &err) == SL_OK, "%s",
              err.msg);
    sl_runtime_model_info p0, p1, mi;
    CHECK(sl_runtime_model_info_get(rt, m[0], &p0, &err) == SL_OK);
    CHECK(p0.state == SL_RESIDENCY_PINNED && p0.d_lo);
    for (int i = 1; i < N_MODELS; i++) {
        CHECK(sl_runtime_model_info_get(rt, m[i], &mi, &err) == SL_OK);
        CHECK_MSG(mi.state == SL_RESIDENCY_DEVICE && mi.d_lo >= p0.d_hi,
                  "model %d: [%llx, %llx) not above the pinned [%llx, %llx)", i,
                  (unsigned long long)mi.d_lo, (unsigned long long)mi.d_hi,
                  (unsigned long long)p0.d_lo, (unsigned long long)p0.d_hi);
    }
    sl_runtime_stats rs;
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.pinned_bytes == D && rs.on_demand_budget == (uint64_t)((double)D * 3.5));
    CHECK(same_logits(m[0], 0));
    /* they came back most recently used first: m2 right above m0, then m1 */
    CHECK(sl_runtime_model_info_get(rt, m[2], &mi, &err) == SL_OK);
    CHECK(mi.d_lo == p0.d_hi);
    /* a hole: m2 (the lower one) back to its floor; two free chunks */
    CHECK(sl_runtime_set_residency(rt, m[2], SL_RESIDENCY_HOST, &err) == SL_OK);
    sl_runtime_stats_get(rt, &rs);
    CHECK_MSG(rs.arena_free_chunks == 2, "%llu free chunks",
              (unsigned long long)rs.arena_free_chunks);
    /* the pinned model is never evicted: a model larger than the budget evicts m2 only */
    CHECK(sl_model_footprint(g_paths[N_MODELS], NULL, &(sl_footprint){0}, &err) == SL_OK);
    sl_model *big = NULL;
    sl_model_options o = sim_opts(SL_PLACE_GPU);
    CHECK_MSG(sl_model_open_in(rt, g_paths[N_MODELS], &o, &big, &err) == SL_OK, "%s", err.msg);
    if (big) {
        const int before = g_notices;
        acquire_ok(rt, big);
        CHECK(g_notices == before + 1);
        CHECK(state_of(rt, m[1]) == SL_RESIDENCY_HOST && state_of(rt, big) >= 2);
        CHECK(same_logits(big, N_MODELS));
        sl_model_close(big);
    }
    CHECK(sl_runtime_model_info_get(rt, m[0], &p1, &err) == SL_OK);
    CHECK(p1.state == SL_RESIDENCY_PINNED && p1.d_digest == p0.d_digest && p1.d_lo == p0.d_lo);
    /* fragment again: m1, m2 loaded, m1 freed (a hole below m2) */
    acquire_ok(rt, m[1]);
    acquire_ok(rt, m[2]);
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_HOST, &err) == SL_OK);
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.arena_free_chunks == 2);
    /* compaction reloading m2: one free chunk, directly above m2 which sits on m0 */
    sl_model *reload[] = {m[2]};
    CHECK_MSG(sl_runtime_compact(rt, reload, 1, &err) == SL_OK, "%s", err.msg);
    sl_runtime_stats_get(rt, &rs);
    CHECK_MSG(rs.arena_free_chunks == 1 && rs.arena_largest_free == rs.arena_free,
              "%llu free chunks, largest %llu of %llu", (unsigned long long)rs.arena_free_chunks,
              (unsigned long long)rs.arena_largest_free, (unsigned long long)rs.arena_free);
    CHECK(rs.compactions == 1);
    CHECK(sl_runtime_model_info_get(rt, m[0], &p1, &err) == SL_OK);
    CHECK(p1.d_digest == p0.d_digest);
    CHECK(sl_runtime_model_info_get(rt, m[2], &mi, &err) == SL_OK);
    CHECK(mi.state == SL_RESIDENCY_DEVICE && mi.d_lo == p0.d_hi);
    CHECK(same_logits(m[2], 2) && same_logits(m[0], 0));
    /* refusals: a pinned model in the reload list; a list over the budget */
    sl_model *pinned_list[] = {m[0]};
    CHECK(sl_runtime_compact(rt, pinned_list, 1, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "pinned");
    /* over-commit: pin all three (3 D) in a pool of 4.5 D... then shrink nothing: fine; pin
     * the big one too */
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_PINNED, &err) == SL_OK);
    CHECK(sl_runtime_set_residency(rt, m[2], SL_RESIDENCY_PINNED, &err) == SL_OK);
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.pinned_bytes == 3 * D && !rs.over_commit);
    CHECK(sl_runtime_model_info_get(rt, m[0], &p1, &err) == SL_OK);
    CHECK(p1.d_digest == p0.d_digest);
    close_all(rt, m, N_MODELS);
}

static void test_over_commit(uint64_t D)
{
    sl_runtime *rt = runtime_for(D, 1.5, SL_RESIDENCY_SELF);
    sl_model *m[2];
    open_all(rt, m, 2);
    sl_error err;
    for (int i = 0; i < 2; i++)
        CHECK_MSG(sl_runtime_set_residency(rt, m[i], SL_RESIDENCY_PINNED, &err) == SL_OK,
                  "%s", err.msg);
    sl_runtime_stats rs;
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.over_commit && rs.on_demand_budget == 0 && rs.pinned_bytes == 2 * D);
    for (int i = 0; i < 2; i++) CHECK(same_logits(m[i], i));
    /* unpinning in place: it stays resident */
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_DEVICE, &err) == SL_OK);
    CHECK(state_of(rt, m[1]) == SL_RESIDENCY_DEVICE);
    sl_runtime_stats_get(rt, &rs);
    CHECK(!rs.over_commit && rs.pinned_bytes == D);
    close_all(rt, m, 2);
}

static void test_external(uint64_t D)
{
    sl_runtime *rt = runtime_for(D, 2.5, SL_RESIDENCY_EXTERNAL);
    sl_model *m[N_MODELS];
    open_all(rt, m, N_MODELS);
    sl_error err;
    CHECK(sl_runtime_acquire(rt, m[0], &err) == SL_ERR_NOT_RESIDENT);
    CHECK_CONTAINS(err.msg, "externally managed");
    sl_runtime_stats rs;
    sl_runtime_stats_get(rt, &rs);
    CHECK(rs.loads == 0 && state_of(rt, m[0]) == SL_RESIDENCY_HOST);
    CHECK(sl_runtime_set_residency(rt, m[0], SL_RESIDENCY_DEVICE, &err) == SL_OK);
    CHECK(sl_runtime_set_residency(rt, m[1], SL_RESIDENCY_DEVICE, &err) == SL_OK);
    acquire_ok(rt, m[0]);
    CHECK(same_logits(m[0], 0));
    /* the manager never evicts by itself: m2 is refused and the others stay */
    CHECK(sl_runtime_acquire(rt, m[2], &err) == SL_ERR_NOT_RESIDENT);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_DEVICE && state_of(rt, m[1]) == 2);
    close_all(rt, m, N_MODELS);
}

/* A held model (a server's request between two evaluations) is busy: the LRU passes it by,
 * compaction, pinning another model and unloading it are refused until unhold. */
static void test_hold(uint64_t D)
{
    sl_runtime *rt = runtime_for(D, 1.5, SL_RESIDENCY_SELF);
    sl_model *m[N_MODELS];
    open_all(rt, m, N_MODELS);
    sl_error err;
    CHECK_MSG(sl_runtime_hold(rt, m[0], &err) == SL_OK, "%s", err.msg);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_DEVICE);
    sl_runtime_model_info mi;
    CHECK(sl_runtime_model_info_get(rt, m[0], &mi, &err) == SL_OK && mi.busy == 1);
    /* m1 does not fit beside m0, but m0 is held: both stay, above the budget */
    acquire_ok(rt, m[1]);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_DEVICE && state_of(rt, m[1]) == 2);
    CHECK(sl_runtime_compact(rt, NULL, 0, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "evaluating");
    CHECK(sl_runtime_set_residency(rt, m[0], SL_RESIDENCY_HOST, &err) == SL_ERR_INVALID);
    CHECK(sl_runtime_set_residency(rt, m[2], SL_RESIDENCY_PINNED, &err) == SL_ERR_INVALID);
    CHECK(same_logits(m[0], 0));
    sl_runtime_unhold(rt, m[0]);
    sl_runtime_unhold(rt, m[0]); /* an unhold without a hold changes nothing */
    CHECK(sl_runtime_model_info_get(rt, m[0], &mi, &err) == SL_OK && mi.busy == 0);
    CHECK_MSG(sl_runtime_validate(rt, &err) == SL_OK, "%s", err.msg);
    /* released: the least recently used (m0) is evicted for m2 */
    acquire_ok(rt, m[2]);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_HOST);
    /* holding a model the external manager has not loaded loads nothing */
    close_all(rt, m, N_MODELS);
    rt = runtime_for(D, 1.5, SL_RESIDENCY_EXTERNAL);
    open_all(rt, m, N_MODELS);
    CHECK(sl_runtime_hold(rt, m[0], &err) == SL_ERR_NOT_RESIDENT);
    CHECK(state_of(rt, m[0]) == SL_RESIDENCY_HOST);
    CHECK(sl_runtime_model_info_get(rt, m[0], &mi, &err) == SL_OK && mi.busy == 0);
    close_all(rt, m, N_MODELS);
}

static void test_refusals(void)
{
    sl_runtime *rt = runtime_for(1 << 20, 4, SL_RESIDENCY_SELF);
    sl_model *m = NULL;
    sl_error err;
    sl_model_options o = sim_opts(SL_PLACE_GPU);
    o.plan_only = true;
    CHECK(sl_model_open_in(rt, g_paths[0], &o, &m, &err) == SL_ERR_INVALID && !m);
    CHECK_CONTAINS(err.msg, "sl_model_footprint");
    o = sim_opts(SL_PLACE_HOT_COLD);
    CHECK(sl_model_open_in(rt, g_paths[0], &o, &m, &err) != SL_OK && !m);
    CHECK(sl_model_open_in(NULL, g_paths[0], NULL, &m, &err) == SL_ERR_INVALID);
    sl_model *priv = NULL;
    o = sim_opts(SL_PLACE_GPU);
    CHECK(sl_model_open(g_paths[0], &o, &priv, &err) == SL_OK);
    CHECK(sl_runtime_acquire(rt, priv, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "not a model of this runtime");
    CHECK(sl_model_residency(priv) == SL_RESIDENCY_DEVICE);
    sl_model_close(priv);
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = "sim";
    ro.wiggle_fraction = 1.0;
    sl_runtime *bad = NULL;
    CHECK(sl_runtime_create(&ro, &bad, &err) == SL_ERR_INVALID && !bad);
    CHECK_CONTAINS(err.msg, "wiggle");
    CHECK(sl_runtime_destroy(rt, &err) == SL_OK);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s", tmp ? tmp : "/tmp");
    char moe[1100];
    model_path("moe", moe, sizeof moe);
    tm_params p;
    tm_defaults("qwen3moe", &p);
    sl_error err;
    CHECK_MSG(tm_write(&p, moe, &err) == SL_OK, "%s", err.msg);
    test_footprint(moe);
    for (int i = 0; i <= N_MODELS; i++) {
        char name[16];
        snprintf(name, sizeof name, "llama%d", i);
        model_path(name, g_paths[i], sizeof g_paths[i]);
        tm_defaults("llama", &p);
        p.seed = 100 + (uint64_t)i;
        if (i == N_MODELS) p.n_layer = 12; /* larger than any budget below */
        CHECK_MSG(tm_write(&p, g_paths[i], &err) == SL_OK, "%s", err.msg);
        sl_model_options o = sim_opts(SL_PLACE_GPU);
        sl_model *m = NULL;
        CHECK_MSG(sl_model_open(g_paths[i], &o, &m, &err) == SL_OK, "%s", err.msg);
        if (m) logits_of(m, g_ref[i], VOCAB);
        sl_model_close(m);
    }
    const uint64_t D = model_device_bytes();
    CHECK(D > 0);
    test_lru(D);
    test_pinned_and_compaction(D);
    test_over_commit(D);
    test_external(D);
    test_hold(D);
    test_refusals();
    return sl_test_finish("residency_test");
}
