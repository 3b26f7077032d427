/* GBNF fragments that JSON Schema conversion (json_schema.h) writes, in llama.cpp's form
 * (common/json-schema-to-grammar.cpp): a JSON string that is none of some names
 * (_not_strings), and the decimal integers of a range (build_min_max_int).
 *
 * Contract: each returns a malloc'd NUL-terminated GBNF expression, NULL when out of memory;
 * inputs are trusted to be as stated (names valid UTF-8). */
#ifndef SL_CLI_GBNF_BUILD_H
#define SL_CLI_GBNF_BUILD_H

#include <stddef.h>
#include <stdint.h>

/* ["] ... ["]: a JSON string other than names[0, n) (nor, as llama.cpp's, a proper prefix of
 * one); char_rule: the rule name of one string character. */
char *sl_gbnf_not_strings(const char *const *names, size_t n, const char *char_rule);
/* The integers in [min, max] written in decimal without leading zeros; INT64_MIN / INT64_MAX:
 * no bound (not both). |min|, |max| < 10^15. */
char *sl_gbnf_int_range(int64_t min, int64_t max);

#endif
