/* kernels/cuda/gemv_multi.cuh: the bodies of gemv_multi.cu's kernels (gemv_multi.h: several
 * matrices in one GEMV launch, per head or of one input; the routed experts' gate / up +
 * SwiGLU), in a header so that tests/kernels_cuda:gemv_multi_host_test runs them on the CPU
 * (host_shim/launch.h: every thread of a block a host thread) against a float64 reference and
 * gemv.cuh's bodies; gemv_multi.cu keeps the __global__ wrappers and the launches. Bodies:
 * - gm_block (k_gemv_multi): F32 activations, any type: one warp per output row (or a block's
 *   warps per row, gm_split), lanes over the row's units, then sl_warp_sum.
 * - qxm_block (k_gemv_multi_qx): Q8 activations, the types of gemv.cuh's k_gemv_qx, whose
 *   pass it runs (qx_pass: qx_first, qx_quant_x, qx_sum): blocks of QX_ROWS rows of one matrix, x
 *   quantised once a block. Why: the launch carries Q/K/V and a dense FFN's gate/up, the
 *   largest matrices of a decode; gm_block's F32 dot takes ~3 instructions a weight where
 *   dp4a takes ~1 (gemv.cuh), and a row's sums are k_gemv_qx's bit for bit, so a fused launch
 *   gives what one launch a matrix gives.
 * - qxe_glu_block (k_gemv_experts_glu): a MoE decode's routed gate and up on the same
 *   quantised x, then the SwiGLU: qx_block's experts form twice, one launch for three. */
#ifndef SL_KERNELS_CUDA_GEMV_MULTI_CUH
#define SL_KERNELS_CUDA_GEMV_MULTI_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_multi.h"
#include "kernels/cuda/select.cuh" /* router_body */

enum { GM_WARPS = 4, GM_THREADS = 32 * GM_WARPS };

/* Warps a row of gm_block: 1, or GM_WARPS (the block one row, its warps splitting the
 * columns) where a launch has too few rows for the device to keep loads in flight: total rows
 * (over heads and tokens) below 16 warps an SM in the one-warp form, and columns enough for 4
 * warps to share. Why: the router of a MoE decode is an F32 matrix of 128..256 rows and
 * 2048..7168 columns, one warp per row ~1 warp an SM. */
static __host__ __device__ inline int gm_split(int64_t rows_total, int64_t cols, int sm_count)
{
    return rows_total < 16 * (int64_t)sm_count && cols >= 1024 ? GM_WARPS : 1;
}

/* the grid's x: blocks of GM_WARPS / W rows over all rows of a launch (gm_args.row0[count]) */
static __host__ __device__ inline int64_t gm_grid_x(int64_t rows, int W = 1)
{
    const int per = GM_WARPS / W;
    return (rows + per - 1) / per;
}

/* One matrix of a launch: row r of head h is at w + h * w_hs + r * row_bytes; its x and y of
 * token t, head h at x + t * x_ts + h * x_hs, y + t * y_ts + h * y_hs. */
struct gm_mat {
    const uint8_t *w;
    uint32_t type;
    int64_t rows, row_bytes, w_hs;
    const float *x;
    int64_t x_ts, x_hs;
    const float *bias; /* [rows] or NULL */
    float *y;
    int64_t y_ts, y_hs;
};

struct gm_args {
    gm_mat m[SL_CUDA_GEMV_MULTI_MAX];
    int64_t row0[SL_CUDA_GEMV_MULTI_MAX + 1]; /* first global row of each matrix; [count] all */
    int count;
    int64_t cols;
    bool silu_glu; /* count 2: a warp computes gate and up row r; y0 = silu(gate) * up */
    /* norm (the Q8 body only, one x: sl_cuda_gemv_multi_norm): x is the norm's input; each
     * block quantises rms_norm(x) * nw (NULL: no weight; qx_norm), and the first block of a
     * token stores it to xn + t * cols */
    bool norm;
    const float *nw;
    float eps;
    float *xn;
};

/* ---- the launch's arguments (host: gemv_multi.cu after its checks, and the host test) ---- */

