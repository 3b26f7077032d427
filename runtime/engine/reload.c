/* runtime/engine/reload.c: sl_reload_changed (sluice.h) — the engine's driver of a live tensor swap;
 * the policy and the gate are scheduler/policy/swap.h's.
 *
 * Two phases. Read (gate not held, contexts keep evaluating): for each source file whose size
 * or mtime changed, parse its header alone, and for each weight bound to it stage the new bytes
 * through the loader's own read path (sl__weight_read: O_DIRECT into a pinned host pool block;
 * pread for io = pread or mmap, since a reload never points a weight into a mapping), converted
 * to F32 where the loader would convert; bytes equal to the current ones (host-addressable
 * storage only) are dropped as unchanged. A stat after the reads that differs from the one
 * before means the file was being rewritten: everything staged from it is dropped and the file
 * stays "changed". Commit (gate held exclusively): REATTACH first, then IN_PLACE, then PRIVATE;
 * sibling expert tensors are then put back on one side. Before these, a hot/cold split layer
 * (placement hot-cold) whose gate, up or down changed is split again from the new bytes of all
 * three with the same hot neurons (sl__weight_resplit: new compact parts, device copies
 * included), which gives the logits of a fresh open of the new file with the same index; a
 * projection in an unchanged file (one tensor per shard) is read from it for that
 * (stage_companions) and reported as moved with its siblings.
 * Expert pointers, moe descriptions, plan record and info are refreshed; the epoch is bumped
 * so contexts refresh what they cache.
 *
 * Rules specific to the engine (refused with a message, tensor untouched):
 *   a tensor of a hot/cold split FFN whose down's new type has another block size (the
 *   split's granule), or whose gate/up/down could not all be read (a torn or refused
 *   companion: their bytes are gone after the split, the parts are rebuilt from all three);
 *   rope_freqs.weight (contexts copy it at creation);
 *   per-expert tensors whose types would differ between experts of one layer (sl_moe_layer
 *   has one type per projection);
 *   on cuda: a device tensor whose new type has no CUDA GEMV, and a host fallback of a
 *   non-expert device tensor (a device layer's kernels cannot read host memory; on the sim
 *   device every region is host-addressable, so there it falls back like an expert).
 * With io = mmap, weights that were never reloaded still read the file mapping: replace a
 * model's files by rename, not by rewriting them in place.
 * A model in a runtime (sl_model_open_in) moves between its host floor and the device, so it
 * has no original block to reattach to: each changed tensor replaces its host floor copy and,
 * when on the device, its device copy (commit_runtime). A later eviction, reload or compaction
 * then brings back the new bytes. A device short of memory for a new size leaves the tensor on
 * the host (a fallback, counted; its expert siblings follow; the runtime's residency stops
 * counting it as device bytes and keeps it there until a reload returns its group). Released
 * to DISK, it reads its files again through a refreshed view (file_view.c). A shared
 * floor (other processes map it) is never written: the new bytes go to a private block of this
 * process (copy-on-write).
 * The file-level checks (metadata, new tensors) are reload_meta.c's; the report's free and
 * print, and the context's entry point, reload_report.c's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kernels/ref/repack.h"
#include "runtime/engine/ctx.h"
#include "runtime/engine/dx.h"
#include "runtime/engine/model.h"
#include "runtime/engine/reload_meta.h"
#include "base/parse.h"
#include "runtime/engine/repack.h"
#include "scheduler/moe/ffn_split.h"

typedef struct staged {
    sl_weight *w;
    sl_swap_action act;
    uint32_t new_file_type, new_type;
    uint64_t new_bytes;
    const sl_gguf_tensor *nt;   /* in the file's fresh handle */
    sl_block blk;               /* raw bytes (a pool block), or SL_BLOCK_NONE */
    void *raw;
    float *f32;                 /* converted copy (owned until committed), or NULL */
    double seconds;
    uint64_t file_size;
    bool resplit;               /* a tensor of a hot/cold split FFN: rebuilt by resplit() */
    bool companion;             /* resplit's: read from an unchanged file for its layer */
    bool same;                  /* a runtime's model: the bytes it holds (freed at staging) */
} staged;

typedef struct reload_run {
    sl_model *m;
    sl_reload_report *rep;
    staged *s;
    size_t n_s, cap_s;
    sl_swap_source file;        /* the stat of the file being staged */
    sl__swap_fault fault;       /* SL_FAULT_SWAP_ALLOC (tests) */
    /* SL_FAULT_SWAP_TOUCH (tests): the Nth changed file read has its mtime moved before the
     * stat that follows the reads, as a writer still at work would */
    sl__swap_fault touch;
    bool *fell_layer;           /* [n_layer]: an expert tensor of the layer fell back now */
    /* unchanged tensors of the file being staged: their provenance moves to the new version
     * only once the whole file is accepted (a refused file leaves every weight as it was) */
    struct { sl_weight *w; const sl_gguf_tensor *nt; uint64_t size; } *prov;
    size_t n_prov, cap_prov;
    char refused_why[SL_ERROR_MSG_BYTES]; /* the first refused file: path and why */
} reload_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *type_name(uint32_t t)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(t);
    return ti ? ti->name : "?";
}

