/* GGUF reader: files, shard sets, lookup and tensor data access.
 *
 * Each file is mapped read-only once; headers are parsed from the mapping (see parse.c), so a
 * 150k-entry vocabulary costs no system calls. Data is reached through the mapping, pread, or
 * O_DIRECT into caller buffers (the "kernel-bypass" load path of DESIGN.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_impl.h"
#include "base/file.h"

static const char *tensor_name_at(const void *ctx, size_t i)
{
    return ((const sl_gguf_tensor *)ctx)[i].name;
}

static const char *kv_name_at(const void *ctx, size_t i) { return ((const sl__gguf_kv *)ctx)[i].key; }

/* Recognises PREFIX-%05d-of-%05d.gguf (llama.cpp's split naming); returns false otherwise. */
static bool split_name(const char *path, size_t *prefix_len, unsigned *no, unsigned *count)
{
    size_t n = strlen(path);
    const size_t tail = strlen("-00001-of-00005.gguf");
    if (n <= tail) return false;
    const char *p = path + n - tail;
    if (p[0] != '-' || memcmp(p + 6, "-of-", 4) || strcmp(p + 15, ".gguf")) return false;
    unsigned a = 0, b = 0;
    for (int i = 1; i <= 5; i++) {
        if (p[i] < '0' || p[i] > '9' || p[i + 9] < '0' || p[i + 9] > '9') return false;
        a = a * 10 + (unsigned)(p[i] - '0');
        b = b * 10 + (unsigned)(p[i + 9] - '0');
    }
    if (a < 1 || b < 1 || a > b) return false;
    *prefix_len = n - tail;
    *no = a;
    *count = b;
    return true;
}

static sl_status map_file(sl_gguf *g, sl__gguf_shard *sh, const char *path, sl_error *err)
{
    sh->fd = sh->fd_direct = -1;
    sh->path = sl__arena_strndup(&g->arena, path, strlen(path));
    if (!sh->path) return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory", path);
    /* never blocks on a FIFO, refuses anything but a regular file (base/file.h) */
    struct stat st;
    sl_status s = sl_file_open_input(path, &sh->fd, &st, err);
    if (s) return s;
    sh->size = (size_t)st.st_size;
    sh->mtime_sec = (int64_t)st.st_mtim.tv_sec;
    sh->mtime_nsec = (int64_t)st.st_mtim.tv_nsec;
    if (sh->size > 0) {
        void *m = mmap(NULL, sh->size, PROT_READ, MAP_PRIVATE, sh->fd, 0);
        if (m == MAP_FAILED)
            return sl_error_set(err, SL_ERR_IO, "%s: mmap of %zu bytes: %s", path, sh->size,
                                strerror(errno));
        sh->map = m;
        sh->owns_map = true;
    }
    /* Refused by some file systems (tmpfs): reads then fall back to pread with a notice. */
    sh->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
    /* the name may point elsewhere by now: only the file already opened may be read */
    struct stat sd;
    const int fl = sh->fd_direct >= 0 ? fcntl(sh->fd_direct, F_GETFL) : -1;
    if (sh->fd_direct >= 0 &&
        (fstat(sh->fd_direct, &sd) != 0 || sd.st_dev != st.st_dev || sd.st_ino != st.st_ino ||
         fl < 0 || fcntl(sh->fd_direct, F_SETFL, fl & ~O_NONBLOCK) != 0)) {
        close(sh->fd_direct);
        sh->fd_direct = -1;
    }
    return SL_OK;
}

static sl_status get_split_u(const sl__gguf_shard *sh, const char *key, sl_gguf_vtype want,
                             bool *present, int64_t *out, sl_error *err)
{
    *present = false;
    for (size_t i = 0; i < sh->n_kv; i++) {
        if (strcmp(sh->kv[i].key, key)) continue;
        const sl_gguf_value *v = &sh->kv[i].val;
        if (v->type != want)
            return sl_error_set(err, SL_ERR_FORMAT, "%s: kv '%s' has type %s, expected %s", sh->path,
                                key, sl_gguf_vtype_name(v->type), sl_gguf_vtype_name(want));
        *present = true;
        *out = want == SL_GGUF_I32 ? v->v.i64 : (int64_t)v->v.u64;
    }
    return SL_OK;
}

