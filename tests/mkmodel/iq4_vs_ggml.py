"""kernels/ref/quant's IQ4_NL / IQ4_XS quantizers (issue 28) byte for byte against llama.cpp's
quantize_iq4_nl / quantize_iq4_xs (ggml-quants.c's quantize_row_iq4_nl_impl, ntry 7, no
importance matrix: what llama-quantize runs).

usage: iq4_vs_ggml.py QUANT_TOOL [--peer BUILD_DIR]

gguf-py has no IQ4 quantizer, so the reference is twofold:
- always: a numpy port of quantize_row_iq4_nl_impl below, float32 operation for operation
  (numpy's float32 ops round as C's do without FMA, as ggml-base is built: no -mfma);
- where a peer build is found (BUILD_DIR, default $SLUICE_PEER_LLAMA_BUILD, else
  .peer/build-0.3.36-cpu; tools/peer/llama.cpp builds it): ggml's own object code, a tiny
  harness compiled against BUILD_DIR/ggml/src/libggml-base.a calling ggml_quantize_chunk (the
  peer build has no llama-quantize); the numpy port is checked against it too.
QUANT_TOOL is //tests/mkmodel:quant_tool. Data: Gaussian rows at several scales with outliers, an
all-zero super-block, a block below ggml's GROUP_MAX_EPS, uniform positive data, constants, a
lone spike. Exit 0 iff every comparison is byte-identical.
Measured 2026-11-29 (llama.cpp 0.3.36's ggml): every case identical, on both references.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ggml.h"
int main(int argc, char **argv) {
    const int type = atoi(argv[1]);
    const long n = atol(argv[2]), per = atol(argv[3]);
    float *x = malloc(n * sizeof *x);
    void *q = malloc(n * 2);
    FILE *f = fopen(argv[4], "rb");
    if (!x || !q || !f || fread(x, sizeof *x, n, f) != (size_t)n) return 1;
    fclose(f);
    const size_t bytes = ggml_quantize_chunk(type, x, q, 0, n / per, per, NULL);
    f = fopen(argv[5], "wb");
    if (!f || fwrite(q, 1, bytes, f) != bytes) return 1;
    return fclose(f) != 0;
}
"""
TYPES = {"IQ4_NL": 20, "IQ4_XS": 23}  # ggml_type codes

# ---- the numpy port of quantize_row_iq4_nl_impl (ggml-quants.c), blocks side by side ---------

KV = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
              np.float32)  # kvalues_iq4nl
F = np.float32


def best_index(x):
    """best_index_int8(16, kvalues_iq4nl, x), element-wise: its binary search, then the nearer
    neighbour (the lower one unless strictly farther), with its float32 differences."""
    ml = np.zeros(x.shape, np.int64)
    mu = np.full(x.shape, 15, np.int64)
    while True:
        act = mu - ml > 1
        if not act.any():
            break
        mav = (ml + mu) // 2
        lt = x < KV[mav]
        mu = np.where(act & lt, mav, mu)
        ml = np.where(act & ~lt, mav, ml)
    r = np.where((x - KV[mu - 1]) < (KV[mu] - x), mu - 1, mu)
    return np.where(x <= KV[0], 0, np.where(x >= KV[15], 15, r))


def fit(xb, idv):
    """sum w q x and sum w q^2 (w = x^2) in ggml's order: j = 0..31, one rounding per op."""
    sx = np.zeros(len(xb), F)
    s2 = np.zeros(len(xb), F)
    for j in range(32):
        q = KV[best_index(idv * xb[:, j])]
        wq = (xb[:, j] * xb[:, j]) * q
        sx = sx + wq * xb[:, j]
        s2 = s2 + wq * q
    return sx, s2


def block_scales(xb):
    """The scale each 32-element block of xb [n, 32] settles on (ntry 7)."""
    rows = np.arange(len(xb))
    i = np.abs(xb).argmax(1)  # the first of equal magnitudes, as ggml's strict >
    amax, mx = np.abs(xb)[rows, i], xb[rows, i]
    with np.errstate(all="ignore"):
        d = -mx / KV[0]
        sx, s2 = fit(xb, F(1) / d)
        d = np.where(s2 > 0, sx / s2, F(0)).astype(F)
        best = d * sx
        for itry in range(-7, 8):
            sx, s2 = fit(xb, F(itry - 127) / mx)
            take = (s2 > 0) & (sx * sx > best * s2)
            dn = sx / s2
            d, best = np.where(take, dn, d), np.where(take, dn * sx, best)
    return np.where(amax < F(1e-15), F(0), d).astype(F)


def inverse(d):
    with np.errstate(all="ignore"):
        return np.where(d != 0, F(1) / d, F(0)).astype(F)


