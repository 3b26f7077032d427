/* Writer -> reader round trips with a fixed seed, and the writer's refusals.
 *
 * Each round trip draws a random model: KV of all 13 value types (arrays of every element type,
 * arrays of strings, arrays of arrays 2-3 deep, empty arrays and strings), a random alignment,
 * tensors of every live ggml type (some with a 0 dimension), data streamed in random chunks,
 * sometimes sharded by count or bytes. The expectations (shards, offsets, KV order including the
 * keys the writer adds) are computed here independently of gguf/writer.c, then everything is
 * compared after sl_gguf_open: values bit for bit, tensor bytes via the mapping, pread and
 * O_DIRECT. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/testing.h"

enum { ROUNDS = 1000, MAX_KV = 12, MAX_TENSORS = 7 };

/* ---- deterministic randomness ------------------------------------------------------------ */

typedef struct rng { uint64_t s; } rng;

static uint64_t rnd(rng *r) { return sl_test_splitmix64(&r->s); }

static uint64_t below(rng *r, uint64_t n) { return n ? rnd(r) % n : 0; }

/* ---- allocations of one round, freed together --------------------------------------------- */

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

static void pool_free(pool *pl)
{
    for (size_t i = 0; i < pl->n; i++) free(pl->p[i]);
    free(pl->p);
    memset(pl, 0, sizeof *pl);
}

/* ---- random values ---------------------------------------------------------------------- */

static void rand_bytes(rng *r, void *dst, size_t n)
{
    unsigned char *p = dst;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd(r);
}

static sl_gguf_str rand_str(rng *r, pool *pl)
{
    uint64_t len = below(r, 4) == 0 ? 0 : below(r, 24);
    char *p = pool_alloc(pl, (size_t)len + 1);
    for (uint64_t i = 0; i < len; i++) {
        /* Mostly printable, some arbitrary bytes (GGUF strings are bytes to a writer). */
        p[i] = below(r, 8) ? (char)(' ' + below(r, 95)) : (char)rnd(r);
    }
    return (sl_gguf_str){p, len};
}

static void rand_scalar(rng *r, sl_gguf_vtype t, sl_gguf_value *v)
{
    v->type = t;
    uint64_t x = rnd(r);
    switch (t) {
    case SL_GGUF_U8: v->v.u64 = (uint8_t)x; break;
    case SL_GGUF_U16: v->v.u64 = (uint16_t)x; break;
    case SL_GGUF_U32: v->v.u64 = (uint32_t)x; break;
    case SL_GGUF_U64: v->v.u64 = x; break;
    case SL_GGUF_I8: v->v.i64 = (int8_t)x; break;
    case SL_GGUF_I16: v->v.i64 = (int16_t)x; break;
    case SL_GGUF_I32: v->v.i64 = (int32_t)x; break;
    case SL_GGUF_I64: v->v.i64 = (int64_t)x; break;
    case SL_GGUF_F32: { uint32_t b = (uint32_t)x; memcpy(&v->v.f32, &b, 4); break; }
    case SL_GGUF_F64: memcpy(&v->v.f64, &x, 8); break;
    case SL_GGUF_BOOL: v->v.b = x & 1; break;
    default: break;
    }
}

static void rand_value(rng *r, pool *pl, sl_gguf_value *v, unsigned depth, bool force_arr);

static void rand_array(rng *r, pool *pl, sl_gguf_value *v, unsigned depth)
{
    v->type = SL_GGUF_ARR;
    sl_gguf_vtype et = (sl_gguf_vtype)below(r, SL_GGUF_VTYPE_COUNT);
    if (et == SL_GGUF_ARR && depth >= 2) et = SL_GGUF_I32; /* nesting 2-3 deep at most */
    uint64_t n = below(r, 5) == 0 ? 0 : below(r, 6) == 0 ? 40 + below(r, 60) : 1 + below(r, 8);
    if (et == SL_GGUF_ARR && n > 5) n = 5;
    v->v.arr.elem = et;
    v->v.arr.n = n;
    if (et == SL_GGUF_STR) {
        sl_gguf_str *s = pool_alloc(pl, (size_t)n * sizeof *s);
        for (uint64_t i = 0; i < n; i++) s[i] = rand_str(r, pl);
        v->v.arr.strs = s;
    } else if (et == SL_GGUF_ARR) {
        sl_gguf_value *items = pool_alloc(pl, (size_t)n * sizeof *items);
        for (uint64_t i = 0; i < n; i++) rand_value(r, pl, &items[i], depth + 1, true);
        v->v.arr.items = items;
    } else {
        size_t sz = sl_gguf_vtype_size(et);
        unsigned char *raw = pool_alloc(pl, (size_t)n * sz);
        rand_bytes(r, raw, (size_t)n * sz);
        if (et == SL_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++) raw[i] &= 1;
        v->v.arr.raw = raw;
    }
}

