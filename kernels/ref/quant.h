/* kernels/ref/quant: scalar reference conversions between F32 and the GGUF storage types.
 *
 * These are the bit-exact references every fast kernel (CPU SIMD, CUDA) is tested against, and
 * what the synthetic-model writer uses to produce quantized files. "Bit-exact" means: the bytes
 * equal those of ggml's reference quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref,
 * GGML_FP32_TO_FP16 with F16C, ggml_compute_fp32_to_bf16) and of gguf-py's numpy ports
 * (gguf.quants.quantize), which tests/mkmodel/quant_vs_gguf_py.py checks.
 *
 * Row contract (sl_quant_row / sl_quant_dequant_row): a row is n consecutive elements, n >= 0 and
 * a multiple of the type's block size (1 for F32/F16/BF16, 32 for Q8_0/Q4_0); the packed row
 * occupies sl_quant_row_bytes(type, n) bytes. Pointers are host memory, must not overlap, and
 * need no alignment beyond their element type's (blocks are read/written with memcpy-safe
 * uint8/uint16 accesses). All functions are pure: thread-safe, no global state.
 *
 * Supported types: F32, F16, BF16, Q8_0, Q4_0. Others return SL_ERR_UNSUPPORTED naming the type.
 */
#ifndef SL_KERNELS_REF_QUANT_H
#define SL_KERNELS_REF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

enum { SL_QK8_0 = 32, SL_QK4_0 = 32 };

/* ggml's block_q8_0: x[i] = d * qs[i]. d is IEEE half bits (little-endian host assumed). */
typedef struct sl_block_q8_0 {
    uint16_t d;
    int8_t qs[SL_QK8_0];
} sl_block_q8_0;

/* ggml's block_q4_0: x[i] = d * (q[i] - 8); byte j holds q[j] in its low nibble and
 * q[j + 16] in its high nibble (first half of the block in the low nibbles). */
typedef struct sl_block_q4_0 {
    uint16_t d;
    uint8_t qs[SL_QK4_0 / 2];
} sl_block_q4_0;

_Static_assert(sizeof(sl_block_q8_0) == 34, "block_q8_0 is 34 bytes in GGUF");
_Static_assert(sizeof(sl_block_q4_0) == 18, "block_q4_0 is 18 bytes in GGUF");

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

/* True for the types this file converts (F32, F16, BF16, Q8_0, Q4_0). */
bool sl_quant_supported(uint32_t type);
/* Bytes of a packed row of n elements; 0 if the type is unsupported, n < 0, n is not a multiple
 * of the block size or the size overflows size_t (n == 0 also gives 0). */
size_t sl_quant_row_bytes(uint32_t type, int64_t n);

/* Packs n floats of src into dst (sl_quant_row_bytes(type, n) bytes), exactly as ggml's
 * reference quantizer. SL_ERR_UNSUPPORTED for other types; SL_ERR_INVALID for a bad n or NULL
 * pointers (with n > 0). Inputs with NaN or inf give whatever ggml gives (garbage but
 * deterministic); finite inputs never fail. */
sl_status sl_quant_row(uint32_t type, const float *src, void *dst, int64_t n, sl_error *err);
/* Unpacks n elements of src (sl_quant_row_bytes(type, n) bytes) into dst floats, exactly as
 * ggml's dequantize_row_* and gguf-py's dequantize. Same errors as sl_quant_row. */
sl_status sl_quant_dequant_row(uint32_t type, const void *src, float *dst, int64_t n,
                               sl_error *err);

#endif
