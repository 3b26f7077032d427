/* kernels/cuda/grouped_args.cuh: the arguments a grouped expert launch's kernel shares with
 * the other's (gemv_grouped.cuh's GEMV, gemm_grouped.cuh's tensor-core GEMM): whose weights,
 * which slots each expert serves, the shape, how X rows group and where Y goes; and their
 * grid. Filled in one place so that the two launches cannot drift apart.
 *
 * Invariants (sl__cuda_grouped_check holds them before a fill): 1 <= n_expert <=
 * SL_CUDA_GROUPED_MAX_EXPERTS; start = sl_cuda_expert_order's n_expert + 2 starts, slots its
 * slots after them; row_bytes the type's bytes of a row of cols; x_group >= 1; y has a row of
 * `rows` per slot. */
#ifndef SL_KERNELS_CUDA_GROUPED_ARGS_CUH
#define SL_KERNELS_CUDA_GROUPED_ARGS_CUH

#include <stdint.h>

struct sl_grouped_args {
    const void *const *wptrs; /* [n_expert]: each expert's matrix */
    int32_t n_expert;
    const int32_t *start, *slots; /* sl_cuda_expert_order's two parts */
    int64_t rows, cols, row_bytes;
    int32_t x_group; /* slot s reads X row s / x_group */
    float *y;        /* [slot][rows] */
};

static inline void sl_grouped_args_fill(sl_grouped_args *a, const void *const *wptrs,
                                        int32_t n_expert, const int32_t *order, int64_t rows,
                                        int64_t cols, int64_t row_bytes, int32_t x_group,
                                        float *y)
{
    a->wptrs = wptrs;
    a->n_expert = n_expert;
    a->start = order;
    a->slots = order + n_expert + 2;
    a->rows = rows;
    a->cols = cols;
    a->row_bytes = row_bytes;
    a->x_group = x_group;
    a->y = y;
}

#ifdef __CUDACC__ /* (the host shim's tests launch with their own grid type) */
/* x over tiles of tile_rows rows, y over the experts plus one for the slots whose id is out of
 * range (their rows are zeros, as the per-slot GEMV gives) */
static inline dim3 sl_grouped_grid(int64_t rows, int64_t tile_rows, int32_t n_expert)
{
    return dim3((unsigned)((rows + tile_rows - 1) / tile_rows), (unsigned)n_expert + 1, 1);
}
#endif

#endif
