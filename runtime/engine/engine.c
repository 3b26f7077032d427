/* runtime/engine/engine.c: the context part of the public API (sluice.h): creation (KV,
 * kernels, pool, MoE scheduler, host and device sides, logits), destruction, the evaluation
 * entry points (one context, a batch of contexts), and a context's results, rewind and stats.
 * The model's open/close/info are in model.c; where layers run (host, sim, cuda) is model.c's
 * header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "runtime/engine/ctx.h"
#include "runtime/engine/model.h"
#include "runtime/engine/env.h"
#include "runtime/struct_size.h"
#include "runtime/text/model_vocab.h"
#include "scheduler/moe/fetch.h"

sl_ctx_options sl_ctx_options_default(void)
{
    return (sl_ctx_options){.struct_size = sizeof(sl_ctx_options), .n_ctx = 0, .n_batch = 0,
                            .kv_f16 = true, .all_logits = false};
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Pins name model parts, so they are checked here, where the model is known: each
 * layer:expert must be an expert of a MoE layer (`from` names the variable or option). */
static sl_status check_pins(const sl_model *m, const char *list, const char *from, sl_error *err)
{
    if (!list || !*list) return SL_OK;
    int32_t(*pins)[2] = malloc(SL_FETCH_MAX_PINS * sizeof *pins);
    if (!pins) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (pins)");
    int n = 0;
    sl_status st = sl_fetch_pins_parse(from, list, pins, &n, err);
    const sl__hparams *hp = &m->hp;
    for (int i = 0; !st && i < n; i++) {
        const int32_t l = pins[i][0], e = pins[i][1];
        if (!hp->n_expert)
            st = sl_error_set(err, SL_ERR_INVALID, "%s=%d:%d: the model has no experts",
                              from, l, e);
        else if (l >= hp->n_layer)
            st = sl_error_set(err, SL_ERR_INVALID, "%s=%d:%d: layer %d is outside the "
                              "model's layers [0, %d]", from, l, e, l, hp->n_layer - 1);
        else if (!m->layers[l].gate_inp)
            st = sl_error_set(err, SL_ERR_INVALID, "%s=%d:%d: layer %d has no experts",
                              from, l, e, l);
        else if (e >= hp->n_expert)
            st = sl_error_set(err, SL_ERR_INVALID, "%s=%d:%d: expert %d is outside the "
                              "model's experts [0, %d]", from, l, e, e, hp->n_expert - 1);
    }
    free(pins);
    return st;
}

/* The MoE scheduler: options over SLUICE_POSTFETCH_*; the fetching one on the model's device
 * (sim or cuda) for a fetch mode or resident experts, the CPU one otherwise. The default mode
 * is cpu everywhere, a GPU holding part of the model included: at batch 1 a copied expert
 * serves one token, and on the H100 every fetch mode decoded slower than the CPU computing
 * the host experts (GPU-REVIEW.md, run 5: auto 19.9 tok/s, cpu 27.1), whose part a device
 * layer now orders on the stream (forward_ffn.c). The environment and the sched string override
 * it. A dense model creates none, but its options are still checked: nothing given is
 * silently dropped. */
/* What only the fetching scheduler does in mode cpu with resident experts (a trace of its
 * copies, its checks): asked for, they take that scheduler, so that none is silently dropped
 * (its copy and cost-model options do nothing in mode cpu either way). */
static bool fetch_only(const sl_fetch_options *o)
{
    return o->debug || o->trace;
}

