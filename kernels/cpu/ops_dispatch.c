/* CPU feature detection, ISA selection and the validated public entry points of
 * kernels/cpu/ops.h. The wrappers check arguments with the same rules and messages as the
 * references (reusing sl_ref_*_validate where one exists), then call the table's kernel, which
 * checks nothing (ops_impl.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/cpu/ops_impl.h"

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
/* AMX-TILE and AMX-INT8 (CPUID.7.0:EDX bits 24, 25), the tile state in XCR0 (bits 17, 18), and
 * Linux's per-process grant of the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, feature 18): a
 * process that uses the tiles without the grant dies of SIGILL. The grant is idempotent and
 * lasts for the process; a kernel or VM that refuses it leaves the VNNI kernels in use. */
static bool amx_usable(void)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

sl_cpu_features sl_cpu_features_detect(void)
{
    sl_cpu_features f = {0};
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
    /* __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XCR0). */
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    /* clang 14's __builtin_cpu_supports has no "f16c": CPUID.1:ECX bit 29. F16C uses the
     * YMM state, which the avx2 check above already covers on the OS side. */
    unsigned a = 0, b = 0, c = 0, d = 0;
    f.f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.amx_int8 = amx_usable();
#endif
    return f;
}

/* The first feature an ISA needs that f lacks, or NULL if none is missing. */
static const char *missing_feature(sl_cpu_features f, sl_cpu_isa isa)
{
    switch (isa) {
    case SL_CPU_ISA_AVX512:
        if (!f.avx512f) return "avx512f";
        if (!f.avx512bw) return "avx512bw";
        if (!f.avx512vl) return "avx512vl";
        /* fall through: the AVX-512 kernels also use FMA and F16C scalar conversions */
    case SL_CPU_ISA_AVX2:
        if (!f.avx2) return "avx2";
        if (!f.fma) return "fma";
        if (!f.f16c) return "f16c";
        return NULL;
    default:
        return NULL;
    }
}

bool sl_cpu_isa_available(sl_cpu_features f, sl_cpu_isa isa)
{
#if !defined(__x86_64__)
    if (isa == SL_CPU_ISA_AVX2 || isa == SL_CPU_ISA_AVX512) return false;
#endif
    return isa >= SL_CPU_ISA_AUTO && isa < SL_CPU_ISA_COUNT && missing_feature(f, isa) == NULL;
}

static const char *const k_isa_names[SL_CPU_ISA_COUNT] = {
    [SL_CPU_ISA_AUTO] = "auto",
    [SL_CPU_ISA_SCALAR] = "scalar",
    [SL_CPU_ISA_AVX2] = "avx2",
    [SL_CPU_ISA_AVX512] = "avx512",
};

const char *sl_cpu_isa_name(sl_cpu_isa isa)
{
    if ((unsigned)isa >= SL_CPU_ISA_COUNT) return "?";
    return k_isa_names[isa];
}

sl_status sl_cpu_isa_parse(const char *s, sl_cpu_isa *out, sl_error *err)
{
    if (!out) return sl_error_set(err, SL_ERR_INVALID, "cpu isa: out is NULL");
    if (!s) return sl_error_set(err, SL_ERR_INVALID, "cpu isa: name is NULL");
    for (int i = 0; i < SL_CPU_ISA_COUNT; i++) {
        if (strcmp(s, k_isa_names[i]) == 0) {
            *out = (sl_cpu_isa)i;
            return SL_OK;
        }
    }
    return sl_error_set(err, SL_ERR_INVALID,
                        "cpu isa: '%.64s' is not one of auto, scalar, avx2, avx512", s);
}

