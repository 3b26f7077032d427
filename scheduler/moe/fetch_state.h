/* scheduler/moe/fetch_state.h: the fetching MoE scheduler's state and one call's records, private
 * to scheduler/moe/fetch*.c (fetch.c runs a call; fetch_copy.c, fetch_cost.c, fetch_hot.c and
 * fetch_stage.c are its parts; the design, modes, cost model and metrics are in fetch.h).
 *
 * One call's records (rebuilt per call, arrays grown on demand and never shrunk):
 *   xs[0 .. n_x)     the distinct experts used, ascending; each with its kind (CPU, engine-
 *                    resident, cached, fetched) and, when fetched, the copies that carry it;
 *   gs[0 .. n_g)     groups of <= CHUNK assignments of one expert, in (expert, chunk) order —
 *                    the order the CPU scheduler runs and sums them, which we keep for the sum;
 *   cps[0 .. n_c)    planned H2D copies in enqueue order (pieces ordered by projection, then
 *                    expert; host-adjacent pieces packed); cps[i].state: PENDING -> INFLIGHT
 *                    -> DONE, or FAILED; copies are enqueued in index order, so on the one copy
 *                    stream an expert is ready exactly when its last copy is.
 * Invariants: c_enq (next copy to enqueue) >= c_ret (oldest not retired); copies in flight =
 * those INFLIGHT in [c_ret, c_enq) <= max_transfers; a group's buffers (x, g, u, d) are its own,
 * so device jobs and CPU work never share memory within a call; scratch slots of one call do
 * not overlap; every device job and copy of a call has completed when the call returns.
 */
#ifndef SL_SCHEDULER_FETCH_STATE_H
#define SL_SCHEDULER_FETCH_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/ops.h"
#include "scheduler/moe/fetch_impl.h"
#include "scheduler/moe/moe_impl.h"

enum { CHUNK = 64, KNEE = 8 };

typedef enum { X_CPU = 0, X_ENGINE, X_CACHED, X_FETCH } xkind;
typedef enum { C_PENDING = 0, C_INFLIGHT, C_DONE, C_FAILED } cstate;

typedef struct xinfo {
    int32_t e;
    xkind kind;
    bool failed;            /* a fetch failed (slot, copy, ...): CPU path */
    bool missed;            /* post: a down ran on the CPU because the copy was late */
    int64_t last_copy;      /* -1: none planned */
    int64_t copy[3];        /* the copy carrying gate, up, down (-1: none) */
    const void *dp[3];      /* device-side gate, up, down */
    int64_t g0, g1;         /* groups [g0, g1) */
} xinfo;

typedef struct fgroup {
    struct fetch *f;
    int32_t e, xi;
    const int32_t *idx;     /* assignment indices, m of them */
    int64_t m;
    float *x, *g, *u, *d;
    bool dev;               /* down ran (or is enqueued to run) on the device */
    sl_status dev_st;
    uint64_t t0, t1;        /* device span */
} fgroup;

typedef struct fcopy {
    const void *src;
    uint64_t dst_off, bytes;
    cstate state;
    uint64_t t_enq, t_start, t_done;
} fcopy;

/* A host staging chunk (fetch_stage.c): [0, used) holds unpacked pieces copies may still read. */
typedef struct sl__fetch_stage {
    uint8_t *p;
    uint64_t cap, used;
    bool pinned;            /* cuda: page-locked */
} sl__fetch_stage;

/* A staged piece waiting to be unpacked (fetch_stage.c). */
typedef struct sl__fetch_unpack {
    const void *src;        /* Q4_K_R8, host */
    void *dst;              /* its room in a staging chunk */
    int64_t rows, cols;
    bool ok;
} sl__fetch_unpack;

