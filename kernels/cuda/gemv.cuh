/* kernels/cuda/gemv.cuh: the bodies of gemv.cu's two GEMV kernels (gemv.h), in a header so
 * that tests/kernels_cuda:gemv_host_test runs them on the CPU (host_shim/launch.h: every
 * thread of a block a host thread, cp.async copies landing at their wait) against kernels/ref.
 *
 * k_gemv (gv_block): F32 activations, weight rows and x staged in shared memory; k_gemv_qx
 * (qx_block, below): x quantised to int8 once a block, weights read into registers, dp4a.
 *
 * k_gemv, why this shape (H100 decode, W read once from HBM, x tiny):
 * - Bandwidth needs bytes in flight: ~3.35 TB/s x ~0.7 us ~= 2.3 MB over 132 SMs, ~18 KB per
 *   SM. Each block keeps two chunks of 16 rows in flight (cp.async groups), 9-35 KB per block
 *   depending on the type, and several blocks fit per SM.
 * - Coalescing without alignment games: blocks of 18/34/210 bytes are not 16-byte aligned, so
 *   the block copies raw row bytes (16 B per thread, consecutive threads consecutive bytes) to
 *   shared memory and decodes there; chunks are whole numbers of blocks whose size is a
 *   multiple of 16 (sl_qt<T>::CBB), so chunk starts stay aligned.
 * - Shared-memory bandwidth is the second limit (weights written + read once, x read once per
 *   4 rows): x is staged with a 4-float pad per unit so that the lanes' 16-byte reads of 32
 *   different units hit 8 distinct bank quads (conflict-free, 4 wavefronts per warp load).
 * - Decode without I2F (quarter rate on Hopper): bytes become floats through the 2^23 mantissa
 *   trick (sl_byte_f), one PRMT + one FADD each.
 * Shared memory layout per block (dynamic): W stages [STAGES][16 rows][CBB bytes], then X
 * stages [STAGES][NB][32*UPL units][UNIT + 4 floats]. Invariant: stage s holds chunk ch with
 * ch % STAGES == s from the wait of iteration ch until the barrier that ends it. */
#ifndef SL_KERNELS_CUDA_GEMV_CUH
#define SL_KERNELS_CUDA_GEMV_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/moe_combine.cuh" /* the fused combine's body */
#include "kernels/cuda/rows.cuh"        /* ROW_THREADS: the fused norms' sums */

enum {
    GV_WARPS = 4, GV_R = 4, GV_ROWS = GV_WARPS * GV_R, GV_STAGES = 3,
    GV_THREADS = 32 * GV_WARPS
};

template <uint32_t T, int NB> struct gv_cfg {
    typedef sl_qt<T> Q;
    static constexpr int XU = Q::UNIT + 4;      /* padded unit stride in x staging (floats) */
    static constexpr int UPC = 32 * Q::UPL;     /* units per chunk */
    static constexpr int CE = UPC * Q::UNIT;    /* elements per chunk */
    static constexpr size_t W_STAGE = (size_t)GV_ROWS * Q::CBB;
    static constexpr size_t X_STAGE = (size_t)NB * UPC * XU * sizeof(float);
    static constexpr size_t BYTES = GV_STAGES * (W_STAGE + X_STAGE);
    static_assert(Q::CBB % 16 == 0, "chunk bytes must keep chunk starts 16-byte aligned");
    static_assert(W_STAGE % 16 == 0 && X_STAGE % 16 == 0, "stage alignment");
};