static sl_reload_entry *add_entry(sl_reload_report *rep, const char *name, sl_reload_kind kind)
{
    if (rep->n % 64 == 0) {
        sl_reload_entry *e = realloc(rep->entries, (rep->n + 64) * sizeof *e);
        if (!e) return NULL;
        rep->entries = e;
    }
    sl_reload_entry *e = &rep->entries[rep->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->kind = kind;
    e->where = "";
    return e;
}

static bool refuse(reload_run *r, const sl_weight *w, uint32_t new_type, const char *fmt,
                   const char *a)
{
    sl_reload_entry *e = add_entry(r->rep, w->name, SL_RELOAD_REFUSED);
    if (!e) return false;
    e->old_type = sl_repack_base_type(w->type);
    e->new_type = sl_repack_base_type(new_type);
    e->old_bytes = e->new_bytes = w->nbytes;
    snprintf(e->msg, sizeof e->msg, fmt, a);
    r->rep->n_refused++;
    return true;
}

static void staged_free(sl_model *m, staged *s)
{
    if (s->blk != SL_BLOCK_NONE) sl_hostpool_free(m->hostpool, s->blk, NULL);
    s->blk = SL_BLOCK_NONE;
    s->raw = NULL;
    free(s->f32);
    s->f32 = NULL;
}

static const void *staged_bytes(const staged *s)
{
    return s->f32 ? (const void *)s->f32 : s->raw;
}

static bool host_addressable(const sl_model *m, unsigned residency)
{
    return !(residency & SL_RES_DEVICE) || sl_device_kind_get(m->dev) == SL_DEVICE_SIM;
}

static bool writable(const sl_weight_storage *s)
{
    return s->h_block != SL_BLOCK_NONE || s->d_block != SL_BLOCK_NONE || s->h_owned;
}

static bool is_routed(const sl_model *m, const sl_weight *w, int32_t *layer)
{
    for (int32_t il = 0; il < m->hp.n_layer && m->hp.n_expert; il++) {
        const sl__layer *L = &m->layers[il];
        *layer = il;
        if (w == L->gate_exps || w == L->up_exps || w == L->down_exps) return true;
        for (int32_t x = 0; L->gate_e && x < m->hp.n_expert; x++)
            if (w == L->gate_e[x] || w == L->up_e[x] || w == L->down_e[x]) return true;
    }
    return false;
}

/* The split layer holding w among its gate/up/down, or NULL. */
static sl__layer *split_layer_of(const sl_model *m, const sl_weight *w)
{
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        if (L->n_hot && (w == L->ffn_gate || w == L->ffn_up || w == L->ffn_down) &&
            w->residency == SL_RES_PARTS)
            return L;
    }
    return NULL;
}

/* Whether w is a routed-expert tensor (or expert bias) of a layer whose experts are split
 * hot/cold: its bytes live in parts packed across all experts, which a reload does not rebuild. */
static bool in_moe_split(const sl_model *m, const sl_weight *w)
{
    int32_t il = -1;
    if (is_routed(m, w, &il)) return m->layers[il].moe_split != NULL;
    for (il = 0; il < m->hp.n_layer; il++) {
        const sl__layer *L = &m->layers[il];
        if (L->moe_split && (w == L->gate_exps_b || w == L->up_exps_b || w == L->down_exps_b))
            return true;
    }
    return false;
}

/* Whether the staged bytes equal w's current ones (same type and size, where the host can
 * look; a model in a runtime: its host copy, which a device weight keeps as its floor, read
 * outside the runtime's mutex and the gate — see sl__serving.host_copy). Type and size are
 * only written by a reload, which the caller's reload lock excludes. */
static bool unchanged(sl_model *m, const sl_weight *w, const staged *s)
{
    if (s->new_type != w->type || s->new_bytes != w->nbytes) return false;
    const void *cur = m->serving ? m->serving->host_copy(m, w)
                            : host_addressable(m, w->residency) ? w->data : NULL;
    return cur && !memcmp(cur, staged_bytes(s), (size_t)s->new_bytes);
}

