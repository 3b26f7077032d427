"""The sluice package's PEP 517 build backend (in-tree, standard library only: nothing to
download to build). build_wheel runs the project's own build, copies libsluice.so into the
package and writes a wheel tagged for this platform (py3-none-linux_x86_64: the package is
ctypes over that library, so any Python 3 of the platform can load it).

Where the library comes from:
  SLUICE_BUILD_LIB=/path/libsluice.so   an already-built library (CI, tests: no rebuild);
  otherwise `bazel build -c opt //runtime:libsluice.so` in the repository above python/
  (tools/setup first when bazel is missing), then bazel-bin/runtime/libsluice.so.
"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
ROOT = os.path.dirname(PKG_DIR)                                          # the repository
LIB = "libsluice.so"


def _project():
    """name, version, requires-python and dependencies from pyproject.toml's [project]."""
    text = open(os.path.join(PKG_DIR, "pyproject.toml"), encoding="utf-8").read()
    proj = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def one(key):
        m = re.search(rf'^{key}\s*=\s*"([^"]*)"', proj, re.M)
        if not m:
            raise RuntimeError(f"pyproject.toml: [project] {key} missing")
        return m.group(1)
    deps = re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", proj, re.M)
    return (one("name"), one("version"), one("requires-python"), one("description"),
            re.findall(r'"([^"]+)"', deps.group(1)) if deps else [])


def _platform_tag():
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def _library():
    """Path of the libsluice.so to ship (built now unless SLUICE_BUILD_LIB names one)."""
    given = os.environ.get("SLUICE_BUILD_LIB")
    if given:
        if not os.path.isfile(given):
            raise RuntimeError(f"SLUICE_BUILD_LIB={given}: no such file")
        return given
    if not os.path.exists(os.path.join(ROOT, "WORKSPACE")):
        raise RuntimeError(f"{ROOT} is not the Sluice repository: build libsluice.so there "
                           "and set SLUICE_BUILD_LIB to its path")
    if shutil.which("bazel") is None:
        subprocess.run([os.path.join(ROOT, "tools", "setup")], cwd=ROOT, check=True)
    print("sluice: bazel build -c opt //runtime:libsluice.so", file=sys.stderr)
    subprocess.run(["bazel", "build", "-c", "opt", "//runtime:libsluice.so"], cwd=ROOT,
                   check=True, stdout=sys.stderr)
    return os.path.join(ROOT, "bazel-bin", "runtime", LIB)


def _files():
    """(path in the wheel, source path) of the package's Python files."""
    src = os.path.join(PKG_DIR, "sluice")
    return [(f"sluice/{f}", os.path.join(src, f)) for f in sorted(os.listdir(src))
            if f.endswith(".py")]


def _metadata(name, version, requires_python, summary, deps):
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             f"Summary: {summary}", f"Requires-Python: {requires_python}"]
    lines += [f"Requires-Dist: {d}" for d in deps]
    readme = os.path.join(PKG_DIR, "README.md")
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + open(readme, encoding="utf-8").read()


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, req, summary, deps = _project()
    tag = f"py3-none-{_platform_tag()}"
    dist = f"{name}-{version}.dist-info"
    entries = [(arc, open(p, "rb").read()) for arc, p in _files()]
    entries.append((f"sluice/{LIB}", open(_library(), "rb").read()))
    entries += [
        (f"{dist}/METADATA", _metadata(name, version, req, summary, deps).encode()),
        (f"{dist}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: sluice_build\n"
                           f"Root-Is-Purelib: false\nTag: {tag}\n").encode()),
        (f"{dist}/top_level.txt", b"sluice\n"),
    ]
    record = [_record_line(p, d) for p, d in entries] + [f"{dist}/RECORD,,"]
    entries.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode()))
    out = f"{name}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, out), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return out


def build_sdist(sdist_directory, config_settings=None):
    """The python/ folder (the library is built when the wheel is, from the repository)."""
    name, version, *_ = _project()
    base = f"{name}-{version}"
    out = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, out), "w:gz") as t:
        for f in ("pyproject.toml", "README.md", "_build/sluice_build.py"):
            t.add(os.path.join(PKG_DIR, f), f"{base}/{f}")
        for arc, p in _files():
            t.add(p, f"{base}/{arc}")
    return out


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
