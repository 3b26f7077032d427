/* Synthetic models of real architectures, written through the streaming GGUF writer.
 *
 * Layout (ggml ne order, ne[0] contiguous = a matmul's input dimension), as llama.cpp's
 * llama-model.cpp creates the tensors (E = n_embd, H = n_head, Hkv = n_head_kv, D = E / H,
 * F = n_ff, S = n_ff_shexp, X = n_expert, V = n_vocab):
 *   token_embd [E, V]   output_norm [E] (F32)   output [E, V] (not gemma2/3: tied to token_embd)
 *   blk.i.attn_norm [E] (F32)   attn_q [E, H*D]   attn_k, attn_v [E, Hkv*D]   attn_output [H*D, E]
 *   qwen2moe, qwen2: attn_q.bias [H*D], attn_k.bias, attn_v.bias [Hkv*D] (F32)
 *   qwen3moe, qwen3, gemma3: attn_q_norm, attn_k_norm [D] (F32); olmoe: attn_q_norm, attn_k_norm [E]
 *     (F32, which is why olmoe needs Hkv == H: llama.cpp sizes k_norm by n_embd, not Hkv*D)
 *   gemma2/3: post_attention_norm [E] (F32, after attention, before the residual add)
 *   blk.i.ffn_norm [E] (F32)
 *   dense (llama, qwen2, qwen3, gemma2/3, granite): ffn_gate, ffn_up [E, F]   ffn_down [F, E]
 *   gemma2/3: post_ffw_norm [E] (F32, after the FFN, before the residual add)
 *   MoE: ffn_gate_inp [E, X] (F32, the router)   ffn_gate_exps, ffn_up_exps [E, F, X]
 *        ffn_down_exps [F, E, X]   (mixtral is arch "llama" with these merged 3-D experts)
 *   qwen2moe shared expert: ffn_gate_inp_shexp [E] (F32, its sigmoid gate)
 *        ffn_gate_shexp, ffn_up_shexp [E, S]   ffn_down_shexp [S, E]
 *   deepseek2, phi3, qwen3next, glm4moe: their own layouts (synth_plan.c)
 * Matmul weights (token_embd and output included) get the requested type (MXFP4: the routed
 * experts only, the others Q8_0, as gpt-oss's files and llama.cpp's MXFP4_MOE); norms, biases, the
 * router and the shared-expert gate stay F32, as llama.cpp's converter and quantizer keep them
 * (1-D tensors and ffn_gate_inp are never quantized). FFN down projections whose rows (--ffn,
 * --shared-ffn) are not whole 256-blocks of a K-quant or IQ4_XS take llama.cpp's fallback type
 * (sl_synth_fallback_type: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL), as its
 * quantizer does.
 * Gemma norms: convert_hf_to_gguf.py (Gemma3Model.modify_tensors) stores 1 + w for every
 * "*norm.weight" (HF's Gemma3RMSNorm computes x * (1 + w)), so llama.cpp and we multiply by the
 * stored value as for every other arch; the synthetic stored values are 1 + 0.02 g like all
 * norms here.
 *
 * Weights (synth_rows.c): every row has its own xoshiro256** stream seeded from (seed, tensor
 * name, row), so values depend on nothing else and rows are made on many threads
 * (synth_stream.c) with the same bytes for any thread count. Entries are Irwin-Hall(4)
 * "Gaussian-ish" numbers; matmul weights are scaled by 1/sqrt(fan_in) (fan_in = ne[0]); norms
 * are 1 + 0.02 g. Big tensors in a block type are resampled from a pool of exactly quantized
 * rows (synth_rows.c says why and how); FFN gate/up rows carry a Zipf neuron skew.
 * Metadata: besides llama.cpp's keys, sluice.synth.neuron_skew (and, for MoE archs,
 * sluice.synth.router_skew) record the skews, F32, so tools can tell what to expect.
 *
 * Router (MoE archs): expert popularity follows Zipf, p_e ~ 1 / rank_e^Z, with ranks a random
 * permutation per layer. Mechanism: hidden dimension 0 is a reserved "bias channel".
 *   - Every token embedding holds C = sqrt(E - 1) in dimension 0 (about half the row's energy,
 *     the other entries being unit-variance), so after RMSNorm x[0] ~ sqrt(E / 2) for every
 *     token.
 *   - No layer writes dimension 0 (row 0 of attn_output, ffn_down(_exps) is zero) and none
 *     reads it (column 0 of attn_q/k/v, ffn_gate/up(_exps), output is zero), so the channel
 *     survives every layer unchanged and does not act as a bias anywhere else.
 *   - Router row e has w[e][0] = -Z ln(rank_e) / sqrt(E / 2), giving expert e the logit offset
 *     ln p_e + const; the other entries are random with total logit std ~1 per token, so
 *     which experts a token picks varies, with frequencies ordered by p_e (softmax with
 *     Gumbel-like noise picks expert e with probability ~ p_e). Z = 0 gives uniform routing.
 *   Deeper layers see larger residual norms, so the effective skew weakens somewhat with depth.
 *
 * Temporal locality (--router-topics N, --topic-run R; MoE archs): real routers differ — some
 * have strong static skew, others little, but consecutive tokens of one topic reuse experts.
 * Token v belongs to topic (v / R) mod N; channels 1 .. N are reserved like channel 0, token
 * v's embedding holding sqrt(E - 1) in channel 1 + its topic; each layer deals its experts
 * into N groups (its popularity permutation, round-robin), and router row e reads channel 1 +
 * its group with a logit of SL__SYNTH_TOPIC_LOGIT, so a token prefers its topic's experts.
 * Output row v is token v - 1's embedding (reserved columns zero; the rows, like the
 * embedding's, made exactly), and the embeddings are SL__SYNTH_TOPIC_EMBD_SCALE times louder
 * than the layers' outputs: the residual stream keeps the current token's embedding, so
 * greedy decoding walks v, v + 1, v + 2, ... and the topic drifts every R tokens. With
 * --router-skew 0 the long-run expert frequencies are flat while any R consecutive tokens use
 * about k * X / N experts per layer: a profile's static top list covers little, a cache of
 * recent experts a lot.
 */
#include "tools/synth/synth.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
#include "tools/synth/synth_impl.h"
#include "tools/synth/synth_vocab.h"

/* ---- architecture table ----------------------------------------------------------------- */

typedef struct arch_info {
    const char *variant;    /* --arch name of a variant ("mixtral"); NULL: general.architecture's */
    sl_arch gguf_arch;      /* general.architecture (gguf/arch.h's one list) */
    bool moe;
    bool bpe;               /* GPT-2 byte-level BPE (else SentencePiece) */
    const char *bpe_pre;    /* tokenizer.ggml.pre */
    float rope_base;        /* rope.freq_base (gemma3: of the global layers) */
    float rms_eps;
    sl__synth_vocab_style vocab;
} arch_info;

