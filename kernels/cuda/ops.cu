/* kernels/cuda/ops.cu: see ops.h. Small kernels; the decode step calls each once per layer, so
 * they favour few launches and exact-enough arithmetic over peak throughput. Their bodies live
 * in headers that tests/kernels_cuda's host tests run on the CPU (rows.cuh, rope.cuh,
 * select.cuh, attn_decode.cuh, attn_prefill.cuh); this file keeps the __global__ wrappers,
 * which declare the shared memory, and the launches. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/attn_decode.cuh"
#include "kernels/cuda/attn_prefill.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/rope.cuh"   /* and rows.cuh */
#include "kernels/cuda/select.cuh"
extern "C" {
#include "kernels/ref/ops.h"
}
#include "kernels/cuda/ops.h"

#define NEED(p, name, n)                                                                    \
    do {                                                                                    \
        if ((n) > 0 && !(p))                                                                \
            return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", fn, name);           \
    } while (0)

static sl_status enter(const char *fn, sl_cuda_ctx *c, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    return sl__cuda_ctx_enter(c, err);
}

/* ---- rms_norm -------------------------------------------------------------------------------- */

static __global__ void __launch_bounds__(ROW_THREADS)
    k_rms_norm(const float *x, const float *w, float *y, int64_t n, float eps, bool one_plus_w)
{
    sl_pdl_enter();
    __shared__ float red[32];
    rms_norm_body(x, w, y, n, eps, one_plus_w, red);
}

/* The row norms' arguments (sl_cuda_rms_norm, sl_cuda_add_rms_norm). */
static sl_status norm_args(const char *fn, int64_t n_rows, int64_t n, float eps, sl_error *err)
{
    if (n_rows < 0 || n < 0 || n_rows > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_rows = %lld, n = %lld out of range", fn,
                            (long long)n_rows, (long long)n);
    if (!(eps >= 0.0f) || !isfinite(eps))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0", fn,
                            (double)eps);
    return SL_OK;
}

extern "C" sl_status sl_cuda_rms_norm(sl_cuda_ctx *c, const float *d_x, const float *d_w,
                                      float *d_y, int64_t n_rows, int64_t n, float eps,
                                      bool one_plus_w, sl_error *err)
{
    const char *fn = __func__;
    sl_status st = norm_args(fn, n_rows, n, eps, err);
    if (st) return st;
    NEED(d_x, "d_x", n * n_rows);
    NEED(d_y, "d_y", n * n_rows);
    st = enter(fn, c, err);
    if (st || !n || !n_rows) return st;
    sl__cuda_launch(c, k_rms_norm, (unsigned)n_rows, ROW_THREADS, 0, d_x, d_w, d_y, n, eps,
                    one_plus_w);
    SL_CU_LAUNCH(err, "k_rms_norm");
    return SL_OK;
}

/* ---- rope ------------------------------------------------------------------------------------ */

/* rope_body (rope.cuh) */
static __global__ void k_rope(float *x, int64_t n_pairs, const int32_t *pos, rope_k p)
{
    sl_pdl_enter();
    rope_body(x, n_pairs, pos, p);
}

extern "C" sl_status sl_cuda_rope(sl_cuda_ctx *c, float *d_x, int64_t n_tokens, int32_t n_head,
                                  int32_t head_dim, const int32_t *d_pos,
                                  const sl_rope_params *p, sl_error *err)
{
    const char *fn = __func__;
    if (n_tokens < 0 || n_head < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tokens = %lld, n_head = %d must be >= 0",
                            fn, (long long)n_tokens, n_head);
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "%s: params is NULL", fn);
    sl_rope_params hp = *p;
    hp.freq_factors = NULL; /* device pointer: not readable here */
    sl_status st = sl_ref_rope_validate(&hp, head_dim, err);
    if (st) return st;
    NEED(d_x, "d_x", n_tokens * n_head);
    NEED(d_pos, "d_pos", n_tokens * n_head);
    st = enter(fn, c, err);
    if (st || !n_tokens || !n_head) return st;
    const rope_k k = rope_k_make(p, head_dim, n_head);
    const int64_t n_pairs = n_tokens * n_head * (int64_t)(p->n_rot / 2);
    const int64_t blocks = ew_blocks(n_pairs);
    if (blocks > INT32_MAX) return sl_error_set(err, SL_ERR_INVALID, "%s: too many rows", fn);
    sl__cuda_launch(c, k_rope, (unsigned)blocks, EW_THREADS, 0, d_x, n_pairs, d_pos, k);
    SL_CU_LAUNCH(err, "k_rope");
    return SL_OK;
}

