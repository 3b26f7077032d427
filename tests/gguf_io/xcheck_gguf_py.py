"""Cross-check of Sluice's GGUF reader and writer against llama.cpp's gguf-py (PyPI `gguf`).

Direction 1: gguf-py's GGUFWriter writes files (every scalar type through an explicit
GGUFValueType, unicode and empty strings, arrays of every element type, nested arrays with
differing inner element types, tensors F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K/I8/I32 and a zero-size
one, a custom alignment, a sharded set); `sluice inspect --json --checksum` must report the same
KV (order, type, value: ints exactly, floats bit for bit) and tensors (name, type, shape in ggml
order, offset, nbytes, FNV-1a of the bytes).

Direction 2: our writer (tests/gguf_io/write_fixture) writes random files for many seeds and a
few sharded ones and prints what it meant to write; gguf-py's GGUFReader must read exactly that
(every field parsed from its raw parts, every tensor byte), and so must our inspect.

Usage: xcheck_gguf_py.py --sluice PATH --write-fixture PATH
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

VTYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
               "u64", "i64", "f64"]
FAILURES = []
CHECKS = [0]


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def check(cond, msg):
    CHECKS[0] += 1
    if not cond:
        fail(msg)
    return cond


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def pad(n, a):
    return (n + a - 1) // a * a


# ---- typed values: ("u8", int) ... ("f32", bits) ("f64", bits) ("bool", b) ("string", bytes)
# ---- ("array", elem_code, [typed...])

def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def typed_from_fixture(j):
    t = j["t"]
    if t in ("f32", "f64"):
        return (t, j["bits"])
    if t == "string":
        return (t, bytes.fromhex(j["hex"]))
    if t == "array":
        return (t, VTYPE_NAMES.index(j["elem"]), [typed_from_fixture(x) for x in j["items"]])
    return (t, j["v"])


def typed_from_reader_parts(parts, i, vtype):
    """Parses gguf-py ReaderField.parts (flattened) into a typed value, recursively."""
    name = VTYPE_NAMES[vtype]
    if vtype == VT.STRING:
        return (name, bytes(parts[i + 1])), i + 2
    if vtype == VT.ARRAY:
        et, n = int(parts[i][0]), int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(n):
            v, i = typed_from_reader_parts(parts, i, et)
            items.append(v)
        return (name, et, items), i
    a = parts[i]
    if vtype == VT.FLOAT32:
        return (name, int(a.view(np.uint32)[0])), i + 1
    if vtype == VT.FLOAT64:
        return (name, int(a.view(np.uint64)[0])), i + 1
    if vtype == VT.BOOL:
        return (name, bool(a[0])), i + 1
    return (name, int(a[0])), i + 1


def reader_fields(reader):
    """[(key, typed)] of a GGUFReader, file order, without its GGUF.* pseudo fields."""
    out = []
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        v, end = typed_from_reader_parts(f.parts, 3, int(f.parts[2][0]))
        check(end == len(f.parts), "gguf-py field %s: %d parts, parsed %d" % (key, len(f.parts), end))
        out.append((key, v))
    return out


def type_string(typed):
    if typed[0] == "array":
        return "array[%s]" % VTYPE_NAMES[typed[1]]
    return typed[0]


def json_matches(typed, j, where):
    """Does inspect's JSON value j equal the typed value? Reports the first difference."""
    t = typed[0]
    if t in ("f32", "f64"):
        bits = typed[1]
        x = struct.unpack("<f", struct.pack("<I", bits))[0] if t == "f32" else \
            struct.unpack("<d", struct.pack("<Q", bits))[0]
        if math.isnan(x):
            return check(j == "nan", "%s: %s NaN printed as %r" % (where, t, j))
        if math.isinf(x):
            return check(j == ("inf" if x > 0 else "-inf"), "%s: %s inf printed as %r" % (where, t, j))
        if not check(isinstance(j, float), "%s: %s printed as %r (not a JSON float)" % (where, t, j)):
            return False
        got = f32_bits(j) if t == "f32" else f64_bits(j)
        return check(got == bits, "%s: %s bits %#x, inspect says %r (bits %#x)" % (where, t, bits, j, got))
    if t == "bool":
        return check(j is typed[1], "%s: bool %r vs %r" % (where, typed[1], j))
    if t == "string":
        want = typed[1].decode("utf-8")
        return check(j == want, "%s: string %r vs %r" % (where, want, j))
    if t == "array":
        if not check(isinstance(j, list) and len(j) == len(typed[2]),
                     "%s: array of %d vs %r" % (where, len(typed[2]), j)):
            return False
        return all(json_matches(e, x, "%s[%d]" % (where, k)) for k, (e, x) in enumerate(zip(typed[2], j)))
    return check(isinstance(j, int) and not isinstance(j, bool) and j == typed[1],
                 "%s: %s %r vs %r" % (where, t, typed[1], j))


