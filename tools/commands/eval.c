/* `tools/run eval`: evaluates raw token ids in one prefill and writes every position's logits.
 *
 * Logits file (--logits-out), a contract other tests rely on (tests/runtime/
 * logits_vs_reference.py): float32 little-endian, row-major [n_tokens][n_vocab], no header —
 * exactly n_tokens * n_vocab * 4 bytes; row t is the prediction after tokens[0..t]. The same
 * row format is used by `perplexity --logits-out`.
 *
 * Token ids are taken as given (no BOS is added); each must be in [0, n_vocab). The context
 * holds exactly the tokens unless -c asks for more; the evaluation is one sl_ctx_eval call with
 * all_logits (split into -b batches inside the engine). KV cache: F16 by default, as llama.cpp,
 * the library (sl_ctx_options_default), generate, serve and Python's Context, so their logits
 * agree bit for bit; -ctk f32 for comparisons with float references. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/model_flags.h"

static const char *const k_cmd = "eval";

static void usage(FILE *f)
{
    fputs("usage: tools/run eval -m FILE --tokens ID,ID,... [--logits-out FILE] [--json]\n"
          "                      [-c N] [-b N] [model and placement flags]\n"
          "\n"
          "Evaluates the token ids (as given: no BOS is added) in one prefill and reports\n"
          "every position's logits.\n"
          "\n"
          "  --tokens LIST          comma-separated token ids, each in [0, n_vocab)\n"
          "  --logits-out FILE      write the logits: float32 little-endian, row-major\n"
          "                         [n_tokens][n_vocab], no header (n_tokens * n_vocab * 4\n"
          "                         bytes); row t predicts the token after position t. Written\n"
          "                         beside FILE and renamed over it at the end (a link is\n"
          "                         followed); never over an input; - : standard output\n"
          "  --json                 one JSON object on stdout: tokens, argmax per position\n"
          "                         and (without --logits-out) the logits as rows\n"
          "  -c, --ctx-size, --ctx N  context size (default: the number of tokens)\n"
          "  -b, --batch-size N     prefill batch (default 512)\n",
          f);
    fprintf(f, SL_CLI_KV_HELP, "f16, as llama.cpp and Python; f32 for reference comparisons");
    fputs("  -h, --help             this text\n"
          "Without --logits-out and --json it prints the argmax of each position.\n",
          f);
    sl_cli_model_flags_help(f);
}

/* Strict "1,17,300": digits and single commas only. */
static int parse_tokens(const char *s, int32_t **out, size_t *n_out)
{
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    int32_t *t = malloc(cap * sizeof *t);
    if (!t) {
        fprintf(stderr, "sluice eval: out of memory\n");
        return 1;
    }
    size_t n = 0;
    const char *p = s;
    for (;;) {
        int64_t v = 0;
        const char *q = p;
        while (*q >= '0' && *q <= '9') {
            v = v * 10 + (*q - '0');
            if (v > INT32_MAX) break;
            q++;
        }
        if (q == p || v > INT32_MAX || (*q && *q != ',')) {
            free(t);
            return sl_cli_usage_error(k_cmd, "--tokens '%s': item %zu is not a token id "
                                      "(comma-separated integers in [0, 2^31))", s, n + 1);
        }
        t[n++] = (int32_t)v;
        if (!*q) break;
        p = q + 1;
    }
    *out = t;
    *n_out = n;
    return 0;
}

/* The greedy pick of row i; -1 (said on stderr) when the row holds NaN / +inf or only -inf:
 * the logits are still worth printing when they are broken. */
static int32_t row_argmax(const float *r, int32_t V, size_t i)
{
    int32_t b;
    sl_error e;
    if (!sl_logits_argmax(r, V, &b, &e)) return b;
    fprintf(stderr, "sluice eval: position %zu: %s\n", i, e.msg);
    return -1;
}

