/* The hot/cold neuron solver against exhaustive search, plus its contract.
 *
 * - Random small instances (1-3 layers, at most 14 neurons, granularity 1-4, sparse and dense
 *   layers, skewed frequencies, GPU/CPU bandwidth ratios from 0.5 to 40 so that either VRAM or
 *   GPU time binds, budgets from 0 to past everything): every subset of groups is tried and the
 *   solver's bound must be within 1% of the best feasible one. The same for MoE instances:
 *   2-4 experts a layer with skewed routing probabilities (some never routed), groups counted
 *   within each expert, some layers without experts (0 neurons, as a leading dense layer).
 *   The cost of each subset is computed here neuron by neuron, independently of the solver's
 *   item arithmetic; byte sizes and budgets are integers so feasibility does not hinge on
 *   rounding.
 * - Every plan: within budget, whole groups, hot lists ascending (sl_gpuidx_validate), and the
 *   cost the solver reports is the cost computed here.
 * - Hand-solved cases (dense, sparse, two routed experts), edge cases (no budget, unlimited budget, neurons that never fire),
 *   determinism, a large instance, invalid problems, and plan -> .gpuidx -> plan. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/prng.h"
#include "scheduler/policy/gpuidx.h"
#include "scheduler/policy/hotcold_solve.h"
#include "tests/testing.h"

enum { INSTANCES = 4000, MAX_NEURONS = 14, MAX_LAYERS = 3 };

static uint64_t below(uint64_t s[4], uint64_t n) { return n ? sl_prng_next(s) % n : 0; }
static double unit(uint64_t s[4]) { return (double)(sl_prng_next(s) >> 11) * 0x1.0p-53; }

typedef struct instance {
    sl_hotcold_problem p;
    sl_hotcold_layer layers[MAX_LAYERS];
    float freq[MAX_LAYERS][MAX_NEURONS];
    float route_p[MAX_LAYERS][MAX_NEURONS];
} instance;

static uint32_t experts(const sl_hotcold_layer *L) { return L->n_expert > 1 ? L->n_expert : 1; }

/* Expected reads of neuron i per token, straight from the header's model. */
static double weight(const sl_hotcold_layer *L, uint32_t i)
{
    double w = L->dense ? 1.0 : L->freq[i];
    return L->n_expert > 1 ? w * L->route_p[i / (L->n_neuron / L->n_expert)] : w;
}

/* The first neuron of neuron i's group: groups of g counted within its expert. */
static uint32_t group_start(const sl_hotcold_layer *L, uint32_t g, uint32_t i)
{
    const uint32_t width = L->n_neuron / experts(L);
    return i / width * width + i % width / g * g;
}

/* Turns a drawn instance into a MoE one: every layer gets X experts (or, sometimes, none and
 * 0 neurons), the neurons it had split as evenly as X allows. */
static void make_moe(uint64_t s[4], instance *in)
{
    const uint32_t X = 2 + (uint32_t)below(s, 3);
    bool any = false;
    for (uint32_t l = 0; l < in->p.n_layer; l++) {
        sl_hotcold_layer *L = &in->layers[l];
        uint32_t width = L->n_neuron / X;
        if (!width || (any && below(s, 5) == 0)) {
            L->n_neuron = 0; /* no routed experts here: base bytes only */
            continue;
        }
        any = true;
        L->n_neuron = X * width;
        L->n_expert = X;
        L->route_p = in->route_p[l];
        double skew = 3 * unit(s);
        for (uint32_t e = 0; e < X; e++)
            in->route_p[l][e] = below(s, 6) == 0 ? 0.0f : (float)pow(unit(s), skew);
        if (!L->freq) L->freq = in->freq[l];
    }
}

