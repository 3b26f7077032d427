/* Unicode helpers for the tokenizers; contracts in unicode.h.
 *
 * Category lookups binary-search the generated range tables (a few hundred ranges each, so
 * ~10 probes); ASCII takes a fast path because nearly all text the pre-tokenizers scan is
 * ASCII. */
#include "runtime/text/unicode.h"

size_t sl__utf8_len(unsigned char c)
{
    static const unsigned char k_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k_len[c >> 4];
}

static bool is_cont(const char *s, size_t n, size_t j)
{
    return j < n && ((unsigned char)s[j] & 0xC0) == 0x80;
}

uint32_t sl__utf8_decode(const char *s, size_t n, size_t *i)
{
    const size_t k = *i;
    const unsigned char b0 = (unsigned char)s[k];
    uint32_t cp;
    if (!(b0 & 0x80)) {
        *i = k + 1;
        return b0;
    }
    if ((b0 & 0xE0) == 0xC0 && is_cont(s, n, k + 1)) {
        cp = ((uint32_t)(b0 & 0x1F) << 6) | ((unsigned char)s[k + 1] & 0x3F);
        *i = k + 2;
        return cp;
    }
    if ((b0 & 0xF0) == 0xE0 && is_cont(s, n, k + 1) && is_cont(s, n, k + 2)) {
        cp = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)((unsigned char)s[k + 1] & 0x3F) << 6) |
             ((unsigned char)s[k + 2] & 0x3F);
        *i = k + 3;
        return cp;
    }
    if ((b0 & 0xF8) == 0xF0 && is_cont(s, n, k + 1) && is_cont(s, n, k + 2) &&
        is_cont(s, n, k + 3)) {
        cp = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)((unsigned char)s[k + 1] & 0x3F) << 12) |
             ((uint32_t)((unsigned char)s[k + 2] & 0x3F) << 6) | ((unsigned char)s[k + 3] & 0x3F);
        *i = k + 4;
        /* F5..F7 leads decode past U+10FFFF; llama.cpp would throw when re-encoding them. */
        return cp <= SL__UNICODE_MAX ? cp : SL__UNICODE_REPLACEMENT;
    }
    *i = k + 1;
    return SL__UNICODE_REPLACEMENT;
}

size_t sl__utf8_encode(uint32_t cp, char *out)
{
    if (cp > SL__UNICODE_MAX) cp = SL__UNICODE_REPLACEMENT;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static bool in_ranges(const sl__unicode_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n; /* invariant: every range before lo ends below cp */
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (r[mid].last < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].first <= cp;
}

bool sl__unicode_is_letter(uint32_t cp)
{
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return in_ranges(sl__unicode_letter, sl__unicode_letter_count, cp);
}

bool sl__unicode_is_number(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(sl__unicode_number, sl__unicode_number_count, cp);
}

bool sl__unicode_is_punct(uint32_t cp)
{
    return in_ranges(sl__unicode_punct, sl__unicode_punct_count, cp);
}

bool sl__unicode_is_lower(uint32_t cp)
{
    if (cp < 0x80) return cp >= 'a' && cp <= 'z';
    return in_ranges(sl__unicode_lower, sl__unicode_lower_count, cp);
}

bool sl__unicode_is_upper(uint32_t cp)
{
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
    return in_ranges(sl__unicode_upper, sl__unicode_upper_count, cp);
}

bool sl__unicode_is_mark(uint32_t cp)
{
    if (cp < 0x80) return false;
    return in_ranges(sl__unicode_mark, sl__unicode_mark_count, cp);
}

bool sl__unicode_is_whitespace(uint32_t cp)
{
    /* Unicode White_Space (PropList.txt): 25 code points, stable since Unicode 6.3. */
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t sl__unicode_fold(uint32_t cp)
{
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    return cp == 0x17F ? 's' : cp == 0x212A ? 'k' : cp;
}

uint16_t sl__unicode_flags(uint32_t cp)
{
    uint16_t f = 0;
    if (sl__unicode_is_whitespace(cp)) f |= SL__UC_WS;
    if (sl__unicode_is_letter(cp)) {
        if (sl__unicode_is_lower(cp)) f |= SL__UC_LL;
        else if (cp >= 0x80 && in_ranges(sl__unicode_title, sl__unicode_title_count, cp))
            f |= SL__UC_LT;
        else if (sl__unicode_is_upper(cp)) f |= SL__UC_LU;
        else if (in_ranges(sl__unicode_modifier, sl__unicode_modifier_count, cp)) f |= SL__UC_LM;
        else f |= SL__UC_LO; /* the five letter categories: what is left is Lo */
        if (cp >= 0x2E80 && in_ranges(sl__unicode_han, sl__unicode_han_count, cp))
            f |= SL__UC_HAN;
        return f;
    }
    if (sl__unicode_is_number(cp)) f |= SL__UC_N;
    else if (sl__unicode_is_mark(cp)) f |= SL__UC_M;
    else if (sl__unicode_is_punct(cp)) f |= SL__UC_P;
    else if (in_ranges(sl__unicode_symbol, sl__unicode_symbol_count, cp)) f |= SL__UC_S;
    /* Han also holds a few numbers (U+3007, U+3021..) and radicals (symbols) */
    if (cp >= 0x2E80 && in_ranges(sl__unicode_han, sl__unicode_han_count, cp)) f |= SL__UC_HAN;
    return f;
}

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves; the other 68 bytes, in
 * increasing order, take U+0100, U+0101, ... */
static bool gpt2_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t sl__gpt2_byte_to_cp(uint8_t b)
{
    if (gpt2_printable(b)) return b;
    /* rank of b among the non-printable bytes below it */
    unsigned k;
    if (b <= 0x20) k = b;                       /* 0x00..0x20: 33 bytes */
    else if (b <= 0xA0) k = 33 + (b - 0x7F);    /* 0x7F..0xA0: 34 bytes */
    else k = 67;                                /* 0xAD */
    return 256 + k;
}

int sl__gpt2_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return gpt2_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    const unsigned k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return 0xAD;
}