static sl_status create_moe(sl_ctx *c, sl_error *err)
{
    sl_fetch_options fo = sl_fetch_options_default();
    char pins[1024];
    sl_status st = sl_env_fetch_options(&fo, err);
    if (!st) st = sl_fetch_options_parse(&fo, c->opt.sched, pins, sizeof pins, err);
    if (!st) st = check_pins(c->m, fo.pinned, fo.pinned == pins ? "scheduler option pin"
                                                                : "SLUICE_POSTFETCH_PIN", err);
    if (!st && fo.defer > (c->m->hp.n_expert ? c->m->hp.n_expert_used : 0))
        st = sl_error_set(err, SL_ERR_INVALID, "scheduler option defer=%d: the model routes %d "
                          "experts a token", fo.defer,
                          c->m->hp.n_expert ? c->m->hp.n_expert_used : 0);
    if (st || !c->m->hp.n_expert) return st;
    c->experts_sync = fo.order == SL_FETCH_ORDER_SYNC;
    c->stream.min_tokens = fo.prefill_stream;
    /* mode cpu with resident experts in stream order (a static hot set, a run-time cache with
     * bounded uploads): the CPU scheduler, the resident experts the engine's (hot.h: no wait
     * on the device); with pins or order sync, the fetching scheduler's: they run on the
     * device beside the CPU's part (fetch.h) */
    const bool pinned = fo.pinned && *fo.pinned, uploads = fo.cache_bytes && fo.uploads;
    /* Expert Deferral: the CPU scheduler's assignments, split (defer.h); set up with the
     * device side */
    char fetch_mode[16];
    snprintf(fetch_mode, sizeof fetch_mode, "mode=%s", sl_fetch_mode_name(fo.mode));
    const char *no_defer = fo.mode != SL_FETCH_CPU ? fetch_mode
                           : pinned                ? "pin"
                           : fo.hot_bytes          ? "hot_kb"
                           : uploads               ? "cache_kb"
                           : fetch_only(&fo)       ? (fo.trace ? "trace" : "debug")
                           : c->opt.neuron_stats   ? "neuron statistics"
                                                   : NULL;
    if (fo.defer && no_defer)
        return sl_error_set(err, SL_ERR_INVALID, "scheduler option defer=%d: deferred experts "
                            "are computed by mode cpu's CPU scheduler alone, not with %s",
                            fo.defer, no_defer);
    c->defer.d = fo.defer;
    if (fo.mode == SL_FETCH_CPU && (fo.hot_bytes || uploads) && !pinned && !c->experts_sync &&
        !fetch_only(&fo)) { /* no device layer keeps its experts on the host: refused (hot.c) */
        /* neuron statistics count what the CPU scheduler runs: every expert, on the host */
        if (c->opt.neuron_stats)
            return sl_error_set(err, SL_ERR_INVALID, "scheduler option %s: not with neuron "
                                "statistics (a profile counts every expert on the CPU)",
                                fo.hot_bytes ? "hot_kb" : "cache_kb");
        c->hot.bytes = fo.hot_bytes;
        c->hot.cache_bytes = uploads ? fo.cache_bytes : 0;
        c->hot.uploads = uploads ? fo.uploads : 0;
        c->hot.decay = (float)fo.lfu_decay;
        c->hot.lru = fo.policy == SL_CACHE_LRU;
        c->hot.warm = fo.hot_warm;
        c->moe_mode = "cpu";
        return sl_moe_cpu_create(&c->ops, &c->mv, c->pool, &c->moe, err);
    }
    const bool resident = pinned || fo.hot_bytes || uploads;
    fo.hot_layers = 0;
    for (int32_t il = 0; il < c->m->hp.n_layer; il++)
        fo.hot_layers += sl__layer_moe(&c->m->layers[il]);
    if ((fo.mode != SL_FETCH_CPU || resident) && c->m->dev) {
        fo.reserve_assign = (int64_t)c->cap * c->m->hp.n_expert_used;
        fo.reserve_embd = c->m->hp.n_embd;
        fo.reserve_ff = c->m->hp.n_ff_exp;
        fo.no_pdl = !sl__ctx_pdl(c);
        c->moe_mode = sl_fetch_mode_name(fo.mode);
        return sl_moe_fetch_create(c->m->dev, &fo, &c->ops, &c->mv, c->pool, &c->moe, err);
    }
    c->moe_mode = "cpu";
    return sl_moe_cpu_create(&c->ops, &c->mv, c->pool, &c->moe, err);
}

/* Host buffers that take part in device copies (the host side's activations, staged
 * embedding rows, logits) are page-locked with the model's device: CUDA runs a copy from or to
 * pageable memory synchronously with the caller. Page-aligned and page-sized, so that no two
 * registrations share a page. Plain malloc when no weight lives on a device. */
static bool copies_host(const sl_ctx *c) { return c->m->dev && c->m->arena; }

sl_status sl__ctx_host_buf_alloc(sl_ctx *c, size_t bytes, const char *what, void **out,
                                 sl_error *err)
{
    const size_t page = 4096, n = (bytes ? bytes : 1) + page - 1;
    *out = NULL;
    void *p = NULL;
    if (n < bytes || (copies_host(c) ? posix_memalign(&p, page, n / page * page) != 0
                                     : !(p = malloc(bytes ? bytes : 1))))
        return sl_error_set(err, SL_ERR_NOMEM, "%s: out of memory (%zu bytes)", what, bytes);
    sl_error re;
    if (copies_host(c) && sl_device_host_register(c->m->dev, p, n / page * page, &re)) {
        free(p);
        return sl_error_set(err, re.code, "%s: page-locking %zu bytes: %s", what, bytes, re.msg);
    }
    *out = p;
    return SL_OK;
}

void sl__ctx_host_buf_free(sl_ctx *c, void *p)
{
    if (!p) return;
    if (copies_host(c)) sl_device_host_unregister(c->m->dev, p, NULL);
    free(p);
}

/* token_embd on the device (tied to the output matrix): its rows are staged down into a host
 * buffer sized for its current type (grown when a reload changed the type). */
static sl_status embd_rows_alloc(sl_ctx *c, sl_error *err)
{
    const sl_weight *te = c->m->tok_embd;
    if (!(te->residency & SL_RES_DEVICE)) return SL_OK;
    const size_t bytes = (size_t)c->cap * sl_quant_row_bytes(te->type, c->m->hp.n_embd);
    if (bytes <= c->embd_rows_bytes) return SL_OK;
    sl__ctx_host_buf_free(c, c->embd_rows);
    c->embd_rows = NULL;
    c->embd_rows_bytes = 0;
    void *rows = NULL;
    sl_status st = sl__ctx_host_buf_alloc(c, bytes, "embedding rows", &rows, err);
    if (st) return st;
    c->embd_rows = rows;
    c->embd_rows_bytes = bytes;
    return SL_OK;
}

/* The host side's rope factors: the host copy; a device-resident one (all layers on the
 * device) is only read there. */
static const float *host_rope(const sl_ctx *c)
{
    const sl_weight *rf = sl__model_rope_factors(c->m, c->kv.n_ctx);
    return rf && !(rf->residency & SL_RES_DEVICE) ? rf->data : NULL;
}

