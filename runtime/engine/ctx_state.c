/* runtime/engine/ctx_state.c: a context's KV cache as bytes and back (sl_ctx_state_get / _set,
 * llama.cpp's llama_state_seq_get_data / _set_data), what a server saves a slot with.
 *
 * The blob: a header of little-endian u32 words — magic "SLKV", version, KV type (0 F32, 1
 * F16), n_layer, n_kv (KV heads), head_dim, k_only (MLA: one latent row per position), n_past
 * — then per layer the K rows [0, n_past), then (unless k_only) the V rows: each position's
 * n_kv * head_dim elements, the layout kv.c and the device KV slots share, so a layer's rows
 * are one contiguous span wherever its cache lives. A layer run on the device has its cache
 * there (ctx_dev.c kv_slot): its rows are copied from / to the device. */
#include <string.h>

#include "runtime/engine/ctx.h"

enum { STATE_WORDS = 8, STATE_VERSION = 1 };
static const uint32_t k_magic = 0x564b4c53u; /* "SLKV" */

/* Layer il's K (or V) cache base and whether it is in device memory (forward.c kv_base's
 * rule: a device layer's cache is its device KV slot). */
static void *layer_base(const sl_ctx *c, int32_t il, bool v, bool *dev)
{
    *dev = c->dev.dx && c->layer_dev[il] && c->kv_slot[il] >= 0;
    if (!*dev) return sl__kv_layer(&c->kv, v, il);
    const size_t per = (size_t)c->kv.n_ctx * (size_t)c->kv.n_kv * (size_t)c->kv.head_dim *
                       c->kv.elt;
    return (uint8_t *)(v && !c->kv.k_only ? c->dev.kv_v : c->dev.kv_k) +
           (size_t)c->kv_slot[il] * per;
}

static size_t row_bytes(const sl__kv *kv)
{
    return (size_t)kv->n_kv * (size_t)kv->head_dim * kv->elt;
}

static size_t state_bytes(const sl__kv *kv, int32_t n_past)
{
    return STATE_WORDS * sizeof(uint32_t) + (size_t)kv->n_layer * (kv->k_only ? 1u : 2u) *
                                                (size_t)n_past * row_bytes(kv);
}

/* Copies layer il's rows [0, n_past) between its cache and buf (to_buf: out of the cache). */
static sl_status move_rows(sl_ctx *c, int32_t il, bool v, uint8_t *buf, size_t bytes,
                           bool to_buf, sl_error *err)
{
    bool dev;
    uint8_t *base = layer_base(c, il, v, &dev);
    if (!dev) {
        if (to_buf) memcpy(buf, base, bytes);
        else memcpy(base, buf, bytes);
        return SL_OK;
    }
    sl_status st = sl_device_copy(c->m->dev, c->m->stream, to_buf ? (void *)buf : base,
                                  to_buf ? base : buf, bytes,
                                  to_buf ? SL_COPY_D2H : SL_COPY_H2D, err);
    return st ? st : sl_device_stream_sync(c->m->dev, c->m->stream, err);
}

/* The model resident and busy around the copies (a runtime's model; nothing otherwise). */
static sl_status bracket_begin(sl_ctx *c, sl_error *err)
{
    uint64_t a, b;
    return c->m->serving ? c->m->serving->eval_begin(c, &a, &b, err) : SL_OK;
}

static void bracket_end(sl_ctx *c)
{
    if (c->m->serving) c->m->serving->eval_end(c);
}

static sl_status copy_all(sl_ctx *c, uint8_t *p, int32_t n_past, bool to_buf, sl_error *err)
{
    const size_t bytes = (size_t)n_past * row_bytes(&c->kv);
    sl_status st = bracket_begin(c, err);
    if (st) return st;
    for (int32_t il = 0; !st && il < c->kv.n_layer; il++)
        for (int v = 0; !st && v < (c->kv.k_only ? 1 : 2); v++) {
            st = move_rows(c, il, v, p, bytes, to_buf, err);
            p += bytes;
        }
    bracket_end(c);
    return st;
}

