"""Tests of `sluice generate`, `perplexity`, `eval`, `bench decode`, `bench moe` and `demo` on
mkmodel models.

usage: cli_test.py SLUICE_BINARY
"""
import codecs
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from harness import SLUICE, VOCAB, expect, finish


# Generated text is whatever bytes the synthetic weights pick, not always valid UTF-8; decode an
# invalid byte b as U+00bb, the same convention as the CLI's JSON strings (tools/common/json.c).
codecs.register_error("sluice_bytes",
                      lambda e: ("".join(map(chr, e.object[e.start:e.end])), e.end))


def run(*args, **kw):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True,
                          errors="sluice_bytes", **kw)


def mkmodel(path, *flags):
    r = run("mkmodel", "-o", path, *flags)
    if r.returncode:
        sys.exit(f"mkmodel {flags} failed: {r.stderr}")


def run_tty_stderr(*args):
    """Runs sluice with stderr on a pseudo-terminal (stdout a pipe): (exit status, stderr)."""
    master, slave = os.openpty()
    p = subprocess.Popen([SLUICE, *map(str, args)], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO once the child closed the terminal
            break
        if not b:
            break
        chunks.append(b)
    os.close(master)
    p.stdout.read()
    return p.wait(), b"".join(chunks).decode(errors="replace")


def text_corpus():
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex "
             "every jovial bank clerk near the old harbour").split()
    out, x = [], 12345
    for _ in range(900):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(words[x % len(words)])
    return " ".join(out) + "\n"


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-cli-test-", dir=os.environ.get("TEST_TMPDIR"))
    m1 = os.path.join(tmp, "m1.gguf")       # qwen3moe, BPE, no BOS
    m2 = os.path.join(tmp, "m2.gguf")       # same shape, other weights
    ml = os.path.join(tmp, "llama.gguf")    # SPM, adds BOS
    mkmodel(m1)
    mkmodel(m2, "--seed", "2")
    mkmodel(ml, "--arch", "llama")
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write(text_corpus())

    # ---- help ----
    for cmd in (["generate"], ["perplexity"], ["eval"], ["bench", "decode"], ["demo"]):
        r = run(*cmd, "--help")
        expect(r.returncode == 0 and "usage:" in r.stdout, f"{' '.join(cmd)} --help exits 0")
    r = run("eval", "--help")
    expect("float32 little-endian" in r.stdout and "[n_tokens][n_vocab]" in r.stdout,
           "eval --help documents the logits format")

    # ---- eval ----
    toks = [1, 17, 300, 5, 9, 100, 200, 300, 400, 7, 8, 9]
    lo = os.path.join(tmp, "eval.bin")
    r = run("eval", "-m", m1, "--tokens", ",".join(map(str, toks)), "--logits-out", lo)
    expect(r.returncode == 0, f"eval --logits-out exits 0 ({r.stderr.strip()})")
    size = os.path.getsize(lo) if os.path.exists(lo) else -1
    expect(size == len(toks) * VOCAB * 4,
           f"eval logits file is n_tokens x n_vocab x 4 = {len(toks) * VOCAB * 4} bytes ({size})")
    logits = np.fromfile(lo, dtype="<f4").reshape(len(toks), VOCAB) if size > 0 else None
    expect(logits is not None and np.isfinite(logits).all(), "eval logits are finite")
    r = run("eval", "-m", m1, "--tokens", ",".join(map(str, toks)), "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(j.get("argmax") == [int(x) for x in logits.argmax(axis=1)],
           "eval --json argmax matches the logits file")
    expect(np.allclose(np.array(j.get("logits", [[0]]), dtype=np.float32), logits, rtol=0,
                       atol=0), "eval --json logits equal the file's bit for bit")
    r = run("eval", "-m", m1, "--tokens", ",".join(map(str, toks)))
    expect(r.returncode == 0 and len(r.stdout.strip().splitlines()) == len(toks) + 1,
           "eval summary: a header and one line per position")

    # ---- generate ----
    r = run("generate", "-m", m1, "-p", "the quick brown fox", "-n", "6", "--temp", "0",
            "-ctk", "f32", "--json")
    expect(r.returncode == 0, f"generate --json exits 0 ({r.stderr.strip()})")
    g = json.loads(r.stdout) if r.returncode == 0 else {}
    for k in ("text", "tokens", "prompt_tokens", "prefill_tps", "decode_tps", "stop"):
        expect(k in g, f"generate --json has '{k}'")
    gen, prompt = g.get("tokens", []), g.get("prompt_tokens", [])
    expect(len(gen) >= 1 and len(prompt) >= 1, f"generate produced tokens ({gen})")
    seq = prompt + gen[:-1]
    r = run("eval", "-m", m1, "--tokens", ",".join(map(str, seq)), "--logits-out", lo,
            "-ctk", "f32")
    if expect(r.returncode == 0, "eval of prompt + generated tokens"):
        ev = np.fromfile(lo, dtype="<f4").reshape(len(seq), VOCAB)
        am = [int(x) for x in ev[len(prompt) - 1:].argmax(axis=1)]
        expect(am == gen, f"eval argmax rows equal generate's greedy choices ({am} vs {gen})")
    r = run("generate", "-m", m1, "-p", "the quick brown fox", "-n", "6", "--temp", "0")
    expect(r.returncode == 0 and r.stdout == g.get("text"),
           "generate streams exactly the --json text to stdout")
    expect("prefill" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr,
           "generate prints prefill and decode tok/s to stderr")
    # Q4_K repacked at load (the default) or kept as stored (-nr): the same logits, bit for bit
    mq = os.path.join(tmp, "q4k.gguf")
    mkmodel(mq, "--type", "Q4_K", "--dim", "256", "--ffn", "512", "--layers", "1")
    outs = {}
    cpu = ("--placement", "cpu")  # auto without a GPU puts every weight on the sim device
    for flags in (cpu, (*cpu, "-nr"), (*cpu, "--no-repack", "-t", "2")):
        lq = os.path.join(tmp, f"q4k{len(flags)}.bin")
        r = run("eval", "-m", mq, "--tokens", "1,2,3,4,5", "--logits-out", lq, *flags)
        expect(r.returncode == 0, f"eval {' '.join(flags)} on Q4_K exits 0 ({r.stderr.strip()})")
        outs[flags] = open(lq, "rb").read() if r.returncode == 0 else b"?"
    expect(len(set(outs.values())) == 1 and len(outs[cpu]) == 5 * VOCAB * 4,
           "eval logits with and without -nr/--no-repack are the same bytes")
    r = run("generate", "-m", mq, "-p", "hello", "-n", "2", "--temp", "0", *cpu)
    expect(r.returncode == 0 and "CPU repack:" in r.stderr and "Q4_K_R8" in r.stderr,
           f"generate says how many tensors it repacked ({r.stderr.strip()[-200:]})")
    r = run("generate", "-m", mq, "-p", "hello", "-n", "2", "--temp", "0", *cpu, "-nr")
    expect(r.returncode == 0 and "CPU repack" not in r.stderr, "generate -nr repacks nothing")
    r1 = run("generate", "-m", ml, "-p", "hello", "-n", "5", "--temp", "0.9", "--seed", "7",
             "--json")
    r2 = run("generate", "-m", ml, "-p", "hello", "-n", "5", "--temp", "0.9", "--seed", "7",
             "--json")
    g1 = json.loads(r1.stdout) if r1.returncode == 0 else {}
    g2 = json.loads(r2.stdout) if r2.returncode == 0 else {}
    expect(r1.returncode == 0 and g1["tokens"] == g2.get("tokens") and g1["text"] == g2.get("text"),
           "sampled generation repeats with a seed")
    expect(g1.get("prompt_tokens", [None])[0] == 1, "llama (SPM) prompt starts with BOS 1")

    # ---- perplexity ----
    for name, model in (("qwen3moe", m1), ("llama", ml)):
        r = run("perplexity", "-m", model, "-f", text, "--ctx", "64", "--chunks", "3")
        expect(r.returncode == 0, f"perplexity {name} exits 0 ({r.stderr.strip()})")
        out = r.stdout
        expect("[1]" in out and "[2]" in out and "[3]" in out and "[4]" not in out,
               f"perplexity {name} prints 3 per-chunk values")
        line = [x for x in out.splitlines() if x.startswith("Final estimate: PPL = ")]
        ppl = float(line[0].split("=")[1].split()[0]) if line else float("nan")
        expect(math.isfinite(ppl) and ppl > 1, f"perplexity {name}: PPL {ppl} finite and > 1")
        expect(bool(line) and "+/-" in line[0], f"perplexity {name}: standard error printed")
    r = run("perplexity", "-m", m1, "-f", text, "--ctx", "64", "--chunks", "3", "--json")
    pj = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(len(pj.get("chunks", [])) == 3 and pj.get("n_scored") == 3 * 31,
           "perplexity --json: 3 chunks, 31 scored positions each")
    # rows scored by one thread or spread over several, summed in row order: the same bits
    # (the forward pass is thread-count invariant too); the KL path scores serially
    per_t = {}
    for t in ("1", "3"):
        r = run("perplexity", "-m", m1, "-f", text, "--ctx", "64", "--chunks", "3", "--json",
                "-t", t)
        per_t[t] = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(per_t["1"].get("chunks") and per_t["1"].get("chunks") == per_t["3"].get("chunks")
           and per_t["1"].get("ppl_stderr") == per_t["3"].get("ppl_stderr"),
           "perplexity -t 1 and -t 3: the same per-chunk values, bit for bit")

    base = os.path.join(tmp, "base.bin")
    r = run("perplexity", "-m", m1, "-f", text, "--ctx", "64", "--chunks", "3", "--logits-out",
            base)
    expect(r.returncode == 0 and os.path.getsize(base) == 3 * 31 * VOCAB * 4,
           "perplexity --logits-out writes chunks x (ctx - 1 - ctx/2) x n_vocab floats")
    r = run("perplexity", "-m", m1, "-f", text, "--ctx", "64", "--chunks", "3",
            "--kl-divergence-base", base, "--json")
    k = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(abs(k.get("kld", 1)) < 1e-9 and k.get("top1_percent") == 100.0,
           f"KL vs itself ~ 0 and 100% top-1 ({k.get('kld')}, {k.get('top1_percent')})")
    r = run("perplexity", "-m", m2, "-f", text, "--ctx", "64", "--chunks", "3",
            "--kl-divergence-base", base)
    kl_line = [x for x in r.stdout.splitlines() if x.startswith("Mean    KLD:")]
    kld = float(kl_line[0].split(":")[1].split()[0]) if kl_line else 0.0
    expect(r.returncode == 0 and kld > 1e-3, f"KL vs another seed's model > 0 ({kld})")
    expect(any(x.startswith("Same top p:") for x in r.stdout.splitlines()),
           "KL report has the top-1 agreement line")
    r = run("perplexity", "-m", m1, "-f", text, "--ctx", "64", "--chunks", "2",
            "--kl-divergence-base", base)
    expect(r.returncode == 1 and base in r.stderr and "expected" in r.stderr,
           f"a base file of another size is refused naming it ({r.stderr.strip()})")
    short = os.path.join(tmp, "short.txt")
    with open(short, "w") as f:
        f.write("too short")
    r = run("perplexity", "-m", m1, "-f", short, "--ctx", "64")
    expect(r.returncode == 1 and short in r.stderr, "too short a text: exit 1 naming the file")

    # ---- bench decode, demo ----
    r = run("bench", "decode", "-m", m1, "-n", "4", "--prompt-tokens", "4", "--json")
    bj = json.loads(r.stdout) if r.returncode == 0 else {}
    runs = bj.get("runs", [])
    expect(r.returncode == 0 and [x["placement"] for x in runs] == ["cpu", "experts-cpu"] and
           all(x["ok"] and x["decode_ms_per_token"] > 0 for x in runs),
           f"bench decode runs cpu and experts-cpu ({r.stderr.strip()[-300:]})")
    expect(bj.get("roofline_gbps", 0) > 0 and bj.get("bound_ms_per_token", 0) > 0 and
           bj.get("gpu", {}).get("available") is False,
           "bench decode reports the bandwidth bound and gpu unavailable")
    # each run's own bound: on sim every byte (device or host side) counts at the host rate
    expect(bj.get("device_kind") == "sim" and bj.get("device_name") and
           bj.get("hbm_gbps", 0) is None and len(runs) == 2 and
           all(x.get("bound_kind") == "cpu" and x.get("bound_ms_per_token", 0) > 0 and
               0 < x.get("fraction_of_bound", 0) and
               abs(x["device_bytes_per_token"] + x["host_bytes_per_token"] -
                   bj["bytes_per_token"]) <= 2 and
               math.isclose(x["bound_ms_per_token"], bj["bound_ms_per_token"], rel_tol=1e-6)
               for x in runs) and
           runs[0]["device_bytes_per_token"] == 0 and runs[1]["device_bytes_per_token"] > 0,
           "bench decode: per-run bound_ms_per_token, bound_kind and bytes split on sim")
    # honest rows (issue 31): what ran, and the decode steps' mean, median and p90
    expect(all(x.get("placement_ran") == x["placement"] and x.get("scheduler") == "cpu" and
               x.get("sched_mode") == "cpu" and x.get("sched") is None and
               x.get("moe_calls_per_step", 0) is None and x.get("decode_steps") == 4 and
               0 < x["decode_ms_per_token_median"] <= x["decode_ms_per_token_p90"] and
               x["decode_ms_per_token"] == x["decode_ms_per_token_mean"] and
               math.isclose(x["decode_tps"], 1e3 / x["decode_ms_per_token_mean"], rel_tol=1e-9)
               and x.get("expert_calls_cpu_per_step", 0) > 0 and
               x.get("expert_calls_gpu_per_step") == 0 and x.get("copy_bytes_per_step") == 0
               for x in runs),
           f"bench decode rows name the placement and scheduler that ran, mean/median/p90 "
           f"({[{k: x.get(k) for k in ('placement_ran', 'scheduler', 'sched_mode')} for x in runs]})")
    r = run("bench", "decode", "-m", m1, "-n", "3", "--prompt-tokens", "2", "--placement",
            "experts-cpu", "--device", "sim", "--sched", "mode=auto", "--json")
    bj = json.loads(r.stdout) if r.returncode == 0 else {}
    x = (bj.get("runs") or [{}])[0]
    mc = x.get("moe_calls_per_step") or {}
    expect(r.returncode == 0 and x.get("placement_ran") == "experts-cpu" and
           x.get("scheduler") == "fetch" and x.get("sched_mode") == "auto" and
           x.get("sched") == "mode=auto" and sorted(mc) == ["cpu", "full", "post"] and
           sum(mc.values()) > 0 and x.get("decode_steps") == 3,
           f"bench decode --sched mode=auto names the fetch scheduler, its mode and calls per "
           f"mode ({x}; {r.stderr.strip()[-300:]})")
    r = run("bench", "decode", "-m", m1, "-n", "2", "--prompt-tokens", "2", "--placement", "gpu",
            "--device", "sim", "--json")
    bj = json.loads(r.stdout) if r.returncode == 0 else {}
    runs = bj.get("runs", [])
    expect(r.returncode == 0 and [(x["placement"], x["device"], x["ok"]) for x in runs] ==
           [("gpu", "sim", True)] and runs[0]["bound_ms_per_token"] > 0 and
           runs[0]["host_bytes_per_token"] < runs[0]["device_bytes_per_token"],
           f"bench decode --placement gpu --device sim runs ({r.stderr.strip()[-300:]})")
    # issue 32: the device executor's steps per qwen3moe layer (fused ops), JSON and text
    steps = runs[0].get("device_steps_per_layer") if runs else None
    expect(steps is not None and 1 <= steps <= 8,
           f"bench decode reports <= 8 device steps per qwen3moe layer on sim ({steps})")
    expect(bool(runs) and "device_launches_per_layer" in runs[0] and
           runs[0]["device_launches_per_layer"] is None,
           "bench decode's kernel launches a layer: null on sim (cuda counts them)")
    r = run("bench", "decode", "-m", m1, "-n", "2", "--prompt-tokens", "2", "--placement", "gpu",
            "--device", "sim")
    expect(r.returncode == 0 and re.search(r"; [0-9.]+ device steps per device layer", r.stdout)
           is not None, f"bench decode's text row names the device steps per layer ({r.stdout[-300:]})")
    r = run("bench", "decode", "-m", m1, "-n", "2", "--prompt-tokens", "2", "--placement", "cpu",
            "--json")
    bj = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(r.returncode == 0 and [x.get("device_steps_per_layer", 0) for x in bj.get("runs", [])]
           == [None], "no device layer (placement cpu): device_steps_per_layer is null")
    r = run("bench", "decode", "-m", m1, "-n", "2", "--prompt-tokens", "2")
    expect(r.returncode == 0 and "device: " in r.stdout and "bound ms/tok" in r.stdout and
           "no CUDA forward" not in r.stdout + r.stderr and
           [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith(("cpu ", "experts-cpu ",
                                                                           "gpu "))] ==
           ["cpu", "experts-cpu", "gpu"] and "gpu          unavailable: device is sim" in r.stdout,
           "bench decode text: device line, cpu and experts-cpu rows, gpu not run on sim")
    # issue 33: a row whose experts ran on the CPU prints their GB/s beside the streaming read
    gbs = [re.search(r"; CPU experts ([0-9.]+) GB/s \(([0-9]+)% of the streaming read\)", ln)
           for ln in r.stdout.splitlines() if ln.startswith(("cpu ", "experts-cpu "))]
    expect(len(gbs) == 2 and all(g and float(g.group(1)) > 0 for g in gbs),
           f"bench decode's cpu and experts-cpu rows print the CPU expert GB/s ({r.stdout[-400:]})")
    r = run("bench", "decode", "-m", m1, env={**os.environ, "SLUICE_DEVICE": "bogus"})
    expect(r.returncode == 1 and "SLUICE_DEVICE" in r.stderr and "Traceback" not in r.stderr,
           f"bench decode with SLUICE_DEVICE=bogus: exit 1 naming it ({r.stderr.strip()[:200]})")
    if not os.path.exists("/dev/nvidiactl"):  # no GPU here: a cuda request is a clear error
        r = run("bench", "decode", "-m", m1, "--device", "cuda")
        expect(r.returncode == 1 and "cannot open device 'cuda'" in r.stderr,
               f"bench decode --device cuda without a GPU: exit 1 ({r.stderr.strip()[:200]})")
    # ---- MoE scheduler flags: --sched, --trace; bench moe ----
    for cmd in (["generate"], ["perplexity"], ["eval"], ["bench", "decode"]):
        r = run(*cmd, "--help")
        expect("--sched" in r.stdout and "--trace FILE" in r.stdout,
               f"{' '.join(cmd)} --help documents --sched and --trace")
    sim = {**os.environ, "SLUICE_DEVICE": "sim"}
    tl = ",".join(map(str, toks))
    lc, lp = os.path.join(tmp, "sched_cpu.bin"), os.path.join(tmp, "sched_post.bin")
    tr = os.path.join(tmp, "trace.json")
    r = run("eval", "-m", m1, "--tokens", tl, "--placement", "experts-cpu", "--sched", "mode=cpu",
            "--logits-out", lc, env=sim)
    expect(r.returncode == 0, f"eval --sched mode=cpu on sim exits 0 ({r.stderr.strip()[-300:]})")
    r = run("eval", "-m", m1, "--tokens", tl, "--placement", "experts-cpu",
            "--sched", "mode=post block_on_miss=0", "--trace", tr, "--logits-out", lp, env=sim)
    expect(r.returncode == 0, f"eval --sched mode=post --trace on sim exits 0 "
           f"({r.stderr.strip()[-300:]})")
    same = (os.path.exists(lc) and os.path.exists(lp) and os.path.getsize(lc) > 0 and
            open(lc, "rb").read() == open(lp, "rb").read())
    expect(same, "eval logits: --sched mode=post == mode=cpu, bit-exact (sim, experts-cpu)")
    try:
        with open(tr) as f:
            tj = json.load(f)
    except (OSError, ValueError):
        tj = {}
    ev = tj.get("traceEvents", [])
    expect(isinstance(ev, list) and any(e.get("ph") == "X" for e in ev),
           "--trace writes Chrome trace JSON with traceEvents spans")
    r = run("eval", "-m", m1, "--tokens", tl, "--placement", "experts-cpu", "--sched", "mode=full",
            "--logits-out", lp, env=sim)
    same = r.returncode == 0 and open(lc, "rb").read() == open(lp, "rb").read()
    expect(same, "eval logits: --sched mode=full == mode=cpu, bit-exact (sim, experts-cpu)")
    bad_trace = os.path.join(tmp, "no-such-dir", "t.json")
    r = run("eval", "-m", m1, "--tokens", tl, "--placement", "experts-cpu", "--sched", "mode=post",
            "--trace", bad_trace, env=sim)
    expect(r.returncode == 1 and bad_trace in r.stderr,
           f"--trace into a missing folder exits 1 naming the file ({r.stderr.strip()[-200:]})")
    r = run("eval", "-m", m1, "--tokens", tl, "--trace", tr, env=sim)
    expect(r.returncode == 1 and tr in r.stderr,
           f"--trace with the cpu scheduler exits 1 naming the file ({r.stderr.strip()[-200:]})")
    r = run("bench", "moe", "-m", m1, "--json", "--tokens", "2", "--prefill", "8")
    mj = json.loads(r.stdout) if r.returncode == 0 else {}
    rows = mj.get("rows", [])
    expect(r.returncode == 0 and [x.get("mode") for x in rows] ==
           ["cpu", "cpu sync", "post", "full", "auto+cache", "static hot", "cpu+uploads",
            "cpu+defer", "cpu+stream"] and
           all(x.get("ok") and x.get("decode_tps", 0) > 0 and x.get("bound_tps", 0) > 0 and
               ((x.get("prefill_tps") or 0) > 0) == (x.get("mode") not in ("cpu sync",
                                                                          "cpu+defer"))
               for x in rows),
           f"bench moe --json runs cpu, cpu sync (decode only), post, full, auto+cache, "
           f"static hot, cpu+uploads, cpu+defer (decode only), cpu+stream "
           f"({r.stderr.strip()[-300:]})")
    # the host's cost per layer and token: the cpu row waits only for the logits (its host
    # part is ordered on the stream) and moves no expert bytes; the static hot row none either,
    # with the same waits (its device part in stream order too) and some experts on the device
    by = {x.get("mode"): x for x in rows}
    expect(all(k in x for x in rows for k in ("syncs_per_layer", "device_calls_per_layer",
                                              "pcie_expert_bytes_per_token", "cpu_expert_gbps")),
           "bench moe rows carry syncs, device calls, PCIe expert bytes, CPU GB/s")
    # order=sync: the same work after a blocking sync per layer (one per token beside it)
    expect(by.get("cpu sync", {}).get("syncs_per_layer", 0) >= 1 and
           by.get("cpu sync", {}).get("sched") == "mode=cpu order=sync prefill_stream=0" and
           by.get("cpu sync", {}).get("prefill_skipped"),
           f"bench moe: cpu sync row {by.get('cpu sync')}")
    # Expert Deferral: the cpu row's work (the same assignments on the CPU, no PCIe), the
    # top-4 model's one expert a token deferred
    dfr, cpu_row = by.get("cpu+defer", {}), by.get("cpu", {})
    expect(dfr.get("sched") == "mode=cpu defer=1 prefill_stream=0" and
           dfr.get("pcie_expert_bytes_per_token") == 0 and
           dfr.get("expert_calls_cpu_per_step") == cpu_row.get("expert_calls_cpu_per_step") and
           dfr.get("syncs_per_layer") == cpu_row.get("syncs_per_layer"),
           f"bench moe: cpu+defer row {dfr} against cpu {cpu_row}")
    hot = by.get("static hot", {})
    expect(by.get("cpu", {}).get("pcie_expert_bytes_per_token") == 0 and
           hot.get("pcie_expert_bytes_per_token") == 0 and
           hot.get("syncs_per_layer") == by.get("cpu", {}).get("syncs_per_layer") and
           hot.get("expert_calls_gpu_per_step", 0) > 0 and
           0 < by.get("cpu", {}).get("syncs_per_layer", 1) < 1 and
           by.get("cpu", {}).get("cpu_expert_gbps", 0) > 0,
           f"bench moe: cpu / static hot rows: {by.get('cpu')} {by.get('static hot')}")
    expect(mj.get("simulated") is True and "SIMULATED" in r.stderr and
           mj.get("cpu_gbps", 0) > 0 and mj.get("pcie_gbps", 0) > 0 and
           by.get("post", {}).get("pcie_bytes_per_step", 0) > 0,
           "bench moe on sim: banner, measured bandwidths, post copies bytes")
    modes = [(x.get("scheduler"), x.get("sched_mode")) for x in rows]
    expect(mj.get("placement") == "experts-cpu" and
           modes == [("cpu", "cpu"), ("cpu", "cpu"), ("fetch", "post"), ("fetch", "full"),
                     ("fetch", "auto"), ("cpu", "cpu"), ("cpu", "cpu"), ("cpu", "cpu"),
                     ("cpu", "cpu")] and
           all(x.get("placement") == "experts-cpu" and x.get("decode_steps") == 2 and
               0 < x["decode_ms_per_token_median"] <= x["decode_ms_per_token_p90"] and
               math.isclose(x["decode_tps"], 1e3 / x["decode_ms_per_token_mean"], rel_tol=1e-9)
               for x in rows) and rows[0].get("moe_calls_per_step", 0) is None and
           rows[2].get("moe_calls_per_step", {}).get("post", 0) > 0 and
           rows[2]["moe_calls_per_step"]["full"] == 0 and
           rows[3].get("moe_calls_per_step", {}).get("full", 0) > 0 and
           rows[3]["moe_calls_per_step"]["post"] == 0,
           f"bench moe rows name the scheduler, its mode and calls per mode ({modes})")
    r = run("bench", "moe", "--help")
    expect(r.returncode == 0 and "usage:" in r.stdout and "--sim-h2d-gbs" in r.stdout,
           "bench moe --help exits 0")

    # the synthetic model: no download in tests (peer_test covers Gemma's fallback path)
    r = run("demo", "--dir", tmp, "-n", "4", env={**os.environ, "SLUICE_DEMO_MODEL": "synthetic"})
    expect(r.returncode == 0 and "== 3." in r.stdout and "== done" in r.stdout,
           f"demo runs end to end ({r.stderr.strip()[-300:]})")

    # ---- errors ----
    cases = [
        (["generate", "-m", m1, "-p", "x", "--bogus"], 2, "--bogus"),
        (["generate", "-m", m1, "-p", "x", "-n", "12x"], 2, "-n"),
        (["generate", "-m", m1, "-p", "x", "--temp", "1e39"], 2, "--temp"),
        (["generate", "-m", m1, "-p", "x", "--top-p", "nan"], 2, "--top-p"),
        (["generate", "-m", m1, "-p", "x", "--seed", "-3"], 2, "--seed"),
        (["generate", "-m", m1], 2, "-p"),
        (["generate", "-m", m1, "-p", "x", "--placement", "moon"], 2, "--placement"),
        (["generate", "-m", m1, "-p", "x", "--io", "tape"], 2, "--io"),
        (["generate", "-m", m1, "-p", "x", "--device", "tpu"], 2, "--device"),
        (["generate", "-m", m1, "-p", "x", "-t", "1025"], 2, "-t"),
        (["generate", "-m", m1, "-p", "x", "-ctk", "q8"], 2, "-ctk"),
        (["generate", "-m", m1, "-p"], 2, "-p"),
        (["perplexity", "-m", m1, "-f", text, "--ctx", "2"], 2, "--ctx"),
        (["perplexity", "-m", m1, "-f", text, "--chunks", "0"], 2, "--chunks"),
        (["perplexity", "-m", m1, "-f", text, "--frobnicate"], 2, "--frobnicate"),
        (["eval", "-m", m1, "--tokens", "1,2,x"], 2, "--tokens"),
        (["eval", "-m", m1, "--tokens", "1,-2"], 2, "--tokens"),
        (["eval", "-m", m1, "--tokens", f"1,{VOCAB}"], 2, "--tokens"),
        (["eval", "-m", m1, "--tokens", "1", "--ctx-size=-1"], 2, "--ctx-size"),
        (["eval", "-m", m1, "--tokens", "1", "extra"], 2, "extra"),
        (["bench", "decode", "--shape", "huge"], 2, "--shape"),
        (["bench", "decode", "-m", m1, "-n", "0"], 2, "-n"),
        (["bench", "decode", "-m", m1, "--device", "tpu"], 2, "--device"),
        (["demo", "--what"], 2, "--what"),
        (["eval", "-m", m1, "--tokens", "1", "--sched", "mode=bogus"], 2, "--sched"),
        (["eval", "-m", m1, "--tokens", "1", "--sched", "colour=red"], 2, "--sched"),
        (["generate", "-m", m1, "-p", "x", "--sched", "max_transfers=0"], 2, "--sched"),
        (["perplexity", "-m", m1, "-f", text, "--sched", "mode"], 2, "--sched"),
        (["bench", "decode", "-m", m1, "--sched", "block_on_miss=2"], 2, "--sched"),
        (["eval", "-m", m1, "--tokens", "1", "--sched"], 2, "--sched"),
        (["eval", "-m", m1, "--tokens", "1", "--trace="], 2, "--trace"),
        (["bench", "moe", "--tokens", "0"], 2, "--tokens"),
        (["bench", "moe", "--device", "tpu"], 2, "--device"),
        (["bench", "moe", "--sim-h2d-gbs", "0"], 2, "--sim-h2d-gbs"),
        (["bench", "moe", "--prefill", "x"], 2, "--prefill"),
        (["bench", "moe", "--router-skew", "-1"], 2, "--router-skew"),
        (["bench", "moe", "--placement", "cpu"], 2, "--placement"),
        (["bench", "moe", "-m", "/nonexistent/z.gguf"], 1, "/nonexistent/z.gguf"),
        (["generate", "-m", "/nonexistent/x.gguf", "-p", "x"], 1, "/nonexistent/x.gguf"),
        (["eval", "-m", "/nonexistent/y.gguf", "--tokens", "1"], 1, "/nonexistent/y.gguf"),
        (["perplexity", "-m", m1, "-f", "/nonexistent/t.txt"], 1, "/nonexistent/t.txt"),
        (["generate", "-m", m1, "-f", "/nonexistent/p.txt"], 1, "/nonexistent/p.txt"),
        (["perplexity", "-m", m1, "-f", text, "--kl-divergence-base", "/nonexistent/b.bin"], 1,
         "/nonexistent/b.bin"),
        (["generate", "-m", text, "-p", "x"], 1, text),
    ]
    # ---- progress display: on a terminal only, ending at 100%, the line cleared ----
    big = os.path.join(tmp, "progress.gguf")
    rc, err = run_tty_stderr("mkmodel", "-o", big, "--layers", "2", "--dim", "512",
                             "--ffn", "256", "--experts", "8")
    expect(rc == 0 and "mkmodel: writing:" in err and "100% (" in err
           and err.rstrip(" ").endswith("\r"),
           f"mkmodel on a terminal: exit {rc}, progress shown and cleared: {err[-200:]!r}")
    rc, err = run_tty_stderr("requant", "-m", big, "--tensor", "blk.0.ffn_up_exps.weight",
                             "--type", "Q8_0", "-o", big, "--in-place")
    expect(rc == 0 and "requant: writing:" in err and "100% (" in err,
           f"requant on a terminal: exit {rc}, progress shown: {err[-200:]!r}")
    r = run("mkmodel", "-o", big, "--layers", "1")
    expect(r.returncode == 0 and "writing:" not in r.stderr and "\r" not in r.stderr,
           f"mkmodel with stderr a pipe draws no progress: {r.stderr[-200:]!r}")

    for args, rc, needle in cases:
        r = run(*args)
        expect(r.returncode == rc and needle in r.stderr,
               f"{' '.join(a if a not in (m1, text) else os.path.basename(a) for a in args)}: "
               f"exit {r.returncode} (want {rc}), names '{os.path.basename(needle)}': "
               f"{r.stderr.strip().splitlines()[0] if r.stderr.strip() else ''}")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
