"""Bit-exact check of kernels/ref/quant against gguf-py (llama.cpp's numpy quantizers).

usage: quant_vs_gguf_py.py QUANT_TOOL

For F16, BF16, Q8_0, Q4_0 and MXFP4: our packed bytes == gguf.quants.quantize(...) bytes, and our
dequantized floats == gguf.quants.dequantize(...) bit for bit, on random data at several scales and
on edge cases (zeros, +-max, denormals, rounding ties, equal magnitudes of both signs).
F16 is also checked over every float32 pattern class that matters: all 65536 halves widened,
and their midpoints (ties).
"""
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="quant_vs_gguf_py.", dir=os.environ.get("TEST_TMPDIR"))
FAILURES = []


def run_tool(mode, tname, row, data: bytes) -> bytes:
    src, dst = os.path.join(TMP, "in.bin"), os.path.join(TMP, "out.bin")
    with open(src, "wb") as f:
        f.write(data)
    subprocess.run([TOOL, mode, tname, str(row), src, dst], check=True)
    with open(dst, "rb") as f:
        return f.read()


def check(name, ours: bytes, ref: bytes, elem=1):
    if ours == ref:
        print(f"ok   {name} ({len(ref)} bytes)")
        return
    a = np.frombuffer(ours, np.uint8)
    b = np.frombuffer(ref, np.uint8)
    if a.size != b.size:
        FAILURES.append(f"{name}: size {a.size} != {b.size}")
    else:
        idx = np.nonzero(a != b)[0]
        FAILURES.append(f"{name}: {idx.size} bytes differ, first at byte {idx[0]} "
                        f"(element {idx[0] // elem}): ours {a[idx[0]]:#x} ref {b[idx[0]]:#x}")
    print("FAIL " + FAILURES[-1])


