"""Malformed qwen3next files (issue 34), and the rules of the archs added since (qwen35moe,
glm4moe, dots1, bailingmoe2, minimax-m2) that need gguf-py's writer, are refused naming the key
or tensor, never run.

mkmodel --arch qwen3next writes a good F32 file (4 layers: 0-2 Gated DeltaNet, 3 gated
attention; dim 64, 4 value heads and 2 key heads of 16, conv 4); gguf-py copies it with one
corruption each: a missing or mis-shaped tensor, a missing or inconsistent ssm key, a
recurrent_layers list of the wrong length or naming layers the file does not have, and the
legacy ssm_in layout (not supported yet). A recurrent_layers list matching the file gives its
logits.
`sluice eval` on each must exit non-zero with a message holding the named strings; the good file
evaluates.

usage: arch_broken_test.py SLUICE_BINARY
"""
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np

FAILURES = []
TMP = tempfile.mkdtemp(prefix="arch_broken.", dir=os.environ.get("TEST_TMPDIR"))


def expect(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILURES.append(msg)


def copy(src, dst, drop_key=None, set_key=None, drop_tensor=None, reshape=None, add_tensor=None,
         add_bools=None, add_ints=None):
    """src with one change: a key dropped or set (u32, added when src lacks it), a tensor
    dropped, one cut to its first half of rows (reshape), one added (name, array), a bool or
    int32 array key added (with drop_key: replaced)."""
    rd = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, str(rd.fields["general.architecture"].contents()))
    for f in rd.fields.values():
        if f.name.startswith("GGUF.") or f.name in ("general.architecture", drop_key):
            continue
        if set_key and f.name == set_key[0]:
            w.add_uint32(f.name, set_key[1])
            set_key = None
        elif f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(f.name, f.contents(), f.types[0])
    if set_key:  # not in src: added
        w.add_uint32(set_key[0], set_key[1])
    if add_bools:
        w.add_array(add_bools[0], add_bools[1])
    if add_ints:
        w.add_array(add_ints[0], [int(x) for x in add_ints[1]])
    for t in rd.tensors:
        if t.name == drop_tensor:
            continue
        a = np.array(t.data)
        if t.name == reshape:
            a = a[: a.shape[0] // 2]
        w.add_tensor(t.name, a)
    if add_tensor:
        w.add_tensor(*add_tensor)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def evaluate(sluice, path):
    return subprocess.run([sluice, "eval", "-m", path, "--tokens", "1,2,3", "--placement",
                           "cpu"], capture_output=True, text=True, timeout=120)


def refusals(sluice, arch, cases):
    """mkmodel's good file of arch evaluates; each (label, change, want) copy of it is refused
    naming every string of want."""
    good = os.path.join(TMP, f"{arch}.gguf")
    r = subprocess.run([sluice, "mkmodel", "--arch", arch, "--type", "F32", "-o", good],
                       capture_output=True, text=True)
    expect(r.returncode == 0, f"mkmodel --arch {arch}: {r.stderr.strip()}")
    r = evaluate(sluice, good)
    expect(r.returncode == 0, f"the good {arch} file evaluates ({r.stderr.strip()[:200]})")
    for i, (label, change, want) in enumerate(cases):
        bad = os.path.join(TMP, f"{arch}-bad{i}.gguf")
        copy(good, bad, **change)
        r = evaluate(sluice, bad)
        msg = r.stderr.strip()
        expect(r.returncode != 0 and all(w in msg for w in want) and "Traceback" not in msg,
               f"{arch} {label}: refused naming {want} (rc {r.returncode}: {msg[:240]})")


def newer_archs(sluice):
    """qwen35moe: its rope sections (required; 1 to 4 integers, none negative, a total > 0), its
    split beta / alpha; glm4moe: M-RoPE sections (GLM-4.xV: past the head refused; covering
    the pairs: NEOX's logits);
    qwen3moe: an MTP block its llama.cpp loader does not know, groups not dividing the experts;
    dots1: k/v heads as many as q heads, whole-head rotary, the gating key; bailingmoe2: the
    gating key; qwen3vlmoe: its sections (required), whole-head rotary; ernie4_5-moe: its MoE
    layer step (required, 1); hunyuan-moe: its expert key, whole-head rotary, no selection
    bias; minimax-m2: the gating key and the selection bias."""
    a = "qwen35moe."
    sec = a + "rope.dimension_sections"
    refusals(sluice, "qwen35moe", [
        ("sections missing", dict(drop_key=sec), [sec, "missing"]),
        ("sections negative", dict(drop_key=sec, add_ints=(sec, [1, -1, 0, 0])),
         [sec, "expected >= 0"]),
        ("sections of 5 entries", dict(drop_key=sec, add_ints=(sec, [1, 1, 0, 0, 0])),
         [sec, "1 to 4 integers"]),
        ("sections totalling 0", dict(drop_key=sec, add_ints=(sec, [0, 0, 0, 0])),
         [sec, "total 0"]),
        ("ssm_alpha missing", dict(drop_tensor="blk.1.ssm_alpha.weight"),
         ["blk.1.ssm_alpha.weight", "[64, 4]"]),
        ("ssm_ba in a qwen35moe file", dict(add_tensor=("blk.0.ssm_ba.weight",
                                                        np.zeros((8, 64), np.float32))),
         ["blk.0.ssm_ba.weight", "not used"]),
    ])
    sec = "glm4moe.rope.dimension_sections"
    refusals(sluice, "glm4moe", [
        ("M-RoPE past the head", dict(add_ints=(sec, [8, 12, 12, 0])), [sec, "total 32"]),
        ("exp_probs_b missing", dict(drop_tensor="blk.1.exp_probs_b.bias"),
         ["blk.1.exp_probs_b.bias", "missing"]),
    ])
    # GLM-4.xV's M-RoPE sections on text: covering the 4 rotated pairs, NEOX's rotation (the
    # logits of the file without them); leaving pair 3 to the fourth component (position 0
    # for text), that pair turns by angle 0 (a file of llama.cpp's rope base 1e6 barely
    # turns it: the file loads and runs; logits_vs_reference holds the rule on qwen3vlmoe)
    good = os.path.join(TMP, "glm4moe.gguf")
    outs = []
    for i, sections in enumerate((None, [2, 1, 1, 0], [1, 1, 1, 1])):
        path = good if sections is None else os.path.join(TMP, f"glm4moe-mrope{i}.gguf")
        if sections is not None:
            copy(good, path, add_ints=(sec, sections))
        out = path + ".f32"
        r = subprocess.run([sluice, "eval", "-m", path, "--tokens", "1,2,3,4,5", "--placement",
                            "cpu", "--logits-out", out], capture_output=True, text=True)
        outs.append(np.fromfile(out, np.float32) if r.returncode == 0 else None)
    expect(outs[0] is not None and outs[1] is not None and np.array_equal(outs[0], outs[1]),
           "glm4moe with M-RoPE sections [2, 1, 1, 0]: the logits of the file without them")
    expect(outs[2] is not None, "glm4moe with M-RoPE sections [1, 1, 1, 1] runs")
    # the common rules on an arch without MTP or group keys of its own: qwen3moe
    refusals(sluice, "qwen3moe", [
        ("an MTP block its loader does not know", dict(set_key=("qwen3moe.nextn_predict_layers",
                                                                1)),
         ["blk.1.", "not used"]),
        ("expert groups not dividing the experts", dict(set_key=("qwen3moe.expert_group_count",
                                                                 3)),
         ["qwen3moe.expert_group_count", "does not divide"]),
    ])
    # q sized by the embedding (llama.cpp's qwen2 / qwen2moe / olmoe / phi3 / bailingmoe2
    # loaders): heads x key_length past embedding_length is refused, as llama.cpp refuses it
    good = os.path.join(TMP, "qwen2moe.gguf")
    r = subprocess.run([sluice, "mkmodel", "--arch", "qwen2moe", "-o", good], capture_output=True,
                       text=True)
    expect(r.returncode == 0, f"mkmodel --arch qwen2moe: {r.stderr.strip()}")
    half = os.path.join(TMP, "qwen2moe-kl.gguf")
    bad = os.path.join(TMP, "qwen2moe-klvl.gguf")
    copy(good, half, set_key=("qwen2moe.attention.key_length", 32))
    copy(half, bad, set_key=("qwen2moe.attention.value_length", 32))
    r = evaluate(sluice, bad)
    want = ["qwen2moe.attention.key_length", "expected embedding_length / head_count = 16"]
    expect(r.returncode != 0 and all(w in r.stderr for w in want),
           f"qwen2moe with 4 heads of 32 on 64: refused naming {want} "
           f"(rc {r.returncode}: {r.stderr.strip()[:240]})")
    refusals(sluice, "dots1", [
        ("fewer k/v heads", dict(set_key=("dots1.attention.head_count_kv", 2)),
         ["dots1.attention.head_count_kv", "expected head_count 4"]),
        ("partial rotary", dict(set_key=("dots1.rope.dimension_count", 8)),
         ["dots1.rope.dimension_count", "whole heads"]),
        ("gating key missing", dict(drop_key="dots1.expert_gating_func"),
         ["dots1.expert_gating_func", "missing"]),
    ])
    refusals(sluice, "bailingmoe2", [
        ("gating key missing", dict(drop_key="bailingmoe2.expert_gating_func"),
         ["bailingmoe2.expert_gating_func", "missing"]),
        ("gating 0", dict(set_key=("bailingmoe2.expert_gating_func", 0)),
         ["bailingmoe2.expert_gating_func", "outside [1, 2]"]),
        ("shared count missing", dict(drop_key="bailingmoe2.expert_shared_count"),
         ["bailingmoe2.expert_shared_count", "missing"]),
    ])
    sec = "qwen3vlmoe.rope.dimension_sections"
    refusals(sluice, "qwen3vlmoe", [
        ("sections missing", dict(drop_key=sec), [sec, "missing"]),
        ("partial rotary", dict(set_key=("qwen3vlmoe.rope.dimension_count", 8)),
         ["qwen3vlmoe.rope.dimension_count", "whole heads"]),
    ])
    refusals(sluice, "ernie4_5-moe", [
        ("interleaved MoE layers", dict(set_key=("ernie4_5-moe.interleave_moe_layer_step", 2)),
         ["ernie4_5-moe.interleave_moe_layer_step", "only 1"]),
        ("interleave step missing", dict(drop_key="ernie4_5-moe.interleave_moe_layer_step"),
         ["ernie4_5-moe.interleave_moe_layer_step", "missing"]),
    ])
    refusals(sluice, "hunyuan-moe", [
        ("expert width key missing", dict(drop_key="hunyuan-moe.expert_feed_forward_length"),
         ["hunyuan-moe.expert_feed_forward_length", "missing"]),
        ("partial rotary", dict(set_key=("hunyuan-moe.rope.dimension_count", 8)),
         ["hunyuan-moe.rope.dimension_count", "whole heads"]),
        ("a selection bias its graph has none of",
         dict(add_tensor=("blk.0.exp_probs_b.bias", np.zeros(8, np.float32))),
         ["blk.0.exp_probs_b.bias", "not used"]),
    ])
    refusals(sluice, "minimax-m2", [
        ("gating key missing", dict(drop_key="minimax-m2.expert_gating_func"),
         ["minimax-m2.expert_gating_func", "missing"]),
        ("exp_probs_b missing", dict(drop_tensor="blk.0.exp_probs_b.bias"),
         ["blk.0.exp_probs_b.bias", "missing"]),
    ])


def main():
    sluice = sys.argv[1]
    good = os.path.join(TMP, "good.gguf")
    r = subprocess.run([sluice, "mkmodel", "--arch", "qwen3next", "--type", "F32", "-o", good],
                       capture_output=True, text=True)
    expect(r.returncode == 0, f"mkmodel --arch qwen3next: {r.stderr.strip()}")
    r = evaluate(sluice, good)
    expect(r.returncode == 0, f"the good file evaluates ({r.stderr.strip()[:200]})")
    a = "qwen3next."
    cases = [
        ("ssm_a missing", dict(drop_tensor="blk.0.ssm_a"), ["blk.0.ssm_a", "[4]"]),
        ("conv1d mis-shaped", dict(reshape="blk.1.ssm_conv1d.weight"),
         ["blk.1.ssm_conv1d.weight", "expected [4, 128]"]),
        ("gated q mis-shaped", dict(reshape="blk.3.attn_q.weight"),
         ["blk.3.attn_q.weight", "expected [64, 128]"]),
        ("ssm_out missing", dict(drop_tensor="blk.2.ssm_out.weight"),
         ["blk.2.ssm_out.weight", "[64, 64]"]),
        ("shared-expert gate missing", dict(drop_tensor="blk.1.ffn_gate_inp_shexp.weight"),
         ["blk.1.ffn_gate_inp_shexp.weight"]),
        ("state_size missing", dict(drop_key=a + "ssm.state_size"),
         [a + "ssm.state_size", "missing"]),
        ("inner_size inconsistent", dict(set_key=(a + "ssm.inner_size", 48)),
         [a + "ssm.inner_size", "48"]),
        ("value heads not a multiple of key heads", dict(set_key=(a + "ssm.time_step_rank", 3)),
         [a + "ssm.time_step_rank", "group_count"]),
        ("full_attention_interval 0", dict(set_key=(a + "full_attention_interval", 0)),
         [a + "full_attention_interval", "outside"]),
        ("recurrent_layers too short", dict(add_bools=(a + "attention.recurrent_layers",
                                                       [True, True, True])),
         [a + "attention.recurrent_layers", "3 entries, expected block_count 4"]),
        ("recurrent_layers naming an attention layer the file lacks",
         dict(add_bools=(a + "attention.recurrent_layers", [False, True, True, False])),
         ["blk.0.attn_q.weight", "missing"]),
        ("legacy ssm_in", dict(add_tensor=("blk.0.ssm_in.weight",
                                           np.zeros((256, 64), np.float32))),
         ["blk.0.ssm_in.weight", "not supported"]),
    ]
    # recurrent_layers as the file is laid out (llama.cpp's list form): the same logits
    same = os.path.join(TMP, "recurrent_layers.gguf")
    copy(good, same, add_bools=(a + "attention.recurrent_layers", [True, True, True, False]))
    outs = []
    for path in (good, same):
        out = path + ".f32"
        r = subprocess.run([sluice, "eval", "-m", path, "--tokens", "1,2,3,4,5", "--placement",
                            "cpu", "--logits-out", out], capture_output=True, text=True)
        outs.append(np.fromfile(out, np.float32) if r.returncode == 0 else None)
    expect(outs[0] is not None and outs[1] is not None and np.array_equal(outs[0], outs[1]),
           "recurrent_layers [T, T, T, F]: the logits of full_attention_interval 4")
    for i, (label, change, want) in enumerate(cases):
        bad = os.path.join(TMP, f"bad{i}.gguf")
        copy(good, bad, **change)
        r = evaluate(sluice, bad)
        msg = r.stderr.strip()
        expect(r.returncode != 0 and all(w in msg for w in want) and "Traceback" not in msg,
               f"{label}: refused naming {want} (rc {r.returncode}: {msg[:240]})")
    newer_archs(sluice)
    print(f"{'FAILED' if FAILURES else 'passed'}: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
