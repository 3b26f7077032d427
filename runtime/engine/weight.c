/* runtime/engine/weight.c: placement and loading of a model's weights.
 *
 * Placement: scheduler/policy/placement.h decides (the mode, -ngl, -ot, --cpu-moe, --n-cpu-moe and
 * the device budget); here the model's weights are described to it (group, bytes once
 * loaded, whether the device has a kernel for the type) and its plan sets want_device. The
 * device weights go into blocks of one device arena (alloc/bfc); with the sim device those
 * blocks are host-addressable and the sim executor computes from them with the CPU kernels,
 * so every placement runs (and is compared) in CI; on cuda the cuda executor (runtime/engine/dx.h)
 * runs kernels/cuda on them.
 *
 * Loading: each host weight gets a block of the model's pinned host pool and is read there by
 * O_DIRECT (block over-allocated by one page so the read target is 4096-aligned; the data
 * lands at file_offset % 4096 inside it: sl_gguf_tensor_read's span contract) or pread; with
 * io = mmap the weight points into the read-only file mapping (no copy). Weights the CPU
 * kernels cannot read as stored are dequantized to F32 at load (from the mapping): norms and
 * biases that are not F32, and matmul weights of types without a matvec kernel (IQ1-IQ3,
 * TQ*, NVFP4) — exact but 8-16x larger; the loader says how many it converted. Device weights are
 * staged through the host copy, copied H2D on the model's stream, and the host copy freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "runtime/engine/dx.h"
#include "runtime/engine/env.h"
#include "runtime/engine/model.h"
#include "runtime/engine/repack.h"
#include "runtime/engine/stream.h"
#include "scheduler/moe/ffn_split.h"
#include "scheduler/policy/gpuidx.h"

const void *sl__expert_data(const sl__layer *L, int proj, int32_t e)
{
    const sl_weight *merged = proj == 0 ? L->gate_exps : proj == 1 ? L->up_exps : L->down_exps;
    if (merged)
        return (const uint8_t *)merged->data + (uint64_t)e * sl__weight_slice_bytes(merged);
    sl_weight *const *per = proj == 0 ? L->gate_e : proj == 1 ? L->up_e : L->down_e;
    return per ? per[e]->data : NULL;
}

static bool needs_conversion(const sl_weight *w)
{
    return sl__weight_needs_f32(w, w->file_type);
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

static uint64_t stream_reserve(const sl_model *m); /* below, beside experts_w */

/* Device bytes a context needs besides weights, for the budget: an F16 KV cache of
 * opt.budget_ctx (default min(n_ctx_train, 4096)) positions in every layer, and the working
 * buffers of a 512-token batch (an estimate of ctx_dev.c's carve; the logits buffer is capped
 * at 64 MiB there). */
uint64_t sl__model_reserve_bytes(const sl_model *m)
{
    const sl__hparams *hp = &m->hp;
    int64_t ctx = m->opt.budget_ctx > 0 ? m->opt.budget_ctx
                                        : hp->n_ctx_train > 0 && hp->n_ctx_train < 4096
                                              ? hp->n_ctx_train : 4096;
    const uint64_t kv = (m->tr->mla ? 1ull : 2ull) * (uint64_t)ctx * (uint64_t)hp->n_head_kv *
                        (uint64_t)hp->head_dim * 2ull * (uint64_t)hp->n_layer;
    const int64_t F = hp->n_ff > hp->n_ff_exp ? hp->n_ff : hp->n_ff_exp;
    const uint64_t per_tok = (uint64_t)(6 * hp->n_embd + 2 * F + 4 * hp->n_head * hp->head_dim +
                                        hp->n_expert + 16) * sizeof(float);
    uint64_t logits = (uint64_t)hp->n_vocab * sizeof(float) * 512;
    if (logits > (64ull << 20)) logits = 64ull << 20;
    return kv + 512 * per_tok + logits + sl__model_stream_reserve_bytes(m);
}

/* cuda: a prefill's streaming buffer for one layer's host experts (stream.h), which a budget
 * that leaves experts on the host must hold (the placement takes it off only such plans) */
uint64_t sl__model_stream_reserve_bytes(const sl_model *m)
{
    return m->dev && sl_device_kind_get(m->dev) == SL_DEVICE_CUDA ? stream_reserve(m) : 0;
}

/* routed[i]: weight i is a routed expert (merged or per-expert tensor). */
static void mark_routed(const sl_model *m, bool *routed)
{
    for (int il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        /* expert biases travel with their experts (the expert FFN routine reads them) */
        const sl_weight *merged[] = {L->gate_exps,   L->up_exps,   L->down_exps,
                                     L->gate_exps_b, L->up_exps_b, L->down_exps_b};
        for (int p = 0; p < 6; p++)
            if (merged[p]) routed[merged[p] - m->w] = true;
        if (!L->gate_e) continue;
        for (int x = 0; x < m->hp.n_expert; x++) {
            routed[L->gate_e[x] - m->w] = true;
            routed[L->up_e[x] - m->w] = true;
            routed[L->down_e[x] - m->w] = true;
        }
    }
}

/* The first expert tensor of layer L for projection proj (0 gate, 1 up, 2 down), merged or
 * per-expert; NULL: a dense layer. */
static sl_weight *experts_w(const sl__layer *L, int proj)
{
    sl_weight *merged = proj == 0 ? L->gate_exps : proj == 1 ? L->up_exps : L->down_exps;
    sl_weight *const *per = proj == 0 ? L->gate_e : proj == 1 ? L->up_e : L->down_e;
    return merged ? merged : per ? per[0] : NULL;
}

/* The largest layer's routed experts and biases as loaded, in stream.h's staging layout (the
 * layers' expert views are filled after the plan, so this reads the weights): a projection is
 * one merged tensor [n_expert][rows][cols] or n_expert 2-D tensors of the first one's bytes. */
