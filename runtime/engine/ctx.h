/* runtime/engine/ctx.h: an evaluation context — KV cache, scratch, kernels' dispatch, MoE scheduler
 * (private to runtime/; the public handle is sl_ctx of runtime/sluice.h).
 *
 * KV cache (kv.c): K and V, each [n_layer][n_ctx][n_head_kv][head_dim] of F16 or F32 — per
 * layer exactly the [n_pos][n_kv_head][head_dim] layout the decode-attention kernels read, so
 * attention reads the cache in place. Position p of layer l is valid iff p < n_past. MLA
 * models (deepseek2) keep K only: one latent row per token, whose first n_lora_kv entries are
 * also the values (k_only; V's base is K's).
 *
 * Scratch is sized at creation for `cap` = n_batch tokens; sl_ctx_eval feeds the forward pass
 * chunks of at most cap tokens. Invariants: 0 <= n_past <= n_ctx; n_logits rows of n_vocab
 * floats at logits belong to the last eval (n_logits == 0 before the first), row r to its
 * token logits_first + r, and logits_first + n_logits == n_eval when n_logits > 0.
 */
#ifndef SL_RUNTIME_CTX_H
#define SL_RUNTIME_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/matvec.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pool.h"
#include "runtime/engine/defer.h"
#include "runtime/engine/dx.h"
#include "runtime/engine/hot.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stream.h"
#include "scheduler/moe/moe.h"
#include "scheduler/policy/neuron_stats.h"

typedef struct sl__kv {
    sl_kv_type type;
    int32_t n_layer, n_ctx, n_kv, head_dim;
    size_t elt;                 /* bytes per element: 2 or 4 */
    bool k_only;                /* MLA: v is NULL, V reads K */
    void *k, *v;
} sl__kv;

/* kv.c */
sl_status sl__kv_init(sl__kv *kv, sl_kv_type type, int32_t n_layer, int32_t n_ctx,
                      int32_t n_kv, int32_t head_dim, bool k_only, sl_error *err);
void sl__kv_free(sl__kv *kv);
/* Layer l's K (or V; K's when k_only) cache base: [n_ctx][n_kv][head_dim] elements. */
void *sl__kv_layer(const sl__kv *kv, bool v, int32_t l);

/* One side of the forward pass: an executor and the buffers it computes in ([cap][...], in
 * the executor's memory). The host side always exists; the device side only when some layer
 * or the output runs on the device (then dx != NULL). */
typedef struct sl__side {
    sl__dx *dx;
    sl__dx *raw;                /* the executor itself: dx, or what the profiler's dx wraps */
    void *mem;                  /* host side: the one malloc block the buffers are carved from */
    float *x, *xn, *q, *k, *v, *att, *tmp, *g, *u, *router, *sh;
    int32_t *pos, *topk_idx;    /* pos [cap]; topk_idx, topk_w [cap][n_expert_used] */
    float *topk_w;
    sl_argmax_result *pick;     /* the greedy pick of sl_ctx_eval_greedy */
    const float *rope_freqs;    /* rope frequency factors in this side's memory, or NULL */
    void *kv_k, *kv_v;          /* device side: [n_slots][n_ctx][n_kv * head_dim] (kv_slot) */
} sl__side;

/* One sequence of a forward pass (sl__forward_batch): rows [off, off + n) of the pass are
 * context c's next n tokens, at positions c->n_past.., stored in and attending to c's own KV
 * cache (host and device); the logits of its rows out_from..n-1 go to logits (NULL: none). The
 * pass's other state (scratch, executors, MoE scheduler, stats) is the lead context's. */
typedef struct sl__seq {
    struct sl_ctx *c;
    int64_t off, n;
    float *logits;
    int64_t out_from;
} sl__seq;

typedef struct sl__async_part {
    struct sl_ctx *c;
    int32_t layer;
    int64_t n;
} sl__async_part;

enum { SL__CTX_MAX_DEV_BLOCKS = 32 };

typedef struct sl__rs sl__rs; /* recurrent state (arch_qwen3next.c) */

