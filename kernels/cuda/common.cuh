/* kernels/cuda/common.cuh: device helpers shared by every .cu file of kernels/cuda (private to the
 * package; never included from C).
 *
 * - Error convention: SL_CU(err, call) evaluates a CUDA runtime call and on failure returns
 *   SL_ERR_DEVICE (SL_ERR_NOMEM for cudaErrorMemoryAllocation) with
 *   "kernels/cuda/FILE.cu:LINE: call: <cudaGetErrorString>". SL_CU_LAUNCH(err, "k_name") checks
 *   the launch just made (cudaGetLastError): configuration errors and "no device / driver
 *   insufficient" surface here; faults inside a kernel surface at the next synchronising call
 *   (sl_cuda_ctx_sync), as always with CUDA.
 * - Element decoders (half, bf16, e8m0) are exact and branch-free where it matters.
 * - Warp reductions assume a full warp (all 32 lanes active).
 */
#ifndef SL_KERNELS_CUDA_COMMON_CUH
#define SL_KERNELS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "base/status.h"
}

static inline sl_status sl__cu_fail(sl_error *err, cudaError_t rc, const char *call,
                                    const char *file, int line)
{
    const sl_status code = rc == cudaErrorMemoryAllocation ? SL_ERR_NOMEM : SL_ERR_DEVICE;
    /* a failed call also leaves its error as the thread's last one, which the next launch
     * check would report as its own (a kernel fault stays sticky regardless) */
    (void)cudaGetLastError();
    return sl_error_set(err, code, "%s:%d: %s: %s", file, line, call, cudaGetErrorString(rc));
}