static void draw(uint64_t s[4], instance *in)
{
    memset(in, 0, sizeof *in);
    uint32_t n_layer = 1 + (uint32_t)below(s, MAX_LAYERS);
    uint32_t left = MAX_NEURONS;
    double vram_all = 0, cpu_ffn = 0;
    for (uint32_t l = 0; l < n_layer; l++) {
        uint32_t most = left - (n_layer - 1 - l); /* leave one for each later layer */
        if (most > 8) most = 8;
        uint32_t n = 1 + (uint32_t)below(s, most);
        left -= n;
        sl_hotcold_layer *L = &in->layers[l];
        L->n_neuron = n;
        L->dense = below(s, 4) == 0;
        double skew = 1 + 3 * unit(s);
        for (uint32_t i = 0; i < n; i++)
            in->freq[l][i] = below(s, 8) == 0 ? 0.0f : (float)pow(unit(s), skew);
        L->freq = L->dense && below(s, 2) ? NULL : in->freq[l];
        L->neuron_bytes_cpu = (double)(1 + below(s, 1000));
        L->neuron_bytes_gpu =
            below(s, 2) ? L->neuron_bytes_cpu : (double)(1 + below(s, 1000));
        vram_all += L->neuron_bytes_gpu * n;
        cpu_ffn += L->neuron_bytes_cpu * n;
    }
    in->p.n_layer = n_layer;
    in->p.layers = in->layers;
    in->p.granularity = below(s, 3) ? 1 : 2 + (uint32_t)below(s, 3);
    in->p.vram_budget_bytes = below(s, 10) == 0 ? 0 : below(s, (uint64_t)(vram_all * 1.1) + 1);
    in->p.cpu_bytes_per_s = 1e11 * (0.5 + unit(s));
    in->p.gpu_bytes_per_s = in->p.cpu_bytes_per_s * 0.5 * pow(80.0, unit(s));
    in->p.cpu_base_bytes = below(s, 3) ? 0 : floor(unit(s) * cpu_ffn);
    in->p.gpu_base_bytes = below(s, 3) ? 0 : floor(unit(s) * cpu_ffn);
}

/* The cost of a hot mask [layer][neuron], straight from the model in hotcold_solve.h. */
static sl_hotcold_cost cost_of(const sl_hotcold_problem *p, uint8_t hot[][MAX_NEURONS])
{
    sl_hotcold_cost c = {.cpu_bytes = p->cpu_base_bytes, .gpu_bytes = p->gpu_base_bytes};
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_hotcold_layer *L = &p->layers[l];
        for (uint32_t i = 0; i < L->n_neuron; i++) {
            double w = weight(L, i);
            if (hot[l][i]) {
                c.gpu_bytes += L->neuron_bytes_gpu * w;
                c.vram_bytes += L->neuron_bytes_gpu;
            } else {
                c.cpu_bytes += L->neuron_bytes_cpu * w;
            }
        }
    }
    c.cpu_s = c.cpu_bytes / p->cpu_bytes_per_s;
    c.gpu_s = c.gpu_bytes / p->gpu_bytes_per_s;
    c.bound_s = fmax(c.cpu_s, c.gpu_s);
    return c;
}

/* Best bound over every subset of groups that fits the budget. */
static double exhaustive(const sl_hotcold_problem *p)
{
    uint32_t n_groups = 0, g_layer[MAX_NEURONS], g_first[MAX_NEURONS];
    for (uint32_t l = 0; l < p->n_layer; l++)
        for (uint32_t i = 0; i < p->layers[l].n_neuron; i++)
            if (group_start(&p->layers[l], p->granularity, i) == i) {
                g_layer[n_groups] = l;
                g_first[n_groups++] = i;
            }
    double best = INFINITY;
    for (uint32_t m = 0; m < (1u << n_groups); m++) {
        uint8_t hot[MAX_LAYERS][MAX_NEURONS] = {{0}};
        for (uint32_t g = 0; g < n_groups; g++) {
            if (!(m >> g & 1)) continue;
            const sl_hotcold_layer *L = &p->layers[g_layer[g]];
            for (uint32_t i = g_first[g]; i < L->n_neuron; i++)
                if (group_start(L, p->granularity, i) == g_first[g]) hot[g_layer[g]][i] = 1;
        }
        sl_hotcold_cost c = cost_of(p, hot);
        if (c.vram_bytes <= (double)p->vram_budget_bytes && c.bound_s < best) best = c.bound_s;
    }
    return best;
}

static bool near(double x, double y) { return fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y)); }

