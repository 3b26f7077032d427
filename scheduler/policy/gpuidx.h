/* gpuidx: PowerInfer's hot/cold neuron index (`MODEL.generated.gpuidx`), read and written.
 *
 * File format (PowerInfer's powerinfer-py export_split.py writes it, llama.cpp's
 * llama_gpu_split_loader reads it): a GGUF v3 file whose magic is "PWRI" instead of "GGUF"
 * (PowerInfer's gguf reader takes both), alignment 32, three KV in this order:
 *   general.architecture        string  "generic.gpu_index"
 *   generic.gpu_index.block_count  u32  n_layer
 *   split.vram_capacity          u64    VRAM bytes the split was solved for (PowerInfer's loader
 *                                       requires it and regenerates when budget < this value)
 * and 2 x n_layer one-dimensional I32 tensors, per layer in layer order:
 *   blk.N.gpu_idx     [n_neuron]  1 where FFN neuron i lives on the GPU, else 0
 *   blk.N.gpu_bucket  [n_hot]     the hot neuron indices, ascending (may be empty)
 * PowerInfer's loader takes tensor 2N as layer N's gpu_idx and 2N+1 as its bucket by position,
 * not by name, so the reader insists on that order. A layer with 0 or all neurons hot is "not
 * split" (the whole FFN is on one side; PowerInfer drops the bucket then).
 *
 * Routed experts (Sluice's extension; PowerInfer has no MoE index): one more KV,
 *   generic.gpu_index.expert_count  u32  X >= 2 experts per layer
 * and the same two tensors per layer over the layer's X experts' neurons, expert-major:
 *   blk.N.gpu_idx     [X * n_ff]  entry e * n_ff + j for neuron j of expert e
 *   blk.N.gpu_bucket  [n_hot]     those flat indices, ascending (so grouped by expert)
 * A file without the key is a dense index (X = 1), byte for byte what PowerInfer writes and
 * reads; a MoE index keeps PowerInfer's layout, so its tools can still list it. Errors in a MoE
 * index also name the expert and its neuron of the entry at fault.
 *
 * Contract: pure functions of their arguments, no globals; safe from several threads on
 * different objects. Errors are SL_ERR_FORMAT (SL_ERR_TYPE for a wrong tensor type, SL_ERR_RANGE
 * for a mismatch with the model) with a message naming the file, the layer and the value. */
#ifndef SL_SCHEDULER_GPUIDX_H
#define SL_SCHEDULER_GPUIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* One layer's split. Invariants (sl_gpuidx_validate):
 *   hot[i] in {0, 1} for i < n_neuron;  n_hot == |{i : hot[i] == 1}|;
 *   hot_list[0..n_hot) == {i : hot[i] == 1} in strictly ascending order.
 * Arrays are owned by the enclosing sl_gpuidx; either may be NULL when its length is 0. */
typedef struct sl_gpuidx_layer {
    uint32_t n_neuron;   /* FFN width (rows of gate/up, columns of down) */
    uint32_t n_hot;
    uint8_t *hot;        /* [n_neuron] mask */
    uint32_t *hot_list;  /* [n_hot] ascending */
} sl_gpuidx_layer;

/* Invariant: layers has n_layer entries (NULL iff n_layer == 0), each valid as above; with
 * n_expert > 1 every layer's n_neuron is a multiple of n_expert (n_neuron / n_expert each). */
typedef struct sl_gpuidx {
    uint32_t n_layer;
    uint32_t n_expert;   /* experts per layer of a MoE index (>= 2); 0 or 1: dense */
    sl_gpuidx_layer *layers;
    uint64_t vram_capacity_bytes; /* split.vram_capacity; 0 when the file lacks it */
} sl_gpuidx;

typedef struct sl_gpuidx_write_options {
    /* false (default): magic "PWRI" as PowerInfer's tool writes it; true: plain "GGUF", which
     * upstream llama.cpp and gguf-py tools can open (PowerInfer's loader accepts both). */
    bool gguf_magic;
} sl_gpuidx_write_options;

/* Fills *out with n_layer layers of n_neuron[l] neurons, all cold, dense (n_expert 0; set it
 * afterwards for a MoE index, n_neuron[l] then counting every expert's neurons). *out is
 * overwritten (not freed); on failure it is left empty. */
sl_status sl_gpuidx_init(sl_gpuidx *out, uint32_t n_layer, const uint32_t *n_neuron,
                         sl_error *err);
/* Makes exactly the neurons hot_list[0..n_hot) of `layer` hot (ascending, distinct, in range,
 * else SL_ERR_INVALID naming the entry); the layer's previous split is replaced. */
sl_status sl_gpuidx_set_layer(sl_gpuidx *idx, uint32_t layer, const uint32_t *hot_list,
                              uint32_t n_hot, sl_error *err);
/* True when the layer is split between the sides: 0 < n_hot < n_neuron. */
bool sl_gpuidx_layer_is_split(const sl_gpuidx_layer *l);
/* Checks every invariant above; SL_ERR_INVALID naming layer and neuron on the first broken. */
sl_status sl_gpuidx_validate(const sl_gpuidx *idx, sl_error *err);
/* Frees the arrays and zeroes *idx; NULL and an already freed index are allowed. */
void sl_gpuidx_free(sl_gpuidx *idx);

/* Reads `path`. expect_n_layer: the model's layer count (0: take the file's). expect_n_neuron:
 * NULL, or expect_n_layer entries, each the layer's FFN width (0: don't check that layer;
 * for a MoE index, experts x expert width); ignored when expect_n_layer is 0. The caller
 * checks out->n_expert against its model.
 * On success *out owns new arrays (free with sl_gpuidx_free); on failure *out is empty. */
sl_status sl_gpuidx_read(const char *path, uint32_t expect_n_layer,
                         const uint32_t *expect_n_neuron, sl_gpuidx *out, sl_error *err);
/* The same from a file image in memory (`name` labels messages); the fuzz entry point. */
sl_status sl_gpuidx_read_memory(const void *buf, size_t len, const char *name,
                                uint32_t expect_n_layer, const uint32_t *expect_n_neuron,
                                sl_gpuidx *out, sl_error *err);
/* Writes idx (validated first) to `path` in the format above. opt may be NULL (defaults). */
sl_status sl_gpuidx_write(const char *path, const sl_gpuidx *idx,
                          const sl_gpuidx_write_options *opt, sl_error *err);

#endif
