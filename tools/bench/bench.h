/* Benchmarks behind `tools/run bench <name>`: each takes argv after "bench" (argv[0] is the
 * benchmark's name) and returns the exit status. Numbers come from these, never from tests. */
#ifndef SL_CLI_BENCH_H
#define SL_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/cpu/pool.h"
#include "runtime/sluice.h"
#include "tools/common/cli.h"
#include "tools/common/model_flags.h"

int sl_bench_gguf(int argc, char **argv);
int sl_bench_alloc(int argc, char **argv);
int sl_bench_copy(int argc, char **argv);
int sl_bench_swap(int argc, char **argv);
int sl_bench_kernels(int argc, char **argv);
int sl_bench_decode(int argc, char **argv);
int sl_bench_moe(int argc, char **argv);
int sl_bench_compare(int argc, char **argv);
/* bench compare --sweep (bench_sweep.c): bench compare over a seeded sample of MoE shapes. */
int sl_bench_sweep(int argc, char **argv);

/* What decode steps cost the host in device operations, from sl_ctx_stats taken before and
 * after `steps` steps of a model of n_layer layers (sluice.h dev_syncs, dev_calls, copy_bytes):
 * blocking syncs and device calls per layer and step, expert bytes over PCIe per step; and
 * the CPU expert path's GB/s (expert_cpu_bytes / expert_cpu_seconds; per step, see below). */
typedef struct sl_bench_dev_cost {
    double syncs_per_layer, calls_per_layer, pcie_expert_bytes_per_token;
    double cpu_expert_gbps;  /* the CPU expert path's read rate (0: it ran nothing) */
    /* the device executor's steps per layer that ran on the device (sluice.h
     * dev_layer_steps / dev_layers; < 0: no layer ran there) */
    double steps_per_layer;
    /* the kernels those layers launched, per layer (sluice.h dev_layer_launches / dev_layers;
     * < 0: none counted: sim, the CPU) */
    double launches_per_layer;
    /* the steps that ran as one CUDA graph launch (sluice.h graph_passes), as a fraction */
    double graph_passes_per_step;
    /* routed experts' bytes resident on the device beside the host's after the steps
     * (sluice.h hot_bytes: --sched hot_kb / cache_kb + uploads) */
    uint64_t hot_bytes;
} sl_bench_dev_cost;
/* cpu_expert_gbps: the median of cpu_step_gbps[steps]'s positive rates (sl_bench_decode_steps;
 * the array is reordered), else (NULL, none positive) the ratio of the totals: one preempted
 * step of a noisy host moved that ratio from 41 to 102 % of the streaming read run to run (2
 * threads, this VM). */
sl_bench_dev_cost sl_bench_dev_cost_of(const sl_ctx_stats *s0, const sl_ctx_stats *s1,
                                       int64_t steps, int32_t n_layer, double *cpu_step_gbps);
/* Its JSON fields, each after a ',': "syncs_per_layer", "device_calls_per_layer",
 * "pcie_expert_bytes_per_token", "cpu_expert_gbps", "device_steps_per_layer" (null: no layer
 * on the device), "device_launches_per_layer" (null: no kernel counted: sim, the CPU),
 * "graph_passes_per_step", "hot_bytes". */
void sl_bench_dev_cost_json(FILE *f, const sl_bench_dev_cost *c);
/* n greedy one-token steps of c from *tok (left at the last pick): dt[i] each step's seconds,
 * gbps[i] its CPU expert GB/s (0: none ran), from the context's stats between the steps (taken
 * outside the timed calls). Non-zero: a step failed (err says why). */
sl_status sl_bench_decode_steps(sl_ctx *c, int32_t *tok, int32_t n, double *dt, double *gbps,
                                sl_error *err);
/* The decode fields bench moe's and bench decode's rows share, each as ",\"key\":value": the
 * steps (count; mean, median and p90 ms), expert evaluations per step by side, and the
 * fetching scheduler's MoE layer calls per step by mode (null when fetches is false). */
void sl_bench_decode_json(FILE *f, const sl_cli_steps *s, double calls_cpu, double calls_gpu,
                          bool fetches, double mcalls_cpu, double mcalls_post,
                          double mcalls_full);

/* The device executor's steps over `steps` decode steps (--profile: sl_ctx_step_profile taken
 * before and after, n rows each). Invariant: n <= SL_BENCH_STEP_KINDS; n == 0: not profiled. */