static const arch_info k_arch[SL_SYNTH_ARCH_COUNT] = {
    [SL_SYNTH_LLAMA] = {NULL, SL_ARCH_LLAMA, false, false, NULL, 10000.0f, 1e-5f, SL__VOCAB_SPM},
    [SL_SYNTH_MIXTRAL] = {"mixtral", SL_ARCH_LLAMA, true, false, NULL, 1000000.0f, 1e-5f,
                          SL__VOCAB_SPM},
    [SL_SYNTH_QWEN3MOE] = {NULL, SL_ARCH_QWEN3MOE, true, true, "qwen2", 1000000.0f, 1e-6f,
                           SL__VOCAB_BPE_IM_END},
    [SL_SYNTH_OLMOE] = {NULL, SL_ARCH_OLMOE, true, true, "olmo", 10000.0f, 1e-5f, SL__VOCAB_BPE},
    /* Qwen1.5-MoE-A2.7B: rope_theta 1e6, rms_norm_eps 1e-6, eos <|endoftext|> */
    [SL_SYNTH_QWEN2MOE] = {NULL, SL_ARCH_QWEN2MOE, true, true, "qwen2", 1000000.0f, 1e-6f,
                           SL__VOCAB_BPE},
    /* Gemma 3: rope_theta 1e6 (global layers; local layers use 10000, fixed in llama.cpp),
     * rms_norm_eps 1e-6 */
    [SL_SYNTH_GEMMA3] = {NULL, SL_ARCH_GEMMA3, false, false, NULL, 1000000.0f, 1e-6f,
                         SL__VOCAB_SPM_GEMMA},
    /* gpt-oss-20b: rope_theta 150000, rms_norm_eps 1e-5; its o200k vocabulary's pre-tokenizer
     * is "gpt-4o" */
    [SL_SYNTH_GPT_OSS] = {NULL, SL_ARCH_GPT_OSS, true, true, "gpt-4o", 150000.0f, 1e-5f,
                          SL__VOCAB_BPE},
    /* DeepSeek-V3: rope_theta 10000, rms_norm_eps 1e-6, pre-tokenizer "deepseek-v3" (not
     * implemented by runtime/text/pretok.c: the synthetic vocabulary uses the default one) */
    [SL_SYNTH_DEEPSEEK2] = {NULL, SL_ARCH_DEEPSEEK2, true, true, "default", 10000.0f, 1e-6f,
                            SL__VOCAB_BPE},
    /* Qwen2.5: rope_theta 1e6, rms_norm_eps 1e-6; Qwen3 the same, eos <|im_end|> */
    [SL_SYNTH_QWEN2] = {NULL, SL_ARCH_QWEN2, false, true, "qwen2", 1000000.0f, 1e-6f,
                        SL__VOCAB_BPE},
    [SL_SYNTH_QWEN3] = {NULL, SL_ARCH_QWEN3, false, true, "qwen2", 1000000.0f, 1e-6f,
                        SL__VOCAB_BPE_IM_END},
    /* Gemma 2: rope_theta 10000 on every layer, rms_norm_eps 1e-6 */
    [SL_SYNTH_GEMMA2] = {NULL, SL_ARCH_GEMMA2, false, false, NULL, 10000.0f, 1e-6f,
                         SL__VOCAB_SPM_GEMMA},
    /* Granite 3.0: rope_theta 10000, rms_norm_eps 1e-5; its pre-tokenizer "refact" is not
     * implemented by runtime/text/pretok.c, so the synthetic vocabulary uses "default" */
    [SL_SYNTH_GRANITE] = {NULL, SL_ARCH_GRANITE, false, true, "default", 10000.0f, 1e-5f,
                          SL__VOCAB_BPE},
    /* Phi-3 / Phi-4-mini: rope_theta 10000, rms_norm_eps 1e-5, llama's SentencePiece with
     * Phi-3's "<|endoftext|>" (llama.cpp refuses a "phi3"-named vocabulary without it) */
    [SL_SYNTH_PHI3] = {NULL, SL_ARCH_PHI3, false, false, NULL, 10000.0f, 1e-5f,
                       SL__VOCAB_SPM_PHI3},
    /* Qwen3-Next-80B-A3B: rope_theta 1e7, rms_norm_eps 1e-6, Qwen's BPE with <|im_end|> */
    [SL_SYNTH_QWEN3NEXT] = {NULL, SL_ARCH_QWEN3NEXT, true, true, "qwen2", 10000000.0f, 1e-6f,
                            SL__VOCAB_BPE_IM_END},
    /* GLM-4.5 / 4.5-Air: rope_theta 1e6, rms_norm_eps 1e-5, pre-tokenizer "glm4" */
    [SL_SYNTH_GLM4MOE] = {NULL, SL_ARCH_GLM4MOE, true, true, "glm4", 1000000.0f, 1e-5f,
                          SL__VOCAB_BPE},
    /* Qwen3.5: rope_theta 1e7, rms_norm_eps 1e-6, pre-tokenizer "qwen35", <|im_end|> */
    [SL_SYNTH_QWEN35] = {NULL, SL_ARCH_QWEN35, false, true, "qwen35", 10000000.0f, 1e-6f,
                         SL__VOCAB_BPE_IM_END},
    [SL_SYNTH_QWEN35MOE] = {NULL, SL_ARCH_QWEN35MOE, true, true, "qwen35", 10000000.0f, 1e-6f,
                            SL__VOCAB_BPE_IM_END},
    /* MiniMax-M2: rope_theta 5e6, rms_norm_eps 1e-6, pre-tokenizer "minimax-m2" */
    [SL_SYNTH_MINIMAX_M2] = {NULL, SL_ARCH_MINIMAX_M2, true, true, "minimax-m2", 5000000.0f,
                             1e-6f, SL__VOCAB_BPE},
    /* dots.llm1: rope_theta 1e7, rms_norm_eps 1e-6, Qwen's BPE */
    [SL_SYNTH_DOTS1] = {NULL, SL_ARCH_DOTS1, true, true, "qwen2", 10000000.0f, 1e-6f,
                        SL__VOCAB_BPE},
    /* Ling-mini-2.0: rope_theta 6e5, rms_norm_eps 1e-6, pre-tokenizer "bailingmoe2" */
    [SL_SYNTH_BAILINGMOE2] = {NULL, SL_ARCH_BAILINGMOE2, true, true, "bailingmoe2", 600000.0f,
                              1e-6f, SL__VOCAB_BPE},
    /* Qwen3-VL: rope_theta 5e6, rms_norm_eps 1e-6, Qwen's BPE with <|im_end|> */
    [SL_SYNTH_QWEN3VL] = {NULL, SL_ARCH_QWEN3VL, false, true, "qwen2", 5000000.0f, 1e-6f,
                          SL__VOCAB_BPE_IM_END},
    [SL_SYNTH_QWEN3VLMOE] = {NULL, SL_ARCH_QWEN3VLMOE, true, true, "qwen2", 5000000.0f, 1e-6f,
                             SL__VOCAB_BPE_IM_END},
    /* ERNIE 4.5: rope_theta 5e5, rms_norm_eps 1e-5, SentencePiece */
    [SL_SYNTH_ERNIE4_5] = {NULL, SL_ARCH_ERNIE4_5, false, false, NULL, 500000.0f, 1e-5f,
                           SL__VOCAB_SPM},
    [SL_SYNTH_ERNIE4_5_MOE] = {NULL, SL_ARCH_ERNIE4_5_MOE, true, false, NULL, 500000.0f, 1e-5f,
                               SL__VOCAB_SPM},
    /* Hunyuan-A13B: rope base 1e4 * 1000^(128/126) (its converter's NTK alpha), eps 1e-5 */
    [SL_SYNTH_HUNYUAN_MOE] = {NULL, SL_ARCH_HUNYUAN_MOE, true, true, "hunyuan", 11158840.0f,
                              1e-5f, SL__VOCAB_BPE},
};

/* Qwen3-VL's language models (qwen3 / qwen3moe with M-RoPE). */
static bool qwen3vl(sl_synth_arch a)
{
    return a == SL_SYNTH_QWEN3VL || a == SL_SYNTH_QWEN3VLMOE;
}

