/* scheduler/policy/hotcold_solve.c: the hot/cold neuron solver (model and method in the header).
 *
 * In time units the problem is: items j (groups of neurons) with a_j = CPU seconds a token saves
 * when j is hot, d_j = GPU seconds it adds, c_j = VRAM bytes; choose S with sum c <= budget to
 * minimise T(S) = max(C0 - A(S), G0 + D(S)), C0 = CPU seconds with everything cold, G0 = GPU
 * seconds of the base. Two resources compete (VRAM and GPU time), so no single density orders
 * the items: with a large budget the GPU side binds and a_j / d_j (a per-layer constant: byte
 * sizes and bandwidths) matters; with a small one VRAM binds and a_j / c_j (how hot the group
 * is) matters. The orderings by a / (d + mu * c) span both; each is filled greedily and cut
 * where the sides cross. What a greedy fill cannot do is trade one coarse item for two finer
 * ones or land the crossing between steps; the local search over the boundary does most of
 * that. The LP bound then says how far from optimal the result can be, and where that is more
 * than 0.1% (only coarse, small instances) the branch and bound searches the rest.
 *
 * Invariants of the search state: hot[j] == 1 exactly for the items of S; A, D, C are the sums
 * of a, d, c over S (recomputed from scratch before each local-search pass, so rounding does
 * not drift) and C <= budget. */
#include "scheduler/policy/hotcold_solve.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    WINDOW = 32,      /* boundary items on each side the local search may move */
    MAX_PASSES = 200, /* each pass strictly lowers T, so this only guards against cycling */
    DUAL_STEPS = 48,  /* golden-section steps on the dual's theta (0.618^48 ~ 1e-10) */
    MAX_NODES = 1 << 18, /* branch-and-bound nodes before the incumbent is kept as is */
    MAX_BNB_ITEMS = 4096, /* recursion depth; past it the greedy's steps are fine anyway */
};

/* A greedy result this close to the lower bound is kept without a search. */
static const double k_proven_gap = 1e-3;

/* Price weights mu of VRAM against GPU time (after normalising both to the instance); 0 orders
 * by a/d alone, INFINITY by a/c alone. */
static const double k_mu[] = {0.0,  1.0 / 64, 1.0 / 16, 0.125, 0.25, 0.5, 1.0,
                              2.0,  4.0,      8.0,      16.0,  64.0, INFINITY};

typedef struct item {
    uint32_t layer, first, size; /* neurons [first, first + size) of layer */
    double a, d, c;
} item;

typedef struct ranked {
    double key, a;
    uint32_t i; /* item index: items are built in (layer, neuron) order, the last tie-break */
} ranked;

typedef struct search {
    item *it;
    uint32_t n;       /* items that can help: a > 0 and c <= budget */
    double c0, g0;    /* seconds per token with every neuron cold */
    double budget;
} search;

static double bound(const search *s, double A, double D)
{
    double cpu = s->c0 - A, gpu = s->g0 + D;
    return cpu > gpu ? cpu : gpu;
}

static int by_key(const void *pa, const void *pb)
{
    const ranked *x = pa, *y = pb;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    if (x->a != y->a) return x->a > y->a ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static uint32_t experts_of(const sl_hotcold_layer *L) { return L->n_expert > 1 ? L->n_expert : 1; }

/* Expected reads of neuron i per token (the header's w_i). */
static double neuron_weight(const sl_hotcold_layer *L, uint32_t i)
{
    double w = L->dense ? 1.0 : L->freq[i];
    if (L->n_expert > 1) w *= L->route_p[i / (L->n_neuron / L->n_expert)];
    return w;
}

static double group_weight(const sl_hotcold_layer *L, uint32_t first, uint32_t size)
{
    double w = 0;
    for (uint32_t i = first; i < first + size; i++) w += neuron_weight(L, i);
    return w;
}

/* The experts per layer of the problem's index: 0 when no layer has routed experts. */
static uint32_t problem_experts(const sl_hotcold_problem *p)
{
    for (uint32_t l = 0; l < p->n_layer; l++)
        if (p->layers[l].n_expert > 1) return p->layers[l].n_expert;
    return 0;
}

static sl_status validate_experts(const sl_hotcold_problem *p, sl_error *err)
{
    const uint32_t X = problem_experts(p);
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_hotcold_layer *L = &p->layers[l];
        if (X && L->n_neuron && L->n_expert != X)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u has %u experts, another "
                                "layer %u (one expert count per index; a layer without routed "
                                "experts has 0 neurons)", l, L->n_expert, X);
        if (L->n_expert <= 1) continue;
        if (L->n_neuron % L->n_expert)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: %u neurons are not a "
                                "multiple of its %u experts", l, L->n_neuron, L->n_expert);
        if (!L->route_p)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u has %u experts but "
                                "route_p is NULL", l, L->n_expert);
        for (uint32_t e = 0; e < L->n_expert; e++)
            if (!(L->route_p[e] >= 0 && L->route_p[e] <= 1))
                return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: route_p[%u] = %g, "
                                    "expected a probability in [0, 1]", l, e, L->route_p[e]);
    }
    return SL_OK;
}

