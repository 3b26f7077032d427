"""`perplexity --hotswap` end to end: the sweep script of tools/examples re-quantizes one tensor
per round through `requant`; every round's PPL equals a fresh run on that file, the restore
round reproduces round 0's PPL exactly, the loop ends when nothing changes; a failing script
stops the loop with its status; SLUICE_HOTSWAP_ENABLED turns the loop on."""
import json
import os
import subprocess
import sys
import tempfile

SLUICE, SCRIPT = sys.argv[1], sys.argv[2]


def run(*args, env=None):
    e = dict(os.environ, SLUICE_DEVICE="sim")
    e.update(env or {})
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True, env=e)


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def ppl(model, text):
    r = run("perplexity", "-m", model, "-f", text, "-c", "64", "--json")
    check(r.returncode == 0, r.stderr)
    return json.loads(r.stdout)["ppl"]


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-hotswap-", dir=os.environ.get("TEST_TMPDIR"))
    orig, live = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "live.gguf")
    text = os.path.join(tmp, "t.txt")
    r = run("mkmodel", "--arch", "llama", "--type", "Q8_0", "-o", orig)
    check(r.returncode == 0, r.stderr)
    words = "the quick brown fox jumps over a lazy dog near the old harbour".split()
    with open(text, "w") as f:
        f.write(" ".join(words[(i * 7) % len(words)] for i in range(400)) + "\n")
    subprocess.run(["cp", orig, live], check=True)
    tensors = ["blk.0.ffn_up.weight", "blk.1.attn_q.weight"]
    env = {"SWEEP_MODEL": live, "SWEEP_ORIG": orig, "SWEEP_TYPE": "Q4_0",
           "SWEEP_TENSORS": " ".join(tensors), "SLUICE": SLUICE}
    r = run("perplexity", "-m", live, "-f", text, "-c", "64", "--hotswap", "--json",
            "--pre-reload-script", SCRIPT, env=env)
    check(r.returncode == 0, r.stderr)
    rounds = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    check(len(rounds) == 4, f"expected 4 rounds (base, 2 tensors, restore), got {len(rounds)}")
    base = ppl(orig, text)
    check(rounds[0]["ppl"] == base, f"round 0 {rounds[0]['ppl']} != fresh {base}")
    for k, t in enumerate(tensors):
        ref = os.path.join(tmp, f"ref{k}.gguf")
        rr = run("requant", "-m", orig, "--tensor", t, "--type", "Q4_0", "-o", ref)
        check(rr.returncode == 0, rr.stderr)
        rec = rounds[k + 1]
        names = {x["name"]: x for x in rec["tensors"]}
        check(t in names and names[t]["new_type"] == "Q4_0", f"round {k + 1}: {rec['tensors']}")
        x = names[t]  # the record's fields: old -> new type and bytes, where, time
        check(x["old_type"] == "Q8_0" and 0 < x["new_bytes"] < x["old_bytes"] and x["where"]
              and x["seconds"] >= 0, f"round {k + 1}: {x}")
        check(rec["ppl_stderr"] > 0 and rec["seconds"] > 0 and rec["round"] == k + 1,
              f"round {k + 1}: ± error, seconds, round: {rec}")
        want = ppl(ref, text)
        check(rec["ppl"] == want, f"round {k + 1}: {rec['ppl']} != fresh load {want}")
        check(rec["delta_ppl"] == rec["ppl"] - base, "delta")
    last = rounds[3]
    check(last["ppl"] == base and last["delta_ppl"] == 0,
          f"restore: {last['ppl']} != {base} (must be bit-identical)")
    check(any(x["kind"] == "reattached" for x in last["tensors"]), str(last["tensors"]))

    # text mode: llama.cpp's lines, and per round the tensors reloaded before it
    subprocess.run(["cp", orig, live], check=True)
    os.remove(live + ".sweep-done")
    r = run("perplexity", "-m", live, "-f", text, "-c", "64", "--hotswap",
            "--pre-reload-script", SCRIPT, env=env)
    check(r.returncode == 0 and r.stdout.count("Final estimate") == 4 and
          "hotswap round 1: 1 tensors reloaded" in r.stdout and
          "blk.0.ffn_up.weight: Q8_0 -> Q4_0" in r.stdout and
          "nothing changed after round 3" in r.stdout, f"text mode: {r.stdout[-1500:]}")

    # a script that leaves an unreadable file: reported, and the loop ends non-zero (not
    # "nothing changed" with the remaining rounds dropped)
    subprocess.run(["cp", orig, live], check=True)
    r = run("perplexity", "-m", live, "-f", text, "-c", "64", "--hotswap",
            "--pre-reload-script", f"printf garbage > '{live}.g' && mv '{live}.g' '{live}'")
    check(r.returncode == 1 and "skipped" in r.stderr and live in r.stderr and
          "nothing changed" not in r.stdout,
          f"unreadable file: exit {r.returncode}: {r.stderr[-400:]}")

    # a failing script stops the loop with its status; the environment switch works
    subprocess.run(["cp", orig, live], check=True)
    r = run("perplexity", "-m", live, "-f", text, "-c", "64",
            env={"SLUICE_HOTSWAP_ENABLED": "1",
                 "LLAMA_PERPLEXITY_PRE_RELOAD_SCRIPT": "exit 7"})
    check(r.returncode == 7, f"status {r.returncode}: {r.stderr}")
    check("hotswap round 0" in r.stdout and "Final estimate" in r.stdout, r.stdout)
    r = run("perplexity", "-m", live, "-f", text, "-c", "64",
            env={"LLAMA_HOTSWAP_ENABLED": "1", "SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT": "exit 5"})
    check(r.returncode == 5 and "hotswap round 0" in r.stdout,
          f"LLAMA_HOTSWAP_ENABLED and SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT: {r.returncode}")
    r = run("perplexity", "-m", live, "-f", text, "-c", "64",
            env={"LLAMA_HOTSWAP_ENABLED": "yes"})
    check(r.returncode == 2, r.stderr)
    print("hotswap_test: ok")


main()
