/* Reference matvec drivers: argument checks, activation quantization into a scratch row, and
 * the dense, row-gathered, column-listed and transposed loops over the block dots of
 * matvec_blocks.c. Written for clarity: one row, one batch column at a time. */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "kernels/ref/matvec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ref/matvec_impl.h"
#include "kernels/ref/repack.h"

bool sl_ref_matvec_supported(uint32_t type) { return sl__mv_type_get(type) != NULL; }

uint32_t sl_ref_matvec_act_type(uint32_t type)
{
    const sl__mv_type *t = sl__mv_type_get(type);
    return t ? t->act_type : UINT32_MAX;
}

static size_t row_bytes(const sl__mv_type *t, int64_t cols, uint32_t per_block)
{
    if (!t || cols <= 0 || cols % t->block) return 0;
    const uint64_t nb = (uint64_t)cols / t->block;
    if (nb > SIZE_MAX / per_block) return 0;
    return (size_t)(nb * per_block);
}

size_t sl_ref_matvec_row_bytes(uint32_t type, int64_t cols)
{
    const sl__mv_type *t = sl__mv_type_get(type);
    return row_bytes(t, cols, t ? t->bytes : 1);
}

size_t sl_ref_matvec_act_bytes(uint32_t type, int64_t cols)
{
    const sl__mv_type *t = sl__mv_type_get(type);
    return row_bytes(t, cols, t ? t->act_bytes : 1);
}

sl_status sl__mv_validate_shape(const char *fn, uint32_t type, int64_t rows, int64_t cols,
                                const sl__mv_type **t, sl_error *err)
{
    *t = sl__mv_type_get(type);
    if (!*t) {
        const sl_gguf_type_info *ti = sl_gguf_type_get(type);
        return sl_error_set(err, SL_ERR_UNSUPPORTED, "%s: weight type %s (%u) has no matvec kernel",
                            fn, ti ? ti->name : "unknown", type);
    }
    if (rows < 1 || rows > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld is not in [1, 2^31)", fn,
                            (long long)rows);
    if ((*t)->type == SL_TYPE_Q4_K_R8 && rows % 8)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld: a %s matrix has whole groups "
                            "of 8 rows", fn, (long long)rows, (*t)->name);
    if (cols < 1 || cols % (*t)->block || cols > ((int64_t)1 << 40))
        return sl_error_set(err, SL_ERR_INVALID,
                            "%s: cols = %lld is not a positive multiple of %s's block size %u", fn,
                            (long long)cols, (*t)->name, (*t)->block);
    const uint64_t wb = (uint64_t)cols / (*t)->block * (*t)->bytes;
    if (wb > (uint64_t)SIZE_MAX / (uint64_t)rows)
        return sl_error_set(err, SL_ERR_INVALID, "%s: rows = %lld x cols = %lld overflows size_t",
                            fn, (long long)rows, (long long)cols);
    return SL_OK;
}

sl_status sl__mv_validate(const char *fn, uint32_t type, const void *w, int64_t rows,
                          int64_t cols, const void *x, int64_t n_batch, const void *y,
                          const sl__mv_type **t, sl_error *err)
{
    sl_status s = sl__mv_validate_shape(fn, type, rows, cols, t, err);
    if (s) return s;
    if (!w) return sl_error_set(err, SL_ERR_INVALID, "%s: w is NULL", fn);
    if (!x) return sl_error_set(err, SL_ERR_INVALID, "%s: x is NULL", fn);
    if (!y) return sl_error_set(err, SL_ERR_INVALID, "%s: y is NULL", fn);
    if (n_batch < 1 || n_batch > SL__MV_MAX_BATCH)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_batch = %lld is not in [1, %d]", fn,
                            (long long)n_batch, SL__MV_MAX_BATCH);
    return SL_OK;
}

sl_status sl__mv_validate_idx(const char *fn, const int32_t *idx, int64_t n_idx, int64_t limit,
                              const char *what, sl_error *err)
{
    if (n_idx < 0 || n_idx > INT32_MAX)
        return sl_error_set(err, SL_ERR_INVALID, "%s: n_idx = %lld is not in [0, 2^31)", fn,
                            (long long)n_idx);
    if (n_idx > 0 && !idx) return sl_error_set(err, SL_ERR_INVALID, "%s: idx is NULL", fn);
    for (int64_t i = 0; i < n_idx; i++)
        if (idx[i] < 0 || idx[i] >= limit)
            return sl_error_set(err, SL_ERR_INVALID, "%s: idx[%lld] = %d is not in [0, %s = %lld)",
                                fn, (long long)i, idx[i], what, (long long)limit);
    return SL_OK;
}

