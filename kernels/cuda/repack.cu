/* kernels/cuda/repack.cu: see repack.h; the kernel is repack.cuh (one block a group). */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ctx_impl.h"
#include "kernels/cuda/repack.cuh"
#include "kernels/cuda/repack.h"

extern "C" bool sl_cuda_q4_K_r8_undo_takes(int64_t cols)
{
    return cols >= 256 && cols % 256 == 0 && (cols / 256) * RP_R8 <= SL_CUDA_R8_MAX_GROUP;
}

extern "C" sl_status sl_cuda_q4_K_r8_undo(sl_cuda_ctx *c, void *d_data, int64_t rows,
                                          int64_t cols, sl_error *err)
{
    const char *fn = __func__;
    if (rows < 8 || rows % 8 || rows / 8 > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld is not a positive multiple "
                            "of 8 (groups within the grid)", fn, (long long)rows);
    if (!sl_cuda_q4_K_r8_undo_takes(cols))
        return sl_error_set(err, SL_ERR_INVALID, "%s: cols = %lld is not a positive multiple "
                            "of 256 with a group of at most %d bytes", fn, (long long)cols,
                            (int)SL_CUDA_R8_MAX_GROUP);
    if (!d_data) return sl_error_set(err, SL_ERR_INVALID, "%s: d_data is NULL", fn);
    if (!c) return sl_error_set(err, SL_ERR_INVALID, "%s: ctx is NULL", fn);
    sl_status st = sl__cuda_ctx_enter(c, err);
    if (st) return st;
    const int64_t nb = cols / 256;
    const int smem = (int)(nb * RP_R8);
    SL_CU(err, cudaFuncSetAttribute(k_q4_K_r8_undo, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    smem));
    sl__cuda_launch(c, k_q4_K_r8_undo, (unsigned)(rows / 8), RP_THREADS, (size_t)smem,
                    (uint8_t *)d_data, nb);
    SL_CU_LAUNCH(err, "k_q4_K_r8_undo");
    return SL_OK;
}
