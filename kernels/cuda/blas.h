/* kernels/cuda/blas.h: cuBLAS, opened on first use (private to kernels/cuda, *.cu only).
 *
 * Why not link it: a process that links libcublas maps cuBLAS and cuBLASLt (~200 MB RSS) at
 * start-up, `sluice --help` and CPU-only runs included, though only the GEMM (prefill batches)
 * needs it. So nothing links -lcublas; the first GEMM of a context (gemm.cu, when it creates
 * the context's handle) asks for this table, which dlopens the library and dlsyms the few
 * functions Sluice calls. (The CUDA runtime is linked statically, bazel/cuda.bzl: it opens the
 * driver, libcuda.so.1, only at the first CUDA call.)
 *
 * Search order, first hit wins:
 *   1. SL_CUBLAS_SONAME (libcublas.so.<CUBLAS_VER_MAJOR> of the headers built against: same
 *      major, same ABI) through the loader's own search: LD_LIBRARY_PATH, ld.so.cache, the
 *      system directories;
 *   2. SL_CUBLAS_FALLBACK_DIR/SL_CUBLAS_SONAME, where the CUDA toolkit installs it (this
 *      machine and the GPU machine; the rpath the binaries carried while they linked cuBLAS).
 * A failure names every path tried and dlerror()'s reason, as SL_ERR_NOT_FOUND.
 *
 * Process-wide state, on purpose: the library handle and the table are filled once under
 * pthread_once and only read afterwards (like a linked library's PLT), so contexts on several
 * threads share them without locks. The library is never dlclosed: cuBLAS keeps internal state
 * and exit handlers, as it would if linked. A failed load is remembered, not retried.
 */
#ifndef SL_KERNELS_CUDA_BLAS_H
#define SL_KERNELS_CUDA_BLAS_H

#include <cublas_v2.h>

extern "C" {
#include "base/status.h"
}

#define SL_CUBLAS_STR_(x) #x
#define SL_CUBLAS_STR(x) SL_CUBLAS_STR_(x)
#define SL_CUBLAS_SONAME "libcublas.so." SL_CUBLAS_STR(CUBLAS_VER_MAJOR)
#ifndef SL_CUBLAS_FALLBACK_DIR /* a toolkit elsewhere: nvcc -DSL_CUBLAS_FALLBACK_DIR=\"...\" */
#define SL_CUBLAS_FALLBACK_DIR "/usr/local/cuda/lib64"
#endif

/* cublasGemmEx has a C++-only inline overload (compute type as cudaDataType): the C function
 * is picked by its type; the unevaluated static_cast below fails to compile if it changes. */
typedef cublasStatus_t (*sl__cublas_gemm_ex_fn)(cublasHandle_t, cublasOperation_t,
                                                cublasOperation_t, int, int, int, const void *,
                                                const void *, cudaDataType, int, const void *,
                                                cudaDataType, int, const void *, void *,
                                                cudaDataType, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);

/* The functions Sluice calls, typed from the headers (cublasCreate is cublasCreate_v2, ...). */
typedef struct sl__cublas_api {
    decltype(&cublasCreate) create;
    decltype(&cublasDestroy) destroy;
    decltype(&cublasSetStream) set_stream;
    decltype(static_cast<sl__cublas_gemm_ex_fn>(&cublasGemmEx)) gemm_ex;
    decltype(&cublasGetStatusString) status_string;
} sl__cublas_api;

/* The table in *out (process lifetime), loading the library on the first call; *out NULL and
 * SL_ERR_NOT_FOUND when it cannot be loaded ("cuBLAS not found: dlopen libcublas.so.13: ...",
 * the same answer on every later call). Thread-safe. */
sl_status sl__cublas(const sl__cublas_api **out, sl_error *err);

#endif
