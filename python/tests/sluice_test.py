"""The Python package (python/sluice) over libsluice.so, on `sluice mkmodel` models.

Checks against the CLI as the oracle: logits bit for bit with `sluice eval --logits-out`,
perplexity with `sluice perplexity`, greedy text with `sluice generate`, the placement plan
(-ngl, -ot, --cpu-moe, --n-cpu-moe, --vram-budget) with `sluice place show --json`, footprints
with the plan; a hot/cold experiment (place profile -> solve -> hot-cold) within 1e-5 of the
CPU; the serving runtime (LRU eviction, NotResident in external mode, pinning, compaction); a
context keeping its model open, closed handles and argument types refused.

usage: sluice_test.py SLUICE_BINARY LIBSLUICE_SO
"""
import gc
import json
import os
import re
import subprocess
import sys
import shutil
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "..", "tests", "tools")]
from harness import SLUICE, expect, finish  # noqa: E402  (argv[1]: the sluice binary)

LIB = os.path.abspath(sys.argv[2])
os.environ["SLUICE_LIB"] = LIB


def sanitizer_reexec():
    """Under --config=asan the library needs the ASan runtime, which python3 does not load:
    run again with clang's shared runtime preloaded (leak checks off: the interpreter's own
    allocations would be reported)."""
    import ctypes
    try:
        ctypes.CDLL(LIB)
        return
    except OSError as e:
        if "__asan" not in str(e) and "__ubsan" not in str(e) or os.environ.get("LD_PRELOAD"):
            raise
    rt = subprocess.run(["clang", "-print-file-name=libclang_rt.asan-x86_64.so"],
                        capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=rt,
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


sanitizer_reexec()
os.environ["SLUICE_ACT_F32"] = "1"  # hot/cold within 1e-5 (read at context creation)
import sluice  # noqa: E402


def run(*args):
    env = dict(os.environ, SLUICE_DEVICE="sim")
    env.pop("LD_PRELOAD", None)  # the CLI links its own sanitizer runtime (asan config)
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, errors="replace",
                          env=env)


def raises(fn, exc, text=""):
    try:
        fn()
    except exc as e:
        return text in str(e)
    return False