/* Stages weight w from the fresh handle g (tensor nt). false: out of memory for the report. */
static bool stage_one(reload_run *r, const sl_gguf *g, sl_weight *w, const sl_gguf_tensor *nt)
{
    sl_model *m = r->m;
    const double t0 = now_s();
    if (w->derive != SL_DERIVE_NONE)
        return refuse(r, w, SL_GGML_F32, "%s", "derived from attn_kv_b at load (legacy "
                      "deepseek2 layout): reopen the model");
    if (in_moe_split(m, w))
        return refuse(r, w, nt->type, "%s", "its layer's routed experts are split hot/cold "
                      "(placement hot-cold): reopen the model");
    const bool conv = sl__weight_needs_f32(w, nt->type);
    /* new bytes the loader would repack are repacked too (runtime/engine/repack.h), so they are
     * compared with, written over and reattached to storage of the same layout */
    const bool rp = !conv && sl__weight_repack_wanted(m, w, nt->type);
    const uint32_t new_type = conv ? SL_GGML_F32 : rp ? SL_TYPE_Q4_K_R8 : nt->type;
    const uint64_t new_bytes =
        conv ? (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]) * sizeof(float) : nt->nbytes;
    sl_swap_action act = sl_swap_classify(w, nt, new_type, new_bytes);
    if (act == SL_SWAP_REFUSED)
        return refuse(r, w, new_type, "%s", "logical shape differs from the loaded tensor's");
    const sl__layer *SL = split_layer_of(m, w);
    if (SL && w == SL->ffn_down &&
        sl_ffn_split_granule(new_type) != sl_ffn_split_granule(w->type)) {
        char why[160];
        snprintf(why, sizeof why, "its FFN is split hot/cold in blocks of %lld neurons (its "
                 "type's); type %s has blocks of %lld: reopen the model",
                 (long long)sl_ffn_split_granule(w->type), type_name(new_type),
                 (long long)sl_ffn_split_granule(new_type));
        return refuse(r, w, new_type, "%s", why);
    }
    if (w == m->rope_freqs || w == m->rope_long || w == m->rope_short)
        return refuse(r, w, new_type, "%s", "rope frequency factors are copied by contexts at "
                      "creation; reopen the model");
    if ((w->orig.residency & SL_RES_DEVICE) && w->need_matvec &&
        !sl__dx_supports(sl_device_kind_get(m->dev), new_type, SL__DX_OP_MATVEC))
        return refuse(r, w, new_type, "type %s has no CUDA GEMV", type_name(new_type));

    staged s = {.w = w, .act = act, .new_file_type = nt->type, .new_type = new_type,
                .new_bytes = new_bytes, .nt = nt, .blk = SL_BLOCK_NONE,
                .file_size = r->file.size};
    sl_error e;
    sl_status st = sl__weight_read(m, g, nt, m->opt.io == SL_LOAD_DIRECT, &s.blk, &s.raw, &e);
    if (!st && rp) st = sl__weight_repack_bytes(w, s.raw, &e);
    if (!st && conv) {
        st = sl__weight_dequant_f32(w, nt->type, s.raw, &s.f32, &e);
        if (!st) {
            sl_hostpool_free(m->hostpool, s.blk, NULL);
            s.blk = SL_BLOCK_NONE;
        }
    }
    if (st) {
        staged_free(m, &s);
        return refuse(r, w, new_type, "reading it: %s", e.msg);
    }
    r->rep->bytes_read += nt->nbytes;
    if (SL) { /* its bytes were dropped by the split: nothing to compare, resplit() applies */
        s.resplit = true;
        s.seconds = now_s() - t0;
        goto keep;
    }
    /* equal bytes in the same type and size: nothing to do (compared here, out of the gate
     * and a runtime's mutex) */
    const bool same = act == SL_SWAP_IN_PLACE && unchanged(m, w, &s);
    if (same && !m->rt) {
        staged_free(m, &s);
        act = SL_SWAP_NONE;
    }
    /* a read-only original (the file mapping) takes no new bytes */
    if (act == SL_SWAP_REATTACH && !writable(&w->orig) &&
        memcmp(w->orig.data, staged_bytes(&s), (size_t)new_bytes))
        act = SL_SWAP_PRIVATE;
    if (act == SL_SWAP_IN_PLACE && !writable(&w->orig) && !w->swapped) act = SL_SWAP_PRIVATE;
    /* a runtime's model: its provenance moves at commit, with the runtime's records */
    if (same && m->rt && act == SL_SWAP_IN_PLACE) {
        staged_free(m, &s);
        s.same = true;
    }
    s.act = act;
    s.seconds = now_s() - t0;
    if (act == SL_SWAP_NONE) {
        /* provenance still moves to the new file version (done at commit for staged ones),
         * once stage_file has accepted the whole file */
        if (r->n_prov == r->cap_prov) {
            const size_t cap = r->cap_prov ? 2 * r->cap_prov : 64;
            void *n = realloc(r->prov, cap * sizeof *r->prov);
            if (!n) return false;
            r->prov = n;
            r->cap_prov = cap;
        }
        r->prov[r->n_prov].w = w;
        r->prov[r->n_prov].nt = nt;
        r->prov[r->n_prov++].size = r->file.size;
        return true;
    }
keep:
    if (r->n_s == r->cap_s) {
        const size_t cap = r->cap_s ? 2 * r->cap_s : 16;
        staged *n = realloc(r->s, cap * sizeof *n);
        if (!n) {
            staged_free(m, &s);
            return false;
        }
        r->s = n;
        r->cap_s = cap;
    }
    r->s[r->n_s++] = s;
    return true;
}

/* Per-expert tensors of one layer must keep one type per projection: refuses the staged
 * changes of a layer where they would not. */
static void check_expert_types(reload_run *r, size_t first)
{
    sl_model *m = r->m;
    for (int32_t il = 0; il < m->hp.n_layer && m->hp.n_expert; il++) {
        sl__layer *L = &m->layers[il];
        if (!L->gate_e) continue;
        sl_weight **proj[3] = {L->gate_e, L->up_e, L->down_e};
        bool ok = true;
        for (int p = 0; p < 3 && ok; p++) {
            uint32_t t0 = UINT32_MAX;
            for (int32_t x = 0; x < m->hp.n_expert && ok; x++) {
                uint32_t t = proj[p][x]->type;
                for (size_t i = first; i < r->n_s; i++)
                    if (r->s[i].w == proj[p][x]) t = r->s[i].new_type;
                if (t0 == UINT32_MAX) t0 = t;
                ok = t == t0;
            }
        }
        if (ok) continue;
        for (size_t i = first; i < r->n_s; i++) {
            int32_t l;
            if (!is_routed(m, r->s[i].w, &l) || l != il) continue;
            refuse(r, r->s[i].w, r->s[i].new_type, "%s", "per-expert tensors of one layer "
                   "must share a type per projection (reload all of them at once)");
            staged_free(m, &r->s[i]);
            r->s[i] = r->s[--r->n_s];
            i--;
        }
    }
}

static void skip_file(reload_run *r, const char *path, const char *why, size_t first)
{
    for (size_t i = first; i < r->n_s; i++) staged_free(r->m, &r->s[i]);
    r->n_s = first;
    sl_reload_entry *e = add_entry(r->rep, path, SL_RELOAD_SKIPPED_FILE);
    if (e) e->old_type = e->new_type = SL_RELOAD_NO_TYPE;
    if (e) e->file = strdup(path);
    if (e) snprintf(e->msg, sizeof e->msg, "%s; the old tensors stay in use, retried at the "
                    "next call", why);
    r->rep->files_skipped++;
}

/* A file that cannot be applied whole: nothing of it is (its staged tensors are dropped, its
 * weights keep their bytes and provenance), its source stays "changed" so every later call
 * reports it again, and the call returns an error naming the first such file. */