sl_status sl_hotcold_problem_validate(const sl_hotcold_problem *p, sl_error *err)
{
    if (!(p->cpu_bytes_per_s > 0) || !(p->gpu_bytes_per_s > 0) || !isfinite(p->cpu_bytes_per_s) ||
        !isfinite(p->gpu_bytes_per_s))
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: bandwidths must be > 0 (cpu %g, gpu "
                            "%g bytes/s)", p->cpu_bytes_per_s, p->gpu_bytes_per_s);
    if (!(p->cpu_base_bytes >= 0) || !(p->gpu_base_bytes >= 0) || !isfinite(p->cpu_base_bytes) ||
        !isfinite(p->gpu_base_bytes))
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: base bytes must be >= 0 (cpu %g, "
                            "gpu %g)", p->cpu_base_bytes, p->gpu_base_bytes);
    if (p->granularity == 0)
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: granularity must be >= 1");
    if (p->n_layer && !p->layers)
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: %u layers but layers is NULL",
                            p->n_layer);
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_hotcold_layer *L = &p->layers[l];
        if (L->n_neuron > INT32_MAX)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: %u neurons", l,
                                L->n_neuron);
        if (!(L->neuron_bytes_cpu >= 0) || !(L->neuron_bytes_gpu >= 0) ||
            !isfinite(L->neuron_bytes_cpu) || !isfinite(L->neuron_bytes_gpu))
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: neuron bytes must be "
                                ">= 0 (cpu %g, gpu %g)", l, L->neuron_bytes_cpu,
                                L->neuron_bytes_gpu);
        if (L->dense) continue;
        if (L->n_neuron && !L->freq)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u is sparse but freq is "
                                "NULL", l);
        for (uint32_t i = 0; i < L->n_neuron; i++) {
            if (!(L->freq[i] >= 0 && L->freq[i] <= 1))
                return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: freq[%u] = %g, "
                                    "expected a probability in [0, 1]", l, i, L->freq[i]);
        }
    }
    return validate_experts(p, err);
}

sl_status sl_hotcold_evaluate(const sl_hotcold_problem *p, const sl_gpuidx *idx,
                              sl_hotcold_cost *out, sl_error *err)
{
    sl_status s;
    if ((s = sl_hotcold_problem_validate(p, err)) || (s = sl_gpuidx_validate(idx, err))) return s;
    if (idx->n_layer != p->n_layer)
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: index has %u layers, problem %u",
                            idx->n_layer, p->n_layer);
    if ((idx->n_expert > 1 ? idx->n_expert : 0) != problem_experts(p))
        return sl_error_set(err, SL_ERR_INVALID, "hotcold: index has %u experts per layer, "
                            "problem %u", idx->n_expert, problem_experts(p));
    sl_hotcold_cost c = {.cpu_bytes = p->cpu_base_bytes, .gpu_bytes = p->gpu_base_bytes};
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_hotcold_layer *L = &p->layers[l];
        const sl_gpuidx_layer *X = &idx->layers[l];
        if (X->n_neuron != L->n_neuron)
            return sl_error_set(err, SL_ERR_INVALID, "hotcold: layer %u: index has %u neurons, "
                                "problem %u", l, X->n_neuron, L->n_neuron);
        double w_cold = 0, w_hot = 0;
        for (uint32_t i = 0; i < L->n_neuron; i++) {
            double w = neuron_weight(L, i);
            if (X->hot[i]) w_hot += w;
            else w_cold += w;
        }
        c.cpu_bytes += L->neuron_bytes_cpu * w_cold;
        c.gpu_bytes += L->neuron_bytes_gpu * w_hot;
        c.vram_bytes += L->neuron_bytes_gpu * X->n_hot;
    }
    c.cpu_s = c.cpu_bytes / p->cpu_bytes_per_s;
    c.gpu_s = c.gpu_bytes / p->gpu_bytes_per_s;
    c.bound_s = c.cpu_s > c.gpu_s ? c.cpu_s : c.gpu_s;
    *out = c;
    return SL_OK;
}

