/* The bytes of every row of a synthetic tensor (see synth.c for what the rows mean).
 *
 * Streams: every row has its own xoshiro256** stream, seeded from (seed, tensor name, row), so
 * a row's values depend on nothing else and rows can be made in any order on any thread.
 * Entries are Irwin-Hall(4) "Gaussian-ish" numbers (sum of four uniforms, unit variance): plain
 * IEEE arithmetic and sqrt, so files are identical on every machine. The libm calls are the
 * router's ln(rank) and the neuron skew's pow(rank, -Z/2) (glibc's are correctly rounded in
 * practice; with Z = 0 neither changes a value).
 *
 * Exact rows: generated in float, then packed by the reference quantizer (sl_quant_row), so a
 * quantized file holds exactly what gguf-py would make of the F32 file.
 *
 * Pooled rows: the reference Q4_K quantizer packs ~10 M weights/s per core, so a 30e9-weight
 * model (Qwen3-30B-A3B's shape) would take minutes on 16 cores. Tensors in a block type with at
 * least POOL_MIN_WEIGHTS weights and POOL_MIN_ROWS rows (all but attn_k/attn_v in such a model)
 * are instead resampled: a pool of SL__SYNTH_POOL_ROWS rows is generated and quantized exactly
 * once per tensor, and block b of row r is block b of pool row hash(tensor, r, b). Each block
 * of the output is therefore a valid block the reference quantizer produced for Irwin-Hall
 * values of the right scale, at the same position in the row (so column rules such as the MoE
 * bias channel in column 0 hold); rows are distinct (POOL_ROWS^blocks combinations), but
 * blocks repeat, which no consumer of these files relies on not happening. The neuron scale is
 * applied to a pooled block by multiplying its fp16 scale fields (d, and dmin / m where the
 * format has one) - every value of the block is linear in them - and clamping to the largest
 * finite fp16, so every block stays finite and valid. MXFP4's scale is a power-of-two exponent
 * (E8M0), too coarse for the factor, and packing every scaled row again costs the reference
 * quantizer's time (600 s for gpt-oss-20b's shape), so a neuron-skewed MXFP4 tensor pools by
 * levels instead: pool row k is made at scale g_l = 2^(l / MXFP4_LEVELS), l = k mod
 * MXFP4_LEVELS; a row of factor f = 2^s g (g in [1, 2)) takes its blocks from the level nearest
 * g (in log2) and adds s to each block's exponent byte. Adding s to E8M0 multiplies the block by
 * exactly 2^s, and the reference quantizer of 2^s x is its quantization of x with the exponent
 * moved by s (its choices are ratios to a power of two), so each block is still exactly what it
 * makes of Irwin-Hall values, at 2^s g_l, within 2.2% of f. --exact-quant turns pooling off.
 *
 * Neuron skew (--neuron-skew Z): in each FFN (layer, and the shared expert separately), neuron
 * n of expert x has factor f = rank^(-Z/2) / sqrt(mean_rank rank^-Z), ranks 1..F a random
 * permutation per expert. gate and up rows of the neuron both carry f, so its activation
 * silu(g) * u scales roughly with f^2 ~ rank^-Z (Zipf): a few hot neurons, a long cold tail,
 * at places hot/cold placement has to find. mean f^2 = 1 over an expert, so the tensor's RMS
 * is that of Z = 0; ffn_down is not scaled.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ref/blocks.h"
#include "kernels/ref/quant.h"
#include "base/prng.h"
#include "tools/synth/synth_impl.h"

/* Tensors this big are pooled: the pool costs 256 exact rows, so it pays from 512 rows on, and
 * at 2^20 weights (~0.1 s of exact Q4_K on one core) it starts to matter; below that (every
 * test model of the repository) rows stay exact, so quantized files match their F32 twins. */
enum { POOL_MIN_WEIGHTS = 1 << 20, POOL_MIN_ROWS = 2 * SL__SYNTH_POOL_ROWS, POOL_CHUNK_ROWS = 16 };

/* MXFP4 pool levels (see the top of the file): 16 rows each; the level scales 2^(l / 16) and
 * the midpoints 2^((l + 1/2) / 16) between neighbours, as literals so that no libm rounding
 * can differ between machines. */
