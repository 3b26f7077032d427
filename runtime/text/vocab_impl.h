/* Private to runtime/text/tokenizer*.c, tok_*.c, pretok.c: the layout of sl_vocab.
 *
 * Invariants (checked by sl__vocab_validate):
 *   - n_tokens > 0; text_off[i] + text_len[i] <= arena_len for every token; token texts are
 *     distinct and non-empty (llama.cpp renames empty ones "[EMPTY_i]"; so do we).
 *   - tok_table is an open-addressing table (linear probing, power-of-two size >= 2 n_tokens)
 *     holding id + 1 for every token, 0 for empty slots; a lookup of token i's text finds i.
 *   - BPE: merge_table likewise holds rank + 1 of every merge "left right" (split at the first
 *     space after byte 0, as llama.cpp); a later duplicate of a pair keeps the first rank.
 *   - special[] lists the CONTROL/USER_DEFINED/UNKNOWN tokens by text length, longest first,
 *     ties by id (the order tokenizer_st_partition tries them in).
 */
#ifndef SL_RUNTIME_VOCAB_IMPL_H
#define SL_RUNTIME_VOCAB_IMPL_H

#include "runtime/text/regex.h"
#include "runtime/text/tokenizer.h"

typedef struct sl__merge {
    uint32_t off;       /* into arena: "left" bytes then "right" bytes (no separator) */
    uint32_t left_len, right_len;
} sl__merge;

/* A BPE pre-tokenizer: a hand-written one (kind; n_re 0), or SL_PRETOK_REGEX with its n_re
 * stages (1 .. SL__PRETOK_MAX_RE compiled regexes, applied in order, each to every piece of the
 * one before). An SPM vocabulary has SL_PRETOK_NONE, a BPE one any other kind. */
enum { SL__PRETOK_MAX_RE = 6 };
typedef struct sl__pretok {
    sl_pretok kind;
    sl__regex *re[SL__PRETOK_MAX_RE];
    size_t n_re;
} sl__pretok;

/* A row of the pre-tokenizer table (pretok_table.c): a tokenizer.ggml.pre name, what it
 * splits by (re: the NULL-terminated regex stages of SL_PRETOK_REGEX, else NULL) and the
 * vocabulary flags llama.cpp ties to the name. */
enum {
    SL__PRE_IGNORE_MERGES = 1, /* a word that is a whole token skips merging */
    SL__PRE_KEEP_SPACES = 2,   /* detokenize without llama.cpp's clean-up of spaces */
    SL__PRE_ADD_BOS = 4        /* add BOS by default */
};
typedef struct sl__pretok_def {
    const char *name;
    sl_pretok kind;
    const char *const *re;
    unsigned flags;
} sl__pretok_def;

/* The row named `name`, or NULL. */
const sl__pretok_def *sl__pretok_find(const char *name);
/* Row i of the table, or NULL past its end (for tests). */
const sl__pretok_def *sl__pretok_at(size_t i);
/* Compiles d's regexes into *pt (a zeroed *pt on failure); free with sl__pretok_free. */
sl_status sl__pretok_init(sl__pretok *pt, const sl__pretok_def *d, sl_error *err);
void sl__pretok_free(sl__pretok *pt);

/* FIM kinds, in sluice.h's sl_fim order (text_api.c checks the two agree); the last three
 * (pad, repo, separator) end a generation. */
enum { SL__VOCAB_FIM = 6, SL__VOCAB_FIM_EOG_FROM = 3 };

struct sl_vocab {
    sl_vocab_kind kind;
    sl__pretok pre;
    bool ignore_merges;     /* llama3: a word that is a whole token skips merging */
    bool add_space_prefix;  /* SPM: prepend ' ' to text that starts a fragment run */
    bool clean_spaces;      /* detokenize: llama.cpp's clean-up of " ." and " 's" */
    bool add_bos, add_eos;
    int32_t bos, eos, eot, eom, unk, pad;
    int32_t fim[SL__VOCAB_FIM]; /* pre, suf, mid, pad, rep, sep (sluice.h sl_fim); -1 none */

    int32_t n_tokens;
    char *arena;            /* token texts, then merge texts */
    size_t arena_len;
    uint32_t *text_off;     /* n_tokens */
    uint32_t *text_len;     /* n_tokens */
    float *scores;          /* n_tokens */
    uint8_t *types;         /* n_tokens, sl_token_type */
    uint8_t *eog;           /* n_tokens, 1 if end of generation */
    int32_t byte_token[256];/* SPM: <0xNN> id per byte (-1: none); BPE: id of the byte's
                               GPT-2 symbol */

    uint32_t *tok_table;
    uint32_t tok_mask;

    sl__merge *merges;      /* n_merges, by rank */
    uint32_t n_merges;
    uint32_t *merge_table;  /* rank + 1, 0 empty */
    uint32_t merge_mask;

    int32_t *special;       /* n_special ids, longest text first */
    int32_t n_special;
};

static inline const char *sl__vocab_text(const sl_vocab *v, int32_t id)
{
    return v->arena + v->text_off[id];
}

/* Growable int32 output of the tokenizers: n may exceed cap only after a failed grow. */
typedef struct sl__tokbuf {
    int32_t *ids;
    size_t n, cap;
} sl__tokbuf;

/* Appends id; false when out of memory. */
bool sl__tokbuf_push(sl__tokbuf *b, int32_t id);

/* FNV-1a over bytes, continuing from h (start with SL__FNV_INIT). */
uint64_t sl__fnv1a(uint64_t h, const char *s, size_t n);
#define SL__FNV_INIT 0xcbf29ce484222325ull

/* Rank of merge (left, right), or -1. */
int32_t sl__vocab_merge_rank(const sl_vocab *v, const char *l, size_t ln, const char *r,
                             size_t rn);

/* SPM: tokenizes one raw-text fragment (already with ▁ for spaces) into out. */
sl_status sl__spm_tokenize(const sl_vocab *v, const char *text, size_t len, sl__tokbuf *out,
                           sl_error *err);
/* BPE: pre-tokenizes, byte-encodes and merges one raw-text fragment into out. */
sl_status sl__bpe_tokenize(const sl_vocab *v, const char *text, size_t len, sl__tokbuf *out,
                           sl_error *err);

/* Pre-tokenizer: splits code points cps[0, n) into words; writes word lengths (in code points,
 * each > 0, summing to n) to *lens (malloc'd, caller frees), their count to *n_words. */
sl_status sl__pretok_split(const sl__pretok *pt, const uint32_t *cps, size_t n, size_t **lens,
                           size_t *n_words, sl_error *err);

/* Checks the invariants above; SL_ERR_FORMAT naming the first broken one. */
sl_status sl__vocab_validate(const sl_vocab *v, sl_error *err);

#endif