/* The archs with a leading dense layer (sl__synth_mla_of's dense). */
static bool dense_lead(sl_synth_arch a)
{
    return a == SL_SYNTH_DEEPSEEK2 || a == SL_SYNTH_GLM4MOE || a == SL_SYNTH_DOTS1 ||
           a == SL_SYNTH_BAILINGMOE2 || a == SL_SYNTH_ERNIE4_5_MOE;
}

/* The Gated DeltaNet archs (qwen3next's mixers). */
static bool gdn(sl_synth_arch a)
{
    return a == SL_SYNTH_QWEN3NEXT || a == SL_SYNTH_QWEN35 || a == SL_SYNTH_QWEN35MOE;
}

/* Those with a shared expert of their own width (--shared-ffn). */
static bool shared_ffn(sl_synth_arch a)
{
    return a == SL_SYNTH_QWEN2MOE || a == SL_SYNTH_QWEN3NEXT || a == SL_SYNTH_QWEN35MOE ||
           a == SL_SYNTH_BAILINGMOE2 || a == SL_SYNTH_ERNIE4_5_MOE || a == SL_SYNTH_HUNYUAN_MOE;
}

/* Granite 3.0 2B's multipliers (embedding_multiplier, residual_multiplier,
 * attention_multiplier, logits_scaling) */
static const float k_granite_scale[4] = {12.0f, 0.22f, 0.015625f, 8.0f};
/* Gemma 2's soft-caps: attention 50, final 30. The synthetic attention logits are small (a
 * cap of 50 changes the logits by ~1e-4, the F32 test tolerance), so the synthetic file caps
 * attention at 10 (~3e-3); the synthetic output logits (tied, ~10-250) meet the real 30. */
static const float k_gemma2_softcap[2] = {10.0f, 30.0f};


const char *sl_synth_arch_name(sl_synth_arch a)
{
    if ((unsigned)a >= SL_SYNTH_ARCH_COUNT) return "?";
    return k_arch[a].variant ? k_arch[a].variant : sl_arch_name(k_arch[a].gguf_arch);
}

bool sl_synth_arch_is_moe(sl_synth_arch a)
{
    return (unsigned)a < SL_SYNTH_ARCH_COUNT && k_arch[a].moe;
}

sl_status sl_synth_arch_parse(const char *s, sl_synth_arch *out, sl_error *err)
{
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int a = 0; a < SL_SYNTH_ARCH_COUNT; a++) {
        const char *name = sl_synth_arch_name((sl_synth_arch)a);
        if (s && !strcmp(s, name)) {
            *out = (sl_synth_arch)a;
            return SL_OK;
        }
        if (len < sizeof list) {
            const int k = snprintf(list + len, sizeof list - len, "%s%s", a ? ", " : "", name);
            if (k > 0) len += (size_t)k;
        }
    }
    return sl_error_set(err, SL_ERR_INVALID, "--arch '%s': unknown architecture (%s)",
                        s ? s : "(null)", list);
}

void sl_synth_defaults(sl_synth_arch a, sl_synth_params *p)
{
    memset(p, 0, sizeof *p);
    p->arch = a;
    p->n_layer = 2;
    p->n_embd = 64;
    p->n_ff = 128;
    p->n_expert = k_arch[a].moe ? 8 : 0;
    p->n_expert_used = k_arch[a].moe ? 2 : 0;
    p->n_head = 4;
    p->n_head_kv = a == SL_SYNTH_OLMOE || a == SL_SYNTH_DOTS1 ? 4 : 2;
    p->n_vocab = 512;
    p->n_ctx = 256;
    p->type = SL_GGML_F32;
    p->router_skew = 1.0;
    p->topic_run = 16;
    p->neuron_skew = 0.0; /* on, it makes small models' logits sensitive to routing flips */
    p->seed = 1;
    if (a == SL_SYNTH_QWEN2MOE) p->n_ff_shexp = 2 * p->n_ff;
    if (gdn(a)) p->n_layer = 4; /* full_attention_interval 4: layers 0-2 linear, 3 full */
    if (a == SL_SYNTH_QWEN3NEXT || a == SL_SYNTH_QWEN35MOE || a == SL_SYNTH_BAILINGMOE2 ||
        a == SL_SYNTH_ERNIE4_5_MOE || a == SL_SYNTH_HUNYUAN_MOE)
        p->n_ff_shexp = p->n_ff;
    if (a == SL_SYNTH_GEMMA3) {
        p->n_layer = 6; /* llama.cpp's Gemma 3 pattern: every 6th layer is global */
        p->n_swa = 8;
    }
    if (a == SL_SYNTH_GEMMA2) p->n_swa = 8; /* layer 0 slides, layer 1 is global */
    if (a == SL_SYNTH_GPT_OSS) {
        p->n_expert = 4;
        p->n_swa = 8; /* gpt-oss: 128; even layers slide */
    }
    if (dense_lead(a)) p->n_layer = 3; /* a dense layer, then two MoE layers */
}

uint32_t sl_synth_file_type(uint32_t type)
{
    switch (type) { /* llama.h enum llama_ftype */
    case SL_GGML_F32: return 0;   /* LLAMA_FTYPE_ALL_F32 */
    case SL_GGML_F16: return 1;   /* LLAMA_FTYPE_MOSTLY_F16 */
    case SL_GGML_Q4_0: return 2;  /* LLAMA_FTYPE_MOSTLY_Q4_0 */
    case SL_GGML_Q4_1: return 3;  /* LLAMA_FTYPE_MOSTLY_Q4_1 */
    case SL_GGML_Q8_0: return 7;  /* LLAMA_FTYPE_MOSTLY_Q8_0 */
    case SL_GGML_Q5_0: return 8;  /* LLAMA_FTYPE_MOSTLY_Q5_0 */
    case SL_GGML_Q5_1: return 9;  /* LLAMA_FTYPE_MOSTLY_Q5_1 */
    /* K-quant files with every matmul weight of one type are the _S ("small") mixes: the _M
     * mixes promote some tensors (attn_v, ffn_down, output) to a wider type, which we don't. */
    case SL_GGML_Q2_K: return 10; /* LLAMA_FTYPE_MOSTLY_Q2_K */
    case SL_GGML_Q3_K: return 11; /* LLAMA_FTYPE_MOSTLY_Q3_K_S */
    case SL_GGML_Q4_K: return 14; /* LLAMA_FTYPE_MOSTLY_Q4_K_S */
    case SL_GGML_Q5_K: return 16; /* LLAMA_FTYPE_MOSTLY_Q5_K_S */
    case SL_GGML_Q6_K: return 18; /* LLAMA_FTYPE_MOSTLY_Q6_K */
    case SL_GGML_BF16: return 32; /* LLAMA_FTYPE_MOSTLY_BF16 */
    case SL_GGML_IQ4_NL: return 25; /* LLAMA_FTYPE_MOSTLY_IQ4_NL */
    case SL_GGML_IQ4_XS: return 30; /* LLAMA_FTYPE_MOSTLY_IQ4_XS */
    /* gpt-oss's own files: experts MXFP4, the other matmul weights Q8_0 */
    case SL_GGML_MXFP4: return 38; /* LLAMA_FTYPE_MOSTLY_MXFP4_MOE */
    default: return UINT32_MAX;
    }
}

uint32_t sl_synth_fallback_type(uint32_t type)
{
    switch (type) { /* llama-quant.cpp tensor_type_fallback */
    case SL_GGML_Q2_K:
    case SL_GGML_Q3_K: return SL_GGML_Q4_0;
    case SL_GGML_Q4_K: return SL_GGML_Q5_0;
    case SL_GGML_Q5_K: return SL_GGML_Q5_1;
    case SL_GGML_Q6_K: return SL_GGML_Q8_0;
    case SL_GGML_IQ4_XS: return SL_GGML_IQ4_NL;
    default: return type;
    }
}