/* Plan invariants and its reported cost against cost_of(). */
static void check_plan(const sl_hotcold_problem *p, const sl_hotcold_plan *plan, int case_no)
{
    sl_error e = {0};
    CHECK_MSG(sl_gpuidx_validate(&plan->idx, &e) == SL_OK, "case %d: %s", case_no, e.msg);
    CHECK(plan->idx.n_layer == p->n_layer);
    CHECK(plan->idx.vram_capacity_bytes == p->vram_budget_bytes);
    uint32_t X = 0;
    for (uint32_t l = 0; l < p->n_layer; l++)
        if (p->layers[l].n_expert > 1) X = p->layers[l].n_expert;
    CHECK_MSG(plan->idx.n_expert == X, "case %d: index of %u experts, problem %u", case_no,
              plan->idx.n_expert, X);
    if (plan->idx.n_layer != p->n_layer) return;
    uint8_t hot[MAX_LAYERS][MAX_NEURONS] = {{0}};
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_gpuidx_layer *X = &plan->idx.layers[l];
        CHECK(X->n_neuron == p->layers[l].n_neuron);
        for (uint32_t i = 0; i < X->n_neuron; i++) {
            hot[l][i] = X->hot[i];
            uint32_t g0 = group_start(&p->layers[l], p->granularity, i);
            CHECK_MSG(X->hot[i] == X->hot[g0], "case %d: layer %u neuron %u splits its group",
                      case_no, l, i);
        }
    }
    sl_hotcold_cost c = cost_of(p, hot);
    CHECK_MSG(plan->cost.vram_bytes <= (double)p->vram_budget_bytes, "case %d: vram %g > %" PRIu64,
              case_no, plan->cost.vram_bytes, p->vram_budget_bytes);
    CHECK_MSG(near(c.bound_s, plan->cost.bound_s) && near(c.cpu_bytes, plan->cost.cpu_bytes) &&
                  near(c.gpu_bytes, plan->cost.gpu_bytes) && c.vram_bytes == plan->cost.vram_bytes,
              "case %d: reported cost %g, recomputed %g", case_no, plan->cost.bound_s, c.bound_s);
}

static double rel_gap(double got, double opt)
{
    if (opt > 0) return (got - opt) / opt;
    return got > 0 ? INFINITY : 0;
}

/* Gap statistics of one solver variant against the exhaustive optimum. */
typedef struct gaps {
    double worst, sum;
    int exact, worst_case, over;
} gaps;

static void gaps_add(gaps *g, double gap, int k)
{
    if (gap > g->worst) {
        g->worst = gap;
        g->worst_case = k;
    }
    g->sum += gap;
    g->exact += gap <= 1e-9;
    g->over += gap > 0.01;
}

static void gaps_print(const gaps *g, const char *what)
{
    printf("%s vs exhaustive: %d instances, %d optimal, %d over 1%%, mean gap %.4f%%, worst "
           "%.4f%% (case %d)\n", what, INSTANCES, g->exact, g->over, 100 * g->sum / INSTANCES,
           100 * g->worst, g->worst_case);
}

/* Each instance solved twice, the greedy and local search alone (measured, printed) and the
 * whole solver (asserted within 1%), against one exhaustive search; moe: the instances have
 * routed experts. */
static void run_against_exhaustive(bool moe)
{
    uint64_t s[4];
    sl_prng_seed(s, 20261124);
    gaps g[2] = {{0, 0, 0, -1, 0}, {0, 0, 0, -1, 0}};
    for (int k = 0; k < INSTANCES; k++) {
        instance in;
        draw(s, &in);
        if (moe) make_moe(s, &in);
        double opt = exhaustive(&in.p);
        for (int greedy_only = 1; greedy_only >= 0; greedy_only--) {
            in.p.greedy_only = greedy_only;
            sl_hotcold_plan plan;
            sl_error e = {0};
            sl_status st = sl_hotcold_solve(&in.p, &plan, &e);
            CHECK_MSG(st == SL_OK, "case %d: %s", k, e.msg);
            if (st) continue;
            check_plan(&in.p, &plan, k);
            double gap = rel_gap(plan.cost.bound_s, opt);
            CHECK_MSG(gap >= -1e-9, "case %d: solver %g beats exhaustive %g", k,
                      plan.cost.bound_s, opt);
            CHECK_MSG(plan.lower_bound_s <= opt * (1 + 1e-9), "case %d: lower bound %g > "
                      "optimum %g", k, plan.lower_bound_s, opt);
            if (!greedy_only)
                CHECK_MSG(gap <= 0.01, "case %d: solver %g, optimum %g (gap %.3f%%)", k,
                          plan.cost.bound_s, opt, 100 * gap);
            gaps_add(&g[greedy_only], gap, k);
            sl_hotcold_plan_free(&plan);
        }
    }
    gaps_print(&g[1], moe ? "greedy alone (MoE)" : "greedy alone");
    gaps_print(&g[0], moe ? "solver (MoE)" : "solver");
}

