/* scheduler/moe/moe.c: argument checks and dispatch shared by every MoE scheduler (moe_impl.h). */
#include <stddef.h>
#include <string.h>

#include "scheduler/moe/moe_impl.h"

/* sl_moe_exec's and sl_moe_exec_rows' argument checks (out: out or rows) */
static sl_status check_call(const sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                            int64_t n_assign, const float *x, int64_t n_tok, const float *out,
                            sl_error *err)
{
    if (!s || !L) return sl_error_set(err, SL_ERR_INVALID, "moe: NULL scheduler or layer");
    if (n_tok < 0 || n_assign < 0)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: negative n_tok %lld or n_assign %lld",
                            L->layer, (long long)n_tok, (long long)n_assign);
    if (n_tok == 0) return SL_OK;
    if (!x || !out || (n_assign && !a))
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: NULL x, out (rows) or "
                            "assignments",
                            L->layer);
    if (L->n_expert < 1 || L->n_embd < 1 || L->n_ff < 1 || !L->gate || !L->up || !L->down)
        return sl_error_set(err, SL_ERR_INVALID,
                            "moe layer %d: bad layer description (n_expert %d, n_embd %lld, "
                            "n_ff %lld)",
                            L->layer, L->n_expert, (long long)L->n_embd, (long long)L->n_ff);
    for (int32_t e = 0; L->ff_at && e < L->n_expert; e++) /* one part of a split (moe.h) */
        if (L->ff_at[0] || sl_moe_expert_ff(L, e) < 0 || sl_moe_expert_ff(L, e) > L->n_ff)
            return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: expert %d of a hot/cold "
                                "part has %lld neurons (ff_at from %lld), outside [0, n_ff %lld]",
                                L->layer, e, (long long)sl_moe_expert_ff(L, e),
                                (long long)L->ff_at[0], (long long)L->n_ff);
    for (int64_t i = 0; i < n_assign; i++) {
        if (a[i].token < 0 || a[i].token >= n_tok)
            return sl_error_set(err, SL_ERR_INVALID,
                                "moe layer %d: assignment %lld: token %d outside [0, %lld)",
                                L->layer, (long long)i, a[i].token, (long long)n_tok);
        if (a[i].expert < 0 || a[i].expert >= L->n_expert)
            return sl_error_set(err, SL_ERR_INVALID,
                                "moe layer %d: assignment %lld: expert %d outside [0, %d)",
                                L->layer, (long long)i, a[i].expert, L->n_expert);
        const int32_t e = a[i].expert;
        if (!L->gate[e] || !L->up[e] || !L->down[e])
            return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: expert %d has no weights",
                                L->layer, e);
    }
    return SL_OK;
}

sl_status sl_moe_exec(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                      int64_t n_assign, const float *x, int64_t n_tok, float *out,
                      sl_error *err)
{
    const sl_status st = check_call(s, L, a, n_assign, x, n_tok, out, err);
    if (st || n_tok == 0) return st;
    return s->vt->exec(s, L, a, n_assign, x, n_tok, out, err);
}

sl_status sl_moe_exec_rows(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                           int64_t n_assign, const float *x, int64_t n_tok, float *rows,
                           sl_error *err)
{
    const sl_status st = check_call(s, L, a, n_assign, x, n_tok, rows, err);
    if (st || n_tok == 0) return st;
    if (!s->vt->rows)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "moe layer %d: the %s scheduler keeps no "
                            "rows (a CPU scheduler does)", L->layer, s->vt->name);
    return s->vt->rows(s, L, a, n_assign, x, n_tok, rows, err);
}

sl_status sl_moe_exec_slots(sl_moe_sched *s, const sl_moe_layer *L, const uint8_t *mask,
                            bool want, const int32_t *idx, int64_t n_tok, int32_t k,
                            const float *x, float *rows, sl_moe_assign *scratch, sl_error *err)
{
    if (!L || !mask || !idx || !rows || !scratch || k < 1 || n_tok < 0)
        return sl_error_set(err, SL_ERR_INVALID, "moe slots: NULL argument or k %d < 1", k);
    const int64_t E = L->n_embd, S = n_tok * k;
    if (S >= (int64_t)1 << 24)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: %lld slots", L->layer,
                            (long long)S);
    /* rows are unweighted: an assignment's weight carries its slot (exact below 2^24) */
    int64_t m = 0;
    for (int64_t i = 0; i < S; i++)
        if (idx[i] >= 0 && idx[i] < L->n_expert && (mask[idx[i]] != 0) == want)
            scratch[m++] = (sl_moe_assign){(int32_t)(i / k), idx[i], (float)i};
    sl_status st = m ? sl_moe_exec_rows(s, L, scratch, m, x, n_tok, rows, err) : SL_OK;
    if (st) return st;
    /* row r of the m results belongs to slot scratch[r]'s (>= r): moved there last first, so
     * none is overwritten before it is read; the rows between are zeroed */
    int64_t next = S;
    for (int64_t r = m - 1; r >= -1; r--) {
        const int64_t slot = r >= 0 ? (int64_t)scratch[r].weight : -1;
        for (int64_t z = slot + 1; z < next; z++) memset(rows + z * E, 0, (size_t)E * sizeof *rows);
        if (r < 0) break;
        if (slot != r) memmove(rows + slot * E, rows + r * E, (size_t)E * sizeof *rows);
        next = slot;
    }
    return SL_OK;
}

void sl_moe_set_neuron_stats(sl_moe_sched *s, sl_neuron_stats *stats, int32_t n_layer,
                             int32_t n_expert)
{
    if (!s) return;
    s->nstats = stats;
    s->nstats_layers = stats ? n_layer : 0;
    s->nstats_experts = stats ? n_expert : 0;
}

void sl_moe_stats_get(const sl_moe_sched *s, sl_moe_stats *out)
{
    if (!out) return;
    if (!s) {
        *out = (sl_moe_stats){0};
        return;
    }
    *out = s->stats;
    if (s->vt->stats) s->vt->stats(s, out);
}

unsigned sl_moe_caps(const sl_moe_sched *s)
{
    return s ? s->vt->caps : 0;
}

sl_status sl_moe_trace_write(const sl_moe_sched *s, const char *path, sl_error *err)
{
    if (!s || !s->vt->trace_write)
        return sl_error_set(err, SL_ERR_INVALID, "the %s MoE scheduler records no trace (use a "
                            "fetch mode: post, full or auto)", sl_moe_name(s));
    if (!path) return sl_error_set(err, SL_ERR_INVALID, "trace: NULL path");
    return s->vt->trace_write(s, path, err);
}

const char *sl_moe_name(const sl_moe_sched *s)
{
    return s ? s->vt->name : "none";
}

void sl_moe_invalidate(sl_moe_sched *s)
{
    if (s && s->vt->invalidate) s->vt->invalidate(s);
}

void sl_moe_destroy(sl_moe_sched *s)
{
    if (s) s->vt->destroy(s);
}
