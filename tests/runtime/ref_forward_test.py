"""Checks of the reference forward pass (ref_forward.py) by means independent of it.

usage: ref_forward_test.py [SLUICE_BINARY]

- RoPE against a complex-number formulation written out per pair, both pair layouts, and the
  relative-position property <rope(q, m), rope(k, n)> = f(m - n).
- Attention against scalar loops (causal, GQA, sliding window).
- MoE routing against a hand-worked case (top-k, renormalised or not).
- A 1-layer llama written with gguf-py's GGUFWriter whose logits are worked out by hand below
  (closed form), including a non-symmetric weight to pin the [out, in] orientation.
- With SLUICE_BINARY: every `mkmodel` arch runs through the reference with finite logits, and a
  quantized model's logits stay close to the F32 model's (sanity of the dequantized path);
  deepseek2's MTP blocks (nextn_predict_layers) are not run.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_forward as rf  # noqa: E402

FAILURES = []
TMP = tempfile.mkdtemp(prefix="ref_forward_test.", dir=os.environ.get("TEST_TMPDIR"))


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILURES.append(msg)


def rope_loop(x, pos, base, mode):
    """Per pair: z = a + ib rotated by e^{i theta_j}, theta_j = pos * base^(-2j/d)."""
    d = len(x)
    out = list(x)
    for j in range(d // 2):
        theta = pos * base ** (-2.0 * j / d)
        i0, i1 = (2 * j, 2 * j + 1) if mode == rf.ROPE_NORM else (j, j + d // 2)
        z = complex(x[i0], x[i1]) * complex(math.cos(theta), math.sin(theta))
        out[i0], out[i1] = z.real, z.imag
    return out


def check_rope():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3, 8))
    for mode in (rf.ROPE_NORM, rf.ROPE_NEOX):
        got = rf.rope(x, np.arange(5), 10000.0, 8, mode)
        want = np.array([[rope_loop(x[t, h], t, 10000.0, mode) for h in range(3)]
                         for t in range(5)])
        expect(np.allclose(got, want, atol=1e-13, rtol=0), f"rope {mode} == per-pair loop")
        # relative position: q at m, k at n -> dot depends on m - n only
        q, k = x[0, 0], x[1, 0]
        d1 = rf.rope(q[None, None], [7], 100.0, 8, mode)[0, 0] @ \
            rf.rope(k[None, None], [3], 100.0, 8, mode)[0, 0]
        d2 = rf.rope(q[None, None], [14], 100.0, 8, mode)[0, 0] @ \
            rf.rope(k[None, None], [10], 100.0, 8, mode)[0, 0]
        expect(abs(d1 - d2) < 1e-12, f"rope {mode}: dot depends on relative position only")
        expect(np.allclose(rf.rope(x, np.zeros(5), 10000.0, 8, mode), x),
               f"rope {mode}: position 0 is the identity")
    a = rf.rope(x, np.arange(5), 10000.0, 8, rf.ROPE_NORM)
    b = rf.rope(x, np.arange(5), 10000.0, 8, rf.ROPE_NEOX)
    expect(not np.allclose(a[1:], b[1:]), "rope: NORM and NEOX differ for head_dim 8")
    # NEOX on x equals NORM on x with the halves interleaved (the converter's permutation)
    perm = np.array([j for i in range(4) for j in (i, i + 4)])
    c = rf.rope(x[..., perm], np.arange(5), 10000.0, 8, rf.ROPE_NORM)
    expect(np.allclose(c, b[..., perm]), "rope: NEOX == NORM under the pair interleaving")


def attention_loop(q, k, v, scale, window):
    n, H, D = q.shape
    Hkv = k.shape[1]
    out = np.zeros((n, H * D))
    for i in range(n):
        for h in range(H):
            g = h * Hkv // H
            keys = [j for j in range(i + 1) if window is None or i - j < window]
            s = [sum(q[i, h, c] * k[j, g, c] for c in range(D)) * scale for j in keys]
            m = max(s)
            e = [math.exp(x - m) for x in s]
            z = sum(e)
            for c in range(D):
                out[i, h * D + c] = sum(e[t] / z * v[j, g, c] for t, j in enumerate(keys))
    return out


def check_attention():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((6, 4, 3))
    k = rng.standard_normal((6, 2, 3))
    v = rng.standard_normal((6, 2, 3))
    for window in (None, 1, 3):
        got = rf.attention(q, k, v, 0.7, window)
        want = attention_loop(q, k, v, 0.7, window)
        expect(np.allclose(got, want, atol=1e-13, rtol=0),
               f"attention (GQA 4/2, window {window}) == scalar loops")
    got = rf.attention(q, k, v, 0.7, 1)
    expect(np.allclose(got.reshape(6, 4, 3)[:, [0, 1]], v[:, [0, 0]]) and
           np.allclose(got.reshape(6, 4, 3)[:, [2, 3]], v[:, [1, 1]]),
           "attention window 1: each query sees only its own position")


def check_moe():
    # 3 experts, E = 1, expert e: gate/up/down scalars; router logits chosen: ln(0.5), ln(0.3),
    # ln(0.2) -> probs 0.5, 0.3, 0.2 for input h = 1.
    router = np.log(np.array([[0.5], [0.3], [0.2]]))
    gate = np.array([[[1.0]], [[2.0]], [[3.0]]])
    up = np.array([[[1.0]], [[1.0]], [[1.0]]])
    down = np.array([[[1.0]], [[10.0]], [[100.0]]])
    h = np.array([[1.0]])
    f = [down[e, 0, 0] * (gate[e, 0, 0] / (1 + math.exp(-gate[e, 0, 0]))) for e in range(3)]
    got = rf.moe_ffn(h, router, gate, up, down, 2, False)[0, 0]
    expect(abs(got - (0.5 * f[0] + 0.3 * f[1])) < 1e-12, "moe: top-2 without renorm")
    got = rf.moe_ffn(h, router, gate, up, down, 2, True)[0, 0]
    expect(abs(got - (0.5 * f[0] + 0.3 * f[1]) / 0.8) < 1e-12, "moe: top-2 renormalised")
    got = rf.moe_ffn(h, router, gate, up, down, 1, False)[0, 0]
    expect(abs(got - 0.5 * f[0]) < 1e-12, "moe: top-1")


def write_tiny_llama(path):
    """1 layer, E = 2, one head of dim 2, vocab 3, ffn 1 (zero), weights [out, in]."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(16)
    w.add_embedding_length(2)
    w.add_block_count(1)
    w.add_feed_forward_length(1)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_rope_dimension_count(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    f = np.float32
    w.add_tensor("token_embd.weight", np.array([[1, 0], [0, 2], [1, 1]], f))
    w.add_tensor("blk.0.attn_norm.weight", np.array([1, 1], f))
    w.add_tensor("blk.0.attn_q.weight", np.eye(2, dtype=f))
    w.add_tensor("blk.0.attn_k.weight", np.eye(2, dtype=f))
    w.add_tensor("blk.0.attn_v.weight", np.array([[1, 2], [0, 1]], f))  # not symmetric
    w.add_tensor("blk.0.attn_output.weight", np.eye(2, dtype=f))
    w.add_tensor("blk.0.ffn_norm.weight", np.array([1, 1], f))
    w.add_tensor("blk.0.ffn_gate.weight", np.zeros((1, 2), f))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((1, 2), f))
    w.add_tensor("blk.0.ffn_down.weight", np.zeros((2, 1), f))
    w.add_tensor("output_norm.weight", np.array([1, 1], f))
    w.add_tensor("output.weight", np.array([[1, 0], [0, 1], [1, -1]], f))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_tiny_llama():
    path = os.path.join(TMP, "tiny.gguf")
    write_tiny_llama(path)
    got = rf.load(path).forward([0, 1])
    eps = 1e-5
    # token 0: x = (1, 0); rms = sqrt(1/2 + eps); h0 = (1, 0) / rms0
    # token 1: x = (0, 2); h1 = (0, 2) / sqrt(2 + eps)
    c0, c1 = 1 / math.sqrt(0.5 + eps), 2 / math.sqrt(2 + eps)
    # v = Wv h: Wv (a, b) = (a + 2b, b)
    v0, v1 = (c0, 0.0), (2 * c1, c1)
    # position 0 attends to itself: o0 = v0
    o0 = v0
    # position 1: q1 = R(1) (0, c1) = (-c1 sin 1, c1 cos 1); k0 = (c0, 0) (position 0),
    # k1 = q1; scores / sqrt(2): s0 = -c0 c1 sin 1, s1 = c1^2
    s0, s1 = -c0 * c1 * math.sin(1) / math.sqrt(2), c1 * c1 / math.sqrt(2)
    p0 = 1 / (1 + math.exp(s1 - s0))
    p1 = 1 - p0
    o1 = (p0 * v0[0] + p1 * v1[0], p0 * v0[1] + p1 * v1[1])
    # residual (FFN is zero: silu(0) * 0), final norm, output rows (1,0), (0,1), (1,-1)
    want = []
    for x in ((1 + o0[0], 0 + o0[1]), (0 + o1[0], 2 + o1[1])):
        r = math.sqrt((x[0] ** 2 + x[1] ** 2) / 2 + eps)
        y = (x[0] / r, x[1] / r)
        want.append([y[0], y[1], y[0] - y[1]])
    err = float(np.abs(got - np.array(want)).max())
    expect(err < 1e-6, f"tiny llama: logits == hand-computed closed form (max err {err:.2e})")


