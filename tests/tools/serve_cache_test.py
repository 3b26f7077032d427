"""The prompt cache of `sluice serve` (issue 30; llama-server's cache_prompt, on by default),
over real HTTP against the real binary: a slot keeps its KV cache after a job and the next
prompt reuses its longest common prefix. Checks: a repeated long prompt evaluates one token
(timings.prompt_n 1, cache_n n_prompt - 1), an extended one only its new suffix; the text at
temperature 0 equals the uncached run's (cache_prompt false, and a fresh slot); tokens_cached
is the KV cache's length (prompt + decoded tokens); a job goes to the slot holding its prefix
(-np 2); OpenAI usage reports cached_tokens; /metrics counts evaluated prompt tokens only.

usage: serve_cache_test.py SLUICE_BINARY
"""
import os
import select
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, mkmodel; argv[1] is the binary)

expect = st.expect
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 10)
OTHER = " ".join(["a stitch in time saves nine, said the old tailor"] * 6)
N = 12


def complete(srv, prompt, **extra):
    status, body = srv.json("POST", "/completion", dict(prompt=prompt, n_predict=N,
                                                       temperature=0, **extra))
    expect(status == 200, f"completion {extra} -> 200 ({status} {str(body)[:200]})")
    t = body.get("timings", {})
    return body, t.get("prompt_n"), t.get("cache_n")


def prompt_evaluated(srv):
    return st.metrics(srv)[2].get("llamacpp:prompt_tokens_total", -1)


