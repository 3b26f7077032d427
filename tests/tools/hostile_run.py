"""The machinery of hostile_table_test.py: the test's folders, one sluice run with its limits,
the snapshots that prove a refused run changed nothing, and the cases' table with its check."""
import hashlib
import os
import re
import stat
import subprocess
import sys
import tempfile
import time

from harness import SLUICE, expect

TIMEOUT_S = 60
WORKERS = 2
SANITIZER_EXIT = 86
SANITIZER_TEXT = ("Sanitizer", "runtime error:")
IS_ROOT = os.geteuid() == 0


# ---- the test's folders --------------------------------------------------------------------

# Under Bazel, TEST_TMPDIR is the test's own: nothing else appears beside ROOT there.
ROOT = tempfile.mkdtemp(prefix="sluice-hostile-table-", dir=os.environ.get("TEST_TMPDIR"))
T = os.path.join(ROOT, "t")            # the test folder: cwd, HOME and TMPDIR of every run
WORK = os.path.join(T, "work")         # inputs and hostile paths
GOOD = os.path.join(T, "good")         # outputs of good runs (left out of the snapshots)
SCRATCH = os.path.join(T, "scratch")   # outputs of runs that fail only on stdout (left out too)
OUTSIDE = os.path.join(ROOT, "outside")  # what links point to, outside the test folder
SENTINEL = os.path.join(ROOT, "sentinel.txt")


def w(name):
    return os.path.join(WORK, name)


def env_for(extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    e["HOME"] = os.path.join(T, "home")
    e["TMPDIR"] = os.path.join(T, "tmp")
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        e[var] = ":".join(filter(None, [e.get(var, ""), f"exitcode={SANITIZER_EXIT}"]))
    e.update(extra or {})
    return e


# A wrapper that ignores SIGXFSZ and limits the size of files the run writes: writes past the
# limit fail with EFBIG, as on a disk that fills up.
FSIZE_WRAPPER = ("import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
                 " n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n));"
                 " os.execv(sys.argv[2], sys.argv[2:])")


def run(argv, env=None, stdin=None, stdout=None, fsize=None, cwd=WORK):
    """One run: (returncode, stdout bytes, stderr text). 124 when it did not end in time."""
    cmd = [SLUICE, *map(str, argv)]
    if fsize is not None:
        cmd = [sys.executable, "-c", FSIZE_WRAPPER, str(fsize), *cmd]
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.PIPE
    try:
        r = subprocess.run(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE, cwd=cwd,
                           env=env_for(env), timeout=TIMEOUT_S)
        return r.returncode, r.stdout or b"", r.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return 124, b"", (e.stderr or b"").decode(errors="replace") + "\n(timed out)"
    finally:
        for f in (fin, fout):
            if f not in (subprocess.DEVNULL, subprocess.PIPE):
                f.close()


# ---- snapshots: nothing under ROOT changes in a refused run --------------------------------

def snapshot(skip=(GOOD, SCRATCH)):
    """{path: (type, size, mtime, inode, mode)} of everything under ROOT but `skip` and
    temporaries (*.partial: a refused run may create and remove one while another runs)."""
    snap = {}
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
        for name in files + dirs:
            p = os.path.join(top, name)
            if name.endswith(".partial"):
                continue
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                snap[p] = ("dir", st.st_mode)
            else:
                snap[p] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino,
                           st.st_mode)
    return snap


def hashes(skip=(GOOD, SCRATCH)):
    out = {}
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip]
        for name in files:
            p = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(p).st_mode) and os.access(p, os.R_OK):
                with open(p, "rb") as f:
                    out[p] = hashlib.sha256(f.read()).hexdigest()
    return out


def diff(a, b):
    changed = [p for p in set(a) | set(b) if a.get(p) != b.get(p)]
    return sorted(os.path.relpath(p, ROOT) for p in changed)


DEVICES = ("/dev/null", "/dev/zero", "/dev/full")


def devices_state():
    return [(d, stat.S_IFMT(os.lstat(d).st_mode)) for d in DEVICES]


OUT = w("new-out.bin")  # an output that does not exist: created only by a good run


# ---- the table -----------------------------------------------------------------------------

class Case:
    """One run. `needles`: texts stderr must hold (a tuple: one of them). Every OUT in argv
    becomes a name of this case's own (a run that wrongly succeeds leaves its output there,
    where no other case's snapshot looks)."""

    def __init__(self, cls, argv, needles, env=None, stdin=None, stdout=None, fsize=None,
                 rcs=(1, 2), name=None):
        self.own = f"{OUT}.{len(CASES)}"
        argv = [self.own if x == OUT else str(x) for x in argv]
        needles = [self.own if x == OUT else x for x in needles]
        self.cls, self.argv, self.needles = cls, argv, list(needles)
        self.env, self.stdin, self.stdout, self.fsize, self.rcs = env, stdin, stdout, fsize, rcs
        short = " ".join(os.path.relpath(x, WORK) if x.startswith(ROOT) else
                         x if x else "''" for x in self.argv)
        envs = " ".join(f"{k}={v!r}" for k, v in (env or {}).items())
        redir = (f" < {stdin}" if stdin else "") + (f" > {stdout}" if stdout else "") + \
            (f" [fsize {fsize}]" if fsize is not None else "")
        self.name = name or f"{envs + ' ' if envs else ''}{short}{redir}"


CASES = []


def case(*a, **k):
    CASES.append(Case(*a, **k))


def has(err, needle):
    return any(n in err for n in needle) if isinstance(needle, tuple) else needle in err


def check_case(c, rc, err, touched):
    what = f"[{c.cls}] {c.name}"
    first = " | ".join(err.strip().splitlines()[-3:])[:300]
    sanitizer = any(s in err for s in SANITIZER_TEXT) or rc == SANITIZER_EXIT
    ok = rc in c.rcs and not sanitizer and all(has(err, n) for n in c.needles) and not touched
    why = []
    if rc == 124:
        why.append(f"no end within {TIMEOUT_S} s")
    elif rc < 0:
        why.append(f"killed by signal {-rc}")
    elif rc not in c.rcs:
        why.append(f"exit {rc}, want one of {c.rcs}")
    if sanitizer:
        why.append("sanitizer report: " + " | ".join(
            ln for ln in err.splitlines() if any(s in ln for s in SANITIZER_TEXT))[:400])
    missing = [n for n in c.needles if not has(err, n)]
    if missing:
        why.append(f"stderr lacks {missing}")
    if touched:
        why.append(f"touched {touched}")
    expect(ok, f"{what}: " + ("; ".join(why) + f" :: {first}" if why else f"rc {rc}: {first}"))


OTHERS_OUT = re.compile(r"new-out\.bin\.[0-9]+$")


def run_case(c):
    before = snapshot()
    t0 = time.monotonic()
    rc, _, err = run(c.argv, env=c.env, stdin=c.stdin, stdout=c.stdout, fsize=c.fsize)
    dt = time.monotonic() - t0
    touched = [p for p in diff(before, snapshot())
               if not OTHERS_OUT.search(p) or p == os.path.relpath(c.own, ROOT)]
    return rc, err, touched, dt


# ---- hostile model files -----------------------------------------------------------------

def write_variant(name, data, edits=()):
    """WORK/name: data with each (offset, bytes) of `edits` written over it."""
    b = bytearray(data)
    for at, value in edits:
        b[at:at + len(value)] = value
    path = w(name)
    with open(path, "wb") as f:
        f.write(b)
    return path
