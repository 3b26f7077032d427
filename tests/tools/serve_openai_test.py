"""Issue 30's parameters through the real `openai` client (the "Done when" asks for it), against
the real `sluice serve` over HTTP: each parameter changes the output as llama-server's does
(logit_bias -100 removes the token and +100 forces it; logprobs / top_logprobs equal the
log-softmax of `sluice eval`'s logits; the penalties change a repetitive text; a seed repeats and
two seeds differ; echo puts the prompt first; stop cuts; max_tokens counts); streaming equals
non-streaming (stream_options include_usage: OpenAI's last chunk of usage alone); another
model name is accepted with one model served; system_fingerprint in
responses and chunks; and what is not served is the client's BadRequestError naming the field:
unknown fields, tools / tool_choice, n > 1, mirostat. Several prompts stream (llama-server's
chunks with "index"). client.embeddings (base64 on the wire) equals /v1/embeddings' floats.

usage: serve_openai_test.py SLUICE_BINARY
"""
import os
import sys
import tempfile

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, mkmodel; argv[1] is the binary)
import serve_api_test as sa  # noqa: E402  (eval_logits, log_softmax)

expect = st.expect
PROMPT = "The quick brown fox"
MSGS = [{"role": "user", "content": "Tell me about foxes"}]


def ids(srv, text, add_special=False):
    return sa.post(srv, "/tokenize", {"content": text, "add_special": add_special})[1]["tokens"]


def chat(client, **kw):
    return client.chat.completions.create(model="gpt-4o-mini", messages=MSGS, **kw)


def chat_tokens(c):
    """The generated token ids of a chat completion made with logprobs (its bytes' owners)."""
    return [e.model_extra.get("id") for e in c.choices[0].logprobs.content]


def refused(fn, field, what):
    try:
        fn()
    except openai.BadRequestError as e:
        msg = str(e)
        expect(e.status_code == 400 and f"'{field}'" in msg, f"{what}: 400 naming '{field}' "
               f"({msg[:160]})")
        return
    expect(False, f"{what}: refused with 400 (it was accepted)")


def test_logit_bias(srv, client):
    base = client.completions.create(model="x", prompt=PROMPT, max_tokens=8, temperature=0,
                                     extra_body={"return_tokens": True})
    toks = base.model_extra.get("tokens") or base.choices[0].model_extra.get("tokens")
    plain = sa.tokens(srv, PROMPT, 8)[0]
    first = plain[0]
    r = client.completions.create(model="x", prompt=PROMPT, max_tokens=8, temperature=0,
                                  logit_bias={str(first): -100})
    again = sa.tokens(srv, PROMPT, 8, logit_bias={str(first): -100})[0]
    expect(r.choices[0].text != base.choices[0].text and first not in again,
           f"openai completions logit_bias {{{first}: -100}} removes the first token "
           f"({r.choices[0].text!r} vs {base.choices[0].text!r})")
    expect(toks is None or toks == plain, "return_tokens through extra_body")
    c0 = chat(client, max_tokens=6, temperature=0, logprobs=True, top_logprobs=1)
    t0 = chat_tokens(c0)
    c1 = chat(client, max_tokens=6, temperature=0, logprobs=True, top_logprobs=1,
              logit_bias={str(t0[0]): -100})
    t1 = chat_tokens(c1)
    expect(len(t1) == 6 and t0[0] not in t1 and c1.choices[0].message.content !=
           c0.choices[0].message.content,
           f"openai chat logit_bias {{{t0[0]}: -100}} removes the token ({t1} vs {t0})")
    forced = ids(srv, "zq")[0]
    c2 = chat(client, max_tokens=4, temperature=0, logprobs=True, top_logprobs=1,
              logit_bias={str(forced): 100})
    expect(chat_tokens(c2) == [forced] * 4,
           f"openai chat logit_bias +100 forces token {forced} ({chat_tokens(c2)})")


