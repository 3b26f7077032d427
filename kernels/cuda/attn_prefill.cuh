/* kernels/cuda/attn_prefill.cuh: the tiled prefill attention of sl_cuda_attn_at (ops.h) on the
 * tensor cores, in a header so that tests/kernels_cuda:attn_prefill_host_test runs it on the CPU
 * (host_shim/launch.h, mma.h).
 *
 * Block (x, y) = (kv head, tile of AP_BM rows), a row being one (token, query head of the kv
 * head's group) pair in the order t * group + g, so a GQA group shares every K/V tile. Per chunk
 * of AP_TK positions over the union of the rows' ranges: K and V of the chunk once into shared
 * memory as F16 (one pass over K/V per tile of queries, not per query); S = (scale Q) K^T on the
 * tensor cores (WMMA 16x16x16, F16 in, F32 sums); each row's softcap, mask (its own causal
 * range and window) and online softmax in F32 by 4 threads (max and sum by two xor shuffles),
 * P in F16; O (F32, in shared memory, rescaled by the row's correction) += P V on the tensor
 * cores. Sinks join each row's denominator at the end. Head dims are padded to a multiple of 16
 * with zeros (no term). Precision: Q' = scale q, K, P and V rounded to F16 (as llama.cpp's
 * flash attention): logits within ~2^-10 of |q'||k|; the F32-activation mode keeps the exact
 * per-token kernel (ops.cu). Shared memory: ap_layout (74 KB at head_dim 128, 131 KB at 256,
 * 200 KB for MLA's 576 with K and V one tile). */
#ifndef SL_KERNELS_CUDA_ATTN_PREFILL_CUH
#define SL_KERNELS_CUDA_ATTN_PREFILL_CUH

#include <mma.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h" /* kernels/ref/ops.h (C linkage): sl_attn_temp */

/* AP_MIN_TOKENS: sl_cuda_attn_at takes this kernel from this many tokens on (ops.cu); head
 * dims up to AP_MAX_D when ap_layout's bytes fit the device's shared memory (MLA's 576-wide
 * latent rows do, as K and V are the same rows there) */
enum { AP_BM = 32, AP_TK = 64, AP_THREADS = 128, AP_MAX_D = 576, AP_LDS = AP_TK + 4,
       AP_LDP = AP_TK + 8, AP_MIN_TOKENS = 32 };
static_assert(AP_THREADS == 4 * AP_BM && AP_TK == 4 * 16,
              "4 softmax threads a row, 16 columns each");

struct ap_args {
    const float *q;     /* [n_tok] rows of q_ts floats: [n_head][D] */
    const void *k, *v;  /* the cache: [position][n_kv_head][D] of F32 or F16 */
    const int32_t *pos; /* [n_tok]: token t sees positions .. pos[t] (window: the last ones) */
    float *out;         /* as q */
    int32_t n_tok, D, Dp, group, n_kv_head, window;
    bool kv_same;       /* k == v (MLA's latent rows): one tile in shared memory serves both */
    int64_t q_ts;
    float scale, softcap;
    float temp_scale;   /* sl_attn_params' temperature */
    int32_t temp_len;
    const float *sinks; /* NULL or [n_head] */
};

/* The head dim as the kernel pads it (a multiple of 16, WMMA's k step) */
static __host__ __device__ inline int ap_dp(int D)
{
    return (D + 15) / 16 * 16;
}

/* Byte offsets of the shared regions for padded head dim Dp (a multiple of 16; kv_same: no V
 * region, V is K's): each region a multiple of 32 bytes, as are fragments 16 rows / 16 columns
 * apart within it (WMMA's rule). */
