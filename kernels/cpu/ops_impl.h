/* kernels/cpu/ops_impl.h: the per-ISA kernel table behind sl_cpu_ops (private to kernels/cpu).
 *
 * Invariant: a kernel is only called through a table whose ISA the running CPU supports
 * (sl_cpu_ops_init guarantees it), and only with arguments the public wrapper in ops_dispatch.c
 * has validated: n >= 1, pointers non-NULL, attention/rope params valid. So kernels check nothing.
 */
#ifndef SL_KERNELS_CPU_OPS_IMPL_H
#define SL_KERNELS_CPU_OPS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"

/* Rope angle table of one token, as rope_rows reads it (cs has 2 * n_rot floats):
 *  NORMAL: cs[j] = cos of pair j/2, cs[n_rot + j] = (j even ? -1 : +1) * sin of pair j/2, so
 *          out[j] = x[j] * cs[j] + x[j ^ 1] * cs[n_rot + j] (a lane swap and two FMAs);
 *  NEOX:   cs[i] = cos, cs[n_rot + i] = sin of pair i for i < n_rot/2 (the rest 0), so
 *          out[i] = x[i] c - x[i + h] s and out[i + h] = x[i] s + x[i + h] c, h = n_rot/2. */
struct sl__cpu_kernels {
    sl_cpu_isa isa;
    void (*rms_norm)(const float *x, const float *w, float *y, int64_t n, float eps,
                     bool one_plus_w);
    void (*softmax)(float *x, int64_t n, float scale, const float *mask);
    void (*silu)(const float *x, float *y, int64_t n);
    void (*swiglu)(const float *gate, const float *up, float *out, int64_t n);
    /* out = gelu(gate) * up, or gelu(gate) alone when up is NULL (sl_cpu_gelu): one kernel,
     * so both entry points share the approximation and its tolerance. */
    void (*geglu)(const float *gate, const float *up, float *out, int64_t n, sl_gelu_kind kind);
    /* n_rows rows of head_dim (all of one token), rotated by the table cs */
    void (*rope_rows)(float *x, int32_t n_rows, int32_t head_dim, int32_t n_rot,
                      sl_rope_mode mode, const float *cs);
    void (*attn_decode)(const float *q, const void *k, const void *v, const sl_attn_params *p,
                        float *out);
    /* tile `tile` of sl__attn_tile_at(p, n_tok, attn_rows, .) (attn_prefill_tmpl.h) */
    void (*attn_prefill)(const float *q, const void *k, const void *v, const sl_attn_params *p,
                         const int32_t *pos, int64_t n_tok, int64_t tile, float *out);
    int32_t attn_rows; /* query rows of a prefill tile: 2 vectors of floats */
    void (*to_f16)(const float *x, uint16_t *y, int64_t n);
    void (*add)(const float *a, const float *b, float *y, int64_t n);
    void (*mul)(const float *a, const float *b, float *y, int64_t n);
    void (*scale)(float *x, int64_t n, float s);
};

/* A prompt-attention tile: tokens [t0, t0 + nt) x query heads [h0, h0 + nh) of kv head kvh
 * (nh of the kv head's GQA group, nt * nh <= rows). A group wider than rows goes in chunks of
 * rows heads, one token each. Tiles are numbered with the last tokens (the most keys) first, so
 * the pool's dynamic chunks start with the longest. */
typedef struct sl__attn_tile {
    int32_t kvh, h0, nh;
    int64_t t0, nt;
} sl__attn_tile;

static inline int64_t sl__attn_tiles(const sl_attn_params *p, int64_t n_tok, int32_t rows)
{
    const int32_t group = p->n_head / p->n_kv_head, nh = group < rows ? group : rows;
    const int64_t nt = rows / nh, nhc = (group + nh - 1) / nh;
    return (int64_t)p->n_kv_head * nhc * ((n_tok + nt - 1) / nt);
}

static inline sl__attn_tile sl__attn_tile_at(const sl_attn_params *p, int64_t n_tok,
                                             int32_t rows, int64_t i)
{
    const int32_t group = p->n_head / p->n_kv_head, nh = group < rows ? group : rows;
    const int64_t nt = rows / nh, nhc = (group + nh - 1) / nh, per = p->n_kv_head * nhc;
    const int64_t tb = (n_tok + nt - 1) / nt - 1 - i / per, hc = i % per % nhc;
    sl__attn_tile t = {.kvh = (int32_t)(i % per / nhc), .h0 = 0, .nh = nh, .t0 = tb * nt,
                       .nt = n_tok - tb * nt < nt ? n_tok - tb * nt : nt};
    t.h0 = t.kvh * group + (int32_t)hc * nh;
    if (group - (int32_t)hc * nh < nh) t.nh = group - (int32_t)hc * nh;
    return t;
}

extern const sl__cpu_kernels sl__cpu_kernels_scalar;
#if defined(__x86_64__)
extern const sl__cpu_kernels sl__cpu_kernels_avx2;
extern const sl__cpu_kernels sl__cpu_kernels_avx512;
#endif

#endif
