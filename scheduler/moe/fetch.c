/* scheduler/moe/fetch.c: the fetching MoE scheduler (Post-Fetch) on the device interface; the
 * design, modes, cost model and metric definitions are in fetch.h.
 *
 * Its state and the records of one call are described in fetch_state.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"
#include "scheduler/moe/expert_ffn.h"
#include "scheduler/moe/fetch_state.h"
#include "scheduler/weights.h"

static sl_status grow(void **p, size_t *cap, size_t need, size_t elt, sl_error *err)
{
    if (need <= *cap) return SL_OK;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elt);
    if (!q) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory (%zu bytes)", n * elt);
    *p = q;
    *cap = n;
    return SL_OK;
}

/* buf, and on cuda its page-locking and device mirror (both redone when buf grows; the
 * streams are idle between calls). A failed registration only costs asynchrony; a failed
 * mirror sends this call's device groups to the CPU (launch_dev). */
static sl_status grow_buf(fetch *f, size_t floats, sl_error *err)
{
    if (floats <= f->buf_cap && (!f->cu || f->dact)) return SL_OK;
    if (floats > f->buf_cap) {
        if (f->buf_pinned) sl_device_host_unregister(f->dev, f->buf, NULL);
        f->buf_pinned = false;
        sl_status st = grow((void **)&f->buf, &f->buf_cap, floats, sizeof(float), err);
        if (st) return st;
        if (f->cu)
            f->buf_pinned = sl_device_host_register(f->dev, f->buf, f->buf_cap * sizeof(float),
                                                    NULL) == SL_OK;
    }
    if (!f->cu || (f->dact && f->dact_cap >= f->buf_cap * sizeof(float))) return SL_OK;
    if (f->dact) sl_device_region_free(f->dev, f->dact, NULL);
    f->dact = NULL;
    f->dact_cap = 0;
    if (sl_device_region_alloc(f->dev, f->buf_cap * sizeof(float), &f->dact, NULL) == SL_OK)
        f->dact_cap = f->buf_cap * sizeof(float);
    else
        f->dact = NULL;
    return SL_OK;
}

static uint64_t align_up(uint64_t v)
{
    return (v + SL_BFC_ALIGN - 1) / SL_BFC_ALIGN * SL_BFC_ALIGN;
}

/* ---- the expert FFN: scheduler/moe/expert_ffn.h, the CPU scheduler's routine -------------- */

/* L: &f->cur for the host's bytes, &f->dcur for a device copy's (sim's jobs). */
static sl_status gate_up_act(const fetch *f, const sl_moe_layer *L, int32_t e, sl_cpu_pool *pool,
                             const void *wg, const void *wu, const float *x, int64_t m, float *g,
                             float *u, void *work, sl_error *err)
{
    return sl__expert_gate_up(&f->ops, &f->mv, pool, L, e, wg, wu, x, m, g, u, work,
                              f->work_cap, err);
}

static sl_status down(const fetch *f, const sl_moe_layer *L, int32_t e, sl_cpu_pool *pool,
                      const void *wd, const float *g, int64_t m, float *d, void *work,
                      sl_error *err)
{
    return sl__expert_down(&f->mv, pool, L, e, wd, g, m, d, work, f->work_cap, err);
}

/* ---- device jobs (run on the compute stream's worker; sim) ------------------------------ */

static void job_full(void *p)
{
    fgroup *g = p;
    const fetch *f = g->f;
    const xinfo *x = &f->xs[g->xi];
    g->t0 = sl__now_ns();
    sl_error e;
    g->dev_st = gate_up_act(f, &f->dcur, g->e, NULL, x->dp[0], x->dp[1], g->x, g->m, g->g,
                            g->u, f->dwork, &e);
    if (!g->dev_st)
        g->dev_st = down(f, &f->dcur, g->e, NULL, x->dp[2], g->g, g->m, g->d, f->dwork, &e);
    g->t1 = sl__now_ns();
}

static void job_down(void *p)
{
    fgroup *g = p;
    const fetch *f = g->f;
    g->t0 = sl__now_ns();
    sl_error e;
    g->dev_st = down(f, &f->dcur, g->e, NULL, f->xs[g->xi].dp[2], g->g, g->m, g->d, f->dwork,
                     &e);
    g->t1 = sl__now_ns();
}

/* cuda: the same work as job_down / job_full, enqueued on the compute stream. The group's
 * rows have a device mirror at the same offset in dact as in buf; the activations go up, the
 * down output comes back into g->d (buf is page-locked, so neither copy blocks the CPU). A
 * launch refused here is a failed device job (the caller computes the group on the CPU); a
 * fault inside a kernel shows at finish_device's sync, which reports it as fatal (below).
 * Expert biases and gpt-oss's clamped SwiGLU have no CUDA path here yet: such layers are
 * refused, so their groups run on the CPU (counted as failed device jobs). */
