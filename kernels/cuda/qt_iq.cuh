/* kernels/cuda/qt_iq.cuh: sl_qt<T> for the codebook types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S and IQ1_M (the contract of deq / dot is in common.cuh, which includes this file
 * before its type list; never included alone).
 *
 * Every unit (32 elements, SUBS = 8 a 256-element block) is four groups of 8 values: grid
 * magnitudes (one uint64 entry, or two uint32 IQ3 entries) under 8 sign bits, times a group
 * scale db (one per 32, or per 16 for IQ2_XS / IQ2_S); IQ1's values are grid entries -1/0/+1
 * plus a +-1/8 delta, times dl. deq follows kernels/ref/quant_iq.c's float operations:
 * (db * magnitude) negated by the sign is its (db * g) * -1.0f exactly. dot sums magnitude
 * times signed x per group, then applies the scales (IQ1: dl * (sum g x + delta sum x)).
 * The grids are device arrays from kernels/ref/iq_tables.inc (the host's tables come from the
 * same file): lanes index them independently, which constant memory would serialise. */
#ifndef SL_KERNELS_CUDA_QT_IQ_CUH
#define SL_KERNELS_CUDA_QT_IQ_CUH

#define SL_IQ_TABLE(ctype, name, count) static __device__ const ctype sl_cu_##name[count]
#include "kernels/ref/iq_tables.inc"
#undef SL_IQ_TABLE

/* value k of 8 (bytes of lo, then hi) as db * magnitude, negated where bit k of s is set */
static __device__ __forceinline__ void sl_iq_deq8(uint32_t lo, uint32_t hi, uint32_t s, float db,
                                                  float *v)
{
    for (int k = 0; k < 8; k++) {
        const uint32_t m = ((k < 4 ? lo : hi) >> (8 * (k & 3))) & 0xFFu;
        const float a = __fmul_rn(db, (float)m);
        v[k] = ((s >> k) & 1u) ? -a : a;
    }
}

/* sum over 8 values of magnitude (bytes of lo, then hi) times x, x negated where bit k of s */
static __device__ __forceinline__ float sl_iq_dot8(uint32_t lo, uint32_t hi, uint32_t s,
                                                   const float *x)
{
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float x0 = ((s >> k) & 1u) ? -x[k] : x[k];
        const float x1 = ((s >> (k + 4)) & 1u) ? -x[k + 4] : x[k + 4];
        a = fmaf(sl_byte_f(lo, k, 0.0f), x0, a);
        a = fmaf(sl_byte_f(hi, k, 0.0f), x1, a);
    }
    return a;
}

/* (d * (0.5 + s)) * f: the group scale of IQ2_XXS, IQ2_XS, IQ2_S (f = 1/4), IQ3_XXS (1/2) */
static __device__ __forceinline__ float sl_iq_db(float d, uint32_t s, float f)
{
    return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)s)), f);
}

/* IQ2_XS / IQ2_S: a unit's two scales (per 16) from its scale byte: low nibble, high nibble */
static __device__ __forceinline__ void sl_iq2_db2(const uint8_t *b, uint32_t sc, float db[2])
{
    const float d = sl_h2f(sl_ld_u16(b));
    db[0] = sl_iq_db(d, sc & 0xFu, 0.25f);
    db[1] = sl_iq_db(d, sc >> 4, 0.25f);
}

/* IQ1: v[k] = dl * (g_k + delta), g_k the int8 bytes of g (-1, 0, 1) */
static __device__ __forceinline__ void sl_iq1_deq8(uint64_t g, float dl, float delta, float *v)
{
    for (int k = 0; k < 8; k++)
        v[k] = __fmul_rn(dl, __fadd_rn((float)(int8_t)(uint8_t)(g >> (8 * k)), delta));
}

