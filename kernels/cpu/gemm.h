/* kernels/cpu/gemm.h: module-private interface of the batch (prefill) kernels of
 * kernels/cpu/matvec: a range of weight rows against many tokens' quantized activations.
 *
 * Contract: a kernel writes y[b * y_stride + out] = dot(W row, X[b]) for every row of its range
 * and b < n_tok with the same bits as the reference (kernels/ref/matvec.h's order: exact
 * integer block sums, float block terms added to lane b % 8, then the 8-lane reduction). It
 * unpacks each weight block once per group of tokens (not once per token) and computes the
 * float terms of 8 tokens in one vector, keeping every (row, token) accumulation in the
 * reference's order. Kernels check nothing (matvec.c validated the call) and use only the
 * stack (tens of KiB; the AVX-512 VNNI kernels more: gemm_k_vnni_tmpl.h's ~310 KiB: a call's
 * unpacked rows, gemm_few32_vnni_tmpl.h's ~80 KiB: its 16 tokens' panels and a row group's
 * lanes, gemm_k_amx.c's ~560 KiB: the rows, 4 token groups' lanes, gemm_float.c's
 * ~112 KiB: a row block's floats and lanes; the pool's threads have
 * the default stack size, 8 MiB under the usual RLIMIT_STACK). Compiled
 * per ISA from gemm_x86_tmpl.h and gemm_k_x86_tmpl.h, included by matvec_avx2.c /
 * matvec_avx512.c after matvec_x86_tmpl.h, whose helpers they reuse; the AVX-512 build adds
 * the VNNI kernels of the K-quants (gemm_k_vnni_tmpl.h), of the 32-element types
 * (gemm_few32_vnni_tmpl.h) and the few-token kernel of the K-quants (gemm_few_vnni_tmpl.h:
 * ~35 KiB of stack); the float types' kernel (gemm_float.c: F32, F16, BF16 in the reference's
 * 32 float lanes) needs AVX-512 F alone. */
#ifndef SL_KERNELS_CPU_GEMM_H
#define SL_KERNELS_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ref/matvec_impl.h"

/* Rows [i0, i1) of a call: row r = idx ? idx[i] : i of W (rows wrb bytes apart, nb blocks)
 * against n_tok activation rows (arb bytes apart); the result of row r, token b goes to
 * y[b * y_stride + out] with out = i for a compact gathered call (idx and !scatter), else r. */
typedef struct sl__gemm_rows {
    const char *w, *xq;
    /* wrb, arb: bytes of a weight and of an activation row; xb: of an activation block
     * (the type's act_bytes: Q8_K's 292, IQ1_M's Q8_K8 356) */
    size_t wrb, arb, xb;
    int64_t nb, n_tok, y_stride;
    const int32_t *idx;
    bool scatter;
    float *y;
    /* the AVX-512 VNNI kernels may run their multiply-adds on AMX tiles (sl_cpu_matvec_ctx.amx:
     * the CPU has them and the process was granted them); the same bits either way */
    bool amx;
    /* The call's activation panels built once for all its rows (sl__gemm_k_panels_avx512:
     * pan_np panels of 16 tokens from token 0, of x + 128 when pan_plus128), which the K-quant
     * VNNI and tile kernels read when it is the form they take; NULL: each kernel call builds
     * its own, per block of rows (and per row group where rows pass GKV_PCH super-blocks). A
     * call of fewer tokens than they were built for reads them too (the spare slots of its
     * last panel then hold later tokens, whose results are dropped as the repeats' are). */
    const void *pan;
    int64_t pan_np;
    bool pan_plus128;
} sl__gemm_rows;

typedef void (*sl__gemm_fn)(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0,
                            int64_t i1);