static sl_status cuda_job(fetch *f, fgroup *g, bool full)
{
    const sl_moe_layer *L = &f->dcur;
    if (L->gate_b || L->up_b || L->down_b || L->act == SL_MOE_SWIGLU_OAI)
        return SL_ERR_UNSUPPORTED;
    const xinfo *x = &f->xs[g->xi];
    const int64_t E = L->n_embd, F = L->n_ff, m = g->m;
    float *dx = (float *)f->dact + (g->x - f->buf), *dg = dx + m * E, *du = dg + m * F,
          *dd = du + m * F;
    sl_status st;
    const bool hs = sl__fetch_host_stamps(f);
    g->t0 = g->t1 = 0;
    if (hs && (st = sl_device_launch_host(f->dev, f->ks, sl__fetch_stamp, &g->t0, NULL))) return st;
    if (full) {
        if ((st = sl_device_copy(f->dev, f->ks, dx, g->x, (uint64_t)(m * E) * sizeof(float),
                                 SL_COPY_H2D, NULL)) ||
            (st = sl_cuda_gemv(f->cu, L->type_gate, x->dp[0], F, E, dx, m, dg, NULL)) ||
            (st = sl_cuda_gemv(f->cu, L->type_up, x->dp[1], F, E, dx, m, du, NULL)))
            return st;
        st = L->act == SL_MOE_SILU ? sl_cuda_swiglu(f->cu, dg, du, dg, m * F, NULL)
                                   : sl_cuda_geglu(f->cu, dg, du, dg, m * F, SL_GELU_TANH, NULL);
    } else {
        st = sl_device_copy(f->dev, f->ks, dg, g->g, (uint64_t)(m * F) * sizeof(float),
                            SL_COPY_H2D, NULL);
    }
    if (st || (st = sl_cuda_gemv(f->cu, L->type_down, x->dp[2], E, F, dg, m, dd, NULL)) ||
        (st = sl_device_copy(f->dev, f->ks, g->d, dd, (uint64_t)(m * E) * sizeof(float),
                             SL_COPY_D2H, NULL)))
        return st;
    return hs ? sl_device_launch_host(f->dev, f->ks, sl__fetch_stamp, &g->t1, NULL) : SL_OK;
}

/* Enqueues group g's device work (down only, or all of it): a host function running the CPU
 * kernels on sim, kernels/cuda on cuda. true: enqueued. */
static bool launch_dev(fetch *f, fgroup *g, bool full)
{
    const uint64_t t0 = sl__now_ns();
    const bool ok = f->cu ? f->dact && cuda_job(f, g, full) == SL_OK
                          : sl_device_launch_host(f->dev, f->ks, full ? job_full : job_down, g,
                                                  NULL) == SL_OK;
    f->call_issue_ns += sl__now_ns() - t0;
    f->call_issue_ops++;
    return ok;
}

/* ---- CPU work (spans recorded for the overlap metric and the trace) -------------------- */

static void cpu_span(fetch *f, uint64_t t0, const char *what, int32_t e, uint64_t bytes)
{
    const uint64_t t1 = sl__now_ns();
    if (f->n_iv < (int64_t)f->iv_cap) f->iv[f->n_iv++] = (sl__iv){t0, t1};
    f->call_cpu_bytes += bytes;
    f->call_cpu_ns += t1 - t0;
    sl__trace_add(&f->trace, SL__TID_CPU, t0, t1, "cpu L%d e%d %s", f->cur.layer, e, what);
}

static void gather(fetch *f, fgroup *g, const sl_moe_assign *a, const float *x)
{
    const int64_t E = f->cur.n_embd;
    for (int64_t i = 0; i < g->m; i++)
        memcpy(g->x + i * E, x + (int64_t)a[g->idx[i]].token * E, (size_t)E * sizeof(float));
}

static sl_status cpu_full(fetch *f, fgroup *g, sl_error *err)
{
    const uint64_t t0 = sl__now_ns();
    const sl_moe_layer *L = &f->cur;
    sl_status st = gate_up_act(f, L, g->e, f->pool, L->gate[g->e], L->up[g->e], g->x, g->m,
                               g->g, g->u, f->work, err);
    if (!st) st = down(f, L, g->e, f->pool, L->down[g->e], g->g, g->m, g->d, f->work, err);
    g->dev = false;
    cpu_span(f, t0, "gate+up+down", g->e, f->pb[0] + f->pb[1] + f->pb[2]);
    return st;
}

/* ---- arena, pins ------------------------------------------------------------------------- */

static void ensure_arena(fetch *f, const uint64_t pb[3])
{
    if (f->arena || f->arena_failed) return;
    /* Regions sized for the cache (budget + pins): a scratch area larger than that gets a
     * region of its own size (bfc.h), so the scratch block never swallows the cache's room
     * (BFC hands out a whole chunk when splitting would leave too little), and max_bytes then
     * allows exactly one cache region — fragmentation there is met by compaction
     * (compact_on_oom), not by growth. A smaller scratch shares the first region. */
    const uint64_t xb = align_up(pb[0]) + align_up(pb[1]) + align_up(pb[2]);
    uint64_t region = align_up(f->opt.cache_bytes) + (uint64_t)f->n_pins * xb +
                      align_up(f->opt.hot_bytes);
    if (region < ((uint64_t)64 << 10)) region = (uint64_t)64 << 10;
    /* mode cpu never fetches: a token scratch block in the one region the resident experts
     * fill, so the device holds what the options ask for and no more */
    const bool cpu = f->opt.mode == SL_FETCH_CPU;
    const uint64_t sb = cpu ? 256 : align_up(f->opt.scratch_bytes);
    if (cpu) region += sb;
    const uint64_t bytes = cpu ? region : (sb > region ? sb : region) + region;
    sl_bfc_options bo = {.region_bytes = region, .max_bytes = bytes, .compact_on_oom = true};
    if (sl_bfc_create_device(f->dev, f->cs, &bo, &f->arena, NULL) ||
        sl_bfc_alloc(f->arena, sb, SL_BFC_PINNED, &f->scratch, NULL)) {
        sl_bfc_destroy(f->arena);
        f->arena = NULL;
        f->arena_failed = true;
        return;
    }
    f->scratch_bytes = sl_bfc_size(f->arena, f->scratch);
    f->cache.arena = f->arena;
    f->cs_dirty = true;
}

