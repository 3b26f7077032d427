/* kernels/cpu/attn_prefill_tmpl.h: the tiled prompt-attention algorithm, instantiated once per
 * ISA (flash attention on the CPU).
 *
 * Included (not a normal header: no guard) by ops_scalar.c, ops_avx2.c and ops_avx512.c after
 * they define SL_ATTN_PREFILL_FN (the function to define), SL_VW (float lanes of sl_vf) and the
 * static inline primitives below; the tile shape (SL_ATTN_ROWS = 2 SL_VW rows, kernels/cpu/
 * ops_impl.h's sl__attn_tile_at) and the micro-tile sizes SL_PF_NJ (keys per QK step) and
 * SL_PF_PR x SL_PF_NC (rows x vectors per PV step) come from the ISA too, sized to its registers.
 *
 *   sl_vf v_zero(void), v_set1(float), v_ld(const float *), v_st(float *, sl_vf)
 *   sl_vf v_fma(a, b, c) = a b + c, v_mul, v_add, v_sub, v_max, v_exp (as the ISA's exp)
 *   sl_vf v_mask_inf(s, kp, hi, lo)   s, with -inf in the lanes where kp > hi or kp < lo
 *   sl_vf v_softcap(s, cap, inv_cap)  cap tanh(s inv_cap)
 *   void  k_cvt_row(float *dst, const void *src, bool f16, int32_t n, int32_t np)
 *                                     dst[0, n) = src as float, dst[n, np) = 0
 *
 * A tile: up to R = SL_ATTN_ROWS query rows, each a (token, head) pair of one kv head's GQA
 * group (nt tokens x nh heads, token-major), all reading the same K/V rows. Its keys, from the
 * smallest first visible position of its rows to the largest query position, go by blocks of
 * SL_PF_KB: the block's K and V rows to float ([KB][Dp], once per tile and block, so F16 costs
 * a conversion per element, not per use), then
 *   S^T [KB][R] = K Q^T       Q^T [D][R] holds the tile's queries times scale, built once;
 *                             each key's d-th entry is broadcast against R lanes of rows
 *   online softmax per row    vectorised over the rows (S^T's layout): masked keys (causal,
 *                             window) are -inf; m' = max(m, block max), c = e^(m - m'),
 *                             l = l c + sum e^(s - m'), S^T = e^(s - m')
 *   O [R][Dp] = O c + P V     P^T's entries broadcast against V's rows
 * and at the end out = O / l (sinks, as attn_decode_tmpl.h: l'' = l e^(m - m'') + e^(sink - m'')).
 * Invariant after each block: O[r] / l[r] == softmax over the row's visible keys seen so far . V
 * and m[r] >= each of them; ms = max(m', -FLT_MAX) keeps rows with nothing visible yet at
 * m = -inf, l = 0, O = 0 without an inf - inf. Every used row sees at least its own position,
 * so l > 0 at the end. Unused rows of a short tile compute zeros and are not stored.
 * A row's bits depend on nothing else in its tile: lanes do not mix, the blocks are the
 * multiples of KB (a key beyond a row's range adds an exact 0: e^-inf, c = 1, 0 v), so one
 * token alone (decode) gets the bits it gets inside a prompt. The engine runs decode through
 * this kernel too for that reason (a prompt's logits equal token-by-token decoding's).
 * Summation order differs from attn_decode (per-key dot products there, broadcast FMAs here):
 * the results agree to rounding (tests/kernels/attn_prefill_test.c states the tolerance).
 */

enum { SL_PF_R = SL_ATTN_ROWS, SL_PF_KB = 32, SL_PF_NV = SL_ATTN_ROWS / SL_VW };

/* st[j][0, NV VW) = sum_d kb[j][d] qt[d][0, NV VW) for nj keys j0 .. j0 + nj - 1 (nj <= NJ2,
 * nv <= SL_PF_NV: a tile of at most VW rows, one token's heads in decode, takes one vector and
 * twice the keys; a row's lanes see the same FMAs in the same order either way) */
static inline __attribute__((always_inline)) void pf_qk(float *st, const float *qt,
                                                        const float *kb, int32_t j0, int32_t nj,
                                                        int32_t nv, int32_t D, int32_t Dp)
{
    sl_vf acc[2 * SL_PF_NJ][SL_PF_NV];
    for (int32_t i = 0; i < nj; i++)
        for (int32_t u = 0; u < nv; u++) acc[i][u] = v_zero();
    const float *k0 = kb + (size_t)j0 * (size_t)Dp;
    /* fully unrolled over keys and vectors, so that the accumulators stay in registers
     * (clang left the 16-key loop rolled, with its sums in memory) */
    for (int32_t d = 0; d < D; d++) {
        sl_vf qv[SL_PF_NV];
        for (int32_t u = 0; u < nv; u++) qv[u] = v_ld(qt + (size_t)d * SL_PF_R + u * SL_VW);
#if defined(__clang__)
#pragma clang loop unroll(full)
#endif
        for (int32_t i = 0; i < nj; i++) {
            const sl_vf b = v_set1(k0[(size_t)i * (size_t)Dp + (size_t)d]);
            for (int32_t u = 0; u < nv; u++) acc[i][u] = v_fma(b, qv[u], acc[i][u]);
        }
    }
    for (int32_t i = 0; i < nj; i++)
        for (int32_t u = 0; u < nv; u++)
            v_st(st + (size_t)(j0 + i) * SL_PF_R + u * SL_VW, acc[i][u]);
}

