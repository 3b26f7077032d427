"""`pip install ./python` ships a working library: a wheel built from the package by its own
backend (python/_build/sluice_build.py; SLUICE_BUILD_LIB points it at the libsluice.so Bazel
already built, so nothing is rebuilt here) is tagged for the platform, holds libsluice.so, and
installed into a fresh venv opens a model with no SLUICE_LIB set.

usage: wheel_test.py SLUICE_BINARY LIBSLUICE_SO
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "tests", "tools")]
from harness import SLUICE, expect, finish  # noqa: E402

LIB = os.path.abspath(sys.argv[2])
PKG = os.path.join(HERE, "..")


def sh(*cmd, env=None, cwd=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd)
    if r.returncode:
        print(f"$ {' '.join(map(str, cmd))}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def asan_env(env):
    """The library of --config=asan needs clang's ASan runtime preloaded into python."""
    r = sh(sys.executable, "-c", f"import ctypes; ctypes.CDLL({LIB!r})", env=env)
    if r.returncode == 0 or "__asan" not in r.stderr + r.stdout:
        return env
    rt = sh("clang", "-print-file-name=libclang_rt.asan-x86_64.so").stdout.strip()
    return dict(env, LD_PRELOAD=rt, ASAN_OPTIONS="detect_leaks=0")


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-wheel-", dir=os.environ.get("TEST_TMPDIR"))
    # the package's sources as a checkout has them (runfiles are links: copied as files)
    src = os.path.join(tmp, "python")
    for rel in ("pyproject.toml", "README.md", "_build/sluice_build.py", "sluice/__init__.py",
                "sluice/_lib.py"):
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        shutil.copyfile(os.path.join(PKG, rel), os.path.join(src, rel))
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_LIB", "PYTHONPATH")}
    env.update(SLUICE_BUILD_LIB=LIB, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    wheels = os.path.join(tmp, "wheels")
    r = sh(sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--no-build-isolation",
           "-w", wheels, env=env)
    found = glob.glob(os.path.join(wheels, "*.whl"))
    if not expect(r.returncode == 0 and len(found) == 1, f"pip wheel ./python: {found}"):
        return
    whl = found[0]
    name = os.path.basename(whl)
    plat = name[:-len(".whl")].split("-")[-1]
    expect(plat != "any" and plat.startswith(("linux_", "manylinux")),
           f"wheel tagged for the platform, not none-any: {name}")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
        so = z.read("sluice/libsluice.so") if "sluice/libsluice.so" in names else b""
    expect("Root-Is-Purelib: false" in wheel_meta, "WHEEL: Root-Is-Purelib: false")
    expect(so == open(LIB, "rb").read(), "the wheel ships libsluice.so (the one built)")
    # a fresh venv (numpy from the interpreter's own site-packages: no network here)
    venv = os.path.join(tmp, "venv")
    r = sh(sys.executable, "-m", "venv", "--system-site-packages", venv)
    py = os.path.join(venv, "bin", "python")
    if not expect(r.returncode == 0, "python3 -m venv"):
        return
    r = sh(py, "-m", "pip", "install", "--no-index", whl, env=env)
    expect(r.returncode == 0, "pip install --no-index WHEEL")
    model = os.path.join(tmp, "m.gguf")
    r = sh(SLUICE, "mkmodel", "--arch", "llama", "--layers", "2", "--dim", "64", "--ffn", "128",
           "-o", model)
    expect(r.returncode == 0, "mkmodel")
    code = ("import sluice, sluice._lib as L\n"
            f"m = sluice.Model({model!r}, placement='cpu')\n"
            "with m.context(n_ctx=32) as c:\n"
            "    c.eval(m.tokenize('hello'))\n"
            "    assert c.logits().shape == (m.n_vocab,)\n"
            "print(sluice.__file__)\nprint(L._find())\n")
    run_env = asan_env({k: v for k, v in env.items() if k != "SLUICE_BUILD_LIB"})
    r = sh(py, "-c", code, env=run_env, cwd=tmp)  # cwd: not the source tree
    out = r.stdout.split("\n")
    expect(r.returncode == 0 and len(out) >= 2 and out[0].startswith(venv) and
           out[1] == os.path.join(os.path.dirname(out[0]), "libsluice.so"),
           f"import sluice; sluice.Model(path) with no SLUICE_LIB: the bundled library "
           f"({r.stdout.strip()!r} {r.stderr.strip()[-300:]!r})")


if __name__ == "__main__":
    main()
    sys.exit(finish())