/* Fills a freshly admitted cache entry: a piece this call already brought into scratch
 * (slot[p] != NULL) moves device to device — no second trip over PCIe; the rest comes from the
 * host copies. Enqueued on the copy stream, behind this call's copies (so the slot is filled)
 * and ahead of the next call's (which reuse the slots). */
bool sl__fetch_fill(fetch *f, const sl__cache_entry *x, int32_t e, const uint64_t pb[3],
                    const void *const slot[3])
{
    uint8_t *base = sl_bfc_ptr(f->arena, x->block);
    f->cs_dirty = true;
    const void *src[3];
    for (int p = 0; p < 3; p++)
        if (!(src[p] = slot && slot[p] ? slot[p] : sl__fetch_stage_piece(f, p, e))) return false;
    if (!sl__fetch_stage_run(f)) return false;
    for (int p = 0; p < 3; p++) {
        const bool d2d = slot && slot[p];
        if (sl_device_copy(f->dev, f->cs, base + x->off[p], src[p], pb[p],
                           d2d ? SL_COPY_D2D : SL_COPY_H2D, NULL))
            return false;
        if (d2d) continue;
        f->cs_stats.copies++;
        f->cs_stats.bytes_copied += pb[p];
    }
    return true;
}

/* ---- exec -------------------------------------------------------------------------------- */

static sl_status prepare(fetch *f, const sl_moe_layer *L, const sl_moe_assign *a,
                         int64_t n_assign, sl_error *err)
{
    const int64_t E = L->n_embd, F = L->n_ff;
    sl_status st;
    /* the host's types and a device copy's (sim's jobs compute that one on the CPU) */
    const size_t wh = sl__expert_work_bytes(L, CHUNK);
    const size_t wdev = sl__expert_work_bytes(&f->dcur, CHUNK);
    const size_t wb = wh && wdev ? (wh > wdev ? wh : wdev) : 0;
    if (!wb)
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "moe layer %d: expert weight types %u/%u/%u have no CPU matvec",
                            L->layer, L->type_gate, L->type_up, L->type_down);
    if (wb > f->work_cap) {
        void *w = realloc(f->work, wb), *d = w ? realloc(f->dwork, wb) : NULL;
        if (w) f->work = w;
        if (!w || !d) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory (work)");
        f->dwork = d;
        f->work_cap = wb;
    }
    if ((st = grow((void **)&f->order, &f->order_cap, (size_t)n_assign + 1, sizeof(int32_t), err)) ||
        (st = grow((void **)&f->count, &f->count_cap, (size_t)L->n_expert + 1, sizeof(int32_t),
                   err)) ||
        (st = grow_buf(f, (size_t)n_assign * (size_t)(2 * E + 2 * F), err)))
        return st;
    /* stable counting sort of assignment indices by expert (as moe_cpu.c) */
    int32_t *cnt = f->count;
    memset(cnt, 0, ((size_t)L->n_expert + 1) * sizeof *cnt);
    for (int64_t i = 0; i < n_assign; i++) cnt[a[i].expert + 1]++;
    int64_t used = 0;
    for (int32_t e = 0; e < L->n_expert; e++) used += cnt[e + 1] > 0;
    for (int32_t e = 0; e < L->n_expert; e++) cnt[e + 1] += cnt[e];
    for (int64_t i = 0; i < n_assign; i++) f->order[cnt[a[i].expert]++] = (int32_t)i;
    const int64_t n_groups = used + n_assign / CHUNK + 1;
    if ((st = grow((void **)&f->xs, &f->xs_cap, (size_t)used, sizeof(xinfo), err)) ||
        (st = grow((void **)&f->gs, &f->gs_cap, (size_t)n_groups, sizeof(fgroup), err)) ||
        (st = grow((void **)&f->iv, &f->iv_cap, (size_t)(2 * n_groups + 4), sizeof(sl__iv), err)))
        return st;
    f->n_x = f->n_g = f->n_c = f->c_enq = f->c_ret = f->n_iv = 0;
    float *p = f->buf;
    int64_t begin = 0;
    for (int32_t e = 0; e < L->n_expert; e++) {
        const int64_t end = cnt[e];
        if (end == begin) continue;
        xinfo *x = &f->xs[f->n_x];
        *x = (xinfo){.e = e, .kind = X_CPU, .last_copy = -1, .copy = {-1, -1, -1},
                     .g0 = f->n_g};
        for (int64_t b = begin; b < end; b += CHUNK) {
            const int64_t m = end - b < CHUNK ? end - b : CHUNK;
            fgroup *g = &f->gs[f->n_g++];
            *g = (fgroup){.f = f, .e = e, .xi = (int32_t)f->n_x, .idx = f->order + b, .m = m};
            g->x = p, p += m * E;
            g->g = p, p += m * F;
            g->u = p, p += m * F;
            g->d = p, p += m * E;
        }
        x->g1 = f->n_g;
        f->n_x++;
        begin = end;
    }
    return SL_OK;
}

/* Plans the copies of the experts of kind X_FETCH (pieces `p0 .. 2`), into scratch slots;
 * an expert that finds no room is marked failed (CPU path). */