sl_status sl_cpu_ops_init(sl_cpu_ops *ops, sl_cpu_isa isa, sl_cpu_features f, sl_error *err)
{
    if (!ops) return sl_error_set(err, SL_ERR_INVALID, "cpu ops: ops is NULL");
    if ((unsigned)isa >= SL_CPU_ISA_COUNT)
        return sl_error_set(err, SL_ERR_INVALID, "cpu ops: isa = %d out of range", (int)isa);
    if (isa == SL_CPU_ISA_AUTO) {
        isa = sl_cpu_isa_available(f, SL_CPU_ISA_AVX512) ? SL_CPU_ISA_AVX512
              : sl_cpu_isa_available(f, SL_CPU_ISA_AVX2) ? SL_CPU_ISA_AVX2
                                                          : SL_CPU_ISA_SCALAR;
    }
    if (!sl_cpu_isa_available(f, isa)) {
        const char *m = missing_feature(f, isa);
        return sl_error_set(err, SL_ERR_UNSUPPORTED,
                            "cpu ops: isa %s needs %s, which this CPU lacks", sl_cpu_isa_name(isa),
                            m ? m : "x86-64");
    }
    ops->isa = isa;
    ops->k = &sl__cpu_kernels_scalar;
#if defined(__x86_64__)
    if (isa == SL_CPU_ISA_AVX2) ops->k = &sl__cpu_kernels_avx2;
    if (isa == SL_CPU_ISA_AVX512) ops->k = &sl__cpu_kernels_avx512;
#endif
    return SL_OK;
}

/* ---- validated entry points ------------------------------------------------------------- */

static sl_status check_common(const sl_cpu_ops *ops, int64_t n, const char *fn, sl_error *err)
{
    if (!ops || !ops->k)
        return sl_error_set(err, SL_ERR_INVALID, "%s: ops is NULL or not initialised", fn);
    if (n < 0) return sl_error_set(err, SL_ERR_INVALID, "%s: n = %lld < 0", fn, (long long)n);
    return SL_OK;
}

#define CHECK_PTR(p, name)                                                                    \
    do {                                                                                      \
        if (!(p)) return sl_error_set(err, SL_ERR_INVALID, "%s: %s is NULL", __func__, name);  \
    } while (0)

sl_status sl_cpu_rms_norm(const sl_cpu_ops *ops, const float *x, const float *w, float *y,
                          int64_t n, float eps, bool one_plus_w, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (!(eps >= 0.0f) || !isfinite(eps))
        return sl_error_set(err, SL_ERR_INVALID, "%s: eps = %g must be finite and >= 0",
                            __func__, (double)eps);
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    CHECK_PTR(y, "y");
    ops->k->rms_norm(x, w, y, n, eps, one_plus_w);
    return SL_OK;
}

sl_status sl_cpu_softmax(const sl_cpu_ops *ops, float *x, int64_t n, float scale,
                         const float *mask, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (!isfinite(scale))
        return sl_error_set(err, SL_ERR_INVALID, "%s: scale = %g is not finite", __func__,
                            (double)scale);
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    ops->k->softmax(x, n, scale, mask);
    return SL_OK;
}

sl_status sl_cpu_silu(const sl_cpu_ops *ops, const float *x, float *y, int64_t n,
                      sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    CHECK_PTR(y, "y");
    ops->k->silu(x, y, n);
    return SL_OK;
}

sl_status sl_cpu_swiglu(const sl_cpu_ops *ops, const float *gate, const float *up, float *out,
                        int64_t n, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(gate, "gate");
    CHECK_PTR(up, "up");
    CHECK_PTR(out, "out");
    ops->k->swiglu(gate, up, out, n);
    return SL_OK;
}

