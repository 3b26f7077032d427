/* `tools/run generate`: prompt -> tokens (BOS as the model's metadata says) -> one prefill ->
 * decode with the sampler, streaming each token's text to stdout as it is produced.
 *
 * stdout carries the generated text alone (not the prompt), so it can be piped; timings go to
 * stderr: prefill tok/s = prompt tokens / time of the prefill eval, decode tok/s = decoded
 * tokens / time of their one-token evals (sampling and detokenizing excluded, as llama.cpp's
 * "eval time"). With --json nothing is streamed: one JSON object is printed to stdout at the
 * end (text, tokens, timings).
 *
 * Stops after -n tokens, at the end-of-generation token (the model's EOS; the public API has no
 * wider is-EOG query yet), or when the context is full. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/cli.h"
#include "tools/common/fileio.h"
#include "tools/common/json.h"
#include "tools/common/json_doc.h"
#include "tools/common/json_schema.h"
#include "tools/common/model_flags.h"

static const char *const k_cmd = "generate";

static void usage(FILE *f)
{
    fputs("usage: tools/run generate -m FILE (-p TEXT | -f FILE) [-n N] [sampling flags]\n"
          "                          [--json] [-c N] [-b N] [model and placement flags]\n"
          "\n"
          "Tokenizes the prompt (adding BOS when the model's tokenizer does), evaluates it in\n"
          "one prefill, then decodes up to N tokens, streaming their text to stdout. stdout is\n"
          "the generated text alone; prefill and decode tok/s are printed to stderr.\n"
          "\n"
          "  -p, --prompt TEXT      the prompt\n"
          "  -f, --file FILE        read the prompt from FILE (a regular file; - : standard\n"
          "                         input)\n"
          "  -n, --n-predict N      tokens to generate (default 32; -1: until an end-of-\n"
          "                         generation token or the context is full)\n"
          "  -c, --ctx-size, --ctx N  context size, 0..2^24 (default, or 0: min(training\n"
          "                         context, 4096))\n"
          "  -b, --batch-size N     prefill batch, 0..2^24 (default, or 0: 512)\n"
          "  --temp T               temperature, <= 0 = greedy (default 0.8)\n"
          "  --top-k N              top-k, <= 0 = off (default 40)\n"
          "  --top-p P              top-p in (0, 1], 1 = off (default 0.95)\n"
          "  --min-p P              min-p in [0, 1], 0 = off (default 0.05)\n"
          "  --seed S               sampler seed, 0..2^64-1 (default 0: runs repeat)\n"
          "  --ignore-eos           do not stop at end-of-generation tokens (EOS, end of turn,\n"
          "                         ... as llama.cpp's llama_vocab_is_eog)\n"
          "  --grammar GBNF         constrain the text to a GBNF grammar (llama.cpp's language);\n"
          "                         generation ends when it is complete\n"
          "  --grammar-file FILE    the same, read from FILE\n"
          "  -j, --json-schema JSON constrain the text to a JSON schema (converted to GBNF as\n"
          "                         llama.cpp does)\n"
          "  --json                 print nothing while generating; at the end print one JSON\n"
          "                         object to stdout: {\"text\", \"tokens\" (generated ids),\n"
          "                         \"prompt_tokens\", \"n_prompt\", \"n_generated\", \"stop\"\n"
          "                         (\"eos\", \"length\" or \"context\"), \"prefill_tps\",\n"
          "                         \"decode_tps\", \"prefill_seconds\", \"decode_seconds\"}\n"
          "  -h, --help             this text\n",
          f);
    fprintf(f, SL_CLI_KV_HELP, "f16, as llama.cpp");
    fputs(SL_CLI_IO_HELP, f);
    sl_cli_model_flags_help(f);
}

/* A growing byte buffer for the generated text (kept for --json). */
typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static int text_append(text_buf *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) return 1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
    return 0;
}

/* The grammar of --grammar TEXT, --grammar-file FILE or --json-schema JSON on smp (*gbnf:
 * malloc'd, the caller frees it). 0, or 2 after a message naming the flag. */