static uint64_t stream_reserve(const sl_model *m)
{
    uint64_t best = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        const sl_weight *bias[3] = {L->gate_exps_b, L->up_exps_b, L->down_exps_b};
        uint64_t bytes[6] = {0};
        for (int p = 0; p < 3; p++) {
            const sl_weight *w = experts_w(L, p);
            if (w) bytes[p] = loaded_bytes(w) * (w->ne[2] > 1 ? 1 : (uint64_t)m->hp.n_expert);
            if (bias[p]) bytes[3 + p] = loaded_bytes(bias[p]);
        }
        const uint64_t b = bytes[0] ? sl__stream_bytes_of(bytes) : 0;
        if (b > best) best = b;
    }
    return best;
}

/* HOT_COLD: the neuron index (opt.gpu_index, else MODEL.generated.gpuidx as PowerInfer
 * looks for it), rounded to each layer's down granule (scheduler/moe/ffn_split.h): fills every
 * layer's split_granule / n_hot and the hot fraction per layer. A MoE model's index splits
 * its routed experts (expert-major, gpuidx.h); its dense layers' entries are not read. */
static sl_status load_index(sl_model *m, const char *path, float *frac, sl_error *err)
{
    const int32_t n_layer = m->hp.n_layer, X = m->hp.n_expert;
    if (!X && !m->layers[0].ffn_gate)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: hot-cold placement: %s's fused "
                            "gate | up (blk.N.ffn_up) is not split by neurons yet", m->path,
                            sl_arch_name(m->arch));
    for (int32_t il = 0; il < n_layer && !X; il++) {
        const sl__layer *L = &m->layers[il];
        const sl_weight *b = L->ffn_gate_b ? L->ffn_gate_b : L->ffn_up_b ? L->ffn_up_b
                                                                        : L->ffn_down_b;
        if (b)
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: hot-cold placement: tensor '%s': "
                                "FFN biases are not split by neurons yet", m->path, b->name);
    }
    uint32_t *n_neuron = calloc((size_t)n_layer + 1, sizeof *n_neuron);
    if (!n_neuron) return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    for (int32_t il = 0; il < n_layer && !X; il++)
        n_neuron[il] = (uint32_t)m->layers[il].ffn_up->ne[1];
    sl_gpuidx idx; /* a MoE index's widths are checked below, per expert */
    sl_status st = sl_gpuidx_read(path, (uint32_t)n_layer, X ? NULL : n_neuron, &idx, err);
    free(n_neuron);
    if (st) return st;
    if (!X && idx.n_expert > 1)
        st = sl_error_set(err, SL_ERR_RANGE, "%s: an index of %u experts' neurons "
                          "(generic.gpu_index.expert_count) for the dense model %s", path,
                          idx.n_expert, m->path);
    for (int32_t il = 0; il < n_layer && X && !st; il++) {
        const uint32_t nx = idx.n_expert > 1 ? idx.n_expert : 1, nn = idx.layers[il].n_neuron;
        if (experts_w(&m->layers[il], 1) &&
            (nx != (uint32_t)X || nn != (uint32_t)X * (uint32_t)m->hp.n_ff_exp))
            st = sl_error_set(err, SL_ERR_RANGE, "%s: layer %d: %u neurons in %u expert(s) of "
                              "%u (generic.gpu_index.expert_count), where %s has %d routed "
                              "experts of %d neurons", path, il, nn, nx, nn / nx, m->path, X,
                              m->hp.n_ff_exp);
    }
    for (int32_t il = 0; il < n_layer && !st; il++) {
        sl__layer *L = &m->layers[il];
        const sl_weight *down = X ? experts_w(L, 2) : L->ffn_down;
        if (!down) continue; /* a MoE model's dense layer: whole, with the layer */
        const int64_t F = X ? m->hp.n_ff_exp : L->ffn_up->ne[1], N = X ? X * F : F;
        const int64_t G = sl_ffn_split_granule(loaded_type(down));
        L->split_granule = calloc((size_t)(N / (G ? G : 1)) + 1, sizeof *L->split_granule);
        if (!L->split_granule || G <= 0 || F % G) {
            st = sl_error_set(err, L->split_granule ? SL_ERR_UNSUPPORTED : SL_ERR_NOMEM,
                              "%s: layer %d: cannot split an FFN of %lld neurons in blocks of "
                              "%lld", m->path, il, (long long)F, (long long)G);
            break;
        }
        bool *hot = malloc((size_t)N * sizeof *hot);
        if (!hot) {
            st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t j = 0; j < N; j++) hot[j] = idx.layers[il].hot[j];
        /* granules never straddle experts: F is a multiple of G */
        L->n_hot = sl_ffn_split_round(hot, N, G, L->split_granule);
        free(hot);
        frac[il] = (float)L->n_hot / (float)N;
    }
    sl_gpuidx_free(&idx);
    return st;
}

