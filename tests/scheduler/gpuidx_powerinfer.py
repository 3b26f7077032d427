"""A .gpuidx written the way PowerInfer's tool writes it loads; ours is the same file.

PowerInfer's powerinfer-py/powerinfer/export_split.py (SJTU-IPADS/PowerInfer) builds the index
with gguf-py: GGUFWriter(path, "generic.gpu_index"), per layer a 1-D int32 tensor
blk.N.gpu_idx (0/1 per neuron, the top-k of the activation counts set to 1) and blk.N.gpu_bucket
(those indices, sorted), raw_dtype I32; then add_block_count(n_layer) and
add_uint64("split.vram_capacity", budget); after writing it overwrites the first 8 bytes with
the magic "PWRI" and version 3. This script does the same with PyPI's gguf (the writer
PowerInfer vendors is an older copy of it; the file layout is the same) and checks:
  1. our reader loads it (layers, hot lists, vram capacity, "not split" layers);
  2. our writer, given the same index, produces the same bytes;
  3. with --gguf-magic our file is a plain GGUF that gguf-py's reader reads back;
  4. a malformed index written by gguf-py is refused with a message naming layer and value.

Usage: gpuidx_powerinfer.py --tool PATH
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import gguf

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def powerinfer_export(path, activations, counts, vram_capacity, bucket_override=None):
    """export_split.py's steps, minus torch: top-k by activation, mask, sorted bucket."""
    w = gguf.GGUFWriter(path, "generic.gpu_index")
    for i, (act, k) in enumerate(zip(activations, counts)):
        order = np.argsort(-act, kind="stable")[:k]
        gpu_idx = np.zeros(act.shape, dtype=np.int32)
        gpu_idx[order] = 1
        w.add_tensor(f"blk.{i}.gpu_idx", gpu_idx, raw_shape=gpu_idx.shape[::-1],
                     raw_dtype=gguf.GGMLQuantizationType.I32)
        bucket = np.sort(order.astype(np.int32))
        if bucket_override and i in bucket_override:
            bucket = np.array(bucket_override[i], dtype=np.int32)
        w.add_tensor(f"blk.{i}.gpu_bucket", bucket, raw_shape=bucket.shape[::-1],
                     raw_dtype=gguf.GGMLQuantizationType.I32)
    w.add_block_count(len(activations))
    # PowerInfer's gguf-py names it Keys.Split.VRAM_CAPACITY; upstream's has no such key.
    w.add_uint64("split.vram_capacity", vram_capacity)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.write(struct.pack("<I", int.from_bytes(b"PWRI", "little")))
        f.write(struct.pack("<I", 3))
    return [sorted(int(x) for x in np.sort(np.argsort(-a, kind="stable")[:k]))
            for a, k in zip(activations, counts)]


def run_tool(tool, *args):
    p = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
    out = p.stdout.strip()
    return p.returncode, (json.loads(out) if out.startswith("{") else {"raw": out + p.stderr})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    tool = os.path.abspath(ap.parse_args().tool)
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as d:
        # Widths as a model's FFN; layer 1 keeps nothing hot and layer 3 everything: not split.
        widths = [64, 48, 64, 32, 80]
        counts = [20, 0, 33, 32, 1]
        acts = [rng.random(n).astype(np.float32) ** 3 for n in widths]
        pi = os.path.join(d, "model.gguf.generated.gpuidx")
        hot = powerinfer_export(pi, acts, counts, 7 << 30)
        with open(pi, "rb") as f:
            pi_bytes = f.read()
        check(pi_bytes[:8] == b"PWRI" + struct.pack("<I", 3), "PowerInfer magic stamped")

        rc, got = run_tool(tool, "read", pi, len(widths), ",".join(map(str, widths)))
        if check(rc == 0, f"our reader loads PowerInfer's file: {got}"):
            check(got["n_layer"] == len(widths), "layer count")
            check(got["vram_capacity"] == 7 << 30, "split.vram_capacity")
            for i, L in enumerate(got["layers"]):
                check(L["n_neuron"] == widths[i], f"layer {i} width")
                check(L["hot"] == hot[i], f"layer {i} hot list")
                check(L["split"] == (0 < counts[i] < widths[i]), f"layer {i} split flag")

        ours = os.path.join(d, "ours.gpuidx")
        spec = [f"{n}:" + ",".join(map(str, h)) for n, h in zip(widths, hot)]
        rc, got = run_tool(tool, "write", ours, 7 << 30, *spec)
        check(rc == 0, f"our writer: {got}")
        with open(ours, "rb") as f:
            ours_bytes = f.read()
        check(ours_bytes == pi_bytes,
              f"our file equals PowerInfer's ({len(ours_bytes)} vs {len(pi_bytes)} bytes)")

        plain = os.path.join(d, "plain.gpuidx")
        rc, got = run_tool(tool, "write", plain, 12345, "--gguf-magic", *spec)
        check(rc == 0, f"our writer (GGUF magic): {got}")
        r = gguf.GGUFReader(plain)
        arch = r.fields["general.architecture"]
        check(bytes(arch.parts[arch.data[0]]).decode() == "generic.gpu_index", "architecture")
        bc = r.fields["generic.gpu_index.block_count"]
        check(int(bc.parts[bc.data[0]][0]) == len(widths), "block_count")
        vc = r.fields["split.vram_capacity"]
        check(int(vc.parts[vc.data[0]][0]) == 12345, "vram capacity")
        names = [t.name for t in r.tensors]
        want = [f"blk.{i}.{k}" for i in range(len(widths)) for k in ("gpu_idx", "gpu_bucket")]
        check(names == want, f"tensor order {names}")
        for t in r.tensors:
            i = int(t.name.split(".")[1])
            check(t.tensor_type == gguf.GGMLQuantizationType.I32, f"{t.name} type")
            vals = [int(x) for x in np.asarray(t.data).reshape(-1)]
            if t.name.endswith("gpu_idx"):
                check(vals == [1 if j in set(hot[i]) else 0 for j in range(widths[i])],
                      f"{t.name} mask")
            else:
                check(vals == hot[i], f"{t.name} bucket")

        # A model with another width, and a bucket that names a cold neuron.
        rc, got = run_tool(tool, "read", pi, len(widths), "64,48,64,32,81")
        check(rc == 1 and "layer 4" in got.get("error", "") and "81" in got.get("error", ""),
              f"width mismatch refused: {got}")
        rc, got = run_tool(tool, "read", pi, 4)
        check(rc == 1 and "layer count mismatch" in got.get("error", ""),
              f"layer count refused: {got}")
        bad = os.path.join(d, "bad.gpuidx")
        h2 = hot[2]
        cold = next(j for j in range(widths[2]) if j not in set(h2))
        powerinfer_export(bad, acts, counts, 1, {2: sorted(h2[:-1] + [cold])})
        rc, got = run_tool(tool, "read", bad)
        err = got.get("error", "")
        check(rc == 1 and "layer 2" in err and "disagree" in err and f"= {cold}" in err,
              f"disagreeing bucket refused: {got}")

    print(f"gpuidx_powerinfer: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
