/* The fetching scheduler through its own API (scheduler/moe/fetch.h), on hand-built layers: output
 * bit-identical to the CPU scheduler's call by call (decode-sized and prefill-sized calls with
 * groups past the 64-token chunk, throttled copies, every mode); per-layer stats; the cache
 * evicting in LRU order and compacting the arena when the evictions leave it fragmented.
 * The CPU scheduler's grouped prefill on quantized experts: a batch (several slabs, 1 and 2
 * threads) gives each token the bits of its own one-token call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/quant.h"
#include "base/device/device.h"
#include "scheduler/moe/fetch.h"
#include "scheduler/moe/moe.h"
#include "tests/testing.h"

enum { X = 8, E = 64 };

typedef struct layer_data {
    sl_moe_layer L;
    float *gate, *up, *down;      /* merged [X][n_ff][E], [X][n_ff][E], [X][E][n_ff] */
    const void *g[X], *u[X], *d[X];
} layer_data;

static uint64_t g_seed = 12345;

static float rnd(void)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int64_t)(g_seed >> 40) - (1 << 23)) / (float)(1 << 23) * 0.25f;
}

static void make_layer(layer_data *ld, int32_t layer, int64_t n_ff)
{
    const size_t n = (size_t)X * (size_t)n_ff * E;
    ld->gate = malloc(n * 4);
    ld->up = malloc(n * 4);
    ld->down = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        ld->gate[i] = rnd();
        ld->up[i] = rnd();
        ld->down[i] = rnd();
    }
    for (int e = 0; e < X; e++) {
        ld->g[e] = ld->gate + (size_t)e * n_ff * E;
        ld->u[e] = ld->up + (size_t)e * n_ff * E;
        ld->d[e] = ld->down + (size_t)e * n_ff * E;
    }
    ld->L = (sl_moe_layer){.layer = layer, .n_expert = X, .n_embd = E, .n_ff = n_ff,
                           .type_gate = 0, .type_up = 0, .type_down = 0, .gate = ld->g,
                           .up = ld->u, .down = ld->d, .on_device = NULL, .act = SL_MOE_SILU};
}

static void free_layer(layer_data *ld)
{
    free(ld->gate);
    free(ld->up);
    free(ld->down);
}

typedef struct env {
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_moe_sched *cpu;
} env;

static sl_moe_sched *make_fetch(env *v, sl_device *dev, const char *spec)
{
    sl_fetch_options o = sl_fetch_options_default();
    sl_error e;
    char pins[256];
    sl_status st = sl_fetch_options_parse(&o, spec, pins, sizeof pins, &e);
    CHECK_MSG(st == SL_OK, "%s: %s", spec, e.msg);
    sl_moe_sched *s = NULL;
    st = sl_moe_fetch_create(dev, &o, &v->ops, &v->mv, NULL, &s, &e);
    CHECK_MSG(st == SL_OK, "%s: %s", spec, e.msg);
    return s;
}

/* Runs one call on both schedulers; the outputs must be the same bits. */
static void call(env *v, sl_moe_sched *f, const layer_data *ld, const int32_t *experts,
                 int64_t n_tok, int k, const char *what)
{
    sl_moe_assign *a = malloc((size_t)(n_tok * k) * sizeof *a);
    float *x = malloc((size_t)(n_tok * E) * 4), *o1 = malloc((size_t)(n_tok * E) * 4),
          *o2 = malloc((size_t)(n_tok * E) * 4);
    for (int64_t i = 0; i < n_tok * E; i++) x[i] = rnd() * 4;
    for (int64_t t = 0; t < n_tok; t++)
        for (int j = 0; j < k; j++)
            a[t * k + j] = (sl_moe_assign){(int32_t)t, experts[(t * k + j) % (k * 3 + 1)],
                                           0.25f + 0.5f * (float)j};
    /* distinct experts per token: k consecutive entries of the pattern never repeat */
    sl_error e;
    sl_status st = sl_moe_exec(v->cpu, &ld->L, a, n_tok * k, x, n_tok, o1, &e);
    CHECK_MSG(st == SL_OK, "cpu %s: %s", what, e.msg);
    st = sl_moe_exec(f, &ld->L, a, n_tok * k, x, n_tok, o2, &e);
    CHECK_MSG(st == SL_OK, "fetch %s: %s", what, e.msg);
    CHECK_MSG(!memcmp(o1, o2, (size_t)(n_tok * E) * 4), "%s: output differs from the CPU "
              "scheduler's", what);
    free(a);
    free(x);
    free(o1);
    free(o2);
}

