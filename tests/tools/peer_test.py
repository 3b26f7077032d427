"""Tests of `sluice bench compare` (llama.cpp beside Sluice, issue 14) and of the demo's
fallback, without llama.cpp and without network.

llama.cpp's tools are replaced by fakes in a temporary folder named by SLUICE_PEER_LLAMA_BIN:
llama-bench prints the JSON a real llama-bench (llama.cpp 0c1e570, built by tools/peer/llama.cpp)
printed (tests/tools/data/llama_bench_0c1e570.json) with the test sizes, threads and speeds of
the call; llama-perplexity prints the end of a real log; llama-completion prints a given text.
Checked: the table (llama-bench's columns, a Sluice row under each llama.cpp row, the ratio),
--json (samples per side = rounds, means, stddevs, ratio), the agreement lines, and failures
(no llama.cpp, a failing or lying llama-bench) exit 1 naming the cause.

usage: peer_test.py SLUICE_BINARY RECORDED_JSON
"""
import json
import math
import os
import re
import stat
import subprocess
import sys
import tempfile

from harness import SLUICE, expect, finish

RECORDED = os.path.abspath(sys.argv[2])

FAKE_BENCH = r'''#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
opt = lambda k, d: a[a.index(k) + 1] if k in a else d
mode = os.environ.get("FAKE_MODE", "")
if mode == "fail":
    print("llama-bench: error: failed to load model", file=sys.stderr)
    sys.exit(1)
if mode == "garbage":
    print("[{not json")
    sys.exit(0)
rec = json.load(open(os.environ["FAKE_RECORDED"]))
pp = next(r for r in rec if r["n_prompt"] > 0 and r["n_gen"] == 0)
tg = next(r for r in rec if r["n_gen"] > 0 and r["n_prompt"] == 0)
p, n, t = int(opt("-p", "512")), int(opt("-n", "128")), int(opt("-t", "4"))
d = int(opt("-d", "0"))
reps = int(opt("-r", "5"))
out = []
for row, np_, ng, ts in ((pp, p, 0, 600.0), (tg, 0, n, 75.0)):
    if np_ == 0 and ng == 0:
        continue
    r = dict(row)
    r.update(model_filename=opt("-m", ""), n_prompt=np_, n_gen=ng, n_depth=d, avg_ts=ts,
             stddev_ts=0.0,
             n_threads=t + (1 if mode == "threads" else 0),
             samples_ts=[ts] * reps, samples_ns=[int(1e9 * max(np_, ng) / ts)] * reps)
    if mode == "nofield":
        del r["avg_ts"]
    out.append(r)
print(json.dumps(out, indent=2))
'''

FAKE_PPL = r'''#!/usr/bin/env python3
import sys
print("perplexity: calculating perplexity over 4 chunks, n_ctx=512, batch_size=2048",
      file=sys.stderr)
print("[1]13.9501,[2]15.2313,[3]14.9917,[4]15.1743,", file=sys.stderr)
print("Final estimate: PPL = 15.1743 +/- 0.53128", file=sys.stderr)
'''

