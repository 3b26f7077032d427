/* scheduler/policy/gpuidx.c: PowerInfer's .gpuidx through the project's GGUF reader and writer.
 *
 * Reading is strict where PowerInfer's loader is silent: it sums gpu_idx for the hot count and
 * copies the rows gpu_bucket names, trusting that both describe one set. A bucket that
 * disagrees with its mask, or names a row twice or past the end, would put the wrong rows on
 * the GPU without a word; here each such file is refused with the layer and entry at fault.
 * Checks run in the order a reader meets the data (KV, layer count, then layer by layer, mask
 * before bucket, then the tensors' order), so one malformed file gives one stable message.
 *
 * Metadata is read leniently where nothing depends on it: general.architecture and
 * <arch>.block_count are optional (the tensors decide the layers when the count is absent),
 * split.vram_capacity is optional here although PowerInfer requires it; the writer always
 * stores all three. */
#include "scheduler/policy/gpuidx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "scheduler/policy/gpuidx.c reads I32 tensor data as host integers: little-endian hosts only"
#endif

static const char k_arch[] = "generic.gpu_index";
static const char k_key_arch[] = "general.architecture";
static const char k_key_vram[] = "split.vram_capacity";
static const char k_key_experts[] = "generic.gpu_index.expert_count"; /* MoE (gpuidx.h) */

enum { NAME_BYTES = 64 /* GGUF tensor names are at most 63 bytes */ };

/* ---- the structure ------------------------------------------------------------------------ */

sl_status sl_gpuidx_init(sl_gpuidx *out, uint32_t n_layer, const uint32_t *n_neuron,
                         sl_error *err)
{
    *out = (sl_gpuidx){0};
    if (n_layer == 0) return SL_OK;
    if (!n_neuron) return sl_error_set(err, SL_ERR_INVALID, "gpuidx: n_neuron is NULL");
    out->layers = calloc(n_layer, sizeof *out->layers);
    if (!out->layers) return sl_error_set(err, SL_ERR_NOMEM, "gpuidx: %u layers", n_layer);
    out->n_layer = n_layer;
    for (uint32_t l = 0; l < n_layer; l++) {
        if (n_neuron[l] > INT32_MAX) {
            sl_gpuidx_free(out);
            return sl_error_set(err, SL_ERR_RANGE,
                                "gpuidx: layer %u has %" PRIu32 " neurons, more than an I32 "
                                "index can name", l, n_neuron[l]);
        }
        out->layers[l].n_neuron = n_neuron[l];
        if (n_neuron[l] == 0) continue;
        out->layers[l].hot = calloc(n_neuron[l], 1);
        if (!out->layers[l].hot) {
            sl_gpuidx_free(out);
            return sl_error_set(err, SL_ERR_NOMEM, "gpuidx: layer %u mask", l);
        }
    }
    return SL_OK;
}

sl_status sl_gpuidx_set_layer(sl_gpuidx *idx, uint32_t layer, const uint32_t *hot_list,
                              uint32_t n_hot, sl_error *err)
{
    if (layer >= idx->n_layer)
        return sl_error_set(err, SL_ERR_INVALID, "gpuidx: layer %u of %u", layer, idx->n_layer);
    sl_gpuidx_layer *L = &idx->layers[layer];
    for (uint32_t k = 0; k < n_hot; k++) {
        if (hot_list[k] >= L->n_neuron)
            return sl_error_set(err, SL_ERR_INVALID,
                                "gpuidx: layer %u: hot neuron %" PRIu32 " (entry %u) out of "
                                "range, the layer has %" PRIu32, layer, hot_list[k], k,
                                L->n_neuron);
        if (k && hot_list[k] <= hot_list[k - 1])
            return sl_error_set(err, SL_ERR_INVALID,
                                "gpuidx: layer %u: hot list entry %u = %" PRIu32 " after %" PRIu32
                                ": must be ascending and distinct", layer, k, hot_list[k],
                                hot_list[k - 1]);
    }
    uint32_t *list = NULL;
    if (n_hot) {
        list = malloc((size_t)n_hot * sizeof *list);
        if (!list) return sl_error_set(err, SL_ERR_NOMEM, "gpuidx: layer %u hot list", layer);
        memcpy(list, hot_list, (size_t)n_hot * sizeof *list);
    }
    free(L->hot_list);
    L->hot_list = list;
    L->n_hot = n_hot;
    if (L->n_neuron) memset(L->hot, 0, L->n_neuron);
    for (uint32_t k = 0; k < n_hot; k++) L->hot[list[k]] = 1;
    return SL_OK;
}

