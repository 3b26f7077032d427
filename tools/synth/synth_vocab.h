/* Private to tools/commands/synth*.c: the synthetic tokenizer vocabularies.
 *
 * SentencePiece style (llama, mixtral; tokenizer.ggml.model "llama"):
 *   0 "<unk>" (UNKNOWN 2), 1 "<s>", 2 "</s>" (CONTROL 3), 3..258 "<0x00>".."<0xFF>" (BYTE 6),
 *   then NORMAL (1) pieces: "▁", common words "▁the" ..., letters, digits, punctuation, then
 *   "▁a".."▁z" and lower-case strings in length-then-lexicographic order ("ab", "▁ab", ...).
 *   Scores: 0 for specials and bytes, -(rank) for pieces, so earlier pieces are preferred.
 * Phi-3 SentencePiece style (phi3; "llama"): llama's, the last id being Phi-3's added CONTROL
 *   token "<|endoftext|>" (score 0). llama.cpp's vocabulary loader needs it, with "<unk>", "<s>"
 *   and "</s>", in a file whose general.name contains "phi3" or "phi-3" (it sets their
 *   attributes with token_to_id.at() and fails to load the model without them).
 * Gemma SentencePiece style (gemma3; "llama"): Gemma's special ids 0 "<pad>", 1 "<eos>",
 *   2 "<bos>" (CONTROL 3), 3 "<unk>" (UNKNOWN 2), then bytes 4..259 and pieces as above.
 * GPT-2 byte-level BPE style (qwen3moe, qwen2moe, olmoe; "gpt2"):
 *   0..255: GPT-2's bytes_to_unicode symbol of byte b (so id == byte), then tokens made by
 *   merges, each the concatenation of two earlier tokens ("Ġ t" -> "Ġt", "Ġt h" -> "Ġth", ...),
 *   merges listed in creation order (= BPE rank); the last three ids are the CONTROL tokens
 *   "<|endoftext|>", "<|im_start|>", "<|im_end|>".
 * Invariants: exactly n tokens, all distinct; every merge "a b" has a, b and ab in the vocab and
 * ab's id is greater than a's and b's. */
#ifndef SL_TOOLS_SYNTH_VOCAB_H
#define SL_TOOLS_SYNTH_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

enum { SL__TOKEN_NORMAL = 1, SL__TOKEN_UNKNOWN = 2, SL__TOKEN_CONTROL = 3, SL__TOKEN_BYTE = 6 };

typedef struct sl__synth_vocab {
    uint32_t n;                 /* tokens */
    const char **tokens;        /* n NUL-terminated UTF-8 strings (into arena) */
    float *scores;              /* n; SentencePiece only (NULL for BPE) */
    int32_t *types;             /* n token types */
    uint32_t n_merges;
    const char **merges;        /* "left right" strings (into arena); BPE only */
    uint32_t bos, eos, unk;     /* unk == UINT32_MAX for BPE */
    uint32_t pad;               /* UINT32_MAX unless Gemma style */
    char *arena;                /* owns every string */
} sl__synth_vocab;

typedef enum sl__synth_vocab_style {
    SL__VOCAB_SPM,          /* llama's SentencePiece specials */
    SL__VOCAB_SPM_GEMMA,    /* Gemma's SentencePiece specials */
    SL__VOCAB_SPM_PHI3,     /* llama's, plus Phi-3's "<|endoftext|>" last */
    SL__VOCAB_BPE,          /* eos "<|endoftext|>" */
    SL__VOCAB_BPE_IM_END,   /* eos "<|im_end|>" */
} sl__synth_vocab_style;

/* Builds a vocabulary of exactly n tokens (SL_SYNTH_MIN_VOCAB <= n <= SL_SYNTH_MAX_VOCAB) in
 * the given style. Free with sl__synth_vocab_free. */
sl_status sl__synth_vocab_build(sl__synth_vocab_style style, uint32_t n, sl__synth_vocab *v,
                                sl_error *err);
void sl__synth_vocab_free(sl__synth_vocab *v);

#endif
