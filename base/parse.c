/* The strict reader of values written as text (parse.h). Syntax is checked here character by
 * character, before any libc conversion runs: strtoll/strtod skip leading blanks, accept "+",
 * "0x", "inf" and "nan", and stop at the first bad character, which is how " 5" and "5x" used
 * to get through. strtod is called only on text this file has already matched as a number. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"

enum { QUOTE_MAX = 64 }; /* text quoted in messages beyond this is cut with "..." */

const char *sl_frange_str(sl_frange r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%c%g, %g%c", r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']');
    return buf;
}

static void irange_str(sl_irange r, char *buf, size_t cap)
{
    snprintf(buf, cap, "[%" PRId64 ", %" PRId64 "]", r.lo, r.hi);
}

static void urange_str(sl_urange r, char *buf, size_t cap)
{
    snprintf(buf, cap, "[%" PRIu64 ", %" PRIu64 "]", r.lo, r.hi);
}

/* "WHAT: 'TEXT' WHY; expected EXPECTED", or "WHAT: 'TEXT' is outside RANGE" when why is NULL
 * (expected is then the range). */
static sl_status refuse(sl_error *err, const char *what, const char *s, size_t len,
                        const char *why, const char *expected)
{
    const int n = len > QUOTE_MAX ? QUOTE_MAX : (int)len;
    return sl_error_set(err, SL_ERR_INVALID, "%s: '%.*s%s' %s%s%s", what, n, s ? s : "",
                        len > QUOTE_MAX ? "..." : "", why ? why : "is outside",
                        why ? "; expected " : " ", expected);
}

/* Empty text or a blank at either end: the reason, or NULL when neither. */
static const char *frame_fault(const char *s, size_t len)
{
    if (!len) return "is empty";
    if (isspace((unsigned char)s[0]) || isspace((unsigned char)s[len - 1]))
        return "has a leading or trailing blank";
    return NULL;
}

/* Decimal digits of s[0, len) as a magnitude; *ovf when it passes UINT64_MAX. Returns the
 * number of digits read (stops at the first non-digit). */
static size_t digits(const char *s, size_t len, uint64_t *mag, bool *ovf)
{
    uint64_t v = 0;
    size_t i = 0;
    *ovf = false;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        const unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) *ovf = true;
        else v = v * 10 + d;
    }
    *mag = v;
    return i;
}

/* The front that the integer grammars share, ["-"] digit+, read from s[0, len). */
typedef struct dec {
    bool neg, ovf; /* a '-' first; the digits pass UINT64_MAX */
    uint64_t mag;  /* the digits' value (when !ovf) */
    size_t nd;     /* digits read */
    size_t used;   /* chars read: neg + nd */
} dec;

/* Fills d; returns frame_fault's reason or NULL. */
static const char *scan_dec(const char *s, size_t len, dec *d)
{
    const char *fault = frame_fault(s, len);
    if (fault) return fault;
    d->neg = s[0] == '-';
    d->nd = digits(s + d->neg, len - d->neg, &d->mag, &d->ovf);
    d->used = d->neg + d->nd;
    return NULL;
}

sl_status sl_parse_i64n(const char *what, const char *s, size_t len, sl_irange r, int64_t *out,
                        sl_error *err)
{
    char rs[96], ex[128];
    irange_str(r, rs, sizeof rs);
    snprintf(ex, sizeof ex, "an integer in %s", rs);
    dec d;
    const char *fault = scan_dec(s, len, &d);
    if (fault) return refuse(err, what, s, len, fault, ex);
    if (!d.nd || d.used != len) return refuse(err, what, s, len, "is not a decimal integer", ex);
    const uint64_t lim = d.neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (d.ovf || d.mag > lim) return refuse(err, what, s, len, NULL, rs);
    const int64_t v = !d.neg ? (int64_t)d.mag : d.mag == lim ? INT64_MIN : -(int64_t)d.mag;
    if (v < r.lo || v > r.hi) return refuse(err, what, s, len, NULL, rs);
    *out = v;
    return SL_OK;
}

sl_status sl_parse_i64(const char *what, const char *s, sl_irange r, int64_t *out,
                       sl_error *err)
{
    return sl_parse_i64n(what, s, s ? strlen(s) : 0, r, out, err);
}

