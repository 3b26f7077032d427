/* quant_tool: file-level front end of kernels/ref/quant for quant_vs_gguf_py.py.
 *
 *   quant_tool quant   TYPE ROW IN.f32 OUT.bin   packs raw little-endian floats, ROW per row
 *   quant_tool dequant TYPE ROW IN.bin OUT.f32   unpacks rows of ROW elements
 *
 * Rows are converted one at a time with sl_quant_row / sl_quant_dequant_row, so the script also
 * exercises the row API's block bookkeeping. Exit 0 on success, 1 on any error (printed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/quant.h"

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "quant_tool: %s: %s\n", what, detail);
    return 1;
}

static int read_all(const char *path, unsigned char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (!b) {
            fclose(f);
            return fail(path, "out of memory");
        }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        unsigned char *nb = realloc(b, cap);
        if (!nb) free(b);
        b = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return fail(path, "read error");
    }
    *buf = b;
    *len = n;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6 || (strcmp(argv[1], "quant") && strcmp(argv[1], "dequant"))) {
        fprintf(stderr, "usage: quant_tool quant|dequant TYPE ROW IN OUT\n");
        return 2;
    }
    const int quant = !strcmp(argv[1], "quant");
    const sl_gguf_type_info *ti = sl_gguf_type_by_name(argv[2]);
    if (!ti) return fail(argv[2], "unknown type");
    char *end;
    errno = 0;
    long long row = strtoll(argv[3], &end, 10);
    if (errno || *end || row <= 0) return fail(argv[3], "bad row length");
    const size_t row_bytes = sl_quant_row_bytes(ti->code, row);
    if (!row_bytes) return fail(argv[2], "unsupported type or row length");

    unsigned char *in;
    size_t len;
    if (read_all(argv[4], &in, &len)) return 1;
    const size_t in_row = quant ? (size_t)row * sizeof(float) : row_bytes;
    const size_t out_row = quant ? row_bytes : (size_t)row * sizeof(float);
    if (len % in_row) {
        free(in);
        return fail(argv[4], "size is not a whole number of rows");
    }
    const size_t rows = len / in_row;
    unsigned char *out = malloc(rows * out_row + 1);
    float *tmp = malloc((size_t)row * sizeof(float));
    if (!out || !tmp) {
        free(in);
        free(out);
        free(tmp);
        return fail("buffers", "out of memory");
    }
    int rc = 0;
    sl_error err;
    for (size_t r = 0; r < rows && !rc; r++) {
        sl_status st;
        if (quant) {
            memcpy(tmp, in + r * in_row, in_row); /* the input buffer may be unaligned */
            st = sl_quant_row(ti->code, tmp, out + r * out_row, row, &err);
        } else {
            st = sl_quant_dequant_row(ti->code, in + r * in_row, tmp, row, &err);
            memcpy(out + r * out_row, tmp, out_row);
        }
        if (st != SL_OK) rc = fail("convert", err.msg);
    }
    if (!rc) {
        FILE *f = fopen(argv[5], "wb");
        if (!f) {
            rc = fail(argv[5], strerror(errno));
        } else {
            if (fwrite(out, 1, rows * out_row, f) != rows * out_row) rc = fail(argv[5], "write");
            if (fclose(f)) rc = fail(argv[5], "close");
        }
    }
    free(in);
    free(out);
    free(tmp);
    return rc;
}
