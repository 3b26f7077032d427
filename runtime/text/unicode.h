/* unicode: the small slice of Unicode the tokenizers need (private to runtime/).
 *
 * - UTF-8 decoding exactly as llama.cpp's unicode_cpts_from_utf8: a lead byte announces 1-4
 *   bytes; a truncated or malformed sequence yields U+FFFD and consumes ONE byte, so any byte
 *   string decodes (tokenizers must never fail on bad input). Overlong forms and surrogates
 *   are accepted as llama.cpp does (it does not check them either).
 * - Categories from generated range tables (runtime/text/unicode_tables.c, made by
 *   tools/gen_unicode_tables.py): letter \p{L}, number \p{N}, punctuation \p{P}, and for the
 *   o200k regex lowercase \p{Ll}, upper/titlecase \p{Lu}|\p{Lt} and mark \p{M}; whitespace is
 *   the Unicode White_Space property (what llama.cpp's unicode_set_whitespace holds). For the
 *   regex pre-tokenizers, every class at once as a bit set (sl__unicode_flags).
 * - GPT-2's byte <-> unicode mapping (bytes_to_unicode in OpenAI's encoder.py).
 * All functions are pure; tables are const. */
#ifndef SL_RUNTIME_UNICODE_H
#define SL_RUNTIME_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl__unicode_range {
    uint32_t first, last; /* inclusive */
} sl__unicode_range;

extern const sl__unicode_range sl__unicode_letter[];
extern const size_t sl__unicode_letter_count;
extern const sl__unicode_range sl__unicode_number[];
extern const size_t sl__unicode_number_count;
extern const sl__unicode_range sl__unicode_punct[];
extern const size_t sl__unicode_punct_count;
extern const sl__unicode_range sl__unicode_lower[];
extern const size_t sl__unicode_lower_count;
extern const sl__unicode_range sl__unicode_upper[];
extern const size_t sl__unicode_upper_count;
extern const sl__unicode_range sl__unicode_mark[];
extern const size_t sl__unicode_mark_count;
extern const sl__unicode_range sl__unicode_title[];
extern const size_t sl__unicode_title_count;
extern const sl__unicode_range sl__unicode_modifier[];
extern const size_t sl__unicode_modifier_count;
extern const sl__unicode_range sl__unicode_symbol[];
extern const size_t sl__unicode_symbol_count;
extern const sl__unicode_range sl__unicode_han[];
extern const size_t sl__unicode_han_count;

enum { SL__UNICODE_REPLACEMENT = 0xFFFD, SL__UNICODE_MAX = 0x10FFFF };

/* Bytes of the sequence announced by lead byte c, from its high nibble only (continuation
 * bytes: 1; 0xF8..0xFF: 4), as llama.cpp's unicode_len_utf8; callers clamp to what is left. */
size_t sl__utf8_len(unsigned char c);
/* Decodes one code point at s[*i] (n bytes in all) and advances *i (see the rules above). */
uint32_t sl__utf8_decode(const char *s, size_t n, size_t *i);
/* Encodes cp (> U+10FFFF becomes U+FFFD) into out[0..4); returns the byte count. */
size_t sl__utf8_encode(uint32_t cp, char *out);

bool sl__unicode_is_letter(uint32_t cp);
bool sl__unicode_is_number(uint32_t cp);
bool sl__unicode_is_punct(uint32_t cp);
bool sl__unicode_is_whitespace(uint32_t cp);
bool sl__unicode_is_lower(uint32_t cp); /* \p{Ll} */
bool sl__unicode_is_upper(uint32_t cp); /* \p{Lu} or \p{Lt} */
bool sl__unicode_is_mark(uint32_t cp);  /* \p{M}: Mn, Mc, Me */

/* The classes runtime/text/regex.c tests, one bit each; a letter has exactly one of the five
 * letter bits. */
enum {
    SL__UC_LU = 1 << 0,  /* \p{Lu} */
    SL__UC_LL = 1 << 1,  /* \p{Ll} */
    SL__UC_LT = 1 << 2,  /* \p{Lt} */
    SL__UC_LM = 1 << 3,  /* \p{Lm} */
    SL__UC_LO = 1 << 4,  /* \p{Lo} */
    SL__UC_M = 1 << 5,   /* \p{M} */
    SL__UC_N = 1 << 6,   /* \p{N} */
    SL__UC_P = 1 << 7,   /* \p{P} */
    SL__UC_S = 1 << 8,   /* \p{S} */
    SL__UC_HAN = 1 << 9, /* \p{Han} (script) */
    SL__UC_WS = 1 << 10, /* \s: White_Space */
    SL__UC_L = SL__UC_LU | SL__UC_LL | SL__UC_LT | SL__UC_LM | SL__UC_LO
};
uint16_t sl__unicode_flags(uint32_t cp);
/* The case folding of the tokenizers' (?i:...): ASCII letters to lower case, and the two
 * code points Unicode folds onto ASCII letters, U+017F (long s) to 's' and U+212A (Kelvin)
 * to 'k' (Oniguruma and Rust regex follow them; llama.cpp's [sS] rewrites do not). */
uint32_t sl__unicode_fold(uint32_t cp);

/* GPT-2 byte-level alphabet: the code point standing for byte b. */
uint32_t sl__gpt2_byte_to_cp(uint8_t b);
/* The byte a code point stands for, or -1 if cp is not in the alphabet. */
int sl__gpt2_cp_to_byte(uint32_t cp);

#endif
