"""`sluice serve`'s remaining llama-server endpoints and fields (issue 30), over real HTTP
against the real binary on mkmodel models:

- /embedding and /v1/embeddings (--embedding, --pooling or the file's <arch>.pooling_type):
  pooling none gives the per-token hidden states; mean, cls and last pool them as those rows
  say (mean of the rows, the first, the last), normalised to Euclidean norm 1 by default,
  embd_normalize -1 leaves them raw; a list of inputs gives one vector each, token input the
  same as its text, base64 the same floats; usage counts the tokens; /v1/embeddings refuses
  pooling none (400), both are 501 without --embedding; bad input a 400 naming the field.
- /infill: the fill-in-the-middle prompt from the file's FIM tokens ([BOS] PRE prefix prompt
  SUF suffix MID; with input_extra the repo-level context REP "myproject\\n" SEP "a.py\\n" text
  SEP "filename\\n" first): its token count and text equal /completion of that token list at
  temperature 0; the deprecated prefix/suffix/middle keys work too, and with no key the tokens
  are found by their text (<|fim_prefix|> ...); a model without them 501.
- prompt as a list: one result per prompt (/completion an array with "index", /v1/completions
  choices with "index" and summed usage), each equal to its own request at temperature 0.
- id_slot runs on that slot (400 outside the slots).
- /slots/{id}?action=save|erase|restore (--slot-save-path): save, erase (the repeat evaluates
  the whole prompt), restore (the repeat evaluates one token, the same text); bad file names,
  actions, slot ids, garbage files, a file of another model, of another KV type, longer than
  n_ctx: 400 naming why; 501 without --slot-save-path.

usage: serve_endp_test.py SLUICE_BINARY
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, mkmodel; argv[1] is the binary)

expect = st.expect
TEXT = "the quick brown fox jumps"
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 4)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def close(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(x)) for x, y in zip(a, b))


def tokens(srv, text, add_special=True):
    s, b = srv.json("POST", "/tokenize", {"content": text, "add_special": add_special})
    return b.get("tokens", []) if s == 200 else []


def with_metadata(src, dst, *args):
    r = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--force",
                        *map(str, args), src, dst], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"gguf_new_metadata failed: {r.stderr}")


def with_pooling_key(src, dst, arch, value):
    """A copy of src with <arch>.pooling_type = value (u32)."""
    import gguf
    from gguf.scripts import gguf_new_metadata as nm
    reader = gguf.GGUFReader(src, "r")
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    new = {f"{arch}.pooling_type": nm.MetadataDetails(gguf.GGUFValueType.UINT32, value)}
    nm.copy_with_new_metadata(reader, writer, new, [])


def with_token_texts(src, dst, texts):
    """A copy of src whose last len(texts) vocabulary entries read texts (no FIM keys)."""
    import gguf
    from gguf.scripts import gguf_new_metadata as nm
    reader = gguf.GGUFReader(src, "r")
    toks = list(reader.fields["tokenizer.ggml.tokens"].contents())
    toks[-len(texts):] = texts
    writer = gguf.GGUFWriter(dst, arch="llama", endianess=reader.endianess)
    new = {"tokenizer.ggml.tokens": nm.MetadataDetails(gguf.GGUFValueType.ARRAY, toks,
                                                       sub_type=gguf.GGUFValueType.STRING)}
    nm.copy_with_new_metadata(reader, writer, new, [])
    return len(toks)


def test_embeddings(tmp, model):
    none = st.Server(tmp, model, "--embedding", "--pooling", "none", name="embd-none")
    s, b = none.json("POST", "/embedding", {"content": TEXT})
    toks = tokens(none, TEXT)
    rows = b[0]["embedding"] if s == 200 and isinstance(b, list) else []
    expect(s == 200 and b[0].get("index") == 0 and len(rows) == len(toks) > 2 and
           all(len(r) == 64 for r in rows),
           f"/embedding pooling none: one row of n_embd per token ({len(rows)} of {len(toks)})")
    s, b = none.json("POST", "/v1/embeddings", {"input": TEXT})
    expect(st.is_error(s, b, 400) and "not OAI compatible" in b["error"]["message"],
           "/v1/embeddings refuses pooling none (400)")
    none.stop()
    # a 532 KB body of token arrays asking for 65 x 4096 unpooled rows (2^24 + numbers) is a
    # 413 before any evaluation (all of it was held, then written as ~200 MB of text)
    big = st.Server(tmp, model, "--embedding", "--pooling", "none", "-c", 4096, name="embd-big")
    s, b = big.json("POST", "/embedding", {"content": [[5] * 4096] * 65})
    expect(st.is_error(s, b, 413) and "more than 16777216" in b["error"]["message"],
           f"/embedding asking for 17 M numbers -> 413 ({s} {str(b)[:160]})")
    s, b = big.json("POST", "/embedding", {"content": [[5] * 64] * 4})
    expect(s == 200 and len(b) == 4, f"and a small request still runs ({s})")
    big.stop()
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(64)] if rows else []

    srv = st.Server(tmp, model, "--embedding", "--pooling", "mean", "-np", 2, name="embd-mean")
    s, b = srv.json("POST", "/v1/embeddings", {"input": TEXT, "model": "any-name"})
    v = b["data"][0]["embedding"] if s == 200 else []
    expect(s == 200 and b.get("object") == "list" and b["data"][0].get("object") == "embedding"
           and b["data"][0].get("index") == 0 and b.get("model") == "any-name" and
           b.get("usage") == {"prompt_tokens": len(toks), "total_tokens": len(toks)},
           f"/v1/embeddings: OpenAI's shape, usage {b.get('usage') if s == 200 else b}")
    expect(abs(norm(v) - 1) < 1e-5, f"mean pooled: Euclidean norm 1 ({norm(v) if v else 0})")
    expect(mean and close(v, [x / norm(mean) for x in mean]),
           "mean pooled == the normalised mean of pooling none's rows")
    s, b = srv.json("POST", "/embedding", {"content": TEXT, "embd_normalize": -1})
    expect(s == 200 and mean and close(b[0]["embedding"][0], mean),
           "embd_normalize -1: the raw mean of the rows")
    s, b = srv.json("POST", "/embedding", {"content": TEXT, "embd_normalize": 1})
    expect(s == 200 and abs(sum(abs(x) for x in b[0]["embedding"][0]) - 1) < 1e-5,
           "embd_normalize 1: taxicab norm 1")
    s, b = srv.json("POST", "/v1/embeddings", {"input": [TEXT, "hello there", toks]})
    d = b.get("data", []) if s == 200 else []
    n2 = len(tokens(srv, "hello there"))
    expect(len(d) == 3 and [e["index"] for e in d] == [0, 1, 2] and close(d[0]["embedding"], v)
           and close(d[2]["embedding"], v) and not close(d[1]["embedding"], v) and
           b["usage"]["prompt_tokens"] == 2 * len(toks) + n2,
           "a list of inputs: one vector each, token ids == their text, usage summed")
    s, b = srv.json("POST", "/v1/embeddings", {"input": TEXT, "encoding_format": "base64"})
    raw = base64.b64decode(b["data"][0]["embedding"]) if s == 200 else b""
    expect(len(raw) == 256 and close(list(struct.unpack("<64f", raw)), v, 1e-6),
           "encoding_format base64: the same float32 values")
    for body, field in (({}, "input"), ({"input": TEXT, "encoding_format": "x"}, "encoding_format"),
                        ({"input": TEXT, "embd_normalize": "a"}, "embd_normalize"),
                        ({"input": TEXT, "dimensions": 8}, "dimensions"),
                        ({"input": []}, "input"), ({"input": [1, 99999]}, "input"),
                        ({"input": 5}, "input")):
        s, b = srv.json("POST", "/v1/embeddings", body)
        expect(st.is_error(s, b, 400) and field in b["error"]["message"],
               f"/v1/embeddings {json.dumps(body)[:60]}: 400 naming {field}")
    # a completion on an embedding server still works, and reuses the embedded prompt's KV
    s, b = srv.json("POST", "/completion", {"prompt": TEXT, "n_predict": 2, "temperature": 0})
    expect(s == 200 and b["timings"]["prompt_n"] == 1,
           f"a completion after the embedding of its prompt: prompt_n {b.get('timings')}")
    srv.stop()

    for pooling, pick in (("cls", 0), ("last", -1)):
        srv = st.Server(tmp, model, "--embedding", "--pooling", pooling, name="embd-" + pooling)
        s, b = srv.json("POST", "/v1/embeddings", {"input": TEXT})
        r = rows[pick] if rows else []
        expect(s == 200 and close(b["data"][0]["embedding"], [x / norm(r) for x in r]),
               f"pooling {pooling}: the normalised {'first' if pick == 0 else 'last'} row")
        srv.stop()

    keyed = os.path.join(tmp, "pool-mean.gguf")
    with_pooling_key(model, keyed, "llama", 1)
    srv = st.Server(tmp, keyed, "--embedding", name="embd-key")
    s, b = srv.json("POST", "/v1/embeddings", {"input": TEXT})
    expect(s == 200 and close(b["data"][0]["embedding"], v),
           "llama.pooling_type 1 in the file: mean pooling without --pooling")
    srv.stop()

    plain = st.Server(tmp, model, name="no-embd")
    for path in ("/embedding", "/v1/embeddings"):
        s, b = plain.json("POST", path, {"input": TEXT})
        expect(st.is_error(s, b, 501, "not_supported_error") and
               "--embeddings" in b["error"]["message"], f"{path} without --embedding: 501")
    return plain


def test_infill(tmp, model, plain):
    s, b = plain.json("POST", "/infill", {"input_prefix": "a", "input_suffix": "b"})
    expect(st.is_error(s, b, 501) and "prefix token is missing" in b["error"]["message"],
           "/infill on a model without FIM tokens: 501 naming them")
    fim = os.path.join(tmp, "fim.gguf")
    with_metadata(model, fim, "--special-token-by-id", "fim_pre", 10, "--special-token-by-id",
                  "fim_suf", 11, "--special-token-by-id", "fim_mid", 12,
                  "--special-token-by-id", "fim_rep", 13, "--special-token-by-id", "fim_sep", 14)
    srv = st.Server(tmp, fim, "-c", 256, "-b", 64, name="fim")
    bos = tokens(srv, "")
    pre, suf, mid = tokens(srv, "def add(a, b):", False), tokens(srv, "    return c", False), \
        tokens(srv, " c =", False)
    req = {"input_prefix": "def add(a, b):", "input_suffix": "    return c", "prompt": " c =",
           "n_predict": 6, "temperature": 0}
    s, b = srv.json("POST", "/infill", req)
    suf = suf[:max(0, 64 // 4 - (2 + len(mid)))]  # -b 64: the suffix keeps n_batch/4 - 2 - prompt
    base = [13] + tokens(srv, "myproject\n", False) + [14] + tokens(srv, "filename\n", False)
    want = base + bos + [10] + pre + mid + [11] + suf + [12]
    s2, ref = srv.json("POST", "/completion", {"prompt": want, "n_predict": 6, "temperature": 0})
    expect(s == 200 and s2 == 200 and b["tokens_evaluated"] == len(want) and
           b["content"] == ref["content"] and b.get("stop_type") in ("limit", "eos"),
           f"/infill: REP myproject SEP filename [BOS] PRE prefix prompt SUF suffix MID "
           f"({b.get('tokens_evaluated')} tokens, want {len(want)})")
    req["input_extra"] = [{"filename": "a.py", "text": "x = 1\n"}, {"text": "y = 2\n"}]
    s, b = srv.json("POST", "/infill", req)
    extra = [13] + tokens(srv, "myproject\n", False) + [14] + tokens(srv, "a.py\n", False) + \
        tokens(srv, "x = 1\n", False) + [14] + tokens(srv, "tmp\n", False) + \
        tokens(srv, "y = 2\n", False) + [14] + tokens(srv, "filename\n", False)
    want2 = extra + bos + [10] + pre + mid + [11] + suf + [12]
    s2, ref = srv.json("POST", "/completion", {"prompt": want2, "n_predict": 6, "temperature": 0})
    expect(s == 200 and b["tokens_evaluated"] == len(want2) and b["content"] == ref["content"],
           f"/infill with input_extra: the repo-level context first ({b.get('tokens_evaluated')}"
           f" tokens, want {len(want2)})")
    for body, field in (({"input_suffix": "x"}, "input_prefix"),
                        ({"input_prefix": "x"}, "input_suffix"),
                        ({"input_prefix": "x", "input_suffix": "y", "prompt": 3}, "prompt"),
                        ({"input_prefix": "x", "input_suffix": "y", "input_extra": 1},
                         "input_extra"),
                        ({"input_prefix": "x", "input_suffix": "y", "input_extra": [{}]},
                         "text"),
                        ({"input_prefix": "x", "input_suffix": "y", "bogus": 1}, "bogus")):
        s, b = srv.json("POST", "/infill", body)
        expect(st.is_error(s, b, 400) and field in b["error"]["message"],
               f"/infill {json.dumps(body)[:60]}: 400 naming {field}")
    srv.stop()
    # no FIM keys: llama.cpp's fallback finds the tokens by their text
    texts = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>",
             "<|fim_repo|>", "<|file_sep|>"]
    byname = os.path.join(tmp, "fim-text.gguf")
    n = with_token_texts(model, byname, texts)
    pre_, suf_, mid_, rep_, sep_ = n - 6, n - 5, n - 4, n - 2, n - 1
    srv = st.Server(tmp, byname, "-c", 256, "-b", 64, name="fim-text")
    req = {"input_prefix": "a b", "input_suffix": "c d", "n_predict": 3, "temperature": 0}
    s, b = srv.json("POST", "/infill", req)
    want = [rep_] + tokens(srv, "myproject\n", False) + [sep_] + \
        tokens(srv, "filename\n", False) + tokens(srv, "") + [pre_] + tokens(srv, "a b", False) + \
        [suf_] + tokens(srv, "c d", False) + [mid_]
    s2, ref = srv.json("POST", "/completion", {"prompt": want, "n_predict": 3, "temperature": 0})
    expect(s == 200 and b["tokens_evaluated"] == len(want) and b["content"] == ref["content"],
           f"FIM tokens found by their text (<|fim_prefix|> ...): {b.get('tokens_evaluated')} "
           f"tokens, want {len(want)}")
    srv.stop()
    old = os.path.join(tmp, "fim-old.gguf")
    with_metadata(model, old, "--special-token-by-id", "prefix", 20, "--special-token-by-id",
                  "suffix", 21, "--special-token-by-id", "middle", 22)
    srv = st.Server(tmp, old, name="fim-old")
    s, b = srv.json("POST", "/infill", {"input_prefix": "a", "input_suffix": "b", "n_predict": 2,
                                        "temperature": 0})
    want = bos + [20] + tokens(srv, "a", False) + [21] + tokens(srv, "b", False) + [22]
    expect(s == 200 and b["tokens_evaluated"] == len(want),
           f"the deprecated prefix/suffix/middle keys: {b.get('tokens_evaluated')} tokens")
    srv.stop()


def test_multi_and_slots(plain):
    srv = plain
    prompts = ["once upon a time", "the cat sat on the mat"]
    one = []
    for p in prompts:
        s, b = srv.json("POST", "/completion", {"prompt": p, "n_predict": 6, "temperature": 0})
        one.append(b.get("content") if s == 200 else None)
    s, b = srv.json("POST", "/completion", {"prompt": prompts, "n_predict": 6, "temperature": 0})
    expect(s == 200 and isinstance(b, list) and [r.get("index") for r in b] == [0, 1] and
           [r.get("content") for r in b] == one,
           "/completion with a list of prompts: an array, one result each == its own request")
    toks = [tokens(srv, p) for p in prompts]
    s, b = srv.json("POST", "/completion", {"prompt": toks, "n_predict": 6, "temperature": 0})
    expect(s == 200 and isinstance(b, list) and [r.get("content") for r in b] == one,
           "a list of token lists: the same results")
    s, b = srv.json("POST", "/v1/completions", {"prompt": prompts, "max_tokens": 6,
                                                "temperature": 0})
    ch = b.get("choices", []) if s == 200 else []
    u = b.get("usage", {}) if s == 200 else {}
    expect(len(ch) == 2 and [c["index"] for c in ch] == [0, 1] and
           [c["text"] for c in ch] == one and
           u.get("prompt_tokens") == len(toks[0]) + len(toks[1]) and
           u.get("completion_tokens") == 12,
           f"/v1/completions with a list: choices with index, usage summed ({u})")
    # streamed: each prompt's chunks in turn, each with its "index", as its own request's
    s, ctype, ev = srv.sse("/completion", {"prompt": prompts, "n_predict": 6, "temperature": 0,
                                           "stream": True})
    got = ["", ""]
    ends = []
    for e in ev:
        c = json.loads(e)
        got[c["index"]] += c["content"]
        if c["stop"]:
            ends.append(c["index"])
    expect(s == 200 and ctype.startswith("text/event-stream") and got == one and ends == [0, 1],
           f"/completion streaming several prompts: chunks with index, a last chunk each ({got})")
    s, ctype, ev = srv.sse("/v1/completions", {"prompt": prompts, "max_tokens": 6,
                                               "temperature": 0, "stream": True})
    got = ["", ""]
    finish = []
    for e in ev[:-1]:
        c = json.loads(e)["choices"][0]
        got[c["index"]] += c["text"]
        if c["finish_reason"]:
            finish.append(c["index"])
    expect(s == 200 and got == [c["text"] for c in ch] and finish == [0, 1] and
           ev[-1] == "[DONE]" and ev.count("[DONE]") == 1,
           f"/v1/completions streaming several prompts: choices with index, one [DONE] ({got})")
    # a client gone after the first chunks of several prompts: the jobs still to stream are
    # cancelled and freed (ASan), the slots come back idle
    st.post_raw(srv.port, "/completion", {"prompt": prompts * 2, "n_predict": 200,
                                          "ignore_eos": True, "stream": True}, 2).close()
    idle = False
    for _ in range(300):
        s, b = srv.json("GET", "/slots")
        idle = s == 200 and not any(x["is_processing"] for x in b)
        if idle:
            break
        time.sleep(0.1)
    s, b = srv.json("POST", "/completion", {"prompt": prompts[0], "n_predict": 6,
                                            "temperature": 0})
    expect(idle and s == 200 and b.get("content") == one[0],
           "a client gone mid-stream of several prompts: slots idle, the next request served")
    s, b = srv.json("POST", "/completion", {"prompt": ["a", ""], "n_predict": 1})
    expect(s == 400 or s == 200, "an empty prompt in a list: no crash")

    for slot in (1, 0):
        s, b = srv.json("POST", "/completion", {"prompt": TEXT, "n_predict": 2, "id_slot": slot})
        expect(s == 200 and b.get("id_slot") == slot, f"id_slot {slot} runs on slot {slot}")
    for bad in (2, -2, "x"):
        s, b = srv.json("POST", "/completion", {"prompt": TEXT, "id_slot": bad})
        expect(st.is_error(s, b, 400) and "id_slot" in b["error"]["message"],
               f"id_slot {bad!r}: 400 naming it")
    s, b = srv.json("POST", "/slots/0?action=save", {"filename": "x.bin"})
    expect(st.is_error(s, b, 501) and "--slot-save-path" in b["error"]["message"],
           "slot actions without --slot-save-path: 501")


def test_slot_files(tmp, model):
    d = os.path.join(tmp, "slots")
    os.makedirs(d)
    srv = st.Server(tmp, model, "-np", 2, "-c", 256, "--slot-save-path", d, name="slots")
    req = {"prompt": LONG, "n_predict": 8, "temperature": 0, "id_slot": 1}
    s, first = srv.json("POST", "/completion", req)
    n_kv = first.get("tokens_cached")
    expect(s == 200 and n_kv > 64, f"a long prompt on slot 1 ({s}, {n_kv} tokens cached)")
    s, b = srv.json("POST", "/slots/1?action=save", {"filename": "long.slot"})
    size = os.path.getsize(os.path.join(d, "long.slot")) if s == 200 else 0
    expect(s == 200 and b.get("id_slot") == 1 and b.get("filename") == "long.slot" and
           b.get("n_saved") == n_kv and b.get("n_written") == size > 0 and
           "save_ms" in b.get("timings", {}), f"save: {b}")
    s, b = srv.json("POST", "/slots/1?action=erase")
    expect(s == 200 and b == {"id_slot": 1, "n_erased": n_kv}, f"erase: {b}")
    s, again = srv.json("POST", "/completion", req)
    expect(s == 200 and again["timings"]["prompt_n"] == first["timings"]["prompt_n"] and
           again["content"] == first["content"], "after erase the prompt is evaluated whole")
    srv.json("POST", "/slots/1?action=erase")
    s, b = srv.json("POST", "/slots/1?action=restore", {"filename": "long.slot"})
    expect(s == 200 and b.get("n_restored") == n_kv and b.get("n_read") == size and
           "restore_ms" in b.get("timings", {}), f"restore: {b}")
    s, back = srv.json("POST", "/completion", req)
    expect(s == 200 and back["timings"]["prompt_n"] == 1 and back["content"] == first["content"],
           f"after restore the cache serves the prompt: prompt_n {back['timings']['prompt_n']}, "
           "the same text")
    for url, body, words in (
            ("/slots/0?action=save", {"filename": "../x"}, "Invalid filename"),
            ("/slots/0?action=save", {"filename": "a/b"}, "Invalid filename"),
            ("/slots/0?action=save", {"filename": ".hidden"}, "Invalid filename"),
            ("/slots/0?action=save", {"filename": ""}, "Invalid filename"),
            ("/slots/0?action=save", {}, "Invalid filename"),
            ("/slots/0?action=restore", {"filename": "missing.slot"}, "Unable to restore"),
            ("/slots/0?action=fly", {"filename": "x"}, "Invalid action"),
            ("/slots/0", {"filename": "x"}, "Invalid action"),
            ("/slots/abc?action=erase", {}, "Invalid slot ID"),
            ("/slots/2?action=erase", {}, "Invalid slot ID"),
            ("/slots/0?action=save", {"filename": "x", "extra": 1}, "extra")):
        s, b = srv.json("POST", url, body)
        expect(st.is_error(s, b, 400) and words in b["error"]["message"],
               f"{url} {json.dumps(body)}: 400 {words}")
    with open(os.path.join(d, "garbage.slot"), "wb") as f:
        f.write(b"x" * 200)
    raw = open(os.path.join(d, "long.slot"), "rb").read()
    other = bytearray(raw)
    other[8 + 5 * 8] ^= 1  # n_params
    open(os.path.join(d, "other.slot"), "wb").write(other)
    open(os.path.join(d, "short.slot"), "wb").write(raw[:-10])
    for name, words in (("garbage.slot", "not a Sluice slot file"),
                        ("other.slot", "another model"), ("short.slot", "bytes")):
        s, b = srv.json("POST", "/slots/0?action=restore", {"filename": name})
        expect(st.is_error(s, b, 400) and words in b["error"]["message"],
               f"restore {name}: 400 naming {words!r} ({b.get('error', {}).get('message')})")
    s, b = srv.json("POST", "/completion", {"prompt": TEXT, "n_predict": 2, "id_slot": 0})
    expect(s == 200, "the server serves on after refused restores")
    # both slots saving to one name at once, again and again: each save answers 200 and the
    # file restores (two saves shared one TARGET.partial: one renamed the other's half-written
    # file into place, which then answered 500 or left a short file)
    srv.json("POST", "/completion", {"prompt": LONG, "n_predict": 2, "id_slot": 0})
    codes = []

    def save(slot):
        codes.append(srv.json("POST", f"/slots/{slot}?action=save", {"filename": "both.slot"})[0])

    for _ in range(20):
        ts = [threading.Thread(target=save, args=(k,)) for k in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    s, b = srv.json("POST", "/slots/0?action=restore", {"filename": "both.slot"})
    left = [n for n in os.listdir(d) if n.endswith(".partial")]
    expect(codes == [200] * 40 and s == 200 and not left,
           f"40 concurrent saves to one file: {sorted(set(codes))}, restore {s}, left {left}")
    srv.stop()
    srv = st.Server(tmp, model, "-c", 256, "-ctk", "f32", "-ctv", "f32", "--slot-save-path", d,
                    name="slots-f32")
    s, b = srv.json("POST", "/slots/0?action=restore", {"filename": "long.slot"})
    expect(st.is_error(s, b, 400) and "KV type F16" in b["error"]["message"],
           f"restore into an F32 KV cache: 400 naming the KV type ({b})")
    srv.stop()
    srv = st.Server(tmp, model, "-c", 32, "--slot-save-path", d, name="slots-small")
    s, b = srv.json("POST", "/slots/0?action=restore", {"filename": "long.slot"})
    expect(st.is_error(s, b, 400) and "n_ctx 32" in b["error"]["message"],
           f"restore into a smaller context: 400 naming n_ctx ({b})")
    srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-endp-", dir=os.environ.get("TEST_TMPDIR"))
    model = os.path.join(tmp, "llama.gguf")
    st.mkmodel(model, "--arch", "llama")
    plain = test_embeddings(tmp, model)
    plain.stop()
    plain = st.Server(tmp, model, "-np", 2, "-c", 256, name="plain")
    test_infill(tmp, model, plain)
    test_multi_and_slots(plain)
    plain.stop()
    test_slot_files(tmp, model)
    print(f"{'FAILED' if st.FAILURES else 'passed'}: {len(st.FAILURES)} failure(s)")
    return 1 if st.FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