/* split.no / split.count / split.tensors.count must describe exactly the set that was opened. */
static sl_status check_splits(sl_gguf *g, sl_error *err)
{
    for (uint32_t i = 0; i < g->n_shards; i++) {
        const sl__gguf_shard *sh = &g->shards[i];
        bool has_no, has_count, has_total;
        int64_t no = 0, count = 0, total = 0;
        sl_status s;
        if ((s = get_split_u(sh, "split.no", SL_GGUF_U16, &has_no, &no, err))) return s;
        if ((s = get_split_u(sh, "split.count", SL_GGUF_U16, &has_count, &count, err))) return s;
        if ((s = get_split_u(sh, "split.tensors.count", SL_GGUF_I32, &has_total, &total, err)))
            return s;
        if (g->n_shards == 1 && (!has_count || g->lone_shard)) return SL_OK;
        if (g->n_shards == 1 && count > 1)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "%s: file is one shard of %" PRId64 " (split.count) but its name does not "
                                "follow PREFIX-%%05d-of-%%05d.gguf, so the others cannot be found",
                                sh->path, count);
        if (!has_no || !has_count)
            return sl_error_set(err, SL_ERR_FORMAT, "%s: shard %u of %u lacks split.no or split.count",
                                sh->path, i + 1, g->n_shards);
        if (no != (int64_t)i || count != (int64_t)g->n_shards)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "%s: split.no = %" PRId64 ", split.count = %" PRId64
                                " but the file name says shard %u of %u",
                                sh->path, no, count, i + 1, g->n_shards);
        if (i == 0 && !has_total)
            return sl_error_set(err, SL_ERR_FORMAT, "%s: first shard lacks split.tensors.count", sh->path);
        if (has_total && total != (int64_t)g->n_tensors)
            return sl_error_set(err, SL_ERR_FORMAT,
                                "%s: split.tensors.count = %" PRId64 " but the %u shards hold %zu tensors",
                                sh->path, total, g->n_shards, g->n_tensors);
    }
    return SL_OK;
}

static sl_status index_all(sl_gguf *g, sl_error *err)
{
    size_t total = 0;
    for (uint32_t i = 0; i < g->n_shards; i++) total += g->shards[i].n_tensors;
    if (total) {
        g->tensors = sl__arena_alloc(&g->arena, total * sizeof *g->tensors);
        if (!g->tensors) return sl_error_set(err, SL_ERR_NOMEM, "out of memory for %zu tensors", total);
    }
    for (uint32_t i = 0; i < g->n_shards; i++) {
        sl__gguf_shard *sh = &g->shards[i];
        for (size_t k = 0; k < sh->n_tensors; k++) {
            sl_gguf_tensor *t = &g->tensors[g->n_tensors++];
            *t = sh->tensors[k];
            t->shard = i;
            t->path = sh->path;
            t->mtime_sec = sh->mtime_sec;
            t->mtime_nsec = sh->mtime_nsec;
        }
        if (sh->n_tensors) sh->tensors = g->tensors + (g->n_tensors - sh->n_tensors);
    }
    size_t d1, d2;
    sl_status s = sl__name_index_build(&g->arena, &g->tensor_index, g->n_tensors, tensor_name_at,
                                       g->tensors, &d1, &d2);
    if (s == SL_ERR_FORMAT)
        return sl_error_set(err, SL_ERR_FORMAT, "%s: duplicate tensor '%s' (also in %s)",
                            g->tensors[d2].path, g->tensors[d2].name, g->tensors[d1].path);
    if (s) return sl_error_set(err, s, "out of memory indexing tensors");
    s = sl__name_index_build(&g->arena, &g->kv_index, g->shards[0].n_kv, kv_name_at, g->shards[0].kv,
                             &d1, &d2);
    if (s) return sl_error_set(err, s, "indexing keys failed");
    return SL_OK;
}