def test_model(d, dense, moe, text):
    toks = [1, 7, 42, 300, 5, 9]
    base = os.path.join(d, "base.f32")
    r = run("eval", "-m", dense, "--tokens", ",".join(map(str, toks)), "--placement", "cpu",
            "--logits-out", base)
    expect(r.returncode == 0, f"sluice eval: {r.stderr.strip()[-200:]}")
    # the modes come from the library's one table, in sl_placement order
    expect(sluice.PLACEMENTS[0] == "auto" and "experts-cpu" in sluice.PLACEMENTS and
           sluice.PLACEMENTS.index("hot-cold") == len(sluice.PLACEMENTS) - 1, "PLACEMENTS")
    expect(raises(lambda: sluice.Model(dense, placement="everywhere"), ValueError, "experts-cpu"),
           "an unknown placement is refused naming the modes")
    cli = np.fromfile(base, dtype=np.float32)
    with sluice.Model(dense, placement="cpu") as m:
        expect(m.info["arch"] == "llama" and m.n_vocab == 512 and m.info["n_layer"] == 4,
               f"info: {m.info['arch']} vocab {m.n_vocab} layers {m.info['n_layer']}")
        # defaults on both sides: one KV cache type (F16) for the CLI's eval and a Context
        with m.context(n_ctx=128, all_logits=True) as ctx:
            ctx.eval(toks)
            allr = ctx.logits_all()
            expect(allr.shape == (len(toks), 512) and allr.dtype == np.float32, "logits_all shape")
            expect(np.array_equal(allr[-1], ctx.logits()), "last row == logits()")
            expect(cli.size in (512, 512 * len(toks)) and
                   np.array_equal(cli.reshape(-1, 512)[-1], allr[-1]),
                   "logits bit for bit with sluice eval --logits-out")
            expect(ctx.n_past == len(toks), "n_past")
            ctx.rewind(2)
            expect(ctx.n_past == 2, "rewind")
            st = ctx.stats()
            expect(st["prefill_tokens"] == len(toks), f"stats: {st['prefill_tokens']}")
            expect((st["moe_scheduler"] is None) == (st["moe_mode"] is None) and
                   st["moe_mode"] in (None, "cpu", "post", "full", "auto"),
                   f"stats: moe_mode {st['moe_mode']} beside moe_scheduler {st['moe_scheduler']}")
            # the output layer for a tail only (perplexity's rows): those rows, the same bits
            k = len(toks) // 2
            ctx.rewind(0)
            ctx.eval(toks, logits_from=k)
            tail = ctx.logits_all()
            expect(tail.shape == (len(toks) - k, 512) and np.array_equal(tail, allr[k:]),
                   f"eval(logits_from={k}): rows {k}.. bit for bit those of a full eval")
            try:
                ctx.logits(k - 1)
                expect(False, "a row before logits_from is not served")
            except IndexError:
                pass
            for bad in (-2, len(toks), 1.5):
                try:
                    ctx.eval(toks, logits_from=bad)
                    expect(False, f"eval(logits_from={bad!r}) refused")
                except ValueError as ex:
                    expect("logits_from" in str(ex), f"eval(logits_from={bad!r}): {ex}")
        t = m.tokenize("the cat sat", add_special=False)
        expect(t.dtype == np.int32 and len(t) > 0, f"tokenize: {t}")
        expect(m.detokenize(t).strip() == "the cat sat", f"detokenize: {m.detokenize(t)!r}")
        # perplexity as the CLI computes it
        ppl, running = m.perplexity(open(text).read(), n_ctx=64)
        r = run("perplexity", "-m", dense, "-f", text, "--ctx", "64", "--placement", "cpu")
        got = re.search(r"PPL = ([0-9.]+)", r.stdout + r.stderr)
        expect(got is not None and abs(float(got.group(1)) - ppl) <= 1e-4 * ppl,
               f"perplexity {ppl:.4f} == sluice perplexity {got.group(1) if got else r.stderr}")
        # greedy generation as the CLI does it
        out = m.generate("the cat", n_predict=8, temp=0)
        r = run("generate", "-m", dense, "-p", "the cat", "-n", "8", "--temp", "0",
                "--placement", "cpu")
        expect(r.returncode == 0 and out and out in r.stdout,
               f"generate {out!r} within sluice generate's {r.stdout!r}")
        # a GBNF grammar forces its sentences, greedy and sampled; a malformed one is refused
        for temp, seed in ((0, 0), (1.0, 1), (1.0, 2), (1.0, 3)):
            out = m.generate("the cat", n_predict=16, temp=temp, seed=seed,
                             grammar='root ::= "yes" | "no"')
            expect(out in ("yes", "no"), f"generate(grammar=yes|no, temp={temp}) -> {out!r}")
        out = m.generate("the cat", n_predict=40, temp=0.7, seed=5,
                         grammar='root ::= "[" [1-9] ("," [1-9]){2} "]"')
        expect(re.fullmatch(r"\[[1-9](,[1-9]){2}\]", out) is not None,
               f"generate(grammar=list) -> {out!r}")
        expect(raises(lambda: m.generate("x", grammar='root ::= "a" | ('), sluice.SluiceError,
                      "line 1, column 17"), "a malformed grammar is a SluiceError naming the "
               "line and column")
        expect(raises(lambda: m.generate("x", grammar=5), TypeError, "grammar"),
               "grammar=5 is a TypeError")
    # the same logits with every weight on the sim device, profiled or not
    with sluice.Model(dense, placement="gpu", device="sim") as g:
        with g.context(n_ctx=128) as ctx:
            ctx.eval(toks)
            expect(np.array_equal(ctx.logits(), cli.reshape(-1, 512)[-1]),
                   "sim device logits == CPU logits")
            expect(raises(ctx.step_profile, sluice.SluiceError, "profile_steps"),
                   "step_profile without profile_steps is a SluiceError naming the option")
        with g.context(n_ctx=128, profile_steps=True) as ctx:
            ctx.eval(toks)
            expect(np.array_equal(ctx.logits(), cli.reshape(-1, 512)[-1]),
                   "profiled sim logits == CPU logits")
            prof = ctx.step_profile()
            L = g.info["n_layer"]
            expect(prof["attn"]["calls"] == L and prof["attn"]["seconds"] > 0 and
                   all(v["seconds"] >= 0 and v["gap_seconds"] == 0 for v in prof.values()),
                   f"step_profile: attention once per layer, times >= 0: {prof['attn']}")
        # decode graphs, PDL and the fused launches are cuda's: on sim no_graphs / no_pdl /
        # no_fusion change nothing and nothing is captured (each a field of the C struct: ctypes
        # would take a misspelt attribute silently)
        names = [f[0] for f in sluice._lib.CtxOptions._fields_]
        expect(names[-3:] == ["no_graphs", "no_pdl", "no_fusion"],
               f"sl_ctx_options' last fields in the Python mirror: {names[-3:]}")
        for ng, npdl, nf in ((False, False, False), (True, False, False), (False, True, False),
                             (False, False, True)):
            with g.context(n_ctx=128, no_graphs=ng, no_pdl=npdl, no_fusion=nf) as ctx:
                for t in toks:
                    ctx.eval([t])
                st = ctx.stats()
                expect(np.array_equal(ctx.logits(), cli.reshape(-1, 512)[-1]) and
                       st["graph_passes"] == st["graph_captures"] == st["graph_failures"] == 0
                       and st["graph_error"] is None,
                       f"sim decode, no_graphs={ng}, no_pdl={npdl}, no_fusion={nf}: CPU "
                       f"logits, no graph ({st['graph_passes']})")
    expect(raises(lambda: sluice.Model(dense, placement="nowhere"), ValueError, "placement"),
           "an unknown placement is a ValueError")
    expect(raises(lambda: sluice.Model(os.path.join(d, "missing.gguf")), sluice.SluiceError,
                  "missing.gguf"), "a missing file is a SluiceError naming it")


