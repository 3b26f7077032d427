/* runtime/text/regex and the table pre-tokenizers built on it.
 *
 * 1. Malformed or unsupported patterns are refused with a message naming pattern and fault.
 * 2. Matching semantics (leftmost-first alternation, greedy repeats that give back, lookahead,
 *    anchors at the fragment's ends, classes with intersection, (?i:)), on small cases.
 * 3. The regex engine against the hand-written splitters of pretok.c (llama.cpp's custom gpt2
 *    and llama3 code, the o200k splitter, the 4-stage default): the same regexes, run as table
 *    stages, must give the same words on 3,000 random texts over an alphabet of the classes the
 *    patterns test. Two independent implementations of one definition.
 * 4. Every row of the pre-tokenizer table compiles, and splits long hostile texts (whitespace
 *    runs, letters without end, nested-repeat bait) into words that tile the text; its memo
 *    stays within 64 bits per code point.
 * Tokenization against Hugging Face and the models' own test files is in
 * tokenizer_vs_reference.py and tokenizer_real_vocab.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/regex.h"
#include "runtime/text/unicode.h"
#include "runtime/text/vocab_impl.h"
#include "tests/testing.h"

static size_t decode(const char *text, uint32_t *cps)
{
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len;) cps[n++] = sl__utf8_decode(text, len, &i);
    return n;
}

static void expect_refused(const char *pattern, const char *why)
{
    sl__regex *re = (sl__regex *)1;
    sl_error err = {0};
    CHECK_MSG(sl__regex_compile(pattern, &re, &err) == SL_ERR_INVALID && re == NULL,
              "pattern '%s' compiled", pattern);
    CHECK_MSG(strstr(err.msg, why) && strstr(err.msg, pattern), "pattern '%s': message '%s'",
              pattern, err.msg);
}

static void test_refused(void)
{
    expect_refused("(ab", "group without )");
    expect_refused("ab)", "unbalanced )");
    expect_refused("[ab", "class without ]");
    expect_refused("a{3,1}", "m < n");
    expect_refused("a{2000}", "over 1000");
    expect_refused("\\q", "unsupported escape");
    expect_refused("\\d", "unsupported escape");
    expect_refused("\\p{Greek}", "unknown \\p{} class");
    expect_refused("[z-a]", "range out of order");
    expect_refused("a*?", "lazy or possessive");
    expect_refused("a++", "lazy or possessive");
    expect_refused("(?<=a)b", "unsupported group");
    expect_refused("(?=a+)", "lookahead body");
    /* Perl and Oniguruma end a loop at an empty pass ("x(?:b?|c)+" on "xcc" is "x"); the memo
     * would instead make such a pass fail and backtrack into the body ("xcc") */
    expect_refused("x(?:b?|c)+", "unbounded repeat of what can match empty");
    expect_refused("(?:a|(?=b))*", "unbounded repeat of what can match empty");
    expect_refused("(?:a*b*){2,}", "unbounded repeat of what can match empty");
    expect_refused("*a", "quantifier without atom");
    expect_refused("(?!a)*", "quantified assertion");
    expect_refused("[a&&b]", "&& takes one [class]");
    expect_refused("(?i:[\\p{Lu}])", "in a (?i:) class");
    expect_refused("a\\", "ends in a backslash");
    expect_refused("(((((a{1000}){1000}){1000})))", "instructions");
    sl_error err = {0};
    CHECK(sl__regex_compile(NULL, &(sl__regex *){NULL}, &err) == SL_ERR_INVALID);
    CHECK(sl__regex_compile("a", NULL, &err) == SL_ERR_INVALID);
    sl__regex_free(NULL);
}

/* The words of text under one pattern as a single isolated split, joined by '|'. */
static void expect_words(const char *pattern, const char *text, const char *want)
{
    sl__regex *re = NULL;
    sl_error err = {0};
    CHECK_MSG(sl__regex_compile(pattern, &re, &err) == SL_OK, "%s: %s", pattern, err.msg);
    if (!re) return;
    uint32_t cps[256];
    uint16_t fl[256];
    const size_t n = decode(text, cps);
    for (size_t i = 0; i < n; i++) fl[i] = sl__unicode_flags(cps[i]);
    sl__regex_scratch sc = {0};
    char got[1024];
    size_t gl = 0, pos = 0, ms, me;
    int r;
    while (pos < n && (r = sl__regex_find(re, cps, fl, 0, n, pos, &ms, &me, &sc)) == 1) {
        for (size_t i = pos; i < me; i++) {
            if (i == ms && ms > pos) got[gl++] = '|';
            gl += sl__utf8_encode(cps[i], got + gl);
        }
        if (me < n) got[gl++] = '|';
        pos = me;
    }
    for (size_t i = pos; i < n; i++) gl += sl__utf8_encode(cps[i], got + gl);
    got[gl] = '\0';
    CHECK_MSG(!strcmp(got, want), "'%s' on \"%s\": got \"%s\", want \"%s\"", pattern, text, got,
              want);
    sl__regex_scratch_free(&sc);
    sl__regex_free(re);
}

