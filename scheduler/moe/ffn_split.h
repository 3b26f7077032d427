/* scheduler/ffn_split: a layer's FFN as parts (PowerInfer's hot/cold neurons): a dense FFN,
 * or each routed expert, split by neurons into a compact hot part (device) and cold part (CPU)
 * whose outputs sum to the whole. One description serves both: the FFN is an sl_moe_layer of
 * X experts (a dense FFN is one expert), and a side is the set of its experts' parts, packed
 * into three blobs (every expert's gate' slice in ascending expert order, then up', then
 * down') and described by where each expert's neurons start (ff_at, moe.h).
 *
 * Neuron j of an FFN with gate/up [n_ff][n_embd] (rows) and down [n_embd][n_ff] is row j of
 * gate and up and column j of down. Rows can be picked one by one; down's quantization blocks
 * run along n_ff, so its columns can only be picked in whole blocks of its type
 * (sl_ffn_split_granule: 32 for Q8_0, 256 for the K-quants, 1 for F32/F16/BF16). Sluice
 * therefore splits at that granule — a part's down is then a valid matrix of the same type
 * with fewer columns, computed by the ordinary kernels — instead of keeping a transposed copy
 * of down (PowerInfer's ffn_down_t), which would need its own kernels and a second copy.
 * A granule is hot when at least half of its neurons are hot in the index; an expert's
 * granules are its own stretch of the mask (the MoE .gpuidx is expert-major, gpuidx.h).
 *
 * Running the parts (runtime/engine/forward_ffn.c sl__forward_ffn_hot_cold, one path for both):
 * the hot side on the device while the host runs the cold side, then hot + cold, in that
 * order. A dense side is one compact FFN, run by the executors' matmuls (cuda included); an
 * expert side is the sl_moe_layer of sl_ffn_split_experts_part, run on host and sim by the
 * one CPU expert routine (expert_ffn.h) and on cuda by the expert GEMV over per-expert widths
 * (kernels/cuda/gemv.h sl_cuda_gemv_expert_parts), whose executor adds the part's biases and
 * applies its activation as that routine does (runtime/engine/dx_cuda.c; kernels/cuda/fwd.h
 * sl_cuda_expert_bias, ops.h sl_cuda_swiglu_oai). act() is per neuron and the router weight is
 * linear, so
 *   sum_e w_e (down_e act(...) + bd_e) = sum_e w_e hot_e + sum_e w_e (cold_e + bd_e):
 * each side's weighted sum is computed whole (ascending experts). gate/up biases go with
 * their neurons (sl_ffn_split_experts_gather slices them, for either side and device); down's
 * bias with the cold side only (sl_ffn_split_experts_part; an expert with no cold neurons
 * yields its bias there).
 *
 * Numerics: with the granule aligned to the activation quantization blocks, each part
 * quantizes its activations exactly as the whole would; only the sum over neurons is split
 * in two (hot + cold, in that order), so the result differs from the unsplit FFN by rounding
 * (~1e-7 relative) and is identical from run to run.
 */
#ifndef SL_SCHEDULER_FFN_SPLIT_H
#define SL_SCHEDULER_FFN_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "scheduler/moe/moe.h"

/* Neurons per granule for a down matrix of ggml type `type_down` (0: unknown type). */
int64_t sl_ffn_split_granule(uint32_t type_down);

/* From a per-neuron hot mask (n_ff entries), the per-granule choice: hot_granule[k] for
 * k < n_ff / granule; returns the number of hot neurons. n_ff must be a multiple of granule. */
int64_t sl_ffn_split_round(const bool *hot, int64_t n_ff, int64_t granule, bool *hot_granule);

/* `whole` has host-addressable experts of n_ff neurons (no ff_at; a dense FFN: one expert);
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
/* *out = the description of side `hot`: whole's shape, types and activation, expert e's
 * matrices at pg[e], pu[e], pd[e] (filled here, [n_expert], pointing into the blobs gate, up,
 * down wherever they now live), ff_at, the side's gate/up bias entries gate_b / up_b (where
 * they now live: the hot side's in device memory, read by that side's executor), and down's
 * bias (whole's) on the cold side only — the one place that rule is made, for every device
 * kind. on_device as given. */
void sl_ffn_split_experts_part(const sl_moe_layer *whole, const int64_t *ff_at, const void *gate,
                               const void *up, const void *down, const float *gate_b,
                               const float *up_b, bool hot, const bool *on_device,
                               const void **pg, const void **pu, const void **pd,
                               sl_moe_layer *out);

#endif
