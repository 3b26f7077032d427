/* FFN parts (scheduler/moe/ffn_split.h) under the one CPU expert routine: a routed-expert layer
 * split per expert into a hot and a cold side (packed blobs, per-expert widths ff_at) gives,
 * through the cpu MoE scheduler, hot + cold within 1e-5 relative of the whole layer (F32 and
 * Q8_0 with F32 activations; gpt-oss's biases and clamped SwiGLU; experts with no hot or no
 * cold neurons; one token and a batch), the sides' widths add up to n_ff per expert, and a
 * part whose ff_at is broken is refused naming the expert. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/ref/quant.h"
#include "base/prng.h"
#include "scheduler/moe/ffn_split.h"
#include "scheduler/moe/moe.h"
#include "tests/testing.h"

enum { X = 4, E = 64, F = 64, K = 2, N_TOK = 5 };

static float uni(uint64_t r[4])
{
    return (float)((sl_prng_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* A layer's matrices in `type` (rows of E or F floats quantized), biases when `bias`. */
typedef struct layer {
    void *w[3][X];
    float *b[3];
    const void *p[3][X];
    sl_moe_layer L;
} layer;

static void make_layer(layer *l, uint32_t type, bool bias, sl_moe_act act, uint64_t seed)
{
    uint64_t r[4];
    sl_prng_seed(r, seed);
    sl_error e;
    float row[E > F ? E : F];
    memset(l, 0, sizeof *l);
    for (int p = 0; p < 3; p++)
        for (int x = 0; x < X; x++) {
            const int64_t rows = p == 2 ? E : F, cols = p == 2 ? F : E;
            const size_t rb = sl_quant_row_bytes(type, cols);
            l->w[p][x] = malloc((size_t)rows * rb);
            for (int64_t i = 0; i < rows; i++) {
                for (int64_t j = 0; j < cols; j++) row[j] = 0.2f * uni(r);
                CHECK(sl_quant_row(type, row, (uint8_t *)l->w[p][x] + i * rb, cols, &e) == SL_OK);
            }
            l->p[p][x] = l->w[p][x];
        }
    for (int p = 0; p < 3 && bias; p++) {
        const int64_t n = (int64_t)X * (p == 2 ? E : F);
        l->b[p] = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) l->b[p][i] = 0.5f * uni(r);
    }
    l->L = (sl_moe_layer){.layer = 0, .n_expert = X, .n_embd = E, .n_ff = F, .type_gate = type,
                          .type_up = type, .type_down = type, .gate = l->p[0], .up = l->p[1],
                          .down = l->p[2], .gate_b = l->b[0], .up_b = l->b[1],
                          .down_b = l->b[2], .act = act};
}

static void free_layer(layer *l)
{
    for (int p = 0; p < 3; p++) {
        for (int x = 0; x < X; x++) free(l->w[p][x]);
        free(l->b[p]);
    }
}

/* One side of whole: blobs, biases and the description, owned here. */
typedef struct side {
    int64_t ff_at[X + 1];
    void *blob[3];
    float *b[2];
    const void *p[3][X];
    sl_moe_layer L;
} side;

static void make_side(const sl_moe_layer *whole, const bool *hg, int64_t G, bool hot, side *s)
{
    uint64_t bytes[3];
    sl_error e;
    memset(s, 0, sizeof *s);
    sl_ffn_split_experts_layout(whole, hg, G, hot, s->ff_at, bytes);
    for (int p = 0; p < 3; p++) s->blob[p] = malloc(bytes[p] ? bytes[p] : 1);
    for (int b = 0; b < 2; b++) s->b[b] = malloc((size_t)(s->ff_at[X] + 1) * sizeof(float));
    CHECK_MSG(sl_ffn_split_experts_gather(whole, hg, G, hot, s->ff_at, s->blob[0], s->blob[1],
                                          s->blob[2], s->b[0], s->b[1], &e) == SL_OK,
              "%s", e.msg);
    sl_ffn_split_experts_part(whole, s->ff_at, s->blob[0], s->blob[1], s->blob[2], s->b[0],
                              s->b[1], hot, NULL, s->p[0], s->p[1], s->p[2], &s->L);
}

static void free_side(side *s)
{
    for (int p = 0; p < 3; p++) free(s->blob[p]);
    free(s->b[0]);
    free(s->b[1]);
}