static void test_semantics(void)
{
    expect_words("ab|a", "aab", "a|ab");            /* leftmost, then first alternative */
    expect_words("a|ab", "ab", "a|b");              /* first alternative, not longest */
    expect_words("\\s+(?!\\S)", "a   b", "a|  | b"); /* greedy gives one back to the lookahead */
    expect_words("\\s+$", "a  b  ", "a  b|  ");     /* $ is the fragment's end */
    expect_words("^x", "xax", "x|ax");
    expect_words("\\p{N}{1,3}", "1234567", "123|456|7");
    expect_words("x{2,}", "xxxxx x", "xxxxx| x");
    expect_words("(?i:'s|'re)", "A'S b'Re c'\xc5\xbf", "A|'S| b|'Re| c|'\xc5\xbf"); /* U+017F */
    /* classes fold too, negated ones after folding (Oniguruma: [^s] refuses S and U+017F) */
    expect_words("'(?i:[sdmt]|ll)", "x'Sy'\xc5\xbf'LLz'q", "x|'S|y|'\xc5\xbf|'LL|z'q");
    expect_words("(?i:[^s])+", "sSab\xc5\xbf" "c", "sS|ab|\xc5\xbf|c");
    expect_words("(?i:[j-l]+)", "xJKL\xe2\x84\xaa" "d", "x|JKL\xe2\x84\xaa|d"); /* U+212A */
    expect_words("[\\p{L}&&[^\\p{Han}]]+", "ab\xe6\x97\xa5" "cd", "ab|\xe6\x97\xa5|cd");
    expect_words("[^\\s\\p{L}]+", "ab !?x", "ab |!?|x");
    expect_words("[\\-a]+", "-a-b", "-a-|b");
    expect_words("(?:ab)+c?", "ababcab", "ababc|ab");
    expect_words("a.c", "abc a\nc", "abc| a\nc");
    expect_words("(?=[\\p{L}])[^a-z]+", "ABc12D", "AB|c12|D");
    expect_words("\\p{Lu}\\p{Ll}+|\\p{Lt}|\\p{Lm}|\\p{S}|\\p{M}", "Ab\xc7\x85\xca\xb0+e\xcc\x81",
                 "Ab|\xc7\x85|\xca\xb0|+|e|\xcc\x81");
    expect_words("", "abc", "abc");       /* empty matches are not words */
    expect_words("x*", "aaxxa", "aa|xx|a"); /* nor empty matches of a star */
}

/* ---- engine vs hand-written splitters ---------------------------------------------------- */

/* the regexes the hand-written splitters implement, as the models' tokenizer.json write them
 * (llama3 / qwen2: (?i:) contractions, which fold U+017F; llama.cpp's '[sS] rewrite does not) */
#define L3_HEAD "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define L3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define O200K_C "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
static const char *const k_gpt2_re[] = {GPT2, NULL};
static const char *const k_llama3_re[] = {L3_HEAD "\\p{N}{1,3}" L3_TAIL, NULL};
static const char *const k_qwen2_re[] = {L3_HEAD "\\p{N}" L3_TAIL, NULL};
static const char *const k_o200k_re[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" O200K_C
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" O200K_C
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const k_default_re[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+",
                                           "[0-9][0-9][0-9]", NULL};

static size_t *split(const sl__pretok_def *d, const uint32_t *cps, size_t n, size_t *nw)
{
    sl__pretok pt;
    sl_error err = {0};
    size_t *lens = NULL;
    CHECK_MSG(sl__pretok_init(&pt, d, &err) == SL_OK, "%s: %s", d->name, err.msg);
    CHECK_MSG(sl__pretok_split(&pt, cps, n, &lens, nw, &err) == SL_OK, "%s: %s", d->name,
              err.msg);
    sl__pretok_free(&pt);
    return lens;
}

static void test_vs_handwritten(void)
{
    /* letters of each case class, marks, numbers, whitespace kinds, contraction bait,
     * punctuation and symbols (the default chain's [\p{P}$+<=>^~|]), CJK, emoji */
    static const uint32_t k_alpha[] = {
        'a', 'b', 'Z', 'Q', 0xE9, 0xC9, 0x1C5, 0x2B0, 0x65E5, 0x306E, 0x301, 0x20DD, '0', '7',
        0xBD, 0x663, ' ', ' ', ' ', '\t', '\n', '\r', 0xA0, 0x3000, 0x2028, '\'', '\'', 's',
        'S', 'l', 'L', 'r', 'e', 'E', 'd', 't', 'm', 'v', 0x17F, '!', '.', '/', '$', '+', '<',
        '^', '|', '~', '_', '-', 0x1F600, 0x200D, 0xFFFD, 0x2014};
    const size_t na = sizeof k_alpha / sizeof *k_alpha;
    struct {
        const char *hand;
        const char *const *re;
    } pairs[] = {{"gpt-2", k_gpt2_re},   {"llama-bpe", k_llama3_re}, {"qwen2", k_qwen2_re},
                 {"gpt-4o", k_o200k_re}, {"default", k_default_re}};
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    uint32_t cps[96];
    int bad = 0;
    for (int iter = 0; iter < 3000; iter++) {
        const size_t n = 1 + sl_test_splitmix64(&seed) % 95;
        for (size_t i = 0; i < n; i++) cps[i] = k_alpha[sl_test_splitmix64(&seed) % na];
        for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
            const sl__pretok_def *hand = sl__pretok_find(pairs[k].hand);
            const sl__pretok_def table = {"test", SL_PRETOK_REGEX, pairs[k].re, 0};
            size_t nh = 0, nr = 0;
            size_t *lh = split(hand, cps, n, &nh), *lr = split(&table, cps, n, &nr);
            const bool same = lh && lr && nh == nr && !memcmp(lh, lr, nh * sizeof *lh);
            if (!same && bad++ < 5) {
                fprintf(stderr, "%s: %zu words by hand, %zu by regex; text:", pairs[k].hand, nh,
                        nr);
                for (size_t i = 0; i < n; i++) fprintf(stderr, " %X", (unsigned)cps[i]);
                fprintf(stderr, "\n");
            }
            free(lh);
            free(lr);
        }
    }
    CHECK_MSG(bad == 0, "%d texts split differently by the engine and the splitters", bad);
}

