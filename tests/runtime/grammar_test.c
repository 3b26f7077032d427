/* runtime/text/grammar.h: GBNF parsing as llama.cpp (valid grammars of every construct; each
 * malformed kind refused with its line and column), acceptance of strings over code points
 * (whole, incomplete, rejected; UTF-8 cut between pieces), candidate filtering and the end
 * states. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"
#include "tests/testing.h"

static sl_grammar *parse_ok(const char *text)
{
    sl_grammar *g = NULL;
    sl_error err = {0};
    CHECK_MSG(sl_grammar_parse(text, strlen(text), &g, &err) == SL_OK, "%s: %s", text, err.msg);
    return g;
}

/* 1: whole sentence; 0: a valid prefix; -1: rejected. */
static int match(const char *grammar, const char *text)
{
    sl_grammar *g = parse_ok(grammar);
    if (!g) return -2;
    sl_gmatch *m = NULL;
    sl_error err = {0};
    int r = -2;
    if (sl_gmatch_create(g, &m, &err) == SL_OK)
        r = sl_gmatch_accept(m, text, strlen(text), &err) ? -1 : sl_gmatch_can_end(m) ? 1 : 0;
    sl_gmatch_free(m);
    sl_grammar_free(g);
    return r;
}

#define ACCEPTS(g, t) CHECK_MSG(match(g, t) == 1, "%s should accept \"%s\"", g, t)
#define PREFIX(g, t) CHECK_MSG(match(g, t) == 0, "\"%s\" should be a prefix for %s", t, g)
#define REJECTS(g, t) CHECK_MSG(match(g, t) == -1, "%s should reject \"%s\"", g, t)

static void test_accept(void)
{
    const char *yn = "root ::= \"yes\" | \"no\"";
    ACCEPTS(yn, "yes");
    ACCEPTS(yn, "no");
    PREFIX(yn, "ye");
    PREFIX(yn, "");
    REJECTS(yn, "maybe");
    REJECTS(yn, "yess");
    REJECTS(yn, "Yes");

    const char *rep = "root ::= [a-c]{2,3}";
    PREFIX(rep, "a");
    ACCEPTS(rep, "ab");
    ACCEPTS(rep, "abc");
    REJECTS(rep, "abca");
    REJECTS(rep, "ad");
    ACCEPTS("root ::= \"x\"{2}", "xx");
    REJECTS("root ::= \"x\"{2}", "xxx");
    PREFIX("root ::= \"x\"{2,}", "x");
    ACCEPTS("root ::= \"x\"{2,}", "xxxxxxx");
    ACCEPTS("root ::= \"x\"{0,2} \"y\"", "y");
    ACCEPTS("root ::= \"a\"* \"b\"", "aaab");
    ACCEPTS("root ::= \"a\"* \"b\"", "b");
    PREFIX("root ::= \"a\"+ \"b\"", "");
    REJECTS("root ::= \"a\"+ \"b\"", "b");
    ACCEPTS("root ::= \"a\"? \"b\"", "ab");
    REJECTS("root ::= \"a\"? \"b\"", "aab");
    ACCEPTS("root ::= (\"ab\" | \"c\")+", "abcab");
    REJECTS("root ::= (\"ab\" | \"c\")+", "abb");

    /* classes: ranges, several items, negation, escapes inside */
    const char *cls = "root ::= [a-zA-Z_] [^0-9\\]\\-]*";
    ACCEPTS(cls, "_x!y");
    REJECTS(cls, "9");
    REJECTS(cls, "a5");
    REJECTS(cls, "a]");
    REJECTS(cls, "a-");
    ACCEPTS("root ::= [\\x41-\\x43]+ \"\\u00e9\" \"\\U0001F600\" \"\\t\\n\\r\\\\\\\"\"",
            "ABCA\xc3\xa9\xf0\x9f\x98\x80\t\n\r\\\"");
    ACCEPTS("root ::= \"\xc3\xa9\" [\xce\xb1-\xcf\x89]+", "\xc3\xa9\xce\xb1\xce\xb2");
    REJECTS("root ::= \"\xc3\xa9\" [\xce\xb1-\xcf\x89]+", "\xc3\xa9z");
    ACCEPTS("root ::= . . .", "a\xc3\xa9!");
    REJECTS("root ::= . . .", "abcd");

    /* several rules, comments, newlines inside groups and after '|' */
    const char *multi = "# a comment\n"
                        "root ::= greeting \" \" name # trailing\n"
                        "greeting ::= \"hi\" |\n"
                        "    \"hello\"\n"
                        "\n"
                        "name ::= (\n"
                        "  [A-Z] [a-z]*\n"
                        ")\r\n";
    ACCEPTS(multi, "hello Ann");
    ACCEPTS(multi, "hi B");
    REJECTS(multi, "hey Ann");

    /* recursion to the right is fine: nested lists */
    const char *list = "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\n"
                       "item ::= [0-9]+ | list";
    ACCEPTS(list, "[1,[2,[]],34]");
    PREFIX(list, "[1,[2");
    REJECTS(list, "[1,]");
    /* an empty alternative */
    ACCEPTS("root ::= \"a\" x\nx ::= \"b\" | ", "a");
    ACCEPTS("root ::= \"a\" x\nx ::= \"b\" | ", "ab");
}

