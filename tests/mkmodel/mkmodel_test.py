"""End-to-end test of `sluice mkmodel`: files read back with gguf-py (llama.cpp's own reader).

usage: mkmodel_test.py SLUICE_BINARY

The expected tensors and metadata below are an independent table written from llama.cpp's
conventions (llama-model.cpp load_tensors, llama-arch.cpp names, convert_hf_to_gguf.py keys),
not derived from the C code. Also checked: tokenizer invariants, determinism, bit-exact
quantization of the weights (against gguf-py quantizing the same model written as F32), the
Zipf router skew, the Zipf neuron skew of FFN gate/up rows, that the file does not depend on
--threads (exact and pooled rows), that pooled big tensors hold valid, finite blocks, and that
invalid flags exit 2 naming the flag.
"""
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType as VT
from gguf.quants import dequantize, quantize

SLUICE = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="mkmodel_test.", dir=os.environ.get("TEST_TMPDIR"))
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL " + msg)


def expect(cond, msg):
    if not cond:
        fail(msg)
    return cond


def mkmodel(*args, out=None):
    path = out or os.path.join(TMP, "m.gguf")
    r = subprocess.run([SLUICE, "mkmodel", *args, "-o", path], capture_output=True, text=True)
    return r, path


# ---- the independent table -----------------------------------------------------------------

DEFAULTS = dict(layers=2, dim=64, ffn=128, experts=8, top_k=2, heads=4, kv_heads=2, vocab=512,
                ctx=256, type="F32")
# llama.h llama_ftype; an all-Q4_K/Q5_K file is the _S mix (the _M mixes promote some tensors)
FTYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
         "Q4_K": 14, "Q5_K": 16, "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30, "BF16": 32,
         "MXFP4": 38}
# K-quants and IQ4: gguf-py has no quantizer to compare bytes with, so the weights are checked by
# their RMS error against the F32 model (relative; bounds as tests/kernels/quant_ref_test.c),
# while tests/kernels/dequant_vs_gguf_py.py checks our blocks decode identically in gguf-py (and
# tests/mkmodel/iq4_vs_ggml.py the IQ4 bytes against ggml's own quantizer, where a peer is built).
K_RMS_BOUND = {"Q4_K": 0.11, "Q5_K": 0.055, "Q6_K": 0.03, "IQ4_NL": 0.13, "IQ4_XS": 0.13}
GGUF_ARCH = {"llama": "llama", "mixtral": "llama", "qwen3moe": "qwen3moe", "olmoe": "olmoe",
             "qwen2moe": "qwen2moe", "gemma3": "gemma3"}
MOE = {"llama": False, "mixtral": True, "qwen3moe": True, "olmoe": True, "qwen2moe": True,
       "gemma3": False}
SPM = {"llama", "gemma3"}  # GGUF archs with a SentencePiece vocabulary (tokenizer model "llama")
ARCHS = ("llama", "mixtral", "qwen3moe", "olmoe", "qwen2moe", "gemma3")


def arch_defaults(arch, **kw):
    """DEFAULTS adjusted as mkmodel adjusts them per arch, then kw."""
    p = dict(DEFAULTS)
    if not MOE[arch]:
        p.update(experts=0, top_k=0)
    if arch == "olmoe":
        p["kv_heads"] = p["heads"]
    if arch == "gemma3":
        p.update(layers=6, swa=8)
    p.update(kw)
    if arch == "qwen2moe" and "shexp" not in kw:
        p["shexp"] = 2 * p["ffn"]
    return p


# llama-quant.cpp tensor_type_fallback: a K-quant (IQ4_XS) tensor whose rows are not whole
# 256-blocks
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}


def down(ty, cols):
    """The type of an FFN down projection of `cols` columns: the fallback where 256 does not
    divide them."""
    return FALLBACK[ty] if ty in FALLBACK and cols % 256 else ty


def expected_tensors(arch, p):
    """name -> (type name, ne) as llama.cpp's load_tensors creates them."""
    E, V, F, X = p["dim"], p["vocab"], p["ffn"], p["experts"]
    D = E // p["heads"]
    Q, KV = p["heads"] * D, p["kv_heads"] * D
    # MXFP4 is llama.cpp's MXFP4_MOE mix (gpt-oss's files): routed experts MXFP4, the rest Q8_0
    wx = p["type"]
    w = "Q8_0" if wx == "MXFP4" else wx
    t = {"token_embd.weight": (w, [E, V]), "output_norm.weight": ("F32", [E])}
    if arch != "gemma3":  # LLM_ARCH_GEMMA3: output duplicated from token_embd (tied)
        t["output.weight"] = (w, [E, V])
    for i in range(p["layers"]):
        b = f"blk.{i}."
        t[b + "attn_norm.weight"] = ("F32", [E])
        t[b + "attn_q.weight"] = (w, [E, Q])
        t[b + "attn_k.weight"] = (w, [E, KV])
        t[b + "attn_v.weight"] = (w, [E, KV])
        t[b + "attn_output.weight"] = (w, [Q, E])
        t[b + "ffn_norm.weight"] = ("F32", [E])
        if arch in ("qwen3moe", "gemma3"):  # LLM_ARCH_QWEN3MOE/GEMMA3: {n_embd_head_k}
            t[b + "attn_q_norm.weight"] = ("F32", [D])
            t[b + "attn_k_norm.weight"] = ("F32", [D])
        if arch == "gemma3":  # LLM_TENSOR_ATTN_POST_NORM, LLM_TENSOR_FFN_POST_NORM
            t[b + "post_attention_norm.weight"] = ("F32", [E])
            t[b + "post_ffw_norm.weight"] = ("F32", [E])
        if arch == "qwen2moe":  # LLM_ARCH_QWEN2MOE: q/k/v biases, shared expert
            t[b + "attn_q.bias"] = ("F32", [Q])
            t[b + "attn_k.bias"] = ("F32", [KV])
            t[b + "attn_v.bias"] = ("F32", [KV])
            S = p["shexp"]
            t[b + "ffn_gate_inp_shexp.weight"] = ("F32", [E])
            t[b + "ffn_gate_shexp.weight"] = (w, [E, S])
            t[b + "ffn_up_shexp.weight"] = (w, [E, S])
            t[b + "ffn_down_shexp.weight"] = (down(w, S), [S, E])
        if arch == "olmoe":  # LLM_ARCH_OLMOE: {n_embd} for both
            t[b + "attn_q_norm.weight"] = ("F32", [E])
            t[b + "attn_k_norm.weight"] = ("F32", [E])
        if MOE[arch]:
            t[b + "ffn_gate_inp.weight"] = ("F32", [E, X])
            t[b + "ffn_gate_exps.weight"] = (wx, [E, F, X])
            t[b + "ffn_up_exps.weight"] = (wx, [E, F, X])
            t[b + "ffn_down_exps.weight"] = (down(wx, F), [F, E, X])
        else:
            t[b + "ffn_gate.weight"] = (w, [E, F])
            t[b + "ffn_up.weight"] = (w, [E, F])
            t[b + "ffn_down.weight"] = (down(w, F), [F, E])
    return t


