"""examples/embed (the C API through libsluice.so) on `sluice mkmodel` models.

usage: embed_test.py SLUICE_BINARY EMBED_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

SLUICE, EMBED = (os.path.abspath(p) for p in sys.argv[1:3])
FAILURES = []


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-embed-test-", dir=os.environ.get("TEST_TMPDIR"))
    for arch in ("qwen3moe", "llama"):
        model = os.path.join(tmp, arch + ".gguf")
        subprocess.run([SLUICE, "mkmodel", "--arch", arch, "-o", model], check=True,
                       capture_output=True)
        r = subprocess.run([EMBED, model, "Hello there"], capture_output=True, text=True)
        expect(r.returncode == 0, f"{arch}: embed exits 0 ({r.stderr.strip()})")
        lines = r.stdout.splitlines()
        expect(len(lines) >= 11 and lines[0].startswith(f"model: {arch}"),
               f"{arch}: model line first ({lines[:1]})")
        expect(len(lines) > 1 and re.match(r"prompt: \d+ tokens:( \d+)+$", lines[1]) is not None,
               f"{arch}: prompt token line")
        toks = [re.match(r"token (\d): (\d+)\t", x) for x in lines[2:10]]
        expect(all(toks) and [int(t.group(1)) for t in toks] == list(range(8)) and
               all(int(t.group(2)) < 512 for t in toks),
               f"{arch}: 8 generated token lines with ids < n_vocab")
        expect(len(lines) >= 11 and lines[-1].startswith("text: ") or
               any(x.startswith("text: ") for x in lines), f"{arch}: text line")
    r = subprocess.run([EMBED, os.path.join(tmp, "missing.gguf")], capture_output=True, text=True)
    expect(r.returncode == 1 and "missing.gguf" in r.stderr, "a missing model: exit 1 naming it")
    r = subprocess.run([EMBED], capture_output=True, text=True)
    expect(r.returncode == 2 and "usage" in r.stderr, "no arguments: usage, exit 2")
    print(f"\n{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
