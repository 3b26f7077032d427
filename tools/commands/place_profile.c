/* sluice place profile: per layer and FFN neuron, how often and how strongly it activates
 * (scheduler/policy/neuron_stats.h), over a text, written as a stats GGUF that `place solve` reads.
 *
 * The model runs on the CPU (the statistics come from the host FFNs) in windows of --ctx
 * tokens (the KV cache is cleared between windows, as perplexity does), up to --tokens.
 * Stats file: general.architecture "sluice.neuron_stats"; sluice.neuron_stats.tokens (u64),
 * .block_count (u32), .active_frac (f32, neuron_stats.h's threshold), .model (the model's
 * general.name); per layer blk.N.ffn_act_count (I32 [n_ff]: tokens that found the neuron
 * active) and blk.N.ffn_act_mag (F32 [n_ff]: mean |activation| over all tokens). Routed
 * experts: .expert_count (u32) and both tensors [n_expert * n_ff], entry e * n_ff + j for
 * neuron j of expert e (gpuidx.h's MoE layout); a neuron of an expert a token is not routed
 * to is not active for it; and blk.N.ffn_expert_count (I32 [n_expert]: tokens routed to
 * expert e, the routing probability `place solve` weighs an expert's neurons by). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "scheduler/policy/neuron_stats.h"
#include "tools/common/fileio.h"
#include "tools/common/model_flags.h"
#include "tools/commands/place.h"

static void usage(FILE *f)
{
    fputs("usage: sluice place profile -m MODEL -f TEXT -o STATS.gguf [--tokens N] [-c N]\n"
          "  Runs MODEL on the CPU over TEXT and counts, per layer and FFN neuron, the tokens\n"
          "  that activate it (|act(gate)*up| > 0.1 x the token's RMS) and its mean magnitude;\n"
          "  with routed experts per layer, expert and neuron (the cpu MoE scheduler), and the\n"
          "  tokens routed to each expert. A ReLU model's measured skip rate is printed.\n"
          "  --tokens N   at most N tokens of TEXT (default 4096)\n"
          "  -c, --ctx N  window of tokens evaluated with one KV cache (default 512)\n",
          f);
    sl_cli_model_flags_help(f);
}

/* Layer il's statistics, flattened expert-major for routed experts (entry e * n_ff + j, as
 * gpuidx.h's MoE index): *n entries; with cnt NULL only *n and *tokens (the tokens
 * evaluated: each is routed to n_expert_used experts of the layer); mag may be NULL; routed
 * (may be NULL): [n_expert] tokens routed to each expert. */
static sl_status layer_stats(const sl_ctx *c, const sl_model_info *in, int32_t il, int64_t *n,
                             uint64_t *tokens, int32_t *cnt, float *mag, int32_t *routed_to,
                             sl_error *err)
{
    const int32_t X = in->n_expert;
    uint64_t routed = 0;
    *n = 0;
    for (int32_t e = 0; e < (X ? X : 1); e++) {
        int64_t nn;
        uint64_t nt;
        const uint64_t *act;
        const double *ms;
        sl_status st = sl_ctx_neuron_stats(c, il, X ? e : -1, &nn, &nt, &act, &ms, err);
        if (st) return st;
        routed += nt;
        if (routed_to) routed_to[e] = nt > INT32_MAX ? INT32_MAX : (int32_t)nt;
        for (int64_t j = 0; cnt && j < nn; j++) {
            cnt[*n + j] = act[j] > INT32_MAX ? INT32_MAX : (int32_t)act[j];
            if (mag) mag[*n + j] = (float)ms[j]; /* a sum: divided by the tokens below */
        }
        *n += nn;
    }
    *tokens = X ? routed / (uint64_t)(in->n_expert_used > 0 ? in->n_expert_used : 1) : routed;
    for (int64_t j = 0; mag && j < *n; j++) mag[j] = *tokens ? mag[j] / (float)*tokens : 0.0f;
    return SL_OK;
}

int sl_cli_hotcold_profile(const sl_ctx *c, const sl_model_info *in,
                           const sl_cli_hotcold_model *hm, float *freq, float *route_p,
                           sl_error *err)
{
    const int64_t X = hm->n_expert ? hm->n_expert : 1, per = X * hm->n_ff;
    int32_t *cnt = malloc((size_t)per * sizeof *cnt), *routed = malloc((size_t)X * sizeof *routed);
    int rc = 1;
    if (!cnt || !routed) {
        sl_error_set(err, SL_ERR_NOMEM, "profile: out of memory");
        goto out;
    }
    for (int32_t il = 0; il < hm->n_layer; il++) {
        if (hm->n_expert && !hm->bytes[il]) continue; /* no routed experts: base bytes */
        int64_t n;
        uint64_t tokens;
        if (layer_stats(c, in, il, &n, &tokens, NULL, NULL, NULL, err)) goto out;
        if (n != per) {
            sl_error_set(err, SL_ERR_INVALID, "layer %d: profile of %lld neurons, the plan's "
                         "FFN has %lld", il, (long long)n, (long long)per);
            goto out;
        }
        if (layer_stats(c, in, il, &n, &tokens, cnt, NULL, hm->n_expert ? routed : NULL, err) ||
            sl_cli_hotcold_layer_freq(hm, il, tokens, hm->n_expert ? routed : NULL, cnt, freq,
                                      route_p, err))
            goto out;
    }
    rc = 0;
out:
    free(cnt);
    free(routed);
    return rc;
}