def plan_sides(plan):
    return {t["name"]: t["on_device"] for t in plan["tensors"]}


def test_placement(d, moe):
    cases = [
        (dict(placement="layers", n_gpu_layers=1), ["-ngl", "1"]),
        (dict(override_tensor=["exps=CPU"], placement="gpu"), ["--placement", "gpu", "-ot",
                                                               "exps=CPU"]),
        (dict(cpu_moe=True), ["--cpu-moe"]),
        (dict(n_cpu_moe=2), ["--n-cpu-moe", "2"]),
        (dict(vram_budget="12MiB"), ["--vram-budget", "12MiB"]),
    ]
    for kw, flags in cases:
        with sluice.Model(moe, device="sim", **kw) as m:
            p = m.plan()
            r = run("place", "show", "-m", moe, *flags, "--json", "--no-bound")
            cli = json.loads(r.stdout) if r.returncode == 0 else {"plan": {"tensors": []}}
            want = {t["name"]: t["buft"] != "CPU" for t in cli["plan"]["tensors"]}
            expect(plan_sides(p) == want, f"plan {kw} == place show {flags}")
            dev = sum(t["bytes"] for t in p["tensors"] if t["on_device"])
            expect(dev == p["device_bytes"], f"plan {kw}: device bytes add up")
            fp = sluice.footprint(moe, device="sim", **kw)
            expect(fp["device_bytes"] == p["device_bytes"] and
                   fp["host_bytes"] == p["host_bytes"], f"footprint {kw} == plan")
    expect(raises(lambda: sluice.Model(moe, override_tensor="exps=NOWHERE"), sluice.SluiceError,
                  "NOWHERE"), "a bad override is a SluiceError naming it")
    expect(raises(lambda: sluice.Model(moe, vram_budget="lots"), sluice.SluiceError,
                  "vram_budget"), "a bad size is a SluiceError naming the option")


def test_hot_cold(d, dense, text):
    stats, idx = os.path.join(d, "stats.gguf"), os.path.join(d, "dense.gpuidx")
    r = run("place", "profile", "-m", dense, "-f", text, "-o", stats, "--tokens", "256")
    expect(r.returncode == 0, f"place profile: {r.stderr.strip()[-200:]}")
    r = run("place", "solve", "-m", dense, "--stats", stats, "--vram-budget", "16MiB",
            "-o", idx, "--cpu-gbs", "10", "--gpu-gbs", "20")
    expect(r.returncode == 0, f"place solve: {r.stderr.strip()[-200:]}")
    toks = [1, 2, 3, 4, 5, 6]
    with sluice.Model(dense, placement="cpu") as m, m.context() as c:
        c.eval(toks)
        ref = c.logits()
    with sluice.Model(dense, placement="hot-cold", gpu_index=idx, device="sim") as m:
        p = m.plan()
        expect(any(t["split"] for t in p["tensors"]) and p["mode"] == "hot-cold",
               f"hot-cold plan splits FFNs ({p['mode']})")
        with m.context() as c:
            c.eval(toks)
            diff = float(np.max(np.abs(c.logits() - ref)) / np.max(np.abs(ref)))
            expect(diff <= 1e-5, f"hot-cold logits within 1e-5 of the CPU ({diff:g})")


