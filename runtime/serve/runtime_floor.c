/* runtime/runtime_floor.c: a runtime model's shared host floor (alloc/shm_floor.h) — its
 * layout, key, source fingerprint and content digest.
 *
 * Layout: each weight in a slot of its O_DIRECT span at a 4096-aligned offset (its bytes at
 * file_offset % 4096 inside, as an O_DIRECT read lands them).
 * Key (the region's name): a format version, every weight's name, type, shape, offset and size,
 * and sampled bytes of each weight (start, middle, end) — so files of one layout whose bytes
 * differ where sampled get different names without a full read. No times: cp -p, rsync -t and
 * tar keep mtimes, so a time says nothing about content.
 * Identity (trusted without a read): every shard's device, inode, size, and mtime and ctime in
 * ns. Any write to a file moves its ctime (even one that restores the mtime), and another file
 * has another inode, so an equal identity means the very bytes the filler read.
 * Digest: of every weight's file bytes in weight order, seeded with the key — computed by the
 * fill from what it wrote, and by an attacher of another identity from its own files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc/shm_floor.h"
#include "runtime/engine/model.h"
#include "runtime/serve/runtime_impl.h"

enum { SAMPLE = 32, CHUNK = 1 << 20 };

typedef struct floor_src {
    sl_model *m;
    uint64_t key;
    uint8_t identity[SL_SHM_FLOOR_DIGEST];
    int *fd;                    /* [sources.n]: each shard, opened and checked by open_shards */
} floor_src;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static sl_status read_at(int fd, const char *path, void *buf, uint64_t n, uint64_t off,
                         sl_error *err)
{
    uint8_t *p = buf;
    while (n) {
        const ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return sl_error_set(err, SL_ERR_IO, "%s: reading %llu bytes at %llu: %s", path,
                                (unsigned long long)n, (unsigned long long)off,
                                k < 0 ? strerror(errno) : "unexpected end of file");
        p += k;
        n -= (uint64_t)k;
        off += (uint64_t)k;
    }
    return SL_OK;
}

static void close_shards(floor_src *s)
{
    for (uint32_t i = 0; s->fd && i < s->m->sources.n; i++)
        if (s->fd[i] >= 0) close(s->fd[i]);
    free(s->fd);
    s->fd = NULL;
}

/* Stamps one shard's fingerprint into h (and checks it is the version the weights describe). */
static sl_status fingerprint(const sl_model *m, uint32_t i, int fd, sl_shm_floor_hash *h,
                             sl_error *err)
{
    const sl_swap_source *src = &m->sources.v[i];
    struct stat sb;
    if (fstat(fd, &sb)) return sl_error_set(err, SL_ERR_IO, "%s: fstat: %s", src->path,
                                            strerror(errno));
    const int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    const int64_t ct = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec;
    if ((uint64_t)sb.st_size != src->size || mt != src->mtime_ns || (uint64_t)sb.st_ino != src->ino)
        return sl_error_set(err, SL_ERR_IO, "%s: changed since its weights were read (size "
                            "%llu, was %llu): reload the model before sharing its floor",
                            src->path, (unsigned long long)sb.st_size,
                            (unsigned long long)src->size);
    const uint64_t id[] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)sb.st_size,
                           (uint64_t)mt, (uint64_t)ct};
    sl_shm_floor_hash_update(h, id, sizeof id);
    return SL_OK;
}

