/* tests/kernels_cuda/qt_host_test: the GEMV's and the dequant's GGUF block decoders
 * (kernels/cuda/common.cuh sl_qt<T>, the codebook types' qt_iq.cuh) run on the CPU, for every
 * type sl_qt_dispatch lists, against kernels/ref: deq bit for bit against
 * sl_quant_dequant_row, dot within a few float ulps of the float64 sum over the dequantized
 * weights; and the Q8-activation kernel's loads and terms (qx.cuh, check_qx below). Why: CI has no GPU, and a decoder is
 * the part of a CUDA kernel that differs by type; this runs it unit by unit exactly as the
 * kernels call it (a unit's block at its offset in a 16-byte aligned row), through host
 * stand-ins for the few CUDA intrinsics (tests/kernels_cuda/host_shim). The kernels
 * themselves (staging, reductions, launches) are checked on the GPU machine by
 * cuda_kernels_matmul_test. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/kernels_cuda/common_cuh.h" /* kernels/cuda/common.cuh (BUILD) */
#include "tests/kernels_cuda/rand_weights.h"

extern "C" {
#include "gguf/gguf.h"
#include "kernels/ref/quant.h"
#include "tests/testing.h"
}

static int n_types = 0;

struct check_type {
    uint32_t code;
    template <uint32_t T> void operator()()
    {
        typedef sl_qt<T> Q;
        const sl_gguf_type_info *ti = sl_gguf_type_get(T);
        CHECK(ti != NULL);
        if (!ti) return;
        n_types++;
        /* the block shape the GEMV and the dequant size rows by (sl_qt_block_shape) is GGUF's */
        int64_t be = 0, bb = 0;
        CHECK(sl_qt_block_shape(T, &be, &bb));
        CHECK_MSG(be == ti->block_size && bb == ti->type_size, "%s: block %lld elems %lld bytes, "
                  "GGUF's %u / %u", ti->name, (long long)be, (long long)bb, ti->block_size,
                  ti->type_size);
        const int64_t n = 4 * 256; /* whole blocks of every type, several of each */
        const size_t bytes = sl_quant_row_bytes(T, n);
        CHECK(bytes > 0);
        uint8_t *w = (uint8_t *)aligned_alloc(16, (bytes + 15) / 16 * 16);
        float *f = (float *)malloc((size_t)n * sizeof *f), *ref = (float *)malloc((size_t)n * 4);
        float *x = (float *)malloc((size_t)n * sizeof *x);
        if (!w || !f || !ref || !x) {
            CHECK_MSG(0, "%s: out of memory", ti->name);
            free(w), free(f), free(ref), free(x);
            return;
        }
        sl_error e;
        for (int rep = 0; rep < 20; rep++) {
            CHECK_MSG(rand_weights(T, n, w, f, rep), "%s: random weights", ti->name);
            CHECK(sl_quant_dequant_row(T, w, ref, n, &e) == SL_OK);
            for (int64_t i = 0; i < n; i++) x[i] = rnd_f(-1.0f, 1.0f);
            const int64_t units = n / Q::UNIT;
            int bad_deq = 0, bad_dot = 0;
            for (int64_t u = 0; u < units; u++) {
                const uint8_t *blk = w + (u / Q::SUBS) * Q::BB;
                const int sub = (int)(u % Q::SUBS);
                float v[Q::UNIT];
                if constexpr (T == 0 || T == 1 || T == 30) /* float types: elem, one unit a block */
                    for (int i = 0; i < Q::UNIT; i++) v[i] = Q::elem(blk, i);
                else
                    Q::deq(blk, sub, v);
                bad_deq += memcmp(v, ref + u * Q::UNIT, sizeof v) != 0;
                double want = 0, mag = 0;
                float sx = 0.0f;
                for (int i = 0; i < Q::UNIT; i++) {
                    want += (double)ref[u * Q::UNIT + i] * x[u * Q::UNIT + i];
                    mag += fabs((double)ref[u * Q::UNIT + i] * x[u * Q::UNIT + i]);
                    sx += x[u * Q::UNIT + i];
                }
                const float got = Q::dot(blk, sub, x + u * Q::UNIT, sx);
                /* float sums of <= 32 products, scales applied after (and a min term through
                 * sx): a few ulps of the magnitudes involved */
                if (!(fabs((double)got - want) <= 1e-5 * (mag + fabs(want)) + 1e-30)) {
                    if (!bad_dot)
                        fprintf(stderr, "%s unit %lld: dot %.9g, float64 %.9g\n", ti->name,
                                (long long)u, got, want);
                    bad_dot++;
                }
            }
            CHECK_MSG(bad_deq == 0, "%s rep %d: %d of %lld units' deq differ from kernels/ref",
                      ti->name, rep, bad_deq, (long long)units);
            CHECK_MSG(bad_dot == 0, "%s rep %d: %d of %lld units' dot off", ti->name, rep,
                      bad_dot, (long long)units);
        }
        free(w);
        free(f);
        free(ref);
        free(x);
        printf("qt_host_test: %-6s deq and dot ok (unit %d, %d units a block)\n", ti->name,
               Q::UNIT, Q::SUBS);
    }
};

