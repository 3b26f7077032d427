/* Byte-balanced chunking of rows over several matrices (see split.h). */
#include "kernels/cpu/split.h"

sl_status sl_cpu_split_plan(const int64_t *rows, const size_t *row_bytes, int n_parts,
                            int n_threads, sl_cpu_split *out, sl_error *err)
{
    static const char fn[] = "sl_cpu_split_plan";
    if (!out || !rows || !row_bytes)
        return sl_error_set(err, SL_ERR_INVALID, "%s: NULL out, rows or row_bytes", fn);
    if (n_parts < 1 || n_parts > SL_CPU_SPLIT_MAX_PARTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_parts = %d is not in [1, %d]", fn,
                            n_parts, SL_CPU_SPLIT_MAX_PARTS);
    if (n_threads < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_threads = %d < 1", fn, n_threads);
    uint64_t total = 0;
    for (int p = 0; p < n_parts; p++) {
        if (rows[p] < 1 || rows[p] > INT32_MAX || row_bytes[p] == 0)
            return sl_error_set(err, SL_ERR_INVALID, "%s: part %d has rows = %lld, row_bytes = "
                                "%zu (need rows in [1, 2^31) and row_bytes >= 1)", fn, p,
                                (long long)rows[p], row_bytes[p]);
        if ((uint64_t)rows[p] > (UINT64_MAX - total) / row_bytes[p])
            return sl_error_set(err, SL_ERR_INVALID, "%s: part %d: byte total overflows", fn, p);
        total += (uint64_t)rows[p] * row_bytes[p];
    }
    uint64_t target = total / ((uint64_t)n_threads * 4);
    if (target < SL_CPU_SPLIT_MIN_BYTES) target = SL_CPU_SPLIT_MIN_BYTES;
    if (target > SL_CPU_SPLIT_MAX_BYTES) target = SL_CPU_SPLIT_MAX_BYTES;
    out->n_parts = n_parts;
    out->first[0] = 0;
    for (int p = 0; p < n_parts; p++) {
        const uint64_t bytes = (uint64_t)rows[p] * row_bytes[p];
        uint64_t n = bytes / target + (bytes % target != 0);
        if (n > (uint64_t)rows[p]) n = (uint64_t)rows[p];
        out->rows[p] = rows[p];
        out->first[p + 1] = out->first[p] + (int64_t)n;
    }
    out->n_chunks = out->first[n_parts];
    return SL_OK;
}

void sl_cpu_split_chunk(const sl_cpu_split *s, int64_t c, int *part, int64_t *r0, int64_t *r1)
{
    int p = 0;
    while (p + 1 < s->n_parts && c >= s->first[p + 1]) p++;
    /* rows * i / n for i = c - first, c - first + 1: counts differ by at most one and the
     * boundaries of consecutive chunks meet, so the part's rows are covered once. */
    const int64_t n = s->first[p + 1] - s->first[p], i = c - s->first[p];
    *part = p;
    *r0 = s->rows[p] * i / n;
    *r1 = s->rows[p] * (i + 1) / n;
}

sl_status sl_cpu_split_validate(const sl_cpu_split *s, sl_error *err)
{
    static const char fn[] = "sl_cpu_split_validate";
    if (!s) return sl_error_set(err, SL_ERR_INVALID, "%s: NULL split", fn);
    if (s->n_parts < 1 || s->n_parts > SL_CPU_SPLIT_MAX_PARTS)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_parts = %d", fn, s->n_parts);
    if (s->first[0] != 0 || s->first[s->n_parts] != s->n_chunks)
        return sl_error_set(err, SL_ERR_INVALID, "%s: first[0] = %lld, first[n_parts] = %lld, "
                            "n_chunks = %lld", fn, (long long)s->first[0],
                            (long long)s->first[s->n_parts], (long long)s->n_chunks);
    for (int p = 0; p < s->n_parts; p++) {
        const int64_t n = s->first[p + 1] - s->first[p];
        if (n < 1 || n > s->rows[p])
            return sl_error_set(err, SL_ERR_INVALID, "%s: part %d: %lld chunks for %lld rows",
                                fn, p, (long long)n, (long long)s->rows[p]);
    }
    return SL_OK;
}
