/* tests/kernels_cuda/gemv_host_test: the decode GEMV's two kernels (kernels/cuda/gemv.cuh:
 * k_gemv's F32-activation body for every type sl_qt lists, k_gemv_qx's Q8-activation body for
 * its six) run on the CPU, each thread of a block a host thread (host_shim/launch.h), with the
 * cp.async copies landing only at their wait (a stage read early reads poison) and the
 * dynamic shared memory poisoned before each block. Why: CI has no GPU, and these are the
 * kernels of every decode token; what a GPU run would otherwise find first is here: rows past
 * the last block, columns crossing chunks and more chunks than stages, batches past the
 * template width, unaligned matrices and x, row lists with ids out of range (compact and
 * scatter), experts by a pointer array with ids out of range and x groups, expert parts of
 * per-expert widths (gate' rows, down' columns), and on the Q8 path unaligned expert
 * matrices (its !AL loads) and MXFP4's 17-byte blocks at any row length. Outputs against
 * gemv_ref.h's float64 dot and bound (cuda_kernels_matmul_test's rule: the Q8 path against
 * the same Q8_1-rounded x); unlisted rows exactly 0 or untouched (scatter); no vector access
 * or cp.async at an address that would fault on the device. Matrices are allocated to their
 * size, so the ASan build flags a load past a row's end. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "launch.h"                      /* tests/kernels_cuda/host_shim */
#include "tests/kernels_cuda/gemv_cuh.h" /* kernels/cuda/gemv.cuh (BUILD) */
#include "tests/kernels_cuda/gemv_ref.h"
#include "tests/kernels_cuda/rand_weights.h"
#include "tests/kernels_cuda/ybuf.h"

extern "C" {
#include "tests/testing.h"
}

/* n floats, 16-byte aligned, and room for x at an offset of up to 4 */
struct fbuf {
    float *p = nullptr;
    explicit fbuf(size_t n) { p = (float *)aligned_alloc(16, (n + 7) / 4 * 16); }
    ~fbuf() { free(p); }
};

static int n_fail_reports = 0;
static long n_checked = 0;

/* y against row r of m's values and x (q8: x as the Q8 path rounds it) */
static void check_row(const char *what, uint32_t T, const float *wrow, int64_t cols,
                      const float *x, bool q8, float y, int64_t o)
{
    std::vector<float> xr(x, x + cols);
    if (q8) gemv_ref_q8_x(x, cols, xr.data());
    double d, tol;
    gemv_ref_dot(wrow, xr.data(), cols, GEMV_REF_TOL_S, GEMV_REF_TOL_ABS, &d, &tol);
    n_checked++;
    const bool ok = std::fabs((double)y - d) <= tol;
    CHECK(ok || n_fail_reports > 20);
    if (!ok && n_fail_reports++ < 20)
        fprintf(stderr, "%s %s output %lld cols %lld: %.9g, float64 %.9g (tol %.3g)\n", what,
                sl_gguf_type_get(T)->name, (long long)o, (long long)cols, (double)y, d, tol);
}

static void check_exact(const char *what, uint32_t T, float y, float want, int64_t o)
{
    n_checked++;
    const bool ok = y == want;
    CHECK(ok || n_fail_reports > 20);
    if (!ok && n_fail_reports++ < 20)
        fprintf(stderr, "%s %s output %lld: %.9g, want %.9g\n", what, sl_gguf_type_get(T)->name,
                (long long)o, (double)y, (double)want);
}

/* One launch as gemv.cu's gv_run makes it (gv_grid_of): the Q8 body (q8) or the F32 body of
 * batch width 1 or 4. False if the shim refused the block. */
