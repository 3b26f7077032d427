#!/usr/bin/env python3
"""Independent float64 reference forward pass for GGUF models (the oracle for `sluice eval`).

usage: ref_forward.py MODEL.gguf --tokens 1,2,3 [--out logits.f64]
       (--out: float64 little-endian, one row of n_vocab per position, no header)
import: ref_forward.load(path) -> Model; Model.forward(tokens) -> ndarray [n_tokens, n_vocab]

Written from the architectures' published definitions, not from Sluice's C engine:
  - tensor names, shapes (ggml ne order) and metadata keys: llama.cpp llama-arch.cpp /
    llama-model.cpp (load_tensors, load_hparams) and convert_hf_to_gguf.py;
  - the computation: llama.cpp's graph builders (src/models/*.cpp: llm_build_llama,
    llm_build_qwen2moe, llm_build_qwen3moe, llm_build_olmoe, llm_build_gemma3<iswa>), which are
    the semantics of a GGUF file, checked against HF transformers' modeling code where the
    two are the same thing seen through the converter (noted per step below).
Weights are read with gguf-py (llama.cpp's own Python reader) and dequantized with
gguf.quants.dequantize, then everything is computed in float64 with plain numpy.

Semantics per architecture (GGUF general.architecture, plus "mixtral" = llama with experts):

  common    x = token_embd[tokens]; per layer: h = RMSNorm(x) * attn_norm; attention; residual;
            h = RMSNorm(x) * ffn_norm; FFN; residual; final RMSNorm * output_norm; logits =
            output @ x. RMSNorm(x) = x / sqrt(mean(x^2) + eps) (ggml_rms_norm; HF *RMSNorm),
            eps = {arch}.attention.layer_norm_rms_epsilon.
  attention Q = Wq h (+ bq), K, V likewise; reshape to [n_tokens, heads, head_dim]; RoPE on Q
            and K at positions 0..n-1; GQA: query head j uses KV head j // (n_head / n_head_kv)
            (ggml_mul_mat broadcasting; HF repeat_kv); scores scaled by 1/sqrt(head_dim); causal
            mask (key position <= query position); softmax; heads concatenated; Wo.
  RoPE      theta_i = pos * base^(-2i / n_rot), i < n_rot / 2 (ggml_rope_ext with freq_scale 1,
            ext_factor 0: no YaRN). Pairs rotated by theta_i: (x0, x1) -> (x0 cos - x1 sin,
            x0 sin + x1 cos). Pair layout from llama.cpp llama_model_rope_type():
              NORM (llama, mixtral): pairs (2i, 2i + 1) — llama.cpp's converter permutes HF's
                q/k rows so that this equals HF's rotate_half on the HF weights;
              NEOX (qwen2moe, qwen3moe, olmoe, gemma3): pairs (i, i + n_rot / 2) — HF's
                rotate_half directly (the converter does not permute for these).
            n_rot = {arch}.rope.dimension_count if present, else head_dim.
  FFN       SwiGLU: Wdown (silu(Wgate h) * Wup h) (llm_build_ffn LLM_FFN_SILU, LLM_FFN_PAR).
  MoE       llm_graph_context::build_moe_ffn with softmax gating: p = softmax(Wrouter h) over all
            experts; the top-k experts by p; weights w = p[top-k], renormalised to sum 1 when
            norm_w: llama (mixtral) true, qwen3moe true (HF norm_topk_prob), qwen2moe false,
            olmoe false; out = sum_k w_k * SwiGLU_expert_k(h). (HF Mixtral takes softmax over
            the top-k logits: the same numbers.)
  qwen2moe  attention biases bq, bk, bv; plus the shared expert: out += sigmoid(w_gate . h) *
            SwiGLU_shexp(h) with w_gate = ffn_gate_inp_shexp [n_embd] (llm_build_qwen2moe:
            silu(g)/g = sigmoid(g); HF Qwen2MoeSparseMoeBlock.shared_expert_gate).
  qwen3moe  per-head RMSNorm of Q and K over head_dim (attn_q_norm/attn_k_norm [head_dim])
            after the reshape, before RoPE (llm_build_qwen3moe; HF Qwen3MoeAttention).
  olmoe     RMSNorm of the whole Q and K projections (attn_q_norm/attn_k_norm [n_embd]) before
            the reshape and RoPE (llm_build_olmoe; HF OlmoeAttention q_norm/k_norm).
  gemma3    (llm_build_gemma3<iswa=true>, chosen because the file has attention.sliding_window)
            x = token_embd[tokens] * sqrt(n_embd); per-head q/k RMSNorm over head_dim before
            RoPE; Q scaled by f_attention_scale = 1/sqrt(head_dim) (llama-model.cpp for every
            size but 27B, which is 1/sqrt(n_embd/n_head); ref: gemma_pytorch config
            query_pre_attn_scalar) and attention with scale 1; post_attention_norm on the
            attention output before the residual add; GeGLU FFN Wdown (gelu_tanh(Wgate h) *
            Wup h) (LLM_FFN_GELU: ggml_gelu = tanh approximation; HF gelu_pytorch_tanh);
            post_ffw_norm before the residual add; output tied to token_embd when output.weight
            is absent. Layer il is global when il % 6 == 5 (hparams.set_swa_pattern(6):
            swa iff il % 6 < 5); global layers use rope.freq_base, local layers base 10000
            (rope_freq_base_train_swa, fixed in llama.cpp) and a sliding window: key position p0
            is masked for query p1 when p1 - p0 >= sliding_window (LLAMA_SWA_TYPE_STANDARD).
            Norm weights: convert_hf_to_gguf.py Gemma3Model.modify_tensors stores 1 + w for
            every "*norm.weight" (HF Gemma3RMSNorm computes x * (1 + w)), so the stored value is
            multiplied directly, as for every other arch.
  gpt-oss   (llama_model_openai_moe, graph llm_build_openai_moe_iswa; HF GptOssForCausalLM)
            attention biases bq, bk, bv and bo (attn_output.bias); NEOX rope with YaRN
            (ggml_rope_ext with the file's rope.scaling.factor / original_context_length,
            ext_factor 1, attn_factor 1, beta_fast 32, beta_slow 1: see rope() below); scale
            1/sqrt(n_rot); per-head sinks attn_sinks [n_head] join each softmax as an extra
            logit column that is then dropped (ggml_soft_max_add_sinks; HF eager_attention_
            forward concatenates them the same way); layer il slides iff il % P < P - 1, P =
            attention.sliding_window_pattern or 2 (set_swa_pattern(2); HF layer_types: even
            layers "sliding_attention"), window attention.sliding_window, same rope on every
            layer; the FFN input norm is post_attention_norm; router logits = Wr h + br, the
            top k logits, weights softmax over those k (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_
            WEIGHT; HF GptOssTopKRouter); expert e: g = Wg h + bg, u = Wu h + bu,
            g' = min(g, 7), u' = clamp(u, -7, 7), y = Wd (g' sigmoid(1.702 g') (u' + 1)) + bd
            (ggml_swiglu_oai; HF GptOssExperts with its interleaved gate_up_proj split into
            ffn_gate_exps / ffn_up_exps by the converter), out = sum_k w_k y_k.
            YaRN boundaries: llama.cpp floors/ceils the correction range
            (ggml_rope_yarn_corr_dims); HF gpt-oss configs set "truncate": false, which does
            not. We follow the GGUF semantics (llama.cpp); ref_vs_hf.py sets truncate true.
  qwen2     (llm_build_qwen2) attention biases bq, bk, bv; NEOX rope; SwiGLU; output.bias if
            the file has it.
  optional  (every arch, llama.cpp's create_tensor_qkv) q/k/v biases, or a fused attn_qkv with
            attn_qkv.bias; llama, granite: attn_output.bias and ffn_{gate,up,down}.bias;
            rope_freqs, or LongRoPE's rope_factors_long / _short (phi3; llama, granite with
            rope.scaling.type longrope: long when the context exceeds
            original_context_length) dividing each pair's frequency, and every rotation
            scaled by rope.scaling.attn_factor.
  qwen3     (llm_build_qwen3) per-head q/k RMSNorm as qwen3moe; NEOX rope; SwiGLU.
  gemma2    (llm_build_gemma2_iswa; HF Gemma2ForCausalLM) gemma3 without q/k norms: embeddings
            * sqrt(n_embd), post_attention_norm and post_ffw_norm, GeGLU, tied output; Q scaled
            by 1/sqrt(head_dim) (27B, 46 layers: 1/sqrt(n_embd/n_head)); attention logits
            soft-capped c tanh(l / c), c = attn_logit_softcapping (default 50), before the mask
            (llama-graph build_attn_mha; HF eager attention); even layers slide
            (attention.sliding_window_pattern, default 2), window attention.sliding_window
            (default 4096), sliding layers roped with rope.freq_base_swa (default
            rope.freq_base); final logits soft-capped with final_logit_softcapping (default
            30). A gemma2 file with output.weight is refused (llama.cpp: wrong number of
            tensors).
  granite   (llm_build_granite; HF GraniteForCausalLM) llama with embeddings * embedding_scale,
            each block output * residual_scale before its residual add, attention scale
            attention.scale (0: 1/sqrt(head_dim)), logits / logit_scale; NORM rope.
  phi3      (llm_build_phi3; HF Phi3ForCausalLM) attn_qkv rows q | k | v; ffn_up rows gate | up,
            silu(gate) * up (ggml_swiglu); NEOX rope on the first rope.dimension_count entries
            of each head (partial_rotary_factor); scale 1/sqrt(head_dim). No LongRoPE factors.
  deepseek2 (HF DeepseekV3ForCausalLM / modeling_deepseek_v3, in its plain MHA form; the GGUF
            layout of llama_model_deepseek2 with the MLA keys) q = Wq_b RMSNorm(Wq_a h)
            (q_a_norm), or Wq h when q_lora_rank is 0, split per head into q_nope [nope] and
            q_pe [rope]; [c | k_pe] = Wkv_a h; kv = kv_b RMSNorm(c) (kv_a_norm) with HF's
            kv_b_proj rebuilt from the split tensors (head h: k rows = attn_k_b[h]^T, v rows =
            attn_v_b[h], as convert_hf_to_gguf.py split them), or read whole from attn_kv_b
            in the legacy layout (no *_mla keys: key_length / value_length are the per-head
            sizes, head_count_kv = head_count), into k_nope [nope] and v [v];
            q_pe and the one shared k_pe are roped with interleaved pairs (HF's
            apply_rotary_pos_emb de-interleaves before rotate_half: ggml NORM), YaRN frequencies
            as above but no magnitude correction (HF: yarn_get_mscale(factor, mscale) /
            yarn_get_mscale(factor, mscale_all_dim) = 1 for V3's configs); scores of [q_nope |
            q_pe] . [k_nope | k_pe] scaled by mscale^2 / sqrt(nope + rope), mscale = 1 +
            yarn_log_multiplier ln(factor) (the file holds 0.1 mscale_all_dim); heads [v] ->
            attn_output; with attention.temperature_scale s (Mistral Large 3) the query at
            position p is first scaled by 1 + s ln(floor(p / temperature_length) + 1).
            Layers below leading_dense_block_count: SwiGLU FFN. The last
            nextn_predict_layers blocks (MTP) are not run. MoE (HF
            DeepseekV3MoE / MoEGate): p = sigmoid(logits) (expert_gating_func 2; 1 or absent:
            softmax, but absent with 47/48 blocks and 154880 tokens: sigmoid, llama.cpp's
            GLM-4.7-Flash rule); selection score p + exp_probs_b; with expert_group_count G > 1 a group
            scores the sum of its two best selection scores and only the
            expert_group_used_count best groups stay (masked to -inf, llama.cpp; HF fills 0.0,
            the same selection whenever k unmasked scores are positive); top k of the scores;
            weights p[top k] (no bias), divided by their sum when expert_weights_norm,
            times expert_weights_scale; plus the shared experts (ffn_*_shexp) ungated.
  qwen3next (llm_build_qwen3next; HF Qwen3NextForCausalLM, recurrent form) layer il is a Gated
            DeltaNet layer iff attention.recurrent_layers[il] when the file has the list, else
            iff (il + 1) % full_attention_interval (default 4), else gated
            attention: attn_q [E, 2 H D] gives per head q | gate, per-head q/k RMSNorm, NEOX
            rope over rope.dimension_count, scale 1/sqrt(D), output * sigmoid(gate) before
            attn_output (HF Qwen3NextAttention). DeltaNet (HF Qwen3NextGatedDeltaNet through
            the converter: in_proj_qkvz split into attn_qkv [q | k | v] and attn_gate z, A_log
            stored as ssm_a = -exp(A_log), dt_bias as ssm_dt.bias, conv1d squeezed; the gated
            norm's weight stored as is, every other norm as 1 + w): mixed = attn_qkv h, a causal
            depthwise conv over the sequence (ssm_conv1d [d_conv, C], zeros before position 0)
            then SiLU, split into q, k (Hk heads) and v (Hv heads) of S = ssm.state_size; ba =
            ssm_ba h per key head [r betas | r alphas] (r = Hv / Hk), beta = sigmoid(b),
            g = softplus(a + dt_bias) * ssm_a; q, k l2-normalised (x / sqrt(sum x^2 + eps)) and
            repeated so value head h reads key head h // r; per value head the state S [k, v]
            (zeros) goes S *= exp(g); S += k (beta (v - S^T k))^T; o = S^T q / sqrt(S)
            (HF torch_recurrent_gated_delta_rule); o = RMSNorm(o) * ssm_norm * silu(z); ssm_out.
            The FFN input norm is post_attention_norm; the MoE is qwen2moe's with the top-k
            weights renormalised (norm_w true) plus the sigmoid-gated shared expert.
  qwen35, qwen35moe (llama_model_qwen35 / _qwen35moe; HF Qwen3_5ForCausalLM through its
            converter) qwen3next with ssm_beta and ssm_alpha [E, Hv] (beta / alpha per value
            head, for ssm_ba), value head h reading key head h % Hk (the converter reorders the
            value heads for llama.cpp's ggml_repeat), and interleaved M-RoPE: for text NEOX's
            rotation when every rotated pair falls in one of the first three
            rope.dimension_sections (else refused); qwen35's FFN is dense.
  minimax-m2 (llama_model_minimax_m2; HF MiniMaxM2ForCausalLM) q/k RMSNorm over the whole
            projections (olmoe's), NEOX rope on the first rope.dimension_count entries of each
            head, scale 1/sqrt(head_dim), ffn_norm; deepseek2's MoE with expert_gating_func
            (required), the weights always renormalised and never scaled, no shared expert.
  ernie4_5, ernie4_5-moe (llama_model_ernie4_5 / _ernie4_5_moe; its graphs) llama's block
            (NORM rope) with any attn_output.bias loaded and not applied; the MoE model
            deepseek2's FFN with softmax gating (selection + exp_probs_b), the weights
            renormalised and never scaled, and a shared expert of its own width, ungated.
  hunyuan-moe (llama_model_hunyuan_moe; HF HunYuanMoEV1) NEOX rope, then per-head q/k
            RMSNorm (after the rope), ffn_norm, softmax top-k renormalised plus one shared
            SwiGLU expert, ungated.
  qwen3vl, qwen3vlmoe (llama_model_qwen3vl / _qwen3vlmoe, text) qwen3 and qwen3moe with
            interleaved M-RoPE as qwen35's (the deepstack inputs of a text token are zeros).
  dots1, bailingmoe2 (llama_model_dots1 / _bailingmoe2) qwen3's attention (bailingmoe2: the
            fused attn_qkv; NEOX rope over rope.dimension_count) with ffn_norm, then
            deepseek2's FFN: dense below leading_dense_block_count, else its MoE with
            expert_gating_func (required) plus the shared experts ungated.
  glm4moe   (llama_model_glm4_moe; HF Glm4MoeForCausalLM) q/k/v with their biases, per-head
            q/k RMSNorm where the file has the weights (use_qk_norm), NEOX rope on the first
            rope.dimension_count entries of each head (partial_rotary_factor), scale
            1/sqrt(head_dim); the FFN input norm is post_attention_norm; dense SwiGLU below
            leading_dense_block_count, else deepseek2's MoE (above) with sigmoid gating when
            expert_gating_func is absent or 0, plus the shared expert ungated. Any arch: the
            last nextn_predict_layers blocks (MTP) are not run.
"""
import argparse
import math
import sys
import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize

