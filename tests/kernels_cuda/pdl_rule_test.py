"""The programmatic-dependent-launch rule of kernels/cuda (common.cuh, sl_pdl_enter).

A kernel launched with programmatic stream serialisation may start while the kernel before it
on the stream still runs; it is correct only if it waits (griddepcontrol.wait) before touching
memory. kernels/cuda launches every kernel so where the device has it, so the rule is held
over the sources, which CI has even without nvcc:
  - every __global__ function's first statement is sl_pdl_enter();
  - sl_pdl_enter waits before it lets the next kernel be scheduled;
  - no kernel is launched with <<<>>>: every launch goes through sl__cuda_launch, and each
    launched kernel is one of the __global__ functions found.
The checker is first run on sources that break each rule, so a checker that finds nothing
fails too.

usage: pdl_rule_test.py FILE...   (the .cu / .cuh files of kernels/cuda)
"""
import re
import sys

GLOBAL = re.compile(r"\b__global__\b[^;{]*?\b(k_\w+)\s*\(([^)]*)\)\s*\{", re.S)
LAUNCH = re.compile(r"\bsl__cuda_launch\(\s*([^,]+),\s*(k_\w+)")


def strip_comments(src):
    """src with comments blanked, newlines kept (line numbers stay); string literals are
    copied whole (a // inside one is no comment)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src[i] == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


def check(files):
    """files: {name: text}. Returns (problems, kernels found, launches found)."""
    problems, kernels, launches = [], set(), []
    for name, text in files.items():
        src = strip_comments(text)
        for m in GLOBAL.finditer(src):
            kernels.add(m.group(1))
            body = src[m.end():].lstrip()
            if not body.startswith("sl_pdl_enter();"):
                problems.append("%s:%d: kernel %s does not open with sl_pdl_enter(); (a kernel "
                                "launched early would touch memory before the one before it "
                                "ended)" % (name, line_of(src, m.start()), m.group(1)))
        for m in re.finditer(r"<<<", src):
            problems.append("%s:%d: a <<<>>> launch (launch through sl__cuda_launch)"
                            % (name, line_of(src, m.start())))
        for m in LAUNCH.finditer(src):
            launches.append((name, line_of(src, m.start()), m.group(2)))
        if "sl_pdl_enter(void)" in src:
            body = src[src.index("sl_pdl_enter(void)"):]
            body = body[:body.index("\n}")]
            w, ld = body.find("griddepcontrol.wait"), body.find("griddepcontrol.launch_dependents")
            if w < 0 or ld < 0 or ld < w:
                problems.append("%s: sl_pdl_enter must wait (griddepcontrol.wait) before "
                                "griddepcontrol.launch_dependents" % name)
    for name, line, k in launches:
        if k not in kernels:
            problems.append("%s:%d: sl__cuda_launch of %s, which is no __global__ function of "
                            "these files" % (name, line, k))
    return problems, kernels, launches


def self_test():
    """Each rule broken once must be reported."""
    enter = ('static __device__ void sl_pdl_enter(void)\n{\n    asm volatile('
             '"griddepcontrol.wait;");\n    asm volatile("griddepcontrol.launch_dependents;");\n}\n')
    good = enter + ("static __global__ void __launch_bounds__(32) k_a(int *x)\n{\n"
                    "    sl_pdl_enter();\n    x[0] = 1;\n}\n"
                    "void f(bool p) { sl__cuda_launch(p, k_a, 1, 32, 0, s, x); }\n")
    p, k, l = check({"good.cu": good})
    assert not p and k == {"k_a"} and len(l) == 1, (p, k, l)
    bad = {
        "no enter": good.replace("    sl_pdl_enter();\n    x[0]", "    x[0]"),
        "enter after an access": good.replace("    sl_pdl_enter();\n    x[0] = 1;",
                                              "    x[0] = 1;\n    sl_pdl_enter();"),
        "commented enter": good.replace("    sl_pdl_enter();", "    // sl_pdl_enter();"),
        "<<<": good.replace("sl__cuda_launch(p, k_a, 1, 32, 0, s, x);", "k_a<<<1, 32>>>(x);"),
        "unknown kernel": good.replace("sl__cuda_launch(p, k_a,", "sl__cuda_launch(p, k_b,"),
        "trigger first": good.replace('"griddepcontrol.wait;"', '"griddepcontrol.x;"') +
        'asm("griddepcontrol.wait;");\n',
    }
    for what, text in bad.items():
        p, _, _ = check({"bad.cu": text})
        assert p, "the checker missed: " + what


def main():
    self_test()
    files = {}
    for path in sys.argv[1:]:
        with open(path) as f:
            files[path] = f.read()
    problems, kernels, launches = check(files)
    for p in problems:
        print("FAIL:", p)
    # kernels/cuda has ~30 kernels and a launch each: finding few means the patterns broke
    if len(kernels) < 25 or len(launches) < 25:
        print("FAIL: found %d kernels and %d launches in %d files (expected 25+ of each)"
              % (len(kernels), len(launches), len(files)))
        problems.append("count")
    if not any("sl_pdl_enter(void)" in strip_comments(t) for t in files.values()):
        print("FAIL: sl_pdl_enter's definition is not in the files given")
        problems.append("definition")
    print("pdl_rule_test: %d kernels, %d launches in %d files: %d problem(s)"
          % (len(kernels), len(launches), len(files), len(problems)))
    print("%d passed, %d failed" % (0 if problems else 1, 1 if problems else 0))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
