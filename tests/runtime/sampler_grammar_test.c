/* Grammar-constrained sampling (runtime/text/sampler_grammar.h through sl_sampler_sample) on a
 * real SPM vocabulary written to a GGUF: every pick, at temperature 0 and sampled, equals an
 * independent oracle (a fresh matcher fed the text so far plus the token's piece; EOS only where
 * the grammar may end). Greedy picks are the argmax of the masked row on all three paths: the
 * first pick allowed, an allowed token among the best-ranked, and the whole-vocabulary mask
 * (fillers outrank every allowed token). Pieces cut inside a UTF-8 sequence (byte tokens),
 * control tokens never picked, the end state, and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/prng.h"
#include "gguf/gguf.h"
#include "runtime/sluice.h"
#include "runtime/text/grammar.h"
#include "runtime/text/sampler_grammar.h"
#include "runtime/text/tokenizer.h"
#include "tests/testing.h"

enum { N_FILL = 120, N_BASE = 24, N_TOK = N_BASE + N_FILL };

static const char *k_base[N_BASE] = {
    "<unk>", "<s>", "</s>", "y", "e", "s", "n", "o", "ye", "yes", "no", "\xe2\x96\x81yes",
    "{", "}", "\"", "a", "b", "ab", "abc", "\xc3\xa9", "<0xC3>", "<0xA9>", "<ctl>", "<0x00>"};

static sl_vocab *make_vocab(const char *path)
{
    static char fill[N_FILL][8];
    const char *tok[N_TOK];
    float scores[N_TOK];
    int32_t types[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        if (i < N_BASE) {
            tok[i] = k_base[i];
        } else {
            snprintf(fill[i - N_BASE], sizeof fill[0], "q%d", i - N_BASE);
            tok[i] = fill[i - N_BASE];
        }
        scores[i] = (float)-i;
        types[i] = i == 0 ? 2 : i <= 2 || i == 22 ? 3 : (i == 20 || i == 21 || i == 23) ? 6 : 1;
    }
    sl_error err = {0};
    sl_gguf_writer *w = NULL;
    sl_status st = sl_gguf_writer_create(path, NULL, &w, &err);
    if (!st) st = sl_gguf_writer_set_str(w, "general.architecture", "llama", &err);
    if (!st) st = sl_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", &err);
    if (!st) st = sl_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, N_TOK, &err);
    if (!st) st = sl_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SL_GGUF_F32, scores, N_TOK, &err);
    if (!st) st = sl_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SL_GGUF_I32, types, N_TOK, &err);
    if (!st) st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, &err);
    if (!st) st = sl_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, &err);
    if (!st) st = sl_gguf_writer_finish(w, &err);
    sl_gguf_writer_destroy(w);
    sl_gguf *g = NULL;
    sl_vocab *v = NULL;
    if (!st) st = sl_gguf_open(path, NULL, &g, &err);
    if (!st) st = sl_vocab_load(g, &v, &err);
    sl_gguf_close(g);
    CHECK_MSG(st == SL_OK, "vocabulary: %s", err.msg);
    return v;
}

/* The oracle: whether token t may follow text[0, n) under gbnf. */
static bool allowed(const sl_vocab *v, const char *gbnf, const char *text, size_t n, int32_t t)
{
    sl_grammar *g = NULL;
    sl_gmatch *m = NULL;
    sl_error err = {0};
    bool ok = false;
    if (sl_grammar_parse(gbnf, strlen(gbnf), &g, &err) || sl_gmatch_create(g, &m, &err) ||
        sl_gmatch_accept(m, text, n, &err)) {
        CHECK_MSG(false, "oracle: %s", err.msg);
    } else if (sl_vocab_is_eog(v, t)) {
        ok = sl_gmatch_can_end(m);
    } else {
        char piece[64];
        size_t len = 0;
        ok = !sl_vocab_token_to_piece(v, t, false, piece, sizeof piece, &len, &err) && len &&
             !memchr(piece, 0, len) && !sl_gmatch_accept(m, piece, len, &err);
    }
    sl_gmatch_free(m);
    sl_grammar_free(g);
    return ok;
}

static float gauss(uint64_t s[4])
{
    const double u = ((double)(sl_prng_next(s) >> 11) + 0.5) * 0x1.0p-53;
    const double w = ((double)(sl_prng_next(s) >> 11) + 0.5) * 0x1.0p-53;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * w));
}

/* Generates under gbnf from random rows until the grammar is done (or 40 steps), checking each
 * pick against the oracle; mode 0: random rows, 1: fillers outrank everything (whole-vocabulary
 * mask for greedy), 2: one allowed token boosted to rank ~3 (the best-ranked path). */