/* Items that can help (a > 0, fits the budget alone), and C0 over every neuron. */
static sl_status build_items(const sl_hotcold_problem *p, search *s, sl_error *err)
{
    uint64_t n_groups = 0;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const uint32_t E = experts_of(&p->layers[l]), width = p->layers[l].n_neuron / E;
        n_groups += E * ((width + (uint64_t)p->granularity - 1) / p->granularity);
    }
    if (n_groups > UINT32_MAX)
        return sl_error_set(err, SL_ERR_RANGE, "hotcold: %llu groups",
                            (unsigned long long)n_groups);
    s->it = n_groups ? malloc(n_groups * sizeof *s->it) : NULL;
    if (n_groups && !s->it) return sl_error_set(err, SL_ERR_NOMEM, "hotcold: items");
    s->budget = (double)p->vram_budget_bytes;
    s->g0 = p->gpu_base_bytes / p->gpu_bytes_per_s;
    double cpu_bytes = p->cpu_base_bytes;
    s->n = 0;
    for (uint32_t l = 0; l < p->n_layer; l++) {
        const sl_hotcold_layer *L = &p->layers[l];
        const uint32_t E = experts_of(L), width = L->n_neuron / E;
        for (uint32_t e = 0; e < E; e++) {
            for (uint32_t at = 0; at < width; at += p->granularity) {
                const uint32_t first = e * width + at;
                const uint32_t size = width - at < p->granularity ? width - at : p->granularity;
                const double w = group_weight(L, first, size);
                cpu_bytes += L->neuron_bytes_cpu * w;
                item x = {l, first, size, L->neuron_bytes_cpu * w / p->cpu_bytes_per_s,
                          L->neuron_bytes_gpu * w / p->gpu_bytes_per_s,
                          L->neuron_bytes_gpu * size};
                if (x.a > 0 && x.c <= s->budget) s->it[s->n++] = x;
            }
        }
    }
    s->c0 = cpu_bytes / p->cpu_bytes_per_s;
    return SL_OK;
}

/* Orders the items for one mu (d and c scaled so that mu = 1 weighs them alike). */
static void rank(const search *s, double mu, double d_scale, double c_scale, ranked *r)
{
    for (uint32_t k = 0; k < s->n; k++) {
        const item *x = &s->it[k];
        double price = isinf(mu) ? x->c * c_scale : x->d * d_scale + mu * x->c * c_scale;
        r[k] = (ranked){price > 0 ? x->a / price : INFINITY, x->a, k};
    }
    qsort(r, s->n, sizeof *r, by_key);
}

/* Greedy fill in rank order under the budget, keeping the accepted prefix with the lowest T.
 * acc is scratch of s->n entries. */
static void fill(const search *s, const ranked *r, uint32_t *acc, uint8_t *hot)
{
    memset(hot, 0, s->n);
    double A = 0, D = 0, C = 0, best = bound(s, 0, 0);
    uint32_t m = 0, m_best = 0;
    for (uint32_t k = 0; k < s->n; k++) {
        const item *x = &s->it[r[k].i];
        if (C + x->c > s->budget) continue;
        A += x->a;
        D += x->d;
        C += x->c;
        acc[m++] = r[k].i;
        double t = bound(s, A, D);
        if (t < best) {
            best = t;
            m_best = m;
        }
        if (s->g0 + D >= s->c0 - A) break; /* past the crossing more only raises the GPU side */
    }
    for (uint32_t k = 0; k < m_best; k++) hot[acc[k]] = 1;
}

typedef struct move {
    double t;
    uint32_t out[2], in[2];
    uint8_t n_out, n_in;
} move;

