/* GGUF parser over an in-memory image (a read-only mmap of the file, or a fuzz input).
 *
 * Design: one pass with a bounds-checked cursor. Every count is checked against the bytes
 * that remain *before* anything is allocated for it (each element occupies at least a known
 * number of bytes in the file), so memory use is O(file size) whatever the header claims.
 * Scalar arrays are not copied: the value points into the image. Messages name the image,
 * the byte offset where the bad field starts, and the field. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_impl.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF parsing assumes a little-endian host");

typedef struct cursor {
    const uint8_t *buf;
    size_t len, pos;
    const char *name;
    uint32_t version;
    sl__arena *arena;
    sl_error *err;
} cursor;

static sl_status failv(cursor *c, sl_status code, size_t at, const char *field, const char *fmt,
                       va_list ap)
{
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    return sl_error_set(c->err, code, "%s: offset %zu: %s: %s", c->name, at, field, what);
}

__attribute__((format(printf, 4, 5)))
static sl_status fail(cursor *c, size_t at, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_status s = failv(c, SL_ERR_FORMAT, at, field, fmt, ap);
    va_end(ap);
    return s;
}

static size_t left(const cursor *c) { return c->len - c->pos; }

static sl_status need(cursor *c, size_t n, const char *field)
{
    if (left(c) < n)
        return fail(c, c->pos, field, "truncated: needs %zu bytes, %zu left in file", n, left(c));
    return SL_OK;
}

static sl_status rd(cursor *c, void *dst, size_t n, const char *field)
{
    sl_status s = need(c, n, field);
    if (s) return s;
    memcpy(dst, c->buf + c->pos, n);
    c->pos += n;
    return SL_OK;
}

/* Counts, lengths and dims were u32 in GGUF v1 and are u64 since v2. */
static size_t count_size(const cursor *c) { return c->version == 1 ? 4 : 8; }

static sl_status rd_count(cursor *c, uint64_t *out, const char *field)
{
    if (c->version == 1) {
        uint32_t v;
        sl_status s = rd(c, &v, 4, field);
        *out = v;
        return s;
    }
    return rd(c, out, 8, field);
}

/* A string: length then bytes, in place. */
static sl_status rd_str(cursor *c, sl_gguf_str *out, const char *field)
{
    size_t at = c->pos;
    uint64_t n;
    sl_status s = rd_count(c, &n, field);
    if (s) return s;
    if (n > left(c))
        return fail(c, at, field, "string length %" PRIu64 " exceeds the %zu bytes left in file",
                    n, left(c));
    out->ptr = (const char *)c->buf + c->pos;
    out->len = n;
    c->pos += (size_t)n;
    return SL_OK;
}

/* A key or tensor name: non-empty, no NUL inside (C strings are used downstream). */
static sl_status rd_name(cursor *c, const char **out, const char *field)
{
    size_t at = c->pos;
    sl_gguf_str s;
    sl_status st = rd_str(c, &s, field);
    if (st) return st;
    if (s.len == 0) return fail(c, at, field, "empty name");
    if (memchr(s.ptr, '\0', (size_t)s.len)) return fail(c, at, field, "name contains a NUL byte");
    *out = sl__arena_strndup(c->arena, s.ptr, (size_t)s.len);
    if (!*out) return sl_error_set(c->err, SL_ERR_NOMEM, "%s: out of memory for %s", c->name, field);
    return SL_OK;
}

static void *alloc_n(cursor *c, uint64_t n, size_t each, const char *field)
{
    if (n == 0) return NULL;
    if (n > SIZE_MAX / each) return NULL;
    void *p = sl__arena_alloc(c->arena, (size_t)n * each);
    if (!p) sl_error_set(c->err, SL_ERR_NOMEM, "%s: out of memory for %s", c->name, field);
    return p;
}

static sl_status rd_value(cursor *c, sl_gguf_vtype t, unsigned depth, sl_gguf_value *out,
                          const char *field);