static void refuse_file(reload_run *r, const char *path, const char *why, size_t first,
                        size_t first_prov)
{
    for (size_t i = first; i < r->n_s; i++) staged_free(r->m, &r->s[i]);
    r->n_s = first;
    r->n_prov = first_prov;
    sl_reload_entry *e = add_entry(r->rep, path, SL_RELOAD_REFUSED_FILE);
    if (e) e->old_type = e->new_type = SL_RELOAD_NO_TYPE;
    if (e) e->file = strdup(path);
    if (e) snprintf(e->msg, sizeof e->msg, "%s; nothing of it was applied", why);
    if (!r->rep->files_refused++)
        snprintf(r->refused_why, sizeof r->refused_why, "%s: %s", path, why);
}

/* The read phase for source file i. handle: the parsed file, kept until commit. */
static sl_status stage_file(reload_run *r, uint32_t i, sl_gguf **handle, bool *done,
                            sl_error *err)
{
    sl_model *m = r->m;
    sl_swap_source *src = &m->sources.v[i];
    *handle = NULL;
    *done = false;
    sl_error e;
    if (sl_swap_stat(src->path, &r->file, &e)) {
        skip_file(r, src->path, e.msg, r->n_s);
        return SL_OK;
    }
    if (!sl_swap_source_differs(&r->file, src)) return SL_OK;
    r->rep->files_changed++;
    const size_t first = r->n_s;
    sl_gguf_options go = {.no_shards = true};
    if (sl_gguf_open(src->path, &go, handle, &e)) {
        skip_file(r, src->path, e.msg, first);
        return SL_OK;
    }
    const size_t first_prov = r->n_prov;
    const uint32_t refused0 = r->rep->n_refused;
    char why[SL_ERROR_MSG_BYTES] = "";
    /* metadata lives in the first shard; the model depends on all of it but inert keys */
    if ((i == 0 && !sl__reload_same_metadata(m, *handle, why, sizeof why)) ||
        sl__reload_new_tensor(m, *handle, why, sizeof why)) {
        refuse_file(r, src->path, why, first, first_prov);
        return SL_OK;
    }
    for (size_t k = 0; k < m->n_w; k++) {
        sl_weight *w = &m->w[k];
        if (w->shard != i) continue;
        const sl_gguf_tensor *nt = sl_gguf_tensor_find(*handle, w->name);
        bool ok = nt ? stage_one(r, *handle, w, nt)
                     : refuse(r, w, SL_RELOAD_NO_TYPE, "%s", "missing from the rewritten file");
        if (!ok) return sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
    }
    if (sl__swap_fault_hit(&r->touch)) {
        const int64_t ns = r->file.mtime_ns + 1;
        const struct timespec ts[2] = {{0, UTIME_OMIT}, {ns / 1000000000, ns % 1000000000}};
        utimensat(AT_FDCWD, src->path, ts, 0);
    }
    sl_swap_source after;
    if (sl_swap_stat(src->path, &after, &e) || sl_swap_source_differs(&after, &r->file)) {
        skip_file(r, src->path, "the file changed while it was read", first);
        sl_gguf_close(*handle);
        *handle = NULL;
        return SL_OK;
    }
    check_expert_types(r, first);
    if (r->rep->n_refused > refused0) {
        /* all or nothing: a model half of one file and half of the other matches neither */
        const sl_reload_entry *e = NULL;
        for (size_t k = r->rep->n; k-- > 0;)
            if (r->rep->entries[k].kind == SL_RELOAD_REFUSED) e = &r->rep->entries[k];
        snprintf(why, sizeof why, "%u of its tensors cannot be applied (first '%s': %s)",
                 r->rep->n_refused - refused0, e ? e->name : "?", e ? e->msg : "?");
        refuse_file(r, src->path, why, first, first_prov);
        return SL_OK;
    }
    for (size_t k = first_prov; k < r->n_prov; k++)
        sl__weight_provenance_set(r->prov[k].w, r->prov[k].nt, r->prov[k].size);
    r->n_prov = first_prov;
    *done = true;
    return SL_OK;
}

/* A split layer is rebuilt from its gate, up and down together (resplit): those of a changed
 * layer that live in unchanged files (a model split one tensor per file) are read from them
 * as they are (companions; reported as siblings unless their type changes, which happens when
 * an earlier change of theirs was refused). One whose file changed but is not staged (a torn
 * file, a refused change) stays missing, and resplit refuses the layer. handles[i]: the fresh
 * parse of source i (opened here for an unchanged one, closed by the caller). */
static sl_status stage_companions(reload_run *r, sl_gguf **handles, sl_error *err)
{
    sl_model *m = r->m;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        sl_weight *proj[3] = {L->ffn_gate, L->ffn_up, L->ffn_down};
        bool have[3] = {false, false, false}, any = false;
        for (size_t i = 0; i < r->n_s; i++)
            for (int p = 0; p < 3; p++)
                if (r->s[i].resplit && r->s[i].w == proj[p]) have[p] = any = true;
        for (int p = 0; p < 3 && any; p++) {
            if (have[p]) continue;
            const uint32_t k = proj[p]->shard;
            const sl_swap_source *src = &m->sources.v[k];
            sl_error e;
            if (sl_swap_stat(src->path, &r->file, &e) || sl_swap_source_differs(&r->file, src))
                continue; /* changed: staged by its own file, or not at all */
            const sl_gguf_options go = {.no_shards = true};
            if (!handles[k] && sl_gguf_open(src->path, &go, &handles[k], &e)) continue;
            /* its file as it is now (a fresh open reads the same), even where an earlier
             * change of it was refused */
            const sl_gguf_tensor *nt = sl_gguf_tensor_find(handles[k], proj[p]->t->name);
            if (!nt) continue;
            const size_t n0 = r->n_s;
            if (!stage_one(r, handles[k], proj[p], nt))
                return sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
            if (r->n_s > n0) r->s[n0].companion = true;
        }
    }
    return SL_OK;
}

