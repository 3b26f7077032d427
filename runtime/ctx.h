/* runtime/ctx.h: an evaluation context — KV cache, scratch, kernels' dispatch, MoE scheduler
 * (private to runtime/; the public handle is sl_ctx of runtime/sluice.h).
 *
 * KV cache (kv.c): K and V, each [n_layer][n_ctx][n_head_kv][head_dim] of F16 or F32 — per
 * layer exactly the [n_pos][n_kv_head][head_dim] layout the decode-attention kernels read, so
 * attention reads the cache in place. Position p of layer l is valid iff p < n_past.
 *
 * Scratch is sized at creation for `cap` = n_batch tokens; sl_ctx_eval feeds the forward pass
 * chunks of at most cap tokens. Invariants: 0 <= n_past <= n_ctx; n_logits rows of n_vocab
 * floats at logits belong to the last eval (n_logits == 0 before the first).
 */
#ifndef SL_RUNTIME_CTX_H
#define SL_RUNTIME_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "runtime/model.h"
#include "scheduler/moe.h"

typedef struct sl__kv {
    sl_kv_type type;
    int32_t n_layer, n_ctx, n_kv, head_dim;
    size_t elt;                 /* bytes per element: 2 or 4 */
    void *k, *v;
} sl__kv;

/* kv.c */
sl_status sl__kv_init(sl__kv *kv, sl_kv_type type, int32_t n_layer, int32_t n_ctx,
                      int32_t n_kv, int32_t head_dim, sl_error *err);
void sl__kv_free(sl__kv *kv);
/* Layer l's K (or V) cache base: [n_ctx][n_kv][head_dim] elements. */
void *sl__kv_layer(const sl__kv *kv, bool v, int32_t l);
/* Writes n rows (k, v: [n][n_kv * head_dim] floats) at positions pos[0..n) of layer l. */
void sl__kv_store(sl__kv *kv, int32_t l, const int32_t *pos, int64_t n, const float *k,
                  const float *v);

struct sl_ctx {
    sl_model *m;
    sl_ctx_options opt;
    sl__kv kv;
    int32_t n_past;
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_cpu_pool *pool;
    sl_moe_sched *moe;
    int32_t cap;                /* tokens per forward chunk */
    /* scratch, [cap][...] */
    float *x, *xn, *q, *k, *v, *att, *tmp, *g, *u, *router, *sh;
    int32_t *pos, *topk_idx;
    float *topk_w;
    sl_moe_assign *assign;
    void *work;
    size_t work_bytes;
    /* logits of the last eval */
    float *logits;
    int64_t n_logits, logits_cap;
    int64_t n_eval;             /* tokens of the last eval (its logits rows: all or the last) */
    sl_ctx_stats stats;
};

/* forward.c: evaluates tokens[0..n) (n <= cap) at positions n_past.. and appends them to the
 * cache; writes logits rows for every token into logits_out (all) or for the last one only
 * (logits_out NULL: none). Does not advance n_past (the caller does on success). */
sl_status sl__forward(sl_ctx *c, const int32_t *tokens, int64_t n, float *logits_out, bool all,
                      sl_error *err);

#endif
