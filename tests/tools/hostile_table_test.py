"""Every command of the CLI against a table of hostile inputs (issue 16, the acceptance test).

Classes (each a list of cases built below; a case is one sluice run):
  files     every input slot of every command (models, texts, KL bases, stats, neuron indexes,
            folders) given a FIFO, a character device, a directory, a socket, a dangling link, a
            link to a device and to a FIFO, a link loop, an empty file, a missing file (and a file
            without read permission when not root)
  truncated models (MoE and dense), stats files and neuron indexes cut in the header, the
            metadata, the tensor table and the data
  corrupted models with one field rewritten (magic, version, counts, string and array lengths,
            value types, hyperparameters, tensor names, dims, types and offsets), deterministic
  aliases   every output flag of every command naming an input of the run (same path, relative
            path, symbolic link, hard link) or another output
  outputs   outputs that are devices, FIFOs, folders, dangling links, in missing folders
  full disk /dev/full as standard output and as an output; a file-size limit (RLIMIT_FSIZE,
            SIGXFSZ ignored) as a disk that fills while the output is written
  numbers   huge and malformed values for every numeric flag of every command (checked against
            the flags the --help texts list) and every SLUICE_* variable the binary reads
            (checked against the names in the binary); scheduler options; token lists
  faults    device faults injected through SLUICE_FAULT_* (the run fails, saying so)
  flags     contradictory flags, flags given twice, flags missing their value, unknown flags
For every case: an exit status of 1 or 2 (not 0, not a signal, not a sanitizer's), stderr naming
the culprit (path, flag or variable), no sanitizer report, an end within TIMEOUT_S, and no file
under the test's root changed, created or removed (the root holds the test folder, a sentinel
file beside it and a folder "outside" that links point into). The inputs' bytes are compared at
the end. Good runs then give byte-identical outputs twice over.

The runs have cwd, HOME and TMPDIR inside the test folder, no SLUICE_* variable unless a case
sets one, and run two at a time. Under `bazel test --config=asan` the binary is the ASan/UBSan
build; sanitizer reports are caught by their text and their exit status (86).

usage: hostile_table_test.py SLUICE_BINARY
"""
import concurrent.futures
import os
import re
import shutil
import socket
import sys
import time

from gguf_edit import SEMANTIC, corruptions, gguf_layout, truncations, u32b, u64b
from harness import SLUICE, expect, finish
from hostile_run import (CASES, GOOD, IS_ROOT, OUT, OUTSIDE, ROOT, SANITIZER_TEXT, SCRATCH,
                         SENTINEL, T, TIMEOUT_S, WORK, WORKERS, case, check_case, devices_state,
                         diff, has, hashes, run, run_case, snapshot, w, write_variant)
from hostile_values import ALIAS_JUNK, ALIASES_OF, HELPS, JUNK, NOT_NUMERIC, QUOTED


# ---- building the table --------------------------------------------------------------------

def setup():
    for d in (T, WORK, GOOD, SCRATCH, OUTSIDE, os.path.join(T, "home"), os.path.join(T, "tmp")):
        os.makedirs(d, exist_ok=True)
    with open(SENTINEL, "w") as f:
        f.write("outside the test folder: never touched\n")
    with open(os.path.join(OUTSIDE, "target.bin"), "w") as f:
        f.write("a file outside the test folder\n")
    tiny = ["--layers", "1", "--dim", "64", "--ffn", "64", "--vocab", "300"]
    for path, extra in ((w("m.gguf"), ["--experts", "4"]), (w("d.gguf"), ["--arch", "llama"])):
        rc, _, err = run(["mkmodel", *tiny, *extra, "-o", path])
        if rc:
            sys.exit(f"mkmodel failed: {err}")
    words = "the quick brown fox jumps over a lazy dog near the old harbour".split()
    with open(w("text.txt"), "w") as f:
        f.write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(400)) + "\n")
    with open(w("prompt.txt"), "w") as f:
        f.write("the quick brown fox\n")
    for argv in (["place", "profile", "-m", w("d.gguf"), "-f", w("text.txt"), "-o",
                  w("stats.gguf"), "--tokens", "64"],
                 ["place", "solve", "-m", w("d.gguf"), "--stats", w("stats.gguf"),
                  "--vram-budget", "3M", "--cpu-gbs", "10", "--gpu-gbs", "10", "-o",
                  w("d.gpuidx")],
                 ["place", "profile", "-m", w("m.gguf"), "-f", w("text.txt"), "-o",
                  w("moe-stats.gguf"), "--tokens", "64"],
                 ["perplexity", "-m", w("m.gguf"), "-f", w("text.txt"), "-c", "16",
                  "--chunks", "1", "--logits-out", w("base.f32")]):
        rc, _, err = run(argv)
        if rc:
            sys.exit(f"{' '.join(argv)} failed: {err}")
    # files of every type
    os.mkfifo(w("fifo"))
    os.mkdir(w("folder"))
    os.symlink("nowhere", w("dangling"))
    os.symlink("/dev/zero", w("devlink"))
    os.symlink("fifo", w("fifolink"))
    os.symlink("loop", w("loop"))
    open(w("empty"), "w").close()
    s = socket.socket(socket.AF_UNIX)
    os.chdir(WORK)
    s.bind("sock")  # relative: a socket's path is short; kept open until the end
    setup.sock = s
    if not IS_ROOT:
        with open(w("noread"), "w") as f:
            f.write("secret")
        os.chmod(w("noread"), 0)
    os.symlink(SENTINEL, w("sentinel.link"))
    os.symlink(os.path.join(OUTSIDE, "target.bin"), w("outside.link"))
    os.symlink("/dev/full", w("full.link"))
    os.link(w("m.gguf"), w("m.hard"))
    os.link(w("d.gguf"), w("d.hard"))
    os.link(w("text.txt"), w("text.hard"))
    os.symlink("m.gguf", w("m.link"))
    os.symlink("text.txt", w("text.link"))
    os.symlink("base.f32", w("base.link"))
    os.symlink("stats.gguf", w("stats.link"))
    os.link(w("stats.gguf"), w("stats.hard"))
    os.symlink("d.gpuidx", w("idx.link"))
    os.link(w("d.gpuidx"), w("idx.hard"))
    # MODEL.generated.gpuidx: the index auto placement reads beside a model, an input too
    with open(D, "rb") as f, open(w("d2.gguf"), "wb") as g:
        g.write(f.read())
    with open(IDX, "rb") as f, open(w("d2.gguf.generated.gpuidx"), "wb") as g:
        g.write(f.read())


