"""Bit-exact check of kernels/ref dequantizers (and the quantizers gguf-py shares) vs gguf-py.

usage: dequant_vs_gguf_py.py QUANT_TOOL

For every type both sides implement, blocks are dequantized by ours (QUANT_TOOL, one row at a
time through sl_quant_dequant_row) and by gguf.quants.dequantize, and the float32 results are
compared as uint32 bit patterns. Block sources, per type:
  - gguf-py's quantizer where it has one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4);
    for Q4_1/Q5_0/Q5_1 (which we also quantize) our packed bytes must equal gguf-py's too;
  - our quantizer where gguf-py has none (Q4_K, Q5_K, Q6_K, Q8_K, Q8_1);
  - always also random bytes with the scale fields sanitised to finite values (every other bit
    pattern of a block is legal: grid indices, signs, sub-scales), so every codebook entry and
    bit position gets hit.
Rows of exactly one block and rows of many blocks are both covered.

NaN policy: scales are made finite, so no NaN can arise except from formats whose scale cannot
be NaN anyway; positions that are NaN on both sides would count as equal (payloads may differ
between numpy and C operand orders), positions NaN on one side only are failures.

Types gguf-py does not implement are checked against a numpy model of ggml's C code written
here: Q8_1 and Q8_K (x = d * q), I8/I16/I32/I64/F64 (C conversion to float, i.e. numpy astype).
"""
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

TOOL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dequant_vs_gguf_py.", dir=os.environ.get("TEST_TMPDIR"))
FAILURES = []
RNG = np.random.default_rng(20240601)

# Byte offsets of the IEEE-half scale fields inside each block (ggml-common.h layouts).
HALF_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q8_1": [0, 2],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0], "IQ1_S": [0],
    "IQ4_NL": [0], "IQ4_XS": [0], "TQ1_0": [52], "TQ2_0": [64],
    "IQ1_M": [], "MXFP4": [], "NVFP4": [], "Q8_K": [],
}


def sizes(tname):
    """(block elements, block bytes). gguf-py's GGML_QUANT_SIZES says 40 bytes for Q8_1 (the
    old float d, s layout); ggml's block_q8_1 holds two halves: 36 (see gguf/types.c)."""
    if tname == "Q8_1":
        return 32, 36
    return GGML_QUANT_SIZES[T[tname]]


def run_tool(mode, tname, row, data: bytes) -> bytes:
    src, dst = os.path.join(TMP, "in.bin"), os.path.join(TMP, "out.bin")
    with open(src, "wb") as f:
        f.write(data)
    subprocess.run([TOOL, mode, tname, str(row), src, dst], check=True)
    with open(dst, "rb") as f:
        return f.read()


def fail(msg):
    FAILURES.append(msg)
    print("FAIL " + msg)


def check_floats(name, ours: bytes, ref: np.ndarray):
    ref = np.ascontiguousarray(ref, dtype=np.float32).ravel()
    a = np.frombuffer(ours, np.float32)
    if a.size != ref.size:
        return fail(f"{name}: {a.size} floats != {ref.size}")
    ua, ub = a.view(np.uint32), ref.view(np.uint32)
    both_nan = np.isnan(a) & np.isnan(ref)
    bad = (ua != ub) & ~both_nan
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        return fail(f"{name}: {int(bad.sum())} of {a.size} floats differ, first at {i}: "
                    f"ours {a[i]!r} ({ua[i]:#010x}) ref {ref[i]!r} ({ub[i]:#010x})")
    print(f"ok   {name} ({a.size} floats{', %d NaN' % both_nan.sum() if both_nan.any() else ''})")


def check_bytes(name, ours: bytes, ref: bytes):
    if ours == ref:
        print(f"ok   {name} ({len(ref)} bytes)")
        return
    a, b = np.frombuffer(ours, np.uint8), np.frombuffer(ref, np.uint8)
    if a.size != b.size:
        return fail(f"{name}: {a.size} bytes != {b.size}")
    i = int(np.nonzero(a != b)[0][0])
    fail(f"{name}: {int((a != b).sum())} bytes differ, first at {i}: ours {a[i]:#x} ref {b[i]:#x}")


def finite_halves(n) -> np.ndarray:
    """n random finite halves (bits), incl. subnormals and zeros, both signs."""
    h = RNG.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    h[(h & 0x7C00) == 0x7C00] &= 0xBFFF  # exponent 31 (inf/NaN) -> exponent 15
    return h