/* LRU eviction order leaves the cache region fragmented; the arena compacts. Cache region
 * 150 KiB: three 48 KiB experts of layer 0 fill it; expert 2 is used again; then one 72 KiB
 * expert of layer 1 evicts 1 and 3 (least recent), whose holes are 48 + 54 KiB apart. */
static void test_cache_compaction(env *v, sl_device *dev)
{
    layer_data l0, l1;
    make_layer(&l0, 0, 64);
    make_layer(&l1, 1, 96);
    sl_moe_sched *f = make_fetch(v, dev, "mode=full policy=lru cache_kb=150 debug=1");
    if (!f) return;
    static const int32_t e123[] = {1, 2, 3, 1}, e2[] = {2, 2}, e0[] = {0, 0};
    call(v, f, &l0, e123, 3, 1, "layer 0 experts 1 2 3");
    call(v, f, &l0, e2, 1, 1, "layer 0 expert 2 again");
    call(v, f, &l1, e0, 1, 1, "layer 1 expert 0");
    call(v, f, &l0, e2, 1, 1, "layer 0 expert 2 after compaction");
    sl_fetch_stats t, s0, s1;
    sl_error e;
    CHECK(sl_fetch_stats_get(f, -1, &t, &e) == SL_OK);
    CHECK(sl_fetch_stats_get(f, 0, &s0, &e) == SL_OK);
    CHECK(sl_fetch_stats_get(f, 1, &s1, &e) == SL_OK);
    CHECK(sl_fetch_stats_get(f, 2, &s1, &e) == SL_ERR_RANGE);
    CHECK(sl_fetch_stats_get(v->cpu, -1, &t, &e) == SL_ERR_INVALID);
    sl_fetch_stats_get(f, -1, &t, &e);
    sl_fetch_stats_get(f, 1, &s1, &e);
    CHECK(t.calls == 4 && s0.calls == 3 && s1.calls == 1);
    /* the interface the engine reads: the same counters through sl_moe_stats, capabilities
     * instead of names, a trace only where one is recorded */
    sl_moe_stats ms, mc;
    sl_moe_stats_get(f, &ms);
    sl_moe_stats_get(v->cpu, &mc);
    CHECK(ms.cache_hits == t.cache_hits && ms.cache_lookups == t.cache_lookups &&
          ms.fetches == t.fetch_experts && ms.copies == t.copies &&
          ms.copy_bytes == t.bytes_copied && ms.layer_calls_full == t.calls_mode[SL_FETCH_FULL]);
    CHECK(mc.fetches == 0 && mc.copies == 0 && mc.layer_calls_full == 0);
    CHECK((sl_moe_caps(v->cpu) & SL_MOE_CAP_HOST_ONLY) &&
          (sl_moe_caps(v->cpu) & SL_MOE_CAP_NEURON_STATS) &&
          !(sl_moe_caps(v->cpu) & SL_MOE_CAP_TRACE));
    CHECK(!(sl_moe_caps(f) & SL_MOE_CAP_HOST_ONLY) && !(sl_moe_caps(f) & SL_MOE_CAP_NEURON_STATS));
    CHECK(sl_moe_caps(NULL) == 0);
    CHECK(sl_moe_trace_write(v->cpu, "/nonexistent/x", &e) == SL_ERR_INVALID &&
          strstr(e.msg, "cpu") != NULL);
    CHECK_MSG(t.promotions == 4 && t.evictions == 2, "promotions %llu evictions %llu",
              (unsigned long long)t.promotions, (unsigned long long)t.evictions);
    CHECK_MSG(s0.cache_hits == 2 && s0.cache_lookups == 5, "layer 0: hits %llu of %llu",
              (unsigned long long)s0.cache_hits, (unsigned long long)s0.cache_lookups);
    CHECK(s1.cache_hits == 0 && s1.fetch_experts == 1);
    CHECK_MSG(t.compactions >= 1, "compactions %llu", (unsigned long long)t.compactions);
    CHECK(t.fallbacks_miss == 0 && t.fallbacks_fail == 0 && t.hit_rate > 0.0);
    CHECK(t.scratch_bytes >= ((uint64_t)64 << 20) && t.scratch_peak_bytes > 0);
    CHECK(t.cache_bytes_used == 48 * 1024 + 72 * 1024);
    sl_moe_destroy(f);
    free_layer(&l0);
    free_layer(&l1);
}