/* ---- fused: q/k norm + rope + KV store; residual add + rms_norm ---------------------------- */

/* qk_rope_store_body (rope.cuh) with its shared memory */
static __global__ void __launch_bounds__(ROW_THREADS)
    k_qk_rope_store(float *q, float *k, const float *v, const float *qw, const float *kw,
                    float eps, const int32_t *pos, rope_k p, int32_t H, int32_t Hk, bool f16,
                    void *kc, void *vc)
{
    sl_pdl_enter();
    __shared__ float red[32];
    qk_rope_store_body(q, k, v, qw, kw, eps, pos, p, H, Hk, f16, kc, vc, red);
}

extern "C" sl_status sl_cuda_qk_rope_store(sl_cuda_ctx *c, float *d_q, float *d_k,
                                           const float *d_v, int64_t n_tokens, int32_t n_head,
                                           int32_t n_head_kv, int32_t head_dim,
                                           const float *d_q_norm, const float *d_k_norm,
                                           float eps, const int32_t *d_pos,
                                           const sl_rope_params *p, bool f16, void *d_kc,
                                           void *d_vc, sl_error *err)
{
    const char *fn = __func__;
    if (n_tokens < 0 || n_tokens > 65535 || n_head < 1 || n_head_kv < 1 ||
        (int64_t)n_head + 2 * (int64_t)n_head_kv > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tokens = %lld (<= 65535), n_head = %d, "
                            "n_head_kv = %d out of range", fn, (long long)n_tokens, n_head,
                            n_head_kv);
    sl_status st = norm_args(fn, n_tokens, head_dim, eps, err);
    if (st) return st;
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "%s: params is NULL", fn);
    sl_rope_params hp = *p;
    hp.freq_factors = NULL; /* device pointer: not readable here */
    if ((st = sl_ref_rope_validate(&hp, head_dim, err))) return st;
    NEED(d_q, "d_q", n_tokens);
    NEED(d_k, "d_k", n_tokens);
    NEED(d_v, "d_v", n_tokens);
    NEED(d_pos, "d_pos", n_tokens);
    NEED(d_kc, "d_kc", n_tokens);
    NEED(d_vc, "d_vc", n_tokens);
    st = enter(fn, c, err);
    if (st || !n_tokens) return st;
    const rope_k k = rope_k_make(p, head_dim, n_head);
    const dim3 grid((unsigned)qk_rope_store_slots(n_head, n_head_kv), (unsigned)n_tokens, 1);
    sl__cuda_launch(c, k_qk_rope_store, grid, ROW_THREADS, 0, d_q, d_k, d_v, d_q_norm, d_k_norm,
                    eps, d_pos, k, n_head, n_head_kv, f16, d_kc, d_vc);
    SL_CU_LAUNCH(err, "k_qk_rope_store");
    return SL_OK;
}

/* add_rms_norm_body (rows.cuh) with its shared memory */
static __global__ void __launch_bounds__(ROW_THREADS)
    k_add_rms_norm(float *x, const float *t, const float *w, float *y, int64_t n, float eps)
{
    sl_pdl_enter();
    __shared__ float red[32];
    add_rms_norm_body(x, t, w, y, n, eps, red);
}

extern "C" sl_status sl_cuda_add_rms_norm(sl_cuda_ctx *c, float *d_x, const float *d_t,
                                          const float *d_w, float *d_y, int64_t n_rows,
                                          int64_t n, float eps, sl_error *err)
{
    const char *fn = __func__;
    sl_status st = norm_args(fn, n_rows, n, eps, err);
    if (st) return st;
    NEED(d_x, "d_x", n * n_rows);
    NEED(d_t, "d_t", n * n_rows);
    NEED(d_y, "d_y", n * n_rows);
    st = enter(fn, c, err);
    if (st || !n || !n_rows) return st;
    sl__cuda_launch(c, k_add_rms_norm, (unsigned)n_rows, ROW_THREADS, 0, d_x, d_t, d_w, d_y, n,
                    eps);
    SL_CU_LAUNCH(err, "k_add_rms_norm");
    return SL_OK;
}

