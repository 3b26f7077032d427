/* `tools/run mkmodel`: command-line front end of synth.c (synthetic GGUF models).
 *
 * Flags are collected first and applied on top of the chosen architecture's defaults, so their
 * order does not matter. Numbers are parsed strictly (decimal digits only, range-checked);
 * every usage error names the flag and exits 2; I/O errors exit 1; SIGINT / SIGTERM while
 * writing remove FILE.partial and exit 130 / 143 (tools/common/interrupt.h). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "base/file.h"
#include "base/parse.h"
#include "tools/common/cli.h"
#include "tools/common/interrupt.h"
#include "tools/common/progress.h"
#include "tools/synth/synth.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tools/run mkmodel [--arch llama|mixtral|qwen3moe|olmoe|qwen2moe|gemma3|\n"
            "                         gpt-oss|deepseek2|qwen2|qwen3|gemma2|granite|phi3|\n"
            "                         qwen3next|glm4moe|qwen35|qwen35moe|minimax-m2|dots1|\n"
            "                         bailingmoe2|qwen3vl|qwen3vlmoe|ernie4_5|ernie4_5-moe|\n"
            "                         hunyuan-moe]\n"
            "                         [flags] -o FILE\n"
            "\n"
            "Writes a small synthetic model in the GGUF layout llama.cpp loads, with a valid\n"
            "tokenizer vocabulary and deterministic weights (same flags and seed: same bytes).\n"
            "\n"
            "  --arch A          llama (dense), mixtral (llama + merged experts), qwen3moe,\n"
            "                    olmoe, qwen2moe (experts + shared expert), gemma3 (dense,\n"
            "                    sliding-window layers), gpt-oss (experts with biases, sinks,\n"
            "                    alternating sliding-window layers, YaRN), deepseek2 (MLA with\n"
            "                    q_lora/kv_lora dim/2, nope dim/heads, rope half that; a\n"
            "                    leading dense layer, sigmoid routing in 4 groups when\n"
            "                    --experts is a multiple of 4, one shared expert, YaRN),\n"
            "                    qwen2 (dense, q/k/v biases), qwen3 (dense, q/k norms),\n"
            "                    gemma2 (dense, soft-capping, even layers sliding), granite\n"
            "                    (dense, embedding/residual/attention/logit multipliers),\n"
            "                    phi3 (dense, fused attn_qkv and gate|up, 3/4 rotary),\n"
            "                    qwen3next (Gated DeltaNet layers: --heads value heads,\n"
            "                    --kv-heads key heads, conv 4; gated attention on every 4th\n"
            "                    layer, 1/4 rotary; experts + gated shared expert),\n"
            "                    glm4moe (GLM-4.5: q/k/v biases, 1/2 rotary, a leading\n"
            "                    dense layer, sigmoid routing with a selection bias, one\n"
            "                    ungated shared expert), qwen35 / qwen35moe (Qwen3.5:\n"
            "                    qwen3next's mixers with ssm_beta/ssm_alpha and M-RoPE\n"
            "                    sections; a dense FFN / qwen3next's experts),\n"
            "                    minimax-m2 (q/k norms over whole projections, 1/2 rotary,\n"
            "                    sigmoid routing with a selection bias), dots1 (qwen3\n"
            "                    attention, deepseek2's MoE without groups), bailingmoe2\n"
            "                    (Ling 2.0: fused attn_qkv, q/k norms, 1/2 rotary,\n"
            "                    deepseek2's MoE), qwen3vl / qwen3vlmoe (Qwen3-VL's\n"
            "                    language models: qwen3 / qwen3moe with M-RoPE sections),\n"
            "                    ernie4_5 / ernie4_5-moe (ERNIE 4.5: llama's layout; softmax\n"
            "                    routing with a selection bias and a shared expert),\n"
            "                    hunyuan-moe (q/k norms after the rope, softmax routing, a\n"
            "                    shared expert)\n"
            "                    (default: qwen3moe)\n"
            "  --layers N        transformer blocks (default 2; gemma3: 6; deepseek2,\n"
            "                    glm4moe, dots1, bailingmoe2: 3; qwen3next, qwen35,\n"
            "                    qwen35moe: 4)\n"
            "  --dim N           embedding width (default 64)\n"
            "  --ffn N           FFN width; per expert for MoE archs (default 128)\n"
            "  --experts N       experts per layer, MoE archs only (default 8, gpt-oss 4, max %d)\n"
            "  --top-k N         experts used per token, MoE archs only (default 2)\n"
            "  --heads N         attention heads; must divide --dim (default 4)\n"
            "  --head-dim N      attention head size (default --dim / --heads; the archs\n"
            "                    whose loaders allow heads x N != --dim)\n"
            "  --kv-heads N      KV heads; must divide --heads (default 2; olmoe: = --heads;\n"
            "                    deepseek2 writes 1: MLA)\n"
            "  --vocab N         vocabulary size, >= %d (default 512)\n"
            "  --ctx N           context_length metadata (default 256)\n"
            "  --shared-ffn N    qwen2moe, qwen3next, qwen35moe, bailingmoe2, ernie4_5-moe,\n"
            "                    hunyuan-moe: shared-expert FFN width\n"
            "                    (default qwen2moe 2 * --ffn, the others --ffn)\n"
            "  --sliding-window N  gemma3, gemma2, gpt-oss: window of the local layers\n"
            "                    (default 8)\n"
            "  --type T          matmul weight type: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1\n"
            "                    Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS (default F32), or\n"
            "                    MXFP4 (MoE archs: routed experts MXFP4, other matmuls\n"
            "                    Q8_0, as gpt-oss files); --dim and --ffn must be\n"
            "                    multiples of the block size (32; 256 for the K-quants and\n"
            "                    IQ4_XS); those not given grow to one (Q4_K: 256)\n"
            "  --router-skew Z   Zipf exponent of expert popularity, 0 = uniform (default 1.0)\n"
            "  --rope-theta X    rope.freq_base (default: the modelled model's; a small one\n"
            "                    turns even the last rotated pairs in a few tokens)\n"
            "  --router-topics N MoE: a router with temporal locality: token ids in runs of\n"
            "                    --topic-run R (default 16) cycle through N topics, each\n"
            "                    preferring its own 1/N of every layer's experts, and greedy\n"
            "                    decoding walks the ids (v -> v + 1), so the topic drifts\n"
            "                    every R tokens (0: off, the default; use with --router-skew 0\n"
            "                    for little static skew)\n"
            "  --neuron-skew Z   Zipf exponent of FFN neuron activations (gate/up row scales),\n"
            "                    0 = none, max 4 (default 0; 1 puts ~2/3 of an FFN's weight\n"
            "                    energy in its hottest 10%% of neurons)\n"
            "  --activation A    llama only: silu (default) or relu (a ReLU FFN, as in\n"
            "                    ReluLLaMA; recorded as sluice.feed_forward_activation)\n"
            "  --legacy-kv-b     deepseek2 only: the older layout llama.cpp still loads\n"
            "                    (blk.N.attn_kv_b, no attn_k_b / attn_v_b nor *_mla keys)\n"
            "  --biases          every optional bias llama.cpp loads for the arch: q/k/v\n"
            "                    (phi3: attn_qkv.bias), llama/granite/mixtral attn_output\n"
            "                    and dense ffn_{gate,up,down}, qwen2 output.bias, ernie4_5\n"
            "                    attn_output.bias\n"
            "  --longrope N      phi3, llama, granite: LongRoPE over an original context of N\n"
            "                    tokens (rope_factors_long/short, rope.scaling.attn_factor\n"
            "                    from --ctx / N; llama/granite: rope.scaling.type longrope)\n"
            "  --attn-temp L     deepseek2: Mistral Large 3's attention temperature (Q times\n"
            "                    1 + 0.1 ln(floor(pos / L) + 1)): attention.temperature_scale\n"
            "                    0.1 and temperature_length L\n"
            "  --nextn N         glm4moe, bailingmoe2: N multi-token-prediction blocks after\n"
            "                    the --layers ones (nextn_predict_layers; GLM-4.5's files\n"
            "                    have 1)\n"
            "  --qk-norm         glm4moe: per-head q/k norms (GLM-4.5 355B; Air has none)\n"
            "  --exact-quant     quantize every row with the reference quantizer; by default\n"
            "                    tensors in a block type with >= 2^20 weights and >= 512 rows\n"
            "                    are resampled from 256 exactly quantized rows (fast; every\n"
            "                    block still valid)\n"
            "  --seed S          weight seed, 0..2^64-1 (default 1)\n"
            "  -t, --threads N   threads making rows, 1..%d (default: online CPUs, here %d);\n"
            "                    the file is the same for every N\n"
            "  -o, --output FILE output path (required): a regular file or a new name (a link is\n"
            "                    followed); written as FILE.partial, renamed at the end\n"
            "  -h, --help        this text\n",
            SL_SYNTH_MAX_EXPERTS, SL_SYNTH_MIN_VOCAB, SL_SYNTH_MAX_THREADS,
            sl_synth_default_threads());
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "mkmodel: <message>" and returns the usage exit status 2. */
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mkmodel: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(tools/run mkmodel --help for usage)\n");
    va_end(ap);
    return 2;
}