/* The error of a malformed grammar contains want (kind and position). */
static void bad(const char *text, size_t len, sl_status want_st, const char *want)
{
    sl_grammar *g = NULL;
    sl_error err = {0};
    const sl_status st = sl_grammar_parse(text, len, &g, &err);
    CHECK_MSG(st == want_st && !g, "%s: status %d (want %d)", text, st, want_st);
    CHECK_CONTAINS(err.msg, want);
    sl_grammar_free(g);
}
#define BAD(text, st, want) bad(text, strlen(text), st, want)

static void test_errors(void)
{
    BAD("root ::= \"a", SL_ERR_FORMAT, "line 1, column 10: unterminated string");
    BAD("root ::= [a-", SL_ERR_FORMAT, "line 1, column 12: unexpected end");
    BAD("root ::= [ab", SL_ERR_FORMAT, "line 1, column 10: unterminated character class");
    BAD("root = \"a\"", SL_ERR_FORMAT, "line 1, column 6: expecting '::='");
    BAD("root ::= foo", SL_ERR_FORMAT, "line 1, column 10: undefined rule 'foo'");
    BAD("root ::= x\nx ::= \"a\" y", SL_ERR_FORMAT, "line 2, column 11: undefined rule 'y'");
    BAD("a ::= \"x\"", SL_ERR_FORMAT, "no 'root' rule");
    BAD("", SL_ERR_FORMAT, "no 'root' rule");
    BAD("root ::= root \"a\"", SL_ERR_FORMAT, "line 1, column 1: left recursion in rule 'root'");
    BAD("root ::= \"x\" | a\na ::= b? a \"y\"\nb ::= \"b\"", SL_ERR_FORMAT,
        "line 2, column 1: left recursion in rule 'a'");
    BAD("root ::= \"\\q\"", SL_ERR_FORMAT, "line 1, column 11: unknown escape '\\q'");
    BAD("root ::= \"\\x4\"", SL_ERR_FORMAT, "line 1, column 11: expecting 2 hex digits");
    BAD("root ::= \"\\u12G4\"", SL_ERR_FORMAT, "column 11: expecting 4 hex digits");
    BAD("root ::= *", SL_ERR_FORMAT, "line 1, column 10: expecting an item before");
    BAD("root ::= (\"a\"", SL_ERR_FORMAT, "line 1, column 14: expecting ')'");
    BAD("root ::= \"a\"{3,1}", SL_ERR_FORMAT, "line 1, column 13: a repetition {m,n} needs");
    BAD("root ::= \"a\"{x}", SL_ERR_FORMAT, "line 1, column 14: expecting an integer");
    BAD("root ::= \"a\"{1;}", SL_ERR_FORMAT, "line 1, column 15: expecting ',' or '}'");
    BAD("root ::= \"a\"{1,2", SL_ERR_FORMAT, "line 1, column 17: expecting '}'");
    BAD("root ::= \"a\"{2001}", SL_ERR_RANGE, "more than 2000 repetitions");
    BAD("root ::= (\"a\"{0,50}){0,50}", SL_ERR_RANGE, "more than 2000 copies");
    BAD("root ::= \"a\" )", SL_ERR_FORMAT, "line 1, column 14: unexpected ')'");
    BAD("root ::= <[12]>", SL_ERR_FORMAT, "line 1, column 10: token references");
    BAD("root ::= \"\xc3\"", SL_ERR_FORMAT, "line 1, column 11: invalid UTF-8");
    BAD("root ::= \"\xed\xa0\x80\"", SL_ERR_FORMAT, "invalid UTF-8"); /* a surrogate */
    BAD("root ::= \"\xc3\xa9\" ]", SL_ERR_FORMAT, "line 1, column 14: unexpected ']'");
    BAD("::= \"a\"", SL_ERR_FORMAT, "line 1, column 1: expecting a rule name");
    bad("root ::= \"a\0\"", 13, SL_ERR_FORMAT, "NUL byte at offset 11");
    char deep[700];
    size_t n = (size_t)snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 300; i++) deep[n++] = '(';
    deep[n] = 0;
    BAD(deep, SL_ERR_RANGE, "groups nested more than 256 deep");
}