def test_pinned_queue(tmp, model):
    """A job pinned to a busy slot (id_slot) waits for that slot without holding back the jobs
    behind it: with -np 2 and slot 1 on a long job, a second job pinned to slot 1 queues, and an
    unpinned one after it runs on idle slot 0 and answers while both are still pending (the
    queue's head alone was looked at: it waited for the long job). The long job's client then
    leaves (its job is cancelled) and the pinned one runs on slot 1."""
    srv = st.Server(tmp, model, "-np", 2, "-c", 8192, name="srv4")
    long_job = st.post_raw(srv.port, "/completion", {
        "prompt": "a", "n_predict": 8000, "ignore_eos": True, "id_slot": 1, "temperature": 0})
    busy = False
    deadline = time.time() + 60
    while not busy and time.time() < deadline:
        status, b = srv.json("GET", "/slots")
        busy = status == 200 and any(x.get("id") == 1 and x.get("is_processing") for x in b)
        time.sleep(0.01)
    done = {}

    def run():
        done["pinned"] = srv.json("POST", "/completion", {"prompt": "b", "n_predict": 2,
                                                          "id_slot": 1})

    pinned = threading.Thread(target=run)
    pinned.start()
    time.sleep(0.2)  # the pinned job queued first
    status, b = srv.json("POST", "/completion", {"prompt": "c", "n_predict": 2})
    # the long job has not answered (no byte on its socket) and the pinned one waits
    still = pinned.is_alive() and not select.select([long_job], [], [], 0)[0]
    expect(busy and status == 200 and b.get("id_slot") == 0 and still,
           f"a job behind one pinned to busy slot 1 ran on slot 0 (busy {busy}, {status}, "
           f"slot {b.get('id_slot')}, the long and the pinned one still pending: {still})")
    long_job.close()  # the long job's client leaves: cancelled, slot 1 frees
    pinned.join(300)
    s, b = done.get("pinned", (0, {}))
    expect(s == 200 and b.get("id_slot") == 1, f"then the pinned job ran on slot 1 ({s})")
    srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-cache-", dir=os.environ.get("TEST_TMPDIR"))
    model = os.path.join(tmp, "llama.gguf")
    st.mkmodel(model, "--arch", "llama")
    srv = st.Server(tmp, model, "-np", 2, "-c", 512)

    # uncached reference: a fresh slot, and cache_prompt false on the same server
    first, pn, cn = complete(srv, LONG)
    n_prompt = first.get("tokens_evaluated", 0)
    expect(n_prompt > 64 and pn == n_prompt and cn == 0,
           f"first run: prompt_n {pn} == n_prompt {n_prompt}, cache_n {cn} == 0")
    expect(first.get("tokens_cached") == n_prompt + first.get("tokens_predicted", 0) - 1,
           f"tokens_cached {first.get('tokens_cached')}: the KV's prompt + decoded tokens")
    slot = first.get("id_slot")

    before = prompt_evaluated(srv)
    again, pn, cn = complete(srv, LONG)
    expect(pn == 1 and cn == n_prompt - 1,
           f"repeated prompt: prompt_n {pn} == 1 (the last token, for its logits), cache_n {cn}")
    expect(again.get("content") == first.get("content"),
           "repeated prompt from the cache: the same text at temperature 0")
    expect(again.get("id_slot") == slot, f"the slot holding the prefix ran it ({slot})")
    expect(prompt_evaluated(srv) - before == 1,
           "llamacpp:prompt_tokens_total counts the evaluated prompt tokens only")

    longer = LONG + " and then it ran far away into the forest"
    ext, pn, cn = complete(srv, longer)
    suffix = ext.get("tokens_evaluated", 0) - n_prompt
    expect(0 < suffix and pn is not None and pn <= suffix and cn >= n_prompt - 1,
           f"extended prompt: prompt_n {pn} <= its new suffix {suffix}, cache_n {cn}")
    ref, pn, cn = complete(srv, longer, cache_prompt=False)
    expect(pn == ref.get("tokens_evaluated") and cn == 0,
           f"cache_prompt false: the whole prompt evaluated ({pn}, cache_n {cn})")
    expect(ext.get("content") == ref.get("content"),
           "extended prompt from the cache: the text of the uncached run")

    # -np 2: another prompt goes to the other (least recently used) slot; the first prompt
    # then returns to the slot that holds it
    o1, pn, _ = complete(srv, OTHER)
    expect(pn >= o1.get("tokens_evaluated", 0) - 1,
           f"another prompt: evaluated whole but a shared BOS ({pn})")
    back, pn, _ = complete(srv, LONG)
    expect(back.get("id_slot") != o1.get("id_slot") and pn == 1 and
           back.get("content") == first.get("content"),
           f"the first prompt back on its slot {back.get('id_slot')} (other prompt on "
           f"{o1.get('id_slot')}): prompt_n {pn}")
    o2, pn, _ = complete(srv, OTHER)
    expect(o2.get("id_slot") == o1.get("id_slot") and pn == 1 and
           o2.get("content") == o1.get("content"),
           f"the other prompt back on its slot: prompt_n {pn}")

    # the OpenAI endpoints: usage says how many prompt tokens came from the cache
    msg = {"messages": [{"role": "user", "content": LONG}], "max_tokens": 4, "temperature": 0}
    s1, c1 = srv.json("POST", "/v1/chat/completions", msg)
    s2, c2 = srv.json("POST", "/v1/chat/completions", msg)
    u1, u2 = c1.get("usage", {}), c2.get("usage", {})
    cached = u2.get("prompt_tokens_details", {}).get("cached_tokens", -1)
    expect(s1 == 200 and s2 == 200 and cached == u2.get("prompt_tokens", 0) - 1 and
           u1.get("prompt_tokens") == u2.get("prompt_tokens"),
           f"chat repeated: usage.prompt_tokens_details.cached_tokens {cached} of "
           f"{u2.get('prompt_tokens')}")
    expect(c1.get("choices", [{}])[0].get("message") == c2.get("choices", [{}])[0].get("message"),
           "chat repeated: the same message")
    status, body = srv.json("POST", "/completion", {"prompt": LONG, "cache_prompt": "yes"})
    expect(st.is_error(status, body, 400) and "cache_prompt" in body["error"]["message"],
           "cache_prompt must be a boolean (400 naming it)")
    srv.stop()

    # with the cache off on every request, a fresh server gives the same text
    srv = st.Server(tmp, model, "-np", 1, "-c", 512, name="srv2")
    cold, pn, _ = complete(srv, longer, cache_prompt=False)
    expect(cold.get("content") == ext.get("content") and pn == ref.get("tokens_evaluated"),
           "a fresh server's uncached run: the same text as the cached one")
    srv.stop()

    # qwen3next (issue 34): its Gated DeltaNet state cannot drop tokens; it rewinds exactly to
    # its checkpoint, the prompt's last token (sl_ctx_rewind), so a repeated prompt evaluates
    # one token with the same text; a prompt sharing another part of the slot's history is
    # evaluated from 0 (cache_n 0), with the text of the uncached run
    qn = os.path.join(tmp, "qwen3next.gguf")
    st.mkmodel(qn, "--arch", "qwen3next")
    srv = st.Server(tmp, qn, "-np", 1, "-c", 512, name="srv3")
    q1, pn, cn = complete(srv, LONG)
    qn_prompt = q1.get("tokens_evaluated", 0)
    expect(pn == qn_prompt and cn == 0, f"qwen3next first run: prompt_n {pn}, cache_n {cn}")
    q2, pn, cn = complete(srv, LONG)
    expect(pn == 1 and cn == qn_prompt - 1 and q2.get("content") == q1.get("content"),
           f"qwen3next repeated prompt from the checkpoint: prompt_n {pn} == 1, cache_n {cn} "
           f"== {qn_prompt - 1}, the same text")
    q3, pn, cn = complete(srv, OTHER)
    q4, _, _ = complete(srv, OTHER, cache_prompt=False)
    expect(pn == q3.get("tokens_evaluated") and cn == 0 and q3.get("content") == q4.get("content"),
           f"qwen3next another prompt: from 0 (prompt_n {pn}, cache_n {cn}), the uncached text")
    q5, pn, cn = complete(srv, longer)
    q6, _, _ = complete(srv, longer, cache_prompt=False)
    expect(cn == 0 and q5.get("content") == q6.get("content"),
           f"qwen3next extended prompt after another: cache_n {cn} == 0, the uncached text")
    srv.stop()
    test_pinned_queue(tmp, model)
    print(f"{'FAILED' if st.FAILURES else 'passed'}: {len(st.FAILURES)} failure(s)")
    return 1 if st.FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
