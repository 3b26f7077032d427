/* Private to tools/commands/synth*.c: the tensor plan, the bytes of each row, the threaded writer.
 *
 * Split: synth.c decides what a file contains (architectures, metadata) and synth_plan.c
 * which tensors it holds; synth_rows.c decides the bytes of every tensor row (deterministic
 * numbers, router and neuron skew, resampling from a pool of quantized rows); synth_stream.c
 * runs synth_rows.c on a set of threads and hands the bytes to the GGUF writer in file order.
 *
 * Determinism contract: the bytes of row r of tensor t are a function of (params, t, r) only
 * (plus, for pooled tensors, the tensor's pool, itself a function of (params, t)). No stream is
 * shared between rows, so any split of the rows among threads writes the same file.
 */
#ifndef SL_TOOLS_SYNTH_IMPL_H
#define SL_TOOLS_SYNTH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "base/status.h"
#include "tools/synth/synth.h"

typedef enum sl__synth_kind {
    SL__K_EMBD,      /* token_embd: reserved channel in column 0 (MoE) */
    SL__K_OUTPUT,    /* output: input column 0 zero (MoE) */
    SL__K_NORM,      /* F32 norm weights */
    SL__K_IN,        /* matmul reading the residual stream: column 0 zero (MoE) */
    SL__K_OUT,       /* matmul writing the residual stream: row 0 zero (MoE) */
    SL__K_ROUTER,    /* ffn_gate_inp */
    SL__K_BIAS,      /* F32 biases that do not reach the residual stream (q/k/v, router,
                      * gate/up), attention sinks */
    SL__K_DECAY,     /* F32 -exp(0.5 g): qwen3next's ssm_a (-exp(A_log), the state's decay) */
    SL__K_BIAS_OUT,  /* F32 biases added to the residual stream (attn_output, ffn_down_exps):
                      * entry 0 zero (MoE) */
    SL__K_ROPE_LONG, /* LongRoPE factors, rising from 1 to ~5 over the pairs (F32) */
    SL__K_ROPE_SHORT, /* LongRoPE factors near 1 (1 to ~1.2, F32) */
} sl__synth_kind;

/* Which neuron-skew table a tensor's rows follow (gate and up of one FFN share it). */
typedef enum sl__synth_neurons {
    SL__NEURONS_NONE = 0,
    SL__NEURONS_FFN,    /* ffn_gate/ffn_up (dense) or ffn_gate_exps/ffn_up_exps (routed) */
    SL__NEURONS_SHEXP,  /* qwen2moe's ffn_gate_shexp/ffn_up_shexp */
} sl__synth_neurons;

typedef struct sl__synth_tensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[SL_GGUF_MAX_DIMS];   /* ne[1] * ne[2] rows of ne[0] elements */
    sl__synth_kind k;
    sl__synth_neurons neurons;
    int layer;                      /* block index; -1 outside the blocks */
} sl__synth_tensor;

/* What a tensor needs before its rows can be made, filled by the prep steps.
 * Invariants: pooled => pool holds SL__SYNTH_POOL_ROWS rows of row_bytes once every step has
 * run; neuron_scale != NULL <=> t->neurons != NONE && neuron_skew > 0; router_bias != NULL <=>
 * t->k == ROUTER; zero_row != NULL <=> pooled && t->k == OUT && the arch is MoE. */
typedef struct sl__synth_prep {
    uint64_t key;           /* FNV-1a(name) ^ seed: root of every stream of the tensor */
    size_t row_bytes;
    bool pooled;            /* rows are resampled from `pool` (see synth_rows.c) */
    uint32_t n_steps;       /* sl__synth_prep_step calls needed, any order, any threads */
    double *router_bias;    /* [ne[1]] logit offsets */
    int32_t *router_group;  /* [ne[1]] topic group of each expert (--router-topics), or NULL */
    int64_t zero_rows;      /* pooled OUT rows r with r % ne[1] below this are zero_row */
    float *neuron_scale;    /* [ne[2]][ne[1]] per-neuron factors, mean square 1 per expert */
    uint8_t *pool;          /* [SL__SYNTH_POOL_ROWS][row_bytes] packed rows */
    uint8_t *zero_row;      /* [row_bytes] the packed all-zero row */
} sl__synth_prep;

