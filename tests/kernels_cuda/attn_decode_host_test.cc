/* tests/kernels_cuda/attn_decode_host_test: the per-token attention (kernels/cuda/
 * attn_decode.cuh ad_body, what k_attn_decode runs for sl_cuda_attn_decode and sl_cuda_attn_at)
 * on the CPU, each thread of a block a host thread (barriers, xor shuffles: host_shim/
 * launch.h), its shared memory poisoned before each block, against kernels/ref's attention
 * (sl_ref_attn_decode) for every token. Why: CI has no GPU, and this is the decode path of
 * every layer. Variants: both instantiations (head dims 64, 80, 96, 128, 256; MLA's 576 with V
 * the K rows), F32 and F16 caches, MHA and GQA (groups 2, 3, 4), a window shorter than the
 * context, softcap, sinks, a scale of its own; one token at n_pos (pos NULL) and tokens at
 * positions read from pos (out of order, position 0, contexts shorter than ATTN_WARPS so some
 * warps see no position, a stale n_pos), tokens q_ts apart with a gap (left untouched).
 * Tolerance: attn_tol.h (cuda_kernels_ops_test's rule). */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"                             /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/attn_decode_cuh.h" /* kernels/cuda/attn_decode.cuh (BUILD) */
#include "tests/kernels_cuda/attn_tol.h"
#include "tests/kernels_cuda/rng.h"

extern "C" {
#include "kernels/ref/ops.h"
#include "tests/testing.h"
}

static const float SENTINEL = -12345.0f; /* an output a launch must not write */

enum { MAX_TOK = 8 };

struct variant {
    const char *what;
    int n_head, n_kv, D;
    bool f16, kv_same; /* kv_same: V is K's rows (MLA's latent cache) */
    int window;
    float softcap, scale; /* scale 0: 1 / sqrt(D), as attn_launch */
    bool sinks;
    int n_pos;            /* one token at n_pos (pos NULL) when n_tok is 0 */
    int n_tok;            /* else n_tok tokens at positions pos (n_pos stale) */
    int32_t pos[MAX_TOK];
    int gap;              /* floats between tokens past n_head * D (q_ts) */
    float temp;           /* temp_scale over temp_len 8 (0: none) */
};

/* The grid over the instantiation attn_launch takes for a.D (attn_dpl_small), with wm, wsum
 * and wacc in buffers of their own, set to NaN before each block. */
template <typename KV, int DPL>
static bool launch(const float *q, const void *k, const void *v, const attn_k &a, float *out,
                   unsigned n_head, unsigned n_tok)
{
    float wm[ATTN_WARPS], wsum[ATTN_WARPS];
    std::vector<float> wacc((size_t)ATTN_WARPS * 32 * DPL);
    float(*wa)[32 * DPL] = (float(*)[32 * DPL])wacc.data();
    return sl_shim_launch(
        sl_shim_dim3{n_head, n_tok, 1}, 32 * ATTN_WARPS,
        [&] { ad_body<KV, DPL>(q, (const KV *)k, (const KV *)v, a, out, wm, wsum, wa); },
        [&] {
            for (float &x : wm) x = NAN;
            for (float &x : wsum) x = NAN;
            for (float &x : wacc) x = NAN;
        });
}

