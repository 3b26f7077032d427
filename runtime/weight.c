/* runtime/weight.c: placement and loading of a model's weights.
 *
 * Placement (resolved once, per weight): SL_PLACE_CPU keeps everything in host memory. The
 * device placements put the chosen weights into blocks of one device arena (alloc/bfc); with
 * the sim device those blocks are host-addressable and the sim executor computes from them
 * with the CPU kernels, so every placement runs (and is compared) in CI; on cuda the cuda
 * executor (runtime/dx.h) runs kernels/cuda on them.
 *   GPU          every weight but token_embd (looked up by row on the host, as llama.cpp does);
 *   LAYERS       layers < gpu_layers; output and output_norm only if gpu_layers > n_layer;
 *   EXPERTS_CPU  everything except the routed experts (llama.cpp's -ot exps=CPU);
 *   AUTO         GPU if all fits in 90% of free device memory, else EXPERTS_CPU if the rest
 *                fits, else CPU.
 *
 * Loading: each host weight gets a block of the model's pinned host pool and is read there by
 * O_DIRECT (block over-allocated by one page so the read target is 4096-aligned; the data
 * lands at file_offset % 4096 inside it: sl_gguf_tensor_read's span contract) or pread; with
 * io = mmap the weight points into the read-only file mapping (no copy). Weights the CPU
 * kernels cannot read as stored are dequantized to F32 at load (from the mapping): norms and
 * biases that are not F32, and matmul weights of types without a matvec kernel (Q2_K, Q3_K,
 * IQ*, ...) — exact but 4-8x larger; the loader says how many it converted. Device weights are
 * staged through the host copy, copied H2D on the model's stream, and the host copy freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/gemv.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "runtime/model.h"

uint64_t sl__weight_slice_bytes(const sl_weight *w)
{
    const uint64_t per = w->ne[2] * w->ne[3];
    return per ? w->nbytes / per : 0;
}

const void *sl__expert_data(const sl__layer *L, int proj, int32_t e)
{
    const sl_weight *merged = proj == 0 ? L->gate_exps : proj == 1 ? L->up_exps : L->down_exps;
    if (merged)
        return (const uint8_t *)merged->data + (uint64_t)e * sl__weight_slice_bytes(merged);
    sl_weight *const *per = proj == 0 ? L->gate_e : proj == 1 ? L->up_e : L->down_e;
    return per ? per[e]->data : NULL;
}

static bool is_routed_expert(const sl_model *m, const sl_weight *w)
{
    for (int il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        if (w == L->gate_exps || w == L->up_exps || w == L->down_exps) return true;
        if (L->gate_e)
            for (int x = 0; x < m->hp.n_expert; x++)
                if (w == L->gate_e[x] || w == L->up_e[x] || w == L->down_e[x]) return true;
    }
    return false;
}

static int layer_of(const sl_weight *w)
{
    int il;
    return sscanf(w->name, "blk.%d.", &il) == 1 ? il : -1;
}

static bool needs_conversion(const sl_weight *w)
{
    if (w->need_f32 && w->file_type != SL_GGML_F32) return true;
    if (w->need_matvec && !sl_ref_matvec_supported(w->file_type)) return true;
    return false;
}

static uint64_t f32_bytes(const sl_weight *w)
{
    return (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]) * sizeof(float);
}

/* Bytes w will occupy once loaded (after any conversion). */
static uint64_t loaded_bytes(const sl_weight *w)
{
    return needs_conversion(w) ? f32_bytes(w) : w->nbytes;
}

/* The type w has once loaded (after any conversion to F32). */
static uint32_t loaded_type(const sl_weight *w)
{
    return needs_conversion(w) ? SL_GGML_F32 : w->file_type;
}

static void fallback_notice(sl_model *m, const sl_weight *w, const char *what)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(loaded_type(w));
    if (!m->notice[0])
        snprintf(m->notice, sizeof m->notice, "%s: type %s has no CUDA GEMV: %s runs on the CPU",
                 w->name, ti ? ti->name : "?", what);
}

/* On cuda, a matmul weight whose type has no CUDA GEMV cannot run on the device. The executor
 * keeps a layer's dense part on one side, so such a weight takes its whole layer to the host;
 * routed experts may live on the host under a device layer (the experts-cpu path), so only
 * that layer's experts move; an output matrix takes output_norm with it. */