enum { MXFP4_LEVELS = 16 };
_Static_assert(SL__SYNTH_POOL_ROWS % MXFP4_LEVELS == 0, "whole pool rows per level");
static const double k_mxfp4_level[MXFP4_LEVELS] = {
    1.0, 1.0442737824274138, 1.0905077326652577, 1.1387886347566916, 1.189207115002721,
    1.241857812073484, 1.2968395546510096, 1.3542555469368927, 1.4142135623730951,
    1.4768261459394993, 1.5422108254079407, 1.6104903319492543, 1.681792830507429,
    1.7562521603732995, 1.8340080864093424, 1.9152065613971474};
static const double k_mxfp4_mid[MXFP4_LEVELS] = {
    1.0218971486541166, 1.0671404006768237, 1.1143867425958924, 1.1637248587775775,
    1.215247359980469, 1.2690509571917332, 1.3252366431597413, 1.383909881963832,
    1.4451808069770467, 1.5091644275934228, 1.5759808451078865, 1.645755478153965,
    1.718619298122478, 1.7947090750031072, 1.8741676341103, 1.9571441241754002};

/* ---- deterministic numbers -------------------------------------------------------------- */

typedef struct rng {
    uint64_t s[4];
} rng;

/* FNV-1a of the name mixed into the seed: the root of one tensor's streams. */
static uint64_t name_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    return seed ^ h;
}

/* The stream of item `index` (a row, an expert) under `key`. The index is hashed first, so
 * the splitmix sequences of neighbouring indices start far apart and do not overlap. */
static void rng_init(rng *r, uint64_t key, uint64_t index)
{
    sl_prng_seed(r->s, key ^ sl_prng_mix64(index + 0x632be59bd9b4e019ull));
}

static uint64_t rng_next(rng *r) { return sl_prng_next(r->s); }

/* Irwin-Hall(4): sum of four U(0,1) minus 2, times sqrt(3): mean 0, variance 1, |g| <= 3.46.
 * Exact binary fractions summed in double, so the result is the same on every machine. */
static double rng_gauss(rng *r)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++) s += (double)(rng_next(r) >> 11) * 0x1p-53;
    return (s - 2.0) * 1.7320508075688772;
}

/* Salts that separate a tensor's other streams from its row streams. */
#define SALT_POOL 0x5bd1e9955bd1e995ull
#define SALT_PICK 0xc2b2ae3d27d4eb4full

/* ---- values ------------------------------------------------------------------------------ */

static bool arch_is_moe(const sl_synth_params *p)
{
    return sl_synth_arch_is_moe(p->arch);
}

/* The reserved channels of the residual stream (synth.c, "Router"): none for a dense model;
 * the bias channel 0 and, with --router-topics N, the topic channels 1 .. N for MoE. */
static int64_t reserved(const sl_synth_params *p)
{
    return arch_is_moe(p) ? 1 + (int64_t)p->router_topics : 0;
}

/* Token v's topic (synth.c, "Temporal locality"). */
static int64_t topic_of(const sl_synth_params *p, int64_t v)
{
    return v / (int64_t)p->topic_run % (int64_t)p->router_topics;
}

/* ne[0] values of a row of kind k from r, before the row-specific rules (zero rows, router
 * columns, topic channel, neuron factor f), with the column rules of the res reserved
 * channels applied. */
