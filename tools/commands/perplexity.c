/* `tools/run perplexity`: llama.cpp's perplexity and KL-divergence measurement.
 *
 * Method (llama.cpp tools/perplexity, perplexity()): the whole file is tokenized once (BOS as
 * the model's tokenizer adds it); chunk i is tokens [i*C, (i+1)*C) for C = --ctx, evaluated
 * from an empty KV cache, with its first token replaced by BOS when the model adds BOS. Only
 * the second half is scored: with first = C/2, logits row k (k = first .. C-2) predicts token
 * k+1, so each chunk scores C-1-first positions. llama.cpp asks for at least 2*C tokens, and so
 * do we. Per position nll = -log softmax(row)[target]; running PPL = exp(mean nll) is printed
 * after each chunk as "[i]PPL," and at the end
 *     Final estimate: PPL = exp(mean) +/- PPL * sqrt((mean(nll^2) - mean^2) / (N - 1))
 * (the standard error, propagated to PPL as llama.cpp does).
 *
 * Logits files (--logits-out, --kl-divergence-base): the scored rows only, chunk after chunk:
 * float32 little-endian, row-major [chunks * (C-1-first)][n_vocab], no header — the row format
 * of `eval --logits-out`. KL divergence (llama.cpp --kl-divergence): per scored position
 * KL(base || current) = sum_v p_base(v) (log p_base(v) - log p_cur(v)) from the log-softmax of
 * both rows, reported as mean +/- standard error, and the top-1 agreement (argmax equal) as a
 * percentage +/- sqrt(p(1-p)/(N-1)). The base file must be a run with the same text, --ctx and
 * --chunks (its size is checked against that). */
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
#include "tools/commands/perplexity_swap.h"

static const char *const k_cmd = "perplexity";

static void usage(FILE *f)
{
    fputs("usage: tools/run perplexity -m FILE -f TEXTFILE [-c N] [--chunks K] [--json]\n"
          "         [--logits-out FILE] [--kl-divergence-base FILE] [-b N]\n"
          "         [model and placement flags]\n"
          "\n"
          "Perplexity of a text as llama.cpp computes it: chunks of N tokens, each from an\n"
          "empty cache and starting with BOS when the model adds one, scored on their second\n"
          "half. Prints the running PPL per chunk (\"[1]12.3456,[2]...\") and\n"
          "\"Final estimate: PPL = X +/- Y\" (Y: standard error). Needs at least 2N tokens.\n"
          "\n"
          "  -f, --file FILE        the text (a regular file; - : standard input)\n"
          "  -c, --ctx-size, --ctx N  chunk size in tokens, >= 4 (default 512)\n"
          "  --chunks K             score at most K chunks (default: all, -1)\n"
          "  -b, --batch-size N     prefill batch (default: N)\n"
          "  --logits-out FILE      write the scored positions' logits: float32 little-endian,\n"
          "                         row-major [chunks * (N - 1 - N/2)][n_vocab], no header\n"
          "                         (eval's row format); row k of a chunk predicts token k+1.\n"
          "                         Written beside FILE and renamed over it at the end (a link\n"
          "                         is followed); never over an input\n"
          "  --kl-divergence-base FILE  a --logits-out file of a base run (same text, -c and\n"
          "                         --chunks): report mean KL(base || this model) +/- its\n"
          "                         standard error and the top-1 agreement %\n"
          "  --json                 one JSON object on stdout instead: chunks (running PPL),\n"
          "                         ppl, ppl_stderr, n_tokens, n_scored, and kld, kld_stderr,\n"
          "                         top1_percent, top1_stderr with --kl-divergence-base\n"
          "  --hotswap              live tensor swap loop (also SLUICE_HOTSWAP_ENABLED=1):\n"
          "                         reload changed tensors, measure, run the script, reload;\n"
          "                         until a reload changes nothing (--json: a record a round)\n"
          "  --pre-reload-script S  run S (sh) after each round (also\n"
          "                         SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT); its failure stops\n"
          "                         the loop with its status\n"
          "  -h, --help             this text\n",
          f);
    fprintf(f, SL_CLI_KV_HELP, "f16, as llama.cpp");
    fputs(SL_CLI_IO_HELP, f);
    sl_cli_model_flags_help(f);
}

