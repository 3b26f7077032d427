/* runtime/kv.c: the KV cache (layout and invariants in ctx.h). F16 entries are rounded to
 * nearest even from the F32 projections (ggml's cpy to an F16 cache does the same). */
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/quant.h"
#include "runtime/ctx.h"

sl_status sl__kv_init(sl__kv *kv, sl_kv_type type, int32_t n_layer, int32_t n_ctx,
                      int32_t n_kv, int32_t head_dim, sl_error *err)
{
    memset(kv, 0, sizeof *kv);
    kv->type = type;
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->n_kv = n_kv;
    kv->head_dim = head_dim;
    kv->elt = type == SL_KV_F16 ? 2 : 4;
    const uint64_t n = (uint64_t)n_layer * (uint64_t)n_ctx * (uint64_t)n_kv * (uint64_t)head_dim;
    const uint64_t bytes = n * kv->elt;
    if (bytes / kv->elt != n || bytes > SIZE_MAX / 2)
        return sl_error_set(err, SL_ERR_RANGE, "KV cache: size overflows (n_ctx %d)", n_ctx);
    kv->k = calloc(1, (size_t)bytes ? (size_t)bytes : 1);
    kv->v = calloc(1, (size_t)bytes ? (size_t)bytes : 1);
    if (!kv->k || !kv->v) {
        sl__kv_free(kv);
        return sl_error_set(err, SL_ERR_NOMEM,
                            "KV cache: out of memory (2 x %llu bytes for n_ctx %d, %s)",
                            (unsigned long long)bytes, n_ctx, type == SL_KV_F16 ? "F16" : "F32");
    }
    return SL_OK;
}

void sl__kv_free(sl__kv *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

void *sl__kv_layer(const sl__kv *kv, bool v, int32_t l)
{
    const size_t per = (size_t)kv->n_ctx * (size_t)kv->n_kv * (size_t)kv->head_dim * kv->elt;
    return (uint8_t *)(v ? kv->v : kv->k) + (size_t)l * per;
}

void sl__kv_store(sl__kv *kv, int32_t l, const int32_t *pos, int64_t n, const float *k,
                  const float *v)
{
    const size_t row = (size_t)kv->n_kv * (size_t)kv->head_dim;
    uint8_t *kb = sl__kv_layer(kv, false, l), *vb = sl__kv_layer(kv, true, l);
    for (int64_t t = 0; t < n; t++) {
        const float *ks = k + (size_t)t * row, *vs = v + (size_t)t * row;
        if (kv->type == SL_KV_F32) {
            memcpy(kb + (size_t)pos[t] * row * 4, ks, row * 4);
            memcpy(vb + (size_t)pos[t] * row * 4, vs, row * 4);
        } else {
            uint16_t *kd = (uint16_t *)(kb + (size_t)pos[t] * row * 2);
            uint16_t *vd = (uint16_t *)(vb + (size_t)pos[t] * row * 2);
            for (size_t i = 0; i < row; i++) {
                kd[i] = sl_quant_fp32_to_fp16(ks[i]);
                vd[i] = sl_quant_fp32_to_fp16(vs[i]);
            }
        }
    }
}