static void consider(const search *s, double A, double D, double C, move *best, const uint32_t *out,
                     uint8_t n_out, const uint32_t *in, uint8_t n_in)
{
    for (uint8_t k = 0; k < n_out; k++) {
        A -= s->it[out[k]].a;
        D -= s->it[out[k]].d;
        C -= s->it[out[k]].c;
    }
    for (uint8_t k = 0; k < n_in; k++) {
        A += s->it[in[k]].a;
        D += s->it[in[k]].d;
        C += s->it[in[k]].c;
    }
    if (C > s->budget) return;
    double t = bound(s, A, D);
    if (t >= best->t) return;
    *best = (move){t, {0, 0}, {0, 0}, n_out, n_in};
    for (uint8_t k = 0; k < n_out; k++) best->out[k] = out[k];
    for (uint8_t k = 0; k < n_in; k++) best->in[k] = in[k];
}

/* Best-improvement local search over the WINDOW weakest hot and strongest cold items of r. */
static double improve(const search *s, const ranked *r, uint8_t *hot)
{
    for (int pass = 0;; pass++) {
        double A = 0, D = 0, C = 0;
        for (uint32_t k = 0; k < s->n; k++) {
            if (!hot[k]) continue;
            A += s->it[k].a;
            D += s->it[k].d;
            C += s->it[k].c;
        }
        double t = bound(s, A, D);
        if (pass == MAX_PASSES) return t;
        uint32_t H[WINDOW], K[WINDOW], nh = 0, nk = 0;
        for (uint32_t k = s->n; k-- > 0 && nh < WINDOW;)
            if (hot[r[k].i]) H[nh++] = r[k].i;
        for (uint32_t k = 0; k < s->n && nk < WINDOW; k++)
            if (!hot[r[k].i]) K[nk++] = r[k].i;
        /* A move must beat t by a relative margin: equal-cost plateaus end the search. */
        move best = {t * (1 - 1e-12), {0, 0}, {0, 0}, 0, 0};
        bool found = false;
        for (uint32_t j = 0; j < nk; j++) consider(s, A, D, C, &best, NULL, 0, &K[j], 1);
        for (uint32_t i = 0; i < nh; i++) consider(s, A, D, C, &best, &H[i], 1, NULL, 0);
        for (uint32_t i = 0; i < nh; i++) {
            for (uint32_t j = 0; j < nk; j++) {
                consider(s, A, D, C, &best, &H[i], 1, &K[j], 1);
                for (uint32_t j2 = j + 1; j2 < nk; j2++) {
                    uint32_t in[2] = {K[j], K[j2]};
                    consider(s, A, D, C, &best, &H[i], 1, in, 2);
                }
                for (uint32_t i2 = i + 1; i2 < nh; i2++) {
                    uint32_t out[2] = {H[i], H[i2]};
                    consider(s, A, D, C, &best, out, 2, &K[j], 1);
                }
            }
        }
        found = best.n_in || best.n_out;
        if (!found) return t;
        for (uint8_t k = 0; k < best.n_out; k++) hot[best.out[k]] = 0;
        for (uint8_t k = 0; k < best.n_in; k++) hot[best.in[k]] = 1;
    }
}

/* ---- lower bound: the LP relaxation through its dual ----------------------------------- */

/* For theta in [0, 1], max(x, y) >= theta x + (1 - theta) y, so for every split
 *   T >= theta C0 + (1 - theta) G0 - max over S within budget of sum_{j in S} v_j,
 *   v_j = theta a_j - (1 - theta) d_j = a_j f_l,  f_l = theta - (1 - theta) q_l,  q_l = d_j / a_j
 * (q_l is the layer's: both are its neuron bytes times w over a bandwidth), and relaxing S to
 * fractions makes the max a fractional knapsack. Every theta gives a valid bound; the best is
 * the LP optimum (the function is concave in theta), found by golden-section search.
 * The knapsack takes items by v/c = (a/c) f_l: within a layer that is a/c order whatever theta
 * is, so each layer is sorted once and a theta's knapsack is a threshold tau on v/c, each layer
 * contributing a prefix found by binary search, then the few items at the threshold. */
