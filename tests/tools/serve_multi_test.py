"""Tests of `sluice serve` with several models in one runtime (issue 13) on mkmodel models and
the simulated device, through Python's stdlib HTTP client on 127.0.0.1: routing by "model"
(temperature 0 gives `sluice generate`'s text for each model, also from concurrent clients),
the 404/400 of unknown and missing models, eviction under a small --vram-budget with a pinned
model never evicted, external residency (409, then POST /models/load, then success), the
admin endpoints (pin, unpin, load, unload, compact) and their bad bodies, the flags, and
--hotswap (issue 12): /health reloads a runtime model's changed tensors, whose new text
survives eviction and compaction.
Under --config=asan the server is the ASan/LSan build: a report fails the test.

usage: serve_multi_test.py SLUICE_BINARY
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (the Server class and helpers; argv[1] is the binary)

expect = st.expect
SIM = ("--device", "sim", "--placement", "gpu")
PROMPTS = ["Hello", "The quick brown fox", "one two three"]
N = 8


def gen(path, prompt, n=N):
    return st.generate(path, prompt, n, *SIM)


def complete(srv, model, prompt, n=N, path="/v1/completions"):
    body = {"prompt": prompt, "max_tokens": n, "n_predict": n, "temperature": 0}
    if model is not None:
        body["model"] = model
    return srv.json("POST", path, body)


def text_of(body):
    if "choices" in body:
        return body["choices"][0].get("text", body["choices"][0].get("message", {}).get("content"))
    return body.get("content")


def states(srv):
    status, body = srv.json("GET", "/v1/models")
    return {m["id"]: m["residency"]["state"] for m in body.get("data", [])} if status == 200 else {}


def gauge(srv, name):
    """A per-model gauge of /metrics: {model: value}."""
    _, _, vals = st.metrics(srv)
    pat = re.compile(r'%s\{model="([^"]+)"\}$' % re.escape(name))
    return {m.group(1): v for k, v in vals.items() for m in [pat.match(k)] if m}


def metric(srv, name):
    return st.metrics(srv)[2].get(name)


def test_routing(tmp, paths):
    srv = st.Server(tmp, f"a={paths['a']}", "--model", f"b={paths['b']}", "-np", "2", *SIM,
                    name="route")
    try:
        want = {k: gen(paths[k], "Hello") for k in "ab"}
        expect(want["a"] != want["b"], "the two models write different text (a fair test)")
        expect(states(srv) == {"a": "host", "b": "host"},
               f"/v1/models lists both, on their host floors ({states(srv)})")
        for k in "ab":
            for path in ("/v1/completions", "/completion"):
                status, body = complete(srv, k, "Hello", path=path)
                expect(status == 200 and text_of(body) == want[k] and body.get("model") == k,
                       f"{path} model {k}: generate's text ({status}, {text_of(body)!r})")
        status, body = srv.json("POST", "/v1/chat/completions",
                                {"model": "b", "max_tokens": 4, "temperature": 0,
                                 "messages": [{"role": "user", "content": "hi"}]})
        expect(status == 200 and body.get("model") == "b", f"chat routes to b ({status})")
        expect(states(srv) == {"a": "device", "b": "device"}, "both loaded (room for both)")
        status, body = complete(srv, "nope", "Hello")
        msg = body.get("error", {}).get("message", "")
        expect(status == 404 and "'nope'" in msg and "'a'" in msg and "'b'" in msg,
               f"an unknown model: 404 naming it and the served ones ({status}, {msg})")
        status, body = complete(srv, None, "Hello")
        expect(status == 400 and "'model'" in body.get("error", {}).get("message", ""),
               f"no model with several: 400 ({status})")
        status, body = complete(srv, 7, "Hello")
        expect(status == 400 and "'model'" in body.get("error", {}).get("message", ""),
               f"a model that is not a string: 400 ({status})")
        g = gauge(srv, "sluice_model_residency")
        expect(g == {"a": 2.0, "b": 2.0}, f"/metrics: a residency gauge per model ({g})")
        expect(all(v > 0 for v in gauge(srv, "sluice_model_resident_device_bytes").values()),
               "/metrics: device bytes per model")
        # concurrent clients on both models: each gets its model's text
        want_all = {(k, p): gen(paths[k], p) for k in "ab" for p in PROMPTS}
        got, lock = {}, threading.Lock()

        def client(i):
            k, p = "ab"[i % 2], PROMPTS[i % len(PROMPTS)]
            status, body = complete(srv, k, p)
            with lock:
                got[i] = (k, p, status, text_of(body))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bad = [g for g in got.values() if g[2] != 200 or g[3] != want_all[(g[0], g[1])]]
        expect(len(got) == 8 and not bad, f"8 concurrent clients on two models: generate's "
                                          f"text each ({bad})")
    finally:
        srv.stop()


def scratch_of(tmp, paths):
    """Device scratch the runtime reserves for three models' single slots, measured from a
    server's budget: on_demand = weight_pool = 0.95 * arena - scratch when scratch dominates."""
    srv = st.Server(tmp, f"p={paths['p']}", "--model", f"a={paths['a']}", "--model",
                    f"b={paths['b']}", "--vram-budget", "64M", *SIM, name="calib")
    try:
        arena = metric(srv, "sluice_runtime_arena_bytes")
        pool = metric(srv, "sluice_runtime_on_demand_budget_bytes")
        _, body = srv.json("GET", "/v1/models")
        dev = body["data"][0]["residency"]["device_bytes"]
    finally:
        srv.stop()
    return int(0.95 * arena - pool), dev