/* ---- every table row on hostile texts ------------------------------------------------------ */

static void test_table_rows(void)
{
    enum { N = 60000 };
    uint32_t *cps = malloc(N * sizeof *cps);
    CHECK(cps != NULL);
    if (!cps) return;
    /* four texts: a whitespace run ending in a letter, one letter run, "a " pairs ending in
     * '!' (bait for exaone-moe's (\p{L}\p{M}*( \p{L}\p{M}*)*)+), digits with marks */
    for (int kind = 0; kind < 4; kind++) {
        for (size_t i = 0; i < N; i++)
            cps[i] = kind == 0 ? (i + 1 == N ? 'x' : ' ')
                     : kind == 1 ? 0xE9
                     : kind == 2 ? (i + 1 == N ? '!' : i % 2 ? ' ' : 'a')
                                 : (i % 3 ? '1' : 0x301);
        size_t rows = 0;
        for (const sl__pretok_def *d; (d = sl__pretok_at(rows)); rows++) {
            if (d->kind == SL_PRETOK_NONE) continue;
            size_t nw = 0, sum = 0;
            size_t *lens = split(d, cps, N, &nw);
            for (size_t k = 0; lens && k < nw; k++) {
                CHECK_MSG(lens[k] > 0, "%s: empty word", d->name);
                sum += lens[k];
            }
            CHECK_MSG(lens && sum == N, "%s: words cover %zu of %d code points", d->name, sum, N);
            free(lens);
        }
        CHECK(rows > 70);
    }
    free(cps);
}

/* The memo's size: bits for the join points only, so each table regex keeps at most 64 bits
 * per code point of a fragment (one per instruction before: 1,136 for jais-2's unrolled
 * \s{512}(?!\S)|\s{256}..., 142 MB of memo on a 10^6-code-point text). */
static void test_memo_size(void)
{
    enum { N = 6399 };
    static uint32_t cps[N];
    static uint16_t fl[N];
    for (size_t i = 0; i < N; i++) {
        cps[i] = i % 7 ? ' ' : 'a';
        fl[i] = sl__unicode_flags(cps[i]);
    }
    for (size_t r = 0; sl__pretok_at(r); r++) {
        const sl__pretok_def *d = sl__pretok_at(r);
        for (size_t k = 0; d->re && d->re[k]; k++) {
            sl__regex *re = NULL;
            sl_error err = {0};
            CHECK_MSG(sl__regex_compile(d->re[k], &re, &err) == SL_OK, "%s", err.msg);
            sl__regex_scratch sc = {0};
            size_t ms, me;
            CHECK(re && sl__regex_find(re, cps, fl, 0, N, 0, &ms, &me, &sc) >= 0);
            CHECK_MSG(sc.seen_words <= N + 1, "%s stage %zu: %zu memo words for %d code points",
                      d->name, k, sc.seen_words, N);
            sl__regex_scratch_free(&sc);
            sl__regex_free(re);
        }
    }
}

int main(void)
{
    test_refused();
    test_semantics();
    test_vs_handwritten();
    test_table_rows();
    test_memo_size();
    return sl_test_finish("regex_test");
}
