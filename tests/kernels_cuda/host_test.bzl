"""sl_cuh_host_test: a CUDA .cuh (kernels/cuda's, or pkg's) run on the CPU through host_shim."""

load("//bazel:defs.bzl", "sl_c_test")

# The headers every kernels/cuda .cuh brings along (common.cuh and what it includes).
_COMMON = [
    "//kernels/cuda:common.cuh",
    "//kernels/cuda:qt_iq.cuh",
    "//kernels/cuda:qx.cuh",
]

def sl_cuh_host_test(name, cuh, src, deps = [], size = "small", includes = [], hdrs = [],
                     pkg = "//kernels/cuda"):
    """A C++ test of <pkg>/<cuh> compiled as host code (cc rules take no .cuh).

    A genrule writes <stem>_cuh.h: the .cuh with its #include "kernels/cuda/*.cuh" lines
    replaced by those files' text, recursively (inline_cuh.awk); the test includes it as
    "tests/kernels_cuda/<stem>_cuh.h", with host_shim/ on its include path (CUDA names as host
    code, kernel launches as host threads: launch.h, WMMA: mma.h).

    Args:
      name: test name.
      cuh: the .cuh's file name in pkg ("common.cuh" for the decoders alone).
      src: the test's .cc.
      deps: cc deps (kernels/ref, gguf, ...).
      size: test size.
      includes: other kernels/cuda .cuh files the .cuh includes (each must be inlined).
      hdrs: kernels/cuda .h files the .cuh includes (C headers: included as they are).
      pkg: the .cuh's package (exporting it). Outside kernels/cuda a .cuh brings none of
        _COMMON along: only the kernels/cuda files in `includes` are inlined.
    """
    stem = cuh[:-len(".cuh")]
    label = pkg + ":" + cuh
    files = (_COMMON if pkg == "//kernels/cuda" else []) + [
        "//kernels/cuda:" + f
        for f in includes
    ]
    files += [] if label in _COMMON else [label]
    native.genrule(
        name = name + "_cuh_h",
        srcs = ["inline_cuh.awk"] + files,
        outs = [stem + "_cuh.h"],
        cmd = ("awk -f $(location inline_cuh.awk) -v files=\"" +
               " ".join(["$(location %s)" % f for f in files]) + "\" $(location " + label +
               ") > $@"),
    )
    sl_c_test(
        name = name,
        size = size,
        srcs = [
            src,
            "host_shim/cuda_bf16.h",
            "host_shim/cuda_fp16.h",
            "host_shim/cuda_runtime.h",
            "host_shim/launch.h",
            "host_shim/mma.h",
            "attn_tol.h",
            "gemv_ref.h",
            "ops_tol.h",
            "rand_weights.h",
            "rng.h",
            "ybuf.h",
            ":" + name + "_cuh_h",
        ] + ["//kernels/cuda:" + h for h in hdrs],
        copts = [
            "-Itests/kernels_cuda/host_shim",
            "-ffp-contract=off",
            "-fno-strict-aliasing",
            "-std=c++17",
        ],
        linkopts = ["-lm", "-pthread"],
        deps = deps,
    )
