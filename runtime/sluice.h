/* sluice.h: the public C API of the Sluice engine (what serving stacks embed).
 *
 * Contract
 * - Plain C17; every fallible call returns sl_status and fills an optional sl_error.
 * - A model (sl_model) may be shared by several contexts, each on its own thread; it changes
 *   after open only through sl_reload_changed, which any thread may call at any time (it
 *   waits for running evaluation steps, see below). A context (sl_ctx: KV cache, scratch,
 *   sampler state) is used by one thread at a time.
 * - Token ids are int32; logits are float32 rows of n_vocab.
 * - Memory returned by the API is owned by the object it came from and valid until that object
 *   is closed or the next call on it that says it invalidates (e.g. sl_ctx_eval -> logits).
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/parse.h"
#include "base/status.h"
#include "scheduler/policy/place_mode.h"

/* The accepted range of every numeric option below, checked by the call that reads it
 * (sl_model_open, sl_ctx_create, sl_sampler_create) with base/parse.h's sl_check_*; a front
 * end checks its flags with sl_parse_* against the same constants, so that whatever it accepts
 * the engine accepts too. Where a field's comment says "0: default", 0 is in the range. */
#define SL_RANGE_GPU_LAYERS ((sl_irange){0, INT32_MAX})
#define SL_RANGE_N_CPU_MOE ((sl_irange){0, INT32_MAX})
#define SL_RANGE_NUMA_NODE ((sl_irange){-1, 4095})
enum { SL_N_THREADS_MAX = 1024 }; /* kernels/cpu's pool limit */
#define SL_RANGE_N_THREADS ((sl_irange){0, SL_N_THREADS_MAX})
#define SL_RANGE_N_CTX ((sl_irange){0, 1 << 24})
#define SL_RANGE_N_BATCH ((sl_irange){0, 1 << 24})
#define SL_RANGE_TEMP ((sl_frange){-FLT_MAX, FLT_MAX, false, false}) /* finite as a float */
#define SL_RANGE_TOP_K ((sl_irange){INT32_MIN, INT32_MAX})
#define SL_RANGE_TOP_P ((sl_frange){0.0, 1.0, true, false})
#define SL_RANGE_MIN_P ((sl_frange){0.0, 1.0, false, false})

typedef struct sl_model sl_model;
typedef struct sl_ctx sl_ctx;

/* Where weights live: sl_placement and SL_PLACE_* (auto, gpu, layers, experts-cpu, cpu,
 * hot-cold) are the placement policy's one table of modes, documented there. */


typedef enum sl_load_io { SL_LOAD_DIRECT = 0, SL_LOAD_PREAD = 1, SL_LOAD_MMAP = 2 } sl_load_io;

/* Every option struct below opens with struct_size: sizeof the struct the caller was built with,
 * set by its *_default() (start from that, then change fields). The calls that read one refuse
 * any other value (SL_ERR_INVALID naming the struct and both sizes), so that a caller built
 * against another version of this header, or a binding's stale mirror, fails instead of being
 * read with the wrong layout. */
typedef struct sl_model_options {
    size_t struct_size;         /* sizeof(sl_model_options), from sl_model_options_default() */
    sl_placement placement;
    int gpu_layers;             /* for SL_PLACE_LAYERS: the last N; > n_layer: the output too */
    /* llama.cpp's controls, applied on top of the placement (scheduler/policy/placement.h):
     * "REGEX=BUFT[,REGEX=BUFT...]" (BUFT CPU, CUDA0 or GPU; first match wins), or NULL */
    const char *override_tensor;
    bool cpu_moe;               /* every routed expert on the CPU */
    int n_cpu_moe;              /* routed experts of layers [0, n_cpu_moe) on the CPU */
    uint64_t vram_budget;       /* device bytes the placement may use; 0: 90% of free memory */
    int budget_ctx;             /* positions of KV cache the budget reserves; 0: min(n_ctx_train,
                                   4096) */
    bool plan_only;             /* open resolves the placement and stops: no weights are read */
    const char *gpu_index;      /* HOT_COLD: PowerInfer .gpuidx file; NULL: MODEL.generated.gpuidx
                                   beside the model */
    const char *device;         /* "cuda" | "sim" | "auto" | NULL (SLUICE_DEVICE, then auto) */
    sl_load_io io;              /* how weights are read into the host pool */
    int numa_node;              /* -1: nearest the GPU */
    int n_threads;              /* CPU compute threads; 0: the CPUs of numa_node or of the
                                   cpus list, else the CPUs online; one fewer beside a device
                                   that computes part of the layers (sl_model_info's
                                   n_threads) */
    const char *cpus;           /* explicit CPU list "0-7,16" or NULL */
    bool progress;              /* progress bar on stderr when it is a terminal */
    /* false (default): Q4_K matrices the CPU computes are repacked at load into Q4_K_R8, eight
     * rows interleaved (runtime/engine/repack.h), as llama.cpp's CPU backend does; true: kept as
     * stored (llama.cpp's --no-repack). The logits are the same bits either way. */
    bool no_repack;
} sl_model_options;

/* Defaults: auto placement, O_DIRECT loading, node nearest the GPU, all its cores. */
SL_API sl_model_options sl_model_options_default(void);
/* The CPU threads opt asks for before the model is known: n_threads, or when it is <= 0 the
 * CPUs online (1 if unknown); at most SL_N_THREADS_MAX - what tools pass on (-t) to run a peer
 * with the same count. An open model's contexts may take fewer (sl_model_info's n_threads:
 * a named node's or list's CPUs, one left beside a device). NULL, or a struct_size other than
 * this library's: the defaults'. */
SL_API int sl_model_options_threads(const sl_model_options *opt);