struct ap_smem {
    int ldh, ldo; /* the F16 rows' (Q, K, V) and O's strides, in elements */
    size_t q, k, v, s, p, o, rows, total;
};
static __host__ __device__ inline ap_smem ap_layout(int Dp, bool kv_same)
{
    ap_smem L;
    L.ldh = Dp + 8;
    L.ldo = Dp + 4;
    size_t at = 0;
    L.q = at, at += (size_t)AP_BM * L.ldh * 2;
    L.k = at, at += (size_t)AP_TK * L.ldh * 2;
    L.v = kv_same ? L.k : at;
    if (!kv_same) at += (size_t)AP_TK * L.ldh * 2;
    L.s = at, at += (size_t)AP_BM * AP_LDS * 4;
    L.p = at, at += (size_t)AP_BM * AP_LDP * 2;
    L.o = at, at += (size_t)AP_BM * L.ldo * 4;
    L.rows = at, at += (size_t)AP_BM * 2 * 4;
    L.total = at;
    return L;
}

template <typename KV> static __device__ __forceinline__ float ap_kv(const KV *p, int64_t i);
template <> __device__ __forceinline__ float ap_kv<float>(const float *p, int64_t i)
{
    return p[i];
}
template <> __device__ __forceinline__ float ap_kv<uint16_t>(const uint16_t *p, int64_t i)
{
    return sl_h2f(p[i]);
}