/* The rule for a batch's leftover tokens, the one all panel callers apply (matvec.c's K-quant
 * rows, gemm_x86_tmpl.h's MXFP4/Q4_0 rows on AVX2): sl__gemm_tail(n_tok, few) tokens, the
 * batch's last, go past the panel kernel, the rest to it.
 * - Without a few-token kernel (few false): the n_tok % 8 tokens past the last full 8-token
 *   panel go to a row kernel, one token at a time, when they are at most SL__GEMM_TAIL_MAX. A
 *   short panel costs a full one (its spare slots repeat a token), while the row kernel's cost
 *   grows with the tokens: a panel costs what ~3.3 tokens of the K-quant range kernel do (Q4_K
 *   512 x 1024 on AVX2: 91 us a panel, 27.7 us a token) and ~5 of the MXFP4/Q4_0 row kernel
 *   (AVX2 on Zen 4). 3 is the most tokens that beat a panel for both; MoE experts' batches
 *   often end a few tokens past a multiple of 8.
 * - With one (few: sl__gemm_few_avx512, the K-quants and IQ4_XS on AVX-512 VNNI): a batch of at
 *   most SL__GEMM_FEW_MAX tokens goes to it whole, else the n_tok % 32 past gemm_kv's last full
 *   32-token group (two 16-token panels) when they are at most SL__GEMM_FEW_MAX; of those a lone
 *   token takes the decode row kernel (the caller's choice: the row kernel at 1 token costs
 *   half what a 2-token call of the kernel does). gemm_bench, one thread, CPU time, min of 40
 *   (us; 2, 3, 4, 8 tokens; the kernel / gemm_k's 8-token panels / the row kernel a token,
 *   CHUNK 64): IQ4_XS 768x768 49 57 59 73 / 155 163 164 164 / 55 80 109 218; IQ4_XS 384x768
 *   23 29 29 36 / 75 81 80 81 / 27 43 57 108; Q5_K 256x1024 26 23 23 32 / 37 37 37 38 / 26
 *   38 51 101; Q5_K 1024x256 28 26 26 35 / 48 49 50 54 / 28 42 55 110; Q6_K 768x1024 57 61 62
 *   86 / 111 111 112 115 / 57 86 114 227; Q6_K 1024x768 59 61 62 121 / 113 114 115 192 / 60
 *   90 119 313. Past 8 tokens (IQ4_XS 768x768, Q6_K 768x1024): a last 32-token group of 1..8
 *   tokens takes a whole 16-token panel (32 -> 36..40 tokens: +80 us on IQ4_XS), and the
 *   kernel on those ran 1.03-1.07x faster than gemm_kv; a group of 17..24 shares its first
 *   panel's weights (16 + 8 through the kernel: 0.84-0.91x), 9..16 tokens break even.
 *   But a lone token past 16 (n_tok % 32 == 17) costs a whole second panel: the row kernel
 *   takes it (16 + 1 against 17 in two panels: 1.04-1.25x faster at 17 tokens, 1.0-1.15x at
 *   49, all four types, the sweep's shapes 768x768 256x1024 1024x256 768x1024 1024x768
 *   1536x768, gemm_bench CHUNK 256, min of 75). 9 tokens as 8 + 1 (the kernel, the row
 *   kernel) ran no faster than one panel (IQ4_XS 0.99-1.03x, Q6_K 0.93-0.99x; Q4_K, Q5_K
 *   0.85-1.15x), nor 18..20 as 16 + 2..4 through the kernel (IQ4_XS 0.97-1.09x, Q6_K
 *   0.95-1.03x, Q4_K and Q5_K 0.86-0.98x; 768x768 1024x768 256x1024).
 * The same bits either way. */
enum { SL__GEMM_TAIL_MAX = 3, SL__GEMM_FEW_MAX = 8 };

/* The K-quant batch kernel's AMX tile path (gemm_k_amx.c) takes calls of at least this many
 * tokens whose rows come in 16s (matvec.c then cuts row chunks in 16s, and gemm_kv splits even
 * one token group into blocks its once-unpack holds), whole: no tail to the few-token or row
 * kernel, which would unpack the rows again. Tiles vs the VNNI kernel, gemm_bench, 1 thread,
 * median us, row chunks of 64 and 256, the sweep's shapes (IQ4_XS 768x768 and 1536x768, Q6_K
 * 768x1024, Q5_K 1024x256 and 256x1024, Q4_K 768x2048), the rows unpacked straight into the
 * tiles' bytes: 17-32 tokens 1.04-1.29x (Q5_K 1024x256 at chunks of 64: 0.99-1.00x), 33-48
 * 1.14-1.43x, 64 1.17-1.44x, 128 1.19-1.56x; 12-16 tokens 0.78-1.41x (Q5_K and Q4_K slower:
 * the rows' unpack costs more than the tiles save). */
enum { SL__GEMM_AMX_MIN_TOK = 17 };
static inline bool sl__gemm_amx_batch(bool amx, int64_t n_tok)
{
    return amx && n_tok >= SL__GEMM_AMX_MIN_TOK;
}
static inline bool sl__gemm_amx_takes(bool amx, int64_t n_tok, int64_t rows)
{
    return sl__gemm_amx_batch(amx, n_tok) && rows % 16 == 0;
}
static inline int64_t sl__gemm_tail(int64_t n_tok, bool few)
{
    if (!few) return n_tok % 8 <= SL__GEMM_TAIL_MAX ? n_tok % 8 : 0;
    if (n_tok <= SL__GEMM_FEW_MAX) return n_tok;
    if (n_tok % 32 == 17) return 1;
    return n_tok % 32 <= SL__GEMM_FEW_MAX ? n_tok % 32 : 0;
}

