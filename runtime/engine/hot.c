/* runtime/engine/hot.c: see hot.h. */
#include "runtime/engine/hot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "runtime/engine/ctx.h"

/* A pass's tokens the rows buffers hold: decode and short prompts; a prefill of 32 or more
 * streams every expert through the device (stream.h) by default. */
enum { HOT_MAX_TOK = 32 };

/* The context's region of a layer: gate, up, down of its n_cap cache slots, the three biases
 * of every expert, the mask, (cuda) the pointer arrays; off[0..5] the parts', *mask_off,
 * *ptr_off; returns bytes. */
static uint64_t region(const sl_moe_layer *H, const uint64_t pb[3], int32_t n_cap, bool cuda,
                       uint64_t off[6], uint64_t *mask_off, uint64_t *ptr_off)
{
    const uint64_t X = (uint64_t)H->n_expert;
    const float *b[3] = {H->gate_b, H->up_b, H->down_b};
    const uint64_t brows[3] = {(uint64_t)H->n_ff, (uint64_t)H->n_ff, (uint64_t)H->n_embd};
    uint64_t bytes[8], at[8];
    for (int p = 0; p < 3; p++) {
        bytes[p] = (uint64_t)n_cap * pb[p];
        bytes[3 + p] = b[p] ? X * brows[p] * sizeof(float) : 0;
    }
    bytes[6] = X;
    bytes[7] = cuda ? 3 * X * sizeof(void *) : 0;
    const uint64_t total = sl__dx_regions(bytes, 8, at);
    memcpy(off, at, 6 * sizeof *off);
    *mask_off = at[6];
    *ptr_off = at[7];
    return total;
}

/* Slot j's part p: the shared block's below n_static, the context's region above. */
static uint8_t *slot_ptr(const sl__hot_layer *L, int p, int32_t j)
{
    return j < L->n_static ? L->S->part[p] + (uint64_t)j * L->pb[p]
                           : L->base + L->off[p] + (uint64_t)(j - L->n_static) * L->pb[p];
}

static void shared_destroy(sl_model *m, sl__hot_shared *S)
{
    if (!S) return;
    if (S->block != SL_BLOCK_NONE) (void)sl_bfc_free(m->arena, S->block, NULL);
    for (int32_t il = 0; S->L && il < m->hp.n_layer; il++) free(S->L[il].experts);
    free(S->L);
    free(S);
}

/* The model's static sets laid out as the context's layers take them (n_static slots of pb
 * bytes a part), their block taken from the model's arena (under hot_mu). */
static sl_status shared_make(sl_ctx *c, sl__hot_shared **out, sl_error *err)
{
    sl_model *m = c->m;
    const sl__hot *h = &c->hot;
    const size_t NL = (size_t)m->hp.n_layer;
    sl__hot_shared *S = calloc(1, sizeof *S);
    uint64_t *bytes = malloc(2 * 3 * NL * sizeof *bytes), *off = bytes + 3 * NL;
    if (!S || !bytes || !(S->L = calloc(NL, sizeof *S->L))) {
        free(S);
        free(bytes);
        return sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
    }
    S->block = SL_BLOCK_NONE;
    S->bytes = h->bytes;
    bool ok = true;
    for (size_t il = 0; il < NL; il++) {
        const sl__hot_layer *L = &h->L[il];
        sl__hot_shared_layer *SL = &S->L[il];
        SL->n_static = L->n_static;
        SL->n_chosen = -1;
        memcpy(SL->pb, L->pb, sizeof SL->pb);
        for (int p = 0; p < 3; p++) bytes[3 * il + (size_t)p] = (uint64_t)L->n_static * L->pb[p];
        ok &= !L->n_static || (SL->experts = malloc((size_t)L->n_static * sizeof *SL->experts));
    }
    const uint64_t total = sl__dx_regions(bytes, 3 * (int)NL, off);
    sl_error te;
    sl_status st = ok ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
    if (!st && sl_bfc_alloc(m->arena, total, SL_BFC_PINNED, &S->block, &te)) {
        S->block = SL_BLOCK_NONE;
        st = sl_error_set(err, SL_ERR_NOMEM, "sched hot_kb: %llu bytes of hot experts do not "
                          "fit the device: %s", (unsigned long long)total, te.msg);
    }
    if (!st) {
        uint8_t *base = sl_bfc_ptr(m->arena, S->block);
        for (size_t il = 0; il < NL; il++)
            for (int p = 0; p < 3; p++) S->L[il].part[p] = base + off[3 * il + (size_t)p];
    }
    free(bytes);
    if (st) {
        shared_destroy(m, S);
        return st;
    }
    *out = S;
    return SL_OK;
}

