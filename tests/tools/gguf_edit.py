"""Where each field of a GGUF v3 file is, and named ways to break one (hostile_table_test).

gguf_layout(data) maps every metadata key and tensor-table field to its byte offset;
truncations() names cut points in every part of a file, corruptions() names one-field
rewrites of a valid model: the GGUF layer must refuse the structural ones, the model loader
the SEMANTIC ones. Pure functions of the file's bytes: nothing here touches the disk.
"""
import struct

GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_layout(data):
    """Offsets of a GGUF v3 file's fields: kv[key] = (key_len_at, type_at, value_at, end) and
    tensors[i] = dict(name, name_at, ndim_at, dims_at, type_at, offset_at); data_at."""
    u32 = lambda at: struct.unpack_from("<I", data, at)[0]
    u64 = lambda at: struct.unpack_from("<Q", data, at)[0]

    def skip_value(t, at):
        if t == 8:
            return at + 8 + u64(at)
        if t == 9:
            et, n = u32(at), u64(at + 4)
            at += 12
            if et in GGUF_SCALAR:
                return at + n * GGUF_SCALAR[et]
            for _ in range(n):
                at = skip_value(et, at)
            return at
        return at + GGUF_SCALAR[t]

    n_tensors, n_kv = u64(8), u64(16)
    at, kv, tensors = 24, {}, []
    for _ in range(n_kv):
        n = u64(at)
        key = data[at + 8:at + 8 + n].decode()
        t_at = at + 8 + n
        end = skip_value(u32(t_at), t_at + 4)
        kv[key] = (at, t_at, t_at + 4, end)
        at = end
    kv_end = at
    for _ in range(n_tensors):
        n = u64(at)
        t = {"name": data[at + 8:at + 8 + n].decode(), "name_at": at, "ndim_at": at + 8 + n}
        nd = u32(t["ndim_at"])
        t["dims_at"] = t["ndim_at"] + 4
        t["type_at"] = t["dims_at"] + 8 * nd
        t["offset_at"] = t["type_at"] + 4
        at = t["offset_at"] + 8
        tensors.append(t)
    align = 32
    return {"kv": kv, "kv_end": kv_end, "tensors": tensors, "tensors_end": at,
            "data_at": (at + align - 1) // align * align}


def u32b(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64b(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def truncations(data, lay):
    """Named cut points: the header, the metadata, the tensor table, the data."""
    kv = lay["kv"]
    arch = kv["general.architecture"]
    toks = kv["tokenizer.ggml.tokens"]
    t0, t1 = lay["tensors"][0], lay["tensors"][len(lay["tensors"]) // 2]
    return {
        "empty": 0, "magic": 2, "version": 6, "tensor-count": 12, "kv-count": 20,
        "first-key-length": 28, "first-key": kv[next(iter(kv))][0] + 10,
        "arch-value": arch[2] + 10, "tokens-array": (toks[2] + toks[3]) // 2,
        "metadata-end": lay["kv_end"] - 1, "tensor-name": t0["name_at"] + 10,
        "tensor-dims": t1["dims_at"] + 3, "tensor-table-end": lay["tensors_end"] - 1,
        "padding": lay["tensors_end"] + 1 if lay["data_at"] > lay["tensors_end"] + 1
        else lay["tensors_end"], "data-start": lay["data_at"],
        "data-middle": (lay["data_at"] + len(data)) // 2, "last-byte": len(data) - 1,
    }


# Corruptions the GGUF layer cannot see (the file is a well-formed GGUF, the model in it is not):
# inspect prints such files; every command that loads the model refuses them.
SEMANTIC = ("arch-unknown", "block-count", "embedding-length", "head-count", "context-length",
            "rms-eps", "bos-", "tensor-dim-0", "expert-")


def corruptions(data, lay, arch):
    """Named [(offset, bytes), ...]: a field (rarely two) of a valid model rewritten."""
    kv, ts = lay["kv"], lay["tensors"]
    first_key = next(iter(kv))
    val = lambda key: kv[key][2]
    t_big = max(ts, key=lambda t: struct.unpack_from("<Q", data, t["dims_at"])[0])
    n_tensors = struct.unpack_from("<Q", data, 8)[0]
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    attn_q = next(t for t in ts if t["name"].endswith("attn_q.weight"))
    n_vocab = struct.unpack_from("<Q", data, val("tokenizer.ggml.tokens") + 4)[0]
    c = {
        "magic": (0, b"GGUX"),
        "magic-zero": (0, b"\0\0\0\0"),
        "version-0": (4, u32b(0)),
        "version-huge": (4, u32b(0xFFFFFFFF)),
        "tensor-count+1": (8, u64b(n_tensors + 1)),
        "tensor-count-huge": (8, u64b(1 << 62)),
        "tensor-count-minus": (8, u64b(-1)),
        "kv-count+1": (16, u64b(n_kv + 1)),
        "kv-count-huge": (16, u64b(1 << 62)),
        "key-length-huge": (kv[first_key][0], u64b(-1)),
        "key-length-past-end": (kv[first_key][0], u64b(len(data))),
        "key-length-0": (kv[first_key][0], u64b(0)),
        "value-type-99": (kv[first_key][1], u32b(99)),
        "value-type-array": (kv["general.architecture"][1], u32b(9)),
        "string-length-huge": (val("general.architecture"), u64b(-2)),
        "string-length-past-end": (val("general.architecture"), u64b(len(data) * 2)),
        "arch-unknown": (val("general.architecture") + 8, b"x" * len(arch)),
        "array-count-huge": (val("tokenizer.ggml.tokens") + 4, u64b(1 << 61)),
        "array-count-0": (val("tokenizer.ggml.tokens") + 4, u64b(0)),
        "array-type-99": (val("tokenizer.ggml.tokens"), u32b(99)),
        "array-type-nested": (val("tokenizer.ggml.token_type"), u32b(9)),
        "token-type-count-short": (val("tokenizer.ggml.token_type") + 4, u64b(7)),
        "duplicate-key": (kv["general.type"][0] + 8, b"general.name"),
        "block-count-huge": (val(f"{arch}.block_count"), u32b(0xFFFFFFFF)),
        "block-count-0": (val(f"{arch}.block_count"), u32b(0)),
        "block-count-2": (val(f"{arch}.block_count"), u32b(2)),
        "embedding-length-0": (val(f"{arch}.embedding_length"), u32b(0)),
        "embedding-length-huge": (val(f"{arch}.embedding_length"), u32b(0x7FFFFFFF)),
        "head-count-0": (val(f"{arch}.attention.head_count"), u32b(0)),
        "head-count-kv-0": (val(f"{arch}.attention.head_count_kv"), u32b(0)),
        "head-count-kv-3": (val(f"{arch}.attention.head_count_kv"), u32b(3)),
        "context-length-0": (val(f"{arch}.context_length"), u32b(0)),
        "rms-eps-nan": (val(f"{arch}.attention.layer_norm_rms_epsilon"), b"\0\0\xc0\x7f"),
        "tensor-name-length-huge": (ts[0]["name_at"], u64b(-1)),
        "tensor-name-duplicate": (attn_q["name_at"] + 8 + len(attn_q["name"]) - 8, b"k"),
        "tensor-ndim-0": (ts[0]["ndim_at"], u32b(0)),
        "tensor-ndim-5": (ts[0]["ndim_at"], u32b(5)),
        "tensor-ndim-huge": (ts[0]["ndim_at"], u32b(0xFFFFFFFF)),
        "tensor-dim-0": (t_big["dims_at"], u64b(0)),
        "tensor-dim+1": (t_big["dims_at"],
                         u64b(struct.unpack_from("<Q", data, t_big["dims_at"])[0] + 1)),
        "tensor-dim-huge": (t_big["dims_at"], u64b(1 << 62)),
        "tensor-dim-overflow": (t_big["dims_at"], u64b(-1)),
        "tensor-type-99": (t_big["type_at"], u32b(99)),
        "tensor-type-q4k": (t_big["type_at"], u32b(12)),
        "tensor-offset-misaligned": (t_big["offset_at"],
                                     u64b(struct.unpack_from("<Q", data, t_big["offset_at"])[0]
                                          + 1)),
        "tensor-offset-past-end": (t_big["offset_at"], u64b(len(data))),
        "tensor-offset-huge": (t_big["offset_at"], u64b(-32)),
    }
    if arch != "llama":
        # a BOS beyond the vocabulary is "not set" (as llama.cpp), an error once it is added
        # (SPM vocabularies, llama's, fall back to their default BOS instead)
        c["bos-out-of-vocab-added"] = [(val("tokenizer.ggml.bos_token_id"), u32b(0xFFFFFFF0)),
                                       (val("tokenizer.ggml.add_bos_token"), b"\1")]
        c["bos-vocab-size-added"] = [(val("tokenizer.ggml.bos_token_id"), u32b(n_vocab)),
                                     (val("tokenizer.ggml.add_bos_token"), b"\1")]
        c["expert-count-0"] = (val(f"{arch}.expert_count"), u32b(0))
        c["expert-used-99"] = (val(f"{arch}.expert_used_count"), u32b(99))
        c["expert-used-0"] = (val(f"{arch}.expert_used_count"), u32b(0))
    return {k: v if isinstance(v, list) else [v] for k, v in c.items()}
