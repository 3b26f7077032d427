/* Fuzz entry point for the tokenizer (runtime/text/tokenizer.h) and its pre-tokenizers.
 *
 * Input: byte 0 picks a row of the pre-tokenizer table (pretok_table.c, in table order) or,
 * past the last row, SentencePiece; the rest is the text. Per input a small vocabulary is
 * written as a GGUF image in memory and loaded as a model's would be (no state survives a
 * call): the 256 byte symbols, a few merges and whole words, and special tokens of every kind
 * (CONTROL <s> <|endoftext|> <|im_start|>, USER_DEFINED <tool>, UNKNOWN <unk>); for SPM the
 * 256 <0xNN> byte tokens and scored pieces.
 *
 * Invariants checked (a broken one aborts, which libFuzzer reports):
 *   - BPE: the row's pre-tokenizer splits the text's code points into words that tile it;
 *   - tokenize succeeds with and without parse_special, a size query (cap 0) gives the same
 *     count, every id is in range, and add_special only adds BOS / EOS around the same ids;
 *   - the pieces concatenate back to the text: for BPE with invalid UTF-8 made U+FFFD (as
 *     llama.cpp), special tokens rendered when parse_special cut them out; for SPM with the
 *     leading space it adds and U+2581 read as a space, for valid UTF-8 when no special token
 *     was cut out (a space after one gets a prefix space of its own, as in llama.cpp);
 *   - detokenize gives the text back where llama.cpp's does: BPE rows that keep spaces
 *     (clean_spaces off) and SPM on valid UTF-8 without special tokens; elsewhere it succeeds
 *     and, for BPE, only drops bytes (control tokens, the clean-up's spaces). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "tokenizer_fuzz: invariant broken: %s: %s\n", what, msg);
    abort();
}

/* ---- a GGUF image in memory (little-endian, as the format) -------------------------------- */

typedef struct img {
    uint8_t *p;
    size_t n, cap;
} img;

static void put(img *m, const void *src, size_t n)
{
    if (m->n + n > m->cap) {
        const size_t cap = 2 * (m->n + n);
        uint8_t *p = realloc(m->p, cap);
        if (!p) die("image", "out of memory");
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, src, n);
    m->n += n;
}
static void put_u32(img *m, uint32_t v)
{
    const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(m, b, 4);
}
static void put_u64(img *m, uint64_t v)
{
    put_u32(m, (uint32_t)v);
    put_u32(m, (uint32_t)(v >> 32));
}
static void put_str(img *m, const char *s, size_t n)
{
    put_u64(m, n);
    put(m, s, n);
}
static void kv_head(img *m, const char *key, uint32_t type)
{
    put_str(m, key, strlen(key));
    put_u32(m, type);
}
static void kv_str(img *m, const char *key, const char *v)
{
    kv_head(m, key, SL_GGUF_STR);
    put_str(m, v, strlen(v));
}
static void kv_u32(img *m, const char *key, uint32_t v)
{
    kv_head(m, key, SL_GGUF_U32);
    put_u32(m, v);
}
static void kv_arr_head(img *m, const char *key, uint32_t elem, size_t n)
{
    kv_head(m, key, SL_GGUF_ARR);
    put_u32(m, elem);
    put_u64(m, n);
}

/* ---- the vocabularies ------------------------------------------------------------------- */

enum { MAX_TOK = 400, MAX_TEXT = 32 };

typedef struct vocab_src {
    char text[MAX_TOK][MAX_TEXT];
    size_t len[MAX_TOK];
    int32_t type[MAX_TOK];
    float score[MAX_TOK];
    size_t n;
    int32_t bos, eos;
} vocab_src;

/* Appends a token (distinct texts by construction: the loader refuses duplicates). */
static int32_t add_tok(vocab_src *s, const char *t, size_t n, int32_t type, float score)
{
    if (s->n == MAX_TOK || n >= MAX_TEXT) die("vocab", "table too small");
    memcpy(s->text[s->n], t, n);
    s->len[s->n] = n;
    s->type[s->n] = type;
    s->score[s->n] = score;
    return (int32_t)s->n++;
}

