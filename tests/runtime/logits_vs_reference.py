"""`sluice eval` logits against the independent float64 reference (ref_forward.py).

usage: logits_vs_reference.py SLUICE_BINARY [--quick] [ARCH ...]   (default: every arch)

For every architecture mkmodel writes (llama, mixtral, qwen3moe, olmoe, qwen2moe, gemma3, gpt-oss,
deepseek2, and deepseek2 in the legacy attn_kv_b layout: deepseek2-kv_b; qwen2, qwen3, gemma2,
granite, phi3; qwen3next, qwen35, qwen35moe; glm4moe, and glm4moe-opt with q/k norms and an
MTP block; minimax-m2; dots1; bailingmoe2, and bailingmoe2-opt with an MTP block and a wider
shared expert; qwen3vl, qwen3vlmoe, and qwen3vlmoe-opt with a rope base of 10, which turns
the pairs its M-RoPE leaves still (angle 0) fast elsewhere; ernie4_5, ernie4_5-moe, and ernie4_5-moe-opt with the
optional biases and a wider shared expert; hunyuan-moe; minimax-m2-opt with heads of 128 on a
dim of 256 (4 heads: q and the whole-projection norms twice the embedding)) and
weight types F32, Q8_0 and Q4_K (and gpt-oss in MXFP4; qwen3moe and gemma3 in Q2_K and Q3_K too), a small synthetic model is made with `sluice mkmodel`, run by
`sluice eval` and by the reference on the same 12 tokens, and compared.

Contract of `sluice eval` relied on (tools/commands/eval.c):
    sluice eval -m FILE --tokens 1,17,300 --logits-out OUT [--placement P] [--gpu-layers N]
  writes float32 little-endian logits, one row of n_vocab per token position, no header
  (exactly n_tokens * n_vocab * 4 bytes). Placements (when `sluice eval --help` lists
  --placement): cpu, gpu, layers (with --gpu-layers 1: a split model), experts-cpu; each is
  run with SLUICE_DEVICE=sim unless SLUICE_DEVICE is set in the environment (e.g. cuda on the
  GPU machine).

Error measure, per position t: rel_t = max_v |engine[t, v] - ref[t, v]| / max_v |ref[t, v]|,
and the check is max_t rel_t <= tolerance: 1e-4 for F32 weights, 1e-2 for quantized weights
(the reference runs on the same weights dequantized, so what remains is the engine's float32
arithmetic and any activation quantization its kernels do). The reference is float64, so the
measure is the engine's error, not a symmetric difference.

The test fails (never skips) when `sluice eval` is missing: the Bazel target is tagged manual
until the command exists.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_forward as rf  # noqa: E402

# deepseek2-kv_b: deepseek2 in the legacy attn_kv_b layout (mkmodel --legacy-kv-b)
ARCHS = ("llama", "mixtral", "qwen3moe", "olmoe", "qwen2moe", "gemma3", "gpt-oss", "deepseek2",
         "deepseek2-kv_b", "qwen2", "qwen3", "gemma2", "granite", "phi3", "qwen3next", "llama-opt",
         "granite-opt", "phi3-opt", "qwen2-opt", "deepseek2-opt", "glm4moe", "glm4moe-opt",
         "qwen35", "qwen35moe", "minimax-m2", "dots1", "bailingmoe2", "bailingmoe2-opt",
         "qwen3vl", "qwen3vlmoe", "qwen3vlmoe-opt", "ernie4_5", "ernie4_5-moe",
         "ernie4_5-moe-opt", "hunyuan-moe", "minimax-m2-opt")
# ARCH-opt: the optional tensors llama.cpp loads (mkmodel --biases), and LongRoPE where the
# arch reads it: llama over an original context of 64 (eval's 12-token context: the short
# factors), granite and phi3 over 8 (the long ones); deepseek2: Mistral Large 3's attention
# temperature over 4 positions (3 steps of it in the 12 tokens)
OPT = {"llama": ["--biases", "--longrope", "64"], "granite": ["--biases", "--longrope", "8"],
       "phi3": ["--biases", "--longrope", "8"], "qwen2": ["--biases"],
       "deepseek2": ["--attn-temp", "4"], "glm4moe": ["--qk-norm", "--nextn", "1"],
       "bailingmoe2": ["--nextn", "1", "--shared-ffn", "512"],
       "ernie4_5-moe": ["--biases", "--shared-ffn", "512"],
       "qwen3vlmoe": ["--rope-theta", "10"], "minimax-m2": ["--head-dim", "128"]}
DENSE = ("llama", "gemma3", "qwen2", "qwen3", "gemma2", "granite", "phi3", "qwen35", "qwen3vl",
         "ernie4_5")
TYPES = {"F32": 1e-4, "Q8_0": 1e-2, "Q4_K": 1e-2}
# deepseek2 (issue 15) is held to 1e-5 with F32 weights
TOL_ARCH = {("deepseek2", "F32"): 1e-5, ("deepseek2-kv_b", "F32"): 1e-5,
            ("deepseek2-opt", "F32"): 1e-5}
# gpt-oss as its real files store it (mkmodel --type MXFP4: experts MXFP4, the rest Q8_0)
# and the 2-3 bit K-quants (Q2_K / Q3_K) on a MoE and a dense architecture
EXTRA = {"gpt-oss": {"MXFP4": 1e-2}, "qwen3moe": {"Q2_K": 1e-2, "Q3_K": 1e-2},
         "gemma3": {"Q2_K": 1e-2, "Q3_K": 1e-2}}
# 12 tokens: more than gemma3's and gpt-oss's default sliding window (8), so local layers
# mask old keys
TOKENS = [1, 17, 300, 5, 9, 100, 200, 300, 400, 7, 8, 9]
PLACEMENTS = (("cpu", []), ("gpu", []), ("layers", ["--gpu-layers", "1"]),
              ("experts-cpu", []))

FAILURES = []


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)
    return cond


def rel_error(got, ref):
    """Per-position max |got - ref| / max |ref|; returns (max over positions, worst position)."""
    r = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    return float(r.max()), int(r.argmax())


def eval_help(sluice):
    r = subprocess.run([sluice, "eval", "--help"], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def mkmodel_args(arch, ty):
    # dim/ffn 256: whole K-quant super-blocks; gemma3 keeps its 6 layers (layer 5 global)
    if arch == "deepseek2-kv_b":
        return mkmodel_args("deepseek2", ty) + ["--legacy-kv-b"]
    if arch.endswith("-opt"):
        return mkmodel_args(arch[:-4], ty) + OPT[arch[:-4]]
    a = ["--arch", arch, "--dim", "256", "--ffn", "256", "--type", ty]
    if arch in ("deepseek2", "glm4moe", "dots1", "bailingmoe2", "ernie4_5-moe"):
        # 8 experts (deepseek2, bailingmoe2: 4 groups of 2), 2 used; 3 layers: the leading
        # dense one and two MoE
        return a + ["--experts", "8", "--top-k", "2", "--layers", "3"]
    if arch not in DENSE:
        a += ["--experts", "4", "--top-k", "2"]
    if arch in ("qwen3next", "qwen35", "qwen35moe"):  # 3 DeltaNet layers, then attention
        a += ["--layers", "4"]
    elif arch != "gemma3":
        a += ["--layers", "2"]
    return a


def run_eval(sluice, model, out, placement_args, env):
    cmd = [sluice, "eval", "-m", model, "--tokens", ",".join(map(str, TOKENS)),
           "--logits-out", out, "-ctk", "f32", *placement_args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return r, cmd


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    sluice = sys.argv[1]
    quick = "--quick" in sys.argv[2:]
    tmp = tempfile.mkdtemp(prefix="logits_vs_reference.", dir=os.environ.get("TEST_TMPDIR"))

    rc, help_text = eval_help(sluice)
    if rc != 0:
        print(f"FAIL `sluice eval --help` exited {rc}: {help_text.strip()[:400]}\n"
              "This test needs the `eval` command (tools/commands/eval.c) with the contract in this "
              "file's docstring.")
        return 1
    placements = [("default", [])]
    if "--placement" in help_text:
        placements = [(name, ["--placement", name, *extra]) for name, extra in PLACEMENTS]
    else:
        print("note: `sluice eval --help` does not list --placement; running the default "
              "placement only")
    env = dict(os.environ)
    env.setdefault("SLUICE_DEVICE", "sim")

    types = {"F32": TYPES["F32"], "Q4_K": TYPES["Q4_K"]} if quick else TYPES
    worst = {}
    archs = [a for a in sys.argv[2:] if a in ARCHS] or ARCHS
    for arch in archs:
        for ty, tol in {**types, **EXTRA.get(arch, {})}.items():
            tol = TOL_ARCH.get((arch, ty), tol)
            model = os.path.join(tmp, f"{arch}-{ty}.gguf")
            r = subprocess.run([sluice, "mkmodel", *mkmodel_args(arch, ty), "-o", model],
                               capture_output=True, text=True)
            if not expect(r.returncode == 0, f"{arch} {ty}: mkmodel: {r.stderr.strip()}"):
                continue
            ref_model = rf.load(model)
            ref = ref_model.forward(TOKENS)
            n_vocab = ref_model.n_vocab
            for pname, pargs in placements:
                label = f"{arch} {ty} placement {pname}"
                out = os.path.join(tmp, f"{arch}-{ty}-{pname}.f32")
                if os.path.exists(out):
                    os.remove(out)
                r, cmd = run_eval(sluice, model, out, pargs, env)
                if not expect(r.returncode == 0,
                              f"{label}: `{' '.join(cmd)}` exited {r.returncode}: "
                              f"{r.stderr.strip()[-600:]}"):
                    continue
                want_bytes = len(TOKENS) * n_vocab * 4
                size = os.path.getsize(out) if os.path.exists(out) else -1
                if not expect(size == want_bytes,
                              f"{label}: --logits-out has {size} bytes, want {want_bytes} "
                              f"({len(TOKENS)} tokens x {n_vocab} float32)"):
                    continue
                got = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(TOKENS),
                                                                               n_vocab)
                if not expect(np.all(np.isfinite(got)), f"{label}: non-finite logits"):
                    continue
                err, pos = rel_error(got, ref)
                worst[(arch, ty)] = max(worst.get((arch, ty), 0.0), err)
                expect(err <= tol, f"{label}: max relative error {err:.3e} (position {pos}, "
                       f"argmax engine {int(got[pos].argmax())} ref {int(ref[pos].argmax())})"
                       f" <= {tol:g}")

    print("\nworst relative error per arch and type:")
    for (arch, ty), e in sorted(worst.items()):
        print(f"  {arch:9s} {ty:5s} {e:.3e}")
    if FAILURES:
        print(f"\n{len(FAILURES)} failures")
        return 1
    print("\nall logits match the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