static sl_status check_range(const char *flag, uint64_t v, uint64_t lo, uint64_t hi,
                             sl_error *err)
{
    if (v < lo || v > hi)
        return sl_error_set(err, SL_ERR_RANGE, "%s %llu: out of range [%llu, %llu]", flag,
                            (unsigned long long)v, (unsigned long long)lo,
                            (unsigned long long)hi);
    return SL_OK;
}

sl_status sl_synth_validate(const sl_synth_params *p, sl_error *err)
{
    sl_status st;
    if ((unsigned)p->arch >= SL_SYNTH_ARCH_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "--arch: invalid architecture %d", (int)p->arch);
    const arch_info *ai = &k_arch[p->arch];
    if ((st = check_range("--layers", p->n_layer, 1, 4096, err))) return st;
    if ((st = check_range("--dim", p->n_embd, 2, 1 << 20, err))) return st;
    if ((st = check_range("--ffn", p->n_ff, 1, 1 << 22, err))) return st;
    if ((st = check_range("--heads", p->n_head, 1, p->n_embd, err))) return st;
    if ((st = check_range("--kv-heads", p->n_head_kv, 1, p->n_head, err))) return st;
    if ((st = check_range("--vocab", p->n_vocab, SL_SYNTH_MIN_VOCAB, SL_SYNTH_MAX_VOCAB, err)))
        return sl_error_set(err, st,
                            "--vocab %u: must be in [%u, %u]: the tokenizer's base vocabulary "
                            "alone has up to %u tokens (3 or 4 special + 256 byte tokens)",
                            p->n_vocab, (unsigned)SL_SYNTH_MIN_VOCAB,
                            (unsigned)SL_SYNTH_MAX_VOCAB, (unsigned)SL_SYNTH_BASE_VOCAB);
    if ((st = check_range("--ctx", p->n_ctx, 1, 1 << 24, err))) return st;
    if (p->n_embd % p->n_head)
        return sl_error_set(err, SL_ERR_INVALID, "--heads %u: --dim %u is not divisible by it",
                            p->n_head, p->n_embd);
    if ((p->n_embd / p->n_head) % 2)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--heads %u: head dimension --dim/--heads = %u is odd; RoPE rotates "
                            "pairs of dimensions",
                            p->n_head, p->n_embd / p->n_head);
    if (p->n_head % p->n_head_kv)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--kv-heads %u: --heads %u is not divisible by it", p->n_head_kv,
                            p->n_head);
    if (shared_ffn(p->arch)) {
        if ((st = check_range("--shared-ffn", p->n_ff_shexp, 1, 1 << 22, err))) return st;
    } else if (p->n_ff_shexp) {
        return sl_error_set(err, SL_ERR_INVALID,
                            "--shared-ffn %u: only qwen2moe, qwen3next and qwen35moe have a "
                            "shared expert of their own width (not %s)",
                            p->n_ff_shexp, sl_synth_arch_name(p->arch));
    }
    if (p->arch == SL_SYNTH_GEMMA3 || p->arch == SL_SYNTH_GPT_OSS ||
        p->arch == SL_SYNTH_GEMMA2) {
        if ((st = check_range("--sliding-window", p->n_swa, 1, 1 << 24, err))) return st;
    } else if (p->n_swa) {
        return sl_error_set(err, SL_ERR_INVALID,
                            "--sliding-window %u: only gemma3, gemma2 and gpt-oss have "
                            "sliding-window layers (not %s)", p->n_swa,
                            sl_synth_arch_name(p->arch));
    }
    if (p->biases && p->arch == SL_SYNTH_DEEPSEEK2)
        return sl_error_set(err, SL_ERR_INVALID, "--biases: deepseek2 (MLA) has no optional "
                            "biases");
    if (p->longrope && p->arch != SL_SYNTH_PHI3 && p->arch != SL_SYNTH_LLAMA &&
        p->arch != SL_SYNTH_GRANITE)
        return sl_error_set(err, SL_ERR_INVALID, "--longrope %u: only phi3, llama and granite "
                            "read LongRoPE factors (not %s)", p->longrope,
                            sl_synth_arch_name(p->arch));
    if (p->longrope && (p->longrope < 2 || p->longrope > (1u << 24)))
        return sl_error_set(err, SL_ERR_RANGE, "--longrope %u: the original context length "
                            "must be in [2, 2^24]", p->longrope);
    if (p->attn_temp && p->arch != SL_SYNTH_DEEPSEEK2)
        return sl_error_set(err, SL_ERR_INVALID, "--attn-temp %u: only deepseek2 reads an "
                            "attention temperature (not %s)", p->attn_temp,
                            sl_synth_arch_name(p->arch));
    if (p->legacy_kv_b && p->arch != SL_SYNTH_DEEPSEEK2)
        return sl_error_set(err, SL_ERR_INVALID, "--legacy-kv-b: only deepseek2 has an "
                            "attn_kv_b layout (not %s)", sl_synth_arch_name(p->arch));
    if (p->arch == SL_SYNTH_DEEPSEEK2) {
        const sl__synth_mla d = sl__synth_mla_of(p);
        if (d.rope < 2 || d.rope % 2 || d.nope < 1 || d.kv_lora < 1 || d.v < 1)
            return sl_error_set(err, SL_ERR_INVALID, "--dim %u / --heads %u: deepseek2's MLA "
                                "dimensions (nope %lld, rope %lld, kv_lora %lld, v %lld) need "
                                "an even rope part >= 2 (head dimension a multiple of 4)",
                                p->n_embd, p->n_head, (long long)d.nope, (long long)d.rope,
                                (long long)d.kv_lora, (long long)d.v);
        if (d.dense > p->n_layer)
            return sl_error_set(err, SL_ERR_INVALID, "deepseek2: %lld leading dense layers of "
                                "--layers %u", (long long)d.dense, p->n_layer);
    }
    if ((p->arch == SL_SYNTH_GLM4MOE || p->arch == SL_SYNTH_MINIMAX_M2 ||
         p->arch == SL_SYNTH_BAILINGMOE2) &&
        p->n_embd / p->n_head < 4)
        return sl_error_set(err, SL_ERR_INVALID, "--dim %u / --heads %u: %s's head size %u "
                            "must be at least 4 (rotary on half of it, at least 2)", p->n_embd,
                            p->n_head, sl_synth_arch_name(p->arch), p->n_embd / p->n_head);
    if (dense_lead(p->arch) && p->arch != SL_SYNTH_DEEPSEEK2 &&
        sl__synth_mla_of(p).dense > p->n_layer)
        return sl_error_set(err, SL_ERR_INVALID, "%s: %u leading dense layers of --layers %u",
                            sl_synth_arch_name(p->arch), p->n_dense_lead, p->n_layer);
    if (p->arch == SL_SYNTH_GLM4MOE && p->biases)
        return sl_error_set(err, SL_ERR_INVALID, "--biases: glm4moe's q/k/v biases are always "
                            "written, and it has no other optional bias");
    if (p->arch == SL_SYNTH_GLM4MOE || p->arch == SL_SYNTH_BAILINGMOE2) {
        if ((st = check_range("--nextn", p->nextn, 0, 16, err))) return st;
    } else if (p->nextn) {
        return sl_error_set(err, SL_ERR_INVALID, "--nextn: only glm4moe and bailingmoe2 (not "
                            "%s)", sl_synth_arch_name(p->arch));
    }
    if (p->qk_norm && p->arch != SL_SYNTH_GLM4MOE)
        return sl_error_set(err, SL_ERR_INVALID, "--qk-norm: only glm4moe (not %s)",
                            sl_synth_arch_name(p->arch));
    if (gdn(p->arch) && (p->n_embd / p->n_head < 8 || p->n_embd / p->n_head > 1024))
        return sl_error_set(err, SL_ERR_INVALID, "--dim %u / --heads %u: %s's head size %u "
                            "must be in [8, 1024] (rotary on a quarter of it, at least 2)",
                            p->n_embd, p->n_head, sl_synth_arch_name(p->arch),
                            p->n_embd / p->n_head);
    if (p->arch == SL_SYNTH_DOTS1 && p->n_head_kv != p->n_head)
        return sl_error_set(err, SL_ERR_INVALID, "--kv-heads %u: dots1 needs --kv-heads == "
                            "--heads (%u): llama.cpp sizes its k and v by the head count",
                            p->n_head_kv, p->n_head);
    if (p->head_dim) {
        static const sl_synth_arch k_free[] = {
            SL_SYNTH_LLAMA, SL_SYNTH_MIXTRAL, SL_SYNTH_QWEN3MOE, SL_SYNTH_QWEN3,
            SL_SYNTH_GRANITE, SL_SYNTH_GLM4MOE,
            SL_SYNTH_MINIMAX_M2, SL_SYNTH_DOTS1, SL_SYNTH_QWEN3VL, SL_SYNTH_QWEN3VLMOE,
            SL_SYNTH_ERNIE4_5, SL_SYNTH_ERNIE4_5_MOE, SL_SYNTH_HUNYUAN_MOE};
        bool free_head = false;
        for (size_t i = 0; i < sizeof k_free / sizeof *k_free; i++)
            free_head |= p->arch == k_free[i];
        if (!free_head)
            return sl_error_set(err, SL_ERR_INVALID, "--head-dim: %s's heads are --dim / "
                                "--heads here (its loader or layout ties them)",
                                sl_synth_arch_name(p->arch));
        if ((st = check_range("--head-dim", p->head_dim, 4, 1024, err))) return st;
        if (p->head_dim % 2)
            return sl_error_set(err, SL_ERR_INVALID, "--head-dim %u: odd; RoPE rotates pairs",
                                p->head_dim);
    }
    if (p->arch == SL_SYNTH_OLMOE && p->n_head_kv != p->n_head)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--kv-heads %u: olmoe needs --kv-heads == --heads (%u): llama.cpp "
                            "sizes OLMoE's attn_k_norm by n_embd",
                            p->n_head_kv, p->n_head);
    if (!ai->moe) {
        if (p->n_expert || p->n_expert_used)
            return sl_error_set(err, SL_ERR_INVALID,
                                "--experts/--top-k: %s is dense (use --arch mixtral for "
                                "llama-style experts)",
                                sl_synth_arch_name(p->arch));
    } else {
        if ((st = check_range("--experts", p->n_expert, 1, SL_SYNTH_MAX_EXPERTS, err)))
            return st;
        if (p->n_expert_used < 1 || p->n_expert_used > p->n_expert)
            return sl_error_set(err, SL_ERR_INVALID,
                                "--top-k %u: must be between 1 and --experts (%u)",
                                p->n_expert_used, p->n_expert);
    }
    const sl_gguf_type_info *ti = sl_gguf_type_get(p->type);
    if (sl_synth_file_type(p->type) == UINT32_MAX || !sl_quant_can_quantize(p->type))
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "--type %s: unsupported (%s)",
                            ti ? ti->name : "?", SL_SYNTH_TYPES);
    if (p->type == SL_GGML_MXFP4 && !k_arch[p->arch].moe)
        return sl_error_set(err, SL_ERR_INVALID, "--type MXFP4: for routed experts, and --arch "
                            "%s has none (MoE archs only)", sl_synth_arch_name(p->arch));
    /* every matmul weight row has --dim or --ffn elements (q/k/v/o rows are --dim since
     * heads * head_dim == --dim; with --head-dim, attn_output's are heads * head_dim), and a
     * row must be whole blocks */
    if (p->n_embd % ti->block_size)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--dim %u: not a multiple of %u, which --type %s needs (its rows "
                            "are %u-element blocks)",
                            p->n_embd, ti->block_size, ti->name, ti->block_size);
    if (p->head_dim && (uint64_t)p->n_head * p->head_dim % ti->block_size)
        return sl_error_set(err, SL_ERR_INVALID, "--head-dim %u: --heads %u x it is not a "
                            "multiple of %u, which --type %s needs (attn_output's rows)",
                            p->head_dim, p->n_head, ti->block_size, ti->name);
    /* --ffn and --shared-ffn are also the rows of the down projections, which fall back to
     * a 32-element type where they are not whole 256-blocks (down_type, as llama.cpp) */
    const sl_gguf_type_info *fi = sl_gguf_type_get(sl_synth_fallback_type(p->type));
    if (p->n_ff % ti->block_size && p->n_ff % fi->block_size)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--ffn %u: not a multiple of %u, which --type %s needs (its rows "
                            "are %u-element blocks)",
                            p->n_ff, fi->block_size, ti->name, fi->block_size);
    if (p->n_ff_shexp % ti->block_size && p->n_ff_shexp % fi->block_size)
        return sl_error_set(err, SL_ERR_INVALID,
                            "--shared-ffn %u: not a multiple of %u, which --type %s needs (its "
                            "rows are %u-element blocks)",
                            p->n_ff_shexp, fi->block_size, ti->name, fi->block_size);
    if (p->router_topics && !k_arch[p->arch].moe)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "--router-topics: %s has no router",
                            sl_synth_arch_name(p->arch));
    if (p->router_topics && (p->router_topics > p->n_expert ||
                             (uint64_t)p->router_topics + 2 > p->n_embd / 2))
        return sl_error_set(err, SL_ERR_RANGE, "--router-topics %u: must be at most the experts "
                            "(%u) and leave half of --dim %u to the other channels",
                            p->router_topics, p->n_expert, p->n_embd);
    if (p->topic_run < 1)
        return sl_error_set(err, SL_ERR_RANGE, "--topic-run %u: must be at least 1",
                            p->topic_run);
    if (!isfinite(p->rope_theta) || p->rope_theta < 0.0 || p->rope_theta > 1e12 ||
        (p->rope_theta > 0.0 && p->rope_theta <= 1.0))
        return sl_error_set(err, SL_ERR_RANGE, "--rope-theta %g: must be in (1, 1e12], or 0 for "
                            "the architecture's", p->rope_theta);
    if (!isfinite(p->router_skew) || p->router_skew < 0.0 || p->router_skew > 16.0)
        return sl_error_set(err, SL_ERR_RANGE, "--router-skew %g: must be in [0, 16]",
                            p->router_skew);
    /* above 4 the hottest neuron's factor passes sqrt(F) and the rest round towards zero */
    if (p->relu && p->arch != SL_SYNTH_LLAMA)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "--activation relu: %s is not a dense "
                            "llama (only --arch llama has a ReLU FFN)", sl_synth_arch_name(p->arch));
    if (!isfinite(p->neuron_skew) || p->neuron_skew < 0.0 || p->neuron_skew > 4.0)
        return sl_error_set(err, SL_ERR_RANGE, "--neuron-skew %g: must be in [0, 4]",
                            p->neuron_skew);
    return SL_OK;
}

