"""Tests of `sluice serve`'s constrained generation (issue 30) over real HTTP with the real
`openai` client and Python's http.client: a GBNF `grammar` forces one of its sentences on
/completion, /v1/completions and /v1/chat/completions at temperature 0 and under sampling
(several seeds); response_format json_object output json-parses; json_schema /
response_format json_schema output parses and satisfies the schema (required keys, types,
enum, string length); generation ends when the grammar is complete (stop_type eos); streaming
equals non-streaming; temperature 0 repeats; a bad grammar or schema is a 400 naming the
field (and the line and column), both grammar and schema is llama-server's 400; `sluice generate`'s
--grammar, --grammar-file and --json-schema.

usage: serve_grammar_test.py SLUICE_BINARY
"""
import json
import os
import sys
import tempfile

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_test as st  # noqa: E402  (Server, mkmodel, is_error; argv[1] is the binary)

expect = st.expect
YES_NO = 'root ::= "yes" | "no"'
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer"},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2},
    },
    "required": ["name", "age", "color", "ok"],
}


def satisfies(v):
    """Whether v satisfies SCHEMA (the checks a validator would make)."""
    return (isinstance(v, dict) and set(v) <= set(SCHEMA["properties"])
            and all(k in v for k in SCHEMA["required"])
            and isinstance(v["name"], str) and 1 <= len(v["name"]) <= 8
            and isinstance(v["age"], int) and not isinstance(v["age"], bool)
            and v["color"] in ("red", "green", "blue") and isinstance(v["ok"], bool)
            and (("tags" not in v) or (isinstance(v["tags"], list) and len(v["tags"]) <= 2
                                       and all(isinstance(t, str) and len(t) <= 4
                                               for t in v["tags"]))))


def post(srv, path, body):
    return srv.json("POST", path, body)


def test_grammar(srv, client):
    for temp, seeds in ((0, [0]), (1.0, range(6))):
        for seed in seeds:
            status, b = post(srv, "/completion", {"prompt": "Answer:", "n_predict": 16,
                                                  "temperature": temp, "seed": seed,
                                                  "grammar": YES_NO})
            expect(status == 200 and b.get("content") in ("yes", "no")
                   and b.get("stop_type") == "eos",
                   f"/completion grammar yes|no at temperature {temp} seed {seed} -> "
                   f"{b.get('content')!r} ({b.get('stop_type')})")
            r = client.completions.create(model="any", prompt="Answer:", max_tokens=16,
                                          temperature=temp, seed=seed,
                                          extra_body={"grammar": YES_NO})
            expect(r.choices[0].text in ("yes", "no") and r.choices[0].finish_reason == "stop",
                   f"openai completions grammar at temperature {temp} seed {seed} -> "
                   f"{r.choices[0].text!r} ({r.choices[0].finish_reason})")
            c = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "yes or no?"}],
                max_tokens=16, temperature=temp, seed=seed, extra_body={"grammar": YES_NO})
            expect(c.choices[0].message.content in ("yes", "no"),
                   f"openai chat grammar at temperature {temp} seed {seed} -> "
                   f"{c.choices[0].message.content!r}")
    # the grammar is reported back, generation stops at the grammar's end, not at n_predict
    status, b = post(srv, "/completion", {"prompt": "Q", "n_predict": 50, "temperature": 0,
                                          "grammar": YES_NO})
    expect(b["generation_settings"]["grammar"] == YES_NO and b["tokens_predicted"] <= 3
           and b["stop_type"] == "eos",
           f"generation_settings.grammar echoed, {b['tokens_predicted']} tokens for "
           f"{b['content']!r}")
    # unconstrained text differs: the grammar is what forces it
    status, free = post(srv, "/completion", {"prompt": "Answer:", "n_predict": 3,
                                             "temperature": 0})
    expect(free["content"] not in ("yes", "no"),
           f"without the grammar the text is something else ({free['content']!r})")
    # a longer grammar: repetitions, classes and escapes
    g = 'root ::= "[" item ("," item){2} "]"\nitem ::= [1-9] [0-9]{0,2} | "\\"" [a-c]+ "\\""'
    status, b = post(srv, "/completion", {"prompt": "List:", "n_predict": 60, "temperature": 0.9,
                                          "seed": 7, "grammar": g})
    try:
        v = json.loads(b["content"])
    except (ValueError, KeyError):
        v = None
    expect(isinstance(v, list) and len(v) == 3 and b["stop_type"] == "eos",
           f"a 3-item list grammar -> {b.get('content')!r}")
    # streaming yields the same text as one response at temperature 0
    body = {"prompt": "Answer:", "n_predict": 16, "temperature": 0, "grammar": g}
    status, one = post(srv, "/completion", body)
    status, ctype, events = srv.sse("/completion", dict(body, stream=True))
    text = "".join(json.loads(e).get("content", "") for e in events if not e.startswith("?")
                   and e != "[DONE]")
    expect(text == one["content"] and events,
           f"stream == non-stream under a grammar ({text!r} vs {one['content']!r})")
    status, again = post(srv, "/completion", body)
    expect(again["content"] == one["content"], "temperature 0 repeats under a grammar")


