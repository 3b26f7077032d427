/* synth: synthetic GGUF models in the layouts llama.cpp loads (llama, mixtral, qwen3moe, olmoe,
 * qwen2moe, gemma3, gpt-oss, deepseek2, qwen2, qwen3, gemma2, granite, phi3, qwen3next,
 * glm4moe, qwen35, qwen35moe, minimax-m2, dots1, bailingmoe2, qwen3vl, qwen3vlmoe, ernie4_5,
 * ernie4_5-moe, hunyuan-moe).
 *
 * What a file contains (names, shapes in ggml ne order, keys) follows llama.cpp's
 * llama-model.cpp / llama-arch.cpp and convert_hf_to_gguf.py; tests/mkmodel/mkmodel_test.py
 * checks it against an independent table. Weights are deterministic functions of (seed, tensor
 * name, row), so the same parameters give byte-identical files whatever the thread count, and a
 * tensor's values do not depend on which other tensors exist. Expert popularity follows a Zipf
 * law (see synth.c, "Router"); so does FFN neuron magnitude (synth_rows.c, "Neuron skew").
 *
 * Speed: rows are made on a pool of threads; big tensors in a block type (Q4_K experts of a
 * 30B model) are resampled from a pool of exactly quantized rows unless exact_quant is set
 * (synth_rows.c), which makes a Qwen3-30B-A3B-shaped file a matter of write bandwidth.
 *
 * Memory: tensors are generated in chunks of about 1 MiB, two per thread plus two, and written
 * in order through the streaming GGUF writer; besides the vocabulary only per-tensor tables
 * (pool rows, neuron factors) of the tensors in flight are held. No global state; functions are
 * reentrant.
 */
#ifndef SL_TOOLS_SYNTH_H
#define SL_TOOLS_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef enum sl_synth_arch {
    SL_SYNTH_LLAMA = 0,     /* dense llama */
    SL_SYNTH_MIXTRAL,       /* general.architecture "llama" with merged 3-D experts */
    SL_SYNTH_QWEN3MOE,
    SL_SYNTH_OLMOE,
    SL_SYNTH_QWEN2MOE,      /* routed experts + a sigmoid-gated shared expert, q/k/v biases */
    SL_SYNTH_GEMMA3,        /* dense; q/k norms, post-norms, GeGLU, sliding-window layers, tied
                             * output */
    SL_SYNTH_GPT_OSS,       /* routed experts with biases, clamped SwiGLU, attention biases and
                             * sinks, alternating sliding-window layers, YaRN rope */
    SL_SYNTH_DEEPSEEK2,     /* DeepSeek-V3 layout: MLA (q_a/q_b, kv_a_mqa, k_b/v_b), a leading
                             * dense layer, sigmoid group-limited routing with the selection
                             * bias, one shared expert, YaRN */
    SL_SYNTH_QWEN2,         /* dense; q/k/v biases */
    SL_SYNTH_QWEN3,         /* dense; per-head q/k norms */
    SL_SYNTH_GEMMA2,        /* dense; post-norms, GeGLU, even layers sliding, attention and
                             * final logit soft-capping, tied output */
    SL_SYNTH_GRANITE,       /* dense llama layout with embedding, residual, attention and
                             * logit multipliers */
    SL_SYNTH_PHI3,          /* dense; fused attn_qkv and gate | up, rotary on 3/4 of a head */
    SL_SYNTH_QWEN3NEXT,     /* Gated DeltaNet layers (--heads value heads, --kv-heads key
                             * heads, of --dim/--heads each, conv 4), gated full attention on
                             * every 4th layer (rotary on a quarter of a head), routed experts
                             * and a sigmoid-gated shared expert (--shared-ffn) */
    SL_SYNTH_GLM4MOE,       /* GLM-4.5 layout: q/k/v biases, rotary on half a head, optional
                             * q/k norms (--qk-norm), a leading dense layer, sigmoid routing
                             * with the selection bias, one ungated shared expert, optional
                             * MTP blocks (--nextn) */
    SL_SYNTH_QWEN35,        /* qwen3next's mixers in Qwen3.5's layout (ssm_beta / ssm_alpha,
                             * M-RoPE sections; value heads tiled over the key heads) with a
                             * dense FFN */
    SL_SYNTH_QWEN35MOE,     /* the same mixers with qwen3next's experts and shared expert */
    SL_SYNTH_MINIMAX_M2,    /* MiniMax-M2: q/k norms over the whole projections, rotary on
                             * half a head, sigmoid routing with the selection bias */
    SL_SYNTH_DOTS1,         /* dots.llm1: qwen3's attention, a leading dense layer, sigmoid
                             * routing with the selection bias, one shared expert */
    SL_SYNTH_BAILINGMOE2,   /* Ling 2.0: fused attn_qkv, q/k norms, rotary on half a head,
                             * dots1's MoE in expert groups (--shared-ffn: the shared
                             * expert's width), optional MTP blocks (--nextn) */
    SL_SYNTH_QWEN3VL,       /* qwen3 with Qwen3-VL's interleaved M-RoPE sections and a
                             * deepstack layer */
    SL_SYNTH_QWEN3VLMOE,    /* qwen3moe with the same */
    SL_SYNTH_ERNIE4_5,      /* ERNIE 4.5 dense: llama's layout (--biases: attn_output.bias) */
    SL_SYNTH_ERNIE4_5_MOE,  /* ERNIE 4.5 MoE: a leading dense layer, softmax routing with the
                             * selection bias, a shared expert (--shared-ffn) */
    SL_SYNTH_HUNYUAN_MOE,   /* Hunyuan-A13B: q/k norms (after the rope), softmax routing, an
                             * ungated shared expert (--shared-ffn) */
    SL_SYNTH_ARCH_COUNT
} sl_synth_arch;