/* log sum_v exp(x[v]) in double; *best = the argmax. The terms are llama-perplexity's (expf of
 * x - max in float, summed in double in index order): float exp is half the cost of double exp
 * over a 262k vocabulary and its ~1e-7 relative error per term is far below the reported
 * digits. A row's value depends on the row alone, whichever thread computes it. */
static double log_sum_exp(const float *x, int32_t n, int32_t *best)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += (double)expf(x[i] - x[b]);
    *best = b;
    return (double)x[b] + log(sum);
}

/* A block of one chunk's scored rows, spread over the threads: for scored row r = row0 + i
 * (i in [0, n) of the parallel_for), nll[r] = -log softmax(logits row first + r)[target[r]],
 * best[r] its argmax and, with a base (KL), kld[r] = KL(base row i || this row) and
 * base_best[r] the base row's argmax. Each row is computed whole by one thread and the sums
 * over rows are taken afterwards in row order, so the figures are those of a serial loop, bit
 * for bit, for any thread count. */
typedef struct score_job {
    const sl_ctx *c;
    const int32_t *target;      /* [rows] the token each row predicts */
    const float *base;          /* [n][n_vocab] the block's base logits; NULL: no KL */
    int64_t row0;               /* the block's first scored row */
    int32_t first, n_vocab;
    double *nll, *kld;          /* [rows] */
    int32_t *best, *base_best;  /* [rows] */
} score_job;

static void score_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const score_job *j = ctx;
    const int32_t V = j->n_vocab;
    for (int64_t r = j->row0 + begin; r < j->row0 + end; r++) {
        const float *row = sl_ctx_logits(j->c, j->first + r);
        const double lse = log_sum_exp(row, V, &j->best[r]);
        j->nll[r] = -((double)row[j->target[r]] - lse);
        if (!j->base) continue;
        /* KL(base || this) = sum_v p_base(v) (log p_base(v) - log p(v)) over the log-softmax
         * of both rows, summed in index order */
        const float *brow = j->base + (r - j->row0) * V;
        const double lse_b = log_sum_exp(brow, V, &j->base_best[r]);
        double d = 0;
        for (int32_t v = 0; v < V; v++) {
            const double lpb = (double)brow[v] - lse_b, lp = (double)row[v] - lse;
            d += exp(lpb) * (lpb - lp);
        }
        j->kld[r] = d;
    }
}

typedef struct kl_acc {
    double sum, sum2;
    uint64_t same, n;
} kl_acc;

/* mean and standard error of the mean from sums; err = 0 when undefined. */
static void mean_err(double sum, double sum2, uint64_t n, double *mean, double *err)
{
    *mean = n ? sum / (double)n : 0;
    double var = n ? sum2 / (double)n - *mean * *mean : 0;
    *err = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0;
}

