"""cuda_library: CUDA C++ (.cu) compiled by nvcc, usable from C cc_library/cc_binary targets.

Each .cu file is compiled by a genrule running /usr/local/cuda/bin/nvcc (sm_90, H100) into an
object file; the objects go into a cc_library that also depends on @cuda//:cuda, so C callers
get <cuda_runtime.h> on their include path and link the CUDA runtime statically (see
third_party/cuda.BUILD: no CUDA shared library is loaded at start-up; cuBLAS is dlopened on
first use by kernels/cuda/blas.h). Sources include headers relative to the workspace root
("runtime/...").
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = [
    "-c",
    "-O2",
    "-std=c++17",
    "-Xcompiler",
    "-fPIC",
    # hidden like the C code (.bazelrc): libsluice.so exports runtime/sluice.h only
    "-Xcompiler",
    "-fvisibility=hidden",
    "-gencode",
    "arch=compute_90,code=sm_90",
]

def _transitive_headers_impl(ctx):
    hdrs = [d[CcInfo].compilation_context.headers for d in ctx.attr.deps]
    return [DefaultInfo(files = depset(transitive = hdrs))]

# All headers of the given cc deps (transitively), so nvcc sees them inside the sandbox.
_transitive_headers = rule(
    implementation = _transitive_headers_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None, tags = [], **kwargs):
    """Declares cc_library `name` built from CUDA sources.

    Args:
      name: the cc_library's name.
      srcs: .cu files (each compiled separately by nvcc). Private .cuh/.h headers may be
        listed here too; they are inputs of every nvcc run.
      hdrs: public headers (C-callable API), also visible to nvcc.
      deps: cc_library deps; their headers are visible to nvcc and they are linked.
      copts: extra nvcc options (e.g. ["-lineinfo"], ["-DFOO=1"]).
      visibility: of the cc_library.
      tags: of every target.
      **kwargs: passed to the cc_library.
    """
    cu_srcs = [s for s in srcs if s.endswith(".cu")]
    private_hdrs = [s for s in srcs if not s.endswith(".cu")]
    dep_hdrs = name + "_dep_headers"
    _transitive_headers(name = dep_hdrs, deps = deps, tags = tags, visibility = ["//visibility:private"])

    objs = []
    for src in cu_srcs:
        stem = src[:-len(".cu")].replace("/", "_")
        out = "_cuda_objs/%s/%s.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem),
            srcs = [src] + hdrs + private_hdrs + [":" + dep_hdrs],
            outs = [out],
            cmd = " ".join([NVCC] + NVCC_FLAGS + [
                "-I.",
                "-I$(GENDIR)",
            ] + copts + [
                "-o $@",
                "$(location %s)" % src,
            ]),
            message = "nvcc " + src,
            tags = tags,
            visibility = ["//visibility:private"],
        )
        objs.append(out)

    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@cuda"],  # its linkopts link the CUDA runtime, once per binary
        visibility = visibility,
        tags = tags,
        **kwargs
    )
