/* kernels/cpu/ops: fast CPU versions of the layer ops of kernels/ref/ops.h (same definitions,
 * same parameter structs), with run-time selection of the instruction set.
 *
 * Dispatch design: no global mutable state. sl_cpu_features_detect() reads cpuid (through
 * __builtin_cpu_supports) and returns a value; sl_cpu_ops_init() turns features + a requested
 * ISA into an sl_cpu_ops value that points at one of three static const kernel tables (scalar C,
 * AVX2+FMA+F16C, AVX-512 F/BW/VL). The caller keeps that value in its context (engine, thread
 * pool worker) and passes it to every op, so the choice is made once and costs one indirect
 * call per op. Every ISA's code is compiled in with per-function target attributes, so the
 * library builds with default flags and a binary runs on any x86-64; on other architectures only
 * the scalar table exists.
 *
 * Forcing a path (tests, bisecting a numerical difference): sl_cpu_ops_init(ISA) refuses an ISA
 * the CPU lacks (SL_ERR_UNSUPPORTED); the engine takes the ISA from SLUICE_CPU_ISA =
 * auto|scalar|avx2|avx512 (runtime/engine/env.c; unset or empty: auto).
 *
 * Numerics: all paths compute in float with several partial sums (reductions reassociate), exp
 * by a Cephes-style polynomial (~2 ulp) in the SIMD paths and libm expf in the scalar path, so
 * results differ from the double references by a few ulp per element; tests/kernels/ops_test.c
 * states and checks each op's tolerance. Different ISAs may differ in the last bits.
 * GELU is evaluated in forms without cancellation, so the relative error holds in the negative
 * tail too: tanh form x / (1 + e^(-2u)) (= 0.5 x (1 + tanh u)), erf form 0.5 x erfc(-x / sqrt 2)
 * with erfc = t e^(-z^2 + P(t)), t = 1 / (1 + z / 2) (Numerical Recipes' erfcc, relative error
 * < 1.2e-7) in the SIMD paths and libm erfcf in the scalar path.
 *
 * Contracts of the ops are those of the sl_ref_* function of the same name (argument checks,
 * aliasing, the fully masked softmax row). Extra limits: sl_cpu_rope needs n_rot <=
 * SL_CPU_ROPE_MAX_ROT (SL_ERR_UNSUPPORTED otherwise). The ops never allocate.
 * Thread safety: an sl_cpu_ops is immutable after init and may be shared by threads.
 */
#ifndef SL_KERNELS_CPU_OPS_H
#define SL_KERNELS_CPU_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/ref/ops.h"
#include "base/status.h"

/* SL_CPU_ATTN_TILE_MAX_D: the widest head the tiled attention takes (its frame, ~4 x 32 rows
 * of it in floats: ~300 KiB at 576): deepseek2's MLA heads, the latent row kv_lora_rank 512 +
 * rope 64 (DeepSeek-V2/V3/R1, Kimi-K2), which ran per token through sl_cpu_attn_decode at 256
 * (a 4-layer deepseek2 file of 544-wide heads, prompt 1 thread: see the closing note) */
enum { SL_CPU_ROPE_MAX_ROT = 1024, SL_CPU_ATTN_TILE_MAX_D = 576 };

/* What the CPU (and OS, for the AVX register state) supports. All false off x86-64. */
typedef struct sl_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl;
    bool avx512bf16, avx512vnni; /* not used by these ops; recorded for the matvec kernels */
    /* AMX-TILE + AMX-INT8, their state enabled by the OS (XCR0) and granted to this process
     * (arch_prctl ARCH_REQ_XCOMP_PERM, asked by sl_cpu_features_detect): the matvec batch
     * kernels' tile path (kernels/cpu/gemm_k_amx.c) */
    bool amx_int8;
} sl_cpu_features;

typedef enum sl_cpu_isa {
    SL_CPU_ISA_AUTO = 0, /* the best available: AVX-512, else AVX2, else scalar */
    SL_CPU_ISA_SCALAR,   /* portable C; always available */
    SL_CPU_ISA_AVX2,     /* needs avx2 + fma + f16c */
    SL_CPU_ISA_AVX512,   /* needs avx512f + avx512bw + avx512vl (+ fma, f16c) */
    SL_CPU_ISA_COUNT
} sl_cpu_isa;

/* Private kernel table (kernels/cpu/ops_impl.h). */
typedef struct sl__cpu_kernels sl__cpu_kernels;

/* A resolved dispatch: isa is never AUTO. Copyable value; valid for the process lifetime. */
typedef struct sl_cpu_ops {
    sl_cpu_isa isa;
    const sl__cpu_kernels *k;
} sl_cpu_ops;

/* Reads cpuid; cheap enough to call at context creation, not meant for per-op calls. */
sl_cpu_features sl_cpu_features_detect(void);
/* True if f allows the ISA (AUTO and SCALAR: always). */
bool sl_cpu_isa_available(sl_cpu_features f, sl_cpu_isa isa);
/* "auto", "scalar", "avx2", "avx512"; "?" for an out-of-range value. Never NULL. */
const char *sl_cpu_isa_name(sl_cpu_isa isa);
/* Parses one of the names above (exact, lower case) into *out; SL_ERR_INVALID naming the
 * string otherwise. */
sl_status sl_cpu_isa_parse(const char *s, sl_cpu_isa *out, sl_error *err);

/* Fills *ops for isa given features f (AUTO picks the best). SL_ERR_UNSUPPORTED naming the
 * missing feature if f lacks it; SL_ERR_INVALID for an out-of-range isa or NULL ops. */