/* ---- softmax --------------------------------------------------------------------------------- */

static __global__ void __launch_bounds__(ROW_THREADS)
    k_softmax(float *x, int64_t n, float scale, const float *mask, int64_t mask_stride)
{
    sl_pdl_enter();
    __shared__ float red[32];
    softmax_body(x, n, scale, mask, mask_stride, red);
}

extern "C" sl_status sl_cuda_softmax(sl_cuda_ctx *c, float *d_x, int64_t n_rows, int64_t n,
                                     float scale, const float *d_mask, int64_t mask_row_stride,
                                     sl_error *err)
{
    const char *fn = __func__;
    if (n_rows < 0 || n < 0 || n_rows > INT32_MAX || mask_row_stride < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_rows = %lld, n = %lld, mask_row_stride "
                            "= %lld out of range", fn, (long long)n_rows, (long long)n,
                            (long long)mask_row_stride);
    if (!isfinite(scale))
        return sl_error_set(err, SL_ERR_INVALID, "%s: scale = %g is not finite", fn, (double)scale);
    NEED(d_x, "d_x", n * n_rows);
    sl_status st = enter(fn, c, err);
    if (st || !n || !n_rows) return st;
    sl__cuda_launch(c, k_softmax, (unsigned)n_rows, ROW_THREADS, 0, d_x, n, scale, d_mask,
                    mask_row_stride);
    SL_CU_LAUNCH(err, "k_softmax");
    return SL_OK;
}

/* ---- elementwise ----------------------------------------------------------------------------- */

template <int OP>
static __global__ void k_ew(const float *a, const float *b, float *y, int64_t n, float s,
                           float s2)
{
    sl_pdl_enter();
    ew_body<OP>(a, b, y, n, s, s2);
}

template <int OP>
static sl_status ew(const char *fn, sl_cuda_ctx *c, const float *a, const float *b, float *y,
                    int64_t n, float s, sl_error *err, float s2 = 0.0f)
{
    if (n < 0) return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld < 0", fn, (long long)n);
    NEED(a, OP == EW_SCALE ? "d_x" : OP <= EW_GLU_LAST ? "d_gate" : "d_a", n);
    NEED(b, OP <= EW_GLU_LAST ? "d_up" : "d_b", OP == EW_SCALE ? 0 : n);
    NEED(y, OP <= EW_GLU_LAST ? "d_out" : "d_y", n);
    sl_status st = enter(fn, c, err);
    if (st || !n) return st;
    sl__cuda_launch(c, k_ew<OP>, ew_grid(n), EW_THREADS, 0, a, b, y, n, s, s2);
    SL_CU_LAUNCH(err, "k_ew");
    return SL_OK;
}

extern "C" sl_status sl_cuda_swiglu(sl_cuda_ctx *c, const float *d_gate, const float *d_up,
                                    float *d_out, int64_t n, sl_error *err)
{
    return ew<EW_SWIGLU>(__func__, c, d_gate, d_up, d_out, n, 0.0f, err);
}

extern "C" sl_status sl_cuda_geglu(sl_cuda_ctx *c, const float *d_gate, const float *d_up,
                                   float *d_out, int64_t n, sl_gelu_kind kind, sl_error *err)
{
    if (kind == SL_GELU_TANH)
        return ew<EW_GEGLU_TANH>(__func__, c, d_gate, d_up, d_out, n, 0.0f, err);
    if (kind == SL_GELU_ERF)
        return ew<EW_GEGLU_ERF>(__func__, c, d_gate, d_up, d_out, n, 0.0f, err);
    return sl_error_set(err, SL_ERR_INVALID, "%s: kind = %d is not TANH (0) or ERF (1)", __func__,
                        (int)kind);
}

extern "C" sl_status sl_cuda_swiglu_oai(sl_cuda_ctx *c, const float *d_gate, const float *d_up,
                                        float *d_out, int64_t n, float alpha, float limit,
                                        sl_error *err)
{
    if (!isfinite(alpha) || !(limit >= 0.0f) || !isfinite(limit))
        return sl_error_set(err, SL_ERR_INVALID, "%s: alpha = %g, limit = %g: need finite values, "
                            "limit >= 0", __func__, (double)alpha, (double)limit);
    return ew<EW_SWIGLU_OAI>(__func__, c, d_gate, d_up, d_out, n, alpha, err, limit);
}

