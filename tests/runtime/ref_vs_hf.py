"""Manual cross-check: ref_forward.py against HF transformers' modeling code.

usage: python ref_vs_hf.py MODEL.gguf HFARCH [MODEL.gguf HFARCH ...]
       HFARCH: llama | mixtral | qwen3moe | olmoe | qwen2moe | gemma3 | gpt-oss

Needs torch and transformers (5.x: fused experts mlp.experts.gate_up_proj / down_proj) as well
as gguf + numpy; not a Bazel target (CI has no torch). The GGUF weights are mapped back to the
HF layout by inverting convert_hf_to_gguf.py: llama/mixtral q/k rows un-permuted (LlamaModel.
permute), Gemma norms minus 1, experts stacked as HF's fused tensors (gpt-oss: gate and up
interleaved in gate_up_proj [X, in, 2F] with their biases, down_proj [X, F, out]; YaRN with
"truncate": true, the GGUF semantics, see ref_forward.py). The HF model runs in
float64 with eager attention/experts; HF keeps RMSNorm and inv_freq in float32, so agreement is
~1e-7, not 1e-15. Measured 2026-11-23 (transformers 5.23, torch 2.15, mkmodel defaults):
every arch <= 2.4e-7; with a deliberate error in the reference (olmoe NORM rope, top-k renorm for
qwen2moe/olmoe, gemma3 local rope base 1e6, window off by one) 2.5e-2 .. 3.2e-1.
gpt-oss, measured 2026-11-24 (transformers 5.24, torch 2.15 CPU, mkmodel --arch gpt-oss
defaults: 2 layers, one sliding, sinks, biases, YaRN factor 32): 1.245e-07; with HF's own
"truncate": false YaRN boundaries instead of llama.cpp's 1.2e-03, with gate and up swapped in
gate_up_proj 6.6e-01.
"""
import os
import sys

import numpy as np
import torch
import transformers as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_forward as rf  # noqa

TOKENS = [1, 17, 300, 5, 9, 100, 200, 300, 400, 7, 8, 9]


