/* scheduler/weights.c: see weights.h. */
#include "scheduler/weights.h"

#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"

size_t sl__type_row_bytes(uint32_t type, int64_t n)
{
    return sl_quant_row_bytes(sl_repack_base_type(type), n);
}

uint64_t sl__weight_slice_bytes(const sl_weight *w)
{
    const uint64_t per = (uint64_t)(w->ne[2] * w->ne[3]);
    return per ? w->nbytes / per : 0;
}

bool sl__weight_needs_f32(const sl_weight *w, uint32_t file_type)
{
    if (w->derive != SL_DERIVE_NONE) return true;
    if (w->need_f32 && file_type != SL_GGML_F32) return true;
    return w->need_matvec && !sl_ref_matvec_supported(file_type);
}

sl_weight_storage sl__weight_storage_get(const sl_weight *w)
{
    return (sl_weight_storage){.type = w->type, .nbytes = w->nbytes, .residency = w->residency,
                               .data = w->data, .h_block = w->h_block, .d_block = w->d_block,
                               .h_owned = w->h_owned, .converted = w->converted};
}

void sl__weight_storage_set(sl_weight *w, const sl_weight_storage *s)
{
    w->type = s->type;
    w->nbytes = s->nbytes;
    w->residency = s->residency;
    w->data = s->data;
    w->h_block = s->h_block;
    w->d_block = s->d_block;
    w->h_owned = s->h_owned;
    w->converted = s->converted;
}

void sl__weight_provenance_set(sl_weight *w, const sl_gguf_tensor *t, uint64_t file_size)
{
    w->file_type = t->type;
    w->file_offset = t->file_offset;
    w->file_nbytes = t->nbytes;
    w->mtime_sec = t->mtime_sec;
    w->mtime_nsec = t->mtime_nsec;
    w->file_size = file_size;
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
    if (w->orig_set && w->swapped != (w->data != w->orig.data))
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s': swapped flag and "
                            "storage disagree", w->name);
    if (w->fallback && (w->residency != SL_RES_HOST ||
                        (w->orig_set && (!w->swapped || !(w->orig.residency & SL_RES_DEVICE)))))
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s': host fallback of a "
                            "weight that was not on the device", w->name);
    if (w->derive != SL_DERIVE_NONE && !w->converted)
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' is derived but not "
                            "converted", w->name);
    const bool repacked = sl__weight_repacked(w);
    if (repacked && (w->file_type != SL_GGML_Q4_K || w->residency != SL_RES_HOST ||
                     w->converted || (w->h_block == SL_BLOCK_NONE && w->h_owned == NULL)))
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s': repacked (Q4_K_R8) "
                            "with file type %u, residency %u, converted %d, %s storage of its "
                            "own", w->name, w->file_type, w->residency, w->converted,
                            w->h_block != SL_BLOCK_NONE || w->h_owned ? "with" : "no");
    if (!w->converted && !repacked && w->type != w->file_type)
        return sl_error_set(err, SL_ERR_INVALID, "weight invariant: '%s' changed type without "
                            "conversion", w->name);
    return SL_OK;
}