static sl_status plan_copies(fetch *f, int p0, sl_error *err)
{
    sl_status st = grow((void **)&f->cps, &f->cps_cap, (size_t)(3 * f->n_x + 1), sizeof(fcopy),
                        err);
    if (st) return st;
    uint64_t off = 0;
    for (int p = p0; p < 3; p++) {
        for (int64_t xi = 0; xi < f->n_x; xi++) {
            xinfo *x = &f->xs[xi];
            if (x->kind != X_FETCH || x->failed) continue;
            const uint64_t need = align_up(f->pb[p]);
            if (!f->arena || off + need > f->scratch_bytes) {
                x->failed = true;
                continue;
            }
            const uint8_t *s = sl__fetch_stage_piece(f, p, x->e);
            if (!s) {
                x->failed = true;
                continue;
            }
            fcopy *c = f->n_c ? &f->cps[f->n_c - 1] : NULL;
            /* pack with the previous copy when host bytes and slots are both adjacent */
            if (c && (const uint8_t *)c->src + c->bytes == s && c->dst_off + c->bytes == off &&
                c->bytes + f->pb[p] <= SL_FETCH_COPY_MAX_BYTES) {
                c->bytes += f->pb[p];
            } else {
                c = &f->cps[f->n_c++];
                *c = (fcopy){.src = s, .dst_off = off, .bytes = f->pb[p]};
            }
            x->dp[p] = (const uint8_t *)sl_bfc_ptr(f->arena, f->scratch) + off;
            x->copy[p] = x->last_copy = f->n_c - 1;
            off += need;
        }
    }
    if (off > f->cs_stats.scratch_peak_bytes) f->cs_stats.scratch_peak_bytes = off;
    if (!sl__fetch_stage_run(f))
        return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: unpacking Q4_K_R8 experts failed");
    return sl__fetch_ensure_events(f, f->n_c, err);
}

/* Sorts the used experts into engine-resident, cached and to-fetch; returns the misses. */
static int64_t classify(fetch *f, sl__cache_layer *CL)
{
    const sl_moe_layer *L = &f->cur;
    int64_t misses = 0;
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        xinfo *xx = &f->xs[xi];
        const int32_t e = xx->e;
        if (CL) sl__cache_touch(&f->cache, CL, e);
        if (L->on_device && L->on_device[e]) {
            xx->kind = X_ENGINE;
            xx->dp[0] = L->gate[e], xx->dp[1] = L->up[e], xx->dp[2] = L->down[e];
            continue;
        }
        f->cs_stats.cache_lookups++;
        if (CL && CL->e[e].resident) {
            const uint8_t *b = sl_bfc_ptr(f->arena, CL->e[e].block);
            xx->kind = X_CACHED;
            for (int p = 0; p < 3; p++) xx->dp[p] = b + CL->e[e].off[p];
            f->cs_stats.cache_hits++;
            continue;
        }
        xx->kind = X_FETCH;
        misses++;
    }
    return misses;
}

/* Every group of expert xi on the CPU (its fetch failed, or it was never to be fetched). */
static sl_status run_cpu(fetch *f, const xinfo *xx, const sl_moe_assign *a, const float *x,
                         sl_error *err)
{
    for (int64_t gi = xx->g0; gi < xx->g1; gi++) {
        gather(f, &f->gs[gi], a, x);
        sl_status st = cpu_full(f, &f->gs[gi], err);
        if (st) return st;
    }
    return SL_OK;
}

/* Every group of expert xi wholly on the device (after `wait`, when not NULL); a refused
 * launch computes that group on the CPU. */
static sl_status run_dev_full(fetch *f, xinfo *xx, const sl_moe_assign *a, const float *x,
                              sl_error *err)
{
    for (int64_t gi = xx->g0; gi < xx->g1; gi++) {
        fgroup *g = &f->gs[gi];
        gather(f, g, a, x);
        g->dev = launch_dev(f, g, true);
        if (g->dev) continue;
        xx->failed = xx->kind == X_FETCH;
        sl_status st = cpu_full(f, g, err);
        if (st) return st;
    }
    return SL_OK;
}

/* full: the compute stream waits for the expert's last copy, then computes it all. */
static sl_status run_full(fetch *f, int64_t xi, const sl_moe_assign *a, const float *x,
                          sl_error *err)
{
    xinfo *xx = &f->xs[xi];
    sl__fetch_pump(f, xx->last_copy);
    if (sl__fetch_copies_failed(f, xx) ||
        sl_device_stream_wait(f->dev, f->ks, f->ev[xx->last_copy], NULL)) {
        xx->failed = true;
        return run_cpu(f, xx, a, x, err);
    }
    return run_dev_full(f, xx, a, x, err);
}

/* post: gate, up and the activation on the CPU while the down copy flies; then down on the
 * device if the copy is in (or block_on_miss lets the device wait for it), else on the CPU. */
static sl_status run_post(fetch *f, int64_t xi, const sl_moe_assign *a, const float *x,
                          sl_error *err)
{
    xinfo *xx = &f->xs[xi];
    const sl_moe_layer *L = &f->cur;
    for (int64_t gi = xx->g0; gi < xx->g1; gi++) {
        fgroup *g = &f->gs[gi];
        gather(f, g, a, x);
        sl__fetch_pump(f, -1);
        uint64_t t0 = sl__now_ns();
        sl_status st = gate_up_act(f, L, g->e, f->pool, L->gate[g->e], L->up[g->e], g->x,
                                   g->m, g->g, g->u, f->work, err);
        cpu_span(f, t0, "gate+up+act", g->e, f->pb[0] + f->pb[1]);
        if (st) return st;
        int cs = sl__fetch_copies_failed(f, xx) ? -1 : sl__fetch_copy_status(f, xi);
        if (cs == 0 && f->opt.block_on_miss) {
            sl__fetch_pump(f, xx->last_copy);
            cs = sl__fetch_copies_failed(f, xx) ||
                         sl_device_stream_wait(f->dev, f->ks, f->ev[xx->last_copy], NULL)
                     ? -1
                     : 1;
        }
        if (cs == 1) g->dev = launch_dev(f, g, false);
        if (g->dev) continue;
        if (cs == 0) xx->missed = true;
        else xx->failed = true;
        t0 = sl__now_ns();
        st = down(f, L, g->e, f->pool, L->down[g->e], g->g, g->m, g->d, f->work, err);
        cpu_span(f, t0, "down", g->e, f->pb[2]);
        if (st) return st;
    }
    return SL_OK;
}

