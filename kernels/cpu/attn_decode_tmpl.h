/* kernels/cpu/attn_decode_tmpl.h: the decode-attention algorithm, instantiated once per ISA.
 *
 * Included (not a normal header: no guard) by ops_scalar.c, ops_avx2.c and ops_avx512.c after
 * they define the static primitives below and SL_ATTN_DECODE_FN, the name of the function to
 * define. The algorithm lives here once; each ISA supplies only its inner loops, which the
 * compiler inlines under that file's target attributes.
 *
 *   float k_dot_f32(const float *a, const float *b, int32_t n)        sum a[i] b[i]
 *   float k_dot_f16(const float *a, const uint16_t *b, int32_t n)     same, b in half
 *   void  k_wsum_f32(float *acc, const float *w, const float *v, size_t stride, int32_t nb,
 *                    int32_t n)   acc[d] += sum_{t < nb} w[t] v[t stride + d], d < n
 *                                 (accumulators stay in registers across the nb rows)
 *   void  k_wsum_f16(float *acc, const float *w, const uint16_t *v, size_t stride, int32_t nb,
 *                    int32_t n)
 *   void  k_scal(float *acc, float s, int32_t n)                      acc *= s
 *   float k_exp_sum(float *s, int32_t n, float m)                     s = exp(s - m); return sum
 *
 * Algorithm (flash-decoding without the split): for each kv head, for each chunk of up to
 * HCHUNK query heads that read it, walk the positions in blocks of BLK: logits of the block for
 * every head of the chunk (each K row stays in L1 while the chunk's heads use it), then the
 * online-softmax update  m' = max(m, max block), acc *= e^(m - m'),
 * l = l e^(m - m') + sum e^(s - m'), acc += sum e^(s - m') V (each V row likewise read once
 * per chunk). out doubles as acc.
 * Sinks join at the end: m'' = max(m, sink), l'' = l e^(m - m'') + e^(sink - m''), acc e^(m - m'').
 * Invariant after each block: acc / l == softmax over the positions seen so far . V, and
 * m >= every logit seen, so no exp argument is positive (no overflow).
 */

enum { SL_ATTN_BLK = 64, SL_ATTN_HCHUNK = 8 };

static void SL_ATTN_DECODE_FN(const float *q, const void *k, const void *v,
                              const sl_attn_params *p, float *out)
{
    const int32_t D = p->head_dim, group = p->n_head / p->n_kv_head;
    const int32_t p0 = p->window > 0 && p->window < p->n_pos ? p->n_pos - p->window : 0;
    const float scale = (p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)D)) *
                        sl_attn_temp(p->temp_scale, p->temp_len, p->n_pos - 1);
    const float cap = p->softcap;
    const size_t row = (size_t)p->n_kv_head * (size_t)D;
    const bool f16 = p->kv_type == SL_KV_F16;

    float s[SL_ATTN_HCHUNK][SL_ATTN_BLK];
    float m[SL_ATTN_HCHUNK], l[SL_ATTN_HCHUNK];

    for (int32_t kvh = 0; kvh < p->n_kv_head; kvh++) {
        for (int32_t g0 = 0; g0 < group; g0 += SL_ATTN_HCHUNK) {
            const int32_t nh = group - g0 < SL_ATTN_HCHUNK ? group - g0 : SL_ATTN_HCHUNK;
            const int32_t h0 = kvh * group + g0; /* first query head of the chunk */
            for (int32_t j = 0; j < nh; j++) {
                m[j] = -INFINITY;
                l[j] = 0.0f;
                float *acc = out + (size_t)(h0 + j) * (size_t)D;
                for (int32_t d = 0; d < D; d++) acc[d] = 0.0f;
            }
            for (int32_t b0 = p0; b0 < p->n_pos; b0 += SL_ATTN_BLK) {
                const int32_t nb = p->n_pos - b0 < SL_ATTN_BLK ? p->n_pos - b0 : SL_ATTN_BLK;
                for (int32_t t = 0; t < nb; t++) {
                    const size_t off = (size_t)(b0 + t) * row + (size_t)kvh * (size_t)D;
                    for (int32_t j = 0; j < nh; j++) {
                        const float *qh = q + (size_t)(h0 + j) * (size_t)D;
                        float dot = f16 ? k_dot_f16(qh, (const uint16_t *)k + off, D)
                                        : k_dot_f32(qh, (const float *)k + off, D);
                        dot *= scale;
                        if (cap > 0.0f) dot = cap * tanhf(dot / cap);
                        s[j][t] = dot;
                    }
                }
                for (int32_t j = 0; j < nh; j++) {
                    float bm = s[j][0];
                    for (int32_t t = 1; t < nb; t++) bm = s[j][t] > bm ? s[j][t] : bm;
                    if (bm > m[j]) {
                        if (m[j] != -INFINITY) { /* rescale what was accumulated */
                            const float c = expf(m[j] - bm);
                            l[j] *= c;
                            k_scal(out + (size_t)(h0 + j) * (size_t)D, c, D);
                        }
                        m[j] = bm;
                    }
                    l[j] += k_exp_sum(s[j], nb, m[j]);
                }
                const size_t voff = (size_t)b0 * row + (size_t)kvh * (size_t)D;
                for (int32_t j = 0; j < nh; j++) {
                    float *acc = out + (size_t)(h0 + j) * (size_t)D;
                    if (f16)
                        k_wsum_f16(acc, s[j], (const uint16_t *)v + voff, row, nb, D);
                    else
                        k_wsum_f32(acc, s[j], (const float *)v + voff, row, nb, D);
                }
            }
            for (int32_t j = 0; j < nh; j++) {
                float *acc = out + (size_t)(h0 + j) * (size_t)D;
                float norm = 1.0f / l[j];
                if (p->sinks) {
                    const float sink = p->sinks[h0 + j];
                    const float mm = sink > m[j] ? sink : m[j];
                    const float c = expf(m[j] - mm);
                    norm = c / (l[j] * c + expf(sink - mm));
                }
                k_scal(acc, norm, D);
            }
        }
    }
}
