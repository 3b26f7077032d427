/* GET /metrics: Prometheus text exposition format 0.0.4.
 *
 * The request counters and throughputs carry llama-server's names (llamacpp:*), so dashboards
 * built for it read ours; the engine's own figures (where the weights live, the MoE
 * scheduler's expert calls, fetches, cache and copies, from sl_model_info_get and
 * sl_ctx_stats_get summed over the slots as of each slot's last finished job) are sluice_*.
 * With several models the counters are summed over them; each model's residency is a gauge
 * labelled {model="NAME"} (sluice_model_residency: 0 disk, 1 host, 2 device, 3 pinned), and
 * the runtime's loads, evictions and compactions follow. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/serve/serve_impl.h"

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

/* a += b for every counter, gauge and model byte count of the pools' counters */
static void add_counters(sl_serve_counters *a, const sl_serve_counters *b)
{
    a->prompt_tokens += b->prompt_tokens;
    a->predicted_tokens += b->predicted_tokens;
    a->n_decode += b->n_decode;
    a->busy_slots += b->busy_slots;
    a->requests_done += b->requests_done;
    a->requests_cancelled += b->requests_cancelled;
    a->requests_failed += b->requests_failed;
    a->decoded += b->decoded;
    a->prompt_s += b->prompt_s;
    a->predicted_s += b->predicted_s;
    a->busy += b->busy;
    a->queued += b->queued;
    sl_ctx_stats *e = &a->engine;
    const sl_ctx_stats *f = &b->engine;
    const double overlap = e->copy_overlap_pct * (double)e->copies +
                           f->copy_overlap_pct * (double)f->copies;
    e->expert_calls_cpu += f->expert_calls_cpu;
    e->expert_calls_gpu += f->expert_calls_gpu;
    e->expert_fetches += f->expert_fetches;
    e->expert_fallbacks += f->expert_fallbacks;
    e->expert_cache_lookups += f->expert_cache_lookups;
    e->expert_cache_hits += f->expert_cache_hits;
    e->copies += f->copies;
    e->copy_bytes += f->copy_bytes;
    e->copy_overlap_pct = e->copies ? overlap / (double)e->copies : 0;
    a->model.weight_bytes += b->model.weight_bytes;
    a->model.gpu_bytes += b->model.gpu_bytes;
    a->model.host_bytes += b->model.host_bytes;
    a->model.device_copies_pageable += b->model.device_copies_pageable;
}

/* One gauge per model, labelled with its name. */
static void per_model(FILE *f, const sl_serve *s, const char *name, const char *help, bool bytes)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    for (size_t i = 0; i < s->n_models; i++) {
        uint64_t dev = 0;
        const char *state = sl__serve_model_state(s, &s->models[i], &dev);
        static const char *const k_states[] = {"disk", "host", "device", "pinned"};
        int level = 0;
        while (level < 4 && strcmp(state, k_states[level])) level++;
        fprintf(f, "%s{model=\"%s\"} %" PRIu64 "\n", name, s->models[i].name,
                bytes ? dev : (uint64_t)level);
    }
}