def test_runtime(d, dense):
    paths = []
    for i in range(3):
        p = os.path.join(d, f"small{i}.gguf")
        r = run("mkmodel", "--arch", "llama", "--layers", "2", "--dim", "64", "--ffn", "128",
                "--seed", str(10 + i), "-o", p)
        expect(r.returncode == 0, f"mkmodel small{i}: {r.stderr.strip()[-200:]}")
        paths.append(p)
    D = sluice.footprint(paths[0], placement="gpu", device="sim")["device_bytes"]
    arena = 32 << 20
    scratch = arena - int(D * 2.6)  # on-demand budget: two of the three models
    with sluice.Runtime(device="sim", arena_bytes=arena, weight_fraction=1.0,
                        wiggle_fraction=0.0, max_scratch_bytes=scratch,
                        host_slab_bytes="4M") as rt:
        ms = [rt.open(p, placement="gpu") for p in paths]
        expect([m.residency for m in ms] == ["host"] * 3, "models open on their host floor")
        expect(raises(lambda: ms[0].context(), sluice.NotResident), "context below device")
        refs = []
        for m in ms[:2]:
            rt.acquire(m)
            with m.context() as c:
                c.eval([1, 2, 3])
                refs.append(c.logits())
        rt.acquire(ms[0])      # most recent
        rt.acquire(ms[2])      # evicts ms[1]
        expect([m.residency for m in ms] == ["device", "host", "device"],
               f"LRU eviction: {[m.residency for m in ms]}")
        rt.set_residency(ms[0], "pinned")
        info = rt.model_info(ms[0])
        rt.acquire(ms[1])      # evicts ms[2], never the pinned ms[0]
        expect([m.residency for m in ms] == ["pinned", "device", "host"],
               f"pinned kept: {[m.residency for m in ms]}")
        rt.compact([ms[1]])
        st = rt.stats()
        expect(st["arena_free_chunks"] == 1 and st["compactions"] == 1,
               f"compaction: {st['arena_free_chunks']} free chunks")
        expect(rt.model_info(ms[0])["d_digest"] == info["d_digest"], "pinned never moved")
        with ms[1].context() as c:
            c.eval([1, 2, 3])
            expect(np.array_equal(c.logits(), refs[1]), "logits unchanged after reload")
        with rt.held(ms[1]):
            expect(raises(lambda: rt.set_residency(ms[1], "host"), sluice.SluiceError,
                          "cannot leave the device"), "held: not evicted")
            expect(raises(lambda: rt.compact(), sluice.SluiceError, "compaction moves it"),
                   "held: not compacted")
            with ms[1].context() as c:
                c.eval([1, 2, 3])
                expect(np.array_equal(c.logits(), refs[1]), "held: logits")
        rt.set_residency(ms[1], "host")  # unheld: it may leave again
        expect(ms[1].residency == "host", "unhold: evictable again")
        rt.release_all(ms[1])
        expect(ms[1].residency == "disk", "release_all: disk")
    prefix = f"sluice-pytest-{os.getpid()}"
    with sluice.Runtime(device="sim", arena_bytes=arena, mode="external",
                        host_slab_bytes="4M", shared_floor=True, shm_prefix=prefix) as rt:
        m = rt.open(paths[0], placement="gpu")
        expect(raises(lambda: rt.acquire(m), sluice.NotResident, "externally managed"),
               "external mode: NotResident")
        rt.set_residency(m, "device")
        rt.acquire(m)
        with m.context() as c:
            c.eval([1, 2, 3])
            expect(np.array_equal(c.logits(), refs[0]), "external mode: logits")
        expect(rt.stats()["loads"] == 1, "external mode: one load")
        info = rt.model_info(m)
        expect(info["floor_name"].startswith(prefix) and info["floor_materialized"] and
               os.path.exists("/dev/shm/" + info["floor_name"]),
               f"shared floor: {info['floor_name']}")
    expect(not [x for x in os.listdir("/dev/shm") if x.startswith(prefix)],
           "shared floor: nothing left in /dev/shm")



