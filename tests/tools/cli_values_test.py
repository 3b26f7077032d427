"""Hostile values and flags on the CLI (issue 16, cases 7-11): pins beyond the model, NaN/Inf in a
KL-divergence base, blanks around numbers in SLUICE_* variables, sampler values the engine
refuses, contradictory and repeated flags. Each must exit non-zero (never by a signal) with a
message naming the culprit; the same runs with good values still succeed with unchanged output.

usage: cli_values_test.py SLUICE_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from harness import SLUICE, VOCAB, expect, finish


def run(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    e.update(env or {})
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, env=e)


def first_line(r):
    err = r.stderr.decode(errors="replace").strip()
    return err.splitlines()[0] if err else ""


def refused(r, rc, needles, what):
    err = r.stderr.decode(errors="replace")
    ok = r.returncode == rc and all(n in err for n in needles)
    expect(ok, f"{what}: exit {r.returncode} (want {rc}), names {needles}: {first_line(r)}")
    expect(r.returncode >= 0, f"{what}: no signal")
    expect("sampler: sampler:" not in err, f"{what}: no doubled prefix")


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-values-test-", dir=os.environ.get("TEST_TMPDIR"))
    m = os.path.join(tmp, "m.gguf")    # qwen3moe: 2 layers of experts
    d = os.path.join(tmp, "d.gguf")    # llama: dense
    for path, flags in ((m, []), (d, ["--arch", "llama"])):
        r = run("mkmodel", "-o", path, *flags)
        if r.returncode:
            sys.exit(f"mkmodel failed: {r.stderr}")
    text = os.path.join(tmp, "text.txt")
    words = "the quick brown fox jumps over a lazy dog near the old harbour".split()
    with open(text, "w") as f:
        f.write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(900)) + "\n")
    gen = ["generate", "-m", m, "-p", "the quick brown fox", "-n", "4"]
    sim = {"SLUICE_DEVICE": "sim"}

    # ---- 7: pins name model parts: checked against the model once it is open ----
    refused(run(*gen, "--sched", "mode=post pin=99:99", env=sim), 2,
            ["pin=99:99", "layer 99", "layers [0, 1]"], "--sched pin=99:99")
    refused(run(*gen, "--sched", "mode=post pin=0:99", env=sim), 2,
            ["pin=0:99", "expert 99", "experts [0, "], "--sched pin=0:99")
    refused(run(*gen, "--sched", "mode=post", env={**sim, "SLUICE_POSTFETCH_PIN": "99:99"}), 2,
            ["SLUICE_POSTFETCH_PIN=99:99", "layer 99"], "SLUICE_POSTFETCH_PIN=99:99")
    refused(run(*gen, env={"SLUICE_POSTFETCH_PIN": "1:2:3"}), 2,
            ["SLUICE_POSTFETCH_PIN", "'1:2:3'", "expert"], "SLUICE_POSTFETCH_PIN=1:2:3")
    refused(run("generate", "-m", d, "-p", "x", "-n", "1", "--sched", "pin=0:0"), 2,
            ["pin=0:0", "no experts"], "pin on a dense model")

    # ---- 8: NaN/Inf in a logits file read back ----
    base = os.path.join(tmp, "base.bin")
    ppl = ["perplexity", "-m", m, "-f", text, "--ctx", "64", "--chunks", "2"]
    r = run(*ppl, "--logits-out", base)
    expect(r.returncode == 0 and os.path.getsize(base) == 2 * 31 * VOCAB * 4,
           f"perplexity --logits-out ({first_line(r)})")
    rows = np.fromfile(base, dtype="<f4")
    for name, value, at in (("nan", np.nan, 0), ("inf", np.inf, 3 * VOCAB + 7),
                            ("-inf", -np.inf, 40 * VOCAB + 511)):
        bad = os.path.join(tmp, f"base-{name}.bin")
        b = rows.copy()
        b[at] = value
        b.tofile(bad)
        row, col = divmod(at, VOCAB)
        r = run(*ppl, "--kl-divergence-base", bad)
        refused(r, 1, [bad, f"row {row} ", f"column {col} ", name], f"KL base with {name}")
        expect(b"KLD" not in r.stdout, f"KL base with {name}: no KLD printed")
    r = run(*ppl, "--kl-divergence-base", base)
    expect(r.returncode == 0 and b"Mean    KLD:   0.000000" in r.stdout,
           f"KL base, finite: KLD 0 against itself ({first_line(r)})")

    # ---- 9: numbers in SLUICE_* variables follow the one grammar ----
    mt = "SLUICE_POSTFETCH_MAX_TRANSFERS"
    for var, val in ((mt, " 5"), (mt, "5 "), (mt, "5x"), (mt, "+5"), (mt, "0x10"), (mt, ""),
                     ("SLUICE_POSTFETCH_CACHE_MB", "99999999999999999999999"),
                     ("SLUICE_POSTFETCH_ENABLE", " 1"), ("SLUICE_ACT_F32", "")):
        refused(run(*gen, env={var: val}), 2, [var, f"'{val}'"], f"{var}='{val}'")
    refused(run(*gen, env={"SLUICE_SIM_H2D_GBS": " 1", **sim}), 1,
            ["SLUICE_SIM_H2D_GBS", "' 1'"], "SLUICE_SIM_H2D_GBS=' 1'")

    # ---- 10: the CLI's ranges are the engine's ----
    for flag, val, rng in (("--top-p", "0", "(0, 1]"), ("--top-p", "1.5", "(0, 1]"),
                           ("--min-p", "-0.1", "[0, 1]"), ("--temp", "1e39", "3.40282e+38"),
                           ("--temp", "inf", "number"), ("--top-k", "2147483648", "2147483647"),
                           ("-c", "16777217", "16777216"), ("-b", "-1", "[0, 16777216]"),
                           ("-t", "1025", "[0, 1024]"), ("-ngl", " 1", "blank"),
                           ("--seed", "-1", "18446744073709551615")):
        refused(run(*gen, flag, val), 2, [f"{flag}: '{val}'", rng], f"{flag} {val}")

    # ---- 11: contradictory flags, flags given twice ----
    for extra, needles in (
            (["-ngl", "1", "--placement", "cpu"], ["-ngl 1", "--placement cpu"]),
            (["--placement", "cpu", "--gpu-layers=1"], ["--gpu-layers 1", "--placement cpu"]),
            (["--sched", "mode=post", "--placement", "cpu"], ["--sched mode=post",
                                                              "--placement cpu"]),
            (["--numa-node", "0", "--cpus", "0"], ["--numa-node 0", "--cpus 0"]),
            (["-ctk", "f16", "-ctv", "f32"], ["-ctk f16", "-ctv f32"]),
            (["-m", m], ["-m given twice"]),
            (["--model", m], ["--model given twice (first as -m)"]),
            (["-n", "4"], ["-n given twice"]),
            (["--temp", "0", "--temp=0"], ["--temp given twice"])):
        refused(run(*gen, *extra), 2, needles, " ".join(os.path.basename(x) for x in extra))
    for cmd in (["perplexity", "-m", m, "-f", text], ["eval", "-m", m, "--tokens", "1"],
                ["bench", "decode", "-m", m], ["bench", "moe", "-m", m]):
        refused(run(*cmd, "-t", "1", "--threads", "2"), 2, ["--threads given twice"],
                f"{cmd[0]} -t twice")
    r = run("generate", "--help")
    expect(r.returncode == 0 and b"Each flag may" in r.stdout and b"contradict" in r.stdout,
           "generate --help documents repeats and contradictions")

    # ---- good values: same output as before ----
    def text_tokens(r):
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        return j.get("text"), j.get("tokens")

    r0 = run(*gen, "--temp", "0", "--json")
    expect(r0.returncode == 0, f"generate greedy ({first_line(r0)})")
    for extra in (["--temp", "0", "--top-p", "1"], ["--temp", "-1"],
                  ["--temp", "0", "-c", "0", "-b", "0", "-t", "0"],
                  ["--temp=0", "-ctk", "f16", "-ctv", "f16"],
                  ["--temp", "0", "--sched", "pin=0:1,1:3"]):
        r = run(*gen, "--json", *extra)
        expect(r.returncode == 0 and text_tokens(r) == text_tokens(r0),
               f"generate {' '.join(extra)}: same text as without ({first_line(r)})")
    r = run(*gen, "--temp", "0", "-h", "--help")
    expect(r.returncode == 0 and b"usage:" in r.stdout, "-h and --help together: help (repeatable)")
    toks = "1,17,300,5,9,100"
    lc, lp = os.path.join(tmp, "cpu.bin"), os.path.join(tmp, "post.bin")
    r = run("eval", "-m", m, "--tokens", toks, "--placement", "experts-cpu", "--logits-out", lc,
            env=sim)
    expect(r.returncode == 0, f"eval experts-cpu ({first_line(r)})")
    r = run("eval", "-m", m, "--tokens", toks, "--placement", "experts-cpu", "--sched",
            "mode=post pin=0:1,1:2", "--logits-out", lp,
            env={**sim, "SLUICE_POSTFETCH_MAX_TRANSFERS": "5"})
    expect(r.returncode == 0 and open(lc, "rb").read() == open(lp, "rb").read(),
           f"eval mode=post with pins and MAX_TRANSFERS=5: bit-exact logits ({first_line(r)})")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