/* ---- metadata ---------------------------------------------------------------------------- */

typedef struct kv_ctx {
    sl_gguf_writer *w;
    const char *arch;
    sl_error *err;
    sl_status st;
    uint32_t n;
} kv_ctx;

static void kv_u32(kv_ctx *c, const char *key, uint32_t v)
{
    if (c->st) return;
    c->st = sl_gguf_writer_set_u32(c->w, key, v, c->err);
    c->n++;
}

static void kv_arch_u32(kv_ctx *c, const char *suffix, uint32_t v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    kv_u32(c, key, v);
}

static void kv_arch_f32(kv_ctx *c, const char *suffix, float v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    if (c->st) return;
    c->st = sl_gguf_writer_set_f32(c->w, key, v, c->err);
    c->n++;
}

static void kv_str(kv_ctx *c, const char *key, const char *v)
{
    if (c->st) return;
    c->st = sl_gguf_writer_set_str(c->w, key, v, c->err);
    c->n++;
}

static void kv_bool(kv_ctx *c, const char *key, bool v)
{
    if (c->st) return;
    c->st = sl_gguf_writer_set_bool(c->w, key, v, c->err);
    c->n++;
}

/* DeepseekV2Model.set_gguf_parameters (MLA layout) with DeepSeek-V3's routing and YaRN
 * (factor 40 over 4096, mscale_all_dim 1: yarn_log_multiplier 0.1). */