extern "C" sl_status sl_cuda_add(sl_cuda_ctx *c, const float *d_a, const float *d_b, float *d_y,
                                 int64_t n, sl_error *err)
{
    return ew<EW_ADD>(__func__, c, d_a, d_b, d_y, n, 0.0f, err);
}

extern "C" sl_status sl_cuda_mul(sl_cuda_ctx *c, const float *d_a, const float *d_b, float *d_y,
                                 int64_t n, sl_error *err)
{
    return ew<EW_MUL>(__func__, c, d_a, d_b, d_y, n, 0.0f, err);
}

extern "C" sl_status sl_cuda_scale(sl_cuda_ctx *c, float *d_x, int64_t n, float s, sl_error *err)
{
    return ew<EW_SCALE>(__func__, c, d_x, NULL, d_x, n, s, err);
}

/* ---- router ---------------------------------------------------------------------------------- */

/* router_body (select.cuh) with its shared memory: one warp a token (blockIdx.x) */
static __global__ void __launch_bounds__(32) k_router(const float *logits, router_args ra)
{
    sl_pdl_enter();
    extern __shared__ double rs[]; /* router_smem */
    __shared__ int32_t sel[SL_CUDA_ROUTER_MAX_EXPERT];
    router_body(logits, blockIdx.x, ra, rs, sel);
}

sl_status sl__cuda_router_check(const char *fn, const sl_router_params *p, router_args *r,
                                sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "%s: params is NULL", fn);
    const int32_t E = p->n_expert, k = p->k;
    if (E < 1) return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d < 1", fn, E);
    if (k < 1 || k > E)
        return sl_error_set(err, SL_ERR_INVALID, "%s: k = %d not in [1, n_expert = %d]", fn, k, E);
    if (p->gating != SL_GATING_SOFTMAX_TOPK && p->gating != SL_GATING_SIGMOID &&
        p->gating != SL_GATING_TOPK_SOFTMAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: gating = %d unknown", fn, (int)p->gating);
    if (!isfinite(p->weight_scale))
        return sl_error_set(err, SL_ERR_INVALID, "%s: weight_scale = %g is not finite", fn,
                            (double)p->weight_scale);
    if (p->n_group < 0 || (p->n_group > 1 && (E % p->n_group || p->top_group < 1 ||
                                              p->top_group > p->n_group)))
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_group = %d, top_group = %d invalid for "
                            "n_expert = %d", fn, p->n_group, p->top_group, E);
    if (E > SL_CUDA_ROUTER_MAX_EXPERT)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: n_expert = %d > %d", fn, E,
                            (int)SL_CUDA_ROUTER_MAX_EXPERT);
    *r = router_args{E, k, (int32_t)p->gating, router_groups(p->n_group), p->top_group,
                     p->norm_topk, p->bias, p->weight_scale, NULL, NULL};
    return SL_OK;
}

extern "C" sl_status sl_cuda_router_topk(sl_cuda_ctx *c, const float *d_logits, int64_t n_tokens,
                                         const sl_router_params *p, int32_t *d_idx, float *d_w,
                                         sl_error *err)
{
    const char *fn = __func__;
    router_args ra;
    sl_status st = sl__cuda_router_check(fn, p, &ra, err);
    if (st) return st;
    if (n_tokens < 0 || n_tokens > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tokens = %lld out of range", fn,
                            (long long)n_tokens);
    NEED(d_logits, "d_logits", n_tokens);
    NEED(d_idx, "d_idx", n_tokens);
    NEED(d_w, "d_w", n_tokens);
    st = enter(fn, c, err);
    if (st || !n_tokens) return st;
    ra.idx = d_idx;
    ra.w = d_w;
    sl__cuda_launch(c, k_router, (unsigned)n_tokens, 32, router_smem(ra.E, ra.n_group), d_logits,
                    ra);
    SL_CU_LAUNCH(err, "k_router");
    return SL_OK;
}

/* ---- greedy pick ----------------------------------------------------------------------------- */