typedef struct dual {
    const search *s;
    uint32_t *start; /* [n_layer + 1] layer l's items are rho[start[l] .. start[l + 1]) */
    double *rho;     /* [n] a/c, descending within each layer (INFINITY for c == 0) */
    double *a, *c;   /* [n] the same items' a and c */
    double *pa, *pc; /* [n + n_layer] per-layer prefix sums: k items of l at start[l] + l + k */
    double *q;       /* [n_layer] d/a of the layer */
    uint32_t *k;     /* [n_layer] scratch: items taken per layer */
    uint32_t n_layer;
} dual;

static void dual_free(dual *u)
{
    free(u->start);
    free(u->rho);
    free(u->a);
    free(u->c);
    free(u->pa);
    free(u->pc);
    free(u->q);
    free(u->k);
}

/* r is scratch of s->n entries. */
static sl_status dual_init(dual *u, const search *s, uint32_t n_layer, ranked *r, sl_error *err)
{
    size_t n = s->n;
    *u = (dual){.s = s, .n_layer = n_layer};
    u->start = calloc(n_layer + 1, sizeof *u->start);
    u->rho = malloc((n + 1) * sizeof *u->rho);
    u->a = malloc((n + 1) * sizeof *u->a);
    u->c = malloc((n + 1) * sizeof *u->c);
    u->pa = malloc((n + n_layer + 1) * sizeof *u->pa);
    u->pc = malloc((n + n_layer + 1) * sizeof *u->pc);
    u->q = calloc(n_layer + 1, sizeof *u->q);
    u->k = calloc(n_layer + 1, sizeof *u->k);
    if (!u->start || !u->rho || !u->a || !u->c || !u->pa || !u->pc || !u->q || !u->k) {
        dual_free(u);
        return sl_error_set(err, SL_ERR_NOMEM, "hotcold: lower bound");
    }
    uint32_t j = 0;
    for (uint32_t l = 0; l < n_layer; l++) {
        u->start[l] = j;
        uint32_t m = 0;
        for (; j < s->n && s->it[j].layer == l; j++, m++) {
            const item *x = &s->it[j];
            r[m] = (ranked){x->c > 0 ? x->a / x->c : INFINITY, x->a, j};
        }
        qsort(r, m, sizeof *r, by_key);
        double *pa = u->pa + u->start[l] + l, *pc = u->pc + u->start[l] + l;
        pa[0] = pc[0] = 0;
        for (uint32_t t = 0; t < m; t++) {
            const item *x = &s->it[r[t].i];
            u->rho[u->start[l] + t] = r[t].key;
            u->a[u->start[l] + t] = x->a;
            u->c[u->start[l] + t] = x->c;
            pa[t + 1] = pa[t] + x->a;
            pc[t + 1] = pc[t] + x->c;
        }
        if (m) u->q[l] = s->it[r[0].i].d / s->it[r[0].i].a;
    }
    u->start[n_layer] = j;
    return SL_OK;
}

/* Items of layer l (factor f > 0) whose v/c is >= tau. */
static uint32_t count_at(const dual *u, uint32_t l, double f, double tau)
{
    uint32_t lo = u->start[l], hi = u->start[l + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (u->rho[mid] * f >= tau) lo = mid + 1;
        else hi = mid;
    }
    return lo - u->start[l];
}

static double taken_c(const dual *u, const double *f, double tau, uint32_t *k)
{
    double c = 0;
    for (uint32_t l = 0; l < u->n_layer; l++) {
        k[l] = f[l] > 0 ? count_at(u, l, f[l], tau) : 0;
        c += u->pc[u->start[l] + l + k[l]];
    }
    return c;
}

