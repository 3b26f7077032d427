/* JSON emitting helpers shared by the CLI commands (inspect, bench, ...).
 *
 * Contract: each function writes one complete JSON token to f; none of them fails on any input
 * (write errors are left for the caller to see through ferror(f)). Strings are treated as
 * bytes: valid UTF-8 passes through unchanged, control characters and bytes that do not form
 * valid UTF-8 are escaped as \u00XX (so a stray 0xFF becomes "\u00ff": lossy but always
 * valid JSON). Floats are printed so that they parse back to the same bits: "%.9g" for f32 and
 * "%.17g" for f64, with ".0" appended to integral values so a reader keeps them floats and
 * -0.0 keeps its sign; NaN and infinities, which JSON lacks, become the strings "nan", "inf"
 * and "-inf". */
#ifndef SL_CLI_JSON_H
#define SL_CLI_JSON_H

#include <stddef.h>
#include <stdio.h>

void sl_json_str(FILE *f, const char *s, size_t len);  /* quoted and escaped */
void sl_json_cstr(FILE *f, const char *s);             /* NUL-terminated; NULL prints null */
void sl_json_f32(FILE *f, float x);
void sl_json_f64(FILE *f, double x);
/* Length of the valid UTF-8 sequence starting at p (n >= 1 bytes available), 0 if invalid:
 * refuses overlong forms, surrogates and code points above U+10FFFF (RFC 3629). */
size_t sl_json_utf8_len(const unsigned char *p, size_t n);

#endif