static void write_kv_mla(kv_ctx *c, const sl_synth_params *p)
{
    const sl__synth_mla d = sl__synth_mla_of(p);
    kv_arch_u32(c, "vocab_size", p->n_vocab);
    kv_arch_u32(c, "leading_dense_block_count", (uint32_t)d.dense);
    kv_arch_u32(c, "attention.q_lora_rank", (uint32_t)d.q_lora);
    kv_arch_u32(c, "attention.kv_lora_rank", (uint32_t)d.kv_lora);
    if (p->legacy_kv_b) { /* the per-head sizes of the attention kv_b expands to */
        kv_arch_u32(c, "attention.key_length", (uint32_t)(d.nope + d.rope));
        kv_arch_u32(c, "attention.value_length", (uint32_t)d.v);
    } else {
        kv_arch_u32(c, "attention.key_length", (uint32_t)(d.kv_lora + d.rope));
        kv_arch_u32(c, "attention.value_length", (uint32_t)d.kv_lora);
        kv_arch_u32(c, "attention.key_length_mla", (uint32_t)(d.nope + d.rope));
        kv_arch_u32(c, "attention.value_length_mla", (uint32_t)d.v);
    }
    kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
    kv_arch_u32(c, "expert_shared_count", 1);
    kv_arch_f32(c, "expert_weights_scale", 2.5f);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", c->arch);
    kv_bool(c, key, true);
    kv_arch_u32(c, "expert_gating_func", 2); /* sigmoid */
    if (d.group > 1) {
        kv_arch_u32(c, "expert_group_count", (uint32_t)d.group);
        kv_arch_u32(c, "expert_group_used_count", (uint32_t)d.group_used);
    }
    kv_arch_u32(c, "rope.dimension_count", (uint32_t)d.rope);
    kv_str(c, "deepseek2.rope.scaling.type", "yarn");
    kv_arch_f32(c, "rope.scaling.factor", 40.0f);
    kv_arch_u32(c, "rope.scaling.original_context_length", 4096);
    kv_arch_f32(c, "rope.scaling.yarn_log_multiplier", 0.1f);
    if (p->attn_temp) {
        kv_arch_f32(c, "attention.temperature_scale", 0.1f);
        kv_arch_u32(c, "attention.temperature_length", p->attn_temp);
    }
}

/* Glm4MoeModel.set_gguf_parameters with GLM-4.5's routing (routed_scaling_factor 2.5,
 * norm_topk_prob) and partial_rotary_factor 0.5; block_count (written by write_kv) counts
 * the MTP blocks too. */
static void write_kv_glm4moe(kv_ctx *c, const sl_synth_params *p)
{
    const uint32_t head_dim = sl__synth_head_dim(p);
    kv_arch_u32(c, "attention.key_length", head_dim);
    kv_arch_u32(c, "attention.value_length", head_dim);
    kv_arch_u32(c, "rope.dimension_count", sl__synth_n_rot(p));
    kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
    kv_arch_u32(c, "expert_shared_count", 1);
    kv_arch_u32(c, "leading_dense_block_count", (uint32_t)sl__synth_mla_of(p).dense);
    kv_arch_u32(c, "expert_gating_func", 2); /* sigmoid */
    kv_arch_f32(c, "expert_weights_scale", 2.5f);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", c->arch);
    kv_bool(c, key, true);
    if (p->nextn) kv_arch_u32(c, "nextn_predict_layers", p->nextn);
}

/* Dots1Model / BailingMoeV2Model.set_gguf_parameters: DeepSeek-V3's routing (scoring_func
 * sigmoid, routed_scaling_factor 2.5, norm_topk_prob), one shared expert; Ling 2.0's
 * partial_rotary_factor 0.5, its groups (as deepseek2's) and shared width. */
static void write_kv_dsqk(kv_ctx *c, const sl_synth_params *p)
{
    const sl__synth_mla d = sl__synth_mla_of(p);
    const uint32_t head_dim = sl__synth_head_dim(p);
    const bool ling = p->arch == SL_SYNTH_BAILINGMOE2;
    kv_arch_u32(c, "attention.key_length", head_dim);
    kv_arch_u32(c, "attention.value_length", head_dim);
    kv_arch_u32(c, "rope.dimension_count", sl__synth_n_rot(p));
    kv_arch_u32(c, "leading_dense_block_count", (uint32_t)d.dense);
    kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
    kv_arch_u32(c, "expert_shared_count", 1);
    kv_arch_u32(c, "expert_gating_func", 2); /* sigmoid */
    kv_arch_f32(c, "expert_weights_scale", 2.5f);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", c->arch);
    kv_bool(c, key, true);
    if (ling) {
        kv_arch_u32(c, "vocab_size", p->n_vocab);
        kv_arch_u32(c, "expert_shared_feed_forward_length", p->n_ff_shexp);
        if (d.group > 1) {
            kv_arch_u32(c, "expert_group_count", (uint32_t)d.group);
            kv_arch_u32(c, "expert_group_used_count", (uint32_t)d.group_used);
        }
        if (p->nextn) kv_arch_u32(c, "nextn_predict_layers", p->nextn);
    }
}

