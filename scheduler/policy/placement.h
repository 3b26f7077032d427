/* scheduler/policy/placement: the one policy that decides where every weight of a model lives.
 *
 * Input: the model's tensors (name, layer, group, bytes once loaded) and the user's controls,
 * which follow llama.cpp's meaning: a base mode (-ngl N = the LAST N layers on the device, and
 * the output matrix too when N > n_layer), tensor overrides (-ot REGEX=BUFT, first match wins,
 * searched in the tensor name), --cpu-moe / --n-cpu-moe N (routed experts of every layer / of
 * layers [0, N) on the host; applied after the -ot list), and a device budget for AUTO.
 * Output: a plan — per tensor host or device and the rule that decided it, bytes per side.
 *
 * Groups: a layer's tensors form groups that live on one side each, because the executor runs
 * a group's work in one place: CORE (attention, norms, router, shared expert; the layer "runs"
 * where its core is), FFN (a dense FFN's gate/up/down), EXPERTS (routed experts, merged or per
 * expert); OUTPUT (output_norm + output); EMBD (token_embd: on the host, read by row, unless it
 * is tied to the output matrix or overridden). Groups of one layer may sit on different sides
 * (the forward pass moves activations between them). Norm and bias vectors never decide a
 * side: they follow their group. Two matrices of one group placed on different sides by the
 * rules is an error naming both.
 *
 * AUTO: overridden tensors stay where the overrides put them; the rest goes all to the device
 * if it fits in the budget, else (MoE) all but the routed experts plus the experts of as many
 * of the LAST layers as fit (the --n-cpu-moe that fits), else the -ngl that fits. The budget is
 * vram_budget (or device_free / 10 * 9) less reserve_bytes (KV cache, scratch), and less
 * stream_bytes for a candidate that leaves a device layer's routed experts on the host.
 * Pure: no I/O, no allocation beyond the plan.
 */
#ifndef SL_SCHEDULER_PLACEMENT_H
#define SL_SCHEDULER_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "scheduler/policy/place_mode.h"

/* Base modes: the one table of modes (place_mode.h), which sluice.h exports. */


typedef enum sl_place_group {
    SL_PG_EMBD = 0,
    SL_PG_OUTPUT,
    SL_PG_CORE,
    SL_PG_FFN,
    SL_PG_EXPERTS,
    SL_PG_COUNT
} sl_place_group;

typedef struct sl_place_tensor {
    const char *name;       /* llama.cpp's tensor name */
    int32_t layer;          /* -1 outside the layers */
    sl_place_group group;
    bool vector;            /* norm or bias (1-D): follows its group */
    bool tied;              /* token_embd serving as the output matrix too */
    bool no_device;         /* the device cannot compute it (no kernel for its type) */
    uint64_t bytes;         /* bytes once loaded */
    const char *type_name;  /* for the printed plan (may be NULL) */
} sl_place_tensor;

typedef struct sl_place_options {
    sl_placement mode;
    int32_t n_gpu_layers;        /* LAYERS: the last N layers; > n_layer: output too */
    const char *override_tensor; /* "REGEX=BUFT[,REGEX=BUFT...]", BUFT CPU | CUDA0 | GPU */
    bool cpu_moe;                /* every layer's routed experts on the host */
    int32_t n_cpu_moe;           /* routed experts of layers [0, N) on the host */
    uint64_t vram_budget;        /* device bytes for weights + reserve; 0: 90% of device_free */
    uint64_t device_free;        /* free device memory (0: unknown, no fit check) */
    uint64_t reserve_bytes;      /* device bytes needed besides weights (KV, scratch) */
    /* device bytes needed besides those only by a plan that leaves a device layer's routed
     * experts on the host (a prefill's staging buffer, runtime/engine/stream.h): taken off
     * such a plan's budget, not off one that puts every layer's experts with the layer */
    uint64_t stream_bytes;
    /* HOT_COLD: per layer, the fraction of its dense FFN's neurons that are hot (0: the FFN
     * stays on the host, 1: it goes to the device whole, else it is split); NULL: none */
    const float *ffn_hot_frac;
    /* HOT_COLD: the index splits each layer's routed experts (a MoE index), ffn_hot_frac being
     * the hot fraction of all its experts' neurons; dense FFNs (leading dense layers, shared
     * experts) then go whole with the layer */
    bool split_experts;
} sl_place_options;