static void test_modes(env *v, sl_device *dev, const char *dev_name)
{
    layer_data l0;
    make_layer(&l0, 3, 64);
    static const char *const specs[] = {
        "mode=post block_on_miss=0 max_transfers=1",
        "mode=post block_on_miss=1 max_transfers=1",
        "mode=post block_on_miss=0 max_transfers=4 cache_kb=100 policy=lfu",
        "mode=full max_transfers=1",
        "mode=full max_transfers=3 cache_kb=100 policy=lru streams=shared",
        "mode=auto cache_kb=200",
        "mode=auto pcie_gbs=1000 cpu_gbs=1",      /* makes full (or post) win */
        "mode=cpu",
    };
    static const int32_t pat[] = {0, 5, 6, 1, 7, 2, 4}; /* k = 2: 2*3+1 entries */
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        sl_moe_sched *f = make_fetch(v, dev, specs[i]);
        if (!f) continue;
        char what[160];
        for (int rep = 0; rep < 2; rep++) {
            snprintf(what, sizeof what, "%s [%s] decode", dev_name, specs[i]);
            call(v, f, &l0, pat, 1, 2, what);
            /* 150 tokens: experts with more than 64 tokens run in several groups */
            snprintf(what, sizeof what, "%s [%s] prefill", dev_name, specs[i]);
            call(v, f, &l0, pat, 150, 2, what);
        }
        sl_fetch_stats t;
        sl_error e;
        CHECK(sl_fetch_stats_get(f, 3, &t, &e) == SL_OK);
        CHECK(t.calls == 4);
        CHECK(t.overlap_pct >= 0.0 && t.overlap_pct <= 100.0);
        if (!strcmp(specs[i], "mode=cpu")) CHECK(t.copies == 0 && t.groups_dev == 0);
        if (strstr(specs[i], "block_on_miss=1")) CHECK(t.fallbacks_miss == 0);
        /* the seeds make copies win; the CPU probe (fetch_cost.c) may then correct cpu_bw */
        if (strstr(specs[i], "pcie_gbs=1000"))
            CHECK(t.calls_mode[SL_FETCH_POST] + t.calls_mode[SL_FETCH_FULL] > 0);
        sl_moe_destroy(f);
    }
    /* an empty call zeroes the output */
    sl_moe_sched *f = make_fetch(v, dev, "mode=post");
    float out[E];
    float x[E] = {0};
    memset(out, 0x7f, sizeof out);
    sl_error e;
    CHECK(sl_moe_exec(f, &l0.L, NULL, 0, x, 1, out, &e) == SL_OK);
    CHECK(out[0] == 0.0f && out[E - 1] == 0.0f);
    sl_moe_destroy(f);
    free_layer(&l0);
}

/* The batches the first call on s counted equal those of the same call on the per-expert path
 * (F32 activations: no grouping), and exceed the distinct experts (one takes several chunks). */
static void batches_as_per_expert(const env *v, sl_moe_sched *s, const sl_moe_layer *L,
                                  const sl_moe_assign *a, int64_t n, const float *x,
                                  int64_t n_tok)
{
    float *out = malloc((size_t)n_tok * (size_t)L->n_embd * sizeof *out);
    sl_cpu_matvec_ctx mv = v->mv;
    mv.f32_act = true;
    sl_moe_sched *f = NULL;
    sl_error e;
    CHECK(!sl_moe_cpu_create(&v->ops, &mv, NULL, &f, &e));
    if (!f) return;
    CHECK_MSG(!sl_moe_exec(f, L, a, n, x, n_tok, out, &e), "%s", e.msg);
    sl_moe_stats sg, sf;
    sl_moe_stats_get(s, &sg);
    sl_moe_stats_get(f, &sf);
    CHECK_MSG(sg.batches == sf.batches && sg.batches > (uint64_t)L->n_expert,
              "grouped path: %llu batches, per-expert path %llu, %d experts",
              (unsigned long long)sg.batches, (unsigned long long)sf.batches, L->n_expert);
    sl_moe_destroy(f);
    free(out);
}