typedef struct fetch {
    sl_moe_sched base;      /* must be first */
    sl_fetch_options opt;
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_cpu_pool *pool;
    sl_device *dev;
    sl_stream *cs, *ks;     /* copy and compute streams (the same one when not dedicated) */
    bool cs_dirty;          /* something was enqueued on cs since the last wait for it */
    sl_cuda_ctx *cu;        /* cuda: kernels on ks; NULL on sim */
    void *dact;             /* cuda: device mirror of buf (group rows x, g, u, d) */
    uint64_t dact_cap;
    bool buf_pinned;        /* cuda: buf is page-locked (async copies need it) */
    sl_bfc *arena;          /* created on the first call that needs it */
    bool arena_failed;
    sl_block scratch;
    uint64_t scratch_bytes; /* granted */
    sl__cache cache;
    sl__trace trace;
    int32_t (*pins)[2];
    int n_pins;
    sl_event **ev;          /* copy i done */
    sl_event **ev0;         /* copy i started (event timing when not tracing) */
    int64_t n_ev;
    sl__fetch_stage *stg;   /* staging chunks, n_stg in use (fetch_stage.c) */
    int n_stg, stg_cap;
    sl__fetch_unpack *ups;  /* pieces staged since the last sl__fetch_stage_run */
    int64_t n_up, up_cap;
    /* the current call */
    sl_moe_layer cur;
    sl_moe_layer dcur;      /* cur as the device reads it: file types (Q4_K for Q4_K_R8) */
    float *buf;
    size_t buf_cap;
    void *work, *dwork;
    size_t work_cap;
    int32_t *order, *count;
    size_t order_cap, count_cap;
    xinfo *xs;
    size_t xs_cap;
    fgroup *gs;
    size_t gs_cap;
    fcopy *cps;
    size_t cps_cap;
    int64_t n_x, n_g, n_c, c_enq, c_ret;
    sl_moe_assign *sub;      /* run_cpu_batch: the CPU's assignments and their results */
    float *rows;
    size_t sub_cap, rows_cap;
    sl__iv *iv;
    size_t iv_cap;
    int64_t n_iv;
    sl_fetch_stats cs_stats; /* of the current call */
    uint64_t pb[3];          /* bytes of one expert's gate, up, down */
    uint64_t call_cpu_bytes, call_cpu_ns;
    int64_t call_cpu_assign, call_cpu_x; /* run_cpu_batch's assignments and experts */
    uint64_t call_issue_ns;  /* host time in the device calls of copies and device jobs */
    int64_t call_issue_ops;  /* those copies (with their events) and jobs */
    /* run */
    sl_fetch_stats total;
    sl_fetch_stats *per_layer;
    int32_t n_layer_stats;
    double cpu_bw, pcie_bw, dev_bw; /* bytes/s */
    double dram_bw;          /* host DRAM read, shared by DMA and the CPU; 0: max(cpu, pcie) */
    double host_ns[4];       /* [post], [full]: host ns per device operation (fetch_cost.c) */
    /* the CPU scheduler, for the hot/cold parts of split experts (fetch_exec): a part has
     * nothing to fetch (the hot side is resident in the engine's arena, the cold side runs
     * on the CPU by the placement's choice) */
    sl_moe_sched *parts;
} fetch;

/* fetch_cost.c (fetch.h's cost model): the mode for a call's misses; the probe, a missed
 * expert turned X_CPU in an auto call that fetches (the fewest assignments; none with fewer
 * than two misses), so the CPU's bandwidth keeps being measured — returns its index or -1;
 * after the call, the fallbacks, copy overlap and the model's inputs from what it measured. */
sl_fetch_mode sl__fetch_choose(const fetch *f, int64_t misses, int64_t used, int64_t n_assign,
                               const uint64_t pb[3]);
int64_t sl__fetch_probe(fetch *f);
void sl__fetch_measure(fetch *f, sl_fetch_mode mode, int64_t n_assign);

/* fetch.c: fills an admitted cache entry of expert e (pieces in slot[p] device to device,
 * the rest from the host) on the copy stream; false when a copy was refused. */
bool sl__fetch_fill(fetch *f, const sl__cache_entry *x, int32_t e, const uint64_t pb[3],
                    const void *const slot[3]);