/* Who decided a tensor's side. */
enum { SL_PLACE_BY_MODE = -1, SL_PLACE_BY_GROUP = -2, SL_PLACE_BY_CPU_MOE = -3,
       SL_PLACE_BY_DEVICE = -4, SL_PLACE_BY_INDEX = -5 };

enum { SL_PLACE_MAX_OVERRIDES = 64 };

/* Invariants (sl_place_plan_validate): n tensors, on_device/by of length n; every group of a
 * layer on one side (a split FFN: its hot parts on the device, the rest on the host);
 * device_bytes + host_bytes == sum of bytes (a split tensor counts hot_frac on the device);
 * mode != AUTO. */
typedef struct sl_place_plan {
    size_t n;
    bool *on_device;             /* [n] (a split tensor: false, its hot part is on the device) */
    bool *split;                 /* [n]: split by neurons (HOT_COLD), hot part on the device */
    float *hot_frac;             /* [n]: the hot fraction of a split tensor, else 0 */
    int16_t *by;                 /* [n]: override index >= 0, or SL_PLACE_BY_* */
    sl_placement mode;          /* what AUTO resolved to (GPU, LAYERS, EXPERTS_CPU or CPU) */
    int32_t n_gpu_layers;        /* resolved -ngl (LAYERS); n_layer + 1 for GPU */
    int32_t n_cpu_moe;           /* resolved --n-cpu-moe (AUTO on a MoE model), else -1 */
    uint64_t device_bytes, host_bytes;
    uint64_t budget;             /* device bytes for weights (reserve taken off) */
    bool budget_known;           /* false: no budget and no device memory figure: no check */
    int n_override;
    char override_text[SL_PLACE_MAX_OVERRIDES][96]; /* "REGEX=BUFT" as given */
    char why[160];               /* one line: how AUTO decided, or the mode */
} sl_place_plan;

/* Group, layer and vector-ness of a tensor from its llama.cpp name and dimension count;
 * n_expert > 0 tells per-expert tensors ("blk.N.ffn_gate.E.weight") from dense ones. */
void sl_place_classify(const char *name, uint32_t n_dims, int32_t n_expert,
                       sl_place_tensor *out);

/* Checks an override list's syntax (regexes compile, BUFT known); the error names the entry. */
sl_status sl_place_overrides_check(const char *list, sl_error *err);

/* Resolves the plan (allocates its arrays; free with sl_place_plan_free). Errors: a bad
 * override, a group split by the rules (naming two tensors and their rules), CPU mode with a
 * device override, and a device share larger than the budget or free memory (naming the
 * tensor that crosses it and the sizes). */
sl_status sl_place_resolve(const sl_place_tensor *t, size_t n, int32_t n_layer,
                           const sl_place_options *o, sl_place_plan *out, sl_error *err);

sl_status sl_place_plan_validate(const sl_place_plan *p, const sl_place_tensor *t, size_t n,
                                 sl_error *err);

/* Writes the plan's summary and/or one line per tensor (parts: SL_PLACE_WRITE_* bits); json:
 * one object (the summary's fields, and a "tensors" array with SL_PLACE_WRITE_TENSORS). */
enum { SL_PLACE_WRITE_SUMMARY = 1, SL_PLACE_WRITE_TENSORS = 2 };
void sl_place_plan_write(FILE *f, const sl_place_plan *p, const sl_place_tensor *t, size_t n,
                         unsigned parts, bool json);

void sl_place_plan_free(sl_place_plan *p);

#endif
