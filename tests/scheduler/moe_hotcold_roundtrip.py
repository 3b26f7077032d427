"""MoE hot/cold end to end: a synthetic qwen3moe with skewed neurons and routing is profiled,
solved and written as a MoE .gpuidx; the file loads through scheduler/policy/gpuidx (gpuidx_tool) and
its hot set is the solved one, checked here independently of the solver's code:
  1. the profile: per layer the tokens routed to the experts sum to tokens x top-k, and no
     neuron of an expert is active more often than the expert is routed;
  2. the index: MoE layout (expert count, expert-major widths), whole down blocks within each
     expert, the hot neurons per (layer, expert) are the ones `place solve` printed, VRAM within
     the budget for hot neurons it printed;
  3. the cost of that hot set, recomputed from the stats and the model file's tensor sizes with
     the model in scheduler/policy/hotcold_solve.h (an expert's neuron weighs the probability a token is
     routed to it; attention, router, norms and output are base bytes on the device), is the
     per-token bytes and bound it printed, and within 1% of a lower bound on any split (the
     continuous relaxation: the hottest groups that fit, cut where the sides cross);
  4. a budget that binds and one that does not; popular experts go hot before unpopular ones.

Usage: moe_hotcold_roundtrip.py --sluice PATH --tool PATH
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import gguf

FAILURES = []
LAYERS, EXPERTS, TOP_K, FFN, GRANULE = 3, 8, 2, 256, 32  # Q8_0: down blocks of 32 neurons
CPU_GBS, GPU_GBS = 10.0, 40.0


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL", msg)
    return cond


def run(*args):
    env = dict(os.environ, SLUICE_DEVICE="sim")
    return subprocess.run(list(map(str, args)), capture_output=True, text=True, env=env,
                          errors="replace", timeout=600)


def tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: t for t in r.tensors}, r


def solve_and_check(sluice, tool, model, stats, budget, d):
    idx = os.path.join(d, f"m-{budget}.gpuidx")
    r = run(sluice, "place", "solve", "-m", model, "--stats", stats, "--vram-budget", budget,
            "--cpu-gbs", CPU_GBS, "--gpu-gbs", GPU_GBS, "-o", idx)
    if not check(r.returncode == 0, f"place solve {budget}: {r.stderr}"):
        return None
    out = r.stdout
    m = re.search(r"of ([\d.]+) MiB for hot neurons; per token ([\d.]+) MB cpu, ([\d.]+) MB "
                  r"gpu; bound ([\d.]+) ms/token", out)
    if not check(m, f"solve summary: {out}"):
        return None
    hot_budget_mib, cpu_mb, gpu_mb, bound_ms = map(float, m.groups())
    printed = {}  # (layer, expert) -> hot neurons as printed
    for line in out.splitlines():
        lm = re.match(r"  blk\.(\d+): (\d+) of (\d+) neurons hot", line)
        if lm:
            for e, h in re.findall(r" e(\d+) (\d+) \(", line):
                printed[(int(lm.group(1)), int(e))] = int(h)

    # 2. the index through scheduler/policy/gpuidx
    p = subprocess.run([tool, "read", idx, str(LAYERS), ",".join([str(EXPERTS * FFN)] * LAYERS)],
                       capture_output=True, text=True)
    got = json.loads(p.stdout) if p.stdout.startswith("{") else {}
    if not check(p.returncode == 0 and got.get("n_expert") == EXPERTS,
                 f"the MoE index loads: {p.stdout} {p.stderr}"):
        return None
    hot = np.zeros((LAYERS, EXPERTS * FFN), dtype=bool)
    for il, L in enumerate(got["layers"]):
        hot[il, L["hot"]] = True
    per_expert = hot.reshape(LAYERS, EXPERTS, FFN)
    groups = per_expert.reshape(LAYERS, EXPERTS, FFN // GRANULE, GRANULE)
    check(np.all(groups.all(axis=3) | ~groups.any(axis=3)), "whole down blocks per expert")
    counts = {(l, e): int(per_expert[l, e].sum()) for l in range(LAYERS) for e in range(EXPERTS)}
    check({k: v for k, v in counts.items() if v} == printed,
          f"hot set == the printed plan: {counts} vs {printed}")

    # 3. its cost, recomputed
    mt, _ = tensors(model)
    st, _ = tensors(stats)
    tokens = None
    sr = gguf.GGUFReader(stats)
    tokens = int(sr.fields["sluice.neuron_stats.tokens"].parts[-1][0])
    exp_bytes = [sum(int(t.n_bytes) for n, t in mt.items()
                     if n.startswith(f"blk.{il}.") and "_exps" in n) for il in range(LAYERS)]
    base = sum(int(t.n_bytes) for n, t in mt.items()
               if "_exps" not in n and not n.startswith("token_embd"))
    cpu_b, gpu_b, vram = 0.0, float(base), 0.0
    weights, nb_all = [], []
    for il in range(LAYERS):
        p_e = np.asarray(st[f"blk.{il}.ffn_expert_count"].data, dtype=np.float64) / tokens
        nb = exp_bytes[il] / (EXPERTS * FFN)
        w = np.repeat(p_e, FFN)
        cpu_b += nb * w[~hot[il]].sum()
        gpu_b += nb * w[hot[il]].sum()
        vram += nb * hot[il].sum()
        weights += list(p_e.repeat(FFN // GRANULE) * GRANULE)
        nb_all.append(nb)
    bound = max(cpu_b / (CPU_GBS * 1e9), gpu_b / (GPU_GBS * 1e9))
    check(abs(cpu_b / 1e6 - cpu_mb) <= 6e-4 and abs(gpu_b / 1e6 - gpu_mb) <= 6e-4,
          f"bytes per token: recomputed {cpu_b / 1e6:.4f} / {gpu_b / 1e6:.4f} MB, printed "
          f"{cpu_mb} / {gpu_mb}")
    check(abs(bound * 1e3 - bound_ms) <= 6e-4, f"bound {bound * 1e3:.4f} vs {bound_ms} ms")
    check(vram <= (hot_budget_mib + 0.005) * 2 ** 20, f"vram {vram} within {hot_budget_mib} MiB")
    # lower bound: every layer's neurons cost the same here, so a split is a number of groups
    # k <= budget / group bytes and their total weight P; the CPU side falls with P and the GPU
    # side rises, so T >= max(C0 - a P*, G0 + b P*), P* = min(crossing, the k hottest groups)
    check(max(nb_all) - min(nb_all) < 1e-9 * max(nb_all), "layers of one neuron size")
    nb = nb_all[0]
    a, b = nb / (CPU_GBS * 1e9), nb / (GPU_GBS * 1e9)
    c0 = sum(weights) * a
    g0 = base / (GPU_GBS * 1e9)
    k = int((hot_budget_mib + 0.005) * 2 ** 20 // (nb * GRANULE))
    p_max = sum(sorted(weights, reverse=True)[:k])
    p_star = min((c0 - g0) / (a + b), p_max)
    lower = max(c0 - a * p_star, g0 + b * p_star)
    check(bound <= lower * 1.01, f"bound {bound * 1e3:.4f} ms within 1% of the lower bound "
          f"{lower * 1e3:.4f} ms")
    return counts, p_star < p_max, hot_budget_mib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    sluice, tool = os.path.abspath(args.sluice), os.path.abspath(args.tool)
    with tempfile.TemporaryDirectory() as d:
        model, stats = os.path.join(d, "m.gguf"), os.path.join(d, "stats.gguf")
        text = os.path.join(d, "text.txt")
        with open(text, "w") as f:
            f.write(" ".join(f"word{i * 7919 % 263} the of and" for i in range(300)))
        r = run(sluice, "mkmodel", "--arch", "qwen3moe", "--layers", LAYERS, "--dim", 128,
                "--ffn", FFN, "--experts", EXPERTS, "--top-k", TOP_K, "--type", "Q8_0",
                "--neuron-skew", 1, "--router-skew", 1.2, "-o", model)
        check(r.returncode == 0, f"mkmodel: {r.stderr}")
        r = run(sluice, "place", "profile", "-m", model, "-f", text, "-o", stats,
                "--tokens", 256)
        if not check(r.returncode == 0, f"place profile: {r.stderr}"):
            return 1
        # 1. the profile
        st, sr = tensors(stats)
        tokens = int(sr.fields["sluice.neuron_stats.tokens"].parts[-1][0])
        check(tokens > 0, "tokens")
        for il in range(LAYERS):
            routed = np.asarray(st[f"blk.{il}.ffn_expert_count"].data, dtype=np.int64)
            act = np.asarray(st[f"blk.{il}.ffn_act_count"].data, dtype=np.int64)
            check(routed.sum() == tokens * TOP_K, f"layer {il}: {routed} routed of {tokens}")
            check(np.all(act.reshape(EXPERTS, FFN) <= routed[:, None]),
                  f"layer {il}: a neuron active more often than its expert is routed")
            check(routed.max() > 2 * routed.min(), f"layer {il}: routing skewed: {routed}")
        # 4. a budget where VRAM binds, one where the bandwidths do
        loose = solve_and_check(sluice, tool, model, stats, "64MiB", d)
        # the tight budget: what the base and the reserve take, plus room for ~5 experts of 8
        tight = loose and solve_and_check(
            sluice, tool, model, stats, f"{int((64 - loose[2]) * 1024 + 512)}KiB", d)
        if tight and loose:
            check(not tight[1] and loose[1], "5MiB: VRAM binds; 64MiB: the bandwidths do")
            check(sum(tight[0].values()) < sum(loose[0].values()), "more budget, more hot")
            routed = [np.asarray(st[f"blk.{il}.ffn_expert_count"].data) for il in range(LAYERS)]
            # with VRAM binding and equal sizes, no cold expert is routed more than a whole-hot
            # one (the solver may differ from this only by a group at the margin)
            hot_min = min((routed[l][e] for (l, e), h in tight[0].items() if h == FFN),
                          default=None)
            cold_max = max((routed[l][e] for (l, e), h in tight[0].items() if h == 0),
                           default=None)
            check(hot_min is not None and cold_max is not None and cold_max <= hot_min,
                  f"popular experts hot first: coldest whole-hot routed {hot_min}, most routed "
                  f"cold {cold_max}")
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