def inspect(sluice, path):
    p = subprocess.run([sluice, "inspect", "--json", "--checksum", path], capture_output=True)
    if p.returncode != 0:
        fail("sluice inspect %s: exit %d: %s" % (path, p.returncode, p.stderr.decode(errors="replace")))
        return None
    return json.loads(p.stdout)


def compare_inspect_kv(ours, want, where):
    """ours: inspect JSON; want: [(key, typed)] in file order."""
    keys = list(ours["kv"].keys())
    check(keys == [k for k, _ in want], "%s: kv keys/order differ:\n ours %s\n want %s" %
          (where, keys, [k for k, _ in want]))
    for k, typed in want:
        if k not in ours["kv"]:
            continue
        json_matches(typed, ours["kv"][k], "%s kv %s" % (where, k))
        check(ours["kv_types"][k] == type_string(typed), "%s kv %s: type %s vs %s" %
              (where, k, ours["kv_types"][k], type_string(typed)))


def reader_tensors(reader, shard):
    out = []
    for t in reader.tensors:
        rel = int(t.field.parts[5][0])
        check(t.data_offset == reader.data_offset + rel, "gguf-py tensor %s offsets" % t.name)
        out.append({"name": t.name, "type": QT(t.tensor_type).name, "shape": [int(x) for x in t.shape],
                    "offset": rel, "nbytes": int(t.n_bytes), "shard": shard,
                    "fnv1a64": fnv1a64(t.data.tobytes())})
    return out


def compare_tensors(ours, want, where):
    check(len(ours) == len(want), "%s: %d tensors vs %d" % (where, len(ours), len(want)))
    for a, b in zip(ours, want):
        for field in b:
            check(a.get(field) == b[field], "%s tensor %s: %s %r vs %r" %
                  (where, b["name"], field, a.get(field), b[field]))


# ---- direction 1: gguf-py writes, we read --------------------------------------------------

