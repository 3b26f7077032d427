/* ops_tool: file-level front end of the layer ops for tests/kernels/ops_vs_numpy.py.
 *
 *   ops_tool IMPL rope MODE N_TOK N_HEAD HEAD_DIM N_ROT BASE FREQ_SCALE EXT_FACTOR ATTN_FACTOR
 *                 BETA_FAST BETA_SLOW N_CTX_ORIG POS.i32 X.f32 OUT.f32
 *   ops_tool ref  router GATING N_TOK E K NORM WEIGHT_SCALE LOGITS.f32 BIAS.f32|- IDX.i32 W.f32
 *   ops_tool IMPL attn N_HEAD N_KV HEAD_DIM N_POS f32|f16 SCALE WINDOW SOFTCAP Q.f32 K V
 *                 SINKS.f32|- OUT.f32
 *
 * IMPL: ref (kernels/ref) or scalar|avx2|avx512|auto (kernels/cpu). MODE: normal|neox.
 * GATING: softmax_topk|sigmoid|topk_softmax. Files are raw little-endian arrays (K and V raw
 * F32 or F16 bits). Exit status: 0 ok, 1 op error (message on stderr), 2 usage, 77 the
 * requested ISA is not available on this CPU (the caller skips).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "kernels/ref/ops.h"
#include "base/status.h"

static void *read_file(const char *path, size_t want_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ops_tool: cannot open %s\n", path);
        return NULL;
    }
    void *buf = malloc(want_bytes ? want_bytes : 1);
    const size_t got = fread(buf, 1, want_bytes, f);
    const int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != want_bytes || extra) {
        fprintf(stderr, "ops_tool: %s: expected exactly %zu bytes\n", path, want_bytes);
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "ops_tool: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: see the comment at the top of tests/kernels/ops_tool.c\n");
    return 2;
}

/* impl "ref" -> *use_ref; otherwise an ISA for *ops. Returns an exit status or -1 to go on. */
static int pick_impl(const char *impl, bool *use_ref, sl_cpu_ops *ops)
{
    *use_ref = strcmp(impl, "ref") == 0;
    if (*use_ref) return -1;
    sl_error err;
    sl_cpu_isa isa;
    if (sl_cpu_isa_parse(impl, &isa, &err)) {
        fprintf(stderr, "ops_tool: %s\n", err.msg);
        return 2;
    }
    const sl_cpu_features f = sl_cpu_features_detect();
    if (!sl_cpu_isa_available(f, isa)) return 77;
    if (sl_cpu_ops_init(ops, isa, f, &err)) {
        fprintf(stderr, "ops_tool: %s\n", err.msg);
        return 1;
    }
    return -1;
}

static int cmd_rope(bool use_ref, const sl_cpu_ops *ops, int argc, char **argv)
{
    if (argc != 15) return usage();
    sl_rope_mode mode;
    if (strcmp(argv[0], "normal") == 0)
        mode = SL_ROPE_NORMAL;
    else if (strcmp(argv[0], "neox") == 0)
        mode = SL_ROPE_NEOX;
    else
        return usage();
    const long n_tok = atol(argv[1]), n_head = atol(argv[2]), hd = atol(argv[3]);
    sl_rope_params p = sl_rope_params_make(mode, (int32_t)atol(argv[4]), strtof(argv[5], NULL));
    p.freq_scale = strtof(argv[6], NULL);
    p.ext_factor = strtof(argv[7], NULL);
    p.attn_factor = strtof(argv[8], NULL);
    p.beta_fast = strtof(argv[9], NULL);
    p.beta_slow = strtof(argv[10], NULL);
    p.n_ctx_orig = (int32_t)atol(argv[11]);
    if (n_tok < 0 || n_head < 0 || hd < 0) return usage();
    const size_t n = (size_t)n_tok * (size_t)n_head * (size_t)hd;
    int32_t *pos = read_file(argv[12], (size_t)n_tok * sizeof *pos);
    float *x = read_file(argv[13], n * sizeof *x);
    int rc = 1;
    if (pos && x) {
        sl_error err;
        const sl_status st =
            use_ref ? sl_ref_rope(x, n_tok, (int32_t)n_head, (int32_t)hd, pos, &p, &err)
                    : sl_cpu_rope(ops, x, n_tok, (int32_t)n_head, (int32_t)hd, pos, &p, &err);
        if (st)
            fprintf(stderr, "ops_tool: %s\n", err.msg);
        else
            rc = write_file(argv[14], x, n * sizeof *x);
    }
    free(pos);
    free(x);
    return rc;
}