static sl_status rd_array(cursor *c, unsigned depth, sl_gguf_value *out, const char *field)
{
    size_t at = c->pos;
    uint32_t et;
    sl_status s = rd(c, &et, 4, field);
    if (s) return s;
    if (et >= SL_GGUF_VTYPE_COUNT)
        return fail(c, at, field, "invalid array element type %" PRIu32, et);
    if (et == SL_GGUF_ARR && depth + 1 >= SL_GGUF_MAX_NESTING)
        return fail(c, at, field, "arrays nested deeper than %d levels", SL_GGUF_MAX_NESTING);
    size_t at_n = c->pos;
    uint64_t n;
    if ((s = rd_count(c, &n, field))) return s;
    /* Smallest encoding of one element, to refuse counts the file cannot hold. */
    size_t min_elem = sl_gguf_vtype_size(et);
    if (et == SL_GGUF_STR) min_elem = count_size(c);
    if (et == SL_GGUF_ARR) min_elem = 4 + count_size(c);
    if (n > left(c) / min_elem)
        return fail(c, at_n, field,
                    "array of %" PRIu64 " %s elements cannot fit in the %zu bytes left in file", n,
                    sl_gguf_vtype_name(et), left(c));
    out->type = SL_GGUF_ARR;
    out->v.arr.elem = (sl_gguf_vtype)et;
    out->v.arr.n = n;
    if (et == SL_GGUF_STR) {
        sl_gguf_str *strs = alloc_n(c, n, sizeof *strs, field);
        if (n && !strs) return SL_ERR_NOMEM;
        for (uint64_t i = 0; i < n; i++) {
            size_t at_i = c->pos;
            uint64_t len;
            size_t cs = count_size(c);
            if (left(c) < cs) return need(c, cs, field);
            if (cs == 4) {
                uint32_t l32;
                memcpy(&l32, c->buf + c->pos, 4);
                len = l32;
            } else {
                memcpy(&len, c->buf + c->pos, 8);
            }
            c->pos += cs;
            if (len > left(c))
                return fail(c, at_i, field,
                            "element %" PRIu64 ": string length %" PRIu64
                            " exceeds the %zu bytes left in file", i, len, left(c));
            strs[i].ptr = (const char *)c->buf + c->pos;
            strs[i].len = len;
            c->pos += (size_t)len;
        }
        out->v.arr.strs = strs;
    } else if (et == SL_GGUF_ARR) {
        sl_gguf_value *items = alloc_n(c, n, sizeof *items, field);
        if (n && !items) return SL_ERR_NOMEM;
        for (uint64_t i = 0; i < n; i++)
            if ((s = rd_array(c, depth + 1, &items[i], field))) return s;
        out->v.arr.items = items;
    } else {
        size_t bytes = (size_t)n * min_elem;
        out->v.arr.raw = c->buf + c->pos;
        if (et == SL_GGUF_BOOL)
            for (size_t i = 0; i < bytes; i++)
                if (c->buf[c->pos + i] > 1)
                    return fail(c, c->pos + i, field, "element %zu: bool byte %u is not 0 or 1",
                                i, c->buf[c->pos + i]);
        c->pos += bytes;
    }
    return SL_OK;
}

static sl_status rd_value(cursor *c, sl_gguf_vtype t, unsigned depth, sl_gguf_value *out,
                          const char *field)
{
    size_t at = c->pos;
    sl_status s = SL_OK;
    memset(out, 0, sizeof *out);
    out->type = t;
    switch (t) {
    case SL_GGUF_U8: { uint8_t x; s = rd(c, &x, 1, field); out->v.u64 = x; break; }
    case SL_GGUF_U16: { uint16_t x; s = rd(c, &x, 2, field); out->v.u64 = x; break; }
    case SL_GGUF_U32: { uint32_t x; s = rd(c, &x, 4, field); out->v.u64 = x; break; }
    case SL_GGUF_U64: s = rd(c, &out->v.u64, 8, field); break;
    case SL_GGUF_I8: { int8_t x; s = rd(c, &x, 1, field); out->v.i64 = x; break; }
    case SL_GGUF_I16: { int16_t x; s = rd(c, &x, 2, field); out->v.i64 = x; break; }
    case SL_GGUF_I32: { int32_t x; s = rd(c, &x, 4, field); out->v.i64 = x; break; }
    case SL_GGUF_I64: s = rd(c, &out->v.i64, 8, field); break;
    case SL_GGUF_F32: s = rd(c, &out->v.f32, 4, field); break;
    case SL_GGUF_F64: s = rd(c, &out->v.f64, 8, field); break;
    case SL_GGUF_BOOL: {
        uint8_t x;
        if ((s = rd(c, &x, 1, field))) break;
        if (x > 1) return fail(c, at, field, "bool byte %u is not 0 or 1", x);
        out->v.b = x;
        break;
    }
    case SL_GGUF_STR: {
        sl_gguf_str str;
        if ((s = rd_str(c, &str, field))) break;
        /* Scalar strings are copied so callers get NUL-terminated text. */
        char *d = sl__arena_strndup(c->arena, str.ptr, (size_t)str.len);
        if (!d) return sl_error_set(c->err, SL_ERR_NOMEM, "%s: out of memory for %s", c->name, field);
        out->v.str.ptr = d;
        out->v.str.len = str.len;
        break;
    }
    case SL_GGUF_ARR: s = rd_array(c, depth, out, field); break;
    default: return fail(c, at, field, "invalid value type %d", (int)t);
    }
    return s;
}