def ggml_q4_0_zero_sign(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The one known divergence of gguf-py from ggml's C reference.

    For a Q4_0 block whose elements are all +-0, ggml's quantize_row_q4_0_ref never updates
    `max` (it starts at +0.0f and only changes on a strictly larger magnitude), so
    d = +0 / -8 = -0 (bits 0x8000). gguf-py takes the element at argmax(|x|), i.e. x[0], so a
    block starting with -0.0 gets d = +0. We follow ggml (the code llama.cpp runs); here the
    reference bytes are patched to what ggml produces. Dequantized values are zeros either way.
    """
    ref = np.array(ref, dtype=np.uint8).reshape(-1, 18)
    blocks = x.reshape(-1, 32)
    zero = np.all(blocks == 0, axis=1)
    patched = zero & (ref[:, 1] != 0x80)
    if patched.any():
        print(f"note Q4_0: {int(patched.sum())} all-zero block(s) with a leading -0: "
              "expecting ggml's d = -0, not gguf-py's +0")
    ref[zero, 0] = 0x00
    ref[zero, 1] = 0x80
    return ref


def compare(tname, qtype, x: np.ndarray, row: int, label: str):
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, row)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow/invalid warnings on the edge cases
        ref = quantize(x, qtype)
    if qtype == T.Q4_0:
        ref = ggml_q4_0_zero_sign(x, ref)
    ours = run_tool("quant", tname, row, x.tobytes())
    check(f"{tname} quant   {label}", ours, np.ascontiguousarray(ref).tobytes())
    # dequantize the reference bytes with both, so a quantizer bug cannot mask a dequant bug
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_deq = dequantize(np.ascontiguousarray(ref).view(np.uint8), qtype).astype(np.float32)
    ours_deq = run_tool("dequant", tname, row, np.ascontiguousarray(ref).tobytes())
    check(f"{tname} dequant {label}", ours_deq, ref_deq.tobytes(), elem=4)


def edge_blocks() -> np.ndarray:
    """Hand-made blocks of 32 that hit the branches of the reference algorithms."""
    f32 = np.finfo(np.float32)
    blocks = []
    z = np.zeros(32, np.float32)
    blocks.append(z)
    blocks.append(-z)
    b = z.copy(); b[5] = f32.max; blocks.append(b)
    b = z.copy(); b[5] = -f32.max; b[6] = f32.max; blocks.append(b)
    blocks.append(np.full(32, f32.max, np.float32))
    blocks.append(np.full(32, -f32.max, np.float32))
    b = np.linspace(-65504, 65504, 32, dtype=np.float32); blocks.append(b)
    blocks.append(np.full(32, 65504.0 * 127, np.float32))            # d = 65504 exactly
    blocks.append(np.full(32, 65520.0 * 127, np.float32))            # d rounds to inf
    # denormals: scale so small that 1/d overflows (quants become 0), and mixed with normals
    blocks.append((np.arange(32, dtype=np.uint32) * 3).view(np.float32))
    blocks.append(np.arange(32, dtype=np.uint32).view(np.float32) * np.float32(-1))
    b = (np.arange(32, dtype=np.uint32) * 0x1000).view(np.float32); blocks.append(b)
    b = (np.arange(32, dtype=np.uint32) + 0x00400000).view(np.float32); blocks.append(b)
    b = (np.arange(32, dtype=np.uint32) * 0x10000 + 0x00800000).view(np.float32); blocks.append(b)
    # rounding ties for Q8_0 (d = 1: x.5 values) and Q4_0 (d = 1: x + 8.5 exact)
    b = np.arange(32, dtype=np.float32) - 15.5; b[31] = 127; blocks.append(b)
    b = np.arange(32, dtype=np.float32) * 0.25 - 4; b[0] = -8; blocks.append(b)
    b = np.arange(32, dtype=np.float32) * 0.5 - 8; blocks.append(b)
    # equal magnitudes of both signs: the first one decides the sign of Q4_0's d
    b = z.copy(); b[3] = -2; b[9] = 2; blocks.append(b)
    b = z.copy(); b[3] = 2; b[9] = -2; blocks.append(b)
    # half-precision ties for d: amax chosen so amax/127 and max/-8 fall between halves
    for v in (1.0 + 2**-11, 1.0 + 3 * 2**-11, 2**-25, 3 * 2**-25, 2**-14 - 2**-25):
        blocks.append(np.full(32, np.float32(v) * np.float32(127), np.float32))
        blocks.append(np.full(32, np.float32(v) * np.float32(-8), np.float32))
    return np.stack(blocks).astype(np.float32)


def main():
    rng = np.random.default_rng(1234)
    types = [("F16", T.F16), ("BF16", T.BF16), ("Q8_0", T.Q8_0), ("Q4_0", T.Q4_0),
             ("MXFP4", T.MXFP4)]
    edges = edge_blocks()
    for tname, qtype in types:
        for scale in (1.0, 1e-3, 1e3, 1e-6, 6e4):
            x = rng.standard_normal((64, 256)).astype(np.float32) * np.float32(scale)
            compare(tname, qtype, x, 256, f"random scale={scale:g}")
        x = rng.standard_normal((1, 32)).astype(np.float32)
        compare(tname, qtype, x, 32, "one block")
        # heavy tails and outliers: one large value per block changes d
        x = rng.standard_normal((100, 64)).astype(np.float32)
        x[:, ::17] *= 50
        compare(tname, qtype, x, 64, "outliers")
        compare(tname, qtype, edges, 32, "edge blocks")

    # F16 and BF16 over every 16-bit pattern (NaNs excluded for F16: numpy keeps signalling
    # NaNs signalling while ggml/F16C quiets them; quant_test.c covers that rule), and the
    # exact midpoints between neighbours, which must round to even.
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    hf = h.view(np.float16).astype(np.float32)
    finite = np.isfinite(hf) | np.isinf(hf)
    compare("F16", T.F16, hf[finite][: (finite.sum() // 32) * 32], 32, "all halves")
    with np.errstate(invalid="ignore"):
        mids = ((hf[:-1].astype(np.float64) + hf[1:].astype(np.float64)) / 2)
    ok = np.isfinite(mids) & (np.abs(mids) < 65520) & np.isfinite(hf[:-1]) & np.isfinite(hf[1:])
    m = mids[ok].astype(np.float32)
    compare("F16", T.F16, m[: (m.size // 32) * 32], 32, "half midpoints (ties)")
    bf = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    compare("BF16", T.BF16, bf, 32, "all bf16 incl. NaN")
    bmid = ((np.arange(65536, dtype=np.uint32) << 16) | 0x8000).view(np.float32)
    compare("BF16", T.BF16, bmid, 32, "bf16 midpoints (ties) incl. NaN")
    # random float32 bit patterns (every class: normals, denormals, inf, NaN for BF16)
    bits = rng.integers(0, 2**32, size=32 * 4096, dtype=np.uint64).astype(np.uint32)
    compare("BF16", T.BF16, bits.view(np.float32), 32, "random bit patterns")
    fb = bits.view(np.float32)
    fb = fb[~np.isnan(fb)]
    compare("F16", T.F16, fb[: (fb.size // 32) * 32], 32, "random non-NaN bit patterns")

    if FAILURES:
        print(f"\n{len(FAILURES)} mismatches")
        return 1
    print("\nall bit-exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