/* After a runtime moved the model's weights (types and bytes unchanged): what follows their
 * addresses alone. */
static sl_status ctx_rebind(sl_ctx *c, sl_error *err)
{
    c->host.rope_freqs = host_rope(c);
    return sl__ctx_dev_rebind(c, err);
}

/* The host side: the host executor and its [cap][...] buffers. */
static sl_status host_side_create(sl_ctx *c, size_t work_bytes, sl_error *err)
{
    sl__side *h = &c->host;
    const size_t bytes = sl__side_carve(c, h, NULL);
    sl_status st = sl__ctx_host_buf_alloc(c, bytes, "context scratch", &h->mem, err);
    if (st) return st;
    sl__side_carve(c, h, h->mem);
    h->rope_freqs = host_rope(c);
    /* token_embd on the device (tied to the output matrix): rows are staged down */
    if ((st = embd_rows_alloc(c, err))) return st;
    c->work_bytes = work_bytes;
    return sl__dx_host_create(&c->ops, &c->mv, c->pool, c->moe, work_bytes, &h->dx, err);
}

/* The largest CPU matvec workspace any weight needs (0 and an error for a type without one). */
static sl_status matvec_work_bytes(const sl_model *m, size_t *out, sl_error *err)
{
    size_t wb = 0;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        if (!w->need_matvec) continue;
        const size_t b = sl_cpu_matvec_work_bytes(w->type, w->ne[0], 64);
        if (!b) {
            const sl_gguf_type_info *ti = sl_gguf_type_get(w->type);
            return sl_error_set(err, SL_ERR_UNSUPPORTED, "tensor '%s': type %s has no CPU "
                                "matvec", w->name, ti ? ti->name : "?");
        }
        if (b > wb) wb = b;
    }
    *out = wb;
    return SL_OK;
}

/* The refresh after the model's weights changed — a live reload (the swap gate's epoch) or a
 * runtime's read of its files (the layout epoch) — before a step reads a weight: expert caches
 * invalidated, everything derived from weight addresses, types and bytes re-taken (ctx_rebind's
 * part included). The sides and buffers stay: the placement is the same. */
static sl_status ctx_refresh(sl_ctx *c, sl_error *err)
{
    sl_moe_invalidate(c->moe);
    sl__hot_invalidate(c);
    c->host.rope_freqs = host_rope(c);
    size_t wb;
    sl_status st = matvec_work_bytes(c->m, &wb, err);
    if (!st) st = embd_rows_alloc(c, err);
    if (!st) st = sl__ctx_dev_refresh(c, wb, err);
    if (st || wb <= c->work_bytes) return st;
    sl__dx_destroy(c->host.dx);
    c->host.dx = NULL;
    if ((st = sl__dx_host_create(&c->ops, &c->mv, c->pool, c->moe, wb, &c->host.dx, err)))
        return st;
    c->work_bytes = wb;
    return SL_OK;
}

static sl_status nstats_create(sl_ctx *c, sl_error *err);
static sl_status ctx_build(sl_ctx *c, sl_error *err);

/* The logits buffer for `rows` rows (old rows are not kept: every call rewrites its logits).
 * Page-locked with the device (sl__ctx_host_buf_alloc), so it is sized at creation, not in a
 * call. */
static sl_status logits_alloc(sl_ctx *c, int64_t rows, sl_error *err)
{
    sl__ctx_host_buf_free(c, c->logits);
    c->logits = NULL;
    c->logits_cap = 0;
    void *l = NULL;
    sl_status st = sl__ctx_host_buf_alloc(c, (size_t)(rows * c->m->hp.n_vocab) * sizeof(float),
                                          "logits", &l, err);
    if (st) return st;
    c->logits = l;
    c->logits_cap = rows;
    return SL_OK;
}

/* An evaluation's bracket (sl__serving.eval_begin / eval_end); outside a runtime the epochs
 * are the context's own and nothing is held. */
static sl_status eval_begin(sl_ctx *c, uint64_t *res_epoch, uint64_t *layout_epoch, sl_error *err)
{
    if (c->m->serving) return c->m->serving->eval_begin(c, res_epoch, layout_epoch, err);
    *res_epoch = c->res_epoch;
    *layout_epoch = c->res_layout_epoch;
    return SL_OK;
}

static void eval_end(sl_ctx *c)
{
    if (c->m->serving) c->m->serving->eval_end(c);
}

sl_status sl_ctx_create(sl_model *m, const sl_ctx_options *opt, sl_ctx **out, sl_error *err)
{
    if (!m || !out) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_create: NULL model or out");
    *out = NULL;
    sl_status st;
    if (opt && (st = sl__struct_size_check("sl_ctx_options", opt->struct_size, sizeof *opt,
                                           err)))
        return st;
    if (m->opt.plan_only)
        return sl_error_set(err, SL_ERR_INVALID, "%s: opened with plan_only (no weights read): "
                            "no context can run it", m->path);
    sl_ctx *c = calloc(1, sizeof *c);
    if (!c) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (context)");
    c->m = m;
    c->opt = opt ? *opt : sl_ctx_options_default();
    /* a runtime's model must be on the device while the context takes its sides */
    st = eval_begin(c, &c->res_epoch, &c->res_layout_epoch, err);
    if (st) {
        free(c);
        return st;
    }
    /* counted before the context touches the model's stream (forward.c's graph rule) */
    pthread_mutex_lock(&m->ctx_mu);
    const bool closed = m->close_pending;
    if (!closed) atomic_fetch_add(&m->n_ctx_live, 1);
    pthread_mutex_unlock(&m->ctx_mu);
    if (closed) {
        eval_end(c);
        free(c);
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_create: %s was closed (sl_model_close)"
                            " and lives only until its last context is destroyed", m->path);
    }
    st = ctx_build(c, err);
    eval_end(c);
    if (st) {
        sl_ctx_destroy(c);
        return st;
    }
    *out = c;
    return SL_OK;
}