static const char *kv_name_at(const void *ctx, size_t i) { return ((const sl__gguf_kv *)ctx)[i].key; }

typedef struct span { uint64_t off, len; size_t idx; } span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

static sl_status parse_kv(cursor *c, sl__gguf_shard *sh, uint64_t n_kv)
{
    char field[160];
    sl_status s;
    sh->kv = alloc_n(c, n_kv, sizeof *sh->kv, "kv table");
    if (n_kv && !sh->kv) return SL_ERR_NOMEM;
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(field, sizeof field, "kv[%" PRIu64 "].key", i);
        if ((s = rd_name(c, &sh->kv[i].key, field))) return s;
        snprintf(field, sizeof field, "kv[%" PRIu64 "] '%.100s' type", i, sh->kv[i].key);
        size_t at = c->pos;
        uint32_t t;
        if ((s = rd(c, &t, 4, field))) return s;
        if (t >= SL_GGUF_VTYPE_COUNT) return fail(c, at, field, "invalid value type %" PRIu32, t);
        snprintf(field, sizeof field, "kv[%" PRIu64 "] '%.100s' value", i, sh->kv[i].key);
        if ((s = rd_value(c, (sl_gguf_vtype)t, 0, &sh->kv[i].val, field))) return s;
        sh->n_kv = (size_t)i + 1;
    }
    size_t d1, d2;
    s = sl__name_index_build(c->arena, &(sl__name_index){0}, sh->n_kv, kv_name_at, sh->kv, &d1, &d2);
    if (s == SL_ERR_FORMAT)
        return sl_error_set(c->err, SL_ERR_FORMAT, "%s: kv[%zu]: duplicate key '%s' (first at kv[%zu])",
                            c->name, d2, sh->kv[d2].key, d1);
    if (s) return sl_error_set(c->err, s, "%s: out of memory indexing keys", c->name);
    return SL_OK;
}

static sl_status parse_alignment(cursor *c, sl__gguf_shard *sh)
{
    sh->alignment = SL_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < sh->n_kv; i++) {
        if (strcmp(sh->kv[i].key, "general.alignment") != 0) continue;
        const sl_gguf_value *v = &sh->kv[i].val;
        if (v->type != SL_GGUF_U32)
            return sl_error_set(c->err, SL_ERR_FORMAT,
                                "%s: kv[%zu] 'general.alignment': type %s, must be u32", c->name, i,
                                sl_gguf_vtype_name(v->type));
        if (v->v.u64 == 0 || (v->v.u64 & (v->v.u64 - 1)))
            return sl_error_set(c->err, SL_ERR_FORMAT,
                                "%s: kv[%zu] 'general.alignment' = %" PRIu64
                                " is not a power of two", c->name, i, v->v.u64);
        sh->alignment = (uint32_t)v->v.u64;
    }
    return SL_OK;
}