static void run(int vi, const variant &V)
{
    const bool at = V.n_tok > 0;
    const int n_tok = at ? V.n_tok : 1;
    int npos = V.n_pos; /* cache rows */
    for (int t = 0; at && t < n_tok; t++) npos = V.pos[t] + 1 > npos ? V.pos[t] + 1 : npos;
    const int64_t qd = (int64_t)V.n_head * V.D, q_ts = qd + V.gap;
    const int64_t kvd = (int64_t)V.n_kv * V.D, n_kv = npos * kvd;
    const size_t es = V.f16 ? 2 : 4;
    std::vector<float> q((size_t)(n_tok * q_ts)), out((size_t)(n_tok * q_ts), SENTINEL);
    std::vector<float> ref((size_t)qd), sinks((size_t)V.n_head);
    /* each cache exactly its size: the ASan build flags a read past the last position */
    std::vector<uint8_t> k((size_t)n_kv * es), vb((size_t)n_kv * es);
    const uint8_t *v = V.kv_same ? k.data() : vb.data();
    for (float &x : q) x = rnd_f(-3.0f, 3.0f); /* logits of a few units: a peaked softmax */
    for (float &x : sinks) x = rnd_f(-2.0f, 2.0f);
    double vmax = 0.0;
    for (int64_t i = 0; i < n_kv; i++) {
        const float kx = rnd_f(-1.0f, 1.0f), vx = rnd_f(-1.0f, 1.0f);
        vmax = fmax(vmax, fabs(V.kv_same ? kx : vx));
        if (V.f16) {
            const uint16_t kh = __float2half_rn(kx).x, vh = __float2half_rn(vx).x;
            memcpy(&k[(size_t)i * 2], &kh, 2), memcpy(&vb[(size_t)i * 2], &vh, 2);
        } else {
            memcpy(&k[(size_t)i * 4], &kx, 4), memcpy(&vb[(size_t)i * 4], &vx, 4);
        }
    }
    attn_k a;
    a.D = V.D;
    a.group = V.n_head / V.n_kv;
    a.n_kv_head = V.n_kv;
    a.n_pos = at ? 1 : V.n_pos; /* at positions: a stale host n_pos, as sl_cuda_attn_at's */
    a.window = V.window;
    a.pos = at ? V.pos : nullptr;
    a.q_ts = q_ts;
    sl_attn_params p = {.n_head = V.n_head, .n_kv_head = V.n_kv, .head_dim = V.D, .n_pos = 1,
                        .scale = V.scale, .window = V.window, .softcap = V.softcap,
                        .sinks = V.sinks ? sinks.data() : nullptr,
                        .kv_type = V.f16 ? SL_KV_F16 : SL_KV_F32, .temp_scale = V.temp,
                        .temp_len = 8};
    a.scale = (float)sl_ref_attn_scale(&p); /* as attn_launch */
    a.softcap = V.softcap;
    a.temp_scale = V.temp;
    a.temp_len = 8;
    a.sinks = V.sinks ? sinks.data() : nullptr;
    const long faults0 = sl_shim_align_faults.load();
    const unsigned nh = (unsigned)V.n_head, nt = (unsigned)n_tok;
    const bool small = attn_dpl_small(V.D);
    bool ok;
    if (V.f16)
        ok = small ? launch<uint16_t, ATTN_DPL_SMALL>(q.data(), k.data(), v, a, out.data(), nh, nt)
                   : launch<uint16_t, ATTN_DPL>(q.data(), k.data(), v, a, out.data(), nh, nt);
    else
        ok = small ? launch<float, ATTN_DPL_SMALL>(q.data(), k.data(), v, a, out.data(), nh, nt)
                   : launch<float, ATTN_DPL>(q.data(), k.data(), v, a, out.data(), nh, nt);
    CHECK(ok);
    CHECK_MSG(sl_shim_align_faults.load() == faults0, "variant %d: %ld misaligned accesses", vi,
              sl_shim_align_faults.load() - faults0);
    int bad = 0, gap_bad = 0;
    double worst = 0.0;
    for (int t = 0; t < n_tok; t++) {
        p.n_pos = at ? V.pos[t] + 1 : V.n_pos;
        sl_error e;
        CHECK_MSG(sl_ref_attn_decode(&q[(size_t)(t * q_ts)], k.data(), v, &p, ref.data(), &e) ==
                      SL_OK, "%s", e.msg);
        const float *o = &out[(size_t)(t * q_ts)];
        for (int64_t i = 0; i < qd; i++) {
            worst = fmax(worst, fabs((double)o[i] - ref[(size_t)i]));
            if (!attn_close(o[i], ref[(size_t)i], vmax)) {
                if (!bad)
                    fprintf(stderr, "variant %d token %d (n_pos %d) [%lld]: %.8g vs %.8g\n", vi,
                            t, p.n_pos, (long long)i, (double)o[i], (double)ref[(size_t)i]);
                bad++;
            }
        }
        for (int64_t i = qd; i < q_ts; i++) gap_bad += o[i] != SENTINEL;
    }
    CHECK_MSG(bad == 0, "variant %d (%s): %d of %lld outputs off", vi, V.what, bad,
              (long long)(n_tok * qd));
    CHECK_MSG(gap_bad == 0, "variant %d (%s): %d floats between tokens written", vi, V.what,
              gap_bad);
    printf("attn_decode_host_test: variant %d (%s) max |err| %.3g of max |v| %.3g\n", vi, V.what,
           worst, vmax);
}

int main(void)
{
    const variant vs[] = {
        {"MHA, D 64, F32", 4, 4, 64, false, false, 0, 0.0f, 0.0f, false, 37, 0, {}, 0, 0.0f},
        {"GQA 8/2, D 128, F16, window 20 of 300, scale 0.1", 8, 2, 128, true, false, 20, 0.0f,
         0.1f, false, 300, 0, {}, 0, 0.0f},
        {"group 2, D 80, F32, 300 positions, softcap", 2, 1, 80, false, false, 0, 1.0f, 0.0f,
         false, 300, 0, {}, 0, 0.0f},
        {"GQA 6/2, D 256, F16, softcap, sinks", 6, 2, 256, true, false, 0, 2.0f, 0.0f, true, 45,
         0, {}, 0, 0.0f},
        {"MLA 4/1, D 576, F16, V = K", 4, 1, 576, true, true, 0, 0.0f, 0.0f, false, 50, 0, {},
         0, 0.0f},
        {"MLA 4/1, D 576, F32, V = K, sinks, at 0 5 17 3", 4, 1, 576, false, true, 0, 0.0f,
         0.0f, true, 0, 4, {0, 5, 17, 3}, 0, 0.0f},
        {"GQA 4/2, D 96, F32, window 8, sinks, at 9 0 40 2 15 1, gap 8", 4, 2, 96, false, false,
         8, 0.0f, 0.0f, true, 0, 6, {9, 0, 40, 2, 15, 1}, 8, 0.0f},
        {"MHA 3/3, D 256, F16, softcap, at 0 1 31 16", 3, 3, 256, true, false, 0, 1.5f, 0.0f,
         false, 0, 4, {0, 1, 31, 16}, 0, 0.0f},
        /* Mistral Large 3's temperature: each token's at its own position, and the one
         * token's at n_pos - 1 */
        {"MLA 4/1, D 576, F32, V = K, temperature, at 0 9 40 17", 4, 1, 576, false, true, 0,
         0.0f, 0.0f, false, 0, 4, {0, 9, 40, 17}, 0, 0.5f},
        {"GQA 4/2, D 64, F16, temperature, one token at 70", 4, 2, 64, true, false, 0, 0.0f,
         0.0f, false, 70, 0, {}, 0, 0.5f},
    };
    for (int i = 0; i < (int)(sizeof vs / sizeof vs[0]); i++) run(i, vs[i]);
    return sl_test_finish("attn_decode_host_test");
}
