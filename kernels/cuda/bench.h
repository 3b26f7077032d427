/* kernels/cuda/bench: the GPU rows of `sluice bench kernels`.
 *
 * Measures, on device 0 and one stream, in one run:
 * - the roofline: cudaMemcpyAsync device-to-device of a buffer of max(1 GiB, 8 x L2), timed
 *   with events; GB/s = 2 x bytes / time (a copy reads and writes every byte, so this is the
 *   HBM traffic rate, the number a read-only kernel is compared with);
 * - per weight type, sl_cuda_gemv of W [rows][cols] x one F32 vector (types with a Q8-activation
 *   path twice: the default "q8" and the verification mode "f32"): GB/s = weight bytes /
 *   median time of `reps` launches timed by events, rotating over enough copies of W that the
 *   set exceeds 4 x L2 (every launch reads from HBM). Weights are random bytes with sane
 *   scales (speed does not depend on the values);
 * - the same as a dense FFN's gate / up pair: sl_cuda_gemv_multi of two such matrices with the
 *   SwiGLU epilogue (decode's one launch for both), "q8-glu" / "f32-glu", GB/s over both
 *   matrices' bytes;
 * - "q8-pre": the Q8 kernel on x quantised once before the launches (sl_cuda_gemv_q8x), what
 *   the kernel would give without each block quantising x for itself.
 * Everything it allocates is freed before it returns. */
#ifndef SL_KERNELS_CUDA_BENCH_H
#define SL_KERNELS_CUDA_BENCH_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

#include "base/status.h"

enum { SL_CUDA_BENCH_MAX_TYPES = 16 };

typedef struct sl_cuda_bench_row {
    uint32_t type;
    double weight_mb, median_ms, gbps;
    const char *act; /* "q8" (Q8 activations: sl_cuda_gemv_q8_act) or "f32"; "q8-glu" /
                      * "f32-glu": the gate / up pair in one multi-matrix launch; "q8-pre":
                      * "q8" on x quantised before the launch (sl_cuda_gemv_q8x) */
} sl_cuda_bench_row;

typedef struct sl_cuda_bench_result {
    char device[256];
    double copy_gbps;     /* roofline */
    uint64_t copy_bytes;  /* buffer size of the roofline copy */
    int n_rows;
    sl_cuda_bench_row rows[5 * SL_CUDA_BENCH_MAX_TYPES];
} sl_cuda_bench_result;

/* SL_ERR_DEVICE / SL_ERR_NOT_FOUND (with CUDA's message) when no GPU is usable: the caller
 * prints "gpu: unavailable (<msg>)". */
sl_status sl_cuda_bench_gemv(const uint32_t *types, int n_types, int64_t rows, int64_t cols,
                             int reps, sl_cuda_bench_result *out, sl_error *err);

/* cudaMallocAsync + cudaFreeAsync pairs on one stream from the device's default memory pool,
 * its release threshold raised so freed memory stays cached (the pool's best case, as a
 * long-running server would configure it): ns_out[i] = host time of pair i with size
 * sizes[i]. The stream is synchronised and the pool trimmed before it returns. */
sl_status sl_cuda_bench_malloc_async(const uint64_t *sizes, uint64_t n, uint64_t *ns_out,
                                     sl_error *err);

#ifdef __cplusplus
}
#endif

#endif