sl_status sl_ctx_state_get(sl_ctx *c, void *buf, size_t cap, size_t *n_out, sl_error *err)
{
    if (!c || !n_out) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_state_get: NULL argument");
    if (c->m->tr->recurrent) /* the state holds the recurrent layers' state too: not saved */
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "sl_ctx_state_get: %s's recurrent layers keep a state "
                            "besides the KV cache, which a saved state does not hold",
                            sl_arch_name(c->m->arch));
    const size_t need = state_bytes(&c->kv, c->n_past);
    *n_out = need;
    if (!buf) return SL_OK;
    if (cap < need)
        return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_state_get: %zu bytes given, the state "
                            "of %d positions takes %zu", cap, c->n_past, need);
    const uint32_t h[STATE_WORDS] = {k_magic, STATE_VERSION, c->kv.type == SL_KV_F16,
                                     (uint32_t)c->kv.n_layer, (uint32_t)c->kv.n_kv,
                                     (uint32_t)c->kv.head_dim, c->kv.k_only,
                                     (uint32_t)c->n_past};
    memcpy(buf, h, sizeof h);
    return copy_all(c, (uint8_t *)buf + sizeof h, c->n_past, true, err);
}

sl_status sl_ctx_state_set(sl_ctx *c, const void *buf, size_t n, sl_error *err)
{
    if (!c || !buf) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_state_set: NULL argument");
    if (c->m->tr->recurrent) /* the state holds the recurrent layers' state too: not saved */
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "sl_ctx_state_set: %s's recurrent layers keep a state "
                            "besides the KV cache, which a saved state does not hold",
                            sl_arch_name(c->m->arch));
    uint32_t h[STATE_WORDS];
    if (n < sizeof h)
        return sl_error_set(err, SL_ERR_INVALID, "KV state: %zu bytes, shorter than its "
                            "header (%zu)", n, sizeof h);
    memcpy(h, buf, sizeof h);
    if (h[0] != k_magic || h[1] != STATE_VERSION)
        return sl_error_set(err, SL_ERR_INVALID, "KV state: not a Sluice KV state of version %d "
                            "(magic %08x, version %u)", STATE_VERSION, h[0], h[1]);
    const sl__kv *kv = &c->kv;
    static const char *const types[] = {"F32", "F16"};
    if (h[2] != (kv->type == SL_KV_F16))
        return sl_error_set(err, SL_ERR_INVALID, "KV state: KV type %s, this context's is %s "
                            "(-ctk/-ctv)", h[2] < 2 ? types[h[2]] : "?",
                            types[kv->type == SL_KV_F16]);
    if (h[3] != (uint32_t)kv->n_layer || h[4] != (uint32_t)kv->n_kv ||
        h[5] != (uint32_t)kv->head_dim || h[6] != (uint32_t)kv->k_only)
        return sl_error_set(err, SL_ERR_INVALID, "KV state: layout of another model (%u layers, "
                            "%u KV heads of %u, k_only %u; this model's: %d, %d of %d, %d)", h[3],
                            h[4], h[5], h[6], kv->n_layer, kv->n_kv, kv->head_dim, kv->k_only);
    if (h[7] > (uint32_t)kv->n_ctx)
        return sl_error_set(err, SL_ERR_RANGE, "KV state: %u positions, more than the context's "
                            "n_ctx %d", h[7], kv->n_ctx);
    const int32_t n_past = (int32_t)h[7];
    if (n != state_bytes(kv, n_past))
        return sl_error_set(err, SL_ERR_INVALID, "KV state: %zu bytes, %u positions take %zu",
                            n, h[7], state_bytes(kv, n_past));
    c->n_past = 0;
    c->n_logits = c->n_hidden = 0; /* the last eval's rows do not belong to this cache */
    const sl_status st = copy_all(c, (uint8_t *)(uintptr_t)buf + sizeof h, n_past, false, err);
    if (!st) c->n_past = n_past;
    return st;
}
