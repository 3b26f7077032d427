"""Continuous batching in `sluice serve` (issue 30), over real HTTP against the real binary:
8 concurrent streams on -np 8 run in fewer forward passes than half their tokens
(llamacpp:n_decode_total), each stream's text equal to the same request run alone at
temperature 0; llamacpp:n_busy_slots_per_decode says how many slots a pass served. On the CPU
(dense and MoE) and on the sim device: the whole model on the device, experts on the host
(experts-cpu), a layer split (-ngl 1); qwen3next (recurrent layers) one step per pass.

usage: serve_batch_test.py SLUICE_BINARY
"""
import json
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, mkmodel, metrics; argv[1] is the binary)

expect = st.expect
N_PRED = 24
PROMPTS = ["Once upon a time", "In the beginning", "The old harbour", "Seven wizards",
           "A quiet morning in", "Numbers: 1 2 3", "She opened the door and",
           "Rain fell on the"]


def body(prompt, stream):
    # no prompt cache: every prompt is evaluated, so prompts batch beside each other too
    return {"prompt": prompt, "n_predict": N_PRED, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False, "stream": stream}


def solo(srv, prompt):
    status, b = srv.json("POST", "/completion", body(prompt, False))
    expect(status == 200, f"solo {prompt!r} -> 200 ({status} {str(b)[:200]})")
    return b.get("content"), b.get("tokens_predicted")


def stream(srv, prompt, out, i):
    try:
        status, _, ev = srv.sse("/completion", body(prompt, True))
        out[i] = (status, "".join(json.loads(e)["content"] for e in ev if e != "[DONE]"))
    except Exception as e:  # noqa: BLE001 - reported below
        out[i] = (None, repr(e))


def concurrent(srv, prompts):
    """Streams the prompts at once; each (status, text) and the /metrics before and after."""
    m0 = st.metrics(srv)[2]
    out = [None] * len(prompts)
    threads = [threading.Thread(target=stream, args=(srv, p, out, i))
               for i, p in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, m0, st.metrics(srv)[2]


def check(tmp, label, model, *flags):
    srv = st.Server(tmp, model, "-np", 8, "-c", 128, *flags, name=label.replace(" ", "_"))
    try:
        refs = [solo(srv, p) for p in PROMPTS]
        expect(all(n == N_PRED for _, n in refs), f"{label}: each solo run predicts {N_PRED}")
        out, m0, m1 = concurrent(srv, PROMPTS)
        same = [o is not None and o[0] == 200 and o[1] == r[0] for o, r in zip(out, refs)]
        expect(all(same), f"{label}: 8 concurrent streams each equal their solo run "
               f"({sum(same)}/8; first miss {next((o for o, s in zip(out, same) if not s), '')!r:.200})")
        passes = m1["llamacpp:n_decode_total"] - m0["llamacpp:n_decode_total"]
        tokens = m1["llamacpp:tokens_predicted_total"] - m0["llamacpp:tokens_predicted_total"]
        expect(tokens == 8 * N_PRED and passes < tokens / 2,
               f"{label}: {tokens:.0f} tokens in {passes:.0f} forward passes (< tokens / 2)")
        per = m1.get("llamacpp:n_busy_slots_per_decode", 0)
        expect(per > 1, f"{label}: llamacpp:n_busy_slots_per_decode {per:.2f} > 1")
        print(f"info {label}: {tokens:.0f} tokens, {passes:.0f} passes, "
              f"{per:.2f} slots per pass overall", flush=True)
    finally:
        srv.stop()


def check_recurrent(tmp, model):
    """qwen3next's recurrent layers keep one state per context: the engine refuses a pass of
    several, and the server then runs one step per pass, each stream still its solo text."""
    srv = st.Server(tmp, model, "-np", 8, "-c", 128, name="qwen3next")
    try:
        refs = [solo(srv, p) for p in PROMPTS[:4]]
        out, m0, m1 = concurrent(srv, PROMPTS[:4])
        same = [o is not None and o[0] == 200 and o[1] == r[0] for o, r in zip(out, refs)]
        passes = m1["llamacpp:n_decode_total"] - m0["llamacpp:n_decode_total"]
        expect(all(same), f"qwen3next: 4 concurrent streams each equal their solo run "
               f"({sum(same)}/4)")
        expect(passes >= 4 * N_PRED, f"qwen3next: one step per pass ({passes:.0f} passes)")
    finally:
        srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-batch-", dir=os.environ.get("TEST_TMPDIR"))
    dense = os.path.join(tmp, "llama.gguf")
    moe = os.path.join(tmp, "qwen3moe.gguf")
    # wide enough that a pass outlasts the spread of the 8 requests' arrival (a tiny model's
    # sub-millisecond passes let the first streams run ahead before the last join)
    st.mkmodel(dense, "--arch", "llama", "--dim", 256, "--ffn", 1024, "--layers", 4)
    st.mkmodel(moe, "--arch", "qwen3moe", "--dim", 256, "--ffn", 256, "--layers", 4)
    check(tmp, "cpu llama", dense)
    check(tmp, "cpu qwen3moe", moe)
    check(tmp, "cpu llama --embedding", dense, "--embedding")  # contexts keeping hidden states
    check(tmp, "sim gpu", moe, "--device", "sim", "--placement", "gpu")
    check(tmp, "sim experts-cpu", moe, "--device", "sim", "--placement", "experts-cpu")
    check(tmp, "sim layer split", dense, "--device", "sim", "--placement", "layers", "-ngl", 1)
    qnext = os.path.join(tmp, "qwen3next.gguf")
    st.mkmodel(qnext, "--arch", "qwen3next")
    check_recurrent(tmp, qnext)
    if st.FAILURES:
        print(f"{len(st.FAILURES)} failed", flush=True)
        sys.exit(1)
    print("all passed", flush=True)


if __name__ == "__main__":
    main()
