/* kernels/cuda/qx.cuh: the Q8-activation decoders of the GEMV (gemv.cu k_gemv_qx) for Q8_0,
 * Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4.
 *
 * A unit (32 weights) of one row is loaded into registers as words (sl_qx_load), then its
 * term against an int8 x unit with ggml's Q8_1 scale xd and xs = xd * sum q is formed by dp4a
 * (sl_qx_term): Q8_0 d * xd * isum; Q4_K / Q5_K d * sc * xd * isum - dmin * m * xs; Q6_K
 * d * xd * (sc0 * isum0 + sc1 * isum1) over its halves of 16 with the values q - 32; IQ4_XS
 * d * (ls - 32) * xd * isum over the codebook's int8 values; MXFP4 2^(e - 128) * xd * isum
 * over its doubled E2M1 values. A header of its own so that tests/kernels_cuda:qt_host_test
 * runs the decoders on the CPU; included by common.cuh after the element decoders and table
 * lookups it uses, never alone. */
#ifndef SL_KERNELS_CUDA_QX_CUH
#define SL_KERNELS_CUDA_QX_CUH

/* the types k_gemv_qx takes */
static __host__ __device__ constexpr bool sl_qx_type(uint32_t t)
{
    return t == 8 || t == 12 || t == 13 || t == 14 || t == 23 || t == 39;
}

/* The alignment (bytes) of a matrix for sl_qx_load's AL form: Q8_0, Q6_K and MXFP4 read 4-byte
 * words (their blocks start at any even / any offset), IQ4_XS 8-byte ones (136-byte blocks),
 * Q4_K / Q5_K 16-byte vectors. */
static __host__ __device__ constexpr int sl_qx_align(uint32_t t)
{
    return t == 8 || t == 14 || t == 39 ? 4 : t == 23 ? 8 : 16;
}

/* Whether the AL form holds for rows of any length of the type: IQ4_XS (136-byte blocks keep
 * the matrix's 8-byte alignment), Q6_K (its word reads take any even address; the 2 bytes
 * before a segment exist but for the matrix's first block, which starts 4-byte aligned),
 * MXFP4 (reads from a block's start rounded down to a word, through its last byte only). The
 * others need row_bytes a multiple of 16. */
static __host__ __device__ constexpr bool sl_qx_any_rows(uint32_t t)
{
    return t == 14 || t == 23 || t == 39;
}

/* One unit's weight words of one row. Q8_0: v0 d, v1..8 the quants. Q4_K: v0..3 the block's
 * head (d, dmin, scales[12]), v4..11 the 32 bytes of quants the unit takes nibbles of. Q5_K: as
 * Q4_K, v12..19 the block's 32 high-bit bytes. Q6_K: v0 d, v1 the unit's two int8 scales,
 * v2..9 its 32 low-bit bytes, v10..17 its 32 high-bit bytes. IQ4_XS: v0 d | scales_h << 16,
 * v1 scales_l[4], v2..5 the unit's 16 code bytes. MXFP4: v0 the exponent byte, v1..4 the 16
 * code bytes. */
struct sl_qx_w {
    uint32_t v[20];
};

/* 32 bytes at p (2-byte aligned) as 8 words: aligned words from p rounded down, funnel-
 * shifted. At p = 2 mod 4 it reads the 2 bytes before p and the 2 after its 32, which the
 * caller knows to exist; at p = 0 mod 4 exactly the 32. */
static __device__ __forceinline__ void sl_qx_ld32_a2(const uint8_t *p, uint32_t *o)
{
    const uint32_t sh = 8u * (uint32_t)((uintptr_t)p & 3u);
    const uint32_t *q = (const uint32_t *)(const void *)(p - ((uintptr_t)p & 3u));
    uint32_t x[9];
#pragma unroll
    for (int i = 0; i < 8; i++) x[i] = __ldg(q + i);
    x[8] = sh ? __ldg(q + 8) : 0u;
#pragma unroll
    for (int i = 0; i < 8; i++) o[i] = __funnelshift_r(x[i], x[i + 1], sh);
}

/* n 16-byte vectors at p (16-byte aligned; AL) or any bytes (!AL) into o[4 n] */
template <bool AL, int N>
static __device__ __forceinline__ void sl_qx_ld16(const uint8_t *p, uint32_t *o)
{
#pragma unroll
    for (int k = 0; k < N; k++) {
        if (AL) {
            const uint4 v = __ldg((const uint4 *)(const void *)(p + 16 * k));
            o[4 * k] = v.x, o[4 * k + 1] = v.y, o[4 * k + 2] = v.z, o[4 * k + 3] = v.w;
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) o[4 * k + i] = sl_ld_u32_a1(p + 16 * k + 4 * i);
        }
    }
}

