/* The subcommands of `sluice place` (tools/commands/place*.c): argv after "place" (argv[0] is the
 * subcommand); each returns the exit status and prints its own errors. */
#ifndef SL_CLI_PLACE_H
#define SL_CLI_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/sluice.h"
#include "scheduler/policy/hotcold_solve.h"
#include "scheduler/policy/placement.h"

/* Bytes one decode step reads on each side under an open model's plan (scheduler/policy/placement):
 * routed experts count n_expert_used / n_expert of their bytes, an untied token_embd one row
 * (it is read by row on the host), a split FFN tensor its hot share on the device. *mode (may
 * be NULL): what the plan resolved to. */
typedef struct sl_cli_token_bytes {
    double dev, host;
} sl_cli_token_bytes;
sl_cli_token_bytes sl_cli_plan_token_bytes(const sl_model *m, sl_placement *mode);
/* What an open model's plan resolved to, as text for a benchmark row: the mode's name
 * (auto's choice, never "auto"), with " ngl N" for layers and " n-cpu-moe K" for a device
 * placement that keeps the experts of K layers on the host; "unknown" without a plan. */
void sl_cli_plan_describe(const sl_model *m, char *buf, size_t cap);
/* Device bandwidth in GB/s for the bound: the copy roofline on cuda, host_gbps on sim. */
double sl_cli_device_gbps(const char *kind, double host_gbps);

int sl_cli_place_profile(int argc, char **argv);
int sl_cli_place_solve(int argc, char **argv);

/* The hot/cold problem of a model (place solve, bench decode's hot-cold row): its split FFN
 * bytes per layer (a dense model's FFNs; a MoE model's routed experts, all of a layer's
 * experts together), down's block granule, and the device bytes left for hot neurons under
 * mo.vram_budget (or free memory) once everything else is on the device (a MoE model's
 * attention, router, shared experts, leading dense FFNs, output: base bytes). */
typedef struct sl_cli_hotcold_model {
    int32_t n_layer;
    int32_t n_expert;           /* routed experts per layer; 0: dense FFNs */
    int64_t n_ff;               /* FFN width; an expert's for MoE */
    uint32_t granule;
    double *bytes;              /* [n_layer]: gate + up + down bytes (0: no routed experts) */
    uint64_t hot_budget;
    double base_device_bytes;
} sl_cli_hotcold_model;

/* 0, or 1 after printing why (an unreadable file, a budget too small for the base). */
int sl_cli_hotcold_model_get(const char *cmd, const char *path, sl_model_options mo,
                             sl_cli_hotcold_model *hm);
void sl_cli_hotcold_model_free(sl_cli_hotcold_model *hm);
/* The one conversion of a profile's counts into what the solver weighs, for a stats file
 * (place solve) and a profile in memory (sl_cli_hotcold_profile) alike: layer il's
 * freq[il][e * n_ff + j] = act[e * n_ff + j] / tokens routed to expert e (dense: / tokens) and,
 * with experts, route_p[il][e] = routed[e] / tokens. act [X * n_ff] and routed [X] (NULL for
 * dense) are the stats file's blk.N.ffn_act_count and blk.N.ffn_expert_count; a count outside
 * [0, its tokens] is refused: 1 with err naming the entry. */
int sl_cli_hotcold_layer_freq(const sl_cli_hotcold_model *hm, int32_t il, uint64_t tokens,
                              const int32_t *routed, const int32_t *act, float *freq,
                              float *route_p, sl_error *err);
/* The profile c recorded (sl_ctx_options.neuron_stats) as place solve reads it from the stats
 * file place profile would write: freq [n_layer][X * n_ff], route_p [n_layer][X] (X = n_expert,
 * 1 for dense), the layers with split bytes filled. 0, or 1 with err. */
int sl_cli_hotcold_profile(const sl_ctx *c, const sl_model_info *in,
                           const sl_cli_hotcold_model *hm, float *freq, float *route_p,
                           sl_error *err);
/* Solves with per-neuron activation frequencies freq [n_layer][n_ff] (MoE: [n_layer]
 * [n_expert * n_ff], given the expert is routed) and, for MoE, the routing probabilities
 * route_p [n_layer][n_expert] (NULL for dense), and the bandwidths. */
int sl_cli_hotcold_solve(const char *cmd, const sl_cli_hotcold_model *hm, const float *freq,
                         const float *route_p, double cpu_gbs, double gpu_gbs,
                         sl_hotcold_plan *plan);

#endif
