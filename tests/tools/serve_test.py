"""Tests of `sluice serve` (llama-server's endpoints) on mkmodel models, with Python's stdlib
HTTP client: every endpoint, streaming (SSE), temperature-0 equality with `sluice generate`,
concurrent clients, bad input (each a JSON error with the right status, the server serving on),
clients that disconnect mid-request, chat templates from the GGUF, and a clean exit on
SIGTERM/SIGINT (under --config=asan the same test runs the ASan/LSan build: a report fails it).

usage: serve_test.py SLUICE_BINARY
"""
import codecs
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import shutil
import tempfile
import threading
import time

SLUICE = os.path.abspath(sys.argv[1])
FAILURES = []
VOCAB = 512  # mkmodel's default

# Generated text is whatever bytes the synthetic weights pick, not always valid UTF-8; the
# server's JSON writes an invalid byte b as \u00bb, so decode generate's stdout the same way.
codecs.register_error("sluice_bytes",
                      lambda e: ("".join(map(chr, e.object[e.start:e.end])), e.end))


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)
    return cond


def run(*args):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True,
                          errors="sluice_bytes")


def generate(model, prompt, n, *flags):
    r = run("generate", "-m", model, "-p", prompt, "-n", n, "--temp", 0, *flags)
    if r.returncode:
        sys.exit(f"generate failed: {r.stderr}")
    return r.stdout


def generate_json(model, prompt, n):
    r = run("generate", "-m", model, "-p", prompt, "-n", n, "--temp", 0, "--json")
    if r.returncode:
        sys.exit(f"generate --json failed: {r.stderr}")
    return json.loads(r.stdout)


class Server:
    def __init__(self, tmp, model, *flags, name="srv"):
        self.log = os.path.join(tmp, name + ".log")
        self.errf = open(self.log, "w")
        self.p = subprocess.Popen([SLUICE, "serve", "-m", model, "--port", "0", *map(str, flags)],
                                  stdout=subprocess.DEVNULL, stderr=self.errf)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.p.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if not self.port:
            sys.exit(f"serve did not start: {self.stderr()}")

    def stderr(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def conn(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def json(self, method, path, body=None):
        status, headers, data = self.request(method, path, body)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, {"_raw": data}

    def sse(self, path, body):
        """The data payloads of a server-sent event stream, in order."""
        c = self.conn()
        c.request("POST", path, body=json.dumps(body))
        r = c.getresponse()
        ctype = r.getheader("Content-Type", "")
        events = []
        for line in r.read().decode().split("\n\n"):
            if line.startswith("data: "):
                events.append(line[6:])
            elif line.strip():
                events.append("?" + line)
        c.close()
        return r.status, ctype, events

    def stop(self, sig=signal.SIGTERM):
        self.p.send_signal(sig)
        try:
            rc = self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "timeout"
        self.errf.close()
        err = self.stderr()
        clean = "Sanitizer" not in err and "runtime error" not in err
        expect(rc == 0 and clean, f"serve exits 0 on {signal.Signals(sig).name} with no "
               f"sanitizer report (rc {rc}){'' if clean else ': ' + err[-3000:]}")


def is_error(status, body, code, type_=None):
    e = body.get("error") if isinstance(body, dict) else None
    return (status == code and isinstance(e, dict) and e.get("code") == code and
            isinstance(e.get("message"), str) and
            isinstance(e.get("type"), str) and (type_ is None or e["type"] == type_))


def metrics(srv):
    status, headers, data = srv.request("GET", "/metrics")
    vals = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            vals[k] = float(v)
    return status, headers, vals


def mkmodel(path, *flags):
    r = run("mkmodel", "-o", path, *flags)
    if r.returncode:
        sys.exit(f"mkmodel failed: {r.stderr}")


def with_template(src, dst, template):
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--force",
                        "--chat-template", template, src, dst], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"gguf_new_metadata failed: {r.stderr}")