static void rand_value(rng *r, pool *pl, sl_gguf_value *v, unsigned depth, bool force_arr)
{
    memset(v, 0, sizeof *v);
    sl_gguf_vtype t = force_arr ? SL_GGUF_ARR : (sl_gguf_vtype)below(r, SL_GGUF_VTYPE_COUNT);
    if (t == SL_GGUF_ARR) rand_array(r, pl, v, depth);
    else if (t == SL_GGUF_STR) { v->type = t; v->v.str = rand_str(r, pl); }
    else rand_scalar(r, t, v);
}

/* Bit-exact equality of two values (arrays element by element, order kept). */
static bool value_eq(const sl_gguf_value *a, const sl_gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        return a->v.u64 == b->v.u64;
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        return a->v.i64 == b->v.i64;
    case SL_GGUF_F32: return !memcmp(&a->v.f32, &b->v.f32, 4);
    case SL_GGUF_F64: return !memcmp(&a->v.f64, &b->v.f64, 8);
    case SL_GGUF_BOOL: return a->v.b == b->v.b;
    case SL_GGUF_STR:
        return a->v.str.len == b->v.str.len &&
               (!a->v.str.len || !memcmp(a->v.str.ptr, b->v.str.ptr, (size_t)a->v.str.len));
    case SL_GGUF_ARR: break;
    default: return false;
    }
    if (a->v.arr.elem != b->v.arr.elem || a->v.arr.n != b->v.arr.n) return false;
    uint64_t n = a->v.arr.n;
    if (a->v.arr.elem == SL_GGUF_STR) {
        for (uint64_t i = 0; i < n; i++) {
            sl_gguf_str x = a->v.arr.strs[i], y = b->v.arr.strs[i];
            if (x.len != y.len || (x.len && memcmp(x.ptr, y.ptr, (size_t)x.len))) return false;
        }
        return true;
    }
    if (a->v.arr.elem == SL_GGUF_ARR) {
        for (uint64_t i = 0; i < n; i++)
            if (!value_eq(&a->v.arr.items[i], &b->v.arr.items[i])) return false;
        return true;
    }
    /* Through the public element accessor as well as raw bytes. */
    for (uint64_t i = 0; i < n; i++) {
        sl_gguf_value x, y;
        if (sl_gguf_arr_get(a, i, &x, NULL) || sl_gguf_arr_get(b, i, &y, NULL)) return false;
        if (!value_eq(&x, &y)) return false;
    }
    return !n || !memcmp(a->v.arr.raw, b->v.arr.raw, (size_t)n * sl_gguf_vtype_size(a->v.arr.elem));
}

/* ---- file helpers ----------------------------------------------------------------------- */

static char g_dir[512];

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void shard_name(char *buf, size_t cap, const char *prefix, uint32_t k, uint32_t n)
{
    snprintf(buf, cap, "%s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", prefix, k + 1, n);
}

/* No file left of a model with this stem: plain, partial, or any shard up to 9 of 9. */
static bool nothing_left(const char *stem)
{
    char p[700];
    snprintf(p, sizeof p, "%s.gguf", stem);
    if (exists(p)) return false;
    snprintf(p, sizeof p, "%s.gguf.partial", stem);
    if (exists(p)) return false;
    for (uint32_t n = 1; n < 10; n++)
        for (uint32_t k = 0; k < n; k++) {
            char q[720];
            shard_name(p, sizeof p, stem, k, n);
            if (exists(p)) return false;
            snprintf(q, sizeof q, "%s.partial", p);
            if (exists(q)) return false;
        }
    return true;
}

static int g_notices;
static void count_notice(void *user, const char *msg)
{
    (void)user;
    (void)msg;
    g_notices++;
}

/* ---- one round trip ------------------------------------------------------------------- */

typedef struct exp_kv { const char *key; sl_gguf_value v; } exp_kv;

typedef struct exp_tensor {
    char name[64];
    uint32_t type, n_dims;
    int64_t ne[4];
    uint64_t nbytes, offset, data_at; /* data_at: index into the round's data buffer */
    uint32_t shard;
} exp_tensor;

static uint32_t g_live_types[SL_GGML_TYPE_LIMIT];
static uint32_t g_n_live;

/* What the writer's progress callback saw: every call's (done, total), checked as they come. */
typedef struct progress_log {
    uint64_t calls, last_done, total, bad;
} progress_log;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_log *l = user;
    if (done < l->last_done || done > total || (l->calls && total != l->total)) l->bad++;
    l->calls++;
    l->last_done = done;
    l->total = total;
}