/* Waits for both streams; a device group that did not run cleanly is redone on the CPU (sim).
 * On cuda a failure of the compute stream is a kernel fault, which leaves the CUDA context
 * unusable for the rest of the process (every later call fails with the same sticky error):
 * a CPU redo could not even read the results back, so it is reported as fatal instead. */
static sl_status finish_device(fetch *f, sl_fetch_mode mode, sl_error *err)
{
    sl_error ke = {0};
    const bool ks_ok = sl_device_stream_sync(f->dev, f->ks, &ke) == SL_OK;
    if (!ks_ok && f->cu)
        return sl_error_set(err, SL_ERR_DEVICE,
                            "moe fetch: fatal device error in layer %d's expert kernels "
                            "(kernels/cuda GEMV/activation on the compute stream): %s; a CUDA "
                            "kernel fault leaves this process's GPU context unusable: restart the "
                            "process", f->cur.layer, ke.msg);
    const bool cs_ok = sl__fetch_cs_drain(f);
    for (int64_t i = 0; i < f->n_c; i++)
        if (f->cps[i].state == C_INFLIGHT) {
            f->cps[i].state = cs_ok ? C_DONE : C_FAILED;
            if (cs_ok) sl__fetch_copy_seen_done(f, &f->cps[i]);
        }
    for (int64_t gi = 0; gi < f->n_g; gi++) {
        fgroup *g = &f->gs[gi];
        if (!g->dev) continue;
        const xinfo *xx = &f->xs[g->xi];
        if (ks_ok && !g->dev_st) {
            sl__trace_add(&f->trace, SL__TID_DEV, g->t0, g->t1, "dev L%d e%d %s", f->cur.layer,
                          g->e, xx->kind == X_FETCH && mode == SL_FETCH_POST ? "down"
                                                                              : "gate+up+down");
            continue;
        }
        f->xs[g->xi].failed = f->xs[g->xi].kind == X_FETCH;
        sl_status st = cpu_full(f, g, err);
        if (st) return st;
    }
    return SL_OK;
}

/* out += each group's rows, in the CPU scheduler's order (experts ascending, chunks in
 * order), which is what makes the sum bit-identical to it. */
static void sum_groups(fetch *f, const sl_moe_assign *a, float *out)
{
    const int64_t E = f->cur.n_embd;
    for (int64_t gi = 0; gi < f->n_g; gi++) {
        const fgroup *g = &f->gs[gi];
        for (int64_t i = 0; i < g->m; i++) {
            const float w = a[g->idx[i]].weight;
            float *o = out + (int64_t)a[g->idx[i]].token * E;
            const float *d = g->d + i * E;
            for (int64_t j = 0; j < E; j++) o[j] += w * d[j];
        }
        f->base.stats.batches++;
        if (g->dev) {
            f->base.stats.calls_gpu += (uint64_t)g->m;
            f->cs_stats.groups_dev++;
        } else {
            f->base.stats.calls_cpu += (uint64_t)g->m;
            f->cs_stats.groups_cpu++;
        }
    }
}

static void account(fetch *f)
{
    const int32_t layer = f->cur.layer;
    f->cs_stats.scratch_bytes = f->scratch_bytes;
    f->cs_stats.cache_bytes_used = f->cache.used;
    if (f->arena) {
        sl_bfc_stats bs;
        sl_bfc_stats_get(f->arena, &bs);
        f->cs_stats.compactions = bs.compactions - f->total.compactions;
    }
    if (layer >= f->n_layer_stats) {
        sl_fetch_stats *n = realloc(f->per_layer, (size_t)(layer + 1) * sizeof *n);
        if (n) {
            memset(n + f->n_layer_stats, 0, (size_t)(layer + 1 - f->n_layer_stats) * sizeof *n);
            f->per_layer = n;
            f->n_layer_stats = layer + 1;
        }
    }
    if (layer >= 0 && layer < f->n_layer_stats)
        sl__fetch_stats_add(&f->per_layer[layer], &f->cs_stats);
    sl__fetch_stats_add(&f->total, &f->cs_stats);
}

/* The experts the CPU computes by choice (X_CPU) in one batch through the CPU scheduler — a
 * layer's gate/up in one pool call, its downs in another, not three handoffs per expert —
 * each result landing in its group's d, so sum_groups adds in the usual order. */
