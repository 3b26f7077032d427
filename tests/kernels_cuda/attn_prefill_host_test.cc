/* tests/kernels_cuda/attn_prefill_host_test: the tiled prefill attention on the tensor cores
 * (kernels/cuda/attn_prefill.cuh ap_body, what k_attn_prefill runs) on the CPU, each thread of a
 * block a host thread (barriers, xor shuffles: host_shim/launch.h; WMMA with its alignment
 * rules checked: mma.h), against kernels/ref's one-token attention (sl_ref_attn_decode) for
 * every token at its own position. Variants: MHA and GQA groups of 4 and 3 (rows of one token
 * split across tiles), head dims 64, 128, 80 (padded to 96) and 256, MLA's 576 with V the K
 * rows, F32 and F16 caches, a window, softcap, sinks, tokens in reverse order, and a batch whose
 * positions restart at 0
 * (a fresh prompt beside a continued one: each row's own range). Tolerance: F16 operands
 * (scaled q, K, P, V) with F32 sums: 1.5e-3 of max |v| (an indexing or masking error is O(1)). */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launch.h"                               /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/attn_prefill_cuh.h" /* kernels/cuda/attn_prefill.cuh (BUILD) */
#include "tests/kernels_cuda/rand_weights.h"

extern "C" {
#include "kernels/ref/ops.h"
#include "tests/testing.h"
}

struct variant {
    int n_head, n_kv, D, n_tok, first_pos;
    bool f16, reverse, restart;
    int window;
    float softcap;
    bool sinks;
    bool kv_same; /* V is K's rows (MLA's latent cache) */
    float temp;   /* temp_scale over temp_len 8 (0: none) */
};

