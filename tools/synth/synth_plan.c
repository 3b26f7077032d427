/* The tensor plan of a synthetic model: which tensors its file holds, in file order, with
 * their kinds, shapes and types (the layouts synth.c's header lists, as llama.cpp's loaders
 * create them). */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tools/synth/synth_impl.h"

sl__synth_mla sl__synth_mla_of(const sl_synth_params *p)
{
    const int64_t D = p->n_head ? p->n_embd / p->n_head : 0;
    sl__synth_mla d = {p->mla_q_lora ? p->mla_q_lora : p->n_embd / 2,
                       p->mla_kv_lora ? p->mla_kv_lora : p->n_embd / 2,
                       p->mla_nope ? p->mla_nope : D, p->mla_rope ? p->mla_rope : D / 2,
                       p->mla_v ? p->mla_v : D, p->n_dense_lead, 1, 1};
    if (!p->n_dense_lead && p->n_layer > 1) d.dense = 1;
    if (p->n_expert >= 8 && p->n_expert % 4 == 0) {
        const int64_t per = p->n_expert / 4, need = (p->n_expert_used + per - 1) / per;
        d.group = 4;
        d.group_used = need > 2 ? need : 2;
    }
    return d;
}

static void add(sl__synth_tensor *t, uint32_t *n, sl__synth_kind k, uint32_t type, int64_t ne0,
                int64_t ne1, int64_t ne2, const char *fmt, int layer)
{
    sl__synth_tensor *s = &t[(*n)++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->k = k;
    s->type = type;
    s->ne[0] = ne0;
    s->ne[1] = ne1 ? ne1 : 1;
    s->ne[2] = ne2 ? ne2 : 1;
    s->ne[3] = 1;
    s->n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    s->layer = strncmp(s->name, "blk.", 4) ? -1 : layer;
    s->neurons = SL__NEURONS_NONE;
}

/* The FFN input projection just added carries the neuron skew of FFN `nr`. */
static void neurons(sl__synth_tensor *t, uint32_t n, sl__synth_neurons nr)
{
    t[n - 1].neurons = nr;
}

/* A matmul weight's type: the requested one when its rows are whole blocks, else F16 (the
 * MLA tensors' rows are head-sized, as llama.cpp's quantizer also falls back for them). */
static uint32_t row_type(uint32_t type, int64_t ne0)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    return ti && ne0 % ti->block_size == 0 ? type : SL_GGML_F16;
}

/* The type of an FFN down projection whose rows (--ffn or --shared-ffn wide) may not be whole
 * blocks of `type`: sl_synth_fallback_type's, as llama.cpp's quantizer picks it. */
static uint32_t down_type(uint32_t type, int64_t ne0)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    if (!ti || ne0 % ti->block_size == 0) return type;
    return row_type(sl_synth_fallback_type(type), ne0);
}

/* A SwiGLU FFN's gate, up [E, F(, X)] and down [F, E(, X)] of layer i, named
 * blk.i.ffn_{gate,up,down}<sfx>.weight (X 0: 2-D), gate and up carrying neuron table nr. */
static void add_glu(sl__synth_tensor *t, uint32_t *n, uint32_t w, int64_t E, int64_t F,
                    int64_t X, const char *sfx, sl__synth_neurons nr, int i)
{
    static const char *const proj[3] = {"gate", "up", "down"};
    for (int k = 0; k < 3; k++) {
        char fmt[64];
        snprintf(fmt, sizeof fmt, "blk.%%d.ffn_%s%s.weight", proj[k], sfx);
        if (k < 2) {
            add(t, n, SL__K_IN, w, E, F, X, fmt, i);
            neurons(t, *n, nr);
        } else {
            add(t, n, SL__K_OUT, down_type(w, F), F, E, X, fmt, i);
        }
    }
}

/* deepseek2's blocks after token_embd (llama_model_deepseek2::load_arch_tensors, MLA layout:
 * attn_k_b [nope, kv_lora, H], attn_v_b [kv_lora, v, H] as convert_hf_to_gguf.py splits
 * kv_b_proj), then output_norm and output. */