#define SL_CU(err, call)                                                                   \
    do {                                                                                   \
        const cudaError_t sl_cu_rc_ = (call);                                              \
        if (sl_cu_rc_ != cudaSuccess)                                                      \
            return sl__cu_fail((err), sl_cu_rc_, #call, __FILE__, __LINE__);               \
    } while (0)

#define SL_CU_LAUNCH(err, name)                                                            \
    do {                                                                                   \
        const cudaError_t sl_cu_rc_ = cudaGetLastError();                                  \
        if (sl_cu_rc_ != cudaSuccess)                                                      \
            return sl__cu_fail((err), sl_cu_rc_, "launch " name, __FILE__, __LINE__);       \
    } while (0)

/* ---- programmatic dependent launch (sm_90+) ---------------------------------------------------
 *
 * Why: a decode token is hundreds of small kernels back to back (replayed as one CUDA graph);
 * between two of them the next one's launch and block scheduling cost ~1-2 us of an otherwise
 * idle GPU. A kernel launched with programmatic stream serialisation may be scheduled while the
 * kernel before it on the stream still runs; it must then wait (griddepcontrol.wait: that
 * kernel complete and its memory visible) before it reads memory. The rule here, held by
 * tests/kernels_cuda:pdl_rule_test: every kernel of kernels/cuda opens with sl_pdl_enter(),
 * before which it may only prefetch weights into L2 from its parameters (sl_l2_prefetch, no
 * value read), so each kernel sees exactly what it would in plain stream order; and every
 * launch goes through sl__cuda_launch (ctx_impl.h). sl_pdl_enter() then lets the next kernel
 * be scheduled: at most two grids of a stream are resident at once, the running one and the
 * next, waiting. Without the attribute (or before sm_90) both instructions do nothing. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
/* code for an older target would run, JIT-compiled, on an sm_90 device that ctx.cu gives the
 * launch attribute, without the wait: give such a build its own rule for sl_cuda_ctx.pdl */
#error "kernels/cuda is built for sm_90+ (bazel/cuda.bzl): see sl_pdl_enter"
#endif
static __device__ __forceinline__ void sl_pdl_enter(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Before sl_pdl_enter, the one thing a kernel may do: pull [p, p + bytes) into L2, the 128-byte
 * lines first, first + step, ... of it (a thread's share), so that a kernel placed early has
 * its weights on the way while the one before it ends (after a kernel of one or a few blocks,
 * a norm or the attention, the GPU is otherwise idle). A prefetch is no memory operation of
 * the PTX memory model, it yields no value: the kernel's loads come after the wait, which
 * makes the kernel before's writes visible, whatever the prefetch brought. Only into L2: an L1
 * prefetch or an early load of the weights (read through the non-coherent path) would not be
 * safe. p and bytes must come from the kernel's parameters alone (reading memory is what the
 * wait guards): pdl_rule_test allows only calls of *_l2_prefetch functions before sl_pdl_enter
 * and checks their bodies. */
static __device__ __forceinline__ void sl_l2_prefetch(const void *p, int64_t bytes,
                                                      int64_t first, int64_t step)
{
#if defined(__CUDA_ARCH__)
    for (int64_t off = first * 128; p && off < bytes; off += step * 128)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"((const char *)p + off));
#else
    (void)p, (void)bytes, (void)first, (void)step;
#endif
}

/* ---- element decoders --------------------------------------------------------------------- */

static __device__ __forceinline__ float sl_h2f(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}

static __device__ __forceinline__ float sl_bf2f(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

/* SwiGLU of one gate / up pair in float (kernels/ref's sl_ref_swiglu takes silu in double):
 * the one formula of sl_cuda_swiglu and the GEMVs' epilogues, so that a fused launch gives
 * the bits of the GEMVs and sl_cuda_swiglu run one after another */
static __device__ __forceinline__ float sl_swiglu1(float g, float u)
{
    return g / (1.0f + expf(-g)) * u;
}

/* ggml's GGML_E8M0_TO_FP32_HALF: 2^(e-127) / 2; e = 0, 1 give 2^-128, 2^-127 (subnormal). */
static __device__ __forceinline__ float sl_e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return __uint_as_float(bits);
}

/* Doubled E2M1 value of a 4-bit code (kvalues_mxfp4: 0 1 2 3 4 6 8 12, bit 3 = sign),
 * computed instead of looked up (a table indexed per lane would serialise). */
static __device__ __forceinline__ int sl_e2m1x2(uint32_t q)
{
    const int m = (int)(q & 1u), e = (int)((q >> 1) & 3u);
    const int v = e == 0 ? m : (2 + m) << (e - 1);
    return (q & 8u) ? -v : v;
}

/* ggml's get_scale_min_k4: sub-block j's 6-bit scale and min of Q4_K/Q5_K. */
static __device__ __forceinline__ void sl_scale_min_k4(int j, const uint8_t *q, int *d, int *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static __device__ __forceinline__ uint16_t sl_ld_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* 4 bytes at a 2-byte aligned address (shared or global). */
static __device__ __forceinline__ uint32_t sl_ld_u32_a2(const uint8_t *p)
{
    const uint16_t *h = (const uint16_t *)(const void *)p;
    return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

/* 4 bytes at any address. */
static __device__ __forceinline__ uint32_t sl_ld_u32_a1(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* Byte k (0..3) of w as an exact float, without I2F (quarter rate on Hopper): the byte goes
 * into the mantissa of 2^23 and the bias is subtracted by one FADD (full rate).
 * sl_byte_f(w, k, bias) == (float)(byte_k(w)) - bias for integer bias in [0, 2^22). */
static __device__ __forceinline__ float sl_byte_f(uint32_t w, int k, float bias)
{
    const uint32_t sel = (uint32_t)k | (4u << 4) | (5u << 8) | (7u << 12);
    return __uint_as_float(__byte_perm(w, 0x4B000000u, sel)) - (8388608.0f + bias);
}

/* ---- reductions ---------------------------------------------------------------------------- */

static __device__ __forceinline__ float sl_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Whether [a, a + an) and [b, b + bn) floats share an address (NULL: none): the fused
 * launches' argument checks, whose blocks read buffers other blocks write */
static inline bool sl__floats_overlap(const float *a, int64_t an, const float *b, int64_t bn)
{
    return a && b && a < b + bn && b < a + an;
}

/* A load that skips L1 (ld.global.cg): for data other blocks of the running grid wrote */
static __device__ __forceinline__ float sl_ldcg(const float *p)
{
    return __ldcg(p);
}

static __device__ __forceinline__ float sl_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static __device__ __forceinline__ double sl_warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over a block of blockDim.x (a multiple of 32, <= 1024) threads; every thread gets the
 * result. scratch: >= 32 floats of shared memory, not otherwise in use. */
static __device__ __forceinline__ float sl_block_sum(float v, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = sl_warp_sum(v);
    __syncthreads(); /* scratch may still be read by a previous call */
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    return sl_warp_sum(v);
}

/* The RMS norm's factor of row x [n] over the block: 1 / sqrt(mean(x^2) + eps), the sum of
 * squares strided by thread (fmaf), then sl_block_sum. The one rule of every RMS norm of
 * kernels/cuda (rows.cuh's norm kernels, the multi-matrix GEMV's norm prologue), so that a
 * fused norm gives a plain one's bits where the block has the same thread count. */
/* (CG: x read past L1, sl_ldcg: x written by other blocks of this grid, sl_last_block) */
template <bool CG = false>
static __device__ __forceinline__ float sl_rms_scale(const float *x, int64_t n, float eps,
                                                     float *scratch)
{
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = CG ? sl_ldcg(x + i) : x[i];
        ss = fmaf(v, v, ss);
    }
    ss = sl_block_sum(ss, scratch);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* The last-block-done pattern (a fused launch's epilogue over other blocks' output, one
 * launch where there were two): every thread of each of the `total` blocks counted on *done
 * calls it once, after its writes; true in the one of them that finishes last, whose loads
 * through sl_ldcg then see the others' writes (each block fences its writes before it is
 * counted; the last one fences after). *done counts the blocks that finished: 0 before the
 * launch, and the last block sets it back to 0, so the next launch (a graph's replay too)
 * starts from 0. A count past total (a counter left at total or more, e.g. by a memory
 * overrun) traps: a kernel fault, not outputs that are never written; a stale count below
 * total is not detected (the epilogue would run early). Launches sharing a counter must not
 * run concurrently: the CUDA context's counters (ctx_impl.h) serve launches of one stream. */
static __device__ __forceinline__ bool sl_last_of(unsigned *done, unsigned total)
{
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned old = atomicAdd(done, 1u);
        if (old >= total) __trap();
        last = old == total - 1;
        if (last) atomicExch(done, 0u);
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

/* sl_last_of over the whole grid */
static __device__ __forceinline__ bool sl_last_block(unsigned *done)
{
    return sl_last_of(done, gridDim.x * gridDim.y * gridDim.z);
}


static __device__ __forceinline__ float sl_block_max(float v, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = sl_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : -INFINITY;
    return sl_warp_max(v);
}

/* ---- cp.async (sm_80+): 16-byte global -> shared copies that bypass registers and L1 ------- */
#if defined(__CUDACC__) /* tests/kernels_cuda:qt_host_test compiles the decoders without nvcc */

static __device__ __forceinline__ void sl_cp_async16(void *smem, const void *gmem)
{
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

static __device__ __forceinline__ void sl_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void sl_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

/* ---- GGUF block decoders ------------------------------------------------------------------
 *
 * sl_qt<TYPE> describes one weight type for the dequant and GEMV kernels. The unit of work is
 * UNIT consecutive elements of a row (32 for every quantized type; for K-quants one 32-element
 * sub-range of a 256-element super-block, SUBS = QK / UNIT of them per block; 8 F32 or 16
 * F16/BF16 elements, i.e. 32 bytes, for the float types, whose "block" is one unit).
 *
 * deq(blk, sub, v): v[UNIT] = the unit's values with the exact float operations of
 *   kernels/ref/quant*.c (explicit __fmul_rn/__fadd_rn: nvcc would otherwise contract a*b+c
 *   into an FMA and round differently), so the dequant kernels are bit-exact. Any alignment.
 * dot(blk, sub, x, sx): sum_i w_i x_i over the unit in float, factored as ggml's vec_dot does
 *   (scale times an integer-weighted sum, minus min times sx = sum_i x_i), with bytes turned
 *   into floats by sl_byte_f. Not bit-exact to anything; error ~ a few float ulps of
 *   sum |w||x|. Requires the alignment the block has inside a 16-byte aligned row start:
 *   A4 types read 4-byte words, the others 2-byte halves (MXFP4 single bytes).
 * GEMV chunking: UPL units per lane per chunk; a chunk is 32 * UPL units, CB blocks, CBB bytes,
 *   a multiple of 16 so that every chunk of a 16-byte aligned row starts 16-byte aligned. */
template <uint32_t T> struct sl_qt;

#define SL_QT_COMMON(qk, bb, unit, upl, need_sx)                                             \
    static constexpr int QK = (qk), BB = (bb), UNIT = (unit), UPL = (upl);                   \
    static constexpr int SUBS = QK / UNIT, CB = 32 * UPL / SUBS, CBB = CB * BB;              \
    static constexpr bool NEED_SX = (need_sx)

/* F32 = 0 */
template <> struct sl_qt<0> {
    SL_QT_COMMON(8, 32, 8, 1, false);
    static constexpr int ESIZE = 4;
    static __device__ __forceinline__ float elem(const uint8_t *p, int64_t i)
    {
        return __uint_as_float(sl_ld_u32_a1(p + 4 * i));
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        const float4 a = ((const float4 *)(const void *)b)[0];
        const float4 c = ((const float4 *)(const void *)b)[1];
        float s = a.x * x[0];
        s = fmaf(a.y, x[1], s);
        s = fmaf(a.z, x[2], s);
        s = fmaf(a.w, x[3], s);
        s = fmaf(c.x, x[4], s);
        s = fmaf(c.y, x[5], s);
        s = fmaf(c.z, x[6], s);
        return fmaf(c.w, x[7], s);
    }
};

/* F16 = 1 */
template <> struct sl_qt<1> {
    SL_QT_COMMON(16, 32, 16, 1, false);
    static constexpr int ESIZE = 2;
    static __device__ __forceinline__ float elem(const uint8_t *p, int64_t i)
    {
        return sl_h2f(sl_ld_u16(p + 2 * i));
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        const uint4 a[2] = {((const uint4 *)(const void *)b)[0], ((const uint4 *)(const void *)b)[1]};
        const __half2 *h = (const __half2 *)(const void *)a;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float2 f = __half22float2(h[i]);
            s = fmaf(f.x, x[2 * i], s);
            s = fmaf(f.y, x[2 * i + 1], s);
        }
        return s;
    }
};

/* BF16 = 30 */
template <> struct sl_qt<30> {
    SL_QT_COMMON(16, 32, 16, 1, false);
    static constexpr int ESIZE = 2;
    static __device__ __forceinline__ float elem(const uint8_t *p, int64_t i)
    {
        return sl_bf2f(sl_ld_u16(p + 2 * i));
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        const uint4 a[2] = {((const uint4 *)(const void *)b)[0], ((const uint4 *)(const void *)b)[1]};
        const uint32_t *w = (const uint32_t *)(const void *)a;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            s = fmaf(__uint_as_float(w[i] << 16), x[2 * i], s);
            s = fmaf(__uint_as_float(w[i] & 0xffff0000u), x[2 * i + 1], s);
        }
        return s;
    }
};

/* Q4_0 = 2: d | qs[16]; x = d * (q - 8), low nibbles elements 0..15, high 16..31. */
template <> struct sl_qt<2> {
    SL_QT_COMMON(32, 18, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b));
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn((float)((b[2 + j] & 0x0F) - 8), d);
            v[j + 16] = __fmul_rn((float)((b[2 + j] >> 4) - 8), d);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = sl_ld_u32_a2(b + 2 + 4 * i);
            const uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(sl_byte_f(lo, k, 8.0f), x[4 * i + k], s);
                s = fmaf(sl_byte_f(hi, k, 8.0f), x[16 + 4 * i + k], s);
            }
        }
        return sl_h2f(*(const uint16_t *)(const void *)b) * s;
    }
};

/* Q4_1 = 3: d | m | qs[16]; x = d * q + m. */
template <> struct sl_qt<3> {
    SL_QT_COMMON(32, 20, 32, 1, true);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b)), m = sl_h2f(sl_ld_u16(b + 2));
        for (int j = 0; j < 16; j++) {
            v[j] = __fadd_rn(__fmul_rn((float)(b[4 + j] & 0x0F), d), m);
            v[j + 16] = __fadd_rn(__fmul_rn((float)(b[4 + j] >> 4), d), m);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float sx)
    {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = *(const uint32_t *)(const void *)(b + 4 + 4 * i);
            const uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(sl_byte_f(lo, k, 0.0f), x[4 * i + k], s);
                s = fmaf(sl_byte_f(hi, k, 0.0f), x[16 + 4 * i + k], s);
            }
        }
        const uint32_t dm = *(const uint32_t *)(const void *)b;
        return fmaf(sl_h2f((uint16_t)dm), s, sl_h2f((uint16_t)(dm >> 16)) * sx);
    }
};

