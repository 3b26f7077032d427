"""Cross-check of kernels/ref/ops and kernels/cpu/ops against float64 numpy.

usage: ops_vs_numpy.py OPS_TOOL

The numpy side is written from the published definitions, not from our C:
- rope NORMAL: Meta's llama apply_rotary_emb (pairs (x[2i], x[2i+1]) as complex numbers times
  e^{i theta}), which is llama.cpp's "normal" mode;
- rope NEOX: HF transformers' rotate_half (cos/sin of cat(freqs, freqs); x*cos + rotate_half(x)*sin)
  on the first n_rot dims, the rest passed through (partial rotary, as HF GPT-NeoX);
- YaRN: ggml's rope_yarn / ggml_rope_yarn_corr_dims (llama.cpp ggml-cpu ops.cpp), the ramp over
  pair index i0/2 with max(0.001, hi - lo), mscale = attn_factor (1 + 0.1 ln(1/freq_scale));
- router: softmax-then-topk (Mixtral/Qwen MoE blocks, norm_topk_prob), sigmoid + selection bias
  (DeepSeek-V3 noaux_tc: select by sigmoid + e_score_correction_bias, weight by sigmoid), and
  topk-then-softmax (gpt-oss); ties to the lower index (a stable sort by descending score);
- decode attention: softmax(scale q.K^T, soft-capped, window-masked) . V per head with GQA,
  gpt-oss sinks as an extra logit column that is dropped after the softmax.

Every implementation the CPU has is checked: ref, scalar, avx2, avx512 (a missing ISA is
reported and skipped; the tool exits 77 for it).
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="ops_vs_numpy.", dir=os.environ.get("TEST_TMPDIR"))
IMPLS = ["ref", "scalar", "avx2", "avx512"]
FAILURES = []
SKIPPED = set()
RNG = np.random.default_rng(20240611)


def path(name):
    return os.path.join(TMP, name)


def save(name, arr):
    p = path(name)
    np.ascontiguousarray(arr).tofile(p)
    return p


def run(impl, *args):
    """Runs the tool; returns False when the ISA is unavailable (exit 77)."""
    r = subprocess.run([TOOL, impl, *map(str, args)], capture_output=True, text=True)
    if r.returncode == 77:
        SKIPPED.add(impl)
        return False
    if r.returncode != 0:
        raise RuntimeError(f"{impl} {args[0]}: exit {r.returncode}: {r.stderr.strip()}")
    return True


def compare(label, got, want, atol, rtol=0.0):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    err = np.abs(got - want)
    lim = atol + rtol * np.abs(want)
    bad = ~(err <= lim)
    if bad.any():
        i = int(np.argmax(np.where(bad, err - lim, -np.inf)))
        FAILURES.append(f"{label}: {int(bad.sum())} of {got.size} elements off; worst at {i}: "
                        f"got {got.flat[i]:.9g} want {want.flat[i]:.9g} (atol {atol:.3g})")
        print("FAIL " + FAILURES[-1])
    else:
        print(f"ok   {label} (max err {err.max() if err.size else 0:.3g}, atol {atol:.3g})")


# ---- rope -----------------------------------------------------------------------------------

def yarn_corr_dims(n_dims, n_ctx_orig, base, beta_fast, beta_slow):
    """ggml_rope_yarn_corr_dims, in float64; the test asserts that the values are not within
    1e-4 of an integer, where ggml's float32 evaluation could floor/ceil differently."""
    def corr_dim(n_rot):
        return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(base))
    a, b = corr_dim(beta_fast), corr_dim(beta_slow)
    for v in (a, b):
        assert abs(v - round(v)) > 1e-4, f"corr dim {v} too close to an integer for this test"
    return max(0.0, math.floor(a)), min(n_dims - 1.0, math.ceil(b))


