/* tests/kernels_cuda/fwd_host_test: fwd.cu's row kernels (kernels/cuda/fwd.cuh) run on the CPU,
 * each thread of a block a host thread (host_shim/launch.h), with fwd.cu's grids (fwd_grid_x,
 * fwd_copy2d_blocks) and FWD_THREADS. Why: CI has no GPU, and kv_store writes every decode
 * token's K and V into the cache.
 * - kv_store, F32 and F16 caches: rows from positions in a device array, out of order and
 *   including the cache's last row; F16 bits exactly kernels/ref's round-to-nearest-even
 *   (sl_quant_fp32_to_fp16, over values that overflow, underflow to subnormals and tie);
 *   every other cache row untouched.
 * - add_rows: each row plus the bias, bit for bit (one float add).
 * - expert_bias: rows of experts' ids (one out of range: untouched), whole experts and
 *   per-expert widths (one empty, one past the stride: clamped), bit for bit; entries past a
 *   width untouched.
 * - gated_add: out + sigmoid(logit) * y within ops_tol.h's bound (cuda_kernels_ops_test's).
 * - copy2d: rows of a width into a wider destination from a strided source, exact; the gaps
 *   untouched.
 * Rows of dim past a whole block (the last block partial); buffers of exactly their size (the
 * ASan build flags an access past one). */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "launch.h"                     /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/fwd_cuh.h" /* kernels/cuda/fwd.cuh (BUILD) */
#include "tests/kernels_cuda/ops_tol.h"
#include "tests/kernels_cuda/rng.h"

extern "C" {
#include "kernels/ref/quant.h"
#include "tests/testing.h"
}

enum { R = 5, D = 600, NCTX = 16 };

static std::vector<float> rand_rows(size_t n)
{
    std::vector<float> v(n);
    for (float &x : v) x = rnd_f(-2.0f, 2.0f);
    return v;
}

static void kv_store(bool f16)
{
    const int32_t pos[R] = {7, 0, NCTX - 1, 3, 8}; /* the last row of the cache among them */
    std::vector<float> src = rand_rows((size_t)(R * D));
    /* values F16 rounds specially: past its range, subnormal, a tie between two halves */
    src[1] = 70000.0f, src[2] = -1e-6f, src[3] = 1e-8f, src[4] = 1.0f + 0x1p-11f;
    src[5] = 65520.0f, src[6] = -3e-8f;
    const size_t elt = f16 ? 2 : 4, bytes = (size_t)(NCTX * D) * elt;
    std::vector<uint8_t> cache(bytes, 0xA5), before(cache);
    CHECK(sl_shim_launch(sl_shim_dim3{fwd_grid_x(D), R, 1}, FWD_THREADS,
                         [&] { fw_kv_store(src.data(), pos, D, f16, cache.data()); }));
    long bad = 0;
    std::vector<bool> stored(NCTX, false);
    for (int t = 0; t < R; t++) {
        stored[(size_t)pos[t]] = true;
        for (int64_t j = 0; j < D; j++) {
            const size_t at = (size_t)pos[t] * D + (size_t)j;
            const float s = src[(size_t)(t * D + j)];
            bool ok;
            if (f16) {
                uint16_t h;
                memcpy(&h, cache.data() + 2 * at, 2);
                ok = h == sl_quant_fp32_to_fp16(s);
            } else {
                float v;
                memcpy(&v, cache.data() + 4 * at, 4);
                ok = v == s;
            }
            if (!ok && bad++ < 5)
                fprintf(stderr, "kv_store f16 %d: token %d (pos %d) [%lld] wrong\n", (int)f16, t,
                        pos[t], (long long)j);
        }
    }
    CHECK_MSG(bad == 0, "kv_store f16 %d: %ld values wrong", (int)f16, bad);
    for (int p = 0; p < NCTX; p++) {
        const size_t row = (size_t)D * elt;
        if (!stored[(size_t)p])
            CHECK_MSG(!memcmp(cache.data() + p * row, before.data() + p * row, row),
                      "kv_store f16 %d: cache row %d written", (int)f16, p);
    }
}