/* argmax_body (select.cuh) with its shared memory */
static __global__ void __launch_bounds__(ARGMAX_THREADS)
    k_argmax(const float *x, int32_t n, sl_argmax_result *r)
{
    sl_pdl_enter();
    __shared__ float sv[ARGMAX_THREADS];
    __shared__ int32_t si[ARGMAX_THREADS], sb[ARGMAX_THREADS];
    argmax_body(x, n, r, sv, si, sb);
}

extern "C" sl_status sl_cuda_argmax(sl_cuda_ctx *c, const float *d_x, int64_t n,
                                    sl_argmax_result *d_r, sl_error *err)
{
    const char *fn = __func__;
    if (n < 0 || n > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld out of range", fn, (long long)n);
    NEED(d_x, "d_x", n);
    NEED(d_r, "d_r", 1);
    sl_status st = enter(fn, c, err);
    if (st) return st;
    sl__cuda_launch(c, k_argmax, 1, ARGMAX_THREADS, 0, d_x, (int32_t)n, d_r);
    SL_CU_LAUNCH(err, "k_argmax");
    return SL_OK;
}

/* ---- decode attention ------------------------------------------------------------------------ */

/* ad_body (attn_decode.cuh) with its shared memory */
template <typename KV, int DPL>
static __global__ void __launch_bounds__(32 * ATTN_WARPS)
    k_attn_decode(const float *q, const KV *k, const KV *v, attn_k a, float *out)
{
    sl_pdl_enter();
    __shared__ float wm[ATTN_WARPS], wsum[ATTN_WARPS];
    __shared__ float wacc[ATTN_WARPS][32 * DPL];
    ad_body<KV, DPL>(q, k, v, a, out, wm, wsum, wacc);
}

/* The fields both attention kernels' arguments share (attn_k, ap_args), from p */
template <typename A>
static void attn_common(A &a, const sl_attn_params *p, float scale, const int32_t *d_pos)
{
    a.D = p->head_dim;
    a.group = p->n_head / p->n_kv_head;
    a.n_kv_head = p->n_kv_head;
    a.pos = d_pos;
    a.window = p->window;
    a.q_ts = (int64_t)p->n_head * p->head_dim;
    a.scale = scale;
    a.softcap = p->softcap;
    a.temp_scale = p->temp_scale;
    a.temp_len = p->temp_len;
    a.sinks = p->sinks;
}

/* A prefill's tokens at positions on the device on the tensor cores (kernels/cuda/
 * attn_prefill.cuh), when they take it (*taken): AP_MIN_TOKENS or more (a block walks its
 * tile's whole range, so a few tokens at a long context are faster per token in the per-token
 * kernel, warps splitting the positions), a grid within its limit, ap_layout's shared memory
 * within the device's opt-in size, and not the F32-activation mode. Its shared memory is
 * raised per launch (a host-side attribute, ~1 us against a prefill's milliseconds). */
static sl_status attn_prefill(sl_cuda_ctx *c, const float *d_q, const void *d_k, const void *d_v,
                              const sl_attn_params *p, float scale, const int32_t *d_pos,
                              int64_t n_tok, float *d_out, bool *taken, sl_error *err)
{
    ap_args a;
    attn_common(a, p, scale, d_pos);
    a.Dp = ap_dp(p->head_dim);
    a.kv_same = d_k == d_v;
    const int64_t tiles = (n_tok * a.group + AP_BM - 1) / AP_BM;
    const size_t smem = ap_layout(a.Dp, a.kv_same).total;
    *taken = d_pos && n_tok >= AP_MIN_TOKENS && tiles <= 65535 && p->head_dim <= AP_MAX_D &&
             !c->f32_act && smem <= c->info.smem_per_block_optin;
    if (!*taken) return SL_OK;
    a.q = d_q;
    a.k = d_k;
    a.v = d_v;
    a.out = d_out;
    a.n_tok = (int32_t)n_tok;
    const dim3 grid((unsigned)p->n_kv_head, (unsigned)tiles);
    if (p->kv_type == SL_KV_F16) {
        SL_CU(err, cudaFuncSetAttribute(k_attn_prefill<uint16_t>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        sl__cuda_launch(c, k_attn_prefill<uint16_t>, grid, AP_THREADS, smem, a);
    } else {
        SL_CU(err, cudaFuncSetAttribute(k_attn_prefill<float>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        sl__cuda_launch(c, k_attn_prefill<float>, grid, AP_THREADS, smem, a);
    }
    SL_CU_LAUNCH(err, "k_attn_prefill");
    return SL_OK;
}

/* n_tok tokens in one launch at their positions on the device (d_pos: sl_cuda_attn_at), or
 * one token at p->n_pos (d_pos NULL: sl_cuda_attn_decode) */
static sl_status attn_launch(const char *fn, sl_cuda_ctx *c, const float *d_q, const void *d_k,
                             const void *d_v, const sl_attn_params *p, const int32_t *d_pos,
                             int64_t n_tok, float *d_out, sl_error *err)
{
    if (!p) return sl_error_set(err, SL_ERR_INVALID, "%s: params is NULL", fn);
    sl_attn_params hp = *p;
    hp.sinks = NULL; /* device pointer */
    if (d_pos) hp.n_pos = 1; /* unused: the positions are on the device */
    sl_status st = sl_ref_attn_validate(&hp, err);
    if (st) return st;
    if (p->head_dim > SL_CUDA_ATTN_MAX_HEAD_DIM)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: head_dim = %d > %d", fn, p->head_dim,
                            (int)SL_CUDA_ATTN_MAX_HEAD_DIM);
    if (n_tok < 1 || n_tok > 65535 || (int64_t)hp.n_pos + n_tok - 1 > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tok = %lld must be in [1, 65535] (and "
                            "n_pos + n_tok - 1 an int32)", fn, (long long)n_tok);
    NEED(d_q, "d_q", 1);
    NEED(d_k, "d_k", 1);
    NEED(d_v, "d_v", 1);
    NEED(d_out, "d_out", 1);
    st = enter(fn, c, err);
    if (st) return st;
    const float scale = (float)sl_ref_attn_scale(p);
    bool taken = false;
    st = attn_prefill(c, d_q, d_k, d_v, p, scale, d_pos, n_tok, d_out, &taken, err);
    if (st || taken) return st;
    attn_k a;
    attn_common(a, p, scale, d_pos);
    a.n_pos = p->n_pos;
    const dim3 nb((unsigned)p->n_head, (unsigned)n_tok);
    const unsigned nt = 32 * ATTN_WARPS;
    const uint16_t *k16 = (const uint16_t *)d_k, *v16 = (const uint16_t *)d_v;
    const float *k32 = (const float *)d_k, *v32 = (const float *)d_v;
    const bool small = attn_dpl_small(p->head_dim);
    if (p->kv_type == SL_KV_F16 && small)
        sl__cuda_launch(c, k_attn_decode<uint16_t, ATTN_DPL_SMALL>, nb, nt, 0, d_q, k16, v16, a,
                        d_out);
    else if (p->kv_type == SL_KV_F16)
        sl__cuda_launch(c, k_attn_decode<uint16_t, ATTN_DPL>, nb, nt, 0, d_q, k16, v16, a, d_out);
    else if (small)
        sl__cuda_launch(c, k_attn_decode<float, ATTN_DPL_SMALL>, nb, nt, 0, d_q, k32, v32, a,
                        d_out);
    else
        sl__cuda_launch(c, k_attn_decode<float, ATTN_DPL>, nb, nt, 0, d_q, k32, v32, a, d_out);
    SL_CU_LAUNCH(err, "k_attn_decode");
    return SL_OK;
}

extern "C" sl_status sl_cuda_attn_decode(sl_cuda_ctx *c, const float *d_q, const void *d_k,
                                         const void *d_v, const sl_attn_params *p, float *d_out,
                                         sl_error *err)
{
    return attn_launch(__func__, c, d_q, d_k, d_v, p, NULL, 1, d_out, err);
}

extern "C" sl_status sl_cuda_attn_at(sl_cuda_ctx *c, const float *d_q, const void *d_k,
                                     const void *d_v, const sl_attn_params *p,
                                     const int32_t *d_pos, int64_t n_tok, float *d_out,
                                     sl_error *err)
{
    const char *fn = __func__;
    NEED(d_pos, "d_pos", 1);
    return attn_launch(fn, c, d_q, d_k, d_v, p, d_pos, n_tok, d_out, err);
}
