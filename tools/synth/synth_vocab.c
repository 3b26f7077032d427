/* Synthetic tokenizer vocabularies; layout and invariants in synth_vocab.h.
 *
 * Strings live in one growing arena and are referred to by offset while building (the arena
 * moves on growth); pointers are made once at the end. A small open-addressing hash set of
 * token ids keeps tokens distinct: the systematic fill would otherwise repeat pieces that the
 * word list already created. */
#include "tools/synth/synth_vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/synth/synth.h"

/* Common English words, so tokenizing text with a synthetic model looks plausible. */
static const char *const k_words[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on",
    "are", "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had",
    "by", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there",
    "when", "up", "use", "your", "how", "said", "an", "each", "she", "which", "do", "their",
    "time", "if", "will", "way", "about", "many", "then", "them", "would", "write", "like", "so",
    "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day",
    "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over",
    "know", "water", "than", "call", "first", "who", "may", "down", "side", "been", "now",
    "find", "model", "token", "expert", "layer",
};

static const char k_spm_space[] = "\xe2\x96\x81"; /* U+2581 LOWER ONE EIGHTH BLOCK */
static const char k_bpe_space[] = "\xc4\xa0";     /* U+0120, GPT-2's symbol for byte 0x20 */

typedef struct builder {
    char *arena;
    size_t len, cap;
    size_t *tok_off;        /* cap_tok entries */
    uint32_t n_tok, cap_tok;
    size_t *merge_off;
    uint32_t n_merge, cap_merge;
    uint32_t *table;        /* token id + 1; 0 = empty */
    uint32_t mask;
} builder;

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static bool arena_put(builder *b, const char *s, size_t n, size_t *off)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1) cap *= 2;
        char *a = realloc(b->arena, cap);
        if (!a) return false;
        b->arena = a;
        b->cap = cap;
    }
    memcpy(b->arena + b->len, s, n);
    b->arena[b->len + n] = '\0';
    *off = b->len;
    b->len += n + 1;
    return true;
}

/* Slot of s in the table: where it is, or the empty slot where it would go. */
static uint32_t *find_slot(const builder *b, const char *s, size_t n)
{
    uint32_t i = (uint32_t)hash_str(s, n) & b->mask;
    for (;;) {
        uint32_t *slot = &b->table[i];
        if (*slot == 0) return slot;
        const char *t = b->arena + b->tok_off[*slot - 1];
        if (strlen(t) == n && memcmp(t, s, n) == 0) return slot;
        i = (i + 1) & b->mask;
    }
}

static bool has_token(const builder *b, const char *s, size_t n)
{
    return *find_slot(b, s, n) != 0;
}

/* Adds s as the next token unless present. *added tells which. false only on no memory. */
static bool add_token(builder *b, const char *s, size_t n, bool *added)
{
    uint32_t *slot = find_slot(b, s, n);
    *added = false;
    if (*slot) return true;
    size_t off;
    if (!arena_put(b, s, n, &off)) return false;
    b->tok_off[b->n_tok] = off;
    *slot = ++b->n_tok; /* id + 1 */
    *added = true;
    return true;
}

static bool add_merge(builder *b, const char *l, size_t ln, const char *r, size_t rn)
{
    if (b->n_merge == b->cap_merge) {
        uint32_t cap = b->cap_merge ? b->cap_merge * 2 : 1024;
        size_t *m = realloc(b->merge_off, (size_t)cap * sizeof *m);
        if (!m) return false;
        b->merge_off = m;
        b->cap_merge = cap;
    }
    char buf[256];
    if (ln + rn + 2 > sizeof buf) return false;
    memcpy(buf, l, ln);
    buf[ln] = ' ';
    memcpy(buf + ln + 1, r, rn);
    return arena_put(b, buf, ln + 1 + rn, &b->merge_off[b->n_merge++]);
}

static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* BPE: adds every prefix of `word` (at code point boundaries) as the merge of the previous
 * prefix and the next code point, so the word's own token is reachable by merges. Stops at
 * `limit` tokens. The code points themselves must already be tokens (bytes or merges). */
static bool add_by_prefix_merges(builder *b, const char *word, uint32_t limit)
{
    const size_t n = strlen(word);
    size_t cur = utf8_len((unsigned char)word[0]);
    while (cur < n && b->n_tok < limit) {
        const size_t cp = utf8_len((unsigned char)word[cur]);
        bool added;
        /* The left part is a token by induction; the new one is word[0, cur + cp). */
        if (!has_token(b, word, cur + cp)) {
            if (!add_token(b, word, cur + cp, &added)) return false;
            if (!add_merge(b, word, cur, word + cur, cp)) return false;
        }
        cur += cp;
    }
    return true;
}