template <uint32_t T> static bool launch(const gv_args &a, int n_slots, bool q8)
{
    const long faults0 = sl_shim_align_faults.load();
    bool ok;
    if (q8) {
        const size_t sm = qx_smem(a.cols);
        uint8_t *smem = (uint8_t *)aligned_alloc(16, (sm + 15) / 16 * 16);
        const gv_grid G = gv_grid_of(a, n_slots, true);
        ok = sl_shim_launch(sl_shim_dim3{G.x, G.y, G.z}, QX_THREADS, [&] { qx_block<T>(a, smem); },
                            [&] { memset(smem, 0xA5, sm); });
        free(smem);
    } else {
        const gv_grid G = gv_grid_of(a, n_slots, false);
        const sl_shim_dim3 g{G.x, G.y, G.z};
        const size_t sm = G.nb == 1 ? gv_cfg<T, 1>::BYTES : gv_cfg<T, 4>::BYTES;
        uint8_t *smem = (uint8_t *)aligned_alloc(16, sm);
        if (G.nb == 1)
            ok = sl_shim_launch(g, GV_THREADS, [&] { gv_block<T, 1>(a, smem); },
                                [&] { memset(smem, 0xA5, sm); });
        else
            ok = sl_shim_launch(g, GV_THREADS, [&] { gv_block<T, 4>(a, smem); },
                                [&] { memset(smem, 0xA5, sm); });
        free(smem);
    }
    const long faults = sl_shim_align_faults.load() - faults0;
    CHECK_MSG(faults == 0, "%s %s: %ld accesses at addresses that fault on the device",
              q8 ? "qx" : "gemv", sl_gguf_type_get(T)->name, faults);
    return ok;
}

static void fill_x(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = rnd_f(-1.0f, 1.0f);
}

/* every output of Y no check read still unwritten (ybuf.h) */
static void untouched(const ybuf &Y, const char *what, uint32_t T)
{
    Y.each_unseen(
        [&](size_t i, float v) { check_exact(what, T, v, YBUF_SENTINEL, (int64_t)i); });
}

/* Dense: Y[b][r] for rows not a multiple of a block's, batch rows 2 floats apart, x at an
 * offset where xoff. */
template <uint32_t T>
static void dense(bool q8, int64_t rows, int64_t cols, int64_t nb, size_t woff, int xoff)
{
    rand_mat m;
    CHECK(m.make(T, rows, cols, woff, (int)(cols + rows)));
    fbuf xb((size_t)(nb * cols));
    float *x = xb.p + xoff;
    fill_x(x, nb * cols);
    const int64_t ys = rows + 2;
    ybuf Y((size_t)(nb * ys));
    gv_args a = {};
    a.w = m.w, a.rows = rows, a.cols = cols, a.row_bytes = (int64_t)m.rb, a.n_out = rows;
    a.x = x, a.x_group = 1, a.y = Y.y.data(), a.y_bstride = ys, a.n_batch = (int)nb;
    CHECK(launch<T>(a, 1, q8));
    char what[64];
    snprintf(what, sizeof what, "%s dense%s%s%s", q8 ? "qx" : "gemv", woff ? " w+off" : "",
             xoff ? " x+off" : "", sl_shim_cp_eager ? " (cp.async at issue)" : "");
    for (int64_t b = 0; b < nb; b++)
        for (int64_t r = 0; r < rows; r++)
            check_row(what, T, m.f.data() + r * cols, cols, x + b * cols, q8,
                      Y.at((size_t)(b * ys + r)), r);
    untouched(Y, what, T);
}

/* sl_cuda_gemv_q8x's launch (k_gemv_qx_pre: x quantised once by qx_quant_block, the blocks
 * reading it from memory) against the plain Q8 launch: y bit for bit; x not 16-byte aligned,
 * a partial block of rows. */