bool sl_gpuidx_layer_is_split(const sl_gpuidx_layer *l)
{
    return l->n_hot > 0 && l->n_hot < l->n_neuron;
}

sl_status sl_gpuidx_validate(const sl_gpuidx *idx, sl_error *err)
{
    if ((idx->n_layer == 0) != (idx->layers == NULL))
        return sl_error_set(err, SL_ERR_INVALID, "gpuidx: n_layer %u but layers %s",
                            idx->n_layer, idx->layers ? "set" : "NULL");
    for (uint32_t l = 0; l < idx->n_layer; l++) {
        const sl_gpuidx_layer *L = &idx->layers[l];
        if (idx->n_expert > 1 && L->n_neuron % idx->n_expert)
            return sl_error_set(err, SL_ERR_INVALID, "gpuidx: layer %u: %" PRIu32 " neurons "
                                "are not %" PRIu32 " experts' worth", l, L->n_neuron,
                                idx->n_expert);
        if (L->n_neuron > INT32_MAX || L->n_hot > L->n_neuron)
            return sl_error_set(err, SL_ERR_INVALID, "gpuidx: layer %u: n_hot %" PRIu32
                                " of n_neuron %" PRIu32, l, L->n_hot, L->n_neuron);
        if ((L->n_neuron && !L->hot) || (L->n_hot && !L->hot_list))
            return sl_error_set(err, SL_ERR_INVALID, "gpuidx: layer %u: missing array", l);
        uint32_t k = 0;
        for (uint32_t i = 0; i < L->n_neuron; i++) {
            if (L->hot[i] > 1)
                return sl_error_set(err, SL_ERR_INVALID, "gpuidx: layer %u: hot[%u] = %u", l, i,
                                    L->hot[i]);
            if (!L->hot[i]) continue;
            if (k >= L->n_hot || L->hot_list[k] != i)
                return sl_error_set(err, SL_ERR_INVALID,
                                    "gpuidx: layer %u: mask and hot list disagree at neuron %u",
                                    l, i);
            k++;
        }
        if (k != L->n_hot)
            return sl_error_set(err, SL_ERR_INVALID,
                                "gpuidx: layer %u: mask has %u hot, hot list %" PRIu32, l, k,
                                L->n_hot);
    }
    return SL_OK;
}

void sl_gpuidx_free(sl_gpuidx *idx)
{
    if (!idx) return;
    for (uint32_t l = 0; l < idx->n_layer && idx->layers; l++) {
        free(idx->layers[l].hot);
        free(idx->layers[l].hot_list);
    }
    free(idx->layers);
    *idx = (sl_gpuidx){0};
}

/* ---- reading ------------------------------------------------------------------------------ */

/* What one read needs to name its faults. */
typedef struct rd {
    const sl_gguf *g;
    const char *file;
    sl_error *err;
    uint32_t n_expert;  /* > 1: a MoE index, entries are named by expert and neuron too */
    uint32_t n_ff;      /* the current layer's neurons per expert (MoE) */
    char where[64];     /* " (expert e, neuron j)" of the last entry named, or "" */
} rd;

/* " (expert e, neuron j)" for flat entry i of a MoE layer, "" for a dense one. */
static const char *at(rd *r, uint32_t i)
{
    r->where[0] = 0;
    if (r->n_expert > 1 && r->n_ff)
        snprintf(r->where, sizeof r->where, " (expert %" PRIu32 ", neuron %" PRIu32 ")",
                 i / r->n_ff, i % r->n_ff);
    return r->where;
}

static int32_t i32_at(const void *data, uint64_t i)
{
    int32_t v;
    memcpy(&v, (const uint8_t *)data + 4 * i, 4); /* views may be unaligned (memory images) */
    return v;
}