/* The AVX-512 VNNI kernel of the 32-element types (gemm_few32_vnni_tmpl.h) takes a batch in
 * passes of SL__GEMM_VNNI_PASS tokens (1..4 panels of 4, so the last pass costs what its tokens
 * need); of a last pass of one token, which the decode path's whole-row kernel does for ~0.75x
 * (IQ4_NL 768x384: 15 vs 20 us), sl__gemm_vnni_few(n_tok) tokens, the batch's last, go to that
 * instead, one at a time (the same bits). It replaced 16-token panels (a 256-bit half for a
 * lone last one of at most 8) that cost as much at 3 tokens as at 8 (their batches of 1-2
 * tokens, 1-2 past a full panel, went to the row kernel): gemm_bench, one thread, CPU time,
 * min us, old / new, 2, 4, 8, 16, 64 tokens: IQ4_NL 768x384 29.6 / 21.1, 48 / 22, 52 / 33,
 * 64 / 48, 217 / 189; Q8_0 768x1024 60 / 50, 105 / 52, 107 / 69, 134 / 130 (12: 135 / 86);
 * MXFP4 1408x1024 9..12 tokens 233 / 153, 512 tokens (2880x2880) 73951 / 61320. */
enum { SL__GEMM_VNNI_PASS = 16 };
static inline int64_t sl__gemm_vnni_few(int64_t n_tok)
{
    return n_tok % SL__GEMM_VNNI_PASS == 1;
}

/* The K-quant batch kernel's block on AMX tiles (Q4_K, Q4_K_R8, Q5_K, Q6_K, IQ4_XS; gemm_kv's
 * bits): rows [i0, i1) of a, a multiple of 16, when sl__gemm_amx_takes(a->amx, a->n_tok, i1 -
 * i0) (rows of any length: those its once-unpack does not hold are walked in pieces). Its own
 * file so that the AVX-512 file's compile stays short; false where this build has no tile
 * code (then nothing ran). */
bool sl__gemm_k_amx(const sl__mv_type *t, const sl__gemm_rows *a, int64_t i0, int64_t i1);

/* Super-blocks of a K-quant kernel's panel chunk (gemm_k_vnni_tmpl.h's GKV_PCH: 2048
 * elements, qwen3moe's expert down rows): a call builds the panels of rows of at most this
 * many once per token group, of longer rows once per 32-row group and chunk. */
enum { SL__GEMM_K_PCH = 8 };

/* The K-quant kernels' activation panels built once per call (gemm_k_vnni_tmpl.h; matvec.c
 * builds them for a GEMM of more than SL__GEMM_FEW_MAX tokens on rows of more than
 * SL__GEMM_K_PCH super-blocks, which the kernel calls would build again and again): a batch of
 * n_tok tokens of nb super-blocks has sl__gemm_k_panel_items of sl__gemm_k_panel_bytes each
 * (64-byte aligned; 0 where the build has no AVX-512 kernels), item k being chunk k / np of
 * panel k % np (np = ceil(n_tok / 16), chunks of SL__GEMM_K_PCH super-blocks);
 * sl__gemm_k_panels_form says whether the type's kernel reads them and in which form
 * (*plus128 unless plus128 is NULL; tiles: the call takes the AMX path), false for types
 * without one;
 * sl__gemm_k_panels_avx512 builds items [k0, k1) of call a's tokens into pan. */
static inline int64_t sl__gemm_k_panel_items(int64_t n_tok, int64_t nb)
{
    return (n_tok + 15) / 16 * ((nb + SL__GEMM_K_PCH - 1) / SL__GEMM_K_PCH);
}
size_t sl__gemm_k_panel_bytes(void);
bool sl__gemm_k_panels_form(uint32_t type, bool tiles, bool *plus128);
void sl__gemm_k_panels_avx512(const sl__gemm_rows *a, bool plus128, void *pan, int64_t k0,
                              int64_t k1);

/* The float weight types' batch kernel on AVX-512 F (gemm_float.c; F32, F16, BF16), NULL for
 * other types or where the build has none. */
sl__gemm_fn sl__gemm_float_avx512(uint32_t type);
/* NULL when the ISA has no batch kernel for the type (the range kernels then run). */
sl__gemm_fn sl__gemm_avx2(uint32_t type);
sl__gemm_fn sl__gemm_avx512(uint32_t type); /* AVX-512 F/BW/VL + VNNI */
/* The few-token kernel on AVX-512 VNNI: of the K-quants and IQ4_XS gemm_few_vnni_tmpl.h's
 * (batches of 1..SL__GEMM_FEW_MAX tokens, by sl__gemm_tail), of the 32-element types
 * gemm_few32_vnni_tmpl.h's alone (any batch, every token; their sl__gemm_avx512 kernel is it
 * with sl__gemm_vnni_few's rule); NULL for other types. */
sl__gemm_fn sl__gemm_few_avx512(uint32_t type);
/* The 8-token panel kernels alone (gemm_k_x86_tmpl.h's dispatch): sl__gemm_avx2 is the AVX2
 * one; the AVX-512 one serves sl__gemm_avx512's other types (and benchmarks, as the baseline). */
sl__gemm_fn sl__gemm_panel8_avx2(uint32_t type);
sl__gemm_fn sl__gemm_panel8_avx512(uint32_t type);

#endif