static uint32_t plan_mla(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    const sl__synth_mla d = sl__synth_mla_of(p);
    const int64_t E = p->n_embd, V = p->n_vocab, F = p->n_ff, X = p->n_expert, H = p->n_head;
    const int64_t Dk = d.nope + d.rope, C = d.kv_lora, FD = p->n_ff_dense ? p->n_ff_dense : F;
    const uint32_t w = p->type, f32 = SL_GGML_F32;
    for (int i = 0; i < (int)p->n_layer; i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        add(t, &n, SL__K_IN, row_type(w, E), E, d.q_lora, 0, "blk.%d.attn_q_a.weight", i);
        add(t, &n, SL__K_NORM, f32, d.q_lora, 0, 0, "blk.%d.attn_q_a_norm.weight", i);
        add(t, &n, SL__K_IN, row_type(w, d.q_lora), d.q_lora, H * Dk, 0,
            "blk.%d.attn_q_b.weight", i);
        add(t, &n, SL__K_IN, row_type(w, E), E, C + d.rope, 0, "blk.%d.attn_kv_a_mqa.weight",
            i);
        add(t, &n, SL__K_NORM, f32, C, 0, 0, "blk.%d.attn_kv_a_norm.weight", i);
        if (p->legacy_kv_b) {
            add(t, &n, SL__K_IN, row_type(w, C), C, H * (d.nope + d.v), 0,
                "blk.%d.attn_kv_b.weight", i);
        } else {
            add(t, &n, SL__K_IN, row_type(w, d.nope), d.nope, C, H, "blk.%d.attn_k_b.weight",
                i);
            add(t, &n, SL__K_IN, row_type(w, C), C, d.v, H, "blk.%d.attn_v_b.weight", i);
        }
        add(t, &n, SL__K_OUT, row_type(w, H * d.v), H * d.v, E, 0, "blk.%d.attn_output.weight",
            i);
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.ffn_norm.weight", i);
        if (i < d.dense) {
            add_glu(t, &n, w, E, FD, 0, "", SL__NEURONS_FFN, i);
            continue;
        }
        add(t, &n, SL__K_ROUTER, f32, E, X, 0, "blk.%d.ffn_gate_inp.weight", i);
        add(t, &n, SL__K_BIAS, f32, X, 0, 0, "blk.%d.exp_probs_b.bias", i);
        add_glu(t, &n, w, E, F, X, "_exps", SL__NEURONS_FFN, i);
        /* one shared expert, as wide as a routed one */
        add_glu(t, &n, w, E, F, 0, "_shexp", SL__NEURONS_SHEXP, i);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    add(t, &n, SL__K_OUTPUT, w, E, V, 0, "output.weight", 0);
    return n;
}

/* Rotary dimensions the file declares (rope.dimension_count; phi3: 3/4 of a head, as
 * Phi-4-mini's partial_rotary_factor 0.75; glm4moe, minimax-m2, bailingmoe2: half, GLM-4.5's
 * and Ling 2.0's 0.5 and MiniMax-M2's rotary_dim 64 of 128; qwen3next, qwen35*: a quarter). */
uint32_t sl__synth_head_dim(const sl_synth_params *p)
{
    return p->head_dim ? p->head_dim : p->n_head ? p->n_embd / p->n_head : 0;
}

uint32_t sl__synth_n_rot(const sl_synth_params *p)
{
    const uint32_t head_dim = sl__synth_head_dim(p);
    switch (p->arch) {
    case SL_SYNTH_PHI3: return head_dim * 3 / 4 / 2 * 2;
    case SL_SYNTH_GLM4MOE:
    case SL_SYNTH_MINIMAX_M2:
    case SL_SYNTH_BAILINGMOE2: return head_dim / 2 / 2 * 2;
    case SL_SYNTH_QWEN3NEXT:
    case SL_SYNTH_QWEN35:
    case SL_SYNTH_QWEN35MOE: return head_dim / 4 / 2 * 2;
    default: return head_dim;
    }
}

/* --longrope: the global factor tensors (Phi3MiniModel.generate_extra_tensors) */
static uint32_t plan_longrope(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    if (!p->longrope) return n;
    add(t, &n, SL__K_ROPE_LONG, SL_GGML_F32, sl__synth_n_rot(p) / 2, 0, 0,
        "rope_factors_long.weight", 0);
    add(t, &n, SL__K_ROPE_SHORT, SL_GGML_F32, sl__synth_n_rot(p) / 2, 0, 0,
        "rope_factors_short.weight", 0);
    return n;
}

/* phi3's blocks after token_embd (llama_model_phi3::load_arch_tensors, fused layout as
 * Phi3MiniModel writes it: attn_qkv rows q | k | v, ffn_up rows gate | up). */
static uint32_t plan_phi3(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    const int64_t E = p->n_embd, V = p->n_vocab, F = p->n_ff;
    const int64_t KV = p->n_head_kv * (E / p->n_head);
    const uint32_t w = p->type, f32 = SL_GGML_F32;
    for (int i = 0; i < (int)p->n_layer; i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        add(t, &n, SL__K_IN, w, E, E + 2 * KV, 0, "blk.%d.attn_qkv.weight", i);
        if (p->biases) add(t, &n, SL__K_BIAS, f32, E + 2 * KV, 0, 0, "blk.%d.attn_qkv.bias", i);
        add(t, &n, SL__K_OUT, w, E, E, 0, "blk.%d.attn_output.weight", i);
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.ffn_norm.weight", i);
        add(t, &n, SL__K_IN, w, E, 2 * F, 0, "blk.%d.ffn_up.weight", i);
        add(t, &n, SL__K_OUT, down_type(w, F), F, E, 0, "blk.%d.ffn_down.weight", i);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    add(t, &n, SL__K_OUTPUT, w, E, V, 0, "output.weight", 0);
    return plan_longrope(p, t, n);
}

/* qwen3next's blocks after token_embd (llama_model_qwen3next::load_arch_tensors, the layout
 * its converter writes; Qwen3.5 (llama_model_qwen35moe / qwen35): ssm_beta and ssm_alpha
 * [E, Hv] for ssm_ba, and qwen35 a dense FFN for the experts): a Gated DeltaNet layer (Hv =
 * --heads value heads and Hk = --kv-heads key heads of S = --dim / --heads, conv 4) unless
 * (i + 1) % 4 == 0, then gated attention (attn_q rows per head q | gate), and every layer
 * the qwen2moe FFN with its shared expert. */
static uint32_t plan_qwen3next(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    const int64_t E = p->n_embd, V = p->n_vocab, F = p->n_ff, X = p->n_expert;
    const int64_t S = E / p->n_head, Hv = p->n_head, Hk = p->n_head_kv, Q = Hv * S,
                  KV = Hk * S, C = 2 * KV + Q, SH = p->n_ff_shexp;
    const uint32_t w = p->type, f32 = SL_GGML_F32;
    const bool q35 = p->arch != SL_SYNTH_QWEN3NEXT;
    for (int i = 0; i < (int)p->n_layer; i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        if ((i + 1) % SL_SYNTH_QWEN3NEXT_FULL_ATTN) {
            add(t, &n, SL__K_IN, w, E, C, 0, "blk.%d.attn_qkv.weight", i);
            add(t, &n, SL__K_IN, w, E, Q, 0, "blk.%d.attn_gate.weight", i);
            add(t, &n, SL__K_BIAS, f32, SL_SYNTH_QWEN3NEXT_CONV, C, 0,
                "blk.%d.ssm_conv1d.weight", i);
            add(t, &n, SL__K_BIAS, f32, Hv, 0, 0, "blk.%d.ssm_dt.bias", i);
            add(t, &n, SL__K_DECAY, f32, Hv, 0, 0, "blk.%d.ssm_a", i);
            if (q35) { /* Qwen3.5: in_proj_b and in_proj_a apart */
                add(t, &n, SL__K_IN, w, E, Hv, 0, "blk.%d.ssm_beta.weight", i);
                add(t, &n, SL__K_IN, w, E, Hv, 0, "blk.%d.ssm_alpha.weight", i);
            } else {
                add(t, &n, SL__K_IN, w, E, 2 * Hv, 0, "blk.%d.ssm_ba.weight", i);
            }
            add(t, &n, SL__K_NORM, f32, S, 0, 0, "blk.%d.ssm_norm.weight", i);
            add(t, &n, SL__K_OUT, row_type(w, Q), Q, E, 0, "blk.%d.ssm_out.weight", i);
        } else {
            add(t, &n, SL__K_IN, w, E, 2 * Q, 0, "blk.%d.attn_q.weight", i);
            add(t, &n, SL__K_IN, w, E, KV, 0, "blk.%d.attn_k.weight", i);
            add(t, &n, SL__K_IN, w, E, KV, 0, "blk.%d.attn_v.weight", i);
            add(t, &n, SL__K_OUT, row_type(w, Q), Q, E, 0, "blk.%d.attn_output.weight", i);
            add(t, &n, SL__K_NORM, f32, S, 0, 0, "blk.%d.attn_q_norm.weight", i);
            add(t, &n, SL__K_NORM, f32, S, 0, 0, "blk.%d.attn_k_norm.weight", i);
        }
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.post_attention_norm.weight", i);
        if (p->arch == SL_SYNTH_QWEN35) { /* dense */
            add_glu(t, &n, w, E, F, 0, "", SL__NEURONS_FFN, i);
            continue;
        }
        add(t, &n, SL__K_ROUTER, f32, E, X, 0, "blk.%d.ffn_gate_inp.weight", i);
        add_glu(t, &n, w, E, F, X, "_exps", SL__NEURONS_FFN, i);
        add(t, &n, SL__K_IN, f32, E, 0, 0, "blk.%d.ffn_gate_inp_shexp.weight", i);
        add_glu(t, &n, w, E, SH, 0, "_shexp", SL__NEURONS_SHEXP, i);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    add(t, &n, SL__K_OUTPUT, w, E, V, 0, "output.weight", 0);
    return n;
}

/* Layer i's DeepSeek-MoE FFN after its input norm: the leading dense layers' SwiGLU, else the
 * router, exp_probs_b, the experts and one shared expert SH wide; past the trunk, an MTP
 * block's own tensors (nextn.eh_proj [2E, E], nextn.enorm, nextn.hnorm, nextn.shared_head_norm
 * [E]; out_norm: layer_output_norm [E], bailingmoe2's). */
static uint32_t add_ds_ffn(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n, int i,
                           int64_t SH, bool out_norm)
{
    const int64_t E = p->n_embd, F = p->n_ff, X = p->n_expert;
    const int64_t FD = p->n_ff_dense ? p->n_ff_dense : F;
    /* MXFP4 (MXFP4_MOE): the routed experts only, every other matmul weight Q8_0 */
    const uint32_t wx = p->type, wd = wx == SL_GGML_MXFP4 ? SL_GGML_Q8_0 : wx;
    const uint32_t f32 = SL_GGML_F32;
    if (i < sl__synth_mla_of(p).dense) {
        add_glu(t, &n, wd, E, FD, 0, "", SL__NEURONS_FFN, i);
        return n;
    }
    add(t, &n, SL__K_ROUTER, f32, E, X, 0, "blk.%d.ffn_gate_inp.weight", i);
    add(t, &n, SL__K_BIAS, f32, X, 0, 0, "blk.%d.exp_probs_b.bias", i);
    add_glu(t, &n, wx, E, F, X, "_exps", SL__NEURONS_FFN, i);
    add_glu(t, &n, wd, E, SH, 0, "_shexp", SL__NEURONS_SHEXP, i);
    if (i < (int)p->n_layer) return n;
    add(t, &n, SL__K_IN, wd, 2 * E, E, 0, "blk.%d.nextn.eh_proj.weight", i);
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.nextn.enorm.weight", i);
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.nextn.hnorm.weight", i);
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.nextn.shared_head_norm.weight", i);
    if (out_norm) add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.layer_output_norm.weight", i);
    return n;
}

/* dots1's and bailingmoe2's blocks after token_embd (llama_model_dots1 / _bailingmoe2::
 * load_arch_tensors): q/k/v (bailingmoe2: one attn_qkv [E, Q + 2 KV]), attn_output, per-head
 * q/k norms, ffn_norm, the leading dense layers' SwiGLU, then the router, exp_probs_b, the
 * experts and one shared expert (dots1: as wide as a routed one; bailingmoe2: --shared-ffn);
 * bailingmoe2's --nextn MTP blocks add nextn.eh_proj [2E, E], nextn.enorm, nextn.hnorm,
 * nextn.shared_head_norm and layer_output_norm [E]. */
static uint32_t plan_dsqk(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    const int64_t E = p->n_embd, V = p->n_vocab, F = p->n_ff;
    const int64_t D = sl__synth_head_dim(p), Q = p->n_head * D, KV = p->n_head_kv * D;
    const bool ling = p->arch == SL_SYNTH_BAILINGMOE2;
    const int64_t SH = ling ? p->n_ff_shexp : F;
    const uint32_t wx = p->type, wd = wx == SL_GGML_MXFP4 ? SL_GGML_Q8_0 : wx;
    const uint32_t f32 = SL_GGML_F32;
    for (int i = 0; i < (int)(p->n_layer + p->nextn); i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        if (ling) {
            add(t, &n, SL__K_IN, wd, E, Q + 2 * KV, 0, "blk.%d.attn_qkv.weight", i);
        } else {
            add(t, &n, SL__K_IN, wd, E, Q, 0, "blk.%d.attn_q.weight", i);
            add(t, &n, SL__K_IN, wd, E, KV, 0, "blk.%d.attn_k.weight", i);
            add(t, &n, SL__K_IN, wd, E, KV, 0, "blk.%d.attn_v.weight", i);
        }
        add(t, &n, SL__K_OUT, wd, Q, E, 0, "blk.%d.attn_output.weight", i);
        add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_q_norm.weight", i);
        add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_k_norm.weight", i);
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.ffn_norm.weight", i);
        n = add_ds_ffn(p, t, n, i, SH, ling);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    add(t, &n, SL__K_OUTPUT, wd, E, V, 0, "output.weight", 0);
    return n;
}

/* glm4moe's blocks after token_embd (llama_model_glm4_moe::load_arch_tensors, as
 * Glm4MoeModel converts GLM-4.5): q/k/v with biases, per-head q/k norms with --qk-norm
 * (GLM-4.5 355B's use_qk_norm), post_attention_norm as the FFN's input norm, the leading dense
 * layers' SwiGLU, then the router, its selection bias exp_probs_b, the experts and one shared
 * expert as wide as a routed one; then --nextn MTP blocks: a MoE block's tensors plus
 * nextn.eh_proj [2E, E], nextn.enorm, nextn.hnorm and nextn.shared_head_norm [E] (the MTP
 * layer's embed_tokens and shared_head.head are the model's own, which the converter drops). */
static uint32_t plan_glm4moe(const sl_synth_params *p, sl__synth_tensor *t, uint32_t n)
{
    const int64_t E = p->n_embd, V = p->n_vocab;
    const int64_t D = sl__synth_head_dim(p), Q = p->n_head * D, KV = p->n_head_kv * D;
    const uint32_t wx = p->type, wd = wx == SL_GGML_MXFP4 ? SL_GGML_Q8_0 : wx;
    const uint32_t f32 = SL_GGML_F32;
    for (int i = 0; i < (int)(p->n_layer + p->nextn); i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        add(t, &n, SL__K_IN, wd, E, Q, 0, "blk.%d.attn_q.weight", i);
        add(t, &n, SL__K_BIAS, f32, Q, 0, 0, "blk.%d.attn_q.bias", i);
        add(t, &n, SL__K_IN, wd, E, KV, 0, "blk.%d.attn_k.weight", i);
        add(t, &n, SL__K_BIAS, f32, KV, 0, 0, "blk.%d.attn_k.bias", i);
        add(t, &n, SL__K_IN, wd, E, KV, 0, "blk.%d.attn_v.weight", i);
        add(t, &n, SL__K_BIAS, f32, KV, 0, 0, "blk.%d.attn_v.bias", i);
        add(t, &n, SL__K_OUT, wd, Q, E, 0, "blk.%d.attn_output.weight", i);
        if (p->qk_norm) {
            add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_q_norm.weight", i);
            add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_k_norm.weight", i);
        }
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.post_attention_norm.weight", i);
        n = add_ds_ffn(p, t, n, i, p->n_ff, false);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    add(t, &n, SL__K_OUTPUT, wd, E, V, 0, "output.weight", 0);
    return n;
}

uint32_t sl__synth_plan(const sl_synth_params *p, sl__synth_tensor *t)
{
    const bool moe = sl_synth_arch_is_moe(p->arch);
    const int64_t E = p->n_embd, V = p->n_vocab, F = p->n_ff, X = p->n_expert;
    const int64_t S = p->n_ff_shexp;
    const int64_t D = sl__synth_head_dim(p), Q = p->n_head * D, KV = p->n_head_kv * D;
    /* MXFP4 (MXFP4_MOE): the routed experts only, every other matmul weight Q8_0 */
    const uint32_t wx = p->type, f32 = SL_GGML_F32;
    const uint32_t w = wx == SL_GGML_MXFP4 ? SL_GGML_Q8_0 : wx;
    const bool qwen2moe = p->arch == SL_SYNTH_QWEN2MOE;
    const bool gemma = p->arch == SL_SYNTH_GEMMA3 || p->arch == SL_SYNTH_GEMMA2;
    const bool oss = p->arch == SL_SYNTH_GPT_OSS;
    const bool qkv_bias = qwen2moe || oss || p->arch == SL_SYNTH_QWEN2 || p->biases;
    /* llama's (and granite's) optional attn_output and dense FFN biases */
    const bool llama_b = p->biases && (p->arch == SL_SYNTH_LLAMA ||
                                       p->arch == SL_SYNTH_MIXTRAL ||
                                       p->arch == SL_SYNTH_GRANITE);
    /* ERNIE 4.5: an optional attn_output.bias; the MoE model's leading dense layer, selection
     * bias and shared expert of its own width */
    const bool ernie_moe = p->arch == SL_SYNTH_ERNIE4_5_MOE;
    const bool ernie_b = p->biases && (p->arch == SL_SYNTH_ERNIE4_5 || ernie_moe);
    const int64_t dense = ernie_moe ? sl__synth_mla_of(p).dense : 0;
    uint32_t n = 0;
    add(t, &n, SL__K_EMBD, w, E, V, 0, "token_embd.weight", 0);
    if (p->arch == SL_SYNTH_DEEPSEEK2) return plan_mla(p, t, n);
    if (p->arch == SL_SYNTH_PHI3) return plan_phi3(p, t, n);
    if (p->arch == SL_SYNTH_QWEN3NEXT || p->arch == SL_SYNTH_QWEN35 ||
        p->arch == SL_SYNTH_QWEN35MOE)
        return plan_qwen3next(p, t, n);
    if (p->arch == SL_SYNTH_GLM4MOE) return plan_glm4moe(p, t, n);
    if (p->arch == SL_SYNTH_DOTS1 || p->arch == SL_SYNTH_BAILINGMOE2) return plan_dsqk(p, t, n);
    for (int i = 0; i < (int)p->n_layer; i++) {
        add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.attn_norm.weight", i);
        add(t, &n, SL__K_IN, w, E, Q, 0, "blk.%d.attn_q.weight", i);
        if (qkv_bias) add(t, &n, SL__K_BIAS, f32, Q, 0, 0, "blk.%d.attn_q.bias", i);
        add(t, &n, SL__K_IN, w, E, KV, 0, "blk.%d.attn_k.weight", i);
        if (qkv_bias) add(t, &n, SL__K_BIAS, f32, KV, 0, 0, "blk.%d.attn_k.bias", i);
        add(t, &n, SL__K_IN, w, E, KV, 0, "blk.%d.attn_v.weight", i);
        if (qkv_bias) add(t, &n, SL__K_BIAS, f32, KV, 0, 0, "blk.%d.attn_v.bias", i);
        add(t, &n, SL__K_OUT, w, Q, E, 0, "blk.%d.attn_output.weight", i);
        if (oss || llama_b || ernie_b)
            add(t, &n, SL__K_BIAS_OUT, f32, E, 0, 0, "blk.%d.attn_output.bias", i);
        if (oss) add(t, &n, SL__K_BIAS, f32, p->n_head, 0, 0, "blk.%d.attn_sinks.weight", i);
        if (p->arch == SL_SYNTH_QWEN3MOE || p->arch == SL_SYNTH_QWEN3 ||
            p->arch == SL_SYNTH_QWEN3VL || p->arch == SL_SYNTH_QWEN3VLMOE ||
            p->arch == SL_SYNTH_HUNYUAN_MOE ||
            p->arch == SL_SYNTH_GEMMA3) {
            add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_q_norm.weight", i);
            add(t, &n, SL__K_NORM, f32, D, 0, 0, "blk.%d.attn_k_norm.weight", i);
        } else if (p->arch == SL_SYNTH_OLMOE || p->arch == SL_SYNTH_MINIMAX_M2) {
            add(t, &n, SL__K_NORM, f32, Q, 0, 0, "blk.%d.attn_q_norm.weight", i);
            add(t, &n, SL__K_NORM, f32, KV, 0, 0, "blk.%d.attn_k_norm.weight", i);
        }
        /* gpt-oss names the FFN's input norm post_attention_norm */
        if (gemma || oss)
            add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.post_attention_norm.weight", i);
        if (!oss) add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.ffn_norm.weight", i);
        if (!moe || i < dense) {
            add_glu(t, &n, w, E, F, 0, "", SL__NEURONS_FFN, i);
            if (llama_b) {
                add(t, &n, SL__K_BIAS, f32, F, 0, 0, "blk.%d.ffn_gate.bias", i);
                add(t, &n, SL__K_BIAS, f32, F, 0, 0, "blk.%d.ffn_up.bias", i);
                add(t, &n, SL__K_BIAS_OUT, f32, E, 0, 0, "blk.%d.ffn_down.bias", i);
            }
        } else {
            add(t, &n, SL__K_ROUTER, f32, E, X, 0, "blk.%d.ffn_gate_inp.weight", i);
            if (p->arch == SL_SYNTH_MINIMAX_M2 || ernie_moe)
                add(t, &n, SL__K_BIAS, f32, X, 0, 0, "blk.%d.exp_probs_b.bias", i);
            add_glu(t, &n, wx, E, F, X, "_exps", SL__NEURONS_FFN, i);
            if (ernie_moe || p->arch == SL_SYNTH_HUNYUAN_MOE)
                add_glu(t, &n, w, E, S, 0, "_shexp", SL__NEURONS_SHEXP, i);
        }
        if (oss) {
            add(t, &n, SL__K_BIAS, f32, X, 0, 0, "blk.%d.ffn_gate_inp.bias", i);
            add(t, &n, SL__K_BIAS, f32, F, X, 0, "blk.%d.ffn_gate_exps.bias", i);
            add(t, &n, SL__K_BIAS, f32, F, X, 0, "blk.%d.ffn_up_exps.bias", i);
            add(t, &n, SL__K_BIAS_OUT, f32, E, X, 0, "blk.%d.ffn_down_exps.bias", i);
        }
        if (qwen2moe) {
            /* the gate reads the residual stream like any input matmul (column 0 zero) */
            add(t, &n, SL__K_IN, f32, E, 0, 0, "blk.%d.ffn_gate_inp_shexp.weight", i);
            add_glu(t, &n, w, E, S, 0, "_shexp", SL__NEURONS_SHEXP, i);
        }
        if (gemma) add(t, &n, SL__K_NORM, f32, E, 0, 0, "blk.%d.post_ffw_norm.weight", i);
    }
    add(t, &n, SL__K_NORM, f32, E, 0, 0, "output_norm.weight", 0);
    /* Gemma ties the output projection to token_embd (llama.cpp duplicates it on load) */
    if (!gemma) add(t, &n, SL__K_OUTPUT, w, E, V, 0, "output.weight", 0);
    if (p->biases && p->arch == SL_SYNTH_QWEN2)
        add(t, &n, SL__K_BIAS, f32, V, 0, 0, "output.bias", 0);
    return plan_longrope(p, t, n);
}