typedef struct uflag {
    const char *name;
    size_t offset;      /* into sl_synth_params */
    bool given;
    uint32_t value;
} uflag;

int sl_cli_mkmodel(int argc, char **argv)
{
    static const sl_frange k_finite = {-DBL_MAX, DBL_MAX, false, false};
    sl_error pe;
    uflag uf[] = {
        {"--layers", offsetof(sl_synth_params, n_layer), false, 0},
        {"--dim", offsetof(sl_synth_params, n_embd), false, 0},
        {"--ffn", offsetof(sl_synth_params, n_ff), false, 0},
        {"--experts", offsetof(sl_synth_params, n_expert), false, 0},
        {"--top-k", offsetof(sl_synth_params, n_expert_used), false, 0},
        {"--heads", offsetof(sl_synth_params, n_head), false, 0},
        {"--kv-heads", offsetof(sl_synth_params, n_head_kv), false, 0},
        {"--vocab", offsetof(sl_synth_params, n_vocab), false, 0},
        {"--ctx", offsetof(sl_synth_params, n_ctx), false, 0},
        {"--shared-ffn", offsetof(sl_synth_params, n_ff_shexp), false, 0},
        {"--sliding-window", offsetof(sl_synth_params, n_swa), false, 0},
        {"--router-topics", offsetof(sl_synth_params, router_topics), false, 0},
        {"--topic-run", offsetof(sl_synth_params, topic_run), false, 0},
        {"--longrope", offsetof(sl_synth_params, longrope), false, 0},
        {"--attn-temp", offsetof(sl_synth_params, attn_temp), false, 0},
        {"--nextn", offsetof(sl_synth_params, nextn), false, 0},
        {"--head-dim", offsetof(sl_synth_params, head_dim), false, 0},
    };
    const size_t n_uf = sizeof uf / sizeof uf[0];
    const char *arch_s = NULL, *type_s = NULL, *out = NULL, *act_s = NULL;
    bool skew_given = false, nskew_given = false, seed_given = false, exact = false;
    double rope_theta = 0;
    bool legacy_kv_b = false, biases = false, qk_norm = false;
    double skew = 0, nskew = 0;
    uint64_t seed = 0, threads = 0;
    char seen[32][64]; /* the flags given so far, each once (by its first name) */
    size_t n_seen = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        /* --flag=value and --flag value */
        char name[64];
        const char *val = NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq) {
            if ((size_t)(eq - a) >= sizeof name) return usage_error("unknown flag '%s'", a);
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        const char *canon = !strcmp(name, "--output")    ? "-o"
                            : !strcmp(name, "--threads") ? "-t"
                                                         : name;
        for (size_t k = 0; k < n_seen; k++)
            if (!strcmp(seen[k], canon)) return usage_error("%s given twice", name);
        if (n_seen < sizeof seen / sizeof *seen)
            snprintf(seen[n_seen++], sizeof *seen, "%s", canon);
        if (!strcmp(name, "--exact-quant") || !strcmp(name, "--legacy-kv-b") ||
            !strcmp(name, "--biases") || !strcmp(name, "--qk-norm")) {
            if (val) return usage_error("%s takes no value", name);
            if (!strcmp(name, "--exact-quant")) exact = true;
            else if (!strcmp(name, "--biases")) biases = true;
            else if (!strcmp(name, "--qk-norm")) qk_norm = true;
            else legacy_kv_b = true;
            continue;
        }
        bool known = !strcmp(name, "--arch") || !strcmp(name, "--type") ||
                     !strcmp(name, "--activation") ||
                     !strcmp(name, "-o") || !strcmp(name, "--output") ||
                     !strcmp(name, "--router-skew") || !strcmp(name, "--neuron-skew") ||
                     !strcmp(name, "--rope-theta") ||
                     !strcmp(name, "--seed") || !strcmp(name, "-t") ||
                     !strcmp(name, "--threads");
        for (size_t k = 0; k < n_uf && !known; k++) known = !strcmp(name, uf[k].name);
        if (!known) return usage_error("unknown flag '%s'", a);
        if (!val) {
            if (i + 1 >= argc) return usage_error("%s: missing value", name);
            val = argv[++i];
        }
        if (!strcmp(name, "--arch")) {
            arch_s = val;
        } else if (!strcmp(name, "--type")) {
            type_s = val;
        } else if (!strcmp(name, "--activation")) {
            if (strcmp(val, "silu") && strcmp(val, "relu"))
                return usage_error("--activation '%s': expected silu or relu", val);
            act_s = val;
        } else if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
            if (!*val) return usage_error("%s: empty file name", name);
            out = val;
        } else if (!strcmp(name, "--router-skew")) {
            if (sl_parse_f64(name, val, k_finite, &skew, &pe)) return usage_error("%s", pe.msg);
            skew_given = true;
        } else if (!strcmp(name, "--rope-theta")) {
            if (sl_parse_f64(name, val, k_finite, &rope_theta, &pe))
                return usage_error("%s", pe.msg);
        } else if (!strcmp(name, "--neuron-skew")) {
            if (sl_parse_f64(name, val, k_finite, &nskew, &pe)) return usage_error("%s", pe.msg);
            nskew_given = true;
        } else if (!strcmp(name, "-t") || !strcmp(name, "--threads")) {
            if (sl_parse_u64(name, val, (sl_urange){1, SL_SYNTH_MAX_THREADS}, &threads, &pe))
                return usage_error("%s", pe.msg);
        } else if (!strcmp(name, "--seed")) {
            if (sl_parse_u64(name, val, (sl_urange){0, UINT64_MAX}, &seed, &pe))
                return usage_error("%s", pe.msg);
            seed_given = true;
        } else {
            for (size_t k = 0; k < n_uf; k++) {
                if (strcmp(name, uf[k].name)) continue;
                uint64_t v;
                if (sl_parse_u64(name, val, (sl_urange){0, UINT32_MAX}, &v, &pe))
                    return usage_error("%s", pe.msg);
                uf[k].given = true;
                uf[k].value = (uint32_t)v;
            }
        }
    }
    if (!out) return usage_error("-o FILE is required");
    {
        /* the writer checks the target again when it creates the file (base/file.h); this
         * says it before the model is built */
        char *target;
        bool exists;
        struct stat st;
        sl_error e;
        if (sl_file_output_resolve(out, &target, &exists, &st, &e)) {
            fprintf(stderr, "mkmodel: -o %s\n", e.msg);
            return 1;
        }
        free(target);
    }

    sl_error err;
    sl_synth_arch arch = SL_SYNTH_QWEN3MOE;
    if (arch_s && sl_synth_arch_parse(arch_s, &arch, &err) != SL_OK)
        return usage_error("%s", err.msg);
    if (act_s && arch != SL_SYNTH_LLAMA)
        return usage_error("--activation %s: only --arch llama takes it (%s's FFN activation "
                           "is its own)", act_s, sl_synth_arch_name(arch));
    sl_synth_params p;
    sl_synth_defaults(arch, &p);
    for (size_t k = 0; k < n_uf; k++) {
        if (!uf[k].given) continue;
        if (!sl_synth_arch_is_moe(arch) && (!strcmp(uf[k].name, "--experts") ||
                                            !strcmp(uf[k].name, "--top-k")))
            return usage_error("%s: %s is dense and has no experts (use --arch mixtral for "
                               "llama-style experts)",
                               uf[k].name, sl_synth_arch_name(arch));
        memcpy((char *)&p + uf[k].offset, &uf[k].value, sizeof(uint32_t));
    }
    /* olmoe defaults kv-heads to the heads given, as it needs them equal */
    bool kv_given = false;
    for (size_t k = 0; k < n_uf; k++) kv_given |= uf[k].given && !strcmp(uf[k].name, "--kv-heads");
    if (arch == SL_SYNTH_OLMOE && !kv_given) p.n_head_kv = p.n_head;
    /* qwen2moe's shared width follows --ffn unless given */
    bool ffn_given = false, shexp_given = false;
    for (size_t k = 0; k < n_uf; k++) {
        ffn_given |= uf[k].given && !strcmp(uf[k].name, "--ffn");
        shexp_given |= uf[k].given && !strcmp(uf[k].name, "--shared-ffn");
    }
    if (arch == SL_SYNTH_QWEN2MOE && ffn_given && !shexp_given) p.n_ff_shexp = 2 * p.n_ff;
    if ((arch == SL_SYNTH_QWEN3NEXT || arch == SL_SYNTH_QWEN35MOE ||
         arch == SL_SYNTH_BAILINGMOE2 || arch == SL_SYNTH_ERNIE4_5_MOE ||
         arch == SL_SYNTH_HUNYUAN_MOE) && ffn_given &&
        !shexp_given)
        p.n_ff_shexp = p.n_ff;
    if (type_s) {
        const sl_gguf_type_info *ti = sl_gguf_type_by_name(type_s);
        if (!ti || sl_synth_file_type(ti->code) == UINT32_MAX)
            return usage_error("--type '%s': unsupported (%s)", type_s, SL_SYNTH_TYPES);
        p.type = ti->code;
        /* a block type's rows are whole blocks: the widths not given grow to a multiple of
         * its block (K-quants: 256), so `mkmodel --type Q4_K` works with the defaults */
        const uint32_t bs = ti->block_size;
        bool dim_given = false;
        for (size_t k = 0; k < n_uf; k++) dim_given |= uf[k].given && !strcmp(uf[k].name, "--dim");
        if (!dim_given) p.n_embd = (p.n_embd + bs - 1) / bs * bs;
        if (!ffn_given) p.n_ff = (p.n_ff + bs - 1) / bs * bs;
        if (!shexp_given) p.n_ff_shexp = (p.n_ff_shexp + bs - 1) / bs * bs;
    }
    if (skew_given) p.router_skew = skew;
    if (nskew_given) p.neuron_skew = nskew;
    p.rope_theta = rope_theta;
    if (seed_given) p.seed = seed;
    p.exact_quant = exact;
    p.legacy_kv_b = legacy_kv_b;
    p.biases = biases;
    p.qk_norm = qk_norm;
    p.relu = act_s && !strcmp(act_s, "relu");
    if (sl_synth_validate(&p, &err) != SL_OK) return usage_error("%s", err.msg);

    sl_synth_summary sum;
    const double t0 = sl_cli_now_s();
    sl_cli_progress bar;
    sl_cli_progress_start(&bar, "mkmodel: writing");
    sl_cli_interrupt_catch();
    const sl_status wst = sl_synth_write(&p, out, (int)threads, sl_cli_progress_update, &bar,
                                         sl_cli_interrupted, NULL, &sum, &err);
    sl_cli_progress_end(&bar);
    if (wst != SL_OK && sl_cli_interrupt_status()) {
        fprintf(stderr, "mkmodel: %s: stopped, nothing written to %s, its .partial file "
                "removed (%s)\n", sl_cli_interrupt_name(), out, err.msg);
        return sl_cli_interrupt_status();
    }
    if (wst != SL_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.msg);
        return 1;
    }
    const double dt = sl_cli_now_s() - t0;
    const sl_gguf_type_info *ti = sl_gguf_type_get(p.type);
    printf("mkmodel: wrote %s: %s, %u layers, dim %u, ffn %u, ", out, sl_synth_arch_name(arch),
           p.n_layer, p.n_embd, p.n_ff);
    if (p.n_expert) printf("%u experts top-%u skew %g, ", p.n_expert, p.n_expert_used,
                           p.router_skew);
    if (p.router_topics) printf("%u topics of %u tokens, ", p.router_topics, p.topic_run);
    printf("neuron skew %g, %s, ", p.neuron_skew, p.relu ? "ReLU FFN" : "arch activation");
    if (p.n_ff_shexp) printf("shared ffn %u, ", p.n_ff_shexp);
    if (p.n_swa) printf("sliding window %u, ", p.n_swa);
    printf("vocab %u, %s, %u tensors, %" PRIu64 " data bytes, seed %" PRIu64 "\n", p.n_vocab,
           ti ? ti->name : "?", sum.n_tensors, sum.data_bytes, p.seed);
    printf("mkmodel: %.2f s on %d threads: %.1f MB/s, %.1f MB/s per thread%s\n", dt,
           sum.n_threads, dt > 0 ? sum.data_bytes / dt / 1e6 : 0.0,
           dt > 0 ? sum.data_bytes / dt / 1e6 / sum.n_threads : 0.0,
           exact ? " (--exact-quant)" : "");
    return 0;
}
