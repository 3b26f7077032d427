/* scheduler/moe/moe.c: argument checks and dispatch shared by every MoE scheduler (moe_impl.h). */
#include <stddef.h>

#include "scheduler/moe/moe_impl.h"

sl_status sl_moe_exec(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                      int64_t n_assign, const float *x, int64_t n_tok, float *out,
                      sl_error *err)
{
    if (!s || !L) return sl_error_set(err, SL_ERR_INVALID, "moe: NULL scheduler or layer");
    if (n_tok < 0 || n_assign < 0)
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: negative n_tok %lld or n_assign %lld",
                            L->layer, (long long)n_tok, (long long)n_assign);
    if (n_tok == 0) return SL_OK;
    if (!x || !out || (n_assign && !a))
        return sl_error_set(err, SL_ERR_INVALID, "moe layer %d: NULL x, out or assignments",
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
    return s->vt->exec(s, L, a, n_assign, x, n_tok, out, err);
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