static int grammar_set(sl_cli_io *io, sl_sampler *smp, const sl_model *m, const char *flag,
                       const char *value, char **gbnf)
{
    sl_error err = {0};
    size_t len;
    if (!strcmp(flag, "--grammar-file")) {
        if (!*value) return sl_cli_usage_error(k_cmd, "%s: empty file name", flag);
        if (sl_cli_io_read_text(io, flag, value, gbnf, &len)) return 2;
    } else if (!strcmp(flag, "--grammar")) {
        if (!(*gbnf = strdup(value))) return sl_cli_usage_error(k_cmd, "out of memory");
    } else {
        sl_jdoc *d = NULL;
        sl_status st = sl_jdoc_parse(value, strlen(value), 0, &d, &err);
        if (!st) st = sl_json_schema_to_gbnf(d, 0, gbnf, &err);
        sl_jdoc_free(d);
        if (st) return sl_cli_usage_error(k_cmd, "%s: %s", flag, err.msg);
    }
    if (!**gbnf) /* "" would remove the grammar: refuse it as the parser would */
        return sl_cli_usage_error(k_cmd, "%s%s%s: the grammar is empty (it needs a 'root' rule)",
                                  flag, strcmp(flag, "--grammar-file") ? "" : " ",
                                  strcmp(flag, "--grammar-file") ? "" : value);
    if (sl_sampler_set_grammar(smp, m, *gbnf, &err))
        return sl_cli_usage_error(k_cmd, "%s%s%s: %s", flag,
                                  strcmp(flag, "--grammar-file") ? "" : " ",
                                  strcmp(flag, "--grammar-file") ? "" : value, err.msg);
    return 0;
}