# Hostile files: (name, path, what stderr must say besides the path)
def hostile_files():
    f = [("FIFO", w("fifo"), "FIFO"), ("/dev/zero", "/dev/zero", "character device"),
         ("directory", w("folder"), "directory"), ("socket", w("sock"), "socket"),
         ("dangling link", w("dangling"), None), ("link to a device", w("devlink"),
                                                   "character device"),
         ("link to a FIFO", w("fifolink"), "FIFO"), ("link loop", w("loop"), None),
         ("empty file", w("empty"), None), ("missing file", w("missing.gguf"), None)]
    if not IS_ROOT:
        f.append(("no read permission", w("noread"), "ermission"))
    return f


M, D, TEXT, PROMPT = w("m.gguf"), w("d.gguf"), w("text.txt"), w("prompt.txt")
STATS, IDX, BASE = w("stats.gguf"), w("d.gpuidx"), w("base.f32")
MOE_STATS = w("moe-stats.gguf")  # the MoE model's profile (per expert counts)

# Every command with a model, as a template: "{m}" is the model.
MODEL_CMDS = {
    "generate": ["generate", "-m", "{m}", "-p", "hello", "-n", "2"],
    "perplexity": ["perplexity", "-m", "{m}", "-f", TEXT, "-c", "16", "--chunks", "1"],
    "eval": ["eval", "-m", "{m}", "--tokens", "1,2,3"],
    "inspect": ["inspect", "{m}"],
    "inspect --checksum": ["inspect", "{m}", "--json", "--checksum"],
    "place show": ["place", "show", "-m", "{m}"],
    "place profile": ["place", "profile", "-m", "{m}", "-f", TEXT, "-o", OUT, "--tokens", "32"],
    "place solve": ["place", "solve", "-m", "{m}", "--stats", STATS, "--vram-budget", "3M",
                    "--cpu-gbs", "10", "--gpu-gbs", "10", "-o", OUT],
    "bench decode": ["bench", "decode", "-m", "{m}", "-n", "1", "--prompt-tokens", "1",
                     "--placement", "cpu"],
    "bench moe": ["bench", "moe", "-m", "{m}", "--tokens", "1", "--prefill", "1", "--device",
                  "sim"],
    "serve": ["serve", "-m", "{m}", "--port", "0"],
    "requant": ["requant", "-m", "{m}", "--tensor", "blk\\.0\\.attn_q\\.weight", "--type",
                "Q8_0", "-o", OUT],
}
DENSE_ONLY = ("place profile", "place solve")


def with_model(cmd, model):
    return [model if x == "{m}" else x for x in MODEL_CMDS[cmd]]


def build_files():
    for what, path, kind in hostile_files():
        needles = [path] + ([kind] if kind else [])
        for cmd in MODEL_CMDS:
            model = D if cmd in DENSE_ONLY else M
            argv = with_model(cmd, model)
            argv[argv.index(model)] = path
            case("files", argv, needles, name=f"{cmd}: model is a {what}")
        # text inputs
        for cmd, argv in (("generate -f", ["generate", "-m", M, "-f", path, "-n", "2"]),
                          ("generate --grammar-file", ["generate", "-m", M, "-p", "x",
                                                       "--grammar-file", path, "-n", "2"]),
                          ("perplexity -f", ["perplexity", "-m", M, "-f", path, "-c", "16"]),
                          ("place profile -f", ["place", "profile", "-m", D, "-f", path, "-o",
                                                OUT])):
            case("files", argv, needles, name=f"{cmd}: text is a {what}")
        case("files", [*MODEL_CMDS["perplexity"][:2], M, *MODEL_CMDS["perplexity"][3:],
                       "--kl-divergence-base", path], needles,
             name=f"perplexity --kl-divergence-base: a {what}")
        case("files", with_model("place solve", D)[:5] + [path] + with_model("place solve", D)[6:],
             needles, name=f"place solve --stats: a {what}")
        for cmd in ("generate", "eval", "perplexity"):
            case("files", [*with_model(cmd, D), "--placement", "hot-cold", "--device", "sim",
                           "--gpu-index", path], needles,
                 name=f"{cmd} --gpu-index: a {what}")
        # folders that are not folders (the benchmarks probe the machine first: a few types)
        if kind != "directory":
            case("files", ["demo", "--dir", path, "-n", "1"], [path],
                 name=f"demo --dir: a {what}")
        if what in ("FIFO", "dangling link", "empty file"):
            case("files", ["bench", "decode", "--dir", path, "-n", "1", "--prompt-tokens", "1",
                           "--placement", "cpu"], [path], name=f"bench decode --dir: a {what}")
            case("files", ["bench", "moe", "--dir", path, "--tokens", "1", "--prefill", "1",
                           "--device", "sim"], [path], name=f"bench moe --dir: a {what}")
    # standard input that never ends, read as a text
    for argv in (["generate", "-m", M, "-f", "-", "-n", "2", "--max-input-bytes", "4096"],
                 ["perplexity", "-m", M, "-f", "-", "--max-input-bytes", "4096"],
                 ["place", "profile", "-m", D, "-f", "-", "-o", OUT, "--max-input-bytes",
                  "4096"]):
        case("files", argv, ["-f -", "--max-input-bytes 4096"], stdin="/dev/zero")


def build_models():
    for base, arch, cmds in ((M, "qwen3moe", [c for c in MODEL_CMDS if c not in DENSE_ONLY]),
                             (D, "llama", ["eval", "inspect --checksum", *DENSE_ONLY])):
        with open(base, "rb") as f:
            data = f.read()
        lay = gguf_layout(data)
        tag = os.path.basename(base)[0]
        for cut_name, at in truncations(data, lay).items():
            path = write_variant(f"{tag}-cut-{cut_name}.gguf", data[:at])
            for cmd in cmds:
                case("truncated", with_model(cmd, path), [path],
                     name=f"{cmd}: {arch} cut at {at} ({cut_name})")
        for cname, edits in corruptions(data, lay, arch).items():
            path = write_variant(f"{tag}-bad-{cname}.gguf", data, edits)
            semantic = cname.startswith(SEMANTIC)
            for cmd in cmds:
                # inspect and requant read GGUF files, not models: a well-formed file with
                # model-level nonsense is theirs to print or rewrite
                if semantic and (cmd.startswith("inspect") or cmd == "requant"):
                    continue
                case("corrupted", with_model(cmd, path), [path],
                     name=f"{cmd}: {arch} with {cname}")
    # the other binary inputs: stats (a GGUF), neuron index, KL base
    for src, tag, argv_of in (
            (STATS, "stats", lambda p: with_model("place solve", D)[:5] + [p] +
             with_model("place solve", D)[6:]),
            (MOE_STATS, "moestats", lambda p: with_model("place solve", M)[:5] + [p] +
             with_model("place solve", M)[6:]),
            (IDX, "gpuidx", lambda p: [*with_model("eval", D), "--placement", "hot-cold",
                                       "--device", "sim", "--gpu-index", p]),
            (BASE, "klbase", lambda p: [*with_model("perplexity", M),
                                        "--kl-divergence-base", p])):
        with open(src, "rb") as f:
            data = f.read()
        cuts = sorted({1, 4, 8, 16, 24, len(data) // 3, len(data) // 2, len(data) - 4,
                       len(data) - 1})
        for at in cuts:
            path = write_variant(f"{tag}-cut-{at}", data[:at])
            case("truncated", argv_of(path), [path], name=f"{tag} cut at {at}")
        if tag == "klbase":  # a raw array: its size is its shape (a GGUF may have a tail)
            path = write_variant(f"{tag}-longer", data + b"\0" * 4)
            case("truncated", argv_of(path), [path], name=f"{tag} with 4 bytes more")
            continue
        for at, value, what in ((0, b"XXXX", "magic"), (4, u32b(0xFFFFFFFF), "version"),
                                (8, u64b(1 << 62), "count")):
            path = write_variant(f"{tag}-bad-{what}", data, [(at, value)])
            case("corrupted", argv_of(path), [path], name=f"{tag} with a bad {what}")
    # a well-formed profile of the other kind of model (same layer count): its expert count
    for model, stats in ((M, STATS), (D, MOE_STATS)):
        case("corrupted", with_model("place solve", model)[:5] + [stats] +
             with_model("place solve", model)[6:], [stats, "expert_count"],
             name=f"place solve {os.path.basename(model)} --stats {os.path.basename(stats)}")