/* The rest of sl_ctx_create: everything but the residency bracket. */
static sl_status ctx_build(sl_ctx *c, sl_error *err)
{
    sl_model *m = c->m;
    const sl__hparams *hp = &m->hp;
    sl_status st = SL_OK;
    if ((st = sl_check_i64("n_ctx", c->opt.n_ctx, SL_RANGE_N_CTX, err)) ||
        (st = sl_check_i64("n_batch", c->opt.n_batch, SL_RANGE_N_BATCH, err)))
        goto fail;
    if (!c->opt.n_ctx) c->opt.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (!c->opt.n_batch) c->opt.n_batch = 512;
    c->cap = c->opt.n_batch < c->opt.n_ctx ? c->opt.n_batch : c->opt.n_ctx;
    if ((st = sl__kv_init(&c->kv, c->opt.kv_f16 ? SL_KV_F16 : SL_KV_F32, hp->n_layer,
                          c->opt.n_ctx, hp->n_head_kv, hp->head_dim, m->tr->mla, err)))
        goto fail;
    /* kernels: dispatch chosen once (SLUICE_CPU_ISA may force one), pool of the model's size */
    sl_cpu_isa isa;
    if ((st = sl_env_cpu_isa(&isa, err)) ||
        (st = sl_cpu_ops_init(&c->ops, isa, sl_cpu_features_detect(), err)))
        goto fail;
    if ((st = sl_cpu_matvec_init(&c->mv, c->ops.isa, sl_cpu_features_detect(), err))) goto fail;
    /* SLUICE_ACT_F32=1: quantized matmuls on unquantized activations (verification against
     * float64 references; see kernels/cpu/matvec.h). */
    if ((st = sl_env_act_f32(&c->mv.f32_act, err))) goto fail;
    if ((st = sl_env_amx(&c->mv.amx, err))) goto fail;
    if ((st = sl__model_cpu_pool_create(m, &c->pool, err))) goto fail;
    if ((st = create_moe(c, err))) goto fail;
    if (!(c->async_parts = calloc((size_t)m->hp.n_layer, sizeof *c->async_parts))) {
        st = sl_error_set(err, SL_ERR_NOMEM, "out of memory (context)");
        goto fail;
    }
    /* what follows reads weights and takes arena blocks: not while a reload commits */
    c->epoch = sl_swap_step_begin(&m->gate);
    size_t wb = 0;
    if (!(st = matvec_work_bytes(m, &wb, err)) && !(st = host_side_create(c, wb, err)) &&
        !(st = logits_alloc(c, c->opt.all_logits ? c->cap : 1, err)))
        st = sl__ctx_dev_create(c, wb, err);
    sl_swap_step_end(&m->gate);
    if (st || (st = sl__defer_setup(c, c->defer.d, err))) goto fail;
    if (c->opt.neuron_stats && (st = nstats_create(c, err))) goto fail;
    if ((st = sl__rs_create(c, err))) goto fail;
    return SL_OK;
fail:
    return st;
}

void sl_ctx_destroy(sl_ctx *c)
{
    if (!c) return;
    const int32_t n_ns = c->m->hp.n_layer * (c->m->hp.n_expert ? c->m->hp.n_expert : 1);
    for (int32_t i = 0; c->nstats && i < n_ns; i++) sl_neuron_stats_free(&c->nstats[i]);
    sl_moe_set_neuron_stats(c->moe, NULL, 0, 0);
    free(c->nstats);
    free(c->async_parts);
    sl_swap_step_begin(&c->m->gate); /* gives arena blocks back */
    sl__ctx_dev_destroy(c);
    sl_swap_step_end(&c->m->gate);
    sl__defer_free(c); /* its worker computes on the pool */
    sl__dx_destroy(c->host.dx);
    sl_moe_destroy(c->moe);
    sl_cpu_pool_destroy(c->pool);
    sl__kv_free(&c->kv);
    sl__rs_free(c);
    sl__ctx_host_buf_free(c, c->host.mem);
    sl__ctx_host_buf_free(c, c->logits);
    sl__ctx_host_buf_free(c, c->hidden);
    sl__ctx_host_buf_free(c, c->embd_rows);
    free(c->batch_logits);
    sl_model *m = c->m;
    pthread_mutex_lock(&m->ctx_mu); /* every context was counted (sl_ctx_create) */
    const bool close = atomic_fetch_sub(&m->n_ctx_live, 1) == 1 && m->close_pending;
    pthread_mutex_unlock(&m->ctx_mu);
    free(c);
    if (close) sl__model_free(m); /* sl_model_close came while this context lived */
}

