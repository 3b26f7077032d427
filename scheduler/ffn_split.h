/* scheduler/ffn_split: a dense FFN split by neurons (PowerInfer's hot/cold) into two compact
 * FFNs whose outputs sum to the whole: hot neurons on the device, cold ones on the CPU.
 *
 * Neuron j of an FFN with gate/up [n_ff][n_embd] (rows) and down [n_embd][n_ff] is row j of
 * gate and up and column j of down. Rows can be picked one by one; down's quantization blocks
 * run along n_ff, so its columns can only be picked in whole blocks of its type
 * (sl_ffn_split_granule: 32 for Q8_0, 256 for the K-quants, 1 for F32/F16/BF16). Sluice
 * therefore splits at that granule — a part's down is then a valid matrix of the same type
 * with fewer columns, computed by the ordinary kernels — instead of keeping a transposed copy
 * of down (PowerInfer's ffn_down_t), which would need its own kernels and a second copy.
 * A granule is hot when at least half of its neurons are hot in the index.
 *
 * Numerics: with the granule aligned to the activation quantization blocks, each part
 * quantizes its activations exactly as the whole would; only the sum over neurons is split
 * in two (hot + cold, in that order), so the result differs from the unsplit FFN by rounding
 * (~1e-7 relative) and is identical from run to run.
 *
 * Routed experts: each expert of a layer is split the same way, by its own stretch of the
 * granule mask (the MoE .gpuidx is expert-major, scheduler/gpuidx.h). One side's parts of all
 * experts are packed into three blobs (all gate' slices in ascending expert order, then up',
 * then down'), and that side is described as an sl_moe_layer of per-expert widths (moe.h
 * ff_at), which the one CPU expert routine (expert_ffn.h) and the executors run like any
 * layer. act() is per neuron and the router weight is linear, so
 *   sum_e w_e (down_e act(...) + bd_e) = sum_e w_e hot_e + sum_e w_e (cold_e + bd_e):
 * each side's weighted sum is computed whole (ascending experts) and the two are added hot,
 * then cold. gate/up biases go with their neurons; down's bias with the cold side only.
 */
#ifndef SL_SCHEDULER_FFN_SPLIT_H
#define SL_SCHEDULER_FFN_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/status.h"
#include "scheduler/moe.h"

/* Neurons per granule for a down matrix of ggml type `type_down` (0: unknown type). */
int64_t sl_ffn_split_granule(uint32_t type_down);

/* From a per-neuron hot mask (n_ff entries), the per-granule choice: hot_granule[k] for
 * k < n_ff / granule; returns the number of hot neurons. n_ff must be a multiple of granule. */
int64_t sl_ffn_split_round(const bool *hot, int64_t n_ff, int64_t granule, bool *hot_granule);

/* Gathers one part: the neurons of the granules whose hot_granule[k] == want into compact
 * gate'/up' [n_part][n_embd] and down' [n_embd][n_part] (row bytes by type; dst buffers sized
 * by sl_ffn_split_part_bytes). Sources are host memory. */
typedef struct sl_ffn_split_src {
    uint32_t type_gate, type_up, type_down;
    int64_t n_embd, n_ff, granule;
    const void *gate, *up, *down;
} sl_ffn_split_src;

/* Bytes of a part of n_part neurons: gate', up', down'. */
void sl_ffn_split_part_bytes(const sl_ffn_split_src *s, int64_t n_part, uint64_t bytes[3]);

sl_status sl_ffn_split_gather(const sl_ffn_split_src *s, const bool *hot_granule, bool want,
                              void *gate, void *up, void *down, sl_error *err);

/* Routed experts (above): `whole` has host-addressable experts of n_ff neurons (no ff_at);
 * hot_granule[e * K + k] is granule k of expert e (K = n_ff / granule). Fills ff_at
 * [n_expert + 1] for side `want` (true: hot) and the bytes of its gate, up and down blobs. */
void sl_ffn_split_experts_layout(const sl_moe_layer *whole, const bool *hot_granule,
                                 int64_t granule, bool want, int64_t *ff_at, uint64_t bytes[3]);
/* Gathers side `want` into blobs sized by sl_ffn_split_experts_layout (host memory), and the
 * side's gate/up bias entries into gate_b / up_b ([ff_at[n_expert]] floats; unused and may be
 * NULL when whole has no such bias). */
sl_status sl_ffn_split_experts_gather(const sl_moe_layer *whole, const bool *hot_granule,
                                      int64_t granule, bool want, const int64_t *ff_at,
                                      void *gate, void *up, void *down, float *gate_b,
                                      float *up_b, sl_error *err);
/* *out = the description of one side: whole's shape, types and activation, expert e's
 * matrices at pg[e], pu[e], pd[e] (filled here, [n_expert], pointing into the blobs gate, up,
 * down wherever they now live), ff_at, the side's biases, and down's bias only when
 * with_down_b. on_device as given. */
void sl_ffn_split_experts_part(const sl_moe_layer *whole, const int64_t *ff_at, const void *gate,
                               const void *up, const void *down, const float *gate_b,
                               const float *up_b, bool with_down_b, const bool *on_device,
                               const void **pg, const void **pu, const void **pd,
                               sl_moe_layer *out);

#endif