static int write_stats(const char *cmd, const char *path, sl_ctx *c, const sl_model_info *in)
{
    sl_gguf_writer *w = NULL;
    sl_error err = {0};
    sl_gguf_writer_options wo = {0};
    uint64_t tokens = 0;
    int rc = 1;
    int32_t *cnt = NULL, *routed = NULL;
    float *mag = NULL;
    const int64_t ne_x[1] = {in->n_expert};
    if (in->n_expert && !(routed = malloc((size_t)in->n_expert * sizeof *routed))) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    if (sl_gguf_writer_create(path, &wo, &w, &err)) goto fail;
    for (int32_t il = 0; il < in->n_layer; il++) {
        int64_t n;
        if (layer_stats(c, in, il, &n, &tokens, NULL, NULL, NULL, &err)) goto fail;
        char name[64];
        const int64_t ne[1] = {n};
        /* the small routing counts first: the file ends with data, not alignment padding */
        snprintf(name, sizeof name, "blk.%d.ffn_expert_count", il);
        if (in->n_expert && sl_gguf_writer_add_tensor(w, name, SL_GGML_I32, 1, ne_x, &err))
            goto fail;
        snprintf(name, sizeof name, "blk.%d.ffn_act_count", il);
        if (sl_gguf_writer_add_tensor(w, name, SL_GGML_I32, 1, ne, &err)) goto fail;
        snprintf(name, sizeof name, "blk.%d.ffn_act_mag", il);
        if (sl_gguf_writer_add_tensor(w, name, SL_GGML_F32, 1, ne, &err)) goto fail;
    }
    if (sl_gguf_writer_set_str(w, "general.architecture", "sluice.neuron_stats", &err) ||
        sl_gguf_writer_set_u64(w, "sluice.neuron_stats.tokens", tokens, &err) ||
        sl_gguf_writer_set_u32(w, "sluice.neuron_stats.block_count", (uint32_t)in->n_layer,
                               &err) ||
        (in->n_expert && sl_gguf_writer_set_u32(w, "sluice.neuron_stats.expert_count",
                                                (uint32_t)in->n_expert, &err)) ||
        sl_gguf_writer_set_f32(w, "sluice.neuron_stats.active_frac",
                               (float)SL_NEURON_ACTIVE_FRAC, &err) ||
        sl_gguf_writer_set_str(w, "sluice.neuron_stats.model", in->name ? in->name : "", &err))
        goto fail;
    for (int32_t il = 0; il < in->n_layer; il++) {
        int64_t n;
        if (layer_stats(c, in, il, &n, &tokens, NULL, NULL, NULL, &err)) goto fail;
        cnt = malloc((size_t)n * sizeof *cnt);
        mag = malloc((size_t)n * sizeof *mag);
        if (!cnt || !mag) {
            snprintf(err.msg, sizeof err.msg, "out of memory");
            goto fail;
        }
        if (layer_stats(c, in, il, &n, &tokens, cnt, mag, routed, &err) ||
            (routed && sl_gguf_writer_write(w, routed, (uint64_t)in->n_expert * sizeof *routed,
                                            &err)) ||
            sl_gguf_writer_write(w, cnt, (uint64_t)n * sizeof *cnt, &err) ||
            sl_gguf_writer_write(w, mag, (uint64_t)n * sizeof *mag, &err))
            goto fail;
        free(cnt);
        free(mag);
        cnt = NULL;
        mag = NULL;
    }
    if (sl_gguf_writer_finish(w, &err)) goto fail;
    rc = 0;
fail:
    if (rc) fprintf(stderr, "sluice %s: %s: %s\n", cmd, path, err.msg);
    free(cnt);
    free(mag);
    free(routed);
    sl_gguf_writer_destroy(w);
    return rc;
}