struct gv_args {
    const uint8_t *w;           /* dense / rows: the matrix; experts: NULL */
    const void *const *wptrs;   /* experts: [n_expert] matrices; else NULL */
    const int32_t *ids;         /* experts: [gridDim.z] selected ids */
    int32_t n_expert;
    const int32_t *idx;         /* rows: [n_out] row list; else NULL (identity) */
    int64_t n_out, rows, cols, row_bytes;
    const float *x;
    int64_t x_estride;          /* floats between the X of consecutive slot groups (0: shared) */
    int32_t x_group;            /* slots per X (>= 1): slot s reads X group s / x_group */
    float *y;
    int64_t y_bstride, y_estride;
    int n_batch;
    bool scatter;
    /* experts of per-expert widths (hot/cold parts): [n_expert + 1] neuron offsets, device;
     * NULL: every expert is rows x cols. ff_cols: the width is the column count (down'),
     * cols the widest and X's stride; else the row count (gate', up'), rows the widest. */
    const int64_t *ff_at;
    bool ff_cols;
    /* the Q8 body's dense epilogue (sl_cuda_gemv_add_norm: one token, no row list): res (NULL:
     * none) [n_out] += y; then with done, the grid's last block to finish (sl_last_block)
     * stores xn = rms_norm(res) * nw (nw NULL: no weight), as rows.cuh's add_rms_norm_body */
    float *res;
    const float *nw;
    float eps;
    float *xn;
    unsigned *done;
    /* the experts form's (sl_cuda_gemv_experts_combine: slots t * c_k + i of tokens t < gridDim.z
     * / c_k): with done (a counter per block column) and c_out, the last of a column's blocks
     * stores its rows of out [t][n_out] = c_res + the slots' y weighted by c_w [t][c_k], summed
     * by c_idx's expert order (moe_combine.cuh) */
    const int32_t *c_idx;
    const float *c_w;
    int c_k;
    const float *c_res;
    float *c_out;
    /* k_gemv_qx_pre's x already quantised, one vector (qx_x_at's layout, qx_quant_block) */
    const uint8_t *xq8;
};

/* Narrows a to expert e's part (gv_args.ff_at); false: nothing to compute (a zero width of
 * down', or a width that is no whole number of blocks), its outputs are 0. Rows past a
 * gate'/up' width are outside a.rows and come out 0 like any unlisted row. */
template <uint32_t T> static __device__ __forceinline__ bool gv_part(gv_args &a, int32_t e)
{
    typedef sl_qt_block<T> B;
    const int64_t w = a.ff_at[e + 1] - a.ff_at[e];
    if (!a.ff_cols) {
        a.rows = max((int64_t)0, min(a.rows, w));
        return true;
    }
    if (w <= 0 || w > a.cols || w % B::ELEMS) return false;
    a.cols = w;
    a.row_bytes = w / B::ELEMS * B::BYTES;
    return true;
}

/* k_gemv's body: smem is the block's dynamic shared memory (gv_cfg<T, NB>::BYTES, 16-byte
 * aligned) */