def test_cli(tmp, model):
    r = run("serve", "--help")
    expect(r.returncode == 0 and "usage:" in r.stdout and "/v1/chat/completions" in r.stdout
           and "--max-body-bytes" in r.stdout and "(default 127.0.0.1)" in r.stdout and
           "(default 8080)" in r.stdout, "serve --help documents endpoints, flags, 127.0.0.1:8080")
    r = run("serve")
    expect(r.returncode == 2 and "-m FILE" in r.stderr, "serve without -m exits 2")
    r = run("serve", "-m", model, "--port", "70000")
    expect(r.returncode == 2 and "--port" in r.stderr, "serve --port 70000 exits 2 naming it")
    r = run("serve", "-m", model, "--chat-template", "nonsense")
    expect(r.returncode == 2 and "--chat-template" in r.stderr,
           "serve --chat-template nonsense exits 2")
    r = run("serve", "-m", os.path.join(tmp, "missing.gguf"), "--port", "0")
    expect(r.returncode == 1 and "missing.gguf" in r.stderr, "serve of a missing file exits 1")


def test_endpoints(srv, model):
    status, body = srv.json("GET", "/health")
    expect(status == 200 and body == {"status": "ok"}, "GET /health -> {\"status\":\"ok\"}")
    status, body = srv.json("GET", "/v1/models")
    expect(status == 200 and body.get("object") == "list" and body["data"][0]["id"] == "tiny"
           and body["data"][0]["meta"]["n_vocab"] == VOCAB, "GET /v1/models names the alias")
    status, body = srv.json("GET", "/props")
    expect(status == 200 and body.get("total_slots") == 3 and
           body["default_generation_settings"]["n_ctx"] == 256 and
           body.get("chat_template_family") == "chatml", "GET /props: slots, n_ctx, template")

    prompt = "The quick brown fox"
    ref = generate(model, prompt, 16)
    gj = generate_json(model, prompt, 16)
    status, body = srv.json("POST", "/completion",
                            {"prompt": prompt, "n_predict": 16, "temperature": 0})
    expect(status == 200 and body.get("content") == ref,
           f"/completion temperature 0 == generate --temp 0 ({body.get('content')!r} vs {ref!r})")
    expect(body.get("tokens_predicted") == 16 and body.get("tokens_evaluated") == gj["n_prompt"]
           and body.get("stop") is True and body.get("stop_type") == "limit" and
           body.get("timings", {}).get("predicted_n") == 16 and
           body["timings"]["prompt_per_second"] > 0,
           "/completion: tokens_predicted, tokens_evaluated, stop_type, timings")
    status, body2 = srv.json("POST", "/completion", {"prompt": gj["prompt_tokens"],
                                                     "n_predict": 16, "temperature": 0})
    expect(status == 200 and body2.get("content") == ref, "/completion with token ids")
    status, ctype, ev = srv.sse("/completion", {"prompt": prompt, "n_predict": 16,
                                                "temperature": 0, "stream": True})
    chunks = [json.loads(e) for e in ev]
    expect(status == 200 and ctype.startswith("text/event-stream") and len(chunks) >= 2 and
           "".join(c["content"] for c in chunks) == ref and chunks[-1]["stop"] is True and
           all(c["stop"] is False for c in chunks[:-1]) and
           chunks[-1]["stop_type"] == "limit", "/completion stream: SSE chunks add up to the text")

    status, body = srv.json("POST", "/v1/completions",
                            {"prompt": prompt, "max_tokens": 16, "temperature": 0})
    ch = body.get("choices", [{}])[0]
    expect(status == 200 and body.get("object") == "text_completion" and ch.get("text") == ref
           and ch.get("finish_reason") == "length" and
           body.get("usage", {}).get("completion_tokens") == 16 and
           body["usage"]["prompt_tokens"] == gj["n_prompt"], "/v1/completions (OpenAI)")
    status, ctype, ev = srv.sse("/v1/completions", {"prompt": prompt, "max_tokens": 16,
                                                    "temperature": 0, "stream": True})
    chunks = [json.loads(e) for e in ev[:-1]]
    expect(status == 200 and ev[-1] == "[DONE]" and
           "".join(c["choices"][0]["text"] for c in chunks) == ref and
           chunks[-1]["choices"][0]["finish_reason"] == "length" and
           all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]),
           "/v1/completions stream ends with data: [DONE]")

    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    chatml = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
              "<|im_start|>assistant\n")
    ref_chat = generate(model, chatml, 12)
    status, body = srv.json("POST", "/v1/chat/completions",
                            {"messages": msgs, "max_tokens": 12, "temperature": 0})
    ch = body.get("choices", [{}])[0]
    expect(status == 200 and body.get("object") == "chat.completion" and
           ch.get("message", {}).get("role") == "assistant" and
           ch["message"].get("content") == ref_chat,
           "/v1/chat/completions == generate of the chatml prompt (no template in the GGUF)")
    status, ctype, ev = srv.sse("/v1/chat/completions", {"messages": msgs, "max_tokens": 12,
                                                         "temperature": 0, "stream": True})
    chunks = [json.loads(e) for e in ev[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    expect(status == 200 and ev[-1] == "[DONE]" and
           chunks[0]["choices"][0]["delta"].get("role") == "assistant" and
           chunks[-1]["object"] == "chat.completion.chunk" and text == ref_chat and
           chunks[-1]["choices"][0]["finish_reason"] == "length", "/v1/chat/completions stream")
    status, body = srv.json("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hel"},
                                                  {"type": "text", "text": "lo"}]}],
        "max_tokens": 4, "temperature": 0})
    expect(status == 200, "chat content as an array of text parts")

    # stop strings: cut at the first stop string, streamed or not
    long_ref = generate(model, prompt, 48)
    cut = next((i for i in range(2, len(long_ref)) if long_ref[i].isalpha()
                and long_ref[i].isascii()), None)
    if expect(cut is not None, "the reference text has an ASCII letter to stop at"):
        stop = long_ref[cut:cut + 2] if long_ref[cut + 1:cut + 2].isascii() else long_ref[cut]
        want = long_ref[:long_ref.index(stop)]
        req = {"prompt": prompt, "n_predict": 48, "temperature": 0, "stop": [stop, "\x01zz"]}
        status, body = srv.json("POST", "/completion", req)
        expect(status == 200 and body.get("content") == want and
               body.get("stop_type") == "word" and body.get("stopping_word") == stop,
               f"stop {stop!r}: content cut before it, stop_type word")
        status, ctype, ev = srv.sse("/completion", dict(req, stream=True))
        chunks = [json.loads(e) for e in ev]
        expect("".join(c["content"] for c in chunks) == want,
               "stop string while streaming: nothing past it is sent")
        status, body = srv.json("POST", "/v1/completions", dict(req, stop=stop, max_tokens=48))
        expect(status == 200 and body["choices"][0]["text"] == want and
               body["choices"][0]["finish_reason"] == "stop", "OpenAI stop as a string")

    # sampling: a seed repeats, n_predict 0, ignore_eos
    req = {"prompt": prompt, "n_predict": 12, "temperature": 0.9, "seed": 7, "top_k": 0,
           "top_p": 1, "min_p": 0}
    a = srv.json("POST", "/completion", req)[1].get("content")
    b = srv.json("POST", "/completion", req)[1].get("content")
    expect(a is not None and a == b, "the same seed gives the same text at temperature 0.9")
    status, body = srv.json("POST", "/completion", dict(req, seed=-1))
    expect(status == 200 and body["generation_settings"]["seed"] != 2**64 - 1,
           "seed -1 is a random seed")
    status, body = srv.json("POST", "/completion", dict(req, seed=2**64 - 1, ignore_eos=True))
    expect(status == 200 and body["generation_settings"]["seed"] == 2**64 - 1,
           "seed 2^64-1 is kept exactly")
    status, body = srv.json("POST", "/completion", {"prompt": prompt, "n_predict": 0})
    expect(status == 200 and body.get("content") == "" and body.get("tokens_predicted") == 0,
           "n_predict 0 generates nothing")
    status, body = srv.json("POST", "/completion", {"prompt": prompt, "n_predict": None,
                                                    "temperature": None, "max_tokens": 2})
    expect(status == 200 and body.get("tokens_predicted") == 2,
           "null fields are absent; max_tokens is n_predict on /completion too (llama-server)")

    status, headers, vals = metrics(srv)
    expect(status == 200 and headers.get("Content-Type", "").startswith("text/plain") and
           vals.get("llamacpp:tokens_predicted_total", 0) > 0 and
           vals.get("llamacpp:prompt_tokens_total", 0) > 0 and
           vals.get("llamacpp:predicted_tokens_seconds", 0) > 0 and
           vals.get("sluice_model_host_bytes", 0) > 0 and
           "sluice_model_device_bytes" in vals and "sluice_expert_calls_cpu_total" in vals and
           "sluice_expert_fetches_total" in vals and "sluice_copy_overlap_percent" in vals and
           "sluice_expert_fallbacks_total" in vals and
           "sluice_expert_cache_hits_total" in vals and
           "sluice_expert_cache_lookups_total" in vals and "sluice_reloads_total" in vals,
           "GET /metrics: Prometheus text with tokens, tok/s and the engine's stats (overlap %, "
           "fallbacks, cache hits over lookups, device and host bytes, reloads)")
    return ref