# Output flags: (command, argv without the output, flag, inputs of the run as (flag, path))
def outputs():
    sim = ["--device", "sim", "--placement", "experts-cpu", "--sched", "mode=post"]
    return [
        ("eval --logits-out", [*with_model("eval", M)], "--logits-out", [("-m", M)]),
        ("eval --trace", [*with_model("eval", M), *sim], "--trace", [("-m", M)]),
        ("generate --trace", [*with_model("generate", M), *sim], "--trace", [("-m", M)]),
        ("generate -f --trace", ["generate", "-m", M, "-f", PROMPT, "-n", "2", *sim], "--trace",
         [("-m", M), ("-f", PROMPT)]),
        ("perplexity --logits-out", [*with_model("perplexity", M)], "--logits-out",
         [("-m", M), ("-f", TEXT)]),
        ("perplexity --logits-out (KL)", [*with_model("perplexity", M),
                                          "--kl-divergence-base", BASE], "--logits-out",
         [("--kl-divergence-base", BASE)]),
        ("perplexity --trace", [*with_model("perplexity", M), *sim], "--trace",
         [("-m", M), ("-f", TEXT)]),
        ("place profile -o", ["place", "profile", "-m", D, "-f", TEXT, "--tokens", "32"], "-o",
         [("-m", D), ("-f", TEXT)]),
        ("place solve -o", with_model("place solve", D)[:-2], "-o",
         [("-m", D), ("--stats", STATS)]),
        ("eval --logits-out (gpu-index)", [*with_model("eval", D), "--placement", "hot-cold",
                                           "--device", "sim", "--gpu-index", IDX],
         "--logits-out", [("--gpu-index", IDX)]),
        ("eval --logits-out (generated index)", [*with_model("eval", w("d2.gguf"))],
         "--logits-out", [("the neuron index", w("d2.gguf.generated.gpuidx"))]),
        ("perplexity --logits-out (gpu-index)", [*with_model("perplexity", D), "--placement",
                                                 "hot-cold", "--device", "sim", "--gpu-index",
                                                 IDX], "--logits-out", [("--gpu-index", IDX)]),
        ("bench decode --trace", [*with_model("bench decode", M)[:-2], "--placement",
                                  "experts-cpu", "--device", "sim", "--sched", "mode=post"],
         "--trace", [("-m", M)]),
        ("bench moe --trace", [*with_model("bench moe", M)], "--trace", [("-m", M)]),
        ("mkmodel -o", ["mkmodel", "--layers", "1"], "-o", []),
        ("requant -o", with_model("requant", M)[:-2], "-o", [("-m", M)]),
    ]


ALIASES = {M: [M, "./m.gguf", w("m.link"), w("m.hard"), WORK + "//m.gguf",
               os.path.join(WORK, "..", "work", "m.gguf")],
           D: [D, "d.gguf", w("d.hard")],
           TEXT: [TEXT, "text.txt", w("text.link"), w("text.hard")], PROMPT: [PROMPT],
           w("d2.gguf.generated.gpuidx"): [w("d2.gguf.generated.gpuidx")],
           BASE: [BASE, w("base.link")],
           STATS: [STATS, w("stats.link"), w("stats.hard")],
           IDX: [IDX, w("idx.link"), w("idx.hard")]}


def build_outputs():
    for name, argv, flag, inputs in outputs():
        for in_flag, path in inputs:
            for alias in ALIASES[path]:
                case("aliases", [*argv, flag, alias], [flag, alias],
                     name=f"{name} {alias} (an alias of the {in_flag} input)")
        if flag == "--logits-out" and "--gpu-index" not in argv:  # commands with two outputs
            case("aliases", [*argv, "--device", "sim", "--placement", "experts-cpu", "--sched",
                             "mode=post", flag, w("twice.out"), "--trace", w("twice.out")],
                 ["--trace", "twice.out", "--logits-out"],
                 name=f"{name}: the same file for --trace")
        for what, path, kind in (("/dev/full", "/dev/full", "character device"),
                                 ("/dev/zero", "/dev/zero", "character device"),
                                 ("FIFO", w("fifo"), "FIFO"), ("directory", w("folder"),
                                                               "directory"),
                                 ("socket", w("sock"), "socket"),
                                 ("dangling link", w("dangling"), None),
                                 ("link to /dev/full", w("full.link"), "/dev/full"),
                                 ("link loop", w("loop"), None),
                                 ("missing folder", w("no/such/dir/out.bin"), "no/such/dir"),
                                 ("file as folder", w("text.txt/out.bin"), None),
                                 ("empty name", "", None)):
            needles = [flag] + ([path] if path else []) + ([kind] if kind else [])
            case("outputs", [*argv, flag, path], needles, name=f"{name} to a {what}")
        # the disk fills while the output is written: the old target stays, nothing is left
        if name.startswith("bench"):
            continue  # the same writers as eval's (bench probes the machine first: slow)
        target = w(f"full-{re.sub('[^a-z]+', '-', name)}.out")
        with open(target, "w") as f:
            f.write("the old content\n")
        case("full disk", [*argv, flag, target], [target], fsize=FSIZE,
             name=f"{name} on a disk that fills after {FSIZE} bytes")
    for what, path, kind in (("FIFO", "fifo", "FIFO"), ("directory", "folder", "directory"),
                             ("link to /dev/full", "full.link", "/dev/full")):
        d = w(f"demo-{path}")
        os.makedirs(d)
        target = os.path.join(d, "sluice-default.gguf")
        if path == "fifo":
            os.mkfifo(target)
        elif path == "folder":
            os.mkdir(target)
        else:
            os.symlink("/dev/full", target)
        case("outputs", ["demo", "--dir", d, "-n", "1"], [target, kind],
             name=f"demo --dir: sluice-default.gguf is a {what}")


