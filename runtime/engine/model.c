/* runtime/engine/model.c: the model part of the public API (sluice.h): options, open (file,
 * architecture, hparams, binding, device, placement plan, weights), close, info, plan; and the
 * model's CPU pool rule the contexts and the repacking share.
 *
 * Devices: SL_PLACE_CPU needs no device for compute; the host pool still wants one for
 * page-locking, so CPU placement opens the "sim" device unless options.device names one.
 * The device placements (GPU, LAYERS, EXPERTS_CPU, AUTO) put weights in a BFC arena of the
 * device; the forward pass runs the device layers through the device's executor (runtime/
 * dx.h): kernels/cuda on "cuda", the CPU kernels in stream order on "sim" — so the whole
 * device path (copies between sides, device KV, device logits) runs in CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine/env.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream.h"
#include "runtime/struct_size.h"
#include "runtime/text/model_vocab.h"

sl_model_options sl_model_options_default(void)
{
    return (sl_model_options){.struct_size = sizeof(sl_model_options),
                              .placement = SL_PLACE_AUTO, .gpu_layers = 0, .device = NULL,
                              .io = SL_LOAD_DIRECT, .numa_node = -1, .n_threads = 0,
                              .cpus = NULL, .progress = true};
}

static void gguf_notice(void *user, const char *msg)
{
    sl_model *m = user;
    if (!m->notice[0]) snprintf(m->notice, sizeof m->notice, "%s", msg);
}


/* Opens the device, resolves the placement plan against its free memory, and creates the
 * stream and arena when the plan puts anything on it. */
static sl_status open_device(sl_model *m, sl_error *err)
{
    sl_device_options dopt = {0};
    dopt.kind = m->opt.device             ? m->opt.device
                : m->opt.placement == SL_PLACE_CPU ? "sim" : NULL;
    dopt.notice = gguf_notice;
    dopt.notice_user = m;
    uint64_t free_bytes = 0;
    sl_status st = m->serving ? m->serving->lend(m, &free_bytes, err)
                              : sl_env_device_options(&dopt, err);
    if (!st && !m->serving) st = sl_device_open(&dopt, &m->dev, err);
    if (st) return st;
    /* As llama.cpp without a GPU: auto placement where auto found no CUDA device runs on the
     * CPU, where the CPU's own layouts (the Q4_K repack) apply. The simulated device is for
     * tests and holds weights only when named (--device sim, SLUICE_DEVICE=sim). */
    const char *named = m->opt.device ? m->opt.device : sl_env_device_kind();
    if (m->opt.placement == SL_PLACE_AUTO && !m->rt && !(named && !strcmp(named, "sim")) &&
        sl_device_kind_get(m->dev) == SL_DEVICE_SIM)
        m->opt.placement = SL_PLACE_CPU;
    const bool cpu = m->opt.placement == SL_PLACE_CPU;
    if (!cpu && !m->rt) {
        sl_device_props props;
        if ((st = sl_device_props_get(m->dev, &props, err))) return st;
        free_bytes = props.free_mem_bytes;
    }
    const bool cuda = sl__model_cuda(m);
    if ((st = sl__model_plan(m, free_bytes, cuda, err))) return st;
    if (m->serving && (st = m->serving->attach(m, err))) return st;
    if (!m->plan.device_bytes || m->opt.plan_only) return SL_OK;
    if ((st = sl_device_stream_create(m->dev, &m->stream, err))) return st;
    return m->rt ? SL_OK : sl_bfc_create_device(m->dev, m->stream, NULL, &m->arena, err);
}

sl_status sl_model_plan_get(const sl_model *m, const sl_place_plan **plan,
                            const sl_place_tensor **tensors, size_t *n, sl_error *err)
{
    if (!m || !plan || !tensors || !n)
        return sl_error_set(err, SL_ERR_INVALID, "sl_model_plan_get: NULL argument");
    *plan = &m->plan;
    *tensors = m->place_t;
    *n = m->n_w;
    return SL_OK;
}

