/* tests/kernels_cuda/host_shim: nothing of cuda_bf16.h is used by the decoders (see
 * cuda_runtime.h here). */
#ifndef SL_TESTS_HOST_SHIM_CUDA_BF16_H
#define SL_TESTS_HOST_SHIM_CUDA_BF16_H
#include "cuda_runtime.h"
#endif