template <uint32_t T> static void pre_quantised(int64_t cols)
{
    enum { ROWS = 40 };
    rand_mat m;
    CHECK(m.make(T, ROWS, cols, 0, (int)cols + 7));
    fbuf xb((size_t)cols);
    float *x = xb.p + 1;
    fill_x(x, cols);
    gv_args a = {};
    a.w = m.w, a.rows = ROWS, a.cols = cols, a.row_bytes = (int64_t)m.rb, a.n_out = ROWS;
    a.x = x, a.x_group = 1, a.y_bstride = ROWS, a.n_batch = 1;
    std::vector<float> y_p(ROWS);
    a.y = y_p.data();
    CHECK(launch<T>(a, 1, true));
    const size_t xb8 = qx_smem(cols);
    uint8_t *xq = (uint8_t *)aligned_alloc(16, (xb8 + 15) / 16 * 16);
    memset(xq, 0xA5, xb8);
    CHECK(sl_shim_launch(sl_shim_dim3{1, 1, 1}, QX_THREADS, [&] { qx_quant_block(x, cols, xq); }));
    ybuf Y(ROWS);
    gv_args f = a;
    f.x = nullptr, f.y = Y.y.data(), f.xq8 = xq;
    const gv_grid G = gv_grid_of(f, 1, true);
    const long faults0 = sl_shim_align_faults.load();
    CHECK(sl_shim_launch(sl_shim_dim3{G.x, G.y, G.z}, QX_THREADS,
                         [&] { qx_block<T, true>(f, nullptr); }));
    CHECK_MSG(sl_shim_align_faults.load() == faults0, "qx pre-quantised x %s: accesses at "
              "addresses that fault on the device", sl_gguf_type_get(T)->name);
    for (int64_t i = 0; i < ROWS; i++) check_exact("qx pre-quantised x", T, Y.at((size_t)i),
                                                   y_p[(size_t)i], i);
    free(xq);
}

/* sl_cuda_gemv_add_norm's launch (the Q8 body with the residual add in its epilogue and the
 * norm in the grid's last block, qx_norm_last) against the plain launch then rows.cuh's
 * add_rms_norm_body: y, res and xn bit for bit; the blocks in order and reversed (the last
 * to finish is then block 0), the counter back at 0 after each; without a norm weight; the
 * add alone (no counter) against the plain launch then res + y. 70 rows: a partial block. */
template <uint32_t T> static void add_norm(int64_t cols)
{
    enum { ROWS = 70 };
    rand_mat m;
    CHECK(m.make(T, ROWS, cols, 0, (int)cols));
    std::vector<float> x((size_t)cols), res0(ROWS), nw(ROWS);
    fill_x(x.data(), cols);
    for (float &v : res0) v = 4.0f * rnd_f(-1.0f, 1.0f);
    for (float &v : nw) v = rnd_f(0.5f, 1.5f);
    gv_args a = {};
    a.w = m.w, a.rows = ROWS, a.cols = cols, a.row_bytes = (int64_t)m.rb, a.n_out = ROWS;
    a.x = x.data(), a.x_group = 1, a.y_bstride = ROWS, a.n_batch = 1;
    /* the plain launches */
    std::vector<float> y_p(ROWS), res_p = res0;
    a.y = y_p.data();
    CHECK(launch<T>(a, 1, true));
    const size_t sm = qx_smem(cols);
    uint8_t *smem = (uint8_t *)aligned_alloc(16, (sm + 15) / 16 * 16);
    for (int with_w = 0; with_w < 3; with_w++) { /* 2: the add alone */
        std::vector<float> res_w = res0, xn_w(ROWS);
        if (with_w < 2) {
            CHECK(sl_shim_launch(sl_shim_dim3{1, 1, 1}, ROW_THREADS, [&] {
                __shared__ float red[32];
                add_rms_norm_body(res_w.data(), y_p.data(), with_w ? nw.data() : nullptr,
                                  xn_w.data(), ROWS, 1e-5f, red);
            }));
        } else {
            for (int i = 0; i < ROWS; i++) res_w[(size_t)i] = res0[(size_t)i] + y_p[(size_t)i];
        }
        for (int rev = 0; rev < 2; rev++) {
            ybuf Y(ROWS), XN(ROWS);
            std::vector<float> res = res0;
            unsigned done = 0;
            gv_args f = a;
            f.y = Y.y.data();
            f.res = res.data();
            if (with_w < 2) {
                f.nw = with_w ? nw.data() : nullptr;
                f.eps = 1e-5f;
                f.xn = XN.y.data();
                f.done = &done;
            }
            const gv_grid G = gv_grid_of(f, 1, true);
            sl_shim_reverse_blocks = rev;
            CHECK(sl_shim_launch(sl_shim_dim3{G.x, G.y, G.z}, QX_THREADS, [&] {
                qx_block<T>(f, smem);
                if (f.done) qx_norm_last(f);
            }, [&] { memset(smem, 0xA5, sm); }));
            sl_shim_reverse_blocks = false;
            CHECK_MSG(done == 0, "add norm %s: the counter left at %u", sl_gguf_type_get(T)->name,
                      done);
            char what[64];
            snprintf(what, sizeof what, "qx add%s%s", with_w < 2 ? " norm" : "",
                     rev ? " (blocks reversed)" : "");
            for (int64_t r = 0; r < ROWS; r++) {
                check_exact(what, T, Y.at((size_t)r), y_p[(size_t)r], r);
                check_exact(what, T, res[(size_t)r], res_w[(size_t)r], r);
                if (with_w < 2) check_exact(what, T, XN.at((size_t)r), xn_w[(size_t)r], r);
            }
            untouched(XN, what, T);
        }
    }
    free(smem);
}