/* Lower-case string number i of length len (base 26, most significant first). */
static void nth_string(uint64_t i, int len, char *out)
{
    for (int k = len - 1; k >= 0; k--) {
        out[k] = (char)('a' + i % 26);
        i /= 26;
    }
    out[len] = '\0';
}

static size_t put_cp(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static sl_status build_bpe(builder *b, uint32_t n, bool eos_im_end, sl__synth_vocab *v,
                           sl_error *err)
{
    const uint32_t limit = n - 3; /* the last three ids are the control tokens */
    bool added;
    /* GPT-2 bytes_to_unicode: printable bytes map to themselves, the others to 256 + k. */
    uint32_t k = 0;
    for (uint32_t byte = 0; byte < 256; byte++) {
        const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) ||
                               (byte >= 174);
        char s[4];
        const size_t len = put_cp(printable ? byte : 256 + k++, s);
        if (!add_token(b, s, len, &added)) goto nomem;
    }
    char w[64];
    for (char c = 'a'; c <= 'z' && b->n_tok < limit; c++) {
        snprintf(w, sizeof w, "%s%c", k_bpe_space, c);
        if (!add_by_prefix_merges(b, w, limit)) goto nomem;
    }
    for (size_t i = 0; i < sizeof k_words / sizeof k_words[0] && b->n_tok < limit; i++) {
        snprintf(w, sizeof w, "%s%s", k_bpe_space, k_words[i]);
        if (!add_by_prefix_merges(b, w, limit)) goto nomem;
    }
    /* Systematic fill: every string of length L over a-z, bare and with a leading space, after
     * all of length L - 1, so each one's prefix is already a token. */
    for (int len = 2; b->n_tok < limit; len++) {
        uint64_t count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (uint64_t i = 0; i < count && b->n_tok < limit; i++) {
            char s[32];
            nth_string(i, len, s);
            if (!add_by_prefix_merges(b, s, limit)) goto nomem;
            snprintf(w, sizeof w, "%s%s", k_bpe_space, s);
            if (!add_by_prefix_merges(b, w, limit)) goto nomem;
        }
    }
    static const char *const specials[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++)
        if (!add_token(b, specials[i], strlen(specials[i]), &added) || !added) goto nomem;
    v->types = malloc((size_t)n * sizeof *v->types);
    if (!v->types) goto nomem;
    for (uint32_t i = 0; i < n; i++) v->types[i] = i < limit ? SL__TOKEN_NORMAL : SL__TOKEN_CONTROL;
    v->bos = limit;
    v->eos = eos_im_end ? limit + 2 : limit;
    v->unk = UINT32_MAX;
    v->pad = UINT32_MAX;
    return SL_OK;
nomem:
    return sl_error_set(err, SL_ERR_NOMEM, "synth vocab: out of memory building %u BPE tokens",
                        n);
}