FSIZE = 100  # smaller than every output of the table


def build_full_disk():
    # a run that fails only on standard output may leave its file output: in SCRATCH
    runs = [[os.path.join(SCRATCH, f"{c}.out") if x == OUT else x
             for x in with_model(c, D if c in DENSE_ONLY else M)]
            for c in MODEL_CMDS if c not in ("bench decode", "serve")]  # serve: stdout unused
    runs += [["generate", "-m", M, "-p", "hi", "-n", "2", "--json"],
             ["eval", "-m", M, "--tokens", "1,2", "--json"],
             ["perplexity", "-m", M, "-f", TEXT, "-c", "16", "--chunks", "1", "--json"],
             ["place", "show", "-m", M, "--json"],
             ["mkmodel", "--layers", "1", "-o", os.path.join(SCRATCH, "mk.gguf")],
             ["demo", "--dir", SCRATCH, "-n", "1"],
             ["--help"], ["generate", "--help"], ["bench", "--help"]]
    for argv in runs:
        case("full disk", argv, ["standard output", os.strerror(28)], stdout="/dev/full")
    for out in ("-", "/dev/stdout"):
        case("full disk", ["eval", "-m", M, "--tokens", "1,2", "--logits-out", out],
             [("standard output", f"--logits-out {out}"), os.strerror(28)], stdout="/dev/full")
    # where a standard stream is not an output the command offers
    for name, argv, flag, _ in outputs():
        if flag != "--logits-out" or name.startswith("perplexity"):
            case("outputs", [*argv, flag, "/dev/stdout"], [flag, "/dev/stdout"],
                 name=f"{name} /dev/stdout")


# Numeric flags of each command: (argv before the flag, flags, kind). Kinds: int, uint (no
# sign), float, size, list. The values tried are junk for every kind.
def numeric_flags():
    g = ["generate", "-m", M, "-p", "hello"]
    p = ["perplexity", "-m", M, "-f", TEXT]
    e = ["eval", "-m", M, "--tokens", "1,2,3"]
    model = ["-ngl", "--gpu-layers", "--n-gpu-layers", "-t", "--threads", "--numa-node",
             "--n-cpu-moe", "-ncmoe"]
    return [
        ("generate", g, ["-n", "--n-predict", "-c", "--ctx-size", "--ctx", "-b", "--batch-size",
                         "--top-k", "--seed", "--max-input-bytes", *model], "int"),
        ("generate", g, ["--temp", "--top-p", "--min-p"], "float"),
        ("generate", g, ["--vram-budget"], "size"),
        ("perplexity", p, ["-c", "--ctx-size", "--ctx", "-b", "--batch-size", "--chunks",
                           "--max-input-bytes", *model], "int"),
        ("eval", e, ["-c", "--ctx-size", "--ctx", "-b", "--batch-size", *model], "int"),
        ("eval", ["eval", "-m", M], ["--tokens"], "list"),
        ("place show", ["place", "show", "-m", M], model, "int"),
        ("place show", ["place", "show", "-m", M], ["--vram-budget"], "size"),
        ("place profile", with_model("place profile", D)[:-2], ["--tokens", "-c", "--ctx",
                                                                "--max-input-bytes", *model],
         "int"),
        ("place solve", ["place", "solve", "-m", D, "--stats", STATS, "-o", OUT],
         ["--vram-budget"], "size"),
        ("place solve", ["place", "solve", "-m", D, "--stats", STATS, "-o", OUT,
                         "--vram-budget", "3M"], model, "int"),
        ("place solve", ["place", "solve", "-m", D, "--stats", STATS, "-o", OUT,
                         "--vram-budget", "3M"], ["--cpu-gbs", "--gpu-gbs"], "float"),
        ("mkmodel", ["mkmodel", "-o", OUT], ["--layers", "--dim", "--ffn", "--experts",
                                             "--top-k", "--heads", "--kv-heads", "--vocab",
                                             "--ctx", "--shared-ffn", "--sliding-window",
                                             "--router-topics", "--topic-run", "--longrope",
                                             "--nextn", "--head-dim", "--seed", "-t",
                                             "--threads"], "int"),
        ("mkmodel", ["mkmodel", "-o", OUT], ["--router-skew", "--neuron-skew", "--rope-theta"],
         "float"),
        ("demo", ["demo"], ["-n", "--n-predict", "-t"], "int"),
        ("bench gguf", ["bench", "gguf"], ["--read-mib"], "int"),
        ("bench alloc", ["bench", "alloc"], ["--ops", "--region-ops", "--budget-mib", "--steps",
                                             "--reps"], "int"),
        ("bench copy", ["bench", "copy"], ["--max-mib", "--reps", "--register-mib",
                                           "--numa-node", "--slab-mib"], "int"),
        ("bench kernels", ["bench", "kernels"], ["--threads", "--numa-node", "--rows", "--cols",
                                                 "--reps"], "int"),
        ("bench decode", ["bench", "decode", "-m", M], ["-n", "--n-predict", "--prompt-tokens",
                                                        "--pdl-ab", "--fusion-ab", *model],
         "int"),
        ("bench moe", ["bench", "moe", "-m", M], ["--tokens", "--prefill", "-t", "--threads",
                                                  "--router-topics"], "int"),
        ("bench moe", ["bench", "moe", "-m", M], ["--sim-h2d-gbs", "--router-skew"], "float"),
        ("bench decode", ["bench", "decode", "-m", M], ["--vram-budget"], "size"),
        ("serve", ["serve", "-m", M], ["--port", "-np", "--parallel", "-c", "--ctx-size", "-b",
                                       "--batch-size", "-n", "--n-predict", "--max-body-bytes",
                                       "--max-connections", "--timeout", "--top-k", "--seed",
                                       *model], "int"),
        ("serve", ["serve", "-m", M], ["--temp", "--top-p", "--min-p"], "float"),
        ("serve", ["serve", "-m", M], ["--vram-budget"], "size"),
    ]


