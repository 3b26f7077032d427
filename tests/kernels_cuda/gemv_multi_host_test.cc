/* tests/kernels_cuda/gemv_multi_host_test: the multi-matrix GEMV (kernels/cuda/gemv_multi.cuh:
 * k_gemv_multi's body, gemv_multi.h) run on the CPU, each thread of a block a host thread
 * (host_shim/launch.h), with the arguments and grid gemv_multi.cu launches it with
 * (gm_heads_args / gm_multi_args, gm_grid_x; both of gm_split's forms: one warp a row, the
 * block's warps a row). Why: CI has no GPU, and the kernel is in every
 * decode layer (deepseek2's per-head k_b / v_b, Q/K/V, gate/up + SwiGLU, the router + bias).
 * For every type sl_qt lists:
 * - per head: 3 heads of 5 rows (a row block past the matrix's end) at odd addresses 3 bytes
 *   apart, then 16-byte aligned (the float types' vector loads on the rows that are, their
 *   tail, x of other alignments), 2 tokens, x and y strided per head and token with gaps (odd
 *   float strides);
 * - several matrices: 4 matrices of mixed types (this one, Q8_0, this one, F16) at odd
 *   addresses, rows 5, 3, 9, 2 (row blocks straddling matrices), bias on two, 2 tokens;
 * - SwiGLU: gate of this type, up Q4_K, 6 rows: y0 = silu(gate) * up, y1 = up;
 * and for the six types of the Q8-activation body the same on it (bit for bit k_gemv_qx's
 * sums) plus the routed experts' gate / up + SwiGLU launch (experts_glu_q8);
 * columns past 32 units a row (lanes loop; float types a count not a multiple of 32).
 * Outputs against gemv_ref.h's float64 dot and cuda_fused_test's bound (GEMV_MULTI_TOL_S, _ABS,
 * gemv_ref_glu_tol); every float of an output buffer no case checks still the sentinel
 * (ybuf.h); buffers of exactly their size (the ASan build flags an access past one). No
 * faulting access: the vector __ldg loads the shim counts (the float types' and the Q8 body's)
 * and, in the UBSan build, plain accesses' alignment. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"                            /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/gemv_multi_cuh.h" /* kernels/cuda/gemv_multi.cuh (BUILD) */
#include "tests/kernels_cuda/gemv_ref.h"
#include "tests/kernels_cuda/rand_weights.h"
#include "tests/kernels_cuda/ybuf.h"

extern "C" {
#include "tests/testing.h"
}

static int n_reports = 0;
static long n_checked = 0;

static const char *tname(uint32_t T) { return sl_gguf_type_get(T)->name; }

/* |got - want| <= tol, the first 20 failures reported */
static void check_val(const char *what, uint32_t T, float got, double want, double tol,
                      long t, long h, long r)
{
    n_checked++;
    const bool ok = std::fabs((double)got - want) <= tol;
    CHECK(ok || n_reports > 20);
    if (!ok && n_reports++ < 20)
        fprintf(stderr, "%s %s token %ld head/matrix %ld row %ld: %.9g, float64 %.9g (tol "
                "%.3g)\n", what, tname(T), t, h, r, (double)got, want, tol);
}

static void untouched(const ybuf &Y, const char *what, uint32_t T)
{
    long bad = 0;
    Y.each_unseen([&](size_t i, float v) {
        n_checked++;
        if (v != YBUF_SENTINEL && bad++ < 5)
            fprintf(stderr, "%s %s: float %zu written (%.9g)\n", what, tname(T), i, (double)v);
    });
    CHECK_MSG(bad == 0, "%s %s: %ld floats written outside the outputs", what, tname(T), bad);
}

/* warps a row of the F32 body's launches (gm_split's 1 or GM_WARPS): every case runs both */
static int g_w = 1;

/* k_gemv_multi's launch (gm_run): n_head x n tokens, no fault-prone loads */
static void launch(const gm_args &a, unsigned n_head, unsigned n, uint32_t T, const char *what)
{
    const long faults0 = sl_shim_align_faults.load();
    const sl_shim_dim3 grid{(unsigned)gm_grid_x(a.row0[a.count], g_w), n_head, n};
    CHECK(sl_shim_launch(grid, GM_THREADS, [&] {
        if (g_w == GM_WARPS) gm_block<GM_WARPS>(a);
        else gm_block<1>(a);
    }));
    const long faults = sl_shim_align_faults.load() - faults0;
    CHECK_MSG(faults == 0, "%s %s: %ld loads at addresses that fault on the device", what,
              tname(T), faults);
}