template <uint32_t T, int NB>
static __device__ __forceinline__ void gv_block(gv_args a, uint8_t *smem)
{
    typedef sl_qt<T> Q;
    typedef gv_cfg<T, NB> C;
    constexpr bool FLOAT_T = sl_qt_block<T>::FLOAT;
    __shared__ int64_t src_row[GV_ROWS]; /* source row of each local row, -1 = none */
    uint8_t *ws = smem;
    float *xs = (float *)(void *)(smem + GV_STAGES * C::W_STAGE);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t o0 = (int64_t)blockIdx.x * GV_ROWS;
    const int b0 = (int)blockIdx.y * NB;
    const int nb = min(NB, a.n_batch - b0);
    const int slot = (int)blockIdx.z;
    float *Y = a.y + (int64_t)slot * a.y_estride + (int64_t)b0 * a.y_bstride;

    const uint8_t *W = a.w;
    if (a.wptrs) {
        const int32_t e = a.ids[slot];
        /* uniform over the block, before any barrier */
        if (e < 0 || e >= a.n_expert || (a.ff_at && !gv_part<T>(a, e))) {
            for (int i = tid; i < GV_ROWS * NB; i += GV_THREADS) {
                const int64_t o = o0 + i % GV_ROWS;
                if (o < a.n_out && i / GV_ROWS < nb)
                    Y[(int64_t)(i / GV_ROWS) * a.y_bstride + o] = 0.0f;
            }
            return;
        }
        W = (const uint8_t *)a.wptrs[e];
    }
    const float *X = a.x + (int64_t)(slot / a.x_group) * a.x_estride + (int64_t)b0 * a.cols;

    if (tid < GV_ROWS) {
        const int64_t o = o0 + tid;
        int64_t r = -1;
        if (o < a.n_out) {
            r = a.idx ? (int64_t)a.idx[o] : o;
            if (r < 0 || r >= a.rows) r = -1;
        }
        src_row[tid] = r;
    }
    __syncthreads();

    const bool w_al = ((uintptr_t)W & 15) == 0 && (a.row_bytes & 15) == 0;
    const bool x_al = ((uintptr_t)X & 15) == 0 && (a.cols & 3) == 0 && (a.x_estride & 3) == 0;
    const int64_t n_chunks = (a.cols + C::CE - 1) / C::CE;

    auto load = [&](int64_t ch, int st) {
        const int64_t cb0 = ch * Q::CBB;
        const int nbytes = (int)min((int64_t)Q::CBB, a.row_bytes - cb0);
        const int fill = FLOAT_T ? (nbytes + 31) / 32 * 32 : nbytes; /* zero the partial unit */
        uint8_t *wst = ws + st * C::W_STAGE;
        constexpr int VPR = Q::CBB / 16;
        for (int t = tid; t < GV_ROWS * VPR; t += GV_THREADS) {
            const int rr = t / VPR, off = (t % VPR) * 16;
            const int64_t r = src_row[rr];
            if (r < 0 || off >= fill) continue;
            const uint8_t *g = W + r * a.row_bytes + cb0 + off;
            uint8_t *d = wst + rr * Q::CBB + off;
            if (w_al && off + 16 <= nbytes) {
                sl_cp_async16(d, g);
            } else {
                for (int k = 0; k < 16; k++) d[k] = off + k < nbytes ? g[k] : (uint8_t)0;
            }
        }
        const int64_t e0 = ch * C::CE;
        const int ne = (int)min((int64_t)C::CE, a.cols - e0);
        float *xst = xs + st * (C::X_STAGE / sizeof(float));
        constexpr int VPX = C::CE / 4;
        for (int t = tid; t < NB * VPX; t += GV_THREADS) {
            const int b = t / VPX, e = (t % VPX) * 4;
            if (b >= nb) break;
            float *d = xst + b * (C::UPC * C::XU) + (e / Q::UNIT) * C::XU + e % Q::UNIT;
            const float *g = X + (int64_t)b * a.cols + e0 + e;
            if (x_al && e + 4 <= ne) {
                sl_cp_async16(d, g);
            } else {
                for (int k = 0; k < 4; k++) d[k] = e + k < ne ? g[k] : 0.0f;
            }
        }
    };

    bool rv[GV_R];
#pragma unroll
    for (int r = 0; r < GV_R; r++) rv[r] = src_row[warp * GV_R + r] >= 0;
    float acc[GV_R][NB];
#pragma unroll
    for (int r = 0; r < GV_R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;

#pragma unroll
    for (int st = 0; st < GV_STAGES - 1; st++) {
        if (st < n_chunks) load(st, st);
        sl_cp_async_commit();
    }
    for (int64_t ch = 0; ch < n_chunks; ch++) {
        const int64_t nx = ch + GV_STAGES - 1;
        if (nx < n_chunks) load(nx, (int)(nx % GV_STAGES));
        sl_cp_async_commit(); /* possibly empty: keeps the group count uniform */
        sl_cp_async_wait<GV_STAGES - 1>();
        __syncthreads();

        const int st = (int)(ch % GV_STAGES);
        int units;
        if (FLOAT_T) {
            const int ne = (int)min((int64_t)C::CE, a.cols - ch * C::CE);
            units = (ne + Q::UNIT - 1) / Q::UNIT;
        } else {
            units = (int)(min((int64_t)Q::CBB, a.row_bytes - ch * Q::CBB) / Q::BB) * Q::SUBS;
        }
        const uint8_t *wst = ws + st * C::W_STAGE + (warp * GV_R) * Q::CBB;
        const float *xst = xs + st * (C::X_STAGE / sizeof(float));
#pragma unroll
        for (int j = 0; j < Q::UPL; j++) {
            const int u = lane + 32 * j;
            if (u >= units) continue;
            const int blk = u / Q::SUBS, sub = u % Q::SUBS;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b >= nb) continue;
                float xr[Q::UNIT];
                const float4 *xp =
                    (const float4 *)(const void *)(xst + b * (C::UPC * C::XU) + u * C::XU);
#pragma unroll
                for (int i = 0; i < Q::UNIT / 4; i++) {
                    const float4 v = xp[i];
                    xr[4 * i] = v.x;
                    xr[4 * i + 1] = v.y;
                    xr[4 * i + 2] = v.z;
                    xr[4 * i + 3] = v.w;
                }
                float sx = 0.0f;
                if (Q::NEED_SX) {
#pragma unroll
                    for (int i = 0; i < Q::UNIT; i++) sx += xr[i];
                }
#pragma unroll
                for (int r = 0; r < GV_R; r++)
                    if (rv[r]) acc[r][b] += Q::dot(wst + r * Q::CBB + blk * Q::BB, sub, xr, sx);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < GV_R; r++) {
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = sl_warp_sum(acc[r][b]);
            const int rr = warp * GV_R + r;
            const int64_t o = o0 + rr;
            if (lane != 0 || b >= nb || o >= a.n_out) continue;
            const int64_t src = src_row[rr];
            if (a.scatter) {
                if (src >= 0) Y[(int64_t)b * a.y_bstride + src] = v;
            } else {
                Y[(int64_t)b * a.y_bstride + o] = src >= 0 ? v : 0.0f;
            }
        }
    }
}

