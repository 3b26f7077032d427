/* runtime/dx: the executor the forward pass runs a layer's steps through — one interface,
 * three places the steps can run (private to runtime/).
 *
 * Why: the layer is written once (forward.c) against this interface; which memory its buffers
 * live in and which kernels compute is the executor's business:
 *   host  (sl__dx_host_create)  host pointers, kernels/cpu on the calling thread (and pool);
 *   sim   (sl__dx_sim_create)   pointers into sim device regions (host-addressable), the same
 *                               CPU kernels — but first the device stream is drained, so every
 *                               step sees the copies enqueued before it, as a GPU kernel on
 *                               that stream would; CI runs the whole device path this way and
 *                               its logits are bit-identical to the host executor's;
 *   cuda  (sl__dx_cuda_create)  device pointers, kernels/cuda enqueued on the model's stream,
 *                               nothing synchronises (the forward pass syncs when the host
 *                               needs a result: routing for CPU experts, logits).
 * Every pointer argument is in the executor's memory except where marked "host".
 *
 * Numerics: host and sim are the CPU kernels (Q8 activations for quantized matmuls unless
 * SLUICE_ACT_F32); cuda's GEMV uses Q8 activations for sl_cuda_gemv_q8_act's types and F32
 * for the others
 * (all F32 under SLUICE_ACT_F32; kernels/cuda/gemv.h) — its multi-matrix launches
 * (mm_heads, the grouped matmuls of norm_mm / mm_glu / mm_router: kernels/cuda/gemv_multi.h)
 * F32 for every type — and rounds activations to
 * F16 in the cuBLAS GEMM used for batches of >= SL__DX_GEMM_MIN_BATCH tokens with quantized
 * weights — so cuda logits agree with the others within kernel tolerance, not bit for bit.
 *
 * MoE: `moe` computes a layer's routed experts from idx/w in executor memory ([n][k]); host and
 * sim hand them to the context's scheduler (scheduler/moe/moe.h) — on sim the experts' device
 * pointers are host-addressable, so the scheduler computes them where they are — cuda runs
 * batched-expert GEMVs (weights must be device-resident) and sl_cuda_moe_combine.
 * An executor is used by one thread at a time (its context's).
 */
#ifndef SL_RUNTIME_DX_H
#define SL_RUNTIME_DX_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "kernels/ref/ops.h"
#include "base/device/device.h"
#include "scheduler/weights.h"
#include "scheduler/moe/moe.h"

enum { SL__DX_GEMM_MIN_BATCH = 8 };

/* b rounded up to the device allocator's alignment (256, as cudaMalloc's): buffers carved from
 * one block start where a separately allocated one would, so vectorized loads stay aligned. */
static inline uint64_t sl__dx_up256(uint64_t b)
{
    return (b + 255) & ~(uint64_t)255;
}

/* The one layout of device buffers carved from a block: regions of bytes[0 .. n), each
 * starting 256-byte aligned (sl__dx_up256); off[i] (off may be NULL) where region i starts;
 * returns the block's bytes. */
static inline uint64_t sl__dx_regions(const uint64_t *bytes, int n, uint64_t *off)
{
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (off) off[i] = at;
        at += sl__dx_up256(bytes[i]);
    }
    return at;
}

/* What the planner may ask an executor before any exists (ggml's supports_op): a weight the
 * executor of its side cannot compute stays on the host. */
typedef enum sl__dx_op {
    SL__DX_OP_MATVEC = 0,   /* mm / mm_multi / the expert GEMVs on a weight of this type */
    SL__DX_OP_ATTN = 1,     /* attn with a head dimension of `type` (deepseek2's MLA attends
                               over latent rows of n_lora_kv + n_rot: 576 for DeepSeek-V3) */
} sl__dx_op;

/* Whether the executor of a device of `kind` runs op on weights of ggml type `type`: sim runs
 * the CPU kernels (every type the engine loads); cuda what kernels/cuda has (gemv.h).
 * Pure, thread-safe. */
bool sl__dx_supports(sl_device_kind kind, uint32_t type, sl__dx_op op);

typedef struct sl__dx sl__dx;