SL_API sl_status sl_model_open(const char *path, const sl_model_options *opt, sl_model **out,
                               sl_error *err);
/* With contexts of m still live the model stays until the last of them is destroyed (then
 * sl_ctx_destroy closes it); it takes no new context. */
SL_API void sl_model_close(sl_model *m);

/* The resolved placement plan (scheduler/policy/placement.h), for tools: what lives where, tensor by
 * tensor. Pointers stay valid while the model is open. */
typedef struct sl_place_plan sl_place_plan;
typedef struct sl_place_tensor sl_place_tensor;
SL_API sl_status sl_model_plan_get(const sl_model *m, const sl_place_plan **plan,
                                   const sl_place_tensor **tensors, size_t *n, sl_error *err);

typedef struct sl_model_info {
    const char *arch;           /* general.architecture */
    const char *name;           /* general.name or "" */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim;
    int32_t n_expert, n_expert_used, n_ff, n_ff_exp;
    uint64_t n_params, weight_bytes, gpu_bytes, host_bytes;
    int32_t bos, eos;           /* -1 if absent */
    /* copies so far between the model's device and host memory that is not page-locked
     * (loading included); on CUDA each one is synchronous with the caller. 0 without a device */
    uint64_t device_copies_pageable;
    /* device memory allocations and host-memory registrations so far (loading and context
     * creation included): an evaluation that needs neither keeps them unchanged */
    uint64_t device_region_allocs, device_host_registers;
    /* Q4_K tensors repacked into Q4_K_R8 at load (no_repack false), and their bytes */
    uint64_t repacked_tensors, repacked_bytes;
    /* CPU compute threads of its contexts (runtime/engine/cpu_threads.h): n_threads as set;
     * else the cpus list's CPUs, numa_node's CPUs (where its host pool is bound there), or the
     * CPUs online - one fewer when there are >= 4 and the layers compute on both a device and
     * the host (the device's own host threads keep a core) */
    int32_t n_threads;
} sl_model_info;
SL_API void sl_model_info_get(const sl_model *m, sl_model_info *out);

/* ---- serving residency ------------------------------------------------------------------
 * Several models of one process share one device arena and one host pool through a runtime
 * (scheduler/policy/residency.h has the budget and the eviction policy). */

/* A model's footprint from its metadata alone (no tensor is read): what the placement of opt
 * puts on the device and leaves on the host, as sl_model_open with the same options would. */
typedef struct sl_footprint {
    uint64_t device_bytes;      /* weights the placement puts on the device (once loaded) */
    uint64_t host_bytes;        /* weights it leaves in host memory */
    uint64_t weight_bytes;      /* device_bytes + host_bytes: the host floor in a runtime */
    uint64_t scratch_bytes;     /* device bytes a context needs besides weights (estimate) */
    sl_placement placement;     /* what the placement resolved to (AUTO never) */
    int32_t n_gpu_layers;       /* the resolved -ngl (LAYERS), n_layer + 1 for GPU */
    int32_t n_cpu_moe;          /* the resolved --n-cpu-moe (AUTO on a MoE model), else -1 */
} sl_footprint;
SL_API sl_status sl_model_footprint(const char *path, const sl_model_options *opt,
                                    sl_footprint *out, sl_error *err);

/* Residency of a model in a runtime (the values are scheduler/policy/residency.h's sl_res_state). */
typedef enum sl_residency {
    SL_RESIDENCY_DISK = 0,      /* nothing read: the model reloads from its file */
    SL_RESIDENCY_HOST = 1,      /* the host floor: every weight in the runtime's host pool */
    SL_RESIDENCY_DEVICE = 2,    /* the host floor + the placement's device weights; evictable */
    SL_RESIDENCY_PINNED = 3     /* on the device, never evicted or moved */
} sl_residency;

typedef enum sl_residency_mode {
    SL_RESIDENCY_SELF = 0,      /* acquire loads an evicted model, evicting least recently
                                   used unpinned ones until it fits the on-demand budget */
    SL_RESIDENCY_EXTERNAL = 1   /* acquire never loads: SL_ERR_NOT_RESIDENT; the caller moves
                                   models with sl_runtime_set_residency */
} sl_residency_mode;

typedef struct sl_runtime_options {
    size_t struct_size;         /* sizeof(sl_runtime_options), from sl_runtime_options_default() */
    const char *device;         /* "cuda" | "sim" | "auto" | NULL (SLUICE_DEVICE, then auto) */
    uint64_t arena_bytes;       /* the one device arena; 0: 90% of the device's free memory */
    double weight_fraction;     /* share of the arena for weights, [0, 1] (default 0.9) */
    double wiggle_fraction;     /* share kept free, [0, 1) (default 0.05) */
    uint64_t max_scratch_bytes; /* largest context scratch; 0: the largest estimate of the
                                   models opened (sl_footprint.scratch_bytes) */
    sl_residency_mode mode;
    int numa_node;              /* host pool node; -1: nearest the GPU */
    uint64_t host_slab_bytes;   /* host pool slab (mapped, touched, page-locked at once);
                                   0: 256 MiB */
    /* The host floor: false, private to this process (its host pool); true, shared by the
     * processes of one user on the node (alloc/shm_floor.h: one POSIX shared-memory region
     * per content, named by its layout and sampled bytes, identified by the files' device,
     * inode, size, mtime and ctime or else by a full content digest; filled once with O_DIRECT
     * reads, mapped read-only by all, removed by the last process to let go of it; objects of
     * another owner or writable by others are refused). */
    bool shared_floor;
    unsigned shm_mode;          /* permission bits of the shared objects, applied exactly
                                   (not cut by the umask) (0: 0600) */
    const char *shm_prefix;     /* their name prefix under /dev/shm (NULL: "sluice-floor");
                                   copied by sl_runtime_create */
    /* called while this process fills a shared floor, after each tensor; NULL: none */
    void (*floor_progress)(void *user, uint64_t done_bytes, uint64_t total_bytes);
    void *floor_progress_user;
    /* warnings (a model larger than the whole budget) go here; NULL: dropped */
    void (*notice)(void *user, const char *msg);
    void *notice_user;
    /* the longest wait for a shared floor's lock (another process filling it), in ms (0: ten
     * minutes); the error names the holder. shm_cancelled (NULL: none) is polled while waiting
     * (e.g. a flag a SIGINT handler sets): true gives up. */
    uint32_t shm_wait_ms;
    bool (*shm_cancelled)(void *user);
    void *shm_cancelled_user;
} sl_runtime_options;
SL_API sl_runtime_options sl_runtime_options_default(void);