def test_concurrency(srv, model):
    prompts = ["Once upon a time", "In the beginning", "The old harbour", "Seven wizards"]
    refs = {p: generate(model, p, 24) for p in prompts}
    results, errors = [], []

    def client(i):
        p = prompts[i % len(prompts)]
        try:
            if i % 3 == 2:
                status, _, ev = srv.sse("/completion", {"prompt": p, "n_predict": 24,
                                                        "temperature": 0, "stream": True})
                text = "".join(json.loads(e)["content"] for e in ev)
            else:
                status, body = srv.json("POST", "/completion",
                                        {"prompt": p, "n_predict": 24, "temperature": 0})
                text = body.get("content")
            results.append((p, status, text))
        except Exception as e:  # noqa: BLE001 - reported as a failure below
            errors.append(repr(e))

    n = 12
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.time() - t0
    ok = [r for r in results if r[1] == 200 and r[2] == refs[r[0]]]
    expect(not errors and len(ok) == n, f"{n} concurrent clients on 3 slots each get "
           f"generate's text ({len(ok)} ok, errors {errors[:2]})")
    print(f"info {n} clients x 24 tokens in {dt:.2f} s: {n * 24 / dt:.0f} tokens/s served",
          flush=True)


def raw_request(port, head, body_parts=(), read_timeout=30):
    """Sends a request by hand (head and body pieces), returns (status, body) of the reply."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        s.sendall(head.encode())
        for part in body_parts:
            s.sendall(part)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                hdr, _, rest = data.partition(b"\r\n\r\n")
                m = re.search(rb"Content-Length: (\d+)", hdr, re.I)
                if m and len(rest) >= int(m.group(1)):
                    break
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d+)", data)
    body = data.partition(b"\r\n\r\n")[2]
    try:
        return (int(m.group(1)) if m else None), json.loads(body)
    except ValueError:
        return (int(m.group(1)) if m else None), {"_raw": body}


def test_bad_input(srv):
    cases = [
        ("malformed JSON", "/completion", '{"prompt": "x",', 400),
        ("trailing comma", "/completion", '{"prompt": "x",}', 400),
        ("invalid UTF-8", "/completion", b'{"prompt": "\xff"}', 400),
        ("not an object", "/completion", "[1, 2]", 400),
        ("leading zero", "/completion", '{"prompt": "x", "n_predict": 01}', 400),
        ("NaN", "/completion", '{"prompt": "x", "temperature": NaN}', 400),
        ("comment", "/completion", '{"prompt": "x" /* c */}', 400),
        ("single quotes", "/completion", "{'prompt': 'x'}", 400),
        ("unpaired surrogate", "/completion", '{"prompt": "\\ud800"}', 400),
        ("raw control character", "/completion", '{"prompt": "a\tb"}', 400),
        ("two values", "/completion", '{"prompt": "x"} {}', 400),
        ("number too large", "/completion", '{"prompt": "x", "top_p": 1e999}', 400),
        ("empty body", "/completion", "", 400),
        ("deep nesting", "/completion", "[" * 30000 + "]" * 30000, 400),
        ("temperature a string", "/completion", {"prompt": "x", "temperature": "hot"}, 400),
        ("temperature negative", "/completion", {"prompt": "x", "temperature": -1}, 400),
        ("n_predict fractional", "/completion", {"prompt": "x", "n_predict": 1.5}, 400),
        ("n_predict -2", "/completion", {"prompt": "x", "n_predict": -2}, 400),
        ("n_predict 2^31", "/completion", {"prompt": "x", "n_predict": 2**31}, 400),
        ("top_k -1", "/completion", {"prompt": "x", "top_k": -1}, 400),
        ("top_p 1.5", "/completion", {"prompt": "x", "top_p": 1.5}, 400),
        ("min_p -0.1", "/completion", {"prompt": "x", "min_p": -0.1}, 400),
        ("seed a string", "/completion", {"prompt": "x", "seed": "x"}, 400),
        ("seed 2^64", "/completion", {"prompt": "x", "seed": 2**64}, 400),
        ("stream a string", "/completion", {"prompt": "x", "stream": "yes"}, 400),
        ("stop a number", "/completion", {"prompt": "x", "stop": 5}, 400),
        ("stop empty", "/completion", {"prompt": "x", "stop": [""]}, 400),
        ("stop 17 strings", "/completion", {"prompt": "x", "stop": ["a"] * 17}, 400),
        ("prompt a number", "/completion", {"prompt": 5}, 400),
        ("prompt missing", "/completion", {"n_predict": 1}, 400),
        ("prompt token -1", "/completion", {"prompt": [1, -1]}, 400),
        ("prompt token n_vocab", "/completion", {"prompt": [VOCAB]}, 400),
        ("prompt no tokens", "/completion", {"prompt": []}, 400),
        ("n 2", "/v1/completions", {"prompt": "x", "n": 2}, 400),
        ("max_tokens a string", "/v1/completions", {"prompt": "x", "max_tokens": "x"}, 400),
        ("messages missing", "/v1/chat/completions", {"max_tokens": 1}, 400),
        ("messages empty", "/v1/chat/completions", {"messages": []}, 400),
        ("message without role", "/v1/chat/completions", {"messages": [{"content": "x"}]}, 400),
        ("image content", "/v1/chat/completions", {"messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}, 400),
        ("content a number", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": 5}]}, 400),
    ]
    for name, path, body, code in cases:
        status, _, data = srv.request("POST", path, body if not isinstance(body, dict)
                                      else json.dumps(body))
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = {}
        expect(is_error(status, parsed, code, "invalid_request_error"),
               f"bad input: {name} -> {code} JSON error ({status} {data[:120]!r})")

    long_prompt = " ".join(["word"] * 400)
    status, body = srv.json("POST", "/completion", {"prompt": long_prompt, "n_predict": 1})
    expect(is_error(status, body, 400, "exceed_context_size_error") and
           body["error"].get("n_ctx") == 256, "prompt longer than the context -> 400 "
           "exceed_context_size_error")
    status, body = srv.json("GET", "/nowhere")
    expect(is_error(status, body, 404, "not_found_error"), "unknown endpoint -> 404")
    status, headers, data = srv.request("GET", "/completion")
    expect(is_error(status, json.loads(data), 405) and headers.get("Allow") == "POST",
           "GET /completion -> 405 with Allow: POST")
    status, headers, data = srv.request("POST", "/health", "{}")
    expect(is_error(status, json.loads(data), 405) and "GET" in headers.get("Allow", ""),
           "POST /health -> 405")

    # bodies over --max-body-bytes (65536 here): declared, and chunked
    big = b'{"prompt": "' + b"a" * 70000 + b'"}'
    status, body = raw_request(srv.port, "POST /completion HTTP/1.1\r\nHost: x\r\n"
                               f"Content-Length: {len(big)}\r\n\r\n")
    expect(is_error(status, body, 413), f"Content-Length over the limit -> 413 ({status})")
    chunk = b"a" * 30000
    parts = [b'%x\r\n{"prompt": "\r\n' % 12] + [b"%x\r\n" % len(chunk) + chunk + b"\r\n"] * 3
    parts += [b'2\r\n"}\r\n0\r\n\r\n']
    status, body = raw_request(srv.port, "POST /completion HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n", parts)
    expect(is_error(status, body, 413), f"chunked body over the limit -> 413 ({status})")
    status, _, data = srv.request("POST", "/completion",
                                  '{"prompt": "\\ud83d\\ude00 \\u00e9\\n", "n_predict": 1}')
    expect(status == 200, "\\u escapes with a surrogate pair are accepted")
    status, body = srv.json("POST", "/completion", {"prompt": "a" * 60000, "n_predict": 1})
    expect(status in (200, 400), "a body under the limit is read")
    status, body = srv.json("GET", "/health")
    expect(status == 200, "the server still answers /health after the bad input")


def post_raw(port, path, req, n_events=0):
    """POSTs req on a socket of its own and, for a stream, reads until n_events events came;
    returns the socket (the caller closes it: a client going away)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    body = json.dumps(req).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % (path.encode(), len(body)) + body)
    got = b""
    while got.count(b"data: ") < n_events:
        got += s.recv(4096)
    return s