def test_eviction(tmp, paths):
    scratch, D = scratch_of(tmp, paths)
    # room for the pinned model and one more: 2D <= weight pool < 3D
    budget = int((scratch + 2.5 * D) / 0.95) + 4096
    srv = st.Server(tmp, f"p={paths['p']}", "--model", f"a={paths['a']}", "--model",
                    f"b={paths['b']}", "--pin", "p", "--vram-budget", str(budget), *SIM,
                    name="evict")
    try:
        od = metric(srv, "sluice_runtime_on_demand_budget_bytes")
        expect(D <= od < 2 * D, f"the on-demand budget holds one model ({od} for {D} each)")
        expect(states(srv) == {"p": "pinned", "a": "host", "b": "host"},
               f"--pin loads p at start-up ({states(srv)})")
        want = {k: gen(paths[k], "Hello") for k in "pab"}
        seq = ["a", "b", "a", "p", "b", "a"]
        ok = True
        for k in seq:
            status, body = complete(srv, k, "Hello")
            s = states(srv)
            other = "b" if k == "a" else "a"
            ok &= status == 200 and text_of(body) == want[k] and s["p"] == "pinned"
            if k != "p":
                ok &= s[k] == "device" and s[other] == "host"
        expect(ok, "requests alternate a and b: each evicts the other, p stays pinned, the "
                   "text is generate's")
        ev = metric(srv, "sluice_runtime_evictions_total")
        expect(ev is not None and ev >= 4, f"evictions counted ({ev})")
        # concurrent requests on a and b (each slot holds its model: none is evicted under a
        # running request) still give generate's text
        got, lock = [], threading.Lock()

        def client(i):
            k = "ab"[i % 2]
            status, body = complete(srv, k, "Hello")
            with lock:
                got.append(status == 200 and text_of(body) == want[k])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expect(len(got) == 6 and all(got), f"6 concurrent clients on a and b under the small "
                                           f"budget: generate's text ({got})")
        expect(states(srv)["p"] == "pinned", "p still pinned")
        # unpin p: it becomes evictable, and compaction with nothing to reload frees it
        status, body = srv.json("POST", "/models/unpin", {"model": "p"})
        expect(status == 200 and body.get("residency", {}).get("state") == "device",
               f"POST /models/unpin p ({status}, {body})")
        status, body = srv.json("POST", "/models/compact", {"reload": ["a"]})
        s = {m["id"]: m["residency"]["state"] for m in body.get("data", [])}
        expect(status == 200 and s == {"p": "host", "a": "device", "b": "host"},
               f"POST /models/compact reload [a]: only a on the device ({status}, {s})")
        status, body = complete(srv, "a", "Hello")
        expect(status == 200 and text_of(body) == want["a"], "a after compaction: same text")
        expect(metric(srv, "sluice_runtime_compactions_total") == 1, "one compaction counted")
    finally:
        srv.stop()
    # over-commit: two models' contexts leave the weight pool smaller than the pinned p; the
    # budget solver reports it rather than refusing, so serve warns and a loads alone
    budget = int((scratch * 2 / 3 + 0.5 * D) / 0.95)
    srv = st.Server(tmp, f"p={paths['p']}", "--model", f"a={paths['a']}", "--pin", "p",
                    "--vram-budget", str(budget), *SIM, name="overcommit")
    try:
        expect("more than the weight pool" in srv.stderr(),
               f"over-commit: a warning at start-up ({srv.stderr()[-300:]})")
        status, body = complete(srv, "a", "Hello")
        expect(status == 200 and text_of(body) == want["a"], f"over-commit: a still answers "
                                                              f"({status})")
        expect(states(srv) == {"p": "pinned", "a": "device"}, f"({states(srv)})")
    finally:
        srv.stop()