def pack(L):
    """[n, 32] indices -> [n, 16] bytes: element j low nibble, j + 16 high."""
    return (L[:, :16] | (L[:, 16:] << 4)).astype(np.uint8)


def np_iq4_nl(x):
    xb = x.reshape(-1, 32)
    d = block_scales(xb)
    out = np.zeros((len(xb), 18), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = pack(best_index(inverse(d)[:, None] * xb))
    return out.tobytes()


def np_iq4_xs(x):
    xs = x.reshape(-1, 256)
    n = len(xs)
    sc = block_scales(xs.reshape(-1, 32)).reshape(n, 8)
    d = -sc[np.arange(n), np.abs(sc).argmax(1)] / F(32)
    ls = np.clip(np.rint(inverse(d)[:, None] * sc).astype(np.int64), -32, 31)  # nearest_int
    idl = inverse(d[:, None] * ls.astype(F))
    L = best_index(idl[:, :, None] * xs.reshape(n, 8, 32))
    u = ls + 32
    out = np.zeros((n, 136), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    sh = np.zeros(n, np.uint16)
    for ib in range(8):
        sh |= (u[:, ib] >> 4).astype(np.uint16) << (2 * ib)
    out[:, 2:4] = sh.view(np.uint8).reshape(-1, 2)
    out[:, 4:8] = (u[:, 0::2] & 15) | ((u[:, 1::2] & 15) << 4)
    out[:, 8:] = pack(L.reshape(-1, 32)).reshape(n, 128)
    return out.tobytes()


NUMPY = {"IQ4_NL": np_iq4_nl, "IQ4_XS": np_iq4_xs}


def cases(rng):
    per = 256
    for scale in (1.0, 1e-3, 37.0, 3e4):
        x = (rng.standard_normal(per * 24) * scale).astype(np.float32)
        x[::97] *= 20.0
        x[per * 3:per * 4] = 0.0
        x[per * 5:per * 5 + 32] = 1e-20  # below GROUP_MAX_EPS: a zero block scale
        yield f"gaussian x{scale:g}", x
    yield "uniform [5, 6)", (5.0 + rng.random(per * 8)).astype(np.float32)
    yield "constant -0.75", np.full(per * 4, -0.75, np.float32)
    yield "one spike", np.where(np.arange(per * 4) == 300, 9.0, 0.0).astype(np.float32)


def ggml_harness(build, tmp):
    """The harness binary over the peer's libggml-base.a, or None (no peer here)."""
    lib = os.path.join(build, "ggml", "src", "libggml-base.a")
    inc = None
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                cand = os.path.join(line.split("=", 1)[1].strip(), "ggml", "include")
                if os.path.exists(os.path.join(cand, "ggml.h")):
                    inc = cand
    if not os.path.exists(lib) or not inc:
        return None
    harness = os.path.join(tmp, "harness")
    with open(harness + ".c", "w") as f:
        f.write(HARNESS)
    r = subprocess.run(["cc", "-O2", "-I", inc, harness + ".c", lib, "-lm", "-lpthread",
                        "-lstdc++", "-fopenmp", "-o", harness], capture_output=True, text=True)
    if r.returncode:
        print(f"note: the ggml harness does not build ({r.stderr.strip()[-300:]})")
        return None
    return harness


def compare(what, a, b):
    if a == b:
        print(f"ok   {what} ({len(a)} bytes)")
        return True
    diff = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
    print(f"FAIL {what}: sizes {len(a)}/{len(b)}, {len(diff)} bytes differ, first at "
          f"{diff[0] if diff else '-'}")
    return False


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    tool, rest = args[0], args[1:]
    build = os.environ.get("SLUICE_PEER_LLAMA_BUILD", ".peer/build-0.3.36-cpu")
    if rest[:1] == ["--peer"]:
        build = rest[1]
    tmp = tempfile.mkdtemp(prefix="iq4_vs_ggml.", dir=os.environ.get("TEST_TMPDIR"))
    harness = ggml_harness(build, tmp)
    print(f"references: numpy port{', ggml (' + build + ')' if harness else ' (no peer build)'}")
    rng = np.random.default_rng(28)
    ok = True
    src, ours, theirs = (os.path.join(tmp, n) for n in ("in.f32", "ours.bin", "ggml.bin"))
    for label, x in cases(rng):
        x.tofile(src)
        for name, code in TYPES.items():
            subprocess.run([tool, "quant", name, "256", src, ours], check=True)
            with open(ours, "rb") as f:
                a = f.read()
            ok &= compare(f"{name} {label}: ours == numpy port", a, NUMPY[name](x))
            if harness:
                subprocess.run([harness, str(code), str(x.size), "256", src, theirs], check=True)
                with open(theirs, "rb") as f:
                    ok &= compare(f"{name} {label}: ours == ggml", a, f.read())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