typedef struct sl_runtime sl_runtime;
/* Opens the device and creates the arena (one region of arena_bytes) and the host pool. */
SL_API sl_status sl_runtime_create(const sl_runtime_options *opt, sl_runtime **out, sl_error *err);
/* SL_ERR_INVALID (and nothing destroyed) while a model opened into it is still open. */
SL_API sl_status sl_runtime_destroy(sl_runtime *rt, sl_error *err);

/* Opens a model into rt: it borrows rt's device, arena and host pool and ends in the host
 * floor (SL_RESIDENCY_HOST); sl_runtime_acquire or _set_residency puts it on the device.
 * The placement (opt) decides which weights are device weights; vram_budget 0 means the
 * whole arena (a model larger than the on-demand budget opens and loads alone).
 * Unsupported in a runtime: plan_only (use sl_model_footprint) and hot-cold placement.
 * sl_model_close detaches it (close every context of it first). */
SL_API sl_status sl_model_open_in(sl_runtime *rt, const char *path, const sl_model_options *opt,
                                  sl_model **out, sl_error *err);

/* Before a model runs (contexts of a model below DEVICE fail with SL_ERR_NOT_RESIDENT):
 * pinned and resident models return at once (resident ones become the most recently used).
 * Self-managed: an evicted model loads from its host floor (or its file) after evicting the
 * least recently used unpinned models until it fits; one larger than the whole on-demand
 * budget loads after evicting every one, with a notice. A model a context is evaluating is
 * never evicted. Externally managed: SL_ERR_NOT_RESIDENT, nothing loads.
 * Thread safety: rt's functions may be called from any thread (one mutex); evaluation of
 * contexts in other threads is safe against them. */
SL_API sl_status sl_runtime_acquire(sl_runtime *rt, sl_model *m, sl_error *err);
/* sl_runtime_acquire that also holds m until sl_runtime_unhold (holds count): a held model
 * is busy as if a context evaluated it (never evicted, moved, unpinned away or compacted),
 * across the gaps between evaluations (a server's whole request). unhold without a hold: no
 * effect. */
SL_API sl_status sl_runtime_hold(sl_runtime *rt, sl_model *m, sl_error *err);
SL_API void sl_runtime_unhold(sl_runtime *rt, sl_model *m);
/* Moves m to a state, in either mode: DEVICE loads without evicting (SL_ERR_NOMEM if the
 * arena cannot hold it) or unpins; PINNED loads it too — a model that was not on the device
 * goes to the base of the arena (above the pinned ones): the unpinned models are freed
 * first and reloaded after it as far as the on-demand budget allows; HOST frees its device
 * weights; DISK its host floor too (after a live reload only while its files hold what it
 * holds: see sl_reload_changed). SL_ERR_INVALID while a context evaluates it. */
SL_API sl_status sl_runtime_set_residency(sl_runtime *rt, sl_model *m, sl_residency state,
                                          sl_error *err);
/* Releases everything m holds (device weights and host floor): set_residency(DISK). */
SL_API sl_status sl_runtime_release_all(sl_runtime *rt, sl_model *m, sl_error *err);
/* Frees every unpinned model's device weights at once, so the arena's free space coalesces
 * above the pinned models, then reloads reload[0..n) from their host floors in that order
 * (host->device copies; models of rt, unpinned). Pinned models never move. SL_ERR_RANGE
 * (nothing done) if the list exceeds the on-demand budget; SL_ERR_INVALID while a context
 * evaluates an unpinned resident model. */
SL_API sl_status sl_runtime_compact(sl_runtime *rt, sl_model *const *reload, size_t n,
                                    sl_error *err);
SL_API sl_residency sl_model_residency(const sl_model *m); /* a model outside a runtime: DEVICE */

typedef struct sl_runtime_stats {
    uint64_t arena_bytes, scratch_ceiling, weight_pool, on_demand_budget, pinned_bytes;
    bool over_commit;
    uint64_t resident_bytes;    /* device weights of DEVICE (not pinned) models */
    uint64_t arena_in_use, arena_free, arena_largest_free, arena_free_chunks;
    uint64_t loads, evictions, compactions, bytes_loaded;
    uint32_t n_models;
} sl_runtime_stats;
SL_API void sl_runtime_stats_get(const sl_runtime *rt, sl_runtime_stats *out);

/* Checks the runtime's invariants (runtime/serve/runtime.c: each model's weights agree with its
 * state, floors kept exactly for device weights, pinned bytes); SL_ERR_INVALID naming the
 * model and weight. Cost O(weights of all models). */
SL_API sl_status sl_runtime_validate(const sl_runtime *rt, sl_error *err);