def check_mkmodel_archs(sluice):
    toks = [1, 17, 300, 5, 9, 100, 200, 300, 400, 7, 8, 9]
    for arch in ("llama", "mixtral", "qwen3moe", "olmoe", "qwen2moe", "gemma3"):
        base = ["--arch", arch, "--dim", "256", "--ffn", "256"]
        if arch not in ("llama", "gemma3"):
            base += ["--experts", "4"]
        out = {}
        for ty in ("F32", "Q8_0"):
            path = os.path.join(TMP, f"{arch}-{ty}.gguf")
            r = subprocess.run([sluice, "mkmodel", *base, "--type", ty, "-o", path],
                               capture_output=True, text=True)
            if not r.returncode == 0:
                expect(False, f"{arch} {ty}: mkmodel: {r.stderr.strip()}")
                break
            out[ty] = rf.load(path).forward(toks)
        if len(out) < 2:
            continue
        f32, q8 = out["F32"], out["Q8_0"]
        expect(np.all(np.isfinite(f32)) and f32.shape == (12, 512), f"{arch}: finite logits")
        rel = float((np.abs(q8 - f32).max(axis=1) / np.abs(f32).max(axis=1)).max())
        # loose: a wrong dequantization gives O(1) errors; routing flips give a few percent
        expect(rel < 0.15, f"{arch}: Q8_0 model within 15% of F32 (rel {rel:.4f})")


