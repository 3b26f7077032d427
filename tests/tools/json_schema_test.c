/* tools/common/json_schema.h: JSON Schema -> GBNF in llama.cpp's output language. The exact
 * grammar of a small object schema; then, per construct, the grammar parsed by the real GBNF
 * parser (runtime/text/grammar.h) and JSON texts that satisfy the schema accepted, others
 * rejected; refused keywords and malformed schemas name the keyword and its path. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/text/grammar.h"
#include "tests/testing.h"
#include "tools/common/json_schema.h"

/* The GBNF of a schema (malloc'd), or NULL with err set. */
static char *convert(const char *schema, sl_error *err)
{
    sl_jdoc *d = NULL;
    char *out = NULL;
    if (sl_jdoc_parse(schema, strlen(schema), 0, &d, err) == SL_OK)
        sl_json_schema_to_gbnf(d, 0, &out, err);
    sl_jdoc_free(d);
    return out;
}

/* 1: the grammar of schema accepts text whole; 0: as a prefix only; -1: rejects it. */
static int match(const char *schema, const char *text)
{
    sl_error err = {0};
    char *gbnf = convert(schema, &err);
    CHECK_MSG(gbnf, "%s: %s", schema, err.msg);
    if (!gbnf) return -2;
    sl_grammar *g = NULL;
    sl_gmatch *m = NULL;
    int r = -2;
    CHECK_MSG(sl_grammar_parse(gbnf, strlen(gbnf), &g, &err) == SL_OK, "%s\n%s", err.msg, gbnf);
    if (g && sl_gmatch_create(g, &m, &err) == SL_OK)
        r = sl_gmatch_accept(m, text, strlen(text), &err) ? -1 : sl_gmatch_can_end(m) ? 1 : 0;
    sl_gmatch_free(m);
    sl_grammar_free(g);
    free(gbnf);
    return r;
}

#define ACCEPTS(s, t) CHECK_MSG(match(s, t) == 1, "%s should accept %s", s, t)
#define PREFIX(s, t) CHECK_MSG(match(s, t) == 0, "%s: %s should be a prefix", s, t)
#define REJECTS(s, t) CHECK_MSG(match(s, t) == -1, "%s should reject %s", s, t)

static void test_exact(void)
{
    sl_error err = {0};
    char *g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
                      "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\"]}", &err);
    const char *want =
        "a-kv ::= \"\\\"a\\\"\" space \":\" space string\n"
        "b-kv ::= \"\\\"b\\\"\" space \":\" space integer\n"
        "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
        "integer ::= (\"-\"? integral-part)\n"
        "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
        "root ::= \"{\" space a-kv ( \",\" space ( b-kv ) )? space \"}\"\n"
        "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n";
    CHECK_MSG(g && !strcmp(g, want), "got:\n%s\nwant:\n%s", g ? g : err.msg, want);
    free(g);
}