/* u64 and size share this: digits, then an optional binary suffix when `suffix`. */
static sl_status parse_unsigned(const char *what, const char *s, sl_urange r, bool suffix,
                                uint64_t *out, sl_error *err)
{
    const size_t len = s ? strlen(s) : 0;
    char rs[96], ex[160];
    urange_str(r, rs, sizeof rs);
    snprintf(ex, sizeof ex, suffix ? "a size in %s bytes (digits, optional K, M, G or T, "
                                     "or KiB, MiB, GiB, TiB)"
                                   : "an integer in %s", rs);
    dec d;
    const char *fault = scan_dec(s, len, &d);
    if (fault) return refuse(err, what, s, len, fault, ex);
    size_t used = d.used;
    unsigned shift = 0;
    if (suffix && d.nd && used < len && !d.neg &&
        (used + 1 == len || (used + 3 == len && !strncmp(s + used + 1, "iB", 2)))) {
        const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)s[used]));
        if (u && *u) {
            shift = 10u * (unsigned)(u - units + 1);
            used = len;
        }
    }
    if (!d.nd || used != len)
        return refuse(err, what, s, len, suffix ? "is not a size" : "is not a decimal integer",
                      ex);
    if (d.ovf || (shift && d.mag > UINT64_MAX >> shift) || (d.neg && d.mag))
        return refuse(err, what, s, len, NULL, rs);
    const uint64_t v = d.mag << shift;
    if (v < r.lo || v > r.hi) return refuse(err, what, s, len, NULL, rs);
    *out = v;
    return SL_OK;
}

sl_status sl_parse_u64(const char *what, const char *s, sl_urange r, uint64_t *out,
                       sl_error *err)
{
    return parse_unsigned(what, s, r, false, out, err);
}

sl_status sl_parse_size(const char *what, const char *s, sl_urange r, uint64_t *out,
                        sl_error *err)
{
    return parse_unsigned(what, s, r, true, out, err);
}

/* Whether s[0, len) is the `number` of parse.h's grammar. */
static bool is_number(const char *s, size_t len)
{
    size_t i = s[0] == '-', int_digits = 0, frac_digits = 0;
    while (i < len && isdigit((unsigned char)s[i])) i++, int_digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && isdigit((unsigned char)s[i])) i++, frac_digits++;
    }
    if (!int_digits && !frac_digits) return false;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        size_t exp_digits = 0;
        while (i < len && isdigit((unsigned char)s[i])) i++, exp_digits++;
        if (!exp_digits) return false;
    }
    return i == len;
}

static bool in_frange(double v, sl_frange r)
{
    return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

sl_status sl_parse_f64(const char *what, const char *s, sl_frange r, double *out,
                       sl_error *err)
{
    const size_t len = s ? strlen(s) : 0;
    char rs[96], ex[128];
    sl_frange_str(r, rs, sizeof rs);
    snprintf(ex, sizeof ex, "a number in %s", rs);
    const char *fault = frame_fault(s, len);
    if (fault) return refuse(err, what, s, len, fault, ex);
    if (!is_number(s, len)) return refuse(err, what, s, len, "is not a decimal number", ex);
    /* the grammar has no locale-dependent part but the point, which the C locale spells '.' */
    const double v = strtod(s, NULL);
    if (!isfinite(v) || !in_frange(v, r)) return refuse(err, what, s, len, NULL, rs);
    *out = v;
    return SL_OK;
}

sl_status sl_parse_bool(const char *what, const char *s, bool *out, sl_error *err)
{
    static const char *const yes[] = {"1", "true", "on"}, *const no[] = {"0", "false", "off"};
    for (int i = 0; s && i < 3; i++) {
        if (!strcmp(s, yes[i])) return *out = true, SL_OK;
        if (!strcmp(s, no[i])) return *out = false, SL_OK;
    }
    return refuse(err, what, s ? s : "", s ? strlen(s) : 0, "is not a boolean",
                  "0 or 1 (also false/true, off/on)");
}

sl_status sl_check_i64(const char *what, int64_t v, sl_irange r, sl_error *err)
{
    if (v >= r.lo && v <= r.hi) return SL_OK;
    char rs[96];
    irange_str(r, rs, sizeof rs);
    return sl_error_set(err, SL_ERR_INVALID, "%s: %" PRId64 " is outside %s", what, v, rs);
}

sl_status sl_check_f64(const char *what, double v, sl_frange r, sl_error *err)
{
    if (isfinite(v) && in_frange(v, r)) return SL_OK;
    char rs[96];
    sl_frange_str(r, rs, sizeof rs);
    return sl_error_set(err, SL_ERR_INVALID, "%s: %g is %s %s", what, v,
                        isfinite(v) ? "outside" : "not a finite number; expected a number in",
                        rs);
}