void sl__model_info_fill(sl_model *m)
{
    sl_model_info *in = &m->info;
    const sl__hparams *hp = &m->hp;
    in->arch = sl_arch_name(m->arch);
    const char *name = NULL;
    if (sl_gguf_get_str(m->gguf, "general.name", &name, NULL)) name = "";
    in->name = name;
    in->n_vocab = hp->n_vocab;
    in->n_ctx_train = hp->n_ctx_train;
    in->n_embd = hp->n_embd;
    in->n_layer = hp->n_layer;
    in->n_head = hp->n_head;
    in->n_head_kv = hp->n_head_kv;
    in->head_dim = hp->head_dim;
    in->n_expert = hp->n_expert;
    in->n_expert_used = hp->n_expert_used;
    in->n_ff = hp->n_ff;
    in->n_ff_exp = hp->n_expert ? hp->n_ff_exp : 0;
    in->n_params = in->weight_bytes = in->gpu_bytes = in->host_bytes = 0;
    in->repacked_tensors = in->repacked_bytes = 0;
    in->n_threads = sl__model_cpu_plan(m).n_threads;
    for (size_t i = 0; i < m->n_w; i++) {
        const sl_weight *w = &m->w[i];
        in->n_params += (uint64_t)(w->ne[0] * w->ne[1] * w->ne[2] * w->ne[3]);
        in->repacked_tensors += sl__weight_repacked(w);
        in->repacked_bytes += sl__weight_repacked(w) ? w->nbytes : 0;
        in->weight_bytes += w->file_nbytes;
        if (w->residency == SL_RES_PARTS) continue; /* counted by its parts, below */
        if (w->residency ? w->residency & SL_RES_DEVICE : w->want_device)
            in->gpu_bytes += w->nbytes;
        else in->host_bytes += w->nbytes;
    }
    for (int32_t il = 0; m->layers && il < hp->n_layer; il++) { /* hot/cold splits */
        for (int p = 0; p < 3; p++) {
            in->gpu_bytes += m->layers[il].split_hot[p].nbytes;
            in->host_bytes += m->layers[il].split_cold[p].nbytes;
        }
        const sl__moe_split *ms = m->layers[il].moe_split;
        for (int b = 0; ms && b < 2; b++) in->gpu_bytes += ms->hot_b[b].nbytes;
    }
    uint32_t id;
    in->bos = sl_gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", &id, NULL) ? -1 : (int32_t)id;
    in->eos = sl_gguf_get_u32(m->gguf, "tokenizer.ggml.eos_token_id", &id, NULL) ? -1 : (int32_t)id;
}

