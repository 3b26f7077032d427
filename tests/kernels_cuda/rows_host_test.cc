/* tests/kernels_cuda/rows_host_test: the row and element kernels' bodies (kernels/cuda/rows.cuh:
 * rms_norm_body, add_rms_norm_body, softmax_body, ew_body, what ops.cu's k_rms_norm,
 * k_add_rms_norm, k_softmax and k_ew run) on the CPU, each thread of a block a host thread
 * (block sums through barriers and shuffles: host_shim/launch.h), launched as ops.cu launches
 * them (a block of ROW_THREADS a row; ew_grid blocks of EW_THREADS), their shared memory
 * poisoned before each block, against kernels/ref within ops_tol.h's rules (the GPU test's).
 * Why: CI has no GPU, and every layer runs these. Rows of widths not multiples of the block
 * (1, 37, 300, 1029), rms_norm without weight, with it and with 1 + w, the add variant's x
 * bit-exact as the element-wise add, softmax with a scale, a mask of its own stride with -inf
 * entries and a fully masked row (zeros); the seven element-wise ops, add / mul / scale
 * bit-exact, also on a grid smaller than the items (the stride loop). Nothing past the rows or
 * items launched is written. No faulting access: (these bodies make no __ldg / cp.async the shim counts; the UBSan build checks their plain
 * accesses' alignment) */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "launch.h"                      /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/ops_tol.h"
#include "tests/kernels_cuda/rng.h"
#include "tests/kernels_cuda/rows_cuh.h" /* kernels/cuda/rows.cuh (BUILD) */

extern "C" {
#include "kernels/ref/ops.h"
#include "tests/testing.h"
}

static const float SENTINEL = -12345.0f; /* an output a launch must not write */

/* a grid of rows of ROW_THREADS with red (32 floats) poisoned before each block */
template <typename F> static bool launch_rows(int64_t R, float *red, F body)
{
    return sl_shim_launch(sl_shim_dim3{(unsigned)R, 1, 1}, ROW_THREADS, body, [red] {
        for (int i = 0; i < 32; i++) red[i] = NAN;
    });
}

/* elements [from, size) of v still SENTINEL */
static int written_past(const std::vector<float> &v, size_t from)
{
    int n = 0;
    for (size_t i = from; i < v.size(); i++) n += v[i] != SENTINEL;
    return n;
}

/* variant: 0 no weight, 1 weight, 2 1 + weight; values in [-amp, amp] (small: eps matters) */
static void run_rms_norm(int64_t n, int variant, float amp = 3.0f)
{
    const int64_t R = 2;
    std::vector<float> x((size_t)(R * n)), w((size_t)n), y((size_t)((R + 1) * n), SENTINEL);
    std::vector<float> ref((size_t)n);
    for (float &v : x) v = rnd_f(-amp, amp);
    for (float &v : w) v = rnd_f(-1.0f, 1.0f);
    const float *wp = variant ? w.data() : nullptr;
    float red[32];
    const long faults0 = sl_shim_align_faults.load();
    CHECK(launch_rows(R, red, [&] {
        rms_norm_body(x.data(), wp, y.data(), n, 1e-6f, variant == 2, red);
    }));
    CHECK(sl_shim_align_faults.load() == faults0);
    int bad = 0;
    for (int64_t r = 0; r < R; r++) {
        sl_error e;
        CHECK(sl_ref_rms_norm(&x[(size_t)(r * n)], wp, ref.data(), n, 1e-6f, variant == 2, &e) ==
              SL_OK);
        double mx = 0;
        for (float v : ref) mx = fmax(mx, fabs(v));
        for (int64_t i = 0; i < n; i++)
            bad += !rms_norm_close(y[(size_t)(r * n + i)], ref[(size_t)i], mx);
    }
    CHECK_MSG(bad == 0, "rms_norm n %lld variant %d: %d values off", (long long)n, variant, bad);
    CHECK_MSG(written_past(y, (size_t)(R * n)) == 0, "rms_norm n %lld: a row past R written",
              (long long)n);
}