/* n floats, random in [-1, 1), in an allocation of exactly n (x: reads past it are ASan's) */
static std::vector<float> rand_x(size_t n)
{
    std::vector<float> x(n);
    for (float &v : x) v = rnd_f(-1.0f, 1.0f);
    return x;
}

/* sl_cuda_gemv_heads: NH heads of ROWS rows, heads apart past their matrices, the first at an
 * odd address (al: each head 16-byte aligned, so the float types' rows that are take their
 * vector loads while their x, at odd strides, may not be); x and y of token t, head h at
 * t * ts + h * hs, with gaps */
template <uint32_t T> static void heads(int64_t cols, bool al)
{
    enum { NH = 3, ROWS = 5, NT = 2 };
    rand_mat m; /* the heads' values, head after head */
    CHECK(m.make(T, NH * ROWS, cols, 0, (int)cols));
    const size_t WOFF = al ? 0 : 1;
    const int64_t mat_bytes = ROWS * (int64_t)m.rb;
    const int64_t head_bytes = al ? (mat_bytes + 31) / 16 * 16 : mat_bytes + 3;
    const size_t wbytes = WOFF + (size_t)((NH - 1) * head_bytes) + ROWS * m.rb;
    uint8_t *wmem = (uint8_t *)malloc(wbytes);
    if (!wmem) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    memset(wmem, 0xA5, wbytes);
    for (int h = 0; h < NH; h++)
        memcpy(wmem + WOFF + h * head_bytes, m.w + (size_t)h * ROWS * m.rb, ROWS * m.rb);
    const int64_t x_hs = cols + 1, x_ts = NH * x_hs + 2, y_hs = ROWS + 1, y_ts = NH * y_hs + 3;
    const std::vector<float> x = rand_x((size_t)(NT * x_ts));
    ybuf Y((size_t)(NT * y_ts));
    const gm_args a = gm_heads_args(T, wmem + WOFF, head_bytes, ROWS, (int64_t)m.rb, cols,
                                    x.data(), x_ts, x_hs, Y.y.data(), y_ts, y_hs);
    launch(a, NH, NT, T, "heads");
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < ROWS; r++) {
                double want, tol;
                gemv_ref_dot(m.f.data() + (h * ROWS + r) * cols, x.data() + t * x_ts + h * x_hs,
                             cols, GEMV_MULTI_TOL_S, GEMV_MULTI_TOL_ABS, &want, &tol);
                check_val("heads", T, Y.at((size_t)(t * y_ts + h * y_hs + r)), want, tol, t, h,
                          r);
            }
    untouched(Y, "heads", T);
    free(wmem);
}

/* SL_CUDA_GEMV_MULTI_MAX matrices of one x for sl_cuda_gemv_multi (the multi and multi_q8
 * cases): types, rows and byte offsets given; a bias on matrices 1 and 2; outputs of nt tokens
 * (ybuf: sentinels past what a case reads) */
struct multi_set {
    enum { NM = SL_CUDA_GEMV_MULTI_MAX };
    rand_mat m[NM];
    std::vector<float> bias[NM];
    std::vector<ybuf> Y;
    sl_cuda_gemv_mat ms[NM];
    int64_t rb[NM];
    multi_set(const uint32_t *types, const int64_t *rows, const size_t *woff, int64_t cols,
              int nt, int seed)
    {
        for (int i = 0; i < NM; i++) Y.emplace_back((size_t)(nt * rows[i]));
        for (int i = 0; i < NM; i++) {
            CHECK(m[i].make(types[i], rows[i], cols, woff[i], seed + i));
            if (i == 1 || i == 2) bias[i] = rand_x((size_t)rows[i]);
            rb[i] = (int64_t)m[i].rb;
            ms[i] = sl_cuda_gemv_mat{types[i], m[i].w, rows[i], b(i), Y[i].y.data()};
        }
    }
    const float *b(int i) const { return bias[i].empty() ? nullptr : bias[i].data(); }
};