/* neuron_stats: one record per layer, of the dense FFN's width; with routed experts one per
 * layer and expert ([n_layer][n_expert], each n_ff_exp wide), filled by the CPU MoE scheduler
 * (moe.h sl_moe_set_neuron_stats). */
static sl_status nstats_create(sl_ctx *c, sl_error *err)
{
    const sl_model *m = c->m;
    const int32_t X = m->hp.n_expert, n = m->hp.n_layer * (X ? X : 1);
    if (X && !(sl_moe_caps(c->moe) & SL_MOE_CAP_NEURON_STATS))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: per-expert neuron statistics are "
                            "recorded by the cpu MoE scheduler only (this context runs '%s')",
                            m->path, c->moe ? sl_moe_name(c->moe) : "none");
    c->nstats = calloc((size_t)n, sizeof *c->nstats);
    if (!c->nstats) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (neuron stats)");
    for (int32_t i = 0; i < n; i++) {
        const int64_t F = X ? m->hp.n_ff_exp : m->layers[i].ffn_up->ne[1];
        sl_status st = sl_neuron_stats_init(&c->nstats[i], F, err);
        if (st) return st;
    }
    if (X) sl_moe_set_neuron_stats(c->moe, c->nstats, m->hp.n_layer, X);
    return SL_OK;
}

sl_status sl_ctx_neuron_stats(const sl_ctx *c, int32_t il, int32_t expert, int64_t *n_neuron,
                              uint64_t *n_tokens, const uint64_t **active,
                              const double **mag_sum, sl_error *err)
{
    if (!c || !n_neuron || !n_tokens || !active || !mag_sum)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_neuron_stats: NULL argument");
    if (!c->nstats)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_neuron_stats: the context was created "
                            "without the neuron_stats option");
    if (il < 0 || il >= c->m->hp.n_layer)
        return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_neuron_stats: layer %d outside [0, %d)",
                            il, c->m->hp.n_layer);
    const int32_t X = c->m->hp.n_expert;
    if (X == 0 ? expert != -1 : expert < 0 || expert >= X)
        return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_neuron_stats: expert %d of a model with "
                            "%d routed experts (-1: the dense FFN)", expert, X);
    const sl_neuron_stats *s = &c->nstats[X ? il * X + expert : il];
    *n_neuron = s->n_neuron;
    *n_tokens = s->n_tokens;
    *active = s->active;
    *mag_sum = s->mag_sum;
    return SL_OK;
}

/* The token and time counters of an evaluation of n tokens that took dt seconds. */
static void count_eval(sl_ctx *c, size_t n, double dt)
{
    if (n > 1) {
        c->stats.prefill_tokens += n;
        c->stats.prefill_seconds += dt;
    } else {
        c->stats.decode_tokens += 1;
        c->stats.decode_seconds += dt;
    }
}

static sl_status eval_step(sl_ctx *c, uint64_t epoch, const int32_t *tokens, size_t n,
                           int64_t keep_from, int32_t *greedy, sl_error *err);

/* One evaluation step: holds the model's swap gate shared, so a live reload applies its
 * changes before or after it, never during (scheduler/policy/swap.h). */
static sl_status eval(sl_ctx *c, const int32_t *tokens, size_t n, int64_t keep_from,
                      int32_t *greedy, sl_error *err)
{
    const uint64_t epoch = sl_swap_step_begin(&c->m->gate);
    const sl_status st = eval_step(c, epoch, tokens, n, keep_from, greedy, err);
    sl_swap_step_end(&c->m->gate);
    return st;
}

/* Before a step reads a weight (gate held, a runtime's model busy): one refresh when the
 * gate's epoch or the residency's layout epoch moved on since the last (a live reload of a
 * runtime's model bumps all three, and is still one refresh), else a rebind when only the
 * weights' addresses did (eviction, reload from the floor, compaction). */
static sl_status ctx_sync(sl_ctx *c, uint64_t epoch, uint64_t res_epoch, uint64_t layout_epoch,
                          sl_error *err)
{
    const bool refresh = epoch != c->epoch || layout_epoch != c->res_layout_epoch;
    if (!refresh && res_epoch == c->res_epoch) return SL_OK;
    sl__forward_graph_drop(c); /* it froze addresses that may move now */
    const sl_status st = refresh ? ctx_refresh(c, err) : ctx_rebind(c, err);
    if (st) return st;
    c->epoch = epoch;
    c->res_epoch = res_epoch;
    c->res_layout_epoch = layout_epoch;
    if (refresh) c->stats.refreshes++;
    else c->stats.rebinds++;
    return SL_OK;
}

sl_status sl_ctx_eval(sl_ctx *c, const int32_t *tokens, size_t n, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval: NULL context");
    return n ? eval(c, tokens, n, 0, NULL, err) : SL_OK;
}

sl_status sl_ctx_eval_tail(sl_ctx *c, const int32_t *tokens, size_t n, size_t first,
                           sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_tail: NULL context");
    if (!c->opt.all_logits)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_tail: the context keeps the last "
                            "row only (all_logits off)");
    if (first >= n)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_tail: first %zu of %zu tokens: "
                            "must be below the token count", first, n);
    return eval(c, tokens, n, (int64_t)first, NULL, err);
}