/* A routed-expert layer as the executor sees it: the scheduler's description (host and sim)
 * plus, for cuda, device arrays of the experts' device pointers (uploaded once) and, for the
 * hot part of experts split by neurons (L->ff_at set), a device copy of L->ff_at. */
typedef struct sl__dx_moe {
    const sl_moe_layer *L;
    const void *const *d_gate, *const *d_up, *const *d_down; /* cuda: device arrays, else NULL */
    const int64_t *d_ff_at; /* cuda and L->ff_at: [n_expert + 1], else NULL */
    sl_moe_sched *rows;     /* host and sim moe_rows: the CPU scheduler computing them */
} sl__dx_moe;

/* The per-head part of a q/k/v attention between the projections and the attention itself,
 * one fused step (qk_rope_store): q and k [n][heads][head_dim] normalised per head (q_norm,
 * k_norm: [head_dim] weights, both NULL: no norm), roped at pos (norm_after_rope: roped,
 * then normalised), then k and v stored in the caches kc, vc (dx.h kv_store) at rows pos. */
typedef struct sl__dx_qkv {
    float *q, *k;
    const float *v;
    int64_t n;
    int32_t n_head, n_head_kv, head_dim;
    const float *q_norm, *k_norm;
    float eps;
    const int32_t *pos;
    const sl_rope_params *rope;
    void *kc, *vc;
    bool f16;
    bool norm_after_rope;   /* the norms after the rope (hunyuan-moe: its graph's order) */
} sl__dx_qkv;