/* ---- commit --------------------------------------------------------------------------- */

static sl_status write_into(sl_model *m, const sl_weight_storage *dst, const void *src,
                            uint64_t n, sl_error *err)
{
    if (!n) return SL_OK;
    if (!(dst->residency & SL_RES_DEVICE)) {
        memcpy((void *)dst->data, src, (size_t)n);
        return SL_OK;
    }
    sl_status st = sl_device_copy(m->dev, m->stream, (void *)dst->data, src, n, SL_COPY_H2D, err);
    return st ? st : sl_device_stream_sync(m->dev, m->stream, err);
}

/* A new storage holding the staged bytes: device (when the original was) or host. Takes the
 * staged buffers. *fell: the device had no room. */
static sl_status new_storage(reload_run *r, staged *s, bool want_device,
                             sl_weight_storage *out, bool *fell, sl_error *err)
{
    sl_model *m = r->m;
    sl_weight tw = *s->w;
    tw.type = s->new_type;
    tw.nbytes = s->new_bytes;
    tw.residency = SL_RES_HOST;
    tw.converted = s->f32 != NULL;
    tw.h_block = s->blk;
    tw.h_owned = s->f32;
    tw.data = s->f32 ? (const void *)s->f32 : s->raw;
    tw.d_block = SL_BLOCK_NONE;
    s->blk = SL_BLOCK_NONE;
    s->f32 = NULL;
    *fell = false;
    if (want_device && sl__swap_fault_hit(&r->fault)) {
        *fell = true;
    } else if (want_device) {
        sl_error e;
        sl_status st = sl__weight_to_device(m, &tw, &e);
        if (st == SL_ERR_NOMEM || (st && tw.d_block == SL_BLOCK_NONE)) {
            *fell = true; /* no block: the host copy is intact */
        } else if (st) {
            sl_bfc_free(m->arena, tw.d_block, NULL);
            tw.d_block = SL_BLOCK_NONE;
            sl_weight_storage hs = sl__weight_storage_get(&tw);
            sl__weight_storage_release(m, &hs);
            return sl_error_set(err, st, "'%s': copying to the device: %s", s->w->name, e.msg);
        }
    }
    *out = sl__weight_storage_get(&tw);
    return SL_OK;
}

/* Makes storage ns current for w, freeing the current one if it was private. */
static void switch_to(sl_model *m, sl_weight *w, const sl_weight_storage *ns)
{
    if (w->swapped) {
        sl_weight_storage cur = sl__weight_storage_get(w);
        sl__weight_storage_release(m, &cur);
    }
    const bool back = ns->data == w->orig.data;
    sl__weight_storage_set(w, ns);
    w->orig_fresh = false;
    w->swapped = !back;
    w->fallback = w->swapped && (w->orig.residency & SL_RES_DEVICE) &&
                  !(w->residency & SL_RES_DEVICE);
}

static const char *where(const sl_weight *w)
{
    return w->fallback ? "host (fallback)" : (w->residency & SL_RES_DEVICE) ? "device" : "host";
}

/* After s was applied to its weight: the weight's provenance moves to the new file version
 * and the report gets its entry. */
static sl_status applied(reload_run *r, const staged *s, sl_reload_kind kind, uint32_t old_type,
                         uint64_t old_bytes, double t0, sl_error *err)
{
    sl_weight *w = s->w;
    sl__weight_provenance_set(w, s->nt, s->file_size);
    sl_reload_entry *e = add_entry(r->rep, w->name, kind);
    if (!e) return sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
    e->old_type = sl_repack_base_type(old_type);
    e->new_type = sl_repack_base_type(w->type);
    e->old_bytes = old_bytes;
    e->new_bytes = w->nbytes;
    e->where = where(w);
    e->seconds = s->seconds + (now_s() - t0);
    r->rep->n_reloaded++;
    r->rep->changed = true;
    return SL_OK;
}

static sl_status apply(reload_run *r, staged *s, sl_error *err)
{
    sl_model *m = r->m;
    sl_weight *w = s->w;
    const double t0 = now_s();
    const uint32_t old_type = w->type;
    const uint64_t old_bytes = w->nbytes;
    sl_reload_kind kind;
    sl_status st = SL_OK;
    if (s->act == SL_SWAP_REATTACH) {
        if (writable(&w->orig) &&
            (st = write_into(m, &w->orig, staged_bytes(s), s->new_bytes, err)))
            return st;
        switch_to(m, w, &w->orig);
        kind = SL_RELOAD_REATTACHED;
    } else if (s->act == SL_SWAP_IN_PLACE) {
        const sl_weight_storage cur = sl__weight_storage_get(w);
        if ((st = write_into(m, &cur, staged_bytes(s), s->new_bytes, err))) return st;
        w->orig_fresh = false;
        kind = SL_RELOAD_IN_PLACE;
    } else {
        int32_t layer;
        const bool want_dev = (w->orig.residency & SL_RES_DEVICE) != 0;
        sl_weight_storage ns;
        bool fell;
        if ((st = new_storage(r, s, want_dev, &ns, &fell, err))) return st;
        if (fell && !is_routed(m, w, &layer) && !host_addressable(m, SL_RES_DEVICE)) {
            sl__weight_storage_release(m, &ns);
            refuse(r, w, s->new_type, "%s", "the device is out of memory and a non-expert "
                   "tensor of a device layer cannot fall back to host memory on this device");
            return SL_OK;
        }
        switch_to(m, w, &ns);
        r->rep->n_fallback += fell;
        if (fell && is_routed(m, w, &layer)) r->fell_layer[layer] = true;
        kind = SL_RELOAD_PRIVATE;
    }
    return applied(r, s, kind, old_type, old_bytes, t0, err);
}