int sl_cli_perplexity(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    const char *text_path = NULL, *out_path = NULL, *base_path = NULL;
    int64_t n_ctx = 512, n_batch = 0, chunks = -1;
    bool json = false, kv_f16 = true, hotswap = false;
    const char *script = NULL;
    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    while (sl_cli_args_next(&a)) {
        const char *v;
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (!r) r = sl_cli_kv_flag_parse(&a, &kv_f16);
        if (!r) r = sl_cli_io_flag_parse(&io, &a);
        /* 4 and up: the method scores the second half of each chunk */
        if (!r) r = sl_cli_ctx_flags_parse(&a, 4, &n_ctx, &n_batch);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            json = true;
        } else if (sl_cli_is(&a, "--hotswap", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            hotswap = true;
        } else if (sl_cli_is(&a, "--pre-reload-script", NULL)) {
            if (!(script = sl_cli_value(&a))) return 2;
        } else if (sl_cli_is(&a, "-f", "--file")) {
            if (!(text_path = sl_cli_value(&a))) return 2;
            if (!*text_path) return sl_cli_usage_error(k_cmd, "%s: empty file name", a.flag);
        } else if (sl_cli_is(&a, "--logits-out", NULL)) {
            if (!(out_path = sl_cli_value(&a))) return 2;
            if (!*out_path) return sl_cli_usage_error(k_cmd, "%s: empty file name", a.flag);
        } else if (sl_cli_is(&a, "--kl-divergence-base", NULL)) {
            if (!(base_path = sl_cli_value(&a))) return 2;
            if (!*base_path) return sl_cli_usage_error(k_cmd, "%s: empty file name", a.flag);
        } else if (sl_cli_is(&a, "--chunks", NULL)) {
            if (!(v = sl_cli_value(&a)) ||
                sl_cli_parse_i64(k_cmd, a.flag, v, -1, INT32_MAX, &chunks))
                return 2;
            if (chunks == 0) return sl_cli_usage_error(k_cmd, "--chunks '0': must be >= 1 or -1");
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (!text_path) return sl_cli_usage_error(k_cmd, "-f TEXTFILE is required");

    sl_cli_hotswap hs;
    if (sl_cli_hotswap_init(&hs, hotswap, script, json)) return 2;
    if (hs.on && (out_path || base_path))
        return sl_cli_usage_error(k_cmd, "--hotswap measures PPL only (no --logits-out or "
                                  "--kl-divergence-base)");
    int rc = 1;
    char *text = NULL;
    size_t text_len = 0, n_tok = 0;
    int32_t *tok = NULL, *chunk = NULL;
    double *running = NULL, *row_nll = NULL, *row_kld = NULL;
    int32_t *row_best = NULL, *row_base_best = NULL;
    float *brow = NULL;
    FILE *fb = NULL;
    uint64_t base_bytes = 0;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_error err = {0};
    sl_cli_out lo = {0}, trace = {0};
    if (sl_cli_io_read_text(&io, "-f", text_path, &text, &text_len)) goto done;
    if (base_path &&
        sl_cli_io_open_input(&io, "--kl-divergence-base", base_path, &fb, &base_bytes))
        goto done;
    /* outputs are checked (and their temporaries created) before the model loads; stdout
     * carries the report, so it is not one of them */
    if ((out_path || mf.trace) && sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index)) goto done;
    if ((rc = sl_cli_out_prepare(&io, &lo, "--logits-out", out_path, 0)) ||
        (rc = sl_cli_out_prepare(&io, &trace, "--trace", mf.trace, SL_CLI_OUT_BY_NAME)))
        goto done;
    FILE *const fo = lo.f;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &m))) goto done;
    rc = 1;
    sl_model_info info;
    sl_model_info_get(m, &info);
    const bool add_bos = sl_cli_model_adds_bos(m);
    /* as llama.cpp: add_special on, special-token text in the file taken literally */
    if (sl_cli_tokenize(m, k_cmd, mf.path, text, text_len, true, false, &tok, &n_tok)) goto done;
    const int32_t C = (int32_t)n_ctx, V = info.n_vocab, first = C / 2;
    if (n_tok < 2 * (size_t)C) {
        fprintf(stderr, "sluice perplexity: -f %s: %zu tokens; at least %d (2 x --ctx %d) are "
                        "needed\n", text_path, n_tok, 2 * C, C);
        goto done;
    }
    const int64_t n_chunk_max = (int64_t)(n_tok / (size_t)C);
    const int64_t n_chunk = chunks < 0 ? n_chunk_max : chunks < n_chunk_max ? chunks : n_chunk_max;
    const int64_t per_chunk = C - 1 - first, n_rows = n_chunk * per_chunk;

    if (base_path) {
        const uint64_t want = (uint64_t)n_rows * (uint64_t)V * 4u;
        if (base_bytes != want) {
            fprintf(stderr, "sluice perplexity: --kl-divergence-base %s: %" PRIu64 " bytes, "
                            "expected %" PRIu64 " (= %" PRId64 " scored positions x n_vocab %"
                            PRId32 " x 4; %" PRId64 " chunks of --ctx %" PRId32 "): not a "
                            "--logits-out file of the same text, --ctx, --chunks and "
                            "vocabulary\n",
                    base_path, base_bytes, want, n_rows, V, n_chunk, C);
            goto done;
        }
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = C;
    co.n_batch = (int32_t)(n_batch ? n_batch : n_ctx);
    co.all_logits = true;
    co.kv_f16 = kv_f16;
    if ((rc = sl_cli_ctx_create(&mf, k_cmd, m, &co, &c))) goto done;
    rc = 1;
    /* base rows are read a block at a time (~32 MiB: 32 rows of a 262k vocabulary) and
     * scored before the next block is read */
    int64_t block_rows = fb ? (int64_t)((32u << 20) / ((size_t)V * sizeof *brow)) : per_chunk;
    if (block_rows < 1) block_rows = 1;
    if (block_rows > per_chunk) block_rows = per_chunk;
    chunk = malloc((size_t)C * sizeof *chunk);
    running = malloc((size_t)n_chunk * sizeof *running);
    row_nll = malloc((size_t)per_chunk * sizeof *row_nll);
    row_best = malloc((size_t)per_chunk * sizeof *row_best);
    if (fb) {
        brow = malloc((size_t)block_rows * (size_t)V * sizeof *brow);
        row_kld = malloc((size_t)per_chunk * sizeof *row_kld);
        row_base_best = malloc((size_t)per_chunk * sizeof *row_base_best);
    }
    if (!chunk || !running || !row_nll || !row_best ||
        (fb && (!brow || !row_kld || !row_base_best))) {
        fprintf(stderr, "sluice perplexity: out of memory\n");
        goto done;
    }
    if (!json)
        fprintf(stderr, "perplexity: %zu tokens, %" PRId64 " chunks of %" PRId32 " (%" PRId64
                        " scored each), n_vocab %" PRId32 ", BOS %s\n",
                n_tok, n_chunk, C, per_chunk, V, add_bos ? "added" : "not added");
    if (hs.on && sl_cli_hotswap_begin(&hs, m)) goto done;
round:; /* the hot-swap loop measures again from here */
    double nll = 0, nll2 = 0;
    uint64_t count = 0;
    kl_acc kl = {0};
    const double t_start = sl_cli_now_s();
    for (int64_t i = 0; i < n_chunk; i++) {
        memcpy(chunk, tok + i * C, (size_t)C * sizeof *chunk);
        if (add_bos) chunk[0] = info.bos;
        /* logits for the scored rows (and the last) only, as llama-perplexity asks */
        if (sl_ctx_rewind(c, 0, &err) ||
            sl_ctx_eval_tail(c, chunk, (size_t)C, (size_t)first, &err)) {
            fprintf(stderr, "sluice perplexity: %s: chunk %" PRId64 ": %s\n", mf.path, i + 1,
                    err.msg);
            goto done;
        }
        /* the rows the scoring threads read: checked once here, not in every thread */
        if (!sl_ctx_logits(c, first) || !sl_ctx_logits(c, C - 2)) {
            fprintf(stderr, "sluice perplexity: %s: chunk %" PRId64 ": no logits for rows %"
                    PRId32 "..%" PRId32 "\n", mf.path, i + 1, first, C - 2);
            goto done;
        }
        score_job job = {.c = c, .target = tok + i * C + first + 1, .first = first,
                         .n_vocab = V, .nll = row_nll, .best = row_best, .kld = row_kld,
                         .base_best = row_base_best};
        for (int64_t b0 = 0; b0 < per_chunk; b0 += block_rows) {
            const int64_t b1 = b0 + block_rows < per_chunk ? b0 + block_rows : per_chunk;
            for (int64_t r = b0; fb && r < b1; r++) {
                float *br = brow + (r - b0) * V;
                if (fread(br, sizeof *br, (size_t)V, fb) != (size_t)V) {
                    fprintf(stderr, "sluice perplexity: --kl-divergence-base %s: read error\n",
                            base_path);
                    goto done;
                }
                char where[64];
                snprintf(where, sizeof where, "chunk %" PRId64 ", position %" PRId64, i + 1,
                         first + r);
                if (sl_cli_logits_check(k_cmd, "--kl-divergence-base", base_path, br, V,
                                        (int64_t)kl.n + r, where))
                    goto done;
            }
            job.base = fb ? brow : NULL;
            job.row0 = b0;
            /* on the context's own threads, idle between the chunks' forward passes */
            if (sl_ctx_parallel_for(c, b1 - b0, fb ? 1 : 4, score_rows, &job, &err)) {
                fprintf(stderr, "sluice perplexity: scoring chunk %" PRId64 ": %s\n", i + 1,
                        err.msg);
                goto done;
            }
        }
        for (int32_t k = first; k < C - 1; k++) {
            const int64_t r = k - first;
            const double x = row_nll[r];
            nll += x;
            nll2 += x * x;
            count++;
            if (fo && sl_cli_logits_write(fo, k_cmd, out_path, sl_ctx_logits(c, k), 1, V))
                goto done;
            if (fb) {
                const double d = row_kld[r];
                kl.sum += d;
                kl.sum2 += d * d;
                kl.same += row_base_best[r] == row_best[r];
                kl.n++;
            }
        }
        running[i] = exp(nll / (double)count);
        if (!json) {
            printf("[%" PRId64 "]%.4f,", i + 1, running[i]);
            if (sl_cli_stdout_check(k_cmd)) goto done;
        }
    }
    const double secs = sl_cli_now_s() - t_start;
    double mean, se;
    mean_err(nll, nll2, count, &mean, &se);
    const double ppl = exp(mean), ppl_err = se * ppl;
    double kld = 0, kld_err = 0;
    const double same = kl.n ? (double)kl.same / (double)kl.n : 0;
    const double same_err = kl.n > 1 ? sqrt(same * (1 - same) / (double)(kl.n - 1)) : 0;
    if (fb) mean_err(kl.sum, kl.sum2, kl.n, &kld, &kld_err);
    if (json && !hs.on) {
        printf("{\"n_tokens\":%zu,\"n_ctx\":%" PRId32 ",\"n_chunks\":%" PRId64
               ",\"n_scored\":%" PRIu64 ",\"chunks\":[",
               n_tok, C, n_chunk, count);
        for (int64_t i = 0; i < n_chunk; i++) {
            if (i) putchar(',');
            sl_json_f64(stdout, running[i]);
        }
        printf("],\"ppl\":");
        sl_json_f64(stdout, ppl);
        printf(",\"ppl_stderr\":");
        sl_json_f64(stdout, ppl_err);
        if (fb) {
            printf(",\"kld\":");
            sl_json_f64(stdout, kld);
            printf(",\"kld_stderr\":");
            sl_json_f64(stdout, kld_err);
            printf(",\"top1_percent\":");
            sl_json_f64(stdout, 100 * same);
            printf(",\"top1_stderr\":");
            sl_json_f64(stdout, 100 * same_err);
        }
        printf(",\"seconds\":");
        sl_json_f64(stdout, secs);
        printf("}\n");
    } else if (!json) {
        printf("\n");
        if (se > 0)
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
        else
            printf("Final estimate: PPL = %.4f\n", ppl);
        if (fb) {
            printf("KL divergence (base %s || this run) over %" PRIu64 " positions:\n", base_path,
                   kl.n);
            printf("Mean    KLD: %10.6f +/- %10.6f\n", kld, kld_err);
            printf("Same top p: %6.3f +/- %5.3f %%\n", 100 * same, 100 * same_err);
        }
        fprintf(stderr, "perplexity: %" PRId64 " chunks in %.2f s (%.1f tok/s)\n", n_chunk, secs,
                secs > 0 ? (double)(n_chunk * C) / secs : 0.0);
    }
    if (hs.on) {
        bool again;
        if ((rc = sl_cli_hotswap_end(&hs, m, ppl, ppl_err, secs, &again))) goto done;
        rc = 1;
        if (again) goto round;
    }
    if (sl_cli_out_commit(&io, &lo) ||
        sl_cli_trace_finish(&mf, k_cmd, c, sl_cli_out_name(&trace)) ||
        sl_cli_out_commit(&io, &trace))
        goto done;
    rc = sl_cli_stdout_check(k_cmd);
done:
    sl_cli_hotswap_free(&hs);
    sl_cli_out_discard(&lo);
    sl_cli_out_discard(&trace);
    sl_cli_io_free(&io);
    if (fb) fclose(fb);
    sl_ctx_destroy(c);
    sl_model_close(m);
    free(row_best);
    free(row_nll);
    free(running);
    free(brow);
    free(row_base_best);
    free(row_kld);
    free(chunk);
    free(tok);
    free(text);
    return rc;
}
