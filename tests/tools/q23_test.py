"""Q2_K / Q3_K as weight types end to end (issue 28): mkmodel writes them (down projections whose
rows are not whole 256-blocks fall back to Q4_0, as llama.cpp's quantizer), the loader keeps
them as stored (no conversion to F32), every placement computes them (the CPU, and on the sim
device gpu / experts-cpu / layers with the same bits), requant converts to them, and their
logits are as near the F32 twin's as their bits allow (Q3_K nearer than Q2_K, Q4_K nearer
than Q3_K).

usage: q23_test.py SLUICE_BINARY
"""
import os
import sys
import tempfile

import numpy as np

from harness import expect, finish
from typekit import loaded_types, logits, run, types_of


def main():
    tmp = tempfile.mkdtemp(prefix="q23_test.", dir=os.environ.get("TEST_TMPDIR"))
    shape = ["--arch", "qwen2moe", "--layers", "2", "--dim", "256", "--ffn", "384",
             "--shared-ffn", "512", "--experts", "4", "--top-k", "2"]
    f32 = os.path.join(tmp, "f32.gguf")
    r = run("mkmodel", *shape, "-o", f32)
    expect(r.returncode == 0, f"mkmodel F32 ({r.stderr.strip()[-200:]})")
    ref = logits(f32, os.path.join(tmp, "f32.bin"), "--placement", "cpu")
    err = {}
    for ty in ("Q2_K", "Q3_K", "Q4_K"):
        path = os.path.join(tmp, f"{ty}.gguf")
        r = run("mkmodel", *shape, "--type", ty, "-o", path)
        if not expect(r.returncode == 0, f"mkmodel --type {ty} ({r.stderr.strip()[-200:]})"):
            continue
        t = types_of(path)
        # expert rows of 384 columns: the 32-block fallback; the shared expert's 512: whole
        want_down = {"Q4_K": "Q5_0"}.get(ty, "Q4_0")
        expect(t["blk.0.ffn_down_exps.weight"] == want_down and
               t["blk.1.ffn_down_shexp.weight"] == ty and
               t["blk.0.ffn_gate_exps.weight"] == ty and t["blk.0.attn_q.weight"] == ty and
               t["token_embd.weight"] == ty and t["blk.0.ffn_norm.weight"] == "F32",
               f"{ty}: matmul weights {ty}, expert down projections {want_down}, norms F32 "
               f"({t['blk.0.ffn_down_exps.weight']}, {t['blk.0.attn_q.weight']})")
        lt = loaded_types(path)
        expect(lt.get("blk.0.attn_q.weight") == ty and lt.get("blk.1.ffn_up_exps.weight") == ty
               and lt.get("blk.1.ffn_down_shexp.weight") == ty,
               f"{ty}: loaded as stored, not converted to F32 ({lt.get('blk.0.attn_q.weight')}, "
               f"{lt.get('blk.1.ffn_up_exps.weight')})")
        cpu = logits(path, os.path.join(tmp, f"{ty}-cpu.bin"), "--placement", "cpu")
        if ty != "Q4_K":
            for pl in (["--placement", "gpu"], ["--placement", "experts-cpu"],
                       ["--placement", "layers", "-ngl", "1"]):
                sim = logits(path, os.path.join(tmp, f"{ty}-{pl[1]}.bin"), *pl,
                             env={"SLUICE_DEVICE": "sim"})
                expect(cpu is not None and sim is not None and np.array_equal(cpu, sim),
                       f"{ty}: sim {' '.join(pl)} logits == CPU's, bit for bit")
            # 1 thread and 2 give the same bits (a row is summed by one thread)
            one = logits(path, os.path.join(tmp, f"{ty}-t1.bin"), "--placement", "cpu",
                         "-t", "1")
            expect(cpu is not None and one is not None and np.array_equal(cpu, one),
                   f"{ty}: -t 1 logits == the default threads', bit for bit")
        if cpu is not None and ref is not None:
            err[ty] = float(np.sqrt(((cpu - ref) ** 2).mean() / (ref ** 2).mean()))
    # fewer bits, farther from the F32 twin. Measured (this shape): Q2_K 0.755, Q3_K 0.354,
    # Q4_K 0.189
    if len(err) == 3:
        expect(err["Q4_K"] < err["Q3_K"] < err["Q2_K"] < 1.0,
               f"logits' RMS error vs F32: Q4_K {err['Q4_K']:.3f} < Q3_K {err['Q3_K']:.3f} < "
               f"Q2_K {err['Q2_K']:.3f} < 1")
    # requant: a Q8_0 file's expert gate/up to Q3_K and the shared experts' down to Q2_K
    q8 = os.path.join(tmp, "q8.gguf")
    r = run("mkmodel", *shape, "--type", "Q8_0", "-o", q8)
    out1, out2 = os.path.join(tmp, "rq1.gguf"), os.path.join(tmp, "rq2.gguf")
    r1 = run("requant", "-m", q8, "--tensor", r"blk\..*\.ffn_(gate|up)_exps\.weight", "--type",
             "Q3_K", "-o", out1)
    r2 = run("requant", "-m", out1, "--tensor", r"blk\..*\.ffn_down_shexp\.weight", "--type",
             "Q2_K", "-o", out2)
    ok = r.returncode == 0 and r1.returncode == 0 and r2.returncode == 0
    if expect(ok, f"requant to Q3_K / Q2_K ({r1.stderr.strip()[-200:]} "
              f"{r2.stderr.strip()[-200:]})"):
        t = types_of(out2)
        expect(t["blk.1.ffn_up_exps.weight"] == "Q3_K" and
               t["blk.1.ffn_down_shexp.weight"] == "Q2_K" and
               t["blk.1.attn_q.weight"] == "Q8_0",
               "requant: experts' gate/up Q3_K, shared down Q2_K, the rest kept")
        logits(out2, os.path.join(tmp, "rq.bin"), "--placement", "cpu")
    # rows that are not even 32-blocks: refused, naming the flag
    r = run("mkmodel", "--arch", "qwen2moe", "--dim", "256", "--ffn", "48", "--type", "Q3_K",
            "-o", os.path.join(tmp, "bad.gguf"))
    expect(r.returncode == 2 and "--ffn" in r.stderr,
           f"mkmodel --type Q3_K --ffn 48: exit 2 naming --ffn ({r.stderr.strip()[-200:]})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
