/* runtime/engine/stream: a prefill's host experts streamed through the device — llama.cpp's
 * op offload for MoE. A device layer whose routed experts live on the host computes them on the
 * CPU, token by token (expert by expert); for a batch of at least min_tokens tokens
 * (`--sched prefill_stream=N`, default 32, llama.cpp's offload batch; 0: never) the layer's
 * experts are instead copied into one device staging buffer — gate, up and down as they lie in
 * host memory (one copy a run of adjacent experts: a projection for a merged GGUF tensor
 * without resident ones), their biases — and the device
 * executor runs the layer's experts there (cuda: the grouped product on the tensor cores), so
 * one copy over PCIe serves every token of the batch. Experts the context keeps resident
 * (hot.h, once its set is loaded) are read where they are, not copied again.
 *
 * Q4_K experts the CPU holds repacked (Q4_K_R8) are copied as they are and turned back into
 * Q4_K on the device (cuda: kernels/cuda/repack.h; sim: kernels/ref's undo as a host function
 * in stream order), so the view is the device's layout on both, as a scheduler that computes
 * "device" experts expects. Everything is enqueued on the model's stream in order, so the buffer is reused layer
 * after layer, and by every context of the model, with no wait of the host: one buffer per
 * model (model.h stream_buf: the largest layer's bytes, sl__stream_layer_bytes), taken from the
 * model's arena by the first context that streams, a streamed layer's copies and compute
 * enqueued under the model's stream_mu. A device without room for it leaves streaming off (not
 * an error). Its bytes are part of the placement's device reserve on cuda (weight.c
 * sl__model_stream_reserve_bytes) for a plan that leaves a device layer's experts on the
 * host, so a --vram-budget holds it where it is needed.
 *
 * Invariants (sl__stream_validate), per context: !on (nothing to stream) or view and hp
 * hold n_layer entries ([n_layer][3][n_expert] pointers) and, on cuda, dp a device copy's room
 * and cu a context on the model's stream. */
#ifndef SL_RUNTIME_ENGINE_STREAM_H
#define SL_RUNTIME_ENGINE_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/cuda/ctx.h"
#include "scheduler/moe/moe.h"

struct sl_ctx;
struct sl_model;
struct sl__side;

typedef struct sl__stream {
    int64_t min_tokens;   /* 0: never */
    bool on;              /* some layer of this context streams (setup found one) */
    sl_moe_layer *view;   /* [n_layer]: the layer being streamed, pointing into buf */
    const void **hp;      /* [n_layer][3][n_expert]: the view's expert pointers */
    bool *on_dev;         /* [n_expert], all true: the view's on_device */
    bool *skip;           /* [n_expert] scratch: the layer's experts resident already (hot.h) */
    struct sl__r8_undo *undo; /* sim: [n_layer][3] host-function arguments (below) */
    const void **dp;      /* cuda: their device arrays (same shape), else NULL */
    sl_cuda_ctx *cu;      /* cuda: the Q4_K_R8 undo's context, else NULL */
} sl__stream;

/* The staging bytes of one layer from its regions' bytes: gate, up and down experts (all of a
 * projection's), then their three biases (0: none), each 256-byte aligned. The one rule of the
 * layout, for the buffer and for the placement's reserve (weight.c, before the layers' expert
 * views exist). */
uint64_t sl__stream_bytes_of(const uint64_t bytes[6]);
/* One expert's rows, columns and device bytes per projection (gate, up, down) of layer H, in
 * the device's type (a repacked Q4_K_R8 has Q4_K's); false when a type has no row size. The
 * staging buffer's and the hot experts' (hot.h) rule. */
bool sl__expert_shape(const sl_moe_layer *H, int64_t rows[3], int64_t cols[3], uint64_t pb[3]);
/* Bytes layer il's routed experts (and their biases) take in the staging buffer, as the device
 * reads them; 0 for a layer without routed experts or split hot / cold. */
uint64_t sl__stream_layer_bytes(const struct sl_model *m, int32_t il);

/* A device layer of c whose routed experts are all on the host, whole (not split), in types
 * the device's executor computes (a Q4_K_R8 one through the undo below): what streams, and
 * what may keep hot experts on the device (hot.h). */
bool sl__experts_streamable(const struct sl_ctx *c, int32_t il);

/* The device's Q4_K from a copy of Q4_K_R8 rows (rows of whole groups of 8, cols of whole
 * blocks), in place and in stream order: on cuda through cu (a context on the model's
 * stream), else (sim: cu NULL) by kernels/ref's undo in a host function reading *rec, which
 * must live until the stream has passed it. Streamed layers and hot experts (hot.h). */
typedef struct sl__r8_undo {
    void *data;
    int64_t rows, cols;
} sl__r8_undo;
sl_status sl__r8_undo_enqueue(const struct sl_ctx *c, sl_cuda_ctx *cu, sl__r8_undo *rec,
                              void *data, int64_t rows, int64_t cols, sl_error *err);

/* Frees the model's buffer after the stream has passed its work (model close; a runtime's
 * eviction, when no context of the model is evaluating); the next streamed layer takes it
 * again. Takes the model's stream_mu. */
void sl__stream_release(struct sl_model *m);

/* At the end of the device side's creation (ctx_dev.c): the arrays when some device layer's
 * experts are on the host, min_tokens > 0 and the context's batch reaches it. */
sl_status sl__stream_setup(struct sl_ctx *c, sl_error *err);
void sl__stream_free(struct sl_ctx *c);
sl_status sl__stream_validate(const struct sl_ctx *c, sl_error *err);

/* Whether device layer il's host experts stream for a batch of n tokens (2 or more: a
 * one-token pass never streams; takes the model's buffer the first time). */
bool sl__stream_wanted(const struct sl_ctx *c, int32_t il, int64_t n);
/* Streams layer il's experts and runs them on side s (the device) for the n tokens of s's
 * routing: s->tmp = the experts' sum, as the executor's moe step gives it. */
sl_status sl__stream_moe(struct sl_ctx *c, const struct sl__side *s, int32_t il, int64_t n,
                         sl_error *err);

#endif