/* sl_cuda_gemv_heads': one matrix whose head h is at w + h * head_bytes, per-head x and y */
static __host__ inline gm_args gm_heads_args(uint32_t type, const void *w, int64_t head_bytes,
                                             int64_t rows, int64_t row_bytes, int64_t cols,
                                             const float *x, int64_t x_ts, int64_t x_hs,
                                             float *y, int64_t y_ts, int64_t y_hs)
{
    gm_args a = {};
    a.m[0] = gm_mat{(const uint8_t *)w, type, rows, row_bytes, head_bytes, x, x_ts, x_hs, NULL,
                    y, y_ts, y_hs};
    a.count = 1;
    a.row0[1] = rows;
    a.cols = cols;
    return a;
}

/* sl_cuda_gemv_multi's: matrix i (row_bytes rb[i]) on x [n][cols] into its y [n][rows_i] */
static __host__ inline gm_args gm_multi_args(const sl_cuda_gemv_mat *ms, const int64_t *rb,
                                             int count, int64_t cols, const float *x,
                                             bool silu_glu)
{
    gm_args a = {};
    for (int i = 0; i < count; i++) {
        a.m[i] = gm_mat{(const uint8_t *)ms[i].w, ms[i].type, ms[i].rows, rb[i], 0, x, cols, 0,
                        ms[i].bias, ms[i].y, ms[i].rows, 0};
        a.row0[i + 1] = a.row0[i] + ms[i].rows;
    }
    if (silu_glu) a.row0[2] = a.row0[1]; /* the warps run over gate's rows only */
    a.silu_glu = silu_glu;
    a.count = count;
    a.cols = cols;
    return a;
}

static_assert((int)QX_THREADS == (int)ROW_THREADS,
              "the norm prologue's sums are k_rms_norm's (one rule: sl_rms_scale, strided by "
              "the block's threads)");

/* sl_cuda_gemv_multi_norm's: a's x (one for all matrices) normed in each block first */
static __host__ inline void gm_norm(gm_args *a, const float *nw, float eps, float *xn)
{
    a->norm = true;
    a->nw = nw;
    a->eps = eps;
    a->xn = xn;
}

/* float types (any cols): where the row and x are 16-byte aligned, 16 bytes of weights a
 * lane a step (4 F32 or 8 F16 / BF16 values, and their x as float4s), four steps unrolled, the
 * rest element by element. Why: the router of every MoE decode layer is an F32 matrix of few
 * rows (128..256) and many columns; elem's unaligned-safe form reads a value as 2..4 byte
 * loads, so a warp had a few hundred bytes in flight where one 16-byte load a lane has 512. */
template <uint32_t T> static __device__ float gm_dot_f(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane, int nl)
{
    constexpr int VE = 16 / sl_qt<T>::ESIZE; /* values a vector */
    float s = 0.0f;
    int64_t i0 = 0;
    if ((((uintptr_t)row | (uintptr_t)x) & 15) == 0) {
        const int64_t nv = cols / VE;
#pragma unroll 4
        for (int64_t v = lane; v < nv; v += nl) {
            const uint4 q = __ldg((const uint4 *)(const void *)(row + 16 * v));
            const uint32_t wq[4] = {q.x, q.y, q.z, q.w};
            float xv[VE];
#pragma unroll
            for (int k = 0; k < VE / 4; k++) {
                const float4 p = __ldg((const float4 *)(const void *)(x + VE * v + 4 * k));
                xv[4 * k] = p.x, xv[4 * k + 1] = p.y, xv[4 * k + 2] = p.z, xv[4 * k + 3] = p.w;
            }
#pragma unroll
            for (int k = 0; k < VE; k++) {
                float w;
                if constexpr (VE == 4) w = __uint_as_float(wq[k]);
                else {
                    const uint16_t h = (uint16_t)(wq[k / 2] >> (16 * (k & 1)));
                    if constexpr (T == 1) w = sl_h2f(h);
                    else w = sl_bf2f(h);
                }
                s = fmaf(w, xv[k], s);
            }
        }
        i0 = nv * VE;
    }
    for (int64_t i = i0 + lane; i < cols; i += nl) s = fmaf(sl_qt<T>::elem(row, i), x[i], s);
    return s;
}