/* Quantized experts (Q8_0, Q4_K, and Q6_K down under Q4_K gate/up, as Q4_K_M files mix them):
 * 700 tokens top-2 (~1270 assignments: two slabs of the grouped path, an expert split between
 * them) on no pool and a 2-thread pool, each token's output equal to its one-token call's.
 * The assignments come shuffled (not token-major), every 11th token has none (its row of out
 * is +0.0: out is written over bytes 0xff) and some tokens have all theirs in the second slab
 * (the first slab's join zeroes every token's row, the second adds them).
 * The grouped path counts the batches the per-expert path (F32 activations) runs. */
static void test_cpu_batch_invariance(const env *v)
{
    enum { QE = 256, QF = 256, QX = 6, NT = 700, K = 2, SLAB = 1024 /* moe_cpu.c's */ };
    const uint32_t types[][2] = {{SL_GGML_Q8_0, SL_GGML_Q8_0}, {SL_GGML_Q4_K, SL_GGML_Q6_K}};
    sl_cpu_pool *pool = NULL;
    sl_error e;
    sl_cpu_pool_options po = {.n_threads = 2, .numa_node = -1};
    CHECK_MSG(sl_cpu_pool_create(&po, &pool, &e) == SL_OK, "%s", e.msg);
    float *w = malloc((size_t)QE * QF * 4), *x = malloc((size_t)NT * QE * 4);
    float *ob = malloc((size_t)NT * QE * 4), *o1 = malloc(QE * 4);
    sl_moe_assign *a = malloc((size_t)NT * K * sizeof *a);
    sl_moe_assign *ta = malloc((size_t)NT * K * sizeof *ta);
    for (int64_t i = 0; i < (int64_t)NT * QE; i++) x[i] = rnd() * 4;
    int na = 0;
    /* skewed: expert 0 takes most tokens; experts 4 and 5 only every 13th token's (theirs
     * sort last, past the first slab) */
    for (int t = 0; t < NT; t++)
        for (int j = 0; j < K; j++) {
            const int ex = t % 13 == 12 ? QX - 2 + j
                           : j == 0     ? (t % 5 ? 0 : 1 + t % 3)
                                        : 1 + (t * 7 + j) % (QX - 3);
            ta[t * K + j] = (sl_moe_assign){t, ex, 0.3f + 0.4f * (float)j};
            if (t % 11 != 10) a[na++] = ta[t * K + j];
        }
    for (int i = na - 1; i > 0; i--) { /* shuffled */
        g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
        const int k = (int)((g_seed >> 33) % (uint64_t)(i + 1));
        const sl_moe_assign tmp = a[i];
        a[i] = a[k];
        a[k] = tmp;
    }
    { /* tokens whose assignments all sort past the first slab (stable sort by expert) */
        int start[QX + 1] = {0}, seen[QX] = {0}, first[NT];
        for (int i = 0; i < na; i++) start[a[i].expert + 1]++;
        for (int e = 0; e < QX; e++) start[e + 1] += start[e];
        for (int t = 0; t < NT; t++) first[t] = na;
        for (int i = 0; i < na; i++) {
            const int pos = start[a[i].expert] + seen[a[i].expert]++;
            if (pos < first[a[i].token]) first[a[i].token] = pos;
        }
        int late = 0;
        for (int t = 0; t < NT; t++) late += t % 11 != 10 && first[t] >= SLAB;
        CHECK_MSG(na > SLAB && late > 0, "%d assignments, %d tokens only in the second slab: "
                  "the test no longer reaches a second slab", na, late);
    }
    for (int ti = 0; ti < 2; ti++) {
        const void *g[QX], *u[QX], *d[QX];
        for (int m = 0; m < 3 * QX; m++) {
            const uint32_t ty = types[ti][m >= 2 * QX];
            const size_t rb = sl_quant_row_bytes(ty, QE);
            void *q = malloc(rb * QF);
            for (int64_t i = 0; i < (int64_t)QE * QF; i++) w[i] = rnd();
            for (int r = 0; r < QF; r++)
                CHECK(!sl_quant_row(ty, w + (size_t)r * QE, (char *)q + rb * (size_t)r, QE, &e));
            (m < QX ? g : m < 2 * QX ? u : d)[m % QX] = q;
        }
        const sl_moe_layer L = {.layer = 0, .n_expert = QX, .n_embd = QE, .n_ff = QF,
                                .type_gate = types[ti][0], .type_up = types[ti][0],
                                .type_down = types[ti][1], .gate = g, .up = u, .down = d,
                                .act = SL_MOE_SILU};
        for (int p = 0; p < 2; p++) {
            sl_moe_sched *s = NULL;
            CHECK(!sl_moe_cpu_create(&v->ops, &v->mv, p ? pool : NULL, &s, &e));
            if (!s) break;
            memset(ob, 0xff, (size_t)NT * QE * 4);
            CHECK_MSG(!sl_moe_exec(s, &L, a, na, x, NT, ob, &e), "%s", e.msg);
            if (!p) batches_as_per_expert(v, s, &L, a, na, x, NT);
            int bad = 0;
            for (int t = 0; t < NT; t++) {
                sl_moe_assign one[K];
                for (int j = 0; j < K; j++) one[j] = (sl_moe_assign){0, ta[t * K + j].expert,
                                                                     ta[t * K + j].weight};
                if (t % 11 == 10) memset(o1, 0, QE * 4); /* no assignment: +0.0 */
                else CHECK(!sl_moe_exec(s, &L, one, K, x + (size_t)t * QE, 1, o1, &e));
                bad += memcmp(o1, ob + (size_t)t * QE, QE * 4) != 0;
            }
            CHECK_MSG(!bad, "%s/%s experts, %d threads: %d of %d tokens differ from their "
                      "one-token call", sl_gguf_type_get(types[ti][0])->name,
                      sl_gguf_type_get(types[ti][1])->name, p ? 2 : 1, bad, NT);
            sl_moe_destroy(s);
        }
        for (int m = 0; m < QX; m++) {
            free((void *)g[m]);
            free((void *)u[m]);
            free((void *)d[m]);
        }
    }
    sl_cpu_pool_destroy(pool);
    free(w);
    free(x);
    free(ob);
    free(o1);
    free(a);
    free(ta);
}