sl_status sl_cpu_ops_init(sl_cpu_ops *ops, sl_cpu_isa isa, sl_cpu_features f, sl_error *err);

/* ---- ops (see kernels/ref/ops.h for each definition) ---------------------------------- */

sl_status sl_cpu_rms_norm(const sl_cpu_ops *ops, const float *x, const float *w, float *y,
                          int64_t n, float eps, bool one_plus_w, sl_error *err);
sl_status sl_cpu_softmax(const sl_cpu_ops *ops, float *x, int64_t n, float scale,
                         const float *mask, sl_error *err);
sl_status sl_cpu_silu(const sl_cpu_ops *ops, const float *x, float *y, int64_t n,
                      sl_error *err);
sl_status sl_cpu_swiglu(const sl_cpu_ops *ops, const float *gate, const float *up, float *out,
                        int64_t n, sl_error *err);
/* Scalar on every ISA: it runs over the n_ff outputs of an expert, next to matvecs over
 * n_ff * n_embd weights, so vectorising it would not show. */
sl_status sl_cpu_swiglu_oai(const sl_cpu_ops *ops, const float *gate, const float *up,
                            float *out, int64_t n, float alpha, float limit, sl_error *err);
sl_status sl_cpu_gelu(const sl_cpu_ops *ops, const float *x, float *y, int64_t n,
                      sl_gelu_kind kind, sl_error *err);
sl_status sl_cpu_geglu(const sl_cpu_ops *ops, const float *gate, const float *up, float *out,
                       int64_t n, sl_gelu_kind kind, sl_error *err);
/* In place over x [n_tokens][n_head][head_dim]. The angle table of each token is built in
 * double by sl_ref_rope_cos_sin and rounded to float; only the rotation is vectorised. */
sl_status sl_cpu_rope(const sl_cpu_ops *ops, float *x, int64_t n_tokens, int32_t n_head,
                      int32_t head_dim, const int32_t *pos, const sl_rope_params *p,
                      sl_error *err);
/* sl_cpu_rope in two steps, for a caller that ropes several tensors (q and k, every layer of
 * one rope configuration) at the same positions: the angle tables of n_tokens positions into
 * cs [n_tokens][2 * n_rot] (the layout of kernels/cpu/ops_impl.h), then the rotation of x by
 * them. Together the same bits as sl_cpu_rope; p's checks as there (table: head_dim = n_rot).
 * apply cannot tell how cs was built: it must come from sl_cpu_rope_table with the same mode
 * and n_rot (runtime/rope_cache keys its tables by every field of p). */
sl_status sl_cpu_rope_table(const sl_rope_params *p, int64_t n_tokens, const int32_t *pos,
                            float *cs, sl_error *err);
sl_status sl_cpu_rope_apply(const sl_cpu_ops *ops, float *x, int64_t n_tokens, int32_t n_head,
                            int32_t head_dim, const sl_rope_params *p, const float *cs,
                            sl_error *err);
/* Online (blockwise) softmax over the cache, one pass over K and V, the q heads that share a
 * kv head processed together so each K/V row is read from memory once. out is the
 * accumulator, so it must not overlap q, k or v. */
sl_status sl_cpu_attn_decode(const sl_cpu_ops *ops, const float *q, const void *k,
                             const void *v, const sl_attn_params *p, float *out, sl_error *err);
/* A prompt's attention, tiled (flash attention): n_tok queries q [n_tok][n_head][head_dim],
 * query t at cache position pos[t] (0 <= pos[t] < p->n_pos) attending to positions
 * 0 .. pos[t] (the last p->window of them with a window), every query's K and V already in the
 * cache; p->n_pos is the cache length read. The work is numbered in tiles (groups of queries of
 * one kv head that share each K/V row read): sl_cpu_attn_prefill_tiles gives their count,
 * sl_cpu_attn_prefill computes tiles [tile0, tile1) into their rows of out [n_tok][n_head]
 * [head_dim], so threads may take disjoint tile ranges of one call. Same results as
 * sl_cpu_attn_decode per token up to float summation order. A head_dim above
 * SL_CPU_ATTN_TILE_MAX_D runs sl_cpu_attn_decode per token (a tile is then one token). */
int64_t sl_cpu_attn_prefill_tiles(const sl_cpu_ops *ops, const sl_attn_params *p,
                                  int64_t n_tok);
sl_status sl_cpu_attn_prefill(const sl_cpu_ops *ops, const float *q, const void *k,
                              const void *v, const sl_attn_params *p, const int32_t *pos,
                              int64_t n_tok, int64_t tile0, int64_t tile1, float *out,
                              sl_error *err);
/* y[i] = x[i] in IEEE binary16, rounded to nearest even (kernels/ref/quant.h's
 * sl_quant_fp32_to_fp16, bit for bit: F16C's conversion on the SIMD paths): a KV cache row. */
sl_status sl_cpu_to_f16(const sl_cpu_ops *ops, const float *x, uint16_t *y, int64_t n,
                        sl_error *err);
sl_status sl_cpu_add(const sl_cpu_ops *ops, const float *a, const float *b, float *y,
                     int64_t n, sl_error *err);
sl_status sl_cpu_mul(const sl_cpu_ops *ops, const float *a, const float *b, float *y,
                     int64_t n, sl_error *err);
sl_status sl_cpu_scale(const sl_cpu_ops *ops, float *x, int64_t n, float s, sl_error *err);

#endif