FAKE_COMPLETION = r'''#!/usr/bin/env python3
import os, sys
sys.stdout.write(open(os.environ["FAKE_TEXT"]).read() + " [end of text]\n" + "\n\n")
'''


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def run(*args, env=None):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True,
                          errors="replace", env=env)


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-peer-test-", dir=os.environ.get("TEST_TMPDIR"))
    fake = os.path.join(tmp, "bin")
    os.mkdir(fake)
    write_exe(os.path.join(fake, "llama-bench"), FAKE_BENCH)
    write_exe(os.path.join(fake, "llama-perplexity"), FAKE_PPL)
    write_exe(os.path.join(fake, "llama-completion"), FAKE_COMPLETION)
    model = os.path.join(tmp, "m.gguf")
    r = run("mkmodel", "--arch", "llama", "-o", model)
    if r.returncode:
        sys.exit(f"mkmodel failed: {r.stderr}")
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join(["the quick brown fox jumps over the lazy dog"] * 60) + "\n")
    # the fake completion prints Sluice's own greedy text: all tokens must agree
    r = run("generate", "-m", model, "-p", "Hello", "-n", "6", "--temp", "0", "--json", "-t", "1")
    greedy_text = json.loads(r.stdout)["text"] if r.returncode == 0 else ""
    expect(r.returncode == 0 and greedy_text, f"generate --json for the fake ({r.stderr[-200:]})")
    fake_text = os.path.join(tmp, "greedy.txt")
    with open(fake_text, "w") as f:
        f.write(greedy_text)
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_ROOT", "FAKE_MODE")}
    env.update(SLUICE_PEER_LLAMA_BIN=fake, FAKE_RECORDED=RECORDED, FAKE_TEXT=fake_text)

    # ---- the table ----
    r = run("bench", "compare", "-m", model, "-p", "16", "-n", "8", "-t", "1", "-r", "2", env=env)
    lines = r.stdout.splitlines()
    rows = [l for l in lines if l.startswith("| ") and ("pp16" in l or "tg8" in l)]
    rec = json.load(open(RECORDED))
    header = next((l for l in lines if l.startswith("| model")), "")
    expect(r.returncode == 0 and [c.strip() for c in header.strip("|").split("|")] ==
           ["model", "size", "params", "backend", "threads", "test", "t/s", "sluice/llama"],
           f"bench compare prints llama-bench's columns and the ratio ({r.stderr[-300:]})")
    expect(len(rows) == 4 and "| CPU " in rows[0] and "Sluice CPU" in rows[1] and
           "pp16" in rows[0] and "tg8" in rows[2] and "600.00 ± 0.00" in rows[0] and
           "75.00 ± 0.00" in rows[2] and rec[0]["model_type"] in rows[0],
           f"a llama.cpp row then a Sluice row per test, llama-bench's numbers ({rows})")
    expect(all(len(l) == len(header) for l in rows), "rows as wide as the header")
    ratio_ok = True
    for i in (1, 3):
        cells = [c.strip() for c in rows[i].strip("|").split("|")]
        mean = float(cells[6].split("±")[0])
        ref = 600.0 if i == 1 else 75.0
        ratio_ok &= abs(float(cells[7]) - mean / ref) < 0.006
    expect(ratio_ok, "the ratio column is Sluice's mean / llama.cpp's")

    # ---- --json and the agreement checks ----
    r = run("bench", "compare", "-m", model, "-p", "16", "-n", "8", "-t", "1", "-r", "3",
            "--json", "--perplexity", text, "--ctx", "64", "--chunks", "2",
            "--greedy", "Hello", "--greedy-n", "6", env=env)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    rows = j.get("rows", [])
    expect(r.returncode == 0 and [x["test"] for x in rows] == ["pp16", "tg8"] and
           j.get("threads") == 1 and j.get("repetitions") == 3,
           f"bench compare --json: pp16 and tg8 ({r.stderr[-300:]})")
    ok = len(rows) == 2
    for x in rows:
        s = x["sluice_samples"]
        mean = sum(s) / len(s)
        sd = math.sqrt(sum((v - mean) ** 2 for v in s) / (len(s) - 1))
        ok &= (len(x["llama_samples"]) == 3 and len(s) == 3 and all(v > 0 for v in s) and
               abs(x["sluice_tps"] - mean) < 1e-9 * mean and
               abs(x["sluice_tps_stddev"] - sd) < 1e-6 * mean + 1e-12 and
               abs(x["ratio"] - mean / x["llama_tps"]) < 1e-12)
    expect(ok, "3 samples per side and test; mean, sample stddev and ratio as llama-bench's")
    expect(j.get("llama_cpp", {}).get("build_commit") == rec[0]["build_commit"] and
           j.get("llama_cpp", {}).get("model_type") == rec[0]["model_type"],
           "llama-bench's build and model type carried into the JSON")
    ppl = j.get("perplexity", {})
    expect(ppl.get("llama") == 15.1743 and ppl.get("llama_stderr") == 0.53128 and
           ppl.get("sluice", 0) > 1, f"perplexity of both sides ({ppl})")
    g = j.get("greedy", {})
    expect(g.get("llama_text") == greedy_text and g.get("sluice_text") == greedy_text and
           g.get("same_tokens", -1) == g.get("sluice_tokens") and g.get("same_tokens", 0) > 0,
           f"greedy: the same text, every token agrees ({ {k: g.get(k) for k in g} })")

    # ---- several prompt sizes (-p 16,32: one llama-bench per size) and the medians ----
    r = run("bench", "compare", "-m", model, "-p", "16,32", "-n", "8", "-t", "1", "-r", "3",
            "--json", env=env)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    rows = j.get("rows", [])
    expect(r.returncode == 0 and [x["test"] for x in rows] == ["pp16", "pp32", "tg8"],
           f"-p 16,32 -n 8: pp16, pp32 and tg8 ({r.stderr[-300:]})")
    ok = len(rows) == 3
    for x in rows:
        s = sorted(x["sluice_samples"])
        ok &= (x["llama_samples"] == [600.0 if x["n_prompt"] else 75.0] * 3 and
               x["sluice_tps_median"] == s[1] and
               x["llama_tps_median"] == (600.0 if x["n_prompt"] else 75.0) and
               abs(x["ratio_median"] - s[1] / x["llama_tps_median"]) < 1e-12)
    expect(ok, "each prompt size its own llama-bench samples; medians and their ratio")
    # ---- -d: llama-bench -d D, and Sluice evaluates D tokens before each test ----
    r = run("bench", "compare", "-m", model, "-p", "16", "-n", "8", "-d", "24", "-t", "1",
            "-r", "2", "--json", env=env)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    rows = j.get("rows", [])
    expect(r.returncode == 0 and [x["test"] for x in rows] == ["pp16 @ d24", "tg8 @ d24"] and
           all(x["n_depth"] == 24 and len(x["sluice_samples"]) == 2 for x in rows),
           f"-d 24: llama-bench's depth rows matched, Sluice's samples at depth 24 "
           f"({r.stderr[-300:]})")
    for bad in ("-1", "x", "2000000"):
        r = run("bench", "compare", "-m", model, "-d", bad, env=env)
        expect(r.returncode == 2 and "-d" in r.stderr, f"-d {bad}: exit 2 naming -d")
    for bad in ("16,16", "16,0", "1,2,3,4,5", ",", "16,x"):
        r = run("bench", "compare", "-m", model, "-p", bad, env=env)
        expect(r.returncode == 2 and "-p" in r.stderr, f"-p {bad}: exit 2 naming -p")

    # ---- the sweep's sample (--dry-run: no files, no runs) ----
    def sweep_rows(*extra):
        r = run("bench", "compare", "--sweep", "--dry-run", *extra)
        rows = [[c.strip() for c in l.strip().strip("|").split("|")]
                for l in r.stdout.splitlines() if re.match(r"^\|\s+\d+ \|", l)]
        return r, rows
    r, rows = sweep_rows()
    run_rows = [x for x in rows if x[7] != "skipped"]
    expect(r.returncode == 0 and len(rows) == 8 and len(run_rows) == 8,
           f"--sweep --dry-run: 8 rows, all to run ({r.stdout[-400:]} {r.stderr[-300:]})")
    axes = {1: {"off", "on"}, 2: {"8", "32", "64", "128"}, 3: {"2", "4", "6", "8"},
            4: {"256", "384", "768", "1408", "2048"}, 5: {"768", "1024", "2048"}}
    covered = all({x[c] for x in run_rows} == v for c, v in axes.items())
    types = {x[6].split("/")[0] for x in run_rows}
    expect(covered and types == {"Q4_K", "Q5_K", "Q6_K", "Q8_0", "MXFP4", "IQ4_XS"},
           f"every value of every axis in a row that runs ({rows})")
    expect(not [x for x in rows if x[7] == "skipped"], "no row skipped (IQ4_XS has a quantizer)")
    down_ok = all(("/down " in x[6]) == (x[6].startswith(("Q4_K", "Q5_K", "Q6_K", "IQ4_XS")) and
                                         int(x[4]) % 256 != 0) for x in run_rows)
    expect(down_ok, "K-quant / IQ4_XS rows whose FFN is not whole 256-blocks name their down "
           "type")
    _, again = sweep_rows()
    _, other = sweep_rows("--seed", "2")
    expect(again == rows and other != rows, "the sample is the seed's: same seed, same rows")
    r, trows = sweep_rows("--types", "Q2_K,Q3_K")
    expect(r.returncode == 0 and len(trows) == 8 and
           {x[6].split("/")[0] for x in trows} == {"Q2_K", "Q3_K"} and
           all(("/down Q4_0" in x[6]) == (int(x[4]) % 256 != 0) for x in trows),
           f"--types Q2_K,Q3_K: 8 rows of those two, down Q4_0 where the FFN is not whole "
           f"256-blocks ({trows})")
    for args, flag in ((["--rows", "0"], "--rows"), (["--baseline", "/nonexistent"],
                                                     "--baseline"), (["-t", "0"], "-t"),
                       (["--types", "Q2_K,IQ2_XXS"], "--types"),
                       (["--types", "Q3_K,Q3_K"], "--types"), (["--types", ","], "--types"),
                       (["--types", "Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q8_0,MXFP4"], "--types")):
        r = run("bench", "compare", "--sweep", "--dry-run", *args)
        expect(r.returncode == 2 and flag in r.stderr, f"--sweep {args}: exit 2 naming {flag}")

    # ---- failures ----
    no_peer = {k: v for k, v in env.items() if k != "SLUICE_PEER_LLAMA_BIN"}
    r = run("bench", "compare", "-m", model, "-r", "1", env=no_peer)
    expect(r.returncode == 1 and "tools/peer/llama.cpp" in r.stderr,
           f"no llama.cpp: exit 1 saying how to build it ({r.stderr.strip()})")
    r = run("bench", "compare", "-m", model, "-r", "1",
            env={**no_peer, "SLUICE_PEER_LLAMA_BIN": os.path.join(tmp, "nope")})
    expect(r.returncode == 1 and "SLUICE_PEER_LLAMA_BIN" in r.stderr,
           f"SLUICE_PEER_LLAMA_BIN not a folder: exit 1 ({r.stderr.strip()})")
    for mode, needle in (("fail", "failed to load model"), ("garbage", "llama-bench JSON"),
                         ("nofield", "avg_ts"), ("threads", "threads")):
        r = run("bench", "compare", "-m", model, "-p", "8", "-n", "4", "-t", "1", "-r", "1",
                env={**env, "FAKE_MODE": mode})
        expect(r.returncode == 1 and needle in r.stderr,
               f"llama-bench {mode}: exit 1 naming '{needle}' ({r.stderr.strip()[-200:]})")
    for args, flag in ((["-r", "0"], "-r"), (["-p", "0", "-n", "0"], "-p 0"),
                       (["--placement", "gpu"], "--placement"), (["--bogus"], "--bogus")):
        r = run("bench", "compare", "-m", model, *args, env=env)
        expect(r.returncode == 2 and flag in r.stderr, f"bench compare {args}: exit 2")
    r = run("bench", "compare", "-m", os.path.join(tmp, "missing.gguf"), env=env)
    expect(r.returncode == 1 and "missing.gguf" in r.stderr, "a missing model: exit 1 naming it")

    # ---- the demo's fallback: Gemma cannot be set up (no checkout, nothing cached) ----
    denv = {k: v for k, v in os.environ.items()
            if k not in ("SLUICE_DEMO_MODEL", "SLUICE_PEER_LLAMA_BIN")}
    denv.update(SLUICE_ROOT=os.path.join(tmp, "no-checkout"), SLUICE_DEVICE="sim")
    r = run("demo", "--dir", tmp, "-n", "4", "-t", "1", env=denv)
    trace = os.path.join(tmp, "sluice-demo-trace.json")
    expect(r.returncode == 0 and "instead of Gemma" in r.stdout and "== 3." in r.stdout and
           "llama-bench's tg" in r.stdout and "== 4." in r.stdout and "auto+cache" in r.stdout
           and "== done" in r.stdout,
           f"demo falls back to the synthetic model and runs to the end ({r.stderr[-400:]})")
    try:
        tj = json.load(open(trace))
        trace_ok = bool(tj.get("traceEvents") if isinstance(tj, dict) else tj)
    except (OSError, ValueError):
        trace_ok = False
    expect(trace_ok and trace in r.stdout, "demo writes the Perfetto trace it names")
    r = run("demo", "--dir", tmp, "-n", "4", "-t", "1",
            env={**denv, "SLUICE_DEMO_MODEL": "synthetic"})
    expect(r.returncode == 0 and "SLUICE_DEMO_MODEL=synthetic" in r.stdout,
           f"SLUICE_DEMO_MODEL=synthetic skips Gemma ({r.stderr[-200:]})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
