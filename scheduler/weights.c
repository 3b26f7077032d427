/* scheduler/weights.c: see weights.h. */
#include "scheduler/weights.h"

uint64_t sl__weight_slice_bytes(const sl_weight *w)
{
    const uint64_t per = (uint64_t)(w->ne[2] * w->ne[3]);
    return per ? w->nbytes / per : 0;
}

sl_status sl_weight_validate(const sl_weight *w, const sl_hostpool *pool, sl_error *err)
{
    if (w->residency == SL_RES_PARTS) {
        if (w->data || w->h_block != SL_BLOCK_NONE || w->d_block != SL_BLOCK_NONE || w->h_owned)
            return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' is split into parts "
                                "but keeps data or blocks of its own", w->name);
        return SL_OK;
    }
    if (!w->residency != !w->data || !w->residency)
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' has residency %u and "
                            "data %p", w->name, w->residency, w->data);
    if ((w->d_block != SL_BLOCK_NONE) != !!(w->residency & SL_RES_DEVICE))
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s': device block and "
                            "residency disagree", w->name);
    if (w->h_block != SL_BLOCK_NONE) {
        const uint8_t *h = pool ? sl_hostpool_ptr(pool, w->h_block) : NULL;
        const uint64_t cap = pool ? sl_hostpool_size(pool, w->h_block) : 0;
        const uint8_t *d = w->data;
        if (!h || d < h || d + w->nbytes > h + cap)
            return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' lies outside its "
                                "host block", w->name);
    }
    if (!w->converted && w->type != w->file_type)
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' changed type without "
                            "conversion", w->name);
    return SL_OK;
}