/* Keys as convert_hf_to_gguf.py writes them for the corresponding HF models. */
static void write_kv(kv_ctx *c, const sl_synth_params *p, const sl__synth_vocab *v)
{
    const arch_info *ai = &k_arch[p->arch];
    const uint32_t head_dim = sl__synth_head_dim(p);
    char name[64];
    snprintf(name, sizeof name, "sluice-synth-%s", sl_synth_arch_name(p->arch));
    kv_str(c, "general.architecture", sl_arch_name(ai->gguf_arch));
    kv_str(c, "general.type", "model");
    kv_str(c, "general.name", name);
    kv_u32(c, "general.file_type", sl_synth_file_type(p->type));
    kv_u32(c, "general.quantization_version", 2); /* GGML_QNT_VERSION */
    if (ai->gguf_arch == SL_ARCH_LLAMA) kv_arch_u32(c, "vocab_size", p->n_vocab); /* LlamaModel */
    kv_arch_u32(c, "context_length", p->n_ctx);
    kv_arch_u32(c, "embedding_length", p->n_embd);
    kv_arch_u32(c, "block_count", p->n_layer + p->nextn);
    /* qwen2moe: Qwen1.5-MoE's intermediate_size equals its shared expert's width */
    kv_arch_u32(c, "feed_forward_length",
                p->arch == SL_SYNTH_QWEN2MOE ? p->n_ff_shexp
                : p->n_ff_dense              ? p->n_ff_dense
                                             : p->n_ff);
    kv_arch_u32(c, "attention.head_count", p->n_head);
    /* deepseek2: MLA is MQA over one latent head (the legacy layout: MHA, one per head) */
    kv_arch_u32(c, "attention.head_count_kv",
                p->arch != SL_SYNTH_DEEPSEEK2 ? p->n_head_kv
                : p->legacy_kv_b              ? p->n_head
                                              : 1);
    kv_arch_f32(c, "rope.freq_base", p->rope_theta > 0 ? (float)p->rope_theta : ai->rope_base);
    kv_arch_f32(c, "attention.layer_norm_rms_epsilon", ai->rms_eps);
    if (ai->moe) {
        kv_arch_u32(c, "expert_count", p->n_expert);
        kv_arch_u32(c, "expert_used_count", p->n_expert_used);
    }
    const bool ernie = p->arch == SL_SYNTH_ERNIE4_5 || p->arch == SL_SYNTH_ERNIE4_5_MOE;
    if (p->arch == SL_SYNTH_LLAMA || p->arch == SL_SYNTH_MIXTRAL ||
        p->arch == SL_SYNTH_GRANITE || ernie)
        kv_arch_u32(c, "rope.dimension_count", head_dim);
    if (p->arch == SL_SYNTH_HUNYUAN_MOE) { /* HunYuanMoEModel.set_gguf_parameters */
        kv_arch_u32(c, "rope.dimension_count", head_dim);
        kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
        kv_arch_u32(c, "expert_shared_feed_forward_length", p->n_ff_shexp);
        kv_arch_u32(c, "expert_shared_count", 1);
    }
    if (p->arch == SL_SYNTH_ERNIE4_5_MOE) { /* Ernie4_5MoeModel.set_gguf_parameters */
        kv_arch_u32(c, "interleave_moe_layer_step", 1);
        kv_arch_u32(c, "leading_dense_block_count", (uint32_t)sl__synth_mla_of(p).dense);
        kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
        kv_arch_u32(c, "expert_shared_count", 1);
        kv_arch_u32(c, "expert_shared_feed_forward_length", p->n_ff_shexp);
    }
    const bool qnext = gdn(p->arch), qmoe = qnext && ai->moe;
    if (p->longrope) { /* Phi3MiniModel's attention factor for a context scaled ctx / N */
        const double sc = (double)p->n_ctx / (double)p->longrope;
        if (p->arch != SL_SYNTH_PHI3) {
            char key[128];
            snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
            kv_str(c, key, "longrope");
        }
        kv_arch_f32(c, "rope.scaling.attn_factor",
                    sc > 1.0 ? (float)sqrt(1.0 + log(sc) / log((double)p->longrope)) : 1.0f);
    }
    const bool mm2 = p->arch == SL_SYNTH_MINIMAX_M2;
    if (p->arch == SL_SYNTH_QWEN3MOE || p->arch == SL_SYNTH_QWEN2MOE ||
        p->arch == SL_SYNTH_GPT_OSS || qmoe || mm2 || p->arch == SL_SYNTH_QWEN3VLMOE)
        kv_arch_u32(c, "expert_feed_forward_length", p->n_ff);
    if (mm2) { /* MiniMaxM2Model: rotary_dim (64 of 128), scoring_func sigmoid */
        kv_arch_u32(c, "rope.dimension_count", sl__synth_n_rot(p));
        kv_arch_u32(c, "expert_gating_func", 2);
    }
    if (p->arch == SL_SYNTH_QWEN2MOE || qmoe)
        kv_arch_u32(c, "expert_shared_feed_forward_length", p->n_ff_shexp);
    /* (glm4moe, dots1 and bailingmoe2 write theirs with their own keys) */
    if (p->arch == SL_SYNTH_QWEN3MOE || p->arch == SL_SYNTH_GEMMA3 ||
        p->arch == SL_SYNTH_GPT_OSS || p->arch == SL_SYNTH_QWEN3 || p->arch == SL_SYNTH_GEMMA2 ||
        qnext || mm2 || qwen3vl(p->arch) ||
        (p->head_dim && p->arch != SL_SYNTH_GLM4MOE && p->arch != SL_SYNTH_DOTS1 &&
         p->arch != SL_SYNTH_BAILINGMOE2)) {
        kv_arch_u32(c, "attention.key_length", head_dim);
        kv_arch_u32(c, "attention.value_length", head_dim);
    }
    if (p->arch == SL_SYNTH_GEMMA3 || p->arch == SL_SYNTH_GPT_OSS || p->arch == SL_SYNTH_GEMMA2)
        kv_arch_u32(c, "attention.sliding_window", p->n_swa);
    if (p->arch == SL_SYNTH_GEMMA2) { /* Gemma2Model.set_gguf_parameters */
        kv_arch_f32(c, "attn_logit_softcapping", k_gemma2_softcap[0]);
        kv_arch_f32(c, "final_logit_softcapping", k_gemma2_softcap[1]);
    }
    if (p->arch == SL_SYNTH_PHI3) { /* Phi3MiniModel: Phi-4-mini's partial_rotary_factor 0.75 */
        kv_arch_u32(c, "rope.dimension_count", sl__synth_n_rot(p));
        kv_arch_u32(c, "rope.scaling.original_context_length",
                    p->longrope ? p->longrope : p->n_ctx);
    } else if (p->longrope) {
        kv_arch_u32(c, "rope.scaling.original_context_length", p->longrope);
    }
    if (qnext) { /* Qwen3NextModel.set_gguf_parameters: partial_rotary_factor 0.25 */
        kv_arch_u32(c, "ssm.conv_kernel", SL_SYNTH_QWEN3NEXT_CONV);
        kv_arch_u32(c, "ssm.state_size", head_dim);
        kv_arch_u32(c, "ssm.group_count", p->n_head_kv);
        kv_arch_u32(c, "ssm.time_step_rank", p->n_head);
        kv_arch_u32(c, "ssm.inner_size", head_dim * p->n_head);
        kv_arch_u32(c, "full_attention_interval", SL_SYNTH_QWEN3NEXT_FULL_ATTN);
        kv_arch_u32(c, "rope.dimension_count", sl__synth_n_rot(p));
    }
    if (((qnext && p->arch != SL_SYNTH_QWEN3NEXT) || qwen3vl(p->arch)) && !c->st) {
        /* interleaved M-RoPE sections over the P rotated pairs. Qwen3.5's [11, 11, 10, 0]
         * for 32: as many pairs as ggml's rule gives each of the three components, none to
         * the fourth. Qwen3-VL's [24, 20, 20, 0] for 64, in proportion (3/8, 5/16, the
         * rest): its rule leaves the last pairs of the second and third components to the
         * fourth (61 and 62 of 64; 7 of 8), which for text turn by angle 0 */
        const int32_t P = (int32_t)(sl__synth_n_rot(p) / 2);
        const bool vl = qwen3vl(p->arch);
        const int32_t t = vl ? (3 * P + 7) / 8 : (P + 2) / 3, h = vl ? 5 * P / 16 : (P + 1) / 3;
        const int32_t sec[4] = {t, h, vl ? P - t - h : P / 3, 0};
        char key[128];
        snprintf(key, sizeof key, "%s.rope.dimension_sections", c->arch);
        c->st = sl_gguf_writer_set_arr(c->w, key, SL_GGUF_I32, sec, 4, c->err);
        c->n++;
    }
    if (qwen3vl(p->arch)) /* Qwen3VLTextModel: the deepstack layers' count (Qwen3-VL: 3) */
        kv_arch_u32(c, "n_deepstack_layers", 1);
    if (p->arch == SL_SYNTH_GRANITE) { /* GraniteModel.set_gguf_parameters */
        kv_arch_f32(c, "embedding_scale", k_granite_scale[0]);
        kv_arch_f32(c, "residual_scale", k_granite_scale[1]);
        kv_arch_f32(c, "attention.scale", k_granite_scale[2]);
        kv_arch_f32(c, "logit_scale", k_granite_scale[3]);
    }
    if (p->arch == SL_SYNTH_GPT_OSS) {
        /* GptOssModel.set_gguf_parameters: YaRN x32 over a 4096-token original context */
        kv_arch_u32(c, "rope.dimension_count", head_dim);
        kv_str(c, "gpt-oss.rope.scaling.type", "yarn");
        kv_arch_f32(c, "rope.scaling.factor", 32.0f);
        kv_arch_u32(c, "rope.scaling.original_context_length", 4096);
    }

    if (p->arch == SL_SYNTH_DEEPSEEK2) write_kv_mla(c, p);
    if (p->arch == SL_SYNTH_GLM4MOE) write_kv_glm4moe(c, p);
    if (p->arch == SL_SYNTH_DOTS1 || p->arch == SL_SYNTH_BAILINGMOE2) write_kv_dsqk(c, p);

    kv_str(c, "tokenizer.ggml.model", ai->bpe ? "gpt2" : "llama");
    if (ai->bpe) kv_str(c, "tokenizer.ggml.pre", ai->bpe_pre);
    if (!c->st) {
        c->st = sl_gguf_writer_set_arr_str(c->w, "tokenizer.ggml.tokens", v->tokens, v->n, c->err);
        c->n++;
    }
    if (!c->st && v->scores) {
        c->st = sl_gguf_writer_set_arr(c->w, "tokenizer.ggml.scores", SL_GGUF_F32, v->scores,
                                       v->n, c->err);
        c->n++;
    }
    if (!c->st) {
        c->st = sl_gguf_writer_set_arr(c->w, "tokenizer.ggml.token_type", SL_GGUF_I32, v->types,
                                       v->n, c->err);
        c->n++;
    }
    if (!c->st && ai->bpe) {
        c->st = sl_gguf_writer_set_arr_str(c->w, "tokenizer.ggml.merges", v->merges,
                                           v->n_merges, c->err);
        c->n++;
    }
    kv_u32(c, "tokenizer.ggml.bos_token_id", v->bos);
    kv_u32(c, "tokenizer.ggml.eos_token_id", v->eos);
    if (v->unk != UINT32_MAX) kv_u32(c, "tokenizer.ggml.unknown_token_id", v->unk);
    if (v->pad != UINT32_MAX) kv_u32(c, "tokenizer.ggml.padding_token_id", v->pad);
    kv_bool(c, "tokenizer.ggml.add_bos_token", !ai->bpe);
    kv_bool(c, "tokenizer.ggml.add_eos_token", false);
    /* Gemma3Model.set_vocab: SentencePiece without the dummy-prefix space */
    if (p->arch == SL_SYNTH_GEMMA3 || p->arch == SL_SYNTH_GEMMA2)
        kv_bool(c, "tokenizer.ggml.add_space_prefix", false);
    /* ours: the FFN's activation where it is not the arch's (no llama.cpp key exists) */
    if (p->relu) kv_str(c, "sluice.feed_forward_activation", "relu");
    /* ours: what the weights were made to contain */
    if (ai->moe && !c->st) {
        c->st = sl_gguf_writer_set_f32(c->w, "sluice.synth.router_skew", (float)p->router_skew,
                                       c->err);
        c->n++;
    }
    if (ai->moe && p->router_topics && !c->st) {
        c->st = sl_gguf_writer_set_u32(c->w, "sluice.synth.router_topics", p->router_topics,
                                       c->err);
        if (!c->st)
            c->st = sl_gguf_writer_set_u32(c->w, "sluice.synth.topic_run", p->topic_run, c->err);
        c->n += 2;
    }
    if (!c->st) {
        c->st = sl_gguf_writer_set_f32(c->w, "sluice.synth.neuron_skew", (float)p->neuron_skew,
                                       c->err);
        c->n++;
    }
}