sl_status sl_cpu_swiglu_oai(const sl_cpu_ops *ops, const float *gate, const float *up,
                            float *out, int64_t n, float alpha, float limit, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(gate, "gate");
    CHECK_PTR(up, "up");
    CHECK_PTR(out, "out");
    for (int64_t i = 0; i < n; i++) {
        const float g = fminf(gate[i], limit), u = fmaxf(fminf(up[i], limit), -limit);
        out[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
    return SL_OK;
}

/* The reference's rule and message (kernels/ref/ops.c check_gelu_kind). */
static sl_status check_gelu_kind(sl_gelu_kind kind, const char *fn, sl_error *err)
{
    if (kind != SL_GELU_TANH && kind != SL_GELU_ERF)
        return sl_error_set(err, SL_ERR_INVALID, "%s: kind = %d is not TANH (0) or ERF (1)", fn,
                            (int)kind);
    return SL_OK;
}

sl_status sl_cpu_gelu(const sl_cpu_ops *ops, const float *x, float *y, int64_t n,
                      sl_gelu_kind kind, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (check_gelu_kind(kind, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    CHECK_PTR(y, "y");
    ops->k->geglu(x, NULL, y, n, kind);
    return SL_OK;
}

sl_status sl_cpu_geglu(const sl_cpu_ops *ops, const float *gate, const float *up, float *out,
                       int64_t n, sl_gelu_kind kind, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (check_gelu_kind(kind, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(gate, "gate");
    CHECK_PTR(up, "up");
    CHECK_PTR(out, "out");
    ops->k->geglu(gate, up, out, n, kind);
    return SL_OK;
}

/* p's checks for rows of head_dim, with the angle table's limit. */
static sl_status rope_check(const sl_rope_params *p, int32_t head_dim, const char *fn,
                            sl_error *err)
{
    sl_status st = sl_ref_rope_validate(p, head_dim, err);
    if (st) return st;
    if (p->n_rot > SL_CPU_ROPE_MAX_ROT)
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: n_rot = %d > %d (angle table limit)",
                            fn, p->n_rot, SL_CPU_ROPE_MAX_ROT);
    return SL_OK;
}

/* The checks of a rope over x [n_tokens][n_head][head_dim] (x only when there is work). */
static sl_status rope_x_check(const sl_cpu_ops *ops, const float *x, int64_t n_tokens,
                              int32_t n_head, int32_t head_dim, const sl_rope_params *p,
                              const char *fn, sl_error *err)
{
    if (check_common(ops, n_tokens, fn, err)) return SL_ERR_INVALID;
    if (n_head < 0) return sl_error_set(err, SL_ERR_INVALID, "%s: n_head = %d < 0", fn, n_head);
    sl_status st = rope_check(p, head_dim, fn, err);
    if (st) return st;
    if (n_tokens && n_head && !x) return sl_error_set(err, SL_ERR_INVALID, "%s: x is NULL", fn);
    return SL_OK;
}

/* The angles are built in double by the reference, so there is one definition of them,
 * rounded once to float: corr and the pow of each pair once per call, then one row per token. */
typedef struct rope_angles {
    float corr[2];
    double pw[SL_CPU_ROPE_MAX_ROT / 2];
} rope_angles;

static void rope_angles_init(const sl_rope_params *p, rope_angles *a)
{
    sl_ref_rope_corr_dims(p, a->corr);
    for (int32_t i = 0; i < p->n_rot / 2; i++) a->pw[i] = sl_ref_rope_pow(p, i);
}

/* The table of position pos into cs [2 * n_rot] (NEOX leaves the halves it does not read);
 * p checked. */
static void rope_table_row(const sl_rope_params *p, const rope_angles *a, int32_t pos,
                           float *cs)
{
    const int32_t nr = p->n_rot;
    for (int32_t i = 0; i < nr / 2; i++) {
        double c, s;
        sl_ref_rope_cos_sin_pow(p, a->corr, pos, i, a->pw[i], &c, &s);
        if (p->mode == SL_ROPE_NEOX) {
            cs[i] = (float)c;
            cs[nr + i] = (float)s;
        } else {
            cs[2 * i] = cs[2 * i + 1] = (float)c;
            cs[nr + 2 * i] = (float)-s;
            cs[nr + 2 * i + 1] = (float)s;
        }
    }
}

/* x [n_tokens][n_head][head_dim] rotated by the tables cs [n_tokens][2 * n_rot]; checked. */
static void rotate(const sl_cpu_ops *ops, float *x, int64_t n_tokens, int32_t n_head,
                   int32_t head_dim, const sl_rope_params *p, const float *cs)
{
    const size_t row = (size_t)n_head * (size_t)head_dim, nr = (size_t)p->n_rot;
    for (int64_t t = 0; t < n_tokens; t++)
        ops->k->rope_rows(x + (size_t)t * row, n_head, head_dim, p->n_rot, p->mode,
                          cs + (size_t)t * 2 * nr);
}

sl_status sl_cpu_rope_table(const sl_rope_params *p, int64_t n_tokens, const int32_t *pos,
                            float *cs, sl_error *err)
{
    if (n_tokens < 0)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tokens = %lld < 0", __func__,
                            (long long)n_tokens);
    sl_status st = rope_check(p, p ? p->n_rot : 0, __func__, err);
    if (st || n_tokens == 0) return st;
    CHECK_PTR(pos, "pos");
    CHECK_PTR(cs, "cs");
    rope_angles a;
    rope_angles_init(p, &a);
    const int32_t nr = p->n_rot;
    for (int64_t t = 0; t < n_tokens; t++) {
        float *row = cs + t * 2 * nr;
        if (p->mode == SL_ROPE_NEOX) { /* the halves NEOX does not read: tables compare whole */
            memset(row + nr / 2, 0, (size_t)(nr / 2) * sizeof *row);
            memset(row + nr + nr / 2, 0, (size_t)(nr / 2) * sizeof *row);
        }
        rope_table_row(p, &a, pos[t], row);
    }
    return SL_OK;
}

sl_status sl_cpu_rope_apply(const sl_cpu_ops *ops, float *x, int64_t n_tokens, int32_t n_head,
                            int32_t head_dim, const sl_rope_params *p, const float *cs,
                            sl_error *err)
{
    sl_status st = rope_x_check(ops, x, n_tokens, n_head, head_dim, p, __func__, err);
    if (st || n_tokens == 0 || n_head == 0) return st;
    CHECK_PTR(cs, "cs");
    rotate(ops, x, n_tokens, n_head, head_dim, p, cs);
    return SL_OK;
}

sl_status sl_cpu_rope(const sl_cpu_ops *ops, float *x, int64_t n_tokens, int32_t n_head,
                      int32_t head_dim, const int32_t *pos, const sl_rope_params *p,
                      sl_error *err)
{
    sl_status st = rope_x_check(ops, x, n_tokens, n_head, head_dim, p, __func__, err);
    if (st || n_tokens == 0 || n_head == 0) return st;
    CHECK_PTR(pos, "pos");
    /* one token's table at a time: no allocation */
    float cs[2 * SL_CPU_ROPE_MAX_ROT];
    rope_angles a;
    rope_angles_init(p, &a);
    for (int64_t t = 0; t < n_tokens; t++) {
        rope_table_row(p, &a, pos[t], cs);
        rotate(ops, x + (size_t)t * (size_t)n_head * (size_t)head_dim, 1, n_head, head_dim, p, cs);
    }
    return SL_OK;
}

sl_status sl_cpu_attn_decode(const sl_cpu_ops *ops, const float *q, const void *k,
                             const void *v, const sl_attn_params *p, float *out, sl_error *err)
{
    if (check_common(ops, 0, __func__, err)) return SL_ERR_INVALID;
    sl_status st = sl_ref_attn_validate(p, err);
    if (st) return st;
    CHECK_PTR(q, "q");
    CHECK_PTR(k, "k");
    CHECK_PTR(v, "v");
    CHECK_PTR(out, "out");
    ops->k->attn_decode(q, k, v, p, out);
    return SL_OK;
}

static bool attn_tiled(const sl_cpu_ops *ops, const sl_attn_params *p)
{
    return ops->k->attn_prefill && p->head_dim <= SL_CPU_ATTN_TILE_MAX_D;
}

int64_t sl_cpu_attn_prefill_tiles(const sl_cpu_ops *ops, const sl_attn_params *p,
                                  int64_t n_tok)
{
    if (!ops || !ops->k || !p || n_tok < 1 || p->n_head < 1 || p->n_kv_head < 1 ||
        p->n_head % p->n_kv_head)
        return 0;
    return attn_tiled(ops, p) ? sl__attn_tiles(p, n_tok, ops->k->attn_rows) : n_tok;
}

sl_status sl_cpu_attn_prefill(const sl_cpu_ops *ops, const float *q, const void *k,
                              const void *v, const sl_attn_params *p, const int32_t *pos,
                              int64_t n_tok, int64_t tile0, int64_t tile1, float *out,
                              sl_error *err)
{
    if (check_common(ops, 0, __func__, err)) return SL_ERR_INVALID;
    sl_status st = sl_ref_attn_validate(p, err);
    if (st) return st;
    CHECK_PTR(q, "q");
    CHECK_PTR(k, "k");
    CHECK_PTR(v, "v");
    CHECK_PTR(pos, "pos");
    CHECK_PTR(out, "out");
    if (n_tok < 1)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_tok = %lld < 1", __func__,
                            (long long)n_tok);
    const int64_t n_tiles = sl_cpu_attn_prefill_tiles(ops, p, n_tok);
    if (tile0 < 0 || tile0 > tile1 || tile1 > n_tiles)
        return sl_error_set(err, SL_ERR_INVALID, "%s: tiles [%lld, %lld) outside [0, %lld)",
                            __func__, (long long)tile0, (long long)tile1, (long long)n_tiles);
    for (int64_t t = 0; t < n_tok; t++)
        if (pos[t] < 0 || pos[t] >= p->n_pos)
            return sl_error_set(err, SL_ERR_INVALID, "%s: pos[%lld] = %d outside [0, n_pos = %d)",
                                __func__, (long long)t, pos[t], p->n_pos);
    const size_t qd = (size_t)p->n_head * (size_t)p->head_dim;
    for (int64_t i = tile0; i < tile1; i++) {
        if (attn_tiled(ops, p)) {
            ops->k->attn_prefill(q, k, v, p, pos, n_tok, i, out);
        } else {
            sl_attn_params pt = *p;
            pt.n_pos = pos[i] + 1;
            ops->k->attn_decode(q + (size_t)i * qd, k, v, &pt, out + (size_t)i * qd);
        }
    }
    return SL_OK;
}

sl_status sl_cpu_to_f16(const sl_cpu_ops *ops, const float *x, uint16_t *y, int64_t n,
                        sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    CHECK_PTR(y, "y");
    ops->k->to_f16(x, y, n);
    return SL_OK;
}

sl_status sl_cpu_add(const sl_cpu_ops *ops, const float *a, const float *b, float *y,
                     int64_t n, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(a, "a");
    CHECK_PTR(b, "b");
    CHECK_PTR(y, "y");
    ops->k->add(a, b, y, n);
    return SL_OK;
}

sl_status sl_cpu_mul(const sl_cpu_ops *ops, const float *a, const float *b, float *y,
                     int64_t n, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(a, "a");
    CHECK_PTR(b, "b");
    CHECK_PTR(y, "y");
    ops->k->mul(a, b, y, n);
    return SL_OK;
}

sl_status sl_cpu_scale(const sl_cpu_ops *ops, float *x, int64_t n, float s, sl_error *err)
{
    if (check_common(ops, n, __func__, err)) return SL_ERR_INVALID;
    if (n == 0) return SL_OK;
    CHECK_PTR(x, "x");
    ops->k->scale(x, n, s);
    return SL_OK;
}