enum { SL__SYNTH_POOL_ROWS = 256 };
/* Router logit the experts of the current topic get (synth.c, "Temporal locality"). */
#define SL__SYNTH_TOPIC_LOGIT 4.0
/* and the factor of its embeddings (the greedy walk survives deep models) */
#define SL__SYNTH_TOPIC_EMBD_SCALE 8.0

/* The plan's capacity: SL__SYNTH_PLAN_FIXED + SL__SYNTH_PLAN_PER_LAYER * layers tensors */
enum { SL__SYNTH_PLAN_PER_LAYER = 32, SL__SYNTH_PLAN_FIXED = 8 };
/* qwen3next: full attention on every 4th layer (full_attention_interval), conv taps */
enum { SL_SYNTH_QWEN3NEXT_FULL_ATTN = 4, SL_SYNTH_QWEN3NEXT_CONV = 4 };

/* deepseek2's MLA and routing dimensions (and the leading dense layers deepseek2 and glm4moe
 * share): the explicit ones, else derived (synth.h). */
typedef struct sl__synth_mla {
    int64_t q_lora, kv_lora, nope, rope, v, dense, group, group_used;
} sl__synth_mla;
sl__synth_mla sl__synth_mla_of(const sl_synth_params *p);
/* The attention heads' size: --head-dim, else --dim / --heads. */
uint32_t sl__synth_head_dim(const sl_synth_params *p);
/* Rotary dimensions the file declares (rope.dimension_count). */
uint32_t sl__synth_n_rot(const sl_synth_params *p);
/* Fills t (capacity above) with the model's tensors in file order; returns their count. */
uint32_t sl__synth_plan(const sl_synth_params *p, sl__synth_tensor *t);

/* Whether t's rows are resampled from a pool (synth_rows.c) rather than made exactly. */
bool sl__synth_pooled(const sl_synth_params *p, const sl__synth_tensor *t);
/* Allocates s's buffers for t and decides pooling; cheap (no generation). SL_ERR_NOMEM. On
 * failure s holds nothing to free beyond what sl__synth_prep_free releases. */
sl_status sl__synth_prep_init(const sl_synth_params *p, const sl__synth_tensor *t,
                              sl__synth_prep *s, sl_error *err);
/* Runs prep step `step` (< s->n_steps); distinct steps write disjoint parts of s, so they may
 * run concurrently. scratch: ne[0] floats. Errors from the quantizer. */
sl_status sl__synth_prep_step(const sl_synth_params *p, const sl__synth_tensor *t,
                              sl__synth_prep *s, uint32_t step, float *scratch, sl_error *err);
/* Frees s's buffers and zeroes it; NULL buffers allowed. */
void sl__synth_prep_free(sl__synth_prep *s);
/* Packed rows [r0, r1) of t into dst ((r1 - r0) * s->row_bytes bytes), once every prep step
 * of s has run. Thread-safe for concurrent calls on one s. scratch: ne[0] floats. */
sl_status sl__synth_rows(const sl_synth_params *p, const sl__synth_tensor *t,
                         const sl__synth_prep *s, int64_t r0, int64_t r1, uint8_t *dst,
                         float *scratch, sl_error *err);

/* Writes the data of t[0 .. n_t) in order through w (tensors declared, metadata set), making
 * rows on n_threads (>= 1) threads; the calling thread does the writing. Errors: the first
 * failure of any thread (quantizer, memory, thread start) or of the writer. */
sl_status sl__synth_stream(const sl_synth_params *p, const sl__synth_tensor *t, uint32_t n_t,
                           sl_gguf_writer *w, int n_threads, sl_error *err);

#endif
