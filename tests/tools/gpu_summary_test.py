"""Tests of tools/gpu-summary (issue 31): summary.json of a run folder whose bench JSON is made
here by sluice on the simulated device (a mkmodel MoE) and whose llama-bench JSON is written in
llama-bench's -o json layout with known figures: the ratio arithmetic against the rows' own
numbers, nulls with reasons for everything missing, mismatched or failed, and the warm token's
timeline from bench moe's trace.

usage: gpu_summary_test.py SLUICE_BINARY GPU_SUMMARY_SCRIPT
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from harness import SLUICE, expect, finish

SUMMARY = os.path.abspath(sys.argv[2])
SIM = {**os.environ, "SLUICE_DEVICE": "sim"}


def run(*args):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True, env=SIM)


def bench(out, *args):
    r = run(*args)
    if r.returncode:
        sys.exit(f"sluice {' '.join(map(str, args))} failed: {r.stderr[-500:]}")
    with open(out, "w") as f:
        f.write(r.stdout)
    return json.loads(r.stdout)


def summarize(d, *extra):
    r = subprocess.run([sys.executable, SUMMARY, d, *extra], capture_output=True, text=True)
    s = None
    out = os.path.join(d, "summary.json") if not extra else extra[-1]
    if r.returncode == 0 and os.path.exists(out):
        with open(out) as f:
            s = json.load(f)
    return r, s


def llama_entry(n_prompt, n_gen, avg_ts, ngl=99, ncmoe=0, threads=2):
    """One test of llama-bench -o json (0c1e570's fields that the summary reads and a few)."""
    return {"build_commit": "0c1e570", "backends": "CUDA", "model_filename": "m.gguf",
            "n_threads": threads, "n_gpu_layers": ngl, "n_cpu_moe": ncmoe,
            "n_prompt": n_prompt, "n_gen": n_gen, "avg_ts": avg_ts, "stddev_ts": 0.5,
            "avg_ns": int(1e9 * (n_prompt + n_gen) / avg_ts), "samples_ts": [avg_ts] * 2}


def row(s, rid):
    return next((r for r in s["rows"] if r["id"] == rid), None)


def close(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12)


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-gpu-summary-", dir=os.environ.get("TEST_TMPDIR"))
    m = os.path.join(tmp, "m.gguf")
    r = run("mkmodel", "-o", m)
    if r.returncode:
        sys.exit(f"mkmodel failed: {r.stderr}")
    d = os.path.join(tmp, "run")
    os.makedirs(d)
    mj = bench(os.path.join(d, "moe-big.json"), "bench", "moe", "-m", m, "--device", "sim",
               "--tokens", "3", "--prefill", "16", "--trace",
               os.path.join(d, "trace-moe-big-post.json"), "--json")
    budget = mj["vram_budget_bytes"]
    # the budget's rows: the baseline (experts-cpu) and static hot among them (a budget past
    # the reserve: moe-big's is below it on this model)
    bj = bench(os.path.join(d, "decode-budget.json"), "bench", "decode", "-m", m, "-n", "2",
               "--prompt-tokens", "8", "--device", "sim", "--vram-budget", "8MiB",
               "--sched", "mode=cpu", "--json")
    hj = bench(os.path.join(d, "decode-hybrid.json"), "bench", "decode", "-m", m, "-n", "3",
               "--prompt-tokens", "16", "--placement", "gpu", "--n-cpu-moe", "1", "--json")
    gj = bench(os.path.join(d, "decode-gpu.json"), "bench", "decode", "-m", m, "-n", "3",
               "--prompt-tokens", "8", "--placement", "gpu", "--pdl-ab", "2",
               "--fusion-ab", "1", "--json")
    lj = bench(os.path.join(d, "decode-launched.json"), "bench", "decode", "-m", m, "-n", "3",
               "--prompt-tokens", "8", "--placement", "gpu", "--no-graphs", "--json")
    # llama.cpp at the same prompt length as the hybrid row (16) and another (512) for the gpu
    lnc = [llama_entry(16, 0, 800.0, ncmoe=1), llama_entry(0, 8, 40.0, ncmoe=1)]
    lg = [llama_entry(512, 0, 3000.0), llama_entry(0, 8, 160.0)]
    for name, v in (("llama-ncmoe.json", lnc), ("llama-gpu.json", lg)):
        with open(os.path.join(d, name), "w") as f:
            json.dump(v, f)
    info = {"commit": "abc1234", "device": "Test GPU 1", "vram_budget_bytes": budget,
            "n_cpu_moe": 1, "steps": [{"name": "bench-moe", "rc": 0, "seconds": 3}]}
    with open(os.path.join(d, "run-info.json"), "w") as f:
        json.dump(info, f)

    r, s = summarize(d)
    expect(r.returncode == 0 and s is not None, f"gpu-summary writes summary.json ({r.stderr})")
    s = s or {"rows": []}
    expect(s.get("device") == "Test GPU 1" and s.get("commit") == "abc1234" and
           s.get("vram_budget_bytes") == budget and s.get("n_cpu_moe") == 1,
           "device, commit, budget and n-cpu-moe from run-info.json")
    hy, mc = row(s, "sluice/decode-hybrid/gpu"), row(s, "sluice/decode-budget/experts-cpu")
    sh = row(s, "sluice/decode-budget/static hot")
    brow = [r for r in s["rows"] if r["id"].startswith("sluice/decode-budget/") and
            r.get("tok_s_decode") is not None]
    best = max(brow, key=lambda r: r["tok_s_decode"]) if brow else None
    expect(sh is not None and mc is not None and best is not None and
           close(s.get("static_hot_vs_mode_cpu_decode"), sh["tok_s_decode"] / mc["tok_s_decode"])
           and close(s.get("budget_best_vs_mode_cpu_decode"),
                     best["tok_s_decode"] / mc["tok_s_decode"]),
           f"static hot and the best budget row against the budget's experts-cpu row "
           f"({[r['id'] for r in brow]})")
    ln, lgr = row(s, "llama.cpp/llama-ncmoe/ngl99-ncmoe1"), row(s, "llama.cpp/llama-gpu/ngl99-ncmoe0")
    gp, gl = row(s, "sluice/decode-gpu/gpu"), row(s, "sluice/decode-launched/gpu")
    expect(None not in (hy, mc, ln, lgr, gp, gl) and s["roles"] == {
        "hybrid": "sluice/decode-hybrid/gpu", "mode_cpu": "sluice/decode-budget/experts-cpu",
        "static_hot": "sluice/decode-budget/static hot",
        "budget_best": best["id"] if best else None,
        "defer": "sluice/moe/cpu+defer", "moe_cpu": "sluice/moe/cpu",
        "gpu": "sluice/decode-gpu/gpu", "gpu_launched": "sluice/decode-launched/gpu",
        "llamacpp_ncmoe": "llama.cpp/llama-ncmoe/ngl99-ncmoe1",
        "llamacpp_gpu": "llama.cpp/llama-gpu/ngl99-ncmoe0"}, f"roles: {s.get('roles')}")
    if None in (hy, mc, ln, lgr, gp, gl):
        return finish()
    expect(gl["tok_s_decode"] == lj["runs"][0]["decode_tps"] and
           close(s["gpu_graph_vs_launched_decode"], gp["tok_s_decode"] / gl["tok_s_decode"]),
           f"gpu_graph_vs_launched_decode = gpu decode / --no-graphs decode "
           f"({s.get('gpu_graph_vs_launched_decode')})")
    ab = gj["runs"][0].get("pdl_ab") or {}
    # sim has no PDL: the same tokens, no ratio, the reason says so
    expect(ab.get("reps") == 2 and ab.get("same_tokens") is True and
           ab.get("effective") is False and gj["runs"][0].get("pdl") is False and
           s.get("gpu_pdl_vs_no_pdl_decode", 0) is None and s.get("gpu_pdl_same_tokens") is True
           and "not in effect" in s.get("null_reasons", {}).get("gpu_pdl_vs_no_pdl_decode", ""),
           f"sim's --pdl-ab: the same tokens, PDL not in effect, no ratio ({ab}, "
           f"{s.get('null_reasons', {}).get('gpu_pdl_vs_no_pdl_decode')})")

    def pdl_summary(run0):
        with open(os.path.join(d, "decode-gpu.json"), "w") as f:
            json.dump(dict(gj, runs=[run0]), f)
        return summarize(d)[1] or {}
    # as a GPU's row would say it: the ratio is off / on
    s2 = pdl_summary(dict(gj["runs"][0], pdl_ab=dict(ab, effective=True)))
    expect(close(s2.get("gpu_pdl_vs_no_pdl_decode"),
                 ab.get("off_ms_median", 0) / ab.get("on_ms_median", 1)) and
           s2.get("gpu_pdl_same_tokens") is True,
           f"gpu_pdl_vs_no_pdl_decode = the gpu row's --pdl-ab off / on median step "
           f"({s2.get('gpu_pdl_vs_no_pdl_decode')})")
    # --fusion-ab: sim launches no kernels, so no fewer with fusion: not in effect, no ratio;
    # a GPU's row (fewer launches a layer with it) gives off / on
    fab = gj["runs"][0].get("fusion_ab") or {}
    expect(fab.get("reps") == 1 and fab.get("same_tokens") is True and
           fab.get("effective") is False and fab.get("on_launches_per_layer", 0) is None and
           s.get("gpu_fusion_vs_no_fusion_decode", 0) is None and
           s.get("gpu_fusion_same_tokens") is True and "not in effect" in
           s.get("null_reasons", {}).get("gpu_fusion_vs_no_fusion_decode", ""),
           f"sim's --fusion-ab: the same tokens, not in effect, no ratio ({fab})")
    s2 = pdl_summary(dict(gj["runs"][0], fusion_ab=dict(
        fab, effective=True, on_launches_per_layer=7.0, off_launches_per_layer=11.0)))
    expect(close(s2.get("gpu_fusion_vs_no_fusion_decode"),
                 fab.get("off_ms_median", 0) / fab.get("on_ms_median", 1)) and
           s2.get("gpu_fusion_same_tokens") is True and
           s2.get("gpu_pdl_vs_no_pdl_decode", 0) is None,
           f"gpu_fusion_vs_no_fusion_decode = --fusion-ab off / on "
           f"({s2.get('gpu_fusion_vs_no_fusion_decode')})")
    # kernel launches a layer: sim counts none (null, the reason); a cuda row's value is taken
    expect(s.get("gpu_launches_per_layer", 0) is None and "no kernel counted" in
           s.get("null_reasons", {}).get("gpu_launches_per_layer", ""),
           "sim: gpu_launches_per_layer null "
           f"({s.get('null_reasons', {}).get('gpu_launches_per_layer')})")
    s2 = pdl_summary(dict(gj["runs"][0], device_launches_per_layer=7.0))
    expect(s2.get("gpu_launches_per_layer") == 7.0,
           f"gpu_launches_per_layer = the gpu row's ({s2.get('gpu_launches_per_layer')})")
    # the gpu row without --pdl-ab: both null, the reason says why
    s2 = pdl_summary({k: v for k, v in gj["runs"][0].items() if k != "pdl_ab"})
    expect(s2.get("gpu_pdl_vs_no_pdl_decode", 0) is None and
           s2.get("gpu_pdl_same_tokens", 0) is None and "without --pdl-ab" in
           s2.get("null_reasons", {}).get("gpu_pdl_vs_no_pdl_decode", ""),
           f"no --pdl-ab figures: null with the reason ({s2.get('null_reasons', {})})")
    with open(os.path.join(d, "decode-gpu.json"), "w") as f:
        json.dump(gj, f)
    h0, g0 = hj["runs"][0], gj["runs"][0]
    # rows carry the bench's own figures
    expect(hy["tok_s_decode"] == h0["decode_tps"] and hy["tok_s_prefill"] == h0["prefill_tps"]
           and hy["ms_per_token_median"] == h0["decode_ms_per_token_median"] and
           hy["ms_per_token_p90"] == h0["decode_ms_per_token_p90"] and
           hy["scheduler"] == h0["scheduler"] == "cpu" and hy["placement"] == "gpu n-cpu-moe 1"
           and hy["prefill_tokens"] == 16 and hy["decode_steps"] == 3 and
           close(hy["cpu_mb_per_token"], h0["host_bytes_per_token"] / 1e6) and
           hy["pcie_mb_per_token"] == 0, f"hybrid row from decode-hybrid.json ({hy})")
    m0 = mj["rows"][0]
    md = next((x for x in mj["rows"] if x["mode"] == "cpu+defer"), None)
    expect(md is not None and close(s.get("defer_vs_cpu_decode"),
                                    md["decode_tps"] / m0["decode_tps"]),
           f"defer_vs_cpu_decode = bench moe's cpu+defer decode / its cpu row's "
           f"({s.get('defer_vs_cpu_decode')})")
    mm = row(s, "sluice/moe/cpu") or {}
    expect(mm.get("tok_s_decode") == m0["decode_tps"] and mm["sched_mode"] == "cpu" and
           close(mm["cpu_mb_per_token"], m0["cpu_bytes_per_step"] / 1e6) and
           mm["pcie_mb_per_token"] == 0 and mm["moe_calls_per_step"] is None and
           "one mode" in mm["null_reasons"].get("moe_calls_per_step", ""),
           "mode=cpu row from moe-big.json; its missing per-mode calls have a reason")
    post = row(s, "sluice/moe/post")
    expect(post is not None and post["scheduler"] == "fetch" and post["sched_mode"] == "post" and
           post["moe_calls_per_step"]["post"] > 0 and post["pcie_mb_per_token"] > 0,
           "post row: fetch scheduler, calls per mode, PCIe MB")
    # llama.cpp rows: pp and tg of one configuration together; per-token medians are null
    expect(ln["tok_s_decode"] == 40.0 and ln["tok_s_prefill"] == 800.0 and
           ln["prefill_tokens"] == 16 and close(ln["ms_per_token_mean"], 25.0) and
           ln["ms_per_token_median"] is None and
           "repetitions" in ln["null_reasons"]["ms_per_token_median"] and
           ln["cpu_mb_per_token"] is None and ln["null_reasons"].get("cpu_mb_per_token"),
           f"llama.cpp row: tg/pp merged, nulls with reasons ({ln})")
    # the ratios, from the rows' own figures
    b0 = next((x for x in bj["runs"] if x["placement"] == "experts-cpu"), {})
    expect(close(s["hybrid_vs_mode_cpu_decode"], h0["decode_tps"] / b0.get("decode_tps", 0)),
           "hybrid_vs_mode_cpu_decode = hybrid decode / experts-cpu mode=cpu decode at the "
           "budget")
    ce = s.get("cpu_expert_vs_read") or {}
    expect(b0.get("cpu_expert_gbps", 0) > 0 and
           close(ce.get("ratio"), b0.get("cpu_expert_gbps", 0) / bj.get("roofline_gbps", 1))
           and ce.get("read_gbps") == bj.get("roofline_gbps") and ce.get("threads") == bj.get(
               "threads"), f"cpu_expert_vs_read = the experts-cpu row's CPU expert GB/s / the "
           f"run's streaming read ({ce}, row {b0.get('cpu_expert_gbps')})")
    expect(close(s["hybrid_vs_llamacpp_ncmoe_decode"], h0["decode_tps"] / 40.0),
           "hybrid_vs_llamacpp_ncmoe_decode = hybrid decode / llama.cpp tg")
    expect(close(s["hybrid_vs_llamacpp_ncmoe_prefill"], h0["prefill_tps"] / 800.0),
           "hybrid_vs_llamacpp_ncmoe_prefill at the same prompt length (16)")
    expect(close(s["gpu_vs_llamacpp_decode"], g0["decode_tps"] / 160.0),
           "gpu_vs_llamacpp_decode = gpu decode / llama.cpp -ngl 99 tg")
    expect(s["gpu_vs_llamacpp_prefill"] is None and
           "prefill lengths differ" in s["null_reasons"].get("gpu_vs_llamacpp_prefill", ""),
           "gpu_vs_llamacpp_prefill: 8 vs 512 tokens is null with the reason")
    expect(close(s["gpu_decode_vs_bound"], g0["fraction_of_bound"]) and
           close(g0["fraction_of_bound"],
                 g0["bound_ms_per_token"] / g0["decode_ms_per_token_mean"]),
           "gpu_decode_vs_bound = the gpu row's bound / its mean ms per token")
    expect(all(k in s["null_reasons"] for k in s["ratio_definitions"] if s[k] is None) and
           all(set(r["null_reasons"]) == {k for k in r if r[k] is None and k != "null_reasons"}
               for r in s["rows"]), "every null, top and per row, has a reason")
    expect(s.get("llamacpp_perplexity", 0) is None and
           "llama-perplexity" in s["null_reasons"].get("llamacpp_perplexity", ""),
           "no llama.cpp perplexity: the CUDA peer has no llama-perplexity, said so")
    tl = s.get("warm_token_timeline", {})
    layers = tl.get("layers") or []
    expect(tl.get("passes_in_trace") == 2 and tl.get("token") and layers and
           [x["layer"] for x in layers] == sorted(x["layer"] for x in layers) and
           all(x["span_us"] > 0 for x in layers) and tl.get("gpu_phase_us") is None and
           tl["null_reasons"].get("gpu_phase_us"),
           f"warm token timeline: the last of 2 passes, per layer ({tl.get('passes_in_trace')})")

    # a prompt-length mismatch on the hybrid side, a failed gpu row, a broken llama file
    h0m = dict(h0)
    with open(os.path.join(d, "llama-ncmoe.json"), "w") as f:
        json.dump([llama_entry(512, 0, 800.0, ncmoe=1), llama_entry(0, 8, 40.0, ncmoe=1)], f)
    gjf = dict(gj)
    gjf["runs"] = [{"placement": "gpu", "device": "cuda", "ok": False,
                    "error": "model 17.0 GiB > 90% of free 10.0 GiB"}]
    with open(os.path.join(d, "decode-gpu.json"), "w") as f:
        json.dump(gjf, f)
    with open(os.path.join(d, "llama-gpu.json"), "w") as f:
        f.write("[{\"n_prompt\": 512,")
    out2 = os.path.join(tmp, "s2.json")
    r, s2 = summarize(d, "-o", out2)
    s2 = s2 or {}
    nr = s2.get("null_reasons", {})
    expect(r.returncode == 0 and s2.get("hybrid_vs_llamacpp_ncmoe_prefill") is None and
           "16 tokens" in nr.get("hybrid_vs_llamacpp_ncmoe_prefill", "") and
           close(s2.get("hybrid_vs_llamacpp_ncmoe_decode"), h0m["decode_tps"] / 40.0),
           "hybrid prefill vs pp512 of another length: null naming both lengths")
    expect(s2.get("gpu_vs_llamacpp_decode") is None and s2.get("gpu_decode_vs_bound") is None and
           "did not run" in nr.get("gpu_decode_vs_bound", "") and
           "llama-gpu.json does not parse" in " ".join(s2.get("notes", [])),
           f"a failed gpu row and a broken llama-gpu.json: nulls with reasons ({nr})")
    expect(not os.path.exists(os.path.join(d, "summary.json.partial")), "no partial file left")
    # deepseek2 on cuda vs the CPU (issue 32): null with a reason without the GPU tests' log,
    # then the engine_cuda_test log's parity line (the format that test prints)
    expect(s.get("deepseek2_cuda_vs_cpu", 0) is None and
           "engine_cuda_test" in s["null_reasons"].get("deepseek2_cuda_vs_cpu", ""),
           "no GPU test log: deepseek2_cuda_vs_cpu null with the reason")
    os.makedirs(os.path.join(d, "logs"))
    with open(os.path.join(d, "logs", "tests_runtime_engine_cuda_test.log"), "w") as f:
        f.write("llama    F32   gpu          prefill vs CPU: rel 1e-07\n"
                "deepseek2-parity: runs 16 max_rel 3.25e-06 tolerance 1e-4 PASS\n")
    r, s4 = summarize(d, "-o", os.path.join(tmp, "s4.json"))
    p4 = (s4 or {}).get("deepseek2_cuda_vs_cpu") or {}
    expect(r.returncode == 0 and p4 == {"runs": 16, "max_rel": 3.25e-06, "tolerance": 1e-4,
                                        "pass": True} and "deepseek2 cuda vs CPU" in r.stdout,
           f"deepseek2_cuda_vs_cpu from the engine_cuda_test log ({p4})")
    with open(os.path.join(d, "deepseek2-parity.log"), "w") as f:
        f.write("deepseek2-parity: runs 16 max_rel 0.0021 tolerance 1e-4 FAIL\n")
    r, s5 = summarize(d, "-o", os.path.join(tmp, "s5.json"))
    p5 = (s5 or {}).get("deepseek2_cuda_vs_cpu") or {}
    expect(r.returncode == 0 and p5.get("pass") is False and p5.get("max_rel") == 0.0021,
           f"the ds2-parity step's log comes first, and a FAIL stays a failure ({p5})")

    # the GPU tests' counts (a step's partial log loses to logs/), and `tools/gpu-test cpu`'s
    # compare: a failed one null with the reason, then its rows as written
    with open(os.path.join(d, "logs", "tests_runtime_engine_cuda_test.log"), "a") as f:
        f.write("engine_cuda_test: 2193 checks, 0 failed\n")
    with open(os.path.join(d, "deepseek2-parity.log"), "a") as f:
        f.write("engine_cuda_test: 117 checks, 1 failed\n")
    os.makedirs(os.path.join(d, "cpu"))
    open(os.path.join(d, "cpu", "cpu-compare.json"), "w").close()
    r, s6 = summarize(d, "-o", os.path.join(tmp, "s6.json"))
    s6 = s6 or {}
    expect(r.returncode == 0 and (s6.get("tests") or {}).get("engine_cuda_test") == {
        "checks": 2193, "failed": 0, "log": os.path.join("logs", "tests_runtime_engine_cuda_test.log")},
        f"tests: the GPU test log's counts ({s6.get('tests')})")
    expect(s6.get("cpu_vs_llamacpp", 0) is None and
           "does not parse" in s6.get("null_reasons", {}).get("cpu_vs_llamacpp", ""),
           f"an empty cpu-compare.json: null, the reason says so ({s6.get('null_reasons')})")
    with open(os.path.join(d, "cpu", "cpu-compare.json"), "w") as f:
        json.dump({"threads": 16, "repetitions": 3, "llama_cpp": {"build_commit": "0c1e570"},
                   "rows": [{"test": "pp512", "llama_tps_median": 98.5, "sluice_tps_median": 450.5,
                             "ratio_median": 4.57}]}, f)
    r, s7 = summarize(d, "-o", os.path.join(tmp, "s7.json"))
    c7 = (s7 or {}).get("cpu_vs_llamacpp") or {}
    expect(r.returncode == 0 and c7.get("threads") == 16 and c7.get("llama_cpp") == "0c1e570" and
           c7.get("rows") == [{"test": "pp512", "llama_tps_median": 98.5,
                               "sluice_tps_median": 450.5, "ratio_median": 4.57}],
           f"cpu_vs_llamacpp from cpu/cpu-compare.json ({c7})")

    # Q4_K GEMV vs HBM and compaction vs a D2D copy (issue 32), from bench kernels' and bench
    # alloc's JSON in their layouts: a sim alloc.json is no GPU figure (null, said so)
    def alloc_json(cpu_only, ratio):
        return {"device": "x", "kind": "sim" if cpu_only else "cuda", "cpu_only": cpu_only,
                "compaction": {"bytes_moved": 2607616, "blocks_moved": 36, "copies": 51,
                               "reps": 5, "seconds": 0.00002, "gbs": 130.4,
                               "d2d_copy_seconds": 0.000016, "d2d_copy_gbs": 160.7,
                               "ratio": ratio, "median_pair_ratio": ratio - 0.01}}
    with open(os.path.join(d, "alloc.json"), "w") as f:
        json.dump(alloc_json(True, 0.7), f)
    with open(os.path.join(d, "kernels-14336x4096.json"), "w") as f:
        json.dump({"bench": "kernels", "rows": 14336, "cols": 4096, "cpu": [], "gpu": [
            {"type": "Q4_K", "act": "q8", "gbps": 1531.4, "ratio": 0.3648},
            {"type": "Q4_K", "act": "f32", "gbps": 1083.1, "ratio": 0.258},
            {"type": "Q8_0", "act": "q8", "gbps": 2277.7, "ratio": 0.5426},
            {"type": "Q4_K", "act": "q8-glu", "gbps": 1702.2, "ratio": 0.4055},
            {"type": "Q4_K", "act": "q8-pre", "gbps": 2502.0, "ratio": 0.596},
            {"type": "Q4_K", "act": "f32-glu", "gbps": 601.0, "ratio": 0.1432}]}, f)
    r, s8 = summarize(d, "-o", os.path.join(tmp, "s8.json"))
    s8 = s8 or {}
    expect(r.returncode == 0 and s8.get("gpu_gemv_vs_hbm") == {"Q4_K": 0.3648, "Q8_0": 0.5426},
           f"gpu_gemv_vs_hbm: the Q8-activation rows per type ({s8.get('gpu_gemv_vs_hbm')})")
    expect(s8.get("gpu_glu_vs_hbm") == {"Q4_K": 0.4055},
           f"gpu_glu_vs_hbm: the q8-glu rows per type ({s8.get('gpu_glu_vs_hbm')})")
    expect(s8.get("gpu_gemv_pre_vs_hbm") == {"Q4_K": 0.596},
           f"gpu_gemv_pre_vs_hbm: the q8-pre rows per type ({s8.get('gpu_gemv_pre_vs_hbm')})")
    expect(s8.get("compaction_vs_d2d", 0) is None and
           "sim" in s8.get("null_reasons", {}).get("compaction_vs_d2d", ""),
           "a sim alloc.json: compaction_vs_d2d null, the reason says sim")
    with open(os.path.join(d, "alloc.json"), "w") as f:
        json.dump(alloc_json(False, 0.81), f)
    r, s9 = summarize(d, "-o", os.path.join(tmp, "s9.json"))
    c9 = (s9 or {}).get("compaction_vs_d2d") or {}
    expect(r.returncode == 0 and c9.get("ratio") == 0.81 and c9.get("median_pair_ratio") == 0.8
           and c9.get("copies") == 51, f"compaction_vs_d2d from alloc.json ({c9})")
    # malformed: GPU rows not a list, a NaN figure: nulls with reasons, no crash
    with open(os.path.join(d, "kernels-14336x4096.json"), "w") as f:
        json.dump({"gpu": 5}, f)
    with open(os.path.join(d, "alloc.json"), "w") as f:
        f.write('{"cpu_only": false, "compaction": {"ratio": 0.5, "bytes_moved": NaN}}')
    r, s10 = summarize(d, "-o", os.path.join(tmp, "s10.json"))
    s10 = s10 or {}
    expect(r.returncode == 0 and s10.get("gpu_gemv_vs_hbm", 0) is None and
           "no list" in s10.get("null_reasons", {}).get("gpu_gemv_vs_hbm", "") and
           s10.get("gpu_glu_vs_hbm", 0) is None and
           "no list" in s10.get("null_reasons", {}).get("gpu_glu_vs_hbm", "") and
           (s10.get("compaction_vs_d2d") or {}).get("bytes_moved", 0) is None,
           f"malformed kernels and alloc JSON: nulls, exit 0 ({r.stderr[-200:]})")

    # an empty folder: every figure null with a reason, exit 0
    e = os.path.join(tmp, "empty")
    os.makedirs(e)
    r, s3 = summarize(e)
    s3 = s3 or {}
    keys = ["device", "commit", "vram_budget_bytes", "cpu_vs_llamacpp", "tests",
            "gpu_pdl_same_tokens", "gpu_fusion_same_tokens"] + list(s3.get("ratio_definitions", {}))
    expect(r.returncode == 0 and s3.get("rows") == [] and len(keys) == 25 and
           all(s3.get(k) is None and s3["null_reasons"].get(k) for k in keys),
           f"empty run folder: all null with reasons ({s3.get('null_reasons')})")
    r, _ = summarize(os.path.join(tmp, "no-such-folder"))
    expect(r.returncode == 1 and "not a folder" in r.stderr, "a missing folder: exit 1 naming it")
    shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