def test_lifetime_and_types(dense):
    """A context keeps its model open: Model.close() with a context open defers the real close
    to the context's close (no crash using it); a closed context or model raises ValueError;
    text and token arguments of the wrong type raise TypeError."""
    m = sluice.Model(dense, placement="cpu")
    ctx = m.context(n_ctx=64)
    m.close()                                  # deferred: the context still uses the weights
    ctx.eval([1, 2, 3])                        # used to read freed weights
    expect(np.isfinite(ctx.logits()).all() and ctx.n_past == 3, "context after Model.close()")
    expect(raises(lambda: m.tokenize("x"), ValueError, "after close"), "closed model refused")
    expect(raises(lambda: m.context(), ValueError, "after close"), "no new context once closed")
    ctx.close()                                # the model's real close happens here
    expect(m._h is None, "the last context's close closes the model")
    for call in (lambda: ctx.eval([1]), lambda: ctx.logits(), lambda: ctx.n_past,
                 lambda: ctx.rewind(0), lambda: ctx.stats()):
        expect(raises(call, ValueError, "after close"), "a closed context raises ValueError")
    ctx.close()
    m.close()                                  # both idempotent
    # a context dropped without close() keeps its model alive until it goes
    m = sluice.Model(dense, placement="cpu")
    ctx = m.context(n_ctx=64)
    del m
    gc.collect()
    ctx.eval([4, 5])
    expect(np.isfinite(ctx.logits()).all(), "a context outlives its dropped Model object")
    ctx.close()
    with sluice.Model(dense, placement="cpu") as m:
        for bad in (123, 1.5, None, [1, 2], object()):
            expect(raises(lambda: m.tokenize(bad), TypeError, "str or bytes"),
                   f"tokenize({bad!r}) raises TypeError")
        expect(len(m.tokenize(b"the cat")) > 0, "tokenize(bytes) works")
        for bad in ("abc", 5, [1.5, 2.0], [[1, 2]], ["a"]):
            expect(raises(lambda: m.detokenize(bad), TypeError), f"detokenize({bad!r})")
        expect(raises(lambda: m.generate(123), TypeError), "generate(123)")
        expect(raises(lambda: m.perplexity(b"x"), TypeError), "perplexity(bytes)")
        expect(raises(lambda: sluice.Context("m.gguf"), TypeError), "Context(str)")
        with m.context(n_ctx=64) as c:
            for bad in ("hello", 7, [0.5], [[1]], None):
                expect(raises(lambda: c.eval(bad), TypeError), f"eval({bad!r}) raises TypeError")
            expect(raises(lambda: c.eval([2**31]), ValueError), "eval: id beyond int32")
            expect(raises(lambda: c.rewind("0"), TypeError), "rewind('0')")
            expect(raises(lambda: c.logits("0"), TypeError), "logits('0')")
            c.eval(np.array([1, 2, 3], dtype=np.int64))
            expect(c.n_past == 3, "eval accepts any integer array")
            # ints past their C type: refused, not truncated to their low bits by ctypes
            for call, what in ((lambda: c.rewind(2**32 + 1), "rewind"),
                               (lambda: c.logits(2**64 - 1), "logits"),
                               (lambda: c.logits(-2), "logits"),
                               (lambda: m.context(n_ctx=2**32 + 16), "n_ctx"),
                               (lambda: m.context(n_batch=-2**40), "n_batch"),
                               (lambda: m.perplexity("x", n_ctx=0), "n_ctx"),
                               (lambda: m.perplexity("x", chunks=0), "chunks")):
                expect(raises(call, ValueError, what), f"{what}: an int out of its C range")
            expect(c.n_past == 3, "and the context unchanged")
            # one call at a time: a second thread's call while one runs raises
            c._use.acquire()
            try:
                expect(raises(lambda: c.eval([4]), RuntimeError, "in use by another thread"),
                       "a call while another runs on the context raises RuntimeError")
                expect(raises(c.close, RuntimeError, "in use"), "and so does close()")
            finally:
                c._use.release()
            c.eval([4])
            expect(c.n_past == 4, "the context runs on once free")
        for kw in ({"n_gpu_layers": 2**32}, {"n_threads": 2**31}, {"vram_budget": 2**64},
                   {"n_cpu_moe": -2**40}, {"budget_ctx": 2**31}):
            expect(raises(lambda: sluice.Model(dense, placement="cpu", **kw), ValueError,
                          next(iter(kw)).replace("n_gpu_layers", "gpu_layers")),
                   f"Model({kw}): out of its C range")


