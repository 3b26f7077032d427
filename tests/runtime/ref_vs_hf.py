"""Manual cross-check: ref_forward.py against HF transformers' modeling code.

usage: python ref_vs_hf.py MODEL.gguf HFARCH [MODEL.gguf HFARCH ...] [--sluice BIN]
       HFARCH: llama | mixtral | qwen3 | qwen3moe | olmoe | qwen2moe | gemma3 | gpt-oss
       (--sluice: `sluice eval` on each file against HF too)
       python ref_vs_hf.py --deepseek-v3 [OUTDIR] [--sluice BIN]   (exit 0 iff all hold)
       python ref_vs_hf.py --qwen3next [OUTDIR] [--sluice BIN]     (exit 0 iff all hold)

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
qwen3 (dense Qwen3ForCausalLM), measured 2026-11-28 (transformers 5.24, torch 2.15 CPU, mkmodel
--arch qwen3 defaults): ref vs HF 1.25e-07, `sluice eval` vs HF 2.86e-07 (qwen3moe beside it:
1.26e-07, 2.35e-07); with a deliberate error in the reference (NORM rope, no q/k norms, rope
base 1e4) 3.9e-01, 1.4e-01, 1.4e-01.
DeepSeek-V3 (--deepseek-v3) goes the other way, as a real checkpoint does: DeepseekV3ForCausalLM
random-initialised from a tiny config (every weight random and float32-exact, norms 1 + noise,
e_score_correction_bias non-zero; q_lora_rank 32 and none, kv_lora_rank 16, nope 16 / rope 8 /
v 12, one leading dense layer, 2 shared experts, 8 experts in 4 groups of which 2 stay, top 3,
routed_scaling_factor 2.5, norm_topk_prob on and off, YaRN factor 40 with mscale =
mscale_all_dim = 0.707), its state dict converted to an F32 GGUF as convert_hf_to_gguf.py's
DeepseekV2Model does (dsv3_convert), ref_forward run on the file, and every deliberate error
of DSV3_MUTANTS must move the logits by more than 1e-3. Measured 2026-11-24 (transformers
5.24, torch 2.15 CPU): 5.2e-07 and 6.8e-07, the legacy attn_kv_b layout (the converter before
the MLA split) 5.2e-07; deliberate errors 6.1e-01 .. 1.8e+00. With --sluice, `sluice eval` on
the same three files against HF: 1.0e-06, 1.1e-06, 1.0e-06.
Qwen3-Next (--qwen3next) goes the same way: Qwen3NextForCausalLM random-initialised at
mkmodel's default shapes (qnext_model), converted as llama.cpp's Qwen3NextModel does
(qnext_convert), ref_forward and `sluice eval` run on the file. HF computes the DeltaNet's
gates, its chunked delta rule and the gated norm in float32 even in a float64 model, so the
bound is 5e-5. Measured 2026-11-28 (transformers 5.24, torch 2.15; the fla / causal_conv1d
kernels absent, HF's PyTorch fallbacks): full_attention_interval 4: ref 3.6e-06, sluice 1.0e-05;
interval 2: ref 1.1e-05, sluice 1.1e-05; deliberate conversion errors (value heads in Qwen3.5's
tiled order, beta and alpha swapped, A_log stored as is) 1.5e+00 .. 1.6e+00.
"""
import math
import os
import subprocess
import sys
import tempfile

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
    elif hfarch == "qwen3":  # dense Qwen3: per-head q/k norms, no biases, NEOX rope
        F = m.w("blk.0.ffn_gate.weight").shape[0]
        cfg = tf.Qwen3Config(intermediate_size=F, rope_parameters=rope,
                             tie_word_embeddings=not m.has("output.weight"), **common)
        model = tf.Qwen3ForCausalLM(cfg)
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


# ---- DeepSeek-V3: an HF model random-initialised from a config, converted as llama.cpp does ----