static void test_accept(void)
{
    const char *person = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
                         "{\"type\":\"string\"}}},\"required\":[\"name\",\"age\"]}";
    ACCEPTS(person, "{\"name\": \"Ann\", \"age\": 31}");
    ACCEPTS(person, "{\"name\":\"A\\u00e9\\n\",\"age\":-2,\"tags\":[\"x\", \"y\"]}");
    REJECTS(person, "{\"age\": 31}");              /* a required key missing */
    REJECTS(person, "{\"name\": 1, \"age\": 31}");  /* wrong type */
    REJECTS(person, "{\"name\": \"A\", \"age\": 3.5}");
    REJECTS(person, "{\"name\": \"A\", \"age\": 3, \"x\": 1}"); /* no additional keys */
    PREFIX(person, "{\"name\": \"A\"");

    const char *en = "{\"enum\":[\"red\",\"green\",1,null,{\"a\":[true]}]}";
    ACCEPTS(en, "\"red\"");
    ACCEPTS(en, "1");
    ACCEPTS(en, "null");
    ACCEPTS(en, "{\"a\":[true]}");
    REJECTS(en, "\"blue\"");
    ACCEPTS("{\"const\":\"a\\\"b\"}", "\"a\\\"b\"");
    REJECTS("{\"const\":2.5}", "2.50");
    ACCEPTS("{\"const\":2.5}", "2.5");

    const char *arr = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,"
                      "\"maxItems\":3}";
    ACCEPTS(arr, "[1]");
    ACCEPTS(arr, "[1, 2, 3]");
    REJECTS(arr, "[]");
    REJECTS(arr, "[1, 2, 3, 4]");
    REJECTS(arr, "[\"1\"]");
    const char *tup = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},"
                      "{\"type\":\"boolean\"}]}";
    ACCEPTS(tup, "[\"a\", false]");
    REJECTS(tup, "[\"a\"]");

    const char *str = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}";
    ACCEPTS(str, "\"ab\"");
    ACCEPTS(str, "\"abc\"");
    REJECTS(str, "\"a\"");
    REJECTS(str, "\"abcd\"");
    ACCEPTS("{\"type\":\"string\",\"format\":\"date\"}", "\"2026-11-28\"");
    REJECTS("{\"type\":\"string\",\"format\":\"date\"}", "\"2026-13-28\"");
    ACCEPTS("{\"type\":\"string\",\"format\":\"date-time\"}", "\"2026-11-28T21:45:00Z\"");
    ACCEPTS("{\"type\":\"string\",\"format\":\"uuid\"}",
            "\"123e4567-e89b-12d3-a456-426614174000\"");
    REJECTS("{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567\"");
    ACCEPTS("{\"type\":\"string\",\"format\":\"email\"}", "\"any\""); /* an annotation */

    ACCEPTS("{\"type\":[\"string\",\"null\"]}", "null");
    ACCEPTS("{\"type\":[\"string\",\"null\"]}", "\"x\"");
    REJECTS("{\"type\":[\"string\",\"null\"]}", "1");
    ACCEPTS("{\"type\":\"number\"}", "-1.5e+3");
    ACCEPTS("{\"type\":\"boolean\"}", "true");
    ACCEPTS("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", "false");
    ACCEPTS("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", "12");

    /* json_object: any object */
    ACCEPTS("{\"type\":\"object\"}", "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}");
    ACCEPTS("{\"type\":\"object\"}", "{}");
    REJECTS("{\"type\":\"object\"}", "[1]");
    ACCEPTS("{}", "[1, \"x\"]"); /* the empty schema: any value */
    ACCEPTS("true", "3");

    const char *addl = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                       "\"additionalProperties\":{\"type\":\"string\"}}";
    ACCEPTS(addl, "{\"a\": 1, \"x\": \"s\", \"y\": \"t\"}");
    ACCEPTS(addl, "{\"x\": \"s\"}");
    REJECTS(addl, "{\"a\": 1, \"x\": 2}");
    REJECTS(addl, "{\"a\": 1, \"a\": \"s\"}"); /* a property's name is no extra key */
    ACCEPTS(addl, "{\"ab\": \"s\", \"\": \"t\"}");
    const char *names = "{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"},"
                        "\"a-c]\":{\"type\":\"integer\"}},\"additionalProperties\":true}";
    ACCEPTS(names, "{\"ab\": 1, \"b\": [2], \"a-c]x\": 3}");
    REJECTS(names, "{\"a-c]\": 1, \"a-c]\": 2}");
    REJECTS(names, "{\"ab\": 1, \"ab\": 2}");

    const char *rec = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"next\":"
                      "{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
                      "\"required\":[\"next\"]}},\"$ref\":\"#/$defs/node\"}";
    ACCEPTS(rec, "{\"next\": {\"next\": {\"next\": null}}}");
    REJECTS(rec, "{\"next\": 1}");
    const char *defs = "{\"definitions\":{\"c\":{\"enum\":[\"r\",\"g\"]}},\"type\":\"object\","
                       "\"properties\":{\"color\":{\"$ref\":\"#/definitions/c\"}},"
                       "\"required\":[\"color\"]}";
    ACCEPTS(defs, "{\"color\": \"g\"}");
    REJECTS(defs, "{\"color\": \"b\"}");

    const char *all = "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                      "\"integer\"}}},{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
                      "\"boolean\"}}}]}";
    ACCEPTS(all, "{\"a\": 1, \"b\": true}");
    REJECTS(all, "{\"a\": 1}");
}