/* block types: unit by unit, dequantised exactly (any alignment) */
template <uint32_t T> static __device__ float gm_dot_q(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane, int nl)
{
    typedef sl_qt<T> Q;
    float s = 0.0f, v[Q::UNIT];
    for (int64_t u = lane; u < cols / Q::UNIT; u += nl) {
        Q::deq(row + (u / Q::SUBS) * Q::BB, (int)(u % Q::SUBS), v);
        const float *xu = x + u * Q::UNIT;
#pragma unroll
        for (int i = 0; i < Q::UNIT; i++) s = fmaf(v[i], xu[i], s);
    }
    return s;
}

/* this lane's share of the row's dot (type is uniform over the warp): lane `lane` of the nl
 * lanes (32 a warp) the row's warps have */
template <uint32_t T> static __device__ float gm_dot_t(const uint8_t *row, const float *x,
                                                       int64_t cols, int lane, int nl)
{
    if constexpr (sl_qt_block<T>::FLOAT) return gm_dot_f<T>(row, x, cols, lane, nl);
    else return gm_dot_q<T>(row, x, cols, lane, nl);
}

static __device__ float gm_dot(uint32_t type, const uint8_t *row, const float *x, int64_t cols,
                               int lane, int nl)
{
#define GM_CASE_(t) case t: return gm_dot_t<t>(row, x, cols, lane, nl);
    switch (type) {
        SL_QT_TYPES(GM_CASE_)
    default: return 0.0f; /* unreachable: the host checks the type (sl_qt_block_shape) */
    }
#undef GM_CASE_
}

/* Before k_gemv_multi's wait (common.cuh sl_l2_prefetch): each warp's row (and up's under
 * GLU) into L2, the W warps of a row its lines apart, found as gm_block finds it; from the
 * parameters alone; the first token's blocks only (the others read the same rows) */
/* The warp's row of gm_block: global row g of the launch (live: one of its rows), matrix i,
 * row r of it; the one rule of gm_block and gm_l2_prefetch */
struct gm_at {
    int64_t g, r;
    int i;
    bool live;
};
template <int W> static __device__ __forceinline__ gm_at gm_locate(const gm_args &a)
{
    gm_at at = {(int64_t)blockIdx.x * (GM_WARPS / W) + (threadIdx.x >> 5) / W, 0, 0, false};
    at.live = at.g < a.row0[a.count]; /* whole warps (W: whole blocks) share it */
    while (at.live && at.g >= a.row0[at.i + 1]) at.i++;
    at.r = at.g - a.row0[at.i];
    return at;
}

template <int W> static __device__ __forceinline__ void gm_l2_prefetch(const gm_args &a)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const gm_at at = gm_locate<W>(a);
    if (blockIdx.z || !at.live) return;
    const int i = at.i;
    const int64_t r = at.r;
    for (int j = 0; j < (a.silu_glu ? 2 : 1); j++)
        sl_l2_prefetch(a.m[i + j].w + (int64_t)blockIdx.y * a.m[i + j].w_hs +
                           r * a.m[i + j].row_bytes,
                       a.m[i + j].row_bytes, (warp % W) * 32 + lane, 32 * W);
}

/* k_gemv_multi's body: grid x = global row blocks of GM_WARPS / W rows (gm_grid_x), y = head,
 * z = token; GM_THREADS threads, W warps a row (gm_split): with W > 1 the row's warps sum
 * columns apart, then warp 0 adds their sums in warp order through shared memory */
template <int W> static __device__ __forceinline__ void gm_block(gm_args a)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const gm_at at = gm_locate<W>(a);
    const bool live = at.live;
    /* the warp leaves gm_block only (the reduction stays full, and no barrier follows here); a
     * kernel's epilogue after it, k_gemv_router's sl_last_block, still sees every thread */
    if (W == 1 && !live) return;
    const int i = at.i;
    const int64_t r = at.r, h = blockIdx.y, t = blockIdx.z;
    float v[2] = {0.0f, 0.0f};
    const int nm = a.silu_glu ? 2 : 1;
