/* kernels/cpu/repack: see repack.h. */
#include "kernels/cpu/repack.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "kernels/ref/repack.h"

/* Groups [g0, g1) of eight rows of one part. */
typedef struct chunk {
    const sl_cpu_repack_part *part;
    int64_t g0, g1;
} chunk;

typedef struct job {
    const chunk *chunk;
    sl_status *st; /* per thread: its first failure (its later chunks are skipped) */
    sl_error *err; /* per thread */
} job;

static size_t group_bytes(const sl_cpu_repack_part *p)
{
    return (size_t)(p->cols / SL_QK_K) * 8 * sizeof(sl_block_q4_K);
}

/* p's groups of eight rows (*groups) and the groups per chunk. */
static int64_t chunk_groups(const sl_cpu_repack_part *p, int64_t *groups)
{
    *groups = p->rows / 8;
    return (int64_t)(SL_CPU_REPACK_CHUNK_BYTES / group_bytes(p)) + 1;
}

static const char *name_of(const sl_cpu_repack_part *p)
{
    return p->name ? p->name : "(unnamed)";
}

static void run_chunks(void *ctx, int64_t b, int64_t e, int thread)
{
    const job *j = ctx;
    for (int64_t i = b; i < e && !j->st[thread]; i++) {
        const chunk *c = &j->chunk[i];
        uint8_t *data = (uint8_t *)c->part->data + (size_t)c->g0 * group_bytes(c->part);
        sl_error *err = &j->err[thread];
        sl_error why = {0}; /* err is formatted from it: the two must not alias */
        sl_status st = sl_repack_q4_K_r8(data, data, 8 * (c->g1 - c->g0), c->part->cols, &why);
        if (st)
            j->st[thread] = sl_error_set(err, st, "tensor '%s': repacking rows %lld..%lld to "
                                         "Q4_K_R8: %s", name_of(c->part), (long long)(8 * c->g0),
                                         (long long)(8 * c->g1), why.msg);
    }
}

/* Runs the n chunks on pool, each once; the first thread's failure is the answer. */
static sl_status run(sl_cpu_pool *pool, const chunk *ch, int64_t n, sl_error *err)
{
    const int nt = sl_cpu_pool_threads(pool);
    sl_status *st = calloc((size_t)nt, sizeof *st);
    sl_error *errs = calloc((size_t)nt, sizeof *errs);
    sl_status s = SL_OK;
    if (!st || !errs) {
        s = sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_repack_q4_K_r8: no memory for %d threads' "
                         "status", nt);
    } else {
        job j = {.chunk = ch, .st = st, .err = errs};
        s = sl_cpu_pool_parallel_for(pool, n, 1, run_chunks, &j, err);
        for (int t = 0; !s && t < nt; t++)
            if (st[t]) s = sl_error_set(err, st[t], "%s", errs[t].msg);
    }
    free(st);
    free(errs);
    return s;
}

sl_status sl_cpu_repack_q4_K_r8(sl_cpu_pool *pool, const sl_cpu_repack_part *parts,
                                int64_t n_parts, sl_error *err)
{
    if (n_parts < 0 || (n_parts && !parts))
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_repack_q4_K_r8: n_parts = %lld with "
                            "parts %s", (long long)n_parts, parts ? "set" : "NULL");
    int64_t n = 0;
    for (int64_t i = 0; i < n_parts; i++) {
        const sl_cpu_repack_part *p = &parts[i];
        /* the reference's own checks on the whole part, before anything is written */
        sl_error why = {0};
        if (sl_repack_q4_K_r8_check(p->data, p->rows, p->cols, &why))
            return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_repack_q4_K_r8: part %lld ('%s'): %s",
                                (long long)i, name_of(p), why.msg);
        int64_t groups;
        const int64_t per = chunk_groups(p, &groups);
        n += (groups + per - 1) / per;
    }
    if (!n) return SL_OK;
    chunk *ch = calloc((size_t)n, sizeof *ch);
    if (!ch)
        return sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_repack_q4_K_r8: no memory for %lld "
                            "chunks", (long long)n);
    int64_t c = 0;
    for (int64_t i = 0; i < n_parts; i++) {
        int64_t groups;
        const int64_t per = chunk_groups(&parts[i], &groups);
        for (int64_t g = 0; g < groups; g += per) {
            const int64_t g1 = g + per < groups ? g + per : groups;
            ch[c++] = (chunk){.part = &parts[i], .g0 = g, .g1 = g1};
        }
    }
    const sl_status st = run(pool, ch, n, err);
    free(ch);
    return st;
}