/* Raw bytes as GPT-2 byte symbols (UTF-8 of sl__gpt2_byte_to_cp of each byte). */
static size_t gpt2_symbols(const char *raw, char *out)
{
    size_t n = 0;
    for (size_t i = 0; raw[i]; i++)
        n += sl__utf8_encode(sl__gpt2_byte_to_cp((uint8_t)raw[i]), out + n);
    return n;
}

static void add_specials(vocab_src *s)
{
    s->bos = add_tok(s, "<s>", 3, SL_TOKEN_CONTROL, 0);
    s->eos = add_tok(s, "<|endoftext|>", 13, SL_TOKEN_CONTROL, 0);
    add_tok(s, "<|im_start|>", 12, SL_TOKEN_CONTROL, 0);
    add_tok(s, "<tool>", 6, SL_TOKEN_USER_DEFINED, 0);
}

/* Merges (raw bytes, left then right); the vocabulary holds every merge's result. */
static const char *const k_merges[][2] = {
    {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {" ", "a"}, {"e", "r"}, {" ", " "},
    {"  ", "  "}, {"1", "2"}, {"12", "3"}, {"'", "s"}, {"\xc3", "\xa9"}, {"\n", "\n"},
    {"o", "n"}, {"\xe6", "\x97"}, {"\xe6\x97", "\xa5"}, {" ", "\xe6\x97\xa5"}, {"\r", "\n"},
    {".", "."}, {"..", "."}, {"\xef\xbf", "\xbd"}, {"\xef", "\xbf"},
};

static void build_bpe(vocab_src *s, const char *pre, img *m)
{
    char a[MAX_TEXT], b[MAX_TEXT], t[2 * MAX_TEXT];
    for (int i = 0; i < 256; i++) {
        const char raw[2] = {(char)i, 0};
        const size_t n = i ? gpt2_symbols(raw, a) : sl__utf8_encode(sl__gpt2_byte_to_cp(0), a);
        add_tok(s, a, n, SL_TOKEN_NORMAL, 0);
    }
    const size_t n_merges = sizeof k_merges / sizeof *k_merges;
    for (size_t i = 0; i < n_merges; i++) {
        const size_t na = gpt2_symbols(k_merges[i][0], a), nb = gpt2_symbols(k_merges[i][1], b);
        memcpy(t, a, na);
        memcpy(t + na, b, nb);
        add_tok(s, t, na + nb, SL_TOKEN_NORMAL, 0);
    }
    add_tok(s, "hello", 5, SL_TOKEN_NORMAL, 0); /* a whole word without merges (ignore_merges) */
    add_specials(s);
    add_tok(s, "<unk>", 5, SL_TOKEN_UNKNOWN, 0);

    put_u32(m, 0x46554747); /* "GGUF" */
    put_u32(m, 3);
    put_u64(m, 0);
    put_u64(m, 8);
    kv_str(m, "general.architecture", "llama");
    kv_str(m, "tokenizer.ggml.model", "gpt2");
    kv_str(m, "tokenizer.ggml.pre", pre);
    kv_arr_head(m, "tokenizer.ggml.tokens", SL_GGUF_STR, s->n);
    for (size_t i = 0; i < s->n; i++) put_str(m, s->text[i], s->len[i]);
    kv_arr_head(m, "tokenizer.ggml.token_type", SL_GGUF_I32, s->n);
    for (size_t i = 0; i < s->n; i++) put_u32(m, (uint32_t)s->type[i]);
    kv_arr_head(m, "tokenizer.ggml.merges", SL_GGUF_STR, n_merges);
    for (size_t i = 0; i < n_merges; i++) {
        const size_t na = gpt2_symbols(k_merges[i][0], a), nb = gpt2_symbols(k_merges[i][1], b);
        memcpy(t, a, na);
        t[na] = ' ';
        memcpy(t + na + 1, b, nb);
        put_str(m, t, na + 1 + nb);
    }
    kv_u32(m, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    kv_u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos);
}

#define SP "\xe2\x96\x81" /* U+2581 */

static void build_spm(vocab_src *s, img *m)
{
    add_tok(s, "<unk>", 5, SL_TOKEN_UNKNOWN, 0);
    add_specials(s); /* <s> is id 1 ... */
    for (int i = 0; i < 256; i++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", i);
        add_tok(s, t, 6, SL_TOKEN_BYTE, 0);
    }
    static const char *const k_pieces[] = {
        SP, SP "t", SP "th", SP "the", "t", "h", "e", "a", SP "a", "he", "in", SP "in", "\xc3\xa9",
        "\xe6\x97\xa5", "\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac", "'s", "1", "2", "12", SP SP,
        "\n", "s", "o", "n", "on", "\xef\xbf\xbd",
    };
    for (size_t i = 0; i < sizeof k_pieces / sizeof *k_pieces; i++)
        add_tok(s, k_pieces[i], strlen(k_pieces[i]), SL_TOKEN_NORMAL,
                (float)strlen(k_pieces[i]) - 0.01f * (float)i);

    put_u32(m, 0x46554747);
    put_u32(m, 3);
    put_u64(m, 0);
    put_u64(m, 7);
    kv_str(m, "general.architecture", "llama");
    kv_str(m, "tokenizer.ggml.model", "llama");
    kv_arr_head(m, "tokenizer.ggml.tokens", SL_GGUF_STR, s->n);
    for (size_t i = 0; i < s->n; i++) put_str(m, s->text[i], s->len[i]);
    kv_arr_head(m, "tokenizer.ggml.token_type", SL_GGUF_I32, s->n);
    for (size_t i = 0; i < s->n; i++) put_u32(m, (uint32_t)s->type[i]);
    kv_arr_head(m, "tokenizer.ggml.scores", SL_GGUF_F32, s->n);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t u;
        memcpy(&u, &s->score[i], 4);
        put_u32(m, u);
    }
    kv_u32(m, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos);
    kv_u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos);
}