/* One dense layer of 4 neurons of 100 bytes, CPU 1 B/s, GPU 3 B/s: k hot gives
 * max(100 (4 - k), 100 k / 3), lowest at k = 3 (100 s); a budget of 250 bytes allows only 2. */
static void test_by_hand(void)
{
    sl_hotcold_layer L = {.n_neuron = 4, .dense = true, .neuron_bytes_cpu = 100,
                          .neuron_bytes_gpu = 100};
    sl_hotcold_problem p = {.n_layer = 1, .layers = &L, .vram_budget_bytes = 1000,
                            .cpu_bytes_per_s = 1, .gpu_bytes_per_s = 3, .granularity = 1};
    sl_hotcold_plan plan;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.layers[0].n_hot == 3);
    CHECK(near(plan.cost.bound_s, 100));
    CHECK(near(plan.cost.cpu_bytes, 100) && near(plan.cost.gpu_bytes, 300));
    sl_hotcold_plan_free(&plan);
    p.vram_budget_bytes = 250;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.layers[0].n_hot == 2);
    CHECK(near(plan.cost.bound_s, 200));
    sl_hotcold_plan_free(&plan);
    /* Sparse: the two hot neurons are the most active ones. */
    float f[4] = {0.1f, 0.9f, 0.2f, 0.8f};
    L.dense = false;
    L.freq = f;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.layers[0].n_hot == 2 && plan.idx.layers[0].hot_list[0] == 1 &&
          plan.idx.layers[0].hot_list[1] == 3);
    sl_hotcold_plan_free(&plan);
}

static void test_edges(void)
{
    enum { N = 64 };
    float f[N];
    for (int i = 0; i < N; i++) f[i] = i % 3 == 0 ? 0.0f : (float)(i + 1) / N;
    sl_hotcold_layer L[2] = {
        {.n_neuron = N, .freq = f, .neuron_bytes_cpu = 10, .neuron_bytes_gpu = 10},
        {.n_neuron = N, .freq = f, .neuron_bytes_cpu = 10, .neuron_bytes_gpu = 10},
    };
    sl_hotcold_problem p = {.n_layer = 2, .layers = L, .vram_budget_bytes = 0,
                            .cpu_bytes_per_s = 1e11, .gpu_bytes_per_s = 3e12, .granularity = 1};
    sl_hotcold_plan plan;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.layers[0].n_hot == 0 && plan.idx.layers[1].n_hot == 0);
    CHECK(plan.cost.vram_bytes == 0);
    sl_hotcold_plan_free(&plan);
    /* Unlimited budget, GPU 30x faster: the sides balance (about 1/31 of the work stays on the
     * CPU), and a neuron that never fires is never hot (it would cost VRAM for nothing). */
    p.vram_budget_bytes = UINT64_MAX;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    for (uint32_t l = 0; l < 2; l++)
        for (int i = 0; i < N; i++)
            if (f[i] == 0) CHECK(!plan.idx.layers[l].hot[i]);
    CHECK(plan.cost.cpu_bytes > 0 && plan.cost.gpu_bytes > 0);
    CHECK(plan.cost.bound_s <= plan.lower_bound_s * 1.01);
    sl_hotcold_plan_free(&plan);
    /* Granularity that does not divide the width: the short last group still moves whole. */
    p.granularity = 24;
    p.vram_budget_bytes = 10 * 40;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    for (uint32_t l = 0; l < 2; l++) {
        const sl_gpuidx_layer *X = &plan.idx.layers[l];
        for (int i = 0; i < N; i++) CHECK(X->hot[i] == X->hot[i / 24 * 24]);
    }
    CHECK(plan.cost.vram_bytes <= 400);
    sl_hotcold_plan_free(&plan);
    /* No layers: an empty plan. */
    sl_hotcold_problem none = {.cpu_bytes_per_s = 1, .gpu_bytes_per_s = 1, .granularity = 1};
    CHECK(sl_hotcold_solve(&none, &plan, &e) == SL_OK && plan.idx.n_layer == 0);
    sl_hotcold_plan_free(&plan);
}