def test_logprobs(tmp, srv, client, model):
    c = chat(client, max_tokens=3, temperature=0, logprobs=True, top_logprobs=4)
    content = c.choices[0].logprobs.content
    if not expect(len(content) == 3, f"chat logprobs: one entry per token ({len(content)})"):
        return
    text = sa.post(srv, "/apply-template", {"messages": MSGS})[1]["prompt"]
    prompt = ids(srv, text, add_special=True)
    gen = sa.tokens(srv, text, 3)[0]  # the same text at temperature 0, as token ids
    rows = sa.eval_logits(tmp, model, prompt + gen[:2])
    worst = 0.0
    for k, e in enumerate(content):
        ls = sa.log_softmax(rows[len(prompt) - 1 + k])
        worst = max(worst, abs(e.logprob - ls[gen[k]]))
        top = sorted(range(st.VOCAB), key=lambda i: (-ls[i], i))[:4]
        expect(len(e.top_logprobs) == 4 and all(t.logprob <= 0 for t in e.top_logprobs),
               f"token {k}: 4 top_logprobs")
        worst = max([worst] + [abs(t.logprob - ls[top[i]]) for i, t in enumerate(e.top_logprobs)])
    expect(worst < 1e-4, f"openai chat logprobs equal log-softmax of eval's logits (max err "
           f"{worst:g})")
    r = client.completions.create(model="x", prompt=PROMPT, max_tokens=2, temperature=0,
                                  logprobs=3)
    lp = r.choices[0].logprobs
    extra = (lp.model_extra or {}) if lp else {}
    expect(lp is not None and len(extra.get("content", [])) == 2,
           f"openai completions logprobs=3: an entry per token ({str(lp)[:200]})")