/* The index file HOT_COLD reads (NULL: none given and none beside the model). */
static const char *index_path(const sl_model *m, char *buf, size_t cap)
{
    if (m->opt.gpu_index) return m->opt.gpu_index;
    snprintf(buf, cap, "%s.generated.gpuidx", m->path);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

sl_status sl__model_plan(sl_model *m, uint64_t device_free, bool cuda, sl_error *err)
{
    float *frac = NULL;
    sl_placement mode = m->opt.placement;
    char ibuf[4096];
    const char *ipath = index_path(m, ibuf, sizeof ibuf);
    /* as PowerInfer: an index beside the model turns auto placement into hot-cold */
    if (mode == SL_PLACE_AUTO && ipath && device_free) {
        mode = SL_PLACE_HOT_COLD;
        if (!m->notice[0])
            snprintf(m->notice, sizeof m->notice, "placement hot-cold with the neuron index %s",
                     ipath);
    }
    if (mode == SL_PLACE_HOT_COLD) {
        if (!ipath)
            return sl_error_set(err, SL_ERR_INVALID, "%s: placement hot-cold needs a neuron "
                                "index: --gpu-index FILE, or %s.generated.gpuidx beside the "
                                "model (tools/run place solve writes one)", m->path, m->path);
        frac = calloc((size_t)m->hp.n_layer + 1, sizeof *frac);
        if (!frac) return sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        sl_status st = load_index(m, ipath, frac, err);
        if (st) {
            free(frac);
            return st;
        }
    }
    sl_place_tensor *t = calloc(m->n_w ? m->n_w : 1, sizeof *t);
    bool *routed = calloc(m->n_w ? m->n_w : 1, sizeof *routed);
    if (!t || !routed) {
        free(t);
        free(routed);
        free(frac);
        return sl_error_set(err, SL_ERR_NOMEM, "placement: out of memory");
    }
    mark_routed(m, routed);
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        sl_place_classify(w->name, w->n_dims, m->hp.n_expert, &t[i]);
        if (routed[i]) t[i].group = SL_PG_EXPERTS;
        else if (t[i].group == SL_PG_EXPERTS) t[i].group = SL_PG_CORE;
        if (w == m->output) t[i].group = SL_PG_OUTPUT;
        t[i].tied = w == m->tok_embd && w == m->output;
        t[i].vector = !w->need_matvec && w != m->tok_embd;
        t[i].bytes = loaded_bytes(w);
        const sl_gguf_type_info *ti = sl_gguf_type_get(loaded_type(w));
        t[i].type_name = ti ? ti->name : "?";
        t[i].no_device = w->need_matvec && !sl__dx_supports(cuda ? SL_DEVICE_CUDA : SL_DEVICE_SIM,
                                                            loaded_type(w), SL__DX_OP_MATVEC);
    }
    free(routed);
    const sl_model_options *o = &m->opt;
    const sl_place_options po = {
        .mode = (sl_placement)mode, .n_gpu_layers = o->gpu_layers, .ffn_hot_frac = frac,
        .override_tensor = o->override_tensor, .cpu_moe = o->cpu_moe, .n_cpu_moe = o->n_cpu_moe,
        .split_experts = m->hp.n_expert > 0,
        .vram_budget = o->vram_budget, .device_free = device_free,
        .reserve_bytes = device_free || o->vram_budget
                             ? sl__model_reserve_bytes(m) - sl__model_stream_reserve_bytes(m) : 0,
        .stream_bytes = device_free || o->vram_budget ? sl__model_stream_reserve_bytes(m) : 0};
    sl_status st = sl_place_resolve(t, m->n_w, m->hp.n_layer, &po, &m->plan, err);
    free(frac);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        free(t);
        return sl_error_set(err, st, "%s: %s", m->path, why);
    }
    m->place_t = t;
    for (size_t i = 0; i < m->n_w; i++) {
        m->w[i].want_device = m->plan.on_device[i];
        if (m->plan.by[i] != SL_PLACE_BY_DEVICE || m->notice[0]) continue;
        snprintf(m->notice, sizeof m->notice, "%s: type %s has no CUDA GEMV: its %s runs on the "
                 "CPU", t[i].name, t[i].type_name,
                 t[i].group == SL_PG_EXPERTS ? "layer's routed experts"
                 : t[i].group == SL_PG_OUTPUT ? "output matrix" : "layer group");
    }
    return SL_OK;
}

sl_status sl__weight_dequant_f32(const sl_weight *w, uint32_t file_type, const void *src,
                                 float **out, sl_error *err)
{
    *out = NULL;
    if (!sl_quant_supported(file_type)) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(file_type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: tensor '%s' has type %s, which Sluice cannot dequantize",
                            w->path, w->name, ti ? ti->name : "?");
    }
    const int64_t cols = w->ne[0], rows = w->ne[1] * w->ne[2] * w->ne[3];
    float *dst = malloc((size_t)f32_bytes(w) ? (size_t)f32_bytes(w) : 1);
    if (!dst)
        return sl_error_set(err, SL_ERR_NOMEM, "tensor '%s': out of memory converting to F32 "
                            "(%llu bytes)", w->name, (unsigned long long)f32_bytes(w));
    const size_t rb = sl_quant_row_bytes(file_type, cols);
    for (int64_t r = 0; r < rows; r++) {
        sl_status st = sl_quant_dequant_row(file_type, (const uint8_t *)src + (size_t)r * rb,
                                            dst + r * cols, cols, err);
        if (st) {
            free(dst);
            return st;
        }
    }
    *out = dst;
    return SL_OK;
}

/* w's F32 values from kv_b's ([kv_lora, H * (nope + v)], row h * (nope + v) + j holding head h's
 * output j). As convert_hf_to_gguf.py's DeepseekV2Model splits kv_b_proj (viewed [H, nope + v,
 * kv_lora]): k_b[h] = its first nope rows transposed, [kv_lora][nope] (ne [nope, kv_lora, H]);
 * v_b[h] = the next v rows as they are, [v][kv_lora] (ne [kv_lora, v, H]). */
static void derive_kv_b(const sl_weight *w, const float *kv_b, float *dst)
{
    const bool k = w->derive == SL_DERIVE_K_B;
    const int64_t C = k ? w->ne[1] : w->ne[0], H = w->ne[2];
    const int64_t per = w->t->ne[1] / H; /* nope + v */
    const int64_t nope = k ? w->ne[0] : per - w->ne[1], v = per - nope;
    for (int64_t h = 0; h < H; h++) {
        const float *head = kv_b + h * per * C;
        if (k) {
            for (int64_t c = 0; c < C; c++)
                for (int64_t j = 0; j < nope; j++)
                    dst[(h * C + c) * nope + j] = head[j * C + c];
        } else {
            memcpy(dst + h * v * C, head + nope * C, (size_t)(v * C) * sizeof(float));
        }
    }
}

/* Dequantizes w's file bytes (through the mapping) into a malloc'd F32 copy; a derived weight
 * is computed from its source tensor's F32 values. */
