"""Interrupted writers leave nothing behind (issue 29, case 6): `mkmodel` and `requant` stopped by
SIGINT or SIGTERM while writing remove their .partial files and exit 130 / 143 without touching
the target; one killed with -9 (nothing can clean up) leaves a temporary of a fixed name that the
next run of the same target replaces.

usage: interrupt_test.py SLUICE_BINARY
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICE, expect, finish  # noqa: E402

# a model that takes seconds to write on a loaded 2-core machine (~37 MB of Q4_K from exact
# quantization), so that a signal lands mid-write. Sizes are kept small on purpose: CI shares
# its disk with the build, and a test that needs hundreds of MB fails there for want of space.
SHAPE = ["--arch", "llama", "--layers", "4", "--dim", "1024", "--ffn", "4096", "--vocab", "2048"]
BIG = [*SHAPE, "--type", "Q4_K", "--exact-quant", "-t", "1"]


def partials(d):
    return sorted(f for f in os.listdir(d) if ".partial" in f or ".tmp" in f)


def start(args):
    return subprocess.Popen([SLUICE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for_bytes(d, p, need=1 << 20, limit=120):
    """Until some temporary in d holds `need` bytes (the writer is mid-file); False if p ended."""
    t0 = time.time()
    while time.time() - t0 < limit and p.poll() is None:
        for f in partials(d):
            try:
                if os.path.getsize(os.path.join(d, f)) >= need:
                    return True
            except OSError:
                pass
        time.sleep(0.02)
    return False


def interrupted(d, args, sig, target, what):
    p = start(args)
    mid = wait_for_bytes(d, p)
    expect(mid, f"{what}: still writing after 1 MiB (else the model is too small for the test)")
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    want = 128 + sig
    expect(p.returncode == want and "stopped" in err,
           f"{what}: {signal.Signals(sig).name} exits {want} saying it stopped "
           f"({p.returncode}, {err.strip()[-200:]!r})")
    expect(partials(d) == [], f"{what}: no temporary left ({partials(d)})")
    return target


def test_mkmodel(d):
    out = os.path.join(d, "m.gguf")
    for sig in (signal.SIGINT, signal.SIGTERM):
        interrupted(d, ["mkmodel", *BIG, "-o", out], sig, out, f"mkmodel {sig.name}")
        expect(not os.path.exists(out), f"mkmodel {sig.name}: no target written")
    # kill -9: nothing can clean up; the next run of the same target replaces the leftover
    p = start(["mkmodel", *BIG, "-o", out])
    wait_for_bytes(d, p)
    p.kill()
    p.communicate()
    left = partials(d)
    expect(left == ["m.gguf.partial"], f"mkmodel kill -9: the fixed-name temporary ({left})")
    r = subprocess.run([SLUICE, "mkmodel", "--arch", "llama", "-o", out], capture_output=True,
                       text=True)
    expect(r.returncode == 0 and partials(d) == [] and os.path.getsize(out) > 0,
           f"mkmodel after a kill -9: the stale temporary replaced ({r.returncode}, "
           f"{partials(d)})")
    os.unlink(out)


def test_requant(d):
    src = os.path.join(d, "src.gguf")
    # Q8_0 (~70 MB), not F16: the last run below copies it whole beside it
    r = subprocess.run([SLUICE, "mkmodel", *SHAPE, "--type", "Q8_0", "-o", src],
                       capture_output=True, text=True)
    if not expect(r.returncode == 0, f"mkmodel of requant's input ({r.stderr.strip()[-200:]})"):
        return
    before = os.stat(src)
    out = os.path.join(d, "q.gguf")
    req = ["requant", "-m", src, "--tensor", r"blk\..*", "--type", "Q4_K"]
    for sig in (signal.SIGINT, signal.SIGTERM):
        interrupted(d, [*req, "-o", out], sig, out, f"requant {sig.name}")
        expect(not os.path.exists(out), f"requant {sig.name}: no output written")
    interrupted(d, [*req, "-o", src, "--in-place"], signal.SIGINT, src, "requant --in-place")
    after = os.stat(src)
    expect((after.st_ino, after.st_size, after.st_mtime_ns) ==
           (before.st_ino, before.st_size, before.st_mtime_ns),
           "requant --in-place SIGINT: the input untouched")
    # kill -9 leaves temporaries of fixed names, which the next run of that output replaces
    p = start([*req, "-o", out])
    wait_for_bytes(d, p)
    p.kill()
    p.communicate()
    left = partials(d)
    expect(left and all(f.startswith("q.gguf.partial") for f in left),
           f"requant kill -9: temporaries named after the output only ({left})")
    r = subprocess.run([SLUICE, *req[:3], "--tensor", r"blk\.0\.attn_q\.weight", "--type",
                        "Q8_0",
                        "-o", out], capture_output=True, text=True)
    expect(r.returncode == 0 and partials(d) == [],
           f"requant after a kill -9: the stale temporaries replaced ({r.returncode}, "
           f"{r.stderr.strip()[-200:]!r}, {partials(d)})")


def main():
    with tempfile.TemporaryDirectory() as d:
        test_mkmodel(d)
        test_requant(d)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