def build_numbers():
    for cmd, argv, flags, kind in numeric_flags():
        for flag in flags:
            alias = ALIASES_OF.get(flag) in flags
            for v in (ALIAS_JUNK if alias else JUNK)[kind]:
                needles = [flag] + ([v] if v in QUOTED else [])
                case("numbers", [*argv, flag, v], needles, rcs=(2,),
                     name=f"{cmd} {flag} {v!r}")
            # the same with --flag=value
            if flag.startswith("--") and not alias:
                case("numbers", [*argv, f"{flag}=7x"], [flag, "7x"], rcs=(2,),
                     name=f"{cmd} {flag}=7x")
    # scheduler options (--sched K=V) and pins naming model parts
    for key, vals in (("max_transfers", ["0", "257", "-1", "1x", "", " 1", "99999999999999999999"]),
                      ("scratch_kb", ["-1", "1x", "99999999999999999999", ""]),
                      ("cache_kb", ["-1", "1x", "99999999999999999999", ""]),
                      ("defer", ["-1", "65", "1x", ""]),
                      ("decay", ["nan", "inf", "-1", "2", "x"]),
                      ("cpu_gbs", ["nan", "-1", "1e999"]),
                      ("pcie_gbs", ["nan", "-1", "x"]), ("dev_gbs", ["inf", "-1"]),
                      ("pin", ["99:0", "0:99", "0:", ":0", "a:b", "0:0:0", "-1:0",
                               "99999999999999999999:0"]),
                      ("block_on_miss", ["2", "yes", ""]), ("mode", ["fast", ""]),
                      ("policy", ["mru"]), ("streams", ["many"]), ("debug", ["2"]),
                      ("nonsense", ["1"])):
        for v in vals:
            case("numbers", [*with_model("eval", M), "--device", "sim", "--placement",
                             "experts-cpu", "--sched", f"mode=post {key}={v}"],
                 ["--sched" if key != "pin" or not v[:1].isdigit() else "pin", key],
                 name=f"eval --sched 'mode=post {key}={v}'")


# SLUICE_* variables: the values tried, what the variable needs to be read
SIM_RUN = ["--device", "sim", "--placement", "experts-cpu", "--sched", "mode=post"]
ENV_VARS = {
    "SLUICE_DEVICE": (["", "gpu", "cuda ", "sim,cuda"], []),
    "SLUICE_CPU_ISA": (["avx9", "AVX2 ", "scalar,avx2"], []),
    "SLUICE_ACT_F32": (["", "2", "yes", " 1", "1x"], []),
    "SLUICE_AMX": (["", "2", "no", "0 ", "1x"], []),
    "SLUICE_TOPOLOGY": (["bogus", "xml:", "xml:/no/such.xml", "synthetic:", "synthetic:junk"],
                        ["-t", "2"]),
    "SLUICE_SIM_H2D_GBS": (["", " 1", "nan", "inf", "-1", "1e999", "1x", "2e6"], SIM_RUN),
    "SLUICE_SIM_LATENCY_NS": (["", "-1", "1x", "99999999999999999999999", "0x10"], SIM_RUN),
    "SLUICE_FAULT_REGION_ALLOC": (["", "-1", "1x", "99999999999999999999999"], SIM_RUN),
    "SLUICE_FAULT_HOST_REGISTER": (["", "-1", "1x"], SIM_RUN),
    "SLUICE_FAULT_COPY": (["", "-1", "1x", " 1"], SIM_RUN),
    "SLUICE_POSTFETCH_ENABLE": (["", "2", " 1", "yes"], ["--device", "sim", "--placement",
                                                         "experts-cpu"]),
    "SLUICE_POSTFETCH_MODE": (["", "fast", "post "], SIM_RUN),
    "SLUICE_POSTFETCH_FORCE_CPU": (["", "2"], SIM_RUN),
    "SLUICE_POSTFETCH_BLOCK_ON_MISS": (["", "2"], SIM_RUN),
    "SLUICE_POSTFETCH_MAX_TRANSFERS": (["", "0", "257", " 5", "5x", "+5", "0x10",
                                        "99999999999999999999999"], SIM_RUN),
    "SLUICE_POSTFETCH_SCRATCHPAD_MB": (["", "-1", "1x", "99999999999999999999999"], SIM_RUN),
    "SLUICE_POSTFETCH_CACHE_MB": (["", "-1", "1x", "99999999999999999999999"], SIM_RUN),
    "SLUICE_POSTFETCH_POLICY": (["", "mru"], SIM_RUN),
    "SLUICE_POSTFETCH_PIN": (["99:99", "0:99", "1:2:3", "a", ":"], SIM_RUN),
    "SLUICE_POSTFETCH_USE_DEDICATED_STREAMS": (["", "2"], SIM_RUN),
    "SLUICE_POSTFETCH_DEBUG": (["", "2"], SIM_RUN),
    "SLUICE_HOTSWAP_ENABLED": (["", "2", "yes", " 1"], []),
    "SLUICE_FAULT_SWAP_ALLOC": (["", "-1", "1x", "0"], ["--hotswap"]),
    "SLUICE_FAULT_SWAP_TOUCH": (["", "-1", "1x", "0"], ["--hotswap"]),
}
# Variables that carry no value to check: a shell command the hot-swap loop runs, and the round
# number it sets for that command.
NOT_VALUES = {"SLUICE_PERPLEXITY_PRE_RELOAD_SCRIPT", "SLUICE_HOTSWAP_ROUND",
              "SLUICE_ROOT"}  # the checkout tools/run runs from (where the scripts are)
# Variables naming files or folders: their cases are in build_env (a missing path each).
PATH_VARS = {"SLUICE_DEMO_MODEL", "SLUICE_PEER_LLAMA_BIN"}
# Injected device faults: the run fails, naming what failed (not a variable's value).
FAULTS = {"SLUICE_FAULT_REGION_ALLOC": ["1"], "SLUICE_FAULT_HOST_REGISTER": ["1"],
          "SLUICE_FAULT_COPY": ["1", "2", "5"]}


def build_env():
    for var, (vals, extra) in ENV_VARS.items():
        for k, v in enumerate(vals):
            cmds = ("eval", "generate", "perplexity") if k == 0 else ("eval",)
            if extra == ["--hotswap"] or var == "SLUICE_HOTSWAP_ENABLED":
                cmds = ("perplexity",)  # read by the hot-swap loop (and serve, below)
            for cmd in cmds:
                case("numbers", [*with_model(cmd, M), *extra], [var], env={var: v},
                     name=f"{var}={v!r} {cmd}")
    # the other commands that run a model (bench decode measures memory bandwidth first: a few)
    for cmd, var, v, extra in (
            ("bench decode", "SLUICE_POSTFETCH_MAX_TRANSFERS", "5x", SIM_RUN),
            ("bench moe", "SLUICE_CPU_ISA", "avx9", []),
            ("place profile", "SLUICE_CPU_ISA", "avx9", []),
            ("place profile", "SLUICE_TOPOLOGY", "synthetic:junk", ["-t", "2"]),
            ("serve", "SLUICE_HOTSWAP_ENABLED", "yes", []),
            ("bench compare", "SLUICE_PEER_LLAMA_BIN", w("no/such/dir"), []),
            ("serve", "SLUICE_CPU_ISA", "avx9", [])):
        if cmd == "bench compare":  # llama.cpp's tools are looked up first
            argv = ["bench", "compare", "-m", M, "-t", "1", "-r", "1"]
        else:
            argv = with_model(cmd, D if cmd in DENSE_ONLY else M)
            argv = argv[:-2] + extra if cmd == "bench decode" else argv + extra
        case("numbers", argv, [var], env={var: v}, name=f"{var}={v!r} {cmd}")
    case("files", ["demo", "--dir", w("demo-env"), "-n", "1"], [w("no/such.gguf")],
         env={"SLUICE_DEMO_MODEL": w("no/such.gguf")}, name="SLUICE_DEMO_MODEL=a missing file")
    for var, vals in FAULTS.items():
        for v in vals:
            case("faults", [*with_model("eval", M), *SIM_RUN], ["fault"], env={var: v},
                 name=f"{var}={v} eval experts-cpu mode=post")


