/* gguf/writer.c: the GGUF v3 writer (streaming, optionally sharded the way gguf-split does it).
 *
 * Design
 * - Declarations (KV and tensor infos) are kept in memory as deep copies; tensor data never is:
 *   sl_gguf_writer_write() hands it straight to a buffered FILE. Headers need every tensor's
 *   offset, so the plan (shard of each tensor, offsets, shard paths) is fixed when the first
 *   data byte (or finish) arrives; after that the file is written front to back in one pass.
 * - Offsets are the running sum of padded sizes within a shard, starting at 0: llama.cpp
 *   refuses any other layout, and gguf-py produces the same.
 * - Each file is written as "<final>.partial" and renamed at finish, so the final path never
 *   holds a half-written model (and a reader that has the previous version mapped is not
 *   truncated under its feet). destroy() of an unfinished writer removes what exists. The
 *   rename is only right over a regular file or nothing: base/file.h's output rule refuses
 *   devices, FIFOs and directories, and follows a symbolic link to the file it names.
 * - general.alignment: with options.alignment != 0 the writer stores it (as the first KV) unless
 *   the caller set it, in which case both must agree; with options.alignment == 0 a caller-set
 *   general.alignment decides the alignment (so KV copied from an opened file keeps its layout).
 * - split.no / split.count / split.tensors.count are reserved: the writer adds them (after the
 *   caller's KV, as gguf-split does) to every shard when sharding options are given, and to
 *   no file otherwise. Shards after the first hold only these three keys, preceded by
 *   general.alignment when the alignment is not the default 32. Without sharding,
 *   options.split_keys_verbatim lets the caller copy them (rewriting one shard of a set).
 *
 * Invariants while streaming (state W_STREAM):
 *   cur <= n_t;  cur < n_t  =>  cur_done < t[cur].nbytes (advance() skips finished tensors)
 *   written == sum(t[i].nbytes, i < cur) + cur_done <= total_nbytes
 *   f is open on shards[cur_shard].tmp, and cur < n_t  =>  t[cur].shard == cur_shard
 *   pos == bytes written to f so far. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "base/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf/writer.c copies raw array elements as they are: little-endian hosts only"
#endif

enum { GGUF_VERSION = 3, MAX_TENSOR_NAME = 63, MAX_SHARDS = 65535 /* split.count is a u16 */ };

static const char k_key_alignment[] = "general.alignment";
static const char k_key_split_no[] = "split.no";
static const char k_key_split_count[] = "split.count";
static const char k_key_split_tensors[] = "split.tensors.count";

/* ---- name set: open addressing over borrowed strings ------------------------------------ */

typedef struct name_set {
    const char **slots; /* NULL = empty; cap is a power of two, >= 2 * count */
    size_t cap, count;
} name_set;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static bool name_set_has(const name_set *ns, const char *s)
{
    if (!ns->cap) return false;
    for (size_t i = (size_t)fnv1a(s) & (ns->cap - 1);; i = (i + 1) & (ns->cap - 1)) {
        if (!ns->slots[i]) return false;
        if (!strcmp(ns->slots[i], s)) return true;
    }
}

static void name_set_put_nogrow(name_set *ns, const char *s)
{
    size_t i = (size_t)fnv1a(s) & (ns->cap - 1);
    while (ns->slots[i]) i = (i + 1) & (ns->cap - 1);
    ns->slots[i] = s;
    ns->count++;
}

/* s must outlive the set (it is the owned copy in the KV or tensor array). */
static bool name_set_put(name_set *ns, const char *s)
{
    if (2 * (ns->count + 1) > ns->cap) {
        name_set bigger = {calloc(ns->cap ? 2 * ns->cap : 16, sizeof(char *)),
                           ns->cap ? 2 * ns->cap : 16, 0};
        if (!bigger.slots) return false;
        for (size_t i = 0; i < ns->cap; i++)
            if (ns->slots[i]) name_set_put_nogrow(&bigger, ns->slots[i]);
        free(ns->slots);
        *ns = bigger;
    }
    name_set_put_nogrow(ns, s);
    return true;
}

/* ---- writer state ----------------------------------------------------------------------- */