/* o[r0 + i][d0, d0 + NC VW) += sum_j st[j][r0 + i] vb[j][d0 ...], i < PR */
static inline __attribute__((always_inline)) void pf_pv(float *o, const float *st,
                                                        const float *vb, int32_t nb,
                                                        int32_t r0, int32_t d0, int32_t nc,
                                                        int32_t Dp)
{
    sl_vf acc[SL_PF_PR][SL_PF_NC];
    for (int32_t i = 0; i < SL_PF_PR; i++)
        for (int32_t c = 0; c < nc; c++)
            acc[i][c] = v_ld(o + (size_t)(r0 + i) * (size_t)Dp + (size_t)(d0 + c * SL_VW));
    for (int32_t j = 0; j < nb; j++) {
        sl_vf vv[SL_PF_NC];
        for (int32_t c = 0; c < nc; c++)
            vv[c] = v_ld(vb + (size_t)j * (size_t)Dp + (size_t)(d0 + c * SL_VW));
        for (int32_t i = 0; i < SL_PF_PR; i++) {
            const sl_vf w = v_set1(st[(size_t)j * SL_PF_R + (size_t)(r0 + i)]);
            for (int32_t c = 0; c < nc; c++) acc[i][c] = v_fma(w, vv[c], acc[i][c]);
        }
    }
    for (int32_t i = 0; i < SL_PF_PR; i++)
        for (int32_t c = 0; c < nc; c++)
            v_st(o + (size_t)(r0 + i) * (size_t)Dp + (size_t)(d0 + c * SL_VW), acc[i][c]);
}

