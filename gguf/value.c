/* Metadata value helpers, the parse arena and the name index shared by reader and writer. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_impl.h"

struct sl__arena_block {
    sl__arena_block *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_BLOCK_BYTES = 64 * 1024 };

void *sl__arena_alloc(sl__arena *a, size_t bytes)
{
    size_t need = (bytes + 15) & ~(size_t)15;
    if (need < bytes) return NULL;
    sl__arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > ARENA_BLOCK_BYTES ? need : ARENA_BLOCK_BYTES;
        if (cap > SIZE_MAX - sizeof *b) return NULL;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        /* A big one-off allocation goes behind the current block so the rest of that block
         * stays usable for small ones. */
        if (a->head && need > ARENA_BLOCK_BYTES) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_bytes += need;
    memset(p, 0, need);
    return p;
}

char *sl__arena_strndup(sl__arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX) return NULL;
    char *d = sl__arena_alloc(a, n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void sl__arena_free(sl__arena *a)
{
    sl__arena_block *b = a->head;
    while (b) {
        sl__arena_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

/* FNV-1a: names are short and few collisions matter little with a half-empty table. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

sl_status sl__name_index_build(sl__arena *a, sl__name_index *ix, size_t n,
                               const char *(*name_at)(const void *ctx, size_t i),
                               const void *ctx, size_t *dup_first, size_t *dup_second)
{
    uint32_t cap = 16;
    if (n >= UINT32_MAX / 4) return SL_ERR_RANGE;
    while (cap < 2 * n) cap *= 2;
    ix->slots = sl__arena_alloc(a, (size_t)cap * sizeof *ix->slots);
    if (!ix->slots) return SL_ERR_NOMEM;
    ix->cap = cap;
    memset(ix->slots, 0xff, (size_t)cap * sizeof *ix->slots);
    for (size_t i = 0; i < n; i++) {
        const char *name = name_at(ctx, i);
        uint32_t s = name_hash(name) & (cap - 1);
        while (ix->slots[s] != UINT32_MAX) {
            if (strcmp(name_at(ctx, ix->slots[s]), name) == 0) {
                *dup_first = ix->slots[s];
                *dup_second = i;
                return SL_ERR_FORMAT;
            }
            s = (s + 1) & (cap - 1);
        }
        ix->slots[s] = (uint32_t)i;
    }
    return SL_OK;
}

size_t sl__name_index_find(const sl__name_index *ix, const char *name,
                           const char *(*name_at)(const void *ctx, size_t i), const void *ctx)
{
    if (!ix->slots || !name) return SIZE_MAX;
    uint32_t s = name_hash(name) & (ix->cap - 1);
    while (ix->slots[s] != UINT32_MAX) {
        if (strcmp(name_at(ctx, ix->slots[s]), name) == 0) return ix->slots[s];
        s = (s + 1) & (ix->cap - 1);
    }
    return SIZE_MAX;
}

size_t sl_gguf_vtype_size(sl_gguf_vtype t)
{
    switch (t) {
    case SL_GGUF_U8: case SL_GGUF_I8: case SL_GGUF_BOOL: return 1;
    case SL_GGUF_U16: case SL_GGUF_I16: return 2;
    case SL_GGUF_U32: case SL_GGUF_I32: case SL_GGUF_F32: return 4;
    case SL_GGUF_U64: case SL_GGUF_I64: case SL_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *sl_gguf_vtype_name(sl_gguf_vtype t)
{
    static const char *const names[SL_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64",
        "f64"};
    return (unsigned)t < SL_GGUF_VTYPE_COUNT ? names[t] : "?";
}

sl_status sl_gguf_arr_get(const sl_gguf_value *arr, uint64_t i, sl_gguf_value *out, sl_error *err)
{
    if (!arr || !out || arr->type != SL_GGUF_ARR)
        return sl_error_set(err, SL_ERR_INVALID, "sl_gguf_arr_get: value is not an array");
    if (i >= arr->v.arr.n)
        return sl_error_set(err, SL_ERR_RANGE, "array index %" PRIu64 " out of range (n = %" PRIu64 ")",
                            i, arr->v.arr.n);
    sl_gguf_vtype t = arr->v.arr.elem;
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == SL_GGUF_STR) {
        out->v.str = arr->v.arr.strs[i];
        return SL_OK;
    }
    if (t == SL_GGUF_ARR) {
        *out = arr->v.arr.items[i];
        return SL_OK;
    }
    size_t sz = sl_gguf_vtype_size(t);
    const unsigned char *p = (const unsigned char *)arr->v.arr.raw + i * sz;
    /* Elements are little-endian and possibly unaligned in the mapping: copy, then widen. */
    switch (t) {
    case SL_GGUF_U8: { uint8_t x; memcpy(&x, p, 1); out->v.u64 = x; break; }
    case SL_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); out->v.u64 = x; break; }
    case SL_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); out->v.u64 = x; break; }
    case SL_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); out->v.u64 = x; break; }
    case SL_GGUF_I8: { int8_t x; memcpy(&x, p, 1); out->v.i64 = x; break; }
    case SL_GGUF_I16: { int16_t x; memcpy(&x, p, 2); out->v.i64 = x; break; }
    case SL_GGUF_I32: { int32_t x; memcpy(&x, p, 4); out->v.i64 = x; break; }
    case SL_GGUF_I64: { int64_t x; memcpy(&x, p, 8); out->v.i64 = x; break; }
    case SL_GGUF_F32: memcpy(&out->v.f32, p, 4); break;
    case SL_GGUF_F64: memcpy(&out->v.f64, p, 8); break;
    case SL_GGUF_BOOL: out->v.b = p[0] != 0; break;
    default:
        return sl_error_set(err, SL_ERR_FORMAT, "array element type %d is invalid", (int)t);
    }
    return SL_OK;
}