typedef struct wkv {
    char *key;
    sl_gguf_value val; /* deep copy; every pointer inside is owned (freed by value_free) */
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[SL_GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t padded;    /* nbytes rounded up to the alignment (fixed by plan) */
    uint64_t offset;    /* within its shard's data section (fixed by plan) */
    uint32_t shard;
} wtensor;

typedef enum disk_state { DISK_NONE = 0, DISK_TMP, DISK_FINAL } disk_state;

typedef struct wshard {
    char *path;         /* final name (a link's target: see base/file.h) */
    char *tmp;          /* path + ".partial", written first; NULL until created */
    disk_state disk;    /* which of the two exists on disk (ours to remove if unfinished) */
    size_t first, count; /* tensors [first, first + count) */
} wshard;

typedef enum wstate { W_DECLARE = 0, W_STREAM, W_FINISHED, W_FAILED } wstate;

struct sl_gguf_writer {
    char *path;
    uint32_t alignment;         /* effective; may be changed by a general.alignment KV */
    bool align_from_option;     /* options.alignment != 0 */
    uint32_t shard_max_tensors;
    uint64_t shard_max_bytes;
    bool sharded;
    bool split_keys_verbatim;
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    bool (*cancelled)(void *user);
    void *cancelled_user;

    wkv *kv;
    size_t n_kv, cap_kv;
    name_set keys;
    bool user_alignment_kv;     /* caller set general.alignment */

    wtensor *t;
    size_t n_t, cap_t;
    name_set names;

    wstate state;
    sl_error failure;           /* why state became W_FAILED */
    wshard *shards;
    uint32_t n_shards;          /* 0 until planned */
    uint32_t cur_shard;
    FILE *f;
    uint64_t pos;
    size_t cur;
    uint64_t cur_done, written, total_nbytes;
};

/* ---- values: validation, deep copy, free ------------------------------------------------ */

static void value_free(sl_gguf_value *v)
{
    if (v->type == SL_GGUF_STR) {
        free((void *)v->v.str.ptr);
    } else if (v->type == SL_GGUF_ARR) {
        if (v->v.arr.elem == SL_GGUF_ARR && v->v.arr.items) {
            sl_gguf_value *items = (sl_gguf_value *)v->v.arr.items;
            for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&items[i]);
        }
        free((void *)v->v.arr.raw);
        free((void *)v->v.arr.strs); /* one block: the sl_gguf_str array, then the bytes */
        free((void *)v->v.arr.items);
    }
    memset(v, 0, sizeof *v);
}

/* depth: 0 for the KV's own value, +1 inside each array (so 8 nested arrays are allowed, as
 * the reader allows). */
static sl_status value_check(const sl_gguf_value *v, unsigned depth, const char *key,
                             sl_error *err)
{
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: {
        uint64_t max = v->type == SL_GGUF_U8 ? UINT8_MAX : v->type == SL_GGUF_U16 ? UINT16_MAX
                                                                                  : UINT32_MAX;
        if (v->v.u64 > max)
            return sl_error_set(err, SL_ERR_RANGE, "key '%s': %s value %" PRIu64 " out of range",
                                key, sl_gguf_vtype_name(v->type), v->v.u64);
        return SL_OK;
    }
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: {
        int64_t max = v->type == SL_GGUF_I8 ? INT8_MAX : v->type == SL_GGUF_I16 ? INT16_MAX
                                                                                : INT32_MAX;
        if (v->v.i64 > max || v->v.i64 < -max - 1)
            return sl_error_set(err, SL_ERR_RANGE, "key '%s': %s value %" PRId64 " out of range",
                                key, sl_gguf_vtype_name(v->type), v->v.i64);
        return SL_OK;
    }
    case SL_GGUF_U64: case SL_GGUF_I64: case SL_GGUF_F32: case SL_GGUF_F64: case SL_GGUF_BOOL:
        return SL_OK;
    case SL_GGUF_STR:
        if (!v->v.str.ptr && v->v.str.len)
            return sl_error_set(err, SL_ERR_INVALID, "key '%s': string of length %" PRIu64
                                " has a NULL pointer", key, v->v.str.len);
        return SL_OK;
    case SL_GGUF_ARR:
        break;
    default:
        return sl_error_set(err, SL_ERR_INVALID, "key '%s': value type %d is not a GGUF type",
                            key, (int)v->type);
    }
    sl_gguf_vtype et = v->v.arr.elem;
    uint64_t n = v->v.arr.n;
    if ((unsigned)et >= SL_GGUF_VTYPE_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "key '%s': array element type %d is not a GGUF "
                            "type", key, (int)et);
    if (et == SL_GGUF_ARR && depth + 1 >= SL_GGUF_MAX_NESTING)
        return sl_error_set(err, SL_ERR_RANGE, "key '%s': arrays nested deeper than %d levels",
                            key, SL_GGUF_MAX_NESTING);
    if (et == SL_GGUF_ARR) {
        if (n && !v->v.arr.items)
            return sl_error_set(err, SL_ERR_INVALID, "key '%s': array of %" PRIu64
                                " arrays has items == NULL", key, n);
        for (uint64_t i = 0; i < n; i++) {
            if (v->v.arr.items[i].type != SL_GGUF_ARR)
                return sl_error_set(err, SL_ERR_INVALID, "key '%s': element %" PRIu64 " of an "
                                    "array of arrays has type %s", key, i,
                                    sl_gguf_vtype_name(v->v.arr.items[i].type));
            sl_status s = value_check(&v->v.arr.items[i], depth + 1, key, err);
            if (s) return s;
        }
        return SL_OK;
    }
    if (et == SL_GGUF_STR) {
        if (n && !v->v.arr.strs)
            return sl_error_set(err, SL_ERR_INVALID, "key '%s': array of %" PRIu64
                                " strings has strs == NULL", key, n);
        if (n > SIZE_MAX / sizeof(sl_gguf_str))
            return sl_error_set(err, SL_ERR_RANGE, "key '%s': %" PRIu64 " strings do not fit "
                                "in memory", key, n);
        for (uint64_t i = 0; i < n; i++)
            if (!v->v.arr.strs[i].ptr && v->v.arr.strs[i].len)
                return sl_error_set(err, SL_ERR_INVALID, "key '%s': string element %" PRIu64
                                    " has a NULL pointer", key, i);
        return SL_OK;
    }
    size_t sz = sl_gguf_vtype_size(et);
    if (n && !v->v.arr.raw)
        return sl_error_set(err, SL_ERR_INVALID, "key '%s': array of %" PRIu64 " %s has raw == "
                            "NULL", key, n, sl_gguf_vtype_name(et));
    if (n > SIZE_MAX / sz)
        return sl_error_set(err, SL_ERR_RANGE, "key '%s': %" PRIu64 " %s elements do not fit "
                            "in memory", key, n, sl_gguf_vtype_name(et));
    if (et == SL_GGUF_BOOL) {
        /* Readers (ours, llama.cpp's checks) treat other bytes as corrupt files. */
        const unsigned char *p = v->v.arr.raw;
        for (uint64_t i = 0; i < n; i++)
            if (p[i] > 1)
                return sl_error_set(err, SL_ERR_RANGE, "key '%s': bool element %" PRIu64
                                    " is byte %u, not 0 or 1", key, i, p[i]);
    }
    return SL_OK;
}