/* sl_cuda_gemv_multi: 4 matrices of mixed types on one x, bias on matrices 1 and 2 */
template <uint32_t T> static void multi(int64_t cols)
{
    enum { NM = SL_CUDA_GEMV_MULTI_MAX, NT = 2 };
    const uint32_t types[NM] = {T, SL_GGML_Q8_0, T, SL_GGML_F16};
    const int64_t rows[NM] = {5, 3, 9, 2};
    const size_t woff[NM] = {1, 3, 0, 2};
    multi_set ws(types, rows, woff, cols, NT, 7);
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ws.ms, ws.rb, NM, cols, x.data(), false);
    launch(a, 1, NT, T, "multi");
    for (int i = 0; i < NM; i++)
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < rows[i]; r++) {
                double want, tol;
                gemv_ref_dot(ws.m[i].f.data() + r * cols, x.data() + t * cols, cols,
                             GEMV_MULTI_TOL_S, GEMV_MULTI_TOL_ABS, &want, &tol);
                if (ws.b(i)) want += ws.b(i)[r];
                check_val("multi", types[i], ws.Y[i].at((size_t)(t * rows[i] + r)), want, tol,
                          t, i, r);
            }
}

/* sl_cuda_gemv_multi with silu_glu: gate (this type), up (Q4_K) */
template <uint32_t T> static void glu(int64_t cols)
{
    enum { ROWS = 6, NT = 2 };
    const uint32_t types[2] = {T, SL_GGML_Q4_K};
    rand_mat m[2];
    ybuf Y[2] = {ybuf(NT * ROWS), ybuf(NT * ROWS)};
    sl_cuda_gemv_mat ms[2];
    int64_t rb[2];
    const std::vector<float> bg = rand_x(ROWS); /* a bias on the gate */
    for (int i = 0; i < 2; i++) {
        CHECK(m[i].make(types[i], ROWS, cols, (size_t)i, 11 + i));
        rb[i] = (int64_t)m[i].rb;
        ms[i] = sl_cuda_gemv_mat{types[i], m[i].w, ROWS, i ? nullptr : bg.data(),
                                 Y[i].y.data()};
    }
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ms, rb, 2, cols, x.data(), true);
    launch(a, 1, NT, T, "glu");
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < ROWS; r++) {
            double g, tg, u, tu;
            gemv_ref_dot(m[0].f.data() + r * cols, x.data() + t * cols, cols, GEMV_MULTI_TOL_S,
                         GEMV_MULTI_TOL_ABS, &g, &tg);
            g += bg[(size_t)r];
            gemv_ref_dot(m[1].f.data() + r * cols, x.data() + t * cols, cols, GEMV_MULTI_TOL_S,
                         GEMV_MULTI_TOL_ABS, &u, &tu);
            const double silu = g / (1.0 + std::exp(-g)), h = silu * u;
            check_val("glu up", types[1], Y[1].at((size_t)(t * ROWS + r)), u, tu, t, 1, r);
            check_val("glu", T, Y[0].at((size_t)(t * ROWS + r)), h,
                      gemv_ref_glu_tol(tg, tu, u, silu, h), t, 0, r);
        }
}

/* sl_cuda_gemv_router's launch (k_gemv_router: gm_block, then gm_router_last in the grid's
 * last block) against gm_block's launch then router_body a token (k_router's): the logits and
 * every pick and weight bit for bit, blocks in order and reversed, the counter back at 0; a
 * router of 24 experts, top-6 softmax-then-top-k with a bias on the matrix, and DeepSeek's
 * sigmoid with a selection bias, 4 groups, the top 2, normalised and scaled; 2 tokens; the
 * F32 router real files have, a block's warps a row as gm_split gives it one (gm_block's
 * forms and the float types are multi's and heads' to check) */