static sl_status convert_f32(sl_model *m, sl_weight *w, sl_error *err)
{
    const uint8_t *src = sl_gguf_tensor_view(sl__model_file(m), w->t);
    if (!src && sl_quant_supported(w->file_type))
        return sl_error_set(err, SL_ERR_IO, "%s: tensor '%s': no file mapping to convert from",
                            w->path, w->name);
    float *dst;
    sl_status st;
    if (w->derive != SL_DERIVE_NONE) {
        sl_weight from = *w; /* the source tensor's shape */
        for (int i = 0; i < SL_GGUF_MAX_DIMS; i++)
            from.ne[i] = i < (int)w->t->n_dims ? w->t->ne[i] : 1;
        float *all;
        if ((st = sl__weight_dequant_f32(&from, w->file_type, src, &all, err))) return st;
        dst = malloc((size_t)f32_bytes(w) ? (size_t)f32_bytes(w) : 1);
        if (!dst) {
            free(all);
            return sl_error_set(err, SL_ERR_NOMEM, "tensor '%s': out of memory deriving "
                                "(%llu bytes)", w->name, (unsigned long long)f32_bytes(w));
        }
        derive_kv_b(w, all, dst);
        free(all);
    } else if ((st = sl__weight_dequant_f32(w, w->file_type, src, &dst, err))) {
        return st;
    }
    w->h_owned = dst;
    w->data = dst;
    w->type = SL_GGML_F32;
    w->nbytes = f32_bytes(w);
    w->converted = true;
    w->residency = SL_RES_HOST;
    return SL_OK;
}

sl_status sl__weight_read(sl_model *m, const sl_gguf *g, const sl_gguf_tensor *t, bool direct,
                          sl_block *block, void **data, sl_error *err)
{
    const uint64_t span = direct ? sl_gguf_direct_span(t) : t->nbytes;
    const uint64_t want = span + (direct ? SL_GGUF_DIRECT_ALIGN : 0);
    void *h = NULL;
    sl_status st = sl_hostpool_alloc(m->hostpool, want ? want : 1, block, &h, err);
    if (st) return st;
    uint8_t *dst = h;
    if (direct) /* the pool aligns to 256 B; O_DIRECT needs 4096 */
        dst = (uint8_t *)(((uintptr_t)h + SL_GGUF_DIRECT_ALIGN - 1) &
                          ~(uintptr_t)(SL_GGUF_DIRECT_ALIGN - 1));
    *data = dst;
    if (t->nbytes &&
        (st = sl_gguf_tensor_read(g, t, direct ? SL_GGUF_IO_DIRECT : SL_GGUF_IO_PREAD, dst, span,
                                  data, err))) {
        sl_hostpool_free(m->hostpool, *block, NULL);
        *block = SL_BLOCK_NONE;
        return st;
    }
    return SL_OK;
}

static sl_status load_host(sl_model *m, sl_weight *w, sl_error *err)
{
    if (needs_conversion(w)) return convert_f32(m, w, err);
    const void *shared = sl__floor_shared_data(m, w); /* a runtime's shared host floor */
    if (shared) {
        w->data = shared;
        w->residency = SL_RES_HOST;
        return SL_OK;
    }
    if (m->opt.io == SL_LOAD_MMAP) {
        w->data = sl_gguf_tensor_view(sl__model_file(m), w->t);
        if (!w->data && w->nbytes)
            return sl_error_set(err, SL_ERR_IO, "%s: tensor '%s': no file mapping", w->path,
                                w->name);
        w->residency = SL_RES_HOST;
        return SL_OK;
    }
    void *data;
    sl_status st = sl__weight_read(m, sl__model_file(m), w->t, m->opt.io == SL_LOAD_DIRECT,
                                   &w->h_block, &data, err);
    if (st) return st;
    w->data = data;
    w->residency = SL_RES_HOST;
    return SL_OK;
}

/* Host memory that queued H2D copies still read. Loading enqueues a weight's copy and goes on
 * reading the next one; the stream is synchronised (and these freed) only every
 * STAGE_FLUSH_BYTES and at the end, so reading overlaps uploading. */
enum { STAGE_FLUSH_BYTES = 256 << 20 };

typedef struct staging {
    sl_block *blocks;       /* host pool blocks to free */
    void **owned;           /* malloc'd copies to free */
    size_t n, cap;
    uint64_t bytes;
    bool queued;            /* copies were enqueued since the last flush */
} staging;

static sl_status staging_flush(sl_model *m, staging *sg, sl_error *err)
{
    sl_status st = sg->n || sg->queued ? sl_device_stream_sync(m->dev, m->stream, err) : SL_OK;
    sg->queued = false;
    for (size_t i = 0; i < sg->n; i++) {
        if (sg->blocks[i] != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, sg->blocks[i], NULL);
        free(sg->owned[i]);
    }
    sg->n = 0;
    sg->bytes = 0;
    return st;
}

static void staging_free(sl_model *m, staging *sg)
{
    staging_flush(m, sg, NULL);
    free(sg->blocks);
    free(sg->owned);
    memset(sg, 0, sizeof *sg);
}

/* Keeps b / owned until the stream has passed the copy that reads them. */
static sl_status staging_keep(sl_model *m, staging *sg, sl_block b, void *owned, uint64_t bytes,
                              sl_error *err)
{
    if (b == SL_BLOCK_NONE && !owned) return SL_OK;
    if (sg->n == sg->cap) {
        /* the copies must land before anything can be let go */
        sl_status st = staging_flush(m, sg, err);
        const size_t cap = sg->cap ? 2 * sg->cap : 64;
        sl_block *nb = realloc(sg->blocks, cap * sizeof *nb);
        if (nb) sg->blocks = nb;
        void **no = nb ? realloc(sg->owned, cap * sizeof *no) : NULL;
        if (no) sg->owned = no;
        if (st || !nb || !no) {
            if (b != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, b, NULL);
            free(owned);
            return st ? st : sl_error_set(err, SL_ERR_NOMEM, "loading: out of memory");
        }
        sg->cap = cap;
    }
    sg->blocks[sg->n] = b;
    sg->owned[sg->n] = owned;
    sg->n++;
    sg->bytes += bytes;
    return sg->bytes >= STAGE_FLUSH_BYTES ? staging_flush(m, sg, err) : SL_OK;
}