static void run_add_rms_norm(int64_t n, bool has_w)
{
    const int64_t R = 2;
    std::vector<float> x((size_t)((R + 1) * n), SENTINEL), t((size_t)(R * n)), w((size_t)n);
    std::vector<float> y((size_t)((R + 1) * n), SENTINEL), sum((size_t)(R * n)), ref((size_t)n);
    for (int64_t i = 0; i < R * n; i++)
        x[(size_t)i] = rnd_f(-3.0f, 3.0f), t[(size_t)i] = rnd_f(-3.0f, 3.0f);
    for (float &v : w) v = rnd_f(0.5f, 1.5f);
    for (int64_t i = 0; i < R * n; i++) sum[(size_t)i] = x[(size_t)i] + t[(size_t)i];
    const float *wp = has_w ? w.data() : nullptr;
    float red[32];
    CHECK(launch_rows(R, red, [&] {
        add_rms_norm_body(x.data(), t.data(), wp, y.data(), n, 1e-5f, red);
    }));
    int bad_x = 0, bad_y = 0;
    for (int64_t r = 0; r < R; r++) {
        sl_error e;
        CHECK(sl_ref_rms_norm(&sum[(size_t)(r * n)], wp, ref.data(), n, 1e-5f, false, &e) == SL_OK);
        double mx = 0;
        for (float v : ref) mx = fmax(mx, fabs(v));
        for (int64_t i = 0; i < n; i++) {
            const size_t o = (size_t)(r * n + i);
            bad_x += x[o] != sum[o];
            bad_y += !rms_norm_close(y[o], ref[(size_t)i], mx);
        }
    }
    CHECK_MSG(bad_x == 0 && bad_y == 0, "add_rms_norm n %lld w %d: %d x, %d y off", (long long)n,
              has_w, bad_x, bad_y);
    CHECK_MSG(written_past(x, (size_t)(R * n)) == 0 && written_past(y, (size_t)(R * n)) == 0,
              "add_rms_norm n %lld: a row past R written", (long long)n);
}

/* rows of n, the mask's rows ms apart (ms >= n); row 2 fully masked; mask: every 5th -inf */
static void run_softmax(int64_t n, int64_t ms, bool masked)
{
    const int64_t R = 4;
    std::vector<float> x((size_t)((R + 1) * n), SENTINEL), m((size_t)(R * ms));
    for (int64_t i = 0; i < R * n; i++) x[(size_t)i] = rnd_f(-10.0f, 10.0f);
    for (int64_t i = 0; i < R * ms; i++) m[(size_t)i] = i % 5 == 0 ? -INFINITY : rnd_f(-1.0f, 0.0f);
    for (int64_t i = 2 * ms; i < 3 * ms; i++) m[(size_t)i] = -INFINITY;
    std::vector<float> ref(x);
    float red[32];
    CHECK(launch_rows(R, red, [&] {
        softmax_body(x.data(), n, 0.7f, masked ? m.data() : nullptr, ms, red);
    }));
    int bad = 0;
    for (int64_t r = 0; r < R; r++) {
        sl_error e;
        const float *mr = masked ? &m[(size_t)(r * ms)] : nullptr;
        CHECK(sl_ref_softmax(&ref[(size_t)(r * n)], n, 0.7f, mr, &e) == SL_OK);
        for (int64_t i = 0; i < n; i++)
            bad += !softmax_close(x[(size_t)(r * n + i)], ref[(size_t)(r * n + i)]);
    }
    CHECK_MSG(bad == 0, "softmax n %lld mask %d: %d values off", (long long)n, masked, bad);
    CHECK_MSG(written_past(x, (size_t)(R * n)) == 0, "softmax n %lld: a row past R written",
              (long long)n);
}