ROPE_NORM, ROPE_NEOX = "norm", "neox"

# llama.cpp llama_model_rope_type()
ROPE_TYPE = {"llama": ROPE_NORM, "qwen2moe": ROPE_NEOX, "qwen3moe": ROPE_NEOX,
             "olmoe": ROPE_NEOX, "gemma3": ROPE_NEOX, "gpt-oss": ROPE_NEOX,
             "deepseek2": ROPE_NORM, "qwen2": ROPE_NEOX, "qwen3": ROPE_NEOX,
             "gemma2": ROPE_NEOX, "granite": ROPE_NORM, "phi3": ROPE_NEOX,
             "qwen3next": ROPE_NEOX, "glm4moe": ROPE_NEOX, "qwen35": ROPE_NEOX,
             "qwen35moe": ROPE_NEOX, "minimax-m2": ROPE_NEOX, "dots1": ROPE_NEOX,
             "bailingmoe2": ROPE_NEOX, "qwen3vl": ROPE_NEOX, "qwen3vlmoe": ROPE_NEOX,
             "ernie4_5": ROPE_NORM, "ernie4_5-moe": ROPE_NORM, "hunyuan-moe": ROPE_NEOX}
# the archs with DeepSeek-V3's routed experts (moe_ffn_ds) and, when the file has them, its
# ungated shared experts
DS_MOE = ("deepseek2", "glm4moe", "minimax-m2", "dots1", "bailingmoe2", "ernie4_5-moe")
# the Gated DeltaNet archs (Qwen3-Next's mixers); Qwen3.5's layout differs (QWEN35)
GDN = ("qwen3next", "qwen35", "qwen35moe")
QWEN35 = ("qwen35", "qwen35moe")
# interleaved M-RoPE (llama.cpp IMROPE; mrope_factors)
IMROPE = QWEN35 + ("qwen3vl", "qwen3vlmoe")
# build_moe_ffn's norm_w argument in each graph builder
MOE_NORM_W = {"llama": True, "qwen3moe": True, "qwen2moe": False, "olmoe": False,
              "qwen3next": True, "qwen35moe": True, "qwen3vlmoe": True, "hunyuan-moe": True}
