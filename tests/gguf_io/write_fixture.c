/* write_fixture: writes a random but deterministic GGUF file with gguf/writer.c and prints, as
 * one JSON object on stdout, what it meant to write (the oracle for xcheck_gguf_py.py).
 *
 *   write_fixture --seed S -o FILE [--alignment A] [--shard-tensors N] [--shard-bytes B]
 *
 * Values are printed typed and byte-exact, so no float formatting or string escaping sits
 * between intent and check: {"t":"u32","v":7}, {"t":"f32","bits":1065353216},
 * {"t":"string","hex":"c3a9"}, {"t":"array","elem":"u8","items":[...]}. Strings are valid
 * UTF-8 (gguf-py decodes them strictly) but include control characters, quotes, backslashes,
 * NUL and 2-4 byte sequences. Tensor types are those gguf-py sizes like ggml (all but Q8_1,
 * which gguf-py still sizes at 40 bytes per block; ggml's block_q8_1 is 36). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tests/testing.h"

typedef struct rng { uint64_t s; } rng;

static uint64_t rnd(rng *r) { return sl_test_splitmix64(&r->s); }

static uint64_t below(rng *r, uint64_t n) { return n ? rnd(r) % n : 0; }

/* Everything allocated for one file, freed at exit of main's scope. */
typedef struct pool { void **p; size_t n, cap; } pool;

static void *pool_alloc(pool *pl, size_t bytes)
{
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 64;
        pl->p = realloc(pl->p, pl->cap * sizeof *pl->p);
        if (!pl->p) abort();
    }
    void *q = calloc(1, bytes ? bytes : 1);
    if (!q) abort();
    return pl->p[pl->n++] = q;
}

