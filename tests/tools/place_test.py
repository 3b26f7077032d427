"""tools/run place and the placement flags end to end on sim: place show follows llama.cpp's
-ngl (the last layers) and -ot (first match), place profile -> place solve -> --placement
hot-cold gives the CPU's greedy text and logits within 1e-5 (SLUICE_ACT_F32), bench decode's
budget rows run (dense, and MoE with its experts split hot/cold), place profile -> place solve
on a MoE model writes the MoE index, and bad requests (a budget too small, a split group, an
index or stats for another model, -o aliasing the model) fail naming the culprit."""
import json
import os
import struct
import subprocess
import sys
import tempfile

from harness import SLUICE, expect, finish


def run(*args, env=None):
    e = dict(os.environ, SLUICE_DEVICE="sim", SLUICE_ACT_F32="1")
    e.update(env or {})
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, errors="replace",
                          timeout=300, env=e)


def floats(path):
    with open(path, "rb") as f:
        b = f.read()
    return struct.unpack(f"<{len(b) // 4}f", b)


def main():
    d = tempfile.mkdtemp(prefix="place_test.", dir=os.environ.get("TEST_TMPDIR"))
    dense, moe = os.path.join(d, "dense.gguf"), os.path.join(d, "moe.gguf")
    r = run("mkmodel", "--arch", "llama", "--layers", "4", "--dim", "256", "--ffn", "1024",
            "--type", "Q8_0", "--neuron-skew", "1", "-o", dense)
    expect(r.returncode == 0, f"mkmodel dense: {r.stderr}")
    r = run("mkmodel", "--arch", "qwen3moe", "--layers", "3", "--dim", "128", "--ffn", "128",
            "-o", moe)
    expect(r.returncode == 0, f"mkmodel moe: {r.stderr}")

    # place show: -ngl 1 is the last layer; -ot first match wins; JSON parses
    r = run("place", "show", "-m", moe, "-ngl", "1", "--json")
    out = json.loads(r.stdout) if r.returncode == 0 else {"plan": {"tensors": []}}
    plan = out["plan"]
    expect(out.get("bound_ms_per_token", 0) > 0 and out.get("device_bytes_per_token", 0) > 0,
           "place show: bytes per side and the per-token bound")
    side = {t["name"]: t["buft"] for t in plan["tensors"]}
    expect(side.get("blk.2.attn_q.weight") == "CUDA0" and side.get("blk.0.attn_q.weight") == "CPU",
           "-ngl 1 puts the last layer on the GPU")
    expect(side.get("output.weight") == "CPU", "-ngl 1 leaves the output on the CPU")
    r = run("place", "show", "-m", moe, "-ngl", "999", "--json", "--no-bound",
            "-ot", "blk\\.1\\.ffn_.*_exps=CUDA0", "-ot", "exps=CPU")
    plan = json.loads(r.stdout)["plan"] if r.returncode == 0 else {"tensors": []}
    side = {t["name"]: t["buft"] for t in plan["tensors"]}
    expect(side.get("blk.1.ffn_up_exps.weight") == "CUDA0" and
           side.get("blk.0.ffn_up_exps.weight") == "CPU", "-ot: first match wins, repeatable")
    r = run("place", "show", "-m", moe, "-ot", "ffn_up_exps=CPU,ffn_down_exps=GPU", "--no-bound")
    expect(r.returncode != 0 and "blk.0.ffn_up_exps.weight" in r.stderr and
           "blk.0.ffn_down_exps.weight" in r.stderr, "a split group names both tensors")
    r = run("place", "show", "-m", moe, "--placement", "gpu", "--vram-budget", "1M", "--no-bound")
    expect(r.returncode != 0 and "--vram-budget" in r.stderr, "a budget too small is refused")

    # placements give the CPU's logits bit for bit (whole tensors move)
    base = os.path.join(d, "base.f32")
    toks = ["--tokens", "1,2,3,4,5,6"]
    r = run("eval", "-m", moe, *toks, "--placement", "cpu", "--logits-out", base)
    expect(r.returncode == 0, f"eval cpu: {r.stderr}")
    for flags in (["-ngl", "2"], ["--n-cpu-moe", "1"], ["--cpu-moe"], ["--vram-budget", "12MiB"],
                  ["-ngl", "99", "-ot", "blk\\.1\\.=CPU"]):
        out = os.path.join(d, "o.f32")
        r = run("eval", "-m", moe, *toks, *flags, "--logits-out", out)
        expect(r.returncode == 0 and floats(out) == floats(base), f"eval {flags} == cpu: "
               f"{r.stderr.strip()[-200:]}")

    # hot/cold: profile -> solve -> run
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join(["the cat sat on the mat and the dog ran far away"] * 60))
    stats, idx = os.path.join(d, "stats.gguf"), os.path.join(d, "dense.gpuidx")
    r = run("place", "profile", "-m", dense, "-f", text, "-o", stats, "--tokens", "256")
    expect(r.returncode == 0 and os.path.exists(stats), f"place profile: {r.stderr}")
    r = run("place", "solve", "-m", dense, "--stats", stats, "--vram-budget", "16MiB",
            "-o", idx, "--cpu-gbs", "10", "--gpu-gbs", "20")
    expect(r.returncode == 0 and "neurons hot" in r.stdout, f"place solve: {r.stderr}")
    r = run("place", "solve", "-m", dense, "--stats", stats, "--vram-budget", "16MiB",
            "-o", dense, "--cpu-gbs", "10", "--gpu-gbs", "20")
    expect(r.returncode != 0 and "dense.gguf" in r.stderr, "place solve -o MODEL is refused")
    # routed experts: the profile counts per layer, expert and neuron (expert-major), and the
    # tokens routed to each expert
    mstats = os.path.join(d, "moe_stats.gguf")
    r = run("place", "profile", "-m", moe, "-f", text, "-o", mstats, "--tokens", "64")
    expect(r.returncode == 0, f"place profile on a MoE model: {r.stderr}")
    r = run("inspect", mstats, "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {"kv": {}, "tensors": []}
    shapes = {t["name"]: t["shape"] for t in j["tensors"]}
    expect(j["kv"].get("sluice.neuron_stats.expert_count") == 8 and
           shapes.get("blk.2.ffn_act_count") == [8 * 128] and
           shapes.get("blk.2.ffn_expert_count") == [8], f"MoE stats layout: {shapes}")
    # place solve on a MoE model: the experts' neurons, the MoE index, a line per layer
    midx = os.path.join(d, "moe.gpuidx")
    solve = ["--vram-budget", "8MiB", "--cpu-gbs", "10", "--gpu-gbs", "20"]
    r = run("place", "solve", "-m", moe, "--stats", mstats, "-o", midx, *solve)
    expect(r.returncode == 0 and "expert neurons hot" in r.stdout and
           r.stdout.count("  blk.") == 3 and os.path.exists(midx), f"place solve MoE: {r.stderr}")
    # bad inputs name the file, the field and the value
    moe4, m4stats = os.path.join(d, "moe4.gguf"), os.path.join(d, "moe4_stats.gguf")
    run("mkmodel", "--arch", "qwen3moe", "--layers", "3", "--dim", "128", "--ffn", "128",
        "--experts", "4", "-o", moe4)
    r = run("place", "profile", "-m", moe4, "-f", text, "-o", m4stats, "--tokens", "32")
    expect(r.returncode == 0, f"place profile moe4: {r.stderr}")
    x = os.path.join(d, "x.gpuidx")
    for model, st, needles in (
            (moe, stats, ["stats.gguf", "block_count = 4", "3 layers"]),
            (moe, m4stats, ["moe4_stats.gguf", "expert_count = 4", "8 routed experts"]),
            (moe4, mstats, ["moe_stats.gguf", "expert_count = 8", "4 routed experts"]),
            (dense, mstats, ["moe_stats.gguf", "block_count = 3", "4 layers"])):
        r = run("place", "solve", "-m", model, "--stats", st, "-o", x, *solve[2:],
                "--vram-budget", "16MiB")
        expect(r.returncode == 1 and all(n in r.stderr for n in needles) and
               not os.path.exists(x), f"place solve {model} with {st}: {r.stderr}")
    r = run("place", "solve", "-m", moe, "--stats", mstats, "-o", x, *solve[2:],
            "--vram-budget", "5MiB")
    expect(r.returncode == 1 and "--vram-budget" in r.stderr and "moe.gguf" in r.stderr and
           not os.path.exists(x), f"place solve MoE, budget below the base: {r.stderr}")
    # a MoE model's leading dense FFNs are base bytes on the device (deepseek2: layer 0):
    # solve's budget for hot neurons is the gpu --cpu-moe plan's budget less its device bytes,
    # and a budget that holds the base only with those FFNs on the host is refused
    ds2, ds2stats = os.path.join(d, "ds2.gguf"), os.path.join(d, "ds2_stats.gguf")
    run("mkmodel", "--arch", "deepseek2", "--ffn", "256", "-o", ds2)
    r = run("place", "profile", "-m", ds2, "-f", text, "-o", ds2stats, "--tokens", "32")
    expect(r.returncode == 0, f"place profile deepseek2: {r.stderr}")
    r = run("place", "show", "-m", ds2, "--placement", "gpu", "--cpu-moe", "--vram-budget",
            "64MiB", "--json", "--no-bound")
    plan = json.loads(r.stdout)["plan"] if r.returncode == 0 else {"tensors": []}
    dense_ffn = sum(t["bytes"] for t in plan["tensors"]
                    if t["name"].startswith("blk.0.ffn_") and t["buft"] == "CUDA0")
    expect(dense_ffn > 0, "deepseek2: layer 0's dense FFN on the device with --cpu-moe")
    r = run("place", "solve", "-m", ds2, "--stats", ds2stats, "-o", x, *solve[2:],
            "--vram-budget", "64MiB")
    hot = r.stdout.split(" MiB for hot neurons")[0].split(" of ")[-1] if r.returncode == 0 else ""
    want = (plan.get("budget_bytes", 0) - plan.get("device_bytes", 0)) / 1048576
    expect(hot and abs(float(hot) - want) < 0.006,
           f"deepseek2: {hot} MiB for hot neurons, the plan leaves {want:.2f} MiB: {r.stderr}")
    os.path.exists(x) and os.unlink(x)
    tight = 64 * 1048576 - plan.get("budget_bytes", 0) + plan.get("device_bytes", 0) - \
        dense_ffn // 2
    r = run("place", "solve", "-m", ds2, "--stats", ds2stats, "-o", x, *solve[2:],
            "--vram-budget", str(tight))
    expect(r.returncode == 1 and "--vram-budget" in r.stderr and "ds2.gguf" in r.stderr and
           not os.path.exists(x), f"place solve deepseek2, base fits only without its dense "
           f"FFN: {r.stderr}")
    r = run("place", "show", "-m", dense, "--placement", "hot-cold", "--gpu-index", idx,
            "--json", "--no-bound")
    plan = json.loads(r.stdout)["plan"] if r.returncode == 0 else {"tensors": []}
    expect(any(t["buft"] == "split" for t in plan["tensors"]), "place show: split FFNs")
    dbase, hc = os.path.join(d, "dbase.f32"), os.path.join(d, "hc.f32")
    r = run("eval", "-m", dense, *toks, "--placement", "cpu", "--logits-out", dbase)
    r2 = run("eval", "-m", dense, *toks, "--placement", "hot-cold", "--gpu-index", idx,
             "--logits-out", hc)
    if expect(r.returncode == 0 and r2.returncode == 0, f"eval hot-cold: {r2.stderr}"):
        a, b = floats(dbase), floats(hc)
        scale = max(abs(x) for x in a)
        diff = max(abs(x - y) for x, y in zip(a, b))
        expect(diff <= 1e-5 * scale, f"hot-cold logits within 1e-5 of the CPU ({diff / scale:g})")
    g1 = run("generate", "-m", dense, "-p", "the cat", "-n", "8", "--temp", "0",
             "--placement", "cpu")
    g2 = run("generate", "-m", dense, "-p", "the cat", "-n", "8", "--temp", "0",
             "--placement", "hot-cold", "--gpu-index", idx)
    expect(g1.returncode == 0 and g1.stdout == g2.stdout, "hot-cold greedy text == cpu")
    other = os.path.join(d, "other.gguf")
    run("mkmodel", "--arch", "llama", "--layers", "2", "--dim", "256", "--ffn", "512", "-o", other)
    r = run("eval", "-m", other, *toks, "--placement", "hot-cold", "--gpu-index", idx)
    expect(r.returncode != 0 and "dense.gpuidx" in r.stderr, "an index of another model")
    r = run("generate", "-m", dense, "-p", "x", "--placement", "cpu", "--gpu-index", idx)
    expect(r.returncode == 2 and "--gpu-index" in r.stderr, "--gpu-index with --placement cpu")

    # bench decode's budget rows
    r = run("bench", "decode", "-m", dense, "-n", "2", "--prompt-tokens", "8",
            "--vram-budget", "16MiB", "--json")
    rows = [x["placement"] for x in json.loads(r.stdout)["runs"]] if r.returncode == 0 else []
    expect(any(x.startswith("ngl ") for x in rows) and "hot-cold" in rows,
           f"bench decode budget rows: {rows} {r.stderr[-300:]}")
    # a MoE model's three ways under a budget that holds part of its experts: hot-cold splits
    # them (hot neurons by routing rate), so both sides read expert bytes every token
    moe8 = os.path.join(d, "moe8.gguf")
    r = run("mkmodel", "--arch", "qwen3moe", "--layers", "3", "--dim", "128", "--ffn", "128",
            "--type", "Q8_0", "-o", moe8)
    expect(r.returncode == 0, f"mkmodel moe Q8_0: {r.stderr}")
    r = run("bench", "decode", "-m", moe8, "-n", "2", "--prompt-tokens", "16",
            "--vram-budget", "5MiB", "--json")
    runs = {x["placement"]: x for x in json.loads(r.stdout)["runs"]} if r.returncode == 0 else {}
    hc = runs.get("hot-cold", {})
    expect(any(x.startswith("n-cpu-moe ") and x != "n-cpu-moe 0" for x in runs) and
           any(x.startswith("ngl ") for x in runs) and hc.get("ok") and
           hc.get("device_bytes_per_token", 0) > 0 and hc.get("host_bytes_per_token", 0) > 0 and
           hc.get("bound_ms_per_token") and 0 < hc.get("gpu_bytes", 0) < 5 << 20,
           f"bench decode MoE budget rows: {list(runs)} {hc} {r.stderr[-300:]}")
    # static hot: every expert on the host, the rest of the budget holding the prompt's most
    # routed experts, computed on the device beside the CPU's in stream order (one wait a
    # token, for its logits); no expert bytes cross in decode
    sh = runs.get("static hot", {})
    expect(sh.get("ok") and sh.get("moe_scheduler") == "cpu" and
           sh.get("pcie_expert_bytes_per_token") == 0 and 0 < sh.get("syncs_per_layer", 0) < 1
           and sh.get("expert_calls_gpu_per_step", 0) > 0,
           f"bench decode static hot row: {sh} {r.stderr[-300:]}")
    # the rows are the edge of what fits: the largest -ngl, the smallest --n-cpu-moe
    ngl = next((int(x.split()[1]) for x in runs if x.startswith("ngl ")), None)
    ncm = next((int(x.split()[1]) for x in runs if x.startswith("n-cpu-moe ")), None)
    # (auto placement would fit any of them: it adapts to the budget)
    lay, gpu = ["--placement", "layers", "-ngl"], ["--placement", "gpu", "--n-cpu-moe"]
    for flags, fits in ((lay + [str(ngl)], True), (lay + [str((ngl or 0) + 1)], False),
                        (gpu + [str(ncm)], True), (gpu + [str((ncm or 1) - 1)], False)):
        r = run("place", "show", "-m", moe8, *flags, "--vram-budget", "5MiB", "--no-bound")
        expect(ngl is not None and ncm is not None and (r.returncode == 0) == fits,
               f"budget row edge: {' '.join(flags)} fits={r.returncode == 0}, want {fits}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