def dsv3_config_json(q_lora, norm_topk):
    """A tiny DeepSeek-V3 config.json: every feature of the real one at toy sizes (v_head_dim
    differs from qk_nope_head_dim so a swapped kv_b split cannot pass)."""
    return {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "vocab_size": 512, "hidden_size": 64, "intermediate_size": 80,
            "moe_intermediate_size": 24, "num_hidden_layers": 3, "first_k_dense_replace": 1,
            "num_attention_heads": 4, "num_key_value_heads": 4, "n_shared_experts": 2,
            "n_routed_experts": 8, "num_experts_per_tok": 3, "n_group": 4, "topk_group": 2,
            "routed_scaling_factor": 2.5, "norm_topk_prob": norm_topk, "scoring_func": "sigmoid",
            "kv_lora_rank": 16, "q_lora_rank": q_lora, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 12, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 2560, "tie_word_embeddings": False,
            "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64,
                             "beta_fast": 32, "beta_slow": 1, "mscale": 0.707,
                             "mscale_all_dim": 0.707},
            "rope_theta": 10000.0, "num_nextn_predict_layers": 0}


def dsv3_model(cj, seed):
    """HF DeepseekV3ForCausalLM in float64 with every weight random (norms near 1, a non-zero
    e_score_correction_bias as large as the spread of the sigmoid scores), float32-exact so
    the F32 GGUF holds exactly the weights HF runs."""
    rs = dict(cj["rope_scaling"], rope_type="yarn", rope_theta=cj["rope_theta"])
    rs.pop("type")
    skip = ("architectures", "model_type", "scoring_func", "rope_scaling", "rope_theta",
            "num_nextn_predict_layers")
    cfg = tf.DeepseekV3Config(**{k: v for k, v in cj.items() if k not in skip},
                              rope_parameters=rs, num_mtp_layers=0,
                              attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(seed)
    model = tf.DeepseekV3ForCausalLM(cfg).double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if name.endswith("inv_freq"):
                continue
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if "norm" in name:
                v = 1.0 + 0.2 * r
            elif name.endswith("e_score_correction_bias"):
                v = 0.2 * r
            else:
                v = r / math.sqrt(p.shape[-1])
            p.copy_(v.float().double())
    return model


def dsv3_checkpoint(model, cj):
    """The state dict under the names of a real checkpoint: one tensor per expert (HF 5.x
    fuses them as gate_up_proj = [gate; up] along the output rows, and down_proj)."""
    out = {}
    for k, v in model.state_dict().items():
        v = v.numpy()
        if k.endswith("rotary_emb.inv_freq"):
            continue
        if k.endswith("mlp.experts.gate_up_proj"):
            base, F = k[:-len("gate_up_proj")], cj["moe_intermediate_size"]
            for x in range(v.shape[0]):
                out[f"{base}{x}.gate_proj.weight"] = v[x, :F]
                out[f"{base}{x}.up_proj.weight"] = v[x, F:]
        elif k.endswith("mlp.experts.down_proj"):
            base = k[:-len("down_proj")]
            for x in range(v.shape[0]):
                out[f"{base}{x}.down_proj.weight"] = v[x]
        else:
            out[k] = v
    return out


def dsv3_convert(cj, ckpt, path, legacy=False):
    """convert_hf_to_gguf.py DeepseekV2Model (llama.cpp 0c1e570, conversion/deepseek.py and
    TextModel.set_gguf_parameters), F32 out: the same tensor names (gguf-py's map), experts
    stacked, kv_b_proj split into k_b (transposed) and v_b, and the same metadata keys.
    legacy: the converter before the MLA split (attn_kv_b kept, per-head key/value lengths,
    head_count_kv = head_count, no *_mla keys)."""
    import gguf
    L, E, H = cj["num_hidden_layers"], cj["hidden_size"], cj["num_attention_heads"]
    nope, R, dv, C = (cj["qk_nope_head_dim"], cj["qk_rope_head_dim"], cj["v_head_dim"],
                      cj["kv_lora_rank"])
    rs = cj["rope_scaling"]
    w = gguf.GGUFWriter(path, "deepseek2")
    w.add_block_count(L)
    w.add_context_length(cj["max_position_embeddings"])
    w.add_embedding_length(E)
    w.add_feed_forward_length(cj["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(cj["num_key_value_heads"] if legacy else 1)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_rope_freq_base(cj["rope_theta"])
    w.add_layer_norm_rms_eps(cj["rms_norm_eps"])
    w.add_expert_count(cj["n_routed_experts"])
    w.add_expert_used_count(cj["num_experts_per_tok"])
    w.add_expert_group_count(cj["n_group"])
    w.add_expert_group_used_count(cj["topk_group"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_leading_dense_block_count(cj["first_k_dense_replace"])
    w.add_vocab_size(cj["vocab_size"])
    if cj["q_lora_rank"] is not None:
        w.add_q_lora_rank(cj["q_lora_rank"])
    w.add_kv_lora_rank(C)
    if legacy:
        w.add_key_length(nope + R)
        w.add_value_length(dv)
    else:
        w.add_key_length(C + R)
        w.add_value_length(C)
        w.add_key_length_mla(nope + R)
        w.add_value_length_mla(dv)
    w.add_expert_feed_forward_length(cj["moe_intermediate_size"])
    w.add_expert_shared_count(cj["n_shared_experts"])
    w.add_expert_weights_scale(cj["routed_scaling_factor"])
    if cj["norm_topk_prob"]:
        w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(R)
    w.add_rope_scaling_yarn_log_mul(0.1 * rs["mscale_all_dim"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.DEEPSEEK2, L)

    def put(hf_name, data):
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"can not map tensor {hf_name!r}")
        w.add_tensor(new, np.ascontiguousarray(data, dtype=np.float32))

    X = cj["n_routed_experts"]
    for name, data in ckpt.items():
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
        if ".mlp.experts." in name:
            if not name.endswith(f".{X - 1}.down_proj.weight"):
                continue  # stacked once the layer's last expert is seen
            base = name[:name.index(".mlp.experts.") + len(".mlp.experts.")]
            for wn in ("down_proj", "gate_proj", "up_proj"):
                put(f"{base}{wn}.weight", np.stack([ckpt[f"{base}{x}.{wn}.weight"]
                                                    for x in range(X)]))
        elif name.endswith("kv_b_proj.weight") and not legacy:
            kv_b = data.reshape(H, nope + dv, C)
            put(name.replace("kv_b_proj", "k_b_proj"), kv_b[:, :nope].transpose(0, 2, 1))
            put(name.replace("kv_b_proj", "v_b_proj"), kv_b[:, nope:])
        else:
            put(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# deliberate errors in the reference: each must move the logits far past the tolerance
def _no_bias(m):
    for k in [k for k in m.tensors if k.endswith("exp_probs_b.bias")]:
        del m.tensors[k]


DSV3_MUTANTS = (
    ("e_score_correction_bias ignored", _no_bias),
    ("no YaRN mscale in the attention scale", lambda m: setattr(m, "yarn_log_mul", 0.0)),
    ("yarn_log_multiplier read as mscale_all_dim", lambda m: setattr(m, "yarn_log_mul",
                                                                     m.yarn_log_mul / 0.1)),
    ("expert groups ignored", lambda m: setattr(m, "n_group", 1)),
    ("softmax gating", lambda m: setattr(m, "gating_sigmoid", False)),
    ("routed_scaling_factor ignored", lambda m: setattr(m, "w_scale", 1.0)),
)


def rel_err(out, ref):
    return (np.abs(out - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()


def sluice_logits(sluice, path):
    """`sluice eval` logits of the file (float32 [n_tokens, n_vocab], tools/commands/eval.c)."""
    out = path + ".f32"
    r = subprocess.run([sluice, "eval", "-m", path, "--tokens", ",".join(map(str, TOKENS)),
                        "--logits-out", out, "-ctk", "f32"], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"sluice eval {path}: {r.stderr.strip()}")
    return np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(TOKENS), -1)


def deepseek_v3(outdir, sluice=None):
    """q_lora_rank 32 with norm_topk_prob, no q_lora_rank without it, and the first in the
    legacy attn_kv_b layout; with sluice (a binary), the engine's logits against HF's too
    (float32 engine: <= 1e-5, deepseek2's F32 tolerance in logits_vs_reference)."""
    worst, ok = 0.0, True
    for q_lora, norm_topk, legacy in ((32, True, False), (None, False, False),
                                      (32, True, True)):
        cj = dsv3_config_json(q_lora, norm_topk)
        model = dsv3_model(cj, seed=15 + (q_lora or 0))
        path = os.path.join(outdir, f"dsv3-q{q_lora or 0}-n{int(norm_topk)}"
                                    f"{'-legacy' if legacy else ''}.gguf")
        dsv3_convert(cj, dsv3_checkpoint(model, cj), path, legacy)
        with torch.no_grad():
            out = model(torch.tensor([TOKENS])).logits[0].numpy()
        m = rf.load(path)
        rel = rel_err(out, m.forward(TOKENS))
        worst = max(worst, rel)
        print(f"deepseek-v3 {os.path.basename(path)}: max rel err ref vs HF = {rel:.3e}")
        ok &= rel <= 1e-5
        if sluice:
            srel = rel_err(sluice_logits(sluice, path), out)
            print(f"    sluice eval vs HF = {srel:.3e}")
            ok &= srel <= 1e-5
        if legacy:
            continue
        for what, mutate in DSV3_MUTANTS:
            bad = rf.load(path)
            mutate(bad)
            mrel = rel_err(out, bad.forward(TOKENS))
            print(f"    with a deliberate error ({what}): {mrel:.3e}")
            ok &= mrel > 1e-3
    print(f"deepseek-v3: worst {worst:.3e}; {'PASS' if ok else 'FAIL'} (<= 1e-5, every "
          "deliberate error > 1e-3)")
    return 0 if ok else 1


def qnext_model(seed, interval):
    """A random-initialised Qwen3NextForCausalLM of mkmodel's default shapes (4 layers, dim 64,
    4 heads of 16, 2 KV heads; DeltaNet 2 key / 4 value heads of 16, conv 4; 8 experts top 2
    of 32, shared expert 48, router renormalised), float64; every weight random (norms
    zero-centred noise, the gated norm 1 + noise, A_log = log U(1, 16))."""
    cfg = tf.Qwen3NextConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
        max_position_embeddings=256, linear_conv_kernel_dim=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
        moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts_per_tok=2,
        num_experts=8, norm_topk_prob=True, tie_word_embeddings=False,
        full_attention_interval=interval,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7,
                         "partial_rotary_factor": 0.25},
        attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(seed)
    model = tf.Qwen3NextForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.empty_like(p).uniform_(1.0, 16.0)))
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.normal_(0.0, 0.1)
            else:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    return cfg, model


def qnext_convert(cfg, model, path, mutant=None):
    """Qwen3NextModel of llama.cpp 0c1e570 (conversion/qwen.py, on Qwen2MoeModel), F32: norms
    + 1 but the gated one, A_log -> -exp, dt_bias -> ssm_dt.bias, conv1d squeezed,
    in_proj_qkvz regrouped from per-key-head [q k v z] into attn_qkv [q | k | v] and
    attn_gate z, experts' gate_up_proj split into ffn_gate_exps and ffn_up_exps. mutant: a
    deliberate conversion error (QNEXT_MUTANTS)."""
    import gguf
    c = cfg
    a = "qwen3next"
    w = gguf.GGUFWriter(path, a)
    u32 = {"block_count": c.num_hidden_layers, "context_length": c.max_position_embeddings,
           "embedding_length": c.hidden_size, "feed_forward_length": c.intermediate_size,
           "attention.head_count": c.num_attention_heads,
           "attention.head_count_kv": c.num_key_value_heads,
           "attention.key_length": c.head_dim, "attention.value_length": c.head_dim,
           "expert_count": c.num_experts, "expert_used_count": c.num_experts_per_tok,
           "expert_feed_forward_length": c.moe_intermediate_size,
           "expert_shared_feed_forward_length": c.shared_expert_intermediate_size,
           "ssm.conv_kernel": c.linear_conv_kernel_dim,
           "ssm.state_size": c.linear_key_head_dim, "ssm.group_count": c.linear_num_key_heads,
           "ssm.time_step_rank": c.linear_num_value_heads,
           "ssm.inner_size": c.linear_value_head_dim * c.linear_num_value_heads,
           "full_attention_interval": c.layer_types.index("full_attention") + 1,
           "rope.dimension_count": int(c.head_dim * 0.25)}
    for k, v in u32.items():
        w.add_uint32(f"{a}.{k}", v)
    w.add_float32(f"{a}.rope.freq_base", c.rope_parameters["rope_theta"])
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", c.rms_norm_eps)
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}

    def put(name, x):
        w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))
    put("token_embd.weight", sd["model.embed_tokens.weight"])
    E, S, Hk, Hv = c.hidden_size, c.linear_key_head_dim, c.linear_num_key_heads, \
        c.linear_num_value_heads
    r, F = Hv // Hk, c.moe_intermediate_size
    for i in range(c.num_hidden_layers):
        h, b = f"model.layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", sd[h + "input_layernorm.weight"] + 1)
        put(b + "post_attention_norm.weight", sd[h + "post_attention_layernorm.weight"] + 1)
        if c.layer_types[i] == "full_attention":
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                           ("o_proj", "attn_output")):
                put(b + gg + ".weight", sd[h + f"self_attn.{hf}.weight"])
            put(b + "attn_q_norm.weight", sd[h + "self_attn.q_norm.weight"] + 1)
            put(b + "attn_k_norm.weight", sd[h + "self_attn.k_norm.weight"] + 1)
        else:
            la = h + "linear_attn."
            qkvz = sd[la + "in_proj_qkvz.weight"].T.reshape(E, Hk, 2 * S + 2 * r * S)
            q, k, v, z = np.split(qkvz, [S, 2 * S, 2 * S + r * S], axis=-1)
            if mutant == "tiled":  # value heads in Qwen3.5's tiled order (k0 v0, k1 v1, ...)
                v = v.reshape(E, Hk, r, S).transpose(0, 2, 1, 3).reshape(E, Hk, r * S)
                z = z.reshape(E, Hk, r, S).transpose(0, 2, 1, 3).reshape(E, Hk, r * S)
            put(b + "attn_qkv.weight", np.concatenate([q.reshape(E, -1), k.reshape(E, -1),
                                                       v.reshape(E, -1)], axis=-1).T)
            put(b + "attn_gate.weight", z.reshape(E, -1).T)
            ba = sd[la + "in_proj_ba.weight"]
            if mutant == "ba":  # beta and alpha swapped within each key head
                ba = ba.reshape(Hk, 2, r, E)[:, ::-1].reshape(2 * Hv, E)
            put(b + "ssm_ba.weight", ba)
            put(b + "ssm_conv1d.weight", sd[la + "conv1d.weight"].squeeze(1))
            put(b + "ssm_dt.bias", sd[la + "dt_bias"])
            put(b + "ssm_a", -np.exp(sd[la + "A_log"]) if mutant != "a_log" else sd[la + "A_log"])
            put(b + "ssm_norm.weight", sd[la + "norm.weight"])
            put(b + "ssm_out.weight", sd[la + "out_proj.weight"])
        mlp = h + "mlp."
        put(b + "ffn_gate_inp.weight", sd[mlp + "gate.weight"])
        gu = sd[mlp + "experts.gate_up_proj"]
        put(b + "ffn_gate_exps.weight", gu[:, :F])
        put(b + "ffn_up_exps.weight", gu[:, F:])
        put(b + "ffn_down_exps.weight", sd[mlp + "experts.down_proj"])
        put(b + "ffn_gate_inp_shexp.weight", sd[mlp + "shared_expert_gate.weight"][0])
        for p in ("gate", "up", "down"):
            put(b + f"ffn_{p}_shexp.weight", sd[mlp + f"shared_expert.{p}_proj.weight"])
    put("output_norm.weight", sd["model.norm.weight"] + 1)
    put("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


QNEXT_MUTANTS = (("value heads tiled", "tiled"), ("beta and alpha swapped", "ba"),
                 ("A_log stored as is", "a_log"))


def qwen3next(outdir, sluice=None):
    """Qwen3NextForCausalLM (random, float64) against ref_forward.py on its converted F32 GGUF
    and, with sluice, `sluice eval` against HF: <= 5e-5 (HF computes the gates, the chunked
    delta rule and the gated norm in float32 even in a float64 model, so agreement is ~1e-5,
    not 1e-15); full_attention_interval 4 (layers 0-2 DeltaNet, 3 attention) and 2; every
    deliberate conversion error (QNEXT_MUTANTS) must move the reference past 1e-3."""
    ok, worst = True, 0.0
    for interval in (4, 2):
        cfg, model = qnext_model(34 + interval, interval)
        path = os.path.join(outdir, f"qwen3next-i{interval}.gguf")
        qnext_convert(cfg, model, path)
        with torch.no_grad():
            out = model(torch.tensor([TOKENS])).logits[0].numpy()
        rel = rel_err(out, rf.load(path).forward(TOKENS))
        worst = max(worst, rel)
        print(f"qwen3next interval {interval}: max rel err ref vs HF = {rel:.3e}")
        ok &= rel <= 5e-5
        if sluice:
            srel = rel_err(sluice_logits(sluice, path), out)
            worst = max(worst, srel)
            print(f"    sluice eval vs HF = {srel:.3e}")
            ok &= srel <= 5e-5
        for what, mutant in QNEXT_MUTANTS if interval == 4 else ():
            bad = path + f".{mutant}.gguf"
            qnext_convert(cfg, model, bad, mutant)
            mrel = rel_err(out, rf.load(bad).forward(TOKENS))
            print(f"    with a deliberate error ({what}): {mrel:.3e}")
            ok &= mrel > 1e-3
    print(f"qwen3next: worst {worst:.3e}; {'PASS' if ok else 'FAIL'} (<= 5e-5, every "
          "deliberate error > 1e-3)")
    return 0 if ok else 1


def pop_sluice(args):
    """args without `--sluice BIN`, and BIN (None without it)."""
    if "--sluice" not in args:
        return args, None
    i = args.index("--sluice")
    return args[:i] + args[i + 2:], args[i + 1]


def main():
    for flag, fn in (("--deepseek-v3", deepseek_v3), ("--qwen3next", qwen3next)):
        if sys.argv[1:2] != [flag]:
            continue
        args, sluice = pop_sluice(sys.argv[2:])
        if args:
            os.makedirs(args[0], exist_ok=True)
            return fn(args[0], sluice)
        with tempfile.TemporaryDirectory() as d:
            return fn(d, sluice)
    args, sluice = pop_sluice(sys.argv[1:])
    for path, hfarch in zip(args[0::2], args[1::2]):
        m = rf.load(path)
        ref = m.forward(TOKENS)
        model = build(m, hfarch)
        with torch.no_grad():
            out = model(torch.tensor([TOKENS])).logits[0].numpy()
        rel = (np.abs(out - ref).max(axis=1) / np.abs(ref).max(axis=1)).max()
        print(f"{hfarch:9s} {path}: max rel err ref vs HF = {rel:.3e}")
        if sluice:
            print(f"{'':9s} sluice eval vs HF = {rel_err(sluice_logits(sluice, path), out):.3e}")


if __name__ == "__main__":
    sys.exit(main())
