/* scheduler/moe/moe_impl.h: what a MoE scheduler implementation provides (private to scheduler/).
 * sl_moe_exec/stats/destroy in moe.c check arguments once and dispatch through this table, so
 * each implementation sees only validated input. */
#ifndef SL_SCHEDULER_MOE_IMPL_H
#define SL_SCHEDULER_MOE_IMPL_H

#include "scheduler/moe/moe.h"

typedef struct sl__moe_vtable {
    const char *name;
    sl_status (*exec)(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                      int64_t n_assign, const float *x, int64_t n_tok, float *out,
                      sl_error *err);
    void (*destroy)(sl_moe_sched *s);
    /* forgets every cached copy of expert weights (NULL: caches none) */
    void (*invalidate)(sl_moe_sched *s);
    unsigned caps; /* SL_MOE_CAP_* */
    /* fills the fields of *out beyond the header's counters (NULL: none) */
    void (*stats)(const sl_moe_sched *s, sl_moe_stats *out);
    /* sl_moe_exec_rows, arguments checked (NULL: keeps no rows) */
    sl_status (*rows)(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                      int64_t n_assign, const float *x, int64_t n_tok, float *rows,
                      sl_error *err);
    /* writes the trace (NULL: records none) */
    sl_status (*trace_write)(const sl_moe_sched *s, const char *path, sl_error *err);
} sl__moe_vtable;

/* Every implementation's struct starts with this header. */
struct sl_moe_sched {
    const sl__moe_vtable *vt;
    sl_moe_stats stats;
    /* sl_moe_set_neuron_stats: [n_layer][n_expert] records, or NULL */
    sl_neuron_stats *nstats;
    int32_t nstats_layers, nstats_experts;
};

#endif
