/* scheduler/moe/expert_ffn.c: see expert_ffn.h. */
#include "scheduler/moe/expert_ffn.h"

#include <stdatomic.h>
#include <string.h>

size_t sl__expert_work_bytes(const sl_moe_layer *L, int64_t m)
{
    const size_t wg = sl_cpu_matvec_work_bytes(L->type_gate, L->n_embd, m);
    const size_t wu = sl_cpu_matvec_work_bytes(L->type_up, L->n_embd, m);
    const size_t wd = sl_cpu_matvec_work_bytes(L->type_down, L->n_ff, m);
    if (!wg || !wu || !wd) return 0;
    size_t b = wg > wu ? wg : wu;
    return b > wd ? b : wd;
}

/* y[r][:] += b[:] over m rows of dim (no-op without a bias). */
static void add_bias(float *y, const float *b, int64_t m, int64_t dim)
{
    if (!b) return;
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < dim; j++) y[r * dim + j] += b[j];
}

/* g = act(g + bg, u + bu) over m rows of expert e (no bias where L has none). */
static sl_status bias_act(const sl_cpu_ops *ops, const sl_moe_layer *L, int32_t e, int64_t m,
                          float *g, float *u, sl_error *err)
{
    const int64_t F = sl_moe_expert_ff(L, e), at = sl_moe_expert_ff_at(L, e);
    if (!F) return SL_OK;
    add_bias(g, L->gate_b ? L->gate_b + at : NULL, m, F);
    add_bias(u, L->up_b ? L->up_b + at : NULL, m, F);
    if (L->act == SL_MOE_SILU) return sl_cpu_swiglu(ops, g, u, g, F * m, err);
    if (L->act == SL_MOE_SWIGLU_OAI)
        return sl_cpu_swiglu_oai(ops, g, u, g, F * m, SL_OAI_ALPHA, SL_OAI_LIMIT, err);
    return sl_cpu_geglu(ops, g, u, g, F * m, SL_GELU_TANH, err);
}

sl_status sl__expert_gate_up(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                             sl_cpu_pool *pool, const sl_moe_layer *L, int32_t e,
                             const void *wg, const void *wu, const float *x, int64_t m,
                             float *g, float *u, void *work, size_t work_cap, sl_error *err)
{
    const int64_t E = L->n_embd, F = sl_moe_expert_ff(L, e);
    sl_status st;
    if (!F) return SL_OK; /* an empty part: nothing to gate */
    if (L->type_gate == L->type_up && !mv->f32_act) {
        st = sl_cpu_matvec_quant_act(mv, L->type_gate, x, E, m, work, work_cap, err);
        if (!st) st = sl_cpu_matvec_q(mv, pool, L->type_gate, wg, F, E, work, m, g, err);
        if (!st) st = sl_cpu_matvec_q(mv, pool, L->type_up, wu, F, E, work, m, u, err);
    } else {
        st = sl_cpu_matvec(mv, pool, L->type_gate, wg, F, E, x, m, g, work, work_cap, err);
        if (!st) st = sl_cpu_matvec(mv, pool, L->type_up, wu, F, E, x, m, u, work, work_cap, err);
    }
    if (st) return st;
    return bias_act(ops, L, e, m, g, u, err);
}

/* SL_ERR_INVALID unless 1 <= k <= SL_CPU_SPLIT_MAX_PARTS / 2 (2 parts per expert fit). */
static sl_status check_token_k(const char *stage, int k, sl_error *err)
{
    if (k >= 1 && 2 * k <= SL_CPU_SPLIT_MAX_PARTS) return SL_OK;
    return sl_error_set(err, SL_ERR_INVALID, "expert %s of one token: k = %d is not in [1, %d]",
                        stage, k, SL_CPU_SPLIT_MAX_PARTS / 2);
}

sl_status sl__expert_gate_up_token(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                                   sl_cpu_pool *pool, const sl_moe_layer *L,
                                   const int32_t *experts, int k, const float *x, float *g,
                                   float *u, void *work, size_t work_cap, sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff;
    sl_status st = check_token_k("gate/up", k, err);
    if (st) return st;
    sl_cpu_matvec_part parts[SL_CPU_SPLIT_MAX_PARTS];
    int n_parts = 0;
    for (int i = 0; i < k; i++) { /* rows at stride n_ff; empty parts (width 0) left out */
        const int32_t e = experts[i];
        const int64_t Fe = sl_moe_expert_ff(L, e);
        if (!Fe) continue;
        parts[n_parts++] = (sl_cpu_matvec_part){.type = L->type_gate, .w = L->gate[e],
                                                .rows = Fe, .y = g + i * F};
        parts[n_parts++] = (sl_cpu_matvec_part){.type = L->type_up, .w = L->up[e], .rows = Fe,
                                                .y = u + i * F};
    }
    st = n_parts ? sl_cpu_matvec_multi(mv, pool, parts, n_parts, E, x, work, work_cap, err)
                 : SL_OK;
    for (int i = 0; !st && i < k; i++)
        st = bias_act(ops, L, experts[i], 1, g + i * F, u + i * F, err);
    return st;
}