/* Copies a value that passed value_check. On failure *dst is left freeable (zeroed parts). */
static sl_status value_copy(sl_gguf_value *dst, const sl_gguf_value *src, const char *key,
                            sl_error *err)
{
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    if (src->type == SL_GGUF_STR) {
        uint64_t len = src->v.str.len;
        if (len >= SIZE_MAX) goto nomem;
        char *p = malloc((size_t)len + 1);
        if (!p) goto nomem;
        if (len) memcpy(p, src->v.str.ptr, (size_t)len);
        p[len] = '\0';
        dst->v.str.ptr = p;
        dst->v.str.len = len;
        return SL_OK;
    }
    if (src->type != SL_GGUF_ARR) {
        dst->v = src->v;
        return SL_OK;
    }
    sl_gguf_vtype et = src->v.arr.elem;
    uint64_t n = src->v.arr.n;
    dst->v.arr.elem = et;
    if (et == SL_GGUF_ARR) {
        if (n) {
            sl_gguf_value *items = calloc((size_t)n, sizeof *items);
            if (!items) goto nomem;
            dst->v.arr.items = items;
            for (uint64_t i = 0; i < n; i++) {
                dst->v.arr.n = i; /* value_free frees exactly the items copied so far */
                sl_status s = value_copy(&items[i], &src->v.arr.items[i], key, err);
                if (s) {
                    dst->v.arr.n = i + 1;
                    return s;
                }
            }
        }
        dst->v.arr.n = n;
        return SL_OK;
    }
    dst->v.arr.n = n;
    if (et == SL_GGUF_STR) {
        /* One block: n sl_gguf_str, then the bytes (each NUL-terminated for convenience). */
        size_t head = (size_t)n * sizeof(sl_gguf_str), total = head;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t l = src->v.arr.strs[i].len;
            if (l >= SIZE_MAX - total) goto nomem;
            total += (size_t)l + 1;
        }
        char *block = malloc(total ? total : 1);
        if (!block) goto nomem;
        sl_gguf_str *strs = (sl_gguf_str *)(void *)block;
        char *p = block + head;
        for (uint64_t i = 0; i < n; i++) {
            size_t l = (size_t)src->v.arr.strs[i].len;
            if (l) memcpy(p, src->v.arr.strs[i].ptr, l);
            p[l] = '\0';
            strs[i].ptr = p;
            strs[i].len = l;
            p += l + 1;
        }
        dst->v.arr.strs = strs;
        return SL_OK;
    }
    size_t bytes = (size_t)n * sl_gguf_vtype_size(et);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw) goto nomem;
    if (bytes) memcpy(raw, src->v.arr.raw, bytes);
    dst->v.arr.raw = raw;
    return SL_OK;
nomem:
    return sl_error_set(err, SL_ERR_NOMEM, "key '%s': out of memory copying the value", key);
}

/* ---- create / declare ------------------------------------------------------------------- */

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

sl_status sl_gguf_writer_create(const char *path, const sl_gguf_writer_options *opt,
                                sl_gguf_writer **out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "gguf writer: out is NULL");
    *out = NULL;
    if (!path || !*path) return sl_error_set(err, SL_ERR_INVALID, "gguf writer: empty path");
    sl_gguf_writer_options o = {0};
    if (opt) o = *opt;
    if (o.alignment && !is_pow2(o.alignment))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: alignment %" PRIu32
                            " is not a power of two", path, o.alignment);
    sl_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", path);
    w->path = dup_str(path);
    if (!w->path) {
        free(w);
        return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", path);
    }
    w->alignment = o.alignment ? o.alignment : SL_GGUF_DEFAULT_ALIGNMENT;
    w->align_from_option = o.alignment != 0;
    w->shard_max_tensors = o.shard_max_tensors;
    w->shard_max_bytes = o.shard_max_bytes;
    w->sharded = o.shard_max_tensors || o.shard_max_bytes;
    w->split_keys_verbatim = o.split_keys_verbatim && !w->sharded;
    w->progress = o.progress;
    w->progress_user = o.progress_user;
    w->cancelled = o.cancelled;
    w->cancelled_user = o.cancelled_user;
    *out = w;
    return SL_OK;
}