/* Bits 0..3 of b moved to bit 4 of bytes 0..3 (the fifth bit of four Q5 quants). */
static __device__ __forceinline__ uint32_t sl_q5_spread(uint32_t b)
{
    return ((b & 1u) | ((b & 2u) << 7) | ((b & 4u) << 14) | ((b & 8u) << 21)) << 4;
}

/* Q5_0 = 6: d | qh[4] | qs[16]; x = d * (q - 16), bit 4 of element j is bit j of qh. */
template <> struct sl_qt<6> {
    SL_QT_COMMON(32, 22, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b));
        const uint32_t qh = sl_ld_u32_a1(b + 2);
        for (int j = 0; j < 16; j++) {
            const int x0 = ((b[6 + j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10)) - 16;
            const int x1 = ((b[6 + j] >> 4) | (int)((qh >> (j + 12)) & 0x10)) - 16;
            v[j] = __fmul_rn((float)x0, d);
            v[j + 16] = __fmul_rn((float)x1, d);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        const uint32_t qh = sl_ld_u32_a2(b + 2);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = sl_ld_u32_a2(b + 6 + 4 * i);
            const uint32_t lo = (w & 0x0F0F0F0Fu) | sl_q5_spread((qh >> (4 * i)) & 15u);
            const uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | sl_q5_spread((qh >> (16 + 4 * i)) & 15u);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(sl_byte_f(lo, k, 16.0f), x[4 * i + k], s);
                s = fmaf(sl_byte_f(hi, k, 16.0f), x[16 + 4 * i + k], s);
            }
        }
        return sl_h2f(*(const uint16_t *)(const void *)b) * s;
    }
};

