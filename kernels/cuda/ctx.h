/* kernels/cuda/ctx: the context every CUDA kernel of Sluice runs in.
 *
 * An sl_cuda_ctx binds one device ordinal and one stream (a cudaStream_t, passed as void * so
 * that this header stays plain C without <cuda_runtime.h>), caches the device properties the
 * launchers size their grids by, and owns the cuBLAS handle of the GEMM (created on the first
 * GEMM, bound to the same stream). Nothing in kernels/cuda keeps process-wide state: two
 * contexts on two streams run concurrently without sharing anything — except cuBLAS's
 * function table, loaded once by the first GEMM of any context (blas.h: not linked, so that
 * processes which never run a GEMM never map it).
 *
 * Contract
 * - Every kernel entry point enqueues on the context's stream and returns without waiting
 *   (no implicit synchronisation, no allocation); errors detectable at launch are returned,
 *   faults inside a kernel show at the next sl_cuda_ctx_sync (or any later CUDA call).
 * - A context is used by one thread at a time (like the stream it wraps). The stream is not
 *   owned: the caller destroys it after sl_cuda_ctx_destroy.
 * - Without a usable GPU every function fails with SL_ERR_DEVICE carrying CUDA's own message
 *   ("CUDA driver version is insufficient...", "no CUDA-capable device...") and file:line.
 *
 * Getting the stream from base/device: the cuda backend keeps its cudaStream_t inside the
 * private struct cuda_stream (base/device/cuda.c); until base/device offers an accessor
 * (e.g. `void *sl_device_stream_native(sl_stream *)`), callers pass the cudaStream_t here.
 */
#ifndef SL_KERNELS_CUDA_CTX_H
#define SL_KERNELS_CUDA_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/status.h"

typedef struct sl_cuda_ctx sl_cuda_ctx;

/* Number of usable CUDA devices in *count; SL_ERR_DEVICE with CUDA's message when none can be
 * counted (no driver, driver too old, no device). Also fails (SL_ERR_NOT_FOUND) when the count
 * is 0. Cheap; used by tests and benches to decide to skip. */
sl_status sl_cuda_probe(int *count, sl_error *err);

/* Loads cuBLAS now (otherwise the first GEMM does): libcublas.so.<major> through the loader's
 * search path, then in /usr/local/cuda/lib64. SL_ERR_NOT_FOUND naming each path tried and why
 * when it cannot be loaded. Needs no GPU and makes no CUDA call. Thread-safe. */
sl_status sl_cuda_blas_load(sl_error *err);

/* Creates a context on device `ordinal` for `cuda_stream` (a cudaStream_t; NULL = the legacy
 * default stream, which synchronises with other blocking streams: prefer a real stream).
 * Makes the device current on the calling thread. *out is NULL on failure. */
sl_status sl_cuda_ctx_create(int ordinal, void *cuda_stream, sl_cuda_ctx **out, sl_error *err);
/* Destroys the cuBLAS handle (if any) and frees the context; does not sync or destroy the
 * stream. NULL is allowed. */
void sl_cuda_ctx_destroy(sl_cuda_ctx *c);
/* Rebinds the context (and its cuBLAS handle) to another stream of the same device. The
 * context's last-block launches share its counters (sl_cuda_ctx_set_counters), so they run only
 * on the stream that set them: on another one their predicates are false. */
sl_status sl_cuda_ctx_set_stream(sl_cuda_ctx *c, void *cuda_stream, sl_error *err);
void *sl_cuda_ctx_stream(const sl_cuda_ctx *c);
/* Activation precision of the GEMV (gemv.h): false (default) lets the decode of
 * sl_cuda_gemv_q8_act's types quantize x to int8 per 32 values as ggml's Q8_1 does (about 3x
 * fewer instructions per weight); true keeps x in F32 everywhere (the verification mode,
 * SLUICE_ACT_F32=1). */
void sl_cuda_ctx_set_f32_act(sl_cuda_ctx *c, bool f32_act);
/* Programmatic dependent launch (common.cuh sl_pdl_enter): on by default where the device has
 * it (compute capability 9.0+), so that a kernel's launch overlaps the end of the one before
 * it on the stream; the results are the same bits either way (a kernel reads and writes
 * memory only after the one before it has ended). set_pdl(false) launches in plain stream
 * order (sl_ctx_options.no_pdl); true is taken only where the device has it. */
void sl_cuda_ctx_set_pdl(sl_cuda_ctx *c, bool on);
/* Whether c launches with it now: false where turned off, where the device has none, and after
 * the driver refused a launch with it (the launch is then made without it, and so are the
 * context's next ones). */
bool sl_cuda_ctx_pdl(const sl_cuda_ctx *c);
/* The counters of c's last-block launches (sl_cuda_gemv_add_norm, sl_cuda_gemv_router,
 * sl_cuda_gemv_experts_combine: the last block to finish, of the grid or of a column of 32
 * rows, does the next step's work): d_mem, device memory of SL_CUDA_CTX_COUNTER_BYTES bytes
 * on c's device that the caller keeps for c's life and uses for nothing else, is zeroed here
 * in the order of c's stream (before any launch enqueued after this call); the launches leave
 * it zero. NULL: none, and those launches are SL_ERR_UNSUPPORTED (their *_q8 / _fused
 * predicates false), as they are while c is on another stream than the one it had here.
 * Why caller memory: no allocation, nor a cudaFree's device-wide wait at destroy, in a
 * context. The fused launches of one context run on one stream at a time; a CUDA graph
 * captured with them keeps d_mem's address, so d_mem outlives every such graph. */
enum { SL_CUDA_CTX_COUNTER_BYTES = 4352 };
sl_status sl_cuda_ctx_set_counters(sl_cuda_ctx *c, void *d_mem, sl_error *err);
/* Kernels launched through c so far (kernels/cuda's, one per launch call; cuBLAS's and copies
 * not counted): a caller's deltas count a step's launches (bench decode's launches a layer). */
uint64_t sl_cuda_ctx_launches(const sl_cuda_ctx *c);
/* Waits for the stream; reports any asynchronous kernel fault. */
sl_status sl_cuda_ctx_sync(sl_cuda_ctx *c, sl_error *err);

typedef struct sl_cuda_ctx_info {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    uint64_t l2_bytes;
    uint64_t smem_per_block_optin; /* max dynamic shared memory per block after opt-in */
} sl_cuda_ctx_info;
void sl_cuda_ctx_info_get(const sl_cuda_ctx *c, sl_cuda_ctx_info *out);

#ifdef __cplusplus
}
#endif

#endif