/* Candidates filtered against a state after prefix: tokens as strings, rejected flags. */
static void test_reject(void)
{
    sl_grammar *g = parse_ok("root ::= \"yes\" | \"no\" | [\xc3\xa9] \"!\"");
    sl_gmatch *m = NULL;
    sl_error err = {0};
    CHECK(g && sl_gmatch_create(g, &m, &err) == SL_OK);
    if (!m) {
        sl_grammar_free(g);
        return;
    }
    const char *tok[] = {"y", "ye", "yes", "n", "x", "yess", "\xc3", "\xc3\xa9!", "\xc3\xa8", ""};
    const bool want[] = {false, false, false, false, true, true, false, false, true, false};
    enum { N = sizeof tok / sizeof *tok };
    uint32_t cp[N][8];
    sl_gcand c[N];
    bool rej[N] = {0};
    for (int i = 0; i < N; i++) {
        c[i] = (sl_gcand){.index = (uint32_t)i, .cp = cp[i], .partial = sl_gmatch_partial(m)};
        sl_grammar_decode(tok[i], strlen(tok[i]), &c[i].partial, cp[i]);
    }
    CHECK(sl_gmatch_reject(m, c, N, rej, &err) == SL_OK);
    for (int i = 0; i < N; i++) CHECK_MSG(rej[i] == want[i], "token \"%s\" rejected %d", tok[i], rej[i]);
    CHECK(!sl_gmatch_can_end(m) && !sl_gmatch_done(m));

    /* a piece that ends inside a UTF-8 sequence, then its continuation */
    CHECK(sl_gmatch_accept(m, "\xc3", 1, &err) == SL_OK);
    CHECK(sl_gmatch_partial(m).n_remain == 1 && !sl_gmatch_can_end(m));
    const char *cont[] = {"\xa9", "\xa9!", "\xa8", "a"};
    const bool want2[] = {false, false, true, true};
    sl_gcand c2[4];
    uint32_t cp2[4][8];
    bool rej2[4] = {0};
    for (int i = 0; i < 4; i++) {
        c2[i] = (sl_gcand){.index = (uint32_t)i, .cp = cp2[i], .partial = sl_gmatch_partial(m)};
        sl_grammar_decode(cont[i], strlen(cont[i]), &c2[i].partial, cp2[i]);
    }
    CHECK(sl_gmatch_reject(m, c2, 4, rej2, &err) == SL_OK);
    for (int i = 0; i < 4; i++) CHECK_MSG(rej2[i] == want2[i], "continuation %d rejected %d", i, rej2[i]);
    /* a rejected text leaves the state as it was */
    CHECK(sl_gmatch_accept(m, "\xa8", 1, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "does not match");
    CHECK(sl_gmatch_accept(m, "\xa9!", 2, &err) == SL_OK);
    CHECK(sl_gmatch_can_end(m) && sl_gmatch_done(m));
    /* nothing follows a complete sentence */
    CHECK(sl_gmatch_accept(m, "x", 1, &err) == SL_ERR_INVALID);
    sl_gmatch_free(m);
    sl_grammar_free(g);

    /* complete but open: "a"+ may end after "a" or go on */
    g = parse_ok("root ::= \"a\"+");
    m = NULL;
    CHECK(g && sl_gmatch_create(g, &m, &err) == SL_OK);
    CHECK(m && sl_gmatch_accept(m, "aa", 2, &err) == SL_OK);
    CHECK(m && sl_gmatch_can_end(m) && !sl_gmatch_done(m));
    CHECK(m && sl_gmatch_accept(m, "\xff", 1, &err) == SL_ERR_INVALID); /* not UTF-8 */
    /* strict UTF-8: a 5-byte lead, an overlong form, a surrogate, past U+10FFFF, a lead cut
     * by a non-continuation byte: each is rejected, as a candidate and as accepted text */
    const char *badu[] = {"\xfa\x8f\xa4\x88", "\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "\xc3\x61"};
    for (int i = 0; m && i < 6; i++) {
        uint32_t cpb[8];
        sl_gcand cb = {.index = 0, .cp = cpb, .partial = sl_gmatch_partial(m)};
        sl_grammar_decode(badu[i], strlen(badu[i]), &cb.partial, cpb);
        bool r = false;
        CHECK(sl_gmatch_reject(m, &cb, 1, &r, &err) == SL_OK && r);
        CHECK_MSG(sl_gmatch_accept(m, badu[i], strlen(badu[i]), &err) == SL_ERR_INVALID,
                  "bad UTF-8 #%d accepted", i);
    }
    sl_gmatch_free(m);
    sl_grammar_free(g);
    g = parse_ok("root ::= . \"a\"");
    m = NULL;
    CHECK(g && sl_gmatch_create(g, &m, &err) == SL_OK);
    CHECK(m && sl_gmatch_accept(m, "\xf0\x9f", 2, &err) == SL_OK);  /* cut, then finished */
    CHECK(m && sl_gmatch_accept(m, "\x98\x80" "a", 3, &err) == SL_OK && sl_gmatch_done(m));
    sl_gmatch_free(m);
    sl_grammar_free(g);
}

/* A grammar whose parse stacks multiply with every character is refused at the limit, with the
 * state left as it was, instead of running away. */
static void test_ambiguous(void)
{
    sl_grammar *g = parse_ok("root ::= x{3,}\nx ::= . x*");
    sl_gmatch *m = NULL;
    sl_error err = {0};
    CHECK(g && sl_gmatch_create(g, &m, &err) == SL_OK);
    sl_status st = SL_OK;
    int i = 0;
    for (; m && i < 400 && !st; i++) st = sl_gmatch_accept(m, "a", 1, &err);
    CHECK_MSG(st == SL_ERR_RANGE, "status %d after %d characters", st, i);
    CHECK_CONTAINS(err.msg, "too ambiguous");
    sl_gmatch_free(m);
    sl_grammar_free(g);
}

/* A JSON grammar in the shape json_schema's converter writes: nesting, escapes, numbers. */
static void test_json(void)
{
    const char *json =
        "root ::= object\n"
        "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
        "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
        "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    ACCEPTS(json, "{\"a\": [1, -2.5e3, {\"b\": null}], \"c\\u00e9\\n\": \"x\"}");
    ACCEPTS(json, "{}");
    PREFIX(json, "{\"a\": [1, ");
    REJECTS(json, "[1]");
    REJECTS(json, "{\"a\": 01}");
    REJECTS(json, "{\"a\" 1}");
}

/* A chain of rules each naming the next twice at its start (r_i ::= r_{i+1} "a" | r_{i+1}
 * "b"): the left-recursion check walks each rule once; walking finished rules again cost
 * 2^depth, and this 60-deep chain (1.9 KB, an HTTP request's grammar) would not finish. The
 * same chain closed into a loop at the end is refused as left-recursive. */
static void test_deep_chain(void)
{
    enum { DEPTH = 60 };
    char *text = malloc(64 * (DEPTH + 2));
    for (int loop = 0; loop < 2 && text; loop++) {
        size_t n = (size_t)sprintf(text, "root ::= r0\n");
        for (int i = 0; i < DEPTH; i++)
            n += (size_t)sprintf(text + n, "r%d ::= r%d \"a\" | r%d \"b\"\n", i, i + 1, i + 1);
        sprintf(text + n, loop ? "r%d ::= r0 \"c\"\n" : "r%d ::= \"c\"\n", DEPTH);
        sl_grammar *g = NULL;
        sl_error err = {0};
        const sl_status st = sl_grammar_parse(text, strlen(text), &g, &err);
        if (!loop) CHECK_MSG(st == SL_OK && g, "%d-deep chain: %s", DEPTH, err.msg);
        else CHECK_MSG(st == SL_ERR_FORMAT && strstr(err.msg, "left recursion"), "looped "
                       "chain: status %d: %s", st, err.msg);
        sl_grammar_free(g);
    }
    free(text);
}

int main(void)
{
    test_deep_chain();
    test_accept();
    test_errors();
    test_reject();
    test_json();
    test_ambiguous();
    return sl_test_finish("grammar_test");
}
