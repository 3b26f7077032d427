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

/* moe_cpu.c: the CPU scheduler s (sl_moe_cpu_create) computing a's experts with its batched
 * paths (a layer's gate/up in one pool call, its downs in another) but keeping each result:
 * rows[i] [n_embd] = expert a[i].expert's FFN of x[a[i].token], unweighted, the bits
 * sl_moe_exec would add into out. For schedulers that sum themselves (fetch.c). Arguments as
 * sl_moe_exec's, already checked. */
sl_status sl__moe_cpu_rows(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                           int64_t n_assign, const float *x, int64_t n_tok, float *rows,
                           sl_error *err);

#endif