static void add_rows()
{
    std::vector<float> y = rand_rows((size_t)(R * D)), b = rand_rows(D), y0(y);
    CHECK(sl_shim_launch(sl_shim_dim3{fwd_grid_x(D), R, 1}, FWD_THREADS,
                         [&] { fw_add_rows(y.data(), b.data(), D); }));
    long bad = 0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < D; j++) bad += y[(size_t)(r * D + j)] != y0[(size_t)(r * D + j)] + b[j];
    CHECK_MSG(bad == 0, "add_rows: %ld values wrong", bad);
}

static void expert_bias(bool parts)
{
    enum { NE = 4 };
    /* per-expert widths 300, 0, D + 50 (clamped to the stride D), 129 */
    const int64_t ff_at[NE + 1] = {0, 300, 300, 300 + D + 50, 300 + D + 50 + 129};
    const int32_t ids[R] = {2, 0, 3, NE, 1}; /* NE: out of range, the row untouched */
    const std::vector<float> b = rand_rows((size_t)(parts ? ff_at[NE] : NE * D));
    std::vector<float> y = rand_rows((size_t)(R * D)), y0(y);
    CHECK(sl_shim_launch(sl_shim_dim3{fwd_grid_x(D), R, 1}, FWD_THREADS, [&] {
        fw_expert_bias(y.data(), b.data(), parts ? ff_at : nullptr, ids, NE, D);
    }));
    long bad = 0;
    for (int r = 0; r < R; r++) {
        const int32_t e = ids[r];
        const bool ok = e >= 0 && e < NE;
        const int64_t at = !ok ? 0 : parts ? ff_at[e] : (int64_t)e * D;
        int64_t w = !ok ? 0 : parts ? ff_at[e + 1] - at : D;
        w = w > D ? D : w;
        for (int64_t j = 0; j < D; j++) {
            const size_t i = (size_t)(r * D + j);
            bad += y[i] != (j < w ? y0[i] + b[(size_t)(at + j)] : y0[i]);
        }
    }
    CHECK_MSG(bad == 0, "expert_bias (parts %d): %ld values wrong", (int)parts, bad);
}

static void gated_add()
{
    const std::vector<float> y = rand_rows((size_t)(R * D)), logit = rand_rows(R);
    std::vector<float> out = rand_rows((size_t)(R * D)), out0(out);
    CHECK(sl_shim_launch(sl_shim_dim3{fwd_grid_x(D), R, 1}, FWD_THREADS,
                         [&] { fw_gated_add(out.data(), y.data(), logit.data(), D); }));
    long bad = 0;
    for (int t = 0; t < R; t++) {
        const double g = 1.0 / (1.0 + exp(-(double)logit[(size_t)t]));
        for (int64_t j = 0; j < D; j++) {
            const size_t i = (size_t)(t * D + j);
            const double gy = g * y[i];
            bad += !gated_add_close(out[i], out0[i] + gy, out0[i], gy);
        }
    }
    CHECK_MSG(bad == 0, "gated_add: %ld values past the bound", bad);
}

static void copy2d()
{
    enum { W = 301, SS = 305, DS = 310 }; /* width, source and destination strides */
    const std::vector<float> src = rand_rows((size_t)((R - 1) * SS + W));
    const float SENT = -12345.0f;
    std::vector<float> dst((size_t)((R - 1) * DS + W), SENT);
    const int64_t total = (int64_t)R * W;
    CHECK(sl_shim_launch(sl_shim_dim3{fwd_copy2d_blocks(total), 1, 1}, FWD_THREADS,
                         [&] { fw_copy2d(dst.data(), DS, src.data(), SS, W, total); }));
    long bad = 0;
    for (size_t i = 0; i < dst.size(); i++) {
        const size_t r = i / DS, j = i % DS;
        bad += dst[i] != (j < W ? src[r * SS + j] : SENT);
    }
    CHECK_MSG(bad == 0, "copy2d: %ld floats wrong (gaps: the sentinel)", bad);
}

int main(void)
{
    kv_store(false);
    kv_store(true);
    add_rows();
    expert_bias(false);
    expert_bias(true);
    gated_add();
    copy2d();
    return sl_test_finish("fwd_host_test");
}