static sl_status run_cpu_batch(fetch *f, const sl_moe_assign *a, const float *x, int64_t n_tok,
                               sl_error *err)
{
    const int64_t E = f->cur.n_embd;
    int64_t n = 0, nx = 0;
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        if (f->xs[xi].kind != X_CPU) continue;
        nx++;
        for (int64_t gi = f->xs[xi].g0; gi < f->xs[xi].g1; gi++) n += f->gs[gi].m;
    }
    if (!n) return SL_OK;
    sl_status st;
    if ((st = grow((void **)&f->sub, &f->sub_cap, (size_t)n, sizeof *f->sub, err)) ||
        (st = grow((void **)&f->rows, &f->rows_cap, (size_t)(n * E), sizeof *f->rows, err)))
        return st;
    int64_t j = 0;
    for (int64_t xi = 0; xi < f->n_x; xi++)
        for (int64_t gi = f->xs[xi].g0; f->xs[xi].kind == X_CPU && gi < f->xs[xi].g1; gi++)
            for (int64_t i = 0; i < f->gs[gi].m; i++) f->sub[j++] = a[f->gs[gi].idx[i]];
    const uint64_t t0 = sl__now_ns();
    if ((st = sl_moe_exec_rows(f->parts, &f->cur, f->sub, n, x, n_tok, f->rows, err))) return st;
    f->call_cpu_assign += n;
    f->call_cpu_x += nx;
    j = 0;
    for (int64_t xi = 0; xi < f->n_x; xi++)
        for (int64_t gi = f->xs[xi].g0; f->xs[xi].kind == X_CPU && gi < f->xs[xi].g1; gi++) {
            fgroup *g = &f->gs[gi];
            memcpy(g->d, f->rows + j * E, (size_t)(g->m * E) * sizeof *g->d);
            j += g->m;
            g->dev = false;
        }
    cpu_span(f, t0, "experts", -1, (uint64_t)nx * (f->pb[0] + f->pb[1] + f->pb[2]));
    return SL_OK;
}

static sl_status run_all(fetch *f, sl_fetch_mode mode, const sl_moe_assign *a, const float *x,
                         int64_t n_tok, sl_error *err)
{
    sl_status st;
    /* resident experts first, so the device works on them while the CPU does its part */
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        xinfo *xx = &f->xs[xi];
        if ((xx->kind == X_ENGINE || xx->kind == X_CACHED) &&
            (st = run_dev_full(f, xx, a, x, err)))
            return st;
    }
    if ((st = run_cpu_batch(f, a, x, n_tok, err))) return st;
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        xinfo *xx = &f->xs[xi];
        if (xx->kind == X_ENGINE || xx->kind == X_CACHED || xx->kind == X_CPU) continue;
        if (xx->kind == X_FETCH && !xx->failed && sl__fetch_copies_failed(f, xx)) xx->failed = true;
        if (xx->failed) st = run_cpu(f, xx, a, x, err);
        else if (mode == SL_FETCH_FULL) st = run_full(f, xi, a, x, err);
        else st = run_post(f, xi, a, x, err);
        if (st) return st;
    }
    return finish_device(f, mode, err);
}

/* A hot/cold part through the CPU scheduler, its counters added to this scheduler's. */
static sl_status run_part(fetch *f, const sl_moe_layer *L, const sl_moe_assign *a,
                          int64_t n_assign, const float *x, int64_t n_tok, float *out,
                          sl_error *err)
{
    sl_moe_stats before, after;
    sl_moe_stats_get(f->parts, &before);
    const sl_status st = sl_moe_exec(f->parts, L, a, n_assign, x, n_tok, out, err);
    sl_moe_stats_get(f->parts, &after);
    f->base.stats.calls_cpu += after.calls_cpu - before.calls_cpu;
    f->base.stats.calls_gpu += after.calls_gpu - before.calls_gpu;
    f->base.stats.batches += after.batches - before.batches;
    f->base.stats.cpu_bytes += after.cpu_bytes - before.cpu_bytes;
    f->base.stats.cpu_ns += after.cpu_ns - before.cpu_ns;
    return st;
}