/* fetch_copy.c: the call's copies. sl__fetch_host_stamps: whether copies and device jobs take
 * host-function timestamps (sl__fetch_stamp writes one: the trace only); ensure_events grows
 * the per-copy events to n; copy_seen_done stamps a copy's completion as the host saw it;
 * cs_drain waits for the copy stream if anything was enqueued since the last drain (false:
 * the sync failed) and then reuses the staging; pump retires finished copies in order and
 * enqueues up to max_transfers in flight, blocking until copy `until` is enqueued when
 * until >= 0; copy_status: an expert's copies ready (1), on the way (0) or failed (-1);
 * copies_failed: a copy carrying one of its pieces failed. */
bool sl__fetch_host_stamps(const fetch *f);
void sl__fetch_stamp(void *p);
sl_status sl__fetch_ensure_events(fetch *f, int64_t n, sl_error *err);
void sl__fetch_copy_seen_done(const fetch *f, fcopy *c);
bool sl__fetch_cs_drain(fetch *f);
void sl__fetch_pump(fetch *f, int64_t until);
int sl__fetch_copy_status(fetch *f, int64_t xi);
bool sl__fetch_copies_failed(const fetch *f, const xinfo *x);
/* Every piece of x's that was planned has landed (after the call's final synchronisation). */
bool sl__fetch_copies_landed(const fetch *f, const xinfo *x);

/* fetch_stage.c: the device holds an expert's bytes in the file's layout (dcur's types). A
 * piece whose host type differs (Q4_K_R8) is unpacked into a host staging chunk on its way:
 * sl__fetch_stage_needed says whether piece p (gate, up, down) of the current layer is;
 * sl__fetch_stage_piece returns the host source of expert e's piece p for an H2D copy (the
 * host bytes themselves, or room in staging that stays put until the next
 * sl__fetch_stage_reset; NULL when no memory: the caller's copy fails, and the expert runs on
 * the CPU); sl__fetch_stage_run unpacks the pieces staged since its last run into their room,
 * on the pool — before any copy from them is enqueued (false: one failed; the caller fails
 * those copies);
 * sl__fetch_stage_reset, only once the copy stream is drained, makes the chunks reusable;
 * sl__fetch_stage_free releases them. */
bool sl__fetch_stage_needed(const fetch *f, int p);
const void *sl__fetch_stage_piece(fetch *f, int p, int32_t e);
bool sl__fetch_stage_run(fetch *f);
void sl__fetch_stage_reset(fetch *f);
void sl__fetch_stage_free(fetch *f);

/* fetch_hot.c: expert e of the current layer becomes a pinned resident (outside the cache
 * budget), its fill from the host enqueued on the copy stream; false when it is engine-
 * resident or got no block. sl__fetch_pins_land waits for the fills (a failure drops the
 * layer's pinned experts: they run on the CPU). sl__fetch_load_pins: the pinned list's
 * experts of the current layer, at its first call. */
bool sl__fetch_pin(fetch *f, sl__cache_layer *CL, int32_t e, const uint64_t off[3]);
void sl__fetch_pins_land(fetch *f, sl__cache_layer *CL);
void sl__fetch_load_pins(fetch *f, sl__cache_layer *CL, const uint64_t off[3]);
/* (fetch.h hot_kb, uploads) sl__fetch_hot counts the call's routing into the layer's profile
 * and, once it holds hot_warm assignments, pins the layer's hottest experts; after a mode-cpu
 * call, sl__fetch_upload uploads at most `uploads` of its CPU-computed experts by decayed
 * frequency. */
void sl__fetch_hot(fetch *f, sl__cache_layer *CL, const sl_moe_assign *a, int64_t n_assign,
                   const uint64_t off[3]);
void sl__fetch_upload(fetch *f, sl__cache_layer *CL, const uint64_t off[3]);
/* Fetch modes: offers the call's fetched experts to the cache (at most `uploads` when set),
 * pieces already in scratch device to device; fills land before the next call. */
void sl__fetch_promote(fetch *f, sl__cache_layer *CL, const uint64_t off[3]);

#endif