static void cuda_fallback(sl_model *m)
{
    const int n_layer = m->hp.n_layer;
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        if (!w->want_device || !w->need_matvec || sl_cuda_gemv_supported(loaded_type(w)))
            continue;
        const int il = layer_of(w);
        if (is_routed_expert(m, w)) {
            fallback_notice(m, w, "its layer's routed experts stay in host memory");
            for (size_t j = 0; j < m->n_w; j++)
                if (layer_of(&m->w[j]) == il && is_routed_expert(m, &m->w[j]))
                    m->w[j].want_device = false;
        } else if (il >= 0 && il < n_layer) {
            fallback_notice(m, w, "its layer");
            for (size_t j = 0; j < m->n_w; j++)
                if (layer_of(&m->w[j]) == il) m->w[j].want_device = false;
        } else {
            fallback_notice(m, w, "the output matrix");
            w->want_device = false;
            if (m->output_norm) m->output_norm->want_device = false;
        }
    }
}

static void decide_placement(sl_model *m)
{
    sl_placement p = m->placement;
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        const int il = layer_of(w);
        bool dev = false;
        switch (p) {
        case SL_PLACE_GPU: dev = true; break;
        case SL_PLACE_LAYERS:
            dev = il >= 0 ? il < m->opt.gpu_layers : m->opt.gpu_layers > m->hp.n_layer;
            break;
        case SL_PLACE_EXPERTS_CPU: dev = !is_routed_expert(m, w); break;
        default: dev = false; break;
        }
        /* token_embd is read by row on the host, unless it doubles as the output matrix */
        if (w == m->tok_embd && w != m->output) dev = false;
        w->want_device = dev;
    }
    if (m->dev && sl_device_kind_get(m->dev) == SL_DEVICE_CUDA) cuda_fallback(m);
}

sl_status sl__model_resolve_auto(sl_model *m, uint64_t free_bytes)
{
    uint64_t all = 0, experts = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const uint64_t b = loaded_bytes(&m->w[i]);
        all += b;
        if (is_routed_expert(m, &m->w[i])) experts += b;
    }
    const uint64_t budget = free_bytes / 10 * 9;
    m->placement = all <= budget                     ? SL_PLACE_GPU
                   : all - experts <= budget && experts ? SL_PLACE_EXPERTS_CPU
                                                       : SL_PLACE_CPU;
    return SL_OK;
}

/* Dequantizes w's file bytes (through the mapping) into a malloc'd F32 copy. */
static sl_status convert_f32(sl_model *m, sl_weight *w, sl_error *err)
{
    if (!sl_quant_supported(w->file_type)) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(w->file_type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: tensor '%s' has type %s, which Sluice cannot dequantize",
                            w->path, w->name, ti ? ti->name : "?");
    }
    const uint8_t *src = sl_gguf_tensor_view(m->gguf, w->t);
    if (!src)
        return sl_error_set(err, SL_ERR_IO, "%s: tensor '%s': no file mapping to convert from",
                            w->path, w->name);
    const int64_t cols = w->ne[0], rows = w->ne[1] * w->ne[2] * w->ne[3];
    float *dst = malloc((size_t)f32_bytes(w) ? (size_t)f32_bytes(w) : 1);
    if (!dst)
        return sl_error_set(err, SL_ERR_NOMEM, "tensor '%s': out of memory converting to F32 "
                            "(%llu bytes)", w->name, (unsigned long long)f32_bytes(w));
    const size_t rb = sl_quant_row_bytes(w->file_type, cols);
    for (int64_t r = 0; r < rows; r++) {
        sl_status st = sl_quant_dequant_row(w->file_type, src + (size_t)r * rb, dst + r * cols,
                                            cols, err);
        if (st) {
            free(dst);
            return st;
        }
    }
    w->h_owned = dst;
    w->data = dst;
    w->type = SL_GGML_F32;
    w->nbytes = f32_bytes(w);
    w->converted = true;
    w->residency = SL_RES_HOST;
    return SL_OK;
}