static sl_status fetch_exec(sl_moe_sched *s, const sl_moe_layer *L, const sl_moe_assign *a,
                            int64_t n_assign, const float *x, int64_t n_tok, float *out,
                            sl_error *err)
{
    fetch *f = (fetch *)s;
    /* a hot/cold part (per-expert widths): the hot side lives in the engine's arena and the
     * cold side is the CPU's by the placement, so nothing is fetched or cached; the CPU
     * scheduler runs it, which keeps the sum order (and on sim the bits) of a cpu run */
    if (L->ff_at) return run_part(f, L, a, n_assign, x, n_tok, out, err);
    memset(out, 0, (size_t)n_tok * (size_t)L->n_embd * sizeof(float));
    if (!n_assign) return SL_OK;
    f->cur = f->dcur = *L;
    f->dcur.type_gate = sl_repack_base_type(L->type_gate);
    f->dcur.type_up = sl_repack_base_type(L->type_up);
    f->dcur.type_down = sl_repack_base_type(L->type_down);
    memset(&f->cs_stats, 0, sizeof f->cs_stats);
    f->cs_stats.calls = 1;
    f->call_cpu_bytes = f->call_cpu_ns = f->call_issue_ns = 0;
    f->call_cpu_assign = f->call_cpu_x = f->call_issue_ops = 0;
    /* promotions of the previous call land before anything reads the cache or the scratch */
    const bool dev_ok = sl__fetch_cs_drain(f);
    sl_status st = prepare(f, L, a, n_assign, err);
    if (st) return st;
    /* an expert's bytes (a Q4_K_R8 piece goes up unpacked to Q4_K, the same size:
     * fetch_stage.c) */
    f->pb[0] = sl__type_row_bytes(L->type_gate, L->n_embd) * (uint64_t)L->n_ff;
    f->pb[1] = sl__type_row_bytes(L->type_up, L->n_embd) * (uint64_t)L->n_ff;
    f->pb[2] = sl__type_row_bytes(L->type_down, L->n_ff) * (uint64_t)L->n_embd;
    const uint64_t off[3] = {0, align_up(f->pb[0]), align_up(f->pb[0]) + align_up(f->pb[1])};
    /* mode cpu still computes resident experts on the device: pinned, hot or uploaded ones */
    const bool use_dev = dev_ok && (f->opt.mode != SL_FETCH_CPU || f->n_pins || f->opt.hot_bytes ||
                                    (f->opt.cache_bytes && f->opt.uploads));
    if (use_dev) ensure_arena(f, f->pb);
    sl__cache_layer *CL =
        use_dev && f->arena ? sl__cache_layer_get(&f->cache, L->layer, L->n_expert) : NULL;
    if (CL) {
        CL->step++;
        if (!CL->pins_loaded) sl__fetch_load_pins(f, CL, off);
        if (f->opt.hot_bytes && !CL->hot_chosen) sl__fetch_hot(f, CL, a, n_assign, off);
    }
    const int64_t misses = use_dev ? classify(f, CL) : 0;
    sl_fetch_mode mode = f->opt.mode;
    if (mode == SL_FETCH_AUTO) {
        mode = sl__fetch_choose(f, misses, f->n_x, n_assign, f->pb);
        if (mode != SL_FETCH_CPU) sl__fetch_probe(f); /* the CPU side stays measured */
    }
    f->cs_stats.calls_mode[mode]++;
    for (int64_t xi = 0; xi < f->n_x; xi++)
        if (f->xs[xi].kind == X_FETCH) {
            if (mode == SL_FETCH_CPU) f->xs[xi].kind = X_CPU;
            else f->cs_stats.fetch_experts++;
        }
    if (misses && mode != SL_FETCH_CPU) {
        if (plan_copies(f, mode == SL_FETCH_POST ? 2 : 0, NULL)) {
            for (int64_t xi = 0; xi < f->n_x; xi++) f->xs[xi].failed = true;
            f->n_c = 0;
        }
        sl__fetch_pump(f, -1);
    }
    if ((st = run_all(f, mode, a, x, n_tok, err))) {
        /* a CPU kernel error: leave the device idle before the buffers can be reused */
        sl_device_stream_sync(f->dev, f->ks, NULL);
        sl_device_stream_sync(f->dev, f->cs, NULL);
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "kernel failed");
        return sl_error_set(err, st, "moe layer %d: %s", L->layer, why);
    }
    sum_groups(f, a, out);
    sl__fetch_measure(f, mode, n_assign);
    if (CL && f->opt.cache_bytes && mode != SL_FETCH_CPU) sl__fetch_promote(f, CL, off);
    if (CL && f->opt.cache_bytes && f->opt.uploads && mode == SL_FETCH_CPU)
        sl__fetch_upload(f, CL, off);
    if (f->opt.debug && (st = sl__cache_validate(&f->cache, err))) return st;
    account(f);
    return SL_OK;
}

static void fetch_destroy(sl_moe_sched *s)
{
    fetch *f = (fetch *)s;
    if (f->ks) sl_device_stream_sync(f->dev, f->ks, NULL);
    if (f->cs) sl_device_stream_sync(f->dev, f->cs, NULL);
    sl__cache_free(&f->cache);
    sl__fetch_stage_free(f);
    if (f->arena) {
        sl_bfc_free(f->arena, f->scratch, NULL);
        sl_bfc_destroy(f->arena);
    }
    for (int64_t i = 0; i < f->n_ev; i++) {
        sl_device_event_destroy(f->dev, f->ev[i]);
        sl_device_event_destroy(f->dev, f->ev0[i]);
    }
    free(f->ev);
    free(f->ev0);
    if (f->ks && f->ks != f->cs) sl_device_stream_destroy(f->dev, f->ks);
    if (f->cs) sl_device_stream_destroy(f->dev, f->cs);
    if (f->dact) sl_device_region_free(f->dev, f->dact, NULL);
    if (f->buf_pinned) sl_device_host_unregister(f->dev, f->buf, NULL);
    sl_cuda_ctx_destroy(f->cu);
    sl__trace_free(&f->trace);
    sl_moe_destroy(f->parts);
    free(f->pins);
    free(f->per_layer);
    free(f->buf);
    free(f->work);
    free(f->dwork);
    free(f->order);
    free(f->count);
    free(f->xs);
    free(f->gs);
    free(f->cps);
    free(f->iv);
    free(f->sub);
    free(f->rows);
    free(f);
}

/* A live reload changed weights: cached device copies of experts are stale. The streams are
 * drained first (a promotion may still be filling an entry). */
static void fetch_invalidate(sl_moe_sched *s)
{
    fetch *f = (fetch *)s;
    if (f->ks) sl_device_stream_sync(f->dev, f->ks, NULL);
    if (f->cs) sl_device_stream_sync(f->dev, f->cs, NULL);
    sl__cache_flush(&f->cache);
}

static void fetch_stats(const sl_moe_sched *s, sl_moe_stats *out)
{
    const sl_fetch_stats *t = &((const fetch *)s)->total;
    out->fetches = t->fetch_experts;
    out->fallbacks = t->fallbacks_miss + t->fallbacks_fail;
    out->cache_lookups = t->cache_lookups;
    out->cache_hits = t->cache_hits;
    out->copies = t->copies;
    out->copy_bytes = t->bytes_copied;
    out->copy_overlap_pct = t->overlap_pct;
    out->layer_calls_cpu = t->calls_mode[SL_FETCH_CPU];
    out->layer_calls_post = t->calls_mode[SL_FETCH_POST];
    out->layer_calls_full = t->calls_mode[SL_FETCH_FULL];
}