def gguf_py_kv():
    """(key, value, vtype, sub_type, typed) covering every type gguf-py can write."""
    kv = []

    def add(key, val, vtype, typed, sub=None):
        kv.append((key, val, vtype, sub, typed))

    add("t.u8", 200, VT.UINT8, ("u8", 200))
    add("t.i8", -100, VT.INT8, ("i8", -100))
    add("t.u16", 65535, VT.UINT16, ("u16", 65535))
    add("t.i16", -32768, VT.INT16, ("i16", -32768))
    add("t.u32", 4294967295, VT.UINT32, ("u32", 4294967295))
    add("t.i32", -2147483648, VT.INT32, ("i32", -2147483648))
    add("t.u64", 2 ** 64 - 1, VT.UINT64, ("u64", 2 ** 64 - 1))
    add("t.i64", -2 ** 63, VT.INT64, ("i64", -2 ** 63))
    for i, x in enumerate([3.14159, -0.0, 1e-45, 3.4028234e38, float("inf"), float("-inf"),
                           float("nan"), 1.0, 0.1]):
        add("t.f32.%d" % i, x, VT.FLOAT32, ("f32", f32_bits(x)))
    for i, x in enumerate([math.pi, -0.0, 5e-324, 1.7976931348623157e308, float("inf"),
                           float("nan"), 1e300, 0.1]):
        add("t.f64.%d" % i, x, VT.FLOAT64, ("f64", f64_bits(x)))
    add("t.bool.t", True, VT.BOOL, ("bool", True))
    add("t.bool.f", False, VT.BOOL, ("bool", False))
    for i, s in enumerate(["héllo wörld € 😀 中文", "", "quote\" backslash\\ nl\n tab\t ctl\x01\x1f del\x7f",
                           "nul\x00inside", "\u2028\uffff\U0010ffff"]):
        add("t.str.%d" % i, s, VT.STRING, ("string", s.encode("utf-8")))
    add("t.ünïcödé.kéy", "v", VT.STRING, ("string", b"v"))

    def arr(key, vals, sub):
        name = VTYPE_NAMES[sub]
        if sub == VT.FLOAT32:
            items = [(name, f32_bits(v)) for v in vals]
        elif sub == VT.FLOAT64:
            items = [(name, f64_bits(v)) for v in vals]
        elif sub == VT.STRING:
            items = [(name, v.encode("utf-8")) for v in vals]
        else:
            items = [(name, v) for v in vals]
        add(key, vals, VT.ARRAY, ("array", int(sub), items), sub)

    arr("a.u8", [0, 1, 255], VT.UINT8)
    arr("a.i8", [-128, 0, 127], VT.INT8)
    arr("a.u16", [0, 65535], VT.UINT16)
    arr("a.i16", [-32768, 32767, 5], VT.INT16)
    arr("a.u32", list(range(0, 4000000000, 400000000)), VT.UINT32)
    arr("a.i32", [-2147483648, -1, 0, 2147483647], VT.INT32)
    arr("a.u64", [2 ** 64 - 1, 0, 12345678901234567890], VT.UINT64)
    arr("a.i64", [-2 ** 63, 2 ** 63 - 1, -5], VT.INT64)
    arr("a.f32", [1.5, -0.0, float("inf"), 1e-40, 123456.789], VT.FLOAT32)
    arr("a.f64", [2.5, -1e-310, float("-inf"), 0.1], VT.FLOAT64)
    arr("a.bool", [True, False, True], VT.BOOL)
    arr("a.str", ["a", "", "€uro", "new\nline", "😀"] + ["tok%d" % i for i in range(100)], VT.STRING)
    # Nested: gguf-py infers inner element types (int -> i32, float -> f32, bool, str).
    nested = [[1, 2, 3], [4], [-5, 6]]
    add("n.ints", nested, VT.ARRAY,
        ("array", int(VT.ARRAY), [("array", int(VT.INT32), [("i32", v) for v in inner]) for inner in nested]),
        VT.ARRAY)
    mixed = [[1.5, 2.5], [True, False], ["x", "yé"]]
    add("n.mixed", mixed, VT.ARRAY,
        ("array", int(VT.ARRAY), [
            ("array", int(VT.FLOAT32), [("f32", f32_bits(1.5)), ("f32", f32_bits(2.5))]),
            ("array", int(VT.BOOL), [("bool", True), ("bool", False)]),
            ("array", int(VT.STRING), [("string", b"x"), ("string", "yé".encode())])]),
        VT.ARRAY)
    deep = [[["a"], ["b", "c"]], [["d"]]]
    add("n.deep3", deep, VT.ARRAY,
        ("array", int(VT.ARRAY), [
            ("array", int(VT.ARRAY), [("array", int(VT.STRING), [("string", s.encode()) for s in inner])
                                      for inner in mid]) for mid in deep]),
        VT.ARRAY)
    return kv


def gguf_py_tensors(rng):
    """(name, ndarray, raw_dtype, ggml type name, ne, nbytes)."""
    ts = []
    a = rng.standard_normal((3, 8)).astype(np.float32)
    ts.append(("f32.w", a, None, "F32", [8, 3]))
    a = rng.standard_normal((2, 5, 4)).astype(np.float16)
    ts.append(("f16.w", a, None, "F16", [4, 5, 2]))
    a = rng.integers(0, 65536, (4, 16), dtype=np.uint16)  # bf16 bit patterns
    ts.append(("bf16.w", a, QT.BF16, "BF16", [16, 4]))
    for qt, blocks, rows in [(QT.Q8_0, 3, 2), (QT.Q4_0, 2, 3), (QT.Q4_K, 2, 2), (QT.Q6_K, 1, 3)]:
        bs, ts_bytes = gguf.GGML_QUANT_SIZES[qt]
        a = rng.integers(0, 256, (rows, blocks * ts_bytes), dtype=np.uint8)
        ts.append(("%s.w" % qt.name.lower(), a, qt, qt.name, [blocks * bs, rows]))
    a = rng.integers(-128, 128, (7,), dtype=np.int8)
    ts.append(("i8.w", a, None, "I8", [7]))
    a = rng.integers(-2 ** 31, 2 ** 31, (2, 3), dtype=np.int32)
    ts.append(("i32.w", a, None, "I32", [3, 2]))
    a = np.zeros((0, 4), dtype=np.float32)
    ts.append(("empty.w", a, None, "F32", [4, 0]))
    return [(n, arr, raw, tn, ne, arr.nbytes) for n, arr, raw, tn, ne in ts]


