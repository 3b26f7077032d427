"""The programmatic-dependent-launch rule of kernels/cuda (common.cuh, sl_pdl_enter).

A kernel launched with programmatic stream serialisation may start while the kernel before it
on the stream still runs; it is correct only if it waits (griddepcontrol.wait) before touching
memory. kernels/cuda launches every kernel so where the device has it, so the rule is held
over the sources, which CI has even without nvcc:
  - every __global__ function's first statement is sl_pdl_enter(), or calls of *_l2_prefetch
    functions (an L2 prefetch yields no value; common.cuh sl_l2_prefetch) and then it, and
    those functions neither load, dereference nor index memory but the parameters' own;
  - sl_pdl_enter waits before it lets the next kernel be scheduled, both asm statements
    clobbering "memory" (no load moves above the wait);
  - no kernel is launched with <<<>>> or a cudaLaunch* call: every launch goes through
    sl__cuda_launch (ctx_impl.h), and each launched kernel is one of the __global__
    functions found (whatever their names).
The checker is first run on sources that break each rule, so a checker that finds nothing
fails too.

usage: pdl_rule_test.py FILE...   (the .cu / .cuh files of kernels/cuda)
"""
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
# before sl_pdl_enter: `NAME_l2_prefetch(...)` or `NAME_l2_prefetch<...>(...)` of the kernel's
# parameters (arguments: identifiers only)
PREFETCH_CALL = re.compile(r"(\w+_l2_prefetch)(<[\w\s,]*>)?\(\s*\w*\s*\);")
# what the functions run before the wait may call (each a function of these files, checked
# the same way, or a pure builtin)
PREFETCH_CALLS = {"sl_l2_prefetch", "qxm_locate", "qxm_mat", "qxm_count", "gm_locate", "min",
                  "max"}
KEYWORDS = {"if", "else", "for", "while", "return", "sizeof", "switch", "asm", "volatile"}
TYPES = {"int64_t", "int32_t", "uint32_t", "uint64_t", "int", "unsigned", "size_t", "char"}
# what their bodies must not do: dereference (->, a unary * also after a cast), load or store
# (any __ld* intrinsic, ld. / st. in asm), an atomic, index anything but the parameter
# struct's arrays (a.m[...], a.row0[...]), asm other than the L2 prefetch
PREFETCH_BANNED = (r"->", r"__ld\w*", r"\bld\.", r"atomic",
                   r"(^|[^\w\s)\]]|\breturn)\s*\*\s*[\w(]",
                   r"\(\s*(const\s+)?[A-Za-z_]\w*(\s*\*)*\s*\)\s*\*\s*[\w(]",
                   r"(?<!\ba\.m)(?<!\ba\.row0)\[", r"asm(?![^;]*prefetch\.global\.L2)",
                   r"\bst\.")
# the patterns read with the asm strings in (the others without: an asm's [%0] and * are no
# indexing or dereference)
RAW = (r"\bld\.", r"\bst\.", r"asm(?![^;]*prefetch\.global\.L2)")


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


def balanced(src, i, pair="()"):
    """Index just past the group that opens at src[i] == pair[0] ("(" or "{")."""
    d = 0
    for j in range(i, len(src)):
        d += {pair[0]: 1, pair[1]: -1}.get(src[j], 0)
        if d == 0:
            return j + 1
    return len(src)


def kernels_of(src):
    """[(name, position, body start or -1 for a declaration)] of every __global__ function:
    after the token, __launch_bounds__(...) skipped, the name is the identifier before the
    parameter list's "(" (a template's <...> before it is part of the declaration)."""
    out = []
    for m in re.finditer(r"\b__global__\b", src):
        i = m.end()
        while True:
            p = src.find("(", i)
            names = IDENT.findall(src[i:p]) if p >= 0 else []
            name = names[-1] if names else "?"
            if name != "__launch_bounds__":
                break
            i = balanced(src, p)
        j = balanced(src, p) if p >= 0 else len(src)
        rest = src[j:].lstrip()
        out.append((name, m.start(), j + (len(src[j:]) - len(rest)) + 1
                    if rest.startswith("{") else -1))
    return out


