"""What the weight-type end-to-end tests (iq4_test, q23_test) share: running the sluice binary,
an eval's logits over fixed tokens, a file's tensor types, and the types its tensors have once
loaded (`place show`: a type the CPU cannot compute as stored shows as F32, converted)."""
import re
import os
import subprocess

import numpy as np
from gguf import GGUFReader

from harness import SLUICE, VOCAB, expect

TOKENS = "1,5,9,33,100,200,7,3,2,45,77,300,12,13,14,15,16,17,18,19,20,21,22,23"
N_TOK = len(TOKENS.split(","))


def run(*args, env=None):
    return subprocess.run([SLUICE, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def logits(model, out, *placement, env=None):
    """`sluice eval` of TOKENS with an F32 KV cache"""
    r = run("eval", "-m", model, "--tokens", TOKENS, "-ctk", "f32", "--logits-out", out,
            *placement, env=env)
    ok = r.returncode == 0 and os.path.getsize(out) == N_TOK * VOCAB * 4
    expect(ok, f"eval {os.path.basename(model)} {' '.join(placement)} "
           f"({r.stderr.strip()[-300:]})")
    return np.fromfile(out, np.float32).reshape(N_TOK, VOCAB) if ok else None


def types_of(path):
    return {t.name: t.tensor_type.name for t in GGUFReader(path).tensors}


def loaded_types(path):
    """{tensor: type once loaded} from `sluice place show` (placement cpu)"""
    r = run("place", "show", "-m", path, "--placement", "cpu")
    expect(r.returncode == 0, f"place show {os.path.basename(path)} ({r.stderr.strip()[-200:]})")
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^(\S+\.weight)\s+(\S+)\s+\d+\s", r.stdout, re.M)}