/* ---- Q8 activations: Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4 with dp4a, one vector --------
 *
 * Why: measured on the H100 (bench kernels, ncu, 2026-11-24), the F32-activation kernel above is
 * issue-bound on the low-bit types: ~3 instructions per weight (byte -> float, FMA) plus the
 * staging loops reach 33% (Q4_K) and 49% (Q8_0) of HBM bandwidth while F16 (1 instruction per
 * byte) reaches 80%. Quantizing x to int8 once per block (ggml's Q8_1: per 32 values a scale
 * d = max|x| / 127 and d * sum(q)) lets one dp4a do four weights, ~1 instruction per weight.
 * Weights are read straight from global memory into registers (qx.cuh sl_qx_load: Q4_K /
 * Q5_K rows are 16-byte multiples, read as vectors; Q8_0's 34-byte and Q6_K's 210-byte blocks
 * and MXFP4's 17-byte ones as aligned words, funnel-shifted; IQ4_XS's 136-byte ones as 8-byte
 * words), so there is no weight staging and no barrier in the main loop. A block of 8 warps
 * owns 32 rows (4 per warp, each x unit loaded from shared memory serves 4 rows), which
 * amortises the x quantisation; Q5_K / Q6_K (20 / 18 words a row) keep the 4 rows too. At
 * most 128 registers (2 blocks an SM, __launch_bounds__), no spills; a 3rd block would spill.
 * Loads in flight (H200 run 1: 0.36 of HBM at 14336 x 4096, 10.6 us for 768 x 2048): a lane
 * loads its unit of all 4 rows into registers before any of them is used, branch-free on an
 * aligned matrix (the alignment is tested once a block, not per load), and the first unit
 * before x is quantised, so the x prologue overlaps HBM latency; one load round trip a unit,
 * where a per-load alignment branch and a row's loads after the previous row's sums gave four.
 * Used where sl_cuda_gemv_q8_act says (n_batch == 1, aligned rows) when the context does not ask
 * for F32 activations (sl_cuda_ctx_set_f32_act, the verification mode). */

