/* scheduler/fetch: the fetching MoE scheduler (Post-Fetch) — a second implementation of moe.h
 * that moves expert weights over the copy engine and computes on the device.
 *
 * Per sl_moe_exec call (one layer, one step):
 *   1. bucket assignments by expert (as the CPU scheduler does); decide the call's mode
 *      (auto: cost model below);
 *   2. for each used expert that is neither engine-resident (layer.on_device) nor in the
 *      expert cache: reserve a slot in the scratch area (one BFC block on the device; slot
 *      offsets cumulative, 256-byte aligned), enqueue H2D copies of the pieces the mode needs
 *      on the copy stream — pieces of consecutive experts that are adjacent in host memory are
 *      packed into one copy up to SL_FETCH_COPY_MAX_BYTES, so copies are large — and record one
 *      event per copy; at most max_transfers copies are in flight (further copies are enqueued
 *      as earlier ones complete);
 *   3. post: the CPU computes gate, up and the activation (kernels/cpu, pool); then, if the
 *      expert's last copy event has completed, the device computes down from the scratch slot
 *      (sim: a host function running the CPU kernels on the compute stream; cuda: the
 *      activation rows go up, kernels/cuda GEMV, the output rows come back, all enqueued on the
 *      compute stream from page-locked buffers, so the CPU goes on); if not: block_on_miss = 1 makes the
 *      compute stream wait for the event (the CPU goes on), = 0 computes down on the CPU
 *      (a "miss fallback");
 *      full: the device computes gate, up, act and down of each fetched expert once its copy
 *      event completes (compute stream waits on it), overlapping with the next copies;
 *      cached / engine-resident experts are computed wholly on the device (post, full, auto);
 *   4. the CPU waits for the compute stream, then adds each group's down output into out in
 *      ascending expert order — exactly the CPU scheduler's order and kernels, so on sim out is
 *      bit-identical to sl_moe_cpu's whatever ran where (the sim device runs the CPU kernels);
 *      on cuda the device groups' outputs agree within GEMV tolerance (F32 activations);
 *   5. promotion: fetched experts may be copied into the expert cache (cache.c policies) —
 *      pieces already in scratch device to device, the rest from the host — enqueued on the
 *      copy stream and completed before the next call starts.
 * Any failure (scratch or cache allocation, copy or launch refused, a device kernel error, a
 * stream error) sends the affected experts to the CPU path: same result, counted in
 * fallbacks_fail. Only CPU kernel errors and host out-of-memory are returned.
 *
 * Mode auto, per call (documented cost model; bandwidths in bytes/s):
 *   misses m = used experts not resident; Bgu, Bd = bytes of gate+up and of down of one expert;
 *   tpe = tokens per used expert (n_assign / used); knee = 8 tokens (past it the CPU matvec is
 *   compute-bound, so CPU time grows with tpe / knee);
 *   cpu(bytes) = bytes / cpu_bw * max(1, tpe / knee);   dev(bytes) = bytes / dev_bw
 *   ops_post = m (1 + jobs), ops_full = m (3 + jobs): device operations of the misses (a
 *   copy with its events per piece, a device job per group of 64 assignments: jobs =
 *   ceil(tpe / 64)); host_post, host_full = the host's time per operation, per mode; dram = dram_bw (the host DRAM that DMA and the CPU both
 *   read; option dram_gbs, else max(cpu_bw, pcie_bw): what they read together takes at least
 *   their sum over it)
 *   T_cpu  = cpu(m (Bgu + Bd))
 *   T_post = max(cpu(m Bgu), m Bd / pcie_bw, m (Bgu + Bd) / dram) + dev(m Bd)
 *            + ops_post host_post
 *   T_full = max(m (Bgu + Bd) / pcie_bw, m (Bgu + Bd) / dram) + dev(m (Bgu + Bd))
 *            + ops_full host_full
 *   the smallest wins (ties: cpu, then post); cpu applies to the misses only (resident experts
 *   stay on the device). cpu_bw and pcie_bw start from the options (or 100 and 25 GB/s) and
 *   follow measurements (exponential averages: weight bytes / CPU expert time of memory-bound
 *   work, tpe <= knee; copy bytes / copy time); host_post / host_full start at 10 us and
 *   follow the measured issue time per operation; dev_bw is the option (default 1000
 *   GB/s). The CPU is never left unmeasured: an auto call that fetches two or more misses
 *   computes the one with the fewest assignments on the CPU (the probe; fetch_cost.c), so a
 *   choice of post or full is revisited as soon as the CPU's side would win again.
 *   Uncalibrated on real hardware so far: the constants are placeholders for the GPU machine.
 *
 * Expert cache (cache.c): whole experts (gate, up, down packed in one BFC block of the same
 * arena) under cache_bytes; policy LRU or LFU with decay (score *= decay per call of the
 * layer, +1 per use); a pinned set ("layer:expert,...") is loaded on first sight of the layer
 * and never evicted (not counted in cache_bytes); eviction frees the BFC block; the arena
 * compacts when fragmentation blocks an allocation (compact_on_oom) — cache pointers are
 * re-read from handles at every use, scratch is a pinned block.
 *
 * Static hot residency and bounded uploads (fetch_hot.c; issue 33): for one token, copying an
 * expert over PCIe loses to computing it on the CPU, so decode keeps the popular experts
 * resident and computes the rest on the CPU (mode cpu), concurrently — a resident expert's
 * groups go to the device first (run_all). hot_bytes: per layer, floor(hot_bytes / hot_layers
 * / expert bytes) experts with the most routed assignments in the layer's profile (its first
 * hot_warm assignments, counted in the calls; ties: lower index; never-routed ones are not
 * taken) become pinned residents, uploaded once: a profile-seeded static set (a prefill pass
 * is the profile). uploads + cache_bytes + mode cpu: a run-time cache beside it for routers
 * with temporal locality: after each call at most `uploads` of the experts it computed on the
 * CPU are uploaded, highest decayed frequency first (the cache's lfu score, `decay` per call
 * of the layer), each admitted only if the cache has room or (policy lfu) it beats the
 * coldest resident — never on every miss. The sum order, and so the sim's bits, are the CPU
 * scheduler's whatever is resident. The engine creates this scheduler for them only with
 * pinned experts or order sync: otherwise it keeps them itself in stream order, with the CPU
 * scheduler (runtime/engine/hot.h), as this scheduler's device calls wait per layer.
 *
 * Hot/cold parts (a layer split by neurons, moe.h ff_at): nothing to fetch — the hot side is
 * resident in the engine's arena and the cold side runs on the CPU by the placement's choice
 * (a split exists to keep those bytes off PCIe) — so the call goes to a CPU scheduler owned by
 * this one: the same sum order and, on sim, the CPU scheduler's bits; counted in its moe
 * stats (calls_cpu / calls_gpu by the part's on_device), not in the fetch stats. Unsplit
 * layers of the same model fetch as usual.
 *
 * Faults: a failed or refused copy sends its expert to the CPU (counted as fallbacks_fail);
 * on sim a failed device job is redone on the CPU. On cuda a fault inside a kernel is fatal:
 * CUDA keeps the error sticky for the whole context, so the call returns SL_ERR_DEVICE naming
 * the layer and CUDA's message and the process must be restarted (as with any CUDA program).
 *
 * Metrics (sl_fetch_stats, per run and per layer):
 *   copy time of a copy c = [enq_c, done_c] (host clock at enqueue; completion stamped on the
 *   copy stream by a host function when tracing, else the time the host first saw the copy's
 *   event complete: an upper bound, since a stamp stalls the stream); PCIe bandwidth for the
 *   cost model from the stamps or from start/end events around the copy; hidden_c = |[enq_c, done_c] ∩ U| where U is the union of the CPU spans (expert
 *   gate/up/act/down work on the calling thread) of the same call; overlap % = 100 * sum hidden
 *   / sum (done - enq);
 *   fallback rate = (fallbacks_miss + fallbacks_fail) / fetch_experts (experts that needed a
 *   fetch); cache hit rate = cache_hits / cache_lookups (used experts not engine-resident, in
 *   post/full calls); bytes_copied counts H2D bytes of fetches and promotions (promotions
 *   from scratch are D2D and not counted).
 *
 * Trace (trace.c): with options.trace (or debug), spans are recorded (copy stream tid 1, compute stream
 * tid 2, CPU thread tid 0; up to trace_max_spans) and sl_moe_trace_write writes Chrome /
 * Perfetto JSON: {"traceEvents":[{"name","ph":"X","ts","dur","pid","tid"},...]} (µs).
 *
 * Thread safety: as moe.h (one caller thread); the device's stream workers touch only the job
 * records of the current call, which the caller reads after synchronising.
 * Devices: sim (device jobs are host functions running the CPU kernels on host-addressable
 * regions) and cuda (kernels/cuda GEMVs on the compute stream; expert types without a CUDA GEMV
 * fail their launches and run on the CPU, counted as fallbacks).
 */