static double dual_at(const dual *u, double theta, double *f)
{
    const search *s = u->s;
    double top = 0;
    for (uint32_t l = 0; l < u->n_layer; l++) {
        f[l] = theta - (1 - theta) * u->q[l];
        if (f[l] > 0 && u->start[l] < u->start[l + 1])
            top = fmax(top, u->rho[u->start[l]] * f[l]);
    }
    /* Bisect tau between "everything positive" (lo) and "nothing but free items" (hi). */
    double lo = 0, hi = isinf(top) ? INFINITY : 2 * top + 1;
    if (taken_c(u, f, lo, u->k) > s->budget) {
        if (isinf(hi)) hi = DBL_MAX;
        for (int it = 0; it < 200 && lo < hi; it++) {
            double mid = lo + (hi - lo) / 2;
            if (mid <= lo || mid >= hi) break;
            if (taken_c(u, f, mid, u->k) > s->budget) lo = mid;
            else hi = mid;
        }
    } else {
        hi = lo;
    }
    double room = s->budget - taken_c(u, f, hi, u->k), gain = 0;
    for (uint32_t l = 0; l < u->n_layer; l++)
        if (f[l] > 0) gain += f[l] * u->pa[u->start[l] + l + u->k[l]];
    /* The items at the threshold, best first, the last one in part. */
    for (;;) {
        uint32_t best_l = UINT32_MAX;
        double best_key = -1;
        for (uint32_t l = 0; l < u->n_layer; l++) {
            uint32_t at = u->start[l] + u->k[l];
            if (f[l] <= 0 || at >= u->start[l + 1]) continue;
            if (u->rho[at] * f[l] > best_key) {
                best_key = u->rho[at] * f[l];
                best_l = l;
            }
        }
        if (best_l == UINT32_MAX || best_key <= 0) break;
        uint32_t at = u->start[best_l] + u->k[best_l];
        if (u->c[at] > room) {
            gain += f[best_l] * u->a[at] * (room / u->c[at]);
            break;
        }
        gain += f[best_l] * u->a[at];
        room -= u->c[at];
        u->k[best_l]++;
    }
    return theta * s->c0 + (1 - theta) * s->g0 - gain;
}

static double lower_bound(const dual *u, double *f)
{
    const double phi = 0.6180339887498949;
    double lo = 0, hi = 1;
    double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
    double f1 = dual_at(u, x1, f), f2 = dual_at(u, x2, f);
    double best = fmax(fmax(f1, f2), fmax(dual_at(u, 0, f), dual_at(u, 1, f)));
    for (int k = 0; k < DUAL_STEPS; k++) {
        if (f1 < f2) {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + phi * (hi - lo);
            f2 = dual_at(u, x2, f);
            best = fmax(best, f2);
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - phi * (hi - lo);
            f1 = dual_at(u, x1, f);
            best = fmax(best, f1);
        }
    }
    return best;
}

/* ---- branch and bound ------------------------------------------------------------------ */

/* Depth-first over the items in a/c order (include before exclude). A node's bound: the CPU
 * side cannot drop below C0 minus what is in minus the fractional-knapsack best of the rest
 * (which, in a/c order, is a scan of the suffix), and the GPU side cannot drop below G0 plus
 * what is in. */
typedef struct bnb {
    const search *s;
    const uint32_t *order; /* item indices by a/c, descending */
    uint8_t *cur, *best_hot;
    double best;
    uint64_t nodes;
    bool cut; /* the node limit stopped the search */
} bnb;

static void branch(bnb *b, uint32_t k, double A, double D, double C)
{
    const search *s = b->s;
    if (++b->nodes > MAX_NODES) {
        b->cut = true;
        return;
    }
    double t = bound(s, A, D);
    if (t < b->best * (1 - 1e-12)) {
        b->best = t;
        memcpy(b->best_hot, b->cur, s->n);
    }
    double room = s->budget - C, more = 0;
    for (uint32_t j = k; j < s->n; j++) {
        const item *x = &s->it[b->order[j]];
        if (x->c > room) {
            more += x->a * (room / x->c);
            break;
        }
        more += x->a;
        room -= x->c;
    }
    if (k == s->n || bound(s, A + more, D) >= b->best * (1 - 1e-12)) return;
    const item *x = &s->it[b->order[k]];
    if (C + x->c <= s->budget && s->g0 + D + x->d < b->best) {
        b->cur[b->order[k]] = 1;
        branch(b, k + 1, A + x->a, D + x->d, C + x->c);
        b->cur[b->order[k]] = 0;
        if (b->cut) return;
    }
    branch(b, k + 1, A, D, C);
}