enum { QX_WARPS = 8, QX_R = 4, QX_ROWS = QX_WARPS * QX_R, QX_THREADS = 32 * QX_WARPS };

/* Unit u of the warp's rows (src < 0: none, not loaded) into w. */
template <uint32_t T, bool AL>
static __device__ __forceinline__ void qx_load_rows(const uint8_t *W, int64_t row_bytes,
                                                    const int64_t *src, int64_t u, sl_qx_w *w)
{
#pragma unroll
    for (int r = 0; r < QX_R; r++)
        if (src[r] >= 0) sl_qx_load<T, AL>(W + src[r] * row_bytes, u, w[r]);
}

/* The main loop over a lane's units; w holds unit `lane`'s words on entry (loaded before the
 * x prologue). Rows with src < 0 are neither loaded nor summed. */
template <uint32_t T, bool AL>
static __device__ __forceinline__ void qx_rows(const uint8_t *W, int64_t row_bytes,
                                               const int64_t *src, int64_t n_units, int lane,
                                               const int8_t *xq, const float *xd,
                                               const float *xs, sl_qx_w *w, float *acc)
{
    for (int64_t u = lane; u < n_units; u += 32) {
        const int4 x0 = *(const int4 *)(const void *)(xq + 32 * u);
        const int4 x1 = *(const int4 *)(const void *)(xq + 32 * u + 16);
        const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const float d = xd[u], sxu = xs[u];
#pragma unroll
        for (int r = 0; r < QX_R; r++)
            if (src[r] >= 0) acc[r] += sl_qx_term<T>(w[r], u, xv, d, sxu);
        if (u + 32 < n_units) qx_load_rows<T, AL>(W, row_bytes, src, u + 32, w);
    }
}

/* Unit `lane` of the warp's rows into w, loaded before x is quantised so that their latency
 * overlaps it; returns whether W takes the aligned loads. row_bytes is a multiple of 16 on
 * this path (sl_cuda_gemv_q8_act) or the type's AL form takes rows of any length
 * (sl_qx_any_rows): W's alignment decides for every row. */
template <uint32_t T>
static __device__ __forceinline__ bool qx_first(const uint8_t *W, int64_t row_bytes,
                                                const int64_t *src, int64_t n_units, int lane,
                                                sl_qx_w *w)
{
    const bool al = ((uintptr_t)W & (uintptr_t)(sl_qx_align(T) - 1)) == 0;
    if (lane < n_units) {
        if (al) qx_load_rows<T, true>(W, row_bytes, src, lane, w);
        else qx_load_rows<T, false>(W, row_bytes, src, lane, w);
    }
    return al;
}

/* The lane's sums of the warp's rows (qx_rows) after qx_first and x's quantisation */
template <uint32_t T>
static __device__ __forceinline__ void qx_sum(bool al, const uint8_t *W, int64_t row_bytes,
                                              const int64_t *src, int64_t n_units, int lane,
                                              const int8_t *xq, const float *xd,
                                              const float *xs, sl_qx_w *w, float *acc)
{
    if (al) qx_rows<T, true>(W, row_bytes, src, n_units, lane, xq, xd, xs, w, acc);
    else qx_rows<T, false>(W, row_bytes, src, n_units, lane, xq, xd, xs, w, acc);
}

/* x's place in k_gemv_qx's dynamic shared memory qsm (qx_smem(cols) bytes, 16-byte aligned):
 * xq [cols] int8, then per unit of 32 xd (its scale d) and xs (d * sum q) */
static __device__ __forceinline__ void qx_x_at(uint8_t *qsm, int64_t cols, int8_t **xq,
                                               float **xd, float **xs)
{
    *xq = (int8_t *)qsm;
    *xd = (float *)(void *)(qsm + (cols + 15) / 16 * 16);
    *xs = *xd + cols / 32;
}