enum { SL_BENCH_STEP_KINDS = 32 };
typedef struct sl_bench_step_prof {
    size_t n;
    sl_step_profile p0[SL_BENCH_STEP_KINDS], p1[SL_BENCH_STEP_KINDS];
    int64_t steps;
} sl_bench_step_prof;
/* ",\"KEY\":" then null or [{op, calls_per_token, us_per_token, us_per_call,
 * gap_us_per_token}] for the kinds that ran, the most time first (per token: per `steps`). */
void sl_bench_step_prof_json(FILE *f, const char *key, const sl_bench_step_prof *p);
/* The same as a table under a row, indented, titled `what`; nothing when not profiled. */
void sl_bench_step_prof_print(FILE *f, const char *what, const sl_bench_step_prof *p);

/* The streaming-read roofline (bench_stream.c). The last-level cache's bytes (32 MiB when
 * sysfs does not say); the buffer a roofline reads: max(8 x LLC, 1 GiB). */
size_t sl_bench_llc_bytes(void);
size_t sl_bench_stream_bytes(void);
/* *gbps: the median GB/s of `reps` (1..64) reads of a `bytes` buffer that pool's threads
 * filled (first touch); 0 and an error when memory is short. */
sl_status sl_bench_stream_pool_gbps(sl_cpu_pool *pool, size_t bytes, int reps, double *gbps,
                                    sl_error *err);
/* The same with a pool of mo's threads and binding, sl_bench_stream_bytes(), median of 5;
 * 0 after printing an error. */
double sl_bench_stream_gbps(const sl_model_options *mo, int *threads_out, size_t *mib_out);
/* bytes (rounded up to 2 MiB) 2 MiB-aligned with transparent huge pages asked for, as the host
 * pool maps weights and the roofline maps its buffer: what a benchmark's weights live in, so
 * that its reads and the roofline pay the same TLB costs; under 2 MiB, plain malloc (64 copies
 * of a small matrix would each fault in a whole huge page). NULL when memory is short; free(). */
void *sl_bench_alloc_huge(size_t bytes);

/* A model's bytes by kind (bench_model_bytes.c). Invariant: dense + experts + the whole
 * token_embd == total; experts == gate_up + down; a decode step reads dense + embd_row +
 * experts x n_expert_used / n_expert (embd_row is all of token_embd when the output is tied
 * to it). n_moe_layers: layers with routed experts (counted by their down tensors). */
typedef struct sl_bench_bytes {
    uint64_t total, dense, embd_row, experts, gate_up, down;
    int64_t n_moe_layers;
    bool tied;
} sl_bench_bytes;
/* Reads path's tensor table; prints "sluice CMD: ..." and returns 1 if it cannot. */
int sl_bench_model_bytes(const char *cmd, const char *path, sl_bench_bytes *b);

/* bench decode's --vram-budget row `kind` (bench_decode_budget.c; 0: -ngl, 1: --n-cpu-moe,
 * 2: hot-cold, 3: static hot) under mo->vram_budget: the largest -ngl / smallest --n-cpu-moe
 * whose plan fits (resolved by the placement policy without loading), for hot-cold an index
 * solved from a CPU profile of n_prompt tokens (written into dir), for static hot --cpu-moe
 * (its scheduler string from sl_bench_budget_hot_sched). 0 with *mo and label set; 1 when the
 * kind does not apply or nothing fits (printed unless it does not apply). Rates in GB/s. */
int sl_bench_budget_row(const char *cmd, const char *path, int kind, sl_model_options *mo,
                        const sl_model_info *in, int32_t n_prompt, double cpu_gbs,
                        double gpu_gbs, const char *dir, char *label, size_t cap);
/* The static hot row's scheduler string into buf: mode cpu with the budget mo's plan leaves
 * (device weights and the context's buffers off) as hot_kb, the prompt's n_prompt tokens as
 * the profile (hot_warm). 0, or 1 when nothing is left or buf is too small. */
int sl_bench_budget_hot_sched(const char *path, const sl_model_options *mo,
                              const sl_model_info *in, int32_t n_prompt, char *buf, size_t cap);
/* Removes and frees the index a hot-cold row wrote (no-op otherwise). */
void sl_bench_budget_row_done(sl_model_options *mo);

/* Strict decimal parse of flag `flag` into [lo, hi]; prints the error and returns non-zero. */
int sl_bench_parse_long(const char *s, const char *flag, long lo, long hi, long *out);
/* The current flag's value (sl_cli_value) parsed as above: 0, or 2 after a message. */
int sl_bench_long_value(sl_cli_args *a, long lo, long hi, long *out);

#endif