def test_json(srv, client):
    c = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Give me JSON"}], max_tokens=200,
        temperature=0, response_format={"type": "json_object"})
    text = c.choices[0].message.content
    try:
        v = json.loads(text)
    except ValueError:
        v = None
    expect(isinstance(v, dict) and c.choices[0].finish_reason == "stop",
           f"json_object: {text!r} parses as an object")
    for temp, seed in ((0, 0), (0.8, 1), (0.8, 2), (1.5, 3)):
        outs = []
        c = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "A person"}], max_tokens=300,
            temperature=temp, seed=seed,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": SCHEMA}})
        outs.append(("chat json_schema", c.choices[0].message.content))
        r = client.completions.create(model="any", prompt="A person:", max_tokens=300,
                                      temperature=temp, seed=seed,
                                      extra_body={"json_schema": SCHEMA})
        outs.append(("completions json_schema", r.choices[0].text))
        status, b = post(srv, "/completion", {
            "prompt": "A person:", "n_predict": 300, "temperature": temp, "seed": seed,
            "response_format": {"type": "json_object", "schema": SCHEMA}})
        outs.append(("/completion json_object+schema", b.get("content")))
        for what, text in outs:
            try:
                v = json.loads(text)
            except (ValueError, TypeError):
                v = None
            expect(satisfies(v), f"{what} at temperature {temp} seed {seed}: {text!r} "
                   "satisfies the schema")
    # the empty schema is any object (llama-server): the generic object grammar
    status, b = post(srv, "/completion", {"prompt": "x", "n_predict": 8, "temperature": 0,
                                          "json_schema": {}})
    gs = b.get("generation_settings", {}).get("grammar", "")
    expect(status == 200 and "root ::= object" in gs and b["content"].startswith("{"),
           f"json_schema {{}} -> the object grammar ({b.get('content')!r})")


def test_errors(srv, client):
    bad = [
        ({"grammar": 'root ::= "a" | ('}, 400, ["'grammar'", "line 1, column 17"]),
        ({"grammar": 'root ::= x'}, 400, ["'grammar'", "undefined rule 'x'"]),
        ({"grammar": 'start ::= "a"'}, 400, ["'grammar'", "no 'root' rule"]),
        ({"grammar": 'root ::= root "a"'}, 400, ["'grammar'", "left recursion"]),
        ({"grammar": 12}, 400, ["'grammar' must be a string"]),
        ({"json_schema": {"type": "string", "pattern": "^a"}}, 400,
         ["'json_schema'", "'pattern' is not supported"]),
        ({"json_schema": {"type": "number", "minimum": 3}}, 400, ["'minimum'"]),
        ({"json_schema": {"$ref": "#/$defs/x"}}, 400, ["'json_schema'", "unresolved $ref"]),
        ({"json_schema": 5}, 400, ["'json_schema' must be"]),
        ({"json_schema": {"type": "object"}, "grammar": YES_NO}, 400,
         ["Cannot use both json_schema and grammar"]),
        ({"response_format": {"type": "json_object"}, "grammar": YES_NO}, 400,
         ["Cannot use both json_schema and grammar"]),
        ({"response_format": {"type": "xml"}}, 400, ["'response_format'", "got: xml"]),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "x"}}}},
         400, ["'response_format.json_schema.schema'", "unknown type 'x'"]),
        ({"json_schema": {"type": "string", "minLength": 5000}}, 400,
         ["'json_schema'", "more than 2000 repetitions"]),
        ({"grammar": 'root ::= "a"\u0000'}, 400, ["'grammar'", "a NUL character"]),
    ]
    for extra, code, needles in bad:
        for path in ("/completion", "/v1/chat/completions"):
            body = {"prompt": "x"} if "chat" not in path else {
                "messages": [{"role": "user", "content": "x"}]}
            status, b = post(srv, path, dict(body, max_tokens=4, **extra))
            msg = b.get("error", {}).get("message", "") if isinstance(b, dict) else ""
            expect(st.is_error(status, b, code) and all(n in msg for n in needles),
                   f"{path} {json.dumps(extra)[:80]} -> {code} with {needles} ({status} {msg!r})")
    try:
        client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "x"}], max_tokens=4,
            extra_body={"grammar": "root ::= [a-"})
        expect(False, "openai client: a malformed grammar raises BadRequestError")
    except openai.BadRequestError as e:
        expect(e.status_code == 400 and "'grammar'" in str(e) and "line 1" in str(e),
               f"openai client: a malformed grammar raises BadRequestError ({e})")
    # several prompts with one grammar: each job its own copy (they shared one pointer, freed
    # by each: a double free that killed the server), streamed and not
    for stream in (False, True):
        status, b = post(srv, "/completion", {"prompt": ["a", "b", "c"], "n_predict": 8,
                                              "grammar": YES_NO, "stream": stream})
        ok = status == 200
        if ok and not stream:
            ok = len(b) == 3 and all(x.get("content") in ("yes", "no") for x in b)
        expect(ok, f"/completion 3 prompts with a grammar, stream {stream} -> {status}")
    status, _ = srv.json("GET", "/health")
    expect(status == 200, f"the server lives after multi-prompt grammars ({status})")
    # a 60-deep chain of rules each naming the next twice at its start is answered at once:
    # the left-recursion check walked it 2^60 times in the HTTP thread (a request that never
    # returned and a server that could not stop); its 2^60 parse stacks are then refused
    chain = "root ::= r0\n" + "".join(f'r{i} ::= r{i + 1} "a" | r{i + 1} "b"\n'
                                        for i in range(60)) + 'r60 ::= "c"\n'
    status, b = post(srv, "/completion", {"prompt": "x", "n_predict": 4, "grammar": chain})
    msg = b.get("error", {}).get("message", "") if isinstance(b, dict) else ""
    expect(status == 400 and "'grammar'" in msg and "too ambiguous" in msg,
           f"/completion with a 60-deep grammar chain -> 400 too ambiguous ({status} {msg!r})")
    # neutral values stay accepted
    for extra in ({"grammar": ""}, {"response_format": {"type": "text"}}, {"grammar": None}):
        status, b = post(srv, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "max_tokens": 2, **extra})
        expect(status == 200, f"{extra} accepted ({status})")


