/* kernels/cuda/gemv.cu: see gemv.h for the contract and the design summary.
 *
 * Why this shape (H100 decode, W read once from HBM, x tiny):
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
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/gemv.h"

enum { GV_WARPS = 4, GV_R = 4, GV_ROWS = GV_WARPS * GV_R, GV_STAGES = 3, GV_THREADS = 32 * GV_WARPS };

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
    int64_t x_estride;          /* floats between the X of consecutive expert slots (0: shared) */
    float *y;
    int64_t y_bstride, y_estride;
    int n_batch;
    bool scatter;
};

template <uint32_t T, int NB>
static __global__ void __launch_bounds__(GV_THREADS) k_gemv(gv_args a)
{
    typedef sl_qt<T> Q;
    typedef gv_cfg<T, NB> C;
    constexpr bool FLOAT_T = T == 0 || T == 1 || T == 30;
    extern __shared__ __align__(16) uint8_t smem[];
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
        if (e < 0 || e >= a.n_expert) { /* uniform over the block, before any barrier */
            for (int i = tid; i < GV_ROWS * NB; i += GV_THREADS) {
                const int64_t o = o0 + i % GV_ROWS;
                if (o < a.n_out && i / GV_ROWS < nb) Y[(int64_t)(i / GV_ROWS) * a.y_bstride + o] = 0.0f;
            }
            return;
        }
        W = (const uint8_t *)a.wptrs[e];
    }
    const float *X = a.x + (int64_t)slot * a.x_estride + (int64_t)b0 * a.cols;

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
                const float4 *xp = (const float4 *)(const void *)(xst + b * (C::UPC * C::XU) + u * C::XU);
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

/* ---- host side ------------------------------------------------------------------------------ */

struct gv_launch {
    gv_args a;
    dim3 grid;
    cudaStream_t s;
    int nb; /* template batch width: 1 or 4 */
    template <uint32_t T> void operator()()
    {
        if (nb == 1) k_gemv<T, 1><<<grid, GV_THREADS, gv_cfg<T, 1>::BYTES, s>>>(a);
        else k_gemv<T, 4><<<grid, GV_THREADS, gv_cfg<T, 4>::BYTES, s>>>(a);
    }
};

/* Raises the dynamic shared memory limit of every instantiation (once per context). */
struct gv_attr {
    cudaError_t rc = cudaSuccess;
    size_t max_bytes = 0;
    template <uint32_t T> void operator()()
    {
        const size_t b1 = gv_cfg<T, 1>::BYTES, b4 = gv_cfg<T, 4>::BYTES;
        if (max_bytes < b4) max_bytes = b4;
        if (rc == cudaSuccess)
            rc = cudaFuncSetAttribute(k_gemv<T, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b1);
        if (rc == cudaSuccess)
            rc = cudaFuncSetAttribute(k_gemv<T, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)b4);
    }
};

static const uint32_t GV_TYPES[] = {0, 1, 30, 2, 3, 6, 7, 8, 39, 12, 13, 14};

static bool host_type(uint32_t type, int64_t *blk, int64_t *bytes)
{
    switch (type) {
    case 0: *blk = 1, *bytes = 4; return true;
    case 1: case 30: *blk = 1, *bytes = 2; return true;
    case 2: *blk = 32, *bytes = 18; return true;
    case 3: *blk = 32, *bytes = 20; return true;
    case 6: *blk = 32, *bytes = 22; return true;
    case 7: *blk = 32, *bytes = 24; return true;
    case 8: *blk = 32, *bytes = 34; return true;
    case 39: *blk = 32, *bytes = 17; return true;
    case 12: *blk = 256, *bytes = 144; return true;
    case 13: *blk = 256, *bytes = 176; return true;
    case 14: *blk = 256, *bytes = 210; return true;
    default: return false;
    }
}

extern "C" bool sl_cuda_gemv_supported(uint32_t type)
{
    int64_t b, s;
    return host_type(type, &b, &s);
}

extern "C" size_t sl_cuda_gemv_row_bytes(uint32_t type, int64_t cols)
{
    int64_t blk, bytes;
    if (!host_type(type, &blk, &bytes) || cols < 1 || cols % blk) return 0;
    if (cols / blk > (int64_t)(SIZE_MAX / 2) / bytes) return 0;
    return (size_t)(cols / blk * bytes);
}