template <uint32_t T> static void router(int64_t cols)
{
    enum { E = 24, NT = 2, K = 6 };
    rand_mat m;
    CHECK(m.make(T, E, cols, 0, 5));
    const std::vector<float> x = rand_x((size_t)(NT * cols)), mb = rand_x(E), sb = rand_x(E);
    for (int v = 0; v < 2; v++) {
        router_args ra = {E, K, v ? SL_GATING_SIGMOID : SL_GATING_SOFTMAX_TOPK, v ? 4 : 0,
                          v ? 2 : 0, v == 1, v ? sb.data() : nullptr, v ? 2.5f : 1.0f,
                          nullptr, nullptr};
        std::vector<double> rs(router_smem(E, ra.n_group) / sizeof(double));
        std::vector<int32_t> sel(SL_CUDA_ROUTER_MAX_EXPERT);
        /* the plain launches */
        std::vector<float> lg_p((size_t)(NT * E)), w_p((size_t)(NT * K));
        std::vector<int32_t> i_p((size_t)(NT * K));
        sl_cuda_gemv_mat mat = {T, m.w, E, v ? nullptr : mb.data(), lg_p.data()};
        const int64_t rb = (int64_t)m.rb;
        const gm_args ap = gm_multi_args(&mat, &rb, 1, cols, x.data(), false);
        launch(ap, 1, NT, T, "router (plain)");
        router_args rp = ra;
        rp.idx = i_p.data(), rp.w = w_p.data();
        CHECK(sl_shim_launch(sl_shim_dim3{NT, 1, 1}, 32,
                             [&] { router_body(lg_p.data(), blockIdx.x, rp, rs.data(),
                                               sel.data()); }));
        for (int rev = 0; rev < 2; rev++) {
            std::vector<float> lg((size_t)(NT * E)), w((size_t)(NT * K));
            std::vector<int32_t> idx((size_t)(NT * K));
            mat.y = lg.data();
            const gm_args a = gm_multi_args(&mat, &rb, 1, cols, x.data(), false);
            router_args rf = ra;
            rf.idx = idx.data(), rf.w = w.data();
            unsigned done = 0;
            sl_shim_reverse_blocks = rev;
            const sl_shim_dim3 grid{(unsigned)gm_grid_x(E, g_w), 1, NT};
            CHECK(sl_shim_launch(grid, GM_THREADS, [&] {
                if (g_w > 1) gm_block<GM_WARPS>(a);
                else gm_block<1>(a);
                gm_router_last(a, rf, &done, rs.data(), sel.data());
            }));
            sl_shim_reverse_blocks = false;
            CHECK_MSG(done == 0, "router %s: the counter left at %u", tname(T), done);
            const bool same = !memcmp(lg.data(), lg_p.data(), lg.size() * 4) &&
                              !memcmp(idx.data(), i_p.data(), idx.size() * 4) &&
                              !memcmp(w.data(), w_p.data(), w.size() * 4);
            CHECK_MSG(same, "router %s (variant %d, %d warps a row%s): logits, picks or weights "
                      "differ from the two launches'", tname(T), v, g_w,
                      rev ? ", blocks reversed" : "");
            n_checked += NT * (E + 2 * K);
        }
    }
}

/* ---- the Q8-activation body (qxm_block): the types k_gemv_qx takes ----------------------- */

/* k_gemv_multi_qx's launch (gm_run where sl_cuda_gemv_multi_q8 holds): qxm_grid_x x n_head x
 * n tokens, its dynamic shared memory poisoned before each block */
template <bool GLU>
static void launch_q8(const gm_args &a, unsigned n_head, unsigned n, uint32_t T, const char *what)
{
    const long faults0 = sl_shim_align_faults.load();
    const size_t sm = (qx_smem(a.cols) + 15) / 16 * 16;
    uint8_t *smem = (uint8_t *)aligned_alloc(16, sm);
    const sl_shim_dim3 grid{(unsigned)qxm_grid_x(a), n_head, n};
    CHECK(smem && sl_shim_launch(grid, QX_THREADS, [&] { qxm_block<GLU>(a, smem); },
                                 [&] { memset(smem, 0xA5, sm); }));
    free(smem);
    const long faults = sl_shim_align_faults.load() - faults0;
    CHECK_MSG(faults == 0, "%s %s: %ld loads at addresses that fault on the device", what,
              tname(T), faults);
}

/* One matrix through k_gemv_qx's body as gemv.cu launches it for sl_cuda_gemv (n_batch 1):
 * the bits a fused launch must give */
template <uint32_t T>
static std::vector<float> single_q8(const uint8_t *w, int64_t rows, int64_t cols, size_t rb,
                                    const float *x)
{
    std::vector<float> y((size_t)rows, 0.0f);
    gv_args g = {};
    g.w = w;
    g.n_out = g.rows = rows;
    g.cols = cols;
    g.row_bytes = (int64_t)rb;
    g.x = x;
    g.x_group = 1;
    g.y = y.data();
    g.y_bstride = rows;
    g.n_batch = 1;
    const size_t sm = (qx_smem(cols) + 15) / 16 * 16;
    uint8_t *smem = (uint8_t *)aligned_alloc(16, sm);
    const gv_grid G = gv_grid_of(g, 1, true);
    CHECK(smem && sl_shim_launch(sl_shim_dim3{G.x, G.y, G.z}, QX_THREADS,
                                 [&] { qx_block<T>(g, smem); }, [&] { memset(smem, 0xA5, sm); }));
    free(smem);
    return y;
}