/* IQ1: sum g_k x_k + delta * sum x_k over 8 values */
static __device__ __forceinline__ float sl_iq1_dot8(uint64_t g, float delta, const float *x)
{
    /* the int8 bytes + 128 as unsigned ones, taken back by sl_byte_f's bias */
    const uint32_t lo = (uint32_t)g ^ 0x80808080u, hi = (uint32_t)(g >> 32) ^ 0x80808080u;
    float a = 0.0f, sx = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        a = fmaf(sl_byte_f(lo, k, 128.0f), x[k], a);
        a = fmaf(sl_byte_f(hi, k, 128.0f), x[k + 4], a);
        sx += x[k] + x[k + 4];
    }
    return fmaf(delta, sx, a);
}

#define SL_QT_IQ(bb, upl)                                                                     \
    static constexpr int QK = 256, BB = (bb), UNIT = 32, UPL = (upl);                         \
    static constexpr int SUBS = QK / UNIT, CB = 32 * UPL / SUBS, CBB = CB * BB;               \
    static constexpr bool NEED_SX = false

/* IQ2_XXS = 16: d | 8 x (4 grid bytes, then 4 x 7 ksigns bits + 4-bit scale) */
template <> struct sl_qt<16> {
    SL_QT_IQ(66, 2);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const uint32_t a0 = sl_ld_u32_a1(b + 2 + 8 * j), a1 = sl_ld_u32_a1(b + 6 + 8 * j);
        const float db = sl_iq_db(sl_h2f(sl_ld_u16(b)), a1 >> 28, 0.25f);
        for (int l = 0; l < 4; l++) {
            const uint64_t g = sl_cu_iq2xxs_grid[(a0 >> (8 * l)) & 0xFFu];
            sl_iq_deq8((uint32_t)g, (uint32_t)(g >> 32), sl_cu_iq_ksigns[(a1 >> (7 * l)) & 127u],
                       db, v + 8 * l);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const uint32_t a0 = sl_ld_u32_a2(b + 2 + 8 * j), a1 = sl_ld_u32_a2(b + 6 + 8 * j);
        float s = 0.0f;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t g = sl_cu_iq2xxs_grid[(a0 >> (8 * l)) & 0xFFu];
            s += sl_iq_dot8((uint32_t)g, (uint32_t)(g >> 32),
                            sl_cu_iq_ksigns[(a1 >> (7 * l)) & 127u], x + 8 * l);
        }
        return sl_iq_db(sl_h2f(sl_ld_u16(b)), a1 >> 28, 0.25f) * s;
    }
};

/* IQ2_XS and IQ2_S, whose units have two scales (per 16): Q::entry(b, j, l, g, signs) gives
 * group l's grid entry and sign bits, Q::SC the offset of the scale bytes */
template <typename Q> struct sl_iq2_halves {
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        float db[2];
        sl_iq2_db2(b, b[Q::SC + j], db);
        for (int l = 0; l < 4; l++) {
            uint64_t g;
            uint32_t sg;
            Q::entry(b, j, l, g, sg);
            sl_iq_deq8((uint32_t)g, (uint32_t)(g >> 32), sg, db[l >> 1], v + 8 * l);
        }
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int l = 0; l < 4; l++) {
            uint64_t g;
            uint32_t sg;
            Q::entry(b, j, l, g, sg);
            s[l >> 1] += sl_iq_dot8((uint32_t)g, (uint32_t)(g >> 32), sg, x + 8 * l);
        }
        float db[2];
        sl_iq2_db2(b, b[Q::SC + j], db);
        return db[0] * s[0] + db[1] * s[1];
    }
};

/* IQ2_XS = 17: d | qs[32] (9-bit grid index, 7-bit ksigns index) | scales[8] (4 bits per 16) */
struct sl_iq2_xs {
    static constexpr int SC = 66;
    static __device__ __forceinline__ void entry(const uint8_t *b, int j, int l, uint64_t &g,
                                                 uint32_t &sg)
    {
        const uint32_t q = sl_ld_u16(b + 2 + 8 * j + 2 * l);
        g = sl_cu_iq2xs_grid[q & 511u];
        sg = sl_cu_iq_ksigns[q >> 9];
    }
};
template <> struct sl_qt<17> : sl_iq2_halves<sl_iq2_xs> {
    SL_QT_IQ(74, 2);
};