/* A model-sized instance (32 layers x 11008 neurons, Q4_K-like bytes, g = 256): within budget,
 * deterministic, no worse than filling the budget with the hottest groups. */
static void test_large(void)
{
    enum { NL = 32, NF = 11008 };
    float *f = malloc(sizeof(float) * NL * NF);
    sl_hotcold_layer L[NL];
    uint64_t s[4];
    sl_prng_seed(s, 7);
    for (int l = 0; l < NL; l++) {
        for (int i = 0; i < NF; i++) f[l * NF + i] = (float)pow(unit(s), 4);
        L[l] = (sl_hotcold_layer){.n_neuron = NF, .freq = f + l * NF,
                                  .neuron_bytes_cpu = 3 * 4096 * 144.0 / 256,
                                  .neuron_bytes_gpu = 3 * 4096 * 144.0 / 256};
    }
    sl_hotcold_problem p = {.n_layer = NL, .layers = L, .vram_budget_bytes = 1ull << 30,
                            .cpu_bytes_per_s = 1e11, .gpu_bytes_per_s = 3e12,
                            .cpu_base_bytes = 2e8, .gpu_base_bytes = 1e8, .granularity = 256};
    sl_hotcold_plan a, b;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&p, &a, &e) == SL_OK);
    CHECK(sl_hotcold_solve(&p, &b, &e) == SL_OK);
    CHECK(a.cost.vram_bytes <= (double)p.vram_budget_bytes);
    CHECK(a.cost.bound_s == b.cost.bound_s);
    for (int l = 0; l < NL; l++) {
        CHECK(a.idx.layers[l].n_hot == b.idx.layers[l].n_hot);
        CHECK(!memcmp(a.idx.layers[l].hot, b.idx.layers[l].hot, NF));
    }
    printf("large: bound %.3f ms (cpu %.3f, gpu %.3f), vram %.1f MiB, proven gap %.4f%%\n",
           1e3 * a.cost.bound_s, 1e3 * a.cost.cpu_s, 1e3 * a.cost.gpu_s,
           a.cost.vram_bytes / 1048576, 100 * (a.cost.bound_s / a.lower_bound_s - 1));
    CHECK(a.cost.bound_s <= a.lower_bound_s * 1.01);
    CHECK(a.cost.bound_s < (2e8 + NL * NF * L[0].neuron_bytes_cpu) / 1e11);
    sl_hotcold_plan_free(&a);
    sl_hotcold_plan_free(&b);
    free(f);
}

static void test_invalid(void)
{
    float f[2] = {0.5f, 1.5f};
    sl_hotcold_layer L = {.n_neuron = 2, .freq = f, .neuron_bytes_cpu = 1, .neuron_bytes_gpu = 1};
    sl_hotcold_problem p = {.n_layer = 1, .layers = &L, .vram_budget_bytes = 10,
                            .cpu_bytes_per_s = 1, .gpu_bytes_per_s = 1, .granularity = 1};
    sl_hotcold_plan plan;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "freq[1] = 1.5");
    CHECK(plan.idx.n_layer == 0);
    f[1] = 0.5f;
    p.granularity = 0;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "granularity");
    p.granularity = 1;
    p.gpu_bytes_per_s = 0;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "bandwidths");
    p.gpu_bytes_per_s = 1;
    L.freq = NULL;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "freq is NULL");
    /* routed experts */
    L.freq = f;
    L.dense = true;
    L.n_expert = 2;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "route_p is NULL");
    float r[3] = {0.5f, -0.25f, 0.5f};
    L.route_p = r;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "route_p[1] = -0.25");
    L.n_expert = 3;
    r[1] = 0.5f;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "not a multiple of its 3 experts");
    sl_hotcold_layer two[2] = {L, L};
    two[0].n_expert = 2;
    two[1].n_expert = 0;
    p.layers = two;
    p.n_layer = 2;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "layer 1 has 0 experts, another layer 2");
    two[1].n_neuron = 0; /* a layer without routed experts: allowed */
    CHECK_MSG(sl_hotcold_solve(&p, &plan, &e) == SL_OK, "%s", e.msg);
    CHECK(plan.idx.n_expert == 2 && plan.idx.layers[1].n_neuron == 0);
    sl_hotcold_plan_free(&plan);
}

