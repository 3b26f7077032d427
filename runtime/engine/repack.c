/* runtime/engine/repack.c: see repack.h. */
#include "runtime/engine/repack.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/repack.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"

bool sl__weight_repack_wanted(const sl_model *m, const sl_weight *w, uint32_t file_type)
{
    const size_t i = (size_t)(w - m->w);
    if (m->opt.no_repack || m->opt.io == SL_LOAD_MMAP || file_type != SL_GGML_Q4_K ||
        !w->need_matvec || w == m->tok_embd || w->derive != SL_DERIVE_NONE ||
        w->residency == SL_RES_PARTS || i >= m->n_w)
        return false;
    if (w->ne[0] <= 0 || w->ne[0] % 256 || w->ne[1] <= 0 || w->ne[1] % 8) return false;
    if (m->plan.on_device && m->plan.on_device[i]) return false;
    return !sl__floor_shared_data(m, w);
}

sl_status sl__weight_repack_bytes(const sl_weight *w, void *data, sl_error *err)
{
    const int64_t rows = w->ne[1] * w->ne[2] * w->ne[3];
    sl_status st = sl_repack_q4_K_r8(data, data, rows, w->ne[0], err);
    if (st)
        return sl_error_set(err, st, "tensor '%s': repacking to Q4_K_R8: %s", w->name,
                            err ? err->msg : "");
    return SL_OK;
}

/* The weights of the load pass: wanted, with a host pool block of their own. */
static bool load_wanted(const sl_model *m, const sl_weight *w)
{
    return w->residency == SL_RES_HOST && w->h_block != SL_BLOCK_NONE && !w->converted &&
           sl__weight_repack_wanted(m, w, w->type);
}

sl_status sl__model_repack(sl_model *m, sl_error *err)
{
    uint64_t n = 0, bytes = 0;
    for (size_t i = 0; i < m->n_w; i++) n += load_wanted(m, &m->w[i]);
    if (!n) return SL_OK;
    sl_cpu_repack_part *parts = calloc((size_t)n, sizeof *parts);
    if (!parts)
        return sl_error_set(err, SL_ERR_NOMEM, "CPU repack: no memory for %llu tensors",
                            (unsigned long long)n);
    n = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (load_wanted(m, w))
            parts[n++] = (sl_cpu_repack_part){.data = (void *)w->data, .name = w->name,
                                              .rows = w->ne[1] * w->ne[2] * w->ne[3],
                                              .cols = w->ne[0]};
    }
    /* on the contexts' pool rule, for this pass only: no context exists yet, and each has a
     * pool of its own (serve's slots run theirs at once). A few MiB (a reload's handful of
     * tensors, under a runtime's mutex) take less than starting the threads would. */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += sl_quant_row_bytes(SL_GGML_Q4_K, parts[i].cols) *
                                              (uint64_t)parts[i].rows;
    sl_cpu_pool *pool = NULL;
    sl_status st = total < SL_CPU_REPACK_CHUNK_BYTES * 8 ? SL_OK
                                                          : sl__model_cpu_pool_create(m, &pool, err);
    if (!st) st = sl_cpu_repack_q4_K_r8(pool, parts, (int64_t)n, err);
    sl_cpu_pool_destroy(pool);
    free(parts);
    if (st) return st;
    n = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        if (!load_wanted(m, w)) continue;
        w->type = SL_TYPE_Q4_K_R8; /* sl__weight_repacked */
        n++;
        bytes += w->nbytes;
    }
    if (!m->notice[0])
        snprintf(m->notice, sizeof m->notice, "CPU repack: %llu Q4_K tensors (%.2f MiB) into "
                 "Q4_K_R8 (--no-repack: as stored)", (unsigned long long)n,
                 (double)bytes / (1024.0 * 1024.0));
    return SL_OK;
}