/* ---- checks ----------------------------------------------------------------------------- */

/* The tokens of text, after checking the size query and the ids' range. Caller frees. */
static int32_t *tokenize(const sl_vocab *v, const char *text, size_t len, bool add, bool parse,
                         size_t *n)
{
    sl_error e = {0};
    size_t want = 0;
    sl_status st = sl_vocab_tokenize(v, text, len, add, parse, NULL, 0, &want, &e);
    if (st != SL_OK && !(st == SL_ERR_RANGE && want > 0)) die("tokenize (size query)", e.msg);
    int32_t *ids = malloc((want ? want : 1) * sizeof *ids);
    if (!ids) die("tokenize", "out of memory");
    if (sl_vocab_tokenize(v, text, len, add, parse, ids, want, n, &e) != SL_OK)
        die("tokenize", e.msg);
    if (*n != want) die("tokenize", "the size query gave another count");
    for (size_t i = 0; i < *n; i++)
        if (ids[i] < 0 || ids[i] >= sl_vocab_n_tokens(v)) die("tokenize", "id out of range");
    return ids;
}

/* Concatenated pieces of ids into out (room for `cap`); returns their length. */
static size_t pieces(const sl_vocab *v, const int32_t *ids, size_t n, bool special, char *out,
                     size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        sl_error e = {0};
        if (sl_vocab_token_to_piece(v, ids[i], special, out + at, cap - at, &k, &e) != SL_OK)
            die("token_to_piece", e.msg);
        at += k;
    }
    return at;
}

static bool has_special(const sl_vocab *v, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const sl_token_type t = sl_vocab_token_type(v, ids[i]);
        if (t == SL_TOKEN_CONTROL || t == SL_TOKEN_USER_DEFINED || t == SL_TOKEN_UNKNOWN)
            return true;
    }
    return false;
}

