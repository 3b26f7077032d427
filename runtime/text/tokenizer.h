/* tokenizer: a model's vocabulary and its tokenizer, read from GGUF metadata, behaving as
 * llama.cpp's llama-vocab.cpp does for the two tokenizer families Sluice supports:
 *
 *   tokenizer.ggml.model "llama" (SPM, SentencePiece-style): spaces become U+2581, a leading
 *     one is added (tokenizer.ggml.add_space_prefix, default true), adjacent symbols merge by
 *     highest piece score (leftmost on ties); characters that never form a piece fall back to
 *     <0xNN> byte tokens (the unknown token if the vocabulary has none).
 *   tokenizer.ggml.model "gpt2" (byte-level BPE): the text is split by the pre-tokenizer named
 *     in tokenizer.ggml.pre, each word's bytes are mapped to GPT-2's byte alphabet and merged by
 *     merge rank (tokenizer.ggml.merges, lower first, leftmost on ties).
 *     Pre-tokenizers: the names of runtime/text/pretok_table.c, llama.cpp's for byte-level
 *     vocabularies: "llama3" "llama-bpe" ... -> llama3; "qwen2" "deepseek-r1-qwen" ... ->
 *     qwen2; "gpt-2" "olmo" ... -> gpt2; "gpt-4o" "llama4" -> o200k (see pretok.c); the
 *     others (deepseek-v3, kimi-k2, tekken, ...) run their tokenizer.json regexes;
 *     "default" or absent -> llama.cpp's default 4-regex chain. Others: SL_ERR_UNSUPPORTED.
 *
 * Special tokens (types CONTROL and USER_DEFINED, and UNKNOWN) are cut out of the text before
 * pre-tokenization, longest text first (llama.cpp's tokenizer_st_partition). With
 * parse_special false, CONTROL and UNKNOWN tokens are treated as plain text but USER_DEFINED
 * ones are still matched, as in llama.cpp and HF tokenizers. As llama.cpp, gpt-oss's harmony
 * markers <|start|> <|channel|> <|message|> <|constrain|> are USER_DEFINED, and <|end|> is not
 * end-of-generation when <|return|> and <|call|> are.
 *
 * Contract: a loaded sl_vocab copies what it needs (it does not reference the sl_gguf after
 * load), is immutable, and every function below may be called from several threads at once.
 * Token ids are int32 in [0, n_tokens); -1 means "none". Buffers are (ptr, len): text may hold
 * any bytes, including NUL and invalid UTF-8 (which becomes U+FFFD for BPE, as in llama.cpp).
 */
#ifndef SL_RUNTIME_TOKENIZER_H
#define SL_RUNTIME_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "base/status.h"

typedef struct sl_vocab sl_vocab;

typedef enum sl_vocab_kind { SL_VOCAB_SPM = 1, SL_VOCAB_BPE = 2 } sl_vocab_kind;

/* tokenizer.ggml.token_type values (llama.h enum llama_token_type). */
typedef enum sl_token_type {
    SL_TOKEN_UNDEFINED = 0,
    SL_TOKEN_NORMAL = 1,
    SL_TOKEN_UNKNOWN = 2,
    SL_TOKEN_CONTROL = 3,
    SL_TOKEN_USER_DEFINED = 4,
    SL_TOKEN_UNUSED = 5,
    SL_TOKEN_BYTE = 6
} sl_token_type;

typedef enum sl_pretok {
    SL_PRETOK_NONE = 0,     /* SPM */
    SL_PRETOK_DEFAULT = 1,  /* llama.cpp's 4-regex default chain */
    SL_PRETOK_GPT2 = 2,     /* GPT-2 regex (gpt-2, olmo, phi-2, ...) */
    SL_PRETOK_LLAMA3 = 3,   /* llama3 regex, numbers in groups of 1-3, merges ignored for words
                               that are whole tokens */
    SL_PRETOK_QWEN2 = 4,    /* llama3 regex with single-digit numbers */
    SL_PRETOK_O200K = 5,    /* o200k regex ("gpt-4o": gpt-oss, GPT-4o, Llama 4) */
    SL_PRETOK_REGEX = 6     /* a list of regexes from the name's table row (deepseek-v3, ...) */
} sl_pretok;

/* Reads the tokenizer.ggml.* keys of g. Errors: SL_ERR_UNSUPPORTED naming an unknown
 * tokenizer.ggml.model or tokenizer.ggml.pre value; SL_ERR_FORMAT/SL_ERR_TYPE naming the key for
 * malformed arrays (wrong element type, short scores/token_type, duplicate tokens, a special
 * token id out of range when add_bos/add_eos needs it); SL_ERR_NOT_FOUND without
 * tokenizer.ggml.model or tokens. *out is NULL on failure. Free with sl_vocab_free. */
