"""Hostile files, paths and streams for the CLI (issue 16): inputs that are FIFOs, devices or
directories, unbounded streams, outputs that are an input of the run, a device, a FIFO, a link,
or missing their directory, and a full standard output. Each must end with a non-zero status
(no signal), a message naming the culprit path, inputs unchanged, and nothing left behind; good
runs must still give the same bytes whichever way the output is named.

Every subprocess has a timeout, so a blocking open fails the test instead of hanging it.

usage: hostile_io_test.py SLUICE_BINARY
"""
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile

SLUICE = os.path.abspath(sys.argv[1])
FAILURES = []
TIMEOUT_S = 120


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        FAILURES.append(msg)
    return cond


def run(*args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE):
    try:
        r = subprocess.run([SLUICE, *map(str, args)], stdin=stdin, stdout=stdout,
                           stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        expect(False, f"{' '.join(map(str, args))}: finished within {TIMEOUT_S} s")
        return subprocess.CompletedProcess(args, 124, b"", b"(timed out)")
    r.stderr = r.stderr.decode(errors="replace")
    return r


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def refused(r, what, *needles):
    """Exit 1 or 2 (never a signal), and stderr naming every needle."""
    msg = r.stderr.strip().replace("\n", " | ")
    ok = r.returncode in (1, 2) and all(n in r.stderr for n in needles)
    expect(ok, f"{what}: refused naming {needles} (rc {r.returncode}: {msg})")


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-hostile-io-", dir=os.environ.get("TEST_TMPDIR"))
    os.chdir(tmp)
    p = lambda name: os.path.join(tmp, name)
    model = p("m.gguf")
    r = run("mkmodel", "-o", model)
    if r.returncode:
        sys.exit(f"mkmodel failed: {r.stderr}")
    model_sha = sha(model)
    text = p("text.txt")
    with open(text, "w") as f:
        f.write(" ".join(["the quick brown fox jumps over the lazy dog"] * 60) + "\n")
    text_sha = sha(text)
    fifo = p("fifo")
    os.mkfifo(fifo)
    folder = p("folder")
    os.mkdir(folder)
    ppl = ["perplexity", "-m", model, "-f", text, "-c", "16", "--chunks", "2"]
    toks = ["--tokens", "1,2,3"]

    # ---- 1, 2: an output that is an input of the run -------------------------------------
    r = run(*ppl, "--io", "mmap", "--logits-out", model)
    refused(r, "perplexity --logits-out MODEL", "--logits-out", model, "same file as -m")
    r = run("eval", "-m", model, *toks, "--logits-out", model)
    refused(r, "eval --logits-out MODEL", "--logits-out", model, "same file as -m")
    os.symlink("m.gguf", p("model.link"))
    r = run("eval", "-m", model, *toks, "--logits-out", p("model.link"))
    refused(r, "eval --logits-out LINK-TO-MODEL", p("model.link"), model)
    os.link(model, p("model.hard"))
    r = run("eval", "-m", model, *toks, "--logits-out", p("model.hard"))
    refused(r, "eval --logits-out HARDLINK-TO-MODEL", p("model.hard"), model)
    r = run(*ppl, "--logits-out", text)
    refused(r, "perplexity --logits-out TEXT", "--logits-out", text, "same file as -f")
    r = run("generate", "-m", model, "-p", "hi", "-n", "2", "--trace", model)
    refused(r, "generate --trace MODEL", "--trace", model, "same file as -m")
    base = p("base.f32")
    r = run(*ppl, "--logits-out", base)
    expect(r.returncode == 0, f"perplexity --logits-out base ({r.stderr.strip()})")
    base_sha = sha(base)
    r = run(*ppl, "--kl-divergence-base", base, "--logits-out", base)
    refused(r, "perplexity --logits-out KL-BASE", base, "same file as --kl-divergence-base")
    r = run("eval", "-m", model, *toks, "--logits-out", p("two.bin"), "--trace", p("two.bin"))
    refused(r, "eval --logits-out X --trace X", "--trace", "two.bin", "--logits-out")
    expect(sha(model) == model_sha and sha(text) == text_sha and sha(base) == base_sha,
           "the model, the text and the KL base are unchanged")

    # ---- 3: unbounded inputs ---------------------------------------------------------------
    r = run("generate", "-m", model, "-f", "/dev/zero", "-n", "2")
    refused(r, "generate -f /dev/zero", "/dev/zero", "character device")
    r = run("perplexity", "-m", model, "-f", "/dev/zero")
    refused(r, "perplexity -f /dev/zero", "/dev/zero", "character device")
    with open("/dev/zero", "rb") as zero:
        r = run("generate", "-m", model, "-f", "-", "-n", "2", "--max-input-bytes", "4096",
                stdin=zero)
    refused(r, "generate -f - < /dev/zero", "-f -", "--max-input-bytes 4096")
    r = run(*ppl, "--max-input-bytes", "100")
    refused(r, "perplexity -f TEXT over --max-input-bytes", text, "--max-input-bytes 100")
    r = run("generate", "--help")
    expect("--max-input-bytes" in r.stdout.decode(), "generate --help documents --max-input-bytes")
    # stdin is a stream the flag means: the same text gives the same tokens
    gen = ["generate", "-m", model, "-n", "4", "--temp", "0", "--json"]
    prompt = p("prompt.txt")
    with open(prompt, "w") as f:
        f.write("the quick brown fox\n")
    r1 = run(*gen, "-f", prompt)
    with open(prompt, "rb") as f:
        r2 = run(*gen, "-f", "-", stdin=f)
    same = r1.returncode == 0 and r2.returncode == 0 and \
        json.loads(r1.stdout)["tokens"] == json.loads(r2.stdout)["tokens"]
    expect(same, "generate -f - gives the tokens of -f FILE")

    # ---- 4: FIFOs, directories, devices as inputs ------------------------------------------
    for flag_args, what in (
            (["generate", "-m", fifo, "-p", "hi", "-n", "2"], "generate -m FIFO"),
            (["generate", "-m", model, "-f", fifo, "-n", "2"], "generate -f FIFO"),
            (["eval", "-m", fifo, *toks], "eval -m FIFO"),
            (["inspect", fifo], "inspect FIFO"),
            ([*ppl, "--kl-divergence-base", fifo], "perplexity --kl-divergence-base FIFO")):
        refused(run(*flag_args), what, fifo, "FIFO")
    refused(run("generate", "-m", folder, "-p", "hi"), "generate -m DIR", folder, "directory")
    refused(run("generate", "-m", model, "-f", folder), "generate -f DIR", folder, "directory")
    refused(run("generate", "-m", "/dev/zero", "-p", "hi"), "generate -m /dev/zero",
            "/dev/zero", "character device")

    # ---- 5: outputs that are not regular files ---------------------------------------------
    refused(run("mkmodel", "-o", "/dev/full"), "mkmodel -o /dev/full", "/dev/full",
            "character device")
    expect(stat.S_ISCHR(os.lstat("/dev/full").st_mode), "/dev/full is still a device")
    refused(run("mkmodel", "-o", fifo), "mkmodel -o FIFO", fifo, "FIFO")
    refused(run("mkmodel", "-o", folder), "mkmodel -o DIR", folder, "directory")
    os.symlink("nowhere.gguf", p("dangling"))
    refused(run("mkmodel", "-o", p("dangling")), "mkmodel -o DANGLING-LINK", p("dangling"),
            "missing file")
    expect(not os.path.lexists(p("nowhere.gguf")), "nothing created through a dangling link")
    os.symlink("/dev/full", p("full.link"))
    refused(run("eval", "-m", model, *toks, "--logits-out", p("full.link")),
            "eval --logits-out LINK-TO-/dev/full", p("full.link"), "/dev/full")
    refused(run("eval", "-m", model, *toks, "--logits-out", fifo), "eval --logits-out FIFO",
            fifo, "FIFO")
    refused(run("eval", "-m", model, *toks, "--logits-out", "/dev/full"),
            "eval --logits-out /dev/full", "/dev/full")
    refused(run("eval", "-m", model, *toks, "--json", "--logits-out", "-"),
            "eval --json --logits-out -", "--logits-out -", "standard stream")
    expect(stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISDIR(os.lstat(folder).st_mode),
           "the FIFO and the folder are untouched")
    # a link to a regular file: the link stays, its target gets the model, byte for byte
    with open(p("target.gguf"), "w") as f:
        f.write("old")
    os.symlink("target.gguf", p("out.link"))
    r = run("mkmodel", "-o", p("out.link"))
    expect(r.returncode == 0 and os.path.islink(p("out.link")) and
           sha(p("target.gguf")) == model_sha, "mkmodel -o LINK writes the link's target")

    # ---- 6: standard output on a full disk -------------------------------------------------
    with open("/dev/full", "wb") as full:
        for args, what in (
                (["generate", "-m", model, "-p", "hi", "-n", "2"], "generate"),
                (["generate", "-m", model, "-p", "hi", "-n", "2", "--json"], "generate --json"),
                (["eval", "-m", model, *toks], "eval"),
                (["eval", "-m", model, *toks, "--json"], "eval --json"),
                ([*ppl], "perplexity"),
                ([*ppl, "--json"], "perplexity --json"),
                (["inspect", model], "inspect"),
                (["mkmodel", "-o", p("m2.gguf")], "mkmodel"),
                (["eval", "-m", model, *toks, "--logits-out", "-"], "eval --logits-out -")):
            r = run(*args, stdout=full)
            refused(r, f"{what} > /dev/full", "standard output", os.strerror(28))

    # ---- 12: an output that cannot be written is refused before the run --------------------
    r = run("generate", "-m", model, "-p", "hi", "-n", "2", "--trace", "/no/such/dir/t.json")
    refused(r, "generate --trace /no/such/dir/t.json", "--trace /no/such/dir/t.json",
            "/no/such/dir")
    expect("generate: prefill" not in r.stderr, "... before generating")
    r = run("eval", "-m", model, *toks, "--logits-out", "/no/such/dir/x.f32")
    refused(r, "eval --logits-out /no/such/dir/x.f32", "/no/such/dir")
    expect("tokens x" not in r.stderr, "... before evaluating")
    r = run(*ppl, "--logits-out", p("folder/sub/x.f32"))
    refused(r, "perplexity --logits-out MISSING-DIR", "folder/sub")

    # ---- good runs: the same bytes whichever way the output is named -----------------------
    fresh = p("fresh.f32")
    r = run("eval", "-m", model, *toks, "--logits-out", fresh)
    expect(r.returncode == 0 and os.path.getsize(fresh) == 3 * 512 * 4, "eval --logits-out NEW")
    want = sha(fresh)
    with open(p("old.f32"), "w") as f:
        f.write("x" * 100000)
    run("eval", "-m", model, *toks, "--logits-out", p("old.f32"))
    expect(sha(p("old.f32")) == want, "eval --logits-out over an existing file: same bytes")
    with open(p("t2.f32"), "w") as f:
        f.write("x")
    os.symlink("t2.f32", p("l2.f32"))
    run("eval", "-m", model, *toks, "--logits-out", p("l2.f32"))
    expect(os.path.islink(p("l2.f32")) and sha(p("t2.f32")) == want,
           "eval --logits-out LINK: the target gets the same bytes")
    r = run("eval", "-m", model, *toks, "--logits-out", "-")
    expect(r.returncode == 0 and hashlib.sha256(r.stdout).hexdigest() == want,
           "eval --logits-out -: the same bytes on stdout")
    r = run("eval", "-m", model, *toks, "--logits-out", "/dev/null")
    expect(r.returncode == 0, f"eval --logits-out /dev/null ({r.stderr.strip()})")
    r = run(*ppl, "--logits-out", p("base2.f32"))
    expect(r.returncode == 0 and sha(p("base2.f32")) == base_sha, "perplexity logits repeat")

    # ---- nothing left behind ---------------------------------------------------------------
    left = [n for n in os.listdir(tmp) if n.endswith(".partial")]
    expect(not left, f"no temporaries left in the test folder ({left})")
    expect(sha(model) == model_sha, "the model is unchanged at the end")

    print(f"{len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