static void check_tiling(const sl_vocab *v, const char *text, size_t len)
{
    uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
    if (!cps) die("pretok", "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len;) cps[n++] = sl__utf8_decode(text, len, &i);
    size_t *lens = NULL, nw = 0, sum = 0;
    sl_error e = {0};
    if (sl__pretok_split(&v->pre, cps, n, &lens, &nw, &e) != SL_OK) die("pretok", e.msg);
    for (size_t k = 0; k < nw; k++) {
        if (lens[k] == 0) die("pretok", "an empty word");
        sum += lens[k];
    }
    if (sum != n) die("pretok", "the words do not tile the text");
    free(lens);
    free(cps);
}

static void check(const sl_vocab *v, const char *text, size_t len, bool spm)
{
    /* what the pieces must spell: BPE reads invalid UTF-8 as U+FFFD (3 bytes for each bad
     * byte, at most); SPM adds one space in front and reads U+2581 as a space */
    const size_t cap = 3 * len + 8;
    char *want = malloc(cap), *got = malloc(cap);
    if (!want || !got) die("check", "out of memory");
    size_t wn = 0;
    for (size_t i = 0; i < len;) wn += sl__utf8_encode(sl__utf8_decode(text, len, &i), want + wn);
    /* SPM cuts invalid UTF-8 by its lead byte's length, swallowing what follows (a space's
     * U+2581 too) into byte tokens, as llama.cpp: no round trip is promised there */
    const bool valid = wn == len && !memcmp(want, text, len);
    if (spm) {
        wn = 0;
        want[wn++] = ' ';
        for (size_t i = 0; i < len; i++) {
            const bool sp = len - i >= 3 && !memcmp(text + i, SP, 3);
            want[wn++] = sp ? ' ' : text[i];
            i += sp ? 2 : 0;
        }
    } else {
        check_tiling(v, text, len);
    }
    const bool spell = !spm || valid;
    for (int parse = 0; parse < 2; parse++) {
        size_t n = 0, na = 0, gn = 0;
        int32_t *ids = tokenize(v, text, len, false, parse, &n);
        int32_t *ida = tokenize(v, text, len, true, parse, &na);
        const size_t lead = sl_vocab_add_bos(v), tail = sl_vocab_add_eos(v);
        if (na != n + lead + tail || (lead && ida[0] != sl_vocab_bos(v)) ||
            (tail && ida[na - 1] != sl_vocab_eos(v)) ||
            (n && memcmp(ida + lead, ids, n * sizeof *ids)))
            die("tokenize", "add_special changed more than BOS / EOS");
        const bool specials = has_special(v, ids, n);
        if (spell && (!spm || !specials)) {
            gn = pieces(v, ids, n, parse, got, cap);
            if (gn != wn - (spm && n == 0) || memcmp(got, want, gn))
                die("pieces", parse ? "pieces (special rendered) do not spell the text"
                                    : "pieces do not spell the text");
        }
        sl_error e = {0};
        if (sl_vocab_detokenize(v, ida, na, got, cap, &gn, &e) != SL_OK) die("detokenize", e.msg);
        const bool exact = spm ? valid && !specials : !v->clean_spaces && !(parse && specials);
        const size_t wd = spm ? (wn ? wn - 1 : 0) : wn; /* SPM drops the space it added */
        if (exact && (gn != wd || memcmp(got, want + (spm ? 1 : 0), gn)))
            die("detokenize", "the text did not come back");
        /* elsewhere BPE only drops bytes (control tokens, clean-up spaces); SPM may turn a
         * space after a special token into two */
        if (!exact && gn > (spm ? 2 * len + 1 : wn)) die("detokenize", "text grew");
        free(ids);
        free(ida);
    }
    free(want);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    size_t rows = 0;
    while (sl__pretok_at(rows)) rows++;
    const size_t row = data[0] % (rows + 1);
    const bool spm = row == rows;
    vocab_src *src = calloc(1, sizeof *src);
    img m = {0};
    if (!src) die("vocab", "out of memory");
    if (spm) build_spm(src, &m);
    else build_bpe(src, sl__pretok_at(row)->name, &m);
    sl_gguf *g = NULL;
    sl_vocab *v = NULL;
    sl_error e = {0};
    if (sl_gguf_open_memory(m.p, m.n, "tokenizer_fuzz.gguf", &g, &e) != SL_OK)
        die("gguf", e.msg);
    if (sl_vocab_load(g, &v, &e) != SL_OK) die("vocab", e.msg);
    sl_gguf_close(g);
    if (sl__vocab_validate(v, &e) != SL_OK) die("validate", e.msg);
    check(v, (const char *)data + 1, size - 1, spm);
    sl_vocab_free(v);
    free(m.p);
    free(src);
    return 0;
}