static void gen_values(const sl__synth_tensor *t, int64_t res, rng *r, double f, float *out)
{
    const int64_t n = t->ne[0];
    const double scale = f / sqrt((double)n);
    switch (t->k) {
    case SL__K_NORM:
        for (int64_t j = 0; j < n; j++) out[j] = (float)(1.0 + 0.02 * rng_gauss(r));
        break;
    case SL__K_EMBD:
        for (int64_t j = 0; j < n; j++) out[j] = (float)rng_gauss(r);
        for (int64_t j = 0; j < res; j++) out[j] = j ? 0.0f : (float)sqrt((double)(n - 1));
        break;
    case SL__K_OUTPUT:
    case SL__K_IN:
        for (int64_t j = 0; j < n; j++) out[j] = (float)(rng_gauss(r) * scale);
        for (int64_t j = 0; j < res; j++) out[j] = 0.0f;
        break;
    case SL__K_OUT:
        for (int64_t j = 0; j < n; j++) out[j] = (float)(rng_gauss(r) * scale);
        break;
    case SL__K_BIAS:
    case SL__K_BIAS_OUT:
        for (int64_t j = 0; j < n; j++) out[j] = (float)(0.1 * rng_gauss(r));
        for (int64_t j = 0; t->k == SL__K_BIAS_OUT && j < res; j++) out[j] = 0.0f;
        break;
    case SL__K_DECAY:
        for (int64_t j = 0; j < n; j++) out[j] = (float)-exp(0.5 * rng_gauss(r));
        break;
    case SL__K_ROPE_LONG:
    case SL__K_ROPE_SHORT: /* positive, as a frequency divisor must be */
        for (int64_t j = 0; j < n; j++)
            out[j] = (float)(t->k == SL__K_ROPE_LONG
                                 ? 1.0 + 4.0 * (double)j / (double)n + 0.1 * fabs(rng_gauss(r))
                                 : 1.0 + 0.2 * fabs(rng_gauss(r)) / 3.0);
        break;
    case SL__K_ROUTER: {
        /* other dims: total logit noise std 1 given x[j] ~ N(0, 1/2) after RMSNorm */
        const double noise = sqrt(2.0 / (double)(n - 1));
        for (int64_t j = 0; j < n; j++) out[j] = (float)(rng_gauss(r) * noise);
        break;
    }
    }
}

/* Row `row` (< ne[1] * ne[2]) of t, exactly. */
static void gen_row(const sl_synth_params *p, const sl__synth_tensor *t, const sl__synth_prep *s,
                    int64_t row, float *out)
{
    const int64_t n = t->ne[0], res = reserved(p);
    if (t->k == SL__K_OUT && row % t->ne[1] < res) {
        memset(out, 0, (size_t)n * sizeof *out); /* nothing writes the reserved channels */
        return;
    }
    rng r;
    if (t->k == SL__K_OUTPUT && p->router_topics) {
        /* output row v is token v - 1's embedding: the greedy successor of v is v + 1 */
        const int64_t prev = (row + t->ne[1] - 1) % t->ne[1];
        const sl__synth_tensor embd = {.ne = {n, t->ne[1], 1, 1}, .k = SL__K_EMBD};
        rng_init(&r, name_key(p->seed, "token_embd.weight"), (uint64_t)prev);
        gen_values(&embd, res, &r, 1.0, out);
        const double scale = 1.0 / sqrt((double)n);
        for (int64_t j = 0; j < n; j++) out[j] = j < res ? 0.0f : (float)(out[j] * scale);
        return;
    }
    rng_init(&r, s->key, (uint64_t)row);
    gen_values(t, res, &r, s->neuron_scale ? s->neuron_scale[row] : 1.0, out);
    if (t->k == SL__K_EMBD && p->router_topics) {
        out[1 + topic_of(p, row)] = (float)sqrt((double)(n - 1));
        /* louder than what the layers add, so the stream keeps the token for the output */
        for (int64_t j = 0; j < n; j++) out[j] *= (float)SL__SYNTH_TOPIC_EMBD_SCALE;
    }
    if (t->k == SL__K_ROUTER) {
        /* x[c] ~ sqrt(n / 2) after RMSNorm for a reserved channel c that holds sqrt(n - 1) */
        const double x = sqrt((double)n / 2.0);
        out[0] = (float)(s->router_bias[row] / x);
        if (p->router_topics)
            out[1 + s->router_group[row]] = (float)(SL__SYNTH_TOPIC_LOGIT / x);
    }
}

/* Zipf offsets -Z ln(rank) with ranks 1..X in a random order (Fisher-Yates from the tensor's
 * own stream). rank is scratch space for X entries. */