static sl_status check_declaring(const sl_gguf_writer *w, const char *what, const char *name,
                                 sl_error *err)
{
    if (w->state == W_DECLARE) return SL_OK;
    return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: %s '%s' after tensor data writing "
                        "started (declare everything before the first write)", w->path, what,
                        name);
}

sl_status sl_gguf_writer_set(sl_gguf_writer *w, const char *key, const sl_gguf_value *v,
                             sl_error *err)
{
    if (!w || !key || !v)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer: set with a NULL argument");
    sl_status s = check_declaring(w, "key", key, err);
    if (s) return s;
    if (!*key) return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: empty key", w->path);
    if (name_set_has(&w->keys, key))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: duplicate key '%s'", w->path,
                            key);
    if (!w->split_keys_verbatim && (!strcmp(key, k_key_split_no) ||
                                    !strcmp(key, k_key_split_count) ||
                                    !strcmp(key, k_key_split_tensors)))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: key '%s' is reserved: the "
                            "writer sets the split keys itself when sharding", w->path, key);
    if ((s = value_check(v, 0, key, err))) return s;
    if (!strcmp(key, k_key_alignment)) {
        if (v->type != SL_GGUF_U32 || !is_pow2(v->v.u64))
            return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: '%s' must be a u32 power "
                                "of two (got %s%s)", w->path, key, sl_gguf_vtype_name(v->type),
                                v->type == SL_GGUF_U32 ? " that is not" : "");
        if (w->align_from_option && v->v.u64 != w->alignment)
            return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: '%s' = %" PRIu64
                                " disagrees with the alignment option %" PRIu32, w->path, key,
                                v->v.u64, w->alignment);
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
        w->kv = kv;
        w->cap_kv = cap;
    }
    wkv e = {dup_str(key), {0}};
    if (!e.key) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
    if ((s = value_copy(&e.val, v, key, err)) || !name_set_put(&w->keys, e.key)) {
        value_free(&e.val);
        free(e.key);
        return s ? s : sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
    }
    w->kv[w->n_kv++] = e;
    if (!strcmp(key, k_key_alignment)) {
        w->user_alignment_kv = true;
        w->alignment = (uint32_t)v->v.u64;
    }
    return SL_OK;
}