/* Two experts of 2 neurons of 100 bytes, routed with probability 0.25 and 0.75; CPU 1 B/s, GPU
 * 100 B/s; room for 2 neurons: the popular expert goes hot whole (CPU side 2 x 100 x 0.25 =
 * 50 s instead of 150 s), and a neuron's weight is its expert's probability. */
static void test_moe_by_hand(void)
{
    float route[2] = {0.25f, 0.75f};
    sl_hotcold_layer L = {.n_neuron = 4, .dense = true, .neuron_bytes_cpu = 100,
                          .neuron_bytes_gpu = 100, .n_expert = 2, .route_p = route};
    sl_hotcold_problem p = {.n_layer = 1, .layers = &L, .vram_budget_bytes = 200,
                            .cpu_bytes_per_s = 1, .gpu_bytes_per_s = 100, .granularity = 2};
    sl_hotcold_plan plan;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.n_expert == 2 && plan.idx.layers[0].n_hot == 2 &&
          plan.idx.layers[0].hot_list[0] == 2 && plan.idx.layers[0].hot_list[1] == 3);
    CHECK(near(plan.cost.cpu_bytes, 50) && near(plan.cost.gpu_bytes, 150));
    CHECK(near(plan.cost.bound_s, 50));
    sl_hotcold_plan_free(&plan);
    /* granularity 3 > the expert's width: each expert is one group, never a cross-expert one */
    p.granularity = 3;
    p.vram_budget_bytes = 300;
    CHECK(sl_hotcold_solve(&p, &plan, &e) == SL_OK);
    CHECK(plan.idx.layers[0].n_hot == 2 && plan.idx.layers[0].hot[2] && plan.idx.layers[0].hot[3]);
    sl_hotcold_plan_free(&plan);
}

/* The solver's index goes through part 1's writer and comes back the same. */
static void test_plan_to_file(void)
{
    uint64_t s[4];
    sl_prng_seed(s, 99);
    instance in;
    draw(s, &in);
    in.p.vram_budget_bytes = UINT64_MAX / 2;
    sl_hotcold_plan plan;
    sl_error e = {0};
    CHECK(sl_hotcold_solve(&in.p, &plan, &e) == SL_OK);
    char path[] = "/tmp/hotcold_solve_test_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK_MSG(sl_gpuidx_write(path, &plan.idx, NULL, &e) == SL_OK, "%s", e.msg);
    sl_gpuidx back;
    CHECK_MSG(sl_gpuidx_read(path, in.p.n_layer, NULL, &back, &e) == SL_OK, "%s", e.msg);
    CHECK(back.vram_capacity_bytes == in.p.vram_budget_bytes);
    for (uint32_t l = 0; l < back.n_layer && back.n_layer == in.p.n_layer; l++)
        CHECK(back.layers[l].n_hot == plan.idx.layers[l].n_hot &&
              !memcmp(back.layers[l].hot, plan.idx.layers[l].hot, back.layers[l].n_neuron));
    sl_gpuidx_free(&back);
    sl_hotcold_plan_free(&plan);
    remove(path);
}

int main(void)
{
    test_by_hand();
    test_moe_by_hand();
    test_edges();
    test_invalid();
    test_plan_to_file();
    test_large();
    run_against_exhaustive(false);
    run_against_exhaustive(true);
    return sl_test_finish("hotcold_solve_test");
}
