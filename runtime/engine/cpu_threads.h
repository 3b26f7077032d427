/* runtime/engine/cpu_threads.h: how many CPU threads a model's contexts compute with and which
 * NUMA node they are bound to - the one rule, as a function of plain facts so that it can be
 * tested on any machine (runtime/engine/threads.c feeds it a model's).
 *
 * - An explicit thread count is kept (at most SL_CPU_POOL_MAX_THREADS = sluice.h's
 *   SL_N_THREADS_MAX); a CPU list binds the workers
 *   to it (no node) and, with the count open, counts its CPUs.
 * - Otherwise the pool binds to the options' NUMA node, or where they leave it open to the
 *   node the host pool put the weights on next to the GPU (weights read by cores of another
 *   socket cross the interconnect; not for an explicit count past its CPUs), and with the
 *   count open counts that node's CPUs; without a node, the CPUs online.
 * - With the count left open, one CPU is left to a device's own host threads when the layers
 *   compute on both sides (cuda: the thread waiting for the logits and the callback thread
 *   that runs the host parts), on machines of at least SL__THREADS_LEAVE_MIN CPUs (on 2 or 3 a
 *   core is a third or half of the host's part). */
#ifndef SL_RUNTIME_ENGINE_CPU_THREADS_H
#define SL_RUNTIME_ENGINE_CPU_THREADS_H

#include <stdbool.h>

enum { SL__THREADS_LEAVE_MIN = 4 };

typedef struct sl__cpu_facts {
    int n_threads;    /* the options' (<= 0: open) */
    int cpus_listed;  /* CPUs in the options' CPU list; 0: no list */
    int numa_node;    /* the options' (< 0: open) */
    int online;       /* CPUs online (< 1: unknown) */
    int pool_node;    /* the host pool's node with bindable CPUs (sl_hostpool_placement), or -1 */
    int pool_cpus;    /* its CPUs (> 0 when pool_node >= 0) */
    bool both_sides;  /* the layers compute on a device and on the host */
} sl__cpu_facts;

typedef struct sl__cpu_plan {
    int n_threads;    /* >= 1 */
    int numa_node;    /* bind the workers to this node; -1: not by node */
    bool auto_node;   /* numa_node is the host pool's choice, not the options' (a failed
                         bind then leaves the workers unbound instead of failing) */
} sl__cpu_plan;

sl__cpu_plan sl__cpu_threads(const sl__cpu_facts *f);

#endif
