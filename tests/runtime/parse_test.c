/* Tests of base/parse.c: the grammar's edges (blanks, signs, garbage, hex, inf/nan),
 * overflow of every target type, ranges (open and closed ends) and the messages, which must
 * name what, quote the text and give the range. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/parse.h"
#include "tests/testing.h"

static void expect_msg(sl_status st, const sl_error *e, const char *want)
{
    CHECK_MSG(st == SL_ERR_INVALID, "status %d for \"%s\"", (int)st, want);
    CHECK_MSG(!strcmp(e->msg, want), "\"%s\" != \"%s\"", e->msg, want);
}

static void test_integers(void)
{
    sl_error e;
    int64_t v = 0;
    const sl_irange r = {-5, 256};
    static const struct {
        const char *s;
        int64_t v;
    } good[] = {{"0", 0}, {"256", 256}, {"-5", -5}, {"007", 7}, {"-0", 0}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        CHECK_MSG(sl_parse_i64("n", good[i].s, r, &v, &e) == SL_OK && v == good[i].v, "'%s'",
                  good[i].s);
    }
    static const char *const bad[] = {"", " 5", "5 ", "\t5", "5\n", "+5", "5x", "0x10", "1e2",
                                      "1.0", "--5", "-", "5,0", "٥"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 42;
        CHECK_MSG(sl_parse_i64("n", bad[i], r, &v, &e) == SL_ERR_INVALID && v == 42, "'%s'",
                  bad[i]);
        CHECK_CONTAINS(e.msg, "[-5, 256]");
    }
    expect_msg(sl_parse_i64("-n", " 5", r, &v, &e), &e,
               "-n: ' 5' has a leading or trailing blank; expected an integer in [-5, 256]");
    expect_msg(sl_parse_i64("-n", "", r, &v, &e), &e,
               "-n: '' is empty; expected an integer in [-5, 256]");
    expect_msg(sl_parse_i64("-n", "5x", r, &v, &e), &e,
               "-n: '5x' is not a decimal integer; expected an integer in [-5, 256]");
    expect_msg(sl_parse_i64("-n", "257", r, &v, &e), &e, "-n: '257' is outside [-5, 256]");
    expect_msg(sl_parse_i64("-n", "-6", r, &v, &e), &e, "-n: '-6' is outside [-5, 256]");
    CHECK(sl_parse_i64("n", NULL, r, &v, &e) == SL_ERR_INVALID);

    /* the edges of int64 and one past them */
    const sl_irange all = {INT64_MIN, INT64_MAX};
    CHECK(sl_parse_i64("n", "9223372036854775807", all, &v, &e) == SL_OK && v == INT64_MAX);
    CHECK(sl_parse_i64("n", "-9223372036854775808", all, &v, &e) == SL_OK && v == INT64_MIN);
    CHECK(sl_parse_i64("n", "9223372036854775808", all, &v, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "is outside");
    CHECK(sl_parse_i64("n", "-9223372036854775809", all, &v, &e) == SL_ERR_INVALID);
    CHECK(sl_parse_i64("n", "99999999999999999999999999", all, &v, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "is outside");

    /* (ptr, len): the text need not end at len */
    CHECK(sl_parse_i64n("layer", "12:7", 2, r, &v, &e) == SL_OK && v == 12);
    CHECK(sl_parse_i64n("layer", "12:7", 3, r, &v, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "'12:'");
    CHECK(sl_parse_i64n("layer", "12:7", 0, r, &v, &e) == SL_ERR_INVALID);

    /* long garbage is quoted cut, not whole */
    char lng[200];
    memset(lng, '7', sizeof lng - 2);
    lng[sizeof lng - 2] = 'x';
    lng[sizeof lng - 1] = 0;
    CHECK(sl_parse_i64("n", lng, r, &v, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "...'");
    CHECK(strlen(e.msg) < 160);
}

static void test_unsigned_and_sizes(void)
{
    sl_error e;
    uint64_t u = 0;
    const sl_urange all = {0, UINT64_MAX};
    CHECK(sl_parse_u64("s", "18446744073709551615", all, &u, &e) == SL_OK && u == UINT64_MAX);
    CHECK(sl_parse_u64("s", "18446744073709551616", all, &u, &e) == SL_ERR_INVALID);
    expect_msg(sl_parse_u64("--seed", "-3", all, &u, &e), &e,
               "--seed: '-3' is outside [0, 18446744073709551615]");
    CHECK(sl_parse_u64("s", "-0", all, &u, &e) == SL_OK && u == 0);
    CHECK(sl_parse_u64("s", "+3", all, &u, &e) == SL_ERR_INVALID);
    CHECK(sl_parse_u64("s", "3K", all, &u, &e) == SL_ERR_INVALID); /* suffixes: sizes only */
    const sl_urange r = {1, 256};
    expect_msg(sl_parse_u64("MT", "0", r, &u, &e), &e, "MT: '0' is outside [1, 256]");

    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {{"0", 0},          {"512", 512},          {"4k", 4096},
                {"4K", 4096},      {"3M", 3u << 20},      {"2g", (uint64_t)2 << 30},
                {"1T", (uint64_t)1 << 40}, {"16777215T", (uint64_t)16777215 << 40},
                {"8GiB", (uint64_t)8 << 30}, {"512MiB", (uint64_t)512 << 20}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_MSG(sl_parse_size("b", good[i].s, all, &u, &e) == SL_OK && u == good[i].v, "'%s'",
                  good[i].s);
    static const char *const bad[] = {"", "K", "4KB", "4 K", " 4K", "4K ", "-4K", "4.5M", "4X",
                                      "0x10", "4iB", "4Gi", "4GiBx", "4GIB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(sl_parse_size("b", bad[i], all, &u, &e) == SL_ERR_INVALID, "'%s'", bad[i]);
    CHECK(sl_parse_size("b", "16777216T", all, &u, &e) == SL_ERR_INVALID); /* 2^64 */
    CHECK_CONTAINS(e.msg, "is outside");
    expect_msg(sl_parse_size("--max", "2K", (sl_urange){0, 1024}, &u, &e), &e,
               "--max: '2K' is outside [0, 1024]");
}

static void test_floats(void)
{
    sl_error e;
    double d = 0;
    const sl_frange unit = {0, 1, true, false}; /* (0, 1] */
    static const struct {
        const char *s;
        double v;
    } good[] = {{"1", 1}, {"0.5", 0.5}, {".5", 0.5}, {"5.", 5}, {"1e-3", 1e-3}, {"1E+0", 1},
                {"-0.25", -0.25}, {"0001", 1}};
    const sl_frange wide = {-1, 10, false, false};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_MSG(sl_parse_f64("x", good[i].s, wide, &d, &e) == SL_OK && d == good[i].v, "'%s'",
                  good[i].s);
    static const char *const bad[] = {"",    " 1",   "1 ",  "+1",   "1x",   ".",   "-",  "e5",
                                      "1e",  "1e+",  "inf", "-inf", "nan",  "NAN", "0x1p-2",
                                      "1,5", "1..2", "infinity"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = 42;
        CHECK_MSG(sl_parse_f64("x", bad[i], wide, &d, &e) == SL_ERR_INVALID && d == 42, "'%s'",
                  bad[i]);
    }
    expect_msg(sl_parse_f64("--top-p", "0", unit, &d, &e), &e, "--top-p: '0' is outside (0, 1]");
    expect_msg(sl_parse_f64("--top-p", "1.5", unit, &d, &e), &e,
               "--top-p: '1.5' is outside (0, 1]");
    CHECK(sl_parse_f64("--top-p", "1", unit, &d, &e) == SL_OK && d == 1);
    expect_msg(sl_parse_f64("--temp", "nan", wide, &d, &e), &e,
               "--temp: 'nan' is not a decimal number; expected a number in [-1, 10]");
    /* overflow of a double; underflow is a (tiny) value and meets the range like any other */
    const sl_frange any = {-DBL_MAX, DBL_MAX, false, false};
    CHECK(sl_parse_f64("x", "1e999", any, &d, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "is outside");
    CHECK(sl_parse_f64("x", "1e-999", any, &d, &e) == SL_OK && d == 0);
    CHECK(sl_parse_f64("x", "1e-999", unit, &d, &e) == SL_ERR_INVALID);
    /* a float option: a range of FLT_MAX refuses what would become inf as a float */
    const sl_frange flt = {0, FLT_MAX, false, false};
    CHECK(sl_parse_f64("--temp", "1e39", flt, &d, &e) == SL_ERR_INVALID);
    const sl_frange open = {0, 1, false, true};
    char buf[32];
    CHECK(!strcmp(sl_frange_str(open, buf, sizeof buf), "[0, 1)"));
    CHECK(sl_parse_f64("x", "1", open, &d, &e) == SL_ERR_INVALID);
}

static void test_bools_and_checks(void)
{
    sl_error e;
    bool b = false;
    static const char *const yes[] = {"1", "true", "on"}, *const no[] = {"0", "false", "off"};
    for (int i = 0; i < 3; i++) {
        CHECK(sl_parse_bool("b", yes[i], &b, &e) == SL_OK && b);
        CHECK(sl_parse_bool("b", no[i], &b, &e) == SL_OK && !b);
    }
    static const char *const bad[] = {"", " 1", "1 ", "yes", "2", "TRUE", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(sl_parse_bool("b", bad[i], &b, &e) == SL_ERR_INVALID, "'%s'", bad[i]);
    expect_msg(sl_parse_bool("SLUICE_X", "yes", &b, &e), &e,
               "SLUICE_X: 'yes' is not a boolean; expected 0 or 1 (also false/true, off/on)");

    const sl_frange unit = {0, 1, true, false};
    CHECK(sl_check_f64("top_p", 0.5, unit, &e) == SL_OK);
    expect_msg(sl_check_f64("top_p", 0, unit, &e), &e, "top_p: 0 is outside (0, 1]");
    expect_msg(sl_check_f64("temp", NAN, unit, &e), &e,
               "temp: nan is not a finite number; expected a number in (0, 1]");
    CHECK(sl_check_f64("temp", INFINITY, (sl_frange){0, INFINITY, false, false}, &e) != SL_OK);
    CHECK(sl_check_i64("n_ctx", 5, (sl_irange){0, 5}, &e) == SL_OK);
    expect_msg(sl_check_i64("n_ctx", -1, (sl_irange){0, 5}, &e), &e, "n_ctx: -1 is outside [0, 5]");
    CHECK(sl_parse_i64("x", "1", (sl_irange){0, 5}, &(int64_t){0}, NULL) == SL_OK);
    CHECK(sl_parse_i64("x", "9", (sl_irange){0, 5}, &(int64_t){0}, NULL) == SL_ERR_INVALID);
}

int main(void)
{
    test_integers();
    test_unsigned_and_sizes();
    test_floats();
    test_bools_and_checks();
    return sl_test_finish("parse_test");
}