static sl_status load_host(sl_model *m, sl_weight *w, sl_error *err)
{
    if (needs_conversion(w)) return convert_f32(m, w, err);
    if (m->opt.io == SL_LOAD_MMAP) {
        w->data = sl_gguf_tensor_view(m->gguf, w->t);
        if (!w->data && w->nbytes)
            return sl_error_set(err, SL_ERR_IO, "%s: tensor '%s': no file mapping", w->path,
                                w->name);
        w->residency = SL_RES_HOST;
        return SL_OK;
    }
    const bool direct = m->opt.io == SL_LOAD_DIRECT;
    const uint64_t span = direct ? sl_gguf_direct_span(w->t) : w->nbytes;
    const uint64_t want = span + (direct ? SL_GGUF_DIRECT_ALIGN : 0);
    void *h = NULL;
    sl_status st = sl_hostpool_alloc(m->hostpool, want ? want : 1, &w->h_block, &h, err);
    if (st) return st;
    uint8_t *dst = h;
    if (direct) /* the pool aligns to 256 B; O_DIRECT needs 4096 */
        dst = (uint8_t *)(((uintptr_t)h + SL_GGUF_DIRECT_ALIGN - 1) &
                          ~(uintptr_t)(SL_GGUF_DIRECT_ALIGN - 1));
    void *data = dst;
    if (w->nbytes) {
        st = sl_gguf_tensor_read(m->gguf, w->t, direct ? SL_GGUF_IO_DIRECT : SL_GGUF_IO_PREAD,
                                 dst, span, &data, err);
        if (st) return st;
    }
    w->data = data;
    w->residency = SL_RES_HOST;
    return SL_OK;
}

static sl_status to_device(sl_model *m, sl_weight *w, sl_error *err)
{
    sl_status st = sl_bfc_alloc(m->arena, w->nbytes ? w->nbytes : 1, SL_BFC_PINNED, &w->d_block, err);
    if (st) return st;
    void *d = sl_bfc_ptr(m->arena, w->d_block);
    if (w->nbytes) {
        st = sl_device_copy(m->dev, m->stream, d, w->data, w->nbytes, SL_COPY_H2D, err);
        if (!st) st = sl_device_stream_sync(m->dev, m->stream, err);
        if (st) return st;
    }
    /* the host copy is no longer needed */
    if (w->h_block != SL_BLOCK_NONE) {
        sl_hostpool_free(m->hostpool, w->h_block, NULL);
        w->h_block = SL_BLOCK_NONE;
    }
    free(w->h_owned);
    w->h_owned = NULL;
    w->data = d;
    w->residency = SL_RES_DEVICE;
    return SL_OK;
}

static void progress(const sl_model *m, uint64_t done, uint64_t total, bool final)
{
    if (!m->opt.progress || !isatty(STDERR_FILENO) || !total) return;
    fprintf(stderr, "\rloading %s: %3d%% (%llu / %llu MiB)%s", m->info.arch ? m->info.arch : "",
            (int)(done * 100 / total), (unsigned long long)(done >> 20),
            (unsigned long long)(total >> 20), final ? "\n" : "");
    fflush(stderr);
}

