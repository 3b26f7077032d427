/* `tools/run serve`: an HTTP server with llama-server's endpoints (serve_impl.h lists the
 * files). This file holds the flags and the lifecycle: open the models, pick their chat
 * templates, start the slots and the HTTP daemon, wait for SIGINT/SIGTERM, then stop in the
 * order that lets every in-flight request end (jobs cancelled, workers joined, connections
 * drained) before anything is freed.
 *
 * Models: one `-m FILE` is served as before, opened on its own (every placement, hot-cold
 * included). Several models (`--model NAME=PATH` ...), or any NAME=PATH, --pin or --residency,
 * open into one sl_runtime: one device arena of --vram-budget bytes and one host floor shared
 * by all, models moved on and off the device by the runtime (serve_models.c). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gguf/gguf.h"
#include "tools/common/cli.h"
#include "tools/common/model_flags.h"
#include "tools/commands/perplexity_swap.h"
#include "tools/serve/serve_impl.h"

static const char *const k_cmd = "serve";

static void usage(FILE *f)
{
    fputs("usage: tools/run serve -m FILE [--host H] [--port N] [-np N] [-c N] [flags]\n"
          "       tools/run serve --model NAME=PATH [--model NAME2=PATH2 ...] [--pin NAME]...\n"
          "                       [--vram-budget SIZE] [--residency self|external] [flags]\n"
          "\n"
          "Serves the models over HTTP with llama-server's endpoints until SIGINT or SIGTERM:\n"
          "  GET  /health                {\"status\":\"ok\"}; with --hotswap it first reloads\n"
          "                              the tensors whose files changed and reports them\n"
          "                              (a file it cannot apply whole: in \"errors\")\n"
          "  POST /completion            llama-server's completion: prompt (text or token ids),\n"
          "                              n_predict, temperature, top_k, top_p, min_p, seed,\n"
          "                              stop, ignore_eos, stream -> content, stop_type,\n"
          "                              tokens_predicted, tokens_evaluated, timings, ...\n"
          "  POST /v1/completions        OpenAI text completion (max_tokens, ...)\n"
          "  POST /v1/chat/completions   OpenAI chat, prompt from the model's chat template\n"
          "  GET  /v1/models, /props     the model and the server's defaults\n"
          "  GET  /metrics               Prometheus text: tokens, tok/s, requests, weight bytes\n"
          "                              per side, expert calls, fetches, cache hits, copies,\n"
          "                              each model's residency\n"
          "  POST /infill                fill-in-the-middle: input_prefix, input_suffix,\n"
          "                              input_extra, prompt, with the model's FIM tokens\n"
          "  POST /embedding, /v1/embeddings   pooled hidden states (--embedding)\n"
          "  POST /slots/ID?action=save|restore|erase   a slot's cache (--slot-save-path)\n"
          "A \"prompt\" array of several prompts gives one result each; \"id_slot\" picks the\n"
          "slot (-1: any).\n"
          "  POST /models/pin, /models/unpin, /models/load, /models/unload {\"model\":NAME}\n"
          "  POST /models/compact {\"reload\":[NAME,...]}   residency by hand (with a runtime)\n"
          "A request runs on the model its \"model\" names (required with several; unknown:\n"
          "404). Several models share one device arena (a runtime): a request loads its model,\n"
          "evicting the least recently used unpinned ones that no request is running on\n"
          "(--residency self), or, externally managed, is a 409 while its model is not loaded.\n"
          "\"stream\": true answers with server-sent events (data: {json}); the OpenAI endpoints\n"
          "end them with data: [DONE]. Errors are {\"error\":{\"code\",\"message\",\"type\"}}.\n"
          "Request ranges are those of generate's flags; seed -1 is a random seed.\n"
          "\n"
          "  --host H               address to listen on (default 127.0.0.1)\n"
          "  --port N               port, 0 = any free one (default 8080); the address is\n"
          "                         printed to stderr once listening\n"
          "  -np, --parallel N      slots: requests served at once, each with its own context\n"
          "                         and KV cache, their steps batched into one forward pass\n"
          "                         (default 1; others wait in a queue)\n"
          "  -c, --ctx-size N       context size of each slot (default: min(training context,\n"
          "                         4096)); a longer prompt is a 400\n"
          "  -b, --batch-size N     prefill batch (default 512)\n"
          "  -n, --n-predict N      default n_predict of requests (default -1: until EOS or the\n"
          "                         context is full)\n"
          "  --temp, --top-k, --top-p, --min-p, --seed\n"
          "                         default sampling of requests (as generate: 0.8, 40, 0.95,\n"
          "                         0.05, 0)\n"
          "  -m, --model FILE       one model, its id the path (or --alias)\n"
          "  --model NAME=PATH      a model and its id (letters, digits, . _ : -); repeat for\n"
          "                         several, all opened into one runtime (a path holding '='\n"
          "                         before any '/' is written ./PATH)\n"
          "  --pin NAME             keep model NAME on the device, never evicted (repeatable)\n"
          "  --residency MODE       self (default): requests load their models, evicting the\n"
          "                         least recently used; external: only POST /models/load does\n"
          "  --vram-budget SIZE     with a runtime: its device arena (default 90% of the free\n"
          "                         device memory); pinned models above its weight share are\n"
          "                         an over-commit (warned: every other model then loads alone)\n"
          "  -a, --alias NAME       the model's id in the API (default: the model path)\n"
          "  --chat-template NAME   chat template family instead of the model's own (llama.cpp's\n"
          "                         names): chatml, llama2, llama3, llama4, gemma, mistral-v7,\n"
          "                         phi4, deepseek3, gpt-oss, kimi-k2, granite-4.0, exaone4, ...\n"
          "                         (default: detected from tokenizer.chat_template; chatml\n"
          "                         with a warning when absent or not recognised)\n"
          "  --hotswap              live tensor swap: every GET /health calls sl_reload_changed\n"
          "                         on every model between the slots' steps (a runtime's model:\n"
          "                         its host floor too) (also SLUICE_HOTSWAP_ENABLED=1 or\n"
          "                         LLAMA_HOTSWAP_ENABLED=1, as ik_llama.cpp's server)\n"
          "  --max-body-bytes N     largest request body (default 1048576); larger: 413\n"
          "  --max-connections N    connections at once (default 64); past it the connection\n"
          "                         idle the longest (or sending a body the longest) is\n"
          "                         closed (none: a 503)\n"
          "  --timeout N            seconds an idle connection is kept, and the most a request\n"
          "                         body may take to arrive (default 30)\n"
"  --embedding, --embeddings  serve POST /embedding and /v1/embeddings: the final hidden\n"
          "                         state pooled (contexts keep it: a little more work per eval)\n"
          "  --pooling TYPE         none, mean, cls or last (default: the file's\n"
          "                         <arch>.pooling_type, else none; /v1/embeddings refuses none)\n"
          "  --slot-save-path DIR   enable POST /slots/{id}?action=save|restore|erase\n"
          "                         {\"filename\": NAME}: slot prompt caches as files in DIR\n"
          "  --api-key KEY          require \"Authorization: Bearer KEY\" (or X-Api-Key) on every\n"
          "                         endpoint but /health and /models: else a 401 (also the\n"
          "                         LLAMA_API_KEY environment variable)\n"
          "  -h, --help             this text\n",
          f);
    fprintf(f, SL_CLI_KV_HELP, "f16");
    sl_cli_model_flags_help(f);
}

/* The chat template family: --chat-template, else the model's own, else chatml. *source gets
 * the model's template text (malloc'd) or NULL. 2 after a usage error. */