/* Q5_1 = 7: d | m | qh[4] | qs[16]; x = d * q + m. */
template <> struct sl_qt<7> {
    SL_QT_COMMON(32, 24, 32, 1, true);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b)), m = sl_h2f(sl_ld_u16(b + 2));
        const uint32_t qh = sl_ld_u32_a1(b + 4);
        for (int j = 0; j < 16; j++) {
            const int x0 = (b[8 + j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10);
            const int x1 = (b[8 + j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            v[j] = __fadd_rn(__fmul_rn((float)x0, d), m);
            v[j + 16] = __fadd_rn(__fmul_rn((float)x1, d), m);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float sx)
    {
        const uint32_t qh = *(const uint32_t *)(const void *)(b + 4);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = *(const uint32_t *)(const void *)(b + 8 + 4 * i);
            const uint32_t lo = (w & 0x0F0F0F0Fu) | sl_q5_spread((qh >> (4 * i)) & 15u);
            const uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | sl_q5_spread((qh >> (16 + 4 * i)) & 15u);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s = fmaf(sl_byte_f(lo, k, 0.0f), x[4 * i + k], s);
                s = fmaf(sl_byte_f(hi, k, 0.0f), x[16 + 4 * i + k], s);
            }
        }
        const uint32_t dm = *(const uint32_t *)(const void *)b;
        return fmaf(sl_h2f((uint16_t)dm), s, sl_h2f((uint16_t)(dm >> 16)) * sx);
    }
};