def test_pin_too_big(tmp, paths):
    """A pinned model that does not fit on the device in full is refused at start, with the
    budget's figures, rather than answering every request with a 500."""
    args = [st.SLUICE, "serve", "--port", "0", "--model", f"a={paths['a']}", "--pin", "a",
            "--vram-budget", "4M", "--device", "sim"]
    try:  # a server that starts anyway would serve until killed: a failure, not a hang
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        expect(False, "--pin of a model larger than --vram-budget 4M: refused at start (it "
                      "was still serving after 60 s)")
        return
    expect(r.returncode == 1 and "does not fit on the device in full" in r.stderr and
           "weight pool" in r.stderr,
           f"--pin of a model larger than --vram-budget 4M: refused at start ({r.returncode}, "
           f"{r.stderr.strip()[-300:]})")


def test_external(tmp, paths):
    srv = st.Server(tmp, f"a={paths['a']}", "--model", f"b={paths['b']}", "--residency",
                    "external", *SIM, name="external")
    try:
        want = gen(paths["a"], "Hello")
        status, body = complete(srv, "a", "Hello")
        msg = body.get("error", {}).get("message", "")
        expect(status == 409 and "'a'" in msg and "/models/load" in msg,
               f"external: a request for a model not loaded is a 409 naming the fix ({msg})")
        expect(states(srv) == {"a": "host", "b": "host"}, "... and loads nothing")
        status, body = srv.json("POST", "/models/load", {"model": "a"})
        expect(status == 200 and body.get("id") == "a" and
               body.get("residency", {}).get("state") == "device",
               f"POST /models/load a ({status}, {body})")
        status, body = complete(srv, "a", "Hello")
        expect(status == 200 and text_of(body) == want, f"then a answers: generate's text "
                                                         f"({status})")
        expect(states(srv)["b"] == "host", "b untouched")
        # pin, unload refused while pinned, unpin, unload
        status, body = srv.json("POST", "/models/pin", {"model": "a"})
        expect(status == 200 and body["residency"]["state"] == "pinned", f"pin a ({status})")
        status, body = srv.json("POST", "/models/unload", {"model": "a"})
        expect(status == 409 and "unpin" in body.get("error", {}).get("message", ""),
               f"unload of a pinned model: 409 ({status})")
        for path, state in (("/models/unpin", "device"), ("/models/unload", "host")):
            status, body = srv.json("POST", path, {"model": "a"})
            expect(status == 200 and body["residency"]["state"] == state,
                   f"{path} a -> {state} ({status})")
        status, _ = complete(srv, "a", "Hello")
        expect(status == 409, "unloaded: 409 again")
        # bad bodies
        for path, body, code, needle in (
                ("/models/load", "[1]", 400, "object"),
                ("/models/load", "{", 400, ""),
                ("/models/load", {}, 400, "'model'"),
                ("/models/pin", {"model": 5}, 400, "'model'"),
                ("/models/unpin", {"model": "zz"}, 404, "'zz'"),
                ("/models/compact", {"reload": "a"}, 400, "'reload'"),
                ("/models/compact", {"reload": [3]}, 400, "'reload[0]'"),
                ("/models/compact", {"reload": ["a", "a"]}, 400, "twice"),
                ("/models/compact", {"reload": ["zz"]}, 404, "'zz'")):
            status, data = srv.json("POST", path, body)
            msg = data.get("error", {}).get("message", "")
            expect(status == code and needle in msg,
                   f"{path} {json.dumps(body)}: {code} naming {needle!r} ({status}, {msg})")
        status, _, _ = srv.request("GET", "/models/load")
        expect(status == 405, f"GET /models/load: 405 ({status})")
        expect(srv.p.poll() is None, "the server serves on after the bad bodies")
    finally:
        srv.stop()


