"""Manual check: runtime/text/tokenizer on llama.cpp's real test vocabularies.

usage: python tokenizer_real_vocab.py MODELS_DIR SLUICE TOK_TOOL

MODELS_DIR is llama.cpp's models/ folder as PyPI's llama-cpp-python source distribution
vendors it (`pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36`, then
vendor/llama.cpp/models; tools/peer/llama.cpp unpacks it under .peer/): ggml-vocab-qwen2.gguf
and ggml-vocab-phi-3.gguf are the real vocabularies converted by convert_hf_to_gguf.py, and
each .gguf.inp / .gguf.out pair holds test texts and the ids Hugging Face's AutoTokenizer gave
them (convert_hf_to_gguf_update.py). Not a Bazel target: the vocabularies are not in the repo.

Checked, token id for token id, with detokenize(tokenize(text)) == text:
  1. every .inp text against its .out ids (Hugging Face's own tokenizer.json / tokenizer.model),
     for every ggml-vocab-*.gguf with a test pair whose tokenizer.ggml.model Sluice runs
     (llama, gpt2: today llama-spm, phi-3, gpt-2, mpt, llama-bpe, qwen2, qwen35, falcon,
     starcoder, refact, command-r, deepseek-llm, deepseek-coder); the others (bert, gemma4) are
     listed as skipped;
  2. tokenizer_vs_reference.py's multilingual CORPUS (+ Korean and more) against references
     built from the same vocabulary: qwen2 as Hugging Face `tokenizers` with Qwen2's
     tokenizer.json pipeline (NFC, Split(Qwen2 regex, isolated), ByteLevel, BPE with the
     file's merges); phi-3 as `sentencepiece` with a ModelProto of the file's pieces, scores
     and types up to its added tokens (BPE, byte fallback, dummy prefix), as Phi-3's
     tokenizer.model is.
Exit 0 iff all agree.
"""
import glob
import os
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS, SLUICE, TOK_TOOL = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = [sys.argv[0], SLUICE, TOK_TOOL]
sys.path.insert(0, HERE)
import tokenizer_vs_reference as tvr  # noqa: E402  (its references, run_tool and compare)
from tokenizers import normalizers  # noqa: E402

EXTRA = [
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4. \uc11c\uc6b8\uc740 \ud06c\ub2e4!",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01Qwen \u662f\u4e00\u4e2a\u5927\u8bed\u8a00\u6a21\u578b\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u6f22\u5b57",
    "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643\u0645 123 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "for (int i = 0; i < 10; ++i) {\n\tprintf(\"%d\\n\", i);\n}\n",
    "3.14159265358979 2024 1000000 007 x=42",
    "     five spaces\t\t\ttabs\n\n\n\nnewlines   ",
    "\u00e9\u00e8\u00ea\u00eb \u00f1 \u00e7 \u00e5 \u00f8 \u00fc Cr\u00e8me br\u00fbl\u00e9e",
    "\U0001F999\U0001F680\U0001F468\u200d\U0001F4BB emoji \u2728\U0001F389",
]


def cases(name):
    inp = open(os.path.join(MODELS, name + ".inp"), encoding="utf-8").read()
    out = open(os.path.join(MODELS, name + ".out"), encoding="utf-8").read()
    sep = "\n__ggml_vocab_test__\n"
    texts, ids = inp.split(sep)[:-1], out.split("\n")
    ids = [[int(x) for x in line.split()] for line in ids[:len(texts)]]
    return texts, ids


def main():
    texts = tvr.CORPUS + EXTRA
    for inp in sorted(glob.glob(os.path.join(MODELS, "ggml-vocab-*.gguf.inp"))):
        path = inp[:-4]
        name = os.path.basename(path)
        model = tvr.field(tvr.GGUFReader(path), "tokenizer.ggml.model")
        if model not in ("llama", "gpt2"):
            print(f"skipped {name}: tokenizer.ggml.model '{model}'")
            continue
        cin, cwant = cases(name)
        ref = dict(zip(cin, cwant))
        tvr.compare(f"{name}: llama.cpp's HF-made cases", path, cin, lambda t: ref[t],
                    roundtrip=False)
    for name, kind in (("ggml-vocab-qwen2.gguf", "qwen2"), ("ggml-vocab-phi-3.gguf", "phi-3")):
        path = os.path.join(MODELS, name)
        r = tvr.GGUFReader(path)
        tokens = tvr.field(r, "tokenizer.ggml.tokens")
        types = tvr.field(r, "tokenizer.ggml.token_type")
        if kind == "qwen2":
            assert tvr.field(r, "tokenizer.ggml.pre") == "qwen2"
            hf = tvr.hf_from_vocab(tokens, types, tvr.field(r, "tokenizer.ggml.merges"),
                                   "qwen2")
            hf.normalizer = normalizers.NFC()  # Qwen2's tokenizer.json; llama.cpp has none
            nfc = [t for t in texts if unicodedata.normalize("NFC", t) == t]
            tvr.compare(f"{kind}: HF tokenizers, {len(nfc)} NFC texts", path, nfc,
                        lambda t: hf.encode(t, add_special_tokens=False).ids)
        else:
            # tokenizer.model holds the pieces before the added tokens (<|endoftext|> ...,
            # [PAD] fillers); the converter stores <unk> as CONTROL and </s> as USER_DEFINED,
            # where the ModelProto has UNKNOWN and CONTROL
            n = next(i for i in range(3, len(types)) if types[i] in (2, 3, 4))
            unk = int(tvr.field(r, "tokenizer.ggml.unknown_token_id"))
            eos2 = (int(tvr.field(r, "tokenizer.ggml.bos_token_id")), 2)
            ty = [2 if i == unk else 3 if i in eos2 else int(t) for i, t in enumerate(types[:n])]
            sp = tvr.sp_from_vocab(tokens[:n], tvr.field(r, "tokenizer.ggml.scores")[:n], ty)
            tvr.compare(f"{kind}: sentencepiece", path, texts, lambda t: sp.encode(t))
    for f in tvr.failures:
        print("FAIL", f)
    print("PASS" if not tvr.failures else f"FAIL ({len(tvr.failures)})")
    return 1 if tvr.failures else 0


if __name__ == "__main__":
    sys.exit(main())