static sl_status parse_tensor_info(cursor *c, sl__gguf_shard *sh, uint64_t i, sl_gguf_tensor *t)
{
    char field[200];
    sl_status s;
    snprintf(field, sizeof field, "tensor[%" PRIu64 "].name", i);
    if ((s = rd_name(c, &t->name, field))) return s;
    snprintf(field, sizeof field, "tensor[%" PRIu64 "] '%.100s' n_dims", i, t->name);
    size_t at = c->pos;
    if ((s = rd(c, &t->n_dims, 4, field))) return s;
    if (t->n_dims > SL_GGUF_MAX_DIMS)
        return fail(c, at, field, "n_dims %" PRIu32 " exceeds %d", t->n_dims, SL_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < SL_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        snprintf(field, sizeof field, "tensor[%" PRIu64 "] '%.100s' ne[%" PRIu32 "]", i, t->name, d);
        at = c->pos;
        uint64_t v;
        if ((s = rd_count(c, &v, field))) return s;
        if (v > (uint64_t)INT64_MAX)
            return fail(c, at, field, "dimension %" PRId64 " is negative", (int64_t)v);
        t->ne[d] = (int64_t)v;
    }
    snprintf(field, sizeof field, "tensor[%" PRIu64 "] '%.100s' type", i, t->name);
    at = c->pos;
    if ((s = rd(c, &t->type, 4, field))) return s;
    if (!sl_gguf_type_get(t->type))
        return fail(c, at, field, "%s ggml type code %" PRIu32,
                    sl_gguf_type_is_retired(t->type) ? "retired" : "unknown", t->type);
    snprintf(field, sizeof field, "tensor[%" PRIu64 "] '%.100s' offset", i, t->name);
    if ((s = rd(c, &t->offset, 8, field))) return s;
    /* A 0-dim tensor is a scalar: one element (ne[0] = 1 already). */
    sl_error e;
    snprintf(field, sizeof field, "tensor[%" PRIu64 "] '%.100s' shape", i, t->name);
    if (sl_gguf_type_nbytes(t->type, t->n_dims ? t->n_dims : 1, t->ne, &t->nbytes, field, &e))
        return sl_error_set(c->err, SL_ERR_FORMAT, "%s: offset %zu: %s", c->name, at, e.msg);
    (void)sh;
    return SL_OK;
}

static const char *tensor_name_at(const void *ctx, size_t i)
{
    return ((const sl_gguf_tensor *)ctx)[i].name;
}

static sl_status check_tensor_data(cursor *c, sl__gguf_shard *sh)
{
    /* Writers pad the tensor infos even when every tensor is empty, so a data section that
     * starts past the end means a truncated file (and would put offsets outside the image). */
    if (sh->n_tensors && sh->data_offset > c->len)
        return fail(c, c->pos, "data section", "starts at offset %" PRIu64 ", past the end of file (%zu bytes)",
                    sh->data_offset, c->len);
    uint64_t data_size = sh->data_offset <= c->len ? c->len - sh->data_offset : 0;
    for (size_t i = 0; i < sh->n_tensors; i++) {
        const sl_gguf_tensor *t = &sh->tensors[i];
        if (t->offset % sh->alignment)
            return sl_error_set(c->err, SL_ERR_FORMAT,
                                "%s: offset %" PRIu64 ": tensor[%zu] '%s' data: relative offset %" PRIu64
                                " is not a multiple of the alignment %" PRIu32,
                                c->name, sh->data_offset, i, t->name, t->offset, sh->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return sl_error_set(c->err, SL_ERR_FORMAT,
                                "%s: offset %" PRIu64 ": tensor[%zu] '%s' data: [%" PRIu64 ", +%" PRIu64
                                ") from the data section extends beyond the end of file (%zu bytes)",
                                c->name, sh->data_offset, i, t->name, t->offset, t->nbytes, c->len);
    }
    span *sp = alloc_n(c, sh->n_tensors, sizeof *sp, "tensor spans");
    if (sh->n_tensors && !sp) return SL_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < sh->n_tensors; i++)
        if (sh->tensors[i].nbytes) sp[n++] = (span){sh->tensors[i].offset, sh->tensors[i].nbytes, i};
    if (n > 1) qsort(sp, n, sizeof *sp, span_cmp);
    for (size_t k = 1; k < n; k++)
        if (sp[k - 1].off + sp[k - 1].len > sp[k].off)
            return sl_error_set(c->err, SL_ERR_FORMAT,
                                "%s: offset %" PRIu64 ": tensor[%zu] '%s' data: [%" PRIu64 ", +%" PRIu64
                                ") overlaps tensor[%zu] '%s' [%" PRIu64 ", +%" PRIu64 ")",
                                c->name, sh->data_offset + sp[k].off, sp[k].idx, sh->tensors[sp[k].idx].name, sp[k].off,
                                sp[k].len, sp[k - 1].idx, sh->tensors[sp[k - 1].idx].name,
                                sp[k - 1].off, sp[k - 1].len);
    return SL_OK;
}