typedef struct sl_runtime_model_info {
    sl_residency state;
    uint64_t device_bytes;      /* arena bytes of its device weights when resident */
    uint64_t last_use;          /* tick of its last acquire (larger: more recent) */
    int busy;                   /* contexts evaluating it now, plus its holds */
    /* where its device weights are (0 when none is): the lowest and one past the highest
     * device address, and a digest of every weight's device address (equal digests: nothing
     * moved) */
    uint64_t d_lo, d_hi, d_digest;
    /* a shared floor: its object's name under /dev/shm ("" when private or on disk), and
     * whether this process filled it */
    char floor_name[96];
    bool floor_materialized;
    /* a shared floor filled from another file or version: attached after its content digest
     * was checked against this process's files (a full read) */
    bool floor_digest_checked;
} sl_runtime_model_info;
SL_API sl_status sl_runtime_model_info_get(const sl_runtime *rt, const sl_model *m,
                                           sl_runtime_model_info *out, sl_error *err);

/* ---- text ------------------------------------------------------------------------------- */

/* Tokenizes text (len bytes, UTF-8) with the model's tokenizer. add_special: prepend BOS (and
 * append EOS) as the model's metadata says (tokenizer.ggml.add_bos_token ...); parse_special:
 * recognise special/control tokens written in the text (e.g. "<|im_start|>").
 * Writes at most cap tokens; *n_out is the full count (call again with a bigger buffer if
 * *n_out > cap: then SL_ERR_RANGE). */
SL_API sl_status sl_tokenize(const sl_model *m, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *tokens, size_t cap, size_t *n_out,
                             sl_error *err);
/* Appends the text of one token to buf (cap bytes, NUL-terminated if room); *n_out = bytes the
 * piece has. Byte-fallback tokens give their byte; control tokens give "" unless render_special. */
SL_API sl_status sl_token_to_piece(const sl_model *m, int32_t token, bool render_special, char *buf,
                                   size_t cap, size_t *n_out, sl_error *err);
/* Fill-in-the-middle tokens, as llama.cpp's vocabulary finds them: the keys
 * tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id, then the deprecated prefix / suffix /
 * middle_token_id, an id outside the vocabulary ignored; a token still missing by its text
 * ("<|fim_prefix|>", "<fim-prefix>", "<PRE>", ... lowest id first), made a control token.
 * PAD, REP and SEP end a generation (sl_token_is_eog). */
typedef enum sl_fim {
    SL_FIM_PRE, SL_FIM_SUF, SL_FIM_MID, SL_FIM_PAD, SL_FIM_REP, SL_FIM_SEP, SL_FIM_N
} sl_fim;
/* The model's FIM token of that kind, or -1 (none, no tokenizer, NULL model, bad kind). */
SL_API int32_t sl_token_fim(const sl_model *m, sl_fim which);
/* Whether token ends a generation: EOS, EOT, EOM and the end-of-turn texts llama.cpp's
 * llama_vocab_is_eog knows (Gemma's <end_of_turn>, ChatML's <|im_end|>, gpt-oss's <|call|>,
 * Kimi's [EOT] ...), which may differ from the eos of sl_model_info. False for an id outside
 * the vocabulary, a NULL model or a model without a tokenizer. */
SL_API bool sl_token_is_eog(const sl_model *m, int32_t token);
/* Whole-sequence detokenization (handles SPM's leading space rule). */
SL_API sl_status sl_detokenize(const sl_model *m, const int32_t *tokens, size_t n, char *buf,
                               size_t cap, size_t *n_out, sl_error *err);

/* ---- evaluation ------------------------------------------------------------------------- */

typedef struct sl_ctx_options {
    size_t struct_size;         /* sizeof(sl_ctx_options), from sl_ctx_options_default() */
    int32_t n_ctx;              /* KV cache positions; 0: min(n_ctx_train, 4096) */
    int32_t n_batch;            /* prefill batch; 0: 512 */
    bool kv_f16;                /* F16 KV cache (default true) */
    bool all_logits;            /* keep logits of every evaluated position, not just the last */
    /* MoE scheduler options, "key=value ..." (scheduler/moe/fetch.h: mode=cpu|post|full|auto,
     * block_on_miss, max_transfers, scratch_kb, cache_kb, policy=lru|lfu, pin=L:E,..., trace,
     * prefill_stream=N (batches of >= N tokens copy a device layer's host experts to the
     * device and compute them there; default 32, 0: never), defer=D (Expert Deferral, other
     * numerics: runtime/engine/defer.h), ...), applied over the
     * SLUICE_POSTFETCH_* environment; NULL: environment only. Mode cpu (the default) is the CPU
     * scheduler. Read by sl_ctx_create only. */
    const char *sched;
    /* record per-neuron activation statistics of the dense FFNs computed on the host
     * (sl_ctx_neuron_stats; scheduler/policy/neuron_stats.h): the profile of hot/cold placement */
    bool neuron_stats;
    /* ReLU FFNs (a file with sluice.feed_forward_activation "relu"): compute every neuron
     * instead of skipping those whose gate output is <= 0 — the dense baseline the exact
     * sparse path is checked and benchmarked against (same logits, bit for bit) */
    bool relu_dense;
    /* keep the final hidden state of every row of each eval — after the output norm, n_embd
     * floats, llama.cpp's embeddings (pooling is the caller's) — for sl_ctx_embeddings, on
     * every placement (copied back from the side the output runs on) */
    bool embeddings;
    /* time every step of the device executor (sl_ctx_step_profile): on cuda an event pair
     * around each step, so each step also counts 2 more device calls in sl_ctx_stats and
     * the pass gets slower by the events; off by default */
    bool profile_steps;
    /* cuda: run one-token passes as launched kernels every time. By default a context whose
     * layers all run on the GPU (nothing of them on the host) captures its first one-token
     * pass into a CUDA graph and replays it for the next ones (one launch a token instead of
     * ~10 a layer); the logits are the same bits. No effect elsewhere, nor with
     * profile_steps (which times the launched steps). */
    bool no_graphs;
    /* cuda: launch every kernel in plain stream order. By default, on a GPU of compute
     * capability 9.0+ (Hopper), Sluice's own kernels (not cuBLAS's) are launched with
     * programmatic dependent launch: the next kernel's launch and block scheduling overlap the
     * end of the one before it (each still waits for the one before to finish before it
     * touches memory, so the logits are the same bits); sl_ctx_stats.pdl says whether it is
     * in effect. No effect elsewhere. */
    bool no_pdl;
    /* cuda: run as separate kernels the steps that the default fuses into one launch (the
     * attention norm before Q/K/V; wo or a dense down + residual add + FFN norm; the router
     * GEMV + top-k; gate/up + SwiGLU, dense, shared or routed; the routed down + combine +
     * residual). The fused launches give the same bits (the kernel tests hold them to the
     * separate ones); sl_ctx_stats.dev_layer_launches shows the difference. The q/k norm +
     * rope + KV store kernel has no separate form and stays. The other side of `bench decode
     * --fusion-ab`, and a fallback; no effect elsewhere. */
    bool no_fusion;
} sl_ctx_options;
SL_API sl_ctx_options sl_ctx_options_default(void);