static sl_gguf *new_handle(uint32_t n_shards, const sl_gguf_options *opt, sl_error *err)
{
    sl_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    atomic_init(&g->direct_notice_done, false);
    g->shards = sl__arena_alloc(&g->arena, n_shards * sizeof *g->shards);
    if (!g->shards) {
        free(g);
        sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (uint32_t i = 0; i < n_shards; i++) g->shards[i].fd = g->shards[i].fd_direct = -1;
    if (opt) {
        g->lone_shard = opt->no_shards;
        g->notice = opt->notice;
        g->notice_user = opt->notice_user;
    }
    return g;
}

/* Shared tail of both opens: one namespace over the shards, split keys checked, or cleanup. */
static sl_status finish_open(sl_gguf *g, sl_status s, sl_gguf **out, sl_error *err)
{
    if (!s) s = index_all(g, err);
    if (!s) s = check_splits(g, err);
    if (s) {
        sl_gguf_close(g);
        return s;
    }
    *out = g;
    return SL_OK;
}

sl_status sl_gguf_open(const char *path, const sl_gguf_options *opt, sl_gguf **out, sl_error *err)
{
    if (!path || !out) return sl_error_set(err, SL_ERR_INVALID, "sl_gguf_open: path and out are required");
    *out = NULL;
    size_t prefix_len = 0;
    unsigned no = 1, count = 1;
    bool split = !(opt && opt->no_shards) && split_name(path, &prefix_len, &no, &count);
    if (!split) count = 1;
    sl_gguf *g = new_handle(count, opt, err);
    if (!g) return err ? err->code : SL_ERR_NOMEM;
    sl_status s = SL_OK;
    for (unsigned i = 0; i < count && !s; i++) {
        char buf[4096];
        const char *p = path;
        if (split) {
            if (prefix_len + 32 > sizeof buf) {
                s = sl_error_set(err, SL_ERR_INVALID, "%s: path too long", path);
                break;
            }
            snprintf(buf, sizeof buf, "%.*s-%05u-of-%05u.gguf", (int)prefix_len, path, i + 1, count);
            p = buf;
        }
        g->n_shards = i + 1;
        sl__gguf_shard *sh = &g->shards[i];
        s = map_file(g, sh, p, err);
        if (s == SL_ERR_NOT_FOUND && split)
            s = sl_error_set(err, SL_ERR_NOT_FOUND, "%s: shard %u of %u is missing (opening %s)", p,
                             i + 1, count, path);
        if (!s) s = sl__gguf_parse(&g->arena, sh->map, sh->size, sh->path, sh, err);
    }
    return finish_open(g, s, out, err);
}

sl_status sl_gguf_open_memory(const void *buf, size_t len, const char *name, sl_gguf **out,
                              sl_error *err)
{
    if (!out || (!buf && len)) return sl_error_set(err, SL_ERR_INVALID, "sl_gguf_open_memory: bad arguments");
    *out = NULL;
    sl_gguf *g = new_handle(1, NULL, err);
    if (!g) return err ? err->code : SL_ERR_NOMEM;
    g->n_shards = 1;
    sl__gguf_shard *sh = &g->shards[0];
    if (!name) name = "<memory>";
    sh->path = sl__arena_strndup(&g->arena, name, strlen(name));
    sh->map = buf;
    sh->size = len;
    sl_status s = sh->path ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "out of memory");
    if (!s) s = sl__gguf_parse(&g->arena, buf, len, sh->path, sh, err);
    return finish_open(g, s, out, err);
}

void sl_gguf_close(sl_gguf *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->n_shards; i++) {
        sl__gguf_shard *sh = &g->shards[i];
        if (sh->owns_map && sh->map) munmap((void *)sh->map, sh->size);
        if (sh->fd >= 0) close(sh->fd);
        if (sh->fd_direct >= 0) close(sh->fd_direct);
    }
    sl__arena_free(&g->arena);
    free(g);
}