/* Q8_0 = 8: d | qs[32] int8; x = d * q. */
template <> struct sl_qt<8> {
    SL_QT_COMMON(32, 34, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b));
        for (int j = 0; j < 32; j++) v[j] = __fmul_rn((float)(int8_t)b[2 + j], d);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = sl_ld_u32_a2(b + 2 + 4 * i) ^ 0x80808080u; /* q + 128 */
#pragma unroll
            for (int k = 0; k < 4; k++) s = fmaf(sl_byte_f(w, k, 128.0f), x[4 * i + k], s);
        }
        return sl_h2f(*(const uint16_t *)(const void *)b) * s;
    }
};

/* MXFP4 = 39: e (E8M0) | qs[16]; x = e2m1x2[q] * 2^(e-128). */
template <> struct sl_qt<39> {
    SL_QT_COMMON(32, 17, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        const float d = sl_e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            v[j] = __fmul_rn((float)sl_e2m1x2(b[1 + j] & 0x0F), d);
            v[j + 16] = __fmul_rn((float)sl_e2m1x2(b[1 + j] >> 4), d);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const uint32_t q = b[1 + j];
            s = fmaf((float)sl_e2m1x2(q & 0x0Fu), x[j], s);
            s = fmaf((float)sl_e2m1x2(q >> 4), x[j + 16], s);
        }
        return sl_e8m0_half(b[0]) * s;
    }
};

/* Four 4-bit codes (the low nibbles of w's bytes) to the bytes of a 16-entry table given as
 * four words (entries 0-3, 4-7, 8-11, 12-15, entry k in byte k % 4), one per byte, by two byte
 * permutes (codes 0-7 and 8-15) and a per-byte pick on bit 3: a table indexed per lane would
 * serialise. */
static __device__ __forceinline__ uint32_t sl_lut16x4(uint32_t w, uint32_t t0, uint32_t t1,
                                                      uint32_t t2, uint32_t t3)
{
    const uint32_t sel =
        (w & 0x7u) | ((w >> 4) & 0x70u) | ((w >> 8) & 0x700u) | ((w >> 12) & 0x7000u);
    const uint32_t lo = __byte_perm(t0, t1, sel);
    const uint32_t hi = __byte_perm(t2, t3, sel);
    const uint32_t m = ((w >> 3) & 0x01010101u) * 0xFFu;
    return (hi & m) | (lo & ~m);
}

/* IQ4_NL / IQ4_XS: kvalues_iq4nl (-127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113) */
static __device__ __forceinline__ uint32_t sl_iq4nl_lut4(uint32_t w)
{
    return sl_lut16x4(w, 0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u);
}

/* MXFP4's doubled E2M1 values (0 1 2 3 4 6 8 12, bit 3 the sign) as int8, four codes */
static __device__ __forceinline__ uint32_t sl_mxfp4_lut4(uint32_t w)
{
    return sl_lut16x4(w, 0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);
}

/* The 32 values of an IQ4 unit from its 16 code bytes q (low nibbles elements 0..15, high
 * 16..31): v = scale * value, exactly (deq); and sum value * x in float (dot). */
static __device__ __forceinline__ void sl_iq4_unit_deq(const uint8_t *q, float scale, float *v)
{
    for (int i = 0; i < 4; i++) {
        const uint32_t w = sl_ld_u32_a1(q + 4 * i);
        const uint32_t lo = sl_iq4nl_lut4(w & 0x0F0F0F0Fu);
        const uint32_t hi = sl_iq4nl_lut4((w >> 4) & 0x0F0F0F0Fu);
        for (int k = 0; k < 4; k++) {
            v[4 * i + k] = __fmul_rn(scale, (float)(int8_t)(lo >> (8 * k)));
            v[16 + 4 * i + k] = __fmul_rn(scale, (float)(int8_t)(hi >> (8 * k)));
        }
    }
}