#ifndef SL_SCHEDULER_FETCH_H
#define SL_SCHEDULER_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/device/device.h"
#include "scheduler/moe/moe.h"

enum {
    SL_FETCH_COPY_MAX_BYTES = 4 << 20,
    SL_FETCH_MAX_TRANSFERS = 256, /* max_transfers: 1 .. this */
    SL_FETCH_MAX_PINS = 4096      /* items of a pinned list */
};

typedef enum sl_fetch_mode {
    SL_FETCH_CPU = 0,   /* no copies: the CPU scheduler's path */
    SL_FETCH_POST = 1,  /* copy down only; CPU gate/up/act, device down */
    SL_FETCH_FULL = 2,  /* copy gate, up, down; device computes all */
    SL_FETCH_AUTO = 3,  /* per call, by the cost model above */
} sl_fetch_mode;

typedef enum sl_cache_policy { SL_CACHE_LRU = 0, SL_CACHE_LFU = 1 } sl_cache_policy;

/* How a device layer's host experts (the CPU scheduler's, engine forward_ffn.c) are ordered
 * against the device: a host function on the stream (the host thread queues on; on cuda it
 * runs on CUDA's callback thread), or a blocking sync per layer with the experts computed on
 * the calling thread. Same bits either way. */
typedef enum sl_fetch_order { SL_FETCH_ORDER_STREAM = 0, SL_FETCH_ORDER_SYNC = 1 } sl_fetch_order;