/* The context's hold on the model's static sets, made by the first context that asks; one a
 * model, so another size asked for is refused. */
static sl_status shared_hold(sl_ctx *c, sl_error *err)
{
    sl__hot *h = &c->hot;
    sl_model *m = c->m;
    pthread_mutex_lock(&m->hot_mu);
    sl__hot_shared *S = m->hot_shared;
    sl_status st = SL_OK;
    if (S && S->bytes != h->bytes)
        st = sl_error_set(err, SL_ERR_INVALID, "scheduler option hot_kb=%llu: another context "
                          "of the model keeps its static hot experts in hot_kb=%llu (contexts "
                          "of a model share one set)", (unsigned long long)(h->bytes >> 10),
                          (unsigned long long)(S->bytes >> 10));
    else if (!S && !(st = shared_make(c, &S, err)))
        m->hot_shared = S;
    for (int32_t il = 0; !st && il < m->hp.n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        const sl__hot_shared_layer *SL = &S->L[il];
        if (L->n_static && SL->gone) {
            /* a layer a live reload changed left the set for every context (load_layer) */
            L->n_cap -= L->n_static;
            L->n_static = 0;
        } else if (SL->n_static != L->n_static || (L->n_static &&
                                                   memcmp(SL->pb, L->pb, sizeof SL->pb))) {
            /* the set was laid out before a live reload changed which layers keep their
             * experts on the host: its shares no longer fit this context's */
            st = sl_error_set(err, SL_ERR_INVALID, "scheduler option hot_kb=%llu: layer %d "
                              "would hold %d experts of %llu bytes, the model's shared set %d "
                              "of %llu (laid out before a live reload; it lives as long as "
                              "the contexts that hold it)", (unsigned long long)(h->bytes >> 10),
                              il, L->n_static,
                              (unsigned long long)(L->pb[0] + L->pb[1] + L->pb[2]),
                              SL->n_static,
                              (unsigned long long)(SL->pb[0] + SL->pb[1] + SL->pb[2]));
        }
        L->S = L->n_static ? &S->L[il] : NULL;
    }
    if (!st) {
        S->refs++;
        h->shared = S;
    } else {
        for (int32_t il = 0; il < m->hp.n_layer; il++) h->L[il].S = NULL;
        if (S && !S->refs && m->hot_shared == S) { /* made here, held by none */
            m->hot_shared = NULL;
            shared_destroy(m, S);
        }
    }
    pthread_mutex_unlock(&m->hot_mu);
    return st;
}

/* Lets go of the static sets; the last holder frees them (the stream is idle: ctx_dev.c). */
static void shared_release(sl_ctx *c)
{
    sl__hot_shared *S = c->hot.shared;
    if (!S) return;
    sl_model *m = c->m;
    pthread_mutex_lock(&m->hot_mu);
    if (--S->refs == 0) {
        m->hot_shared = NULL;
        shared_destroy(m, S);
    }
    pthread_mutex_unlock(&m->hot_mu);
    c->hot.shared = NULL;
}

/* Every taking layer's h_mask and hp in one page-locked block, zeroed. */
static sl_status pinned_alloc(sl_ctx *c, sl_error *err)
{
    sl__hot *h = &c->hot;
    const size_t X = (size_t)c->m->hp.n_expert;
    const size_t per = (X + 15) / 16 * 16 + 3 * X * sizeof(void *);
    size_t n = 0;
    for (int32_t il = 0; il < c->m->hp.n_layer; il++) n += h->L[il].n_cap ? per : 0;
    sl_status st = sl__ctx_host_buf_alloc(c, n, "hot experts' masks", &h->pinned, err);
    if (st) return st;
    memset(h->pinned, 0, n);
    uint8_t *at = h->pinned;
    for (int32_t il = 0; il < c->m->hp.n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        if (!L->n_cap) continue;
        L->h_mask = at;
        L->hp = (const void **)(void *)(at + (X + 15) / 16 * 16);
        at += per;
    }
    return SL_OK;
}