/* The GEMV's Q8-activation decoders (sl_qx_load / sl_qx_term: Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS,
 * MXFP4) on random rows against random int8 x units with a Q8_1 scale: the aligned loader
 * (vectors, or words funnel-shifted where blocks start off a word: Q8_0's odd blocks, Q6_K's,
 * MXFP4's) gives the byte loader's words bit for bit, from a 16-byte aligned row and (Q8_0,
 * Q6_K, IQ4_XS, MXFP4, whose aligned forms need 4 / 8 bytes) a row aligned to that only; the
 * term is the float64 sum of the reference weights times xq * xd within 2e-5 (S + M X), as the
 * GPU test bounds it. */
template <uint32_t T> static void check_qx_row(int64_t n)
{
    const size_t bytes = sl_quant_row_bytes(T, n);
    /* ex: exactly the row (malloc's 16-byte alignment), so that ASan sees a read past it */
    uint8_t *ex = (uint8_t *)malloc(bytes);
    uint8_t *odd = (uint8_t *)aligned_alloc(16, (bytes + 31) / 16 * 16); /* at +1, +4, +8 */
    float *f = (float *)malloc((size_t)n * sizeof *f), *ref = (float *)malloc((size_t)n * 4);
    if (!ex || !odd || !f || !ref || ((uintptr_t)ex & 15)) {
        CHECK_MSG(0, "check_qx: out of memory (or malloc not 16-byte aligned)");
        free(ex), free(odd), free(f), free(ref);
        return;
    }
    sl_error e;
    int bad_words = 0, bad_term = 0;
    for (int rep = 0; rep < 20; rep++) {
        for (int64_t i = 0; i < n; i++)
            f[i] = rnd_f(-1.0f, 1.0f) * (1.0f + (float)(i % 5)) + (rep % 2 ? 0.7f : 0.0f);
        CHECK_MSG(sl_quant_row(T, f, ex, n, &e) == SL_OK, "%s", e.msg);
        CHECK(sl_quant_dequant_row(T, ex, ref, n, &e) == SL_OK);
        for (int64_t u = 0; u < n / 32; u++) {
            sl_qx_w a, b, c, d4;
            memcpy(odd + 1, ex, bytes);
            sl_qx_load<T, true>(ex, u, a);
            sl_qx_load<T, false>(ex, u, b);
            sl_qx_load<T, false>(odd + 1, u, c);
            const int nw =
                T == 8 ? 9 : T == 12 ? 12 : T == 13 ? 20 : T == 14 ? 18 : T == 23 ? 6 : 5;
            bool same = memcmp(a.v, b.v, 4 * nw) == 0 && memcmp(a.v, c.v, 4 * nw) == 0;
            if (sl_qx_align(T) < 16) { /* a row aligned to the type's need only */
                const int at = sl_qx_align(T);
                memmove(odd + at, odd + 1, bytes);
                sl_qx_load<T, true>(odd + at, u, d4);
                same = same && memcmp(a.v, d4.v, 4 * nw) == 0;
            }
            bad_words += !same;
            int xq[8], qsum = 0;
            int8_t xb[32];
            for (int i = 0; i < 32; i++) {
                xb[i] = (int8_t)((int)(rnd_u32() % 255) - 127);
                qsum += xb[i];
            }
            memcpy(xq, xb, sizeof xq);
            const float xd = rnd_f(0.001f, 0.05f), xs = xd * (float)qsum;
            const float got = sl_qx_term<T>(a, u, xq, xd, xs);
            double want = 0, S = 0, M = 0, X = 0;
            for (int i = 0; i < 32; i++) {
                const double wi = ref[32 * u + i], xi = (double)xb[i] * xd;
                want += wi * xi, S += fabs(wi * xi), X += fabs(xi);
                M = fmax(M, fabs(wi));
            }
            if (!(fabs((double)got - want) <= 2e-5 * (S + M * X) + 1e-30)) {
                if (!bad_term)
                    fprintf(stderr, "qx %u unit %lld: %.9g, float64 %.9g\n", T, (long long)u,
                            got, want);
                bad_term++;
            }
        }
    }
    CHECK_MSG(bad_words == 0, "qx type %u, %lld columns: %d units' aligned words differ from "
              "byte loads", T, (long long)n, bad_words);
    CHECK_MSG(bad_term == 0, "qx type %u, %lld columns: %d units' terms off", T, (long long)n,
              bad_term);
    free(ex), free(odd), free(f), free(ref);
}