/* Enqueues w's upload into a block of the device arena. The copy reads page-locked memory
 * only (on CUDA a pageable source makes it synchronous): a weight that is not in the host pool
 * (the mmap view, a converted or gathered malloc'd copy) goes through a pool block first. Its
 * host memory is let go (staging) once the copy has landed. */
static sl_status upload(sl_model *m, sl_weight *w, staging *sg, sl_error *err)
{
    sl_status st = sl_bfc_alloc(m->arena, w->nbytes ? w->nbytes : 1, SL_BFC_PINNED, &w->d_block, err);
    if (st) return st;
    void *d = sl_bfc_ptr(m->arena, w->d_block);
    sl_block stage = SL_BLOCK_NONE;
    if (w->nbytes) {
        const void *src = w->data;
        if (w->h_block == SL_BLOCK_NONE) {
            void *h = NULL;
            if ((st = sl_hostpool_alloc(m->hostpool, w->nbytes, &stage, &h, err))) return st;
            memcpy(h, src, (size_t)w->nbytes);
            src = h;
        }
        st = sl_device_copy(m->dev, m->stream, d, src, w->nbytes, SL_COPY_H2D, err);
        if (st) {
            if (stage != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, stage, NULL);
            return st;
        }
        sg->queued = true; /* a flush must wait for it even when nothing is left to free */
    }
    /* the host copy goes once the copy has landed, unless it is a runtime's host floor */
    const bool keep = m->serving && m->serving->floor_keep(m, w);
    const sl_block hb = keep ? SL_BLOCK_NONE : w->h_block;
    void *owned = keep ? NULL : w->h_owned;
    w->h_block = SL_BLOCK_NONE;
    w->h_owned = NULL;
    w->data = d;
    w->residency = SL_RES_DEVICE;
    st = staging_keep(m, sg, hb, owned, w->nbytes, err);
    if (!st) st = staging_keep(m, sg, stage, NULL, 0, err);
    return st;
}

sl_status sl__weight_to_device(sl_model *m, sl_weight *w, sl_error *err)
{
    staging sg = {0};
    sl_status st = upload(m, w, &sg, err);
    const sl_status fs = staging_flush(m, &sg, st ? NULL : err);
    staging_free(m, &sg);
    return st ? st : fs;
}

/* One compact part of a split FFN matrix (proj 0 gate, 1 up, 2 down), gathered from the
 * loaded original into a host pool block (cold) or through a temporary into a device block
 * (hot). */
static sl_status make_part(sl_model *m, const sl_weight *orig, int proj, bool hot,
                           int64_t n_part, const uint64_t bytes[3], sl_weight *pw, sl_error *err)
{
    *pw = *orig;
    pw->orig_set = pw->swapped = pw->fallback = false; /* a part has no live-reload history */
    pw->h_block = pw->d_block = SL_BLOCK_NONE;
    pw->h_owned = NULL;
    pw->n_dims = 2;
    /* [n_embd][n_part] for down, else [n_part][n_embd] (experts: one side's blob of all) */
    const int64_t embd = proj == 2 ? orig->ne[1] : orig->ne[0];
    pw->ne[0] = proj == 2 ? n_part : embd;
    pw->ne[1] = proj == 2 ? embd : n_part;
    pw->ne[2] = pw->ne[3] = 1;
    pw->nbytes = bytes[proj];
    void *dst = NULL;
    sl_status st;
    if (hot) {
        dst = malloc(bytes[proj] ? (size_t)bytes[proj] : 1);
        if (!dst) return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory (hot part)", orig->name);
    } else if ((st = sl_hostpool_alloc(m->hostpool, bytes[proj] ? bytes[proj] : 1, &pw->h_block,
                                       &dst, err))) {
        return st;
    }
    pw->data = dst;
    pw->residency = SL_RES_HOST;
    if (hot) pw->h_owned = dst; /* upload lets it go once copied */
    return SL_OK;
}

/* Drops w's own storage: its bytes now live in a split's parts. */
static void to_parts(sl_model *m, sl_weight *w)
{
    if (w->h_block != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, w->h_block, NULL);
    free(w->h_owned);
    w->h_block = SL_BLOCK_NONE;
    w->h_owned = NULL;
    w->data = NULL;
    w->residency = SL_RES_PARTS;
}

static void free_moe_split(sl_model *m, sl__layer *L)
{
    sl__moe_split *ms = L->moe_split;
    if (!ms) return;
    for (int s = 0; s < 2; s++) {
        free(ms->ff_at[s]);
        for (int p = 0; p < 3; p++) free((void *)ms->ptr[s][p]);
        free(ms->cold_b[s]);
        sl_weight *hb = &ms->hot_b[s];
        if (!hb->residency) continue; /* never made (a zeroed record's blocks are 0) */
        if (hb->d_block != SL_BLOCK_NONE && m->arena) sl_bfc_free(m->arena, hb->d_block, NULL);
        if (hb->h_block != SL_BLOCK_NONE && m->hostpool)
            sl_hostpool_free(m->hostpool, hb->h_block, NULL);
        free(hb->h_owned);
    }
    free(ms->hot_on_device);
    free(ms);
    L->moe_split = NULL;
}

/* The hot side's entries of expert bias orig_b (gate_exps_b or up_exps_b), gathered into
 * `entries` (n_part floats, malloc'd; owned by pw from here on), as a weight of its own in the
 * device arena: the hot matrices' executor reads it there. */
static sl_status bias_part(sl_model *m, const sl_weight *orig_b, float *entries, int64_t n_part,
                           sl_weight *pw, staging *sg, sl_error *err)
{
    *pw = *orig_b;
    pw->orig_set = pw->swapped = pw->fallback = false;
    pw->h_block = pw->d_block = SL_BLOCK_NONE;
    pw->h_owned = entries;
    pw->data = entries;
    pw->residency = SL_RES_HOST;
    pw->n_dims = 1;
    pw->ne[0] = n_part;
    pw->ne[1] = pw->ne[2] = pw->ne[3] = 1;
    pw->type = SL_GGML_F32;
    pw->nbytes = (uint64_t)n_part * sizeof(float);
    return upload(m, pw, sg, err);
}