/* A layer's region in the block: its bytes and where its mask and pointer arrays start. */
typedef struct region_at {
    uint64_t bytes, mask_off, ptr_off;
} region_at;

sl_status sl__hot_setup(sl_ctx *c, sl_error *err)
{
    sl__hot *h = &c->hot;
    sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    const uint64_t cache = h->uploads > 0 ? h->cache_bytes : 0;
    if (!(h->bytes + cache) || !hp->n_expert) return SL_OK;
    const char *opt = h->bytes ? "hot_kb" : "cache_kb";
    const unsigned long long kb = (h->bytes ? h->bytes : cache) >> 10;
    const int32_t X = hp->n_expert, K = hp->n_expert_used;
    const bool cuda = sl__model_cuda(m);
    int32_t n_layers = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) n_layers += sl__experts_streamable(c, il);
    /* asked for, so refused rather than dropped (engine.c: no option is silently dropped) */
    if (!n_layers)
        return sl_error_set(err, SL_ERR_INVALID, "scheduler option %s=%llu: no layer on the "
                            "device computes its routed experts on the host (the placement "
                            "keeps every expert on the device, no layer on it, or their types "
                            "have no device kernel): nothing to keep resident", opt, kb);
    if (!(h->L = calloc((size_t)hp->n_layer, sizeof *h->L)))
        return sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
    region_at *lay = calloc((size_t)hp->n_layer, sizeof *lay);
    if (!lay) {
        sl__hot_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
    }
    uint64_t total = 0, per_min = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        const sl_moe_layer *H = &m->layers[il].moe;
        int64_t rows[3], cols[3];
        if (!sl__experts_streamable(c, il) || !sl__expert_shape(H, rows, cols, L->pb)) continue;
        const uint64_t per = L->pb[0] + L->pb[1] + L->pb[2];
        per_min = per_min && per_min < per ? per_min : per;
        const uint64_t ns = h->bytes / (uint64_t)n_layers / per;
        const uint64_t n = ns + cache / (uint64_t)n_layers / per;
        L->n_static = ns < (uint64_t)X ? (int32_t)ns : X;
        L->n_cap = n < (uint64_t)X ? (int32_t)n : X;
        if (!L->n_cap) continue;
        lay[il].bytes = region(H, L->pb, L->n_cap - L->n_static, cuda, L->off,
                               &lay[il].mask_off, &lay[il].ptr_off);
        total += lay[il].bytes;
    }
    if (!total) { /* the share holds no whole expert anywhere */
        free(lay);
        sl__hot_free(c);
        return sl_error_set(err, SL_ERR_INVALID, "scheduler option %s=%llu: a share of "
                            "%llu KiB in each of the %d layers whose experts are on the host "
                            "holds no whole expert (one is %llu KiB)", opt, kb,
                            kb / (unsigned long long)n_layers, n_layers,
                            (unsigned long long)(per_min >> 10));
    }
    bool statics = false;
    for (int32_t il = 0; il < hp->n_layer; il++) statics |= h->L[il].n_static > 0;
    sl_status hs = statics ? shared_hold(c, err) : SL_OK;
    if (hs) {
        free(lay);
        sl__hot_free(c);
        return hs;
    }
    total = 0; /* the hold may have left a layer nothing of its own */
    for (int32_t il = 0; il < hp->n_layer; il++) total += h->L[il].n_cap ? lay[il].bytes : 0;
    h->max_tok = c->cap < HOT_MAX_TOK ? c->cap : HOT_MAX_TOK;
    const uint64_t rows_bytes = sl__dx_up256((uint64_t)h->max_tok * (uint64_t)K *
                                             (uint64_t)hp->n_embd * sizeof(float));
    uint8_t *block = NULL;
    sl_error te;
    if (sl__ctx_dev_take(c, total + 2 * rows_bytes, (void **)&block, &te)) {
        free(lay);
        sl__hot_free(c);
        return sl_error_set(err, SL_ERR_NOMEM, "sched %s: %llu bytes of hot experts and "
                            "rows do not fit the device: %s", opt,
                            (unsigned long long)(total + 2 * rows_bytes), te.msg);
    }
    h->d_rows[0] = (float *)block;
    h->d_rows[1] = (float *)(block + rows_bytes);
    uint8_t *at = block + 2 * rows_bytes;
    sl_status st = sl__ctx_host_buf_alloc(c, rows_bytes, "hot experts' rows",
                                          (void **)&h->h_rows, err);
    if (!st && !(h->assign = malloc((size_t)(h->max_tok * K) * sizeof *h->assign)))
        st = sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
    for (int32_t il = 0; !st && il < hp->n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        if (!L->n_cap) continue;
        const sl_moe_layer *H = &m->layers[il].moe;
        L->base = at;
        L->d_mask = at + lay[il].mask_off;
        L->dp = cuda ? (const void **)(void *)(at + lay[il].ptr_off) : NULL;
        at += lay[il].bytes;
        L->count = calloc((size_t)X, sizeof *L->count);
        L->recent = calloc((size_t)X, sizeof *L->recent);
        L->score = calloc((size_t)X, sizeof *L->score);
        L->last = calloc((size_t)X, sizeof *L->last);
        L->slot_of = malloc((size_t)X * sizeof *L->slot_of);
        L->slot_expert = malloc((size_t)L->n_cap * sizeof *L->slot_expert);
        L->undo = calloc(3 * (size_t)L->n_cap, sizeof *L->undo);
        L->has_b[0] = H->gate_b, L->has_b[1] = H->up_b, L->has_b[2] = H->down_b;
        if (!L->count || !L->recent || !L->score || !L->last || !L->slot_of ||
            !L->slot_expert || !L->undo) {
            st = sl_error_set(err, SL_ERR_NOMEM, "hot experts: out of memory");
            continue;
        }
        for (int32_t e = 0; e < X; e++) L->slot_of[e] = -1;
        for (int32_t j = 0; j < L->n_cap; j++) L->slot_expert[j] = -1;
    }
    free(lay);
    if (!st) st = pinned_alloc(c, err);
    if (!st && !cuda) st = sl_moe_cpu_create(&c->ops, &c->mv, c->pool, &h->sim_rows, err);
    if (!st && cuda)
        st = sl_cuda_ctx_create(sl_device_ordinal_get(m->dev),
                                sl_device_stream_native(m->dev, m->stream), &h->cu, err);
    if (!st && h->cu) sl_cuda_ctx_set_pdl(h->cu, sl__ctx_pdl(c));
    if (st) {
        sl__hot_free(c);
        return st;
    }
    h->on = true;
    return sl__hot_validate(c, err);
}

