/* The verification mode of sl_cpu_matvec (mv->f32_act): each weight row is dequantized with the
 * bit-exact reference dequantizer and dotted with the unquantized F32 activations in double.
 * Why: the fast path quantizes activations to Q8 blocks as ggml does, which costs up to about
 * 1% per matmul when a block holds an outlier; comparisons against a float64 forward pass on
 * dequantized weights need the model definition checked without that extra error. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "kernels/cpu/matvec.h"
#include "kernels/cpu/matvec_impl.h"
#include "kernels/ref/matvec.h"
#include "kernels/ref/quant.h"
#include "kernels/ref/repack.h"

typedef struct f32act_job {
    uint32_t type;
    const unsigned char *w;
    size_t row_bytes;
    int64_t rows, cols, n_batch;
    const float *x;
    float *y;
    atomic_int failed; /* a chunk could not get its row buffer or dequantize */
} f32act_job;

static void f32act_chunk(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    f32act_job *j = ctx;
    float *row = malloc((size_t)j->cols * sizeof *row);
    /* a Q4_K_R8 row is copied out of its group (kernels/ref/repack.h) and read as Q4_K */
    const bool r8 = j->type == SL_TYPE_Q4_K_R8;
    void *copy = r8 ? malloc(j->row_bytes) : NULL;
    if (!row || (r8 && !copy)) {
        free(row);
        free(copy);
        atomic_store(&j->failed, 1);
        return;
    }
    const int64_t nb = j->cols / SL_QK_K;
    for (int64_t r = begin; r < end; r++) {
        const void *wr = j->w + (size_t)r * j->row_bytes;
        if (r8) sl__q4_K_r8_row(j->w, nb, r, 0, nb, copy);
        if (sl_quant_dequant_row(r8 ? SL_GGML_Q4_K : j->type, r8 ? copy : wr, row, j->cols,
                                 NULL)) {
            atomic_store(&j->failed, 1);
            break;
        }
        for (int64_t b = 0; b < j->n_batch; b++) {
            const float *xb = j->x + b * j->cols;
            double acc = 0.0;
            for (int64_t i = 0; i < j->cols; i++) acc += (double)row[i] * (double)xb[i];
            j->y[b * j->rows + r] = (float)acc;
        }
    }
    free(copy);
    free(row);
}

sl_status sl__cpu_matvec_f32act(sl_cpu_pool *pool, uint32_t type, const void *w, int64_t rows,
                                int64_t cols, const float *x, int64_t n_batch, float *y,
                                sl_error *err)
{
    if (!w || !x || !y || rows < 0 || cols <= 0 || n_batch < 1)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_matvec (f32_act): bad arguments");
    if (type == SL_TYPE_Q4_K_R8 && rows % 8)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_matvec (f32_act): rows = %lld: a Q4_K_R8 "
                            "matrix has whole groups of 8 rows", (long long)rows);
    size_t rb = sl_ref_matvec_row_bytes(type, cols);
    if (!rb)
        return sl_error_set(err, SL_ERR_INVALID, "sl_cpu_matvec (f32_act): type %u cannot hold %lld columns",
                            type, (long long)cols);
    f32act_job j = {.type = type, .w = w, .row_bytes = rb, .rows = rows, .cols = cols,
                    .n_batch = n_batch, .x = x, .y = y};
    atomic_init(&j.failed, 0);
    sl_status s = sl_cpu_pool_parallel_for(pool, rows, 16, f32act_chunk, &j, err);
    if (!s && atomic_load(&j.failed))
        s = sl_error_set(err, SL_ERR_NOMEM, "sl_cpu_matvec (f32_act): out of memory or bad type %u", type);
    return s;
}