static int pick_chat_template(const char *flag, const char *path, sl_chat_tmpl *out,
                              char **source)
{
    *source = NULL;
    if (flag) {
        *out = sl_chat_detect(flag);
        if (*out < SL_CHAT_CHATML)
            return sl_cli_usage_error(k_cmd, "--chat-template '%.40s': not a template family "
                                      "Sluice formats (see --help)", flag);
        return 0;
    }
    sl_gguf *g = NULL;
    sl_error err = {0};
    const char *tmpl = NULL;
    if (!sl_gguf_open(path, NULL, &g, &err) &&
        !sl_gguf_get_str(g, "tokenizer.chat_template", &tmpl, NULL) && tmpl)
        *source = strdup(tmpl);
    sl_gguf_close(g);
    *out = sl_chat_detect(*source);
    if (*out >= SL_CHAT_CHATML) return 0;
    /* llama-server's choice: a template it cannot apply falls back to chatml, with a warning */
    fprintf(stderr, "sluice serve: warning: %s; using chatml for chat requests "
            "(--chat-template NAME to choose)\n",
            !*source ? "the model has no tokenizer.chat_template"
                     : "the model's chat template is not recognised");
    *out = SL_CHAT_CHATML;
    return 0;
}

enum { MAX_MODELS = 32, MAX_NAME = 64 };