static sl_status router_biases(const sl_synth_params *p, uint64_t key, double *bias,
                               int32_t *group, sl_error *err)
{
    const uint32_t x = p->n_expert;
    uint32_t *rank = malloc((size_t)x * sizeof *rank);
    if (!rank) return sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (router ranks)");
    rng r;
    rng_init(&r, key, UINT64_MAX); /* no row has this index */
    for (uint32_t e = 0; e < x; e++) rank[e] = e + 1;
    for (uint32_t e = x - 1; e > 0; e--) {
        const uint32_t j = (uint32_t)(rng_next(&r) % (e + 1));
        const uint32_t tmp = rank[e];
        rank[e] = rank[j];
        rank[j] = tmp;
    }
    for (uint32_t e = 0; e < x; e++) bias[e] = -p->router_skew * log((double)rank[e]);
    /* topic groups: the same permutation, dealt round-robin (groups differ by at most one) */
    for (uint32_t e = 0; group && e < x; e++)
        group[e] = (int32_t)((rank[e] - 1) % p->router_topics);
    free(rank);
    return SL_OK;
}

/* The neuron factors of t's FFN into f[ne[2]][ne[1]] (see the top of the file). The stream is
 * keyed by the FFN, not the tensor, so gate and up get the same table. */
static void neuron_scales(const sl_synth_params *p, const sl__synth_tensor *t, float *f)
{
    const int64_t n = t->ne[1], x = t->ne[2];
    char ffn[64];
    snprintf(ffn, sizeof ffn, "blk.%d.%s", t->layer,
             t->neurons == SL__NEURONS_SHEXP ? "ffn_neurons_shexp" : "ffn_neurons");
    const uint64_t key = name_key(p->seed, ffn);
    double mean = 0.0;
    for (int64_t k = 1; k <= n; k++) mean += pow((double)k, -p->neuron_skew);
    mean /= (double)n;
    const double norm = 1.0 / sqrt(mean);
    for (int64_t k = 0; k < n; k++)
        f[k] = (float)(pow((double)(k + 1), -0.5 * p->neuron_skew) * norm);
    for (int64_t e = 1; e < x; e++) memcpy(f + e * n, f, (size_t)n * sizeof *f);
    for (int64_t e = 0; e < x; e++) {
        float *fe = f + e * n;
        rng r;
        rng_init(&r, key, (uint64_t)e);
        for (int64_t k = n - 1; k > 0; k--) {
            const int64_t j = (int64_t)(rng_next(&r) % (uint64_t)(k + 1));
            const float tmp = fe[k];
            fe[k] = fe[j];
            fe[j] = tmp;
        }
    }
}

/* ---- pooled rows ------------------------------------------------------------------------- */

/* Byte offsets of the fp16 fields a block's values are linear in; returns how many (0: the
 * type cannot be pooled; -1: it can, but a scaled row must be quantized again). */
static int scale_fields(uint32_t type, size_t off[2])
{
    switch (type) {
    case SL_GGML_Q4_0: off[0] = offsetof(sl_block_q4_0, d); return 1;
    case SL_GGML_Q5_0: off[0] = offsetof(sl_block_q5_0, d); return 1;
    case SL_GGML_Q8_0: off[0] = offsetof(sl_block_q8_0, d); return 1;
    case SL_GGML_Q6_K: off[0] = offsetof(sl_block_q6_K, d); return 1;
    case SL_GGML_IQ4_NL: off[0] = offsetof(sl_block_iq4_nl, d); return 1;
    case SL_GGML_IQ4_XS: off[0] = offsetof(sl_block_iq4_xs, d); return 1;
    case SL_GGML_Q4_1:
        off[0] = offsetof(sl_block_q4_1, d), off[1] = offsetof(sl_block_q4_1, m);
        return 2;
    case SL_GGML_Q5_1:
        off[0] = offsetof(sl_block_q5_1, d), off[1] = offsetof(sl_block_q5_1, m);
        return 2;
    case SL_GGML_Q4_K:
        off[0] = offsetof(sl_block_q4_K, d), off[1] = offsetof(sl_block_q4_K, dmin);
        return 2;
    case SL_GGML_Q5_K:
        off[0] = offsetof(sl_block_q5_K, d), off[1] = offsetof(sl_block_q5_K, dmin);
        return 2;
    case SL_GGML_MXFP4: return -1; /* E8M0: scaled rows pool by levels, see above */
    default: return 0;
    }
}

/* Whether t pools by MXFP4 levels: an MXFP4 pool with neuron factors. */
static bool mxfp4_levels(const sl__synth_tensor *t, const sl__synth_prep *s)
{
    return s->pooled && t->type == SL_GGML_MXFP4 && s->neuron_scale;
}