static void round_trip(uint64_t seed, int round)
{
    rng r = {seed};
    pool pl = {0};
    sl_error err;
    sl_error_clear(&err);

    static const uint32_t aligns[] = {0, 1, 8, 32, 64, 0, 32, 4096};
    uint32_t align_opt = aligns[below(&r, 8)];
    if (align_opt == 4096 && below(&r, 2)) align_opt = 16;
    sl_gguf_writer_options opt = {.alignment = align_opt};
    progress_log plog = {0};
    if (below(&r, 2)) {
        opt.progress = on_progress;
        opt.progress_user = &plog;
    }
    uint32_t mode = (uint32_t)below(&r, 4); /* 0, 1: plain; 2: by count; 3: by bytes */
    if (mode == 2) opt.shard_max_tensors = 1 + (uint32_t)below(&r, 3);
    if (mode == 3) opt.shard_max_bytes = 32 + below(&r, 3000);
    bool sharded = mode >= 2;

    /* KV: alignment adopted from a general.alignment KV when the option is 0 (sometimes). */
    uint32_t align = align_opt ? align_opt : 32;
    size_t n_user = (size_t)below(&r, MAX_KV + 1);
    int align_kv_at = -1;
    if (below(&r, 4) == 0) {
        align_kv_at = (int)below(&r, n_user + 1);
        if (!align_opt) align = 1u << below(&r, 8);
    }
    exp_kv user[MAX_KV + 1];
    size_t n_kv_user = 0;
    for (size_t i = 0; i <= n_user; i++) {
        if ((int)i == align_kv_at) {
            user[n_kv_user].key = "general.alignment";
            user[n_kv_user].v = (sl_gguf_value){.type = SL_GGUF_U32, .v.u64 = align};
            n_kv_user++;
        }
        if (i == n_user) break;
        char *k = pool_alloc(&pl, 32);
        snprintf(k, 32, "k%zu.%s", i, below(&r, 2) ? "x" : "some.longer.name");
        user[n_kv_user].key = k;
        rand_value(&r, &pl, &user[n_kv_user].v, 0, below(&r, 3) == 0);
        n_kv_user++;
    }

    /* Tensors and their data. */
    size_t n_t = (size_t)below(&r, MAX_TENSORS + 1);
    exp_tensor t[MAX_TENSORS];
    uint64_t total = 0;
    for (size_t i = 0; i < n_t; i++) {
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, below(&r, 10) ? "blk.%zu.w" :
                 "blk.%zu.a_name_of_exactly_sixty_three_bytes_xxxxxxxxxxxxxxxxxxxxxxxx", i);
        t[i].name[63] = '\0';
        t[i].type = g_live_types[below(&r, g_n_live)];
        const sl_gguf_type_info *ti = sl_gguf_type_get(t[i].type);
        t[i].n_dims = 1 + (uint32_t)below(&r, 4);
        t[i].ne[0] = (int64_t)(ti->block_size * (1 + below(&r, ti->block_size >= 256 ? 2 : 4)));
        for (uint32_t d = 1; d < 4; d++) t[i].ne[d] = d < t[i].n_dims ? 1 + (int64_t)below(&r, 3) : 1;
        if (below(&r, 12) == 0) t[i].ne[below(&r, t[i].n_dims)] = 0;
        uint64_t elems = 1;
        for (uint32_t d = 0; d < t[i].n_dims; d++) elems *= (uint64_t)t[i].ne[d];
        t[i].nbytes = elems / ti->block_size * ti->type_size;
        t[i].data_at = total;
        total += t[i].nbytes;
    }
    unsigned char *data = pool_alloc(&pl, (size_t)total);
    rand_bytes(&r, data, (size_t)total);

    /* Expected layout, gguf-split's rule. */
    uint32_t n_shards = 1;
    uint64_t sbytes = 0, scnt = 0;
    for (size_t i = 0; i < n_t; i++) {
        uint64_t padded = (t[i].nbytes + align - 1) / align * align;
        if (sharded && scnt &&
            ((opt.shard_max_tensors && scnt + 1 > opt.shard_max_tensors) ||
             (opt.shard_max_bytes && sbytes + padded > opt.shard_max_bytes))) {
            n_shards++;
            sbytes = scnt = 0;
        }
        t[i].shard = n_shards - 1;
        t[i].offset = sbytes;
        sbytes += padded;
        scnt++;
    }

    char stem[600], path[700], open_path[700];
    snprintf(stem, sizeof stem, "%s/rt%d", g_dir, round);
    snprintf(path, sizeof path, "%s.gguf", stem);
    if (sharded) shard_name(open_path, sizeof open_path, stem, 0, n_shards);
    else snprintf(open_path, sizeof open_path, "%s", path);

    /* Write: declarations interleaved in random order between KV and tensors. */
    sl_gguf_writer *w = NULL;
    CHECK_MSG(sl_gguf_writer_create(path, &opt, &w, &err) == SL_OK, "%s", err.msg);
    if (!w) goto out;
    size_t ki = 0, tj = 0;
    while (ki < n_kv_user || tj < n_t) {
        if (tj == n_t || (ki < n_kv_user && below(&r, 2))) {
            sl_status s = sl_gguf_writer_set(w, user[ki].key, &user[ki].v, &err);
            CHECK_MSG(s == SL_OK, "round %d key %s: %s", round, user[ki].key, err.msg);
            ki++;
        } else {
            sl_status s = sl_gguf_writer_add_tensor(w, t[tj].name, t[tj].type, t[tj].n_dims,
                                                    t[tj].ne, &err);
            CHECK_MSG(s == SL_OK, "round %d tensor %s: %s", round, t[tj].name, err.msg);
            tj++;
        }
    }
    CHECK(sl_gguf_writer_shard_count(w) == 0);
    uint64_t done = 0, writes = 0;
    while (done < total) {
        uint64_t k = 1 + below(&r, below(&r, 3) ? 64 : total);
        if (k > total - done) k = total - done;
        sl_status s = sl_gguf_writer_write(w, data + done, k, &err);
        CHECK_MSG(s == SL_OK, "round %d write: %s", round, err.msg);
        if (s) break;
        done += k;
        writes++;
        /* the writer reports each write as it ends: the bytes so far, of all declared */
        if (opt.progress)
            CHECK_MSG(plog.calls == writes && plog.last_done == done && plog.total == total,
                      "round %d progress: call %llu saw %llu / %llu after %llu / %llu", round,
                      (unsigned long long)plog.calls, (unsigned long long)plog.last_done,
                      (unsigned long long)plog.total, (unsigned long long)done,
                      (unsigned long long)total);
    }
    CHECK_MSG(!plog.bad, "round %d progress went back or past its total", round);
    if (below(&r, 3) == 0) CHECK(sl_gguf_writer_write(w, data, 0, &err) == SL_OK);
    sl_status fs = sl_gguf_writer_finish(w, &err);
    CHECK_MSG(fs == SL_OK, "round %d finish: %s", round, err.msg);
    CHECK(sl_gguf_writer_shard_count(w) == n_shards);
    sl_gguf_writer_destroy(w);
    if (fs) goto out;

    /* Read back. */
    sl_gguf_options ro = {.notice = count_notice};
    sl_gguf *g = NULL;
    if (sl_gguf_open(open_path, &ro, &g, &err) != SL_OK) {
        CHECK_MSG(false, "round %d open %s: %s", round, open_path, err.msg);
        goto out;
    }
    CHECK(sl_gguf_version(g) == 3);
    CHECK_MSG(sl_gguf_alignment(g) == align, "round %d: alignment %u, want %u", round,
              sl_gguf_alignment(g), align);
    CHECK(sl_gguf_shard_count(g) == n_shards);

    /* KV: [general.alignment if the option set it and the user did not] + user + split keys. */
    size_t at = 0, n_kv = sl_gguf_kv_count(g);
    bool auto_align = align_opt && align_kv_at < 0;
    CHECK_MSG(n_kv == n_kv_user + auto_align + (sharded ? 3 : 0), "round %d: %zu kv", round, n_kv);
    if (auto_align && at < n_kv) {
        CHECK(!strcmp(sl_gguf_kv_key(g, at), "general.alignment"));
        uint32_t a = 0;
        CHECK(sl_gguf_get_u32(g, "general.alignment", &a, NULL) == SL_OK && a == align_opt);
        at++;
    }
    for (size_t i = 0; i < n_kv_user && at < n_kv; i++, at++) {
        CHECK_MSG(!strcmp(sl_gguf_kv_key(g, at), user[i].key), "round %d kv %zu: %s vs %s", round,
                  at, sl_gguf_kv_key(g, at), user[i].key);
        CHECK_MSG(value_eq(sl_gguf_kv_value(g, at), &user[i].v), "round %d key %s differs",
                  round, user[i].key);
        CHECK(sl_gguf_find(g, user[i].key) == sl_gguf_kv_value(g, at));
    }
    if (sharded && at + 3 <= n_kv) {
        uint16_t no = 9, cnt = 0;
        int32_t tc = -1;
        CHECK(!strcmp(sl_gguf_kv_key(g, at), "split.no"));
        CHECK(!strcmp(sl_gguf_kv_key(g, at + 1), "split.count"));
        CHECK(!strcmp(sl_gguf_kv_key(g, at + 2), "split.tensors.count"));
        CHECK(sl_gguf_get_u16(g, "split.no", &no, NULL) == SL_OK && no == 0);
        CHECK(sl_gguf_get_u16(g, "split.count", &cnt, NULL) == SL_OK && cnt == n_shards);
        CHECK(sl_gguf_get_i32(g, "split.tensors.count", &tc, NULL) == SL_OK && tc == (int32_t)n_t);
    }

    /* Tensors: metadata, then bytes through all three paths. */
    CHECK(sl_gguf_tensor_count(g) == n_t);
    for (size_t i = 0; i < n_t && i < sl_gguf_tensor_count(g); i++) {
        const sl_gguf_tensor *x = sl_gguf_tensor_at(g, i);
        const unsigned char *want = data + t[i].data_at;
        CHECK_MSG(!strcmp(x->name, t[i].name), "round %d tensor %zu name", round, i);
        CHECK(sl_gguf_tensor_find(g, t[i].name) == x);
        CHECK(x->type == t[i].type && x->n_dims == t[i].n_dims);
        for (uint32_t d = 0; d < 4; d++) CHECK(x->ne[d] == t[i].ne[d]);
        CHECK(x->nbytes == t[i].nbytes);
        CHECK_MSG(x->offset == t[i].offset && x->shard == t[i].shard,
                  "round %d tensor %zu: offset %" PRIu64 " shard %u, want %" PRIu64 " %u", round,
                  i, x->offset, x->shard, t[i].offset, t[i].shard);
        CHECK(x->file_offset == sl_gguf_data_offset(g, x->shard) + x->offset);
        CHECK(sl_gguf_data_offset(g, x->shard) % align == 0);
        if (x->nbytes) {
            const void *view = sl_gguf_tensor_view(g, x);
            CHECK_MSG(view && !memcmp(view, want, (size_t)x->nbytes), "round %d %s view", round,
                      x->name);
        }
        unsigned char *buf = malloc((size_t)x->nbytes + 1);
        void *got = NULL;
        sl_status s = sl_gguf_tensor_read(g, x, SL_GGUF_IO_PREAD, buf, x->nbytes, &got, &err);
        CHECK_MSG(s == SL_OK && got == buf && !memcmp(buf, want, (size_t)x->nbytes),
                  "round %d %s pread: %s", round, x->name, s ? err.msg : "bytes differ");
        free(buf);
        uint64_t span = sl_gguf_direct_span(x);
        uint64_t cap = (span + SL_GGUF_DIRECT_ALIGN - 1) / SL_GGUF_DIRECT_ALIGN * SL_GGUF_DIRECT_ALIGN;
        if (!cap) cap = SL_GGUF_DIRECT_ALIGN;
        unsigned char *abuf = aligned_alloc(SL_GGUF_DIRECT_ALIGN, (size_t)cap);
        got = NULL;
        s = sl_gguf_tensor_read(g, x, SL_GGUF_IO_DIRECT, abuf, cap, &got, &err);
        CHECK_MSG(s == SL_OK && got == abuf + x->file_offset % SL_GGUF_DIRECT_ALIGN &&
                      !memcmp(got, want, (size_t)x->nbytes),
                  "round %d %s direct: %s", round, x->name, s ? err.msg : "bytes/position differ");
        free(abuf);
    }
    sl_gguf_close(g);