/* Shared checks of every entry point; fills a->row_bytes. */
static sl_status gv_check(const char *fn, uint32_t type, int64_t rows, int64_t cols,
                          int64_t n_batch, gv_args *a, sl_error *err)
{
    if (!sl_cuda_gemv_supported(type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: type code %u is not supported by the CUDA GEMV", fn, type);
    if (rows < 1 || cols < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld, cols = %lld must be >= 1", fn,
                            (long long)rows, (long long)cols);
    const size_t rb = sl_cuda_gemv_row_bytes(type, cols);
    if (!rb)
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a multiple of the "
                            "type's block size", fn, (long long)cols);
    if (n_batch < 1 || n_batch > SL_CUDA_GEMV_MAX_BATCH)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_batch = %lld not in [1, %d]", fn,
                            (long long)n_batch, (int)SL_CUDA_GEMV_MAX_BATCH);
    a->row_bytes = (int64_t)rb;
    a->rows = rows;
    a->cols = cols;
    a->n_batch = (int)n_batch;
    return SL_OK;
}

static sl_status gv_run(const char *fn, sl_cuda_ctx *c, uint32_t type, const gv_args &a,
                        int n_slots, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    const int64_t gx = (a.n_out + GV_ROWS - 1) / GV_ROWS;
    if (gx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %lld output rows exceed the grid", fn,
                            (long long)a.n_out);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    if (!c->gemv_smem_ready) {
        gv_attr at;
        for (uint32_t t : GV_TYPES) sl_qt_dispatch(t, at);
        if (at.rc != cudaSuccess)
            return sl__cu_fail(err, at.rc, "cudaFuncSetAttribute(k_gemv)", __FILE__, __LINE__);
        if (at.max_bytes > c->info.smem_per_block_optin)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: the GEMV needs %zu bytes of shared "
                                "memory per block, the device allows %llu", fn, at.max_bytes,
                                (unsigned long long)c->info.smem_per_block_optin);
        c->gemv_smem_ready = true;
    }
    const int nb = a.n_batch == 1 ? 1 : 4;
    gv_launch L{a, dim3((unsigned)gx, (unsigned)((a.n_batch + nb - 1) / nb), (unsigned)n_slots),
                c->stream, nb};
    sl_qt_dispatch(type, L);
    SL_CU_LAUNCH(err, "k_gemv");
    return SL_OK;
}

extern "C" sl_status sl_cuda_gemv(sl_cuda_ctx *c, uint32_t type, const void *d_w, int64_t rows,
                                  int64_t cols, const float *d_x, int64_t n_batch, float *d_y,
                                  sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, n_batch, &a, err);
    if (st) return st;
    if (!d_w || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : "d_y");
    a.w = (const uint8_t *)d_w;
    a.n_out = rows;
    a.x = d_x;
    a.y = d_y;
    a.y_bstride = rows;
    return gv_run(__func__, c, type, a, 1, err);
}

extern "C" sl_status sl_cuda_gemv_rows(sl_cuda_ctx *c, uint32_t type, const void *d_w,
                                       int64_t rows, int64_t cols, const int32_t *d_idx,
                                       int64_t n_idx, bool scatter, const float *d_x,
                                       int64_t n_batch, float *d_y, sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, n_batch, &a, err);
    if (st) return st;
    if (n_idx < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_idx = %lld < 0", __func__, (long long)n_idx);
    if (n_idx == 0) return c ? SL_OK : sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", __func__);
    if (!d_w || !d_x || !d_y || !d_idx)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_w ? "d_w" : !d_x ? "d_x" : !d_y ? "d_y" : "d_idx");
    a.w = (const uint8_t *)d_w;
    a.idx = d_idx;
    a.n_out = n_idx;
    a.x = d_x;
    a.y = d_y;
    a.scatter = scatter;
    a.y_bstride = scatter ? rows : n_idx;
    return gv_run(__func__, c, type, a, 1, err);
}

extern "C" sl_status sl_cuda_gemv_experts(sl_cuda_ctx *c, uint32_t type,
                                          const void *const *d_wptrs, int32_t n_expert,
                                          const int32_t *d_ids, int32_t n_sel, int64_t rows,
                                          int64_t cols, const float *d_x, bool x_per_expert,
                                          float *d_y, sl_error *err)
{
    gv_args a = {};
    sl_status st = gv_check(__func__, type, rows, cols, 1, &a, err);
    if (st) return st;
    if (n_expert < 1 || n_sel < 1 || n_sel > 65535)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_expert = %d must be >= 1 and n_sel = %d "
                            "in [1, 65535]", __func__, n_expert, n_sel);
    if (!d_wptrs || !d_ids || !d_x || !d_y)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__,
                            !d_wptrs ? "d_wptrs" : !d_ids ? "d_ids" : !d_x ? "d_x" : "d_y");
    a.wptrs = d_wptrs;
    a.ids = d_ids;
    a.n_expert = n_expert;
    a.n_out = rows;
    a.x = d_x;
    a.x_estride = x_per_expert ? cols : 0;
    a.y = d_y;
    a.y_bstride = rows;
    a.y_estride = rows;
    return gv_run(__func__, c, type, a, n_sel, err);
}