static void run(int vi, const variant &V)
{
    const int npos = V.first_pos + V.n_tok; /* cache rows */
    const int64_t qd = (int64_t)V.n_head * V.D, kvd = (int64_t)V.n_kv * V.D;
    const size_t es = V.f16 ? 2 : 4;
    float *q = (float *)malloc((size_t)(V.n_tok * qd) * 4);
    float *out = (float *)malloc((size_t)(V.n_tok * qd) * 4);
    float *ref = (float *)malloc((size_t)qd * 4);
    uint8_t *k = (uint8_t *)malloc((size_t)npos * kvd * es);
    uint8_t *v = (uint8_t *)malloc((size_t)npos * kvd * es);
    float sinks[16];
    int32_t *pos = (int32_t *)malloc((size_t)V.n_tok * 4);
    if (!q || !out || !ref || !k || !v || !pos) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    for (int64_t i = 0; i < V.n_tok * qd; i++) q[i] = rnd_f(-1.0f, 1.0f) * 2.0f;
    float vmax = 0.0f;
    for (int64_t i = 0; i < (int64_t)npos * kvd; i++) {
        const float kx = rnd_f(-1.0f, 1.0f), vx = rnd_f(-1.0f, 1.0f) * 3.0f;
        vmax = fmaxf(vmax, fabsf(vx));
        if (V.f16) {
            const uint16_t kh = __float2half_rn(kx).x, vh = __float2half_rn(vx).x;
            memcpy(k + i * 2, &kh, 2), memcpy(v + i * 2, &vh, 2);
        } else {
            memcpy(k + i * 4, &kx, 4), memcpy(v + i * 4, &vx, 4);
        }
    }
    for (int h = 0; h < 16; h++) sinks[h] = rnd_f(-2.0f, 2.0f);
    if (V.kv_same) vmax = 1.0f; /* V is K: values in [-1, 1] */
    for (int t = 0; t < V.n_tok; t++) {
        const int s = V.reverse ? V.n_tok - 1 - t : t;
        /* restart: the first 10 tokens a fresh prompt at 0.., the rest continue first_pos.. */
        pos[t] = V.restart && s < 10 ? s : V.first_pos + s;
    }
    const int Dp = ap_dp(V.D);
    ap_args a;
    a.q = q;
    a.k = k;
    a.v = V.kv_same ? k : v;
    a.kv_same = V.kv_same;
    a.pos = pos;
    a.out = out;
    a.n_tok = V.n_tok;
    a.D = V.D;
    a.Dp = Dp;
    a.group = V.n_head / V.n_kv;
    a.n_kv_head = V.n_kv;
    a.window = V.window;
    a.q_ts = qd;
    a.scale = (float)(1.0 / sqrt((double)V.D));
    a.softcap = V.softcap;
    a.temp_scale = V.temp;
    a.temp_len = 8;
    a.sinks = V.sinks ? sinks : nullptr;
    for (int64_t i = 0; i < V.n_tok * qd; i++) out[i] = 12345.0f;
    const ap_smem L = ap_layout(Dp, V.kv_same);
    uint8_t *sm = (uint8_t *)aligned_alloc(128, (L.total + 127) / 128 * 128);
    const long faults0 = sl_shim_wmma_faults.load();
    const unsigned tiles = (unsigned)((V.n_tok * a.group + AP_BM - 1) / AP_BM);
    /* shared memory poisoned (NaN bits) before each block: a read of what the block did not
     * write shows */
    CHECK(sm && sl_shim_launch(
                    sl_shim_dim3{(unsigned)V.n_kv, tiles, 1}, AP_THREADS,
                    [&] { V.f16 ? ap_body<uint16_t>(a, sm) : ap_body<float>(a, sm); },
                    [&] { memset(sm, 0xFF, L.total); }));
    CHECK_MSG(sl_shim_wmma_faults.load() == faults0, "variant %d: %ld WMMA calls broke an "
              "alignment rule", vi, sl_shim_wmma_faults.load() - faults0);
    sl_attn_params p = {.n_head = V.n_head, .n_kv_head = V.n_kv, .head_dim = V.D, .n_pos = 1,
                        .scale = 0.0f, .window = V.window, .softcap = V.softcap,
                        .sinks = V.sinks ? sinks : nullptr,
                        .kv_type = V.f16 ? SL_KV_F16 : SL_KV_F32, .temp_scale = V.temp,
                        .temp_len = 8};
    int bad = 0;
    double worst = 0.0;
    for (int t = 0; t < V.n_tok; t++) {
        p.n_pos = pos[t] + 1;
        sl_error e;
        CHECK_MSG(sl_ref_attn_decode(q + t * qd, k, V.kv_same ? k : v, &p, ref, &e) == SL_OK,
                  "%s", e.msg);
        for (int64_t i = 0; i < qd; i++) {
            const double d = fabs((double)out[t * qd + i] - ref[i]);
            worst = d > worst ? d : worst;
            if (!(d <= 1.5e-3 * vmax)) {
                if (!bad)
                    fprintf(stderr, "variant %d token %d (pos %d) [%lld]: %.7g vs %.7g\n", vi,
                            t, pos[t], (long long)i, out[t * qd + i], ref[i]);
                bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "variant %d: %d of %lld outputs off", vi, bad, (long long)(V.n_tok * qd));
    printf("attn_prefill_host_test: variant %d (heads %d/%d, D %d, %d tokens, %s) max |err| "
           "%.3g of max |v| %.3g\n", vi, V.n_head, V.n_kv, V.D, V.n_tok, V.f16 ? "F16" : "F32",
           worst, vmax);
    free(q), free(out), free(ref), free(k), free(v), free(pos), free(sm);
}

int main(void)
{
    const variant vs[] = {
        {4, 4, 64, 37, 263, false, false, false, 0, 0.0f, false, false, 0.0f},
        {8, 2, 128, 21, 70, true, false, false, 50, 0.0f, false, false, 0.0f},
        {4, 2, 80, 19, 40, false, true, false, 0, 1.0f, true, false, 0.0f},
        {6, 2, 256, 23, 90, true, false, true, 0, 0.0f, false, false, 0.0f},
        /* MLA: 16 heads over one latent row of 576 (K and V the same rows) */
        {16, 1, 576, 9, 80, true, false, false, 0, 0.0f, false, true, 0.0f},
        /* Mistral Large 3's temperature on the MLA rows, tokens restarting at 0 */
        {16, 1, 576, 21, 30, false, false, true, 0, 0.0f, false, true, 0.5f},
    };
    for (int i = 0; i < (int)(sizeof vs / sizeof vs[0]); i++) run(i, vs[i]);
    return sl_test_finish("attn_prefill_host_test");
}
