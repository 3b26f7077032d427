/* tests/kernels_cuda/rope_host_test: the rotary kernels' bodies (kernels/cuda/rope.cuh:
 * rope_body, what ops.cu's k_rope runs for sl_cuda_rope; qk_rope_store_body, k_qk_rope_store's
 * for sl_cuda_qk_rope_store) on the CPU, each thread of a block a host thread (the fused
 * kernel's block sum and phase barriers: host_shim/launch.h), launched as ops.cu launches them
 * (ew_blocks of EW_THREADS, one thread a pair; qk_rope_store_slots x tokens blocks of
 * ROW_THREADS) with rope_k_make's arguments, against kernels/ref (sl_ref_rope, sl_ref_rms_norm,
 * sl_quant_fp32_to_fp16 for F16 caches) within ops_tol.h's rules (the GPU test's). Why: CI
 * has no GPU, and a wrong pair or angle is a model that still runs but says nonsense.
 * Variants: normal and neox pairs, partial rotation (n_rot < head_dim: the rest passes
 * through), positions read from an array (0, out of order, 100000, negative), YaRN's
 * ext_factor on and off, freq_factors; the fused kernel with and without q/k norm weights, F32
 * and F16 caches. Nothing past the tokens launched is written, cache rows at no token's
 * position stay as they were. No faulting access: (these bodies make no __ldg / cp.async the shim counts; the UBSan build checks their plain
 * accesses' alignment) */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "launch.h"                      /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/ops_tol.h"
#include "tests/kernels_cuda/rng.h"
#include "tests/kernels_cuda/rope_cuh.h" /* kernels/cuda/rope.cuh (BUILD) */

extern "C" {
#include "kernels/ref/ops.h"
#include "kernels/ref/quant.h"
#include "tests/testing.h"
}

static const float SENTINEL = -12345.0f; /* an output a launch must not write */

struct rvariant {
    const char *what;
    sl_rope_mode mode;
    int32_t n_rot, D;
    float freq_base;
    bool yarn, ff;
};

static sl_rope_params params(const rvariant &V, const float *ff)
{
    sl_rope_params p = sl_rope_params_make(V.mode, V.n_rot, V.freq_base);
    if (V.yarn) p.freq_scale = 0.25f, p.ext_factor = 1.0f, p.n_ctx_orig = 4096;
    p.freq_factors = V.ff ? ff : nullptr;
    return p;
}

static void run_rope(int vi, const rvariant &V)
{
    const int32_t T = 4, H = 3, D = V.D;
    const int32_t pos[T] = {0, 17, 100000 + vi, -5};
    const int64_t n = (int64_t)T * H * D;
    std::vector<float> x((size_t)(n + H * D), SENTINEL), ff((size_t)V.n_rot / 2);
    for (int64_t i = 0; i < n; i++) x[(size_t)i] = rnd_f(-1.0f, 1.0f);
    for (size_t i = 0; i < ff.size(); i++) ff[i] = 1.0f + 0.1f * (float)i;
    std::vector<float> ref(x);
    const sl_rope_params p = params(V, ff.data());
    sl_error e;
    CHECK_MSG(sl_ref_rope_validate(&p, D, &e) == SL_OK, "%s", e.msg);
    const rope_k k = rope_k_make(&p, D, H); /* as sl_cuda_rope */
    const int64_t n_pairs = (int64_t)T * H * (V.n_rot / 2);
    const long faults0 = sl_shim_align_faults.load();
    CHECK(sl_shim_launch(sl_shim_dim3{(unsigned)ew_blocks(n_pairs), 1, 1}, EW_THREADS,
                         [&] { rope_body(x.data(), n_pairs, pos, k); }));
    CHECK(sl_shim_align_faults.load() == faults0);
    CHECK_MSG(sl_ref_rope(ref.data(), T, H, D, pos, &p, &e) == SL_OK, "%s", e.msg);
    int bad = 0, past = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!rope_close(x[(size_t)i], ref[(size_t)i]) && !bad++)
            fprintf(stderr, "rope variant %d [%lld]: %.8g vs %.8g\n", vi, (long long)i,
                    (double)x[(size_t)i], (double)ref[(size_t)i]);
    }
    for (size_t i = (size_t)n; i < x.size(); i++) past += x[i] != SENTINEL;
    CHECK_MSG(bad == 0, "rope variant %d (%s): %d values off", vi, V.what, bad);
    CHECK_MSG(past == 0, "rope variant %d (%s): %d values past the tokens written", vi, V.what,
              past);
}

