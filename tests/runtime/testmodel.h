/* tests/runtime/testmodel: tiny GGUF models of every architecture the engine binds, written
 * with the project's GGUF writer, for engine tests (including deliberately broken files).
 *
 * Independent of tools/synth/synth.c on purpose: it covers the archs synth does not (qwen2moe,
 * gemma3, per-expert Mixtral tensors) and lets a test omit or reshape one tensor. Weights are a
 * deterministic function of (seed, tensor name). Names and shapes follow llama.cpp. */
#ifndef SL_TESTS_RUNTIME_TESTMODEL_H
#define SL_TESTS_RUNTIME_TESTMODEL_H

#include <stdint.h>

#include "base/status.h"

typedef struct tm_params {
    const char *arch;        /* llama, mixtral, mixtral-split, qwen2moe, qwen3moe, olmoe, gemma3,
                              * gpt-oss, deepseek2, qwen2, qwen3, gemma2, granite, phi3,
                              * glm4moe (q/k/v biases, q/k norms, rotary on half a head),
                              * minimax-m2 (whole-projection q/k norms, half rotary) */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_expert, n_expert_used, n_vocab;
    int n_ff_shexp;          /* qwen2moe */
    int n_swa;               /* gemma3, gpt-oss */
    uint32_t wtype;          /* matmul weight type (F32, F16, Q8_0, ...) */
    uint64_t seed;
    const char *omit;        /* tensor name to leave out, or NULL */
    const char *reshape;     /* tensor name whose ne[0] and ne[1] are swapped, or NULL */
    const char *extra;       /* a tensor of this name added (F32 [n_embd]), or NULL */
    int tie_output;          /* leave output.weight out (tied to token_embd) */
    int gemma_output;        /* gemma3, gemma2: write an output.weight all the same */
    const char *ffn_act;     /* sluice.feed_forward_activation ("relu"), or NULL: none */
    /* deepseek2: MLA with q_lora, kv_lora n_embd / 2, nope head_dim, rope head_dim / 2, v
     * head_dim; n_dense leading dense layers (also glm4moe); n_group expert groups (0: none),
     * n_group_used */
    int n_dense, n_group, n_group_used;
    /* deepseek2: the legacy layout of the same weights, blk.N.attn_kv_b [kv_lora, H * (nope +
     * v)] assembled from what attn_k_b / attn_v_b would hold, and no *_mla keys (key_length
     * nope + rope, value_length v, head_count_kv n_head) */
    int legacy_kv_b;
    /* deepseek2, glm4moe: the last n_nextn of the n_layer blocks are MTP blocks, as a
     * DeepSeek-V3 or GLM-4.5 file with nextn_predict_layers = n_nextn holds them (each also
     * carries blk.N.nextn.eh_proj [2 * n_embd, n_embd], enorm, hnorm and shared_head_norm
     * [n_embd]) */
    int n_nextn;
    /* metadata: "{arch}.<set_key>" written as u32 set_val (added or replacing the usual
     * value); "{arch}.<drop_key>" left out; NULL: none */
    const char *set_key, *drop_key;
    int64_t set_val;
} tm_params;

/* Small defaults for arch: 2 layers (gemma3: 7, so layer 5 is global), dim 64, 4 heads, 2 kv
 * heads, head_dim 16 (qwen3moe, qwen3 32, i.e. n_head * head_dim != n_embd), ffn 64, 8
 * experts top 2 (none for the dense llama, gemma3, qwen2, qwen3, gemma2, granite),
 * vocab 300, F32; gpt-oss: 4 experts, sliding window 4 (layer 0 slides, layer 1 does not);
 * deepseek2: 3 layers, the first dense, 4 expert groups of which 2 are used; glm4moe: 3
 * layers, the first dense. */
void tm_defaults(const char *arch, tm_params *p);
sl_status tm_write(const tm_params *p, const char *path, sl_error *err);

#endif