typedef struct sl__dx_vt {
    /* y [n][rows] = W x, x [n][cols] (W: w->data in this executor's memory) */
    sl_status (*mm)(sl__dx *, const sl_weight *w, const float *x, int64_t n, float *y,
                    sl_error *);
    /* ys[i] [n][rows_i] = ws[i] x for count (1 .. SL_CPU_SPLIT_MAX_PARTS) matrices of the
     * same x [n][cols]: the same bits as count mm calls. Optional (NULL: forward_ffn.c makes
     * the mm calls); the host executor runs a single token's group as one pool call. */
    sl_status (*mm_many)(sl__dx *, const sl_weight *const *ws, int count, const float *x,
                         int64_t n, float *const *ys, sl_error *);
    sl_status (*rms_norm)(sl__dx *, const float *x, const float *w, float *y, int64_t rows,
                          int64_t dim, float eps, sl_error *);
    sl_status (*add)(sl__dx *, const float *a, const float *b, float *y, int64_t n, sl_error *);
    /* y[r][:] += b[:] */
    sl_status (*add_rows)(sl__dx *, float *y, const float *b, int64_t rows, int64_t dim,
                          sl_error *);
    sl_status (*scale)(sl__dx *, float *x, int64_t n, float s, sl_error *);
    /* g = act(g) * u over n elements */
    sl_status (*glu)(sl__dx *, sl_moe_act act, float *g, const float *u, int64_t n, sl_error *);
    sl_status (*rope)(sl__dx *, float *x, int64_t n_tok, int32_t n_head, int32_t head_dim,
                      const int32_t *pos, const sl_rope_params *p, sl_error *);
    /* cache rows pos[t] (cache: [n_ctx][row] F32 or F16 bits) = src[t] */
    sl_status (*kv_store)(sl__dx *, void *cache, bool f16, int64_t row, const int32_t *pos,
                          int64_t n, const float *src, sl_error *);
    /* token t attends to positions [0, pos[t]] (pos in the executor's memory, as rope's and
     * kv_store's: cuda reads it on the device, so that a captured pass replays right);
     * p->n_pos is unused */
    sl_status (*attn)(sl__dx *, const float *q, const void *kc, const void *vc,
                      const sl_attn_params *p, const int32_t *pos, int64_t n, float *out,
                      sl_error *);
    sl_status (*router)(sl__dx *, const float *logits, int64_t n, const sl_router_params *p,
                        int32_t *idx, float *w, sl_error *);
    /* out [n][n_embd] = the routed experts' weighted sum for x; res (NULL: none) [n][n_embd]:
     * then res += that sum instead, the residual add of the layer in the same step (the bits
     * of an add after it; out is then scratch the step may leave unwritten) */
    sl_status (*moe)(sl__dx *, const sl__dx_moe *L, const int32_t *idx, const float *w,
                     int64_t n, int32_t k, const float *x, float *out, float *res,
                     sl_error *);
    /* A layer's device-resident experts beside the host's (hot.h): rows [n * k][n_embd] =
     * for each slot s = t * k + i with mask[idx[s]] != 0 the unweighted FFN of x[t] by expert
     * idx[s] (the row sl_moe_exec_rows gives), +0 in the other slots' rows; mask [n_expert]
     * bytes in this executor's memory. host and sim through L->rows (a CPU scheduler), cuda
     * through the expert GEMVs over the ids masked to -1, on a second stream forked from the
     * model's: the next moe_join joins it, and until then nothing but copies and host
     * functions may go on the stream (the expert scratch and rows are the side's). */
    sl_status (*moe_rows)(sl__dx *, const sl__dx_moe *L, const uint8_t *mask,
                          const int32_t *idx, int64_t n, int32_t k, const float *x, float *rows,
                          sl_error *);
    /* out [n][dim] = sl_moe_rows_join(ra, rb, idx, w, n, k, dim) (rb may be NULL); res as
     * moe's */
    sl_status (*moe_join)(sl__dx *, const float *ra, const float *rb, const int32_t *idx,
                          const float *w, int64_t n, int32_t k, int64_t dim, float *out,
                          float *res, sl_error *);
    /* Per-head matmuls (deepseek2's MLA: k_b absorbed into the query, v_b after attention),
     * one step: for h < w->ne[2], t < n, dst + t * dst_ts + h * dst_hs [rows] = W_h (src +
     * t * src_ts + h * src_hs [cols]), W_h the h-th [rows][cols] matrix of the 3-D w (strides
     * in floats; src and dst do not overlap). The bits of an mm per head on its gathered
     * input. */
    sl_status (*mm_heads)(sl__dx *, const sl_weight *w, const float *src, int64_t src_ts,
                          int64_t src_hs, float *dst, int64_t dst_ts, int64_t dst_hs, int64_t n,
                          sl_error *);
    /* dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < width: the gathers
     * and scatters of per-head slices (deepseek2's MLA); src and dst do not overlap */
    sl_status (*copy2d)(sl__dx *, float *dst, int64_t dst_stride, const float *src,
                        int64_t src_stride, int64_t rows, int64_t width, sl_error *);
    /* *r = the greedy pick over x[0..n) (kernels/ref/ops.h sl_ref_argmax; r in this
     * executor's memory, so on a GPU only r crosses to the host) */
    sl_status (*argmax)(sl__dx *, const float *x, int64_t n, sl_argmax_result *r, sl_error *);
    /* A ReLU FFN y [n][rows of wd] = Wd (relu(Wg x) * (Wu x)) that skips the neurons whose
     * gate output is <= 0 for every token (exact; g, u: [n][F] scratch, left holding the
     * activations and garbage). cnt[0] += n * F neurons, cnt[1] += those with gate <= 0,
     * cnt[2] += n * (neurons skipped). Usable only where sl__dx.sparse_ffn says so. */
    sl_status (*relu_ffn)(sl__dx *, const sl_weight *wg, const sl_weight *wu,
                          const sl_weight *wd, const float *x, int64_t n, float *g, float *u,
                          float *y, uint64_t cnt[3], sl_error *);
    /* out[t][:] += sigmoid(logit[t]) * y[t][:] */
    sl_status (*gated_add)(sl__dx *, float *out, const float *y, const float *logit, int64_t n,
                           int64_t dim, sl_error *);
    /* Fused steps (issue 32: fewer device steps per layer). Each is one step and gives the
     * bits of the plain steps it stands for, run in the order written; all executors have
     * them. */
    /* xn [n][dim] = rms_norm(x, w); then ys[i] = ws[i] xn for count matrices (mm_many;
     * count 0: the norm only): the attention norm + Q, K, V */
    sl_status (*norm_mm)(sl__dx *, const float *x, const float *w, int64_t n, int64_t dim,
                         float eps, float *xn, const sl_weight *const *ws, int count,
                         float *const *ys, sl_error *);
    /* sl__dx_qkv: q/k norm + rope + KV store */
    sl_status (*qk_rope_store)(sl__dx *, const sl__dx_qkv *a, sl_error *);
    /* tmp [n][rows] = W in; x = x + tmp; then, with norm_w, xn = rms_norm(x, norm_w): wo +
     * residual add + FFN norm, and down + residual add (norm_w NULL) */
    sl_status (*mm_add_norm)(sl__dx *, const sl_weight *w, const float *in, int64_t n,
                             float *tmp, float *x, const float *norm_w, float eps, float *xn,
                             sl_error *);
    /* logits [n][E] = W xn (+ bias [E] per row, NULL: none); then router(logits): the router
     * GEMV + top-k with its gating */
    sl_status (*mm_router)(sl__dx *, const sl_weight *w, const float *bias, const float *xn,
                           int64_t n, float *logits, const sl_router_params *p, int32_t *idx,
                           float *wts, sl_error *);
    /* g, u [n][F] = Wg xn, Wu xn (mm_many); g = act(g) * u: gate/up + the GLU */
    sl_status (*mm_glu)(sl__dx *, const sl_weight *wg, const sl_weight *wu, sl_moe_act act,
                        const float *xn, int64_t n, float *g, float *u, sl_error *);
    void (*destroy)(sl__dx *);
} sl__dx_vt;

