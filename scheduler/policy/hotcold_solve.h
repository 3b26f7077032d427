/* hotcold_solve: which FFN neurons live on the GPU (PowerInfer's hot/cold split), chosen from
 * activation statistics, neuron sizes, a VRAM budget and measured bandwidths.
 *
 * Cost model (per decoded token; a neuron is row i of gate and up and column i of down):
 *   w_i       = p_i for a sparse layer (ReLU-like: neuron i is read only when it fires, with
 *               probability p_i), 1 for a dense layer (every neuron is read every token),
 *               times r_e for routed experts (neuron i of expert e is read only by the tokens
 *               routed to e, probability r_e; p_i is then the probability given routed)
 *   cpu_bytes = cpu_base_bytes + sum over cold neurons of neuron_bytes_cpu(layer) * w_i
 *   gpu_bytes = gpu_base_bytes + sum over hot neurons  of neuron_bytes_gpu(layer) * w_i
 *   bound     = max(cpu_bytes / cpu_bytes_per_s, gpu_bytes / gpu_bytes_per_s)
 *   subject to vram = sum over hot neurons of neuron_bytes_gpu(layer) <= vram_budget_bytes.
 * Both sides run at once and are memory-bound, so the slower one sets the token time (the
 * DESIGN.md bound without PCIe: nothing moves per token). With granularity g, neurons are hot
 * or cold in groups [k*g, (k+1)*g) (the last group may be shorter): down's quantization blocks
 * run along the FFN dimension, so a slice of down can only be cut at block boundaries. With
 * routed experts the groups are counted within each expert (an expert's down is its own
 * tensor slice), so no group spans two experts.
 *
 * Solver: items are the groups. (1) Greedy: each ordering of a family (by CPU time saved per
 * unit of "price" = GPU time added + mu * VRAM, mu from 0 to infinity) is filled under the
 * budget and cut where the two sides cross; a local search over the items at the boundary of
 * the order (add, drop, swap 1-1, 2-1, 1-2) improves the best. (2) Lower bound: the LP
 * relaxation's optimum through its dual. (3) When the greedy is not proven within 0.1% of that
 * bound, and the items are few enough (<= 4096) for it to matter, a depth-first branch and
 * bound (at most 2^18 nodes) searches for better. On model-sized inputs the items are fine and
 * (1) is already proven within ~0.1%; on tiny inputs one item is several percent of the total
 * and (3) closes the gap: on 4,000 random instances of up to 14 neurons in 1-3 layers the
 * solver is within 1% of exhaustive search, and so on 4,000 MoE instances of up to 14 neurons
 * in 2-4 experts a layer (the greedy alone is not: a coarse knapsack can need a 3-for-1
 * exchange). Deterministic: ties break by layer, then neuron.
 *
 * Contract: pure functions, no globals; results own their memory (sl_hotcold_plan_free). */
#ifndef SL_SCHEDULER_HOTCOLD_SOLVE_H
#define SL_SCHEDULER_HOTCOLD_SOLVE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "scheduler/policy/gpuidx.h"

typedef struct sl_hotcold_layer {
    uint32_t n_neuron;
    /* [n_neuron] activation probability per token, each in [0, 1]; read only when !dense (may
     * be NULL then). Frequencies measured as counts must be divided by the token count. */
    const float *freq;
    bool dense;                /* no activation sparsity: every neuron costs its full bytes */
    /* Bytes of one neuron (gate row + up row + down column) as stored for each side; may be
     * fractional (a quantized down column's share of its blocks). The GPU figure is also the
     * neuron's VRAM cost. */
    double neuron_bytes_cpu;
    double neuron_bytes_gpu;
    /* Routed experts: n_expert >= 2 experts of n_neuron / n_expert neurons each, expert-major
     * (neuron e * width + j; gpuidx.h's MoE layout), expert e routed with probability
     * route_p[e] ([n_expert]). 0 or 1: a dense FFN (route_p unread). */
    uint32_t n_expert;
    const float *route_p;
} sl_hotcold_layer;

/* Invariants (sl_hotcold_problem_validate): bandwidths > 0, bytes >= 0 and finite,
 * granularity >= 1, layers non-NULL when n_layer > 0, freq and route_p in [0, 1] where read;
 * an expert layer's n_neuron is a multiple of n_expert, and when any layer has experts, every
 * layer with neurons has the same n_expert (one .gpuidx expert count; a layer without routed
 * experts, such as a leading dense layer, has 0 neurons: it is base bytes). */
typedef struct sl_hotcold_problem {
    uint32_t n_layer;
    const sl_hotcold_layer *layers;
    uint64_t vram_budget_bytes;   /* VRAM for hot neurons alone */
    double cpu_bytes_per_s;       /* measured CPU memory bandwidth */
    double gpu_bytes_per_s;       /* measured HBM bandwidth */
    double cpu_base_bytes;        /* per-token bytes each side reads outside the split FFNs */
    double gpu_base_bytes;        /*   (attention, norms, output), 0 if not modelled */
    uint32_t granularity;         /* neurons per group, >= 1 (1, 32, 256 ...) */
    bool greedy_only;             /* skip the branch and bound (to measure the greedy alone) */
} sl_hotcold_problem;

typedef struct sl_hotcold_cost {
    double cpu_bytes, gpu_bytes;  /* per token, expected, base included */
    double cpu_s, gpu_s;          /* bytes / bandwidth */
    double bound_s;               /* max(cpu_s, gpu_s) */
    double vram_bytes;            /* hot neurons' storage */
} sl_hotcold_cost;

typedef struct sl_hotcold_plan {
    /* hot lists ascending; vram_capacity_bytes = the budget; n_expert = the layers' experts
     * (0 for dense FFNs) */
    sl_gpuidx idx;
    sl_hotcold_cost cost;
    /* No split within the budget has a lower bound than this (the LP relaxation's optimum, or
     * cost.bound_s itself when the search proved it optimal): cost.bound_s / lower_bound_s - 1
     * is the proven gap. */
    double lower_bound_s;
} sl_hotcold_plan;

sl_status sl_hotcold_problem_validate(const sl_hotcold_problem *p, sl_error *err);
/* Cost of a given split under p's model (idx must have p's layers and widths; granularity is
 * not checked, so any split can be compared). */
sl_status sl_hotcold_evaluate(const sl_hotcold_problem *p, const sl_gpuidx *idx,
                              sl_hotcold_cost *out, sl_error *err);
/* Chooses the hot neurons. On success *out owns its index (free with sl_hotcold_plan_free) and
 * out->cost.vram_bytes <= vram_budget_bytes; on failure *out is empty. */
sl_status sl_hotcold_solve(const sl_hotcold_problem *p, sl_hotcold_plan *out, sl_error *err);
void sl_hotcold_plan_free(sl_hotcold_plan *plan);

#endif
