/* kernels/cuda/repack: Q4_K_R8 (kernels/ref/repack.h, the CPU's layout of host Q4_K weights)
 * back to Q4_K on the device, in place: so a repacked host matrix can be copied to the device
 * as it is and read there by the Q4_K kernels (the prefill's streamed host experts,
 * runtime/engine/stream.h), the conversion at device bandwidth rather than on the CPU. The
 * result is sl_repack_q4_K_r8_undo's, byte for byte. rows a positive multiple of 8, cols of
 * 256, a group's bytes (cols / 256 x 1152) <= SL_CUDA_R8_MAX_GROUP (shared memory): else
 * SL_ERR_INVALID naming the value. Enqueued on the context's stream; nothing synchronises. */
#ifndef SL_KERNELS_CUDA_REPACK_H
#define SL_KERNELS_CUDA_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/status.h"
#include "kernels/cuda/ctx.h"

enum { SL_CUDA_R8_MAX_GROUP = 200 << 10 };

/* Whether the undo takes rows of cols columns (a positive multiple of 256 whose group fits
 * SL_CUDA_R8_MAX_GROUP): the one rule the call checks, for callers that fall back instead. */
bool sl_cuda_q4_K_r8_undo_takes(int64_t cols);

sl_status sl_cuda_q4_K_r8_undo(sl_cuda_ctx *c, void *d_data, int64_t rows, int64_t cols,
                               sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