/* Opens every shard; identity: their fingerprints. */
static sl_status open_shards(floor_src *s, uint8_t identity[SL_SHM_FLOOR_DIGEST], sl_error *err)
{
    const sl_model *m = s->m;
    const uint32_t n = m->sources.n;
    if (!(s->fd = malloc((n ? n : 1) * sizeof *s->fd)))
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (shared floor)");
    for (uint32_t i = 0; i < n; i++) s->fd[i] = -1;
    sl_shm_floor_hash h;
    sl_shm_floor_hash_init(&h, 0x5e1f100d);
    for (uint32_t i = 0; i < n; i++) {
        const char *path = m->sources.v[i].path;
        if ((s->fd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return sl_error_set(err, SL_ERR_IO, "%s: open: %s", path, strerror(errno));
        sl_status st = fingerprint(m, i, s->fd[i], &h, err);
        if (st) return st;
    }
    sl_shm_floor_hash_final(&h, identity);
    return SL_OK;
}

/* The layout (off[i]: weight i's data offset in the payload; returns the payload bytes) and
 * the key, which samples each weight's bytes from the opened shards. */
static sl_status layout_key(floor_src *s, uint64_t *off, uint64_t *bytes, sl_error *err)
{
    const sl_model *m = s->m;
    uint64_t total = 0, h = 1469598103934665603ull;
    const uint32_t version = 2;
    h = fnv(h, &version, sizeof version);
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        const uint64_t slot = (total + SL_GGUF_DIRECT_ALIGN - 1) &
                              ~(uint64_t)(SL_GGUF_DIRECT_ALIGN - 1);
        off[i] = slot + w->file_offset % SL_GGUF_DIRECT_ALIGN;
        total = slot + (w->file_nbytes ? sl_gguf_direct_span(w->t) : 0);
        h = fnv(h, w->name, strlen(w->name) + 1);
        const uint64_t id[] = {w->file_type, w->n_dims, (uint64_t)w->ne[0], (uint64_t)w->ne[1],
                               (uint64_t)w->ne[2], (uint64_t)w->ne[3], w->file_offset,
                               w->file_nbytes};
        h = fnv(h, id, sizeof id);
        const uint64_t n = w->file_nbytes < SAMPLE ? w->file_nbytes : SAMPLE;
        const uint64_t at[3] = {0, (w->file_nbytes - n) / 2, w->file_nbytes - n};
        for (int k = 0; k < 3 && n; k++) {
            uint8_t b[SAMPLE];
            sl_status st = read_at(s->fd[w->shard], m->sources.v[w->shard].path, b, n,
                                   w->file_offset + at[k], err);
            if (st) return st;
            h = fnv(h, b, (size_t)n);
        }
    }
    s->key = h;
    *bytes = total ? total : 1;
    return SL_OK;
}

/* sl_shm_floor_digest_fn: the digest of this process's files, read in chunks. */
static sl_status digest_files(void *user, uint8_t digest[SL_SHM_FLOOR_DIGEST], sl_error *err)
{
    floor_src *s = user;
    const sl_model *m = s->m;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (shared floor digest)");
    sl_shm_floor_hash h;
    sl_shm_floor_hash_init(&h, s->key);
    sl_status st = SL_OK;
    for (size_t i = 0; i < m->n_w && !st; i++) {
        const sl_weight *w = &m->w[i];
        for (uint64_t done = 0; done < w->file_nbytes && !st;) {
            const uint64_t n = w->file_nbytes - done < CHUNK ? w->file_nbytes - done : CHUNK;
            st = read_at(s->fd[w->shard], m->sources.v[w->shard].path, buf, n,
                         w->file_offset + done, err);
            if (!st) sl_shm_floor_hash_update(&h, buf, (size_t)n);
            done += n;
        }
    }
    free(buf);
    if (!st) sl_shm_floor_hash_final(&h, digest);
    return st;
}

/* sl_shm_floor_fill_fn: every weight's file bytes into its slot (O_DIRECT), digested as they
 * land; then the shards must still be the versions fingerprinted (a rewrite meanwhile would
 * leave bytes of two versions under one identity). */
static sl_status fill_floor(void *user, uint8_t *payload, uint64_t bytes,
                            uint8_t digest[SL_SHM_FLOOR_DIGEST], sl_error *err)
{
    floor_src *s = user;
    sl_model *m = s->m;
    const sl_runtime *rt = m->rt;
    sl_shm_floor_hash h;
    sl_shm_floor_hash_init(&h, s->key);
    uint64_t done = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (!w->file_nbytes) continue;
        const uint64_t at = m->res->shm_off[i], slot = at - w->file_offset % SL_GGUF_DIRECT_ALIGN;
        void *data = NULL;
        sl_status st = sl_gguf_tensor_read(sl__model_file(m), w->t, SL_GGUF_IO_DIRECT,
                                           payload + slot, bytes - slot, &data, err);
        if (st) return st;
        /* a file system without O_DIRECT: the pread fallback may land the bytes elsewhere */
        if (data != payload + at) memmove(payload + at, data, w->file_nbytes);
        sl_shm_floor_hash_update(&h, payload + at, (size_t)w->file_nbytes);
        done += w->file_nbytes;
        if (rt->opt.floor_progress)
            rt->opt.floor_progress(rt->opt.floor_progress_user, done, bytes);
    }
    sl_shm_floor_hash seen;
    sl_shm_floor_hash_init(&seen, 0x5e1f100d);
    for (uint32_t i = 0; i < m->sources.n; i++) {
        sl_status st = fingerprint(m, i, s->fd[i], &seen, err);
        if (st) return st;
    }
    uint8_t after[SL_SHM_FLOOR_DIGEST];
    sl_shm_floor_hash_final(&seen, after);
    if (memcmp(after, s->identity, sizeof after))
        return sl_error_set(err, SL_ERR_IO, "%s: rewritten while its shared floor was filled "
                            "(its ctime moved): open it again", m->path);
    sl_shm_floor_hash_final(&h, digest);
    return SL_OK;
}

sl_status sl__runtime_floor_attach(sl_model *m, sl_error *err)
{
    const sl_runtime *rt = m->rt;
    struct sl__resident *r = m->res;
    if (!r->shm_off && !(r->shm_off = malloc((m->n_w ? m->n_w : 1) * sizeof *r->shm_off)))
        return sl_error_set(err, SL_ERR_NOMEM, "out of memory (shared floor layout)");
    floor_src s = {.m = m};
    sl_shm_floor_options so = {.prefix = rt->opt.shm_prefix, .mode = rt->opt.shm_mode,
                               .fill = fill_floor, .digest = digest_files, .user = &s,
                               .label = m->sources.n ? m->sources.v[0].path : m->path,
                               .wait_ms = rt->opt.shm_wait_ms,
                               .cancelled = rt->opt.shm_cancelled,
                               .cancelled_user = rt->opt.shm_cancelled_user};
    sl_status st = open_shards(&s, s.identity, err);
    memcpy(so.identity, s.identity, sizeof so.identity);
    if (!st) st = layout_key(&s, r->shm_off, &so.bytes, err);
    so.key = s.key;
    sl_shm_floor_how how = SL_SHM_FLOOR_FILLED;
    if (!st) st = sl_shm_floor_attach(&so, &r->shm, &how, err);
    close_shards(&s);
    if (st) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return sl_error_set(err, st, "%s: %s", m->path, why);
    }
    r->shm_made = how == SL_SHM_FLOOR_FILLED;
    r->shm_checked = how == SL_SHM_FLOOR_DIGEST_CHECKED;
    return SL_OK;
}