sl_status sl__expert_down_token(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                const sl_moe_layer *L, const int32_t *experts, int k,
                                const float *g, float *d, void *work, size_t work_cap,
                                sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff;
    sl_status st = check_token_k("down", k, err);
    if (st) return st;
    for (int i = 0; i < k; i++) {
        if (sl_moe_expert_ff(L, experts[i]) == F) continue;
        /* a part of a hot/cold split: widths differ per expert, a multi call has one */
        for (int j = 0; !st && j < k; j++)
            st = sl__expert_down(mv, pool, L, experts[j], L->down[experts[j]], g + j * F, 1,
                                 d + j * E, work, work_cap, err);
        return st;
    }
    sl_cpu_matvec_part parts[SL_CPU_SPLIT_MAX_PARTS];
    for (int i = 0; i < k; i++)
        parts[i] = (sl_cpu_matvec_part){.type = L->type_down, .w = L->down[experts[i]],
                                        .rows = E, .y = d + i * E, .x = g + i * F};
    st = sl_cpu_matvec_multi(mv, pool, parts, k, F, NULL, work, work_cap, err);
    for (int i = 0; !st && i < k; i++) {
        const int32_t e = experts[i];
        add_bias(d + i * E, L->down_b ? L->down_b + (int64_t)e * E : NULL, 1, E);
    }
    return st;
}

sl_status sl__expert_down(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                          const sl_moe_layer *L, int32_t e, const void *wd, const float *g,
                          int64_t m, float *d, void *work, size_t work_cap, sl_error *err)
{
    const int64_t F = sl_moe_expert_ff(L, e);
    sl_status st = SL_OK;
    if (F) st = sl_cpu_matvec(mv, pool, L->type_down, wd, L->n_embd, F, g, m, d, work, work_cap,
                              err);
    else memset(d, 0, (size_t)(m * L->n_embd) * sizeof *d); /* an empty part: its bias alone */
    if (!st) add_bias(d, L->down_b ? L->down_b + (int64_t)e * L->n_embd : NULL, m, L->n_embd);
    return st;
}

/* The grouped calls hand out their row chunks in the order of grp[]: the groups go in tiers of
 * falling size (>= 64 rows, >= 16, >= 4, the rest; in expert order within a tier), so the
 * chunks left when a thread runs dry are small ones and the other does not wait long on a
 * big group's chunk (a chunk's cost grows with its group's tokens; prefill groups range from
 * 1 to ~400). Each group writes its own rows: the order changes no result. */
enum { N_TIERS = 4 };

static int tier(int64_t m)
{
    return m >= 64 ? 0 : m >= 16 ? 1 : m >= 4 ? 2 : 3;
}

sl_status sl__expert_gate_up_groups(const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool,
                                    const sl_moe_layer *L, const int32_t *experts,
                                    const int64_t *m, int64_t n_groups, const void *xq, float *g,
                                    float *u, sl_cpu_matvec_group *grp, sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff;
    if (L->type_gate != L->type_up || mv->f32_act || L->ff_at)
        return sl_error_set(err, SL_ERR_INVALID, "expert gate/up groups: gate type %u != up type "
                            "%u, f32_act mode (%d) or experts of their own widths (ff_at %s)",
                            L->type_gate, L->type_up, mv->f32_act, L->ff_at ? "set" : "NULL");
    const size_t arb = sl_cpu_matvec_work_bytes(L->type_gate, E, 1);
    int64_t k = 0;
    for (int p = 0; p < N_TIERS; p++)
        for (int64_t i = 0, off = 0; i < n_groups; off += m[i++]) {
            if (tier(m[i]) != p) continue;
            const int32_t e = experts[i];
            const char *x = (const char *)xq + (size_t)off * arb;
            grp[k++] = (sl_cpu_matvec_group){.w = L->gate[e], .xq = x, .n_batch = m[i],
                                             .y = g + off * F};
            grp[k++] = (sl_cpu_matvec_group){.w = L->up[e], .xq = x, .n_batch = m[i],
                                             .y = u + off * F};
        }
    return sl_cpu_matvec_groups_q(mv, pool, L->type_gate, F, E, grp, 2 * n_groups, err);
}