def label(argv):
    return " ".join(map(os.path.basename, argv[:2]))


def build_flags():
    g, p, e = with_model("generate", M), with_model("perplexity", M), with_model("eval", M)
    # contradictions
    for argv, needles in (
            ([*g, "-ngl", "1", "--placement", "cpu"], ["-ngl 1", "--placement cpu"]),
            ([*e, "--placement", "cpu", "--gpu-layers=1"], ["--gpu-layers 1",
                                                            "--placement cpu"]),
            ([*p, "--sched", "mode=post", "--placement", "cpu"], ["--sched mode=post",
                                                                  "--placement cpu"]),
            ([*e, "--numa-node", "0", "--cpus", "0"], ["--numa-node 0", "--cpus 0"]),
            ([*g, "-ctk", "f16", "-ctv", "f32"], ["-ctk f16", "-ctv f32"]),
            ([*e, "-ot", "ffn=CUDA0", "--placement", "cpu"], ["-ot", "--placement cpu"]),
            ([*e, "--gpu-index", IDX, "--placement", "cpu"], ["--gpu-index", "--placement"]),
            ([*g, "-f", PROMPT], ["-p", "-f"]),
            (["place", "show", "-m", M, "-ngl", "1", "--placement", "gpu"], ["-ngl",
                                                                             "--placement"]),
            (["bench", "moe", "-m", M, "--shape", "small"], ["-m", "--shape"]),
            (["bench", "decode", "-m", M, "--shape", "small"], ["-m", "--shape"]),
            (["bench", "decode", "-m", M, "--pdl-ab", "2"], ["--pdl-ab", "--placement"]),
            (["bench", "decode", "-m", M, "--placement", "cpu", "--pdl-ab", "2", "--profile"],
             ["--pdl-ab", "--profile"]),
            (["bench", "decode", "-m", M, "--fusion-ab", "2"], ["--fusion-ab", "--placement"]),
            (["bench", "decode", "-m", M, "--placement", "cpu", "--fusion-ab", "1",
              "--no-fusion"], ["--fusion-ab", "--no-fusion", "exclude"]),
            (["bench", "decode", "-m", M, "--placement", "cpu", "--no-pdl", "--pdl-ab", "1"],
             ["--pdl-ab", "--no-pdl", "exclude"]),
            (["bench", "decode", "-m", M, "--placement", "cpu", "--fusion-ab", "1", "--trace",
              OUT], ["--fusion-ab", "--trace"]),
            (["place", "profile", "-m", D, "-f", TEXT, "-o", OUT, "--placement", "gpu"],
             ["--placement"]),
            (["eval", "-m", M, "--tokens", "1,2", "--json", "--logits-out", "-"],
             ["--logits-out -"])):
        case("flags", argv, needles, rcs=(2,))
    # a flag given twice
    for argv, flag, v in ((g, "-n", "3"), (g, "--temp", "0"), (g, "-p", "x"), (g, "--model", M),
                          (g, "--json", None), (p, "-f", TEXT), (p, "--chunks", "1"),
                          (p, "--logits-out", OUT), (e, "--tokens", "1"), (e, "--device", "sim"),
                          (e, "--io", "pread"), (e, "--sched", "mode=cpu"),
                          (g, "--no-repack", None), (p, "-nr", None),
                          (e, "--trace", OUT), (e, "--max-input-bytes", "9"),
                          (["inspect", M], "--json", None), (["inspect", M], "--checksum", None),
                          (["inspect", M], M, None),
                          (["mkmodel", "-o", OUT], "-o", OUT),
                          (["mkmodel", "-o", OUT], "--layers", "1"),
                          (["mkmodel", "-o", OUT], "--arch", "llama"),
                          (["demo"], "-n", "1"), (["demo"], "--dir", w("folder")),
                          (["place", "show", "-m", M], "--json", None),
                          (["place", "show", "-m", M], "--vram-budget", "1G"),
                          (with_model("place profile", D), "-o", OUT),
                          (with_model("place solve", D), "--stats", STATS),
                          (with_model("place solve", D), "--cpu-gbs", "1"),
                          (["bench", "gguf"], "--read-mib", "1"),
                          (["bench", "alloc"], "--ops", "100"),
                          (["bench", "copy"], "--reps", "1"),
                          (["bench", "kernels"], "--rows", "1"),
                          (with_model("bench decode", M), "-n", "1"),
                          (with_model("bench moe", M), "--tokens", "1")):
        args = [flag] + ([v] if v is not None else [])
        case("flags", [*argv, *args, *args], [flag], rcs=(2,), name=f"{label(argv)} {flag} twice")
    # a flag without its value, an unknown flag, for every command
    for argv, flag in ((g, "-n"), (g, "--temp"), (p, "--kl-divergence-base"),
                       (e, "--logits-out"), (e, "--tokens"), (e, "--sched"), (e, "-m"),
                       (["inspect"], M), (["mkmodel", "-o", OUT], "--layers"),
                       (["mkmodel"], "-o"), (["demo"], "--dir"), (["place", "show"], "-m"),
                       (with_model("place profile", D), "-f"), (with_model("place solve", D),
                                                                 "--stats"),
                       (["bench", "gguf"], "--read-mib"), (["bench", "gguf"], "--dir"),
                       (["bench", "alloc"], "--device"), (["bench", "copy"], "--max-mib"),
                       (["bench", "kernels"], "--types"), (with_model("bench decode", M),
                                                           "--shape"),
                       (with_model("bench moe", M), "--trace")):
        if flag == M:
            case("flags", ["inspect"], ["FILE"], rcs=(2,), name="inspect without a file")
            continue
        case("flags", [*argv, flag], [flag], rcs=(2,), name=f"{label(argv)} {flag} without a value")
    for argv in (g, p, e, ["inspect", M], ["mkmodel", "-o", OUT], ["demo"],
                 ["place", "show", "-m", M], with_model("place profile", D),
                 with_model("place solve", D), ["bench", "gguf"], ["bench", "alloc"],
                 ["bench", "copy"], ["bench", "kernels"], with_model("bench decode", M),
                 with_model("bench moe", M)):
        case("flags", [*argv, "--no-such-flag"], ["--no-such-flag"], rcs=(2,),
             name=f"{label(argv)} --no-such-flag")
    # -nr / --no-repack: one option under two names, and no value
    case("flags", [*e, "-nr", "--no-repack"], ["--no-repack", "-nr", "twice"], rcs=(2,),
         name="eval -nr --no-repack")
    case("flags", [*e, "--no-repack=1"], ["--no-repack", "no value"], rcs=(2,),
         name="eval --no-repack=1")
    case("flags", [*e, "--no-pdl=0"], ["--no-pdl", "no value"], rcs=(2,),
         name="eval --no-pdl=0")
    case("flags", [*e, "--no-fusion=1"], ["--no-fusion", "no value"], rcs=(2,),
         name="eval --no-fusion=1")
    rq = with_model("requant", M)
    for argv, needles in (([*rq[:-4], "--type", "Q9_9", "-o", OUT], ["--type", "Q9_9"]),
                          ([*rq[:3], "--tensor", "(", *rq[5:]], ["("]),
                          ([*rq[:3], "--tensor", "no_such_tensor", *rq[5:]], ["no_such_tensor"]),
                          ([*rq[:-2], "-o", w("d.gguf"), "--in-place"], ["--in-place"]),
                          ([*rq, "--tensor", "x"], ["--tensor"])):
        case("flags", argv, needles, name=f"requant {' '.join(argv[3:])}")
    # several models (issue 13): names, pins and the residency mode are checked before any
    # model opens; a budget the pinned models cannot fit in is refused naming the flag
    for argv, needles in (
            (["serve", "--model", f"a={M}", "--model", f"a={M}"], ["'a' given twice"]),
            (["serve", "--model", M, "--model", f"b={M}"], ["NAME=PATH"]),
            (["serve", "--model", f"={M}"], ["empty NAME"]),
            (["serve", "--model", "a="], ["empty PATH"]),
            (["serve", "--model", f"a b={M}"], ["a b="]),
            (["serve", "--model", f"a={M}", "--pin", "q"], ["--pin 'q'"]),
            (["serve", "--model", f"a={M}", "--pin", "a", "--pin", "a"], ["--pin 'a'"]),
            (["serve", "--model", f"a={M}", "--residency", "maybe"], ["--residency 'maybe'"]),
            (["serve", "--model", f"a={M}", "-a", "x"], ["--alias 'x'"]),
            (["serve", "--model", f"a={M}", "--pin"], ["--pin"]),
            (["serve", "--model", f"a={M}", "--residency"], ["--residency"])):
        case("flags", argv, needles, rcs=(2,), name=f"serve {' '.join(argv[1:])}")
    case("flags", ["serve", "--model", f"a={M}", "--pin", "a", "--device", "sim", "--placement",
                   "gpu", "--vram-budget", "64K"], ["--vram-budget"], rcs=(1,),
         name="serve --pin a --vram-budget 64K")
    # mkmodel's --activation: a value it does not know, an arch without a ReLU FFN, twice
    for argv, needles in ((["mkmodel", "-o", OUT, "--activation", "gelu"],
                           ["--activation", "gelu"]),
                          (["mkmodel", "-o", OUT, "--activation", "relu", "--arch", "qwen3moe"],
                           ["--activation", "qwen3moe"]),
                          (["mkmodel", "-o", OUT, "--activation", "relu", "--activation",
                            "relu"], ["--activation", "twice"]),
                          # --legacy-kv-b: deepseek2's layout only, no value, once
                          (["mkmodel", "-o", OUT, "--legacy-kv-b", "--arch", "llama"],
                           ["--legacy-kv-b", "llama"]),
                          (["mkmodel", "-o", OUT, "--arch", "deepseek2", "--legacy-kv-b=1"],
                           ["--legacy-kv-b", "no value"]),
                          (["mkmodel", "-o", OUT, "--arch", "deepseek2", "--legacy-kv-b",
                            "--legacy-kv-b"], ["--legacy-kv-b", "twice"]),
                          # --biases: no value, not deepseek2's MLA; --longrope: the archs
                          # that read LongRoPE, an original context of at least 2
                          (["mkmodel", "-o", OUT, "--biases=1"], ["--biases", "no value"]),
                          (["mkmodel", "-o", OUT, "--arch", "deepseek2", "--biases"],
                           ["--biases", "deepseek2"]),
                          (["mkmodel", "-o", OUT, "--arch", "qwen3", "--longrope", "64"],
                           ["--longrope", "qwen3"]),
                          (["mkmodel", "-o", OUT, "--arch", "phi3", "--longrope", "1"],
                           ["--longrope 1", "[2, 2^24]"])):
        case("flags", argv, needles, rcs=(2,), name=f"mkmodel {' '.join(argv[3:])}")
    for argv in (["serve", "-m", M, "--port", "0", "--hotswap", "--hotswap"],
                 ["serve", "-m", M, "--port", "0", "--trace", OUT],
                 ["serve", "-m", M, "--chat-template", "no-such-family"]):
        case("flags", argv, [argv[-1] if argv[-1] != OUT else "--trace"], rcs=(2,),
             name=f"serve {' '.join(argv[3:])}")
    for argv, needle in ((["no-such-command"], "no-such-command"), (["bench", "nope"], "nope"),
                         (["place", "nope"], "nope"), ([], "usage")):
        case("flags", argv, [needle], rcs=(2,))