template <int OP> static void ew_launch(const float *a, const float *b, float *y, int64_t n,
                                        float s, float s2, unsigned grid)
{
    CHECK(sl_shim_launch(sl_shim_dim3{grid, 1, 1}, EW_THREADS,
                         [&] { ew_body<OP>(a, b, y, n, s, s2); }));
}

/* the seven ops over n items on grid blocks (ew_grid(n) as ops.cu, or fewer: the stride) */
static void run_ew(int64_t n, unsigned grid)
{
    std::vector<float> g((size_t)n), u((size_t)n), ref((size_t)n);
    for (int64_t i = 0; i < n; i++)
        g[(size_t)i] = rnd_f(-12.0f, 12.0f), u[(size_t)i] = rnd_f(-2.0f, 2.0f);
    for (int op = EW_SWIGLU; op <= EW_SCALE; op++) {
        std::vector<float> y((size_t)n + 37, SENTINEL);
        sl_error e;
        const float *a = g.data(), *b = u.data();
        float *yp = y.data();
        switch (op) {
        case EW_SWIGLU:
            ew_launch<EW_SWIGLU>(a, b, yp, n, 0.0f, 0.0f, grid);
            sl_ref_swiglu(a, b, ref.data(), n, &e);
            break;
        case EW_GEGLU_TANH:
            ew_launch<EW_GEGLU_TANH>(a, b, yp, n, 0.0f, 0.0f, grid);
            sl_ref_geglu(a, b, ref.data(), n, SL_GELU_TANH, &e);
            break;
        case EW_GEGLU_ERF:
            ew_launch<EW_GEGLU_ERF>(a, b, yp, n, 0.0f, 0.0f, grid);
            sl_ref_geglu(a, b, ref.data(), n, SL_GELU_ERF, &e);
            break;
        case EW_SWIGLU_OAI: /* limit 1.5: both clamps bite */
            ew_launch<EW_SWIGLU_OAI>(a, b, yp, n, SL_OAI_ALPHA, 1.5f, grid);
            sl_ref_swiglu_oai(a, b, ref.data(), n, SL_OAI_ALPHA, 1.5f, &e);
            break;
        case EW_ADD:
            ew_launch<EW_ADD>(a, b, yp, n, 0.0f, 0.0f, grid);
            sl_ref_add(a, b, ref.data(), n, &e);
            break;
        case EW_MUL:
            ew_launch<EW_MUL>(a, b, yp, n, 0.0f, 0.0f, grid);
            sl_ref_mul(a, b, ref.data(), n, &e);
            break;
        default: /* sl_cuda_scale passes b NULL */
            ew_launch<EW_SCALE>(a, nullptr, yp, n, 0.37f, 0.0f, grid);
            ref = g;
            sl_ref_scale(ref.data(), n, 0.37f, &e);
        }
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const size_t o = (size_t)i;
            bad += op >= EW_ADD ? y[o] != ref[o] : !glu_close(y[o], ref[o], g[o], u[o]);
        }
        CHECK_MSG(bad == 0, "ew op %d n %lld grid %u: %d values off", op, (long long)n, grid, bad);
        CHECK_MSG(written_past(y, (size_t)n) == 0, "ew op %d: past n written", op);
    }
}

int main(void)
{
    const int64_t widths[] = {1, 37, 300, 1029};
    for (int64_t n : widths)
        for (int variant = 0; variant < 3; variant++) run_rms_norm(n, variant);
    run_rms_norm(300, 1, 1e-3f); /* mean square ~ eps */
    run_add_rms_norm(1029, true);
    run_add_rms_norm(300, false);
    run_softmax(1000, 1000, true);
    run_softmax(300, 317, true);
    run_softmax(37, 37, false);
    run_ew(1500, ew_grid(1500));
    run_ew(1500, 2); /* as ew_grid's cap does past 65535 * 8 blocks: each thread strides */
    return sl_test_finish("rows_host_test");
}
