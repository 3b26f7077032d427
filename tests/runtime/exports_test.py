"""libsluice.so exports runtime/sluice.h and nothing else (issue 27, STYLE.md "Symbol control").

The public functions are those declared in sluice.h and in the project headers it includes
(base/status.h, base/parse.h), read from the headers themselves; the exported ones are
`nm -D --defined-only libsluice.so` less the linker's own markers. The two sets must be equal:
an extra export is an internal symbol that escaped -fvisibility=hidden, a missing one a public
function without SL_API (or without a definition).

usage: exports_test.py LIBSLUICE_SO SLUICE_H
"""
import os
import re
import subprocess
import sys

LINKER_MARKERS = {"_edata", "_end", "__bss_start", "_init", "_fini"}


def declared(header, root, seen=None):
    """Function names declared in header and the quoted project headers it includes."""
    seen = set() if seen is None else seen
    if header in seen:
        return set()
    seen.add(header)
    text = open(os.path.join(root, header)).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    names = set()
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.M):
        names |= declared(inc, root, seen)
    text = re.sub(r"^\s*#[^\n]*(\\\n[^\n]*)*", " ", text, flags=re.M)
    # a declaration: NAME( not preceded by "(*" (a function-pointer typedef or field)
    for m in re.finditer(r"\b(sl_\w+)\s*\(", text):
        if text[:m.start(1)].rstrip().endswith("(*"):
            continue
        names.add(m.group(1))
    return names


def exported(so):
    out = subprocess.run(["nm", "-D", "--defined-only", so], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] not in LINKER_MARKERS:
            syms[parts[2]] = parts[1]
    return syms


def main():
    so, header = sys.argv[1], sys.argv[2]
    # headers name each other from the workspace root ("base/status.h")
    root = os.path.dirname(os.path.dirname(os.path.abspath(header)))
    want = declared(os.path.relpath(os.path.abspath(header), root), root)
    got = exported(so)
    extra = sorted(set(got) - want)
    missing = sorted(want - set(got))
    not_code = sorted(n for n in set(got) & want if got[n] not in "Tt")
    print(f"sluice.h (with base/status.h, base/parse.h) declares {len(want)} functions; "
          f"libsluice.so exports {len(got)} symbols")
    ok = True
    if extra:
        ok = False
        print(f"FAIL: {len(extra)} exported but not declared: {' '.join(extra[:40])}"
              + (" ..." if len(extra) > 40 else ""))
    if missing:
        ok = False
        print(f"FAIL: {len(missing)} declared but not exported: {' '.join(missing)}")
    if not_code:
        ok = False
        print(f"FAIL: exported as data, not functions: {' '.join(not_code)}")
    if len(want) < 40:  # the parser found the header's functions, not a fraction of them
        ok = False
        print(f"FAIL: only {len(want)} declarations parsed from {header}")
    print("ok" if ok else "exports differ from the header")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