enum {
    SL_SYNTH_BASE_VOCAB = 260,    /* at most 4 special + 256 byte tokens, every tokenizer style */
    SL_SYNTH_MIN_VOCAB = 300,     /* base plus room for a few merges / pieces */
    SL_SYNTH_MAX_VOCAB = 1 << 20,
    SL_SYNTH_MAX_EXPERTS = 512,   /* llama.cpp's LLAMA_MAX_EXPERTS */
    SL_SYNTH_MAX_THREADS = 1024,
};

typedef struct sl_synth_params {
    sl_synth_arch arch;
    uint32_t n_layer;       /* --layers */
    uint32_t n_embd;        /* --dim */
    uint32_t n_ff;          /* --ffn: dense FFN width, or per-expert width for MoE */
    uint32_t n_expert;      /* --experts: 0 for llama (dense) */
    uint32_t n_expert_used; /* --top-k: 0 for llama */
    uint32_t n_head;        /* --heads; head_dim = n_embd / n_head */
    uint32_t n_head_kv;     /* --kv-heads */
    uint32_t n_vocab;       /* --vocab */
    uint32_t n_ctx;         /* --ctx: context_length */
    uint32_t n_ff_shexp;    /* --shared-ffn: shared-expert FFN width (qwen2moe, qwen3next,
                             * qwen35moe, bailingmoe2; else 0) */
    uint32_t n_swa;         /* --sliding-window: local layers' window in tokens (gemma3,
                             * gpt-oss, gemma2; else 0) */
    uint32_t type;          /* --type: ggml type of matmul weights (SL_SYNTH_TYPES); MXFP4
                             * (MoE only): routed experts MXFP4, other matmuls Q8_0 */
    double router_skew;     /* --router-skew: Zipf exponent Z of expert popularity */
    uint32_t router_topics; /* --router-topics N: temporal locality (synth.c); 0: off */
    uint32_t topic_run;     /* --topic-run R: consecutive token ids per topic (default 16) */
    double neuron_skew;     /* --neuron-skew: Zipf exponent of FFN neuron activations, [0, 4] */
    bool exact_quant;       /* --exact-quant: quantize every row (no pooled resampling) */
    bool relu;              /* --activation relu: a ReLU FFN (dense llama only), written as
                             * sluice.feed_forward_activation = "relu" (runtime/engine/arch.c) */
    bool biases;            /* --biases: every optional bias llama.cpp loads and applies for
                             * the arch (create_tensor_qkv's q/k/v biases, phi3's fused
                             * attn_qkv.bias; llama, granite: attn_output and ffn_{gate,up,down}
                             * biases; qwen2: output.bias); not deepseek2 (MLA), gpt-oss and
                             * qwen2moe (theirs are always written) */
    uint32_t longrope;      /* --longrope N: LongRoPE as Phi3MiniModel converts it (phi3; llama
                             * and granite with rope.scaling.type "longrope"):
                             * rope_factors_long / _short [n_rot / 2], original_context_length
                             * N, rope.scaling.attn_factor sqrt(1 + ln(ctx / N) / ln N) when
                             * --ctx > N (else 1); 0: none */
    uint32_t attn_temp;     /* --attn-temp L: deepseek2, Mistral Large 3's attention temperature
                             * as its converter writes it (MistralMoeModel):
                             * attention.temperature_scale 0.1 (llama_4_scaling beta),
                             * temperature_length L; 0: none */
    double rope_theta;      /* --rope-theta: rope.freq_base; 0: the architecture's */
    uint32_t head_dim;      /* --head-dim: the attention heads' size, written as
                             * attention.key_length / value_length (real models' heads *
                             * head_dim is rarely --dim: Qwen3-30B 32 x 128 on 2048); 0:
                             * --dim / --heads. The archs whose loaders allow it */
    uint64_t seed;          /* --seed */
    /* deepseek2 only (no flags; 0: derived from --dim/--heads with D = dim / heads: q_lora and
     * kv_lora dim / 2, nope D, rope D / 2, v D; leading dense layers 1 if --layers > 1 (also
     * glm4moe's, dots1's and bailingmoe2's, with n_ff_dense);
     * expert groups 4 if --experts is a multiple of 4, using the fewest that hold --top-k,
     * at least half (also bailingmoe2's)) */
    uint32_t mla_q_lora, mla_kv_lora, mla_nope, mla_rope, mla_v;
    uint32_t n_dense_lead;
    uint32_t n_ff_dense;    /* the leading dense layers' FFN width (0: --ffn) */
    uint32_t nextn;         /* --nextn N: glm4moe, bailingmoe2: N multi-token-prediction
                             * blocks after the --layers trunk (block_count = layers + N,
                             * nextn_predict_layers = N); 0: none */
    bool qk_norm;           /* --qk-norm: glm4moe, per-head attn_q_norm / attn_k_norm (GLM-4.5
                             * 355B's use_qk_norm; Air has none) */
    bool legacy_kv_b;       /* --legacy-kv-b: deepseek2 in the layout before llama.cpp split
                             * kv_b (blk.N.attn_kv_b [kv_lora, heads * (nope + v)], per-head
                             * key/value_length, head_count_kv = heads, no *_mla keys) */
} sl_synth_params;