sl_status sl_gguf_writer_set_u32(sl_gguf_writer *w, const char *key, uint32_t v, sl_error *err)
{
    sl_gguf_value x = {.type = SL_GGUF_U32, .v.u64 = v};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_i32(sl_gguf_writer *w, const char *key, int32_t v, sl_error *err)
{
    sl_gguf_value x = {.type = SL_GGUF_I32, .v.i64 = v};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_u64(sl_gguf_writer *w, const char *key, uint64_t v, sl_error *err)
{
    sl_gguf_value x = {.type = SL_GGUF_U64, .v.u64 = v};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_f32(sl_gguf_writer *w, const char *key, float v, sl_error *err)
{
    sl_gguf_value x = {.type = SL_GGUF_F32, .v.f32 = v};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_bool(sl_gguf_writer *w, const char *key, bool v, sl_error *err)
{
    sl_gguf_value x = {.type = SL_GGUF_BOOL, .v.b = v};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_str(sl_gguf_writer *w, const char *key, const char *v, sl_error *err)
{
    if (!v)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer: key '%s': NULL string",
                            key ? key : "(null)");
    sl_gguf_value x = {.type = SL_GGUF_STR, .v.str = {v, strlen(v)}};
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_arr(sl_gguf_writer *w, const char *key, sl_gguf_vtype elem,
                                 const void *data, uint64_t n, sl_error *err)
{
    if (elem == SL_GGUF_STR || elem == SL_GGUF_ARR)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer: key '%s': set_arr takes scalar "
                            "elements, not %s (use set_arr_str or set)", key ? key : "(null)",
                            sl_gguf_vtype_name(elem));
    sl_gguf_value x = {.type = SL_GGUF_ARR};
    x.v.arr.elem = elem;
    x.v.arr.n = n;
    x.v.arr.raw = data;
    return sl_gguf_writer_set(w, key, &x, err);
}

sl_status sl_gguf_writer_set_arr_str(sl_gguf_writer *w, const char *key, const char *const *v,
                                     uint64_t n, sl_error *err)
{
    const char *k = key ? key : "(null)";
    if (n && !v)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer: key '%s': NULL string array", k);
    if (n > SIZE_MAX / sizeof(sl_gguf_str))
        return sl_error_set(err, SL_ERR_RANGE, "gguf writer: key '%s': %" PRIu64 " strings", k,
                            n);
    sl_gguf_str *strs = n ? malloc((size_t)n * sizeof *strs) : NULL;
    if (n && !strs)
        return sl_error_set(err, SL_ERR_NOMEM, "gguf writer: key '%s': out of memory", k);
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i]) {
            free(strs);
            return sl_error_set(err, SL_ERR_INVALID, "gguf writer: key '%s': string %" PRIu64
                                " is NULL", k, i);
        }
        strs[i].ptr = v[i];
        strs[i].len = strlen(v[i]);
    }
    sl_gguf_value x = {.type = SL_GGUF_ARR};
    x.v.arr.elem = SL_GGUF_STR;
    x.v.arr.n = n;
    x.v.arr.strs = strs;
    sl_status s = sl_gguf_writer_set(w, key, &x, err);
    free(strs);
    return s;
}

sl_status sl_gguf_writer_add_tensor(sl_gguf_writer *w, const char *name, uint32_t type,
                                    uint32_t n_dims, const int64_t *ne, sl_error *err)
{
    if (!w || !name)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer: add_tensor with a NULL argument");
    sl_status s = check_declaring(w, "tensor", name, err);
    if (s) return s;
    size_t len = strlen(name);
    if (!len) return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: empty tensor name",
                                  w->path);
    /* llama.cpp's GGML_MAX_NAME is 64 including the NUL: longer names make files it refuses. */
    if (len > MAX_TENSOR_NAME)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: tensor name '%s' is %zu bytes; "
                            "llama.cpp allows at most %d", w->path, name, len, MAX_TENSOR_NAME);
    if (name_set_has(&w->names, name))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: duplicate tensor '%s'", w->path,
                            name);
    if (!sl_gguf_type_get(type))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: tensor '%s': %s ggml type code "
                            "%" PRIu32, w->path, name,
                            sl_gguf_type_is_retired(type) ? "retired" : "unknown", type);
    if (n_dims < 1 || n_dims > SL_GGUF_MAX_DIMS)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: tensor '%s': n_dims %" PRIu32
                            " not in 1..%d", w->path, name, n_dims, SL_GGUF_MAX_DIMS);
    if (!ne)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: tensor '%s': ne is NULL",
                            w->path, name);
    uint64_t nbytes;
    char what[MAX_TENSOR_NAME + 16];
    snprintf(what, sizeof what, "tensor '%s'", name);
    sl_error e2;
    if (sl_gguf_type_nbytes(type, n_dims, ne, &nbytes, what, &e2))
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: %s", w->path, e2.msg);
    if (nbytes > UINT64_MAX - w->total_nbytes)
        return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: tensor '%s': total data size "
                            "overflows", w->path, name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
        w->t = t;
        w->cap_t = cap;
    }
    wtensor e = {.name = dup_str(name), .type = type, .n_dims = n_dims, .nbytes = nbytes};
    for (uint32_t d = 0; d < n_dims; d++) e.ne[d] = ne[d];
    for (uint32_t d = n_dims; d < SL_GGUF_MAX_DIMS; d++) e.ne[d] = 1;
    if (!e.name || !name_set_put(&w->names, e.name)) {
        free(e.name);
        return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
    }
    w->t[w->n_t++] = e;
    w->total_nbytes += nbytes;
    return SL_OK;
}

/* ---- plan: shards, offsets, paths -------------------------------------------------------- */

static sl_status plan(sl_gguf_writer *w, sl_error *err)
{
    uint64_t a = w->alignment;
    uint32_t n_shards = 1;
    uint64_t shard_bytes = 0, cnt = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        if (t->nbytes > (uint64_t)INT64_MAX - (a - 1))
            return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: tensor '%s' of %" PRIu64
                                " bytes is too large", w->path, t->name, t->nbytes);
        t->padded = (t->nbytes + a - 1) / a * a;
        /* gguf-split's rule: close the shard when the next tensor would exceed a limit, but
         * never leave a shard empty (a tensor over the byte limit gets a shard of its own). */
        if (w->sharded && cnt > 0 &&
            ((w->shard_max_tensors && cnt + 1 > w->shard_max_tensors) ||
             (w->shard_max_bytes && (shard_bytes > w->shard_max_bytes ||
                                     t->padded > w->shard_max_bytes - shard_bytes)))) {
            if (n_shards == MAX_SHARDS)
                return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: more than %d shards "
                                    "(split.count is a u16)", w->path, MAX_SHARDS);
            n_shards++;
            shard_bytes = 0;
            cnt = 0;
        }
        if (t->padded > (uint64_t)INT64_MAX - shard_bytes)
            return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: data section of shard %" PRIu32
                                " overflows at tensor '%s'", w->path, n_shards, t->name);
        t->shard = n_shards - 1;
        t->offset = shard_bytes;
        shard_bytes += t->padded;
        cnt++;
    }
    if (w->sharded && w->n_t > INT32_MAX)
        return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: %zu tensors exceed split.tensors"
                            ".count (i32)", w->path, w->n_t);
    w->shards = calloc(n_shards, sizeof *w->shards);
    if (!w->shards) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
    w->n_shards = n_shards;
    for (size_t i = 0; i < w->n_t; i++) {
        wshard *sh = &w->shards[w->t[i].shard];
        if (!sh->count) sh->first = i;
        sh->count++;
    }
    size_t plen = strlen(w->path);
    size_t stem = plen;
    if (plen > 5 && !strcmp(w->path + plen - 5, ".gguf")) stem = plen - 5;
    for (uint32_t k = 0; k < n_shards; k++) {
        size_t cap = plen + 32;
        char *p = malloc(cap);
        if (!p) return sl_error_set(err, SL_ERR_NOMEM, "gguf writer %s: out of memory", w->path);
        if (w->sharded)
            snprintf(p, cap, "%.*s-%05" PRIu32 "-of-%05" PRIu32 ".gguf", (int)stem, w->path,
                     k + 1, n_shards);
        else
            snprintf(p, cap, "%s", w->path);
        /* base/file.h's output rule: a regular file or nothing, links followed */
        bool exists;
        struct stat st;
        sl_error e = {0};
        const sl_status s = sl_file_output_resolve(p, &w->shards[k].path, &exists, &st, &e);
        free(p);
        if (s) return sl_error_set(err, s, "gguf writer: %s", e.msg);
    }
    return SL_OK;
}