/* Row r's Q4_K block head (at o: d, dmin, 12 bytes of scales; 128 of quants follow) out of the
 * Q4_K_R8 block x (kernels/ref/repack.h's layout: d[8] at 0, dmin[8] at 16, sc at 32, mn at
 * 96, qs at 128), read straight from x: the reference's unpack_block without its copies. */
static inline void unpack_row(const uint8_t *restrict x, int r, uint8_t *restrict o)
{
    memcpy(o, x + 2 * r, 2);
    memcpy(o + 2, x + 16 + 2 * r, 2);
    const uint8_t *sc = x + 32, *mn = x + 96;
    uint8_t s[8], m[8];
    for (int j = 0; j < 8; j++) {
        const int k = 16 * (j / 2) + 2 * r + j % 2;
        const uint8_t n = mn[k % 32];
        s[j] = sc[k] & 63;
        m[j] = (uint8_t)(((k < 32 ? n : n >> 4) & 15) | ((sc[k] >> 6) << 4));
    }
    uint8_t *q = o + 4;
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((s[j] & 63) | ((s[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((s[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

/* The quants of the eight rows' blocks o[r] out of x's qs: read in order, 32 bytes (four of
 * each row) at a time. */
static inline void unpack_quants(const uint8_t *restrict x, uint8_t *restrict const o[8])
{
    /* per round p an 8 x 8 transpose of 32-bit words (in: [c][r], out: [r][c]), as four 4 x 4
     * SSE2 transposes */
    const uint8_t *qs = x + 128;
#if !defined(__x86_64__)
    for (int p = 0; p < 4; p++)
        for (int c = 0; c < 8; c++)
            for (int r = 0; r < 8; r++)
                memcpy(o[r] + 16 + 32 * p + 4 * c, qs + 256 * p + 32 * c + 4 * r, 4);
#else
    for (int p = 0; p < 4; p++)
        for (int c0 = 0; c0 < 8; c0 += 4)
            for (int r0 = 0; r0 < 8; r0 += 4) {
                __m128i v[4];
                for (int i = 0; i < 4; i++)
                    v[i] = _mm_loadu_si128(
                        (const __m128i *)(qs + 256 * p + 32 * (c0 + i) + 4 * r0));
                const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]);
                const __m128i t1 = _mm_unpacklo_epi32(v[2], v[3]);
                const __m128i t2 = _mm_unpackhi_epi32(v[0], v[1]);
                const __m128i t3 = _mm_unpackhi_epi32(v[2], v[3]);
                const __m128i w[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1),
                                      _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)};
                for (int i = 0; i < 4; i++)
                    _mm_storeu_si128((__m128i *)(o[r0 + i] + 16 + 32 * p + 4 * c0), w[i]);
            }
#endif
}

sl_status sl_cpu_repack_q4_K_r8_undo(const void *src, void *dst, int64_t rows, int64_t cols,
                                     sl_error *err)
{
    const uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    const uint64_t bytes = src && dst && rows > 0 && cols > 0
                               ? (uint64_t)rows * (uint64_t)(cols / SL_QK_K) * sizeof(sl_block_q4_K)
                               : 0;
    if (!bytes || rows % 8 || cols % SL_QK_K || (s < d + bytes && d < s + bytes))
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_repack_q4_K_r8_undo: rows = %lld, cols "
                            "= %lld, src %p, dst %p: want rows %% 8 == 0, cols %% %d == 0, "
                            "disjoint buffers", (long long)rows, (long long)cols, src, dst,
                            SL_QK_K);
    const int64_t nb = cols / SL_QK_K;
    const size_t rb = sizeof(sl_block_q4_K), gb = sizeof(sl_block_q4_K_r8);
    for (int64_t g = 0; g < rows / 8; g++) {
        const uint8_t *in = (const uint8_t *)src + (size_t)(g * nb) * gb;
        uint8_t *out = (uint8_t *)dst + (size_t)(g * 8 * nb) * rb;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o[8];
            for (int r = 0; r < 8; r++) {
                o[r] = out + (size_t)(r * nb + b) * rb;
                unpack_row(in + (size_t)b * gb, r, o[r]);
            }
            unpack_quants(in + (size_t)b * gb, o);
        }
    }
    return SL_OK;
}