sl_status sl_ctx_eval_greedy(sl_ctx *c, const int32_t *tokens, size_t n, int32_t *token,
                             sl_error *err)
{
    if (!c || !token)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_greedy: NULL %s",
                            !c ? "context" : "token");
    if (!n) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_greedy: no tokens to evaluate");
    return eval(c, tokens, n, 0, token, err);
}

sl_status sl_ctx_eval_sample(sl_ctx *c, sl_sampler *s, const int32_t *tokens, size_t n,
                             int32_t *next, sl_error *err)
{
    if (!c || !s || !next)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_sample: NULL %s",
                            !c ? "context" : !s ? "sampler" : "next");
    /* with no tokens sl_ctx_eval would succeed and leave the previous step's logits */
    if (!n) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_sample: no tokens to evaluate");
    if (sl_sampler_is_greedy(s)) return sl_ctx_eval_greedy(c, tokens, n, next, err);
    sl_status st = sl_ctx_eval(c, tokens, n, err);
    return st ? st : sl_sampler_sample(s, sl_ctx_logits(c, -1), c->m->hp.n_vocab, next, err);
}

/* Every token id of a call in [0, n_vocab), before any pass: a bad id found by the forward
 * pass of a later chunk had the earlier chunks computed, and a recurrent (qwen3next) context
 * lost its state to a call that changed nothing. */