/* Layer 4's calls by mode since `before` (per-layer stats). */
static uint64_t mode_calls(sl_moe_sched *f, const sl_fetch_stats *before, sl_fetch_mode m)
{
    sl_fetch_stats t;
    sl_error e;
    if (sl_fetch_stats_get(f, 4, &t, &e)) return 0;
    return t.calls_mode[m] - (before ? before->calls_mode[m] : 0);
}

/* mode auto on copies throttled to 2 GB/s (fetch.h's cost model), experts of 393 KB:
 * decode computes on the CPU (copies cannot win), a prefill of 4000 tokens over 7 experts
 * fetches them whole (each copy serves ~1100 compute-bound CPU assignments), and decode returns to the CPU; seeded
 * with a CPU 2000x too slow, decode starts fetching and the CPU probe brings it back to the
 * CPU within a few calls. Same bits as the CPU scheduler throughout. */
static void test_auto(env *v)
{
    sl_device_options o = {.kind = "sim", .sim = {.h2d_gbs = 2.0}};
    sl_device *dev = NULL;
    sl_error e;
    CHECK(sl_device_open(&o, &dev, &e) == SL_OK);
    if (!dev) return;
    layer_data l4;
    make_layer(&l4, 4, 512);
    static const int32_t pat[] = {0, 5, 6, 1, 7, 2, 4};
    sl_moe_sched *f = make_fetch(v, dev, "mode=auto pcie_gbs=2");
    sl_fetch_stats t0;
    for (int i = 0; f && i < 4; i++) call(v, f, &l4, pat, 1, 2, "auto decode");
    CHECK_MSG(f && mode_calls(f, NULL, SL_FETCH_CPU) == 4, "auto decode: %llu of 4 calls on "
              "the CPU", (unsigned long long)(f ? mode_calls(f, NULL, SL_FETCH_CPU) : 0));
    if (f) sl_fetch_stats_get(f, 4, &t0, &e);
    if (f) call(v, f, &l4, pat, 4000, 2, "auto prefill");
    CHECK_MSG(f && mode_calls(f, &t0, SL_FETCH_FULL) == 1, "auto prefill of 4000 tokens: "
              "full %llu, post %llu, cpu %llu", (unsigned long long)mode_calls(f, &t0, SL_FETCH_FULL),
              (unsigned long long)mode_calls(f, &t0, SL_FETCH_POST),
              (unsigned long long)mode_calls(f, &t0, SL_FETCH_CPU));
    if (f) sl_fetch_stats_get(f, 4, &t0, &e);
    for (int i = 0; f && i < 4; i++) call(v, f, &l4, pat, 1, 2, "auto decode after prefill");
    CHECK_MSG(f && mode_calls(f, &t0, SL_FETCH_CPU) == 4, "auto decode after the prefill: %llu "
              "of 4 on the CPU", (unsigned long long)mode_calls(f, &t0, SL_FETCH_CPU));
    sl_moe_destroy(f);
    /* a wrong seed: the CPU at 0.05 GB/s; the probe measures it and decode returns to it */
    f = make_fetch(v, dev, "mode=auto pcie_gbs=2 cpu_gbs=0.05");
    call(v, f, &l4, pat, 1, 2, "auto decode, slow CPU seed");
    const uint64_t first_fetch = mode_calls(f, NULL, SL_FETCH_POST) +
                                 mode_calls(f, NULL, SL_FETCH_FULL);
    int cpu_run = 0;
    for (int i = 0; f && i < 40 && cpu_run < 4; i++) {
        sl_fetch_stats_get(f, 4, &t0, &e);
        call(v, f, &l4, pat, 1, 2, "auto decode, slow CPU seed");
        cpu_run = mode_calls(f, &t0, SL_FETCH_CPU) ? cpu_run + 1 : 0;
    }
    CHECK_MSG(first_fetch == 1 && cpu_run == 4, "auto with a CPU seed 2000x too slow: the first "
              "call fetched (%llu) and decode settled on the CPU (%d calls in a row)",
              (unsigned long long)first_fetch, cpu_run);
    sl_moe_destroy(f);
    free_layer(&l4);
    sl_device_close(dev);
}