/* the fused q/k norm + rope + KV store; norm: q/k weights given, f16: F16 caches */
static void run_fused(int vi, const rvariant &V, bool norm, bool f16)
{
    const int32_t T = 3, H = 4, Hk = 2, D = V.D, NCTX = 8;
    const int32_t pos[T] = {5, 0, 7};
    const int64_t nq = (int64_t)T * H * D, nk = (int64_t)T * Hk * D, row = (int64_t)Hk * D;
    std::vector<float> q((size_t)nq), k((size_t)nk), v((size_t)nk), qw((size_t)D), kw((size_t)D);
    std::vector<float> ff((size_t)V.n_rot / 2);
    for (float &x : q) x = rnd_f(-2.0f, 2.0f);
    for (float &x : k) x = rnd_f(-2.0f, 2.0f);
    for (float &x : v) x = rnd_f(-2.0f, 2.0f);
    for (float &x : qw) x = rnd_f(0.5f, 1.5f);
    for (float &x : kw) x = rnd_f(0.5f, 1.5f);
    for (size_t i = 0; i < ff.size(); i++) ff[i] = 1.0f + 0.1f * (float)i;
    std::vector<float> rq(q), rk(k);
    const size_t es = f16 ? 2 : 4, cb = (size_t)(NCTX * row) * es;
    std::vector<uint8_t> kc(cb, 0xA5), vc(cb, 0xA5);
    const sl_rope_params p = params(V, ff.data());
    const rope_k rk_ = rope_k_make(&p, D, H); /* as sl_cuda_qk_rope_store */
    float red[32];
    const long faults0 = sl_shim_align_faults.load();
    CHECK(sl_shim_launch(
        sl_shim_dim3{(unsigned)qk_rope_store_slots(H, Hk), (unsigned)T, 1}, ROW_THREADS,
        [&] {
            qk_rope_store_body(q.data(), k.data(), v.data(), norm ? qw.data() : nullptr,
                               norm ? kw.data() : nullptr, 1e-6f, pos, rk_, H, Hk, f16,
                               kc.data(), vc.data(), red);
        },
        [&] {
            for (float &x : red) x = NAN;
        }));
    CHECK(sl_shim_align_faults.load() == faults0);
    sl_error e;
    if (norm) {
        for (int64_t h = 0; h < T * H; h++)
            sl_ref_rms_norm(&rq[(size_t)(h * D)], qw.data(), &rq[(size_t)(h * D)], D, 1e-6f,
                            false, &e);
        for (int64_t h = 0; h < T * Hk; h++)
            sl_ref_rms_norm(&rk[(size_t)(h * D)], kw.data(), &rk[(size_t)(h * D)], D, 1e-6f,
                            false, &e);
    }
    CHECK(sl_ref_rope(rq.data(), T, H, D, pos, &p, &e) == SL_OK);
    CHECK(sl_ref_rope(rk.data(), T, Hk, D, pos, &p, &e) == SL_OK);
    double qmax = 0;
    for (float x : rq) qmax = fmax(qmax, fabs(x));
    int bad_q = 0, bad_k = 0, bad_v = 0, stale = 0;
    for (int64_t i = 0; i < nq; i++) bad_q += !qk_rope_close(q[(size_t)i], rq[(size_t)i], qmax, 0);
    for (int64_t i = 0; i < nk; i++) bad_k += !qk_rope_close(k[(size_t)i], rk[(size_t)i], qmax, 0);
    std::vector<bool> used((size_t)NCTX, false);
    for (int32_t t = 0; t < T; t++) {
        used[(size_t)pos[t]] = true;
        for (int64_t j = 0; j < row; j++) {
            const size_t at = (size_t)(pos[t] * row + j), src = (size_t)(t * row + j);
            uint16_t hk, hv;
            float ck, cv;
            memcpy(&hk, &kc[at * es], 2), memcpy(&hv, &vc[at * es], 2);
            memcpy(&ck, &kc[at * es], 4 - 2 * f16), memcpy(&cv, &vc[at * es], 4 - 2 * f16);
            if (f16) ck = sl_quant_fp16_to_fp32(hk);
            bad_k += !qk_rope_close(ck, rk[src], qmax, f16 ? fabs(rk[src]) / 1024 : 0);
            bad_v += f16 ? hv != sl_quant_fp32_to_fp16(v[src]) : cv != v[src];
        }
    }
    for (int32_t r = 0; r < NCTX; r++)
        for (size_t b = 0; !used[(size_t)r] && b < (size_t)row * es; b++)
            stale += (kc[(size_t)r * row * es + b] != 0xA5) +
                     (vc[(size_t)r * row * es + b] != 0xA5);
    CHECK_MSG(bad_q == 0 && bad_k == 0 && bad_v == 0,
              "qk_rope_store %d (%s, norm %d, f16 %d): q %d, k %d, v cache %d off", vi, V.what,
              norm, f16, bad_q, bad_k, bad_v);
    CHECK_MSG(stale == 0, "qk_rope_store %d: %d cache bytes at no token's position written", vi,
              stale);
}

int main(void)
{
    const rvariant rv[] = {
        {"normal, D 80", SL_ROPE_NORMAL, 80, 80, 10000.0f, false, false},
        {"neox, D 80, base 1e6", SL_ROPE_NEOX, 80, 80, 1e6f, false, false},
        {"normal, YaRN", SL_ROPE_NORMAL, 80, 80, 1e6f, true, false},
        {"neox, n_rot 64 of 80, YaRN, freq_factors", SL_ROPE_NEOX, 64, 80, 1e6f, true, true},
        {"normal, n_rot 32 of 128, freq_factors", SL_ROPE_NORMAL, 32, 128, 10000.0f, false,
         true},
    };
    for (int i = 0; i < (int)(sizeof rv / sizeof rv[0]); i++) run_rope(i, rv[i]);
    const rvariant fv[] = {
        {"neox, n_rot 32 of 64", SL_ROPE_NEOX, 32, 64, 1e6f, false, false},
        {"normal, n_rot 32 of 64", SL_ROPE_NORMAL, 32, 64, 1e6f, false, false},
        {"neox, D 80, YaRN", SL_ROPE_NEOX, 80, 80, 1e6f, true, false},
    };
    run_fused(0, fv[0], true, false);
    run_fused(1, fv[0], false, true);
    run_fused(2, fv[1], true, true);
    run_fused(3, fv[1], false, false);
    run_fused(4, fv[2], true, true);
    return sl_test_finish("rope_host_test");
}