SL_API sl_status sl_ctx_create(sl_model *m, const sl_ctx_options *opt, sl_ctx **out, sl_error *err);
SL_API void sl_ctx_destroy(sl_ctx *c);
/* Evaluates n tokens at positions n_past .. n_past+n-1 (appending to the KV cache). */
SL_API sl_status sl_ctx_eval(sl_ctx *c, const int32_t *tokens, size_t n, sl_error *err);
/* sl_ctx_eval on an all_logits context keeping the logits of tokens first..n-1 only (llama.cpp's
 * batch.logits flags on a tail, as its perplexity sets them): the output layer runs for those
 * n - first rows alone, each the bits sl_ctx_eval gives it; sl_ctx_logits(c, i) serves i in
 * [first, n), NULL below. SL_ERR_INVALID without all_logits or unless first < n. */
SL_API sl_status sl_ctx_eval_tail(sl_ctx *c, const int32_t *tokens, size_t n, size_t first,
                                  sl_error *err);
/* sl_ctx_eval, then the greedy pick (sl_logits_argmax's rule) of the next token, taken where
 * the output layer ran: with the output on the GPU only the token id crosses to the host, not
 * n_vocab logits. The logits are not kept (sl_ctx_logits returns NULL until the next eval).
 * An all_logits context computes only the last row's logits in this call. */
SL_API sl_status sl_ctx_eval_greedy(sl_ctx *c, const int32_t *tokens, size_t n, int32_t *token,
                                    sl_error *err);
/* Evaluates tokens[i][0, n_tokens[i]) on ctxs[i], for the n_seqs contexts of one model, in one
 * forward pass (continuous batching: several sequences' next tokens, or prompt chunks beside
 * them): the weight matmuls run over all the rows at once, each row at its own context's
 * position, in its own context's KV cache; afterwards each context is as sl_ctx_eval(ctxs[i],
 * tokens[i], n_tokens[i]) leaves it (its n_past, its logits for sl_ctx_logits), with the same
 * logits bit for bit on the CPU kernels (on a GPU within the GEMM's batch tolerance). The pass
 * runs on ctxs[0]'s scratch, executors and MoE scheduler (its counters get the pass's work; each
 * context's decode/prefill counters its own tokens and the pass's time). One sequence is
 * sl_ctx_eval. SL_ERR_INVALID for NULL arguments, a sequence of no tokens, contexts of
 * different models or one context twice, or contexts that defer differently (sched defer=);
 * SL_ERR_RANGE when the tokens together exceed ctxs[0]'s n_batch or a context's n_ctx;
 * SL_ERR_UNSUPPORTED for several sequences of a model with recurrent layers (qwen3next). On
 * failure no context advances. Several sequences keep no hidden states (sl_ctx_embeddings:
 * NULL until an eval of the context alone). None of the contexts may be used by another
 * thread during the call. n_seqs 0: nothing. */
SL_API sl_status sl_ctx_eval_batch(sl_ctx *const *ctxs, const int32_t *const *tokens,
                                   const size_t *n_tokens, size_t n_seqs, sl_error *err);
/* Logits of the i-th token of the last eval (i = -1: the last one; needs all_logits for others,
 * and i >= first after sl_ctx_eval_tail). Valid until the next eval. NULL if unavailable. */
SL_API const float *sl_ctx_logits(const sl_ctx *c, int64_t i);
SL_API int32_t sl_ctx_n_past(const sl_ctx *c);
/* The tokens one forward pass of c takes (n_batch, at most n_ctx): the most sl_ctx_eval_batch
 * takes with c first; 0 for NULL. */
SL_API int32_t sl_ctx_n_batch(const sl_ctx *c);
/* The final hidden state (n_embd floats, after the output norm) of the i-th token of the last
 * eval (i = -1: the last one); needs the embeddings option. Valid until the next eval. NULL if
 * unavailable. */
SL_API const float *sl_ctx_embeddings(const sl_ctx *c, int64_t i);
/* Runs fn(user, begin, end, thread) over [0, n) in chunks of grain indices on c's compute
 * threads (sl_model_info's n_threads of its model; the caller is thread 0, the others are
 * bound as the model's options say), each index once, and returns when all are done: a front
 * end's per-row work between evaluations (perplexity's scoring of the logits) without threads
 * of its own. thread is in [0, the thread count). Not concurrently with another call on c,
 * nor from inside fn. SL_ERR_INVALID for n < 0, grain < 1 or a NULL fn. */
