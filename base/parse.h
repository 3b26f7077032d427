/* base/parse.h: the one strict reader of values written as text — command-line flags,
 * SLUICE_* environment variables, "key=value" option strings — for every module and the CLI.
 * libc only, like status.h, so that the lowest modules (base/device/, scheduler/) use it too.
 *
 * Grammar (decided here once; front ends document it by pointing at this file):
 *   integer = ["-"] digit+               decimal only: no "+", no "0x" (leading zeros are
 *                                        decimal: "010" is 10), no suffix
 *   size    = digit+ [(K | M | G | T) ["iB"]]   a byte count; the suffix (either case)
 *                                        multiplies by 2^10, 2^20, 2^30, 2^40 ("8G" = "8GiB")
 *   number  = ["-"] (digit+ ["." digit*] | "." digit+) [("e" | "E") ["+" | "-"] digit+]
 *                                        finite only: no "inf", "nan", hex floats
 *   bool    = 1 | true | on | 0 | false | off
 * The whole text must match: empty text, a leading or trailing blank and trailing garbage are
 * refused. Overflow of the target type is detected (and reported as out of range). The range is
 * checked and named in the message.
 *
 * Messages (SL_ERR_INVALID) start with `what`, the name the user wrote (flag, variable, option
 * key), quote the text and say what was expected:
 *   "--top-p: '0' is outside (0, 1]"
 *   "SLUICE_POSTFETCH_MAX_TRANSFERS: ' 5' has a leading or trailing blank; expected an integer
 *    in [1, 256]"
 * The sl_check_* functions give the same wording for values that arrive as numbers (library
 * options): "top_p: 0 is outside (0, 1]". A front end that checks a flag with the library's own
 * range (a sl_*range constant the library exports) therefore accepts exactly what the library
 * accepts. Thread-safe; no state. */
#ifndef SL_PARSE_H
#define SL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct sl_irange { int64_t lo, hi; } sl_irange;    /* [lo, hi] */
typedef struct sl_urange { uint64_t lo, hi; } sl_urange;   /* [lo, hi] */
typedef struct sl_frange {                                  /* lo < v or lo <= v, ... */
    double lo, hi;
    bool lo_open, hi_open;
} sl_frange;

/* Integers of the grammar above, from a NUL-terminated text or from (s, len). */
SL_API sl_status sl_parse_i64(const char *what, const char *s, sl_irange r, int64_t *out,
                              sl_error *err);
SL_API sl_status sl_parse_i64n(const char *what, const char *s, size_t len, sl_irange r,
                               int64_t *out, sl_error *err);
/* Non-negative integers up to 2^64 - 1 ("-1" is out of range, not wrapped). */
SL_API sl_status sl_parse_u64(const char *what, const char *s, sl_urange r, uint64_t *out,
                              sl_error *err);
/* A byte count with an optional K/M/G/T suffix; the range is in bytes. */
SL_API sl_status sl_parse_size(const char *what, const char *s, sl_urange r, uint64_t *out,
                               sl_error *err);
SL_API sl_status sl_parse_f64(const char *what, const char *s, sl_frange r, double *out,
                              sl_error *err);
SL_API sl_status sl_parse_bool(const char *what, const char *s, bool *out, sl_error *err);

/* The same range rules for values that are already numbers: "WHAT: V is outside R"; NaN and
 * infinities fail sl_check_f64 whatever the range. */
SL_API sl_status sl_check_i64(const char *what, int64_t v, sl_irange r, sl_error *err);
SL_API sl_status sl_check_f64(const char *what, double v, sl_frange r, sl_error *err);

/* "[lo, hi]", "(0, 1]" ... into buf (cap bytes, NUL-terminated, truncated); returns buf. */
SL_API const char *sl_frange_str(sl_frange r, char *buf, size_t cap);

#endif