void sl__serve_metrics(sl_serve *s, sl_serve_reply *r)
{
    sl_serve_counters c;
    sl__serve_pool_counters(s->models[0].pool, &c);
    for (size_t i = 1; i < s->n_models; i++) {
        sl_serve_counters more;
        sl__serve_pool_counters(s->models[i].pool, &more);
        add_counters(&c, &more);
    }
    pthread_mutex_lock(&s->mu);
    const uint64_t http = s->http_requests, http_err = s->http_errors;
    const uint64_t reloads = s->reloads, reloaded = s->reloaded_tensors;
    pthread_mutex_unlock(&s->mu);
    FILE *f = sl__serve_body_open(r);
    if (!f) {
        sl__serve_error(r, 500, "out of memory");
        return;
    }
    metric(f, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
           (double)c.prompt_tokens);
    metric(f, "llamacpp:prompt_seconds_total", "counter", "Prompt process time.", c.prompt_s);
    metric(f, "llamacpp:tokens_predicted_total", "counter",
           "Number of generation tokens processed.", (double)c.predicted_tokens);
    metric(f, "llamacpp:tokens_predicted_seconds_total", "counter",
           "Predict process time (decode evaluations).", c.predicted_s);
    metric(f, "llamacpp:n_decode_total", "counter", "Total number of forward passes (each "
           "evaluates every slot's step that fits: prompts and one-token decodes).",
           (double)c.n_decode);
    metric(f, "llamacpp:n_busy_slots_per_decode", "gauge", "Average number of slots served per "
           "forward pass.", (double)c.busy_slots / (double)(c.n_decode ? c.n_decode : 1));
    metric(f, "llamacpp:prompt_tokens_seconds", "gauge",
           "Average prompt throughput in tokens/s.",
           c.prompt_s > 0 ? (double)c.prompt_tokens / c.prompt_s : 0);
    metric(f, "llamacpp:predicted_tokens_seconds", "gauge",
           "Average generation throughput in tokens/s (decode evaluations).",
           c.predicted_s > 0 ? (double)c.decoded / c.predicted_s : 0);
    metric(f, "llamacpp:requests_processing", "gauge", "Number of requests processing.",
           c.busy);
    metric(f, "llamacpp:requests_deferred", "gauge", "Number of requests waiting for a slot.",
           c.queued);
    metric(f, "sluice_requests_finished_total", "counter", "Generations run to their end.",
           (double)c.requests_done);
    metric(f, "sluice_requests_cancelled_total", "counter",
           "Generations stopped because the client went away.", (double)c.requests_cancelled);
    metric(f, "sluice_requests_failed_total", "counter", "Generations that failed in the engine.",
           (double)c.requests_failed);
    metric(f, "sluice_http_requests_total", "counter", "HTTP requests answered.", (double)http);
    metric(f, "sluice_reloads_total", "counter", "/health reloads that changed the weights.",
           (double)reloads);
    metric(f, "sluice_reloaded_tensors_total", "counter", "Tensors reloaded by /health.",
           (double)reloaded);
    metric(f, "sluice_http_errors_total", "counter", "HTTP requests answered with status >= 400.",
           (double)http_err);
    const sl_model_info *m = &c.model;
    metric(f, "sluice_model_weight_bytes", "gauge", "Bytes of the model's weights.",
           (double)m->weight_bytes);
    metric(f, "sluice_model_device_bytes", "gauge", "Weight bytes resident on the device.",
           (double)m->gpu_bytes);
    metric(f, "sluice_model_host_bytes", "gauge", "Weight bytes in host memory.",
           (double)m->host_bytes);
    metric(f, "sluice_device_copies_pageable_total", "counter",
           "Copies between device and pageable host memory (synchronous on CUDA).",
           (double)m->device_copies_pageable);
    const sl_ctx_stats *e = &c.engine;
    metric(f, "sluice_expert_calls_cpu_total", "counter", "Routed-expert FFNs computed on the "
           "CPU.", (double)e->expert_calls_cpu);
    metric(f, "sluice_expert_calls_device_total", "counter", "Routed-expert FFNs computed on the "
           "device.", (double)e->expert_calls_gpu);
    metric(f, "sluice_expert_fetches_total", "counter", "Experts copied to the device on "
           "demand.", (double)e->expert_fetches);
    metric(f, "sluice_expert_fallbacks_total", "counter", "Fetches whose expert was computed on "
           "the CPU instead.", (double)e->expert_fallbacks);
    metric(f, "sluice_expert_cache_lookups_total", "counter", "Expert cache lookups.",
           (double)e->expert_cache_lookups);
    metric(f, "sluice_expert_cache_hits_total", "counter", "Expert cache hits.",
           (double)e->expert_cache_hits);
    metric(f, "sluice_copies_total", "counter", "Host-to-device copies of the MoE scheduler.",
           (double)e->copies);
    metric(f, "sluice_copy_bytes_total", "counter", "Bytes of those copies.",
           (double)e->copy_bytes);
    metric(f, "sluice_copy_overlap_percent", "gauge", "Share of copy time hidden under compute.",
           e->copy_overlap_pct);
    per_model(f, s, "sluice_model_residency", "Residency of each model: 0 disk, 1 host, "
              "2 device, 3 pinned.", false);
    per_model(f, s, "sluice_model_resident_device_bytes", "Device bytes of each model's weights "
              "when resident.", true);
    if (s->rt) {
        sl_runtime_stats rs;
        sl_runtime_stats_get(s->rt, &rs);
        metric(f, "sluice_runtime_arena_bytes", "gauge", "The models' shared device arena.",
               (double)rs.arena_bytes);
        metric(f, "sluice_runtime_on_demand_budget_bytes", "gauge", "Device bytes for models "
               "that are not pinned.", (double)rs.on_demand_budget);
        metric(f, "sluice_runtime_pinned_bytes", "gauge", "Device bytes of pinned models.",
               (double)rs.pinned_bytes);
        metric(f, "sluice_runtime_loads_total", "counter", "Models loaded to the device.",
               (double)rs.loads);
        metric(f, "sluice_runtime_evictions_total", "counter", "Models evicted from the device.",
               (double)rs.evictions);
        metric(f, "sluice_runtime_compactions_total", "counter", "Arena compactions.",
               (double)rs.compactions);
    }
    sl__serve_body_close(r, f, 200, "text/plain; version=0.0.4; charset=utf-8");
}
