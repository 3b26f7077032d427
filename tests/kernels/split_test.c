/* split_test: kernels/cpu/split's plan covers every row of every part exactly once, keeps its
 * invariants, gives every chunk at most target + one row of bytes with row counts within one
 * of each other inside a part, balances parts of different row sizes by bytes, and refuses
 * bad arguments naming the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/split.h"
#include "tests/testing.h"

static uint64_t rng = 0x1234567887654321ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_plan(const int64_t *rows, const size_t *rb, int n_parts, int n_threads)
{
    sl_cpu_split s;
    sl_error e;
    CHECK_MSG(!sl_cpu_split_plan(rows, rb, n_parts, n_threads, &s, &e), "%s", e.msg);
    CHECK_MSG(!sl_cpu_split_validate(&s, &e), "%s", e.msg);
    int *hits[SL_CPU_SPLIT_MAX_PARTS];
    for (int p = 0; p < n_parts; p++) hits[p] = calloc((size_t)rows[p], sizeof(int));
    int64_t lo[SL_CPU_SPLIT_MAX_PARTS], hi[SL_CPU_SPLIT_MAX_PARTS];
    for (int p = 0; p < n_parts; p++) lo[p] = INT64_MAX, hi[p] = 0;
    int last = 0;
    for (int64_t c = 0; c < s.n_chunks; c++) {
        int p;
        int64_t r0, r1;
        sl_cpu_split_chunk(&s, c, &p, &r0, &r1);
        CHECK(p >= 0 && p < n_parts && p >= last); /* numbered part by part */
        last = p;
        CHECK_MSG(0 <= r0 && r0 < r1 && r1 <= rows[p], "chunk %lld: part %d rows [%lld, %lld)",
                  (long long)c, p, (long long)r0, (long long)r1);
        if (!(0 <= r0 && r0 < r1 && r1 <= rows[p])) continue;
        const uint64_t bytes = (uint64_t)(r1 - r0) * rb[p];
        CHECK_MSG(bytes <= SL_CPU_SPLIT_MAX_BYTES + rb[p], "chunk of %llu bytes",
                  (unsigned long long)bytes);
        lo[p] = r1 - r0 < lo[p] ? r1 - r0 : lo[p];
        hi[p] = r1 - r0 > hi[p] ? r1 - r0 : hi[p];
        for (int64_t r = r0; r < r1; r++) hits[p][r]++;
    }
    for (int p = 0; p < n_parts; p++) {
        int64_t wrong = 0;
        for (int64_t r = 0; r < rows[p]; r++) wrong += hits[p][r] != 1;
        CHECK_MSG(!wrong, "part %d: %lld of %lld rows not covered exactly once", p,
                  (long long)wrong, (long long)rows[p]);
        CHECK_MSG(hi[p] - lo[p] <= 1, "part %d: chunk rows from %lld to %lld", p,
                  (long long)lo[p], (long long)hi[p]);
        free(hits[p]);
    }
}

int main(void)
{
    /* the shapes it is for: Gemma 3 270M's q/k/v (Q5_0, Q5_0, Q8_0 at 640 columns) and its
     * 262144-row output matrix (Q8_0) */
    {
        const int64_t rows[] = {1024, 256, 256};
        const size_t rb[] = {440, 440, 680};
        for (int t = 1; t <= 4; t++) check_plan(rows, rb, 3, t);
        const int64_t out_rows[] = {262144};
        const size_t out_rb[] = {680};
        check_plan(out_rows, out_rb, 1, 2);
        sl_cpu_split s;
        sl_error e;
        CHECK(!sl_cpu_split_plan(out_rows, out_rb, 1, 2, &s, &e));
        /* enough chunks for dynamic balance, each within the byte cap */
        CHECK((uint64_t)s.n_chunks >= 262144 * 680 / SL_CPU_SPLIT_MAX_BYTES);
        /* by bytes: a part of rows twice as large gets about twice the chunks */
        const int64_t r2[] = {4096, 4096};
        const size_t b2[] = {340, 680};
        CHECK(!sl_cpu_split_plan(r2, b2, 2, 2, &s, &e));
        const int64_t n0 = s.first[1] - s.first[0], n1 = s.first[2] - s.first[1];
        CHECK_MSG(n1 >= 2 * n0 - 1 && n1 <= 2 * n0 + 1, "chunks %lld and %lld", (long long)n0,
                  (long long)n1);
    }
    for (int it = 0; it < 2000; it++) {
        const int n_parts = 1 + (int)(rnd() % SL_CPU_SPLIT_MAX_PARTS);
        int64_t rows[SL_CPU_SPLIT_MAX_PARTS];
        size_t rb[SL_CPU_SPLIT_MAX_PARTS];
        for (int p = 0; p < n_parts; p++) {
            rows[p] = 1 + (int64_t)(rnd() % (it % 3 ? 300 : 20000));
            rb[p] = 1 + (size_t)(rnd() % (it % 5 ? 2000 : 200000));
        }
        check_plan(rows, rb, n_parts, 1 + (int)(rnd() % 8));
    }
    sl_cpu_split s;
    sl_error e;
    const int64_t rows[] = {5, 0};
    const size_t rb[] = {10, 10};
    CHECK(sl_cpu_split_plan(rows, rb, 0, 1, &s, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_parts = 0");
    CHECK(sl_cpu_split_plan(rows, rb, 2, 1, &s, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "part 1 has rows = 0");
    CHECK(sl_cpu_split_plan(rows, rb, 1, 0, &s, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "n_threads = 0");
    const int64_t big[] = {INT32_MAX, INT32_MAX};
    const size_t huge[] = {SIZE_MAX / 2, SIZE_MAX / 2};
    CHECK(sl_cpu_split_plan(big, huge, 2, 1, &s, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "overflows");
    CHECK(!sl_cpu_split_plan(rows, rb, 1, 1, &s, &e));
    s.first[1] = 7; /* more chunks than rows */
    s.n_chunks = 7;
    CHECK(sl_cpu_split_validate(&s, &e) == SL_ERR_INVALID);
    CHECK_CONTAINS(e.msg, "7 chunks for 5 rows");
    return sl_test_finish("split_test");
}