# ---- completeness: the table knows every numeric flag and every SLUICE_* variable ----------

def check_completeness():
    covered = {}
    for cmd, _, flags, _ in numeric_flags():
        covered.setdefault(cmd, set()).update(flags)
    rc, out, _ = run(["--help"])
    listed = set(re.findall(r"^  ([a-z]+) ", out.decode(), re.M))
    expect(listed <= {"demo", "generate", "perplexity", "eval", "place", "inspect", "mkmodel",
                      "bench", "serve", "requant"},
           f"the table covers every command of sluice --help ({listed})")
    for cmd, argv in HELPS.items():
        rc, out, _ = run([*argv, "--help"])
        text = out.decode()
        found = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)[ =](?:N|P|T|S|X|Z|R|C|K|SIZE)\b",
                               text)) - NOT_NUMERIC
        missing = found - covered.get(cmd, set())
        expect(rc == 0 and not missing,
               f"{cmd}: every numeric flag of --help is in the table (missing {sorted(missing)})")
    with open(SLUICE, "rb") as f:
        names = set(re.findall(rb"SLUICE_[A-Z0-9_]*[A-Z0-9]", f.read()))
    names = {n.decode() for n in names} - {"SLUICE_POSTFETCH"}
    missing = names - set(ENV_VARS) - NOT_VALUES - PATH_VARS
    expect(not missing, f"every SLUICE_* variable in the binary is in the table "
                        f"(missing {sorted(missing)})")


# ---- good runs: the same bytes twice -------------------------------------------------------