sl_status sl__model_open(sl_runtime *rt, const sl__serving *serving, const char *path,
                         const sl_model_options *opt, sl_model **out, sl_error *err)
{
    if (!path || !out) return sl_error_set(err, SL_ERR_INVALID, "sl_model_open: NULL path or out");
    *out = NULL;
    sl_status st;
    if (opt && (st = sl__struct_size_check("sl_model_options", opt->struct_size,
                                           sizeof *opt, err)))
        return st;
    sl_model *m = calloc(1, sizeof *m);
    if (!m) return sl_error_set(err, SL_ERR_NOMEM, "out of memory (model)");
    m->rt = rt;
    m->serving = rt ? serving : NULL;
    m->opt = opt ? *opt : sl_model_options_default();
    if (!sl_place_mode_info_get(m->opt.placement)) {
        st = sl_error_set(err, SL_ERR_INVALID, "placement %d: unknown", (int)m->opt.placement);
        goto fail;
    }
    if ((unsigned)m->opt.io > SL_LOAD_MMAP) {
        st = sl_error_set(err, SL_ERR_INVALID, "io %d: unknown (direct, pread, mmap)",
                          (int)m->opt.io);
        goto fail;
    }
    if ((st = sl_check_i64("gpu_layers", m->opt.gpu_layers, SL_RANGE_GPU_LAYERS, err)) ||
        (st = sl_check_i64("n_cpu_moe", m->opt.n_cpu_moe, SL_RANGE_N_CPU_MOE, err)) ||
        (st = sl_check_i64("numa_node", m->opt.numa_node, SL_RANGE_NUMA_NODE, err)) ||
        (st = sl_check_i64("n_threads", m->opt.n_threads, SL_RANGE_N_THREADS, err)) ||
        (st = sl_check_i64("budget_ctx", m->opt.budget_ctx, SL_RANGE_N_CTX, err)))
        goto fail;
    if (m->opt.cpus) { /* refused here, not first by the context's pool (its plan counted a bad
                        * list as the CPUs online) */
        sl_cpu_set set;
        if ((st = sl_topo_parse_cpu_list(m->opt.cpus, &set, err))) goto fail;
    }
    m->path = strdup(path);
    if (!m->path) {
        st = sl_error_set(err, SL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    sl_gguf_options go = {.no_shards = false, .notice = gguf_notice, .notice_user = m};
    if ((st = sl_gguf_open(path, &go, &m->gguf, err))) goto fail;
    const char *arch = NULL;
    if ((st = sl_gguf_get_str(m->gguf, "general.architecture", &arch, err))) {
        char why[SL_ERROR_MSG_BYTES];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        st = sl_error_set(err, SL_ERR_FORMAT, "%s: general.architecture: %s", path, why);
        goto fail;
    }
    if ((st = sl_arch_parse(arch, &m->arch, err))) goto fail;
    m->tr = sl__arch_traits_get(m->arch);
    m->info.arch = sl_arch_name(m->arch);
    if ((st = sl__hparams_load(m, err))) goto fail;
    /* The tokenizer, when the file has one: a file with tokenizer.ggml.model must load (its
     * errors fail the open); one without (synthetic test models, research files) still
     * evaluates token ids, and the text functions say it has no tokenizer. */
    if (sl_gguf_find(m->gguf, "tokenizer.ggml.model") &&
        (st = sl_vocab_load(m->gguf, &m->vocab, err)))
        goto fail;
    if ((st = sl__model_bind(m, err))) goto fail;
    if ((st = open_device(m, err))) goto fail;
    if (m->opt.plan_only) {
        sl__model_info_fill(m);
        *out = m;
        return SL_OK;
    }
    /* before the load: a shared floor fingerprints the versions these records name */
    if ((st = sl_swap_sources_init(&m->sources, m->gguf, err))) goto fail;
    if ((st = m->serving ? m->serving->load_floor(m, err) : sl__model_load_weights(m, err)))
        goto fail;
    if ((st = sl__model_validate(m, err))) goto fail;
    if ((st = sl_swap_gate_init(&m->gate, err))) goto fail;
    m->gate_ready = true;
    if (pthread_mutex_init(&m->ctx_mu, NULL)) {
        st = sl_error_set(err, SL_ERR_NOMEM, "%s: cannot create a mutex", path);
        goto fail;
    }
    m->ctx_mu_ready = true;
    if (pthread_mutex_init(&m->stream_mu, NULL)) {
        st = sl_error_set(err, SL_ERR_NOMEM, "%s: cannot create a mutex", path);
        goto fail;
    }
    m->stream_mu_ready = true;
    if (pthread_mutex_init(&m->hot_mu, NULL)) {
        st = sl_error_set(err, SL_ERR_NOMEM, "%s: cannot create a mutex", path);
        goto fail;
    }
    m->hot_mu_ready = true;
    for (size_t i = 0; i < m->n_w; i++)
        m->w[i].file_size = m->sources.v[m->w[i].shard].size;
    if (m->serving && (st = m->serving->register_model(m, err))) goto fail;
    sl__model_info_fill(m);
    *out = m;
    return SL_OK;
fail:
    sl_model_close(m);
    return st;
}

sl_status sl_model_open(const char *path, const sl_model_options *opt, sl_model **out,
                        sl_error *err)
{
    return sl__model_open(NULL, NULL, path, opt, out, err);
}

void sl_model_close(sl_model *m)
{
    if (!m) return;
    if (m->ctx_mu_ready) { /* closed under its contexts: the last one's destroy closes it */
        pthread_mutex_lock(&m->ctx_mu);
        const bool live = atomic_load(&m->n_ctx_live) > 0;
        m->close_pending = live;
        pthread_mutex_unlock(&m->ctx_mu);
        if (live) return;
    }
    sl__model_free(m);
}

void sl__model_free(sl_model *m)
{
    /* its device weights back to their floors: a runtime's eviction, which releases the
     * streaming buffer under stream_mu (so before the mutexes go) */
    if (m->serving) m->serving->detach(m);
    sl__stream_release(m); /* (every context is gone) */
    if (m->stream_mu_ready) pthread_mutex_destroy(&m->stream_mu);
    if (m->hot_mu_ready) pthread_mutex_destroy(&m->hot_mu); /* hot_shared: the contexts' */
    sl__model_free_weights(m);
    sl_swap_sources_free(&m->sources);
    if (m->gate_ready) sl_swap_gate_destroy(&m->gate);
    if (m->ctx_mu_ready) pthread_mutex_destroy(&m->ctx_mu);
    if (m->layers) {
        for (int il = 0; il < m->hp.n_layer; il++) {
            sl__layer *L = &m->layers[il];
            free(L->gate_e);
            free(L->up_e);
            free(L->down_e);
            free(L->moe_gate);
            free(L->moe_up);
            free(L->moe_down);
            free(L->moe_on_device);
        }
    }
    free(m->layers);
    free(m->w);
    free(m->mrope_ff);
    sl_place_plan_free(&m->plan);
    free(m->place_t);
    if (!m->rt) sl_bfc_destroy(m->arena); /* else borrowed from the runtime, as below */
    if (m->stream) sl_device_stream_destroy(m->dev, m->stream);
    if (!m->rt) {
        sl_hostpool_destroy(m->hostpool);
        if (m->dev) sl_device_close(m->dev);
    }
    sl_vocab_free(m->vocab);
    sl_gguf_close(m->file_view);
    sl_gguf_close(m->gguf);
    free(m->path);
    free(m);
}

void sl_model_info_get(const sl_model *m, sl_model_info *out)
{
    if (!out) return;
    if (!m) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = m->info;
    if (m->dev) {
        sl_device_counters dc;
        sl_device_counters_get(m->dev, &dc);
        out->device_copies_pageable = dc.copies_pageable;
        out->device_region_allocs = dc.region_allocs;
        out->device_host_registers = dc.host_registers;
    }
}

const sl_vocab *sl__model_vocab(const sl_model *m)
{
    return m ? m->vocab : NULL;
}

sl_status sl__model_cpu_pool_create(const sl_model *m, sl_cpu_pool **out, sl_error *err)
{
    *out = NULL;
    const sl__cpu_plan cp = sl__model_cpu_plan(m);
    if (cp.n_threads == 1 && cp.numa_node < 0 && !m->opt.cpus) return SL_OK;
    sl_cpu_pool_options po = {.n_threads = cp.n_threads, .numa_node = cp.numa_node,
                              .cpus = m->opt.cpus, .topo = NULL};
    /* the topology is loaded only to bind: SLUICE_TOPOLOGY is read then too */
    const sl_status st = po.numa_node >= 0 || po.cpus ? sl_env_topo_options(&po.topology, err)
                                                      : SL_OK;
    return st ? st : sl_cpu_pool_create(&po, out, err);
}