/* A row list with ids out of range: compact (y[o], 0 for a bad id) and scatter (y[id], the
 * rest untouched); batch rows 2 floats apart. */
template <uint32_t T> static void rows_list(bool q8, int64_t cols, int64_t nb, bool scatter)
{
    const int64_t rows = 23;
    const int32_t idx[8] = {22, -1, 0, 7, 7, 23, 13, 5};
    const int64_t n_out = 8;
    rand_mat m;
    CHECK(m.make(T, rows, cols, 0, 3));
    fbuf xb((size_t)(nb * cols));
    float *x = xb.p;
    fill_x(x, nb * cols);
    const int64_t ys = (scatter ? rows : n_out) + 2;
    ybuf Y((size_t)(nb * ys));
    gv_args a = {};
    a.w = m.w, a.rows = rows, a.cols = cols, a.row_bytes = (int64_t)m.rb, a.idx = idx;
    a.n_out = n_out, a.x = x, a.x_group = 1, a.y = Y.y.data(), a.y_bstride = ys;
    a.n_batch = (int)nb, a.scatter = scatter;
    CHECK(launch<T>(a, 1, q8));
    const char *what = scatter ? (q8 ? "qx scatter" : "gemv scatter")
                               : (q8 ? "qx rows" : "gemv rows");
    for (int64_t b = 0; b < nb; b++)
        for (int64_t o = 0; o < n_out; o++) {
            const int32_t r = idx[o];
            const bool ok = r >= 0 && r < rows;
            if (scatter && ok)
                check_row(what, T, m.f.data() + r * cols, cols, x + b * cols, q8,
                          Y.at((size_t)(b * ys + r)), r);
            else if (!scatter && ok)
                check_row(what, T, m.f.data() + r * cols, cols, x + b * cols, q8,
                          Y.at((size_t)(b * ys + o)), o);
            else if (!scatter)
                check_exact(what, T, Y.at((size_t)(b * ys + o)), 0.0f, o);
        }
    untouched(Y, what, T);
}

/* Experts by a pointer array: slots {2, -1, 0, 2, 3 (out of range), 1} 3 floats apart, x per
 * slot or per group of x_group slots; woff: matrices 1 and 2 at that offset (the Q8 path's !AL
 * loads). */