/* IQ2_S = 22: d | qs[32] grid low bytes | signs[32] | qh[8] (2 high index bits each) |
 * scales[8] (4 bits per 16) */
struct sl_iq2_s {
    static constexpr int SC = 74;
    static __device__ __forceinline__ void entry(const uint8_t *b, int j, int l, uint64_t &g,
                                                 uint32_t &sg)
    {
        g = sl_cu_iq2s_grid[b[2 + 4 * j + l] | (((uint32_t)b[66 + j] << (8 - 2 * l)) & 0x300u)];
        sg = b[34 + 4 * j + l];
    }
};
template <> struct sl_qt<22> : sl_iq2_halves<sl_iq2_s> {
    SL_QT_IQ(82, 2);
};

/* IQ3_XXS = 18: d | qs[64] (grid bytes, 4 values each) | 8 x (4 x 7 ksigns bits + 4-bit
 * scale) */
template <> struct sl_qt<18> {
    SL_QT_IQ(98, 2);
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const uint32_t aux = sl_ld_u32_a1(b + 66 + 4 * j);
        const float db = sl_iq_db(sl_h2f(sl_ld_u16(b)), aux >> 28, 0.5f);
        for (int l = 0; l < 4; l++)
            sl_iq_deq8(sl_cu_iq3xxs_grid[b[2 + 8 * j + 2 * l]],
                       sl_cu_iq3xxs_grid[b[3 + 8 * j + 2 * l]],
                       sl_cu_iq_ksigns[(aux >> (7 * l)) & 127u], db, v + 8 * l);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const uint32_t aux = sl_ld_u32_a2(b + 66 + 4 * j);
        float s = 0.0f;
#pragma unroll
        for (int l = 0; l < 4; l++)
            s += sl_iq_dot8(sl_cu_iq3xxs_grid[b[2 + 8 * j + 2 * l]],
                            sl_cu_iq3xxs_grid[b[3 + 8 * j + 2 * l]],
                            sl_cu_iq_ksigns[(aux >> (7 * l)) & 127u], x + 8 * l);
        return sl_iq_db(sl_h2f(sl_ld_u16(b)), aux >> 28, 0.5f) * s;
    }
};

/* IQ3_S = 21: d | qs[64] grid low bytes | qh[8] (1 high index bit each) | signs[32] |
 * scales[4] (4 bits per 32: db = d * (1 + 2 s)) */
template <> struct sl_qt<21> {
    SL_QT_IQ(110, 2);
    static __device__ __forceinline__ uint32_t grid(const uint8_t *b, int j, int i)
    {
        return sl_cu_iq3s_grid[b[2 + 8 * j + i] | (((uint32_t)b[66 + j] << (8 - i)) & 256u)];
    }
    static __device__ __forceinline__ float db(const uint8_t *b, int j)
    {
        const uint32_t s = (b[106 + j / 2] >> (4 * (j & 1))) & 0xFu;
        return __fmul_rn(sl_h2f(sl_ld_u16(b)), (float)(1 + 2 * s));
    }
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d = db(b, j);
        for (int l = 0; l < 4; l++)
            sl_iq_deq8(grid(b, j, 2 * l), grid(b, j, 2 * l + 1), b[74 + 4 * j + l], d, v + 8 * l);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        float s = 0.0f;
#pragma unroll
        for (int l = 0; l < 4; l++)
            s += sl_iq_dot8(grid(b, j, 2 * l), grid(b, j, 2 * l + 1), b[74 + 4 * j + l], x + 8 * l);
        return db(b, j) * s;
    }
};