struct sl_ctx {
    sl_model *m;
    sl_ctx_options opt;
    sl__kv kv;                  /* host KV cache (every layer's slot exists) */
    int32_t n_past;
    sl_cpu_ops ops;
    sl_cpu_matvec_ctx mv;
    sl_cpu_pool *pool;
    sl_moe_sched *moe;
    const char *moe_mode;       /* the MoE scheduler's configured mode (sl_ctx_stats) */
    bool experts_sync;          /* sched order=sync: a device layer's host experts after a
                                 * blocking sync, not as a host function (forward_ffn.c) */
    int32_t cap;                /* tokens per forward chunk */
    sl__side host, dev;
    bool *layer_dev;            /* [n_layer]: the layer runs on the device side */
    int32_t *kv_slot;           /* [n_layer]: device KV slot of a device layer, else -1 */
    sl_event *ev_xn;            /* hot/cold FFNs: the rows' copy to the host has landed */
    sl__dx_moe *dmoe;           /* [n_layer]: the executors' view of each MoE layer (of a
                                 * layer split hot/cold: of its hot part) */
    float *dev_logits;          /* device side: [dev_logits_rows][n_vocab] */
    int64_t dev_logits_rows;
    sl_block dev_blocks[SL__CTX_MAX_DEV_BLOCKS]; /* everything the context took from the arena */
    int n_dev_blocks;
    uint8_t *embd_rows;         /* [cap] token_embd rows staged from the device, or NULL */
    /* logits of the last eval */
    float *logits;
    int64_t n_logits, logits_cap;
    int64_t logits_first;       /* the last eval's first token with logits (a tail, or n-1) */
    int64_t n_eval;             /* tokens of the last eval */
    /* opt.embeddings: the hidden rows [n_eval][n_embd] of the last eval (n_hidden rows;
     * hidden_cap allocated), and where sl__forward writes its chunk's rows (NULL: nowhere) */
    float *hidden, *hidden_out;
    int64_t n_hidden, hidden_cap;
    sl_ctx_stats stats;
    sl__dx_prof_totals prof;    /* opt.profile_steps: the device executor's steps' times */
    sl_neuron_stats *nstats;    /* [n_layer] with opt.neuron_stats, else NULL */
    /* live reload: the model's gate epoch the caches above were built for, and what depends
     * on weight types (the CPU matvec workspace, the staged embedding rows) */
    uint64_t epoch;
    size_t work_bytes, embd_rows_bytes;
    uint64_t res_epoch;         /* the model's residency epoch its pointers were taken at */
    uint64_t res_layout_epoch;  /* and its layout epoch the rest was derived at */
    uint64_t dev_rope_bytes;    /* dev.rope_freqs is the context's copy of that size; 0: none */
    /* the stream-ordered host parts of a pass (forward_ffn.c host_experts_fn): one record per
     * layer ([n_layer]; the host thread may queue several before the first runs), and their
     * first failure */
    struct sl__async_part *async_parts;
    sl_status async_st;
    sl_error async_err;
    sl__rs *rs;                 /* the recurrent layers' state (traits.recurrent), else NULL */
    /* the sequences of the pass in progress (forward.c; the lead's, NULL between passes) */
    const sl__seq *seqs;
    int32_t n_seqs;
    /* a batched pass's host logits [batch_rows][n_vocab] before they go to each context */
    float *batch_logits;
    int64_t batch_rows;
    /* the decode graph (forward.c): the captured one-token pass (NULL: none yet), the output
     * rows it was captured for, its device steps; graph_failed: a capture failed, the context
     * runs its passes eagerly from then on */
    sl_graph *graph;
    int64_t graph_out;
    uint64_t graph_steps, graph_launches;
    bool graph_failed;
    /* a decode graph captured only without programmatic dependent launch (forward_graph.c):
     * the context's CUDA contexts made from now on (a rebind's executor) start without it */
    bool pdl_capture_refused;
    char graph_error[SL_ERROR_MSG_BYTES]; /* the failed capture's message (sl_ctx_stats) */
    sl__stream stream;          /* a prefill's host experts through the device (stream.h) */
    sl__hot hot;                /* host experts' most routed ones resident (hot.h) */
    sl__defer defer;            /* Expert Deferral (defer.h) */
};

/* engine.c: a host buffer that takes part in device copies: page-aligned and page-locked with
 * the model's device where a weight lives there (a copy from pageable memory runs
 * synchronously), else plain malloc; `what` names it in errors. Free with
 * sl__ctx_host_buf_free (NULL allowed). */
sl_status sl__ctx_host_buf_alloc(sl_ctx *c, size_t bytes, const char *what, void **out,
                                 sl_error *err);
void sl__ctx_host_buf_free(sl_ctx *c, void *p);

/* ctx_dev.c: the device side. Decides which layers run on the device (those whose attention
 * weights are device-resident), checks that each layer's weights sit on one side (experts may
 * be on the host: experts-on-CPU), and takes the device buffers, the device KV slots of those
 * layers, the rope factors and (cuda) the GEMM workspace, expert scratch and expert pointer
 * arrays from the model's arena. No device layer and a host output: nothing (dev.dx NULL).
 * work_bytes: the CPU matvec workspace the sim executor needs. */
sl_status sl__ctx_dev_create(sl_ctx *c, size_t work_bytes, sl_error *err);
/* The one layout of a side's [cap][...] buffers (x .. topk_w, pos, topk_idx; 256-byte
 * aligned): with base, points s's buffers into it; returns the bytes it needs either way. */
size_t sl__side_carve(const sl_ctx *c, sl__side *s, void *base);
/* bytes of the model's arena for the context's life (freed with the device side): one of its
 * SL__CTX_MAX_DEV_BLOCKS blocks */
