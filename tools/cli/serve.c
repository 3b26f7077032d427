/* `tools/run serve`: an HTTP server with llama-server's endpoints (serve_impl.h lists the
 * files). This file holds the flags and the lifecycle: open the model, pick the chat template,
 * start the slots and the HTTP daemon, wait for SIGINT/SIGTERM, then stop in the order that
 * lets every in-flight request end (jobs cancelled, workers joined, connections drained) before
 * anything is freed. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "tools/cli/cli.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/perplexity_swap.h"
#include "tools/cli/serve_impl.h"

static const char *const k_cmd = "serve";

static void usage(FILE *f)
{
    fputs("usage: tools/run serve -m FILE [--host H] [--port N] [-np N] [-c N] [flags]\n"
          "\n"
          "Serves the model over HTTP with llama-server's endpoints until SIGINT or SIGTERM:\n"
          "  GET  /health                {\"status\":\"ok\"}; with --hotswap it first reloads\n"
          "                              the tensors whose files changed and reports them\n"
          "  POST /completion            llama-server's completion: prompt (text or token ids),\n"
          "                              n_predict, temperature, top_k, top_p, min_p, seed,\n"
          "                              stop, ignore_eos, stream -> content, stop_type,\n"
          "                              tokens_predicted, tokens_evaluated, timings, ...\n"
          "  POST /v1/completions        OpenAI text completion (max_tokens, ...)\n"
          "  POST /v1/chat/completions   OpenAI chat, prompt from the model's chat template\n"
          "  GET  /v1/models, /props     the model and the server's defaults\n"
          "  GET  /metrics               Prometheus text: tokens, tok/s, requests, weight bytes\n"
          "                              per side, expert calls, fetches, cache hits, copies\n"
          "\"stream\": true answers with server-sent events (data: {json}); the OpenAI endpoints\n"
          "end them with data: [DONE]. Errors are {\"error\":{\"code\",\"message\",\"type\"}}.\n"
          "Request ranges are those of generate's flags; seed -1 is a random seed.\n"
          "\n"
          "  --host H               address to listen on (default 127.0.0.1)\n"
          "  --port N               port, 0 = any free one (default 8080); the address is\n"
          "                         printed to stderr once listening\n"
          "  -np, --parallel N      slots: requests served at once, each with its own context\n"
          "                         and KV cache (default 1; others wait in a queue)\n"
          "  -c, --ctx-size N       context size of each slot (default: min(training context,\n"
          "                         4096)); a longer prompt is a 400\n"
          "  -b, --batch-size N     prefill batch (default 512)\n"
          "  -n, --n-predict N      default n_predict of requests (default -1: until EOS or the\n"
          "                         context is full)\n"
          "  --temp, --top-k, --top-p, --min-p, --seed\n"
          "                         default sampling of requests (as generate: 0.8, 40, 0.95,\n"
          "                         0.05, 0)\n"
          "  -a, --alias NAME       the model's id in the API (default: the model path)\n"
          "  --chat-template NAME   chat template family instead of the model's own: chatml,\n"
          "                         llama2, llama2-sys, llama3, llama4, gemma, mistral-v1,\n"
          "                         mistral-v3, mistral-v7, phi3, phi4, zephyr, deepseek3, ...\n"
          "                         (default: detected from tokenizer.chat_template; chatml\n"
          "                         with a warning when absent or not recognised)\n"
          "  --hotswap              live tensor swap: every GET /health calls sl_reload_changed\n"
          "                         between the slots' steps (also SLUICE_HOTSWAP_ENABLED=1 or\n"
          "                         LLAMA_HOTSWAP_ENABLED=1, as ik_llama.cpp's server)\n"
          "  --max-body-bytes N     largest request body (default 1048576); larger: 413\n"
          "  --max-connections N    connections at once (default 64)\n"
          "  --timeout N            seconds an idle connection is kept (default 600)\n"
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
            : *out == SL_CHAT_UNSUPPORTED ? "the model's chat template is of a family Sluice "
                                            "does not format"
                                          : "the model's chat template is not recognised");
    *out = SL_CHAT_CHATML;
    return 0;
}

int sl_cli_serve(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    sl_sampler_options so = sl_sampler_options_default();
    const char *host = "127.0.0.1", *alias = NULL, *chat_flag = NULL;
    int64_t port = 8080, parallel = 1, n_ctx = 0, n_batch = 0, n_predict = -1;
    int64_t max_conn = 64, timeout = 600, i64;
    uint64_t max_body = 1 << 20;
    bool kv_f16 = true, hotswap = false;
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (!r) r = sl_cli_kv_flag_parse(&a, &kv_f16);
        if (!r) r = sl_cli_sampling_flags_parse(&a, &so);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        }
        if (sl_cli_is(&a, "--hotswap", NULL)) {
            hotswap = true;
            continue;
        }
        static const char *const k_value_flags[] = {
            "--host", "--port", "-np", "--parallel", "-c", "--ctx-size", "-b", "--batch-size",
            "-n", "--n-predict", "-a", "--alias", "--chat-template", "--max-body-bytes",
            "--max-connections", "--timeout"};
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
        } else if (sl_cli_is(&a, "-c", "--ctx-size")) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, SL_RANGE_N_CTX.lo, SL_RANGE_N_CTX.hi, &n_ctx))
                return 2;
        } else if (sl_cli_is(&a, "-b", "--batch-size")) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, SL_RANGE_N_BATCH.lo, SL_RANGE_N_BATCH.hi,
                                 &n_batch))
                return 2;
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
        } else if (sl_cli_is(&a, "--timeout", NULL)) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, 1, 86400, &timeout)) return 2;
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (mf.trace) return sl_cli_usage_error(k_cmd, "--trace is not supported by serve");
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

    int rc;
    sl_serve s = {.model_path = mf.path, .max_body_bytes = (size_t)max_body, .so_default = so,
                  .n_predict_default = (int32_t)n_predict, .started = (int64_t)time(NULL),
                  .hotswap = hotswap || env_swap};
    pthread_mutex_init(&s.mu, NULL);
    char *chat_source = NULL;
    sl_serve_http *http = NULL;
    sl_error err = {0};
    if ((rc = pick_chat_template(chat_flag, mf.path, &s.chat, &chat_source))) goto done;
    s.chat_source = chat_source;
    s.alias = alias ? alias : mf.path;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &s.model))) goto done;
    rc = 1;
    sl_model_info_get(s.model, &s.info);
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)n_ctx;
    co.n_batch = (int32_t)n_batch;
    co.kv_f16 = kv_f16;
    sl_cli_ctx_sched(&mf, &co);
    /* contexts on a device share the model's stream and arena: evaluate one at a time there */
    const bool eval_serial = s.info.gpu_bytes > 0;
    if (sl__serve_pool_create(s.model, &co, (int)parallel, eval_serial, &s.pool, &err)) {
        fprintf(stderr, "sluice serve: %s: context: %s\n", mf.path, err.msg);
        goto done;
    }
    int bound = 0;
    if (sl__serve_http_start(&s, host, (int)port, (int)max_conn, (int)timeout, &http, &bound,
                             &err)) {
        fprintf(stderr, "sluice serve: %s\n", err.msg);
        goto done;
    }
    fprintf(stderr, "sluice serve: listening on http://%s%s%s:%d (%d slot%s, context %" PRId32
            " each, chat template %s)\n", strchr(host, ':') ? "[" : "", host,
            strchr(host, ':') ? "]" : "", bound, (int)parallel, parallel > 1 ? "s" : "",
            sl__serve_pool_n_ctx(s.pool), sl_chat_name(s.chat));
    int sig = 0;
    while (sigwait(&stop_set, &sig)) continue;
    fprintf(stderr, "sluice serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    /* jobs end first (their connections then finish), then the connections, then the rest */
    if (s.pool) sl__serve_pool_stop(s.pool);
    sl__serve_http_stop(http);
    sl__serve_pool_destroy(s.pool);
    sl_model_close(s.model);
    free(chat_source);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