def wait_cancelled(srv, want):
    """sluice_requests_cancelled_total once it reaches want, or after 60 s."""
    t0, n = time.time(), -1
    while time.time() - t0 < 60 and n < want:
        time.sleep(0.1)
        n = metrics(srv)[2].get("sluice_requests_cancelled_total", 0)
    return n


def test_disconnect(tmp, model_long):
    srv = Server(tmp, model_long, "-c", 4096, "-np", 1, name="long")
    base = metrics(srv)[2].get("sluice_requests_cancelled_total", 0)
    req = {"prompt": "Tell a long story", "n_predict": 4000, "ignore_eos": True,
           "temperature": 0, "stream": True}
    post_raw(srv.port, "/completion", req, 3).close()
    t0 = time.time()
    cancelled = wait_cancelled(srv, base + 1)
    expect(cancelled == base + 1, "a client gone mid-stream cancels its generation "
           f"({time.time() - t0:.2f} s)")
    # a non-streaming request whose client leaves while it runs
    req["stream"] = False
    s = post_raw(srv.port, "/completion", req)
    time.sleep(0.5)
    s.close()
    cancelled = wait_cancelled(srv, base + 2)
    expect(cancelled == base + 2, "a non-streaming client that leaves cancels its generation")
    # a stream whose client leaves while its job waits in the queue (the one slot busy) is
    # cancelled there: its 1,000 prompt tokens are never evaluated (found only by a failed
    # write, it ran its prompt and more first)
    p0 = metrics(srv)[2].get("llamacpp:prompt_tokens_total", 0)
    hold = post_raw(srv.port, "/completion", dict(req, prompt="hold", stream=True), 1)
    queued = post_raw(srv.port, "/completion", {"prompt": [5] * 1000, "n_predict": 10,
                                                 "stream": True})
    time.sleep(0.6)
    queued.close()
    time.sleep(0.6)
    hold.close()
    cancelled = wait_cancelled(srv, base + 4)
    dp = metrics(srv)[2].get("llamacpp:prompt_tokens_total", 0) - p0
    expect(cancelled == base + 4 and dp < 1000, f"a queued stream whose client left is "
           f"cancelled unevaluated (cancelled {cancelled - base - 2} of 2, {dp} prompt tokens)")
    status, body = srv.json("GET", "/health")
    expect(status == 200 and body == {"status": "ok"}, "/health answers after the disconnects")
    status, body = srv.json("POST", "/completion", {"prompt": "again", "n_predict": 4})
    expect(status == 200 and body.get("tokens_predicted") == 4, "and completions still run")
    # a stream in flight when the server stops ends, and the server exits cleanly
    s = post_raw(srv.port, "/completion", dict(req, stream=True), 2)
    srv.stop(signal.SIGINT)
    s.close()