uint32_t sl_gguf_version(const sl_gguf *g) { return g->shards[0].version; }
uint32_t sl_gguf_alignment(const sl_gguf *g) { return g->shards[0].alignment; }
bool sl_gguf_is_powerinfer(const sl_gguf *g) { return g->shards[0].powerinfer; }
uint32_t sl_gguf_shard_count(const sl_gguf *g) { return g->n_shards; }

const char *sl_gguf_shard_path(const sl_gguf *g, uint32_t shard)
{
    return shard < g->n_shards ? g->shards[shard].path : NULL;
}

uint64_t sl_gguf_data_offset(const sl_gguf *g, uint32_t shard)
{
    return shard < g->n_shards ? g->shards[shard].data_offset : 0;
}

size_t sl_gguf_kv_count(const sl_gguf *g) { return g->shards[0].n_kv; }

const char *sl_gguf_kv_key(const sl_gguf *g, size_t i)
{
    return i < g->shards[0].n_kv ? g->shards[0].kv[i].key : NULL;
}

const sl_gguf_value *sl_gguf_kv_value(const sl_gguf *g, size_t i)
{
    return i < g->shards[0].n_kv ? &g->shards[0].kv[i].val : NULL;
}

const sl_gguf_value *sl_gguf_find(const sl_gguf *g, const char *key)
{
    size_t i = sl__name_index_find(&g->kv_index, key, kv_name_at, g->shards[0].kv);
    return i == SIZE_MAX ? NULL : &g->shards[0].kv[i].val;
}

static sl_status get_typed(const sl_gguf *g, const char *key, sl_gguf_vtype want,
                           const sl_gguf_value **v, sl_error *err)
{
    if (!key) return sl_error_set(err, SL_ERR_INVALID, "NULL key");
    *v = sl_gguf_find(g, key);
    if (!*v) return sl_error_set(err, SL_ERR_NOT_FOUND, "%s: key '%s' not found", g->shards[0].path, key);
    if ((*v)->type != want)
        return sl_error_set(err, SL_ERR_TYPE, "%s: key '%s' has type %s, not %s", g->shards[0].path,
                            key, sl_gguf_vtype_name((*v)->type), sl_gguf_vtype_name(want));
    return SL_OK;
}

#define SL_GETTER(fn, T, VT, FIELD)                                                          \
    sl_status fn(const sl_gguf *g, const char *key, T *out, sl_error *err)                   \
    {                                                                                        \
        const sl_gguf_value *v;                                                              \
        sl_status s = get_typed(g, key, VT, &v, err);                                        \
        if (!s) *out = (T)v->v.FIELD;                                                        \
        return s;                                                                            \
    }

SL_GETTER(sl_gguf_get_u8, uint8_t, SL_GGUF_U8, u64)
SL_GETTER(sl_gguf_get_u16, uint16_t, SL_GGUF_U16, u64)
SL_GETTER(sl_gguf_get_u32, uint32_t, SL_GGUF_U32, u64)
SL_GETTER(sl_gguf_get_u64, uint64_t, SL_GGUF_U64, u64)
SL_GETTER(sl_gguf_get_i8, int8_t, SL_GGUF_I8, i64)
SL_GETTER(sl_gguf_get_i16, int16_t, SL_GGUF_I16, i64)
SL_GETTER(sl_gguf_get_i32, int32_t, SL_GGUF_I32, i64)
SL_GETTER(sl_gguf_get_i64, int64_t, SL_GGUF_I64, i64)
SL_GETTER(sl_gguf_get_f32, float, SL_GGUF_F32, f32)
SL_GETTER(sl_gguf_get_f64, double, SL_GGUF_F64, f64)
SL_GETTER(sl_gguf_get_bool, bool, SL_GGUF_BOOL, b)

sl_status sl_gguf_get_str(const sl_gguf *g, const char *key, const char **out, sl_error *err)
{
    const sl_gguf_value *v;
    sl_status s = get_typed(g, key, SL_GGUF_STR, &v, err);
    if (!s) *out = v->v.str.ptr;
    return s;
}

