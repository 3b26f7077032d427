/* Q4_K <-> Q4_K_R8 (see repack.h). */
#include "kernels/ref/repack.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/matvec_impl.h"

/* ggml's 12-byte packing of eight six-bit scales and mins (the inverse of
 * sl__mv_scale_min_k4): every 12-byte pattern is one such set, so the round trip is exact. */
static void pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12])
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/* Super-block b of the eight rows at row[0..7] into out. */
static void pack_block(const sl_block_q4_K *const row[8], sl_block_q4_K_r8 *out)
{
    for (int r = 0; r < 8; r++) {
        const sl_block_q4_K *x = row[r];
        out->d[r] = x->d;
        out->dmin[r] = x->dmin;
        for (int j = 0; j < 8; j++) {
            uint8_t s, m;
            sl__mv_scale_min_k4(j, x->scales, &s, &m);
            const int k = 16 * (j / 2) + 2 * r + j % 2;
            out->sc[k] = (uint8_t)(s | ((m >> 4) << 6));
            uint8_t *n = &out->mn[k % 32];
            *n = k < 32 ? (uint8_t)((*n & 0xF0) | (m & 15)) : (uint8_t)((*n & 0x0F) | (m & 15) << 4);
        }
        for (int p = 0; p < 4; p++)
            for (int c = 0; c < 8; c++)
                memcpy(&out->qs[256 * p + 32 * c + 4 * r], &x->qs[32 * p + 4 * c], 4);
    }
}

/* Row r (0..7) of in as a Q4_K block. */
static void unpack_block(const sl_block_q4_K_r8 *in, int r, sl_block_q4_K *out)
{
    out->d = in->d[r];
    out->dmin = in->dmin[r];
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        const int k = 16 * (j / 2) + 2 * r + j % 2;
        const uint8_t n = in->mn[k % 32];
        sc[j] = in->sc[k] & 63;
        m[j] = (uint8_t)(((k < 32 ? n : n >> 4) & 15) | ((in->sc[k] >> 6) << 4));
    }
    pack_scales(sc, m, out->scales);
    for (int p = 0; p < 4; p++)
        for (int c = 0; c < 8; c++)
            memcpy(&out->qs[32 * p + 4 * c], &in->qs[256 * p + 32 * c + 4 * r], 4);
}

void sl__q4_K_r8_row(const void *w, int64_t nb, int64_t r, int64_t b0, int64_t b1, void *dst)
{
    const sl_block_q4_K_r8 *g = (const sl_block_q4_K_r8 *)w + (r / 8) * nb;
    sl_block_q4_K *out = dst;
    for (int64_t b = b0; b < b1; b++) {
        sl_block_q4_K_r8 blk; /* unaligned in general: copied out */
        memcpy(&blk, g + b, sizeof blk);
        unpack_block(&blk, (int)(r % 8), &out[b - b0]);
    }
}

static sl_status check(const char *fn, const void *src, const void *dst, int64_t rows,
                       int64_t cols, sl_error *err)
{
    if (!src || !dst) return sl_error_set(err, SL_ERR_INVALID, "%s: src or dst is NULL", fn);
    if (rows < 8 || rows % 8 || rows > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld is not a positive multiple "
                            "of 8 below 2^31", fn, (long long)rows);
    if (cols < SL_QK_K || cols % SL_QK_K || cols > ((int64_t)1 << 40))
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a positive multiple "
                            "of %d", fn, (long long)cols, SL_QK_K);
    const uint64_t nb = (uint64_t)(cols / SL_QK_K);
    if (nb > UINT64_MAX / sizeof(sl_block_q4_K) / (uint64_t)rows ||
        nb * sizeof(sl_block_q4_K) * (uint64_t)rows > (uint64_t)SIZE_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld x cols = %lld overflows size_t",
                            fn, (long long)rows, (long long)cols);
    const uint64_t bytes = (uint64_t)rows * nb * sizeof(sl_block_q4_K);
    const uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    if (s != d && s < d + bytes && d < s + bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: src and dst overlap without being equal",
                            fn);
    return SL_OK;
}

sl_status sl_repack_q4_K_r8_check(const void *data, int64_t rows, int64_t cols, sl_error *err)
{
    return check("sl_repack_q4_K_r8", data, data, rows, cols, err);
}

/* Both directions, group by group; in place through one group of scratch. */
static sl_status convert(const char *fn, bool to_r8, const void *src, void *dst, int64_t rows,
                         int64_t cols, sl_error *err)
{
    sl_status st = check(fn, src, dst, rows, cols, err);
    if (st) return st;
    const int64_t nb = cols / SL_QK_K;
    const size_t group = (size_t)nb * sizeof(sl_block_q4_K_r8);
    uint8_t *tmp = NULL;
    if (src == dst && !(tmp = malloc(group)))
        return sl_error_set(err, SL_ERR_NOMEM, "%s: no memory for one group (%zu bytes)", fn,
                            group);
    for (int64_t g = 0; g < rows / 8; g++) {
        const uint8_t *in = (const uint8_t *)src + (size_t)g * group;
        uint8_t *out = (uint8_t *)dst + (size_t)g * group;
        if (tmp) {
            memcpy(tmp, in, group);
            in = tmp;
        }
        for (int64_t b = 0; b < nb; b++) {
            if (to_r8) {
                sl_block_q4_K rb[8];
                const sl_block_q4_K *rp[8];
                for (int r = 0; r < 8; r++) {
                    memcpy(&rb[r], in + ((size_t)r * (size_t)nb + (size_t)b) * sizeof rb[r],
                           sizeof rb[r]);
                    rp[r] = &rb[r];
                }
                sl_block_q4_K_r8 o;
                pack_block(rp, &o);
                memcpy(out + (size_t)b * sizeof o, &o, sizeof o);
            } else {
                sl_block_q4_K_r8 blk;
                memcpy(&blk, in + (size_t)b * sizeof blk, sizeof blk);
                for (int r = 0; r < 8; r++) {
                    sl_block_q4_K o;
                    unpack_block(&blk, r, &o);
                    memcpy(out + ((size_t)r * (size_t)nb + (size_t)b) * sizeof o, &o, sizeof o);
                }
            }
        }
    }
    free(tmp);
    return SL_OK;
}

sl_status sl_repack_q4_K_r8(const void *src, void *dst, int64_t rows, int64_t cols,
                            sl_error *err)
{
    return convert("sl_repack_q4_K_r8", true, src, dst, rows, cols, err);
}

sl_status sl_repack_q4_K_r8_undo(const void *src, void *dst, int64_t rows, int64_t cols,
                                 sl_error *err)
{
    return convert("sl_repack_q4_K_r8_undo", false, src, dst, rows, cols, err);
}