template <uint32_t T> static void experts(bool q8, int64_t cols, int32_t x_group, size_t woff)
{
    enum { NE = 3, NS = 6 };
    const int64_t rows = 20, ys = rows + 3;
    const int32_t ids[NS] = {2, -1, 0, 2, 3, 1};
    rand_mat m[NE];
    const void *wp[NE];
    for (int e = 0; e < NE; e++) {
        CHECK(m[e].make(T, rows, cols, e ? woff : 0, 10 + e));
        wp[e] = m[e].w;
    }
    const int32_t xg = x_group < NS ? x_group : NS;
    const int64_t n_x = (NS + xg - 1) / xg;
    fbuf xb((size_t)(n_x * cols));
    float *x = xb.p;
    fill_x(x, n_x * cols);
    ybuf Y((size_t)(NS * ys));
    gv_args a = {};
    a.wptrs = wp, a.ids = ids, a.n_expert = NE, a.rows = rows, a.cols = cols;
    a.row_bytes = (int64_t)m[0].rb, a.n_out = rows, a.x = x, a.x_estride = cols, a.x_group = xg;
    a.y = Y.y.data(), a.y_bstride = rows, a.y_estride = ys, a.n_batch = 1;
    CHECK(launch<T>(a, NS, q8));
    const char *what = q8 ? "qx experts" : "gemv experts";
    for (int s = 0; s < NS; s++)
        for (int64_t r = 0; r < rows; r++) {
            const int32_t e = ids[s];
            const float v = Y.at((size_t)(s * ys + r));
            if (e >= 0 && e < NE)
                check_row(what, T, m[e].f.data() + r * cols, cols, x + (s / xg) * cols, q8, v,
                          s * rows + r);
            else
                check_exact(what, T, v, 0.0f, s * rows + r);
        }
    untouched(Y, what, T);
}

/* sl_cuda_gemv_experts_combine's launch (the Q8 body's experts form, then the combine in the
 * grid's last block, qx_combine_last) against the experts launch then moe_combine.cuh's
 * mc_combine as k_moe_combine runs it: y and out bit for bit; 2 tokens of top-3 over 3
 * experts (a repeated id, a bad one: zeros), one x a slot; the residual in place, apart, and
 * none; blocks in order and reversed, the counters back at 0. 40 rows: two block columns
 * (a counter each), the second partial. */
template <uint32_t T> static void experts_combine(int64_t cols)
{
    enum { NE = 3, K = 3, NT = 2, NS = NT * K, ROWS = 40 };
    const int32_t ids[NS] = {2, 0, 2, -1, 1, 0};
    rand_mat m[NE];
    const void *wp[NE];
    for (int e = 0; e < NE; e++) {
        CHECK(m[e].make(T, ROWS, cols, 0, 20 + e));
        wp[e] = m[e].w;
    }
    std::vector<float> x((size_t)(NS * cols)), wts(NS), res0((size_t)(NT * ROWS));
    fill_x(x.data(), NS * cols);
    for (float &v : wts) v = rnd_f(0.0f, 1.0f);
    for (float &v : res0) v = 3.0f * rnd_f(-1.0f, 1.0f);
    gv_args a = {};
    a.wptrs = wp, a.ids = ids, a.n_expert = NE, a.rows = ROWS, a.cols = cols;
    a.row_bytes = (int64_t)m[0].rb, a.n_out = ROWS, a.x = x.data(), a.x_estride = cols;
    a.x_group = 1, a.y_bstride = ROWS, a.y_estride = ROWS, a.n_batch = 1;
    std::vector<float> y_p((size_t)(NS * ROWS));
    a.y = y_p.data();
    CHECK(launch<T>(a, NS, true));
    const size_t sm = qx_smem(cols);
    uint8_t *smem = (uint8_t *)aligned_alloc(16, (sm + 15) / 16 * 16);
    /* residual 0: in place (blocks in order, then reversed), 1: apart, 2: none (reversed) */
    const int cases[4][2] = {{0, 0}, {0, 1}, {1, 0}, {2, 1}};
    for (const auto &cs : cases) {
        const int mode = cs[0], rev = cs[1];
        std::vector<float> out_p = res0;
        CHECK(sl_shim_launch(sl_shim_dim3{1, NT, 1}, 64, [&] {
            mc_combine(y_p.data(), nullptr, ids, wts.data(), K, ROWS,
                       mode < 2 ? res0.data() : nullptr, out_p.data());
        }));
        {
            ybuf Y((size_t)(NS * ROWS));
            std::vector<float> res = res0, out((size_t)(NT * ROWS), YBUF_SENTINEL);
            float *o = mode == 0 ? res.data() : out.data();
            unsigned done[2] = {0, 0}; /* a counter per block column: 40 rows, 2 */
            gv_args f = a;
            f.y = Y.y.data();
            f.c_idx = ids, f.c_w = wts.data(), f.c_k = K, f.c_out = o, f.done = done;
            f.c_res = mode < 2 ? res.data() : nullptr;
            const gv_grid G = gv_grid_of(f, NS, true);
            sl_shim_reverse_blocks = rev;
            CHECK(sl_shim_launch(sl_shim_dim3{G.x, G.y, G.z}, QX_THREADS, [&] {
                qx_block<T>(f, smem);
                qx_combine_last(f);
            }, [&] { memset(smem, 0xA5, sm); }));
            sl_shim_reverse_blocks = false;
            CHECK_MSG(G.x == 2 && done[0] == 0 && done[1] == 0, "experts combine %s: %u "
                      "columns, the counters left at %u, %u", sl_gguf_type_get(T)->name, G.x,
                      done[0], done[1]);
            char what[64];
            snprintf(what, sizeof what, "qx experts combine (residual %d%s)", mode,
                     rev ? ", blocks reversed" : "");
            for (int64_t i = 0; i < NS * ROWS; i++)
                check_exact(what, T, Y.at((size_t)i), y_p[(size_t)i], i);
            for (int64_t i = 0; i < NT * ROWS; i++) check_exact(what, T, o[i], out_p[(size_t)i], i);
            if (mode == 1) /* the residual apart is only read */
                CHECK(!memcmp(res.data(), res0.data(), res.size() * sizeof(float)));
        }
    }
    free(smem);
}