static void run(const sl_vocab *v, const char *gbnf, float temp, int32_t top_k, int mode,
                uint64_t seed, int *n_steps)
{
    const sl_sampler_options o = {sizeof o, temp, top_k, 1.0f, 0.0f, seed};
    sl_sampler *s = NULL;
    sl_error err = {0};
    CHECK(sl_sampler_create(&o, &s, &err) == SL_OK);
    CHECK_MSG(sl__sampler_grammar_set(s, v, gbnf, &err) == SL_OK, "%s", err.msg);
    CHECK(!sl_sampler_is_greedy(s));
    uint64_t rng[4];
    sl_prng_seed(rng, seed * 7919 + (uint64_t)mode);
    char text[512];
    size_t n = 0;
    float row[N_TOK];
    for (int step = 0; step < 40 && !sl_sampler_grammar_done(s); step++) {
        for (int i = 0; i < N_TOK; i++) row[i] = gauss(rng);
        if (mode == 1)
            for (int i = N_BASE; i < N_TOK; i++) row[i] += 10;
        bool ok[N_TOK];
        int n_ok = 0;
        for (int32_t t = 0; t < N_TOK; t++) n_ok += ok[t] = allowed(v, gbnf, text, n, t);
        if (mode == 2) { /* the first allowed token (by id) just below the two best */
            float best = -INFINITY;
            for (int i = 0; i < N_TOK; i++) best = row[i] > best ? row[i] : best;
            for (int32_t t = 0; t < N_TOK; t++)
                if (ok[t]) {
                    row[t] = best - 0.01f;
                    break;
                }
            for (int i = N_BASE; i < N_BASE + 2; i++) row[i] = best + 1;
        }
        int32_t tok = -1;
        const sl_status st = sl_sampler_sample(s, row, N_TOK, &tok, &err);
        if (!n_ok) { /* nothing can continue: the error, not a pick */
            CHECK_MSG(st == SL_ERR_INVALID, "step %d: status %d with no allowed token", step, st);
            break;
        }
        CHECK_MSG(st == SL_OK && tok >= 0 && ok[tok], "%s temp %g mode %d step %d: token %d "
                  "(allowed %d) %s", gbnf, temp, mode, step, tok, tok >= 0 ? ok[tok] : -1, err.msg);
        if (st || tok < 0) break;
        if (temp <= 0) {
            int32_t want = -1;
            for (int32_t t = 0; t < N_TOK; t++)
                if (ok[t] && (want < 0 || row[t] > row[want])) want = t;
            CHECK_MSG(tok == want, "greedy mode %d step %d: %d, the masked argmax is %d", mode,
                      step, tok, want);
        }
        (*n_steps)++;
        if (sl_vocab_is_eog(v, tok)) continue;
        size_t len = 0;
        sl_vocab_token_to_piece(v, tok, false, text + n, sizeof text - n, &len, &err);
        n += len;
    }
    sl_sampler_destroy(s);
}

int main(void)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char path[600];
    snprintf(path, sizeof path, "%s/sampler_grammar_vocab.gguf", tmp ? tmp : "/tmp");
    sl_vocab *v = make_vocab(path);
    if (!v) return sl_test_finish("sampler_grammar_test");
    const char *grammars[] = {
        "root ::= \"yes\" | \"no\"",
        "root ::= \"{\" (\"ab\" | \"c\" | \"\xc3\xa9\")* \"}\"",   /* é from one token or two bytes */
        "root ::= [a-c]+ (\" yes\")?",                             /* ends or goes on */
        "root ::= \"q1\" \"q2\"* \"}\"",
    };
    int steps = 0;
    for (size_t g = 0; g < sizeof grammars / sizeof *grammars; g++)
        for (int mode = 0; mode < 3; mode++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                run(v, grammars[g], 0.0f, 0, mode, seed, &steps);      /* greedy */
                run(v, grammars[g], 1.0f, 3, mode, seed, &steps);      /* top-k: best-ranked */
                run(v, grammars[g], 1.0f, 0, mode, seed, &steps);      /* top-k off: mask */
            }
    CHECK_MSG(steps > 500, "only %d sampled steps", steps);

    /* control tokens, the NUL byte token and EOS before the end are never picked; EOS ends */
    sl_sampler *s = NULL;
    sl_error err = {0};
    const sl_sampler_options greedy = {sizeof greedy, 0, 0, 1, 0, 0};
    CHECK(sl_sampler_create(&greedy, &s, &err) == SL_OK);
    CHECK(sl__sampler_grammar_set(s, v, "root ::= \"a\"+", &err) == SL_OK);
    float row[N_TOK];
    for (int i = 0; i < N_TOK; i++) row[i] = 0;
    row[22] = row[23] = row[2] = row[1] = 100; /* <ctl>, <0x00>, </s>, <s> */
    int32_t tok = -1;
    CHECK(sl_sampler_sample(s, row, N_TOK, &tok, &err) == SL_OK && tok == 15); /* "a" */
    CHECK(sl_sampler_sample(s, row, N_TOK, &tok, &err) == SL_OK && tok == 2);  /* may end: EOS */
    CHECK(sl_sampler_grammar_done(s));
    /* a malformed grammar leaves the sampler as it was; "" removes the grammar */
    CHECK(sl__sampler_grammar_set(s, v, "root ::= (", &err) == SL_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "line 1, column 11");
    CHECK(sl__sampler_grammar_set(s, v, "", &err) == SL_OK && sl_sampler_is_greedy(s));
    CHECK(!sl_sampler_grammar_done(s));
    CHECK(sl_sampler_sample(s, row, N_TOK, &tok, &err) == SL_OK && tok == 1);
    sl_sampler_destroy(s);
    sl_vocab_free(v);
    return sl_test_finish("sampler_grammar_test");
}