/* Unit u of `row` into w. AL: the matrix has sl_qx_align(T): loads without a branch. Else
 * (an expert matrix through the device-side pointer array, which the host cannot check):
 * byte loads. */
template <uint32_t T, bool AL>
static __device__ __forceinline__ void sl_qx_load(const uint8_t *row, int64_t u, sl_qx_w &w)
{
    if constexpr (T == 12 || T == 13) {
        const int64_t bb = T == 12 ? 144 : 176;
        const uint8_t *b = row + (u >> 3) * bb;
        sl_qx_ld16<AL, 1>(b, w.v);
        sl_qx_ld16<AL, 2>(b + (T == 12 ? 16 : 48) + 32 * ((u & 7) >> 1), w.v + 4);
        if (T == 13) sl_qx_ld16<AL, 2>(b + 16, w.v + 12);
    } else if constexpr (T == 23) {
        const uint8_t *b = row + (u >> 3) * 136, *q = b + 8 + 16 * (u & 7);
        if (AL) {
            const uint2 h = __ldg((const uint2 *)(const void *)b);
            const uint2 q0 = __ldg((const uint2 *)(const void *)q);
            const uint2 q1 = __ldg((const uint2 *)(const void *)(q + 8));
            w.v[0] = h.x, w.v[1] = h.y, w.v[2] = q0.x, w.v[3] = q0.y, w.v[4] = q1.x;
            w.v[5] = q1.y;
        } else {
            w.v[0] = sl_ld_u32_a1(b), w.v[1] = sl_ld_u32_a1(b + 4);
#pragma unroll
            for (int i = 0; i < 4; i++) w.v[2 + i] = sl_ld_u32_a1(q + 4 * i);
        }
    } else if constexpr (T == 39) {
        const uint8_t *b = row + u * 17;
        if (AL) {
            /* the 17 bytes from b rounded down to a word (the bytes before it exist: the
             * matrix is 4-byte aligned): 4 words, then of the 5th only the s + 1 bytes that
             * are the block's (it may end the matrix) */
            const uint32_t s = (uint32_t)((uintptr_t)b & 3u);
            const uint8_t *bw = b - s;
            const uint32_t *p = (const uint32_t *)(const void *)bw;
            uint32_t x[5];
#pragma unroll
            for (int i = 0; i < 4; i++) x[i] = __ldg(p + i);
            if (s == 3) {
                x[4] = __ldg(p + 4);
            } else {
                x[4] = s ? __ldg((const unsigned short *)(const void *)(bw + 16)) : __ldg(bw + 16);
                if (s == 2) x[4] |= (uint32_t)__ldg(bw + 18) << 16;
            }
            w.v[0] = (x[0] >> (8 * s)) & 0xFFu;
            /* code word i starts at window byte s + 1 + 4 i: word i + 1 itself when s = 3 */
#pragma unroll
            for (int i = 0; i < 4; i++)
                w.v[1 + i] = s == 3 ? x[i + 1] : __funnelshift_r(x[i], x[i + 1], 8 * (s + 1));
        } else {
            w.v[0] = b[0];
#pragma unroll
            for (int i = 0; i < 4; i++) w.v[1 + i] = sl_ld_u32_a1(b + 1 + 4 * i);
        }
    } else if constexpr (T == 14) {
        const int j = (int)(u & 7), h = j >> 2, t = j & 3;
        const uint8_t *b = row + (u >> 3) * 210;
        const uint8_t *ql = b + 64 * h + 32 * (t & 1), *qh = b + 128 + 32 * h;
        const uint8_t *sc = b + 192 + 8 * h + 2 * t;
        if (AL) {
            /* a block starts at an even offset of a 4-byte aligned matrix. Its segments end
             * at most at byte 192 of 210, so the 2 bytes past one stay in the block; 2 bytes
             * before one exist as the block is then not the matrix's first (that one starts
             * 4-byte aligned). */
            sl_qx_ld32_a2(ql, w.v + 2);
            sl_qx_ld32_a2(qh, w.v + 10);
            w.v[0] = __ldg((const unsigned short *)(const void *)(b + 208));
            w.v[1] = __ldg((const unsigned short *)(const void *)sc);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                w.v[2 + i] = sl_ld_u32_a1(ql + 4 * i);
                w.v[10 + i] = sl_ld_u32_a1(qh + 4 * i);
            }
            w.v[0] = sl_ld_u16(b + 208);
            w.v[1] = sl_ld_u16(sc);
        }
    } else {
        const uint8_t *b = row + u * 34;
        if (AL) {
            /* the block starts 0 or 2 mod 4 (u even or odd); an even block's quants (at 2 mod
             * 4) take 2 bytes of its successor, which exists: an even block is never a row's
             * last, a row of 16-byte multiple holding a multiple of 8 blocks */
            w.v[0] = __ldg((const unsigned short *)(const void *)b);
            sl_qx_ld32_a2(b + 2, w.v + 1);
        } else {
            w.v[0] = sl_ld_u16(b);
#pragma unroll
            for (int i = 0; i < 8; i++) w.v[1 + i] = sl_ld_u32_a1(b + 2 + 4 * i);
        }
    }
}