void sl__mv_quant_rows(const sl__mv_type *t, const float *x, int64_t cols, int64_t n_batch,
                       void *xq, size_t act_row_bytes)
{
    for (int64_t b = 0; b < n_batch; b++) {
        const float *xb = x + b * cols;
        void *yb = (char *)xq + (size_t)b * act_row_bytes;
        switch (t->act_type) {
        case SL_GGML_Q8_0: sl__mv_quant_q8_0(xb, yb, cols); break;
        case SL_GGML_Q8_1: sl__mv_quant_q8_1(xb, yb, cols); break;
        case SL_GGML_Q8_K: sl__mv_quant_q8_K(xb, yb, cols); break;
        case SL_ACT_Q8_K8: sl__mv_quant_q8_K8(xb, yb, cols); break;
        default: memcpy(yb, xb, (size_t)cols * sizeof(float)); break;
        }
    }
}

sl_status sl_ref_matvec_quant_act(uint32_t type, const float *x, int64_t cols, void *xq,
                                  sl_error *err)
{
    const sl__mv_type *t;
    type = sl_repack_base_type(type); /* the same activations */
    sl_status s = sl__mv_validate("sl_ref_matvec_quant_act", type, x, 1, cols, x, 1, xq, &t, err);
    if (s) return s;
    sl__mv_quant_rows(t, x, cols, 1, xq, sl_ref_matvec_act_bytes(type, cols));
    return SL_OK;
}

sl_status sl_ref_matvec_dot(uint32_t type, const void *w_row, const void *xq, int64_t cols,
                            float *out, sl_error *err)
{
    const sl__mv_type *t;
    sl_status s = sl__mv_validate("sl_ref_matvec_dot", type, w_row, 1, cols, xq, 1, out, &t, err);
    if (s) return s;
    *out = sl__mv_dot_row(t, w_row, xq, cols / t->block);
    return SL_OK;
}

sl_status sl_ref_matvec_dequant_row(uint32_t type, const void *w_row, int64_t cols, float *y,
                                    sl_error *err)
{
    const sl__mv_type *t;
    sl_status s =
        sl__mv_validate("sl_ref_matvec_dequant_row", type, w_row, 1, cols, w_row, 1, y, &t, err);
    if (s) return s;
    for (int64_t b = 0; b < cols / t->block; b++)
        sl__mv_dequant_block(t, (const char *)w_row + b * t->bytes, y + b * t->block);
    return SL_OK;
}

/* Quantized activations of n_batch rows in a fresh buffer (*xq, free()d by the caller). */
static sl_status quant_scratch(const char *fn, const sl__mv_type *t, const float *x,
                               int64_t cols, int64_t n_batch, void **xq, size_t *arb,
                               sl_error *err)
{
    *arb = row_bytes(t, cols, t->act_bytes);
    *xq = malloc(*arb * (size_t)n_batch);
    if (!*xq)
        return sl_error_set(err, SL_ERR_NOMEM, "%s: no memory for %lld quantized activation rows",
                            fn, (long long)n_batch);
    sl__mv_quant_rows(t, x, cols, n_batch, *xq, *arb);
    return SL_OK;
}

/* A buffer for one row copied out of a Q4_K_R8 matrix (sl__mv_row_at); NULL for other types. */
static sl_status row_scratch(const char *fn, const sl__mv_type *t, int64_t cols, void **buf,
                             sl_error *err)
{
    *buf = NULL;
    if (t->type != SL_TYPE_Q4_K_R8) return SL_OK;
    if (!(*buf = malloc(row_bytes(t, cols, t->bytes))))
        return sl_error_set(err, SL_ERR_NOMEM, "%s: no memory for a row", fn);
    return SL_OK;
}

/* Shared by dense and row-gathered: out row i of batch b = dot(W row idx[i] or i, xq[b]). */
static sl_status gathered(const char *fn, uint32_t type, const void *w, int64_t rows,
                          int64_t cols, const int32_t *idx, int64_t n_idx, bool scatter,
                          const float *x, int64_t n_batch, float *y, sl_error *err)
{
    const sl__mv_type *t;
    sl_status s = sl__mv_validate(fn, type, w, rows, cols, x, n_batch, y, &t, err);
    if (!s && idx) s = sl__mv_validate_idx(fn, idx, n_idx, rows, "rows", err);
    if (s) return s;
    void *xq, *buf;
    size_t arb;
    if ((s = row_scratch(fn, t, cols, &buf, err))) return s;
    if ((s = quant_scratch(fn, t, x, cols, n_batch, &xq, &arb, err))) {
        free(buf);
        return s;
    }
    const int64_t n_out = idx ? n_idx : rows, y_stride = idx && !scatter ? n_idx : rows;
    const int64_t nb = cols / t->block;
    for (int64_t b = 0; b < n_batch; b++)
        for (int64_t i = 0; i < n_out; i++) {
            const int64_t r = idx ? idx[i] : i;
            const float v = sl__mv_dot_row(sl__mv_row_type(t), sl__mv_row_at(t, w, r, nb, buf),
                                           (const char *)xq + (size_t)b * arb, nb);
            y[b * y_stride + (idx && !scatter ? i : r)] = v;
        }
    free(xq);
    free(buf);
    return SL_OK;
}