sl_status sl_gguf_get_arr(const sl_gguf *g, const char *key, sl_gguf_vtype elem,
                          const sl_gguf_value **out, sl_error *err)
{
    const sl_gguf_value *v;
    sl_status s = get_typed(g, key, SL_GGUF_ARR, &v, err);
    if (s) return s;
    if (v->v.arr.elem != elem)
        return sl_error_set(err, SL_ERR_TYPE, "%s: key '%s' is an array of %s, not of %s",
                            g->shards[0].path, key, sl_gguf_vtype_name(v->v.arr.elem),
                            sl_gguf_vtype_name(elem));
    *out = v;
    return SL_OK;
}

size_t sl_gguf_tensor_count(const sl_gguf *g) { return g->n_tensors; }

const sl_gguf_tensor *sl_gguf_tensor_at(const sl_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const sl_gguf_tensor *sl_gguf_tensor_find(const sl_gguf *g, const char *name)
{
    size_t i = sl__name_index_find(&g->tensor_index, name, tensor_name_at, g->tensors);
    return i == SIZE_MAX ? NULL : &g->tensors[i];
}

const void *sl_gguf_tensor_view(const sl_gguf *g, const sl_gguf_tensor *t)
{
    if (!t || t->shard >= g->n_shards || !g->shards[t->shard].map) return NULL;
    return g->shards[t->shard].map + t->file_offset;
}

uint64_t sl_gguf_direct_span(const sl_gguf_tensor *t)
{
    uint64_t a = SL_GGUF_DIRECT_ALIGN;
    uint64_t start = t->file_offset / a * a;
    uint64_t end = (t->file_offset + t->nbytes + a - 1) / a * a;
    return end - start;
}

/* Reads [off, off+n) fully; a short read means the file shrank after it was opened. */
static sl_status pread_all(int fd, void *dst, uint64_t n, uint64_t off, const char *path,
                           uint64_t need_until, sl_error *err)
{
    uint64_t done = 0;
    while (done < n) {
        size_t chunk = n - done > (1u << 30) ? (1u << 30) : (size_t)(n - done);
        ssize_t r = pread(fd, (char *)dst + done, chunk, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return sl_error_set(err, SL_ERR_IO, "%s: read at offset %" PRIu64 ": %s", path,
                                       off + done, strerror(errno));
        if (r == 0) {
            if (off + done >= need_until) return SL_OK; /* O_DIRECT tail past EOF */
            return sl_error_set(err, SL_ERR_IO, "%s: unexpected end of file at offset %" PRIu64
                                " (file changed after open?)", path, off + done);
        }
        done += (uint64_t)r;
    }
    return SL_OK;
}

static void notice_once(const sl_gguf *g, const char *path, const char *why)
{
    sl_gguf *mg = (sl_gguf *)g; /* the flag is the one mutable field, atomic by design */
    if (atomic_exchange(&mg->direct_notice_done, true)) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: O_DIRECT unavailable (%s); reading with pread", path, why);
    if (g->notice) g->notice(g->notice_user, msg);
    else fprintf(stderr, "sluice: notice: %s\n", msg);
}

sl_status sl_gguf_tensor_read(const sl_gguf *g, const sl_gguf_tensor *t, sl_gguf_io io,
                              void *dst, uint64_t dst_cap, void **data, sl_error *err)
{
    if (!g || !t || !dst || !data || t->shard >= g->n_shards)
        return sl_error_set(err, SL_ERR_INVALID, "sl_gguf_tensor_read: bad arguments");
    const sl__gguf_shard *sh = &g->shards[t->shard];
    *data = dst;
    if (io == SL_GGUF_IO_DIRECT && sh->fd >= 0) {
        uint64_t span = sl_gguf_direct_span(t);
        if ((uintptr_t)dst % SL_GGUF_DIRECT_ALIGN)
            return sl_error_set(err, SL_ERR_INVALID, "tensor '%s': O_DIRECT buffer %p is not %d-byte aligned",
                                t->name, dst, SL_GGUF_DIRECT_ALIGN);
        if (dst_cap < span)
            return sl_error_set(err, SL_ERR_RANGE, "tensor '%s': O_DIRECT buffer holds %" PRIu64
                                " bytes, needs %" PRIu64, t->name, dst_cap, span);
        uint64_t start = t->file_offset / SL_GGUF_DIRECT_ALIGN * SL_GGUF_DIRECT_ALIGN;
        if (sh->fd_direct >= 0) {
            sl_error e;
            sl_status s = pread_all(sh->fd_direct, dst, span, start, sh->path,
                                    t->file_offset + t->nbytes, &e);
            if (s == SL_OK) {
                *data = (char *)dst + (t->file_offset - start);
                return SL_OK;
            }
            if (!strstr(e.msg, strerror(EINVAL))) {
                if (err) *err = e;
                return s;
            }
            notice_once(g, sh->path, "the file system refused an O_DIRECT read");
        } else {
            notice_once(g, sh->path, "the file system refused O_DIRECT at open");
        }
        if (dst_cap < t->nbytes) return sl_error_set(err, SL_ERR_RANGE, "tensor '%s': buffer too small", t->name);
        return pread_all(sh->fd, dst, t->nbytes, t->file_offset, sh->path, UINT64_MAX, err);
    }
    if (dst_cap < t->nbytes)
        return sl_error_set(err, SL_ERR_RANGE, "tensor '%s': buffer holds %" PRIu64 " bytes, needs %" PRIu64,
                            t->name, dst_cap, t->nbytes);
    if (io == SL_GGUF_IO_PREAD && sh->fd >= 0)
        return pread_all(sh->fd, dst, t->nbytes, t->file_offset, sh->path, UINT64_MAX, err);
    if (io != SL_GGUF_IO_MMAP && io != SL_GGUF_IO_PREAD && io != SL_GGUF_IO_DIRECT)
        return sl_error_set(err, SL_ERR_INVALID, "unknown io method %d", (int)io);
    if (t->nbytes && sh->fd >= 0) {
        /* Ask for the whole range at once: without it each fault pulls a few pages from disk. */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = (uintptr_t)(sh->map + t->file_offset) / page * page;
        madvise((void *)lo, (uintptr_t)(sh->map + t->file_offset + t->nbytes) - lo, MADV_WILLNEED);
    }
    if (t->nbytes) memcpy(dst, sh->map + t->file_offset, t->nbytes);
    return SL_OK;
}

sl_status sl__gguf_validate(const sl_gguf *g, sl_error *err)
{
    size_t seen = 0;
    for (uint32_t i = 0; i < g->n_shards; i++) {
        const sl__gguf_shard *sh = &g->shards[i];
        if (sh->data_offset % sh->alignment)
            return sl_error_set(err, SL_ERR_FORMAT, "shard %u: data offset unaligned", i);
        for (size_t k = 0; k < sh->n_tensors; k++) {
            const sl_gguf_tensor *t = &sh->tensors[k];
            if (t->offset % sh->alignment || t->file_offset != sh->data_offset + t->offset ||
                (t->nbytes && t->file_offset + t->nbytes > sh->size) || t->shard != i)
                return sl_error_set(err, SL_ERR_FORMAT, "shard %u: tensor '%s' breaks the layout", i,
                                    t->name);
            if (sl_gguf_tensor_find(g, t->name) != t)
                return sl_error_set(err, SL_ERR_FORMAT, "tensor '%s' not found by name", t->name);
        }
        seen += sh->n_tensors;
    }
    if (seen != g->n_tensors) return sl_error_set(err, SL_ERR_FORMAT, "tensor count mismatch");
    for (size_t i = 0; i < g->shards[0].n_kv; i++)
        if (sl_gguf_find(g, g->shards[0].kv[i].key) != &g->shards[0].kv[i].val)
            return sl_error_set(err, SL_ERR_FORMAT, "key '%s' not found by name", g->shards[0].kv[i].key);
    return SL_OK;
}
