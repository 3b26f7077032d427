/* Tests of base/status.c: message formatting, truncation, NULL handling and status names. */
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "tests/testing.h"

static sl_status via_setv(sl_error *err, sl_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_status s = sl_error_setv(err, code, fmt, ap);
    va_end(ap);
    return s;
}

static void test_set_formats(void)
{
    sl_error err;
    memset(&err, 0x5a, sizeof err);
    sl_status s = sl_error_set(&err, SL_ERR_FORMAT, "tensor '%s': offset %llu beyond %d", "blk.0",
                               (unsigned long long)1234567890123ULL, -7);
    CHECK(s == SL_ERR_FORMAT);
    CHECK(err.code == SL_ERR_FORMAT);
    CHECK(strcmp(err.msg, "tensor 'blk.0': offset 1234567890123 beyond -7") == 0);

    s = via_setv(&err, SL_ERR_IO, "open %s: %s", "x.gguf", "No such file");
    CHECK(s == SL_ERR_IO);
    CHECK(err.code == SL_ERR_IO);
    CHECK(strcmp(err.msg, "open x.gguf: No such file") == 0);

    /* A later set replaces (does not append to) the earlier message. */
    sl_error_set(&err, SL_ERR_RANGE, "short");
    CHECK(err.code == SL_ERR_RANGE);
    CHECK(strcmp(err.msg, "short") == 0);

    /* Empty message and SL_OK are allowed. */
    CHECK(sl_error_set(&err, SL_OK, "%s", "") == SL_OK);
    CHECK(err.code == SL_OK && err.msg[0] == '\0');
}

static void test_truncation(void)
{
    static char big[4 * SL_ERROR_MSG_BYTES];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[SL_ERROR_MSG_BYTES - 2] = 'Z'; /* the last byte that fits */
    big[SL_ERROR_MSG_BYTES - 1] = 'Y'; /* the first byte cut off */

    sl_error err;
    memset(&err, 0x5a, sizeof err);
    sl_status s = sl_error_set(&err, SL_ERR_INVALID, "%s", big);
    CHECK(s == SL_ERR_INVALID);
    CHECK(err.code == SL_ERR_INVALID);
    size_t n = strnlen(err.msg, sizeof err.msg);
    CHECK_MSG(n == SL_ERROR_MSG_BYTES - 1, "length %zu", n);
    CHECK(err.msg[SL_ERROR_MSG_BYTES - 1] == '\0');
    CHECK(err.msg[SL_ERROR_MSG_BYTES - 2] == 'Z');
    CHECK(err.msg[0] == 'a');

    /* Exactly SL_ERROR_MSG_BYTES - 1 characters fit without loss. */
    big[SL_ERROR_MSG_BYTES - 1] = '\0';
    sl_error_set(&err, SL_ERR_INVALID, "%s", big);
    CHECK(strcmp(err.msg, big) == 0);
}

static void test_null_err(void)
{
    /* NULL err: only the code comes back, nothing is written. */
    CHECK(sl_error_set(NULL, SL_ERR_NOMEM, "out of %s", "memory") == SL_ERR_NOMEM);
    CHECK(via_setv(NULL, SL_ERR_DEVICE, "dev %d", 3) == SL_ERR_DEVICE);
    sl_error_clear(NULL); /* must not crash */

    sl_error err;
    sl_error_set(&err, SL_ERR_TYPE, "something");
    sl_error_clear(&err);
    CHECK(err.code == SL_OK);
    CHECK(err.msg[0] == '\0');
}

static void test_names(void)
{
    static const struct {
        sl_status s;
        const char *name;
    } k[] = {
        {SL_OK, "ok"},
        {SL_ERR_INVALID, "invalid"},
        {SL_ERR_IO, "io"},
        {SL_ERR_FORMAT, "format"},
        {SL_ERR_NOMEM, "nomem"},
        {SL_ERR_NOT_FOUND, "not_found"},
        {SL_ERR_TYPE, "type"},
        {SL_ERR_UNSUPPORTED, "unsupported"},
        {SL_ERR_DEVICE, "device"},
        {SL_ERR_RANGE, "range"},
        {SL_ERR_NOT_RESIDENT, "not_resident"},
    };
    CHECK(sizeof k / sizeof k[0] == SL_STATUS_COUNT);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *got = sl_status_name(k[i].s);
        CHECK_MSG(got && strcmp(got, k[i].name) == 0, "status %d: '%s'", (int)k[i].s,
                  got ? got : "(null)");
    }
    /* Every code has a distinct, non-empty name. */
    for (int a = 0; a < SL_STATUS_COUNT; a++) {
        const char *na = sl_status_name((sl_status)a);
        CHECK(na != NULL && na[0] != '\0' && strcmp(na, "unknown") != 0);
        for (int b = a + 1; b < SL_STATUS_COUNT; b++)
            CHECK_MSG(strcmp(na, sl_status_name((sl_status)b)) != 0, "%d and %d share '%s'", a,
                      b, na);
    }
    /* Out of range (both sides) names "unknown", never NULL. */
    CHECK(strcmp(sl_status_name(SL_STATUS_COUNT), "unknown") == 0);
    CHECK(strcmp(sl_status_name((sl_status)(SL_STATUS_COUNT + 100)), "unknown") == 0);
    CHECK(strcmp(sl_status_name((sl_status)-1), "unknown") == 0);
}

int main(void)
{
    test_set_formats();
    test_truncation();
    test_null_err();
    test_names();
    return sl_test_finish("status_test");
}
