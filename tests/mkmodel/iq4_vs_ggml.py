"""Manual check (issue 28): kernels/ref/quant's IQ4_NL / IQ4_XS quantizers against ggml's own
object code, byte for byte.

usage: python iq4_vs_ggml.py QUANT_TOOL [--peer BUILD_DIR]

gguf-py has no IQ4 quantizer and the peer build has no llama-quantize, so this compiles a tiny
harness against the peer's libggml-base.a (BUILD_DIR/ggml/src, default: $SLUICE_PEER_LLAMA_BUILD,
else .peer/build-0.3.36-cpu, with the llama.cpp sources beside it as tools/peer/llama.cpp lays
them out) and calls ggml_quantize_chunk(GGML_TYPE_IQ4_NL / IQ4_XS, ..., imatrix NULL): the same
quantize_iq4_nl / quantize_iq4_xs that llama-quantize runs. QUANT_TOOL is
//tests/mkmodel:quant_tool. Data: Gaussian rows at several scales with outliers, an all-zero
super-block, a block below ggml's GROUP_MAX_EPS, uniform positive data, constants. Not a Bazel
target (CI has no peer). Exit 0 iff every case is byte-identical.
Measured 2026-11-29 (llama.cpp 0.3.36's ggml): every case identical.
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


def cases(rng):
    per = 256
    for scale in (1.0, 1e-3, 37.0, 3e4):
        x = (rng.standard_normal(per * 48) * scale).astype(np.float32)
        x[::97] *= 20.0
        x[per * 3:per * 4] = 0.0
        x[per * 5:per * 5 + 32] = 1e-20  # below GROUP_MAX_EPS: a zero block scale
        yield f"gaussian x{scale:g}", x
    yield "uniform [5, 6)", (5.0 + rng.random(per * 16)).astype(np.float32)
    yield "constant -0.75", np.full(per * 4, -0.75, np.float32)
    yield "one spike", np.where(np.arange(per * 4) == 300, 9.0, 0.0).astype(np.float32)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    tool, rest = args[0], args[1:]
    build = os.environ.get("SLUICE_PEER_LLAMA_BUILD", ".peer/build-0.3.36-cpu")
    if rest[:1] == ["--peer"]:
        build = rest[1]
    lib = os.path.join(build, "ggml", "src", "libggml-base.a")
    inc = None
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_HOME_DIRECTORY:") or line.startswith("llama_SOURCE_DIR:"):
                src = line.split("=", 1)[1].strip()
                for cand in (os.path.join(src, "ggml", "include"),
                             os.path.join(src, "vendor", "llama.cpp", "ggml", "include")):
                    if os.path.exists(os.path.join(cand, "ggml.h")):
                        inc = cand
    if not os.path.exists(lib) or not inc:
        print(f"no libggml-base.a / ggml.h for {build} (tools/peer/llama.cpp builds them)")
        return 2
    tmp = tempfile.mkdtemp(prefix="iq4_vs_ggml.")
    harness = os.path.join(tmp, "harness")
    with open(harness + ".c", "w") as f:
        f.write(HARNESS)
    subprocess.run(["cc", "-O2", "-I", inc, harness + ".c", lib, "-lm", "-lpthread", "-lstdc++",
                    "-fopenmp", "-o", harness], check=True)
    rng = np.random.default_rng(28)
    ok = True
    src, ours, theirs = (os.path.join(tmp, n) for n in ("in.f32", "ours.bin", "ggml.bin"))
    for label, x in cases(rng):
        x.tofile(src)
        for name, code in TYPES.items():
            subprocess.run([harness, str(code), str(x.size), "256", src, theirs], check=True)
            subprocess.run([tool, "quant", name, "256", src, ours], check=True)
            a, b = open(ours, "rb").read(), open(theirs, "rb").read()
            if a == b:
                print(f"ok   {name} {label} ({len(a)} bytes)")
            else:
                ok = False
                diff = [i for i in range(min(len(a), len(b))) if a[i] != b[i]]
                print(f"FAIL {name} {label}: sizes {len(a)}/{len(b)}, {len(diff)} bytes differ, "
                      f"first at {diff[0] if diff else '-'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