void sl__hot_free(sl_ctx *c)
{
    sl__hot *h = &c->hot;
    shared_release(c);
    for (int32_t il = 0; h->L && il < c->m->hp.n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        free(L->count);
        free(L->recent);
        free(L->score);
        free(L->last);
        free(L->slot_of);
        free(L->slot_expert);
        free(L->undo);
    }
    sl__ctx_host_buf_free(c, h->pinned);
    free(h->L);
    free(h->assign);
    sl__ctx_host_buf_free(c, h->h_rows);
    sl_moe_destroy(h->sim_rows);
    if (h->cu) sl_cuda_ctx_destroy(h->cu);
    /* the block is the context's (freed with its device side) */
    *h = (sl__hot){.bytes = h->bytes, .cache_bytes = h->cache_bytes, .uploads = h->uploads,
                   .decay = h->decay, .lru = h->lru, .warm = h->warm};
}

sl_status sl__hot_validate(const sl_ctx *c, sl_error *err)
{
    const sl__hot *h = &c->hot;
    if (!h->on) return SL_OK;
    if (!h->L || !h->d_rows[0] || !h->d_rows[1] || !h->h_rows || !h->assign || h->max_tok < 1 ||
        (sl__model_cuda(c->m) ? !h->cu : !h->sim_rows))
        return sl_error_set(err, SL_ERR_INVALID, "hot experts: on without their buffers");
    const int32_t X = c->m->hp.n_expert;
    for (int32_t il = 0; il < c->m->hp.n_layer; il++) {
        const sl__hot_layer *L = &h->L[il];
        if (!L->n_cap) continue;
        int32_t set = 0;
        for (int32_t e = 0; e < X; e++) {
            const int32_t j = L->slot_of[e];
            set += L->h_mask[e] != 0;
            bool ok = (L->h_mask[e] != 0) == (j >= 0) && (j < 0 || (j < L->n_cap &&
                                                                    L->slot_expert[j] == e));
            for (int p = 0; ok && p < 3; p++)
                ok = L->hp[p * X + e] == (j >= 0 ? slot_ptr(L, p, j) : NULL);
            if (!ok)
                return sl_error_set(err, SL_ERR_INVALID, "hot experts: layer %d expert %d: "
                                    "mask, slot and pointers disagree", il, e);
        }
        for (int32_t j = 0; j < L->n_cap; j++)
            if (L->slot_expert[j] >= X || (L->slot_expert[j] >= 0 &&
                                           L->slot_of[L->slot_expert[j]] != j))
                return sl_error_set(err, SL_ERR_INVALID, "hot experts: layer %d slot %d holds "
                                    "%d", il, j, L->slot_expert[j]);
        if (L->n_cap > X || L->n_static > L->n_cap || set != L->n_hot ||
            (L->loaded && !L->chosen) || (L->n_static > 0) != (L->S != NULL))
            return sl_error_set(err, SL_ERR_INVALID, "hot experts: layer %d holds %d of %d "
                                "(%d marked)", il, L->n_hot, L->n_cap, set);
    }
    return SL_OK;
}