/* A one-dimensional I32 tensor (trailing dimensions of 1 allowed, as gguf-py may pad them). */
static sl_status check_vector(const rd *r, uint32_t layer, const sl_gguf_tensor *t,
                              uint32_t *len)
{
    if (t->type != SL_GGML_I32) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(t->type);
        return sl_error_set(r->err, SL_ERR_TYPE,
                            "%s: layer %u: wrong type: %s is %s (code %" PRIu32 "), expected I32",
                            r->file, layer, t->name, ti ? ti->name : "unknown", t->type);
    }
    for (uint32_t d = 1; d < t->n_dims; d++) {
        if (t->ne[d] != 1)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: %s has %" PRIu32 " dimensions (ne[%u] = %" PRId64
                                "), expected one", r->file, layer, t->name, t->n_dims, d,
                                t->ne[d]);
    }
    if (t->ne[0] > INT32_MAX)
        return sl_error_set(r->err, SL_ERR_FORMAT,
                            "%s: layer %u: %s has %" PRId64 " entries, past what I32 indices "
                            "can name", r->file, layer, t->name, t->ne[0]);
    *len = (uint32_t)t->ne[0];
    return SL_OK;
}

/* Layer count from the metadata: <general.architecture>.block_count if both exist. */
static sl_status block_count(const rd *r, bool *has, uint64_t *n)
{
    *has = false;
    const sl_gguf_value *arch = sl_gguf_find(r->g, k_key_arch);
    if (!arch) return SL_OK;
    if (arch->type != SL_GGUF_STR)
        return sl_error_set(r->err, SL_ERR_TYPE, "%s: wrong type: %s is %s, expected string",
                            r->file, k_key_arch, sl_gguf_vtype_name(arch->type));
    char key[256];
    int w = snprintf(key, sizeof key, "%s.block_count", arch->v.str.ptr);
    if (w < 0 || (size_t)w >= sizeof key) return SL_OK; /* no key can be that long */
    const sl_gguf_value *v = sl_gguf_find(r->g, key);
    if (!v) return SL_OK;
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        *n = v->v.u64;
        break;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        if (v->v.i64 < 0)
            return sl_error_set(r->err, SL_ERR_FORMAT, "%s: %s = %" PRId64 " is negative",
                                r->file, key, v->v.i64);
        *n = (uint64_t)v->v.i64;
        break;
    default:
        return sl_error_set(r->err, SL_ERR_TYPE, "%s: wrong type: %s is %s, expected u32",
                            r->file, key, sl_gguf_vtype_name(v->type));
    }
    *has = true;
    return SL_OK;
}