/* The plan's index from the chosen items. */
static sl_status to_plan(const sl_hotcold_problem *p, const search *s, const uint8_t *hot,
                         sl_hotcold_plan *out, sl_error *err)
{
    uint32_t *n_neuron = p->n_layer ? malloc(p->n_layer * sizeof *n_neuron) : NULL;
    if (p->n_layer && !n_neuron) return sl_error_set(err, SL_ERR_NOMEM, "hotcold: plan");
    for (uint32_t l = 0; l < p->n_layer; l++) n_neuron[l] = p->layers[l].n_neuron;
    sl_status st = sl_gpuidx_init(&out->idx, p->n_layer, n_neuron, err);
    free(n_neuron);
    if (st) return st;
    out->idx.vram_capacity_bytes = p->vram_budget_bytes;
    out->idx.n_expert = problem_experts(p);
    /* Items are in (layer, neuron) order, so each layer's list comes out ascending. */
    uint32_t k = 0;
    for (uint32_t l = 0; l < p->n_layer && !st; l++) {
        sl_gpuidx_layer *X = &out->idx.layers[l];
        uint32_t *list = X->n_neuron ? malloc(X->n_neuron * sizeof *list) : NULL;
        if (X->n_neuron && !list) return sl_error_set(err, SL_ERR_NOMEM, "hotcold: hot list");
        uint32_t n_hot = 0;
        for (; k < s->n && s->it[k].layer == l; k++) {
            if (!hot[k]) continue;
            for (uint32_t i = 0; i < s->it[k].size; i++) list[n_hot++] = s->it[k].first + i;
        }
        st = sl_gpuidx_set_layer(&out->idx, l, list, n_hot, err);
        free(list);
    }
    if (!st) st = sl_hotcold_evaluate(p, &out->idx, &out->cost, err);
    return st;
}

sl_status sl_hotcold_solve(const sl_hotcold_problem *p, sl_hotcold_plan *out, sl_error *err)
{
    *out = (sl_hotcold_plan){0};
    sl_status st = sl_hotcold_problem_validate(p, err);
    if (st) return st;
    search s = {0};
    if ((st = build_items(p, &s, err))) return st;
    size_t n = s.n ? s.n : 1;
    ranked *r = malloc(n * sizeof *r);
    uint32_t *acc = malloc(n * sizeof *acc);
    uint8_t *hot = malloc(n), *best_hot = calloc(n, 1);
    if (!r || !acc || !hot || !best_hot) {
        st = sl_error_set(err, SL_ERR_NOMEM, "hotcold: %u items", s.n);
        goto done;
    }
    /* Scales that make mu = 1 weigh "all the GPU time the items could add" like "the whole
     * budget" (only the ratio matters; the mu grid spans both extremes). */
    double d_all = 0;
    for (uint32_t k = 0; k < s.n; k++) d_all += s.it[k].d;
    double d_scale = d_all > 0 ? 1 / d_all : 1, c_scale = s.budget > 0 ? 1 / s.budget : 1;
    double best = bound(&s, 0, 0);
    for (size_t m = 0; m < sizeof k_mu / sizeof k_mu[0] && s.n; m++) {
        rank(&s, k_mu[m], d_scale, c_scale, r);
        fill(&s, r, acc, hot);
        double t = improve(&s, r, hot);
        if (t < best) {
            best = t;
            memcpy(best_hot, hot, s.n);
        }
    }
    dual u;
    if ((st = dual_init(&u, &s, p->n_layer, r, err))) goto done;
    double *f = malloc((p->n_layer + 1) * sizeof *f);
    double lb = f ? lower_bound(&u, f) : 0; /* 0: no memory for the bound, none claimed */
    free(f);
    dual_free(&u);
    if (!p->greedy_only && s.n <= MAX_BNB_ITEMS && best > lb * (1 + k_proven_gap)) {
        rank(&s, INFINITY, d_scale, c_scale, r); /* a/c: the bound's scan order */
        for (uint32_t k = 0; k < s.n; k++) acc[k] = r[k].i;
        memset(hot, 0, s.n);
        bnb b = {&s, acc, hot, best_hot, best, 0, false};
        branch(&b, 0, 0, 0, 0);
        best = b.best;
        if (!b.cut) lb = best; /* searched to the end: optimal */
    }
    st = to_plan(p, &s, best_hot, out, err);
    if (!st) out->lower_bound_s = fmin(lb, out->cost.bound_s);
    if (st) sl_hotcold_plan_free(out);
done:
    free(r);
    free(acc);
    free(hot);
    free(best_hot);
    free(s.it);
    return st;
}

void sl_hotcold_plan_free(sl_hotcold_plan *plan)
{
    if (!plan) return;
    sl_gpuidx_free(&plan->idx);
    *plan = (sl_hotcold_plan){0};
}