/* HOT_COLD: replaces a split layer's loaded FFN — its dense gate/up/down, or all its routed
 * experts — by compact parts (scheduler/moe/ffn_split.h; a dense FFN is split as a layer of one
 * expert): each side's gate', up', down' of all experts packed into three blobs, the hot ones
 * in the device arena and the cold ones in the host pool; then the originals drop their bytes
 * (expert biases stay whole: each side holds a gathered copy of its gate/up entries, the hot
 * one uploaded beside its parts: bias_part). Routed experts also get the
 * two sides' arrays (L->moe_split), which sl__model_refresh_pointers turns into their
 * descriptions once every pointer is final. */
static sl_status split_ffn(sl_model *m, sl__layer *L, bool experts, staging *sg, sl_error *err)
{
    const int32_t X = experts ? m->hp.n_expert : 1;
    const sl_weight *orig[3] = {experts ? experts_w(L, 0) : L->ffn_gate,
                                experts ? experts_w(L, 1) : L->ffn_up,
                                experts ? experts_w(L, 2) : L->ffn_down};
    const void **src = calloc(3 * (size_t)X, sizeof *src);
    sl__moe_split *ms = experts ? calloc(1, sizeof *ms) : NULL;
    if (!src || (experts && !ms)) {
        free(src);
        free(ms);
        return sl_error_set(err, SL_ERR_NOMEM, "layer %d: out of memory (FFN split)",
                            (int)(L - m->layers));
    }
    L->moe_split = ms;
    for (int32_t x = 0; x < X; x++)
        for (int p = 0; p < 3; p++) src[p * X + x] = experts ? sl__expert_data(L, p, x)
                                                             : orig[p]->data;
    const sl_moe_layer whole = {
        .layer = (int32_t)(L - m->layers), .n_expert = X, .n_embd = orig[1]->ne[0],
        .n_ff = orig[1]->ne[1], .type_gate = orig[0]->type, .type_up = orig[1]->type,
        .type_down = orig[2]->type, .gate = src, .up = src + X, .down = src + 2 * X,
        .gate_b = experts && L->gate_exps_b ? L->gate_exps_b->data : NULL,
        .up_b = experts && L->up_exps_b ? L->up_exps_b->data : NULL, .act = m->tr->act};
    const int64_t G = sl_ffn_split_granule(orig[2]->type);
    int64_t dense_at[2][2]; /* a dense FFN's sides: [0, n_part] */
    sl_status st = SL_OK;
    if (ms && !(ms->hot_on_device = calloc((size_t)X, sizeof *ms->hot_on_device)))
        st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    for (int side = 0; side < 2 && !st; side++) {
        const bool hot = side == 0;
        sl_weight *pw = hot ? L->split_hot : L->split_cold;
        int64_t *at = ms ? ms->ff_at[side] = malloc(((size_t)X + 1) * sizeof *at)
                         : dense_at[side];
        if (!at) {
            st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
            break;
        }
        uint64_t bytes[3];
        sl_ffn_split_experts_layout(&whole, L->split_granule, G, hot, at, bytes);
        const int64_t n_part = at[X];
        for (int p = 0; p < 3 && !st; p++) {
            st = make_part(m, orig[p], p, hot, n_part, bytes, &pw[p], err);
            if (!st && ms && !(ms->ptr[side][p] = calloc((size_t)X, sizeof(void *))))
                st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        }
        float *bias[2] = {NULL, NULL}; /* this side's gate, up bias entries */
        for (int b = 0; b < 2 && !st; b++)
            if ((b ? whole.up_b : whole.gate_b) &&
                !(bias[b] = malloc((size_t)(n_part ? n_part : 1) * sizeof(float))))
                st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        if (!st)
            st = sl_ffn_split_experts_gather(&whole, L->split_granule, G, hot, at,
                                             (void *)pw[0].data, (void *)pw[1].data,
                                             (void *)pw[2].data, bias[0], bias[1], err);
        for (int p = 0; p < 3 && hot && !st; p++) st = upload(m, &pw[p], sg, err);
        const sl_weight *orig_b[2] = {L->gate_exps_b, L->up_exps_b};
        for (int b = 0; b < 2; b++) {
            if (!bias[b]) continue;
            if (st) free(bias[b]);
            else if (hot)
                st = bias_part(m, orig_b[b], bias[b], n_part, &ms->hot_b[b], sg, err);
            else ms->cold_b[b] = bias[b];
        }
    }
    free(src);
    if (st) return st;
    for (int32_t x = 0; x < X; x++) /* merged tensors and a dense FFN: once; per-expert: each */
        for (int p = 0; p < 3; p++) {
            sl_weight *const *pe = !experts ? NULL : p == 0 ? L->gate_e : p == 1 ? L->up_e
                                                                                 : L->down_e;
            sl_weight *w = pe ? pe[x] : x == 0 ? (sl_weight *)orig[p] : NULL;
            if (w) to_parts(m, w);
        }
    return SL_OK;
}

static void free_parts(sl_model *m, sl__layer *L)
{
    sl_weight *all[6] = {&L->split_hot[0], &L->split_hot[1], &L->split_hot[2],
                         &L->split_cold[0], &L->split_cold[1], &L->split_cold[2]};
    for (int i = 0; i < 6; i++) {
        sl_weight *w = all[i];
        if (!w->residency) continue; /* never made (the blocks of a zeroed record are 0) */
        if (w->h_block != SL_BLOCK_NONE && m->hostpool)
            sl_hostpool_free(m->hostpool, w->h_block, NULL);
        if (w->d_block != SL_BLOCK_NONE && m->arena) sl_bfc_free(m->arena, w->d_block, NULL);
        free(w->h_owned);
        memset(w, 0, sizeof *w);
        w->h_block = w->d_block = SL_BLOCK_NONE;
    }
}