def check_prefetchers(prefetchers, bodies):
    """Problems of the functions run before a kernel's wait, and of what they call."""
    problems, seen = [], set()
    todo = [(f, "%s:%d" % (n, ln)) for n, ln, f in prefetchers]
    while todo:
        fn, where = todo.pop()
        if fn in seen or fn in ("min", "max"):
            continue
        seen.add(fn)
        if fn not in bodies:
            problems.append("%s: %s runs before the wait but is defined in none of these files"
                            % (where, fn))
            continue
        name, line, body = bodies[fn]
        body = re.sub(r"(?m)^\s*#.*$", "", body)  # the preprocessor's lines are no code
        nostr = re.sub(r'"[^"]*"', '""', body)
        # the asm string's own [%0] and * are no indexing or dereference
        bad = [t for t in PREFETCH_BANNED if re.search(t, body if t in RAW else nostr)]
        if bad:
            problems.append("%s:%d: %s runs before the wait and may read the parameters only: "
                            "it has %s" % (name, line, fn, bad))
        for c in re.finditer(r"\b([A-Za-z_]\w*)\s*(<[^<>;]*>)?\s*\(", nostr):
            callee = c.group(1)
            if callee in KEYWORDS or callee in TYPES:
                continue
            if callee not in PREFETCH_CALLS:
                problems.append("%s:%d: %s runs before the wait and calls %s (allowed: %s)"
                                % (name, line, fn, callee, ", ".join(sorted(PREFETCH_CALLS))))
                continue
            todo.append((callee, "%s:%d" % (name, line)))
    return problems