/* a row of 16-byte multiple (16 Q4_K or 128 Q8_0 blocks), and for a type whose aligned form
 * takes rows of any length one block longer (MXFP4's last block then starts on a word) */
template <uint32_t T> static void check_qx(void)
{
    check_qx_row<T>(16 * 256);
    if (sl_qx_any_rows(T)) check_qx_row<T>(16 * 256 + sl_gguf_type_get(T)->block_size);
    printf("qt_host_test: qx %s loads and terms ok\n", sl_gguf_type_get(T)->name);
}

/* visits every type sl_qt_for_each lists; bad: the first without a block shape, + 1 */
struct qt_counter {
    int n = 0;
    uint32_t bad = 0;
    int64_t e_ = 0, b_ = 0;
    template <uint32_t T> void operator()()
    {
        n++;
        if (!sl_qt_block_shape(T, &e_, &b_) && !bad) bad = T + 1;
    }
};

int main(void)
{
    /* every code sl_qt_dispatch takes, found by asking it for each */
    for (uint32_t t = 0; t < 64; t++) {
        check_type c{t};
        sl_qt_dispatch(t, c);
    }
    /* sl_qt_for_each visits the same list (the GEMV sets its kernels' attributes through it) */
    qt_counter cnt;
    sl_qt_for_each(cnt);
    CHECK_MSG(cnt.n == n_types && cnt.bad == 0, "sl_qt_for_each: %d types (dispatch %d), "
              "first without a shape %u", cnt.n, n_types, cnt.bad ? cnt.bad - 1 : 0);
    CHECK_MSG(sl_qt_block_shape(64, &cnt.e_, &cnt.b_) == false, "type 64 has a block shape");
    check_qx<8>();
    check_qx<12>();
    check_qx<13>();
    check_qx<14>();
    check_qx<23>();
    check_qx<39>();
    CHECK_MSG(n_types == 23, "%d types decoded (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 MXFP4 "
              "IQ4_NL IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S "
              "IQ1_M)", n_types);
    return sl_test_finish("qt_host_test");
}