def rope_angles(pos, n_rot, base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow,
                n_ctx_orig):
    """theta[t, i] and mscale per ggml rope_yarn, float64."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    theta_extrap = pos.astype(np.float64)[:, None] * base ** (-2.0 * i / n_rot)[None, :]
    theta_interp = freq_scale * theta_extrap
    mscale = attn_factor
    if ext_factor != 0.0:
        lo, hi = yarn_corr_dims(n_rot, n_ctx_orig, base, beta_fast, beta_slow)
        y = (i - lo) / max(0.001, hi - lo)
        ramp_mix = (1.0 - np.clip(y, 0.0, 1.0)) * ext_factor
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix
        mscale = attn_factor * (1.0 + 0.1 * math.log(1.0 / freq_scale))
    else:
        theta = theta_interp
    return theta, mscale


def rope_normal(x, theta, mscale, n_rot):
    """Meta llama: view (x[2i], x[2i+1]) as complex, multiply by e^{i theta}."""
    y = x.astype(np.float64).copy()
    xc = y[..., :n_rot:2] + 1j * y[..., 1:n_rot:2]
    rot = xc * (np.exp(1j * theta) * mscale)[:, None, :]
    y[..., :n_rot:2] = rot.real
    y[..., 1:n_rot:2] = rot.imag
    return y


def rope_neox(x, theta, mscale, n_rot):
    """HF rotate_half on the first n_rot dims."""
    y = x.astype(np.float64).copy()
    emb = np.concatenate([theta, theta], axis=-1)[:, None, :]  # [T, 1, n_rot]
    cos, sin = np.cos(emb) * mscale, np.sin(emb) * mscale
    xr = y[..., :n_rot]
    h = n_rot // 2
    rotate_half = np.concatenate([-xr[..., h:], xr[..., :h]], axis=-1)
    y[..., :n_rot] = xr * cos + rotate_half * sin
    return y


def test_rope():
    cases = [
        # mode, T, H, hd, n_rot, base, freq_scale, ext, attn, beta_fast, beta_slow, n_ctx_orig
        ("normal", 5, 4, 128, 128, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0, 0),
        ("neox", 5, 4, 128, 128, 1000000.0, 1.0, 0.0, 1.0, 32.0, 1.0, 0),
        ("neox", 4, 3, 80, 40, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0, 0),      # partial rotary
        ("normal", 4, 3, 66, 34, 500000.0, 0.25, 0.0, 1.0, 32.0, 1.0, 0),  # linear scaling
        ("normal", 6, 2, 128, 128, 10000.0, 0.25, 1.0, 1.0, 32.0, 1.0, 4096),  # YaRN
        ("neox", 6, 2, 64, 64, 150000.0, 1 / 32, 1.0, 1.0, 32.0, 1.0, 4096),  # gpt-oss-like
        ("neox", 6, 2, 128, 128, 1000000.0, 0.25, 0.5, 0.8, 24.0, 2.0, 32768),  # partial mix
    ]
    for ci, (mode, T, H, hd, n_rot, base, fs, ext, af, bf, bs, nco) in enumerate(cases):
        pos = np.array([0, 1, 7, 4095, 100000, -3][:T], dtype=np.int32)
        x = RNG.standard_normal((T, H, hd)).astype(np.float32)
        theta, msc = rope_angles(pos, n_rot, base, fs, ext, af, bf, bs, nco)
        want = (rope_neox if mode == "neox" else rope_normal)(x, theta, msc, n_rot)
        scale = float(np.abs(x).max())
        for impl in IMPLS:
            if not run(impl, "rope", mode, T, H, hd, n_rot, repr(base), repr(fs), repr(ext),
                       repr(af), repr(bf), repr(bs), nco, save("pos", pos), save("x", x),
                       path("y")):
                continue
            got = np.fromfile(path("y"), np.float32).reshape(T, H, hd)
            atol = (3e-7 if impl == "ref" else 1e-6) * scale * max(1.0, msc)
            compare(f"rope[{ci}] {mode} n_rot={n_rot}/{hd} fs={fs:g} ext={ext:g} {impl}", got,
                    want, atol)


# ---- router ----------------------------------------------------------------------------------

def topk_stable(score, k):
    order = np.lexsort((np.arange(score.size), -score))  # by -score, then by index
    return order[:k]


def router_np(logits, gating, k, norm, wscale, bias):
    l = logits.astype(np.float64)
    if gating == "softmax_topk":
        p = np.exp(l - l.max())
        p /= p.sum()
    elif gating == "sigmoid":
        p = 1.0 / (1.0 + np.exp(-l))
    else:
        p = l
    score = p + (bias.astype(np.float64) if bias is not None else 0.0)
    idx = topk_stable(score, k)
    if gating == "topk_softmax":
        s = p[idx]
        w = np.exp(s - s.max())
        w /= w.sum()
    else:
        w = p[idx]
        if norm:
            w = w / w.sum()
    return idx, w * wscale


def test_router():
    cases = [
        ("softmax_topk", 8, 2, 1, 1.0, False),    # mixtral
        ("softmax_topk", 128, 8, 1, 1.0, False),  # qwen3moe (norm_topk_prob)
        ("softmax_topk", 60, 4, 0, 1.0, False),   # qwen2moe
        ("softmax_topk", 64, 8, 0, 1.0, False),   # olmoe
        ("sigmoid", 256, 8, 1, 2.5, True),        # deepseek-v3 style
        ("sigmoid", 16, 4, 0, 1.0, False),
        ("topk_softmax", 32, 4, 0, 1.0, False),   # gpt-oss
        ("topk_softmax", 32, 4, 0, 1.0, True),
    ]
    T = 40
    for gating, E, k, norm, wscale, use_bias in cases:
        logits = RNG.standard_normal((T, E)).astype(np.float32) * 2
        logits[::3] = np.round(logits[::3] * 2) / 2  # ties on every third token
        logits[1] = 0.5                               # all experts tied
        bias = (RNG.standard_normal(E) * 0.5).astype(np.float32) if use_bias else None
        run("ref", "router", gating, T, E, k, norm, wscale, save("logits", logits),
            save("bias", bias) if bias is not None else "-", path("idx"), path("w"))
        gi = np.fromfile(path("idx"), np.int32).reshape(T, k)
        gw = np.fromfile(path("w"), np.float32).reshape(T, k)
        bad = 0
        wi, ww = [], []
        for t in range(T):
            i, w = router_np(logits[t], gating, k, norm, wscale, bias)
            wi.append(i)
            ww.append(w)
            bad += int(not np.array_equal(i, gi[t]))
        label = f"router {gating} E={E} k={k} norm={norm} scale={wscale} bias={use_bias}"
        if bad:
            FAILURES.append(f"{label}: {bad} of {T} tokens select other experts")
            print("FAIL " + FAILURES[-1])
        compare(label + " weights", gw, np.array(ww), 0.0, 1e-6)


# ---- attention -----------------------------------------------------------------------------

def attn_np(q, k, v, n_kv, scale, window, softcap, sinks):
    n_head, hd = q.shape
    n_pos = k.shape[0]
    group = n_head // n_kv
    p0 = n_pos - window if 0 < window < n_pos else 0
    if scale == 0.0:
        scale = 1.0 / math.sqrt(hd)
    out = np.zeros((n_head, hd))
    for h in range(n_head):
        kh = k[p0:, h // group, :].astype(np.float64)
        vh = v[p0:, h // group, :].astype(np.float64)
        s = kh @ q[h].astype(np.float64) * scale
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        if sinks is not None:
            s = np.concatenate([s, [float(sinks[h])]])
        e = np.exp(s - s.max())
        p = e / e.sum()
        if sinks is not None:
            p = p[:-1]
        out[h] = p @ vh
    return out


def test_attention():
    cases = [
        # n_head, n_kv, hd, n_pos, type, scale, window, softcap, sinks
        (8, 8, 64, 1, "f32", 0.0, 0, 0.0, False),
        (32, 8, 128, 300, "f32", 0.0, 0, 0.0, False),   # llama GQA
        (32, 4, 128, 300, "f16", 0.0, 0, 0.0, False),   # qwen3moe, F16 cache
        (64, 8, 64, 300, "f16", 0.125, 128, 0.0, True),  # gpt-oss: window + sinks
        (8, 4, 256, 300, "f32", 0.0625, 100, 0.0, False),  # gemma3 local layer
        (8, 4, 256, 200, "f16", 0.0625, 0, 50.0, False),  # gemma2 soft cap
        (12, 3, 100, 77, "f32", 0.0, 0, 0.0, True),
        (8, 2, 128, 4099, "f16", 0.0, 0, 0.0, False),  # long cache
    ]
    for ci, (nh, nkv, hd, npos, ty, scale, window, cap, use_sinks) in enumerate(cases):
        q = RNG.standard_normal((nh, hd)).astype(np.float32)
        dt = np.float16 if ty == "f16" else np.float32
        k = RNG.standard_normal((npos, nkv, hd)).astype(dt)
        v = RNG.standard_normal((npos, nkv, hd)).astype(dt)
        sinks = (RNG.standard_normal(nh) * 2).astype(np.float32) if use_sinks else None
        want = attn_np(q, k, v, nkv, scale, window, cap, sinks)
        vmax = float(np.abs(v.astype(np.float64)).max())
        for impl in IMPLS:
            if not run(impl, "attn", nh, nkv, hd, npos, ty, repr(scale), window, repr(cap),
                       save("q", q), save("k", k), save("v", v),
                       save("sinks", sinks) if sinks is not None else "-", path("o")):
                continue
            got = np.fromfile(path("o"), np.float32).reshape(nh, hd)
            atol = (1e-6 if impl == "ref" else (2e-5 if npos > 1000 else 2e-6)) * vmax
            compare(f"attn[{ci}] h={nh}/{nkv} hd={hd} n_pos={npos} {ty} win={window} "
                    f"cap={cap:g} sinks={use_sinks} {impl}", got, want, atol)


def main():
    test_rope()
    test_router()
    test_attention()
    for impl in sorted(SKIPPED):
        print(f"NOTICE: {impl} not available on this CPU; skipped")
    if FAILURES:
        print(f"\n{len(FAILURES)} failure(s):")
        for f in FAILURES:
            print("  " + f)
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