def direction1(sluice, tmp):
    rng = np.random.default_rng(1234)
    kv = gguf_py_kv()
    tensors = gguf_py_tensors(rng)
    for variant in ["plain", "align64", "sharded"]:
        path = os.path.join(tmp, "pyw_%s.gguf" % variant)
        split = 3 if variant == "sharded" else 0
        w = gguf.GGUFWriter(path, arch="xcheck", split_max_tensors=split)
        want_kv = [("general.architecture", ("string", b"xcheck"))]
        alignment = 32
        if variant == "align64":
            w.add_custom_alignment(64)
            alignment = 64
            want_kv.append(("general.alignment", ("u32", 64)))
        for key, val, vtype, sub, typed in kv:
            w.add_key_value(key, val, vtype, sub_type=sub)
            want_kv.append((key, typed))
        for name, arr, raw, _, _, _ in tensors:
            w.add_tensor(name, arr, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()  # writes the tensor infos first
        w.close()

        if split:
            n_shards = (len(tensors) + split - 1) // split
            paths = [os.path.join(tmp, "pyw_%s-%05d-of-%05d.gguf" % (variant, k + 1, n_shards))
                     for k in range(n_shards)]
            want_kv += [("split.no", ("u16", 0)), ("split.count", ("u16", n_shards)),
                        ("split.tensors.count", ("i32", len(tensors)))]
        else:
            paths = [path]

        # What gguf-py meant to write (offsets: running padded sums per shard).
        want_t = []
        for i, (name, arr, _, tn, ne, nbytes) in enumerate(tensors):
            shard = i // split if split else 0
            if not want_t or want_t[-1]["shard"] != shard:
                off = 0
            else:
                off = want_t[-1]["offset"] + pad(want_t[-1]["nbytes"], alignment)
            want_t.append({"name": name, "type": tn, "shape": ne, "offset": off, "nbytes": nbytes,
                           "shard": shard, "fnv1a64": fnv1a64(arr.tobytes())})

        # gguf-py's own reader agrees with the intent (checks this script's model of gguf-py).
        r0 = gguf.GGUFReader(paths[0])
        got = reader_fields(r0)
        check(got == want_kv, "dir1 %s: gguf-py reads back other KV than intended" % variant)
        py_t = []
        for k, p in enumerate(paths):
            py_t += reader_tensors(gguf.GGUFReader(p) if k else r0, k)
        compare_tensors(py_t, want_t, "dir1 %s gguf-py vs intent" % variant)

        ours = inspect(sluice, paths[0])
        if ours is None:
            continue
        check(ours["version"] == 3, "dir1 %s: version %r" % (variant, ours["version"]))
        check(ours["alignment"] == alignment, "dir1 %s: alignment %r" % (variant, ours["alignment"]))
        check(ours["shards"] == len(paths), "dir1 %s: shards %r" % (variant, ours["shards"]))
        check(ours["powerinfer"] is False, "dir1 %s: powerinfer" % variant)
        compare_inspect_kv(ours, want_kv, "dir1 %s" % variant)
        compare_tensors(ours["tensors"], want_t, "dir1 %s sluice vs gguf-py" % variant)
    print("direction 1 (gguf-py writes, sluice reads): 3 files checked")


# ---- direction 2: we write, gguf-py reads --------------------------------------------------

def direction2(sluice, fixture, tmp):
    cases = []
    for seed in range(1, 31):
        extra = []
        if seed % 5 == 0:
            extra = ["--alignment", "64"]
        elif seed % 7 == 0:
            extra = ["--alignment", "1"]
        elif seed % 11 == 0:
            extra = ["--alignment", "4096"]
        cases.append((seed, extra))
    cases += [(101, ["--shard-tensors", "3"]), (102, ["--shard-bytes", "2000"]),
              (103, ["--shard-tensors", "2", "--alignment", "64"])]
    for seed, extra in cases:
        sharded = any(a.startswith("--shard") for a in extra)
        path = os.path.join(tmp, "ours_%d.gguf" % seed)
        p = subprocess.run([fixture, "--seed", str(seed), "-o", path] + extra, capture_output=True)
        if not check(p.returncode == 0, "write_fixture seed %d: %s" % (seed, p.stderr.decode(errors="replace"))):
            continue
        fx = json.loads(p.stdout)
        where = "dir2 seed %d" % seed
        n = fx["shards"]
        paths = ["%s-%05d-of-%05d.gguf" % (path[:-5], k + 1, n) for k in range(n)] if sharded else [path]
        for q in paths:
            check(os.path.exists(q), "%s: %s missing" % (where, q))
        alignment = fx["alignment"]
        want_kv = []
        if "--alignment" in extra:
            want_kv.append(("general.alignment", ("u32", alignment)))
        want_kv += [(bytes.fromhex(k).decode("utf-8"), typed_from_fixture(v)) for k, v in fx["kv"]]
        n_t = len(fx["tensors"])
        if sharded:
            want_kv += [("split.no", ("u16", 0)), ("split.count", ("u16", n)),
                        ("split.tensors.count", ("i32", n_t))]

        # gguf-py reads every shard.
        py_t = []
        for k, q in enumerate(paths):
            r = gguf.GGUFReader(q)
            check(r.alignment == alignment, "%s shard %d: gguf-py alignment %r" % (where, k, r.alignment))
            got = reader_fields(r)
            if k == 0:
                want = want_kv
            else:
                want = [("general.alignment", ("u32", alignment))] if alignment != 32 else []
                want += [("split.no", ("u16", k)), ("split.count", ("u16", n)),
                         ("split.tensors.count", ("i32", n_t))]
            if got != want:
                fail("%s shard %d: gguf-py KV differ from the fixture's intent" % (where, k))
                for (ka, va), (kb, vb) in zip(got, want):
                    if (ka, va) != (kb, vb):
                        print("  first difference: gguf-py %r=%r, intended %r=%r" % (ka, va, kb, vb),
                              file=sys.stderr)
                        break
            ts = reader_tensors(r, k)
            # llama.cpp's rule: offsets are the running padded sums within a shard.
            off = 0
            for t in ts:
                check(t["offset"] == off, "%s: tensor %s offset %d, running padded sum %d" %
                      (where, t["name"], t["offset"], off))
                off += pad(t["nbytes"], alignment)
            py_t += ts
        want_t = [{"name": t["name"], "type": QT(t["type"]).name, "shape": t["shape"],
                   "nbytes": t["nbytes"], "fnv1a64": t["fnv1a64"]} for t in fx["tensors"]]
        compare_tensors(py_t, want_t, where + " gguf-py vs intent")

        ours = inspect(sluice, paths[0])
        if ours is None:
            continue
        check(ours["alignment"] == alignment and ours["shards"] == n,
              "%s: sluice alignment/shards %r/%r" % (where, ours["alignment"], ours["shards"]))
        compare_inspect_kv(ours, want_kv, where + " sluice")
        compare_tensors(ours["tensors"], py_t, where + " sluice vs gguf-py")
    print("direction 2 (sluice writes, gguf-py reads): %d files checked" % len(cases))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--write-fixture", required=True)
    args = ap.parse_args()
    base = os.environ.get("TEST_TMPDIR") or None
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        direction1(os.path.abspath(args.sluice), tmp)
        direction2(os.path.abspath(args.sluice), os.path.abspath(args.write_fixture), tmp)
    if FAILURES:
        print("%d failures" % len(FAILURES), file=sys.stderr)
        return 1
    print("xcheck_gguf_py: all %d checks passed" % CHECKS[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