out:
    for (uint32_t k = 0; k < n_shards; k++) {
        char sp[700];
        shard_name(sp, sizeof sp, stem, k, n_shards);
        remove(sp);
    }
    remove(path);
    CHECK_MSG(nothing_left(stem), "round %d left files", round);
    pool_free(&pl);
}

/* ---- refusals ----------------------------------------------------------------------------- */

static sl_gguf_writer *new_writer(const char *name, const sl_gguf_writer_options *opt)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s.gguf", g_dir, name);
    sl_gguf_writer *w = NULL;
    sl_error err;
    CHECK_MSG(sl_gguf_writer_create(p, opt, &w, &err) == SL_OK, "%s", err.msg);
    return w;
}

/* The cancel hook (a SIGINT flag in the CLI): asked before each write and at finish; true fails
 * the writer with "cancelled" and destroy removes its temporary. */
static int g_cancel_at, g_cancel_calls;
static bool cancel_hook(void *user)
{
    (void)user;
    return ++g_cancel_calls >= g_cancel_at;
}

static void test_cancel(void)
{
    for (int at = 1; at <= 3; at++) {
        g_cancel_at = at;
        g_cancel_calls = 0;
        const sl_gguf_writer_options opt = {.cancelled = cancel_hook};
        sl_gguf_writer *w = new_writer("cancel", &opt);
        sl_error err = {0};
        int64_t ne[4] = {32, 1, 1, 1};
        float row[32] = {0};
        CHECK(w && sl_gguf_writer_add_tensor(w, "t", SL_GGML_F32, 1, ne, &err) == SL_OK);
        CHECK(w && sl_gguf_writer_add_tensor(w, "u", SL_GGML_F32, 1, ne, &err) == SL_OK);
        sl_status st = SL_OK;
        for (int k = 0; k < 2 && !st; k++) st = sl_gguf_writer_write(w, row, sizeof row, &err);
        if (!st) st = sl_gguf_writer_finish(w, &err);
        CHECK_MSG(st == SL_ERR_INVALID, "cancel at call %d: %d %s", at, st, err.msg);
        CHECK_CONTAINS(err.msg, "cancelled");
        char p[700], q[720];
        snprintf(p, sizeof p, "%s/cancel.gguf", g_dir);
        snprintf(q, sizeof q, "%s.partial", p);
        CHECK_MSG(access(q, F_OK) == 0, "cancel at call %d: the temporary exists until "
                  "destroy", at);
        sl_gguf_writer_destroy(w);
        CHECK_MSG(access(p, F_OK) != 0 && access(q, F_OK) != 0,
                  "cancel at call %d: nothing left", at);
    }
}

