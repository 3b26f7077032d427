/* runtime/engine/cpu_threads.h: how many CPU threads a model's contexts compute with and which
 * NUMA node they are bound to - the one rule, as a function of plain facts so that it can be
 * tested on any machine (runtime/engine/threads.c feeds it a model's).
 *
 * - An explicit thread count is kept (at most SL_CPU_POOL_MAX_THREADS = sluice.h's
 *   SL_N_THREADS_MAX); a CPU list binds the workers to it and, with the count open, counts
 *   its CPUs; the options' NUMA node binds them to it and, with the count open, counts its
 *   CPUs where they are known (else the CPUs online, as before: 16 workers on a node of 8
 *   were the old default). Nothing binds by default: the weights' host pool sits on the GPU's
 *   node of a multi-node machine, but a prefill computes best on every core, a decode on the
 *   node's - not chosen without a measurement.
 * - With the count open, one CPU is left to a device's own host threads when the layers
 *   compute on both sides (cuda: the thread waiting for the logits spins in CUDA's default
 *   sync, and the callback thread runs the host parts), on machines of at least
 *   SL__THREADS_LEAVE_MIN CPUs (on 2 or 3 a core is a third or half of the host's part). */
#ifndef SL_RUNTIME_ENGINE_CPU_THREADS_H
#define SL_RUNTIME_ENGINE_CPU_THREADS_H

#include <stdbool.h>

enum { SL__THREADS_LEAVE_MIN = 4 };

typedef struct sl__cpu_facts {
    int n_threads;    /* the options' (<= 0: open) */
    int cpus_listed;  /* CPUs in the options' CPU list; 0: no list */
    int numa_node;    /* the options' (< 0: none) */
    int node_cpus;    /* CPUs of that node when known (the host pool bound there), else 0 */
    int online;       /* CPUs online (< 1: unknown) */
    bool both_sides;  /* the layers compute on a device and on the host */
} sl__cpu_facts;

typedef struct sl__cpu_plan {
    int n_threads;    /* >= 1 */
    int numa_node;    /* bind the workers to this node; -1: not by node */
} sl__cpu_plan;

sl__cpu_plan sl__cpu_threads(const sl__cpu_facts *f);

#endif