typedef struct sl_fetch_options {
    sl_fetch_mode mode;
    bool block_on_miss;         /* post: the device waits for a late copy instead of the CPU */
    int max_transfers;          /* copies in flight, 1 .. SL_FETCH_MAX_TRANSFERS (default 4) */
    uint64_t scratch_bytes;     /* scratch area (default 64 MiB) */
    uint64_t cache_bytes;       /* resident-expert budget, 0: no cache (default 0) */
    sl_cache_policy policy;     /* default LRU */
    double lfu_decay;           /* LFU score factor per call of the layer, (0, 1] (default 0.9) */
    const char *pinned;         /* "layer:expert,..." always resident, or NULL; borrowed until
                                   create returns (parsed there) */
    /* static hot residency (any mode; below): device bytes for the hottest experts of the
     * MoE layers (0: none), split evenly over hot_layers layers (the engine sets the model's
     * MoE layer count; 0: 1), chosen per layer from its first hot_warm routed assignments
     * (default 256; 1: the layer's first call) */
    uint64_t hot_bytes;
    int32_t hot_layers;
    int64_t hot_warm;
    /* at most this many experts enter the cache per layer and step (0: fetch modes promote
     * every fetched expert, mode cpu uploads none); in mode cpu, with cache_bytes, the CPU-
     * computed experts of highest decayed frequency (lfu score) are uploaded after the call */
    int uploads;
    sl_fetch_order order;       /* host experts of a device layer (default stream; above) */
    bool dedicated_streams;     /* own copy and compute streams (default); false: one stream */
    bool debug;                 /* validate the cache after every call; record the trace */
    bool trace;                 /* record spans for sl_moe_trace_write */
    uint64_t trace_max_spans;   /* default 1 << 20 */
    double cpu_gbs, pcie_gbs, dev_gbs;  /* cost-model starting bandwidths; 0: defaults */
    double dram_gbs;            /* host DRAM read bandwidth DMA and CPU share; 0: see above */
    /* the engine's, not this scheduler's: a device layer's host experts are streamed through
     * the device for batches of at least this many tokens (runtime/engine/stream.h; default
     * 32, llama.cpp's offload batch; 0: never) */
    int64_t prefill_stream;
    /* the engine's too: Expert Deferral (runtime/engine/defer.h), the experts a token defers
     * to the next layer, 0 .. SL_MOE_JOIN_MAX_K (default 0: none; mode cpu only) */
    int32_t defer;
    /* the group buffers (page-locked on cuda, with a device mirror) sized at creation for this
     * many (token, expert) assignments of a layer n_embd / n_ff wide, so that no call
     * registers host memory or allocates device memory; 0: grown on first use */
    int64_t reserve_assign, reserve_embd, reserve_ff;
    /* the engine's (sl_ctx_options.no_pdl): cuda kernels of the device jobs in plain stream
     * order, without programmatic dependent launch (kernels/cuda/ctx.h sl_cuda_ctx_set_pdl) */
    bool no_pdl;
} sl_fetch_options;

sl_fetch_options sl_fetch_options_default(void);