#pragma unroll
    for (int j = 0; j < 2; j++) { /* nm of them: v stays in registers */
        if (j >= nm || !live) continue;
        const gm_mat &m = a.m[i + j];
        const float *x = m.x + t * m.x_ts + h * m.x_hs;
        v[j] = sl_warp_sum(gm_dot(m.type, m.w + h * m.w_hs + r * m.row_bytes, x, a.cols,
                                  (warp % W) * 32 + lane, 32 * W));
    }
    if (W > 1) {
        __shared__ float part[GM_WARPS][2];
        if (lane == 0) part[warp][0] = v[0], part[warp][1] = v[1];
        __syncthreads();
        if (warp % W) return;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            v[j] = part[warp][j];
#pragma unroll
            for (int k = 1; k < W; k++) v[j] += part[warp + k][j];
        }
    }
    if (lane || !live) return;
#pragma unroll
    for (int j = 0; j < 2; j++)
        if (j < nm && a.m[i + j].bias) v[j] += a.m[i + j].bias[r];
    const gm_mat &m = a.m[i];
    if (!a.silu_glu) {
        m.y[t * m.y_ts + h * m.y_hs + r] = v[0];
        return;
    }
    const gm_mat &mu = a.m[1];
    mu.y[t * mu.y_ts + r] = v[1];
    m.y[t * m.y_ts + r] = sl_swiglu1(v[0], v[1]);
}

/* ---- the router GEMV + top-k (k_gemv_router) ------------------------------------------------ */

/* k_gemv_router's epilogue, after gm_block wrote every token's logits (matrix 0's y, [n][E]):
 * the grid's last block to finish (sl_last_block) routes them, its first warp token by token
 * (router_body, which reads the logits past L1). rs: router_smem bytes, sel:
 * SL_CUDA_ROUTER_MAX_EXPERT ints of shared memory. Every thread of every block calls it. */
static __device__ __forceinline__ void gm_router_last(const gm_args &a, const router_args &ra,
                                                      unsigned *done, double *rs, int32_t *sel)
{
    if (!sl_last_block(done) || threadIdx.x >= 32) return;
    for (int64_t t = 0; t < (int64_t)gridDim.z; t++) {
        router_body(a.m[0].y, t, ra, rs, sel);
        __syncwarp(); /* lane 0 wrote token t's picks from rs and sel */
    }
}

/* ---- Q8 activations (k_gemv_multi_qx) ------------------------------------------------------ */

/* Matrices whose rows the warps run: all, or with silu_glu the gate (the up rows come along) */
static __host__ __device__ inline int qxm_count(const gm_args &a)
{
    return a.silu_glu ? 1 : a.count;
}

/* the grid's x: each matrix's rows in blocks of QX_ROWS, matrix after matrix */
static __host__ __device__ inline int64_t qxm_grid_x(const gm_args &a)
{
    int64_t n = 0;
    for (int i = 0; i < qxm_count(a); i++) n += (a.m[i].rows + QX_ROWS - 1) / QX_ROWS;
    return n;
}

/* qx_pass (gemv.cuh) for a type known at run time, uniform over the block (the barrier inside
 * is met by every thread); one whole pass a case, so that only the type's own weight words
 * stay live across x's quantisation. Types outside sl_qx_type never come (the launches'
 * rule: sl_cuda_gemv_multi_q8 and its kin). */
template <bool QX>
static __device__ __forceinline__ void qxm_pass_of(uint32_t type, const uint8_t *W,
                                                   int64_t row_bytes, const int64_t *src,
                                                   const float *X, int64_t cols, int lane,
                                                   int8_t *xq, float *xd, float *xs, float *acc,
                                                   const qx_norm &nm)
{
#define QXM_CASE_(t)                                                                          \
    case t:                                                                                   \
        if constexpr (sl_qx_type(t))                                                          \
            qx_pass<t, QX>(W, row_bytes, src, X, cols, lane, xq, xd, xs, acc, nm);            \
        break;
    switch (type) {
        SL_QT_TYPES(QXM_CASE_)
    }
#undef QXM_CASE_
}

/* matrix i of the launch, selected without indexing the parameter space (a run-time index
 * into the kernel's argument copied it to local memory) */
static __device__ __forceinline__ gm_mat qxm_mat(const gm_args &a, int i)
{
    gm_mat m = a.m[0];
#pragma unroll
    for (int k = 1; k < SL_CUDA_GEMV_MULTI_MAX; k++)
        if (i == k) m = a.m[k];
    return m;
}

