/* runtime/engine/cpu_threads: the CPU threads' count and node on the facts of machines this one
 * is not - 16, 4, 3 or 2 CPUs, two sockets with a node named, a CPU list - so every branch of
 * the rule is held here, not only the one this machine takes. */
#include "runtime/engine/cpu_threads.h"
#include "kernels/cpu/pool.h"
#include "tests/testing.h"

typedef struct want {
    int n_threads, numa_node;
} want;

static void check(const char *what, sl__cpu_facts f, want w)
{
    const sl__cpu_plan p = sl__cpu_threads(&f);
    CHECK_MSG(p.n_threads == w.n_threads && p.numa_node == w.numa_node,
              "%s: %d threads on node %d, want %d on %d", what, p.n_threads, p.numa_node,
              w.n_threads, w.numa_node);
}

int main(void)
{
    const sl__cpu_facts open16 = {.online = 16, .numa_node = -1};
    sl__cpu_facts f = open16;
    check("16 CPUs, all open", f, (want){16, -1});
    f.both_sides = true;
    check("16 CPUs, layers on both sides: one left to the device", f, (want){15, -1});
    f.online = 4;
    check("4 CPUs, both sides", f, (want){3, -1});
    f.online = 3;
    check("3 CPUs, both sides: all compute", f, (want){3, -1});
    f.online = 2;
    check("2 CPUs, both sides: all compute", f, (want){2, -1});
    f.online = 0;
    check("CPUs unknown", f, (want){1, -1});
    f = open16;
    f.n_threads = 5;
    f.both_sides = true;
    check("an explicit count is kept beside a device", f, (want){5, -1});
    f.n_threads = SL_CPU_POOL_MAX_THREADS + 9;
    check("an explicit count is clamped", f, (want){SL_CPU_POOL_MAX_THREADS, -1});

    /* two sockets of 8: a node named */
    const sl__cpu_facts node1 = {.online = 16, .numa_node = 1, .node_cpus = 8};
    f = node1;
    check("a named node: its CPUs, bound there", f, (want){8, 1});
    f.both_sides = true;
    check("a named node, both sides", f, (want){7, 1});
    f.n_threads = 12;
    check("a named node and a count: both kept", f, (want){12, 1});
    f = node1;
    f.node_cpus = 0;
    check("a named node whose CPUs are unknown: the CPUs online", f, (want){16, 1});
    f = node1;
    f.cpus_listed = 4;
    check("a CPU list: its CPUs, no node", f, (want){4, -1});
    f.n_threads = 2;
    f.both_sides = true;
    check("a CPU list and a count", f, (want){2, -1});
    f = open16;
    f.node_cpus = 8; /* a node's CPUs without a named node count for nothing */
    check("no node named", f, (want){16, -1});
    return sl_test_finish("cpu_threads_test");
}