int sl_cli_generate(int argc, char **argv)
{
    sl_cli_args a;
    sl_cli_args_init(&a, k_cmd, argc, argv);
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    sl_sampler_options so = sl_sampler_options_default();
    const char *prompt = NULL, *prompt_file = NULL;
    const char *grammar = NULL, *grammar_flag = NULL; /* GBNF, a file or a schema: one of them */
    int64_t n_predict = 32, n_ctx = 0, n_batch = 0;
    bool json = false, ignore_eos = false, kv_f16 = true;
    sl_cli_io io;
    sl_cli_io_init(&io, k_cmd);
    while (sl_cli_args_next(&a)) {
        const char *v;
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (!r) r = sl_cli_kv_flag_parse(&a, &kv_f16);
        if (!r) r = sl_cli_io_flag_parse(&io, &a);
        if (!r) r = sl_cli_sampling_flags_parse(&a, &so);
        if (!r) r = sl_cli_ctx_flags_parse(&a, SL_RANGE_N_CTX.lo, &n_ctx, &n_batch);
        if (r == 2) return 2;
        if (r == 1) continue;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "--json", NULL) || sl_cli_is(&a, "--ignore-eos", NULL)) {
            if (sl_cli_no_value(&a)) return 2;
            if (!strcmp(a.flag, "--json")) json = true;
            else ignore_eos = true;
            continue;
        }
        static const char *const k_value_flags[] = {
            "-p", "--prompt", "-f", "--file", "-n", "--n-predict", "--grammar", "--grammar-file",
            "-j", "--json-schema"};
        size_t k = 0;
        while (k < sizeof k_value_flags / sizeof *k_value_flags && strcmp(a.flag, k_value_flags[k]))
            k++;
        if (k == sizeof k_value_flags / sizeof *k_value_flags) return sl_cli_unknown(&a);
        if (!(v = sl_cli_value(&a))) return 2;
        if (sl_cli_is(&a, "-p", "--prompt")) {
            prompt = v;
        } else if (sl_cli_is(&a, "-f", "--file")) {
            if (!*v) return sl_cli_usage_error(k_cmd, "%s: empty file name", a.flag);
            prompt_file = v;
        } else if (sl_cli_is(&a, "-n", "--n-predict")) {
            if (sl_cli_parse_i64(k_cmd, a.flag, v, -1, INT32_MAX, &n_predict)) return 2;
        } else if (sl_cli_is(&a, "--grammar", NULL) || sl_cli_is(&a, "--grammar-file", NULL) ||
                   sl_cli_is(&a, "-j", "--json-schema")) {
            if (grammar_flag)
                return sl_cli_usage_error(k_cmd, "%s: give one of --grammar, --grammar-file, "
                                          "--json-schema (%s was given)", a.flag, grammar_flag);
            grammar_flag = k_value_flags[k]; /* a.flag is reused by the next flag */
            grammar = v;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path) return sl_cli_usage_error(k_cmd, "-m FILE is required");
    if (!prompt == !prompt_file)
        return sl_cli_usage_error(k_cmd, "give the prompt with exactly one of -p TEXT, -f FILE");

    int rc = 1;
    char *file_text = NULL, *piece = NULL, *gbnf = NULL;
    size_t piece_cap = 0, prompt_len = prompt ? strlen(prompt) : 0;
    int32_t *ptok = NULL, *gen = NULL;
    size_t n_prompt = 0, n_gen = 0;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    sl_sampler *smp = NULL;
    text_buf text = {0};
    sl_error err = {0};
    sl_cli_out trace = {0};
    if (prompt_file) {
        if (sl_cli_io_read_text(&io, "-f", prompt_file, &file_text, &prompt_len)) goto done;
        prompt = file_text;
    }
    if (mf.trace && (sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index) ||
                     (rc = sl_cli_out_prepare(&io, &trace, "--trace", mf.trace,
                                              SL_CLI_OUT_BY_NAME))))
        goto done;
    if ((rc = sl_cli_model_open(&mf, k_cmd, &m))) goto done;
    rc = 1;
    sl_model_info info;
    sl_model_info_get(m, &info);
    /* as llama.cpp's tools: special tokens written in the prompt are recognised */
    if (sl_cli_tokenize(m, k_cmd, mf.path, prompt, prompt_len, true, true, &ptok, &n_prompt))
        goto done;
    if (!n_prompt) {
        rc = prompt_file ? sl_cli_usage_error(k_cmd, "-f %s: the prompt is empty after "
                                              "tokenization", prompt_file)
                         : sl_cli_usage_error(k_cmd, "the prompt is empty after tokenization");
        goto done;
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)n_ctx;
    co.n_batch = (int32_t)n_batch;
    co.kv_f16 = kv_f16;
    if ((rc = sl_cli_ctx_create(&mf, k_cmd, m, &co, &c))) goto done;
    rc = 1;
    if (sl_sampler_create(&so, &smp, &err)) {
        fprintf(stderr, "sluice generate: %s\n", err.msg); /* the message says "sampler: " */
        goto done;
    }
    if (grammar && (rc = grammar_set(&io, smp, m, grammar_flag, grammar, &gbnf))) goto done;
    rc = 1;
    const int32_t ctx_size = co.n_ctx ? co.n_ctx
                                      : (info.n_ctx_train < 4096 ? info.n_ctx_train : 4096);
    if (n_prompt > (size_t)ctx_size) {
        rc = sl_cli_usage_error(k_cmd, "the prompt has %zu tokens, more than the context "
                                "(%" PRId32 "; raise -c)", n_prompt, ctx_size);
        goto done;
    }
    const size_t max_gen = n_predict < 0 ? (size_t)ctx_size : (size_t)n_predict;
    if (!(gen = malloc((max_gen ? max_gen : 1) * sizeof *gen))) {
        fprintf(stderr, "sluice generate: out of memory\n");
        goto done;
    }
    /* each step evaluates and picks the next token in one call: a greedy pick happens where
     * the output layer ran (on a GPU only the id comes back) */
    int32_t next;
    double t0 = sl_cli_now_s();
    if (sl_ctx_eval_sample(c, smp, ptok, n_prompt, &next, &err)) {
        fprintf(stderr, "sluice generate: %s: prefill: %s\n", mf.path, err.msg);
        goto done;
    }
    const double prefill_s = sl_cli_now_s() - t0;
    double decode_s = 0;
    size_t n_decoded = 0;
    const char *stop = "length";
    while (n_gen < max_gen) {
        const int32_t tok = next;
        if (sl_token_is_eog(m, tok) && !ignore_eos) {
            stop = "eos";
            break;
        }
        gen[n_gen++] = tok;
        size_t n;
        if (sl_cli_token_piece(m, tok, &piece, &piece_cap, &n, &err)) {
            fprintf(stderr, "sluice generate: %s: token %" PRId32 ": %s\n", mf.path, tok,
                    err.msg[0] ? err.msg : "out of memory");
            goto done;
        }
        if (json) {
            if (text_append(&text, piece, n)) {
                fprintf(stderr, "sluice generate: out of memory\n");
                goto done;
            }
        } else {
            /* a full disk or a closed pipe ends the run: what follows would be lost too */
            fwrite(piece, 1, n, stdout);
            if (sl_cli_stdout_check(k_cmd)) goto done;
        }
        if (sl_sampler_grammar_done(smp)) { /* the grammar is complete: nothing can follow */
            stop = "eos";
            break;
        }
        if (n_gen == max_gen) break; /* the last token needs no eval */
        if (sl_ctx_n_past(c) >= ctx_size) {
            stop = "context";
            break;
        }
        t0 = sl_cli_now_s();
        if (sl_ctx_eval_sample(c, smp, &tok, 1, &next, &err)) {
            fprintf(stderr, "sluice generate: %s: decode: %s\n", mf.path, err.msg);
            goto done;
        }
        decode_s += sl_cli_now_s() - t0;
        n_decoded++;
    }
    const double prefill_tps = prefill_s > 0 ? (double)n_prompt / prefill_s : 0;
    const double decode_tps = decode_s > 0 ? (double)n_decoded / decode_s : 0;
    if (json) {
        printf("{\"text\":");
        sl_json_str(stdout, text.p ? text.p : "", text.n);
        printf(",\"tokens\":[");
        for (size_t i = 0; i < n_gen; i++) printf("%s%" PRId32, i ? "," : "", gen[i]);
        printf("],\"prompt_tokens\":[");
        for (size_t i = 0; i < n_prompt; i++) printf("%s%" PRId32, i ? "," : "", ptok[i]);
        printf("],\"n_prompt\":%zu,\"n_generated\":%zu,\"stop\":\"%s\",\"prefill_tps\":",
               n_prompt, n_gen, stop);
        sl_json_f64(stdout, prefill_tps);
        printf(",\"decode_tps\":");
        sl_json_f64(stdout, decode_tps);
        printf(",\"prefill_seconds\":");
        sl_json_f64(stdout, prefill_s);
        printf(",\"decode_seconds\":");
        sl_json_f64(stdout, decode_s);
        printf("}\n");
    } else {
        /* the text has no newline of its own: start the stats on a line of their own when
         * they would land after it (a terminal, or 2>&1) */
        struct stat so_st, se_st;
        if (n_gen && (isatty(STDOUT_FILENO) ||
                      (!fstat(STDOUT_FILENO, &so_st) && !fstat(STDERR_FILENO, &se_st) &&
                       so_st.st_dev == se_st.st_dev && so_st.st_ino == se_st.st_ino)))
            fputc('\n', stderr);
        fprintf(stderr, "generate: prefill %zu tokens in %.3f s = %.1f tok/s; decode %zu tokens "
                        "in %.3f s = %.1f tok/s; stop: %s\n",
                n_prompt, prefill_s, prefill_tps, n_decoded, decode_s, decode_tps, stop);
        sl_model_info mi;
        sl_model_info_get(m, &mi);
        if (mi.repacked_tensors) /* as llama.cpp's CPU_REPACK buffer line */
            fprintf(stderr, "generate: CPU repack: %" PRIu64 " Q4_K tensors (%.2f MiB) as "
                            "Q4_K_R8 (-nr: as stored)\n", mi.repacked_tensors,
                    (double)mi.repacked_bytes / 1048576.0);
    }
    if (sl_cli_trace_finish(&mf, k_cmd, c, sl_cli_out_name(&trace)) ||
        sl_cli_out_commit(&io, &trace))
        goto done;
    rc = sl_cli_stdout_check(k_cmd);
done:
    sl_cli_out_discard(&trace);
    sl_cli_io_free(&io);
    free(gbnf);
    sl_sampler_destroy(smp);
    sl_ctx_destroy(c);
    sl_model_close(m);
    free(text.p);
    free(gen);
    free(ptok);
    free(piece);
    free(file_text);
    return rc;
}