/* Applies the Post-Fetch aliases that get(user, NAME) finds set (runtime/engine/env.c looks
 * them up in the environment; this module reads none): SLUICE_POSTFETCH_ENABLE (0/1: mode
 * post / cpu), _FORCE_CPU (1: mode cpu, wins over ENABLE), _BLOCK_ON_MISS (0/1),
 * _MAX_TRANSFERS (1..256), _SCRATCHPAD_MB (1..1048576), _USE_DEDICATED_STREAMS (0/1),
 * _DEBUG (0/1), plus SLUICE_POSTFETCH_MODE (cpu|post|full|auto), _CACHE_MB, _POLICY (lru|lfu),
 * _PIN ("layer:expert,..."; o->pinned then points at get's string, which must outlive o). An
 * invalid value is SL_ERR_INVALID naming the variable and the value. */
typedef const char *(*sl_fetch_var_fn)(void *user, const char *name);
sl_status sl_fetch_options_vars(sl_fetch_options *o, sl_fetch_var_fn get, void *user,
                                sl_error *err);

/* Applies "key=value" items separated by spaces or ';' (NULL or "" changes nothing): mode,
 * block_on_miss, max_transfers, scratch_kb, cache_kb, hot_kb, hot_warm, uploads, policy,
 * decay, pin (copied into pin_buf of pin_cap bytes, which o->pinned then points at), order
 * (stream|sync), streams (dedicated|shared), debug, trace, cpu_gbs, pcie_gbs, dev_gbs,
 * dram_gbs, prefill_stream (tokens, 0..2^31), defer (experts, 0..64). Unknown keys and bad
 * values are SL_ERR_INVALID naming them. */
sl_status sl_fetch_options_parse(sl_fetch_options *o, const char *spec, char *pin_buf,
                                 size_t pin_cap, sl_error *err);

/* Reads a pinned list "layer:expert,..." (each number by base/parse.h's integer rule, in
 * [0, 2^31); no empty item, no trailing ','; at most SL_FETCH_MAX_PINS items) into out (room
 * for SL_FETCH_MAX_PINS pairs; NULL: check only); *n_out = the count. NULL or "": no pins.
 * SL_ERR_INVALID names `what` (the variable or option), the item and its part. Whether the
 * layers and experts exist is the caller's check: only the model knows. */
sl_status sl_fetch_pins_parse(const char *what, const char *list, int32_t (*out)[2], int *n_out,
                              sl_error *err);

const char *sl_fetch_mode_name(sl_fetch_mode m);

/* Creates the scheduler on dev (sim or cuda; see above): its own streams, events and BFC arena
 * (scratch + cache_bytes, compact_on_oom). ops/mv are copied, pool borrowed (may be NULL).
 * A pinned list that does not parse is SL_ERR_INVALID naming the item; a pin beyond the
 * model's layers or experts is never loaded (the engine refuses those before creating). */
sl_status sl_moe_fetch_create(sl_device *dev, const sl_fetch_options *opt, const sl_cpu_ops *ops,
                              const sl_cpu_matvec_ctx *mv, sl_cpu_pool *pool, sl_moe_sched **out,
                              sl_error *err);

typedef struct sl_fetch_stats {
    uint64_t calls, calls_mode[4];              /* exec calls by the mode they ran in */
    uint64_t groups_cpu, groups_dev;            /* expert groups by where down ran */
    uint64_t fetch_experts;                     /* used experts that needed a fetch */
    uint64_t fallbacks_miss, fallbacks_fail;    /* of those, computed on the CPU */
    uint64_t copies, bytes_copied;              /* H2D copies enqueued (fetch + promotion) */
    uint64_t cache_lookups, cache_hits, promotions, evictions;
    uint64_t scratch_bytes, scratch_peak_bytes; /* capacity, most used by one call */
    uint64_t cache_bytes_used;                  /* unpinned resident bytes now */
    uint64_t compactions;                       /* of the arena (fragmentation blocked an
                                                   allocation) */
    double copy_ns, hidden_ns;                  /* sums for the overlap % */
    double overlap_pct, fallback_rate, hit_rate;/* derived (0 when undefined) */
} sl_fetch_stats;

/* Run totals (layer < 0) or one layer's; SL_ERR_INVALID for a non-fetch scheduler,
 * SL_ERR_RANGE for a layer never seen. */
sl_status sl_fetch_stats_get(const sl_moe_sched *s, int32_t layer, sl_fetch_stats *out,
                             sl_error *err);

/* Writes the recorded spans as Chrome/Perfetto trace JSON to path (SL_ERR_IO naming it);
 * SL_ERR_INVALID for a non-fetch scheduler. Spans beyond trace_max_spans were dropped (the
 * file's "otherData" says how many). */
sl_status sl_moe_trace_write(const sl_moe_sched *s, const char *path, sl_error *err);

#endif