def test_eval_batch(dense):
    """eval_batch (sl_ctx_eval_batch): three contexts in one pass, prompts then a decode each,
    leave each context as its own eval would (the same logits bit for bit on the CPU, its
    n_past); contexts of two models, one context twice, mismatched lists and non-contexts are
    refused."""
    prompts = [[1, 7, 42], [300, 5], [9, 9, 9, 9]]
    with sluice.Model(dense, placement="cpu") as m, sluice.Model(dense, placement="cpu") as m2:
        solo = []
        for p in prompts:
            with m.context(n_ctx=64) as c:
                c.eval(p)
                first = c.logits()
                c.eval([11])
                solo.append((first, c.logits()))
        cs = [m.context(n_ctx=64) for _ in prompts]
        sluice.eval_batch(cs, prompts)
        same = all(np.array_equal(c.logits(), s[0]) for c, s in zip(cs, solo))
        sluice.eval_batch(cs, [np.array([11], dtype=np.int32)] * 3)
        same = same and all(np.array_equal(c.logits(), s[1]) for c, s in zip(cs, solo))
        expect(same and [c.n_past for c in cs] == [4, 3, 5] and cs[0].n_batch == 64,
               "eval_batch: each context's logits those of its own eval, bit for bit")
        o = m2.context(n_ctx=64)
        expect(raises(lambda: sluice.eval_batch([cs[0], o], [[1], [1]]), sluice.SluiceError,
                      "another model") and
               raises(lambda: sluice.eval_batch([cs[0], cs[0]], [[1], [1]]), sluice.SluiceError,
                      "same context") and
               raises(lambda: sluice.eval_batch(cs, [[1]]), ValueError, "token lists") and
               raises(lambda: sluice.eval_batch([cs[0], "x"], [[1], [1]]), TypeError, "Context"),
               "eval_batch refuses mixed models, a context twice, bad arguments")
        expect([c.n_past for c in cs] == [4, 3, 5], "a refused batch moves no context")
        for c in cs + [o]:
            c.close()


def test_exit_without_close(d, dense):
    """A program that ends without closing its Runtime leaves nothing in /dev/shm: the
    Runtime closes at interpreter exit (its shared floor goes with its last holder)."""
    prefix = f"sluice-pyexit-{os.getpid()}"
    code = ("import sys, sluice\n"
            f"rt = sluice.Runtime(device='sim', arena_bytes='64M', host_slab_bytes='4M', "
            f"shared_floor=True, shm_prefix={prefix!r})\n"
            f"m = rt.open({dense!r}, placement='gpu')\n"
            "rt.acquire(m)\n"
            "print(rt.model_info(m)['floor_name'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    expect(r.returncode == 0 and r.stdout.strip().startswith(prefix),
           f"exit without close: the child ran ({r.returncode}, {r.stderr[-300:]})")
    left = [x for x in os.listdir("/dev/shm") if x.startswith(prefix)]
    expect(not left, f"exit without close: left in /dev/shm: {left}")
    for x in left:  # not for the next run to find
        os.unlink(os.path.join("/dev/shm", x))
    # dropped without close() in a running program: gone when the collector takes the
    # Runtime <-> Model cycle, not only at exit
    prefix = f"sluice-pydrop-{os.getpid()}"
    rt = sluice.Runtime(device="sim", arena_bytes="64M", host_slab_bytes="4M",
                        shared_floor=True, shm_prefix=prefix)
    m = rt.open(dense, placement="gpu")
    rt.acquire(m)
    expect([x for x in os.listdir("/dev/shm") if x.startswith(prefix)], "drop: no floor made")
    del rt, m
    gc.collect()
    left = [x for x in os.listdir("/dev/shm") if x.startswith(prefix)]
    expect(not left, f"drop without close: left in /dev/shm: {left}")
    for x in left:
        os.unlink(os.path.join("/dev/shm", x))
    expect(raises(lambda: sluice.Runtime(device="sim", shared_floor=True, shm_prefix="a/b"),
                  sluice.SluiceError, "'a/b'"), "a bad shm_prefix is refused by Runtime()")