/* The activation and the down stage's quantization of rows [r0, r1) of the groups, on one
 * thread (rows are independent: bias_act is elementwise, a row is quantized alone). */
typedef struct act_job {
    const sl_cpu_ops *ops;
    const sl_cpu_matvec_ctx *mv;
    const sl_moe_layer *L;
    const int32_t *experts;
    const int64_t *m;
    float *g, *u;
    char *gq;
    size_t arb, gq_bytes;
    _Atomic sl_status st; /* the first failure (SL_OK: none) */
} act_job;

static void act_chunk(void *ctx, int64_t r0, int64_t r1, int thread)
{
    (void)thread;
    act_job *j = ctx;
    const int64_t F = j->L->n_ff;
    int64_t i = 0, off = 0; /* the group holding row r0, and its first row */
    while (off + j->m[i] <= r0) off += j->m[i++];
    sl_error e;
    sl_error_clear(&e);
    for (int64_t r = r0; r < r1; off += j->m[i++]) {
        const int64_t hi = off + j->m[i] < r1 ? off + j->m[i] : r1;
        sl_status st = bias_act(j->ops, j->L, j->experts[i], hi - r, j->g + r * F, j->u + r * F,
                                &e);
        if (!st)
            st = sl_cpu_matvec_quant_act(j->mv, j->L->type_down, j->g + r * F, F, hi - r,
                                         j->gq + (size_t)r * j->arb,
                                         j->gq_bytes - (size_t)r * j->arb, &e);
        if (st) {
            sl_status ok = SL_OK;
            atomic_compare_exchange_strong(&j->st, &ok, st);
            return;
        }
        r = hi;
    }
}

sl_status sl__expert_down_groups(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                                 sl_cpu_pool *pool, const sl_moe_layer *L, const int32_t *experts,
                                 const int64_t *m, int64_t n_groups, float *g, float *u,
                                 void *gq, size_t gq_bytes, float *d, sl_cpu_matvec_group *grp,
                                 sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff;
    if (L->ff_at)
        return sl_error_set(err, SL_ERR_INVALID, "expert down groups: experts of their own widths "
                            "(ff_at set) take sl__expert_down");
    int64_t rows = 0;
    for (int64_t i = 0; i < n_groups; i++) rows += m[i];
    if (!rows) return SL_OK;
    const size_t arb = sl_cpu_matvec_work_bytes(L->type_down, F, 1);
    if (!arb || gq_bytes / arb < (size_t)rows)
        return sl_error_set(err, SL_ERR_INVALID, "expert down groups: gq_bytes = %zu < %lld rows "
                            "of %zu", gq_bytes, (long long)rows, arb);
    act_job aj = {.ops = ops, .mv = mv, .L = L, .experts = experts, .m = m, .g = g, .u = u,
                  .gq = gq, .arb = arb, .gq_bytes = gq_bytes, .st = SL_OK};
    /* chunks of >= 16 rows (a few us each), several a thread (a slab's 1024 rows: 32 at two
     * threads), so the call's ragged end is short */
    const int64_t parts = 16 * (int64_t)sl_cpu_pool_threads(pool);
    int64_t grain = (rows + parts - 1) / parts;
    if (grain < 16) grain = 16;
    sl_status st = sl_cpu_pool_parallel_for(pool, rows, grain, act_chunk, &aj, err);
    if (!st && (st = atomic_load(&aj.st)))
        return sl_error_set(err, st, "expert down groups: activation or quantization of %lld rows "
                            "of %lld failed", (long long)rows, (long long)F);
    if (st) return st;
    int64_t k = 0, off = 0;
    for (int p = 0; p < N_TIERS; p++)
        for (int64_t i = 0, o = 0; i < n_groups; o += m[i++])
            if (tier(m[i]) == p)
                grp[k++] = (sl_cpu_matvec_group){.w = L->down[experts[i]],
                                                 .xq = (const char *)gq + (size_t)o * arb,
                                                 .n_batch = m[i], .y = d + o * E};
    st = sl_cpu_matvec_groups_q(mv, pool, L->type_down, E, F, grp, n_groups, err);
    for (int64_t i = 0; !st && i < n_groups; off += m[i++])
        add_bias(d + off * E, L->down_b ? L->down_b + (int64_t)experts[i] * E : NULL, m[i], E);
    return st;
}
