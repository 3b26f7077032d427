/* Byte-level GGUF image builder for handcrafted (valid and malformed) test files: every field
 * is appended explicitly so a test can corrupt exactly one of them. */
#ifndef SL_TESTS_GGUF_BUILDER_H
#define SL_TESTS_GGUF_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
    int version; /* 1: u32 counts/lengths/dims; 2, 3: u64 */
} gb;

static inline void gb_raw(gb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) { fprintf(stderr, "gb: out of memory\n"); exit(2); }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void gb_u8(gb *b, uint8_t v) { gb_raw(b, &v, 1); }
static inline void gb_u16(gb *b, uint16_t v) { gb_raw(b, &v, 2); }
static inline void gb_u32(gb *b, uint32_t v) { gb_raw(b, &v, 4); }
static inline void gb_u64(gb *b, uint64_t v) { gb_raw(b, &v, 8); }
static inline void gb_i32(gb *b, int32_t v) { gb_raw(b, &v, 4); }
static inline void gb_f32(gb *b, float v) { gb_raw(b, &v, 4); }
static inline void gb_count(gb *b, uint64_t v)
{
    if (b->version == 1) gb_u32(b, (uint32_t)v);
    else gb_u64(b, v);
}
static inline void gb_strn(gb *b, const char *s, size_t n) { gb_count(b, n); gb_raw(b, s, n); }
static inline void gb_str(gb *b, const char *s) { gb_strn(b, s, strlen(s)); }
static inline void gb_header(gb *b, const char *magic, uint32_t version, uint64_t n_tensors,
                             uint64_t n_kv)
{
    b->version = (int)version;
    gb_raw(b, magic, 4);
    gb_u32(b, version);
    gb_count(b, n_tensors);
    gb_count(b, n_kv);
}
/* key + type tag; the caller appends the value */
static inline void gb_key(gb *b, const char *key, uint32_t type) { gb_str(b, key); gb_u32(b, type); }
static inline void gb_tensor(gb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                             uint32_t type, uint64_t offset)
{
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) gb_count(b, ne[i]);
    gb_u32(b, type);
    gb_u64(b, offset);
}
static inline void gb_pad(gb *b, size_t align)
{
    while (b->n % align) gb_u8(b, 0);
}
static inline void gb_fill(gb *b, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++) gb_u8(b, (uint8_t)(v + i));
}
static inline void gb_free(gb *b) { free(b->p); memset(b, 0, sizeof *b); }

static inline int gb_save(const gb *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(b->p, 1, b->n, f);
    return (fclose(f) == 0 && w == b->n) ? 0 : -1;
}

#endif