def random_blocks(tname, n_blocks) -> np.ndarray:
    bs = sizes(tname)[1]
    b = RNG.integers(0, 256, size=(n_blocks, bs), dtype=np.uint16).astype(np.uint8)
    for off in HALF_FIELDS[tname]:
        b[:, off:off + 2] = finite_halves(n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if tname == "IQ1_M":
        # the half scale is the top nibble of the 4 scale words (bytes 48..55); its exponent's
        # top bit is bit 14 of the half = bit 6 of byte 55 (top nibble of word 3, bit 2)
        sc = b[:, 48:56].copy().view(np.uint16)
        d = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0xF0) | ((sc[:, 2] >> 4) & 0xF00) | (sc[:, 3] & 0xF000)
        inf_nan = (d & 0x7C00) == 0x7C00
        b[inf_nan, 55] &= 0xBF
    if tname == "Q8_K":
        d = (RNG.standard_normal(n_blocks) * 10.0 ** RNG.integers(-8, 8, n_blocks)).astype(np.float32)
        b[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    return b


def gguf_deq(blocks: np.ndarray, qtype, row_blocks: int) -> np.ndarray:
    rows = blocks.reshape(-1, row_blocks * blocks.shape[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dequantize(np.ascontiguousarray(rows), qtype).astype(np.float32, copy=False)


def model_deq(tname, blocks: np.ndarray) -> np.ndarray:
    """Our reading of ggml for the types gguf-py lacks: x = d * q."""
    if tname == "Q8_1":
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (blocks[:, 4:].view(np.int8).astype(np.float32) * d)
    if tname == "Q8_K":
        d = blocks[:, 0:4].copy().view(np.float32)
        return (d * blocks[:, 4:260].view(np.int8).astype(np.float32))
    raise AssertionError(tname)


def compare_dequant(tname, blocks: np.ndarray, label: str):
    """blocks: (n, type_size) uint8. Rows of 1 block and of several blocks."""
    qtype = T[tname]
    bsz = sizes(tname)[0]
    n = blocks.shape[0]
    for row_blocks in sorted({1, 8 if n % 8 == 0 else 1}):
        data = np.ascontiguousarray(blocks).tobytes()
        ours = run_tool("dequant", tname, row_blocks * bsz, data)
        if tname in ("Q8_1", "Q8_K"):
            ref = model_deq(tname, blocks)
        else:
            ref = gguf_deq(blocks, qtype, row_blocks)
        check_floats(f"{tname:8} dequant {label}, rows of {row_blocks} block(s)", ours, ref)


def quant_ours(tname, x: np.ndarray, row: int) -> np.ndarray:
    out = run_tool("quant", tname, row, np.ascontiguousarray(x, np.float32).tobytes())
    return np.frombuffer(out, np.uint8).reshape(-1, sizes(tname)[1])


def sample_data(bsz: int) -> list:
    """(label, data) pairs, each a whole number of 8-block rows of bsz."""
    out = []
    for scale in (1.0, 1e-3, 3e3):
        out.append((f"normal*{scale:g}", RNG.standard_normal((16, 8 * bsz)) * scale))
    x = RNG.standard_normal((8, 8 * bsz))
    x[:, ::13] *= 40
    out.append(("outliers", x))
    out.append(("uniform>0", RNG.uniform(0.5, 2.0, (8, 8 * bsz))))
    z = np.zeros((1, 8 * bsz))
    z[0, bsz:2 * bsz] = 1.0                     # constant block
    z[0, 2 * bsz + 3] = -5.0                    # single spike
    z[0, 3 * bsz:4 * bsz] = np.linspace(-1, 1, bsz)
    out.append(("edge blocks", z))
    return [(lbl, np.asarray(v, dtype=np.float32)) for lbl, v in out]


def main():
    # 1. types gguf-py can quantize: its blocks, dequantized by both; and our bytes where we
    #    quantize the same type (Q4_0/Q8_0 bytes are checked in tests/mkmodel/quant_vs_gguf_py).
    for tname in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4"):
        qtype = T[tname]
        bsz = GGML_QUANT_SIZES[qtype][0]
        for label, x in sample_data(bsz):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = np.ascontiguousarray(quantize(x, qtype)).view(np.uint8)
            blocks = ref.reshape(-1, GGML_QUANT_SIZES[qtype][1])
            if tname in ("Q4_1", "Q5_0", "Q5_1"):
                check_bytes(f"{tname:8} quant   {label}", quant_ours(tname, x, 8 * bsz).tobytes(),
                            blocks.tobytes())
            compare_dequant(tname, blocks, f"gguf-py blocks {label}")

    # 2. types only we quantize: our blocks dequantized by both
    for tname in ("Q4_K", "Q5_K", "Q6_K", "Q8_K", "Q8_1"):
        bsz = sizes(tname)[0]
        for label, x in sample_data(bsz):
            compare_dequant(tname, quant_ours(tname, x, 8 * bsz), f"our blocks {label}")

    # 3. every dequantizable block type on random (sanitised) bytes
    for tname in HALF_FIELDS:
        for n in (1, 512):
            compare_dequant(tname, random_blocks(tname, n), f"random bytes x{n}")

    # 4. integer and F64 element types: C conversion == numpy astype (round to nearest even)
    ints = {
        "I8": RNG.integers(-128, 128, 4096).astype(np.int8),
        "I16": RNG.integers(-2**15, 2**15, 4096).astype(np.int16),
        "I32": RNG.integers(-2**31, 2**31, 4096, dtype=np.int64).astype(np.int32),
        "I64": (RNG.integers(-2**62, 2**62, 4096, dtype=np.int64)
                >> RNG.integers(0, 62, 4096).astype(np.int64)),
        "F64": np.concatenate([RNG.standard_normal(4000) * 10.0 ** RNG.integers(-50, 50, 4000),
                               [1e300, -1e300, 1e-300, 3.4028235677973366e38, np.inf, -np.inf,
                                0.0, -0.0, 1 + 2**-24, 1 + 3 * 2**-24],
                               np.zeros(86)]),
    }
    ints["I32"][:4] = [2**31 - 1, -2**31, 2**24 + 1, 2**24 + 3]
    ints["I64"][:4] = [2**63 - 1, -2**63, 2**53 + 1, -(2**40 + 2**16 + 1)]
    for tname, v in ints.items():
        v = np.ascontiguousarray(v)
        ours = run_tool("dequant", tname, v.size, v.tobytes())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_floats(f"{tname:8} convert", ours, v.astype(np.float32))

    if FAILURES:
        print(f"\n{len(FAILURES)} mismatches")
        return 1
    print("\nall bit-exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
