/* scheduler/moe: the one interface through which the engine runs a layer's routed experts.
 *
 * Why an interface: where each expert runs (CPU, resident on the GPU, fetched over PCIe) is the
 * scheduler's decision, not the forward pass's. The forward pass routes tokens, hands this
 * module the layer's (token, expert, weight) assignments and the normalised hidden rows, and
 * gets back the weighted sum of expert FFN outputs. A scheduler is an opaque object with a
 * small vtable (moe_impl.h); the CPU one (sl_moe_cpu_create, moe_cpu.c) groups tokens by expert
 * and runs kernels/cpu matvecs; the fetching one (scheduler/moe/fetch.h: copies experts to the
 * device, computes there, caches hot experts) replaces it without touching the forward.
 *
 * Contract of sl_moe_exec (every implementation):
 *   out[t][:] = sum over assignments a with a.token == t of
 *               a.weight * (down_e( act(gate_e(x[t]) + bg_e, up_e(x[t]) + bu_e) ) + bd_e),
 *   e = a.expert, act(g, u) = act(g) * u (or the clamped form of SL_MOE_SWIGLU_OAI), the
 *   biases b*_e zero when the layer has none,
 *   computed for every t in [0, n_tok) (rows without assignments become zero). x and out are
 *   host memory, [n_tok][n_embd] floats, and must not overlap. Per (token, expert) the result
 *   is independent of which other tokens are in the call (batch-invariant) — the CPU scheduler
 *   relies on the matvec kernels' column independence for this — so prefill and decode agree.
 *   Assignments may come in any order; one token's expert outputs are summed in ascending
 *   expert index (a fixed order that does not depend on the batch or the router's ranking).
 * Thread safety: a scheduler is used by one thread at a time (it owns scratch buffers).
 */
#ifndef SL_SCHEDULER_MOE_H
#define SL_SCHEDULER_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "base/status.h"
#include "scheduler/policy/neuron_stats.h"

typedef enum sl_moe_act {
    SL_MOE_SILU = 0,      /* SwiGLU: silu(gate) * up (llama, mixtral, qwen*, olmoe) */
    SL_MOE_GELU_TANH = 1, /* GeGLU with the tanh GELU */
    SL_MOE_SWIGLU_OAI = 2, /* gpt-oss's clamped SwiGLU (kernels/ref/ops.h sl_ref_swiglu_oai) */
    SL_MOE_RELU = 3,      /* relu(gate) * up: ReLU-fied dense llama FFNs (ReluLLaMA, ProSparse;
                           * runtime/engine/arch.c), never routed experts */
} sl_moe_act;

/* One layer's experts. Matrices in ggml layout (kernels/ref/matvec.h): gate/up [n_ff][n_embd]
 * (rows of n_embd), down [n_embd][n_ff]. Expert e's matrices start at gate[e], up[e], down[e]
 * (host-dereferenceable: host pool, mmap view, or a sim device region). on_device[e] (may be
 * NULL) says the expert's weights are device-resident, which only stats and future GPU
 * schedulers care about. Biases (gpt-oss; NULL: none, each independently): F32, expert e's
 * at gate_b + e * n_ff, up_b + e * n_ff, down_b + e * n_embd (ggml's [n_ff, n_expert] and
 * [n_embd, n_expert] tensors), host-dereferenceable like the matrices. */
typedef struct sl_moe_layer {
    int32_t layer;                  /* for messages */
    int32_t n_expert;
    int64_t n_embd, n_ff;
    uint32_t type_gate, type_up, type_down;   /* ggml type codes */
    const void *const *gate;        /* [n_expert] */
    const void *const *up;          /* [n_expert] */
    const void *const *down;        /* [n_expert] */
    const bool *on_device;          /* [n_expert] or NULL */
    const float *gate_b, *up_b, *down_b; /* [n_expert][n_ff], [n_expert][n_ff],
                                            [n_expert][n_embd], or NULL */
    sl_moe_act act;
    /* NULL: every expert has n_ff neurons. Else the layer is one part of a hot/cold split
     * (scheduler/moe/ffn_split.h): expert e has the ff_at[e + 1] - ff_at[e] (>= 0) neurons of its
     * part, n_ff is the widest, and gate_b / up_b hold expert e's entries from ff_at[e] on
     * ([n_expert + 1], ff_at[0] == 0, non-decreasing). An expert of width 0 yields its down
     * bias (or zero). The CPU scheduler runs such a part (the fetching one hands it to its
     * own CPU scheduler: fetch.h); the cuda executor runs a hot part itself (kernels/cuda/gemv.h sl_cuda_gemv_expert_parts). */
    const int64_t *ff_at;
} sl_moe_layer;

/* Expert e's width (neurons) and the index of its first bias entry, in L. */
static inline int64_t sl_moe_expert_ff(const sl_moe_layer *L, int32_t e)
{
    return L->ff_at ? L->ff_at[e + 1] - L->ff_at[e] : L->n_ff;
}
static inline int64_t sl_moe_expert_ff_at(const sl_moe_layer *L, int32_t e)
{
    return L->ff_at ? L->ff_at[e] : (int64_t)e * L->n_ff;
}

typedef struct sl_moe_assign {
    int32_t token;                  /* row of x / out, 0 <= token < n_tok */
    int32_t expert;                 /* 0 <= expert < n_expert */
    float weight;                   /* router weight, finite */
} sl_moe_assign;