static size_t put_utf8(char *p, uint32_t cp)
{
    if (cp < 0x80) { p[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        p[0] = (char)(0xC0 | cp >> 6); p[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        p[0] = (char)(0xE0 | cp >> 12); p[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        p[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    p[0] = (char)(0xF0 | cp >> 18); p[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    p[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); p[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static sl_gguf_str rand_str(rng *r, pool *pl)
{
    static const uint32_t odd[] = {0, '\n', '\t', '\r', 1, 0x1f, 0x7f, '"', '\\', '/', 0xe9,
                                   0x20ac, 0x1f600, 0xffff, 0x2028, 0x10ffff, 0x4e2d, 0x80};
    size_t n = below(r, 5) == 0 ? 0 : (size_t)below(r, 20);
    char *p = pool_alloc(pl, 4 * n + 1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = below(r, 3) ? (uint32_t)(' ' + below(r, 95))
                                  : odd[below(r, sizeof odd / sizeof odd[0])];
        len += put_utf8(p + len, cp);
    }
    return (sl_gguf_str){p, len};
}

static void rand_scalar(rng *r, sl_gguf_vtype t, sl_gguf_value *v)
{
    v->type = t;
    uint64_t x = rnd(r);
    /* Edge values now and then: extremes, zero, -0.0, NaN, inf. */
    int edge = (int)below(r, 6);
    switch (t) {
    case SL_GGUF_U8: v->v.u64 = edge == 0 ? UINT8_MAX : (uint8_t)x; break;
    case SL_GGUF_U16: v->v.u64 = edge == 0 ? UINT16_MAX : (uint16_t)x; break;
    case SL_GGUF_U32: v->v.u64 = edge == 0 ? UINT32_MAX : (uint32_t)x; break;
    case SL_GGUF_U64: v->v.u64 = edge == 0 ? UINT64_MAX : x; break;
    case SL_GGUF_I8: v->v.i64 = edge == 0 ? INT8_MIN : (int8_t)x; break;
    case SL_GGUF_I16: v->v.i64 = edge == 0 ? INT16_MIN : (int16_t)x; break;
    case SL_GGUF_I32: v->v.i64 = edge == 0 ? INT32_MIN : (int32_t)x; break;
    case SL_GGUF_I64: v->v.i64 = edge == 0 ? INT64_MIN : (int64_t)x; break;
    case SL_GGUF_F32: {
        static const uint32_t special[] = {0x80000000u, 0x7fc00000u, 0x7f800000u, 0xff800000u,
                                           0x00000001u, 0x7f7fffffu, 0x3f800000u};
        uint32_t b = edge == 0 ? special[below(r, 7)] : (uint32_t)x;
        if (edge == 1) { float f = (float)((double)(int64_t)x / 1e12); memcpy(&b, &f, 4); }
        memcpy(&v->v.f32, &b, 4);
        break;
    }
    case SL_GGUF_F64: {
        static const uint64_t special[] = {0x8000000000000000ull, 0x7ff8000000000000ull,
                                           0x7ff0000000000000ull, 0x0000000000000001ull,
                                           0x3ff0000000000000ull};
        uint64_t b = edge == 0 ? special[below(r, 5)] : x;
        if (edge == 1) { double d = (double)(int64_t)x / 1e9; memcpy(&b, &d, 8); }
        memcpy(&v->v.f64, &b, 8);
        break;
    }
    case SL_GGUF_BOOL: v->v.b = x & 1; break;
    default: break;
    }
}

static void rand_array(rng *r, pool *pl, sl_gguf_value *v, sl_gguf_vtype et, unsigned depth)
{
    v->type = SL_GGUF_ARR;
    if (et == SL_GGUF_ARR && depth >= 2) et = SL_GGUF_U16;
    uint64_t n = below(r, 6) == 0 ? 0 : 1 + below(r, 12);
    v->v.arr.elem = et;
    v->v.arr.n = n;
    if (et == SL_GGUF_STR) {
        sl_gguf_str *s = pool_alloc(pl, (size_t)n * sizeof *s);
        for (uint64_t i = 0; i < n; i++) s[i] = rand_str(r, pl);
        v->v.arr.strs = s;
    } else if (et == SL_GGUF_ARR) {
        sl_gguf_value *items = pool_alloc(pl, (size_t)n * sizeof *items);
        for (uint64_t i = 0; i < n; i++)
            rand_array(r, pl, &items[i], (sl_gguf_vtype)below(r, SL_GGUF_VTYPE_COUNT), depth + 1);
        v->v.arr.items = items;
    } else {
        size_t sz = sl_gguf_vtype_size(et);
        unsigned char *raw = pool_alloc(pl, (size_t)n * sz);
        for (uint64_t i = 0; i < n; i++) {
            sl_gguf_value e = {0};
            rand_scalar(r, et, &e);
            uint64_t bits = 0;
            if (et == SL_GGUF_F32) memcpy(&bits, &e.v.f32, 4);
            else if (et == SL_GGUF_F64) memcpy(&bits, &e.v.f64, 8);
            else if (et == SL_GGUF_BOOL) bits = e.v.b;
            else bits = e.v.u64; /* i64 two's complement: the low bytes are the element */
            memcpy(raw + i * sz, &bits, sz);
        }
        v->v.arr.raw = raw;
    }
}

/* ---- typed, byte-exact JSON ------------------------------------------------------------- */

static void print_hex(const void *p, uint64_t n)
{
    const unsigned char *b = p;
    for (uint64_t i = 0; i < n; i++) printf("%02x", b[i]);
}

static void print_value(const sl_gguf_value *v)
{
    const char *tn = sl_gguf_vtype_name(v->type);
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        printf("{\"t\":\"%s\",\"v\":%" PRIu64 "}", tn, v->v.u64);
        return;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        printf("{\"t\":\"%s\",\"v\":%" PRId64 "}", tn, v->v.i64);
        return;
    case SL_GGUF_F32: {
        uint32_t b;
        memcpy(&b, &v->v.f32, 4);
        printf("{\"t\":\"f32\",\"bits\":%" PRIu32 "}", b);
        return;
    }
    case SL_GGUF_F64: {
        uint64_t b;
        memcpy(&b, &v->v.f64, 8);
        printf("{\"t\":\"f64\",\"bits\":%" PRIu64 "}", b);
        return;
    }
    case SL_GGUF_BOOL: printf("{\"t\":\"bool\",\"v\":%s}", v->v.b ? "true" : "false"); return;
    case SL_GGUF_STR:
        printf("{\"t\":\"string\",\"hex\":\"");
        print_hex(v->v.str.ptr, v->v.str.len);
        printf("\"}");
        return;
    default: break;
    }
    printf("{\"t\":\"array\",\"elem\":\"%s\",\"items\":[", sl_gguf_vtype_name(v->v.arr.elem));
    for (uint64_t i = 0; i < v->v.arr.n; i++) {
        sl_gguf_value e;
        if (sl_gguf_arr_get(v, i, &e, NULL)) abort();
        if (i) putchar(',');
        print_value(&e);
    }
    printf("]}");
}

static int usage(void)
{
    fprintf(stderr, "usage: write_fixture --seed S -o FILE [--alignment A] [--shard-tensors N] "
                    "[--shard-bytes B]\n");
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    const char *out = NULL;
    sl_gguf_writer_options opt = {0};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *a = argv[i], *val = argv[++i];
        if (!strcmp(a, "--seed")) seed = strtoull(val, NULL, 0);
        else if (!strcmp(a, "-o")) out = val;
        else if (!strcmp(a, "--alignment")) opt.alignment = (uint32_t)strtoul(val, NULL, 0);
        else if (!strcmp(a, "--shard-tensors")) opt.shard_max_tensors = (uint32_t)strtoul(val, NULL, 0);
        else if (!strcmp(a, "--shard-bytes")) opt.shard_max_bytes = strtoull(val, NULL, 0);
        else return usage();
    }
    if (!out) return usage();

    rng r = {seed * 0x2545f4914f6cdd1dull + 1};
    pool pl = {0};
    sl_error err;
    sl_gguf_writer *w = NULL;
    int rc = 1;
    if (sl_gguf_writer_create(out, &opt, &w, &err)) goto fail;

    /* KV: every scalar type, strings, arrays of every element type, nested arrays; a few
     * shuffled extra keys and one non-ASCII key. */
    enum { N_KV = 48 };
    const char *keys[N_KV];
    sl_gguf_value vals[N_KV];
    size_t n_kv = 0;
    for (int t = 0; t < SL_GGUF_VTYPE_COUNT; t++) {
        char *k = pool_alloc(&pl, 48);
        snprintf(k, 48, "fx.scalar.%s", sl_gguf_vtype_name((sl_gguf_vtype)t));
        sl_gguf_value *v = &vals[n_kv];
        memset(v, 0, sizeof *v);
        if (t == SL_GGUF_STR) { v->type = SL_GGUF_STR; v->v.str = rand_str(&r, &pl); }
        else if (t == SL_GGUF_ARR) rand_array(&r, &pl, v, SL_GGUF_ARR, 0);
        else rand_scalar(&r, (sl_gguf_vtype)t, v);
        keys[n_kv++] = k;
    }
    for (int t = 0; t < SL_GGUF_VTYPE_COUNT; t++) {
        char *k = pool_alloc(&pl, 48);
        snprintf(k, 48, "fx.array.%s", sl_gguf_vtype_name((sl_gguf_vtype)t));
        memset(&vals[n_kv], 0, sizeof vals[n_kv]);
        rand_array(&r, &pl, &vals[n_kv], (sl_gguf_vtype)t, 0);
        keys[n_kv++] = k;
    }
    keys[n_kv] = "fx.unicode.k\xc3\xa9y.\xe2\x82\xac";
    memset(&vals[n_kv], 0, sizeof vals[n_kv]);
    vals[n_kv].type = SL_GGUF_STR;
    vals[n_kv++].v.str = rand_str(&r, &pl);
    size_t extra = (size_t)below(&r, 12);
    for (size_t i = 0; i < extra; i++) {
        char *k = pool_alloc(&pl, 48);
        snprintf(k, 48, "fx.extra.%zu", i);
        memset(&vals[n_kv], 0, sizeof vals[n_kv]);
        sl_gguf_vtype t = (sl_gguf_vtype)below(&r, SL_GGUF_VTYPE_COUNT);
        if (t == SL_GGUF_ARR) rand_array(&r, &pl, &vals[n_kv], (sl_gguf_vtype)below(&r, 13), 0);
        else if (t == SL_GGUF_STR) { vals[n_kv].type = t; vals[n_kv].v.str = rand_str(&r, &pl); }
        else rand_scalar(&r, t, &vals[n_kv]);
        keys[n_kv++] = k;
    }
    for (size_t i = n_kv - 1; i > 0; i--) { /* shuffle: order must survive as written */
        size_t j = (size_t)below(&r, i + 1);
        const char *tk = keys[i]; keys[i] = keys[j]; keys[j] = tk;
        sl_gguf_value tv = vals[i]; vals[i] = vals[j]; vals[j] = tv;
    }
    for (size_t i = 0; i < n_kv; i++)
        if (sl_gguf_writer_set(w, keys[i], &vals[i], &err)) goto fail;

    /* Tensors. */
    enum { MAX_T = 12 };
    uint32_t types[SL_GGML_TYPE_LIMIT], n_types = 0;
    for (uint32_t c = 0; c < SL_GGML_TYPE_LIMIT; c++)
        if (sl_gguf_type_get(c) && c != SL_GGML_Q8_1) types[n_types++] = c;
    size_t n_t = 1 + (size_t)below(&r, MAX_T);
    char names[MAX_T][64];
    uint32_t tt[MAX_T], nd[MAX_T];
    int64_t ne[MAX_T][4];
    uint64_t nb[MAX_T], hash[MAX_T];
    for (size_t i = 0; i < n_t; i++) {
        snprintf(names[i], 64, "blk.%zu.%s", i, below(&r, 2) ? "ffn_up.weight" : "attn_q.weight");
        tt[i] = types[below(&r, n_types)];
        const sl_gguf_type_info *ti = sl_gguf_type_get(tt[i]);
        nd[i] = 1 + (uint32_t)below(&r, 4);
        ne[i][0] = (int64_t)(ti->block_size * (1 + below(&r, 3)));
        for (uint32_t d = 1; d < 4; d++) ne[i][d] = d < nd[i] ? 1 + (int64_t)below(&r, 3) : 1;
        if (below(&r, 10) == 0) ne[i][below(&r, nd[i])] = 0;
        if (sl_gguf_writer_add_tensor(w, names[i], tt[i], nd[i], ne[i], &err)) goto fail;
        if (sl_gguf_type_nbytes(tt[i], nd[i], ne[i], &nb[i], names[i], &err)) goto fail;
    }
    for (size_t i = 0; i < n_t; i++) {
        uint64_t h = 0xcbf29ce484222325ull;
        unsigned char buf[1000];
        for (uint64_t done = 0; done < nb[i];) {
            size_t k = 1 + (size_t)below(&r, sizeof buf);
            if (k > nb[i] - done) k = (size_t)(nb[i] - done);
            for (size_t j = 0; j < k; j++) {
                buf[j] = (unsigned char)rnd(&r);
                h = (h ^ buf[j]) * 0x100000001b3ull;
            }
            if (sl_gguf_writer_write(w, buf, k, &err)) goto fail;
            done += k;
        }
        hash[i] = h;
    }
    if (sl_gguf_writer_finish(w, &err)) goto fail;

    printf("{\"shards\":%" PRIu32 ",\"alignment\":%" PRIu32 ",\"kv\":[",
           sl_gguf_writer_shard_count(w), opt.alignment ? opt.alignment : 32);
    for (size_t i = 0; i < n_kv; i++) {
        printf("%s[\"", i ? "," : "");
        print_hex(keys[i], strlen(keys[i]));
        printf("\",");
        print_value(&vals[i]);
        printf("]");
    }
    printf("],\"tensors\":[");
    for (size_t i = 0; i < n_t; i++) {
        printf("%s{\"name\":\"%s\",\"type\":%" PRIu32 ",\"shape\":[", i ? "," : "", names[i], tt[i]);
        for (uint32_t d = 0; d < nd[i]; d++) printf("%s%" PRId64, d ? "," : "", ne[i][d]);
        printf("],\"nbytes\":%" PRIu64 ",\"fnv1a64\":\"%016" PRIx64 "\"}", nb[i], hash[i]);
    }
    printf("]}\n");
    rc = 0;
fail:
    if (rc) fprintf(stderr, "write_fixture: %s\n", err.msg);
    sl_gguf_writer_destroy(w);
    for (size_t i = 0; i < pl.n; i++) free(pl.p[i]);
    free(pl.p);
    return rc;
}
