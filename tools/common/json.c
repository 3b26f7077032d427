#include "tools/common/json.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

size_t sl_json_utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return len;
}

void sl_json_str(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        switch (c) {
        case '"': fputs("\\\"", f); i++; continue;
        case '\\': fputs("\\\\", f); i++; continue;
        case '\b': fputs("\\b", f); i++; continue;
        case '\f': fputs("\\f", f); i++; continue;
        case '\n': fputs("\\n", f); i++; continue;
        case '\r': fputs("\\r", f); i++; continue;
        case '\t': fputs("\\t", f); i++; continue;
        default: break;
        }
        size_t k = c < 0x20 ? 0 : sl_json_utf8_len(p + i, len - i);
        if (k == 0) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else {
            fwrite(p + i, 1, k, f);
            i += k;
        }
    }
    fputc('"', f);
}

void sl_json_cstr(FILE *f, const char *s)
{
    if (!s) fputs("null", f);
    else sl_json_str(f, s, strlen(s));
}

static void put_float(FILE *f, double x, int digits)
{
    if (isnan(x)) {
        fputs("\"nan\"", f);
        return;
    }
    if (isinf(x)) {
        fputs(x > 0 ? "\"inf\"" : "\"-inf\"", f);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*g", digits, x);
    /* "1" would read back as an integer and "-0" as +0: keep such values floats. */
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    fputs(buf, f);
}

void sl_json_f32(FILE *f, float x) { put_float(f, (double)x, 9); }
void sl_json_f64(FILE *f, double x) { put_float(f, x, 17); }