sl_status sl__model_load_weights(sl_model *m, sl_error *err)
{
    decide_placement(m);
    uint64_t total = 0, host_bytes = 0, biggest = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        const uint64_t b = loaded_bytes(w) + 2 * SL_GGUF_DIRECT_ALIGN;
        total += loaded_bytes(w);
        host_bytes += b;
        if (b > biggest) biggest = b;
    }
    if (m->opt.io != SL_LOAD_MMAP) {
        sl_hostpool_options ho = sl_hostpool_options_default();
        ho.numa_node = m->opt.numa_node < 0 ? SL_HOSTPOOL_NODE_AUTO : m->opt.numa_node;
        /* one slab for a small model; 1 GiB slabs (or a tensor's own) for a big one */
        const uint64_t cap = (uint64_t)1 << 30;
        ho.slab_bytes = host_bytes < cap ? host_bytes : cap;
        if (ho.slab_bytes < biggest) ho.slab_bytes = biggest;
        sl_status st = sl_hostpool_create(m->dev, NULL, &ho, &m->hostpool, err);
        if (st) return st;
    }
    uint64_t done = 0;
    unsigned converted = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        sl_status st = load_host(m, w, err);
        if (!st && w->want_device) st = to_device(m, w, err);
        if (st) {
            if (m->opt.progress && isatty(STDERR_FILENO)) fputc('\n', stderr);
            return st;
        }
        converted += w->converted;
        done += w->nbytes;
        if (i % 16 == 0) progress(m, done, total, false);
    }
    progress(m, total, total, true);
    if (converted && !m->notice[0])
        snprintf(m->notice, sizeof m->notice,
                 "%u tensors converted to F32 at load (types without a CPU kernel, or "
                 "non-F32 norms)", converted);

    /* the scheduler's expert pointers and rope frequency factors, now that data is final */
    for (int il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        if (m->rope_freqs) L->rope.freq_factors = m->rope_freqs->data;
        if (!m->hp.n_expert) continue;
        const sl_weight *g = L->gate_exps ? L->gate_exps : L->gate_e[0];
        const sl_weight *u = L->up_exps ? L->up_exps : L->up_e[0];
        const sl_weight *d = L->down_exps ? L->down_exps : L->down_e[0];
        for (int x = 0; x < m->hp.n_expert; x++) {
            L->moe_gate[x] = sl__expert_data(L, 0, x);
            L->moe_up[x] = sl__expert_data(L, 1, x);
            L->moe_down[x] = sl__expert_data(L, 2, x);
            const sl_weight *gx = L->gate_exps ? L->gate_exps : L->gate_e[x];
            const sl_weight *ux = L->up_exps ? L->up_exps : L->up_e[x];
            const sl_weight *dx = L->down_exps ? L->down_exps : L->down_e[x];
            if (gx->type != g->type || ux->type != u->type || dx->type != d->type)
                return sl_error_set(err, SL_ERR_UNSUPPORTED,
                                    "%s: layer %d: expert %d's tensors differ in type from "
                                    "expert 0's (per-expert types are not supported)",
                                    m->path, il, x);
            L->moe_on_device[x] = gx->residency & SL_RES_DEVICE;
        }
        L->moe = (sl_moe_layer){
            .layer = il, .n_expert = m->hp.n_expert, .n_embd = m->hp.n_embd,
            .n_ff = m->hp.n_ff_exp, .type_gate = g->type, .type_up = u->type,
            .type_down = d->type, .gate = L->moe_gate, .up = L->moe_up, .down = L->moe_down,
            .on_device = L->moe_on_device, .act = m->tr->act};
    }
    return SL_OK;
}

void sl__model_free_weights(sl_model *m)
{
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        if (w->h_block != SL_BLOCK_NONE && m->hostpool)
            sl_hostpool_free(m->hostpool, w->h_block, NULL);
        if (w->d_block != SL_BLOCK_NONE && m->arena) sl_bfc_free(m->arena, w->d_block, NULL);
        free(w->h_owned);
        w->h_owned = NULL;
        w->h_block = w->d_block = SL_BLOCK_NONE;
        w->data = NULL;
        w->residency = 0;
    }
}

sl_status sl__model_validate(const sl_model *m, sl_error *err)
{
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (!w->residency != !w->data || !w->residency)
            return sl_error_set(err, SL_ERR_INVALID, "model invariant: weight '%s' has "
                                "residency %u and data %p", w->name, w->residency, w->data);
        if ((w->d_block != SL_BLOCK_NONE) != !!(w->residency & SL_RES_DEVICE))
            return sl_error_set(err, SL_ERR_INVALID, "model invariant: weight '%s': device block "
                                "and residency disagree", w->name);
        if (w->h_block != SL_BLOCK_NONE) {
            const uint8_t *h = sl_hostpool_ptr(m->hostpool, w->h_block);
            const uint64_t cap = sl_hostpool_size(m->hostpool, w->h_block);
            const uint8_t *d = w->data;
            if (!h || d < h || d + w->nbytes > h + cap)
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: weight '%s' lies "
                                    "outside its host block", w->name);
        }
        if (!w->converted && w->type != w->file_type)
            return sl_error_set(err, SL_ERR_INVALID, "model invariant: weight '%s' changed type "
                                "without conversion", w->name);
    }
    for (int il = 0; il < m->hp.n_layer && m->hp.n_expert; il++)
        for (int x = 0; x < m->hp.n_expert; x++)
            if (!m->layers[il].moe_gate[x] || !m->layers[il].moe_up[x] ||
                !m->layers[il].moe_down[x])
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: layer %d expert %d "
                                    "has no weights", il, x);
    return SL_OK;
}