/* An RMS norm in front of x's quantisation (the multi-matrix GEMV's norm + Q/K/V, one launch
 * for two): with `on`, the values quantised are X's row normed as rows.cuh's rms_norm_body
 * computes it (sl_rms_scale's factor r, then x * r * w; w NULL: x * r), and where `out` is
 * not NULL they are also stored there ([cols], any alignment; one block a row does). */
struct qx_norm {
    bool on;
    const float *w;
    float eps;
    float *out;
    float *red; /* 32 floats of shared memory for sl_rms_scale */
};

/* X [cols] (any alignment) -> xq, xd, xs as ggml's Q8_1 (qx_x_at); every thread of the block
 * calls it, and a barrier after it makes the values visible to the others; nm.on: X normed
 * by the factor r first (qx_norm) */
static __device__ __forceinline__ void qx_quant_x(const float *X, int64_t cols, int8_t *xq,
                                                  float *xd, float *xs, const qx_norm &nm,
                                                  float r)
{
    const int tid = threadIdx.x;
    /* x -> int8: 4 threads per unit of 32, 8 values each; the trip count is uniform so the
     * shuffles see full warps */
    const int64_t n_groups = cols / 8;
    const bool x_al = ((uintptr_t)X & 15) == 0;
    for (int64_t base = 0; base < n_groups; base += QX_THREADS) {
        const int64_t g = base + tid;
        const bool ok = g < n_groups;
        float v[8];
        if (ok && x_al) {
            const float4 p0 = __ldg((const float4 *)(const void *)(X + 8 * g));
            const float4 p1 = __ldg((const float4 *)(const void *)(X + 8 * g + 4));
            v[0] = p0.x, v[1] = p0.y, v[2] = p0.z, v[3] = p0.w;
            v[4] = p1.x, v[5] = p1.y, v[6] = p1.z, v[7] = p1.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = ok ? X[8 * g + i] : 0.0f;
        }
        if (nm.on && ok) {
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = v[i] * r * (nm.w ? nm.w[8 * g + i] : 1.0f);
            if (nm.out)
#pragma unroll
                for (int i = 0; i < 8; i++) nm.out[8 * g + i] = v[i];
        }
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) amax = fmaxf(amax, fabsf(v[i]));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        const float d = amax / 127.0f, id = d > 0.0f ? 127.0f / amax : 0.0f;
        int q[8], qsum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            q[i] = __float2int_rn(v[i] * id);
            qsum += q[i];
        }
        qsum += __shfl_xor_sync(0xffffffffu, qsum, 1);
        qsum += __shfl_xor_sync(0xffffffffu, qsum, 2);
        if (ok) {
            uint2 pk;
            pk.x = (uint32_t)(q[0] & 0xFF) | (uint32_t)(q[1] & 0xFF) << 8 |
                   (uint32_t)(q[2] & 0xFF) << 16 | (uint32_t)(q[3] & 0xFF) << 24;
            pk.y = (uint32_t)(q[4] & 0xFF) | (uint32_t)(q[5] & 0xFF) << 8 |
                   (uint32_t)(q[6] & 0xFF) << 16 | (uint32_t)(q[7] & 0xFF) << 24;
            *(uint2 *)(void *)(xq + 8 * g) = pk;
            if ((g & 3) == 0) {
                xd[g >> 2] = d;
                xs[g >> 2] = d * (float)qsum;
            }
        }
    }
}

/* One pass of a warp's rows over W: the first unit's loads, then (QX) X quantised into xq / xd
 * / xs by the block (normed first with nm.on: its factor after the loads are issued, so their
 * latency overlaps it too) and a barrier, then the sums into acc. The one sequence of qx_block
 * and of gemv_multi.cuh's bodies (!QX: a second matrix on the x already there; X unread). */