int sl_cli_place_profile(int argc, char **argv)
{
    const char *cmd = "place profile";
    sl_cli_model_flags mf;
    sl_cli_model_flags_init(&mf);
    mf.opt.placement = SL_PLACE_CPU;
    const char *text_path = NULL, *out = NULL;
    int64_t max_tokens = 4096, win = 512;
    sl_cli_io io;
    sl_cli_io_init(&io, cmd);
    sl_cli_args a;
    sl_cli_args_init(&a, cmd, argc, argv);
    while (sl_cli_args_next(&a)) {
        int r = sl_cli_model_flags_parse(&mf, &a);
        if (r == 0) r = sl_cli_io_flag_parse(&io, &a);
        if (r == 2) return 2;
        if (r == 1) continue;
        const char *v;
        if (sl_cli_is(&a, "-h", "--help")) {
            usage(stdout);
            return 0;
        } else if (sl_cli_is(&a, "-f", "--file")) {
            if (!(v = sl_cli_value(&a))) return 2;
            text_path = v;
        } else if (sl_cli_is(&a, "-o", "--output")) {
            if (!(v = sl_cli_value(&a))) return 2;
            if (!*v) return sl_cli_usage_error(cmd, "%s: empty file name", a.flag);
            out = v;
        } else if (sl_cli_is(&a, "--tokens", NULL)) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(cmd, a.flag, v, 1, 1 << 30,
                                                            &max_tokens))
                return 2;
        } else if (sl_cli_is(&a, "-c", "--ctx")) {
            if (!(v = sl_cli_value(&a)) || sl_cli_parse_i64(cmd, a.flag, v, 2, 1 << 20, &win))
                return 2;
        } else {
            return sl_cli_unknown(&a);
        }
    }
    if (a.status) return a.status;
    if (!mf.path || !text_path || !out)
        return sl_cli_usage_error(cmd, "-m MODEL, -f TEXT and -o STATS.gguf are required");
    if (mf.opt.placement != SL_PLACE_CPU)
        return sl_cli_usage_error(cmd, "--placement: the profile runs on the CPU (cpu only)");
    char *text = NULL;
    size_t len = 0;
    sl_model *m = NULL;
    sl_ctx *c = NULL;
    int32_t *toks = NULL;
    size_t n_tok = 0;
    sl_cli_out o = {0};
    int rc = 1;
    /* the output is checked (not an input, a writable regular file) before any work */
    if (sl_cli_io_read_text(&io, "-f", text_path, &text, &len) ||
        sl_cli_io_add_model(&io, mf.path, mf.opt.gpu_index) ||
        (rc = sl_cli_out_prepare(&io, &o, "-o", out, SL_CLI_OUT_BY_NAME)) ||
        (rc = sl_cli_model_open(&mf, cmd, &m)))
        goto done;
    rc = 1;
    sl_model_info in;
    sl_model_info_get(m, &in);
    if (sl_cli_tokenize(m, cmd, mf.path, text, len, true, false, &toks, &n_tok)) goto done;
    if ((int64_t)n_tok > max_tokens) n_tok = (size_t)max_tokens;
    if (n_tok < 1 || !len) { /* a BOS alone is no text to profile */
        fprintf(stderr, "sluice %s: -f %s: no tokens\n", cmd, text_path);
        goto done;
    }
    sl_ctx_options co = sl_ctx_options_default();
    co.n_ctx = (int32_t)win;
    co.neuron_stats = true;
    if ((rc = sl_cli_ctx_create(&mf, cmd, m, &co, &c))) goto done;
    rc = 1;
    sl_error err = {0};
    for (size_t at = 0; at < n_tok; at += (size_t)win) {
        const size_t n = n_tok - at < (size_t)win ? n_tok - at : (size_t)win;
        if (sl_ctx_rewind(c, 0, &err) || sl_ctx_eval(c, toks + at, n, &err)) {
            fprintf(stderr, "sluice %s: %s: %s\n", cmd, mf.path, err.msg);
            goto done;
        }
    }
    if (write_stats(cmd, sl_cli_out_name(&o), c, &in) || sl_cli_out_commit(&io, &o)) goto done;
    printf("profile: %zu tokens, %d layers -> %s\n", n_tok, in.n_layer, out);
    sl_ctx_stats cs;
    sl_ctx_stats_get(c, &cs);
    if (cs.ffn_neurons) /* a ReLU model: its exact sparsity, measured on this text */
        printf("profile: ReLU FFNs: %.2f%% of token x neuron gate outputs <= 0, %.2f%% skipped "
               "(%d-token windows: a neuron is computed if any token of its window needs it)\n",
               100.0 * (double)cs.ffn_neurons_zero / (double)cs.ffn_neurons,
               100.0 * (double)cs.ffn_neurons_skipped / (double)cs.ffn_neurons, (int)win);
    rc = sl_cli_stdout_check(cmd);
done:
    sl_cli_out_discard(&o);
    sl_cli_io_free(&io);
    free(toks);
    free(text);
    sl_ctx_destroy(c);
    sl_model_close(m);
    return rc;
}