/* A copy of w's current bytes on the host (pool block): a sibling following a fallback. */
static sl_status to_host(sl_model *m, sl_weight *w, sl_error *err)
{
    sl_weight_storage hs = {.type = w->type, .nbytes = w->nbytes, .residency = SL_RES_HOST,
                            .h_block = SL_BLOCK_NONE, .d_block = SL_BLOCK_NONE,
                            .converted = w->converted};
    void *h;
    const bool at_orig = !w->swapped;
    sl_status st = sl_hostpool_alloc(m->hostpool, w->nbytes ? w->nbytes : 1, &hs.h_block, &h, err);
    if (st) return st;
    hs.data = h;
    if (w->nbytes &&
        ((st = sl_device_copy(m->dev, m->stream, h, w->data, w->nbytes, SL_COPY_D2H, err)) ||
         (st = sl_device_stream_sync(m->dev, m->stream, err)))) {
        sl__weight_storage_release(m, &hs);
        return st;
    }
    switch_to(m, w, &hs);
    w->orig_fresh = at_orig; /* the original block keeps these bytes: a free way back */
    return SL_OK;
}

/* A fallen-back weight whose original device block still holds its bytes (never written
 * since it left it) returns there; one with new bytes gets a device block. *ok false: no
 * room (nothing changed). */
static sl_status back_to_device(sl_model *m, sl_weight *w, bool *ok, sl_error *err)
{
    *ok = false;
    if (w->orig_fresh) {
        switch_to(m, w, &w->orig);
        *ok = true;
        return SL_OK;
    }
    sl_weight tw = *w;
    tw.h_block = SL_BLOCK_NONE; /* the copy leaves w's own host storage alone */
    tw.h_owned = NULL;
    sl_error e;
    sl_status st = sl__weight_to_device(m, &tw, &e);
    if (st) {
        if (tw.d_block != SL_BLOCK_NONE) sl_bfc_free(m->arena, tw.d_block, NULL);
        return st == SL_ERR_NOMEM || tw.d_block == SL_BLOCK_NONE
                   ? SL_OK : sl_error_set(err, st, "'%s': %s", w->name, e.msg);
    }
    sl_weight_storage ds = sl__weight_storage_get(&tw);
    switch_to(m, w, &ds);
    *ok = true;
    return SL_OK;
}

/* A sibling following a fallback: to the host, by the model's own means (a runtime's weight
 * reads its host floor again). */
static sl_status host_side(sl_model *m, sl_weight *w, sl_error *err)
{
    return m->serving ? m->serving->weight_to_host(m, w, err) : to_host(m, w, err);
}

static sl_status sibling_entry(reload_run *r, const sl_weight *w, sl_error *err)
{
    sl_reload_entry *e = add_entry(r->rep, w->name, SL_RELOAD_SIBLING);
    if (!e) return sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
    e->old_type = e->new_type = sl_repack_base_type(w->type);
    e->old_bytes = e->new_bytes = w->nbytes;
    e->where = where(w);
    r->rep->changed = true;
    return SL_OK;
}

/* Sibling expert tensors share a side: mixed groups go to the host; groups wholly on the host
 * by fallback try to return to the device together. The same for a model in a runtime, whose
 * moves are runtime_reload.c's (its floor is the host copy). */
static sl_status siblings(reload_run *r, sl_error *err)
{
    sl_model *m = r->m;
    for (int32_t il = 0; il < m->hp.n_layer && m->hp.n_expert; il++) {
        sl__layer *L = &m->layers[il];
        sl_weight *g[3 * 256 + 3];
        size_t n = 0;
        if (L->gate_exps) {
            g[n++] = L->gate_exps;
            g[n++] = L->up_exps;
            g[n++] = L->down_exps;
        } else if (L->gate_e && m->hp.n_expert <= 256) {
            for (int32_t x = 0; x < m->hp.n_expert; x++) {
                g[n++] = L->gate_e[x];
                g[n++] = L->up_e[x];
                g[n++] = L->down_e[x];
            }
        }
        size_t on_dev = 0, fallen = 0;
        for (size_t i = 0; i < n; i++) {
            on_dev += (g[i]->residency & SL_RES_DEVICE) != 0;
            fallen += g[i]->fallback;
        }
        sl_status st;
        /* every host tensor is there by a fallback from an earlier call: all return, or none */
        if (n && on_dev < n && fallen == n - on_dev && !r->fell_layer[il]) {
            bool ok = true;
            size_t k = 0;
            for (; k < n && ok; k++)
                if (g[k]->fallback && (st = m->serving ? m->serving->weight_to_device(m, g[k], &ok, err)
                                                  : back_to_device(m, g[k], &ok, err)))
                    return st;
            for (size_t i = 0; i < k; i++) {
                if (ok) st = sibling_entry(r, g[i], err);
                else if (i + 1 < k && g[i]->residency & SL_RES_DEVICE) st = host_side(m, g[i], err);
                if (st) return st;
            }
            if (ok) continue;
        }
        for (size_t i = 0; on_dev && on_dev < n && i < n; i++) { /* mixed: all to the host */
            if (!(g[i]->residency & SL_RES_DEVICE)) continue;
            if ((st = host_side(m, g[i], err)) || (st = sibling_entry(r, g[i], err))) return st;
        }
    }
    return SL_OK;
}

/* Split layers whose gate/up/down changed: each is split again from the new bytes of all
 * three (the staged ones; a projection not staged has no bytes left, so the layer is refused),
 * and its staged entries leave the list. */