static __device__ __forceinline__ float sl_iq4_unit_dot(const uint8_t *q, const float *x)
{
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t w = sl_ld_u32_a2(q + 4 * i);
        /* value + 128 as an unsigned byte, then sl_byte_f's bias takes the 128 back */
        const uint32_t lo = sl_iq4nl_lut4(w & 0x0F0F0F0Fu) ^ 0x80808080u;
        const uint32_t hi = sl_iq4nl_lut4((w >> 4) & 0x0F0F0F0Fu) ^ 0x80808080u;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s = fmaf(sl_byte_f(lo, k, 128.0f), x[4 * i + k], s);
            s = fmaf(sl_byte_f(hi, k, 128.0f), x[16 + 4 * i + k], s);
        }
    }
    return s;
}

/* IQ4_NL = 20: d | qs[16]; x = d * kvalues[q], low nibbles elements 0..15, high 16..31. */
template <> struct sl_qt<20> {
    SL_QT_COMMON(32, 18, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int, float *v)
    {
        sl_iq4_unit_deq(b + 2, sl_h2f(sl_ld_u16(b)), v);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, float)
    {
        return sl_h2f(sl_ld_u16(b)) * sl_iq4_unit_dot(b + 2, x);
    }
};

/* IQ4_XS = 23: d | scales_h | scales_l[4] | qs[128]; unit j (sub-block j, 32 elements): ls = 4
 * bits of scales_l[j / 2] (nibble j % 2) | 2 bits of scales_h at 2j << 4; x = (d * (ls - 32)) *
 * kvalues[q], q the low nibbles of qs[16 j ..] for elements 0..15, the high for 16..31. */
template <> struct sl_qt<23> {
    SL_QT_COMMON(256, 136, 32, 1, false);
    static __device__ __forceinline__ int scale(const uint8_t *b, int j)
    {
        const int lo = (b[4 + j / 2] >> (4 * (j & 1))) & 0xF;
        return (lo | (((sl_ld_u16(b + 2) >> (2 * j)) & 3) << 4)) - 32;
    }
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        sl_iq4_unit_deq(b + 8 + 16 * j, __fmul_rn(sl_h2f(sl_ld_u16(b)), (float)scale(b, j)), v);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        return sl_h2f(sl_ld_u16(b)) * (float)scale(b, j) * sl_iq4_unit_dot(b + 8 + 16 * j, x);
    }
};

/* Q2_K = 10: scales[16] | qs[64] | d | dmin; unit j (32 elements): half n = j / 4, plane g =
 * j % 4: q = (qs[32n + l] >> 2g) & 3, sub-blocks 2j (l < 16) and 2j + 1, each x = (d * (sc &
 * 15)) * q - dmin * (sc >> 4). The mins are per 16, so dot sums x itself per half (no sx). */
template <> struct sl_qt<10> {
    SL_QT_COMMON(256, 84, 32, 1, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b + 80)), dmin = sl_h2f(sl_ld_u16(b + 82));
        const uint8_t *q = b + 16 + 32 * (j >> 2);
        const int sh = 2 * (j & 3);
        for (int h = 0; h < 2; h++) {
            const int sc = b[2 * j + h];
            const float dl = __fmul_rn(d, (float)(sc & 0xF));
            const float ml = __fmul_rn(dmin, (float)(sc >> 4));
            for (int l = 16 * h; l < 16 * h + 16; l++)
                v[l] = __fsub_rn(__fmul_rn(dl, (float)((q[l] >> sh) & 3)), ml);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const uint8_t *q = b + 16 + 32 * (j >> 2);
        const int sh = 2 * (j & 3);
        float s[2] = {0.0f, 0.0f}, sx[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = (sl_ld_u32_a2(q + 4 * i) >> sh) & 0x03030303u;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s[i >> 2] = fmaf(sl_byte_f(w, k, 0.0f), x[4 * i + k], s[i >> 2]);
                sx[i >> 2] += x[4 * i + k];
            }
        }
        const int sc0 = b[2 * j], sc1 = b[2 * j + 1];
        const float d = sl_h2f(sl_ld_u16(b + 80)), dmin = sl_h2f(sl_ld_u16(b + 82));
        return d * ((float)(sc0 & 0xF) * s[0] + (float)(sc1 & 0xF) * s[1]) -
               dmin * ((float)(sc0 >> 4) * sx[0] + (float)(sc1 >> 4) * sx[1]);
    }
};

/* Q3_K = 11: hmask[32] | qs[64] | scales[12] | d; unit j: half n = j / 4, plane g = j % 4: q =
 * ((qs[32n + l] >> 2g) & 3) | bit j of hmask[l] << 2, value q - 4, sub-blocks 2j (l < 16) and
 * 2j + 1 with 6-bit scales sc - 32 (low nibbles in bytes 0..7, high pairs in 8..11): x =
 * (d * (sc - 32)) * (q - 4). */