/* Whole vs hot + cold for n_tok tokens routed to K experts each. */
static void check(sl_moe_sched *cpu, uint32_t type, bool bias, sl_moe_act act, int n_tok)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(type);
    const int64_t G = ti->block_size, NG = F / G;
    layer l;
    make_layer(&l, type, bias, act, 3 + type);
    /* expert 0 all hot, 1 all cold, the rest alternating granules */
    bool hg[X * F];
    for (int x = 0; x < X; x++)
        for (int64_t k = 0; k < NG; k++) hg[x * NG + k] = x == 0 || (x > 1 && (k + x) % 2);
    side hot, cold;
    make_side(&l.L, hg, G, true, &hot);
    make_side(&l.L, hg, G, false, &cold);
    for (int x = 0; x < X; x++)
        CHECK(hot.ff_at[x + 1] - hot.ff_at[x] + cold.ff_at[x + 1] - cold.ff_at[x] == F);
    CHECK(hot.ff_at[1] == F && cold.ff_at[2] - cold.ff_at[1] == F);
    /* each expert's down bias once, on the cold side (whatever device runs the hot one) */
    CHECK(!hot.L.down_b && cold.L.down_b == l.L.down_b);
    float x_in[N_TOK * E], whole[N_TOK * E], h[N_TOK * E], c[N_TOK * E];
    uint64_t r[4];
    sl_prng_seed(r, 11);
    for (int i = 0; i < N_TOK * E; i++) x_in[i] = uni(r);
    sl_moe_assign a[N_TOK * K];
    for (int t = 0; t < n_tok; t++) /* every expert, the edge ones included, gets tokens */
        for (int k = 0; k < K; k++)
            a[t * K + k] = (sl_moe_assign){t, (t + 2 * k) % X, 0.25f + 0.5f * (float)k};
    sl_error e;
    CHECK(sl_moe_exec(cpu, &l.L, a, n_tok * K, x_in, n_tok, whole, &e) == SL_OK);
    CHECK(sl_moe_exec(cpu, &hot.L, a, n_tok * K, x_in, n_tok, h, &e) == SL_OK);
    CHECK(sl_moe_exec(cpu, &cold.L, a, n_tok * K, x_in, n_tok, c, &e) == SL_OK);
    for (int i = 0; i < n_tok * E; i++) h[i] += c[i];
    const double d = sl_test_rel_diff(whole, h, (size_t)(n_tok * E));
    CHECK_MSG(d <= 1e-5, "type %u bias %d act %d, %d tokens: hot + cold differs by %g", type,
              bias, act, n_tok, d);
    /* a broken part is refused, naming the expert */
    int64_t bad[X + 1];
    memcpy(bad, hot.ff_at, sizeof bad);
    bad[3] = bad[4] + 1;
    sl_moe_layer B = hot.L;
    B.ff_at = bad;
    CHECK(sl_moe_exec(cpu, &B, a, n_tok * K, x_in, n_tok, h, &e) == SL_ERR_INVALID);
    CHECK(strstr(e.msg, "expert 2") != NULL);
    free_side(&hot);
    free_side(&cold);
    free_layer(&l);
}

int main(void)
{
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_moe_sched *cpu = NULL;
    sl_error e;
    if (sl_cpu_ops_init(&ops, SL_CPU_ISA_AUTO, sl_cpu_features_detect(), &e) ||
        sl_cpu_matvec_init(&mv, ops.isa, sl_cpu_features_detect(), &e)) {
        fprintf(stderr, "init: %s\n", e.msg);
        return 1;
    }
    mv.f32_act = true; /* the split changes no math: compare without activation rounding */
    if (sl_moe_cpu_create(&ops, &mv, NULL, &cpu, &e)) {
        fprintf(stderr, "init: %s\n", e.msg);
        return 1;
    }
    for (int n_tok = 1; n_tok <= N_TOK; n_tok += N_TOK - 1) {
        check(cpu, SL_GGML_F32, false, SL_MOE_SILU, n_tok);
        check(cpu, SL_GGML_Q8_0, false, SL_MOE_SILU, n_tok);
        check(cpu, SL_GGML_Q8_0, true, SL_MOE_SWIGLU_OAI, n_tok);
    }
    sl_moe_destroy(cpu);
    return sl_test_finish("ffn_split_test");
}