/* The level of factor f > 0 and its power of two: f ~ 2^*shift * k_mxfp4_level[level]. */
static int mxfp4_level(float f, int *shift)
{
    int ex;
    const double m = 2.0 * frexp((double)f, &ex); /* [1, 2), exact */
    int l = 0;
    while (l < MXFP4_LEVELS && m >= k_mxfp4_mid[l]) l++;
    *shift = ex - 1;
    if (l == MXFP4_LEVELS) {
        l = 0;
        ++*shift;
    }
    return l;
}

/* Adds shift to an MXFP4 block's exponent byte (kept in [1, 254]: finite, never the
 * subnormal pair); an all-zero block (exponent 0) stays as it is. */
static void shift_e8m0(uint8_t *e, int shift)
{
    if (!*e || !shift) return;
    const int v = (int)*e + shift;
    *e = (uint8_t)(v < 1 ? 1 : v > 254 ? 254 : v);
}

/* h * f rounded to fp16, clamped to the largest finite fp16 (65504) with h's sign. */
static void scale_half(uint8_t *p, float f)
{
    uint16_t h;
    memcpy(&h, p, sizeof h);
    uint16_t g = sl_quant_fp32_to_fp16(sl_quant_fp16_to_fp32(h) * f);
    if ((g & 0x7c00u) == 0x7c00u) g = (uint16_t)((g & 0x8000u) | 0x7bffu);
    memcpy(p, &g, sizeof g);
}

static void pooled_rows(const sl__synth_tensor *t, const sl__synth_prep *s, int64_t r0,
                        int64_t r1, uint8_t *dst)
{
    const sl_gguf_type_info *ti = sl_gguf_type_get(t->type);
    const size_t bs = ti->type_size, rb = s->row_bytes;
    const uint64_t nb = (uint64_t)t->ne[0] / ti->block_size;
    size_t off[2];
    const int n_off = scale_fields(t->type, off);
    const bool levels = mxfp4_levels(t, s);
    /* a row picks among the pool rows of its level: every one, or one in MXFP4_LEVELS */
    const uint64_t n_pick = levels ? SL__SYNTH_POOL_ROWS / MXFP4_LEVELS : SL__SYNTH_POOL_ROWS,
                   stride = levels ? MXFP4_LEVELS : 1;
    const uint64_t pick = sl_prng_mix64(s->key ^ SALT_PICK);
    for (int64_t row = r0; row < r1; row++) {
        uint8_t *d = dst + (size_t)(row - r0) * rb;
        if (s->zero_row && row % t->ne[1] < s->zero_rows) {
            memcpy(d, s->zero_row, rb);
            continue;
        }
        const float f = s->neuron_scale ? s->neuron_scale[row] : 1.0f;
        int shift = 0;
        const uint64_t level = levels ? (uint64_t)mxfp4_level(f, &shift) : 0;
        for (uint64_t b = 0; b < nb; b++) {
            const uint64_t h =
                sl_prng_mix64((pick + (uint64_t)row * nb + b) * 0x9e3779b97f4a7c15ull);
            const uint64_t k = level + stride * ((h >> 32) % n_pick);
            memcpy(d + b * bs, s->pool + k * rb + b * bs, bs);
            if (levels) shift_e8m0(d + b * bs + offsetof(sl_block_mxfp4, e), shift);
        }
        if (levels || f == 1.0f) continue;
        for (uint64_t b = 0; b < nb; b++)
            for (int i = 0; i < n_off; i++) scale_half(d + b * bs + off[i], f);
    }
}

/* ---- prep and rows ------------------------------------------------------------------------ */

bool sl__synth_pooled(const sl_synth_params *p, const sl__synth_tensor *t)
{
    size_t off[2];
    const int64_t rows = t->ne[1] * t->ne[2];
    /* topics: the output's rows are the embedding's, value for value */
    if (p->router_topics && (t->k == SL__K_EMBD || t->k == SL__K_OUTPUT)) return false;
    return !p->exact_quant && scale_fields(t->type, off) != 0 &&
           t->ne[0] * rows >= POOL_MIN_WEIGHTS && rows >= POOL_MIN_ROWS;
}

