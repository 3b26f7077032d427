/* scheduler/moe/fetch_stage.c: the host staging of expert copies whose host bytes are not the
 * device's layout (fetch_state.h: sl__fetch_stage_*).
 *
 * Why: the CPU reads routed Q4_K experts repacked as Q4_K_R8 (runtime/engine/repack.h), the
 * device reads Q4_K. A piece to upload gets room in a staging chunk (sl__fetch_stage_piece),
 * is unpacked there (a lossless re-layout, kernels/cpu/repack.h) by sl__fetch_stage_run —
 * the pieces of a call at once, one per pool task — and the H2D copy reads from there. The
 * unpacking counts as host time of the device operations (the cost model's issue cost).
 * A chunk's bytes are read by copies on the copy stream until it is drained: chunks only grow
 * (a new chunk, never a move) within a call, and are reused after the next drain
 * (sl__fetch_stage_reset: cs_drain, or a hot set's landing), so no copy in flight ever sees
 * its source change. On cuda a chunk is page-locked (an async copy needs it; a
 * failed registration costs only asynchrony). */
#include <stdlib.h>

#include "kernels/cpu/repack.h"
#include "kernels/ref/repack.h"
#include "scheduler/moe/fetch_state.h"

/* Rows and columns of piece p (gate, up, down) of one expert of the current layer. */
static void piece_shape(const fetch *f, int p, int64_t *rows, int64_t *cols)
{
    const int64_t E = f->cur.n_embd, F = f->cur.n_ff;
    *rows = p == 2 ? E : F;
    *cols = p == 2 ? F : E;
}

static uint32_t piece_type(const sl_moe_layer *L, int p)
{
    return p == 0 ? L->type_gate : p == 1 ? L->type_up : L->type_down;
}

bool sl__fetch_stage_needed(const fetch *f, int p)
{
    return piece_type(&f->cur, p) != piece_type(&f->dcur, p);
}

static void chunk_free(fetch *f, sl__fetch_stage *c)
{
    if (c->pinned) sl_device_host_unregister(f->dev, c->p, NULL);
    free(c->p);
    *c = (sl__fetch_stage){0};
}

/* `bytes` of room at an alignment of SL_BFC_ALIGN in the last chunk, or a new chunk. */
static uint8_t *room(fetch *f, uint64_t bytes)
{
    const uint64_t a = SL_BFC_ALIGN, need = (bytes + a - 1) / a * a;
    sl__fetch_stage *c = f->n_stg ? &f->stg[f->n_stg - 1] : NULL;
    if (!c || c->used + need > c->cap) {
        if (f->n_stg == f->stg_cap) {
            const int n = f->stg_cap ? 2 * f->stg_cap : 4;
            sl__fetch_stage *v = realloc(f->stg, (size_t)n * sizeof *v);
            if (!v) return NULL;
            f->stg = v;
            f->stg_cap = n;
        }
        uint64_t cap = c ? 2 * c->cap : (uint64_t)8 << 20;
        if (cap < need) cap = need;
        c = &f->stg[f->n_stg];
        *c = (sl__fetch_stage){.p = aligned_alloc(a, (size_t)cap), .cap = cap};
        if (!c->p) return NULL;
        f->n_stg++;
        if (f->cu) c->pinned = sl_device_host_register(f->dev, c->p, cap, NULL) == SL_OK;
    }
    uint8_t *out = c->p + c->used;
    c->used += need;
    return out;
}

const void *sl__fetch_stage_piece(fetch *f, int p, int32_t e)
{
    const void *const *src[3] = {f->cur.gate, f->cur.up, f->cur.down};
    if (!sl__fetch_stage_needed(f, p)) return src[p][e];
    if (f->n_up == f->up_cap) {
        const int64_t n = f->up_cap ? 2 * f->up_cap : 64;
        sl__fetch_unpack *v = realloc(f->ups, (size_t)n * sizeof *v);
        if (!v) return NULL;
        f->ups = v;
        f->up_cap = n;
    }
    uint8_t *dst = room(f, f->pb[p]);
    if (!dst) return NULL;
    sl__fetch_unpack *u = &f->ups[f->n_up++];
    *u = (sl__fetch_unpack){.src = src[p][e], .dst = dst};
    piece_shape(f, p, &u->rows, &u->cols);
    return dst;
}

static void unpack_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    sl__fetch_unpack *u = ctx;
    for (int64_t i = begin; i < end; i++)
        u[i].ok = sl_cpu_repack_q4_K_r8_undo(u[i].src, u[i].dst, u[i].rows, u[i].cols, NULL) ==
                  SL_OK;
}

bool sl__fetch_stage_run(fetch *f)
{
    if (!f->n_up) return true;
    const uint64_t t0 = sl__now_ns();
    bool ok = sl_cpu_pool_parallel_for(f->pool, f->n_up, 1, unpack_task, f->ups, NULL) == SL_OK;
    for (int64_t i = 0; ok && i < f->n_up; i++) ok = f->ups[i].ok;
    f->n_up = 0;
    f->call_issue_ns += sl__now_ns() - t0;
    return ok;
}

void sl__fetch_stage_reset(fetch *f)
{
    f->n_up = 0;
    if (f->n_stg > 1) {
        /* one chunk of the high-water size from now on */
        uint64_t total = 0;
        for (int i = 0; i < f->n_stg; i++) total += f->stg[i].cap;
        sl__fetch_stage_free(f);
        if (room(f, total)) f->stg[0].used = 0;
        return;
    }
    if (f->n_stg) f->stg[0].used = 0;
}

void sl__fetch_stage_free(fetch *f)
{
    for (int i = 0; i < f->n_stg; i++) chunk_free(f, &f->stg[i]);
    free(f->stg);
    f->stg = NULL;
    f->n_stg = f->stg_cap = 0;
    free(f->ups);
    f->ups = NULL;
    f->n_up = f->up_cap = 0;
}
