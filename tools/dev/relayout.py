#!/usr/bin/env python3
"""Issue 27's folder move: git mv by rule + rewrite of paths and Bazel labels in every text file.
Deterministic (a pure function of the tree), so it can be re-run on a branch made before the move.
BUILD files are not split by this script (done by hand in the same commit)."""
import os, re, subprocess, sys

def files():
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if f]

RT_TEXT = {"bigram_heap_tmpl.h", "pretok.c", "tok_bpe.c", "tok_spm.c", "tokenizer.c", "tokenizer.h",
           "unicode.c", "unicode.h", "unicode_tables.c", "vocab_impl.h", "sampler.c", "text_api.c",
           "model_vocab.h"}
RT_SERVE = {"runtime.c", "runtime_impl.h", "runtime_reload.c"}
RT_BASE = {"status.c", "status.h", "parse.c", "parse.h", "file.c", "file.h", "prng.h"}
SCHED_POLICY = ("placement", "residency", "swap", "hotcold_solve", "gpuidx", "neuron_stats")
SCHED_MOE = ("moe", "moe_cpu", "moe_impl", "expert_ffn", "fetch", "fetch_state", "fetch_options",
             "fetch_impl", "cache", "stats", "trace", "ffn_split")
TOOLS_COMMON = ("cli", "cli_util", "json", "json_doc", "fileio", "model_flags", "sampling_flags",
                "subproc", "progress", "model_text", "peer_llama")

def target(path):
    d, b = os.path.split(path)
    stem = b.split(".")[0]
    if d == "runtime/device":
        return "base/device/" + b
    if d == "runtime":
        if b in RT_BASE: return "base/" + b
        if b in RT_TEXT: return "runtime/text/" + b
        if b in RT_SERVE: return "runtime/serve/" + b
        if b in ("sluice.h", "BUILD"): return None
        return "runtime/engine/" + b
    if d == "scheduler" and b != "BUILD":
        if stem in SCHED_POLICY: return "scheduler/policy/" + b
        if stem in SCHED_MOE: return "scheduler/moe/" + b
        return None
    if d == "tools/cli":
        if stem.startswith("synth"): return "tools/synth/" + b
        if stem.startswith("bench"): return "tools/bench/" + b
        if stem.startswith("serve"): return "tools/serve/" + b
        if stem in TOOLS_COMMON: return "tools/common/" + b
        return "tools/commands/" + b
    return None

LABELS = [
    ("//runtime/device", "//base/device"),
    ("//runtime:status", "//base:status"), ("//runtime:parse", "//base:parse"),
    ("//runtime:file", "//base:file"), ("//runtime:prng", "//base:prng"),
] + [("//scheduler:" + t, "//scheduler/policy:" + t) for t in SCHED_POLICY] + [
    ("//scheduler:moe", "//scheduler/moe"), ("//scheduler:fetch", "//scheduler/moe:fetch"),
    ("//scheduler:ffn_split", "//scheduler/moe:ffn_split"),
]

def main():
    fs = files()
    moves = {f: target(f) for f in fs}
    moves = {a: b for a, b in moves.items() if b}
    for a, b in sorted(moves.items()):
        os.makedirs(os.path.dirname(b), exist_ok=True)
        subprocess.run(["git", "mv", a, b], check=True)
    # Longest paths first so that runtime/device/ is taken before runtime/.
    pairs = sorted(moves.items(), key=lambda p: -len(p[0]))
    pat = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(a) for a, _ in pairs) + r")(?![\w.-])")
    dirpairs = [("runtime/device/", "base/device/"), ("tools/cli/", "tools/commands/")]
    for f in files():
        if f.startswith("bench/results/") or f.startswith("tests/fuzz/corpus/"): continue
        try:
            with open(f, encoding="utf-8") as h: s = h.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        t = pat.sub(lambda m: moves[m.group(1)], s)
        for a, b in LABELS:
            t = re.sub(re.escape(a) + r"(?![\w])", b, t)
        for a, b in dirpairs:
            t = re.sub(r"(?<![\w/.-])" + re.escape(a), b, t)
        if t != s:
            with open(f, "w", encoding="utf-8") as h: h.write(t)

if __name__ == "__main__":
    main()