/* Expert parts (ffn_split.h's packing): widths {2, 0, 1, 3} granules of G (gate': rows;
 * down': columns, whole blocks); gate' [sum w][E] rows (expert k's first at ff_at[k]),
 * down' expert k's [E][w_k] matrix; slots {3, 1, 0, 2}, 3 floats apart. gate': outputs past
 * the width 0; down': the dot over w_k columns of the slot's x (stride the widest), 0 for a
 * width of 0. */
template <uint32_t T> static void parts(bool q8, int64_t G, int64_t E, bool down)
{
    enum { NE = 4, NS = 4 };
    const int64_t wdt[NE] = {2 * G, 0, G, 3 * G}, F = 3 * G;
    const int32_t ids[NS] = {3, 1, 0, 2};
    int64_t at[NE + 1] = {0};
    for (int k = 0; k < NE; k++) at[k + 1] = at[k] + wdt[k];
    rand_mat gate, dn[NE];
    const void *wp[NE];
    if (!down) {
        CHECK(gate.make(T, at[NE], E, 0, 21));
        for (int k = 0; k < NE; k++) wp[k] = gate.w + (size_t)at[k] * gate.rb;
    } else {
        for (int k = 0; k < NE; k++) {
            if (wdt[k]) CHECK(dn[k].make(T, E, wdt[k], 0, 30 + k));
            wp[k] = dn[k].w; /* a width of 0: never read */
        }
    }
    const int64_t xn = down ? NS * F : E, yr = down ? E : F, ys = yr + 3;
    fbuf xb((size_t)xn);
    float *x = xb.p;
    fill_x(x, xn);
    ybuf Y((size_t)(NS * ys));
    gv_args a = {};
    a.wptrs = wp, a.ids = ids, a.n_expert = NE, a.ff_at = at, a.ff_cols = down;
    a.rows = down ? E : F, a.cols = down ? F : E;
    a.row_bytes = (int64_t)sl_quant_row_bytes(T, a.cols), a.n_out = a.rows, a.x = x;
    a.x_estride = a.cols, a.x_group = down ? 1 : NS, a.y = Y.y.data(), a.y_bstride = a.rows;
    a.y_estride = ys, a.n_batch = 1;
    CHECK(launch<T>(a, NS, q8));
    const char *what = down ? (q8 ? "qx down'" : "gemv down'") : (q8 ? "qx gate'" : "gemv gate'");
    for (int s = 0; s < NS; s++) {
        const int32_t k = ids[s];
        for (int64_t r = 0; r < yr; r++) {
            const float v = Y.at((size_t)(s * ys + r));
            if (!down && r < wdt[k])
                check_row(what, T, gate.f.data() + (at[k] + r) * E, E, x, q8, v, s * yr + r);
            else if (down && wdt[k])
                check_row(what, T, dn[k].f.data() + r * wdt[k], wdt[k], x + s * F, q8, v,
                          s * yr + r);
            else
                check_exact(what, T, v, 0.0f, s * yr + r);
        }
    }
    untouched(Y, what, T);
}