/* Fills L from layer `l`'s two tensors after checking every entry. */
static sl_status read_layer(rd *r, uint32_t l, const sl_gguf_tensor *ti,
                            const sl_gguf_tensor *tb, uint32_t expect_n, sl_gpuidx_layer *L)
{
    uint32_t n, n_b;
    sl_status s;
    if ((s = check_vector(r, l, ti, &n)) || (s = check_vector(r, l, tb, &n_b))) return s;
    if (expect_n && n != expect_n)
        return sl_error_set(r->err, SL_ERR_RANGE,
                            "%s: layer %u: wrong length: %s has %" PRIu32 " entries, the model's "
                            "FFN has %" PRIu32 " neurons", r->file, l, ti->name, n, expect_n);
    if (r->n_expert > 1 && n % r->n_expert)
        return sl_error_set(r->err, SL_ERR_FORMAT,
                            "%s: layer %u: %s has %" PRIu32 " entries, not a multiple of "
                            "%s = %" PRIu32, r->file, l, ti->name, n, k_key_experts,
                            r->n_expert);
    r->n_ff = r->n_expert > 1 ? n / r->n_expert : 0;
    const void *di = n ? sl_gguf_tensor_view(r->g, ti) : NULL;
    const void *db = n_b ? sl_gguf_tensor_view(r->g, tb) : NULL;
    if ((n && !di) || (n_b && !db))
        return sl_error_set(r->err, SL_ERR_IO, "%s: layer %u: tensor data not mapped", r->file,
                            l);
    L->n_neuron = n;
    if (n && !(L->hot = calloc(n, 1)))
        return sl_error_set(r->err, SL_ERR_NOMEM, "%s: layer %u mask", r->file, l);
    uint32_t n_hot = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t v = i32_at(di, i);
        if (v != 0 && v != 1)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: %s[%" PRIu32 "] = %" PRId32 "%s, expected 0 or 1",
                                r->file, l, ti->name, i, v, at(r, i));
        L->hot[i] = (uint8_t)v;
        n_hot += (uint32_t)v;
    }
    if (n_b && !(L->hot_list = malloc((size_t)n_b * sizeof *L->hot_list)))
        return sl_error_set(r->err, SL_ERR_NOMEM, "%s: layer %u bucket", r->file, l);
    for (uint32_t k = 0; k < n_b; k++) {
        int32_t v = i32_at(db, k);
        if (v < 0 || (uint32_t)v >= n)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: index out of range: %s[%" PRIu32 "] = %" PRId32
                                ", the layer has %" PRIu32 " neurons", r->file, l, tb->name, k,
                                v, n);
        int32_t prev = k ? (int32_t)L->hot_list[k - 1] : -1;
        if (v == prev)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: duplicate: %s[%" PRIu32 "] = %" PRId32 "%s "
                                "repeats entry %" PRIu32, r->file, l, tb->name, k, v,
                                at(r, (uint32_t)v), k - 1);
        if (v < prev)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: unsorted bucket: %s[%" PRIu32 "] = %" PRId32
                                "%s after %" PRId32 " (must ascend)", r->file, l, tb->name, k,
                                v, at(r, (uint32_t)v), prev);
        if (!L->hot[v])
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %u: gpu_idx and gpu_bucket disagree: %s[%" PRIu32
                                "] = %" PRId32 "%s but %s[%" PRId32 "] = 0", r->file, l,
                                tb->name, k, v, at(r, (uint32_t)v), ti->name, v);
        L->hot_list[k] = (uint32_t)v;
    }
    if (n_b != n_hot) {
        /* Every bucket entry is hot and they ascend, so some hot neuron is missing: name it. */
        uint32_t i = 0, k = 0;
        for (; i < n; i++) {
            if (!L->hot[i]) continue;
            if (k < n_b && L->hot_list[k] == i) {
                k++;
                continue;
            }
            break;
        }
        return sl_error_set(r->err, SL_ERR_FORMAT,
                            "%s: layer %u: gpu_idx and gpu_bucket disagree: %s[%" PRIu32 "] = 1"
                            "%s but %s omits %" PRIu32 " (%" PRIu32 " hot, %" PRIu32 " listed)",
                            r->file, l, ti->name, i, at(r, i), tb->name, i, n_hot, n_b);
    }
    L->n_hot = n_b;
    return SL_OK;
}

/* generic.gpu_index.expert_count: absent (dense) or a u32 >= 2. */
static sl_status expert_count(rd *r)
{
    r->n_expert = 0;
    const sl_gguf_value *v = sl_gguf_find(r->g, k_key_experts);
    if (!v) return SL_OK;
    if (v->type != SL_GGUF_U32)
        return sl_error_set(r->err, SL_ERR_TYPE, "%s: wrong type: %s is %s, expected u32",
                            r->file, k_key_experts, sl_gguf_vtype_name(v->type));
    if (v->v.u64 < 2 || v->v.u64 > INT32_MAX)
        return sl_error_set(r->err, SL_ERR_FORMAT, "%s: %s = %" PRIu64 ", expected >= 2 (a "
                            "dense index has no such key)", r->file, k_key_experts, v->v.u64);
    r->n_expert = (uint32_t)v->v.u64;
    return SL_OK;
}