static sl_status fetch_trace_write(const sl_moe_sched *s, const char *path, sl_error *err)
{
    return sl__trace_write(&((const fetch *)s)->trace, path, err);
}

static const sl__moe_vtable k_fetch_vt = {
    .name = "fetch", .exec = fetch_exec, .destroy = fetch_destroy,
    .invalidate = fetch_invalidate, .caps = SL_MOE_CAP_TRACE, .stats = fetch_stats,
    .trace_write = fetch_trace_write,
};

static sl_status parse_pins(fetch *f, const char *list, sl_error *err)
{
    if (!list || !*list) return SL_OK;
    f->pins = calloc(SL_FETCH_MAX_PINS, sizeof *f->pins);
    if (!f->pins) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory (pins)");
    return sl_fetch_pins_parse("pinned experts", list, f->pins, &f->n_pins, err);
}

sl_status sl_moe_fetch_create(sl_device *dev, const sl_fetch_options *opt, const sl_cpu_ops *ops,
                              const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, sl_moe_sched **out,
                              sl_error *err)
{
    if (!dev || !opt || !ops || !mv || !out)
        return sl_error_set(err, SL_ERR_INVALID, "moe fetch: NULL device, options, ops, matvec "
                            "context or out");
    *out = NULL;
    if ((unsigned)opt->mode > SL_FETCH_AUTO || opt->max_transfers < 1 ||
        opt->max_transfers > SL_FETCH_MAX_TRANSFERS || !opt->scratch_bytes ||
        (unsigned)opt->policy > SL_CACHE_LFU ||
        !(opt->lfu_decay > 0.0 && opt->lfu_decay <= 1.0))
        return sl_error_set(err, SL_ERR_INVALID, "moe fetch: bad options (mode %d, max_transfers "
                            "%d, scratch %llu, policy %d, decay %g)", (int)opt->mode,
                            opt->max_transfers, (unsigned long long)opt->scratch_bytes,
                            (int)opt->policy, opt->lfu_decay);
    fetch *f = calloc(1, sizeof *f);
    if (!f) return sl_error_set(err, SL_ERR_NOMEM, "moe fetch: out of memory");
    f->base.vt = &k_fetch_vt;
    f->opt = *opt;
    f->opt.pinned = NULL;
    f->ops = *ops;
    f->mv = *mv;
    f->pool = pool;
    f->dev = dev;
    f->scratch = SL_BLOCK_NONE;
    f->cpu_bw = (opt->cpu_gbs > 0 ? opt->cpu_gbs : 100.0) * 1e9;
    f->pcie_bw = (opt->pcie_gbs > 0 ? opt->pcie_gbs : 25.0) * 1e9;
    f->dev_bw = (opt->dev_gbs > 0 ? opt->dev_gbs : 1000.0) * 1e9;
    f->dram_bw = opt->dram_gbs * 1e9;
    f->host_ns[SL_FETCH_POST] = f->host_ns[SL_FETCH_FULL] = 10e3; /* until measured */
    sl__cache_init(&f->cache, opt->policy, opt->lfu_decay, opt->cache_bytes);
    f->trace.on = opt->trace || opt->debug;
    f->trace.cap = opt->trace_max_spans;
    f->trace.origin_ns = sl__now_ns();
    sl_status st = parse_pins(f, opt->pinned, err);
    if (!st) st = sl_moe_cpu_create(ops, mv, pool, &f->parts, err);
    if (!st) st = sl_device_stream_create(dev, &f->cs, err);
    if (!st) {
        if (opt->dedicated_streams) st = sl_device_stream_create(dev, &f->ks, err);
        else f->ks = f->cs;
    }
    if (!st && sl_device_kind_get(dev) == SL_DEVICE_CUDA)
        st = sl_cuda_ctx_create(sl_device_ordinal_get(dev), sl_device_stream_native(dev, f->ks),
                                &f->cu, err);
    if (!st && f->cu) {
        sl_cuda_ctx_set_f32_act(f->cu, f->mv.f32_act);
        sl_cuda_ctx_set_pdl(f->cu, !opt->no_pdl);
    }
    /* the group buffers a call needs at most, now rather than inside a timed call */
    if (!st && opt->reserve_assign > 0 && opt->reserve_embd > 0 && opt->reserve_ff > 0)
        st = grow_buf(f, (size_t)opt->reserve_assign *
                             (size_t)(2 * opt->reserve_embd + 2 * opt->reserve_ff), err);
    if (st) {
        fetch_destroy(&f->base);
        return st;
    }
    *out = &f->base;
    return SL_OK;
}

sl_status sl_fetch_stats_get(const sl_moe_sched *s, int32_t layer, sl_fetch_stats *out,
                             sl_error *err)
{
    if (!s || !out || s->vt != &k_fetch_vt)
        return sl_error_set(err, SL_ERR_INVALID, "fetch stats: not a fetch scheduler");
    const fetch *f = (const fetch *)s;
    if (layer < 0) {
        *out = f->total;
        return SL_OK;
    }
    if (layer >= f->n_layer_stats || !f->per_layer[layer].calls)
        return sl_error_set(err, SL_ERR_RANGE, "fetch stats: layer %d was never run", layer);
    *out = f->per_layer[layer];
    return SL_OK;
}