def unpermute(w, n_head):
    # inverse of LlamaModel.permute: reshape(n_head, 2, d/2, in).swapaxes(1, 2)
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, d2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def build(m, hfarch):
    E, H, Hkv, D = m.n_embd, m.n_head, m.n_head_kv, m.head_dim
    V = m.n_vocab
    g = m.arch == "gemma3"
    sh = (lambda x: x - 1.0) if g else (lambda x: x)
    common = dict(vocab_size=V, hidden_size=E, num_hidden_layers=m.n_layer,
                  num_attention_heads=H, num_key_value_heads=Hkv, head_dim=D,
                  rms_norm_eps=m.eps, max_position_embeddings=256, attn_implementation="eager",
                  experts_implementation="eager")
    rope = {"rope_type": "default", "rope_theta": m.rope_base}
    if hfarch == "mixtral":
        F = m.w("blk.0.ffn_gate_exps.weight").shape[1]
        cfg = tf.MixtralConfig(intermediate_size=F, num_local_experts=m.n_expert,
                               num_experts_per_tok=m.n_expert_used, rope_parameters=rope,
                               tie_word_embeddings=False, **common)
        model = tf.MixtralForCausalLM(cfg)
    elif hfarch == "llama":
        F = m.w("blk.0.ffn_gate.weight").shape[0]
        cfg = tf.LlamaConfig(intermediate_size=F, rope_parameters=rope,
                             tie_word_embeddings=False, **common)
        model = tf.LlamaForCausalLM(cfg)
    elif hfarch == "qwen3moe":
        F = m.w("blk.0.ffn_gate_exps.weight").shape[1]
        cfg = tf.Qwen3MoeConfig(intermediate_size=F, moe_intermediate_size=F,
                                num_experts=m.n_expert, num_experts_per_tok=m.n_expert_used,
                                norm_topk_prob=True, rope_parameters=rope,
                                tie_word_embeddings=False, **common)
        model = tf.Qwen3MoeForCausalLM(cfg)
    elif hfarch == "olmoe":
        F = m.w("blk.0.ffn_gate_exps.weight").shape[1]
        cfg = tf.OlmoeConfig(intermediate_size=F, num_experts=m.n_expert,
                             num_experts_per_tok=m.n_expert_used, norm_topk_prob=False,
                             rope_parameters=rope, tie_word_embeddings=False, **common)
        model = tf.OlmoeForCausalLM(cfg)
    elif hfarch == "qwen2moe":
        F = m.w("blk.0.ffn_gate_exps.weight").shape[1]
        S = m.w("blk.0.ffn_gate_shexp.weight").shape[0]
        cfg = tf.Qwen2MoeConfig(intermediate_size=S, moe_intermediate_size=F,
                                shared_expert_intermediate_size=S, num_experts=m.n_expert,
                                num_experts_per_tok=m.n_expert_used, norm_topk_prob=False,
                                rope_parameters=rope, tie_word_embeddings=False,
                                qkv_bias=True, **common)
        model = tf.Qwen2MoeForCausalLM(cfg)
    elif hfarch == "gpt-oss":
        F = m.w("blk.0.ffn_gate_exps.weight").shape[1]
        factor, n_ctx_orig, beta_fast, beta_slow = m.yarn
        cfg = tf.GptOssConfig(
            intermediate_size=F, num_local_experts=m.n_expert,
            num_experts_per_tok=m.n_expert_used, sliding_window=m.n_swa,
            layer_types=["sliding_attention" if m.is_swa_layer(i) else "full_attention"
                         for i in range(m.n_layer)],
            attention_bias=True, tie_word_embeddings=False,
            rope_parameters={"rope_type": "yarn", "rope_theta": m.rope_base, "factor": factor,
                             "original_max_position_embeddings": int(n_ctx_orig),
                             "beta_fast": beta_fast, "beta_slow": beta_slow, "truncate": True},
            **common)
        model = tf.GptOssForCausalLM(cfg)
    elif hfarch == "gemma3":
        F = m.w("blk.0.ffn_gate.weight").shape[0]
        cfg = tf.Gemma3TextConfig(
            intermediate_size=F, query_pre_attn_scalar=D, sliding_window=m.n_swa,
            rope_parameters={"full_attention": {"rope_type": "default",
                                               "rope_theta": m.rope_base},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
            final_logit_softcapping=None, attn_logit_softcapping=None,
            tie_word_embeddings=True, **common)
        model = tf.Gemma3ForCausalLM(cfg)
    sd = {"model.embed_tokens.weight": m.w("token_embd.weight"),
          "model.norm.weight": sh(m.w("output_norm.weight"))}
    if m.has("output.weight"):
        sd["lm_head.weight"] = m.w("output.weight")
    for i in range(m.n_layer):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        q, k = m.w(b + "attn_q.weight"), m.w(b + "attn_k.weight")
        if m.arch == "llama":
            q, k = unpermute(q, H), unpermute(k, Hkv)
        sd[p + "self_attn.q_proj.weight"] = q
        sd[p + "self_attn.k_proj.weight"] = k
        sd[p + "self_attn.v_proj.weight"] = m.w(b + "attn_v.weight")
        sd[p + "self_attn.o_proj.weight"] = m.w(b + "attn_output.weight")
        for x, name in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("o", "attn_output")):
            if m.has(b + f"{name}.bias"):
                sd[p + f"self_attn.{x}_proj.bias"] = m.w(b + f"{name}.bias")
        if m.has(b + "attn_sinks.weight"):
            sd[p + "self_attn.sinks"] = m.w(b + "attn_sinks.weight")
        if m.has(b + "attn_q_norm.weight"):
            sd[p + "self_attn.q_norm.weight"] = sh(m.w(b + "attn_q_norm.weight"))
            sd[p + "self_attn.k_norm.weight"] = sh(m.w(b + "attn_k_norm.weight"))
        sd[p + "input_layernorm.weight"] = sh(m.w(b + "attn_norm.weight"))
        if g:
            sd[p + "post_attention_layernorm.weight"] = sh(m.w(b + "post_attention_norm.weight"))
            sd[p + "pre_feedforward_layernorm.weight"] = sh(m.w(b + "ffn_norm.weight"))
            sd[p + "post_feedforward_layernorm.weight"] = sh(m.w(b + "post_ffw_norm.weight"))
        elif hfarch == "gpt-oss":
            sd[p + "post_attention_layernorm.weight"] = m.w(b + "post_attention_norm.weight")
        else:
            sd[p + "post_attention_layernorm.weight"] = m.w(b + "ffn_norm.weight")
        if hfarch == "gpt-oss":  # GGUF [X, out, in] -> HF [X, in, out], gate/up interleaved
            sd[p + "mlp.router.weight"] = m.w(b + "ffn_gate_inp.weight")
            sd[p + "mlp.router.bias"] = m.w(b + "ffn_gate_inp.bias")
            gate, up = m.w(b + "ffn_gate_exps.weight"), m.w(b + "ffn_up_exps.weight")
            gu = np.empty((gate.shape[0], gate.shape[2], 2 * gate.shape[1]))
            gu[:, :, 0::2], gu[:, :, 1::2] = gate.swapaxes(1, 2), up.swapaxes(1, 2)
            gub = np.empty((gate.shape[0], 2 * gate.shape[1]))
            gub[:, 0::2] = m.w(b + "ffn_gate_exps.bias")
            gub[:, 1::2] = m.w(b + "ffn_up_exps.bias")
            sd[p + "mlp.experts.gate_up_proj"] = gu
            sd[p + "mlp.experts.gate_up_proj_bias"] = gub
            sd[p + "mlp.experts.down_proj"] = m.w(b + "ffn_down_exps.weight").swapaxes(1, 2)
            sd[p + "mlp.experts.down_proj_bias"] = m.w(b + "ffn_down_exps.bias")
        elif m.has(b + "ffn_gate_inp.weight"):
            sd[p + "mlp.gate.weight"] = m.w(b + "ffn_gate_inp.weight")
            sd[p + "mlp.experts.gate_up_proj"] = np.concatenate(
                [m.w(b + "ffn_gate_exps.weight"), m.w(b + "ffn_up_exps.weight")], axis=1)
            sd[p + "mlp.experts.down_proj"] = m.w(b + "ffn_down_exps.weight")
            if m.has(b + "ffn_gate_shexp.weight"):
                sd[p + "mlp.shared_expert.gate_proj.weight"] = m.w(b + "ffn_gate_shexp.weight")
                sd[p + "mlp.shared_expert.up_proj.weight"] = m.w(b + "ffn_up_shexp.weight")
                sd[p + "mlp.shared_expert.down_proj.weight"] = m.w(b + "ffn_down_shexp.weight")
                gate = m.w(b + "ffn_gate_inp_shexp.weight")
                sd[p + "mlp.shared_expert_gate.weight"] = gate[None, :]
        else:
            sd[p + "mlp.gate_proj.weight"] = m.w(b + "ffn_gate.weight")
            sd[p + "mlp.up_proj.weight"] = m.w(b + "ffn_up.weight")
            sd[p + "mlp.down_proj.weight"] = m.w(b + "ffn_down.weight")
    model = model.double().eval()
    own = model.state_dict()
    missing = [k for k in own if k not in sd and not k.endswith("rotary_emb.inv_freq")]
    extra = [k for k in sd if k not in own]
    bad = [k for k in sd if k in own and tuple(own[k].shape) != sd[k].shape]
    if missing or extra or bad:
        print(hfarch, "MISSING", missing[:8], "EXTRA", extra[:8], "SHAPE", bad[:4])
    model.load_state_dict({k: torch.tensor(np.ascontiguousarray(v)) for k, v in sd.items()
                           if k in own}, strict=False)
    return model


def main():
    for path, hfarch in zip(sys.argv[1::2], sys.argv[2::2]):
        m = rf.load(path)
        ref = m.forward(TOKENS)
        model = build(m, hfarch)
        with torch.no_grad():
            out = model(torch.tensor([TOKENS])).logits[0].numpy()
        rel = (np.abs(out - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
        print(f"{hfarch:9s} {path}: max rel err ref vs HF = {rel:.3e}")


if __name__ == "__main__":
    main()