template <> struct sl_qt<11> {
    SL_QT_COMMON(256, 110, 32, 2, false);
    static __device__ __forceinline__ int scale(const uint8_t *b, int s)
    {
        const uint8_t *sc = b + 96;
        const int lo = (sc[s & 7] >> (4 * (s >> 3))) & 0xF;
        return (lo | (((sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3) << 4)) - 32;
    }
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b + 108));
        const uint8_t *q = b + 32 + 32 * (j >> 2);
        const int sh = 2 * (j & 3);
        for (int h = 0; h < 2; h++) {
            const float dl = __fmul_rn(d, (float)scale(b, 2 * j + h));
            for (int l = 16 * h; l < 16 * h + 16; l++) {
                const int qv = ((q[l] >> sh) & 3) - (((b[l] >> j) & 1) ? 0 : 4);
                v[l] = __fmul_rn(dl, (float)qv);
            }
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const uint8_t *q = b + 32 + 32 * (j >> 2);
        const int sh = 2 * (j & 3);
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = ((sl_ld_u32_a2(q + 4 * i) >> sh) & 0x03030303u) |
                               (((sl_ld_u32_a2(b + 4 * i) >> j) & 0x01010101u) << 2);
#pragma unroll
            for (int k = 0; k < 4; k++)
                s[i >> 2] = fmaf(sl_byte_f(w, k, 4.0f), x[4 * i + k], s[i >> 2]);
        }
        const float d = sl_h2f(sl_ld_u16(b + 108));
        return d * ((float)scale(b, 2 * j) * s[0] + (float)scale(b, 2 * j + 1) * s[1]);
    }
};

/* Q4_K = 12: d | dmin | scales[12] | qs[128]; sub j (32 elements): x = d*sc_j*q - dmin*m_j,
 * q = nibble (j & 1) of qs[32 * (j / 2) + l]. */
template <> struct sl_qt<12> {
    SL_QT_COMMON(256, 144, 32, 1, true);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b)), dmin = sl_h2f(sl_ld_u16(b + 2));
        int sc, m;
        sl_scale_min_k4(j, b + 4, &sc, &m);
        const float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(dmin, (float)m);
        const uint8_t *q = b + 16 + 32 * (j >> 1);
        const int sh = 4 * (j & 1);
        for (int l = 0; l < 32; l++) v[l] = __fsub_rn(__fmul_rn(d1, (float)((q[l] >> sh) & 0xF)), m1);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float sx)
    {
        const uint32_t *q = (const uint32_t *)(const void *)(b + 16 + 32 * (j >> 1));
        const int sh = 4 * (j & 1);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = (q[i] >> sh) & 0x0F0F0F0Fu;
#pragma unroll
            for (int k = 0; k < 4; k++) s = fmaf(sl_byte_f(w, k, 0.0f), x[4 * i + k], s);
        }
        int sc, m;
        sl_scale_min_k4(j, b + 4, &sc, &m);
        const uint32_t dm = *(const uint32_t *)(const void *)b;
        return sl_h2f((uint16_t)dm) * (float)sc * s - sl_h2f((uint16_t)(dm >> 16)) * (float)m * sx;
    }
};

/* Q5_K = 13: d | dmin | scales[12] | qh[32] | qs[128]; as Q4_K plus bit 4 = bit j of qh[l]. */
template <> struct sl_qt<13> {
    SL_QT_COMMON(256, 176, 32, 1, true);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d = sl_h2f(sl_ld_u16(b)), dmin = sl_h2f(sl_ld_u16(b + 2));
        int sc, m;
        sl_scale_min_k4(j, b + 4, &sc, &m);
        const float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(dmin, (float)m);
        const uint8_t *qh = b + 16, *q = b + 48 + 32 * (j >> 1);
        const int sh = 4 * (j & 1);
        for (int l = 0; l < 32; l++) {
            const int qv = ((q[l] >> sh) & 0xF) + (((qh[l] >> j) & 1) ? 16 : 0);
            v[l] = __fsub_rn(__fmul_rn(d1, (float)qv), m1);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float sx)
    {
        const uint32_t *qh = (const uint32_t *)(const void *)(b + 16);
        const uint32_t *q = (const uint32_t *)(const void *)(b + 48 + 32 * (j >> 1));
        const int sh = 4 * (j & 1);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = ((q[i] >> sh) & 0x0F0F0F0Fu) | (((qh[i] >> j) & 0x01010101u) << 4);
#pragma unroll
            for (int k = 0; k < 4; k++) s = fmaf(sl_byte_f(w, k, 0.0f), x[4 * i + k], s);
        }
        int sc, m;
        sl_scale_min_k4(j, b + 4, &sc, &m);
        const uint32_t dm = *(const uint32_t *)(const void *)b;
        return sl_h2f((uint16_t)dm) * (float)sc * s - sl_h2f((uint16_t)(dm >> 16)) * (float)m * sx;
    }
};

/* Q6_K = 14: ql[128] | qh[64] | scales[16] int8 | d; unit j: half h = j / 4 (128 elements),
 * quarter t = j % 4: q = (ql[64h + 32(t&1) + l] >> 4(t>>1)) & 15 | ((qh[32h + l] >> 2t) & 3) << 4,
 * x = (d * sc[8h + 2t + l/16]) * (q - 32). */