int sl_cli_eval(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    const char *tokens_s = NULL, *out_path = NULL;
    bool json = false, kv_f16 = true; /* F16 KV: the one default */
    int64_t n_ctx = 0, n_batch = 0;
    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (!r) r = sl_cli_kv_flag_parse(&a, &kv_f16);
        if (!r) r = sl_cli_ctx_flags_parse(&a, SL_RANGE_N_CTX.lo, &n_ctx, &n_batch);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--tokens", NULL)) {
            if (!(tokens_s = sl_cli_value(&a))) return 2;
        } else if (sl_cli_is(&a, "--logits-out", NULL)) {
            if (!(out_path = sl_cli_value(&a))) return 2;
            if (!*out_path) return sl_cli_usage_error(k_cmd, "--logits-out: empty file name");
        } else if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (!tokens_s) return sl_cli_usage_error(k_cmd, "--tokens LIST is required");
    int32_t *tok = NULL;
    size_t n_tok = 0;
    if (parse_tokens(tokens_s, &tok, &n_tok)) return 2;
    if (n_ctx && (size_t)n_ctx < n_tok) {
        free(tok);
        return sl_cli_usage_error(k_cmd, "-c %" PRId64 ": smaller than the %zu tokens", n_ctx,
                                  n_tok);
    }

    int rc = 1;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    const float **rows = NULL;
    sl_error err = {0};
    sl_cli_out lo = {0}, trace = {0};
    /* outputs are checked (and their temporaries created) before the model loads */
    if ((out_path || mf.trace) && sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index)) goto done;
    if ((rc = sl_cli_out_prepare(&io, &lo, "--logits-out", out_path,
                                 json ? 0 : SL_CLI_OUT_STREAMS)) ||
        (rc = sl_cli_out_prepare(&io, &trace, "--trace", mf.trace, SL_CLI_OUT_BY_NAME)))
        goto done;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &m))) goto done;
    rc = 1;
    sl_model_info info;
    sl_model_info_get(m, &info);
    for (size_t i = 0; i < n_tok; i++) {
        if (tok[i] >= info.n_vocab) {
            rc = sl_cli_usage_error(k_cmd, "--tokens: id %" PRId32 " (item %zu) is not below "
                                    "n_vocab %" PRId32 " of %s", tok[i], i + 1, info.n_vocab,
                                    mf.path);
            goto done;
        }
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)(n_ctx ? n_ctx : (int64_t)n_tok);
    co.n_batch = (int32_t)n_batch;
    co.all_logits = true;
    co.kv_f16 = kv_f16;
    if ((rc = sl_cli_ctx_create(&mf, k_cmd, m, &co, &c))) goto done;
    rc = 1;
    const double t0 = sl_cli_now_s();
    if (sl_ctx_eval(c, tok, n_tok, &err)) {
        fprintf(stderr, "sluice eval: %s: eval: %s\n", mf.path, err.msg);
        goto done;
    }
    const double dt = sl_cli_now_s() - t0;
    const int32_t V = info.n_vocab;
    /* rows[i]: the engine's row i (the API does not promise they are contiguous) */
    rows = malloc(n_tok * sizeof *rows);
    if (!rows) {
        fprintf(stderr, "sluice eval: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < n_tok; i++) {
        if (!(rows[i] = sl_ctx_logits(c, (int64_t)i))) {
            fprintf(stderr, "sluice eval: %s: the engine kept no logits for position %zu\n",
                    mf.path, i);
            goto done;
        }
    }
    if (out_path) {
        const char *name = lo.f == stdout ? "standard output" : out_path;
        for (size_t i = 0; i < n_tok; i++)
            if (sl_cli_logits_write(lo.f, k_cmd, name, rows[i], 1, V)) goto done;
        if (sl_cli_out_commit(&io, &lo)) goto done;
    }
    if (json) {
        printf("{\"model\":");
        sl_json_cstr(stdout, mf.path);
        printf(",\"n_vocab\":%" PRId32 ",\"n_tokens\":%zu,\"tokens\":[", V, n_tok);
        for (size_t i = 0; i < n_tok; i++) printf("%s%" PRId32, i ? "," : "", tok[i]);
        printf("],\"argmax\":[");
        for (size_t i = 0; i < n_tok; i++)
            printf("%s%" PRId32, i ? "," : "", row_argmax(rows[i], V, i));
        printf("],\"prefill_tps\":");
        sl_json_f64(stdout, dt > 0 ? (double)n_tok / dt : 0.0);
        if (out_path) {
            printf(",\"logits_out\":");
            sl_json_cstr(stdout, out_path);
        } else {
            printf(",\"logits\":[");
            for (size_t i = 0; i < n_tok; i++) {
                printf("%s[", i ? "," : "");
                for (int32_t v = 0; v < V; v++) {
                    if (v) putchar(',');
                    sl_json_f32(stdout, rows[i][v]);
                }
                putchar(']');
            }
            putchar(']');
        }
        printf("}\n");
    } else if (!out_path) {
        printf("%-6s %-8s %-8s %s\n", "pos", "token", "argmax", "logit");
        for (size_t i = 0; i < n_tok; i++) {
            const float *r = rows[i];
            const int32_t b = row_argmax(r, V, i);
            printf("%-6zu %-8" PRId32 " %-8" PRId32 " %.6g\n", i, tok[i], b,
                   b < 0 ? (double)NAN : (double)r[b]);
        }
    }
    if (!json)
        fprintf(stderr, "eval: %zu tokens x %" PRId32 " logits in %.3f s (%.1f tok/s)%s%s\n",
                n_tok, V, dt, dt > 0 ? (double)n_tok / dt : 0.0, out_path ? " -> " : "",
                out_path ? out_path : "");
    if (sl_cli_trace_finish(&mf, k_cmd, c, sl_cli_out_name(&trace)) ||
        sl_cli_out_commit(&io, &trace))
        goto done;
    rc = sl_cli_stdout_check(k_cmd);
done:
    sl_cli_out_discard(&lo);
    sl_cli_out_discard(&trace);
    sl_cli_io_free(&io);
    free(rows);
    sl_ctx_destroy(c);
    sl_model_close(m);
    free(tok);
    return rc;
}