static sl_status resplit(reload_run *r, sl_error *err)
{
    sl_model *m = r->m;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        sl__layer *L = &m->layers[il];
        sl_weight *proj[3] = {L->ffn_gate, L->ffn_up, L->ffn_down};
        staged *sp[3] = {NULL, NULL, NULL};
        bool any = false;
        for (size_t i = 0; i < r->n_s; i++)
            for (int p = 0; p < 3; p++)
                if (r->s[i].resplit && r->s[i].w == proj[p]) sp[p] = &r->s[i], any = true;
        if (!any) continue;
        const double t0 = now_s();
        sl_status st = SL_OK;
        char why[SL_ERROR_MSG_BYTES] = "";
        if (!sp[0] || !sp[1] || !sp[2]) {
            snprintf(why, sizeof why, "its FFN is split hot/cold and is rebuilt from gate, up "
                     "and down together, but '%s' could not be read with it (its file is being "
                     "rewritten, or its change was refused)",
                     proj[!sp[0] ? 0 : !sp[1] ? 1 : 2]->name);
        } else {
            const void *data[3];
            uint32_t type[3];
            uint64_t nbytes[3];
            bool conv[3];
            for (int p = 0; p < 3; p++) {
                data[p] = staged_bytes(sp[p]);
                type[p] = sp[p]->new_type;
                nbytes[p] = sp[p]->new_bytes;
                conv[p] = sp[p]->f32 != NULL;
            }
            uint32_t old_type[3];
            uint64_t old_bytes[3];
            for (int p = 0; p < 3; p++) old_type[p] = proj[p]->type, old_bytes[p] = proj[p]->nbytes;
            sl_error e;
            st = sl__weight_resplit(m, L, data, type, nbytes, conv, &e);
            if (st == SL_ERR_NOMEM) {
                snprintf(why, sizeof why, "rebuilding its hot/cold parts: %s", e.msg);
                st = SL_OK;
            } else if (st) {
                return sl_error_set(err, st, "layer %d: rebuilding its hot/cold parts: %s", il,
                                    e.msg);
            } else {
                for (int p = 0; p < 3; p++) {
                    sl_weight *w = proj[p];
                    sl__weight_provenance_set(w, sp[p]->nt, sp[p]->file_size);
                    const bool same_type = old_type[p] == w->type;
                    const bool sib = sp[p]->companion && same_type;
                    sl_reload_entry *en = add_entry(r->rep, w->name, sib ? SL_RELOAD_SIBLING
                                                    : same_type ? SL_RELOAD_IN_PLACE
                                                    : SL_RELOAD_PRIVATE);
                    if (!en) return sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
                    en->old_type = old_type[p];
                    en->new_type = w->type;
                    en->old_bytes = old_bytes[p];
                    en->new_bytes = w->nbytes;
                    en->where = "hot/cold parts (device + host)";
                    en->seconds = sp[p]->seconds + (now_s() - t0) / 3;
                    r->rep->n_reloaded += !sib;
                }
                r->rep->changed = true;
            }
        }
        for (int p = 0; p < 3; p++) {
            if (!sp[p]) continue;
            if (why[0]) refuse(r, sp[p]->w, sp[p]->new_type, "%s", why);
            sp[p]->act = SL_SWAP_NONE; /* dropped below */
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < r->n_s; i++) {
        if (r->s[i].resplit) staged_free(m, &r->s[i]);
        else r->s[k++] = r->s[i];
    }
    r->n_s = k;
    return SL_OK;
}

static int by_action(const void *a, const void *b)
{
    const staged *x = a, *y = b;
    const int rx = x->act == SL_SWAP_REATTACH ? 0 : x->act == SL_SWAP_IN_PLACE ? 1 : 2;
    const int ry = y->act == SL_SWAP_REATTACH ? 0 : y->act == SL_SWAP_IN_PLACE ? 1 : 2;
    return rx - ry;
}

/* A runtime's order: tensors that shrink first (their old blocks go before the new ones are
 * taken, so memory they free serves the tensors that grow), then the model's weight order. */
static int by_growth(const void *a, const void *b)
{
    const staged *x = a, *y = b;
    const int64_t gx = (int64_t)x->new_bytes - (int64_t)x->w->nbytes;
    const int64_t gy = (int64_t)y->new_bytes - (int64_t)y->w->nbytes;
    return gx < gy ? -1 : gx > gy ? 1 : x->w < y->w ? -1 : x->w > y->w;
}

/* The plan record follows the weights: bytes and type of each, totals by side. */
static void refresh_plan(sl_model *m)
{
    if (!m->place_t) return;
    m->plan.device_bytes = m->plan.host_bytes = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (w->residency == SL_RES_PARTS) { /* its type may have changed (resplit) */
            m->place_t[i].bytes = w->nbytes;
            m->place_t[i].type_name = type_name(w->type);
            m->plan.device_bytes += (uint64_t)((double)m->place_t[i].bytes * m->plan.hot_frac[i]);
            m->plan.host_bytes += m->place_t[i].bytes -
                (uint64_t)((double)m->place_t[i].bytes * m->plan.hot_frac[i]);
            continue;
        }
        m->place_t[i].bytes = w->nbytes;
        m->place_t[i].type_name = type_name(w->type);
        /* a runtime's model may be evicted: where it goes when loaded */
        if (m->rt ? w->want_device : (w->residency & SL_RES_DEVICE) != 0)
            m->plan.device_bytes += w->nbytes;
        else m->plan.host_bytes += w->nbytes;
    }
}

/* The commit of a model in a runtime (gate held): no original to reattach to — each staged
 * tensor becomes its weight's host floor and, on the device, its device copy (runtime.c:
 * sl__serving.swap_weight), under the runtime's mutex so no eviction, load or compaction runs
 * meanwhile; a device with no room for it leaves it on the host (a fallback, as in commit:
 * counted, reported, its expert siblings follow it, and the group returns together later). */