sl_status sl__weight_resplit(sl_model *m, sl__layer *L, const void *const data[3],
                             const uint32_t type[3], const uint64_t nbytes[3],
                             const bool converted[3], sl_error *err)
{
    sl_weight *orig[3] = {L->ffn_gate, L->ffn_up, L->ffn_down};
    if (!L->n_hot || sl_ffn_split_granule(type[2]) != sl_ffn_split_granule(L->ffn_down->type))
        return sl_error_set(err, SL_ERR_INVALID, "'%s': not split, or its new type changes "
                            "the split's granule", L->ffn_down->name);
    /* the new parts are built beside the old ones, so a failure leaves the layer working */
    sl__layer old = *L;
    sl_weight saved[3];
    for (int p = 0; p < 3; p++) {
        saved[p] = *orig[p];
        orig[p]->data = data[p];
        orig[p]->type = type[p];
        orig[p]->nbytes = nbytes[p];
        orig[p]->converted = converted[p];
        if (!converted[p]) orig[p]->file_type = type[p]; /* the parts copy it (validate) */
        orig[p]->residency = SL_RES_HOST;
        orig[p]->h_block = orig[p]->d_block = SL_BLOCK_NONE;
        orig[p]->h_owned = NULL; /* borrowed: split_ffn frees nothing of it */
    }
    for (int i = 0; i < 3; i++) {
        memset(&L->split_hot[i], 0, sizeof L->split_hot[i]);
        memset(&L->split_cold[i], 0, sizeof L->split_cold[i]);
        L->split_hot[i].h_block = L->split_hot[i].d_block = SL_BLOCK_NONE;
        L->split_cold[i].h_block = L->split_cold[i].d_block = SL_BLOCK_NONE;
    }
    staging sg = {0};
    sl_status st = split_ffn(m, L, false, &sg, err);
    const sl_status fs = staging_flush(m, &sg, st ? NULL : err);
    staging_free(m, &sg);
    if (!st) st = fs;
    if (st) {
        free_parts(m, L);
        memcpy(L->split_hot, old.split_hot, sizeof L->split_hot);
        memcpy(L->split_cold, old.split_cold, sizeof L->split_cold);
        for (int p = 0; p < 3; p++) *orig[p] = saved[p];
        return st;
    }
    free_parts(m, &old);
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
    uint64_t total = 0, host_bytes = 0, biggest = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        const uint64_t b = loaded_bytes(w) + 2 * SL_GGUF_DIRECT_ALIGN;
        total += loaded_bytes(w);
        host_bytes += b;
        if (b > biggest) biggest = b;
    }
    bool any_device = false;
    for (size_t i = 0; i < m->n_w; i++) any_device |= m->w[i].want_device;
    /* mmap keeps host weights in the mapping; device weights are staged through the pool; a
     * runtime lends its own pool */
    if ((m->opt.io != SL_LOAD_MMAP || any_device) && !m->hostpool) {
        sl_hostpool_options ho = sl_hostpool_options_default();
        ho.numa_node = m->opt.numa_node < 0 ? SL_HOSTPOOL_NODE_AUTO : m->opt.numa_node;
        /* one slab for a small model; 1 GiB slabs (or a tensor's own) for a big one */
        const uint64_t cap = (uint64_t)1 << 30;
        ho.slab_bytes = host_bytes < cap ? host_bytes : cap;
        if (ho.slab_bytes < biggest) ho.slab_bytes = biggest;
        sl_status st = sl_env_topo_options(&ho.topology, err);
        if (!st) st = sl_hostpool_create(m->dev, NULL, &ho, &m->hostpool, err);
        if (st) return st;
    }
    uint64_t done = 0;
    unsigned converted = 0, derived = 0;
    staging sg = {0};
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        sl_status st = load_host(m, w, err);
        if (!st && w->want_device && !sl__load_host_only(m)) st = upload(m, w, &sg, err);
        if (st) {
            staging_free(m, &sg);
            if (m->opt.progress && isatty(STDERR_FILENO)) fputc('\n', stderr);
            return st;
        }
        converted += w->converted;
        derived += w->derive != SL_DERIVE_NONE;
        done += w->nbytes;
        if (i % 16 == 0) progress(m, done, total, false);
    }
    progress(m, total, total, true);
    if (converted && !m->notice[0])
        snprintf(m->notice, sizeof m->notice,
                 "%u tensors converted to F32 at load (types without a CPU kernel, or "
                 "non-F32 norms%s)", converted,
                 derived ? "; attn_k_b / attn_v_b derived from the legacy attn_kv_b" : "");

    for (int il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        const sl_weight *eu = experts_w(L, 1);
        const bool dense = L->ffn_up && m->plan.split[L->ffn_up - m->w];
        if (L->n_hot && (dense || (eu && m->plan.split[eu - m->w]))) {
            sl_status st = split_ffn(m, L, !dense, &sg, err);
            if (st) {
                staging_free(m, &sg);
                return st;
            }
        }
    }
    sl_status fst = staging_flush(m, &sg, err);
    staging_free(m, &sg);
    if (fst) return fst;
    /* after the split (parts are gathered by rows as Q4_K), before the snapshot below: a
     * reattach returns to the repacked bytes */
    if ((fst = sl__model_repack(m, err))) return fst;
    /* what a live reload reattaches to; a runtime's model moves between its host floor and
     * the device and has none: its reloads replace the floor (reload.c: commit_runtime) */
    for (size_t i = 0; i < m->n_w && !m->rt; i++) {
        m->w[i].orig = sl__weight_storage_get(&m->w[i]);
        m->w[i].orig_set = true;
    }
    return sl__model_refresh_pointers(m, err);
}