bool sl__hot_warming(const sl_ctx *c, int32_t il)
{
    const sl__hot *h = &c->hot;
    return h->on && h->L[il].n_cap && !h->L[il].chosen;
}

/* A layer's path: on the hot path once loaded (a cache keeps it there while empty). */
static bool on_path(const sl__hot *h, const sl__hot_layer *L)
{
    return L->loaded && (L->n_hot || h->uploads);
}

bool sl__hot_ready(const sl_ctx *c, int32_t il, int64_t n)
{
    const sl__hot *h = &c->hot;
    /* with a cache, a layer stays on this path once loaded (its set may fill later); never
     * beside neuron statistics (refused: engine.c) */
    return h->on && on_path(h, &h->L[il]) && n <= h->max_tok;
}

void sl__hot_count(sl_ctx *c, int32_t il, const int32_t *idx, int64_t n_sel)
{
    sl__hot *h = &c->hot;
    if (!h->on || !h->L[il].n_cap) return;
    sl__hot_layer *L = &h->L[il];
    const bool warming = !L->chosen, cache = h->uploads > 0;
    if (!warming && !cache) return;
    for (int64_t i = 0; i < n_sel; i++) {
        const int32_t e = idx[i];
        if (e < 0 || e >= c->m->hp.n_expert) continue;
        if (warming) L->count[e]++;
        if (cache) L->recent[e]++;
    }
    if (warming) L->routed += (uint64_t)n_sel;
}

/* Expert e into slot j: the host's masks and pointers (the device's copies follow). */
static void place(sl_ctx *c, sl__hot_layer *L, int32_t e, int32_t j)
{
    const int32_t X = c->m->hp.n_expert;
    L->slot_of[e] = j;
    L->slot_expert[j] = e;
    L->h_mask[e] = 1;
    for (int p = 0; p < 3; p++) L->hp[p * X + e] = slot_ptr(L, p, j);
    L->n_hot++;
}

static void unplace(sl_ctx *c, sl__hot_layer *L, int32_t e)
{
    const int32_t X = c->m->hp.n_expert, j = L->slot_of[e];
    L->slot_expert[j] = -1;
    L->slot_of[e] = -1;
    L->h_mask[e] = 0;
    for (int p = 0; p < 3; p++) L->hp[p * X + e] = NULL;
    L->n_hot--;
}

/* The static set: the model's, where another context chose it already (adopted); else the
 * most routed experts of this context's warm-up (ties: lower index), never-routed ones left
 * out, in slots 0 .. n_static - 1 (what the cache never evicts), which every context of the
 * model then adopts. Slots the profile leaves free stay free (they are shared memory). */
static void choose(sl_ctx *c, sl__hot_layer *L)
{
    const int32_t X = c->m->hp.n_expert;
    sl__hot_shared_layer *S = L->S;
    pthread_mutex_lock(&c->m->hot_mu);
    if (S && S->n_chosen >= 0) {
        for (int32_t j = 0; j < S->n_chosen; j++) place(c, L, S->experts[j], j);
    } else {
        int32_t n = 0;
        for (; n < L->n_static; n++) {
            int32_t best = -1;
            for (int32_t e = 0; e < X; e++)
                if (!L->h_mask[e] && L->count[e] && (best < 0 || L->count[e] > L->count[best]))
                    best = e;
            if (best < 0) break;
            place(c, L, best, n);
            if (S) S->experts[n] = best;
        }
        if (S) S->n_chosen = n;
    }
    pthread_mutex_unlock(&c->m->hot_mu);
    L->chosen = true;
}