sl_status sl_ref_matvec(uint32_t type, const void *w, int64_t rows, int64_t cols,
                        const float *x, int64_t n_batch, float *y, sl_error *err)
{
    return gathered("sl_ref_matvec", type, w, rows, cols, NULL, 0, false, x, n_batch, y, err);
}

sl_status sl_ref_matvec_rows(uint32_t type, const void *w, int64_t rows, int64_t cols,
                             const int32_t *idx, int64_t n_idx, bool scatter, const float *x,
                             int64_t n_batch, float *y, sl_error *err)
{
    if (!idx && n_idx > 0)
        return sl_error_set(err, SL_ERR_INVALID, "sl_ref_matvec_rows: idx is NULL");
    if (n_idx == 0) return SL_OK; /* still a valid call: nothing listed */
    return gathered("sl_ref_matvec_rows", type, w, rows, cols, idx, n_idx, scatter, x, n_batch,
                    y, err);
}

sl_status sl_ref_matvec_cols(uint32_t type, const void *w, int64_t rows, int64_t cols,
                             const int32_t *idx, int64_t n_idx, const float *x,
                             int64_t n_batch, float *y, sl_error *err)
{
    static const char fn[] = "sl_ref_matvec_cols";
    const sl__mv_type *t;
    sl_status s = sl__mv_validate(fn, type, w, rows, cols, x, n_batch, y, &t, err);
    if (!s) s = sl__mv_validate_idx(fn, idx, n_idx, cols, "cols", err);
    if (s) return s;
    const int64_t nb = cols / t->block;
    float *xm = calloc((size_t)(cols * n_batch), sizeof *xm);
    uint8_t *listed = calloc((size_t)nb, 1); /* blocks holding a listed column */
    void *xq = NULL;
    size_t arb;
    if (!xm || !listed) s = sl_error_set(err, SL_ERR_NOMEM, "%s: no memory for the masked x", fn);
    for (int64_t i = 0; !s && i < n_idx; i++) {
        listed[idx[i] / t->block] = 1;
        for (int64_t b = 0; b < n_batch; b++) xm[b * cols + idx[i]] = x[b * cols + idx[i]];
    }
    void *buf = NULL;
    if (!s) s = row_scratch(fn, t, cols, &buf, err);
    if (!s) s = quant_scratch(fn, t, xm, cols, n_batch, &xq, &arb, err);
    if (s) {
        free(buf);
        free(listed);
        free(xm);
        return s;
    }
    const sl__mv_type *rt = sl__mv_row_type(t);
    for (int64_t b = 0; b < n_batch; b++) {
        const char *xqb = (const char *)xq + (size_t)b * arb;
        for (int64_t o = 0; o < rows; o++) {
            const char *wr = sl__mv_row_at(t, w, o, nb, buf);
            float lane[32] = {0}, s8[8] = {0};
            for (int64_t k = 0; k < nb; k++) {
                if (!listed[k]) continue; /* holds no listed column: skipped (matvec.h) */
                if (t->block == 1)
                    sl__mv_dot_floats(t->type, wr, (const float *)xqb, k, k + 1, lane);
                else
                    sl__mv_dot_blocks(rt, wr, xqb, k, k + 1, s8);
            }
            if (t->block == 1) sl__mv_fold32(lane, s8);
            y[b * rows + o] += sl__mv_reduce8(s8);
        }
    }
    free(buf);
    free(xq);
    free(listed);
    free(xm);
    return SL_OK;
}

sl_status sl_ref_matvec_t_rows(uint32_t type, const void *wt, int64_t rows, int64_t cols,
                               const int32_t *idx, int64_t n_idx, const float *x,
                               int64_t n_batch, float *y, sl_error *err)
{
    static const char fn[] = "sl_ref_matvec_t_rows";
    const sl__mv_type *t;
    sl_status s = sl__mv_validate(fn, type, wt, rows, cols, x, n_batch, y, &t, err);
    if (!s) s = sl__mv_validate_idx(fn, idx, n_idx, rows, "rows", err);
    if (s) return s;
    float *row = malloc((size_t)cols * sizeof *row);
    void *buf = NULL;
    if (!row || (s = row_scratch(fn, t, cols, &buf, err))) {
        free(row);
        return s ? s : sl_error_set(err, SL_ERR_NOMEM, "%s: no memory for a dequantized row", fn);
    }
    const sl__mv_type *rt = sl__mv_row_type(t);
    for (int64_t i = 0; i < n_idx; i++) {
        const char *wr = sl__mv_row_at(t, wt, idx[i], cols / t->block, buf);
        for (int64_t k = 0; k < cols / t->block; k++)
            sl__mv_dequant_block(rt, wr + k * t->bytes, row + k * t->block);
        for (int64_t b = 0; b < n_batch; b++) {
            const float xj = x[b * rows + idx[i]];
            float *yb = y + b * cols;
            for (int64_t c = 0; c < cols; c++) yb[c] = fmaf(xj, row[c], yb[c]);
        }
    }
    free(buf);
    free(row);
    return SL_OK;
}
