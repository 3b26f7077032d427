"""sl_fuzz_target: one fuzz entry point (LLVMFuzzerTestOneInput), two ways to run it.

  * `bazel build --config=fuzz //pkg:name`: a libFuzzer binary (ASan + UBSan), for fuzzing.
  * any other config: the same sources linked with //tests/fuzz:standalone_main, which replays
    the files (and directories of files) given as arguments.
  * `name + "_regression"`: a test that runs the binary over every corpus file, so the seed and
    crash-reproducer corpus stays green in `bazel test //...` (and under --config=asan).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary")

def sl_fuzz_target(name, srcs, deps = [], corpus = [], copts = [], size = "small", tags = [], **kwargs):
    """Declares fuzz binary `name` and test `name + "_regression"`.

    Args:
      name: binary name.
      srcs: C sources; one defines `int LLVMFuzzerTestOneInput(const uint8_t *, size_t)`.
      deps: libraries under test.
      corpus: labels of corpus files (e.g. glob(["corpus/**"])); replayed by the regression test.
      copts: extra compiler options.
      size: size of the regression test.
      tags: tags of both targets.
      **kwargs: passed to the cc_binary.
    """
    cc_binary(
        name = name,
        srcs = srcs,
        copts = copts,
        deps = deps + select({
            "//bazel:fuzz": [],
            "//conditions:default": ["//tests/fuzz:standalone_main"],
        }),
        linkopts = select({
            "//bazel:fuzz": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = tags,
        **kwargs
    )
    native.sh_test(
        name = name + "_regression",
        size = size,
        srcs = ["//bazel:fuzz_regression.sh"],
        data = [":" + name] + corpus,
        args = ["$(rootpath :%s)" % name] + ["$(rootpath %s)" % c for c in corpus],
        tags = tags,
    )