/* Whether another context chose layer L's static set already (it is adopted, warm or not). */
static bool shared_chosen(sl_ctx *c, const sl__hot_layer *L)
{
    if (!L->S) return false;
    pthread_mutex_lock(&c->m->hot_mu);
    const bool chosen = L->S->n_chosen >= 0;
    pthread_mutex_unlock(&c->m->hot_mu);
    return chosen;
}

static sl_status h2d(sl_ctx *c, void *dst, const void *src, uint64_t bytes, sl_error *err)
{
    c->stats.copies++;
    c->stats.copy_bytes += bytes;
    return sl_device_copy(c->m->dev, c->m->stream, dst, src, bytes, SL_COPY_H2D, err);
}

/* Expert e's gate, up and down into its slot, turned into the device's type there. */
static sl_status upload_expert(sl_ctx *c, int32_t il, int32_t e, sl_error *err)
{
    sl__hot_layer *L = &c->hot.L[il];
    const sl_moe_layer *H = &c->m->layers[il].moe;
    const int32_t j = L->slot_of[e];
    const void *const *src[3] = {H->gate, H->up, H->down};
    const uint32_t t[3] = {H->type_gate, H->type_up, H->type_down};
    int64_t rows[3], cols[3];
    uint64_t pb[3];
    (void)sl__expert_shape(H, rows, cols, pb); /* (setup checked the layer's: L->pb) */
    for (int p = 0; p < 3; p++) {
        uint8_t *dst = slot_ptr(L, p, j);
        sl_status st = h2d(c, dst, src[p][e], L->pb[p], err);
        /* the device reads Q4_K: the CPU's repacked rows turned back there, in place */
        if (!st && t[p] == SL_TYPE_Q4_K_R8)
            st = sl__r8_undo_enqueue(c, c->hot.cu, &L->undo[(size_t)j * 3 + (size_t)p], dst,
                                     rows[p], cols[p], err);
        if (st) return st;
    }
    return SL_OK;
}

/* The layer's masks and pointer arrays to the device (behind the copies they point at). */
static sl_status publish(sl_ctx *c, sl__hot_layer *L, sl_error *err)
{
    const uint64_t X = (uint64_t)c->m->hp.n_expert;
    sl_status st = h2d(c, L->d_mask, L->h_mask, X, err);
    if (!st && L->dp) st = h2d(c, (void *)L->dp, L->hp, 3 * X * sizeof(void *), err);
    return st;
}

/* Every resident expert of layer il into the region (the first load, or after a reload), the
 * biases, the view. */