static sl_status commit_runtime(reload_run *r, sl_error *err)
{
    sl_model *m = r->m;
    sl_status st = SL_OK;
    qsort(r->s, r->n_s, sizeof *r->s, by_growth);
    m->serving->lock(m);
    for (size_t i = 0; i < r->n_s && !st; i++) {
        staged *s = &r->s[i];
        sl_weight *w = s->w;
        const double t0 = now_s();
        const uint32_t old_type = w->type;
        const uint64_t old_bytes = w->nbytes;
        if (s->same) {
            sl__weight_provenance_set(w, s->nt, s->file_size);
            m->serving->provenance_moved(m);
            continue;
        }
        const sl__floor ns = {.data = staged_bytes(s), .h_block = s->blk, .h_owned = s->f32};
        int32_t layer;
        /* a device layer's kernels read a host fallback only where the device is the host */
        const bool may_fall = is_routed(m, w, &layer) || host_addressable(m, SL_RES_DEVICE);
        sl_error e;
        bool fell;
        const sl_status ws = m->serving->swap_weight(m, w, &ns, s->new_type, s->new_bytes,
                                                     may_fall, &r->fault, &fell, &e);
        if (ws == SL_ERR_NOMEM || ws == SL_ERR_UNSUPPORTED) {
            if (!refuse(r, w, s->new_type, "not applied: %s", e.msg))
                st = sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
            continue;
        }
        if (ws) {
            st = sl_error_set(err, ws, "'%s': %s", w->name, e.msg);
            break;
        }
        s->blk = SL_BLOCK_NONE; /* the floor owns them now */
        s->f32 = NULL;
        w->converted = ns.h_owned != NULL;
        r->rep->n_fallback += fell;
        if (fell && is_routed(m, w, &layer)) r->fell_layer[layer] = true;
        st = applied(r, s, old_type == w->type && old_bytes == w->nbytes ? SL_RELOAD_IN_PLACE
                                                                         : SL_RELOAD_PRIVATE,
                     old_type, old_bytes, t0, err);
    }
    if (!st) st = siblings(r, err);
    m->serving->unlock(m);
    if (!st) st = sl__model_refresh_pointers(m, err);
    refresh_plan(m);
    sl__model_info_fill(m);
    if (!st) st = sl__model_validate(m, err);
    return st;
}

static sl_status commit(reload_run *r, sl_error *err)
{
    sl_model *m = r->m;
    sl_status st = resplit(r, err);
    if (st) return st;
    qsort(r->s, r->n_s, sizeof *r->s, by_action);
    for (size_t i = 0; i < r->n_s && !st; i++) st = apply(r, &r->s[i], err);
    if (!st) st = siblings(r, err);
    if (!st) st = sl__model_refresh_pointers(m, err);
    refresh_plan(m);
    sl__model_info_fill(m);
    if (!st) st = sl__model_validate(m, err);
    return st;
}

sl_status sl_reload_changed(sl_model *m, sl_reload_report *rep, sl_error *err)
{
    sl_reload_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    if (!m) return sl_error_set(err, SL_ERR_INVALID, "sl_reload_changed: NULL model");
    if (m->opt.plan_only || !m->gate_ready)
        return sl_error_set(err, SL_ERR_INVALID, "%s: opened with plan_only: nothing to reload",
                            m->path);
    const double t0 = now_s();
    reload_run r = {.m = m, .rep = rep, .fault = {.site = SL_FAULT_SWAP_ALLOC},
                    .touch = {.site = SL_FAULT_SWAP_TOUCH}};
    pthread_mutex_lock(&m->gate.reload);
    const uint32_t n_src = m->sources.n;
    sl_gguf **handles = calloc(n_src ? n_src : 1, sizeof *handles);
    sl_swap_source *seen = calloc(n_src ? n_src : 1, sizeof *seen);
    bool *done = calloc(n_src ? n_src : 1, sizeof *done);
    r.fell_layer = calloc((size_t)m->hp.n_layer + 1, sizeof *r.fell_layer);
    sl_status st = handles && seen && done && r.fell_layer
                       ? SL_OK : sl_error_set(err, SL_ERR_NOMEM, "reload: out of memory");
    for (uint32_t i = 0; i < n_src && !st; i++) {
        st = stage_file(&r, i, &handles[i], &done[i], err);
        seen[i] = r.file;
    }
    if (!st && r.n_s) st = stage_companions(&r, handles, err);
    if (!st && r.n_s) {
        sl_swap_exclusive_begin(&m->gate);
        st = m->rt ? commit_runtime(&r, err) : commit(&r, err);
        sl_swap_exclusive_end(&m->gate, rep->changed);
    }
    for (size_t i = 0; i < r.n_s; i++) staged_free(m, &r.s[i]);
    free(r.s);
    for (uint32_t i = 0; i < n_src; i++) {
        if (!st && done && done[i]) { /* this version is now the loaded one */
            seen[i].path = m->sources.v[i].path;
            m->sources.v[i] = seen[i];
        }
        if (handles) sl_gguf_close(handles[i]);
    }
    free(handles);
    free(seen);
    free(done);
    if (m->serving && rep->files_refused) {
        /* its files moved on past what it holds: going to DISK must check them first */
        m->serving->lock(m);
        m->serving->provenance_moved(m);
        m->serving->unlock(m);
    }
    free(r.fell_layer);
    free(r.prov);
    rep->seconds = now_s() - t0;
    pthread_mutex_unlock(&m->gate.reload);
    if (rep == &local) sl_reload_report_free(rep);
    if (!st && rep->files_refused)
        st = sl_error_set(err, SL_ERR_UNSUPPORTED, "reload refused: %s (%u file(s) refused: "
                          "their tensors keep their old bytes; reported again at every call "
                          "until the file is restored or the model reopened)", r.refused_why,
                          rep->files_refused);
    return st;
}