typedef struct sl_synth_summary {
    uint32_t n_tensors;
    uint64_t data_bytes;    /* tensor data, unpadded */
    uint32_t n_kv;
    int n_threads;          /* threads that made the rows */
} sl_synth_summary;

/* "llama", "mixtral", "qwen3moe", "olmoe", "qwen2moe", "gemma3", "gpt-oss", "deepseek2",
 * "qwen2", "qwen3", "gemma2", "granite", "phi3", "qwen3next", "glm4moe", "qwen35",
 * "qwen35moe", "minimax-m2", "dots1", "bailingmoe2", "qwen3vl", "qwen3vlmoe", "ernie4_5",
 * "ernie4_5-moe", "hunyuan-moe"; "?" out of range. */
const char *sl_synth_arch_name(sl_synth_arch a);
/* Whether the architecture has routed experts (--experts/--top-k apply). */
bool sl_synth_arch_is_moe(sl_synth_arch a);
/* Parses an arch name (exact, lower case). SL_ERR_INVALID naming the value and the choices. */
sl_status sl_synth_arch_parse(const char *s, sl_synth_arch *out, sl_error *err);
/* The architecture's default small model (layers 2, dim 64, ffn 128, 8 experts top-2 for MoE,
 * heads 4, kv-heads 2 (4 for olmoe), vocab 512, ctx 256, F32, router skew 1.0, neuron
 * skew 0, exact_quant false, seed 1; qwen2moe:
 * shared-ffn 2 * ffn = 256; gemma3: layers 6 (so that layer 5 is a global-attention layer),
 * sliding-window 8; gpt-oss: 4 experts top-2, sliding-window 8, so that 2 layers have one
 * sliding and one global layer; deepseek2: 3 layers (one leading dense), heads 4, the MLA
 * dimensions derived as sl_synth_params says; gemma2: sliding-window 8, so that its 2 layers
 * are one sliding and one global; qwen3next, qwen35, qwen35moe: 4 layers (the last with full
 * attention), shared-ffn = ffn (not qwen35: dense); glm4moe, dots1, bailingmoe2: 3 layers
 * (one leading dense), no MTP block (glm4moe: no q/k norms; bailingmoe2: shared-ffn = ffn);
 * ernie4_5-moe: 3 layers (one leading dense), shared-ffn = ffn; hunyuan-moe: shared-ffn = ffn;
 * dots1: kv-heads = heads. */