def test_cli(tmp, model):
    """`sluice generate --grammar / --grammar-file / --json-schema` (llama.cpp's flags)."""
    for temp in (0, 1.0):
        r = st.run("generate", "-m", model, "-p", "Answer:", "-n", 16, "--temp", temp,
                   "--grammar", YES_NO, "--json")
        d = json.loads(r.stdout) if r.returncode == 0 else {}
        expect(d.get("text") in ("yes", "no") and d.get("stop") == "eos",
               f"generate --grammar at temperature {temp} -> {d.get('text')!r} ({r.stderr[-200:]})")
    gf = os.path.join(tmp, "list.gbnf")
    with open(gf, "w") as f:
        f.write('# a list\nroot ::= "[" [1-9] ("," [1-9]){2} "]"\n')
    r = st.run("generate", "-m", model, "-p", "x", "-n", 40, "--temp", 0.8, "--grammar-file", gf,
               "--json")
    d = json.loads(r.stdout) if r.returncode == 0 else {}
    expect(isinstance(d.get("text"), str) and len(json.loads(d["text"])) == 3,
           f"generate --grammar-file -> {d.get('text')!r}")
    r = st.run("generate", "-m", model, "-p", "x", "-n", 300, "--temp", 0.8, "--seed", 3, "-j",
               json.dumps(SCHEMA), "--json")
    d = json.loads(r.stdout) if r.returncode == 0 else {}
    try:
        v = json.loads(d.get("text", ""))
    except ValueError:
        v = None
    expect(satisfies(v), f"generate -j SCHEMA -> {d.get('text')!r}")
    bad = [(["--grammar", 'root ::= "a" | ('], "--grammar: grammar: line 1, column 17"),
           (["--grammar-file", os.path.join(tmp, "none.gbnf")], "--grammar-file"),
           (["--grammar", ""], "--grammar: the grammar is empty"),
           (["-j", '{"type": "number", "maximum": 3}'], "-j: at /: 'maximum' is not supported"),
           (["-j", "{"], "-j:"),
           (["--grammar", YES_NO, "-j", "{}"], "give one of --grammar")]
    for flags, needle in bad:
        r = st.run("generate", "-m", model, "-p", "x", "-n", 4, *flags)
        expect(r.returncode == 2 and needle in r.stderr,
               f"generate {flags[0]} ... -> exit 2 naming {needle!r} ({r.returncode} "
               f"{r.stderr.strip()[:160]!r})")


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-serve-grammar-", dir=os.environ.get("TEST_TMPDIR"))
    model = os.path.join(tmp, "llama.gguf")
    st.mkmodel(model, "--arch", "llama")
    srv = st.Server(tmp, model, "-np", 2, "-c", 512)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none",
                           max_retries=0, timeout=120)
    test_grammar(srv, client)
    test_json(srv, client)
    test_errors(srv, client)
    srv.stop()
    test_cli(tmp, model)
    print(f"{'FAILED' if st.FAILURES else 'passed'}: {len(st.FAILURES)} failure(s)")
    return 1 if st.FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
