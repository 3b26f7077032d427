/* scheduler/moe/fetch_cost.c: the fetching scheduler's cost model (fetch.h, mode auto): what a
 * call's misses would cost on the CPU, as post and as full, and what the calls measure to keep
 * its inputs current — bandwidths, the host time of the device calls per fetched expert, and
 * a CPU probe in fetch modes so the CPU side is never left unsampled. */
#include <math.h>

#include "scheduler/moe/fetch_state.h"

static double max2(double a, double b) { return a > b ? a : b; }

sl_fetch_mode sl__fetch_choose(const fetch *f, int64_t misses, int64_t used, int64_t n_assign,
                               const uint64_t pb[3])
{
    if (!misses) return SL_FETCH_POST;
    const double m = (double)misses, bgu = (double)(pb[0] + pb[1]), bd = (double)pb[2];
    const double tpe = (double)n_assign / (double)used;
    const double k = tpe > KNEE ? tpe / KNEE : 1.0;
    /* DMA and the CPU read the same DRAM: bytes read concurrently by both share dram_bw */
    const double dram = f->dram_bw > 0 ? f->dram_bw : max2(f->cpu_bw, f->pcie_bw);
    /* device operations a miss costs the host: its copies (down; gate, up, down) and one
     * device job per group of CHUNK assignments */
    const double jobs = ceil(tpe / CHUNK);
    const double t_cpu = m * (bgu + bd) / f->cpu_bw * k;
    double t_post = max2(max2(m * bgu / f->cpu_bw * k, m * bd / f->pcie_bw), m * (bgu + bd) / dram);
    t_post += m * bd / f->dev_bw + m * (1 + jobs) * f->host_ns[SL_FETCH_POST] * 1e-9;
    const double t_full = max2(m * (bgu + bd) / f->pcie_bw, m * (bgu + bd) / dram) +
                          m * (bgu + bd) / f->dev_bw +
                          m * (3 + jobs) * f->host_ns[SL_FETCH_FULL] * 1e-9;
    if (t_cpu <= t_post && t_cpu <= t_full) return SL_FETCH_CPU;
    return t_post <= t_full ? SL_FETCH_POST : SL_FETCH_FULL;
}

int64_t sl__fetch_probe(fetch *f)
{
    int64_t best = -1, n_fetch = 0;
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        const xinfo *x = &f->xs[xi];
        if (x->kind != X_FETCH) continue;
        n_fetch++;
        if (best < 0 || x->g1 - x->g0 < f->xs[best].g1 - f->xs[best].g0 ||
            (x->g1 - x->g0 == f->xs[best].g1 - f->xs[best].g0 &&
             f->gs[x->g0].m < f->gs[f->xs[best].g0].m))
            best = xi;
    }
    if (n_fetch < 2) return -1; /* one miss: fetching it is the choice being judged */
    f->xs[best].kind = X_CPU;
    return best;
}

void sl__fetch_measure(fetch *f, sl_fetch_mode mode, int64_t n_assign)
{
    for (int64_t xi = 0; xi < f->n_x; xi++) {
        const xinfo *xx = &f->xs[xi];
        if (xx->kind != X_FETCH) continue;
        if (xx->failed) f->cs_stats.fallbacks_fail++;
        else if (xx->missed) f->cs_stats.fallbacks_miss++;
    }
    const bool hs = f->trace.on; /* host stamps (sl__fetch_host_stamps) */
    for (int64_t i = 0; i < f->n_c; i++) {
        const fcopy *c = &f->cps[i];
        if (c->state != C_DONE || !c->t_done) continue;
        const sl__iv span = {c->t_enq, c->t_done};
        f->cs_stats.copy_ns += (double)(c->t_done - c->t_enq);
        f->cs_stats.hidden_ns += (double)sl__overlap_ns(span, f->iv, f->n_iv);
        double ns = 0;
        if (hs) {
            sl__trace_add(&f->trace, SL__TID_COPY, c->t_start, c->t_done, "copy L%d %llu KiB",
                          f->cur.layer, (unsigned long long)(c->bytes >> 10));
            if (c->t_done > c->t_start) ns = (double)(c->t_done - c->t_start);
        } else {
            float ms = 0;
            if (sl_device_event_elapsed_ms(f->dev, f->ev0[i], f->ev[i], &ms, NULL) == SL_OK)
                ns = (double)ms * 1e6;
        }
        if (ns > 0) f->pcie_bw = 0.8 * f->pcie_bw + 0.2 * (double)c->bytes * 1e9 / ns;
    }
    f->base.stats.cpu_bytes += f->call_cpu_bytes;
    f->base.stats.cpu_ns += f->call_cpu_ns;
    /* CPU bandwidth: weight bytes the CPU read over its expert time, from memory-bound work
     * only (few tokens per expert; the model scales compute-bound calls itself): the experts
     * it computed by choice or as the probe when there were any, else the whole call */
    const bool membound = f->call_cpu_x ? f->call_cpu_assign <= (int64_t)KNEE * f->call_cpu_x
                                        : n_assign <= (int64_t)KNEE * f->n_x;
    if (f->call_cpu_ns > 0 && membound)
        f->cpu_bw = 0.8 * f->cpu_bw + 0.2 * (double)f->call_cpu_bytes * 1e9 /
                                          (double)f->call_cpu_ns;
    /* the host's time per device operation (a copy with its events, a device job) */
    if (mode != SL_FETCH_CPU && f->call_issue_ops > 0)
        f->host_ns[mode] = 0.8 * f->host_ns[mode] +
                           0.2 * (double)f->call_issue_ns / (double)f->call_issue_ops;
}
