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
    void (*add)(const float *a, const float *b, float *y, int64_t n);
    void (*mul)(const float *a, const float *b, float *y, int64_t n);
    void (*scale)(float *x, int64_t n, float s);
};

extern const sl__cpu_kernels sl__cpu_kernels_scalar;
#if defined(__x86_64__)
extern const sl__cpu_kernels sl__cpu_kernels_avx2;
extern const sl__cpu_kernels sl__cpu_kernels_avx512;
#endif

#endif