static int n_types = 0, n_qx = 0;

struct check_type {
    template <uint32_t T> void operator()()
    {
        const int64_t B = sl_qt_block<T>::ELEMS, chunk = gv_cfg<T, 1>::CE;
        const bool flt = sl_qt_block<T>::FLOAT;
        /* one block; a chunk and a block (a partial chunk); more chunks than stages */
        const int64_t colsv[3] = {flt ? 7 : B, chunk + (flt ? 5 : B),
                                  3 * chunk + (flt ? 9 : 2 * B)};
        /* (the shim's shuffles are slow: a batch of 6, two of width 4, on one shape) */
        dense<T>(false, 21, colsv[0], 6, 0, 0);
        dense<T>(false, 21, colsv[1], 1, 0, 0);
        dense<T>(false, 21, colsv[2], 1, 0, 0);
        dense<T>(false, 17, colsv[1], 1, 2, 1); /* a matrix and x at odd offsets */
        sl_shim_cp_eager = true; /* a copy into a stage another warp still reads shows too */
        dense<T>(false, 21, colsv[2], 1, 0, 0);
        sl_shim_cp_eager = false;
        rows_list<T>(false, colsv[1], 1, false);
        rows_list<T>(false, colsv[1], 2, true);
        experts<T>(false, colsv[1], 1, 0);
        experts<T>(false, colsv[1], 2, 2);
        /* gate' widths are rows (any count), down' widths columns (whole blocks) */
        parts<T>(false, 3, flt ? 70 : 2 * B, false);
        parts<T>(false, flt ? 5 : B, 20, true);
        n_types++;
        if constexpr (sl_qx_type(T)) {
            /* 256 columns: 8 units (a lane each); 2304: 72 units (lanes loop, loads ahead) */
            const int64_t qcols[2] = {256, 2304};
            dense<T>(true, 40, qcols[0], 1, 0, 1); /* x not 16-byte aligned */
            dense<T>(true, 40, qcols[1], 1, 0, 0);
            add_norm<T>(qcols[1]);
            pre_quantised<T>(qcols[1]);
            if (T == 39) dense<T>(true, 9, 2880, 1, 0, 0); /* gpt-oss: 90 blocks, 1530 B */
            rows_list<T>(true, 2304, 1, false);
            rows_list<T>(true, 2304, 1, true);
            const size_t al = (size_t)sl_qx_align(T);
            experts<T>(true, 2304, 1, 0);
            experts<T>(true, 2304, 6, al / 2); /* the !AL loads; one x for all slots */
            experts_combine<T>(2304);
            parts<T>(true, 3, 512, false);
            if (T != 8) parts<T>(true, B == 32 ? 64 : B, 20, true); /* never Q8_0's down' */
            n_qx++;
        }
        printf("gemv_host_test: %-7s ok so far (%ld outputs checked)\n",
               sl_gguf_type_get(T)->name, n_checked);
        fflush(stdout);
    }
};

int main(void)
{
    sl_qt_for_each(check_type{});
    CHECK(n_types == 23 && n_qx == 6);
    printf("gemv_host_test: %d types, %d on the Q8 path, %ld outputs\n", n_types, n_qx,
           n_checked);
    return sl_test_finish("gemv_host_test");
}