/* One --model / -m value: NAME=PATH (named) or a PATH. */
typedef struct model_spec {
    char name[MAX_NAME + 1];
    const char *path;
    bool named;
} model_spec;

/* Splits a -m value; 2 after a usage error. A '=' before any '/' makes it NAME=PATH. */
static int parse_model_spec(const char *flag, const char *v, model_spec *out)
{
    const char *eq = strchr(v, '='), *slash = strchr(v, '/');
    *out = (model_spec){.path = v};
    if (!*v) return sl_cli_usage_error(k_cmd, "%s: empty file name", flag);
    if (!eq || (slash && slash < eq)) return 0;
    const size_t n = (size_t)(eq - v);
    if (!n) return sl_cli_usage_error(k_cmd, "%s '%s': empty NAME (NAME=PATH)", flag, v);
    if (!eq[1]) return sl_cli_usage_error(k_cmd, "%s '%s': empty PATH (NAME=PATH)", flag, v);
    if (n > MAX_NAME || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789._:-") < n)
        return sl_cli_usage_error(k_cmd, "%s '%s': a NAME holds 1 to %d letters, digits, '.', "
                                  "'_', ':' or '-'", flag, v, MAX_NAME);
    memcpy(out->name, v, n);
    out->name[n] = 0;
    out->path = eq + 1;
    out->named = true;
    return 0;
}

/* The runtime's notices (a model larger than the on-demand budget) go to stderr. */
static void print_notice(void *user, const char *msg)
{
    (void)user;
    fprintf(stderr, "sluice serve: %s\n", msg);
}

/* The runtime for specs (its arena --vram-budget, scratch for every slot's context of every
 * model), the models opened into it and the --pin ones pinned. 0, or the exit status. */
static int open_runtime(sl_serve *s, sl_cli_model_flags *mf, int64_t parallel, bool external,
                        const char *const *pins, size_t n_pins, sl_model **opened)
{
    sl_error err = {0};
    sl_runtime_options ro = sl_runtime_options_default();
    ro.device = mf->opt.device;
    ro.arena_bytes = mf->opt.vram_budget;
    ro.mode = external ? SL_RESIDENCY_EXTERNAL : SL_RESIDENCY_SELF;
    ro.notice = print_notice;
    /* each slot of each model keeps its context (KV cache, buffers) in the arena */
    for (size_t i = 0; i < s->n_models; i++) {
        sl_footprint fp;
        if (sl_model_footprint(s->models[i].path, &mf->opt, &fp, &err)) {
            /* engine messages usually name the file already */
            fprintf(stderr, "sluice %s: %s%s%s\n", k_cmd,
                    strstr(err.msg, s->models[i].path) ? "" : s->models[i].path,
                    strstr(err.msg, s->models[i].path) ? "" : ": ", err.msg);
            return 1;
        }
        ro.max_scratch_bytes += fp.scratch_bytes * (uint64_t)parallel;
    }
    mf->opt.vram_budget = 0; /* a model's placement may use the whole arena */
    if (sl_runtime_create(&ro, &s->rt, &err)) {
        fprintf(stderr, "sluice %s: runtime (--vram-budget, --device): %s\n", k_cmd, err.msg);
        return 1;
    }
    for (size_t i = 0; i < s->n_models; i++) {
        sl_serve_model *sm = &s->models[i];
        if (sl_cli_model_open_in(mf, k_cmd, s->rt, sm->path, &opened[i])) return 1;
        sm->model = opened[i];
    }
    for (size_t k = 0; k < n_pins; k++) {
        sl_serve_model *sm = sl__serve_model_find(s, pins[k], strlen(pins[k]));
        if (sl_runtime_set_residency(s->rt, sm->model, SL_RESIDENCY_PINNED, &err)) {
            fprintf(stderr, "sluice %s: --pin %s: %s\n", k_cmd, sm->name, err.msg);
            return 1;
        }
    }
    sl_runtime_stats rs;
    sl_runtime_stats_get(s->rt, &rs);
    /* a pin of a model that auto placement had to shrink into the arena cannot serve: its
     * slots' scratch then finds no room and every request fails; refused here with what fits
     * (a placement the user chose, -ot or --n-cpu-moe, may leave host bytes on purpose) */
    const bool auto_place = mf->opt.placement == SL_PLACE_AUTO && !mf->opt.override_tensor &&
                            !mf->opt.cpu_moe && mf->opt.n_cpu_moe <= 0;
    for (size_t k = 0; k < n_pins && auto_place; k++) {
        const sl_serve_model *sm = sl__serve_model_find(s, pins[k], strlen(pins[k]));
        sl_model_info mi;
        sl_model_info_get(sm->model, &mi);
        if (!mi.host_bytes) continue;
        fprintf(stderr, "sluice %s: --pin %s: the model does not fit on the device in full: "
                "%" PRIu64 " of its %" PRIu64 " weight bytes would stay in host memory. The "
                "budget: arena %" PRIu64 " (--vram-budget), scratch ceiling %" PRIu64 ", weight "
                "pool %" PRIu64 " after the scratch of %" PRId64 " slot(s) per model, pinned %"
                PRIu64 ": raise --vram-budget or do not pin it\n", k_cmd, sm->name,
                mi.host_bytes, mi.weight_bytes, rs.arena_bytes, rs.scratch_ceiling,
                rs.weight_pool, parallel, rs.pinned_bytes);
        return 1;
    }
    /* the budget solver reports an over-commit rather than refusing it: so does serve */
    if (rs.over_commit)
        fprintf(stderr, "sluice %s: warning: the pinned models take %" PRIu64 " device bytes, "
                "more than the weight pool of %" PRIu64 " (arena %" PRIu64 ", --vram-budget): "
                "every other model loads alone, after evicting the unpinned ones\n", k_cmd,
                rs.pinned_bytes, rs.weight_pool, rs.arena_bytes);
    return 0;
}

int sl_cli_serve(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    a.models_repeat = true;
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    sl_sampler_options so = sl_sampler_options_default();
    const char *host = "127.0.0.1", *alias = NULL, *chat_flag = NULL;
    const char *api_key = getenv("LLAMA_API_KEY");
    int64_t port = 8080, parallel = 1, n_ctx = 0, n_batch = 0, n_predict = -1;
    int64_t max_conn = 64, timeout = 30, i64;
    uint64_t max_body = 1 << 20;
    bool kv_f16 = true, hotswap = false, external = false, residency_given = false;
    bool embedding = false;
    int pooling = -1; /* the model's */
    const char *slot_save_path = NULL;
    model_spec specs[MAX_MODELS];
    size_t n_specs = 0, n_pins = 0;
    const char *pins[MAX_MODELS];
    while (sl_cli_args_next(&a)) {
        if (sl_cli_is(&a, "-m", "--model")) {
            const char *v = sl_cli_value(&a);
            if (!v) return 2;
            if (n_specs == MAX_MODELS)
                return sl_cli_usage_error(k_cmd, "%s: more than %d models", a.flag, MAX_MODELS);
            if (parse_model_spec(a.flag, v, &specs[n_specs])) return 2;
            n_specs++;
            continue;
        }
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (!r) r = sl_cli_kv_flag_parse(&a, &kv_f16);
        if (!r) r = sl_cli_sampling_flags_parse(&a, &so);
        if (!r) r = sl_cli_ctx_flags_parse(&a, SL_RANGE_N_CTX.lo, &n_ctx, &n_batch);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        }
        if (sl_cli_is(&a, "--hotswap", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            hotswap = true;
            continue;
        }
        if (sl_cli_is(&a, "--embedding", "--embeddings")) {
            if (sl_cli_no_value(&a)) return 2;
            embedding = true;
            continue;
        }
        static const char *const k_value_flags[] = {
            "--host", "--port", "-np", "--parallel", "-n", "--n-predict", "-a", "--alias",
            "--chat-template", "--max-body-bytes", "--max-connections", "--timeout", "--pin",
            "--residency", "--api-key", "--pooling", "--slot-save-path"};
        size_t k = 0;
        while (k < sizeof k_value_flags / sizeof *k_value_flags && strcmp(a.flag, k_value_flags[k]))
            k++;
        if (k == sizeof k_value_flags / sizeof *k_value_flags) return sl_cli_unknown(&a);
        const char *v = sl_cli_value(&a);
        if (!v) return 2;
        if (sl_cli_is(&a, "--host", NULL)) {
            if (!*v) return sl_cli_usage_error(k_cmd, "--host: empty address");
            host = v;
        } else if (sl_cli_is(&a, "--port", NULL)) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 0, 65535, &port)) return 2;
        } else if (sl_cli_is(&a, "-np", "--parallel")) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 1, 256, &parallel)) return 2;
        } else if (sl_cli_is(&a, "-n", "--n-predict")) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, -1, INT32_MAX, &n_predict)) return 2;
        } else if (sl_cli_is(&a, "-a", "--alias")) {
            if (!*v) return sl_cli_usage_error(k_cmd, "%s: empty name", a.flag);
            alias = v;
        } else if (sl_cli_is(&a, "--chat-template", NULL)) {
            chat_flag = v;
        } else if (sl_cli_is(&a, "--max-body-bytes", NULL)) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 1, 1 << 30, &i64)) return 2;
            max_body = (uint64_t)i64;
        } else if (sl_cli_is(&a, "--max-connections", NULL)) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 1, 4096, &max_conn)) return 2;
        } else if (sl_cli_is(&a, "--api-key", NULL)) {
            if (!*v) return sl_cli_usage_error(k_cmd, "--api-key: empty key");
            api_key = v;
        } else if (sl_cli_is(&a, "--timeout", NULL)) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 1, 86400, &timeout)) return 2;
        } else if (sl_cli_is(&a, "--pin", NULL)) {
            for (size_t p = 0; p < n_pins; p++)
                if (!strcmp(pins[p], v))
                    return sl_cli_usage_error(k_cmd, "--pin '%s' given twice", v);
            if (n_pins == MAX_MODELS)
                return sl_cli_usage_error(k_cmd, "--pin: more than %d models", MAX_MODELS);
            pins[n_pins++] = v;
        } else if (sl_cli_is(&a, "--pooling", NULL)) {
            static const char *const k_pool[] = {"none", "mean", "cls", "last"};
            pooling = 0;
            while (pooling < 4 && strcmp(v, k_pool[pooling])) pooling++;
            if (pooling == 4)
                return sl_cli_usage_error(k_cmd, "--pooling '%s': unknown (none, mean, cls, "
                                          "last; rank is not implemented)", v);
        } else if (sl_cli_is(&a, "--slot-save-path", NULL)) {
            struct stat sb;
            if (!*v || stat(v, &sb) || !S_ISDIR(sb.st_mode))
                return sl_cli_usage_error(k_cmd, "--slot-save-path '%s': not a directory", v);
            slot_save_path = v;
        } else if (sl_cli_is(&a, "--residency", NULL)) {
            if (strcmp(v, "self") && strcmp(v, "external"))
                return sl_cli_usage_error(k_cmd, "--residency '%s': unknown (self, external)", v);
            external = !strcmp(v, "external");
            residency_given = true;
        }
    }
    if (a.status) return a.status;
    if (!n_specs) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (mf.trace) return sl_cli_usage_error(k_cmd, "--trace is not supported by serve");
    bool any_named = false;
    for (size_t i = 0; i < n_specs; i++) {
        any_named |= specs[i].named;
        if (n_specs > 1 && !specs[i].named)
            return sl_cli_usage_error(k_cmd, "--model '%s': with several models each one is "
                                      "NAME=PATH", specs[i].path);
        for (size_t j = 0; j < i; j++)
            if (specs[i].named && !strcmp(specs[i].name, specs[j].name))
                return sl_cli_usage_error(k_cmd, "--model: NAME '%s' given twice",
                                          specs[i].name);
    }
    if (alias && any_named)
        return sl_cli_usage_error(k_cmd, "--alias '%s': the id of a --model NAME=PATH is its "
                                  "NAME", alias);
    const char *only_name = alias ? alias : specs[0].path; /* a single -m FILE */
    for (size_t p = 0; p < n_pins; p++) {
        size_t i = 0;
        while (i < n_specs && strcmp(specs[i].named ? specs[i].name : only_name, pins[p])) i++;
        if (i == n_specs)
            return sl_cli_usage_error(k_cmd, "--pin '%s': no --model of that NAME", pins[p]);
    }
    const bool use_runtime = n_specs > 1 || any_named || n_pins || residency_given;
    bool env_swap = false;
    if (sl_cli_hotswap_env(k_cmd, &env_swap)) return 2;

    /* SIGINT/SIGTERM are taken by sigwait below, SIGPIPE (a client gone mid-write) by nobody:
     * blocked here, before any thread exists, so that every thread inherits the mask */
    sigset_t stop_set, mask;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    mask = stop_set;
    sigaddset(&mask, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);

    int rc = 1;
    sl_serve_model models[MAX_MODELS];
    sl_model *opened[MAX_MODELS] = {0};
    memset(models, 0, sizeof models);
    sl_serve s = {.models = models, .n_models = n_specs, .external = external,
                  .max_body_bytes = (size_t)max_body, .so_default = so,
                  .n_predict_default = (int32_t)n_predict, .started = (int64_t)time(NULL),
                  .hotswap = hotswap || env_swap, .embedding = embedding,
                  .embd_normalize = 2, .n_batch = (int32_t)n_batch,
                  .slot_save_path = slot_save_path,
                  .api_key = api_key && *api_key ? api_key : NULL};
    pthread_mutex_init(&s.mu, NULL);
    pthread_mutex_init(&s.res_mu, NULL);
    pthread_cond_init(&s.res_cv, NULL);
    pthread_mutex_init(&s.eval_mu, NULL);
    pthread_mutex_init(&s.file_mu, NULL);
    sl_serve_http *http = NULL;
    sl_error err = {0};
    for (size_t i = 0; i < n_specs; i++) {
        models[i].path = specs[i].path;
        models[i].name = specs[i].named ? specs[i].name : only_name;
        if ((rc = pick_chat_template(chat_flag, specs[i].path, &models[i].chat,
                                     &models[i].chat_source)))
            goto done;
    }
    if (use_runtime) {
        if (n_ctx && !mf.opt.budget_ctx) mf.opt.budget_ctx = (int)n_ctx;
        if ((rc = open_runtime(&s, &mf, parallel, external, pins, n_pins, opened))) goto done;
    } else if ((rc = sl_cli_model_open_in(&mf, k_cmd, NULL, specs[0].path, &opened[0]))) {
        goto done;
    }
    rc = 1;
    bool on_device = false;
    for (size_t i = 0; i < n_specs; i++) {
        models[i].model = opened[i];
        sl_model_info_get(opened[i], &models[i].info);
        models[i].pooling = (sl_serve_pooling)pooling;
        if (sl__serve_model_vocab_meta(&models[i], &err)) {
            fprintf(stderr, "sluice serve: %s\n", err.msg);
            goto done;
        }
        sl_runtime_model_info mi = {.device_bytes = models[i].info.gpu_bytes};
        if (s.rt) sl_runtime_model_info_get(s.rt, opened[i], &mi, NULL);
        on_device |= mi.device_bytes > 0;
    }
    if (sl__serve_validate(&s, &err)) {
        fprintf(stderr, "sluice serve: %s\n", err.msg);
        goto done;
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)n_ctx;
    co.n_batch = (int32_t)n_batch;
    co.kv_f16 = kv_f16;
    co.embeddings = embedding; /* the hidden states the embeddings endpoints pool */
    sl_cli_ctx_sched(&mf, &co);
    /* contexts on a device share its streams and arena: evaluate one at a time there */
    for (size_t i = 0; i < n_specs; i++)
        if (sl__serve_pool_create(&s, &models[i], &co, (int)parallel,
                                  on_device ? &s.eval_mu : NULL, &models[i].pool, &err)) {
            fprintf(stderr, "sluice serve: %s: context: %s\n", models[i].path, err.msg);
            goto done;
        }
    int bound = 0;
    if (sl__serve_http_start(&s, host, (int)port, (int)max_conn, (int)timeout, &http, &bound,
                             &err)) {
        fprintf(stderr, "sluice serve: %s\n", err.msg);
        goto done;
    }
    fprintf(stderr, "sluice serve: listening on http://%s%s%s:%d (%zu model%s%s, %d slot%s "
            "each, context %" PRId32 ", chat template %s)\n", strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", bound, n_specs, n_specs > 1 ? "s" : "",
            !s.rt ? "" : external ? " in a runtime, residency external"
                                  : " in a runtime, residency self",
            (int)parallel, parallel > 1 ? "s" : "", sl__serve_pool_n_ctx(models[0].pool),
            sl_chat_name(models[0].chat));
    int sig = 0;
    while (sigwait(&stop_set, &sig)) continue;
    fprintf(stderr, "sluice serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    /* jobs end first (their connections then finish), then the connections, then the rest */
    for (size_t i = 0; i < n_specs; i++)
        if (models[i].pool) sl__serve_pool_stop(models[i].pool);
    sl__serve_http_stop(http);
    for (size_t i = 0; i < n_specs; i++) {
        sl__serve_pool_destroy(models[i].pool);
        sl_model_close(opened[i]);
        free(models[i].chat_source);
    }
    sl_runtime_destroy(s.rt, NULL);
    pthread_mutex_destroy(&s.eval_mu);
    pthread_mutex_destroy(&s.file_mu);
    pthread_cond_destroy(&s.res_cv);
    pthread_mutex_destroy(&s.res_mu);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
