"""Test macros shared by Sluice packages."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def sl_py_test(name, src, data = [], args = [], size = "small", tags = [], **kwargs):
    """A Python test: `python3 <src> <args>` via //tests:run_py.sh (an sh_test).

    The script finds binaries and data through args such as "$(rootpath //tools:sluice)"
    (runfiles-relative; the test runs in the runfiles root). List those labels in `data`.
    python3 comes from the caller's PATH (pyenv with gguf + numpy; see tools/setup).

    Args:
      name: test name.
      src: the .py script.
      data: labels the script needs at run time (binaries, files).
      args: script arguments; $(location)/$(rootpath) of `data` labels are expanded.
      size: test size.
      tags: test tags.
      **kwargs: passed to sh_test (timeout, shard_count, ...).
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests:run_py.sh"],
        data = [src] + data,
        args = ["$(rootpath %s)" % src] + args,
        tags = tags,
        **kwargs
    )

def sl_c_test(name, srcs, deps = [], size = "small", **kwargs):
    """A C test program using tests/testing.h (CHECK macros); main returns sl_test_finish()."""
    cc_test(
        name = name,
        srcs = srcs,
        deps = deps + ["//tests:testing"],
        size = size,
        # Static: test binaries must run alone on the GPU machine (tools/gpu-test).
        linkstatic = True,
        **kwargs
    )