typedef void (*sl_ctx_work_fn)(void *user, int64_t begin, int64_t end, int thread);
SL_API sl_status sl_ctx_parallel_for(sl_ctx *c, int64_t n, int64_t grain, sl_ctx_work_fn fn,
                                     void *user, sl_error *err);
/* The KV cache of positions [0, n_past) as bytes (llama.cpp's llama_state_seq_get_data): a
 * header describing its layout (layers, KV heads, head size, KV type, MLA) and every layer's
 * rows, copied from the side each layer's cache is on. buf NULL: *n_out = the bytes it takes;
 * else SL_ERR_RANGE when cap is smaller. A server saves a slot with it. Both functions:
 * SL_ERR_UNSUPPORTED for a model with recurrent layers (qwen3next), whose state is more. */
SL_API sl_status sl_ctx_state_get(sl_ctx *c, void *buf, size_t cap, size_t *n_out,
                                  sl_error *err);
/* Replaces c's cache with n bytes sl_ctx_state_get wrote: n_past becomes its positions (the
 * last eval's logits and hidden rows are dropped). SL_ERR_INVALID naming what differs (KV
 * type, layout of another model, a size that is not the header's) or SL_ERR_RANGE for more
 * positions than n_ctx, before anything changes; a failed copy leaves n_past 0. */
SL_API sl_status sl_ctx_state_set(sl_ctx *c, const void *buf, size_t n, sl_error *err);
/* Forgets positions >= n_past (n_past = 0 clears the cache). A model with recurrent layers
 * (qwen3next's Gated DeltaNet) keeps a state that cannot drop tokens: besides 0 and the
 * context's n_past it rewinds only to its checkpoint, the position before the last token of
 * the last multi-token evaluation (a prompt's last token); any other n_past is
 * SL_ERR_UNSUPPORTED (rewind to 0 and evaluate again). */
SL_API sl_status sl_ctx_rewind(sl_ctx *c, int32_t n_past, sl_error *err);
/* Layer il's FFN neuron statistics so far (needs the neuron_stats option; valid until the next
 * eval): n_neuron neurons, n_tokens evaluations, per neuron how many found it active and the
 * sum of its |activation|. expert: -1 for a dense model's FFN; with routed experts the
 * expert's (0 .. n_expert-1; n_tokens: the tokens routed to it; recorded by the cpu MoE
 * scheduler only), SL_ERR_RANGE otherwise. */
SL_API sl_status sl_ctx_neuron_stats(const sl_ctx *c, int32_t il, int32_t expert, int64_t *n_neuron,
                                     uint64_t *n_tokens, const uint64_t **active,
                                     const double **mag_sum, sl_error *err);

/* ---- sampling --------------------------------------------------------------------------- */

typedef struct sl_sampler_options {
    size_t struct_size;         /* sizeof(sl_sampler_options), from sl_sampler_options_default() */
    float temp;                 /* <= 0: greedy */
    int32_t top_k;              /* <= 0: off */
    float top_p;                /* 1: off */
    float min_p;                /* 0: off */
    uint64_t seed;
} sl_sampler_options;
SL_API sl_sampler_options sl_sampler_options_default(void);
/* temp 0.8, top_k 40, top_p 0.95, min_p 0.05 */

typedef struct sl_sampler sl_sampler;
SL_API sl_status sl_sampler_create(const sl_sampler_options *opt, sl_sampler **out, sl_error *err);
SL_API void sl_sampler_destroy(sl_sampler *s);
/* Picks a token from n_vocab logits (llama.cpp's order: top-k, top-p, min-p, temperature). */
SL_API sl_status sl_sampler_sample(sl_sampler *s, const float *logits, int32_t n_vocab,
                                   int32_t *token, sl_error *err);
/* True when s samples greedily (temp <= 0, no grammar); false for NULL. */
SL_API bool sl_sampler_is_greedy(const sl_sampler *s);
/* Constrains s to a GBNF grammar (llama.cpp's language: grammars/README.md; its token
 * references <...> excepted) over m's vocabulary: each later sl_sampler_sample picks a token
 * whose text continues the grammar, an end-of-generation token only where the grammar may
 * end, and advances the grammar by it (llama.cpp's lazy check: the unconstrained pick first,
 * the masked row only when the grammar rejects it; temperature 0 stays the argmax of the
 * masked row). grammar NULL or "" removes it. SL_ERR_FORMAT "grammar: line L, column C: ..."
 * for a malformed grammar, SL_ERR_RANGE past its size limits. m must outlive the sampler's use
 * of the grammar. When no token can continue, sl_sampler_sample fails with SL_ERR_INVALID. */
SL_API sl_status sl_sampler_set_grammar(sl_sampler *s, const sl_model *m, const char *grammar,
                                        sl_error *err);
/* True when s's grammar is complete and nothing more can follow (or an end-of-generation
 * token ended it): the caller stops generating. False without a grammar. */
SL_API bool sl_sampler_grammar_done(const sl_sampler *s);
/* The greedy pick (temp <= 0) over one row of logits: the lowest id of the largest value, -inf
 * masking a token; a NaN or +inf anywhere is SL_ERR_INVALID naming it, as is a row of -inf. */
SL_API sl_status sl_logits_argmax(const float *logits, int32_t n_vocab, int32_t *token,
                                  sl_error *err);