struct sl__dx {
    const sl__dx_vt *vt;
    /* vt->relu_ffn is usable: host and sim with Q8 activations (the row- and column-listed
     * kernels it uses have no F32-activation form, so SLUICE_ACT_F32 runs ReLU FFNs dense) */
    bool sparse_ffn;
    /* counters (dx.h users read deltas): steps run or enqueued through vt (one per vt call
     * that computes; a cuda step may launch several kernels), and of those the sim
     * executor's drains of the device stream (a sim artefact: a GPU kernel waits on the
     * stream, not the host) */
    uint64_t steps, drains;
};

/* The fused steps of sl__dx_vt as their plain steps through x->vt, in order, one step each
 * (dx_fused.c): the definition of each fused op, and the host and sim executors' own. */
sl_status sl__dx_fused_norm_mm(sl__dx *x, const float *in, const float *w, int64_t n,
                               int64_t dim, float eps, float *xn, const sl_weight *const *ws,
                               int count, float *const *ys, sl_error *err);
sl_status sl__dx_fused_qk_rope_store(sl__dx *x, const sl__dx_qkv *a, sl_error *err);
sl_status sl__dx_fused_mm_add_norm(sl__dx *x, const sl_weight *w, const float *in, int64_t n,
                                   float *tmp, float *res, const float *norm_w, float eps,
                                   float *xn, sl_error *err);
sl_status sl__dx_fused_mm_router(sl__dx *x, const sl_weight *w, const float *bias,
                                 const float *xn, int64_t n, float *logits,
                                 const sl_router_params *p, int32_t *idx, float *wts,
                                 sl_error *err);
sl_status sl__dx_fused_mm_glu(sl__dx *x, const sl_weight *wg, const sl_weight *wu,
                              sl_moe_act act, const float *xn, int64_t n, float *g, float *u,
                              sl_error *err);

/* host / sim: ops, mv copied; pool and moe borrowed (outlive the executor); work_bytes of
 * matvec workspace allocated here. sim also syncs `stream` of `dev` before each step. */
sl_status sl__dx_host_create(const sl_cpu_ops *ops, const sl_cpu_matvec_ctx *mv,
                             sl_cpu_pool *pool, sl_moe_sched *moe, size_t work_bytes,
                             sl__dx **out, sl_error *err);
sl_status sl__dx_sim_create(sl_device *dev, sl_stream *stream, const sl_cpu_ops *ops,
                            const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, sl_moe_sched *moe,
                            size_t work_bytes, sl__dx **out, sl_error *err);