def expected_kv(arch, p):
    """key -> (value type, value or None for arrays/unchecked)."""
    a = GGUF_ARCH[arch]
    D = p["dim"] // p["heads"]
    U, F32, S, B = VT.UINT32, VT.FLOAT32, VT.STRING, VT.BOOL
    kv = {
        "general.architecture": (S, a),
        "general.type": (S, "model"),
        "general.name": (S, f"sluice-synth-{arch}"),
        "general.file_type": (U, FTYPE[p["type"]]),
        "general.quantization_version": (U, 2),
        f"{a}.context_length": (U, p["ctx"]),
        f"{a}.embedding_length": (U, p["dim"]),
        f"{a}.block_count": (U, p["layers"]),
        f"{a}.feed_forward_length": (U, p["shexp"] if arch == "qwen2moe" else p["ffn"]),
        f"{a}.attention.head_count": (U, p["heads"]),
        f"{a}.attention.head_count_kv": (U, p["kv_heads"]),
        f"{a}.rope.freq_base": (F32, {"llama": 1e4, "mixtral": 1e6, "qwen3moe": 1e6,
                                      "olmoe": 1e4, "qwen2moe": 1e6, "gemma3": 1e6}[arch]),
        f"{a}.attention.layer_norm_rms_epsilon": (
            F32, 1e-6 if arch in ("qwen3moe", "qwen2moe", "gemma3") else 1e-5),
        "tokenizer.ggml.model": (S, "llama" if a in SPM else "gpt2"),
        "tokenizer.ggml.tokens": (VT.ARRAY, None),
        "tokenizer.ggml.token_type": (VT.ARRAY, None),
        "tokenizer.ggml.bos_token_id": (U, None),
        "tokenizer.ggml.eos_token_id": (U, None),
        "tokenizer.ggml.add_bos_token": (B, a in SPM),
        "tokenizer.ggml.add_eos_token": (B, False),
    }
    if a == "llama":  # LlamaModel.set_gguf_parameters
        kv[f"{a}.vocab_size"] = (U, p["vocab"])
        kv[f"{a}.rope.dimension_count"] = (U, D)
    if a in SPM:
        kv["tokenizer.ggml.scores"] = (VT.ARRAY, None)
        kv["tokenizer.ggml.unknown_token_id"] = (U, 3 if a == "gemma3" else 0)
    else:
        kv["tokenizer.ggml.pre"] = (S, "olmo" if arch == "olmoe" else "qwen2")
        kv["tokenizer.ggml.merges"] = (VT.ARRAY, None)
    if a == "gemma3":  # Gemma3Model.set_gguf_parameters / set_vocab
        kv[f"{a}.attention.key_length"] = (U, D)
        kv[f"{a}.attention.value_length"] = (U, D)
        kv[f"{a}.attention.sliding_window"] = (U, p["swa"])
        kv["tokenizer.ggml.padding_token_id"] = (U, 0)
        kv["tokenizer.ggml.add_space_prefix"] = (B, False)
    if MOE[arch]:
        kv[f"{a}.expert_count"] = (U, p["experts"])
        kv[f"{a}.expert_used_count"] = (U, p["top_k"])
        kv["sluice.synth.router_skew"] = (F32, p.get("router_skew", 1.0))
    kv["sluice.synth.neuron_skew"] = (F32, p.get("neuron_skew", 0.0))
    if arch in ("qwen3moe", "qwen2moe"):
        kv[f"{a}.expert_feed_forward_length"] = (U, p["ffn"])
    if arch == "qwen2moe":
        kv[f"{a}.expert_shared_feed_forward_length"] = (U, p["shexp"])
    if arch == "qwen3moe":
        kv[f"{a}.attention.key_length"] = (U, D)
        kv[f"{a}.attention.value_length"] = (U, D)
    return kv


def gpt2_bytes_to_unicode():
    """GPT-2's encoder.py bytes_to_unicode, as a byte -> str table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# ---- checks --------------------------------------------------------------------------------

def field_value(f):
    return f.contents()


def check_file(arch, p, path, label):
    r = GGUFReader(path)
    want_t = expected_tensors(arch, p)
    got_t = {t.name: (t.tensor_type.name, [int(x) for x in t.shape]) for t in r.tensors}
    expect(set(got_t) == set(want_t),
           f"{label}: tensor names differ: extra {sorted(set(got_t) - set(want_t))[:5]} "
           f"missing {sorted(set(want_t) - set(got_t))[:5]}")
    for name in sorted(set(got_t) & set(want_t)):
        expect(got_t[name] == want_t[name], f"{label}: {name} is {got_t[name]}, "
               f"want {want_t[name]}")
    expect(len(r.tensors) == len(want_t), f"{label}: duplicate tensors")

    want_kv = expected_kv(arch, p)
    got_keys = {k for k in r.fields if not k.startswith("GGUF.")}
    expect(got_keys == set(want_kv), f"{label}: keys differ: extra "
           f"{sorted(got_keys - set(want_kv))} missing {sorted(set(want_kv) - got_keys)}")
    for k, (vt, val) in want_kv.items():
        f = r.fields.get(k)
        if f is None:
            continue
        if not expect(f.types[0] == vt, f"{label}: {k} has type {f.types[0].name}, want "
                      f"{vt.name}"):
            continue
        if val is not None:
            got = field_value(f)
            ok = abs(got - val) <= 1e-6 * abs(val) if vt == VT.FLOAT32 else got == val
            expect(ok, f"{label}: {k} = {got!r}, want {val!r}")

    # vocabulary
    f = r.fields
    toks = field_value(f["tokenizer.ggml.tokens"])
    types = field_value(f["tokenizer.ggml.token_type"])
    embd = [t for t in r.tensors if t.name == "token_embd.weight"][0]
    expect(len(toks) == p["vocab"] == int(embd.shape[1]) == len(types),
           f"{label}: vocab {len(toks)} tokens, {len(types)} types, token_embd rows "
           f"{int(embd.shape[1])}, --vocab {p['vocab']}")
    expect(len(set(toks)) == len(toks), f"{label}: duplicate tokens")
    bos = field_value(f["tokenizer.ggml.bos_token_id"])
    eos = field_value(f["tokenizer.ggml.eos_token_id"])
    expect(0 <= bos < len(toks) and 0 <= eos < len(toks), f"{label}: bos/eos out of range")
    if GGUF_ARCH[arch] == "llama":
        expect(toks[:3] == ["<unk>", "<s>", "</s>"] and bos == 1 and eos == 2,
               f"{label}: SPM specials")
        expect(toks[3:259] == [f"<0x{b:02X}>" for b in range(256)], f"{label}: byte tokens")
        expect(list(types[:259]) == [2, 3, 3] + [6] * 256 and set(types[259:]) == {1},
               f"{label}: SPM token types")
    if GGUF_ARCH[arch] == "gemma3":  # Gemma's ids: <pad> 0, <eos> 1, <bos> 2, <unk> 3
        expect(toks[:4] == ["<pad>", "<eos>", "<bos>", "<unk>"] and bos == 2 and eos == 1,
               f"{label}: Gemma specials")
        expect(toks[4:260] == [f"<0x{b:02X}>" for b in range(256)], f"{label}: byte tokens")
        expect(list(types[:260]) == [3, 3, 3, 2] + [6] * 256 and set(types[260:]) == {1},
               f"{label}: Gemma token types")
    if GGUF_ARCH[arch] in SPM:
        scores = field_value(f["tokenizer.ggml.scores"])
        expect(len(scores) == len(toks), f"{label}: scores length")
        n_base = 260 if GGUF_ARCH[arch] == "gemma3" else 259
        expect(all(s.startswith("▁") or len(s) <= 2 for s in toks[n_base:]) and "▁the" in toks,
               f"{label}: SPM pieces")
    else:
        b2u = gpt2_bytes_to_unicode()
        expect(toks[:256] == [b2u[b] for b in range(256)], f"{label}: GPT-2 byte symbols")
        expect(toks[-3:] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
               f"{label}: control tokens")
        expect(list(types[-3:]) == [3, 3, 3] and set(types[:-3]) == {1}, f"{label}: types")
        expect(toks[bos] == "<|endoftext|>" and toks[eos] ==
               ("<|im_end|>" if arch == "qwen3moe" else "<|endoftext|>"),
               f"{label}: bos/eos tokens")
        merges = field_value(f["tokenizer.ggml.merges"])
        ids = {t: i for i, t in enumerate(toks)}
        bad = [m for m in merges if len(m.split(" ")) != 2 or
               not all(x in ids for x in m.split(" ")) or "".join(m.split(" ")) not in ids or
               ids["".join(m.split(" "))] <= max(ids[x] for x in m.split(" "))]
        expect(not bad, f"{label}: inconsistent merges, e.g. {bad[:3]}")
        # every non-byte, non-control token is produced by exactly one merge
        produced = ["".join(m.split(" ")) for m in merges]
        expect(sorted(produced) == sorted(toks[256:-3]), f"{label}: merges vs tokens")
        expect("Ġthe" in ids, f"{label}: common words")
    return r


def tensor_f32(t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = dequantize(np.array(t.data).view(np.uint8) if t.tensor_type != T.F32
                       else np.array(t.data), t.tensor_type)
    return np.asarray(a, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])


def check_weights_match_f32(arch, p, path, f32_path, label):
    """Quantized weights == gguf-py's quantization of the same model written as F32."""
    rq, rf = GGUFReader(path), GGUFReader(f32_path)
    ft = {t.name: t for t in rf.tensors}
    for t in rq.tensors:
        qt = T[p["type"]]
        if qt == T.MXFP4 and "_exps." not in t.name:
            qt = T.Q8_0  # the MXFP4_MOE mix
        ref = np.array(ft[t.name].data, dtype=np.float32)
        if t.tensor_type == T.F32:
            expect(np.array_equal(np.array(t.data), ref), f"{label}: {t.name} F32 differs")
            continue
        expect(t.tensor_type == qt, f"{label}: {t.name} type")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.ascontiguousarray(quantize(ref, qt)).view(np.uint8).tobytes()
        got = np.array(t.data).view(np.uint8).tobytes()
        expect(got == want, f"{label}: {t.name} bytes differ from gguf-py quantize of F32")