sl_status sl__ctx_dev_take(sl_ctx *c, uint64_t bytes, void **p, sl_error *err);
void sl__ctx_dev_destroy(sl_ctx *c);
/* The device side's part of the context's refresh (engine.c): the rope factors (a
 * device-resident tensor's address, or the context's own copy rewritten from the host tensor),
 * cuda's device arrays of expert pointers (rewritten in place), the sim executor recreated
 * when the CPU workspace grew (work_bytes). SL_ERR_UNSUPPORTED when a layer's experts moved to the device side that the
 * context has no arrays for, or the rope factors changed size (recreate the context). */
sl_status sl__ctx_dev_refresh(sl_ctx *c, size_t work_bytes, sl_error *err);
/* Its part that follows weight addresses alone (a runtime moved the model, types and bytes
 * unchanged): a device-resident rope tensor's address and cuda's expert pointer arrays. */
sl_status sl__ctx_dev_rebind(sl_ctx *c, sl_error *err);
/* Whether the context's CUDA contexts launch with programmatic dependent launch: not
 * sl_ctx_options.no_pdl, nor after a decode graph was captured only without it. */
bool sl__ctx_pdl(const sl_ctx *c);
/* Turns it on (as sl__ctx_pdl allows) or off in the device executor and the hot experts' and
 * prefill streaming's CUDA contexts. */
void sl__ctx_set_pdl(sl_ctx *c, bool on);

/* forward.c: evaluates tokens[0..n) (n <= cap) at positions n_past.. and appends them to the
 * cache; writes the logits rows of tokens out_from..n-1 (0 <= out_from < n) into logits_out
 * (NULL: none; the output layer runs for those rows only). Does not advance n_past (the
 * caller does on success).
 * greedy non-NULL (with out_from n-1 and logits_out a host row of scratch): *greedy = the
 * greedy pick of the last token, taken by the executor of the side the output layer runs on;
 * the logits then stay there (logits_out's content is unspecified).
 * c->hidden_out non-NULL: the output-normed hidden state of all n rows goes there too. */
sl_status sl__forward(sl_ctx *c, const int32_t *tokens, int64_t n, float *logits_out,
                      int64_t out_from, int32_t *greedy, sl_error *err);
/* The same pass over n_seqs sequences of distinct contexts of lead's model at once: tokens
 * [n] is their tokens in order (seqs[i].off the running sum of the n before it, n <= lead's
 * cap); each row is evaluated as its own context's sl__forward would (its position, its KV
 * cache), the weight matmuls over all n rows together. lead->batch_logits holds at least the
 * rows with logits (n_seqs > 1). No context's n_past is advanced. */
sl_status sl__forward_batch(sl_ctx *lead, const sl__seq *seqs, int32_t n_seqs,
                            const int32_t *tokens, int64_t n, sl_error *err);
/* The rows with logits of the pass in progress (c->seqs), moved to rows 0.. of buf
 * [n][width] (host memory) in order, as the last layer keeps them past its attention (when it
 * keeps fewer than the pass's rows); returns their count. Expert Deferral's pending rows. */
int64_t sl__forward_keep_rows(const sl_ctx *c, float *buf, int64_t width);
/* forward_graph.c: drops the context's decode graph (what it captured may point at moved
 * memory): engine.c's refresh or rebind of the context and the device side's destroy call
 * it; the next one-token pass captures anew. */
void sl__forward_graph_drop(sl_ctx *c);

/* arch_qwen3next.c: the recurrent state of a context whose model has recurrent layers
 * (create/free: nothing for the others), the pass's bracket (begin: SL_ERR_UNSUPPORTED unless
 * the state is at n_past; n_past 0 resets it; end: it advanced by n tokens, or failed), a
 * rewind (to 0, n_past, or the checkpoint, which it restores: the state after the first n - 1
 * tokens of the last pass of n > 1; SL_ERR_UNSUPPORTED otherwise), and the layer steps
 * forward.c dispatches: the Gated DeltaNet mixer from s->xn into s->att (its out projection
 * ssm_out is the layer's L->wo, applied by forward.c's layer()), and the gated
 * attention's split of s->g (q | gate per head) into s->q and s->u and its s->att *=
 * sigmoid(s->u). */
sl_status sl__rs_create(sl_ctx *c, sl_error *err);
void sl__rs_free(sl_ctx *c);
sl_status sl__rs_begin(sl_ctx *c, sl_error *err);
void sl__rs_end(sl_ctx *c, int64_t n, bool ok);
sl_status sl__rs_rewind(sl_ctx *c, int32_t n_past, sl_error *err);
sl_status sl__qwen3next_linear(sl_ctx *c, const sl__side *s, int32_t il, int64_t n,
                               sl_error *err);
sl_status sl__qwen3next_q_split(sl_ctx *c, const sl__side *s, int64_t n, sl_error *err);
sl_status sl__qwen3next_att_gate(sl_ctx *c, const sl__side *s, int64_t n, sl_error *err);

#endif
