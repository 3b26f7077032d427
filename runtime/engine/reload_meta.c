/* runtime/engine/reload_meta.c: the file-level checks of a live reload (reload.c) — whether a
 * rewritten file keeps the metadata the model was opened with, and whether it brings a tensor
 * the model's files lacked. Either refuses the whole file (all or nothing). */
#include "runtime/engine/reload_meta.h"

#include <stdio.h>
#include <string.h>

static bool value_equal(const sl_gguf_value *a, const sl_gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case SL_GGUF_STR:
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case SL_GGUF_F32: return !memcmp(&a->v.f32, &b->v.f32, sizeof a->v.f32);
    case SL_GGUF_F64: return !memcmp(&a->v.f64, &b->v.f64, sizeof a->v.f64);
    case SL_GGUF_BOOL: return a->v.b == b->v.b;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        return a->v.i64 == b->v.i64;
    case SL_GGUF_ARR:
        if (a->v.arr.elem != b->v.arr.elem || a->v.arr.n != b->v.arr.n) return false;
        if (a->v.arr.elem == SL_GGUF_STR) {
            for (uint64_t i = 0; i < a->v.arr.n; i++)
                if (a->v.arr.strs[i].len != b->v.arr.strs[i].len ||
                    memcmp(a->v.arr.strs[i].ptr, b->v.arr.strs[i].ptr, a->v.arr.strs[i].len))
                    return false;
            return true;
        }
        if (a->v.arr.elem == SL_GGUF_ARR) {
            for (uint64_t i = 0; i < a->v.arr.n; i++)
                if (!value_equal(&a->v.arr.items[i], &b->v.arr.items[i])) return false;
            return true;
        }
        return !memcmp(a->v.arr.raw, b->v.arr.raw,
                       (size_t)a->v.arr.n * sl_gguf_vtype_size(a->v.arr.elem));
    default: return a->v.u64 == b->v.u64;
    }
}

static void value_str(const sl_gguf_value *v, char *buf, size_t n)
{
    if (!v) snprintf(buf, n, "absent");
    else if (v->type == SL_GGUF_STR) snprintf(buf, n, "'%.*s'", (int)(v->v.str.len < 40 ? v->v.str.len : 40), v->v.str.ptr);
    else if (v->type == SL_GGUF_F32) snprintf(buf, n, "%g", (double)v->v.f32);
    else if (v->type == SL_GGUF_F64) snprintf(buf, n, "%g", v->v.f64);
    else if (v->type == SL_GGUF_BOOL) snprintf(buf, n, "%s", v->v.b ? "true" : "false");
    else if (v->type == SL_GGUF_ARR) snprintf(buf, n, "an array of %llu %s",
                                             (unsigned long long)v->v.arr.n,
                                             sl_gguf_vtype_name(v->v.arr.elem));
    else if (v->type <= SL_GGUF_I64 && (v->type == SL_GGUF_I8 || v->type == SL_GGUF_I16 ||
                                        v->type == SL_GGUF_I32 || v->type == SL_GGUF_I64))
        snprintf(buf, n, "%lld", (long long)v->v.i64);
    else snprintf(buf, n, "%llu", (unsigned long long)v->v.u64);
}

/* Keys no part of the engine computes with (descriptive general.* keys: name, file_type,
 * quantization_version, ...; quantize.* notes): a change of them is applied (nothing to do). Any
 * other key may be a hyperparameter, the vocabulary or the architecture, which the model read
 * at open into state a reload does not rebuild. */
static bool inert_key(const char *k)
{
    return (!strncmp(k, "general.", 8) && strcmp(k, "general.architecture")) ||
           !strncmp(k, "quantize.", 9);
}

/* Whether the rewritten first shard g keeps every metadata value the model was opened with;
 * why: the first key that differs, with both values. */
bool sl__reload_same_metadata(const sl_model *m, const sl_gguf *g, char *why, size_t n)
{
    const sl_gguf *o = m->gguf;
    for (int pass = 0; pass < 2; pass++) {
        const sl_gguf *x = pass ? g : o, *y = pass ? o : g;
        for (size_t i = 0; i < sl_gguf_kv_count(x); i++) {
            const char *k = sl_gguf_kv_key(x, i);
            if (inert_key(k)) continue;
            const sl_gguf_value *vx = sl_gguf_kv_value(x, i), *vy = sl_gguf_find(y, k);
            if (vy && value_equal(vx, vy)) continue;
            char was[64], now[64];
            value_str(pass ? vy : vx, was, sizeof was);
            value_str(pass ? vx : vy, now, sizeof now);
            snprintf(why, n, "metadata key '%s' changed (%s -> %s): the model read it at open "
                     "and a live reload cannot apply it; reopen the model", k, was, now);
            return false;
        }
    }
    return true;
}

/* A tensor of the rewritten shard that the model's files did not have: a fresh open might
 * bind it (an optional tensor), so the file is not the one the model was built from. */
bool sl__reload_new_tensor(const sl_model *m, const sl_gguf *g, char *why, size_t n)
{
    for (size_t i = 0; i < sl_gguf_tensor_count(g); i++) {
        const char *name = sl_gguf_tensor_at(g, i)->name;
        if (sl_gguf_tensor_find(m->gguf, name)) continue;
        snprintf(why, n, "tensor '%s' is new in the file (the model was built without it); "
                 "reopen the model", name);
        return true;
    }
    return false;
}
