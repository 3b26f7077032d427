"""IQ4_NL / IQ4_XS as weight types end to end (issue 28): mkmodel writes them (IQ4_XS falls back
to IQ4_NL for down projections whose rows are not whole 256-blocks, as llama.cpp's quantizer),
every placement computes them (the CPU, and on the sim device gpu / experts-cpu / layers with
the same bits), requant converts to them, and their logits stay near the F32 twin's.

usage: iq4_test.py SLUICE_BINARY
"""
import os
import sys
import tempfile

import numpy as np

from harness import expect, finish
from typekit import logits, run, types_of


def main():
    tmp = tempfile.mkdtemp(prefix="iq4_test.", dir=os.environ.get("TEST_TMPDIR"))
    shape = ["--arch", "qwen2moe", "--layers", "2", "--dim", "256", "--ffn", "384",
             "--shared-ffn", "416", "--experts", "4", "--top-k", "2"]
    f32 = os.path.join(tmp, "f32.gguf")
    r = run("mkmodel", *shape, "-o", f32)
    expect(r.returncode == 0, f"mkmodel F32 ({r.stderr.strip()[-200:]})")
    ref = logits(f32, os.path.join(tmp, "f32.bin"), "--placement", "cpu")
    q40 = os.path.join(tmp, "q4_0.gguf")
    r = run("mkmodel", *shape, "--type", "Q4_0", "-o", q40)
    base = logits(q40, os.path.join(tmp, "q4_0.bin"), "--placement", "cpu")
    for ty in ("IQ4_XS", "IQ4_NL"):
        path = os.path.join(tmp, f"{ty}.gguf")
        r = run("mkmodel", *shape, "--type", ty, "-o", path)
        if not expect(r.returncode == 0, f"mkmodel --type {ty} ({r.stderr.strip()[-200:]})"):
            continue
        t = types_of(path)
        # rows of 384 / 416 columns: IQ4_NL (32-blocks), as llama-quant.cpp's fallback
        want_down = "IQ4_NL"
        expect(t["blk.0.ffn_down_exps.weight"] == want_down and
               t["blk.1.ffn_down_shexp.weight"] == want_down and
               t["blk.0.ffn_gate_exps.weight"] == ty and t["blk.0.attn_q.weight"] == ty and
               t["token_embd.weight"] == ty and t["blk.0.ffn_norm.weight"] == "F32",
               f"{ty}: matmul weights {ty}, down projections {want_down}, norms F32")
        cpu = logits(path, os.path.join(tmp, f"{ty}-cpu.bin"), "--placement", "cpu")
        for pl in (["--placement", "gpu"], ["--placement", "experts-cpu"],
                   ["--placement", "layers", "-ngl", "1"]):
            sim = logits(path, os.path.join(tmp, f"{ty}-{pl[1]}.bin"), *pl,
                         env={"SLUICE_DEVICE": "sim"})
            expect(cpu is not None and sim is not None and np.array_equal(cpu, sim),
                   f"{ty}: sim {' '.join(pl)} logits == CPU's, bit for bit")
        if cpu is not None and ref is not None and base is not None:
            def rms(a):
                return float(np.sqrt(((a - ref) ** 2).mean() / (ref ** 2).mean()))
            # the non-linear table's point: nearer the F32 logits than Q4_0 (4.5 bits too) is.
            # Measured (this shape, seed 1): IQ4_NL 0.199, IQ4_XS 0.212, Q4_0 0.259, Q4_K 0.190
            expect(rms(cpu) < rms(base), f"{ty}: logits' RMS error vs F32 {rms(cpu):.3f} < "
                   f"Q4_0's {rms(base):.3f}")
    # requant: a Q8_0 file's expert tensors to IQ4_XS and IQ4_NL, then evaluated
    q8 = os.path.join(tmp, "q8.gguf")
    r = run("mkmodel", *shape, "--type", "Q8_0", "-o", q8)
    out1, out2 = os.path.join(tmp, "rq1.gguf"), os.path.join(tmp, "rq2.gguf")
    r1 = run("requant", "-m", q8, "--tensor", r"blk\..*\.ffn_(gate|up)_exps\.weight", "--type",
             "IQ4_XS", "-o", out1)
    r2 = run("requant", "-m", out1, "--tensor", r"blk\..*\.ffn_down_exps\.weight", "--type",
             "IQ4_NL", "-o", out2)
    ok = r.returncode == 0 and r1.returncode == 0 and r2.returncode == 0
    if expect(ok, f"requant to IQ4_XS / IQ4_NL ({r1.stderr.strip()[-200:]} "
              f"{r2.stderr.strip()[-200:]})"):
        t = types_of(out2)
        expect(t["blk.1.ffn_up_exps.weight"] == "IQ4_XS" and
               t["blk.1.ffn_down_exps.weight"] == "IQ4_NL" and t["blk.1.attn_q.weight"] == "Q8_0",
               "requant: experts IQ4_XS / IQ4_NL, the rest kept")
        logits(out2, os.path.join(tmp, "rq.bin"), "--placement", "cpu")
    # IQ4_XS down rows that are not even 32-blocks: refused, naming the flag
    r = run("mkmodel", "--arch", "qwen2moe", "--dim", "256", "--ffn", "48", "--type", "IQ4_XS",
            "-o", os.path.join(tmp, "bad.gguf"))
    expect(r.returncode == 2 and "--ffn" in r.stderr,
           f"mkmodel --type IQ4_XS --ffn 48: exit 2 naming --ffn ({r.stderr.strip()[-200:]})")
    r = run("mkmodel", "--arch", "llama", "--dim", "96", "--type", "IQ4_XS",
            "-o", os.path.join(tmp, "bad.gguf"))
    expect(r.returncode == 2 and "--dim" in r.stderr,
           f"mkmodel --type IQ4_XS --dim 96: exit 2 naming --dim ({r.stderr.strip()[-200:]})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