def test_single_admin(tmp, paths):
    """One -m FILE runs without a runtime: its id is the path, "model" may be left out, and
    the residency endpoints say what they need."""
    srv = st.Server(tmp, paths["a"], name="single")
    try:
        status, body = complete(srv, None, "Hello")
        expect(status == 200 and body.get("model") == paths["a"], f"-m FILE: model defaults "
                                                                  f"to it ({status})")
        status, body = complete(srv, paths["a"], "Hello")
        expect(status == 200, f"-m FILE: named by its path ({status})")
        status, body = srv.json("POST", "/models/load", {"model": paths["a"]})
        expect(status == 400 and "--model NAME=PATH" in body.get("error", {}).get("message", ""),
               f"-m FILE: residency endpoints need the runtime ({status})")
    finally:
        srv.stop()


def test_hotswap(tmp, paths):
    """--hotswap with a runtime: GET /health reloads every model's changed tensors into its
    host floor and device copy; the text is then that of the changed file, also after the model
    was evicted and loaded again (POST /models/unload) and after a compaction."""
    live = os.path.join(tmp, "live.gguf")
    alt = os.path.join(tmp, "alt.gguf")
    shutil.copyfile(paths["a"], live)
    r = st.run("requant", "-m", paths["a"], "--tensor", "blk.0.ffn_up.weight", "--type", "Q4_0",
               "-o", alt)
    expect(r.returncode == 0, f"requant: {r.stderr}")
    want_old, want_new = gen(paths["a"], "Hello"), gen(alt, "Hello")
    expect(want_old != want_new, "the requantized tensor changes the text (a fair test)")
    srv = st.Server(tmp, f"a={live}", "--model", f"b={paths['b']}", "--hotswap", *SIM,
                    name="hotswap")
    try:
        status, body = complete(srv, "a", "Hello")
        expect(status == 200 and text_of(body) == want_old, "before: the file's text")
        os.replace(alt, live)
        status, body = srv.json("GET", "/health")
        rel = body.get("reload", {})
        t = [(x.get("model"), x.get("name"), x.get("where")) for x in rel.get("tensors", [])]
        expect(status == 200 and rel.get("changed") is True and
               ("a", "blk.0.ffn_up.weight", "device") in t,
               f"/health reloads a's changed tensor on the device ({status}, {t})")
        status, body = complete(srv, "a", "Hello")
        expect(status == 200 and text_of(body) == want_new, f"after the reload: the new file's "
                                                             f"text ({text_of(body)!r})")
        for path, body in (("/models/unload", {"model": "a"}), ("/models/compact", {})):
            srv.json("POST", path, body)
            status, body = complete(srv, "a", "Hello")
            expect(status == 200 and text_of(body) == want_new,
                   f"after {path} and a reload from the floor: the new text")
        status, body = complete(srv, "b", "Hello")
        expect(status == 200 and text_of(body) == gen(paths["b"], "Hello"), "b untouched")
    finally:
        srv.stop()


def test_flags(paths):
    a, b = paths["a"], paths["b"]
    for args, needle in (
            (["--model", f"x={a}", "--model", f"x={b}"], "'x' given twice"),
            (["--model", f"={a}"], "empty NAME"),
            (["--model", "x="], "empty PATH"),
            (["--model", f"x y={a}"], "NAME holds"),
            (["--model", a, "--model", f"b={b}"], "NAME=PATH"),
            (["--model", f"a={a}", "--pin", "q"], "--pin 'q'"),
            (["--model", f"a={a}", "--pin", "a", "--pin", "a"], "--pin 'a' given twice"),
            (["--model", f"a={a}", "--residency", "maybe"], "--residency 'maybe'"),
            (["--model", f"a={a}", "--alias", "z"], "--alias"),
            (["--model", f"a={a}", "--pin"], "--pin needs a value")):
        r = st.run("serve", "--port", "0", *args)
        expect(r.returncode == 2 and needle in r.stderr,
               f"serve {' '.join(args)}: exit 2 naming {needle!r} ({r.returncode}, "
               f"{r.stderr.strip()[:120]})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        paths = {k: os.path.join(tmp, k + ".gguf") for k in "pab"}
        for i, k in enumerate("pab"):
            st.mkmodel(paths[k], "--arch", "llama", "--seed", str(11 + i))
        test_flags(paths)
        test_routing(tmp, paths)
        test_eviction(tmp, paths)
        test_pin_too_big(tmp, paths)
        test_external(tmp, paths)
        test_single_admin(tmp, paths)
        test_hotswap(tmp, paths)
    if st.FAILURES:
        print(f"{len(st.FAILURES)} failure(s)")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