def with_key(src, dst, key, value):
    """A copy of the F32 GGUF src with the u32 metadata key added (gguf-py reader / writer)."""
    rd = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, str(rd.fields["general.architecture"].contents()))
    for f in rd.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(f.name, f.contents(), f.types[0])
    w.add_uint32(key, value)
    for t in rd.tensors:
        w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_nextn(sluice):
    """deepseek2.nextn_predict_layers N: the last N blocks (MTP) are not run, so a 4-block file
    with N = 1 gives the 3-block file's logits (mkmodel's weights depend on the tensor name
    only); N = block_count is refused naming the key."""
    toks = [1, 17, 300, 5, 9]
    paths = {}
    for n in (3, 4):
        paths[n] = os.path.join(TMP, f"ds2-{n}.gguf")
        r = subprocess.run([sluice, "mkmodel", "--arch", "deepseek2", "--layers", str(n), "-o",
                            paths[n]], capture_output=True, text=True)
        expect(r.returncode == 0, f"deepseek2 {n} layers: mkmodel {r.stderr.strip()}")
        if r.returncode:
            return
    mtp, bad = os.path.join(TMP, "ds2-mtp.gguf"), os.path.join(TMP, "ds2-mtp-bad.gguf")
    with_key(paths[4], mtp, "deepseek2.nextn_predict_layers", 1)
    with_key(paths[3], bad, "deepseek2.nextn_predict_layers", 3)
    trunk, four = rf.load(paths[3]).forward(toks), rf.load(paths[4]).forward(toks)
    m = rf.load(mtp)
    expect(m.n_layer == 3 and np.array_equal(m.forward(toks), trunk),
           "deepseek2 nextn_predict_layers 1: 3 blocks run, the 3-block file's logits")
    expect(np.abs(four - trunk).max() > 1e-3, "deepseek2: the fourth block changes the logits")
    try:
        rf.load(bad)
        expect(False, "deepseek2 nextn_predict_layers 3 of 3 blocks: accepted")
    except ValueError as e:
        expect("nextn_predict_layers 3" in str(e), f"nextn_predict_layers 3 refused: {e}")


def main():
    check_rope()
    check_attention()
    check_moe()
    check_tiny_llama()
    if len(sys.argv) > 1:
        check_mkmodel_archs(sys.argv[1])
        check_nextn(sys.argv[1])
    if FAILURES:
        print(f"\n{len(FAILURES)} failures")
        return 1
    print("\nall reference checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