static sl_status read_index(rd *r, uint32_t expect_n_layer, const uint32_t *expect_n_neuron,
                            sl_gpuidx *out)
{
    sl_status s;
    if (!expect_n_layer) expect_n_neuron = NULL; /* its length is the model's layer count */
    const sl_gguf_value *vram = sl_gguf_find(r->g, k_key_vram);
    if (vram && vram->type != SL_GGUF_U64)
        return sl_error_set(r->err, SL_ERR_TYPE, "%s: wrong type: %s is %s, expected u64",
                            r->file, k_key_vram, sl_gguf_vtype_name(vram->type));
    bool has_count;
    uint64_t n_layer = 0;
    if ((s = block_count(r, &has_count, &n_layer)) || (s = expert_count(r))) return s;
    out->n_expert = r->n_expert;
    size_t n_t = sl_gguf_tensor_count(r->g);
    if (!has_count) n_layer = (n_t + 1) / 2;
    if (expect_n_layer && n_layer != expect_n_layer)
        return sl_error_set(r->err, SL_ERR_RANGE,
                            "%s: layer count mismatch: the index has %" PRIu64 " layers (%s), "
                            "the model has %" PRIu32, r->file, n_layer,
                            has_count ? "block_count" : "2 tensors per layer", expect_n_layer);
    if (n_layer > UINT32_MAX / 2)
        return sl_error_set(r->err, SL_ERR_FORMAT, "%s: block_count %" PRIu64 " is too large",
                            r->file, n_layer);
    /* Every layer's tensors before any allocation: a huge block_count fails here cheaply. */
    for (uint32_t l = 0; l < n_layer; l++) {
        char name[NAME_BYTES];
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_idx", l);
        if (!sl_gguf_tensor_find(r->g, name))
            return sl_error_set(r->err, SL_ERR_FORMAT, "%s: layer %u: missing tensor %s",
                                r->file, l, name);
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_bucket", l);
        if (!sl_gguf_tensor_find(r->g, name))
            return sl_error_set(r->err, SL_ERR_FORMAT, "%s: layer %u: missing tensor %s",
                                r->file, l, name);
    }
    out->vram_capacity_bytes = vram ? vram->v.u64 : 0;
    if (n_layer && !(out->layers = calloc(n_layer, sizeof *out->layers)))
        return sl_error_set(r->err, SL_ERR_NOMEM, "%s: %" PRIu64 " layers", r->file, n_layer);
    out->n_layer = (uint32_t)n_layer;
    for (uint32_t l = 0; l < n_layer; l++) {
        char ni[NAME_BYTES], nb[NAME_BYTES];
        snprintf(ni, sizeof ni, "blk.%" PRIu32 ".gpu_idx", l);
        snprintf(nb, sizeof nb, "blk.%" PRIu32 ".gpu_bucket", l);
        uint32_t want = expect_n_neuron ? expect_n_neuron[l] : 0;
        s = read_layer(r, l, sl_gguf_tensor_find(r->g, ni), sl_gguf_tensor_find(r->g, nb), want,
                       &out->layers[l]);
        if (s) return s;
    }
    /* PowerInfer's loader reads tensor 2N and 2N+1 as layer N's: names must sit there. */
    for (size_t p = 0; p < n_t; p++) {
        const sl_gguf_tensor *t = sl_gguf_tensor_at(r->g, p);
        if (p >= 2 * (size_t)n_layer)
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: unexpected tensor %s (tensor %zu): an index of %" PRIu64
                                " layers holds %" PRIu64 " tensors", r->file, t->name, p,
                                n_layer, 2 * n_layer);
        char want[NAME_BYTES];
        snprintf(want, sizeof want, "blk.%zu.%s", p / 2, p % 2 ? "gpu_bucket" : "gpu_idx");
        if (strcmp(t->name, want))
            return sl_error_set(r->err, SL_ERR_FORMAT,
                                "%s: layer %zu: tensor %zu is %s where %s belongs (PowerInfer "
                                "reads the tensors by position)", r->file, p / 2, p, t->name,
                                want);
    }
    return sl_gpuidx_validate(out, r->err);
}

static void quiet(void *user, const char *msg)
{
    (void)user;
    (void)msg;
}

static sl_status read_from(sl_gguf *g, const char *file, uint32_t expect_n_layer,
                           const uint32_t *expect_n_neuron, sl_gpuidx *out, sl_error *err)
{
    rd r = {.g = g, .file = file, .err = err};
    sl_status s = read_index(&r, expect_n_layer, expect_n_neuron, out);
    if (s) sl_gpuidx_free(out);
    sl_gguf_close(g);
    return s;
}

sl_status sl_gpuidx_read(const char *path, uint32_t expect_n_layer,
                         const uint32_t *expect_n_neuron, sl_gpuidx *out, sl_error *err)
{
    *out = (sl_gpuidx){0};
    sl_gguf_options o = {.no_shards = true, .notice = quiet};
    sl_gguf *g = NULL;
    sl_status s = sl_gguf_open(path, &o, &g, err);
    if (s) return s;
    return read_from(g, path, expect_n_layer, expect_n_neuron, out, err);
}