template <uint32_t T, bool QX>
static __device__ __forceinline__ void qx_pass(const uint8_t *W, int64_t row_bytes,
                                               const int64_t *src, const float *X, int64_t cols,
                                               int lane, int8_t *xq, float *xd, float *xs,
                                               float *acc, const qx_norm &nm)
{
    const int64_t n_units = cols / 32;
    sl_qx_w w[QX_R];
    const bool al = qx_first<T>(W, row_bytes, src, n_units, lane, w);
    if (QX) {
        const float r = nm.on ? sl_rms_scale(X, cols, nm.eps, nm.red) : 1.0f;
        qx_quant_x(X, cols, xq, xd, xs, nm, r);
        __syncthreads();
    }
    qx_sum<T>(al, W, row_bytes, src, n_units, lane, xq, xd, xs, w, acc);
}

/* Y's rows [o0, o0 + QX_ROWS) below n as 0 (a slot whose expert is out of range), by the
 * block; called uniformly over it, before any barrier */
static __device__ __forceinline__ void qx_zero_rows(float *Y, int64_t o0, int64_t n)
{
    for (int i = threadIdx.x; i < QX_ROWS; i += QX_THREADS)
        if (o0 + i < n) Y[o0 + i] = 0.0f;
}

/* Before k_gemv_qx's wait (common.cuh sl_l2_prefetch): a dense matrix's rows of the block
 * (contiguous: no row list, no expert, whose pointer would come from memory) into L2; from
 * the parameters alone */
static __device__ __forceinline__ void qx_l2_prefetch(const gv_args &a)
{
    const int64_t o0 = (int64_t)blockIdx.x * QX_ROWS, n = min(a.n_out, a.rows);
    if (!a.wptrs && !a.idx && o0 < n)
        sl_l2_prefetch(a.w + o0 * a.row_bytes, min((int64_t)QX_ROWS, n - o0) * a.row_bytes,
                       threadIdx.x, QX_THREADS);
}

/* k_gemv_qx's body: qsm is the block's dynamic shared memory (qx_smem(a.cols) bytes, 16-byte
 * aligned); PRE (k_gemv_qx_pre): x is a.xq8, quantised before the launch, and qsm unused */
template <uint32_t T, bool PRE = false>
static __device__ __forceinline__ void qx_block(gv_args a, uint8_t *qsm)
{
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t o0 = (int64_t)blockIdx.x * QX_ROWS;
    const int slot = (int)blockIdx.z;
    float *Y = a.y + (int64_t)slot * a.y_estride;
    const uint8_t *W = a.w;
    if (a.wptrs) {
        const int32_t e = a.ids[slot];
        /* uniform over the block, before any barrier */
        if (e < 0 || e >= a.n_expert || (a.ff_at && !gv_part<T>(a, e))) {
            qx_zero_rows(Y, o0, a.n_out);
            return;
        }
        W = (const uint8_t *)a.wptrs[e];
    }
    const float *X = a.x + (int64_t)(slot / a.x_group) * a.x_estride;
    /* after gv_part: an expert part's own columns (the widest's bytes were reserved) */
    int8_t *xq;
    float *xd, *xs;
    qx_x_at(PRE ? (uint8_t *)a.xq8 : qsm, a.cols, &xq, &xd, &xs);

    int64_t src[QX_R];
#pragma unroll
    for (int r = 0; r < QX_R; r++) {
        const int64_t o = o0 + warp * QX_R + r;
        int64_t rr = -1;
        if (o < a.n_out) {
            rr = a.idx ? (int64_t)a.idx[o] : o;
            if (rr < 0 || rr >= a.rows) rr = -1;
        }
        src[r] = rr;
    }
    float acc[QX_R] = {};
    qx_pass<T, !PRE>(W, a.row_bytes, src, X, a.cols, lane, xq, xd, xs, acc, qx_norm{});
#pragma unroll
    for (int r = 0; r < QX_R; r++) {
        const float v = sl_warp_sum(acc[r]);
        const int64_t o = o0 + warp * QX_R + r;
        if (lane != 0 || o >= a.n_out) continue;
        if (a.scatter) {
            if (src[r] >= 0) Y[src[r]] = v;
        } else {
            const float y = src[r] >= 0 ? v : 0.0f;
            Y[o] = y;
            if (a.res) a.res[o] = __fadd_rn(a.res[o], y); /* sl_cuda_add's rounding */
        }
    }
}