/* Integer bounds (llama.cpp's build_min_max_int): over a window of integers, the grammar
 * accepts exactly those in the range, written without leading zeros. */
static void test_int_ranges(void)
{
    static const struct {
        const char *bounds;
        long long lo, hi; /* the range; LLONG_MIN / LLONG_MAX: none */
    } k[] = {
        {"\"minimum\":0,\"maximum\":100", 0, 100},
        {"\"minimum\":-37,\"maximum\":1250", -37, 1250},
        {"\"minimum\":-1250,\"maximum\":-13", -1250, -13},
        {"\"minimum\":7", 7, LLONG_MAX},
        {"\"minimum\":123", 123, LLONG_MAX},
        {"\"minimum\":-45", -45, LLONG_MAX},
        {"\"maximum\":45", LLONG_MIN, 45},
        {"\"maximum\":-450", LLONG_MIN, -450},
        {"\"exclusiveMinimum\":9,\"exclusiveMaximum\":1000", 10, 999},
        {"\"minimum\":0.5,\"maximum\":99.5", 1, 99},
        {"\"minimum\":5,\"maximum\":5", 5, 5},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", k[i].bounds);
        sl_error err = {0};
        char *gbnf = convert(schema, &err);
        sl_grammar *g = NULL;
        CHECK_MSG(gbnf && sl_grammar_parse(gbnf, strlen(gbnf), &g, &err) == SL_OK, "%s: %s",
                  schema, err.msg);
        int wrong = 0;
        for (long long x = -1300; g && x <= 1300 && wrong < 5; x++) {
            char text[32];
            snprintf(text, sizeof text, "%lld", x);
            sl_gmatch *m = NULL;
            const bool in = x >= k[i].lo && x <= k[i].hi;
            bool ok = sl_gmatch_create(g, &m, &err) == SL_OK &&
                      sl_gmatch_accept(m, text, strlen(text), &err) == SL_OK && sl_gmatch_can_end(m);
            if (ok != in) wrong++;
            CHECK_MSG(ok == in, "%s: %lld %s", schema, x, ok ? "accepted" : "rejected");
            sl_gmatch_free(m);
        }
        if (g && k[i].hi == LLONG_MAX) ACCEPTS(schema, "123456789012345");
        if (g) REJECTS(schema, "0123");
        sl_grammar_free(g);
        free(gbnf);
    }
}

/* Names and bodies longer than any fixed buffer stay whole. */
/* Optional properties after required ones and an additionalProperties schema: llama.cpp's
 * "-rest" rules (one per optional property but the last). */
static void test_exact_optional(void)
{
    sl_error err = {0};
    char *g = convert("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
                      "\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"boolean\"},"
                      "\"d\":{\"type\":\"null\"}},\"required\":[\"b\"],"
                      "\"additionalProperties\":{\"type\":\"integer\"}}", &err);
    const char *want =
        "a-kv ::= \"\\\"a\\\"\" space \":\" space string\n"
        "a-rest ::= ( \",\" space c-kv )? c-rest\n"
        "additional-k ::= [\"] ( [a] char+ | [b] char+ | [c] char+ | [d] char+ | "
        "[^\"abcd] char* )? [\"]\n"
        "additional-kv ::= additional-k \":\" space integer\n"
        "b-kv ::= \"\\\"b\\\"\" space \":\" space integer\n"
        "boolean ::= (\"true\" | \"false\")\n"
        "c-kv ::= \"\\\"c\\\"\" space \":\" space boolean\n"
        "c-rest ::= ( \",\" space d-kv )? d-rest\n"
        "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
        "d-kv ::= \"\\\"d\\\"\" space \":\" space null\n"
        "d-rest ::= ( \",\" space additional-kv )*\n"
        "integer ::= (\"-\"? integral-part)\n"
        "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
        "null ::= \"null\"\n"
        "root ::= \"{\" space b-kv ( \",\" space ( a-kv a-rest | c-kv c-rest | d-kv d-rest | "
        "additional-kv ( \",\" space additional-kv )* ) )? space \"}\"\n"
        "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
        "string ::= \"\\\"\" char* \"\\\"\"\n";
    CHECK_MSG(g && !strcmp(g, want), "optional properties: %s\n%s", err.msg, g ? g : "");
    free(g);
}