sl_status sl_gpuidx_read_memory(const void *buf, size_t len, const char *name,
                                uint32_t expect_n_layer, const uint32_t *expect_n_neuron,
                                sl_gpuidx *out, sl_error *err)
{
    *out = (sl_gpuidx){0};
    sl_gguf *g = NULL;
    sl_status s = sl_gguf_open_memory(buf, len, name, &g, err);
    if (s) return s;
    return read_from(g, name, expect_n_layer, expect_n_neuron, out, err);
}

/* ---- writing ------------------------------------------------------------------------------ */

static sl_status write_tensors(sl_gguf_writer *w, const sl_gpuidx *idx, sl_error *err)
{
    sl_status s;
    uint32_t widest = 0;
    for (uint32_t l = 0; l < idx->n_layer; l++) {
        const sl_gpuidx_layer *L = &idx->layers[l];
        char name[NAME_BYTES];
        int64_t ne;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_idx", l);
        ne = L->n_neuron;
        if ((s = sl_gguf_writer_add_tensor(w, name, SL_GGML_I32, 1, &ne, err))) return s;
        snprintf(name, sizeof name, "blk.%" PRIu32 ".gpu_bucket", l);
        ne = L->n_hot;
        if ((s = sl_gguf_writer_add_tensor(w, name, SL_GGML_I32, 1, &ne, err))) return s;
        if (L->n_neuron > widest) widest = L->n_neuron;
    }
    int32_t *buf = malloc(((size_t)widest + 1) * sizeof *buf);
    if (!buf) return sl_error_set(err, SL_ERR_NOMEM, "gpuidx: write buffer");
    s = SL_OK;
    for (uint32_t l = 0; l < idx->n_layer && !s; l++) {
        const sl_gpuidx_layer *L = &idx->layers[l];
        for (uint32_t i = 0; i < L->n_neuron; i++) buf[i] = L->hot[i];
        s = sl_gguf_writer_write(w, buf, (uint64_t)L->n_neuron * 4, err);
        for (uint32_t k = 0; k < L->n_hot && !s; k++) buf[k] = (int32_t)L->hot_list[k];
        if (!s) s = sl_gguf_writer_write(w, buf, (uint64_t)L->n_hot * 4, err);
    }
    free(buf);
    return s;
}

/* PowerInfer's tool writes a GGUF and then overwrites the magic; so do we (the GGUF writer
 * knows one magic only). The version that follows is already 3. */
static sl_status stamp_magic(const char *path, sl_error *err)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return sl_error_set(err, SL_ERR_IO, "%s: reopening to write the magic failed", path);
    bool ok = fwrite("PWRI", 1, 4, f) == 4;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        remove(path);
        return sl_error_set(err, SL_ERR_IO, "%s: writing the PWRI magic failed", path);
    }
    return SL_OK;
}

sl_status sl_gpuidx_write(const char *path, const sl_gpuidx *idx,
                          const sl_gpuidx_write_options *opt, sl_error *err)
{
    sl_status s = sl_gpuidx_validate(idx, err);
    if (s) return s;
    char key[64];
    snprintf(key, sizeof key, "%s.block_count", k_arch);
    sl_gguf_writer *w = NULL;
    if ((s = sl_gguf_writer_create(path, NULL, &w, err))) return s;
    if (!(s = sl_gguf_writer_set_str(w, k_key_arch, k_arch, err)) &&
        !(s = sl_gguf_writer_set_u32(w, key, idx->n_layer, err)) &&
        !(s = sl_gguf_writer_set_u64(w, k_key_vram, idx->vram_capacity_bytes, err)) &&
        !(idx->n_expert > 1 && (s = sl_gguf_writer_set_u32(w, k_key_experts, idx->n_expert,
                                                            err))) &&
        !(s = write_tensors(w, idx, err)))
        s = sl_gguf_writer_finish(w, err);
    sl_gguf_writer_destroy(w);
    if (s) return s;
    if (opt && opt->gguf_magic) return SL_OK;
    return stamp_magic(path, err);
}