/* ---- output ----------------------------------------------------------------------------- */

/* Marks the writer failed: an I/O error or a data-count violation leaves the files in an
 * unknown state, so every later write/finish repeats this message. */
static sl_status fail(sl_gguf_writer *w, sl_error *err, sl_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static sl_status fail(sl_gguf_writer *w, sl_error *err, sl_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_error_setv(&w->failure, code, fmt, ap);
    va_end(ap);
    w->state = W_FAILED;
    return sl_error_set(err, code, "%s", w->failure.msg);
}

/* The caller's cancel hook said stop: the writer fails, destroy removes its files. */
static sl_status check_cancelled(sl_gguf_writer *w, sl_error *err)
{
    if (!w->cancelled || !w->cancelled(w->cancelled_user)) return SL_OK;
    return fail(w, err, SL_ERR_INVALID, "gguf writer %s: cancelled after %" PRIu64 " of %" PRIu64
                " tensor bytes", w->path, w->written, w->total_nbytes);
}

static sl_status out_bytes(sl_gguf_writer *w, const void *p, size_t n, sl_error *err)
{
    if (!n) return SL_OK;
    if (fwrite(p, 1, n, w->f) != n) {
        int e = errno;
        return fail(w, err, SL_ERR_IO, "gguf writer: %s: write failed at byte %" PRIu64 ": %s",
                    w->shards[w->cur_shard].tmp, w->pos, strerror(e));
    }
    w->pos += n;
    return SL_OK;
}

static sl_status out_le(sl_gguf_writer *w, uint64_t x, unsigned bytes, sl_error *err)
{
    unsigned char b[8];
    for (unsigned i = 0; i < bytes; i++) b[i] = (unsigned char)(x >> (8 * i));
    return out_bytes(w, b, bytes, err);
}

static sl_status out_str(sl_gguf_writer *w, const char *p, uint64_t len, sl_error *err)
{
    sl_status s = out_le(w, len, 8, err);
    return s ? s : out_bytes(w, p, (size_t)len, err);
}

static sl_status out_zeros(sl_gguf_writer *w, uint64_t n, sl_error *err)
{
    static const unsigned char zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        sl_status s = out_bytes(w, zeros, k, err);
        if (s) return s;
        n -= k;
    }
    return SL_OK;
}

/* The value's payload (type code already written by the caller). */
static sl_status out_value(sl_gguf_writer *w, const sl_gguf_value *v, sl_error *err)
{
    sl_status s;
    switch (v->type) {
    case SL_GGUF_U8: case SL_GGUF_U16: case SL_GGUF_U32: case SL_GGUF_U64:
        return out_le(w, v->v.u64, (unsigned)sl_gguf_vtype_size(v->type), err);
    case SL_GGUF_I8: case SL_GGUF_I16: case SL_GGUF_I32: case SL_GGUF_I64:
        return out_le(w, (uint64_t)v->v.i64, (unsigned)sl_gguf_vtype_size(v->type), err);
    case SL_GGUF_F32: {
        uint32_t b;
        memcpy(&b, &v->v.f32, 4);
        return out_le(w, b, 4, err);
    }
    case SL_GGUF_F64: {
        uint64_t b;
        memcpy(&b, &v->v.f64, 8);
        return out_le(w, b, 8, err);
    }
    case SL_GGUF_BOOL: return out_le(w, v->v.b ? 1 : 0, 1, err);
    case SL_GGUF_STR: return out_str(w, v->v.str.ptr, v->v.str.len, err);
    default: break; /* SL_GGUF_ARR; value_check refused everything else */
    }
    uint64_t n = v->v.arr.n;
    if ((s = out_le(w, (uint32_t)v->v.arr.elem, 4, err)) || (s = out_le(w, n, 8, err))) return s;
    if (v->v.arr.elem == SL_GGUF_STR) {
        for (uint64_t i = 0; i < n; i++)
            if ((s = out_str(w, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len, err))) return s;
        return SL_OK;
    }
    if (v->v.arr.elem == SL_GGUF_ARR) {
        for (uint64_t i = 0; i < n; i++) {
            /* Nested arrays carry no type code of their own: the outer elem says ARR. */
            if ((s = out_value(w, &v->v.arr.items[i], err))) return s;
        }
        return SL_OK;
    }
    return out_bytes(w, v->v.arr.raw, (size_t)n * sl_gguf_vtype_size(v->v.arr.elem), err);
}