int main(void)
{
    env v;
    sl_error e;
    if (sl_cpu_ops_init(&v.ops, SL_CPU_ISA_AUTO, sl_cpu_features_detect(), &e) ||
        sl_cpu_matvec_init(&v.mv, v.ops.isa, sl_cpu_features_detect(), &e) ||
        sl_moe_cpu_create(&v.ops, &v.mv, NULL, &v.cpu, &e)) {
        fprintf(stderr, "init: %s\n", e.msg);
        return 1;
    }
    sl_device_options plain = {.kind = "sim"};
    sl_device_options slow = {.kind = "sim", .sim = {.h2d_gbs = 2.0, .latency_ns = 20000}};
    sl_device *dev = NULL;
    CHECK(sl_device_open(&plain, &dev, &e) == SL_OK);
    if (dev) {
        test_cache_compaction(&v, dev);
        test_modes(&v, dev, "plain");
        sl_device_counters c;
        sl_device_counters_get(dev, &c);
        CHECK_MSG(c.regions_live == 0 && c.streams_live == 0 && c.events_live == 0,
                  "leaked: %llu regions, %llu streams, %llu events",
                  (unsigned long long)c.regions_live, (unsigned long long)c.streams_live,
                  (unsigned long long)c.events_live);
        sl_device_close(dev);
    }
    dev = NULL;
    CHECK(sl_device_open(&slow, &dev, &e) == SL_OK);
    if (dev) {
        test_modes(&v, dev, "throttled");
        sl_device_close(dev);
    }
    test_auto(&v);
    test_cpu_batch_invariance(&v);
    sl_moe_destroy(v.cpu);
    return sl_test_finish("sched_test");
}