/* Q4_K / Q5_K: ggml's get_scale_min_k4 for sub j from the head's scale words v1..3, bytes
 * picked by shifts (an array indexed at run time would go to local memory) */
static __device__ __forceinline__ void sl_qx_scale_min(const sl_qx_w &w, int j, int *sc, int *m)
{
    const int k = j & 3;
    const int b0 = (int)((w.v[1] >> (8 * k)) & 0xFFu), b1 = (int)((w.v[2] >> (8 * k)) & 0xFFu),
              b2 = (int)((w.v[3] >> (8 * k)) & 0xFFu);
    *sc = j < 4 ? b0 & 63 : (b2 & 0xF) | ((b0 >> 6) << 4);
    *m = j < 4 ? b1 & 63 : (b2 >> 4) | ((b1 >> 6) << 4);
}

/* IQ4_XS (MX false) / MXFP4: the dot of a unit's 16 code bytes q (low nibbles elements 0..15,
 * high 16..31) as their int8 table values with xq */
template <bool MX>
static __device__ __forceinline__ int sl_qx_codes_isum(const uint32_t *q, const int *xq)
{
    int isum = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint32_t lo = q[i] & 0x0F0F0F0Fu, hi = (q[i] >> 4) & 0x0F0F0F0Fu;
        isum = __dp4a((int)(MX ? sl_mxfp4_lut4(lo) : sl_iq4nl_lut4(lo)), xq[i], isum);
        isum = __dp4a((int)(MX ? sl_mxfp4_lut4(hi) : sl_iq4nl_lut4(hi)), xq[4 + i], isum);
    }
    return isum;
}

/* Unit u's term from its loaded words against the int8 x unit xq (scale xd, xs = xd * sum q). */
template <uint32_t T>
static __device__ __forceinline__ float sl_qx_term(const sl_qx_w &w, int64_t u, const int *xq,
                                                   float xd, float xs)
{
    const int j = (int)(u & 7);
    if constexpr (T == 12 || T == 13) {
        const int sh = 4 * (j & 1);
        int isum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t q = (w.v[4 + i] >> sh) & 0x0F0F0F0Fu;
            if (T == 13) q |= ((w.v[12 + i] >> j) & 0x01010101u) << 4;
            isum = __dp4a((int)q, xq[i], isum);
        }
        int sc, m;
        sl_qx_scale_min(w, j, &sc, &m);
        const float d = sl_h2f((uint16_t)w.v[0]), dmin = sl_h2f((uint16_t)(w.v[0] >> 16));
        return d * (float)sc * xd * (float)isum - dmin * (float)m * xs;
    } else if constexpr (T == 14) {
        const int t = j & 3, shl = 4 * (t >> 1), shh = 2 * t;
        int is[2] = {0, 0};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t q = ((w.v[2 + i] >> shl) & 0x0F0F0F0Fu) |
                               (((w.v[10 + i] >> shh) & 0x03030303u) << 4);
            /* q - 32 per byte: signed bytes -32..31 */
            is[i >> 2] = __dp4a((int)__vsub4(q, 0x20202020u), xq[i], is[i >> 2]);
        }
        const int sc0 = (int8_t)(w.v[1] & 0xFFu), sc1 = (int8_t)((w.v[1] >> 8) & 0xFFu);
        return sl_h2f((uint16_t)w.v[0]) * xd * (float)(sc0 * is[0] + sc1 * is[1]);
    } else if constexpr (T == 23) {
        const int isum = sl_qx_codes_isum<false>(w.v + 2, xq);
        /* ls: 4 bits of scales_l[j / 2] (nibble j % 2), 2 bits of scales_h at 2 j */
        const int ls =
            (int)((w.v[1] >> (4 * j)) & 0xFu) | (int)(((w.v[0] >> (16 + 2 * j)) & 3u) << 4);
        return sl_h2f((uint16_t)w.v[0]) * (float)(ls - 32) * xd * (float)isum;
    } else if constexpr (T == 39) {
        return sl_e8m0_half((uint8_t)w.v[0]) * xd * (float)sl_qx_codes_isum<true>(w.v + 1, xq);
    } else {
        int isum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) isum = __dp4a((int)w.v[1 + i], xq[i], isum);
        return sl_h2f((uint16_t)w.v[0]) * xd * (float)isum;
    }
}

#endif