static sl_status out_kv(sl_gguf_writer *w, const char *key, const sl_gguf_value *v, sl_error *err)
{
    sl_status s = out_str(w, key, strlen(key), err);
    if (!s) s = out_le(w, (uint32_t)v->type, 4, err);
    if (!s) s = out_value(w, v, err);
    return s;
}

static sl_status open_shard(sl_gguf_writer *w, uint32_t k, sl_error *err)
{
    wshard *sh = &w->shards[k];
    w->cur_shard = k;
    w->pos = 0;
    sl_error e = {0};
    int fd;
    const sl_status ts = sl_file_temp_create(sh->path, &sh->tmp, &fd, &e);
    if (ts) return fail(w, err, ts, "gguf writer: %s", e.msg);
    sh->disk = DISK_TMP;
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        const int en = errno;
        close(fd);
        return fail(w, err, SL_ERR_IO, "gguf writer: %s: fdopen: %s", sh->tmp, strerror(en));
    }
    /* Large buffer: headers are written field by field. Failure only means a smaller one. */
    (void)setvbuf(w->f, NULL, _IOFBF, 1 << 20);

    /* Shards after the first carry general.alignment too when it is not the default: each
     * file is parsed on its own (llama.cpp, gguf-py), and gguf-split's habit of falling back
     * to 32 there would lose an alignment chosen for O_DIRECT. */
    bool add_alignment = k == 0 ? w->align_from_option && !w->user_alignment_kv
                                : w->alignment != SL_GGUF_DEFAULT_ALIGNMENT;
    uint64_t n_kv = (k == 0 ? w->n_kv : 0) + (add_alignment ? 1 : 0) + (w->sharded ? 3 : 0);
    sl_status s;
    if ((s = out_bytes(w, "GGUF", 4, err)) || (s = out_le(w, GGUF_VERSION, 4, err)) ||
        (s = out_le(w, sh->count, 8, err)) || (s = out_le(w, n_kv, 8, err)))
        return s;
    if (add_alignment) {
        sl_gguf_value a = {.type = SL_GGUF_U32, .v.u64 = w->alignment};
        if ((s = out_kv(w, k_key_alignment, &a, err))) return s;
    }
    if (k == 0)
        for (size_t i = 0; i < w->n_kv; i++)
            if ((s = out_kv(w, w->kv[i].key, &w->kv[i].val, err))) return s;
    if (w->sharded) {
        sl_gguf_value no = {.type = SL_GGUF_U16, .v.u64 = k};
        sl_gguf_value count = {.type = SL_GGUF_U16, .v.u64 = w->n_shards};
        sl_gguf_value total = {.type = SL_GGUF_I32, .v.i64 = (int64_t)w->n_t};
        if ((s = out_kv(w, k_key_split_no, &no, err)) ||
            (s = out_kv(w, k_key_split_count, &count, err)) ||
            (s = out_kv(w, k_key_split_tensors, &total, err)))
            return s;
    }
    for (size_t i = sh->first; i < sh->first + sh->count; i++) {
        const wtensor *t = &w->t[i];
        if ((s = out_str(w, t->name, strlen(t->name), err)) || (s = out_le(w, t->n_dims, 4, err)))
            return s;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if ((s = out_le(w, (uint64_t)t->ne[d], 8, err))) return s;
        if ((s = out_le(w, t->type, 4, err)) || (s = out_le(w, t->offset, 8, err))) return s;
    }
    return out_zeros(w, (w->alignment - w->pos % w->alignment) % w->alignment, err);
}

/* Flushes and closes the current file; ENOSPC often shows up only here. */
static sl_status close_shard(sl_gguf_writer *w, sl_error *err)
{
    const char *tmp = w->shards[w->cur_shard].tmp;
    int e = 0;
    if (fflush(w->f) != 0 || ferror(w->f)) e = errno ? errno : EIO;
    if (fclose(w->f) != 0 && !e) e = errno ? errno : EIO;
    w->f = NULL;
    if (e) return fail(w, err, SL_ERR_IO, "gguf writer: %s: flush/close failed: %s", tmp,
                       strerror(e));
    return SL_OK;
}

