/* kernels/ref/quant: scalar reference conversions between F32 and the GGUF storage types.
 *
 * These are the bit-exact references every fast kernel (CPU SIMD, CUDA) is tested against, and
 * what the synthetic-model writer uses to produce quantized files. "Bit-exact" means: the bytes
 * equal those of ggml's reference quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref,
 * GGML_FP32_TO_FP16 with F16C, ggml_compute_fp32_to_bf16) and of gguf-py's numpy ports
 * (gguf.quants.quantize), which tests/mkmodel/quant_vs_gguf_py.py checks.
 *
 * Row contract (sl_quant_row / sl_quant_dequant_row): a row is n consecutive elements, n >= 0 and
 * a multiple of the type's block size (1 for F32/F16/BF16/F64/I8..I64, 32 for Q4_0..Q8_1, IQ4_NL and
 * MXFP4, 64 for NVFP4, 256 for the K-quants, the other IQ types and TQ*); the packed row
 * occupies sl_quant_row_bytes(type, n) bytes. Pointers are host memory, must not overlap, and
 * need no alignment beyond their element type's (blocks are read/written with memcpy-safe
 * uint8/uint16 accesses). All functions are pure: thread-safe, no global state.
 *
 * Dequantize (sl_quant_supported): every type whose format is public: F32, F16, BF16, F64, I8,
 * I16, I32, I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ1_S,
 * IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4.
 * Not Q1_0 (no public reference to be exact against yet).
 * Quantize (sl_quant_can_quantize): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K,
 * Q5_K, Q6_K, Q8_K, MXFP4, IQ4_NL, IQ4_XS (ggml's *_ref quantizers; for IQ4_NL/IQ4_XS the
 * quantize_iq4_nl / quantize_iq4_xs that llama-quantize runs, without an importance matrix;
 * Q4_1/Q5_0/Q5_1/MXFP4 also bit-exact with gguf-py, which has no K-quant or IQ4 quantizers).
 * Other types return SL_ERR_UNSUPPORTED naming the type.
 * Layout: kernels/ref/blocks.h; implementation split quant.c (dispatch, 32-element blocks),
 * quant_k.c (K-quants), quant_iq.c (IQ, TQ, FP4), quant_iq4.c (IQ4 quantizers), iq_tables.c
 * (codebooks).
 */
#ifndef SL_KERNELS_REF_QUANT_H
#define SL_KERNELS_REF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ref/blocks.h" /* sl_block_q8_0, sl_block_q4_0, ... (moved there) */
#include "base/status.h"

/* ---- element conversions ---------------------------------------------------------------- */

/* F32 -> IEEE binary16, round to nearest even; overflow -> +-inf; NaN -> quiet NaN keeping the
 * sign and the top 10 payload bits with the quiet bit forced (x86 F16C / ARM FCVT behaviour;
 * numpy agrees for every quiet NaN, but keeps a signalling NaN signalling). */
uint16_t sl_quant_fp32_to_fp16(float f);
/* binary16 -> F32, exact (subnormals normalised; NaN payload kept, not quieted). */
float sl_quant_fp16_to_fp32(uint16_t h);
/* F32 -> bfloat16, round to nearest even; NaN -> (bits >> 16) | 0x40 (quiet), as
 * ggml_compute_fp32_to_bf16. */
uint16_t sl_quant_fp32_to_bf16(float f);
/* bfloat16 -> F32, exact (bits << 16). */
float sl_quant_bf16_to_fp32(uint16_t b);

/* ---- rows ------------------------------------------------------------------------------- */

/* True for the types sl_quant_dequant_row converts (see the list above). */
bool sl_quant_supported(uint32_t type);
/* True for the types sl_quant_row packs (a subset of the supported ones). */
bool sl_quant_can_quantize(uint32_t type);
/* Bytes of a packed row of n elements; 0 if the type is unsupported, n < 0, n is not a multiple
 * of the block size or the size overflows size_t (n == 0 also gives 0). */
size_t sl_quant_row_bytes(uint32_t type, int64_t n);

/* Writes a block's scale fields (kernels/ref/block_scale.c): d, and dmin for the types with a
 * second one (Q4_1, Q5_1: m; Q2_K, Q4_K, Q5_K: dmin), as fp16 in the type's place (IQ1_M: the
 * nibbles of its scale words), leaving every other byte; for blocks filled with random codes.
 * False (nothing written) for a type without an fp16 block scale (floats, MXFP4's exponent,
 * NVFP4, TQ*, Q8_1/Q8_K). */
bool sl_quant_block_set_scale(uint32_t type, void *block, float d, float dmin);

/* Packs n floats of src into dst (sl_quant_row_bytes(type, n) bytes), exactly as ggml's
 * reference quantizer. SL_ERR_UNSUPPORTED for types !sl_quant_can_quantize; SL_ERR_INVALID
 * for a bad n or NULL pointers (with n > 0). Inputs with NaN or inf give whatever ggml gives
 * (garbage but deterministic); finite inputs never fail. */
sl_status sl_quant_row(uint32_t type, const float *src, void *dst, int64_t n, sl_error *err);
/* Unpacks n elements of src (sl_quant_row_bytes(type, n) bytes) into dst floats, exactly as
 * ggml's dequantize_row_* and gguf-py's dequantize (integers and F64: C conversion, round to
 * nearest even). Every byte pattern is accepted; non-finite scales give non-finite values.
 * Errors as sl_quant_row, with SL_ERR_UNSUPPORTED for types !sl_quant_supported. */
sl_status sl_quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n,
                               sl_error *err);

#endif