def check_weights_close_f32(p, path, f32_path, label):
    """K-quant weights (dequantized by gguf-py) within K_RMS_BOUND of the F32 model."""
    rq, rf = GGUFReader(path), GGUFReader(f32_path)
    ft = {t.name: t for t in rf.tensors}
    qt = T[p["type"]]
    for t in rq.tensors:
        ref = tensor_f32(ft[t.name])
        if t.tensor_type == T.F32:
            expect(np.array_equal(tensor_f32(t), ref), f"{label}: {t.name} F32 differs")
            continue
        expect(t.tensor_type == qt, f"{label}: {t.name} type")
        got = tensor_f32(t)
        rel = float(np.sqrt(((got - ref) ** 2).mean() / (ref ** 2).mean()))
        expect(rel <= K_RMS_BOUND[p["type"]],
               f"{label}: {t.name} rms error {rel:.4f} > {K_RMS_BOUND[p['type']]}")


def check_values(arch, p, path, label):
    r = GGUFReader(path)
    for t in r.tensors:
        a = tensor_f32(t)
        expect(np.all(np.isfinite(a)), f"{label}: {t.name} not finite")
        if "norm" in t.name:
            expect(abs(a.mean() - 1) < 0.05 and a.std() < 0.1, f"{label}: {t.name} not ~1")
        elif t.name.endswith(("attn_q.weight", "ffn_up_exps.weight", "ffn_gate.weight")):
            std = a.std() * np.sqrt(a.shape[-1])
            expect(0.7 < std < 1.3, f"{label}: {t.name} std*sqrt(fan_in) = {std:.2f}")


