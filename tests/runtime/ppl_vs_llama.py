"""Manual parity check (issue 34): `sluice perplexity` against llama.cpp's llama-perplexity on
mkmodel's F32 files, every architecture mkmodel writes (or those named), within 1e-4 relative.

usage: python ppl_vs_llama.py SLUICE_BINARY [--llama DIR] [--ctx N] [--type T] [--tol R]
       [--mkflags "FLAGS"] [ARCH ...]

--mkflags adds mkmodel flags to every file (e.g. "--attn-temp 16" with deepseek2: Mistral Large
3's attention temperature; measured 2026-12-01, ctx 128: see the closing note). --type writes the
files in another weight type (default F32); --tol is the relative tolerance
(default 1e-4 for F32, 2e-3 for quantized types: both sides quantize activations to Q8 for
quantized weights, and llama.cpp's SIMD Q8 quantizers round ties to even where the reference
ones Sluice is bit-exact to round them away, so the logits differ in the last quant of a few
activations). Measured 2026-11-29, ctx 128, qwen2moe: IQ4_XS 6.1e-4, IQ4_NL 2.0e-4, Q4_K 8.3e-4,
Q4_0 3.1e-4, MXFP4 3.8e-4; every arch within 2e-3 for IQ4_NL/IQ4_XS but gemma3 (2.6e-3/6.4e-3;
Q4_K 5.6e-3: its PPL ~1e25..1e110 amplifies), deepseek2 (5.2e-3/5.9e-3; Q4_K 1.1e-2, Q4_0
3.0e-3) and mixtral IQ4_XS (2.2e-3): the same spread as the older quantized types.

DIR holds llama-perplexity (default: $SLUICE_PEER_LLAMA_BIN, else .peer/build-0.3.36-cpu/bin,
which tools/peer/llama.cpp builds); not a Bazel target (CI has no peer). The text is a fixed
pseudo-random word sequence (seeded), 4 chunks of --ctx tokens (default 128), 2 threads, F32 KV
cache on both sides. Exit 0 iff every architecture agrees. A peer built with -march=native on
another machine may die of an illegal instruction on quantized files; F32 files avoid it.
llama.cpp's log thread sometimes loses its last lines at exit, so it runs up to 3 times. Where
the two differ, llama.cpp runs again with -ub 1: on a file whose router sits near a tie its own
PPL depends on the micro-batch (measured 2026-12-01, bailingmoe2's default file: 787.9931 with
-ub 512, 789.0897 with -ub 32 and -ub 1; Sluice 789.0762), and the closer of the two counts.
Measured 2026-11-28 (llama.cpp 0c1e570, ctx 128): every architecture within 2.2e-05 but gemma3
(9.3e-05: its synthetic PPL is ~3e25, the scores at the edge of float32); qwen3next 709.2450 /
709.2445 (7.0e-07).
"""
import os
import random
import re
import subprocess
import sys
import tempfile

ARCHS = ("llama", "mixtral", "qwen3moe", "olmoe", "qwen2moe", "gemma3", "gpt-oss", "deepseek2",
         "qwen2", "qwen3", "gemma2", "granite", "phi3", "qwen3next", "glm4moe", "qwen35",
         "qwen35moe", "minimax-m2", "dots1", "bailingmoe2", "qwen3vl", "qwen3vlmoe",
         "ernie4_5", "ernie4_5-moe", "hunyuan-moe")
WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from "
         "at which but have an they you were her she there one all we their").split()


def final_ppl(text):
    m = re.findall(r"Final estimate: PPL = ([0-9.]+)", text)
    return float(m[-1]) if m else None


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    sluice, rest = args[0], args[1:]
    llama = os.environ.get("SLUICE_PEER_LLAMA_BIN", ".peer/build-0.3.36-cpu/bin")
    ctx, wtype, tol, mkflags = 128, "F32", None, []
    while rest and rest[0].startswith("--"):
        flag, val, rest = rest[0], rest[1], rest[2:]
        if flag == "--llama":
            llama = val
        elif flag == "--ctx":
            ctx = int(val)
        elif flag == "--type":
            wtype = val
        elif flag == "--tol":
            tol = float(val)
        elif flag == "--mkflags":
            mkflags = val.split()
        else:
            print(f"unknown flag {flag}")
            return 2
    archs = rest or ARCHS
    if tol is None:
        tol = 1e-4 if wtype == "F32" else 2e-3
    peer = os.path.join(llama, "llama-perplexity")
    if not os.access(peer, os.X_OK):
        print(f"no llama-perplexity in {llama} (tools/peer/llama.cpp builds it)")
        return 2
    tmp = tempfile.mkdtemp(prefix="ppl_vs_llama.")
    rng = random.Random(1)
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join(rng.choice(WORDS) for _ in range(6 * ctx)) + "\n")
    ok = True
    for arch in archs:
        model = os.path.join(tmp, f"{arch}.gguf")
        r = subprocess.run([sluice, "mkmodel", "--arch", arch, "--type", wtype, "--ctx",
                            str(max(ctx, 256)), *mkflags, "-o", model], capture_output=True,
                           text=True)
        if r.returncode:
            print(f"{arch}: mkmodel failed: {r.stderr.strip()}")
            ok = False
            continue
        ours = subprocess.run([sluice, "perplexity", "-m", model, "-f", text, "--ctx", str(ctx),
                               "--chunks", "4", "-t", "2", "-ctk", "f32"],
                              capture_output=True, text=True)

        def llama(extra):
            # llama.cpp's log thread sometimes loses its last lines at exit: up to 3 runs
            log = os.path.join(tmp, f"{arch}.llama.log")
            for _ in range(3):
                with open(log, "w") as f:
                    run = subprocess.run([peer, "-m", model, "-f", text, "-c", str(ctx),
                                          "--chunks", "4", "-t", "2", "-ctk", "f32", "-ctv",
                                          "f32", *extra], stdout=f, stderr=subprocess.STDOUT)
                with open(log) as f:
                    run.stderr = f.read()
                if final_ppl(run.stderr) is not None:
                    break
            return run

        theirs = llama([])
        a, b = final_ppl(ours.stdout + ours.stderr), final_ppl(theirs.stderr)
        if a is None or b is None:
            print(f"{arch}: no final estimate (sluice rc {ours.returncode}: "
                  f"{(ours.stdout + ours.stderr).strip()[-300:]}; llama rc {theirs.returncode}: "
                  f"{theirs.stderr.strip()[-300:]})")
            ok = False
            continue
        rel = abs(a - b) / b
        note = ""
        if rel > tol:
            # llama.cpp's own result can depend on its micro-batch (its batched and one-token
            # matmuls round apart, and a router near a tie picks other experts): its
            # one-token run (-ub 1, Sluice's decode order of operations per token) counts too
            b1 = final_ppl(llama(["-ub", "1"]).stderr)
            if b1 is not None and abs(a - b1) / b1 < rel:
                note = f"  (llama.cpp -ub 1: {b1:.4f}, rel {abs(a - b1) / b1:.1e})"
                rel = abs(a - b1) / b1
        good = rel <= tol
        ok &= good
        print(f"{arch:10s} sluice {a:.4f}  llama.cpp {b:.4f}  rel {rel:.1e}  "
              f"{'ok' if good else 'FAIL'}{note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