static void SL_ATTN_PREFILL_FN(const float *q, const void *k, const void *v,
                               const sl_attn_params *p, const int32_t *pos, int64_t n_tok,
                               int64_t tile, float *out)
{
    const int32_t D = p->head_dim, Dp = (D + SL_VW - 1) / SL_VW * SL_VW;
    const sl__attn_tile t = sl__attn_tile_at(p, n_tok, SL_PF_R, tile);
    const float scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)D);
    const float cap = p->softcap, inv_cap = cap > 0.0f ? 1.0f / cap : 0.0f;
    const bool f16 = p->kv_type == SL_KV_F16;
    const size_t esz = f16 ? 2 : 4, row = (size_t)p->n_kv_head * (size_t)D;
    const size_t qd = (size_t)p->n_head * (size_t)D;
    const int32_t used = (int32_t)t.nt * t.nh;

    _Alignas(64) float qt[SL_CPU_ATTN_TILE_MAX_D * SL_PF_R];
    _Alignas(64) float o[SL_PF_R * SL_CPU_ATTN_TILE_MAX_D];
    _Alignas(64) float kb[SL_PF_KB * SL_CPU_ATTN_TILE_MAX_D], vb[SL_PF_KB * SL_CPU_ATTN_TILE_MAX_D];
    _Alignas(64) float st[SL_PF_KB * SL_PF_R];
    _Alignas(64) float m[SL_PF_R], l[SL_PF_R], hi[SL_PF_R], lo[SL_PF_R], cr[SL_PF_R];

    /* the rows: Q^T, visible key range [lo, hi] of each */
    int64_t kbeg = INT64_MAX, kend = 0, min_hi = INT64_MAX, max_lo = 0;
    for (int32_t r = 0; r < SL_PF_R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        if (r < used) {
            const int64_t tok = t.t0 + r / t.nh;
            const int32_t h = t.h0 + r % t.nh;
            const float *qr = q + (size_t)tok * qd + (size_t)h * (size_t)D;
            const int64_t ph = pos[tok];
            const float sr = scale * sl_attn_temp(p->temp_scale, p->temp_len, (int32_t)ph);
            for (int32_t d = 0; d < D; d++) qt[(size_t)d * SL_PF_R + (size_t)r] = qr[d] * sr;
            const int64_t pl = p->window > 0 && ph + 1 > p->window ? ph + 1 - p->window : 0;
            hi[r] = (float)ph;
            lo[r] = (float)pl;
            kbeg = pl < kbeg ? pl : kbeg;
            kend = ph + 1 > kend ? ph + 1 : kend;
            min_hi = ph < min_hi ? ph : min_hi;
            max_lo = pl > max_lo ? pl : max_lo;
        } else { /* computes zeros against every key, never stored */
            for (int32_t d = 0; d < D; d++) qt[(size_t)d * SL_PF_R + (size_t)r] = 0.0f;
            hi[r] = INFINITY;
            lo[r] = -INFINITY;
        }
    }
    for (size_t i = 0; i < (size_t)SL_PF_R * (size_t)Dp; i++) o[i] = 0.0f;
    const int32_t used_pr = (used + SL_PF_PR - 1) / SL_PF_PR * SL_PF_PR;
    /* vectors of rows in use: the P V step reads rows up to used_pr, none past nv VW */
    const int32_t nv = used_pr <= SL_VW ? 1 : SL_PF_NV;

    /* blocks at multiples of KB: a row's blocks, so its bits, do not depend on its tile */
    for (int64_t b0 = kbeg / SL_PF_KB * SL_PF_KB; b0 < kend; b0 += SL_PF_KB) {
        const int32_t nb = kend - b0 < SL_PF_KB ? (int32_t)(kend - b0) : SL_PF_KB;
        for (int32_t j = 0; j < nb; j++) {
            const size_t off = ((size_t)(b0 + j) * row + (size_t)t.kvh * (size_t)D) * esz;
            k_cvt_row(kb + (size_t)j * (size_t)Dp, (const uint8_t *)k + off, f16, D, Dp);
            k_cvt_row(vb + (size_t)j * (size_t)Dp, (const uint8_t *)v + off, f16, D, Dp);
        }
        /* S^T = K Q^T */
        int32_t j = 0;
        if (nv == 1) {
            for (; j + 2 * SL_PF_NJ <= nb; j += 2 * SL_PF_NJ)
                pf_qk(st, qt, kb, j, 2 * SL_PF_NJ, 1, D, Dp);
            for (; j < nb; j++) pf_qk(st, qt, kb, j, 1, 1, D, Dp);
        } else {
            for (; j + SL_PF_NJ <= nb; j += SL_PF_NJ)
                pf_qk(st, qt, kb, j, SL_PF_NJ, SL_PF_NV, D, Dp);
            for (; j < nb; j++) pf_qk(st, qt, kb, j, 1, SL_PF_NV, D, Dp);
        }
        /* online softmax, SL_VW rows at a time */
        const bool mask = b0 < max_lo || b0 + nb - 1 > min_hi;
        for (int32_t u = 0; u < nv; u++) {
            float *su = st + u * SL_VW;
            const sl_vf vhi = v_ld(hi + u * SL_VW), vlo = v_ld(lo + u * SL_VW);
            sl_vf bm = v_set1(-INFINITY);
            for (int32_t jj = 0; jj < nb; jj++) {
                sl_vf s = v_ld(su + (size_t)jj * SL_PF_R);
                if (cap > 0.0f) s = v_softcap(s, cap, inv_cap);
                if (mask) s = v_mask_inf(s, (float)(b0 + jj), vhi, vlo);
                v_st(su + (size_t)jj * SL_PF_R, s);
                bm = v_max(bm, s);
            }
            const sl_vf vm = v_ld(m + u * SL_VW), mn = v_max(vm, bm);
            const sl_vf ms = v_max(mn, v_set1(-FLT_MAX));
            const sl_vf c = v_exp(v_sub(vm, ms));
            sl_vf sum = v_zero();
            for (int32_t jj = 0; jj < nb; jj++) {
                const sl_vf e = v_exp(v_sub(v_ld(su + (size_t)jj * SL_PF_R), ms));
                v_st(su + (size_t)jj * SL_PF_R, e);
                sum = v_add(sum, e);
            }
            v_st(l + u * SL_VW, v_fma(v_ld(l + u * SL_VW), c, sum));
            v_st(m + u * SL_VW, mn);
            v_st(cr + u * SL_VW, c);
        }
        /* O = O c + P V */
        for (int32_t r = 0; r < used; r++) {
            if (cr[r] == 1.0f) continue;
            const sl_vf c = v_set1(cr[r]);
            float *orow = o + (size_t)r * (size_t)Dp;
            for (int32_t d = 0; d < Dp; d += SL_VW) v_st(orow + d, v_mul(v_ld(orow + d), c));
        }
        for (int32_t r0 = 0; r0 < used_pr; r0 += SL_PF_PR) {
            int32_t d0 = 0;
            for (; d0 + SL_PF_NC * SL_VW <= Dp; d0 += SL_PF_NC * SL_VW)
                pf_pv(o, st, vb, nb, r0, d0, SL_PF_NC, Dp);
            for (; d0 < Dp; d0 += SL_VW) pf_pv(o, st, vb, nb, r0, d0, 1, Dp);
        }
    }
    for (int32_t r = 0; r < used; r++) {
        const int64_t tok = t.t0 + r / t.nh;
        const int32_t h = t.h0 + r % t.nh;
        float norm = 1.0f / l[r];
        if (p->sinks) {
            const float sink = p->sinks[h];
            const float mm = sink > m[r] ? sink : m[r];
            const float c = expf(m[r] - mm);
            norm = c / (l[r] * c + expf(sink - mm));
        }
        float *dst = out + (size_t)tok * qd + (size_t)h * (size_t)D;
        const float *orow = o + (size_t)r * (size_t)Dp;
        for (int32_t d = 0; d < D; d++) dst[d] = orow[d] * norm;
    }
}