/* 3,000 optional properties (a 60 KB schema): each "-rest" rule built once, not once per
 * property before it (O(n^3) with the rule lookups: minutes of an HTTP thread) */
static void test_many_optional(void)
{
    enum { N = 3000 };
    char *schema = malloc(32 * N + 64);
    size_t n = (size_t)sprintf(schema, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < N; i++) n += (size_t)sprintf(schema + n, "%s\"p%d\":{}", i ? "," : "", i);
    sprintf(schema + n, "}}");
    sl_error err = {0};
    char *g = convert(schema, &err);
    CHECK_MSG(g && strstr(g, "p0-rest ::=") && strstr(g, "p2998-rest ::=") &&
                  !strstr(g, "p2999-rest"), "%d optional properties: %s", N, err.msg);
    free(g);
    free(schema);
}

static void test_long(void)
{
    char schema[2048], text[2048], name[601];
    memset(name, 'k', 600);
    name[600] = 0;
    snprintf(schema, sizeof schema, "{\"type\":\"object\",\"properties\":{\"%s\":{\"enum\":"
             "[\"%s\"]}},\"required\":[\"%s\"]}", name, name, name);
    snprintf(text, sizeof text, "{\"%s\": \"%s\"}", name, name);
    ACCEPTS(schema, text);
    text[strlen(text) - 4] = 'x';
    REJECTS(schema, text);
}

static void refused(const char *schema, sl_status want_st, const char *want)
{
    sl_error err = {0};
    char *g = convert(schema, &err);
    CHECK_MSG(!g, "%s converted", schema);
    CHECK_MSG(err.code == want_st, "%s: status %d", schema, err.code);
    CHECK_CONTAINS(err.msg, want);
    free(g);
}

static void test_refused(void)
{
    refused("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":\"^a\"}}}",
            SL_ERR_UNSUPPORTED, "at /properties/x: 'pattern' is not supported");
    refused("{\"type\":\"number\",\"minimum\":0}", SL_ERR_UNSUPPORTED,
            "at /: 'minimum' is not supported (only integers are bounded)");
    refused("{\"type\":\"integer\",\"minimum\":3,\"maximum\":2.5}", SL_ERR_FORMAT,
            "no integer lies in [3, 2]");
    refused("{\"type\":\"integer\",\"maximum\":1e16}", SL_ERR_UNSUPPORTED,
            "'maximum' must be a number in [-1e15, 1e15]");
    refused("{\"type\":\"array\",\"items\":{\"type\":\"number\",\"maximum\":1}}",
            SL_ERR_UNSUPPORTED, "at /items: 'maximum'");
    refused("{\"$ref\":\"#/$defs/none\"}", SL_ERR_FORMAT, "unresolved $ref '#/$defs/none'");
    refused("{\"$ref\":\"http://x/y\"}", SL_ERR_UNSUPPORTED, "only #/definitions/NAME");
    refused("false", SL_ERR_UNSUPPORTED, "the false schema");
    refused("{\"type\":\"foo\"}", SL_ERR_FORMAT, "unknown type 'foo'");
    refused("{\"type\":\"object\",\"properties\":{},\"required\":\"x\"}", SL_ERR_FORMAT,
            "'required' must be an array of strings");
    refused("{\"type\":\"array\",\"minItems\":-1}", SL_ERR_FORMAT, "at /: 'minItems' must be");
    refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", SL_ERR_FORMAT,
            "maxItems 2 < minItems 3");
    refused("{\"anyOf\":[]}", SL_ERR_FORMAT, "'anyOf' must be a non-empty array");
    refused("{\"anyOf\":[{\"type\":\"string\"},3]}", SL_ERR_FORMAT,
            "at /anyOf/1: a schema must be an object or a boolean, got: number");
    refused("[1]", SL_ERR_FORMAT, "a schema must be an object or a boolean, got: array");
    refused("{\"not\":{}}", SL_ERR_UNSUPPORTED, "'not' is not supported");
}

int main(void)
{
    test_exact();
    test_exact_optional();
    test_many_optional();
    test_accept();
    test_long();
    test_int_ranges();
    test_refused();
    return sl_test_finish("json_schema_test");
}
