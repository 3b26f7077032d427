/* runtime/engine/kv.c: the host KV cache (layout and invariants in ctx.h; the executors store rows,
 * runtime/engine/dx.h). */
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/ctx.h"

sl_status sl__kv_init(sl__kv *kv, sl_kv_type type, int32_t n_layer, int32_t n_ctx,
                      int32_t n_kv, int32_t head_dim, bool k_only, sl_error *err)
{
    memset(kv, 0, sizeof *kv);
    kv->k_only = k_only;
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
    if (!k_only) kv->v = calloc(1, (size_t)bytes ? (size_t)bytes : 1);
    if (!kv->k || (!k_only && !kv->v)) {
        sl__kv_free(kv);
        return sl_error_set(err, SL_ERR_NOMEM,
                            "KV cache: out of memory (%d x %llu bytes for n_ctx %d, %s)",
                            k_only ? 1 : 2, (unsigned long long)bytes, n_ctx,
                            type == SL_KV_F16 ? "F16" : "F32");
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
    return (uint8_t *)(v && !kv->k_only ? kv->v : kv->k) + (size_t)l * per;
}