template <> struct sl_qt<14> {
    SL_QT_COMMON(256, 210, 32, 2, false);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const int h = j >> 2, t = j & 3;
        const float d = sl_h2f(sl_ld_u16(b + 208));
        const uint8_t *ql = b + 64 * h + 32 * (t & 1), *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * t;
        const int shl = 4 * (t >> 1), shh = 2 * t;
        for (int l = 0; l < 32; l++) {
            const int q = (((ql[l] >> shl) & 0xF) | (((qh[l] >> shh) & 3) << 4)) - 32;
            v[l] = __fmul_rn(__fmul_rn(d, (float)sc[l >> 4]), (float)q);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const int h = j >> 2, t = j & 3;
        const uint8_t *ql = b + 64 * h + 32 * (t & 1), *qh = b + 128 + 32 * h;
        const int shl = 4 * (t >> 1), shh = 2 * t;
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t w = ((sl_ld_u32_a2(ql + 4 * i) >> shl) & 0x0F0F0F0Fu) |
                               (((sl_ld_u32_a2(qh + 4 * i) >> shh) & 0x03030303u) << 4);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                if (i < 4) s0 = fmaf(sl_byte_f(w, k, 32.0f), x[4 * i + k], s0);
                else s1 = fmaf(sl_byte_f(w, k, 32.0f), x[4 * i + k], s1);
            }
        }
        const uint16_t sc2 = sl_ld_u16(b + 192 + 8 * h + 2 * t);
        const float d = sl_h2f(sl_ld_u16(b + 208));
        return d * ((float)(int8_t)(sc2 & 0xFF) * s0 + (float)(int8_t)(sc2 >> 8) * s1);
    }
};

#undef SL_QT_COMMON

/* the Q8-activation decoders of the GEMV (gemv.cu k_gemv_qx) */
#include "kernels/cuda/qx.cuh"

/* the codebook types: IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M */
#include "kernels/cuda/qt_iq.cuh"

/* Calls f.template operator()<TYPE>() for a supported weight type code (f: a functor with a
 * `template <uint32_t T> void operator()()`); returns false for any other code. The one list of
 * types the CUDA kernels handle: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 MXFP4 IQ4_NL IQ4_XS Q2_K
 * Q3_K Q4_K Q5_K Q6_K, and the codebook types IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M. */
/* Every GGUF type code the decoders above take, once: the dispatch, the per-type loops (the
 * GEMV's shared-memory attributes) and the device-side switches all expand this list, so a
 * decoder added above is one entry here and nowhere else. */
#define SL_QT_TYPES(X) X(0) X(1) X(30) X(2) X(3) X(6) X(7) X(8) X(39) X(20) X(23) X(10) X(11) \
    X(12) X(13) X(14) X(16) X(17) X(22) X(18) X(21) X(19) X(29)

/* f.operator()<T>() for the type code given; false (nothing called) for one not listed */
template <typename F> static inline bool sl_qt_dispatch(uint32_t type, F &&f)
{
#define SL_QT_CASE_(t)                                                                        \
    case t: f.template operator()<t>(); return true;
    switch (type) {
        SL_QT_TYPES(SL_QT_CASE_)
    default: return false;
    }
#undef SL_QT_CASE_
}

/* f.operator()<T>() for every listed type */
template <typename F> static inline void sl_qt_for_each(F &&f)
{
#define SL_QT_EACH_(t) f.template operator()<t>();
    SL_QT_TYPES(SL_QT_EACH_)
#undef SL_QT_EACH_
}

static constexpr bool sl_qt_is_float(uint32_t type)
{
    return type == 0 || type == 1 || type == 30;
}

/* A type's GGUF block as stored: elements and bytes (a float type: 1 element, its size). */
template <uint32_t T> struct sl_qt_block {
    static constexpr bool FLOAT = sl_qt_is_float(T); /* F32, F16, BF16: element by element */
    static constexpr int64_t ELEMS = sl_qt_is_float(T) ? 1 : sl_qt<T>::QK;
    static constexpr int64_t BYTES = sl_qt_is_float(T) ? sl_qt<T>::BB / sl_qt<T>::QK
                                                        : sl_qt<T>::BB;
};

struct sl_qt_block_of {
    int64_t elems = 0, bytes = 0;
    template <uint32_t T> void operator()()
    {
        elems = sl_qt_block<T>::ELEMS;
        bytes = sl_qt_block<T>::BYTES;
    }
};

/* the block shape of a listed type code; false for one the kernels do not decode */
static inline bool sl_qt_block_shape(uint32_t type, int64_t *elems, int64_t *bytes)
{
    sl_qt_block_of b;
    if (!sl_qt_dispatch(type, b)) return false;
    *elems = b.elems;
    *bytes = b.bytes;
    return true;
}

#endif