static sl_status load_layer(sl_ctx *c, int32_t il, sl_error *err)
{
    sl__hot *h = &c->hot;
    sl__hot_layer *L = &h->L[il];
    const sl_moe_layer *H = &c->m->layers[il].moe;
    const int32_t X = H->n_expert;
    int64_t rows[3], cols[3];
    uint64_t pb[3];
    if (!sl__experts_streamable(c, il) || !sl__expert_shape(H, rows, cols, pb) ||
        memcmp(pb, L->pb, sizeof pb) || L->has_b[0] != (H->gate_b != NULL) ||
        L->has_b[1] != (H->up_b != NULL) || L->has_b[2] != (H->down_b != NULL)) {
        /* a reload changed the experts' types or biases: the layer's region no longer fits
         * them, so the layer leaves the hot set (its experts run on the host alone) */
        for (int32_t e = 0; e < X; e++)
            if (L->slot_of[e] >= 0) unplace(c, L, e);
        if (L->S) { /* every context sees the same change: the shared slots go unused */
            pthread_mutex_lock(&c->m->hot_mu);
            L->S->gone = true;
            pthread_mutex_unlock(&c->m->hot_mu);
        }
        L->S = NULL;
        L->n_cap = L->n_static = 0;
        L->chosen = L->loaded = false;
        return SL_OK;
    }
    sl_status st = SL_OK;
    /* the shared static slots: copied once a version of the weights, by whichever context
     * comes first (queued on the model's stream before any context's later use) */
    if (L->S) {
        sl__hot_shared_layer *S = L->S;
        pthread_mutex_lock(&c->m->hot_mu);
        if (!S->loaded || S->epoch != c->epoch || S->layout != c->res_layout_epoch) {
            for (int32_t j = 0; !st && j < L->n_static; j++)
                if (L->slot_expert[j] >= 0) st = upload_expert(c, il, L->slot_expert[j], err);
            S->loaded = !st;
            S->epoch = c->epoch;
            S->layout = c->res_layout_epoch;
        }
        pthread_mutex_unlock(&c->m->hot_mu);
    }
    for (int32_t j = L->n_static; !st && j < L->n_cap; j++) /* the context's cache */
        if (L->slot_expert[j] >= 0) st = upload_expert(c, il, L->slot_expert[j], err);
    if (st) return st;
    const uint32_t t[3] = {H->type_gate, H->type_up, H->type_down};
    sl_moe_layer *V = &L->view;
    *V = *H;
    V->on_device = NULL;
    V->ff_at = NULL;
    V->gate = L->hp, V->up = L->hp + X, V->down = L->hp + 2 * X;
    V->type_gate = sl_repack_base_type(t[0]);
    V->type_up = sl_repack_base_type(t[1]);
    V->type_down = sl_repack_base_type(t[2]);
    const float *hb[3] = {H->gate_b, H->up_b, H->down_b};
    const float **vb[3] = {&V->gate_b, &V->up_b, &V->down_b};
    for (int p = 0; p < 3 && !st; p++) {
        if (!hb[p]) continue;
        *vb[p] = (const float *)(L->base + L->off[3 + p]);
        st = h2d(c, L->base + L->off[3 + p], hb[p], (uint64_t)X * (uint64_t)rows[p] *
                                                       sizeof(float), err);
    }
    if (!st) st = publish(c, L, err);
    if (st) return st;
    L->dx = (sl__dx_moe){.L = V, .rows = h->sim_rows};
    if (L->dp) L->dx.d_gate = L->dp, L->dx.d_up = L->dp + X, L->dx.d_down = L->dp + 2 * X;
    L->loaded = true;
    return SL_OK;
}

/* The run-time cache after a pass: scores decayed and the pass's counts added, then at most
 * `uploads` of the experts the CPU computed in it go up, highest score first, into a free
 * cache slot or in place of the cache's coldest (lfu: lowest score, only when beaten; lru:
 * least recently routed). */
static sl_status promote(sl_ctx *c, int32_t il, sl_error *err)
{
    sl__hot *h = &c->hot;
    sl__hot_layer *L = &h->L[il];
    const int32_t X = c->m->hp.n_expert;
    for (int32_t e = 0; e < X; e++) {
        L->score[e] = L->score[e] * h->decay + (float)L->recent[e];
        if (L->recent[e]) L->last[e] = h->pass;
    }
    bool any = false;
    sl_status st = SL_OK;
    for (int u = 0; u < h->uploads && !st; u++) {
        int32_t best = -1; /* the CPU's experts of this pass, by score (ties: lower index) */
        for (int32_t e = 0; e < X; e++)
            if (L->recent[e] && L->slot_of[e] < 0 && (best < 0 || L->score[e] > L->score[best]))
                best = e;
        if (best < 0) break;
        int32_t slot = -1, victim = -1;
        for (int32_t j = L->n_static; j < L->n_cap && slot < 0; j++)
            if (L->slot_expert[j] < 0) slot = j;
        for (int32_t j = L->n_static; slot < 0 && j < L->n_cap; j++) {
            const int32_t v = L->slot_expert[j];
            /* lru: never one the last pass routed (those uploaded just now among them) */
            if (v >= 0 && (!h->lru || L->last[v] < h->pass) &&
                (victim < 0 || (h->lru ? L->last[v] < L->last[victim]
                                       : L->score[v] < L->score[victim])))
                victim = v;
        }
        L->recent[best] = 0; /* considered: not again this pass */
        if (slot < 0 && (victim < 0 || (!h->lru && L->score[victim] >= L->score[best])))
            continue;
        if (slot < 0) {
            slot = L->slot_of[victim];
            unplace(c, L, victim);
        }
        place(c, L, best, slot);
        st = upload_expert(c, il, best, err);
        any = true;
    }
    memset(L->recent, 0, (size_t)X * sizeof *L->recent);
    if (!st && any) st = publish(c, L, err);
    /* the host's set is ahead of the device's: the layer runs on the host until a reload */
    if (st) L->loaded = false;
    return st;
}