def good_runs():
    g = lambda name: os.path.join(GOOD, name)
    pairs = [
        ("eval --logits-out", lambda k: ["eval", "-m", M, "--tokens", "1,17,200,5",
                                          "--logits-out", g(f"eval{k}.f32")], "eval{}.f32"),
        ("eval --logits-out (sim, mode=post)", lambda k: [
            "eval", "-m", M, "--tokens", "1,17,200,5", *SIM_RUN, "--logits-out",
            g(f"post{k}.f32")], "post{}.f32"),
        ("perplexity --logits-out", lambda k: [*with_model("perplexity", M), "--logits-out",
                                               g(f"ppl{k}.f32")], "ppl{}.f32"),
        ("mkmodel -o", lambda k: ["mkmodel", "--layers", "1", "--type", "Q4_K", "--dim",
                                  "256", "--ffn", "256", "-t", str(k + 1), "-o",
                                  g(f"mk{k}.gguf")], "mk{}.gguf"),
        ("place profile -o", lambda k: [*with_model("place profile", D)[:-3], g(f"st{k}.gguf"),
                                        "--tokens", "32"], "st{}.gguf"),
        ("place solve -o", lambda k: [*with_model("place solve", D)[:-1], g(f"ix{k}.gpuidx")],
         "ix{}.gpuidx"),
        ("generate --trace", lambda k: ["generate", "-m", M, "-p", "hello", "-n", "3", "--temp",
                                        "0", *SIM_RUN, "--trace", g(f"tr{k}.json")], None),
    ]
    for name, argv_of, out in pairs:
        outs = []
        for k in range(2):
            rc, stdout, err = run(argv_of(k), cwd=GOOD)
            data = b""
            if out:
                p = g(out.format(k))
                data = open(p, "rb").read() if os.path.exists(p) else b""
            outs.append((rc, data or stdout if out else stdout, err))
        same = outs[0][0] == 0 and outs[1][0] == 0 and outs[0][1] == outs[1][1] and outs[0][1]
        expect(bool(same) and not any(s in o[2] for o in outs for s in SANITIZER_TEXT),
               f"[good] {name}: exit 0 twice, the same {len(outs[0][1])} bytes "
               f"({outs[0][2].strip()[:200]})")
    # stdout that is the result: byte-identical too
    for argv in (["generate", "-m", M, "-p", "the quick brown fox", "-n", "8", "--temp", "0"],
                 ["generate", "-m", D, "-f", PROMPT, "-n", "4", "--temp", "0.7", "--seed", "7"],
                 ["eval", "-m", M, "--tokens", "1,2,3", "--logits-out", "-"],
                 ["inspect", M, "--json", "--checksum"],
                 ["place", "show", "-m", M, "--json", "--no-bound"],  # the bound is measured
                 ["eval", "-m", D, "--tokens", "1,2,3", "--placement", "hot-cold", "--device",
                  "sim", "--gpu-index", IDX, "--logits-out", "-"],
                 ["perplexity", "-m", M, "-f", TEXT, "-c", "16", "--chunks", "1",
                  "--kl-divergence-base", BASE]):
        r1, r2 = run(argv, cwd=GOOD), run(argv, cwd=GOOD)
        same = r1[0] == 0 and r2[0] == 0 and r1[1] == r2[1] and r1[1]
        expect(bool(same) and not any(s in r[2] for r in (r1, r2) for s in SANITIZER_TEXT),
               f"[good] {' '.join(os.path.basename(a) for a in argv)}: exit 0 twice, the same "
               f"{len(r1[1])} bytes on stdout ({r1[2].strip()[:200]})")
    rc, out, err = run(["demo", "--dir", GOOD, "-n", "2"], cwd=GOOD)
    expect(rc == 0 and os.path.exists(os.path.join(GOOD, "sluice-default.gguf")),
           f"[good] demo --dir: exit 0 ({err.strip()[:200]})")
    left = [os.path.join(top, n) for top, _, fs in os.walk(ROOT) for n in fs
            if n.endswith(".partial")]
    expect(not left, f"no temporaries left anywhere ({left})")


def main():
    asan = b"AddressSanitizer" in open(SLUICE, "rb").read()
    print(f"binary: {SLUICE} ({'ASan/UBSan build' if asan else 'default build'})", flush=True)
    setup()
    check_completeness()
    build_files()
    build_models()
    build_outputs()
    build_full_disk()
    build_numbers()
    build_env()
    build_flags()
    only = os.environ.get("HOSTILE_ONLY")  # a substring of case names, to rerun a few
    cases = [c for c in CASES if not only or only in f"[{c.cls}] {c.name}"]
    by_class = {}
    for c in cases:
        by_class[c.cls] = by_class.get(c.cls, 0) + 1
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in by_class.items()),
          flush=True)

    parent = os.path.dirname(ROOT)
    parent_before = set(os.listdir(parent)) if os.environ.get("TEST_TMPDIR") else None
    hashes_before, devices_before = hashes(), devices_state()
    snap_before = snapshot()
    t0 = time.monotonic()
    slow, per_class = [], {}
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        for c, (rc, err, touched, dt) in zip(cases, pool.map(run_case, cases)):
            check_case(c, rc, err, touched)
            slow.append((dt, c.name))
            per_class[c.cls] = per_class.get(c.cls, 0) + dt
    print(f"table: {len(cases)} runs in {time.monotonic() - t0:.1f} s (" +
          ", ".join(f"{k} {v:.0f} s" for k, v in per_class.items()) + "); slowest: " +
          "; ".join(f"{n} {dt:.2f}s" for dt, n in sorted(slow, reverse=True)[:3]), flush=True)
    if os.environ.get("HOSTILE_SLOW"):
        for dt, n in sorted(slow, reverse=True)[:int(os.environ["HOSTILE_SLOW"])]:
            print(f"  {dt:6.2f} s  {n}")
    changed = diff(snap_before, snapshot())
    expect(changed == [], f"nothing under the test root changed ({changed[:10]})")
    h = hashes()
    expect(h == hashes_before, f"every input has its bytes ({diff(hashes_before, h)[:10]})")
    expect(devices_state() == devices_before, "/dev/null, /dev/zero, /dev/full are devices")
    if parent_before is not None:
        beside = set(os.listdir(parent)) ^ parent_before
        expect(not beside, f"nothing created beside the test root ({sorted(beside)[:10]})")
    expect(open(SENTINEL).read().startswith("outside"), "the sentinel is intact")
    t0 = time.monotonic()
    good_runs()
    print(f"good runs in {time.monotonic() - t0:.1f} s")
    expect(hashes() == hashes_before, "every input has its bytes after the good runs")
    rc = finish()
    if not rc:
        shutil.rmtree(ROOT)  # kept when something failed, to look at
    return rc


if __name__ == "__main__":
    sys.exit(main())