/* k_gemv_qx's epilogue with a.done and a.c_out: a.done [gridDim.x] holds a counter per block
 * column (rows [o0, o0 + QX_ROWS)), and the last of the column's slot blocks to finish combines
 * those rows of every token (mc_combine_col, the bits of sl_cuda_moe_combine): the combine
 * spread over gridDim.x blocks, not left to one. Every thread of every block calls it. */
static __device__ __forceinline__ void qx_combine_last(const gv_args &a)
{
    if (!sl_last_of(a.done + blockIdx.x, gridDim.y * gridDim.z)) return;
    __shared__ int order[MC_MAX_K];
    const int64_t j = (int64_t)blockIdx.x * QX_ROWS + threadIdx.x;
    for (int64_t t = 0; t < (int64_t)gridDim.z / a.c_k; t++) {
        if (threadIdx.x == 0) mc_order(a.c_idx, a.c_k, t, order);
        __syncthreads();
        if (threadIdx.x < QX_ROWS && j < a.n_out)
            mc_combine_col(a.y, NULL, a.c_w, a.c_k, a.n_out, a.c_res, a.c_out, t, j, order);
        __syncthreads(); /* order is rewritten for the next token */
    }
}

/* k_gemv_qx's epilogue with a.done: in the last block, xn = rms_norm(res) * nw over the
 * n_out values every block added into res (the bits of add_rms_norm_body, whose sums run
 * over the same 256 threads); every thread of every block calls it */
static __device__ __forceinline__ void qx_norm_last(const gv_args &a)
{
    static_assert((int)QX_THREADS == (int)ROW_THREADS, "the norm's sums are k_add_rms_norm's");
    if (!sl_last_block(a.done)) return;
    __shared__ float red[32];
    const float r = sl_rms_scale<true>(a.res, a.n_out, a.eps, red);
    for (int64_t i = threadIdx.x; i < a.n_out; i += QX_THREADS)
        a.xn[i] = sl_ldcg(a.res + i) * r * (a.nw ? a.nw[i] : 1.0f);
}

/* A launch's grid - x: blocks of output rows, y: groups of nb batch rows, z: slots - and the
 * F32 body's batch width nb (1 or 4); q8: k_gemv_qx's (n_batch 1). The one rule gemv.cu
 * launches by and the host test runs by. */
struct gv_grid {
    unsigned x, y, z;
    int nb;
};
static __host__ __device__ inline gv_grid gv_grid_of(const gv_args &a, int n_slots, bool q8)
{
    const int nb = q8 || a.n_batch == 1 ? 1 : 4;
    const int64_t rows = q8 ? (int64_t)QX_ROWS : (int64_t)GV_ROWS; /* two enums */
    return gv_grid{(unsigned)((a.n_out + rows - 1) / rows), (unsigned)((a.n_batch + nb - 1) / nb),
                   (unsigned)n_slots, nb};
}

/* X [cols] quantised into out (qx_x_at's layout, qx_smem(cols) bytes, 16-byte aligned) by one
 * block of QX_THREADS, as every k_gemv_qx block quantises it: k_gemv_qx_pre's x, once */
static __device__ __forceinline__ void qx_quant_block(const float *X, int64_t cols, uint8_t *out)
{
    int8_t *xq;
    float *xd, *xs;
    qx_x_at(out, cols, &xq, &xd, &xs);
    qx_quant_x(X, cols, xq, xd, xs, qx_norm{}, 1.0f);
}

/* Dynamic shared memory of k_gemv_qx for `cols` (x as int8, then two floats per unit). */
static __host__ __device__ size_t qx_smem(int64_t cols)
{
    return (size_t)(cols + 15) / 16 * 16 + (size_t)(cols / 32) * 8;
}

/* Largest cols the Q8-activation path takes: its x fits beside the default 48 KiB limit. */
enum { QX_MAX_COLS = 32768 };

#endif