/* The qx type of a run-time code: single_q8<code> */
struct single_q8_of {
    const uint8_t *w;
    int64_t rows, cols;
    size_t rb;
    const float *x;
    std::vector<float> y;
    template <uint32_t T> void operator()()
    {
        if constexpr (sl_qx_type(T)) y = single_q8<T>(w, rows, cols, rb, x);
    }
};

/* y (a fused launch's row r of matrix w, token x) against the float64 dot of x as the Q8 kernel
 * sees it (gemv_ref_q8_x) within gemv.cuh's bound, and bit for bit against k_gemv_qx's body */
static void check_q8(const char *what, uint32_t type, const rand_mat &m, const float *x,
                     const float *bias, const std::vector<float> &got, int64_t got_stride,
                     long t, long i)
{
    std::vector<float> xr((size_t)m.cols);
    gemv_ref_q8_x(x, m.cols, xr.data());
    single_q8_of one{m.w, m.rows, m.cols, m.rb, x, {}};
    sl_qt_dispatch(type, one);
    CHECK_MSG(one.y.size() == (size_t)m.rows, "%s: no k_gemv_qx body for %s", what, tname(type));
    for (int64_t r = 0; r < m.rows && one.y.size() == (size_t)m.rows; r++) {
        double want, tol;
        gemv_ref_dot(m.f.data() + r * m.cols, xr.data(), m.cols, GEMV_REF_TOL_S,
                     GEMV_REF_TOL_ABS, &want, &tol);
        const float b = bias ? bias[r] : 0.0f;
        const float v = got[(size_t)(r * got_stride)];
        check_val(what, type, v, want + b, tol, t, i, r);
        n_checked++;
        const float single = bias ? one.y[(size_t)r] + b : one.y[(size_t)r];
        if (memcmp(&v, &single, sizeof v) && n_reports++ < 20)
            fprintf(stderr, "%s %s token %ld matrix %ld row %lld: %.9g, k_gemv_qx %.9g (bits "
                    "differ)\n", what, tname(type), t, i, (long long)r, (double)v,
                    (double)single);
        CHECK(!memcmp(&v, &single, sizeof v) || n_reports > 20);
    }
}

/* sl_cuda_gemv_multi of 4 matrices of qx types on one x: two whole blocks (QX_ROWS), a few
 * rows, past two blocks, one row; bias on two, 2 tokens, matrices at each type's alignment */
template <uint32_t T> static void multi_q8(int64_t cols)
{
    enum { NM = SL_CUDA_GEMV_MULTI_MAX, NT = 2 };
    const uint32_t types[NM] = {T, SL_GGML_Q6_K, T, SL_GGML_Q8_0};
    const int64_t rows[NM] = {64, 5, 70, 1}; /* whole blocks, one, past two, a row */
    size_t woff[NM];
    for (int i = 0; i < NM; i++) woff[i] = (size_t)(i & 1) * sl_qx_align(types[i]);
    multi_set ws(types, rows, woff, cols, NT, 17);
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ws.ms, ws.rb, NM, cols, x.data(), false);
    launch_q8<false>(a, 1, NT, T, "multi q8");
    for (int i = 0; i < NM; i++)
        for (int t = 0; t < NT; t++) {
            std::vector<float> got((size_t)rows[i]);
            for (int64_t r = 0; r < rows[i]; r++)
                got[(size_t)r] = ws.Y[i].at((size_t)(t * rows[i] + r));
            check_q8("multi q8", types[i], ws.m[i], x.data() + t * cols, ws.b(i), got, 1, t, i);
        }
    for (int i = 0; i < NM; i++) untouched(ws.Y[i], "multi q8", types[i]);
}

/* sl_cuda_gemv_multi_norm (the norm in the Q8 body's prologue) against rows.cuh's norm kernel
 * body then the launch without it: xn and every y bit for bit (the same norm factor rule,
 * sl_rms_scale, over the same 256 threads), with and without a norm weight; x at an odd float
 * offset (the scalar loads), 2 tokens; the first block of each token alone stores xn, every
 * float of xn is stored once (ybuf: nothing past it) */
