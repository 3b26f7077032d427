/* runtime/text/tokenizer: hand-computed merges on tiny vocabularies written with the GGUF writer,
 * the pre-tokenizer splits, special tokens, BOS/EOS, pieces, errors; round trips on the
 * vocabularies of `sluice mkmodel` (argv[1] is the sluice binary).
 * Token-for-token agreement with independent tokenizers is tokenizer_vs_reference.py's job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"
#include "tests/testing.h"

#define SP "\xe2\x96\x81" /* U+2581 */
#define GS "\xc4\xa0"     /* U+0120, GPT-2's space */

static char g_tmp[512];

static const char *tmp_path(const char *name)
{
    static char buf[8][640];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", g_tmp, name);
    return p;
}

typedef struct spec {
    const char *model, *pre;      /* pre NULL: no key */
    const char **tokens;
    uint32_t n;
    const float *scores;
    const int32_t *types;
    const char **merges;
    uint32_t n_merges;
    int64_t bos, eos;             /* < 0: no key */
    int add_bos;                  /* -1: no key */
} spec;

static void write_vocab(const char *path, const spec *s)
{
    sl_error err = {0};
    sl_gguf_writer *w;
    sl_status st = sl_gguf_writer_create(path, NULL, &w, &err);
    if (!st) st = sl_gguf_writer_set_str(w, "general.architecture", "llama", &err);
    if (!st) st = sl_gguf_writer_set_str(w, "tokenizer.ggml.model", s->model, &err);
    if (!st && s->pre) st = sl_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre, &err);
    if (!st && s->tokens)
        st = sl_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", s->tokens, s->n, &err);
    if (!st && s->scores)
        st = sl_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SL_GGUF_F32, s->scores, s->n, &err);
    if (!st && s->types)
        st = sl_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SL_GGUF_I32, s->types, s->n,
                                    &err);
    if (!st && s->merges)
        st = sl_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", s->merges, s->n_merges, &err);
    if (!st && s->bos >= 0)
        st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos, &err);
    if (!st && s->eos >= 0)
        st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos, &err);
    if (!st && s->add_bos >= 0)
        st = sl_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", s->add_bos, &err);
    if (!st) st = sl_gguf_writer_finish(w, &err);
    sl_gguf_writer_destroy(w);
    CHECK_MSG(st == SL_OK, "writing %s: %s", path, err.msg);
}

static sl_status load(const char *path, sl_vocab **v, sl_error *err)
{
    sl_gguf *g;
    *v = NULL;
    sl_status st = sl_gguf_open(path, NULL, &g, err);
    if (st) return st;
    st = sl_vocab_load(g, v, err);
    sl_gguf_close(g); /* the vocab must not need the file any more */
    return st;
}

/* Tokenizes and compares with want[0, n). */
static void expect_tokens(const sl_vocab *v, const char *text, bool add_special, bool parse,
                          const int32_t *want, size_t n, int line)
{
    int32_t got[256];
    size_t n_got = 0;
    sl_error err = {0};
    const sl_status st = sl_vocab_tokenize(v, text, strlen(text), add_special, parse, got, 256,
                                           &n_got, &err);
    bool same = st == SL_OK && n_got == n && memcmp(got, want, n * sizeof *want) == 0;
    CHECK_MSG(same, "line %d: \"%s\": status %d (%s), %zu tokens (want %zu)", line, text, st,
              err.msg, n_got, n);
    if (!same) {
        for (size_t i = 0; i < n_got && i < 256; i++) fprintf(stderr, " %d", got[i]);
        fputc('\n', stderr);
    }
}
#define EXPECT_TOKENS(v, text, add, parse, ...)                                              \
    do {                                                                                     \
        const int32_t want_[] = {__VA_ARGS__};                                               \
        expect_tokens(v, text, add, parse, want_, sizeof want_ / sizeof *want_, __LINE__);  \
    } while (0)