static sl_status tokens_check(const sl_ctx *c, const int32_t *tokens, size_t n, const char *fn,
                              size_t seq, sl_error *err)
{
    const int32_t V = c->m->hp.n_vocab;
    for (size_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return sl_error_set(err, SL_ERR_RANGE, "%s: sequence %zu token %zu: id %d outside "
                                "[0, n_vocab %d)", fn, seq, t, tokens[t], V);
    return SL_OK;
}

static sl_status eval_step(sl_ctx *c, uint64_t epoch, const int32_t *tokens, size_t n,
                           int64_t keep_from, int32_t *greedy, sl_error *err)
{
    if (!tokens) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval: NULL tokens");
    if (n > (uint64_t)(c->opt.n_ctx - c->n_past)) /* no overflow: n_past <= n_ctx */
        return sl_error_set(err, SL_ERR_RANGE,
                            "sl_ctx_eval: n_past %d + %zu tokens exceeds n_ctx %d", c->n_past, n,
                            c->opt.n_ctx);
    /* after the count is known to fit: n is the caller's, the array may be shorter */
    sl_status tst = tokens_check(c, tokens, n, "sl_ctx_eval", 0, err);
    if (tst) return tst;
    const int64_t V = c->m->hp.n_vocab;
    /* logits rows from..n-1 are computed and kept (all_logits: from keep_from; else the last) */
    const int64_t from = c->opt.all_logits && !greedy ? keep_from : (int64_t)n - 1;
    const int64_t rows = (int64_t)n - from;
    /* the last call's rows are gone from here on (a failed reallocation below left them
     * counted over a freed buffer: sl_ctx_logits then handed out a wild pointer) */
    c->n_logits = 0;
    c->n_hidden = 0;
    if (rows > c->logits_cap) {
        /* only all_logits calls of more tokens than a batch get here (creation sizes the
         * buffer for a batch); doubling keeps re-registrations to a few per context */
        const int64_t want = rows > 2 * c->logits_cap ? rows : 2 * c->logits_cap;
        sl_status st = logits_alloc(c, want, err);
        if (st) return st;
    }
    if (c->opt.embeddings && (int64_t)n > c->hidden_cap) {
        sl__ctx_host_buf_free(c, c->hidden);
        c->hidden = NULL;
        c->hidden_cap = 0;
        const int64_t want = (int64_t)n > 2 * c->cap ? (int64_t)n : 2 * c->cap;
        void *h = NULL;
        const size_t bytes = (size_t)want * (size_t)c->m->hp.n_embd * sizeof(float);
        sl_status st = sl__ctx_host_buf_alloc(c, bytes, "hidden states", &h, err);
        if (st) return st;
        c->hidden = h;
        c->hidden_cap = want;
    }
    /* a runtime's model: resident and kept so (busy) while this runs */
    uint64_t res_epoch, layout_epoch;
    sl_status rst = eval_begin(c, &res_epoch, &layout_epoch, err);
    if (rst) return rst;
    if ((rst = ctx_sync(c, epoch, res_epoch, layout_epoch, err))) {
        eval_end(c);
        return rst;
    }
    const int32_t start = c->n_past;
    const double t0 = now_s();
    for (size_t off = 0; off < n; off += (size_t)c->cap) {
        const int64_t m = (int64_t)(n - off < (size_t)c->cap ? n - off : (size_t)c->cap);
        const bool last = off + (size_t)m == n;
        /* this batch's first row with logits; none when the kept rows start past it */
        const int64_t lf = from > (int64_t)off ? from - (int64_t)off : 0;
        float *lo = lf < m ? c->logits + ((int64_t)off + lf - from) * V : NULL;
        c->hidden_out = c->opt.embeddings ? c->hidden + (int64_t)off * c->m->hp.n_embd : NULL;
        sl_status st = sl__forward(c, tokens + off, m, lo, lf, last ? greedy : NULL, err);
        c->hidden_out = NULL;
        if (st) {
            c->n_past = start; /* entries written past it are ignored, then overwritten */
            eval_end(c);
            return st;
        }
        c->n_past += (int32_t)m;
    }
    eval_end(c);
    c->n_logits = greedy ? 0 : rows; /* a greedy step keeps no logits (sluice.h) */
    c->logits_first = from;
    c->n_eval = (int64_t)n;
    c->n_hidden = c->opt.embeddings ? (int64_t)n : 0;
    count_eval(c, n, now_s() - t0);
    return SL_OK;
}

/* sl_ctx_eval_batch's pass, the model's swap gate held (epoch): every context's evaluation
 * bracket and refresh, then one forward pass over all the sequences (sl__forward_batch). */
static sl_status batch_step(sl_ctx *const *ctxs, const int32_t *const *tokens,
                            const size_t *n_tokens, size_t k, int64_t total, uint64_t epoch,
                            sl_error *err)
{
    sl_ctx *lead = ctxs[0];
    const int64_t V = lead->m->hp.n_vocab;
    sl__seq *seqs = malloc(k * sizeof *seqs);
    int32_t *flat = malloc((size_t)total * sizeof *flat);
    sl_status st = SL_OK;
    size_t begun = 0;
    if (!seqs || !flat) {
        st = sl_error_set(err, SL_ERR_NOMEM, "sl_ctx_eval_batch: out of memory");
        goto out;
    }
    int64_t off = 0, rows = 0;
    for (size_t i = 0; i < k; i++) {
        sl_ctx *c = ctxs[i];
        const size_t n = n_tokens[i];
        /* the pass computes as the lead does: Expert Deferral changes the numbers */
        if (c->defer.d != lead->defer.d) {
            st = sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_batch: sequence %zu's context "
                              "defers %d experts a token, the first's %d (scheduler option "
                              "defer): batch contexts that defer alike", i, c->defer.d,
                              lead->defer.d);
            goto out;
        }
        if (n > (uint64_t)(c->opt.n_ctx - c->n_past)) {
            st = sl_error_set(err, SL_ERR_RANGE, "sl_ctx_eval_batch: sequence %zu: n_past %d + "
                              "%zu tokens exceeds n_ctx %d", i, c->n_past, n, c->opt.n_ctx);
            goto out;
        }
        if ((st = tokens_check(c, tokens[i], n, "sl_ctx_eval_batch", i, err))) goto out;
        /* as eval_step: all_logits keeps every row, else the last */
        const int64_t from = c->opt.all_logits ? 0 : (int64_t)n - 1, r = (int64_t)n - from;
        c->n_logits = 0;
        c->n_hidden = 0;
        if (r > c->logits_cap && (st = logits_alloc(c, r, err))) goto out;
        seqs[i] = (sl__seq){.c = c, .off = off, .n = (int64_t)n, .logits = c->logits,
                            .out_from = from};
        memcpy(flat + off, tokens[i], n * sizeof *flat);
        off += (int64_t)n;
        rows += r;
    }
    if (rows > lead->batch_rows) {
        float *b = realloc(lead->batch_logits, (size_t)(rows * V) * sizeof *b);
        if (!b) {
            st = sl_error_set(err, SL_ERR_NOMEM, "sl_ctx_eval_batch: out of memory (%lld "
                              "logits rows)", (long long)rows);
            goto out;
        }
        lead->batch_logits = b;
        lead->batch_rows = rows;
    }
    for (; begun < k; begun++) {
        uint64_t res_epoch, layout_epoch;
        if ((st = eval_begin(ctxs[begun], &res_epoch, &layout_epoch, err))) goto out;
        if ((st = ctx_sync(ctxs[begun], epoch, res_epoch, layout_epoch, err))) {
            begun++;
            goto out;
        }
    }
    const double t0 = now_s();
    if ((st = sl__forward_batch(lead, seqs, (int32_t)k, flat, total, err))) goto out;
    const double dt = now_s() - t0;
    for (size_t i = 0; i < k; i++) {
        sl_ctx *c = ctxs[i];
        c->n_past += (int32_t)seqs[i].n;
        c->n_logits = seqs[i].n - seqs[i].out_from;
        c->logits_first = seqs[i].out_from;
        c->n_eval = seqs[i].n;
        c->n_hidden = 0; /* a batched pass keeps no hidden states (sluice.h) */
        count_eval(c, n_tokens[i], dt);
    }
out:
    for (size_t i = 0; i < begun; i++) eval_end(ctxs[i]);
    free(seqs);
    free(flat);
    return st;
}