template <uint32_t T> static void norm_q8(int64_t cols)
{
    enum { NM = 3, NT = 2 };
    const uint32_t types[SL_CUDA_GEMV_MULTI_MAX] = {T, SL_GGML_Q8_0, T, T};
    const int64_t rows[SL_CUDA_GEMV_MULTI_MAX] = {33, 5, 1, 1};
    const size_t woff[SL_CUDA_GEMV_MULTI_MAX] = {0, 2, 0, 0};
    const std::vector<float> xall = rand_x((size_t)(NT * cols + 1));
    const float *x = xall.data() + 1;
    std::vector<float> nwv = rand_x((size_t)cols);
    for (float &v : nwv) v = 0.5f + fabsf(v); /* norm weights as trained: around 1 */
    const float eps = 1e-6f;
    for (int with_w = 0; with_w < 2; with_w++) {
        const float *nw = with_w ? nwv.data() : nullptr;
        /* the plain path: k_rms_norm's body (one block a row), then the launch */
        std::vector<float> xn_ref((size_t)(NT * cols));
        CHECK(sl_shim_launch(sl_shim_dim3{NT, 1, 1}, ROW_THREADS, [&] {
            __shared__ float red[32];
            rms_norm_body(x, nw, xn_ref.data(), cols, eps, false, red);
        }));
        multi_set fu(types, rows, woff, cols, NT, 31);
        launch_q8<false>(gm_multi_args(fu.ms, fu.rb, NM, cols, xn_ref.data(), false), 1, NT,
                         T, "norm q8 (plain)");
        std::vector<float> want[NM]; /* the plain path's y, then fresh buffers for the fused */
        for (int i = 0; i < NM; i++) {
            want[i] = fu.Y[i].y;
            fu.Y[i] = ybuf((size_t)(NT * rows[i]));
            fu.ms[i].y = fu.Y[i].y.data();
        }
        ybuf xn((size_t)(NT * cols));
        gm_args a = gm_multi_args(fu.ms, fu.rb, NM, cols, x, false);
        gm_norm(&a, nw, eps, xn.y.data());
        launch_q8<false>(a, 1, NT, T, "norm q8");
        long bad = 0;
        for (size_t i = 0; i < xn_ref.size(); i++) {
            const float v = xn.at(i);
            bad += memcmp(&xn_ref[i], &v, sizeof v) != 0;
        }
        for (int i = 0; i < NM; i++)
            for (size_t j = 0; j < (size_t)(NT * rows[i]); j++) {
                const float g = fu.Y[i].at(j);
                bad += memcmp(&g, &want[i][j], sizeof g) != 0;
                n_checked++;
            }
        CHECK_MSG(bad == 0, "norm q8 %s (norm weight %d): %ld values differ from the norm then "
                  "the GEMV", tname(T), with_w, bad);
        untouched(xn, "norm q8 xn", T);
        for (int i = 0; i < NM; i++) untouched(fu.Y[i], "norm q8", types[i]);
    }
}

/* sl_cuda_gemv_heads on the Q8 body: 3 heads of 40 rows (two blocks each, the second partial),
 * heads apart by the matrix plus the type's alignment, 2 tokens, x and y strided with gaps */
template <uint32_t T> static void heads_q8(int64_t cols)
{
    enum { NH = 3, ROWS = 40, NT = 2 };
    rand_mat hm[NH];
    for (int h = 0; h < NH; h++) CHECK(hm[h].make(T, ROWS, cols, 0, 23 + h));
    const int64_t head_bytes = ROWS * (int64_t)hm[0].rb + sl_qx_align(T);
    const size_t wbytes = (size_t)((NH - 1) * head_bytes) + ROWS * hm[0].rb;
    uint8_t *wmem = (uint8_t *)aligned_alloc(16, (wbytes + 15) / 16 * 16);
    if (!wmem) {
        CHECK_MSG(0, "out of memory");
        return;
    }
    memset(wmem, 0xA5, wbytes);
    for (int h = 0; h < NH; h++) memcpy(wmem + h * head_bytes, hm[h].w, ROWS * hm[h].rb);
    const int64_t x_hs = cols + 8, x_ts = NH * x_hs + 8, y_hs = ROWS + 1, y_ts = NH * y_hs + 3;
    const std::vector<float> x = rand_x((size_t)(NT * x_ts));
    ybuf Y((size_t)(NT * y_ts));
    const gm_args a = gm_heads_args(T, wmem, head_bytes, ROWS, (int64_t)hm[0].rb, cols,
                                    x.data(), x_ts, x_hs, Y.y.data(), y_ts, y_hs);
    launch_q8<false>(a, NH, NT, T, "heads q8");
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++) {
            std::vector<float> got((size_t)ROWS);
            for (int r = 0; r < ROWS; r++) got[(size_t)r] = Y.at((size_t)(t * y_ts + h * y_hs + r));
            check_q8("heads q8", T, hm[h], x.data() + t * x_ts + h * x_hs, nullptr, got, 1, t, h);
        }
    untouched(Y, "heads q8", T);
    free(wmem);
}