typedef struct sl_moe_stats {
    uint64_t calls_cpu, calls_gpu;  /* (token, expert) evaluations by where the weights were */
    uint64_t batches;               /* expert groups run (one per distinct expert per call) */
    /* the CPU expert path: weight bytes of the experts it computed (each distinct expert of a
     * call once: what it must read) and its wall time, so bytes / time is its read rate */
    uint64_t cpu_bytes, cpu_ns;
    /* a scheduler that moves expert weights (0 for one that does not): experts copied to the
     * device, misses and failures computed on the CPU instead, cache lookups and hits, copies
     * and their bytes, the share of copy time hidden under compute, and its MoE layer calls by
     * the mode each ran in (cpu, post, full) */
    uint64_t fetches, fallbacks, cache_lookups, cache_hits, copies, copy_bytes;
    double copy_overlap_pct;
    uint64_t layer_calls_cpu, layer_calls_post, layer_calls_full;
} sl_moe_stats;

/* What a scheduler can do (sl_moe_caps): the engine asks this, never the scheduler's name. */
enum {
    SL_MOE_CAP_HOST_ONLY = 1u << 0,    /* computes on the host and never calls the device, so
                                          it may run in a host function ordered on a stream */
    SL_MOE_CAP_NEURON_STATS = 1u << 1, /* records per-expert neuron statistics */
    SL_MOE_CAP_TRACE = 1u << 2,        /* records a trace (sl_moe_trace_write) */
};

typedef struct sl_moe_sched sl_moe_sched;

/* The CPU scheduler. ops/mv are copied; pool is borrowed (may be NULL: calling thread only)
 * and must outlive the scheduler. Scratch grows on demand. */
sl_status sl_moe_cpu_create(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                            sl_cpu_pool *pool, sl_moe_sched **out, sl_error *err);

/* Runs the contract above. SL_ERR_INVALID naming the argument (bad counts, an assignment's
 * token or expert out of range, NULL matrices); kernel errors are passed through, prefixed
 * with the layer and expert. */
sl_status sl_moe_exec(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                      int64_t n_assign, const float *x, int64_t n_tok, float *out,
                      sl_error *err);

/* The contract's terms kept apart: rows[i] [n_embd] = expert a[i].expert's FFN of
 * x[a[i].token] (its down bias included), unweighted: the bits sl_moe_exec adds into out.
 * Arguments as sl_moe_exec's; SL_ERR_UNSUPPORTED for a scheduler other than the CPU one (it
 * runs them with its batched paths and counts them in its stats, wall time included). For
 * callers that sum elsewhere: the fetching scheduler, the engine's device-resident hot experts
 * (sl_moe_rows_join). */
sl_status sl_moe_exec_rows(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                           int64_t n_assign, const float *x, int64_t n_tok, float *rows,
                           sl_error *err);
/* sl_moe_exec_rows over the slots of a [n_tok][k] id list whose expert's mask byte is set
 * (want true) or clear (false): rows [n_tok * k][n_embd], slot s's row where it is taken, +0
 * in the others' (and in slots whose id is outside [0, n_expert)). scratch: room for n_tok * k
 * assignments. The two sides of a layer's experts split between a device and the host
 * (runtime/engine/hot.h). SL_ERR_INVALID for NULL arguments or 2^24 slots or more. */
sl_status sl_moe_exec_slots(sl_moe_sched *s, const sl_moe_layer *L, const uint8_t *mask,
                            bool want, const int32_t *idx, int64_t n_tok, int32_t k,
                            const float *x, float *rows, sl_moe_assign *scratch, sl_error *err);
/* The contract's sum over per-slot rows: for t < n_tok, out[t][:] = sum over the k slots
 * s = t * k + i in ascending idx[s] of w[s] * (ra[s][:] + rb[s][:]) (rb NULL: ra alone),
 * each product and sum rounded (never an FMA), from +0: the bits sl_moe_exec gives when
 * every slot's row is in ra or rb and the other holds +0 or -0 there. idx, w [n_tok][k];
 * ra, rb [n_tok * k][dim]; 1 <= k <= SL_MOE_JOIN_MAX_K (the caller's check). Where a slot's
 * expert is repeated, the lower slot first. */
enum { SL_MOE_JOIN_MAX_K = 64 };
void sl_moe_rows_join(const float *ra, const float *rb, const int32_t *idx, const float *w,
                      int64_t n_tok, int32_t k, int64_t dim, float *out);

/* Counters since creation. */
void sl_moe_stats_get(const sl_moe_sched *s, sl_moe_stats *out);
/* Per-expert neuron statistics (the profile of hot/cold placement for routed experts): from now
 * on the CPU scheduler adds each expert group's activations act(g) * u to
 * stats[layer * n_expert + expert] (borrowed, NULL: off; each of the layer's n_ff); the
 * fetching scheduler records none. */
void sl_moe_set_neuron_stats(sl_moe_sched *s, sl_neuron_stats *stats, int32_t n_layer,
                             int32_t n_expert);
/* "cpu", ... (for messages and reports) */
const char *sl_moe_name(const sl_moe_sched *s);
/* The SL_MOE_CAP_* bits of s (0 for NULL). */
unsigned sl_moe_caps(const sl_moe_sched *s);
/* Writes s's trace (Chrome / Perfetto JSON) to path; SL_ERR_INVALID when s records none. */
sl_status sl_moe_trace_write(const sl_moe_sched *s, const char *path, sl_error *err);
/* Forgets every copy of expert weights the scheduler keeps (the fetch scheduler's expert
 * cache, pinned entries included: they are refilled on next use). Called after a live reload
 * (scheduler/policy/swap.h) changed weights; NULL allowed. */
void sl_moe_invalidate(sl_moe_sched *s);
/* NULL allowed. */
void sl_moe_destroy(sl_moe_sched *s);

#endif