def test_templates(tmp, model):
    llama3 = os.path.join(tmp, "llama3.gguf")
    with_template(model, llama3, "{% for message in messages %}<|start_header_id|>"
                  "{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] | trim }}"
                  "<|eot_id|>{% endfor %}")
    srv = Server(tmp, llama3, name="llama3")
    status, body = srv.json("GET", "/props")
    expect(status == 200 and body.get("chat_template_family") == "llama3" and
           "<|start_header_id|>" in body.get("chat_template", ""),
           "a llama3 template in the GGUF is detected")
    msgs = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}]
    text = ("<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")
    gj = generate_json(llama3, text, 8)
    status, body = srv.json("POST", "/v1/chat/completions",
                            {"messages": msgs, "max_tokens": 8, "temperature": 0})
    expect(status == 200 and body["usage"]["prompt_tokens"] == gj["n_prompt"] and
           body["choices"][0]["message"]["content"] == generate(llama3, text, 8),
           "chat through the llama3 template == generate of the formatted prompt")
    srv.stop()

    odd = os.path.join(tmp, "odd.gguf")
    with_template(model, odd, "{{ something no family uses }}")
    srv = Server(tmp, odd, name="odd")
    status, body = srv.json("GET", "/props")
    expect(body.get("chat_template_family") == "chatml" and "warning" in srv.stderr(),
           "an unknown template falls back to chatml with a warning")
    srv.stop()
    srv = Server(tmp, odd, "--chat-template", "gemma", name="gemma")
    status, body = srv.json("POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
                             "temperature": 0})
    want = generate(odd, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", 4)
    expect(status == 200 and body["choices"][0]["message"]["content"] == want,
           "--chat-template gemma overrides the model's")
    srv.stop()


def test_hotswap(tmp, model):
    """--hotswap: GET /health reloads a tensor rewritten in another type (requant), reports it,
    and completions go on; restoring the original bytes reattaches and gives the first text."""
    live = os.path.join(tmp, "live.gguf")
    shutil.copyfile(model, live)
    srv = Server(tmp, live, "--hotswap", name="hotswap")
    req = {"prompt": "hello", "n_predict": 8, "temperature": 0}
    st, body = srv.json("GET", "/health")
    expect(st == 200 and body.get("reload", {}).get("changed") is False,
           f"hotswap /health with nothing changed: {st} {body}")
    _, first = srv.json("POST", "/completion", req)
    alt = os.path.join(tmp, "alt.gguf")
    r = run("requant", "-m", live, "--tensor", "blk.0.ffn_up.weight", "--type", "Q4_0",
            "-o", alt)
    expect(r.returncode == 0, f"requant: {r.stderr}")
    os.replace(alt, live)
    st, body = srv.json("GET", "/health")
    rel = body.get("reload", {})
    names = [t.get("name") for t in rel.get("tensors", [])]
    expect(st == 200 and rel.get("changed") is True and "blk.0.ffn_up.weight" in names and
           rel.get("reloaded", 0) >= 1, f"hotswap /health reloads the changed tensor: {body}")
    st2, _ = srv.json("POST", "/completion", req)
    expect(st2 == 200, "completion after a reload")
    shutil.copyfile(model, alt)
    os.replace(alt, live)
    st, body = srv.json("GET", "/health")
    kinds = [t.get("kind") for t in body.get("reload", {}).get("tensors", [])]
    expect(st == 200 and "reattached" in kinds, f"restoring the file reattaches: {body}")
    _, again = srv.json("POST", "/completion", req)
    expect(again.get("content") == first.get("content"),
           "after the restore the text equals the first one")
    st, _, text = srv.request("GET", "/metrics")
    expect(b"sluice_reloads_total 2" in text, "metrics count the reloads")
    srv.stop()


def test_hotswap_refused(tmp, model):
    """--hotswap's /health on files it cannot apply (issue 29, case 7): an unreadable file is a
    skipped_file entry with null types (not a made-up old_type = new_type) and the reason; a
    file with other metadata is refused whole — status 200 with files_refused and the model's
    error, not a 500 — and the model keeps answering with its old weights."""
    live = os.path.join(tmp, "refuse.gguf")
    shutil.copyfile(model, live)
    srv = Server(tmp, live, "--hotswap", name="hotswap_refused")
    req = {"prompt": "hello", "n_predict": 8, "temperature": 0}
    _, first = srv.json("POST", "/completion", req)
    alt = os.path.join(tmp, "refuse_alt.gguf")
    with open(model, "rb") as f:
        head = f.read(4096)
    with open(alt, "wb") as f:
        f.write(head)  # a cut-short file: its tensor data is missing
    os.replace(alt, live)
    st, body = srv.json("GET", "/health")
    ents = body.get("reload", {}).get("tensors", []) if st == 200 else []
    skipped = [t for t in ents if t.get("kind") == "skipped_file"]
    expect(st == 200 and len(skipped) == 1 and skipped[0].get("name") == live and
           skipped[0].get("old_type") is None and skipped[0].get("new_type") is None and
           skipped[0].get("message"),
           f"/health on a cut-short file: a skipped_file entry with null types and the reason "
           f"({st} {body})")
    r = run("mkmodel", "--arch", "llama", "--ctx", "512", "-o", alt)
    expect(r.returncode == 0, f"mkmodel --ctx 512: {r.stderr}")
    os.replace(alt, live)
    st, body = srv.json("GET", "/health")
    rel = body.get("reload", {}) if st == 200 else {}
    refused = [t for t in rel.get("tensors", []) if t.get("kind") == "refused_file"]
    errors = rel.get("errors", [])
    expect(st == 200 and rel.get("files_refused") == 1 and rel.get("changed") is False and
           len(refused) == 1 and refused[0].get("old_type") is None and
           "context_length" in refused[0].get("message", "") and len(errors) == 1 and
           "reload refused" in errors[0].get("message", ""),
           f"/health on a file with other metadata: refused whole, reported with status 200 "
           f"({st} {body})")
    st2, again = srv.json("POST", "/completion", req)
    expect(st2 == 200 and again.get("content") == first.get("content"),
           "after the refusal the model answers with its old weights")
    shutil.copyfile(model, alt)
    os.replace(alt, live)
    st, body = srv.json("GET", "/health")
    rel = body.get("reload", {}) if st == 200 else {}
    expect(st == 200 and rel.get("files_refused") == 0 and rel.get("errors") == [],
           f"the original file back: nothing refused ({st} {body})")
    srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-test-", dir=os.environ.get("TEST_TMPDIR"))
    model = os.path.join(tmp, "llama.gguf")
    model_long = os.path.join(tmp, "long.gguf")
    mkmodel(model, "--arch", "llama")
    mkmodel(model_long, "--arch", "llama", "--ctx", "4096")
    test_cli(tmp, model)
    srv = Server(tmp, model, "-np", 3, "-a", "tiny", "--max-body-bytes", 65536)
    test_endpoints(srv, model)
    test_concurrency(srv, model)
    test_bad_input(srv)
    srv.stop()
    test_disconnect(tmp, model_long)
    test_templates(tmp, model)
    test_hotswap(tmp, model)
    test_hotswap_refused(tmp, model)
    print(f"{'FAILED' if FAILURES else 'passed'}: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