def test_sampling(srv, client):
    base = chat(client, max_tokens=24, temperature=0).choices[0].message.content
    again = chat(client, max_tokens=24, temperature=0).choices[0].message.content
    expect(base == again, "temperature 0 repeats")
    for kw in ({"presence_penalty": 2}, {"frequency_penalty": 2},
               {"extra_body": {"repeat_penalty": 1.5}}):
        got = chat(client, max_tokens=24, temperature=0, **kw).choices[0].message.content
        expect(got != base, f"{kw} changes the text at temperature 0 ({got!r} vs {base!r})")
    a = chat(client, max_tokens=16, temperature=1, seed=5).choices[0].message.content
    b = chat(client, max_tokens=16, temperature=1, seed=5).choices[0].message.content
    others = {chat(client, max_tokens=16, temperature=1, seed=s).choices[0].message.content
              for s in (6, 7, 8)}
    expect(a == b and others - {a}, f"seed: the same seed repeats, others differ ({a!r})")
    r = client.completions.create(model="x", prompt=PROMPT, max_tokens=4, temperature=0,
                                  echo=True)
    plain = client.completions.create(model="x", prompt=PROMPT, max_tokens=4, temperature=0)
    expect(r.choices[0].text == PROMPT + plain.choices[0].text, "echo puts the prompt first")
    long = client.completions.create(model="x", prompt=PROMPT, max_tokens=24, temperature=0)
    text = long.choices[0].text
    stop = text[len(text) // 2:len(text) // 2 + 2]
    cut = client.completions.create(model="x", prompt=PROMPT, max_tokens=24, temperature=0,
                                    stop=[stop])
    expect(stop and cut.choices[0].text == text[:text.index(stop)] and
           cut.choices[0].finish_reason == "stop", f"stop {stop!r} cuts the text")
    expect(long.usage.completion_tokens == 24 and long.choices[0].finish_reason == "length",
           "max_tokens: 24 tokens, finish_reason length")


def test_stream_and_shapes(client):
    one = chat(client, max_tokens=12, temperature=0)
    chunks = list(chat(client, max_tokens=12, temperature=0, stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    expect(text == one.choices[0].message.content, "openai chat stream == non-stream")
    expect(one.system_fingerprint and all(ch.system_fingerprint for ch in chunks),
           "system_fingerprint in the response and every chunk")
    expect(one.model and one.usage.total_tokens > 0, f"model {one.model!r} and usage")
    with_usage = list(chat(client, max_tokens=12, temperature=0, stream=True,
                           stream_options={"include_usage": True}))
    last = with_usage[-1]
    expect(last.choices == [] and last.usage and last.usage.completion_tokens == 12 and
           last.usage.prompt_tokens == one.usage.prompt_tokens and
           "".join(ch.choices[0].delta.content or "" for ch in with_usage[:-1]) ==
           one.choices[0].message.content,
           f"stream_options include_usage: a last chunk of no choices with the usage ({last})")
    r = client.completions.create(model="x", prompt=PROMPT, max_tokens=8, temperature=0)
    s = "".join(ch.choices[0].text for ch in client.completions.create(
        model="x", prompt=PROMPT, max_tokens=8, temperature=0, stream=True) if ch.choices)
    expect(s == r.choices[0].text, "openai completions stream == non-stream")
    r = client.completions.create(model="x", prompt=["one", "two"], max_tokens=2, temperature=0)
    expect(sorted(c.index for c in r.choices) == [0, 1], "several prompts: a choice each")
    got = ["", ""]
    for ch in client.completions.create(model="x", prompt=["one", "two"], max_tokens=2,
                                        temperature=0, stream=True):
        for c in ch.choices:
            got[c.index] += c.text
    expect(got == [c.text for c in sorted(r.choices, key=lambda c: c.index)],
           f"several prompts streamed: each choice's chunks add up to its text ({got})")


def test_refused(client):
    refused(lambda: chat(client, max_tokens=1, extra_body={"no_such_field": 1}),
            "no_such_field", "an unknown field")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    refused(lambda: chat(client, max_tokens=1, tools=tools), "tools", "tools")
    refused(lambda: chat(client, max_tokens=1, tool_choice="required"), "tool_choice",
            "tool_choice required")
    refused(lambda: chat(client, max_tokens=1, n=2), "n", "n 2")
    refused(lambda: chat(client, max_tokens=1, extra_body={"mirostat": 2}), "mirostat",
            "mirostat 2")


def test_embeddings(tmp, model):
    srv = st.Server(tmp, model, "--embedding", "--pooling", "mean", name="embd")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none",
                           max_retries=0, timeout=120)
    r = client.embeddings.create(model="text-embedding-3-small", input=[PROMPT, "hello"])
    s, ref = srv.json("POST", "/v1/embeddings", {"input": [PROMPT, "hello"],
                                                 "encoding_format": "float"})
    want = [d["embedding"] for d in ref.get("data", [])]
    got = [d.embedding for d in r.data]
    expect(s == 200 and len(got) == 2 and all(
        len(g) == len(w) and max(abs(a - b) for a, b in zip(g, w)) < 1e-6
        for g, w in zip(got, want)) and got[0] != got[1] and r.usage.prompt_tokens > 0,
        "openai embeddings (the client's base64 by default) == /v1/embeddings' floats")
    srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-openai-", dir=os.environ.get("TEST_TMPDIR"))
    model = os.path.join(tmp, "llama.gguf")
    st.mkmodel(model, "--arch", "llama")
    srv = st.Server(tmp, model, "-np", 2, "-c", 256, "-ctk", "f32")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none",
                           max_retries=0, timeout=120)
    test_logit_bias(srv, client)
    test_logprobs(tmp, srv, client, model)
    test_sampling(srv, client)
    test_stream_and_shapes(client)
    test_refused(client)
    srv.stop()
    test_embeddings(tmp, model)
    print(f"{'FAILED' if st.FAILURES else 'passed'}: {len(st.FAILURES)} failure(s)")
    return 1 if st.FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