sl_status sl__synth_prep_init(const sl_synth_params *p, const sl__synth_tensor *t,
                              sl__synth_prep *s, sl_error *err)
{
    memset(s, 0, sizeof *s);
    s->key = name_key(p->seed, t->name);
    s->row_bytes = sl_quant_row_bytes(t->type, t->ne[0]);
    s->pooled = sl__synth_pooled(p, t);
    s->n_steps = 1 + (s->pooled ? SL__SYNTH_POOL_ROWS / POOL_CHUNK_ROWS : 0);
    bool ok = true;
    if (t->k == SL__K_ROUTER)
        ok &= (s->router_bias = malloc((size_t)t->ne[1] * sizeof *s->router_bias)) != NULL;
    if (t->k == SL__K_ROUTER && p->router_topics)
        ok &= (s->router_group = malloc((size_t)t->ne[1] * sizeof *s->router_group)) != NULL;
    if (t->neurons != SL__NEURONS_NONE && p->neuron_skew > 0)
        ok &= (s->neuron_scale = malloc((size_t)(t->ne[1] * t->ne[2]) * sizeof(float))) != NULL;
    if (s->pooled) {
        ok &= (s->pool = malloc(SL__SYNTH_POOL_ROWS * s->row_bytes)) != NULL;
        if (t->k == SL__K_OUT && arch_is_moe(p))
            ok &= (s->zero_row = malloc(s->row_bytes)) != NULL;
        s->zero_rows = reserved(p);
    }
    if (!ok) {
        sl__synth_prep_free(s);
        return sl_error_set(err, SL_ERR_NOMEM, "mkmodel: out of memory (%s: tables)", t->name);
    }
    return SL_OK;
}

sl_status sl__synth_prep_step(const sl_synth_params *p, const sl__synth_tensor *t,
                              sl__synth_prep *s, uint32_t step, float *scratch, sl_error *err)
{
    const int64_t n = t->ne[0];
    sl_status st = SL_OK;
    if (step == 0) {
        if (s->router_bias &&
            (st = router_biases(p, s->key, s->router_bias, s->router_group, err)))
            return st;
        if (s->neuron_scale) neuron_scales(p, t, s->neuron_scale);
        if (s->zero_row) {
            memset(scratch, 0, (size_t)n * sizeof *scratch);
            st = sl_quant_row(t->type, scratch, s->zero_row, n, err);
        }
        return st;
    }
    /* pool rows [k0, k0 + POOL_CHUNK_ROWS): the kind's values and column rules, no row rules
     * (zero rows and neuron factors are applied when rows are picked) */
    const uint64_t k0 = (uint64_t)(step - 1) * POOL_CHUNK_ROWS;
    const uint64_t key = s->key ^ SALT_POOL;
    const bool levels = mxfp4_levels(t, s);
    for (uint64_t k = k0; k < k0 + POOL_CHUNK_ROWS && !st; k++) {
        rng r;
        rng_init(&r, key, k);
        gen_values(t, reserved(p), &r, levels ? k_mxfp4_level[k % MXFP4_LEVELS] : 1.0, scratch);
        st = sl_quant_row(t->type, scratch, s->pool + k * s->row_bytes, n, err);
    }
    return st;
}

void sl__synth_prep_free(sl__synth_prep *s)
{
    free(s->router_bias);
    free(s->router_group);
    free(s->neuron_scale);
    free(s->pool);
    free(s->zero_row);
    memset(s, 0, sizeof *s);
}

sl_status sl__synth_rows(const sl_synth_params *p, const sl__synth_tensor *t,
                         const sl__synth_prep *s, int64_t r0, int64_t r1, uint8_t *dst,
                         float *scratch, sl_error *err)
{
    if (s->pooled) {
        pooled_rows(t, s, r0, r1, dst);
        return SL_OK;
    }
    for (int64_t row = r0; row < r1; row++) {
        gen_row(p, t, s, row, scratch);
        const sl_status st =
            sl_quant_row(t->type, scratch, dst + (size_t)(row - r0) * s->row_bytes, t->ne[0], err);
        if (st) return st;
    }
    return SL_OK;
}