sl_status sl__gguf_parse(sl__arena *a, const uint8_t *buf, size_t len, const char *name,
                         sl__gguf_shard *sh, sl_error *err)
{
    cursor cur = {.buf = buf, .len = len, .name = name, .version = 3, .arena = a, .err = err};
    cursor *c = &cur;
    sl_status s;
    char magic[4];
    if ((s = rd(c, magic, 4, "header.magic"))) return s;
    if (!memcmp(magic, "PWRI", 4)) {
        sh->powerinfer = true;
    } else if (memcmp(magic, "GGUF", 4)) {
        return fail(c, 0, "header.magic", "bad magic %02x %02x %02x %02x (expected \"GGUF\")",
                    (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    }
    uint32_t version;
    if ((s = rd(c, &version, 4, "header.version"))) return s;
    if (version != 0 && (version & 0xFFFF) == 0)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: offset 4: header.version: big-endian GGUF file (version reads "
                            "0x%08" PRIx32 " little-endian) is not supported", name, version);
    if (version < 1 || version > 3)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "%s: offset 4: header.version: unsupported GGUF version %" PRIu32
                            " (supported: 1, 2, 3)", name, version);
    c->version = version;
    sh->version = version;
    uint64_t n_tensors, n_kv;
    size_t at_nt = c->pos;
    if ((s = rd_count(c, &n_tensors, "header.n_tensors"))) return s;
    size_t at_nkv = c->pos;
    if ((s = rd_count(c, &n_kv, "header.n_kv"))) return s;
    /* key (length + >=1 byte) + type + >=1 value byte */
    size_t min_kv = count_size(c) + 1 + 4 + 1;
    /* name (length + >=1 byte) + n_dims + type + offset */
    size_t min_ti = count_size(c) + 1 + 4 + 4 + 8;
    if (n_kv > left(c) / min_kv)
        return fail(c, at_nkv, "header.n_kv", "%" PRIu64 " entries cannot fit in the %zu bytes left in file",
                    n_kv, left(c));
    if (n_tensors > left(c) / min_ti)
        return fail(c, at_nt, "header.n_tensors",
                    "%" PRIu64 " tensor infos cannot fit in the %zu bytes left in file", n_tensors,
                    left(c));
    if ((s = parse_kv(c, sh, n_kv))) return s;
    if ((s = parse_alignment(c, sh))) return s;
    sh->tensors = alloc_n(c, n_tensors, sizeof *sh->tensors, "tensor table");
    if (n_tensors && !sh->tensors) return SL_ERR_NOMEM;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((s = parse_tensor_info(c, sh, i, &sh->tensors[i]))) return s;
        sh->n_tensors = (size_t)i + 1;
    }
    size_t d1, d2;
    s = sl__name_index_build(a, &(sl__name_index){0}, sh->n_tensors, tensor_name_at, sh->tensors,
                             &d1, &d2);
    if (s == SL_ERR_FORMAT)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: tensor[%zu]: duplicate tensor name '%s' (first at tensor[%zu])",
                            name, d2, sh->tensors[d2].name, d1);
    if (s) return sl_error_set(err, s, "%s: out of memory indexing tensors", name);
    uint64_t pad = (sh->alignment - c->pos % sh->alignment) % sh->alignment;
    sh->data_offset = (uint64_t)c->pos + pad;
    if ((s = check_tensor_data(c, sh))) return s;
    for (size_t i = 0; i < sh->n_tensors; i++)
        sh->tensors[i].file_offset = sh->data_offset + sh->tensors[i].offset;
    return SL_OK;
}