def check(files):
    """files: {name: text}. Returns (problems, kernels found, launches found)."""
    problems, kernels, launches, prefetchers, bodies = [], set(), [], [], {}
    for name, text in files.items():
        src = strip_comments(text)
        for k, pos, body in kernels_of(src):
            kernels.add(k)
            if body < 0:
                continue  # a declaration; its definition is checked where it is
            rest = src[body:].lstrip()
            m2 = PREFETCH_CALL.match(rest)
            while m2:  # L2 prefetches from the parameters may come first
                prefetchers.append((name, line_of(src, pos), m2.group(1)))
                rest = rest[m2.end():].lstrip()
                m2 = PREFETCH_CALL.match(rest)
            if not rest.startswith("sl_pdl_enter();"):
                problems.append("%s:%d: kernel %s does not open with sl_pdl_enter(); (a kernel "
                                "launched early would touch memory before the one before it "
                                "ended; only *_l2_prefetch calls may come first)"
                                % (name, line_of(src, pos), k))
        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(([^()]*(\([^()]*\))*[^()]*)\)\s*\{", src):
            if m.group(1) not in KEYWORDS:
                bodies[m.group(1)] = (name, line_of(src, m.start()),
                                      src[m.end():balanced(src, m.end() - 1, "{}")])
        for m in re.finditer(r"<<<", src):
            problems.append("%s:%d: a <<<>>> launch (launch through sl__cuda_launch)"
                            % (name, line_of(src, m.start())))
        for m in re.finditer(r"\bcudaLaunch\w*\s*\(", src):
            problems.append("%s:%d: %s: launch through sl__cuda_launch (ctx_impl.h)"
                            % (name, line_of(src, m.start()), m.group(0).rstrip("( ")))
        for m in re.finditer(r"\bsl__cuda_launch\s*\(", src):
            args = src[m.end():balanced(src, m.end() - 1)]
            parts = args.split(",")
            k = IDENT.findall(parts[1]) if len(parts) > 1 else []
            launches.append((name, line_of(src, m.start()), k[0] if k else "?"))
        if "sl_pdl_enter(void)" in src:
            body = src[src.index("sl_pdl_enter(void)"):]
            body = body[:body.index("\n}")]
            w = body.find("griddepcontrol.wait")
            ld = body.find("griddepcontrol.launch_dependents")
            asms = re.findall(r"^\s*asm\s+volatile\s*\((.*)\);\s*$", body, re.M)
            if w < 0 or ld < 0 or ld < w:
                problems.append("%s: sl_pdl_enter must wait (griddepcontrol.wait) before "
                                "griddepcontrol.launch_dependents" % name)
            if len(asms) < 2 or not all('"memory"' in a for a in asms):
                problems.append("%s: sl_pdl_enter's asm must clobber \"memory\" (else loads "
                                "may move above the wait)" % name)
    problems += check_prefetchers(prefetchers, bodies)
    for name, line, k in launches:
        if k not in kernels:
            problems.append("%s:%d: sl__cuda_launch of %s, which is no __global__ function of "
                            "these files" % (name, line, k))
    return problems, kernels, launches


def self_test():
    """Each rule broken once must be reported."""
    wait = '    asm volatile("griddepcontrol.wait;" ::: "memory");\n'
    trig = '    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");\n'
    enter = "static __device__ void sl_pdl_enter(void)\n{\n" + wait + trig + "}\n"
    good = enter + ("static __global__ void __launch_bounds__(32) k_a(int *x)\n{\n"
                    "    sl_pdl_enter();\n    x[0] = 1;\n}\n"
                    "template <int N>\nstatic __global__ void\n    gather(int *x, int n)\n{\n"
                    "    sl_pdl_enter();\n    x[sizeof(int)] = n;\n}\n"
                    "void f(c) { sl__cuda_launch(c, k_a, 1, 32, 0, x);\n"
                    "    sl__cuda_launch(c, gather<2>, 1, 32, 0, x, 3); }\n")
    good = good.replace("{\n    sl_pdl_enter();\n    x[0] = 1;",
                        "{\n    w_l2_prefetch(x);\n    sl_pdl_enter();\n    x[0] = 1;")
    good += ("static __device__ void w_l2_prefetch(const int *x)\n{\n"
             "    sl_l2_prefetch(x + blockIdx.x * 32, min(128, 64 * 2), threadIdx.x, 32);\n}\n"
             "static __device__ void sl_l2_prefetch(const void *p, int64_t n, int64_t f, "
             "int64_t s)\n{\n    for (int64_t o = f * 128; o < n; o += s * 128)\n"
             '        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)p + o));\n}\n')
    p, k, l = check({"good.cu": good})
    assert not p and k == {"k_a", "gather"} and len(l) == 2, (p, k, l)
    bad = {
        "no enter": good.replace("    sl_pdl_enter();\n    x[0]", "    x[0]"),
        "no enter, any name": good.replace("    sl_pdl_enter();\n    x[sizeof", "    x[sizeof"),
        "enter after an access": good.replace("    sl_pdl_enter();\n    x[0] = 1;",
                                              "    x[0] = 1;\n    sl_pdl_enter();"),
        "commented enter": good.replace("    sl_pdl_enter();\n    x[0]",
                                        "    // sl_pdl_enter();\n    x[0]"),
        "<<<": good.replace("sl__cuda_launch(c, k_a, 1, 32, 0, x);", "k_a<<<1, 32>>>(x);"),
        "cudaLaunchKernel": good.replace("sl__cuda_launch(c, k_a, 1, 32, 0, x);",
                                         "cudaLaunchKernel((void *)k_a, 1, 32, 0, 0, 0);"),
        "unknown kernel": good.replace("sl__cuda_launch(c, k_a,", "sl__cuda_launch(c, k_b,"),
        "trigger first": good.replace(wait + trig, trig + wait),
        "no memory clobber": good.replace(wait, wait.replace(' ::: "memory"', "")),
        "another call before the wait": good.replace("    w_l2_prefetch(x);\n",
                                                     "    w_l2_prefetch(x);\n    f(x);\n"),
        "a prefetch reading memory": good.replace("x + blockIdx.x * 32", "x + x[0]"),
        "a prefetch through a pointer": good.replace("x + blockIdx.x * 32", "*(x + 1) + x"),
        "a unary * after +": good.replace("x + blockIdx.x * 32", "x + *x"),
        "a unary * after a cast": good.replace("x + blockIdx.x * 32", "x + (int64_t)*x"),
        "a unary * after a comparison": good.replace("min(128, 64 * 2)", "min(128, 1 < *x)"),
        "->": good.replace("x + blockIdx.x * 32", "x + a->n"),
        "an __ld intrinsic": good.replace("x + blockIdx.x * 32", "x + __ldcg(x)"),
        "an atomic": good.replace("x + blockIdx.x * 32", "x + atomicAdd(x, 0)"),
        "a load in the asm": good.replace("prefetch.global.L2 [%0];",
                                          "prefetch.global.L2 [%0]; ld.global.u32 %1, [%0];"),
        "another asm": good.replace("prefetch.global.L2 [%0];", "st.global.u32 [%0], 0;"),
        "a call not allowed": good.replace("min(128, 64 * 2)", "read_n(x)"),
        "an undefined prefetcher": good.replace("w_l2_prefetch(x);\n    sl_pdl_enter",
                                                "v_l2_prefetch(x);\n    sl_pdl_enter"),
    }
    for what, text in bad.items():
        assert text != good, "the self-test's edit did nothing: " + what
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
