"""`sluice mkmodel --arch deepseek2` read back with gguf-py, against llama.cpp's layout.

usage: mkmodel_deepseek2_test.py SLUICE_BINARY

Tensor names come from gguf-py's own tables (MODEL_TENSORS[DEEPSEEK2] and TENSOR_NAMES: every
tensor of the file must be one llama.cpp's deepseek2 knows), keys from gguf-py's Keys; the
shapes are the formulas of llama_model_deepseek2::load_arch_tensors (MLA layout), written out
here from the file's own keys, not from the C code:
  attn_q_a [E, q_lora]  attn_q_a_norm [q_lora]  attn_q_b [q_lora, H * key_length_mla]
  attn_kv_a_mqa [E, kv_lora + rope]  attn_kv_a_norm [kv_lora]
  attn_k_b [key_length_mla - rope, kv_lora, H]  attn_v_b [kv_lora, value_length_mla, H]
  attn_output [H * value_length_mla, E]
  layers < leading_dense_block_count: ffn_gate/ffn_up [E, n_ff], ffn_down [n_ff, E]
  the others: ffn_gate_inp [E, X], exp_probs_b.bias [X], ffn_{gate,up}_exps [E, F, X],
  ffn_down_exps [F, E, X], ffn_{gate,up}_shexp [E, F * n_shared], ffn_down_shexp [F * n_shared, E]
and the MLA key relations of DeepseekV2Model.set_gguf_parameters: key_length = kv_lora + rope,
value_length = kv_lora, head_count_kv = 1. With --legacy-kv-b, the layout of the converter
before the split (which llama.cpp still loads: hparams.is_mla() false): no *_mla keys,
key_length = nope + rope and value_length = v per head, head_count_kv = H, and instead of
attn_k_b / attn_v_b one attn_kv_b [kv_lora, H * (key_length - rope + value_length)].
"""
import os
import subprocess
import sys
import tempfile

import gguf
from gguf import GGUFReader

SLUICE = sys.argv[1]
FAILURES = []


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILURES.append(msg)
    return cond