sl_status sl__hot_update(sl_ctx *c, sl_error *err)
{
    sl__hot *h = &c->hot;
    if (!h->on) return SL_OK;
    h->pass++;
    bool path = false, queued = false;
    sl_status st = SL_OK;
    /* the warm-up ends for every layer at once, when one has seen warm assignments: the last
     * layer computes only the rows with logits, so its own count lags the others' */
    bool warm = false;
    for (int32_t il = 0; il < c->m->hp.n_layer; il++)
        warm |= h->L[il].n_cap && h->L[il].routed >= (uint64_t)(h->warm > 0 ? h->warm : 1);
    for (int32_t il = 0; !st && il < c->m->hp.n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        if (!L->n_cap) continue;
        const bool was = on_path(h, L);
        /* no static set (a cache alone): nothing to wait for */
        if (!L->chosen && (!L->n_static || warm || shared_chosen(c, L))) choose(c, L);
        if (L->chosen && !L->loaded) {
            st = load_layer(c, il, err);
            queued = true;
        }
        path |= was != on_path(h, L);
    }
    if (queued) { /* the copies read host weights a reload or an eviction may free next */
        sl_error e2;
        const sl_status ss = sl_device_stream_sync(c->m->dev, c->m->stream, st ? &e2 : err);
        if (!st) st = ss;
    }
    /* a captured pass froze each layer's path (the masks and pointers it reads on the device) */
    if (path) sl__forward_graph_drop(c);
    return st ? st : sl__hot_validate(c, err);
}

sl_status sl__hot_prepare(sl_ctx *c, sl_error *err)
{
    sl__hot *h = &c->hot;
    if (!h->on || !h->uploads) return SL_OK;
    sl_status st = SL_OK;
    bool path = false;
    for (int32_t il = 0; !st && il < c->m->hp.n_layer; il++) {
        sl__hot_layer *L = &h->L[il];
        if (!L->n_cap || !L->loaded) continue;
        st = promote(c, il, err);
        path |= !L->loaded;
    }
    if (path) sl__forward_graph_drop(c);
    return st ? st : sl__hot_validate(c, err);
}

sl_status sl__hot_host_rows(sl_ctx *c, int32_t il, const int32_t *idx, int64_t n,
                            const float *x, sl_error *err)
{
    sl__hot *h = &c->hot;
    const sl__hot_layer *L = &h->L[il];
    const int32_t K = c->m->hp.n_expert_used;
    uint64_t dev = 0;
    for (int64_t s = 0; s < n * K; s++)
        dev += idx[s] >= 0 && idx[s] < c->m->hp.n_expert && L->h_mask[idx[s]];
    atomic_fetch_add_explicit(&h->calls_dev, dev, memory_order_relaxed);
    return sl_moe_exec_slots(c->moe, &c->m->layers[il].moe, L->h_mask, false, idx, n, K, x,
                             h->h_rows, h->assign, err);
}

void sl__hot_invalidate(sl_ctx *c)
{
    sl__hot *h = &c->hot;
    for (int32_t il = 0; h->on && il < c->m->hp.n_layer; il++) h->L[il].loaded = false;
}

const void *sl__hot_device_expert(const sl_ctx *c, int32_t il, int32_t e, int p)
{
    const sl__hot *h = &c->hot;
    if (!h->on || il < 0 || il >= c->m->hp.n_layer || p < 0 || p > 2) return NULL;
    const sl__hot_layer *L = &h->L[il];
    if (!L->n_cap || !L->loaded || e < 0 || e >= c->m->hp.n_expert || L->slot_of[e] < 0)
        return NULL;
    return slot_ptr(L, p, L->slot_of[e]);
}

void sl__hot_resident(const sl_ctx *c, uint64_t *experts, uint64_t *bytes)
{
    const sl__hot *h = &c->hot;
    *experts = *bytes = 0;
    for (int32_t il = 0; h->on && il < c->m->hp.n_layer; il++) {
        const sl__hot_layer *L = &h->L[il];
        if (!L->loaded) continue;
        *experts += (uint64_t)L->n_hot;
        *bytes += (uint64_t)L->n_hot * (L->pb[0] + L->pb[1] + L->pb[2]);
    }
}