/* IQ1_S = 19: d | qs[32] grid low bytes | qh[8] uint16 (4 x 3 high index bits, a 3-bit
 * scale: dl = d * (2 s + 1), the delta's sign on top) */
template <> struct sl_qt<19> {
    SL_QT_IQ(50, 2);
    static __device__ __forceinline__ uint64_t grid(const uint8_t *b, int j, uint32_t qh, int l)
    {
        return sl_cu_iq1s_grid[b[2 + 4 * j + l] | (((qh >> (3 * l)) & 7u) << 8)];
    }
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const uint32_t qh = sl_ld_u16(b + 34 + 2 * j);
        const float dl = __fmul_rn(sl_h2f(sl_ld_u16(b)), (float)(2 * ((qh >> 12) & 7u) + 1));
        const float delta = (qh & 0x8000u) ? -0.125f : 0.125f;
        for (int l = 0; l < 4; l++) sl_iq1_deq8(grid(b, j, qh, l), dl, delta, v + 8 * l);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        const uint32_t qh = sl_ld_u16(b + 34 + 2 * j);
        const float delta = (qh & 0x8000u) ? -0.125f : 0.125f;
        float s = 0.0f;
#pragma unroll
        for (int l = 0; l < 4; l++) s += sl_iq1_dot8(grid(b, j, qh, l), delta, x + 8 * l);
        return sl_h2f(sl_ld_u16(b)) * (float)(2 * ((qh >> 12) & 7u) + 1) * s;
    }
};

/* IQ1_M = 29: qs[32] grid low bytes | qh[16] (per 8 values a nibble: 3 high index bits, the
 * delta's sign) | scales[8] (four uint16: 3-bit scales per 16, dl = d * (2 s + 1); the fp16 d
 * in their top nibbles, as kernels/ref/blocks.h sl_block_iq1_m_d reads it) */
template <> struct sl_qt<29> {
    SL_QT_IQ(56, 1);
    static __device__ __forceinline__ float d(const uint8_t *b)
    {
        uint32_t h = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) h |= (uint32_t)(b[49 + 2 * i] >> 4) << (4 * i);
        return sl_h2f((uint16_t)h);
    }
    /* the scale of half h (16 values) of unit j */
    static __device__ __forceinline__ float dl(const uint8_t *b, int j, int h)
    {
        const uint32_t w = sl_ld_u16(b + 48 + 2 * (j / 2));
        return __fmul_rn(d(b), (float)(2 * ((w >> (6 * (j & 1) + 3 * h)) & 7u) + 1));
    }
    /* group l's grid entry; its delta's sign is bit 3 of the same nibble */
    static __device__ __forceinline__ uint32_t nib(const uint8_t *b, int j, int l)
    {
        return (b[32 + 2 * j + l / 2] >> (4 * (l & 1))) & 0xFu;
    }
    static __device__ __forceinline__ uint64_t grid(const uint8_t *b, int j, int l)
    {
        return sl_cu_iq1s_grid[b[4 * j + l] | ((nib(b, j, l) & 7u) << 8)];
    }
    static __device__ __forceinline__ void deq(const uint8_t *b, int j, float *v)
    {
        const float d0 = dl(b, j, 0), d1 = dl(b, j, 1);
        for (int l = 0; l < 4; l++)
            sl_iq1_deq8(grid(b, j, l), l < 2 ? d0 : d1, (nib(b, j, l) & 8u) ? -0.125f : 0.125f,
                        v + 8 * l);
    }
    static __device__ __forceinline__ float dot(const uint8_t *b, int j, const float *x, float)
    {
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int l = 0; l < 4; l++)
            s[l >> 1] += sl_iq1_dot8(grid(b, j, l), (nib(b, j, l) & 8u) ? -0.125f : 0.125f,
                                     x + 8 * l);
        return dl(b, j, 0) * s[0] + dl(b, j, 1) * s[1];
    }
};

#undef SL_QT_IQ

#endif