def check(args, layers, experts, groups):
    legacy = "--legacy-kv-b" in args
    path = os.path.join(tempfile.mkdtemp(prefix="mkmodel_ds2.", dir=os.environ.get("TEST_TMPDIR")), "m.gguf")
    r = subprocess.run([SLUICE, "mkmodel", "--arch", "deepseek2", *args, "-o", path],
                       capture_output=True, text=True)
    if not expect(r.returncode == 0, f"mkmodel {args}: {r.stderr.strip()}"):
        return
    rd = GGUFReader(path)
    kv = {k: f.contents() for k, f in rd.fields.items()}
    a = "deepseek2"
    K = gguf.Keys
    key = {n: getattr(K.LLM, n).format(arch=a) if hasattr(K.LLM, n) else
           getattr(K.Attention, n).format(arch=a) if hasattr(K.Attention, n) else
           getattr(K.Rope, n).format(arch=a) for n in (
               "EMBEDDING_LENGTH", "BLOCK_COUNT", "FEED_FORWARD_LENGTH", "HEAD_COUNT",
               "HEAD_COUNT_KV", "Q_LORA_RANK", "KV_LORA_RANK", "KEY_LENGTH", "VALUE_LENGTH",
               "KEY_LENGTH_MLA", "VALUE_LENGTH_MLA", "DIMENSION_COUNT", "EXPERT_COUNT",
               "EXPERT_USED_COUNT", "EXPERT_FEED_FORWARD_LENGTH", "EXPERT_SHARED_COUNT",
               "LEADING_DENSE_BLOCK_COUNT", "EXPERT_WEIGHTS_SCALE", "EXPERT_WEIGHTS_NORM",
               "EXPERT_GATING_FUNC", "EXPERT_GROUP_COUNT", "EXPERT_GROUP_USED_COUNT",
               "SCALING_TYPE", "SCALING_FACTOR", "SCALING_ORIG_CTX_LEN", "SCALING_YARN_LOG_MUL")}
    mla = ("KEY_LENGTH_MLA", "VALUE_LENGTH_MLA")
    missing = [n for n, k in key.items() if k not in kv and not (legacy and n in mla) and
               (groups or n not in ("EXPERT_GROUP_COUNT", "EXPERT_GROUP_USED_COUNT"))]
    if not expect(not missing, f"{args}: keys present (missing {missing})"):
        return
    v = {n: kv.get(k) for n, k in key.items()}
    expect(kv["general.architecture"] == a, "general.architecture deepseek2")
    E, H, L = v["EMBEDDING_LENGTH"], v["HEAD_COUNT"], v["BLOCK_COUNT"]
    QL, C, R = v["Q_LORA_RANK"], v["KV_LORA_RANK"], v["DIMENSION_COUNT"]
    Dk, Dv, X = v["KEY_LENGTH_MLA"], v["VALUE_LENGTH_MLA"], v["EXPERT_COUNT"]
    if legacy:
        expect(Dk is None and Dv is None, f"{args}: no *_mla keys")
        Dk, Dv = v["KEY_LENGTH"], v["VALUE_LENGTH"]
    F, S, NF = v["EXPERT_FEED_FORWARD_LENGTH"], v["EXPERT_SHARED_COUNT"], v["FEED_FORWARD_LENGTH"]
    dense = v["LEADING_DENSE_BLOCK_COUNT"]
    expect(L == layers and X == experts, f"{args}: block_count {L}, expert_count {X}")
    if legacy:
        expect(Dk > R and v["HEAD_COUNT_KV"] == H,
               f"legacy: key_length {Dk} > rope {R}, head_count_kv {v['HEAD_COUNT_KV']} == {H}")
    else:
        expect(v["KEY_LENGTH"] == C + R,
               f"key_length {v['KEY_LENGTH']} == kv_lora + rope {C + R}")
        expect(v["VALUE_LENGTH"] == C, f"value_length {v['VALUE_LENGTH']} == kv_lora {C}")
        expect(v["HEAD_COUNT_KV"] == 1, f"head_count_kv {v['HEAD_COUNT_KV']} == 1 (MLA)")
    expect(0 < dense < L, f"leading dense layers {dense} in (0, {L})")
    expect(v["EXPERT_GATING_FUNC"] == gguf.ExpertGatingFuncType.SIGMOID,
           "expert_gating_func sigmoid")
    expect(v["EXPERT_WEIGHTS_NORM"] is True and v["EXPERT_WEIGHTS_SCALE"] > 0,
           "expert weights normalised and scaled")
    expect(v["SCALING_TYPE"] == "yarn" and abs(v["SCALING_YARN_LOG_MUL"] - 0.1) < 1e-7,
           "YaRN with yarn_log_multiplier 0.1 (0.1 * mscale_all_dim)")
    if groups:
        G, GU = v["EXPERT_GROUP_COUNT"], v["EXPERT_GROUP_USED_COUNT"]
        expect(X % G == 0 and 1 <= GU <= G, f"groups {G} used {GU} of {X} experts")

    names = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.DEEPSEEK2]}
    want = {"token_embd.weight": [E, kv["deepseek2.vocab_size"]], "output_norm.weight": [E],
            "output.weight": [E, kv["deepseek2.vocab_size"]]}
    for i in range(L):
        b = f"blk.{i}."
        want.update({b + "attn_norm.weight": [E], b + "attn_q_a.weight": [E, QL],
                     b + "attn_q_a_norm.weight": [QL], b + "attn_q_b.weight": [QL, H * Dk],
                     b + "attn_kv_a_mqa.weight": [E, C + R], b + "attn_kv_a_norm.weight": [C],
                     b + "attn_output.weight": [H * Dv, E], b + "ffn_norm.weight": [E]})
        if legacy:
            want[b + "attn_kv_b.weight"] = [C, H * (Dk - R + Dv)]
        else:
            want.update({b + "attn_k_b.weight": [Dk - R, C, H],
                         b + "attn_v_b.weight": [C, Dv, H]})
        if i < dense:
            want.update({b + "ffn_gate.weight": [E, NF], b + "ffn_up.weight": [E, NF],
                         b + "ffn_down.weight": [NF, E]})
        else:
            want.update({b + "ffn_gate_inp.weight": [E, X], b + "exp_probs_b.bias": [X],
                         b + "ffn_gate_exps.weight": [E, F, X],
                         b + "ffn_up_exps.weight": [E, F, X],
                         b + "ffn_down_exps.weight": [F, E, X],
                         b + "ffn_gate_shexp.weight": [E, F * S],
                         b + "ffn_up_shexp.weight": [E, F * S],
                         b + "ffn_down_shexp.weight": [F * S, E]})
    have = {t.name: [int(x) for x in t.shape] for t in rd.tensors}
    expect(set(have) == set(want), f"{args}: tensor set (extra {sorted(set(have) - set(want))}"
           f", missing {sorted(set(want) - set(have))})")
    for name, shape in have.items():
        base = name.rsplit(".", 1)[0]
        generic = base.split(".", 2)[-1] if base.startswith("blk.") else base
        expect(any(n == base or n.endswith("." + generic) for n in names),
               f"{name}: a deepseek2 tensor in gguf-py's table")
        if name in want:
            expect(shape == want[name], f"{name}: shape {shape} == {want[name]}")


check([], 3, 8, True)
check(["--dim", "256", "--heads", "2", "--experts", "16", "--top-k", "6", "--layers", "2",
       "--type", "Q8_0"], 2, 16, True)
check(["--experts", "6", "--top-k", "2"], 3, 6, False)
check(["--legacy-kv-b"], 3, 8, True)
check(["--legacy-kv-b", "--dim", "256", "--ffn", "256", "--heads", "2", "--type", "Q4_K"], 3,
      8, True)
print("\n" + ("all ok" if not FAILURES else f"{len(FAILURES)} failures"))
sys.exit(1 if FAILURES else 0)
