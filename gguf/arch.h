/* gguf/arch: the model architectures Sluice runs, by their GGUF general.architecture names
 * (llama.cpp's LLM_ARCH_NAMES spelling). The one list of them: the engine's traits table
 * (runtime/engine/arch.c) is indexed by it, its "supported" message is made from it, and the
 * synthetic-model writer (tools/synth) names the architecture it writes through it.
 * Adding an architecture: a row here, then its traits, hyperparameters and tensors in the
 * engine and its layout in synth. Pure, thread-safe. */
#ifndef SL_GGUF_ARCH_H
#define SL_GGUF_ARCH_H

#include <stddef.h>

#include "base/status.h"

typedef enum sl_arch {
    SL_ARCH_LLAMA = 0,  /* llama, and Mixtral files (llama + expert_count) */
    SL_ARCH_QWEN2MOE,
    SL_ARCH_QWEN3MOE,
    SL_ARCH_OLMOE,
    SL_ARCH_GEMMA3,
    SL_ARCH_GPT_OSS,    /* llama.cpp LLM_ARCH_OPENAI_MOE, general.architecture "gpt-oss" */
    SL_ARCH_DEEPSEEK2,  /* DeepSeek-V2/V3/R1, Kimi-K2: MLA attention, groups, shared experts */
    SL_ARCH_QWEN2,      /* dense Qwen2 / Qwen2.5: q/k/v biases */
    SL_ARCH_QWEN3,      /* dense Qwen3: per-head q/k norms */
    SL_ARCH_GEMMA2,     /* soft-capped logits, alternating sliding window, post-norms */
    SL_ARCH_GRANITE,    /* IBM Granite 3: embedding, residual, attention and logit multipliers */
    SL_ARCH_PHI3,       /* Phi-3 / Phi-4: fused attn_qkv and gate|up, partial rotary */
    SL_ARCH_QWEN3NEXT,  /* Qwen3-Next: Gated DeltaNet layers, gated attention every few
                           layers, routed experts with a gated shared expert */
    SL_ARCH_GLM4MOE,    /* GLM-4.5 / 4.6 / 4.7 (and Solar Open): GQA with q/k/v biases and
                           partial rotary, sigmoid router with a selection bias, an ungated
                           shared expert, leading dense layers, an MTP block */
    SL_ARCH_QWEN35,     /* Qwen3.5 dense: Qwen3-Next's mixers (Gated DeltaNet, gated
                           attention) with a dense FFN, M-RoPE sections */
    SL_ARCH_QWEN35MOE,  /* Qwen3.5 MoE: the same mixers, Qwen3-Next's experts */
    SL_ARCH_MINIMAX_M2, /* MiniMax-M2: q/k norms over the whole projections, partial rotary,
                           sigmoid router with a selection bias, no shared expert */
    SL_ARCH_DOTS1,      /* dots.llm1: Qwen3's attention, DeepSeek-V3's MoE */
    SL_ARCH_BAILINGMOE2, /* Ling / Ring 2.0: fused q/k/v, q/k norms, partial rotary,
                            DeepSeek-V3's MoE (group-limited), an MTP block */
    SL_ARCH_QWEN3VL,    /* Qwen3-VL dense, text: qwen3 with interleaved M-RoPE sections */
    SL_ARCH_QWEN3VLMOE, /* Qwen3-VL MoE, text: qwen3moe with interleaved M-RoPE sections */
    SL_ARCH_ERNIE4_5,   /* ERNIE 4.5 dense: llama's block, an optional attn_output.bias */
    SL_ARCH_ERNIE4_5_MOE, /* ERNIE 4.5 MoE: softmax router with a selection bias, a shared
                             expert of its own width, leading dense layers */
    SL_ARCH_HUNYUAN_MOE, /* Hunyuan-A13B: q/k norms after the rope, softmax router, an
                            ungated shared expert */
    SL_ARCH_COUNT       /* not an architecture: the list's length */
} sl_arch;

/* a's general.architecture name, or NULL when a is not in the list. */
const char *sl_arch_name(sl_arch a);
/* The architecture named name; SL_ERR_UNSUPPORTED naming it and every supported one otherwise. */
sl_status sl_arch_parse(const char *name, sl_arch *out, sl_error *err);

#endif