def test_reload(d):
    """Model.reload_changed: a tensor rewritten in another type (requant, renamed over the
    file) is reloaded; putting the original back reattaches and gives the first logits."""
    src, live, alt = os.path.join(d, "rl_src.gguf"), os.path.join(d, "rl.gguf"), \
        os.path.join(d, "rl_alt.gguf")
    r = run("mkmodel", "--arch", "llama", "--layers", "2", "-o", src)
    expect(r.returncode == 0, f"mkmodel: {r.stderr}")
    shutil.copyfile(src, live)
    with sluice.Model(live, device="sim", placement="cpu") as m:
        first = m.reload_changed()
        expect(first["changed"] is False, f"nothing to reload at first: {first}")
        with m.context() as c:
            c.eval([1, 2, 3])
            before = c.logits().copy()
        r = run("requant", "-m", live, "--tensor", "blk.0.ffn_up.weight", "--type", "Q8_0",
                "-o", alt)
        expect(r.returncode == 0, f"requant: {r.stderr}")
        os.replace(alt, live)
        rep = m.reload_changed()
        expect(rep["changed"] and [t["name"] for t in rep["tensors"]] ==
               ["blk.0.ffn_up.weight"], f"reload_changed reloads the tensor: {rep}")
        shutil.copyfile(src, alt)
        os.replace(alt, live)
        rep = m.reload_changed()
        expect(rep["changed"] and rep["tensors"][0]["kind"] == "reattached",
               f"the original back reattaches: {rep}")
        with m.context() as c:
            c.eval([1, 2, 3])
            expect(np.array_equal(c.logits(), before), "logits after the restore are the first")
    # a model in a runtime: the new bytes reach its host floor, so they survive an eviction
    r = run("requant", "-m", src, "--tensor", "blk.1.ffn_down.weight", "--type", "Q4_0",
            "-o", alt)
    expect(r.returncode == 0, f"requant: {r.stderr}")
    with sluice.Model(alt, device="sim", placement="gpu") as m:
        with m.context() as c:
            c.eval([1, 2, 3])
            want = c.logits().copy()
    shutil.copyfile(src, live)
    with sluice.Runtime(device="sim", arena_bytes="64M", host_slab_bytes="4M") as rt:
        m = rt.open(live, placement="gpu")
        rt.acquire(m)
        os.replace(alt, live)
        rep = m.reload_changed()
        expect(rep["reloaded"] == 1 and rep["tensors"][0]["where"] == "device",
               f"runtime model: reload_changed reloads the tensor on the device: {rep}")
        rt.set_residency(m, "host")
        rt.acquire(m)
        with m.context() as c:
            c.eval([1, 2, 3])
            expect(np.array_equal(c.logits(), want),
                   "runtime model: after reload, eviction and acquire: a fresh load's logits")

def test_repack(d):
    """no_repack=True keeps Q4_K as stored; the default repacks the CPU's Q4_K matrices into
    Q4_K_R8 at load (info counts them): the same logits bit for bit."""
    q = os.path.join(d, "q4k.gguf")
    r = run("mkmodel", "--arch", "llama", "--layers", "1", "--dim", "256", "--ffn", "512",
            "--type", "Q4_K", "-o", q)
    expect(r.returncode == 0, f"mkmodel q4k: {r.stderr}")
    out = {}
    for nr in (False, True):
        with sluice.Model(q, placement="cpu", no_repack=nr) as m, m.context() as c:
            c.eval([1, 2, 3, 4])
            out[nr] = (m.info["repacked_tensors"], c.logits().copy())
    expect(out[False][0] > 0 and out[True][0] == 0,
           f"repacked tensors: {out[False][0]} by default, {out[True][0]} with no_repack")
    expect(np.array_equal(out[False][1], out[True][1]), "no_repack: the same logits")