/* sl_cuda_gemv_multi with silu_glu on the Q8 body: gate (this type), up Q5_K (another type's
 * pass after the gate's), 64 rows (whole blocks), bias on both */
template <uint32_t T> static void glu_q8(int64_t cols)
{
    enum { ROWS = 64, NT = 2 };
    const uint32_t types[2] = {T, SL_GGML_Q5_K};
    rand_mat m[2];
    ybuf Y[2] = {ybuf(NT * ROWS), ybuf(NT * ROWS)};
    sl_cuda_gemv_mat ms[2];
    int64_t rb[2];
    const std::vector<float> bg = rand_x(ROWS), bu = rand_x(ROWS);
    for (int i = 0; i < 2; i++) {
        CHECK(m[i].make(types[i], ROWS, cols, 0, 29 + i));
        rb[i] = (int64_t)m[i].rb;
        ms[i] = sl_cuda_gemv_mat{types[i], m[i].w, ROWS, i ? bu.data() : bg.data(),
                                 Y[i].y.data()};
    }
    const std::vector<float> x = rand_x((size_t)(NT * cols));
    const gm_args a = gm_multi_args(ms, rb, 2, cols, x.data(), true);
    launch_q8<true>(a, 1, NT, T, "glu q8");
    for (int t = 0; t < NT; t++) {
        std::vector<float> gate((size_t)ROWS), up((size_t)ROWS);
        single_q8_of g{m[0].w, ROWS, cols, m[0].rb, x.data() + t * cols, {}};
        sl_qt_dispatch(types[0], g);
        for (int r = 0; r < ROWS; r++) up[(size_t)r] = Y[1].at((size_t)(t * ROWS + r));
        check_q8("glu q8 up", types[1], m[1], x.data() + t * cols, bu.data(), up, 1, t, 1);
        /* the gate's own sums are k_gemv_qx's; the output is gm_block's epilogue on them */
        for (int r = 0; r < ROWS; r++) {
            const float v = g.y[(size_t)r] + bg[(size_t)r], u = up[(size_t)r];
            const float want = sl_swiglu1(v, u), got = Y[0].at((size_t)(t * ROWS + r));
            n_checked++;
            CHECK_MSG(!memcmp(&got, &want, sizeof got) || n_reports++ > 20,
                      "glu q8 %s token %d row %d: %.9g, silu(k_gemv_qx gate) * up %.9g",
                      tname(T), t, r, (double)got, (double)want);
        }
    }
    untouched(Y[0], "glu q8", T);
    untouched(Y[1], "glu q8 up", SL_GGML_Q5_K);
}

/* sl_cuda_gemv_experts_glu (qxe_glu_block): 4 experts, gate of this type (two at half their
 * alignment), up Q6_K; 6 slots, two of them ids outside [0, 4); one x for all slots (decode)
 * and one a slot. Each value bit for bit silu(k_gemv_qx's gate) * k_gemv_qx's up on that
 * expert and x; the bad ids' rows exactly 0. */
