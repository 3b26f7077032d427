"""Regenerates the GGUF fuzz seed corpus (tests/fuzz/corpus) with gguf-py, llama.cpp's own
writer: small valid files covering every value type, nested arrays, shards' split keys,
several tensor types and a zero-size tensor; and the tokenizer fuzz seeds
(tests/fuzz/corpus_tokenizer: byte 0 a pre-tokenizer table row or SPM, then a text; each row
gets one of the texts). Run: python3 tests/fuzz/make_corpus.py"""
import os
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as V

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(out, exist_ok=True)


def write(name, fill, alignment=None):
    path = os.path.join(out, name)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_types(w):
    w.add_key_value("v.u8", 1, V.UINT8)
    w.add_key_value("v.i8", -1, V.INT8)
    w.add_key_value("v.u16", 2, V.UINT16)
    w.add_key_value("v.i16", -2, V.INT16)
    w.add_key_value("v.u32", 3, V.UINT32)
    w.add_key_value("v.i32", -3, V.INT32)
    w.add_key_value("v.f32", 0.5, V.FLOAT32)
    w.add_key_value("v.bool", True, V.BOOL)
    w.add_key_value("v.str", "text", V.STRING)
    w.add_key_value("v.u64", 4, V.UINT64)
    w.add_key_value("v.i64", -4, V.INT64)
    w.add_key_value("v.f64", 0.25, V.FLOAT64)
    w.add_array("v.arr", [1, 2, 3])
    w.add_array("v.sarr", ["a", "bb", ""])
    w.add_array("v.nested", [[1, 2], [3]])
    w.add_tensor("t.f32", np.arange(64, dtype=np.float32).reshape(2, 32))


def tensors(w):
    w.add_uint16("split.no", 0)
    w.add_uint16("split.count", 1)
    w.add_int32("split.tensors.count", 4)
    w.add_tensor("a", np.ones((4, 8), dtype=np.float16))
    w.add_tensor("q", np.zeros((2, 34), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("k", np.zeros((1, 144), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("z", np.zeros((0, 4), dtype=np.float32))


def vocab(w):
    w.add_token_list([f"tok{i}" for i in range(200)])
    w.add_token_scores([float(i) for i in range(200)])


# Tokenizer seeds: contractions (U+017F too), numbers, whitespace runs, CJK / Hangul / emoji /
# marks, every special token kind, invalid UTF-8 and surrogates, U+2581, punctuation spacing.
TOK_TEXTS = [
    b"Hello world, the model's 12345 tokens!!\n\n  ok",
    b"I'm YOU'RE x'\xc5\xbfx it's\t\tdone   \r\n",
    "caf\u00e9 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \uc548\ub155 \U0001F600\u200d \u0301x"
    .encode(),
    b"<s>a<|im_start|>user<tool>x</s><|endoftext|><unk>",
    b"\xff\xfe\xc3(\xe6\x97 \xed\xa0\x80 \xf4\x90\x80\x80",
    b"   \n\n\n" + b" " * 600 + b"x",
    "\u2581a \u2581\u2581b".encode(),
    b"hello 'S 'LL dog.  , ! ?",
]
TOK_CHOICES = 79  # rows of runtime/text/pretok_table.c, then SPM (the fuzz target wraps around)
tok_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_tokenizer")
os.makedirs(tok_out, exist_ok=True)
for i, text in enumerate(TOK_TEXTS):
    for row in range(i, TOK_CHOICES, len(TOK_TEXTS)):
        with open(os.path.join(tok_out, f"r{row:02d}_t{i}"), "wb") as f:
            f.write(bytes([row]) + text)

write("all_types.gguf", all_types)
write("tensors_align64.gguf", tensors, alignment=64)
write("vocab.gguf", vocab)
print("corpus written to", out, "and", tok_out, file=sys.stderr)