static sl_status build_spm(builder *b, uint32_t n, sl__synth_vocab_style style,
                           sl__synth_vocab *v, sl_error *err)
{
    const bool gemma = style == SL__VOCAB_SPM_GEMMA;
    /* Phi-3: llama's pieces, then its added CONTROL token "<|endoftext|>" (id 32000 there) */
    const uint32_t limit = style == SL__VOCAB_SPM_PHI3 ? n - 1 : n;
    bool added;
    static const char *const llama_specials[3] = {"<unk>", "<s>", "</s>"};
    static const char *const gemma_specials[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
    const char *const *specials = gemma ? gemma_specials : llama_specials;
    const uint32_t n_special = gemma ? 4 : 3, n_base = n_special + 256;
    for (uint32_t i = 0; i < n_special; i++)
        if (!add_token(b, specials[i], strlen(specials[i]), &added)) goto nomem;
    for (int byte = 0; byte < 256; byte++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", byte);
        if (!add_token(b, s, strlen(s), &added)) goto nomem;
    }
    char w[64];
    if (!add_token(b, k_spm_space, strlen(k_spm_space), &added)) goto nomem;
    for (size_t i = 0; i < sizeof k_words / sizeof k_words[0] && b->n_tok < limit; i++) {
        snprintf(w, sizeof w, "%s%s", k_spm_space, k_words[i]);
        if (!add_token(b, w, strlen(w), &added)) goto nomem;
    }
    static const char singles[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-:;()\"";
    for (size_t i = 0; singles[i] && b->n_tok < limit; i++)
        if (!add_token(b, &singles[i], 1, &added)) goto nomem;
    for (int len = 1; b->n_tok < limit; len++) {
        uint64_t count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (uint64_t i = 0; i < count && b->n_tok < limit; i++) {
            char s[32];
            nth_string(i, len, s);
            snprintf(w, sizeof w, "%s%s", k_spm_space, s);
            if (!add_token(b, w, strlen(w), &added)) goto nomem;
            if (len > 1 && b->n_tok < limit && !add_token(b, s, (size_t)len, &added)) goto nomem;
        }
    }
    if (limit < n && (!add_token(b, "<|endoftext|>", 13, &added) || !added)) goto nomem;
    v->types = malloc((size_t)n * sizeof *v->types);
    v->scores = malloc((size_t)n * sizeof *v->scores);
    if (!v->types || !v->scores) goto nomem;
    v->unk = gemma ? 3 : 0;
    v->bos = gemma ? 2 : 1;
    v->eos = gemma ? 1 : 2;
    v->pad = gemma ? 0 : UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        v->types[i] = i == v->unk ? SL__TOKEN_UNKNOWN
                      : i < n_special || i >= limit ? SL__TOKEN_CONTROL
                      : i < n_base ? SL__TOKEN_BYTE
                                   : SL__TOKEN_NORMAL;
        /* written as base - i so the first piece scores +0, not -0 */
        v->scores[i] = i < n_base || i >= limit ? 0.0f : (float)n_base - (float)i;
    }
    return SL_OK;
nomem:
    return sl_error_set(err, SL_ERR_NOMEM, "synth vocab: out of memory building %u pieces", n);
}

sl_status sl__synth_vocab_build(sl__synth_vocab_style style, uint32_t n, sl__synth_vocab *v,
                                sl_error *err)
{
    memset(v, 0, sizeof *v);
    if (n < SL_SYNTH_MIN_VOCAB || n > SL_SYNTH_MAX_VOCAB)
        return sl_error_set(err, SL_ERR_RANGE, "synth vocab: %u tokens is outside [%u, %u]", n,
                            (unsigned)SL_SYNTH_MIN_VOCAB, (unsigned)SL_SYNTH_MAX_VOCAB);
    builder b = {0};
    uint32_t slots = 1;
    while (slots < 2 * n) slots *= 2;
    b.mask = slots - 1;
    b.table = calloc(slots, sizeof *b.table);
    b.tok_off = malloc((size_t)n * sizeof *b.tok_off);
    b.cap_tok = n;
    sl_status st;
    if (!b.table || !b.tok_off) {
        st = sl_error_set(err, SL_ERR_NOMEM, "synth vocab: out of memory (%u tokens)", n);
        goto out;
    }
    switch (style) {
    case SL__VOCAB_BPE:
    case SL__VOCAB_BPE_IM_END:
        st = build_bpe(&b, n, style == SL__VOCAB_BPE_IM_END, v, err);
        break;
    case SL__VOCAB_SPM:
    case SL__VOCAB_SPM_GEMMA:
    case SL__VOCAB_SPM_PHI3:
        st = build_spm(&b, n, style, v, err);
        break;
    default:
        st = sl_error_set(err, SL_ERR_INVALID, "synth vocab: unknown style %d", (int)style);
        break;
    }
    if (st != SL_OK) goto out;
    if (b.n_tok != n) {
        st = sl_error_set(err, SL_ERR_INVALID, "synth vocab: built %u tokens, wanted %u",
                          b.n_tok, n);
        goto out;
    }
    v->tokens = malloc((size_t)n * sizeof *v->tokens);
    v->merges = malloc(((size_t)b.n_merge + 1) * sizeof *v->merges);
    if (!v->tokens || !v->merges) {
        st = sl_error_set(err, SL_ERR_NOMEM, "synth vocab: out of memory (%u tokens)", n);
        goto out;
    }
    /* The arena no longer moves: turn offsets into pointers. */
    for (uint32_t i = 0; i < n; i++) v->tokens[i] = b.arena + b.tok_off[i];
    for (uint32_t i = 0; i < b.n_merge; i++) v->merges[i] = b.arena + b.merge_off[i];
    v->n = n;
    v->n_merges = b.n_merge;
    v->arena = b.arena;
    b.arena = NULL;
out:
    free(b.arena);
    free(b.tok_off);
    free(b.merge_off);
    free(b.table);
    if (st != SL_OK) sl__synth_vocab_free(v);
    return st;
}

void sl__synth_vocab_free(sl__synth_vocab *v)
{
    if (!v) return;
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->merges);
    free(v->arena);
    memset(v, 0, sizeof *v);
}