GEMMA3_SWA_PATTERN = 6          # llama-model.cpp: hparams.set_swa_pattern(6)
GEMMA3_SWA_ROPE_BASE = 10000.0  # llama-model.cpp: rope_freq_base_train_swa
GEMMA2_SWA_PATTERN = 2          # llama-model.cpp: hparams.set_swa_pattern(2)
GEMMA2_SOFTCAP = (50.0, 30.0)   # llama-hparams.h defaults: attention, final
OAI_ALPHA, OAI_LIMIT = 1.702, 7.0  # llm_graph_context::build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE


# ---- numeric building blocks (also exercised on their own by ref_forward_test.py) ------------

def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2, last axis) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def yarn_corr_dims(n_rot, n_ctx_orig, base, beta_fast, beta_slow):
    """ggml_rope_yarn_corr_dims: the pair range [lo, hi] of the YaRN ramp (float32 maths)."""
    def corr_dim(n_rotations):
        return np.float32(n_rot * math.log(n_ctx_orig / (n_rotations * 2 * math.pi))
                          / (2 * math.log(base)))
    lo = max(0.0, math.floor(corr_dim(beta_fast)))
    hi = min(n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
    return lo, hi


def mrope_factors(sections, n_rot, interleaved):
    """M-RoPE for text (ggml_mrope_cache_init with positions [p, p, p, 0]): pair j's sector
    s = j % total is component s % 3 while s < 3 sections[s % 3] (interleaved), else the
    component whose section holds s; the fourth component's pairs turn by angle 0, here a
    frequency factor of inf. None when no pair is left to it (NEOX's rotation)."""
    sec = (list(sections) + [0, 0, 0, 0])[:4]
    total = sum(sec)
    if total <= 0:
        raise ValueError(f"M-RoPE sections {sections} total {total}")
    ff = np.ones(n_rot // 2)
    for j in range(n_rot // 2):
        s = j % total
        text = s < 3 * sec[s % 3] if interleaved else s < sec[0] + sec[1] + sec[2]
        if not text:
            ff[j] = np.inf
    return None if np.all(ff == 1.0) else ff


def rope(x, positions, base, n_rot, mode, yarn=None, yarn_mscale=True, freq_factors=None,
         attn_factor=1.0):
    """Rotary embedding of x [n_tokens, n_heads, head_dim] at the given positions.
    yarn: None, or (factor, n_ctx_orig, beta_fast, beta_slow) for ggml's rope_yarn with
    freq_scale = 1/factor, ext_factor 1, attn_factor 1: theta_i = theta_interp (1 - mix_i) +
    theta_extrap mix_i with mix_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1), and the
    rotated pair scaled by 1 + 0.1 ln(factor) (unless yarn_mscale is False: deepseek2).
    freq_factors [n_rot / 2]: each pair's frequency divided by its factor (ggml_rope_ext's c:
    llama3's rope_freqs, LongRoPE's long or short factors); attn_factor: the rotated pairs
    scaled by it too (rope.scaling.attn_factor, LongRoPE's attention factor)."""
    x = np.array(x, dtype=np.float64)
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half) / n_rot)                 # [half]
    if freq_factors is not None:
        inv = inv / np.asarray(freq_factors, dtype=np.float64)
    mscale = attn_factor
    if yarn is not None:
        factor, n_ctx_orig, beta_fast, beta_slow = yarn
        lo, hi = yarn_corr_dims(n_rot, n_ctx_orig, base, beta_fast, beta_slow)
        mix = 1.0 - np.clip((np.arange(half) - lo) / max(0.001, hi - lo), 0.0, 1.0)
        inv = inv / factor * (1.0 - mix) + inv * mix
        mscale *= 1.0 + 0.1 * math.log(factor) if yarn_mscale else 1.0
    theta = np.asarray(positions, dtype=np.float64)[:, None] * inv  # [n_tokens, half]
    cos = np.cos(theta)[:, None, :] * mscale
    sin = np.sin(theta)[:, None, :] * mscale
    if mode == ROPE_NORM:
        i0, i1 = np.arange(0, n_rot, 2), np.arange(1, n_rot, 2)
    elif mode == ROPE_NEOX:
        i0, i1 = np.arange(half), np.arange(half, n_rot)
    else:
        raise ValueError(f"unknown rope mode {mode!r}")
    a, b = x[..., i0].copy(), x[..., i1].copy()
    x[..., i0] = a * cos - b * sin
    x[..., i1] = a * sin + b * cos
    return x


def attention(q, k, v, scale, window=None, sinks=None, softcap=None):
    """Causal GQA attention. q [n, H, D], k [n, Hkv, D], v [n, Hkv, Dv] -> [n, H * Dv].
    window: if set, key p0 is masked for query p1 when p1 - p0 >= window.
    sinks: None or [H] logits that join each row's softmax denominator only.
    softcap: None or c: scaled logits l -> c tanh(l / c) before the mask (gemma2)."""
    n, n_head, d = q.shape
    n_head_kv = k.shape[1]
    group = n_head // n_head_kv
    pos = np.arange(n)
    masked = pos[None, :] > pos[:, None]                 # [query, key]
    if window is not None:
        masked |= (pos[:, None] - pos[None, :]) >= window
    out = np.empty((n, n_head, v.shape[2]))
    for h in range(n_head):
        g = h // group
        s = (q[:, h, :] @ k[:, g, :].T) * scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        s = np.where(masked, -np.inf, s)
        if sinks is not None:
            s = np.concatenate([s, np.full((n, 1), sinks[h])], axis=1)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p[:, :n] @ v[:, g, :]
    return out.reshape(n, n_head * v.shape[2])


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def glu_ffn(h, w_gate, w_up, w_down, act):
    """w_down @ (act(w_gate @ h) * (w_up @ h)) for rows h [n, E]; weights [out, in]."""
    return (act(h @ w_gate.T) * (h @ w_up.T)) @ w_down.T


def moe_ffn(h, router, gate_exps, up_exps, down_exps, k, norm_w):
    """build_moe_ffn (softmax gating, SiLU experts). router [X, E], *_exps [X, out, in]."""
    probs = softmax(h @ router.T)                                    # [n, X]
    out = np.zeros((h.shape[0], down_exps.shape[1]))
    for t in range(h.shape[0]):
        sel = np.argsort(-probs[t], kind="stable")[:k]
        w = probs[t, sel]
        if norm_w:
            w = w / w.sum()
        for e, we in zip(sel, w):
            out[t] += we * glu_ffn(h[t:t + 1], gate_exps[e], up_exps[e], down_exps[e], silu)[0]
    return out


def moe_ffn_ds(h, router, bias, gate_exps, up_exps, down_exps, k, sigmoid_gate, n_group,
               group_used, norm_w, scale):
    """deepseek2's routed experts (HF DeepseekV3MoE): probabilities (sigmoid or softmax),
    selection by probability + bias within the best groups, weights the probabilities."""
    logits = h @ router.T
    probs = sigmoid(logits) if sigmoid_gate else softmax(logits)     # [n, X]
    n_expert = probs.shape[1]
    out = np.zeros((h.shape[0], down_exps.shape[1]))
    for t in range(h.shape[0]):
        score = probs[t] + (bias if bias is not None else 0.0)
        if n_group > 1:
            groups = score.reshape(n_group, n_expert // n_group)
            gscore = np.sort(groups, axis=1)[:, ::-1][:, :2].sum(axis=1)
            keep = np.argsort(-gscore, kind="stable")[:group_used]
            mask = np.full(n_group, True)
            mask[keep] = False
            score = np.where(np.repeat(mask, n_expert // n_group), -np.inf, score)
        sel = np.argsort(-score, kind="stable")[:k]
        w = probs[t, sel]
        if norm_w:
            w = w / w.sum()
        w = w * scale
        for e, we in zip(sel, w):
            out[t] += we * glu_ffn(h[t:t + 1], gate_exps[e], up_exps[e], down_exps[e], silu)[0]
    return out


def swiglu_oai(g, u):
    g = np.minimum(g, OAI_LIMIT)
    u = np.clip(u, -OAI_LIMIT, OAI_LIMIT)
    return g * sigmoid(OAI_ALPHA * g) * (u + 1.0)


def moe_ffn_oai(h, router, router_b, gate_exps, gate_b, up_exps, up_b, down_exps, down_b, k):
    """gpt-oss: top-k of the biased router logits, softmax over them, biased experts with the
    clamped SwiGLU. *_exps [X, out, in], *_b [X, out]."""
    logits = h @ router.T + router_b                                 # [n, X]
    out = np.zeros((h.shape[0], down_exps.shape[1]))
    for t in range(h.shape[0]):
        sel = np.argsort(-logits[t], kind="stable")[:k]
        w = softmax(logits[t, sel])
        for e, we in zip(sel, w):
            a = swiglu_oai(gate_exps[e] @ h[t] + gate_b[e], up_exps[e] @ h[t] + up_b[e])
            out[t] += we * (down_exps[e] @ a + down_b[e])
    return out


# ---- the model -------------------------------------------------------------------------------

class Model:
    """A GGUF model read with gguf-py; weights dequantized to float64 on first use."""

    def __init__(self, path):
        self.path = path
        self.reader = GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache = {}
        f = self.reader.fields
        self.arch = self._kv("general.architecture")
        a = self.arch
        if a not in ROPE_TYPE:
            raise ValueError(f"{path}: architecture {a!r} is not supported by the reference")
        self.n_embd = int(self._kv(f"{a}.embedding_length"))
        self.n_layer = int(self._kv(f"{a}.block_count"))
        self.n_head = int(self._kv(f"{a}.attention.head_count"))
        self.n_head_kv = int(self._kv(f"{a}.attention.head_count_kv", self.n_head))
        self.head_dim = int(self._kv(f"{a}.attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(self._kv(f"{a}.rope.dimension_count", self.head_dim))
        self.eps = float(self._kv(f"{a}.attention.layer_norm_rms_epsilon"))
        self.rope_base = float(self._kv(f"{a}.rope.freq_base", 10000.0))
        self.n_expert = int(self._kv(f"{a}.expert_count", 0))
        self.n_expert_used = int(self._kv(f"{a}.expert_used_count", 0))
        self.n_swa = int(self._kv(f"{a}.attention.sliding_window", 0))
        self.rope_mode = ROPE_TYPE[a]
        self.yarn = None
        stype = self._kv(f"{a}.rope.scaling.type", "none")
        if stype == "yarn":
            self.yarn = (float(self._kv(f"{a}.rope.scaling.factor")),
                         int(self._kv(f"{a}.rope.scaling.original_context_length")),
                         float(self._kv(f"{a}.rope.scaling.yarn_beta_fast", 32.0)),
                         float(self._kv(f"{a}.rope.scaling.yarn_beta_slow", 1.0)))
        elif stype not in ("none", "longrope"):
            raise ValueError(f"{path}: rope scaling {stype!r} is not supported by the reference")
        # llama.cpp scales every rope by rope.scaling.attn_factor; LongRoPE (phi3 always, llama
        # and granite with rope.scaling.type longrope) divides by the long factors when the
        # context exceeds original_context_length, else by the short ones (get_rope_factors)
        self.attn_factor = float(self._kv(f"{a}.rope.scaling.attn_factor", 1.0))
        self.n_ctx_orig = int(self._kv(f"{a}.rope.scaling.original_context_length",
                                       self._kv(f"{a}.context_length", 4096)))
        self.longrope = a == "phi3" or (a in ("llama", "granite") and stype == "longrope")
        self.rope_factors = None
        self.swa_period = int(self._kv(f"{a}.attention.sliding_window_pattern",
                                       GEMMA2_SWA_PATTERN if a == "gemma2" else 2))
        if a == "gemma2":
            if "output.weight" in self.tensors:  # llama.cpp: wrong number of tensors
                raise ValueError(f"{path}: gemma2 with output.weight (llama.cpp refuses it)")
            self.rope_base_swa = float(self._kv(f"{a}.rope.freq_base_swa", self.rope_base))
            self.n_swa = self.n_swa or 4096
            self.attn_softcap = float(self._kv(f"{a}.attn_logit_softcapping", GEMMA2_SOFTCAP[0]))
            self.final_softcap = float(self._kv(f"{a}.final_logit_softcapping",
                                                GEMMA2_SOFTCAP[1]))
        if a in IMROPE:  # the key is required
            self.rope_factors = mrope_factors(self._kv(f"{a}.rope.dimension_sections"),
                                              self.n_rot, True)
        if a in GDN:
            self.full_attn = int(self._kv(f"{a}.full_attention_interval", 4))
            self.d_conv = int(self._kv(f"{a}.ssm.conv_kernel"))
            self.ssm_s = int(self._kv(f"{a}.ssm.state_size"))
            self.ssm_hk = int(self._kv(f"{a}.ssm.group_count"))
            self.ssm_hv = int(self._kv(f"{a}.ssm.time_step_rank"))
            recr = f.get(f"{a}.attention.recurrent_layers")  # a bool per block, or one
            self.recurrent = ([bool(x) for x in recr.contents()] if recr is not None and
                              isinstance(recr.contents(), list) else
                              [bool(recr.contents())] * self.n_layer if recr is not None else
                              [bool((il + 1) % self.full_attn) for il in range(self.n_layer)])
        if a == "granite":
            self.embd_scale = float(self._kv(f"{a}.embedding_scale", 0.0))
            self.residual_scale = float(self._kv(f"{a}.residual_scale", 0.0))
            self.attn_scale = float(self._kv(f"{a}.attention.scale", 0.0))
            self.logit_scale = float(self._kv(f"{a}.logit_scale"))
        if a == "gemma3" and not self.n_swa:
            # llm_build_gemma3<false> (no SWA) would also apply final logit soft-capping
            raise ValueError(f"{path}: gemma3 without attention.sliding_window is not supported")
        self.n_vocab = int(self.tensors["token_embd.weight"].shape[1])
        # the last nextn_predict_layers blocks are MTP blocks, not run for next-token logits
        # (llama.cpp, any arch: hparams.n_layer() = n_layer_all - n_layer_nextn)
        nextn = int(self._kv(f"{a}.nextn_predict_layers", 0))
        if not 0 <= nextn < self.n_layer:
            raise ValueError(f"{path}: {a}.nextn_predict_layers {nextn} outside "
                             f"[0, {self.n_layer - 1}]")
        self.n_layer -= nextn
        if a == "deepseek2":
            self.kv_lora = int(self._kv(f"{a}.attention.kv_lora_rank"))
            # the legacy layout (no *_mla keys): key/value_length are the per-head sizes and
            # attn_kv_b holds kv_b_proj whole
            self.legacy_kv_b = f"{a}.attention.key_length_mla" not in f
            mla = "" if self.legacy_kv_b else "_mla"
            self.head_k = int(self._kv(f"{a}.attention.key_length{mla}"))
            self.head_v = int(self._kv(f"{a}.attention.value_length{mla}"))
            self.n_dense = int(self._kv(f"{a}.leading_dense_block_count", 0))
            self.yarn_log_mul = float(self._kv(f"{a}.rope.scaling.yarn_log_multiplier", 0.0))
            self.temp_scale = float(self._kv(f"{a}.attention.temperature_scale", 0.0))
            self.temp_len = int(self._kv(f"{a}.attention.temperature_length", 0))
            if self.temp_scale and self.temp_len < 1:
                raise ValueError(f"{path}: {a}.attention.temperature_length {self.temp_len} "
                                 "with a temperature_scale")
            gating = int(self._kv(f"{a}.expert_gating_func", 0))
            if gating == 0:  # llama.cpp's rule: GLM-4.7-Flash files leave the key out
                toks = self.reader.fields.get("tokenizer.ggml.tokens")
                vocab = int(self._kv(f"{a}.vocab_size", len(toks.data) if toks else 0))
                gating = 2 if self.n_layer in (47, 48) and vocab == 154880 else 1
            self.gating_sigmoid = gating == 2
        if a == "glm4moe":  # absent or 0: sigmoid (llama_model_glm4_moe)
            self.gating_sigmoid = int(self._kv(f"{a}.expert_gating_func", 0)) in (0, 2)
            sec = list(self._kv(f"{a}.rope.dimension_sections", [0, 0]))
            if len(sec) >= 2 and sec[0] > 0 and sec[1] > 0:  # llama.cpp's use_mrope()
                self.rope_factors = mrope_factors(sec, self.n_rot, False)
        if a in ("dots1", "bailingmoe2"):  # required: llama.cpp has no router without it
            self.gating_sigmoid = int(self._kv(f"{a}.expert_gating_func")) == 2
        if a in DS_MOE:
            self.n_group = int(self._kv(f"{a}.expert_group_count", 0))
            self.group_used = int(self._kv(f"{a}.expert_group_used_count", 0))
            self.w_norm = bool(self._kv(f"{a}.expert_weights_norm", False))
            self.w_scale = float(self._kv(f"{a}.expert_weights_scale", 1.0)) or 1.0
        if a == "minimax-m2":  # its converter writes it; llama.cpp has no router without it
            self.gating_sigmoid = int(self._kv(f"{a}.expert_gating_func")) == 2
            self.w_norm, self.w_scale = True, 1.0  # llama.cpp reads neither key for it
        if a == "ernie4_5-moe":  # softmax, renormalised, never scaled (llama.cpp's graph)
            self.gating_sigmoid, self.w_norm, self.w_scale = False, True, 1.0

    def _kv(self, key, default=None):
        fld = self.reader.fields.get(key)
        if fld is None:
            if default is None:
                raise KeyError(f"{self.path}: missing key {key}")
            return default
        return fld.contents()

    def has(self, name):
        return name in self.tensors

    def w(self, name):
        """Tensor as float64 ndarray in numpy order (reversed ggml ne: [.., ne1, ne0])."""
        if name not in self._cache:
            t = self.tensors[name]
            shape = [int(x) for x in reversed(t.shape)]
            raw = np.array(t.data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = raw if t.tensor_type == T.F32 else dequantize(raw.view(np.uint8),
                                                                  t.tensor_type)
            self._cache[name] = np.asarray(a, dtype=np.float64).reshape(shape)
        return self._cache[name]

    def is_swa_layer(self, il):
        if self.arch == "gpt-oss":
            return il % self.swa_period < self.swa_period - 1
        if self.arch == "gemma2":  # load_swa_pattern(ml, 2): the file's pattern, else 2
            return il % self.swa_period < self.swa_period - 1
        return self.arch == "gemma3" and il % GEMMA3_SWA_PATTERN < GEMMA3_SWA_PATTERN - 1

    # -- one block's pieces --

    def _attention_mla(self, il, h, positions):
        """deepseek2 in HF's MHA form (see the module docstring)."""
        b = f"blk.{il}."
        n, H, C, R = h.shape[0], self.n_head, self.kv_lora, self.n_rot
        nope, dv = self.head_k - R, self.head_v
        if self.has(b + "attn_q_a.weight"):
            q = rms_norm(h @ self.w(b + "attn_q_a.weight").T,
                         self.w(b + "attn_q_a_norm.weight"), self.eps)
            q = q @ self.w(b + "attn_q_b.weight").T
        else:
            q = h @ self.w(b + "attn_q.weight").T
        q = q.reshape(n, H, self.head_k)
        ckv = h @ self.w(b + "attn_kv_a_mqa.weight").T                # [n, C + R]
        c = rms_norm(ckv[:, :C], self.w(b + "attn_kv_a_norm.weight"), self.eps)
        if self.legacy_kv_b:  # HF's kv_b_proj [H * (nope + dv), C] as it is
            kv_b = self.w(b + "attn_kv_b.weight").reshape(H, nope + dv, C)
        else:  # numpy order: k_b [H, C, nope], v_b [H, dv, C]
            k_b, v_b = self.w(b + "attn_k_b.weight"), self.w(b + "attn_v_b.weight")
            kv_b = np.concatenate([np.transpose(k_b, (0, 2, 1)), v_b], axis=1)
        kv = (c @ kv_b.reshape(H * (nope + dv), C).T).reshape(n, H, nope + dv)
        yarn = self.yarn
        q_pe = rope(q[:, :, nope:], positions, self.rope_base, R, ROPE_NORM, yarn, False)
        k_pe = rope(ckv[:, None, C:], positions, self.rope_base, R, ROPE_NORM, yarn, False)
        qf = np.concatenate([q[:, :, :nope], q_pe], axis=2)
        if self.temp_scale:  # Mistral Large 3's temperature (vLLM's llama_4_scaling on Q)
            pos = np.asarray(positions, dtype=np.float64)
            qf = qf * (1.0 + self.temp_scale * np.log(np.floor(pos / self.temp_len) + 1.0)
                       )[:, None, None]
        kf = np.concatenate([kv[:, :, :nope], np.repeat(k_pe, H, axis=1)], axis=2)
        mscale = 1.0
        if yarn is not None:
            mscale = 1.0 + self.yarn_log_mul * math.log(yarn[0])
        o = attention(qf, kf, kv[:, :, nope:], mscale * mscale / math.sqrt(self.head_k))
        return o @ self.w(b + "attn_output.weight").T

    def _delta_net(self, il, h):
        """qwen3next's Gated DeltaNet layer (see the module docstring)."""
        b = f"blk.{il}."
        n, S, Hk, Hv, K = h.shape[0], self.ssm_s, self.ssm_hk, self.ssm_hv, self.d_conv
        r = Hv // Hk
        mixed = h @ self.w(b + "attn_qkv.weight").T                   # [n, C]
        z = (h @ self.w(b + "attn_gate.weight").T).reshape(n, Hv, S)
        if self.arch in QWEN35:  # in_proj_b, in_proj_a apart, per value head
            beta = sigmoid(h @ self.w(b + "ssm_beta.weight").T)
            a = h @ self.w(b + "ssm_alpha.weight").T + self.w(b + "ssm_dt.bias")
        else:
            ba = (h @ self.w(b + "ssm_ba.weight").T).reshape(n, Hk, 2 * r)
            beta = sigmoid(ba[:, :, :r].reshape(n, Hv))
            a = ba[:, :, r:].reshape(n, Hv) + self.w(b + "ssm_dt.bias")
        g = np.where(a > 20, a, np.log1p(np.exp(np.minimum(a, 20)))) * self.w(b + "ssm_a")
        w = self.w(b + "ssm_conv1d.weight")                           # [C, K]
        xin = np.concatenate([np.zeros((K - 1, mixed.shape[1])), mixed])
        y = silu(sum(xin[k:k + n] * w[:, k] for k in range(K)))
        kd = Hk * S

        def l2(x):
            return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + self.eps)
        # value head h reads key head h // r, or (Qwen3.5, whose converter reorders the value
        # heads) h % Hk
        if self.arch in QWEN35:
            def rep(x):
                return np.tile(x, (1, r, 1))
        else:
            def rep(x):
                return np.repeat(x, r, axis=1)
        q = rep(l2(y[:, :kd].reshape(n, Hk, S))) / math.sqrt(S)
        k = rep(l2(y[:, kd:2 * kd].reshape(n, Hk, S)))
        v = y[:, 2 * kd:].reshape(n, Hv, S)
        state = np.zeros((Hv, S, S))                                  # [head, k, v]
        o = np.zeros((n, Hv, S))
        for t in range(n):
            state *= np.exp(g[t])[:, None, None]
            mem = np.einsum("hkv,hk->hv", state, k[t])
            delta = (v[t] - mem) * beta[t][:, None]
            state += k[t][:, :, None] * delta[:, None, :]
            o[t] = np.einsum("hkv,hk->hv", state, q[t])
        o = rms_norm(o, self.w(b + "ssm_norm.weight"), self.eps) * silu(z)
        return o.reshape(n, Hv * S) @ self.w(b + "ssm_out.weight").T

    def _attention(self, il, h, positions):
        b = f"blk.{il}."
        if self.arch == "deepseek2":
            return self._attention_mla(il, h, positions)
        if self.arch in GDN and self.recurrent[il]:
            return self._delta_net(il, h)
        gate = None
        a, n = self.arch, h.shape[0]
        if self.has(b + "attn_qkv.weight"):  # fused (phi3): rows q | k | v
            qkv = h @ self.w(b + "attn_qkv.weight").T
            if self.has(b + "attn_qkv.bias"):
                qkv = qkv + self.w(b + "attn_qkv.bias")
            nq, nkv = self.n_head * self.head_dim, self.n_head_kv * self.head_dim
            q, k, v = qkv[:, :nq], qkv[:, nq:nq + nkv], qkv[:, nq + nkv:]
        else:
            q = h @ self.w(b + "attn_q.weight").T
            if a in GDN:  # per head q | gate
                qg = q.reshape(n, self.n_head, 2 * self.head_dim)
                q = qg[:, :, :self.head_dim].reshape(n, -1)
                gate = qg[:, :, self.head_dim:].reshape(n, -1)
            k = h @ self.w(b + "attn_k.weight").T
            v = h @ self.w(b + "attn_v.weight").T
        for name, m in (("attn_q.bias", "q"), ("attn_k.bias", "k"), ("attn_v.bias", "v")):
            if self.has(b + name):
                bias = self.w(b + name)
                if m == "q":
                    q = q + bias
                elif m == "k":
                    k = k + bias
                else:
                    v = v + bias
        if a in ("olmoe", "minimax-m2"):  # norm over the whole projection, before the reshape
            q = rms_norm(q, self.w(b + "attn_q_norm.weight"), self.eps)
            k = rms_norm(k, self.w(b + "attn_k_norm.weight"), self.eps)
        d = self.head_dim
        q = q.reshape(n, self.n_head, d)
        k = k.reshape(n, self.n_head_kv, d)
        v = v.reshape(n, self.n_head_kv, d)
        if a in ("qwen3moe", "gemma3", "qwen3", "dots1", "bailingmoe2", "qwen3vl",
                 "qwen3vlmoe") + GDN:  # per-head norm, before RoPE
            q = rms_norm(q, self.w(b + "attn_q_norm.weight"), self.eps)
            k = rms_norm(k, self.w(b + "attn_k_norm.weight"), self.eps)
        if a == "glm4moe":  # each where the file has it (GLM-4.5's use_qk_norm)
            if self.has(b + "attn_q_norm.weight"):
                q = rms_norm(q, self.w(b + "attn_q_norm.weight"), self.eps)
            if self.has(b + "attn_k_norm.weight"):
                k = rms_norm(k, self.w(b + "attn_k_norm.weight"), self.eps)
        swa = self.is_swa_layer(il)
        base = (GEMMA3_SWA_ROPE_BASE if swa and a == "gemma3" else
                self.rope_base_swa if swa and a == "gemma2" else self.rope_base)
        rk = dict(freq_factors=self.rope_factors, attn_factor=self.attn_factor)
        q = rope(q, positions, base, self.n_rot, self.rope_mode, self.yarn, **rk)
        k = rope(k, positions, base, self.n_rot, self.rope_mode, self.yarn, **rk)
        if a == "hunyuan-moe":  # per-head norms after the rope (llama_model_hunyuan_moe)
            q = rms_norm(q, self.w(b + "attn_q_norm.weight"), self.eps)
            k = rms_norm(k, self.w(b + "attn_k_norm.weight"), self.eps)
        sinks, softcap = None, None
        if a == "gemma3":
            q = q * (1.0 / math.sqrt(d))  # f_attention_scale (not the 27B rule)
            scale = 1.0
        elif a == "gemma2":  # f_attention_scale: the 27B (46 layers) rule, else 1/sqrt(d)
            q = q * (1.0 / math.sqrt(self.n_embd / self.n_head if self.n_layer == 46 else d))
            scale, softcap = 1.0, self.attn_softcap
        elif a == "granite" and self.attn_scale:
            scale = self.attn_scale
        elif a == "gpt-oss":
            scale = 1.0 / math.sqrt(self.n_rot)
            sinks = self.w(b + "attn_sinks.weight")
        else:
            scale = 1.0 / math.sqrt(d)
        o = attention(q, k, v, scale, window=self.n_swa if swa else None, sinks=sinks,
                      softcap=softcap)
        if gate is not None:
            o = o * sigmoid(gate)
        o = o @ self.w(b + "attn_output.weight").T
        # ERNIE 4.5: llama.cpp loads attn_output.bias and never applies it
        if self.has(b + "attn_output.bias") and a not in ("ernie4_5", "ernie4_5-moe"):
            o = o + self.w(b + "attn_output.bias")
        return o

    def _ffn(self, il, h):
        b = f"blk.{il}."
        if self.arch in ("gemma3", "gemma2"):
            return glu_ffn(h, self.w(b + "ffn_gate.weight"), self.w(b + "ffn_up.weight"),
                           self.w(b + "ffn_down.weight"), gelu_tanh)
        if self.arch == "gpt-oss":
            return moe_ffn_oai(h, self.w(b + "ffn_gate_inp.weight"),
                               self.w(b + "ffn_gate_inp.bias"),
                               self.w(b + "ffn_gate_exps.weight"),
                               self.w(b + "ffn_gate_exps.bias"),
                               self.w(b + "ffn_up_exps.weight"), self.w(b + "ffn_up_exps.bias"),
                               self.w(b + "ffn_down_exps.weight"),
                               self.w(b + "ffn_down_exps.bias"), self.n_expert_used)
        if self.arch in DS_MOE and self.has(b + "ffn_gate_inp.weight"):
            bias = self.w(b + "exp_probs_b.bias") if self.has(b + "exp_probs_b.bias") else None
            out = moe_ffn_ds(h, self.w(b + "ffn_gate_inp.weight"), bias,
                             self.w(b + "ffn_gate_exps.weight"),
                             self.w(b + "ffn_up_exps.weight"),
                             self.w(b + "ffn_down_exps.weight"), self.n_expert_used,
                             self.gating_sigmoid, self.n_group, self.group_used, self.w_norm,
                             self.w_scale)
            if self.has(b + "ffn_gate_shexp.weight"):
                out = out + glu_ffn(h, self.w(b + "ffn_gate_shexp.weight"),
                                    self.w(b + "ffn_up_shexp.weight"),
                                    self.w(b + "ffn_down_shexp.weight"), silu)
            return out
        if self.arch == "phi3":  # ffn_up rows gate | up (ggml_swiglu: silu of the first half)
            gu = h @ self.w(b + "ffn_up.weight").T
            f = gu.shape[1] // 2
            return (silu(gu[:, :f]) * gu[:, f:]) @ self.w(b + "ffn_down.weight").T
        if not self.has(b + "ffn_gate_inp.weight"):  # llama/granite: optional biases
            def bias(name):
                return self.w(b + name) if self.has(b + name) else 0.0
            g = h @ self.w(b + "ffn_gate.weight").T + bias("ffn_gate.bias")
            u = h @ self.w(b + "ffn_up.weight").T + bias("ffn_up.bias")
            return (silu(g) * u) @ self.w(b + "ffn_down.weight").T + bias("ffn_down.bias")
        out = moe_ffn(h, self.w(b + "ffn_gate_inp.weight"), self.w(b + "ffn_gate_exps.weight"),
                      self.w(b + "ffn_up_exps.weight"), self.w(b + "ffn_down_exps.weight"),
                      self.n_expert_used, MOE_NORM_W[self.arch])
        if self.arch == "hunyuan-moe":  # the shared expert, ungated
            out = out + glu_ffn(h, self.w(b + "ffn_gate_shexp.weight"),
                                self.w(b + "ffn_up_shexp.weight"),
                                self.w(b + "ffn_down_shexp.weight"), silu)
        if self.arch in ("qwen2moe", "qwen3next", "qwen35moe"):
            gate = sigmoid(h @ self.w(b + "ffn_gate_inp_shexp.weight"))   # [n]
            shexp = glu_ffn(h, self.w(b + "ffn_gate_shexp.weight"),
                            self.w(b + "ffn_up_shexp.weight"),
                            self.w(b + "ffn_down_shexp.weight"), silu)
            out = out + gate[:, None] * shexp
        return out

    def forward(self, tokens, n_ctx=None):
        """Logits [len(tokens), n_vocab] (float64) for a fresh sequence at positions 0..n-1,
        in a context of n_ctx positions (default len(tokens), as `sluice eval`), which picks
        LongRoPE's factors."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if "rope_freqs.weight" in self.tensors:
            self.rope_factors = self.w("rope_freqs.weight")
        elif self.longrope:
            name = ("rope_factors_long.weight" if (n_ctx or len(tokens)) > self.n_ctx_orig
                    else "rope_factors_short.weight")
            self.rope_factors = self.w(name) if name in self.tensors else None
        if tokens.ndim != 1 or len(tokens) == 0:
            raise ValueError("tokens: a non-empty 1-D sequence")
        if tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError(f"tokens: ids must be in [0, {self.n_vocab})")
        positions = np.arange(len(tokens))
        embd = self.w("token_embd.weight")
        x = embd[tokens].copy()
        gemma = self.arch in ("gemma3", "gemma2")
        if gemma:
            x *= math.sqrt(self.n_embd)
        # granite: embedding_scale, and residual_scale on both block outputs
        if self.arch == "granite" and self.embd_scale:
            x *= self.embd_scale
        rs = self.residual_scale if self.arch == "granite" and self.residual_scale else 1.0
        for il in range(self.n_layer):
            b = f"blk.{il}."
            h = rms_norm(x, self.w(b + "attn_norm.weight"), self.eps)
            o = self._attention(il, h, positions)
            if gemma:
                o = rms_norm(o, self.w(b + "post_attention_norm.weight"), self.eps)
            x = x + rs * o
            ffn_norm = ("post_attention_norm"
                        if self.arch in ("gpt-oss", "glm4moe") + GDN else "ffn_norm")
            h = rms_norm(x, self.w(b + ffn_norm + ".weight"), self.eps)
            f = self._ffn(il, h)
            if gemma:
                f = rms_norm(f, self.w(b + "post_ffw_norm.weight"), self.eps)
            x = x + rs * f
        x = rms_norm(x, self.w("output_norm.weight"), self.eps)
        out = self.w("output.weight") if self.has("output.weight") else embd
        logits = x @ out.T
        if self.has("output.bias"):  # qwen2
            logits = logits + self.w("output.bias")
        if self.arch == "granite":
            logits = logits / self.logit_scale
        if self.arch == "gemma2" and self.final_softcap:
            logits = self.final_softcap * np.tanh(logits / self.final_softcap)
        return logits


def load(path):
    return Model(path)


def parse_tokens(s):
    try:
        toks = [int(x) for x in s.split(",") if x.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens {s!r}: comma-separated integers expected")
    if not toks:
        raise argparse.ArgumentTypeError("--tokens: at least one token")
    return toks


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=parse_tokens, required=True)
    ap.add_argument("--out", help="write float64 little-endian logits [n_tokens, n_vocab]")
    args = ap.parse_args(argv)
    m = load(args.model)
    logits = m.forward(args.tokens)
    if args.out:
        logits.astype("<f8").tofile(args.out)
    print(f"ref_forward: {m.arch}, {m.n_layer} layers, {len(args.tokens)} tokens, "
          f"vocab {m.n_vocab}; argmax per position: {logits.argmax(axis=1).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