/* ---- writing ----------------------------------------------------------------------------- */

int sl_synth_default_threads(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > SL_SYNTH_MAX_THREADS ? SL_SYNTH_MAX_THREADS : (int)n;
}

sl_status sl_synth_write(const sl_synth_params *p, const char *path, int n_threads,
                         void (*progress)(void *user, uint64_t done, uint64_t total),
                         void *progress_user, bool (*cancelled)(void *user),
                         void *cancelled_user, sl_synth_summary *summary, sl_error *err)
{
    sl_status st = sl_synth_validate(p, err);
    if (st) return st;
    if (n_threads < 0 || n_threads > SL_SYNTH_MAX_THREADS)
        return sl_error_set(err, SL_ERR_RANGE, "--threads %d: must be in [1, %d]", n_threads,
                            SL_SYNTH_MAX_THREADS);
    if (n_threads == 0) n_threads = sl_synth_default_threads();
    const arch_info *ai = &k_arch[p->arch];
    const uint32_t cap = SL__SYNTH_PLAN_FIXED + SL__SYNTH_PLAN_PER_LAYER * (p->n_layer + p->nextn);
    sl__synth_tensor *t = calloc(cap, sizeof *t);
    sl__synth_vocab vocab = {0};
    sl_gguf_writer *w = NULL;
    if (!t) return sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (tensor plan)");
    const uint32_t n_t = sl__synth_plan(p, t);

    /* sizes first: fail on overflow before creating the file */
    uint64_t data_bytes = 0;
    for (uint32_t i = 0; i < n_t; i++) {
        uint64_t nb;
        st = sl_gguf_type_nbytes(t[i].type, t[i].n_dims, t[i].ne, &nb, t[i].name, err);
        if (st) goto out;
        if (data_bytes + nb < data_bytes) {
            st = sl_error_set(err, SL_ERR_RANGE, "mkmodel: model size overflows 64 bits");
            goto out;
        }
        data_bytes += nb;
    }

    st = sl__synth_vocab_build(ai->vocab, p->n_vocab, &vocab, err);
    if (st) goto out;
    const sl_gguf_writer_options wo = {.progress = progress, .progress_user = progress_user,
                                       .cancelled = cancelled, .cancelled_user = cancelled_user};
    st = sl_gguf_writer_create(path, &wo, &w, err);
    if (st) goto out;
    kv_ctx kc = {w, sl_arch_name(ai->gguf_arch), err, SL_OK, 0};
    write_kv(&kc, p, &vocab);
    if ((st = kc.st)) goto out;
    for (uint32_t i = 0; i < n_t; i++) {
        st = sl_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, err);
        if (st) goto out;
    }
    if ((st = sl__synth_stream(p, t, n_t, w, n_threads, err))) goto out;
    if ((st = sl_gguf_writer_finish(w, err))) goto out;
    if (summary) {
        summary->n_tensors = n_t;
        summary->data_bytes = data_bytes;
        summary->n_kv = kc.n;
        summary->n_threads = n_threads;
    }
out:
    sl_gguf_writer_destroy(w); /* removes the file if unfinished */
    sl__synth_vocab_free(&vocab);
    free(t);
    return st;
}