static void expect_roundtrip(const sl_vocab *v, const char *text, size_t len, int line)
{
    static int32_t ids[1 << 14];
    static char back[1 << 16];
    size_t n = 0, nb = 0;
    sl_error err = {0};
    sl_status st = sl_vocab_tokenize(v, text, len, false, false, ids, 1 << 14, &n, &err);
    if (!st) st = sl_vocab_detokenize(v, ids, n, back, sizeof back, &nb, &err);
    CHECK_MSG(st == SL_OK && nb == len && memcmp(back, text, len) == 0,
              "line %d: round trip of \"%.*s\": status %d (%s), got \"%.*s\"", line, (int)len,
              text, st, err.msg, (int)nb, back);
    /* with BOS/EOS added, detokenize drops them again */
    st = sl_vocab_tokenize(v, text, len, true, false, ids, 1 << 14, &n, &err);
    if (!st) st = sl_vocab_detokenize(v, ids, n, back, sizeof back, &nb, &err);
    CHECK_MSG(st == SL_OK && nb == len && memcmp(back, text, len) == 0,
              "line %d: round trip (add_special) of \"%.*s\": got \"%.*s\"", line, (int)len, text,
              (int)nb, back);
}
#define EXPECT_ROUNDTRIP(v, text) expect_roundtrip(v, text, strlen(text), __LINE__)

/* ---- SPM, hand-computed ------------------------------------------------------------------ */

enum { SPM_BASE = 259 }; /* <unk> <s> </s> and 256 byte tokens */