/* sl_ctx_eval, then the next token from s; a greedy sampler picks it where the output layer
 * ran (sl_ctx_eval_greedy: the logits are then not kept), any other from sl_ctx_logits. */
SL_API sl_status sl_ctx_eval_sample(sl_ctx *c, sl_sampler *s, const int32_t *tokens, size_t n,
                                    int32_t *next, sl_error *err);

/* ---- stats ------------------------------------------------------------------------------ */

typedef struct sl_ctx_stats {
    uint64_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    uint64_t expert_calls_cpu, expert_calls_gpu;
    /* the MoE scheduler ("cpu", "fetch"; NULL for dense models) and, for "fetch", its run
     * totals (definitions in scheduler/moe/fetch.h) */
    const char *moe_scheduler;
    uint64_t expert_fetches, expert_fallbacks, expert_cache_lookups, expert_cache_hits;
    uint64_t copies, copy_bytes;
    double copy_overlap_pct;
    /* ReLU FFNs (dx.h relu_ffn): token x neuron pairs computed through them, those whose
     * gate output was <= 0 (the exact sparsity), and those whose up row and down column were
     * skipped (no token of the step activated the neuron; == zero for one-token decode) */
    uint64_t ffn_neurons, ffn_neurons_zero, ffn_neurons_skipped;
    /* full refreshes of what the context derives from the weights (after a live reload, or a
     * runtime's read of the model's files: one per change an eval sees), and rebinds of their
     * addresses alone (a runtime moved the model between its host floor and the device) */
    uint64_t refreshes, rebinds;
    /* the MoE scheduler's configured mode: "cpu" for the CPU scheduler, the fetch scheduler's
     * "cpu" | "post" | "full" | "auto" (NULL for dense models), and, for "fetch", its MoE layer
     * calls by the mode each ran in (auto picks one per call; 0 for the CPU scheduler) */
    const char *moe_mode;
    uint64_t moe_calls_cpu, moe_calls_post, moe_calls_full;
    /* what evaluations cost the host in device operations, whatever the bytes (0 without a
     * device): dev_syncs = blocking waits of the host on the device (stream and event syncs,
     * the MoE scheduler's included); dev_calls = device operations issued (copies, event and
     * stream operations, host functions, steps of the device executor). Counted on the
     * model's device around each forward pass (another context using the device at the same
     * time counts too); the sim executor's own waits before each step are not counted (a GPU
     * kernel waits on its stream). copy_bytes above are the expert bytes over PCIe. */
    uint64_t dev_syncs, dev_calls;
    /* the CPU expert path (moe.h sl_moe_stats cpu_bytes, cpu_ns): weight bytes of the experts
     * the CPU computed (each distinct one once per layer and step) and its time */
    uint64_t expert_cpu_bytes;
    double expert_cpu_seconds;
    /* the device executor's steps (its calls: one kernel sequence each, fused ops one step)
     * inside the layers that ran on the device, and those layers, summed over passes: their
     * ratio is the device steps per layer (issue 32; bench decode's device_steps_per_layer) */
    uint64_t dev_layer_steps, dev_layers;
    /* cuda decode graphs (sl_ctx_options.no_graphs): one-token passes that ran as one graph
     * launch, the captures made (the first pass, and again after a reload or a move of the
     * weights), and captures that failed (that pass, and all after it, ran launched; but one
     * that failed with programmatic dependent launch is taken again without it, and the
     * context goes on without it: graph_error says so) */
    uint64_t graph_passes, graph_captures, graph_failures;
    /* why the last capture failed (the device's message; owned by the context, valid until it
     * is destroyed), NULL when none did */
    const char *graph_error;
    /* prefill batches' host experts streamed through the device (`--sched prefill_stream=N`):
     * the MoE layer calls that did, and their expert bytes copied (also in copy_bytes) */
    uint64_t stream_layers, stream_bytes;
    /* routed experts resident on the device beside the host's (`--sched hot_kb=N`, `cache_kb=M
     * uploads=U`: runtime/engine/hot.h) now, over every layer, and their weight bytes there
     * (0 before the warm-up chose them; asked for where no device layer keeps its experts on
     * the host, or in a share below one expert, they are refused when the context is made).
     * The hot_kb set is the model's, shared by its contexts (each reports it); a context
     * asking for another hot_kb while one is held is refused. */
    uint64_t hot_experts, hot_bytes;
    /* cuda: the context's device executor (its layers' kernels) launches with programmatic
     * dependent launch now (not sl_ctx_options.no_pdl, a device of compute capability 9.0+,
     * the driver took it, and a decode graph's capture did not need it off) */
    bool pdl;
    /* cuda: the kernels the device executor launched inside its layers (dev_layer_steps' kernels:
     * a fused step is one launch, a plain one may be several; a decode graph's replay counts what
     * its capture launched; launch calls, a failed one too), summed over passes; over
     * dev_layers, the launches a layer (bench decode's device_launches_per_layer). Not counted:
     * cuBLAS's GEMMs (prefill), copies, and the kernels of the other CUDA contexts (resident
     * hot experts, prefill streaming, the fetch scheduler). 0 on sim and the CPU. */
    uint64_t dev_layer_launches;
} sl_ctx_stats;
SL_API void sl_ctx_stats_get(const sl_ctx *c, sl_ctx_stats *out);

/* One step kind of the device executor (runtime/engine/dx.h: "mm", "norm_mm", "attn", "moe",
 * ...) over the context's life: steps run, their time (cuda: device time between an event
 * before and after each, so a step of several kernels counts the idle time between them;
 * sim: host time) and, cuda only, the stream's idle time before each step (the host
 * enqueueing it later than the device needed it; 0 on sim). */