static int cmd_router(int argc, char **argv)
{
    if (argc != 10) return usage();
    sl_router_params p = {0};
    if (strcmp(argv[0], "softmax_topk") == 0)
        p.gating = SL_GATING_SOFTMAX_TOPK;
    else if (strcmp(argv[0], "sigmoid") == 0)
        p.gating = SL_GATING_SIGMOID;
    else if (strcmp(argv[0], "topk_softmax") == 0)
        p.gating = SL_GATING_TOPK_SOFTMAX;
    else
        return usage();
    const long n_tok = atol(argv[1]);
    p.n_expert = (int32_t)atol(argv[2]);
    p.k = (int32_t)atol(argv[3]);
    p.norm_topk = atoi(argv[4]) != 0;
    p.weight_scale = strtof(argv[5], NULL);
    if (n_tok < 0 || p.n_expert < 1 || p.k < 1) return usage();
    float *logits = read_file(argv[6], (size_t)n_tok * (size_t)p.n_expert * sizeof(float));
    float *bias = strcmp(argv[7], "-") ? read_file(argv[7], (size_t)p.n_expert * sizeof(float))
                                       : NULL;
    int32_t *idx = malloc((size_t)n_tok * (size_t)p.k * sizeof *idx + 1);
    float *w = malloc((size_t)n_tok * (size_t)p.k * sizeof *w + 1);
    int rc = 1;
    if (logits && (bias || !strcmp(argv[7], "-"))) {
        p.bias = bias;
        sl_error err;
        rc = 0;
        for (long t = 0; t < n_tok && !rc; t++) {
            if (sl_ref_router_topk(logits + t * p.n_expert, &p, idx + t * p.k, w + t * p.k,
                                   &err)) {
                fprintf(stderr, "ops_tool: token %ld: %s\n", t, err.msg);
                rc = 1;
            }
        }
        if (!rc) rc = write_file(argv[8], idx, (size_t)n_tok * (size_t)p.k * sizeof *idx);
        if (!rc) rc = write_file(argv[9], w, (size_t)n_tok * (size_t)p.k * sizeof *w);
    }
    free(logits);
    free(bias);
    free(idx);
    free(w);
    return rc;
}

static int cmd_attn(bool use_ref, const sl_cpu_ops *ops, int argc, char **argv)
{
    if (argc != 13) return usage();
    sl_attn_params p = {0};
    p.n_head = (int32_t)atol(argv[0]);
    p.n_kv_head = (int32_t)atol(argv[1]);
    p.head_dim = (int32_t)atol(argv[2]);
    p.n_pos = (int32_t)atol(argv[3]);
    if (strcmp(argv[4], "f32") == 0)
        p.kv_type = SL_KV_F32;
    else if (strcmp(argv[4], "f16") == 0)
        p.kv_type = SL_KV_F16;
    else
        return usage();
    p.scale = strtof(argv[5], NULL);
    p.window = (int32_t)atol(argv[6]);
    p.softcap = strtof(argv[7], NULL);
    if (p.n_head < 1 || p.n_kv_head < 1 || p.head_dim < 1 || p.n_pos < 1) return usage();
    const size_t nq = (size_t)p.n_head * (size_t)p.head_dim;
    const size_t nkv = (size_t)p.n_pos * (size_t)p.n_kv_head * (size_t)p.head_dim *
                       (p.kv_type == SL_KV_F16 ? 2 : 4);
    float *q = read_file(argv[8], nq * sizeof(float));
    void *k = read_file(argv[9], nkv), *v = read_file(argv[10], nkv);
    float *sinks = strcmp(argv[11], "-") ? read_file(argv[11], (size_t)p.n_head * sizeof(float))
                                         : NULL;
    float *out = malloc(nq * sizeof *out);
    int rc = 1;
    if (q && k && v && (sinks || !strcmp(argv[11], "-"))) {
        p.sinks = sinks;
        sl_error err;
        const sl_status st = use_ref ? sl_ref_attn_decode(q, k, v, &p, out, &err)
                                     : sl_cpu_attn_decode(ops, q, k, v, &p, out, &err);
        if (st)
            fprintf(stderr, "ops_tool: %s\n", err.msg);
        else
            rc = write_file(argv[12], out, nq * sizeof *out);
    }
    free(q);
    free(k);
    free(v);
    free(sinks);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage();
    bool use_ref;
    sl_cpu_ops ops = {0};
    const int rc = pick_impl(argv[1], &use_ref, &ops);
    if (rc >= 0) return rc;
    if (strcmp(argv[2], "rope") == 0) return cmd_rope(use_ref, &ops, argc - 3, argv + 3);
    if (strcmp(argv[2], "attn") == 0) return cmd_attn(use_ref, &ops, argc - 3, argv + 3);
    if (strcmp(argv[2], "router") == 0) {
        if (!use_ref) {
            fprintf(stderr, "ops_tool: router has only the reference implementation\n");
            return 2;
        }
        return cmd_router(argc - 3, argv + 3);
    }
    return usage();
}