def router_shares(path):
    """Per layer: (share of top-k picks per expert, router column 0), hidden ~ embeddings."""
    r = GGUFReader(path)
    t = {x.name: x for x in r.tensors}
    k = int(r.fields[f"{r.fields['general.architecture'].contents()}.expert_used_count"]
            .contents())
    emb = tensor_f32(t["token_embd.weight"])
    out = []
    i = 0
    while f"blk.{i}.ffn_gate_inp.weight" in t:
        w = tensor_f32(t[f"blk.{i}.ffn_norm.weight"])
        x = emb / np.sqrt((emb ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
        router = tensor_f32(t[f"blk.{i}.ffn_gate_inp.weight"])  # [X, E]
        logits = x @ router.T
        top = np.argsort(-logits, axis=1)[:, :k]
        counts = np.bincount(top.ravel(), minlength=router.shape[0])
        out.append((counts / counts.sum(), router[:, 0]))
        i += 1
    return out


def check_router_topics():
    """--router-topics: tokens prefer their topic's experts, long-run shares stay flat, and the
    output row of v is the embedding of v - 1 (greedy walks v -> v + 1)."""
    path = os.path.join(TMP, "topics.gguf")
    n_topics, run, X, k = 4, 8, 16, 2
    r, _ = mkmodel("--arch", "qwen3moe", "--vocab", "4096", "--dim", "128", "--layers", "2",
                   "--experts", str(X), "--top-k", str(k), "--router-topics", str(n_topics),
                   "--topic-run", str(run), "--router-skew", "0", out=path)
    if not expect(r.returncode == 0, f"--router-topics run: {r.stderr}"):
        return
    rd = GGUFReader(path)
    expect(int(rd.fields["sluice.synth.router_topics"].contents()) == n_topics and
           int(rd.fields["sluice.synth.topic_run"].contents()) == run, "topic metadata")
    t = {x.name: x for x in rd.tensors}
    emb = tensor_f32(t["token_embd.weight"])
    V = emb.shape[0]
    topic = (np.arange(V) // run) % n_topics
    expect(np.all(np.argmax(emb[:, 1:1 + n_topics], axis=1) == topic), "topic channels")
    out = tensor_f32(t["output.weight"])
    res = 1 + n_topics
    expect(np.all(out[:, :res] == 0), "output reads a reserved channel")
    ratio = out[1:, res:] / emb[:-1, res:]
    expect(np.allclose(ratio, ratio.flat[0], rtol=1e-4), "output row v is not embedding v - 1")
    for layer in range(2):
        w = tensor_f32(t[f"blk.{layer}.ffn_norm.weight"])
        x = emb / np.sqrt((emb ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
        router = tensor_f32(t[f"blk.{layer}.ffn_gate_inp.weight"])
        group = np.argmax(router[:, 1:1 + n_topics], axis=1)
        expect(np.all(np.bincount(group, minlength=n_topics) == X // n_topics), "topic groups")
        top = np.argsort(-(x @ router.T), axis=1)[:, :k]
        in_topic = (group[top] == topic[:, None]).mean()
        share = np.bincount(top.ravel(), minlength=X) / top.size
        print(f"     topics layer {layer}: {in_topic:.2f} of picks in the token's topic, "
              f"shares {share.min():.3f}..{share.max():.3f}")
        expect(in_topic > 0.8, f"topics layer {layer}: {in_topic:.2f} of picks in topic")
        expect(share.max() < 2.0 / X, f"topics layer {layer}: static skew {share.max():.3f}")
    print("ok   router topics")


def spearman(a, b):
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def row_norms(t):
    """Euclidean norm of every row (last axis) of a tensor, as [experts, rows] (dense: 1 x rows)."""
    a = tensor_f32(t)
    a = a.reshape(-1, a.shape[-2], a.shape[-1]) if a.ndim == 3 else a[None]
    return np.sqrt((a.astype(np.float64) ** 2).sum(axis=-1))


def check_threads():
    """The file does not depend on --threads: exact rows (small K-quant and F32 models) and
    pooled rows (qwen3moe experts of 2^20 weights and 4096 rows, Q4_K)."""
    cases = [
        ("llama-f32", ["--arch", "llama", "--dim", "128", "--ffn", "384"]),
        ("qwen3moe-q4k-exact", ["--arch", "qwen3moe", "--dim", "256", "--ffn", "256",
                                "--experts", "4", "--type", "Q4_K"]),
        ("qwen3moe-q4k-pooled", ["--arch", "qwen3moe", "--dim", "256", "--ffn", "256",
                                 "--experts", "16", "--type", "Q4_K", "--neuron-skew", "1"]),
        ("qwen2moe-q8-pooled", ["--arch", "qwen2moe", "--dim", "256", "--ffn", "256",
                                "--experts", "16", "--type", "Q8_0", "--neuron-skew", "2"]),
        ("gpt-oss-mxfp4-pooled", ["--arch", "gpt-oss", "--dim", "256", "--ffn", "256",
                                  "--experts", "16", "--type", "MXFP4", "--neuron-skew", "1"]),
    ]
    for label, args in cases:
        files = []
        for t in ("1", "3"):
            path = os.path.join(TMP, f"thr-{label}-{t}.gguf")
            r, _ = mkmodel(*args, "-t", t, out=path)
            if not expect(r.returncode == 0, f"{label} -t {t}: {r.stderr}"):
                break
            expect(f"on {t} threads" in r.stdout, f"{label} -t {t}: stdout {r.stdout!r}")
            files.append(open(path, "rb").read())
        if len(files) == 2:
            expect(files[0] == files[1], f"{label}: -t 1 and -t 3 wrote different files")
    print("ok   --threads does not change the file")


def check_neuron_skew():
    """--neuron-skew Z: FFN gate/up row norms follow a Zipf-like law, hot rows shared by gate
    and up; Z = 0 is flat; the value is recorded in sluice.synth.neuron_skew."""
    base = ["--arch", "llama", "--dim", "256", "--ffn", "512", "--layers", "1"]
    for z, ty in (("1.0", "F32"), ("0", "F32"), ("1.0", "Q4_K")):
        path = os.path.join(TMP, f"neuron-{z}-{ty}.gguf")
        r, _ = mkmodel(*base, "--neuron-skew", z, "--type", ty, out=path)
        if not expect(r.returncode == 0, f"--neuron-skew {z} {ty}: {r.stderr}"):
            continue
        rd = GGUFReader(path)
        got = float(rd.fields["sluice.synth.neuron_skew"].contents())
        expect(abs(got - float(z)) < 1e-6, f"--neuron-skew {z}: metadata says {got}")
        t = {x.name: x for x in rd.tensors}
        up, gate = row_norms(t["blk.0.ffn_up.weight"])[0], row_norms(t["blk.0.ffn_gate.weight"])[0]
        q = up ** 2
        top = np.sort(q)[::-1][: len(q) // 10].sum() / q.sum()
        ratio = up.max() / np.median(up)
        rms = np.sqrt((up ** 2).mean())
        print(f"     neuron skew {z} {ty}: ffn_up max/median row norm {ratio:.2f}, top 10% of "
              f"rows hold {100 * top:.0f}% of the energy, rms row norm {rms:.3f}")
        expect(0.85 < rms < 1.15, f"--neuron-skew {z} {ty}: rms row norm {rms:.3f}, want ~1")
        if z == "0":
            expect(ratio < 1.5 and top < 0.15, f"--neuron-skew 0: ffn_up rows not flat "
                   f"(max/median {ratio:.2f}, top 10% {top:.2f})")
            continue
        expect(ratio > 4 and top > 0.4, f"--neuron-skew {z} {ty}: ffn_up rows not skewed "
               f"(max/median {ratio:.2f}, top 10% hold {top:.2f})")
        expect(spearman(up, gate) > 0.9, f"--neuron-skew {z} {ty}: gate and up rows do not "
               f"share hot neurons (spearman {spearman(up, gate):.2f})")
        down = row_norms(t["blk.0.ffn_down.weight"])[0]
        expect(down.max() / np.median(down) < 1.5, f"--neuron-skew {z}: ffn_down rows scaled")
    print("ok   neuron skew")


def check_pooled(ty):
    """Pooled tensors (block type, >= 2^20 weights, >= 512 rows): every block finite, the
    intended scale, the neuron skew per expert, the MoE channel rules kept, and --exact-quant
    makes every row exactly (then different bytes, same statistics). Q4_K scales its fp16
    fields by the neuron factor; MXFP4 pools rows at 16 scale levels per octave and moves each
    block's exponent byte by the factor's power of two, so every block must still be exactly
    what the reference quantizer (gguf-py's) makes of its own values."""
    args = ["--arch", "qwen3moe", "--dim", "256", "--ffn", "256", "--experts", "16",
            "--type", ty, "--layers", "1", "--neuron-skew", "1"]
    pooled = os.path.join(TMP, f"pooled-{ty}.gguf")
    exact = os.path.join(TMP, f"pooled-{ty}-exact.gguf")
    r1, _ = mkmodel(*args, out=pooled)
    r2, _ = mkmodel(*args, "--exact-quant", out=exact)
    if not expect(r1.returncode == 0 and r2.returncode == 0, f"pooled: {r1.stderr}{r2.stderr}"):
        return
    check_file("qwen3moe", arch_defaults("qwen3moe", layers=1, dim=256, ffn=256, experts=16,
                                         type=ty, neuron_skew=1.0), pooled, f"pooled {ty}")
    tp = {x.name: x for x in GGUFReader(pooled).tensors}
    te = {x.name: x for x in GGUFReader(exact).tensors}
    for name in ("blk.0.ffn_up_exps.weight", "blk.0.ffn_gate_exps.weight",
                 "blk.0.ffn_down_exps.weight"):
        if ty == "Q4_K":
            raw = np.array(tp[name].data).view(np.uint8).reshape(-1, 144)
            d = raw[:, 0:4].copy().view(np.float16).astype(np.float32)  # d, dmin of each block
            expect(np.all(np.isfinite(d)), f"pooled {name}: non-finite fp16 scales")
        if ty == "MXFP4":
            raw = np.array(tp[name].data).view(np.uint8).reshape(-1, 17)
            again = quantize(dequantize(raw, T.MXFP4).reshape(-1, 32), T.MXFP4)
            expect(np.array_equal(again.reshape(-1, 17), raw),
                   f"pooled {name}: blocks that the MXFP4 quantizer does not reproduce")
        a, b = tensor_f32(tp[name]), tensor_f32(te[name])
        expect(np.all(np.isfinite(a)), f"pooled {name}: non-finite values")
        sa, sb = a.std() * np.sqrt(a.shape[-1]), b.std() * np.sqrt(b.shape[-1])
        expect(0.7 < sa < 1.3 and abs(sa / sb - 1) < 0.1,
               f"pooled {name}: std*sqrt(fan_in) {sa:.3f} (exact rows: {sb:.3f})")
        expect(np.array_equal(np.array(tp[name].data), np.array(te[name].data)) is False,
               f"pooled {name}: identical to --exact-quant (pool not used?)")
        if "down" in name:
            expect(np.all(a[:, 0, :] == 0), f"pooled {name}: row 0 (bias channel) not zero")
            continue
        na, nb = row_norms(tp[name]), row_norms(te[name])
        for label, n in (("pooled", na), ("exact", nb)):
            ratio = float(np.median(n.max(axis=1) / np.median(n, axis=1)))
            expect(ratio > 4, f"{label} {name}: per-expert max/median row norm {ratio:.2f}")
        expect(np.corrcoef(na.ravel(), nb.ravel())[0, 1] > 0.9,
               f"{name}: pooled and exact rows put the hot neurons in different places")
    up = row_norms(tp["blk.0.ffn_up_exps.weight"])
    gate = row_norms(tp["blk.0.ffn_gate_exps.weight"])
    expect(spearman(up.ravel(), gate.ravel()) > 0.9, "pooled: gate/up hot neurons differ")
    print(f"ok   pooled rows ({ty})")


def check_phi3_vocab():
    """phi3: llama's SentencePiece specials and, last, Phi-3's CONTROL "<|endoftext|>":
    llama.cpp's vocabulary loader sets attributes of "<unk>", "<s>", "</s>" and "<|endoftext|>"
    with token_to_id.at() when general.name contains "phi3", and fails to load the model
    without them."""
    r, path = mkmodel("--arch", "phi3", out=os.path.join(TMP, "phi3-vocab.gguf"))
    if not expect(r.returncode == 0, f"phi3: exit {r.returncode}: {r.stderr}"):
        return
    f = GGUFReader(path).fields
    toks = field_value(f["tokenizer.ggml.tokens"])
    types = field_value(f["tokenizer.ggml.token_type"])
    expect("phi3" in field_value(f["general.name"]).lower(), "phi3: general.name")
    expect(toks[:3] == ["<unk>", "<s>", "</s>"] and toks[-1] == "<|endoftext|>",
           f"phi3: specials {toks[:3]} ... {toks[-1]!r}")
    expect(list(types[:3]) == [2, 3, 3] and types[-1] == 3 and len(set(toks)) == len(toks),
           "phi3: special token types")
    expect(field_value(f["tokenizer.ggml.eos_token_id"]) == 2, "phi3: eos")
    print("ok   phi3 vocabulary")


def check_qwen3next(arch="qwen3next"):
    """qwen3next (issue 34): the tensors llama_model_qwen3next::load_arch_tensors creates (the
    layout of its converter: attn_qkv + attn_gate, not the legacy ssm_in) and the keys
    Qwen3NextModel.set_gguf_parameters writes, for --layers 5 --heads 4 --kv-heads 2 (S 16:
    key_dim 32, value_dim 64, conv_dim 128): layer 3 full attention, the others recurrent.
    qwen35moe / qwen35 (llama_model_qwen35moe / _qwen35, Qwen3_5*TextModel): ssm_beta and
    ssm_alpha [E, Hv] instead of ssm_ba, rope.dimension_sections [1, 1, 0, 0] (the two
    rotated pairs of a quarter of 16), and qwen35 a dense FFN."""
    E, V, F, X, SH, L = 64, 512, 128, 8, 96, 5
    q35, dense = arch != "qwen3next", arch == "qwen35"
    r, path = mkmodel("--arch", arch, "--layers", str(L),
                      *([] if dense else ["--shared-ffn", str(SH)]),
                      out=os.path.join(TMP, f"{arch}.gguf"))
    if not expect(r.returncode == 0, f"{arch}: exit {r.returncode}: {r.stderr}"):
        return
    S, Hk, Hv, H, Hkv = 16, 2, 4, 4, 2
    want = {"token_embd.weight": [E, V], "output_norm.weight": [E], "output.weight": [E, V]}
    for i in range(L):
        b = f"blk.{i}."
        want.update({b + "attn_norm.weight": [E], b + "post_attention_norm.weight": [E]})
        if dense:
            want.update({b + "ffn_gate.weight": [E, F], b + "ffn_up.weight": [E, F],
                         b + "ffn_down.weight": [F, E]})
        else:
            want.update({b + "ffn_gate_inp.weight": [E, X], b + "ffn_gate_exps.weight": [E, F, X],
                         b + "ffn_up_exps.weight": [E, F, X],
                         b + "ffn_down_exps.weight": [F, E, X],
                         b + "ffn_gate_inp_shexp.weight": [E], b + "ffn_gate_shexp.weight": [E, SH],
                         b + "ffn_up_shexp.weight": [E, SH], b + "ffn_down_shexp.weight": [SH, E]})
        if (i + 1) % 4:
            kd, vd = S * Hk, S * Hv
            want.update({b + "attn_qkv.weight": [E, 2 * kd + vd], b + "attn_gate.weight": [E, vd],
                         b + "ssm_conv1d.weight": [4, 2 * kd + vd], b + "ssm_dt.bias": [Hv],
                         b + "ssm_a": [Hv], b + "ssm_norm.weight": [S],
                         b + "ssm_out.weight": [vd, E]})
            if q35:
                want.update({b + "ssm_beta.weight": [E, Hv], b + "ssm_alpha.weight": [E, Hv]})
            else:
                want[b + "ssm_ba.weight"] = [E, 2 * Hv]
        else:
            D = E // H
            want.update({b + "attn_q.weight": [E, 2 * H * D], b + "attn_k.weight": [E, Hkv * D],
                         b + "attn_v.weight": [E, Hkv * D], b + "attn_output.weight": [H * D, E],
                         b + "attn_q_norm.weight": [D], b + "attn_k_norm.weight": [D]})
    rd = GGUFReader(path)
    got = {t.name: [int(x) for x in t.shape] for t in rd.tensors}
    expect(got == want, f"{arch} tensors: extra {sorted(set(got) - set(want))}, missing "
           f"{sorted(set(want) - set(got))}, shapes differ "
           f"{sorted(k for k in got if k in want and got[k] != want[k])}")
    a = rd.fields
    kv = {"general.architecture": arch, f"{arch}.block_count": L,
          f"{arch}.ssm.conv_kernel": 4, f"{arch}.ssm.state_size": S,
          f"{arch}.ssm.group_count": Hk, f"{arch}.ssm.time_step_rank": Hv,
          f"{arch}.ssm.inner_size": S * Hv, f"{arch}.full_attention_interval": 4,
          f"{arch}.rope.dimension_count": 4,
          f"{arch}.attention.key_length": 16, f"{arch}.attention.value_length": 16,
          f"{arch}.attention.head_count": H, f"{arch}.attention.head_count_kv": Hkv,
          "tokenizer.ggml.pre": "qwen35" if q35 else "qwen2"}
    if not dense:
        kv.update({f"{arch}.expert_count": X, f"{arch}.expert_used_count": 2,
                   f"{arch}.expert_feed_forward_length": F,
                   f"{arch}.expert_shared_feed_forward_length": SH})
    if q35:
        kv[f"{arch}.rope.dimension_sections"] = [1, 1, 0, 0]
    for k, v in kv.items():
        expect(k in a and field_value(a[k]) == v,
               f"{arch}: {k} = {field_value(a[k]) if k in a else None}, want {v}")
    ssm_a = np.array(next(t for t in rd.tensors if t.name == "blk.0.ssm_a").data)
    expect(bool(np.all(ssm_a < 0)), f"{arch}: ssm_a = -exp(A_log) < 0 ({ssm_a.tolist()})")
    print(f"ok   {arch} layout and keys")


def check_glm4moe():
    """glm4moe: the tensors llama_model_glm4_moe::load_arch_tensors creates (every name one
    gguf-py's MODEL_TENSORS[GLM4_MOE] knows) and the keys Glm4MoeModel.set_gguf_parameters
    writes, for --layers 3 --nextn 1 --qk-norm --dim 64 --heads 4 --kv-heads 2: layer 0 dense
    (leading_dense_block_count 1), 1-2 MoE, block 3 the MTP block (a MoE block plus
    nextn.eh_proj [2E, E], enorm, hnorm, shared_head_norm [E]); rotary on half a head."""
    import gguf
    E, V, F, X, L, N, H, Hkv = 64, 512, 128, 8, 3, 1, 4, 2
    D = E // H
    r, path = mkmodel("--arch", "glm4moe", "--layers", str(L), "--nextn", str(N), "--qk-norm",
                      out=os.path.join(TMP, "glm4moe.gguf"))
    if not expect(r.returncode == 0, f"glm4moe: exit {r.returncode}: {r.stderr}"):
        return
    want = {"token_embd.weight": [E, V], "output_norm.weight": [E], "output.weight": [E, V]}
    for i in range(L + N):
        b = f"blk.{i}."
        want.update({b + "attn_norm.weight": [E], b + "attn_q.weight": [E, H * D],
                     b + "attn_q.bias": [H * D], b + "attn_k.weight": [E, Hkv * D],
                     b + "attn_k.bias": [Hkv * D], b + "attn_v.weight": [E, Hkv * D],
                     b + "attn_v.bias": [Hkv * D], b + "attn_output.weight": [H * D, E],
                     b + "attn_q_norm.weight": [D], b + "attn_k_norm.weight": [D],
                     b + "post_attention_norm.weight": [E]})
        if i == 0:
            want.update({b + "ffn_gate.weight": [E, F], b + "ffn_up.weight": [E, F],
                         b + "ffn_down.weight": [F, E]})
            continue
        want.update({b + "ffn_gate_inp.weight": [E, X], b + "exp_probs_b.bias": [X],
                     b + "ffn_gate_exps.weight": [E, F, X], b + "ffn_up_exps.weight": [E, F, X],
                     b + "ffn_down_exps.weight": [F, E, X], b + "ffn_gate_shexp.weight": [E, F],
                     b + "ffn_up_shexp.weight": [E, F], b + "ffn_down_shexp.weight": [F, E]})
        if i >= L:
            want.update({b + "nextn.eh_proj.weight": [2 * E, E], b + "nextn.enorm.weight": [E],
                         b + "nextn.hnorm.weight": [E],
                         b + "nextn.shared_head_norm.weight": [E]})
    rd = GGUFReader(path)
    got = {t.name: [int(x) for x in t.shape] for t in rd.tensors}
    expect(got == want, f"glm4moe tensors: extra {sorted(set(got) - set(want))}, missing "
           f"{sorted(set(want) - set(got))}, shapes differ "
           f"{sorted(k for k in got if k in want and got[k] != want[k])}")
    known = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.GLM4_MOE]}
    for name in got:
        stem = name.rsplit(".", 1)[0]
        parts = stem.split(".")
        generic = ".".join(["blk", "{bid}"] + parts[2:]) if parts[0] == "blk" else stem
        expect(generic in known, f"glm4moe: {name} is not a GLM4_MOE tensor of gguf-py")
    a = rd.fields
    kv = {"general.architecture": "glm4moe", "glm4moe.block_count": L + N,
          "glm4moe.nextn_predict_layers": N, "glm4moe.leading_dense_block_count": 1,
          "glm4moe.rope.dimension_count": D // 2, "glm4moe.attention.key_length": D,
          "glm4moe.attention.value_length": D, "glm4moe.expert_count": X,
          "glm4moe.expert_used_count": 2, "glm4moe.expert_feed_forward_length": F,
          "glm4moe.expert_shared_count": 1, "glm4moe.feed_forward_length": F,
          "glm4moe.expert_gating_func": 2, "glm4moe.expert_weights_scale": 2.5,
          "glm4moe.expert_weights_norm": True, "glm4moe.attention.head_count": H,
          "glm4moe.attention.head_count_kv": Hkv, "tokenizer.ggml.pre": "glm4"}
    for k, v in kv.items():
        expect(k in a and field_value(a[k]) == v,
               f"glm4moe: {k} = {field_value(a[k]) if k in a else None}, want {v}")
    print("ok   glm4moe layout and keys")


def gguf_py_key_templates():
    """Every "{arch}.*" metadata key template gguf-py's Keys lists."""
    import gguf
    out = set()
    for group in vars(gguf.Keys).values():
        for v in vars(group).values() if isinstance(group, type) else ():
            if isinstance(v, str) and v.startswith("{arch}."):
                out.add(v)
    return out


def check_gguf_py_names():
    """Each architecture mkmodel writes, with its optional parts (MTP blocks, q/k norms,
    biases): every tensor is one of gguf-py's MODEL_TENSORS for that architecture, and every
    "{arch}." key one of its Keys (the names llama.cpp's converters write), so no name is
    misspelt in a way our own loader would share."""
    import gguf
    arch_of = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}
    templates = gguf_py_key_templates()
    cases = [("glm4moe", ["--nextn", "1", "--qk-norm"]), ("qwen35", []), ("qwen35moe", []),
             ("minimax-m2", []), ("dots1", []), ("bailingmoe2", ["--nextn", "1"]),
             ("qwen3vl", []), ("qwen3vlmoe", []), ("ernie4_5", ["--biases"]),
             ("ernie4_5-moe", ["--biases"]), ("hunyuan-moe", []), ("qwen3next", []),
             ("deepseek2", [])]
    for arch, extra in cases:
        r, path = mkmodel("--arch", arch, *extra, out=os.path.join(TMP, f"names-{arch}.gguf"))
        if not expect(r.returncode == 0, f"{arch} {extra}: exit {r.returncode}: {r.stderr}"):
            continue
        rd = GGUFReader(path)
        a = rd.fields["general.architecture"].contents()
        if a not in arch_of:  # a gguf-py older than the architecture
            print(f"note {arch}: gguf-py {getattr(gguf, '__version__', '?')} does not know it; "
                  "names not checked")
            continue
        known = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[arch_of[a]]}
        for t in rd.tensors:
            stem = t.name
            for suffix in (".weight", ".bias"):  # ssm_a has none
                stem = stem[:-len(suffix)] if stem.endswith(suffix) else stem
            parts = stem.split(".")
            generic = ".".join(["blk", "{bid}"] + parts[2:]) if parts[0] == "blk" else stem
            expect(generic in known, f"{arch}: tensor {t.name} is not one of gguf-py's "
                   f"MODEL_TENSORS[{a}]")
        for k in rd.fields:
            if k.startswith(a + "."):
                expect("{arch}" + k[len(a):] in templates,
                       f"{arch}: metadata key {k} is not one of gguf-py's Keys")
    print("ok   tensor and key names of the newer archs are gguf-py's")


def check_optional():
    """--biases and --longrope write what llama.cpp's loaders take as optional (create_tensor_qkv's
    biases, llama's attn_output / FFN biases, qwen2's output.bias, phi3's fused attn_qkv.bias;
    LongRoPE's factor tensors [n_rot / 2] and keys as Phi3MiniModel writes them)."""
    E, F, V, D = 64, 128, 512, 16
    KV = 2 * D
    cases = (
        ("llama", ["--biases", "--longrope", "64"],
         {"blk.1.attn_q.bias": [E], "blk.1.attn_k.bias": [KV], "blk.1.attn_v.bias": [KV],
          "blk.1.attn_output.bias": [E], "blk.1.ffn_gate.bias": [F], "blk.1.ffn_up.bias": [F],
          "blk.1.ffn_down.bias": [E], "rope_factors_long.weight": [D // 2],
          "rope_factors_short.weight": [D // 2]}),
        ("phi3", ["--biases", "--longrope", "64"],
         {"blk.0.attn_qkv.bias": [E + 2 * KV], "rope_factors_long.weight": [12 // 2],
          "rope_factors_short.weight": [12 // 2]}),
        ("qwen2", ["--biases"], {"output.bias": [V], "blk.0.attn_q.bias": [E]}),
        ("qwen3", ["--biases"], {"blk.1.attn_v.bias": [KV]}),
    )
    for arch, args, want in cases:
        r, path = mkmodel("--arch", arch, *args, out=os.path.join(TMP, f"{arch}-opt.gguf"))
        if not expect(r.returncode == 0, f"{arch} {args}: exit {r.returncode}: {r.stderr}"):
            continue
        g = GGUFReader(path)
        t = {x.name: x for x in g.tensors}
        for name, ne in want.items():
            ok = name in t and [int(v) for v in t[name].shape] == ne and \
                t[name].tensor_type == T.F32
            expect(ok, f"{arch} {args}: {name} F32 {ne}")
        if "--longrope" not in args:
            expect(not any(n.startswith("rope_factors") for n in t), f"{arch}: no LongRoPE")
            continue
        f = g.fields
        long_, short = np.array(t["rope_factors_long.weight"].data), \
            np.array(t["rope_factors_short.weight"].data)
        expect(long_.min() > 0 and short.min() > 0 and long_.mean() > short.mean(),
               f"{arch}: LongRoPE factors positive, long above short")
        expect(field_value(f[f"{arch}.rope.scaling.original_context_length"]) == 64,
               f"{arch}: original_context_length 64")
        af = math.sqrt(1 + math.log(256 / 64) / math.log(64))
        expect(abs(field_value(f[f"{arch}.rope.scaling.attn_factor"]) - af) < 1e-6,
               f"{arch}: attn_factor {af}")
        stype = f.get(f"{arch}.rope.scaling.type")
        expect((stype is None) == (arch == "phi3") and
               (stype is None or field_value(stype) == "longrope"),
               f"{arch}: rope.scaling.type (phi3: none, as its converter writes)")
    print("ok   optional tensors (--biases, --longrope)")


def main():
    # -- layouts and metadata for every arch and several types
    matrix = [(a, ty) for a in ARCHS
              for ty in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")]
    matrix += [(a, "MXFP4") for a in ARCHS if MOE[a]]
    for arch, ty in matrix:
        p = arch_defaults(arch, type=ty)
        path = os.path.join(TMP, f"{arch}-{ty}.gguf")
        r, _ = mkmodel("--arch", arch, "--type", ty, out=path)
        if not expect(r.returncode == 0, f"{arch} {ty}: exit {r.returncode}: {r.stderr}"):
            continue
        check_file(arch, p, path, f"{arch}/{ty}")
        if ty == "F32":
            check_values(arch, p, path, f"{arch}/{ty}")
        else:
            check_weights_match_f32(arch, p, path, os.path.join(TMP, f"{arch}-F32.gguf"),
                                    f"{arch}/{ty}")
        print(f"ok   {arch} {ty}")

    # -- K-quants: rows of 256-element super-blocks need --dim and --ffn multiples of 256
    for arch in ("llama", "qwen3moe", "qwen2moe", "gemma3"):
        p = arch_defaults(arch, dim=256, ffn=256, **({"experts": 4} if MOE[arch] else {}))
        moe = ["--experts", "4"] if MOE[arch] else []
        f32 = os.path.join(TMP, f"{arch}-k-F32.gguf")
        r, _ = mkmodel("--arch", arch, "--dim", "256", "--ffn", "256", *moe, out=f32)
        if not expect(r.returncode == 0, f"{arch} 256 F32: {r.stderr}"):
            continue
        for ty in ("Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL"):
            if ty.startswith("IQ4") and arch not in ("llama", "qwen2moe"):
                continue  # the IQ4 quantizer's scale search is slow in a -O0 build
            p["type"] = ty
            path = os.path.join(TMP, f"{arch}-{ty}.gguf")
            r, _ = mkmodel("--arch", arch, "--dim", "256", "--ffn", "256", *moe, "--type", ty,
                           out=path)
            if not expect(r.returncode == 0, f"{arch} {ty}: exit {r.returncode}: {r.stderr}"):
                continue
            check_file(arch, p, path, f"{arch}/{ty}")
            check_weights_close_f32(p, path, f32, f"{arch}/{ty}")
            print(f"ok   {arch} {ty}")

    # -- K-quant FFN widths that are not whole 256-blocks: the down projections take
    #    llama.cpp's fallback type (Q5_0 / Q5_1 / Q8_0 / IQ4_NL), as its quantizer writes them
    for ty in ("Q4_K", "Q5_K", "Q6_K", "IQ4_XS"):
        p = arch_defaults("qwen2moe", layers=1, dim=256, ffn=384, shexp=416, experts=4, type=ty)
        r, path = mkmodel("--arch", "qwen2moe", "--layers", "1", "--dim", "256", "--ffn", "384",
                          "--shared-ffn", "416", "--experts", "4", "--type", ty)
        if expect(r.returncode == 0, f"qwen2moe {ty} ffn 384: {r.stderr}"):
            check_file("qwen2moe", p, path, f"qwen2moe/{ty}/fallback")
            print(f"ok   qwen2moe {ty} ffn 384: down {FALLBACK[ty]}")
    # -- the README's command: with no --dim / --ffn a K-quant's widths default to 256 (whole
    #    256-element blocks; --dim 64 and --ffn 128 otherwise); a width given is kept, and refused
    r, path = mkmodel("--arch", "qwen3moe", "--type", "Q4_K")
    if expect(r.returncode == 0, f"README's mkmodel --arch qwen3moe --type Q4_K: {r.stderr}"):
        check_file("qwen3moe", arch_defaults("qwen3moe", dim=256, ffn=256, type="Q4_K"), path,
                   "qwen3moe/Q4_K defaults")
    r, _ = mkmodel("--arch", "qwen3moe", "--type", "Q4_K", "--dim", "64")
    expect(r.returncode == 2 and "--dim 64" in r.stderr, "--type Q4_K --dim 64 still refused "
           f"({r.returncode}: {r.stderr.strip()})")

    # -- non-default sizes, GQA and a bigger vocabulary
    p = dict(DEFAULTS, layers=3, dim=96, ffn=64, experts=4, top_k=3, heads=6, kv_heads=3,
             vocab=2000, ctx=4096, type="Q8_0")
    r, path = mkmodel("--arch", "qwen3moe", "--layers", "3", "--dim", "96", "--ffn", "64",
                      "--experts", "4", "--top-k", "3", "--heads", "6", "--kv-heads", "3",
                      "--vocab", "2000", "--ctx", "4096", "--type", "Q8_0")
    if expect(r.returncode == 0, f"custom qwen3moe: {r.stderr}"):
        check_file("qwen3moe", p, path, "qwen3moe/custom")
    p = dict(DEFAULTS, layers=1, dim=32, heads=2, kv_heads=1, vocab=300, experts=0, top_k=0,
             ffn=48)
    r, path = mkmodel("--arch=llama", "--layers=1", "--dim=32", "--heads=2", "--kv-heads=1",
                      "--vocab=300", "--ffn=48")
    if expect(r.returncode == 0, f"custom llama: {r.stderr}"):
        check_file("llama", p, path, "llama/custom")
    p = arch_defaults("qwen2moe", layers=1, dim=96, ffn=32, shexp=160, experts=3, top_k=1,
                      heads=6, kv_heads=2, type="Q8_0")
    r, path = mkmodel("--arch", "qwen2moe", "--layers", "1", "--dim", "96", "--ffn", "32",
                      "--shared-ffn", "160", "--experts", "3", "--top-k", "1", "--heads", "6",
                      "--kv-heads", "2", "--type", "Q8_0")
    if expect(r.returncode == 0, f"custom qwen2moe: {r.stderr}"):
        check_file("qwen2moe", p, path, "qwen2moe/custom")
    p = arch_defaults("qwen2moe", ffn=96)  # shared width follows --ffn: 192
    r, path = mkmodel("--arch", "qwen2moe", "--ffn", "96")
    if expect(r.returncode == 0, f"qwen2moe --ffn: {r.stderr}"):
        check_file("qwen2moe", p, path, "qwen2moe/ffn")
    p = arch_defaults("gemma3", layers=7, swa=3, heads=2, kv_heads=1, vocab=300)
    r, path = mkmodel("--arch", "gemma3", "--layers", "7", "--sliding-window", "3",
                      "--heads", "2", "--kv-heads", "1", "--vocab", "300")
    if expect(r.returncode == 0, f"custom gemma3: {r.stderr}"):
        check_file("gemma3", p, path, "gemma3/custom")

    # -- the default is a small qwen3moe
    r, path = mkmodel()
    if expect(r.returncode == 0, f"default: {r.stderr}"):
        check_file("qwen3moe", dict(DEFAULTS), path, "default")
        print("ok   default model is qwen3moe")

    # -- determinism
    a = os.path.join(TMP, "a.gguf")
    b = os.path.join(TMP, "b.gguf")
    c = os.path.join(TMP, "c.gguf")
    mkmodel("--arch", "mixtral", "--type", "Q4_0", "--seed", "7", out=a)
    mkmodel("--arch", "mixtral", "--type", "Q4_0", "--seed", "7", out=b)
    mkmodel("--arch", "mixtral", "--type", "Q4_0", "--seed", "8", out=c)
    da, db, dc = (open(x, "rb").read() for x in (a, b, c))
    expect(da == db, "same seed gave different files")
    expect(da != dc and len(da) == len(dc), "different seed gave identical files")
    print("ok   determinism")

    # -- router skew: Zipf exponent 1.2 is visibly skewed and ordered, 0 is near uniform
    for arch in ("qwen3moe", "mixtral", "olmoe", "qwen2moe"):
        skewed = os.path.join(TMP, f"skew-{arch}.gguf")
        flat = os.path.join(TMP, f"flat-{arch}.gguf")
        r1, _ = mkmodel("--arch", arch, "--vocab", "4096", "--dim", "128", "--layers", "3",
                        "--router-skew", "1.2", "--type", "Q8_0", out=skewed)
        r2, _ = mkmodel("--arch", arch, "--vocab", "4096", "--dim", "128", "--layers", "3",
                        "--router-skew", "0", out=flat)
        if not expect(r1.returncode == 0 and r2.returncode == 0, f"{arch} skew runs"):
            continue
        uniform = 1 / 8
        for layer, (share, col0) in enumerate(router_shares(skewed)):
            rho = spearman(share, col0)
            print(f"     {arch} Z=1.2 layer {layer}: shares {np.round(share, 3).tolist()} "
                  f"spearman {rho:.2f}")
            expect(share.max() > 2.0 * uniform, f"{arch} Z=1.2 layer {layer}: top share "
                   f"{share.max():.3f} not well above uniform {uniform}")
            expect(share.min() < 0.5 * uniform, f"{arch} Z=1.2 layer {layer}: least popular "
                   f"expert share {share.min():.3f}")
            expect(rho > 0.85, f"{arch} Z=1.2 layer {layer}: popularity does not follow the "
                   f"intended ranking (spearman {rho:.2f})")
        perms = [np.argsort(col0) for _, col0 in router_shares(skewed)]
        expect(any(not np.array_equal(perms[0], q) for q in perms[1:]),
               f"{arch}: every layer has the same popularity order")
        for layer, (share, _) in enumerate(router_shares(flat)):
            expect(share.max() < 1.3 * uniform and share.min() > 0.7 * uniform,
                   f"{arch} Z=0 layer {layer}: shares {np.round(share, 3).tolist()} not "
                   f"near uniform")
        print(f"ok   {arch} router skew")

    check_phi3_vocab()
    for arch in ("qwen3next", "qwen35moe", "qwen35"):
        check_qwen3next(arch)
    check_glm4moe()
    check_gguf_py_names()
    check_optional()
    check_threads()
    check_router_topics()
    check_neuron_skew()
    check_pooled("Q4_K")
    check_pooled("MXFP4")

    # -- invalid flags: exit 2, message naming the flag, no file left behind
    bad = [
        (["--bogus", "1"], "--bogus"),
        (["--layers"], "--layers"),
        (["--layers", "abc"], "--layers"),
        (["--layers", "-1"], "--layers"),
        (["--layers", "0"], "--layers"),
        (["--layers", " 2"], "--layers"),
        (["--layers", "2x"], "--layers"),
        (["--dim", "4294967296"], "--dim"),
        (["--dim", "66"], "--heads"),
        (["--dim", "24", "--heads", "4"], "--heads"),  # head dim 6 is fine; 24/4=6 even
        (["--heads", "4", "--kv-heads", "3"], "--kv-heads"),
        (["--kv-heads", "8"], "--kv-heads"),
        (["--top-k", "9"], "--top-k"),
        (["--top-k", "0"], "--top-k"),
        (["--experts", "0"], "--experts"),
        (["--experts", "513"], "--experts"),
        (["--arch", "llama", "--experts", "8"], "--experts"),
        (["--arch", "llama", "--top-k", "2"], "--top-k"),
        (["--arch", "llama", "--router-topics", "2"], "--router-topics"),
        (["--router-topics", "9"], "--router-topics"),
        (["--router-topics", "2", "--topic-run", "0"], "--topic-run"),
        (["--arch", "olmoe", "--kv-heads", "2"], "--kv-heads"),
        (["--type", "Q8_0", "--dim", "48", "--heads", "4"], "--dim"),
        (["--type", "Q4_0", "--ffn", "100"], "--ffn"),
        (["--type", "Q4_K", "--dim", "64"], "--dim"),  # not whole 256-blocks (a width given
                                                        # is kept, not rounded)
        (["--type", "Q6_K", "--dim", "256", "--ffn", "48"], "--ffn"),  # not even Q8_0's 32
        (["--type", "Q5_1", "--ffn", "48"], "--ffn"),
        (["--type", "IQ2_XXS"], "--type"),  # dequantize-only
        (["--type", "Q8_K"], "--type"),  # not a weight type
        (["--type", "IQ3_S"], "--type"),  # dequantize-only
        (["--type", "fp32"], "--type"),
        (["--arch", "llama", "--type", "MXFP4"], "--type"),  # no routed experts
        (["--arch", "qwen3moe", "--type", "MXFP4", "--ffn", "48"], "--ffn"),
        (["--vocab", "100"], "--vocab"),
        (["--vocab", "258"], "--vocab"),
        (["--arch", "gpt5"], "--arch"),
        (["--router-skew", "nan"], "--router-skew"),
        (["--router-skew", "-1"], "--router-skew"),
        (["--router-skew", "1.0x"], "--router-skew"),
        (["--seed", "1x"], "--seed"),
        (["--seed", "18446744073709551616"], "--seed"),
        (["--ctx", "0"], "--ctx"),
        (["--arch", "gemma3", "--experts", "8"], "--experts"),
        (["--arch", "gemma3", "--top-k", "2"], "--top-k"),
        (["--arch", "gemma3", "--sliding-window", "0"], "--sliding-window"),
        (["--arch", "llama", "--sliding-window", "4"], "--sliding-window"),
        (["--sliding-window", "4"], "--sliding-window"),  # default arch qwen3moe
        (["--arch", "qwen3moe", "--shared-ffn", "64"], "--shared-ffn"),
        (["--arch", "gemma3", "--shared-ffn", "64"], "--shared-ffn"),
        (["--arch", "qwen2moe", "--shared-ffn", "0"], "--shared-ffn"),
        (["--arch", "qwen2moe", "--type", "Q8_0", "--shared-ffn", "48"], "--shared-ffn"),
        (["--arch", "qwen2moe", "--shared-ffn", "x"], "--shared-ffn"),
        (["--neuron-skew", "-1"], "--neuron-skew"),
        (["--neuron-skew", "4.5"], "--neuron-skew"),
        (["--neuron-skew", "inf"], "--neuron-skew"),
        (["--neuron-skew", "x"], "--neuron-skew"),
        (["--rope-theta", "1"], "--rope-theta"),
        (["--arch", "qwen2moe", "--head-dim", "32"], "--head-dim"),
        (["--head-dim", "31"], "--head-dim"),
        (["--type", "Q8_0", "--dim", "96", "--heads", "3", "--kv-heads", "1", "--head-dim",
          "6"], "--head-dim"),
        (["--rope-theta", "-5"], "--rope-theta"),
        (["--exact-quant=1"], "--exact-quant"),
        (["--arch", "qwen3moe", "--nextn", "1"], "--nextn"),
        (["--arch", "deepseek2", "--qk-norm"], "--qk-norm"),
        (["--arch", "glm4moe", "--nextn", "17"], "--nextn"),
        (["--arch", "glm4moe", "--biases"], "--biases"),
        (["--arch", "glm4moe", "--dim", "8", "--heads", "4"], "glm4moe"),
        (["--arch", "glm4moe", "--qk-norm=1"], "--qk-norm"),
        (["--arch", "qwen35", "--shared-ffn", "64"], "--shared-ffn"),
        (["--arch", "qwen35moe", "--dim", "24", "--heads", "4"], "qwen35moe"),
        (["--arch", "dots1", "--kv-heads", "2"], "--kv-heads"),
        (["--arch", "dots1", "--nextn", "1"], "--nextn"),
        (["--arch", "minimax-m2", "--shared-ffn", "64"], "--shared-ffn"),
    ]
    for args, flag in bad:
        if args == ["--dim", "24", "--heads", "4"]:
            continue  # valid (kept in the list to document the head-dim rule); see below
        path = os.path.join(TMP, "bad.gguf")
        if os.path.exists(path):
            os.remove(path)
        r, _ = mkmodel(*args, out=path)
        ok = r.returncode == 2 and flag in r.stderr and not os.path.exists(path)
        expect(ok, f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r}, want exit 2 "
               f"naming {flag}")
    r, _ = mkmodel("--dim", "24", "--heads", "4", "--type", "F16")
    expect(r.returncode == 0, f"dim 24 heads 4 should be valid: {r.stderr}")
    r, _ = mkmodel("--dim", "20", "--heads", "4")  # head dim 5: odd, RoPE needs pairs
    expect(r.returncode == 2 and "--heads" in r.stderr, f"odd head dim: {r.stderr}")
    # --threads: 1..1024, decimal; the message names the flag as given and the range
    for flag, val in (("--threads", "0"), ("--threads", "-2"), ("--threads", "abc"),
                      ("--threads", "1025"), ("--threads", "2.5"), ("-t", "0"), ("-t", ""),
                      ("--threads", "99999999999999999999")):
        path = os.path.join(TMP, "bad.gguf")
        if os.path.exists(path):
            os.remove(path)
        r, _ = mkmodel(flag, val, out=path)
        expect(r.returncode == 2 and f"{flag}: '{val}'" in r.stderr and "[1, 1024]" in r.stderr
               and not os.path.exists(path),
               f"{flag} {val!r}: exit {r.returncode}, stderr {r.stderr.strip()!r}, want exit 2 "
               f"naming {flag} and the range")
    r, _ = mkmodel("--threads")
    expect(r.returncode == 2 and "--threads" in r.stderr, f"--threads without value: {r.stderr}")
    r = subprocess.run([SLUICE, "mkmodel"], capture_output=True, text=True)
    expect(r.returncode == 2 and "-o" in r.stderr, f"missing -o: {r.stderr}")
    r = subprocess.run([SLUICE, "mkmodel", "--help"], capture_output=True, text=True)
    expect(r.returncode == 0 and "--router-skew" in r.stdout, "--help")
    r, _ = mkmodel(out=os.path.join(TMP, "no-such-dir", "x.gguf"))
    expect(r.returncode == 1 and "no-such-dir" in r.stderr, f"unwritable path: {r.stderr}")
    print("ok   flag validation")

    if FAILURES:
        print(f"\n{len(FAILURES)} failures")
        return 1
    print("\nall mkmodel checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