static void test_spm(void)
{
    static const char *pieces[] = {SP, "h", "e", "l", "o", "a", "ll", "he", SP "he", "llo", "lo",
                                   "aa", "<|user|>"};
    static const float piece_score[] = {-1, -2, -2, -2, -2, -2, 5, 4, 3, 2, 6, 1, 0};
    enum { NP = sizeof pieces / sizeof *pieces };
    const char *tok[SPM_BASE + NP];
    float scores[SPM_BASE + NP];
    int32_t types[SPM_BASE + NP];
    static char bytes[256][8];
    tok[0] = "<unk>", tok[1] = "<s>", tok[2] = "</s>";
    types[0] = SL_TOKEN_UNKNOWN, types[1] = types[2] = SL_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tok[3 + b] = bytes[b];
        types[3 + b] = SL_TOKEN_BYTE;
    }
    for (int i = 0; i < SPM_BASE; i++) scores[i] = 0;
    for (int i = 0; i < NP; i++) {
        tok[SPM_BASE + i] = pieces[i];
        scores[SPM_BASE + i] = piece_score[i];
        types[SPM_BASE + i] = i == NP - 1 ? SL_TOKEN_USER_DEFINED : SL_TOKEN_NORMAL;
    }
    const spec s = {"llama", NULL, tok, SPM_BASE + NP, scores, types, NULL, 0, -1, -1, -1};
    write_vocab(tmp_path("spm.gguf"), &s);
    sl_vocab *v;
    sl_error err = {0};
    CHECK_MSG(load(tmp_path("spm.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (!v) return;
    CHECK(sl__vocab_validate(v, &err) == SL_OK);
    enum { SPc = SPM_BASE, H, E, L, O, A, LL, HE, SPHE, LLO, LO, AA, USER };
    CHECK(sl_vocab_kind_get(v) == SL_VOCAB_SPM);
    CHECK(sl_vocab_bos(v) == 1 && sl_vocab_eos(v) == 2 && sl_vocab_unk(v) == 0); /* defaults */
    CHECK(sl_vocab_add_bos(v) && !sl_vocab_add_eos(v));
    CHECK(sl_vocab_find(v, SP "he", 5) == SPHE);
    /* ▁ h e l l o: "lo" (6) first, then "ll" is stale, "he" (4), "▁he" (3), "llo" (2). */
    EXPECT_TOKENS(v, "hello", false, false, SPHE, LLO);
    /* ties go to the leftmost pair: ▁ [a a] a */
    EXPECT_TOKENS(v, "aaa", false, false, SPc, AA, A);
    /* é is no piece: its two UTF-8 bytes as <0xC3> <0xA9> */
    EXPECT_TOKENS(v, "\xc3\xa9", false, false, SPc, 3 + 0xC3, 3 + 0xA9);
    /* BOS only with add_special; EOS never (add_eos false) */
    EXPECT_TOKENS(v, "hello", true, false, 1, SPHE, LLO);
    EXPECT_TOKENS(v, "", true, false, 1);
    size_t n0 = 1;
    CHECK(sl_vocab_tokenize(v, "", 0, false, false, NULL, 0, &n0, &err) == SL_OK && n0 == 0);
    /* control text "<s>": parsed only with parse_special; the text after a special token gets
     * the prefix space again */
    EXPECT_TOKENS(v, "<s>hello", false, true, 1, SPHE, LLO);
    /* user-defined tokens are matched even without parse_special */
    EXPECT_TOKENS(v, "a<|user|>a", false, false, SPc, A, USER, SPc, A);
    int32_t ids[64];
    size_t n = 0;
    CHECK(sl_vocab_tokenize(v, "<s>hello", 8, false, false, ids, 64, &n, &err) == SL_OK);
    CHECK(n > 3 && ids[0] == SPc && ids[1] == 3 + '<'); /* as text: bytes */
    /* pieces */
    char buf[32];
    size_t nb;
    CHECK(sl_vocab_token_to_piece(v, SPHE, false, buf, sizeof buf, &nb, &err) == SL_OK &&
          nb == 3 && !strcmp(buf, " he"));
    CHECK(sl_vocab_token_to_piece(v, 3 + 0x41, false, buf, sizeof buf, &nb, &err) == SL_OK &&
          nb == 1 && buf[0] == 'A');
    CHECK(sl_vocab_token_to_piece(v, 1, false, buf, sizeof buf, &nb, &err) == SL_OK && nb == 0);
    CHECK(sl_vocab_token_to_piece(v, 1, true, buf, sizeof buf, &nb, &err) == SL_OK && nb == 3 &&
          !strcmp(buf, "<s>"));
    CHECK(sl_vocab_token_to_piece(v, SPHE, false, buf, 2, &nb, &err) == SL_ERR_RANGE && nb == 3);
    CHECK(sl_vocab_token_to_piece(v, SPM_BASE + NP, false, buf, 2, &nb, &err) == SL_ERR_RANGE);
    CHECK_CONTAINS(err.msg, "outside");
    /* detokenize: leading space of the first piece removed, bytes reassembled */
    const int32_t seq[] = {1, SPHE, LLO, SPc, 3 + 0xC3, 3 + 0xA9};
    CHECK(sl_vocab_detokenize(v, seq, 6, buf, sizeof buf, &nb, &err) == SL_OK &&
          !strcmp(buf, "hello \xc3\xa9"));
    CHECK(sl_vocab_detokenize(v, seq, 6, buf, 4, &nb, &err) == SL_ERR_RANGE && nb == 8);
    EXPECT_ROUNDTRIP(v, "hello aaa  \xc3\xa9\n\t x");
    EXPECT_ROUNDTRIP(v, " leading and trailing ");
    /* too small an output: RANGE with the full count */
    CHECK(sl_vocab_tokenize(v, "hello", 5, true, false, ids, 1, &n, &err) == SL_ERR_RANGE &&
          n == 3 && ids[0] == 1);
    sl_vocab_free(v);
}

/* ---- byte-level BPE, hand-computed --------------------------------------------------------- */

/* Tokens 0..255: GPT-2's byte symbols, so that token id == byte. */
static void byte_tokens(const char **tok, int32_t *types)
{
    static char sym[256][4];
    for (int b = 0; b < 256; b++) {
        const size_t n = sl__utf8_encode(sl__gpt2_byte_to_cp((uint8_t)b), sym[b]);
        sym[b][n] = '\0';
        tok[b] = sym[b];
        types[b] = SL_TOKEN_NORMAL;
    }
}

static void test_bpe(void)
{
    const char *tok[256 + 8];
    int32_t types[256 + 8];
    byte_tokens(tok, types);
    static const char *made[] = {"ll", "he", "llo", GS "w", "aa", "<|endoftext|>", "<|im_end|>"};
    static const char *merges[] = {"l l", "h e", "ll o", GS " w", "a a"};
    for (int i = 0; i < 7; i++) {
        tok[256 + i] = made[i];
        types[256 + i] = i < 5 ? SL_TOKEN_NORMAL : SL_TOKEN_CONTROL;
    }
    enum { LL = 256, HE, LLO, GW, AA, EOT, IMEND };
    spec s = {"gpt2", "qwen2", tok, 263, NULL, types, merges, 5, EOT, EOT, -1};
    write_vocab(tmp_path("bpe.gguf"), &s);
    sl_vocab *v;
    sl_error err = {0};
    CHECK_MSG(load(tmp_path("bpe.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (!v) return;
    CHECK(sl_vocab_kind_get(v) == SL_VOCAB_BPE && sl_vocab_pretok(v) == SL_PRETOK_QWEN2);
    CHECK(!sl_vocab_add_bos(v));
    /* h e l l o: "l l" (rank 0), "h e" (1), "ll o" (2) */
    EXPECT_TOKENS(v, "hello", false, false, HE, LLO);
    EXPECT_TOKENS(v, "hello", true, false, HE, LLO); /* add_bos false: nothing added */
    EXPECT_TOKENS(v, "aaa", false, false, AA, 'a');
    EXPECT_TOKENS(v, " world", false, false, GW, 'o', 'r', 'l', 'd');
    EXPECT_TOKENS(v, "x12", false, false, 'x', '1', '2');
    /* special tokens only with parse_special (CONTROL) */
    EXPECT_TOKENS(v, "a<|im_end|>", false, true, 'a', IMEND);
    int32_t ids[64];
    size_t n = 0;
    CHECK(sl_vocab_tokenize(v, "a<|im_end|>", 11, false, false, ids, 64, &n, &err) == SL_OK &&
          n > 2 && ids[1] == '<');
    /* EOG: eos, and <|im_end|> by its text */
    CHECK(sl_vocab_is_eog(v, EOT) && sl_vocab_is_eog(v, IMEND) && !sl_vocab_is_eog(v, HE));
    CHECK(sl_vocab_eot(v) == IMEND || sl_vocab_eot(v) == EOT);
    char buf[32];
    size_t nb;
    /* token id == byte here: 0x20's symbol is U+0120 'Ġ', its piece a space */
    CHECK(sl_vocab_token_to_piece(v, ' ', false, buf, sizeof buf, &nb, &err) == SL_OK &&
          !strcmp(buf, " "));
    CHECK(sl_vocab_token_to_piece(v, GW, false, buf, sizeof buf, &nb, &err) == SL_OK &&
          !strcmp(buf, " w"));
    CHECK(sl_vocab_token_to_piece(v, IMEND, false, buf, sizeof buf, &nb, &err) == SL_OK && nb == 0);
    CHECK(sl_vocab_token_to_piece(v, IMEND, true, buf, sizeof buf, &nb, &err) == SL_OK &&
          !strcmp(buf, "<|im_end|>"));
    /* invalid UTF-8 becomes U+FFFD, as llama.cpp */
    CHECK(sl_vocab_tokenize(v, "\xff", 1, false, false, ids, 64, &n, &err) == SL_OK && n == 3 &&
          ids[0] == 0xEF && ids[1] == 0xBF && ids[2] == 0xBD);
    EXPECT_ROUNDTRIP(v, "hello world\n\n  12345 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
    sl_vocab_free(v);

    /* the same vocabulary under llama3: merges ignored for a word that is a token */
    s.pre = "llama-bpe";
    s.add_bos = 0;
    write_vocab(tmp_path("bpe_llama3.gguf"), &s);
    CHECK_MSG(load(tmp_path("bpe_llama3.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (v) {
        CHECK(sl_vocab_pretok(v) == SL_PRETOK_LLAMA3);
        EXPECT_TOKENS(v, "hello", false, false, HE, LLO);
        EXPECT_TOKENS(v, "llo", false, false, LLO);
        sl_vocab_free(v);
    }
}

/* gpt-oss's harmony tokens get llama.cpp's overrides: channel markers USER_DEFINED (matched
 * even without parse_special), <|end|> not EOG when <|return|> and <|call|> are. */
static void test_harmony(void)
{
    const char *tok[256 + 7];
    int32_t types[256 + 7];
    byte_tokens(tok, types);
    static const char *made[] = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>",
                                 "<|end|>", "<|return|>", "<|call|>"};
    for (int i = 0; i < 7; i++) {
        tok[256 + i] = made[i];
        types[256 + i] = SL_TOKEN_CONTROL;
    }
    enum { START = 256, CHANNEL, MESSAGE, CONSTRAIN, END, RETURN, CALL };
    for (int with_call = 0; with_call < 2; with_call++) {
        static const char *merges[] = {"a b"}; /* the key is required; "ab" never occurs */
        spec s = {"gpt2", "gpt-4o", tok, with_call ? 263 : 262, NULL, types, merges, 1, RETURN,
                  RETURN, -1};
        write_vocab(tmp_path("harmony.gguf"), &s);
        sl_vocab *v;
        sl_error err = {0};
        CHECK_MSG(load(tmp_path("harmony.gguf"), &v, &err) == SL_OK, "%s", err.msg);
        if (!v) return;
        CHECK(sl_vocab_pretok(v) == SL_PRETOK_O200K && !sl_vocab_add_bos(v));
        for (int32_t id = START; id <= CONSTRAIN; id++)
            CHECK(sl_vocab_token_type(v, id) == SL_TOKEN_USER_DEFINED);
        EXPECT_TOKENS(v, "a<|channel|>b", false, false, 'a', CHANNEL, 'b');
        CHECK(sl_vocab_is_eog(v, RETURN) && sl_vocab_is_eog(v, END) == !with_call);
        CHECK(sl_vocab_token_type(v, END) ==
              (with_call ? SL_TOKEN_USER_DEFINED : SL_TOKEN_CONTROL));
        sl_vocab_free(v);
    }
}

/* FIM tokens found by text (no keys): the lowest id among a kind's texts, made CONTROL; pad,
 * repo and file separator end a generation, prefix/suffix/middle do not. */
static void test_fim(void)
{
    const char *tok[256 + 7];
    int32_t types[256 + 7];
    byte_tokens(tok, types);
    static const char *made[] = {"<PRE>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                 "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"};
    for (int i = 0; i < 7; i++) {
        tok[256 + i] = made[i];
        types[256 + i] = SL_TOKEN_NORMAL;
    }
    static const char *merges[] = {"a b"};
    spec s = {"gpt2", "qwen2", tok, 263, NULL, types, merges, 1, -1, -1, -1};
    write_vocab(tmp_path("fim.gguf"), &s);
    sl_vocab *v;
    sl_error err = {0};
    CHECK_MSG(load(tmp_path("fim.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (!v) return;
    for (int k = 0; k < 6; k++) {
        const int32_t want = 256 + (k == 0 ? 0 : k + 1); /* <PRE> is before <|fim_prefix|> */
        CHECK_MSG(sl_vocab_fim(v, k) == want, "fim %d: %d, want %d", k, sl_vocab_fim(v, k), want);
        CHECK(sl_vocab_token_type(v, want) == SL_TOKEN_CONTROL);
        CHECK(sl_vocab_is_eog(v, want) == (k >= 3));
    }
    CHECK(sl_vocab_token_type(v, 257) == SL_TOKEN_NORMAL && sl_vocab_fim(v, 6) == -1);
    sl_vocab_free(v);
}

/* llama.cpp's end-of-generation texts beyond eos/eot (Kimi-K2's [EOS] and [EOT], MiniMax's
 * [e~[, DeepSeek's sentence end, </s>) and solar-open's <|end|> rule (<|calls|> + <|flush|>). */
static void test_eog_texts(void)
{
    const char *tok[256 + 8];
    int32_t types[256 + 8];
    byte_tokens(tok, types);
    static const char *made[] = {
        "[EOS]", "[EOT]", "[e~[", "</s>",
        ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "<|end|>",
        "<|calls|>", "<|flush|>"};
    for (int i = 0; i < 8; i++) {
        tok[256 + i] = made[i];
        types[256 + i] = SL_TOKEN_CONTROL;
    }
    enum { EOS_K2 = 256, EOT_K2, MINIMAX, SLASH_S, DS_END, END, CALLS, FLUSH };
    for (int solar = 0; solar < 2; solar++) {
        static const char *merges[] = {"a b"};
        spec s = {"gpt2", "kimi-k2", tok, solar ? 264 : 262, NULL, types, merges, 1, -1, -1, -1};
        write_vocab(tmp_path("eog.gguf"), &s);
        sl_vocab *v;
        sl_error err = {0};
        CHECK_MSG(load(tmp_path("eog.gguf"), &v, &err) == SL_OK, "%s", err.msg);
        if (!v) return;
        for (int32_t id = EOS_K2; id <= DS_END; id++) CHECK(sl_vocab_is_eog(v, id));
        CHECK(sl_vocab_is_eog(v, END) == !solar && !sl_vocab_is_eog(v, 'a'));
        sl_vocab_free(v);
    }
}

/* ---- pre-tokenizer splits (checked against HF tokenizers' regexes by hand) ---------------- */

static void expect_split(const char *pre, const char *text, const char *const *want, size_t nw,
                         int line)
{
    uint32_t cps[256];
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len;) cps[n++] = sl__utf8_decode(text, len, &i);
    size_t *lens = NULL, nwords = 0;
    sl_error err = {0};
    const sl__pretok_def *d = sl__pretok_find(pre);
    sl__pretok pt;
    CHECK(d && sl__pretok_init(&pt, d, &err) == SL_OK);
    CHECK(sl__pretok_split(&pt, cps, n, &lens, &nwords, &err) == SL_OK);
    sl__pretok_free(&pt);
    bool same = nwords == nw;
    size_t at = 0;
    for (size_t k = 0; same && k < nw; k++) {
        char word[256];
        size_t wl = 0;
        for (size_t i = at; i < at + lens[k]; i++) wl += sl__utf8_encode(cps[i], word + wl);
        same = wl == strlen(want[k]) && memcmp(word, want[k], wl) == 0;
        at += lens[k];
    }
    CHECK_MSG(same, "line %d: split of \"%s\" (pre %s): %zu words, want %zu", line, text, pre,
              nwords, nw);
    free(lens);
}
#define EXPECT_SPLIT(pre, text, ...)                                                         \
    do {                                                                                     \
        static const char *const w_[] = {__VA_ARGS__};                                       \
        expect_split(pre, text, w_, sizeof w_ / sizeof *w_, __LINE__);                       \
    } while (0)

static void test_pretok(void)
{
    const char *t = "I'm 12345  ok!!\n\nyes";
    EXPECT_SPLIT("gpt-2", t, "I", "'m", " 12345", " ", " ok", "!!", "\n", "\n", "yes");
    EXPECT_SPLIT("llama-bpe", t, "I", "'m", " ", "123", "45", " ", " ok", "!!\n\n", "yes");
    EXPECT_SPLIT("qwen2", t, "I", "'m", " ", "1", "2", "3", "4", "5", " ", " ok",
                 "!!\n\n", "yes");
    EXPECT_SPLIT("default", t, "I", "'", "m", " ", "123", "45", " ", " ok", "!!", "\n",
                 "\n", "yes");
    EXPECT_SPLIT("default", "a$$b+12345,x", "a", "$$", "b", "+", "123", "45", ",", "x");
    /* case-insensitive contractions for llama3, not for gpt2 */
    EXPECT_SPLIT("llama-bpe", "YOU'RE", "YOU", "'RE");
    EXPECT_SPLIT("gpt-2", "YOU'RE", "YOU", "'", "RE");
    /* tokenizer.json's (?i:) folds U+017F (long s) onto 's' (llama.cpp's '[sS] does not) */
    EXPECT_SPLIT("llama-bpe", "A'\xc5\xbfx it'\xc5\xbf", "A", "'\xc5\xbf", "x", " it", "'\xc5\xbf");
    EXPECT_SPLIT("qwen2", "A'\xc5\xbfx it'\xc5\xbf", "A", "'\xc5\xbf", "x", " it", "'\xc5\xbf");
    /* [^\r\n\p{L}\p{N}]?\p{L}+ takes one leading non-letter; Unicode letters and numbers */
    EXPECT_SPLIT("qwen2", "\xc2\xab" "caf\xc3\xa9\xc2\xbb \xe6\x97\xa5\xe6\x9c\xac\xc2\xbd",
                 "\xc2\xab" "caf\xc3\xa9", "\xc2\xbb", " \xe6\x97\xa5\xe6\x9c\xac", "\xc2\xbd");
    /* o200k: words split at lower->upper, upper runs keep a trailing lowercase tail, (?i)
     * contractions stay on the word, [\r\n/]* after punctuation, marks count as letters */
    EXPECT_SPLIT("gpt-4o", t, "I'm", " ", "123", "45", " ", " ok", "!!\n\n", "yes");
    EXPECT_SPLIT("gpt-4o", "helloWORLD XMLHttp YOU'RE a/b//\n", "hello", "WORLD", " XMLHttp",
                 " YOU'RE", " a", "/b", "//\n");
    EXPECT_SPLIT("gpt-4o", "x'\xc5\xbf e\xcc\x81T\xcc\x81", "x'\xc5\xbf", " e\xcc\x81",
                 "T\xcc\x81");
    /* table pre-tokenizers (regex stages); expected splits from Hugging Face tokenizers */
    EXPECT_SPLIT("deepseek-v3", t, "I", "'m", " ", "123", "45", " ", " ok", "!!\n\n", "yes");
    EXPECT_SPLIT("kimi-k2", t, "I'm", " ", "123", "45", " ", " ok", "!!\n\n", "yes");
    static const char jp[] = "x.Foo \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86"
                             "\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88\xe6\x9d\xb1\xe4\xba\xac "
                             "ab\xcc\x81" "c";
    EXPECT_SPLIT("deepseek-v3", jp, "x", ".Foo", " ",
                 "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad"
                 "\xe3\x82\xb9\xe3\x83\x88\xe6\x9d\xb1\xe4\xba\xac", " ab\xcc\x81" "c");
    /* bailingmoe's '(?i:[sdmt]|...): the class folds case (from HF tokenizers) */
    EXPECT_SPLIT("bailingmoe", "YOU'RE 'Sx 'Dog \xc5\xbf'\xc5\xbfx", "YOU", "'RE", " '", "Sx", " '",
                 "Dog", " \xc5\xbf", "'\xc5\xbf", "x");
    EXPECT_SPLIT("bailingmoe", "x'Dog", "x", "'D", "og");
    /* Kimi: Han runs apart from kana (\p{Han} vs letters && [^\p{Han}]) */
    EXPECT_SPLIT("kimi-k2", jp, "x", ".Foo", " ", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
                 "\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
                 "\xe6\x9d\xb1\xe4\xba\xac", " ab\xcc\x81" "c");
    CHECK(sl__unicode_is_lower(0xDF) && sl__unicode_is_upper(0x1C5) &&
          !sl__unicode_is_lower(0x2B0) && !sl__unicode_is_upper(0x2B0) &&
          sl__unicode_is_mark(0x301) && !sl__unicode_is_mark('a'));
    CHECK(sl__unicode_is_letter(0x65E5) && sl__unicode_is_number(0xBD) &&
          !sl__unicode_is_letter(0xBB) && sl__unicode_is_whitespace(0x3000) &&
          !sl__unicode_is_whitespace(0x200B) && sl__unicode_is_punct(0xAB));
}

/* ---- loading errors ----------------------------------------------------------------------- */

static void test_errors(void)
{
    const char *tok[] = {"a", "b", "a b"};
    const char *merges[] = {"a b"};
    sl_vocab *v;
    sl_error err = {0};
    spec s = {"bert", NULL, tok, 3, NULL, NULL, NULL, 0, -1, -1, -1};
    write_vocab(tmp_path("bert.gguf"), &s);
    CHECK(load(tmp_path("bert.gguf"), &v, &err) == SL_ERR_UNSUPPORTED && v == NULL);
    CHECK_CONTAINS(err.msg, "'bert'");
    s = (spec){"gpt2", "foo-bpe", tok, 3, NULL, NULL, merges, 1, -1, -1, -1};
    write_vocab(tmp_path("foo.gguf"), &s);
    CHECK(load(tmp_path("foo.gguf"), &v, &err) == SL_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "'foo-bpe'");
    s = (spec){"llama", NULL, NULL, 0, NULL, NULL, NULL, 0, -1, -1, -1};
    write_vocab(tmp_path("notok.gguf"), &s);
    CHECK(load(tmp_path("notok.gguf"), &v, &err) == SL_ERR_NOT_FOUND);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.tokens");
    const char *dup[] = {"a", "b", "a"};
    s = (spec){"llama", NULL, dup, 3, NULL, NULL, NULL, 0, -1, -1, -1};
    write_vocab(tmp_path("dup.gguf"), &s);
    CHECK(load(tmp_path("dup.gguf"), &v, &err) == SL_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "duplicates token 0");
    /* a name llama.cpp knows whose tokenizer Sluice does not run: refused by name */
    s = (spec){"gpt2", "gemma4", tok, 3, NULL, NULL, merges, 1, -1, -1, -1};
    write_vocab(tmp_path("gemma4.gguf"), &s);
    CHECK(load(tmp_path("gemma4.gguf"), &v, &err) == SL_ERR_UNSUPPORTED && v == NULL);
    CHECK_CONTAINS(err.msg, "'gemma4'");
    /* table rows carry llama.cpp's flags: tekken adds BOS (and needs its id), deepseek-v3 not */
    s = (spec){"gpt2", "tekken", tok, 3, NULL, NULL, merges, 1, -1, -1, -1};
    write_vocab(tmp_path("tekken_nobos.gguf"), &s);
    CHECK(load(tmp_path("tekken_nobos.gguf"), &v, &err) == SL_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "bos_token_id");
    s.bos = 0;
    write_vocab(tmp_path("tekken.gguf"), &s);
    CHECK_MSG(load(tmp_path("tekken.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (v) {
        CHECK(sl_vocab_pretok(v) == SL_PRETOK_REGEX && sl_vocab_add_bos(v));
        sl_vocab_free(v);
    }
    s.pre = "deepseek-v3";
    write_vocab(tmp_path("dsv3.gguf"), &s);
    CHECK_MSG(load(tmp_path("dsv3.gguf"), &v, &err) == SL_OK, "%s", err.msg);
    if (v) {
        CHECK(sl_vocab_pretok(v) == SL_PRETOK_REGEX && !sl_vocab_add_bos(v));
        sl_vocab_free(v);
    }
    s = (spec){"gpt2", "qwen2", tok, 3, NULL, NULL, merges, 1, -1, -1, 1};
    write_vocab(tmp_path("nobos.gguf"), &s);
    CHECK(load(tmp_path("nobos.gguf"), &v, &err) == SL_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "bos_token_id");
}

/* ---- mkmodel vocabularies: round trips ------------------------------------------------------ */

static const char *const k_texts[] = {
    "Hello world", "the model has one expert per layer",
    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\xf0\x9f\x91\x8d",
    "a  b   c\t\td", "   leading", "trailing   ", "line1\nline2\r\n\r\nline3\n",
    "1 12 123 1234 12345 3.14159", "x\xc2\xa0y\xe3\x80\x80z", "",
};

static void test_mkmodel(const char *sluice)
{
    static const char *const archs[] = {"llama", "qwen3moe", "olmoe"};
    for (int a = 0; a < 3; a++) {
        char cmd[2048];
        const char *path = tmp_path(archs[a]);
        snprintf(cmd, sizeof cmd, "'%s' mkmodel --arch %s --vocab 1024 -o '%s' >/dev/null", sluice,
                 archs[a], path);
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        sl_vocab *v;
        sl_error err = {0};
        CHECK_MSG(load(path, &v, &err) == SL_OK, "%s: %s", archs[a], err.msg);
        if (!v) continue;
        CHECK(sl_vocab_n_tokens(v) == 1024);
        CHECK(sl__vocab_validate(v, &err) == SL_OK);
        for (size_t i = 0; i < sizeof k_texts / sizeof *k_texts; i++)
            EXPECT_ROUNDTRIP(v, k_texts[i]);
        int32_t ids[8];
        size_t n;
        if (a == 0) { /* SPM: BOS added, "▁the" is a piece */
            CHECK(sl_vocab_tokenize(v, "the", 3, true, false, ids, 8, &n, &err) == SL_OK);
            CHECK(n == 2 && ids[0] == sl_vocab_bos(v) && ids[1] == sl_vocab_find(v, SP "the", 6));
        } else { /* BPE (add_bos_token false): no BOS; "Ġthe" is a token */
            CHECK(sl_vocab_tokenize(v, " the", 4, true, false, ids, 8, &n, &err) == SL_OK);
            CHECK(n == 1 && ids[0] == sl_vocab_find(v, GS "the", 5));
        }
        CHECK(sl_vocab_is_eog(v, sl_vocab_eos(v)));
        if (a == 1) { /* chat markup: specials parsed, then the text between */
            CHECK(sl_vocab_tokenize(v, "<|im_start|> the<|im_end|>", 26, false, true, ids, 8, &n,
                                    &err) == SL_OK);
            CHECK(n == 3 && ids[0] == sl_vocab_find(v, "<|im_start|>", 12) &&
                  ids[2] == sl_vocab_eos(v));
        }
        sl_vocab_free(v);
    }
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp ? tmp : "/tmp");
    test_spm();
    test_bpe();
    test_harmony();
    test_eog_texts();
    test_fim();
    test_pretok();
    test_errors();
    if (argc > 1) test_mkmodel(argv[1]);
    else fprintf(stderr, "tokenizer_test: no sluice binary given; mkmodel round trips skipped\n");
    return sl_test_finish("tokenizer_test");
}