sl_status sl_ctx_eval_batch(sl_ctx *const *ctxs, const int32_t *const *tokens,
                            const size_t *n_tokens, size_t n_seqs, sl_error *err)
{
    if (!n_seqs) return SL_OK;
    if (!ctxs || !tokens || !n_tokens)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_batch: NULL %s",
                            !ctxs ? "contexts" : !tokens ? "tokens" : "n_tokens");
    sl_ctx *lead = ctxs[0];
    uint64_t total = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        if (!ctxs[i] || !tokens[i] || !n_tokens[i])
            return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_batch: sequence %zu: %s", i,
                                !ctxs[i] ? "NULL context" : !tokens[i] ? "NULL tokens"
                                                                       : "no tokens");
        if (ctxs[i]->m != lead->m)
            return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_batch: sequence %zu: a "
                                "context of another model (%s) than sequence 0's (%s): one "
                                "pass runs one model", i, ctxs[i]->m->path, lead->m->path);
        /* total <= cap before the add: no wrap */
        if (n_seqs > 1 && n_tokens[i] > (uint64_t)lead->cap - total)
            return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_eval_batch: %zu sequences of more "
                                "than %d tokens exceed the first context's batch of %d tokens "
                                "(n_batch, n_ctx)", n_seqs, lead->cap, lead->cap);
        total += n_tokens[i];
    }
    if (n_seqs > 1 && lead->rs)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "sl_ctx_eval_batch: %s: its recurrent layers "
                            "keep one state per context, which a pass of several sequences does "
                            "not carry yet: evaluate each context alone", lead->m->path);
    for (size_t i = 1; i < n_seqs; i++)
        for (size_t j = 0; j < i; j++)
            if (ctxs[i] == ctxs[j])
                return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_eval_batch: sequences %zu and "
                                    "%zu name the same context (one sequence per context)", j,
                                    i);
    if (n_seqs == 1) return sl_ctx_eval(lead, tokens[0], n_tokens[0], err);
    const uint64_t epoch = sl_swap_step_begin(&lead->m->gate);
    const sl_status st = batch_step(ctxs, tokens, n_tokens, n_seqs, (int64_t)total, epoch, err);
    sl_swap_step_end(&lead->m->gate);
    return st;
}

const float *sl_ctx_logits(const sl_ctx *c, int64_t i)
{
    if (!c || !c->n_logits || !c->logits) return NULL;
    if (i == -1) i = c->n_eval - 1;
    /* rows before logits_first were not computed (without all_logits: all but the last) */
    if (i < c->logits_first || i >= c->n_eval) return NULL;
    return c->logits + (i - c->logits_first) * c->m->hp.n_vocab;
}

const float *sl_ctx_embeddings(const sl_ctx *c, int64_t i)
{
    if (!c || !c->n_hidden) return NULL;
    if (i == -1) i = c->n_hidden - 1;
    if (i < 0 || i >= c->n_hidden) return NULL;
    return c->hidden + i * c->m->hp.n_embd;
}

int32_t sl_ctx_n_past(const sl_ctx *c)
{
    return c ? c->n_past : 0;
}

int32_t sl_ctx_n_batch(const sl_ctx *c)
{
    return c ? c->cap : 0;
}

sl_status sl_ctx_rewind(sl_ctx *c, int32_t n_past, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_rewind: NULL context");
    if (n_past < 0 || n_past > c->n_past)
        return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_rewind: n_past %d outside [0, %d]", n_past,
                            c->n_past);
    const sl_status st = sl__rs_rewind(c, n_past, err);
    if (st) return st;
    c->n_past = n_past;
    return SL_OK;
}

void sl_ctx_stats_get(const sl_ctx *c, sl_ctx_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!c) return;
    *out = c->stats;
    out->pdl = sl__dx_cuda_pdl(c->dev.raw);
    if (c->moe) {
        sl_moe_stats ms;
        sl_moe_stats_get(c->moe, &ms);
        sl__defer_stats_add(c, &ms);
        out->expert_calls_cpu = ms.calls_cpu;
        out->expert_calls_gpu =
            ms.calls_gpu + atomic_load_explicit(&c->hot.calls_dev, memory_order_relaxed);
        sl__hot_resident(c, &out->hot_experts, &out->hot_bytes);
        out->expert_cpu_bytes = ms.cpu_bytes;
        out->expert_cpu_seconds = (double)ms.cpu_ns * 1e-9;
        out->moe_scheduler = sl_moe_name(c->moe);
        out->moe_mode = c->moe_mode;
        out->moe_calls_cpu = ms.layer_calls_cpu;
        out->moe_calls_post = ms.layer_calls_post;
        out->moe_calls_full = ms.layer_calls_full;
        out->expert_fetches = ms.fetches;
        out->expert_fallbacks = ms.fallbacks;
        out->expert_cache_lookups = ms.cache_lookups;
        out->expert_cache_hits = ms.cache_hits;
        out->copies = ms.copies + c->stats.copies;
        out->copy_bytes = ms.copy_bytes + c->stats.copy_bytes;
        out->copy_overlap_pct = ms.copy_overlap_pct;
    }
}

sl_status sl_ctx_step_profile(const sl_ctx *c, sl_step_profile *rows, size_t cap, size_t *n,
                              sl_error *err)
{
    if (!c || !n || (cap && !rows))
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_step_profile: %s is NULL",
                            !c ? "the context" : !n ? "n" : "rows");
    *n = SL__DX_PROF_N_OPS;
    if (!c->opt.profile_steps)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_step_profile: the context was created "
                            "without profile_steps");
    if (cap < SL__DX_PROF_N_OPS)
        return sl_error_set(err, SL_ERR_RANGE, "sl_ctx_step_profile: %zu rows given, %d step "
                            "kinds", cap, (int)SL__DX_PROF_N_OPS);
    for (int i = 0; i < SL__DX_PROF_N_OPS; i++)
        rows[i] = (sl_step_profile){sl__dx_prof_op_names[i], c->prof.calls[i],
                                    c->prof.seconds[i], c->prof.gap_seconds[i]};
    return SL_OK;
}

sl_status sl_ctx_trace_write(const sl_ctx *c, const char *path, sl_error *err)
{
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "sl_ctx_trace_write: NULL context");
    return sl_moe_trace_write(c->moe, path, err);
}