template <uint32_t T> static void experts_glu_q8(int64_t cols)
{
    enum { NE = 4, ROWS = 40, NS = 6 };
    const uint32_t TU = SL_GGML_Q6_K;
    rand_mat g[NE], u[NE];
    const void *gp[NE], *up[NE];
    for (int e = 0; e < NE; e++) {
        CHECK(g[e].make(T, ROWS, cols, (size_t)(e & 1) * sl_qx_align(T) / 2, 41 + e));
        CHECK(u[e].make(TU, ROWS, cols, 0, 51 + e));
        gp[e] = g[e].w;
        up[e] = u[e].w;
    }
    const int32_t ids[NS] = {2, -1, 0, 3, 2, 7};
    for (int32_t xg : {(int32_t)NS, 1}) {
        const std::vector<float> x = rand_x((size_t)(NS * cols));
        ybuf Y((size_t)(NS * ROWS));
        const gme_args a = gme_make(T, gp, (int64_t)g[0].rb, TU, up, (int64_t)u[0].rb, NE, ids,
                                    NS, ROWS, cols, x.data(), xg, Y.y.data());
        const long faults0 = sl_shim_align_faults.load();
        const size_t sm = (qx_smem(cols) + 15) / 16 * 16;
        uint8_t *smem = (uint8_t *)aligned_alloc(16, sm);
        CHECK(smem && sl_shim_launch(sl_shim_dim3{(unsigned)gme_grid_x(a), 1, NS}, QX_THREADS,
                                     [&] { qxe_glu_block(a, smem); },
                                     [&] { memset(smem, 0xA5, sm); }));
        free(smem);
        CHECK_MSG(sl_shim_align_faults.load() == faults0, "experts glu %s: loads at addresses "
                  "that fault on the device", tname(T));
        for (int s = 0; s < NS; s++) {
            const int32_t e = ids[s];
            const float *xs = x.data() + (xg == 1 ? s : 0) * cols;
            std::vector<float> gv, uv;
            if (e >= 0 && e < NE) {
                gv = single_q8<T>(g[e].w, ROWS, cols, g[e].rb, xs);
                uv = single_q8<TU>(u[e].w, ROWS, cols, u[e].rb, xs);
            }
            for (int r = 0; r < ROWS; r++) {
                const float got = Y.at((size_t)(s * ROWS + r));
                const float want = gv.empty() ? 0.0f : sl_swiglu1(gv[(size_t)r], uv[(size_t)r]);
                n_checked++;
                const bool ok = !memcmp(&got, &want, sizeof got);
                CHECK(ok || n_reports > 20);
                if (!ok && n_reports++ < 20)
                    fprintf(stderr, "experts glu %s x_group %d slot %d (expert %d) row %d: %.9g, "
                            "unfused %.9g\n", tname(T), xg, s, e, r, (double)got,
                            (double)want);
            }
        }
        untouched(Y, "experts glu", T);
    }
}

static int n_types = 0, n_q8 = 0;

struct check_type {
    template <uint32_t T> void operator()()
    {
        /* 40 units of 32 for every block type (256 divides it: mixed types share it); float
         * types a length no multiple of 32 nor of their vectors' values (a tail) */
        const int64_t cols = sl_qt_block<T>::FLOAT ? 1102 : 1280;
        for (int w : {1, (int)GM_WARPS}) { /* one warp a row, then a block's warps a row */
            g_w = w;
            heads<T>(cols, false);
            heads<T>(cols, true);
            multi<T>(1280);
            glu<T>(1280);
            if (T == SL_GGML_F32 && w == GM_WARPS) router<T>(cols);
        }
        if constexpr (sl_qx_type(T)) {
            multi_q8<T>(1280);
            norm_q8<T>(1280);
            heads_q8<T>(1280);
            glu_q8<T>(1280);
            experts_glu_q8<T>(1280);
            n_q8++;
        }
        n_types++;
        printf("gemv_multi_host_test: %-7s ok so far (%ld values checked)\n", tname(T),
               n_checked);
        fflush(stdout);
    }
};

int main(void)
{
    /* gm_split: a MoE router (128 rows of 2048 on 132 SMs) splits; Q/K/V's 5120 rows, a
     * matrix of 512 columns do not */
    CHECK(gm_split(128, 2048, 132) == GM_WARPS && gm_split(256 * 3, 7168, 132) == GM_WARPS);
    CHECK(gm_split(5120, 2048, 132) == 1 && gm_split(128, 512, 132) == 1);
    sl_qt_for_each(check_type{});
    CHECK_MSG(n_types == 23, "%d types checked (23 expected)", n_types);
    CHECK_MSG(n_q8 == 6, "%d types checked on the Q8 body (6 expected)", n_q8);
    printf("gemv_multi_host_test: %d types (%d also on the Q8 body), %ld values\n", n_types,
           n_q8, n_checked);
    return sl_test_finish("gemv_multi_host_test");
}