/* Moves past completed (and zero-size) tensors: pads them and switches shards as planned. */
static sl_status advance(sl_gguf_writer *w, sl_error *err)
{
    while (w->cur < w->n_t && w->cur_done == w->t[w->cur].nbytes) {
        const wtensor *t = &w->t[w->cur];
        sl_status s = out_zeros(w, t->padded - t->nbytes, err);
        if (s) return s;
        w->cur++;
        w->cur_done = 0;
        if (w->cur < w->n_t && w->t[w->cur].shard != w->cur_shard) {
            if ((s = close_shard(w, err)) || (s = open_shard(w, w->t[w->cur].shard, err)))
                return s;
        }
    }
    return SL_OK;
}

static sl_status start(sl_gguf_writer *w, sl_error *err)
{
    sl_status s = plan(w, err);
    if (s) return s; /* nothing on disk yet: the caller may still fix declarations */
    w->state = W_STREAM;
    if ((s = open_shard(w, 0, err))) return s;
    return advance(w, err);
}

static sl_status check_streamable(sl_gguf_writer *w, sl_error *err)
{
    if (w->state == W_FAILED)
        return sl_error_set(err, w->failure.code, "%s (writer failed earlier)", w->failure.msg);
    if (w->state == W_FINISHED)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: already finished", w->path);
    if (w->state == W_DECLARE) {
        if (w->shards) { /* an earlier plan failed: drop it */
            for (uint32_t k = 0; k < w->n_shards; k++) {
                free(w->shards[k].path);
                free(w->shards[k].tmp);
            }
            free(w->shards);
            w->shards = NULL;
            w->n_shards = 0;
        }
        return start(w, err);
    }
    return SL_OK;
}

sl_status sl_gguf_writer_write(sl_gguf_writer *w, const void *data, uint64_t n, sl_error *err)
{
    if (!w) return sl_error_set(err, SL_ERR_INVALID, "gguf writer: write with a NULL writer");
    if (n && !data)
        return sl_error_set(err, SL_ERR_INVALID, "gguf writer %s: write of %" PRIu64 " bytes "
                            "from NULL", w->path, n);
    sl_status s = check_streamable(w, err);
    if (s) return s;
    if ((s = check_cancelled(w, err))) return s;
    if (n > w->total_nbytes - w->written)
        return fail(w, err, SL_ERR_RANGE, "gguf writer %s: write of %" PRIu64 " bytes exceeds "
                    "the declared tensor data: %" PRIu64 " of %" PRIu64 " bytes remain", w->path,
                    n, w->total_nbytes - w->written, w->total_nbytes);
    const unsigned char *p = data;
    while (n) {
        const wtensor *t = &w->t[w->cur];
        uint64_t k = t->nbytes - w->cur_done;
        if (k > n) k = n;
        if ((s = out_bytes(w, p, (size_t)k, err))) return s;
        p += k;
        n -= k;
        w->cur_done += k;
        w->written += k;
        if ((s = advance(w, err))) return s;
    }
    if (w->progress) w->progress(w->progress_user, w->written, w->total_nbytes);
    return SL_OK;
}

sl_status sl_gguf_writer_finish(sl_gguf_writer *w, sl_error *err)
{
    if (!w) return sl_error_set(err, SL_ERR_INVALID, "gguf writer: finish with a NULL writer");
    sl_status s = check_streamable(w, err);
    if (s) return s;
    if ((s = check_cancelled(w, err))) return s;
    if (w->cur < w->n_t)
        return sl_error_set(err, SL_ERR_RANGE, "gguf writer %s: tensor '%s' has %" PRIu64 " of "
                            "%" PRIu64 " bytes written (%" PRIu64 " of %" PRIu64 " bytes of all "
                            "tensors); finish needs every declared byte", w->path,
                            w->t[w->cur].name, w->cur_done, w->t[w->cur].nbytes, w->written,
                            w->total_nbytes);
    if ((s = close_shard(w, err))) return s;
    for (uint32_t k = 0; k < w->n_shards; k++) {
        wshard *sh = &w->shards[k];
        if (rename(sh->tmp, sh->path) != 0) {
            int e = errno;
            return fail(w, err, SL_ERR_IO, "gguf writer: cannot rename %s to %s: %s", sh->tmp,
                        sh->path, strerror(e));
        }
        sh->disk = DISK_FINAL;
    }
    w->state = W_FINISHED;
    return SL_OK;
}

void sl_gguf_writer_destroy(sl_gguf_writer *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    for (uint32_t k = 0; k < w->n_shards; k++) {
        wshard *sh = &w->shards[k];
        if (w->state != W_FINISHED && sh->disk == DISK_TMP) remove(sh->tmp);
        if (w->state != W_FINISHED && sh->disk == DISK_FINAL) remove(sh->path);
        free(sh->path);
        free(sh->tmp);
    }
    free(w->shards);
    for (size_t i = 0; i < w->n_kv; i++) {
        value_free(&w->kv[i].val);
        free(w->kv[i].key);
    }
    free(w->kv);
    free(w->keys.slots);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w->names.slots);
    free(w->path);
    free(w);
}

uint32_t sl_gguf_writer_shard_count(const sl_gguf_writer *w)
{
    return w && w->state != W_DECLARE ? w->n_shards : 0;
}