template <typename KV> static __device__ void ap_body(const ap_args &a, uint8_t *sm)
{
    using namespace nvcuda;
    const ap_smem L = ap_layout(a.Dp, a.kv_same);
    const int ldh = L.ldh, ldo = L.ldo, Dp = a.Dp;
    __half *sq = (__half *)(sm + L.q), *sk = (__half *)(sm + L.k), *sv = (__half *)(sm + L.v);
    float *ss = (float *)(sm + L.s), *so = (float *)(sm + L.o);
    __half *sp = (__half *)(sm + L.p);
    int32_t *rp0 = (int32_t *)(sm + L.rows), *rn = rp0 + AP_BM;
    const KV *K = (const KV *)a.k, *V = (const KV *)a.v;
    const int tid = (int)threadIdx.x, warp = tid >> 5;
    const int kvh = (int)blockIdx.x;
    const int64_t nrows = (int64_t)a.n_tok * a.group, r0 = (int64_t)blockIdx.y * AP_BM;
    const int64_t kv_row = (int64_t)a.n_kv_head * a.D;
    /* each row's range [p0, n): n = 0 for rows past the last (no position, no output) */
    for (int r = tid; r < AP_BM; r += AP_THREADS) {
        int32_t p0 = INT32_MAX, n = 0;
        if (r0 + r < nrows) {
            n = a.pos[(r0 + r) / a.group] + 1;
            p0 = a.window > 0 && a.window < n ? n - a.window : 0;
        }
        rp0[r] = p0;
        rn[r] = n;
    }
    for (int i = tid; i < AP_BM * Dp; i += AP_THREADS) {
        const int r = i / Dp, d = i % Dp;
        float x = 0.0f;
        if (r0 + r < nrows && d < a.D) {
            const int64_t t = (r0 + r) / a.group;
            const int h = kvh * a.group + (int)((r0 + r) % a.group);
            x = a.q[t * a.q_ts + (int64_t)h * a.D + d] * a.scale *
                sl_attn_temp(a.temp_scale, a.temp_len, a.pos[t]);
        }
        sq[r * ldh + d] = __float2half_rn(x);
        so[r * ldo + d] = 0.0f;
    }
    __syncthreads();
    int32_t P0 = INT32_MAX, P1 = 0;
    for (int r = 0; r < AP_BM; r++) {
        P0 = rn[r] > 0 && rp0[r] < P0 ? rp0[r] : P0;
        P1 = rn[r] > P1 ? rn[r] : P1;
    }
    /* the softmax's thread layout: row sr, columns sc * 16 .. + 16 of a chunk */
    const int sr = tid >> 2, sc = tid & 3;
    const int32_t my_p0 = rp0[sr], my_n = rn[sr];
    float m_run = -INFINITY, l_run = 0.0f;
    const int rb = warp & 1; /* the warp's 16-row half of the tile in both products */
    for (int32_t j0 = P0; j0 < P1; j0 += AP_TK) {
        for (int i = tid; i < AP_TK * Dp; i += AP_THREADS) {
            const int jj = i / Dp, d = i % Dp;
            float kx = 0.0f, vx = 0.0f;
            if (j0 + jj < P1 && d < a.D) {
                const int64_t off = (int64_t)(j0 + jj) * kv_row + (int64_t)kvh * a.D + d;
                kx = ap_kv<KV>(K, off);
                vx = a.kv_same ? 0.0f : ap_kv<KV>(V, off);
            }
            sk[jj * ldh + d] = __float2half_rn(kx);
            if (!a.kv_same) sv[jj * ldh + d] = __float2half_rn(vx);
        }
        __syncthreads();
        /* S [AP_BM][AP_TK]: warp w the row half w & 1, column blocks 2 (w >> 1) and + 1 */
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int cb = (warp >> 1) * 2 + c;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < Dp; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kb;
                wmma::load_matrix_sync(qa, sq + rb * 16 * ldh + kk, ldh);
                wmma::load_matrix_sync(kb, sk + cb * 16 * ldh + kk, ldh);
                wmma::mma_sync(acc, qa, kb, acc);
            }
            wmma::store_matrix_sync(ss + rb * 16 * AP_LDS + cb * 16, acc, AP_LDS,
                                    wmma::mem_row_major);
        }
        __syncthreads();
        {
            float l[16], mx = -INFINITY;
#pragma unroll
            for (int c = 0; c < 16; c++) {
                const int col = sc * 16 + c;
                const int32_t j = j0 + col;
                float x = ss[sr * AP_LDS + col];
                if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
                l[c] = j >= my_p0 && j < my_n ? x : -INFINITY;
                mx = fmaxf(mx, l[c]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mn = fmaxf(m_run, mx);
            /* no position of the row yet: nothing to correct, every p 0 */
            const float corr = mn == -INFINITY ? 1.0f : expf(m_run - mn);
            /* the denominator sums the F16 weights P V multiplies */
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < 16; c++) {
                const __half ph = __float2half_rn(l[c] == -INFINITY ? 0.0f : expf(l[c] - mn));
                sp[sr * AP_LDP + sc * 16 + c] = ph;
                sum += __half2float(ph);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            l_run = l_run * corr + sum;
            m_run = mn;
            for (int d = sc; d < Dp; d += 4) so[sr * ldo + d] *= corr;
        }
        __syncthreads();
        /* O [AP_BM][Dp] += P V: warp w the row half w & 1, every other column block */
        for (int cb = warp >> 1; cb < Dp / 16; cb += 2) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, so + rb * 16 * ldo + cb * 16, ldo, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < AP_TK; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vb;
                wmma::load_matrix_sync(pa, sp + rb * 16 * AP_LDP + kk, AP_LDP);
                wmma::load_matrix_sync(vb, sv + kk * ldh + cb * 16, ldh);
                wmma::mma_sync(acc, pa, vb, acc);
            }
            wmma::store_matrix_sync(so + rb * 16 * ldo + cb * 16, acc, ldo, wmma::mem_row_major);
        }
        __syncthreads();
    }
    if (my_n == 0) return; /* a row past the last: nothing to write (no barrier follows) */
    const int64_t t = (r0 + sr) / a.group;
    const int h = kvh * a.group + (int)((r0 + sr) % a.group);
    float f = 1.0f, S = l_run;
    if (a.sinks) { /* a sink joins the denominator only */
        const float sk_ = a.sinks[h], M = fmaxf(m_run, sk_);
        f = m_run == -INFINITY ? 0.0f : expf(m_run - M);
        S = l_run * f + expf(sk_ - M);
    }
    for (int d = sc; d < a.D; d += 4)
        a.out[t * a.q_ts + (int64_t)h * a.D + d] = so[sr * ldo + d] * f / S;
}

#ifdef __CUDACC__
template <typename KV>
static __global__ void __launch_bounds__(AP_THREADS) k_attn_prefill(ap_args a)
{
    sl_pdl_enter();
    extern __shared__ __align__(128) uint8_t ap_sm[];
    ap_body<KV>(a, ap_sm);
}
#endif

#endif