static void test_errors(void)
{
    sl_error err;
    int64_t ne[5] = {32, 2, 1, 1, 1};
    char stem[600];

    /* Keys. */
    sl_gguf_writer *w = new_writer("e_keys", NULL);
    CHECK(sl_gguf_writer_set_u32(w, "a.b", 1, &err) == SL_OK);
    CHECK(sl_gguf_writer_set_u32(w, "a.b", 2, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "duplicate key 'a.b'");
    CHECK(sl_gguf_writer_set_str(w, "", "x", &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "empty key");
    CHECK(sl_gguf_writer_set_u32(w, "split.count", 2, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "reserved");
    CHECK(sl_gguf_writer_set_str(w, "general.alignment", "x", &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "general.alignment");
    CHECK(sl_gguf_writer_set_u32(w, "general.alignment", 48, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "power of two");
    sl_gguf_value v = {.type = SL_GGUF_U8, .v.u64 = 256};
    CHECK(sl_gguf_writer_set(w, "u8.big", &v, &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "u8.big");
    v = (sl_gguf_value){.type = SL_GGUF_I16, .v.i64 = -40000};
    CHECK(sl_gguf_writer_set(w, "i16.small", &v, &err) == SL_ERR_RANGE);
    v = (sl_gguf_value){.type = (sl_gguf_vtype)13};
    CHECK(sl_gguf_writer_set(w, "bad.type", &v, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "bad.type");
    v = (sl_gguf_value){.type = SL_GGUF_ARR};
    v.v.arr.elem = (sl_gguf_vtype)77;
    CHECK(sl_gguf_writer_set(w, "bad.elem", &v, &err) == SL_ERR_INVALID);
    v.v.arr.elem = SL_GGUF_STR;
    v.v.arr.n = 2;
    CHECK(sl_gguf_writer_set(w, "null.strs", &v, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "NULL");
    v.v.arr.elem = SL_GGUF_BOOL;
    v.v.arr.raw = "\001\002";
    CHECK(sl_gguf_writer_set(w, "bad.bool", &v, &err) == SL_ERR_RANGE);
    CHECK(sl_gguf_writer_set_arr(w, "arr.str", SL_GGUF_STR, "x", 1, &err) == SL_ERR_INVALID);
    /* Nesting: 8 levels of arrays are allowed (as the reader allows), 9 are not. */
    sl_gguf_value lv[10];
    memset(lv, 0, sizeof lv);
    static const int32_t one = 7;
    lv[0].type = SL_GGUF_ARR;
    lv[0].v.arr.elem = SL_GGUF_I32;
    lv[0].v.arr.n = 1;
    lv[0].v.arr.raw = &one;
    for (int i = 1; i < 10; i++) {
        lv[i].type = SL_GGUF_ARR;
        lv[i].v.arr.elem = SL_GGUF_ARR;
        lv[i].v.arr.n = 1;
        lv[i].v.arr.items = &lv[i - 1];
    }
    CHECK_MSG(sl_gguf_writer_set(w, "nest.8", &lv[7], &err) == SL_OK, "%s", err.msg);
    CHECK(sl_gguf_writer_set(w, "nest.9", &lv[8], &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "nested");
    sl_gguf_value mixed = lv[2];
    sl_gguf_value bad_item = {.type = SL_GGUF_U32};
    mixed.v.arr.items = &bad_item;
    CHECK(sl_gguf_writer_set(w, "nest.bad", &mixed, &err) == SL_ERR_INVALID);
    CHECK(sl_gguf_writer_finish(w, &err) == SL_OK);
    sl_gguf_writer_destroy(w);
    /* The file with the 8-deep array (and nothing else refused) reads back. */
    {
        char p[700];
        snprintf(p, sizeof p, "%s/e_keys.gguf", g_dir);
        sl_gguf *g = NULL;
        CHECK_MSG(sl_gguf_open(p, NULL, &g, &err) == SL_OK, "%s", err.msg);
        if (g) {
            CHECK(sl_gguf_kv_count(g) == 2);
            CHECK(sl_gguf_tensor_count(g) == 0);
            const sl_gguf_value *n8 = sl_gguf_find(g, "nest.8");
            CHECK(n8 && value_eq(n8, &lv[7]));
            sl_gguf_close(g);
        }
        remove(p);
    }

    /* Tensors. */
    w = new_writer("e_tensors", NULL);
    CHECK(sl_gguf_writer_add_tensor(w, "t", SL_GGML_F32, 2, ne, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(w, "t", SL_GGML_F32, 2, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "duplicate tensor 't'");
    CHECK(sl_gguf_writer_add_tensor(w, "", SL_GGML_F32, 2, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "empty tensor name");
    CHECK(sl_gguf_writer_add_tensor(w, "r", 4, 2, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "retired");
    CHECK(sl_gguf_writer_add_tensor(w, "u", 99, 2, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "unknown ggml type code 99");
    int64_t bad_ne[2] = {100, 2};
    CHECK(sl_gguf_writer_add_tensor(w, "q", SL_GGML_Q4_K, 2, bad_ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "'q'");
    CHECK_CONTAINS(err.msg, "block size");
    CHECK(sl_gguf_writer_add_tensor(w, "d5", SL_GGML_F32, 5, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "n_dims 5");
    CHECK(sl_gguf_writer_add_tensor(w, "d0", SL_GGML_F32, 0, ne, &err) == SL_ERR_INVALID);
    int64_t neg[1] = {-32};
    CHECK(sl_gguf_writer_add_tensor(w, "neg", SL_GGML_F32, 1, neg, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "negative");
    char long_name[80];
    memset(long_name, 'n', 64);
    long_name[64] = '\0';
    CHECK(sl_gguf_writer_add_tensor(w, long_name, SL_GGML_F32, 1, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "63");
    long_name[63] = '\0';
    CHECK(sl_gguf_writer_add_tensor(w, long_name, SL_GGML_F32, 1, ne, &err) == SL_OK);
    /* Streaming starts: declarations are closed. */
    float zeros[64] = {0};
    CHECK(sl_gguf_writer_write(w, zeros, 4, &err) == SL_OK);
    CHECK(sl_gguf_writer_shard_count(w) == 1);
    CHECK(sl_gguf_writer_set_u32(w, "late", 1, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "late");
    CHECK(sl_gguf_writer_add_tensor(w, "late.t", SL_GGML_F32, 1, ne, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "after tensor data writing started");
    /* Less than declared: finish refuses, names the tensor; the writer stays usable. */
    CHECK(sl_gguf_writer_finish(w, &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "tensor 't' has 4 of 256 bytes");
    CHECK(sl_gguf_writer_write(w, zeros, 252, &err) == SL_OK);
    CHECK(sl_gguf_writer_write(w, zeros, 128, &err) == SL_OK);
    /* More than declared: refused, and the writer is failed from then on. */
    CHECK(sl_gguf_writer_write(w, zeros, 1, &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "exceeds the declared tensor data");
    CHECK(sl_gguf_writer_finish(w, &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "failed earlier");
    sl_gguf_writer_destroy(w);
    snprintf(stem, sizeof stem, "%s/e_tensors", g_dir);
    CHECK(nothing_left(stem));

    /* Options. */
    sl_gguf_writer_options o3 = {.alignment = 3};
    sl_gguf_writer *bad = NULL;
    char p[700];
    snprintf(p, sizeof p, "%s/e_opt.gguf", g_dir);
    CHECK(sl_gguf_writer_create(p, &o3, &bad, &err) == SL_ERR_INVALID && !bad);
    CHECK_CONTAINS(err.msg, "alignment 3");
    CHECK(sl_gguf_writer_create("", NULL, &bad, &err) == SL_ERR_INVALID);
    sl_gguf_writer_options o64 = {.alignment = 64};
    w = new_writer("e_align", &o64);
    CHECK(sl_gguf_writer_set_u32(w, "general.alignment", 32, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "disagrees");
    CHECK(sl_gguf_writer_set_u32(w, "general.alignment", 64, &err) == SL_OK);
    sl_gguf_writer_destroy(w);

    /* Unwritable path: the error names it and the errno text. */
    sl_gguf_writer *u = NULL;
    CHECK(sl_gguf_writer_create("/nonexistent-sluice-dir/m.gguf", NULL, &u, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(u, "t", SL_GGML_F32, 1, ne, &err) == SL_OK);
    CHECK(sl_gguf_writer_write(u, zeros, 8, &err) == SL_ERR_IO);
    CHECK_CONTAINS(err.msg, "/nonexistent-sluice-dir/m.gguf");
    CHECK_CONTAINS(err.msg, strerror(ENOENT));
    CHECK(sl_gguf_writer_finish(u, &err) == SL_ERR_IO);
    sl_gguf_writer_destroy(u);

    /* Destroying an unfinished (sharded) writer removes every file it created. */
    sl_gguf_writer_options os = {.shard_max_tensors = 1};
    w = new_writer("e_unfinished", &os);
    CHECK(sl_gguf_writer_add_tensor(w, "a", SL_GGML_F32, 1, ne, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(w, "b", SL_GGML_F32, 1, ne, &err) == SL_OK);
    CHECK(sl_gguf_writer_write(w, zeros, 128 + 8, &err) == SL_OK);
    CHECK(sl_gguf_writer_shard_count(w) == 2);
    snprintf(stem, sizeof stem, "%s/e_unfinished", g_dir);
    char sp[700];
    shard_name(sp, sizeof sp, stem, 1, 2);
    strcat(sp, ".partial");
    CHECK(exists(sp)); /* second shard in progress */
    sl_gguf_writer_destroy(w);
    CHECK(nothing_left(stem));
    sl_gguf_writer_destroy(NULL);

    /* Zero tensors: finish alone writes the file. A tensor over the byte limit gets its own
     * shard, the next ones share one. */
    w = new_writer("e_empty", NULL);
    CHECK(sl_gguf_writer_set_str(w, "general.name", "empty", &err) == SL_OK);
    CHECK(sl_gguf_writer_finish(w, &err) == SL_OK);
    CHECK(sl_gguf_writer_finish(w, &err) == SL_ERR_INVALID);
    sl_gguf_writer_destroy(w);
    snprintf(p, sizeof p, "%s/e_empty.gguf", g_dir);
    sl_gguf *g = NULL;
    CHECK_MSG(sl_gguf_open(p, NULL, &g, &err) == SL_OK, "%s", err.msg);
    if (g) {
        const char *name = NULL;
        CHECK(sl_gguf_tensor_count(g) == 0 && sl_gguf_kv_count(g) == 1);
        CHECK(sl_gguf_get_str(g, "general.name", &name, NULL) == SL_OK && !strcmp(name, "empty"));
        sl_gguf_close(g);
    }
    remove(p);

    sl_gguf_writer_options ob = {.shard_max_bytes = 64};
    w = new_writer("e_big", &ob);
    int64_t n25[1] = {25}, n10[1] = {10};
    CHECK(sl_gguf_writer_add_tensor(w, "big", SL_GGML_F32, 1, n25, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(w, "s1", SL_GGML_I8, 1, n10, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(w, "s2", SL_GGML_I8, 1, n10, &err) == SL_OK);
    CHECK(sl_gguf_writer_add_tensor(w, "s3", SL_GGML_I8, 1, n10, &err) == SL_OK);
    CHECK(sl_gguf_writer_write(w, zeros, 100 + 30, &err) == SL_OK);
    CHECK(sl_gguf_writer_finish(w, &err) == SL_OK);
    CHECK(sl_gguf_writer_shard_count(w) == 3); /* [big] [s1 s2] [s3] */
    sl_gguf_writer_destroy(w);
    snprintf(stem, sizeof stem, "%s/e_big", g_dir);
    shard_name(p, sizeof p, stem, 0, 3);
    CHECK_MSG(sl_gguf_open(p, NULL, &g, &err) == SL_OK, "%s", err.msg);
    if (g) {
        CHECK(sl_gguf_shard_count(g) == 3);
        const sl_gguf_tensor *s2 = sl_gguf_tensor_find(g, "s2");
        CHECK(s2 && s2->shard == 1 && s2->offset == 32);
        sl_gguf_close(g);
    }
    for (uint32_t k = 0; k < 3; k++) {
        shard_name(p, sizeof p, stem, k, 3);
        CHECK(remove(p) == 0);
    }
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/gguf_roundtrip.%ld", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    if (mkdir(g_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", g_dir, strerror(errno));
        return 1;
    }
    for (uint32_t c = 0; c < SL_GGML_TYPE_LIMIT; c++)
        if (sl_gguf_type_get(c)) g_live_types[g_n_live++] = c;
    CHECK(g_n_live >= 30);

    test_errors();
    test_cancel();
    rng seeds = {20261122};
    for (int i = 0; i < ROUNDS; i++) round_trip(rnd(&seeds), i);
    rmdir(g_dir);
    return sl_test_finish("gguf roundtrip");
}