/* cuda: kernels on `stream` (a cuda device's); d_work / work_bytes: the caller's device
 * workspace for the GEMM (may be 0: GEMV only); k_max, f_max, e_max size the expert scratch
 * d_scratch (sl__dx_cuda_scratch_bytes bytes, device: the experts' scratch, then the
 * counters of the last-block launches, sl_cuda_ctx_set_counters; NULL: neither, and those
 * launches are not taken); f32_act: GEMV keeps activations F32
 * (SLUICE_ACT_F32, as the CPU kernels do), else the decode of
 * sl_cuda_gemv_q8_act's types uses Q8 activations; pdl: kernels launched with programmatic
 * dependent launch where the device has it (sl_cuda_ctx_set_pdl; sl_ctx_options.no_pdl turns
 * it off); fused: the fused launches (sl_ctx_options.no_fusion off: the norm in Q/K/V's
 * prologue, gate/up + SwiGLU, and the counters that the last-block launches need); side:
 * moe_rows gets its second stream (resident hot experts beside host ones, hot.h), else it
 * runs on `stream`. */
size_t sl__dx_cuda_scratch_bytes(int64_t n_tok, int32_t k_max, int64_t f_max, int64_t e_max);
sl_status sl__dx_cuda_create(sl_device *dev, sl_stream *stream, void *d_work, size_t work_bytes,
                             void *d_scratch, int64_t n_tok, int32_t k_max, int64_t f_max,
                             int64_t e_max, bool f32_act, bool pdl, bool fused, bool side,
                             sl__dx **out, sl_error *err);
/* Whether x is a cuda executor whose kernels launch with programmatic dependent launch now
 * (kernels/cuda/ctx.h sl_cuda_ctx_pdl); false for any other executor and for NULL. */
bool sl__dx_cuda_pdl(const sl__dx *x);
/* The kernels x's CUDA context has launched (sl_cuda_ctx_launches); 0 for any other executor
 * and for NULL. */
uint64_t sl__dx_cuda_launches(const sl__dx *x);
/* Turns x's programmatic dependent launch on (where its device has it) or off (a cuda executor;
 * else nothing). */
void sl__dx_cuda_set_pdl(sl__dx *x, bool on);
/* NULL allowed. */
void sl__dx_destroy(sl__dx *x);

/* ---- the step profiler (dx_prof.c; sl_ctx_options.profile_steps) ---------------------------
 * Every step of sl__dx_vt, once, in the table's order (a step added there is added here: the
 * profiler's table is checked against sl__dx_vt's size). */
#define SL__DX_PROF_OPS(X)                                                                    \
    X(mm) X(mm_many) X(rms_norm) X(add) X(add_rows) X(scale) X(glu) X(rope) X(kv_store)      \
    X(attn) X(router) X(moe) X(moe_rows) X(moe_join) X(mm_heads) X(copy2d) X(argmax)          \
    X(relu_ffn) X(gated_add) X(norm_mm) X(qk_rope_store) X(mm_add_norm) X(mm_router)          \
    X(mm_glu)
#define SL__DX_PROF_COUNT_(name) +1
enum { SL__DX_PROF_N_OPS = 0 SL__DX_PROF_OPS(SL__DX_PROF_COUNT_) };
_Static_assert(sizeof(sl__dx_vt) == (SL__DX_PROF_N_OPS + 1) * sizeof(void (*)(void)),
               "SL__DX_PROF_OPS lists every step of sl__dx_vt (and destroy is the last field)");
extern const char *const sl__dx_prof_op_names[SL__DX_PROF_N_OPS];

/* A context's totals by step (index: SL__DX_PROF_OPS order). Invariant: seconds and
 * gap_seconds >= 0; a step never called has 0 of each. */
typedef struct sl__dx_prof_totals {
    uint64_t calls[SL__DX_PROF_N_OPS];
    double seconds[SL__DX_PROF_N_OPS], gap_seconds[SL__DX_PROF_N_OPS];
} sl__dx_prof_totals;

/* *out: an executor running each step through inner and timing it into *tot (which must
 * outlive it): on a cuda dev by an event pair on stream (device time, and the stream's idle
 * time before the step), else by the host clock. It owns inner from SL_OK on (destroying it);
 * on failure the caller still does. */
sl_status sl__dx_prof_create(sl_device *dev, sl_stream *stream, sl__dx *inner,
                             sl__dx_prof_totals *tot, sl__dx **out, sl_error *err);
/* Adds the steps recorded since the last settle to the totals (waits for their events: call
 * it after the pass's final sync, when it does not block). SL_OK for any other executor. */
sl_status sl__dx_prof_settle(sl__dx *x, sl_error *err);

#endif