sl_status sl__model_refresh_pointers(sl_model *m, sl_error *err)
{
    /* the scheduler's expert pointers and rope frequency factors, now that data is final */
    for (int il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        if (m->rope_freqs) L->rope.freq_factors = m->rope_freqs->data;
        else if (m->mrope_ff) L->rope.freq_factors = m->mrope_ff;
        if (!sl__layer_moe(L)) continue;
        const sl_weight *g = experts_w(L, 0), *u = experts_w(L, 1), *d = experts_w(L, 2);
        sl__moe_split *ms = L->moe_split;
        for (int x = 0; x < m->hp.n_expert; x++) {
            /* a split layer's experts have no whole copy: its parts describe them */
            L->moe_gate[x] = ms ? NULL : sl__expert_data(L, 0, x);
            L->moe_up[x] = ms ? NULL : sl__expert_data(L, 1, x);
            L->moe_down[x] = ms ? NULL : sl__expert_data(L, 2, x);
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
            .on_device = L->moe_on_device, .act = m->tr->act,
            .gate_b = L->gate_exps_b ? L->gate_exps_b->data : NULL,
            .up_b = L->up_exps_b ? L->up_exps_b->data : NULL,
            .down_b = L->down_exps_b ? L->down_exps_b->data : NULL};
        /* where the hot blobs are (the device arena wherever the placement splits) */
        const sl_weight *hw = L->split_hot;
        const bool hot_dev = hw[0].residency & hw[1].residency & hw[2].residency &
                             SL_RES_DEVICE;
        for (int32_t x = 0; ms && x < m->hp.n_expert; x++) ms->hot_on_device[x] = hot_dev;
        for (int side = 0; ms && side < 2; side++) {
            const sl_weight *pw = side ? L->split_cold : L->split_hot;
            const float *gb = side ? ms->cold_b[0] : ms->hot_b[0].data;
            const float *ub = side ? ms->cold_b[1] : ms->hot_b[1].data;
            sl_ffn_split_experts_part(&L->moe, ms->ff_at[side], pw[0].data, pw[1].data,
                                      pw[2].data, gb, ub, side == 0,
                                      side ? NULL : ms->hot_on_device,
                                      ms->ptr[side][0], ms->ptr[side][1], ms->ptr[side][2],
                                      &ms->part[side]);
        }
    }
    return SL_OK;
}

void sl__model_free_weights(sl_model *m)
{
    for (int il = 0; m->layers && il < m->hp.n_layer; il++) {
        free_parts(m, &m->layers[il]);
        free_moe_split(m, &m->layers[il]);
        free(m->layers[il].split_granule);
        m->layers[il].split_granule = NULL;
    }
    for (size_t i = 0; i < m->n_w; i++) {
        sl_weight *w = &m->w[i];
        if (w->swapped) { /* a live reload left the original storage waiting */
            sl__weight_storage_release(m, &w->orig);
            w->swapped = w->fallback = false;
        }
        sl_weight_storage cur = sl__weight_storage_get(w);
        sl__weight_storage_release(m, &cur);
        if (sl__weight_repacked(w)) cur.type = w->file_type; /* a later load reads Q4_K and repacks it */
        sl__weight_storage_set(w, &cur);
        w->residency = 0;
    }
}

void sl__weight_storage_release(sl_model *m, sl_weight_storage *s)
{
    if (s->h_block != SL_BLOCK_NONE && m->hostpool) sl_hostpool_free(m->hostpool, s->h_block, NULL);
    if (s->d_block != SL_BLOCK_NONE && m->arena) sl_bfc_free(m->arena, s->d_block, NULL);
    free(s->h_owned);
    s->h_owned = NULL;
    s->h_block = s->d_block = SL_BLOCK_NONE;
    s->data = NULL;
}

sl_status sl__model_validate(const sl_model *m, sl_error *err)
{
    for (size_t i = 0; i < m->n_w; i++) {
        sl_status st = sl_weight_validate(&m->w[i], m->hostpool, err);
        if (st) return st;
    }
    for (int il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        const bool split = (L->ffn_up && L->ffn_up->residency == SL_RES_PARTS) || L->moe_split;
        for (int p = 0; p < 3 && split; p++) {
            sl_status st = sl_weight_validate(&L->split_hot[p], m->hostpool, err);
            if (!st) st = sl_weight_validate(&L->split_cold[p], m->hostpool, err);
            if (st) return st;
            const sl__moe_split *ms = L->moe_split;
            const int32_t X = m->hp.n_expert;
            bool monotone = true;
            for (int32_t x = 0; ms && x < X; x++)
                monotone &= ms->ff_at[0][x] <= ms->ff_at[0][x + 1] &&
                            ms->ff_at[1][x] <= ms->ff_at[1][x + 1];
            if (ms && (!monotone || ms->ff_at[0][0] || ms->ff_at[1][0] ||
                       ms->ff_at[0][X] + ms->ff_at[1][X] != (int64_t)X * m->hp.n_ff_exp ||
                       ms->part[0].down_b || ms->part[1].down_b != L->moe.down_b))
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: layer %d: the "
                                    "experts' hot and cold parts do not cover them once", il);
            if (!(L->split_hot[p].residency & SL_RES_DEVICE) ||
                L->split_cold[p].residency != SL_RES_HOST)
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: layer %d: hot part "
                                    "not on the device or cold part not on the host", il);
        }
        const sl__moe_split *ms = L->moe_split;
        for (int b = 0; ms && b < 2; b++) {
            const bool has = b ? L->moe.up_b != NULL : L->moe.gate_b != NULL;
            const sl_weight *hb = &ms->hot_b[b];
            sl_status st = has ? sl_weight_validate(hb, m->hostpool, err) : SL_OK;
            if (st) return st;
            const float *part_b = b ? ms->part[0].up_b : ms->part[0].gate_b;
            if (has != !!(hb->residency & SL_RES_DEVICE) || has != !!ms->cold_b[b] ||
                part_b != (has ? hb->data : NULL))
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: layer %d: the hot "
                                    "%s bias entries are not on the device with the hot parts",
                                    il, b ? "up" : "gate");
        }
    }
    for (int il = 0; il < m->hp.n_layer && m->hp.n_expert; il++)
        for (int x = 0; sl__layer_moe(&m->layers[il]) && x < m->hp.n_expert; x++)
            if (!m->layers[il].moe_split &&
                (!m->layers[il].moe_gate[x] || !m->layers[il].moe_up[x] ||
                 !m->layers[il].moe_down[x]))
                return sl_error_set(err, SL_ERR_INVALID, "model invariant: layer %d expert %d "
                                    "has no weights", il, x);
    return SL_OK;
}