def test_embeddings(dense):
    """Context(embeddings=True): the hidden state after the output norm of every row of the
    last eval (sl_ctx_embeddings), the same whether the tokens came in one eval or one by one."""
    toks = [1, 7, 42, 300, 5, 9]
    with sluice.Model(dense, placement="cpu") as m:
        E = m.info["n_embd"]
        with m.context(n_ctx=64, embeddings=True) as ctx:
            ctx.eval(toks)
            allr = ctx.embeddings()
            expect(allr.shape == (len(toks), E) and allr.dtype == np.float32,
                   f"embeddings shape {allr.shape}")
            expect(np.array_equal(allr[2], ctx.embeddings(2)) and
                   np.array_equal(allr[-1], ctx.embeddings(-1)), "row i == embeddings(i)")
            expect(raises(lambda: ctx.embeddings(len(toks)), IndexError), "row past the eval")
            expect(raises(lambda: ctx.embeddings("0"), TypeError), "a string index")
            ctx.rewind(0)
            rows = []
            for t in toks:
                ctx.eval([t])
                rows.append(ctx.embeddings(0))
            expect(np.array_equal(np.stack(rows), allr), "one eval == token by token")
        with m.context(n_ctx=64) as ctx:
            ctx.eval(toks)
            expect(raises(lambda: ctx.embeddings(), ValueError, "embeddings=True"),
                   "embeddings without the option")


def test_struct_size(d, dense):
    """sluice.h's option structs open with struct_size: the library's defaults carry the size
    the mirrors have, and a call refuses any other (0, smaller, garbage) naming the struct."""
    import ctypes
    from ctypes import byref, c_void_p
    from sluice import _lib
    L = sluice.lib()
    for name, cls in (("sl_model_options", _lib.ModelOptions), ("sl_ctx_options", _lib.CtxOptions),
                      ("sl_runtime_options", _lib.RuntimeOptions),
                      ("sl_sampler_options", _lib.SamplerOptions)):
        got = getattr(L, name + "_default")().struct_size
        expect(got == ctypes.sizeof(cls) == cls().struct_size,
               f"{name}_default().struct_size {got} == the mirror's {ctypes.sizeof(cls)}")

    def refused(name, call, opt):
        for bad in (0, 8, ctypes.sizeof(opt) + 8, 2**40):
            opt.struct_size = bad
            err = _lib.Error()
            st = call(opt, err)
            msg = err.msg.decode()
            expect(st == 1 and f"{name}: struct_size is {bad}, this library's is "
                   f"{ctypes.sizeof(opt)}" in msg, f"{name} struct_size {bad} refused: {st} {msg}")

    h = c_void_p()
    refused("sl_model_options", lambda o, e: L.sl_model_open(
        dense.encode(), byref(o), byref(h), byref(e)), L.sl_model_options_default())
    refused("sl_model_options", lambda o, e: L.sl_model_footprint(
        dense.encode(), byref(o), byref(_lib.Footprint()), byref(e)), L.sl_model_options_default())
    refused("sl_runtime_options", lambda o, e: L.sl_runtime_create(byref(o), byref(h), byref(e)),
            L.sl_runtime_options_default())
    refused("sl_sampler_options", lambda o, e: L.sl_sampler_create(byref(o), byref(h), byref(e)),
            L.sl_sampler_options_default())
    with sluice.Model(dense, placement="cpu") as m:
        refused("sl_ctx_options", lambda o, e: L.sl_ctx_create(m._h, byref(o), byref(h), byref(e)),
                L.sl_ctx_options_default())
    expect(h.value is None, "nothing was created with a refused struct")


def main():
    d = tempfile.mkdtemp(prefix="sluice-py-test-", dir=os.environ.get("TEST_TMPDIR"))
    dense, moe = os.path.join(d, "dense.gguf"), os.path.join(d, "moe.gguf")
    r = run("mkmodel", "--arch", "llama", "--layers", "4", "--dim", "128", "--ffn", "512",
            "--type", "Q8_0", "--neuron-skew", "1", "-o", dense)
    expect(r.returncode == 0, f"mkmodel dense: {r.stderr}")
    r = run("mkmodel", "--arch", "qwen3moe", "--layers", "3", "--dim", "64", "--ffn", "64",
            "-o", moe)
    expect(r.returncode == 0, f"mkmodel moe: {r.stderr}")
    text = os.path.join(d, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join(["the cat sat on the mat and the dog ran far away"] * 60))
    test_model(d, dense, moe, text)
    test_lifetime_and_types(dense)
    test_eval_batch(dense)
    test_exit_without_close(d, dense)
    test_placement(d, moe)
    test_hot_cold(d, dense, text)
    test_runtime(d, dense)
    test_reload(d)
    test_repack(d)
    test_struct_size(d, dense)
    test_embeddings(dense)
    sys.exit(finish())


if __name__ == "__main__":
    main()