sl_status sl_vocab_load(const sl_gguf *g, sl_vocab **out, sl_error *err);
void sl_vocab_free(sl_vocab *v); /* NULL is allowed */

int32_t sl_vocab_n_tokens(const sl_vocab *v);
sl_vocab_kind sl_vocab_kind_get(const sl_vocab *v);
sl_pretok sl_vocab_pretok(const sl_vocab *v);
/* Special ids, -1 if absent. SPM defaults (no key): bos 1, eos 2, unk 0, as llama.cpp. eot is
 * tokenizer.ggml.eot_token_id or else found by text ("<|eot_id|>", "<|im_end|>", ...). */
int32_t sl_vocab_bos(const sl_vocab *v);
int32_t sl_vocab_eos(const sl_vocab *v);
int32_t sl_vocab_eot(const sl_vocab *v);
int32_t sl_vocab_unk(const sl_vocab *v);
int32_t sl_vocab_pad(const sl_vocab *v);
bool sl_vocab_add_bos(const sl_vocab *v); /* tokenizer.ggml.add_bos_token or the family default */
bool sl_vocab_add_eos(const sl_vocab *v);
/* FIM token `which` (0..5: pre, suf, mid, pad, rep, sep as sluice.h's sl_fim), or -1. */
int32_t sl_vocab_fim(const sl_vocab *v, int which);
/* End of generation: eos, eot, eom, the end-of-turn tokens llama.cpp recognises by text and
 * the FIM pad, repo and separator tokens. */
bool sl_vocab_is_eog(const sl_vocab *v, int32_t token);

/* Stored text of a token (not NUL-terminated inside; *len its bytes); NULL if out of range. */
const char *sl_vocab_token_text(const sl_vocab *v, int32_t token, size_t *len);
sl_token_type sl_vocab_token_type(const sl_vocab *v, int32_t token); /* UNDEFINED if out of range */
float sl_vocab_token_score(const sl_vocab *v, int32_t token);       /* 0 if out of range */
/* Id of the token whose stored text is exactly text[0, len), or -1. */
int32_t sl_vocab_find(const sl_vocab *v, const char *text, size_t len);

/* Tokenizes text[0, len). add_special: BOS first if add_bos, EOS last if add_eos.
 * parse_special: match CONTROL tokens written in the text. Writes min(cap, count) tokens;
 * *n_out = count. SL_ERR_RANGE if count > cap (call again with *n_out). */
sl_status sl_vocab_tokenize(const sl_vocab *v, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *tokens, size_t cap, size_t *n_out,
                            sl_error *err);
/* Text of one token: SPM pieces with U+2581 turned back into spaces, <0xNN> tokens as their
 * byte, BPE tokens mapped from GPT-2's alphabet back to bytes; CONTROL and UNKNOWN tokens
 * give "" unless render_special (then their stored text); UNUSED/UNDEFINED give "".
 * *n_out = the piece's bytes; written if it fits in cap (n_out <= cap), NUL-terminated when
 * there is room (n_out < cap), else SL_ERR_RANGE and nothing is written. SL_ERR_RANGE for a
 * token out of range. */
sl_status sl_vocab_token_to_piece(const sl_vocab *v, int32_t token, bool render_special,
                                  char *buf, size_t cap, size_t *n_out, sl_error *err);
/* Text of a token sequence, llama.cpp's llama_detokenize(remove_special = true,
 * unparse_special = false): a leading BOS (if add_bos) and trailing EOS (if add_eos) are
 * dropped, control tokens give "", and with add_space_prefix (SPM) one leading space of the
 * first remaining piece is removed. (llama.cpp keeps that space when it dropped a BOS;
 * SentencePiece's DecodeIds and HF remove it, and so do we, so that text -> tokens -> text is
 * the identity with or without add_special.) Where llama.cpp sets clean_spaces for the
 * tokenizer.ggml.pre name (gpt-2, llama3, default, falcon, ...; the table's flags) its clean-up
 * pass runs (" ." -> ".", " 's" -> "'s", ...); the others (qwen2, gpt-4o, deepseek-v3, ...)
 * and SPM keep the text as is. Same buffer rules as sl_vocab_token_to_piece. */
sl_status sl_vocab_detokenize(const sl_vocab *v, const int32_t *tokens, size_t n, char *buf,
                              size_t cap, size_t *n_out, sl_error *err);

#endif