void sl_synth_defaults(sl_synth_arch a, sl_synth_params *p);
/* Checks every field for range and consistency; the message names the CLI flag (e.g. "--heads")
 * and the values at fault. SL_ERR_INVALID or SL_ERR_RANGE. */
sl_status sl_synth_validate(const sl_synth_params *p, sl_error *err);
/* The --type values mkmodel accepts, for messages. */
#define SL_SYNTH_TYPES                                                                           \
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4, IQ4_NL, " \
    "IQ4_XS"
/* general.file_type (llama_ftype) for a weight type (one of SL_SYNTH_TYPES): 0 F32, 1 F16,
 * 2 Q4_0, 3 Q4_1, 7 Q8_0, 8 Q5_0, 9 Q5_1, 10 Q2_K, 11 Q3_K_S, 14 Q4_K_S, 16 Q5_K_S, 18 Q6_K,
 * 25 IQ4_NL, 30 IQ4_XS, 32 BF16, 38 MXFP4_MOE; UINT32_MAX if none. */
uint32_t sl_synth_file_type(uint32_t type);
/* The type llama.cpp's quantizer (llama-quant.cpp tensor_type_fallback) gives a tensor whose
 * rows are not whole 256-element blocks of `type`: Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K ->
 * Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL; `type` itself for the others. mkmodel writes the FFN
 * down projections of an --ffn / --shared-ffn that is not a multiple of 256 in it (e.g. 384,
 * 1408 with Q4_K). */
uint32_t sl_synth_fallback_type(uint32_t type);
/* Online CPUs, clamped to [1, SL_SYNTH_MAX_THREADS]. */
int sl_synth_default_threads(void);
/* Validates p and writes the model to `path` (one file), making rows on n_threads threads
 * (0: sl_synth_default_threads(); the bytes do not depend on it). SL_ERR_RANGE naming
 * --threads outside [0, SL_SYNTH_MAX_THREADS]. On failure nothing is left at path (the writer
 * removes unfinished files). progress (may be NULL) follows the data written, as
 * sl_gguf_writer_options.progress; cancelled (may be NULL) stops it as
 * sl_gguf_writer_options.cancelled (SL_ERR_INVALID, nothing left). summary may be NULL. */
sl_status sl_synth_write(const sl_synth_params *p, const char *path, int n_threads,
                         void (*progress)(void *user, uint64_t done, uint64_t total),
                         void *progress_user, bool (*cancelled)(void *user),
                         void *cancelled_user, sl_synth_summary *summary, sl_error *err);

#endif