/* Block blockIdx.x of k_gemv_multi_qx: matrix i of the launch, its block bx among that
 * matrix's (QX_ROWS rows each) */
struct qxm_at {
    int i;
    int64_t bx;
};
static __device__ __forceinline__ qxm_at qxm_locate(const gm_args &a)
{
    qxm_at at = {0, (int64_t)blockIdx.x};
    for (; at.i + 1 < qxm_count(a); at.i++) {
        const int64_t nb = (a.m[at.i].rows + QX_ROWS - 1) / QX_ROWS;
        if (at.bx < nb) break;
        at.bx -= nb;
    }
    return at;
}

/* Before k_gemv_multi_qx's wait (common.cuh sl_l2_prefetch): the block's rows of its matrix
 * (and of up under GLU) into L2, found as qxm_block finds them; from the parameters alone; the
 * first token's blocks only (the others read the same rows) */
template <bool GLU>
static __device__ __forceinline__ void qxm_l2_prefetch(const gm_args &a)
{
    const qxm_at at = qxm_locate(a);
    const gm_mat m = qxm_mat(a, at.i);
    const int64_t o0 = at.bx * QX_ROWS, n = min((int64_t)QX_ROWS, m.rows - o0);
    if (blockIdx.z || n <= 0) return;
    sl_l2_prefetch(m.w + (int64_t)blockIdx.y * m.w_hs + o0 * m.row_bytes, n * m.row_bytes,
                   threadIdx.x, QX_THREADS);
    if (GLU)
        sl_l2_prefetch(a.m[1].w + o0 * a.m[1].row_bytes, n * a.m[1].row_bytes, threadIdx.x,
                       QX_THREADS);
}

/* k_gemv_multi_qx's body: grid x = qxm_grid_x, y = head, z = token; QX_THREADS threads; qsm
 * the block's dynamic shared memory (qx_smem(a.cols) bytes, 16-byte aligned). Every type is
 * sl_qx_type's and a.cols a multiple of 32 (sl_cuda_gemv_multi_q8 / _heads_q8). Each warp's
 * QX_R rows as qx_block's, then the epilogue of gm_block: bias, SwiGLU. */
template <bool GLU>
static __device__ __forceinline__ void qxm_block(const gm_args &a, uint8_t *qsm)
{
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t h = blockIdx.y, t = blockIdx.z;
    const qxm_at at = qxm_locate(a);
    const int i = at.i;
    const int64_t bx = at.bx;
    int8_t *xq;
    float *xd, *xs;
    qx_x_at(qsm, a.cols, &xq, &xd, &xs);
    int64_t src[QX_R];
    float acc[QX_R] = {}, accu[QX_R] = {};
    __shared__ float red[32];
    { /* only what the sums need stays live through them */
        const gm_mat m = qxm_mat(a, i);
#pragma unroll
        for (int r = 0; r < QX_R; r++) {
            const int64_t o = bx * QX_ROWS + warp * QX_R + r;
            src[r] = o < m.rows ? o : -1;
        }
        const qx_norm nm = {a.norm, a.nw, a.eps,
                            a.norm && blockIdx.x == 0 && h == 0 ? a.xn + t * a.cols : NULL, red};
        qxm_pass_of<true>(m.type, m.w + h * m.w_hs, m.row_bytes, src,
                          m.x + t * m.x_ts + h * m.x_hs, a.cols, lane, xq, xd, xs, acc, nm);
    }
    const gm_mat &mu = a.m[1]; /* GLU: up, on the same x (quantised above), one head */
    if (GLU)
        qxm_pass_of<false>(mu.type, mu.w, mu.row_bytes, src, NULL, a.cols, lane, xq, xd, xs,
                           accu, qx_norm{});
    const gm_mat m = qxm_mat(a, i);
#pragma unroll
    for (int r = 0; r < QX_R; r++) {
        float v = sl_warp_sum(acc[r]);
        float u = GLU ? sl_warp_sum(accu[r]) : 0.0f;
        if (lane || src[r] < 0) continue;
        const int64_t o = src[r];
        if (m.bias) v += m.bias[o];
        if (!GLU) {
            m.y[t * m.y_ts + h * m.y_hs + o] = v;
            continue;
        }
        if (mu.bias) u += mu.bias[o];
        mu.y[t * mu.y_ts + o] = u;
        m.y[t * m.y_ts + o] = sl_swiglu1(v, u);
    }
}