typedef struct sl_step_profile {
    const char *op;             /* a static name */
    uint64_t calls;
    double seconds, gap_seconds;
} sl_step_profile;
/* rows[0 .. *n): every step kind, in one fixed order (the same *n each call, so two calls can
 * be subtracted row by row), never-run kinds with zeros (all of them for a context without a
 * device side: only the device executor is timed). SL_ERR_INVALID unless the context was
 * created with profile_steps; SL_ERR_RANGE when cap < the kinds (*n says how many). */
SL_API sl_status sl_ctx_step_profile(const sl_ctx *c, sl_step_profile *rows, size_t cap,
                                     size_t *n, sl_error *err);
/* Writes the MoE scheduler's recorded copy/compute spans as Chrome/Perfetto trace JSON (the
 * fetch scheduler with option trace=1 or debug); SL_ERR_INVALID for other schedulers, SL_ERR_IO
 * naming the path. */
SL_API sl_status sl_ctx_trace_write(const sl_ctx *c, const char *path, sl_error *err);

/* ---- live reload -------------------------------------------------------------------- */

/* What happened to one tensor (or, for SL_RELOAD_SKIPPED_FILE, one file). */
typedef enum sl_reload_kind {
    SL_RELOAD_REATTACHED = 0,   /* back to its original type and size: the original block */
    SL_RELOAD_IN_PLACE,         /* same type and size: new bytes in the same block */
    SL_RELOAD_PRIVATE,          /* new type or size: a block of its own */
    SL_RELOAD_SIBLING,          /* unchanged, moved with a sibling expert tensor */
    SL_RELOAD_REFUSED,          /* not applied (msg says why); the old tensor stays in use */
    SL_RELOAD_SKIPPED_FILE,     /* a file being rewritten or unreadable: retried next call */
    SL_RELOAD_REFUSED_FILE,     /* a file that cannot be applied whole (another architecture,
                                   changed metadata, a new tensor, any REFUSED tensor of it):
                                   nothing of it applied; reported again at every call */
} sl_reload_kind;

/* An sl_reload_entry's type where none applies: both types of a file entry, the new type of
 * a tensor missing from its rewritten file. */
#define SL_RELOAD_NO_TYPE UINT32_MAX

typedef struct sl_reload_entry {
    char name[96];              /* tensor name, or the file's path (SKIPPED_FILE) */
    sl_reload_kind kind;
    uint32_t old_type, new_type;    /* ggml type codes as stored in memory, or
                                       SL_RELOAD_NO_TYPE */
    uint64_t old_bytes, new_bytes;
    const char *where;          /* "device", "host", "host (fallback)"; "" when not applied */
    double seconds;             /* reading and applying it */
    char msg[160];              /* REFUSED / SKIPPED_FILE: why */
    char *file;                 /* SKIPPED_FILE / REFUSED_FILE: the file's whole path (name may
                                   be cut short), owned by the report; else NULL */
} sl_reload_entry;

typedef struct sl_reload_report {
    bool changed;               /* some tensor now has other bytes, type or place */
    sl_reload_entry *entries;   /* [n], owned: sl_reload_report_free */
    size_t n;
    uint32_t files_changed, files_skipped;
    uint32_t n_reloaded, n_refused, n_fallback;
    uint64_t bytes_read;
    double seconds;
    uint32_t files_refused;     /* REFUSED_FILE entries */
} sl_reload_report;

/* Reloads every tensor whose source file (any shard) changed since it was read (ik_llama.cpp's
 * llama_reload_changed_tensors; policy in scheduler/policy/swap.h). Files are read while contexts keep
 * evaluating; the changes are applied between evaluation steps, so a step sees every tensor
 * either before or after the reload, never torn. report (may be NULL) is filled either way and
 * must be freed with sl_reload_report_free. Errors: SL_ERR_INVALID for a model opened with
 * plan_only; I/O and format problems of one file are not errors but SKIPPED_FILE entries.
 * A file is applied whole or not at all: one of another architecture, with any other metadata
 * value (but descriptive general.* and quantize.* keys: hyperparameters and the vocabulary were
 * read at open), with a tensor the model's files lacked, or with any tensor that cannot be
 * applied (a REFUSED entry each) gets a REFUSED_FILE entry, none of its tensors changes, and
 * the call returns SL_ERR_UNSUPPORTED naming the first such file and why — after applying the
 * other files; the file stays "changed", so every later call refuses and reports it again.
 * Thread-safe (one reload at a time).
 * A model in a runtime: each changed tensor replaces its host floor copy and, when on the
 * device, its device copy (a new arena block for a new size; no room: a host fallback, as for
 * a private model, which the runtime's residency keeps until a later reload returns it), so
 * eviction and compaction bring back the new bytes; a shared floor is never written (the new
 * bytes go to a private block: copy-on-write); on DISK every change is REFUSED. Released to
 * DISK after a reload, the model reads its files again when loaded: that is refused
 * (SL_ERR_UNSUPPORTED, nothing changed) while they hold other bytes than it does (changed since
 * the last reload, or a tensor whose change was refused). */
SL_API sl_status sl_reload_changed(sl_model *m, sl_reload_report *report, sl_error *err);
/* The same for the context's model. */
SL_API sl_status sl_ctx_reload_changed(sl_ctx *c, sl_reload_report *report, sl_error *err);
SL_API void sl_reload_report_free(sl_reload_report *report);
/* Appends one line per entry ("name: Q8_0 -> Q4_K, 1.2 MiB -> 0.6 MiB, device, 0.8 ms") to f,
 * a FILE * (void * keeps <stdio.h> out of this header); f NULL: nothing. */
SL_API void sl_reload_report_print(const sl_reload_report *report, void *f);

#endif