/* ---- routed experts' gate / up + SwiGLU, Q8 activations (k_gemv_experts_glu) --------------- */

/* sl_cuda_gemv_experts_glu's launch: for slot s, expert ids[s], y [s][rows] = silu(G x) * (U x)
 * with x at x + (s / x_group) * cols */
struct gme_args {
    const void *const *wg; /* [n_expert] gate matrices, type tg, rows x cols, rb_g a row */
    const void *const *wu; /* [n_expert] up matrices, type tu, rb_u a row */
    uint32_t tg, tu;
    int32_t n_expert;
    const int32_t *ids; /* [gridDim.z] */
    int64_t rows, cols, rb_g, rb_u;
    const float *x;
    int32_t x_group;
    float *y;
};

/* sl_cuda_gemv_experts_glu's arguments after its checks (and the host test's); rb_g, rb_u:
 * a gate's and an up's row bytes; x_group past n_sel is every slot in group 0 */
static __host__ inline gme_args gme_make(uint32_t tg, const void *const *wg, int64_t rb_g,
                                         uint32_t tu, const void *const *wu, int64_t rb_u,
                                         int32_t n_expert, const int32_t *ids, int32_t n_sel,
                                         int64_t rows, int64_t cols, const float *x,
                                         int32_t x_group, float *y)
{
    gme_args a = {};
    a.wg = wg;
    a.wu = wu;
    a.tg = tg;
    a.tu = tu;
    a.n_expert = n_expert;
    a.ids = ids;
    a.rows = rows;
    a.cols = cols;
    a.rb_g = rb_g;
    a.rb_u = rb_u;
    a.x = x;
    a.x_group = x_group < n_sel ? x_group : n_sel;
    a.y = y;
    return a;
}

/* the grid: x blocks of QX_ROWS rows, z the slots */
static __host__ __device__ inline int64_t gme_grid_x(const gme_args &a)
{
    return (a.rows + QX_ROWS - 1) / QX_ROWS;
}

/* k_gemv_experts_glu's body (QX_THREADS threads, qsm: qx_smem(a.cols) bytes, 16-byte
 * aligned): qx_block's experts form for the gate, then the up rows on the same quantised x,
 * then sl_swiglu1; an id outside [0, n_expert) gives zeros (silu(0) * 0, the unfused bits) */
static __device__ __forceinline__ void qxe_glu_block(const gme_args &a, uint8_t *qsm)
{
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t slot = blockIdx.z, o0 = (int64_t)blockIdx.x * QX_ROWS;
    float *Y = a.y + slot * a.rows;
    const int32_t e = a.ids[slot];
    if (e < 0 || e >= a.n_expert) { /* uniform over the block, before any barrier */
        qx_zero_rows(Y, o0, a.rows);
        return;
    }
    int8_t *xq;
    float *xd, *xs;
    qx_x_at(qsm, a.cols, &xq, &xd, &xs);
    int64_t src[QX_R];
#pragma unroll
    for (int r = 0; r < QX_R; r++) {
        const int64_t o = o0 + warp * QX_R + r;
        src[r] = o < a.rows ? o : -1;
    }
    float acc[QX_R] = {}, accu[QX_R] = {};
    qxm_pass_of<true>(a.tg, (const uint8_t *)a.wg[e], a.rb_g, src,
                      a.x + (slot / a.x_group) * a.cols, a.cols, lane, xq, xd, xs, acc,
                      qx_norm{});
    qxm_pass_of<false>(a.tu, (const uint8_t *)a.wu[e], a.rb_u, src, NULL, a.cols, lane, xq, xd,
                       xs, accu, qx_norm{});
#pragma unroll
    for (int r = 0; r < QX_R; r++) {
        const float v = sl_warp_sum(acc[r]), u = sl_warp_sum(accu[r]);
        if (lane == 0 && src[r] >= 0) Y[src[r]] = sl_swiglu1(v, u);
    }
}

#endif
